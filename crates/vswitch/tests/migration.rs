//! Live migration of QEMU guests (TCG) whose network is a vswitchd port.
//!
//! Two QEMU instances per migration: the source on one port, the destination started
//! with `-incoming` on another; QEMU's human monitor drives `migrate`. On one host the
//! peer is a second VM on a third port: it sends 64 MiB of random bytes by TCP into
//! the migrating guest, which verifies their sha256 only after the migrations, so any
//! page vswitchd wrote without marking it in the dirty log shows up as corruption;
//! meanwhile it pings the guest every 10 ms. Across the overlay the peer is the first
//! host's stack behind a tap port.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::footprint::{self, Footprint, Slack};
use common::qemu::{kv, num, Vm, VmSpec};
use common::{serial, tail, wait_for, KillOnDrop, TempDir, Vswitchd};

const MAC: &str = "52:54:00:00:00:0a";
/// The second VM's (the peer's) MAC.
const PEER_MAC: &str = "52:54:00:00:00:0b";
const BLOB: u64 = 64 << 20;
/// Round trips of the migration test: vm1a -> vm1b -> vm1a, five times.
const ROUND_TRIPS: usize = 5;

/// `vswitchctl show`'s migration object of `port` (null without a driver).
fn migration_of(sw: &Vswitchd, port: &str) -> serde_json::Value {
    sw.show_port(port)["migration"].clone()
}

/// What one migration showed.
struct Moved {
    /// Seconds from `migrate` to "completed".
    secs: f64,
    /// The most pages the source port had marked, seen while it migrated.
    pages_marked: u64,
    /// The source port reported logging while the migration ran.
    saw_logging: bool,
}

/// Migrates `src` (on port `from` of `sw`) to a new QEMU on `to_sock`, watching port
/// `from` in `sw`; returns the destination once the source reports "completed" (the
/// source is then quit).
fn migrate(src: Vm, sw: &Vswitchd, from: &str, spec: VmSpec<'_>, uri: &str) -> (Vm, Moved) {
    let dst = Vm::start(spec);
    // QEMU listens on the migration socket once it is ready to receive.
    let path = uri.trim_start_matches("unix:");
    wait_for(
        Duration::from_secs(60),
        "the destination's -incoming socket",
        || Path::new(path).exists().then_some(()),
    );
    src.hmp("migrate_set_parameter max-bandwidth 4G");
    src.hmp("migrate_set_parameter downtime-limit 500");
    let start = Instant::now();
    let out = src.hmp(&format!("migrate -d {uri}"));
    assert!(!out.contains("rror"), "migrate: {out}");
    let mut moved = Moved {
        secs: 0.0,
        pages_marked: 0,
        saw_logging: false,
    };
    loop {
        let m = migration_of(sw, from);
        moved.saw_logging |= m["logging"] == true;
        moved.pages_marked = moved
            .pages_marked
            .max(m["pages_marked"].as_u64().unwrap_or(0));
        let info = src.hmp("info migrate");
        if info.contains("Migration status: completed") {
            break;
        }
        assert!(
            !info.contains("failed") && !info.contains("cancelled"),
            "{}: migration failed:\n{info}",
            src.name
        );
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "{}: migration did not complete in 180 s:\n{info}",
            src.name
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    moved.secs = start.elapsed().as_secs_f64();
    // The source is paused for good: it is killed.
    drop(src);
    (dst, moved)
}

/// Stops `ping` with SIGINT; returns (transmitted, received).
fn stop_ping(ping: &mut KillOnDrop) -> (u64, u64) {
    let ping = &mut ping.0;
    // SAFETY: kill(2) on our own child (`ip netns exec` execs ping in place).
    unsafe { libc::kill(ping.id() as i32, libc::SIGINT) };
    ping.wait().unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(ping.stdout.as_mut().unwrap(), &mut text).unwrap();
    common::ping_counts(&text).unwrap_or_else(|| panic!("no ping summary in {text}"))
}

/// vswitchd's footprint in the steady state of a free server port: `port`'s old
/// connection released and the next connection's device set up, listening (its
/// worker thread and eventfds exist from then until a driver comes), and no control
/// request in flight.
fn settled_footprint(sw: &Vswitchd, port: &str) -> Footprint {
    wait_for(
        Duration::from_secs(10),
        "the old connection released and the port listening again",
        || {
            let p = sw.show_port(port);
            (p["migration"].is_null() && p["listening"] == true).then_some(())
        },
    );
    footprint::quiet(sw.pid(), &sw.control)
}

/// The guest's spec on socket `sock`, its monitor at `mon`, `-incoming uri` if any.
fn guest<'a>(sock: &'a Path, mon: PathBuf, params: &str, incoming: Option<String>) -> VmSpec<'a> {
    guest_on(false, sock, mon, params, incoming)
}

/// [`guest`], on packed virtqueues (`packed=on`) when `packed`.
fn guest_on<'a>(
    packed: bool,
    sock: &'a Path,
    mon: PathBuf,
    params: &str,
    incoming: Option<String>,
) -> VmSpec<'a> {
    VmSpec {
        device: if packed { ",packed=on" } else { "" },
        monitor: Some(mon),
        incoming,
        // `-cpu max` is not migration-safe (QEMU's documentation): guests crashed in
        // their idle loop after some migrations with it; a named model migrates.
        cpu: "qemu64",
        ..VmSpec::new("mig", sock, MAC, params.to_string())
    }
}

/// One vswitchd, ports vm1a and vm1b (the VM's two homes) and vm2, a second VM in the
/// same domain. The guest migrates vm1a -> vm1b -> vm1a five times while vm2 sends it
/// 64 MiB of random bytes by TCP and pings it every 10 ms. Checked:
/// - the sha256 the guest computes after the last migration matches vm2's;
/// - the stream still ran when the last migration completed;
/// - every migration logged pages;
/// - the FDB follows the MAC to the new port within a second of each switch-over
///   (SEND_RARP);
/// - vswitchd holds no more fds (by kind), threads or file mappings than before;
/// - most pings get through.
///
/// Needs QEMU 8 or newer: QEMU 7.2's TCG corrupts the guest across migrations. In a
/// control run of this traffic with QEMU's own virtio-net on taps and no vswitchd, its
/// page allocator panicked, or it hung, in 2 of 6 runs (docs/live-changes.md, "Live migration").
#[test]
fn vm_migrates_back_and_forth_under_traffic() {
    migrates_back_and_forth(false, ROUND_TRIPS);
}

/// As [`vm_migrates_back_and_forth_under_traffic`], with the migrating guest's device on
/// packed virtqueues (`packed=on`): its used descriptors are written into the descriptor
/// ring, which the dirty log must cover, and `GET_VRING_BASE` / `SET_VRING_BASE` carry
/// the ring positions with their wrap counters. Two round trips.
#[test]
fn vm_migrates_back_and_forth_on_packed_rings() {
    migrates_back_and_forth(true, 2);
}

fn migrates_back_and_forth(packed: bool, round_trips: usize) {
    let _g = serial();
    let (major, minor) = common::qemu::qemu_version();
    assert!(
        major >= 8,
        "QEMU {major}.{minor} found; this test needs 8 or newer (QEMU 7.2's TCG corrupts \
         guests across live migrations): run scripts/setup.sh, which installs QEMU 10 from \
         bookworm-backports, or point VSWITCH_QEMU at a newer QEMU"
    );
    let dir = TempDir::new("mig");
    let socks = [dir.path("vm1a.sock"), dir.path("vm1b.sock")];
    let peer_sock = dir.path("vm2.sock");
    let ports = ["vm1a", "vm1b"];
    let sw = Vswitchd::start(
        &dir,
        &[
            format!("--vhost-user=vm1a={}", socks[0].display()),
            format!("--vhost-user=vm1b={}", socks[1].display()),
            format!("--vhost-user=vm2={}", peer_sock.display()),
            "--poll".into(),
            "adaptive".into(),
        ],
    );
    let params = "vm.ip=10.0.0.1 vm.peer=10.0.0.2 vm.test=sink vm.stay=1";
    let mut vm = Vm::start(guest_on(packed, &socks[0], dir.path("mon0"), params, None));
    // The stream runs at 2 MiB/s (32 s): ten migrations take about 5 s here, with two
    // TCG guests on two cores; the test checks the stream outlasted them.
    let peer = Vm::start(VmSpec::new(
        "vm2",
        &peer_sock,
        PEER_MAC,
        format!(
            "vm.ip=10.0.0.2 vm.peer=10.0.0.1 vm.test=source vm.bytes={BLOB} vm.rate={} vm.stay=1",
            2 << 20
        ),
    ));
    vm.wait_lines("RESULT ping", 2, Duration::from_secs(240));
    let features = sw.show_port("vm1a")["negotiated_features"].clone();
    let packed_acked = features
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == "RING_PACKED"));
    assert_eq!(packed_acked, packed, "vm1a's rings: {features}");
    let blob = kv(&peer.wait_lines("RESULT blob", 1, Duration::from_secs(240))[0]);
    let initial = Footprint::of(sw.pid()).fd_count();
    // The footprint after the first round trip (threads, allocator arenas and caches
    // warmed up), compared with the one after the last.
    let mut before = None;
    let mut moves = Vec::new();
    let mut at = 0;
    for k in 0..2 * round_trips {
        let to = 1 - at;
        let uri = format!("unix:{}", dir.path(&format!("mig{k}.sock")).display());
        let spec = guest_on(
            packed,
            &socks[to],
            dir.path(&format!("mon{}", k + 1)),
            params,
            Some(uri.clone()),
        );
        let (dst, moved) = migrate(vm, &sw, ports[at], spec, &uri);
        vm = dst;
        let done = Instant::now();
        // SEND_RARP from the destination QEMU moves the MAC at once.
        while sw.fdb_port(MAC).as_deref() != Some(ports[to]) {
            assert!(
                done.elapsed() < Duration::from_secs(5),
                "migration {k}: the MAC is not on {} after 5 s ({:?}); show {}\nvswitchd log:\n{}\nguest:\n{}",
                ports[to],
                sw.fdb_port(MAC),
                sw.show(),
                sw.log(),
                vm.console()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let follow = done.elapsed();
        eprintln!(
            "migration {k}: {} -> {} in {:.1} s, {} pages marked, MAC moved {:?} after completion",
            ports[at], ports[to], moved.secs, moved.pages_marked, follow
        );
        assert!(
            moved.saw_logging,
            "migration {k}: port {} never showed logging",
            ports[at]
        );
        assert!(moved.pages_marked > 0, "migration {k}: no page marked");
        assert!(
            follow < Duration::from_secs(1),
            "migration {k}: MAC moved after {follow:?}"
        );
        moves.push(moved);
        at = to;
        if k == 1 {
            before = Some(settled_footprint(&sw, "vm1b"));
        }
    }
    assert!(
        peer.lines("RESULT sendfile").is_empty(),
        "the stream ended before the last migration did; console of vm2:\n{}",
        peer.console()
    );
    // The rings first: they tell a guest that stopped looking at its ring (used_event
    // far behind used.idx) from one that stopped refilling it.
    let stalled = || {
        format!(
            "vrings of {}: {:#}\nguest:\n{}\nvm2:\n{}\nstats: {:?}\nvswitchd log:\n{}",
            ports[at],
            sw.show_port(ports[at])["vrings"],
            tail(&vm.console(), 3000),
            tail(&peer.console(), 1500),
            sw.stats(),
            sw.log(),
        )
    };
    let got = vm
        .try_wait_lines("RESULT sink", 1, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("the stream did not finish in 120 s; {}", stalled()));
    let got = kv(&got[0]);
    let flood = kv(&peer.wait_lines("RESULT flood", 1, Duration::from_secs(60))[0]);
    let (tx, rx) = (num(&flood, "sent"), num(&flood, "received"));
    assert_eq!(num(&got, "bytes"), BLOB, "{got:?}");
    assert_eq!(
        got["sha256"], blob["sha256"],
        "the guest's sha256 of the stream vs vm2's"
    );
    let announced = migration_of(&sw, ports[at])["announced"]
        .as_u64()
        .unwrap_or(0);
    assert!(announced > 0, "the last destination announced the MAC");
    // The VM is back on vm1a, vm1b is free again: the same fds and mappings as after
    // the first round trip.
    let before = before.expect("two migrations at least");
    settled_footprint(&sw, "vm1b");
    // Eventfds: a sleeping PMD duplicates the kick fds of its polled queues (the
    // transmit queues of vm1a, vm1b and vm2). RSS is not compared here: the guest's
    // traffic moves through allocator caches (the hostile and soak tests bound it).
    let slack = Slack {
        eventfds: 3,
        rss_kib: u64::MAX / 2,
    };
    let after = footprint::assert_nothing_grows(
        sw.pid(),
        &sw.control,
        &before,
        slack,
        Duration::from_secs(10),
        || sw.log(),
    );
    let (before, after) = (before.fd_count(), after.fd_count());
    let stats = sw.stats();
    let drops: Vec<String> = stats
        .iter()
        .flat_map(|r| {
            r.stats
                .drops
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(move |(k, v)| format!("{}:{k}={v}", r.port))
        })
        .collect();
    let total: f64 = moves.iter().map(|m| m.secs).sum();
    eprintln!(
        "{} migrations in {total:.1} s; 64 MiB verified; vm2's ping: {rx}/{tx} answered \
         ({:.2} % lost, {:.1} per switch-over); fds at start {initial}, after round trip 1 {before}, at \
         the end {after}; drops {drops:?}",
        moves.len(),
        100.0 * (tx - rx) as f64 / tx.max(1) as f64,
        (tx - rx) as f64 / moves.len() as f64
    );
    // A switch-over stops the guest for its downtime and the destination's rings start
    // after it: pings of that gap are lost (TCG makes it long). Most get through.
    assert!(rx * 2 > tx, "ping: {rx} of {tx} answered");
    for r in &stats {
        for (k, v) in &r.stats.drops {
            assert!(
                !(k.contains("bad") || k.contains("protocol")) || *v == 0,
                "{}: {k}={v}",
                r.port
            );
        }
    }
}

/// Across the overlay: host 0 (a namespace with vswitchd, an AF_XDP uplink and a Geneve
/// endpoint) has the guest on vm1a and the peer (its host stack on a tap, VNI 5001);
/// host 1 has port vm1b. The guest migrates to host 1 while the peer pings it every
/// 50 ms: within a second of completion host 0's FDB has the MAC behind host 1's
/// endpoint (the announcement crossed the tunnel), and the peer's pings reach the guest
/// on its new host.
#[test]
fn vm_migrates_to_another_host_across_the_overlay() {
    use common::fabric::Fabric;
    let _g = serial();
    let f = Fabric::new("mo", 2, 1600);
    let dir = TempDir::new("mig-overlay");
    let socks = [dir.path("vm1a.sock"), dir.path("vm1b.sock")];
    let tap = format!("vmo{}", std::process::id() % 10000);
    let sw: Vec<Vswitchd> = (0..2)
        .map(|k| {
            let mut args = vec![
                "--uplink".to_string(),
                format!("u={},mode=generic", f.link[k]),
                "--geneve".into(),
                format!("t={},uplink=u,remote={}", f.addr(k), f.addr(1 - k)),
                "--vhost-user".into(),
                format!("vm1{}={},vni=5001", ["a", "b"][k], socks[k].display()),
                "--poll".into(),
                "adaptive".into(),
            ];
            if k == 0 {
                args.extend(["--tap".into(), format!("peer={tap},vni=5001")]);
            }
            Vswitchd::start_in(Some(&f.ns[k]), &dir, &k.to_string(), &args)
        })
        .collect();
    f.host_on_tap(0, &tap);
    let params = "vm.ip=10.50.0.9 vm.peer=10.50.0.1 vm.test=idle";
    let spec = |k: usize, mon: &str, incoming: Option<String>| VmSpec {
        device: ",host_mtu=1550",
        ..guest(&socks[k], dir.path(mon), params, incoming)
    };
    let vm = Vm::start(spec(0, "mon0", None));
    vm.wait_lines("RESULT ping", 2, Duration::from_secs(240));
    let mut ping = KillOnDrop(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &f.ns[0],
                "ping",
                "-q",
                "-i",
                "0.05",
                "10.50.0.9",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn ping"),
    );
    let uri = format!("unix:{}", dir.path("mig.sock").display());
    let (vm, moved) = migrate(vm, &sw[0], "vm1a", spec(1, "mon1", Some(uri.clone())), &uri);
    let done = Instant::now();
    let remote = format!("remote {}", f.addr(1));
    wait_for(
        Duration::from_secs(5),
        "host 0 to learn the MAC behind host 1",
        || (sw[0].fdb_port(MAC).as_deref() == Some(remote.as_str())).then_some(()),
    );
    let follow = done.elapsed();
    assert_eq!(sw[1].fdb_port(MAC).as_deref(), Some("vm1b"));
    // The peer's frames reach the guest on host 1.
    let ok = f.exec(
        &f.ns[0],
        &["ping", "-c", "3", "-i", "0.2", "-W", "5", "10.50.0.9"],
    );
    assert!(ok.contains(" 0% packet loss"), "{ok}");
    let (tx, rx) = stop_ping(&mut ping);
    eprintln!(
        "overlay migration in {:.1} s ({} pages marked); host 0 followed the MAC {follow:?} \
         after completion; ping {rx}/{tx} answered",
        moved.secs, moved.pages_marked
    );
    assert!(moved.saw_logging && moved.pages_marked > 0);
    assert!(
        follow < Duration::from_secs(1),
        "MAC followed after {follow:?}"
    );
    drop(vm);
}

/// Between two vswitchd chassis of an OVN deployment (issue 28 §3): hv1 is Open
/// vSwitch + ovn-controller with the peer (an internal port in its namespace), hv2 and
/// hv3 are vswitchd with one vhost-user port each for logical port `lsp-vm`. The guest
/// runs on hv2 (`requested-chassis=hv2`); the cloud's migration sequence follows:
/// `requested-chassis=hv2,hv3` with `activation-strategy=rarp` (hv3 joins as the
/// additional chassis, the port blocked there), QEMU's migration to hv3 (its SEND_RARP
/// activates the port on hv3), then `requested-chassis=hv3`. Meanwhile the peer sends
/// the guest 16 MiB by TCP at 2 MiB/s (sha256 checked in the guest) and pings it every
/// 10 ms; the lost pings are reported.
#[test]
fn vm_migrates_between_two_ovn_chassis() {
    use common::chassis::{binding_chassis, chassis_args, ovn_port, HV1_VIF};
    use common::fabric::Fabric;
    use common::ovn::OvnCentral;
    use common::ovs::Ovs;
    let _g = serial();
    let f = Fabric::new("mn", 3, 1600);
    let dir = TempDir::new("mig-ovn");
    let c = OvnCentral::start(&dir);
    c.nbctl(&["ls-add", "sw0"]);
    for (lsp, addr) in [
        ("lsp-hv1", format!("{HV1_VIF} 10.0.0.1")),
        ("lsp-vm", format!("{MAC} 10.0.0.2")),
    ] {
        c.nbctl(&["lsp-add", "sw0", lsp]);
        c.nbctl(&["lsp-set-addresses", lsp, &addr]);
    }
    c.nbctl(&["lsp-set-options", "lsp-vm", "requested-chassis=hv2"]);
    let hv1 = Ovs::ovn_chassis(&f, 0, &dir, "hv1", &c.sb_remote());
    hv1.vif(&f, "vif0", "lsp-hv1", HV1_VIF, "10.0.0.1/24", 1500);
    let socks = [dir.path("hv2.sock"), dir.path("hv3.sock")];
    let sw: Vec<Vswitchd> = (0..2)
        .map(|k| {
            let name = format!("hv{}", k + 2);
            let port = [
                "--vhost-user".to_string(),
                format!("vm={},iface_id=lsp-vm", socks[k].display()),
            ];
            let args = chassis_args(&f, k + 1, &c, &name, &port);
            Vswitchd::start_in(Some(&f.ns[k + 1]), &dir, &name, &args)
        })
        .collect();
    let params = "vm.ip=10.0.0.2 vm.peer=10.0.0.1 vm.test=sink vm.stay=1";
    let vm = Vm::start(guest(&socks[0], dir.path("mon0"), params, None));
    vm.wait_lines("RESULT ping", 1, Duration::from_secs(240));
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    assert_eq!(binding_chassis(&c, "lsp-vm", "chassis"), "hv2");

    // The peer's stream and pings.
    let sender = KillOnDrop(
        Command::new("ip")
            .args(["netns", "exec", &f.ns[0], "python3", "-c"])
            .arg(
                "import socket,hashlib,time,os\n\
                 data=os.urandom(16<<20); h=hashlib.sha256(data).hexdigest()\n\
                 t=time.time()\n\
                 while True:\n\
                 \x20try:\n\
                 \x20\x20s=socket.create_connection(('10.0.0.2',5001),timeout=60); break\n\
                 \x20except OSError:\n\
                 \x20\x20time.sleep(0.2); assert time.time()-t<60\n\
                 t=time.time()\n\
                 for i in range(0,len(data),1<<16):\n\
                 \x20s.sendall(data[i:i+(1<<16)])\n\
                 \x20d=t+(i+(1<<16))/(2<<20)-time.time()\n\
                 \x20if d>0: time.sleep(d)\n\
                 s.close(); print(len(data),h,flush=True)\n",
            )
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3"),
    );
    let flood = common::chassis::ping_flood(&f.ns[0], "10.0.0.2");

    // The cloud asks for both chassis; hv3 joins and blocks the port.
    c.nbctl(&[
        "lsp-set-options",
        "lsp-vm",
        "requested-chassis=hv2,hv3",
        "activation-strategy=rarp",
    ]);
    wait_for(Duration::from_secs(20), "hv3 in additional_chassis", || {
        (binding_chassis(&c, "lsp-vm", "additional_chassis") == "hv3").then_some(())
    });
    wait_for(Duration::from_secs(10), "hv3 holding the binding", || {
        (ovn_port(&sw[1], "vm").role == "additional, awaiting RARP").then_some(())
    });
    let uri = format!("unix:{}", dir.path("mig.sock").display());
    let spec = guest(&socks[1], dir.path("mon1"), params, Some(uri.clone()));
    let (vm, moved) = migrate(vm, &sw[0], "vm", spec, &uri);
    let done = Instant::now();
    wait_for(Duration::from_secs(10), "the port activated on hv3", || {
        (ovn_port(&sw[1], "vm").role == "additional").then_some(())
    });
    let activated = done.elapsed();
    c.nbctl(&["lsp-set-options", "lsp-vm", "requested-chassis=hv3"]);
    wait_for(Duration::from_secs(20), "hv3 the main chassis", || {
        (binding_chassis(&c, "lsp-vm", "chassis") == "hv3").then_some(())
    });

    // The stream ends intact in the guest.
    let mut out = String::new();
    let mut sender = sender;
    std::io::Read::read_to_string(sender.0.stdout.as_mut().unwrap(), &mut out).unwrap();
    let sink = kv(&vm.wait_lines("RESULT sink", 1, Duration::from_secs(240))[0]);
    let (tx, rx) = common::chassis::stop_ping(flood);
    eprintln!(
        "OVN migration hv2 -> hv3 in {:.1} s ({} pages marked); the port active on hv3 {activated:?} \
         after completion; ping every 10 ms: {rx}/{tx} answered ({} lost)",
        moved.secs,
        moved.pages_marked,
        tx - rx
    );
    let mut sent = out.split_whitespace();
    assert_eq!(
        (sent.next(), sent.next()),
        (Some(&*sink["bytes"]), Some(&*sink["sha256"])),
        "the guest's stream"
    );
    assert!(moved.saw_logging && moved.pages_marked > 0);
    assert!(rx > 0 && tx - rx < 100, "ping {rx}/{tx}");
    drop(vm);
}
