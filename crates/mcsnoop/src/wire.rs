//! IGMP and MLD messages as typed views over bytes, in the style of
//! smoltcp's `wire` module.
//!
//! IGMP (RFC 2236 §2, RFC 3376 §4) and MLD (RFC 2710 §3, RFC 3810 §5) share
//! their later layouts: an IGMPv3 query and an MLDv2 query end in the same
//! `S|QRV, QQIC, Number of Sources, Source Address [i]` tail ([`QueryTail`]),
//! and IGMPv3 and MLDv2 reports carry the same group records
//! ([`GroupRecord`]); only the address length differs ([`Family`]).
//!
//! ```text
//! IGMP (8 bytes, then the v3 query tail or v3 group records):
//! | Type | Max Resp Code | Checksum | Group Address (v3 report: Reserved, Number of Group Records) |
//! MLD (ICMPv6; 24 bytes for v1 and the v2 query, 8 for the v2 report header):
//! | Type | Code | Checksum | Max Resp Code | Reserved (v2 report: Nr of Mcast Address Records) | Multicast Address |
//! ```
//!
//! `new_checked` checks the length every accessor needs; after it succeeds
//! no accessor panics (fields that only some messages have return
//! `Option`). Setters may panic on a buffer too short for what they write,
//! as smoltcp's do.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::time::Duration;

use crate::checksum;
use crate::ParseError;

/// IGMP Membership Query (RFC 3376 §4.1; v1 and v2 use the same type).
pub(crate) const IGMP_QUERY: u8 = 0x11;
/// IGMPv1 Membership Report (RFC 1112 appendix I).
pub(crate) const IGMP_V1_REPORT: u8 = 0x12;
/// IGMPv2 Membership Report (RFC 2236 §2.1).
pub(crate) const IGMP_V2_REPORT: u8 = 0x16;
/// IGMPv2 Leave Group (RFC 2236 §2.1).
pub(crate) const IGMP_V2_LEAVE: u8 = 0x17;
/// IGMPv3 Membership Report (RFC 3376 §4.2).
pub(crate) const IGMP_V3_REPORT: u8 = 0x22;
/// MLD Multicast Listener Query (RFC 2710 §3, RFC 3810 §5.1).
pub(crate) const MLD_QUERY: u8 = 130;
/// MLDv1 Multicast Listener Report (RFC 2710 §3).
pub(crate) const MLD_V1_REPORT: u8 = 131;
/// MLDv1 Multicast Listener Done (RFC 2710 §3).
pub(crate) const MLD_V1_DONE: u8 = 132;
/// MLDv2 Multicast Listener Report (RFC 3810 §5.2).
pub(crate) const MLD_V2_REPORT: u8 = 143;

/// IGMP header (and whole v1/v2 message) length in bytes.
pub(crate) const IGMP_HEADER_LEN: usize = 8;
/// MLD header length in bytes up to the multicast address (and the v2
/// report header).
pub(crate) const MLD_HEADER_LEN: usize = 8;
/// MLDv1 message length in bytes (RFC 2710 §3).
pub(crate) const MLD_V1_LEN: usize = 24;
/// Length of the v3 query tail before its sources.
pub(crate) const QUERY_TAIL_LEN: usize = 4;
/// Length of a group record before its address.
pub(crate) const RECORD_HEADER_LEN: usize = 4;

/// Byte offsets of the fields.
pub(crate) mod field {
    /// A range of bytes within a message.
    pub type Field = core::ops::Range<usize>;
    /// Message type.
    pub const TYPE: usize = 0;
    /// IGMP Max Resp Code (1 byte) or MLD Code.
    pub const CODE: usize = 1;
    /// Checksum.
    pub const CHECKSUM: Field = 2..4;
    /// IGMP Group Address.
    pub const IGMP_GROUP: Field = 4..8;
    /// MLD Maximum Response Code (16 bits, milliseconds or exponential).
    pub const MLD_MAX_RESP: Field = 4..6;
    /// Number of group records (IGMPv3 and MLDv2 reports).
    pub const NUM_RECORDS: Field = 6..8;
    /// MLD Multicast Address.
    pub const MLD_ADDRESS: Field = 8..24;
    /// In the query tail: S flag (bit 3) and QRV (bits 0..3).
    pub const S_QRV: usize = 0;
    /// In the query tail: Querier's Query Interval Code.
    pub const QQIC: usize = 1;
    /// In the query tail, and in a record: Number of Sources.
    pub const NUM_SOURCES: Field = 2..4;
    /// In a record: Record Type.
    pub const RECORD_TYPE: usize = 0;
    /// In a record: Aux Data Len, in 32-bit words.
    pub const AUX_DATA_LEN: usize = 1;
}

/// Address family of a message: IGMP carries IPv4 addresses, MLD IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    /// Address length in bytes.
    pub(crate) const fn addr_len(self) -> usize {
        match self {
            Family::Ipv4 => 4,
            Family::Ipv6 => 16,
        }
    }

    /// The address in `b`, which is exactly [`Family::addr_len`] bytes.
    pub(crate) fn addr(self, b: &[u8]) -> IpAddr {
        match self {
            Family::Ipv4 => IpAddr::V4(Ipv4Addr::from(read4(b))),
            Family::Ipv6 => IpAddr::V6(Ipv6Addr::from(read16(b))),
        }
    }
}

fn read2(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn read4(b: &[u8]) -> [u8; 4] {
    [b[0], b[1], b[2], b[3]]
}

fn read16(b: &[u8]) -> [u8; 16] {
    let mut a = [0; 16];
    a.copy_from_slice(&b[..16]);
    a
}

/// Writes `addr`'s octets at the start of `b`.
pub(crate) fn write_addr(b: &mut [u8], addr: IpAddr) {
    match addr {
        IpAddr::V4(a) => b[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => b[..16].copy_from_slice(&a.octets()),
    }
}

/// An IGMP message (RFC 3376 §4): the 8-byte header and what follows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Igmp<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Igmp<T> {
    pub(crate) const fn new_unchecked(buffer: T) -> Self {
        Igmp { buffer }
    }

    /// Checks the buffer holds the 8-byte header.
    pub(crate) fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < IGMP_HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        Ok(Self::new_unchecked(buffer))
    }

    pub(crate) fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    pub(crate) fn max_resp_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    pub(crate) fn group_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read4(&self.buffer.as_ref()[field::IGMP_GROUP]))
    }

    pub(crate) fn num_records(&self) -> u16 {
        read2(&self.buffer.as_ref()[field::NUM_RECORDS])
    }

    /// Length of the message in bytes.
    pub(crate) fn len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    /// Whether the checksum over the whole message verifies (RFC 3376 §4.1.2).
    pub(crate) fn verify_checksum(&self) -> bool {
        checksum::sum(self.buffer.as_ref()) == 0xffff
    }
}

impl<'a> Igmp<&'a [u8]> {
    /// The bytes after the 8-byte header (v3 query tail or group records),
    /// borrowed for as long as the packet.
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.buffer[IGMP_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Igmp<T> {
    pub(crate) fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    pub(crate) fn set_max_resp_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    pub(crate) fn set_group_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::IGMP_GROUP].copy_from_slice(&a.octets());
    }

    pub(crate) fn set_num_records(&mut self, n: u16) {
        self.buffer.as_mut()[field::NUM_RECORDS].copy_from_slice(&n.to_be_bytes());
    }

    pub(crate) fn rest_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[IGMP_HEADER_LEN..]
    }

    /// Computes and writes the checksum over the whole buffer.
    pub(crate) fn fill_checksum(&mut self) {
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].fill(0);
        let c = checksum::finish(checksum::sum(b));
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
}

/// An MLD message (ICMPv6, RFC 3810 §5): the 8-byte header and what
/// follows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mld<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Mld<T> {
    pub(crate) const fn new_unchecked(buffer: T) -> Self {
        Mld { buffer }
    }

    /// Checks the buffer holds the 8-byte header.
    pub(crate) fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < MLD_HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        Ok(Self::new_unchecked(buffer))
    }

    pub(crate) fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    pub(crate) fn max_resp_code(&self) -> u16 {
        read2(&self.buffer.as_ref()[field::MLD_MAX_RESP])
    }

    pub(crate) fn num_records(&self) -> u16 {
        read2(&self.buffer.as_ref()[field::NUM_RECORDS])
    }

    /// The Multicast Address of a v1 message or v2 query; `None` if the
    /// message is shorter than 24 bytes.
    pub(crate) fn multicast_address(&self) -> Option<Ipv6Addr> {
        let b = self.buffer.as_ref().get(field::MLD_ADDRESS)?;
        Some(Ipv6Addr::from(read16(b)))
    }

    pub(crate) fn len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    /// Whether the ICMPv6 checksum with the pseudo-header verifies
    /// (RFC 4443 §2.3, RFC 8200 §8.1).
    pub(crate) fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        checksum::icmpv6_sum(src, dst, self.buffer.as_ref()) == 0xffff
    }
}

impl<'a> Mld<&'a [u8]> {
    /// The bytes after the first `at` bytes (empty if `at` is past the
    /// end), e.g. the v2 query tail at 24 or the v2 report's records at 8.
    pub(crate) fn rest(&self, at: usize) -> &'a [u8] {
        self.buffer.get(at..).unwrap_or_default()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Mld<T> {
    pub(crate) fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    pub(crate) fn set_max_resp_code(&mut self, v: u16) {
        self.buffer.as_mut()[field::MLD_MAX_RESP].copy_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn set_num_records(&mut self, n: u16) {
        self.buffer.as_mut()[field::NUM_RECORDS].copy_from_slice(&n.to_be_bytes());
    }

    pub(crate) fn set_multicast_address(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::MLD_ADDRESS].copy_from_slice(&a.octets());
    }

    pub(crate) fn rest_mut(&mut self, at: usize) -> &mut [u8] {
        &mut self.buffer.as_mut()[at..]
    }

    /// Computes and writes the ICMPv6 checksum over the whole buffer.
    pub(crate) fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].fill(0);
        let c = checksum::finish(checksum::icmpv6_sum(src, dst, b));
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
}

/// The tail of an IGMPv3 query (RFC 3376 §4.1) or MLDv2 query
/// (RFC 3810 §5.1), from the `S|QRV` byte on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueryTail<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> QueryTail<T> {
    pub(crate) const fn new_unchecked(buffer: T) -> Self {
        QueryTail { buffer }
    }

    /// Checks the buffer holds the 4-byte tail header and its sources.
    pub(crate) fn new_checked(buffer: T, family: Family) -> Result<Self, ParseError> {
        let len = buffer.as_ref().len();
        let t = Self::new_unchecked(buffer);
        if len < QUERY_TAIL_LEN
            || len < QUERY_TAIL_LEN + usize::from(t.num_sources()) * family.addr_len()
        {
            return Err(ParseError::Truncated);
        }
        Ok(t)
    }

    pub(crate) fn num_sources(&self) -> u16 {
        read2(&self.buffer.as_ref()[field::NUM_SOURCES])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> QueryTail<T> {
    /// Sets S = 0 and the Querier's Robustness Variable (3 bits).
    pub(crate) fn set_qrv(&mut self, qrv: u8) {
        self.buffer.as_mut()[field::S_QRV] = qrv & 0x7;
    }

    pub(crate) fn set_qqic(&mut self, v: u8) {
        self.buffer.as_mut()[field::QQIC] = v;
    }

    pub(crate) fn set_num_sources(&mut self, n: u16) {
        self.buffer.as_mut()[field::NUM_SOURCES].copy_from_slice(&n.to_be_bytes());
    }
}

/// One group record of an IGMPv3 report (RFC 3376 §4.2.4) or multicast
/// address record of an MLDv2 report (RFC 3810 §5.2.4).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupRecord<T: AsRef<[u8]>> {
    buffer: T,
    family: Family,
}

impl<T: AsRef<[u8]>> GroupRecord<T> {
    pub(crate) const fn new_unchecked(buffer: T, family: Family) -> Self {
        GroupRecord { buffer, family }
    }

    /// Checks the buffer holds the whole record (header, address, sources,
    /// auxiliary data); it may hold more.
    pub(crate) fn new_checked(buffer: T, family: Family) -> Result<Self, ParseError> {
        let r = Self::new_unchecked(buffer, family);
        let len = r.buffer.as_ref().len();
        if len < RECORD_HEADER_LEN || len < r.record_len() {
            return Err(ParseError::Truncated);
        }
        Ok(r)
    }

    /// Length of the whole record in bytes (header, address, sources and
    /// auxiliary data); needs the 4-byte record header.
    pub(crate) fn record_len(&self) -> usize {
        let b = self.buffer.as_ref();
        let alen = self.family.addr_len();
        let sources = usize::from(self.num_sources()) * alen;
        RECORD_HEADER_LEN + alen + sources + usize::from(b[field::AUX_DATA_LEN]) * 4
    }

    pub(crate) fn record_type(&self) -> u8 {
        self.buffer.as_ref()[field::RECORD_TYPE]
    }

    pub(crate) fn num_sources(&self) -> u16 {
        read2(&self.buffer.as_ref()[field::NUM_SOURCES])
    }

    pub(crate) fn multicast_address(&self) -> IpAddr {
        let alen = self.family.addr_len();
        self.family
            .addr(&self.buffer.as_ref()[RECORD_HEADER_LEN..RECORD_HEADER_LEN + alen])
    }
}

impl<'a> GroupRecord<&'a [u8]> {
    /// The source addresses, `Number of Sources` × address length bytes.
    pub(crate) fn sources(&self) -> &'a [u8] {
        let alen = self.family.addr_len();
        let start = RECORD_HEADER_LEN + alen;
        &self.buffer[start..start + usize::from(self.num_sources()) * alen]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GroupRecord<T> {
    /// Writes a whole record without auxiliary data; the buffer must hold
    /// `4 + (1 + sources.len()) × address length` bytes.
    pub(crate) fn emit(&mut self, kind: u8, group: IpAddr, sources: &[IpAddr]) {
        let alen = self.family.addr_len();
        let b = self.buffer.as_mut();
        b[field::RECORD_TYPE] = kind;
        b[field::AUX_DATA_LEN] = 0;
        let n = u16::try_from(sources.len()).expect("at most 65535 sources");
        b[field::NUM_SOURCES].copy_from_slice(&n.to_be_bytes());
        write_addr(&mut b[RECORD_HEADER_LEN..], group);
        for (i, s) in sources.iter().enumerate() {
            write_addr(&mut b[RECORD_HEADER_LEN + alen * (i + 1)..], *s);
        }
    }
}

/// Decodes an IGMP Max Resp Code (RFC 3376 §4.1.1): below 128 it is the
/// time in tenths of a second, else a floating-point value
/// `(mant | 0x10) << (exp + 3)` tenths.
pub(crate) fn igmp_max_resp(code: u8) -> Duration {
    let tenths = if code < 128 {
        u64::from(code)
    } else {
        let mant = u64::from(code & 0x0f);
        let exp = u32::from((code >> 4) & 0x07);
        (mant | 0x10) << (exp + 3)
    };
    Duration::from_millis(tenths * 100)
}

/// Encodes a duration as an IGMP Max Resp Code (RFC 3376 §4.1.1), rounding
/// down to what the code can express (at most 3174.4 s).
pub(crate) fn igmp_max_resp_code(d: Duration) -> u8 {
    let tenths = d.as_millis() / 100;
    match encode_float(tenths, 4, 7) {
        // Below the floating-point range: the value itself, < 128.
        None => tenths as u8,
        Some((exp, mant)) => 0x80 | (exp << 4) as u8 | mant as u8,
    }
}

/// Decodes an MLDv2 Maximum Response Code (RFC 3810 §5.1.3) in
/// milliseconds: below 32768 the value itself, else
/// `(mant | 0x1000) << (exp + 3)`. MLDv1's Maximum Response Delay is
/// always the plain value (RFC 2710 §3.4), which this equals below 32768.
pub(crate) fn mld_max_resp(code: u16) -> Duration {
    let ms = if code < 0x8000 {
        u64::from(code)
    } else {
        let mant = u64::from(code & 0x0fff);
        let exp = u32::from((code >> 12) & 0x07);
        (mant | 0x1000) << (exp + 3)
    };
    Duration::from_millis(ms)
}

/// Encodes a duration as an MLDv2 Maximum Response Code (RFC 3810
/// §5.1.3), rounding down (at most 8387.584 s).
pub(crate) fn mld_max_resp_code(d: Duration) -> u16 {
    let ms = d.as_millis();
    match encode_float(ms, 12, 7) {
        None => ms as u16,
        Some((exp, mant)) => 0x8000 | (exp << 12) as u16 | mant as u16,
    }
}

/// The `(exp, mant)` of the floating-point code of RFC 3376 §4.1.1 and
/// RFC 3810 §5.1.3 for `value = (mant | 1 << mant_bits) << (exp + 3)`,
/// rounded down and saturated; `None` when `value` is below the first
/// floating-point value (`1 << (mant_bits + 3)`) and so is sent as is.
fn encode_float(value: u128, mant_bits: u32, max_exp: u32) -> Option<(u32, u32)> {
    let implicit = 1u128 << mant_bits;
    if value < implicit << 3 {
        return None;
    }
    for exp in 0..=max_exp {
        let m = value >> (exp + 3);
        if m < implicit << 1 {
            return Some((exp, (m - implicit) as u32));
        }
    }
    Some((max_exp, (implicit - 1) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn igmp_max_resp_codes() {
        assert_eq!(igmp_max_resp(100), Duration::from_secs(10));
        // 0x80: mant 0, exp 0: 16 << 3 = 128 tenths.
        assert_eq!(igmp_max_resp(0x80), Duration::from_millis(12_800));
        assert_eq!(igmp_max_resp(0xff), Duration::from_millis(31 * 1024 * 100));
        for code in 0..=255u8 {
            assert_eq!(igmp_max_resp_code(igmp_max_resp(code)), code, "code {code}");
        }
        assert_eq!(igmp_max_resp_code(Duration::from_secs(100_000)), 0xff);
    }

    #[test]
    fn mld_max_resp_codes() {
        assert_eq!(mld_max_resp(10_000), Duration::from_secs(10));
        assert_eq!(mld_max_resp(0x8000), Duration::from_millis(0x1000 << 3));
        for code in (0..=u16::MAX).step_by(7).chain([0x7fff, 0x8000, u16::MAX]) {
            assert_eq!(mld_max_resp_code(mld_max_resp(code)), code, "code {code}");
        }
        assert_eq!(mld_max_resp_code(Duration::from_secs(1_000_000)), u16::MAX);
    }

    #[test]
    fn record_bounds() {
        // IGMPv3 record: type 2, aux 1 word, 1 source: 4 + 4 + 4 + 4 bytes.
        let r = [
            2, 1, 0, 1, 239, 1, 1, 1, 10, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd,
        ];
        let rec = GroupRecord::new_checked(&r[..], Family::Ipv4).unwrap();
        assert_eq!(rec.record_len(), 16);
        assert_eq!(rec.sources(), &[10, 0, 0, 1]);
        for n in 0..r.len() {
            assert!(GroupRecord::new_checked(&r[..n], Family::Ipv4).is_err());
        }
    }
}
