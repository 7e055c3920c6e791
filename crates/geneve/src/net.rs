//! Minimal Ethernet/IPv4/IPv6/TCP/UDP field offsets shared by the
//! encapsulation, segmentation and coalescing code.
//!
//! These are a handful of fixed offsets read on the hot path; the crate's
//! benchmarks compare them with `etherparse` (see the README).

/// EtherType of IPv4 (IEEE 802.3, RFC 894).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6 (RFC 2464).
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of an IEEE 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of an IEEE 802.1ad service VLAN tag.
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// Length of an Ethernet II header without VLAN tags, in bytes.
pub const ETHERNET_HEADER_LEN: usize = 14;
/// Length of an IPv4 header without options, in bytes.
pub const IPV4_HEADER_LEN: usize = 20;
/// Length of the IPv6 fixed header, in bytes.
pub const IPV6_HEADER_LEN: usize = 40;
/// Length of a UDP header, in bytes.
pub const UDP_HEADER_LEN: usize = 8;
/// Length of a TCP header without options, in bytes.
pub const TCP_HEADER_LEN: usize = 20;

/// TCP flag bits (RFC 9293 §3.1, RFC 3168 §6.1).
pub mod tcp_flags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronise sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push function.
    pub const PSH: u8 = 0x08;
    /// Acknowledgment field significant.
    pub const ACK: u8 = 0x10;
    /// Urgent pointer field significant.
    pub const URG: u8 = 0x20;
    /// ECN-Echo.
    pub const ECE: u8 = 0x40;
    /// Congestion Window Reduced.
    pub const CWR: u8 = 0x80;
}

#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Returns (EtherType, L2 header length) of an Ethernet frame, skipping up
/// to two VLAN tags, or `None` if truncated.
#[inline]
pub(crate) fn l2(frame: &[u8]) -> Option<(u16, usize)> {
    if frame.len() < ETHERNET_HEADER_LEN {
        return None;
    }
    let mut off = 12;
    let mut et = be16(frame, off);
    let mut tags = 0;
    while (et == ETHERTYPE_VLAN || et == ETHERTYPE_QINQ) && tags < 2 {
        off += 4;
        if frame.len() < off + 2 {
            return None;
        }
        et = be16(frame, off);
        tags += 1;
    }
    Some((et, off + 2))
}

/// Offsets of a TCP/IP frame: Ethernet, IPv4 or IPv6 (no extension
/// headers), TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpFrame {
    /// L2 header length (where the IP header starts).
    pub l2_len: usize,
    /// IP header length (IPv4 with options, or 40).
    pub l3_len: usize,
    /// TCP header length (with options).
    pub l4_len: usize,
    /// Payload length: IP length minus headers (excludes L2 padding).
    pub payload_len: usize,
    /// true for IPv4.
    pub ipv4: bool,
}

impl TcpFrame {
    /// Offset of the TCP header.
    pub fn l4_off(&self) -> usize {
        self.l2_len + self.l3_len
    }
    /// Length of all headers (where the payload starts).
    pub fn hdr_len(&self) -> usize {
        self.l2_len + self.l3_len + self.l4_len
    }
    /// Length of the frame up to the end of the IP packet.
    pub fn end(&self) -> usize {
        self.hdr_len() + self.payload_len
    }
}

/// Why a frame is not a TCP/IP frame this crate can segment or coalesce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TcpParseError {
    Truncated,
    NotIp,
    NotTcp,
    Fragment,
    BadLength,
}

/// Parses a frame as Ethernet + IPv4/IPv6 + TCP.
pub(crate) fn parse_tcp(frame: &[u8]) -> Result<TcpFrame, TcpParseError> {
    let (et, l2_len) = l2(frame).ok_or(TcpParseError::Truncated)?;
    let ip = &frame[l2_len..];
    let (l3_len, ip_len, ipv4) = match et {
        ETHERTYPE_IPV4 => {
            if ip.len() < IPV4_HEADER_LEN || ip[0] >> 4 != 4 {
                return Err(TcpParseError::Truncated);
            }
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let tot = usize::from(be16(ip, 2));
            if ihl < IPV4_HEADER_LEN || tot < ihl || tot > ip.len() {
                return Err(TcpParseError::BadLength);
            }
            if be16(ip, 6) & 0x3fff != 0 {
                return Err(TcpParseError::Fragment);
            }
            if ip[9] != IPPROTO_TCP {
                return Err(TcpParseError::NotTcp);
            }
            (ihl, tot, true)
        }
        ETHERTYPE_IPV6 => {
            if ip.len() < IPV6_HEADER_LEN || ip[0] >> 4 != 6 {
                return Err(TcpParseError::Truncated);
            }
            if ip[6] != IPPROTO_TCP {
                return Err(TcpParseError::NotTcp);
            }
            let tot = IPV6_HEADER_LEN + usize::from(be16(ip, 4));
            if tot > ip.len() {
                return Err(TcpParseError::BadLength);
            }
            (IPV6_HEADER_LEN, tot, false)
        }
        _ => return Err(TcpParseError::NotIp),
    };
    let tcp = &ip[l3_len..ip_len];
    if tcp.len() < TCP_HEADER_LEN {
        return Err(TcpParseError::Truncated);
    }
    let l4_len = usize::from(tcp[12] >> 4) * 4;
    if l4_len < TCP_HEADER_LEN || l4_len > tcp.len() {
        return Err(TcpParseError::BadLength);
    }
    Ok(TcpFrame {
        l2_len,
        l3_len,
        l4_len,
        payload_len: tcp.len() - l4_len,
        ipv4,
    })
}

/// Partial checksum sum of the TCP pseudo-header of a parsed frame, for a
/// TCP length (header + payload) of `tcp_len` bytes.
#[inline]
pub(crate) fn tcp_pseudo_sum(frame: &[u8], t: &TcpFrame, tcp_len: usize) -> u16 {
    let ip = &frame[t.l2_len..];
    if t.ipv4 {
        crate::checksum::pseudo_header_v4(
            [ip[12], ip[13], ip[14], ip[15]],
            [ip[16], ip[17], ip[18], ip[19]],
            IPPROTO_TCP,
            tcp_len as u16,
        )
    } else {
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&ip[8..24]);
        dst.copy_from_slice(&ip[24..40]);
        crate::checksum::pseudo_header_v6(&src, &dst, IPPROTO_TCP, tcp_len as u32)
    }
}
