//! The switching pipeline per packet, on in-memory virtqueues (no second process):
//! guest A's transmit ring → PMD burst (chain walk, header read, FDB, grouping) →
//! copy into guest B's mergeable receive buffers → used rings.
//!
//! Reported per frame (criterion `Throughput::Elements`) so the report reads in
//! frames/s; `Throughput::Bytes` variants give Gbit/s. Sizes 64 and 1518 bytes; 1 and
//! 1024 learned MACs (the destination MAC cycles over them, all behind port B), and
//! one MAC on packed virtqueues (`1mac_packed`). The
//! `scale` group varies flows (1 to 100 000) and ports (2 to 64); `scripts/bench-report.sh`
//! runs it (`cargo bench --bench pipeline -- scale`). The `replicate` group measures a
//! multicast copy against a unicast delivery (`cargo bench --bench pipeline -- replicate`).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use vswitch::config::MacAddr;
use vswitch::datapath::pmd::{Pmd, BURST};
use vswitch::model::fdb::Dest;
use vswitch::switch::Switch;
use vswitch::testing::{attach, config, frame, SimGuest};

const SRC: [u8; 6] = [2, 0, 0, 0, 0, 1];

/// The guests' features: a Linux guest's without offloads, on packed virtqueues
/// (VIRTIO_F_RING_PACKED) when `packed`.
fn features(packed: bool) -> u64 {
    use vswitch::ports::vhost::device::VIRTIO_F_RING_PACKED;
    SimGuest::default_features() | if packed { 1 << VIRTIO_F_RING_PACKED } else { 0 }
}

fn setup(macs: usize, size: usize) -> (Arc<Switch>, SimGuest, SimGuest, Vec<u16>, Vec<u16>) {
    setup_on(macs, size, false)
}

/// [`setup`], on packed rings when `packed`.
fn setup_on(
    macs: usize,
    size: usize,
    packed: bool,
) -> (Arc<Switch>, SimGuest, SimGuest, Vec<u16>, Vec<u16>) {
    let sw = Switch::new(config(&[("a", None), ("b", None)], true)).unwrap();
    let dst = |i: usize| [2, 1, 0, 0, (i >> 8) as u8, i as u8];
    for i in 0..macs {
        sw.fdb.add_static(0, MacAddr(dst(i)), Dest::Port(1));
    }
    let mut a = SimGuest::new(1, features(packed));
    let mut b = SimGuest::new(1, features(packed));
    attach(&sw, 0, a.conn.clone());
    attach(&sw, 1, b.conn.clone());
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
        // 1 and 1024 MACs on split rings, and 1 MAC on packed virtqueues (virtio 1.2
        // §2.8) on both sides.
        for (macs, packed, name) in [
            (1, false, "1mac"),
            (1024, false, "1024mac"),
            (1, true, "1mac_packed"),
        ] {
            let (sw, mut a, mut b, tx, rx) = setup_on(macs, size, packed);
            let mut pmd = Pmd::new(sw.clone(), 0);
            steady_state(
                &mut g,
                BenchmarkId::new(format!("{size}B"), name),
                &mut pmd,
                &mut a,
                &mut b,
                &tx,
                &rx,
            );
            let s = sw.port_stats(1);
            assert_eq!(s.drops_total, 0, "bench must not drop: {s:?}");
            assert!(s.tx_packets > 0);
        }
        // The same with live migration's dirty logging on for the receiving guest:
        // every buffer filled and its used ring marked in the log. QEMU clears the log
        // at each pass; here the bits stay set after the first burst, so this is the
        // cost of the marking's checks (the atomic ORs happen once per page per pass).
        let (sw, mut a, mut b, tx, rx) = setup(1, size);
        let _log = b.start_dirty_log();
        let mut pmd = Pmd::new(sw.clone(), 0);
        steady_state(
            &mut g,
            BenchmarkId::new(format!("{size}B"), "1mac_dirty_log"),
            &mut pmd,
            &mut a,
            &mut b,
            &tx,
            &rx,
        );
        assert!(b.conn.migration.pages_marked() > 0, "the log was used");
    }
    g.finish();
}

/// Drains what the guests queued at setup, then measures the steady state: per
/// iteration guest A re-publishes one burst of its transmit chains (`tx`, cycled), the
/// PMD switches it, and guest B re-posts the receive buffers it got (`rx`, cycled).
///
/// Only the PMD's `poll_once` is timed: re-publishing and consuming buffers is the
/// guests' drivers' work, done on their own vCPUs (about 13 % of the whole loop's
/// samples under `perf`; timing it would add the same cost to both sides of every
/// with/without comparison).
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
        bench.iter_custom(|iters| {
            let mut pmd_time = Duration::ZERO;
            for _ in 0..iters {
                let heads = &tx[k..k + BURST];
                let rxh = &rx[k..k + BURST];
                k = (k + BURST) % tx.len();
                a.republish(1, heads);
                let t = Instant::now();
                black_box(pmd.poll_once());
                pmd_time += t.elapsed();
                b.skip_used(0);
                b.republish(0, rxh);
                a.skip_used(1);
            }
            pmd_time
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
        sw.fdb.add_static(0, MacAddr(dst), Dest::Port(1));
        let mut a = SimGuest::with_queue_size(1, SimGuest::default_features(), 2048);
        let mut b = SimGuest::with_queue_size(1, SimGuest::default_features(), 2048);
        attach(&sw, 0, a.conn.clone());
        attach(&sw, 1, b.conn.clone());
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

/// A TSO frame: IPv4/TCP, `payload` bytes, partial checksum (pseudo-header sum), as a
/// Linux guest hands it to virtio-net with HOST_TSO4.
fn tso_frame(dst: [u8; 6], src: [u8; 6], payload: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(54 + payload);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    let tot = (40 + payload) as u16;
    let mut ip = [
        0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip[2..4].copy_from_slice(&tot.to_be_bytes());
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(w[1]))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    let mut tcp = [0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5001u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&7000u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    let mut ps = 0x0a00u32 + 0x0001 + 0x0a00 + 0x0002 + 6 + 20 + payload as u32;
    while ps > 0xffff {
        ps = (ps & 0xffff) + (ps >> 16);
    }
    tcp[16..18].copy_from_slice(&(ps as u16).to_be_bytes());
    f.extend_from_slice(&tcp);
    f.extend((0..payload).map(|i| (i * 13 % 251) as u8));
    f
}

/// VM-to-VM TCP throughput with TSO on one PMD: 64 KiB TSO frames (45 × 1448-byte MSS,
/// partial checksums) from a guest with HOST_TSO4 to (1) a guest with GUEST_TSO4 and
/// GUEST_CSUM, which takes them whole in 4 KiB mergeable buffers, and (2) a guest
/// without offloads, for which the switch segments them and completes every checksum
/// in software; against a memcpy of the same bytes in the same run. Eight frames per
/// iteration; throughput in frame bytes.
fn tso_vm_to_vm(c: &mut Criterion) {
    use virtio_bindings::virtio_net::{
        VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_HOST_TSO4,
    };
    use vswitch::testing::RawDesc;
    const PER_ITER: usize = 8;
    const FRAMES: u16 = 16;
    const PAYLOAD: usize = 45 * 1448;
    let dst = [2, 0, 0, 0, 0, 2];
    let frame = tso_frame(dst, SRC, PAYLOAD);
    let mut hdr = [0u8; 12];
    hdr[0] = 1; // NEEDS_CSUM
    hdr[1] = 1; // GSO_TCPV4
    hdr[2..4].copy_from_slice(&54u16.to_le_bytes());
    hdr[4..6].copy_from_slice(&1448u16.to_le_bytes());
    hdr[6..8].copy_from_slice(&34u16.to_le_bytes());
    hdr[8..10].copy_from_slice(&16u16.to_le_bytes());
    let mut g = c.benchmark_group("tso_64KiB_vm_to_vm");
    g.throughput(Throughput::Bytes((PER_ITER * frame.len()) as u64));
    let base = SimGuest::default_features();
    for (name, b_features, rx_len) in [
        (
            "to_guest_tso",
            base | 1 << VIRTIO_NET_F_GUEST_TSO4 | 1 << VIRTIO_NET_F_GUEST_CSUM,
            4096u32,
        ),
        ("software_segmentation", base, 2048),
    ] {
        let mut cfg = config(&[("a", None), ("b", None)], true);
        cfg.ports[0].offloads = true;
        cfg.ports[1].offloads = true;
        let sw = Switch::new(cfg).unwrap();
        sw.fdb.add_static(0, MacAddr(dst), Dest::Port(1));
        let mut a = SimGuest::with_queue_size(
            1,
            base | 1 << VIRTIO_NET_F_CSUM | 1 << VIRTIO_NET_F_HOST_TSO4,
            256,
        );
        let mut b = SimGuest::with_queue_size(1, b_features, 1024);
        attach(&sw, 0, a.conn.clone());
        attach(&sw, 1, b.conn.clone());
        let mut buf = hdr[..a.hdr_len].to_vec();
        buf.extend_from_slice(&frame);
        for h in 0..FRAMES {
            let addr = a.slot(1, u32::from(h) * 33);
            a.write(addr, &buf);
            let d = RawDesc {
                addr,
                len: buf.len() as u32,
                flags: 0,
                next: 0,
            };
            a.write_desc(1, h, d);
        }
        let tx: Vec<u16> = (0..FRAMES).collect();
        let rx = b.post_rx(0, 0, 1024, rx_len);
        let rx2: Vec<u16> = rx.iter().chain(&rx).copied().collect();
        let mut pmd = Pmd::new(sw.clone(), 0);
        let (mut k, mut r) = (0usize, 0usize);
        g.bench_function(name, |bench| {
            bench.iter(|| {
                a.republish(1, &tx[k..k + PER_ITER]);
                k = (k + PER_ITER) % tx.len();
                let n = pmd.poll_once();
                let used = usize::from(b.skip_used(0));
                b.republish(0, &rx2[r..r + used]);
                r = (r + used) % rx.len();
                a.skip_used(1);
                black_box(n)
            })
        });
        let s = sw.port_stats(1);
        assert_eq!(s.drops_total, 0, "bench must not drop: {s:?}");
        // (Nothing ran when a filter skipped this bench.)
        if s.tx_packets > 0 && name == "software_segmentation" {
            assert_eq!(s.tx_packets, 45 * s.segmented, "{s:?}");
        } else if name == "to_guest_tso" {
            assert_eq!(s.segmented, 0);
        }
    }
    // The references: memcpy of the same bytes (1) between two buffers that stay in the
    // cache, (2) over the same footprint as the switch: from 16 frames into 4 KiB
    // buffers cycling through 4 MiB, as the destination guest's receive buffers do.
    let src = vec![7u8; PER_ITER * frame.len()];
    let mut dstb = vec![0u8; PER_ITER * frame.len()];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            dstb.copy_from_slice(black_box(&src));
            black_box(&dstb);
        })
    });
    let flen = frame.len();
    let frames = vec![7u8; usize::from(FRAMES) * flen];
    let mut ring = vec![0u8; 1024 * 4096];
    let (mut k, mut r) = (0usize, 0usize);
    g.bench_function("memcpy_into_4KiB_buffers", |b| {
        b.iter(|| {
            for _ in 0..PER_ITER {
                let f = &frames[k * flen..(k + 1) * flen];
                k = (k + 1) % usize::from(FRAMES);
                for chunk in f.chunks(4096) {
                    ring[r * 4096..r * 4096 + chunk.len()].copy_from_slice(black_box(chunk));
                    r = (r + 1) % 1024;
                }
            }
            black_box(&ring);
        })
    });
    g.finish();
}

/// A 64-byte IPv4/UDP frame of flow `flow`: source address 10.x.y.z from the flow's 24
/// low bits, source port 10000 + flow (wrapping), destination 10.1.0.1:80.
fn udp_flow32(dst: [u8; 6], src: [u8; 6], flow: u32) -> Vec<u8> {
    let mut f = udp_flow(dst, src, 64, 0);
    let [_, a, b, c] = flow.to_be_bytes();
    f[27..30].copy_from_slice(&[a, b, c]);
    f[34..36].copy_from_slice(&10000u16.wrapping_add(flow as u16).to_be_bytes());
    f
}

/// Scale: ns per 64-byte frame at 1, 1000, 10 000 and 100 000 flows (2 ports) and at
/// 2, 16 and 64 ports (1000 flows), flow cache on, no ACL rules. Ids `{P}ports/{F}flows`
/// (read by `bench-report criterion`).
///
/// Port 0's guest sends; ports 1..P each have a guest that receives, behind a static
/// MAC. Flow `f` goes to port `1 + f % (P − 1)` and is distinct in its IPv4 source
/// address, so there are exactly F flow keys, visited round-robin: consecutive frames are
/// of different flows. Between bursts, untimed, the 32 transmit buffers of the next burst
/// are rewritten with the next 32 flows' frames (as a guest writes its packets).
fn scale(c: &mut Criterion) {
    let mut g = c.benchmark_group("scale");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    for (ports, flows) in [
        (2usize, 1u32),
        (2, 1000),
        (2, 10_000),
        (2, 100_000),
        (16, 1000),
        (64, 1000),
    ] {
        scale_one(&mut g, ports, flows);
    }
    g.finish();
}

fn scale_one(g: &mut BenchmarkGroup<'_, WallTime>, ports: usize, flows: u32) {
    let names: Vec<String> = (0..ports).map(|i| format!("p{i}")).collect();
    let cfg_ports: Vec<(&str, Option<u16>)> = names.iter().map(|n| (n.as_str(), None)).collect();
    let sw = Switch::new(config(&cfg_ports, true)).unwrap();
    let mac = |port: usize| [2, 1, 0, 0, (port >> 8) as u8, port as u8];
    for p in 1..ports {
        sw.fdb.add_static(0, MacAddr(mac(p)), Dest::Port(p as u16));
    }
    let mut a = SimGuest::new(1, SimGuest::default_features());
    attach(&sw, 0, a.conn.clone());
    let mut rxg = receiving_guests(&sw, 1..ports);
    let frames: Vec<Vec<u8>> = (0..flows)
        .map(|f| udp_flow32(mac(1 + f as usize % (ports - 1)), SRC, f))
        .collect();
    // 128 transmit buffers; the frame of buffer h is rewritten before each publication.
    let tx: Vec<u16> = (0..128u16)
        .map(|h| a.send(0, h, &frames[usize::from(h) % frames.len()]))
        .collect();
    let hdr = a.hdr_len as u64;
    let mut pmd = Pmd::new(sw.clone(), 0);
    while pmd.poll_once() > 0 {}
    a.skip_used(1);
    recycle(&mut rxg);
    let (mut k, mut next_flow) = (0usize, 128usize % frames.len());
    g.throughput(Throughput::Elements(BURST as u64));
    g.bench_function(
        BenchmarkId::new(format!("{ports}ports"), format!("{flows}flows")),
        |bench| {
            bench.iter_custom(|iters| {
                let mut pmd_time = Duration::ZERO;
                for _ in 0..iters {
                    let heads = &tx[k..k + BURST];
                    k = (k + BURST) % tx.len();
                    if frames.len() > 1 {
                        for &h in heads {
                            a.write(a.slot(1, u32::from(h)) + hdr, &frames[next_flow]);
                            next_flow = (next_flow + 1) % frames.len();
                        }
                    }
                    a.republish(1, heads);
                    let t = Instant::now();
                    black_box(pmd.poll_once());
                    pmd_time += t.elapsed();
                    a.skip_used(1);
                    recycle(&mut rxg);
                }
                pmd_time
            })
        },
    );
    let drops: u64 = (1..ports)
        .map(|p| sw.port_stats(p as u16).drops_total)
        .sum();
    assert_eq!(
        drops, 0,
        "scale bench must not drop ({ports} ports, {flows} flows)"
    );
}

/// A receiving guest: its 256 posted receive heads and the next one to re-post.
type Receiver = (SimGuest, Vec<u16>, usize);

/// Guests on `ports` of `sw`, each with 256 receive buffers of 2 KiB posted.
fn receiving_guests(sw: &Switch, ports: std::ops::Range<usize>) -> Vec<Receiver> {
    ports
        .map(|p| {
            let mut b = SimGuest::new(1, SimGuest::default_features());
            attach(sw, p as u16, b.conn.clone());
            let rx = b.post_rx(0, 0, 256, 2048);
            (b, rx, 0)
        })
        .collect()
}

/// Takes back what each receiver got and re-posts as many receive buffers.
fn recycle(rxg: &mut [Receiver]) {
    for (b, rx, cur) in rxg.iter_mut() {
        let n = usize::from(b.skip_used(0));
        republish_cyclic(b, rx, cur, n);
    }
}

/// Re-posts the next `n` receive heads of `rx` (cyclic from `cur`) on queue 0.
fn republish_cyclic(b: &mut SimGuest, rx: &[u16], cur: &mut usize, n: usize) {
    if n == 0 {
        return;
    }
    let heads: Vec<u16> = (0..n).map(|i| rx[(*cur + i) % rx.len()]).collect();
    *cur = (*cur + n) % rx.len();
    b.republish(0, &heads);
}

/// Multicast replication (issue 30 §2): ns per delivered copy of an 800-byte frame, one
/// sender (port 0) and N receivers (ports 1..=N) that are static members of 239.1.1.1,
/// against the unicast delivery of the same frame to one port behind a static MAC
/// (`unicast`). Bursts of 32 frames (a busy sender) and of 1 (a paced one, as the
/// 40 kpps seed: every copy then pays a whole destination batch). Ids
/// `{burst}burst/{N}rx` and `{burst}burst/unicast`; throughput in copies.
fn replicate(c: &mut Criterion) {
    let mut g = c.benchmark_group("replicate");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    for burst in [32usize, 1] {
        for receivers in [0usize, 1, 8, 64] {
            replicate_one(&mut g, burst, receivers);
        }
    }
    g.finish();
}

/// One `replicate` case; `receivers` 0 is the unicast reference.
fn replicate_one(g: &mut BenchmarkGroup<'_, WallTime>, burst: usize, receivers: usize) {
    let group: std::net::IpAddr = "239.1.1.1".parse().unwrap();
    let ports = 1 + receivers.max(1);
    let names: Vec<String> = (0..ports).map(|i| format!("p{i}")).collect();
    let cfg_ports: Vec<(&str, Option<u16>)> = names.iter().map(|n| (n.as_str(), None)).collect();
    let mut cfg = config(&cfg_ports, true);
    if receivers > 0 {
        cfg.mcast.statics = names[1..].iter().map(|n| (n.clone(), group)).collect();
    }
    let sw = Switch::new(cfg).unwrap();
    let dst = if receivers == 0 {
        let mac = [2, 1, 0, 0, 0, 1];
        sw.fdb.add_static(0, MacAddr(mac), Dest::Port(1));
        mac
    } else {
        [0x01, 0x00, 0x5e, 0x01, 0x01, 0x01]
    };
    let mut f = udp_flow(dst, SRC, 800, 0);
    f[30..34].copy_from_slice(&[239, 1, 1, 1]);
    let mut a = SimGuest::new(1, SimGuest::default_features());
    attach(&sw, 0, a.conn.clone());
    let mut rxg = receiving_guests(&sw, 1..ports);
    let tx: Vec<u16> = (0..128u16).map(|h| a.send(0, h, &f)).collect();
    let mut pmd = Pmd::new(sw.clone(), 0);
    while pmd.poll_once() > 0 {}
    a.skip_used(1);
    recycle(&mut rxg);
    let copies = burst * receivers.max(1);
    let mut k = 0usize;
    g.throughput(Throughput::Elements(copies as u64));
    let id = if receivers == 0 {
        "unicast".to_string()
    } else {
        format!("{receivers}rx")
    };
    g.bench_function(BenchmarkId::new(format!("{burst}burst"), id), |bench| {
        bench.iter_custom(|iters| {
            let mut pmd_time = Duration::ZERO;
            for _ in 0..iters {
                let heads = &tx[k..k + burst];
                k = (k + burst) % tx.len();
                a.republish(1, heads);
                let t = Instant::now();
                black_box(pmd.poll_once());
                pmd_time += t.elapsed();
                a.skip_used(1);
                recycle(&mut rxg);
            }
            pmd_time
        })
    });
    let delivered: u64 = (1..ports).map(|p| sw.port_stats(p as u16).tx_packets).sum();
    let drops: u64 = (1..ports)
        .map(|p| sw.port_stats(p as u16).drops_total)
        .sum();
    assert!(
        delivered > 0 && drops == 0,
        "replicate bench: {delivered} delivered, {drops} dropped"
    );
}

criterion_group!(
    benches,
    pipeline,
    flow_cache,
    tso_vm_to_vm,
    memcpy_reference,
    scale,
    replicate
);
criterion_main!(benches);
