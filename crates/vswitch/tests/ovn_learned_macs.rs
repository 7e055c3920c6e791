//! MACs learned behind OVN ports with `unknown` addresses (issue 28 §2), in a real OVN
//! deployment: **hv1** = Open vSwitch + ovn-controller, **hv2** = vswitchd, each with
//! a port that has `unknown` addresses and no port security (a "router" VM with many
//! MACs behind it).
//!
//! - vswitchd learns the source MACs seen from its `unknown` port and writes them to
//!   the Southbound `FDB` table; hv1's first frame to such a MAC goes to `_MC_unknown`,
//!   the frames after the row exists go by unicast to the port's key (on the wire).
//! - ovn-controller's rows for MACs behind hv1's `unknown` port are read back: vswitchd
//!   sends to them by unicast to that port's key, not to `_MC_unknown`.
//! - The rows go with their port (`lsp-del`), and with them vswitchd's entries (the
//!   static ones from the rows, and what the unbound port had learned).

mod common;

use std::time::{Duration, Instant};

use common::chassis::*;
use common::fabric::{Capture, Fabric};
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::*;
use vswitch::control::protocol::{FdbRowNamed, Request, Response};

/// MACs behind vswitchd's "router" port.
const BEHIND_HV2: [&str; 4] = [
    "0a:00:00:00:02:01",
    "0a:00:00:00:02:02",
    "0a:00:00:00:02:03",
    "0a:00:00:00:02:04",
];
/// A MAC behind Open vSwitch's "router" port.
const BEHIND_HV1: &str = "0a:00:00:00:01:07";
/// Frames per check.
const N: u32 = 10;

/// `vswitchctl fdb` of `sw`.
fn fdb(sw: &Vswitchd) -> Vec<FdbRowNamed> {
    match ctl(&sw.control, Request::Fdb).expect("fdb") {
        Response::Fdb(rows) => rows,
        other => panic!("{other:?}"),
    }
}

/// The MACs of the Southbound `FDB` rows of port key `key` (the router VMs' MACs, and
/// whatever their own interfaces sent from).
fn fdb_rows(c: &OvnCentral, key: &str) -> Vec<String> {
    let out = c.sbctl(&[
        "--bare",
        "--columns=mac",
        "find",
        "FDB",
        &format!("port_key={key}"),
    ]);
    let mut macs: Vec<String> = out.split_whitespace().map(str::to_string).collect();
    macs.sort();
    macs
}

#[test]
fn learned_macs_go_through_the_southbound_fdb() {
    let _g = serial();
    setup_host();
    let t0 = Instant::now();
    let f = Fabric::new("ovf", 2, 1600);
    let dir = TempDir::new("ovn-fdb");
    let c = OvnCentral::start(&dir);
    c.nbctl(&["ls-add", "sw0"]);
    for (lsp, addr) in [
        ("lsp-hv1", format!("{HV1_VIF} 10.0.0.1")),
        ("lsp-hv1-r", "unknown".to_string()),
        ("lsp-a", format!("{TAP_MAC} 10.0.0.2")),
        ("lsp-r", "unknown".to_string()),
    ] {
        c.nbctl(&["lsp-add", "sw0", lsp]);
        c.nbctl(&["lsp-set-addresses", lsp, &addr]);
    }
    let hv1 = Ovs::ovn_chassis(&f, 0, &dir, "hv1", &c.sb_remote());
    hv1.vif(&f, "vif0", "lsp-hv1", HV1_VIF, "10.0.0.1/24", 1500);
    hv1.vif(&f, "vif1", "lsp-hv1-r", HV1_VIF_B, "10.0.0.11/24", 1500);
    // vif1 only sends crafted frames: no address to answer ARP for.
    f.exec(&f.ns[0], &["ip", "addr", "flush", "dev", "vif1"]);
    let id = std::process::id() % 10000;
    let (ta, tr) = (format!("vovf{id}a"), format!("vovf{id}r"));
    let mut ports: Vec<String> = tap("ta", &ta, "lsp-a").into();
    ports.extend(tap("tr", &tr, "lsp-r"));
    let sw = Vswitchd::start_in(
        Some(&f.ns[1]),
        &dir,
        "hv2",
        &chassis_args(&f, 1, &c, "hv2", &ports),
    );
    tap_up(&f, 1, &ta, TAP_MAC, "10.0.0.2/24");
    let v6 = format!("net.ipv6.conf.{tr}.disable_ipv6=1");
    f.exec(&f.ns[1], &["sysctl", "-qw", &v6]);
    f.exec(&f.ns[1], &["ip", "link", "set", &tr, "up"]);
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    assert!(ping_ok(&f.ns[1], "10.0.0.1", 20), "hv2 -> hv1");
    let key_r = c.sb_get("Port_Binding", "logical_port", "lsp-r", "tunnel_key");
    let key_hv1_r = c.sb_get("Port_Binding", "logical_port", "lsp-hv1-r", "tunnel_key");
    let (hv1_ip, hv2_ip) = (f.addr(0), f.addr(1));

    // hv1 -> a MAC behind hv2's router port: the first frame to _MC_unknown.
    let mut cap = Capture::start(&f, 1, &dir);
    send_frames(&f.ns[0], "vif0", HV1_VIF, BEHIND_HV2[0], 1);
    assert!(ping_ok(&f.ns[0], "10.0.0.2", 10), "a round trip after it");
    cap.stop();
    assert_eq!(
        egress_keys(&cap, &hv1_ip, &hv2_ip, BEHIND_HV2[0]),
        vec![0x8001],
        "an unlearned MAC: _MC_unknown"
    );
    // The router VM speaks from its MACs: vswitchd learns them and writes FDB rows.
    for m in BEHIND_HV2 {
        send_frames(&f.ns[1], &tr, m, "ff:ff:ff:ff:ff:ff", 1);
    }
    let learned = Instant::now();
    let want: Vec<String> = BEHIND_HV2.iter().map(|m| m.to_string()).collect();
    wait_for(Duration::from_secs(10), "vswitchd's FDB rows", || {
        let rows = fdb_rows(&c, &key_r);
        want.iter().all(|m| rows.contains(m)).then_some(())
    });
    eprintln!(
        "[{:>6.1?}] {} FDB rows written, the last {:?} after the router VM's last frame",
        t0.elapsed(),
        want.len(),
        learned.elapsed()
    );
    // ovn-controller installs them (its table of FDB lookups) ...
    wait_for(Duration::from_secs(20), "hv1's flows for the rows", || {
        let flows = hv1.ofctl(&["dump-flows", "br-int"]);
        BEHIND_HV2.iter().all(|m| flows.contains(m)).then_some(())
    });
    // ... and sends to them by unicast to the router port's key, delivered to it.
    let tx0 = sw.port("tr").stats.tx_packets;
    let mut cap = Capture::start(&f, 1, &dir);
    for m in BEHIND_HV2 {
        send_frames(&f.ns[0], "vif0", HV1_VIF, m, N);
    }
    assert!(ping_ok(&f.ns[0], "10.0.0.2", 10), "a round trip after them");
    cap.stop();
    let key: u16 = key_r.parse().unwrap();
    for m in BEHIND_HV2 {
        assert_eq!(
            egress_keys(&cap, &hv1_ip, &hv2_ip, m),
            vec![key; N as usize],
            "to {m}: unicast to lsp-r (key {key})"
        );
    }
    let delivered = sw.port("tr").stats.tx_packets - tx0;
    assert!(
        delivered >= u64::from(N) * 4,
        "{delivered} frames delivered to the router port"
    );

    // The other way: a MAC behind hv1's router port, learned by ovn-controller.
    send_frames(&f.ns[0], "vif1", BEHIND_HV1, "ff:ff:ff:ff:ff:ff", 1);
    wait_for(Duration::from_secs(20), "ovn-controller's FDB row", || {
        fdb_rows(&c, &key_hv1_r)
            .contains(&BEHIND_HV1.to_string())
            .then_some(())
    });
    wait_for(Duration::from_secs(10), "the row in vswitchd's FDB", || {
        fdb(&sw).iter().any(|r| r.mac == BEHIND_HV1).then_some(())
    });
    let mut cap = Capture::start(&f, 1, &dir);
    send_frames(&f.ns[1], &ta, TAP_MAC, BEHIND_HV1, N);
    assert!(ping_ok(&f.ns[1], "10.0.0.1", 10), "a round trip after them");
    cap.stop();
    let key: u16 = key_hv1_r.parse().unwrap();
    assert_eq!(
        egress_keys(&cap, &hv2_ip, &hv1_ip, BEHIND_HV1),
        vec![key; N as usize],
        "vswitchd -> {BEHIND_HV1}: unicast to lsp-hv1-r (key {key})"
    );
    eprintln!(
        "[{:>6.1?}] both ways by unicast to the learned MACs' ports",
        t0.elapsed()
    );

    // The rows go with their ports, and vswitchd's entries with them.
    c.nbctl(&["--wait=sb", "lsp-del", "lsp-r"]);
    c.nbctl(&["--wait=sb", "lsp-del", "lsp-hv1-r"]);
    wait_for(Duration::from_secs(20), "the rows deleted", || {
        (fdb_rows(&c, &key_r).is_empty() && fdb_rows(&c, &key_hv1_r).is_empty()).then_some(())
    });
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    wait_for(Duration::from_secs(10), "vswitchd's entries gone", || {
        let rows = fdb(&sw);
        let gone = |m: &str| !rows.iter().any(|r| r.mac == m);
        (gone(BEHIND_HV1) && BEHIND_HV2.iter().all(|m| gone(m))).then_some(())
    });
    eprintln!(
        "[{:>6.1?}] rows and entries gone with the ports",
        t0.elapsed()
    );
}
