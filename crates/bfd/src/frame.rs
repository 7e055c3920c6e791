//! The inner frame Open vSwitch sends BFD in over a tunnel: Ethernet, IPv4,
//! UDP (RFC 5881), then the 24-byte Control packet. 66 bytes in all.
//!
//! Open vSwitch builds it in `lib/bfd.c` (`bfd_put_packet`) and hands it to
//! the tunnel port as if it came from nowhere: with `options:key=flow` (what
//! ovn-controller sets) the tunnel key, so the Geneve VNI, is 0, the Geneve
//! header carries no options, and the O bit is set only with `bfd:oam=true`.
//! The frame's fields, with the `Interface.bfd` keys that change them:
//!
//! | field | value | key |
//! |---|---|---|
//! | Ethernet destination | 00:23:20:00:00:01 ([`BFD_DST_MAC`]) | `bfd_local_dst_mac` |
//! | Ethernet source | the tunnel port's MAC (random per vport) | `bfd_local_src_mac` |
//! | IPv4 source / destination | 169.254.1.1 / 169.254.1.0 | `bfd_src_ip` / `bfd_dst_ip` |
//! | IPv4 TOS, TTL, ID, flags | 0xc0 (Internet control), 255, 0, none | |
//! | UDP source port | 49152 + (n mod 16384), n counting sessions from 0 | |
//! | UDP destination port | 3784 | |
//! | UDP checksum | Open vSwitch: 0 (none); this crate computes it | |
//!
//! On receive, Open vSwitch takes a frame from the tunnel for BFD
//! (`bfd_should_process_flow`) when it is IPv4, UDP, not a later fragment,
//! to port 3784, and, only if configured: to Ethernet destination
//! `bfd_remote_dst_mac`; to IPv4 destination `bfd_src_ip` (when that is not
//! the default); with tunnel key 0 (`check_tnl_key`). Such a frame is
//! consumed, never forwarded, even when it is then dropped: its TTL must be
//! 255 (RFC 5881 §5) and its payload a valid Control packet.
//! [`FrameConfig::recognise`] returns `None` for "not BFD, forward it" and
//! `Some(result)` for "BFD: process or drop".

use std::net::Ipv4Addr;

use crate::wire::{ControlPacket, PACKET_LEN};
use crate::Error;

/// Open vSwitch's default Ethernet destination of BFD frames
/// (`eth_addr_bfd` in `lib/packets.h`).
pub const BFD_DST_MAC: [u8; 6] = [0x00, 0x23, 0x20, 0x00, 0x00, 0x01];

/// Open vSwitch's default IPv4 source, 169.254.1.1 (`BFD_DEFAULT_SRC_IP`).
pub const DEFAULT_SRC_IP: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);

/// Open vSwitch's default IPv4 destination, 169.254.1.0
/// (`BFD_DEFAULT_DST_IP`).
pub const DEFAULT_DST_IP: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 0);

/// UDP destination port of single-hop BFD Control packets (RFC 5881 §4).
pub const UDP_PORT: u16 = 3784;

/// First UDP source port of BFD sessions (RFC 5881 §4: 49152–65535).
pub const SOURCE_PORT_MIN: u16 = 49152;

/// TTL of sent frames; received frames must carry it (RFC 5881 §5).
pub const TTL: u8 = 255;

/// IPv4 TOS of sent frames: precedence Internet control
/// (`IPTOS_PREC_INTERNETCONTROL`), as Open vSwitch.
pub const TOS: u8 = 0xc0;

/// Length of the frame [`FrameConfig::emit`] writes, in bytes: Ethernet 14,
/// IPv4 20, UDP 8, Control packet 24.
pub const FRAME_LEN: usize = ETH_LEN + IP_LEN + UDP_LEN + PACKET_LEN;

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;
const ETHERTYPE_IPV4: u16 = 0x0800;
const PROTO_UDP: u8 = 17;

/// How one session's frames are addressed, and which received frames are
/// its: the `Interface.bfd` keys of Open vSwitch that concern the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameConfig {
    /// Ethernet source; `None` uses the port's MAC given to
    /// [`FrameConfig::emit`] (`bfd_local_src_mac`).
    pub local_src_mac: Option<[u8; 6]>,
    /// Ethernet destination of sent frames (`bfd_local_dst_mac`; default
    /// [`BFD_DST_MAC`]).
    pub local_dst_mac: [u8; 6],
    /// When set, received frames must be sent to this Ethernet address
    /// (`bfd_remote_dst_mac`; default unset).
    pub remote_dst_mac: Option<[u8; 6]>,
    /// IPv4 source of sent frames; when not [`DEFAULT_SRC_IP`], received
    /// frames must be sent to it (`bfd_src_ip`).
    pub src_ip: Ipv4Addr,
    /// IPv4 destination of sent frames (`bfd_dst_ip`; default
    /// [`DEFAULT_DST_IP`]).
    pub dst_ip: Ipv4Addr,
    /// UDP source port of sent frames, the same for the session's life
    /// (RFC 5881 §4); see [`FrameConfig::source_port`].
    pub udp_src_port: u16,
    /// Received frames must have come with tunnel key (VNI) 0
    /// (`check_tnl_key`; default false).
    pub check_tnl_key: bool,
}

impl Default for FrameConfig {
    /// Open vSwitch's defaults, UDP source port 49152 (its first session's).
    fn default() -> Self {
        FrameConfig {
            local_src_mac: None,
            local_dst_mac: BFD_DST_MAC,
            remote_dst_mac: None,
            src_ip: DEFAULT_SRC_IP,
            dst_ip: DEFAULT_DST_IP,
            udp_src_port: SOURCE_PORT_MIN,
            check_tnl_key: false,
        }
    }
}

impl FrameConfig {
    /// The UDP source port of the `n`th session created (from 0), as Open
    /// vSwitch picks it: 49152 + (n mod 16384), so unique among 16384
    /// sessions (RFC 5881 §4 "SHOULD be unique").
    pub const fn source_port(n: u32) -> u16 {
        SOURCE_PORT_MIN + (n % 16384) as u16
    }

    /// Writes the 66-byte frame carrying `packet` to the start of `buf`,
    /// with `port_mac` as Ethernet source unless
    /// [`FrameConfig::local_src_mac`] is set; returns its length
    /// ([`FRAME_LEN`]). IPv4 and UDP checksums are complete.
    ///
    /// # Errors
    /// [`Error::BufferTooSmall`] when `buf` is shorter than [`FRAME_LEN`].
    pub fn emit(
        &self,
        port_mac: [u8; 6],
        packet: &ControlPacket,
        buf: &mut [u8],
    ) -> Result<usize, Error> {
        let buf = buf.get_mut(..FRAME_LEN).ok_or(Error::BufferTooSmall)?;
        let (eth, rest) = buf.split_at_mut(ETH_LEN);
        eth[0..6].copy_from_slice(&self.local_dst_mac);
        eth[6..12].copy_from_slice(&self.local_src_mac.unwrap_or(port_mac));
        eth[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());

        let (ip, rest) = rest.split_at_mut(IP_LEN);
        let total = (IP_LEN + UDP_LEN + PACKET_LEN) as u16;
        ip.fill(0);
        ip[0] = 0x45;
        ip[1] = TOS;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[8] = TTL;
        ip[9] = PROTO_UDP;
        ip[12..16].copy_from_slice(&self.src_ip.octets());
        ip[16..20].copy_from_slice(&self.dst_ip.octets());
        let sum = fold(sum(0, ip));
        ip[10..12].copy_from_slice(&(!sum).to_be_bytes());

        let (udp, payload) = rest.split_at_mut(UDP_LEN);
        let udp_len = (UDP_LEN + PACKET_LEN) as u16;
        udp[0..2].copy_from_slice(&self.udp_src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&UDP_PORT.to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        udp[6..8].fill(0);
        packet.encode(payload)?;
        let csum = udp_checksum(self.src_ip, self.dst_ip, udp, payload);
        udp[6..8].copy_from_slice(&csum.to_be_bytes());
        Ok(FRAME_LEN)
    }

    /// Whether a frame received on the tunnel is BFD for this session and,
    /// if so, its Control packet. `tunnel_key` is the key (Geneve VNI) it
    /// came with.
    ///
    /// `None`: not BFD (not IPv4/UDP to port 3784, a later fragment, or
    /// excluded by [`FrameConfig::remote_dst_mac`],
    /// [`FrameConfig::src_ip`] or [`FrameConfig::check_tnl_key`], as
    /// `bfd_should_process_flow`); the frame is the data path's. IPv4
    /// options are skipped; VLAN tags are not (a tunnel carries none).
    ///
    /// `Some(Err)`: BFD to be dropped. Beyond Open vSwitch, which verifies
    /// no checksum, a bad IPv4 header checksum or a non-zero, bad UDP
    /// checksum drops it too.
    ///
    /// # Errors
    /// In order: [`Error::BadTtl`] (not 255, RFC 5881 §5),
    /// [`Error::BadIpChecksum`], [`Error::Truncated`] (IPv4 or UDP length
    /// beyond the frame, or a UDP payload shorter than its Control packet),
    /// [`Error::BadUdpChecksum`], then those of
    /// [`ControlPacket::parse`].
    pub fn recognise(&self, frame: &[u8], tunnel_key: u64) -> Option<Result<ControlPacket, Error>> {
        if frame.len() < ETH_LEN + IP_LEN {
            return None;
        }
        if self.remote_dst_mac.is_some_and(|m| frame[0..6] != m) {
            return None;
        }
        if u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4 {
            return None;
        }
        let ip = &frame[ETH_LEN..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if ip[0] >> 4 != 4 || ihl < IP_LEN || ip.len() < ihl + UDP_LEN || ip[9] != PROTO_UDP {
            return None;
        }
        let later_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff != 0;
        let udp = &ip[ihl..];
        if later_fragment || u16::from_be_bytes([udp[2], udp[3]]) != UDP_PORT {
            return None;
        }
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        if self.src_ip != DEFAULT_SRC_IP && dst != self.src_ip {
            return None;
        }
        if self.check_tnl_key && tunnel_key != 0 {
            return None;
        }
        Some(control_packet(ip, ihl))
    }
}

/// The BFD checks of a frame [`FrameConfig::recognise`] took: `ip` from the
/// IPv4 header on, `ihl` its header length (≥ 20, with 8 UDP bytes after).
fn control_packet(ip: &[u8], ihl: usize) -> Result<ControlPacket, Error> {
    if ip[8] != TTL {
        return Err(Error::BadTtl);
    }
    if fold(sum(0, &ip[..ihl])) != 0xffff {
        return Err(Error::BadIpChecksum);
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if total < ihl + UDP_LEN || total > ip.len() {
        return Err(Error::Truncated);
    }
    let udp = &ip[ihl..total];
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < UDP_LEN || udp_len > udp.len() {
        return Err(Error::Truncated);
    }
    let (udp, payload) = udp[..udp_len].split_at(UDP_LEN);
    if udp[6..8] != [0, 0] {
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        // A correct checksum makes the sum over everything, its field
        // included, 0xffff (RFC 768, RFC 1071).
        let mut s = pseudo_header_sum(src, dst, udp_len as u16);
        s = sum(sum(s, udp), payload);
        if fold(s) != 0xffff {
            return Err(Error::BadUdpChecksum);
        }
    }
    ControlPacket::decode(payload)
}

/// The UDP checksum (RFC 768) of `udp` (its checksum field zero) and
/// `payload` between `src` and `dst`; 0xffff stands for 0.
fn udp_checksum(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8], payload: &[u8]) -> u16 {
    let len = (udp.len() + payload.len()) as u16;
    let s = sum(sum(pseudo_header_sum(src, dst, len), udp), payload);
    match !fold(s) {
        0 => 0xffff,
        c => c,
    }
}

fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, udp_len: u16) -> u32 {
    let s = sum(sum(0, &src.octets()), &dst.octets());
    s + u32::from(PROTO_UDP) + u32::from(udp_len)
}

/// Adds `bytes` as big-endian 16-bit words (odd tail padded with zero) to
/// `acc` (RFC 1071). Frames here are under 64 KiB, so no overflow.
fn sum(acc: u32, bytes: &[u8]) -> u32 {
    let mut words = bytes.chunks_exact(2);
    let mut s = acc;
    for w in &mut words {
        s += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        s += u32::from(*last) << 8;
    }
    s
}

/// Folds a 32-bit sum to 16 bits, end-around carry (RFC 1071).
fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Diagnostic, State};

    const PORT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];

    fn packet() -> ControlPacket {
        ControlPacket {
            diag: Diagnostic::None,
            state: State::Down,
            poll: false,
            final_: false,
            control_plane_independent: false,
            demand: false,
            detect_mult: 3,
            my_discriminator: 0x1234_5678,
            your_discriminator: 0,
            desired_min_tx_us: 1_000_000,
            required_min_rx_us: 1_000_000,
            required_min_echo_rx_us: 0,
        }
    }

    /// The frame Open vSwitch would send for `packet()` from a port with
    /// MAC 02:00:00:00:00:0a, plus the UDP checksum it leaves at 0.
    fn fixture() -> [u8; FRAME_LEN] {
        let mut f = [0u8; FRAME_LEN];
        f[..14].copy_from_slice(&[
            0x00, 0x23, 0x20, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0, 0x0a, 0x08, 0x00,
        ]);
        f[14..34].copy_from_slice(&[
            0x45, 0xc0, 0x00, 0x34, 0, 0, 0, 0, 0xff, 0x11, 0, 0, 169, 254, 1, 1, 169, 254, 1, 0,
        ]);
        f[34..42].copy_from_slice(&[0xc0, 0x00, 0x0e, 0xc8, 0x00, 0x20, 0, 0]);
        packet().encode(&mut f[42..]).unwrap();
        let c = !fold(sum(0, &f[14..34]));
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn emit_matches_ovs_frame_and_checksums_verify() {
        let mut buf = [0xa5u8; 80];
        let n = FrameConfig::default()
            .emit(PORT_MAC, &packet(), &mut buf)
            .unwrap();
        assert_eq!(n, FRAME_LEN);
        let mut expect = fixture();
        expect[40..42].copy_from_slice(&buf[40..42]);
        assert_eq!(buf[..n], expect[..]);
        assert_ne!(&buf[40..42], &[0, 0]);

        // etherparse as an independent oracle of both checksums.
        let p = etherparse::SlicedPacket::from_ethernet(&buf[..n]).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
            panic!("not IPv4")
        };
        let h = ip.header().to_header();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        assert_eq!(
            (h.time_to_live, h.dscp.value(), h.ecn.value()),
            (255, 0x30, 0)
        );
        let Some(etherparse::TransportSlice::Udp(udp)) = p.transport else {
            panic!("not UDP")
        };
        let uh = udp.to_header();
        let c = uh.calc_checksum_ipv4(&h, udp.payload()).unwrap();
        assert_eq!(uh.checksum, c);
        assert_eq!((uh.source_port, uh.destination_port), (49152, 3784));
    }

    #[test]
    fn emit_needs_room_and_honours_local_src_mac() {
        let mut buf = [0u8; FRAME_LEN];
        let cfg = FrameConfig::default();
        assert_eq!(
            cfg.emit(PORT_MAC, &packet(), &mut buf[..FRAME_LEN - 1]),
            Err(Error::BufferTooSmall)
        );
        let cfg = FrameConfig {
            local_src_mac: Some([0x02, 1, 2, 3, 4, 5]),
            ..cfg
        };
        cfg.emit(PORT_MAC, &packet(), &mut buf).unwrap();
        assert_eq!(buf[6..12], [0x02, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn recognises_ovs_frame_with_zero_udp_checksum() {
        let cfg = FrameConfig::default();
        assert_eq!(cfg.recognise(&fixture(), 0), Some(Ok(packet())));
        // Any tunnel key unless check_tnl_key.
        assert_eq!(cfg.recognise(&fixture(), 5001), Some(Ok(packet())));
        let strict = FrameConfig {
            check_tnl_key: true,
            ..cfg
        };
        assert_eq!(strict.recognise(&fixture(), 5001), None);
        assert_eq!(strict.recognise(&fixture(), 0), Some(Ok(packet())));
    }

    #[test]
    fn round_trip_with_checksum() {
        let cfg = FrameConfig::default();
        let mut buf = [0u8; FRAME_LEN];
        cfg.emit(PORT_MAC, &packet(), &mut buf).unwrap();
        assert_eq!(cfg.recognise(&buf, 0), Some(Ok(packet())));
    }

    fn edit(f: impl FnOnce(&mut [u8; FRAME_LEN])) -> [u8; FRAME_LEN] {
        let mut b = fixture();
        f(&mut b);
        b
    }

    fn fix_ip_checksum(b: &mut [u8; FRAME_LEN]) {
        b[24..26].fill(0);
        let c = !fold(sum(0, &b[14..34]));
        b[24..26].copy_from_slice(&c.to_be_bytes());
    }

    #[test]
    fn not_bfd() {
        let cfg = FrameConfig::default();
        let cases: [(&str, [u8; FRAME_LEN]); 5] = [
            ("ethertype", edit(|b| b[12] = 0x86)),
            ("IPv6 version", edit(|b| b[14] = 0x65)),
            ("protocol", edit(|b| b[23] = 6)),
            ("port", edit(|b| b[37] = 0xc9)),
            (
                "later fragment",
                edit(|b| {
                    b[21] = 1;
                    fix_ip_checksum(b);
                }),
            ),
        ];
        for (what, f) in cases {
            assert_eq!(cfg.recognise(&f, 0), None, "{what}");
        }
        assert_eq!(cfg.recognise(&fixture()[..33], 0), None);
        let mac = FrameConfig {
            remote_dst_mac: Some([0x02, 9, 9, 9, 9, 9]),
            ..cfg
        };
        assert_eq!(mac.recognise(&fixture(), 0), None);
        let ours = FrameConfig {
            remote_dst_mac: Some(BFD_DST_MAC),
            ..cfg
        };
        assert_eq!(ours.recognise(&fixture(), 0), Some(Ok(packet())));
        let ip = FrameConfig {
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            ..cfg
        };
        assert_eq!(ip.recognise(&fixture(), 0), None);
        let f = edit(|b| {
            b[30..34].copy_from_slice(&[10, 0, 0, 1]);
            fix_ip_checksum(b);
        });
        assert_eq!(ip.recognise(&f, 0), Some(Ok(packet())));
    }

    #[test]
    fn bfd_but_dropped() {
        let cfg = FrameConfig::default();
        let ttl = edit(|b| {
            b[22] = 254;
            fix_ip_checksum(b);
        });
        assert_eq!(cfg.recognise(&ttl, 0), Some(Err(Error::BadTtl)));
        let ipc = edit(|b| b[25] ^= 1);
        assert_eq!(cfg.recognise(&ipc, 0), Some(Err(Error::BadIpChecksum)));
        let total = edit(|b| {
            b[17] = 0x35;
            fix_ip_checksum(b);
        });
        assert_eq!(cfg.recognise(&total, 0), Some(Err(Error::Truncated)));
        let udp_len = edit(|b| b[39] = 0x21);
        assert_eq!(cfg.recognise(&udp_len, 0), Some(Err(Error::Truncated)));
        let short = edit(|b| b[39] = 0x1f);
        assert_eq!(cfg.recognise(&short, 0), Some(Err(Error::Truncated)));
        let udpc = edit(|b| b[41] = 1);
        assert_eq!(cfg.recognise(&udpc, 0), Some(Err(Error::BadUdpChecksum)));
        let auth = edit(|b| b[43] |= 1 << 2);
        assert_eq!(cfg.recognise(&auth, 0), Some(Err(Error::AuthPresent)));
    }

    #[test]
    fn source_ports_as_ovs() {
        assert_eq!(FrameConfig::source_port(0), 49152);
        assert_eq!(FrameConfig::source_port(16383), 65535);
        assert_eq!(FrameConfig::source_port(16384), 49152);
    }
}
