//! The fuzz seeds in `fuzz/corpus/parse/` are the builders' frames (without
//! Ethernet). Regenerate with `MCSNOOP_BLESS=1 cargo test -p mcsnoop --test corpus`.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use mcsnoop::{query, RecordKind};

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mac = [2, 0, 0, 0, 0, 1];
    let v4 = Ipv4Addr::new(10, 0, 0, 1);
    let v6: Ipv6Addr = "fe80::1".parse().unwrap();
    let g4 = Ipv4Addr::new(239, 1, 2, 3);
    let g6: Ipv6Addr = "ff0e::1:2:3".parse().unwrap();
    let s4 = [Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2)];
    let s6: [Ipv6Addr; 1] = ["2001:db8::1".parse().unwrap()];
    let all = [
        (
            "igmpv3_query",
            query::igmp_general_query(mac, v4, Duration::from_secs(10)),
        ),
        (
            "mldv2_query",
            query::mld_general_query(mac, v6, Duration::from_secs(10)),
        ),
        ("igmpv2_report", query::igmp_v2_report(mac, v4, g4)),
        ("igmpv2_leave", query::igmp_v2_leave(mac, v4, g4)),
        (
            "igmpv3_report",
            query::igmp_v3_report(
                mac,
                v4,
                &[
                    (RecordKind::ChangeToExclude, g4, &[]),
                    (RecordKind::ModeIsInclude, Ipv4Addr::new(232, 1, 1, 1), &s4),
                    (
                        RecordKind::BlockOldSources,
                        Ipv4Addr::new(232, 1, 1, 1),
                        &s4[..1],
                    ),
                ],
            ),
        ),
        ("mldv1_report", query::mld_v1_report(mac, v6, g6)),
        ("mldv1_done", query::mld_v1_done(mac, v6, g6)),
        (
            "mldv2_report",
            query::mld_v2_report(
                mac,
                v6,
                &[
                    (RecordKind::ChangeToInclude, g6, &s6),
                    (RecordKind::ChangeToExclude, g6, &[]),
                ],
            ),
        ),
    ];
    all.into_iter()
        .map(|(n, f)| (n, f[14..].to_vec()))
        .collect()
}

#[test]
fn fuzz_seeds_are_the_builders_frames() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/parse");
    let bless = std::env::var_os("MCSNOOP_BLESS").is_some();
    for (name, bytes) in seeds() {
        let path = dir.join(name);
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(on_disk, bytes, "{name}: regenerate with MCSNOOP_BLESS=1");
    }
}
