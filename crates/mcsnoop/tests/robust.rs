//! `parse` never panics, on arbitrary bytes and on valid frames with bytes
//! changed, cut or appended; whatever it accepts iterates to the end and
//! can be applied to an MDB.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use mcsnoop::{parse, query, Mdb, MdbConfig, Message, RecordKind};
use proptest::prelude::*;

/// Frames from every builder, without their Ethernet header.
fn valid_packets() -> Vec<Vec<u8>> {
    let mac = [2, 0, 0, 0, 0, 1];
    let v4 = Ipv4Addr::new(10, 0, 0, 1);
    let v6: Ipv6Addr = "fe80::1".parse().unwrap();
    let g4 = Ipv4Addr::new(239, 1, 2, 3);
    let g6: Ipv6Addr = "ff0e::1:2:3".parse().unwrap();
    let s4 = [Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2)];
    let s6: [Ipv6Addr; 2] = [
        "2001:db8::1".parse().unwrap(),
        "2001:db8::2".parse().unwrap(),
    ];
    let frames = [
        query::igmp_general_query(mac, v4, Duration::from_secs(10)),
        query::mld_general_query(mac, v6, Duration::from_secs(10)),
        query::igmp_v2_report(mac, v4, g4),
        query::igmp_v2_leave(mac, v4, g4),
        query::igmp_v3_report(
            mac,
            v4,
            &[
                (RecordKind::ModeIsInclude, g4, &s4),
                (RecordKind::BlockOldSources, g4, &s4[..1]),
            ],
        ),
        query::mld_v1_report(mac, v6, g6),
        query::mld_v1_done(mac, v6, g6),
        query::mld_v2_report(
            mac,
            v6,
            &[
                (RecordKind::ChangeToExclude, g6, &s6),
                (RecordKind::AllowNewSources, g6, &[]),
            ],
        ),
    ];
    frames.iter().map(|f| f[14..].to_vec()).collect()
}

/// Parses `p`; on success walks everything and feeds an MDB.
fn exercise(p: &[u8]) {
    let Ok(Some(msg)) = parse(p) else { return };
    if let Message::Report(records) = &msg {
        let n = records.len();
        let mut seen = 0;
        for r in records.clone() {
            assert!(r.group.is_multicast());
            let k = r.sources.len();
            assert_eq!(r.sources.count(), k);
            seen += 1;
        }
        assert_eq!(seen, n);
    }
    let mut mdb: Mdb<u8, u8> = Mdb::new(MdbConfig {
        max_groups: 4,
        ..Default::default()
    });
    let now = Instant::now();
    mdb.snoop(1, 1, &msg, now);
    mdb.rows(now);
    mdb.age(now + Duration::from_secs(1000));
    assert!(mdb.is_empty());
}

#[test]
fn every_builder_frame_parses() {
    for p in valid_packets() {
        assert!(parse(&p).unwrap().is_some(), "{p:02x?}");
        exercise(&p);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn arbitrary_bytes(mut p in prop::collection::vec(any::<u8>(), 0..200), v6 in any::<bool>()) {
        // Steer half the inputs past the version check.
        if let Some(b) = p.first_mut() {
            *b = (*b & 0x0f) | if v6 { 0x60 } else { 0x40 };
        }
        exercise(&p);
    }

    #[test]
    fn mutated_frames(
        which in 0usize..8,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        tail in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut p = valid_packets().swap_remove(which);
        for (at, b) in &edits {
            let i = at.index(p.len());
            p[i] = *b;
        }
        exercise(&p);
        let n = cut.index(p.len() + 1);
        exercise(&p[..n]);
        p.extend_from_slice(&tail);
        exercise(&p);
    }
}
