//! Parse and lookup costs: `cargo bench -p mcsnoop`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcsnoop::{parse, query, Mdb, MdbConfig, RecordKind};

fn bench_parse(c: &mut Criterion) {
    let mac = [2, 0, 0, 0, 0, 1];
    let v4 = Ipv4Addr::new(10, 0, 0, 1);
    let v6: Ipv6Addr = "fe80::1".parse().unwrap();
    let srcs = [Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2)];
    let frames = [
        (
            "igmpv2_report",
            query::igmp_v2_report(mac, v4, Ipv4Addr::new(239, 1, 1, 1)),
        ),
        (
            "igmpv3_report_4rec",
            query::igmp_v3_report(
                mac,
                v4,
                &[
                    (
                        RecordKind::ChangeToExclude,
                        Ipv4Addr::new(239, 1, 1, 1),
                        &[],
                    ),
                    (
                        RecordKind::ModeIsInclude,
                        Ipv4Addr::new(239, 1, 1, 2),
                        &srcs,
                    ),
                    (
                        RecordKind::AllowNewSources,
                        Ipv4Addr::new(239, 1, 1, 3),
                        &srcs,
                    ),
                    (
                        RecordKind::BlockOldSources,
                        Ipv4Addr::new(239, 1, 1, 4),
                        &srcs,
                    ),
                ],
            ),
        ),
        (
            "mldv2_query",
            query::mld_general_query(mac, v6, std::time::Duration::from_secs(10)),
        ),
    ];
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(1));
    for (name, f) in &frames {
        g.bench_function(*name, |b| {
            b.iter(|| {
                let m = parse(black_box(&f[14..])).unwrap().unwrap();
                match m {
                    mcsnoop::Message::Report(r) => r.map(|r| r.sources.len()).sum::<usize>(),
                    mcsnoop::Message::Query { .. } => 0,
                }
            })
        });
    }
    g.finish();
}

fn bench_members(c: &mut Criterion) {
    let now = Instant::now();
    let mut mdb: Mdb<u16, u32> = Mdb::new(MdbConfig::default());
    for i in 0..2000u32 {
        let g = Ipv4Addr::from(0xef00_0000 | i);
        let f = query::igmp_v2_report([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1), g);
        let m = parse(&f[14..]).unwrap().unwrap();
        for port in 0..4 {
            mdb.snoop(1, port, &m, now);
        }
    }
    let mut out = Vec::with_capacity(8);
    let src = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let mut g = c.benchmark_group("mdb");
    g.throughput(Throughput::Elements(1));
    g.bench_function("members_2000groups_4ports", |b| {
        let mut i = 0u32;
        b.iter(|| {
            i = (i + 1) % 2000;
            out.clear();
            let group = IpAddr::V4(Ipv4Addr::from(0xef00_0000 | i));
            black_box(mdb.members(1, black_box(group), src, &mut out));
            out.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench_parse, bench_members);
criterion_main!(benches);
