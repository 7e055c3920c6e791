//! From L3 bytes to a [`Packet`]: IPv4 (RFC 791) with options, IPv6
//! (RFC 8200) through its extension headers, TCP (RFC 9293) with the Window
//! Scale option (RFC 7323), UDP (RFC 768), ICMP (RFC 792) and ICMPv6
//! (RFC 4443) including the header embedded in error messages.
//!
//! Every read is bounds-checked; malformed input is a [`ParseError`], never
//! a panic (fuzzed by `fuzz/fuzz_targets/parse.rs`). No allocation.
//!
//! Lengths follow Open vSwitch's `conn_key_extract`: IPv4 total length and
//! IPv6 payload length bound the packet (trailing Ethernet padding is
//! ignored); a TCP header must fit, a UDP length must lie between 8 and the
//! IP payload. The header inside an ICMP error may be cut short by the
//! error's size: its addresses and the first 8 bytes of its transport
//! header are required (RFC 792 guarantees them), no more. Fragments come
//! out as [`Packet::fragment`] without a transport header.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::packet::{
    icmp, IcmpMessage, Packet, TcpFlags, TcpSegment, Tuple, IPPROTO_ICMP, IPPROTO_ICMPV6,
    IPPROTO_TCP, IPPROTO_UDP, L4,
};

/// Extension headers walked before giving up with
/// [`ParseError::TooManyExtensionHeaders`].
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// Whether [`parse`] verifies checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checksums {
    /// Verify the IPv4 header, TCP, UDP (unless 0 over IPv4), ICMP and
    /// ICMPv6 checksums, as Open vSwitch does when the NIC did not.
    Verify,
    /// Do not: the packet came from a guest that offloads its checksums
    /// (virtio `NEEDS_CSUM`), or the NIC verified them.
    #[default]
    Trust,
}

/// Why [`parse`] refused a packet. The tracker counts every one of them as
/// [`InvalidReason::Malformed`](crate::InvalidReason::Malformed), except
/// `Checksum` ([`InvalidReason::Checksum`](crate::InvalidReason::Checksum)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Shorter than a header or a length field claims.
    Truncated,
    /// The IP version nibble is neither 4 nor 6.
    BadIpVersion,
    /// IPv4 IHL below 5 or total length below the header, IPv6 payload
    /// length 0 (a jumbogram, RFC 2675), TCP data offset below 5, UDP
    /// length below 8.
    BadLength,
    /// More than [`MAX_EXTENSION_HEADERS`] IPv6 extension headers.
    TooManyExtensionHeaders,
    /// A checksum did not verify ([`Checksums::Verify`] only).
    Checksum,
    /// An ICMP error whose embedded header is unusable: truncated, a later
    /// fragment, another address family, port 0, or itself an ICMP error.
    IcmpInner,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ParseError::Truncated => "truncated",
            ParseError::BadIpVersion => "IP version is neither 4 nor 6",
            ParseError::BadLength => "length field is invalid",
            ParseError::TooManyExtensionHeaders => "too many IPv6 extension headers",
            ParseError::Checksum => "bad checksum",
            ParseError::IcmpInner => "unusable header inside an ICMP error",
        })
    }
}

impl std::error::Error for ParseError {}

const IPV4_HEADER_LEN: usize = 20;
const IPV6_HEADER_LEN: usize = 40;
const TCP_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;
const ICMP_HEADER_LEN: usize = 8;
/// Transport bytes an ICMP error must carry of the offending packet.
const ICMP_ERROR_L4_LEN: usize = 8;
const TCPOPT_EOL: u8 = 0;
const TCPOPT_NOP: u8 = 1;
const TCPOPT_WINDOW: u8 = 3;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn need(b: &[u8], n: usize) -> Result<(), ParseError> {
    if b.len() < n {
        Err(ParseError::Truncated)
    } else {
        Ok(())
    }
}

fn v4_addrs(b: &[u8]) -> (IpAddr, IpAddr) {
    let a = |at: usize| IpAddr::V4(Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3]));
    (a(12), a(16))
}

fn v6_addrs(b: &[u8]) -> (IpAddr, IpAddr) {
    let a = |at: usize| {
        let mut o = [0u8; 16];
        o.copy_from_slice(&b[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    (a(8), a(24))
}

/// Parses an IPv4 or IPv6 packet (the L3 header first: Ethernet and VLAN
/// tags already stripped).
pub fn parse(l3: &[u8], checksums: Checksums) -> Result<Packet, ParseError> {
    need(l3, 1)?;
    match l3[0] >> 4 {
        4 => parse_v4(l3, checksums == Checksums::Verify),
        6 => parse_v6(l3, checksums == Checksums::Verify),
        _ => Err(ParseError::BadIpVersion),
    }
}

#[inline]
fn parse_v4(b: &[u8], verify: bool) -> Result<Packet, ParseError> {
    need(b, IPV4_HEADER_LEN)?;
    let ihl = usize::from(b[0] & 0x0f) * 4;
    if ihl < IPV4_HEADER_LEN {
        return Err(ParseError::BadLength);
    }
    let total = usize::from(be16(b, 2));
    if total < ihl {
        return Err(ParseError::BadLength);
    }
    need(b, total)?;
    let b = &b[..total];
    if verify && checksum::finish(checksum::sum(&b[..ihl], 0)) != 0 {
        return Err(ParseError::Checksum);
    }
    let (src, dst) = v4_addrs(b);
    let proto = b[9];
    let frag = be16(b, 6);
    if frag & 0x3fff != 0 {
        // More Fragments set, or a non-zero offset.
        return Ok(fragment(src, dst, proto));
    }
    let l4 = parse_l4(src, dst, proto, &b[ihl..], verify)?;
    Ok(Packet {
        src,
        dst,
        fragment: false,
        l4,
    })
}

fn fragment(src: IpAddr, dst: IpAddr, proto: u8) -> Packet {
    Packet {
        src,
        dst,
        fragment: true,
        l4: L4::Other { proto },
    }
}

fn parse_v6(b: &[u8], verify: bool) -> Result<Packet, ParseError> {
    need(b, IPV6_HEADER_LEN)?;
    let payload = usize::from(be16(b, 4));
    if payload == 0 {
        return Err(ParseError::BadLength);
    }
    need(b, IPV6_HEADER_LEN + payload)?;
    let b = &b[..IPV6_HEADER_LEN + payload];
    let (src, dst) = v6_addrs(b);
    let ext = walk_extensions(b, b[6], IPV6_HEADER_LEN)?;
    if ext.fragment {
        return Ok(fragment(src, dst, ext.next));
    }
    let l4 = parse_l4(src, dst, ext.next, &b[ext.offset..], verify)?;
    Ok(Packet {
        src,
        dst,
        fragment: false,
        l4,
    })
}

/// Where the IPv6 extension headers end.
struct Extensions {
    /// The upper-layer protocol (or the fragment's next header).
    next: u8,
    offset: usize,
    /// A Fragment header that is not an atomic fragment (RFC 6946).
    fragment: bool,
}

fn walk_extensions(b: &[u8], mut next: u8, mut off: usize) -> Result<Extensions, ParseError> {
    for _ in 0..=MAX_EXTENSION_HEADERS {
        let len = match next {
            // Hop-by-Hop, Routing, Destination Options, Mobility, HIP, Shim6.
            0 | 43 | 60 | 135 | 139 | 140 => {
                need(b, off + 2)?;
                (usize::from(b[off + 1]) + 1) * 8
            }
            // Authentication Header (RFC 4302): length in 4-byte units.
            51 => {
                need(b, off + 2)?;
                (usize::from(b[off + 1]) + 2) * 4
            }
            44 => {
                need(b, off + 8)?;
                let offlg = be16(b, off + 2);
                if offlg & 0xfff9 != 0 {
                    // Offset non-zero or More Fragments set.
                    return Ok(Extensions {
                        next: b[off],
                        offset: off + 8,
                        fragment: true,
                    });
                }
                8
            }
            _ => {
                return Ok(Extensions {
                    next,
                    offset: off,
                    fragment: false,
                })
            }
        };
        need(b, off + len)?;
        next = b[off];
        off += len;
    }
    Err(ParseError::TooManyExtensionHeaders)
}

#[inline(always)]
fn parse_l4(src: IpAddr, dst: IpAddr, proto: u8, b: &[u8], verify: bool) -> Result<L4, ParseError> {
    let v6 = src.is_ipv6();
    let check = |data: &[u8], pseudo: bool| {
        if !verify {
            // Trusted: not even the pseudo-header's sum is taken.
            return Ok(());
        }
        let init = if pseudo {
            checksum::pseudo(src, dst, proto, data.len())
        } else {
            0
        };
        if checksum::finish(checksum::sum(data, init)) != 0 {
            Err(ParseError::Checksum)
        } else {
            Ok(())
        }
    };
    match proto {
        IPPROTO_TCP => {
            let seg = parse_tcp(b)?;
            check(b, true)?;
            Ok(L4::Tcp(seg))
        }
        IPPROTO_UDP => {
            need(b, UDP_HEADER_LEN)?;
            let len = usize::from(be16(b, 4));
            if len < UDP_HEADER_LEN {
                return Err(ParseError::BadLength);
            }
            need(b, len)?;
            if v6 || be16(b, 6) != 0 {
                check(&b[..len], true)?;
            }
            Ok(L4::Udp {
                src_port: be16(b, 0),
                dst_port: be16(b, 2),
            })
        }
        IPPROTO_ICMP if !v6 => {
            let m = parse_icmp(b, false)?;
            check(b, false)?;
            Ok(L4::Icmp(m))
        }
        IPPROTO_ICMPV6 if v6 => {
            let m = parse_icmp(b, true)?;
            check(b, true)?;
            Ok(L4::Icmp(m))
        }
        _ => Ok(L4::Other { proto }),
    }
}

#[inline(always)]
fn parse_tcp(b: &[u8]) -> Result<TcpSegment, ParseError> {
    need(b, TCP_HEADER_LEN)?;
    let doff = usize::from(b[12] >> 4) * 4;
    if doff < TCP_HEADER_LEN {
        return Err(ParseError::BadLength);
    }
    need(b, doff)?;
    Ok(TcpSegment {
        src_port: be16(b, 0),
        dst_port: be16(b, 2),
        seq: be32(b, 4),
        ack: be32(b, 8),
        flags: TcpFlags(b[13]),
        window: be16(b, 14),
        wscale: window_scale(&b[TCP_HEADER_LEN..doff]),
        payload_len: (b.len() - doff) as u32,
    })
}

/// The Window Scale option's shift count, walking options as RFC 9293
/// §3.2 lays them out; a malformed length ends the walk.
fn window_scale(mut opts: &[u8]) -> Option<u8> {
    let mut found = None;
    while let [kind, rest @ ..] = opts {
        match *kind {
            TCPOPT_EOL => break,
            TCPOPT_NOP => opts = rest,
            _ => {
                let len = usize::from(*rest.first()?);
                if len < 2 || len > opts.len() {
                    break;
                }
                if *kind == TCPOPT_WINDOW && len == 3 {
                    found = Some(opts[2]);
                }
                opts = &opts[len..];
            }
        }
    }
    found
}

fn parse_icmp(b: &[u8], v6: bool) -> Result<IcmpMessage, ParseError> {
    need(b, ICMP_HEADER_LEN)?;
    let (icmp_type, code) = (b[0], b[1]);
    let mut m = IcmpMessage {
        icmp_type,
        code,
        id: 0,
        inner: None,
    };
    match icmp::kind(v6, icmp_type) {
        icmp::Kind::Query { .. } => m.id = be16(b, 4),
        icmp::Kind::Error => m.inner = Some(inner(&b[ICMP_HEADER_LEN..], v6)?),
        icmp::Kind::Unsupported => {}
    }
    Ok(m)
}

/// The tuple of the packet embedded in an ICMP error.
fn inner(b: &[u8], v6: bool) -> Result<Tuple, ParseError> {
    let bad = ParseError::IcmpInner;
    let (src, dst, proto, l4) = if v6 {
        if b.len() < IPV6_HEADER_LEN || b[0] >> 4 != 6 {
            return Err(bad);
        }
        let (src, dst) = v6_addrs(b);
        let ext = walk_extensions(b, b[6], IPV6_HEADER_LEN).map_err(|_| bad)?;
        if ext.fragment {
            return Err(bad);
        }
        (src, dst, ext.next, &b[ext.offset..])
    } else {
        if b.len() < IPV4_HEADER_LEN || b[0] >> 4 != 4 {
            return Err(bad);
        }
        let ihl = usize::from(b[0] & 0x0f) * 4;
        if ihl < IPV4_HEADER_LEN || ihl > b.len() || be16(b, 6) & 0x1fff != 0 {
            return Err(bad);
        }
        let (src, dst) = v4_addrs(b);
        (src, dst, b[9], &b[ihl..])
    };
    let mut t = Tuple::ports(src, dst, proto, 0, 0);
    match proto {
        IPPROTO_TCP | IPPROTO_UDP => {
            if l4.len() < ICMP_ERROR_L4_LEN {
                return Err(bad);
            }
            t.src_port = be16(l4, 0);
            t.dst_port = be16(l4, 2);
            if t.src_port == 0 || t.dst_port == 0 {
                return Err(bad);
            }
        }
        IPPROTO_ICMP | IPPROTO_ICMPV6 if (proto == IPPROTO_ICMPV6) == v6 => {
            if l4.len() < ICMP_ERROR_L4_LEN || l4[1] != 0 {
                return Err(bad);
            }
            let icmp::Kind::Query { .. } = icmp::kind(v6, l4[0]) else {
                return Err(bad);
            };
            t.icmp_type = l4[0];
            t.src_port = be16(l4, 4);
            t.dst_port = t.src_port;
        }
        _ => {}
    }
    Ok(t)
}
