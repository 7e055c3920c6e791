//! One burst's decisions: each frame's cache key and connection read first
//! ([`heads`]), then runs of one flow's frames stepped together ([`super::batch`])
//! and other frames one at a time: a cached program, or the interpreter; then each
//! frame's outputs ([`Pipeline::lflow_emit`]).

use conntrack::{Packet, Prepared};
use flowcache::FlowKey;
use ovn_lflow::Field;

use super::batch::{self, Place};
use super::memo::{HeadMemo, MEMO_BYTES};
use super::program::{self, Cache, LKey, Partial, Target, Uncached, Walk};
use super::{ct, embedded, parse, rewrite, wild, Entry, Lflow, HDR_BYTES};
use crate::datapath::packet::{Action, Pkt, RxBurst};
use crate::datapath::pipeline::{Pipeline, Source};
use crate::datapath::snoop::Tally;
use crate::model::lflow::{Frame, Learned, SlowJob, Step};
use crate::model::stats::{DropReason, PortCounters};
use crate::switch::topology::Topology;
use crate::switch::Switch;

/// What a frame's decision starts from, read once: its cache key, its IP packet for
/// conntrack, and the length `check_pkt_larger` compares.
#[derive(Debug, Clone, Copy)]
pub struct Head {
    key: LKey,
    pkt: Option<Packet>,
    size: u32,
}

/// The burst's frames' [`Head`]s, kept as arrays written in place: the packets of a
/// run are one slice, and a key is stored word by word where it is kept (built apart
/// and copied whole, it was read back before its stores were done: a stall a frame).
#[derive(Debug, Default)]
pub struct Heads {
    /// Each frame's key.
    keys: Vec<LKey>,
    /// Each frame's size for `check_pkt_larger`, and whether it has an IP packet
    /// (`None`: a runt, whose key and packet mean nothing).
    sizes: Vec<Option<(u32, bool)>>,
    /// Each frame's IP packet ([`NO_PACKET`] for a frame without).
    ips: Vec<Packet>,
    /// Each frame's memoized head ([`HeadMemo`]): the frame whose headers its own
    /// equal but for the IPv4 identification and the checksums (its own index for
    /// the frame memoized, [`NOT_ALIKE`] for a frame not memoized).
    alike: Vec<u32>,
}

/// [`Heads::alike`] of a frame whose head is not memoized.
const NOT_ALIKE: u32 = u32::MAX;

/// The place of a frame's IP packet when it has none: a fragment, which no packet
/// looks up alike ([`Packet::same_lookup`]).
const NO_PACKET: Packet = Packet {
    src: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    dst: std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    fragment: true,
    l4: conntrack::L4::Other { proto: 0 },
};

impl Heads {
    /// The frame whose headers frame `i`'s equal but for the IPv4 identification
    /// and the checksums (`i` for the first of them), if its head is memoized.
    fn alike(&self, i: usize) -> Option<usize> {
        let a = self.alike[i];
        (a != NOT_ALIKE).then_some(a as usize)
    }

    /// Whether frame `i` is the first of frames alike (see [`Heads::alike`]) and the
    /// next frame is one of them.
    fn leads_alike(&self, i: usize) -> bool {
        self.alike[i] == i as u32 && self.alike.get(i + 1) == Some(&(i as u32))
    }

    /// Frame `i`'s head (`None`: a runt).
    fn get(&self, i: usize) -> Option<Head> {
        let (size, ip) = self.sizes[i]?;
        Some(Head {
            key: self.keys[i],
            pkt: ip.then(|| self.ips[i]),
            size,
        })
    }
}

/// The burst being decided.
pub(super) struct Burst<'b, B> {
    pub burst: &'b B,
    pub pkts: &'b [Pkt],
    pub entry: Entry<'b>,
    pub counters: &'b PortCounters,
    pub now: u64,
}

impl<B> Burst<'_, B> {
    /// Frame `i`'s keys of OVN's option (from a tunnel).
    fn keys(&self, i: usize) -> Option<(u16, u16)> {
        match self.entry {
            Entry::Tunnel(k) => Some(k[i]),
            Entry::Port | Entry::Resubmit => None,
        }
    }
}

/// Each frame's [`Head`] into `out`, counting what is received.
pub(super) fn heads<'m, B: RxBurst<'m>>(
    topo: &Topology,
    src: &Source<'_>,
    bu: &Burst<'_, B>,
    out: &mut Heads,
) {
    let n = bu.pkts.len();
    out.keys.resize(n, LKey::default());
    out.sizes.resize(n, None);
    out.ips.resize(n, NO_PACKET);
    out.alike.resize(n, NOT_ALIKE);
    let sizes = topo.ovn.pipeline.as_ref().map_or(&[][..], |p| p.sizes());
    // Each frame's first bytes are read one frame ahead, into the buffer the frame
    // before used: read right before they were parsed, their loads waited on the
    // copy's stores (wider than the loads, they could not be forwarded).
    let mut bufs = [[0u8; HDR_BYTES]; 2];
    let read = |p: &Pkt, hdr: &mut [u8; HDR_BYTES]| {
        bu.burst
            .read(p, 0, &mut hdr[..(p.len as usize).min(HDR_BYTES)])
    };
    let mut ahead = bu.pkts.first().map_or(0, |p| read(p, &mut bufs[0]));
    let mut memo: Option<HeadMemo> = None;
    for (i, p) in bu.pkts.iter().enumerate() {
        let [even, odd] = &mut bufs;
        let (hdr, next) = if i % 2 == 0 { (even, odd) } else { (odd, even) };
        let n = ahead;
        ahead = bu.pkts.get(i + 1).map_or(0, |q| read(q, next));
        let hdr: &[u8; HDR_BYTES] = hdr;
        if n < 14 {
            out.alike[i] = NOT_ALIKE;
            out.sizes[i] = None;
            out.ips[i] = NO_PACKET;
            continue;
        }
        if !matches!(bu.entry, Entry::Resubmit) {
            bu.counters.rx_packets.add(1);
            bu.counters.rx_bytes.add(u64::from(p.len));
        }
        let keys = bu.keys(i);
        if let Some(m) = memo.as_ref().filter(|m| m.matches(hdr, n, p.len)) {
            let size = wire_size(p, &hdr[..n]);
            let mut k = out.keys[m.from];
            k.extra = k.extra & !0xffff | u32::from(keys.map_or(0, |k| k.1));
            k.ingress = keys.map_or(0, |k| k.0);
            k.size = program::size_class(sizes, size);
            out.keys[i] = k;
            out.ips[i] = out.ips[m.from];
            out.sizes[i] = Some((size, true));
            out.alike[i] = m.from as u32;
            continue;
        }
        let full = hdr;
        let hdr = &hdr[..n];
        out.alike[i] = NOT_ALIKE;
        let brief = parse::brief_of(hdr);
        // Parsed first, kept last: its stores are done before it is copied.
        let l3 = brief
            .l3
            .filter(|_| matches!(brief.eth_type, 0x0800 | 0x86dd));
        let parsed = match l3 {
            Some(l3) => ct::parse_packet(hdr, l3, p.len as usize),
            None => Err(conntrack::ParseError::BadIpVersion),
        };
        let size = wire_size(p, hdr);
        let k = &mut out.keys[i];
        // The common IPv4 key is assembled in registers and stored in place.
        k.key = match FlowKey::extract_ipv4_l4(hdr, src.in_port, None) {
            Some(key) => key,
            None => FlowKey::extract(hdr, src.in_port, None),
        };
        k.extra = u32::from(brief.ttl) << 24
            | u32::from(brief.dscp) << 18
            | u32::from(brief.ecn) << 16
            | u32::from(keys.map_or(0, |k| k.1));
        k.ingress = keys.map_or(0, |k| k.0);
        k.size = program::size_class(sizes, size);
        let ip = match parsed {
            Ok(pkt) => {
                out.ips[i] = pkt;
                memo = l3.and_then(|l3| HeadMemo::of(full, n, l3, i, p.len));
                if memo.is_some() {
                    out.alike[i] = i as u32;
                }
                true
            }
            Err(_) => {
                out.ips[i] = NO_PACKET;
                false
            }
        };
        out.sizes[i] = Some((size, ip));
    }
}

/// The end of the run that starts at frame `i`: the frames after it of its key and
/// connection (`i + 1`: no run).
pub(super) fn run_end(heads: &Heads, i: usize) -> usize {
    let Some((_, true)) = heads.sizes[i] else {
        return i + 1;
    };
    let (key, pkt, alike) = (&heads.keys[i], &heads.ips[i], heads.alike[i]);
    // A runt's packet is `NO_PACKET`, alike to none. A frame alike to the same frame
    // as frame `i` has its flow key and packet (copied): only the parts of its key
    // the memo does not copy are compared.
    let more = (i + 1..heads.keys.len())
        .take_while(|&f| {
            let k = &heads.keys[f];
            if alike != NOT_ALIKE && heads.alike[f] == alike {
                (k.extra, k.ingress, k.size) == (key.extra, key.ingress, key.size)
            } else {
                k == key && heads.ips[f].same_lookup(pkt)
            }
        })
        .count();
    i + 1 + more
}

impl Pipeline {
    /// Decides and emits frame `f` alone.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lflow_one<'m, B: RxBurst<'m>>(
        &mut self,
        (topo, src, sw): (&Topology, &Source<'_>, &Switch),
        cache: &mut Cache,
        lf: &mut Lflow,
        bu: &Burst<'_, B>,
        f: usize,
        mcast: &mut Tally,
    ) {
        let Some(head) = lf.heads.get(f) else {
            bu.counters.drop(DropReason::Runt, 1);
            self.actions.push(Action::Drop(DropReason::Runt));
            lf.spans.push((0, 0));
            return;
        };
        let decided = self.lflow_decide((topo, src, sw), cache, lf, bu, f, &head);
        if let Some(m) = self.lflow_emit(sw, lf, bu, f, decided, mcast) {
            cache_made(cache, *m);
        }
    }

    /// Decides and emits the frames `i..j`, a run of one key and connection, stepped
    /// together ([`batch`]) as far as they may; false (nothing done) when its program
    /// is not cached exactly.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lflow_together<'m, B: RxBurst<'m>>(
        &mut self,
        (topo, src, sw): (&Topology, &Source<'_>, &Switch),
        cache: &mut Cache,
        lf: &mut Lflow,
        bu: &Burst<'_, B>,
        (i, j): (usize, usize),
        mcast: &mut Tally,
    ) -> bool {
        let Some(Head {
            key,
            pkt: Some(pkt),
            ..
        }) = lf.heads.get(i)
        else {
            return false;
        };
        if topo.ovn.pipeline.is_none() || src.domain_key.vni().is_none() {
            return false;
        }
        let Some((vs, None)) = cache.find(&key, || None) else {
            return false;
        };
        let prep = Prepared::of(&pkt);
        let run = (&lf.heads.ips[i..j], &prep);
        let t = batch::step_together(vs, &sw.conntrack, run, bu.now, &mut lf.translated);
        // Programs the interpreter made for frames that went on alone, cached after.
        let mut made = Vec::new();
        // The destinations of the run's first frame done together, when its program
        // sends it out unchanged: the next ones done go where it went.
        let plain = t.n > 1 && t.walk.next().is_none() && t.walk.variant().plain();
        let mut first: Option<(u32, u32)> = None;
        // Where the run's first frame done together went rewritten, when the frames
        // alike to it take its patch: each of them is copied and patched to go there.
        let mut patched: Option<crate::datapath::forward::Target> = None;
        for f in i..j {
            let dests = lf.dests.len();
            let decided = match t.place(f - i) {
                Place::Done(v) => {
                    lf.hits += 1;
                    lf.together += u64::from(f > i);
                    if patched.is_some_and(|to| patched_copy(lf, bu, f, to)) {
                        lf.spans.push((lf.targets.len() as u32, 0));
                        mcast.note(v.mcast);
                        self.actions.push(Action::Lflow(f as u16));
                        continue;
                    }
                    if let Some((at, n)) = first {
                        let at = at as usize;
                        // One by one: a copy of the usual one target was a call.
                        for k in at..at + n as usize {
                            let t = lf.targets[k];
                            lf.targets.push(t);
                        }
                        lf.spans.push((lf.targets.len() as u32 - n, n));
                        mcast.note(v.mcast);
                        self.actions.push(Action::Lflow(f as u16));
                        continue;
                    }
                    first = plain.then_some((lf.targets.len() as u32, 0));
                    Decided::Cached(v)
                }
                Place::Alone {
                    walk,
                    state,
                    answer,
                } => {
                    let head = lf.heads.get(f).expect("a run's frames have heads");
                    let alone = Alone {
                        walk,
                        state,
                        answer,
                    };
                    self.lflow_alone((topo, src, sw), lf, bu, f, &head, alone)
                }
            };
            let done = match decided {
                Decided::Cached(v) if f == i && t.n > 1 => Some(v),
                _ => None,
            };
            if let Some(m) = self.lflow_emit(sw, lf, bu, f, decided, mcast) {
                made.push(m);
            }
            if let Some((_, n @ 0)) = &mut first {
                *n = lf.spans.last().map_or(0, |s| s.1);
            }
            if let Some(v) = done.filter(|_| lf.dests.len() == dests + 1) {
                patched = patch_target(lf, v, (f, &bu.pkts[f]));
            }
        }
        for m in made {
            cache_made(cache, *m);
        }
        true
    }

    /// The decision for frame `f` (`head`): a program of `cache`, or one the
    /// interpreter makes.
    fn lflow_decide<'c, 'm, B: RxBurst<'m>>(
        &mut self,
        (topo, src, sw): (&Topology, &Source<'_>, &Switch),
        cache: &'c mut Cache,
        lf: &mut Lflow,
        bu: &Burst<'_, B>,
        f: usize,
        head: &Head,
    ) -> Decided<'c> {
        if topo.ovn.pipeline.is_none() {
            return Decided::Drop(DropReason::OvnPipeline);
        }
        if src.domain_key.vni().is_none() {
            return Decided::Drop(DropReason::OvnUnbound);
        }
        let mut live = tracker(sw, head, bu.now);
        let partial = match cache.find(&head.key, || live.received_endpoints()) {
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
        self.lflow_interpret((topo, src, sw), lf, bu, f, head, live, partial)
    }

    /// The decision for frame `f` (`head`) of a run that goes on alone.
    fn lflow_alone<'v, 'm, B: RxBurst<'m>>(
        &mut self,
        (topo, src, sw): (&Topology, &Source<'_>, &Switch),
        lf: &mut Lflow,
        bu: &Burst<'_, B>,
        f: usize,
        head: &Head,
        a: Alone<'_, 'v>,
    ) -> Decided<'v> {
        let mut live = tracker(sw, head, bu.now).resumed(a.state);
        match batch::finish_alone(*a.walk, a.answer.copied(), &mut live) {
            Ok(v) => {
                lf.hits += 1;
                refused(&live).unwrap_or(Decided::Cached(v))
            }
            Err(partial) => self.lflow_interpret((topo, src, sw), lf, bu, f, head, live, partial),
        }
    }

    /// The interpreter's decision for frame `f` (`head`), `live` its tracker after the
    /// cached steps that gave `partial`.
    #[allow(clippy::too_many_arguments)]
    fn lflow_interpret<'c, 'm, B: RxBurst<'m>>(
        &mut self,
        (topo, src, sw): (&Topology, &Source<'_>, &Switch),
        lf: &mut Lflow,
        bu: &Burst<'_, B>,
        f: usize,
        head: &Head,
        live: ct::LiveCt<'_>,
        (done, commits): Partial,
    ) -> Decided<'c> {
        let (Some(pipeline), Some(dp)) = (topo.ovn.pipeline.as_ref(), src.domain_key.vni()) else {
            return Decided::Drop(DropReason::OvnPipeline);
        };
        lf.misses += 1;
        let (p, keys) = (&bu.pkts[f], bu.keys(f));
        // The interpreter reads the whole frame (DHCP options are in its payload).
        lf.frame.resize(p.len as usize, 0);
        let got = bu.burst.read(p, 0, &mut lf.frame);
        lf.frame.truncate(got);
        let inport = keys.map_or(src.ovn_key, |k| k.0);
        let (mut flow, _) = parse::flow_of(&lf.frame[..got.min(HDR_BYTES)], inport);
        if let Some((_, egress)) = keys {
            flow.set(Field::LogOutport, u128::from(egress));
        }
        let fields = flow.detached();
        let mut live = live.with_frame(&lf.frame, &fields);
        flow.clear_reads();
        let outcome = {
            let mut replay = program::Replay::new(&mut live, done, commits);
            let frame = Frame {
                bytes: &lf.frame,
                size: head.size,
            };
            pipeline.run(dp, keys.is_some(), flow.clone(), frame, &mut replay)
        };
        // What the decision rests on: the fields the run read (taken now: compiling
        // the outcome reads the flow too).
        let reads = flow.reads();
        let w = wild::unread(&flow, &head.key.key);
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
                Step::Igmp if !self.snoop.take_in_lflow(&sw.mcast, src, bu.burst, p) => {
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
        tracing::trace!(
            reads = format_args!("{reads:#x}"),
            wild = ?w,
            "interpreter run"
        );
        let keys = Keys {
            exact: head.key,
            wild: (!w.is_exact())
                .then(|| live.received_endpoints())
                .flatten()
                .map(|r| (w, r)),
        };
        Decided::Made(Box::new(Made {
            v,
            keys: cached.then_some(keys),
            job,
        }))
    }

    /// Forwards frame `f` as `decided` says (its targets, its action, its counters, a
    /// punt to the slow path); returns a program made for it, to cache.
    fn lflow_emit<'m, B: RxBurst<'m>>(
        &mut self,
        sw: &Switch,
        lf: &mut Lflow,
        bu: &Burst<'_, B>,
        f: usize,
        decided: Decided<'_>,
        mcast: &mut Tally,
    ) -> Option<Box<Made>> {
        let start = lf.targets.len() as u32;
        let made = match decided {
            Decided::Drop(r) => {
                bu.counters.drop(r, 1);
                self.actions.push(Action::Drop(r));
                None
            }
            Decided::Taken => {
                // Forwarding skips it; no counter calls it a drop.
                self.actions.push(Action::Drop(DropReason::OvnPipeline));
                None
            }
            Decided::Cached(v) => {
                self.lflow_outputs(sw, lf, bu, f, (v, None), mcast);
                None
            }
            Decided::Made(mut m) => {
                let job = m.job.take();
                self.lflow_outputs(sw, lf, bu, f, (&m.v, job), mcast);
                m.keys.is_some().then_some(m)
            }
        };
        lf.spans.push((start, lf.targets.len() as u32 - start));
        made
    }

    /// Frame `f`'s outputs by program `v`, its action, and the slow path's `job`.
    fn lflow_outputs<'m, B: RxBurst<'m>>(
        &mut self,
        sw: &Switch,
        lf: &mut Lflow,
        bu: &Burst<'_, B>,
        f: usize,
        (v, job): (&program::Variant, Option<Box<SlowJob>>),
        mcast: &mut Tally,
    ) {
        let counters = bu.counters;
        let (outs, counted) = lf_outputs(lf, v, bu.burst, (f, &bu.pkts[f]), counters);
        if outs > 0 {
            mcast.note(v.mcast);
        }
        let punted = job.is_some_and(|job| {
            let sent = lf.bucket.take(bu.now) && sw.slow_tx.try_send(*job).is_ok();
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
            self.actions.push(Action::Lflow(f as u16));
        }
    }
}

/// Where a frame of a run goes on alone from ([`Place::Alone`]).
struct Alone<'t, 'v> {
    walk: &'t Walk<'v>,
    state: &'t batch::Resume,
    answer: Option<&'t batch::Answer>,
}

/// The tracker of the frame of `head`, over `sw`'s connections, at `now` ms.
fn tracker<'s>(sw: &'s Switch, head: &Head, now: u64) -> ct::LiveCt<'s> {
    ct::LiveCt::new(&sw.conntrack, &sw.ct_zones, head.pkt, now).with_affinity(&sw.lb_affinity)
}

/// Caches the program `m` made for a frame under its keys (none: not cached).
fn cache_made(cache: &mut Cache, m: Made) {
    let Made { v, keys, .. } = m;
    let Some(keys) = keys else { return };
    if let Some((w, received)) = keys.wild {
        if let Some(rel) = wild::relative(&v.ct, received) {
            let mut wv = v.clone();
            wv.rel = Some(rel);
            cache.insert_wild(&keys.exact, w, wv);
        }
    }
    cache.insert(keys.exact, v);
}

/// Where a program the interpreter made is cached: under its exact key and, when it
/// read no part of it that [`wild`] leaves out, under the wildcard key without
/// those parts too, with its results relative to the frame's `received` endpoints.
struct Keys {
    exact: LKey,
    wild: Option<(flowcache::KeyMask, conntrack::Endpoints)>,
}

/// A program the interpreter made for a frame.
struct Made {
    v: program::Variant,
    /// Where it is cached (`None`: it is not).
    keys: Option<Keys>,
    /// The frames the slow path makes.
    job: Option<Box<SlowJob>>,
}

/// What one frame's decision is.
enum Decided<'c> {
    /// The outputs of a cached program.
    Cached(&'c program::Variant),
    /// The outputs of a program the interpreter just made (boxed: a decision moves by
    /// value, and most are [`Decided::Cached`]).
    Made(Box<Made>),
    /// Dropped, for this reason.
    Drop(DropReason),
    /// Taken in by the chassis (`igmp`, `handle_svc_check`), sent nowhere: no drop.
    Taken,
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

/// Adds frame `f`'s (`p`'s) outputs of program `v`: unchanged ones to its targets,
/// changed ones copied and rewritten for the second pass; returns how many, and
/// whether a drop was counted (an output to nowhere, a rewrite that failed), so that a
/// frame is counted once.
fn lf_outputs<'m, B: RxBurst<'m>>(
    lf: &mut Lflow,
    v: &program::Variant,
    burst: &B,
    (f, p): (usize, &Pkt),
    counters: &crate::model::stats::PortCounters,
) -> (usize, bool) {
    let (mut n, mut counted) = (0, false);
    for step in &v.steps {
        let program::PStep::Out(o) = step else {
            continue;
        };
        let target = match o.target {
            Target::Port(port) => crate::datapath::forward::Target::port(port),
            Target::Uplink(port, vlan) => crate::datapath::forward::Target::uplink(port, vlan),
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
        let got = burst.read(p, 0, lf.buf.room(p.len as usize).1);
        if !rewrite_copy(lf, (f, p), got, o) {
            counters.drop(DropReason::OvnPipeline, 1);
            (n, counted) = (n - 1, true);
            continue;
        }
        lf.keep_rewritten(p, got, target);
    }
    (n, counted)
}

/// Where the one output of program `v` sends frame `i` (`p`), the first of a run,
/// when it is rewritten by a patch that the frames alike to it take
/// ([`patched_copy`]).
fn patch_target(
    lf: &Lflow,
    v: &program::Variant,
    (i, p): (usize, &Pkt),
) -> Option<crate::datapath::forward::Target> {
    let mut outs = v.steps.iter().filter_map(|s| match s {
        program::PStep::Out(o) => Some(o),
        _ => None,
    });
    let (Some(o), None) = (outs.next(), outs.next()) else {
        return None;
    };
    let simple = !o.unchanged() && o.embedded.is_none();
    (simple && lf.patch.is_for(i, &o.rewrite, p.vhdr.needs_csum()))
        .then(|| lf.dests.last().copied())
        .flatten()
}

/// Copies frame `f` of a run and rewrites it by the patch of the frame it is alike to,
/// for `to`; false (nothing kept) when the patch does not take it.
fn patched_copy<'m, B: RxBurst<'m>>(
    lf: &mut Lflow,
    bu: &Burst<'_, B>,
    f: usize,
    to: crate::datapath::forward::Target,
) -> bool {
    let p = &bu.pkts[f];
    if !lf
        .heads
        .alike(f)
        .is_some_and(|a| lf.patch.takes(a, p.vhdr.needs_csum()))
    {
        return false;
    }
    let (_, room) = lf.buf.room(p.len as usize);
    let got = bu.burst.read(p, 0, room);
    if !lf.patch.apply(&mut room[..got]) {
        return false;
    }
    lf.keep_rewritten(p, got, to);
    true
}

/// Rewrites the copy of frame `f` (`p`), the first `len` bytes of the rewritten frames'
/// room, for output `o`: by the patch of the frame it is alike to
/// ([`super::patch::Patch`]), or field by field, keeping the patch when frames alike
/// to it follow. False when it cannot be done.
fn rewrite_copy(lf: &mut Lflow, (f, p): (usize, &Pkt), len: usize, o: &program::Out) -> bool {
    let partial = p.vhdr.needs_csum();
    let frame = lf.buf.room(len).1;
    let simple = o.embedded.is_none();
    if let Some(from) = lf.heads.alike(f).filter(|_| simple) {
        if lf.patch.is_for(from, &o.rewrite, partial) && lf.patch.apply(frame) {
            return true;
        }
    }
    let off = parse::offsets_of(frame);
    let keep = simple && lf.heads.leads_alike(f);
    let mut before = [0u8; MEMO_BYTES];
    if keep {
        let n = frame.len().min(MEMO_BYTES);
        before[..n].copy_from_slice(&frame[..n]);
    }
    let done = rewrite::apply(frame, &off, &o.rewrite, partial).is_ok()
        && o.embedded
            .is_none_or(|e| embedded::rewrite(frame, &off, &e));
    if done && keep {
        let n = frame.len().min(MEMO_BYTES);
        lf.patch
            .make(f, (&before[..n], &frame[..n]), &off, (&o.rewrite, partial));
    }
    done
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP packet from port `sport`.
    fn udp(sport: u16) -> Packet {
        Packet {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            fragment: false,
            l4: conntrack::L4::Udp {
                src_port: sport,
                dst_port: 53,
            },
        }
    }

    /// Heads of frames with `alike` ([`NOT_ALIKE`] or a frame) and ingress keys
    /// `ingress`, all of one flow key and packet but where `sport` differs.
    fn heads(alike: &[u32], ingress: &[u16], sport: &[u16]) -> Heads {
        Heads {
            keys: ingress
                .iter()
                .map(|&g| LKey {
                    ingress: g,
                    ..LKey::default()
                })
                .collect(),
            sizes: vec![Some((64, true)); alike.len()],
            ips: sport.iter().map(|&s| udp(s)).collect(),
            alike: alike.to_vec(),
        }
    }

    #[test]
    fn a_run_ends_where_a_frame_alike_to_its_first_differs_in_its_own_keys() {
        // Frames 0..5 alike to frame 0; frame 2 came with another ingress key.
        let h = heads(&[0, 0, 0, 0, 0], &[1, 1, 2, 1, 1], &[7; 5]);
        assert_eq!(run_end(&h, 0), 2);
        assert_eq!(run_end(&h, 2), 3);
        assert_eq!(run_end(&h, 3), 5);
    }

    #[test]
    fn frames_not_alike_join_a_run_by_key_and_packet() {
        // Frame 1 is not memoized but has frame 0's key and packet; frame 2 another
        // packet; frame 3 is alike to another frame than frame 2's.
        let h = heads(&[0, NOT_ALIKE, NOT_ALIKE, 1], &[1; 4], &[7, 7, 8, 8]);
        assert_eq!(run_end(&h, 0), 2);
        assert_eq!(run_end(&h, 2), 4, "frame 3's key and packet are frame 2's");
        let h = heads(&[0, NOT_ALIKE, 2, 2], &[1; 4], &[7, 7, 8, 9]);
        assert_eq!(
            run_end(&h, 2),
            4,
            "alike frames: their packet is the first's"
        );
    }
}
