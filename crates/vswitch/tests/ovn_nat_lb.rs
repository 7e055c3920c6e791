//! OVN load balancers on a vswitchd chassis (issue 41 §2): a logical switch `sw0` with
//! a client (vm1) and three backends (vm2, vm3, vm4), each a network namespace behind
//! a tap, and a router `lr0` the clients reach the VIPs through. `lb-tcp` maps
//! 172.16.100.100:80 to port 8080 of each backend, `lb-udp` maps 172.16.100.100:53 to
//! port 5353; both are on sw0, so vswitchd runs `ct_lb_mark` with backends, and the
//! hairpin stages (`chk_lb_hairpin`, `ct_snat_to_vip`).
//!
//! - 1,000 TCP connections from vm1 to the TCP VIP each reach one backend and come back
//!   from the VIP (the reply un-NATed in vm1's zone); each backend gets 20-45 %.
//! - 100 UDP queries from as many source ports each get their backend's answer from
//!   the VIP.
//! - A backend that connects to the VIP and is balanced to itself (hairpin) is
//!   answered: its request goes out with the VIP as source, the answer comes back from
//!   the VIP.

mod common;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use common::chassis::*;
use common::fabric::{tunnels, Fabric};
use common::hosts::*;
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::*;

/// (port, MAC, IPv4).
const VMS: [(&str, &str, &str); 4] = [
    ("vm1", "50:54:00:00:02:01", "10.0.0.11"),
    ("vm2", "50:54:00:00:02:02", "10.0.0.12"),
    ("vm3", "50:54:00:00:02:03", "10.0.0.13"),
    ("vm4", "50:54:00:00:02:04", "10.0.0.14"),
];

/// The load balancers' VIP (off sw0's subnet: clients reach it through lr0).
const VIP: &str = "172.16.100.100";

/// sw0 with the VMs and a router port, lr0, and the two load balancers on sw0.
fn build(c: &OvnCentral) {
    c.nbctl(&["ls-add", "sw0"]);
    for (name, mac, ip) in VMS {
        let addrs = format!("{mac} {ip}");
        c.add_vif("sw0", name, &addrs);
    }
    c.nbctl(&["lr-add", "lr0"]);
    c.nbctl(&[
        "lrp-add",
        "lr0",
        "lr0-sw0",
        "00:00:00:00:ff:01",
        "10.0.0.1/24",
    ]);
    c.attach_router("sw0", "sw0-lr0", "lr0-sw0");
    let backends = |port: u16| {
        VMS[1..]
            .iter()
            .map(|v| format!("{}:{port}", v.2))
            .collect::<Vec<_>>()
            .join(",")
    };
    c.nbctl(&[
        "lb-add",
        "lb-tcp",
        &format!("{VIP}:80"),
        &backends(8080),
        "tcp",
    ]);
    c.nbctl(&[
        "lb-add",
        "lb-udp",
        &format!("{VIP}:53"),
        &backends(5353),
        "udp",
    ]);
    c.nbctl(&["ls-lb-add", "sw0", "lb-tcp"]);
    c.nbctl(&["ls-lb-add", "sw0", "lb-udp"]);
}

/// The router's address on the network of `ip`.
fn gateway_of(ip: &str) -> &'static str {
    if ip.starts_with("172.16.0.") {
        "172.16.0.1"
    } else {
        "10.0.0.1"
    }
}

/// `n` TCP connections from `ns` to the VIP's port 80: for each, the answer's first
/// line ("vmN ADDR": the backend and the client address it saw) and the address the
/// answer came from, or "fail".
fn tcp_connections(ns: &str, n: u32) -> Vec<String> {
    tcp_connections_to(ns, VIP, n)
}

/// [`tcp_connections`] to VIP `vip` (IPv4 or IPv6).
fn tcp_connections_to(ns: &str, vip: &str, n: u32) -> Vec<String> {
    let script = format!(
        "import socket\n\
         for i in range({n}):\n\
         \x20try:\n\
         \x20 s=socket.create_connection(('{vip}',80),timeout=5)\n\
         \x20 d=s.makefile().readline().strip(); p=s.getpeername()[0]; s.close()\n\
         \x20 print(d,p,flush=True)\n\
         \x20except OSError as e:\n\
         \x20 print('fail',e,flush=True)\n"
    );
    py(ns, &script).lines().map(str::to_string).collect()
}

/// `n` UDP queries from `ns` to the VIP's port 53, each from a new source port: for
/// each, the answer and the address it came from, or "fail".
fn udp_queries(ns: &str, n: u32) -> Vec<String> {
    let script = format!(
        "import socket\n\
         for i in range({n}):\n\
         \x20u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.settimeout(3)\n\
         \x20try:\n\
         \x20 u.sendto(b'q',('{VIP}',53)); d,a=u.recvfrom(2048); print(d.decode(),a[0],flush=True)\n\
         \x20except OSError as e:\n\
         \x20 print('fail',e,flush=True)\n\
         \x20u.close()\n"
    );
    py(ns, &script).lines().map(str::to_string).collect()
}

/// How many answers each backend gave, failing on an answer not from the VIP or one
/// whose backend saw another client address than `client`.
fn tally(answers: &[String], client: &str) -> HashMap<String, u32> {
    tally_from(answers, client, VIP)
}

/// [`tally`] of answers from VIP `vip`.
fn tally_from(answers: &[String], client: &str, vip: &str) -> HashMap<String, u32> {
    let mut by = HashMap::new();
    for a in answers {
        let w: Vec<&str> = a.split_whitespace().collect();
        assert!(
            w.len() == 3 && w[0] != "fail",
            "an answer went missing: {a}"
        );
        assert_eq!(w[2], vip, "the answer comes from the VIP: {a}");
        assert_eq!(w[1], client, "the backend sees the client: {a}");
        *by.entry(w[0].to_string()).or_insert(0) += 1;
    }
    by
}

#[test]
fn load_balancers_spread_connections_and_answer_hairpins() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-nat-lb");
    let c = OvnCentral::start(&dir);
    build(&c);
    let (_f, sw, nss) = one_chassis("onl", &dir, &c, &VMS, gateway_of);
    let _backends: Vec<KillOnDrop> = VMS[1..]
        .iter()
        .zip(&nss[1..])
        .map(|(vm, ns)| backend(&ns.0, vm.0))
        .collect();
    let vm1 = &nss[0].0;
    assert!(ping_ok(vm1, "10.0.0.12", 20), "vm1 -> vm2 directly");

    // 1,000 TCP connections, spread over the three backends, the choice made again by
    // cached programs for each new connection.
    let runs = || -> [u64; 3] {
        pmd_stats(&sw.control).iter().fold([0; 3], |a, r| {
            [
                a[0] + r.lflow_hits,
                a[1] + r.lflow_wild_hits,
                a[2] + r.lflow_misses,
            ]
        })
    };
    let before = runs();
    let answers = tcp_connections(vm1, 1000);
    assert_eq!(answers.len(), 1000);
    let by = tally(&answers, VMS[0].2);
    let after = runs();
    eprintln!("TCP connections by backend: {by:?}; (hits, wildcard, runs) {before:?} -> {after:?}");
    assert!(
        after[2] - before[2] < 100,
        "1,000 connections, a few interpreter runs: {before:?} -> {after:?}"
    );
    for vm in &VMS[1..] {
        let n = by.get(vm.0).copied().unwrap_or(0);
        assert!((200..=450).contains(&n), "{} got {n} of 1000: {by:?}", vm.0);
    }

    // 100 UDP queries from as many source ports.
    let answers = udp_queries(vm1, 100);
    let by = tally(&answers, VMS[0].2);
    eprintln!("UDP queries by backend: {by:?}");
    assert_eq!(by.values().sum::<u32>(), 100);
    assert!(by.len() >= 2, "the queries spread: {by:?}");

    // Hairpin: vm2 connects to the VIP until one connection is balanced to itself;
    // it sees its own request coming from the VIP, and the answer from the VIP.
    let vm2 = &nss[1].0;
    let answers = tcp_connections(vm2, 30);
    let mine: Vec<&String> = answers.iter().filter(|a| a.starts_with("vm2 ")).collect();
    assert!(
        !mine.is_empty(),
        "30 connections, none to vm2 itself: {answers:?}"
    );
    for a in &answers {
        let w: Vec<&str> = a.split_whitespace().collect();
        assert_eq!(w.len(), 3, "an answer went missing: {a}");
        assert_eq!(w[2], VIP, "from the VIP: {a}");
        let seen = if w[0] == "vm2" { VIP } else { VMS[1].2 };
        assert_eq!(w[1], seen, "a hairpinned request comes from the VIP: {a}");
    }

    // vswitchctl conntrack: the connections live in vm1's zone and sw0's SNAT zone
    // (the hairpins), nothing was refused.
    let out = vswitchctl_out(&sw.control, &["--json", "conntrack"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let zone = |owner: &str| {
        v["zones"]
            .as_array()
            .unwrap()
            .iter()
            .find(|z| z["owner"] == owner)
            .and_then(|z| z["connections"].as_u64())
            .unwrap_or(0)
    };
    assert!(zone("vm1") > 0 && zone("sw0_snat") > 0, "{v}");
    assert_eq!(v["counters"]["nat_exhausted"], 0, "{v}");
    assert_eq!(drops(&sw, "vm1", "nat_exhausted"), 0);
    drop(nss);
}

/// Session affinity (issue 41 §1): with `options:affinity_timeout=60` on `lb-tcp`,
/// every connection of one client goes to the backend its first went to (OVN's
/// `commit_lb_aff` learns the session, `chk_lb_aff` finds it): 40 connections from
/// vm1, one backend; the UDP load balancer, without affinity, still spreads.
#[test]
fn session_affinity_keeps_a_client_on_its_backend() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-lb-aff");
    let c = OvnCentral::start(&dir);
    build(&c);
    c.nbctl(&[
        "set",
        "load_balancer",
        "lb-tcp",
        "options:affinity_timeout=60",
    ]);
    let (_f, sw, nss) = one_chassis("oaf", &dir, &c, &VMS, gateway_of);
    let _backends: Vec<KillOnDrop> = VMS[1..]
        .iter()
        .zip(&nss[1..])
        .map(|(vm, ns)| backend(&ns.0, vm.0))
        .collect();
    let vm1 = &nss[0].0;
    let answers = tcp_connections(vm1, 40);
    let by = tally(&answers, VMS[0].2);
    eprintln!("TCP with affinity: {by:?}");
    assert_eq!(
        by.len(),
        1,
        "one backend for all of vm1's connections: {by:?}"
    );
    assert_eq!(by.values().sum::<u32>(), 40);
    let by = tally(&udp_queries(vm1, 40), VMS[0].2);
    assert!(by.len() >= 2, "UDP, without affinity, spreads: {by:?}");
    let claimed = c.sb_get("Port_Binding", "logical_port", "vm1", "up");
    assert_eq!(
        claimed, "true",
        "sw0 with an affinity load balancer is claimed"
    );
    drop((sw, nss));
}

/// A health check of VIP `vip` (`ADDR:PORT`, `[ADDR]:PORT` for IPv6) on load balancer
/// `lb`: every second, a failure within 2 s makes a backend offline, one success
/// online again.
fn add_health_check(c: &OvnCentral, lb: &str, vip: &str) {
    let vip = format!("vip=\"{vip}\"");
    c.nbctl(&[
        "--id=@hc",
        "create",
        "Load_Balancer_Health_Check",
        &vip,
        "options:interval=1",
        "options:timeout=2",
        "options:success_count=1",
        "options:failure_count=1",
        "--",
        "add",
        "Load_Balancer",
        lb,
        "health_check",
        "@hc",
    ]);
}

/// The health check scenario on `hosts` (name, address; the client first, then the
/// backends, each in its namespace of `nss`) behind VIP `vip`, whose backends' servers
/// `serve` starts:
/// - every backend comes online, and connections from the client reach each;
/// - the second backend's server stops (its kernel resets the probe): it goes offline,
///   ovn-northd leaves it out, and connections reach only the others;
/// - its server starts again: online again, and it gets connections again.
fn a_dead_backend_is_left_out(
    c: &OvnCentral,
    nss: &[Netns],
    hosts: &[(&str, &str)],
    vip: &str,
    serve: fn(&str, &str) -> KillOnDrop,
) {
    let mut servers: Vec<Option<KillOnDrop>> = hosts[1..]
        .iter()
        .zip(&nss[1..])
        .map(|(h, ns)| Some(serve(&ns.0, h.0)))
        .collect();
    for h in &hosts[1..] {
        wait_for(Duration::from_secs(30), &format!("{} online", h.0), || {
            (health(c, h.1) == "online").then_some(())
        });
    }
    let spread = || -> HashMap<String, u32> {
        c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
        let n = 20 * (hosts.len() as u32 - 1);
        tally_from(&tcp_connections_to(&nss[0].0, vip, n), hosts[0].1, vip)
    };
    let n = hosts.len() - 1;
    assert_eq!(spread().len(), n, "every backend serves");

    let dead = hosts[2];
    servers[1] = None;
    wait_for(
        Duration::from_secs(30),
        &format!("{} offline", dead.0),
        || (health(c, dead.1) == "offline").then_some(()),
    );
    let by = spread();
    eprintln!("with {} offline: {by:?}", dead.0);
    assert!(!by.contains_key(dead.0), "{} is left out: {by:?}", dead.0);
    assert_eq!(by.len(), n - 1, "the others serve: {by:?}");

    servers[1] = Some(serve(&nss[2].0, dead.0));
    wait_for(
        Duration::from_secs(30),
        &format!("{} online again", dead.0),
        || (health(c, dead.1) == "online").then_some(()),
    );
    assert_eq!(spread().len(), n, "{} serves again", dead.0);
}

/// The status vswitchd wrote for the health check of backend `ip`.
fn health(c: &OvnCentral, ip: &str) -> String {
    c.sb_get("Service_Monitor", "ip", &format!("\"{ip}\""), "status")
}

/// Load balancer health checks (issue 41 §1, §2): `lb-tcp` gets a
/// `Load_Balancer_Health_Check` (every second, one failure makes a backend offline),
/// its backends probe sources by `ip_port_mappings`. vswitchd, the chassis of the
/// three backends, probes them (TCP SYNs from the `svc_monitor_mac`, answered through
/// the pipeline's `handle_svc_check`) and writes each `Service_Monitor` status:
/// - all three come online, and connections spread over them;
/// - vm3's server stops (its kernel answers the probe with a reset): vm3 goes offline,
///   ovn-northd leaves it out, and 60 connections reach only vm2 and vm4;
/// - vm3's server starts again: online again, and it gets connections again.
#[test]
fn a_backend_whose_health_check_fails_stops_receiving() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-lb-hc");
    let c = OvnCentral::start(&dir);
    build(&c);
    for vm in &VMS[1..] {
        let m = format!("ip_port_mappings:{}={}:10.0.0.250", vm.2, vm.0);
        c.nbctl(&["set", "load_balancer", "lb-tcp", &m]);
    }
    add_health_check(&c, "lb-tcp", &format!("{VIP}:80"));
    let (_f, _sw, nss) = one_chassis("ohc", &dir, &c, &VMS, gateway_of);
    let hosts: Vec<(&str, &str)> = VMS.iter().map(|v| (v.0, v.2)).collect();
    a_dead_backend_is_left_out(&c, &nss, &hosts, VIP, backend);
    drop(nss);
}

/// The IPv6 health check test's hosts on sw0: (port, MAC, IPv4, IPv6); vm1 is the
/// client, vm2 and vm3 the backends.
const VMS6: [(&str, &str, &str, &str); 3] = [
    ("vm1", "50:54:00:00:06:01", "10.0.0.11", "fd00::11"),
    ("vm2", "50:54:00:00:06:02", "10.0.0.12", "fd00::12"),
    ("vm3", "50:54:00:00:06:03", "10.0.0.13", "fd00::13"),
];
/// Its VIP, on sw0's IPv6 subnet (lr0 answers neighbour solicitations for it).
const VIP6: &str = "fd00::a";

/// sw0 with [`VMS6`] and lr0 (fd00::1/64), load balancer `lb6` from `[VIP6]:80` to
/// port 8080 of vm2 and vm3 on both, with a health check every second whose probes
/// come from fd00::250 (`ip_port_mappings`), as OVN's own IPv6 health check test
/// builds it (tests/system-ovn.at, "Load balancer health checks - IPv6").
fn build6(c: &OvnCentral) {
    c.nbctl(&["ls-add", "sw0"]);
    for (name, mac, v4, v6) in VMS6 {
        let addrs = format!("{mac} {v4} {v6}");
        c.add_vif("sw0", name, &addrs);
    }
    c.nbctl(&["lr-add", "lr0"]);
    c.nbctl(&[
        "lrp-add",
        "lr0",
        "lr0-sw0",
        "00:00:00:00:ff:01",
        "10.0.0.1/24",
        "fd00::1/64",
    ]);
    c.attach_router("sw0", "sw0-lr0", "lr0-sw0");
    let backends: Vec<String> = VMS6[1..]
        .iter()
        .map(|v| format!("[{}]:8080", v.3))
        .collect();
    c.nbctl(&[
        "lb-add",
        "lb6",
        &format!("[{VIP6}]:80"),
        &backends.join(","),
        "tcp",
    ]);
    for (name, _, _, v6) in &VMS6[1..] {
        let m = format!("ip_port_mappings:\"[{v6}]\"=\"{name}:[fd00::250]\"");
        c.nbctl(&["set", "load_balancer", "lb6", &m]);
    }
    add_health_check(c, "lb6", &format!("[{VIP6}]:80"));
    c.nbctl(&["ls-lb-add", "sw0", "lb6", "--", "lr-lb-add", "lr0", "lb6"]);
}

/// A backend on [::]:8080 in `ns` named `name`: answers each connection with its name
/// and the address it came from.
fn backend6(ns: &str, name: &str) -> KillOnDrop {
    let script = format!(
        "import socket\n\
         s=socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         s.bind(('::',8080)); s.listen(128); print('ready',flush=True)\n\
         while True:\n\
         \x20c,a=s.accept(); c.sendall(('{name} %s\\n'%a[0]).encode()); c.close()\n"
    );
    python_ready(ns, &script).0
}

/// IPv6 load balancer health checks (issue 41 §1): vswitchd probes vm2 and vm3 at
/// their IPv6 addresses (TCP SYNs from fd00::250, whose neighbour solicitations OVN's
/// switch answers with the `svc_monitor_mac`) and writes each `Service_Monitor`
/// status; vm3 dies and comes back as in [`a_dead_backend_is_left_out`].
#[test]
fn an_ipv6_backend_whose_health_check_fails_stops_receiving() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-lb-hc6");
    let c = OvnCentral::start(&dir);
    build6(&c);
    let hosts: Vec<(&str, &str, &str)> = VMS6.iter().map(|v| (v.0, v.1, v.2)).collect();
    let (_f, _sw, nss) = one_chassis("oh6", &dir, &c, &hosts, gateway_of);
    let id = std::process::id() % 10000;
    for (i, (vm, ns)) in VMS6.iter().zip(&nss).enumerate() {
        let (tap, v6) = (format!("oh6{id}{i}"), format!("{}/64", vm.3));
        for args in [
            vec!["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"],
            vec!["ip", "-6", "addr", "add", &v6, "dev", &tap, "nodad"],
            vec!["ip", "-6", "route", "add", "default", "via", "fd00::1"],
        ] {
            let mut a = vec!["ip", "netns", "exec", &ns.0];
            a.extend(args);
            run(&a);
        }
    }
    let hosts: Vec<(&str, &str)> = VMS6.iter().map(|v| (v.0, v.3)).collect();
    a_dead_backend_is_left_out(&c, &nss, &hosts, VIP6, backend6);
    drop(nss);
}

/// The gateway router's networks: (VM, MAC, IPv4) inside, the upstream host outside.
const INSIDE: [(&str, &str, &str); 2] = [
    ("vm1", "50:54:00:00:03:01", "10.0.0.11"),
    ("vm2", "50:54:00:00:03:02", "10.0.0.12"),
];
const UPSTREAM: (&str, &str, &str) = ("upstream", "50:54:00:00:03:fe", "172.16.0.254");
/// The router's SNAT address for sw0, and vm1's floating IP.
const SNAT_IP: &str = "172.16.0.1";
const FLOATING_IP: &str = "172.16.0.50";

/// A gateway router `gw` bound to chassis `chassis` between sw0 (vm1, vm2) and the
/// external switch `ext` (the upstream host): SNAT of 10.0.0.0/24 to its own address,
/// and a floating IP for vm1 (`dnat_and_snat`).
fn build_gateway(c: &OvnCentral, chassis: &str) {
    c.nbctl(&["ls-add", "sw0", "--", "ls-add", "ext"]);
    for (name, mac, ip) in INSIDE {
        let addrs = format!("{mac} {ip}");
        c.add_vif("sw0", name, &addrs);
    }
    let up = format!("{} {}", UPSTREAM.1, UPSTREAM.2);
    c.add_vif("ext", UPSTREAM.0, &up);
    c.nbctl(&[
        "lr-add",
        "gw",
        "--",
        "set",
        "logical_router",
        "gw",
        &format!("options:chassis={chassis}"),
    ]);
    for (sw, lrp, mac, net) in [
        ("sw0", "gw-sw0", "00:00:00:00:ff:01", "10.0.0.1/24"),
        ("ext", "gw-ext", "00:00:00:00:ff:02", "172.16.0.1/24"),
    ] {
        c.nbctl(&["lrp-add", "gw", lrp, mac, net]);
        c.attach_router(sw, &format!("{sw}-gw"), lrp);
    }
    c.nbctl(&["lr-nat-add", "gw", "snat", SNAT_IP, "10.0.0.0/24"]);
    c.nbctl(&[
        "lr-nat-add",
        "gw",
        "dnat_and_snat",
        FLOATING_IP,
        INSIDE[0].2,
    ]);
}

#[test]
fn a_gateway_router_snats_its_network_and_gives_a_vm_a_floating_ip() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-nat-gw");
    let c = OvnCentral::start(&dir);
    build_gateway(&c, "hv1");
    let (_f, sw, nss) = one_chassis(
        "ong",
        &dir,
        &c,
        &[INSIDE[0], INSIDE[1], UPSTREAM],
        gateway_of,
    );
    // The upstream host has no route to 10.0.0.0/24: only translated packets come back.
    let up = &nss[2].0;
    run(&["ip", "netns", "exec", up, "ip", "route", "del", "default"]);
    let (vm1, vm2) = (&nss[0].0, &nss[1].0);

    // Outbound: vm2 leaves as the router's SNAT address, vm1 as its floating IP.
    assert!(ping_ok(vm2, UPSTREAM.2, 20), "vm2 -> upstream (SNAT)");
    assert_eq!(seen_from(vm2, up, UPSTREAM.2, 7001), SNAT_IP);
    assert_eq!(seen_from(vm1, up, UPSTREAM.2, 7002), FLOATING_IP);
    // Inbound: the floating IP reaches vm1, which sees the upstream host.
    assert!(
        ping_ok(up, FLOATING_IP, 20),
        "upstream -> vm1's floating IP"
    );
    assert_eq!(seen_from(up, vm1, FLOATING_IP, 7003), UPSTREAM.2);
    // Nothing reaches vm2 from outside: it has no floating IP.
    assert!(seen_from(up, vm2, INSIDE[1].2, 7004).starts_with("fail"));
    // ICMP errors about translated packets carry the packet as its sender knows it
    // (RFC 5508 §7): the port unreachable of the upstream host's kernel reaches vm2's
    // socket through the SNAT, vm1's reaches the upstream host's through the floating IP.
    assert_eq!(udp_to_closed_port(vm2, UPSTREAM.2), "refused");
    assert_eq!(udp_to_closed_port(up, FLOATING_IP), "refused");

    let out = vswitchctl_out(&sw.control, &["--json", "conntrack"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let zone = |owner: &str| {
        v["zones"]
            .as_array()
            .unwrap()
            .iter()
            .find(|z| z["owner"] == owner)
            .and_then(|z| z["connections"].as_u64())
            .unwrap_or(0)
    };
    assert!(zone("gw_snat") > 0 && zone("gw_dnat") > 0, "{v}");
    drop(nss);
}

/// IPv6 through a gateway router whose external port has `options:gateway_mtu=1400`
/// (issue 41 §2, "packet too big"): both ways, a packet of 1,400 bytes passes and one
/// of 1,401 is answered by the router with ICMPv6 "packet too big", MTU 1,400 (OVN's
/// `icmp6_error`, built by vswitchd's pinctrl); the sender's kernel caches that path
/// MTU, and 1,400 bytes pass again.
#[test]
fn a_gateway_router_sends_packet_too_big_over_ipv6() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-ptb6");
    let c = OvnCentral::start(&dir);
    build_gateway(&c, "hv1");
    let (vm, up) = (("vm2", "fd00::12"), ("upstream", "fd01::fe"));
    for (lrp, net) in [("gw-sw0", "fd00::1/64"), ("gw-ext", "fd01::1/64")] {
        c.nbctl(&[
            "add",
            "logical_router_port",
            lrp,
            "networks",
            &format!("\"{net}\""),
        ]);
    }
    for (lsp, mac, v4, v6) in [
        (vm.0, INSIDE[1].1, INSIDE[1].2, vm.1),
        (up.0, UPSTREAM.1, UPSTREAM.2, up.1),
    ] {
        c.nbctl(&["lsp-set-addresses", lsp, &format!("{mac} {v4} {v6}")]);
    }
    c.nbctl(&[
        "set",
        "logical_router_port",
        "gw-ext",
        "options:gateway_mtu=1400",
    ]);
    let (_f, _sw, nss) = one_chassis("onp", &dir, &c, &[INSIDE[1], UPSTREAM], gateway_of);
    let id = std::process::id() % 10000;
    for (i, (ns, (addr, gw))) in nss
        .iter()
        .zip([(vm.1, "fd00::1"), (up.1, "fd01::1")])
        .enumerate()
    {
        let (tap, cidr) = (format!("onp{id}{i}"), format!("{addr}/64"));
        for args in [
            vec!["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"],
            vec!["ip", "-6", "addr", "add", &cidr, "dev", &tap, "nodad"],
            vec!["ip", "-6", "route", "add", "default", "via", gw],
        ] {
            let mut a = vec!["ip", "netns", "exec", &ns.0];
            a.extend(args);
            run(&a);
        }
    }
    let (vm_ns, up_ns) = (&nss[0].0, &nss[1].0);
    assert!(ping_ok(vm_ns, up.1, 20), "vm2 -> upstream over IPv6");
    for (from, to) in [(vm_ns, up.1), (up_ns, vm.1)] {
        mtu_1400_holds(from, to, 48, &["Packet too big", "mtu=1400"]);
    }
    drop(nss);
}

/// What a connected UDP socket in `ns` hears after sending to a closed port of `ip`:
/// "refused" when the ICMP port unreachable reached it (the kernel matched the error's
/// embedded header to the socket), "silence" when nothing did.
fn udp_to_closed_port(ns: &str, ip: &str) -> String {
    let script = format!(
        "import socket\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(3)\n\
         s.connect(('{ip}',9))\n\
         out='silence'\n\
         for _ in range(4):\n\
         \x20s.send(b'x')\n\
         \x20try:\n\
         \x20\x20s.recv(64); out='answer'; break\n\
         \x20except ConnectionRefusedError:\n\
         \x20\x20out='refused'; break\n\
         \x20except socket.timeout:\n\
         \x20\x20pass\n\
         print(out)\n"
    );
    py(ns, &script).trim().to_string()
}

/// A distributed router's VMs: vm1 with a distributed floating IP (`logical_port`,
/// `external_mac`), vm2 with a centralized one, vm3 with SNAT only.
const DGP_VMS: [(&str, &str, &str); 3] = [
    ("vm1", "50:54:00:00:04:01", "10.0.0.11"),
    ("vm2", "50:54:00:00:04:02", "10.0.0.12"),
    ("vm3", "50:54:00:00:04:03", "10.0.0.13"),
];
/// A VM on the Open vSwitch chassis, SNAT only.
const OVS_VM: (&str, &str, &str) = ("vm4", "50:54:00:00:04:04", "10.0.0.14");
/// The distributed floating IP and its MAC; the centralized floating IP.
const DIST_FIP: (&str, &str) = ("172.16.0.50", "50:54:00:00:04:50");
const CENT_FIP: &str = "172.16.0.60";
/// The gateway port's MAC.
const DGP_MAC: &str = "00:00:00:00:ff:02";

/// sw0 (the VMs), router lr0 with a distributed gateway port `lr0-ext` on the external
/// network `ext` (a provider network: localnet port for `physnet`, untagged), its
/// gateway chassis `chassis` at priority 20; SNAT of 10.0.0.0/24 and the floating IPs.
fn build_dgp(c: &OvnCentral, chassis: &str) {
    c.nbctl(&["ls-add", "sw0", "--", "ls-add", "ext"]);
    for (name, mac, ip) in DGP_VMS.into_iter().chain([OVS_VM]) {
        let addrs = format!("{mac} {ip}");
        c.add_vif("sw0", name, &addrs);
    }
    c.nbctl(&[
        "lsp-add",
        "ext",
        "ln-ext",
        "--",
        "lsp-set-type",
        "ln-ext",
        "localnet",
    ]);
    c.nbctl(&["lsp-set-addresses", "ln-ext", "unknown"]);
    c.nbctl(&["lsp-set-options", "ln-ext", "network_name=physnet"]);
    c.nbctl(&["lr-add", "lr0"]);
    for (sw, lrp, mac, net) in [
        ("sw0", "lr0-sw0", "00:00:00:00:ff:01", "10.0.0.1/24"),
        ("ext", "lr0-ext", DGP_MAC, "172.16.0.1/24"),
    ] {
        c.nbctl(&["lrp-add", "lr0", lrp, mac, net]);
        c.attach_router(sw, &format!("{sw}-lr0"), lrp);
    }
    c.nbctl(&["lrp-set-gateway-chassis", "lr0-ext", chassis, "20"]);
    c.nbctl(&["lr-nat-add", "lr0", "snat", SNAT_IP, "10.0.0.0/24"]);
    c.nbctl(&[
        "lr-nat-add",
        "lr0",
        "dnat_and_snat",
        DIST_FIP.0,
        DGP_VMS[0].2,
        DGP_VMS[0].0,
        DIST_FIP.1,
    ]);
    c.nbctl(&["lr-nat-add", "lr0", "dnat_and_snat", CENT_FIP, DGP_VMS[1].2]);
}

/// The MAC namespace `ns` resolved `ip` to (empty if none).
fn neighbour(ns: &str, ip: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ip", "neigh", "show", ip])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut words = text.split_whitespace();
    words
        .by_ref()
        .find(|w| *w == "lladdr")
        .and_then(|_| words.next())
        .unwrap_or("")
        .to_string()
}

/// A distributed gateway port on a vswitchd chassis (issue 41 §1): vswitchd (hv1)
/// claims its `chassisredirect` binding as the gateway chassis, answers ARP for the
/// router's external addresses on the provider network, SNATs sw0, and serves both
/// floating IPs: the distributed one with its own MAC, the centralized one with the
/// router's. An Open vSwitch chassis (hv2) with a VM on sw0 reaches the outside
/// through it: OVS sends its frames to the gateway port by tunnel, vswitchd runs the
/// router's egress there, and the answers go back by tunnel. Then the gateway port gets
/// an MTU (`options:gateway_mtu`), which vswitchd enforces
/// ([`gateway_mtu_is_enforced`]).
#[test]
fn a_distributed_gateway_port_on_a_provider_network() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-dgp");
    let c = OvnCentral::start(&dir);
    build_dgp(&c, "hv1");
    let f = Fabric::new("odg", 2, 1600);
    let id = std::process::id() % 10000;
    // The physical network: a veth from hv1's namespace to the upstream host's.
    let up = Netns(format!("{}-up", f.ns[0]));
    run(&["ip", "netns", "add", &up.0]);
    let (phys, peer) = (format!("odg{id}p"), format!("odg{id}q"));
    run(&[
        "ip", "link", "add", &phys, "type", "veth", "peer", "name", &peer,
    ]);
    run(&["ip", "link", "set", &phys, "netns", &f.ns[0]]);
    run(&["ip", "link", "set", &peer, "netns", &up.0]);
    f.exec(&f.ns[0], &["ip", "link", "set", &phys, "up"]);
    for args in [
        vec!["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
        vec!["ip", "link", "set", "lo", "up"],
        vec!["ip", "link", "set", &peer, "address", UPSTREAM.1, "up"],
        vec!["ip", "addr", "add", "172.16.0.254/24", "dev", &peer],
        // Full checksums, as a NIC delivers them: a veth hands an AF_XDP socket the
        // kernel's partial ones, with nothing saying so (OVS's AF_XDP guide turns
        // the peer's offload off too).
        vec!["ethtool", "-K", &peer, "tx", "off"],
    ] {
        f.exec(&up.0, &args);
    }
    let taps: Vec<String> = (0..DGP_VMS.len()).map(|i| format!("odg{id}{i}")).collect();
    let mut args = chassis_args(&f, 0, &c, "hv1", &[]);
    for (vm, t) in DGP_VMS.iter().zip(&taps) {
        args.extend(tap(vm.0, t, vm.0));
    }
    args.extend([
        "--uplink".to_string(),
        format!("phys={phys},mode=generic"),
        "--ovn-bridge-mappings".to_string(),
        "physnet:phys".to_string(),
    ]);
    let sw = Vswitchd::start_in(Some(&f.ns[0]), &dir, "hv1", &args);
    let nss: Vec<Netns> = DGP_VMS
        .iter()
        .zip(&taps)
        .map(|(vm, t)| {
            vm_ns(
                &f.ns[0],
                t,
                &format!("{}-{}", f.ns[0], vm.0),
                *vm,
                "10.0.0.1",
            )
        })
        .collect();
    let hv2 = Ovs::ovn_chassis(&f, 1, &dir, "hv2", &c.sb_remote());
    let vm4_addr = format!("{}/24", OVS_VM.2);
    hv2.vif(&f, "vif4", OVS_VM.0, OVS_VM.1, &vm4_addr, 1500);
    f.exec(
        &f.ns[1],
        &["ip", "route", "add", "default", "via", "10.0.0.1"],
    );
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);
    let hv1 = chassis_row(&c, "hv1");
    wait_for(Duration::from_secs(30), "hv1 holds cr-lr0-ext", || {
        (c.sb_get("Port_Binding", "logical_port", "cr-lr0-ext", "chassis") == hv1).then_some(())
    });
    let (vm1, vm2, vm3) = (&nss[0].0, &nss[1].0, &nss[2].0);

    // Outbound: vm3 as the SNAT address, vm1 and vm2 as their floating IPs.
    assert!(ping_ok(vm3, UPSTREAM.2, 20), "vm3 -> upstream (SNAT)");
    assert_eq!(seen_from(vm3, &up.0, UPSTREAM.2, 7101), SNAT_IP);
    assert_eq!(seen_from(vm1, &up.0, UPSTREAM.2, 7102), DIST_FIP.0);
    assert_eq!(seen_from(vm2, &up.0, UPSTREAM.2, 7103), CENT_FIP);
    // Inbound to both floating IPs; the upstream host learned the distributed one at
    // its own MAC, the rest at the gateway port's.
    assert!(
        ping_ok(&up.0, DIST_FIP.0, 20),
        "upstream -> vm1's floating IP"
    );
    assert!(
        ping_ok(&up.0, CENT_FIP, 20),
        "upstream -> vm2's floating IP"
    );
    assert_eq!(seen_from(&up.0, vm1, DIST_FIP.0, 7104), UPSTREAM.2);
    assert_eq!(seen_from(&up.0, vm2, CENT_FIP, 7105), UPSTREAM.2);
    assert!(seen_from(&up.0, vm3, DGP_VMS[2].2, 7106).starts_with("fail"));
    assert_eq!(neighbour(&up.0, DIST_FIP.0), DIST_FIP.1);
    assert_eq!(neighbour(&up.0, CENT_FIP), DGP_MAC);
    assert_eq!(neighbour(&up.0, SNAT_IP), DGP_MAC);
    // From the OVS chassis: by tunnel to the gateway, SNATed there, and back.
    let vm4 = &f.ns[1];
    assert!(ping_ok(vm4, UPSTREAM.2, 20), "vm4 (on OVS) -> upstream");
    assert_eq!(seen_from(vm4, &up.0, UPSTREAM.2, 7107), SNAT_IP);
    assert!(tunnels(&sw)
        .iter()
        .any(|t| t.rx_packets > 0 && t.tx_packets > 0));
    assert_eq!(drops(&sw, "phys", "no_destination"), 0);

    // A gateway MTU: lr0-ext carries IP packets of 1,400 bytes at most.
    c.nbctl(&[
        "set",
        "Logical_Router_Port",
        "lr0-ext",
        "options:gateway_mtu=1400",
    ]);
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);
    gateway_mtu_is_enforced(vm1, vm3, &up.0);
    drop(nss);
    drop(hv2);
}

/// The gateway port's MTU of 1,400 holds both ways (`check_pkt_larger` and the router's
/// ICMP "fragmentation needed", RFC 1191), on hv1, where vm1, vm3 and the gateway are:
/// a datagram of 1,400 bytes passes, one of 1,401 with DF set is answered with
/// "fragmentation needed" and MTU 1,400 (the sender's kernel then caches that path
/// MTU), outbound from vm3 and inbound to either floating IP; a TCP stream from vm1,
/// sent as TSO frames of 1,448-byte segments, shrinks its segments to fit and arrives
/// whole.
fn gateway_mtu_is_enforced(vm1: &str, vm3: &str, up: &str) {
    // First, while no host has learned a path MTU (the upstream host would advertise
    // an MSS that fits from its cached one).
    assert_eq!(path_mtu(vm1, UPSTREAM.2), None);
    tcp_transfer(Some(up), Some(vm1), UPSTREAM.2, 8);
    assert_eq!(path_mtu(vm1, UPSTREAM.2), Some(1400), "vm1's stream");
    for (from, to) in [(vm3, UPSTREAM.2), (up, CENT_FIP), (up, DIST_FIP.0)] {
        mtu_1400_holds(from, to, 28, &["Frag needed", "mtu = 1400"]);
    }
}

/// Pings from `ns` to `ip` with DF set (`headers`: the IP and ICMP header bytes): a
/// packet of 1,400 bytes passes and leaves no path MTU; one of 1,401 is answered with
/// ping's words `error` (the router's ICMP error) and the sender then caches a path
/// MTU of 1,400; 1,400 bytes pass again (the same flow, decided for its size, not the
/// last one's).
fn mtu_1400_holds(ns: &str, ip: &str, headers: u32, error: &[&str]) {
    let fits = ping_df(ns, ip, 1400 - headers);
    assert_eq!(ping_counts(&fits), Some((1, 1)), "{ns} -> {ip}: {fits}");
    assert_eq!(path_mtu(ns, ip), None, "{ns} -> {ip}");
    let big = ping_df(ns, ip, 1401 - headers);
    assert!(error.iter().all(|w| big.contains(w)), "{ns} -> {ip}: {big}");
    assert_eq!(path_mtu(ns, ip), Some(1400), "{ns} -> {ip}");
    let fits = ping_df(ns, ip, 1400 - headers);
    assert_eq!(ping_counts(&fits), Some((1, 1)), "{ns} -> {ip}: {fits}");
}

/// One ping from `ns` to `ip` with DF set and `size` bytes of payload: ping's output.
fn ping_df(ns: &str, ip: &str, size: u32) -> String {
    let size = size.to_string();
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-n", "-c", "1", "-W", "5"])
        .args(["-M", "do", "-s", &size, ip])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The path MTU namespace `ns` has learned towards `ip` (`ip route get`), if any.
fn path_mtu(ns: &str, ip: &str) -> Option<u32> {
    let text = run(&["ip", "-n", ns, "-o", "route", "get", ip]);
    let mut words = text.split_whitespace();
    words.find(|w| *w == "mtu")?;
    words.next()?.parse().ok()
}

/// Gateway failover between vswitchd and Open vSwitch (issue 41 §2), decided by BFD on
/// the tunnels as OVN decides it: lr0's gateway port has two gateway chassis, vswitchd
/// (hv1, priority 20) and Open vSwitch (hv2, priority 10); hv3 is a second vswitchd,
/// a compute chassis with vm3 (the reference chassis that keeps OVS's BFD alive when
/// hv1 is gone: OVN makes a gateway that reaches no other chassis step down). The
/// external network is the fabric's bridge, which both gateways reach (vswitchd
/// through an uplink of its own, OVS through `br-phy`).
///
/// - vswitchd answers the BFD sessions ovn-controller opens to it and opens its own;
///   hv1 holds the gateway port (OVS sees it up and leaves it), and vm3 goes out
///   SNATed through it.
/// - hv1 is killed (SIGKILL: its chassis row stays): the sessions to it go down, OVS
///   claims the gateway port, and vm3's new connections leave through OVS.
#[test]
fn the_gateway_fails_over_from_vswitchd_to_ovs() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovn-ha");
    let c = OvnCentral::start(&dir);
    build_dgp(&c, "hv1");
    c.nbctl(&["lrp-set-gateway-chassis", "lr0-ext", "hv2", "10"]);
    let f = Fabric::new("oha", 3, 1600);
    let id = std::process::id() % 10000;
    let up = external_network(&f, id);
    let vm1_tap = format!("oha{id}a");
    let mut args = chassis_args(&f, 0, &c, "hv1", &tap("vm1", &vm1_tap, "vm1"));
    args.extend([
        "--uplink".to_string(),
        format!("phys=oha{id}p,mode=generic"),
        "--ovn-bridge-mappings".to_string(),
        "physnet:phys".to_string(),
    ]);
    let mut hv1 = Vswitchd::start_in(Some(&f.ns[0]), &dir, "hv1", &args);
    let _vm1 = vm_ns(
        &f.ns[0],
        &vm1_tap,
        &format!("{}-vm1", f.ns[0]),
        DGP_VMS[0],
        "10.0.0.1",
    );
    let hv2 = Ovs::ovn_chassis(&f, 1, &dir, "hv2", &c.sb_remote());
    hv2.vsctl(&[
        "set",
        "open",
        ".",
        "external_ids:ovn-bridge-mappings=physnet:br-phy",
    ]);
    let vm3_tap = format!("oha{id}c");
    let args3 = chassis_args(&f, 2, &c, "hv3", &tap("vm3", &vm3_tap, "vm3"));
    let hv3 = Vswitchd::start_in(Some(&f.ns[2]), &dir, "hv3", &args3);
    let vm3 = vm_ns(
        &f.ns[2],
        &vm3_tap,
        &format!("{}-vm3", f.ns[2]),
        DGP_VMS[2],
        "10.0.0.1",
    );
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);

    // The sessions come up both ways; hv1 holds the gateway port.
    for peer in ["hv1", "hv3"] {
        let iface = format!("ovn-{peer}-0");
        wait_for(
            Duration::from_secs(30),
            &format!("hv2's BFD to {peer} up"),
            || {
                let s = hv2.vsctl(&["get", "interface", &iface, "bfd_status:state"]);
                (s.trim().trim_matches('"') == "up").then_some(())
            },
        );
    }
    wait_for(Duration::from_secs(30), "hv3's BFD sessions up", || {
        let b = ovn(&hv3).bfd;
        let states: Vec<(String, String)> = b.into_iter().map(|b| (b.chassis, b.state)).collect();
        (states == [("hv1".into(), "up".into()), ("hv2".into(), "up".into())]).then_some(())
    });
    let holder = || c.sb_get("Port_Binding", "logical_port", "cr-lr0-ext", "chassis");
    let hv1_row = chassis_row(&c, "hv1");
    wait_for(Duration::from_secs(30), "hv1 holds cr-lr0-ext", || {
        (holder() == hv1_row).then_some(())
    });
    assert!(
        ping_ok(&vm3.0, UPSTREAM.2, 20),
        "vm3 -> upstream through hv1"
    );
    assert_eq!(seen_from(&vm3.0, &up.0, UPSTREAM.2, 7201), SNAT_IP);

    // hv1 dies; OVS takes the gateway port over.
    let t0 = std::time::Instant::now();
    hv1.kill9();
    let hv2_row = chassis_row(&c, "hv2");
    wait_for(Duration::from_secs(30), "hv2 holds cr-lr0-ext", || {
        (holder() == hv2_row).then_some(())
    });
    let took = t0.elapsed();
    eprintln!("the gateway moved from vswitchd to OVS {took:?} after vswitchd was killed");
    assert!(
        ping_ok(&vm3.0, UPSTREAM.2, 30),
        "vm3 -> upstream through hv2"
    );
    assert_eq!(seen_from(&vm3.0, &up.0, UPSTREAM.2, 7202), SNAT_IP);
    // hv3 sees hv1 go down too, within its detection time (3 x 1 s).
    wait_for(Duration::from_secs(10), "hv3's session to hv1 down", || {
        let b = ovn(&hv3).bfd;
        b.iter()
            .any(|b| b.chassis == "hv1" && b.state == "down")
            .then_some(())
    });
    drop((hv2, hv3, vm3));
}

/// The row of chassis `name`.
fn chassis_row(c: &OvnCentral, name: &str) -> String {
    let n = format!("name={name}");
    c.sbctl(&["--bare", "--columns=_uuid", "find", "chassis", &n])
        .trim()
        .to_string()
}

/// The external network on the fabric's bridge: the upstream host (172.16.0.254, in a
/// namespace of its own, returned) and a veth `oha{id}p` in host 0's namespace for
/// vswitchd's provider network uplink. Full checksums from the kernel on both (a veth
/// hands an AF_XDP socket partial ones).
fn external_network(f: &Fabric, id: u32) -> Netns {
    let up = Netns(format!("{}-up", f.ns[0]));
    run(&["ip", "netns", "add", &up.0]);
    let (up_if, up_br) = (format!("oha{id}u"), format!("oha{id}v"));
    let (phys, phys_br) = (format!("oha{id}p"), format!("oha{id}q"));
    for (a, b, ns) in [(&up_if, &up_br, &up.0), (&phys, &phys_br, &f.ns[0])] {
        run(&["ip", "link", "add", a, "type", "veth", "peer", "name", b]);
        run(&["ip", "link", "set", a, "netns", ns]);
        run(&["ip", "link", "set", b, "netns", &f.fabric]);
        let up_in_br = ["ip", "link", "set", b, "mtu", "1600", "master", "br0", "up"];
        f.exec(&f.fabric, &up_in_br);
        f.exec(ns, &["ethtool", "-K", a, "tx", "off"]);
        f.exec(ns, &["ip", "link", "set", a, "up"]);
    }
    for args in [
        vec!["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
        vec!["ip", "link", "set", &up_if, "address", UPSTREAM.1],
        vec!["ip", "addr", "add", "172.16.0.254/24", "dev", &up_if],
    ] {
        f.exec(&up.0, &args);
    }
    up
}
