//! What the logical pipeline decided for a flow, cached as a short program (DESIGN.md
//! §7): connection tracking steps, commits, and outputs (a local port or a tunnel,
//! with the header fields to rewrite), keyed by the frame's flow key and, after each
//! connection tracking step, by the step's result (Open vSwitch's recirculation).
//!
//! A key holds a few [`Variant`]s, one per sequence of conntrack results met so far
//! (a connection's first packet, then its established ones). Running a frame walks a
//! variant's steps: each `ct` step is one conntrack lookup, and a result the variant
//! did not see switches to a variant that did; none did: a miss, and the interpreter
//! runs, told the results already obtained so that no step runs twice
//! ([`Replay`]). What the pipeline decides from fields outside the key (ARP, neighbour
//! discovery), or hands to the slow path, or learns from, is never cached.

use std::collections::HashMap;

use flowcache::{FlowKey, KeyMask};
use ovn_lflow::{Field, Flow};

use super::ct::LiveCt;
use super::wild::{self, RelResult};
use crate::model::fdb::PortId;
use crate::model::lflow::{
    AffinityKey, CtReq, CtResult, Dest, McastOut, Origin, Outcome, SlowDest, Step, Tracker,
};
use crate::model::ovn::LocalOut;
use crate::model::stats::DropReason;
use crate::model::tunnel::RemoteId;
use crate::switch::topology::Topology;

/// Keys a PMD's cache holds at most; beyond, it starts over.
pub const MAX_KEYS: usize = 65_536;
/// Variants one key holds at most.
pub const MAX_VARIANTS: usize = 8;
/// Most sets of parts left out (with address prefixes: Open vSwitch's subtables) a
/// cache looks a missed key up under; a program of another set is cached exactly.
pub const MAX_MASKS: usize = 16;

/// A frame's cache key: its flow key, the IP fields the flow key leaves out that a
/// logical pipeline reads (TTL: `ip.ttl == {0, 1}` in routers; TOS), for a frame from
/// a tunnel the keys of OVN's option, and its size class (what `check_pkt_larger`
/// answers for it: [`size_class`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct LKey {
    /// The flow key (ports and domain in `in_port`).
    pub key: FlowKey,
    /// TTL << 24 | DSCP << 18 | ECN << 16 | egress key.
    pub extra: u32,
    /// The ingress key of a frame from a tunnel (0: from a port).
    pub ingress: u16,
    /// [`size_class`] of the frame.
    pub size: u8,
}

/// How many of `sizes` (sorted: the lengths a pipeline's `check_pkt_larger` actions
/// compare with) a frame of `size` bytes exceeds. Frames of one class get the same
/// answer from each `check_pkt_larger`; with no such action every frame is of class 0
/// and the check costs nothing.
#[inline]
pub fn size_class(sizes: &[u16], size: u32) -> u8 {
    sizes.partition_point(|&s| u32::from(s) < size) as u8
}

/// A Geneve destination of OVN's: the remote chassis' endpoint, the datapath (the
/// VNI) and the option's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tunnel {
    /// The remote endpoint.
    pub remote: RemoteId,
    /// The VNI: the datapath's key.
    pub vni: u32,
    /// The ingress port key.
    pub ingress: u16,
    /// The egress port or group key.
    pub egress: u16,
}

/// Where an output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A local port.
    Port(PortId),
    /// A provider network's uplink, with the network's VLAN (0: untagged).
    Uplink(PortId, u16),
    /// A tunnel.
    Tunnel(Tunnel),
    /// Nowhere: dropped and counted.
    Drop(DropReason),
}

impl Target {
    /// Where the slow path sends a frame it made for this target (`None`: dropped).
    pub fn slow_dest(self) -> Option<SlowDest> {
        Some(match self {
            Target::Port(p) => SlowDest::Port(p),
            Target::Uplink(p, vlan) => SlowDest::Uplink(p, vlan),
            Target::Tunnel(t) => SlowDest::Tunnel {
                remote: t.remote,
                vni: t.vni,
                ingress: t.ingress,
                egress: t.egress,
            },
            Target::Drop(_) => return None,
        })
    }
}

/// One output: where, and the header fields to rewrite (none: the frame as received).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    /// Where.
    pub target: Target,
    /// (field, value) to write.
    pub rewrite: Box<[(Field, u128)]>,
    /// An ICMP error about a translated connection: the endpoints its embedded header
    /// gets ([`super::embedded::rewrite`]).
    pub embedded: Option<conntrack::Endpoints>,
}

impl Out {
    /// Whether the frame goes out as received.
    pub fn unchanged(&self) -> bool {
        self.rewrite.is_empty() && self.embedded.is_none()
    }
}

/// One step of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PStep {
    /// A conntrack step whose result the rest depends on (`ct_next`, `ct_dnat`,
    /// `ct_lb_mark`...): its conntrack action, made once, not per frame.
    Ct(conntrack::CtAction),
    /// A `ct_lb_mark` among several backends: the request with the backend the
    /// packet's hash picks.
    CtLb(CtReq, std::sync::Arc<crate::model::lflow::LbPick>),
    /// A `ct_commit`: its conntrack action, made once, not per frame.
    Commit(conntrack::CtAction),
    /// An output.
    Out(Out),
}

/// One path through the pipeline: its steps and the conntrack results it met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The result of each `ct` step, in order.
    pub ct: Vec<CtResult>,
    /// The steps.
    pub steps: Vec<PStep>,
    /// Outputs the slow path would build (controller actions).
    pub punts: u16,
    /// The datapaths it crossed, with their versions when it was made: it stays valid
    /// in a new pipeline where each has the same version.
    pub dps: Box<[(u32, u64)]>,
    /// A wildcard program's results relative to the packet before each step
    /// ([`wild`]), compared in their place; `None` in an exact program.
    pub rel: Option<Box<[RelResult]>>,
    /// Where its switch sent an IP multicast frame, for snooping's counters.
    pub mcast: Option<McastOut>,
}

impl Variant {
    /// Whether its frames go out as received to at least one place, and nowhere
    /// else: each of them goes where the one before went.
    pub fn plain(&self) -> bool {
        let mut outs = self.steps.iter().filter_map(|s| match s {
            PStep::Out(o) => Some(o),
            _ => None,
        });
        outs.clone().next().is_some()
            && outs.all(|o| o.unchanged() && !matches!(o.target, Target::Drop(_)))
    }
}

/// A PMD's program cache. Programs live in slots named by a hash index; the last key
/// found and its slot are remembered, so that consecutive frames of one flow find
/// their programs without hashing (the L2 path's last-flow check).
///
/// A new topology whose only change is the pipeline (the same
/// [`Topology::lflow_epoch`]) keeps the programs whose datapaths kept their versions:
/// an ACL added to one switch costs the interpreter runs of that switch's flows, not of
/// every flow. Any other change empties the cache.
///
/// Beside the exact keys, wildcard keys ([`wild`]): a key with the parts its program
/// never read left out and each address cut to the prefix it read, under each such
/// mask so far (at most [`MAX_MASKS`]: Open vSwitch's subtables), looked up when the
/// exact key misses.
#[derive(Debug, Default)]
pub struct Cache {
    index: HashMap<LKey, u32, rustc_hash::FxBuildHasher>,
    wild: HashMap<(KeyMask, LKey), u32, rustc_hash::FxBuildHasher>,
    /// The sets of parts left out in `wild`, in the order they came.
    masks: Vec<KeyMask>,
    programs: Vec<Vec<Variant>>,
    last: Option<(LKey, u32)>,
    generation: u64,
    epoch: u64,
    /// The pipeline's `check_pkt_larger` lengths the keys' size classes count.
    sizes: Vec<u16>,
    /// Programs kept by new pipelines (their datapaths unchanged).
    pub kept: u64,
    /// Programs dropped by new pipelines or other changes.
    pub dropped: u64,
}

impl Cache {
    /// Adopts topology `topo`: keeps what is still valid in it.
    pub fn sync(&mut self, topo: &Topology) {
        if self.generation == topo.generation {
            return;
        }
        self.generation = topo.generation;
        let same_epoch = std::mem::replace(&mut self.epoch, topo.lflow_epoch) == topo.lflow_epoch;
        let pipeline = topo.ovn.pipeline.as_deref();
        // Other lengths give the size classes in the keys other meanings.
        let sizes = pipeline.map_or(&[][..], |p| p.sizes());
        let same_sizes = self.sizes == sizes;
        if !same_sizes {
            self.sizes = sizes.to_vec();
        }
        match pipeline {
            Some(p) if same_epoch && same_sizes && p.cacheable() => {
                self.retain(|v| v.dps.iter().all(|&(dp, ver)| p.version(dp) == Some(ver)))
            }
            _ => {
                self.dropped += self.programs.iter().map(|vs| vs.len() as u64).sum::<u64>();
                self.clear();
            }
        }
    }

    /// Keeps the variants `valid` says are, and the keys with any left.
    fn retain(&mut self, valid: impl Fn(&Variant) -> bool) {
        let mut programs = std::mem::take(&mut self.programs);
        let index = std::mem::take(&mut self.index);
        let wild = std::mem::take(&mut self.wild);
        self.last = None;
        let mut keep =
            |slot: u32, programs: &mut Vec<Vec<Variant>>, kept: &mut Vec<Vec<Variant>>| {
                let mut vs = std::mem::take(&mut programs[slot as usize]);
                let before = vs.len();
                vs.retain(&valid);
                self.kept += vs.len() as u64;
                self.dropped += (before - vs.len()) as u64;
                (!vs.is_empty()).then(|| {
                    kept.push(vs);
                    kept.len() as u32 - 1
                })
            };
        let mut kept = Vec::new();
        for (key, slot) in index {
            if let Some(s) = keep(slot, &mut programs, &mut kept) {
                self.index.insert(key, s);
            }
        }
        for (key, slot) in wild {
            if let Some(s) = keep(slot, &mut programs, &mut kept) {
                self.wild.insert(key, s);
            }
        }
        self.programs = kept;
    }

    fn clear(&mut self) {
        self.index.clear();
        self.wild.clear();
        self.masks.clear();
        self.programs.clear();
        self.last = None;
    }

    /// Adds `v` (with its relative results) for the wildcard key of `key` without
    /// the parts `w`.
    pub fn insert_wild(&mut self, key: &LKey, w: KeyMask, v: Variant) {
        if self.index.len() + self.wild.len() >= MAX_KEYS {
            self.clear();
        }
        if !self.masks.contains(&w) {
            if self.masks.len() >= MAX_MASKS {
                return;
            }
            self.masks.push(w);
        }
        let k = (w, key.without(w));
        let slot = match self.wild.get(&k) {
            Some(&slot) => slot,
            None => {
                let slot = self.programs.len() as u32;
                self.programs.push(Vec::new());
                self.wild.insert(k, slot);
                slot
            }
        };
        push_variant(&mut self.programs[slot as usize], v);
    }

    /// The variants of `key`, or else of the wildcard key it falls under when the
    /// frame's endpoints are `received()` (a TCP or UDP frame), with those endpoints
    /// (for [`run`]). `received` is called only when the exact key misses.
    pub fn find(
        &mut self,
        key: &LKey,
        received: impl FnOnce() -> Option<conntrack::Endpoints>,
    ) -> Option<(&[Variant], Option<conntrack::Endpoints>)> {
        let exact = match self.last {
            Some((k, slot)) if k == *key => Some(slot),
            _ => self.index.get(key).copied(),
        };
        if let Some(slot) = exact {
            self.last = Some((*key, slot));
            return Some((&self.programs[slot as usize], None));
        }
        if self.masks.is_empty() {
            return None;
        }
        let received = received()?;
        let slot = self
            .masks
            .iter()
            .find_map(|&w| self.wild.get(&(w, key.without(w))).copied())?;
        Some((&self.programs[slot as usize], Some(received)))
    }

    /// Adds `v` for `key`.
    pub fn insert(&mut self, key: LKey, v: Variant) {
        if self.index.len() + self.wild.len() >= MAX_KEYS {
            self.clear();
        }
        let slot = match self.index.get(&key) {
            Some(&slot) => slot,
            None => {
                let slot = self.programs.len() as u32;
                self.programs.push(Vec::new());
                self.index.insert(key, slot);
                slot
            }
        };
        push_variant(&mut self.programs[slot as usize], v);
    }

    /// Keys held, exact and wildcard.
    pub fn len(&self) -> usize {
        self.index.len() + self.wild.len()
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Adds `v` to a key's variants, the oldest going when they are [`MAX_VARIANTS`].
fn push_variant(vs: &mut Vec<Variant>, v: Variant) {
    if vs.len() >= MAX_VARIANTS {
        vs.remove(0);
    }
    vs.push(v);
}

impl LKey {
    /// The key without the parts `w` (the rest as it is).
    pub fn without(&self, w: KeyMask) -> LKey {
        LKey {
            key: self.key.masked(w),
            ..*self
        }
    }
}

/// Most `ct` steps a cached program takes (OVN's switch and router stages take two
/// per datapath crossed at most); a longer path is never cached.
pub const MAX_CT_STEPS: usize = 8;

/// Runs the cached program of a frame: each `ct` step a lookup, each commit a commit;
/// the variant whose results match, or, on a miss, the results obtained so far and the
/// commits done (for [`Replay`]). Allocates nothing on a hit, and compares each step's
/// result once: the results before it are those of the variant being followed.
///
/// `received`: the frame's endpoints when `variants` are a wildcard key's, whose
/// results are compared relative to the packet before each step ([`wild`]).
pub fn run<'v>(
    variants: &'v [Variant],
    ct: &mut LiveCt<'_>,
    received: Option<conntrack::Endpoints>,
) -> Result<&'v Variant, Partial> {
    Walk::new(variants, received).finish(ct)
}

/// What a frame's program obtained before it missed: the `ct` results in order and
/// the commits done ([`Replay`]).
pub type Partial = (Vec<CtResult>, usize);

/// Where a frame is in its key's program: the variant it follows, its next step, and
/// the `ct` results and commits so far. [`run`] walks one frame to the end; a run of
/// frames of one flow ([`super::batch`]) walks them in step, as one walk while their
/// results agree.
#[derive(Debug, Clone, Copy)]
pub struct Walk<'v> {
    variants: &'v [Variant],
    v: &'v Variant,
    /// The next step's index in `v.steps`.
    at: usize,
    /// `ct` results taken.
    k: usize,
    commits: usize,
    /// The frame's endpoints (wildcard variants), and the packet's before the next step.
    received: Option<conntrack::Endpoints>,
    before: Option<conntrack::Endpoints>,
}

impl<'v> Walk<'v> {
    /// At the first step of `variants` (of one key; not empty).
    pub fn new(variants: &'v [Variant], received: Option<conntrack::Endpoints>) -> Self {
        Walk {
            variants,
            v: &variants[0],
            at: 0,
            k: 0,
            commits: 0,
            received,
            before: received,
        }
    }

    /// The step at hand; `None` at the end.
    #[inline]
    pub fn next(&self) -> Option<&'v PStep> {
        self.v.steps.get(self.at)
    }

    /// The variant followed so far (the frame's, at the end).
    pub fn variant(&self) -> &'v Variant {
        self.v
    }

    /// The steps left of each variant whose results so far are the walk's: the paths
    /// a frame at this point may still take (an exact key's variants: with the same
    /// results, they took the same steps so far).
    pub fn ahead(&self) -> impl Iterator<Item = &'v [PStep]> + '_ {
        let (k, at) = (self.k, self.at);
        let seen = self.v.ct.get(..k);
        self.variants
            .iter()
            .filter(move |w| w.ct.get(..k) == seen)
            .map(move |w| w.steps.get(at..).unwrap_or(&[]))
    }

    /// Whether another `ct` step may be taken (a longer path is never cached).
    #[inline(always)]
    pub fn may_take(&self) -> Result<(), Partial> {
        if self.k == MAX_CT_STEPS {
            return Err((results(self.v, self.k, self.received), self.commits));
        }
        Ok(())
    }

    /// Takes `r`, the result of the `ct` step at hand: on to the variant that saw it,
    /// or the miss. (Inlined always: called, it kept the walk in memory, and each
    /// step's result was copied into the call.)
    #[inline(always)]
    pub fn took(&mut self, r: CtResult) -> Result<(), Partial> {
        let (k, v) = (self.k, self.v);
        let rel = self.before.map(|b| RelResult::of(&r, &b));
        let same = |w: &Variant, n: usize| match (&w.rel, rel) {
            (Some(wr), Some(rel)) => rel.is_some_and(|rel| wr.get(n) == Some(&rel)),
            _ => w.ct.get(n) == Some(&r),
        };
        let seen = |w: &Variant| match (&w.rel, &v.rel) {
            (Some(wr), Some(vr)) => wr.get(..k) == vr.get(..k),
            _ => w.ct.get(..k) == v.ct.get(..k),
        };
        if !same(v, k) {
            // Another variant with these results took the same steps so far.
            match self.variants.iter().find(|w| same(w, k) && seen(w)) {
                Some(w) => self.v = w,
                None => {
                    let mut done = results(v, k, self.received);
                    done.push(r);
                    return Err((done, self.commits));
                }
            }
        }
        // Written only for a wildcard program, in place: rewriting the field whole
        // each step (also when `None`) stalled the next read of the walk.
        if let Some(b) = &mut self.before {
            *b = wild::after(*b, &r);
        }
        self.k += 1;
        self.at += 1;
        Ok(())
    }

    /// Past the commit at hand.
    #[inline]
    pub fn committed(&mut self) {
        self.commits += 1;
        self.at += 1;
    }

    /// Past the output at hand.
    #[inline]
    pub fn passed(&mut self) {
        self.at += 1;
    }

    /// Runs the steps left, one frame's, on `ct`.
    pub fn finish(mut self, ct: &mut LiveCt<'_>) -> Result<&'v Variant, Partial> {
        while let Some(step) = self.next() {
            match step {
                PStep::Ct(act) => {
                    self.may_take()?;
                    let r = ct.step(act);
                    self.took(r)?;
                }
                PStep::CtLb(req, pick) => {
                    self.may_take()?;
                    let req = match ct.current() {
                        Some((e, proto)) => pick.request(*req, &e, proto),
                        None => *req,
                    };
                    let r = ct.step(&req.action());
                    self.took(r)?;
                }
                PStep::Commit(act) => {
                    ct.step(act);
                    self.committed();
                }
                PStep::Out(_) => self.passed(),
            }
        }
        Ok(self.v)
    }
}

/// The results of `v`'s first `k` steps for a frame that was `received` (its own:
/// a wildcard variant's are relative).
fn results(v: &Variant, k: usize, received: Option<conntrack::Endpoints>) -> Vec<CtResult> {
    match (&v.rel, received) {
        (Some(rel), Some(mut before)) => rel[..k]
            .iter()
            .map(|r| {
                let abs = r.value(&before);
                before = wild::after(before, &abs);
                abs
            })
            .collect(),
        _ => v.ct[..k].to_vec(),
    }
}

/// Conntrack for the interpreter after a miss: the lookups and commits the program
/// already ran are answered from what they gave, the rest run live.
pub struct Replay<'a, 'b> {
    /// The live tracker.
    pub live: &'a mut LiveCt<'b>,
    /// Results of the lookups already run, in order.
    pub done: Vec<CtResult>,
    /// Commits already run.
    pub commits: usize,
    next: usize,
}

impl<'a, 'b> Replay<'a, 'b> {
    /// Replays `done` lookups and `commits` commits, then runs live.
    pub fn new(live: &'a mut LiveCt<'b>, done: Vec<CtResult>, commits: usize) -> Self {
        Replay {
            live,
            done,
            commits,
            next: 0,
        }
    }
}

impl Tracker for Replay<'_, '_> {
    fn ct(&mut self, req: &CtReq, pkt: (&Flow, &Origin)) -> CtResult {
        if req.is_plain_commit() {
            if self.commits > 0 {
                self.commits -= 1;
                return CtResult::default();
            }
        } else if let Some(r) = self.done.get(self.next) {
            self.next += 1;
            return *r;
        }
        self.live.ct(req, pkt)
    }

    fn zone(&mut self, dp: u32, port: u16) -> u16 {
        self.live.zone(dp, port)
    }

    fn lb_affinity(&mut self, key: &AffinityKey) -> Option<(std::net::IpAddr, u16)> {
        self.live.lb_affinity(key)
    }

    fn commit_lb_affinity(&mut self, key: AffinityKey, b: (std::net::IpAddr, u16), t: u16) {
        self.live.commit_lb_affinity(key, b, t);
    }
}

/// What an outcome needs beyond a program: the slow path builds its frames, or the
/// chassis learns from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncached {
    /// An output whose frame the slow path builds (a controller action, a rewrite
    /// this path does not do in place).
    SlowPath,
    /// The pipeline learns (MAC bindings, FDB) or logs.
    Learns,
    /// The pipeline reported an error.
    Error,
    /// The frame's decision rests on fields outside the cache key (ARP, neighbour
    /// discovery).
    Unkeyed,
}

/// The program of `outcome` for a frame with fields `flow` in `topo`, and whether it
/// can be cached (not when it reads fields outside the key: ARP and ND frames).
pub fn compile(outcome: &Outcome, flow: &Flow, topo: &Topology) -> (Variant, Option<Uncached>) {
    let pipeline = topo.ovn.pipeline.as_deref();
    let version = |dp: u32| pipeline.and_then(|p| p.version(dp)).unwrap_or(0);
    let mut v = Variant {
        ct: Vec::new(),
        steps: Vec::new(),
        punts: 0,
        dps: outcome
            .datapaths
            .iter()
            .map(|&dp| (dp, version(dp)))
            .collect(),
        rel: None,
        mcast: outcome.mcast,
    };
    let mut why = outcome.error.as_ref().map(|_| Uncached::Error);
    // The embedded header of an ICMP error as the last step that translated it left it.
    let mut embedded = None;
    for s in &outcome.steps {
        match s {
            Step::Ct { req, result, pick } => {
                v.ct.push(*result);
                v.steps.push(match pick {
                    Some(p) => PStep::CtLb(*req, p.clone()),
                    None => PStep::Ct(req.action()),
                });
                embedded = result.nat.and_then(|n| n.inner).or(embedded);
            }
            Step::Commit { zone, commit } => v
                .steps
                .push(PStep::Commit(CtReq::commit(*zone, *commit).action())),
            Step::Output(o) => {
                let rewrite = super::rewrite::diff(flow, &o.flow);
                if o.origin != Origin::Received || super::rewrite::supported(&rewrite).is_err() {
                    why = Some(Uncached::SlowPath);
                    v.punts += 1;
                    continue;
                }
                v.steps.push(PStep::Out(Out {
                    target: target(&o.dest, topo),
                    rewrite: rewrite.into_boxed_slice(),
                    embedded,
                }));
            }
            Step::PutMacBinding { .. }
            | Step::PutFdb { .. }
            | Step::Log
            | Step::SvcCheck
            | Step::Igmp
            | Step::Affinity
            | Step::Await(_) => {
                why = why.or(Some(Uncached::Learns));
            }
        }
    }
    let sent = v.punts > 0 || v.steps.iter().any(|s| matches!(s, PStep::Out(_)));
    if outcome.unregistered_mcast && !sent {
        // Counted as the L2 rules count it; never twice (the caller counts a
        // frame without outputs only when no output counted its drop).
        v.steps.push(PStep::Out(Out {
            target: Target::Drop(DropReason::McastUnregistered),
            rewrite: Box::new([]),
            embedded: None,
        }));
    }
    if why.is_none() && !keyed(flow) {
        why = Some(Uncached::Unkeyed);
    }
    if v.ct.len() > MAX_CT_STEPS {
        why = why.or(Some(Uncached::Unkeyed));
    }
    (v, why)
}

/// Whether a pipeline decides `flow` from the cache key alone: not ARP (its fields are
/// not in the key), not neighbour discovery (the target and options are not).
fn keyed(flow: &Flow) -> bool {
    match flow.get(Field::EthType) {
        0x0806 | 0x8035 => false,
        0x86dd => {
            !(flow.get(Field::IpProto) == 58 && (133..=137).contains(&flow.get(Field::Icmpv6Type)))
        }
        _ => true,
    }
}

/// Where `dest` is in `topo`.
pub fn target(dest: &Dest, topo: &Topology) -> Target {
    match dest {
        Dest::Local { dp, port } => match topo.ovn.local_out(*dp, *port) {
            Some(LocalOut::Port(p)) => Target::Port(p),
            Some(LocalOut::Uplink(p, vlan)) => Target::Uplink(p, vlan),
            None => Target::Drop(DropReason::NoDestination),
        },
        Dest::Remote {
            chassis,
            dp,
            inport,
            outport,
        } => topo.ovn.remote_of.get(chassis).map_or(
            Target::Drop(DropReason::NoDestination),
            |&remote| {
                Target::Tunnel(Tunnel {
                    remote,
                    vni: *dp,
                    ingress: *inport,
                    egress: *outport,
                })
            },
        ),
        Dest::Nowhere { .. } => Target::Drop(DropReason::NoDestination),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant() -> Variant {
        Variant {
            ct: Vec::new(),
            steps: Vec::new(),
            punts: 0,
            dps: Box::new([]),
            rel: None,
            mcast: None,
        }
    }

    /// Programs under up to [`MAX_MASKS`] masks are found by any key they cover; one
    /// under another mask is not kept as a wildcard.
    #[test]
    fn a_wildcard_program_covers_its_prefix_under_at_most_max_masks() {
        let key = |dst: u8| {
            let mut f = vec![0u8; 60];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&46u16.to_be_bytes());
            f[23] = 17;
            f[30..34].copy_from_slice(&[10, 0, 0, dst]);
            LKey {
                key: FlowKey::extract(&f, 1, None),
                ..LKey::default()
            }
        };
        let mut cache = Cache::default();
        let mask = |bits: u8| KeyMask {
            ip_dst_bits: bits,
            ..KeyMask::whole(flowcache::Wildcards::L4_SRC)
        };
        for bits in 0..=MAX_MASKS as u8 {
            cache.insert_wild(&key(200), mask(32 - bits), variant());
        }
        let r = || None;
        assert!(
            cache.find(&key(201), r).is_none(),
            "no endpoints, no wildcard"
        );
        let ep = || {
            let a = std::net::Ipv4Addr::new(10, 0, 0, 1).into();
            Some(conntrack::Endpoints {
                src: a,
                dst: a,
                src_port: 1,
                dst_port: 2,
            })
        };
        assert!(cache.find(&key(201), ep).is_some(), "201 is in 200's /31");
        // The masks kept: /32 down to /17; 10.0.0.0/16 was not kept.
        assert_eq!(cache.masks.len(), MAX_MASKS);
        assert!(!cache.masks.contains(&mask(32 - MAX_MASKS as u8)));
        assert!(
            cache.find(&key(1), ep).is_some(),
            "10.0.0.1 is in 200's /24"
        );
    }

    #[test]
    fn a_size_class_counts_the_lengths_a_frame_exceeds() {
        assert_eq!(size_class(&[], 65_000), 0, "no check_pkt_larger: one class");
        let sizes = [1414, 1518];
        assert_eq!(size_class(&sizes, 60), 0);
        assert_eq!(size_class(&sizes, 1414), 0, "not larger: equal");
        assert_eq!(size_class(&sizes, 1415), 1);
        assert_eq!(size_class(&sizes, 1518), 1);
        assert_eq!(size_class(&sizes, 9014), 2);
    }
}
