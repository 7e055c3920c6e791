//! OVN logical actions (OVN 23.03 `lib/actions.c`, `include/ovn/actions.h`;
//! the `actions` column of `Logical_Flow` in ovn-sb(5)).
//!
//! [`parse`] turns an actions string into [`Actions`], one [`Action`] per
//! `OVNACT_*` of actions.h's `OVNACTS` list, and the prerequisites the
//! actions add to the flow's match. `Display` prints as
//! `ovnacts_format()` does, in a form that parses back to the same
//! actions. Every action of 23.03 parses, whether or not a switch executes
//! it; [`Action::name`] names it for a refusal.

mod format;
mod parse;

use std::net::IpAddr;

pub use parse::{parse, ActionParams};

use crate::dhcp::OptType;
use crate::expr::Expr;
use crate::lex::Int;
use crate::symtab::FieldRef;

/// A logical pipeline (actions.h `enum ovnact_pipeline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pipeline {
    /// Ingress.
    #[default]
    Ingress,
    /// Egress.
    Egress,
}

/// A sequence of actions; empty means `drop;`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Actions(pub Vec<Action>);

/// What [`parse`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedActions {
    /// The actions.
    pub actions: Actions,
    /// What the actions require of the match (e.g. `ip` for `ct_next`),
    /// to be `&&`-ed to it; not annotated, as actions.c leaves it.
    pub prereqs: Option<Expr>,
}

/// `next` (actions.h `struct ovnact_next`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Next {
    /// Pipeline of the table to go to.
    pub pipeline: Pipeline,
    /// The logical table to go to.
    pub table: u8,
    /// Pipeline of the flow the action is in (only affects printing).
    pub src_pipeline: Pipeline,
    /// Table of the flow the action is in (only affects printing).
    pub src_table: u8,
}

/// A constant: integer or string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// An integer, with the format it was written in.
    Int(Int),
    /// A string.
    Str(String),
}

/// `field = constant;` (actions.h `struct ovnact_load`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Load {
    /// The destination.
    pub dst: FieldRef,
    /// The constant; an integer may be masked, and then only the mask's
    /// bits are written.
    pub value: Value,
}

/// `dst = src;` or `dst <-> src;` (actions.h `struct ovnact_move`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Move {
    /// Left side.
    pub dst: FieldRef,
    /// Right side.
    pub src: FieldRef,
}

/// The legacy `ct_commit(ct_mark=..., ct_label=...)` (actions.h
/// `struct ovnact_ct_commit_v1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CtCommitV1 {
    /// Mark value.
    pub mark: u32,
    /// Mark bits to set (0: leave the mark).
    pub mark_mask: u32,
    /// Label value.
    pub label: u128,
    /// Label bits to set (0: leave the label).
    pub label_mask: u128,
}

/// `ct_dnat`, `ct_snat` and their `_in_czone` forms (actions.h
/// `struct ovnact_ct_nat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CtNat {
    /// The address to translate to; `None` means "apply the existing
    /// translation" (no commit).
    pub ip: Option<IpAddr>,
    /// Port range `lo` or `lo-hi`.
    pub ports: Option<(u16, Option<u16>)>,
    /// Table to resume at.
    pub table: u8,
}

/// A `ct_lb` backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backend {
    /// Address.
    pub ip: IpAddr,
    /// Port; 0 for none.
    pub port: u16,
}

/// `ct_lb` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CtLbFlag {
    /// None.
    #[default]
    None,
    /// `skip_snat`
    SkipSnat,
    /// `force_snat`
    ForceSnat,
}

/// `ct_lb` and `ct_lb_mark` (actions.h `struct ovnact_ct_lb`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CtLb {
    /// Backends; empty means "apply the existing translation".
    pub backends: Vec<Backend>,
    /// Fields hashed to select a backend (OVS `hash_fields`).
    pub hash_fields: Option<String>,
    /// SNAT flag.
    pub flag: CtLbFlag,
    /// Table to resume at.
    pub table: u8,
}

/// `dst = select(id=weight, ...);` (actions.h `struct ovnact_select`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Select {
    /// Where the chosen id goes (at least 16 bits).
    pub dst: FieldRef,
    /// `(id, weight)` pairs; weight defaults to 100.
    pub members: Vec<(u16, u16)>,
    /// Table to resume at.
    pub table: u8,
}

/// `get_arp(port, ip)` / `get_nd(port, ip)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GetMacBind {
    /// Logical port (string field).
    pub port: FieldRef,
    /// 32- or 128-bit address.
    pub ip: FieldRef,
}

/// `put_arp(port, ip, mac)` / `put_nd(port, ip, mac)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PutMacBind {
    /// Logical port.
    pub port: FieldRef,
    /// Address.
    pub ip: FieldRef,
    /// 48-bit MAC.
    pub mac: FieldRef,
}

/// `dst = lookup_arp(port, ip, mac)` / `lookup_nd`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LookupMacBind {
    /// 1-bit result.
    pub dst: FieldRef,
    /// Logical port.
    pub port: FieldRef,
    /// Address.
    pub ip: FieldRef,
    /// 48-bit MAC.
    pub mac: FieldRef,
}

/// `dst = lookup_arp_ip(port, ip)` / `lookup_nd_ip`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LookupMacBindIp {
    /// 1-bit result.
    pub dst: FieldRef,
    /// Logical port.
    pub port: FieldRef,
    /// Address.
    pub ip: FieldRef,
}

/// A constant or `{...}` set of constants (expr.h
/// `struct expr_constant_set` as actions use it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConstantSet {
    /// The values (at least one).
    pub values: Vec<Value>,
    /// Whether written in `{}`.
    pub in_curlies: bool,
}

/// `name = value` in `put_dhcp_opts` and friends (actions.h
/// `struct ovnact_gen_option`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GenOption {
    /// Option name (its option table's copy).
    pub name: std::sync::Arc<str>,
    /// Option code.
    pub code: u32,
    /// Option type.
    pub ty: OptType,
    /// The value(s).
    pub value: ConstantSet,
}

/// `dst = put_dhcp_opts(...)` and friends (actions.h
/// `struct ovnact_put_opts`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PutOpts {
    /// 1-bit result.
    pub dst: FieldRef,
    /// The options, in order.
    pub options: Vec<GenOption>,
}

/// `log(...)` verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogVerdict {
    /// `allow`
    Allow,
    /// `drop`
    Drop,
    /// `reject`
    Reject,
}

/// `log(...)` severity (syslog levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogSeverity {
    /// `alert`
    Alert,
    /// `warning`
    Warning,
    /// `notice`
    Notice,
    /// `info`
    Info,
    /// `debug`
    Debug,
}

/// `log(...)` (actions.h `struct ovnact_log`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Log {
    /// Verdict.
    pub verdict: LogVerdict,
    /// Severity (default `info`).
    pub severity: LogSeverity,
    /// ACL name.
    pub name: Option<String>,
    /// Meter name.
    pub meter: Option<String>,
}

/// `trigger_event(event = "...", ...)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TriggerEvent {
    /// Event name (`empty_lb_backends`).
    pub event: String,
    /// Options.
    pub options: Vec<GenOption>,
}

/// `fwd_group(...)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FwdGroup {
    /// Whether to use BFD liveness.
    pub liveness: bool,
    /// Child logical ports.
    pub child_ports: Vec<String>,
    /// Table to resume at.
    pub table: u8,
}

/// `commit_lb_aff(...)` (actions.h `struct ovnact_commit_lb_aff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommitLbAff {
    /// VIP.
    pub vip: IpAddr,
    /// VIP port (0: none).
    pub vip_port: u16,
    /// Backend.
    pub backend: IpAddr,
    /// Backend port (0: none).
    pub backend_port: u16,
    /// IP protocol (0: none; only with a port).
    pub proto: u8,
    /// Affinity timeout, seconds.
    pub timeout: u16,
}

/// `sample(...)` (actions.h `struct ovnact_sample`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sample {
    /// Probability over 65535.
    pub probability: u16,
    /// Top byte of the observation domain id.
    pub obs_domain: u8,
    /// Collector set id.
    pub collector_set: u32,
    /// Observation point id.
    pub obs_point: u32,
    /// Use the flow's cookie as observation point (`obs_point=$cookie`).
    pub use_cookie: bool,
}

/// One logical action: the `OVNACTS` list of OVN 23.03 `actions.h`, one
/// variant per `OVNACT_*`, each with the data of its `struct ovnact_*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// `output;`
    Output,
    /// `next;`, `next(N);`, `next(pipeline=P, table=N);`
    Next(Next),
    /// `field = constant;`
    Load(Load),
    /// `dst = src;`
    Move(Move),
    /// `push(field);`
    Push(FieldRef),
    /// `pop(field);`
    Pop(FieldRef),
    /// `a <-> b;`
    Exchange(Move),
    /// `ip.ttl--;`
    DecTtl,
    /// `ct_next;` (resumes at the given table).
    CtNext(u8),
    /// `ct_commit(ct_mark=..., ct_label=...);` (legacy form).
    CtCommitV1(CtCommitV1),
    /// `ct_commit;` or `ct_commit { ... };`
    CtCommitV2(Actions),
    /// `ct_dnat;`, `ct_dnat(ip[, ports]);`
    CtDnat(CtNat),
    /// `ct_snat;`, `ct_snat(ip[, ports]);`
    CtSnat(CtNat),
    /// `ct_dnat_in_czone...;`
    CtDnatInCzone(CtNat),
    /// `ct_snat_in_czone...;`
    CtSnatInCzone(CtNat),
    /// `ct_lb...;`
    CtLb(CtLb),
    /// `ct_lb_mark...;`
    CtLbMark(CtLb),
    /// `dst = select(...);`
    Select(Select),
    /// `ct_clear;`
    CtClear,
    /// `ct_commit_nat;` (resumes at the given table).
    CtCommitNat(u8),
    /// `clone { ... };`
    Clone(Actions),
    /// `arp { ... };`
    Arp(Actions),
    /// `icmp4 { ... };`
    Icmp4(Actions),
    /// `icmp4_error { ... };`
    Icmp4Error(Actions),
    /// `icmp6 { ... };`
    Icmp6(Actions),
    /// `igmp;`
    Igmp,
    /// `tcp_reset { ... };`
    TcpReset(Actions),
    /// `nd_na { ... };`
    NdNa(Actions),
    /// `nd_na_router { ... };`
    NdNaRouter(Actions),
    /// `get_arp(port, ip);`
    GetArp(GetMacBind),
    /// `put_arp(port, ip, mac);`
    PutArp(PutMacBind),
    /// `dst = lookup_arp(port, ip, mac);`
    LookupArp(LookupMacBind),
    /// `dst = lookup_arp_ip(port, ip);`
    LookupArpIp(LookupMacBindIp),
    /// `get_nd(port, ip);`
    GetNd(GetMacBind),
    /// `put_nd(port, ip, mac);`
    PutNd(PutMacBind),
    /// `dst = lookup_nd(port, ip, mac);`
    LookupNd(LookupMacBind),
    /// `dst = lookup_nd_ip(port, ip);`
    LookupNdIp(LookupMacBindIp),
    /// `dst = put_dhcp_opts(...);`
    PutDhcpv4Opts(PutOpts),
    /// `dst = put_dhcpv6_opts(...);`
    PutDhcpv6Opts(PutOpts),
    /// `set_queue(N);`
    SetQueue(u16),
    /// `dst = dns_lookup();`
    DnsLookup(FieldRef),
    /// `log(...);`
    Log(Log),
    /// `dst = put_nd_ra_opts(...);`
    PutNdRaOpts(PutOpts),
    /// `nd_ns { ... };`
    NdNs(Actions),
    /// `set_meter(rate[, burst]);` (kbps)
    SetMeter {
        /// Rate.
        rate: u64,
        /// Burst (0: none).
        burst: u64,
    },
    /// `icmp4.frag_mtu = N;` / `icmp6.frag_mtu = N;`
    OvnFieldLoad(Load),
    /// `dst = check_pkt_larger(N);`
    CheckPktLarger {
        /// 1-bit result.
        dst: FieldRef,
        /// Length in bytes.
        len: u16,
    },
    /// `trigger_event(...);`
    TriggerEvent(TriggerEvent),
    /// `bind_vport("vport", parent);`
    BindVport {
        /// The virtual port.
        vport: String,
        /// Its parent (string field).
        parent: FieldRef,
    },
    /// `handle_svc_check(port);`
    HandleSvcCheck(FieldRef),
    /// `fwd_group(...);`
    FwdGroup(FwdGroup),
    /// `handle_dhcpv6_reply;`
    Dhcp6Reply,
    /// `icmp6_error { ... };`
    Icmp6Error(Actions),
    /// `reject { ... };`
    Reject(Actions),
    /// `dst = chk_lb_hairpin();`
    ChkLbHairpin(FieldRef),
    /// `dst = chk_lb_hairpin_reply();`
    ChkLbHairpinReply(FieldRef),
    /// `ct_snat_to_vip;`
    CtSnatToVip,
    /// `handle_bfd_msg();`
    BfdMsg,
    /// `sctp_abort { ... };`
    SctpAbort(Actions),
    /// `put_fdb(port, mac);`
    PutFdb {
        /// Logical port.
        port: FieldRef,
        /// MAC.
        mac: FieldRef,
    },
    /// `dst = get_fdb(mac);`
    GetFdb {
        /// Port (string field) or 32-bit destination.
        dst: FieldRef,
        /// MAC.
        mac: FieldRef,
    },
    /// `dst = lookup_fdb(port, mac);`
    LookupFdb {
        /// 1-bit result.
        dst: FieldRef,
        /// Logical port.
        port: FieldRef,
        /// MAC.
        mac: FieldRef,
    },
    /// `dst = check_in_port_sec();`
    CheckInPortSec(FieldRef),
    /// `dst = check_out_port_sec();`
    CheckOutPortSec(FieldRef),
    /// `commit_ecmp_nh(ipv6 = B, proto = P);`
    CommitEcmpNh {
        /// IPv6 or IPv4.
        ipv6: bool,
        /// IP protocol (TCP, UDP or SCTP).
        proto: u8,
    },
    /// `dst = chk_ecmp_nh_mac();`
    ChkEcmpNhMac(FieldRef),
    /// `dst = chk_ecmp_nh();`
    ChkEcmpNh(FieldRef),
    /// `commit_lb_aff(...);`
    CommitLbAff(CommitLbAff),
    /// `dst = chk_lb_aff();`
    ChkLbAff(FieldRef),
    /// `sample(...);`
    Sample(Sample),
}

impl Action {
    /// The action's name as written in an actions string (for an
    /// assignment, `load`, `move` or `exchange`).
    pub fn name(&self) -> &'static str {
        use Action::*;
        match self {
            Output => "output",
            Next(_) => "next",
            Load(_) => "load",
            Move(_) => "move",
            Push(_) => "push",
            Pop(_) => "pop",
            Exchange(_) => "exchange",
            DecTtl => "ip.ttl--",
            CtNext(_) => "ct_next",
            CtCommitV1(_) | CtCommitV2(_) => "ct_commit",
            CtDnat(_) => "ct_dnat",
            CtSnat(_) => "ct_snat",
            CtDnatInCzone(_) => "ct_dnat_in_czone",
            CtSnatInCzone(_) => "ct_snat_in_czone",
            CtLb(_) => "ct_lb",
            CtLbMark(_) => "ct_lb_mark",
            Select(_) => "select",
            CtClear => "ct_clear",
            CtCommitNat(_) => "ct_commit_nat",
            Clone(_) => "clone",
            Arp(_) => "arp",
            Icmp4(_) => "icmp4",
            Icmp4Error(_) => "icmp4_error",
            Icmp6(_) => "icmp6",
            Igmp => "igmp",
            TcpReset(_) => "tcp_reset",
            NdNa(_) => "nd_na",
            NdNaRouter(_) => "nd_na_router",
            GetArp(_) => "get_arp",
            PutArp(_) => "put_arp",
            LookupArp(_) => "lookup_arp",
            LookupArpIp(_) => "lookup_arp_ip",
            GetNd(_) => "get_nd",
            PutNd(_) => "put_nd",
            LookupNd(_) => "lookup_nd",
            LookupNdIp(_) => "lookup_nd_ip",
            PutDhcpv4Opts(_) => "put_dhcp_opts",
            PutDhcpv6Opts(_) => "put_dhcpv6_opts",
            SetQueue(_) => "set_queue",
            DnsLookup(_) => "dns_lookup",
            Log(_) => "log",
            PutNdRaOpts(_) => "put_nd_ra_opts",
            NdNs(_) => "nd_ns",
            SetMeter { .. } => "set_meter",
            OvnFieldLoad(_) => "load",
            CheckPktLarger { .. } => "check_pkt_larger",
            TriggerEvent(_) => "trigger_event",
            BindVport { .. } => "bind_vport",
            HandleSvcCheck(_) => "handle_svc_check",
            FwdGroup(_) => "fwd_group",
            Dhcp6Reply => "handle_dhcpv6_reply",
            Icmp6Error(_) => "icmp6_error",
            Reject(_) => "reject",
            ChkLbHairpin(_) => "chk_lb_hairpin",
            ChkLbHairpinReply(_) => "chk_lb_hairpin_reply",
            CtSnatToVip => "ct_snat_to_vip",
            BfdMsg => "handle_bfd_msg",
            SctpAbort(_) => "sctp_abort",
            PutFdb { .. } => "put_fdb",
            GetFdb { .. } => "get_fdb",
            LookupFdb { .. } => "lookup_fdb",
            CheckInPortSec(_) => "check_in_port_sec",
            CheckOutPortSec(_) => "check_out_port_sec",
            CommitEcmpNh { .. } => "commit_ecmp_nh",
            ChkEcmpNhMac(_) => "chk_ecmp_nh_mac",
            ChkEcmpNh(_) => "chk_ecmp_nh",
            CommitLbAff(_) => "commit_lb_aff",
            ChkLbAff(_) => "chk_lb_aff",
            Sample(_) => "sample",
        }
    }

    /// The nested actions of `clone`, `arp`, `ct_commit { }` and the other
    /// actions that run actions on a copy or a generated packet.
    pub fn nested(&self) -> Option<&Actions> {
        use Action::*;
        match self {
            CtCommitV2(a) | Clone(a) | Arp(a) | Icmp4(a) | Icmp4Error(a) | Icmp6(a)
            | TcpReset(a) | NdNa(a) | NdNaRouter(a) | NdNs(a) | Icmp6Error(a) | Reject(a)
            | SctpAbort(a) => Some(a),
            _ => None,
        }
    }
}

impl Actions {
    /// Every action, depth first, nested ones after the action that holds
    /// them.
    pub fn walk(&self) -> Vec<&Action> {
        let mut out = Vec::new();
        for a in &self.0 {
            out.push(a);
            if let Some(n) = a.nested() {
                out.extend(n.walk());
            }
        }
        out
    }
}
