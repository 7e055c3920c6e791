//! Data-path tests on packed virtqueues (virtio 1.2 §2.8) with simulated guests: frames
//! through the wrap of the ring, mergeable buffers, chains in the ring and in indirect
//! tables, malformed transmit chains (receive chains: `tests.rs`, on both ring types),
//! event suppression both ways, and a packed guest next to a split one. Real drivers (testpmd `packed_vq=1`, QEMU `packed=on`) are in the
//! integration tests.

use std::sync::Arc;

use proptest::prelude::*;

use crate::datapath::pmd::Pmd;
use crate::model::fdb::PortId;
use crate::ports::vhost::device::VIRTIO_F_RING_PACKED;
use crate::ports::vhost::virtq::packed::{
    RING_EVENT_FLAGS_DESC, RING_EVENT_FLAGS_DISABLE, RING_EVENT_FLAGS_ENABLE,
};
use crate::ports::vhost::virtq::{VRING_DESC_F_INDIRECT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use crate::switch::Switch;
use crate::testing::{frame, SimGuest};

const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// The features of a packed-ring Linux guest without offloads.
fn packed() -> u64 {
    SimGuest::default_features() | 1 << VIRTIO_F_RING_PACKED
}

fn switch2() -> Arc<Switch> {
    Switch::new(crate::testing::config(&[("p0", None), ("p1", None)], true)).unwrap()
}

/// A guest with `features` and `size`-descriptor queues on port `port` of `sw`.
fn attach(sw: &Switch, port: usize, features: u64, size: u16) -> SimGuest {
    let g = SimGuest::with_queue_size(1, features, size);
    crate::testing::attach(sw, port as PortId, g.conn.clone());
    g
}

fn drops(sw: &Switch, port: PortId, reason: &str) -> u64 {
    sw.port_stats(port).drops[reason]
}

/// Frames from a packed guest to a split one and back, many times round small rings:
/// every position wraps (both wrap counters flip again and again) and every frame
/// arrives intact, in order; every chain is returned.
#[test]
fn frames_cross_the_wrap_between_packed_and_split_guests() {
    let sw = switch2();
    let mut ga = attach(&sw, 0, packed(), 8);
    let mut gb = attach(&sw, 1, SimGuest::default_features(), 8);
    let mut pmd = Pmd::new(sw.clone(), 0);
    let mut seed = 0u8;
    for round in 0..20u16 {
        // 5 each way per round: positions advance by 5 in rings of 8.
        ga.post_rx(0, 0, 5, 2048);
        gb.post_rx(0, 0, 5, 2048);
        let to_b: Vec<Vec<u8>> = (0..5)
            .map(|i| frame(B, A, 60 + i * 97, seed + i as u8))
            .collect();
        let to_a: Vec<Vec<u8>> = (0..5)
            .map(|i| frame(A, B, 1514 - i * 83, seed + i as u8))
            .collect();
        seed = seed.wrapping_add(5);
        for (i, f) in to_b.iter().enumerate() {
            ga.send(0, i as u16, f);
        }
        for (i, f) in to_a.iter().enumerate() {
            gb.send(0, i as u16, f);
        }
        while pmd.poll_once() > 0 {}
        assert_eq!(gb.recv(0), to_b, "round {round}: a -> b");
        assert_eq!(ga.recv(0), to_a, "round {round}: b -> a");
        assert_eq!(ga.tx_completed(0), 5 * (round + 1), "round {round}");
    }
    for p in [0, 1] {
        assert_eq!(sw.port_stats(p).drops_total, 0, "port {p}");
    }
    assert_eq!(sw.port_stats(0).rx_packets, 100);
    assert_eq!(sw.port_stats(0).tx_packets, 100);
}

/// A frame longer than one receive buffer fills several (mergeable rx buffers, each its
/// own used descriptor), and num_buffers says how many.
#[test]
fn a_large_frame_spans_mergeable_buffers() {
    let sw = switch2();
    let mut ga = attach(&sw, 0, SimGuest::default_features(), 256);
    let mut gb = attach(&sw, 1, packed(), 256);
    gb.post_rx(0, 0, 16, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    let f = frame(B, A, 9000, 7);
    ga.send(0, 0, &f);
    pmd.poll_once();
    let got = gb.recv_with_hdr(0);
    assert_eq!(got.len(), 1);
    let (hdr, data) = &got[0];
    assert_eq!(
        u16::from_le_bytes([hdr[10], hdr[11]]),
        5,
        "9012 bytes in 2 KiB buffers"
    );
    assert_eq!(data, &f);
}

/// Transmit chains of several ring descriptors (header apart, frame in two pieces) and
/// an indirect table are gathered; the used position moves by the chain's slots.
#[test]
fn chains_in_the_ring_and_in_indirect_tables() {
    let sw = switch2();
    let mut ga = attach(&sw, 0, packed(), 16);
    let mut gb = attach(&sw, 1, packed(), 16);
    gb.post_rx(0, 0, 8, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    let f1 = frame(B, A, 300, 1);
    let f2 = frame(B, A, 500, 2);
    let buf = ga.slot(1, 40);
    ga.write(buf, &[0u8; 12]);
    ga.write(buf + 12, &f1);
    // Three slots: header, first 100 bytes, the rest.
    ga.packed_chain(
        1,
        &[
            (buf, 12, 0, VRING_DESC_F_NEXT),
            (buf + 12, 100, 0, VRING_DESC_F_NEXT),
            (buf + 112, 200, 9, 0),
        ],
    );
    // An indirect table of two entries (header + frame), entries' ids and NEXT flags
    // ignored as the spec says, and one entry's WRITE flag as DPDK leaves it.
    let buf2 = ga.slot(1, 60);
    ga.write(buf2, &[0u8; 12]);
    ga.write(buf2 + 12, &f2);
    let table = ga.slot(1, 80);
    let mut t = Vec::new();
    for (addr, len, flags) in [
        (buf2, 12u32, VRING_DESC_F_WRITE),
        (buf2 + 12, 500, VRING_DESC_F_NEXT),
    ] {
        t.extend_from_slice(&addr.to_le_bytes());
        t.extend_from_slice(&len.to_le_bytes());
        t.extend_from_slice(&77u16.to_le_bytes());
        t.extend_from_slice(&flags.to_le_bytes());
    }
    ga.write(table, &t);
    ga.packed_chain(1, &[(table, 32, 10, VRING_DESC_F_INDIRECT)]);
    assert_eq!(pmd.poll_once(), 2);
    assert_eq!(gb.recv(0), vec![f1, f2]);
    assert_eq!(sw.port_stats(0).drops_total, 0);
    // Two used descriptors, the first at slot 0 with id 9, the second at slot 3.
    assert_eq!(ga.tx_completed(0), 2);
    assert_eq!(ga.avail_position(1) & 0x7fff, 4);
}

/// Malformed chains are dropped, counted and completed, and a good frame behind them
/// still passes.
#[test]
fn malformed_packed_chains_are_dropped_counted_and_completed() {
    let sw = switch2();
    let mut ga = attach(&sw, 0, packed(), 256);
    let mut gb = attach(&sw, 1, packed(), 256);
    gb.post_rx(0, 0, 8, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    let good = ga.slot(1, 100);
    ga.write(good, &[0u8; 12]);
    ga.write(good + 12, &frame(B, A, 64, 0));
    let table = ga.slot(1, 200);
    let entry = |addr: u64, len: u32, flags: u16| {
        let mut t = addr.to_le_bytes().to_vec();
        t.extend_from_slice(&len.to_le_bytes());
        t.extend_from_slice(&0u16.to_le_bytes());
        t.extend_from_slice(&flags.to_le_bytes());
        t
    };
    ga.write(table, &entry(table, 16, VRING_DESC_F_INDIRECT));
    // 1. a buffer outside guest memory;
    ga.packed_chain(1, &[(1 << 40, 76, 1, 0)]);
    // 2. a device-writable buffer in a transmit chain;
    ga.packed_chain(1, &[(good, 76, 2, VRING_DESC_F_WRITE)]);
    // 3. a nested indirect table;
    ga.packed_chain(1, &[(table, 16, 3, VRING_DESC_F_INDIRECT)]);
    // 4. an indirect table whose length is not a multiple of 16;
    ga.packed_chain(1, &[(table, 10, 4, VRING_DESC_F_INDIRECT)]);
    // 5. INDIRECT with NEXT (§2.8.7 forbids it): two slots, both returned as one chain;
    ga.packed_chain(
        1,
        &[
            (table, 16, 0, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT),
            (good, 76, 5, 0),
        ],
    );
    // 6. a chain of 70 one-byte descriptors (more than 64);
    let long: Vec<(u64, u32, u16, u16)> = (0..70u64)
        .map(|i| (good + i, 1, 6, if i < 69 { VRING_DESC_F_NEXT } else { 0 }))
        .collect();
    ga.packed_chain(1, &long);
    // and a good frame.
    ga.packed_chain(1, &[(good, 76, 7, 0)]);
    assert_eq!(pmd.poll_once(), 7);
    assert_eq!(drops(&sw, 0, "bad_descriptor"), 6);
    assert_eq!(
        ga.tx_completed(0),
        7,
        "every chain, bad or good, is returned"
    );
    assert_eq!(gb.recv(0), vec![frame(B, A, 64, 0)]);
}

/// Interrupts follow the driver's event suppression structure: one per batch with
/// ENABLE, none with DISABLE, and with DESC (EVENT_IDX) only once the used position
/// passes the one the driver named, across the wrap too.
#[test]
fn interrupts_follow_the_driver_event_suppression() {
    let sw = switch2();
    let mut ga = attach(&sw, 0, packed(), 8);
    let mut gb = attach(&sw, 1, packed(), 8);
    let b_rx_irq = gb.call_eventfd(0);
    let mut pmd = Pmd::new(sw.clone(), 0);
    let mut send = |ga: &mut SimGuest, gb: &mut SimGuest, n: u16| {
        gb.post_rx(0, 0, n, 2048);
        for i in 0..n {
            ga.send(0, i, &frame(B, A, 64, i as u8));
        }
        while pmd.poll_once() > 0 {}
        assert_eq!(gb.recv(0).len(), usize::from(n));
    };
    gb.set_driver_event(0, RING_EVENT_FLAGS_ENABLE, 0);
    send(&mut ga, &mut gb, 3);
    assert_eq!(b_rx_irq.read().ok(), Some(1), "one interrupt for the batch");
    gb.set_driver_event(0, RING_EVENT_FLAGS_DISABLE, 0);
    send(&mut ga, &mut gb, 3);
    assert!(b_rx_irq.read().is_err(), "DISABLE suppresses");
    // Used position now slot 6, wrap 1. Ask for slot 1 of the next lap (wrap 0).
    gb.set_driver_event(0, RING_EVENT_FLAGS_DESC, 1);
    send(&mut ga, &mut gb, 2);
    assert!(b_rx_irq.read().is_err(), "slots 6 and 7: not yet");
    send(&mut ga, &mut gb, 2);
    assert_eq!(
        b_rx_irq.read().ok(),
        Some(1),
        "slot 1 of the next lap written"
    );
    send(&mut ga, &mut gb, 2);
    assert!(b_rx_irq.read().is_err(), "past the event: no more");
}

/// The device asks for no kicks on a transmit queue it polls, and for kicks again
/// before its PMD sleeps (reporting a chain that arrived meanwhile).
#[test]
fn kicks_are_disabled_while_polled_and_enabled_to_sleep() {
    let sw = switch2();
    let mut ga = attach(&sw, 0, packed(), 16);
    let _gb = attach(&sw, 1, packed(), 16);
    let mut pmd = Pmd::new(sw.clone(), 0);
    ga.send(0, 0, &frame(B, A, 64, 0));
    pmd.poll_once();
    assert_eq!(ga.device_event_flags(1), RING_EVENT_FLAGS_DISABLE);
    let topo = sw.topo();
    let port = topo.port(0).and_then(|p| p.port.vhost()).unwrap();
    let mut set = crate::ports::SleepSet::new(-1);
    assert!(!port.arm_wakeup(0, &mut set), "nothing pending");
    assert_eq!(ga.device_event_flags(1), RING_EVENT_FLAGS_ENABLE);
    ga.send(0, 1, &frame(B, A, 64, 1));
    assert!(
        port.arm_wakeup(0, &mut set),
        "a chain arrived: do not sleep"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Random frame sizes, from runts to 15000 bytes over 2 KiB mergeable buffers, into
    /// a packed guest whose ring wraps: byte-identical and in order, or (out of
    /// buffers) a prefix with the rest counted.
    #[test]
    fn frames_arrive_intact_on_packed_rings(sizes in proptest::collection::vec(14usize..15000, 1..20)) {
        let sw = switch2();
        let mut ga = attach(&sw, 0, packed(), 256);
        let mut gb = attach(&sw, 1, packed(), 64);
        gb.post_rx(0, 0, 40, 2048);
        let mut pmd = Pmd::new(sw.clone(), 0);
        let frames: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| frame(B, A, n, i as u8)).collect();
        for (i, f) in frames.iter().enumerate() {
            ga.send(0, (i * 8) as u16, f);
        }
        while pmd.poll_once() > 0 {}
        let got = gb.recv(0);
        let needed: usize = frames.iter().map(|f| (f.len() + 12).div_ceil(2048)).sum();
        if needed <= 40 {
            prop_assert_eq!(&got, &frames);
        } else {
            prop_assert_eq!(&got[..], &frames[..got.len()]);
            prop_assert_eq!(got.len() as u64 + sw.port_stats(1).drops["no_rx_buffer"], frames.len() as u64);
        }
        prop_assert_eq!(ga.tx_completed(0) as usize, frames.len());
    }
}

/// With IN_ORDER, a transmit burst comes back as one used descriptor carrying the last
/// chain's buffer id, placed at the burst's first slot and standing for all of its
/// slots (a three-slot chain included); the next bursts continue after them, across the
/// wrap.
#[test]
fn in_order_completes_a_transmit_burst_with_one_used_descriptor() {
    use crate::ports::vhost::device::VIRTIO_F_IN_ORDER;
    let sw = switch2();
    let mut ga = attach(&sw, 0, packed() | 1 << VIRTIO_F_IN_ORDER, 16);
    let mut gb = attach(&sw, 1, packed(), 64);
    let mut pmd = Pmd::new(sw.clone(), 0);
    for round in 0..4u16 {
        gb.post_rx(0, 0, 4, 2048);
        let f = frame(B, A, 100, round as u8);
        let buf = ga.slot(1, 40);
        ga.write(buf, &[0u8; 12]);
        ga.write(buf + 12, &f);
        ga.send(0, 0, &frame(B, A, 64, 1));
        ga.packed_chain(
            1,
            &[
                (buf, 12, 0, VRING_DESC_F_NEXT),
                (buf + 12, 50, 0, VRING_DESC_F_NEXT),
                (buf + 62, 50, 7, 0),
            ],
        );
        ga.send(0, 2, &frame(B, A, 64, 2));
        ga.send(0, 3, &frame(B, A, 64, 3));
        assert_eq!(pmd.poll_once(), 4, "round {round}");
        assert_eq!(gb.recv(0).len(), 4, "round {round}");
        // One used descriptor per burst: the count moves by one.
        assert_eq!(ga.tx_completed(0), round + 1, "round {round}");
    }
    assert_eq!(sw.port_stats(0).drops_total, 0);
    assert_eq!(sw.port_stats(0).rx_packets, 16);
}
