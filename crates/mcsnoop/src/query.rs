//! Complete Ethernet frames of membership messages: the general queries a
//! snooping querier sends, and reports for tests and examples.
//!
//! Every frame is Ethernet II (no VLAN tag, not padded to 60 bytes) with
//! an IPv4 header carrying the Router Alert option (RFC 2113; RFC 3376 §4
//! and RFC 2236 §2 ask for it) or an IPv6 header with a Hop-by-Hop header
//! carrying Router Alert value 0, MLD (RFC 2711; RFC 3810 §5), hop limit /
//! TTL 1 and every checksum filled. [`crate::parse`] reads back what these
//! build, from byte 14 on.
//!
//! Builders allocate the returned frame; they are for the control path.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::time::Duration;

use crate::checksum;
use crate::group_mac;
use crate::wire::{self, Family, GroupRecord, Igmp, Mld, QueryTail};
use crate::RecordKind;

/// Ethernet header length in bytes.
const ETH_LEN: usize = 14;
/// IPv4 header with the 4-byte Router Alert option, in bytes.
const IPV4_RA_LEN: usize = 24;
/// IPv6 header plus an 8-byte Hop-by-Hop header, in bytes.
const IPV6_HBH_LEN: usize = 48;
/// Querier's Robustness Variable sent in queries (RFC 3376 §8.1 default).
pub const QRV: u8 = 2;
/// Querier's Query Interval sent in queries, seconds (RFC 3376 §8.2
/// default; 125 < 128, so it is its own code).
pub const QQI_SECS: u8 = 125;

const ALL_SYSTEMS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 1);
const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);
const IGMPV3_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 22);
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
const ALL_ROUTERS6: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
const MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);

/// An IGMPv3 general query (RFC 3376 §4.1: group 0.0.0.0, no sources,
/// QRV 2, QQIC 125 s) from `src_mac`/`src_ip` to 224.0.0.1
/// (01:00:5e:00:00:01), Max Resp Code encoded from `max_resp` (rounded
/// down, at most 3174.4 s). 50 bytes.
pub fn igmp_general_query(src_mac: [u8; 6], src_ip: Ipv4Addr, max_resp: Duration) -> Vec<u8> {
    let mut igmp = [0u8; 12];
    let mut m = Igmp::new_unchecked(&mut igmp[..]);
    m.set_msg_type(wire::IGMP_QUERY);
    m.set_max_resp_code(wire::igmp_max_resp_code(max_resp));
    m.set_group_addr(Ipv4Addr::UNSPECIFIED);
    let mut tail = QueryTail::new_unchecked(m.rest_mut());
    tail.set_qrv(QRV);
    tail.set_qqic(QQI_SECS);
    tail.set_num_sources(0);
    m.fill_checksum();
    ipv4_frame(src_mac, src_ip, ALL_SYSTEMS, &igmp)
}

/// An MLDv2 general query (RFC 3810 §5.1: address ::, no sources, QRV 2,
/// QQIC 125 s) from `src_mac`/`src_ip` (which should be link-local,
/// RFC 3810 §5.1.14) to ff02::1 (33:33:00:00:00:01), Maximum Response Code
/// encoded from `max_resp` (rounded down, at most 8387.584 s). 90 bytes.
pub fn mld_general_query(src_mac: [u8; 6], src_ip: Ipv6Addr, max_resp: Duration) -> Vec<u8> {
    let mut mld = [0u8; 28];
    let mut m = Mld::new_unchecked(&mut mld[..]);
    m.set_msg_type(wire::MLD_QUERY);
    m.set_max_resp_code(wire::mld_max_resp_code(max_resp));
    m.set_multicast_address(Ipv6Addr::UNSPECIFIED);
    let mut tail = QueryTail::new_unchecked(m.rest_mut(wire::MLD_V1_LEN));
    tail.set_qrv(QRV);
    tail.set_qqic(QQI_SECS);
    tail.set_num_sources(0);
    m.fill_checksum(&src_ip, &ALL_NODES);
    ipv6_frame(src_mac, src_ip, ALL_NODES, &mld)
}

/// An IGMPv2 Membership Report for `group` (RFC 2236 §2), sent to the
/// group. 46 bytes.
pub fn igmp_v2_report(src_mac: [u8; 6], src_ip: Ipv4Addr, group: Ipv4Addr) -> Vec<u8> {
    igmp_v2(wire::IGMP_V2_REPORT, src_mac, src_ip, group, group)
}

/// An IGMPv2 Leave Group for `group` (RFC 2236 §2), sent to 224.0.0.2.
/// 46 bytes.
pub fn igmp_v2_leave(src_mac: [u8; 6], src_ip: Ipv4Addr, group: Ipv4Addr) -> Vec<u8> {
    igmp_v2(wire::IGMP_V2_LEAVE, src_mac, src_ip, group, ALL_ROUTERS)
}

fn igmp_v2(t: u8, src_mac: [u8; 6], src_ip: Ipv4Addr, group: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let mut igmp = [0u8; wire::IGMP_HEADER_LEN];
    let mut m = Igmp::new_unchecked(&mut igmp[..]);
    m.set_msg_type(t);
    m.set_group_addr(group);
    m.fill_checksum();
    ipv4_frame(src_mac, src_ip, dst, &igmp)
}

/// An IGMPv3 Membership Report (RFC 3376 §4.2) with one group record per
/// `(kind, group, sources)`, sent to 224.0.0.22.
///
/// # Panics
/// If the records do not fit one IPv4 packet (65,535 bytes).
pub fn igmp_v3_report(
    src_mac: [u8; 6],
    src_ip: Ipv4Addr,
    records: &[(RecordKind, Ipv4Addr, &[Ipv4Addr])],
) -> Vec<u8> {
    let records: Vec<(RecordKind, IpAddr, Vec<IpAddr>)> = records
        .iter()
        .map(|(k, g, s)| (*k, (*g).into(), s.iter().map(|&a| a.into()).collect()))
        .collect();
    let mut igmp = vec![0u8; wire::IGMP_HEADER_LEN + records_len(&records, Family::Ipv4)];
    let mut m = Igmp::new_unchecked(&mut igmp[..]);
    m.set_msg_type(wire::IGMP_V3_REPORT);
    m.set_num_records(count(records.len()));
    emit_records(m.rest_mut(), &records, Family::Ipv4);
    m.fill_checksum();
    ipv4_frame(src_mac, src_ip, IGMPV3_ROUTERS, &igmp)
}

/// An MLDv2 Multicast Listener Report (RFC 3810 §5.2) with one record per
/// `(kind, group, sources)`, sent to ff02::16.
///
/// # Panics
/// If the records do not fit one IPv6 packet (65,535 bytes of payload).
pub fn mld_v2_report(
    src_mac: [u8; 6],
    src_ip: Ipv6Addr,
    records: &[(RecordKind, Ipv6Addr, &[Ipv6Addr])],
) -> Vec<u8> {
    let records: Vec<(RecordKind, IpAddr, Vec<IpAddr>)> = records
        .iter()
        .map(|(k, g, s)| (*k, (*g).into(), s.iter().map(|&a| a.into()).collect()))
        .collect();
    let mut mld = vec![0u8; wire::MLD_HEADER_LEN + records_len(&records, Family::Ipv6)];
    let mut m = Mld::new_unchecked(&mut mld[..]);
    m.set_msg_type(wire::MLD_V2_REPORT);
    m.set_num_records(count(records.len()));
    emit_records(m.rest_mut(wire::MLD_HEADER_LEN), &records, Family::Ipv6);
    m.fill_checksum(&src_ip, &MLDV2_ROUTERS);
    ipv6_frame(src_mac, src_ip, MLDV2_ROUTERS, &mld)
}

/// An MLDv1 Multicast Listener Report for `group` (RFC 2710 §3), sent to
/// the group. 86 bytes.
pub fn mld_v1_report(src_mac: [u8; 6], src_ip: Ipv6Addr, group: Ipv6Addr) -> Vec<u8> {
    mld_v1(wire::MLD_V1_REPORT, src_mac, src_ip, group, group)
}

/// An MLDv1 Multicast Listener Done for `group` (RFC 2710 §3), sent to
/// ff02::2. 86 bytes.
pub fn mld_v1_done(src_mac: [u8; 6], src_ip: Ipv6Addr, group: Ipv6Addr) -> Vec<u8> {
    mld_v1(wire::MLD_V1_DONE, src_mac, src_ip, group, ALL_ROUTERS6)
}

fn mld_v1(t: u8, src_mac: [u8; 6], src_ip: Ipv6Addr, group: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    let mut mld = [0u8; wire::MLD_V1_LEN];
    let mut m = Mld::new_unchecked(&mut mld[..]);
    m.set_msg_type(t);
    m.set_multicast_address(group);
    m.fill_checksum(&src_ip, &dst);
    ipv6_frame(src_mac, src_ip, dst, &mld)
}

fn count(n: usize) -> u16 {
    u16::try_from(n).expect("at most 65535 records")
}

fn records_len(records: &[(RecordKind, IpAddr, Vec<IpAddr>)], family: Family) -> usize {
    let alen = family.addr_len();
    records
        .iter()
        .map(|(_, _, s)| wire::RECORD_HEADER_LEN + alen * (1 + s.len()))
        .sum()
}

fn emit_records(mut b: &mut [u8], records: &[(RecordKind, IpAddr, Vec<IpAddr>)], family: Family) {
    for (kind, group, sources) in records {
        let len = wire::RECORD_HEADER_LEN + family.addr_len() * (1 + sources.len());
        let (this, rest) = b.split_at_mut(len);
        GroupRecord::new_unchecked(this, family).emit(kind.to_wire(), *group, sources);
        b = rest;
    }
}

/// Ethernet header to the group MAC of `dst`.
fn ethernet(frame: &mut [u8], src_mac: [u8; 6], dst: IpAddr, ethertype: u16) {
    frame[0..6].copy_from_slice(&group_mac(dst));
    frame[6..12].copy_from_slice(&src_mac);
    frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
}

/// Ethernet + IPv4 (TTL 1, TOS 0xc0 internetwork control as Linux sends,
/// Router Alert) + `igmp`.
fn ipv4_frame(src_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, igmp: &[u8]) -> Vec<u8> {
    let total = IPV4_RA_LEN + igmp.len();
    let mut f = vec![0u8; ETH_LEN + total];
    ethernet(&mut f, src_mac, dst.into(), 0x0800);
    let ip = &mut f[ETH_LEN..];
    ip[0] = 0x40 | (IPV4_RA_LEN / 4) as u8;
    ip[1] = 0xc0;
    let total = u16::try_from(total).expect("IGMP message fits an IPv4 packet");
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[6] = 0x40; // DF, as Linux sends
    ip[8] = 1; // TTL
    ip[9] = 2; // IGMP
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    ip[20..24].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]); // Router Alert, RFC 2113
    let c = checksum::finish(checksum::sum(&ip[..IPV4_RA_LEN]));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip[IPV4_RA_LEN..].copy_from_slice(igmp);
    f
}

/// Ethernet + IPv6 (hop limit 1) + Hop-by-Hop (Router Alert 0, PadN) +
/// `mld`.
fn ipv6_frame(src_mac: [u8; 6], src: Ipv6Addr, dst: Ipv6Addr, mld: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; ETH_LEN + IPV6_HBH_LEN + mld.len()];
    ethernet(&mut f, src_mac, dst.into(), 0x86dd);
    let ip = &mut f[ETH_LEN..];
    ip[0] = 0x60;
    let plen = u16::try_from(8 + mld.len()).expect("MLD message fits an IPv6 packet");
    ip[4..6].copy_from_slice(&plen.to_be_bytes());
    ip[6] = 0; // Hop-by-Hop
    ip[7] = 1; // hop limit
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
    // Next header ICMPv6, length 0 (8 bytes), Router Alert (type 5, 2
    // bytes, value 0 = MLD, RFC 2711 §2.1), PadN of 2 bytes.
    ip[40..48].copy_from_slice(&[58, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00]);
    ip[IPV6_HBH_LEN..].copy_from_slice(mld);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, Message, Record, Version};

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];
    const V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

    fn ll6() -> Ipv6Addr {
        "fe80::9".parse().unwrap()
    }

    fn records(f: &[u8]) -> Vec<(RecordKind, IpAddr, Vec<IpAddr>)> {
        match parse(&f[ETH_LEN..]).unwrap().unwrap() {
            Message::Report(r) => r
                .map(
                    |Record {
                         kind,
                         group,
                         sources,
                     }| (kind, group, sources.collect()),
                )
                .collect(),
            m => panic!("{m:?}"),
        }
    }

    #[test]
    fn igmp_general_query_round_trip() {
        let f = igmp_general_query(MAC, V4, Duration::from_secs(10));
        assert_eq!(f.len(), 50);
        assert_eq!(&f[..6], &[0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]);
        assert_eq!(f[ETH_LEN + 8], 1, "TTL 1");
        assert_eq!(
            &f[ETH_LEN + 20..ETH_LEN + 24],
            &[0x94, 0x04, 0, 0],
            "Router Alert"
        );
        assert_eq!(&f[ETH_LEN + 16..ETH_LEN + 20], &[224, 0, 0, 1]);
        // S|QRV, QQIC, no sources.
        assert_eq!(&f[ETH_LEN + 32..], &[2, 125, 0, 0]);
        let m = parse(&f[ETH_LEN..]).unwrap().unwrap();
        let max_resp = Duration::from_secs(10);
        assert_eq!(
            m,
            Message::Query {
                version: Version::Igmp3,
                group: None,
                max_resp
            }
        );
        // A long Max Resp Time uses the floating-point code, rounded down.
        let f = igmp_general_query(MAC, V4, Duration::from_secs(25));
        let Message::Query { max_resp, .. } = parse(&f[ETH_LEN..]).unwrap().unwrap() else {
            panic!()
        };
        assert_eq!(max_resp, Duration::from_millis(24_800));
    }

    #[test]
    fn mld_general_query_round_trip() {
        let f = mld_general_query(MAC, ll6(), Duration::from_secs(10));
        assert_eq!(f.len(), 90);
        assert_eq!(&f[..6], &[0x33, 0x33, 0, 0, 0, 1]);
        assert_eq!(f[ETH_LEN + 7], 1, "hop limit 1");
        assert_eq!(&f[ETH_LEN + 40..ETH_LEN + 48], &[58, 0, 5, 2, 0, 0, 1, 0]);
        let m = parse(&f[ETH_LEN..]).unwrap().unwrap();
        let max_resp = Duration::from_secs(10);
        assert_eq!(
            m,
            Message::Query {
                version: Version::Mld2,
                group: None,
                max_resp
            }
        );
    }

    #[test]
    fn v1_v2_reports_round_trip() {
        let g = Ipv4Addr::new(239, 9, 9, 9);
        let join = igmp_v2_report(MAC, V4, g);
        assert_eq!(join.len(), 46);
        assert_eq!(
            records(&join),
            [(RecordKind::ModeIsExclude, g.into(), vec![])]
        );
        let leave = igmp_v2_leave(MAC, V4, g);
        assert_eq!(&leave[ETH_LEN + 16..ETH_LEN + 20], &[224, 0, 0, 2]);
        assert_eq!(
            records(&leave),
            [(RecordKind::ChangeToInclude, g.into(), vec![])]
        );
        let g6: Ipv6Addr = "ff0e::9".parse().unwrap();
        let join = mld_v1_report(MAC, ll6(), g6);
        assert_eq!(join.len(), 86);
        assert_eq!(
            records(&join),
            [(RecordKind::ModeIsExclude, g6.into(), vec![])]
        );
        let done = mld_v1_done(MAC, ll6(), g6);
        assert_eq!(
            records(&done),
            [(RecordKind::ChangeToInclude, g6.into(), vec![])]
        );
    }

    #[test]
    fn v3_reports_round_trip() {
        let s4 = [Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 1, 1, 2)];
        let g4 = Ipv4Addr::new(232, 0, 0, 1);
        let f = igmp_v3_report(
            MAC,
            V4,
            &[
                (RecordKind::ModeIsInclude, g4, &s4),
                (RecordKind::BlockOldSources, g4, &s4[..1]),
            ],
        );
        assert_eq!(
            records(&f),
            [
                (
                    RecordKind::ModeIsInclude,
                    g4.into(),
                    s4.map(IpAddr::from).to_vec()
                ),
                (RecordKind::BlockOldSources, g4.into(), vec![s4[0].into()]),
            ]
        );
        let s6: [Ipv6Addr; 1] = ["2001:db8::1".parse().unwrap()];
        let g6: Ipv6Addr = "ff3e::8000:1".parse().unwrap();
        let f = mld_v2_report(MAC, ll6(), &[(RecordKind::AllowNewSources, g6, &s6)]);
        assert_eq!(
            records(&f),
            [(RecordKind::AllowNewSources, g6.into(), vec![s6[0].into()])]
        );
    }
}
