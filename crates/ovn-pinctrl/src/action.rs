//! The controller actions that make a new packet and run their nested
//! actions on it: `arp`, `nd_ns`, `nd_na`, `nd_na_router`, `icmp4`,
//! `icmp4_error`, `icmp6`, `icmp6_error`, `tcp_reset`, `sctp_abort` and
//! `reject` (ovn-sb(5) "Actions"; OVN 23.03 `lib/actions.c` encodes each
//! as a controller operation, `controller/pinctrl.c` builds the packet).
//!
//! A switch that runs the logical pipeline itself does in two steps what
//! pinctrl does in one:
//!
//! 1. [`start_flow`]: at the action, the new packet's fields, for the
//!    nested actions to run on. They are those of the packet pinctrl
//!    composes (not `ovn-trace`'s approximation), with the registers and
//!    logical ports of the packet that triggered the action (pinctrl's
//!    `reload_metadata()`), and connection tracking state cleared.
//! 2. [`build`]: once the nested actions ran, the frame, from the fields
//!    they left and from what pinctrl takes from the received bytes (the
//!    datagram quoted by an ICMP error, the sequence number a reset
//!    acknowledges, the tag an SCTP ABORT carries).
//!
//! With no nested change, `build(a, rx, at, &start_flow(a, at)?)` is the
//! frame pinctrl sends before its nested actions run.

use ovn_lflow::{Action, Actions, Field, Flow};

use crate::emit::{emit, proto, Kind};
use crate::error::{Error, Header, Result};
use crate::flowbits::low;
use crate::headers::Headers;
use crate::rewrite::rewrite;
use crate::wire::ethernet;

/// ND flags (RFC 4861 §4.4): router, solicited, override.
mod nd_flags {
    pub const ROUTER: u32 = 0x8000_0000;
    pub const SOLICITED: u32 = 0x4000_0000;
    pub const OVERRIDE: u32 = 0x2000_0000;
}

/// Bytes of the invoking packet an ICMPv4 error quotes at most: what fits
/// in 576 bytes after Ethernet, IPv4 and ICMP headers (RFC 1812 §4.3.2.3,
/// as pinctrl computes it).
pub const ICMP4_QUOTE_MAX: usize = 576 - 14 - 20 - 8;
/// Bytes an ICMPv6 error quotes at most: what fits in 1280 bytes after
/// Ethernet, IPv6 and ICMPv6 headers (RFC 4443 §2.4 (c), as pinctrl
/// computes it).
pub const ICMP6_QUOTE_MAX: usize = 1280 - 14 - 40 - 8;

/// TTL and hop limit of pinctrl's resets and aborts.
const RESET_TTL: u128 = 63;
/// TTL and hop limit of pinctrl's ICMP errors and ND messages.
const ICMP_TTL: u128 = 255;

/// One of the controller actions that build a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControllerAction {
    /// `arp { ... };`: an ARP request for the IPv4 packet's destination
    /// (`pinctrl_handle_arp()`).
    Arp,
    /// `nd_ns { ... };`: a neighbour solicitation for the IPv6 packet's
    /// destination (`pinctrl_handle_nd_ns()`).
    NdNs,
    /// `nd_na { ... };`: a neighbour advertisement answering a
    /// solicitation (`pinctrl_handle_nd_na()`).
    NdNa,
    /// `nd_na_router { ... };`: the same with the router flag.
    NdNaRouter,
    /// `icmp4 { ... };`: destination unreachable, code "port unreachable"
    /// for UDP, else "host unreachable" (`pinctrl_handle_icmp()`).
    Icmp4,
    /// `icmp4_error { ... };`: destination unreachable, host unreachable.
    Icmp4Error,
    /// `icmp6 { ... };`: ICMPv6 destination unreachable, code "port
    /// unreachable" for UDP, else "address unreachable".
    Icmp6,
    /// `icmp6_error { ... };`: ICMPv6 destination unreachable, address
    /// unreachable.
    Icmp6Error,
    /// `tcp_reset { ... };`: a RST+ACK (`pinctrl_handle_tcp_reset()`).
    TcpReset,
    /// `sctp_abort { ... };`: an ABORT (`pinctrl_handle_sctp_abort()`).
    SctpAbort,
    /// `reject { ... };`: back to the sender, a TCP reset, an SCTP abort or
    /// an ICMP destination unreachable (`pinctrl_handle_reject()`).
    Reject,
}

impl ControllerAction {
    /// The controller action `a` is, with its nested actions.
    pub fn of(a: &Action) -> Option<(ControllerAction, &Actions)> {
        use ControllerAction as C;
        let (c, n) = match a {
            Action::Arp(n) => (C::Arp, n),
            Action::NdNs(n) => (C::NdNs, n),
            Action::NdNa(n) => (C::NdNa, n),
            Action::NdNaRouter(n) => (C::NdNaRouter, n),
            Action::Icmp4(n) => (C::Icmp4, n),
            Action::Icmp4Error(n) => (C::Icmp4Error, n),
            Action::Icmp6(n) => (C::Icmp6, n),
            Action::Icmp6Error(n) => (C::Icmp6Error, n),
            Action::TcpReset(n) => (C::TcpReset, n),
            Action::SctpAbort(n) => (C::SctpAbort, n),
            Action::Reject(n) => (C::Reject, n),
            _ => return None,
        };
        Some((c, n))
    }

    /// Its name in an actions string.
    pub fn name(self) -> &'static str {
        use ControllerAction as C;
        match self {
            C::Arp => "arp",
            C::NdNs => "nd_ns",
            C::NdNa => "nd_na",
            C::NdNaRouter => "nd_na_router",
            C::Icmp4 => "icmp4",
            C::Icmp4Error => "icmp4_error",
            C::Icmp6 => "icmp6",
            C::Icmp6Error => "icmp6_error",
            C::TcpReset => "tcp_reset",
            C::SctpAbort => "sctp_abort",
            C::Reject => "reject",
        }
    }
}

/// What pinctrl does for one action on one packet (`reject` resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Arp,
    NdNs,
    NdNa {
        router: bool,
    },
    Icmp {
        v6: bool,
        /// Code "port unreachable" for UDP (`icmp4`, `icmp6`, `reject`).
        port_code: bool,
        /// Back to the sender (`reject`).
        loopback: bool,
    },
    TcpReset {
        loopback: bool,
    },
    SctpAbort {
        loopback: bool,
    },
}

fn is_v6(at: &Flow) -> bool {
    at.get(Field::EthType) == u128::from(ethernet::IPV6)
}

fn is_ip(at: &Flow) -> bool {
    matches!(
        at.get(Field::EthType) as u16,
        ethernet::IPV4 | ethernet::IPV6
    )
}

fn wrong(a: ControllerAction, needs: &'static str) -> Error {
    Error::WrongPacket {
        action: a.name(),
        needs,
    }
}

fn plan(a: ControllerAction, at: &Flow) -> Result<Plan> {
    use ControllerAction as C;
    let p = at.get(Field::IpProto) as u8;
    let icmp = |port_code, loopback| {
        if !is_ip(at) {
            return Err(wrong(a, "an IP packet"));
        }
        Ok(Plan::Icmp {
            v6: is_v6(at),
            port_code,
            loopback,
        })
    };
    match a {
        C::Arp if at.get(Field::EthType) == u128::from(ethernet::IPV4) => Ok(Plan::Arp),
        C::Arp => Err(wrong(a, "an IPv4 packet")),
        C::NdNs if is_v6(at) => Ok(Plan::NdNs),
        C::NdNs => Err(wrong(a, "an IPv6 packet")),
        C::NdNa | C::NdNaRouter if is_nd(at) => Ok(Plan::NdNa {
            router: a == C::NdNaRouter,
        }),
        C::NdNa | C::NdNaRouter => Err(wrong(a, "a neighbour solicitation or advertisement")),
        C::Icmp4 | C::Icmp6 => icmp(true, false),
        C::Icmp4Error | C::Icmp6Error => icmp(false, false),
        C::TcpReset if p == proto::TCP => Ok(Plan::TcpReset { loopback: false }),
        C::TcpReset => Err(wrong(a, "a TCP segment")),
        C::SctpAbort if p == proto::SCTP => Ok(Plan::SctpAbort { loopback: false }),
        C::SctpAbort => Err(wrong(a, "an SCTP packet")),
        C::Reject => reject_plan(at).and_then(|p| match p {
            Some(p) => Ok(p),
            None => icmp(true, true),
        }),
    }
}

/// OVS `is_nd()`: ICMPv6 type 135 or 136, code 0.
fn is_nd(at: &Flow) -> bool {
    is_v6(at)
        && at.get(Field::IpProto) == u128::from(proto::ICMPV6)
        && at.get(Field::Icmpv6Code) == 0
        && matches!(at.get(Field::Icmpv6Type), 135 | 136)
}

/// `pinctrl_handle_reject()`: nothing in answer to a reset or an
/// unreachable; a reset for TCP, an abort for SCTP; `None` for ICMP.
fn reject_plan(at: &Flow) -> Result<Option<Plan>> {
    let p = at.get(Field::IpProto) as u8;
    let v6 = is_v6(at);
    let ty = |f: Field| at.get(f) as u8;
    match p {
        proto::TCP if at.get(Field::TcpFlags) & 0x004 != 0 => Err(Error::Ignored("a TCP reset")),
        proto::TCP => Ok(Some(Plan::TcpReset { loopback: true })),
        proto::SCTP => Ok(Some(Plan::SctpAbort { loopback: true })),
        proto::ICMP if !v6 && is_ip(at) && ty(Field::Icmpv4Type) == 3 => {
            Err(Error::Ignored("an ICMP destination unreachable"))
        }
        proto::ICMPV6 if v6 && ty(Field::Icmpv6Type) == 1 => {
            Err(Error::Ignored("an ICMPv6 destination unreachable"))
        }
        _ => Ok(None),
    }
}

/// A flow holding only the packet-independent state pinctrl reloads into
/// the packet it sends: registers and logical ports.
fn metadata(at: &Flow) -> Flow {
    let mut f = Flow::new();
    for m in [
        Field::LogInport,
        Field::LogOutport,
        Field::LogFlags,
        Field::Xxreg0,
        Field::Xxreg1,
        Field::Xreg4,
    ] {
        f.set(m, at.get(m));
    }
    f
}

/// The new packet's fields at action `a` on a packet whose fields are
/// `at`, for the nested actions to run on (see the module doc).
///
/// # Errors
/// When pinctrl would build nothing: [`Error::WrongPacket`] for a packet
/// the action does not apply to, [`Error::Ignored`] for `reject` of a
/// reset or an unreachable.
pub fn start_flow(a: ControllerAction, at: &Flow) -> Result<Flow> {
    Ok(start(plan(a, at)?, at))
}

fn start(p: Plan, at: &Flow) -> Flow {
    let mut f = metadata(at);
    let g = |x: Field| at.get(x);
    match p {
        Plan::Arp => {
            l2(&mut f, at, false, true);
            f.set(Field::EthType, u128::from(ethernet::ARP));
            f.set(Field::ArpOp, 1);
            f.set(Field::ArpSha, g(Field::EthSrc));
            f.set(Field::ArpSpa, g(Field::Ipv4Src));
            f.set(Field::ArpTpa, g(Field::Ipv4Dst));
        }
        Plan::NdNs => {
            let group = solicited_node(g(Field::Ipv6Dst));
            f.set(Field::EthSrc, g(Field::EthSrc));
            f.set(Field::EthDst, 0x3333_0000_0000 | (group & 0xffff_ffff));
            icmp6_header(&mut f, 135, 0);
            f.set(Field::Ipv6Src, link_local(g(Field::EthSrc)));
            f.set(Field::Ipv6Dst, group);
            f.set(Field::NdTarget, g(Field::Ipv6Dst));
            f.set(Field::NdSll, g(Field::EthSrc));
        }
        Plan::NdNa { .. } => {
            l2(&mut f, at, true, false);
            icmp6_header(&mut f, 136, 0);
            f.set(Field::Ipv6Src, g(Field::NdTarget));
            f.set(Field::Ipv6Dst, g(Field::Ipv6Src));
            f.set(Field::NdTarget, g(Field::NdTarget));
            f.set(Field::NdTll, g(Field::EthDst));
        }
        Plan::Icmp {
            v6,
            port_code,
            loopback,
        } => {
            let udp = port_code && g(Field::IpProto) == u128::from(proto::UDP);
            l2(&mut f, at, loopback, true);
            l3(&mut f, at, v6, loopback, ICMP_TTL);
            if v6 {
                icmp6_header(&mut f, 1, if udp { 4 } else { 1 });
            } else {
                f.set(Field::IpProto, u128::from(proto::ICMP));
                f.set(Field::Icmpv4Type, 3);
                f.set(Field::Icmpv4Code, if udp { 3 } else { 1 });
            }
        }
        Plan::TcpReset { loopback } => {
            l2(&mut f, at, loopback, false);
            l3(&mut f, at, is_v6(at), loopback, RESET_TTL);
            f.set(Field::IpProto, u128::from(proto::TCP));
            f.set(Field::TcpSrc, g(Field::TcpDst));
            f.set(Field::TcpDst, g(Field::TcpSrc));
            f.set(Field::TcpFlags, 0x014);
        }
        Plan::SctpAbort { loopback } => {
            l2(&mut f, at, loopback, false);
            l3(&mut f, at, is_v6(at), loopback, RESET_TTL);
            f.set(Field::IpProto, u128::from(proto::SCTP));
            f.set(Field::SctpSrc, g(Field::SctpDst));
            f.set(Field::SctpDst, g(Field::SctpSrc));
        }
    }
    f
}

/// Ethernet addresses (swapped for `swap`), and the VLAN tag if `tag` and
/// the packet had one (pinctrl pushes it for ARP and ICMP only).
fn l2(f: &mut Flow, at: &Flow, swap: bool, tag: bool) {
    let (s, d) = (at.get(Field::EthSrc), at.get(Field::EthDst));
    let (s, d) = if swap { (d, s) } else { (s, d) };
    f.set(Field::EthSrc, s);
    f.set(Field::EthDst, d);
    if tag && at.get(Field::VlanTci) & 0x1000 != 0 {
        f.set(Field::VlanTci, at.get(Field::VlanTci));
    }
}

/// An IP header from `at`'s addresses (swapped for `swap`), TOS 0.
fn l3(f: &mut Flow, at: &Flow, v6: bool, swap: bool, ttl: u128) {
    let (fs, fd, ty) = if v6 {
        (Field::Ipv6Src, Field::Ipv6Dst, ethernet::IPV6)
    } else {
        (Field::Ipv4Src, Field::Ipv4Dst, ethernet::IPV4)
    };
    let (s, d) = (at.get(fs), at.get(fd));
    let (s, d) = if swap { (d, s) } else { (s, d) };
    f.set(Field::EthType, u128::from(ty));
    f.set(fs, s);
    f.set(fd, d);
    f.set(Field::IpTtl, ttl);
}

/// An ICMPv6 header over IPv6 with hop limit 255.
fn icmp6_header(f: &mut Flow, ty: u128, code: u128) {
    f.set(Field::EthType, u128::from(ethernet::IPV6));
    f.set(Field::IpProto, u128::from(proto::ICMPV6));
    f.set(Field::IpTtl, ICMP_TTL);
    f.set(Field::Icmpv6Type, ty);
    f.set(Field::Icmpv6Code, code);
}

/// The solicited-node multicast address of `ip` (RFC 4291 §2.7.1).
pub fn solicited_node(ip: u128) -> u128 {
    0xff02_0000_0000_0000_0000_0001_ff00_0000 | (ip & 0xff_ffff)
}

/// The link-local address of a MAC by modified EUI-64 (RFC 4291 §2.5.1,
/// Appendix A; OVS `in6_generate_lla()`).
pub fn link_local(mac: u128) -> u128 {
    let m: [u8; 6] = low(mac);
    let iid = [m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
    (0xfe80u128 << 112) | u128::from(u64::from_be_bytes(iid))
}

/// The frame pinctrl sends for action `a` on the received frame
/// `received` whose fields at the action are `at`, once the nested
/// actions left the fields `final_flow` (see the module doc).
///
/// `received` may be the frame as it arrived: `at`'s header fields are
/// committed to a copy of it first ([`rewrite`](crate::rewrite())), as
/// Open vSwitch does before it sends a packet to the controller.
///
/// # Errors
/// As [`start_flow`], and when pinctrl refuses the received bytes:
/// [`Error::Truncated`] or [`Error::Malformed`] for headers it needs,
/// [`Error::Ignored`] for `sctp_abort` of an ABORT; [`Error::TooLong`] and
/// [`Error::NotIp`] from [`emit`] for a `final_flow` that cannot be sent.
pub fn build(
    a: ControllerAction,
    received: &[u8],
    at: &Flow,
    final_flow: &Flow,
) -> Result<Vec<u8>> {
    let p = plan(a, at)?;
    let mut pkt_in = received.to_vec();
    rewrite(&mut pkt_in, at);
    match p {
        Plan::Arp => emit(final_flow, &Kind::Arp),
        Plan::NdNs => emit(final_flow, &Kind::NdNs),
        Plan::NdNa { router } => {
            let mut flags = nd_flags::SOLICITED | nd_flags::OVERRIDE;
            if router {
                flags |= nd_flags::ROUTER;
            }
            emit(final_flow, &Kind::NdNa { flags })
        }
        Plan::Icmp { v6, .. } => {
            let data = quote(&pkt_in, v6)?;
            let kind = if v6 {
                Kind::Icmp6 { rest: [0; 4], data }
            } else {
                Kind::Icmp4 { rest: [0; 4], data }
            };
            emit(final_flow, &kind)
        }
        Plan::TcpReset { .. } => {
            let seq = reset_ack(&pkt_in)?;
            let kind = Kind::Tcp {
                seq: 0,
                ack: seq,
                window: 0,
                data: &[],
            };
            emit(final_flow, &kind)
        }
        Plan::SctpAbort { .. } => {
            let (vtag, reflected) = abort_tag(&pkt_in)?;
            let chunk = [6, u8::from(reflected), 0, 4];
            emit(
                final_flow,
                &Kind::Sctp {
                    vtag,
                    chunks: &chunk,
                },
            )
        }
    }
}

/// What an ICMP error quotes: the invoking IP datagram from its header on,
/// as long as its length field says, at most [`ICMP4_QUOTE_MAX`] or
/// [`ICMP6_QUOTE_MAX`] bytes, and never past the frame.
fn quote(pkt_in: &[u8], v6: bool) -> Result<&[u8]> {
    let h = Headers::parse(pkt_in)?;
    let ip = &pkt_in[h.l3..];
    let (len, max) = if v6 {
        let plen = ip.get(4..6).ok_or(Error::Truncated(Header::Ipv6))?;
        (
            40 + usize::from(u16::from_be_bytes([plen[0], plen[1]])),
            ICMP6_QUOTE_MAX,
        )
    } else {
        let tl = ip.get(2..4).ok_or(Error::Truncated(Header::Ipv4))?;
        let tl = usize::from(u16::from_be_bytes([tl[0], tl[1]]));
        if tl < 20 {
            return Err(Error::Malformed(Header::Ipv4));
        }
        (tl, ICMP4_QUOTE_MAX)
    };
    Ok(&ip[..len.min(max).min(ip.len())])
}

/// The received segment's sequence number plus one, which pinctrl's RST
/// acknowledges (whatever the segment's length).
fn reset_ack(pkt_in: &[u8]) -> Result<u32> {
    let h = Headers::parse(pkt_in)?;
    let l4 =
        h.ip.and_then(|ip| pkt_in.get(ip.l4?..))
            .ok_or(Error::Truncated(Header::Tcp))?;
    let seq = l4.get(4..8).ok_or(Error::Truncated(Header::Tcp))?;
    Ok(u32::from_be_bytes([seq[0], seq[1], seq[2], seq[3]]).wrapping_add(1))
}

/// The ABORT's verification tag and whether it is reflected (the T flag):
/// the INIT's initiate tag for an INIT with tag 0 (RFC 9260 §8.4 item 3),
/// else the received tag, reflected (§8.4 item 8).
fn abort_tag(pkt_in: &[u8]) -> Result<(u32, bool)> {
    let h = Headers::parse(pkt_in)?;
    let ip = h.ip.ok_or(Error::Truncated(Header::Sctp))?;
    let l4 = ip.l4.ok_or(Error::Truncated(Header::Sctp))?;
    let sctp = pkt_in
        .get(l4..ip.end)
        .ok_or(Error::Truncated(Header::Sctp))?;
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    if sctp.len() < 13 {
        return Err(Error::Truncated(Header::Sctp));
    }
    let vtag = be32(&sctp[4..8]);
    match sctp[12] {
        6 => Err(Error::Ignored("an SCTP ABORT")),
        1 => {
            // The INIT chunk's fixed part must be in the frame.
            let init = pkt_in
                .get(l4 + 16..l4 + 32)
                .ok_or(Error::Truncated(Header::Sctp))?;
            Ok(if vtag == 0 {
                (be32(init), false)
            } else {
                (vtag, true)
            })
        }
        _ => Ok((vtag, true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_and_solicited_node_of_rfc_examples() {
        // RFC 4291 Appendix A: 34-56-78-9A-BC-DE -> 3656:78ff:fe9a:bcde.
        assert_eq!(
            link_local(0x3456_789a_bcde),
            0xfe80_0000_0000_0000_3656_78ff_fe9a_bcde
        );
        assert_eq!(
            solicited_node(0x2001_0db8_0000_0000_0000_0000_1234_5678),
            0xff02_0000_0000_0000_0000_0001_ff34_5678
        );
    }

    #[test]
    fn reject_answers_neither_resets_nor_unreachables() {
        let tcp = Flow::new()
            .with(Field::EthType, 0x0800)
            .with(Field::IpProto, 6)
            .with(Field::TcpFlags, 0x014);
        assert!(matches!(
            start_flow(ControllerAction::Reject, &tcp),
            Err(Error::Ignored(_))
        ));
        let icmp = Flow::new()
            .with(Field::EthType, 0x0800)
            .with(Field::IpProto, 1)
            .with(Field::Icmpv4Type, 3);
        assert!(matches!(
            start_flow(ControllerAction::Reject, &icmp),
            Err(Error::Ignored(_))
        ));
        let echo = icmp.with(Field::Icmpv4Type, 8);
        assert_eq!(
            start_flow(ControllerAction::Reject, &echo)
                .unwrap()
                .get(Field::Icmpv4Code),
            1
        );
    }
}
