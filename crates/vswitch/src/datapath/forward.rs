//! Forwarding: the burst grouped by destination once (a local port, or a remote tunnel
//! endpoint), flooded frames expanded to their domain's ports and (head-end
//! replication) its VNI's remotes, software offloads done per destination, and one
//! transmit batch per destination.

use super::packet::{Action, Pkt, RxBurst, TxBatch, TxItem, TxPlan, BURST};
use super::pipeline::{Pipeline, Source};
use crate::model::domain::DomainId;
use crate::model::fdb::PortId;
use crate::model::stats::DropReason;
use crate::model::tunnel::RemoteId;
use crate::switch::topology::Topology;

/// Destinations of one burst from which its copies into guests bypass the cache: a
/// frame replicated to many guests writes more buffer memory per burst than the
/// caches hold.
const STREAM_FANOUT: usize = 8;

/// A destination of a burst's frames: a local port, or a remote tunnel endpoint with
/// the egress key of OVN's option (0: none). Packed in one word, so grouping a burst
/// compares one integer per frame ([`Target::kind`] unpacks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target(u64);

/// What a [`Target`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// A local port.
    Port(PortId),
    /// A remote tunnel endpoint, with the egress key of OVN's option (0: none).
    Remote(RemoteId, u16),
    /// A tunnel the logical pipeline chose (VNI and both keys of OVN's option), by its
    /// index in the burst's [`super::lflow::Lflow::tunnels`].
    Tunnel(u32),
    /// A provider network's uplink, with the VLAN its frames carry there (0: none),
    /// as the logical pipeline chose it: the network of the destination switch, not
    /// of the source's.
    Uplink(PortId, u16),
}

impl Target {
    /// Set for remotes: bits 16..32 the remote, 0..16 the egress key.
    const REMOTE: u64 = 1 << 32;
    /// Set for the logical pipeline's tunnels: bits 0..32 the index.
    const TUNNEL: u64 = 1 << 33;
    /// Set for the logical pipeline's uplinks: bits 16..28 the VLAN, 0..16 the port.
    const UPLINK: u64 = 1 << 34;

    /// Uplink `p`, its frames tagged `vlan` (0: untagged).
    #[inline]
    pub fn uplink(p: PortId, vlan: u16) -> Self {
        Target(Self::UPLINK | u64::from(vlan & 0x0fff) << 16 | u64::from(p))
    }

    /// The logical pipeline's tunnel `i` of this burst.
    #[inline]
    pub fn tunnel(i: u32) -> Self {
        Target(Self::TUNNEL | u64::from(i))
    }

    /// Local port `p`.
    #[inline]
    pub fn port(p: PortId) -> Self {
        Target(u64::from(p))
    }

    /// Remote `r`, with OVN egress key `egress` (0: none).
    #[inline]
    pub fn remote(r: RemoteId, egress: u16) -> Self {
        Target(Self::REMOTE | u64::from(r) << 16 | u64::from(egress))
    }

    /// The packed word (an order for sorting and deduplicating targets).
    #[inline]
    pub fn raw(self) -> u64 {
        self.0
    }

    /// What the target is.
    #[inline]
    pub fn kind(self) -> TargetKind {
        if self.0 & Self::TUNNEL != 0 {
            TargetKind::Tunnel(self.0 as u32)
        } else if self.0 & Self::UPLINK != 0 {
            TargetKind::Uplink(self.0 as PortId, (self.0 >> 16) as u16 & 0x0fff)
        } else if self.0 & Self::REMOTE == 0 {
            TargetKind::Port(self.0 as PortId)
        } else {
            TargetKind::Remote((self.0 >> 16) as RemoteId, self.0 as u16)
        }
    }
}

/// The frames of one burst bound for one destination.
#[derive(Debug)]
pub struct Group {
    /// The destination.
    pub target: Target,
    /// Indices of its frames in the burst, in burst order: `sel[..n]` (a destination
    /// gets each frame of a burst at most once).
    pub sel: [u16; BURST],
    /// Frames in `sel`.
    pub n: usize,
}

impl Default for Group {
    fn default() -> Self {
        Group {
            target: Target::port(0),
            sel: [0; BURST],
            n: 0,
        }
    }
}

impl Group {
    /// The group's frames.
    #[inline]
    pub fn frames(&self) -> &[u16] {
        &self.sel[..self.n]
    }
}

/// The burst's destinations (reused across bursts: `groups[..active]` are this burst's).
#[derive(Debug, Default)]
pub struct Groups {
    pub(super) groups: Vec<Group>,
    pub(super) active: usize,
    /// Which group each target of this burst has (replication to N ports looks each of
    /// them up once per frame: a scan of the groups would make a frame to 64 members
    /// cost 2,000 compares).
    index: TargetIndex,
    /// Flood targets computed in this burst: (domain, OVN group or 0, start, len) into
    /// `targets`.
    floods: Vec<(DomainId, u16, u32, u32)>,
    targets: Vec<Target>,
}

impl Groups {
    fn clear(&mut self) {
        self.active = 0;
        self.index.clear();
        self.floods.clear();
        self.targets.clear();
    }

    /// Adds frame `i` to `target`'s group (after the last group used, which is usually
    /// it).
    #[inline]
    fn push(&mut self, target: Target, i: u16, hint: &mut usize) {
        let g = if *hint < self.active && self.groups[*hint].target == target {
            *hint
        } else if let Some(g) = self.find(target) {
            g
        } else {
            if self.active == self.groups.len() {
                self.groups.push(Group::default());
            }
            let g = &mut self.groups[self.active];
            g.target = target;
            g.n = 0;
            self.index.insert(target, self.active);
            self.active += 1;
            self.active - 1
        };
        *hint = g;
        let g = &mut self.groups[g];
        g.sel[g.n] = i;
        g.n += 1;
    }

    /// The group `target` has in this burst, if any.
    #[inline]
    fn find(&self, target: Target) -> Option<usize> {
        match self.index.get(target) {
            Lookup::Found(g) => Some(g),
            Lookup::Absent => None,
            Lookup::Full => self.groups[..self.active]
                .iter()
                .position(|g| g.target == target),
        }
    }

    /// Where a frame flooded in `domain` (`group` 0), or sent to OVN multicast group
    /// `group` of it, from `src` goes: the members other than the source whose link can
    /// take it, and, for a frame that did not come from a tunnel, the remotes (the
    /// VNI's flood list, or one copy per chassis with members of the group, carrying
    /// the group's key). Computed once per burst, domain and group.
    fn flood_targets(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        domain: DomainId,
        group: u16,
    ) -> (u32, u32) {
        if let Some(&(_, _, s, n)) = self.floods.iter().find(|f| f.0 == domain && f.1 == group) {
            return (s, n);
        }
        let start = self.targets.len() as u32;
        let (ports, remotes): (&[PortId], &[RemoteId]) = if group == 0 {
            (topo.domain_ports(domain), topo.tunnels.flood_of(domain))
        } else {
            match topo.ovn.domain(domain).and_then(|o| o.group(group)) {
                Some(g) => (&g.local, &g.remotes),
                None => (&[], &[]),
            }
        };
        // A tunnelled frame is not sent on to the provider network: the chassis that
        // sent it reaches the network itself (OVN's MLF_RX_FROM_TUNNEL).
        let uplink = match (src.mode, src.tep) {
            (super::pipeline::Mode::Ovn(o), Some(_)) => o.localnet.map(|l| l.uplink),
            _ => None,
        };
        for &p in ports {
            if p != src.port.id
                && Some(p) != uplink
                && topo.port(p).is_some_and(|tp| tp.port.can_flood())
            {
                self.targets.push(Target::port(p));
            }
        }
        if src.tep.is_none() {
            self.targets
                .extend(remotes.iter().map(|&r| Target::remote(r, group)));
        }
        let n = self.targets.len() as u32 - start;
        self.floods.push((domain, group, start, n));
        (start, n)
    }
}

/// What [`TargetIndex::get`] knows of a target.
enum Lookup {
    Found(usize),
    Absent,
    /// The index overflowed in this burst: only a scan of the groups can say.
    Full,
}

/// An open-addressing map from a burst's targets to their groups, emptied per burst by
/// a new stamp (no clearing of slots).
#[derive(Debug)]
struct TargetIndex {
    /// (target, stamp of the burst that wrote it, group).
    slots: Box<[(u64, u32, u32)]>,
    stamp: u32,
    len: usize,
}

impl TargetIndex {
    /// Slots (a power of two); beyond 3/4 of them the index gives up for the burst.
    const SLOTS: usize = 512;

    fn clear(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.slots.fill((0, 0, 0));
            self.stamp = 1;
        }
        self.len = 0;
    }

    #[inline]
    fn home(target: Target) -> usize {
        (target.raw().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) as usize
    }

    #[inline]
    fn get(&self, target: Target) -> Lookup {
        if self.len > Self::SLOTS * 3 / 4 {
            return Lookup::Full;
        }
        let mut k = Self::home(target);
        loop {
            let (t, stamp, g) = self.slots[k];
            if stamp != self.stamp {
                return Lookup::Absent;
            }
            if t == target.raw() {
                return Lookup::Found(g as usize);
            }
            k = (k + 1) & (Self::SLOTS - 1);
        }
    }

    #[inline]
    fn insert(&mut self, target: Target, group: usize) {
        self.len += 1;
        if self.len > Self::SLOTS * 3 / 4 {
            return;
        }
        let mut k = Self::home(target);
        while self.slots[k].1 == self.stamp {
            k = (k + 1) & (Self::SLOTS - 1);
        }
        self.slots[k] = (target.raw(), self.stamp, group as u32);
    }
}

impl Default for TargetIndex {
    fn default() -> Self {
        TargetIndex {
            slots: vec![(0, 0, 0); Self::SLOTS].into_boxed_slice(),
            stamp: 1,
            len: 0,
        }
    }
}

impl Pipeline {
    /// Groups the burst by destination from `self.actions` and transmits one batch per
    /// destination.
    pub(super) fn forward<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        self.group(topo, src);
        self.lap(super::stages::Stage::Group);
        self.soft.reset();
        let streaming = self.groups.active >= STREAM_FANOUT;
        for g in 0..self.groups.active {
            let (port, vlan) = match self.groups.groups[g].target.kind() {
                TargetKind::Port(p) => (p, None),
                TargetKind::Uplink(p, vlan) => (p, Some(vlan)),
                TargetKind::Remote(r, egress) => {
                    let Some(vni) = src.domain_key.vni() else {
                        continue;
                    };
                    let ovn = if egress == 0 {
                        (0, 0)
                    } else {
                        (src.ovn_key, egress)
                    };
                    self.encap(topo, src, (r, vni, ovn), g, queue, burst, pkts);
                    continue;
                }
                TargetKind::Tunnel(t) => {
                    let t = self.lflow.tunnels[t as usize];
                    let to = (t.remote, t.vni, (t.ingress, t.egress));
                    self.encap(topo, src, to, g, queue, burst, pkts);
                    continue;
                }
            };
            let Some(dst_tp) = topo.port(port) else {
                // The FDB still held a deleted port's MAC for a moment.
                let n = self.groups.groups[g].n as u64;
                src.port
                    .counters(self.pmd)
                    .drop(DropReason::NoDestination, n);
                continue;
            };
            let dst = &dst_tp.port;
            let vid = vlan.unwrap_or_else(|| egress_vlan(src, dst_tp));
            self.prepare(g, src, (dst, vid), burst, pkts);
            let mut parts: [&[u8]; BURST] = [&[]; BURST];
            for (p, &(i, s, n)) in parts.iter_mut().zip(&self.gro.parts) {
                let f = burst.bytes(&pkts[usize::from(i)]).unwrap_or(&[]);
                *p = &f[s as usize..(s + n) as usize];
            }
            let batch = TxBatch {
                burst,
                pkts,
                items: &self.items,
                soft: self.soft.bufs(),
                merged: &self.gro.merged,
                parts: &parts[..self.gro.parts.len()],
                src_queue: queue,
                pmd: self.pmd,
                streaming,
                _mem: std::marker::PhantomData,
            };
            dst.transmit(&batch, &mut self.tx);
        }
        self.lap(super::stages::Stage::Deliver);
    }

    /// Fills `self.groups` from `self.actions`: one pass over the burst.
    fn group(&mut self, topo: &Topology, src: &Source<'_>) {
        let groups = &mut self.groups;
        groups.clear();
        let mut hint = 0;
        let mut unflooded = 0u64;
        for (i, a) in self.actions.iter().enumerate() {
            match *a {
                Action::Output(p) => groups.push(Target::port(p), i as u16, &mut hint),
                Action::Encap(r, k) => groups.push(Target::remote(r, k), i as u16, &mut hint),
                Action::Flood(d) | Action::Multicast(d, _) => {
                    let group = match *a {
                        Action::Multicast(_, g) => g,
                        _ => 0,
                    };
                    let (s, n) = groups.flood_targets(topo, src, d, group);
                    if n == 0 {
                        unflooded += 1;
                    }
                    for k in s..s + n {
                        let t = groups.targets[k as usize];
                        groups.push(t, i as u16, &mut hint);
                    }
                }
                Action::Snooped(_, k) => {
                    let targets = self.snoop.targets(k);
                    if targets.is_empty() && !self.snoop.is_report(k) {
                        unflooded += 1;
                    }
                    for &t in targets {
                        groups.push(t, i as u16, &mut hint);
                    }
                }
                Action::Lflow(f) => {
                    let (s, n) = self.lflow.spans[usize::from(f)];
                    for k in s..s + n {
                        groups.push(self.lflow.targets[k as usize], i as u16, &mut hint);
                    }
                }
                Action::Drop(_) => {}
            }
        }
        if unflooded > 0 {
            // A flooded frame that reaches no port is dropped here, and counted.
            src.port
                .counters(self.pmd)
                .drop(DropReason::NoDestination, unflooded);
        }
    }

    /// Fills `self.items` with group `g`'s frames as `dst` takes them: whole when it
    /// takes their offloads, else made plain in software first, and tagged `vid` when
    /// not 0. Hashes them when `dst` spreads frames over its queues by flow hash.
    fn prepare<'m, B: RxBurst<'m>>(
        &mut self,
        g: usize,
        src: &Source<'_>,
        (dst, vid): (&crate::ports::Port, u16),
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        let TxPlan { takes, spreads } = dst.tx_plan();
        let counters = dst.counters(self.pmd);
        self.items.clear();
        self.gro.clear();
        if src.tep.is_some() && takes.tso4 && takes.tso6 && vid == 0 {
            if spreads {
                for &i in self.groups.groups[g].frames() {
                    let p = &mut pkts[usize::from(i)];
                    self.ensure_hash(src, burst, p);
                }
            }
            self.prepare_gro(g, takes, burst, pkts, counters);
            return;
        }
        let group = &self.groups.groups[g];
        for &i in group.frames() {
            let p = &mut pkts[usize::from(i)];
            if spreads {
                self.ensure_hash(src, burst, p);
            }
            if takes.accepts(&p.vhdr) && vid == 0 {
                self.items.push(TxItem::Whole { pkt: i });
                continue;
            }
            if vid != 0 && !p.vhdr.has_offload() {
                match self.soft.tagged(p, burst, vid) {
                    Some(buf) => self.items.push(TxItem::Soft { pkt: i, buf }),
                    None => counters.drop(DropReason::BadDescriptor, 1),
                }
                continue;
            }
            if let Some(r) = self.soft.make(usize::from(i), p, burst, counters) {
                for buf in r {
                    let buf = if vid == 0 {
                        buf
                    } else {
                        self.soft.tagged_soft(buf, vid)
                    };
                    self.items.push(TxItem::Soft { pkt: i, buf });
                }
            }
        }
    }
}

/// The VLAN a frame from `src` must carry out of port `dst` (0: none): the tag of the
/// provider network when `dst` is the uplink of the source's OVN logical switch, the
/// tag of the source's domain when `dst` is a trunk.
#[inline]
fn egress_vlan(src: &Source<'_>, dst: &crate::switch::topology::TopoPort) -> u16 {
    match src.mode {
        super::pipeline::Mode::Ovn(o) => o
            .localnet
            .filter(|l| l.uplink == dst.port.id)
            .map_or(0, |l| l.tag),
        _ => dst
            .trunk
            .as_ref()
            .map_or(0, |t| t.egress_tag(src.domain_key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames to more targets than the index holds still land in one group per target,
    /// in first-seen order, and a new burst starts empty.
    #[test]
    fn groups_hold_one_group_per_target_beyond_the_index() {
        let mut groups = Groups::default();
        for burst in 0..3u16 {
            groups.clear();
            let targets: Vec<Target> = (0..700u16)
                .map(|p| {
                    if p % 7 == 0 {
                        Target::remote(p, burst)
                    } else {
                        Target::port(p + burst)
                    }
                })
                .collect();
            let mut hint = 0;
            for i in 0..3u16 {
                for &t in &targets {
                    groups.push(t, i, &mut hint);
                }
            }
            assert_eq!(groups.active, targets.len());
            for (g, &t) in groups.groups[..groups.active].iter().zip(&targets) {
                assert_eq!(g.target, t);
                assert_eq!(g.frames(), &[0, 1, 2]);
            }
        }
    }
}
