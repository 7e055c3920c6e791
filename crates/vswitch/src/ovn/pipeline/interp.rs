//! The interpreter: a packet's logical flow through the pipelines of the local
//! datapaths, as OVN defines their execution (ovn-architecture(7), "Logical
//! Pipelines"; `ovn-trace`'s `trace__` and one `execute_*` per action, which this
//! module follows function for function).
//!
//! - A table runs the actions of its highest-priority matching flow; no match drops.
//! - `next` and `output` continue in place: the actions after them still run (OVS
//!   `resubmit` semantics), so `clone`-like forks are explicit.
//! - `output` in an ingress pipeline runs the egress pipeline of each destination
//!   (each member of a multicast group) with every register but `inport` and
//!   `outport` zeroed, skipping the source unless `flags.loopback` is set; a
//!   destination bound to another chassis is a tunnel to it instead (its chassis runs
//!   egress). `output` in an egress pipeline delivers, or, through a patch port, runs
//!   the peer datapath's ingress with registers, flags and connection state cleared
//!   (ovn-controller `physical.c`; the distributed router runs on the sending chassis).
//! - Connection tracking is asked through [`Tracker`]: `ct_next` (and `ct_lb_mark`
//!   without backends, `ct_commit_nat`) looks the packet up in the zone of the
//!   logical port (`inport` in ingress, `outport` in egress; a router's own zone) and
//!   resumes at the next table with the result; `ct_commit` writes.
//! - Controller actions (`arp`, `icmp4`, `nd_na`, `tcp_reset`, `put_dhcp_opts`...)
//!   transform the packet as `ovn-trace` does and run their nested actions at once;
//!   the outputs they lead to carry how the slow path builds the frame ([`Origin`]).
//!
//! The result ([`Outcome`]) lists what happened in order: connection tracking steps
//! with their results, outputs with the packet's final fields, and requests to the
//! chassis (MAC bindings to learn). A trace tree ([`Node`]) is built on request.

use std::sync::Arc;

use ovn_lflow::actions::Pipeline;
use ovn_lflow::{Action, Actions, Field, FieldRef, Flow, Subfield};

use super::nat;
use super::tables::{Datapath, LPort, Location, Pipelines};
use crate::config::MacAddr;
pub use crate::model::lflow::{
    cs, Awaited, Commit, CtReq, CtResult, Dest, Origin, Outcome, Output, Step, Tracker, DNAT_ZONE,
    SNAT_ZONE,
};
use crate::model::lflow::{LbPick, McastOut};

/// Which of a datapath's zones a step runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ZoneOf {
    /// `MFF_LOG_CT_ZONE` on a switch (the logical port's), the DNAT zone on a router.
    Ct,
    /// `MFF_LOG_DNAT_ZONE` (also the common zone of `_in_czone`).
    Dnat,
    /// `MFF_LOG_SNAT_ZONE`.
    Snat,
}

/// What a trace node says (`ovn-trace`'s node types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A pipeline entered: `ingress(dp="sw0", inport="vm1")`.
    Pipeline,
    /// A table and the flow that matched.
    Table,
    /// An action.
    Action,
    /// A field the packet changed.
    Modify,
    /// An output.
    Output,
    /// The packet transformed (`ct_next`, `clone`, `arp`...), with what followed.
    Transformation,
    /// An error.
    Error,
}

/// One node of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// What it is.
    pub kind: NodeKind,
    /// What it says.
    pub text: String,
    /// What happened inside it.
    pub subs: Vec<Node>,
}

/// How ports on other chassis are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As a chassis: egress runs only for ports here; others get a tunnel.
    Chassis,
    /// As `ovn-trace`: every port is here.
    Trace,
}

/// Deepest nesting of tables, pipelines and nested actions: `next` nests (a routed
/// packet crosses three datapaths, some 90 tables), so this bounds the recursion, and
/// [`MAX_TABLES`] the work.
const MAX_DEPTH: u32 = 256;
/// Most table lookups in one run.
const MAX_TABLES: u32 = 4096;

/// A packet in the pipeline: its fields and how its frame is made.
#[derive(Debug, Clone)]
struct Pkt {
    flow: Flow,
    origin: Origin,
    /// The original tuple of the packet's translated connection, from its last
    /// connection tracking step (OVS `ct_nw_dst`, `ct_tp_dst`...): `ct_snat_to_vip`
    /// reads the VIP there.
    ct_orig: Option<conntrack::Endpoints>,
}

/// Where in the pipelines an action runs.
#[derive(Clone, Copy)]
struct At<'p> {
    dp: &'p Datapath,
    pipeline: Pipeline,
}

/// Whether a `drop` flow of stage `stage` with match `m` is ovn-northd's drop of IP
/// multicast to unregistered groups (`build_lswitch_ip_mcast_igmp_mld`: priority 80 of
/// `ls_in_l2_lkup`, `ip4.mcast || ip6.mcast`).
fn unregistered_mcast_drop(stage: &str, m: &str) -> bool {
    stage == "ls_in_l2_lkup" && m.contains("ip4.mcast") && m.contains("ip6.mcast")
}

/// Snooping's view of a switch's output to multicast group `name`: one ovn-northd
/// made of IGMP/MLD memberships is named by its address, and `_MC_static` takes
/// unregistered groups (`build_lswitch_ip_mcast_igmp_mld`).
fn mcast_out(name: &str) -> Option<McastOut> {
    if name == crate::ovn::view::MC_STATIC {
        Some(McastOut::Static)
    } else {
        name.parse::<std::net::IpAddr>()
            .is_ok()
            .then_some(McastOut::Registered)
    }
}

/// One run of the pipeline.
pub struct Run<'p, 't, T: Tracker + ?Sized> {
    p: &'p Pipelines,
    ct: &'t mut T,
    mode: Mode,
    out: Outcome,
    tracing: bool,
    depth: u32,
    tables: u32,
    loopback: Subfield,
    /// The packet came from a tunnel: its sender ran ingress; nothing goes back into a
    /// tunnel (split horizon).
    from_tunnel: bool,
    /// The frame's bytes (DHCP options read them; empty when not at hand).
    frame: &'t [u8],
    /// The length `check_pkt_larger` compares (`None`: unknown, as in `ovn-trace`,
    /// which leaves the result unset).
    size: Option<u32>,
    /// The load balancer's choice of the `ct_lb_mark` step being made, for its
    /// [`Step::Ct`].
    pick: Option<Arc<LbPick>>,
}

/// The trace list actions append to, when tracing.
type Tr<'a> = Option<&'a mut Vec<Node>>;

fn push<'a>(tr: &'a mut Tr<'_>, kind: NodeKind, text: impl FnOnce() -> String) -> Tr<'a> {
    let v = tr.as_deref_mut()?;
    v.push(Node {
        kind,
        text: text(),
        subs: Vec::new(),
    });
    v.last_mut().map(|n| &mut n.subs)
}

impl<'p, 't, T: Tracker + ?Sized> Run<'p, 't, T> {
    /// A run over `p`, asking `ct`, reaching other chassis as `mode` says.
    pub fn new(p: &'p Pipelines, ct: &'t mut T, mode: Mode) -> Self {
        let loopback = p
            .symtab
            .subfield("flags.loopback")
            .expect("the OVN symbol table has flags.loopback");
        Run {
            p,
            ct,
            mode,
            out: Outcome::default(),
            tracing: false,
            depth: 0,
            tables: 0,
            loopback,
            from_tunnel: false,
            frame: &[],
            size: None,
            pick: None,
        }
    }

    /// The run with frame `frame` at hand (its whole bytes).
    pub fn with_frame(mut self, frame: &'t [u8]) -> Self {
        self.frame = frame;
        self
    }

    /// The run with a frame of `size` bytes for `check_pkt_larger` (the frame's length
    /// from its Ethernet header, or a TSO frame's segments').
    pub fn with_size(mut self, size: u32) -> Self {
        self.size = Some(size);
        self
    }

    /// Runs `flow` (with `inport` set) through datapath `dp` from the first table of
    /// `pipeline` (ingress for a frame from a port; egress, with `outport` set too, for
    /// a frame from a tunnel). With `trace`, the trace tree is appended to it.
    pub fn run(
        mut self,
        dp: u32,
        pipeline: Pipeline,
        flow: Flow,
        trace: Option<&mut Vec<Node>>,
    ) -> Outcome {
        self.tracing = trace.is_some();
        let mut tr = trace;
        let Some(d) = self.p.datapath(dp) else {
            self.error(&mut tr, format!("unknown datapath {dp}"));
            return self.out;
        };
        self.crossed(d.key);
        let pkt = Pkt {
            flow,
            origin: Origin::Received,
            ct_orig: None,
        };
        let (field, name) = match pipeline {
            Pipeline::Ingress => (Field::LogInport, "inport"),
            Pipeline::Egress => (Field::LogOutport, "outport"),
        };
        let key = pkt.flow.get(field) as u16;
        let mut sub = push(&mut tr, NodeKind::Pipeline, || {
            format!(
                "{}(dp=\"{}\", {name}=\"{}\")",
                pipeline_name(pipeline),
                d.name,
                d.name_of(key)
            )
        });
        let mut pkt = pkt;
        match pipeline {
            Pipeline::Ingress => self.table(d, pipeline, 0, &mut pkt, &mut sub),
            // From a tunnel: OVN's local output (table 40), to the port or to each
            // local member of the group the sender chose.
            Pipeline::Egress => {
                self.from_tunnel = true;
                self.ingress_output(d, key, &pkt, &mut sub);
            }
        }
        self.out
    }

    /// Notes that the run read datapath `key` ([`Outcome::datapaths`]).
    fn crossed(&mut self, key: u32) {
        if !self.out.datapaths.contains(&key) {
            self.out.datapaths.push(key);
        }
    }

    fn error(&mut self, tr: &mut Tr<'_>, msg: String) {
        push(tr, NodeKind::Error, || format!("*** {msg}"));
        self.out.error.get_or_insert(msg);
    }

    /// Looks `pkt` up in table `table` and runs the matching flow's actions.
    fn table(
        &mut self,
        dp: &'p Datapath,
        pipeline: Pipeline,
        table: u8,
        pkt: &mut Pkt,
        tr: &mut Tr<'_>,
    ) {
        self.tables += 1;
        if self.depth >= MAX_DEPTH || self.tables > MAX_TABLES {
            return self.error(tr, "too many resubmits or nested pipelines".into());
        }
        self.depth += 1;
        self.crossed(dp.key);
        let t = dp.tables(pipeline).get(usize::from(table));
        let flow = t.and_then(|t| t.flows.iter().find(|f| f.matcher.matches(&pkt.flow)));
        match flow {
            Some(f) => {
                if self.mode == Mode::Chassis {
                    f.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let stage = t.map_or("", |t| t.stage.as_str());
                let mut sub = push(tr, NodeKind::Table, || {
                    format!(
                        "{table:2}. {stage}: {}, priority {}, uuid {}",
                        f.match_text,
                        f.priority,
                        &f.uuid.to_string()[..8]
                    )
                });
                if f.actions.0.is_empty() && unregistered_mcast_drop(stage, &f.match_text) {
                    self.out.unregistered_mcast = true;
                }
                let at = At { dp, pipeline };
                self.actions(at, &f.actions, pkt, &mut sub);
            }
            None => {
                push(tr, NodeKind::Table, || {
                    let stage = t.map_or("", |t| t.stage.as_str());
                    format!("{table:2}. {stage}: no match (implicit drop)")
                });
            }
        }
        self.depth -= 1;
    }

    /// Runs `acts` on `pkt` (empty: drop).
    fn actions(&mut self, at: At<'p>, acts: &Actions, pkt: &mut Pkt, tr: &mut Tr<'_>) {
        if acts.0.is_empty() {
            push(tr, NodeKind::Action, || "drop;".into());
            return;
        }
        let mut stack: Vec<u128> = Vec::new();
        for a in &acts.0 {
            // `ovn-trace` lists an action's effects beside it, not under it.
            push(tr, NodeKind::Action, || format!("{a}"));
            self.action(at, a, pkt, &mut stack, tr);
        }
    }

    /// One action (ovn-trace.c `trace_actions`).
    fn action(
        &mut self,
        at: At<'p>,
        a: &Action,
        pkt: &mut Pkt,
        stack: &mut Vec<u128>,
        tr: &mut Tr<'_>,
    ) {
        use Action::*;
        match a {
            Output => self.output(at, pkt, tr),
            Next(n) => self.next(at, n.pipeline, n.table, pkt, tr),
            Load(l) | OvnFieldLoad(l) => self.load(at.dp, l, pkt, tr),
            Move(m) => {
                let v = read(&pkt.flow, &m.src);
                modify(tr, &m.dst, || {
                    format!("{} = {}", m.dst, value_text(&m.src, v))
                });
                write(&mut pkt.flow, &m.dst, v);
            }
            Exchange(m) => {
                let (a, b) = (read(&pkt.flow, &m.dst), read(&pkt.flow, &m.src));
                modify(tr, &m.dst, || {
                    format!("{} = {}", m.dst, value_text(&m.src, b))
                });
                modify(tr, &m.src, || {
                    format!("{} = {}", m.src, value_text(&m.dst, a))
                });
                write(&mut pkt.flow, &m.dst, b);
                write(&mut pkt.flow, &m.src, a);
            }
            Push(f) => stack.push(read(&pkt.flow, f)),
            Pop(f) => {
                let v = stack.pop().unwrap_or(0);
                write(&mut pkt.flow, f, v);
            }
            DecTtl => self.dec_ttl(pkt, tr),
            CtNext(t) => {
                let req = CtReq::lookup(self.zone(at, &pkt.flow, ZoneOf::Ct));
                self.ct_next(at, *t, req, a, pkt, tr)
            }
            CtLb(lb) | CtLbMark(lb) => {
                let zone = self.zone(at, &pkt.flow, ZoneOf::Ct);
                let mark = matches!(a, CtLbMark(_));
                match nat::lb_request(zone, lb, mark, &pkt.flow) {
                    Some((req, pick)) => {
                        self.pick = pick;
                        self.ct_next(at, lb.table, req, a, pkt, tr)
                    }
                    None => self.error(
                        tr,
                        "no load balancing backend of the packet's family".into(),
                    ),
                }
            }
            CtCommitNat(t) => {
                let mut req =
                    CtReq::commit(self.zone(at, &pkt.flow, ZoneOf::Ct), Commit::default());
                req.nat = Some(conntrack::Nat::Existing);
                self.ct_next(at, *t, req, a, pkt, tr)
            }
            CtDnat(n) | CtSnat(n) | CtDnatInCzone(n) | CtSnatInCzone(n) => {
                let (dst, which) = match a {
                    CtDnat(_) => (true, ZoneOf::Dnat),
                    CtSnat(_) => (false, ZoneOf::Snat),
                    CtDnatInCzone(_) => (true, ZoneOf::Dnat),
                    _ => (false, ZoneOf::Dnat),
                };
                let req = nat::nat_request(self.zone(at, &pkt.flow, which), n, dst);
                self.ct_next(at, n.table, req, a, pkt, tr)
            }
            CtCommitV1(c) => {
                let commit = Commit {
                    mark: (c.mark, c.mark_mask),
                    label: (c.label, c.label_mask),
                };
                self.commit(at, commit, pkt);
            }
            CtCommitV2(nested) => {
                let commit = commit_of(nested, &pkt.flow);
                self.commit(at, commit, pkt);
            }
            CtClear => {
                clear_ct(&mut pkt.flow);
                pkt.ct_orig = None;
            }
            ChkLbHairpin(dst) => {
                // ovn-trace also asks that the connection's original destination be
                // a VIP (`get_lb_vip_data`): one the pipeline translated.
                let hairpin = nat::is_hairpin(&pkt.flow)
                    && (self.mode == Mode::Chassis || pkt.ct_orig.is_some());
                // ovn-trace shows the register written, whatever its value.
                push(tr, NodeKind::Modify, || {
                    format!("{dst} = {}", u8::from(hairpin))
                });
                write(&mut pkt.flow, dst, u128::from(hairpin));
            }
            ChkLbHairpinReply(dst) => self.chk_lb_hairpin_reply(at, dst, pkt, tr),
            CtSnatToVip => self.ct_snat_to_vip(at, pkt, tr),
            Clone(nested) => {
                let mut copy = pkt.clone();
                let mut sub = push(tr, NodeKind::Transformation, || "clone".into());
                self.nested(at, nested, &mut copy, &mut sub);
            }
            _ if self.mode == Mode::Chassis && ovn_pinctrl::ControllerAction::of(a).is_some() => {
                self.controller_action(at, a, pkt, tr)
            }
            Arp(n) => self.transform(at, n, pkt, "arp", arp_request, tr),
            NdNa(n) => self.transform(at, n, pkt, "nd_na", nd_na, tr),
            NdNaRouter(n) => self.transform(at, n, pkt, "nd_na_router", nd_na, tr),
            NdNs(n) => self.transform(at, n, pkt, "nd_ns", nd_ns, tr),
            Icmp4(n) | Icmp4Error(n) => {
                self.transform(at, n, pkt, a.name(), |f| icmp(f, false, false), tr)
            }
            Icmp6(n) | Icmp6Error(n) => {
                self.transform(at, n, pkt, a.name(), |f| icmp(f, true, false), tr)
            }
            TcpReset(n) => self.transform(at, n, pkt, "tcp_reset", |f| reset(f, 6, false), tr),
            SctpAbort(n) => self.transform(at, n, pkt, "sctp_abort", |f| reset(f, 132, false), tr),
            Reject(n) => self.reject(at, n, pkt, tr),
            GetArp(b) | GetNd(b) => self.get_mac_bind(at.dp, &b.port, &b.ip, pkt, tr),
            LookupArp(b) | LookupNd(b) => {
                let found = self.mac_binding(at.dp, &b.port, &b.ip, &pkt.flow)
                    == Some(mac_of(read(&pkt.flow, &b.mac)));
                write(&mut pkt.flow, &b.dst, u128::from(found));
            }
            LookupArpIp(b) | LookupNdIp(b) => {
                let found = self.mac_binding(at.dp, &b.port, &b.ip, &pkt.flow).is_some();
                write(&mut pkt.flow, &b.dst, u128::from(found));
            }
            PutArp(b) | PutNd(b) => {
                let port = read(&pkt.flow, &b.port) as u16;
                let ip = ip_of(read(&pkt.flow, &b.ip), b.ip.n_bits);
                let mac = mac_of(read(&pkt.flow, &b.mac));
                self.out.steps.push(Step::PutMacBinding {
                    dp: at.dp.key,
                    port,
                    ip,
                    mac,
                });
            }
            PutDhcpv4Opts(o) | PutDhcpv6Opts(o)
                if self.mode == Mode::Chassis && !self.frame.is_empty() =>
            {
                // pinctrl answers (writes 1 and resumes with the reply's fields) or
                // not (writes 0), by the request's bytes.
                let reply = match a {
                    PutDhcpv4Opts(_) => {
                        ovn_pinctrl::put_dhcp_opts(self.frame, &pkt.flow, &o.options)
                    }
                    _ => ovn_pinctrl::put_dhcpv6_opts(self.frame, &pkt.flow, &o.options),
                };
                match reply {
                    Ok(r) => {
                        push(tr, NodeKind::Modify, || format!("{} = 1", o.dst));
                        let resumed = r.resume_flow(&pkt.flow);
                        pkt.flow = resumed;
                        write(&mut pkt.flow, &o.dst, 1);
                        pkt.origin = Origin::Dhcp(Arc::new(r));
                    }
                    Err(e) => {
                        push(tr, NodeKind::Error, || format!("/* no DHCP reply: {e} */"));
                        write(&mut pkt.flow, &o.dst, 0);
                    }
                }
            }
            PutDhcpv4Opts(o) | PutDhcpv6Opts(o) => {
                push(tr, NodeKind::Error, || {
                    "/* We assume that this packet is DHCPDISCOVER or DHCPREQUEST. */".into()
                });
                // `reg0[3] = put_dhcp_opts(...)` shown as `put_dhcp_opts(...)`.
                push(tr, NodeKind::Modify, || {
                    let text = a.to_string();
                    let call = text.split_once(" = ").map_or(text.as_str(), |(_, c)| c);
                    call.trim_end_matches(';').to_string()
                });
                modify(tr, &o.dst, || format!("{} = 1", o.dst));
                write(&mut pkt.flow, &o.dst, 1);
                pkt.origin = Origin::DhcpTraced(Arc::new(o.options.clone()));
            }
            GetFdb { dst, mac } => {
                let port = at
                    .dp
                    .fdb
                    .get(&mac_of(read(&pkt.flow, mac)))
                    .copied()
                    .unwrap_or(0);
                write(&mut pkt.flow, dst, u128::from(port));
            }
            LookupFdb { dst, port, mac } => {
                let p = read(&pkt.flow, port) as u16;
                let found = at.dp.fdb.get(&mac_of(read(&pkt.flow, mac))) == Some(&p);
                write(&mut pkt.flow, dst, u128::from(found));
            }
            PutFdb { port, mac } => {
                let port = read(&pkt.flow, port) as u16;
                let mac = mac_of(read(&pkt.flow, mac));
                self.out.steps.push(Step::PutFdb {
                    dp: at.dp.key,
                    port,
                    mac,
                });
            }
            CheckInPortSec(dst) => {
                let key = pkt.flow.get(Field::LogInport) as u16;
                let refused = at
                    .dp
                    .ports
                    .get(&key)
                    .is_some_and(|p| p.security.refuses_in(&pkt.flow));
                write(&mut pkt.flow, dst, u128::from(refused));
            }
            CheckOutPortSec(dst) => {
                let key = pkt.flow.get(Field::LogOutport) as u16;
                let refused = at
                    .dp
                    .ports
                    .get(&key)
                    .is_some_and(|p| p.security.refuses_out(&pkt.flow));
                write(&mut pkt.flow, dst, u128::from(refused));
            }
            Log(_) => self.out.steps.push(Step::Log),
            HandleSvcCheck(_) => self.out.steps.push(Step::SvcCheck),
            Igmp => self.out.steps.push(Step::Igmp),
            // ovn-trace leaves both alone (no sessions to look at).
            ChkLbAff(_) | CommitLbAff(_) if self.mode == Mode::Trace => {}
            ChkLbAff(dst) => {
                let dp = (at.dp.key, at.dp.router);
                nat::note_tuple_read(&pkt.flow);
                let hit = nat::chk_lb_aff(self.ct, dp, &mut pkt.flow, pkt.ct_orig.as_ref());
                self.out.steps.push(Step::Affinity);
                push(tr, NodeKind::Modify, || {
                    format!("{dst} = {}", u8::from(hit))
                });
                write(&mut pkt.flow, dst, u128::from(hit));
            }
            CheckPktLarger { dst, len } => {
                // `ovn-trace` executes nothing here (the register keeps its value);
                // a chassis compares the frame's length.
                if let Some(size) = self.size {
                    let larger = size > u32::from(*len);
                    modify(tr, dst, || format!("{dst} = {}", u8::from(larger)));
                    write(&mut pkt.flow, dst, u128::from(larger));
                }
            }
            CommitLbAff(a) => {
                nat::commit_lb_aff(self.ct, at.dp.key, &pkt.flow, a);
                self.out.steps.push(Step::Affinity);
            }
            SetMeter { .. } | TriggerEvent(_) | Dhcp6Reply => {}
            other => self.error(tr, format!("{} is not executed here", other.name())),
        }
    }

    fn load(
        &mut self,
        dp: &Datapath,
        l: &ovn_lflow::actions::Load,
        pkt: &mut Pkt,
        tr: &mut Tr<'_>,
    ) {
        let (value, mask) = match &l.value {
            ovn_lflow::actions::Value::Int(i) => (i.value, i.mask),
            // lookup_port_cb: a port or multicast group of the datapath, `none` 0.
            ovn_lflow::actions::Value::Str(s) => (
                u128::from(dp.names.get(s.as_str()).copied().unwrap_or(0)),
                None,
            ),
        };
        modify(tr, &l.dst, || format!("{} = {}", l.dst, l.value));
        match mask {
            Some(m) => {
                let old = read(&pkt.flow, &l.dst);
                write(&mut pkt.flow, &l.dst, (old & !m) | (value & m));
            }
            None => write(&mut pkt.flow, &l.dst, value),
        }
    }

    fn dec_ttl(&mut self, pkt: &mut Pkt, tr: &mut Tr<'_>) {
        let ip = matches!(pkt.flow.get(Field::EthType), 0x0800 | 0x86dd);
        let ttl = pkt.flow.get(Field::IpTtl);
        if !ip {
            self.error(tr, "TTL decrement of non-IP packet".into());
        } else if ttl == 0 {
            self.error(tr, "TTL underflow".into());
        } else {
            pkt.flow.set(Field::IpTtl, ttl - 1);
            push(tr, NodeKind::Modify, || "ip.ttl--".into());
        }
    }

    /// `next(pipeline=P, table=N)` (ovn-trace.c `execute_next`).
    fn next(&mut self, at: At<'p>, pipeline: Pipeline, table: u8, pkt: &mut Pkt, tr: &mut Tr<'_>) {
        if pipeline == at.pipeline {
            return self.table(at.dp, pipeline, table, pkt, tr);
        }
        let (field, name) = match pipeline {
            Pipeline::Ingress => (Field::LogInport, "inport"),
            Pipeline::Egress => (Field::LogOutport, "outport"),
        };
        let key = pkt.flow.get(field) as u16;
        let mut sub = push(tr, NodeKind::Pipeline, || {
            format!(
                "{}(dp=\"{}\", {name}=\"{}\")",
                pipeline_name(pipeline),
                at.dp.name,
                at.dp.name_of(key)
            )
        });
        self.table(at.dp, pipeline, table, pkt, &mut sub);
    }

    /// The zone connection tracking uses at `at` for `flow`.
    /// The zone a step of `which` kind runs in: a switch's own port zone for
    /// `ct_next`, `ct_commit`, `ct_lb_mark` (`inport` in ingress, `outport` in egress),
    /// a router's DNAT zone for those; the datapath's DNAT or SNAT zone for `ct_dnat`
    /// and `ct_snat` (OVN 23.03 `actions.c`, `encode_CT_*`).
    fn zone(&mut self, at: At<'p>, flow: &Flow, which: ZoneOf) -> u16 {
        let port = match which {
            ZoneOf::Dnat => DNAT_ZONE,
            ZoneOf::Snat => SNAT_ZONE,
            ZoneOf::Ct if at.dp.router => DNAT_ZONE,
            ZoneOf::Ct => {
                let field = match at.pipeline {
                    Pipeline::Ingress => Field::LogInport,
                    Pipeline::Egress => Field::LogOutport,
                };
                flow.get(field) as u16
            }
        };
        self.ct.zone(at.dp.key, port)
    }

    /// A connection tracking step that resumes at table `resume` (`ct_next`,
    /// `ct_lb_mark`, `ct_dnat`, `ct_snat`, `ct_commit_nat`): the packet with its
    /// tracked state, and translated when the step translated it; the actions after it
    /// see the original (the pipeline forked, as in OVS).
    fn ct_next(
        &mut self,
        at: At<'p>,
        resume: u8,
        req: CtReq,
        a: &Action,
        pkt: &mut Pkt,
        tr: &mut Tr<'_>,
    ) {
        let tracked = pkt.flow.get(Field::CtState) & u128::from(cs::TRK) != 0;
        let mut r = if self.mode == Mode::Trace && tracked && implies_ct_when_untracked(a) {
            // ovn-trace: ct(nat) implies ct() only for an untracked packet.
            let state = pkt.flow.get(Field::CtState) as u32;
            super::trace::traced_result(&req, &pkt.flow, state)
        } else {
            self.ct.ct(&req, (&pkt.flow, &pkt.origin))
        };
        if self.mode == Mode::Trace && matches!(a, Action::CtLb(_) | Action::CtLbMark(_)) {
            // ovn-trace.c `execute_ct_lb` adds the new state to the packet's old one.
            r.state |= pkt.flow.get(Field::CtState) as u32;
        }
        r.state |= cs::TRK;
        let pick = self.pick.take();
        self.out.steps.push(Step::Ct {
            req,
            result: r,
            pick,
        });
        let mut forked = pkt.clone();
        forked.flow.set(Field::CtState, u128::from(r.state));
        forked.flow.set(Field::CtMark, u128::from(r.mark));
        forked.flow.set(Field::CtLabel, r.label);
        if let Some(n) = &r.nat {
            nat::write_endpoints(&mut forked.flow, &n.packet);
        }
        if let Some(n) = &r.nat {
            forked.ct_orig = Some(n.original);
        }
        let mut sub = push(tr, NodeKind::Transformation, || {
            nat::step_text(a, &req, &r, &pkt.flow, &forked.flow)
        });
        self.table(at.dp, at.pipeline, resume, &mut forked, &mut sub);
    }

    /// `chk_lb_hairpin_reply()`: whether the packet answers a connection a load
    /// balancer hairpinned (a backend that reached its own VIP, whose source
    /// `ct_snat_to_vip` made the VIP): a lookup in the datapath's SNAT zone finds it in
    /// the reply direction of a translated connection. (ovn-controller learns a flow
    /// from the request for the same answer; `ovn-trace` asks the packet's state.)
    fn chk_lb_hairpin_reply(&mut self, at: At<'p>, dst: &FieldRef, pkt: &mut Pkt, tr: &mut Tr<'_>) {
        let reply = if self.mode == Mode::Trace {
            // ovn-trace.c `execute_chk_lb_hairpin` with `dir_orig` false: the VIP's
            // port is the packet's destination port.
            let dport = nat::endpoints_of(&pkt.flow).map(|e| e.dst_port);
            nat::is_hairpin(&pkt.flow) && pkt.ct_orig.map(|o| o.dst_port) == dport
        } else if nat::is_ip(&pkt.flow) {
            let req = CtReq::lookup(self.zone(at, &pkt.flow, ZoneOf::Snat));
            let r = self.ct.ct(&req, (&pkt.flow, &pkt.origin));
            self.out.steps.push(Step::Ct {
                req,
                result: r,
                pick: None,
            });
            r.state & cs::RPL != 0 && r.state & cs::INV == 0 && r.nat.is_some()
        } else {
            false
        };
        push(tr, NodeKind::Modify, || {
            format!("{dst} = {}", u8::from(reply))
        });
        write(&mut pkt.flow, dst, u128::from(reply));
    }

    /// `ct_snat_to_vip`: a hairpinned connection's source becomes the VIP it was sent
    /// to (its original destination), committed in the datapath's SNAT zone, and the
    /// packet goes on translated (ovn-controller's `OFTABLE_CT_SNAT_HAIRPIN`:
    /// `ct(commit, zone=snat, nat(src=VIP))`). `ovn-trace` only notes it.
    fn ct_snat_to_vip(&mut self, at: At<'p>, pkt: &mut Pkt, tr: &mut Tr<'_>) {
        let Some(vip) = pkt.ct_orig.map(|o| o.dst) else {
            return;
        };
        // The connection's original tuple came from the packet's.
        nat::note_tuple_read(&pkt.flow);
        push(tr, NodeKind::Action, || format!("/* nat(src={vip}) */"));
        if self.mode == Mode::Trace {
            return;
        }
        let zone = self.zone(at, &pkt.flow, ZoneOf::Snat);
        let req = nat::snat_to(zone, vip);
        let r = self.ct.ct(&req, (&pkt.flow, &pkt.origin));
        self.out.steps.push(Step::Ct {
            req,
            result: r,
            pick: None,
        });
        if let Some(n) = &r.nat {
            nat::write_endpoints(&mut pkt.flow, &n.packet);
        }
    }

    fn commit(&mut self, at: At<'p>, commit: Commit, pkt: &Pkt) {
        let zone = self.zone(at, &pkt.flow, ZoneOf::Ct);
        self.ct
            .ct(&CtReq::commit(zone, commit), (&pkt.flow, &pkt.origin));
        self.out.steps.push(Step::Commit { zone, commit });
    }

    /// Nested actions in the table the holding flow is in.
    fn nested(&mut self, at: At<'p>, acts: &Actions, pkt: &mut Pkt, tr: &mut Tr<'_>) {
        if self.depth >= MAX_DEPTH {
            return self.error(tr, "actions nested too deep".into());
        }
        self.depth += 1;
        self.actions(at, acts, pkt, tr);
        self.depth -= 1;
    }

    /// A controller action: the packet transformed by `f`, then the nested actions.
    fn transform(
        &mut self,
        at: At<'p>,
        acts: &Actions,
        pkt: &Pkt,
        name: &'static str,
        f: impl FnOnce(&mut Flow),
        tr: &mut Tr<'_>,
    ) {
        let mut new = Pkt {
            flow: pkt.flow.clone(),
            origin: Origin::Traced(name),
            ct_orig: None,
        };
        f(&mut new.flow);
        let mut sub = push(tr, NodeKind::Transformation, || name.into());
        self.nested(at, acts, &mut new, &mut sub);
    }

    /// A controller action as this chassis runs it: the packet ovn-controller's pinctrl
    /// would build (its fields from `ovn_pinctrl::start_flow`), then the nested actions;
    /// the frame is built at the output from the fields at the action. Where pinctrl
    /// sends nothing (say, a `reject` in answer to a reset), nothing runs.
    fn controller_action(&mut self, at: At<'p>, a: &Action, pkt: &Pkt, tr: &mut Tr<'_>) {
        let Some((action, acts)) = ovn_pinctrl::ControllerAction::of(a) else {
            return;
        };
        let flow = match ovn_pinctrl::start_flow(action, &pkt.flow) {
            Ok(f) => f,
            Err(e) => {
                push(tr, NodeKind::Error, || {
                    format!("/* {}: nothing sent: {e} */", action.name())
                });
                return;
            }
        };
        if let Some(ip) = next_hop(action, &pkt.flow) {
            self.out.steps.push(Step::Await(Awaited {
                dp: at.dp.key,
                port: pkt.flow.get(Field::LogOutport) as u16,
                ip,
            }));
        }
        let mut new = Pkt {
            flow,
            origin: Origin::Built {
                action,
                at: Arc::new(pkt.flow.clone()),
            },
            ct_orig: None,
        };
        let mut sub = push(tr, NodeKind::Transformation, || action.name().into());
        self.nested(at, acts, &mut new, &mut sub);
    }

    /// `reject`: a TCP reset, an SCTP abort or an ICMP unreachable back to the sender
    /// (ovn-trace.c `execute_reject`), never in answer to one.
    fn reject(&mut self, at: At<'p>, acts: &Actions, pkt: &Pkt, tr: &mut Tr<'_>) {
        let f = &pkt.flow;
        let v6 = f.get(Field::EthType) == 0x86dd;
        let proto = f.get(Field::IpProto);
        let is_rst = f.get(Field::TcpFlags) == 0x004;
        match proto {
            6 | 132 if is_rst => {}
            6 => self.transform(at, acts, pkt, "tcp_reset", |f| reset(f, 6, true), tr),
            132 => self.transform(at, acts, pkt, "sctp_abort", |f| reset(f, 132, true), tr),
            _ => {
                // ovn-trace compares OVS's `tp_src` with "unreachable": the ICMP type,
                // or another protocol's source port.
                if tp_src(f) == if v6 { 1 } else { 3 } {
                    return;
                }
                let name = if v6 { "icmp6" } else { "icmp4" };
                self.transform(at, acts, pkt, name, |f| icmp(f, v6, true), tr)
            }
        }
    }

    fn mac_binding(
        &self,
        dp: &Datapath,
        port: &FieldRef,
        ip: &FieldRef,
        flow: &Flow,
    ) -> Option<MacAddr> {
        let key = read(flow, port) as u16;
        let ip = ip_of(read(flow, ip), ip.n_bits);
        dp.mac_bindings.get(&(key, ip)).copied()
    }

    /// `get_arp`/`get_nd`: `eth.dst` from the binding, or zero.
    fn get_mac_bind(
        &mut self,
        dp: &Datapath,
        port: &FieldRef,
        ip: &FieldRef,
        pkt: &mut Pkt,
        tr: &mut Tr<'_>,
    ) {
        let mac = self
            .mac_binding(dp, port, ip, &pkt.flow)
            .unwrap_or(MacAddr([0; 6]));
        pkt.flow.set(Field::EthDst, mac_bits(mac));
        push(tr, NodeKind::Modify, || format!("eth.dst = {mac}"));
    }

    /// `output` (ovn-trace.c `execute_output`).
    fn output(&mut self, at: At<'p>, pkt: &Pkt, tr: &mut Tr<'_>) {
        let out = pkt.flow.get(Field::LogOutport) as u16;
        if out == 0 {
            return self.error(tr, "output to null logical port".into());
        }
        match at.pipeline {
            Pipeline::Egress => self.egress_output(at.dp, out, pkt, tr),
            Pipeline::Ingress => self.ingress_output(at.dp, out, pkt, tr),
        }
    }

    /// Ingress `output`: each destination's egress, or a tunnel to its chassis.
    fn ingress_output(&mut self, dp: &'p Datapath, out: u16, pkt: &Pkt, tr: &mut Tr<'_>) {
        let in_key = pkt.flow.get(Field::LogInport) as u16;
        let loopback = pkt.flow.get_subfield(self.loopback) != 0;
        let mut egress = pkt.clone();
        // OVN clears the logical registers before egress (physical.c, table 39) and
        // keeps the flags (a gateway router's `flags.force_snat_for_lb` reaches
        // `lr_out_snat` so); ovn-trace clears the flags too.
        for f in [Field::Xxreg0, Field::Xxreg1, Field::Xreg4] {
            egress.flow.set(f, 0);
        }
        if self.mode == Mode::Trace {
            egress.flow.set(Field::LogFlags, 0);
        }
        if let Some(g) = dp.groups.get(&out) {
            if !dp.router && self.out.mcast.is_none() {
                self.out.mcast = mcast_out(&g.name);
            }
            let mut sub = push(tr, NodeKind::Pipeline, || {
                format!("multicast(dp=\"{}\", mcgroup=\"{}\")", dp.name, g.name)
            });
            let mut chassis: Vec<&str> = Vec::new();
            for &m in &g.members {
                let location = dp.ports.get(&m).map(|p| &p.location);
                if let (Mode::Chassis, Some(l @ (Location::Remote(_) | Location::Multi { .. }))) =
                    (self.mode, location)
                {
                    // With a provider network, the localnet port's copy reaches them
                    // (physical.c: no remote chassis for a group of such a switch).
                    if !self.from_tunnel && dp.localnet.is_none() {
                        for c in remote_chassis(l) {
                            if !chassis.contains(&c) {
                                chassis.push(c);
                            }
                        }
                    }
                    if !l.is_here() {
                        continue;
                    }
                }
                if m == in_key && !loopback {
                    continue;
                }
                egress.flow.set(Field::LogOutport, u128::from(m));
                self.egress(dp, in_key, m, &egress, &mut sub);
            }
            for c in chassis {
                self.tunnel(c, dp, in_key, out, pkt, &mut sub);
            }
            return;
        }
        let Some(port) = dp.ports.get(&out) else {
            return self.error(tr, format!("unknown port or multicast group {out}"));
        };
        if let (Mode::Chassis, Location::Multi { here, remotes }) = (self.mode, &port.location) {
            // On several chassis (a migration): a copy to each, and delivered here
            // when it is active here.
            if self.from_tunnel && !here {
                return self.not_here(dp, port, pkt, tr);
            }
            if !self.from_tunnel {
                for c in remotes {
                    self.tunnel(c, dp, in_key, port.key, pkt, tr);
                }
            }
            if !here {
                return;
            }
        }
        let out = match self.redirect(dp, port, tr) {
            Ok(Some(to)) => to,
            Ok(None) => return self.tunnel_to(dp, port, in_key, pkt, tr),
            Err(e) => return self.error(tr, e),
        };
        if out == in_key && !loopback {
            push(tr, NodeKind::Output, || {
                "/* omitting output because inport == outport && !flags.loopback */".into()
            });
            return;
        }
        egress.flow.set(Field::LogOutport, u128::from(out));
        self.egress(dp, in_key, out, &egress, tr);
    }

    /// Where ingress `output` to `port` of `dp` runs the egress pipeline here: its own
    /// key, the localnet port's when `port` is on another chassis and the switch has a
    /// provider network here (physical.c `PORT_LOCALNET`), the distributed port's when
    /// `port` is a gateway's `chassisredirect` port held here (or when tracing, as
    /// ovn-trace replaces it); None when a tunnel takes it to its chassis.
    fn redirect(
        &self,
        dp: &Datapath,
        port: &LPort,
        tr: &mut Tr<'_>,
    ) -> Result<Option<u16>, String> {
        let remote = self.mode == Mode::Chassis && matches!(port.location, Location::Remote(_));
        if port.kind == "chassisredirect" {
            let Some(d) = port.distributed else {
                return Err(format!(
                    "chassisredirect port \"{}\" has no distributed port",
                    port.name
                ));
            };
            if remote {
                return Ok(None);
            }
            if self.mode == Mode::Chassis && port.location != Location::Local {
                return Err(format!("no chassis holds gateway port \"{}\"", port.name));
            }
            push(tr, NodeKind::Output, || {
                format!(
                    "/* Replacing type \"chassisredirect\" outport \"{}\" with distributed port \"{}\". */",
                    port.name,
                    dp.name_of(d)
                )
            });
            return Ok(Some(d));
        }
        let elsewhere = remote
            || (self.mode == Mode::Chassis
                && port.kind.is_empty()
                && port.location == Location::Nowhere);
        match dp.localnet {
            Some(ln) if elsewhere => {
                push(tr, NodeKind::Output, || {
                    format!(
                        "/* \"{}\" is not here: through localnet port \"{}\" */",
                        port.name,
                        dp.name_of(ln)
                    )
                });
                Ok(Some(ln))
            }
            _ if remote => Ok(None),
            _ => Ok(Some(port.key)),
        }
    }

    /// Ingress `output` to `port`, which is on another chassis: a tunnel there.
    fn tunnel_to(&mut self, dp: &Datapath, port: &LPort, in_key: u16, pkt: &Pkt, tr: &mut Tr<'_>) {
        let Location::Remote(c) = &port.location else {
            return;
        };
        if self.from_tunnel {
            return self.not_here(dp, port, pkt, tr);
        }
        self.tunnel(c.as_str(), dp, in_key, port.key, pkt, tr);
    }

    /// A frame a tunnel brought for `port`, which is not active here (on another
    /// chassis, or awaiting activation here): dropped, never sent back into a tunnel
    /// (OVN's `MLF_RCV_FROM_RAMP`), and counted (`no_destination`).
    fn not_here(&mut self, dp: &Datapath, port: &LPort, pkt: &Pkt, tr: &mut Tr<'_>) {
        push(tr, NodeKind::Output, || {
            format!(
                "/* \"{}\" is not active on this chassis: dropped */",
                port.name
            )
        });
        self.out.steps.push(Step::Output(Box::new(Output {
            dest: Dest::Nowhere {
                dp: dp.key,
                port: port.key,
            },
            flow: pkt.flow.clone(),
            origin: pkt.origin.clone(),
        })));
    }

    fn egress(&mut self, dp: &'p Datapath, in_key: u16, out: u16, pkt: &Pkt, tr: &mut Tr<'_>) {
        let mut pkt = pkt.clone();
        let mut sub = push(tr, NodeKind::Pipeline, || {
            format!(
                "egress(dp=\"{}\", inport=\"{}\", outport=\"{}\")",
                dp.name,
                dp.name_of(in_key),
                dp.name_of(out)
            )
        });
        self.table(dp, Pipeline::Egress, 0, &mut pkt, &mut sub);
    }

    fn tunnel(
        &mut self,
        chassis: &str,
        dp: &Datapath,
        inport: u16,
        outport: u16,
        pkt: &Pkt,
        tr: &mut Tr<'_>,
    ) {
        push(tr, NodeKind::Output, || {
            format!(
                "/* to chassis {chassis} by Geneve: datapath {}, inport {inport}, outport {outport} */",
                dp.key
            )
        });
        push(tr, NodeKind::Modify, || {
            format!("output(\"{}\")", dp.name_of(outport))
        });
        self.out.steps.push(Step::Output(Box::new(Output {
            dest: Dest::Remote {
                chassis: chassis.to_string(),
                dp: dp.key,
                inport,
                outport,
            },
            flow: pkt.flow.clone(),
            origin: pkt.origin.clone(),
        })));
    }

    /// Egress `output`: delivery, or the peer datapath's ingress through a patch port.
    fn egress_output(&mut self, dp: &'p Datapath, out: u16, pkt: &Pkt, tr: &mut Tr<'_>) {
        let port = dp.ports.get(&out);
        let name = dp.name_of(out);
        let kind = port.map_or("", |p| p.kind.as_str());
        push(tr, NodeKind::Output, || {
            format!("/* output to \"{name}\", type \"{kind}\" */")
        });
        if let Some((peer_dp, peer_key)) = port.and_then(|p| p.peer) {
            let Some(peer) = self.p.datapath(peer_dp) else {
                return self.error(
                    tr,
                    format!("patch port \"{name}\" leads to no local datapath"),
                );
            };
            let mut next = pkt.clone();
            for f in [
                Field::Xxreg0,
                Field::Xxreg1,
                Field::Xreg4,
                Field::LogFlags,
                Field::LogOutport,
            ] {
                next.flow.set(f, 0);
            }
            // OVN clears the connection tracking state before the peer's ingress
            // (physical.c); ovn-trace keeps it, and its `ct_lb` adds to it.
            if self.mode == Mode::Chassis {
                clear_ct(&mut next.flow);
                next.ct_orig = None;
            }
            next.flow.set(Field::LogInport, u128::from(peer_key));
            let mut sub = push(tr, NodeKind::Pipeline, || {
                format!(
                    "ingress(dp=\"{}\", inport=\"{}\")",
                    peer.name,
                    peer.name_of(peer_key)
                )
            });
            return self.table(peer, Pipeline::Ingress, 0, &mut next, &mut sub);
        }
        push(tr, NodeKind::Modify, || format!("output(\"{name}\")"));
        let dest = match port.map(|p| &p.location) {
            Some(l) if l.is_here() => Dest::Local {
                dp: dp.key,
                port: out,
            },
            // A frame a tunnel brought for a port not active here (one awaiting
            // activation) goes no further (below): never back into a tunnel.
            Some(Location::Remote(c)) if !self.from_tunnel => Dest::Remote {
                chassis: c.clone(),
                dp: dp.key,
                inport: pkt.flow.get(Field::LogInport) as u16,
                outport: out,
            },
            _ => Dest::Nowhere {
                dp: dp.key,
                port: out,
            },
        };
        self.out.steps.push(Step::Output(Box::new(Output {
            dest,
            flow: pkt.flow.clone(),
            origin: pkt.origin.clone(),
        })));
    }
}

/// The other chassis a remote or multi-chassis port is on.
fn remote_chassis(l: &Location) -> impl Iterator<Item = &str> {
    let (one, several) = match l {
        Location::Remote(c) => (Some(c.as_str()), &[][..]),
        Location::Multi { remotes, .. } => (None, remotes.as_slice()),
        _ => (None, &[][..]),
    };
    one.into_iter().chain(several.iter().map(String::as_str))
}

fn pipeline_name(p: Pipeline) -> &'static str {
    match p {
        Pipeline::Ingress => "ingress",
        Pipeline::Egress => "egress",
    }
}

/// `ct_state` as `ovn-trace` prints it: `new|trk`.
pub fn ct_state_text(state: u32) -> String {
    const NAMES: [(u32, &str); 8] = [
        (cs::NEW, "new"),
        (cs::EST, "est"),
        (cs::REL, "rel"),
        (cs::RPL, "rpl"),
        (cs::INV, "inv"),
        (cs::TRK, "trk"),
        (0x40, "snat"),
        (0x80, "dnat"),
    ];
    let names: Vec<&str> = NAMES
        .iter()
        .filter(|(b, _)| state & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "0".into()
    } else {
        names.join("|")
    }
}

fn modify(tr: &mut Tr<'_>, dst: &FieldRef, text: impl FnOnce() -> String) {
    // Registers are not the packet's: `ovn-trace` shows only the packet's fields.
    let is_reg = dst.resolve().is_some_and(|sf| {
        matches!(
            sf.field,
            Field::Xxreg0
                | Field::Xxreg1
                | Field::Xreg4
                | Field::LogFlags
                | Field::LogInport
                | Field::LogOutport
        )
    });
    if !is_reg {
        push(tr, NodeKind::Modify, text);
    }
}

/// A field's value as `ovn-trace` shows a move's source: a whole MAC, IPv4 or IPv6
/// field in its notation, another whole field in decimal, bits of one in hex.
fn value_text(src: &FieldRef, v: u128) -> String {
    let Some(sf) = src.resolve() else {
        return v.to_string();
    };
    if sf.ofs != 0 || sf.n_bits < sf.field.n_bits() {
        return format!("{v:#x}");
    }
    use Field::*;
    match sf.field {
        EthSrc | EthDst | ArpSha | ArpTha | NdSll | NdTll => mac_of(v).to_string(),
        Ipv4Src | Ipv4Dst | ArpSpa | ArpTpa => std::net::Ipv4Addr::from(v as u32).to_string(),
        Ipv6Src | Ipv6Dst | NdTarget => std::net::Ipv6Addr::from(v).to_string(),
        _ => v.to_string(),
    }
}

fn read(flow: &Flow, f: &FieldRef) -> u128 {
    flow.read(f).unwrap_or(0)
}

fn write(flow: &mut Flow, f: &FieldRef, v: u128) {
    flow.write(f, v);
}

/// Whether `ovn-trace` tracks the packet for action `a` only when it is not tracked
/// yet (`execute_ct_nat`, `execute_ct_commit_nat`), keeping its state otherwise.
fn implies_ct_when_untracked(a: &Action) -> bool {
    use Action::*;
    matches!(
        a,
        CtDnat(_) | CtSnat(_) | CtDnatInCzone(_) | CtSnatInCzone(_) | CtCommitNat(_)
    )
}

fn clear_ct(flow: &mut Flow) {
    flow.set(Field::CtState, 0);
    flow.set(Field::CtMark, 0);
    flow.set(Field::CtLabel, 0);
}

fn mac_of(v: u128) -> MacAddr {
    let b = (v as u64).to_be_bytes();
    MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
}

fn mac_bits(m: MacAddr) -> u128 {
    let b = m.0;
    u128::from(u64::from_be_bytes([
        0, 0, b[0], b[1], b[2], b[3], b[4], b[5],
    ]))
}

/// The next hop a router's `arp{}` or `nd_ns{}` asks for: `reg0` or `xxreg0`, where
/// OVN's `lr_in_arp_request` stage leaves it and ovn-controller's pinctrl reads it to
/// hold the frame (`pinctrl_handle_buffered_packets`). `None` for other actions.
fn next_hop(action: ovn_pinctrl::ControllerAction, flow: &Flow) -> Option<std::net::IpAddr> {
    let xxreg0 = flow.get(Field::Xxreg0);
    match action {
        ovn_pinctrl::ControllerAction::Arp => Some(ip_of(xxreg0 >> 96, 32)),
        ovn_pinctrl::ControllerAction::NdNs => Some(ip_of(xxreg0, 128)),
        _ => None,
    }
}

fn ip_of(v: u128, n_bits: u16) -> std::net::IpAddr {
    if n_bits <= 32 {
        std::net::Ipv4Addr::from(v as u32).into()
    } else {
        std::net::Ipv6Addr::from(v).into()
    }
}

/// The mark and label writes of `ct_commit { ... }`'s nested assignments.
fn commit_of(nested: &Actions, flow: &Flow) -> Commit {
    let mut c = Commit::default();
    for a in &nested.0 {
        let (dst, v) = match a {
            Action::Load(l) => match &l.value {
                ovn_lflow::actions::Value::Int(i) => (&l.dst, i.value),
                ovn_lflow::actions::Value::Str(_) => continue,
            },
            Action::Move(m) => (&m.dst, read(flow, &m.src)),
            _ => continue,
        };
        let Some(sf) = dst.resolve() else { continue };
        let m = ones(sf.n_bits) << sf.ofs;
        let v = (v << sf.ofs) & m;
        match sf.field {
            Field::CtMark => c.mark = ((c.mark.0 & !(m as u32)) | v as u32, c.mark.1 | m as u32),
            Field::CtLabel => c.label = ((c.label.0 & !m) | v, c.label.1 | m),
            _ => {}
        }
    }
    c
}

fn ones(n: u32) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

/// `arp { }` on an IPv4 packet: a request for its destination (ovn-trace.c
/// `execute_arp`: the ARP addresses are the IP ones).
fn arp_request(f: &mut Flow) {
    for z in [
        Field::IpFrag,
        Field::IpDscp,
        Field::IpEcn,
        Field::IpTtl,
        Field::TcpFlags,
    ] {
        f.set(z, 0);
    }
    f.set(Field::EthType, 0x0806);
    f.set(Field::ArpOp, 1);
    f.set(Field::ArpSha, f.get(Field::EthSrc));
    f.set(Field::ArpTha, 0);
    f.set(Field::ArpSpa, f.get(Field::Ipv4Src));
    f.set(Field::ArpTpa, f.get(Field::Ipv4Dst));
}

/// `nd_na { }`: a neighbour advertisement answering the solicitation.
fn nd_na(f: &mut Flow) {
    let (src, dst) = (f.get(Field::EthSrc), f.get(Field::EthDst));
    f.set(Field::EthSrc, dst);
    f.set(Field::EthDst, src);
    f.set(Field::Ipv6Dst, f.get(Field::Ipv6Src));
    f.set(Field::Ipv6Src, f.get(Field::NdTarget));
    f.set(Field::Icmpv6Type, 136);
    f.set(Field::NdSll, 0);
    f.set(Field::NdTll, dst);
}

/// `nd_ns { }`: a solicitation for the packet's IPv6 destination, to its
/// solicited-node multicast group.
fn nd_ns(f: &mut Flow) {
    let dst = f.get(Field::Ipv6Dst);
    let group = 0xff02_0000_0000_0000_0000_0001_ff00_0000u128 | (dst & 0xff_ffff);
    f.set(Field::EthDst, 0x3333_0000_0000 | (group & 0xffff_ffff));
    f.set(Field::Icmpv6Type, 135);
    f.set(Field::NdSll, 0);
    f.set(Field::NdTll, 0);
}

/// `icmp4 { }` / `icmp6 { }` (and `reject`'s, `loopback`: back to the sender):
/// a destination unreachable.
fn icmp(f: &mut Flow, v6: bool, loopback: bool) {
    if loopback {
        swap_ends(f, v6);
    }
    f.set(Field::IpProto, if v6 { 58 } else { 1 });
    f.set(Field::IpTtl, 255);
    let (t, c) = if v6 {
        (Field::Icmpv6Type, Field::Icmpv6Code)
    } else {
        (Field::Icmpv4Type, Field::Icmpv4Code)
    };
    f.set(t, if v6 { 1 } else { 3 });
    f.set(c, 1);
}

/// `tcp_reset { }` / `sctp_abort { }`: same ports, RST set.
fn reset(f: &mut Flow, proto: u128, loopback: bool) {
    if loopback {
        swap_ends(f, f.get(Field::EthType) == 0x86dd);
    }
    f.set(Field::IpProto, proto);
    f.set(Field::IpTtl, 255);
    f.set(Field::TcpFlags, 0x004);
}

/// OVS's `tp_src` of `f`: the ICMP type or the transport source port.
fn tp_src(f: &Flow) -> u128 {
    match f.get(Field::IpProto) {
        1 => f.get(Field::Icmpv4Type),
        58 => f.get(Field::Icmpv6Type),
        6 => f.get(Field::TcpSrc),
        17 => f.get(Field::UdpSrc),
        132 => f.get(Field::SctpSrc),
        _ => 0,
    }
}

fn swap_ends(f: &mut Flow, v6: bool) {
    let (s, d) = (f.get(Field::EthSrc), f.get(Field::EthDst));
    f.set(Field::EthSrc, d);
    f.set(Field::EthDst, s);
    let (fs, fd) = if v6 {
        (Field::Ipv6Src, Field::Ipv6Dst)
    } else {
        (Field::Ipv4Src, Field::Ipv4Dst)
    };
    let (s, d) = (f.get(fs), f.get(fd));
    f.set(fs, d);
    f.set(fd, s);
}
