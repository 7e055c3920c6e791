//! OVN's logical pipeline in the data path (DESIGN.md §7): the frames of a logical
//! switch that runs it ([`crate::model::ovn::OvnDomain::lflow`]) are decided by the
//! pipeline rather than by the L2 rules. Per frame:
//!
//! 1. its headers are read once ([`parse`]) and its cache key and IP packet formed;
//! 2. the cached program of the key runs ([`program`]): one conntrack lookup per `ct`
//!    step ([`ct`]), commits, outputs; on a miss the interpreter runs
//!    ([`crate::model::lflow::LogicalPipeline`]) and its decision is cached unless it
//!    rests on fields outside the key or needs the slow path. A run of one flow's
//!    frames in the burst goes through its program together ([`batch`]): one program
//!    lookup, one conntrack lookup per zone;
//! 3. outputs without changes go out as received, grouped by destination with the rest
//!    of the burst; outputs with changed headers ([`rewrite`]) are copied, rewritten
//!    and sent in a second pass. The frames of a run whose headers are alike but for
//!    the IPv4 identification and the checksums take the first one's rewritten
//!    headers (`patch.rs`).
//!
//! A frame from a tunnel enters the egress pipeline with the keys of OVN's option.

pub mod batch;
pub mod ct;
mod decide;
pub mod embedded;
mod memo;
pub mod parse;
mod patch;
pub mod program;
pub mod rewrite;
pub mod slow;
pub mod wild;

use self::program::{Cache, Tunnel};
use super::packet::{Action, FrameLoc, Pkt, RxBurst};
use super::pipeline::{Mode, Pipeline, Source};
use crate::model::lflow::{Injected, SlowDest};
use crate::ports::host::{HostFrames, IN_LINEAR};
use crate::switch::topology::Topology;

/// Header bytes read per frame: Ethernet, a tag, IPv6 with extension headers, TCP with
/// options, the ND options.
pub const HDR_BYTES: usize = 256;

/// One PMD's state for the logical pipeline.
#[derive(Debug, Default)]
pub struct Lflow {
    /// Programs by key.
    pub cache: Cache,
    /// The destinations of each frame of the burst: `targets[spans[i].0..][..spans[i].1]`.
    pub spans: Vec<(u32, u32)>,
    /// The burst's destinations.
    pub targets: Vec<super::forward::Target>,
    /// The burst's OVN tunnels ([`super::forward::TargetKind::Tunnel`] indexes them).
    pub tunnels: Vec<Tunnel>,
    /// Rewritten frames, one after another ([`IN_LINEAR`] frames of a second pass).
    buf: Linear,
    /// Each rewritten frame.
    pkts: Vec<Pkt>,
    /// Each rewritten frame's destination.
    dests: Vec<super::forward::Target>,
    /// Frames handed to the slow path.
    pub punted: u64,
    /// Frames whose program was found in the cache.
    pub hits: u64,
    /// Of those, frames whose program was a wildcard key's ([`wild`]).
    pub wild_hits: u64,
    /// Of those, frames stepped together with earlier frames of their flow ([`batch`]).
    pub together: u64,
    /// Frames the interpreter ran for.
    pub misses: u64,
    /// The rate of frames handed to the slow path.
    bucket: slow::Bucket,
    /// A frame read whole (on a miss).
    frame: Vec<u8>,
    /// The burst's frames' keys and connections.
    heads: decide::Heads,
    /// A run's packets as a translation made them ([`batch::step_together`]).
    translated: Vec<conntrack::Packet>,
    /// The rewrite of the first of frames alike, for the others ([`patch`]).
    patch: patch::Patch,
}

impl Lflow {
    /// Keeps the `len` bytes of the rewritten frames' room as frame `p` rewritten, for
    /// `to`.
    fn keep_rewritten(&mut self, p: &Pkt, len: usize, to: super::forward::Target) {
        self.pkts.push(Pkt {
            vhdr: p.vhdr,
            ..self.buf.keep(len)
        });
        self.dests.push(to);
    }

    fn tunnel(&mut self, t: Tunnel) -> super::forward::Target {
        let i = match self.tunnels.iter().position(|x| *x == t) {
            Some(i) => i,
            None => {
                self.tunnels.push(t);
                self.tunnels.len() - 1
            }
        };
        super::forward::Target::tunnel(i as u32)
    }
}

/// Where a burst enters the pipeline.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'k> {
    /// Received on a port: its ingress pipeline.
    Port,
    /// From a tunnel: the egress pipeline, with each frame's (ingress, egress) keys of
    /// OVN's option.
    Tunnel(&'k [(u16, u16)]),
    /// Held by the slow path for a router's next hop and sent again from its port: as
    /// received on it, but not counted as received twice.
    Resubmit,
}

impl Pipeline {
    /// Runs the burst `pkts` of `burst` from `src` (a port of an OVN logical switch
    /// that runs the pipeline, or a tunnel), entering as `entry` says, through the
    /// pipeline and forwards it.
    pub(super) fn lflow<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
        entry: Entry<'_>,
    ) {
        let mut lf = std::mem::take(&mut self.lflow);
        // Apart from the rest: a cached program is read while the burst's outputs grow.
        let mut cache = std::mem::take(&mut lf.cache);
        cache.sync(topo);
        lf.spans.clear();
        lf.targets.clear();
        lf.tunnels.clear();
        lf.buf.clear();
        lf.pkts.clear();
        lf.dests.clear();
        lf.patch.clear();
        self.actions.clear();
        let counters = src.port.counters(self.pmd);
        let mut mcast = super::snoop::Tally::default();
        // Apart from `self`: a frame's tracker reads it while `self` is written.
        let sw = std::sync::Arc::clone(&self.switch);
        let bu = decide::Burst {
            burst,
            pkts,
            entry,
            counters,
            now: ct::now_ms(),
        };
        decide::heads(topo, src, &bu, &mut lf.heads);
        let at = (topo, src, &*sw);
        let mut i = 0;
        while i < pkts.len() {
            // A run: the frames after `i` of its key and connection.
            let j = decide::run_end(&lf.heads, i);
            if j - i < 2 || !self.lflow_together(at, &mut cache, &mut lf, &bu, (i, j), &mut mcast) {
                for f in i..j {
                    self.lflow_one(at, &mut cache, &mut lf, &bu, f, &mut mcast);
                }
            }
            i = j;
        }
        mcast.count(&self.switch.mcast, counters);
        let m = &self.shared.lflow_stats;
        for (c, v) in m.iter().zip([
            lf.hits,
            lf.misses,
            cache.kept,
            cache.dropped,
            lf.wild_hits,
            lf.together,
        ]) {
            c.add(v.wrapping_sub(c.get()));
        }
        lf.cache = cache;
        self.lflow = lf;
        self.lap(super::stages::Stage::Classify);
        self.forward(topo, src, queue, burst, pkts);
        self.lflow_rewritten(topo, src, queue);
    }

    /// Sends the frames the slow path made (PMD 0, between bursts).
    pub(super) fn lflow_inject(&mut self, topo: &Topology) {
        if !self
            .switch
            .injected_pending
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let frames = std::mem::take(
            &mut *self
                .switch
                .injected
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        let (resubmit, frames): (Vec<Injected>, Vec<Injected>) = frames
            .into_iter()
            .partition(|f| f.dest == SlowDest::Resubmit);
        self.lflow_resubmit(topo, resubmit);
        let mut lf = std::mem::take(&mut self.lflow);
        let mut rest = frames;
        while let Some(first) = rest.first().map(|f| f.src) {
            let (mine, others): (Vec<Injected>, Vec<Injected>) =
                rest.into_iter().partition(|f| f.src == first);
            rest = others;
            let Some(tp) = topo.port(first) else { continue };
            lf.buf.clear();
            lf.pkts.clear();
            lf.dests.clear();
            for f in mine {
                let dest = match f.dest {
                    SlowDest::Port(p) => super::forward::Target::port(p),
                    SlowDest::Uplink(p, vlan) => super::forward::Target::uplink(p, vlan),
                    SlowDest::Resubmit => continue,
                    SlowDest::Tunnel {
                        remote,
                        vni,
                        ingress,
                        egress,
                    } => lf.tunnel(Tunnel {
                        remote,
                        vni,
                        ingress,
                        egress,
                    }),
                };
                let p = lf.buf.push(&f.frame);
                lf.pkts.push(p);
                lf.dests.push(dest);
            }
            self.lflow = std::mem::take(&mut lf);
            let src = Source::local(topo, tp);
            self.lflow_rewritten(topo, &src, 0);
            lf = std::mem::take(&mut self.lflow);
            lf.tunnels.clear();
        }
        self.lflow = lf;
    }

    /// Runs `frames` (held for a router's next hop, now known) through the pipeline
    /// again, each as received on its port; a frame whose port left, or no longer runs
    /// the pipeline, is dropped and counted (`orphaned`).
    fn lflow_resubmit(&mut self, topo: &Topology, mut frames: Vec<Injected>) {
        frames.sort_by_key(|f| f.src);
        for same in frames.chunk_by(|a, b| a.src == b.src) {
            let src = topo.port(same[0].src).map(|tp| Source::local(topo, tp));
            let Some(src) = src.filter(|s| matches!(s.mode, Mode::Ovn(o) if o.lflow)) else {
                self.switch
                    .slow_stats
                    .orphaned
                    .fetch_add(same.len() as u64, std::sync::atomic::Ordering::Relaxed);
                continue;
            };
            let mut buf = Linear::default();
            let mut pkts = Vec::with_capacity(same.len());
            for f in same {
                pkts.push(buf.push(&f.frame));
            }
            // SAFETY: every frame described lies in `buf` (IN_LINEAR), owned here and
            // not changed while `burst` lives; the area is empty.
            let burst = unsafe { HostFrames::new(std::ptr::null(), 0, buf.bytes()) };
            self.lflow(topo, &src, 0, &burst, &mut pkts, Entry::Resubmit);
        }
    }

    /// Sends the frames rewritten in this burst, grouped by destination.
    fn lflow_rewritten(&mut self, topo: &Topology, src: &Source<'_>, queue: u16) {
        if self.lflow.pkts.is_empty() {
            return;
        }
        let mut lf = std::mem::take(&mut self.lflow);
        self.actions.clear();
        lf.spans.clear();
        lf.targets.clear();
        for (i, d) in lf.dests.iter().enumerate() {
            lf.spans.push((i as u32, 1));
            lf.targets.push(*d);
            self.actions.push(Action::Lflow(i as u16));
        }
        let mut pkts = std::mem::take(&mut lf.pkts);
        let buf = std::mem::take(&mut lf.buf);
        self.lflow = lf;
        // SAFETY: every frame described lies in `buf` (IN_LINEAR), owned here and not
        // changed while `frames` lives; the area is empty.
        let frames = unsafe { HostFrames::new(std::ptr::null(), 0, buf.bytes()) };
        self.forward(topo, src, queue, &frames, &mut pkts);
        self.lflow.pkts = pkts;
        self.lflow.buf = buf;
    }
}

/// Frames made in a burst, one after another, each described as a frame of the buffer
/// ([`IN_LINEAR`]). The buffer only grows: a frame is copied over what an earlier
/// burst left (zeroed first, each frame's copy cost a `memset`).
#[derive(Debug, Default)]
pub(super) struct Linear {
    bytes: Vec<u8>,
    /// Bytes holding this burst's frames.
    used: usize,
}

impl Linear {
    /// Forgets the frames.
    pub(super) fn clear(&mut self) {
        self.used = 0;
    }

    /// The frames' bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.used]
    }

    /// `n` bytes after the frames, for the next one: their offset, and the bytes
    /// (whatever was there), kept only by [`Linear::keep`].
    pub(super) fn room(&mut self, n: usize) -> (usize, &mut [u8]) {
        let start = self.used;
        if self.bytes.len() < start + n {
            self.bytes.resize(start + n, 0);
        }
        (start, &mut self.bytes[start..start + n])
    }

    /// Keeps the `n` bytes of [`Linear::room`] as a frame: returns it described.
    pub(super) fn keep(&mut self, n: usize) -> Pkt {
        let start = self.used;
        self.used += n;
        Pkt {
            loc: FrameLoc {
                head: 0,
                start: start as u32,
                end: IN_LINEAR,
            },
            len: n as u32,
            ..Pkt::default()
        }
    }

    /// Appends `frame`; returns it described.
    pub(super) fn push(&mut self, frame: &[u8]) -> Pkt {
        self.room(frame.len()).1.copy_from_slice(frame);
        self.keep(frame.len())
    }
}
