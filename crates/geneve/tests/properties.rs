//! Property tests: round trips, segment → coalesce, MTU, and every checksum
//! checked by an independent implementation (etherparse).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use geneve::decap::Decapsulator;
use geneve::encap::{TunnelConfig, TunnelTemplate};
use geneve::gro::{Coalesced, Coalescer};
use geneve::wire::{self, OptionList, Packet, Repr};
use geneve::{segment, segment_with, GsoMeta, GsoType, InnerChecksum, SegmentPlan};
use proptest::prelude::*;

/// Checks the IPv4 header, TCP and UDP checksums of an Ethernet frame with
/// etherparse, recursing into a Geneve payload. Returns the TCP payload of
/// the innermost frame, if any.
fn verify(frame: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let p = SlicedPacket::from_ethernet(frame).map_err(|e| format!("etherparse: {e}"))?;
    let (src, dst): (Vec<u8>, Vec<u8>) = match &p.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            if h.to_header().calc_header_checksum() != h.header_checksum() {
                return Err("IPv4 header checksum".into());
            }
            (h.source().to_vec(), h.destination().to_vec())
        }
        Some(NetSlice::Ipv6(ip)) => (
            ip.header().source().to_vec(),
            ip.header().destination().to_vec(),
        ),
        None => return Ok(None),
    };
    let v4 = src.len() == 4;
    match &p.transport {
        Some(TransportSlice::Tcp(t)) => {
            let c = if v4 {
                t.calc_checksum_ipv4(src[..].try_into().unwrap(), dst[..].try_into().unwrap())
            } else {
                t.calc_checksum_ipv6(src[..].try_into().unwrap(), dst[..].try_into().unwrap())
            }
            .map_err(|e| e.to_string())?;
            // 0xffff is the other ones'-complement zero: a receiver sums
            // the segment with its checksum field and accepts either
            // (RFC 1624 §3). `complete_partial`, like Linux's
            // `skb_checksum_help`, stores a computed 0 as 0xffff whatever
            // the protocol (for UDP, RFC 768 requires it); etherparse
            // compares the field with its own computation, 0x0000.
            if c != t.checksum() && !(c == 0 && t.checksum() == 0xffff) {
                return Err(format!(
                    "TCP checksum {:04x} != computed {c:04x}",
                    t.checksum()
                ));
            }
            Ok(Some(t.payload().to_vec()))
        }
        Some(TransportSlice::Udp(u)) => {
            if u.checksum() != 0 {
                let h = u.to_header();
                let c = if v4 {
                    h.calc_checksum_ipv4_raw(
                        src[..].try_into().unwrap(),
                        dst[..].try_into().unwrap(),
                        u.payload(),
                    )
                } else {
                    h.calc_checksum_ipv6_raw(
                        src[..].try_into().unwrap(),
                        dst[..].try_into().unwrap(),
                        u.payload(),
                    )
                }
                .map_err(|e| e.to_string())?;
                if c != u.checksum() {
                    return Err("UDP checksum".into());
                }
            } else if !v4 {
                return Err("zero UDP checksum over IPv6".into());
            }
            if u.destination_port() == wire::UDP_PORT {
                let g = Packet::new_checked(u.payload()).map_err(|e| e.to_string())?;
                return verify(g.payload());
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

#[derive(Debug, Clone)]
struct TcpSpec {
    ipv6: bool,
    payload: Vec<u8>,
    flags: u8,
    timestamps: bool,
    seq: u32,
    id: u16,
    sport: u16,
    /// Insert an 802.1Q tag (VID 100) after the MAC addresses.
    vlan: bool,
}

impl TcpSpec {
    /// Offset of the TCP header (csum_start).
    fn l4_off(&self) -> usize {
        14 + if self.vlan { 4 } else { 0 } + if self.ipv6 { 40 } else { 20 }
    }
}

fn tcp_frame(s: &TcpSpec) -> Vec<u8> {
    use etherparse::PacketBuilder;
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let b = if s.ipv6 {
        b.ipv6(
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            64,
        )
    } else {
        let mut ip = etherparse::Ipv4Header::new(
            0,
            64,
            etherparse::IpNumber::TCP,
            [10, 1, 0, 1],
            [10, 1, 0, 2],
        )
        .unwrap();
        ip.identification = s.id;
        ip.dont_fragment = true;
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
    };
    let mut b = b.tcp(s.sport, 5201, s.seq, 1000).ack(77);
    if s.flags & 0x08 != 0 {
        b = b.psh();
    }
    if s.flags & 0x01 != 0 {
        b = b.fin();
    }
    if s.flags & 0x80 != 0 {
        b = b.cwr();
    }
    if s.timestamps {
        b = b
            .options(&[
                etherparse::TcpOptionElement::Noop,
                etherparse::TcpOptionElement::Noop,
                etherparse::TcpOptionElement::Timestamp(123, 456),
            ])
            .unwrap();
    }
    let mut out = Vec::with_capacity(b.size(s.payload.len()));
    b.write(&mut out, &s.payload).unwrap();
    if s.vlan {
        out.splice(12..12, [0x81, 0x00, 0x00, 100]);
    }
    out
}

fn tcp_spec() -> impl Strategy<Value = TcpSpec> {
    (
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 1..20_000),
        prop::sample::select(vec![0u8, 0x08, 0x01, 0x09, 0x80, 0x88]),
        any::<bool>(),
        any::<u32>(),
        any::<u16>(),
        any::<bool>(),
    )
        .prop_map(
            |(ipv6, payload, flags, timestamps, seq, id, vlan)| TcpSpec {
                ipv6,
                payload,
                flags,
                timestamps,
                seq,
                id,
                sport: 40000,
                vlan,
            },
        )
}

fn template(ipv6: bool, udp_checksum: bool, options: OptionList) -> TunnelTemplate {
    let (l, r) = if ipv6 {
        (
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        )
    };
    let mut c = TunnelConfig::new(
        [2, 0, 0, 0, 0, 0xa],
        [2, 0, 0, 0, 0, 0xb],
        l,
        r,
        0x00ab_cdef,
    );
    c.udp_checksum = udp_checksum || ipv6;
    c.options = options;
    TunnelTemplate::new(&c).unwrap()
}

fn option_list() -> impl Strategy<Value = OptionList> {
    prop::collection::vec(
        (
            any::<u16>(),
            0u8..0x80,
            prop::collection::vec(any::<u8>(), 0..8usize),
        ),
        0..4,
    )
    .prop_map(|v| {
        let mut l = OptionList::new();
        for (class, t, words) in v {
            let data: Vec<u8> = words.iter().flat_map(|&w| [w; 4]).collect();
            l.push(class, t, &data).unwrap();
        }
        l
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn repr_parse_emit_roundtrip(control: bool, critical: bool, protocol_type: u16, vni in 0u32..=wire::MAX_VNI, opts in option_list(), payload in prop::collection::vec(any::<u8>(), 0..64)) {
        let r = Repr { control, critical, protocol_type, vni, options: opts.as_bytes() };
        let mut buf = vec![0xa5; r.buffer_len() + payload.len()];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut p).unwrap();
        p.payload_mut().copy_from_slice(&payload);
        let p = Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(Repr::parse(&p).unwrap(), r);
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn encap_decap_roundtrip(inner in prop::collection::vec(any::<u8>(), 14..2000), ipv6: bool, csum: bool, opts in option_list()) {
        let mut t = template(ipv6, csum, opts);
        let mut out = vec![0u8; t.header_len() + inner.len()];
        let n = t.encapsulate(&inner, &mut out).unwrap();
        verify(&out[..n]).map_err(TestCaseError::fail)?;
        let d = Decapsulator::default().decapsulate(&out[..n]).unwrap();
        prop_assert_eq!(d.inner, &inner[..]);
        prop_assert_eq!(d.vni, 0x00ab_cdef);
        prop_assert_eq!(d.options, opts.as_bytes());
    }

    /// segment → (decap) → coalesce reproduces the original frame: same
    /// payload bytes and headers, except the TCP checksum, which the
    /// original may carry partial and the merge carries complete.
    #[test]
    fn segment_then_coalesce(spec in tcp_spec(), mtu in 576usize..9000, encap: bool, ipv6_underlay: bool, csum: bool) {
        let f = tcp_frame(&spec);
        let l3 = if spec.ipv6 { 40 } else { 20 };
        let l4 = if spec.timestamps { 32 } else { 20 };
        let mss = (mtu - l3 - l4) as u16;
        let gt = if spec.ipv6 { GsoMeta::VIRTIO_NET_HDR_GSO_TCPV6 } else { GsoMeta::VIRTIO_NET_HDR_GSO_TCPV4 };
        let cs = spec.l4_off() as u16;
        let meta = GsoMeta::from_virtio_net_hdr(GsoMeta::VIRTIO_NET_HDR_F_NEEDS_CSUM, gt, 0, mss, cs, 16).unwrap();
        let mut tpl = encap.then(|| template(ipv6_underlay, csum, OptionList::new()));
        let outer = tpl.as_ref().map_or(0, |t| t.header_len());
        let plan = SegmentPlan::new(&f, &meta, outer).unwrap();
        let mut bufs = vec![vec![0xa5u8; plan.max_segment_len()]; plan.count()];
        let plan = segment(&f, &meta, tpl.as_mut(), &mut bufs).unwrap();
        prop_assert_eq!(plan.count(), spec.payload.len().div_ceil(usize::from(mss)));

        let dec = Decapsulator::default();
        let mut inner = Vec::new();
        let mut reassembled = Vec::new();
        for (i, b) in bufs.iter().enumerate() {
            let s = &b[..plan.segment_len(i)];
            // Every segment fits the MTU: inner IP packet ≤ mtu.
            prop_assert!(plan.segment_len(i) - outer - (spec.l4_off() - l3) <= mtu);
            let payload = verify(s).map_err(TestCaseError::fail)?.unwrap();
            reassembled.extend_from_slice(&payload);
            let i_frame = if encap { dec.decapsulate(s).unwrap().inner } else { s };
            inner.push(i_frame.to_vec());
        }
        prop_assert_eq!(&reassembled, &spec.payload);

        let refs: Vec<&[u8]> = inner.iter().map(|v| &v[..]).collect();
        let mut merged = Vec::new();
        Coalescer::new().coalesce(&refs, |c| merged.push((c.frame().to_vec(), matches!(c, Coalesced::Merged { .. }))));
        prop_assert_eq!(merged.len(), 1, "one frame back");
        let (m, was_merged) = &merged[0];
        prop_assert_eq!(*was_merged, plan.count() > 1);
        verify(m).map_err(TestCaseError::fail)?;
        let ck = usize::from(cs) + 16;
        prop_assert_eq!(&m[..ck], &f[..ck]);
        prop_assert_eq!(&m[ck + 2..], &f[ck + 2..]);
        // By reference: the same frame, its payloads left in the segments.
        let mut by_ref = Vec::new();
        Coalescer::new().coalesce_by_reference(&refs, |c| by_ref.push(c.to_vec()));
        prop_assert_eq!(by_ref.len(), 1);
        prop_assert_eq!(&by_ref[0], m);
    }
}

/// Segments of `f` (plain TSO with `mss`), as owned frames.
fn tso(f: &[u8], ipv6: bool, mss: u16) -> Vec<Vec<u8>> {
    let gt = if ipv6 {
        GsoMeta::VIRTIO_NET_HDR_GSO_TCPV6
    } else {
        GsoMeta::VIRTIO_NET_HDR_GSO_TCPV4
    };
    // NEEDS_CSUM off: csum_start/csum_offset unused.
    let meta = GsoMeta::from_virtio_net_hdr(0, gt, 0, mss, 0, 0).unwrap();
    let plan = SegmentPlan::new(f, &meta, 0).unwrap();
    let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
    segment(f, &meta, None, &mut bufs).unwrap();
    bufs.into_iter()
        .enumerate()
        .map(|(i, mut b)| {
            b.truncate(plan.segment_len(i));
            b
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// Two flows' segments interleaved in any order that keeps each flow's
    /// own order coalesce back into one frame per flow, equal to the
    /// original but for the TCP checksum field.
    #[test]
    fn interleaved_flows_coalesce(mut a in tcp_spec(), mut b in tcp_spec(), mss in 200u16..3000, picks in prop::collection::vec(any::<bool>(), 0..200)) {
        a.sport = 1111;
        b.sport = 2222;
        let (fa, fb) = (tcp_frame(&a), tcp_frame(&b));
        let (sa, sb) = (tso(&fa, a.ipv6, mss), tso(&fb, b.ipv6, mss));
        let (mut i, mut j) = (0, 0);
        let mut batch: Vec<&[u8]> = Vec::new();
        for take_a in picks.iter().copied().chain(std::iter::repeat(true)) {
            if i == sa.len() && j == sb.len() { break; }
            if (take_a && i < sa.len()) || j == sb.len() { batch.push(&sa[i]); i += 1; } else { batch.push(&sb[j]); j += 1; }
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        Coalescer::new().coalesce(&batch, |c| out.push(c.frame().to_vec()));
        prop_assert_eq!(out.len(), 2);
        for (orig, spec) in [(&fa, &a), (&fb, &b)] {
            let m = out.iter().find(|m| {
                let p = SlicedPacket::from_ethernet(m).unwrap();
                matches!(p.transport, Some(TransportSlice::Tcp(ref t)) if t.source_port() == spec.sport)
            }).expect("a frame per flow");
            verify(m).map_err(TestCaseError::fail)?;
            let ck = spec.l4_off() + 16;
            prop_assert_eq!(&m[..ck], &orig[..ck]);
            prop_assert_eq!(&m[ck + 2..], &orig[ck + 2..]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// Partial inner checksums: each segment carries the pseudo-header sum;
    /// once completed at `plan.csum_start()`/16 (as a NIC or guest would),
    /// every checksum verifies, including an outer UDP checksum computed
    /// with LCO before the inner one was complete.
    #[test]
    fn partial_checksum_segments_complete_correctly(spec in tcp_spec(), mss in 500u16..9000, encap: bool, ipv6_underlay: bool, csum: bool) {
        let f = tcp_frame(&spec);
        let gt = if spec.ipv6 { GsoMeta::VIRTIO_NET_HDR_GSO_TCPV6 } else { GsoMeta::VIRTIO_NET_HDR_GSO_TCPV4 };
        let meta = GsoMeta::from_virtio_net_hdr(GsoMeta::VIRTIO_NET_HDR_F_NEEDS_CSUM, gt, 0, mss, spec.l4_off() as u16, 16).unwrap();
        let mut tpl = encap.then(|| template(ipv6_underlay, csum, OptionList::new()));
        let outer = tpl.as_ref().map_or(0, |t| t.header_len());
        let plan = SegmentPlan::new(&f, &meta, outer).unwrap();
        let mut bufs = vec![vec![0xa5u8; plan.max_segment_len()]; plan.count()];
        let plan = segment_with(&f, &meta, tpl.as_mut(), &mut bufs, InnerChecksum::Partial).unwrap();
        let mut reassembled = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            let s = &mut b[..plan.segment_len(i)];
            geneve::checksum::complete_partial(s, plan.csum_start(&meta), 16).unwrap();
            reassembled.extend_from_slice(&verify(s).map_err(TestCaseError::fail)?.unwrap());
        }
        prop_assert_eq!(&reassembled, &spec.payload);
    }
}

#[test]
fn merged_meta_is_virtio_ready() {
    let spec = TcpSpec {
        ipv6: false,
        payload: vec![7; 44 * 1448],
        flags: 0,
        timestamps: true,
        seq: 1,
        id: 9,
        sport: 1,
        vlan: false,
    };
    let f = tcp_frame(&spec);
    let meta = GsoMeta::from_virtio_net_hdr(0, 1, 0, 1448, 0, 0).unwrap();
    let plan = SegmentPlan::new(&f, &meta, 0).unwrap();
    let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
    segment(&f, &meta, None, &mut bufs).unwrap();
    let refs: Vec<&[u8]> = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| &b[..plan.segment_len(i)])
        .collect();
    let mut got = None;
    Coalescer::new().coalesce(&refs, |c| {
        if let Coalesced::Merged {
            meta,
            segments,
            frame,
        } = c
        {
            got = Some((meta, segments, frame.len()));
        }
    });
    let (m, n, len) = got.unwrap();
    assert_eq!(n, 44);
    assert_eq!(len, f.len());
    assert_eq!(m.gso_type, GsoType::TcpV4);
    assert_eq!(
        (m.gso_size, m.hdr_len, m.csum_start, m.csum_offset),
        (1448, 66, 34, 16)
    );
    assert!(m.data_valid && !m.needs_csum);
}
