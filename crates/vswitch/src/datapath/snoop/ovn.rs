//! The snooping pass in an OVN logical switch that snoops (`mcast_snoop=true`;
//! ovn-northd(8), `ls_in_l2_lkup`): IGMP/MLD from a local port is taken in and
//! forwarded nowhere (the chassis writes the memberships to `IGMP_Group`,
//! [`crate::ovn::igmp`]); a frame to a registered group goes to the `Multicast_Group`
//! ovn-northd made of every chassis' members (here, and one copy per chassis with
//! members carrying the group's key), one to an unregistered group to `_MC_static` or
//! nowhere. Tunnelled frames already carry their group's key; frames from the provider
//! network are left to flood.

use std::net::IpAddr;
use std::sync::atomic::Ordering::Relaxed;

use super::{invalid, Look};
use crate::datapath::packet::{Action, Pkt, RxBurst};
use crate::datapath::pipeline::{Pipeline, Source};
use crate::model::domain::DomainId;
use crate::model::lflow::McastOut;
use crate::model::mcast::{Mcast, Member};
use crate::model::ovn::{self, OvnDomain};
use crate::model::stats::{DropReason, PortCounters};

impl Pipeline {
    /// The pass over a classified burst from `src` in OVN logical switch `o`.
    pub(super) fn snoop_ovn<'m, B: RxBurst<'m>>(
        &mut self,
        o: &OvnDomain,
        src: &Source<'_>,
        burst: &B,
        pkts: &[Pkt],
    ) {
        let flooded = |a: &Action| matches!(a, Action::Multicast(_, ovn::MC_FLOOD));
        if src.tep.is_some()
            || o.localnet.is_some_and(|l| l.uplink == src.port.id)
            || !self.actions.iter().any(flooded)
        {
            return;
        }
        let mc = &self.switch.mcast;
        let st = &mut self.snoop;
        st.sets.clear();
        st.targets.clear();
        st.frames.clear();
        let counters = src.port.counters(self.pmd);
        let mut tally = Tally::default();
        let mut now = None;
        let from = Member::Port(src.port.id);
        for (i, p) in pkts.iter().enumerate() {
            let Action::Multicast(d, ovn::MC_FLOOD) = self.actions[i] else {
                continue;
            };
            self.actions[i] = match st.look(mc, burst, p, d, from, &mut now) {
                Look::Skip => continue,
                Look::Query | Look::Report => st.taken_in(d),
                Look::Invalid => invalid(counters),
                Look::Data(group, _) => tally.route(o, d, group),
            };
        }
        tally.count(mc, counters);
    }
}

impl super::Snoop {
    /// Frame `p` of `burst`, which OVN's logical pipeline handed to the chassis
    /// (`igmp`) in domain `src.domain`: an IGMP/MLD message from a local port is
    /// applied to the group database (`mc`), as [`Pipeline::snoop_ovn`] does in a
    /// switch forwarded by the L2 rules; one from a tunnel or the provider network is
    /// not (as there). Returns false when it is malformed (the caller drops it as
    /// `bad_mcast_control`).
    pub(in crate::datapath) fn take_in_lflow<'m, B: RxBurst<'m>>(
        &mut self,
        mc: &Mcast,
        src: &Source<'_>,
        burst: &B,
        p: &Pkt,
    ) -> bool {
        let from_uplink = match src.mode {
            crate::datapath::pipeline::Mode::Ovn(o) => {
                o.localnet.is_some_and(|l| l.uplink == src.port.id)
            }
            _ => true,
        };
        if src.tep.is_some() || from_uplink {
            return true;
        }
        let from = Member::Port(src.port.id);
        !matches!(
            self.look(mc, burst, p, src.domain, from, &mut None),
            Look::Invalid
        )
    }
}

/// A burst's data frames by where the pass (or, in a switch that runs it, OVN's
/// pipeline) sent them.
#[derive(Debug, Default)]
pub(in crate::datapath) struct Tally {
    /// To a registered group.
    forwarded: u64,
    /// Unregistered, to `_MC_static`.
    to_static: u64,
    /// Unregistered, dropped.
    unregistered: u64,
}

impl Tally {
    /// The action of a frame to `group` in switch `o` (domain `d`), tallied.
    #[inline]
    fn route(&mut self, o: &OvnDomain, d: DomainId, group: IpAddr) -> Action {
        match (o.registered(group), o.static_flood) {
            (Some(k), _) => {
                self.forwarded += 1;
                Action::Multicast(d, k)
            }
            (None, Some(k)) => {
                self.to_static += 1;
                Action::Multicast(d, k)
            }
            (None, None) => {
                self.unregistered += 1;
                Action::Drop(DropReason::McastUnregistered)
            }
        }
    }

    /// Tallies a frame the logical pipeline sent as `out` says.
    #[inline]
    pub(in crate::datapath) fn note(&mut self, out: Option<McastOut>) {
        match out {
            Some(McastOut::Registered) => self.forwarded += 1,
            Some(McastOut::Static) => self.to_static += 1,
            None => {}
        }
    }

    /// Adds the tallies to the source port's drops and snooping's counters.
    pub(in crate::datapath) fn count(&self, mc: &Mcast, port: &PortCounters) {
        if self.unregistered > 0 {
            port.drop(DropReason::McastUnregistered, self.unregistered);
        }
        let c = &mc.counters;
        for (counter, n) in [
            (&c.forwarded, self.forwarded),
            (&c.unregistered_to_routers, self.to_static),
        ] {
            if n > 0 {
                counter.fetch_add(n, Relaxed);
            }
        }
    }
}
