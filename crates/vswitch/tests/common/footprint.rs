//! What a daemon holds, for leak checks: its fds by kind, its threads, its file-backed
//! mappings and its resident memory, read from /proc.
//!
//! The property the leak checks state is **nothing grows**: after an attack, a churn or
//! a migration the daemon holds no more of any kind than before. A footprint may shrink:
//! a snapshot can catch a socket that is closing (the control socket's server closes an
//! accepted connection when it reads the client's EOF, a moment after the client has its
//! reply), which is why exact counts made these checks a coin toss on a busy machine.
//! The "before" snapshot is taken once the daemon is quiet ([`quiet`]: no control or
//! metrics connection in flight), awaited rather than slept for.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// One snapshot of what a process holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footprint {
    /// Open fds by kind: `unix:PATH` (a unix socket bound or accepted on PATH),
    /// `unix` (unnamed: socketpairs, connected clients), `netlink`, `tcp`, `udp`,
    /// `xdp`, `socket` (another family), `anon_inode:[eventfd]` and the like, or the
    /// file's path (memfds and hugepage files by name).
    pub fds: BTreeMap<String, usize>,
    /// Threads other than the tokio runtime's ("control": its blocking pool keeps idle
    /// threads for 10 s, so their number drifts with recent work).
    pub threads: usize,
    /// File-backed mappings by name and size (guest memory, dirty logs, hugepages).
    pub maps: BTreeMap<String, usize>,
    /// Resident memory, KiB.
    pub rss_kib: u64,
}

impl Footprint {
    /// Reads the footprint of process `pid`.
    pub fn of(pid: u32) -> Footprint {
        let sockets = socket_kinds(pid);
        let mut fds = BTreeMap::new();
        if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            for e in dir.flatten() {
                let Ok(target) = std::fs::read_link(e.path()) else {
                    continue; // closed since the listing
                };
                let t = target.display().to_string();
                let kind = match t.strip_prefix("socket:[") {
                    Some(inode) => sockets
                        .get(inode.trim_end_matches(']'))
                        .cloned()
                        .unwrap_or_else(|| "socket".into()),
                    None => t,
                };
                *fds.entry(kind).or_insert(0) += 1;
            }
        }
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
                    .filter(|n| n.trim() != "control")
                    .count()
            })
            .unwrap_or(0);
        let mut maps = BTreeMap::new();
        for l in std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .unwrap_or_default()
            .lines()
        {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(range), Some(name)) = (f.first(), f.get(5)) else {
                continue; // anonymous: the allocator's, not compared
            };
            let Some((a, b)) = range.split_once('-') else {
                continue;
            };
            let len =
                u64::from_str_radix(b, 16).unwrap_or(0) - u64::from_str_radix(a, 16).unwrap_or(0);
            *maps.entry(format!("{name} {len:#x}")).or_insert(0) += 1;
        }
        let rss_kib = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        Footprint {
            fds,
            threads,
            maps,
            rss_kib,
        }
    }

    /// Number of open fds.
    pub fn fd_count(&self) -> usize {
        self.fds.values().sum()
    }

    /// Fds of kinds whose name contains `part`.
    pub fn fds_like(&self, part: &str) -> usize {
        self.fds
            .iter()
            .filter(|(k, _)| k.contains(part))
            .map(|(_, n)| n)
            .sum()
    }

    /// What grew from `before` to `self`, one line per kind ("fd eventfd 12 -> 14"),
    /// allowing `slack.eventfds` more eventfds and `slack.rss_kib` more resident memory.
    /// Empty: nothing grew.
    pub fn growth(&self, before: &Footprint, slack: Slack) -> Vec<String> {
        let mut out = Vec::new();
        for (k, &n) in &self.fds {
            let was = before.fds.get(k).copied().unwrap_or(0);
            let allowed = if k == "anon_inode:[eventfd]" {
                was + slack.eventfds
            } else {
                was
            };
            if n > allowed {
                out.push(format!("fd {k}: {was} -> {n}"));
            }
        }
        for (k, &n) in &self.maps {
            let was = before.maps.get(k).copied().unwrap_or(0);
            if n > was {
                out.push(format!("mapping {k}: {was} -> {n}"));
            }
        }
        if self.threads > before.threads {
            out.push(format!("threads: {} -> {}", before.threads, self.threads));
        }
        if self.rss_kib > before.rss_kib + slack.rss_kib {
            out.push(format!(
                "rss: {} -> {} KiB (allowed +{})",
                before.rss_kib, self.rss_kib, slack.rss_kib
            ));
        }
        out
    }
}

/// What may grow without being a leak.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slack {
    /// Eventfds: a sleeping PMD holds duplicates of its queues' kick fds.
    pub eventfds: usize,
    /// Resident memory, KiB: allocator arenas and cached thread stacks settle once.
    pub rss_kib: u64,
}

/// The daemon `pid`'s footprint once no control or metrics connection is in flight:
/// such a connection closes on the daemon's side a moment after the client has its
/// reply, so a snapshot taken right after a `vswitchctl` call can hold one more socket
/// than the daemon keeps. `control` is the daemon's control socket path. Awaited (up
/// to 10 s), never slept for.
pub fn quiet(pid: u32, control: &Path) -> Footprint {
    let ctl = format!("unix:{}", control.display());
    let start = Instant::now();
    loop {
        let f = Footprint::of(pid);
        // The listener itself is one `unix:PATH` fd; accepted connections add more.
        let in_flight = f.fds.get(&ctl).copied().unwrap_or(0) > 1 || f.fds_like("tcp") > 1;
        if !in_flight || start.elapsed() > Duration::from_secs(10) {
            return f;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (up to `timeout`) until nothing has grown from `before`; returns the last
/// footprint, or panics listing what grew and `context()`.
pub fn assert_nothing_grows(
    pid: u32,
    control: &Path,
    before: &Footprint,
    slack: Slack,
    timeout: Duration,
    context: impl Fn() -> String,
) -> Footprint {
    let start = Instant::now();
    loop {
        let now = quiet(pid, control);
        let grown = now.growth(before, slack);
        if grown.is_empty() {
            return now;
        }
        if start.elapsed() > timeout {
            panic!(
                "footprint grew: {grown:?}\nbefore {before:?}\nafter {now:?}\n{}",
                context()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The path a socket file is served under: vswitchd binds under `PATH.PID.tmp` and
/// renames the file into place, and /proc/net/unix keeps the name it was bound with.
fn bound_path(path: &str) -> &str {
    let Some(stem) = path.strip_suffix(".tmp") else {
        return path;
    };
    match stem.rsplit_once('.') {
        Some((p, pid)) if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) => p,
        _ => path,
    }
}

/// Socket inode -> kind, from the process's view of /proc/net.
fn socket_kinds(pid: u32) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let read =
        |name: &str| std::fs::read_to_string(format!("/proc/{pid}/net/{name}")).unwrap_or_default();
    // unix: Num RefCount Protocol Flags Type St Inode [Path]
    for l in read("unix").lines().skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if let Some(inode) = f.get(6) {
            let kind = match f.get(7) {
                Some(path) => format!("unix:{}", bound_path(path)),
                None => "unix".into(),
            };
            m.insert(inode.to_string(), kind);
        }
    }
    // netlink: sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
    for l in read("netlink").lines().skip(1) {
        if let Some(inode) = l.split_whitespace().nth(9) {
            m.insert(inode.to_string(), "netlink".into());
        }
    }
    // tcp/udp (and v6): sl local rem st tx:rx tr:when retr uid timeout inode
    for (file, kind) in [
        ("tcp", "tcp"),
        ("tcp6", "tcp"),
        ("udp", "udp"),
        ("udp6", "udp"),
    ] {
        for l in read(file).lines().skip(1) {
            if let Some(inode) = l.split_whitespace().nth(9) {
                m.insert(inode.to_string(), kind.into());
            }
        }
    }
    // xdp: sk RefCnt sk_type sk_protocol ifindex queue_id inode (kernel >= 5.x)
    for l in read("xdp").lines().skip(1) {
        if let Some(inode) = l.split_whitespace().nth(6) {
            m.insert(inode.to_string(), "xdp".into());
        }
    }
    m
}
