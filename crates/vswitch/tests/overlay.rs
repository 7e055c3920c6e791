//! The Geneve overlay between hosts: each "host" is a network namespace running its own
//! vswitchd, its AF_XDP uplink one end of a veth pair to the other host (underlay MTU
//! 1600, 198.51.100.0/24), its "VM" a tap in VNI 5001 with an address in the host's
//! namespace. Nothing is addressed in the root namespace.

mod common;

use std::process::Command;
use std::time::Duration;

use common::fabric::*;
use common::ovs::Ovs;
use common::*;
use vswitch::control::protocol::{Request, Response, TunnelRow};

/// A tap "VM" on each of two hosts in VNI 5001: pings both ways, then 64 MiB of TCP,
/// sha256-checked, with the taps' TSO on. On the underlay every frame fits the
/// 1600-byte MTU and carries VNI 5001 (tshark); the receiving tap gets frames far
/// larger than the MTU (GRO merged the segments the sender's TSO frames were cut into);
/// neither kernel counts a checksum error.
#[test]
fn two_hosts_taps_ping_and_tcp_across_the_overlay() {
    let _g = serial();
    let f = Fabric::new("t", 2, 1600);
    let dir = TempDir::new("overlay2");
    let id = std::process::id() % 10000;
    let taps = [format!("vov{id}a"), format!("vov{id}b")];
    let sw: Vec<Vswitchd> = (0..2).map(|k| f.vswitchd(k, &dir, &taps[k])).collect();
    for (k, tap) in taps.iter().enumerate() {
        let mtu = f.exec(&f.ns[k], &["cat", &format!("/sys/class/net/{tap}/mtu")]);
        assert_eq!(mtu.trim(), "1550", "the tap gets the underlay MTU minus 50");
    }
    f.ping_until(0, "10.50.0.2");
    for (k, peer) in [(0, "10.50.0.2"), (1, "10.50.0.1")] {
        f.exec(&f.ns[k], &["ping", "-c", "3", "-i", "0.2", "-W", "2", peer]);
    }
    let csum0 = (f.csum_errors(0), f.csum_errors(1));
    let rx0 = (
        stat(&f, 1, &taps[1], "rx_packets"),
        stat(&f, 1, &taps[1], "rx_bytes"),
    );
    let cap = Capture::start(&f, 0, &dir);
    tcp_transfer(Some(&f.ns[1]), Some(&f.ns[0]), "10.50.0.2", 64);
    let wire = cap.frames();
    let t: Vec<TunnelRow> = sw.iter().map(|s| tunnels(s)[0].clone()).collect();
    for row in &t {
        assert_eq!(row.remotes.len(), 1, "{row:?}");
        assert_eq!(row.remotes[0].state, "resolved", "{row:?}");
        // Only frames sent before the kernel had resolved the other endpoint's MAC.
        let drops: u64 = row
            .drops
            .iter()
            .filter(|(k, _)| *k != "tunnel_no_neighbour")
            .map(|(_, v)| v)
            .sum();
        assert_eq!(drops, 0, "{row:?}");
        assert!(row.drops["tunnel_no_neighbour"] <= 3, "{row:?}");
    }
    assert!(
        wire.len() > 40_000,
        "the transfer crossed the fabric: {} frames",
        wire.len()
    );
    assert!(
        wire.iter().all(|&(len, _)| len <= 1614),
        "a frame over the underlay MTU"
    );
    assert!(
        wire.iter().all(|&(_, vni)| vni == 5001),
        "a frame outside VNI 5001"
    );
    assert!(
        t[0].segmented > 0,
        "A's TSO frames were segmented: {:?}",
        t[0]
    );
    let b = sw[1].port("vm").stats;
    assert!(b.coalesced > 0, "B merged segments: {b:?}");
    let (pk, by) = (
        stat(&f, 1, &taps[1], "rx_packets") - rx0.0,
        stat(&f, 1, &taps[1], "rx_bytes") - rx0.1,
    );
    eprintln!(
        "A {:?}\nB {b:?}\nB's tap received {pk} frames, {by} bytes; {} on the wire",
        t[0],
        wire.len()
    );
    assert!(by / pk > 3000, "mean frame into B's tap {} bytes", by / pk);
    assert_eq!(
        (f.csum_errors(0), f.csum_errors(1)),
        csum0,
        "checksum errors in a kernel"
    );
}

/// Sends `n` copies of an Ethernet frame (`src` → `dst`, EtherType 0x88b5, 50 bytes of
/// payload) into interface `dev` of namespace `ns` with scapy (Debian's python3).
fn send_frames(f: &Fabric, ns: &str, dev: &str, src: &str, dst: &str, n: usize) {
    let script = format!(
        "from scapy.all import *\n\
         sendp([Ether(src='{src}', dst='{dst}', type=0x88b5)/Raw(b'x'*50)]*{n}, iface='{dev}', verbose=0)\n"
    );
    f.exec(ns, &["/usr/bin/python3", "-c", &script]);
}

/// Frames each host's endpoint received from the tunnel so far.
fn tunnel_rx(sw: &[Vswitchd]) -> Vec<u64> {
    sw.iter().map(|s| tunnels(s)[0].rx_packets).collect()
}

/// Three hosts: broadcast and unknown unicast from host 0 reach both other hosts once
/// each (head-end replication), learned unicast only the host the MAC lives behind,
/// and a MAC that moves to another host is relearned there from its first frame.
#[test]
fn three_hosts_replicate_then_learn_and_follow_a_moved_mac() {
    let _g = serial();
    let f = Fabric::new("h3", 3, 1600);
    let dir = TempDir::new("overlay3");
    let id = std::process::id() % 10000;
    let taps: Vec<String> = (0..3).map(|k| format!("vo3v{id}{k}")).collect();
    let sw: Vec<Vswitchd> = (0..3).map(|k| f.vswitchd(k, &dir, &taps[k])).collect();
    f.ping_until(0, "10.50.0.2");
    f.ping_until(0, "10.50.0.3");
    f.pin_neighbours(&taps);
    let delta = |before: &[u64], sw: &[Vswitchd]| -> Vec<u64> {
        tunnel_rx(sw)
            .iter()
            .zip(before)
            .map(|(a, b)| a - b)
            .collect()
    };
    let x = "02:00:00:00:00:77";
    for dst in ["ff:ff:ff:ff:ff:ff", "02:00:00:00:00:99"] {
        let before = tunnel_rx(&sw);
        let tx0 = tunnels(&sw[0])[0].tx_packets;
        send_frames(&f, &f.ns[0], &taps[0], x, dst, 10);
        wait_for(Duration::from_secs(5), "the flooded frames", || {
            (delta(&before, &sw)[1..] == [10, 10]).then_some(())
        });
        assert_eq!(
            tunnels(&sw[0])[0].tx_packets - tx0,
            20,
            "one copy to each remote ({dst})"
        );
    }
    // A VM's MAC m1 (not a host kernel's, so no stray frame of the host's moves it
    // back) is learned at host 0 behind host 1 from one broadcast frame.
    let m1 = "02:00:00:00:00:11".to_string();
    send_frames(&f, &f.ns[1], &taps[1], &m1, "ff:ff:ff:ff:ff:ff", 1);
    let behind = |ip: &str| {
        wait_for(
            Duration::from_secs(5),
            "the MAC learned behind a remote",
            || {
                let rows = match ctl(&sw[0].control, Request::Fdb).unwrap() {
                    Response::Fdb(r) => r,
                    other => panic!("{other:?}"),
                };
                rows.iter()
                    .any(|r| r.mac == m1 && r.port == format!("remote {ip}"))
                    .then_some(())
            },
        )
    };
    behind("198.51.100.2");
    let before = tunnel_rx(&sw);
    send_frames(&f, &f.ns[0], &taps[0], x, &m1, 10);
    wait_for(Duration::from_secs(5), "learned unicast", || {
        (delta(&before, &sw)[1] == 10).then_some(())
    });
    assert_eq!(
        delta(&before, &sw)[2],
        0,
        "learned unicast goes to one host only"
    );
    // m1 moves to host 2: its first frame there moves it at host 0.
    send_frames(&f, &f.ns[2], &taps[2], &m1, "ff:ff:ff:ff:ff:ff", 1);
    behind("198.51.100.3");
    let before = tunnel_rx(&sw);
    send_frames(&f, &f.ns[0], &taps[0], x, &m1, 10);
    wait_for(Duration::from_secs(5), "unicast to the moved MAC", || {
        (delta(&before, &sw)[2] == 10).then_some(())
    });
    assert_eq!(delta(&before, &sw)[1], 0, "nothing to the MAC's old host");
}

/// The overlay over an IPv6 underlay (2001:db8::/64, outer UDP checksum on): pings both
/// ways and 16 MiB of verified TCP.
#[test]
fn ipv6_underlay_carries_ping_and_tcp() {
    let _g = serial();
    let f = Fabric::with("v6", 2, 1600, true);
    let dir = TempDir::new("overlay6");
    let id = std::process::id() % 10000;
    let taps = [format!("vo6v{id}a"), format!("vo6v{id}b")];
    // Host 0 sends a (non-critical) option with every frame; host 1 counts them.
    let opt = [",opt=0x0102:0x01:deadbeef", ""];
    let sw: Vec<Vswitchd> = (0..2)
        .map(|k| f.vswitchd_to(k, &dir, &taps[k], &[1 - k], opt[k]))
        .collect();
    let mtu = f.exec(
        &f.ns[1],
        &["cat", &format!("/sys/class/net/{}/mtu", taps[1])],
    );
    assert_eq!(mtu.trim(), "1530", "the tap gets the underlay MTU minus 70");
    f.ping_until(0, "10.50.0.2");
    f.exec(
        &f.ns[1],
        &["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.50.0.1"],
    );
    tcp_transfer(Some(&f.ns[1]), Some(&f.ns[0]), "10.50.0.2", 16);
    let t = tunnels(&sw[0]);
    assert!(t[0].udp_checksum, "on by default over IPv6");
    let mtu = f.exec(
        &f.ns[0],
        &["cat", &format!("/sys/class/net/{}/mtu", taps[0])],
    );
    assert_eq!(mtu.trim(), "1522", "70 bytes and the 8-byte option");
    assert_eq!(t[0].remotes[0].ip, "2001:db8::2");
    assert!(t[0].tx_packets > 16 * 1024 * 1024 / 1600, "{:?}", t[0]);
    let b = tunnels(&sw[1]);
    assert_eq!(b[0].drops["bad_udp_checksum"], 0, "{:?}", b[0]);
    assert!(
        b[0].rx_options >= b[0].rx_packets - 10,
        "options counted: {:?}",
        b[0]
    );
}

/// Interop with Open vSwitch's userspace Geneve (netdev datapath, Debian
/// openvswitch-switch): a tap VM behind vswitchd on host 0 and an internal port behind
/// OVS on host 1, VNI 5001. Pings both ways, then 32 MiB of verified TCP each way:
/// vswitchd's side sends TSO frames (segmented into the tunnel for OVS), OVS's side
/// sends MTU-sized segments (merged by vswitchd for its tap). Every frame on the wire
/// fits the underlay and carries VNI 5001; neither kernel counts a checksum error.
/// OVS 3.1 drops TSO frames bound for tunnels, so its port keeps offloads off (as OVS
/// sets up its internal ports) and gets MTU 1550 by hand.
#[test]
fn interop_with_open_vswitch_userspace_geneve() {
    let _g = serial();
    let f = Fabric::new("ovs", 2, 1600);
    let dir = TempDir::new("overlay-ovs");
    let tap = format!("voo{}a", std::process::id() % 10000);
    let sw = f.vswitchd(0, &dir, &tap);
    let ovs = Ovs::start(&f, 1, &dir, &f.addr(0), 1550);
    f.ping_until(0, "10.50.0.2");
    f.exec(
        &f.ns[1],
        &["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.50.0.1"],
    );
    let csum0 = (f.csum_errors(0), f.csum_errors(1));
    let cap = Capture::start(&f, 0, &dir);
    let t0 = tunnels(&sw)[0].clone();
    tcp_transfer(Some(&f.ns[1]), Some(&f.ns[0]), "10.50.0.2", 32);
    tcp_transfer(Some(&f.ns[0]), Some(&f.ns[1]), "10.50.0.1", 32);
    let wire = cap.frames();
    let t = tunnels(&sw)[0].clone();
    let vm = sw.port("vm").stats;
    eprintln!(
        "vswitchd {t:?}\n{vm:?}\nOVS vm rx {} tx {}; {} frames on the wire",
        ovs.iface_stat("vm", "rx_packets"),
        ovs.iface_stat("vm", "tx_packets"),
        wire.len()
    );
    let sent = 32 * 1024 * 1024 / 1550;
    assert!(t.tx_packets - t0.tx_packets > sent, "to OVS: {t:?}");
    assert!(t.rx_packets - t0.rx_packets > sent, "from OVS: {t:?}");
    assert!(t.segmented > t0.segmented, "TSO frames cut for OVS: {t:?}");
    assert!(
        vm.coalesced > 0,
        "OVS's segments merged for the tap: {vm:?}"
    );
    let drops: u64 = t
        .drops
        .iter()
        .filter(|(k, _)| *k != "tunnel_no_neighbour")
        .map(|(_, v)| v)
        .sum();
    assert_eq!(drops, 0, "{t:?}");
    assert!(wire.len() as u64 > 2 * sent, "{} frames", wire.len());
    assert!(
        wire.iter().all(|&(len, _)| len <= 1614),
        "a frame over the MTU"
    );
    assert!(
        wire.iter().all(|&(_, vni)| vni == 5001),
        "a frame outside VNI 5001"
    );
    assert_eq!(
        (f.csum_errors(0), f.csum_errors(1)),
        csum0,
        "checksum errors in a kernel"
    );
}

/// Malformed Geneve from a third namespace on the fabric: a wrong version, a truncated
/// header, an unknown critical option, an unknown VNI, an inner frame shorter than
/// Ethernet and options longer than the packet are each dropped under their reason;
/// vswitchd lives and the overlay keeps working.
#[test]
fn bad_geneve_from_the_wire_is_dropped_by_reason() {
    let _g = serial();
    let f = Fabric::new("bad", 3, 1600);
    let dir = TempDir::new("overlaybad");
    let id = std::process::id() % 10000;
    let taps = [format!("vobv{id}a"), format!("vobv{id}b")];
    let sw: Vec<Vswitchd> = (0..2)
        .map(|k| f.vswitchd_to(k, &dir, &taps[k], &[1 - k], ""))
        .collect();
    f.ping_until(0, "10.50.0.2");
    let dst_mac = f.mac_of(0, &f.link[0]);
    let script = format!(
        r#"from scapy.all import *
inner = bytes(Ether(dst='ff:ff:ff:ff:ff:ff', src='02:00:00:00:00:66', type=0x88b5)/Raw(b'y'*50))
def gen(first, flags=0, vni=5001, rest=b''):
    return bytes([first, flags, 0x65, 0x58]) + vni.to_bytes(3, 'big') + b'\x00' + rest
pkts = [
    gen(0x40, rest=inner),                                  # version 1
    b'\x00\x00\x65\x58',                                    # truncated header
    gen(0x02, 0x40, rest=bytes([1, 2, 0x85, 1]) + b'\x00' * 4 + inner),  # unknown critical option
    gen(0x00, vni=4242, rest=inner),                        # unknown VNI
    gen(0x00, rest=b'\x02\x00\x00\x00\x00\x01\x02\x00'),    # inner frame of 8 bytes
    gen(0x3f, rest=inner[:20]),                             # 252 bytes of options, 20 sent
]
sendp([Ether(dst='{dst_mac}')/IP(src='{src}', dst='198.51.100.1')/UDP(sport=50000, dport=6081)/Raw(p) for p in pkts],
      iface='{dev}', verbose=0)
"#,
        src = f.addr(2),
        dev = f.link[2],
    );
    f.exec(&f.ns[2], &["/usr/bin/python3", "-c", &script]);
    let drops = wait_for(Duration::from_secs(5), "six drops counted", || {
        let t = tunnels(&sw[0]).remove(0);
        let total: u64 = t.drops.values().sum::<u64>() - t.drops["tunnel_no_neighbour"];
        (total >= 6).then_some(t.drops)
    });
    eprintln!("{drops:?}");
    assert_eq!(drops["bad_version"], 1);
    assert_eq!(drops["unknown_critical_option"], 1);
    assert_eq!(drops["unknown_vni"], 1);
    assert_eq!(
        drops["truncated"] + drops["bad_option"] + drops["length_mismatch"],
        3,
        "the truncated header, the short inner frame and the overlong options"
    );
    assert!(show_json(&sw[0].control).is_ok(), "vswitchd lives");
    f.exec(
        &f.ns[0],
        &["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.50.0.2"],
    );
}

/// Host 0 has two uplinks on the fabric, each with an endpoint (198.51.100.1 and .11):
/// flows spread over both by inner flow hash; when the uplink carrying a ping flood goes
/// down, the flood continues over the other with at most a second of loss, and the
/// endpoint carries flows again once its uplink is back.
#[test]
fn two_endpoints_share_flows_and_fail_over() {
    let _g = serial();
    let f = Fabric::new("tt", 2, 1600);
    let dir = TempDir::new("overlaytt");
    let id = std::process::id() % 10000;
    let ns0 = &f.ns[0];
    let (dev, port) = (format!("{}x", f.link[0]), format!("{}x", f.port[0]));
    run(&[
        "ip", "link", "add", &dev, "type", "veth", "peer", "name", &port,
    ]);
    run(&["ip", "link", "set", &dev, "netns", ns0]);
    run(&["ip", "link", "set", &port, "netns", &f.fabric]);
    f.exec(
        &f.fabric,
        &[
            "ip", "link", "set", &port, "mtu", "1600", "master", "br0", "up",
        ],
    );
    for s in [
        format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
        // Each address answers ARP on its own interface only (a multi-homed host).
        "net.ipv4.conf.all.arp_ignore=1".into(),
        "net.ipv4.conf.all.arp_announce=2".into(),
    ] {
        f.exec(ns0, &["sysctl", "-qw", &s]);
    }
    f.exec(ns0, &["ip", "link", "set", &dev, "mtu", "1600"]);
    f.exec(ns0, &["ip", "addr", "add", "198.51.100.11/24", "dev", &dev]);
    f.exec(ns0, &["ip", "link", "set", &dev, "up"]);
    let taps = [format!("votv{id}a"), format!("votv{id}b")];
    let args: Vec<String> = vec![
        "--uplink".into(),
        format!("u0={},mode=generic", f.link[0]),
        "--uplink".into(),
        format!("u1={dev},mode=generic"),
        "--geneve".into(),
        "t0=198.51.100.1,uplink=u0,remote=198.51.100.2".into(),
        "--geneve".into(),
        "t1=198.51.100.11,uplink=u1,remote=198.51.100.2".into(),
        "--tap".into(),
        format!("vm={},vni=5001", taps[0]),
        "--poll".into(),
        "adaptive".into(),
    ];
    let a = Vswitchd::start_in(Some(ns0), &dir, "0", &args);
    f.exec(
        ns0,
        &[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{}.disable_ipv6=1", taps[0]),
        ],
    );
    f.exec(ns0, &["ip", "addr", "add", "10.50.0.1/24", "dev", &taps[0]]);
    let _b = f.vswitchd(1, &dir, &taps[1]);
    f.ping_until(0, "10.50.0.2");
    let tx = |sw: &Vswitchd| -> Vec<u64> { tunnels(sw).iter().map(|t| t.tx_packets).collect() };
    // 32 UDP flows (source ports 20000..20032) spread over both endpoints.
    let before = tx(&a);
    let script = "import socket\n\
        for p in range(32):\n s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('10.50.0.1', 20000+p))\n for _ in range(5): s.sendto(b'x'*100, ('10.50.0.2', 9))\n";
    f.exec(ns0, &["python3", "-c", script]);
    let after = tx(&a);
    assert!(
        after[0] > before[0] && after[1] > before[1],
        "both endpoints carry flows: {before:?} -> {after:?}"
    );
    // A ping flood; the uplink of the endpoint that carries it goes down once it has
    // carried half a second of it.
    let flood = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns0,
            "ping",
            "-q",
            "-i",
            "0.01",
            "-c",
            "500",
            "-W",
            "1",
            "10.50.0.2",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The endpoint the flood's flow hashes to: the one whose count grows by 50 frames
    // (half a second of the flood; awaited, as it may start late on a busy machine).
    let t0 = tx(&a);
    let busy = wait_for(Duration::from_secs(5), "the flood on one endpoint", || {
        let t = tx(&a);
        let d = [t[0] - t0[0], t[1] - t0[1]];
        (d[0].max(d[1]) >= 50).then_some(if d[0] >= d[1] { 0 } else { 1 })
    });
    let busy_dev = if busy == 0 {
        f.link[0].clone()
    } else {
        dev.clone()
    };
    f.exec(ns0, &["ip", "link", "set", &busy_dev, "down"]);
    let out = flood.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (sent, got) = common::ping_counts(&text).unwrap_or((0, 0));
    eprintln!("{text}");
    assert!(
        sent >= 450 && sent - got <= 100,
        "more than a second lost: {sent} sent, {got} received"
    );
    let rows = tunnels(&a);
    assert_eq!(rows[busy].link, "down", "{rows:?}");
    // Back up: the endpoint carries its flows again.
    f.exec(ns0, &["ip", "link", "set", &busy_dev, "up"]);
    wait_for(Duration::from_secs(10), "the uplink back up", || {
        (tunnels(&a)[busy].link == "up").then_some(())
    });
    // Link down flushed its neighbour: the flow stays on the other endpoint until the
    // path is resolved again (at the next refresh, within about a second), then returns.
    let before = tx(&a)[busy];
    wait_for(
        Duration::from_secs(10),
        "the endpoint to carry the flow again",
        || {
            f.exec(
                ns0,
                &[
                    "ping",
                    "-q",
                    "-i",
                    "0.05",
                    "-c",
                    "5",
                    "-W",
                    "1",
                    "10.50.0.2",
                ],
            );
            (tx(&a)[busy] > before).then_some(())
        },
    );
}
