//! UDP, ICMP/ICMPv6 echo, ICMP errors as related, other protocols,
//! fragments.

mod common;

use common::*;
use conntrack::packet::icmp;
use conntrack::{CtAction, InvalidReason, MultiState, Packet, ProtoState, Tuple};

const Z: u16 = 3;

#[test]
fn udp_is_new_until_answered_then_established_both_ways() {
    let ct = tracker();
    let q = udp(A, 5353, B, 53);
    assert_eq!(commit(&ct, &q, Z, 0).state, NEW);
    // A second datagram before any answer: still new (udp_single).
    assert_eq!(lookup(&ct, &q, Z, 1000).state, NEW);
    assert_eq!(
        ct.dump(1000, None).next().unwrap().expires_ms,
        1000 + 60_000
    );
    let answer = udp(B, 53, A, 5353);
    assert_eq!(lookup(&ct, &answer, Z, 2000).state, EST_RPL);
    assert_eq!(lookup(&ct, &q, Z, 3000).state, EST);
    let e = ct.dump(3000, None).next().unwrap();
    assert_eq!(e.state, ProtoState::Udp(MultiState::Bidir));
    assert_eq!(e.expires_ms, 3000 + 30_000, "udp_multiple");
}

#[test]
fn udp_without_commit_is_always_new() {
    let ct = tracker();
    assert_eq!(lookup(&ct, &udp(A, 1, B, 2), Z, 0).state, NEW);
    assert_eq!(lookup(&ct, &udp(B, 2, A, 1), Z, 0).state, NEW);
    assert!(ct.is_empty());
}

#[test]
fn port_zero_is_invalid() {
    let ct = tracker();
    let r = commit(&ct, &udp(A, 0, B, 53), Z, 0);
    assert_eq!((r.state, r.invalid), (INV, Some(InvalidReason::Malformed)));
}

#[test]
fn icmp_echo_request_and_reply() {
    for (a, b) in [(A, B), ("fd00::1", "fd00::2")] {
        let ct = tracker();
        assert_eq!(commit(&ct, &echo(a, b, 77, true), Z, 0).state, NEW);
        assert_eq!(lookup(&ct, &echo(a, b, 77, true), Z, 1).state, NEW);
        assert_eq!(lookup(&ct, &echo(b, a, 77, false), Z, 2).state, EST_RPL);
        assert_eq!(lookup(&ct, &echo(a, b, 77, true), Z, 3).state, EST);
        // Another identifier is another connection.
        assert_eq!(lookup(&ct, &echo(a, b, 78, true), Z, 3).state, NEW);
        // A reply of no connection is invalid; so is B's own request with
        // the same id as a reply to A (it is a different connection).
        let r = lookup(&ct, &echo(b, a, 78, false), Z, 3);
        assert_eq!(r.invalid, Some(InvalidReason::NotOpener));
        assert_eq!(lookup(&ct, &echo(b, a, 77, true), Z, 3).state, NEW);
        assert_eq!(ct.dump(3, None).next().unwrap().expires_ms, 3 + 30_000);
    }
}

#[test]
fn unknown_icmp_types_are_invalid() {
    let ct = tracker();
    let mut p = echo(A, B, 1, true);
    if let conntrack::L4::Icmp(m) = &mut p.l4 {
        m.icmp_type = 9; // router advertisement
    }
    assert_eq!(
        commit(&ct, &p, Z, 0).invalid,
        Some(InvalidReason::UnsupportedIcmp)
    );
}

fn tcp_tuple(src: &str, sport: u16, dst: &str, dport: u16) -> Tuple {
    Tuple::ports(ip(src), ip(dst), 6, sport, dport)
}

#[test]
fn icmp_errors_about_a_connection_are_related() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    // A router R tells A its segment to B could not be delivered: the
    // embedded header is A→B, the error goes to A, in the reply direction.
    let err = icmp_error(
        "192.0.2.254",
        A,
        icmp::DEST_UNREACH,
        tcp_tuple(A, 40000, B, 80),
    );
    let r = lookup(&ct, &err, Z, 1);
    assert_eq!(r.state, REL_RPL);
    // An error about B's segment goes to B: original direction.
    let err = icmp_error(
        "192.0.2.254",
        B,
        icmp::TIME_EXCEEDED,
        tcp_tuple(B, 80, A, 40000),
    );
    assert_eq!(lookup(&ct, &err, Z, 1).state, REL);
    // Errors change no state: the connection's expiry did not move.
    assert_eq!(ct.dump(1, None).next().unwrap().expires_ms, 86_400_000);
}

#[test]
fn icmp_errors_about_nothing_are_invalid() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    // Unknown connection.
    let err = icmp_error(
        "192.0.2.254",
        A,
        icmp::DEST_UNREACH,
        tcp_tuple(A, 40001, B, 80),
    );
    assert_eq!(
        lookup(&ct, &err, Z, 1).invalid,
        Some(InvalidReason::IcmpUnrelated)
    );
    // Known connection, but the error is not going to the packet's sender.
    let err = icmp_error(
        "192.0.2.254",
        B,
        icmp::DEST_UNREACH,
        tcp_tuple(A, 40000, B, 80),
    );
    assert_eq!(
        lookup(&ct, &err, Z, 1).invalid,
        Some(InvalidReason::IcmpUnrelated)
    );
    // Known connection, other zone.
    let err = icmp_error(
        "192.0.2.254",
        A,
        icmp::DEST_UNREACH,
        tcp_tuple(A, 40000, B, 80),
    );
    assert_eq!(
        lookup(&ct, &err, Z + 1, 1).invalid,
        Some(InvalidReason::IcmpUnrelated)
    );
    assert_eq!(ct.stats().invalid(InvalidReason::IcmpUnrelated), 3);
}

#[test]
fn icmp_error_about_an_echo_is_related() {
    let ct = tracker();
    commit(&ct, &echo(A, B, 9, true), Z, 0);
    let inner = Tuple {
        icmp_type: icmp::ECHO_REQUEST,
        ..Tuple::ports(ip(A), ip(B), 1, 9, 9)
    };
    let err = icmp_error("192.0.2.254", A, icmp::TIME_EXCEEDED, inner);
    assert_eq!(lookup(&ct, &err, Z, 1).state, REL_RPL);
}

#[test]
fn icmpv6_packet_too_big_from_bytes_is_related() {
    use etherparse::PacketBuilder;
    let ct = tracker();
    let (a, b) = ("2001:db8::1", "2001:db8::2");
    commit(&ct, &tcp(a, 1111, b, 443, SYN, 1, 0, 0), Z, 0);
    // The offending packet as B would see it, then cut to 48 bytes of it.
    let mut inner = Vec::new();
    let ipv6 = |s: &str| match ip(s) {
        std::net::IpAddr::V6(v) => v.octets(),
        _ => unreachable!(),
    };
    PacketBuilder::ipv6(ipv6(a), ipv6(b), 64)
        .tcp(1111, 443, 2, 65535)
        .ack(77)
        .write(&mut inner, &[0u8; 1400])
        .unwrap();
    inner.truncate(48);
    let mut err = Vec::new();
    PacketBuilder::ipv6(ipv6("2001:db8::fe"), ipv6(a), 64)
        .icmpv6(etherparse::Icmpv6Type::PacketTooBig { mtu: 1280 })
        .write(&mut err, &inner)
        .unwrap();
    let pkt = conntrack::parse(&err, conntrack::Checksums::Verify).unwrap();
    assert_eq!(ct.execute(&pkt, &CtAction::lookup(Z), 1).state, REL_RPL);
}

#[test]
fn other_protocols_track_by_addresses() {
    let ct = tracker();
    let gre = other(A, B, 47);
    assert_eq!(commit(&ct, &gre, Z, 0).state, NEW);
    assert_eq!(lookup(&ct, &gre, Z, 1).state, NEW);
    assert_eq!(lookup(&ct, &other(B, A, 47), Z, 2).state, EST_RPL);
    assert_eq!(lookup(&ct, &gre, Z, 3).state, EST);
    // Another protocol between the same hosts is another connection.
    assert_eq!(lookup(&ct, &other(A, B, 50), Z, 3).state, NEW);
    // A TCP number with no TCP header is inconsistent.
    assert_eq!(
        lookup(&ct, &other(A, B, 6), Z, 3).invalid,
        Some(InvalidReason::Malformed)
    );
}

#[test]
fn fragments_are_refused_and_counted() {
    let ct = tracker();
    let frag = Packet {
        fragment: true,
        ..udp(A, 1, B, 2)
    };
    let r = commit(&ct, &frag, Z, 0);
    assert_eq!((r.state, r.invalid), (INV, Some(InvalidReason::Fragment)));
    assert!(ct.is_empty());
    // From bytes: an IPv4 first fragment (MF set).
    let mut bytes = Vec::new();
    etherparse::PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(1, 2)
        .write(&mut bytes, &[0; 16])
        .unwrap();
    bytes[6] |= 0x20;
    let r = ct.execute_l3(&bytes, conntrack::Checksums::Trust, &CtAction::commit(Z), 0);
    assert_eq!(r.invalid, Some(InvalidReason::Fragment));
    assert_eq!(ct.stats().invalid(InvalidReason::Fragment), 2);
}

#[test]
fn unparseable_bytes_are_invalid() {
    let ct = tracker();
    let r = ct.execute_l3(
        &[0x45, 0, 0],
        conntrack::Checksums::Trust,
        &CtAction::commit(Z),
        0,
    );
    assert_eq!((r.state, r.invalid), (INV, Some(InvalidReason::Malformed)));
    let mut bytes = Vec::new();
    etherparse::PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(1, 2)
        .write(&mut bytes, &[0; 16])
        .unwrap();
    bytes[30] ^= 0xff;
    let r = ct.execute_l3(
        &bytes,
        conntrack::Checksums::Verify,
        &CtAction::commit(Z),
        0,
    );
    assert_eq!(r.invalid, Some(InvalidReason::Checksum));
    let r = ct.execute_l3(&bytes, conntrack::Checksums::Trust, &CtAction::commit(Z), 0);
    assert_eq!(r.state, NEW);
}
