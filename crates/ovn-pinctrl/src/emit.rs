//! A frame emitted from an OVN logical [`Flow`]: every header field the
//! flow holds comes from the flow; what it does not hold (sequence
//! numbers, verification tags, payloads) comes from the [`Kind`].
//!
//! Headers are composed as ovn-controller's pinctrl composes them (OVN
//! 23.03 `controller/pinctrl.c` `pinctrl_compose_ipv4()`,
//! `pinctrl_compose_ipv6()`; OVS 3.1 `lib/packets.c` `compose_arp__()`,
//! `compose_nd_ns()`, `compose_nd_na()`):
//!
//! - Ethernet II, with an 802.1Q tag when `vlan_tci` has OVS's "present"
//!   bit (12); the tag carries the TCI without that bit (OVS
//!   `eth_push_vlan()`).
//! - IPv4 without options: TOS from `ip.dscp`/`ip.ecn`, identification 0,
//!   "don't fragment", TTL from `ip.ttl`, header checksum (RFC 791).
//! - IPv6 without extension headers: traffic class from `ip.dscp`/`ip.ecn`,
//!   flow label from `ipv6.label`, hop limit from `ip.ttl` (RFC 8200).
//! - Checksums: ICMPv4 (RFC 792); ICMPv6, TCP and UDP over the
//!   pseudo-header (RFC 4443 §2.3, RFC 9293 §3.1, RFC 768; a UDP checksum
//!   that computes to 0 is sent as 0xffff); SCTP's CRC32c (RFC 9260 §6.8).
//! - No padding to Ethernet's 60-byte minimum: the port pads, as pinctrl's
//!   frames are padded.

use ovn_lflow::{Field, Flow};

use crate::error::{Error, Result};
use crate::flowbits::low;
use crate::wire::{checksum, ethernet, ipv4, ipv6};

/// IP protocol numbers.
pub(crate) mod proto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
    pub const SCTP: u8 = 132;
}

/// What follows the Ethernet header, with what a [`Flow`] does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// ARP for IPv4 over Ethernet (RFC 826): `arp.op`, `arp.sha`,
    /// `arp.spa`, `arp.tha`, `arp.tpa`. EtherType 0x0806 whatever
    /// `eth.type` says.
    Arp,
    /// ICMPv4 over IPv4: `icmp4.type`, `icmp4.code`, then `rest` (bytes 4-7
    /// of the header: identifier and sequence, or unused), then `data`.
    /// A non-zero `icmp4.frag_mtu` is written to bytes 6-7, as pinctrl's
    /// `put_icmp4_frag_mtu` does (RFC 1191 §4).
    Icmp4 {
        /// Header bytes 4-7.
        rest: [u8; 4],
        /// The message body.
        data: &'a [u8],
    },
    /// ICMPv6 over IPv6: `icmp6.type`, `icmp6.code`, `rest`, `data`. A
    /// non-zero `icmp6.frag_mtu` is written to bytes 4-7 (the MTU of a
    /// Packet Too Big, RFC 4443 §3.2).
    Icmp6 {
        /// Header bytes 4-7.
        rest: [u8; 4],
        /// The message body.
        data: &'a [u8],
    },
    /// A neighbour solicitation (RFC 4861 §4.3): `icmp6.type`/`code`,
    /// `nd.target`, and one source link-layer address option with `nd.sll`.
    NdNs,
    /// A neighbour advertisement (RFC 4861 §4.4): `icmp6.type`/`code`,
    /// `flags` (R 0x80000000, S 0x40000000, O 0x20000000), `nd.target`,
    /// and one target link-layer address option with `nd.tll`.
    NdNa {
        /// The flags word with the reserved bits.
        flags: u32,
    },
    /// TCP: `tcp.src`, `tcp.dst`, `tcp.flags`, data offset 5 (no options),
    /// urgent pointer 0.
    Tcp {
        /// Sequence number.
        seq: u32,
        /// Acknowledgment number.
        ack: u32,
        /// Window.
        window: u16,
        /// The payload.
        data: &'a [u8],
    },
    /// UDP: `udp.src`, `udp.dst`.
    Udp {
        /// The payload.
        data: &'a [u8],
    },
    /// SCTP: `sctp.src`, `sctp.dst`, then `chunks`.
    Sctp {
        /// Verification tag.
        vtag: u32,
        /// The chunks, as they go on the wire.
        chunks: &'a [u8],
    },
    /// Any other protocol over IP: `ip.proto`, then `data` as is.
    Ip {
        /// The IP payload.
        data: &'a [u8],
    },
}

/// The frame `flow` and `kind` describe.
///
/// IPv4 or IPv6 is `eth.type`'s for TCP, UDP, SCTP and other IP kinds;
/// ICMPv4 is always over IPv4, ICMPv6 and ND over IPv6.
///
/// # Errors
/// [`Error::NotIp`] for a TCP, UDP, SCTP or IP kind whose `eth.type` is
/// neither IPv4 nor IPv6; [`Error::TooLong`] for a packet longer than 65535
/// bytes.
pub fn emit(flow: &Flow, kind: &Kind<'_>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(128);
    let mut eth = ethernet::Repr {
        dst: low(flow.get(Field::EthDst)),
        src: low(flow.get(Field::EthSrc)),
        tci: tci(flow),
        ethertype: ethernet::ARP,
    };
    if let Kind::Arp = kind {
        eth.emit(&mut out);
        arp(flow, &mut out);
        return Ok(out);
    }
    let v6 = match kind {
        Kind::Icmp4 { .. } => false,
        Kind::Icmp6 { .. } | Kind::NdNs | Kind::NdNa { .. } => true,
        _ => match flow.get(Field::EthType) as u16 {
            ethernet::IPV4 => false,
            ethernet::IPV6 => true,
            other => return Err(Error::NotIp(other)),
        },
    };
    eth.ethertype = if v6 { ethernet::IPV6 } else { ethernet::IPV4 };
    eth.emit(&mut out);
    let (protocol, l4, csum_at) = transport(flow, kind);
    let l3 = out.len();
    ip_header(flow, v6, protocol, l4.len(), &mut out)?;
    let l4_at = out.len();
    out.extend_from_slice(&l4);
    fill_l4_checksum(&mut out, l3, l4_at, v6, protocol, csum_at);
    Ok(out)
}

/// The flow's 802.1Q TCI as it goes on the wire, if OVS's "present" bit is
/// set.
pub(crate) fn tci(flow: &Flow) -> Option<u16> {
    let t = flow.get(Field::VlanTci) as u16;
    (t & 0x1000 != 0).then_some(t & !0x1000)
}

fn arp(flow: &Flow, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    out.extend_from_slice(&low::<2>(flow.get(Field::ArpOp)));
    out.extend_from_slice(&low::<6>(flow.get(Field::ArpSha)));
    out.extend_from_slice(&low::<4>(flow.get(Field::ArpSpa)));
    out.extend_from_slice(&low::<6>(flow.get(Field::ArpTha)));
    out.extend_from_slice(&low::<4>(flow.get(Field::ArpTpa)));
}

fn ip_header(flow: &Flow, v6: bool, protocol: u8, len: usize, out: &mut Vec<u8>) -> Result<()> {
    let tos = ((flow.get(Field::IpDscp) as u8) << 2) | (flow.get(Field::IpEcn) as u8 & 3);
    let ttl = flow.get(Field::IpTtl) as u8;
    if v6 {
        ipv6::Repr {
            src: low(flow.get(Field::Ipv6Src)),
            dst: low(flow.get(Field::Ipv6Dst)),
            next_header: protocol,
            traffic_class: tos,
            flow_label: flow.get(Field::Ipv6Label) as u32,
            hop_limit: ttl,
            payload_len: len,
        }
        .emit(out)
    } else {
        ipv4::Repr {
            src: low(flow.get(Field::Ipv4Src)),
            dst: low(flow.get(Field::Ipv4Dst)),
            protocol,
            tos,
            ttl,
            ident: 0,
            flags_frag: ipv4::DONT_FRAGMENT,
            payload_len: len,
        }
        .emit(out)
    }
}

/// Where a transport's checksum goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Csum {
    /// Internet checksum at this offset, without pseudo-header (ICMPv4).
    Plain(usize),
    /// Internet checksum at this offset, over the pseudo-header.
    Pseudo(usize),
    /// UDP's: like `Pseudo`, 0 sent as 0xffff.
    Udp,
    /// SCTP's CRC32c at offset 8.
    Crc32c,
    /// None.
    None,
}

/// The protocol, the upper-layer bytes with a zero checksum, and where the
/// checksum goes.
fn transport(flow: &Flow, kind: &Kind<'_>) -> (u8, Vec<u8>, Csum) {
    let g = |f: Field| flow.get(f);
    match *kind {
        Kind::Arp => unreachable!("ARP is emitted before"),
        Kind::Icmp4 { mut rest, data } => {
            let mtu = g(Field::Icmp4FragMtu) as u16;
            if mtu != 0 {
                rest[2..].copy_from_slice(&mtu.to_be_bytes());
            }
            let hdr = [g(Field::Icmpv4Type) as u8, g(Field::Icmpv4Code) as u8, 0, 0];
            (
                proto::ICMP,
                [&hdr[..], &rest, data].concat(),
                Csum::Plain(2),
            )
        }
        Kind::Icmp6 { mut rest, data } => {
            let mtu = g(Field::Icmp6FragMtu) as u32;
            if mtu != 0 {
                rest = mtu.to_be_bytes();
            }
            let hdr = [g(Field::Icmpv6Type) as u8, g(Field::Icmpv6Code) as u8, 0, 0];
            (
                proto::ICMPV6,
                [&hdr[..], &rest, data].concat(),
                Csum::Pseudo(2),
            )
        }
        Kind::NdNs => (
            proto::ICMPV6,
            nd(flow, 0, 1, g(Field::NdSll)),
            Csum::Pseudo(2),
        ),
        Kind::NdNa { flags } => (
            proto::ICMPV6,
            nd(flow, flags, 2, g(Field::NdTll)),
            Csum::Pseudo(2),
        ),
        Kind::Tcp {
            seq,
            ack,
            window,
            data,
        } => {
            let ctl = (5u16 << 12) | (g(Field::TcpFlags) as u16 & 0x0fff);
            let mut b = Vec::with_capacity(20 + data.len());
            b.extend_from_slice(&low::<2>(g(Field::TcpSrc)));
            b.extend_from_slice(&low::<2>(g(Field::TcpDst)));
            b.extend_from_slice(&seq.to_be_bytes());
            b.extend_from_slice(&ack.to_be_bytes());
            b.extend_from_slice(&ctl.to_be_bytes());
            b.extend_from_slice(&window.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, 0]);
            b.extend_from_slice(data);
            (proto::TCP, b, Csum::Pseudo(16))
        }
        Kind::Udp { data } => {
            let mut b = Vec::with_capacity(8 + data.len());
            b.extend_from_slice(&low::<2>(g(Field::UdpSrc)));
            b.extend_from_slice(&low::<2>(g(Field::UdpDst)));
            // The length is set with the checksum, once it is known to fit.
            b.extend_from_slice(&[0, 0, 0, 0]);
            b.extend_from_slice(data);
            (proto::UDP, b, Csum::Udp)
        }
        Kind::Sctp { vtag, chunks } => {
            let mut b = Vec::with_capacity(12 + chunks.len());
            b.extend_from_slice(&low::<2>(g(Field::SctpSrc)));
            b.extend_from_slice(&low::<2>(g(Field::SctpDst)));
            b.extend_from_slice(&vtag.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0, 0]);
            b.extend_from_slice(chunks);
            (proto::SCTP, b, Csum::Crc32c)
        }
        Kind::Ip { data } => (g(Field::IpProto) as u8, data.to_vec(), Csum::None),
    }
}

/// An ND message: type, code, checksum, `flags`, `nd.target`, one
/// link-layer address option of `opt_type` with `mac`.
fn nd(flow: &Flow, flags: u32, opt_type: u8, mac: u128) -> Vec<u8> {
    let mut b = Vec::with_capacity(32);
    b.extend_from_slice(&[
        flow.get(Field::Icmpv6Type) as u8,
        flow.get(Field::Icmpv6Code) as u8,
        0,
        0,
    ]);
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&low::<16>(flow.get(Field::NdTarget)));
    b.extend_from_slice(&[opt_type, 1]);
    b.extend_from_slice(&low::<6>(mac));
    b
}

/// Computes the upper layer's checksum in `out` (IP header at `l3`, upper
/// layer at `l4` to the end), whatever its checksum field held.
pub(crate) fn fill_l4_checksum(
    out: &mut [u8],
    l3: usize,
    l4: usize,
    v6: bool,
    protocol: u8,
    c: Csum,
) {
    let len = out.len() - l4;
    let pseudo = if v6 {
        let p = ipv6::Packet::new_unchecked(&out[l3..]);
        checksum::pseudo_v6(p.src(), p.dst(), protocol, len as u32)
    } else {
        let p = ipv4::Packet::new_unchecked(&out[l3..]);
        checksum::pseudo_v4(p.src(), p.dst(), protocol, len as u16)
    };
    let (at, sum) = match c {
        Csum::None => return,
        Csum::Crc32c => {
            out[l4 + 8..l4 + 12].fill(0);
            let crc = checksum::crc32c(&out[l4..]);
            out[l4 + 8..l4 + 12].copy_from_slice(&crc.to_le_bytes());
            return;
        }
        Csum::Plain(at) => {
            out[l4 + at..l4 + at + 2].fill(0);
            (at, checksum::finish(checksum::add(0, &out[l4..])))
        }
        Csum::Pseudo(at) => {
            out[l4 + at..l4 + at + 2].fill(0);
            (at, checksum::finish(checksum::add(pseudo, &out[l4..])))
        }
        Csum::Udp => {
            out[l4 + 4..l4 + 6].copy_from_slice(&(len as u16).to_be_bytes());
            out[l4 + 6..l4 + 8].fill(0);
            let c = checksum::finish(checksum::add(pseudo, &out[l4..]));
            (6, if c == 0 { 0xffff } else { c })
        }
    };
    out[l4 + at..l4 + at + 2].copy_from_slice(&sum.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow::new()
            .with(Field::EthSrc, 0x0a00_0000_0001)
            .with(Field::EthDst, 0x0a00_0000_0002)
            .with(Field::EthType, 0x0800)
            .with(Field::IpTtl, 64)
            .with(Field::Ipv4Src, 0x0a00_0001)
            .with(Field::Ipv4Dst, 0x0a00_0002)
            .with(Field::UdpSrc, 1000)
            .with(Field::UdpDst, 53)
    }

    #[test]
    fn udp_over_ipv4_checks_out() {
        let b = emit(&flow(), &Kind::Udp { data: b"hello" }).unwrap();
        assert_eq!(b.len(), 14 + 20 + 8 + 5);
        assert_eq!(checksum::of(&b[14..34]), 0);
        let pseudo = checksum::pseudo_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 13);
        assert_eq!(checksum::finish(checksum::add(pseudo, &b[34..])), 0);
        assert_eq!(&b[38..40], &[0, 13]);
    }

    #[test]
    fn a_vlan_tag_drops_the_present_bit() {
        let f = flow().with(Field::VlanTci, 0x1000 | 0x2005);
        let b = emit(&f, &Kind::Udp { data: b"" }).unwrap();
        assert_eq!(&b[12..18], &[0x81, 0x00, 0x20, 0x05, 0x08, 0x00]);
    }

    #[test]
    fn non_ip_ethertypes_are_refused() {
        let f = flow().with(Field::EthType, 0x88cc);
        assert_eq!(
            emit(&f, &Kind::Udp { data: b"" }),
            Err(Error::NotIp(0x88cc))
        );
    }

    #[test]
    fn oversized_payloads_are_refused() {
        let big = vec![0; 70_000];
        assert_eq!(
            emit(&flow(), &Kind::Udp { data: &big }),
            Err(Error::TooLong(70_028))
        );
    }
}
