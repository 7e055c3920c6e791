//! Hosts as network namespaces behind the taps of one vswitchd chassis, and the small
//! servers and clients the OVN NAT and load-balancer tests run in them.

use std::process::Command;
use std::time::Duration;

use super::chassis::{chassis_args, python_ready, tap};
use super::fabric::Fabric;
use super::ovn::OvnCentral;
use super::{run, wait_for, KillOnDrop, Netns, TempDir, Vswitchd};

/// Moves tap `tap` of namespace `from` into a new namespace `ns` as VM `vm`: its MAC
/// and address, IPv6 off, a default route through `gateway`.
pub fn vm_ns(from: &str, tap: &str, ns: &str, vm: (&str, &str, &str), gateway: &str) -> Netns {
    run(&["ip", "netns", "add", ns]);
    let n = Netns(ns.to_string());
    run(&["ip", "-n", from, "link", "set", tap, "netns", ns]);
    let v4 = format!("{}/24", vm.2);
    for args in [
        vec!["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
        vec!["ip", "link", "set", "lo", "up"],
        vec!["ip", "link", "set", tap, "address", vm.1],
        vec!["ip", "link", "set", tap, "up"],
        vec!["ip", "addr", "add", &v4, "dev", tap],
        vec!["ip", "route", "add", "default", "via", gateway],
    ] {
        let mut a = vec!["ip", "netns", "exec", ns];
        a.extend(args);
        run(&a);
    }
    n
}

/// One vswitchd chassis `hv1` in a one-host fabric (tag `tag`) with a tap per host of
/// `hosts` (port, MAC, IPv4), each moved into its own namespace with a default route
/// through `gateway(IPv4)`; returns once every port is up.
pub fn one_chassis(
    tag: &str,
    dir: &TempDir,
    c: &OvnCentral,
    hosts: &[(&str, &str, &str)],
    gateway: fn(&str) -> &'static str,
) -> (Fabric, Vswitchd, Vec<Netns>) {
    let f = Fabric::new(tag, 1, 1600);
    let id = std::process::id() % 10000;
    let taps: Vec<String> = (0..hosts.len()).map(|i| format!("{tag}{id}{i}")).collect();
    let mut ports = Vec::new();
    for (h, t) in hosts.iter().zip(&taps) {
        ports.extend(tap(h.0, t, h.0));
    }
    let sw = Vswitchd::start_in(
        Some(&f.ns[0]),
        dir,
        "hv1",
        &chassis_args(&f, 0, c, "hv1", &ports),
    );
    let nss: Vec<Netns> = hosts
        .iter()
        .zip(&taps)
        .map(|(h, t)| {
            vm_ns(
                &f.ns[0],
                t,
                &format!("{}-{}", f.ns[0], h.0),
                *h,
                gateway(h.2),
            )
        })
        .collect();
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);
    for h in hosts {
        wait_for(Duration::from_secs(30), &format!("{} up", h.0), || {
            (c.sb_get("Port_Binding", "logical_port", h.0, "up") == "true").then_some(())
        });
    }
    (f, sw, nss)
}

/// A backend in `ns` named `name`: a TCP server on 8080 that answers each connection
/// with its name and the address it came from, a UDP server on 5353 that does the same
/// for each datagram.
pub fn backend(ns: &str, name: &str) -> KillOnDrop {
    let script = format!(
        "import socket,threading\n\
         def tcp():\n\
         \x20s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         \x20s.bind(('0.0.0.0',8080)); s.listen(128)\n\
         \x20while True:\n\
         \x20 c,a=s.accept(); c.sendall(('{name} %s\\n'%a[0]).encode()); c.close()\n\
         threading.Thread(target=tcp,daemon=True).start()\n\
         u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.bind(('0.0.0.0',5353))\n\
         print('ready',flush=True)\n\
         while True:\n\
         \x20d,a=u.recvfrom(2048); u.sendto(('{name} %s'%a[0]).encode(),a)\n"
    );
    python_ready(ns, &script).0
}

/// Runs python `script` in `ns`; its stdout.
pub fn py(ns: &str, script: &str) -> String {
    let o = Command::new("ip")
        .args([
            "netns", "exec", ns, "timeout", "120", "python3", "-c", script,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The address a TCP server on `ip`:`port` in `to_ns` saw a connection from `from_ns`
/// come from (the server answers with the peer's address), or "fail".
pub fn seen_from(from_ns: &str, to_ns: &str, ip: &str, port: u16) -> String {
    let server = format!(
        "import socket\n\
         s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         s.bind(('0.0.0.0',{port})); s.listen(8); print('ready',flush=True)\n\
         c,a=s.accept(); c.sendall((a[0]+'\\n').encode()); c.close()\n"
    );
    let _server = python_ready(to_ns, &server);
    let client = format!(
        "import socket\n\
         try:\n\
         \x20s=socket.create_connection(('{ip}',{port}),timeout=10); print(s.makefile().readline().strip())\n\
         except OSError as e:\n\
         \x20print('fail',e)\n"
    );
    py(from_ns, &client).trim().to_string()
}
