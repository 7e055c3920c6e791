//! Where a received frame's headers are, and its header fields as an OVN
//! logical [`Flow`], the way Open vSwitch's `flow_extract()` (OVS 3.1
//! `lib/flow.c`) fills `struct flow` for the fields OVN uses.
//!
//! Every read is bounds-checked; nothing here panics on any input.

use ovn_lflow::{Field, Flow};

use crate::error::Result;
use crate::flowbits::{mac_u128, u128_of};
use crate::wire::{ethernet, ipv4, ipv6};

/// The IP datagram in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip {
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Offset of the first byte past the datagram (its length field says
    /// where; what follows is Ethernet padding).
    pub end: usize,
    /// The upper-layer protocol.
    pub proto: u8,
    /// Offset of the upper-layer header; `None` for a fragment other than
    /// the first, or IPv6 extension headers that run past the datagram.
    pub l4: Option<usize>,
    /// OVS's `nw_frag`: bit 0 "a fragment", bit 1 "not the first".
    pub frag: u8,
}

/// Where a frame's headers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers {
    /// The payload's EtherType (inside the tag, if any).
    pub eth_type: u16,
    /// The 802.1Q TCI, if tagged.
    pub tci: Option<u16>,
    /// Offset of the L3 header.
    pub l3: usize,
    /// The IP datagram, if the EtherType is IP and its header is sane
    /// (OVS's `ipv4_sanity_check()`, `ipv6_sanity_check()`).
    pub ip: Option<Ip>,
}

impl Headers {
    /// Finds the headers of `frame`.
    ///
    /// # Errors
    /// [`Error::Truncated`](crate::Error::Truncated) if even the Ethernet
    /// header is cut short; a bad L3 header only leaves [`Headers::ip`]
    /// `None`.
    pub fn parse(frame: &[u8]) -> Result<Headers> {
        let eth = ethernet::Frame::new_checked(frame)?;
        let l3 = eth.header_len();
        let eth_type = eth.ethertype();
        let payload = eth.payload();
        let ip = match eth_type {
            ethernet::IPV4 => ipv4_of(payload, l3),
            ethernet::IPV6 => ipv6_of(payload, l3),
            _ => None,
        };
        Ok(Headers {
            eth_type,
            tci: eth.tci(),
            l3,
            ip,
        })
    }

    /// The upper-layer bytes (header and payload, padding excluded).
    pub fn l4<'a>(&self, frame: &'a [u8]) -> Option<&'a [u8]> {
        let ip = self.ip?;
        frame.get(ip.l4?..ip.end)
    }
}

fn ipv4_of(payload: &[u8], l3: usize) -> Option<Ip> {
    let p = ipv4::Packet::new_checked(payload).ok()?;
    let ff = p.flags_frag();
    let later = p.is_later_fragment();
    let is_frag = later || ff & ipv4::MORE_FRAGMENTS != 0;
    Some(Ip {
        v6: false,
        end: l3 + usize::from(p.total_len()),
        proto: p.protocol(),
        l4: (!later).then_some(l3 + p.header_len()),
        frag: u8::from(is_frag) | (u8::from(later) << 1),
    })
}

fn ipv6_of(payload: &[u8], l3: usize) -> Option<Ip> {
    let p = ipv6::Packet::new_checked(payload).ok()?;
    let (proto, l4, fragment) = p.upper_layer();
    let later = fragment && l4.is_none();
    Some(Ip {
        v6: true,
        end: l3 + ipv6::HEADER_LEN + usize::from(p.payload_len()),
        proto,
        l4: l4.map(|o| l3 + o),
        frag: u8::from(fragment) | (u8::from(later) << 1),
    })
}

/// The header fields of `frame` as OVN's logical fields (every other
/// field zero), as `flow_extract()` fills them: Ethernet, the 802.1Q TCI
/// with OVS's "present" bit 12, ARP, IPv4 and IPv6 (with fragment bits),
/// TCP, UDP, SCTP, ICMPv4, ICMPv6 and the ND target and link-layer
/// address options. A header cut short leaves its fields zero.
pub fn extract(frame: &[u8]) -> Flow {
    let mut f = Flow::new();
    let Ok(h) = Headers::parse(frame) else {
        return f;
    };
    let eth = ethernet::Frame::new_unchecked(frame);
    f.set(Field::EthDst, mac_u128(eth.dst()));
    f.set(Field::EthSrc, mac_u128(eth.src()));
    if let Some(tci) = h.tci {
        f.set(Field::VlanTci, u128::from(tci | 0x1000));
    }
    f.set(Field::EthType, u128::from(h.eth_type));
    let l3 = &frame[h.l3..];
    match (h.eth_type, h.ip) {
        (ethernet::ARP | ethernet::RARP, _) => arp_fields(l3, &mut f),
        (_, Some(ip)) => {
            ip_fields(l3, ip, &mut f);
            if let Some(l4) = h.l4(frame) {
                l4_fields(l4, ip, &mut f);
            }
        }
        _ => {}
    }
    f
}

/// The fields that are not the packet's headers: registers, logical
/// ports and flags, connection tracking state, the packet mark, OVN's
/// ICMP MTU fields.
const METADATA: [Field; 12] = [
    Field::LogInport,
    Field::LogOutport,
    Field::LogFlags,
    Field::Xxreg0,
    Field::Xxreg1,
    Field::Xreg4,
    Field::CtState,
    Field::CtMark,
    Field::CtLabel,
    Field::PktMark,
    Field::Icmp4FragMtu,
    Field::Icmp6FragMtu,
];

/// `at`'s metadata (registers, logical ports, connection state, packet
/// mark) with the header fields of `frame` ([`extract`]): the flow a
/// pipeline resumes with when a controller hands it a new packet.
pub fn with_headers(at: &Flow, frame: &[u8]) -> Flow {
    let mut f = extract(frame);
    for m in METADATA {
        f.set(m, at.get(m));
    }
    f
}

fn arp_fields(b: &[u8], f: &mut Flow) {
    // Ethernet/IPv4 ARP only: hardware type 1, protocol 0x0800, lengths 6, 4.
    if b.len() < 28 || b[..6] != [0, 1, 8, 0, 6, 4] {
        return;
    }
    f.set(Field::ArpOp, u128_of(&b[6..8]));
    f.set(Field::ArpSha, u128_of(&b[8..14]));
    f.set(Field::ArpSpa, u128_of(&b[14..18]));
    f.set(Field::ArpTha, u128_of(&b[18..24]));
    f.set(Field::ArpTpa, u128_of(&b[24..28]));
}

fn ip_fields(b: &[u8], ip: Ip, f: &mut Flow) {
    f.set(Field::IpProto, u128::from(ip.proto));
    f.set(Field::IpFrag, u128::from(ip.frag));
    let tos = if ip.v6 {
        let p = ipv6::Packet::new_unchecked(b);
        f.set(Field::Ipv6Label, u128::from(p.flow_label()));
        f.set(Field::IpTtl, u128::from(p.hop_limit()));
        f.set(Field::Ipv6Src, u128::from_be_bytes(p.src()));
        f.set(Field::Ipv6Dst, u128::from_be_bytes(p.dst()));
        p.traffic_class()
    } else {
        let p = ipv4::Packet::new_unchecked(b);
        f.set(Field::IpTtl, u128::from(p.ttl()));
        f.set(Field::Ipv4Src, u128_of(&p.src()));
        f.set(Field::Ipv4Dst, u128_of(&p.dst()));
        p.tos()
    };
    f.set(Field::IpDscp, u128::from(tos >> 2));
    f.set(Field::IpEcn, u128::from(tos & 3));
}

fn l4_fields(b: &[u8], ip: Ip, f: &mut Flow) {
    let ports = |f: &mut Flow, src: Field, dst: Field| {
        f.set(src, u128_of(&b[0..2]));
        f.set(dst, u128_of(&b[2..4]));
    };
    match ip.proto {
        6 if b.len() >= 20 => {
            ports(f, Field::TcpSrc, Field::TcpDst);
            f.set(Field::TcpFlags, u128_of(&b[12..14]) & 0x0fff);
        }
        17 if b.len() >= 8 => ports(f, Field::UdpSrc, Field::UdpDst),
        132 if b.len() >= 12 => ports(f, Field::SctpSrc, Field::SctpDst),
        1 if !ip.v6 && b.len() >= 4 => {
            f.set(Field::Icmpv4Type, u128::from(b[0]));
            f.set(Field::Icmpv4Code, u128::from(b[1]));
        }
        58 if ip.v6 && b.len() >= 4 => {
            f.set(Field::Icmpv6Type, u128::from(b[0]));
            f.set(Field::Icmpv6Code, u128::from(b[1]));
            nd_fields(b, f);
        }
        _ => {}
    }
}

/// Neighbour solicitation (135) and advertisement (136), code 0: the
/// target and the first source and target link-layer address options
/// (RFC 4861 §4.3, §4.4, §4.6.1).
fn nd_fields(b: &[u8], f: &mut Flow) {
    if let Some((target, sll, tll)) = nd_parse(b) {
        f.set(Field::NdTarget, target);
        f.set(Field::NdSll, sll);
        f.set(Field::NdTll, tll);
    }
}

/// The target, SLL and TLL of an ND message (`b` from its ICMPv6 header
/// on); `None` if it is not one, or invalid: a zero-length or overlong
/// option, or a second SLL or TLL, makes OVS ignore all three.
pub(crate) fn nd_parse(b: &[u8]) -> Option<(u128, u128, u128)> {
    if b.len() < 24 || !matches!(b[0], 135 | 136) || b[1] != 0 {
        return None;
    }
    let (mut sll, mut tll) = (None, None);
    let mut opts = &b[24..];
    while opts.len() >= 8 {
        let len = usize::from(opts[1]) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        // OVS takes a second option when the first was all zeros; a second
        // one is refused here in every case, so that the option a rewrite
        // writes is the one read.
        let slot = match (opts[0], len) {
            (1, 8) => &mut sll,
            (2, 8) => &mut tll,
            _ => {
                opts = &opts[len..];
                continue;
            }
        };
        if slot.replace(u128_of(&opts[2..8])).is_some() {
            return None;
        }
        opts = &opts[len..];
    }
    Some((u128_of(&b[8..24]), sll.unwrap_or(0), tll.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tagged UDP datagram, padded to 64 bytes.
    fn udp_frame() -> Vec<u8> {
        let mut b = vec![
            2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0, 0x00, 0x05, 0x08, 0x00,
        ];
        b.extend_from_slice(&[0x45, 0x10, 0, 30, 0, 0, 0x20, 0, 64, 17, 0, 0]);
        b.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        b.extend_from_slice(&[0, 68, 0, 67, 0, 10, 0, 0, 0xab, 0xcd]);
        b.resize(64, 0);
        b
    }

    #[test]
    fn headers_of_a_tagged_first_fragment() {
        let b = udp_frame();
        let h = Headers::parse(&b).unwrap();
        assert_eq!(h.tci, Some(5));
        assert_eq!(h.l3, 18);
        let ip = h.ip.unwrap();
        assert_eq!((ip.end, ip.proto, ip.l4, ip.frag), (48, 17, Some(38), 1));
        assert_eq!(h.l4(&b).unwrap().len(), 10);
    }

    #[test]
    fn extract_fills_what_flow_extract_fills() {
        let f = extract(&udp_frame());
        assert_eq!(f.get(Field::VlanTci), 0x1005);
        assert_eq!(f.get(Field::EthType), 0x0800);
        assert_eq!(f.get(Field::IpDscp), 4);
        assert_eq!(f.get(Field::IpTtl), 64);
        assert_eq!(f.get(Field::IpFrag), 1);
        assert_eq!(f.get(Field::Ipv4Dst), 0x0a00_0002);
        assert_eq!(f.get(Field::UdpSrc), 68);
        assert_eq!(f.get(Field::UdpDst), 67);
    }

    #[test]
    fn a_later_fragment_has_no_l4() {
        let mut b = udp_frame();
        b[24] = 0x00;
        b[25] = 0x10;
        let h = Headers::parse(&b).unwrap();
        assert_eq!(h.ip.unwrap().l4, None);
        assert_eq!(h.ip.unwrap().frag, 3);
        assert_eq!(extract(&b).get(Field::UdpSrc), 0);
    }

    #[test]
    fn a_bad_ip_header_leaves_only_l2() {
        let mut b = udp_frame();
        b[20] = 0xff; // total length 0xff1e > frame
        let h = Headers::parse(&b).unwrap();
        assert_eq!(h.ip, None);
        assert_eq!(extract(&b).get(Field::IpProto), 0);
    }
}
