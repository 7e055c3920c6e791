//! Multicast snooping in the data path (RFC 4541): after classification, the frames a
//! VLAN or VNI domain would flood whose destination is an IP multicast group are
//! looked at once more.
//! - IGMP and MLD messages update the group database ([`crate::model::mcast`]).
//!   Queries flood, as before, and make their port a multicast-router port. Reports
//!   and leaves go to router ports only, and (from a local port) to the VNI's remote
//!   endpoints, whose own snooping then learns this host as a member. Malformed ones
//!   are dropped and counted (`bad_mcast_control`).
//! - Frames to a registered group go to its members (whose source filter admits the
//!   sender) and to router ports; to an unregistered group they flood, or go to router
//!   ports only (`--mcast-flood-unregistered off`). Link-local groups always flood.
//!
//! - In an OVN logical switch that snoops, the pass follows OVN's rules instead
//!   (`ovn`).
//!
//! The flow cache never holds these decisions: the cached one stays "flood", and this
//! pass refines it per burst, so a membership change needs no cache invalidation.
//! Frames that are not flooded cost one scan of the burst's actions.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

mod ovn;

pub(super) use ovn::Tally;

use super::forward::Target;
use super::packet::{Action, Pkt, RxBurst};
use super::pipeline::{Mode, Pipeline, Source};
use crate::model::domain::DomainId;
use crate::model::fdb::Dest;
use crate::model::mcast::{Mcast, Member};
use crate::model::stats::{DropReason, PortCounters};
use crate::switch::topology::Topology;

/// Longest IGMP/MLD frame read whole (a larger one is dropped as malformed: reports
/// are at most an MTU).
const MAX_CONTROL_FRAME: usize = 9216;

/// Bytes read to tell what a multicast frame is: Ethernet, two VLAN tags, the IPv6
/// header.
const PEEK: usize = 14 + 8 + 40;

/// The snooping pass's per-burst state (reused across bursts).
#[derive(Debug, Default)]
pub struct Snoop {
    /// An IGMP/MLD frame being parsed.
    frame: Vec<u8>,
    members: Vec<Member>,
    /// Target sets made in this burst: what they are for, `start, len` in `targets`
    /// (`len` [`FLOODS`]: the frames flood), and which counter their frames count in.
    sets: Vec<(SetKey, u32, u32, Outcome)>,
    /// The sets' destinations.
    targets: Vec<Target>,
    /// Frames of this burst sent by each set.
    frames: Vec<u64>,
}

/// The `len` of a target set whose frames flood.
const FLOODS: u32 = u32::MAX;

/// Which of snooping's frame counters a target set's frames count in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// To a registered group's members and router ports.
    Forwarded,
    /// Unregistered, flooded.
    Flooded,
    /// Unregistered, to router ports only.
    ToRouters,
    /// A report or leave.
    Report,
}

/// What a target set is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetKey {
    /// Reports and leaves in a domain.
    Reports(DomainId),
    /// Frames from `source` to `group` in a domain.
    Group(DomainId, IpAddr, IpAddr),
}

impl Snoop {
    /// Whether set `k` is a domain's reports' (reaching no port is no drop: the switch
    /// itself took them in).
    #[inline]
    pub fn is_report(&self, k: u16) -> bool {
        self.sets[usize::from(k)].3 == Outcome::Report
    }

    /// The destinations of set `k` (of [`Action::Snooped`]).
    #[inline]
    pub fn targets(&self, k: u16) -> &[Target] {
        let (_, s, n, _) = self.sets[usize::from(k)];
        &self.targets[s as usize..(s + n) as usize]
    }
}

/// What a frame to a multicast MAC carries.
enum Seen {
    /// Not IP multicast to a group snooping handles (or too short to tell): left alone.
    Other,
    /// IGMP, or IPv6 that may be MLD, at this offset; otherwise data from/to these.
    Control(usize, IpAddr, IpAddr),
    /// Data from the first address to the group.
    Data(IpAddr, IpAddr),
}

/// Reads what an Ethernet frame to a multicast MAC is from its first [`PEEK`] bytes.
fn inspect(h: &[u8]) -> Seen {
    let ip4_mac = h.len() >= 6 && h[..3] == [0x01, 0x00, 0x5e] && h[3] & 0x80 == 0;
    let ip6_mac = h.len() >= 6 && h[..2] == [0x33, 0x33];
    if !ip4_mac && !ip6_mac {
        return Seen::Other;
    }
    let mut l3 = 12;
    while h.len() >= l3 + 2 && matches!([h[l3], h[l3 + 1]], [0x81, 0x00] | [0x88, 0xa8]) && l3 < 20
    {
        l3 += 4;
    }
    let ethertype = h.get(l3..l3 + 2).map(|t| [t[0], t[1]]);
    l3 += 2;
    match ethertype {
        Some([0x08, 0x00]) if h.len() >= l3 + 20 && h[l3] >> 4 == 4 => {
            let src = Ipv4Addr::new(h[l3 + 12], h[l3 + 13], h[l3 + 14], h[l3 + 15]);
            let dst = Ipv4Addr::new(h[l3 + 16], h[l3 + 17], h[l3 + 18], h[l3 + 19]);
            classify(l3, h[l3 + 9] == 2, src.into(), dst.into())
        }
        Some([0x86, 0xdd]) if h.len() >= l3 + 40 && h[l3] >> 4 == 6 => {
            let addr = |o: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&h[l3 + o..l3 + o + 16]);
                IpAddr::V6(Ipv6Addr::from(a))
            };
            // MLD rides on ICMPv6 behind a Hop-by-Hop header (RFC 2710 §3).
            let maybe_mld = matches!(h[l3 + 6], 0 | 58);
            classify(l3, maybe_mld, addr(8), addr(24))
        }
        _ => Seen::Other,
    }
}

fn classify(l3: usize, control: bool, src: IpAddr, dst: IpAddr) -> Seen {
    if !dst.is_multicast() {
        Seen::Other
    } else if control {
        Seen::Control(l3, src, dst)
    } else if mcsnoop::is_link_local(dst) {
        Seen::Other
    } else {
        Seen::Data(src, dst)
    }
}

impl Pipeline {
    /// The snooping pass over a classified burst (see the module's documentation).
    pub(super) fn snoop<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        burst: &B,
        pkts: &[Pkt],
    ) {
        if let Mode::Ovn(o) = src.mode {
            if o.snoop {
                self.snoop_ovn(o, src, burst, pkts);
            }
            return;
        }
        let mc = &self.switch.mcast;
        if !mc.snooping
            || !matches!(src.mode, Mode::Learn)
            || !self.actions.iter().any(|a| matches!(a, Action::Flood(_)))
        {
            return;
        }
        let st = &mut self.snoop;
        st.sets.clear();
        st.targets.clear();
        st.frames.clear();
        let from = match src.learn {
            Dest::Remote(r) => Member::Remote(r),
            _ => Member::Port(src.port.id),
        };
        let counters = src.port.counters(self.pmd);
        let mut now = None;
        for (i, p) in pkts.iter().enumerate() {
            let Action::Flood(d) = self.actions[i] else {
                continue;
            };
            let (group, source) = match st.look(mc, burst, p, d, from, &mut now) {
                Look::Skip | Look::Query => continue,
                Look::Report => {
                    self.actions[i] = st.set(topo, src, mc, SetKey::Reports(d));
                    continue;
                }
                Look::Invalid => {
                    self.actions[i] = invalid(counters);
                    continue;
                }
                Look::Data(g, s) => (g, s),
            };
            self.actions[i] = st.set(topo, src, mc, SetKey::Group(d, group, source));
        }
        st.count(mc);
    }
}

/// What a frame a domain would flood turned out to be ([`Snoop::look`]).
enum Look {
    /// Not IP multicast to a group snooping handles (or link-local): left alone.
    Skip,
    /// An IGMP/MLD query, applied.
    Query,
    /// An IGMP/MLD report or leave, applied.
    Report,
    /// A malformed IGMP/MLD message.
    Invalid,
    /// Data to the group (first) from the source (second).
    Data(IpAddr, IpAddr),
}

/// The action of a malformed IGMP/MLD message, counted on the port it came from.
fn invalid(counters: &PortCounters) -> Action {
    counters.drop(DropReason::BadMcastControl, 1);
    Action::Drop(DropReason::BadMcastControl)
}

impl Snoop {
    /// Reads frame `p` of `burst`, flooded in domain `d` from `from`: an IGMP/MLD
    /// message is applied to the group database (at `now`, read from the clock once
    /// per burst).
    fn look<'m, B: RxBurst<'m>>(
        &mut self,
        mc: &Mcast,
        burst: &B,
        p: &Pkt,
        d: DomainId,
        from: Member,
        now: &mut Option<Instant>,
    ) -> Look {
        let mut h = [0u8; PEEK];
        let n = burst.read(p, 0, &mut h);
        match inspect(&h[..n]) {
            Seen::Other => Look::Skip,
            Seen::Data(s, g) => Look::Data(g, s),
            Seen::Control(l3, s, g) => {
                let now = *now.get_or_insert_with(Instant::now);
                match self.control(mc, burst, p, l3, d, from, now) {
                    Control::Query => Look::Query,
                    Control::Report => Look::Report,
                    Control::Invalid => Look::Invalid,
                    Control::Data if mcsnoop::is_link_local(g) => Look::Skip,
                    Control::Data => Look::Data(g, s),
                }
            }
        }
    }
}

/// What an IGMP/MLD candidate turned out to be.
enum Control {
    Query,
    Report,
    Invalid,
    /// IPv6 that is not MLD after all: a data frame.
    Data,
}

impl Snoop {
    /// Parses the IGMP/MLD candidate `p` (its IP header at `l3`) and applies it.
    #[allow(clippy::too_many_arguments)]
    fn control<'m, B: RxBurst<'m>>(
        &mut self,
        mc: &Mcast,
        burst: &B,
        p: &Pkt,
        l3: usize,
        d: DomainId,
        from: Member,
        now: Instant,
    ) -> Control {
        let len = p.len as usize;
        if len > MAX_CONTROL_FRAME {
            mc.counters.invalid.fetch_add(1, Relaxed);
            return Control::Invalid;
        }
        self.frame.resize(len, 0);
        let n = burst.read(p, 0, &mut self.frame[..len]);
        match mcsnoop::parse(self.frame.get(l3..n).unwrap_or(&[])) {
            Ok(None) => Control::Data,
            Err(_) => {
                mc.counters.invalid.fetch_add(1, Relaxed);
                Control::Invalid
            }
            Ok(Some(msg)) => {
                mc.snoop(d, from, &msg, now);
                if matches!(msg, mcsnoop::Message::Query { .. }) {
                    Control::Query
                } else {
                    Control::Report
                }
            }
        }
    }

    /// The action sending a frame to the targets of `key` (made once per burst):
    /// [`Action::Snooped`], or [`Action::Flood`] for an unregistered group that floods.
    fn set(&mut self, topo: &Topology, src: &Source<'_>, mc: &Mcast, key: SetKey) -> Action {
        let d = match key {
            SetKey::Reports(d) | SetKey::Group(d, ..) => d,
        };
        if let Some(k) = self.sets.iter().position(|s| s.0 == key) {
            self.frames[k] += 1;
            return if self.sets[k].2 == FLOODS {
                Action::Flood(d)
            } else {
                Action::Snooped(d, k as u16)
            };
        }
        self.frames.push(1);
        self.members.clear();
        let registered = {
            let mdb = mc.read();
            let registered = match key {
                SetKey::Reports(_) => true,
                SetKey::Group(d, g, s) => mdb.members(d, g, s, &mut self.members),
            };
            self.members.extend(mdb.routers(d));
            registered
        };
        if !registered && mc.flood_unregistered {
            self.sets.push((key, 0, FLOODS, Outcome::Flooded));
            return Action::Flood(d);
        }
        let outcome = match (key, registered) {
            (SetKey::Group(..), true) => Outcome::Forwarded,
            (SetKey::Group(..), false) => Outcome::ToRouters,
            (SetKey::Reports(_), _) => Outcome::Report,
        };
        if let SetKey::Reports(d) = key {
            if src.tep.is_none() {
                let remotes = topo.tunnels.flood_of(d);
                self.members
                    .extend(remotes.iter().map(|&r| Member::Remote(r)));
            }
        }
        let start = self.targets.len();
        for &m in &self.members {
            match m {
                Member::Port(p)
                    if p != src.port.id
                        && topo
                            .port(p)
                            .is_some_and(|tp| tp.domain == d && tp.port.can_flood()) =>
                {
                    self.targets.push(Target::port(p));
                }
                // A tunnelled frame never goes back into a tunnel (split horizon).
                Member::Remote(r) if src.tep.is_none() => self.targets.push(Target::remote(r, 0)),
                _ => {}
            }
        }
        self.targets[start..].sort_unstable_by_key(|t| t.raw());
        let mut n = start;
        for k in start..self.targets.len() {
            if n == start || self.targets[n - 1] != self.targets[k] {
                self.targets[n] = self.targets[k];
                n += 1;
            }
        }
        self.targets.truncate(n);
        self.sets
            .push((key, start as u32, (n - start) as u32, outcome));
        Action::Snooped(d, (self.sets.len() - 1) as u16)
    }

    /// The action of an IGMP/MLD message the switch took in and forwards nowhere (an
    /// OVN logical switch's): an empty report set of domain `d`, made once per burst.
    fn taken_in(&mut self, d: DomainId) -> Action {
        let key = SetKey::Reports(d);
        let k = match self.sets.iter().position(|s| s.0 == key) {
            Some(k) => k,
            None => {
                let start = self.targets.len() as u32;
                self.sets.push((key, start, 0, Outcome::Report));
                self.frames.push(0);
                self.sets.len() - 1
            }
        };
        self.frames[k] += 1;
        Action::Snooped(d, k as u16)
    }

    /// Adds the burst's frames to snooping's frame counters.
    fn count(&self, mc: &Mcast) {
        let c = &mc.counters;
        for (&(_, _, _, outcome), &n) in self.sets.iter().zip(&self.frames) {
            let counter = match outcome {
                Outcome::Forwarded => &c.forwarded,
                Outcome::Flooded => &c.flooded_unregistered,
                Outcome::ToRouters => &c.unregistered_to_routers,
                Outcome::Report => continue,
            };
            counter.fetch_add(n, Relaxed);
        }
    }
}
