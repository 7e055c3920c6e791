//! The header an ICMP or ICMPv6 error embeds, translated with its connection (RFC 5508
//! §7, RFC 5382 §6; Open vSwitch's `nat_inner_packet`): a router's "fragmentation
//! needed" or a host's "port unreachable" about a packet that a NAT translated reaches
//! the other side with the packet as *that* side sent or saw it, so that its stack
//! finds the socket (and path MTU discovery works across a floating IP or an SNAT).
//!
//! In place, on a frame the outer rewrite ([`super::rewrite::apply`]) already moved:
//! the embedded addresses and TCP or UDP ports (an ICMP echo's id), the embedded IPv4
//! header checksum and the embedded TCP, UDP or ICMP checksum moved incrementally
//! where the error carries them (RFC 1624), and the error's own checksum computed
//! again over the message (ICMPv6: with its pseudo-header, RFC 4443 §2.3).

use std::net::IpAddr;

use conntrack::Endpoints;
use ovn_pinctrl::wire::checksum;

use super::parse::{be16, Offsets};
use super::rewrite::{put, update_csum_bytes};

/// Writes `e` into the header that the ICMP or ICMPv6 error in `f` (headers at `off`)
/// embeds. Returns false, changing nothing, when `f` is not an ICMP error embedding an
/// IP header of `e`'s family.
pub fn rewrite(f: &mut [u8], off: &Offsets, e: &Endpoints) -> bool {
    let Some(msg) = Message::of(f, off) else {
        return false;
    };
    let Some(inner) = Inner::of(f, msg.start + 8, msg.end) else {
        return false;
    };
    if inner.v6 != msg.v6 || inner.v6 != e.src.is_ipv6() || inner.v6 != e.dst.is_ipv6() {
        return false;
    }
    let csum = inner.l4_csum(f);
    let mut ok = true;
    for (at, new) in [(inner.src, e.src), (inner.dst, e.dst)] {
        let new = octets(new);
        let old = f[at..at + new.len()].to_vec();
        ok &= put(f, at, &new);
        if !inner.v6 {
            ok &= update_csum_bytes(f, inner.l3 + 10, &old, &new);
        }
        if let Some((c, true)) = csum {
            ok &= update_csum_bytes(f, c, &old, &new);
        }
    }
    for (at, new) in inner.ports(e) {
        let Some(old) = f.get(at..at + 2).map(|b| [b[0], b[1]]) else {
            continue;
        };
        ok &= put(f, at, &new.to_be_bytes());
        if let Some((c, _)) = csum {
            ok &= update_csum_bytes(f, c, &old, &new.to_be_bytes());
        }
    }
    ok && msg.checksum(f)
}

fn octets(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// The ICMP error message of a frame: where it starts and ends.
struct Message {
    v6: bool,
    l3: usize,
    start: usize,
    end: usize,
}

impl Message {
    /// ICMP destination unreachable, time exceeded and parameter problem (RFC 792);
    /// ICMPv6's four error types (RFC 4443 §3).
    fn of(f: &[u8], off: &Offsets) -> Option<Message> {
        let (l3, start) = (off.l3?, off.l4?);
        let kind = *f.get(start)?;
        let (v6, end) = match (off.eth_type, off.proto) {
            (0x0800, 1) if matches!(kind, 3 | 11 | 12) => {
                (false, l3 + usize::from(be16(f, l3 + 2)?))
            }
            (0x86dd, 58) if (1..=4).contains(&kind) => {
                (true, l3 + 40 + usize::from(be16(f, l3 + 4)?))
            }
            _ => return None,
        };
        (end <= f.len() && start + 8 < end).then_some(Message { v6, l3, start, end })
    }

    /// Computes the message's checksum again.
    fn checksum(&self, f: &mut [u8]) -> bool {
        if !put(f, self.start + 2, &[0, 0]) {
            return false;
        }
        let mut sum = checksum::add(0, &f[self.start..self.end]);
        if self.v6 {
            let (src, dst) = (
                &f[self.l3 + 8..self.l3 + 24],
                &f[self.l3 + 24..self.l3 + 40],
            );
            let len = (self.end - self.start) as u32;
            sum += checksum::pseudo_v6(src.try_into().unwrap(), dst.try_into().unwrap(), 58, len);
        }
        put(f, self.start + 2, &checksum::finish(sum).to_be_bytes())
    }
}

/// The embedded IP header.
struct Inner {
    v6: bool,
    l3: usize,
    /// Where its addresses are.
    src: usize,
    dst: usize,
    /// Its protocol and its L4 header, when that starts within the message.
    proto: u8,
    l4: Option<usize>,
    end: usize,
}

impl Inner {
    fn of(f: &[u8], l3: usize, end: usize) -> Option<Inner> {
        let v = f.get(l3)? >> 4;
        let (v6, hlen, proto, src, dst) = match v {
            4 if f[l3] & 0xf >= 5 => (
                false,
                usize::from(f[l3] & 0xf) * 4,
                *f.get(l3 + 9)?,
                l3 + 12,
                l3 + 16,
            ),
            6 => (true, 40, *f.get(l3 + 6)?, l3 + 8, l3 + 24),
            _ => return None,
        };
        let alen = if v6 { 16 } else { 4 };
        if dst + alen > end {
            return None;
        }
        let l4 = (l3 + hlen < end).then_some(l3 + hlen);
        Some(Inner {
            v6,
            l3,
            src,
            dst,
            proto,
            l4,
            end,
        })
    }

    /// Where the embedded L4 checksum is, if the message carries it, and whether its
    /// pseudo-header holds the addresses (not ICMP's).
    fn l4_csum(&self, f: &[u8]) -> Option<(usize, bool)> {
        let l4 = self.l4?;
        let (at, pseudo) = match self.proto {
            6 => (l4 + 16, true),
            17 => (l4 + 6, true),
            1 => (l4 + 2, false),
            58 => (l4 + 2, true),
            _ => return None,
        };
        let c = f.get(at..(at + 2).min(self.end))?;
        // A UDP datagram without a checksum (IPv4's 0) keeps none.
        (c.len() == 2 && (self.proto != 17 || c != [0, 0])).then_some((at, pseudo))
    }

    /// The port fields to write and their values: TCP and UDP ports, an echo's id.
    fn ports(&self, e: &Endpoints) -> Vec<(usize, u16)> {
        let Some(l4) = self.l4 else {
            return Vec::new();
        };
        let fits = |at: usize| at + 2 <= self.end;
        match self.proto {
            6 | 17 => [(l4, e.src_port), (l4 + 2, e.dst_port)]
                .into_iter()
                .filter(|&(at, _)| fits(at))
                .collect(),
            1 | 58 if fits(l4 + 6) => vec![(l4 + 4, e.src_port)],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use etherparse::{icmpv4, Icmpv4Type, Icmpv6Type, PacketBuilder};
    use ovn_lflow::Field;

    use super::super::parse::flow_of;
    use super::super::rewrite;
    use super::*;

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
    const ROUTER: [u8; 4] = [198, 51, 100, 254];
    const A: [u8; 4] = [10, 0, 0, 5];
    const X: [u8; 4] = [203, 0, 113, 1];
    const S: [u8; 4] = [192, 0, 2, 80];

    fn ep(src: IpAddr, sp: u16, dst: IpAddr, dp: u16) -> Endpoints {
        Endpoints {
            src,
            dst,
            src_port: sp,
            dst_port: dp,
        }
    }

    fn udp4(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ipv4(src, dst, 63)
            .udp(sp, dp)
            .write(&mut out, b"query")
            .unwrap();
        out
    }

    fn unreachable4(to: [u8; 4], inner: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ethernet2(MAC, MAC)
            .ipv4(ROUTER, to, 64)
            .icmpv4(Icmpv4Type::DestinationUnreachable(
                icmpv4::DestUnreachableHeader::Port,
            ))
            .write(&mut out, inner)
            .unwrap();
        out
    }

    /// The outer destination as the pipeline moves it, then the embedded header.
    fn translate(f: &mut [u8], outer: (Field, u128), e: &Endpoints) -> bool {
        let (_, off) = flow_of(f, 1);
        rewrite::apply(f, &off, &[outer], false).unwrap();
        rewrite(f, &off, e)
    }

    /// A port unreachable about a datagram an SNAT sent as X:7000 reaches A as the one
    /// A sent from port 5000: the bytes a stack would have built for that error, every
    /// checksum (outer IPv4, ICMP, embedded IPv4 and UDP) included.
    #[test]
    fn an_icmp_error_about_a_snat_datagram_reaches_the_sender_as_its_own() {
        let mut f = unreachable4(X, &udp4(X, 7000, S, 53));
        let e = ep(A.into(), 5000, S.into(), 53);
        let dst = (Field::Ipv4Dst, u128::from(u32::from_be_bytes(A)));
        assert!(translate(&mut f, dst, &e));
        assert_eq!(f, unreachable4(A, &udp4(A, 5000, S, 53)));
    }

    /// RFC 792's minimum: the embedded header and 8 bytes of TCP, no checksum of its own.
    #[test]
    fn a_truncated_embedded_segment_gets_its_ports() {
        let tcp4 = |src: [u8; 4], sp: u16| {
            let mut out = Vec::new();
            PacketBuilder::ipv4(src, S, 63)
                .tcp(sp, 443, 1, 64_000)
                .syn()
                .write(&mut out, &[])
                .unwrap();
            out.truncate(28);
            out
        };
        let mut f = unreachable4(X, &tcp4(X, 7000));
        let dst = (Field::Ipv4Dst, u128::from(u32::from_be_bytes(A)));
        assert!(translate(&mut f, dst, &ep(A.into(), 5000, S.into(), 443)));
        assert_eq!(f, unreachable4(A, &tcp4(A, 5000)));
    }

    /// ICMPv6 packet too big behind a floating IP (DNAT, the error leaving the VM): the
    /// source and the embedded destination go back to the address the client used; the
    /// ICMPv6 checksum covers the pseudo-header.
    #[test]
    fn a_packet_too_big_from_behind_a_floating_ip_names_the_floating_ip() {
        let vm: [u8; 16] = "fd00::5".parse::<std::net::Ipv6Addr>().unwrap().octets();
        let fip: [u8; 16] = "2001:db8::10"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        let client: [u8; 16] = "2001:db8:1::7"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        let tcp6 = |dst: [u8; 16]| {
            let mut out = Vec::new();
            PacketBuilder::ipv6(client, dst, 60)
                .tcp(40000, 443, 9, 64_000)
                .ack(1)
                .write(&mut out, &[0x55; 64])
                .unwrap();
            out
        };
        let too_big = |src: [u8; 16], inner: &[u8]| {
            let mut out = Vec::new();
            PacketBuilder::ethernet2(MAC, MAC)
                .ipv6(src, client, 64)
                .icmpv6(Icmpv6Type::PacketTooBig { mtu: 1400 })
                .write(&mut out, inner)
                .unwrap();
            out
        };
        let mut f = too_big(vm, &tcp6(vm));
        let e = ep(client.into(), 40000, fip.into(), 443);
        let src = (Field::Ipv6Src, u128::from_be_bytes(fip));
        assert!(translate(&mut f, src, &e));
        assert_eq!(f, too_big(fip, &tcp6(fip)));
    }

    /// Not an error, or an embedded header of the other family: nothing changes.
    #[test]
    fn only_errors_embedding_the_same_family_are_rewritten() {
        let mut echo = Vec::new();
        PacketBuilder::ethernet2(MAC, MAC)
            .ipv4(ROUTER, X, 64)
            .icmpv4_echo_request(7, 1)
            .write(&mut echo, &[0; 28])
            .unwrap();
        let (_, off) = flow_of(&echo, 1);
        let before = echo.clone();
        assert!(!rewrite(&mut echo, &off, &ep(A.into(), 7, S.into(), 7)));
        assert_eq!(echo, before);
        let mut f = unreachable4(X, &udp4(X, 7000, S, 53));
        let (_, off) = flow_of(&f, 1);
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert!(!rewrite(&mut f, &off, &ep(v6, 1, v6, 2)));
    }
}
