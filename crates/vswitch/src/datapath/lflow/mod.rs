//! OVN's logical pipeline in the data path (DESIGN.md §7): the frames of a logical
//! switch that runs it ([`crate::model::ovn::OvnDomain::lflow`]) are decided by the
//! pipeline rather than by the L2 rules. Per frame:
//!
//! 1. its headers are read once ([`parse`]) and its cache key formed;
//! 2. the cached program of the key runs ([`program`]): one conntrack lookup per `ct`
//!    step ([`ct`]), commits, outputs; on a miss the interpreter runs
//!    ([`crate::model::lflow::LogicalPipeline`]) and its decision is cached unless it
//!    rests on fields outside the key or needs the slow path;
//! 3. outputs without changes go out as received, grouped by destination with the rest
//!    of the burst; outputs with changed headers ([`rewrite`]) are copied, rewritten
//!    and sent in a second pass.
//!
//! A frame from a tunnel enters the egress pipeline with the keys of OVN's option.

pub mod ct;
pub mod embedded;
pub mod parse;
pub mod program;
pub mod rewrite;
pub mod slow;
pub mod wild;

use flowcache::FlowKey;
use ovn_lflow::Field;

use self::program::{Cache, LKey, Target, Tunnel, Uncached};
use super::packet::{Action, FrameLoc, Pkt, RxBurst};
use super::pipeline::{Mode, Pipeline, Source};
use crate::model::lflow::{Frame, Injected, Learned, SlowDest, SlowJob, Step};
use crate::model::stats::DropReason;
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
    buf: Vec<u8>,
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
    /// Frames the interpreter ran for.
    pub misses: u64,
    /// The rate of frames handed to the slow path.
    bucket: slow::Bucket,
    /// A frame read whole (on a miss).
    frame: Vec<u8>,
}

impl Lflow {
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

/// Where a program the interpreter made is cached: under its exact key and, when it
/// read no part of it that [`wild`] leaves out, under the wildcard key without
/// those parts too, with its results relative to the frame's `received` endpoints.
struct Keys {
    exact: LKey,
    wild: Option<(flowcache::Wildcards, conntrack::Endpoints)>,
}

/// What one frame's decision is.
enum Decided<'c> {
    /// The outputs of a cached program.
    Cached(&'c program::Variant),
    /// The outputs of a program the interpreter just made, its keys when it is to be
    /// cached, and the frames the slow path makes.
    Made(program::Variant, Option<Keys>, Option<Box<SlowJob>>),
    /// Dropped, for this reason.
    Drop(DropReason),
    /// Taken in by the chassis (`igmp`, `handle_svc_check`), sent nowhere: no drop.
    Taken,
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
        self.actions.clear();
        let counters = src.port.counters(self.pmd);
        let now = ct::now_ms();
        let mut mcast = super::snoop::Tally::default();
        let mut hdr = [0u8; HDR_BYTES];
        for (i, p) in pkts.iter().enumerate() {
            let n = burst.read(p, 0, &mut hdr[..(p.len as usize).min(HDR_BYTES)]);
            if n < 14 {
                counters.drop(DropReason::Runt, 1);
                self.actions.push(Action::Drop(DropReason::Runt));
                lf.spans.push((0, 0));
                continue;
            }
            if !matches!(entry, Entry::Resubmit) {
                counters.rx_packets.add(1);
                counters.rx_bytes.add(u64::from(p.len));
            }
            let keys = match entry {
                Entry::Tunnel(k) => Some(k[i]),
                Entry::Port | Entry::Resubmit => None,
            };
            let frame = (&hdr[..n], burst, p);
            let decided = self.lflow_decide(topo, src, &mut cache, &mut lf, frame, keys, now);
            let start = lf.targets.len() as u32;
            let (cached, made, job, insert) = match decided {
                Decided::Drop(r) => {
                    counters.drop(r, 1);
                    self.actions.push(Action::Drop(r));
                    (None, None, None, None)
                }
                Decided::Taken => {
                    // Forwarding skips it; no counter calls it a drop.
                    self.actions.push(Action::Drop(DropReason::OvnPipeline));
                    (None, None, None, None)
                }
                Decided::Cached(v) => (Some(v), None, None, None),
                Decided::Made(v, key, job) => (None, Some(v), job, key),
            };
            if let Some(v) = cached.or(made.as_ref()) {
                let (outs, counted) = lf_outputs(&mut lf, v, burst, p, counters);
                if outs > 0 {
                    mcast.note(v.mcast);
                }
                let punted = job.is_some_and(|job| {
                    let sent = lf.bucket.take(now) && self.switch.slow_tx.try_send(*job).is_ok();
                    if !sent {
                        counters.drop(DropReason::SlowPathBusy, 1);
                    }
                    lf.punted += u64::from(sent);
                    true
                });
                if outs == 0 && punted {
                    // The slow path answers it (or the drop was counted).
                    self.actions.push(Action::Drop(DropReason::SlowPathBusy));
                } else if outs == 0 {
                    if !counted {
                        counters.drop(DropReason::OvnPipeline, 1);
                    }
                    self.actions.push(Action::Drop(DropReason::OvnPipeline));
                } else {
                    self.actions.push(Action::Lflow(i as u16));
                }
            }
            lf.spans.push((start, lf.targets.len() as u32 - start));
            if let (Some(keys), Some(v)) = (insert, made) {
                if let Some((w, received)) = keys.wild {
                    if let Some(rel) = wild::relative(&v.ct, received) {
                        let mut wv = v.clone();
                        wv.rel = Some(rel);
                        cache.insert_wild(&keys.exact, w, wv);
                    }
                }
                cache.insert(keys.exact, v);
            }
        }
        mcast.count(&self.switch.mcast, counters);
        let m = &self.shared.lflow_stats;
        for (c, v) in m
            .iter()
            .zip([lf.hits, lf.misses, cache.kept, cache.dropped, lf.wild_hits])
        {
            c.add(v.wrapping_sub(c.get()));
        }
        lf.cache = cache;
        self.lflow = lf;
        self.lap(super::stages::Stage::Classify);
        self.forward(topo, src, queue, burst, pkts);
        self.lflow_rewritten(topo, src, queue);
    }

    /// The decision for one frame `p` of `burst` (`hdr`: its first bytes): a program
    /// of `cache`, or one the interpreter makes.
    #[allow(clippy::too_many_arguments)]
    fn lflow_decide<'m, 'c, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        cache: &'c mut Cache,
        lf: &mut Lflow,
        (hdr, burst, p): (&[u8], &B, &Pkt),
        keys: Option<(u16, u16)>,
        now: u64,
    ) -> Decided<'c> {
        let len = p.len as usize;
        let Some(pipeline) = topo.ovn.pipeline.as_ref() else {
            return Decided::Drop(DropReason::OvnPipeline);
        };
        let Some(dp) = src.domain_key.vni() else {
            return Decided::Drop(DropReason::OvnUnbound);
        };
        let brief = parse::brief_of(hdr);
        let size = wire_size(p, hdr);
        let key = LKey {
            key: FlowKey::extract(hdr, src.in_port, None),
            extra: u32::from(brief.ttl) << 24
                | u32::from(brief.dscp) << 18
                | u32::from(brief.ecn) << 16
                | u32::from(keys.map_or(0, |k| k.1)),
            ingress: keys.map_or(0, |k| k.0),
            size: program::size_class(pipeline.sizes(), size),
        };
        let pkt = match brief.eth_type {
            0x0800 | 0x86dd => brief.l3.and_then(|l3| ct::packet(hdr, l3, len)),
            _ => None,
        };
        let sw = &self.switch;
        let mut live =
            ct::LiveCt::new(&sw.conntrack, &sw.ct_zones, pkt, now).with_affinity(&sw.lb_affinity);
        let (done, commits) = match cache.find(&key, || live.received_endpoints()) {
            Some((vs, rel)) => match program::run(vs, &mut live, rel) {
                Ok(v) => {
                    lf.hits += 1;
                    lf.wild_hits += u64::from(rel.is_some());
                    return refused(&live).unwrap_or(Decided::Cached(v));
                }
                Err(partial) => partial,
            },
            None => (Vec::new(), 0),
        };
        lf.misses += 1;
        let inport = keys.map_or(src.ovn_key, |k| k.0);
        let (mut flow, _) = parse::flow_of(hdr, inport);
        if let Some((_, egress)) = keys {
            flow.set(Field::LogOutport, u128::from(egress));
        }
        // The interpreter reads the whole frame (DHCP options are in its payload).
        lf.frame.resize(len, 0);
        let got = burst.read(p, 0, &mut lf.frame);
        lf.frame.truncate(got);
        let fields = flow.detached();
        let mut live = live.with_frame(&lf.frame, &fields);
        flow.clear_reads();
        let outcome = {
            let mut replay = program::Replay::new(&mut live, done, commits);
            let frame = Frame {
                bytes: &lf.frame,
                size,
            };
            pipeline.run(dp, keys.is_some(), flow.clone(), frame, &mut replay)
        };
        // What the decision rests on: the fields the run read.
        let reads = flow.reads();
        if let Some(d) = refused(&live) {
            return d;
        }
        for s in &outcome.steps {
            match s {
                Step::PutMacBinding { dp, port, ip, mac } => sw.learn_ovn(Learned::MacBinding {
                    dp: *dp,
                    port: *port,
                    ip: *ip,
                    mac: *mac,
                }),
                Step::SvcCheck => {
                    let n = lf.frame.len().min(crate::model::lflow::SVC_REPLY_BYTES);
                    sw.learn_ovn(Learned::SvcReply(lf.frame[..n].to_vec()));
                }
                Step::Igmp if !self.snoop.take_in_lflow(&sw.mcast, src, burst, p) => {
                    return Decided::Drop(DropReason::BadMcastControl);
                }
                _ => {}
            }
        }
        let taken = outcome
            .steps
            .iter()
            .any(|s| matches!(s, Step::Igmp | Step::SvcCheck));
        if taken && !outcome.steps.iter().any(|s| matches!(s, Step::Output(_))) {
            return Decided::Taken;
        }
        let (v, uncached) = program::compile(&outcome, &flow, topo);
        let job = (uncached == Some(Uncached::SlowPath))
            // A frame from a tunnel is not held: its sender's router asked.
            .then(|| slow_job(&outcome, &flow, src, &lf.frame, topo, keys.is_none()))
            .filter(|j| !j.outs.is_empty() || j.awaits.is_some())
            .map(Box::new);
        let cached = uncached.is_none() && pipeline.cacheable();
        let w = wild::unread(reads, &key.key);
        tracing::trace!(
            reads = format_args!("{reads:#x}"),
            wild = w.0,
            "interpreter run"
        );
        let keys = Keys {
            exact: key,
            wild: (!w.is_none())
                .then(|| live.received_endpoints())
                .flatten()
                .map(|r| (w, r)),
        };
        Decided::Made(v, cached.then_some(keys), job)
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
                let p = append_linear(&mut lf.buf, &f.frame);
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
            let mut buf = Vec::new();
            let mut pkts = Vec::with_capacity(same.len());
            for f in same {
                pkts.push(append_linear(&mut buf, &f.frame));
            }
            // SAFETY: every frame described lies in `buf` (IN_LINEAR), owned here and
            // not changed while `burst` lives; the area is empty.
            let burst = unsafe { HostFrames::new(std::ptr::null(), 0, &buf) };
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
        let frames = unsafe { HostFrames::new(std::ptr::null(), 0, &buf) };
        self.forward(topo, src, queue, &frames, &mut pkts);
        self.lflow.pkts = pkts;
        self.lflow.buf = buf;
    }
}

/// Appends `frame` to `buf`; returns it described as a frame of `buf` ([`IN_LINEAR`]).
fn append_linear(buf: &mut Vec<u8>, frame: &[u8]) -> Pkt {
    let start = buf.len();
    buf.extend_from_slice(frame);
    Pkt {
        loc: FrameLoc {
            head: 0,
            start: start as u32,
            end: IN_LINEAR,
        },
        len: frame.len() as u32,
        ..Pkt::default()
    }
}

/// The slow path's job for a frame of `flow` from `src`: every output the data path
/// does not send as received or rewritten in place, and, when `holdable`, the next hop
/// the frame is to be held for.
fn slow_job(
    outcome: &crate::model::lflow::Outcome,
    flow: &ovn_lflow::Flow,
    src: &Source<'_>,
    frame: &[u8],
    topo: &Topology,
    holdable: bool,
) -> SlowJob {
    let outs = outcome
        .outputs()
        .filter(|o| {
            o.origin.is_built() || rewrite::supported(&rewrite::diff(flow, &o.flow)).is_err()
        })
        .filter_map(|o| {
            let dest = program::target(&o.dest, topo).slow_dest()?;
            Some((dest, o.origin.clone(), o.flow.clone()))
        })
        .collect();
    let awaits = outcome.steps.iter().find_map(|s| match s {
        Step::Await(a) if holdable => Some(*a),
        _ => None,
    });
    SlowJob {
        src: src.port.id,
        frame: frame.to_vec(),
        outs,
        awaits,
    }
}

/// The decision for a frame whose commit a limit refused: dropped.
fn refused<'c>(live: &ct::LiveCt<'_>) -> Option<Decided<'c>> {
    live.refused.map(|r| {
        Decided::Drop(match r {
            conntrack::Refused::ZoneFull => DropReason::CtZoneFull,
            conntrack::Refused::TableFull => DropReason::CtTableFull,
            conntrack::Refused::NatExhausted => DropReason::NatExhausted,
        })
    })
}

/// Adds frame `p`'s outputs of program `v`: unchanged ones to its targets, changed ones
/// copied and rewritten for the second pass; returns how many, and whether a drop was
/// counted (an output to nowhere, a rewrite that failed), so that a frame is counted
/// once.
fn lf_outputs<'m, B: RxBurst<'m>>(
    lf: &mut Lflow,
    v: &program::Variant,
    burst: &B,
    p: &Pkt,
    counters: &crate::model::stats::PortCounters,
) -> (usize, bool) {
    let (mut n, mut counted) = (0, false);
    for step in &v.steps {
        let program::PStep::Out(o) = step else {
            continue;
        };
        let target = match o.target {
            Target::Port(port) => super::forward::Target::port(port),
            Target::Uplink(port, vlan) => super::forward::Target::uplink(port, vlan),
            Target::Tunnel(t) => lf.tunnel(t),
            Target::Drop(r) => {
                counters.drop(r, 1);
                counted = true;
                continue;
            }
        };
        n += 1;
        if o.unchanged() {
            lf.targets.push(target);
            continue;
        }
        let start = lf.buf.len();
        lf.buf.resize(start + p.len as usize, 0);
        let got = burst.read(p, 0, &mut lf.buf[start..]);
        lf.buf.truncate(start + got);
        let off = parse::offsets_of(&lf.buf[start..]);
        let partial = p.vhdr.flags & crate::ports::frame::VIRTIO_NET_HDR_F_NEEDS_CSUM != 0;
        let f = &mut lf.buf[start..];
        let done = rewrite::apply(f, &off, &o.rewrite, partial).is_ok()
            && o.embedded.is_none_or(|e| embedded::rewrite(f, &off, &e));
        if !done {
            lf.buf.truncate(start);
            counters.drop(DropReason::OvnPipeline, 1);
            (n, counted) = (n - 1, true);
            continue;
        }
        lf.pkts.push(Pkt {
            loc: FrameLoc {
                head: 0,
                start: start as u32,
                end: IN_LINEAR,
            },
            len: got as u32,
            vhdr: p.vhdr,
            ..Pkt::default()
        });
        lf.dests.push(target);
    }
    (n, counted)
}

/// The length `check_pkt_larger` compares for frame `p` (`hdr`: its first bytes): its
/// own, or for a TSO frame that of each segment it becomes (its headers up to the end
/// of TCP's, and `gso_size` bytes of payload), as OVS's `check_pkt_len` compares a GSO
/// packet (Linux `skb_gso_validate_mac_len`).
fn wire_size(p: &Pkt, hdr: &[u8]) -> u32 {
    if p.vhdr.gso() == 0 {
        return p.len;
    }
    // A TSO frame's partial checksum starts at its TCP header (checked on receipt).
    let l4 = usize::from(p.vhdr.csum_start);
    match hdr.get(l4 + 12) {
        Some(&off) => (l4 as u32 + u32::from(off >> 4) * 4 + u32::from(p.vhdr.gso_size)).min(p.len),
        None => p.len,
    }
}
