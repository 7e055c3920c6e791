//! A guest that tries to teach the FDB 8,000 MACs as fast as it can, and one that sends from a MAC its port does
//! not allow, both real DPDK testpmd drivers, beside the testpmd loop on ports a and b:
//! the first gets its port's limit (1,024 by default) and the rest of its frames are
//! dropped as `mac_limit`; the second's frames are all dropped as `spoofed_source` and
//! its MAC is never learned. The loop loses nothing.

mod common;

use std::time::Duration;

use common::looping::*;
use common::*;

const MAC_F: &str = "02:00:00:00:00:0f";
const MAC_S: &str = "02:00:00:00:00:5e";
/// The sink: a static MAC on a port without a guest, so flood frames go nowhere else.
const MAC_Z: [u8; 6] = [2, 0, 0, 0, 0, 0x2a];
/// Distinct source MACs the flooding guest cycles through (its replay loops over them
/// for as long as it runs; each loop of the file is one pass over every MAC).
const FLOOD: usize = 8_000;

fn mac_str(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[test]
fn mac_flood_is_limited_and_spoofed_sources_are_dropped() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("portsec");
    let sock = |n: &str| dir.path(&format!("{n}.sock")).display().to_string();
    let sw = start_loop_switch(
        &dir,
        &[
            "--vhost-user".into(),
            format!("f={}", sock("f")),
            "--vhost-user".into(),
            format!("s={},mac=02:00:00:00:00:5f", sock("s")),
            "--vhost-user".into(),
            format!("z={}", sock("z")),
            "--static-mac".into(),
            format!("z={}", mac_str(MAC_Z)),
        ],
    );
    let mut lg = start_loop_guest(&dir, "vspsloop", LOOP_MAC_A, LOOP_MAC_B);
    wait_for(Duration::from_secs(20), "the loop running", || {
        (sw.port("a").stats.rx_packets > 10_000).then_some(())
    });

    // 8,000 frames, each from its own source MAC, replayed over and over by a guest on f
    // (net_pcap's infinite_rx) for two seconds.
    let frames: Vec<Vec<u8>> = (0..FLOOD)
        .map(|i| {
            let src = [2, 0x10, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8];
            udp_frame(src, MAC_Z, 64, i as u8)
        })
        .collect();
    let pcap = dir.path("flood.pcap");
    write_pcap(&pcap, &frames);
    let vdev = [format!(
        "net_pcap0,rx_pcap={},infinite_rx=1",
        pcap.display()
    )];
    let sf = dir.path("f.sock");
    let mut f = Testpmd::start(GuestSpec {
        prefix: "vspsf",
        socket: &sf,
        mac: MAC_F,
        queues: 1,
        server: false,
        extra_vdevs: &vdev,
        queue_size: None,
        packed: false,
        args: &["--forward-mode=io", "--no-flush-rx"],
    });
    f.cmd("start");
    wait_for(Duration::from_secs(20), "every MAC offered", || {
        (sw.port("f").stats.rx_packets > 4 * FLOOD as u64).then_some(())
    });
    f.cmd("stop");
    let mut last = 0;
    let st = wait_for(Duration::from_secs(10), "the flood settled", || {
        std::thread::sleep(Duration::from_millis(200));
        let st = sw.port("f").stats;
        let same = st.rx_packets == last;
        last = st.rx_packets;
        same.then_some(st)
    });
    let limited = st.drops.get("mac_limit").copied().unwrap_or(0);
    let forwarded = sw
        .port("z")
        .stats
        .drops
        .get("port_down")
        .copied()
        .unwrap_or(0);
    eprintln!(
        "flood: {} frames taken, {limited} dropped as mac_limit, {forwarded} forwarded",
        st.rx_packets
    );
    assert_eq!(
        limited + forwarded,
        st.rx_packets,
        "every frame either dropped as mac_limit or forwarded to z: {st:?}"
    );
    assert!(limited > st.rx_packets / 2, "most were refused: {st:?}");
    let fdb = vswitchctl_out(&sw.control, &["--json", "fdb"]);
    let rows: serde_json::Value = serde_json::from_slice(&fdb.stdout).unwrap();
    let behind_f = rows
        .as_array()
        .map(|r| r.iter().filter(|e| e["port"] == "f").count())
        .unwrap_or(0);
    assert_eq!(behind_f, 1024, "the FDB holds f's limit, no more");

    // A guest whose port allows 02:00:00:00:00:5f sends from 02:00:00:00:00:5e.
    let ss = dir.path("s.sock");
    let peer = format!("--eth-peer=0,{}", mac_str(MAC_Z));
    let mut s = Testpmd::start(GuestSpec {
        prefix: "vspss",
        socket: &ss,
        mac: MAC_S,
        queues: 1,
        server: false,
        extra_vdevs: &[],
        queue_size: None,
        packed: false,
        args: &["--forward-mode=txonly", &peer],
    });
    s.cmd("start");
    wait_for(Duration::from_secs(20), "s's frames taken", || {
        (sw.port("s").stats.rx_packets > 10_000).then_some(())
    });
    s.cmd("stop");
    let st = wait_for(Duration::from_secs(10), "s settled", || {
        let st = sw.port("s").stats;
        let spoofed = st.drops.get("spoofed_source").copied().unwrap_or(0);
        (spoofed == st.rx_packets).then_some(st)
    });
    eprintln!("spoofed: {} frames dropped", st.rx_packets);
    let fdb = vswitchctl_out(&sw.control, &["fdb"]);
    assert!(
        !String::from_utf8_lossy(&fdb.stdout).contains(MAC_S),
        "the spoofed MAC was never learned"
    );

    lg.cmd("stop");
    let (a, b) = settled(&sw);
    assert_loop_whole(&a, &b, 0);
}
