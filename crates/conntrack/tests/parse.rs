//! The L3 parser against packets built by etherparse: every field it
//! reads, extension headers, options, ICMP error payloads, fragments,
//! checksums, and every truncation.

use std::net::IpAddr;

use conntrack::packet::icmp;
use conntrack::{parse, Checksums, IcmpMessage, Packet, ParseError, TcpFlags, Tuple, L4};
use etherparse::{IpNumber, Ipv4Header, Ipv6FragmentHeader, Ipv6RawExtHeader, PacketBuilder};
use proptest::prelude::*;

const A4: [u8; 4] = [192, 0, 2, 1];
const B4: [u8; 4] = [198, 51, 100, 7];
const A6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const B6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn verified(b: &[u8]) -> Packet {
    parse(b, Checksums::Verify).expect("parses")
}

#[test]
fn ipv4_tcp_syn_with_window_scale() {
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .tcp(40000, 443, 0x1234_5678, 29200)
        .syn()
        .options(&[
            etherparse::TcpOptionElement::MaximumSegmentSize(1460),
            etherparse::TcpOptionElement::Noop,
            etherparse::TcpOptionElement::WindowScale(7),
        ])
        .unwrap()
        .write(&mut b, &[])
        .unwrap();
    let p = verified(&b);
    assert_eq!(
        (p.src, p.dst, p.fragment),
        (IpAddr::from(A4), IpAddr::from(B4), false)
    );
    let L4::Tcp(t) = p.l4 else { panic!("{p:?}") };
    assert_eq!(
        (t.src_port, t.dst_port, t.seq, t.window),
        (40000, 443, 0x1234_5678, 29200)
    );
    assert_eq!(t.flags, TcpFlags::SYN);
    assert_eq!((t.wscale, t.payload_len), (Some(7), 0));
    assert_eq!(p.proto(), 6);
}

#[test]
fn ipv4_options_and_ethernet_padding_are_skipped() {
    let mut b = Vec::new();
    let mut ip = Ipv4Header::new(0, 64, IpNumber::UDP, A4, B4).unwrap();
    ip.options = [1, 1, 1, 0].as_slice().try_into().unwrap();
    PacketBuilder::ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
        .udp(53, 5353)
        .write(&mut b, &[1, 2, 3])
        .unwrap();
    b.extend_from_slice(&[0; 20]); // padding after the IP total length
    let p = verified(&b);
    assert_eq!(
        p.l4,
        L4::Udp {
            src_port: 53,
            dst_port: 5353
        }
    );
}

#[test]
fn ipv6_extension_headers_are_walked() {
    let mut b = Vec::new();
    // Hop-by-Hop, Destination Options, and an atomic fragment (offset 0,
    // no more fragments: a whole packet, RFC 6946).
    let ext = etherparse::Ipv6Extensions {
        hop_by_hop_options: Some(
            Ipv6RawExtHeader::new_raw(IpNumber::IPV6_DESTINATION_OPTIONS, &[0; 6]).unwrap(),
        ),
        destination_options: Some(
            Ipv6RawExtHeader::new_raw(IpNumber::IPV6_FRAGMENTATION_HEADER, &[0; 14]).unwrap(),
        ),
        fragment: Some(Ipv6FragmentHeader::new(
            IpNumber::TCP,
            0.try_into().unwrap(),
            false,
            7,
        )),
        ..Default::default()
    };
    let ipv6 = etherparse::Ipv6Header {
        next_header: IpNumber::IPV6_HEADER_HOP_BY_HOP,
        hop_limit: 64,
        source: A6,
        destination: B6,
        ..Default::default()
    };
    PacketBuilder::ip(etherparse::IpHeaders::Ipv6(ipv6, ext))
        .tcp(1, 2, 3, 4)
        .ack(5)
        .write(&mut b, &[9; 10])
        .unwrap();
    let p = verified(&b);
    let L4::Tcp(t) = p.l4 else { panic!("{p:?}") };
    assert_eq!((t.src_port, t.ack, t.payload_len), (1, 5, 10));
    assert_eq!(t.flags, TcpFlags::ACK);
}

#[test]
fn fragments_have_no_transport_header() {
    // IPv4 later fragment.
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .udp(1, 2)
        .write(&mut b, &[0; 8])
        .unwrap();
    b[6] = 0x00;
    b[7] = 0x10; // offset 16 × 8
    let p = parse(&b, Checksums::Trust).unwrap();
    assert_eq!((p.fragment, p.l4), (true, L4::Other { proto: 17 }));
    // IPv6 first fragment.
    let ext = etherparse::Ipv6Extensions {
        fragment: Some(Ipv6FragmentHeader::new(
            IpNumber::UDP,
            0.try_into().unwrap(),
            true,
            99,
        )),
        ..Default::default()
    };
    let ipv6 = etherparse::Ipv6Header {
        next_header: IpNumber::IPV6_FRAGMENTATION_HEADER,
        hop_limit: 64,
        source: A6,
        destination: B6,
        ..Default::default()
    };
    let mut b = Vec::new();
    PacketBuilder::ip(etherparse::IpHeaders::Ipv6(ipv6, ext))
        .udp(1, 2)
        .write(&mut b, &[0; 8])
        .unwrap();
    let p = parse(&b, Checksums::Trust).unwrap();
    assert_eq!((p.fragment, p.l4), (true, L4::Other { proto: 17 }));
}

#[test]
fn icmp_echo_and_error_with_a_cut_inner_header() {
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .icmpv4_echo_request(0xbeef, 3)
        .write(&mut b, &[0; 32])
        .unwrap();
    let p = verified(&b);
    let echo = IcmpMessage {
        icmp_type: icmp::ECHO_REQUEST,
        code: 0,
        id: 0xbeef,
        inner: None,
    };
    assert_eq!(p.l4, L4::Icmp(echo));

    // Port unreachable from B about A's UDP datagram: IP header + 8 bytes.
    let mut inner = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .udp(5353, 53)
        .write(&mut inner, &[0; 100])
        .unwrap();
    inner.truncate(28);
    let mut b = Vec::new();
    PacketBuilder::ipv4(B4, A4, 64)
        .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Port,
        ))
        .write(&mut b, &inner)
        .unwrap();
    let p = verified(&b);
    let L4::Icmp(m) = p.l4 else { panic!("{p:?}") };
    assert_eq!((m.icmp_type, m.code), (icmp::DEST_UNREACH, 3));
    assert_eq!(
        m.inner,
        Some(Tuple::ports(A4.into(), B4.into(), 17, 5353, 53))
    );
    // Seven bytes of the inner UDP header are not enough.
    let mut short = b.clone();
    short.truncate(b.len() - 1);
    short[3] -= 1;
    assert_eq!(parse(&short, Checksums::Trust), Err(ParseError::IcmpInner));
}

#[test]
fn checksums_are_verified_only_when_asked() {
    let mut b = Vec::new();
    PacketBuilder::ipv6(A6, B6, 64)
        .udp(1, 2)
        .write(&mut b, &[7; 9])
        .unwrap();
    assert!(parse(&b, Checksums::Verify).is_ok());
    let last = b.len() - 1;
    b[last] ^= 1;
    assert_eq!(parse(&b, Checksums::Verify), Err(ParseError::Checksum));
    assert!(parse(&b, Checksums::Trust).is_ok());
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .udp(1, 2)
        .write(&mut b, &[7; 9])
        .unwrap();
    b[8] ^= 1; // TTL: header checksum
    assert_eq!(parse(&b, Checksums::Verify), Err(ParseError::Checksum));
    // IPv4 UDP checksum 0 means "none".
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .udp(1, 2)
        .write(&mut b, &[7; 9])
        .unwrap();
    b[26] = 0;
    b[27] = 0;
    assert!(parse(&b, Checksums::Verify).is_ok());
}

#[test]
fn bad_headers_are_refused() {
    assert_eq!(parse(&[], Checksums::Trust), Err(ParseError::Truncated));
    assert_eq!(
        parse(&[0x55; 40], Checksums::Trust),
        Err(ParseError::BadIpVersion)
    );
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .tcp(1, 2, 3, 4)
        .write(&mut b, &[])
        .unwrap();
    let mut bad = b.clone();
    bad[0] = 0x44; // IHL 4
    assert_eq!(parse(&bad, Checksums::Trust), Err(ParseError::BadLength));
    let mut bad = b.clone();
    bad[32] = 0x40; // TCP data offset 4
    assert_eq!(parse(&bad, Checksums::Trust), Err(ParseError::BadLength));
    let mut bad = b.clone();
    bad[32] = 0xf0; // TCP data offset 15: 60 bytes, beyond the packet
    assert_eq!(parse(&bad, Checksums::Trust), Err(ParseError::Truncated));
    // Nine Destination Options headers.
    let mut v6 = vec![0x60, 0, 0, 0, 0, 72, 60, 64];
    v6.extend_from_slice(&A6);
    v6.extend_from_slice(&B6);
    for _ in 0..9 {
        v6.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
    }
    assert_eq!(
        parse(&v6, Checksums::Trust),
        Err(ParseError::TooManyExtensionHeaders)
    );
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let mut packets = Vec::new();
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .tcp(1, 2, 3, 4)
        .write(&mut b, &[1; 20])
        .unwrap();
    packets.push(b);
    let mut b = Vec::new();
    PacketBuilder::ipv6(A6, B6, 64)
        .icmpv6(etherparse::Icmpv6Type::TimeExceeded(
            etherparse::icmpv6::TimeExceededCode::HopLimitExceeded,
        ))
        .write(&mut b, &packets[0].iter().map(|_| 0x60).collect::<Vec<_>>())
        .unwrap();
    packets.push(b);
    for p in &packets {
        for n in 0..p.len() {
            assert!(parse(&p[..n], Checksums::Verify).is_err(), "{n}");
        }
    }
}

proptest! {
    /// Whatever etherparse builds, the parser reads back.
    #[test]
    fn reads_back_what_etherparse_builds(
        v6 in any::<bool>(),
        sport in 1u16.., dport in 1u16..,
        seq in any::<u32>(), ack in any::<u32>(), win in any::<u16>(),
        syn in any::<bool>(), fin in any::<bool>(),
        wscale in proptest::option::of(0u8..20),
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        udp in any::<bool>(),
    ) {
        let builder = if v6 { PacketBuilder::ipv6(A6, B6, 9) } else { PacketBuilder::ipv4(A4, B4, 9) };
        let mut b = Vec::new();
        if udp {
            builder.udp(sport, dport).write(&mut b, &payload).unwrap();
        } else {
            let mut t = builder.tcp(sport, dport, seq, win).ack(ack);
            if syn { t = t.syn(); }
            if fin { t = t.fin(); }
            if let Some(w) = wscale {
                t = t.options(&[etherparse::TcpOptionElement::WindowScale(w)]).unwrap();
            }
            t.write(&mut b, &payload).unwrap();
        }
        let p = parse(&b, Checksums::Verify).unwrap();
        prop_assert_eq!(p.src.is_ipv6(), v6);
        match p.l4 {
            L4::Udp { src_port, dst_port } => {
                prop_assert!(udp);
                prop_assert_eq!((src_port, dst_port), (sport, dport));
            }
            L4::Tcp(t) => {
                prop_assert!(!udp);
                prop_assert_eq!((t.src_port, t.dst_port, t.seq, t.ack, t.window), (sport, dport, seq, ack, win));
                prop_assert_eq!(t.flags.contains(TcpFlags::SYN), syn);
                prop_assert_eq!(t.flags.contains(TcpFlags::FIN), fin);
                prop_assert_eq!(t.wscale, wscale);
                prop_assert_eq!(t.payload_len as usize, payload.len());
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    /// Random bytes never panic, whatever the mode.
    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200), first in prop::sample::select(vec![0x45u8, 0x46, 0x60, 0x4f])) {
        let mut b = b;
        if !b.is_empty() { b[0] = first; }
        let _ = parse(&b, Checksums::Verify);
        let _ = parse(&b, Checksums::Trust);
    }
}
