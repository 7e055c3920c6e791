//! Applying what the logical pipeline changed in a packet's fields to its frame:
//! Ethernet addresses, the IPv4 TTL and TOS, the IPv6 hop limit and traffic class,
//! ARP's fields (the replies `ls_in_arp_rsp` and `lr_in_ip_input` build in place), IP
//! addresses and ICMP type and code of ICMP and ICMPv6 messages (a router's echo
//! reply), IP addresses and TCP and UDP ports (NAT), every checksum updated
//! incrementally (RFC 1624). A TCP or UDP checksum the sender left partial (virtio's
//! `NEEDS_CSUM`, a TSO frame's) holds the pseudo-header's sum, not complemented: an
//! address moves it as Linux's `inet_proto_csum_replace4` does, a port not at all.
//! What a frame's bytes cannot take here (SCTP ports, VLAN tags) is refused, and the
//! caller hands the frame to the slow path.

use ovn_lflow::{Field, Flow};

use super::parse::Offsets;

/// The header fields a rewrite may concern, in the order they are checked.
const HEADER_FIELDS: [Field; 24] = [
    Field::EthSrc,
    Field::EthDst,
    Field::VlanTci,
    Field::IpTtl,
    Field::IpDscp,
    Field::IpEcn,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::Ipv6Label,
    Field::ArpOp,
    Field::ArpSpa,
    Field::ArpTpa,
    Field::ArpSha,
    Field::ArpTha,
    Field::TcpSrc,
    Field::TcpDst,
    Field::UdpSrc,
    Field::UdpDst,
    Field::Icmpv4Type,
    Field::Icmpv4Code,
    Field::Icmpv6Type,
    Field::Icmpv6Code,
];

/// The changes from `before` to `after` of the fields a frame carries, as
/// (field, new value); at most 24.
pub fn diff(before: &Flow, after: &Flow) -> Vec<(Field, u128)> {
    HEADER_FIELDS
        .iter()
        .filter(|f| before.get(**f) != after.get(**f))
        .map(|&f| (f, after.get(f)))
        .collect()
}

/// Why a rewrite cannot be done in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported(pub Field);

/// Whether every change of `changes` can be applied in place by [`apply`].
pub fn supported(changes: &[(Field, u128)]) -> Result<(), Unsupported> {
    for &(f, _) in changes {
        match f {
            Field::EthSrc
            | Field::EthDst
            | Field::IpTtl
            | Field::IpDscp
            | Field::IpEcn
            | Field::ArpOp
            | Field::ArpSpa
            | Field::ArpTpa
            | Field::ArpSha
            | Field::ArpTha
            | Field::Icmpv4Type
            | Field::Icmpv4Code
            | Field::Icmpv6Type
            | Field::Icmpv6Code => {}
            Field::Ipv4Src
            | Field::Ipv4Dst
            | Field::Ipv6Src
            | Field::Ipv6Dst
            | Field::TcpSrc
            | Field::TcpDst
            | Field::UdpSrc
            | Field::UdpDst => {}
            other => return Err(Unsupported(other)),
        }
    }
    Ok(())
}

/// Applies `changes` ([`supported`] ones) to frame `f` whose headers are at `off`;
/// `partial`: its TCP or UDP checksum is partial (virtio `NEEDS_CSUM`).
///
/// # Errors
/// A change the frame's headers cannot take (say, a TTL on a frame without IP).
pub fn apply(
    f: &mut [u8],
    off: &Offsets,
    changes: &[(Field, u128)],
    partial: bool,
) -> Result<(), Unsupported> {
    for &(field, v) in changes {
        let ok = match field {
            Field::EthDst => put_mac(f, 0, v),
            Field::EthSrc => put_mac(f, 6, v),
            Field::IpTtl | Field::IpDscp | Field::IpEcn => ip_byte(f, off, field, v as u8),
            Field::ArpOp | Field::ArpSpa | Field::ArpTpa | Field::ArpSha | Field::ArpTha => {
                arp(f, off, field, v)
            }
            Field::Ipv4Src | Field::Ipv4Dst => ipv4_addr(f, off, field, v as u32, partial),
            Field::Ipv6Src | Field::Ipv6Dst => ipv6_addr(f, off, field, v, partial),
            Field::TcpSrc | Field::TcpDst | Field::UdpSrc | Field::UdpDst => {
                port(f, off, field, v as u16, partial)
            }
            Field::Icmpv4Type | Field::Icmpv4Code | Field::Icmpv6Type | Field::Icmpv6Code => {
                icmp(f, off, field, v as u8)
            }
            other => return Err(Unsupported(other)),
        };
        if !ok {
            return Err(Unsupported(field));
        }
    }
    Ok(())
}

pub(super) fn put(f: &mut [u8], at: usize, b: &[u8]) -> bool {
    match f.get_mut(at..at + b.len()) {
        Some(d) => {
            d.copy_from_slice(b);
            true
        }
        None => false,
    }
}

fn put_mac(f: &mut [u8], at: usize, v: u128) -> bool {
    put(f, at, &v.to_be_bytes()[10..])
}

/// TTL (hop limit), DSCP or ECN of an IPv4 or IPv6 header.
fn ip_byte(f: &mut [u8], off: &Offsets, field: Field, v: u8) -> bool {
    let Some(l3) = off.l3 else { return false };
    match off.eth_type {
        0x0800 => {
            let at = if field == Field::IpTtl {
                l3 + 8
            } else {
                l3 + 1
            };
            let Some(&old) = f.get(at) else { return false };
            let new = match field {
                Field::IpTtl => v,
                Field::IpDscp => (old & 3) | (v << 2),
                _ => (old & !3) | (v & 3),
            };
            // The header checksum over the 16-bit word holding the byte (RFC 1624).
            let word_at = l3 + ((at - l3) & !1);
            let Some(w) = f.get(word_at..word_at + 2) else {
                return false;
            };
            let old_w = u16::from_be_bytes([w[0], w[1]]);
            f[at] = new;
            let new_w = u16::from_be_bytes([f[word_at], f[word_at + 1]]);
            update_csum(f, l3 + 10, old_w, new_w)
        }
        0x86dd => match field {
            Field::IpTtl => put(f, l3 + 7, &[v]),
            Field::IpDscp | Field::IpEcn => {
                let Some(b) = f.get(l3..l3 + 4) else {
                    return false;
                };
                let mut w = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                let (shift, mask) = if field == Field::IpDscp {
                    (22, 0x3f)
                } else {
                    (20, 3)
                };
                w = (w & !(mask << shift)) | ((u32::from(v) & mask) << shift);
                put(f, l3, &w.to_be_bytes())
            }
            _ => false,
        },
        _ => false,
    }
}

/// Updates the Internet checksum at `at` for a 16-bit word changing from `old` to
/// `new` (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')).
fn update_csum(f: &mut [u8], at: usize, old: u16, new: u16) -> bool {
    update_csum_bytes(f, at, &old.to_be_bytes(), &new.to_be_bytes())
}

/// Updates the checksum at `at` for bytes `old` changed to `new` (same even length),
/// all their words in one fold.
pub(super) fn update_csum_bytes(f: &mut [u8], at: usize, old: &[u8], new: &[u8]) -> bool {
    let Some(c) = f.get(at..at + 2) else {
        return false;
    };
    // RFC 1624 eqn. 3 for all the words at once: the one's complement sum is
    // associative, so one fold does what one per word did.
    let mut sum = u32::from(!u16::from_be_bytes([c[0], c[1]]));
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        sum += u32::from(!u16::from_be_bytes([o[0], o[1]]));
        sum += u32::from(u16::from_be_bytes([n[0], n[1]]));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    put(f, at, &(!(sum as u16)).to_be_bytes())
}

/// Where the TCP or UDP checksum of `off`'s frame is, `None` for other protocols or
/// a UDP datagram without one (IPv4's 0).
fn l4_csum_at(f: &[u8], off: &Offsets) -> Option<usize> {
    let l4 = off.l4?;
    let at = match off.proto {
        6 => l4 + 16,
        17 => l4 + 6,
        _ => return None,
    };
    let c = f.get(at..at + 2)?;
    (off.proto != 17 || c != [0, 0]).then_some(at)
}

/// Updates a partial checksum (the pseudo-header's sum, not complemented) at `at` for
/// bytes `old` changed to `new`: Linux `inet_proto_csum_replace4` on CHECKSUM_PARTIAL.
fn update_partial_bytes(f: &mut [u8], at: usize, old: &[u8], new: &[u8]) -> bool {
    let Some(c) = f.get(at..at + 2) else {
        return false;
    };
    let mut sum = u32::from(u16::from_be_bytes([c[0], c[1]]));
    for (o, n) in old.chunks(2).zip(new.chunks(2)) {
        sum += u32::from(!u16::from_be_bytes([o[0], o[1]]));
        sum += u32::from(u16::from_be_bytes([n[0], n[1]]));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    put(f, at, &(sum as u16).to_be_bytes())
}

/// Moves the TCP or UDP checksum for bytes it covers changed from `old` to `new`:
/// an address (`pseudo`: in its pseudo-header, which a partial checksum holds) or a
/// port (which a partial checksum leaves to the device). A UDP checksum that comes
/// out 0 is sent as 0xffff (RFC 768).
fn l4_csum(
    f: &mut [u8],
    off: &Offsets,
    old: &[u8],
    new: &[u8],
    partial: bool,
    pseudo: bool,
) -> bool {
    let Some(at) = l4_csum_at(f, off) else {
        // No checksum to move: another protocol, a later fragment, UDP without one.
        return true;
    };
    if partial && !pseudo {
        return true;
    }
    let ok = if partial {
        update_partial_bytes(f, at, old, new)
    } else {
        update_csum_bytes(f, at, old, new)
    };
    if ok && !partial && off.proto == 17 && f[at..at + 2] == [0, 0] {
        f[at..at + 2].copy_from_slice(&[0xff, 0xff]);
    }
    ok
}

/// An IPv4 address: the header checksum moves, and a TCP or UDP checksum (its
/// pseudo-header holds the address; ICMP's does not).
fn ipv4_addr(f: &mut [u8], off: &Offsets, field: Field, v: u32, partial: bool) -> bool {
    let Some(l3) = off.l3.filter(|_| off.eth_type == 0x0800) else {
        return false;
    };
    let at = if field == Field::Ipv4Src {
        l3 + 12
    } else {
        l3 + 16
    };
    let Some(old) = f.get(at..at + 4).map(|b| [b[0], b[1], b[2], b[3]]) else {
        return false;
    };
    let new = v.to_be_bytes();
    put(f, at, &new)
        && update_csum_bytes(f, l3 + 10, &old, &new)
        && (off.proto == 1 || l4_csum(f, off, &old, &new, partial, true))
}

/// An IPv6 address: the checksum of ICMPv6, TCP or UDP moves (their pseudo-header
/// holds it).
fn ipv6_addr(f: &mut [u8], off: &Offsets, field: Field, v: u128, partial: bool) -> bool {
    let Some(l3) = off.l3.filter(|_| off.eth_type == 0x86dd) else {
        return false;
    };
    let icmp6 = match (off.proto, off.l4) {
        (58, Some(l4)) => Some(l4 + 2),
        (58, None) => return false,
        _ => None,
    };
    let at = if field == Field::Ipv6Src {
        l3 + 8
    } else {
        l3 + 24
    };
    let Some(old) = f.get(at..at + 16).map(|b| b.to_vec()) else {
        return false;
    };
    let new = v.to_be_bytes();
    put(f, at, &new)
        && match icmp6 {
            Some(c) => update_csum_bytes(f, c, &old, &new),
            None => l4_csum(f, off, &old, &new, partial, true),
        }
}

/// A TCP or UDP port: the checksum moves unless partial (ports are not in the
/// pseudo-header the partial sum holds).
fn port(f: &mut [u8], off: &Offsets, field: Field, v: u16, partial: bool) -> bool {
    let Some(l4) = off.l4 else { return false };
    let proto = match field {
        Field::TcpSrc | Field::TcpDst => 6,
        _ => 17,
    };
    if off.proto != proto {
        return false;
    }
    let at = match field {
        Field::TcpSrc | Field::UdpSrc => l4,
        _ => l4 + 2,
    };
    let Some(old) = f.get(at..at + 2).map(|b| [b[0], b[1]]) else {
        return false;
    };
    let new = v.to_be_bytes();
    put(f, at, &new) && l4_csum(f, off, &old, &new, partial, false)
}

/// ICMP or ICMPv6 type or code: the message's checksum moves.
fn icmp(f: &mut [u8], off: &Offsets, field: Field, v: u8) -> bool {
    let Some(l4) = off.l4.filter(|_| matches!(off.proto, 1 | 58)) else {
        return false;
    };
    let Some(&[ty, code]) = f.get(l4..l4 + 2).map(|b| <&[u8; 2]>::try_from(b).unwrap()) else {
        return false;
    };
    let new = match field {
        Field::Icmpv4Type | Field::Icmpv6Type => [v, code],
        _ => [ty, v],
    };
    put(f, l4, &new) && update_csum_bytes(f, l4 + 2, &[ty, code], &new)
}

/// ARP's fields (Ethernet/IPv4 ARP: op at 6, sha 8, spa 14, tha 18, tpa 24).
fn arp(f: &mut [u8], off: &Offsets, field: Field, v: u128) -> bool {
    let Some(l3) = off.l3.filter(|_| matches!(off.eth_type, 0x0806 | 0x8035)) else {
        return false;
    };
    match field {
        Field::ArpOp => put(f, l3 + 6, &(v as u16).to_be_bytes()),
        Field::ArpSha => put_mac(f, l3 + 8, v),
        Field::ArpSpa => put(f, l3 + 14, &(v as u32).to_be_bytes()),
        Field::ArpTha => put_mac(f, l3 + 18, v),
        Field::ArpTpa => put(f, l3 + 24, &(v as u32).to_be_bytes()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::flow_of;
    use super::*;

    fn ipv4_frame() -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&28u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 11]);
        f[30..34].copy_from_slice(&[10, 0, 1, 14]);
        let c = csum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    }

    fn csum(b: &[u8]) -> u16 {
        let mut s: u32 = b
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    /// A routed packet: new MACs, TTL 63, and a header checksum that still verifies.
    #[test]
    fn routing_rewrites_macs_and_ttl_with_a_valid_checksum() {
        let mut f = ipv4_frame();
        let (before, off) = flow_of(&f, 1);
        let mut after = before.clone();
        after.set(Field::EthSrc, 0x0000_0000_ff02);
        after.set(Field::EthDst, 0x5054_0000_0104);
        after.set(Field::IpTtl, 63);
        let d = diff(&before, &after);
        assert_eq!(d.len(), 3);
        assert_eq!(supported(&d), Ok(()));
        apply(&mut f, &off, &d, false).unwrap();
        assert_eq!(&f[..12], &[0x50, 0x54, 0, 0, 1, 4, 0, 0, 0, 0, 0xff, 2]);
        assert_eq!(f[22], 63);
        assert_eq!(csum(&f[14..34]), 0, "the IPv4 header checksum verifies");
        let (reparsed, _) = flow_of(&f, 1);
        assert_eq!(diff(&after, &reparsed), vec![]);
    }

    /// The UDP checksum over the pseudo-header and the datagram of an IPv4 frame.
    fn udp_csum(f: &[u8]) -> u16 {
        let mut b = f[26..34].to_vec();
        b.extend_from_slice(&[0, 17]);
        b.extend_from_slice(&f[38..40]);
        b.extend_from_slice(&f[34..]);
        csum(&b)
    }

    /// A UDP frame with a full checksum and 4 bytes of payload.
    fn udp_frame() -> Vec<u8> {
        let mut f = ipv4_frame();
        f.extend_from_slice(&[1, 2, 3, 4]);
        f[16..18].copy_from_slice(&32u16.to_be_bytes());
        f[24..26].copy_from_slice(&[0, 0]);
        let c = csum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[34..36].copy_from_slice(&4000u16.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&12u16.to_be_bytes());
        let u = udp_csum(&f);
        f[40..42].copy_from_slice(&u.to_be_bytes());
        f
    }

    /// DNAT and SNAT of a UDP datagram: addresses and ports in place, the IPv4 header
    /// and UDP checksums still verify.
    #[test]
    fn nat_of_a_udp_datagram_keeps_its_checksums() {
        let mut f = udp_frame();
        assert_eq!(udp_csum(&f), 0);
        let (before, off) = flow_of(&f, 1);
        let mut after = before.clone();
        after.set(Field::Ipv4Src, 0xc633_6405);
        after.set(Field::Ipv4Dst, 0x0a00_0002);
        after.set(Field::UdpSrc, 61000);
        after.set(Field::UdpDst, 8053);
        let d = diff(&before, &after);
        assert_eq!(supported(&d), Ok(()));
        apply(&mut f, &off, &d, false).unwrap();
        assert_eq!(csum(&f[14..34]), 0, "IPv4 header checksum");
        assert_eq!(udp_csum(&f), 0, "UDP checksum");
        let (reparsed, _) = flow_of(&f, 1);
        assert_eq!(diff(&after, &reparsed), vec![]);
    }

    proptest::proptest! {
        /// Whatever the addresses, ports and payload, NAT's rewrite leaves an IPv4
        /// header and a UDP checksum that verify (each checksum moved once for all the
        /// words that changed).
        #[test]
        fn any_nat_of_a_udp_datagram_keeps_its_checksums(
            src: u32, dst: u32, sport: u16, dport: u16, payload: [u8; 4], ttl: u8,
        ) {
            let mut f = udp_frame();
            f[22] = ttl;
            f[42..46].copy_from_slice(&payload);
            f[24..26].copy_from_slice(&[0, 0]);
            let c = csum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            f[40..42].copy_from_slice(&[0, 0]);
            // (0 would say "no checksum": RFC 768 sends it as 0xffff.)
            let u = match udp_csum(&f) {
                0 => 0xffff,
                u => u,
            };
            f[40..42].copy_from_slice(&u.to_be_bytes());
            let (before, off) = flow_of(&f, 1);
            let mut after = before.clone();
            after.set(Field::Ipv4Src, u128::from(src));
            after.set(Field::Ipv4Dst, u128::from(dst));
            after.set(Field::UdpSrc, u128::from(sport));
            after.set(Field::UdpDst, u128::from(dport));
            apply(&mut f, &off, &diff(&before, &after), false).unwrap();
            proptest::prop_assert_eq!(csum(&f[14..34]), 0, "IPv4 header checksum");
            // (A UDP checksum that comes out 0 is sent as 0xffff, which verifies too.)
            proptest::prop_assert_eq!(udp_csum(&f), 0, "UDP checksum");
        }
    }

    /// A partial checksum (the pseudo-header's sum, as a VM with checksum offload
    /// leaves it) follows the addresses and ignores the ports.
    #[test]
    fn nat_of_a_partial_checksum_moves_only_the_pseudo_header_sum() {
        let mut f = udp_frame();
        // The partial sum: the pseudo-header, folded, not complemented.
        let mut ph = f[26..34].to_vec();
        ph.extend_from_slice(&[0, 17]);
        ph.extend_from_slice(&f[38..40]);
        f[40..42].copy_from_slice(&(!csum(&ph)).to_be_bytes());
        let (before, off) = flow_of(&f, 1);
        let mut after = before.clone();
        after.set(Field::Ipv4Dst, 0x0a00_0002);
        after.set(Field::UdpDst, 8053);
        apply(&mut f, &off, &diff(&before, &after), true).unwrap();
        let mut ph = f[26..34].to_vec();
        ph.extend_from_slice(&[0, 17]);
        ph.extend_from_slice(&f[38..40]);
        assert_eq!(
            f[40..42],
            (!csum(&ph)).to_be_bytes(),
            "the new pseudo-header sum"
        );
        assert_eq!(csum(&f[14..34]), 0);
    }

    #[test]
    fn a_udp_datagram_without_checksum_keeps_none() {
        let mut f = udp_frame();
        f[40..42].copy_from_slice(&[0, 0]);
        let (before, off) = flow_of(&f, 1);
        let mut after = before.clone();
        after.set(Field::Ipv4Dst, 1);
        after.set(Field::UdpDst, 9);
        apply(&mut f, &off, &diff(&before, &after), false).unwrap();
        assert_eq!(f[40..42], [0, 0]);
        assert_eq!(csum(&f[14..34]), 0);
    }

    /// A router's echo reply: addresses exchanged, type 8 -> 0, TTL 255; both
    /// checksums still verify.
    #[test]
    fn an_echo_reply_in_place() {
        let mut f = ipv4_frame();
        f[23] = 1;
        f[24..26].copy_from_slice(&[0, 0]);
        let c = csum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[34] = 8;
        f[38..40].copy_from_slice(&0x1234u16.to_be_bytes());
        let ic = csum(&f[34..42]);
        f[36..38].copy_from_slice(&ic.to_be_bytes());
        assert_eq!(csum(&f[34..42]), 0);
        let (before, off) = flow_of(&f, 1);
        let mut after = before.clone();
        after.set(Field::Ipv4Src, before.get(Field::Ipv4Dst));
        after.set(Field::Ipv4Dst, before.get(Field::Ipv4Src));
        after.set(Field::Icmpv4Type, 0);
        after.set(Field::IpTtl, 255);
        let d = diff(&before, &after);
        assert_eq!(supported(&d), Ok(()));
        apply(&mut f, &off, &d, false).unwrap();
        assert_eq!(&f[26..34], &[10, 0, 1, 14, 10, 0, 0, 11]);
        assert_eq!((f[22], f[34]), (255, 0));
        assert_eq!(csum(&f[14..34]), 0, "IPv4 header checksum");
        assert_eq!(csum(&f[34..42]), 0, "ICMP checksum");
    }
}
