//! Parsing IGMP and MLD messages out of IP packets, without allocation.
//!
//! [`parse`] takes an IPv4 or IPv6 packet and returns `Ok(None)` for
//! anything that is not a membership message, a [`Message`] for IGMPv1/v2/v3
//! (RFC 1112, RFC 2236, RFC 3376) and MLDv1/v2 (RFC 2710, RFC 3810), or a
//! [`ParseError`] naming what was malformed. Every length and the group
//! records of a v3/v2 report are checked before `Ok` is returned, so
//! iterating [`Records`] and [`Sources`] cannot fail or panic.

use core::net::{IpAddr, Ipv6Addr};
use core::time::Duration;

use crate::checksum;
use crate::wire::{self, Family, GroupRecord, Igmp, Mld, QueryTail};

/// IPv4 protocol number of IGMP (RFC 1112 appendix I).
const IPPROTO_IGMP: u8 = 2;
/// IPv6 next-header values walked to reach ICMPv6 (RFC 8200 §4).
const NEXT_HOP_BY_HOP: u8 = 0;
const NEXT_ROUTING: u8 = 43;
const NEXT_DEST_OPTS: u8 = 60;
const NEXT_ICMPV6: u8 = 58;
/// Extension headers walked before giving up with
/// [`ParseError::TooManyExtensionHeaders`].
pub const MAX_EXTENSION_HEADERS: usize = 8;
const IPV4_MIN_HEADER_LEN: usize = 20;
const IPV6_HEADER_LEN: usize = 40;
/// What an IGMPv1 query's Max Resp Code of 0 means (RFC 2236 §4).
const IGMP_V1_MAX_RESP: Duration = Duration::from_secs(10);

/// Why a packet that looked like IGMP or MLD was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ParseError {
    /// Shorter than a header, a length field or a record count claims.
    #[error("truncated")]
    Truncated,
    /// The IP version nibble is neither 4 nor 6.
    #[error("IP version is neither 4 nor 6")]
    BadIpVersion,
    /// IPv4 IHL below 5, IPv4 total length below the header length, IPv6
    /// payload length 0 (a jumbogram, RFC 2675, not handled), or a message
    /// length that matches no message of its type (an IGMP query of 9–11
    /// bytes, RFC 3376 §7.1; an MLD query of 25–27 bytes, RFC 3810 §8.1).
    #[error("length field or message length is invalid")]
    BadLength,
    /// The IPv4 header checksum does not verify (RFC 791).
    #[error("bad IPv4 header checksum")]
    BadIpv4Checksum,
    /// The IGMP checksum does not verify (RFC 3376 §4.1.2).
    #[error("bad IGMP checksum")]
    BadIgmpChecksum,
    /// The ICMPv6 checksum with the pseudo-header does not verify
    /// (RFC 4443 §2.3).
    #[error("bad ICMPv6 (MLD) checksum")]
    BadMldChecksum,
    /// An IPv4 fragment carrying IGMP (membership messages fit one packet).
    #[error("fragmented IGMP packet")]
    Fragment,
    /// A report's or a group-specific query's group is not a multicast
    /// address.
    #[error("group address is not multicast")]
    NotMulticast,
    /// More than [`MAX_EXTENSION_HEADERS`] IPv6 extension headers.
    #[error("too many IPv6 extension headers")]
    TooManyExtensionHeaders,
}

/// The protocol version of a query (RFC 3376 §7.1, RFC 3810 §8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// IGMPv1 (RFC 1112): an 8-byte query with Max Resp Code 0.
    Igmp1,
    /// IGMPv2 (RFC 2236): an 8-byte query with a non-zero Max Resp Code.
    Igmp2,
    /// IGMPv3 (RFC 3376): a query of 12 bytes or more.
    Igmp3,
    /// MLDv1 (RFC 2710): a 24-byte query.
    Mld1,
    /// MLDv2 (RFC 3810): a query of 28 bytes or more.
    Mld2,
}

/// A group record type (RFC 3376 §4.2.12, RFC 3810 §5.2.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKind {
    /// 1, MODE_IS_INCLUDE: current state, INCLUDE the sources.
    ModeIsInclude,
    /// 2, MODE_IS_EXCLUDE: current state, EXCLUDE the sources.
    ModeIsExclude,
    /// 3, CHANGE_TO_INCLUDE_MODE: filter mode changed to INCLUDE.
    ChangeToInclude,
    /// 4, CHANGE_TO_EXCLUDE_MODE: filter mode changed to EXCLUDE.
    ChangeToExclude,
    /// 5, ALLOW_NEW_SOURCES: sources newly wanted.
    AllowNewSources,
    /// 6, BLOCK_OLD_SOURCES: sources no longer wanted.
    BlockOldSources,
}

impl RecordKind {
    /// The kind of wire Record Type `t`; `None` for values RFC 3376
    /// §4.2.12 says to ignore.
    pub const fn from_wire(t: u8) -> Option<Self> {
        Some(match t {
            1 => RecordKind::ModeIsInclude,
            2 => RecordKind::ModeIsExclude,
            3 => RecordKind::ChangeToInclude,
            4 => RecordKind::ChangeToExclude,
            5 => RecordKind::AllowNewSources,
            6 => RecordKind::BlockOldSources,
            _ => return None,
        })
    }

    /// The wire Record Type value (1..=6).
    pub const fn to_wire(self) -> u8 {
        match self {
            RecordKind::ModeIsInclude => 1,
            RecordKind::ModeIsExclude => 2,
            RecordKind::ChangeToInclude => 3,
            RecordKind::ChangeToExclude => 4,
            RecordKind::AllowNewSources => 5,
            RecordKind::BlockOldSources => 6,
        }
    }
}

/// A parsed membership message, borrowing the packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    /// A Membership Query / Multicast Listener Query. Source-specific
    /// queries' source lists are validated but not exposed (a snooping
    /// switch only learns the router port from them).
    Query {
        /// Protocol version, from the message length and code.
        version: Version,
        /// The group of a group-specific query; `None` for a general query
        /// (group 0.0.0.0 or ::).
        group: Option<IpAddr>,
        /// Maximum response time, decoded (IGMPv1: 10 s; IGMPv2 and
        /// MLDv1: plain tenths of a second / milliseconds; IGMPv3 and
        /// MLDv2: the floating-point codes of RFC 3376 §4.1.1 and RFC 3810
        /// §5.1.3).
        max_resp: Duration,
    },
    /// A report or leave, as group records. An IGMPv1/v2 report or MLDv1
    /// report is one `MODE_IS_EXCLUDE` record with no sources (a join); an
    /// IGMPv2 leave or MLDv1 done is one `CHANGE_TO_INCLUDE` record with no
    /// sources (RFC 3376 §7.3.2, RFC 3810 §8.3.2).
    Report(Records<'a>),
}

/// One group record (RFC 3376 §4.2.4, RFC 3810 §5.2.4); auxiliary data is
/// skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record type.
    pub kind: RecordKind,
    /// The multicast group (checked to be multicast; may be link-local,
    /// see [`crate::is_link_local`]).
    pub group: IpAddr,
    /// The source addresses, of the group's family.
    pub sources: Sources<'a>,
}

/// The source addresses of a record: an iterator over validated bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources<'a> {
    /// A whole number of addresses of `family`.
    bytes: &'a [u8],
    family: Family,
}

impl<'a> Sources<'a> {
    const fn empty() -> Self {
        Sources {
            bytes: &[],
            family: Family::Ipv4,
        }
    }

    /// Whether there are no (more) sources.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl Iterator for Sources<'_> {
    type Item = IpAddr;

    fn next(&mut self) -> Option<IpAddr> {
        let (a, rest) = self.bytes.split_at_checked(self.family.addr_len())?;
        self.bytes = rest;
        Some(self.family.addr(a))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.bytes.len() / self.family.addr_len();
        (n, Some(n))
    }
}

impl ExactSizeIterator for Sources<'_> {}

/// The records of a report: an iterator over validated bytes (or the one
/// record an IGMPv1/v2 or MLDv1 message stands for). Records of unknown
/// type are skipped (RFC 3376 §4.2.12); [`ExactSizeIterator::len`] counts
/// the known ones left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Records<'a> {
    inner: RecordsInner<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RecordsInner<'a> {
    One(Option<Record<'a>>),
    /// `bytes` holds whole records only, checked by [`Records::parse`];
    /// `known` of them have a known type and a multicast group.
    Wire {
        bytes: &'a [u8],
        known: usize,
        family: Family,
    },
}

impl<'a> Records<'a> {
    fn one(kind: RecordKind, group: IpAddr) -> Self {
        let r = Record {
            kind,
            group,
            sources: Sources::empty(),
        };
        Records {
            inner: RecordsInner::One(Some(r)),
        }
    }

    /// Checks `count` records at the start of `bytes`: each fits, and each
    /// of a known type has a multicast group. Bytes after them are ignored.
    fn parse(bytes: &'a [u8], count: u16, family: Family) -> Result<Self, ParseError> {
        let (mut off, mut known) = (0, 0);
        for _ in 0..count {
            let r = GroupRecord::new_checked(&bytes[off..], family)?;
            if RecordKind::from_wire(r.record_type()).is_some() {
                check_multicast(r.multicast_address())?;
                known += 1;
            }
            off += r.record_len();
        }
        let bytes = &bytes[..off];
        Ok(Records {
            inner: RecordsInner::Wire {
                bytes,
                known,
                family,
            },
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        let (bytes, known, family) = match &mut self.inner {
            RecordsInner::One(r) => return r.take(),
            RecordsInner::Wire {
                bytes,
                known,
                family,
            } => (bytes, known, *family),
        };
        while *known > 0 {
            // Invariant: `bytes` holds whole records (Records::parse).
            let r = GroupRecord::new_unchecked(*bytes, family);
            let (this, rest) = bytes.split_at(r.record_len());
            *bytes = rest;
            if let Some(kind) = RecordKind::from_wire(r.record_type()) {
                *known -= 1;
                let r = GroupRecord::new_unchecked(this, family);
                let sources = Sources {
                    bytes: r.sources(),
                    family,
                };
                return Some(Record {
                    kind,
                    group: r.multicast_address(),
                    sources,
                });
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.inner {
            RecordsInner::One(r) => usize::from(r.is_some()),
            RecordsInner::Wire { known, .. } => *known,
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Records<'_> {}

fn check_multicast(a: IpAddr) -> Result<IpAddr, ParseError> {
    if a.is_multicast() {
        Ok(a)
    } else {
        Err(ParseError::NotMulticast)
    }
}

/// A query for `group` (unspecified: a general query, RFC 3376 §4.1.9, RFC 3810 §5.1.5).
fn query<'a>(
    version: Version,
    group: IpAddr,
    max_resp: Duration,
) -> Result<Message<'a>, ParseError> {
    let group = if group.is_unspecified() {
        None
    } else {
        Some(check_multicast(group)?)
    };
    Ok(Message::Query {
        version,
        group,
        max_resp,
    })
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Parses the IGMP or MLD message in IP packet `l3` (starting at the IPv4
/// or IPv6 header; trailing bytes past the IP length, e.g. Ethernet
/// padding, are ignored).
///
/// Returns `Ok(None)` for a packet that is not a membership message: IPv4
/// with protocol ≠ 2 or an IGMP type other than 0x11, 0x12, 0x16, 0x17,
/// 0x22; IPv6 whose header chain (Hop-by-Hop, Destination Options and
/// Routing headers, at most [`MAX_EXTENSION_HEADERS`]) does not reach ICMPv6
/// of type 130, 131, 132 or 143, or passes a Routing header with Segments
/// Left ≠ 0 (not yet at its destination, whose address the ICMPv6
/// checksum would need, RFC 8200 §8.1).
///
/// # Errors
/// A [`ParseError`] when the IP header or the message is malformed: short
/// ([`ParseError::Truncated`]), bad lengths, bad IPv4 header, IGMP or
/// ICMPv6 checksum, an IPv4 fragment, a non-multicast group.
pub fn parse(l3: &[u8]) -> Result<Option<Message<'_>>, ParseError> {
    match l3.first().map(|b| b >> 4) {
        None => Err(ParseError::Truncated),
        Some(4) => parse_ipv4(l3),
        Some(6) => parse_ipv6(l3),
        Some(_) => Err(ParseError::BadIpVersion),
    }
}

/// IPv4 (RFC 791): IHL, total length, header checksum, no fragments.
fn parse_ipv4(p: &[u8]) -> Result<Option<Message<'_>>, ParseError> {
    if p.len() < IPV4_MIN_HEADER_LEN {
        return Err(ParseError::Truncated);
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(be16(&p[2..4]));
    if ihl < IPV4_MIN_HEADER_LEN || total < ihl {
        return Err(ParseError::BadLength);
    }
    if p.len() < total {
        return Err(ParseError::Truncated);
    }
    if p[9] != IPPROTO_IGMP {
        return Ok(None);
    }
    if checksum::sum(&p[..ihl]) != 0xffff {
        return Err(ParseError::BadIpv4Checksum);
    }
    // MF flag or a fragment offset.
    if be16(&p[6..8]) & 0x3fff != 0 {
        return Err(ParseError::Fragment);
    }
    parse_igmp(&p[ihl..total])
}

fn parse_igmp(b: &[u8]) -> Result<Option<Message<'_>>, ParseError> {
    use wire::{IGMP_QUERY, IGMP_V1_REPORT, IGMP_V2_LEAVE, IGMP_V2_REPORT, IGMP_V3_REPORT};
    let t = *b.first().ok_or(ParseError::Truncated)?;
    if !matches!(
        t,
        IGMP_QUERY | IGMP_V1_REPORT | IGMP_V2_REPORT | IGMP_V2_LEAVE | IGMP_V3_REPORT
    ) {
        return Ok(None);
    }
    let m = Igmp::new_checked(b)?;
    if !m.verify_checksum() {
        return Err(ParseError::BadIgmpChecksum);
    }
    let group = || check_multicast(m.group_addr().into());
    let records = match m.msg_type() {
        IGMP_QUERY => return igmp_query(&m).map(Some),
        IGMP_V1_REPORT | IGMP_V2_REPORT => Records::one(RecordKind::ModeIsExclude, group()?),
        IGMP_V2_LEAVE => Records::one(RecordKind::ChangeToInclude, group()?),
        _ => Records::parse(m.rest(), m.num_records(), Family::Ipv4)?,
    };
    Ok(Some(Message::Report(records)))
}

/// The version rules of RFC 3376 §7.1.
fn igmp_query<'a>(m: &Igmp<&'a [u8]>) -> Result<Message<'a>, ParseError> {
    let code = m.max_resp_code();
    let (version, max_resp) = match m.len() {
        8 if code == 0 => (Version::Igmp1, IGMP_V1_MAX_RESP),
        8 => (Version::Igmp2, Duration::from_millis(u64::from(code) * 100)),
        9..=11 => return Err(ParseError::BadLength),
        _ => {
            QueryTail::new_checked(m.rest(), Family::Ipv4)?;
            (Version::Igmp3, wire::igmp_max_resp(code))
        }
    };
    query(version, m.group_addr().into(), max_resp)
}

/// IPv6 (RFC 8200): payload length, then the extension header chain.
fn parse_ipv6(p: &[u8]) -> Result<Option<Message<'_>>, ParseError> {
    if p.len() < IPV6_HEADER_LEN {
        return Err(ParseError::Truncated);
    }
    let plen = usize::from(be16(&p[4..6]));
    if plen == 0 {
        return Err(ParseError::BadLength);
    }
    let payload = p
        .get(IPV6_HEADER_LEN..IPV6_HEADER_LEN + plen)
        .ok_or(ParseError::Truncated)?;
    let Some(at) = icmpv6_offset(p[6], payload)? else {
        return Ok(None);
    };
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&p[8..24]).expect("16 bytes"));
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&p[24..40]).expect("16 bytes"));
    parse_mld(&payload[at..], &src, &dst)
}

/// Where ICMPv6 starts in `payload` after the Hop-by-Hop, Destination
/// Options and Routing headers (RFC 8200 §4); `None` if the chain leads
/// elsewhere or through a Routing header with Segments Left ≠ 0.
fn icmpv6_offset(mut next: u8, payload: &[u8]) -> Result<Option<usize>, ParseError> {
    let mut at = 0;
    for _ in 0..=MAX_EXTENSION_HEADERS {
        match next {
            NEXT_ICMPV6 => return Ok(Some(at)),
            NEXT_HOP_BY_HOP | NEXT_DEST_OPTS | NEXT_ROUTING => {
                let h = payload.get(at..at + 2).ok_or(ParseError::Truncated)?;
                // Hdr Ext Len in 8-byte units, not counting the first 8.
                let len = (usize::from(h[1]) + 1) * 8;
                let h = payload.get(at..at + len).ok_or(ParseError::Truncated)?;
                if next == NEXT_ROUTING && h[3] != 0 {
                    return Ok(None);
                }
                next = h[0];
                at += len;
            }
            _ => return Ok(None),
        }
    }
    Err(ParseError::TooManyExtensionHeaders)
}

fn parse_mld<'a>(
    b: &'a [u8],
    src: &Ipv6Addr,
    dst: &Ipv6Addr,
) -> Result<Option<Message<'a>>, ParseError> {
    use wire::{MLD_QUERY, MLD_V1_DONE, MLD_V1_REPORT, MLD_V2_REPORT};
    let t = *b.first().ok_or(ParseError::Truncated)?;
    if !matches!(t, MLD_QUERY | MLD_V1_REPORT | MLD_V1_DONE | MLD_V2_REPORT) {
        return Ok(None);
    }
    let m = Mld::new_checked(b)?;
    if !m.verify_checksum(src, dst) {
        return Err(ParseError::BadMldChecksum);
    }
    let group = || {
        let a = m.multicast_address().ok_or(ParseError::Truncated)?;
        check_multicast(a.into())
    };
    let records = match m.msg_type() {
        MLD_QUERY => return mld_query(&m).map(Some),
        MLD_V1_REPORT => Records::one(RecordKind::ModeIsExclude, group()?),
        MLD_V1_DONE => Records::one(RecordKind::ChangeToInclude, group()?),
        _ => Records::parse(m.rest(wire::MLD_HEADER_LEN), m.num_records(), Family::Ipv6)?,
    };
    Ok(Some(Message::Report(records)))
}

/// The version rules of RFC 3810 §8.1.
fn mld_query<'a>(m: &Mld<&'a [u8]>) -> Result<Message<'a>, ParseError> {
    let code = m.max_resp_code();
    let (version, max_resp) = match m.len() {
        0..=23 => return Err(ParseError::Truncated),
        24 => (Version::Mld1, Duration::from_millis(u64::from(code))),
        25..=27 => return Err(ParseError::BadLength),
        _ => {
            QueryTail::new_checked(m.rest(wire::MLD_V1_LEN), Family::Ipv6)?;
            (Version::Mld2, wire::mld_max_resp(code))
        }
    };
    let group = m.multicast_address().ok_or(ParseError::Truncated)?;
    query(version, group.into(), max_resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    /// An IPv4 packet (no options) carrying `igmp`, checksums filled.
    fn ipv4(igmp: &[u8], frag: u16) -> Vec<u8> {
        let mut p = vec![
            0x45,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
            IPPROTO_IGMP,
            0,
            0,
            10,
            0,
            0,
            1,
            224,
            0,
            0,
            1,
        ];
        let total = u16::try_from(20 + igmp.len()).unwrap();
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        let c = checksum::finish(checksum::sum(&p));
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let mut m = igmp.to_vec();
        let c = checksum::finish(checksum::sum(&m));
        m[2..4].copy_from_slice(&c.to_be_bytes());
        p.extend(m);
        p
    }

    /// An IPv6 packet with extension headers `ext` (each `(type, bytes)`)
    /// before ICMPv6 `icmp`, checksum filled.
    fn ipv6(ext: &[(u8, Vec<u8>)], icmp: &[u8]) -> Vec<u8> {
        let (src, dst): (Ipv6Addr, Ipv6Addr) =
            ("fe80::1".parse().unwrap(), "ff02::1".parse().unwrap());
        let mut payload = Vec::new();
        for (i, (_, h)) in ext.iter().enumerate() {
            let mut h = h.clone();
            h[0] = ext.get(i + 1).map_or(NEXT_ICMPV6, |e| e.0);
            payload.extend(h);
        }
        let mut m = icmp.to_vec();
        let c = checksum::finish(checksum::icmpv6_sum(&src, &dst, &m));
        m[2..4].copy_from_slice(&c.to_be_bytes());
        payload.extend(m);
        let mut p = vec![0x60, 0, 0, 0];
        p.extend(u16::try_from(payload.len()).unwrap().to_be_bytes());
        p.push(ext.first().map_or(NEXT_ICMPV6, |e| e.0));
        p.push(1);
        p.extend(src.octets());
        p.extend(dst.octets());
        p.extend(payload);
        p
    }

    /// The query in `p` as an owned tuple.
    fn query(p: &[u8]) -> Result<(Version, Option<IpAddr>, Duration), ParseError> {
        match parse(p)? {
            Some(Message::Query {
                version,
                group,
                max_resp,
            }) => Ok((version, group, max_resp)),
            m => panic!("not a query: {m:?}"),
        }
    }

    fn mld_query(len: usize) -> Vec<u8> {
        let mut m = vec![0u8; len];
        m[0] = wire::MLD_QUERY;
        m[4..6].copy_from_slice(&1000u16.to_be_bytes());
        m
    }

    #[test]
    fn igmp_query_versions() {
        let q = |m: &[u8]| query(&ipv4(m, 0));
        let v1 = (Version::Igmp1, None, IGMP_V1_MAX_RESP);
        assert_eq!(q(&[0x11, 0, 0, 0, 0, 0, 0, 0]), Ok(v1));
        let group = Some(IpAddr::V4(Ipv4Addr::new(239, 0, 0, 1)));
        let v2 = (Version::Igmp2, group, Duration::from_millis(500));
        assert_eq!(q(&[0x11, 5, 0, 0, 239, 0, 0, 1]), Ok(v2));
        for len in 9..12 {
            let mut m = vec![0u8; len];
            m[0] = 0x11;
            assert_eq!(q(&m), Err(ParseError::BadLength), "{len} bytes");
        }
        // v3 announcing one source but carrying none.
        assert_eq!(
            q(&[0x11, 5, 0, 0, 0, 0, 0, 0, 2, 125, 0, 1]),
            Err(ParseError::Truncated)
        );
        assert_eq!(
            q(&[0x11, 5, 0, 0, 10, 0, 0, 1]),
            Err(ParseError::NotMulticast)
        );
    }

    #[test]
    fn igmp_reports_need_multicast_groups() {
        for t in [0x12, 0x16, 0x17] {
            assert_eq!(
                parse(&ipv4(&[t, 0, 0, 0, 10, 0, 0, 1], 0)),
                Err(ParseError::NotMulticast)
            );
        }
        let v3 = [0x22, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0, 10, 0, 0, 1];
        assert_eq!(parse(&ipv4(&v3, 0)), Err(ParseError::NotMulticast));
    }

    #[test]
    fn unknown_record_types_are_skipped() {
        // Record type 9 (unknown, any group) then TO_EX 239.1.1.1.
        let m = [
            0x22, 0, 0, 0, 0, 0, 0, 2, 9, 0, 0, 0, 10, 0, 0, 1, 4, 0, 0, 0, 239, 1, 1, 1,
        ];
        let p = ipv4(&m, 0);
        let Message::Report(r) = parse(&p).unwrap().unwrap() else {
            panic!()
        };
        assert_eq!(r.len(), 1);
        let groups: Vec<_> = r.map(|r| (r.kind, r.group)).collect();
        assert_eq!(
            groups,
            [(
                RecordKind::ChangeToExclude,
                IpAddr::V4(Ipv4Addr::new(239, 1, 1, 1))
            )]
        );
    }

    #[test]
    fn ipv4_header_checks() {
        let good = ipv4(&[0x16, 0, 0, 0, 239, 0, 0, 1], 0);
        assert!(parse(&good).unwrap().is_some());
        // More Fragments, then a non-zero offset.
        assert_eq!(
            parse(&ipv4(&[0x16, 0, 0, 0, 239, 0, 0, 1], 0x2000)),
            Err(ParseError::Fragment)
        );
        assert_eq!(
            parse(&ipv4(&[0x16, 0, 0, 0, 239, 0, 0, 1], 0x0001)),
            Err(ParseError::Fragment)
        );
        let mut bad_ihl = good.clone();
        bad_ihl[0] = 0x44;
        assert_eq!(parse(&bad_ihl), Err(ParseError::BadLength));
        let mut short_total = good.clone();
        short_total[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(parse(&short_total), Err(ParseError::BadLength));
        // Unknown IGMP type (0x13, DVMRP): not for snooping.
        assert_eq!(parse(&ipv4(&[0x13, 0, 0, 0, 0, 0, 0, 0], 0)), Ok(None));
    }

    #[test]
    fn mld_query_versions() {
        let q = |len| query(&ipv6(&[], &mld_query(len)));
        let max_resp = Duration::from_secs(1);
        assert_eq!(q(24), Ok((Version::Mld1, None, max_resp)));
        assert_eq!(q(28), Ok((Version::Mld2, None, max_resp)));
        for len in [25, 26, 27] {
            assert_eq!(q(len), Err(ParseError::BadLength));
        }
        assert_eq!(q(20), Err(ParseError::Truncated));
    }

    #[test]
    fn ipv6_extension_chain() {
        let hbh = (NEXT_HOP_BY_HOP, vec![0, 0, 5, 2, 0, 0, 1, 0]);
        let dst = (
            NEXT_DEST_OPTS,
            vec![0, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        );
        let rt_done = (NEXT_ROUTING, vec![0, 0, 4, 0, 0, 0, 0, 0]);
        let rt_left = (NEXT_ROUTING, vec![0, 0, 4, 1, 0, 0, 0, 0]);
        let q = mld_query(28);
        let chain = [hbh.clone(), dst.clone(), rt_done];
        assert!(parse(&ipv6(&chain, &q)).unwrap().is_some());
        assert_eq!(parse(&ipv6(&[hbh.clone(), rt_left], &q)), Ok(None));
        let long = vec![dst; MAX_EXTENSION_HEADERS + 1];
        assert_eq!(
            parse(&ipv6(&long, &q)),
            Err(ParseError::TooManyExtensionHeaders)
        );
        // A Hop-by-Hop header longer than the payload.
        let mut p = ipv6(&[hbh], &q);
        p[41] = 200;
        assert_eq!(parse(&p), Err(ParseError::Truncated));
        // Payload length 0: a jumbogram.
        p[4..6].fill(0);
        assert_eq!(parse(&p), Err(ParseError::BadLength));
    }
}
