//! A flow's header fields committed to a frame in place, as Open vSwitch's
//! set-field actions do before a packet goes to the controller (OVS 3.1
//! `lib/packets.c`: `packet_set_ipv4()`, `packet_set_ipv6()`,
//! `packet_set_tcp_port()`, `packet_set_udp_port()`,
//! `packet_set_sctp_port()`, `packet_set_icmp()`, `packet_set_nd()`, and
//! `odp-execute.c`'s Ethernet and ARP sets).
//!
//! Checksums are updated incrementally (RFC 1624), so a checksum that was
//! wrong stays wrong, as in OVS; a UDP checksum of 0 ("none") stays 0.
//! Headers the frame does not have are not written, and the frame's
//! length never changes: an 802.1Q tag's TCI is rewritten, but no tag is
//! pushed or popped.

use ovn_lflow::{Field, Flow};

use crate::emit::{proto, tci};
use crate::flowbits::low;
use crate::headers::{nd_parse, Headers, Ip};
use crate::wire::{checksum, ethernet, ipv4, ipv6};

/// Writes `flow`'s Ethernet, VLAN, ARP, IP and transport fields into
/// `frame` where they differ. Never panics; a frame too short for a
/// header keeps that header as it is.
pub fn rewrite(frame: &mut [u8], flow: &Flow) {
    let Ok(h) = Headers::parse(frame) else {
        return;
    };
    {
        let mut eth = ethernet::Frame::new_unchecked(&mut *frame);
        eth.set_dst(low(flow.get(Field::EthDst)));
        eth.set_src(low(flow.get(Field::EthSrc)));
        // Only a TCI the flow changed: OVS's flow does not keep the DEI bit.
        if let (Some(t), Some(old)) = (tci(flow), eth.tci()) {
            if t != old & !0x1000 {
                eth.set_tci(t);
            }
        }
    }
    match (h.eth_type, h.ip) {
        (ethernet::ARP | ethernet::RARP, _) => arp(&mut frame[h.l3..], flow),
        (_, Some(ip)) if ip.v6 => {
            ipv6_fields(frame, &h, ip, flow);
            l4_fields(frame, ip, flow);
        }
        (_, Some(ip)) => {
            ipv4_fields(frame, &h, ip, flow);
            l4_fields(frame, ip, flow);
        }
        _ => {}
    }
}

fn arp(b: &mut [u8], flow: &Flow) {
    if b.len() < 28 || b[..6] != [0, 1, 8, 0, 6, 4] {
        return;
    }
    b[6..8].copy_from_slice(&low::<2>(flow.get(Field::ArpOp)));
    b[8..14].copy_from_slice(&low::<6>(flow.get(Field::ArpSha)));
    b[14..18].copy_from_slice(&low::<4>(flow.get(Field::ArpSpa)));
    b[18..24].copy_from_slice(&low::<6>(flow.get(Field::ArpTha)));
    b[24..28].copy_from_slice(&low::<4>(flow.get(Field::ArpTpa)));
}

fn tos_of(flow: &Flow) -> u8 {
    ((flow.get(Field::IpDscp) as u8) << 2) | (flow.get(Field::IpEcn) as u8 & 3)
}

/// The checksum word at `at` of the upper layer, if the upper layer is
/// long enough to have it.
fn l4_csum_at(ip: Ip, frame_len: usize) -> Option<usize> {
    let l4 = ip.l4?;
    let (at, min) = match ip.proto {
        proto::TCP => (16, 20),
        proto::UDP => (6, 8),
        proto::ICMPV6 if ip.v6 => (2, 4),
        _ => return None,
    };
    (l4 + min <= ip.end.min(frame_len)).then_some(l4 + at)
}

/// Updates the upper layer's pseudo-header checksum for an address that
/// changed from `old` to `new` (OVS `packet_update_csum128()` and the
/// IPv4 equivalent).
fn update_pseudo(frame: &mut [u8], ip: Ip, old: &[u8], new: &[u8]) {
    let Some(at) = l4_csum_at(ip, frame.len()) else {
        return;
    };
    let c = u16::from_be_bytes([frame[at], frame[at + 1]]);
    if ip.proto == proto::UDP && c == 0 {
        return;
    }
    let mut n = checksum::update(c, old, new);
    if ip.proto == proto::UDP && n == 0 {
        n = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&n.to_be_bytes());
}

fn ipv4_fields(frame: &mut [u8], h: &Headers, ip: Ip, flow: &Flow) {
    let l3 = h.l3;
    let (old_src, old_dst, old_tos, old_ttl) = {
        let p = ipv4::Packet::new_unchecked(&frame[l3..]);
        (p.src(), p.dst(), p.tos(), p.ttl())
    };
    let (src, dst) = (
        low::<4>(flow.get(Field::Ipv4Src)),
        low::<4>(flow.get(Field::Ipv4Dst)),
    );
    let (tos, ttl) = (tos_of(flow), flow.get(Field::IpTtl) as u8);
    let mut c = ipv4::Packet::new_unchecked(&frame[l3..]).checksum();
    for (old, new, at) in [(old_src, src, 12), (old_dst, dst, 16)] {
        if old != new {
            c = checksum::update(c, &old, &new);
            update_pseudo(frame, ip, &old, &new);
            frame[l3 + at..l3 + at + 4].copy_from_slice(&new);
        }
    }
    if old_tos != tos {
        c = checksum::update16(c, u16::from(old_tos), u16::from(tos));
    }
    if old_ttl != ttl {
        c = checksum::update16(c, u16::from(old_ttl) << 8, u16::from(ttl) << 8);
    }
    let mut p = ipv4::Packet::new_unchecked(&mut frame[l3..]);
    p.set_tos(tos);
    p.set_ttl(ttl);
    p.set_checksum(c);
}

fn ipv6_fields(frame: &mut [u8], h: &Headers, ip: Ip, flow: &Flow) {
    let l3 = h.l3;
    let (old_src, old_dst) = {
        let p = ipv6::Packet::new_unchecked(&frame[l3..]);
        (p.src(), p.dst())
    };
    let (src, dst) = (
        low::<16>(flow.get(Field::Ipv6Src)),
        low::<16>(flow.get(Field::Ipv6Dst)),
    );
    for (old, new) in [(old_src, src), (old_dst, dst)] {
        if old != new {
            update_pseudo(frame, ip, &old, &new);
        }
    }
    let mut p = ipv6::Packet::new_unchecked(&mut frame[l3..]);
    p.set_src(src);
    p.set_dst(dst);
    p.set_class_and_label(tos_of(flow), flow.get(Field::Ipv6Label) as u32);
    p.set_hop_limit(flow.get(Field::IpTtl) as u8);
}

fn l4_fields(frame: &mut [u8], ip: Ip, flow: &Flow) {
    let Some(l4) = ip.l4 else {
        return;
    };
    let end = ip.end.min(frame.len());
    let Some(b) = frame.get_mut(l4..end) else {
        return;
    };
    let g = |f: Field| flow.get(f) as u16;
    match ip.proto {
        proto::TCP if b.len() >= 20 => ports(b, 16, [g(Field::TcpSrc), g(Field::TcpDst)], false),
        proto::UDP if b.len() >= 8 => ports(b, 6, [g(Field::UdpSrc), g(Field::UdpDst)], true),
        proto::SCTP if b.len() >= 12 => sctp_ports(b, [g(Field::SctpSrc), g(Field::SctpDst)]),
        proto::ICMP if !ip.v6 && b.len() >= 4 => {
            type_code(b, g(Field::Icmpv4Type), g(Field::Icmpv4Code))
        }
        proto::ICMPV6 if ip.v6 && b.len() >= 4 => {
            type_code(b, g(Field::Icmpv6Type), g(Field::Icmpv6Code));
            nd(b, flow);
        }
        _ => {}
    }
}

fn csum(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// TCP or UDP ports, the checksum at `at` updated (UDP: unless it is 0).
fn ports(b: &mut [u8], at: usize, new: [u16; 2], udp: bool) {
    let mut c = csum(b, at);
    for (i, &n) in new.iter().enumerate() {
        let old = csum(b, 2 * i);
        if old != n {
            if !(udp && c == 0) {
                c = checksum::update16(c, old, n);
                if udp && c == 0 {
                    c = 0xffff;
                }
            }
            b[2 * i..2 * i + 2].copy_from_slice(&n.to_be_bytes());
        }
    }
    b[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// SCTP ports; the CRC32c changes by the difference between the correct
/// CRCs before and after, as OVS's `packet_set_sctp_port()`.
fn sctp_ports(b: &mut [u8], new: [u16; 2]) {
    if csum(b, 0) == new[0] && csum(b, 2) == new[1] {
        return;
    }
    let old = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
    b[8..12].fill(0);
    let old_correct = checksum::crc32c(b);
    b[0..2].copy_from_slice(&new[0].to_be_bytes());
    b[2..4].copy_from_slice(&new[1].to_be_bytes());
    let new_correct = checksum::crc32c(b);
    b[8..12].copy_from_slice(&(old ^ old_correct ^ new_correct).to_le_bytes());
}

/// ICMP type and code, the checksum updated (OVS `packet_set_icmp()`).
fn type_code(b: &mut [u8], ty: u16, code: u16) {
    let old = u16::from_be_bytes([b[0], b[1]]);
    let new = (ty << 8) | (code & 0xff);
    if old != new {
        let c = checksum::update16(csum(b, 2), old, new);
        b[0..2].copy_from_slice(&new.to_be_bytes());
        b[2..4].copy_from_slice(&c.to_be_bytes());
    }
}

/// The ND target and the first SLL or TLL option (OVS `packet_set_nd()`).
fn nd(b: &mut [u8], flow: &Flow) {
    if nd_parse(b).is_none() {
        return;
    }
    let target = low::<16>(flow.get(Field::NdTarget));
    if b[8..24] != target {
        let c = checksum::update(csum(b, 2), &b[8..24], &target);
        b[8..24].copy_from_slice(&target);
        b[2..4].copy_from_slice(&c.to_be_bytes());
    }
    let mut at = 24;
    while at + 8 <= b.len() && b[at + 1] != 0 {
        let mac = match (b[at], b[at + 1]) {
            (1, 1) => low::<6>(flow.get(Field::NdSll)),
            (2, 1) => low::<6>(flow.get(Field::NdTll)),
            (_, l) => {
                at += usize::from(l) * 8;
                continue;
            }
        };
        if b[at + 2..at + 8] != mac {
            let c = checksum::update(csum(b, 2), &b[at + 2..at + 8], &mac);
            b[at + 2..at + 8].copy_from_slice(&mac);
            b[2..4].copy_from_slice(&c.to_be_bytes());
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::{emit, Kind};
    use crate::headers::extract;

    fn tcp_flow() -> Flow {
        Flow::new()
            .with(Field::EthSrc, 0x0a00_0000_0001)
            .with(Field::EthDst, 0x0a00_0000_0002)
            .with(Field::EthType, 0x0800)
            .with(Field::IpProto, 6)
            .with(Field::IpTtl, 64)
            .with(Field::Ipv4Src, 0x0a00_0001)
            .with(Field::Ipv4Dst, 0x0a00_0002)
            .with(Field::TcpSrc, 40000)
            .with(Field::TcpDst, 80)
            .with(Field::TcpFlags, 0x002)
    }

    fn syn(f: &Flow) -> Vec<u8> {
        let k = Kind::Tcp {
            seq: 7,
            ack: 0,
            window: 1024,
            data: b"x",
        };
        emit(f, &k).unwrap()
    }

    #[test]
    fn rewriting_to_another_flow_gives_that_flows_frame() {
        let mut b = syn(&tcp_flow());
        let other = tcp_flow()
            .with(Field::Ipv4Src, 0xc0a8_0101)
            .with(Field::IpTtl, 63)
            .with(Field::IpDscp, 10)
            .with(Field::TcpDst, 8080)
            .with(Field::EthDst, 0x0200_0000_0003);
        rewrite(&mut b, &other);
        assert_eq!(b, syn(&other));
        assert_eq!(extract(&b).get(Field::TcpDst), 8080);
    }

    #[test]
    fn rewriting_to_the_same_flow_changes_nothing() {
        let mut b = syn(&tcp_flow());
        let before = b.clone();
        rewrite(&mut b, &extract(&before));
        assert_eq!(b, before);
    }

    #[test]
    fn a_zero_udp_checksum_stays_zero() {
        let f = tcp_flow().with(Field::IpProto, 17).with(Field::UdpSrc, 68);
        let mut b = emit(&f, &Kind::Udp { data: b"abc" }).unwrap();
        b[40..42].fill(0);
        rewrite(&mut b, &f.clone().with(Field::Ipv4Dst, 0xffff_ffff));
        assert_eq!(&b[40..42], &[0, 0]);
        assert_eq!(&b[30..34], &[255, 255, 255, 255]);
    }
}
