//! IGMP snooping in an OVN logical switch (issue 30 §1, "per bridge domain (... OVN
//! logical switch)"), the way OVN does it: `mcast_snoop=true` on the switch, each
//! chassis writes the ports that joined a group to `IGMP_Group`, ovn-northd merges
//! the rows into the `Multicast_Group` named by the group, and every chassis sends the
//! group's frames to that group's ports only.
//!
//! Three chassis, as in `ovn_three_chassis.rs`: **hv1** = Open vSwitch (userspace
//! datapath) + ovn-controller, **hv2** and **hv3** = vswitchd. Receivers are Linux
//! sockets in the hosts' namespaces (the kernel's own IGMPv3 reports and leaves); an
//! AF_PACKET sniffer on each VM interface counts the group's frames that reach it,
//! joined or not (`tests/common/mcast.py`); an IPv6 group checks MLDv2 the same way.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::chassis::*;
use common::fabric::{Capture, Fabric};
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::*;
use vswitch::control::protocol::{Request, Response};

const MCAST_PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/mcast.py");
const WAIT: Duration = Duration::from_secs(20);
const GROUP: &str = "239.1.2.3";
const GROUP_MAC: &str = "01:00:5e:01:02:03";
/// An IPv6 group (MLDv2 reports).
const GROUP6: &str = "ff0e::1:3";
/// A group nobody joins.
const UNJOINED: &str = "239.9.9.9";
/// Datagrams per send.
const N: u64 = 20;

/// `mcast.py` in namespace `ns`, in the background.
fn py(ns: &str, args: &[&str]) -> KillOnDrop {
    KillOnDrop(
        Command::new("ip")
            .args(["netns", "exec", ns, "python3", MCAST_PY])
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// `mcast.py send`: `N` datagrams to `group` out of `iface` in `ns`, to the end.
fn send(ns: &str, iface: &str, group: &str) {
    let n = N.to_string();
    run(&[
        "ip", "netns", "exec", ns, "python3", MCAST_PY, "send", iface, group, "5001", &n,
    ]);
}

fn count(out: &PathBuf) -> u64 {
    std::fs::read_to_string(out)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until counter file `out` reads `want`.
fn reaches(out: &PathBuf, want: u64, what: &str) {
    wait_for(WAIT, &format!("{want} {what}"), || {
        (count(out) == want).then_some(())
    });
}

/// Snooping's counter `name` in `sw`'s `vswitchctl mdb`.
fn mcast_counter(sw: &Vswitchd, name: &str) -> u64 {
    match ctl(&sw.control, Request::Mdb).expect("mdb") {
        Response::Mdb(m) => m.counters[name],
        other => panic!("{other:?}"),
    }
}

/// The logical ports of `GROUP`'s `IGMP_Group` row written by chassis `chassis`, or
/// None without such a row.
fn igmp_ports(c: &OvnCentral, chassis: &str) -> Option<Vec<String>> {
    let me = c.sb_get("Chassis", "name", chassis, "_uuid");
    let rows = c.sbctl(&[
        "--data=bare",
        "--columns=chassis,ports",
        "--format=csv",
        "--no-headings",
        "find",
        "IGMP_Group",
        &format!("address=\"{GROUP}\""),
    ]);
    let row = rows.lines().find(|l| l.starts_with(&me))?;
    let ports = row.split(',').nth(1).unwrap_or("");
    Some(lsps(c, ports))
}

/// The logical ports of the `Multicast_Group` ovn-northd made for `GROUP`.
fn group_ports(c: &OvnCentral) -> Vec<String> {
    let ports = c.sb_get("Multicast_Group", "name", &format!("\"{GROUP}\""), "ports");
    lsps(c, &ports)
}

/// The logical port names of `Port_Binding` uuids `uuids` (space-separated), sorted.
fn lsps(c: &OvnCentral, uuids: &str) -> Vec<String> {
    let mut v: Vec<String> = uuids
        .split_whitespace()
        .map(|u| {
            c.sbctl(&["get", "Port_Binding", u, "logical_port"])
                .trim()
                .trim_matches('"')
                .to_string()
        })
        .collect();
    v.sort();
    v
}

/// Waits until ovn-northd's group for `GROUP` has exactly ports `want`, then until
/// every chassis has applied it (`--wait=hv`).
fn group_becomes(c: &OvnCentral, want: &[&str]) {
    wait_for(WAIT, &format!("Multicast_Group {GROUP} = {want:?}"), || {
        (group_ports(c) == want).then_some(())
    });
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
}

#[test]
fn ovn_switch_snoops_igmp_and_sends_groups_to_joined_chassis_only() {
    snoop(Forwarding::L2);
}

/// The same in a switch with a security group, which vswitchd runs through OVN's
/// logical pipeline: its `igmp` action hands the reports to the chassis, and the
/// pipeline's outputs to the groups ovn-northd made carry the frames.
#[test]
fn ovn_switch_that_runs_the_pipeline_snoops_igmp_and_sends_groups_to_joined_chassis_only() {
    snoop(Forwarding::Pipeline);
}

fn snoop(s: Forwarding) {
    let _g = serial();
    setup_host();
    let t0 = Instant::now();
    let f = Fabric::new("oms", 3, 1600);
    let dir = TempDir::new("ovn-mcast");
    let c = OvnCentral::start(&dir);
    c.nbctl(&["ls-add", "sw0"]);
    c.nbctl(&[
        "set",
        "logical_switch",
        "sw0",
        "other_config:mcast_snoop=true",
    ]);
    s.prepare(&c, "sw0");
    for (lsp, addr) in [
        ("lsp-hv1", format!("{HV1_VIF} 10.0.0.1")),
        ("lsp-a", format!("{TAP_MAC} 10.0.0.2")),
        ("lsp-b", format!("{TAP_B_MAC} 10.0.0.3")),
    ] {
        c.nbctl(&["lsp-add", "sw0", lsp]);
        c.nbctl(&["lsp-set-addresses", lsp, &addr]);
    }
    let hv1 = Ovs::ovn_chassis(&f, 0, &dir, "hv1", &c.sb_remote());
    hv1.vif(&f, "vif0", "lsp-hv1", HV1_VIF, "10.0.0.1/24", 1500);
    let id = std::process::id() % 10000;
    let (ta, tb) = (format!("voms{id}a"), format!("voms{id}b"));
    let hv2 = Vswitchd::start_in(
        Some(&f.ns[1]),
        &dir,
        "hv2",
        &chassis_args(&f, 1, &c, "hv2", &tap("ta", &ta, "lsp-a")),
    );
    let hv3 = Vswitchd::start_in(
        Some(&f.ns[2]),
        &dir,
        "hv3",
        &chassis_args(&f, 2, &c, "hv3", &tap("tb", &tb, "lsp-b")),
    );
    tap_up(&f, 1, &ta, TAP_MAC, "10.0.0.2/24");
    tap_up(&f, 2, &tb, TAP_B_MAC, "10.0.0.3/24");
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    assert_eq!(
        c.sb_get("IP_Multicast", "enabled", "true", "enabled"),
        "true",
        "northd wrote sw0's IP_Multicast row"
    );
    for (k, ip) in [(0, "10.0.0.2"), (0, "10.0.0.3"), (1, "10.0.0.3")] {
        assert!(ping_ok(&f.ns[k], ip, 20), "{} -> {ip}", f.ns[k]);
    }
    eprintln!("[{:>6.1?}] three chassis up", t0.elapsed());

    // Every VM interface's sniffer counts the group's frames, joined or not.
    let sniffed: Vec<PathBuf> = ["hv1", "hv2", "hv3"]
        .iter()
        .map(|h| dir.path(&format!("sniff-{h}")))
        .collect();
    let ifaces = ["vif0", ta.as_str(), tb.as_str()];
    let _sniffers: Vec<KillOnDrop> = (0..3)
        .map(|k| {
            let out = sniffed[k].to_str().unwrap();
            py(&f.ns[k], &["sniff", ifaces[k], GROUP, out])
        })
        .collect();
    for s in &sniffed {
        reaches(s, 0, "frames sniffed (the sniffer runs)");
    }

    // hv2's VM joins: its report is taken in (no copy crosses the underlay), hv2 writes
    // the IGMP_Group row, northd makes the group.
    let mut underlay = Capture::start(&f, 1, &dir);
    let joined_a = dir.path("recv-hv2");
    let recv_a = py(
        &f.ns[1],
        &["recv", &ta, GROUP, "5001", joined_a.to_str().unwrap()],
    );
    wait_for(WAIT, "hv2's IGMP_Group row", || {
        (igmp_ports(&c, "hv2")? == ["lsp-a"]).then_some(())
    });
    group_becomes(&c, &["lsp-a"]);
    underlay.stop();
    let reports = underlay
        .fields("eth.dst == 01:00:5e:00:00:16", &["frame.number"])
        .len();
    assert_eq!(reports, 0, "IGMPv3 reports stay on hv2");
    let mdb = vswitchctl_out(&hv2.control, &["mdb"]);
    let mdb = String::from_utf8_lossy(&mdb.stdout);
    assert!(mdb.contains(GROUP) && mdb.contains("ta"), "{mdb}");
    assert_eq!(
        drops(&hv2, "ta", "ovn_pipeline"),
        0,
        "reports taken in are no drops"
    );
    eprintln!("[{:>6.1?}] hv2 joined {GROUP}", t0.elapsed());

    // From hv1 (OVS): to hv2's VM only.
    send(&f.ns[0], "vif0", GROUP);
    reaches(&joined_a, N, "datagrams at hv2's receiver");
    assert!(
        ping_ok(&f.ns[0], "10.0.0.3", 5),
        "a round trip to hv3 after"
    );
    assert_eq!(count(&sniffed[2]), 0, "hv3 has no member and got copies");

    // From hv3 (vswitchd): one copy, to hv2, carrying the group's key; none to hv1.
    let key: u16 = c
        .sb_get(
            "Multicast_Group",
            "name",
            &format!("\"{GROUP}\""),
            "tunnel_key",
        )
        .parse()
        .unwrap();
    let mut cap = Capture::start(&f, 2, &dir);
    send(&f.ns[2], &tb, GROUP);
    reaches(&joined_a, 2 * N, "datagrams at hv2's receiver");
    assert!(
        ping_ok(&f.ns[2], "10.0.0.1", 5),
        "a round trip to hv1 after"
    );
    cap.stop();
    let to_hv2 = egress_keys(&cap, &f.addr(2), &f.addr(1), GROUP_MAC);
    assert_eq!(to_hv2, vec![key; N as usize], "hv3 -> hv2: the group's key");
    let to_hv1 = egress_keys(&cap, &f.addr(2), &f.addr(0), GROUP_MAC);
    assert!(to_hv1.is_empty(), "hv3 -> hv1 (no member): {to_hv1:?}");
    assert_eq!(count(&sniffed[0]), 0, "hv1 has no member and got copies");
    // Snooping counts them, by the L2 rules or the pipeline alike.
    assert_eq!(mcast_counter(&hv3, "forwarded"), N, "hv3's mdb counters");
    eprintln!("[{:>6.1?}] the group reaches its member only", t0.elapsed());

    // hv1's VM joins too (ovn-controller's own IGMP_Group row): hv3 now sends to both.
    let joined_hv1 = dir.path("recv-hv1");
    let _recv_hv1 = py(
        &f.ns[0],
        &["recv", "vif0", GROUP, "5001", joined_hv1.to_str().unwrap()],
    );
    group_becomes(&c, &["lsp-a", "lsp-hv1"]);
    send(&f.ns[2], &tb, GROUP);
    reaches(&joined_a, 3 * N, "datagrams at hv2's receiver");
    reaches(&joined_hv1, N, "datagrams at hv1's receiver");

    // A group nobody joined: dropped at the sender's chassis, counted.
    send(&f.ns[2], &tb, UNJOINED);
    // By the snooping pass (L2 rules), or by the pipeline's `drop` for unregistered
    // groups: counted alike, once each.
    wait_for(WAIT, "the unregistered group's drops", || {
        (drops(&hv3, "tb", "mcast_unregistered") == N).then_some(())
    });
    assert_eq!(drops(&hv3, "tb", "ovn_pipeline"), 0, "counted once");

    // hv2's VM leaves (its socket closes): the row goes, the group shrinks, and hv2
    // gets no more copies.
    drop(recv_a);
    wait_for(WAIT, "hv2's IGMP_Group row gone", || {
        igmp_ports(&c, "hv2").is_none().then_some(())
    });
    group_becomes(&c, &["lsp-hv1"]);
    let at_hv2 = count(&sniffed[1]);
    send(&f.ns[2], &tb, GROUP);
    reaches(&joined_hv1, 2 * N, "datagrams at hv1's receiver");
    assert!(
        ping_ok(&f.ns[2], "10.0.0.2", 5),
        "a round trip to hv2 after"
    );
    assert_eq!(count(&sniffed[1]), at_hv2, "hv2 left and got copies");
    eprintln!("[{:>6.1?}] leave and unregistered groups", t0.elapsed());

    // MLDv2: hv2's VM joins an IPv6 group; northd names the group by its IPv6 text, and
    // hv1's (OVS) frames to it reach hv2 and not hv3.
    for (k, iface) in [(0, "vif0"), (1, ta.as_str()), (2, tb.as_str())] {
        let on = format!("net.ipv6.conf.{iface}.disable_ipv6=0");
        f.exec(&f.ns[k], &["sysctl", "-qw", &on]);
        let addr = format!("2001:db8:5::{}/64", k + 1);
        f.exec(
            &f.ns[k],
            &["ip", "-6", "addr", "add", &addr, "dev", iface, "nodad"],
        );
    }
    let sniffed6: Vec<PathBuf> = (0..3).map(|k| dir.path(&format!("sniff6-{k}"))).collect();
    let _sniffers6: Vec<KillOnDrop> = (1..3)
        .map(|k| {
            let out = sniffed6[k].to_str().unwrap();
            py(&f.ns[k], &["sniff", ifaces[k], GROUP6, out])
        })
        .collect();
    let joined6 = dir.path("recv6-hv2");
    let _recv6 = py(
        &f.ns[1],
        &["recv", &ta, GROUP6, "5001", joined6.to_str().unwrap()],
    );
    wait_for(WAIT, "northd's group for the IPv6 address", || {
        let ports = c.sb_get("Multicast_Group", "name", &format!("\"{GROUP6}\""), "ports");
        (lsps(&c, &ports) == ["lsp-a"]).then_some(())
    });
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    send(&f.ns[0], "vif0", GROUP6);
    reaches(&joined6, N, "IPv6 datagrams at hv2's receiver");
    assert!(
        ping_ok(&f.ns[0], "10.0.0.3", 5),
        "a round trip to hv3 after"
    );
    assert_eq!(
        count(&sniffed6[2]),
        0,
        "hv3 has no IPv6 member and got copies"
    );
    s.assert_ran(&hv2, "hv2");
    s.assert_ran(&hv3, "hv3");
    eprintln!("[{:>6.1?}] MLDv2 group", t0.elapsed());
}
