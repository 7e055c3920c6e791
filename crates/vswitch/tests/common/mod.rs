//! Test harness: real DPDK testpmd guests (virtio-user) around a real vswitchd.
//!
//! Tests here need root, hugepages and DPDK; [`setup_host`] provides them (installing
//! Debian's dpdk-dev when missing) and every process and file is cleaned up by `Drop`.
#![allow(dead_code)]

pub mod chassis;
pub mod fabric;
pub mod footprint;
pub mod hostile;
pub mod hostile_packed;
pub mod hosts;
pub mod looping;
pub mod ovn;
pub mod ovs;
pub mod qemu;
pub mod tenant;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use vswitch::control::protocol::{
    call, AclRow, PmdStatsRow, Request, Response, ShowReply, StatsRow,
};

/// Sends `req` to the daemon at `control` and returns its reply.
pub fn ctl(control: &Path, req: Request) -> Result<Response, String> {
    call(control, req, Duration::from_secs(60))
}

/// `show`, as JSON.
pub fn show_json(control: &Path) -> Result<serde_json::Value, String> {
    match ctl(control, Request::Show)? {
        Response::Show(s) => Ok(serde_json::to_value::<ShowReply>(s).expect("show as JSON")),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// `pmd-stats`.
pub fn pmd_stats(control: &Path) -> Vec<PmdStatsRow> {
    match ctl(control, Request::PmdStats).expect("pmd-stats") {
        Response::PmdStats(s) => s,
        other => panic!("unexpected reply {other:?}"),
    }
}

/// `acl-list`.
pub fn acl_list(control: &Path) -> Vec<AclRow> {
    match ctl(control, Request::AclList { port: None }).expect("acl-list") {
        Response::AclList(s) => s,
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Serializes the tests that run guests: two cores cannot host two sets of spinning
/// testpmd forwarding cores at once.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes sure testpmd, hugepages and hugetlbfs are there.
pub fn setup_host() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        assert!(
            unsafe_geteuid_is_root(),
            "these tests drive DPDK guests and need root (run scripts/test.sh as root)"
        );
        if !Path::new("/usr/bin/dpdk-testpmd").exists() {
            let ok = Command::new("sh")
                .args(["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk-dev dpdk"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(ok, "dpdk-testpmd missing and installing Debian's dpdk-dev failed");
        }
        let nr: u64 = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if nr < 1024 {
            std::fs::write("/proc/sys/vm/nr_hugepages", "1024").expect("set nr_hugepages");
        }
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        if !mounts.lines().any(|l| l.contains("hugetlbfs")) {
            std::fs::create_dir_all("/dev/hugepages").expect("mkdir /dev/hugepages");
            let ok = Command::new("mount")
                .args(["-t", "hugetlbfs", "nodev", "/dev/hugepages"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(ok, "mounting hugetlbfs on /dev/hugepages failed");
        }
    });
}

fn unsafe_geteuid_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Waits until `f` returns Some, polling every 20 ms, up to `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("vswitch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running vswitchd.
pub struct Vswitchd {
    child: Option<Child>,
    pub control: PathBuf,
    log: PathBuf,
}

impl Vswitchd {
    /// Starts vswitchd with `args` plus `--control` in `dir`, and waits for its control
    /// socket to answer.
    pub fn start(dir: &TempDir, args: &[String]) -> Self {
        Self::start_in(None, dir, "", args)
    }

    /// As [`Vswitchd::start`], in network namespace `ns` (a "host" of a multi-host
    /// test), its control socket and log named with `tag`.
    pub fn start_in(ns: Option<&str>, dir: &TempDir, tag: &str, args: &[String]) -> Self {
        Self::start_env(ns, dir, tag, args, &[])
    }

    /// As [`Vswitchd::start_in`], with environment variables `env` set (e.g.
    /// `OVS_RUNDIR`).
    pub fn start_env(
        ns: Option<&str>,
        dir: &TempDir,
        tag: &str,
        args: &[String],
        env: &[(&str, &Path)],
    ) -> Self {
        let control = dir.path(&format!("ctl{tag}.sock"));
        let log = dir.path(&format!("vswitchd{tag}.log"));
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns])
                    .arg(env!("CARGO_BIN_EXE_vswitchd"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_vswitchd")),
        };
        let child = cmd
            .args(args)
            .arg("--control")
            .arg(&control)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn vswitchd");
        let mut v = Vswitchd {
            child: Some(child),
            control,
            log,
        };
        wait_for(Duration::from_secs(10), "vswitchd control socket", || {
            if let Some(Ok(Some(status))) = v.child.as_mut().map(|c| c.try_wait()) {
                panic!("vswitchd exited ({status}) before serving:\n{}", v.log());
            }
            show_json(&v.control).ok()
        });
        v
    }

    pub fn stats(&self) -> Vec<StatsRow> {
        match ctl(&self.control, Request::Stats).expect("stats") {
            Response::Stats(s) => s,
            other => panic!("unexpected reply {other:?}"),
        }
    }

    pub fn port(&self, name: &str) -> StatsRow {
        self.stats()
            .into_iter()
            .find(|r| r.port == name)
            .unwrap_or_else(|| panic!("no port {name}"))
    }

    pub fn show(&self) -> serde_json::Value {
        show_json(&self.control).expect("show")
    }

    /// Port `name` in `vswitchctl show`, if there is one.
    pub fn find_port(&self, name: &str) -> Option<serde_json::Value> {
        let show = self.show();
        show["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
    }

    /// Port `name` in `vswitchctl show` (panics, with the whole `show`, if missing).
    pub fn show_port(&self, name: &str) -> serde_json::Value {
        self.find_port(name)
            .unwrap_or_else(|| panic!("no port {name} in {}", self.show()))
    }

    /// The port `mac` is learned behind (a port name, or `remote IP`), if any.
    pub fn fdb_port(&self, mac: &str) -> Option<String> {
        match ctl(&self.control, Request::Fdb).expect("fdb") {
            Response::Fdb(rows) => rows.into_iter().find(|r| r.mac == mac).map(|r| r.port),
            other => panic!("unexpected reply {other:?}"),
        }
    }

    /// Connections vswitchd closed on port `name` because the driver broke the protocol.
    pub fn protocol_errors(&self, name: &str) -> u64 {
        self.show_port(name)["protocol_errors"].as_u64().unwrap()
    }

    /// Sends signal `sig` to the daemon.
    pub fn signal(&self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, sig) };
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The daemon's pid (for /proc), while it runs.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("vswitchd running").id()
    }

    /// kill -9, as a crash: nothing is cleaned up (sockets and their files stay).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait; returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        loop {
            if let Ok(Some(st)) = c.try_wait() {
                return st.code();
            }
            if start.elapsed() > Duration::from_secs(10) {
                let _ = c.kill();
                let _ = c.wait();
                panic!("vswitchd did not exit within 10 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Vswitchd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts vswitchd with ports a and b (`--FLAG=a=DIR/a.sock OPTS`, same for b); returns
/// it with the two socket paths.
pub fn start_ab(dir: &TempDir, flag: &str, opts: &str) -> (Vswitchd, PathBuf, PathBuf) {
    let (sa, sb) = (dir.path("a.sock"), dir.path("b.sock"));
    let sw = Vswitchd::start(
        dir,
        &[
            format!("--{flag}=a={}{opts}", sa.display()),
            format!("--{flag}=b={}{opts}", sb.display()),
        ],
    );
    (sw, sa, sb)
}

/// Output of a child collected by a reader thread, with a condvar for waiters.
struct Output {
    text: Mutex<String>,
    cv: Condvar,
}

impl Output {
    /// Collects `stream` into a new buffer from a reader thread. It splits on the prompt's
    /// trailing space as well as on newlines, so that a prompt without a newline is seen.
    fn collect(stream: impl Read + Send + 'static) -> Arc<Output> {
        let out = Arc::new(Output {
            text: Mutex::new(String::new()),
            cv: Condvar::new(),
        });
        let o = out.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stream);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b' ', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let mut t = o.text.lock().unwrap();
                        t.push_str(&String::from_utf8_lossy(&buf));
                        o.cv.notify_all();
                    }
                }
            }
        });
        out
    }
}

/// The last `n` bytes of `s` (or more, up to a character boundary).
pub fn tail(s: &str, n: usize) -> &str {
    let mut i = s.len().saturating_sub(n);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[i..]
}

/// A DPDK testpmd guest in interactive mode.
pub struct Testpmd {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    /// What testpmd prints on stdout: command output and prompts.
    out: Arc<Output>,
    /// What DPDK logs on stderr, kept apart: a log line written while a command prints
    /// would otherwise split that command's output (`RX-packets: <log line> 12914`).
    log: Arc<Output>,
    pub prefix: String,
}

/// One testpmd guest (DPDK file prefix `prefix`) with two ports, on `dir`'s a.sock (MAC
/// `mac_a`) and b.sock (`mac_b`), in MAC forwarding
/// mode: a frame received on one port leaves the other addressed to the first's MAC, so
/// the switch carries a→b and b→a forever. 4 bursts per port are injected. Rings of
/// 1024 descriptors: the loop's 128 frames plus the 640 that churn tests add all fit in
/// one guest receive ring, so however they bunch up none can find a ring full.
pub fn start_loop_guest(dir: &TempDir, prefix: &str, mac_a: &str, mac_b: &str) -> Testpmd {
    start_loop_guest_to(dir, prefix, mac_a, mac_b, mac_b)
}

/// [`start_loop_guest`], but frames leaving port a are addressed to `a_peer` (with
/// `ff:ff:ff:ff:ff:ff`, every frame a sends is a broadcast: the switch floods it to b,
/// which carries the loop on, and to every other port).
pub fn start_loop_guest_to(
    dir: &TempDir,
    prefix: &str,
    mac_a: &str,
    mac_b: &str,
    a_peer: &str,
) -> Testpmd {
    let vdev_b = format!(
        "net_virtio_user1,path={},queues=1,queue_size=1024,mac={mac_b}",
        dir.path("b.sock").display()
    );
    let peers = [
        format!("--eth-peer=0,{a_peer}"),
        format!("--eth-peer=1,{mac_a}"),
    ];
    let sa = dir.path("a.sock");
    let extra = [vdev_b];
    let mut g = Testpmd::start(GuestSpec {
        prefix,
        socket: &sa,
        mac: mac_a,
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
    });
    g.cmd("start tx_first 4");
    g
}

/// Ports of a testpmd guest: a virtio-user vdev, plus extra vdevs (e.g. net_pcap).
pub struct GuestSpec<'a> {
    pub prefix: &'a str,
    pub socket: &'a Path,
    pub mac: &'a str,
    pub queues: u16,
    /// virtio-user is the server (vswitchd in client mode).
    pub server: bool,
    pub extra_vdevs: &'a [String],
    /// Descriptors per virtqueue of the virtio-user vdev (`queue_size=`); DPDK's
    /// default (256) when `None`.
    pub queue_size: Option<u16>,
    /// Packed virtqueues (`packed_vq=1`, virtio 1.2 §2.8) instead of split ones.
    pub packed: bool,
    pub args: &'a [&'a str],
}

impl Testpmd {
    pub fn start(spec: GuestSpec<'_>) -> Self {
        setup_host();
        cleanup_prefix(spec.prefix);
        let mut vdev = format!(
            "net_virtio_user0,path={},queues={},mac={}",
            spec.socket.display(),
            spec.queues,
            spec.mac
        );
        if spec.server {
            vdev.push_str(",server=1");
        }
        if let Some(n) = spec.queue_size {
            vdev.push_str(&format!(",queue_size={n}"));
        }
        if spec.packed {
            vdev.push_str(",packed_vq=1");
        }
        // testpmd prints through stdio, block-buffered into a pipe: unbuffer it so each
        // command's output arrives before the next prompt.
        let mut cmd = Command::new("stdbuf");
        cmd.args([
            "-o0",
            "-e0",
            "dpdk-testpmd",
            "-l",
            "0,1",
            "--main-lcore",
            "0",
        ])
        .args(["-m", "256", "--no-pci"])
        .arg(format!("--file-prefix={}", spec.prefix))
        .args(["--single-file-segments", "--log-level=7", "--vdev"])
        .arg(&vdev);
        for v in spec.extra_vdevs {
            cmd.args(["--vdev", v]);
        }
        cmd.args(["--", "-i", "--nb-cores=1", "--total-num-mbufs=16384"])
            .args(spec.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn dpdk-testpmd");
        let out = Output::collect(child.stdout.take().unwrap());
        let log = Output::collect(child.stderr.take().unwrap());
        let stdin = child.stdin.take();
        let t = Testpmd {
            child: Some(child),
            stdin,
            out,
            log,
            prefix: spec.prefix.to_string(),
        };
        t.wait_output(Duration::from_secs(60), "testpmd> ", 0);
        t
    }

    fn wait_output(&self, timeout: Duration, needle: &str, from: usize) -> usize {
        let deadline = Instant::now() + timeout;
        let mut t = self.out.text.lock().unwrap();
        loop {
            if let Some(i) = t.get(from..).and_then(|s| s.find(needle)) {
                return from + i + needle.len();
            }
            let now = Instant::now();
            if now >= deadline {
                let log = self.log.text.lock().unwrap();
                panic!(
                    "testpmd {}: timed out waiting for {needle:?}; output:\n{}\nlog:\n{}",
                    self.prefix,
                    tail(&t, 3000),
                    tail(&log, 3000)
                );
            }
            t = self.out.cv.wait_timeout(t, deadline - now).unwrap().0;
        }
    }

    /// Runs one interactive command and returns its output (up to the next prompt).
    pub fn cmd(&mut self, line: &str) -> String {
        let from = self.out.text.lock().unwrap().len();
        let stdin = self.stdin.as_mut().expect("testpmd stdin");
        writeln!(stdin, "{line}").expect("write to testpmd");
        stdin.flush().unwrap();
        let end = self.wait_output(Duration::from_secs(60), "testpmd> ", from);
        self.out.text.lock().unwrap()[from..end].to_string()
    }

    /// (RX-packets, TX-packets) of port `port` from `show port stats`.
    pub fn port_stats(&mut self, port: u16) -> (u64, u64) {
        let s = self.cmd(&format!("show port stats {port}"));
        (field(&s, "RX-packets:"), field(&s, "TX-packets:"))
    }

    /// An extended statistic of port `port` (`show port xstats`), 0 if absent.
    pub fn xstat(&mut self, port: u16, name: &str) -> u64 {
        let s = self.cmd(&format!("show port xstats {port}"));
        field(&s, &format!("{name}:"))
    }

    /// The testpmd process's pid, while it runs.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("testpmd running").id()
    }

    /// kill -9, as a crashing guest.
    pub fn kill9(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        cleanup_prefix(&self.prefix);
    }
}

/// The number after `key` in testpmd output.
pub fn field(s: &str, key: &str) -> u64 {
    s.find(key)
        .and_then(|i| {
            s[i + key.len()..]
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or_else(|| panic!("no {key:?} in testpmd output:\n{s}"))
}

/// Removes a testpmd instance's hugepage files and runtime directory.
pub fn cleanup_prefix(prefix: &str) {
    if let Ok(rd) = std::fs::read_dir("/dev/hugepages") {
        for e in rd.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{prefix}map_"))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Some(mut s) = self.stdin.take() {
                let _ = writeln!(s, "quit");
            }
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        cleanup_prefix(&self.prefix);
    }
}

/// Builds an Ethernet/IPv4/UDP frame of exactly `len` bytes (no FCS) with a payload
/// pattern that depends on `seed`, and a valid IPv4 header checksum.
pub fn udp_frame(src: [u8; 6], dst: [u8; 6], len: usize, seed: u8) -> Vec<u8> {
    assert!(len >= 42);
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - 14) as u16;
    let mut ip = [
        0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    let mut sum = 0u32;
    for c in ip.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    let udp_len = ip_len - 20;
    f.extend_from_slice(&1000u16.to_be_bytes());
    f.extend_from_slice(&2000u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&0u16.to_be_bytes());
    let mut i = 0usize;
    while f.len() < len {
        f.push((i as u8).wrapping_mul(31).wrapping_add(seed));
        i += 1;
    }
    f
}

/// Writes a classic pcap file (LINKTYPE_ETHERNET).
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

/// Reads a classic pcap file (either byte order, µs or ns timestamps).
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(b.len() >= 24, "{}: not a pcap file", path.display());
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let le = matches!(magic, 0xa1b2c3d4 | 0xa1b23c4d);
    assert!(
        le || matches!(magic, 0xd4c3b2a1 | 0x4d3cb2a1),
        "{}: bad pcap magic {magic:#x}",
        path.display()
    );
    let rd = |o: usize| {
        let a: [u8; 4] = b[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    let mut off = 24;
    let mut frames = Vec::new();
    while off + 16 <= b.len() {
        let incl = rd(off + 8) as usize;
        off += 16;
        frames.push(b[off..off + incl].to_vec());
        off += incl;
    }
    frames
}

/// A network namespace, deleted on drop.
pub struct Netns(pub String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Runs a command, panicking with its output if it fails.
pub fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// (transmitted, received) from ping's summary ("500 packets transmitted, 499
/// received, ..."; iputils and busybox), or `None` without one.
pub fn ping_counts(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.contains("packets transmitted"))?;
    let mut n = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok());
    Some((n.next()?, n.next()?))
}

/// A veth pair: `host` in the root namespace (the uplink), `peer` in namespace `ns` with
/// address `addr`/24. IPv6 is off on both ends so that nothing but the test's traffic
/// crosses the link.
pub struct Veth {
    pub ns: String,
    pub host: String,
    pub peer: String,
}

impl Veth {
    pub fn new(tag: &str, queues: u16, addr: &str) -> Veth {
        let id = std::process::id() % 10000;
        let v = Veth {
            ns: format!("vs{tag}{id}"),
            host: format!("vs{tag}{id}a"),
            peer: format!("vs{tag}{id}b"),
        };
        v.cleanup();
        let q = queues.to_string();
        run(&["ip", "netns", "add", &v.ns]);
        run(&[
            "ip",
            "link",
            "add",
            &v.host,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &v.peer,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ]);
        run(&["ip", "link", "set", &v.peer, "netns", &v.ns]);
        std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", v.host),
            "1",
        )
        .unwrap();
        v.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{}.disable_ipv6=1", v.peer),
        ]);
        // AF_XDP frames carry no checksum metadata: the namespace computes its checksums
        // in software, as frames on a wire have them.
        v.exec(&["ethtool", "-K", &v.peer, "tx", "off"]);
        v.exec(&["ip", "addr", "add", &format!("{addr}/24"), "dev", &v.peer]);
        v.exec(&["ip", "link", "set", &v.peer, "up"]);
        run(&["ip", "link", "set", &v.host, "up"]);
        v
    }

    pub fn exec(&self, args: &[&str]) -> String {
        let mut a = vec!["ip", "netns", "exec", &self.ns];
        a.extend_from_slice(args);
        run(&a)
    }

    /// A counter of the namespace end (`rx_packets`, `rx_dropped`, ...).
    pub fn peer_stat(&self, name: &str) -> u64 {
        self.exec(&[
            "cat",
            &format!("/sys/class/net/{}/statistics/{name}", self.peer),
        ])
        .trim()
        .parse()
        .unwrap()
    }

    pub fn peer_mac(&self) -> String {
        self.exec(&["cat", &format!("/sys/class/net/{}/address", self.peer)])
            .trim()
            .to_string()
    }

    pub fn cleanup(&self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host])
            .status();
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// Runs `vswitchctl --socket CTL ARGS...` and returns its output.
pub fn vswitchctl_out(ctl: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vswitchctl"))
        .arg("--socket")
        .arg(ctl)
        .args(args)
        .output()
        .expect("run vswitchctl")
}

/// Runs `c` (the command `args` names, from Debian package `pkg`); returns its stdout,
/// or panics with its stderr when it fails.
pub fn output_of(args: &[&str], mut c: Command, pkg: &str) -> String {
    let o = c
        .output()
        .unwrap_or_else(|e| panic!("{} (Debian {pkg}): {e}", args[0]));
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The pid a daemon's pid file holds.
pub fn pid_file(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A child process killed (and reaped) when the test ends, passed or failed.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `mb` MiB over TCP from `client_ns` (None: the host) to `server_ip` in
/// `server_ns`, and checks the byte count and sha256 at the receiver.
pub fn tcp_transfer(server_ns: Option<&str>, client_ns: Option<&str>, server_ip: &str, mb: usize) {
    let netns = |ns: Option<&str>| -> Vec<String> {
        match ns {
            Some(n) => vec!["ip".into(), "netns".into(), "exec".into(), n.into()],
            None => vec![],
        }
    };
    let mut sargs = netns(server_ns);
    sargs.extend(["python3".into(), "-c".into()]);
    sargs.push(format!(
        "import socket,hashlib\n\
         s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         s.bind(('{server_ip}',5202)); s.listen(1); print('ready',flush=True)\n\
         c,_=s.accept(); h=hashlib.sha256(); n=0\n\
         while True:\n d=c.recv(1<<20)\n if not d: break\n h.update(d); n+=len(d)\n\
         print(n,h.hexdigest(),flush=True)\n"
    ));
    let mut server = Command::new(&sargs[0])
        .args(&sargs[1..])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(server.stdout.take().unwrap());
    let _server = KillOnDrop(server);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let mut cargs = netns(client_ns);
    cargs.extend(["timeout".into(), "60".into(), "python3".into(), "-c".into()]);
    cargs.push(format!(
        "import socket,hashlib\n\
         data=bytes((i*11)&255 for i in range(1<<20))*{mb}\n\
         s=socket.create_connection(('{server_ip}',5202),timeout=30)\n\
         s.sendall(data); s.close(); print(len(data),hashlib.sha256(data).hexdigest())\n"
    ));
    let client = Command::new(&cargs[0]).args(&cargs[1..]).output().unwrap();
    assert!(client.status.success(), "{client:?}");
    let sent = String::from_utf8_lossy(&client.stdout).trim().to_string();
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), sent, "bytes and sha256 received vs sent");
    assert!(sent.starts_with(&format!("{} ", mb << 20)));
}
