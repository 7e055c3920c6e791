//! Byte fixtures in the formats of RFC 3376 §4, RFC 2236 §2, RFC 2710 §3
//! and RFC 3810 §5, laid out as Linux sends them (IPv4 Router Alert, TOS
//! 0xc0, DF; IPv6 Hop-by-Hop Router Alert + PadN). Checksums computed
//! independently of the crate (by a script with the RFC 1071 algorithm).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use mcsnoop::{parse, query, Message, ParseError, Record, RecordKind, Version};

const IGMPV3_REPORT_LINUX: [u8; 40] = [
    0x46, 0xc0, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x42, 0x47, 0xc0, 0xa8, 0x01, 0x0a,
    0xe0, 0x00, 0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x22, 0x00, 0xe9, 0xfb, 0x00, 0x00, 0x00, 0x01,
    0x04, 0x00, 0x00, 0x00, 0xef, 0x01, 0x01, 0x01,
];
const IGMPV3_REPORT_SSM: [u8; 64] = [
    0x46, 0xc0, 0x00, 0x40, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0x42, 0x2f, 0xc0, 0xa8, 0x01, 0x0a,
    0xe0, 0x00, 0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x22, 0x00, 0x42, 0x4c, 0x00, 0x00, 0x00, 0x02,
    0x05, 0x01, 0x00, 0x02, 0xe8, 0x01, 0x01, 0x01, 0x0a, 0x01, 0x01, 0x01, 0x0a, 0x01, 0x01, 0x02,
    0xde, 0xad, 0xbe, 0xef, 0x06, 0x00, 0x00, 0x01, 0xe8, 0x01, 0x01, 0x02, 0x0a, 0x01, 0x01, 0x03,
];
const IGMPV2_QUERY: [u8; 32] = [
    0x46, 0xc0, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x82, 0x6d, 0xc0, 0xa8, 0x01, 0x01,
    0xe0, 0x00, 0x00, 0x01, 0x94, 0x04, 0x00, 0x00, 0x11, 0x64, 0xee, 0x9b, 0x00, 0x00, 0x00, 0x00,
];
const IGMPV3_QUERY_GSS: [u8; 40] = [
    0x46, 0xc0, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x71, 0x62, 0xc0, 0xa8, 0x01, 0x01,
    0xef, 0x02, 0x02, 0x02, 0x94, 0x04, 0x00, 0x00, 0x11, 0x8a, 0xe7, 0xe0, 0xef, 0x02, 0x02, 0x02,
    0x02, 0x7d, 0x00, 0x01, 0x0a, 0x09, 0x09, 0x09,
];
const MLDV2_REPORT_LINUX: [u8; 76] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x16, 0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00,
    0x8f, 0x00, 0x6f, 0x03, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0xff, 0x05, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x03,
];
const MLDV1_QUERY: [u8; 72] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00,
    0x82, 0x00, 0x59, 0x17, 0x27, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

const MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

fn v6(s: &str) -> IpAddr {
    IpAddr::V6(s.parse().unwrap())
}

/// The report's records as (kind, group, sources).
fn records(p: &[u8]) -> Vec<(RecordKind, IpAddr, Vec<IpAddr>)> {
    match parse(p).unwrap().unwrap() {
        Message::Report(r) => r
            .map(
                |Record {
                     kind,
                     group,
                     sources,
                 }| (kind, group, sources.collect()),
            )
            .collect(),
        m => panic!("not a report: {m:?}"),
    }
}

#[test]
fn parse_igmpv3_report_linux() {
    assert_eq!(
        records(&IGMPV3_REPORT_LINUX),
        [(RecordKind::ChangeToExclude, v4([239, 1, 1, 1]), vec![])]
    );
}

#[test]
fn parse_igmpv3_report_with_sources_and_aux_data() {
    assert_eq!(
        records(&IGMPV3_REPORT_SSM),
        [
            (
                RecordKind::AllowNewSources,
                v4([232, 1, 1, 1]),
                vec![v4([10, 1, 1, 1]), v4([10, 1, 1, 2])]
            ),
            (
                RecordKind::BlockOldSources,
                v4([232, 1, 1, 2]),
                vec![v4([10, 1, 1, 3])]
            ),
        ]
    );
}

#[test]
fn parse_igmpv2_general_query() {
    assert_eq!(
        parse(&IGMPV2_QUERY).unwrap().unwrap(),
        Message::Query {
            version: Version::Igmp2,
            group: None,
            max_resp: Duration::from_secs(10)
        }
    );
}

#[test]
fn parse_igmpv3_group_and_source_specific_query() {
    // Max Resp Code 0x8a: exp 0, mant 10: (10 | 16) << 3 = 208 tenths.
    assert_eq!(
        parse(&IGMPV3_QUERY_GSS).unwrap().unwrap(),
        Message::Query {
            version: Version::Igmp3,
            group: Some(v4([239, 2, 2, 2])),
            max_resp: Duration::from_millis(20_800)
        }
    );
}

#[test]
fn parse_mldv2_report_linux() {
    assert_eq!(
        records(&MLDV2_REPORT_LINUX),
        [(RecordKind::ChangeToExclude, v6("ff05::1:3"), vec![])]
    );
}

#[test]
fn parse_mldv1_general_query() {
    assert_eq!(
        parse(&MLDV1_QUERY).unwrap().unwrap(),
        Message::Query {
            version: Version::Mld1,
            group: None,
            max_resp: Duration::from_secs(10)
        }
    );
}

#[test]
fn construct_matches_linux_captures() {
    let f = query::igmp_v3_report(
        MAC,
        Ipv4Addr::new(192, 168, 1, 10),
        &[(
            RecordKind::ChangeToExclude,
            Ipv4Addr::new(239, 1, 1, 1),
            &[],
        )],
    );
    assert_eq!(&f[..6], &[0x01, 0x00, 0x5e, 0x00, 0x00, 0x16]);
    assert_eq!(&f[6..12], &MAC);
    assert_eq!(&f[12..14], &[0x08, 0x00]);
    assert_eq!(&f[14..], &IGMPV3_REPORT_LINUX);

    let src: Ipv6Addr = "fe80::200:ff:fe00:1".parse().unwrap();
    let g: Ipv6Addr = "ff05::1:3".parse().unwrap();
    let f = query::mld_v2_report(MAC, src, &[(RecordKind::ChangeToExclude, g, &[])]);
    assert_eq!(&f[..6], &[0x33, 0x33, 0x00, 0x00, 0x00, 0x16]);
    assert_eq!(&f[12..14], &[0x86, 0xdd]);
    assert_eq!(&f[14..], &MLDV2_REPORT_LINUX);
}

#[test]
fn ethernet_padding_is_ignored() {
    let mut padded = IGMPV2_QUERY.to_vec();
    padded.resize(46, 0);
    assert_eq!(parse(&padded), parse(&IGMPV2_QUERY));
    let mut padded = MLDV1_QUERY.to_vec();
    padded.extend_from_slice(&[0xa5; 7]);
    assert_eq!(parse(&padded), parse(&MLDV1_QUERY));
}

#[test]
fn corrupted_checksums_are_refused() {
    let all: [&[u8]; 6] = [
        &IGMPV3_REPORT_LINUX,
        &IGMPV3_REPORT_SSM,
        &IGMPV2_QUERY,
        &IGMPV3_QUERY_GSS,
        &MLDV2_REPORT_LINUX,
        &MLDV1_QUERY,
    ];
    for p in all {
        // Flip one bit of every byte after the IP header in turn: the
        // message checksum catches it.
        let ip_len = if p[0] >> 4 == 4 { 24 } else { 48 };
        for i in ip_len..p.len() {
            let mut bad = p.to_vec();
            bad[i] ^= 0x10;
            let want = if ip_len == 24 {
                ParseError::BadIgmpChecksum
            } else {
                ParseError::BadMldChecksum
            };
            match parse(&bad) {
                Err(e) => assert_eq!(e, want, "byte {i} of {p:02x?}"),
                // A flipped type byte may make it another message type.
                Ok(None) => assert!(i == ip_len, "byte {i}"),
                Ok(Some(m)) => panic!("byte {i}: {m:?}"),
            }
        }
    }
    // The IPv4 header checksum, on its own: flip the TTL.
    let mut bad = IGMPV2_QUERY;
    bad[8] ^= 1;
    assert_eq!(parse(&bad), Err(ParseError::BadIpv4Checksum));
    // The pseudo-header is covered: another source address.
    let mut bad = MLDV1_QUERY;
    bad[23] ^= 1;
    assert_eq!(parse(&bad), Err(ParseError::BadMldChecksum));
}

#[test]
fn every_truncation_is_refused() {
    let all: [&[u8]; 6] = [
        &IGMPV3_REPORT_LINUX,
        &IGMPV3_REPORT_SSM,
        &IGMPV2_QUERY,
        &IGMPV3_QUERY_GSS,
        &MLDV2_REPORT_LINUX,
        &MLDV1_QUERY,
    ];
    for p in all {
        for n in 0..p.len() {
            assert_eq!(
                parse(&p[..n]),
                Err(ParseError::Truncated),
                "{n} bytes of {p:02x?}"
            );
        }
    }
}

#[test]
fn not_membership_messages() {
    // IPv4 UDP.
    let mut udp = IGMPV2_QUERY;
    udp[9] = 17;
    assert_eq!(parse(&udp), Ok(None));
    // IPv6 whose Hop-by-Hop header leads to UDP.
    let mut v6udp = MLDV1_QUERY;
    v6udp[40] = 17;
    assert_eq!(parse(&v6udp), Ok(None));
    // IPv6 Hop-by-Hop then ICMPv6 echo request: not MLD, checksum unchecked.
    let mut echo = MLDV1_QUERY;
    echo[48] = 128;
    assert_eq!(parse(&echo), Ok(None));
    assert_eq!(parse(&[0x50; 40]), Err(ParseError::BadIpVersion));
}
