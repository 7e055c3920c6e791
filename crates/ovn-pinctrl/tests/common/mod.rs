//! Helpers shared by the integration tests: hex fixtures, an independent
//! Internet checksum, flows, and a check of every frame by etherparse.
#![allow(dead_code)]

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use ovn_lflow::{Field, Flow};

/// Bytes from hex, whitespace and `|` ignored.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    assert!(digits.len() % 2 == 0, "odd hex: {s}");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// RFC 1071 checksum of `parts` laid end to end (written here again, not
/// taken from the crate).
pub fn inet_csum(parts: &[&[u8]]) -> u16 {
    let all: Vec<u8> = parts.concat();
    let mut sum: u64 = 0;
    for c in all.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        sum += u64::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes the checksum of `frame[from..]` plus `pseudo` at `at`.
pub fn fill_csum(frame: &mut [u8], from: usize, at: usize, pseudo: &[u8]) {
    frame[at..at + 2].fill(0);
    let c = inet_csum(&[pseudo, &frame[from..]]);
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// The IPv4 header checksum of the header at `l3` (20 bytes).
pub fn fill_ip4_csum(frame: &mut [u8], l3: usize) {
    frame[l3 + 10..l3 + 12].fill(0);
    let c = inet_csum(&[&frame[l3..l3 + 20]]);
    frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
}

/// An IPv6 pseudo-header.
pub fn pseudo6(src: &[u8], dst: &[u8], len: usize, next: u8) -> Vec<u8> {
    [src, dst, &(len as u32).to_be_bytes(), &[0, 0, 0, next]].concat()
}

/// An IPv4 pseudo-header.
pub fn pseudo4(src: &[u8], dst: &[u8], len: usize, proto: u8) -> Vec<u8> {
    [src, dst, &[0, proto], &(len as u16).to_be_bytes()].concat()
}

/// A flow with the given Ethernet and IPv4 header fields.
pub fn ip4_flow(src_mac: u128, dst_mac: u128, src: u128, dst: u128, proto: u128) -> Flow {
    Flow::new()
        .with(Field::EthSrc, src_mac)
        .with(Field::EthDst, dst_mac)
        .with(Field::EthType, 0x0800)
        .with(Field::IpProto, proto)
        .with(Field::IpTtl, 64)
        .with(Field::Ipv4Src, src)
        .with(Field::Ipv4Dst, dst)
}

/// A flow with the given Ethernet and IPv6 header fields.
pub fn ip6_flow(src_mac: u128, dst_mac: u128, src: u128, dst: u128, proto: u128) -> Flow {
    Flow::new()
        .with(Field::EthSrc, src_mac)
        .with(Field::EthDst, dst_mac)
        .with(Field::EthType, 0x86dd)
        .with(Field::IpProto, proto)
        .with(Field::IpTtl, 64)
        .with(Field::Ipv6Src, src)
        .with(Field::Ipv6Dst, dst)
}

/// Parses `frame` with etherparse and checks every length and checksum it
/// can: the IPv4 header checksum, and the TCP, UDP, ICMPv4 and ICMPv6
/// checksums. Returns etherparse's view.
pub fn etherparse_check(frame: &[u8]) -> SlicedPacket<'_> {
    let p = SlicedPacket::from_ethernet(frame).unwrap_or_else(|e| panic!("etherparse: {e:?}"));
    let (src4, dst4, src6, dst6) = match &p.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header().to_header();
            assert_eq!(
                h.header_checksum,
                h.calc_header_checksum(),
                "IPv4 header checksum"
            );
            assert_eq!(
                usize::from(h.total_len),
                frame.len() - frame_l3(frame),
                "IPv4 total length"
            );
            (h.source, h.destination, [0; 16], [0; 16])
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            assert_eq!(
                usize::from(h.payload_length()) + 40,
                frame.len() - frame_l3(frame),
                "IPv6 payload length"
            );
            ([0; 4], [0; 4], h.source(), h.destination())
        }
        None => return p,
    };
    let v6 = matches!(p.net, Some(NetSlice::Ipv6(_)));
    match &p.transport {
        Some(TransportSlice::Tcp(t)) => {
            let c = if v6 {
                t.calc_checksum_ipv6(src6, dst6)
            } else {
                t.calc_checksum_ipv4(src4, dst4)
            };
            assert_eq!(t.checksum(), c.unwrap(), "TCP checksum");
        }
        Some(TransportSlice::Udp(u)) => {
            let h = u.to_header();
            assert_eq!(usize::from(h.length), u.slice().len(), "UDP length");
            if h.checksum != 0 || v6 {
                let c = if v6 {
                    h.calc_checksum_ipv6_raw(src6, dst6, u.payload())
                } else {
                    h.calc_checksum_ipv4_raw(src4, dst4, u.payload())
                };
                assert_eq!(h.checksum, c.unwrap(), "UDP checksum");
            }
        }
        Some(TransportSlice::Icmpv4(i)) => {
            // Over the raw message: etherparse's typed header drops the unused bytes
            // 5-8 of some types (time exceeded, ...), which the frame may carry.
            assert_eq!(ones_complement_sum(i.slice()), 0xffff, "ICMPv4 checksum");
        }
        Some(TransportSlice::Icmpv6(i)) => {
            assert!(i.is_checksum_valid(src6, dst6), "ICMPv6 checksum");
        }
        None => {}
    }
    p
}

fn frame_l3(frame: &[u8]) -> usize {
    if frame[12..14] == [0x81, 0x00] {
        18
    } else {
        14
    }
}

/// The options of the first action of `actions`, which must be
/// `put_dhcp_opts` or `put_dhcpv6_opts`, as ovn-lflow parses them.
pub fn dhcp_options(actions: &str) -> Vec<ovn_lflow::actions::GenOption> {
    use ovn_lflow::actions::{self, Action, ActionParams, Pipeline};
    use ovn_lflow::dhcp::OptionTable;
    let symtab = ovn_lflow::SymbolTable::ovn();
    let (v4, v6) = (OptionTable::dhcpv4(), OptionTable::dhcpv6());
    let (ra, ev) = (OptionTable::nd_ra(), OptionTable::empty_lb_backends());
    let params = ActionParams {
        symtab: &symtab,
        dhcp_opts: &v4,
        dhcpv6_opts: &v6,
        nd_ra_opts: &ra,
        event_opts: &ev,
        pipeline: Pipeline::Ingress,
        n_tables: 30,
        cur_ltable: 10,
    };
    let parsed = actions::parse(actions, &params).unwrap_or_else(|e| panic!("{actions}: {e}"));
    match &parsed.actions.0[0] {
        Action::PutDhcpv4Opts(o) | Action::PutDhcpv6Opts(o) => o.options.clone(),
        other => panic!("not a put_dhcp*_opts: {other:?}"),
    }
}

/// The RFC 1071 sum of `b` (big-endian words, an odd last byte padded with zero),
/// folded: 0xffff for a message whose checksum is right.
fn ones_complement_sum(b: &[u8]) -> u16 {
    let mut sum: u64 = b
        .chunks(2)
        .map(|w| u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}
