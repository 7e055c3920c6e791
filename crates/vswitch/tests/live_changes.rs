//! Changing the switch while it forwards: a DPDK testpmd guest loops frames between
//! ports a and b at full rate while other ports are added, used and deleted (vhost-user
//! guests, an AF_XDP uplink, a tap) and while the configuration is reloaded. The loop's
//! ports must count zero drops and every frame the switch took from one of them must
//! have been delivered to the other.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use vswitch::control::protocol::{Request, Response};

use common::looping::*;

const MAC_A: &str = LOOP_MAC_A;
const MAC_B: &str = LOOP_MAC_B;
const MAC_C: &str = "02:00:00:00:00:03";

fn vswitchctl(ctl: &Path, args: &[&str]) {
    let out = vswitchctl_out(ctl, args);
    assert!(out.status.success(), "vswitchctl {args:?}: {out:?}");
}

/// A third port is added, used by its own guest (32 frames to A, which join the loop)
/// and deleted 20 times while the loop runs; the loop loses nothing and never stops.
#[test]
fn a_port_comes_and_goes_20_times_while_a_loop_runs() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("churn");
    let sw = start_loop_switch(&dir, &[]);
    let mut lg = start_loop_guest(&dir, "vsloop", MAC_A, MAC_B);
    wait_for(Duration::from_secs(20), "the loop running", || {
        (sw.port("a").stats.rx_packets > 10_000).then_some(())
    });
    let sc = dir.path("c.sock");
    let spec = format!("c={},queues=1", sc.display());
    let peer = format!("--eth-peer=0,{MAC_A}");
    let mut injected = 0;
    let mut slowest = u64::MAX;
    for i in 0..20 {
        let moved = sw.port("a").stats.rx_packets;
        vswitchctl(&sw.control, &["add-port", "--vhost-user", &spec]);
        let mut c = Testpmd::start(GuestSpec {
            prefix: "vschurn",
            socket: &sc,
            mac: MAC_C,
            queues: 1,
            server: false,
            extra_vdevs: &[],
            queue_size: None,
            packed: false,
            args: &["--forward-mode=io", &peer],
        });
        c.cmd("start tx_first 1");
        let cs = wait_for(Duration::from_secs(20), "c's 32 frames", || {
            let s = sw.port("c").stats;
            (s.rx_packets == 32).then_some(s)
        });
        c.cmd("stop");
        assert_eq!(cs.drops_total, 0, "iteration {i}: {cs:?}");
        injected += cs.rx_packets;
        // Deleted while its guest is attached: the guest sees its link go down.
        vswitchctl(&sw.control, &["del-port", "c"]);
        assert!(!sc.exists(), "iteration {i}: c's socket removed");
        if i == 0 {
            wait_for(
                Duration::from_secs(10),
                "c's guest to see link down",
                || {
                    c.cmd("show port info 0")
                        .contains("Link status: down")
                        .then_some(())
                },
            );
        }
        drop(c);
        slowest = slowest.min(sw.port("a").stats.rx_packets - moved);
    }
    let fdb = match ctl(&sw.control, Request::Fdb).unwrap() {
        Response::Fdb(rows) => rows,
        other => panic!("{other:?}"),
    };
    assert!(
        fdb.iter().all(|r| r.mac != MAC_C),
        "c's learned MAC went with it: {fdb:?}"
    );
    lg.cmd("stop");
    let (a, b) = settled(&sw);
    eprintln!(
        "loop: a {a:?}\nb {b:?}\ninjected {injected}, fewest frames in one iteration {slowest}"
    );
    assert_eq!(injected, 20 * 32);
    assert!(slowest > 0, "the loop never stopped while c came and went");
    assert_loop_whole(&a, &b, injected);
}

/// An AF_XDP uplink and a tap are added in VLAN 30 while the loop runs, carry frames
/// both ways (the tap's side injected with scapy, the namespace's side pinged), and are
/// deleted: the XDP program leaves the interface, the tap device goes, the loop loses
/// nothing.
#[test]
fn an_uplink_and_a_tap_come_and_go_while_a_loop_runs() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("uptap");
    let veth = Veth::new("lu", 1, "198.51.100.1");
    let tap = format!("vslt{}", std::process::id() % 10000);
    let sw = start_loop_switch(&dir, &[]);
    let mut lg = start_loop_guest(&dir, "vsloop", MAC_A, MAC_B);
    wait_for(Duration::from_secs(20), "the loop running", || {
        (sw.port("a").stats.rx_packets > 10_000).then_some(())
    });
    vswitchctl(
        &sw.control,
        &[
            "add-port",
            "--uplink",
            &format!("u={},mode=generic,vlan=30", veth.host),
        ],
    );
    vswitchctl(
        &sw.control,
        &["add-port", "--tap", &format!("t={tap},vlan=30")],
    );
    std::fs::write(format!("/proc/sys/net/ipv6/conf/{tap}/disable_ipv6"), "1").unwrap();
    assert!(run(&["ip", "link", "show", "dev", &veth.host]).contains("xdp"));

    // Tap → uplink: ten frames written into the tap by scapy reach the namespace.
    // (Counted from here: the host may have sent an MLD report on the tap as it came
    // up, before IPv6 was turned off on it; snooping keeps such reports off the uplink.)
    let before = veth.peer_stat("rx_packets");
    let (t0, u0) = (sw.port("t").stats.rx_packets, sw.port("u").stats.tx_packets);
    let script = format!(
        "from scapy.all import *\n\
         sendp([Ether(src='02:00:00:00:00:33', dst='{}')/IP(src='198.51.100.3', dst='198.51.100.1')/UDP(dport=9)/Raw(b'x'*64)]*10, iface='{tap}', verbose=0)\n",
        veth.peer_mac()
    );
    // Debian's python (python3-scapy), whatever python3 comes first in PATH.
    run(&["/usr/bin/python3", "-c", &script]);
    wait_for(
        Duration::from_secs(10),
        "ten frames in the namespace",
        || (veth.peer_stat("rx_packets") >= before + 10).then_some(()),
    );
    assert!(sw.port("t").stats.rx_packets - t0 >= 10);
    assert_eq!(sw.port("u").stats.tx_packets - u0, 10);
    // Uplink → tap: the namespace's pings (to a static neighbour) are flooded in VLAN
    // 30, which is the tap alone.
    veth.exec(&[
        "ip",
        "neigh",
        "add",
        "198.51.100.9",
        "lladdr",
        "02:00:00:00:00:99",
        "dev",
        &veth.peer,
    ]);
    let _ = veth.exec(&["sh", "-c", "ping -c 3 -i 0.05 -W 1 198.51.100.9 || true"]);
    let t = sw.port("t").stats;
    assert!(t.tx_packets >= 3, "{t:?}");

    vswitchctl(&sw.control, &["del-port", "u"]);
    vswitchctl(&sw.control, &["del-port", "t"]);
    assert!(
        !run(&["ip", "link", "show", "dev", &veth.host]).contains("xdp"),
        "the XDP program was detached"
    );
    let gone = Command::new("ip")
        .args(["link", "show", "dev", &tap])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "the tap device was removed");
    lg.cmd("stop");
    let (a, b) = settled(&sw);
    assert_loop_whole(&a, &b, 0);
}

/// Fault: the uplink's interface is deleted (`ip link del`) while the namespace behind
/// it floods pings through it to a tap, and while the tap sends toward it. vswitchd
/// lives, shows the uplink down, counts the tap's frames for it as `port_down` (nothing
/// else lost uncounted), `del-port` still removes it, and the loop beside it loses
/// nothing.
#[test]
fn an_uplink_deleted_under_traffic() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("updel");
    let veth = Veth::new("ld", 1, "198.51.100.1");
    let tap = format!("vsld{}", std::process::id() % 10000);
    let sw = start_loop_switch(&dir, &[]);
    let mut lg = start_loop_guest(&dir, "vsloopd", MAC_A, MAC_B);
    wait_for(Duration::from_secs(20), "the loop running", || {
        (sw.port("a").stats.rx_packets > 10_000).then_some(())
    });
    let spec = format!("u={},mode=generic,vlan=30", veth.host);
    vswitchctl(&sw.control, &["add-port", "--uplink", &spec]);
    vswitchctl(
        &sw.control,
        &["add-port", "--tap", &format!("t={tap},vlan=30")],
    );
    std::fs::write(format!("/proc/sys/net/ipv6/conf/{tap}/disable_ipv6"), "1").unwrap();
    veth.exec(&[
        "ip",
        "neigh",
        "add",
        "198.51.100.9",
        "lladdr",
        "02:00:00:00:00:99",
        "dev",
        &veth.peer,
    ]);
    // A ping flood from the namespace, flooded in VLAN 30 to the tap, for as long as
    // the link lives.
    let flood = KillOnDrop(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &veth.ns,
                "ping",
                "-f",
                "-W",
                "1",
                "198.51.100.9",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(
        Duration::from_secs(10),
        "the flood reaching the tap",
        || (sw.port("t").stats.tx_packets > 500).then_some(()),
    );
    let peer_mac = veth.peer_mac();
    // The uplink's MAC learned behind u: the tap's frames to it are unicast to u.
    run(&["ip", "link", "del", &veth.host]);
    wait_for(Duration::from_secs(10), "u to go down", || {
        (sw.port("u").link == "down").then_some(())
    });
    drop(flood);
    let u_before = sw.port("u").stats;
    let script = format!(
        "from scapy.all import *\n\
         sendp([Ether(src='02:00:00:00:00:33', dst='{peer_mac}')/IP(src='198.51.100.3', dst='198.51.100.1')/UDP(dport=9)/Raw(b'x'*64)]*10, iface='{tap}', verbose=0)\n"
    );
    run(&["/usr/bin/python3", "-c", &script]);
    let u = wait_for(Duration::from_secs(10), "the tap's frames counted", || {
        let u = sw.port("u").stats;
        let d = u.drops.get("port_down").copied().unwrap_or(0)
            - u_before.drops.get("port_down").copied().unwrap_or(0);
        (d == 10).then_some(u)
    });
    assert_eq!(
        u.tx_packets, u_before.tx_packets,
        "nothing sent on a dead link"
    );
    assert!(show_json(&sw.control).is_ok(), "vswitchd answers");
    vswitchctl(&sw.control, &["del-port", "u"]);
    vswitchctl(&sw.control, &["del-port", "t"]);
    lg.cmd("stop");
    let (a, b) = settled(&sw);
    assert_loop_whole(&a, &b, 0);
}

/// A reload under a running loop adds a port, moves another to a VLAN and deletes a
/// third; the loop's guest stays connected throughout (its port is unchanged) and loses
/// nothing.
#[test]
fn reload_under_a_running_loop_changes_only_what_the_file_says() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("reloadloop");
    let file = dir.path("vswitchd.toml");
    let port = |name: &str, extra: &str| {
        format!(
            "[[port]]\nname = \"{name}\"\ntype = \"vhost-user\"\npath = \"{}\"\n{extra}\n",
            dir.path(&format!("{name}.sock")).display()
        )
    };
    let statics = format!(
        "[[fdb_static]]\nmac = \"{MAC_A}\"\nport = \"a\"\n\n[[fdb_static]]\nmac = \"{MAC_B}\"\nport = \"b\"\n"
    );
    let v1 = format!(
        "poll = \"adaptive\"\n{}{}{}{}{statics}",
        port("a", ""),
        port("b", ""),
        port("x", ""),
        port("y", "vlan = 7")
    );
    std::fs::write(&file, v1).unwrap();
    let sw = Vswitchd::start(&dir, &["--config".into(), file.display().to_string()]);
    let mut lg = start_loop_guest(&dir, "vsloop", MAC_A, MAC_B);
    wait_for(Duration::from_secs(20), "the loop running", || {
        (sw.port("a").stats.rx_packets > 10_000).then_some(())
    });
    let connections = |sw: &Vswitchd, name: &str| {
        sw.find_port(name)
            .map(|p| p["connections"].as_u64().unwrap())
    };
    let before = (connections(&sw, "a"), connections(&sw, "b"));
    let v2 = format!(
        "poll = \"adaptive\"\n{}{}{}{}{statics}",
        port("a", ""),
        port("b", ""),
        port("y", "vlan = 8"),
        port("z", "")
    );
    std::fs::write(&file, v2).unwrap();
    match ctl(&sw.control, Request::Reload).unwrap() {
        Response::Reloaded(r) => {
            assert_eq!(
                (r.added, r.deleted, r.changed),
                (
                    vec!["z".to_string()],
                    vec!["x".to_string()],
                    vec!["y".to_string()]
                )
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        (connections(&sw, "a"), connections(&sw, "b")),
        before,
        "a and b untouched"
    );
    assert_eq!(connections(&sw, "x"), None);
    let mut vlans: Vec<(String, u64)> = sw.show()["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["vlan"].as_u64().unwrap(),
            )
        })
        .collect();
    vlans.sort();
    assert_eq!(
        vlans,
        vec![
            ("a".into(), 0),
            ("b".into(), 0),
            ("y".into(), 8),
            ("z".into(), 0)
        ]
    );
    let moved = sw.port("a").stats.rx_packets;
    wait_for(
        Duration::from_secs(10),
        "the loop running after the reload",
        || (sw.port("a").stats.rx_packets > moved + 10_000).then_some(()),
    );
    lg.cmd("stop");
    let (a, b) = settled(&sw);
    assert_loop_whole(&a, &b, 0);
}

/// Two busy transmit queues on one PMD (a and c; b, idle, has the other PMD) are split
/// over the two PMDs by `pmd-rebalance`, which measured their load; `show` and
/// `pmd-stats` print the new assignment, and both queues keep flowing.
#[test]
fn pmd_rebalance_splits_busy_queues_that_share_a_pmd() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("rebal");
    let sock = |n: &str| format!("{n}={}", dir.path(&format!("{n}.sock")).display());
    let sw = Vswitchd::start(
        &dir,
        &[
            "--vhost-user".into(),
            sock("a"),
            "--vhost-user".into(),
            sock("b"),
            "--vhost-user".into(),
            sock("c"),
            "--static-mac".into(),
            format!("a={MAC_A}"),
            "--static-mac".into(),
            format!("c={MAC_C}"),
            "--pmd-cpus".into(),
            "0,1".into(),
            "--poll".into(),
            "adaptive".into(),
        ],
    );
    let pmd_of = |sw: &Vswitchd, name: &str| -> u64 {
        sw.show_port(name)["pmd_of_queue"][0].as_u64().unwrap()
    };
    assert_eq!(
        pmd_of(&sw, "a"),
        pmd_of(&sw, "c"),
        "a and c start on one PMD"
    );
    assert_ne!(pmd_of(&sw, "a"), pmd_of(&sw, "b"));
    // One guest sends on a (to C) and on c (to A).
    let vdev_c = format!(
        "net_virtio_user1,path={},queues=1,mac={MAC_C}",
        dir.path("c.sock").display()
    );
    let peers = [
        format!("--eth-peer=0,{MAC_C}"),
        format!("--eth-peer=1,{MAC_A}"),
    ];
    let sa = dir.path("a.sock");
    let extra = [vdev_c];
    let mut g = Testpmd::start(GuestSpec {
        prefix: "vsrebal",
        socket: &sa,
        mac: MAC_A,
        queues: 1,
        server: false,
        extra_vdevs: &extra,
        queue_size: None,
        packed: false,
        args: &["--forward-mode=txonly", &peers[0], &peers[1]],
    });
    g.cmd("start");
    let taken = |sw: &Vswitchd, name: &str| sw.port(name).stats.rx_packets;
    wait_for(Duration::from_secs(20), "load on a and c", || {
        (taken(&sw, "a") > 100_000 && taken(&sw, "c") > 100_000).then_some(())
    });
    let r = match ctl(&sw.control, Request::PmdRebalance).unwrap() {
        Response::Rebalanced(r) => r,
        other => panic!("{other:?}"),
    };
    eprintln!("{r:?}");
    assert!(r.moved >= 1, "{r:?}");
    assert_ne!(pmd_of(&sw, "a"), pmd_of(&sw, "c"), "a and c split: {r:?}");
    let on_pmd: Vec<Vec<String>> = pmd_stats(&sw.control)
        .into_iter()
        .map(|p| p.queues)
        .collect();
    assert!(
        on_pmd
            .iter()
            .all(|qs| qs.contains(&"a/0".to_string()) != qs.contains(&"c/0".to_string())),
        "pmd-stats shows the split: {on_pmd:?}"
    );
    let (a0, c0) = (taken(&sw, "a"), taken(&sw, "c"));
    wait_for(Duration::from_secs(10), "both queues flowing after", || {
        (taken(&sw, "a") > a0 + 10_000 && taken(&sw, "c") > c0 + 10_000).then_some(())
    });
    g.cmd("stop");
}
