//! A change to the Southbound database invalidates exactly the cached decisions it must
//! (issue 39 §2, "the fast path stays fast"), on one vswitchd chassis of a real OVN
//! deployment: switches `sw0` (vm1, vm2) and `sw1` (vm3), each with an ACL that
//! filters, so both run OVN's logical pipeline.
//!
//! - A UDP flow in sw0 is decided by a cached program. An ACL added to sw1 gives a new
//!   pipeline in which sw0 is unchanged: the flow's program is kept (no interpreter
//!   run), and its datagrams still arrive.
//! - An ACL added to sw0 that drops the flow: its program is dropped, and the next
//!   datagrams follow the new rule (none arrives).
//!
//! Datagrams of one flow sent back to back reach the switch several to a burst: the
//! frames of such a run after its first are stepped through the flow's program
//! together (`lflow_together`), and every datagram arrives; through a load balancer,
//! each with its checksums right (the receiver checks them).
//!
//! And wildcard programs (Open vSwitch's megaflows): flows that differ only in what
//! the pipeline never read share one program. New source ports to a peer, and to a
//! load balancer's VIP (each DNAT'd to its one backend), run the interpreter a few
//! times, not once per flow; an ACL that reads the source port makes each flow its
//! own program again, so the one port it drops is dropped. New destinations share a
//! program when the pipeline read only a prefix of them (Open vSwitch's prefix
//! tracking): of 40 addresses of a /25 that vm2 takes as its own, an ACL drops one,
//! exactly, with a handful of interpreter runs (a failed equality reads the address
//! down to its first bit that differs).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use common::chassis::*;
use common::fabric::Fabric;
use common::ovn::OvnCentral;
use common::*;

/// (port, switch, MAC, IPv4).
const VMS: [(&str, &str, &str, &str); 3] = [
    ("vm1", "sw0", "50:54:00:00:01:01", "10.0.0.11"),
    ("vm2", "sw0", "50:54:00:00:01:02", "10.0.0.12"),
    ("vm3", "sw1", "50:54:00:00:01:03", "10.0.1.13"),
];

/// The UDP port vm2 listens on.
const PORT: u16 = 5000;

/// The switches and ports, each switch with an ACL that filters (so that it runs the
/// pipeline: a switch whose ACLs all say `next;` passes every packet and keeps to the
/// L2 rules) yet admits every datagram of these tests: it drops UDP to the discard
/// port.
fn build(c: &OvnCentral) {
    c.nbctl(&["ls-add", "sw0", "--", "ls-add", "sw1"]);
    for (name, sw, mac, ip) in VMS {
        let addrs = format!("{mac} {ip}");
        c.add_vif(sw, name, &addrs);
    }
    for sw in ["sw0", "sw1"] {
        c.nbctl(&["acl-add", sw, "to-lport", "1", "udp.dst == 9", "drop"]);
    }
}

/// Moves tap `tap` of namespace `from` into a new namespace `ns` as VM `vm`, IPv6 off,
/// with the other VMs of its switch as permanent neighbours (no ARP: an ARP frame is
/// never cached, it would blur the count of interpreter runs).
fn vm_ns(from: &str, tap: &str, ns: &str, vm: (&str, &str, &str, &str)) -> Netns {
    run(&["ip", "netns", "add", ns]);
    let n = Netns(ns.to_string());
    run(&["ip", "-n", from, "link", "set", tap, "netns", ns]);
    let v4 = format!("{}/24", vm.3);
    let mut cmds = vec![
        vec!["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
        vec!["ip", "link", "set", "lo", "up"],
        vec!["ip", "link", "set", tap, "address", vm.2],
        vec!["ip", "link", "set", tap, "up"],
        vec!["ip", "addr", "add", &v4, "dev", tap],
    ];
    for other in VMS.iter().filter(|o| o.1 == vm.1 && o.0 != vm.0) {
        cmds.push(vec![
            "ip",
            "neigh",
            "replace",
            other.3,
            "lladdr",
            other.2,
            "dev",
            tap,
            "nud",
            "permanent",
        ]);
    }
    for args in cmds {
        let mut a = vec!["ip", "netns", "exec", ns];
        a.extend(args);
        run(&a);
    }
    n
}

/// A UDP server on `port` in `ns` that runs `each` (Python, with the socket `s`) for
/// each datagram, once it is bound; its standard output, past its "ready" line.
fn udp_server(ns: &str, port: u16, each: &str) -> (KillOnDrop, BufReader<ChildStdout>) {
    let script = format!(
        "import socket\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',{port}))\n\
         print('ready',flush=True)\n\
         while True:\n {each}\n"
    );
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    (KillOnDrop(child), out)
}

/// A UDP receiver on `PORT` in `ns`; the count of datagrams it got.
fn udp_sink(ns: &str) -> (KillOnDrop, Arc<AtomicU64>) {
    let (child, out) = udp_server(ns, PORT, "s.recv(2048); print('d',flush=True)");
    let n = Arc::new(AtomicU64::new(0));
    let count = n.clone();
    std::thread::spawn(move || {
        for _ in out.lines().map_while(Result::ok) {
            count.fetch_add(1, Relaxed);
        }
    });
    (child, n)
}

/// Sends `n` datagrams of one flow (source port 40000) from `ns` to `ip`:`PORT`.
fn send(ns: &str, ip: &str, n: u32) {
    let script = format!(
        "import socket,time\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',40000))\n\
         for i in range({n}):\n s.sendto(b'x'*64,('{ip}',{PORT})); time.sleep(0.01)\n"
    );
    run(&["ip", "netns", "exec", ns, "python3", "-c", &script]);
}

/// Sends `n` datagrams of one flow (source port 40001) from `ns` to `ip`:`PORT`, back
/// to back.
fn blast(ns: &str, ip: &str, n: u32) {
    let script = format!(
        "import socket\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',40001))\n\
         for i in range({n}):\n s.sendto(b'x'*64,('{ip}',{PORT}))\n"
    );
    run(&["ip", "netns", "exec", ns, "python3", "-c", &script]);
}

/// vm1 (in `ns`) reaches `vip` as a neighbour at vm2's MAC (no ARP: see vm_ns).
fn vip_neighbour(ns: &str, vip: &str) {
    let dev = format!("pc{}1", std::process::id() % 10000);
    run(&[
        "ip",
        "netns",
        "exec",
        ns,
        "ip",
        "neigh",
        "replace",
        vip,
        "lladdr",
        VMS[1].2,
        "dev",
        &dev,
        "nud",
        "permanent",
    ]);
}

/// A UDP echo server on `port` in `ns`.
fn udp_echo(ns: &str, port: u16) -> KillOnDrop {
    udp_server(ns, port, "d,a=s.recvfrom(2048); s.sendto(d,a)").0
}

/// Sends `n` datagrams back to back from `ns` (source port 40002) to `ip`:`port` on
/// a connected socket (it takes only answers from there), then counts the answers
/// that come within 3 s of each other.
fn round_trips(ns: &str, ip: &str, port: u16, n: u32) -> u32 {
    round_trips_of(ns, (ip, port), n, 64)
}

/// [`round_trips`] of datagrams of `payload` bytes.
fn round_trips_of(ns: &str, (ip, port): (&str, u16), n: u32, payload: usize) -> u32 {
    let script = format!(
        "import socket\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',40002))\n\
         s.connect(('{ip}',{port})); s.settimeout(3)\n\
         for i in range({n}): s.send(b'%0{payload}d'%i)\n\
         got=0\n\
         try:\n\
         \x20while got<{n}: s.recv(2048); got+=1\n\
         except socket.timeout: pass\n\
         print(got)\n"
    );
    run(&["ip", "netns", "exec", ns, "python3", "-c", &script])
        .trim()
        .parse()
        .unwrap()
}

/// An `allow-related` ACL for UDP on sw0: each datagram goes through conntrack in
/// its sender's zone and its receiver's.
fn stateful_udp_acl(c: &OvnCentral) {
    c.nbctl(&[
        "--wait=hv",
        "acl-add",
        "sw0",
        "from-lport",
        "1000",
        "udp",
        "allow-related",
    ]);
}

/// Frames stepped through their program together with earlier frames of their flow,
/// over all PMDs.
fn together(sw: &Vswitchd) -> u64 {
    pmd_stats(&sw.control)
        .iter()
        .map(|r| r.lflow_together)
        .sum()
}

/// Sends one datagram from each source port of `ports` from `ns` to `ip`:`PORT`.
fn send_from_ports(ns: &str, ip: &str, ports: std::ops::Range<u16>) {
    let script = format!(
        "import socket,time\n\
         for p in range({}, {}):\n\
         \x20s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',p))\n\
         \x20s.sendto(b'x'*64,('{ip}',{PORT})); s.close(); time.sleep(0.005)\n",
        ports.start, ports.end
    );
    run(&["ip", "netns", "exec", ns, "python3", "-c", &script]);
}

/// (program hits, interpreter runs, programs kept, programs dropped, wildcard hits)
/// over all PMDs.
fn lflow(sw: &Vswitchd) -> [u64; 5] {
    pmd_stats(&sw.control).iter().fold([0; 5], |a, r| {
        [
            a[0] + r.lflow_hits,
            a[1] + r.lflow_misses,
            a[2] + r.lflow_kept,
            a[3] + r.lflow_dropped,
            a[4] + r.lflow_wild_hits,
        ]
    })
}

/// One chassis hv1 with the three VMs in their namespaces, every port up, and a UDP
/// sink on vm2 (`got` counts what it received). Bind its fields in this order (`let
/// Setup { _f, _dir, c, sw, nss, _sink, got } = ...`): locals drop in reverse, so the
/// sink stops before its namespace goes, the central and vswitchd before their
/// directory.
struct Setup {
    _f: Fabric,
    _dir: TempDir,
    c: OvnCentral,
    sw: Vswitchd,
    nss: Vec<Netns>,
    _sink: KillOnDrop,
    got: Arc<AtomicU64>,
}

fn setup(prefix: &str) -> Setup {
    setup_host();
    let f = Fabric::new(prefix, 1, 1600);
    let dir = TempDir::new(&format!("ovn-program-cache-{prefix}"));
    let c = OvnCentral::start(&dir);
    build(&c);
    let id = std::process::id() % 10000;
    let taps: Vec<String> = VMS.iter().map(|v| format!("pc{id}{}", &v.0[2..])).collect();
    let mut ports = Vec::new();
    for (vm, t) in VMS.iter().zip(&taps) {
        ports.extend(tap(vm.0, t, vm.0));
    }
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
    let (sink, got) = udp_sink(&nss[1].0);
    Setup {
        _f: f,
        _dir: dir,
        c,
        sw,
        nss,
        _sink: sink,
        got,
    }
}

#[test]
fn a_change_to_one_switch_keeps_the_other_switchs_cached_decisions() {
    let _g = serial();
    let Setup {
        _f,
        _dir,
        c,
        sw,
        nss,
        _sink,
        got,
    } = setup("opc");
    let vm1 = &nss[0].0;
    let vm2_ip = VMS[1].3;

    // Warm: the flow's program is cached after its first datagram.
    send(vm1, vm2_ip, 20);
    wait_for(Duration::from_secs(10), "20 datagrams at vm2", || {
        (got.load(Relaxed) >= 20).then_some(())
    });
    let before = lflow(&sw);
    assert!(before[0] >= 15, "the flow hits its program: {before:?}");

    // sw1 changes: sw0's datapath keeps its version, the flow its program.
    c.nbctl(&[
        "--wait=hv",
        "acl-add",
        "sw1",
        "to-lport",
        "900",
        "udp.dst == 7",
        "allow",
    ]);
    let got0 = got.load(Relaxed);
    send(vm1, vm2_ip, 20);
    wait_for(Duration::from_secs(10), "20 more datagrams at vm2", || {
        (got.load(Relaxed) >= got0 + 20).then_some(())
    });
    let after = lflow(&sw);
    eprintln!("sw1 changed: {before:?} -> {after:?}");
    assert!(
        after[2] > before[2],
        "programs kept: {before:?} -> {after:?}"
    );
    assert_eq!(after[1], before[1], "no interpreter run for sw0's flow");
    assert!(after[0] >= before[0] + 20, "its datagrams hit the cache");

    // sw0 changes: a drop for the flow. Its program goes; the next datagram is dropped.
    let acl = format!("udp.dst == {PORT}");
    c.nbctl(&[
        "--wait=hv",
        "acl-add",
        "sw0",
        "from-lport",
        "2000",
        &acl,
        "drop",
    ]);
    let got1 = got.load(Relaxed);
    send(vm1, vm2_ip, 20);
    let dropped = wait_for(Duration::from_secs(10), "the datagrams decided", || {
        let now = lflow(&sw);
        (now[0] + now[1] >= after[0] + after[1] + 20).then_some(now)
    });
    eprintln!("sw0 changed: {after:?} -> {dropped:?}");
    assert!(dropped[3] > after[3], "programs dropped: {dropped:?}");
    assert!(dropped[1] > after[1], "the interpreter ran for sw0's flow");
    assert_eq!(
        got.load(Relaxed),
        got1,
        "no datagram passed the new drop ACL"
    );
    drop(nss);
}

#[test]
fn a_flows_back_to_back_frames_are_stepped_together_and_all_arrive() {
    let _g = serial();
    let Setup {
        _f,
        _dir,
        c,
        sw,
        nss,
        _sink,
        got,
    } = setup("opt");
    // A stateful ACL: each frame goes through conntrack in vm1's zone and vm2's.
    stateful_udp_acl(&c);
    let (vm1, vm2_ip) = (&nss[0].0, VMS[1].3);
    // Warm: the connection committed, the flow's programs cached.
    send(vm1, vm2_ip, 5);
    wait_for(Duration::from_secs(10), "5 datagrams at vm2", || {
        (got.load(Relaxed) >= 5).then_some(())
    });
    let before = together(&sw);
    // Fewer than vm2's socket holds: every one is to arrive.
    blast(vm1, vm2_ip, 150);
    wait_for(Duration::from_secs(10), "150 more datagrams at vm2", || {
        (got.load(Relaxed) >= 155).then_some(())
    });
    let after = together(&sw);
    eprintln!("stepped together: {before} -> {after}");
    assert!(after > before, "no frame was stepped together: {after}");
    drop(nss);
}

#[test]
fn a_load_balanced_flows_back_to_back_frames_are_stepped_together_and_translated() {
    let _g = serial();
    let Setup {
        _f,
        _dir,
        c,
        sw,
        nss,
        _sink,
        ..
    } = setup("opl");
    // A stateful ACL and a load balancer: each frame to the VIP is DNAT'd in vm1's
    // zone, each answer un-DNAT'd there, both through vm2's zone too.
    stateful_udp_acl(&c);
    let (vip, port, vm2_ip) = ("10.0.0.101", 5001, VMS[1].3);
    let (lb_vip, lb_backend) = (format!("{vip}:{port}"), format!("{vm2_ip}:{port}"));
    c.nbctl(&["lb-add", "lb1", &lb_vip, &lb_backend, "udp"]);
    c.nbctl(&["--wait=hv", "ls-lb-add", "sw0", "lb1"]);
    let vm1 = &nss[0].0;
    vip_neighbour(vm1, vip);
    let _echo = udp_echo(&nss[1].0, port);
    // Warm: the connection answered (established), its programs cached.
    assert_eq!(round_trips(vm1, vip, port, 5), 5, "answers from the VIP");
    let before = together(&sw);
    // Each answer is taken only from the VIP: every one came back un-DNAT'd.
    assert_eq!(
        round_trips(vm1, vip, port, 150),
        150,
        "answers from the VIP"
    );
    let after = together(&sw);
    eprintln!("stepped together: {before} -> {after}");
    assert!(after > before, "no frame was stepped together: {after}");
    // With checksums computed by the senders (a tap's frames otherwise carry partial
    // ones, which the receiving kernel does not check): the frames of a run after its
    // first are rewritten by the first's patch, and a checksum it got wrong would
    // drop the datagram on receipt. Frames longer than the 256 bytes the pipeline
    // reads too.
    for ns in [vm1, &nss[1].0] {
        full_checksums(ns);
    }
    let mut before = after;
    for payload in [64, 600] {
        assert_eq!(
            round_trips_of(vm1, (vip, port), 150, payload),
            150,
            "answers from the VIP, {payload} B, checksums verified"
        );
        let now = together(&sw);
        assert!(now > before, "no frame of {payload} B was stepped together");
        before = now;
    }
    drop(nss);
}

/// Makes `ns`'s interfaces send frames with their checksums computed (transmit
/// checksum offload off).
fn full_checksums(ns: &str) {
    let script = "for d in /sys/class/net/*; do n=${d##*/}; \
                  [ \"$n\" = lo ] || ethtool -K \"$n\" tx off; done";
    run(&["ip", "netns", "exec", ns, "sh", "-c", script]);
}

#[test]
fn new_flows_share_a_wildcard_program_unless_the_pipeline_reads_their_source_port() {
    let _g = serial();
    let Setup {
        _f,
        _dir,
        c,
        sw,
        nss,
        _sink,
        got,
    } = setup("opw");
    let vm1 = &nss[0].0;
    let vm2_ip = VMS[1].3;
    let vip = "10.0.0.100";
    let (lb_vip, lb_backend) = (format!("{vip}:{PORT}"), format!("{vm2_ip}:{PORT}"));
    c.nbctl(&["lb-add", "lb0", &lb_vip, &lb_backend, "udp"]);
    c.nbctl(&["--wait=hv", "ls-lb-add", "sw0", "lb0"]);
    vip_neighbour(vm1, vip);

    // 40 new flows to vm2, then 40 to the VIP: a handful of interpreter runs each.
    for (dst, ports, what) in [
        (vm2_ip, 41000..41040, "vm2"),
        (vip, 42000..42040, "the VIP"),
    ] {
        let (before, got0) = (lflow(&sw), got.load(Relaxed));
        send_from_ports(vm1, dst, ports);
        arrived(&got, got0 + 40, &format!("40 datagrams to {what} at vm2"));
        shared(before, lflow(&sw), (4, 36), &format!("40 flows to {what}"));
    }

    // An ACL on the source port: each flow is decided by its own reading of it.
    c.nbctl(&[
        "--wait=hv",
        "acl-add",
        "sw0",
        "from-lport",
        "2000",
        "udp.src == 43003",
        "drop",
    ]);
    let (before, got0) = (lflow(&sw), got.load(Relaxed));
    send_from_ports(vm1, vm2_ip, 43000..43008);
    wait_for(Duration::from_secs(10), "7 datagrams at vm2", || {
        (got.load(Relaxed) >= got0 + 7).then_some(())
    });
    let decided = wait_for(Duration::from_secs(10), "8 datagrams decided", || {
        let now = lflow(&sw);
        (now[0] + now[1] >= before[0] + before[1] + 8).then_some(now)
    });
    eprintln!("8 flows, one dropped by port: {before:?} -> {decided:?}");
    assert_eq!(
        got.load(Relaxed),
        got0 + 7,
        "the datagram from port 43003 was dropped"
    );
    assert_eq!(
        decided[4], before[4],
        "no wildcard program after the ACL: {decided:?}"
    );
    assert!(
        decided[1] - before[1] >= 8,
        "each flow ran the interpreter: {decided:?}"
    );
    drop(nss);
}

/// Waits until vm2's sink counted `n` datagrams in all.
fn arrived(got: &AtomicU64, n: u64, what: &str) {
    wait_for(Duration::from_secs(10), what, || {
        (got.load(Relaxed) >= n).then_some(())
    });
}

/// Asserts that the frames decided between the counters `before` and `after`
/// ([`lflow`]) ran the interpreter at most `runs` times and hit wildcard programs at
/// least `wild` times.
fn shared(before: [u64; 5], after: [u64; 5], (runs, wild): (u64, u64), what: &str) {
    eprintln!("{what}: {before:?} -> {after:?}");
    let d = |i: usize| after[i] - before[i];
    assert!(
        d(1) <= runs,
        "{what}: interpreter runs {before:?} -> {after:?}"
    );
    assert!(
        d(4) >= wild,
        "{what}: wildcard hits {before:?} -> {after:?}"
    );
}

/// Sends one datagram from source port `sport` of `ns` to each `10.0.0.X`:`PORT`, X in
/// `hosts`.
fn send_to_hosts(ns: &str, sport: u16, hosts: std::ops::Range<u8>) {
    let script = format!(
        "import socket,time\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',{sport}))\n\
         for h in range({}, {}):\n\
         \x20s.sendto(b'x'*64,('10.0.0.%d' % h,{PORT})); time.sleep(0.005)\n",
        hosts.start, hosts.end
    );
    run(&["ip", "netns", "exec", ns, "python3", "-c", &script]);
}

#[test]
fn new_destinations_share_a_program_when_the_pipeline_read_a_prefix_of_them() {
    let _g = serial();
    let Setup {
        _f,
        _dir,
        c,
        sw,
        nss,
        _sink,
        got,
    } = setup("opp");
    let (vm1, vm2) = (&nss[0].0, &nss[1].0);
    // vm1 reaches 10.0.0.128/25 through vm2, which takes the prefix as its own.
    let vm2_ip = VMS[1].3;
    run(&[
        "ip",
        "netns",
        "exec",
        vm1,
        "ip",
        "route",
        "add",
        "10.0.0.128/25",
        "via",
        vm2_ip,
    ]);
    run(&[
        "ip",
        "netns",
        "exec",
        vm2,
        "ip",
        "route",
        "add",
        "local",
        "10.0.0.128/25",
        "dev",
        "lo",
    ]);

    // 40 new destinations, which this switch's pipeline does not read: one program.
    let (before, got0) = (lflow(&sw), got.load(Relaxed));
    send_to_hosts(vm1, 44000, 200..240);
    arrived(&got, got0 + 40, "40 datagrams at vm2");
    shared(before, lflow(&sw), (4, 36), "40 destinations");

    // An ACL dropping 10.0.0.230: the datagram to it is dropped, the 39 others pass.
    // Its test reads all of the address it drops and, of the others, the bits down
    // to the first that differs from it (10.0.0.192/27, .224/30, .228/31, .231,
    // .232/29): six programs, not one per destination.
    c.nbctl(&[
        "--wait=hv",
        "acl-add",
        "sw0",
        "from-lport",
        "2000",
        "ip4.dst == 10.0.0.230",
        "drop",
    ]);
    let (before, got0) = (lflow(&sw), got.load(Relaxed));
    send_to_hosts(vm1, 44001, 200..240);
    let decided = wait_for(Duration::from_secs(10), "40 datagrams decided", || {
        let now = lflow(&sw);
        (now[0] + now[1] >= before[0] + before[1] + 40).then_some(now)
    });
    arrived(&got, got0 + 39, "39 datagrams at vm2");
    assert_eq!(
        got.load(Relaxed),
        got0 + 39,
        "the datagram to .230 was dropped"
    );
    shared(before, decided, (8, 32), "40 destinations, one dropped");
    drop(nss);
}
