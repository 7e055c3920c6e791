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
pub mod parse;
pub mod program;
pub mod rewrite;

use flowcache::FlowKey;
use ovn_lflow::Field;

use self::program::{Cache, LKey, Target, Tunnel, Uncached};
use super::packet::{Action, FrameLoc, Pkt, RxBurst};
use super::pipeline::{Pipeline, Source};
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
    /// Frames handed to the slow path (not implemented here: counted).
    pub punted: u64,
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

/// What one frame's decision is.
enum Decided {
    /// The outputs of a program (cached or just made).
    Program(std::sync::Arc<program::Variant>),
    /// Dropped, for this reason.
    Drop(DropReason),
}

impl Pipeline {
    /// Runs the burst `pkts` of `burst` from `src` (a port of an OVN logical switch
    /// that runs the pipeline, or a tunnel: `from_tunnel` gives each frame's ingress
    /// and egress keys) through the pipeline and forwards it.
    pub(super) fn lflow<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
        from_tunnel: Option<&[(u16, u16)]>,
    ) {
        let mut lf = std::mem::take(&mut self.lflow);
        lf.cache.sync(topo.generation);
        lf.spans.clear();
        lf.targets.clear();
        lf.tunnels.clear();
        lf.buf.clear();
        lf.pkts.clear();
        lf.dests.clear();
        self.actions.clear();
        let counters = src.port.counters(self.pmd);
        let now = ct::now_ms();
        let mut hdr = [0u8; HDR_BYTES];
        for (i, p) in pkts.iter().enumerate() {
            let n = burst.read(p, 0, &mut hdr[..(p.len as usize).min(HDR_BYTES)]);
            if n < 14 {
                counters.drop(DropReason::Runt, 1);
                self.actions.push(Action::Drop(DropReason::Runt));
                lf.spans.push((0, 0));
                continue;
            }
            counters.rx_packets.add(1);
            counters.rx_bytes.add(u64::from(p.len));
            let keys = from_tunnel.map(|k| k[i]);
            let decided =
                self.lflow_decide(topo, src, &mut lf, &hdr[..n], p.len as usize, keys, now);
            let start = lf.targets.len() as u32;
            match decided {
                Decided::Drop(r) => {
                    counters.drop(r, 1);
                    self.actions.push(Action::Drop(r));
                }
                Decided::Program(v) => {
                    let outs = lf_outputs(&mut lf, &v, burst, p, counters);
                    if v.punts > 0 {
                        counters.drop(DropReason::OvnSlowPath, u64::from(v.punts));
                    }
                    if outs == 0 && v.punts > 0 {
                        self.actions.push(Action::Drop(DropReason::OvnSlowPath));
                    } else if outs == 0 {
                        counters.drop(DropReason::OvnPipeline, 1);
                        self.actions.push(Action::Drop(DropReason::OvnPipeline));
                    } else {
                        self.actions.push(Action::Lflow(i as u16));
                    }
                }
            }
            lf.spans.push((start, lf.targets.len() as u32 - start));
        }
        self.lflow = lf;
        self.lap(super::stages::Stage::Classify);
        self.forward(topo, src, queue, burst, pkts);
        self.lflow_rewritten(topo, src, queue);
    }

    /// The decision for one frame (`hdr`: its first bytes; `len`: its length).
    #[allow(clippy::too_many_arguments)]
    fn lflow_decide(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        lf: &mut Lflow,
        hdr: &[u8],
        len: usize,
        keys: Option<(u16, u16)>,
        now: u64,
    ) -> Decided {
        let Some(pipeline) = topo.ovn.pipeline.as_ref() else {
            return Decided::Drop(DropReason::OvnPipeline);
        };
        let Some(dp) = src.domain_key.vni() else {
            return Decided::Drop(DropReason::OvnUnbound);
        };
        let inport = keys.map_or(src.ovn_key, |k| k.0);
        let (mut flow, off) = parse::flow_of(hdr, inport);
        if let Some((_, egress)) = keys {
            flow.set(Field::LogOutport, u128::from(egress));
        }
        let key = LKey {
            key: FlowKey::extract(hdr, src.in_port, None),
            extra: (flow.get(Field::IpTtl) as u32) << 24
                | (flow.get(Field::IpDscp) as u32) << 18
                | (flow.get(Field::IpEcn) as u32) << 16
                | u32::from(keys.map_or(0, |k| k.1)),
        };
        let pkt = match off.eth_type {
            0x0800 | 0x86dd => off.l3.and_then(|l3| ct::packet(hdr, l3, len)),
            _ => None,
        };
        let sw = &self.switch;
        let mut live = ct::LiveCt::new(&sw.conntrack, &sw.ct_zones, pkt, now);
        let (done, commits) = match lf.cache.get(&key) {
            Some(vs) => match program::run(vs, &mut live) {
                Ok(v) => {
                    let v = v.clone();
                    lf.cache.hits += 1;
                    return refused(&live).unwrap_or(Decided::Program(v));
                }
                Err(partial) => partial,
            },
            None => (Vec::new(), 0),
        };
        lf.cache.misses += 1;
        let outcome = {
            let mut replay = program::Replay::new(&mut live, done, commits);
            pipeline.run(dp, keys.is_some(), flow.clone(), &mut replay)
        };
        if let Some(d) = refused(&live) {
            return d;
        }
        let (v, uncached) = program::compile(&outcome, &flow, topo);
        if uncached == Some(Uncached::SlowPath) {
            lf.punted += 1;
        }
        if uncached.is_none() {
            lf.cache.insert(key, v.clone());
        }
        Decided::Program(std::sync::Arc::new(v))
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

/// The decision for a frame whose commit a limit refused: dropped.
fn refused(live: &ct::LiveCt<'_>) -> Option<Decided> {
    live.refused.map(|r| {
        Decided::Drop(match r {
            conntrack::Refused::ZoneFull => DropReason::CtZoneFull,
            conntrack::Refused::TableFull => DropReason::CtTableFull,
        })
    })
}

/// Adds frame `p`'s outputs of program `v`: unchanged ones to its targets, changed ones
/// copied and rewritten for the second pass; returns how many.
fn lf_outputs<'m, B: RxBurst<'m>>(
    lf: &mut Lflow,
    v: &program::Variant,
    burst: &B,
    p: &Pkt,
    counters: &crate::model::stats::PortCounters,
) -> usize {
    let mut n = 0;
    for step in &v.steps {
        let program::PStep::Out(o) = step else {
            continue;
        };
        let target = match o.target {
            Target::Port(port) => super::forward::Target::port(port),
            Target::Tunnel(t) => lf.tunnel(t),
            Target::Drop(r) => {
                counters.drop(r, 1);
                continue;
            }
        };
        n += 1;
        if o.rewrite.is_empty() {
            lf.targets.push(target);
            continue;
        }
        let start = lf.buf.len();
        lf.buf.resize(start + p.len as usize, 0);
        let got = burst.read(p, 0, &mut lf.buf[start..]);
        lf.buf.truncate(start + got);
        let (_, off) = parse::flow_of(&lf.buf[start..], 0);
        if rewrite::apply(&mut lf.buf[start..], &off, &o.rewrite).is_err() {
            lf.buf.truncate(start);
            counters.drop(DropReason::OvnPipeline, 1);
            n -= 1;
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
    n
}
