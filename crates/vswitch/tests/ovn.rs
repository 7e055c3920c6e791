//! vswitchd as an OVN chassis beside an Open vSwitch chassis, in one real OVN
//! deployment: the OVN central (NB and SB `ovsdb-server`, `ovn-northd`) in the test's
//! temporary directory, **hv1** = Open vSwitch (userspace datapath) + ovn-controller in
//! one network namespace, **hv2** = vswitchd (AF_XDP uplink, Geneve endpoint) in
//! another, with two taps and a QEMU VM (TCG). The logical network is made with
//! `ovn-nbctl` only; no tunnel, VNI or MAC is configured on either switch by hand.
//! The underlay is a 1600-byte-MTU bridge (198.51.100.0/24), captured with tshark.

mod common;

use std::time::{Duration, Instant};

use common::chassis::*;
use common::fabric::{tunnels, Capture, Fabric};
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::qemu::{kv, num, Vm, VmSpec};
use common::*;

/// hv2's vswitchd: taps `t0` (sw0), `t1` (sw1), the VM's port `vm` (sw0), metrics.
fn hv2_args(
    f: &Fabric,
    dir: &TempDir,
    c: &OvnCentral,
    taps: &[String; 2],
    extra: &[&str],
) -> Vec<String> {
    let mut ports: Vec<String> = tap("t0", &taps[0], "lsp-tap").into();
    ports.extend(tap("t1", &taps[1], "lsp-tap-b"));
    ports.extend([
        "--vhost-user".into(),
        format!("vm={},iface_id=lsp-vm", dir.path("vm.sock").display()),
        "--metrics".into(),
        "127.0.0.1:9478".into(),
    ]);
    ports.extend(extra.iter().map(|s| s.to_string()));
    chassis_args(f, 1, c, "hv2", &ports)
}

/// Gives hv2's taps their MACs and addresses (sw0: 10.0.0.2, sw1: 10.1.0.2).
fn hv2_taps(f: &Fabric, taps: &[String; 2]) {
    tap_up(f, 1, &taps[0], TAP_MAC, "10.0.0.2/24");
    tap_up(f, 1, &taps[1], TAP_B_MAC, "10.1.0.2/24");
}

#[test]
fn vswitchd_chassis_beside_an_ovs_chassis() {
    let _g = serial();
    setup_host();
    let t0 = Instant::now();
    let f = Fabric::new("ovn", 2, 1600);
    let dir = TempDir::new("ovn");
    let c = OvnCentral::start(&dir);
    // The logical network, with ovn-nbctl only.
    c.nbctl(&["ls-add", "sw0"]);
    c.nbctl(&["ls-add", "sw1"]);
    // A switch with no port on hv2: none of its rows reach vswitchd.
    c.nbctl(&["ls-add", "sw-far"]);
    for (ls, lsp, addr) in [
        (
            "sw-far",
            "lsp-far1",
            "02:00:00:00:0f:01 10.9.0.1".to_string(),
        ),
        (
            "sw-far",
            "lsp-far2",
            "02:00:00:00:0f:02 10.9.0.2".to_string(),
        ),
        ("sw0", "lsp-hv1", format!("{HV1_VIF} 10.0.0.1")),
        ("sw0", "lsp-tap", format!("{TAP_MAC} 10.0.0.2")),
        ("sw0", "lsp-vm", format!("{VM_MAC} 10.0.0.3")),
        ("sw1", "lsp-hv1-b", format!("{HV1_VIF_B} 10.1.0.1")),
        ("sw1", "lsp-tap-b", format!("{TAP_B_MAC} 10.1.0.2")),
    ] {
        c.nbctl(&["lsp-add", ls, lsp]);
        c.nbctl(&["lsp-set-addresses", lsp, &addr]);
    }
    // hv1: Open vSwitch + ovn-controller, two VIFs.
    let hv1 = Ovs::ovn_chassis(&f, 0, &dir, "hv1", &c.sb_remote());
    hv1.vif(&f, "vif0", "lsp-hv1", HV1_VIF, "10.0.0.1/24", 1500);
    hv1.vif(&f, "vif1", "lsp-hv1-b", HV1_VIF_B, "10.1.0.1/24", 1500);
    // hv2: vswitchd.
    let id = std::process::id() % 10000;
    let taps = [format!("vovn{id}a"), format!("vovn{id}b")];
    let mut sw = Vswitchd::start_in(
        Some(&f.ns[1]),
        &dir,
        "hv2",
        &hv2_args(&f, &dir, &c, &taps, &[]),
    );
    hv2_taps(&f, &taps);
    let vm = Vm::start(VmSpec::new(
        "ovnvm",
        &dir.path("vm.sock"),
        VM_MAC,
        format!(
            "vm.ip=10.0.0.3 vm.peer=10.0.0.1 vm.test=exchange vm.bytes={} vm.stay=1",
            MB << 20
        ),
    ));

    eprintln!("[{:>6.1?}] step 1", t0.elapsed());
    // 1. The Southbound database: hv2 registered with its Encap, its ports bound and up,
    //    --wait=hv returns, and ovn-controller made a tunnel to hv2.
    wait_for(Duration::from_secs(30), "hv2's ports bound and up", || {
        let up = ["lsp-tap", "lsp-tap-b", "lsp-vm"]
            .iter()
            .all(|p| c.sb_get("Port_Binding", "logical_port", p, "up") == "true");
        up.then_some(())
    });
    let hv2_uuid = c.sb_get("Chassis", "name", "hv2", "_uuid");
    for p in ["lsp-tap", "lsp-vm"] {
        assert_eq!(
            c.sb_get("Port_Binding", "logical_port", p, "chassis"),
            hv2_uuid
        );
    }
    assert_eq!(c.sb_get("Encap", "chassis_name", "hv2", "ip"), f.addr(1));
    assert_eq!(c.sb_get("Encap", "chassis_name", "hv2", "type"), "geneve");
    let other = c.sb_get("Chassis", "name", "hv2", "other_config");
    for flag in [
        "port-up-notif",
        "ct-no-masked-label",
        "mac-binding-timestamp",
        "datapath-type=netdev",
    ] {
        assert!(other.contains(flag), "{flag} in {other}");
    }
    // Empty without --ovn-cms-options, as ovn-controller publishes it.
    assert!(
        other.split_whitespace().any(|kv| kv == "ovn-cms-options="),
        "{other}"
    );
    let t = Instant::now();
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    eprintln!("ovn-nbctl --wait=hv sync returned in {:?}", t.elapsed());
    // Conditional monitoring: vswitchd holds the bindings of sw0 and sw1 (3 + 2), not
    // sw-far's; their _MC_* groups, not sw-far's.
    let monitored = ovn(&sw).monitored;
    let groups = |ls: &str| {
        let dp = c.sb_get("Datapath_Binding", "external_ids:name", ls, "_uuid");
        c.sbctl(&[
            "--bare",
            "--columns=_uuid",
            "find",
            "Multicast_Group",
            &format!("datapath={dp}"),
        ])
        .split_whitespace()
        .count() as u64
    };
    assert_eq!(monitored.get("Port_Binding"), Some(&5), "{monitored:?}");
    assert_eq!(
        monitored.get("Multicast_Group"),
        Some(&(groups("sw0") + groups("sw1"))),
        "{monitored:?} (sw-far has {})",
        groups("sw-far")
    );
    assert_eq!(
        c.sb_get("Chassis_Private", "name", "hv2", "nb_cfg"),
        c.sbctl(&["get", "SB_Global", ".", "nb_cfg"]).trim()
    );
    wait_for(
        Duration::from_secs(30),
        "ovn-controller's tunnel to hv2",
        || {
            let ports = hv1.vsctl(&[
                "--bare",
                "--columns=options",
                "find",
                "interface",
                "type=geneve",
            ]);
            ports.contains(&f.addr(1)).then_some(())
        },
    );
    let key = |lsp: &str| -> u16 {
        c.sb_get("Port_Binding", "logical_port", lsp, "tunnel_key")
            .parse()
            .unwrap()
    };
    let dp_key = |ls: &str| -> u32 {
        c.sb_get("Datapath_Binding", "external_ids:name", ls, "tunnel_key")
            .parse()
            .unwrap_or_else(|_| panic!("no datapath {ls}"))
    };
    let (sw0, sw1) = (dp_key("sw0"), dp_key("sw1"));
    let row = ovn_port(&sw, "t0");
    assert!(
        row.bound && row.vni == sw0 && row.key == key("lsp-tap"),
        "{row:?}"
    );
    assert_eq!(sw.show_port("t0")["domain"], format!("ovn datapath {sw0}"));

    eprintln!("[{:>6.1?}] step 2", t0.elapsed());
    // 2. Pings both ways, then 32 MiB each way, sha256 checked (tap <-> hv1's VIF).
    let mut cap = Capture::start(&f, 1, &dir);
    assert!(
        ping_ok(&f.ns[1], "10.0.0.1", 20),
        "hv2's tap cannot reach hv1:\n{}",
        sw.log()
    );
    assert!(
        ping_ok(&f.ns[0], "10.0.0.2", 10),
        "hv1 cannot reach hv2's tap"
    );
    // The VM's own pings to hv1 (56 and 1400 bytes, every echo answered), awaited
    // before the bulk transfers so that they measure the path, not a loaded machine.
    let pings = vm.wait_lines("RESULT ping", 2, Duration::from_secs(180));
    for l in &pings {
        let m = kv(l);
        assert_eq!(num(&m, "sent"), num(&m, "received"), "VM: {l}");
    }
    tcp_transfer(Some(&f.ns[0]), Some(&f.ns[1]), "10.0.0.1", MB);
    tcp_transfer(Some(&f.ns[1]), Some(&f.ns[0]), "10.0.0.2", MB);
    // The VM: hv1 -> VM and VM -> hv1 streams.
    assert!(ping_ok(&f.ns[0], "10.0.0.3", 10), "hv1 cannot reach the VM");
    let sent = tcp_send(&f.ns[0], "10.0.0.3", MB);
    let sink = kv(&vm.wait_lines("RESULT sink", 1, Duration::from_secs(120))[0]);
    assert_eq!(
        format!("{} {}", sink["bytes"], sink["sha256"]),
        sent,
        "hv1 -> VM"
    );
    let (_rx, mut out) = tcp_sink(&f.ns[0], "10.0.0.1");
    let blob = kv(&vm.wait_lines("RESULT blob", 1, Duration::from_secs(120))[0]);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(
        line.trim(),
        format!("{} {}", blob["bytes"], blob["sha256"]),
        "VM -> hv1"
    );
    let segmented: u64 = tunnels(&sw).iter().map(|t| t.segmented).sum();
    assert!(
        segmented > 0,
        "the VM's TSO frames were segmented into the tunnel"
    );
    eprintln!("{MB} MiB each way: tap <-> hv1 and VM <-> hv1, sha256 equal; {segmented} TSO frames segmented");
    let hv1_row = ovn(&sw)
        .other_chassis
        .into_iter()
        .find(|c| c.name == "hv1")
        .expect("hv1 among the other chassis");
    assert_eq!(hv1_row.encap_ip, f.addr(0));
    // Sent: inner frames before segmentation (a TSO frame counts once).
    assert!(
        hv1_row.tx_packets > 1_000 && hv1_row.rx_packets > 10_000,
        "{hv1_row:?}"
    );
    let scrape = "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9478/metrics').read().decode())";
    let metrics = f.exec(&f.ns[1], &["/usr/bin/python3", "-c", scrape]);
    for want in [
        "vswitch_ovn_southbound_connected 1",
        "vswitch_ovn_ports{state=\"bound\"} 3",
        "vswitch_ovn_chassis_tx_packets_total{chassis=\"hv1\"}",
    ] {
        assert!(metrics.contains(want), "{want} in /metrics:\n{metrics}");
    }

    eprintln!("[{:>6.1?}] step 3", t0.elapsed());
    // 3. On the wire: the VNI is the datapath's key (assigned by northd), OVN's option
    //    carries the ingress and egress keys; an ARP broadcast from hv2 goes to 0x8000.
    cap.stop();
    let hv2_ip = format!("ip.src == {}", f.addr(1));
    let lens = cap.fields(&format!("{hv2_ip} && geneve"), &["frame.len"]);
    let biggest = lens
        .iter()
        .filter_map(|r| r[0].parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    assert!(
        lens.len() > 1000,
        "the transfers crossed the underlay: {} frames",
        lens.len()
    );
    assert!(
        biggest <= 1614,
        "a frame of {biggest} bytes on a 1600-byte MTU underlay"
    );
    let pings_out = cap.fields(
        &format!("{hv2_ip} && icmp.type == 8 && ip.src == 10.0.0.2"),
        &["geneve.vni", "geneve.options"],
    );
    assert!(!pings_out.is_empty(), "the tap's pings were captured");
    for r in &pings_out {
        let vni = u32::from_str_radix(r[0].trim_start_matches("0x"), 16).unwrap();
        assert_eq!(vni, sw0, "VNI = sw0's tunnel key");
        assert_eq!(
            ovn_keys(&r[1]),
            Some((key("lsp-tap"), key("lsp-hv1"))),
            "{r:?}"
        );
    }
    let arps = cap.fields(
        &format!("{hv2_ip} && arp.opcode == 1 && arp.src.proto_ipv4 == 10.0.0.2"),
        &["geneve.vni", "geneve.options"],
    );
    assert!(!arps.is_empty(), "the tap's ARP request was captured");
    for r in &arps {
        assert_eq!(ovn_keys(&r[1]), Some((key("lsp-tap"), 0x8000)), "{r:?}");
    }

    eprintln!("[{:>6.1?}] step 4", t0.elapsed());
    // 4. Unknown unicast: dropped while no port has `unknown`, then to _MC_unknown
    //    (hv1's port) only. Port security drops a spoofed source.
    let d0 = drops(&sw, "t0", "ovn_unknown_unicast");
    send_frames(&f.ns[1], &taps[0], TAP_MAC, "02:00:00:00:09:99", 5);
    wait_for(Duration::from_secs(5), "unknown unicast dropped", || {
        (drops(&sw, "t0", "ovn_unknown_unicast") == d0 + 5).then_some(())
    });
    let metrics = f.exec(&f.ns[1], &["/usr/bin/python3", "-c", scrape]);
    let want = format!(
        "vswitch_port_drops_total{{port=\"t0\",reason=\"ovn_unknown_unicast\"}} {}",
        d0 + 5
    );
    assert!(metrics.contains(&want), "{want} in /metrics");
    c.nbctl(&[
        "lsp-set-addresses",
        "lsp-hv1",
        &format!("{HV1_VIF} 10.0.0.1"),
        "unknown",
    ]);
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    let vm_tx = sw.port("vm").stats.tx_packets;
    let mut cap = Capture::start(&f, 1, &dir);
    send_frames(&f.ns[1], &taps[0], TAP_MAC, "02:00:00:00:09:99", 5);
    std::thread::sleep(Duration::from_millis(500)); // the capture's tail
    cap.stop();
    let unknown = cap.fields("udp.dstport == 9", &["geneve.options"]);
    assert_eq!(
        unknown.len(),
        5,
        "unknown unicast to _MC_unknown: {unknown:?}"
    );
    for r in &unknown {
        assert_eq!(ovn_keys(&r[0]).map(|k| k.1), Some(0x8001), "{r:?}");
    }
    assert_eq!(drops(&sw, "t0", "ovn_unknown_unicast"), d0 + 5);
    assert!(
        sw.port("vm").stats.tx_packets - vm_tx < 5,
        "the VM is not in _MC_unknown"
    );
    c.nbctl(&[
        "lsp-set-port-security",
        "lsp-tap",
        &format!("{TAP_MAC} 10.0.0.2"),
    ]);
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    let s0 = drops(&sw, "t0", "spoofed_source");
    send_frames(
        &f.ns[1],
        &taps[0],
        "02:00:00:00:02:99",
        "ff:ff:ff:ff:ff:ff",
        5,
    );
    wait_for(Duration::from_secs(5), "the spoofed source dropped", || {
        (drops(&sw, "t0", "spoofed_source") == s0 + 5).then_some(())
    });
    assert!(
        ping_ok(&f.ns[1], "10.0.0.1", 10),
        "the tap's own MAC still passes"
    );

    eprintln!("[{:>6.1?}] step 7", t0.elapsed());
    // 7. sw1 is isolated from sw0: sw0's broadcasts reach no sw1 port, and the reverse.
    let t1_tx = sw.port("t1").stats.tx_packets;
    let vif1_tx: u64 = hv1.iface_stat("vif1", "tx_packets");
    send_frames(&f.ns[1], &taps[0], TAP_MAC, "ff:ff:ff:ff:ff:ff", 20);
    send_frames(&f.ns[0], "vif0", HV1_VIF, "ff:ff:ff:ff:ff:ff", 20);
    assert!(ping_ok(&f.ns[1], "10.1.0.1", 10), "sw1 works: hv2 -> hv1");
    let t1_now = sw.port("t1").stats.tx_packets;
    let vif1_now = hv1.iface_stat("vif1", "tx_packets");
    // sw1's own ping exchange moved a handful of frames; none of the 40 broadcasts.
    assert!(
        t1_now - t1_tx < 10,
        "sw0's broadcasts reached sw1's tap: {t1_tx} -> {t1_now}"
    );
    assert!(
        vif1_now - vif1_tx < 10,
        "sw0's broadcasts reached sw1's VIF: {vif1_tx} -> {vif1_now}"
    );
    assert_ne!(sw0, sw1);

    eprintln!("[{:>6.1?}] step 6", t0.elapsed());
    // 6. lsp-del of a bound port: its traffic stops and its switch's domain goes (sw1
    //    has no other port here); lsp-add again: traffic resumes, nothing restarted.
    //    sw0's traffic meanwhile is not disturbed: a 10 ms ping across the changes loses
    //    nothing.
    let drops0 = (sw.port("t0").stats.drops_total, tunnel_drops(&sw));
    let flood = ping_flood(&f.ns[1], "10.0.0.1");
    c.nbctl(&["lsp-del", "lsp-tap-b"]);
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    wait_for(Duration::from_secs(10), "t1 detached", || {
        (sw.show_port("t1")["domain"] == "none (OVN port not bound)").then_some(())
    });
    let why = ovn_port(&sw, "t1").why_unbound;
    assert!(why.contains("not in the Southbound database"), "{why}");
    let shown = sw.show_port("t1")["ovn"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        shown.contains("lsp-tap-b: not bound"),
        "show says why: {shown}"
    );
    let fdb_sw1 = sw.show()["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["domain"] == format!("ovn datapath {sw1}"))
        .count();
    assert_eq!(fdb_sw1, 0, "no port left in sw1's domain");
    assert!(!ping_ok(&f.ns[1], "10.1.0.1", 3), "traffic stopped");
    c.nbctl(&["lsp-add", "sw1", "lsp-tap-b"]);
    c.nbctl(&[
        "lsp-set-addresses",
        "lsp-tap-b",
        &format!("{TAP_B_MAC} 10.1.0.2"),
    ]);
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    assert!(
        ping_ok(&f.ns[1], "10.1.0.1", 20),
        "traffic resumed after lsp-add"
    );
    let (tx, rx) = stop_ping(flood);
    let drops1 = (sw.port("t0").stats.drops_total, tunnel_drops(&sw));
    eprintln!("sw0 during sw1's lsp-del/lsp-add: {rx}/{tx} pings answered, vswitchd drops {drops0:?} -> {drops1:?}");
    // vswitchd dropped none of sw0's frames; the pings' own count may lose one to the
    // kernels or OVS on a loaded machine, never more than 1 %.
    assert_eq!(
        drops1, drops0,
        "vswitchd dropped sw0 frames while sw1 changed"
    );
    assert!(tx > 100 && rx * 100 >= tx * 99, "sw0 disturbed: {rx}/{tx}");
    // del-port releases the binding (chassis cleared, up=false).
    let out = vswitchctl_out(&sw.control, &["del-port", "t1"]);
    assert!(out.status.success(), "{out:?}");
    wait_for(Duration::from_secs(10), "lsp-tap-b released", || {
        let released = c
            .sb_get("Port_Binding", "logical_port", "lsp-tap-b", "chassis")
            .is_empty()
            && c.sb_get("Port_Binding", "logical_port", "lsp-tap-b", "up") == "false";
        released.then_some(())
    });

    eprintln!("[{:>6.1?}] step 5", t0.elapsed());
    // 5. A switch with an ACL is claimed (its logical pipeline enforces it); DNS
    //    records on it, whose dns_lookup vswitchd does not execute yet, make it
    //    unclaimable, and vswitchctl names the action; without them it is claimed
    //    again. The clean stop removes hv2's rows.
    c.nbctl(&["ls-add", "sw2"]);
    c.nbctl(&["lsp-add", "sw2", "lsp-acl"]);
    c.nbctl(&["lsp-set-addresses", "lsp-acl", "02:00:00:00:02:05 10.2.0.2"]);
    c.nbctl(&[
        "acl-add",
        "sw2",
        "to-lport",
        "1001",
        "ip4.src == 10.9.9.9",
        "drop",
    ]);
    let tap_acl = format!("vovn{id}c");
    let out = vswitchctl_out(
        &sw.control,
        &[
            "add-port",
            "--tap",
            &format!("t2={tap_acl},iface_id=lsp-acl"),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    wait_for(
        Duration::from_secs(30),
        "lsp-acl claimed: its ACL is enforced",
        || (c.sb_get("Port_Binding", "logical_port", "lsp-acl", "up") == "true").then_some(()),
    );
    c.nbctl(&[
        "--id=@d",
        "create",
        "DNS",
        "records:vm.ovn=10.2.0.2",
        "--",
        "add",
        "logical_switch",
        "sw2",
        "dns_records",
        "@d",
    ]);
    let why = wait_for(
        Duration::from_secs(20),
        "t2 refused for its DNS records",
        || {
            let r = ovn(&sw).ports.into_iter().find(|p| p.port == "t2")?;
            (!r.why_unbound.is_empty()).then_some(r.why_unbound)
        },
    );
    // The action, named with its flow.
    assert!(
        why.contains("uses dns_lookup,") && why.contains("does not execute"),
        "{why}"
    );
    wait_for(Duration::from_secs(10), "lsp-acl released", || {
        c.sb_get("Port_Binding", "logical_port", "lsp-acl", "chassis")
            .is_empty()
            .then_some(())
    });
    let text = vswitchctl_out(&sw.control, &["ovn"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("which vswitchd does not execute"));
    c.nbctl(&["clear", "logical_switch", "sw2", "dns_records"]);
    wait_for(
        Duration::from_secs(30),
        "lsp-acl claimed again without the DNS records",
        || (c.sb_get("Port_Binding", "logical_port", "lsp-acl", "up") == "true").then_some(()),
    );
    assert_eq!(sw.stop(), Some(0));
    wait_for(
        Duration::from_secs(10),
        "hv2's rows removed on a clean stop",
        || {
            c.sb_get("Chassis", "name", "hv2", "_uuid")
                .is_empty()
                .then_some(())
        },
    );
    eprintln!("OVN chassis test: {:?}", t0.elapsed());
}
