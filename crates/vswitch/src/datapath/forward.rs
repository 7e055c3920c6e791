//! Forwarding: the burst grouped by destination once, flooded frames expanded to their
//! domain's ports, software offloads done per destination, and one transmit batch per
//! destination port.

use super::packet::{Action, Pkt, RxBurst, TxBatch, TxItem, TxPlan, BURST};
use super::pipeline::Pipeline;
use crate::model::fdb::PortId;
use crate::model::stats::DropReason;
use crate::model::topology::{DomainId, TopoPort, Topology};

/// The frames of one burst bound for one port.
#[derive(Debug)]
pub struct Group {
    /// The destination.
    port: PortId,
    /// Indices of its frames in the burst, in burst order: `sel[..n]` (a port gets each
    /// frame of a burst at most once).
    sel: [u16; BURST],
    n: usize,
}

impl Default for Group {
    fn default() -> Self {
        Group {
            port: 0,
            sel: [0; BURST],
            n: 0,
        }
    }
}

/// The burst's destinations (reused across bursts: `groups[..active]` are this burst's).
#[derive(Debug, Default)]
pub struct Groups {
    groups: Vec<Group>,
    active: usize,
    /// Flood targets computed in this burst: (domain, start, len) into `targets`.
    floods: Vec<(DomainId, u32, u32)>,
    targets: Vec<PortId>,
}

impl Groups {
    fn clear(&mut self) {
        self.active = 0;
        self.floods.clear();
        self.targets.clear();
    }

    /// Adds frame `i` to `port`'s group (after the last group used, which is usually it).
    #[inline]
    fn push(&mut self, port: PortId, i: u16, hint: &mut usize) {
        let g = if *hint < self.active && self.groups[*hint].port == port {
            *hint
        } else if let Some(g) = self.groups[..self.active]
            .iter()
            .position(|g| g.port == port)
        {
            g
        } else {
            if self.active == self.groups.len() {
                self.groups.push(Group::default());
            }
            let g = &mut self.groups[self.active];
            g.port = port;
            g.n = 0;
            self.active += 1;
            self.active - 1
        };
        *hint = g;
        let g = &mut self.groups[g];
        g.sel[g.n] = i;
        g.n += 1;
    }

    /// The ports a frame flooded in `domain` from `src` goes to: the domain's members
    /// other than the source whose link can take it. Computed once per burst and domain.
    fn flood_targets(&mut self, topo: &Topology, src: PortId, domain: DomainId) -> (u32, u32) {
        if let Some(&(_, s, n)) = self.floods.iter().find(|f| f.0 == domain) {
            return (s, n);
        }
        let start = self.targets.len() as u32;
        for &p in topo.domain_ports(domain) {
            if p != src && topo.port(p).is_some_and(|tp| tp.port.can_flood()) {
                self.targets.push(p);
            }
        }
        let n = self.targets.len() as u32 - start;
        self.floods.push((domain, start, n));
        (start, n)
    }
}

impl Pipeline {
    /// Groups the burst by destination from `self.actions` and transmits one batch per
    /// destination.
    pub(super) fn forward<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &TopoPort,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        self.group(topo, src);
        self.soft.reset();
        for g in 0..self.groups.active {
            let port = self.groups.groups[g].port;
            let Some(dst) = topo.port(port).map(|tp| &tp.port) else {
                // The FDB still held a deleted port's MAC for a moment.
                let n = self.groups.groups[g].n as u64;
                src.port
                    .counters(self.pmd)
                    .drop(DropReason::NoDestination, n);
                continue;
            };
            self.prepare(g, src, dst, burst, pkts);
            let batch = TxBatch {
                burst,
                pkts,
                items: &self.items,
                soft: self.soft.bufs(),
                src_queue: queue,
                pmd: self.pmd,
                _mem: std::marker::PhantomData,
            };
            dst.transmit(&batch, &mut self.tx);
        }
    }

    /// Fills `self.groups` from `self.actions`: one pass over the burst.
    fn group(&mut self, topo: &Topology, src: &TopoPort) {
        let groups = &mut self.groups;
        groups.clear();
        let mut hint = 0;
        let mut unflooded = 0u64;
        for (i, a) in self.actions.iter().enumerate() {
            match *a {
                Action::Output(p) => groups.push(p, i as u16, &mut hint),
                Action::Flood(d) => {
                    let (s, n) = groups.flood_targets(topo, src.port.id, d);
                    if n == 0 {
                        unflooded += 1;
                    }
                    for k in s..s + n {
                        let p = groups.targets[k as usize];
                        groups.push(p, i as u16, &mut hint);
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
    /// takes their offloads, else made plain in software first. Hashes them when `dst`
    /// spreads frames over its queues by flow hash.
    fn prepare<'m, B: RxBurst<'m>>(
        &mut self,
        g: usize,
        src: &TopoPort,
        dst: &crate::ports::Port,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        let TxPlan { takes, spreads } = dst.tx_plan();
        let counters = dst.counters(self.pmd);
        self.items.clear();
        let group = &self.groups.groups[g];
        for &i in &group.sel[..group.n] {
            let p = &mut pkts[usize::from(i)];
            if spreads {
                self.ensure_hash(src, burst, p);
            }
            if takes.accepts(&p.vhdr) {
                self.items.push(TxItem::Whole { pkt: i });
                continue;
            }
            if let Some(r) = self.soft.make(usize::from(i), p, burst, counters) {
                self.items.extend(r.map(|buf| TxItem::Soft { pkt: i, buf }));
            }
        }
    }
}
