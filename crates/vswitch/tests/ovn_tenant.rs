//! An OpenStack-shaped tenant on mixed chassis (issue 39 §3): the networks, router and
//! security groups of `common::tenant`, built with `ovn-nbctl` only, with VMs on an
//! Open vSwitch + ovn-controller chassis (hv1) and on two vswitchd chassis (hv2, hv3),
//! each VM a network namespace behind its port. vswitchd runs OVN's logical pipeline:
//!
//! - a VM gets its address, router and MTU from OVN's native DHCP (the slow path
//!   builds the reply as ovn-controller's pinctrl does);
//! - pings within a network and across the router (TTL decremented), locally and
//!   between chassis of both kinds, the router answering ping and ARP, its ICMP time
//!   exceeded for a TTL that runs out, and IPv6 with neighbour discovery answered by
//!   the switch's pipeline;
//! - admitted TCP connections carry 16 MiB sha256-exact; the replies of connections a
//!   VM opened pass its ingress ACLs by connection tracking; refused ports stay shut;
//!   bare TCP segments of no connection never arrive;
//! - an ACL added at run time opens a port by `ovn-nbctl --wait=hv`, and removing it
//!   shuts it again;
//! - a VM opening connections as fast as it can fills only its own conntrack zone.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::chassis::*;
use common::fabric::Fabric;
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::tenant::{self, Vm, VMS};
use common::*;

/// Where each VM runs: fabric host 0 is hv1 (OVS), 1 and 2 are hv2 and hv3.
fn host_of(vm: &Vm) -> usize {
    match vm.name {
        "vm3" => 0,
        "vm1" | "vm4" | "vm6" => 1,
        _ => 2,
    }
}

/// vm6 is a QEMU guest (TCG) on a vhost-user port of hv2; the others are network
/// namespaces behind taps (and vm3 an OVS internal port).
const QEMU_VM: &str = "vm6";

/// How a VM gets its addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addr {
    /// Its IPv4 address and a default route configured; IPv6 off.
    Static,
    /// As `Static`, with its IPv6 address too.
    Dual,
    /// By DHCP (busybox udhcpc) from OVN's native DHCP; IPv6 off.
    Dhcp,
}

/// Moves interface `iface` of namespace `from` into a new namespace `ns` as VM `vm`
/// with its MAC, its addresses as `addr` says, and a default route through the router.
fn vm_ns(from: &str, iface: &str, ns: &str, vm: &Vm, addr: Addr) -> Netns {
    run(&["ip", "netns", "add", ns]);
    let n = Netns(ns.to_string());
    run(&["ip", "-n", from, "link", "set", iface, "netns", ns]);
    let gw = tenant::ROUTER.iter().find(|r| r.0 == vm.switch).unwrap().2;
    let v4 = format!("{}/24", vm.ip4);
    let v6 = format!("{}/64", vm.ip6);
    let off = if addr == Addr::Dual { "0" } else { "1" };
    let all = format!("net.ipv6.conf.all.disable_ipv6={off}");
    let mut cmds = vec![
        vec!["sysctl", "-qw", all.as_str()],
        vec!["ip", "link", "set", "lo", "up"],
        vec!["ip", "link", "set", iface, "address", vm.mac],
        vec!["ip", "link", "set", iface, "up"],
    ];
    if addr != Addr::Dhcp {
        cmds.push(vec!["ip", "addr", "add", &v4, "dev", iface]);
        cmds.push(vec!["ip", "route", "add", "default", "via", gw]);
    }
    if addr == Addr::Dual {
        cmds.push(vec!["ip", "addr", "add", &v6, "dev", iface, "nodad"]);
    }
    for args in cmds {
        let mut a = vec!["ip", "netns", "exec", ns];
        a.extend(args);
        run(&a);
    }
    n
}

/// Runs busybox udhcpc on `iface` in `ns` until it has a lease (configuring the
/// address, default route and MTU it got); returns the lease's variables.
fn dhcp(ns: &str, iface: &str, dir: &TempDir) -> std::collections::HashMap<String, String> {
    let script = dir.path("udhcpc.sh");
    let lease = dir.path(&format!("{ns}.lease"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh
             [ \"$1\" = bound ] || exit 0
             ip addr add $ip/$mask dev $interface
             ip route add default via $router
             [ -n \"$mtu\" ] && ip link set $interface mtu $mtu
             echo \"ip=$ip\nmask=$mask\nrouter=$router\nmtu=$mtu\nlease=$lease\nserverid=$serverid\" > {}
",
            lease.display()
        ),
    )
    .unwrap();
    run(&["chmod", "+x", script.to_str().unwrap()]);
    run(&[
        "ip",
        "netns",
        "exec",
        ns,
        "timeout",
        "60",
        "busybox",
        "udhcpc",
        "-i",
        iface,
        "-f",
        "-q",
        "-n",
        "-t",
        "20",
        "-T",
        "1",
        "-s",
        script.to_str().unwrap(),
    ]);
    std::fs::read_to_string(&lease)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A TCP receiver on `port` in namespace `ns`: prints "BYTES SHA256" when the stream
/// ends.
fn sink(ns: &str, port: u16) -> (KillOnDrop, std::io::BufReader<std::process::ChildStdout>) {
    tcp_sink_on(ns, "0.0.0.0", port)
}

/// Sends `mb` MiB to `ip`:`port` from `ns`; "BYTES SHA256", or None when the connection
/// is not accepted within `secs`.
fn send(ns: &str, ip: &str, port: u16, mb: usize, secs: u64) -> Option<String> {
    let script = format!(
        "import socket,hashlib,sys\n\
         data=bytes((i*7)&255 for i in range(1<<20))*{mb}\n\
         try:\n s=socket.create_connection(('{ip}',{port}),timeout={secs})\n\
         except OSError:\n print('refused'); sys.exit(0)\n\
         s.settimeout(60); s.sendall(data); s.close(); print(len(data),hashlib.sha256(data).hexdigest())\n"
    );
    let o = Command::new("ip")
        .args([
            "netns", "exec", ns, "timeout", "200", "python3", "-c", &script,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
    (out != "refused").then_some(out)
}

/// Whether a TCP connection from `ns` to `ip`:`port` is accepted within `secs` (a
/// listener must be there).
fn connects(ns: &str, ip: &str, port: u16, secs: u64) -> bool {
    send(ns, ip, port, 0, secs).is_some()
}

/// The sha256-exact transfer of 16 MiB from `from` to `to`:`port`.
fn transfer(from: &str, to_ns: &str, to_ip: &str, port: u16) {
    let (_k, mut out) = sink(to_ns, port);
    let sent = send(from, to_ip, port, 16, 20)
        .unwrap_or_else(|| panic!("{from} -> {to_ip}:{port} refused"));
    let mut got = String::new();
    std::io::BufRead::read_line(&mut out, &mut got).unwrap();
    assert_eq!(got.trim(), sent, "{from} -> {to_ip}:{port}");
}

#[test]
fn tenant_with_security_groups_router_and_conntrack() {
    let _g = serial();
    setup_host();
    let t0 = Instant::now();
    let f = Fabric::new("otn", 3, 1600);
    let dir = TempDir::new("ovn-tenant");
    let c = OvnCentral::start(&dir);
    tenant::build(&c);
    let id = std::process::id() % 10000;
    let hv1 = Ovs::ovn_chassis(&f, 0, &dir, "hv1", &c.sb_remote());
    let vm3 = VMS[2];
    hv1.vif(
        &f,
        "vif3",
        vm3.name,
        vm3.mac,
        &format!("{}/24", vm3.ip4),
        1500,
    );
    f.exec(
        &f.ns[0],
        &["ip", "route", "add", "10.0.1.0/24", "via", "10.0.0.1"],
    );
    let mut ports: [Vec<String>; 3] = Default::default();
    let sock = dir.path("vm6.sock");
    for vm in VMS.iter().filter(|v| host_of(v) > 0) {
        if vm.name == QEMU_VM {
            ports[host_of(vm)].extend([
                "--vhost-user".to_string(),
                format!("{}={},iface_id={}", vm.name, sock.display(), vm.name),
            ]);
            continue;
        }
        let t = format!("vt{id}{}", &vm.name[2..]);
        ports[host_of(vm)].extend(tap(vm.name, &t, vm.name));
    }
    let mut hv = Vec::new();
    for k in [1, 2] {
        let mut a = chassis_args(&f, k, &c, &format!("hv{}", k + 1), &ports[k]);
        a.extend(["--ct-zone-max".to_string(), "300".to_string()]);
        hv.push(Vswitchd::start_in(
            Some(&f.ns[k]),
            &dir,
            &format!("hv{}", k + 1),
            &a,
        ));
    }
    // The QEMU guest boots (under TCG, for a while) meanwhile: DHCP, then pings vm4
    // across the router.
    wait_for(Duration::from_secs(10), "vm6's socket", || {
        sock.exists().then_some(())
    });
    let vm6 = VMS.iter().find(|v| v.name == QEMU_VM).unwrap();
    let guest = qemu::Vm::start(qemu::VmSpec::new(
        "vm6",
        &sock,
        vm6.mac,
        "vm.ip=dhcp vm.peer=10.0.1.14 vm.test=idle".into(),
    ));
    let mut nss = Vec::new();
    let mut vm_of = std::collections::HashMap::new();
    for vm in VMS.iter().filter(|v| host_of(v) > 0 && v.name != QEMU_VM) {
        let t = format!("vt{id}{}", &vm.name[2..]);
        let ns = format!("{}-{}", f.ns[host_of(vm)], vm.name);
        let addr = match vm.name {
            "vm1" => Addr::Dual,
            "vm2" => Addr::Dhcp,
            _ => Addr::Static,
        };
        nss.push(vm_ns(&f.ns[host_of(vm)], &t, &ns, vm, addr));
        vm_of.insert(vm.name, ns);
    }
    vm_of.insert("vm3", f.ns[0].clone());
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);
    for vm in VMS {
        // The QEMU guest's port is up once its driver (booting under TCG) is.
        let secs = if vm.name == QEMU_VM { 180 } else { 30 };
        wait_for(
            Duration::from_secs(secs),
            &format!("{} up", vm.name),
            || (c.sb_get("Port_Binding", "logical_port", vm.name, "up") == "true").then_some(()),
        );
    }
    eprintln!("[{:>6.1?}] tenant up on three chassis", t0.elapsed());
    let ns = |n: &str| vm_of[n].clone();

    // vm2 gets its address, router and MTU from OVN's native DHCP (sw0's
    // DHCP_Options), answered by hv3's slow path.
    let lease = dhcp(&ns("vm2"), &format!("vt{id}2"), &dir);
    assert_eq!(lease["ip"], "10.0.0.12", "{lease:?}");
    assert_eq!(lease["router"], "10.0.0.1", "{lease:?}");
    assert_eq!(lease["mtu"], "1442", "{lease:?}");
    assert_eq!(lease["serverid"], "10.0.0.1", "{lease:?}");
    assert_eq!(lease["lease"], "3600", "{lease:?}");
    eprintln!("[{:>6.1?}] dhcp", t0.elapsed());

    // Pings: within sw0 between vswitchd chassis and to OVS, across the router on one
    // chassis and between chassis, and the router's own address.
    for (from, to) in [
        ("vm1", "10.0.0.12"),
        ("vm1", "10.0.1.14"),
        ("vm1", "10.0.1.15"),
        ("vm2", "10.0.0.13"),
        ("vm4", "10.0.0.12"),
        ("vm1", "10.0.0.1"),
        ("vm5", "10.0.1.1"),
    ] {
        assert!(ping_ok(&ns(from), to, 20), "{from} -> {to}");
    }
    assert!(ping_ok(&f.ns[0], "10.0.0.11", 20), "vm3 (OVS) -> vm1");
    // A TTL that runs out at the router: its ICMP time exceeded comes back.
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns("vm1"),
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            "-t",
            "1",
            "10.0.1.14",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("From 10.0.0.1") && text.contains("Time to live exceeded"),
        "ICMP time exceeded from the router: {text}"
    );
    // IPv6 within sw0: vm1's neighbour solicitation for vm2 is answered by sw0's
    // pipeline (nd_na, built by the slow path); vm2 (pg_web) admits ICMPv6.
    run(&[
        "ip",
        "netns",
        "exec",
        &ns("vm2"),
        "sysctl",
        "-qw",
        "net.ipv6.conf.all.disable_ipv6=0",
    ]);
    let t2 = format!("vt{id}2");
    run(&[
        "ip",
        "netns",
        "exec",
        &ns("vm2"),
        "ip",
        "addr",
        "add",
        "2001:db8::12/64",
        "dev",
        &t2,
        "nodad",
    ]);
    assert!(
        ping_ok(&ns("vm1"), "2001:db8::12", 20),
        "vm1 -> vm2 over IPv6"
    );
    // Across the router the TTL is one less.
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns("vm1"),
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            "10.0.1.14",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("ttl=63"), "routed reply TTL: {text}");
    eprintln!("[{:>6.1?}] pings", t0.elapsed());

    // vswitchctl ovn trace: a routed packet from vm1 leaves with the router's MAC, its
    // TTL one less, to vm4 (here); to vm5, by tunnel to hv3 (whose egress pipeline
    // runs there).
    let flow = |dst_ip: &str, port: u16| {
        format!(
            "inport == \"vm1\" && eth.src == 50:54:00:00:00:01 && eth.dst == 00:00:00:00:ff:01 && ip4 && ip4.src == 10.0.0.11 && ip4.dst == {dst_ip} && ip.ttl == 64 && tcp && tcp.src == 4000 && tcp.dst == {port}"
        )
    };
    let out = vswitchctl_out(
        &hv[0].control,
        &["ovn", "trace", "--minimal", &flow("10.0.1.14", 80)],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("ip.ttl--;")
            && text.contains("eth.src = 00:00:00:00:ff:02;")
            && text.contains("output(\"vm4\");"),
        "{text}"
    );
    let out = vswitchctl_out(
        &hv[0].control,
        &["--json", "ovn", "trace", &flow("10.0.1.15", 5432)],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outputs"], serde_json::json!(["vm5@hv3"]), "{v}");
    // vswitchctl conntrack: vm1's zone holds the connections of its pings.
    let out = vswitchctl_out(&hv[0].control, &["--json", "conntrack"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let vm1 = v["zones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["owner"] == "vm1")
        .cloned();
    assert!(
        vm1.is_some_and(|z| z["connections"].as_u64() > Some(0)),
        "{v}"
    );

    // TCP: admitted ports carry 16 MiB exactly (vm4's group admits 80; vm5's admits
    // 5432 from pg_web's addresses), refused ones stay shut.
    transfer(&ns("vm1"), &ns("vm4"), "10.0.1.14", 80);
    transfer(&ns("vm2"), &ns("vm5"), "10.0.1.15", 5432);
    transfer(&ns("vm1"), &ns("vm2"), "10.0.0.12", 80);
    let (_k, _o) = sink(&ns("vm4"), 22);
    assert!(
        !connects(&ns("vm1"), "10.0.1.14", 22, 3),
        "port 22 is not in pg_web"
    );
    let (_k5, _o5) = sink(&ns("vm1"), 5432);
    assert!(
        !connects(&ns("vm5"), "10.0.0.11", 5432, 3),
        "vm1 admits no 5432"
    );
    eprintln!("[{:>6.1?}] tcp", t0.elapsed());

    // A bare TCP segment of no connection (an ACK to an admitted port) never arrives.
    let cap = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns("vm4"),
            "timeout",
            "6",
            "tcpdump",
            "-nn",
            "-l",
            "-c",
            "1",
            "-i",
            "any",
            "tcp dst port 80 and tcp[13] == 16",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let script = "from scapy.all import IP,TCP,send\n\
        send(IP(src='10.0.0.11',dst='10.0.1.14')/TCP(sport=4321,dport=80,flags='A',seq=1,ack=1),count=20,verbose=False)";
    run(&[
        "ip",
        "netns",
        "exec",
        &ns("vm1"),
        "/usr/bin/python3",
        "-c",
        script,
    ]);
    let out = cap.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "a bare ACK reached vm4: {}",
        String::from_utf8_lossy(&out.stdout)
    );

    // An ACL added at run time opens port 22 by --wait=hv; removed, it shuts again.
    c.nbctl(&[
        "--wait=hv",
        "acl-add",
        "pg_web",
        "to-lport",
        "1002",
        "outport == @pg_web && ip4 && tcp.dst == 22",
        "allow-related",
    ]);
    assert!(
        connects(&ns("vm1"), "10.0.1.14", 22, 5),
        "the new ACL admits 22"
    );
    c.nbctl(&[
        "--wait=hv",
        "acl-del",
        "pg_web",
        "to-lport",
        "1002",
        "outport == @pg_web && ip4 && tcp.dst == 22",
    ]);
    assert!(!connects(&ns("vm1"), "10.0.1.14", 22, 3), "22 shut again");
    eprintln!("[{:>6.1?}] acls at run time", t0.elapsed());

    // vm1 opens UDP "connections" as fast as it can: its zone (300 at most) fills, its
    // new connections are dropped as ct_zone_full, and vm4 (another zone on the same
    // chassis) still opens connections.
    let script = "from scapy.all import IP,UDP,send\n\
        send([IP(src='10.0.0.11',dst='10.0.1.14')/UDP(sport=20000+i,dport=53) for i in range(2000)],verbose=False)";
    run(&[
        "ip",
        "netns",
        "exec",
        &ns("vm1"),
        "/usr/bin/python3",
        "-c",
        script,
    ]);
    let full = wait_for(Duration::from_secs(10), "ct_zone_full drops on vm1", || {
        let n = drops(&hv[0], "vm1", "ct_zone_full");
        (n > 0).then_some(n)
    });
    assert!(full >= 1_500, "only {full} of 1,700 dropped");
    assert_eq!(drops(&hv[0], "vm4", "ct_zone_full"), 0);
    transfer(&ns("vm4"), &ns("vm2"), "10.0.0.12", 80);
    eprintln!("[{:>6.1?}] zone limits", t0.elapsed());

    // The QEMU guest got its lease from OVN's DHCP and pinged vm4 across the router.
    let lease = qemu::kv(&guest.wait_lines("LEASE", 1, Duration::from_secs(240))[0]);
    assert_eq!(
        (
            lease["ip"].as_str(),
            lease["router"].as_str(),
            lease["mtu"].as_str()
        ),
        ("10.0.0.16", "10.0.0.1", "1442"),
        "{lease:?}"
    );
    for l in guest.wait_lines("RESULT ping", 2, Duration::from_secs(120)) {
        let r = qemu::kv(&l);
        assert_eq!(
            r["received"], r["sent"],
            "the QEMU guest's pings across the router: {l}"
        );
        assert_ne!(r["sent"], "0", "{l}");
    }
    eprintln!("[{:>6.1?}] qemu guest", t0.elapsed());
    drop(hv1);
}
