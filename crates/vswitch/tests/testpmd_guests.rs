//! vswitchd against real virtio-net drivers: DPDK testpmd's virtio-user PMD.
//!
//! Each test starts vswitchd and testpmd guests, drives traffic, and asserts on counters
//! from both sides (testpmd's own port statistics and `vswitchctl stats`).

mod common;

use std::time::{Duration, Instant};

use common::*;

const MAC_A: &str = "02:00:00:00:00:01";
const MAC_B: &str = "02:00:00:00:00:02";
const MAC_C: &str = "02:00:00:00:00:03";

fn port_arg(name: &str, dir: &TempDir, extra: &str) -> String {
    format!(
        "{name}={}{extra}",
        dir.path(&format!("{name}.sock")).display()
    )
}

/// vswitchd with two server-mode ports `a` and `b` (`opts` appended to each port spec,
/// e.g. `,queues=2`) in poll mode `poll`.
fn start_ab(dir: &TempDir, opts: &str, poll: &str) -> Vswitchd {
    Vswitchd::start(
        dir,
        &[
            "--vhost-user".into(),
            port_arg("a", dir, opts),
            "--vhost-user".into(),
            port_arg("b", dir, opts),
            "--poll".into(),
            poll.into(),
        ],
    )
}

/// Asserts that the driver on `port` negotiated the ring layout asked for.
fn assert_ring(sw: &Vswitchd, port: &str, packed: bool) {
    let p = sw.show_port(port);
    let packed_acked = p["negotiated_features"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == "RING_PACKED"));
    assert_eq!(packed_acked, packed, "{port}: ring layout negotiated: {p}");
    eprintln!("{port}: {}", p["negotiated_features"]);
}

/// `spec` on packed virtqueues when `packed`.
fn on(packed: bool, spec: GuestSpec<'_>) -> GuestSpec<'_> {
    GuestSpec { packed, ..spec }
}

fn guest<'a>(
    prefix: &'a str,
    socket: &'a std::path::Path,
    mac: &'a str,
    args: &'a [&'a str],
) -> GuestSpec<'a> {
    GuestSpec {
        prefix,
        socket,
        mac,
        queues: 1,
        server: false,
        extra_vdevs: &[],
        queue_size: None,
        packed: false,
        args,
    }
}

/// Guest A transmits at full rate to guest B: every frame A sent is accounted for,
/// either delivered to B (and B's own counter agrees) or counted as a named drop.
#[test]
fn txonly_to_rxonly_every_frame_accounted() {
    txonly_to_rxonly(false);
}

/// As [`txonly_to_rxonly_every_frame_accounted`], on packed virtqueues (`packed_vq=1`).
#[test]
fn txonly_to_rxonly_every_frame_accounted_packed() {
    txonly_to_rxonly(true);
}

fn txonly_to_rxonly(packed: bool) {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("txrx");
    let sw = start_ab(&dir, "", "adaptive");
    let sa = dir.path("a.sock");
    let sb = dir.path("b.sock");
    let mut b = Testpmd::start(on(
        packed,
        guest("vsb1", &sb, MAC_B, &["--forward-mode=rxonly"]),
    ));
    let peer = format!("--eth-peer=0,{MAC_B}");
    let mut a = Testpmd::start(on(
        packed,
        guest("vsa1", &sa, MAC_A, &["--forward-mode=txonly", &peer]),
    ));
    b.cmd("start");
    a.cmd("start");
    wait_for(Duration::from_secs(20), "frames reaching b", || {
        (sw.port("b").stats.tx_packets > 10_000).then_some(())
    });
    assert_ring(&sw, "a", packed);
    assert_ring(&sw, "b", packed);
    std::thread::sleep(Duration::from_secs(1));
    a.cmd("stop");
    let (_, a_tx) = a.port_stats(0);
    // The switch drains A's ring after A stops.
    wait_for(
        Duration::from_secs(10),
        "switch to drain a's tx ring",
        || (sw.port("a").stats.rx_packets == a_tx).then_some(()),
    );
    let sw_b = sw.port("b").stats;
    // B's PMD keeps polling until every delivered frame is counted.
    let b_rx = wait_for(
        Duration::from_secs(10),
        "b to receive all delivered frames",
        || {
            let (rx, _) = b.port_stats(0);
            (rx == sw_b.tx_packets).then_some(rx)
        },
    );
    b.cmd("stop");
    let sw_a = sw.port("a").stats;
    assert!(a_tx > 10_000, "a sent only {a_tx}");
    assert_eq!(sw_a.drops_total, 0, "a: {:?}", sw_a.drops);
    assert_eq!(
        sw_a.rx_packets,
        sw_b.tx_packets + sw_b.drops_total,
        "every frame from a is delivered to b or counted as a drop: {sw_b:?}"
    );
    assert_eq!(b_rx, sw_b.tx_packets);
    // Only named drops, and the bytes add up: 64-byte txonly frames.
    assert_eq!(sw_a.rx_bytes, 64 * sw_a.rx_packets);
    assert_eq!(sw_b.tx_bytes, 64 * sw_b.tx_packets);
    eprintln!(
        "a sent {a_tx}, b received {b_rx}, drops at b: {:?}",
        sw_b.drops
            .iter()
            .filter(|(_, v)| **v > 0)
            .collect::<Vec<_>>()
    );
}

/// Frames of 64, 512, 1518 and 9000 bytes (the last through mergeable rx buffers, as
/// B's buffers are 2 KiB) arrive byte-identical: testpmd replays a pcap file into A
/// (net_pcap rx → virtio-user) and B writes what it receives to a pcap file.
#[test]
fn frames_arrive_intact_64_to_9000_bytes() {
    frames_arrive_intact(false);
}

/// As [`frames_arrive_intact_64_to_9000_bytes`], on packed virtqueues (`packed_vq=1`).
#[test]
fn frames_arrive_intact_64_to_9000_bytes_packed() {
    frames_arrive_intact(true);
}

fn frames_arrive_intact(packed: bool) {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("intact");
    let sw = start_ab(&dir, "", "interrupt");
    let mac_a = [2, 0, 0, 0, 0, 1];
    let mac_b = [2, 0, 0, 0, 0, 2];
    let mut frames = Vec::new();
    for (k, len) in [60usize, 512, 1514, 9000].into_iter().enumerate() {
        for i in 0..8u8 {
            frames.push(udp_frame(
                mac_a,
                mac_b,
                len,
                i.wrapping_mul(17).wrapping_add(k as u8),
            ));
        }
    }
    let inp = dir.path("in.pcap");
    let outp = dir.path("out.pcap");
    write_pcap(&inp, &frames);
    let sa = dir.path("a.sock");
    let sb = dir.path("b.sock");
    let b_vdev = [format!("net_pcap0,tx_pcap={}", outp.display())];
    let a_vdev = [format!("net_pcap0,rx_pcap={}", inp.display())];
    let args = ["--forward-mode=io", "--no-flush-rx"];
    let mut b = Testpmd::start(GuestSpec {
        extra_vdevs: &b_vdev,
        queue_size: None,
        packed,
        ..guest("vsb2", &sb, MAC_B, &args)
    });
    let mut a = Testpmd::start(GuestSpec {
        extra_vdevs: &a_vdev,
        queue_size: None,
        packed,
        ..guest("vsa2", &sa, MAC_A, &args)
    });
    for t in [&mut a, &mut b] {
        for c in [
            "port stop 0",
            "port config 0 rx_offload scatter on",
            "port config mtu 0 9600",
            "port config 0 tx_offload multi_segs on",
            "port start 0",
        ] {
            t.cmd(c);
        }
    }
    b.cmd("start");
    a.cmd("start");
    let n = frames.len() as u64;
    wait_for(Duration::from_secs(20), "all frames delivered to b", || {
        (sw.port("b").stats.tx_packets >= n).then_some(())
    });
    assert_ring(&sw, "a", packed);
    assert_ring(&sw, "b", packed);
    wait_for(Duration::from_secs(20), "b to write all frames", || {
        let s = b.cmd("show port stats 1");
        (field(&s, "TX-packets:") >= n).then_some(())
    });
    a.cmd("stop");
    b.cmd("stop");
    drop(b); // closes the pcap file
    drop(a);
    let got = read_pcap(&outp);
    let st = sw.port("b").stats;
    assert_eq!(st.drops_total, 0, "{st:?}");
    assert_eq!(got.len(), frames.len(), "frame count");
    for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
        assert_eq!(g.len(), f.len(), "frame {i}: length");
        assert!(g == f, "frame {i} ({} bytes) differs", f.len());
    }
    assert_eq!(
        st.tx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
}

/// Two guests forward each other's frames (io mode, 64 bursts injected): frames keep
/// circulating through the switch for seconds, at 64, 512 and 1518 bytes.
#[test]
fn io_forwarding_loop_keeps_circulating() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("loop");
    let sw = start_ab(&dir, "", "busy");
    let sa = dir.path("a.sock");
    let sb = dir.path("b.sock");
    let pa = format!("--eth-peer=0,{MAC_B}");
    let pb = format!("--eth-peer=0,{MAC_A}");
    let mut b = Testpmd::start(guest("vsb3", &sb, MAC_B, &["--forward-mode=io", &pb]));
    let mut a = Testpmd::start(guest("vsa3", &sa, MAC_A, &["--forward-mode=io", &pa]));
    for size in [64u64, 512, 1518] {
        // txpkts is the frame length without the 4-byte FCS.
        a.cmd(&format!("set txpkts {}", size - 4));
        b.cmd("start");
        a.cmd("start tx_first 64");
        std::thread::sleep(Duration::from_secs(1));
        let first = (sw.port("a").stats, sw.port("b").stats);
        std::thread::sleep(Duration::from_secs(2));
        let second = (sw.port("a").stats, sw.port("b").stats);
        a.cmd("stop");
        b.cmd("stop");
        let moved_a = second.0.rx_packets - first.0.rx_packets;
        let moved_b = second.1.rx_packets - first.1.rx_packets;
        assert!(
            moved_a > 1000 && moved_b > 1000,
            "{size} B: frames stopped circulating: a +{moved_a}, b +{moved_b}"
        );
        let bytes = second.1.rx_bytes - first.1.rx_bytes;
        assert_eq!(
            bytes,
            moved_b * (size - 4),
            "{size} B frames keep their size"
        );
        eprintln!("{size} B: {:.2} Mpps through b", moved_b as f64 / 2e6);
    }
}

/// queues=2 on both sides: A transmits on both queue pairs, and B receives on both.
/// Two queue pairs each way. The sender transmits on both of its queues; the switch
/// picks the receiver's queue by flow hash, so one flow lands on one queue and many
/// flows (testpmd's --txonly-multi-flow varies the source IP) spread over both.
#[test]
fn multiqueue_uses_both_queue_pairs() {
    multiqueue(false);
}

/// As [`multiqueue_uses_both_queue_pairs`], on packed virtqueues (`packed_vq=1`).
#[test]
fn multiqueue_uses_both_queue_pairs_packed() {
    multiqueue(true);
}

fn multiqueue(packed: bool) {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("mq");
    let sw = start_ab(&dir, ",queues=2", "adaptive");
    let sa = dir.path("a.sock");
    let sb = dir.path("b.sock");
    let peer = format!("--eth-peer=0,{MAC_B}");
    let qargs_b = ["--forward-mode=rxonly", "--rxq=2", "--txq=2"];
    let rx_per_queue = |b: &mut Testpmd| {
        (
            b.xstat(0, "rx_q0_good_packets"),
            b.xstat(0, "rx_q1_good_packets"),
        )
    };
    let mut b = Testpmd::start(GuestSpec {
        queues: 2,
        packed,
        ..guest("vsb4", &sb, MAC_B, &qargs_b)
    });
    b.cmd("start");
    for multi_flow in [false, true] {
        let mut qargs_a = vec!["--forward-mode=txonly", "--rxq=2", "--txq=2", &peer];
        if multi_flow {
            qargs_a.push("--txonly-multi-flow");
        }
        let before = sw.port("b").stats.tx_packets;
        let (b0, b1) = rx_per_queue(&mut b);
        let mut a = Testpmd::start(GuestSpec {
            queues: 2,
            packed,
            ..guest("vsa4", &sa, MAC_A, &qargs_a)
        });
        a.cmd("start");
        wait_for(Duration::from_secs(20), "traffic to b", || {
            (sw.port("b").stats.tx_packets > before + 20_000).then_some(())
        });
        assert_ring(&sw, "b", packed);
        a.cmd("stop");
        let a_q0 = a.xstat(0, "tx_q0_good_packets");
        let a_q1 = a.xstat(0, "tx_q1_good_packets");
        drop(a);
        wait_for(Duration::from_secs(10), "a's link down", || {
            (sw.port("a").link == "down").then_some(())
        });
        let (q0, q1) = rx_per_queue(&mut b);
        let (q0, q1) = (q0 - b0, q1 - b1);
        eprintln!("multi_flow={multi_flow}: a tx q0 {a_q0} q1 {a_q1}; b rx q0 {q0} q1 {q1}");
        assert!(a_q0 > 0 && a_q1 > 0, "a sent on both queues");
        if multi_flow {
            assert!(q0 > 0 && q1 > 0, "many flows spread over b's queues");
        } else {
            assert!(
                (q0 == 0) != (q1 == 0),
                "one flow stays on one of b's queues: {q0} / {q1}"
            );
        }
    }
    b.cmd("stop");
    let pb = sw.show_port("b");
    assert_eq!(pb["ready_queue_pairs"], serde_json::json!([0, 1]), "{pb}");
}

/// kill -9 one guest and start it again: traffic between the others keeps flowing while
/// it is gone, its port goes down and comes back up, and it is served again.
#[test]
fn guest_killed_and_restarted() {
    guest_killed(false);
}

/// As [`guest_killed_and_restarted`], on packed virtqueues (`packed_vq=1`).
#[test]
fn guest_killed_and_restarted_packed() {
    guest_killed(true);
}

fn guest_killed(packed: bool) {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("kill");
    let sw = Vswitchd::start(
        &dir,
        &[
            "--vhost-user".into(),
            port_arg("a", &dir, ""),
            "--vhost-user".into(),
            port_arg("b", &dir, ""),
            "--vhost-user".into(),
            port_arg("c", &dir, ""),
            "--static-mac".into(),
            format!("b={MAC_B}"),
            "--poll".into(),
            "adaptive".into(),
        ],
    );
    let (sa, sb, sc) = (dir.path("a.sock"), dir.path("b.sock"), dir.path("c.sock"));
    let peer = format!("--eth-peer=0,{MAC_B}");
    let mut b = Testpmd::start(on(
        packed,
        guest("vsb5", &sb, MAC_B, &["--forward-mode=rxonly"]),
    ));
    let mut c = Testpmd::start(on(
        packed,
        guest("vsc5", &sc, MAC_C, &["--forward-mode=txonly", &peer]),
    ));
    let mut a = Testpmd::start(on(
        packed,
        guest("vsa5", &sa, MAC_A, &["--forward-mode=txonly", &peer]),
    ));
    b.cmd("start");
    a.cmd("start");
    c.cmd("start");
    wait_for(Duration::from_secs(20), "c's frames to reach b", || {
        (sw.port("c").stats.rx_packets > 1000).then_some(())
    });
    assert_ring(&sw, "a", packed);
    assert_ring(&sw, "b", packed);
    assert_ring(&sw, "c", packed);
    c.kill9();
    wait_for(Duration::from_secs(10), "c's link to go down", || {
        (sw.port("c").link == "down").then_some(())
    });
    let before = sw.port("b").stats.tx_packets;
    std::thread::sleep(Duration::from_secs(1));
    let after = sw.port("b").stats.tx_packets;
    assert!(
        after > before + 1000,
        "a→b kept flowing while c was gone ({before} → {after})"
    );
    let c_rx_before = sw.port("c").stats.rx_packets;
    let restarted = Instant::now();
    let mut c = Testpmd::start(on(
        packed,
        guest("vsc5", &sc, MAC_C, &["--forward-mode=txonly", &peer]),
    ));
    c.cmd("start");
    wait_for(Duration::from_secs(20), "restarted c to be served", || {
        (sw.port("c").stats.rx_packets > c_rx_before + 1000).then_some(())
    });
    eprintln!("restarted guest served after {:?}", restarted.elapsed());
    let pc = sw.show_port("c");
    assert_eq!(pc["connections"], 2, "{pc}");
    assert_eq!(pc["link"], "up");
    c.cmd("stop");
    a.cmd("stop");
    // The switch drains both rings after the guests stop (the old c took nothing more
    // once its link went down).
    let ((_, a_tx), (_, c_tx)) = (a.port_stats(0), c.port_stats(0));
    wait_for(
        Duration::from_secs(10),
        "the switch to drain a's and c's rings",
        || {
            let (a, c) = (sw.port("a").stats, sw.port("c").stats);
            (a.rx_packets == a_tx && c.rx_packets == c_rx_before + c_tx).then_some(())
        },
    );
    // Nothing lost uncounted, the kill included: every frame taken from a and c (the
    // killed guest's last burst too) was delivered to b or counted as a drop.
    let settled = || {
        let (a, b, c) = (sw.port("a").stats, sw.port("b").stats, sw.port("c").stats);
        let taken = a.rx_packets + c.rx_packets;
        let placed = b.tx_packets + a.drops_total + b.drops_total + c.drops_total;
        (taken == placed).then_some((taken, b.tx_packets))
    };
    let (taken, delivered) = wait_for(Duration::from_secs(10), "the counters to settle", settled);
    let mut b_rx = 0;
    let start = Instant::now();
    while b_rx != delivered && start.elapsed() < Duration::from_secs(10) {
        b_rx = b.port_stats(0).0;
        std::thread::sleep(Duration::from_millis(20));
    }
    let xstats = b.cmd("show port xstats 0");
    assert_eq!(
        b_rx, delivered,
        "b counts every frame delivered to it: {xstats}"
    );
    eprintln!("taken from a and c: {taken}; b received {b_rx}");
    b.cmd("stop");
}

/// Client mode: vswitchd connects to guests that listen (virtio-user server=1).
/// Restart vswitchd under running guests, once after SIGTERM and once after kill -9 (a
/// crash: its sockets left behind): traffic resumes within 1 s of each start.
#[test]
fn client_mode_vswitchd_restart_resumes_within_1s() {
    client_mode_restart(false);
}

/// As [`client_mode_vswitchd_restart_resumes_within_1s`], on packed virtqueues (`packed_vq=1`).
#[test]
fn client_mode_vswitchd_restart_resumes_within_1s_packed() {
    client_mode_restart(true);
}

fn client_mode_restart(packed: bool) {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("client");
    let (sa, sb) = (dir.path("a.sock"), dir.path("b.sock"));
    let args = vec![
        "--vhost-user-client".into(),
        port_arg("a", &dir, ""),
        "--vhost-user-client".into(),
        port_arg("b", &dir, ""),
        "--poll".into(),
        "adaptive".into(),
    ];
    let mut sw = Vswitchd::start(&dir, &args);
    let peer = format!("--eth-peer=0,{MAC_B}");
    let mut b = Testpmd::start(GuestSpec {
        server: true,
        packed,
        ..guest("vsb6", &sb, MAC_B, &["--forward-mode=rxonly"])
    });
    let mut a = Testpmd::start(GuestSpec {
        server: true,
        packed,
        ..guest("vsa6", &sa, MAC_A, &["--forward-mode=txonly", &peer])
    });
    b.cmd("start");
    a.cmd("start");
    wait_for(Duration::from_secs(20), "traffic a→b", || {
        (sw.port("b").stats.tx_packets > 10_000).then_some(())
    });
    assert_ring(&sw, "a", packed);
    assert_ring(&sw, "b", packed);
    for crash in [false, true] {
        if crash {
            sw.kill9();
        } else {
            assert_eq!(sw.stop(), Some(0), "clean exit on SIGTERM");
        }
        let (b_rx_before, _) = b.port_stats(0);
        let restart = Instant::now();
        sw = Vswitchd::start(&dir, &args);
        wait_for(Duration::from_secs(10), "traffic after restart", || {
            (sw.port("b").stats.tx_packets > 1000).then_some(())
        });
        let resumed = restart.elapsed();
        let (b_rx_after, _) = b.port_stats(0);
        assert!(b_rx_after > b_rx_before, "guest b received again");
        eprintln!("traffic resumed {resumed:?} after restart (crash: {crash})");
        assert!(
            resumed < Duration::from_secs(1),
            "resumed after {resumed:?} (crash: {crash})"
        );
    }
    a.cmd("stop");
    b.cmd("stop");
}

/// Many flows (testpmd txonly-multi-flow varies the IPv4 source over 198.18.X.3) through
/// an ingress ACL that drops the lower half of X: every dropped frame is counted by the
/// rule, every frame B writes to its pcap is from the allowed half, and after warm-up
/// more than 90% of frames skip the slow path.
#[test]
fn acl_drops_part_of_many_flows_and_the_cache_hits() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("acl");
    let sw = Vswitchd::start(
        &dir,
        &[
            "--vhost-user".into(),
            port_arg("a", &dir, ""),
            "--vhost-user".into(),
            port_arg("b", &dir, ""),
            "--static-mac".into(),
            format!("b={MAC_B}"),
            "--acl".into(),
            "a:drop ip_src=198.18.0.0/17".into(),
            "--poll".into(),
            "adaptive".into(),
        ],
    );
    let (sa, sb) = (dir.path("a.sock"), dir.path("b.sock"));
    let outp = dir.path("b.pcap");
    let b_vdev = [format!("net_pcap0,tx_pcap={}", outp.display())];
    let mut b = Testpmd::start(GuestSpec {
        extra_vdevs: &b_vdev,
        queue_size: None,
        packed: false,
        ..guest("vsb7", &sb, MAC_B, &["--forward-mode=io"])
    });
    let peer = format!("--eth-peer=0,{MAC_B}");
    let mut a = Testpmd::start(guest(
        "vsa7",
        &sa,
        MAC_A,
        &["--forward-mode=txonly", "--txonly-multi-flow", &peer],
    ));
    b.cmd("start");
    a.cmd("start");
    wait_for(Duration::from_secs(30), "50k frames from a", || {
        (sw.port("a").stats.rx_packets > 50_000).then_some(())
    });
    a.cmd("stop");
    let (_, a_tx) = a.port_stats(0);
    wait_for(Duration::from_secs(10), "switch to drain a", || {
        (sw.port("a").stats.rx_packets == a_tx).then_some(())
    });
    let sa_stats = sw.port("a").stats;
    let sb_stats = sw.port("b").stats;
    wait_for(
        Duration::from_secs(10),
        "b to receive all delivered frames",
        || {
            let (rx, _) = b.port_stats(0);
            (rx == sb_stats.tx_packets).then_some(())
        },
    );
    b.cmd("stop");
    drop(b);
    let rows = acl_list(&sw.control);
    assert_eq!(rows.len(), 1);
    let acl_drops = rows[0].drops;
    assert_eq!(
        sa_stats.drops["acl"], acl_drops,
        "per-rule and per-port counts agree"
    );
    assert_eq!(
        sa_stats.rx_packets,
        acl_drops + sb_stats.tx_packets + sb_stats.drops_total,
        "every frame is dropped by the rule, delivered, or counted at b: {sb_stats:?}"
    );
    let frac = acl_drops as f64 / sa_stats.rx_packets as f64;
    assert!(
        (0.4..0.6).contains(&frac),
        "the rule covers half the flows; dropped {frac:.3}"
    );
    // Everything b received comes from the allowed half: 198.18.X.3 with X >= 128.
    let got = read_pcap(&outp);
    assert!(!got.is_empty());
    for f in &got {
        assert_eq!(&f[12..14], &[0x08, 0x00], "IPv4");
        assert_eq!(&f[26..28], &[198, 18]);
        assert!(
            f[28] >= 128,
            "frame from 198.18.{}.{} passed the ACL",
            f[28],
            f[29]
        );
    }
    let pmd = pmd_stats(&sw.control);
    let hit = pmd[0].cache_hit_percent;
    eprintln!(
        "a sent {a_tx}: {acl_drops} dropped by the ACL ({:.1}%), b got {} frames in its pcap; cache hit {hit:.1}%",
        100.0 * frac,
        got.len()
    );
    assert!(hit > 90.0, "cache hit rate {hit:.1}%");
}
