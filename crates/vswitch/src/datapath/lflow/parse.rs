//! A frame's headers as OVN's logical fields ([`ovn_lflow::Flow`]), the way Open
//! vSwitch's `flow_extract` fills `struct flow`: Ethernet, one 802.1Q tag (its TCI with
//! the "present" bit 12 set, as OVS's `vlan_tci`), ARP, IPv4 and IPv6 (through up to
//! eight extension headers; fragments as OVS's `nw_frag` bits), TCP, UDP, SCTP,
//! ICMPv4, ICMPv6 with neighbour discovery's target and link-layer address options.
//!
//! Every read is bounds-checked; a header cut short leaves the fields behind it zero
//! (as OVS does), so any byte string gives a flow. [`Offsets`] says where the headers
//! start, for rewriting them.

use ovn_lflow::{Field, Flow};

/// Where a frame's headers start (bytes from the frame's start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offsets {
    /// The EtherType after the tags (the L3 protocol).
    pub eth_type: u16,
    /// The L3 header (ARP, IPv4, IPv6), if present.
    pub l3: Option<usize>,
    /// The L4 header (TCP, UDP, SCTP, ICMP), if present and not a later fragment.
    pub l4: Option<usize>,
    /// The L4 protocol.
    pub proto: u8,
}

pub(super) fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn bytes<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at + N)?.try_into().ok()
}

fn mac(b: &[u8], at: usize) -> Option<u128> {
    let m: [u8; 6] = bytes(b, at)?;
    let mut v = [0u8; 16];
    v[10..].copy_from_slice(&m);
    Some(u128::from_be_bytes(v))
}

fn word(b: &[u8], at: usize) -> Option<u128> {
    Some(u128::from(u32::from_be_bytes(bytes(b, at)?)))
}

fn v6(b: &[u8], at: usize) -> Option<u128> {
    Some(u128::from_be_bytes(bytes(b, at)?))
}

/// The logical fields of frame `f` (its first bytes at least: the headers) arriving
/// on logical port `inport`, and where its headers are.
pub fn flow_of(f: &[u8], inport: u16) -> (Flow, Offsets) {
    let mut flow = Flow::new();
    flow.set(Field::LogInport, u128::from(inport));
    let mut off = Offsets::default();
    let _ = fill(f, &mut flow, &mut off);
    (flow, off)
}

/// What a cached program's key and the tracker need of a frame, read without forming its
/// whole flow: each as [`flow_of`] sets it (zero where it leaves the field zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Brief {
    /// The EtherType after the tags.
    pub eth_type: u16,
    /// The L3 header, if the EtherType was read.
    pub l3: Option<usize>,
    /// `ip.ttl` (IPv6: the hop limit).
    pub ttl: u8,
    /// `ip.dscp`.
    pub dscp: u8,
    /// `ip.ecn`.
    pub ecn: u8,
}

/// The [`Brief`] of frame `f` (its first bytes at least: the headers).
pub fn brief_of(f: &[u8]) -> Brief {
    let mut b = Brief::default();
    let _ = fill_brief(f, &mut b);
    b
}

fn fill_brief(f: &[u8], b: &mut Brief) -> Option<()> {
    let mut at = 12;
    let mut ty = be16(f, at)?;
    if ty == 0x8100 {
        be16(f, at + 2)?;
        at += 4;
        ty = be16(f, at)?;
    }
    at += 2;
    b.eth_type = ty;
    b.l3 = Some(at);
    match ty {
        0x0800 => {
            let vihl = *f.get(at)?;
            if vihl >> 4 != 4 || usize::from(vihl & 0x0f) * 4 < 20 {
                return Some(());
            }
            let tos = *f.get(at + 1)?;
            (b.dscp, b.ecn) = (tos >> 2, tos & 3);
            be16(f, at + 6)?;
            b.ttl = *f.get(at + 8)?;
        }
        0x86dd => {
            let first = u32::from_be_bytes(bytes(f, at)?);
            if first >> 28 != 6 {
                return Some(());
            }
            (b.dscp, b.ecn) = (((first >> 22) & 0x3f) as u8, ((first >> 20) & 3) as u8);
            b.ttl = *f.get(at + 7)?;
        }
        _ => {}
    }
    Some(())
}

/// Where a parse puts the fields it reads: a [`Flow`], or nowhere ([`NoFields`], when
/// only the [`Offsets`] are wanted).
trait Fields {
    fn set(&mut self, field: Field, value: u128);
}

impl Fields for Flow {
    #[inline]
    fn set(&mut self, field: Field, value: u128) {
        Flow::set(self, field, value);
    }
}

/// Fields read and dropped.
struct NoFields;

impl Fields for NoFields {
    #[inline]
    fn set(&mut self, _: Field, _: u128) {}
}

/// Where frame `f`'s headers start, as [`flow_of`] finds them, without forming its flow
/// (for rewriting a frame whose program is cached).
pub fn offsets_of(f: &[u8]) -> Offsets {
    let mut off = Offsets::default();
    let _ = fill(f, &mut NoFields, &mut off);
    off
}

fn fill(f: &[u8], flow: &mut impl Fields, off: &mut Offsets) -> Option<()> {
    flow.set(Field::EthDst, mac(f, 0)?);
    flow.set(Field::EthSrc, mac(f, 6)?);
    let mut at = 12;
    let mut ty = be16(f, at)?;
    if ty == 0x8100 {
        let tci = be16(f, at + 2)?;
        flow.set(Field::VlanTci, u128::from(tci | 0x1000));
        at += 4;
        ty = be16(f, at)?;
    }
    at += 2;
    flow.set(Field::EthType, u128::from(ty));
    off.eth_type = ty;
    off.l3 = Some(at);
    match ty {
        0x0806 | 0x8035 => arp(f, at, flow),
        0x0800 => ipv4(f, at, flow, off),
        0x86dd => ipv6(f, at, flow, off),
        _ => Some(()),
    }
}

fn arp(f: &[u8], at: usize, flow: &mut impl Fields) -> Option<()> {
    // Ethernet/IPv4 ARP only (hardware type 1, protocol 0x0800, lengths 6 and 4).
    if bytes::<6>(f, at)? != [0, 1, 8, 0, 6, 4] {
        return Some(());
    }
    flow.set(Field::ArpOp, u128::from(be16(f, at + 6)?));
    flow.set(Field::ArpSha, mac(f, at + 8)?);
    flow.set(Field::ArpSpa, word(f, at + 14)?);
    flow.set(Field::ArpTha, mac(f, at + 18)?);
    flow.set(Field::ArpTpa, word(f, at + 24)?);
    Some(())
}

fn ipv4(f: &[u8], at: usize, flow: &mut impl Fields, off: &mut Offsets) -> Option<()> {
    let vihl = *f.get(at)?;
    let ihl = usize::from(vihl & 0x0f) * 4;
    if vihl >> 4 != 4 || ihl < 20 {
        return Some(());
    }
    let tos = *f.get(at + 1)?;
    flow.set(Field::IpDscp, u128::from(tos >> 2));
    flow.set(Field::IpEcn, u128::from(tos & 3));
    let frag = be16(f, at + 6)?;
    let (more, offset) = (frag & 0x2000 != 0, frag & 0x1fff);
    flow.set(Field::IpTtl, u128::from(*f.get(at + 8)?));
    let proto = *f.get(at + 9)?;
    flow.set(Field::IpProto, u128::from(proto));
    flow.set(Field::Ipv4Src, word(f, at + 12)?);
    flow.set(Field::Ipv4Dst, word(f, at + 16)?);
    off.proto = proto;
    if more || offset != 0 {
        flow.set(Field::IpFrag, if offset != 0 { 3 } else { 1 });
        if offset != 0 {
            return Some(());
        }
    }
    l4(f, at + ihl, proto, false, flow, off)
}

fn ipv6(f: &[u8], at: usize, flow: &mut impl Fields, off: &mut Offsets) -> Option<()> {
    let first = u32::from_be_bytes(bytes(f, at)?);
    if first >> 28 != 6 {
        return Some(());
    }
    flow.set(Field::IpDscp, u128::from((first >> 22) & 0x3f));
    flow.set(Field::IpEcn, u128::from((first >> 20) & 3));
    flow.set(Field::Ipv6Label, u128::from(first & 0xf_ffff));
    flow.set(Field::IpTtl, u128::from(*f.get(at + 7)?));
    flow.set(Field::Ipv6Src, v6(f, at + 8)?);
    flow.set(Field::Ipv6Dst, v6(f, at + 24)?);
    let mut next = *f.get(at + 6)?;
    let mut h = at + 40;
    for _ in 0..8 {
        match next {
            // Hop-by-hop, routing, destination options.
            0 | 43 | 60 => {
                let len = (usize::from(*f.get(h + 1)?) + 1) * 8;
                next = *f.get(h)?;
                h += len;
            }
            44 => {
                let fo = be16(f, h + 2)?;
                let (offset, more) = (fo >> 3, fo & 1 != 0);
                next = *f.get(h)?;
                h += 8;
                if more || offset != 0 {
                    flow.set(Field::IpFrag, if offset != 0 { 3 } else { 1 });
                }
                if offset != 0 {
                    flow.set(Field::IpProto, u128::from(next));
                    off.proto = next;
                    return Some(());
                }
            }
            _ => break,
        }
    }
    flow.set(Field::IpProto, u128::from(next));
    off.proto = next;
    l4(f, h, next, true, flow, off)
}

fn l4(
    f: &[u8],
    at: usize,
    proto: u8,
    ip6: bool,
    flow: &mut impl Fields,
    off: &mut Offsets,
) -> Option<()> {
    let (src, dst) = match proto {
        6 => (Field::TcpSrc, Field::TcpDst),
        17 => (Field::UdpSrc, Field::UdpDst),
        132 => (Field::SctpSrc, Field::SctpDst),
        1 if !ip6 => (Field::Icmpv4Type, Field::Icmpv4Code),
        58 if ip6 => (Field::Icmpv6Type, Field::Icmpv6Code),
        _ => return Some(()),
    };
    let sizes = match proto {
        6 => 20,
        17 => 8,
        132 => 12,
        _ => 4,
    };
    f.get(at..at + sizes)?;
    off.l4 = Some(at);
    if matches!(proto, 1 | 58) {
        flow.set(src, u128::from(f[at]));
        flow.set(dst, u128::from(f[at + 1]));
    } else {
        flow.set(src, u128::from(be16(f, at)?));
        flow.set(dst, u128::from(be16(f, at + 2)?));
    }
    if proto == 6 {
        flow.set(Field::TcpFlags, u128::from(be16(f, at + 12)? & 0x0fff));
    }
    if proto == 58 {
        nd(f, at, flow);
    }
    Some(())
}

/// Neighbour solicitation (135) and advertisement (136): the target and the first
/// source or target link-layer address option (RFC 4861 §4.3, §4.4, §4.6.1).
fn nd(f: &[u8], at: usize, flow: &mut impl Fields) -> Option<()> {
    let ty = *f.get(at)?;
    if !matches!(ty, 135 | 136) || *f.get(at + 1)? != 0 {
        return Some(());
    }
    flow.set(Field::NdTarget, v6(f, at + 8)?);
    let mut o = at + 24;
    while let (Some(&kind), Some(&len)) = (f.get(o), f.get(o + 1)) {
        if len == 0 {
            break;
        }
        match (ty, kind) {
            (135, 1) => flow.set(Field::NdSll, mac(f, o + 2)?),
            (136, 2) => flow.set(Field::NdTll, mac(f, o + 2)?),
            _ => {}
        }
        o += usize::from(len) * 8;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp4() -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[..6].copy_from_slice(&[0x50, 0x54, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[0x50, 0x54, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        f[15] = 0x2e; // DSCP 11, ECN 2
        f[22] = 64;
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, 11]);
        f[30..34].copy_from_slice(&[10, 0, 0, 12]);
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        f[46..48].copy_from_slice(&0x5002u16.to_be_bytes());
        f
    }

    #[test]
    fn tcp_over_ipv4() {
        let (fl, off) = flow_of(&tcp4(), 7);
        assert_eq!(fl.get(Field::LogInport), 7);
        assert_eq!(fl.get(Field::EthSrc), 0x5054_0000_0001);
        assert_eq!(fl.get(Field::EthType), 0x0800);
        assert_eq!((fl.get(Field::IpDscp), fl.get(Field::IpEcn)), (11, 2));
        assert_eq!(fl.get(Field::IpTtl), 64);
        assert_eq!(fl.get(Field::Ipv4Src), 0x0a00_000b);
        assert_eq!((fl.get(Field::TcpSrc), fl.get(Field::TcpDst)), (1234, 80));
        assert_eq!(fl.get(Field::TcpFlags), 0x002, "SYN");
        assert_eq!(
            off,
            Offsets {
                eth_type: 0x0800,
                l3: Some(14),
                l4: Some(34),
                proto: 6
            }
        );
    }

    #[test]
    fn a_later_fragment_has_no_ports() {
        let mut f = tcp4();
        f[20..22].copy_from_slice(&0x0010u16.to_be_bytes());
        let (fl, off) = flow_of(&f, 1);
        assert_eq!(fl.get(Field::IpFrag), 3);
        assert_eq!(fl.get(Field::TcpDst), 0);
        assert_eq!(off.l4, None);
    }

    #[test]
    fn every_prefix_parses_without_panic() {
        let f = tcp4();
        for n in 0..f.len() {
            let (fl, _) = flow_of(&f[..n], 1);
            if n < 14 {
                assert_eq!(fl.get(Field::EthType), 0);
            }
        }
    }

    #[test]
    fn neighbour_solicitation_target_and_source_address() {
        let mut f = vec![0u8; 14 + 40 + 32];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[20] = 58;
        f[21] = 255;
        let icmp = 54;
        f[icmp] = 135;
        f[icmp + 8..icmp + 24]
            .copy_from_slice(&[0x20, 0x01, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f[icmp + 24] = 1;
        f[icmp + 25] = 1;
        f[icmp + 26..icmp + 32].copy_from_slice(&[0x50, 0x54, 0, 0, 0, 1]);
        let (fl, _) = flow_of(&f, 1);
        assert_eq!(fl.get(Field::Icmpv6Type), 135);
        assert_eq!(
            fl.get(Field::NdTarget),
            0x2001_0db8_0000_0000_0000_0000_0000_0001
        );
        assert_eq!(fl.get(Field::NdSll), 0x5054_0000_0001);
        assert_eq!(fl.get(Field::IpTtl), 255);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// The brief reading agrees with the whole flow on every byte string, IP-typed
        /// or not, cut anywhere.
        #[test]
        fn brief_agrees_with_flow(
            mut f in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            ty in 0usize..4,
            cut in 0usize..80,
        ) {
            let types: [&[u8]; 4] = [&[8, 0, 0x45], &[0x86, 0xdd, 0x60], &[0x81, 0, 0, 5, 8, 0, 0x45], &[]];
            for (i, b) in types[ty].iter().enumerate() {
                if let Some(x) = f.get_mut(12 + i) {
                    *x = *b;
                }
            }
            f.truncate(cut);
            let (fl, off) = flow_of(&f, 0);
            let b = brief_of(&f);
            proptest::prop_assert_eq!(offsets_of(&f), off);
            proptest::prop_assert_eq!((b.eth_type, b.l3), (off.eth_type, off.l3));
            proptest::prop_assert_eq!(u128::from(b.ttl), fl.get(Field::IpTtl));
            proptest::prop_assert_eq!(u128::from(b.dscp), fl.get(Field::IpDscp));
            proptest::prop_assert_eq!(u128::from(b.ecn), fl.get(Field::IpEcn));
        }
    }
}
