//! AF_XDP uplinks and tap host ports against the real kernel: a veth pair whose far end
//! lives in a network namespace with an IP address, DPDK testpmd virtio-user guests, and
//! the host stack through a tap.
//!
//! Every namespace and link is removed by `Drop`, also when an assertion fails.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

const MAC_A: &str = "02:00:00:00:00:01";

fn mac_bytes(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(s.split(':')) {
        *b = u8::from_str_radix(p, 16).unwrap();
    }
    m
}

/// Guest → namespace and namespace → guest through an AF_XDP uplink in `mode`:
/// testpmd replays N frames addressed to the namespace's MAC; they arrive there exactly
/// (the namespace's rx counter grows by N, the uplink's tx counter says N); then the
/// namespace pings an address whose static neighbour is the guest's MAC, and the guest
/// writes exactly those echo requests to its pcap.
fn guest_and_namespace(mode: &str, expect_mode: &str) {
    let _g = serial();
    setup_host();
    let tag = &mode[..1];
    let veth = Veth::new(tag, 1, "10.77.0.2");
    let dir = TempDir::new(&format!("afxdp-{mode}"));
    let sock = dir.path("a.sock");
    let sw = Vswitchd::start(
        &dir,
        &[
            "--uplink".into(),
            format!("up={},mode={mode}", veth.host),
            "--vhost-user".into(),
            format!("a={}", sock.display()),
        ],
    );
    let up = sw.show_port("up");
    assert_eq!(up["kind"], "afxdp", "{up}");
    assert_eq!(up["afxdp"]["mode"], expect_mode, "{up}");
    let link = run(&["ip", "link", "show", &veth.host]);
    let attached = if expect_mode == "generic" {
        "xdpgeneric"
    } else {
        " xdp "
    };
    assert!(link.contains(attached), "{link}");

    let n = 500usize;
    let ns_mac = mac_bytes(&veth.peer_mac());
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| udp_frame(mac_bytes(MAC_A), ns_mac, 64 + (i % 7) * 100, i as u8))
        .collect();
    let inp = dir.path("in.pcap");
    let outp = dir.path("out.pcap");
    write_pcap(&inp, &frames);
    let vdev = [format!(
        "net_pcap0,rx_pcap={},tx_pcap={}",
        inp.display(),
        outp.display()
    )];
    let before = veth.peer_stat("rx_packets");
    let mut g = Testpmd::start(GuestSpec {
        prefix: &format!("vsx{tag}"),
        socket: &sock,
        mac: MAC_A,
        queues: 1,
        server: false,
        extra_vdevs: &vdev,
        queue_size: None,
        packed: false,
        args: &["--forward-mode=io", "--no-flush-rx"],
    });
    // Retry when the virtqueue is full rather than drop: every frame goes out.
    g.cmd("set fwd io retry");
    g.cmd("set burst tx delay 20 retry 10000");
    g.cmd("start");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while {
        let s = sw.port("up").stats;
        s.tx_packets + s.drops_total < n as u64
    } {
        assert!(
            std::time::Instant::now() < deadline,
            "the uplink did not send {n} frames: switch {:?}\nguest port 0: {}\nguest port 1: {}\nlog: {}",
            sw.stats(),
            g.cmd("show port stats 0"),
            g.cmd("show port stats 1"),
            sw.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = sw.port("up").stats;
    assert_eq!(st.drops_total, 0, "uplink drops: {:?}", st.drops);
    assert_eq!(st.tx_packets, n as u64);
    assert_eq!(
        st.tx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    let got = wait_for(Duration::from_secs(10), "the namespace to count N", || {
        let d = veth.peer_stat("rx_packets") - before;
        (d >= n as u64).then_some(d)
    });
    assert_eq!(got, n as u64, "frames counted by the namespace's veth");

    // Namespace → guest.
    veth.exec(&[
        "ip",
        "neigh",
        "replace",
        "10.77.0.9",
        "lladdr",
        MAC_A,
        "dev",
        &veth.peer,
        "nud",
        "permanent",
    ]);
    let pings = 20;
    let out = Command::new("ip")
        .args(["netns", "exec", &veth.ns, "ping", "-c", "20", "-i", "0.01"])
        .args(["-W", "0.1", "10.77.0.9"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("20 packets transmitted"),
        "{out:?}"
    );
    wait_for(
        Duration::from_secs(10),
        "the guest to receive the pings",
        || {
            let s = g.cmd("show port stats 1");
            (field(&s, "TX-packets:") >= pings).then_some(())
        },
    );
    g.cmd("stop");
    drop(g); // closes the pcap
    let echo: Vec<Vec<u8>> = read_pcap(&outp)
        .into_iter()
        .filter(|f| f.len() >= 42 && f[12..14] == [8, 0] && f[23] == 1 && f[34] == 8)
        .collect();
    assert_eq!(echo.len() as u64, pings, "echo requests the guest received");
    assert!(echo.iter().all(|f| f[30..34] == [10, 77, 0, 9]));
    assert_eq!(sw.port("up").stats.rx_packets, pings);
}

#[test]
fn afxdp_generic_guest_and_namespace() {
    guest_and_namespace("generic", "generic");
}

#[test]
fn afxdp_native_guest_and_namespace() {
    guest_and_namespace("native", "native-copy");
}

/// With a 4-queue veth, flows from the namespace spread over the rx queues: several
/// AF_XDP sockets receive, and every frame is counted by one of them.
#[test]
fn afxdp_four_queues_spread_flows() {
    let _g = serial();
    let veth = Veth::new("q", 4, "10.76.0.2");
    let dir = TempDir::new("afxdp-mq");
    let mut sw = Vswitchd::start(
        &dir,
        &["--uplink".into(), format!("up={},mode=native", veth.host)],
    );
    assert_eq!(sw.show()["ports"][0]["afxdp"]["queues"], 4);
    veth.exec(&[
        "ip",
        "neigh",
        "replace",
        "10.76.0.9",
        "lladdr",
        MAC_A,
        "dev",
        &veth.peer,
        "nud",
        "permanent",
    ]);
    let flows = 64;
    veth.exec(&[
        "python3",
        "-c",
        &format!(
            "import socket\nfor p in range({flows}):\n s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n s.bind(('10.76.0.2',20000+p))\n s.sendto(b'x'*32,('10.76.0.9',9))\n s.close()\n"
        ),
    ]);
    let per_queue: Vec<u64> = wait_for(Duration::from_secs(10), "all flows received", || {
        let v: Vec<u64> =
            serde_json::from_value(sw.show()["ports"][0]["afxdp"]["rx_per_queue"].clone()).unwrap();
        (v.iter().sum::<u64>() >= flows).then_some(v)
    });
    assert_eq!(per_queue.iter().sum::<u64>(), flows, "{per_queue:?}");
    let busy = per_queue.iter().filter(|&&n| n > 0).count();
    assert!(busy >= 2, "flows did not spread: {per_queue:?}");
    // The uplink floods them (unknown MAC, no other port): counted, named.
    let st = sw.port("up").stats;
    assert_eq!(st.rx_packets, flows);
    assert_eq!(st.drops["no_destination"], flows);
    assert_eq!(sw.stop(), Some(0));
    let link = run(&["ip", "link", "show", &veth.host]);
    assert!(!link.contains(" xdp"), "XDP program left attached: {link}");
}

/// Zero-copy on veth is refused with nicoffload's reason; auto falls back and says why;
/// `vswitchctl offloads` prints the plan.
#[test]
fn afxdp_zerocopy_unavailable_on_veth() {
    let _g = serial();
    let veth = Veth::new("z", 1, "10.75.0.2");
    let dir = TempDir::new("afxdp-zc");
    let out = Command::new(env!("CARGO_BIN_EXE_vswitchd"))
        .args(["--uplink", &format!("up={},mode=zerocopy", veth.host)])
        .arg("--control")
        .arg(dir.path("ctl.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("zero") && err.contains("unavailable"), "{err}");
    assert!(
        err.contains("xsk-zerocopy") || err.contains("zero-copy"),
        "{err}"
    );

    let sw = Vswitchd::start(&dir, &["--uplink".into(), format!("up={}", veth.host)]);
    let reason = sw.show()["ports"][0]["afxdp"]["reason"].to_string();
    assert_eq!(sw.show()["ports"][0]["afxdp"]["mode"], "native-copy");
    assert!(reason.contains("veth"), "{reason}");
    let ctl = Command::new(env!("CARGO_BIN_EXE_vswitchctl"))
        .args(["--socket"])
        .arg(&sw.control)
        .arg("offloads")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ctl.stdout);
    assert!(ctl.status.success(), "{ctl:?}");
    for job in ["tunnel TSO", "tx checksum", "LRO/GRO", "AF_XDP mode"] {
        assert!(text.contains(job), "{job} missing:\n{text}");
    }
    assert!(text.contains("native-copy"), "{text}");
}

/// A stale XDP program (a crashed run's: vswitchd killed with SIGKILL) is replaced at the
/// next start.
#[test]
fn afxdp_stale_program_is_replaced() {
    let _g = serial();
    let veth = Veth::new("s", 1, "10.74.0.2");
    let dir = TempDir::new("afxdp-stale");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vswitchd"))
        .args(["--uplink", &format!("up={},mode=generic", veth.host)])
        .arg("--control")
        .arg(dir.path("ctl.sock"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(10), "vswitchd to attach", || {
        run(&["ip", "link", "show", &veth.host])
            .contains("xdpgeneric")
            .then_some(())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(run(&["ip", "link", "show", &veth.host]).contains("xdpgeneric"));
    let mut sw = Vswitchd::start(
        &dir,
        &["--uplink".into(), format!("up={},mode=native", veth.host)],
    );
    let link = run(&["ip", "link", "show", &veth.host]);
    assert!(
        link.contains(" xdp ") && !link.contains("xdpgeneric"),
        "{link}"
    );
    assert!(
        sw.log().contains("replacing an XDP program"),
        "{}",
        sw.log()
    );
    assert_eq!(sw.stop(), Some(0));
}

/// Ping between the host stack (a tap with an address) and a testpmd guest in icmpecho
/// mode.
#[test]
fn tap_ping_icmpecho_guest() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("tap-ping");
    let tap = format!("vst{}", std::process::id() % 10000);
    let sock = dir.path("a.sock");
    let sw = Vswitchd::start(
        &dir,
        &[
            "--tap".into(),
            format!("t={tap}"),
            "--vhost-user".into(),
            format!("a={}", sock.display()),
        ],
    );
    // No IPv6 from the host on the tap: its router solicitations and MLD reports could
    // be flooded to the guest while it is still posting its first receive buffers.
    run(&[
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
    ]);
    run(&["ip", "addr", "add", "10.78.0.1/24", "dev", &tap]);
    let mut g = Testpmd::start(GuestSpec {
        prefix: "vsxt",
        socket: &sock,
        mac: MAC_A,
        queues: 1,
        server: false,
        extra_vdevs: &[],
        queue_size: None,
        packed: false,
        args: &["--forward-mode=icmpecho"],
    });
    g.cmd("start");
    let out = Command::new("ping")
        .args(["-c", "5", "-i", "0.2", "-W", "2", "10.78.0.2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("5 received"), "{text}");
    let t = sw.port("t").stats;
    // ARP request + 5 echo requests out of the tap; ARP reply + 5 replies back.
    assert!(t.rx_packets >= 6 && t.tx_packets >= 6, "{t:?}");
    // Only what the host sent before the guest attached (IPv6 router solicitations)
    // found no destination.
    assert_eq!(t.drops_total, t.drops["no_destination"], "{:?}", t.drops);
    let a = sw.port("a").stats;
    assert_eq!(a.drops_total, 0, "{:?}", a.drops);
    g.cmd("stop");
}

/// A bulk TCP transfer from the host stack through the tap, the switch and an AF_XDP
/// uplink into a namespace: TSO frames from the tap are segmented in software for the
/// uplink, and every byte arrives.
#[test]
fn tap_bulk_tcp_into_namespace() {
    let _g = serial();
    let veth = Veth::new("t", 1, "10.79.0.2");
    let dir = TempDir::new("tap-tcp");
    let tap = format!("vsu{}", std::process::id() % 10000);
    let sw = tap_and_uplink(&dir, &tap, &veth.host, "generic");
    run(&["ip", "addr", "add", "10.79.0.1/24", "dev", &tap]);
    let mb = 32;
    tcp_transfer(Some(&veth.ns), None, "10.79.0.2", mb);
    let t = sw.port("t").stats;
    let up = sw.port("up").stats;
    assert!(
        up.segmented > 0,
        "no TSO frame was segmented for the uplink: {up:?}"
    );
    assert!(t.rx_bytes >= (mb << 20) as u64, "{t:?}");

    // A downed tap: frames for it are counted as port_down, none is written.
    run(&["ip", "link", "set", &tap, "down"]);
    wait_for(
        Duration::from_secs(10),
        "the tap link down in stats",
        || (sw.port("t").link == "down").then_some(()),
    );
    let before = sw.port("t").stats;
    let _ = Command::new("ip")
        .args(["netns", "exec", &veth.ns, "ping", "-c", "3", "-i", "0.05"])
        .args(["-W", "1", "10.79.0.1"])
        .output()
        .unwrap();
    let after = sw.port("t").stats;
    assert!(
        dropped(&after, "port_down") - dropped(&before, "port_down") >= 3,
        "{after:?}"
    );
    assert_eq!(after.tx_packets, before.tx_packets, "{after:?}");
}

/// vswitchd with tap `t` (interface `tap`) and AF_XDP uplink `up` on `host` in `mode`.
fn tap_and_uplink(dir: &TempDir, tap: &str, host: &str, mode: &str) -> Vswitchd {
    Vswitchd::start(
        dir,
        &[
            "--tap".into(),
            format!("t={tap}"),
            "--uplink".into(),
            format!("up={host},mode={mode}"),
        ],
    )
}

/// A port's drop counter for `reason` (0 when absent).
fn dropped(s: &vswitch::control::protocol::PortStatsOwned, reason: &str) -> u64 {
    s.drops.get(reason).copied().unwrap_or(0)
}

/// Jumbo frames (MTU 9000) through an AF_XDP uplink in `mode`, between the host stack
/// (a tap) and a namespace: a 9014-byte frame spans three UMEM frames, so it crosses
/// only with multi-buffer (XDP_USE_SG) on both rx and tx. Then the uplink's limits: a
/// frame over its MTU is counted as `frame_too_big`, and a downed link is skipped and
/// counted as `port_down` until it comes back.
fn jumbo_frames(mode: &str) {
    let _g = serial();
    let t0 = std::time::Instant::now();
    let step = |what: &str| eprintln!("jumbo {mode}: {:.1} s: {what}", t0.elapsed().as_secs_f64());
    let tag = if mode == "generic" { "jg" } else { "jn" };
    let veth = Veth::new(tag, 1, "10.78.0.2");
    run(&["ip", "link", "set", &veth.host, "mtu", "9000"]);
    veth.exec(&["ip", "link", "set", &veth.peer, "mtu", "9000"]);
    let dir = TempDir::new(&format!("jumbo-{mode}"));
    let tap = format!("vsj{}{}", &mode[..1], std::process::id() % 10000);
    let sw = tap_and_uplink(&dir, &tap, &veth.host, mode);
    run(&["ip", "link", "set", &tap, "mtu", "9000"]);
    run(&["ip", "addr", "add", "10.78.0.1/24", "dev", &tap]);
    let up = sw.show_port("up");
    assert_eq!(up["afxdp"]["multi_buffer"], true, "{up}");
    wait_for(
        Duration::from_secs(10),
        "the uplink MTU 9000 in show",
        || (sw.show_port("up")["afxdp"]["mtu"] == 9000).then_some(()),
    );

    // Jumbo pings, unfragmented (DF), both directions of the uplink.
    let ping = Command::new("ping")
        .args(["-c", "5", "-i", "0.05", "-W", "2", "-M", "do", "-s", "8900"])
        .arg("10.78.0.2")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&ping.stdout).contains(" 0% packet loss"),
        "{ping:?}\n{:?}\n{}",
        sw.stats(),
        sw.log()
    );
    step("jumbo pings");
    // Bulk TCP both ways at MSS 8948.
    tcp_transfer(Some(&veth.ns), None, "10.78.0.2", 16);
    step("tcp host -> namespace");
    tcp_transfer(None, Some(&veth.ns), "10.78.0.1", 16);
    step("tcp namespace -> host");
    let st = sw.port("up").stats;
    assert!(
        st.tx_bytes / st.tx_packets.max(1) > 4096,
        "the uplink sent no multi-buffer frames: {st:?}"
    );
    assert!(
        st.rx_bytes / st.rx_packets.max(1) > 4096,
        "the uplink received no multi-buffer frames: {st:?}"
    );
    assert_eq!(
        st.drops.get("frame_too_big").copied().unwrap_or(0),
        0,
        "{st:?}"
    );
    let up = sw.show_port("up");
    assert_eq!(up["afxdp"]["kernel"]["rx_dropped"], 0, "{up}");

    // An MTU of 1500 on the uplink: a 3042-byte frame from the tap is too big for it.
    run(&["ip", "link", "set", &veth.host, "mtu", "1500"]);
    wait_for(
        Duration::from_secs(10),
        "the uplink MTU 1500 in show",
        || {
            let u = sw.show_port("up");
            (u["afxdp"]["mtu"] == 1500 && u["afxdp"]["max_frame"] == 1518).then_some(())
        },
    );
    let before = sw.port("up").stats;
    let ping = Command::new("ping")
        .args(["-c", "3", "-i", "0.05", "-W", "1", "-M", "do", "-s", "3000"])
        .arg("10.78.0.2")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&ping.stdout).contains("100% packet loss"),
        "{ping:?}"
    );
    let after = sw.port("up").stats;
    assert_eq!(
        dropped(&after, "frame_too_big") - dropped(&before, "frame_too_big"),
        3,
        "{after:?}"
    );
    run(&["ip", "link", "set", &veth.host, "mtu", "9000"]);
    step("frame_too_big");

    // Link down: the switch stops sending to the uplink and counts what it refused.
    run(&["ip", "link", "set", &veth.host, "down"]);
    wait_for(
        Duration::from_secs(10),
        "the uplink link down in show",
        || (sw.show_port("up")["link"] == "down").then_some(()),
    );
    let before = sw.port("up").stats;
    let _ = Command::new("ping")
        .args(["-c", "3", "-i", "0.05", "-W", "1", "10.78.0.2"])
        .output()
        .unwrap();
    let after = sw.port("up").stats;
    assert_eq!(
        dropped(&after, "port_down") - dropped(&before, "port_down"),
        3,
        "{after:?}"
    );
    assert_eq!(after.tx_packets, before.tx_packets, "{after:?}");
    run(&["ip", "link", "set", &veth.host, "up"]);
    wait_for(
        Duration::from_secs(10),
        "the uplink link up in show",
        || (sw.show_port("up")["link"] == "up").then_some(()),
    );
    let ping = wait_for(Duration::from_secs(10), "pings after link up", || {
        let o = Command::new("ping")
            .args(["-c", "1", "-W", "1", "-s", "8900", "10.78.0.2"])
            .output()
            .unwrap();
        o.status.success().then_some(o)
    });
    assert!(ping.status.success());
    step("link down and up");
}

#[test]
fn afxdp_generic_jumbo_frames_multi_buffer() {
    jumbo_frames("generic");
}

#[test]
fn afxdp_native_jumbo_frames_multi_buffer() {
    jumbo_frames("native");
}
