//! A real OVN central in a test's temporary directory: the Northbound and Southbound
//! `ovsdb-server`s (Debian's `ovn-central` schemas) and `ovn-northd`, on unix sockets,
//! nothing shared with a system OVN. Chassis reach it through the same sockets from
//! their namespaces.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::TempDir;

/// ovsdb-server (NB), ovsdb-server (SB, or the members of a clustered SB) and
/// ovn-northd, stopped on drop.
pub struct OvnCentral {
    dir: PathBuf,
    /// Members of a clustered Southbound database (`sb1`..`sbN`); empty: one `sb`.
    sb_members: Vec<String>,
}

impl OvnCentral {
    /// Creates both databases and starts their servers and northd; returns once both
    /// databases answer.
    pub fn start(dir: &TempDir) -> OvnCentral {
        let d = dir.path("ovn-central");
        std::fs::create_dir_all(&d).unwrap();
        let c = OvnCentral {
            dir: d,
            sb_members: Vec::new(),
        };
        for (db, schema) in [("nb", "ovn-nb"), ("sb", "ovn-sb")] {
            let file = c.dir.join(format!("{db}.db"));
            c.run(&[
                "ovsdb-tool",
                "create",
                file.to_str().unwrap(),
                &format!("/usr/share/ovn/{schema}.ovsschema"),
            ]);
            c.start_server(db);
        }
        c.start_northd();
        c.nbctl(&["--timeout=20", "sync"]);
        c
    }

    /// As [`OvnCentral::start`], with a clustered Southbound database of `n` members
    /// (`sb1`..`sbN`, raft on 127.0.0.1; `ovsdb-tool create-cluster` and
    /// `join-cluster`), each serving its own unix socket; returns once the cluster has
    /// a leader and northd has synced.
    pub fn start_clustered(dir: &TempDir, n: usize) -> OvnCentral {
        let d = dir.path("ovn-central");
        std::fs::create_dir_all(&d).unwrap();
        let members: Vec<String> = (1..=n).map(|i| format!("sb{i}")).collect();
        let c = OvnCentral {
            dir: d,
            sb_members: members.clone(),
        };
        let nb = c.dir.join("nb.db");
        c.run(&[
            "ovsdb-tool",
            "create",
            nb.to_str().unwrap(),
            "/usr/share/ovn/ovn-nb.ovsschema",
        ]);
        c.start_server("nb");
        let base = 16000 + (std::process::id() % 1000) as usize * 4;
        let raft = |i: usize| format!("tcp:127.0.0.1:{}", base + i);
        for (i, m) in members.iter().enumerate() {
            let file = c.dir.join(format!("{m}.db"));
            if i == 0 {
                c.run(&[
                    "ovsdb-tool",
                    "create-cluster",
                    file.to_str().unwrap(),
                    "/usr/share/ovn/ovn-sb.ovsschema",
                    &raft(0),
                ]);
            } else {
                c.run(&[
                    "ovsdb-tool",
                    "join-cluster",
                    file.to_str().unwrap(),
                    "OVN_Southbound",
                    &raft(i),
                    &raft(0),
                ]);
            }
            c.start_server(m);
        }
        c.start_northd();
        c.nbctl(&["--timeout=30", "sync"]);
        c
    }

    /// The member of the clustered Southbound database that is leader now.
    pub fn sb_leader(&self) -> Option<String> {
        self.sb_members.iter().find_map(|m| {
            let ctl = self.dir.join(format!("{m}.ctl"));
            let o = Command::new("ovs-appctl")
                .arg("-t")
                .arg(&ctl)
                .args(["cluster/status", "OVN_Southbound"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == "Role: leader")
                .then(|| m.clone())
        })
    }

    /// Starts ovn-northd.
    pub fn start_northd(&self) {
        self.run(&[
            "ovn-northd",
            &format!("--ovnnb-db={}", self.nb_remote()),
            &format!("--ovnsb-db={}", self.sb_remote()),
            &format!("--pidfile={}", self.dir.join("northd.pid").display()),
            &format!("--log-file={}", self.dir.join("northd.log").display()),
            "--detach",
        ]);
    }

    /// Starts database `db`'s server (`nb` or `sb`) on its socket.
    pub fn start_server(&self, db: &str) {
        let d = &self.dir;
        self.run(&[
            "ovsdb-server",
            d.join(format!("{db}.db")).to_str().unwrap(),
            &format!("--remote=punix:{}", d.join(format!("{db}.sock")).display()),
            &format!("--pidfile={}", d.join(format!("{db}.pid")).display()),
            &format!("--log-file={}", d.join(format!("{db}.log")).display()),
            &format!("--unixctl={}", d.join(format!("{db}.ctl")).display()),
            "--detach",
        ]);
    }

    /// Kills `name` (`nb`, `sb` or `northd`) with SIGKILL, as an outage.
    pub fn kill(&self, name: &str) {
        if let Some(pid) = self.pid(name) {
            // SAFETY: kill(2) on a pid this central's pidfile names.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            wait_gone(pid);
        }
    }

    /// The Northbound database's remote.
    pub fn nb_remote(&self) -> String {
        format!("unix:{}", self.dir.join("nb.sock").display())
    }

    /// The Southbound database's remote (every member's, comma-separated, when it is
    /// clustered).
    pub fn sb_remote(&self) -> String {
        if self.sb_members.is_empty() {
            return format!("unix:{}", self.dir.join("sb.sock").display());
        }
        self.sb_members
            .iter()
            .map(|m| format!("unix:{}", self.dir.join(format!("{m}.sock")).display()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Adds VIF port `name` to switch `sw` with `addresses` ("MAC IP...").
    pub fn add_vif(&self, sw: &str, name: &str, addresses: &str) {
        self.nbctl(&[
            "lsp-add",
            sw,
            name,
            "--",
            "lsp-set-addresses",
            name,
            addresses,
        ]);
    }

    /// Attaches router port `lrp` to switch `sw` through switch port `lsp` (type
    /// `router`, addresses `router`), as Neutron and ovn-kubernetes do.
    pub fn attach_router(&self, sw: &str, lsp: &str, lrp: &str) {
        let peer = format!("router-port={lrp}");
        self.nbctl(&[
            "lsp-add",
            sw,
            lsp,
            "--",
            "lsp-set-type",
            lsp,
            "router",
            "--",
            "lsp-set-addresses",
            lsp,
            "router",
            "--",
            "lsp-set-options",
            lsp,
            &peer,
        ]);
    }

    /// `ovn-nbctl ARGS` against the Northbound database.
    pub fn nbctl(&self, args: &[&str]) -> String {
        let db = format!("--db={}", self.nb_remote());
        let mut a = vec!["ovn-nbctl", &db];
        a.extend_from_slice(args);
        self.run(&a)
    }

    /// `ovn-sbctl ARGS` against the Southbound database.
    pub fn sbctl(&self, args: &[&str]) -> String {
        let db = format!("--db={}", self.sb_remote());
        let mut a = vec!["ovn-sbctl", "--timeout=20", &db];
        a.extend_from_slice(args);
        self.run(&a)
    }

    /// Column `col` of the Southbound row of `table` whose `key` is `value`
    /// (`ovn-sbctl --bare --columns=COL find TABLE KEY=VALUE`), trimmed.
    pub fn sb_get(&self, table: &str, key: &str, value: &str, col: &str) -> String {
        self.sbctl(&[
            "--bare",
            &format!("--columns={col}"),
            "find",
            table,
            &format!("{key}={value}"),
        ])
        .trim()
        .to_string()
    }

    /// Waits (up to 30 s) until chassis `name` has registered in the Southbound
    /// database. `ovn-nbctl --wait=hv sync` does not: with no chassis registered yet,
    /// northd reports every chassis caught up at once.
    pub fn wait_chassis(&self, name: &str) {
        super::wait_for(Duration::from_secs(30), &format!("chassis {name}"), || {
            let uuid = self.sb_get("Chassis", "name", name, "_uuid");
            (!uuid.is_empty()).then_some(())
        });
    }

    /// The directory its databases, sockets and logs are in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// `ovn-trace ARGS` against the Southbound database.
    pub fn trace(&self, args: &[&str]) -> String {
        let db = format!("--db={}", self.sb_remote());
        let mut a = vec!["ovn-trace", &db];
        a.extend_from_slice(args);
        self.run(&a)
    }

    /// northd's log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("northd.log")).unwrap_or_default()
    }

    fn run(&self, args: &[&str]) -> String {
        let mut c = Command::new(args[0]);
        c.args(&args[1..]);
        for var in [
            "OVN_RUNDIR",
            "OVN_LOGDIR",
            "OVN_DBDIR",
            "OVS_RUNDIR",
            "OVS_LOGDIR",
        ] {
            c.env(var, &self.dir);
        }
        super::output_of(args, c, "ovn-central")
    }

    fn pid(&self, name: &str) -> Option<i32> {
        super::pid_file(&self.dir.join(format!("{name}.pid")))
    }
}

/// Waits (up to 10 s) until process `pid` is gone or a zombie (daemonized: not our
/// child, so its stat says when it has exited).
pub fn wait_gone(pid: i32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(s) if !s.contains(") Z ") => std::thread::sleep(Duration::from_millis(20)),
            _ => break,
        }
    }
}

impl Drop for OvnCentral {
    fn drop(&mut self) {
        let mut names = vec!["northd".to_string(), "sb".to_string(), "nb".to_string()];
        names.extend(self.sb_members.iter().cloned());
        for name in &names {
            if let Some(pid) = self.pid(name) {
                // SAFETY: kill(2) on a pid this central's pidfile names.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                wait_gone(pid);
            }
        }
    }
}
