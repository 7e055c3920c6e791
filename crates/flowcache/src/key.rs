//! [`FlowKey`]: a 64-byte exact-match key extracted from a raw Ethernet frame.
//!
//! The key is a typed view over a fixed `[u8; 64]` (see `mod field` for the
//! byte ranges), so equality is one 64-byte compare and the hash reads eight
//! aligned words. Extraction ([`FlowKey::extract`]) reads the frame through
//! checked slice access only: it never panics, whatever the length or content
//! of the frame; a header that is announced but cut short or invalid sets
//! [`FlowKey::is_malformed`] and leaves the fields behind it zero.
//!
//! # Exactness contract
//!
//! A cached decision is only as exact as the key. Two frames with equal keys
//! get the same cached decision, so the slow path must decide from the key
//! (and the configuration) alone, never from other frame bytes. What the key
//! leaves out: IP TOS/DSCP and TTL, TCP flags, ARP fields, anything past a
//! third VLAN tag or past eight IPv6 extension headers, and the bytes of a
//! malformed frame after the point where parsing stopped.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Length of a [`FlowKey`] in bytes.
pub const KEY_LEN: usize = 64;

/// EtherType of IPv4 (IEEE 802.3).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType (TPID) of an IEEE 802.1Q C-tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType (TPID) of an IEEE 802.1ad S-tag (QinQ outer tag).
pub const ETHERTYPE_QINQ: u16 = 0x88a8;

/// IP protocol number of ICMP.
pub const IPPROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// IP protocol number of ICMPv6.
pub const IPPROTO_ICMPV6: u8 = 58;
/// IP protocol number of SCTP.
pub const IPPROTO_SCTP: u8 = 132;
/// IP protocol number of UDP-Lite.
pub const IPPROTO_UDPLITE: u8 = 136;

/// How many IPv6 extension headers extraction walks before it stops.
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// Byte ranges of the key layout (all multi-byte fields big-endian).
mod field {
    pub type Field = core::ops::Range<usize>;
    pub const IN_PORT: Field = 0..4;
    pub const FLAGS: usize = 4;
    pub const VNI: Field = 5..8;
    pub const VLAN: Field = 8..10;
    pub const INNER_VLAN: Field = 10..12;
    pub const ETH_DST: Field = 12..18;
    pub const ETH_SRC: Field = 18..24;
    pub const ETH_TYPE: Field = 24..26;
    pub const IP_PROTO: usize = 26;
    pub const IP_FRAG: usize = 27;
    pub const IP_SRC: Field = 28..44;
    pub const IP_DST: Field = 44..60;
    pub const L4_SRC: Field = 60..62;
    pub const L4_DST: Field = 62..64;
}

/// Bits of the flags byte.
mod flag {
    pub const VNI: u8 = 0x01;
    pub const VLAN: u8 = 0x02;
    pub const SVLAN: u8 = 0x04;
    pub const INNER_VLAN: u8 = 0x08;
    pub const IPV4: u8 = 0x10;
    pub const IPV6: u8 = 0x20;
    pub const L4: u8 = 0x40;
    pub const MALFORMED: u8 = 0x80;
}

/// IP fragmentation state of a frame (RFC 791 §3.1, RFC 8200 §4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fragment {
    /// Not a fragment (or not IP).
    No,
    /// First fragment: offset 0 with more-fragments set. L4 ports are parsed.
    First,
    /// A later fragment: offset > 0. It carries no L4 header; ports are absent.
    Later,
}

/// Parts of a [`FlowKey`] a wildcarded entry leaves out ([`FlowKey::without`]): a
/// set of the four constants, combined with `|`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Wildcards(pub u8);

impl Wildcards {
    /// None: the exact key.
    pub const NONE: Wildcards = Wildcards(0);
    /// The IP source address.
    pub const IP_SRC: Wildcards = Wildcards(1);
    /// The IP destination address.
    pub const IP_DST: Wildcards = Wildcards(2);
    /// The L4 source port (ICMP: the type).
    pub const L4_SRC: Wildcards = Wildcards(4);
    /// The L4 destination port (ICMP: the code).
    pub const L4_DST: Wildcards = Wildcards(8);

    /// Whether no part is left out.
    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}

impl core::ops::BitOr for Wildcards {
    type Output = Wildcards;
    fn bitor(self, o: Wildcards) -> Wildcards {
        Wildcards(self.0 | o.0)
    }
}

impl core::ops::BitOrAssign for Wildcards {
    fn bitor_assign(&mut self, o: Wildcards) {
        self.0 |= o.0;
    }
}

/// The shape of a wildcarded key ([`FlowKey::masked`]): the parts left out whole, and
/// how many leading bits of each IP address are kept (128: all of it; an IPv4
/// address has 32), as Open vSwitch's megaflows keep an address prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyMask {
    /// The parts left out whole.
    pub wild: Wildcards,
    /// Leading bits of the IP source address kept (unless `wild` leaves it out).
    pub ip_src_bits: u8,
    /// Leading bits of the IP destination address kept (unless `wild` leaves it out).
    pub ip_dst_bits: u8,
}

impl KeyMask {
    /// `wild`'s parts left out, the rest whole.
    pub const fn whole(wild: Wildcards) -> KeyMask {
        KeyMask {
            wild,
            ip_src_bits: 128,
            ip_dst_bits: 128,
        }
    }

    /// Whether it leaves nothing out.
    pub fn is_exact(self) -> bool {
        self.wild.is_none() && self.ip_src_bits >= 128 && self.ip_dst_bits >= 128
    }
}

/// A compact, fixed-size (64 bytes, 8-byte aligned) exact-match flow key.
///
/// Fields: ingress port, tunnel VNI (24 bits) when present, outer and inner
/// VLAN TCI, Ethernet destination/source/type, IPv4 or IPv6 source and
/// destination, IP protocol, fragment state, and L4 source/destination ports
/// (for ICMP/ICMPv6: type and code). Absent fields are zero and their
/// presence bit is clear, so keys compare exactly.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct FlowKey {
    bytes: [u8; KEY_LEN],
}

/// Equality of all 64 bytes, as eight 64-bit words folded with XOR/OR and one
/// branch: inlined, where the derived `[u8; 64]` compare calls `memcmp` (a
/// call and a length-generic loop, once per EMC hit and per last-flow check).
impl PartialEq for FlowKey {
    #[inline(always)]
    fn eq(&self, other: &FlowKey) -> bool {
        let mut d = 0;
        for i in 0..KEY_LEN / 8 {
            d |= self.word(i) ^ other.word(i);
        }
        d == 0
    }
}

impl Eq for FlowKey {}

/// Hashes the 64 bytes (consistent with `Eq`). For the EMC, use the faster
/// [`FlowKey::flow_hash`].
impl core::hash::Hash for FlowKey {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.bytes.hash(state);
    }
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey {
            bytes: [0; KEY_LEN],
        }
    }
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    match (b.get(at), b.get(at + 1)) {
        (Some(&hi), Some(&lo)) => Some(u16::from_be_bytes([hi, lo])),
        _ => None,
    }
}

/// wyhash-style 64x64->128 multiply, folded to 64 bits.
#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

const HASH_K: [u64; 9] = [
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x1d8e_4e27_c47d_124f,
    0x9e37_79b9_7f4a_7c15,
    0xbf58_476d_1ce4_e5b9,
    0x94d0_49bb_1331_11eb,
    0x2545_f491_4f6c_dd1d,
];

impl FlowKey {
    /// Extracts the key of a raw Ethernet frame (starting at the destination
    /// MAC, without FCS) received on `in_port`, with `vni` the tunnel VNI the
    /// frame was decapsulated from (only its low 24 bits are kept, RFC 8926
    /// §3.4).
    ///
    /// Parses: up to two VLAN tags (outer TPID 0x8100 or 0x88a8, inner
    /// 0x8100; a third tag ends parsing with `eth_type` = its TPID), IPv4 with
    /// or without options, IPv6 with up to [`MAX_IPV6_EXT_HEADERS`] extension
    /// headers (hop-by-hop, routing, destination options, fragment, AH),
    /// TCP/UDP/SCTP/UDP-Lite ports and ICMP/ICMPv6 type and code. The L4
    /// header is searched within the IP total/payload length (a length of 0,
    /// as in a GSO "big" packet, means "the rest of the frame").
    ///
    /// Reads at most the headers it parses (typically the first 34..78 bytes).
    /// Never panics and never allocates. A frame shorter than 14 bytes, a
    /// truncated VLAN/IP/L4 header, a wrong IP version or an IHL < 5 sets
    /// [`is_malformed`](Self::is_malformed); fields after that point stay zero.
    #[inline]
    pub fn extract(frame: &[u8], in_port: u32, vni: Option<u32>) -> FlowKey {
        match Self::extract_ipv4_l4(frame, in_port, vni) {
            Some(k) => k,
            None => Self::extract_general(frame, in_port, vni),
        }
    }

    /// The common case in one pass: an untagged IPv4 frame without options
    /// or fragmentation carrying TCP, UDP, SCTP or UDP-Lite, whose L4 ports
    /// lie within the IP total length, at least 40 bytes long. Gives the key
    /// [`extract`](Self::extract) gives, or `None` for any other frame (call
    /// [`extract`](Self::extract) then). Checked against the general parser
    /// by a property test.
    ///
    /// For callers that copy headers into a buffer first: this case needs
    /// only the first 40 bytes, read as five 8-byte words at offsets 0, 8,
    /// .., 32. A word lies within one store of a `memcpy` of 40 to 64 bytes
    /// (glibc copies those as two 32-byte stores, at 0 and at the end), so
    /// reading it right after the copy is forwarded from the store; a load
    /// straddling two stores waits until both reach the cache. And the key
    /// is assembled as its eight 64-bit words, so an inlined caller hashes
    /// it from registers.
    #[inline(always)]
    pub fn extract_ipv4_l4(frame: &[u8], in_port: u32, vni: Option<u32>) -> Option<FlowKey> {
        let h: &[u8; 40] = frame.get(..40)?.try_into().ok()?;
        let w = |i: usize| {
            let o = i * 8;
            u64::from_le_bytes([
                h[o],
                h[o + 1],
                h[o + 2],
                h[o + 3],
                h[o + 4],
                h[o + 5],
                h[o + 6],
                h[o + 7],
            ])
        };
        let (h0, h1, h2, h3, h4) = (w(0), w(1), w(2), w(3), w(4));
        // Frame bytes 12..15 (EtherType 0x0800, version 4 with IHL 5), the
        // IPv4 total length (16..18), flags + fragment offset (20..22) and
        // protocol (23), from the words' little-endian byte order.
        let total = (h2 as u16).swap_bytes();
        let frag = ((h2 >> 32) as u16).swap_bytes();
        let proto = (h2 >> 56) as u8;
        if (h1 >> 32) & 0xff_ffff != 0x45_0008
            || frag & 0x3fff != 0
            || (total != 0 && total < 24)
            || !matches!(
                proto,
                IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP | IPPROTO_UDPLITE
            )
        {
            return None;
        }
        let mut w0 = [0u8; 8];
        w0[field::IN_PORT].copy_from_slice(&in_port.to_be_bytes());
        w0[field::FLAGS] = flag::IPV4 | flag::L4;
        if let Some(vni) = vni {
            w0[field::FLAGS] |= flag::VNI;
            w0[field::VNI].copy_from_slice(&vni.to_be_bytes()[1..4]);
        }
        const LO32: u64 = 0xffff_ffff;
        // The key's words (layout in `mod field`; little-endian words of the
        // big-endian byte fields): VLANs (0) and eth_dst[0..4]; eth_dst[4..6]
        // and eth_src (frame bytes 4..12); eth_type, protocol, fragment (0)
        // and the IPv4 source (26..30); the IPv4 destination (30..34); the
        // ports (34..38).
        Some(FlowKey::from_words([
            u64::from_le_bytes(w0),
            h0 << 32,
            h0 >> 32 | h1 << 32,
            (h1 >> 32) & 0xffff | u64::from(proto) << 16 | ((h3 >> 16) & LO32) << 32,
            0,
            (h3 >> 48 | (h4 & 0xffff) << 16) << 32,
            0,
            ((h4 >> 16) & LO32) << 32,
        ]))
    }

    /// The key whose [`word`](Self::word)s are `w`.
    #[inline(always)]
    fn from_words(w: [u64; 8]) -> FlowKey {
        let mut bytes = [0u8; KEY_LEN];
        for (b, w) in bytes.chunks_exact_mut(8).zip(w) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        FlowKey { bytes }
    }

    /// [`extract`](Self::extract) through the general parser only: every
    /// frame shape, out of line.
    #[inline(never)]
    fn extract_general(frame: &[u8], in_port: u32, vni: Option<u32>) -> FlowKey {
        let mut k = FlowKey::default();
        k.bytes[field::IN_PORT].copy_from_slice(&in_port.to_be_bytes());
        if let Some(vni) = vni {
            k.bytes[field::FLAGS] |= flag::VNI;
            k.bytes[field::VNI].copy_from_slice(&vni.to_be_bytes()[1..4]);
        }
        if k.parse_l2(frame).is_none() {
            k.bytes[field::FLAGS] |= flag::MALFORMED;
        }
        k
    }

    /// Parses from the Ethernet header on; `None` means "malformed here".
    #[inline(always)]
    fn parse_l2(&mut self, frame: &[u8]) -> Option<()> {
        let eth = frame.get(..14)?;
        self.bytes[field::ETH_DST].copy_from_slice(&eth[0..6]);
        self.bytes[field::ETH_SRC].copy_from_slice(&eth[6..12]);
        let mut et = u16::from_be_bytes([eth[12], eth[13]]);
        let mut off = 14;
        if et == ETHERTYPE_VLAN || et == ETHERTYPE_QINQ {
            self.set_eth_type(et);
            let tci = be16(frame, off)?;
            let next = be16(frame, off + 2)?;
            let mut f = flag::VLAN;
            if et == ETHERTYPE_QINQ {
                f |= flag::SVLAN;
            }
            self.bytes[field::FLAGS] |= f;
            self.bytes[field::VLAN].copy_from_slice(&tci.to_be_bytes());
            et = next;
            off += 4;
            if et == ETHERTYPE_VLAN {
                self.set_eth_type(et);
                let tci = be16(frame, off)?;
                let next = be16(frame, off + 2)?;
                self.bytes[field::FLAGS] |= flag::INNER_VLAN;
                self.bytes[field::INNER_VLAN].copy_from_slice(&tci.to_be_bytes());
                et = next;
                off += 4;
            }
        }
        self.set_eth_type(et);
        let l3 = frame.get(off..).unwrap_or(&[]);
        match et {
            ETHERTYPE_IPV4 => self.parse_ipv4(l3),
            ETHERTYPE_IPV6 => self.parse_ipv6(l3),
            _ => Some(()),
        }
    }

    #[inline(always)]
    fn set_eth_type(&mut self, et: u16) {
        self.bytes[field::ETH_TYPE].copy_from_slice(&et.to_be_bytes());
    }

    #[inline(always)]
    fn parse_ipv4(&mut self, l3: &[u8]) -> Option<()> {
        let h = l3.get(..20)?;
        if h[0] >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(h[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let frag = u16::from_be_bytes([h[6], h[7]]);
        let proto = h[9];
        self.bytes[field::FLAGS] |= flag::IPV4;
        self.bytes[field::IP_PROTO] = proto;
        self.bytes[field::IP_SRC][..4].copy_from_slice(&h[12..16]);
        self.bytes[field::IP_DST][..4].copy_from_slice(&h[16..20]);
        let fragment = if frag & 0x1fff != 0 {
            Fragment::Later
        } else if frag & 0x2000 != 0 {
            Fragment::First
        } else {
            Fragment::No
        };
        self.set_fragment(fragment);
        if ihl < 20 || (total != 0 && total < ihl) || l3.len() < ihl {
            return None;
        }
        if fragment == Fragment::Later {
            return Some(());
        }
        let end = if total == 0 {
            l3.len()
        } else {
            total.min(l3.len())
        };
        let l4 = l3.get(ihl..end).unwrap_or(&[]);
        self.parse_l4(proto, l4, IPPROTO_ICMP)
    }

    #[inline(always)]
    fn parse_ipv6(&mut self, l3: &[u8]) -> Option<()> {
        let h = l3.get(..40)?;
        if h[0] >> 4 != 6 {
            return None;
        }
        let payload = usize::from(u16::from_be_bytes([h[4], h[5]]));
        let mut nh = h[6];
        self.bytes[field::FLAGS] |= flag::IPV6;
        self.bytes[field::IP_SRC].copy_from_slice(&h[8..24]);
        self.bytes[field::IP_DST].copy_from_slice(&h[24..40]);
        self.bytes[field::IP_PROTO] = nh;
        let end = if payload == 0 {
            l3.len()
        } else {
            (40 + payload).min(l3.len())
        };
        let pkt = l3.get(..end).unwrap_or(&[]);
        let mut off = 40;
        for _ in 0..MAX_IPV6_EXT_HEADERS {
            match nh {
                // Hop-by-hop, routing, destination options: 8-octet units.
                0 | 43 | 60 => {
                    let next = *pkt.get(off)?;
                    let len = (usize::from(*pkt.get(off + 1)?) + 1) * 8;
                    pkt.get(off..off + len)?;
                    off += len;
                    nh = next;
                }
                // Authentication header: 4-octet units, minus 2.
                51 => {
                    let next = *pkt.get(off)?;
                    let len = (usize::from(*pkt.get(off + 1)?) + 2) * 4;
                    pkt.get(off..off + len)?;
                    off += len;
                    nh = next;
                }
                // Fragment header (RFC 8200 §4.5), fixed 8 bytes.
                44 => {
                    let fh = pkt.get(off..off + 8)?;
                    let fo = u16::from_be_bytes([fh[2], fh[3]]);
                    nh = fh[0];
                    off += 8;
                    self.bytes[field::IP_PROTO] = nh;
                    if fo & 0xfff8 != 0 {
                        self.set_fragment(Fragment::Later);
                        return Some(());
                    }
                    if fo & 1 != 0 {
                        self.set_fragment(Fragment::First);
                    }
                }
                _ => break,
            }
            self.bytes[field::IP_PROTO] = nh;
        }
        let l4 = pkt.get(off..).unwrap_or(&[]);
        self.parse_l4(nh, l4, IPPROTO_ICMPV6)
    }

    #[inline(always)]
    fn parse_l4(&mut self, proto: u8, l4: &[u8], icmp: u8) -> Option<()> {
        match proto {
            IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP | IPPROTO_UDPLITE => {
                let p = l4.get(..4)?;
                self.bytes[field::L4_SRC].copy_from_slice(&p[0..2]);
                self.bytes[field::L4_DST].copy_from_slice(&p[2..4]);
            }
            p if p == icmp => {
                let t = l4.get(..2)?;
                self.bytes[field::L4_SRC][1] = t[0];
                self.bytes[field::L4_DST][1] = t[1];
            }
            _ => return Some(()),
        }
        self.bytes[field::FLAGS] |= flag::L4;
        Some(())
    }

    #[inline(always)]
    fn set_fragment(&mut self, f: Fragment) {
        self.bytes[field::IP_FRAG] = match f {
            Fragment::No => 0,
            Fragment::First => 1,
            Fragment::Later => 2,
        };
    }

    /// The raw 64-byte key (layout: in_port 0..4, flags 4, VNI 5..8, VLAN
    /// 8..10, inner VLAN 10..12, eth dst 12..18, eth src 18..24, eth type
    /// 24..26, IP proto 26, fragment 27, IP src 28..44, IP dst 44..60, L4 src
    /// 60..62, L4 dst 62..64; big-endian; IPv4 addresses in the first 4 bytes
    /// of their 16).
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.bytes
    }

    /// The key with the parts `wild` names zeroed (bits [`Wildcards::IP_SRC`],
    /// [`Wildcards::IP_DST`], [`Wildcards::L4_SRC`], [`Wildcards::L4_DST`]): the
    /// key of a wildcarded entry (Open vSwitch's megaflow) that every key equal but
    /// in those parts shares. Presence flags stay, so a masked IPv4 key never equals
    /// a masked IPv6 one.
    #[inline]
    pub fn without(&self, wild: Wildcards) -> FlowKey {
        let mut k = *self;
        for (bit, range) in [
            (Wildcards::IP_SRC, field::IP_SRC),
            (Wildcards::IP_DST, field::IP_DST),
            (Wildcards::L4_SRC, field::L4_SRC),
            (Wildcards::L4_DST, field::L4_DST),
        ] {
            if wild.0 & bit.0 != 0 {
                k.bytes[range].fill(0);
            }
        }
        k
    }

    /// The key with `mask`'s parts zeroed ([`without`](Self::without)) and each IP
    /// address cut to the bits the mask keeps of it (the address is stored from its
    /// first byte, network order: an IPv4 address keeps at most its 32 bits).
    #[inline]
    pub fn masked(&self, mask: KeyMask) -> FlowKey {
        let mut k = self.without(mask.wild);
        for (range, bits) in [
            (field::IP_SRC, mask.ip_src_bits),
            (field::IP_DST, mask.ip_dst_bits),
        ] {
            if bits >= 128 {
                continue;
            }
            for (i, b) in k.bytes[range].iter_mut().enumerate() {
                let keep = usize::from(bits).saturating_sub(8 * i).min(8);
                *b &= !(0xffu16 >> keep) as u8;
            }
        }
        k
    }

    /// Builds a key from its raw bytes (the layout of [`as_bytes`](Self::as_bytes)).
    /// Any 64 bytes are accepted; accessors then report what the bytes say.
    /// Meant for tests, benches and slow paths that synthesize keys.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> FlowKey {
        FlowKey { bytes }
    }

    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        let b = &self.bytes;
        let o = i * 8;
        u64::from_le_bytes([
            b[o],
            b[o + 1],
            b[o + 2],
            b[o + 3],
            b[o + 4],
            b[o + 5],
            b[o + 6],
            b[o + 7],
        ])
    }

    /// A fast 32-bit hash of all 64 key bytes (four independent 64x64->128
    /// multiplies and one final mix, in the style of wyhash).
    ///
    /// Used to index the EMC and, by the switch, as flow entropy (e.g. the
    /// Geneve UDP source port). Not keyed and not DoS-resistant: a sender
    /// that crafts colliding keys only makes its flows share EMC buckets
    /// (costing speed, never correctness, since lookups compare whole keys),
    /// which it could also do by sending more flows than the EMC holds.
    #[inline]
    pub fn flow_hash(&self) -> u32 {
        let k = &HASH_K;
        let a = mum(self.word(0) ^ k[0], self.word(1) ^ k[1]);
        let b = mum(self.word(2) ^ k[2], self.word(3) ^ k[3]);
        let c = mum(self.word(4) ^ k[4], self.word(5) ^ k[5]);
        let d = mum(self.word(6) ^ k[6], self.word(7) ^ k[7]);
        let h = mum(a ^ c ^ k[8], b ^ d);
        (h ^ (h >> 32)) as u32
    }

    fn flags(&self) -> u8 {
        self.bytes[field::FLAGS]
    }

    fn u16_at(&self, r: field::Field) -> u16 {
        u16::from_be_bytes([self.bytes[r.start], self.bytes[r.start + 1]])
    }

    /// The ingress port number given to [`extract`](Self::extract).
    pub fn in_port(&self) -> u32 {
        let b = &self.bytes;
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The tunnel VNI (24 bits), if the frame came out of a tunnel.
    pub fn vni(&self) -> Option<u32> {
        (self.flags() & flag::VNI != 0).then(|| {
            let b = &self.bytes;
            u32::from_be_bytes([0, b[5], b[6], b[7]])
        })
    }

    /// The outer VLAN tag's TCI (PCP 3 bits, DEI 1 bit, VID 12 bits), if tagged.
    pub fn vlan_tci(&self) -> Option<u16> {
        (self.flags() & flag::VLAN != 0).then(|| self.u16_at(field::VLAN))
    }

    /// The outer VLAN ID (low 12 bits of the TCI), if tagged.
    pub fn vlan_id(&self) -> Option<u16> {
        self.vlan_tci().map(|t| t & 0x0fff)
    }

    /// Whether the outer tag was an 802.1ad S-tag (TPID 0x88a8).
    pub fn is_svlan(&self) -> bool {
        self.flags() & flag::SVLAN != 0
    }

    /// The inner (second) VLAN tag's TCI, if double-tagged.
    pub fn inner_vlan_tci(&self) -> Option<u16> {
        (self.flags() & flag::INNER_VLAN != 0).then(|| self.u16_at(field::INNER_VLAN))
    }

    /// Ethernet destination address (zero if the frame had < 14 bytes).
    pub fn eth_dst(&self) -> [u8; 6] {
        let b = &self.bytes;
        [b[12], b[13], b[14], b[15], b[16], b[17]]
    }

    /// Ethernet source address (zero if the frame had < 14 bytes).
    pub fn eth_src(&self) -> [u8; 6] {
        let b = &self.bytes;
        [b[18], b[19], b[20], b[21], b[22], b[23]]
    }

    /// The EtherType after the VLAN tags that were parsed (the payload type).
    pub fn eth_type(&self) -> u16 {
        self.u16_at(field::ETH_TYPE)
    }

    /// Whether the IPv4 fixed header was present and of version 4.
    pub fn is_ipv4(&self) -> bool {
        self.flags() & flag::IPV4 != 0
    }

    /// Whether the IPv6 fixed header was present and of version 6.
    pub fn is_ipv6(&self) -> bool {
        self.flags() & flag::IPV6 != 0
    }

    /// The IP protocol (IPv6: the last next-header reached), if IP.
    pub fn ip_proto(&self) -> Option<u8> {
        (self.flags() & (flag::IPV4 | flag::IPV6) != 0).then_some(self.bytes[field::IP_PROTO])
    }

    /// IPv4 source and destination, if IPv4.
    pub fn ipv4(&self) -> Option<(Ipv4Addr, Ipv4Addr)> {
        self.is_ipv4().then(|| {
            let b = &self.bytes;
            (
                Ipv4Addr::new(b[28], b[29], b[30], b[31]),
                Ipv4Addr::new(b[44], b[45], b[46], b[47]),
            )
        })
    }

    /// IPv6 source and destination, if IPv6.
    pub fn ipv6(&self) -> Option<(Ipv6Addr, Ipv6Addr)> {
        self.is_ipv6().then(|| {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&self.bytes[field::IP_SRC]);
            d.copy_from_slice(&self.bytes[field::IP_DST]);
            (Ipv6Addr::from(s), Ipv6Addr::from(d))
        })
    }

    /// The fragment state ([`Fragment::No`] for non-IP frames).
    pub fn fragment(&self) -> Fragment {
        match self.bytes[field::IP_FRAG] {
            0 => Fragment::No,
            1 => Fragment::First,
            _ => Fragment::Later,
        }
    }

    /// L4 source and destination port (ICMP/ICMPv6: type and code), if the
    /// L4 header was present.
    pub fn l4_ports(&self) -> Option<(u16, u16)> {
        (self.flags() & flag::L4 != 0)
            .then(|| (self.u16_at(field::L4_SRC), self.u16_at(field::L4_DST)))
    }

    /// Whether parsing stopped at a truncated or invalid header.
    pub fn is_malformed(&self) -> bool {
        self.flags() & flag::MALFORMED != 0
    }
}

struct Mac([u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// Open vSwitch datapath-flow style, e.g.
/// `in_port(1),vlan(vid=10,pcp=0),eth(src=..,dst=..),eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=6,frag=no),tcp(src=1234,dst=80)`.
impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in_port({})", self.in_port())?;
        if let Some(vni) = self.vni() {
            write!(f, ",tunnel(vni={vni})")?;
        }
        if let Some(tci) = self.vlan_tci() {
            let kind = if self.is_svlan() { "svlan" } else { "vlan" };
            write!(f, ",{kind}(vid={},pcp={})", tci & 0xfff, tci >> 13)?;
        }
        if let Some(tci) = self.inner_vlan_tci() {
            write!(f, ",cvlan(vid={},pcp={})", tci & 0xfff, tci >> 13)?;
        }
        write!(
            f,
            ",eth(src={},dst={}),eth_type(0x{:04x})",
            Mac(self.eth_src()),
            Mac(self.eth_dst()),
            self.eth_type()
        )?;
        let frag = match self.fragment() {
            Fragment::No => "no",
            Fragment::First => "first",
            Fragment::Later => "later",
        };
        let proto = self.bytes[field::IP_PROTO];
        if let Some((s, d)) = self.ipv4() {
            write!(f, ",ipv4(src={s},dst={d},proto={proto},frag={frag})")?;
        } else if let Some((s, d)) = self.ipv6() {
            write!(f, ",ipv6(src={s},dst={d},proto={proto},frag={frag})")?;
        }
        if let Some((s, d)) = self.l4_ports() {
            match proto {
                IPPROTO_TCP => write!(f, ",tcp(src={s},dst={d})")?,
                IPPROTO_UDP => write!(f, ",udp(src={s},dst={d})")?,
                IPPROTO_SCTP => write!(f, ",sctp(src={s},dst={d})")?,
                IPPROTO_UDPLITE => write!(f, ",udplite(src={s},dst={d})")?,
                IPPROTO_ICMP if self.is_ipv4() => write!(f, ",icmp(type={s},code={d})")?,
                _ => write!(f, ",icmpv6(type={s},code={d})")?,
            }
        }
        if self.is_malformed() {
            f.write_str(",malformed")?;
        }
        Ok(())
    }
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FlowKey({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An untagged IPv4/UDP frame of `len` bytes (at least 42), for mutating.
    fn ipv4_udp(len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(42)];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((len.max(42) - 14) as u16).to_be_bytes());
        f[23] = IPPROTO_UDP;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..38].copy_from_slice(&[0x04, 0x00, 0x13, 0x89]);
        f
    }

    #[test]
    fn a_masked_key_keeps_each_address_s_prefix() {
        let key = |src: [u8; 4], dst: [u8; 4]| {
            let mut f = ipv4_udp(60);
            f[26..30].copy_from_slice(&src);
            f[30..34].copy_from_slice(&dst);
            FlowKey::extract(&f, 3, None)
        };
        let m = KeyMask {
            wild: Wildcards::L4_SRC,
            ip_src_bits: 128,
            ip_dst_bits: 25,
        };
        let k = key([10, 0, 0, 1], [10, 0, 0, 200]);
        // The same /25 of destinations, another source port: one masked key.
        let mut f = ipv4_udp(60);
        f[30..34].copy_from_slice(&[10, 0, 0, 239]);
        f[34..36].copy_from_slice(&[0x77, 0x77]);
        assert_eq!(k.masked(m), FlowKey::extract(&f, 3, None).masked(m));
        assert_ne!(k.masked(m), key([10, 0, 0, 1], [10, 0, 0, 127]).masked(m));
        assert_ne!(k.masked(m), key([10, 0, 0, 2], [10, 0, 0, 200]).masked(m));
        let d = k.masked(m).ipv4().map(|a| a.1);
        assert_eq!(d, Some(Ipv4Addr::new(10, 0, 0, 128)), "cut after bit 25");
        assert_eq!(k.masked(KeyMask::whole(Wildcards::NONE)), k);
        assert!(KeyMask::whole(Wildcards::NONE).is_exact());
        assert!(!m.is_exact());
        let none = KeyMask {
            ip_dst_bits: 0,
            ..KeyMask::whole(Wildcards::NONE)
        };
        assert_eq!(k.masked(none), k.without(Wildcards::IP_DST));
    }

    #[test]
    fn a_wildcarded_key_leaves_out_only_its_parts() {
        let f = ipv4_udp(60);
        let k = FlowKey::extract(&f, 3, None);
        let mut g = f.clone();
        g[26..30].copy_from_slice(&[10, 9, 9, 9]); // another source address
        g[34..36].copy_from_slice(&[0x77, 0x77]); // another source port
        let l = FlowKey::extract(&g, 3, None);
        assert_ne!(k, l);
        let w = Wildcards::IP_SRC | Wildcards::L4_SRC;
        assert_eq!(k.without(w), l.without(w));
        assert_ne!(k.without(Wildcards::L4_SRC), l.without(Wildcards::L4_SRC));
        assert_eq!(k.without(Wildcards::NONE), k);
        let m = k.without(Wildcards::IP_DST | Wildcards::L4_DST);
        assert_eq!(
            (m.in_port(), m.ip_proto(), m.is_ipv4()),
            (3, Some(IPPROTO_UDP), true)
        );
        assert_eq!(
            m.ipv4().map(|a| a.0),
            k.ipv4().map(|a| a.0),
            "the source stays"
        );
        assert_eq!(m.l4_ports(), Some((0x0400, 0)));
    }

    #[test]
    fn fast_path_takes_the_common_frame() {
        let f = ipv4_udp(60);
        assert!(FlowKey::extract_ipv4_l4(&f, 3, None).is_some());
        assert_eq!(
            FlowKey::extract(&f, 3, None),
            FlowKey::extract_general(&f, 3, None)
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The fast path gives the general parser's key: a UDP frame with up
        /// to three bytes in its first 42 replaced (version/IHL, lengths,
        /// fragment bits, protocol, EtherType...) and a random length.
        #[test]
        fn fast_path_equals_general_parser(
            len in 0usize..80,
            muts in proptest::collection::vec((0usize..42, any::<u8>()), 0..4),
            proto in prop_oneof![Just(6u8), Just(17), Just(132), Just(136), Just(1), any::<u8>()],
            vni in proptest::option::of(any::<u32>()),
        ) {
            let mut f = ipv4_udp(len);
            f[23] = proto;
            for (at, v) in muts {
                f[at] = v;
            }
            f.truncate(len);
            prop_assert_eq!(
                FlowKey::extract(&f, 7, vni),
                FlowKey::extract_general(&f, 7, vni)
            );
        }
    }
}
