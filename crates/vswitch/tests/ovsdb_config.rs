//! vswitchd driven through the Open vSwitch database (`--ovsdb`, docs/ovsdb.md), by the
//! real `ovsdb-server` serving Debian's `vswitch.ovsschema` and the real `ovs-vsctl`,
//! used as OVS's documentation uses it: without `--no-wait`, so every command returns
//! only once vswitchd has applied it and written `cur_cfg` (a command vswitchd does not
//! apply times out, and the test fails). `ovs-vswitchd` is never started.
//!
//! Internal ports are moved into network namespaces and carry pings there (addresses
//! only inside the namespaces, 198.51.100.0/24); vhost-user ports of both modes carry a
//! DPDK testpmd guest's frames. Needs root (taps, namespaces, hugepages).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::chassis::{ping_ok, tap_up};
use common::fabric::Fabric;
use common::looping::{assert_loop_whole, settled};
use common::ovn::wait_gone;
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::qemu::{kv, num, Vm, VmSpec};
use common::{
    pid_file, serial, setup_host, vswitchctl_out, wait_for, GuestSpec, TempDir, Testpmd, Veth,
    Vswitchd,
};

const MAC_A: &str = "52:54:00:0d:b0:0a";
const MAC_B: &str = "52:54:00:0d:b0:0b";

/// A real `ovsdb-server` with a fresh Open_vSwitch database in `dir/ovs`, which is
/// also the run directory (`OVS_RUNDIR`) of ovs-vsctl and vswitchd. Killed on drop.
struct OvsDb {
    dir: PathBuf,
}

impl OvsDb {
    fn start(dir: &TempDir) -> OvsDb {
        let d = dir.path("ovs");
        std::fs::create_dir_all(&d).unwrap();
        let db = OvsDb { dir: d };
        let file = db.dir.join("conf.db");
        run(&[
            "ovsdb-tool",
            "create",
            file.to_str().unwrap(),
            "/usr/share/openvswitch/vswitch.ovsschema",
        ]);
        db.start_server();
        db.vsctl(&["--no-wait", "init"]);
        db
    }

    /// Starts the server on the existing database file.
    fn start_server(&self) {
        let d = &self.dir;
        run(&[
            "ovsdb-server",
            d.join("conf.db").to_str().unwrap(),
            &format!("--remote=punix:{}", d.join("db.sock").display()),
            &format!("--pidfile={}", d.join("db.pid").display()),
            &format!("--log-file={}", d.join("db.log").display()),
            &format!("--unixctl={}", d.join("db.ctl").display()),
            "--detach",
        ]);
    }

    /// SIGKILL, as a crash.
    fn kill(&self) {
        if let Some(pid) = pid_file(&self.dir.join("db.pid")) {
            // SAFETY: kill(2) on the pid our ovsdb-server's pidfile names.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            wait_gone(pid);
        }
    }

    fn remote(&self) -> String {
        format!("unix:{}", self.dir.join("db.sock").display())
    }

    /// `ovs-vsctl ARGS` (waiting for vswitchd, at most 30 s).
    fn vsctl_output(&self, args: &[&str]) -> Output {
        Command::new("ovs-vsctl")
            .arg(format!("--db={}", self.remote()))
            .arg("--timeout=30")
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .output()
            .expect("ovs-vsctl (Debian openvswitch-switch)")
    }

    /// `ovs-vsctl ARGS`; panics with its stderr when it fails.
    fn vsctl(&self, args: &[&str]) -> String {
        let o = self.vsctl_output(args);
        assert!(
            o.status.success(),
            "ovs-vsctl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// `ovs-vsctl get TABLE RECORD COLUMN[:KEY]`, trimmed, quotes removed.
    fn get(&self, table: &str, record: &str, column: &str) -> String {
        let o = self.vsctl_output(&["--no-wait", "get", table, record, column]);
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .trim_matches('"')
            .to_string()
    }

    /// An interface's statistic (`statistics:NAME`), 0 while absent.
    fn stat(&self, iface: &str, name: &str) -> u64 {
        self.get("interface", iface, &format!("statistics:{name}"))
            .parse()
            .unwrap_or(0)
    }

    /// vswitchd on this database, its run directory this one.
    fn vswitchd(&self, dir: &TempDir) -> Vswitchd {
        self.vswitchd_in(dir, None)
    }

    /// [`OvsDb::vswitchd`] in network namespace `ns` (a fabric host).
    fn vswitchd_in(&self, dir: &TempDir, ns: Option<&str>) -> Vswitchd {
        let args = ["--ovsdb".to_string(), self.remote()];
        Vswitchd::start_env(ns, dir, "", &args, &[("OVS_RUNDIR", self.dir.as_path())])
    }
}

impl Drop for OvsDb {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A network namespace, deleted on drop (with the internal ports moved into it, which
/// go back to vswitchd's namespace... or vanish with vswitchd).
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("ovsdb-{tag}-{}", std::process::id());
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(std::process::Stdio::null())
            .status();
        run(&["ip", "netns", "add", &name]);
        run(&["ip", "-n", &name, "link", "set", "lo", "up"]);
        Netns(name)
    }

    /// Moves internal port `tap` here with address `addr`/24, IPv6 off, up.
    fn take(&self, tap: &str, addr: &str) {
        let ns = &self.0;
        run(&["ip", "link", "set", tap, "netns", ns]);
        run(&[
            "ip",
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
        ]);
        run(&[
            "ip",
            "-n",
            ns,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            tap,
        ]);
        run(&["ip", "-n", ns, "link", "set", tap, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(args: &[&str]) -> String {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]);
    common::output_of(args, c, "openvswitch-switch / iproute2")
}

/// A netdev bridge `br` with internal ports `ports` (one `ovs-vsctl` command each).
fn bridge_with_internal_ports(db: &OvsDb, br: &str, ports: &[&str]) {
    db.vsctl(&[
        "add-br",
        br,
        "--",
        "set",
        "bridge",
        br,
        "datapath_type=netdev",
    ]);
    for p in ports {
        db.vsctl(&[
            "add-port",
            br,
            p,
            "--",
            "set",
            "interface",
            p,
            "type=internal",
        ]);
    }
}

/// add-br, add-port of internal ports, each returning once applied: the ports run
/// (vswitchctl show), `ofport` is stable (65534 for the bridge's own port), pings cross
/// the bridge between namespaces, `link_state` is up and `statistics` grow; `vswitchctl
/// add-port`/`del-port` are refused; del-port and del-br remove the ports.
#[test]
fn internal_ports_ping_across_a_bridge_made_with_ovs_vsctl() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-internal");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr0", &["ovp1", "ovp2"]);
    // ovs-vsctl returned: vswitchd has applied it (cur_cfg), no waiting needed.
    for p in ["ovbr0", "ovp1", "ovp2"] {
        assert!(sw.find_port(p).is_some(), "{p} not running: {}", sw.show());
    }
    assert_eq!(db.get("interface", "ovbr0", "ofport"), "65534");
    let (of1, of2) = (
        db.get("interface", "ovp1", "ofport"),
        db.get("interface", "ovp2", "ofport"),
    );
    assert!(
        of1 != of2 && of1.parse::<i64>().unwrap() > 0 && of2.parse::<i64>().unwrap() > 0,
        "ofports {of1} {of2}"
    );
    assert_eq!(
        db.get("open_vswitch", ".", "cur_cfg"),
        db.get("open_vswitch", ".", "next_cfg")
    );
    assert!(db
        .get("open_vswitch", ".", "iface_types")
        .contains("dpdkvhostuser"));

    let (a, b) = (Netns::new("a"), Netns::new("b"));
    a.take("ovp1", "198.51.100.1");
    b.take("ovp2", "198.51.100.2");
    let before = db.stat("ovp1", "rx_packets");
    assert!(ping_ok(&a.0, "198.51.100.2", 10), "no ping across ovbr0");
    assert_eq!(db.get("interface", "ovp1", "link_state"), "up");
    wait_for(Duration::from_secs(15), "ovp1's rx_packets to grow", || {
        (db.stat("ovp1", "rx_packets") > before).then_some(())
    });
    // A change that asks nothing of the switch publishes no new topology (the PMDs'
    // flow caches stay warm).
    let generation = common::chassis::generation(&sw);
    db.vsctl(&["set", "open_vswitch", ".", "external_ids:note=unrelated"]);
    assert_eq!(common::chassis::generation(&sw), generation);
    // A later command does not renumber a port.
    db.vsctl(&[
        "add-port",
        "ovbr0",
        "ovp3",
        "--",
        "set",
        "interface",
        "ovp3",
        "type=internal",
    ]);
    assert_eq!(db.get("interface", "ovp1", "ofport"), of1);

    for (cmd, args) in [
        ("add-port", vec!["--tap", "x=ovx0"]),
        ("del-port", vec!["ovp1"]),
    ] {
        let mut all = vec![cmd];
        all.extend(args);
        let o = vswitchctl_out(&sw.control, &all);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains("ovs-vsctl"), "{cmd}: {e}");
    }

    // A reload applies the file's settings and keeps the database's ports.
    let o = vswitchctl_out(&sw.control, &["reload"]);
    assert!(o.status.success(), "reload: {o:?}");
    assert!(sw.find_port("ovp1").is_some(), "a reload dropped ovp1");
    db.vsctl(&["del-port", "ovp2"]);
    assert!(sw.find_port("ovp2").is_none(), "ovp2 still runs");
    assert!(sw.find_port("ovp1").is_some(), "ovp1 went with ovp2");
    db.vsctl(&["del-br", "ovbr0"]);
    assert!(
        sw.show()["ports"].as_array().unwrap().is_empty(),
        "ports left after del-br: {}",
        sw.show()
    );
}

/// `mtu_request` sets an internal port's MTU (the device's and the row's `mtu`), `mac`
/// its Ethernet address (and `mac_in_use`); a bad `mac` is the row's `error`.
#[test]
fn mtu_request_and_mac_set_the_device() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-mtu");
    let db = OvsDb::start(&dir);
    let _sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr1", &["ovm1"]);
    db.vsctl(&["set", "interface", "ovm1", "mtu_request=1400"]);
    let link = run(&["ip", "link", "show", "ovm1"]);
    assert!(link.contains("mtu 1400"), "{link}");
    wait_for(Duration::from_secs(5), "Interface ovm1 mtu 1400", || {
        (db.get("interface", "ovm1", "mtu") == "1400").then_some(())
    });
    db.vsctl(&["set", "interface", "ovm1", "mac=\"02:00:00:0d:b0:31\""]);
    let link = run(&["ip", "link", "show", "ovm1"]);
    assert!(link.contains("02:00:00:0d:b0:31"), "{link}");
    wait_for(Duration::from_secs(5), "Interface ovm1 mac_in_use", || {
        (db.get("interface", "ovm1", "mac_in_use") == "02:00:00:0d:b0:31").then_some(())
    });
    db.vsctl(&["set", "interface", "ovm1", "mac=\"not-a-mac\""]);
    assert!(db
        .get("interface", "ovm1", "error")
        .contains("expected xx:xx"));
    db.vsctl(&["del-br", "ovbr1"]);
}

/// Bridges are isolated: ports on two bridges in one subnet do not reach each other;
/// a port's `tag` puts it in a VLAN of its bridge only; a `fail_mode=secure` bridge
/// forwards nothing between ports that are no OVN logical ports.
#[test]
fn bridges_and_tags_isolate() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-isolation");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr2", &["ova1", "ova2", "ova3"]);
    bridge_with_internal_ports(&db, "ovbr3", &["ovb1"]);
    db.vsctl(&["set", "port", "ova3", "tag=10"]);
    let ns: Vec<Netns> = ["i1", "i2", "i3", "i4"]
        .iter()
        .map(|t| Netns::new(t))
        .collect();
    ns[0].take("ova1", "198.51.100.11");
    ns[1].take("ova2", "198.51.100.12");
    ns[2].take("ova3", "198.51.100.13");
    ns[3].take("ovb1", "198.51.100.14");
    assert!(
        ping_ok(&ns[0].0, "198.51.100.12", 10),
        "same bridge, same VLAN"
    );
    assert!(
        !ping_ok(&ns[0].0, "198.51.100.14", 3),
        "ping crossed bridges"
    );
    assert!(!ping_ok(&ns[0].0, "198.51.100.13", 3), "ping crossed VLANs");
    // Domains are shown with their bridge's name.
    assert_eq!(sw.show_port("ova3")["domain"], "bridge ovbr2 vlan 10");
    assert_eq!(sw.show_port("ovb1")["domain"], "bridge ovbr3 untagged");
    let fdb = String::from_utf8_lossy(&vswitchctl_out(&sw.control, &["fdb"]).stdout).to_string();
    assert!(fdb.contains("bridge ovbr2 untagged"), "{fdb}");
    // Untagging the port changes its domain in place: it now reaches ova1.
    db.vsctl(&["clear", "port", "ova3", "tag"]);
    assert!(
        ping_ok(&ns[2].0, "198.51.100.11", 10),
        "ova3 untagged cannot reach ova1"
    );
    // fail_mode=secure: no port here is an OVN logical port, so nothing is forwarded
    // (dropped as ovn_unbound, counted); back to standalone, in place.
    db.vsctl(&["set-fail-mode", "ovbr2", "secure"]);
    assert!(
        !ping_ok(&ns[0].0, "198.51.100.12", 3),
        "a secure bridge forwarded"
    );
    assert!(common::chassis::drops(&sw, "ova1", "ovn_unbound") > 0);
    db.vsctl(&["del-fail-mode", "ovbr2"]);
    assert!(
        ping_ok(&ns[0].0, "198.51.100.12", 10),
        "standalone again, no ping"
    );
    db.vsctl(&["del-br", "ovbr2"]);
    db.vsctl(&["del-br", "ovbr3"]);
}

/// Trunks as Open vSwitch has them: an internal port without `tag` carries every VLAN
/// of its bridge, tagged (the kernel's VLAN devices on it reach the access ports of
/// VLANs 10 and 20); `trunks=10` leaves VLAN 20 out (dropped as `vlan_tagged`);
/// `vlan_mode=native-untagged` with `tag=10` takes the untagged device into VLAN 10.
#[test]
fn trunks_and_native_vlans_carry_the_access_ports_vlans() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-trunks");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr4", &["ovt1", "ovv10", "ovv20"]);
    db.vsctl(&["set", "port", "ovv10", "tag=10"]);
    db.vsctl(&["set", "port", "ovv20", "tag=20"]);
    let ns: Vec<Netns> = ["t1", "t10", "t20"].iter().map(|t| Netns::new(t)).collect();
    ns[1].take("ovv10", "198.51.100.11");
    ns[2].take("ovv20", "198.51.100.21");
    // The trunk's namespace: a VLAN interface per VLAN (emulated: the kernel here has
    // no 802.1Q driver), each its own subnet.
    let t = &ns[0].0;
    run(&["ip", "link", "set", "ovt1", "netns", t]);
    run(&["ip", "-n", t, "link", "set", "ovt1", "up"]);
    let mut vlan_ifs = Vec::new();
    for (vid, addr) in [(10, "198.51.100.10/24"), (20, "192.0.2.20/24")] {
        let dev = format!("ovt1v{vid}");
        vlan_ifs.push(common::fabric::vlan_interface(t, "ovt1", &dev, vid));
        run(&["ip", "-n", t, "addr", "add", addr, "dev", &dev]);
        run(&["ip", "-n", t, "link", "set", &dev, "up"]);
    }
    // VLAN 20's access port in its own subnet too.
    run(&["ip", "-n", &ns[2].0, "addr", "flush", "dev", "ovv20"]);
    run(&[
        "ip",
        "-n",
        &ns[2].0,
        "addr",
        "add",
        "192.0.2.21/24",
        "dev",
        "ovv20",
    ]);
    assert!(
        ping_ok(t, "198.51.100.11", 10),
        "trunk (VLAN 10) -> access 10"
    );
    assert!(ping_ok(t, "192.0.2.21", 10), "trunk (VLAN 20) -> access 20");
    assert!(
        sw.show_port("ovt1")["domain"]
            .as_str()
            .is_some_and(|d| d.contains("trunk of every vlan")),
        "{}",
        sw.show_port("ovt1")
    );

    // trunks=10: VLAN 20 no longer crosses the port.
    db.vsctl(&["set", "port", "ovt1", "trunks=10"]);
    assert!(ping_ok(t, "198.51.100.11", 10), "trunks=10: VLAN 10");
    let before = common::chassis::drops(&sw, "ovt1", "vlan_tagged");
    assert!(
        !ping_ok(t, "192.0.2.21", 3),
        "VLAN 20 crossed a trunks=10 port"
    );
    assert!(common::chassis::drops(&sw, "ovt1", "vlan_tagged") > before);

    // native-untagged on VLAN 10: the untagged device is in VLAN 10.
    drop(vlan_ifs.remove(0));
    run(&[
        "ip",
        "-n",
        t,
        "addr",
        "add",
        "198.51.100.10/24",
        "dev",
        "ovt1",
    ]);
    db.vsctl(&[
        "set",
        "port",
        "ovt1",
        "tag=10",
        "vlan_mode=native-untagged",
        "trunks=20",
    ]);
    assert!(ping_ok(t, "198.51.100.11", 10), "native-untagged VLAN 10");
    assert!(
        ping_ok(t, "192.0.2.21", 10),
        "VLAN 20, tagged, beside the native VLAN"
    );
    db.vsctl(&["del-br", "ovbr4"]);
}

/// A row vswitchd cannot apply gets `error` and `ofport` -1 (ovs-vsctl reports it),
/// the other rows still apply, and fixing the row clears the error; a bridge of the
/// kernel datapath is refused on its interfaces.
#[test]
fn a_bad_row_gets_an_error_and_fixing_it_clears_it() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-error");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr4", &[]);
    let o = db.vsctl_output(&[
        "add-port",
        "ovbr4",
        "ovg1",
        "--",
        "set",
        "interface",
        "ovg1",
        "type=vxlan",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("Error detected while setting up 'ovg1'"),
        "{stderr}"
    );
    let e = db.get("interface", "ovg1", "error");
    assert!(e.contains("\\\"vxlan\\\" is not supported"), "{e}");
    assert_eq!(db.get("interface", "ovg1", "ofport"), "-1");
    db.vsctl(&[
        "add-port",
        "ovbr4",
        "ove1",
        "--",
        "set",
        "interface",
        "ove1",
        "type=internal",
    ]);
    assert!(
        sw.find_port("ove1").is_some(),
        "a good row waits for a bad one"
    );
    assert!(sw.find_port("ovg1").is_none());
    assert_eq!(sw.show()["ovsdb"]["failed"], serde_json::json!(["ovg1"]));
    let text = vswitchctl_out(&sw.control, &["show"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("not applied (see their Interface error): ovg1"),
        "{text}"
    );

    db.vsctl(&["set", "interface", "ovg1", "type=internal"]);
    assert_eq!(db.get("interface", "ovg1", "error"), "[]");
    assert!(
        db.get("interface", "ovg1", "ofport")
            .parse::<i64>()
            .unwrap()
            > 0
    );
    assert!(sw.find_port("ovg1").is_some());
    assert_eq!(sw.show()["ovsdb"]["failed"], serde_json::json!([]));

    let o = db.vsctl_output(&["add-br", "ovsys"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("ovsys"));
    let e = db.get("interface", "ovsys", "error");
    assert!(e.contains("datapath_type=netdev"), "{e}");
    db.vsctl(&["del-br", "ovsys"]);
    db.vsctl(&["del-br", "ovbr4"]);
}

/// vhost-user ports of both kinds, as OVS-DPDK's guide adds them: `dpdkvhostuser`
/// (vswitchd's socket in `vhost-sock-dir` under the run directory) and
/// `dpdkvhostuserclient` (`options:vhost-server-path`, the guest's server socket),
/// carrying a testpmd guest's frames between them; the rows show both connected and
/// their statistics grow; del-port disconnects one.
#[test]
fn vhost_user_ports_of_both_modes_carry_a_guest() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovsdb-vhost");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    std::fs::create_dir_all(db.dir.join("vhu")).unwrap();
    db.vsctl(&[
        "set",
        "open_vswitch",
        ".",
        "other_config:vhost-sock-dir=vhu",
    ]);
    let server_path = dir.path("vm2.sock");
    bridge_with_internal_ports(&db, "ovbr5", &[]);
    db.vsctl(&[
        "add-port",
        "ovbr5",
        "vm1",
        "--",
        "set",
        "interface",
        "vm1",
        "type=dpdkvhostuser",
    ]);
    db.vsctl(&[
        "add-port",
        "ovbr5",
        "vm2",
        "--",
        "set",
        "interface",
        "vm2",
        "type=dpdkvhostuserclient",
        &format!("options:vhost-server-path={}", server_path.display()),
    ]);
    let sock1 = db.dir.join("vhu/vm1");
    assert!(sock1.exists(), "no socket {}", sock1.display());
    let mut guest = loop_guest(&sock1, &server_path);
    for vm in ["vm1", "vm2"] {
        wait_for(
            Duration::from_secs(20),
            &format!("{vm} link_state up"),
            || (db.get("interface", vm, "link_state") == "up").then_some(()),
        );
        assert_eq!(db.get("interface", vm, "status:status"), "connected");
    }
    assert_eq!(db.get("interface", "vm1", "status:mode"), "server");
    assert_eq!(db.get("interface", "vm2", "status:mode"), "client");
    guest.cmd("start tx_first 4");
    let before = db.stat("vm2", "rx_packets");
    wait_for(Duration::from_secs(20), "vm2's rx_packets to grow", || {
        (db.stat("vm2", "rx_packets") > before + 1000).then_some(())
    });
    assert!(db.stat("vm1", "tx_packets") > 1000, "vm1 tx_packets");
    let (rx, _) = guest.port_stats(1);
    assert!(rx > 1000, "the guest received {rx} frames on vm2");

    db.vsctl(&["del-port", "vm1"]);
    assert!(!sock1.exists(), "vm1's socket left behind");
    assert!(sw.find_port("vm2").is_some());
    db.vsctl(&["del-br", "ovbr5"]);
}

/// One testpmd guest: port 0 a virtio-user client of `sock1`, port 1 a virtio-user
/// server on `sock2`; MAC forwarding, each port's frames addressed to the other's MAC.
fn loop_guest(sock1: &Path, sock2: &Path) -> Testpmd {
    loop_guest_with(sock1, sock2, true)
}

/// [`loop_guest`], port 1 a server (`server2`) or a client of `sock2`.
fn loop_guest_with(sock1: &Path, sock2: &Path, server2: bool) -> Testpmd {
    let server = if server2 { ",server=1" } else { "" };
    let vdev_b = format!(
        "net_virtio_user1,path={}{server},queues=1,queue_size=1024,mac={MAC_B}",
        sock2.display()
    );
    let peers = [
        format!("--eth-peer=0,{MAC_B}"),
        format!("--eth-peer=1,{MAC_A}"),
    ];
    let extra = [vdev_b];
    Testpmd::start(GuestSpec {
        prefix: "ovsdbvhu",
        socket: sock1,
        mac: MAC_A,
        queues: 1,
        server: false,
        extra_vdevs: &extra,
        queue_size: Some(1024),
        packed: false,
        args: &[
            "--forward-mode=mac",
            "--rxd=1024",
            "--txd=1024",
            &peers[0],
            &peers[1],
        ],
    })
}

/// ovsdb-server killed under traffic: pings go on, the ports stay; restarted, vswitchd
/// reconnects, writes the state the restart lost again, and applies later changes.
#[test]
fn ovsdb_server_restart_keeps_traffic_and_later_changes_apply() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-restart");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr6", &["ovr1", "ovr2"]);
    let (a, b) = (Netns::new("r1"), Netns::new("r2"));
    a.take("ovr1", "198.51.100.21");
    b.take("ovr2", "198.51.100.22");
    assert!(ping_ok(&a.0, "198.51.100.22", 10));
    let of1 = db.get("interface", "ovr1", "ofport");

    assert_eq!(sw.show()["ovsdb"]["connects"], 1);
    db.kill();
    wait_for(
        Duration::from_secs(10),
        "show saying the database is away",
        || {
            let c = sw.show()["ovsdb"]["connection"]
                .as_str()
                .unwrap()
                .to_string();
            c.starts_with("disconnected").then_some(())
        },
    );
    let ping = Command::new("ip")
        .args([
            "netns", "exec", &a.0, "ping", "-c", "20", "-i", "0.1", "-W", "1",
        ])
        .arg("198.51.100.22")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ping.stdout);
    let (sent, got) = common::ping_counts(&text).expect("ping summary");
    assert_eq!(
        (sent, got),
        (20, 20),
        "pings lost while ovsdb-server was down: {text}"
    );
    assert!(sw.find_port("ovr1").is_some() && sw.find_port("ovr2").is_some());

    db.start_server();
    // Ephemeral state is gone with the old server; vswitchd writes it again.
    wait_for(Duration::from_secs(20), "link_state written again", || {
        (db.get("interface", "ovr1", "link_state") == "up").then_some(())
    });
    assert_eq!(db.get("interface", "ovr1", "ofport"), of1);
    let ovsdb = &sw.show()["ovsdb"];
    assert_eq!(
        (ovsdb["connection"].as_str(), ovsdb["connects"].as_u64()),
        (Some("connected"), Some(2))
    );
    db.vsctl(&[
        "add-port",
        "ovbr6",
        "ovr3",
        "--",
        "set",
        "interface",
        "ovr3",
        "type=internal",
    ]);
    assert!(
        sw.find_port("ovr3").is_some(),
        "a change after the restart not applied"
    );
    assert!(ping_ok(&a.0, "198.51.100.22", 10));
    db.vsctl(&["del-br", "ovbr6"]);
}

/// A kernel device added as OVS adds one (`add-port br eth1`, type `""`: system) and
/// one as `type=afxdp` become AF_XDP uplinks: pings cross the bridge between each
/// veth's far end and an internal port; the rows show the XDP mode and statistics.
#[test]
fn kernel_devices_become_af_xdp_uplinks() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-afxdp");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    let (v1, v2) = (
        Veth::new("ox", 1, "198.51.100.31"),
        Veth::new("oy", 1, "198.51.100.32"),
    );
    bridge_with_internal_ports(&db, "ovbr7", &["ovi1"]);
    db.vsctl(&["add-port", "ovbr7", &v1.host]);
    db.vsctl(&[
        "add-port",
        "ovbr7",
        &v2.host,
        "--",
        "set",
        "interface",
        &v2.host,
        "type=afxdp",
        "options:xdp-mode=generic",
    ]);
    for v in [&v1, &v2] {
        assert!(
            sw.find_port(&v.host).is_some(),
            "{} not running: {}",
            v.host,
            sw.show()
        );
        assert_eq!(db.get("interface", &v.host, "error"), "[]");
    }
    assert_eq!(db.get("interface", &v2.host, "status:xdp-mode"), "generic");
    let ns = Netns::new("x");
    ns.take("ovi1", "198.51.100.30");
    let before = db.stat(&v1.host, "rx_packets");
    assert!(
        ping_ok(&v1.ns, "198.51.100.30", 10),
        "system port to internal port"
    );
    assert!(
        ping_ok(&v2.ns, "198.51.100.31", 10),
        "afxdp port to system port"
    );
    wait_for(
        Duration::from_secs(15),
        "the system port's rx_packets to grow",
        || (db.stat(&v1.host, "rx_packets") > before).then_some(()),
    );
    // mtu_request sets the NIC's MTU, and the row's mtu shows it.
    db.vsctl(&["set", "interface", &v2.host, "mtu_request=1600"]);
    wait_for(Duration::from_secs(10), "the uplink's MTU 1600", || {
        let mtu = std::fs::read_to_string(format!("/sys/class/net/{}/mtu", v2.host)).ok()?;
        (mtu.trim() == "1600" && db.get("interface", &v2.host, "mtu") == "1600").then_some(())
    });
    db.vsctl(&["del-port", &v1.host]);
    assert!(sw.find_port(&v1.host).is_none());
    assert!(
        ping_ok(&v2.ns, "198.51.100.30", 10),
        "the other uplink went too"
    );
    db.vsctl(&["del-br", "ovbr7"]);
}

/// vswitchd restarted on a populated database: it opens every port again, each with the
/// `ofport` the row had, and `ovs-vsctl` commands wait for it as before.
#[test]
fn vswitchd_restart_takes_the_ports_back_with_their_ofports() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-vsrestart");
    let db = OvsDb::start(&dir);
    let mut sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr8", &["ovs1", "ovs2", "ovs3"]);
    db.vsctl(&["del-port", "ovs1"]);
    let ofports = |db: &OvsDb| -> Vec<String> {
        ["ovbr8", "ovs2", "ovs3"]
            .iter()
            .map(|i| db.get("interface", i, "ofport"))
            .collect()
    };
    let before = ofports(&db);
    sw.stop();
    let sw = db.vswitchd(&dir);
    // Waits for the new vswitchd to apply the database (cur_cfg).
    db.vsctl(&["set", "open_vswitch", ".", "external_ids:test=restart"]);
    for p in ["ovbr8", "ovs2", "ovs3"] {
        assert!(
            sw.find_port(p).is_some(),
            "{p} not running again: {}",
            sw.show()
        );
    }
    assert_eq!(ofports(&db), before, "ofports renumbered by a restart");
    db.vsctl(&["del-br", "ovbr8"]);
}

/// `os_vif_plug.py ACTION ...` (Debian python3-os-vif, as Nova calls it); returns the
/// OVS port name os-vif chose.
fn os_vif(db: &OvsDb, action: &str, vif_id: &str, mac: &str, mode: &str, path: &Path) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/os_vif_plug.py");
    let path = path.to_str().unwrap();
    let args = [
        "/usr/bin/python3",
        script,
        action,
        &db.remote(),
        vif_id,
        mac,
        mode,
        path,
    ];
    let mut c = Command::new(args[0]);
    c.args(&args[1..]).env("OVS_RUNDIR", &db.dir);
    common::output_of(&args, c, "python3-os-vif")
        .trim()
        .to_string()
}

/// Nova's path: os-vif's ovs plugin plugs two `VIFVHostUser`s exactly as Nova calls it
/// (bridge br-int of datapath_type netdev, one VIF whose QEMU is the socket server:
/// `dpdkvhostuserclient`, one whose QEMU is the client: `dpdkvhostuser` in the run
/// directory), a guest on the sockets it names carries traffic through vswitchd, and
/// `os_vif.unplug` removes both.
#[test]
fn os_vif_plugs_and_unplugs_vhost_user_vifs_as_nova_does() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovsdb-osvif");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    let server_path = dir.path("vm-a.sock");
    let (id_a, id_b) = (
        "3f1a2b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b",
        "7c2d3e4f-6a7b-4c8d-9e0f-1a2b3c4d5e6f",
    );
    let a = os_vif(&db, "plug", id_a, MAC_B, "server", &server_path);
    let b = os_vif(&db, "plug", id_b, MAC_A, "client", Path::new("unused"));
    // os-vif does not wait for the switch (no cur_cfg): the test does.
    for p in [&a, &b, &"br-int".to_string()] {
        wait_for(
            Duration::from_secs(10),
            &format!("port {p} running"),
            || sw.find_port(p).map(|_| ()),
        );
    }
    assert_eq!(db.get("interface", &a, "type"), "dpdkvhostuserclient");
    assert_eq!(db.get("interface", &b, "type"), "dpdkvhostuser");
    assert_eq!(db.get("interface", &b, "external_ids:iface-id"), id_b);
    let sock_b = db.dir.join(&b);
    let mut guest = loop_guest(&sock_b, &server_path);
    for vm in [&a, &b] {
        wait_for(
            Duration::from_secs(20),
            &format!("{vm} link_state up"),
            || (db.get("interface", vm, "link_state") == "up").then_some(()),
        );
    }
    guest.cmd("start tx_first 4");
    wait_for(Duration::from_secs(20), "frames through both VIFs", || {
        (db.stat(&a, "rx_packets") > 1000 && db.stat(&b, "rx_packets") > 1000).then_some(())
    });
    assert_eq!(db.get("interface", &b, "mtu"), "1500");

    os_vif(&db, "unplug", id_a, MAC_B, "server", &server_path);
    os_vif(&db, "unplug", id_b, MAC_A, "client", Path::new("unused"));
    for p in [&a, &b] {
        wait_for(Duration::from_secs(10), &format!("port {p} gone"), || {
            sw.find_port(p).is_none().then_some(())
        });
    }
    assert!(!sock_b.exists(), "{} left behind", sock_b.display());
}

/// Changes through the database while a guest loops frames between ports a and b at
/// full rate: a port added, moved between VLANs in place and deleted 10 times, and
/// unrelated rows written; the loop loses nothing (every frame the switch took from
/// one port was delivered to the other, no drop).
#[test]
fn database_changes_under_a_running_loop_lose_nothing() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("ovsdb-loop");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr9", &[]);
    // VLAN 10: the bridge's own internal port (the host's IPv6 chatter) is elsewhere.
    for p in ["a", "b"] {
        db.vsctl(&[
            "add-port",
            "ovbr9",
            p,
            "tag=10",
            "--",
            "set",
            "interface",
            p,
            "type=dpdkvhostuser",
        ]);
    }
    let mut guest = loop_guest_with(&db.dir.join("a"), &db.dir.join("b"), false);
    guest.cmd("start tx_first 4");
    wait_for(Duration::from_secs(20), "the loop running", || {
        (sw.port("a").stats.rx_packets > 10_000).then_some(())
    });
    for i in 0..10 {
        let moved = sw.port("a").stats.rx_packets;
        db.vsctl(&[
            "add-port",
            "ovbr9",
            "c",
            "tag=10",
            "--",
            "set",
            "interface",
            "c",
            "type=dpdkvhostuser",
        ]);
        db.vsctl(&["set", "port", "c", "tag=11"]);
        db.vsctl(&["set", "interface", "a", &format!("external_ids:round={i}")]);
        db.vsctl(&["del-port", "c"]);
        assert!(sw.find_port("c").is_none());
        wait_for(Duration::from_secs(10), "the loop moving", || {
            (sw.port("a").stats.rx_packets > moved).then_some(())
        });
    }
    guest.cmd("stop");
    let (a, b) = settled(&sw);
    assert_loop_whole(&a, &b, 0);
    db.vsctl(&["del-br", "ovbr9"]);
}

/// OVN by the installation guide, vswitchd in place of ovs-vswitchd and
/// ovn-controller, beside an Open vSwitch chassis: the chassis is configured only
/// through `ovs-vsctl` (bridges, `external_ids:ovn-remote`, `system-id`,
/// `ovn-encap-type`, `ovn-encap-ip` on the NIC, which is added to br-phy), its VM port
/// bound by `external_ids:iface-id`; `ovn-nbctl --wait=hv` returns once it is, and
/// pings and TCP cross the Geneve overlay to the OVS chassis both ways.
#[test]
fn an_ovn_chassis_configured_through_the_database() {
    ovn_chassis_by_the_guide(EncapIp::OnTheNic);
}

/// The same in the layout of OVS's userspace guides (`howto/userspace-tunneling`,
/// OVN's DPDK chassis): the NIC, without an address, a port of br-phy, the Encap IP on
/// br-phy's internal port. The kernel answers ARP for it through the bridge, non-tunnel
/// traffic reaches it (the OVS chassis pings it), and Geneve to it is decapsulated.
#[test]
fn an_ovn_chassis_with_the_encap_ip_on_br_phy() {
    ovn_chassis_by_the_guide(EncapIp::OnBrPhy);
}

/// Where the chassis' tunnel endpoint address is.
#[derive(Clone, Copy, PartialEq)]
enum EncapIp {
    OnTheNic,
    OnBrPhy,
}

fn ovn_chassis_by_the_guide(layout: EncapIp) {
    let _g = serial();
    setup_host();
    const MAC0: &str = "02:00:00:0d:b0:01";
    const MAC1: &str = "02:00:00:0d:b0:02";
    let tag = match layout {
        EncapIp::OnTheNic => "odb",
        EncapIp::OnBrPhy => "odbp",
    };
    let f = Fabric::new(tag, 2, 1600);
    let dir = TempDir::new("ovsdb-ovn");
    let c = OvnCentral::start(&dir);
    c.nbctl(&["ls-add", "sw0"]);
    for (lsp, mac, ip) in [("lsp0", MAC0, "192.0.2.1"), ("lsp1", MAC1, "192.0.2.2")] {
        c.nbctl(&["lsp-add", "sw0", lsp]);
        c.nbctl(&["lsp-set-addresses", lsp, &format!("{mac} {ip}")]);
    }
    // hv1: Open vSwitch and ovn-controller, as OVN's guide sets up a hypervisor.
    let hv1 = Ovs::ovn_chassis(&f, 1, &dir, "hv1", &c.sb_remote());
    hv1.vif(&f, "vif1", "lsp1", MAC1, "192.0.2.2/24", 1500);

    // hv0: the database, as the guide writes it.
    let db = OvsDb::start(&dir);
    let hv0 = db.vswitchd_in(&dir, Some(&f.ns[0]));
    let nic = &f.link[0];
    // br-int as ovn-controller makes it: secure, forwarding only logical ports.
    db.vsctl(&[
        "add-br",
        "br-int",
        "--",
        "set",
        "bridge",
        "br-int",
        "datapath_type=netdev",
        "fail_mode=secure",
    ]);
    db.vsctl(&[
        "add-br",
        "br-phy",
        "--",
        "set",
        "bridge",
        "br-phy",
        "datapath_type=netdev",
    ]);
    db.vsctl(&[
        "add-port",
        "br-phy",
        nic,
        "--",
        "set",
        "interface",
        nic,
        "type=afxdp",
        "options:xdp-mode=generic",
    ]);
    if layout == EncapIp::OnBrPhy {
        // The address moves from the NIC to br-phy's internal port (which add-br
        // made: ovs-vsctl returned once vswitchd had applied it).
        let cidr = format!("{}/24", f.addr(0));
        f.exec(&f.ns[0], &["ip", "addr", "flush", "dev", nic]);
        f.exec(&f.ns[0], &["ip", "addr", "add", &cidr, "dev", "br-phy"]);
        f.exec(&f.ns[0], &["ip", "link", "set", "br-phy", "up"]);
        assert!(
            ping_ok(&f.ns[1], &f.addr(0), 10),
            "hv1 -> br-phy's address, through the NIC and br-phy: {}",
            hv0.show()
        );
    }
    db.vsctl(&[
        "add-port",
        "br-int",
        "vm0",
        "--",
        "set",
        "interface",
        "vm0",
        "type=internal",
        "external_ids:iface-id=lsp0",
    ]);
    db.vsctl(&[
        "set",
        "open_vswitch",
        ".",
        &format!("external_ids:ovn-remote={}", c.sb_remote()),
        "external_ids:system-id=hv0",
        "external_ids:ovn-encap-type=geneve",
        &format!("external_ids:ovn-encap-ip={}", f.addr(0)),
        "external_ids:ovn-cms-options=enable-chassis-as-gw",
    ]);
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);
    wait_for(Duration::from_secs(30), "lsp0 bound to hv0", || {
        let ch = c.sb_get("Port_Binding", "logical_port", "lsp0", "chassis");
        (!ch.is_empty()).then_some(())
    });
    let other = c.sb_get("Chassis", "name", "hv0", "other_config");
    for what in [
        "datapath-type=netdev",
        "ovn-cms-options=enable-chassis-as-gw",
    ] {
        assert!(other.contains(what), "{what} in hv0's Chassis: {other}");
    }
    tap_up(&f, 0, "vm0", MAC0, "192.0.2.1/24");
    assert!(
        ping_ok(&f.ns[0], "192.0.2.2", 20),
        "hv0 -> hv1 over the overlay: {}",
        hv0.show()
    );
    assert!(ping_ok(&f.ns[1], "192.0.2.1", 10), "hv1 -> hv0");
    common::tcp_transfer(Some(&f.ns[1]), Some(&f.ns[0]), "192.0.2.2", 4);
    common::tcp_transfer(Some(&f.ns[0]), Some(&f.ns[1]), "192.0.2.1", 4);
    // A reload (no file: flags only) keeps what the database made.
    let o = vswitchctl_out(&hv0.control, &["reload"]);
    assert!(o.status.success(), "reload: {o:?}");
    assert!(
        ping_ok(&f.ns[1], "192.0.2.1", 10),
        "hv1 -> hv0 after a reload"
    );
    let tunnels = common::fabric::tunnels(&hv0);
    let tep = tunnels
        .iter()
        .find(|t| t.local == f.addr(0))
        .unwrap_or_else(|| panic!("no endpoint on the encap IP: {tunnels:?}"));
    assert_eq!(tep.uplink, *nic);
    let device = (layout == EncapIp::OnBrPhy).then(|| "br-phy".to_string());
    assert_eq!(tep.device, device, "{tep:?}");
    assert!(tep.rx_packets > 0 && tep.tx_packets > 0, "{tep:?}");
    if layout == EncapIp::OnBrPhy {
        // The underlay's other traffic still crosses br-phy both ways.
        assert!(ping_ok(&f.ns[0], &f.addr(1), 10), "br-phy -> hv1's address");
    }
    settings_change_while_running(&f, &c, &db, &hv0, layout);
}

/// The chassis follows its `external_ids` while it runs, as ovn-controller does: the
/// CMS options and host name change in place (the Chassis row shows them, lsp0 stays
/// bound), a new `system-id` and `ovn-encap-ip` re-register it (the old row gone, lsp0
/// bound to the new chassis, OVS's chassis tunnels to the new address).
fn settings_change_while_running(
    f: &Fabric,
    c: &OvnCentral,
    db: &OvsDb,
    hv0: &Vswitchd,
    layout: EncapIp,
) {
    db.vsctl(&[
        "set",
        "open_vswitch",
        ".",
        "external_ids:hostname=renamed-hv0",
        "external_ids:ovn-cms-options=enable-chassis-as-gw,availability-zones=az1",
    ]);
    wait_for(
        Duration::from_secs(20),
        "hv0's new settings in its row",
        || {
            let other = c.sb_get("Chassis", "name", "hv0", "other_config");
            let host = c.sb_get("Chassis", "name", "hv0", "hostname");
            (host == "renamed-hv0" && other.contains("availability-zones=az1")).then_some(())
        },
    );
    assert!(
        ping_ok(&f.ns[1], "192.0.2.1", 10),
        "hv1 -> hv0 after an in-place change"
    );

    let holder = match layout {
        EncapIp::OnTheNic => f.link[0].as_str(),
        EncapIp::OnBrPhy => "br-phy",
    };
    f.exec(
        &f.ns[0],
        &["ip", "addr", "add", "198.51.100.11/24", "dev", holder],
    );
    db.vsctl(&[
        "set",
        "open_vswitch",
        ".",
        "external_ids:system-id=hv9",
        "external_ids:ovn-encap-ip=198.51.100.11",
    ]);
    c.wait_chassis("hv9");
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);
    wait_for(Duration::from_secs(30), "lsp0 bound to hv9", || {
        (common::chassis::binding_chassis(c, "lsp0", "chassis") == "hv9").then_some(())
    });
    assert_eq!(
        c.sb_get("Encap", "chassis_name", "hv9", "ip"),
        "198.51.100.11"
    );
    assert_eq!(
        c.sb_get("Chassis", "name", "hv0", "_uuid"),
        "",
        "hv0's row removed"
    );
    assert!(
        ping_ok(&f.ns[0], "192.0.2.2", 20),
        "hv9 -> hv1 after re-registering: {}",
        hv0.show()
    );
    assert!(ping_ok(&f.ns[1], "192.0.2.1", 10), "hv1 -> hv9");
    let tunnels = common::fabric::tunnels(hv0);
    assert!(
        tunnels
            .iter()
            .any(|t| t.local == "198.51.100.11" && t.tx_packets > 0),
        "{tunnels:?}"
    );
}

/// A provider network from `external_ids:ovn-bridge-mappings=physnet1:br-ex`, br-ex
/// holding a NIC (a veth to a "physical network" namespace): the logical switch's
/// localnet port bridges it, and a host there pings the VM port bound on vswitchd.
#[test]
fn an_ovn_provider_network_through_a_mapped_bridge() {
    let _g = serial();
    setup_host();
    const MAC0: &str = "02:00:00:0d:b0:11";
    let f = Fabric::new("odp", 1, 1600);
    let dir = TempDir::new("ovsdb-ovn-pn");
    let c = OvnCentral::start(&dir);
    c.nbctl(&["ls-add", "sw0"]);
    c.nbctl(&["lsp-add", "sw0", "lsp0"]);
    c.nbctl(&["lsp-set-addresses", "lsp0", &format!("{MAC0} 192.0.2.1")]);
    c.nbctl(&["lsp-add", "sw0", "ln-sw0"]);
    c.nbctl(&["lsp-set-type", "ln-sw0", "localnet"]);
    c.nbctl(&["lsp-set-addresses", "ln-sw0", "unknown"]);
    c.nbctl(&["lsp-set-options", "ln-sw0", "network_name=physnet1"]);

    // The physical network: a veth from host 0 to namespace `phys`.
    let phys = Netns::new("pn");
    let id = std::process::id() % 10000;
    let (nic, far) = (format!("odpn{id}a"), format!("odpn{id}b"));
    run(&[
        "ip", "link", "add", &nic, "type", "veth", "peer", "name", &far,
    ]);
    run(&["ip", "link", "set", &nic, "netns", &f.ns[0]]);
    let v6 = format!("net.ipv6.conf.{nic}.disable_ipv6=1");
    f.exec(&f.ns[0], &["sysctl", "-qw", &v6]);
    f.exec(&f.ns[0], &["ip", "link", "set", &nic, "up"]);
    run(&["ip", "link", "set", &far, "netns", &phys.0]);
    let v6 = format!("net.ipv6.conf.{far}.disable_ipv6=1");
    run(&["ip", "netns", "exec", &phys.0, "sysctl", "-qw", &v6]);
    run(&[
        "ip", "netns", "exec", &phys.0, "ethtool", "-K", &far, "tx", "off",
    ]);
    run(&[
        "ip",
        "-n",
        &phys.0,
        "addr",
        "add",
        "192.0.2.3/24",
        "dev",
        &far,
    ]);
    run(&["ip", "-n", &phys.0, "link", "set", &far, "up"]);

    let db = OvsDb::start(&dir);
    let _hv0 = db.vswitchd_in(&dir, Some(&f.ns[0]));
    let link = &f.link[0];
    for br in ["br-int", "br-phy", "br-ex"] {
        db.vsctl(&[
            "add-br",
            br,
            "--",
            "set",
            "bridge",
            br,
            "datapath_type=netdev",
        ]);
    }
    for (br, dev) in [("br-phy", link), ("br-ex", &nic)] {
        db.vsctl(&[
            "add-port",
            br,
            dev,
            "--",
            "set",
            "interface",
            dev,
            "type=afxdp",
            "options:xdp-mode=generic",
        ]);
    }
    db.vsctl(&[
        "add-port",
        "br-int",
        "vm0",
        "--",
        "set",
        "interface",
        "vm0",
        "type=internal",
        "external_ids:iface-id=lsp0",
    ]);
    db.vsctl(&[
        "set",
        "open_vswitch",
        ".",
        &format!("external_ids:ovn-remote={}", c.sb_remote()),
        "external_ids:system-id=hv0",
        "external_ids:ovn-encap-type=geneve",
        &format!("external_ids:ovn-encap-ip={}", f.addr(0)),
        "external_ids:ovn-bridge-mappings=physnet1:br-ex",
    ]);
    c.wait_chassis("hv0");
    c.nbctl(&["--timeout=60", "--wait=hv", "sync"]);
    let mappings = c.sbctl(&["get", "chassis", "hv0", "other_config:ovn-bridge-mappings"]);
    assert_eq!(mappings.trim().trim_matches('"'), format!("physnet1:{nic}"));
    wait_for(Duration::from_secs(30), "lsp0 bound to hv0", || {
        let ch = c.sb_get("Port_Binding", "logical_port", "lsp0", "chassis");
        (!ch.is_empty()).then_some(())
    });
    tap_up(&f, 0, "vm0", MAC0, "192.0.2.1/24");
    assert!(ping_ok(&phys.0, "192.0.2.1", 20), "physical network -> VM");
    assert!(ping_ok(&f.ns[0], "192.0.2.3", 10), "VM -> physical network");

    // The mapping removed and added back while the chassis runs: the network is cut
    // off, then bridged again, without a restart.
    db.vsctl(&[
        "remove",
        "open_vswitch",
        ".",
        "external_ids",
        "ovn-bridge-mappings",
    ]);
    wait_for(Duration::from_secs(20), "hv0 without mappings", || {
        let m = c.sbctl(&["get", "chassis", "hv0", "other_config:ovn-bridge-mappings"]);
        (m.trim().trim_matches('"').is_empty()).then_some(())
    });
    wait_for(
        Duration::from_secs(10),
        "the physical network cut off",
        || (!ping_ok(&phys.0, "192.0.2.1", 1)).then_some(()),
    );
    db.vsctl(&[
        "set",
        "open_vswitch",
        ".",
        "external_ids:ovn-bridge-mappings=physnet1:br-ex",
    ]);
    assert!(
        ping_ok(&phys.0, "192.0.2.1", 20),
        "physical network -> VM, mapped again"
    );
}

/// libvirt's `<interface type='bridge'><source bridge='B'/><virtualport
/// type='openvswitch'/>`: libvirt gives QEMU a tap and adds it with the `ovs-vsctl`
/// command line below (libvirt's `virNetDevOpenvswitchAddPort`); vswitchd attaches the
/// tap as an AF_XDP uplink (type `""`), and the QEMU guest pings an internal port across
/// the bridge; the row's statistics grow; del-port detaches it.
#[test]
fn a_vm_tap_added_as_libvirt_adds_it_carries_the_guest() {
    let _g = serial();
    setup_host();
    const MAC: &str = "52:54:00:0d:b0:21";
    let dir = TempDir::new("ovsdb-libvirt-tap");
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd(&dir);
    bridge_with_internal_ports(&db, "ovbr10", &["ovl1"]);
    let ns = Netns::new("lv");
    ns.take("ovl1", "198.51.100.42");
    let tap = format!("vnet{}", std::process::id() % 10000);
    let params = "vm.ip=198.51.100.41 vm.peer=198.51.100.42 vm.test=idle vm.stay=1";
    let vm = Vm::start(VmSpec {
        tap: Some(&tap),
        ..VmSpec::new("libvirt-tap", Path::new("unused"), MAC, params.into())
    });
    wait_for(Duration::from_secs(20), "QEMU's tap", || {
        Path::new("/sys/class/net")
            .join(&tap)
            .exists()
            .then_some(())
    });
    // libvirt brings the tap up, then runs this.
    std::fs::write(format!("/proc/sys/net/ipv6/conf/{tap}/disable_ipv6"), "1").unwrap();
    run(&["ip", "link", "set", &tap, "up"]);
    let mac = format!("external-ids:attached-mac=\"{MAC}\"");
    db.vsctl(&[
        "--",
        "--if-exists",
        "del-port",
        &tap,
        "--",
        "add-port",
        "ovbr10",
        &tap,
        "--",
        "set",
        "Interface",
        &tap,
        &mac,
        "--",
        "set",
        "Interface",
        &tap,
        "external-ids:iface-id=\"4b1c2d3e-0000-4000-8000-000000000021\"",
        "--",
        "set",
        "Interface",
        &tap,
        "external-ids:vm-id=\"8ff5b4e2-7c1a-4d3e-9b55-6f1f0a2b0021\"",
        "--",
        "set",
        "Interface",
        &tap,
        "external-ids:iface-status=active",
    ]);
    assert_eq!(db.get("interface", &tap, "status:driver_name"), "af_xdp");
    for l in vm.wait_lines("RESULT ping", 2, Duration::from_secs(180)) {
        let m = kv(&l);
        assert_eq!(num(&m, "sent"), num(&m, "received"), "{l}");
    }
    wait_for(Duration::from_secs(15), "the tap's rx_packets", || {
        (db.stat(&tap, "rx_packets") >= 6).then_some(())
    });
    db.vsctl(&["del-port", &tap]);
    assert!(sw.find_port(&tap).is_none());
    let link = run(&["ip", "link", "show", &tap]);
    assert!(!link.contains("xdp"), "XDP program left on the tap: {link}");
}

/// `Interface type=geneve` with `options:local_ip`, `remote_ip` and `key`: a static
/// tunnel to a vswitchd configured by flags (`--geneve`, a tap in VNI 5001); the
/// bridge's internal port joins the VNI and pings across the overlay; the row shows the
/// tunnel; a second key on the bridge is refused on its row.
#[test]
fn a_geneve_interface_is_a_static_tunnel() {
    let _g = serial();
    setup_host();
    let f = Fabric::new("ogn", 2, 1600);
    let dir = TempDir::new("ovsdb-geneve");
    let tap1 = format!("ognt{}", std::process::id() % 10000);
    let _hv1 = f.vswitchd(1, &dir, &tap1);
    let db = OvsDb::start(&dir);
    let sw = db.vswitchd_in(&dir, Some(&f.ns[0]));
    let nic = &f.link[0];
    bridge_with_internal_ports(&db, "br-phy", &[]);
    db.vsctl(&[
        "add-port",
        "br-phy",
        nic,
        "--",
        "set",
        "interface",
        nic,
        "type=afxdp",
        "options:xdp-mode=generic",
    ]);
    bridge_with_internal_ports(&db, "ovbr11", &["ovg0"]);
    db.vsctl(&[
        "add-port",
        "ovbr11",
        "gnv0",
        "--",
        "set",
        "interface",
        "gnv0",
        "type=geneve",
        &format!("options:local_ip={}", f.addr(0)),
        &format!("options:remote_ip={}", f.addr(1)),
        "options:key=5001",
    ]);
    assert_eq!(db.get("interface", "gnv0", "error"), "[]");
    assert_eq!(db.get("interface", "gnv0", "status:remote_ip"), f.addr(1));
    assert!(
        db.get("interface", "gnv0", "ofport")
            .parse::<i64>()
            .unwrap()
            > 0
    );
    let domain = sw.show_port("ovg0")["domain"].as_str().unwrap().to_string();
    assert!(domain.contains("5001"), "ovg0's domain: {domain}");
    f.host_on_tap(0, "ovg0");
    assert!(
        ping_ok(&f.ns[0], "10.50.0.2", 20),
        "no ping across the tunnel"
    );
    assert!(ping_ok(&f.ns[1], "10.50.0.1", 10), "no ping back");

    db.vsctl(&[
        "add-port",
        "ovbr11",
        "gnv1",
        "--",
        "set",
        "interface",
        "gnv1",
        "type=geneve",
        &format!("options:local_ip={}", f.addr(0)),
        "options:remote_ip=198.51.100.9",
        "options:key=5002",
    ]);
    let e = db.get("interface", "gnv1", "error");
    assert!(e.contains("a bridge is one VNI, 5001"), "{e}");
    assert!(ping_ok(&f.ns[0], "10.50.0.2", 10), "the good tunnel went");
}

/// vswitchd started before its database: it runs (no ports), says so in `vswitchctl
/// show`, connects once ovsdb-server is there and applies what is asked then.
#[test]
fn vswitchd_waits_for_a_database_that_is_not_there_yet() {
    let _g = serial();
    let dir = TempDir::new("ovsdb-late");
    let db = OvsDb::start(&dir);
    db.kill();
    let sw = db.vswitchd(&dir);
    let ovsdb = &sw.show()["ovsdb"];
    assert_ne!(ovsdb["connection"], "connected", "{ovsdb}");
    assert_eq!(ovsdb["connects"], 0);
    db.start_server();
    bridge_with_internal_ports(&db, "ovbr12", &["ovw1"]);
    assert!(sw.find_port("ovw1").is_some(), "{}", sw.show());
    assert_eq!(sw.show()["ovsdb"]["connection"], "connected");
    db.vsctl(&["del-br", "ovbr12"]);
}

/// libvirt's own daemon, started for this test in a private mount namespace whose
/// `/var/run/openvswitch` is the test's database directory: libvirt runs `ovs-vsctl`
/// with its default database there (its environment cleared), as on an OVS host.
struct PrivateLibvirt {
    pids: Vec<PathBuf>,
    made_rundir: bool,
}

impl PrivateLibvirt {
    fn start(dir: &TempDir, db: &OvsDb) -> PrivateLibvirt {
        let virsh_ok = || {
            Command::new("virsh")
                .args(["-c", "qemu:///system", "version"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        assert!(
            !virsh_ok(),
            "a libvirtd runs already: it cannot see this test's Open vSwitch database"
        );
        let made_rundir = !Path::new("/run/openvswitch").exists();
        std::fs::create_dir_all("/run/openvswitch").unwrap();
        let pids: Vec<PathBuf> = ["virtlogd", "libvirtd"]
            .iter()
            .map(|d| dir.path(&format!("{d}.pid")))
            .collect();
        let script = format!(
            "mount --bind {} /run/openvswitch && virtlogd --daemon --pid-file {} && \
             libvirtd --daemon --pid-file {}",
            db.dir.display(),
            pids[0].display(),
            pids[1].display()
        );
        run(&[
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ]);
        let lv = PrivateLibvirt { pids, made_rundir };
        wait_for(Duration::from_secs(30), "libvirtd answering", || {
            virsh_ok().then_some(())
        });
        lv
    }
}

impl Drop for PrivateLibvirt {
    fn drop(&mut self) {
        for pid in self.pids.iter().rev() {
            if let Some(p) = pid_file(pid) {
                // SAFETY: kill(2) on a daemon this test started (its pid file).
                unsafe { libc::kill(p, libc::SIGTERM) };
                wait_gone(p);
            }
        }
        if self.made_rundir {
            let _ = std::fs::remove_dir("/run/openvswitch");
        }
    }
}

/// `virsh -c qemu:///system ARGS`, which must succeed; its stdout.
fn virsh(args: &[&str]) -> String {
    let mut a = vec!["virsh", "-c", "qemu:///system"];
    a.extend_from_slice(args);
    run(&a)
}

/// A libvirt domain on a `dpdkvhostuser` interface (docs/libvirt.md's XML, QEMU the
/// socket's client): the guest pings an internal port, and `virsh domifstat`, which
/// libvirt answers from the interface's row (`ovs-vsctl get Interface ... statistics`),
/// shows vswitchd's counters from the guest's side.
#[test]
fn virsh_domifstat_reads_vswitchds_counters() {
    let _g = serial();
    const MAC: &str = "52:54:00:0d:b0:41";
    let img = common::qemu::guest_image();
    let dir = TempDir::new("ovsdb-domifstat");
    for f in ["vmlinux", "initrd.cpio.gz"] {
        std::fs::copy(img.join(f), dir.path(f)).unwrap();
    }
    let db = OvsDb::start(&dir);
    for d in [&dir.0, &db.dir] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let _lv = PrivateLibvirt::start(&dir, &db);
    let args = [
        "--ovsdb".to_string(),
        db.remote(),
        "--vhost-user-socket-group".into(),
        "libvirt-qemu".into(),
    ];
    let sw = Vswitchd::start_env(None, &dir, "", &args, &[("OVS_RUNDIR", db.dir.as_path())]);
    bridge_with_internal_ports(&db, "ovbr13", &["ovd1"]);
    db.vsctl(&[
        "add-port",
        "ovbr13",
        "vm1",
        "--",
        "set",
        "interface",
        "vm1",
        "type=dpdkvhostuser",
    ]);
    let ns = Netns::new("dis");
    ns.take("ovd1", "198.51.100.52");
    let name = format!("vs-ovsdb-{}", std::process::id());
    let xml = format!(
        "<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>512</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{k}</kernel>
    <initrd>{i}</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 vm.ip=198.51.100.51 vm.peer=198.51.100.52 vm.test=idle vm.stay=1</cmdline>
  </os>
  <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <interface type='vhostuser'>
      <mac address='{MAC}'/>
      <source type='unix' path='{s}' mode='client'/>
      <model type='virtio'/>
    </interface>
    <serial type='file'><source path='{c}'/><target port='0'/></serial>
  </devices>
</domain>",
        k = dir.path("vmlinux").display(),
        i = dir.path("initrd.cpio.gz").display(),
        s = db.dir.join("vm1").display(),
        c = dir.path("console").display(),
    );
    let file = dir.path("domain.xml");
    std::fs::write(&file, xml).unwrap();
    virsh(&["create", file.to_str().unwrap()]);
    let console = dir.path("console");
    let destroy = KillDomain(name.clone());
    wait_for(Duration::from_secs(180), "the guest's pings", || {
        let text = std::fs::read_to_string(&console).unwrap_or_default();
        (text
            .lines()
            .filter(|l| l.starts_with("RESULT ping"))
            .count()
            >= 2)
            .then_some(text)
    });
    let stats = wait_for(Duration::from_secs(20), "domifstat with traffic", || {
        let out = virsh(&["domifstat", &name, MAC]);
        let n = |k: &str| common::field(&out, &format!("{MAC} {k}"));
        (n("rx_packets") > 0 && n("tx_packets") > 0).then_some(out)
    });
    let sw_vm1 = sw.port("vm1").stats;
    let n = |k: &str| common::field(&stats, &format!("{MAC} {k}"));
    // The guest's view: what it received is what vswitchd sent it, at most.
    assert!(
        n("rx_packets") <= sw_vm1.tx_packets,
        "{stats} vs {sw_vm1:?}"
    );
    assert!(
        n("tx_packets") <= sw_vm1.rx_packets,
        "{stats} vs {sw_vm1:?}"
    );
    drop(destroy);
}

/// `virsh destroy` on drop.
struct KillDomain(String);

impl Drop for KillDomain {
    fn drop(&mut self) {
        let _ = Command::new("virsh")
            .args(["-c", "qemu:///system", "destroy", &self.0])
            .output();
    }
}
