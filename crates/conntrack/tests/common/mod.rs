//! Packet builders shared by the integration tests.
#![allow(dead_code)]

use std::net::IpAddr;

use conntrack::packet::icmp;
use conntrack::{
    Config, Conntrack, CtAction, CtResult, CtState, Endpoints, IcmpMessage, Packet, TcpFlags,
    TcpSegment, Tuple, L4,
};

pub const SYN: TcpFlags = TcpFlags::SYN;
pub const ACK: TcpFlags = TcpFlags::ACK;
pub const FIN: TcpFlags = TcpFlags::FIN;
pub const RST: TcpFlags = TcpFlags::RST;
pub const PSH: TcpFlags = TcpFlags::PSH;

pub const NEW: CtState = CtState(CtState::TRK.0 | CtState::NEW.0);
pub const EST: CtState = CtState(CtState::TRK.0 | CtState::EST.0);
pub const EST_RPL: CtState = CtState(CtState::TRK.0 | CtState::EST.0 | CtState::RPL.0);
pub const REL: CtState = CtState(CtState::TRK.0 | CtState::REL.0);
pub const REL_RPL: CtState = CtState(CtState::TRK.0 | CtState::REL.0 | CtState::RPL.0);
pub const INV: CtState = CtState(CtState::TRK.0 | CtState::INV.0);

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub fn tracker() -> Conntrack {
    Conntrack::new(Config::default()).unwrap()
}

/// A TCP segment from `src:sport` to `dst:dport`, window 65535. (One
/// argument per header field read: tests read like a packet trace.)
#[allow(clippy::too_many_arguments)]
pub fn tcp(
    src: &str,
    sport: u16,
    dst: &str,
    dport: u16,
    flags: TcpFlags,
    seq: u32,
    ack: u32,
    len: u32,
) -> Packet {
    Packet {
        src: ip(src),
        dst: ip(dst),
        fragment: false,
        l4: L4::Tcp(TcpSegment {
            src_port: sport,
            dst_port: dport,
            flags,
            seq,
            ack,
            window: 65535,
            wscale: None,
            payload_len: len,
        }),
    }
}

pub fn udp(src: &str, sport: u16, dst: &str, dport: u16) -> Packet {
    Packet {
        src: ip(src),
        dst: ip(dst),
        fragment: false,
        l4: L4::Udp {
            src_port: sport,
            dst_port: dport,
        },
    }
}

pub fn other(src: &str, dst: &str, proto: u8) -> Packet {
    Packet {
        src: ip(src),
        dst: ip(dst),
        fragment: false,
        l4: L4::Other { proto },
    }
}

/// An echo request (or reply) with identifier `id`, ICMP or ICMPv6 by the
/// address family.
pub fn echo(src: &str, dst: &str, id: u16, request: bool) -> Packet {
    let v6 = ip(src).is_ipv6();
    let icmp_type = match (v6, request) {
        (false, true) => icmp::ECHO_REQUEST,
        (false, false) => icmp::ECHO_REPLY,
        (true, true) => icmp::V6_ECHO_REQUEST,
        (true, false) => icmp::V6_ECHO_REPLY,
    };
    Packet {
        src: ip(src),
        dst: ip(dst),
        fragment: false,
        l4: L4::Icmp(IcmpMessage {
            icmp_type,
            code: 0,
            id,
            inner: None,
        }),
    }
}

/// An ICMP error from `src` to `dst` about `inner` (as sent by `dst`).
pub fn icmp_error(src: &str, dst: &str, icmp_type: u8, inner: Tuple) -> Packet {
    Packet {
        src: ip(src),
        dst: ip(dst),
        fragment: false,
        l4: L4::Icmp(IcmpMessage {
            icmp_type,
            code: 0,
            id: 0,
            inner: Some(inner),
        }),
    }
}

pub fn lookup(ct: &Conntrack, p: &Packet, zone: u16, now: u64) -> CtResult {
    ct.execute(p, &CtAction::lookup(zone), now)
}

pub fn commit(ct: &Conntrack, p: &Packet, zone: u16, now: u64) -> CtResult {
    ct.execute(p, &CtAction::commit(zone), now)
}

/// Endpoints `src:sport -> dst:dport` (a NAT's answer, or what a test expects of it).
pub fn ep(src: &str, sport: u16, dst: &str, dport: u16) -> Endpoints {
    Endpoints {
        src: ip(src),
        dst: ip(dst),
        src_port: sport,
        dst_port: dport,
    }
}

pub const A: &str = "10.0.0.1";
pub const B: &str = "10.0.0.2";

/// A committed TCP handshake A:40000 → B:80 in `zone`, ISNs 100 and 5000.
pub fn handshake(ct: &Conntrack, zone: u16, now: u64) {
    assert_eq!(
        commit(ct, &tcp(A, 40000, B, 80, SYN, 100, 0, 0), zone, now).state,
        NEW
    );
    let synack = tcp(B, 80, A, 40000, SYN | ACK, 5000, 101, 0);
    assert_eq!(lookup(ct, &synack, zone, now).state, EST_RPL);
    assert_eq!(
        lookup(ct, &tcp(A, 40000, B, 80, ACK, 101, 5001, 0), zone, now).state,
        EST
    );
}
