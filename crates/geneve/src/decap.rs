//! Geneve decapsulation with validation (RFC 8926 §3, §4).
//!
//! [`Decapsulator::decapsulate`] takes an outer Ethernet frame (Ethernet, up
//! to two VLAN tags, IPv4 or IPv6 without extension headers, UDP, Geneve) and
//! returns a view of the inner frame, or a [`DropReason`]. Every reason has a
//! stable index so callers can keep `[u64; DropReason::COUNT]` counters.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum::{self, add};
use crate::net::{
    be16, l2, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPPROTO_UDP, IPV4_HEADER_LEN, IPV6_HEADER_LEN,
    UDP_HEADER_LEN,
};
use crate::wire::{self, GeneveOption};

/// Why a frame was not delivered as tunnelled data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DropReason {
    /// Shorter than the headers it claims (Ethernet, IP, UDP, Geneve base
    /// header or options).
    #[error("truncated")]
    Truncated,
    /// Not IPv4/IPv6 + UDP to the Geneve port (or IPv6 with extension
    /// headers, which this decapsulator does not walk).
    #[error("not a Geneve packet")]
    NotGeneve,
    /// An outer IPv4 fragment; Geneve endpoints do not reassemble here.
    #[error("outer IPv4 fragment")]
    Fragment,
    /// Geneve version is not 0 (RFC 8926 §3.4).
    #[error("Geneve version is not 0")]
    BadVersion,
    /// IP total/payload length, UDP length and Geneve `Opt Len` disagree
    /// with each other or with the frame.
    #[error("length fields disagree")]
    LengthMismatch,
    /// An option runs past the options area (RFC 8926 §3.5).
    #[error("malformed Geneve option")]
    BadOption,
    /// An option with the critical bit set that the registry does not know
    /// (RFC 8926 §3.5: MUST drop).
    #[error("unknown critical Geneve option")]
    UnknownCriticalOption,
    /// O bit set: a control packet, not forwarded as data (RFC 8926 §3.4).
    #[error("control (OAM) packet")]
    ControlPacket,
    /// Outer IPv4 header checksum does not verify.
    #[error("bad outer IPv4 header checksum")]
    BadIpv4Checksum,
    /// Outer UDP checksum present and does not verify.
    #[error("bad outer UDP checksum")]
    BadUdpChecksum,
    /// Zero UDP checksum over IPv6 without allowing it (RFC 6935, RFC 6936).
    #[error("zero UDP checksum over IPv6 not allowed")]
    ZeroUdpChecksumIpv6,
}

impl DropReason {
    /// Number of reasons, for counter arrays.
    pub const COUNT: usize = 11;
    /// All reasons, in [`DropReason::index`] order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::Truncated,
        DropReason::NotGeneve,
        DropReason::Fragment,
        DropReason::BadVersion,
        DropReason::LengthMismatch,
        DropReason::BadOption,
        DropReason::UnknownCriticalOption,
        DropReason::ControlPacket,
        DropReason::BadIpv4Checksum,
        DropReason::BadUdpChecksum,
        DropReason::ZeroUdpChecksumIpv6,
    ];

    /// Stable index in `0..COUNT`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A short snake_case name for metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::NotGeneve => "not_geneve",
            DropReason::Fragment => "fragment",
            DropReason::BadVersion => "bad_version",
            DropReason::LengthMismatch => "length_mismatch",
            DropReason::BadOption => "bad_option",
            DropReason::UnknownCriticalOption => "unknown_critical_option",
            DropReason::ControlPacket => "control_packet",
            DropReason::BadIpv4Checksum => "bad_ipv4_checksum",
            DropReason::BadUdpChecksum => "bad_udp_checksum",
            DropReason::ZeroUdpChecksumIpv6 => "zero_udp_checksum_ipv6",
        }
    }
}

/// The options this endpoint understands, keyed by (class, 8-bit type with
/// the critical bit). Only critical options are looked up (RFC 8926 §3.5:
/// unknown non-critical options are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionRegistry {
    known: Vec<(u16, u8)>,
}

impl OptionRegistry {
    /// An empty registry: every critical option is unknown.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an option (class, type including the critical bit).
    pub fn insert(&mut self, class: u16, option_type: u8) -> &mut Self {
        if !self.contains(class, option_type) {
            self.known.push((class, option_type));
        }
        self
    }

    /// Whether an option is known.
    #[inline]
    pub fn contains(&self, class: u16, option_type: u8) -> bool {
        self.known
            .iter()
            .any(|&(c, t)| c == class && t == option_type)
    }
}

/// Decapsulation settings.
#[derive(Debug, Clone)]
pub struct Decapsulator {
    /// Known options; an unknown critical option drops the packet.
    pub registry: OptionRegistry,
    /// UDP destination port that marks Geneve. Default 6081.
    pub udp_port: u16,
    /// Verify the outer IPv4 header checksum and a non-zero UDP checksum.
    /// Default true; turn off when the NIC has verified them.
    pub verify_checksums: bool,
    /// Accept a zero UDP checksum over IPv6 (RFC 6935/6936). Default false.
    pub allow_ipv6_zero_checksum: bool,
    /// Accept a UDP checksum field that holds only the pseudo-header's sum: a frame
    /// whose checksum a local sender left to offload (Linux CHECKSUM_PARTIAL), read
    /// before anything completed it (AF_XDP or a packet socket on a veth whose peer
    /// is a kernel stack). Such a frame's addresses and length are still verified; its
    /// payload is not, as with a zero checksum (RFC 8926 §3.3 makes verification a
    /// MAY). Default false.
    pub accept_partial_checksum: bool,
}

impl Default for Decapsulator {
    fn default() -> Self {
        Decapsulator {
            registry: OptionRegistry::new(),
            udp_port: wire::UDP_PORT,
            verify_checksums: true,
            allow_ipv6_zero_checksum: false,
            accept_partial_checksum: false,
        }
    }
}

/// A decapsulated packet: views into the original frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decapsulated<'a> {
    /// Outer IP source (the remote TEP).
    pub outer_src: IpAddr,
    /// Outer IP destination (the local TEP).
    pub outer_dst: IpAddr,
    /// Outer UDP source port (the sender's flow entropy).
    pub udp_src_port: u16,
    /// VNI (24 bits).
    pub vni: u32,
    /// Protocol type of the payload. [`wire::ETHERTYPE_TEB`] is Ethernet;
    /// any other is reported, not dropped: the caller decides.
    pub protocol_type: u16,
    /// The C bit as sent.
    pub critical: bool,
    /// The options area (validated; iterate with [`wire::OptionIter`]).
    pub options: &'a [u8],
    /// The inner frame (up to the end of the outer UDP datagram; outer
    /// Ethernet padding excluded).
    pub inner: &'a [u8],
    /// Offset of `inner` in the outer frame, in bytes.
    pub inner_offset: usize,
}

impl Decapsulator {
    /// Validates an outer frame and returns the inner frame.
    ///
    /// Checks, in order: Ethernet/IP/UDP headers present; IPv4 header
    /// checksum (if verifying); not an IPv4 fragment; UDP to `udp_port`;
    /// IP and UDP lengths agree with each other and the frame; UDP checksum
    /// (if non-zero and verifying; zero over IPv6 only if allowed); Geneve
    /// version 0; `Opt Len` within the UDP payload; options well formed;
    /// no unknown critical option; O bit clear.
    ///
    /// # Errors
    /// The [`DropReason`] of the first check that fails.
    #[inline]
    pub fn decapsulate<'a>(&self, frame: &'a [u8]) -> Result<Decapsulated<'a>, DropReason> {
        let (et, off) = l2(frame).ok_or(DropReason::Truncated)?;
        let ip = &frame[off..];
        let (udp_off, ip_end, outer_src, outer_dst);
        match et {
            ETHERTYPE_IPV4 => {
                if ip.len() < IPV4_HEADER_LEN {
                    return Err(DropReason::Truncated);
                }
                if ip[0] >> 4 != 4 {
                    return Err(DropReason::NotGeneve);
                }
                let ihl = usize::from(ip[0] & 0xf) * 4;
                if ihl < IPV4_HEADER_LEN || ip.len() < ihl {
                    return Err(DropReason::Truncated);
                }
                let tot = usize::from(be16(ip, 2));
                if tot < ihl || tot > ip.len() {
                    return Err(DropReason::LengthMismatch);
                }
                let hsum = match <&[u8; 20]>::try_from(&ip[..ihl]) {
                    Ok(h) => checksum::sum20(h),
                    Err(_) => checksum::sum(&ip[..ihl]),
                };
                if self.verify_checksums && hsum != 0xffff {
                    return Err(DropReason::BadIpv4Checksum);
                }
                if be16(ip, 6) & 0x3fff != 0 {
                    return Err(DropReason::Fragment);
                }
                if ip[9] != IPPROTO_UDP {
                    return Err(DropReason::NotGeneve);
                }
                let s = [ip[12], ip[13], ip[14], ip[15]];
                let d = [ip[16], ip[17], ip[18], ip[19]];
                outer_src = IpAddr::V4(Ipv4Addr::from(s));
                outer_dst = IpAddr::V4(Ipv4Addr::from(d));
                udp_off = off + ihl;
                ip_end = off + tot;
            }
            ETHERTYPE_IPV6 => {
                if ip.len() < IPV6_HEADER_LEN {
                    return Err(DropReason::Truncated);
                }
                if ip[0] >> 4 != 6 || ip[6] != IPPROTO_UDP {
                    return Err(DropReason::NotGeneve);
                }
                let plen = usize::from(be16(ip, 4));
                if IPV6_HEADER_LEN + plen > ip.len() {
                    return Err(DropReason::LengthMismatch);
                }
                let mut s = [0u8; 16];
                let mut d = [0u8; 16];
                s.copy_from_slice(&ip[8..24]);
                d.copy_from_slice(&ip[24..40]);
                outer_src = IpAddr::V6(Ipv6Addr::from(s));
                outer_dst = IpAddr::V6(Ipv6Addr::from(d));
                udp_off = off + IPV6_HEADER_LEN;
                ip_end = udp_off + plen;
            }
            _ => return Err(DropReason::NotGeneve),
        }
        let udp = &frame[udp_off..ip_end];
        if udp.len() < UDP_HEADER_LEN {
            return Err(DropReason::Truncated);
        }
        if be16(udp, 2) != self.udp_port {
            return Err(DropReason::NotGeneve);
        }
        let udp_len = be16(udp, 4);
        if usize::from(udp_len) != udp.len() {
            return Err(DropReason::LengthMismatch);
        }
        let ucs = be16(udp, 6);
        if ucs == 0 {
            if !outer_src.is_ipv4() && !self.allow_ipv6_zero_checksum {
                return Err(DropReason::ZeroUdpChecksumIpv6);
            }
        } else if self.verify_checksums {
            // Pseudo-header (without length) computed only when needed.
            let pseudo = match (outer_src, outer_dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => {
                    checksum::pseudo_header_v4(s.octets(), d.octets(), IPPROTO_UDP, 0)
                }
                (IpAddr::V6(s), IpAddr::V6(d)) => {
                    checksum::pseudo_header_v6(&s.octets(), &d.octets(), IPPROTO_UDP, 0)
                }
                _ => unreachable!("both addresses come from one IP header"),
            };
            let header = add(pseudo, udp_len);
            if add(header, checksum::sum_fast(udp)) != 0xffff
                && !(self.accept_partial_checksum && same_sum(ucs, header))
            {
                return Err(DropReason::BadUdpChecksum);
            }
        }
        let g = decapsulate_payload(&self.registry, &udp[UDP_HEADER_LEN..])?;
        let inner_offset = udp_off + UDP_HEADER_LEN + g.inner_offset;
        Ok(Decapsulated {
            outer_src,
            outer_dst,
            udp_src_port: be16(udp, 0),
            vni: g.vni,
            protocol_type: g.protocol_type,
            critical: g.critical,
            options: g.options,
            inner: g.inner,
            inner_offset,
        })
    }

    /// Validates a Geneve UDP payload (the Geneve header, its options and
    /// the inner frame, as a UDP socket bound to port 6081 receives it) and
    /// returns the inner frame.
    ///
    /// For a switch whose tunnel endpoint is a kernel UDP socket: the kernel
    /// has already checked the outer IP and UDP headers, lengths and the
    /// UDP checksum, and delivers only the datagram's payload, which
    /// [`Decapsulator::decapsulate`] (a whole outer frame) cannot take.
    /// Checks, in order: the 8-byte Geneve header present; version 0;
    /// `Opt Len` within the payload; options well formed (RFC 8926 §3.5);
    /// no critical option missing from [`Decapsulator::registry`]; O bit
    /// clear. `udp_port`, `verify_checksums` and `allow_ipv6_zero_checksum`
    /// do not apply (the socket's port and the kernel decided those).
    ///
    /// # Errors
    /// The [`DropReason`] of the first check that fails: `Truncated`,
    /// `BadVersion`, `LengthMismatch`, `BadOption`, `UnknownCriticalOption`,
    /// `ControlPacket`.
    #[inline]
    pub fn decapsulate_payload<'a>(
        &self,
        payload: &'a [u8],
    ) -> Result<GenevePayload<'a>, DropReason> {
        decapsulate_payload(&self.registry, payload)
    }
}

/// A validated Geneve UDP payload ([`Decapsulator::decapsulate_payload`]):
/// views into the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenevePayload<'a> {
    /// VNI (24 bits).
    pub vni: u32,
    /// Protocol type of the payload. [`wire::ETHERTYPE_TEB`] is Ethernet;
    /// any other is reported, not dropped: the caller decides.
    pub protocol_type: u16,
    /// The C bit as sent.
    pub critical: bool,
    /// The options area (validated; iterate with [`wire::OptionIter`]).
    pub options: &'a [u8],
    /// The inner frame: everything after the Geneve header and options.
    pub inner: &'a [u8],
    /// Offset of `inner` in the payload, in bytes (8 + options length).
    pub inner_offset: usize,
}

/// The Geneve part of decapsulation, shared by both entry points.
#[inline]
fn decapsulate_payload<'a>(
    registry: &OptionRegistry,
    g: &'a [u8],
) -> Result<GenevePayload<'a>, DropReason> {
    if g.len() < wire::HEADER_LEN {
        return Err(DropReason::Truncated);
    }
    let p = wire::Packet::new_unchecked(g);
    if p.version() != 0 {
        return Err(DropReason::BadVersion);
    }
    if p.header_len() > g.len() {
        return Err(DropReason::LengthMismatch);
    }
    let options = &g[wire::HEADER_LEN..p.header_len()];
    let mut rest = options;
    while !rest.is_empty() {
        let o = GeneveOption::new_checked(rest).map_err(|_| DropReason::BadOption)?;
        if o.critical() && !registry.contains(o.class(), o.option_type()) {
            return Err(DropReason::UnknownCriticalOption);
        }
        rest = &rest[o.total_len()..];
    }
    if p.control() {
        return Err(DropReason::ControlPacket);
    }
    Ok(GenevePayload {
        vni: p.vni(),
        protocol_type: p.protocol_type(),
        critical: p.critical(),
        options,
        inner: &g[p.header_len()..],
        inner_offset: p.header_len(),
    })
}

/// Whether checksum field `field` holds ones' complement sum `sum` (0 and 0xffff are
/// the same number).
#[inline]
fn same_sum(field: u16, sum: u16) -> bool {
    let norm = |v: u16| if v == 0xffff { 0 } else { v };
    norm(field) == norm(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encap::{TunnelConfig, TunnelTemplate};
    use crate::net::put16;

    fn template(csum: bool, opts: &[(u16, u8, &[u8])]) -> TunnelTemplate {
        let mut c = TunnelConfig::new(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            42,
        );
        c.udp_checksum = csum;
        for (cl, t, d) in opts {
            c.options.push(*cl, *t, d).unwrap();
        }
        TunnelTemplate::new(&c).unwrap()
    }

    fn encap(t: &mut TunnelTemplate) -> Vec<u8> {
        let inner: Vec<u8> = (0..100u8).collect();
        let mut out = vec![0; 400];
        let n = t.encapsulate(&inner, &mut out).unwrap();
        out.truncate(n);
        out
    }

    #[test]
    fn roundtrip() {
        let mut t = template(true, &[(0x0102, 0x03, &[9, 9, 9, 9])]);
        let f = encap(&mut t);
        let d = Decapsulator::default().decapsulate(&f).unwrap();
        assert_eq!(d.vni, 42);
        assert_eq!(d.inner, &(0..100u8).collect::<Vec<_>>()[..]);
        assert_eq!(d.protocol_type, wire::ETHERTYPE_TEB);
        assert_eq!(d.options.len(), 8);
        assert_eq!(d.outer_src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        // Ethernet padding after the IP packet is not part of the inner frame.
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 10]);
        assert_eq!(
            Decapsulator::default()
                .decapsulate(&padded)
                .unwrap()
                .inner
                .len(),
            100
        );
    }

    #[test]
    fn payload_of_a_udp_socket() {
        let mut t = template(false, &[(0x0102, 0x03, &[9, 9, 9, 9])]);
        let f = encap(&mut t);
        let dec = Decapsulator::default();
        let whole = dec.decapsulate(&f).unwrap();
        // A UDP socket receives what follows the 8-byte UDP header.
        let udp_payload = &f[14 + 20 + 8..];
        let p = dec.decapsulate_payload(udp_payload).unwrap();
        assert_eq!(
            (p.vni, p.protocol_type, p.critical, p.options, p.inner),
            (
                whole.vni,
                whole.protocol_type,
                whole.critical,
                whole.options,
                whole.inner
            )
        );
        assert_eq!(p.inner_offset, 8 + 8);
        assert_eq!(&udp_payload[p.inner_offset..], p.inner);

        let check = |g: &[u8], r: DropReason| {
            assert_eq!(dec.decapsulate_payload(g).unwrap_err(), r, "{}", r.as_str())
        };
        check(&udp_payload[..7], DropReason::Truncated);
        check(&udp_payload[..12], DropReason::LengthMismatch);
        let mut g = udp_payload.to_vec();
        g[0] |= 0x40; // version 1
        check(&g, DropReason::BadVersion);
        let mut g = udp_payload.to_vec();
        g[1] |= 0x80; // O bit
        check(&g, DropReason::ControlPacket);
        let mut g = udp_payload.to_vec();
        g[8 + 3] = 0x04; // option length 4 words: runs past the options area
        check(&g, DropReason::BadOption);
        let mut g = udp_payload.to_vec();
        g[8 + 2] |= 0x80; // the option becomes critical, and it is unknown
        check(&g, DropReason::UnknownCriticalOption);
        let mut known = Decapsulator::default();
        known.registry.insert(0x0102, 0x83);
        assert!(known.decapsulate_payload(&g).is_ok());
    }

    #[test]
    fn each_drop_reason() {
        let dec = Decapsulator::default();
        let mut t = template(true, &[]);
        let good = encap(&mut t);
        let check = |f: &[u8], r: DropReason| {
            assert_eq!(dec.decapsulate(f).unwrap_err(), r, "{}", r.as_str())
        };

        check(&good[..10], DropReason::Truncated);
        check(&good[..30], DropReason::Truncated);
        let mut f = good.clone();
        f[24] ^= 1; // TTL: breaks IPv4 checksum
        check(&f, DropReason::BadIpv4Checksum);
        let mut f = good.clone();
        put16(&mut f, 36, 4789); // VXLAN port
        check(&f, DropReason::NotGeneve);
        let mut f = good.clone();
        f[50] ^= 0xff; // payload byte: breaks UDP checksum
        check(&f, DropReason::BadUdpChecksum);
        let mut f = good.clone();
        put16(&mut f, 38, 20); // UDP length
        check(&f, DropReason::LengthMismatch);
        check(&good[..good.len() - 1], DropReason::LengthMismatch);

        let dec_nocsum = Decapsulator {
            verify_checksums: false,
            ..Decapsulator::default()
        };
        let mut f = good.clone();
        f[42] |= 0x40; // version 1
        assert_eq!(
            dec_nocsum.decapsulate(&f).unwrap_err(),
            DropReason::BadVersion
        );
        let mut f = good.clone();
        f[43] |= 0x80; // O bit
        assert_eq!(
            dec_nocsum.decapsulate(&f).unwrap_err(),
            DropReason::ControlPacket
        );
        let mut f = good.clone();
        f[42] = 0x3f; // Opt Len 252 bytes, beyond the payload
        let mut short = f.clone();
        short.truncate(42 + 8 + 20);
        let n = short.len();
        put16(&mut short, 16, (n - 14) as u16);
        put16(&mut short, 38, (n - 34) as u16);
        assert_eq!(
            dec_nocsum.decapsulate(&short).unwrap_err(),
            DropReason::LengthMismatch
        );
        let mut f = good.clone();
        put16(&mut f, 20, 0x2000); // MF
        assert_eq!(
            dec_nocsum.decapsulate(&f).unwrap_err(),
            DropReason::Fragment
        );
    }

    #[test]
    fn critical_options_and_registry() {
        let mut t = template(false, &[(0x0102, 0x83, &[1, 2, 3, 4]), (0x0103, 0x01, &[])]);
        let f = encap(&mut t);
        let mut dec = Decapsulator::default();
        assert_eq!(
            dec.decapsulate(&f).unwrap_err(),
            DropReason::UnknownCriticalOption
        );
        dec.registry.insert(0x0102, 0x83);
        let d = dec.decapsulate(&f).unwrap();
        assert!(d.critical);
        assert_eq!(wire::OptionIter::new(d.options).count(), 2);
        // Option length overrunning the options area.
        let mut bad = f.clone();
        bad[42 + 8 + 3] = 0x05;
        assert_eq!(dec.decapsulate(&bad).unwrap_err(), DropReason::BadOption);
    }

    #[test]
    fn ipv6_zero_checksum_policy() {
        let l = Ipv6Addr::LOCALHOST;
        let mut c = TunnelConfig::new([0; 6], [0; 6], IpAddr::V6(l), IpAddr::V6(l), 3);
        c.allow_ipv6_zero_checksum = true;
        let mut t = TunnelTemplate::new(&c).unwrap();
        let f = encap(&mut t);
        assert_eq!(
            Decapsulator::default().decapsulate(&f).unwrap_err(),
            DropReason::ZeroUdpChecksumIpv6
        );
        let dec = Decapsulator {
            allow_ipv6_zero_checksum: true,
            ..Decapsulator::default()
        };
        assert_eq!(dec.decapsulate(&f).unwrap().vni, 3);
    }

    /// A checksum field holding the pseudo-header's sum (what Linux leaves for
    /// offload) passes only when allowed; a field naming other addresses does not.
    #[test]
    fn partial_checksum_policy() {
        let mut t = template(true, &[]);
        let mut f = encap(&mut t);
        let udp_len = (f.len() - 34) as u16;
        let pseudo = checksum::pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 0);
        f[40..42].copy_from_slice(&add(pseudo, udp_len).to_be_bytes());
        let strict = Decapsulator::default();
        assert_eq!(
            strict.decapsulate(&f).unwrap_err(),
            DropReason::BadUdpChecksum
        );
        let lenient = Decapsulator {
            accept_partial_checksum: true,
            ..Decapsulator::default()
        };
        assert_eq!(lenient.decapsulate(&f).unwrap().vni, 42);
        let other = checksum::pseudo_header_v4([10, 0, 0, 9], [10, 0, 0, 2], 17, 0);
        f[40..42].copy_from_slice(&add(other, udp_len).to_be_bytes());
        assert_eq!(
            lenient.decapsulate(&f).unwrap_err(),
            DropReason::BadUdpChecksum
        );
    }

    #[test]
    fn reason_indices_are_stable() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }
}
