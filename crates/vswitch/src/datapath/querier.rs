//! The snooping querier (`--mcast-querier on`): on a segment without a multicast router,
//! nobody asks receivers to report again, and their memberships would age out while
//! they still listen. Like Open vSwitch's and the Linux bridge's queriers, the switch
//! then sends general queries itself: every `--mcast-query-interval`, an IGMPv3
//! (RFC 3376 §4.1) and an MLDv2 (RFC 3810 §5.1) general query out of every port of
//! each VLAN and VNI domain (or those `--mcast-querier-domains` names) in which no other
//! querier (no multicast-router port) is known. Each host's switch queries its own
//! ports, so nothing goes into tunnels.
//!
//! The housekeeping thread says when a round is due ([`crate::model::mcast::Mcast`]);
//! PMD 0 sends it between bursts, because only PMDs transmit on ports.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering::Relaxed;

use super::packet::{FrameLoc, Pkt, TxBatch, TxItem};
use super::pipeline::{Mode, Pipeline};
use crate::ports::host::HostFrames;
use crate::switch::topology::Topology;

/// The querier's source MAC (locally administered, "vs").
pub const QUERIER_MAC: [u8; 6] = [0x02, 0x76, 0x73, 0x00, 0x00, 0x01];
/// The IGMP queries' source address: 0.0.0.0, as RFC 4541 §2.1.1 allows a snooping
/// switch's proxy querier (and the Linux bridge's querier uses by default).
pub const QUERIER_IPV4: Ipv4Addr = Ipv4Addr::UNSPECIFIED;
/// The MLD queries' source: the link-local address of [`QUERIER_MAC`] (modified
/// EUI-64); MLDv2 hosts ignore queries from any other kind of address (RFC 3810 §5.1.14).
pub const QUERIER_IPV6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0076, 0x73ff, 0xfe00, 0x0001);

impl Pipeline {
    /// Sends one round of general queries if the housekeeping asked for one.
    pub(super) fn query_if_due(&mut self, topo: &Topology) {
        let Some(interval) = self.switch.mcast.querier else {
            return;
        };
        if !self.switch.mcast.take_query_due() {
            return;
        }
        let sw = self.switch.clone();
        let mc = &sw.mcast;
        // Hosts answer within the query's maximum response time: 10 s (RFC 3376's
        // default), or the interval when that is shorter.
        let max_resp = interval.min(std::time::Duration::from_secs(10));
        let frames = [
            mcsnoop::igmp_general_query(QUERIER_MAC, QUERIER_IPV4, max_resp),
            mcsnoop::mld_general_query(QUERIER_MAC, QUERIER_IPV6, max_resp),
        ];
        for d in 0..sw.domains.len() as crate::model::domain::DomainId {
            let Some(key) = sw.domains.key(d) else {
                continue;
            };
            if !matches!(Mode::of(topo, d, key), Mode::Learn)
                || !(mc.querier_domains.is_empty() || mc.querier_domains.contains(&key.to_string()))
                || mc.read().routers(d).next().is_some()
            {
                continue;
            }
            for f in &frames {
                self.flood_local(topo, d, f);
            }
            mc.counters.queries_sent.fetch_add(1, Relaxed);
        }
    }

    /// Sends `frame` out of every port of domain `d` whose link can take it.
    fn flood_local(&mut self, topo: &Topology, d: crate::model::domain::DomainId, frame: &[u8]) {
        // SAFETY: `frame` is borrowed for the whole function, stays mapped and is
        // written by no one while the burst reads it.
        let burst = unsafe { HostFrames::new(frame.as_ptr(), frame.len(), &[]) };
        let pkts = [Pkt {
            loc: FrameLoc {
                head: 0,
                start: 0,
                end: 0,
            },
            len: frame.len() as u32,
            ..Pkt::default()
        }];
        let items = [TxItem::Whole { pkt: 0 }];
        for &p in topo.domain_ports(d) {
            let Some(dst) = topo.port(p).map(|tp| &tp.port) else {
                continue;
            };
            if !dst.can_flood() {
                continue;
            }
            let batch = TxBatch {
                burst: &burst,
                pkts: &pkts,
                items: &items,
                soft: &[],
                merged: &[],
                parts: &[],
                src_queue: 0,
                pmd: self.pmd,
                streaming: false,
                _mem: std::marker::PhantomData,
            };
            dst.transmit(&batch, &mut self.tx);
        }
    }
}
