//! FlowKey extraction: byte fixtures, truncation, malformed headers, and
//! property tests over generated frames and arbitrary bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use flowcache::{FlowKey, Fragment, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN};
use proptest::prelude::*;

/// Ethernet II / IPv4 / TCP 10.0.0.1:1234 -> 10.0.0.2:80, 54 bytes, as
/// captured (checksums valid but irrelevant here).
const IPV4_TCP: [u8; 54] = [
    0x52, 0x54, 0x00, 0x12, 0x34, 0x56, // dst
    0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, // src
    0x08, 0x00, // IPv4
    0x45, 0x00, 0x00, 0x28, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x0a, 0x84, // ver..csum
    0x0a, 0x00, 0x00, 0x01, // src
    0x0a, 0x00, 0x00, 0x02, // dst
    0x04, 0xd2, 0x00, 0x50, // ports
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x50, 0x02, 0x72, 0x10, 0xe6, 0x31, 0x00, 0x00,
];

fn eth(dst: [u8; 6], src: [u8; 6], tags: &[(u16, u16)], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for &(tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// IPv4 header with `options` (a multiple of 4 bytes), then `payload`.
fn ipv4(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    frag: u16,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let ihl = 20 + options.len();
    let mut h = vec![0u8; 20];
    h[0] = 0x40 | (ihl / 4) as u8;
    h[2..4].copy_from_slice(&((ihl + payload.len()) as u16).to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    h.extend_from_slice(options);
    h.extend_from_slice(payload);
    h
}

/// IPv6 header with next header `nh`, then `payload` (extension headers
/// included).
fn ipv6(src: [u8; 16], dst: [u8; 16], nh: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    h[6] = nh;
    h[7] = 64;
    h[8..24].copy_from_slice(&src);
    h[24..40].copy_from_slice(&dst);
    h.extend_from_slice(payload);
    h
}

fn ports(src: u16, dst: u16, pad: usize) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&src.to_be_bytes());
    p.extend_from_slice(&dst.to_be_bytes());
    p.resize(4 + pad, 0);
    p
}

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

#[test]
fn parse_ipv4_tcp_fixture() {
    let k = FlowKey::extract(&IPV4_TCP, 3, None);
    assert_eq!(k.in_port(), 3);
    assert_eq!(k.vni(), None);
    assert_eq!(k.vlan_tci(), None);
    assert_eq!(k.eth_dst(), [0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
    assert_eq!(k.eth_src(), [0x52, 0x54, 0x00, 0xab, 0xcd, 0xef]);
    assert_eq!(k.eth_type(), ETHERTYPE_IPV4);
    assert_eq!(
        k.ipv4(),
        Some((Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)))
    );
    assert_eq!(k.ipv6(), None);
    assert_eq!(k.ip_proto(), Some(6));
    assert_eq!(k.fragment(), Fragment::No);
    assert_eq!(k.l4_ports(), Some((1234, 80)));
    assert!(!k.is_malformed());
    assert_eq!(
        k.to_string(),
        "in_port(3),eth(src=52:54:00:ab:cd:ef,dst=52:54:00:12:34:56),eth_type(0x0800),\
         ipv4(src=10.0.0.1,dst=10.0.0.2,proto=6,frag=no),tcp(src=1234,dst=80)"
    );
}

#[test]
fn key_is_64_bytes_and_aligned() {
    assert_eq!(std::mem::size_of::<FlowKey>(), 64);
    assert_eq!(std::mem::align_of::<FlowKey>(), 8);
}

#[test]
fn deconstruct_raw_layout() {
    let k = FlowKey::extract(&IPV4_TCP, 0x0102_0304, Some(0x00ab_cdef));
    let b = k.as_bytes();
    assert_eq!(&b[0..4], &[1, 2, 3, 4]);
    assert_eq!(&b[5..8], &[0xab, 0xcd, 0xef]);
    assert_eq!(&b[24..26], &[0x08, 0x00]);
    assert_eq!(b[26], 6);
    assert_eq!(&b[28..32], &[10, 0, 0, 1]);
    assert_eq!(&b[44..48], &[10, 0, 0, 2]);
    assert_eq!(&b[60..64], &[0x04, 0xd2, 0x00, 0x50]);
    assert_eq!(FlowKey::from_bytes(*b), k);
}

#[test]
fn vni_keeps_low_24_bits() {
    let k = FlowKey::extract(&IPV4_TCP, 1, Some(0xff12_3456));
    assert_eq!(k.vni(), Some(0x12_3456));
    assert!(k.to_string().contains("tunnel(vni=1193046)"));
    assert_ne!(k, FlowKey::extract(&IPV4_TCP, 1, None));
    assert_ne!(k, FlowKey::extract(&IPV4_TCP, 1, Some(0x12_3457)));
    // VNI 0 is present, unlike no VNI.
    assert_ne!(
        FlowKey::extract(&IPV4_TCP, 1, Some(0)),
        FlowKey::extract(&IPV4_TCP, 1, None)
    );
}

#[test]
fn parse_vlan_udp() {
    let mut f = eth(A, B, &[(ETHERTYPE_VLAN, (5 << 13) | 100)], ETHERTYPE_IPV4);
    f.extend(ipv4(
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        17,
        0,
        &[],
        &ports(53, 5353, 4),
    ));
    let k = FlowKey::extract(&f, 1, None);
    assert_eq!(k.vlan_tci(), Some((5 << 13) | 100));
    assert_eq!(k.vlan_id(), Some(100));
    assert!(!k.is_svlan());
    assert_eq!(k.inner_vlan_tci(), None);
    assert_eq!(k.eth_type(), ETHERTYPE_IPV4);
    assert_eq!(k.ip_proto(), Some(17));
    assert_eq!(k.l4_ports(), Some((53, 5353)));
    assert!(!k.is_malformed());
    assert!(k.to_string().contains("vlan(vid=100,pcp=5)"));
}

#[test]
fn parse_qinq_and_triple_tag() {
    let mut f = eth(A, B, &[(0x88a8, 10), (ETHERTYPE_VLAN, 20)], ETHERTYPE_IPV4);
    f.extend(ipv4(
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        6,
        0,
        &[],
        &ports(1, 2, 16),
    ));
    let k = FlowKey::extract(&f, 1, None);
    assert!(k.is_svlan());
    assert_eq!(k.vlan_id(), Some(10));
    assert_eq!(k.inner_vlan_tci(), Some(20));
    assert_eq!(k.l4_ports(), Some((1, 2)));

    // A third tag ends parsing: eth_type is its TPID, no L3.
    let mut f = eth(
        A,
        B,
        &[
            (ETHERTYPE_VLAN, 10),
            (ETHERTYPE_VLAN, 20),
            (ETHERTYPE_VLAN, 30),
        ],
        ETHERTYPE_IPV4,
    );
    f.extend(ipv4(
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        6,
        0,
        &[],
        &ports(1, 2, 16),
    ));
    let k = FlowKey::extract(&f, 1, None);
    assert_eq!(k.vlan_id(), Some(10));
    assert_eq!(k.inner_vlan_tci(), Some(20));
    assert_eq!(k.eth_type(), ETHERTYPE_VLAN);
    assert_eq!(k.ip_proto(), None);
    assert!(!k.is_malformed());
}

#[test]
fn parse_ipv4_options() {
    let opts = [1u8, 1, 1, 1, 0x94, 4, 0, 0]; // NOPs + router alert: IHL 7
    let mut f = eth(A, B, &[], ETHERTYPE_IPV4);
    f.extend(ipv4(
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        17,
        0,
        &opts,
        &ports(7, 9, 4),
    ));
    let k = FlowKey::extract(&f, 1, None);
    assert_eq!(k.l4_ports(), Some((7, 9)));
    assert!(!k.is_malformed());
}

#[test]
fn parse_ipv4_fragments() {
    let mut first = eth(A, B, &[], ETHERTYPE_IPV4);
    first.extend(ipv4(
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        17,
        0x2000,
        &[],
        &ports(7, 9, 4),
    ));
    let k = FlowKey::extract(&first, 1, None);
    assert_eq!(k.fragment(), Fragment::First);
    assert_eq!(k.l4_ports(), Some((7, 9)));

    // Offset 185 (x8 bytes): no L4 header; the payload is not read as ports.
    let mut later = eth(A, B, &[], ETHERTYPE_IPV4);
    later.extend(ipv4(
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        17,
        185,
        &[],
        &ports(7, 9, 4),
    ));
    let k = FlowKey::extract(&later, 1, None);
    assert_eq!(k.fragment(), Fragment::Later);
    assert_eq!(k.ip_proto(), Some(17));
    assert_eq!(k.l4_ports(), None);
    assert!(!k.is_malformed());
    assert!(k.to_string().contains("frag=later"));
}

#[test]
fn parse_icmp_and_icmpv6() {
    let mut f = eth(A, B, &[], ETHERTYPE_IPV4);
    f.extend(ipv4(
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        1,
        0,
        &[],
        &[8, 0, 0, 0, 0, 1, 0, 1],
    ));
    let k = FlowKey::extract(&f, 1, None);
    assert_eq!(k.l4_ports(), Some((8, 0)));
    assert!(k.to_string().ends_with("icmp(type=8,code=0)"));

    let mut f = eth(A, B, &[], ETHERTYPE_IPV6);
    f.extend(ipv6([1; 16], [2; 16], 58, &[128, 0, 0, 0, 0, 1, 0, 1]));
    let k = FlowKey::extract(&f, 1, None);
    assert_eq!(k.ip_proto(), Some(58));
    assert_eq!(k.l4_ports(), Some((128, 0)));
    assert!(k.to_string().ends_with("icmpv6(type=128,code=0)"));
}

#[test]
fn parse_ipv6_extension_headers() {
    // Hop-by-hop (8 bytes) -> fragment (first, M=1) -> UDP.
    let mut payload = vec![44, 0, 1, 4, 0, 0, 0, 0];
    payload.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 42]);
    payload.extend(ports(1000, 2000, 4));
    let mut f = eth(A, B, &[(ETHERTYPE_VLAN, 7)], ETHERTYPE_IPV6);
    let src = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    let dst = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
    f.extend(ipv6(src.octets(), dst.octets(), 0, &payload));
    let k = FlowKey::extract(&f, 1, None);
    assert_eq!(k.ipv6(), Some((src, dst)));
    assert_eq!(k.ip_proto(), Some(17));
    assert_eq!(k.fragment(), Fragment::First);
    assert_eq!(k.l4_ports(), Some((1000, 2000)));
    assert!(!k.is_malformed());
    assert!(k
        .to_string()
        .contains("ipv6(src=2001:db8::1,dst=2001:db8::2,proto=17,frag=first)"));

    // A later fragment (offset 8): no ports.
    let mut payload = vec![17, 0, 0x00, 0x40, 0, 0, 0, 42];
    payload.extend(ports(1000, 2000, 4));
    let mut f = eth(A, B, &[], ETHERTYPE_IPV6);
    f.extend(ipv6(src.octets(), dst.octets(), 44, &payload));
    let k = FlowKey::extract(&f, 1, None);
    assert_eq!(k.fragment(), Fragment::Later);
    assert_eq!(k.ip_proto(), Some(17));
    assert_eq!(k.l4_ports(), None);
}

#[test]
fn ipv6_extension_walk_is_bounded() {
    // Nine destination-options headers: the walk stops after eight, with the
    // ninth's type as protocol and no ports.
    let mut payload = Vec::new();
    for _ in 0..9 {
        payload.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
    }
    let mut f = eth(A, B, &[], ETHERTYPE_IPV6);
    f.extend(ipv6([1; 16], [2; 16], 60, &payload));
    let k = FlowKey::extract(&f, 1, None);
    assert_eq!(k.ip_proto(), Some(60));
    assert_eq!(k.l4_ports(), None);
}

#[test]
fn malformed_headers() {
    let base = || {
        let mut f = eth(A, B, &[], ETHERTYPE_IPV4);
        f.extend(ipv4(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            6,
            0,
            &[],
            &ports(1, 2, 16),
        ));
        f
    };
    // Runt.
    let k = FlowKey::extract(&[0u8; 13], 9, None);
    assert!(k.is_malformed());
    assert_eq!(k.in_port(), 9);
    assert_eq!(k.eth_type(), 0);
    // Wrong IP version.
    let mut f = base();
    f[14] = 0x65;
    let k = FlowKey::extract(&f, 1, None);
    assert!(k.is_malformed());
    assert_eq!(k.ip_proto(), None);
    // IHL < 5.
    let mut f = base();
    f[14] = 0x44;
    assert!(FlowKey::extract(&f, 1, None).is_malformed());
    // IHL past the end of the frame.
    let mut f = base();
    f[14] = 0x4f;
    assert!(FlowKey::extract(&f, 1, None).is_malformed());
    // Total length smaller than the header.
    let mut f = base();
    f[16..18].copy_from_slice(&19u16.to_be_bytes());
    assert!(FlowKey::extract(&f, 1, None).is_malformed());
    // Total length ends inside the TCP ports: padding is not read as ports.
    let mut f = base();
    f[16..18].copy_from_slice(&22u16.to_be_bytes());
    let k = FlowKey::extract(&f, 1, None);
    assert!(k.is_malformed());
    assert_eq!(k.l4_ports(), None);
    assert_eq!(k.ipv4().map(|a| a.0), Some(Ipv4Addr::new(1, 1, 1, 1)));
    // Total length 0 (GSO big packet): the rest of the frame counts.
    let mut f = base();
    f[16..18].copy_from_slice(&0u16.to_be_bytes());
    let k = FlowKey::extract(&f, 1, None);
    assert!(!k.is_malformed());
    assert_eq!(k.l4_ports(), Some((1, 2)));
}

/// Where the parsed headers of a generated frame end.
#[derive(Debug, Clone)]
struct Gen {
    frame: Vec<u8>,
    headers_end: usize,
    vlans: Vec<u16>,
    v6: bool,
    src: Vec<u8>,
    dst: Vec<u8>,
    proto: u8,
    sport: u16,
    dport: u16,
    opt_words: usize,
}

fn gen_frame() -> impl Strategy<Value = Gen> {
    (
        prop::collection::vec(any::<u16>(), 0..=2),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 16),
        prop::collection::vec(any::<u8>(), 16),
        prop::sample::select(vec![6u8, 17, 132, 136]),
        any::<u16>(),
        any::<u16>(),
        0usize..=10,
        0usize..40,
    )
        .prop_map(|(vlans, v6, s, d, proto, sport, dport, opt_words, pad)| {
            let tags: Vec<(u16, u16)> = vlans.iter().map(|&t| (ETHERTYPE_VLAN, t)).collect();
            let et = if v6 { ETHERTYPE_IPV6 } else { ETHERTYPE_IPV4 };
            let mut frame = eth(A, B, &tags, et);
            let l4 = ports(sport, dport, pad);
            let (ip, l3_hdr) = if v6 {
                // opt_words 8-byte destination-options header first, if any.
                let mut payload = Vec::new();
                let first = if opt_words > 0 {
                    payload.push(proto);
                    payload.push((opt_words - 1) as u8);
                    payload.resize(opt_words * 8, 0);
                    60
                } else {
                    proto
                };
                let hdr = 40 + opt_words * 8;
                payload.extend_from_slice(&l4);
                let mut s16 = [0u8; 16];
                let mut d16 = [0u8; 16];
                s16.copy_from_slice(&s);
                d16.copy_from_slice(&d);
                (ipv6(s16, d16, first, &payload), hdr)
            } else {
                let opts = vec![1u8; opt_words * 4];
                let s4 = [s[0], s[1], s[2], s[3]];
                let d4 = [d[0], d[1], d[2], d[3]];
                (ipv4(s4, d4, proto, 0, &opts, &l4), 20 + opt_words * 4)
            };
            let headers_end = frame.len() + l3_hdr + 4;
            frame.extend(ip);
            let n = if v6 { 16 } else { 4 };
            Gen {
                frame,
                headers_end,
                vlans,
                v6,
                src: s[..n].to_vec(),
                dst: d[..n].to_vec(),
                proto,
                sport,
                dport,
                opt_words,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes never panic, and what the caller supplied is kept.
    #[test]
    fn arbitrary_bytes_never_panic(
        frame in prop::collection::vec(any::<u8>(), 0..200),
        in_port in any::<u32>(),
        vni in prop::option::of(any::<u32>()),
    ) {
        let k = FlowKey::extract(&frame, in_port, vni);
        prop_assert_eq!(k.in_port(), in_port);
        prop_assert_eq!(k.vni(), vni.map(|v| v & 0x00ff_ffff));
        if frame.len() < 14 {
            prop_assert!(k.is_malformed());
            prop_assert_eq!(k.eth_type(), 0);
        }
        let _ = k.to_string();
        prop_assert_eq!(k.flow_hash(), FlowKey::from_bytes(*k.as_bytes()).flow_hash());
    }

    /// Generated frames parse to the fields they were built from.
    #[test]
    fn generated_frames_parse(g in gen_frame(), in_port in any::<u32>()) {
        let k = FlowKey::extract(&g.frame, in_port, None);
        prop_assert!(!k.is_malformed(), "{}", k);
        prop_assert_eq!(k.vlan_tci(), g.vlans.first().copied());
        prop_assert_eq!(k.inner_vlan_tci(), g.vlans.get(1).copied());
        prop_assert_eq!(k.ip_proto(), Some(g.proto));
        prop_assert_eq!(k.l4_ports(), Some((g.sport, g.dport)));
        if g.v6 {
            let (s, d) = k.ipv6().unwrap();
            prop_assert_eq!(&s.octets()[..], &g.src[..]);
            prop_assert_eq!(&d.octets()[..], &g.dst[..]);
            prop_assert_eq!(k.eth_type(), ETHERTYPE_IPV6);
        } else {
            let (s, d) = k.ipv4().unwrap();
            prop_assert_eq!(&s.octets()[..], &g.src[..]);
            prop_assert_eq!(&d.octets()[..], &g.dst[..]);
            prop_assert_eq!(k.eth_type(), ETHERTYPE_IPV4);
        }
        let _ = g.opt_words;
    }

    /// Cutting a frame inside its headers marks the key malformed; cutting
    /// after them changes nothing.
    #[test]
    fn truncation(g in gen_frame(), cut in 0usize..200) {
        let full = FlowKey::extract(&g.frame, 1, None);
        let cut = cut.min(g.frame.len());
        let k = FlowKey::extract(&g.frame[..cut], 1, None);
        if cut >= g.headers_end {
            prop_assert_eq!(k, full);
        } else {
            prop_assert!(k.is_malformed(), "cut {} < {}: {}", cut, g.headers_end, k);
            prop_assert_ne!(k, full);
        }
    }
}

#[test]
fn hash_sees_every_key_bit() {
    let base = FlowKey::extract(&IPV4_TCP, 3, Some(5));
    let h = base.flow_hash();
    for byte in 0..64 {
        for bit in 0..8 {
            let mut b = *base.as_bytes();
            b[byte] ^= 1 << bit;
            assert_ne!(
                FlowKey::from_bytes(b).flow_hash(),
                h,
                "bit {bit} of byte {byte}"
            );
        }
    }
}

#[test]
fn hash_spreads_port_only_flows_over_buckets() {
    // 8192 flows differing only in the L4 source port, over 2048 buckets
    // (the default EMC): no bucket should get more than a few times the
    // mean of 4.
    let mut load = vec![0u32; 2048];
    for port in 0..8192u16 {
        let mut f = IPV4_TCP;
        f[34..36].copy_from_slice(&port.to_be_bytes());
        let h = FlowKey::extract(&f, 1, None).flow_hash();
        load[(h & 2047) as usize] += 1;
    }
    let max = *load.iter().max().unwrap();
    let empty = load.iter().filter(|&&l| l == 0).count();
    // Poisson(4): P(X >= 16) ~ 1e-5 per bucket; P(X = 0) ~ 1.8% (37 of 2048).
    assert!(max < 16, "max bucket load {max}");
    assert!(empty < 100, "{empty} empty buckets");
}
