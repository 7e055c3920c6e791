//! What the tracker reads of a packet: a [`Packet`] the caller fills from
//! its own flow key, or [`parse`](crate::parse()) fills from L3 bytes.
//!
//! Nothing here borrows the packet's bytes: a `Packet` is a small `Copy`
//! value (about 100 bytes), built once per packet and read by every
//! conntrack step the packet takes.

use core::fmt;
use core::net::IpAddr;

/// IP protocol number of ICMP (RFC 792).
pub const IPPROTO_ICMP: u8 = 1;
/// IP protocol number of TCP (RFC 9293).
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP (RFC 768).
pub const IPPROTO_UDP: u8 = 17;
/// IPv6 next-header value of ICMPv6 (RFC 4443).
pub const IPPROTO_ICMPV6: u8 = 58;

/// An IP packet as the tracker sees it.
///
/// `src` and `dst` must be of one family; a packet that mixes them is
/// invalid ([`InvalidReason::Malformed`](crate::InvalidReason::Malformed)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// A fragment (IPv4 MF set or offset non-zero; an IPv6 Fragment header
    /// that is not an atomic fragment, RFC 6946). Fragments are not
    /// reassembled: the tracker marks them invalid
    /// ([`InvalidReason::Fragment`](crate::InvalidReason::Fragment)) and
    /// counts them.
    pub fragment: bool,
    /// The transport header.
    pub l4: L4,
}

impl Packet {
    /// Whether `self` and `other` look up alike: one connection, seen from
    /// one side (the same addresses, protocol, ports or ICMP type, code, id
    /// and embedded tuple; neither a fragment). TCP's other fields (flags,
    /// sequence numbers) and lengths may differ. Such packets share one
    /// [`Prepared`](crate::Prepared), as
    /// [`Conntrack::execute_run`](crate::Conntrack::execute_run) asks.
    pub fn same_lookup(&self, other: &Packet) -> bool {
        let l4 = match (&self.l4, &other.l4) {
            (L4::Tcp(a), L4::Tcp(b)) => (a.src_port, a.dst_port) == (b.src_port, b.dst_port),
            (
                L4::Udp { src_port, dst_port },
                L4::Udp {
                    src_port: s,
                    dst_port: d,
                },
            ) => (src_port, dst_port) == (s, d),
            (L4::Icmp(a), L4::Icmp(b)) => a == b,
            (L4::Other { proto: a }, L4::Other { proto: b }) => a == b,
            _ => false,
        };
        l4 && self.src == other.src && self.dst == other.dst && !self.fragment && !other.fragment
    }

    /// The IP protocol (IPv6: the last next-header value): 6 for
    /// [`L4::Tcp`], 17 for [`L4::Udp`], 1 or 58 for [`L4::Icmp`] by the
    /// address family, the carried number for [`L4::Other`].
    pub fn proto(&self) -> u8 {
        match self.l4 {
            L4::Tcp(_) => IPPROTO_TCP,
            L4::Udp { .. } => IPPROTO_UDP,
            L4::Icmp(_) if self.src.is_ipv6() => IPPROTO_ICMPV6,
            L4::Icmp(_) => IPPROTO_ICMP,
            L4::Other { proto } => proto,
        }
    }
}

/// The transport header of a [`Packet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    /// A TCP segment.
    Tcp(TcpSegment),
    /// A UDP datagram.
    Udp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
    },
    /// An ICMP message (IPv4) or ICMPv6 message (IPv6).
    Icmp(IcmpMessage),
    /// Any other protocol (and ICMP carried over the wrong IP version):
    /// tracked by addresses and protocol only.
    Other {
        /// The IP protocol number.
        proto: u8,
    },
}

/// The fields of a TCP header that window tracking reads (RFC 9293 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpSegment {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Control bits.
    pub flags: TcpFlags,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (read only when [`TcpFlags::ACK`] is set).
    pub ack: u32,
    /// Window field as sent (unscaled).
    pub window: u16,
    /// The Window Scale option's shift count (RFC 7323 §2.2), if the
    /// segment carries one; read on SYN segments only, clamped to 14.
    pub wscale: Option<u8>,
    /// Payload length in bytes (IP payload minus the TCP header).
    pub payload_len: u32,
}

/// TCP control bits (the 8 bits of header byte 13).
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer field is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set.
    pub fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        let mut first = true;
        for (bit, name) in NAMES.iter().enumerate() {
            if self.0 & (1 << bit) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// An ICMP (RFC 792) or ICMPv6 (RFC 4443) message.
///
/// Echo request/reply (and, for ICMP, timestamp and information
/// request/reply) form their own connections keyed by `id`. Error messages
/// (destination unreachable, time exceeded, parameter problem, source
/// quench, redirect; ICMPv6 packet too big) carry in `inner` the header of
/// the packet that caused them and are *related* to that packet's
/// connection. Other types are invalid to the tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpMessage {
    /// Type.
    pub icmp_type: u8,
    /// Code.
    pub code: u8,
    /// Identifier of a query (echo, timestamp, information); 0 otherwise.
    pub id: u16,
    /// For an error message: the tuple of the embedded packet, as that
    /// packet was sent (source = the host the error is sent to).
    pub inner: Option<Tuple>,
}

/// A connection's 5-tuple in one direction, as Open vSwitch's
/// `ct_dpif_tuple`: addresses, protocol, and ports or ICMP id/type/code.
///
/// For TCP and UDP, `src_port`/`dst_port` are the ports and the ICMP fields
/// are 0. For ICMP and ICMPv6 queries both ports hold the identifier, and
/// `icmp_type`/`icmp_code` the message's type and code. For other
/// protocols, all of them are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Tuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol number.
    pub proto: u8,
    /// Source port, or ICMP identifier.
    pub src_port: u16,
    /// Destination port, or ICMP identifier.
    pub dst_port: u16,
    /// ICMP type (queries only).
    pub icmp_type: u8,
    /// ICMP code (queries only).
    pub icmp_code: u8,
}

impl Tuple {
    /// A TCP or UDP (or other ported protocol's) tuple.
    pub fn ports(src: IpAddr, dst: IpAddr, proto: u8, src_port: u16, dst_port: u16) -> Tuple {
        Tuple {
            src,
            dst,
            proto,
            src_port,
            dst_port,
            icmp_type: 0,
            icmp_code: 0,
        }
    }
}

impl fmt::Display for Tuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.proto {
            IPPROTO_ICMP | IPPROTO_ICMPV6 => write!(
                f,
                "src={},dst={},id={},type={},code={}",
                self.src, self.dst, self.src_port, self.icmp_type, self.icmp_code
            ),
            IPPROTO_TCP | IPPROTO_UDP => write!(
                f,
                "src={},dst={},sport={},dport={}",
                self.src, self.dst, self.src_port, self.dst_port
            ),
            _ => write!(f, "src={},dst={}", self.src, self.dst),
        }
    }
}

/// ICMP (RFC 792, RFC 950) and ICMPv6 (RFC 4443) message types the
/// tracker knows.
pub mod icmp {
    /// ICMP echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// ICMP destination unreachable.
    pub const DEST_UNREACH: u8 = 3;
    /// ICMP source quench (deprecated, RFC 6633, still related).
    pub const SOURCE_QUENCH: u8 = 4;
    /// ICMP redirect.
    pub const REDIRECT: u8 = 5;
    /// ICMP echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// ICMP time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
    /// ICMP parameter problem.
    pub const PARAM_PROBLEM: u8 = 12;
    /// ICMP timestamp request.
    pub const TIMESTAMP: u8 = 13;
    /// ICMP timestamp reply.
    pub const TIMESTAMP_REPLY: u8 = 14;
    /// ICMP information request.
    pub const INFO_REQUEST: u8 = 15;
    /// ICMP information reply.
    pub const INFO_REPLY: u8 = 16;

    /// ICMPv6 destination unreachable.
    pub const V6_DEST_UNREACH: u8 = 1;
    /// ICMPv6 packet too big.
    pub const V6_PACKET_TOO_BIG: u8 = 2;
    /// ICMPv6 time exceeded.
    pub const V6_TIME_EXCEEDED: u8 = 3;
    /// ICMPv6 parameter problem.
    pub const V6_PARAM_PROBLEM: u8 = 4;
    /// ICMPv6 echo request.
    pub const V6_ECHO_REQUEST: u8 = 128;
    /// ICMPv6 echo reply.
    pub const V6_ECHO_REPLY: u8 = 129;

    /// What an ICMP message is to the tracker.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Kind {
        /// A query or its answer; the value is the other direction's type.
        Query { reverse: u8, opener: bool },
        /// An error carrying the offending packet's header.
        Error,
        /// Anything else: not tracked.
        Unsupported,
    }

    /// Classifies an ICMP (`v6` false) or ICMPv6 type.
    pub(crate) fn kind(v6: bool, t: u8) -> Kind {
        let q = |reverse, opener| Kind::Query { reverse, opener };
        match (v6, t) {
            (false, ECHO_REQUEST) => q(ECHO_REPLY, true),
            (false, ECHO_REPLY) => q(ECHO_REQUEST, false),
            (false, TIMESTAMP) => q(TIMESTAMP_REPLY, true),
            (false, TIMESTAMP_REPLY) => q(TIMESTAMP, false),
            (false, INFO_REQUEST) => q(INFO_REPLY, true),
            (false, INFO_REPLY) => q(INFO_REQUEST, false),
            (false, DEST_UNREACH | TIME_EXCEEDED | PARAM_PROBLEM | SOURCE_QUENCH | REDIRECT) => {
                Kind::Error
            }
            (true, V6_ECHO_REQUEST) => q(V6_ECHO_REPLY, true),
            (true, V6_ECHO_REPLY) => q(V6_ECHO_REQUEST, false),
            (true, V6_DEST_UNREACH | V6_PACKET_TOO_BIG | V6_TIME_EXCEEDED | V6_PARAM_PROBLEM) => {
                Kind::Error
            }
            _ => Kind::Unsupported,
        }
    }
}
