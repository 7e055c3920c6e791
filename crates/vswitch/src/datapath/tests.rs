//! Data-path tests with simulated guests: switching, drops by reason, and malicious
//! descriptor chains (which no real guest sends on purpose).

use std::sync::Arc;

use proptest::prelude::*;

use crate::datapath::packet::VirtioNetHdr;
use crate::datapath::pmd::Pmd;
use crate::model::fdb::PortId;
use crate::ports::vhost::virtq::{VRING_DESC_F_INDIRECT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use crate::switch::Switch;
use crate::testing::{frame, RawDesc, SimGuest, QUEUE_SIZE};

const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const C: [u8; 6] = [2, 0, 0, 0, 0, 3];
const BCAST: [u8; 6] = [0xff; 6];

fn switch(vlans: &[Option<u16>]) -> Arc<Switch> {
    switch_with(vlans, true)
}

fn switch_with(vlans: &[Option<u16>], flow_cache: bool) -> Arc<Switch> {
    let names: Vec<String> = (0..vlans.len()).map(|i| format!("p{i}")).collect();
    let ports: Vec<(&str, Option<u16>)> = names
        .iter()
        .map(String::as_str)
        .zip(vlans.iter().copied())
        .collect();
    Switch::new(crate::testing::config(&ports, flow_cache)).unwrap()
}

fn attach(sw: &Switch, port: usize, features: u64) -> SimGuest {
    let g = SimGuest::new(1, features);
    crate::testing::attach(sw, port as PortId, g.conn.clone());
    g
}

fn drops(sw: &Switch, port: PortId, reason: &str) -> u64 {
    sw.port_stats(port).drops[reason]
}

#[test]
fn flood_then_learn_then_unicast() {
    let sw = switch(&[None, None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    let mut gc = attach(&sw, 2, SimGuest::default_features());
    for g in [&mut ga, &mut gb, &mut gc] {
        g.post_rx(0, 0, 16, 2048);
    }
    let mut pmd = Pmd::new(sw.clone(), 0);
    // Unknown destination: flooded to b and c.
    ga.send(0, 0, &frame(B, A, 100, 1));
    assert_eq!(pmd.poll_once(), 1);
    assert_eq!(gb.recv(0), vec![frame(B, A, 100, 1)]);
    assert_eq!(gc.recv(0), vec![frame(B, A, 100, 1)]);
    assert_eq!(ga.tx_completed(0), 1);
    // b answers: a was learned on port 0, so only a receives.
    gb.send(0, 0, &frame(A, B, 200, 2));
    pmd.poll_once();
    assert_eq!(ga.recv(0), vec![frame(A, B, 200, 2)]);
    assert!(gc.recv(0).is_empty(), "c must not see unicast to a");
    // Now both are learned: a → b goes to b only.
    ga.send(0, 1, &frame(B, A, 300, 3));
    pmd.poll_once();
    assert_eq!(gb.recv(0), vec![frame(B, A, 300, 3)]);
    assert!(gc.recv(0).is_empty());
    let rows = sw.fdb.rows();
    assert_eq!(rows.len(), 2);
    let s = sw.port_stats(1);
    assert_eq!((s.rx_packets, s.tx_packets), (1, 2));
    assert_eq!(s.tx_bytes, 400);
}

#[test]
fn no_rx_buffer_is_counted_and_recovers() {
    let sw = switch(&[None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    let mut pmd = Pmd::new(sw.clone(), 0);
    for i in 0..4 {
        ga.send(0, i, &frame(B, A, 64, i as u8));
    }
    pmd.poll_once();
    assert_eq!(drops(&sw, 1, "no_rx_buffer"), 4);
    assert_eq!(
        ga.tx_completed(0),
        4,
        "dropped frames still complete their tx chains"
    );
    gb.post_rx(0, 0, 2, 2048);
    for i in 4..7 {
        ga.send(0, i, &frame(B, A, 64, i as u8));
    }
    pmd.poll_once();
    assert_eq!(gb.recv(0).len(), 2);
    assert_eq!(drops(&sw, 1, "no_rx_buffer"), 5);
    let s = sw.port_stats(0);
    assert_eq!(s.rx_packets, 7);
    assert_eq!(
        sw.port_stats(1).tx_packets + sw.port_stats(1).drops_total,
        7
    );
}

#[test]
fn vlans_are_separate_domains() {
    let sw = switch(&[Some(10), Some(10), Some(20), None]);
    let mut g: Vec<SimGuest> = (0..4)
        .map(|i| attach(&sw, i, SimGuest::default_features()))
        .collect();
    for x in g.iter_mut() {
        x.post_rx(0, 0, 8, 2048);
    }
    let mut pmd = Pmd::new(sw.clone(), 0);
    g[0].send(0, 0, &frame(BCAST, A, 64, 0));
    pmd.poll_once();
    assert_eq!(g[1].recv(0).len(), 1);
    assert!(g[2].recv(0).is_empty() && g[3].recv(0).is_empty());
    // A tagged frame on an access port is dropped and counted.
    let mut tagged = frame(BCAST, A, 64, 0);
    tagged[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
    g[0].send(0, 1, &tagged);
    pmd.poll_once();
    assert_eq!(drops(&sw, 0, "vlan_tagged"), 1);
    // Alone in its VLAN, a broadcast has nowhere to go: counted.
    g[2].send(0, 0, &frame(BCAST, C, 64, 0));
    pmd.poll_once();
    assert_eq!(drops(&sw, 2, "no_destination"), 1);
}

#[test]
fn runt_frames_are_dropped() {
    let sw = switch(&[None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    gb.post_rx(0, 0, 4, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    ga.send(0, 0, &[1, 2, 3]);
    pmd.poll_once();
    assert_eq!(drops(&sw, 0, "runt"), 1);
    assert!(gb.recv(0).is_empty());
}

#[test]
fn large_frame_without_mergeable_buffers_is_too_big() {
    use virtio_bindings::virtio_net::VIRTIO_NET_F_MRG_RXBUF;
    let sw = switch(&[None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(
        &sw,
        1,
        SimGuest::default_features() & !(1 << VIRTIO_NET_F_MRG_RXBUF),
    );
    gb.post_rx(0, 0, 4, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    ga.send(0, 0, &frame(B, A, 4000, 9));
    pmd.poll_once();
    assert_eq!(drops(&sw, 1, "frame_too_big"), 1);
    // The buffer was not consumed: a small frame still fits.
    ga.send(0, 1, &frame(B, A, 1000, 9));
    pmd.poll_once();
    assert_eq!(gb.recv(0), vec![frame(B, A, 1000, 9)]);
}

#[test]
fn malformed_chains_are_dropped_counted_and_completed() {
    let sw = switch(&[None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    gb.post_rx(0, 0, 32, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    let good = SimGuest::slot_addr(1, 100);
    ga.write(good, &[0u8; 12]);
    ga.write(good + 12, &frame(B, A, 64, 0));
    let d = |addr, len, flags, next| RawDesc {
        addr,
        len,
        flags,
        next,
    };
    // 1. A loop: descriptor 10 → 11 → 10 ...
    ga.send_chain(
        0,
        10,
        &[
            (10, d(good, 40, VRING_DESC_F_NEXT, 11)),
            (11, d(good + 40, 36, VRING_DESC_F_NEXT, 10)),
        ],
    );
    // 2. next index out of range.
    ga.send_chain(
        0,
        12,
        &[(12, d(good, 40, VRING_DESC_F_NEXT, QUEUE_SIZE + 5))],
    );
    // 3. buffer outside guest memory.
    ga.send_chain(0, 13, &[(13, d(1 << 40, 76, 0, 0))]);
    // 4. a device-writable buffer in a transmit chain.
    ga.send_chain(0, 14, &[(14, d(good, 76, VRING_DESC_F_WRITE, 0))]);
    // 5. nested indirect: an indirect table whose entry is itself indirect.
    let table = SimGuest::slot_addr(1, 200);
    let mut t = Vec::new();
    t.extend_from_slice(&table.to_le_bytes());
    t.extend_from_slice(&16u32.to_le_bytes());
    t.extend_from_slice(&VRING_DESC_F_INDIRECT.to_le_bytes());
    t.extend_from_slice(&0u16.to_le_bytes());
    ga.write(table, &t);
    ga.send_chain(0, 15, &[(15, d(table, 16, VRING_DESC_F_INDIRECT, 0))]);
    // 6. an indirect table with a length that is not a multiple of 16.
    ga.send_chain(0, 16, &[(16, d(table, 10, VRING_DESC_F_INDIRECT, 0))]);
    // 7. head index out of range.
    ga.publish(1, QUEUE_SIZE + 1);
    // 8. a chain longer than 64 descriptors (each 1 byte, in range, no loop).
    let long: Vec<(u16, RawDesc)> = (0..70u16)
        .map(|i| {
            (
                30 + i,
                d(
                    good + u64::from(i),
                    1,
                    if i < 69 { VRING_DESC_F_NEXT } else { 0 },
                    31 + i,
                ),
            )
        })
        .collect();
    ga.send_chain(0, 30, &long);
    // And a good frame after them.
    ga.send_chain(0, 5, &[(5, d(good, 76, 0, 0))]);
    assert_eq!(pmd.poll_once(), 9);
    assert_eq!(drops(&sw, 0, "bad_descriptor"), 8);
    assert_eq!(
        ga.tx_completed(0),
        9,
        "every chain, bad or good, is returned"
    );
    assert_eq!(gb.recv(0), vec![frame(B, A, 64, 0)]);
}

/// A receive chain of the wrong direction comes back empty and counted; the frame takes
/// the next one. On split and on packed rings.
#[test]
fn malformed_rx_chains_are_completed_empty() {
    use crate::ports::vhost::device::VIRTIO_F_RING_PACKED;
    for packed in [false, true] {
        let features =
            SimGuest::default_features() | if packed { 1 << VIRTIO_F_RING_PACKED } else { 0 };
        let sw = switch(&[None, None]);
        let mut ga = attach(&sw, 0, features);
        let mut gb = attach(&sw, 1, features);
        // Receive buffer 0 is device-readable (wrong direction), 1 is fine.
        gb.make_avail(0, 0, SimGuest::slot_addr(0, 0), 2048, false);
        gb.post_rx(0, 1, 1, 2048);
        let mut pmd = Pmd::new(sw.clone(), 0);
        ga.send(0, 0, &frame(B, A, 100, 4));
        pmd.poll_once();
        assert_eq!(drops(&sw, 1, "bad_descriptor"), 1, "packed: {packed}");
        let got = gb.recv(0);
        assert_eq!(
            got.len(),
            2,
            "packed: {packed}: the bad chain comes back empty, then the frame"
        );
        assert!(got[0].is_empty());
        assert_eq!(got[1], frame(B, A, 100, 4));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random frame sizes, including ones spanning several 2 KiB mergeable buffers,
    /// arrive byte-identical and in order, and the counters match.
    #[test]
    fn frames_arrive_intact(sizes in proptest::collection::vec(14usize..15000, 1..20)) {
        let sw = switch(&[None, None]);
        let mut ga = attach(&sw, 0, SimGuest::default_features());
        let mut gb = attach(&sw, 1, SimGuest::default_features());
        gb.post_rx(0, 0, 200, 2048);
        let mut pmd = Pmd::new(sw.clone(), 0);
        let frames: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| frame(B, A, n, i as u8)).collect();
        for (i, f) in frames.iter().enumerate() {
            ga.send(0, (i * 8) as u16, f);
        }
        while pmd.poll_once() > 0 {}
        let got = gb.recv(0);
        let total: u64 = frames.iter().map(|f| f.len() as u64).sum();
        let needed: usize = frames.iter().map(|f| (f.len() + 12).div_ceil(2048)).sum();
        if needed <= 200 {
            prop_assert_eq!(&got, &frames);
            prop_assert_eq!(sw.port_stats(1).tx_bytes, total);
        } else {
            // Out of buffers: what arrived is a prefix, the rest is counted.
            prop_assert_eq!(&got[..], &frames[..got.len()]);
            prop_assert_eq!(got.len() as u64 + sw.port_stats(1).drops["no_rx_buffer"], frames.len() as u64);
        }
    }
}

/// An IPv4/UDP frame from `src` (IP 10.0.0.`host`) to `dst`, UDP destination port `dport`.
fn udp(dst: [u8; 6], src: [u8; 6], host: u8, dport: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[
        0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, host, 10, 0, 1, 1,
    ]);
    f.extend_from_slice(&1234u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&26u16.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&[0xab; 18]);
    f
}

#[test]
fn acl_drops_are_counted_per_rule_and_edits_apply() {
    let sw = switch(&[None, None]);
    sw.edit_acl(0, |a| {
        a.push("drop ip_proto=udp l4_dst=5000-5999".parse().unwrap())
    })
    .unwrap();
    sw.edit_acl(0, |a| a.push("drop ip_src=10.0.0.7/32".parse().unwrap()))
        .unwrap();
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    gb.post_rx(0, 0, 64, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    let frames = [
        udp(B, A, 1, 5001),
        udp(B, A, 1, 80),
        udp(B, A, 7, 80),
        udp(B, A, 2, 5999),
        udp(B, A, 2, 6000),
    ];
    for (i, f) in frames.iter().enumerate() {
        ga.send(0, i as u16, f);
    }
    pmd.poll_once();
    assert_eq!(gb.recv(0), vec![frames[1].clone(), frames[4].clone()]);
    assert_eq!(sw.acl_drops(0, 0), 2);
    assert_eq!(sw.acl_drops(0, 1), 1);
    assert_eq!(drops(&sw, 0, "acl"), 3);
    // Removing the first rule applies at once, though the flows are cached.
    sw.edit_acl(0, |a| a.remove(0).map(|_| ())).unwrap();
    for (i, f) in frames.iter().enumerate() {
        ga.send(0, 10 + i as u16, f);
    }
    pmd.poll_once();
    assert_eq!(gb.recv(0).len(), 4, "only 10.0.0.7 is still dropped");
    assert_eq!(
        sw.acl_drops(0, 0),
        1,
        "counters restart when the ACL changes"
    );
}

#[test]
fn consecutive_frames_of_a_flow_hit_the_cache() {
    let sw = switch(&[None, None]);
    // A rule that matches nothing: ports without ACL rules skip the cache.
    sw.edit_acl(0, |a| a.push("drop ip_src=192.0.2.0/24".parse().unwrap()))
        .unwrap();
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    gb.post_rx(0, 0, 200, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    // Learn both MACs first: learning bumps the generation and would invalidate the
    // cache once under the test.
    gb.send(0, 0, &frame(A, B, 64, 0));
    ga.send(0, 255, &frame(B, A, 64, 0));
    pmd.poll_once();
    ga.recv(0);
    gb.recv(0);
    let before: Vec<u64> = sw.pmds[0].cache_stats.iter().map(|c| c.get()).collect();
    for round in 0..4u16 {
        for i in 0..32u16 {
            // 4 flows, in runs of 8 consecutive frames.
            ga.send(0, round * 32 + i, &udp(B, A, (i / 8) as u8, 80));
        }
        pmd.poll_once();
    }
    let after: Vec<u64> = sw.pmds[0].cache_stats.iter().map(|c| c.get()).collect();
    let (last, emc, miss) = (
        after[0] - before[0],
        after[1] - before[1],
        after[2] - before[2],
    );
    assert_eq!(last + emc + miss, 128);
    assert_eq!(miss, 4, "one miss per flow");
    assert_eq!(
        last,
        128 - 16,
        "7 of each run of 8 reuse the previous decision"
    );
    assert_eq!(emc, 12);
    assert_eq!(gb.recv(0).len(), 128);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// The switch decides the same with and without the flow cache, for random traffic
    /// (MACs, VLAN-less ports, UDP flows) and random configuration changes between
    /// bursts (ACL edits, a port's MACs flushed).
    #[test]
    fn cache_does_not_change_decisions(
        ops in proptest::collection::vec(
            prop_oneof![
                8 => (0usize..3, 0usize..4, 0u8..6, 0u16..4).prop_map(|(s, d, h, p)| Op::Send(s, d, h, p)),
                1 => (0usize..3, 0u8..6).prop_map(|(port, h)| Op::AddAcl(port, h)),
                1 => (0usize..3).prop_map(Op::DelAcl),
                1 => (0usize..3).prop_map(Op::Flush),
            ],
            1..60,
        )
    ) {
        let macs = [A, B, C, BCAST];
        let mut worlds: Vec<(Arc<Switch>, Vec<SimGuest>, Pmd)> = [true, false]
            .into_iter()
            .map(|cache| {
                let sw = switch_with(&[None, None, None], cache);
                let mut gs: Vec<SimGuest> = (0..3).map(|i| attach(&sw, i, SimGuest::default_features())).collect();
                for g in gs.iter_mut() {
                    g.post_rx(0, 0, 250, 2048);
                }
                let pmd = Pmd::new(sw.clone(), 0);
                (sw, gs, pmd)
            })
            .collect();
        let mut head = [0u16; 3];
        for op in &ops {
            for (sw, gs, pmd) in worlds.iter_mut() {
                match *op {
                    Op::Send(s, d, h, p) => {
                        let src = macs[s];
                        gs[s].send(0, head[s], &udp(macs[d], src, h, 5000 + p));
                        pmd.poll_once();
                    }
                    Op::AddAcl(port, h) => {
                        let rule = format!("drop ip_src=10.0.0.{h}/32");
                        sw.edit_acl(port as PortId, |a| a.push(rule.parse().unwrap()).map(|_| ())).unwrap();
                    }
                    Op::DelAcl(port) => {
                        let _ = sw.edit_acl(port as PortId, |a| a.remove(0).map(|_| ()));
                    }
                    Op::Flush(port) => {
                        sw.fdb.flush_port(port as PortId, false);
                    }
                }
            }
            if let Op::Send(s, ..) = *op {
                head[s] = (head[s] + 1) % 200;
            }
        }
        let received: Vec<Vec<Vec<Vec<u8>>>> = worlds
            .iter_mut()
            .map(|(_, gs, _)| gs.iter_mut().map(|g| g.recv(0)).collect())
            .collect();
        prop_assert_eq!(&received[0], &received[1]);
        for port in 0..3 {
            prop_assert_eq!(worlds[0].0.port_stats(port), worlds[1].0.port_stats(port));
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Send(usize, usize, u8, u16),
    AddAcl(usize, u8),
    DelAcl(usize),
    Flush(usize),
}

/// Frames delivered while the driver had no call eventfd here (or whose interrupt its
/// previous QEMU process never delivered, across a live migration) are announced by the
/// interrupt a new eventfd gets: with EVENT_IDX, later batches past `used_event` would
/// not interrupt, and a driver waiting for one would never look at its ring again.
#[test]
fn a_new_call_eventfd_announces_what_was_published_before_it() {
    let sw = switch(&[None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    gb.post_rx(0, 0, 64, 2048);
    gb.set_used_event(0, 0);
    let mut pmd = Pmd::new(sw.clone(), 0);
    for i in 0..3 {
        ga.send(0, i, &frame(B, A, 64, i as u8));
    }
    pmd.poll_once();
    // The batch crossed used_event with nowhere to signal; the next one does not cross.
    let irq = gb.new_call_eventfd(0);
    assert_eq!(
        irq.read().ok(),
        Some(1),
        "the new eventfd is signalled once"
    );
    for i in 3..6 {
        ga.send(0, i, &frame(B, A, 64, i as u8));
    }
    pmd.poll_once();
    assert!(irq.read().is_err(), "used_event 0 is behind: no interrupt");
    assert_eq!(gb.recv(0).len(), 6, "all six frames are in the ring");
}

#[test]
fn one_interrupt_per_batch_and_event_idx_respected() {
    use virtio_bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
    let sw = switch(&[None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    let b_rx_irq = gb.call_eventfd(0);
    let a_tx_irq = ga.call_eventfd(1);
    gb.post_rx(0, 0, 64, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    // used_event = 0: the driver wants an interrupt once the used index passes 0.
    gb.set_used_event(0, 0);
    ga.set_used_event(1, 0);
    for i in 0..5 {
        ga.send(0, i, &frame(B, A, 64, i as u8));
    }
    pmd.poll_once();
    assert_eq!(gb.recv(0).len(), 5);
    assert_eq!(
        b_rx_irq.read().ok(),
        Some(1),
        "one interrupt for the batch of 5"
    );
    assert_eq!(
        a_tx_irq.read().ok(),
        Some(1),
        "one for the 5 completed tx chains"
    );
    // used_event far ahead: no interrupt until the used index reaches it.
    gb.set_used_event(0, 100);
    ga.set_used_event(1, 100);
    for i in 5..10 {
        ga.send(0, i, &frame(B, A, 64, i as u8));
    }
    pmd.poll_once();
    assert_eq!(gb.recv(0).len(), 5);
    assert!(
        b_rx_irq.read().is_err(),
        "EVENT_IDX: no interrupt before used_event"
    );
    assert!(a_tx_irq.read().is_err());

    // Without EVENT_IDX the NO_INTERRUPT flag decides.
    let sw = switch(&[None, None]);
    let feats = SimGuest::default_features() & !(1 << VIRTIO_RING_F_EVENT_IDX);
    let mut ga = attach(&sw, 0, feats);
    let mut gb = attach(&sw, 1, feats);
    let b_rx_irq = gb.call_eventfd(0);
    gb.post_rx(0, 0, 64, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    gb.set_no_interrupt(0, true);
    ga.send(0, 0, &frame(B, A, 64, 0));
    pmd.poll_once();
    assert!(b_rx_irq.read().is_err(), "NO_INTERRUPT suppresses");
    gb.set_no_interrupt(0, false);
    for i in 1..4 {
        ga.send(0, i, &frame(B, A, 64, 0));
    }
    pmd.poll_once();
    assert_eq!(b_rx_irq.read().ok(), Some(1), "one interrupt per batch");
    assert_eq!(gb.recv(0).len(), 4);
}

/// RFC 1071 checksum over `data` plus `init`, written independently of the code under
/// test.
fn inet_sum(init: u32, data: &[u8]) -> u16 {
    let mut sum = init;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        sum += u32::from(w);
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet + IPv4 + TCP frame with `payload` bytes and a partial TCP checksum (the
/// pseudo-header sum, as a driver using VIRTIO_NET_F_CSUM leaves it).
fn tcp_frame(payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&B);
    f.extend_from_slice(&A);
    f.extend_from_slice(&[0x08, 0x00]);
    let tot = (20 + 20 + payload) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip[2..4].copy_from_slice(&tot.to_be_bytes());
    let c = inet_sum(0, &ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&1000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&7000u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // PSH, ACK
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    // Pseudo-header sum, not complemented (CHECKSUM_PARTIAL).
    let len = (20 + payload) as u32;
    let mut ps = 0x0a00u32 + 0x0001 + 0x0a00 + 0x0002 + 6 + len;
    while ps > 0xffff {
        ps = (ps & 0xffff) + (ps >> 16);
    }
    tcp[16..18].copy_from_slice(&(ps as u16).to_be_bytes());
    f.extend_from_slice(&tcp);
    f.extend((0..payload).map(|i| (i * 13 % 251) as u8));
    f
}

fn tcp_ok(f: &[u8]) -> bool {
    let ip = &f[14..34];
    if inet_sum(0, ip) != 0 {
        return false;
    }
    let tot = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let seg = &f[34..14 + tot];
    let ps = 0x0a00u32 + 0x0001 + 0x0a00 + 0x0002 + 6 + seg.len() as u32;
    inet_sum(ps, seg) == 0
}

/// The virtio-net header of a TCPv4 TSO frame from [`tcp_frame`]: NEEDS_CSUM at the TCP
/// checksum (34 + 16), headers of 54 bytes, MSS 1448.
fn tso4_hdr() -> [u8; 12] {
    VirtioNetHdr {
        flags: 1,
        gso_type: 1,
        hdr_len: 54,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
    }
    .to_bytes()
}

#[test]
fn tso_and_partial_checksums_go_whole_or_in_software() {
    use virtio_bindings::virtio_net::{
        VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_HOST_TSO4,
    };
    let mut cfg = crate::testing::config(&[("a", None), ("b", None), ("c", None)], true);
    cfg.ports[0].offloads = true;
    cfg.ports[2].offloads = true;
    let sw = Switch::new(cfg).unwrap();
    let base = SimGuest::default_features();
    let mut ga = attach(
        &sw,
        0,
        base | 1 << VIRTIO_NET_F_CSUM | 1 << VIRTIO_NET_F_HOST_TSO4,
    );
    let mut gb = attach(&sw, 1, base);
    let mut gc = attach(
        &sw,
        2,
        base | 1 << VIRTIO_NET_F_GUEST_CSUM | 1 << VIRTIO_NET_F_GUEST_TSO4,
    );
    gb.post_rx(0, 0, 64, 2048);
    gc.post_rx(0, 0, 64, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    // Learn b and c so unicast goes where the test says.
    gb.send(0, 0, &frame(A, B, 64, 0));
    gc.send(0, 0, &frame(A, C, 64, 0));
    pmd.poll_once();
    ga.recv(0);
    gb.recv(0);
    gc.recv(0);

    let payload = 10_000;
    let big = tcp_frame(payload);
    let hdr = tso4_hdr();
    // To b (no offloads): segmented in software, every checksum complete.
    ga.send_with_hdr(0, 0, hdr, &big);
    pmd.poll_once();
    let segs = gb.recv_with_hdr(0);
    assert_eq!(segs.len(), payload.div_ceil(1448));
    let mut data = Vec::new();
    for (h, s) in &segs {
        assert_eq!(h[..10], [0u8; 10], "no offload flags towards b");
        assert!(s.len() <= 14 + 20 + 20 + 1448);
        assert!(tcp_ok(s), "segment checksums verify");
        data.extend_from_slice(&s[54..]);
    }
    assert_eq!(data, big[54..], "payload intact");
    assert_eq!(sw.port_stats(1).segmented, 1);

    // To c (GUEST_TSO4 + GUEST_CSUM): whole, header passed through.
    let mut to_c = big.clone();
    to_c[0..6].copy_from_slice(&C);
    ga.send_with_hdr(0, 32, hdr, &to_c);
    pmd.poll_once();
    let got = gc.recv_with_hdr(0);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0[..10], hdr[..10]);
    assert_eq!(got[0].1, to_c);
    assert_eq!(sw.port_stats(2).segmented, 0);

    // A partial checksum without TSO, to b: completed in software.
    let small = tcp_frame(500);
    let mut h2 = hdr;
    h2[1] = 0;
    h2[4..6].copy_from_slice(&0u16.to_le_bytes());
    ga.send_with_hdr(0, 0, h2, &small);
    pmd.poll_once();
    let got = gb.recv_with_hdr(0);
    assert_eq!(got.len(), 1);
    assert!(tcp_ok(&got[0].1));
    assert_eq!(sw.port_stats(1).csum_completed, 1);

    // An impossible offset: dropped where it came in and counted, nothing delivered.
    let mut h3 = h2;
    h3[6..8].copy_from_slice(&5000u16.to_le_bytes());
    ga.send_with_hdr(0, 0, h3, &small);
    pmd.poll_once();
    assert!(gb.recv(0).is_empty());
    assert_eq!(drops(&sw, 0, "bad_offload"), 1);
}

/// Headers a driver may not send (virtio 1.2 §5.1.6.2; Linux `virtio_net_hdr_to_skb`)
/// are dropped at the source port as `bad_offload`, before any destination sees them:
/// a GSO type the driver did not negotiate (TSO6 with only HOST_TSO4, CWR without
/// HOST_ECN), UDP and unknown GSO types, `gso_size` below 48, a TSO checksum that is not
/// TCP's, `hdr_len` or the checksum field past the frame. The same frame with a good
/// header still goes through.
#[test]
fn hostile_offload_headers_are_dropped_at_ingress() {
    use virtio_bindings::virtio_net::{VIRTIO_NET_F_CSUM, VIRTIO_NET_F_HOST_TSO4};
    let mut cfg = crate::testing::config(&[("a", None), ("b", None)], true);
    cfg.ports[0].offloads = true;
    let sw = Switch::new(cfg).unwrap();
    let base = SimGuest::default_features();
    let mut ga = attach(
        &sw,
        0,
        base | 1 << VIRTIO_NET_F_CSUM | 1 << VIRTIO_NET_F_HOST_TSO4,
    );
    let mut gb = attach(&sw, 1, base);
    gb.post_rx(0, 0, 128, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    gb.send(0, 0, &frame(A, B, 64, 0));
    pmd.poll_once();
    let big = tcp_frame(10_000);
    let good = tso4_hdr();
    let with = |at: usize, v: &[u8]| {
        let mut h = good;
        h[at..at + v.len()].copy_from_slice(v);
        h
    };
    let bad = [
        ("TSO6 not negotiated", with(1, &[4])),
        ("CWR without HOST_ECN", with(1, &[1 | 0x80])),
        ("UDP GSO", with(1, &[3])),
        ("unknown GSO type", with(1, &[9])),
        ("gso_size 1", with(4, &1u16.to_le_bytes())),
        ("gso_size 47", with(4, &47u16.to_le_bytes())),
        ("TSO checksum not TCP's", with(8, &6u16.to_le_bytes())),
        ("hdr_len past the frame", with(2, &20_000u16.to_le_bytes())),
        (
            "csum_start past the frame",
            with(6, &10_050u16.to_le_bytes()),
        ),
    ];
    for (i, (what, h)) in bad.iter().enumerate() {
        ga.send_with_hdr(0, 0, *h, &big);
        pmd.poll_once();
        assert!(gb.recv(0).is_empty(), "{what}: nothing delivered");
        assert_eq!(
            drops(&sw, 0, "bad_offload"),
            i as u64 + 1,
            "{what}: counted"
        );
    }
    ga.send_with_hdr(0, 0, with(4, &88u16.to_le_bytes()), &big);
    pmd.poll_once();
    assert_eq!(
        gb.recv(0).len(),
        10_000usize.div_ceil(88),
        "gso_size 88 is fine"
    );
    assert_eq!(drops(&sw, 0, "bad_offload"), bad.len() as u64);
    assert_eq!(drops(&sw, 1, "bad_offload"), 0);
}

/// A TSO frame with CWR set (gso_type TCPV4 | ECN, HOST_ECN) goes whole to a guest with
/// GUEST_TSO4 and GUEST_ECN; for one with GUEST_TSO4 but no GUEST_ECN it is segmented,
/// CWR kept on the first segment only.
#[test]
fn tso_ecn_goes_whole_only_with_guest_ecn() {
    use virtio_bindings::virtio_net::{
        VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_ECN,
        VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_HOST_ECN, VIRTIO_NET_F_HOST_TSO4,
    };
    let mut cfg = crate::testing::config(&[("a", None), ("b", None), ("c", None)], true);
    for p in &mut cfg.ports {
        p.offloads = true;
    }
    let sw = Switch::new(cfg).unwrap();
    let base = SimGuest::default_features();
    let tso_in = 1 << VIRTIO_NET_F_GUEST_CSUM | 1 << VIRTIO_NET_F_GUEST_TSO4;
    let mut ga = attach(
        &sw,
        0,
        base | 1 << VIRTIO_NET_F_CSUM | 1 << VIRTIO_NET_F_HOST_TSO4 | 1 << VIRTIO_NET_F_HOST_ECN,
    );
    let mut gb = attach(&sw, 1, base | tso_in);
    let mut gc = attach(&sw, 2, base | tso_in | 1 << VIRTIO_NET_F_GUEST_ECN);
    gb.post_rx(0, 0, 64, 2048);
    gc.post_rx(0, 0, 64, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    gb.send(0, 0, &frame(A, B, 64, 0));
    gc.send(0, 0, &frame(A, C, 64, 0));
    pmd.poll_once();
    gb.recv(0);
    gc.recv(0);

    let payload = 5000;
    let mut big = tcp_frame(payload);
    big[34 + 13] |= 0x80; // CWR
    let mut hdr = [0u8; 12];
    hdr[0] = 1; // NEEDS_CSUM
    hdr[1] = 1 | 0x80; // GSO_TCPV4 | GSO_ECN
    hdr[2..4].copy_from_slice(&54u16.to_le_bytes());
    hdr[4..6].copy_from_slice(&1448u16.to_le_bytes());
    hdr[6..8].copy_from_slice(&34u16.to_le_bytes());
    hdr[8..10].copy_from_slice(&16u16.to_le_bytes());
    ga.send_with_hdr(0, 0, hdr, &big);
    pmd.poll_once();
    let segs = gb.recv_with_hdr(0);
    assert_eq!(
        segs.len(),
        payload.div_ceil(1448),
        "segmented for b (no GUEST_ECN)"
    );
    for (i, (_, s)) in segs.iter().enumerate() {
        assert!(tcp_ok(s), "segment {i} checksums");
        assert_eq!(
            s[34 + 13] & 0x80 != 0,
            i == 0,
            "CWR on the first segment only"
        );
    }
    let mut to_c = big.clone();
    to_c[0..6].copy_from_slice(&C);
    ga.send_with_hdr(0, 32, hdr, &to_c);
    pmd.poll_once();
    let got = gc.recv_with_hdr(0);
    assert_eq!(got.len(), 1, "whole to c (GUEST_ECN)");
    assert_eq!(got[0].0[..10], hdr[..10]);
    assert_eq!(got[0].1, to_c);
}

/// Port security: a port with `mac=` (and `allowed_macs=`) forwards frames from those
/// source MACs only; others are dropped as `spoofed_source` at the port, never learned
/// (so a guest cannot take another's MAC and its traffic). With ACL rules (the flow
/// cache) and without.
#[test]
fn port_security_drops_spoofed_sources() {
    for flow_cache in [false, true] {
        let mut cfg = crate::testing::config(&[("a", None), ("b", None)], flow_cache);
        cfg.ports[0].mac = Some(crate::config::MacAddr(A));
        cfg.ports[0].allowed_macs = vec![crate::config::MacAddr(C)];
        if flow_cache {
            let rule = "drop ip_proto=udp l4_dst=9".parse().unwrap();
            cfg.acl.push(("a".into(), rule));
        }
        let sw = Switch::new(cfg).unwrap();
        let mut ga = attach(&sw, 0, SimGuest::default_features());
        let mut gb = attach(&sw, 1, SimGuest::default_features());
        gb.post_rx(0, 0, 64, 2048);
        let mut pmd = Pmd::new(sw.clone(), 0);
        gb.send(0, 0, &frame(A, B, 64, 0));
        pmd.poll_once();
        ga.send(0, 0, &frame(B, A, 64, 1));
        ga.send(0, 1, &frame(B, C, 64, 2));
        ga.send(0, 2, &frame(B, B, 64, 3)); // b's own MAC
        ga.send(0, 3, &frame(B, [2, 0, 0, 0, 0, 9], 64, 4));
        pmd.poll_once();
        let got = gb.recv(0);
        assert_eq!(
            got,
            vec![frame(B, A, 64, 1), frame(B, C, 64, 2)],
            "cache {flow_cache}"
        );
        assert_eq!(drops(&sw, 0, "spoofed_source"), 2);
        assert_eq!(
            sw.fdb.reader().lookup(crate::model::fdb::fdb_key(0, &B)),
            Some(crate::model::fdb::Dest::Port(1)),
            "b's MAC stays on b"
        );
    }
}

/// A port may teach the FDB at most `max_macs` MACs: frames from further new MACs are
/// dropped as `mac_limit` (their replies would otherwise be flooded); MACs already
/// learned keep working.
#[test]
fn mac_limit_per_port() {
    let mut cfg = crate::testing::config(&[("a", None), ("b", None)], false);
    cfg.ports[0].max_macs = Some(4);
    let sw = Switch::new(cfg).unwrap();
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    gb.post_rx(0, 0, 64, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    for i in 0..10u8 {
        ga.send(0, u16::from(i), &frame(B, [2, 0, 0, 0, 1, i], 64, i));
    }
    pmd.poll_once();
    assert_eq!(gb.recv(0).len(), 4);
    assert_eq!(drops(&sw, 0, "mac_limit"), 6);
    assert_eq!(sw.fdb.port_macs(0), 4);
    // A learned MAC still sends; a new one still cannot.
    ga.send(0, 10, &frame(B, [2, 0, 0, 0, 1, 0], 64, 20));
    ga.send(0, 11, &frame(B, [2, 0, 0, 0, 1, 200], 64, 21));
    pmd.poll_once();
    assert_eq!(gb.recv(0), vec![frame(B, [2, 0, 0, 0, 1, 0], 64, 20)]);
    assert_eq!(drops(&sw, 0, "mac_limit"), 7);
}

/// Without ACL rules, a frame with the previous one's Ethernet header reuses its
/// decision (counted as a last-flow hit); frames with other headers in between are
/// decided on their own and still go where the FDB says.
#[test]
fn l2_decisions_are_reused_for_the_same_ethernet_header() {
    let sw = switch(&[None, None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    let mut gc = attach(&sw, 2, SimGuest::default_features());
    for g in [&mut ga, &mut gb, &mut gc] {
        g.post_rx(0, 0, 32, 2048);
    }
    let mut pmd = Pmd::new(sw.clone(), 0);
    // b and c are learned first.
    gb.send(0, 0, &frame(A, B, 64, 0));
    gc.send(0, 0, &frame(A, C, 64, 0));
    pmd.poll_once();
    for g in [&mut ga, &mut gb, &mut gc] {
        g.recv(0);
    }
    let hits = || sw.pmds[0].cache_stats[0].get();
    let before = hits();
    // One burst: 4 to b, 2 to c, 3 to b.
    let dsts = [B, B, B, B, C, C, B, B, B];
    for (i, d) in dsts.iter().enumerate() {
        ga.send(0, i as u16, &frame(*d, A, 64, i as u8));
    }
    assert_eq!(pmd.poll_once(), dsts.len());
    assert_eq!(gb.recv(0).len(), 7);
    assert_eq!(gc.recv(0).len(), 2);
    // Three decisions made (b, c, b), six reused.
    assert_eq!(hits() - before, 6);
}

/// An idle transmit queue's polls are answered by its watch, yet a frame the driver
/// sends is taken by the very next poll; a new connection on the port (which the old
/// watch cannot see) is picked up within the watch's bound of 64 polls.
#[test]
fn idle_queue_watch_takes_new_frames_at_once_and_sees_a_new_connection() {
    let sw = switch(&[None, None]);
    let mut ga = attach(&sw, 0, SimGuest::default_features());
    let mut gb = attach(&sw, 1, SimGuest::default_features());
    gb.post_rx(0, 0, 16, 2048);
    let mut pmd = Pmd::new(sw.clone(), 0);
    for _ in 0..200 {
        assert_eq!(pmd.poll_once(), 0);
    }
    ga.send(0, 0, &frame(B, A, 100, 1));
    assert_eq!(pmd.poll_once(), 1, "the watched avail.idx moved");
    assert_eq!(gb.recv(0), vec![frame(B, A, 100, 1)]);
    for _ in 0..10 {
        assert_eq!(pmd.poll_once(), 0);
    }
    // A new driver on port 0, with a frame already waiting: the old watch's word (the
    // old connection's avail.idx) never moves.
    let mut ga2 = attach(&sw, 0, SimGuest::default_features());
    ga2.send(0, 0, &frame(B, A, 100, 2));
    let polls = (1..=65).find(|_| pmd.poll_once() == 1);
    assert!(polls.is_some(), "the new connection's frame was not taken");
    assert_eq!(gb.recv(0), vec![frame(B, A, 100, 2)]);
    assert_eq!(ga2.tx_completed(0), 1);
}

/// A broadcast to many ports (copied with streaming stores) reaches each of them
/// byte-exact, at every frame size a receive buffer holds.
#[test]
fn wide_flood_copies_every_frame_exactly() {
    let n = 12;
    let sw = switch(&vec![None; n]);
    let mut guests: Vec<SimGuest> = (0..n)
        .map(|p| attach(&sw, p, SimGuest::default_features()))
        .collect();
    for g in guests.iter_mut().skip(1) {
        g.post_rx(0, 0, 16, 2048);
    }
    let mut pmd = Pmd::new(sw.clone(), 0);
    let sizes = [60usize, 61, 64, 100, 127, 128, 129, 800, 1023, 1514];
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| frame(BCAST, A, len, i as u8))
        .collect();
    for (i, f) in frames.iter().enumerate() {
        guests[0].send(0, i as u16, f);
    }
    assert_eq!(pmd.poll_once(), frames.len());
    for g in guests.iter_mut().skip(1) {
        assert_eq!(g.recv(0), frames);
    }
}

/// Found by the chain_walker fuzz target (pipeline mode): a guest whose receive
/// buffer lies over its own available ring has the frame delivered into it rewrite
/// `avail.idx` to an impossible value in the middle of the batch. The re-read must
/// refuse it as the first read does, not walk tens of thousands of entries.
#[test]
fn delivery_refuses_an_avail_idx_rewritten_by_a_delivered_frame() {
    use vhost_user_backend::VringT;
    use virtio_queue::QueueT;

    use crate::testing::{attach, config};

    let sw = crate::switch::Switch::new(config(&[("a", None), ("b", None)], true)).unwrap();
    let features = SimGuest::default_features();
    let mut ga = SimGuest::new(1, features);
    attach(&sw, 0, ga.conn.clone());
    let mut gb = SimGuest::with_queue_size(1, features, 4);
    attach(&sw, 1, gb.conn.clone());
    let avail = gb.conn.vrings[0].get_ref().get_queue().avail_ring();
    // Receive buffer 0 puts byte 20 of the frame (after the 12-byte header) on
    // avail.idx; the frame's later bytes, zero, on the ring's entries.
    let over_ring = avail + 2 - 12 - 20;
    gb.write_desc(
        0,
        0,
        RawDesc {
            addr: over_ring,
            len: 2048,
            flags: VRING_DESC_F_WRITE,
            next: 0,
        },
    );
    gb.publish(0, 0);
    gb.post_rx(0, 1, 3, 2048);
    let mut f = frame([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], 64, 0);
    f[14..].fill(0);
    f[20..22].copy_from_slice(&0xfff0u16.to_le_bytes());
    for head in 0..8 {
        ga.send(0, head, &f);
    }
    let mut pmd = Pmd::new(sw.clone(), 0);
    assert_eq!(pmd.poll_once(), 8);
    // Four chains were available; the rewritten index is refused, so the other four
    // frames find no buffer.
    assert_eq!(gb.conn.vrings[0].get_ref().get_queue().next_used(), 4);
    let s = sw.port_stats(1);
    assert_eq!(s.tx_packets, 4);
    assert_eq!(s.drops["no_rx_buffer"], 4);
}
