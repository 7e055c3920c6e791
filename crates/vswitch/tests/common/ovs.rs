//! Open vSwitch's userspace datapath as a Geneve peer: its own database, run
//! directory and log in a temporary directory, its processes in a host namespace of a
//! [`Fabric`], nothing shared with a system OVS.

use std::path::PathBuf;
use std::process::Command;

use super::fabric::Fabric;
use super::TempDir;

/// ovsdb-server and ovs-vswitchd (netdev datapath) on host `k` of a fabric, set up as
/// OVS's userspace tunnelling guide does: `br-phy` holds the uplink veth and the
/// host's underlay address, `br-int` a Geneve port in VNI 5001 and an internal port
/// `vm` (the "VM", 10.50.0.(k+1)/24, MTU `vm_mtu`).
pub struct Ovs {
    dir: PathBuf,
    ns: String,
}

impl Ovs {
    pub fn start(f: &Fabric, k: usize, dir: &TempDir, remote: &str, vm_mtu: u32) -> Ovs {
        let ovs = Ovs::base(f, k, dir);
        let rip = format!("options:remote_ip={remote}");
        ovs.vsctl(&[
            "add-port",
            "br-int",
            "gnv0",
            "--",
            "set",
            "interface",
            "gnv0",
            "type=geneve",
            &rip,
            "options:key=5001",
        ]);
        ovs.internal_port(f, "vm", vm_mtu, &format!("10.50.0.{}/24", k + 1), &[]);
        ovs
    }

    /// An OVN chassis on host `k`: Open vSwitch (userspace datapath, `br-int` left to
    /// ovn-controller) and ovn-controller registered as chassis `name` with the host's
    /// underlay address as its Geneve Encap, reading the Southbound database at
    /// `sb_remote`, as OVN's documentation sets up a hypervisor.
    pub fn ovn_chassis(f: &Fabric, k: usize, dir: &TempDir, name: &str, sb_remote: &str) -> Ovs {
        let ovs = Ovs::base(f, k, dir);
        let ids = [
            format!("external_ids:system-id={name}"),
            format!("external_ids:ovn-remote={sb_remote}"),
            "external_ids:ovn-encap-type=geneve".to_string(),
            format!("external_ids:ovn-encap-ip={}", f.addr(k)),
            "external_ids:ovn-bridge=br-int".to_string(),
        ];
        let mut a = vec!["set", "open", "."];
        a.extend(ids.iter().map(String::as_str));
        ovs.vsctl(&a);
        ovs.cmd_ns(&[
            "ovn-controller",
            &ovs.db(),
            "--pidfile",
            "--log-file",
            "--detach",
        ]);
        ovs
    }

    /// A VIF of logical switch port `lsp`: an internal port of `br-int` in the host's
    /// namespace with `mac`, address `addr` (CIDR) and MTU `mtu`, its
    /// `external_ids:iface-id` naming the port (what ovn-controller binds).
    pub fn vif(&self, f: &Fabric, iface: &str, lsp: &str, mac: &str, addr: &str, mtu: u32) {
        let id = format!("external_ids:iface-id={lsp}");
        let m = format!("mac=\"{mac}\"");
        self.internal_port(f, iface, mtu, addr, &[&id, &m]);
    }

    /// ovsdb-server and ovs-vswitchd (netdev datapath) on host `k`: `br-phy` holds the
    /// uplink veth and the host's underlay address, as OVS's userspace tunnelling guide
    /// does; `br-int` is created empty.
    fn base(f: &Fabric, k: usize, dir: &TempDir) -> Ovs {
        let d = dir.path(&format!("ovs{k}"));
        std::fs::create_dir_all(&d).unwrap();
        let ovs = Ovs {
            dir: d.clone(),
            ns: f.ns[k].clone(),
        };
        let db = d.join("conf.db");
        ovs.cmd(&[
            "ovsdb-tool",
            "create",
            db.to_str().unwrap(),
            "/usr/share/openvswitch/vswitch.ovsschema",
        ]);
        let punix = format!("--remote=p{}", ovs.db());
        ovs.cmd_ns(&[
            "ovsdb-server",
            db.to_str().unwrap(),
            &punix,
            "--pidfile",
            "--log-file",
            "--detach",
        ]);
        ovs.vsctl(&["--no-wait", "init"]);
        ovs.cmd_ns(&[
            "ovs-vswitchd",
            &ovs.db(),
            "--pidfile",
            "--log-file",
            "--detach",
        ]);
        let (link, addr) = (&f.link[k], f.addr(k));
        // br-phy must not share the veth's MAC: the kernel would then take the Geneve
        // frames for itself too and answer them with ICMP port unreachable.
        ovs.vsctl(&[
            "add-br",
            "br-phy",
            "--",
            "set",
            "bridge",
            "br-phy",
            "datapath_type=netdev",
            "other_config:hwaddr=02:00:00:00:0f:01",
        ]);
        ovs.vsctl(&["add-port", "br-phy", link]);
        let prefix = if f.v6 { "64" } else { "24" };
        f.exec(&f.ns[k], &["ip", "addr", "flush", "dev", link]);
        let a = format!("{addr}/{prefix}");
        f.exec(&f.ns[k], &["ip", "addr", "add", &a, "dev", "br-phy"]);
        let m = f.exec(&f.ns[k], &["cat", &format!("/sys/class/net/{link}/mtu")]);
        f.exec(
            &f.ns[k],
            &["ip", "link", "set", "br-phy", "mtu", m.trim(), "up"],
        );
        ovs.vsctl(&[
            "add-br",
            "br-int",
            "--",
            "set",
            "bridge",
            "br-int",
            "datapath_type=netdev",
        ]);
        ovs
    }

    /// Adds internal port `iface` to `br-int` (with interface columns `settings`) and
    /// brings it up in the host's namespace with MTU `mtu` and address `addr`, IPv6 off.
    fn internal_port(&self, f: &Fabric, iface: &str, mtu: u32, addr: &str, settings: &[&str]) {
        let mut a = vec![
            "add-port",
            "br-int",
            iface,
            "--",
            "set",
            "interface",
            iface,
            "type=internal",
        ];
        a.extend_from_slice(settings);
        self.vsctl(&a);
        let ns = &self.ns;
        f.exec(
            ns,
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{iface}.disable_ipv6=1"),
            ],
        );
        f.exec(
            ns,
            &["ip", "link", "set", iface, "mtu", &mtu.to_string(), "up"],
        );
        f.exec(ns, &["ip", "addr", "add", addr, "dev", iface]);
    }

    /// `unix:` remote of this instance's database.
    fn db(&self) -> String {
        format!("unix:{}", self.dir.join("db.sock").display())
    }

    /// `ovs-vsctl` against this instance's database.
    pub fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db={}", self.db());
        let mut a = vec!["ovs-vsctl", "--timeout=20", &db];
        a.extend_from_slice(args);
        self.cmd(&a)
    }

    /// `ovs-ofctl` against this instance's bridges (e.g. `dump-flows br-int`).
    pub fn ofctl(&self, args: &[&str]) -> String {
        let mut a = vec!["ovs-ofctl"];
        a.extend_from_slice(args);
        self.cmd(&a)
    }

    /// A counter of `iface` (`ovs-vsctl get interface IFACE statistics:NAME`).
    pub fn iface_stat(&self, iface: &str, name: &str) -> u64 {
        let key = format!("statistics:{name}");
        self.vsctl(&["get", "interface", iface, &key])
            .trim()
            .parse()
            .unwrap_or(0)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(args[0]);
        c.args(&args[1..]);
        for var in [
            "OVS_RUNDIR",
            "OVS_LOGDIR",
            "OVS_DBDIR",
            "OVS_SYSCONFDIR",
            "OVN_RUNDIR",
            "OVN_LOGDIR",
        ] {
            c.env(var, &self.dir);
        }
        c
    }

    fn cmd(&self, args: &[&str]) -> String {
        finish(args, self.command(args))
    }

    fn cmd_ns(&self, args: &[&str]) -> String {
        let mut a = vec!["ip", "netns", "exec", &self.ns];
        a.extend_from_slice(args);
        finish(args, self.command(&a))
    }

    fn pid(&self, name: &str) -> Option<i32> {
        super::pid_file(&self.dir.join(format!("{name}.pid")))
    }
}

fn finish(args: &[&str], c: Command) -> String {
    super::output_of(args, c, "openvswitch-switch")
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for name in ["ovn-controller", "ovs-vswitchd", "ovsdb-server"] {
            let Some(pid) = self.pid(name) else { continue };
            // SAFETY: kill(2) on a pid this instance's pidfile names.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            super::ovn::wait_gone(pid);
        }
    }
}
