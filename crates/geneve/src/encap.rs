//! Geneve encapsulation from a per-tunnel header template (RFC 8926 §3.1,
//! §3.3).
//!
//! A [`TunnelTemplate`] prebuilds the outer Ethernet + IPv4/IPv6 + UDP +
//! Geneve header once; per packet it is copied and patched: IP lengths, the
//! IPv4 identification and header checksum (computed incrementally from a
//! precomputed sum), the IPv6 flow label (RFC 6438), the UDP length, the UDP
//! source port (a hash of the inner flow, RFC 8926 §3.3) and, when on, the
//! UDP checksum.

use core::net::IpAddr;
use core::ops::RangeInclusive;

use crate::checksum::{self, add, finish};
use crate::net::{
    be16, l2, put16, ETHERNET_HEADER_LEN, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPPROTO_UDP,
    IPV4_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN,
};
use crate::wire::{self, OptionList};
use crate::Error;

/// Default UDP source port range: the dynamic ports (RFC 6335 §6), as
/// RFC 8926 §3.3 recommends.
pub const DEFAULT_SOURCE_PORTS: RangeInclusive<u16> = 49152..=65535;

/// Everything that defines a tunnel's outer header.
#[derive(Debug, Clone)]
pub struct TunnelConfig {
    /// Outer Ethernet source MAC (the local uplink).
    pub src_mac: [u8; 6],
    /// Outer Ethernet destination MAC (next hop towards the remote TEP).
    pub dst_mac: [u8; 6],
    /// Local tunnel endpoint (outer IP source).
    pub local: IpAddr,
    /// Remote tunnel endpoint (outer IP destination); same family as `local`.
    pub remote: IpAddr,
    /// 24-bit Virtual Network Identifier.
    pub vni: u32,
    /// Geneve options sent with every packet.
    pub options: OptionList,
    /// IPv4 TTL or IPv6 hop limit. Default 64.
    pub ttl: u8,
    /// IPv4 TOS or IPv6 traffic class byte (DSCP and ECN). Default 0.
    pub tos: u8,
    /// Compute the outer UDP checksum (RFC 8926 §3.3 allows zero over IPv4).
    pub udp_checksum: bool,
    /// Allow a zero UDP checksum over IPv6 (RFC 6935, RFC 6936). Without
    /// this an IPv6 tunnel must have `udp_checksum` on.
    pub allow_ipv6_zero_checksum: bool,
    /// Range the UDP source port is mapped into. Default 49152..=65535.
    pub source_ports: RangeInclusive<u16>,
    /// UDP destination port. Default 6081 (RFC 8926 §3.3).
    pub destination_port: u16,
}

impl TunnelConfig {
    /// A configuration with the defaults documented on each field.
    pub fn new(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        local: IpAddr,
        remote: IpAddr,
        vni: u32,
    ) -> Self {
        TunnelConfig {
            src_mac,
            dst_mac,
            local,
            remote,
            vni,
            options: OptionList::new(),
            ttl: 64,
            tos: 0,
            udp_checksum: false,
            allow_ipv6_zero_checksum: false,
            source_ports: DEFAULT_SOURCE_PORTS,
            destination_port: wire::UDP_PORT,
        }
    }
}

/// Largest outer header: 14 + 40 + 8 + 8 + 252 bytes.
pub const MAX_OUTER_HEADER_LEN: usize = ETHERNET_HEADER_LEN
    + IPV6_HEADER_LEN
    + UDP_HEADER_LEN
    + wire::HEADER_LEN
    + wire::MAX_OPTIONS_LEN;

/// A prebuilt outer header for one tunnel, patched per packet.
///
/// Holds a 16-bit IPv4 identification counter, so one template per thread
/// (clone it). Outer IPv4 packets carry DF, so the ID only needs to be
/// distinct enough for diagnostics (RFC 6864 §4.1).
#[derive(Debug, Clone)]
pub struct TunnelTemplate {
    bytes: [u8; MAX_OUTER_HEADER_LEN],
    len: usize,
    ipv4: bool,
    udp_checksum: bool,
    /// Sum of the IPv4 header with length, ID and checksum zero.
    ip_sum: u16,
    /// Sum of the UDP pseudo-header (without length), destination port and
    /// Geneve header: the constant part of the UDP checksum.
    udp_sum: u16,
    port_base: u16,
    port_span: u32,
    next_id: u16,
}

const IP_OFF: usize = ETHERNET_HEADER_LEN;
/// Headers up to this length take the fixed-size copy in `encapsulate`.
const FAST_HEADER_LEN: usize = 64;

impl TunnelTemplate {
    /// Builds the template.
    ///
    /// # Errors
    /// [`Error::AddressFamilyMismatch`], [`Error::Ipv6ZeroChecksum`],
    /// [`Error::BadPortRange`], [`Error::BadVni`].
    pub fn new(cfg: &TunnelConfig) -> Result<Self, Error> {
        if cfg.vni > wire::MAX_VNI {
            return Err(Error::BadVni);
        }
        if cfg.source_ports.is_empty() {
            return Err(Error::BadPortRange);
        }
        let ipv4 = match (cfg.local, cfg.remote) {
            (IpAddr::V4(_), IpAddr::V4(_)) => true,
            (IpAddr::V6(_), IpAddr::V6(_)) => false,
            _ => return Err(Error::AddressFamilyMismatch),
        };
        if !ipv4 && !cfg.udp_checksum && !cfg.allow_ipv6_zero_checksum {
            return Err(Error::Ipv6ZeroChecksum);
        }
        let mut b = [0u8; MAX_OUTER_HEADER_LEN];
        b[0..6].copy_from_slice(&cfg.dst_mac);
        b[6..12].copy_from_slice(&cfg.src_mac);
        let ip_len;
        match (cfg.local, cfg.remote) {
            (IpAddr::V4(l), IpAddr::V4(r)) => {
                put16(&mut b, 12, ETHERTYPE_IPV4);
                let ip = &mut b[IP_OFF..IP_OFF + IPV4_HEADER_LEN];
                ip[0] = 0x45;
                ip[1] = cfg.tos;
                ip[6] = 0x40; // DF
                ip[8] = cfg.ttl;
                ip[9] = IPPROTO_UDP;
                ip[12..16].copy_from_slice(&l.octets());
                ip[16..20].copy_from_slice(&r.octets());
                ip_len = IPV4_HEADER_LEN;
            }
            (IpAddr::V6(l), IpAddr::V6(r)) => {
                put16(&mut b, 12, ETHERTYPE_IPV6);
                let ip = &mut b[IP_OFF..IP_OFF + IPV6_HEADER_LEN];
                ip[0] = 0x60 | (cfg.tos >> 4);
                ip[1] = cfg.tos << 4;
                ip[6] = IPPROTO_UDP;
                ip[7] = cfg.ttl;
                ip[8..24].copy_from_slice(&l.octets());
                ip[24..40].copy_from_slice(&r.octets());
                ip_len = IPV6_HEADER_LEN;
            }
            _ => unreachable!("families checked above"),
        }
        let udp = IP_OFF + ip_len;
        put16(&mut b, udp + 2, cfg.destination_port);
        let gen = udp + UDP_HEADER_LEN;
        let repr = wire::Repr {
            control: false,
            critical: cfg.options.critical(),
            protocol_type: wire::ETHERTYPE_TEB,
            vni: cfg.vni,
            options: cfg.options.as_bytes(),
        };
        let len = gen + repr.buffer_len();
        repr.emit(&mut wire::Packet::new_unchecked(&mut b[gen..len]))?;

        let ip_sum = checksum::sum(&b[IP_OFF..IP_OFF + ip_len]);
        let pseudo = match (cfg.local, cfg.remote) {
            (IpAddr::V4(l), IpAddr::V4(r)) => {
                checksum::pseudo_header_v4(l.octets(), r.octets(), IPPROTO_UDP, 0)
            }
            (IpAddr::V6(l), IpAddr::V6(r)) => {
                checksum::pseudo_header_v6(&l.octets(), &r.octets(), IPPROTO_UDP, 0)
            }
            _ => unreachable!("families checked above"),
        };
        let udp_sum = add(
            add(pseudo, cfg.destination_port),
            checksum::sum(&b[gen..len]),
        );
        Ok(TunnelTemplate {
            bytes: b,
            len,
            ipv4,
            udp_checksum: cfg.udp_checksum,
            ip_sum,
            udp_sum,
            port_base: *cfg.source_ports.start(),
            port_span: u32::from(*cfg.source_ports.end() - *cfg.source_ports.start()) + 1,
            next_id: 0,
        })
    }

    /// Length of the outer header in bytes (50 + options over IPv4, 70 +
    /// options over IPv6): the headroom an inner frame needs.
    pub const fn header_len(&self) -> usize {
        self.len
    }

    /// Whether the underlay is IPv4.
    pub const fn is_ipv4(&self) -> bool {
        self.ipv4
    }

    /// Whether the outer UDP checksum is computed.
    pub const fn udp_checksum(&self) -> bool {
        self.udp_checksum
    }

    /// The prebuilt header bytes (lengths, ID, checksums and source port 0).
    pub fn header(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// UDP source port for an inner frame: [`flow_hash`] mapped into the
    /// configured range (RFC 8926 §3.3).
    #[inline]
    pub fn source_port(&self, inner: &[u8]) -> u16 {
        self.port_for_hash(flow_hash(inner))
    }

    #[inline]
    pub(crate) fn port_for_hash(&self, hash: u32) -> u16 {
        // Lemire's multiply-shift range reduction: uniform, no division.
        self.port_base + ((u64::from(hash) * u64::from(self.port_span)) >> 32) as u16
    }

    /// Encapsulates `inner` (an Ethernet frame) into `out`, returning the
    /// length written (`header_len() + inner.len()`).
    ///
    /// # Errors
    /// [`Error::BufferTooSmall`] if `out` is shorter than that;
    /// [`Error::TooLong`] if the outer UDP length would exceed 65535.
    #[inline]
    pub fn encapsulate(&mut self, inner: &[u8], out: &mut [u8]) -> Result<usize, Error> {
        let total = self.len + inner.len();
        if out.len() < total {
            return Err(Error::BufferTooSmall);
        }
        // Fast path for headers of at most 64 bytes (no or few options): a
        // fixed-size 64-byte template copy (a few vector moves instead of a
        // memcpy call), then the inner frame over its tail.
        if self.len <= FAST_HEADER_LEN && total >= FAST_HEADER_LEN {
            out[..FAST_HEADER_LEN].copy_from_slice(&self.bytes[..FAST_HEADER_LEN]);
            out[self.len..total].copy_from_slice(inner);
            let hash = flow_hash(inner);
            let port = self.port_for_hash(hash);
            let inner_sum = if self.udp_checksum {
                checksum::sum_fast(inner)
            } else {
                0
            };
            let (hdr, _) = out.split_at_mut(self.len);
            self.patch_header(hdr, inner.len(), port, hash, inner_sum)?;
            return Ok(total);
        }
        out[self.len..total].copy_from_slice(inner);
        self.encapsulate_in_place(&mut out[..total], inner.len())
    }

    /// Encapsulates an inner frame that already sits at
    /// `buf[header_len()..header_len() + inner_len]` (the caller left
    /// headroom), writing the outer header in front of it. Returns the total
    /// length.
    ///
    /// # Errors
    /// As [`TunnelTemplate::encapsulate`].
    #[inline]
    pub fn encapsulate_in_place(
        &mut self,
        buf: &mut [u8],
        inner_len: usize,
    ) -> Result<usize, Error> {
        let total = self.len + inner_len;
        if buf.len() < total {
            return Err(Error::BufferTooSmall);
        }
        let (hdr, rest) = buf.split_at_mut(self.len);
        let inner = &rest[..inner_len];
        let hash = flow_hash(inner);
        let port = self.port_for_hash(hash);
        let inner_sum = if self.udp_checksum {
            checksum::sum_fast(inner)
        } else {
            0
        };
        self.write_header(hdr, inner_len, port, hash, inner_sum)?;
        Ok(total)
    }

    /// Checks that an inner frame of `inner_len` bytes fits the outer
    /// 16-bit length fields.
    ///
    /// # Errors
    /// [`Error::TooLong`] otherwise.
    pub fn check_inner_len(&self, inner_len: usize) -> Result<(), Error> {
        let ip_len = if self.ipv4 { IPV4_HEADER_LEN } else { 0 };
        let udp_len = self.len
            - IP_OFF
            - if self.ipv4 {
                IPV4_HEADER_LEN
            } else {
                IPV6_HEADER_LEN
            }
            + inner_len;
        if udp_len + ip_len > 65535 {
            return Err(Error::TooLong);
        }
        Ok(())
    }

    /// The IPv4 identification the next outer header gets.
    #[inline]
    pub(crate) fn next_id(&self) -> u16 {
        self.next_id
    }

    /// Sets the IPv4 identification the next outer header gets.
    #[inline]
    pub(crate) fn set_next_id(&mut self, id: u16) {
        self.next_id = id;
    }

    /// Writes the outer header for an inner frame of `inner_len` bytes into
    /// `hdr` (exactly `header_len()` bytes). `inner_sum` is the checksum
    /// partial sum of the inner frame (used only with the UDP checksum on).
    #[inline]
    pub(crate) fn write_header(
        &mut self,
        hdr: &mut [u8],
        inner_len: usize,
        port: u16,
        hash: u32,
        inner_sum: u16,
    ) -> Result<(), Error> {
        let udp_off = if self.ipv4 {
            IP_OFF + IPV4_HEADER_LEN
        } else {
            IP_OFF + IPV6_HEADER_LEN
        };
        let udp_len = self.len - udp_off + inner_len;
        let udp_len16 = u16::try_from(udp_len).map_err(|_| Error::TooLong)?;
        hdr.copy_from_slice(&self.bytes[..self.len]);
        self.patch(hdr, udp_off, udp_len, udp_len16, port, hash, inner_sum)
    }

    /// As [`TunnelTemplate::write_header`], for a `hdr` that already holds
    /// the template bytes.
    #[inline(always)]
    pub(crate) fn patch_header(
        &mut self,
        hdr: &mut [u8],
        inner_len: usize,
        port: u16,
        hash: u32,
        inner_sum: u16,
    ) -> Result<(), Error> {
        let udp_off = if self.ipv4 {
            IP_OFF + IPV4_HEADER_LEN
        } else {
            IP_OFF + IPV6_HEADER_LEN
        };
        let udp_len = self.len - udp_off + inner_len;
        let udp_len16 = u16::try_from(udp_len).map_err(|_| Error::TooLong)?;
        self.patch(hdr, udp_off, udp_len, udp_len16, port, hash, inner_sum)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn patch(
        &mut self,
        hdr: &mut [u8],
        udp_off: usize,
        udp_len: usize,
        udp_len16: u16,
        port: u16,
        hash: u32,
        inner_sum: u16,
    ) -> Result<(), Error> {
        if self.ipv4 {
            let tot = u16::try_from(udp_len + IPV4_HEADER_LEN).map_err(|_| Error::TooLong)?;
            let id = self.next_id;
            self.next_id = id.wrapping_add(1);
            put16(hdr, IP_OFF + 2, tot);
            put16(hdr, IP_OFF + 4, id);
            put16(hdr, IP_OFF + 10, finish(add(add(self.ip_sum, tot), id)));
        } else {
            put16(hdr, IP_OFF + 4, udp_len16);
            // RFC 6438: flow label from the inner flow, for ECMP.
            let fl = hash & 0x000f_ffff;
            hdr[IP_OFF + 1] = (hdr[IP_OFF + 1] & 0xf0) | (fl >> 16) as u8;
            put16(hdr, IP_OFF + 2, fl as u16);
        }
        put16(hdr, udp_off, port);
        put16(hdr, udp_off + 4, udp_len16);
        if self.udp_checksum {
            // pseudo length + UDP length field + source port + constant part.
            let s = add(
                add(add(self.udp_sum, udp_len16), udp_len16),
                add(port, inner_sum),
            );
            let mut c = finish(s);
            if c == 0 {
                c = 0xffff; // RFC 768: 0 means "no checksum".
            }
            put16(hdr, udp_off + 6, c);
        }
        Ok(())
    }
}

/// A 32-bit hash of an inner frame's flow: the IPv4/IPv6 addresses,
/// protocol and (for TCP, UDP and SCTP, unfragmented) ports; for non-IP
/// frames the MAC addresses and EtherType. Up to two VLAN tags are skipped.
/// Deterministic across runs and hosts, so the same flow always takes the
/// same outer source port (RFC 8926 §3.3).
#[inline]
pub fn flow_hash(frame: &[u8]) -> u32 {
    let Some((et, off)) = l2(frame) else {
        return finish_hash(mix(0, frame.len() as u64));
    };
    let ip = &frame[off..];
    match et {
        ETHERTYPE_IPV4 if ip.len() >= IPV4_HEADER_LEN => {
            let proto = ip[9];
            let addrs = u64::from_be_bytes([
                ip[12], ip[13], ip[14], ip[15], ip[16], ip[17], ip[18], ip[19],
            ]);
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let unfragmented = be16(ip, 6) & 0x3fff == 0;
            let ports = ports(ip, ihl, proto, unfragmented);
            finish_hash(mix(mix(u64::from(proto), addrs), ports))
        }
        ETHERTYPE_IPV6 if ip.len() >= IPV6_HEADER_LEN => {
            let proto = ip[6];
            let mut h = u64::from(proto);
            for c in ip[8..40].chunks_exact(8) {
                h = mix(
                    h,
                    u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
                );
            }
            finish_hash(mix(h, ports(ip, IPV6_HEADER_LEN, proto, true)))
        }
        _ => {
            let a = u64::from_be_bytes([
                0, 0, frame[0], frame[1], frame[2], frame[3], frame[4], frame[5],
            ]);
            let b = u64::from_be_bytes([
                0, 0, frame[6], frame[7], frame[8], frame[9], frame[10], frame[11],
            ]);
            finish_hash(mix(mix(u64::from(et), a), b))
        }
    }
}

#[inline]
fn ports(ip: &[u8], l3: usize, proto: u8, unfragmented: bool) -> u64 {
    // TCP 6, UDP 17, SCTP 132: ports are the first 4 bytes.
    if unfragmented && matches!(proto, 6 | 17 | 132) && ip.len() >= l3 + 4 {
        u64::from(u32::from_be_bytes([
            ip[l3],
            ip[l3 + 1],
            ip[l3 + 2],
            ip[l3 + 3],
        ]))
    } else {
        0
    }
}

#[inline]
fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

#[inline]
fn finish_hash(mut h: u64) -> u32 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn inner_tcp(sport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20 + 6];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        put16(&mut f, 12, ETHERTYPE_IPV4);
        f[14] = 0x45;
        put16(&mut f, 16, 46);
        f[22] = 64;
        f[23] = 6;
        f[26..30].copy_from_slice(&[192, 168, 0, 1]);
        f[30..34].copy_from_slice(&[192, 168, 0, 2]);
        put16(&mut f, 34, sport);
        put16(&mut f, 36, 80);
        f[46] = 0x50;
        f
    }

    fn v4_template(csum: bool) -> TunnelTemplate {
        let mut c = TunnelConfig::new(
            [2, 0, 0, 0, 0, 0xaa],
            [2, 0, 0, 0, 0, 0xbb],
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            0xabcdef,
        );
        c.udp_checksum = csum;
        c.options.push(0x0102, 0x03, &[1, 2, 3, 4]).unwrap();
        TunnelTemplate::new(&c).unwrap()
    }

    #[test]
    fn ipv4_header_fields_and_checksums() {
        for csum in [false, true] {
            let mut t = v4_template(csum);
            assert_eq!(t.header_len(), 14 + 20 + 8 + 8 + 8);
            let inner = inner_tcp(1234);
            let mut out = vec![0xa5; 200];
            let n = t.encapsulate(&inner, &mut out).unwrap();
            let o = &out[..n];
            assert_eq!(n, t.header_len() + inner.len());
            assert_eq!(be16(o, 16), (n - 14) as u16, "IPv4 total length");
            assert_eq!(
                checksum::sum(&o[14..34]),
                0xffff,
                "IPv4 header checksum verifies"
            );
            assert_eq!(be16(o, 38), (n - 34) as u16, "UDP length");
            assert_eq!(be16(o, 36), 6081);
            let sport = be16(o, 34);
            assert!(sport >= 49152);
            let ucs = be16(o, 40);
            if csum {
                let ph =
                    checksum::pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, (n - 34) as u16);
                assert_eq!(
                    add(ph, checksum::sum(&o[34..])),
                    0xffff,
                    "UDP checksum verifies"
                );
            } else {
                assert_eq!(ucs, 0);
            }
            let g = wire::Packet::new_checked(&o[42..]).unwrap();
            assert_eq!(g.vni(), 0xabcdef);
            assert_eq!(g.payload(), &inner[..]);
            // Second packet: ID increments, same flow keeps its port.
            let n2 = t.encapsulate(&inner, &mut out).unwrap();
            assert_eq!(be16(&out, 18), 1);
            assert_eq!(be16(&out, 34), sport);
            assert_eq!(checksum::sum(&out[14..34]), 0xffff);
            assert_eq!(n2, n);
        }
    }

    #[test]
    fn source_ports_spread_and_stay_in_range() {
        let mut c = TunnelConfig::new(
            [0; 6],
            [0; 6],
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            1,
        );
        c.source_ports = 1000..=1007;
        let t = TunnelTemplate::new(&c).unwrap();
        let mut seen = [0u32; 8];
        for sport in 0..800u16 {
            let p = t.source_port(&inner_tcp(sport));
            assert!((1000..=1007).contains(&p));
            seen[usize::from(p - 1000)] += 1;
        }
        // 800 flows over 8 ports: each port gets a fair share.
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
    }

    #[test]
    fn ipv6_requires_checksum_unless_allowed() {
        let l = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let mut c = TunnelConfig::new([0; 6], [0; 6], l, l, 1);
        assert_eq!(
            TunnelTemplate::new(&c).unwrap_err(),
            Error::Ipv6ZeroChecksum
        );
        c.allow_ipv6_zero_checksum = true;
        assert!(TunnelTemplate::new(&c).is_ok());
        c.remote = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(
            TunnelTemplate::new(&c).unwrap_err(),
            Error::AddressFamilyMismatch
        );
    }

    #[test]
    fn ipv6_udp_checksum_verifies() {
        let l = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
        let r = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
        let mut c = TunnelConfig::new([0; 6], [0; 6], IpAddr::V6(l), IpAddr::V6(r), 7);
        c.udp_checksum = true;
        let mut t = TunnelTemplate::new(&c).unwrap();
        let inner = inner_tcp(99);
        let mut out = vec![0; 300];
        let n = t.encapsulate(&inner, &mut out).unwrap();
        assert_eq!(be16(&out, 18), (n - 54) as u16, "payload length");
        let ph = checksum::pseudo_header_v6(&l.octets(), &r.octets(), 17, (n - 54) as u32);
        assert_eq!(add(ph, checksum::sum(&out[54..n])), 0xffff);
    }

    #[test]
    fn buffer_too_small() {
        let mut t = v4_template(false);
        let mut out = [0u8; 40];
        assert_eq!(
            t.encapsulate(&inner_tcp(1), &mut out).unwrap_err(),
            Error::BufferTooSmall
        );
    }
}
