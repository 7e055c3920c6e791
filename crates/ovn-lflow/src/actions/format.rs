//! Printing actions as actions.c's `format_*()` functions do, except that
//! every string is JSON-escaped (actions.c prints some raw, so that a name
//! with a `"` does not parse back).

use std::fmt::{self, Display, Formatter, Write};
use std::net::IpAddr;

use super::*;
use crate::lex::{format_hex, format_ipv6, write_json_string};

impl Display for Actions {
    /// actions.c `ovnacts_format()`: `drop;` for none, else the actions
    /// separated by spaces.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("drop;");
        }
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_char(' ')?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl Display for Value {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Str(s) => write_json_string(f, s),
        }
    }
}

impl Display for ConstantSet {
    /// expr.c `expr_constant_set_format()`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let curlies = self.in_curlies || self.values.len() != 1;
        if curlies {
            f.write_char('{')?;
        }
        for (i, v) in self.values.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{v}")?;
        }
        if curlies {
            f.write_char('}')?;
        }
        Ok(())
    }
}

fn ip(a: &IpAddr) -> String {
    match a {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format_ipv6(u128::from(*v6)),
    }
}

fn nested(f: &mut Formatter<'_>, name: &str, a: &Actions) -> fmt::Result {
    write!(f, "{name} {{ {a} }};")
}

fn options(f: &mut Formatter<'_>, opts: &[GenOption], sep_first: bool) -> fmt::Result {
    for (i, o) in opts.iter().enumerate() {
        if i > 0 || sep_first {
            f.write_str(", ")?;
        }
        write!(f, "{} = {}", o.name, o.value)?;
    }
    Ok(())
}

fn put_opts(f: &mut Formatter<'_>, name: &str, p: &PutOpts) -> fmt::Result {
    write!(f, "{} = {name}(", p.dst)?;
    options(f, &p.options, false)?;
    f.write_str(");")
}

fn result(f: &mut Formatter<'_>, dst: &FieldRef, name: &str) -> fmt::Result {
    write!(f, "{dst} = {name}();")
}

fn proto_name(p: u8) -> &'static str {
    match p {
        17 => "udp",
        132 => "sctp",
        _ => "tcp",
    }
}

impl Display for Next {
    /// actions.c `format_NEXT()`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.pipeline != self.src_pipeline {
            let p = match self.pipeline {
                Pipeline::Ingress => "ingress",
                Pipeline::Egress => "egress",
            };
            write!(f, "next(pipeline={p}, table={});", self.table)
        } else if u16::from(self.table) != u16::from(self.src_table) + 1 {
            write!(f, "next({});", self.table)
        } else {
            f.write_str("next;")
        }
    }
}

impl Display for CtCommitV1 {
    /// actions.c `format_CT_COMMIT_V1()`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut s = String::from("ct_commit(");
        if self.mark_mask != 0 {
            let _ = write!(s, "ct_mark={}", format_hex(self.mark.into()));
            if self.mark_mask != u32::MAX {
                let _ = write!(s, "/{}", format_hex(self.mark_mask.into()));
            }
        }
        if self.label_mask != 0 {
            if !s.ends_with('(') {
                s.push_str(", ");
            }
            let _ = write!(s, "ct_label={}", format_hex(self.label));
            if self.label_mask != u128::MAX {
                let _ = write!(s, "/{}", format_hex(self.label_mask));
            }
        }
        if s.ends_with('(') {
            s.pop();
        } else {
            s.push(')');
        }
        write!(f, "{s};")
    }
}

fn ct_nat(f: &mut Formatter<'_>, name: &str, n: &CtNat) -> fmt::Result {
    f.write_str(name)?;
    if let Some(a) = n.ip {
        write!(f, "({}", ip(&a))?;
        if let Some((lo, hi)) = n.ports {
            write!(f, ",{lo}")?;
            if let Some(hi) = hi {
                write!(f, "-{hi}")?;
            }
        }
        f.write_char(')')?;
    }
    f.write_char(';')
}

fn ct_lb(f: &mut Formatter<'_>, name: &str, lb: &CtLb) -> fmt::Result {
    f.write_str(name)?;
    if !lb.backends.is_empty() {
        f.write_str("(backends=")?;
        for (i, b) in lb.backends.iter().enumerate() {
            if i > 0 {
                f.write_char(',')?;
            }
            match (b.ip, b.port) {
                (IpAddr::V4(a), 0) => write!(f, "{a}")?,
                (IpAddr::V4(a), p) => write!(f, "{a}:{p}")?,
                (a @ IpAddr::V6(_), 0) => f.write_str(&ip(&a))?,
                (a @ IpAddr::V6(_), p) => write!(f, "[{}]:{p}", ip(&a))?,
            }
        }
        if let Some(h) = &lb.hash_fields {
            f.write_str("; hash_fields=")?;
            write_json_string(f, h)?;
        }
        match lb.flag {
            CtLbFlag::SkipSnat => f.write_str("; skip_snat")?,
            CtLbFlag::ForceSnat => f.write_str("; force_snat")?,
            CtLbFlag::None => {}
        }
        f.write_char(')')?;
    }
    f.write_char(';')
}

impl Display for Log {
    /// actions.c `format_LOG()`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("log(")?;
        if let Some(n) = &self.name {
            f.write_str("name=")?;
            write_json_string(f, n)?;
            f.write_str(", ")?;
        }
        let verdict = match self.verdict {
            LogVerdict::Allow => "allow",
            LogVerdict::Drop => "drop",
            LogVerdict::Reject => "reject",
        };
        write!(f, "verdict={verdict}, severity={}", self.severity.as_str())?;
        if let Some(m) = &self.meter {
            f.write_str(", meter=")?;
            write_json_string(f, m)?;
        }
        f.write_str(");")
    }
}

impl LogSeverity {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            LogSeverity::Alert => "alert",
            LogSeverity::Warning => "warning",
            LogSeverity::Notice => "notice",
            LogSeverity::Info => "info",
            LogSeverity::Debug => "debug",
        }
    }
}

impl Display for CommitLbAff {
    /// actions.c `format_COMMIT_LB_AFF()`: IPv6 addresses in brackets.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let addr = |a: &IpAddr| match a {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(_) => format!("[{}]", ip(a)),
        };
        write!(f, "commit_lb_aff(vip = \"{}", addr(&self.vip))?;
        if self.vip_port != 0 {
            write!(f, ":{}", self.vip_port)?;
        }
        write!(f, "\", backend = \"{}", addr(&self.backend))?;
        if self.backend_port != 0 {
            write!(f, ":{}", self.backend_port)?;
        }
        f.write_char('"')?;
        if self.proto != 0 {
            write!(f, ", proto = {}", proto_name(self.proto))?;
        }
        write!(f, ", timeout = {});", self.timeout)
    }
}

impl Display for Sample {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sample(probability={},collector_set={},obs_domain={},",
            self.probability, self.collector_set, self.obs_domain
        )?;
        if self.use_cookie {
            f.write_str("obs_point=$cookie);")
        } else {
            write!(f, "obs_point={});", self.obs_point)
        }
    }
}

impl Display for Action {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        use Action::*;
        match self {
            Output => f.write_str("output;"),
            Next(n) => write!(f, "{n}"),
            Load(l) => write!(f, "{} = {};", l.dst, l.value),
            Move(m) => write!(f, "{} = {};", m.dst, m.src),
            Push(r) => write!(f, "push({r});"),
            Pop(r) => write!(f, "pop({r});"),
            Exchange(m) => write!(f, "{} <-> {};", m.dst, m.src),
            DecTtl => f.write_str("ip.ttl--;"),
            CtNext(_) => f.write_str("ct_next;"),
            CtCommitV1(c) => write!(f, "{c}"),
            CtCommitV2(a) if a.0.is_empty() => f.write_str("ct_commit;"),
            CtCommitV2(a) => nested(f, "ct_commit", a),
            CtDnat(n) => ct_nat(f, "ct_dnat", n),
            CtSnat(n) => ct_nat(f, "ct_snat", n),
            CtDnatInCzone(n) => ct_nat(f, "ct_dnat_in_czone", n),
            CtSnatInCzone(n) => ct_nat(f, "ct_snat_in_czone", n),
            CtLb(lb) => ct_lb(f, "ct_lb", lb),
            CtLbMark(lb) => ct_lb(f, "ct_lb_mark", lb),
            Select(s) => {
                write!(f, "{} = select(", s.dst)?;
                for (i, (id, w)) in s.members.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{id}={w}")?;
                }
                f.write_str(");")
            }
            CtClear => f.write_str("ct_clear;"),
            CtCommitNat(_) => f.write_str("ct_commit_nat;"),
            Clone(a) => nested(f, "clone", a),
            Arp(a) => nested(f, "arp", a),
            Icmp4(a) => nested(f, "icmp4", a),
            Icmp4Error(a) => nested(f, "icmp4_error", a),
            Icmp6(a) => nested(f, "icmp6", a),
            Igmp => f.write_str("igmp;"),
            TcpReset(a) => nested(f, "tcp_reset", a),
            NdNa(a) => nested(f, "nd_na", a),
            NdNaRouter(a) => nested(f, "nd_na_router", a),
            GetArp(g) => write!(f, "get_arp({}, {});", g.port, g.ip),
            PutArp(p) => write!(f, "put_arp({}, {}, {});", p.port, p.ip, p.mac),
            LookupArp(l) => {
                write!(
                    f,
                    "{} = lookup_arp({}, {}, {});",
                    l.dst, l.port, l.ip, l.mac
                )
            }
            LookupArpIp(l) => write!(f, "{} = lookup_arp_ip({}, {});", l.dst, l.port, l.ip),
            GetNd(g) => write!(f, "get_nd({}, {});", g.port, g.ip),
            PutNd(p) => write!(f, "put_nd({}, {}, {});", p.port, p.ip, p.mac),
            LookupNd(l) => write!(f, "{} = lookup_nd({}, {}, {});", l.dst, l.port, l.ip, l.mac),
            LookupNdIp(l) => write!(f, "{} = lookup_nd_ip({}, {});", l.dst, l.port, l.ip),
            PutDhcpv4Opts(p) => put_opts(f, "put_dhcp_opts", p),
            PutDhcpv6Opts(p) => put_opts(f, "put_dhcpv6_opts", p),
            SetQueue(q) => write!(f, "set_queue({q});"),
            DnsLookup(d) => result(f, d, "dns_lookup"),
            Log(l) => write!(f, "{l}"),
            PutNdRaOpts(p) => put_opts(f, "put_nd_ra_opts", p),
            NdNs(a) => nested(f, "nd_ns", a),
            SetMeter { rate, burst: 0 } => write!(f, "set_meter({rate});"),
            SetMeter { rate, burst } => write!(f, "set_meter({rate}, {burst});"),
            OvnFieldLoad(l) => {
                // actions.c `format_OVNFIELD_LOAD()` prints the low 16 bits.
                let v = match &l.value {
                    Value::Int(i) => i.value as u16,
                    Value::Str(_) => 0,
                };
                write!(f, "{} = {v};", l.dst.symbol.name)
            }
            CheckPktLarger { dst, len } => write!(f, "{dst} = check_pkt_larger({len});"),
            TriggerEvent(e) => {
                write!(f, "trigger_event(event = \"{}\"", e.event)?;
                options(f, &e.options, true)?;
                f.write_str(");")
            }
            BindVport { vport, parent } => {
                f.write_str("bind_vport(")?;
                write_json_string(f, vport)?;
                write!(f, ", {parent});")
            }
            HandleSvcCheck(p) => write!(f, "handle_svc_check({p});"),
            // actions.c prints "fwd_group();", which does not parse back.
            FwdGroup(g) if !g.liveness && g.child_ports.is_empty() => f.write_str("fwd_group;"),
            FwdGroup(g) => {
                f.write_str("fwd_group(")?;
                if g.liveness {
                    f.write_str("liveness=\"true\", ")?;
                }
                if !g.child_ports.is_empty() {
                    f.write_str("childports=")?;
                    for (i, p) in g.child_ports.iter().enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        write_json_string(f, p)?;
                    }
                }
                f.write_str(");")
            }
            Dhcp6Reply => f.write_str("handle_dhcpv6_reply;"),
            Icmp6Error(a) => nested(f, "icmp6_error", a),
            Reject(a) => nested(f, "reject", a),
            ChkLbHairpin(d) => result(f, d, "chk_lb_hairpin"),
            ChkLbHairpinReply(d) => result(f, d, "chk_lb_hairpin_reply"),
            CtSnatToVip => f.write_str("ct_snat_to_vip;"),
            BfdMsg => f.write_str("handle_bfd_msg();"),
            SctpAbort(a) => nested(f, "sctp_abort", a),
            PutFdb { port, mac } => write!(f, "put_fdb({port}, {mac});"),
            GetFdb { dst, mac } => write!(f, "{dst} = get_fdb({mac});"),
            LookupFdb { dst, port, mac } => write!(f, "{dst} = lookup_fdb({port}, {mac});"),
            CheckInPortSec(d) => result(f, d, "check_in_port_sec"),
            CheckOutPortSec(d) => result(f, d, "check_out_port_sec"),
            CommitEcmpNh { ipv6, proto } => {
                write!(
                    f,
                    "commit_ecmp_nh(ipv6 = {ipv6}, proto = {});",
                    proto_name(*proto)
                )
            }
            ChkEcmpNhMac(d) => result(f, d, "chk_ecmp_nh_mac"),
            ChkEcmpNh(d) => result(f, d, "chk_ecmp_nh"),
            CommitLbAff(c) => write!(f, "{c}"),
            ChkLbAff(d) => result(f, d, "chk_lb_aff"),
            Sample(s) => write!(f, "{s}"),
        }
    }
}
