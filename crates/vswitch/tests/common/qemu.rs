//! QEMU guests (TCG) on vhost-user ports: the test guest of `tests/vm/`, its console,
//! and QEMU's human monitor for live migration.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::setup_host;

/// Builds (once per test binary) the guest kernel and initrd; returns their directory.
pub fn guest_image() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        setup_host();
        for (bin, pkg) in [
            ("/usr/bin/qemu-system-x86_64", "qemu-system-x86"),
            ("/bin/busybox", "busybox-static"),
            ("/usr/bin/cpio", "cpio"),
        ] {
            if !Path::new(bin).exists() {
                let ok = Command::new("sh")
                    .args(["-c", &format!("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {pkg}")])
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(ok, "{bin} missing and installing Debian's {pkg} failed");
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vm");
        let st = Command::new("bash")
            .arg(root.join("tests/vm/build-guest.sh"))
            .arg(&out)
            .stdout(Stdio::null())
            .status()
            .expect("run tests/vm/build-guest.sh");
        assert!(st.success(), "tests/vm/build-guest.sh failed");
        out
    })
}

/// The QEMU the tests start: `$VSWITCH_QEMU` (a program and its first arguments,
/// split at spaces, e.g. `/opt/qemu/bin/qemu-system-x86_64 -L /opt/qemu/share/qemu`),
/// or `qemu-system-x86_64` from `PATH`.
pub fn qemu_command() -> Vec<String> {
    let cmd = std::env::var("VSWITCH_QEMU").unwrap_or_else(|_| "qemu-system-x86_64".into());
    cmd.split_whitespace().map(str::to_string).collect()
}

/// QEMU's `(major, minor)` version, from `--version`'s first line
/// ("QEMU emulator version 10.0.2 (Debian ...)").
pub fn qemu_version() -> (u32, u32) {
    static VERSION: OnceLock<(u32, u32)> = OnceLock::new();
    *VERSION.get_or_init(read_qemu_version)
}

fn read_qemu_version() -> (u32, u32) {
    let qemu = qemu_command();
    let out = Command::new(&qemu[0])
        .args(&qemu[1..])
        .arg("--version")
        .output()
        .expect("run qemu --version");
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or_else(|| panic!("no version in QEMU's --version: {text}"));
    let mut n = version.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    (n.next().unwrap_or(0), n.next().unwrap_or(0))
}

/// A guest's console output, collected by a reader thread.
pub struct Console {
    lines: Mutex<Vec<String>>,
    cv: Condvar,
}

/// One QEMU guest.
pub struct Vm {
    pub name: String,
    child: Option<Child>,
    console: Arc<Console>,
    monitor: Option<PathBuf>,
}

pub struct VmSpec<'a> {
    pub name: &'a str,
    pub socket: &'a Path,
    pub mac: &'a str,
    /// `vm.*` kernel parameters (see tests/vm/init.sh).
    pub params: String,
    /// QEMU listens on the socket (vswitchd in client mode).
    pub qemu_server: bool,
    /// Extra `virtio-net-pci` options, e.g. `OFFLOADS_OFF`.
    pub device: &'a str,
    pub queues: u16,
    pub cpus: u16,
    /// `-incoming URI`: the destination of a live migration.
    pub incoming: Option<String>,
    /// QEMU's human monitor on this Unix socket ([`Vm::hmp`]).
    pub monitor: Option<PathBuf>,
    /// `-cpu` model: `max` (every feature TCG has), or a named model for a VM that
    /// migrates (QEMU documents `max` as not migration-safe).
    pub cpu: &'a str,
    /// Guest memory is a shared memfd (`share=on`), as vhost-user needs; false: QEMU's
    /// default private memory (a misconfigured VM).
    pub shared_memory: bool,
    /// A tap of this name instead of vhost-user (`-netdev tap,ifname=...`, as libvirt's
    /// `<interface type='bridge'>`); `socket` is then unused.
    pub tap: Option<&'a str>,
}

impl<'a> VmSpec<'a> {
    /// One queue pair, one vCPU, QEMU's default offloads, QEMU the vhost-user client.
    pub fn new(name: &'a str, socket: &'a Path, mac: &'a str, params: String) -> Self {
        VmSpec {
            name,
            socket,
            mac,
            params,
            qemu_server: false,
            device: "",
            queues: 1,
            cpus: 1,
            incoming: None,
            monitor: None,
            cpu: "max",
            shared_memory: true,
            tap: None,
        }
    }
}

impl Vm {
    pub fn start(spec: VmSpec<'_>) -> Vm {
        let img = guest_image();
        let mut chardev = format!("socket,id=c0,path={}", spec.socket.display());
        if spec.qemu_server {
            chardev.push_str(",server=on,wait=off");
        }
        let mut netdev = match spec.tap {
            Some(t) => format!("tap,id=n0,ifname={t},script=no,downscript=no"),
            None => "vhost-user,id=n0,chardev=c0".to_string(),
        };
        let chardev_args = match spec.tap {
            Some(_) => Vec::new(),
            None => vec!["-chardev".to_string(), chardev],
        };
        let mut device = format!("virtio-net-pci,netdev=n0,mac={}", spec.mac);
        if qemu_version().0 < 8 {
            // QEMU 7.2 under TCG crashes with vhost-user and MSI-X: INTx instead.
            device.push_str(",vectors=0");
        }
        if spec.queues > 1 {
            netdev.push_str(&format!(",queues={}", spec.queues));
            device.push_str(",mq=on");
        }
        device.push_str(spec.device);
        let qemu = qemu_command();
        let mut child = Command::new(&qemu[0])
            .args(&qemu[1..])
            .args(["-accel", "tcg", "-M", "pc", "-cpu", spec.cpu, "-m", "512M"])
            .args(["-smp", &spec.cpus.to_string()])
            .args([
                "-nodefaults",
                "-display",
                "none",
                "-serial",
                "stdio",
                "-no-reboot",
            ])
            .arg("-kernel")
            .arg(img.join("vmlinux"))
            .arg("-initrd")
            .arg(img.join("initrd.cpio.gz"))
            .args([
                "-append",
                &format!("console=ttyS0 quiet panic=-1 {}", spec.params),
            ])
            .args(if spec.shared_memory {
                &[
                    "-object",
                    "memory-backend-memfd,id=mem,size=512M,share=on",
                    "-numa",
                    "node,memdev=mem",
                ][..]
            } else {
                &[][..]
            })
            .args(&chardev_args)
            .args(["-netdev", &netdev, "-device", &device])
            .args(
                spec.incoming
                    .iter()
                    .flat_map(|u| ["-incoming".to_string(), u.clone()]),
            )
            .args(spec.monitor.iter().flat_map(|m| {
                [
                    "-monitor".to_string(),
                    format!("unix:{},server=on,wait=off", m.display()),
                ]
            }))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn qemu-system-x86_64");
        let console = Arc::new(Console {
            lines: Mutex::new(Vec::new()),
            cv: Condvar::new(),
        });
        for pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let c = console.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    c.lines.lock().unwrap().push(line.trim_end().to_string());
                    c.cv.notify_all();
                }
            });
        }
        Vm {
            name: spec.name.to_string(),
            child: Some(child),
            console,
            monitor: spec.monitor.clone(),
        }
    }

    /// Runs `cmd` on QEMU's human monitor; returns its output.
    pub fn hmp(&self, cmd: &str) -> String {
        let path = self.monitor.as_ref().expect("a VM started with a monitor");
        let start = std::time::Instant::now();
        let mut s = loop {
            if let Ok(s) = UnixStream::connect(path) {
                break s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{}: no monitor socket after 20 s; console:\n{}",
                self.name,
                self.console()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let read_prompt = |s: &mut UnixStream| {
            let mut out = Vec::new();
            let mut b = [0u8; 4096];
            while !out.ends_with(b"(qemu) ") {
                let n = s.read(&mut b).expect("read QEMU's monitor");
                assert!(
                    n > 0,
                    "{}: QEMU's monitor closed; console:\n{}",
                    self.name,
                    self.console.lines.lock().unwrap().join("\n")
                );
                out.extend_from_slice(&b[..n]);
            }
            String::from_utf8_lossy(&out).into_owned()
        };
        read_prompt(&mut s);
        s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
        let out = read_prompt(&mut s);
        // The monitor echoes the command line (with terminal escapes) first.
        out.lines()
            .skip(1)
            .filter(|l| !l.starts_with("(qemu)"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Everything the VM printed so far (console and QEMU's stderr).
    pub fn console(&self) -> String {
        self.console.lines.lock().unwrap().join("\n")
    }

    /// The QEMU process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// Lines starting with `prefix`.
    pub fn lines(&self, prefix: &str) -> Vec<String> {
        let l = self.console.lines.lock().unwrap();
        l.iter()
            .filter(|s| s.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Waits until `n` lines start with `prefix`; panics with the console on timeout or
    /// on a `RESULT error` line.
    pub fn wait_lines(&self, prefix: &str, n: usize, timeout: Duration) -> Vec<String> {
        self.try_wait_lines(prefix, n, timeout).unwrap_or_else(|| {
            panic!(
                "{}: no {n} x {prefix:?} within {timeout:?}; console:\n{}",
                self.name,
                self.console()
            )
        })
    }

    /// As [`Vm::wait_lines`], but `None` on timeout (the caller says what stalled).
    pub fn try_wait_lines(&self, prefix: &str, n: usize, timeout: Duration) -> Option<Vec<String>> {
        let deadline = Instant::now() + timeout;
        let mut l = self.console.lines.lock().unwrap();
        loop {
            if let Some(e) = l.iter().find(|s| s.starts_with("RESULT error")) {
                panic!("{}: {e}\n{}", self.name, l.join("\n"));
            }
            let got: Vec<String> = l
                .iter()
                .filter(|s| s.starts_with(prefix))
                .cloned()
                .collect();
            if got.len() >= n {
                return Some(got);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            l = self.console.cv.wait_timeout(l, deadline - now).unwrap().0;
        }
    }

    /// Waits for the guest to power off.
    pub fn wait_exit(&mut self, timeout: Duration) {
        let c = self.child.as_mut().unwrap();
        let start = Instant::now();
        while c.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < timeout,
                "{}: did not power off within {timeout:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `key=value` fields of a RESULT/STATS line.
pub fn kv(line: &str) -> HashMap<String, String> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn num(m: &HashMap<String, String>, k: &str) -> u64 {
    m.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {k} in {m:?}"))
}
