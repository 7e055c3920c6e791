//! Three chassis of one OVN deployment (issue 28 §6): **hv1** = Open vSwitch (userspace
//! datapath) + ovn-controller, **hv2** and **hv3** = vswitchd, each on its own fabric
//! host (network namespace) of a 1600-byte underlay bridge captured with tshark.
//!
//! - A broadcast from each chassis reaches every other chassis with members exactly
//!   once: counted on the wire, per (sender, receiver) pair.
//! - A port moved between the vswitchd chassis (its `iface_id` port deleted on hv2,
//!   added on hv3; the "VM" behind it is a network namespace of its own) resumes within
//!   1 s of its binding being up on hv3, for pings from hv1 (OVS) and from hv2.

mod common;

use std::time::{Duration, Instant};

use common::chassis::*;
use common::fabric::{Capture, Fabric};
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::*;

/// Broadcast frames each chassis sends.
const BCASTS: usize = 40;
/// The moved "VM"'s MAC and address.
const MOVED_MAC: &str = "02:00:00:00:03:01";
const MOVED_IP: &str = "10.0.0.4";

/// Sends `n` broadcast UDP frames carrying `marker` from `iface` (MAC `src`) in
/// namespace `ns`.
fn send_broadcasts(ns: &str, iface: &str, src: &str, marker: &str, n: usize) {
    let payload = format!("b'{marker}'*8");
    send_payload(ns, iface, src, "ff:ff:ff:ff:ff:ff", &payload, n as u32);
}

/// Moves tap `tap` from namespace `from` into namespace `vm` and gives it the moved
/// VM's MAC and address there.
fn into_vm(from: &str, tap: &str, vm: &str) {
    run(&["ip", "-n", from, "link", "set", tap, "netns", vm]);
    for args in [
        vec![
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
        ],
        vec!["ip", "link", "set", tap, "address", MOVED_MAC],
        vec!["ip", "addr", "add", "10.0.0.4/24", "dev", tap],
        vec!["ip", "link", "set", tap, "up"],
    ] {
        let mut a = vec!["ip", "netns", "exec", vm];
        a.extend(args);
        run(&a);
    }
}

#[test]
fn three_chassis_flood_once_and_a_port_moves() {
    let _g = serial();
    setup_host();
    let t0 = Instant::now();
    let f = Fabric::new("ov3", 3, 1600);
    let dir = TempDir::new("ovn-three");
    let c = OvnCentral::start(&dir);
    c.nbctl(&["ls-add", "sw0"]);
    for (lsp, addr) in [
        ("lsp-hv1", format!("{HV1_VIF} 10.0.0.1")),
        ("lsp-a", format!("{TAP_MAC} 10.0.0.2")),
        ("lsp-b", format!("{TAP_B_MAC} 10.0.0.3")),
        ("lsp-m", format!("{MOVED_MAC} {MOVED_IP}")),
    ] {
        c.nbctl(&["lsp-add", "sw0", lsp]);
        c.nbctl(&["lsp-set-addresses", lsp, &addr]);
    }
    let hv1 = Ovs::ovn_chassis(&f, 0, &dir, "hv1", &c.sb_remote());
    hv1.vif(&f, "vif0", "lsp-hv1", HV1_VIF, "10.0.0.1/24", 1500);
    let id = std::process::id() % 10000;
    let (ta, tb, tm) = (
        format!("vov3{id}a"),
        format!("vov3{id}b"),
        format!("vov3{id}m"),
    );
    let mut ports: Vec<String> = tap("ta", &ta, "lsp-a").into();
    ports.extend(tap("tm", &tm, "lsp-m"));
    let hv2 = Vswitchd::start_in(
        Some(&f.ns[1]),
        &dir,
        "hv2",
        &chassis_args(&f, 1, &c, "hv2", &ports),
    );
    let hv3 = Vswitchd::start_in(
        Some(&f.ns[2]),
        &dir,
        "hv3",
        &chassis_args(&f, 2, &c, "hv3", &tap("tb", &tb, "lsp-b")),
    );
    tap_up(&f, 1, &ta, TAP_MAC, "10.0.0.2/24");
    tap_up(&f, 2, &tb, TAP_B_MAC, "10.0.0.3/24");
    let vm = format!("{}-vm", f.ns[0]);
    run(&["ip", "netns", "add", &vm]);
    let _vm = Netns(vm.clone());
    into_vm(&f.ns[1], &tm, &vm);
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    for (k, ip) in [
        (0, "10.0.0.2"),
        (0, "10.0.0.3"),
        (1, "10.0.0.3"),
        (0, MOVED_IP),
    ] {
        assert!(ping_ok(&f.ns[k], ip, 20), "{} -> {ip}", f.ns[k]);
    }
    eprintln!("[{:>6.1?}] three chassis up", t0.elapsed());

    // Broadcasts: BCASTS from each chassis' port, each marked with its sender, counted
    // at every receiving host's bridge port by the Geneve frame's outer addresses.
    let mut caps: Vec<Capture> = (0..3).map(|k| Capture::start(&f, k, &dir)).collect();
    let senders = [
        (0, "vif0", HV1_VIF, "BC-hv1"),
        (1, ta.as_str(), TAP_MAC, "BC-hv2"),
        (2, tb.as_str(), TAP_B_MAC, "BC-hv3"),
    ];
    for (k, iface, mac, marker) in senders {
        send_broadcasts(&f.ns[k], iface, mac, marker, BCASTS);
    }
    // A round trip on every path after the broadcasts: the switches have forwarded
    // them (each forwards in order).
    for (k, ip) in [
        (0, "10.0.0.2"),
        (0, "10.0.0.3"),
        (1, "10.0.0.3"),
        (2, "10.0.0.1"),
    ] {
        assert!(
            ping_ok(&f.ns[k], ip, 10),
            "{} -> {ip} after the broadcasts",
            f.ns[k]
        );
    }
    for cap in &mut caps {
        cap.stop();
    }
    for (k, _, _, marker) in senders {
        for (r, cap) in caps.iter().enumerate().filter(|(r, _)| *r != k) {
            let filter = format!(
                "ip.src == {} && ip.dst == {} && frame contains \"{marker}\"",
                f.addr(k),
                f.addr(r)
            );
            let n = cap.fields(&filter, &["frame.number"]).len();
            eprintln!("  {marker}: {n} Geneve frames to {}", f.addr(r));
            assert_eq!(
                n, BCASTS,
                "{marker} to host {r}: each broadcast exactly once"
            );
        }
    }

    // The moved port: deleted on hv2, added on hv3 (the "VM" namespace keeps its MAC
    // and address); then pings from hv1 and from hv2, each until the first answer.
    assert!(ping_ok(&f.ns[0], MOVED_IP, 5), "before the move");
    let hv3_uuid = c.sb_get("Chassis", "name", "hv3", "_uuid");
    let moved = Instant::now();
    let o = vswitchctl_out(&hv2.control, &["del-port", "tm"]);
    assert!(o.status.success(), "{o:?}");
    let spec = format!("tm={tm},iface_id=lsp-m");
    let o = vswitchctl_out(&hv3.control, &["add-port", "--tap", &spec]);
    assert!(o.status.success(), "{o:?}");
    into_vm(&f.ns[2], &tm, &vm);
    wait_for(Duration::from_secs(30), "lsp-m up on hv3", || {
        let up = c.sb_get("Port_Binding", "logical_port", "lsp-m", "up") == "true";
        let on = c.sb_get("Port_Binding", "logical_port", "lsp-m", "chassis") == hv3_uuid;
        (up && on).then_some(())
    });
    let up = Instant::now();
    let up_after = moved.elapsed();
    let pingers: Vec<_> = [
        ("hv1 (OVS)", f.ns[0].clone()),
        ("hv2 (vswitchd)", f.ns[1].clone()),
    ]
    .into_iter()
    .map(|(who, ns)| {
        let t =
            std::thread::spawn(move || first_answer(&ns, MOVED_IP, up, Duration::from_secs(10)));
        (who, t)
    })
    .collect();
    for (who, t) in pingers {
        let resumed = t
            .join()
            .unwrap()
            .unwrap_or_else(|| panic!("{who}: no answer from the moved port"));
        eprintln!(
            "[{:>6.1?}] moved port: up on hv3 {up_after:?} after the move; pings from {who} answered {resumed:?} after up",
            t0.elapsed()
        );
        assert!(
            resumed < Duration::from_secs(1),
            "{who}: resumed {resumed:?} after up"
        );
    }
    drop(hv3);
    drop(hv2);
}
