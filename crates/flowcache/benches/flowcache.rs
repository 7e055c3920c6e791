//! Per-packet costs of the flow cache, in ns per element (one frame / one
//! lookup), or per packet for a whole burst.
//!
//! - `extract/*`: `FlowKey::extract` on one frame.
//! - `hash`: `FlowKey::flow_hash`.
//! - `emc_hit/N`: `FlowCache::lookup` of resident keys, N flows cached, keys
//!   visited in a shuffled order (hash precomputed, as `Burst` does). The
//!   cache has 2·N entries (at least 8192) so that every flow fits; the keys
//!   that still collided out are left out of the visit list.
//! - `emc_hit_batch32/N`: the same hits through `FlowCache::lookup_batch`,
//!   32 keys per call (signatures, then prefetches of the candidate lines,
//!   then compares); ns per key.
//! - `emc_miss/N`: lookups of N other keys that are not cached, same cache.
//! - `emc_default_100k/inv_prob_N`: the default 8192-entry EMC under a
//!   uniform stream over 100,000 flows: lookup, and insert on a miss (with
//!   insertion probability 1/N), per packet. Mostly misses: what a PMD pays
//!   at level 2 when flows far outnumber entries.
//! - `burst32/1280`: one 32-frame burst (push_frame ×32 + classify), all EMC
//!   hits over 1280 flows; throughput per packet.
//!
//! Run: `cargo bench -p flowcache --bench flowcache -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use flowcache::{Burst, EmcConfig, FlowCache, FlowKey, MAX_BURST};

const GEN: u64 = 7;

fn ipv4_udp(flow: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&(0x0a00_0000 | (flow & 0x00ff_ffff)).to_be_bytes());
    f[34..36].copy_from_slice(&((flow >> 24) as u16 + 1024).to_be_bytes());
    f[36..38].copy_from_slice(&4789u16.to_be_bytes());
    f
}

fn vlan_ipv4_tcp() -> Vec<u8> {
    let mut f = vec![0u8; 68];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x81, 0x00]);
    f[14..16].copy_from_slice(&100u16.to_be_bytes());
    f[16..18].copy_from_slice(&[0x08, 0x00]);
    f[18] = 0x45;
    f[20..22].copy_from_slice(&50u16.to_be_bytes());
    f[27] = 6;
    f[30..34].copy_from_slice(&[10, 0, 0, 1]);
    f[34..38].copy_from_slice(&[10, 0, 0, 2]);
    f[38..40].copy_from_slice(&33000u16.to_be_bytes());
    f[40..42].copy_from_slice(&443u16.to_be_bytes());
    f
}

fn ipv6_tcp() -> Vec<u8> {
    let mut f = vec![0u8; 78];
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&20u16.to_be_bytes());
    f[20] = 6;
    f[21] = 64;
    f[22] = 0x20;
    f[23] = 0x01;
    f[37] = 1;
    f[38] = 0x20;
    f[39] = 0x01;
    f[53] = 2;
    f[54..56].copy_from_slice(&33000u16.to_be_bytes());
    f[56..58].copy_from_slice(&80u16.to_be_bytes());
    f
}

fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

fn bench_extract(c: &mut Criterion) {
    let mut g = c.benchmark_group("extract");
    g.throughput(Throughput::Elements(1));
    for (name, frame) in [
        ("ipv4_udp_64B", ipv4_udp(5)),
        ("vlan_ipv4_tcp", vlan_ipv4_tcp()),
        ("ipv6_tcp", ipv6_tcp()),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| FlowKey::extract(black_box(&frame), black_box(3), black_box(None)))
        });
    }
    g.finish();
    let key = FlowKey::extract(&ipv4_udp(5), 3, None);
    let mut g = c.benchmark_group("hash");
    g.throughput(Throughput::Elements(1));
    g.bench_function("flow_hash", |b| b.iter(|| black_box(&key).flow_hash()));
    g.finish();
}

fn keys(range: std::ops::Range<u32>) -> Vec<(FlowKey, u32)> {
    range
        .map(|f| {
            let k = FlowKey::extract(&ipv4_udp(f), 1, None);
            (k, k.flow_hash())
        })
        .collect()
}

fn bench_emc(c: &mut Criterion) {
    for &n in &[1u32, 1280, 8192, 100_000] {
        let entries = (2 * n as usize).max(8192);
        let mut cache: FlowCache<u32> = FlowCache::new(EmcConfig {
            entries,
            ..EmcConfig::default()
        });
        let mut present = keys(0..n);
        for (i, (k, h)) in present.iter().enumerate() {
            cache.insert(k, *h, i as u32, GEN);
        }
        present.retain(|(k, h)| cache.peek(k, *h, GEN).is_some());
        shuffle(&mut present, 0x9e37_79b9_7f4a_7c15);
        let mut absent = keys(n + 1_000_000..2 * n + 1_000_000);
        shuffle(&mut absent, 0x2545_f491_4f6c_dd1d);

        let mut g = c.benchmark_group("emc_hit");
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(BenchmarkId::from_parameter(n), &present, |b, ks| {
            let mut i = 0;
            b.iter(|| {
                let (k, h) = &ks[i];
                i += 1;
                if i == ks.len() {
                    i = 0;
                }
                black_box(cache.lookup(black_box(k), *h, GEN).copied())
            })
        });
        g.finish();

        // The same hits, 32 keys per `lookup_batch` call (per-key ns).
        let mut g = c.benchmark_group("emc_hit_batch32");
        g.throughput(Throughput::Elements(MAX_BURST as u64));
        let batches: Vec<(Vec<FlowKey>, Vec<u32>)> = present
            .chunks_exact(MAX_BURST)
            .map(|c| {
                (
                    c.iter().map(|p| p.0).collect(),
                    c.iter().map(|p| p.1).collect(),
                )
            })
            .collect();
        if !batches.is_empty() {
            let mut out = [None; MAX_BURST];
            g.bench_with_input(BenchmarkId::from_parameter(n), &batches, |b, bs| {
                let mut i = 0;
                b.iter(|| {
                    let (k, h) = &bs[i];
                    i += 1;
                    if i == bs.len() {
                        i = 0;
                    }
                    cache.lookup_batch(black_box(k), h, GEN, &mut out);
                    black_box(&out);
                })
            });
        }
        g.finish();

        let mut g = c.benchmark_group("emc_miss");
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(BenchmarkId::from_parameter(n), &absent, |b, ks| {
            let mut i = 0;
            b.iter(|| {
                let (k, h) = &ks[i];
                i += 1;
                if i == ks.len() {
                    i = 0;
                }
                black_box(cache.lookup(black_box(k), *h, GEN).copied())
            })
        });
        g.finish();
    }
}

fn bench_thrash(c: &mut Criterion) {
    let mut flows = keys(0..100_000);
    shuffle(&mut flows, 99);
    let mut g = c.benchmark_group("emc_default_100k");
    g.throughput(Throughput::Elements(1));
    for inv in [1u32, 100] {
        let mut cache: FlowCache<u32> = FlowCache::new(EmcConfig {
            insert_inv_prob: inv,
            ..EmcConfig::default()
        });
        g.bench_function(format!("inv_prob_{inv}"), |b| {
            let mut i = 0;
            b.iter(|| {
                let (k, h) = &flows[i];
                i += 1;
                if i == flows.len() {
                    i = 0;
                }
                if cache.lookup(black_box(k), *h, GEN).is_none() {
                    cache.insert(k, *h, i as u32, GEN);
                }
            })
        });
    }
    g.finish();
}

fn bench_burst(c: &mut Criterion) {
    const FLOWS: u32 = 1280;
    let frames: Vec<Vec<u8>> = (0..FLOWS).map(ipv4_udp).collect();
    let mut order: Vec<usize> = (0..FLOWS as usize).collect();
    shuffle(&mut order, 42);
    let mut cache: FlowCache<u32> = FlowCache::new(EmcConfig::default());
    for (i, f) in frames.iter().enumerate() {
        let k = FlowKey::extract(f, 1, None);
        cache.insert(&k, k.flow_hash(), i as u32, GEN);
    }
    let mut burst: Burst<u32> = Burst::new();
    let mut g = c.benchmark_group("burst32");
    g.throughput(Throughput::Elements(MAX_BURST as u64));
    g.bench_function(BenchmarkId::from_parameter(FLOWS), |b| {
        let mut next = 0;
        b.iter(|| {
            burst.clear();
            for _ in 0..MAX_BURST {
                let f = &frames[order[next]];
                next = (next + 1) % order.len();
                let _ = burst.push_frame(black_box(f), 1, None);
            }
            burst.classify(&mut cache, GEN);
            black_box(burst.n_misses())
        })
    });
    g.finish();
}

criterion_group!(benches, bench_extract, bench_emc, bench_thrash, bench_burst);
criterion_main!(benches);
