//! The switching pipeline per packet, on in-memory virtqueues (no second process):
//! guest A's transmit ring → PMD burst (chain walk, header read, FDB, grouping) →
//! copy into guest B's mergeable receive buffers → used rings.
//!
//! Reported per frame (criterion `Throughput::Elements`) so the report reads in
//! frames/s; `Throughput::Bytes` variants give Gbit/s. Sizes 64 and 1518 bytes; 1 and
//! 1024 learned MACs (the destination MAC cycles over them, all behind port B).

use std::hint::black_box;
use std::sync::Arc;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use vswitch::config::MacAddr;
use vswitch::pmd::{Pmd, BURST};
use vswitch::switch::Switch;
use vswitch::testing::{config, frame, SimGuest};

const SRC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn setup(macs: usize, size: usize) -> (Arc<Switch>, SimGuest, SimGuest, Vec<u16>, Vec<u16>) {
    let sw = Switch::new(config(&[("a", None), ("b", None)], true)).unwrap();
    let dst = |i: usize| [2, 1, 0, 0, (i >> 8) as u8, i as u8];
    for i in 0..macs {
        sw.fdb.add_static(0, MacAddr(dst(i)), 1);
    }
    let mut a = SimGuest::new(1, SimGuest::default_features());
    let mut b = SimGuest::new(1, SimGuest::default_features());
    sw.ports[0].conn.store(Some(a.conn.clone()));
    sw.ports[1].conn.store(Some(b.conn.clone()));
    // 128 distinct transmit buffers (heads 0..128), cycling destinations.
    let tx: Vec<u16> = (0..128u16)
        .map(|h| a.send(0, h, &frame(dst(h as usize % macs), SRC, size, h as u8)))
        .collect();
    let rx = b.post_rx(0, 0, 128, 2048);
    (sw, a, b, tx, rx)
}

fn pipeline(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline");
    for &size in &[64usize, 1518] {
        for &macs in &[1usize, 1024] {
            let (sw, mut a, mut b, tx, rx) = setup(macs, size);
            let mut pmd = Pmd::new(sw.clone(), 0);
            steady_state(
                &mut g,
                BenchmarkId::new(format!("{size}B"), format!("{macs}mac")),
                &mut pmd,
                &mut a,
                &mut b,
                &tx,
                &rx,
            );
            let s = sw.port_stats(1);
            assert_eq!(s.drops_total, 0, "bench must not drop: {s:?}");
        }
    }
    g.finish();
}

/// Drains what the guests queued at setup, then measures the steady state: per
/// iteration guest A re-publishes one burst of its transmit chains (`tx`, cycled), the
/// PMD switches it, and guest B re-posts the receive buffers it got (`rx`, cycled).
fn steady_state(
    g: &mut BenchmarkGroup<'_, WallTime>,
    id: BenchmarkId,
    pmd: &mut Pmd,
    a: &mut SimGuest,
    b: &mut SimGuest,
    tx: &[u16],
    rx: &[u16],
) {
    while pmd.poll_once() > 0 {}
    a.skip_used(1);
    b.skip_used(0);
    b.republish(0, rx);
    let mut k = 0usize;
    g.throughput(Throughput::Elements(BURST as u64));
    g.bench_function(id, |bench| {
        bench.iter(|| {
            let heads = &tx[k..k + BURST];
            let rxh = &rx[k..k + BURST];
            k = (k + BURST) % tx.len();
            a.republish(1, heads);
            let n = pmd.poll_once();
            b.skip_used(0);
            b.republish(0, rxh);
            a.skip_used(1);
            black_box(n)
        })
    });
}

/// The reference: copying the same bytes with memcpy, per frame.
fn memcpy_reference(c: &mut Criterion) {
    let mut g = c.benchmark_group("memcpy");
    for &size in &[64usize, 1518] {
        let src = vec![7u8; size * BURST];
        let mut dst = vec![0u8; size * BURST];
        g.throughput(Throughput::Elements(BURST as u64));
        g.bench_function(format!("{size}B"), |b| {
            b.iter(|| {
                for i in 0..BURST {
                    dst[i * size..(i + 1) * size]
                        .copy_from_slice(black_box(&src[i * size..(i + 1) * size]));
                }
                black_box(&dst);
            })
        });
    }
    g.finish();
}

/// An IPv4/UDP frame of `len` bytes for flow `flow` (source 10.0.x.y, source port).
fn udp_flow(dst: [u8; 6], src: [u8; 6], len: usize, flow: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let [hi, lo] = flow.to_be_bytes();
    f.extend_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, hi, lo, 10, 1, 0, 1,
    ]);
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&(10000 + flow).to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&(ip_len - 20).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(len, 0x5a);
    f
}

/// The whole pipeline with and without the flow cache: 1280 flows round-robin (so
/// consecutive frames are of different flows and the last-flow check never helps),
/// 100 ingress ACL rules that all have to be scanned (none matches), 64-byte frames.
fn flow_cache(c: &mut Criterion) {
    const FLOWS: u16 = 1280;
    let mut g = c.benchmark_group("pipeline_1280flows_100acl_64B");
    let dst = [2, 0, 0, 0, 0, 2];
    for cache in [true, false] {
        let acl = (0..100)
            .map(|i| {
                (
                    "a".to_string(),
                    format!("drop ip_src=172.16.{i}.0/24").parse().unwrap(),
                )
            })
            .collect();
        let mut cfg = config(&[("a", None), ("b", None)], cache);
        cfg.acl = acl;
        let sw = Switch::new(cfg).unwrap();
        sw.fdb.add_static(0, MacAddr(dst), 1);
        let mut a = SimGuest::with_queue_size(1, SimGuest::default_features(), 2048);
        let mut b = SimGuest::with_queue_size(1, SimGuest::default_features(), 2048);
        sw.ports[0].conn.store(Some(a.conn.clone()));
        sw.ports[1].conn.store(Some(b.conn.clone()));
        let mut pmd = Pmd::new(sw.clone(), 0);
        let tx: Vec<u16> = (0..FLOWS)
            .map(|h| a.send(0, h, &udp_flow(dst, SRC, 64, h)))
            .collect();
        let rx = b.post_rx(0, 0, FLOWS, 2048);
        let name = if cache { "flow_cache" } else { "no_cache" };
        steady_state(
            &mut g,
            BenchmarkId::from_parameter(name),
            &mut pmd,
            &mut a,
            &mut b,
            &tx,
            &rx,
        );
        let s = sw.port_stats(1);
        assert_eq!(s.drops_total, 0, "bench must not drop: {s:?}");
        assert_eq!(sw.port_stats(0).drops_total, 0);
    }
    g.finish();
}

criterion_group!(benches, pipeline, flow_cache, memcpy_reference);
criterion_main!(benches);
