//! OVN's multi-chassis port binding (issue 28 §3), in a real OVN deployment: **hv1**
//! is Open vSwitch + ovn-controller, **hv2** and **hv3** are vswitchd, each of these
//! two with a tap that is logical port `lsp-m` (one "VM" in two places, as during a
//! live migration). The migration runs as a cloud drives it:
//!
//! 1. `requested-chassis=hv2`: hv2 binds the port;
//! 2. `requested-chassis=hv2,hv3`, `activation-strategy=rarp`: hv2 keeps `chassis`,
//!    hv3 joins `additional_chassis`. Frames to the port go to both chassis (from
//!    Open vSwitch and from vswitchd, on the wire), but hv3 blocks the port: nothing
//!    from it but RARP, nothing to it;
//! 3. the port's RARP on hv3: hv3 marks the binding activated
//!    (`additional-chassis-activated=hv3`) and delivers to it;
//! 4. `requested-chassis=hv3`: hv3 is the main chassis, hv2 lets go; the VM answers
//!    from hv3.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::chassis::*;
use common::fabric::{tunnels, Capture, Fabric};
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::*;

/// Frames per check.
const N: u32 = 10;

/// Sends the RARP QEMU announces a migrated VM with (RFC 903 request, from and for
/// `mac`) out of `iface` in namespace `ns`.
fn send_rarp(ns: &str, iface: &str, mac: &str) {
    let script = format!(
        "from scapy.all import Ether,ARP,sendp\n\
         sendp(Ether(src='{mac}',dst='ff:ff:ff:ff:ff:ff',type=0x8035)/ARP(op=3,hwsrc='{mac}',hwdst='{mac}',psrc='0.0.0.0',pdst='0.0.0.0'),iface='{iface}',verbose=False)"
    );
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "/usr/bin/python3", "-c", &script])
        .output()
        .expect("python3-scapy");
    assert!(o.status.success(), "scapy: {o:?}");
}

/// `Port_Binding` column `col` of `lsp-m`, chassis names for references.
fn binding(c: &OvnCentral, col: &str) -> String {
    binding_chassis(c, "lsp-m", col)
}

/// Tunnel drops of `sw` for `reason`.
fn tunnel_drop(sw: &Vswitchd, reason: &str) -> u64 {
    tunnels(sw)
        .iter()
        .map(|t| t.drops.get(reason).copied().unwrap_or(0))
        .sum()
}

#[test]
fn a_port_bound_on_two_chassis_moves_on_its_rarp() {
    migrate(Forwarding::L2);
}

/// The same in a switch with a security group, which vswitchd runs through OVN's
/// logical pipeline: the pipeline's outputs to the port go to both chassis, and hv3's
/// pipeline delivers nothing to the port, nor takes anything from it, until its RARP.
#[test]
fn a_port_bound_on_two_chassis_moves_on_its_rarp_in_a_switch_that_runs_the_pipeline() {
    migrate(Forwarding::Pipeline);
}

/// Frames to the blocked port that hv3 dropped: by the tunnel's OVN option (L2 rules),
/// or by the egress pipeline's output to a port not active here (counted on the uplink
/// the tunnel came in by).
fn dropped_to_blocked(hv3: &Vswitchd, s: Forwarding) -> u64 {
    match s {
        Forwarding::L2 => tunnel_drop(hv3, "ovn_not_here"),
        Forwarding::Pipeline => drops(hv3, "u", "no_destination"),
    }
}

fn migrate(s: Forwarding) {
    let _g = serial();
    setup_host();
    let t0 = Instant::now();
    let f = Fabric::new("omc", 3, 1600);
    let dir = TempDir::new("ovn-multi");
    let c = OvnCentral::start(&dir);
    c.nbctl(&["ls-add", "sw0"]);
    s.prepare(&c, "sw0");
    for (lsp, addr) in [
        ("lsp-hv1", format!("{HV1_VIF} 10.0.0.1")),
        ("lsp-m", format!("{VM_MAC} 10.0.0.2")),
        ("lsp-a", format!("{TAP_MAC} 10.0.0.3")),
    ] {
        c.nbctl(&["lsp-add", "sw0", lsp]);
        c.nbctl(&["lsp-set-addresses", lsp, &addr]);
    }
    c.nbctl(&["lsp-set-options", "lsp-m", "requested-chassis=hv2"]);
    let hv1 = Ovs::ovn_chassis(&f, 0, &dir, "hv1", &c.sb_remote());
    hv1.vif(&f, "vif0", "lsp-hv1", HV1_VIF, "10.0.0.1/24", 1500);
    let id = std::process::id() % 10000;
    let (tm2, tm3, ta) = (
        format!("vomc{id}m2"),
        format!("vomc{id}m3"),
        format!("vomc{id}a"),
    );
    let mut ports2: Vec<String> = tap("m", &tm2, "lsp-m").into();
    ports2.extend(tap("a", &ta, "lsp-a"));
    let hv2 = Vswitchd::start_in(
        Some(&f.ns[1]),
        &dir,
        "hv2",
        &chassis_args(&f, 1, &c, "hv2", &ports2),
    );
    let hv3 = Vswitchd::start_in(
        Some(&f.ns[2]),
        &dir,
        "hv3",
        &chassis_args(&f, 2, &c, "hv3", &tap("m", &tm3, "lsp-m")),
    );
    tap_up(&f, 1, &tm2, VM_MAC, "10.0.0.2/24");
    tap_up(&f, 1, &ta, TAP_MAC, "10.0.0.3/24");
    // The VM on hv3 has no address until it "runs" there (after the switch-over).
    f.exec(
        &f.ns[2],
        &[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{tm3}.disable_ipv6=1"),
        ],
    );
    f.exec(&f.ns[2], &["ip", "link", "set", &tm3, "address", VM_MAC]);
    f.exec(&f.ns[2], &["ip", "link", "set", &tm3, "up"]);
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    assert_eq!(binding(&c, "chassis"), "hv2");
    assert!(ping_ok(&f.ns[0], "10.0.0.2", 20), "hv1 -> the VM on hv2");
    assert!(!ovn_port(&hv3, "m").bound, "hv3: not requested yet");
    let key: u16 = c
        .sb_get("Port_Binding", "logical_port", "lsp-m", "tunnel_key")
        .parse()
        .unwrap();

    // 2. The migration starts: both chassis hold the binding.
    c.nbctl(&[
        "lsp-set-options",
        "lsp-m",
        "requested-chassis=hv2,hv3",
        "activation-strategy=rarp",
    ]);
    wait_for(Duration::from_secs(20), "hv3 in additional_chassis", || {
        (binding(&c, "additional_chassis") == "hv3").then_some(())
    });
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    assert_eq!(binding(&c, "chassis"), "hv2", "hv2 stays the main chassis");
    let row = ovn_port(&hv3, "m");
    assert!(row.bound, "{row:?}");
    assert_eq!(row.role, "additional, awaiting RARP");
    let (hv1_ip, hv2_ip, hv3_ip) = (f.addr(0), f.addr(1), f.addr(2));
    // Open vSwitch and vswitchd send to both places.
    let mut from_hv1 = Capture::start(&f, 0, &dir);
    let mut from_hv2 = Capture::start(&f, 1, &dir);
    let not_here0 = dropped_to_blocked(&hv3, s);
    let pipeline0 = drops(&hv3, "u", "ovn_pipeline");
    send_frames(&f.ns[0], "vif0", HV1_VIF, VM_MAC, N);
    send_frames(&f.ns[1], &ta, TAP_MAC, VM_MAC, N);
    assert!(ping_ok(&f.ns[0], "10.0.0.2", 10), "a round trip after them");
    from_hv1.stop();
    from_hv2.stop();
    for (cap, src, dst, who) in [
        (&from_hv1, &hv1_ip, &hv2_ip, "OVS -> hv2"),
        (&from_hv1, &hv1_ip, &hv3_ip, "OVS -> hv3"),
        (&from_hv2, &hv2_ip, &hv3_ip, "vswitchd hv2 -> hv3"),
    ] {
        let keys = egress_keys(cap, src, dst, VM_MAC);
        let to_port = keys.iter().filter(|&&k| k == key).count();
        assert!(
            to_port >= N as usize,
            "{who}: {to_port} frames to the port's key {key} ({keys:?})"
        );
    }
    // hv3 delivers none of them, and lets nothing but RARP out of the port.
    assert!(
        dropped_to_blocked(&hv3, s) >= not_here0 + 2 * u64::from(N),
        "hv3 dropped the frames to its blocked port: uplink drops {:?}, tunnels {:?}",
        hv3.port("u").stats.drops,
        tunnels(&hv3)
    );
    assert_eq!(
        drops(&hv3, "u", "ovn_pipeline"),
        pipeline0,
        "each dropped frame counted once, as no_destination"
    );
    assert_eq!(
        hv3.port("m").stats.tx_packets,
        0,
        "nothing reached the blocked VM"
    );
    send_frames(&f.ns[2], &tm3, VM_MAC, HV1_VIF, N);
    wait_for(Duration::from_secs(5), "the blocked frames counted", || {
        (drops(&hv3, "m", "ovn_not_activated") == u64::from(N)).then_some(())
    });
    eprintln!(
        "[{:>6.1?}] both chassis hold the binding; frames to it reach both, hv3 blocks it",
        t0.elapsed()
    );

    // 3. The RARP on hv3 activates the port there.
    send_rarp(&f.ns[2], &tm3, VM_MAC);
    let rarp = Instant::now();
    wait_for(
        Duration::from_secs(10),
        "additional-chassis-activated",
        || {
            let o = c.sbctl(&[
                "--if-exists",
                "get",
                "port_binding",
                &c.sb_get("Port_Binding", "logical_port", "lsp-m", "_uuid"),
                "options:additional-chassis-activated",
            ]);
            (o.trim().trim_matches('"') == "hv3").then_some(())
        },
    );
    let activated = rarp.elapsed();
    assert_eq!(ovn_port(&hv3, "m").role, "additional");
    // The VM now runs on hv3: its address moves there.
    f.exec(&f.ns[1], &["ip", "addr", "flush", "dev", &tm2]);
    f.exec(&f.ns[2], &["ip", "addr", "add", "10.0.0.2/24", "dev", &tm3]);
    let moved = Instant::now();
    let answered = first_answer(&f.ns[0], "10.0.0.2", moved, Duration::from_secs(10))
        .expect("hv1 -> the VM on hv3");
    assert!(hv3.port("m").stats.tx_packets > 0);
    eprintln!(
        "[{:>6.1?}] activated in the database within {activated:?} of the RARP; the VM answers from hv3 {answered:?} after it moved",
        t0.elapsed()
    );

    // 4. The migration ends: hv3 is the main chassis, hv2 lets go.
    c.nbctl(&["lsp-set-options", "lsp-m", "requested-chassis=hv3"]);
    wait_for(Duration::from_secs(20), "hv3 the main chassis", || {
        (binding(&c, "chassis") == "hv3" && binding(&c, "additional_chassis").is_empty())
            .then_some(())
    });
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    assert!(!ovn_port(&hv2, "m").bound, "hv2 let go");
    assert_eq!(ovn_port(&hv3, "m").role, "main");
    let mut from_hv1 = Capture::start(&f, 0, &dir);
    assert!(ping_ok(&f.ns[0], "10.0.0.2", 10), "hv1 -> the VM on hv3");
    assert!(
        ping_ok(&f.ns[1], "10.0.0.2", 10),
        "hv2's other port -> the VM on hv3"
    );
    from_hv1.stop();
    assert!(
        egress_keys(&from_hv1, &hv1_ip, &hv2_ip, VM_MAC).is_empty(),
        "after the migration nothing goes to hv2"
    );
    s.assert_ran(&hv2, "hv2");
    s.assert_ran(&hv3, "hv3");
    eprintln!("[{:>6.1?}] hv3 holds the binding alone", t0.elapsed());
}
