//! Classification: each frame's action, through the flow cache (last-flow check, then
//! the exact-match cache, then the slow path), and source MAC learning.
//!
//! The slow path decides from the flow key and the configuration only (domain
//! admission, the port's ingress ACL, the FDB), so its whole decision can be cached for
//! the key until the generation changes (any topology edit or FDB change).

use flowcache::FlowKey;

use super::packet::{Action, Decision, Pkt, RxBurst, BURST, NO_LEARN, NO_RULE};
use super::pipeline::Pipeline;
use super::pipeline::{Mode, Source};
use crate::model::acl;
use crate::model::fdb::{fdb_key, Dest, FdbReader};
use crate::model::ovn::{self, OvnDomain};
use crate::model::stats::DropReason;
use crate::switch::topology::Topology;

/// Bytes of each frame read for its flow key: Ethernet, two VLAN tags, IPv6 with
/// extension headers, and the L4 ports.
pub const KEY_BYTES: usize = 128;

impl Pipeline {
    /// Decides every frame's action into `self.actions` (one per frame of `pkts`) and
    /// learns source MACs.
    pub(super) fn classify<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        let counters = src.port.counters(self.pmd);
        // The generation is read before the state it covers (topology, FDB), so a
        // decision is never cached under a generation newer than the state it was made
        // from.
        let generation = topo.generation + self.switch.fdb.generation();
        let acl = &src.acl.rules;
        let l2_only = acl.is_empty();
        let fdb = self.switch.fdb.reader();
        self.learns.clear();
        self.actions.clear();
        let mut rx_bytes = 0u64;
        let mut rx_packets = 0u64;
        // The last source MAC observed in the burst, and whether it could be learned.
        let mut last_learn = NO_LEARN;
        let mut last_admitted = true;
        // With the cache, every key is extracted and hashed first and its EMC entry
        // prefetched, so the burst's cache misses overlap; the decisions follow.
        // (Bursts never exceed BURST; the bound only keeps the arrays below in range.)
        let cached = self.use_cache && !l2_only && pkts.len() <= BURST;
        let mut keys = [FlowKey::default(); BURST];
        // Each frame's first bytes, copied from where it lies. One buffer for the burst:
        // only the bytes just read (`..n`) are ever looked at.
        let mut hdr = [0u8; KEY_BYTES];
        if cached {
            for (i, p) in pkts.iter_mut().enumerate() {
                // The first 64 bytes first (the common IPv4 key needs 40), in one copy
                // whose stores `extract_ipv4_l4`'s loads can be forwarded from; the rest
                // only for the general parser.
                let want = (p.len as usize).min(KEY_BYTES);
                let first = want.min(64);
                let n = burst.read(p, 0, &mut hdr[..first]);
                if n < 14 {
                    // Left unhashed: a runt, dropped below.
                    continue;
                }
                keys[i] = match FlowKey::extract_ipv4_l4(&hdr[..n], src.in_port, None) {
                    Some(k) => k,
                    None => {
                        let n = if n == first && want > first {
                            first + burst.read(p, first as u32, &mut hdr[first..want])
                        } else {
                            n
                        };
                        FlowKey::extract(&hdr[..n], src.in_port, None)
                    }
                };
                p.hash = keys[i].flow_hash();
                p.hashed = true;
                self.cache.prefetch_bucket(p.hash);
            }
            for p in pkts.iter() {
                self.cache.prefetch_entry(p.hash);
            }
        }
        // The previous classified frame of the burst (`usize::MAX`: none yet) and its
        // decision, for the last-flow check. Two plain variables rather than an
        // `Option<(usize, Decision)>`, which the compiler kept in memory and rebuilt from
        // differently sized pieces each packet (a stalled store-to-load forward).
        let mut last = usize::MAX;
        let mut last_d = Decision {
            action: Action::Drop(DropReason::Runt),
            rule: NO_RULE,
            learn: NO_LEARN,
        };
        // Without the cache: the previous decided frame's Ethernet header.
        let mut last_eth = [0u8; 14];
        for i in 0..pkts.len() {
            // Borrowed, not copied: a copy in hand is written back as one wide store
            // whose load of the just-made decision waits for its pieces.
            let p = &pkts[i];
            let d = if cached {
                if !p.hashed {
                    counters.drop(DropReason::Runt, 1);
                    self.actions.push(Action::Drop(DropReason::Runt));
                    continue;
                }
                rx_packets += 1;
                rx_bytes += u64::from(p.len);
                let (key, hash) = (&keys[i], p.hash);
                let d = if last != usize::MAX && pkts[last].hash == hash && keys[last] == *key {
                    self.cache.stats_mut().last_flow_hits += 1;
                    last_d
                } else {
                    match self.cache.lookup(key, hash, generation) {
                        Some(d) => *d,
                        None => {
                            let d = slow_path(src, key, &fdb, acl);
                            self.cache.insert(key, hash, d, generation);
                            d
                        }
                    }
                };
                last = i;
                last_d = d;
                d
            } else {
                // Without ACL rules the slow path is the FDB alone: the Ethernet header
                // is all it needs, and two FDB lookups cost less than building a flow
                // key, so such ports skip the flow cache (it exists to skip expensive
                // slow paths).
                let want = if l2_only {
                    14
                } else {
                    (p.len as usize).min(KEY_BYTES)
                };
                let n = burst.read(p, 0, &mut hdr[..want]);
                if n < 14 {
                    counters.drop(DropReason::Runt, 1);
                    self.actions.push(Action::Drop(DropReason::Runt));
                    continue;
                }
                rx_packets += 1;
                rx_bytes += u64::from(p.len);
                if l2_only {
                    // The decision depends on the MACs and the tag alone (and on the FDB,
                    // read-locked for the burst): a frame with the Ethernet header of the
                    // previous one reuses its decision, so a burst of one flow, or of
                    // many flows between two MACs, costs one FDB decision.
                    let eth: [u8; 14] = [
                        hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5], hdr[6], hdr[7], hdr[8],
                        hdr[9], hdr[10], hdr[11], hdr[12], hdr[13],
                    ];
                    if last != usize::MAX && eth == last_eth {
                        self.cache.stats_mut().last_flow_hits += 1;
                        last_d
                    } else {
                        let ethertype = u16::from_be_bytes([hdr[12], hdr[13]]);
                        let dmac: [u8; 6] = [hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5]];
                        let smac: [u8; 6] = [hdr[6], hdr[7], hdr[8], hdr[9], hdr[10], hdr[11]];
                        let tagged = ethertype == 0x8100 || ethertype == 0x88a8;
                        let d = l2_decide(src, &smac, &dmac, tagged, &fdb);
                        last = i;
                        last_eth = eth;
                        last_d = d;
                        d
                    }
                } else {
                    let key = FlowKey::extract(&hdr[..n], src.in_port, None);
                    slow_path(src, &key, &fdb, acl)
                }
            };
            let mut action = d.action;
            if d.learn != NO_LEARN {
                if d.learn != last_learn {
                    last_learn = d.learn;
                    last_admitted = true;
                    if let Some(l) = fdb.observe(d.learn, src.learn, src.mac_limit) {
                        last_admitted = fdb.admits(&l, self.learns.len());
                        if last_admitted && !self.learns.contains(&l) {
                            self.learns.push(l);
                        }
                    }
                }
                if !last_admitted {
                    // A new MAC past the table's or the port's limit: dropped, or its
                    // replies would be flooded for as long as it talks.
                    action = Action::Drop(DropReason::MacLimit);
                }
            }
            if let Action::Drop(r) = action {
                counters.drop(r, 1);
                if d.rule != NO_RULE {
                    src.acl.count_drop(self.pmd, d.rule);
                }
            }
            self.actions.push(action);
        }
        drop(fdb);
        counters.rx_packets.add(rx_packets);
        counters.rx_bytes.add(rx_bytes);
        if !self.learns.is_empty() {
            self.switch.fdb.learn(&self.learns);
        }
        self.mirror_cache_stats();
        self.snoop(topo, src, burst, pkts);
    }

    /// Mirrors the flow cache's statistics into the PMD's shared counters.
    fn mirror_cache_stats(&self) {
        let s = self.cache.stats();
        let m = &self.shared.cache_stats;
        for (c, v) in m.iter().zip([
            s.last_flow_hits,
            s.emc_hits,
            s.misses,
            s.stale_misses,
            s.insertions,
            s.evictions,
        ]) {
            c.add(v.wrapping_sub(c.get()));
        }
    }

    /// Computes frame `p`'s flow hash if classification did not (a destination spreads
    /// frames over its queues by it).
    pub(super) fn ensure_hash<'m, B: RxBurst<'m>>(&self, src: &Source<'_>, burst: &B, p: &mut Pkt) {
        if p.hashed {
            return;
        }
        let mut hdr = [0u8; KEY_BYTES];
        let n = burst.read(p, 0, &mut hdr[..(p.len as usize).min(KEY_BYTES)]);
        p.hash = FlowKey::extract(&hdr[..n], src.in_port, None).flow_hash();
        p.hashed = true;
    }
}

/// The slow path: domain admission, the ingress ACL, then the FDB. Decides from the
/// flow key and the configuration only, so the decision can be cached for the key.
pub fn slow_path(src: &Source<'_>, key: &FlowKey, fdb: &FdbReader<'_>, acl: &acl::Acl) -> Decision {
    if src.domain_key.is_access() && key.vlan_tci().is_some() {
        return l2_decide(src, &key.eth_src(), &key.eth_dst(), true, fdb);
    }
    let verdict = acl.classify(key);
    if verdict.action == acl::Action::Drop {
        return Decision {
            action: Action::Drop(DropReason::Acl),
            rule: verdict
                .rule
                .map_or(NO_RULE, |r| r.min(usize::from(NO_RULE - 1)) as u16),
            learn: NO_LEARN,
        };
    }
    l2_decide(src, &key.eth_src(), &key.eth_dst(), false, fdb)
}

/// The L2 decision: domain admission (`tagged`: the frame carries an 802.1Q/802.1ad
/// tag, refused on an access port), source learning, and the destination from the FDB
/// (flood for group and unknown MACs).
#[inline]
pub fn l2_decide(
    src: &Source<'_>,
    smac: &[u8; 6],
    dmac: &[u8; 6],
    tagged: bool,
    fdb: &FdbReader<'_>,
) -> Decision {
    if tagged && src.domain_key.is_access() {
        return drop_for(DropReason::VlanTagged);
    }
    if let Some(cfg) = src.security {
        if !cfg.permits_source(smac) {
            return drop_for(DropReason::SpoofedSource);
        }
    }
    match src.mode {
        Mode::Learn => {}
        Mode::Ovn(o) => return ovn_decide(src, o, smac, dmac, fdb),
        Mode::Detached => return drop_for(DropReason::OvnUnbound),
    }
    let learn = if smac[0] & 1 == 0 {
        fdb_key(src.domain, smac)
    } else {
        NO_LEARN
    };
    let action = if dmac[0] & 1 != 0 {
        Action::Flood(src.domain)
    } else {
        match fdb.lookup(fdb_key(src.domain, dmac)) {
            Some(d) if d == src.learn => Action::Drop(DropReason::SamePort),
            Some(Dest::Port(port)) => Action::Output(port),
            // A tunnelled frame never goes back into a tunnel (split horizon).
            Some(Dest::Remote(_)) if src.tep.is_some() => Action::Drop(DropReason::SplitHorizon),
            Some(Dest::Remote(r)) => Action::Encap(r, 0),
            // OVN's destinations live only in OVN domains.
            Some(Dest::RemotePort { .. } | Dest::Multi(_) | Dest::Router) => {
                Action::Drop(DropReason::NoDestination)
            }
            None => Action::Flood(src.domain),
        }
    };
    Decision {
        action,
        rule: NO_RULE,
        learn,
    }
}

/// A drop decision for `reason`.
#[inline]
fn drop_for(reason: DropReason) -> Decision {
    Decision {
        action: Action::Drop(reason),
        rule: NO_RULE,
        learn: NO_LEARN,
    }
}

/// The L2 decision in OVN logical switch `o` (the source admitted): source MACs
/// learned only from local ports with `unknown` addresses and no port security (OVN's
/// `ls_in_put_fdb`); a known MAC's port, here or on another chassis (through the
/// provider network's uplink when the switch has one, else a tunnel); broadcast and
/// multicast to `_MC_flood`; unknown unicast to `_MC_unknown` when a port of the switch
/// has `unknown` addresses, else dropped (as OVN's `ls_in_l2_unknown` stage does).
#[inline]
fn ovn_decide(
    src: &Source<'_>,
    o: &OvnDomain,
    smac: &[u8; 6],
    dmac: &[u8; 6],
    fdb: &FdbReader<'_>,
) -> Decision {
    let learn = if src.tep.is_none() && smac[0] & 1 == 0 && o.learns(src.ovn_key) {
        fdb_key(src.domain, smac)
    } else {
        NO_LEARN
    };
    let action = if dmac[0] & 1 != 0 {
        Action::Multicast(src.domain, ovn::MC_FLOOD)
    } else {
        match fdb.lookup(fdb_key(src.domain, dmac)) {
            Some(d) if d == src.learn => Action::Drop(DropReason::SamePort),
            Some(Dest::Port(p)) => Action::Output(p),
            // A provider network reaches the port's chassis itself; a frame from it
            // to another chassis' port is not this chassis' to deliver.
            Some(Dest::RemotePort { .. }) if src.tep.is_none() && o.localnet.is_some() => {
                match o.localnet {
                    Some(l) if l.uplink != src.port.id => Action::Output(l.uplink),
                    _ => Action::Drop(DropReason::SplitHorizon),
                }
            }
            Some(Dest::RemotePort { remote, key }) if src.tep.is_none() => {
                Action::Encap(remote, key)
            }
            Some(Dest::RemotePort { .. } | Dest::Remote(_)) => {
                Action::Drop(DropReason::SplitHorizon)
            }
            Some(Dest::Multi(key)) if src.tep.is_none() => Action::Multicast(src.domain, key),
            Some(Dest::Multi(_)) => Action::Drop(DropReason::SplitHorizon),
            Some(Dest::Router) => Action::Drop(DropReason::OvnRouterUnsupported),
            None if o.has_unknown => Action::Multicast(src.domain, ovn::MC_UNKNOWN),
            None => Action::Drop(DropReason::OvnUnknownUnicast),
        }
    };
    Decision {
        action,
        rule: NO_RULE,
        learn,
    }
}
