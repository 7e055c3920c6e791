//! NAT and load balancing in the pipeline: the connection tracking requests OVN's
//! `ct_dnat`, `ct_snat`, `ct_lb_mark` compile to (OVN 23.03 `actions.c`,
//! `encode_ct_nat`, `encode_ct_lb`), backend selection, and the packet's fields after a
//! translation.
//!
//! - `ct_dnat(ip[, lo-hi])`, `ct_snat(...)`: `ct(commit, zone, nat(dst|src=ip[:lo-hi]))`;
//!   without an address, `ct(zone, nat)`: the connection's translation, if any.
//! - `ct_lb_mark(backends=...)`: one backend of the packet's family, chosen by a hash of
//!   the fields `hash_fields` names (OVS `selection_method=hash`), else of the 5-tuple
//!   (OVS `dp_hash`); then `ct(commit, zone, nat(dst=backend), exec(ct_mark.natted = 1
//!   [, skip_snat | force_snat]))` (`ct_lb`: the same bits of `ct_label`). Without
//!   backends, `ct(zone, nat)`. Every packet of a connection is the same flow, so the
//!   choice is stable for the connection and a cached program may hold it.

use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use conntrack::{Endpoints, Nat, NatRange};
use ovn_lflow::actions::{CommitLbAff, CtLb, CtLbFlag, CtNat};
use ovn_lflow::{Action, Field, Flow, Subfield};

use super::interp::{ct_state_text, Commit, CtReq, CtResult};
use crate::model::lflow::{AffinityKey, LbPick, Tracker};

/// `ct_mark.natted` / `ct_label.natted` (OVN `OVN_CT_NATTED_BIT`).
const NATTED: u32 = 1 << 1;
/// `ct_mark.skip_snat` (`OVN_CT_LB_SKIP_SNAT_BIT`).
const SKIP_SNAT: u32 = 1 << 2;
/// `ct_mark.force_snat` (`OVN_CT_LB_FORCE_SNAT_BIT`).
const FORCE_SNAT: u32 = 1 << 3;

/// The request of `ct_dnat` (`dst`) or `ct_snat` with `n`'s address and ports, in `zone`.
pub fn nat_request(zone: u16, n: &CtNat, dst: bool) -> CtReq {
    let Some(ip) = n.ip else {
        return CtReq {
            nat: Some(Nat::Existing),
            ..CtReq::lookup(zone)
        };
    };
    let range = NatRange {
        min: ip,
        max: ip,
        ports: n.ports.map(|(lo, hi)| (lo, hi.unwrap_or(lo))),
    };
    CtReq {
        nat: Some(if dst {
            Nat::Dst(range)
        } else {
            Nat::Src(range)
        }),
        ..CtReq::commit(zone, Commit::default())
    }
}

/// The request of `ct_lb_mark` (`mark`) or `ct_lb` for the packet with fields `flow`, in
/// `zone`, and, among several backends chosen by the fields [`LbPick`] hashes, the
/// choice (a cached program makes it again for each packet: not a read of the
/// packet's fields, [`Flow::reads`]); `None` when it has backends but none of the
/// packet's family.
pub fn lb_request(
    zone: u16,
    lb: &CtLb,
    mark: bool,
    flow: &Flow,
) -> Option<(CtReq, Option<Arc<LbPick>>)> {
    if lb.backends.is_empty() {
        let req = CtReq {
            nat: Some(Nat::Existing),
            ..CtReq::lookup(zone)
        };
        return Some((req, None));
    }
    let v6 = flow.get(Field::EthType) == 0x86dd;
    let family: Vec<_> = lb
        .backends
        .iter()
        .filter(|b| b.ip.is_ipv6() == v6)
        .collect();
    let mut pick = None;
    let b = match (family.len(), pick_fields(lb.hash_fields.as_deref())) {
        (0, _) => return None,
        // One backend is every connection's: no field of the packet chosen by.
        (1, _) => (family[0].ip, family[0].port),
        (_, Some(fields)) => {
            let p = LbPick {
                backends: family.iter().map(|b| (b.ip, b.port)).collect(),
                fields,
            };
            let e = endpoints_of(&flow.detached())?;
            let chosen = p.choose(&e, flow.get(Field::IpProto) as u8);
            pick = Some(Arc::new(p));
            chosen
        }
        (n, None) => {
            let b = family[select(flow, lb.hash_fields.as_deref()) as usize % n];
            (b.ip, b.port)
        }
    };
    let bits = NATTED
        | match lb.flag {
            CtLbFlag::None => 0,
            CtLbFlag::SkipSnat => SKIP_SNAT,
            CtLbFlag::ForceSnat => FORCE_SNAT,
        };
    let writes = if mark {
        Commit {
            mark: (bits, bits),
            ..Commit::default()
        }
    } else {
        Commit {
            label: (u128::from(bits), u128::from(bits)),
            ..Commit::default()
        }
    };
    let range = NatRange {
        min: b.0,
        max: b.0,
        ports: (b.1 != 0).then_some((b.1, b.1)),
    };
    let req = CtReq {
        nat: Some(Nat::Dst(range)),
        ..CtReq::commit(zone, writes)
    };
    Some((req, pick))
}

/// The [`LbPick`] fields of OVS `hash_fields` (default: the 5-tuple); `None` when it
/// names another (the MACs: [`select`] chooses, reading them).
fn pick_fields(hash_fields: Option<&str>) -> Option<u8> {
    let Some(names) = hash_fields else {
        return Some(
            LbPick::SRC | LbPick::DST | LbPick::PROTO | LbPick::SRC_PORT | LbPick::DST_PORT,
        );
    };
    names
        .split(',')
        .map(str::trim)
        .try_fold(0, |f, name| match hash_field(name)? {
            (0, _) => None,
            (bit, _) => Some(f | bit),
        })
}

/// An OVS `hash_fields` name: its [`LbPick`] bit (0: none, the MACs) and the fields
/// of a flow it hashes; `None` for a name OVS does not hash by.
fn hash_field(name: &str) -> Option<(u8, &'static [Field])> {
    Some(match name {
        "ip_src" | "nw_src" | "ipv6_src" => (LbPick::SRC, &[Field::Ipv4Src, Field::Ipv6Src]),
        "ip_dst" | "nw_dst" | "ipv6_dst" => (LbPick::DST, &[Field::Ipv4Dst, Field::Ipv6Dst]),
        "nw_proto" | "ip_proto" => (LbPick::PROTO, &[Field::IpProto]),
        "tp_src" => (
            LbPick::SRC_PORT,
            &[Field::TcpSrc, Field::UdpSrc, Field::SctpSrc],
        ),
        "tp_dst" => (
            LbPick::DST_PORT,
            &[Field::TcpDst, Field::UdpDst, Field::SctpDst],
        ),
        "eth_src" => (0, &[Field::EthSrc]),
        "eth_dst" => (0, &[Field::EthDst]),
        _ => return None,
    })
}

/// `ct(commit, zone, nat(src=ip))`: `ct_snat_to_vip`'s request.
pub fn snat_to(zone: u16, ip: IpAddr) -> CtReq {
    CtReq {
        nat: Some(Nat::Src(NatRange {
            min: ip,
            max: ip,
            ports: None,
        })),
        ..CtReq::commit(zone, Commit::default())
    }
}

/// `chk_lb_hairpin()`: the packet's connection was translated to a backend
/// (`ct_state` has `dnat`) that is its own sender (ovn-trace.c
/// `execute_chk_lb_hairpin`; ovn-controller matches the backends of the datapath's
/// load balancers to the same effect).
pub fn is_hairpin(flow: &Flow) -> bool {
    const DNAT: u128 = 0x80;
    // The addresses only: the ports are no part of the decision (a cached program
    // of it holds for every port, Flow::reads).
    flow.get(Field::CtState) & DNAT != 0
        && match flow.get(Field::EthType) {
            0x0800 => flow.get(Field::Ipv4Src) == flow.get(Field::Ipv4Dst),
            0x86dd => flow.get(Field::Ipv6Src) == flow.get(Field::Ipv6Dst),
            _ => false,
        }
}

/// Notes every address and port field as read ([`Flow::reads`]): for a decision on
/// the packet's connection's original tuple, which came from them.
pub fn note_tuple_read(flow: &Flow) {
    use Field::*;
    for f in [
        Ipv4Src, Ipv4Dst, Ipv6Src, Ipv6Dst, TcpSrc, TcpDst, UdpSrc, UdpDst, SctpSrc, SctpDst,
    ] {
        flow.note_read(f);
    }
}

/// Whether the packet is IPv4 or IPv6 (what [`endpoints_of`] needs), reading neither
/// its addresses nor its ports.
pub fn is_ip(flow: &Flow) -> bool {
    matches!(flow.get(Field::EthType), 0x0800 | 0x86dd)
}

/// A hash of the fields a load balancer selects by: `hash_fields` names OVS fields
/// (`ip_src`, `ip_dst`, `tp_src`, `tp_dst`, `nw_proto`...); without, the 5-tuple.
fn select(flow: &Flow, hash_fields: Option<&str>) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    let all = "ip_src,ip_dst,nw_proto,tp_src,tp_dst";
    for name in hash_fields.unwrap_or(all).split(',').map(str::trim) {
        let fields = hash_field(name).map_or(&[][..], |(_, f)| f);
        for f in fields {
            flow.get(*f).hash(&mut h);
        }
    }
    // Fx's low bits are weak for small inputs: fold the high half in.
    let v = h.finish();
    v ^ (v >> 32)
}

/// The packet's addresses and ports (TCP and UDP; 0 for others), `None` when not IP.
pub fn endpoints_of(flow: &Flow) -> Option<Endpoints> {
    let (src, dst) = match flow.get(Field::EthType) {
        0x0800 => (
            IpAddr::from(std::net::Ipv4Addr::from(flow.get(Field::Ipv4Src) as u32)),
            IpAddr::from(std::net::Ipv4Addr::from(flow.get(Field::Ipv4Dst) as u32)),
        ),
        0x86dd => (
            IpAddr::from(std::net::Ipv6Addr::from(flow.get(Field::Ipv6Src))),
            IpAddr::from(std::net::Ipv6Addr::from(flow.get(Field::Ipv6Dst))),
        ),
        _ => return None,
    };
    let (src_port, dst_port) = port_fields(flow).map_or((0, 0), |(sp, dp)| {
        (flow.get(sp) as u16, flow.get(dp) as u16)
    });
    Some(Endpoints {
        src,
        dst,
        src_port,
        dst_port,
    })
}

/// The fields of the packet's ports that NAT translates: TCP's or UDP's.
fn port_fields(flow: &Flow) -> Option<(Field, Field)> {
    match flow.get(Field::IpProto) {
        6 => Some((Field::TcpSrc, Field::TcpDst)),
        17 => Some((Field::UdpSrc, Field::UdpDst)),
        _ => None,
    }
}

/// Writes `e` into the packet's addresses and, for TCP and UDP, ports.
pub fn write_endpoints(flow: &mut Flow, e: &Endpoints) {
    match (e.src, e.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            flow.set(Field::Ipv4Src, u128::from(u32::from(s)));
            flow.set(Field::Ipv4Dst, u128::from(u32::from(d)));
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            flow.set(Field::Ipv6Src, u128::from(s));
            flow.set(Field::Ipv6Dst, u128::from(d));
        }
        _ => return,
    }
    if let Some((sp, dp)) = port_fields(flow) {
        flow.set(sp, u128::from(e.src_port));
        flow.set(dp, u128::from(e.dst_port));
    }
}

/// The packet `flow` as a request with a range translates it, for a tracker that does
/// not track (`ovn-trace`): the translated endpoints.
pub fn traced_translation(req: &CtReq, flow: &Flow) -> Option<Endpoints> {
    let mut e = endpoints_of(flow)?;
    match req.nat? {
        Nat::Existing => return None,
        Nat::Dst(r) => {
            e.dst = r.min;
            if let Some((lo, _)) = r.ports {
                e.dst_port = lo;
            }
        }
        Nat::Src(r) => {
            e.src = r.min;
            if let Some((lo, _)) = r.ports {
                e.src_port = lo;
            }
        }
    }
    Some(e)
}

/// How a trace shows a step (as `ovn-trace` does): `ct_next(ct_state=new|trk)`,
/// `ct_dnat(ip4.dst=10.0.0.5)`, `ct_lb_mark`...
pub fn step_text(a: &Action, req: &CtReq, r: &CtResult, before: &Flow, after: &Flow) -> String {
    use Action::*;
    let translated = r.nat.is_some() && before != after;
    match a {
        CtNext(_) => format!("ct_next(ct_state={})", ct_state_text(r.state)),
        CtCommitNat(_) if !translated => {
            "ct_commit_nat /* assuming no un-nat entry, so no change */".into()
        }
        CtDnat(_) | CtSnat(_) | CtDnatInCzone(_) | CtSnatInCzone(_) => {
            let (dir, letter) = match req.nat {
                Some(Nat::Dst(_)) => ("dst", 'd'),
                Some(Nat::Src(_)) => ("src", 's'),
                _ if matches!(a, CtDnat(_) | CtDnatInCzone(_)) => ("dst", 'd'),
                _ => ("src", 's'),
            };
            let czone = if matches!(a, CtDnatInCzone(_) | CtSnatInCzone(_)) {
                "in_czone"
            } else {
                ""
            };
            match changed_address(before, after, dir) {
                Some(text) => format!("ct_{letter}nat{czone}({text})"),
                None => format!(
                    "ct_{letter}nat{czone} /* assuming no un-{letter}nat entry, so no change */"
                ),
            }
        }
        other => other.name().to_string(),
    }
}

/// `ip4.dst=10.0.0.5` when the step changed the `dir` address.
fn changed_address(before: &Flow, after: &Flow, dir: &str) -> Option<String> {
    let (b, a) = (endpoints_of(before)?, endpoints_of(after)?);
    let (was, now) = if dir == "dst" {
        (b.dst, a.dst)
    } else {
        (b.src, a.src)
    };
    (was != now).then(|| {
        let v = if now.is_ipv6() { "ip6" } else { "ip4" };
        format!("{v}.{dir}={now}")
    })
}

/// The affinity session `flow` belongs to in datapath `dp`: its client, the VIP and
/// port (`vip`, or the packet's destination), its protocol.
fn affinity_key(dp: u32, flow: &Flow, vip: Option<(IpAddr, u16)>) -> Option<AffinityKey> {
    let e = endpoints_of(flow)?;
    let (vip, vip_port) = vip.unwrap_or((e.dst, e.dst_port));
    Some(AffinityKey {
        dp,
        client: e.src,
        vip,
        proto: flow.get(Field::IpProto) as u8,
        vip_port,
    })
}

/// `chk_lb_aff()` (OVN's `OFTABLE_CHK_LB_AFFINITY`): whether the packet's client has
/// an affinity session with its destination VIP in datapath `dp` (a router's when
/// `router`); if so, the session's backend is loaded where OVN's learned flow loads
/// it: the address in `reg4` (IPv6: `xxreg0` on a switch, `xxreg1` on a router), the
/// port in `reg8[0..15]`, and `flags[14]` (`MLF_USE_LB_AFF_SESSION`) set.
///
/// The VIP is the connection's original destination when the packet's connection is
/// known (`orig`), else the packet's destination. OVN's learned flow matches the
/// packet's destination; a retransmission of a connection's first SYN (which the
/// learn stage drops, `commit_lb_aff(...); /* drop */`) arrives translated to the
/// backend already, and would miss its session and be dropped again.
pub fn chk_lb_aff(
    ct: &mut (impl Tracker + ?Sized),
    (dp, router): (u32, bool),
    flow: &mut Flow,
    orig: Option<&Endpoints>,
) -> bool {
    let vip = orig.map(|o| (o.dst, o.dst_port));
    let Some((ip, port)) = affinity_key(dp, flow, vip).and_then(|k| ct.lb_affinity(&k)) else {
        return false;
    };
    match ip {
        IpAddr::V4(a) => {
            let reg4 = Subfield {
                field: Field::Xxreg1,
                ofs: 96,
                n_bits: 32,
            };
            flow.set_subfield(reg4, u128::from(u32::from(a)));
        }
        IpAddr::V6(a) => {
            let f = if router { Field::Xxreg1 } else { Field::Xxreg0 };
            flow.set(f, u128::from(a));
        }
    }
    let reg8 = Subfield {
        field: Field::Xreg4,
        ofs: 32,
        n_bits: 16,
    };
    flow.set_subfield(reg8, u128::from(port));
    let use_session = Subfield {
        field: Field::LogFlags,
        ofs: 14,
        n_bits: 1,
    };
    flow.set_subfield(use_session, 1);
    true
}

/// `commit_lb_aff(vip, backend, proto, timeout)`: starts the packet's client's
/// affinity session with the VIP in datapath `dp`, to `a`'s backend.
pub fn commit_lb_aff(ct: &mut (impl Tracker + ?Sized), dp: u32, flow: &Flow, a: &CommitLbAff) {
    if let Some(mut key) = affinity_key(dp, flow, Some((a.vip, a.vip_port))) {
        key.proto = a.proto;
        ct.commit_lb_affinity(key, (a.backend, a.backend_port), a.timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ovn_lflow::actions::Backend;

    fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Flow {
        let mut f = Flow::default();
        f.set(Field::EthType, 0x0800);
        f.set(Field::IpProto, 6);
        f.set(Field::Ipv4Src, u128::from(u32::from_be_bytes(src)));
        f.set(Field::Ipv4Dst, u128::from(u32::from_be_bytes(dst)));
        f.set(Field::TcpSrc, u128::from(sport));
        f.set(Field::TcpDst, u128::from(dport));
        f
    }

    fn lb(n: u8) -> CtLb {
        CtLb {
            backends: (1..=n)
                .map(|i| Backend {
                    ip: IpAddr::from([10, 0, 0, i]),
                    port: 8080,
                })
                .collect(),
            hash_fields: None,
            flag: CtLbFlag::SkipSnat,
            table: 7,
        }
    }

    #[test]
    fn a_load_balancer_spreads_flows_and_keeps_each_on_one_backend() {
        let mut counts = [0u32; 3];
        for sport in 1024..4024u16 {
            let f = tcp([10, 0, 1, 5], [172, 16, 0, 1], sport, 80);
            f.clear_reads();
            let (req, pick) = lb_request(9, &lb(3), true, &f).unwrap();
            assert_eq!(
                (req, &pick),
                (lb_request(9, &lb(3), true, &f).unwrap().0, &pick),
                "stable"
            );
            assert_eq!(
                f.reads() & (1 << Field::TcpSrc.index()),
                0,
                "the ports are not read"
            );
            let pick = pick.expect("three backends: a program chooses again");
            let e = endpoints_of(&f).unwrap();
            assert_eq!(
                pick.request(req, &e, 6),
                req,
                "the program's choice is the same"
            );
            assert!(req.commit);
            assert_eq!(req.writes.mark, (NATTED | SKIP_SNAT, NATTED | SKIP_SNAT));
            let Some(Nat::Dst(r)) = req.nat else {
                panic!("{req:?}")
            };
            assert_eq!(r.ports, Some((8080, 8080)));
            let IpAddr::V4(ip) = r.min else { panic!() };
            counts[usize::from(ip.octets()[3] - 1)] += 1;
        }
        // 3000 flows over 3 backends: each well within 20-45 %.
        for c in counts {
            assert!((600..=1350).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn without_backends_a_load_balancer_only_un_nats() {
        let f = tcp([10, 0, 1, 5], [172, 16, 0, 1], 1000, 80);
        let (req, pick) = lb_request(9, &lb(0), false, &f).unwrap();
        assert_eq!(
            (req.commit, req.nat, pick),
            (false, Some(Nat::Existing), None)
        );
        assert_eq!(
            lb_request(9, &lb(1), true, &f).unwrap().1,
            None,
            "one backend: no choice"
        );
        let mut macs = lb(2);
        macs.hash_fields = Some("eth_src,ip_src".into());
        assert_eq!(
            lb_request(9, &macs, true, &f).unwrap().1,
            None,
            "MACs: chosen once"
        );
        let mut v6 = f.clone();
        v6.set(Field::EthType, 0x86dd);
        assert_eq!(lb_request(9, &lb(2), true, &v6), None, "no IPv6 backend");
    }

    #[test]
    fn endpoints_round_trip_through_the_flow() {
        let mut f = tcp([10, 0, 1, 5], [172, 16, 0, 1], 1000, 80);
        let mut e = endpoints_of(&f).unwrap();
        e.dst = IpAddr::from([10, 0, 0, 2]);
        e.dst_port = 8080;
        write_endpoints(&mut f, &e);
        assert_eq!(endpoints_of(&f), Some(e));
        assert_eq!(f.get(Field::TcpDst), 8080);
    }
}
