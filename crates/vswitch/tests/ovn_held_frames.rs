//! Frames held for a router's next hop (issue 39 §2, "the slow path"), in a real OVN
//! deployment: one vswitchd chassis, networks `sw0` and `sw1` joined by router `lr0`;
//! `vma` on `sw0` with its addresses, `vmb` on `sw1` with `unknown` addresses, so the
//! router knows vmb's MAC only once it has asked (`arp{}`, `nd_ns{}`) and the answer's
//! `put_arp`/`put_nd` is written to `MAC_Binding` and read back.
//!
//! - The first ping across the router, IPv4 and IPv6, is answered: the frame that made
//!   the router ask is held and sent again once the binding is in the pipeline (as
//!   ovn-controller's pinctrl buffers it); without that it is lost.
//! - A frame for a next hop that never answers is dropped after the hold time, and
//!   every frame held is accounted for in `vswitchctl ovn`'s slow path counters.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::chassis::*;
use common::fabric::Fabric;
use common::ovn::OvnCentral;
use common::*;
use vswitch::control::protocol::OvnSlowPathRow;

/// (switch, router port MAC, IPv4, IPv6) of each of lr0's ports.
const ROUTER: [(&str, &str, &str, &str); 2] = [
    ("sw0", "00:00:00:00:ff:01", "10.0.0.1", "2001:db8::1"),
    ("sw1", "00:00:00:00:ff:02", "10.0.1.1", "2001:db8:1::1"),
];

/// (port, switch, MAC, IPv4, IPv6, whether OVN is told the addresses).
const VMS: [(&str, &str, &str, &str, &str, bool); 2] = [
    (
        "vma",
        "sw0",
        "50:54:00:00:00:0a",
        "10.0.0.11",
        "2001:db8::11",
        true,
    ),
    (
        "vmb",
        "sw1",
        "50:54:00:00:00:0b",
        "10.0.1.14",
        "2001:db8:1::14",
        false,
    ),
];

/// Builds sw0, sw1 and lr0 in `c`'s Northbound database.
fn build(c: &OvnCentral) {
    c.nbctl(&[
        "ls-add", "sw0", "--", "ls-add", "sw1", "--", "lr-add", "lr0",
    ]);
    for (sw, mac, ip4, ip6) in ROUTER {
        let (lrp, lsp) = (format!("lr0-{sw}"), format!("{sw}-lr0"));
        let (v4, v6) = (format!("{ip4}/24"), format!("{ip6}/64"));
        c.nbctl(&["lrp-add", "lr0", &lrp, mac, &v4, &v6]);
        c.attach_router(sw, &lsp, &lrp);
    }
    for (name, sw, mac, ip4, ip6, known) in VMS {
        let addrs = if known {
            format!("{mac} {ip4} {ip6}")
        } else {
            "unknown".to_string()
        };
        c.add_vif(sw, name, &addrs);
    }
}

/// Moves tap `tap` of namespace `from` into a new namespace `ns` as VM `vm`: its MAC,
/// both addresses, default routes through the router.
fn vm_ns(from: &str, tap: &str, ns: &str, vm: (&str, &str, &str, &str, &str, bool)) -> Netns {
    let (_, sw, mac, ip4, ip6, _) = vm;
    run(&["ip", "netns", "add", ns]);
    let n = Netns(ns.to_string());
    run(&["ip", "-n", from, "link", "set", tap, "netns", ns]);
    let r = ROUTER.iter().find(|r| r.0 == sw).unwrap();
    let (v4, v6) = (format!("{ip4}/24"), format!("{ip6}/64"));
    for args in [
        vec!["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"],
        vec!["ip", "link", "set", "lo", "up"],
        vec!["ip", "link", "set", tap, "address", mac],
        vec!["ip", "link", "set", tap, "up"],
        vec!["ip", "addr", "add", &v4, "dev", tap],
        vec!["ip", "addr", "add", &v6, "dev", tap, "nodad"],
        vec!["ip", "route", "add", "default", "via", r.2],
        vec!["ip", "-6", "route", "add", "default", "via", r.3],
    ] {
        let mut a = vec!["ip", "netns", "exec", ns];
        a.extend(args);
        run(&a);
    }
    n
}

/// One ping from `ns` to `ip`, waiting up to `secs` for its answer.
fn one_ping(ns: &str, ip: &str, secs: u32) -> bool {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "ping",
            "-c",
            "1",
            "-W",
            &secs.to_string(),
            ip,
        ])
        .output()
        .unwrap()
        .status
        .success()
}

fn slow(sw: &Vswitchd) -> OvnSlowPathRow {
    ovn(sw).slow_path
}

/// The MAC_Binding rows for `ip`, as `logical_port mac` lines.
fn bindings(c: &OvnCentral, ip: &str) -> String {
    let cond = format!("ip=\"{ip}\"");
    c.sbctl(&[
        "--bare",
        "--columns=logical_port,mac",
        "find",
        "MAC_Binding",
        &cond,
    ])
}

#[test]
fn the_first_frame_to_a_new_next_hop_is_held_until_it_answers() {
    let _g = serial();
    setup_host();
    let t0 = Instant::now();
    let f = Fabric::new("ohf", 1, 1600);
    let dir = TempDir::new("ovn-held");
    let c = OvnCentral::start(&dir);
    build(&c);
    let id = std::process::id() % 10000;
    let taps: Vec<String> = VMS.iter().map(|v| format!("ht{id}{}", &v.0[2..])).collect();
    let mut ports = Vec::new();
    for (vm, t) in VMS.iter().zip(&taps) {
        ports.extend(tap(vm.0, t, vm.0));
    }
    ports.extend(["--metrics".to_string(), "127.0.0.1:9479".to_string()]);
    let sw = Vswitchd::start_in(
        Some(&f.ns[0]),
        &dir,
        "hv1",
        &chassis_args(&f, 0, &c, "hv1", &ports),
    );
    let nss: Vec<Netns> = VMS
        .iter()
        .zip(&taps)
        .map(|(vm, t)| vm_ns(&f.ns[0], t, &format!("{}-{}", f.ns[0], vm.0), *vm))
        .collect();
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);
    for vm in VMS {
        wait_for(Duration::from_secs(30), &format!("{} up", vm.0), || {
            (c.sb_get("Port_Binding", "logical_port", vm.0, "up") == "true").then_some(())
        });
    }
    eprintln!("[{:>6.1?}] up", t0.elapsed());
    let vma = &nss[0].0;
    let (vmb_mac, vmb4, vmb6) = (VMS[1].2, VMS[1].3, VMS[1].4);

    // vma reaches its gateway first (the chassis has built the router, vma has its
    // gateway's MAC): on a loaded machine the first ping below was once lost before the
    // router, with nothing held or made. The router's own answers need no slow path.
    for gw in [ROUTER[0].2, ROUTER[0].3] {
        wait_for(
            Duration::from_secs(30),
            &format!("lr0 answers {gw}"),
            || one_ping(vma, gw, 1).then_some(()),
        );
    }
    // The router has no binding for vmb: the first ping makes it ask, and is held.
    for ip in [vmb4, vmb6] {
        assert_eq!(bindings(&c, ip).trim(), "", "no binding for {ip} yet");
        let before = slow(&sw);
        // 10 s: the echo waits for two slow-path round trips (the router's ARP for vmb,
        // then possibly for vma) on a loaded CI machine.
        assert!(
            one_ping(vma, ip, 10),
            "the first ping to {ip} is answered; slow path {before:?} -> {:?}\nvswitchd log:\n{}",
            slow(&sw),
            tail(&sw.log(), 4000)
        );
        let after = slow(&sw);
        assert!(
            after.held > before.held,
            "{ip}: held ({before:?} -> {after:?})"
        );
        assert!(
            after.released > before.released,
            "{ip}: released ({before:?} -> {after:?})"
        );
        let b = bindings(&c, ip);
        assert!(
            b.contains("lr0-sw1") && b.contains(vmb_mac),
            "{ip}: learned {b:?}"
        );
        eprintln!("[{:>6.1?}] first ping to {ip} answered", t0.elapsed());
    }

    // A next hop that never answers: its frame waits, then is dropped and counted.
    let silent = "10.0.1.99";
    let before = slow(&sw);
    assert!(!one_ping(vma, silent, 1), "nobody has {silent}");
    let held = wait_for(Duration::from_secs(5), "the frame to .99 held", || {
        let s = slow(&sw);
        (s.held > before.held).then_some(s)
    });
    let expired = wait_for(Duration::from_secs(20), "the frame to .99 expired", || {
        let s = slow(&sw);
        (s.expired > before.expired).then_some(s)
    });
    assert_eq!(expired.released, held.released, "nothing released for .99");
    assert_eq!(expired.orphaned, 0);
    // Every frame held is released, expired or overflowed (nothing is held now).
    assert_eq!(
        expired.held,
        expired.released + expired.expired + expired.overflowed,
        "{expired:?}"
    );
    let scrape = "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9479/metrics').read().decode())";
    let metrics = f.exec(&f.ns[0], &["/usr/bin/python3", "-c", scrape]);
    for (what, n) in [("held", expired.held), ("expired", expired.expired)] {
        let want = format!("vswitch_ovn_slow_path_frames_total{{what=\"{what}\"}} {n}");
        assert!(metrics.contains(&want), "{want} in /metrics:\n{metrics}");
    }
    eprintln!("[{:>6.1?}] {expired:?}", t0.elapsed());
    drop(nss);
}
