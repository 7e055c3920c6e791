//! A real OVN central in a test's temporary directory: the Northbound and Southbound
//! `ovsdb-server`s (Debian's `ovn-central` schemas) and `ovn-northd`, on unix sockets,
//! nothing shared with a system OVN. Chassis reach it through the same sockets from
//! their namespaces.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::TempDir;

/// ovsdb-server (NB), ovsdb-server (SB) and ovn-northd, stopped on drop.
pub struct OvnCentral {
    dir: PathBuf,
}

impl OvnCentral {
    /// Creates both databases and starts their servers and northd; returns once both
    /// databases answer.
    pub fn start(dir: &TempDir) -> OvnCentral {
        let d = dir.path("ovn-central");
        std::fs::create_dir_all(&d).unwrap();
        let c = OvnCentral { dir: d };
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

    /// The Southbound database's remote.
    pub fn sb_remote(&self) -> String {
        format!("unix:{}", self.dir.join("sb.sock").display())
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
        let o = c
            .output()
            .unwrap_or_else(|e| panic!("{} (Debian ovn-central): {e}", args[0]));
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn pid(&self, name: &str) -> Option<i32> {
        std::fs::read_to_string(self.dir.join(format!("{name}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// Waits (up to 10 s) until process `pid` is gone or a zombie (daemonized: not our
/// child).
fn wait_gone(pid: i32) {
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
        for name in ["northd", "sb", "nb"] {
            if let Some(pid) = self.pid(name) {
                // SAFETY: kill(2) on a pid this central's pidfile names.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                wait_gone(pid);
            }
        }
    }
}
