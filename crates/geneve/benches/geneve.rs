//! Per-packet costs of the geneve crate, with memcpy as the reference.
//!
//! ```text
//! flock /tmp/vswitch-bench.lock nice -n 5 cargo bench -p geneve --bench geneve -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! memcpy references, all of the same payload bytes, all in cache,
//! all measured in the same run as the code they judge:
//! * `memcpy_64KiB` / `memcpy_44x1448`: one contiguous copy (glibc
//!   `memcpy`, the issue's "plain memcpy of the same bytes"), the upper
//!   bound for any copy;
//! * `memcpy_64KiB_in_1448B_calls`: the contiguous copy as 1448-byte
//!   calls (glibc's vector loop instead of `rep movsb`);
//! * `memcpy_64KiB_into_segments` / `memcpy_44_segments_into_one`: the
//!   same bytes copied chunk by chunk between the frame and the per-segment
//!   buffers, at the offsets `segment` and `coalesce` use (no headers, no
//!   checksums): what a copy costs with this memory layout.
//!
//! The overlay's targets, each judged against a reference in the same run:
//! * `encap/64B` (a 64-byte frame into a 4 KiB UMEM-sized buffer) ≤ 25 ns;
//! * `segment_64KiB_mss1448/geneve` ≥ 0.5× `memcpy_64KiB`;
//! * `decap_coalesce_44x1448_by_reference` (44 Geneve frames decapsulated and
//!   merged, inner checksums verified) ≥ 0.5× `memcpy_44x1448`;
//!   `..._then_copied` adds the one copy of the merged frame that delivery makes.
//!
//! Report ratios within one run (`thrpt` of the bench / `thrpt` of the
//! reference): the machine is shared and absolute numbers drift.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use geneve::checksum;
use geneve::decap::Decapsulator;
use geneve::encap::{TunnelConfig, TunnelTemplate};
use geneve::gro::{CoalescedRef, Coalescer};
use geneve::gso::example_tcp_frame;
use geneve::{segment, segment_with, GsoMeta, InnerChecksum, SegmentPlan};

fn template(udp_checksum: bool) -> TunnelTemplate {
    let mut c = TunnelConfig::new(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        5001,
    );
    c.udp_checksum = udp_checksum;
    TunnelTemplate::new(&c).unwrap()
}

/// An inner TCP frame of exactly `len` bytes (≥ 54).
fn inner(len: usize) -> Vec<u8> {
    let mut f = example_tcp_frame(len - 54);
    geneve::gso::complete_checksum(
        &mut f,
        &GsoMeta {
            needs_csum: true,
            csum_start: 34,
            csum_offset: 16,
            ..GsoMeta::NONE
        },
    )
    .unwrap();
    f
}

fn encap_decap(c: &mut Criterion) {
    let mut g = c.benchmark_group("encap_decap");
    g.throughput(Throughput::Elements(1));
    for len in [64usize, 1518] {
        let f = inner(len);
        let mut t = template(false);
        // A UMEM frame of vswitchd's AF_XDP sockets (4 KiB).
        let mut out = vec![0u8; 4096];
        let dec = Decapsulator::default();
        g.bench_function(format!("encap/{len}B"), |b| {
            b.iter(|| t.encapsulate(black_box(&f), &mut out).unwrap())
        });
        let n = t.encapsulate(&f, &mut out).unwrap();
        let outer = out[..n].to_vec();
        g.bench_function(format!("decap/{len}B"), |b| {
            b.iter(|| dec.decapsulate(black_box(&outer)).unwrap().inner.len())
        });
        g.bench_function(format!("encap+decap/{len}B"), |b| {
            b.iter(|| {
                let n = t.encapsulate(black_box(&f), &mut out).unwrap();
                dec.decapsulate(black_box(&out[..n])).unwrap().inner.len()
            })
        });
        let mut tc = template(true);
        g.bench_function(format!("encap+decap_udp_checksum/{len}B"), |b| {
            b.iter(|| {
                let n = tc.encapsulate(black_box(&f), &mut out).unwrap();
                dec.decapsulate(black_box(&out[..n])).unwrap().inner.len()
            })
        });
        // The same outer parse done with etherparse, for the README's
        // "own offsets or etherparse" comparison (no checksum checks on
        // either side).
        let nover = Decapsulator {
            verify_checksums: false,
            ..Decapsulator::default()
        };
        g.bench_function(format!("outer_parse_own/{len}B"), |b| {
            b.iter(|| nover.decapsulate(black_box(&outer)).unwrap().inner.len())
        });
        g.bench_function(format!("outer_parse_etherparse/{len}B"), |b| {
            b.iter(|| {
                let p = etherparse::SlicedPacket::from_ethernet(black_box(&outer)).unwrap();
                match p.transport {
                    Some(etherparse::TransportSlice::Udp(u)) => {
                        let g = geneve::wire::Packet::new_checked(u.payload()).unwrap();
                        g.payload().len() + usize::from(u.destination_port())
                    }
                    _ => 0,
                }
            })
        });
    }
    g.finish();
}

fn bulk(c: &mut Criterion) {
    // 64 KiB class: the largest IPv4 TSO frame, 65495 payload bytes.
    let payload = 65535 - 40;
    let frame = example_tcp_frame(payload);
    let meta = GsoMeta::from_virtio_net_hdr(1, GsoMeta::VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34, 16)
        .unwrap();
    let mut g = c.benchmark_group("bulk");
    g.throughput(Throughput::Bytes(payload as u64));

    let src = vec![0x5au8; payload];
    let mut dst = vec![0u8; payload];
    g.bench_function("memcpy_64KiB", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    // The same contiguous copy made of 1448-byte `memcpy` calls: below
    // glibc's `rep movsb` threshold (2112 bytes on this CPU, glibc 2.36),
    // so its vector loop, which the one 64 KiB call does not use. What
    // any copy made of segment-sized calls can reach, whatever the buffer
    // layout.
    g.bench_function("memcpy_64KiB_in_1448B_calls", |b| {
        b.iter(|| {
            for (d, s) in dst.chunks_mut(1448).zip(black_box(&src).chunks(1448)) {
                d.copy_from_slice(s);
            }
            black_box(&dst);
        })
    });
    g.bench_function("checksum_64KiB", |b| {
        b.iter(|| checksum::checksum(black_box(&src)))
    });
    g.bench_function("copy_and_checksum_64KiB", |b| {
        b.iter(|| checksum::copy_and_sum(&mut dst, black_box(&src)))
    });

    // Lower bound for any segmenter that writes into per-segment buffers:
    // a plain memcpy of each 1448-byte payload chunk into its own segment
    // buffer at the payload offset (no headers, no checksums), same
    // buffers as `segment_64KiB_mss1448/plain`.
    {
        let plan = SegmentPlan::new(&frame, &meta, 0).unwrap();
        let hdr = plan.inner_header_len();
        let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
        g.bench_function("memcpy_64KiB_into_segments", |b| {
            b.iter(|| {
                let src = black_box(&frame[hdr..]);
                for (chunk, buf) in src.chunks(1448).zip(bufs.iter_mut()) {
                    buf[hdr..hdr + chunk.len()].copy_from_slice(chunk);
                }
                black_box(&bufs);
            })
        });
    }

    for (name, tpl) in [
        ("plain", None),
        ("geneve", Some(template(false))),
        ("geneve_udp_checksum", Some(template(true))),
    ] {
        let mut tpl = tpl;
        let outer = tpl.as_ref().map_or(0, |t| t.header_len());
        let plan = SegmentPlan::new(&frame, &meta, outer).unwrap();
        let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
        g.bench_function(format!("segment_64KiB_mss1448/{name}"), |b| {
            b.iter(|| {
                segment(black_box(&frame), &meta, tpl.as_mut(), &mut bufs)
                    .unwrap()
                    .count()
            })
        });
        // Inner checksum left partial for the next hop (no payload sum).
        g.bench_function(
            format!("segment_64KiB_mss1448/{name}_partial_checksum"),
            |b| {
                b.iter(|| {
                    segment_with(
                        black_box(&frame),
                        &meta,
                        tpl.as_mut(),
                        &mut bufs,
                        InnerChecksum::Partial,
                    )
                    .unwrap()
                    .count()
                })
            },
        );
    }

    // coalesce: 44 × 1448-byte segments → one frame.
    let f44 = example_tcp_frame(44 * 1448);
    let plan = SegmentPlan::new(&f44, &meta, 0).unwrap();
    let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
    segment(&f44, &meta, None, &mut bufs).unwrap();
    let segs: Vec<&[u8]> = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| &b[..plan.segment_len(i)])
        .collect();
    assert_eq!(segs.len(), 44);
    g.throughput(Throughput::Bytes(44 * 1448));
    let mut co = Coalescer::new();
    g.bench_function("coalesce_44x1448", |b| {
        b.iter(|| {
            let mut n = 0;
            co.coalesce(black_box(&segs), |o| n += o.frame().len());
            assert_eq!(n, f44.len());
            n
        })
    });
    // For reference: the same with checksums trusted (NIC-verified input).
    let mut trusted = Coalescer::new();
    trusted.verify_checksums = false;
    // The same merge by reference (as Linux GRO's fragments): headers
    // rewritten, payloads summed and verified, not copied; the one copy is
    // the consumer's, into the guest's buffers.
    g.bench_function("coalesce_44x1448_by_reference", |b| {
        b.iter(|| {
            let mut n = 0;
            co.coalesce_by_reference(black_box(&segs), |o| n += o.len());
            assert_eq!(n, f44.len());
            n
        })
    });
    // By reference with checksums trusted: no payload byte is read, what
    // is left is the header work.
    g.bench_function("coalesce_44x1448_by_reference_checksums_trusted", |b| {
        b.iter(|| {
            let mut n = 0;
            trusted.coalesce_by_reference(black_box(&segs), |o| n += o.len());
            n
        })
    });
    // ... and followed by that copy into one contiguous buffer: what a
    // merged frame costs a consumer that wants one slice.
    let mut out = vec![0u8; f44.len()];
    g.bench_function("coalesce_44x1448_by_reference_then_copied", |b| {
        b.iter(|| {
            let mut n = 0;
            co.coalesce_by_reference(black_box(&segs), |o| match o {
                CoalescedRef::Merged(m) => n += m.write_to(&mut out),
                CoalescedRef::Unchanged(f) => n += f.len(),
            });
            assert_eq!(n, f44.len());
            black_box(&out);
            n
        })
    });
    g.bench_function("coalesce_44x1448_checksums_trusted", |b| {
        b.iter(|| {
            let mut n = 0;
            trusted.coalesce(black_box(&segs), |o| n += o.frame().len());
            n
        })
    });
    // The receive path of the overlay: 44 Geneve frames (outer IPv4, no UDP
    // checksum) decapsulated, their inner segments merged by reference and the
    // merged frame copied once into one buffer (as into a guest's).
    let mut tpl = template(false);
    let outers: Vec<Vec<u8>> = segs
        .iter()
        .map(|s| {
            let mut o = vec![0u8; 4096];
            let n = tpl.encapsulate(s, &mut o).unwrap();
            o.truncate(n);
            o
        })
        .collect();
    let dec = Decapsulator::default();
    let mut inners: Vec<&[u8]> = Vec::with_capacity(44);
    g.bench_function("decap_coalesce_44x1448_by_reference", |b| {
        b.iter(|| {
            inners.clear();
            for o in black_box(&outers) {
                inners.push(dec.decapsulate(o).unwrap().inner);
            }
            let mut n = 0;
            co.coalesce_by_reference(&inners, |o| n += o.len());
            assert_eq!(n, f44.len());
            n
        })
    });
    g.bench_function("decap_coalesce_44x1448_by_reference_then_copied", |b| {
        b.iter(|| {
            inners.clear();
            for o in black_box(&outers) {
                inners.push(dec.decapsulate(o).unwrap().inner);
            }
            let mut n = 0;
            co.coalesce_by_reference(&inners, |o| match o {
                CoalescedRef::Merged(m) => n += m.write_to(&mut out),
                CoalescedRef::Unchanged(f) => n += f.len(),
            });
            assert_eq!(n, f44.len());
            black_box(&out);
            n
        })
    });
    // Lower bound for coalescing: a plain memcpy of each segment's payload
    // into one contiguous buffer (no header checks, no checksums).
    let mut merged = vec![0u8; 54 + 44 * 1448];
    g.bench_function("memcpy_44_segments_into_one", |b| {
        b.iter(|| {
            let mut at = 54;
            for s in black_box(&segs) {
                let p = &s[54..];
                merged[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            black_box(&merged);
        })
    });
    let src44 = vec![0x5au8; 44 * 1448];
    let mut dst44 = vec![0u8; 44 * 1448];
    g.bench_function("memcpy_44x1448", |b| {
        b.iter_batched_ref(
            || (),
            |_| {
                dst44.copy_from_slice(black_box(&src44));
                black_box(&dst44);
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, encap_decap, bulk);
criterion_main!(benches);
