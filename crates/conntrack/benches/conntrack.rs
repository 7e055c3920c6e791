//! Per-packet costs of the tracker at 1k and 1M connections:
//! `cargo bench -p conntrack -- --warm-up-time 1 --measurement-time 3`.
//!
//! - `insert`: a commit that creates a connection (UDP), into a table that
//!   already holds N;
//! - `hit`: a packet of an established UDP connection (ct_next), N held,
//!   visited in a scattered order (at 1M, mostly cache misses);
//! - `hit_hot4k`: the same among 4,096 active flows of the 1M;
//! - `hit_tcp`: an established TCP data segment, window tracking included;
//! - `miss`: a packet of no connection, without commit (`ct.new`);
//! - `parse`: an IPv4 TCP segment from bytes;
//! - `grow`: new connections into an empty tracker until it holds 1M (the
//!   tables' doublings included), time per connection;
//! - `nat_hit` / `plain_hit` (group `nat`, 1k, 100k and 1M): an established
//!   UDP connection, SNAT'd or not, both directions alternately, with
//!   `ct(nat)` (the NAT'd reply arrives translated and finds its connection
//!   through the alias: `cargo bench -p conntrack -- nat/`);
//! - `nat_hit_burst` / `plain_hit_burst`: the same packets 32 at a time, as a
//!   PMD's burst: every packet's step prefetched ([`Conntrack::prefetch`]),
//!   then each stepped (time per packet). The packets are read one after the
//!   other, as from a receive ring (the flows in the same scattered order);
//!   `…_burst_noprefetch` is the same without the prefetches.
//!
//! Bytes per connection at 1M are printed before the runs (the tracker's
//! own count of its heap, which `tests/memory.rs` checks against a
//! counting allocator).

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use conntrack::{
    Config, Conntrack, CtAction, Endpoints, Nat, NatRange, Packet, Prepared, TcpFlags, TcpSegment,
    L4,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// Packets a burst bench prefetches together, then steps (a PMD's burst).
const BURST: usize = 32;
const SIZES: [(u32, &str); 2] = [(1 << 10, "1k"), (1 << 20, "1M")];
/// An odd stride: visits every index of a power-of-two table, scattered.
const STRIDE: u32 = 0x9e37_79b9;

/// The `i`-th UDP flow from client to server (reply: `reversed`).
fn udp(i: u32, reversed: bool) -> Packet {
    let client = Ipv4Addr::from(0x0a00_0000 | (i >> 4)).into();
    let server = Ipv4Addr::new(192, 0, 2, 1).into();
    let (cport, sport) = (1024 + (i & 0xf) as u16, 53);
    let (src, dst, src_port, dst_port) = if reversed {
        (server, client, sport, cport)
    } else {
        (client, server, cport, sport)
    };
    Packet {
        src,
        dst,
        fragment: false,
        l4: L4::Udp { src_port, dst_port },
    }
}

/// A tracker holding `n` established UDP connections (flows `0..n`).
fn filled(n: u32) -> Conntrack {
    let ct = Conntrack::new(Config::default()).unwrap();
    for i in 0..n {
        ct.execute(&udp(i, false), &CtAction::commit(1), 0);
        ct.execute(&udp(i, true), &CtAction::lookup(1), 0);
    }
    ct
}

fn bench_hit_miss(c: &mut Criterion) {
    let mut g = c.benchmark_group("conntrack");
    g.throughput(Throughput::Elements(1));
    for (n, name) in SIZES {
        let ct = filled(n);
        if n == 1 << 20 {
            eprintln!(
                "{} connections: {} heap bytes, {:.1} bytes/connection",
                ct.len(),
                ct.memory_bytes(),
                ct.memory_bytes() as f64 / ct.len() as f64
            );
        }
        let mask = n - 1;
        let act = CtAction::lookup(1);
        let mut j = 0u32;
        g.bench_function(BenchmarkId::new("hit", name), |b| {
            b.iter(|| {
                j = j.wrapping_add(STRIDE) & mask;
                let r = ct.execute(black_box(&udp(j, j & 1 == 0)), &act, 1);
                debug_assert!(r.state.contains(conntrack::CtState::EST));
                r
            })
        });
        if n == 1 << 20 {
            // 4,096 active flows among the million: the cost a PMD sees when
            // the table is big but the traffic has locality.
            g.bench_function(BenchmarkId::new("hit_hot4k", name), |b| {
                b.iter(|| {
                    j = j.wrapping_add(STRIDE) & 4095;
                    let i = j.wrapping_mul(STRIDE) & mask;
                    ct.execute(black_box(&udp(i, j & 1 == 0)), &act, 1)
                })
            });
        }
        g.bench_function(BenchmarkId::new("miss", name), |b| {
            b.iter(|| {
                j = j.wrapping_add(STRIDE) & mask;
                // Same hosts, a port no flow uses.
                let mut p = udp(j, false);
                p.l4 = L4::Udp {
                    src_port: 999,
                    dst_port: 53,
                };
                ct.execute(black_box(&p), &act, 1)
            })
        });
        g.bench_function(BenchmarkId::new("insert", name), |b| {
            // Batches of at most a quarter of N, removed untimed after each,
            // so the table stays near N connections.
            let batch = u64::from(n / 4).min(4096);
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let k = left.min(batch) as u32;
                    left -= u64::from(k);
                    let start = Instant::now();
                    for i in n..n + k {
                        black_box(ct.execute(&udp(i, false), &CtAction::commit(1), 1));
                    }
                    took += start.elapsed();
                    for i in n..n + k {
                        let p = udp(i, false);
                        let t =
                            conntrack::Tuple::ports(p.src, p.dst, 17, 1024 + (i & 0xf) as u16, 53);
                        ct.flush_tuple(1, &t);
                    }
                }
                took
            })
        });
    }
    g.finish();
}

fn tcp(client: u32, flags: TcpFlags, seq: u32, ack: u32, len: u32, reversed: bool) -> Packet {
    let c = Ipv4Addr::from(0x0a00_0000 | client).into();
    let s = Ipv4Addr::new(192, 0, 2, 1).into();
    let seg = TcpSegment {
        flags,
        seq,
        ack,
        window: 65535,
        payload_len: len,
        src_port: if reversed { 80 } else { 40000 },
        dst_port: if reversed { 40000 } else { 80 },
        wscale: Some(7),
    };
    let (src, dst) = if reversed { (s, c) } else { (c, s) };
    Packet {
        src,
        dst,
        fragment: false,
        l4: L4::Tcp(seg),
    }
}

fn bench_tcp(c: &mut Criterion) {
    let mut g = c.benchmark_group("conntrack");
    g.throughput(Throughput::Elements(1));
    let n = 1u32 << 10;
    let ct = Conntrack::new(Config::default()).unwrap();
    for i in 0..n {
        ct.execute(
            &tcp(i, TcpFlags::SYN, 0, 0, 0, false),
            &CtAction::commit(1),
            0,
        );
        let synack = tcp(i, TcpFlags::SYN | TcpFlags::ACK, 0, 1, 0, true);
        ct.execute(&synack, &CtAction::lookup(1), 0);
        ct.execute(
            &tcp(i, TcpFlags::ACK, 1, 1, 0, false),
            &CtAction::lookup(1),
            0,
        );
        ct.execute(
            &tcp(i, TcpFlags::ACK, 1, 1, 0, true),
            &CtAction::lookup(1),
            0,
        );
    }
    // The same in-window segment again and again: a retransmission, which
    // runs the whole window check and moves nothing.
    let mut j = 0u32;
    g.bench_function(BenchmarkId::new("hit_tcp", "1k"), |b| {
        b.iter(|| {
            j = j.wrapping_add(STRIDE) & (n - 1);
            let p = tcp(j, TcpFlags::ACK | TcpFlags::PSH, 1, 1, 1400, false);
            ct.execute(black_box(&p), &CtAction::lookup(1), 1)
        })
    });
    let mut bytes = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0];
    bytes.extend_from_slice(&[10, 0, 0, 1, 192, 0, 2, 1]);
    bytes.extend_from_slice(&[
        0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    g.bench_function("parse", |b| {
        b.iter(|| conntrack::parse(black_box(&bytes), conntrack::Checksums::Trust).unwrap())
    });
    g.finish();
}

/// `p` with `e`'s addresses and ports (UDP).
fn with_endpoints(p: &Packet, e: Endpoints) -> Packet {
    Packet {
        src: e.src,
        dst: e.dst,
        l4: L4::Udp {
            src_port: e.src_port,
            dst_port: e.dst_port,
        },
        ..*p
    }
}

/// `n` established UDP connections, SNAT'd (to 256 addresses, ports
/// preserved unless they collide) or not, and the packets of both
/// directions as they arrive: originals untranslated, replies translated.
fn filled_nat(n: u32, nat: bool) -> (Conntrack, Vec<Packet>) {
    let ct = Conntrack::new(Config::default()).unwrap();
    let snat = Nat::Src(NatRange {
        min: Ipv4Addr::new(203, 0, 113, 0).into(),
        max: Ipv4Addr::new(203, 0, 113, 255).into(),
        ports: None,
    });
    let commit = if nat {
        CtAction::commit(1).with_nat(snat)
    } else {
        CtAction::commit(1)
    };
    let mut packets = Vec::with_capacity(2 * n as usize);
    for i in 0..n {
        let out = udp(i, false);
        let mut translation = None;
        ct.execute_nat(&out, &Prepared::of(&out), &commit, 0, &mut translation);
        let back = match translation {
            Some(x) => with_endpoints(&out, x.packet.reversed()),
            None => udp(i, true),
        };
        ct.execute(&back, &CtAction::lookup(1), 0);
        packets.push(out);
        packets.push(back);
    }
    assert_eq!(ct.len(), n as usize);
    (ct, packets)
}

fn bench_nat(c: &mut Criterion) {
    let mut g = c.benchmark_group("nat");
    g.throughput(Throughput::Elements(1));
    let act = CtAction::lookup(1).with_nat(Nat::Existing);
    for (n, name) in [(1u32 << 10, "1k"), (100_000, "100k"), (1_000_000, "1M")] {
        for (nat, case) in [(false, "plain_hit"), (true, "nat_hit")] {
            let (ct, packets) = filled_nat(n, nat);
            let len = packets.len() as u64;
            let mut j = 0u64;
            let mut translation = None;
            g.throughput(Throughput::Elements(1));
            g.bench_function(BenchmarkId::new(case, name), |b| {
                b.iter(|| {
                    j = (j + u64::from(STRIDE)) % len;
                    let p = black_box(&packets[j as usize]);
                    let r = ct.execute_nat(p, &Prepared::of(p), &act, 1, &mut translation);
                    debug_assert!(r.state.contains(conntrack::CtState::EST));
                    debug_assert_eq!(translation.is_some(), nat);
                    (r, black_box(&translation).is_some())
                })
            });
            // The same order, laid out as a receive ring would hold the packets:
            // one after the other.
            let ring: Vec<Packet> = (0..len)
                .map(|k| packets[(k * u64::from(STRIDE) % len) as usize])
                .collect();
            for (prefetch, kind) in [(false, "burst_noprefetch"), (true, "burst")] {
                let mut k = 0;
                g.throughput(Throughput::Elements(BURST as u64));
                g.bench_function(BenchmarkId::new(format!("{case}_{kind}"), name), |b| {
                    b.iter(|| {
                        if k + BURST > ring.len() {
                            k = 0;
                        }
                        let burst = black_box(&ring[k..k + BURST]);
                        k += BURST;
                        let preps: [Prepared; BURST] =
                            core::array::from_fn(|i| Prepared::of(&burst[i]));
                        if prefetch {
                            for prep in &preps {
                                ct.prefetch(prep, act.zone);
                            }
                            for prep in &preps {
                                ct.prefetch_entry(prep, act.zone);
                            }
                        }
                        let mut est = 0;
                        for (p, prep) in burst.iter().zip(&preps) {
                            let r = ct.execute_nat(p, prep, &act, 1, &mut translation);
                            est += usize::from(r.state.contains(conntrack::CtState::EST));
                            debug_assert_eq!(translation.is_some(), nat);
                        }
                        debug_assert_eq!(est, BURST);
                        est
                    })
                });
            }
        }
    }
    g.finish();
}

/// New connections into an empty tracker until it holds 1M: each commit's cost with
/// the tables' growth (every doubling moves what the table held), as a burst of new
/// connections pays it. Time per connection.
fn bench_grow(c: &mut Criterion) {
    const N: u32 = 1 << 20;
    let mut g = c.benchmark_group("conntrack");
    g.sample_size(10);
    g.throughput(Throughput::Elements(u64::from(N)));
    g.bench_function(BenchmarkId::new("grow", "1M"), |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let ct = Conntrack::new(Config::default()).unwrap();
                let start = Instant::now();
                for i in 0..N {
                    black_box(ct.execute(&udp(i, false), &CtAction::commit(1), 0));
                }
                took += start.elapsed();
                drop(ct);
            }
            took
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench_hit_miss, bench_tcp, bench_nat, bench_grow
}
criterion_main!(benches);
