//! VMs started by libvirt, as a user runs them: libvirt runs QEMU as `libvirt-qemu`,
//! not root, so the switch's sockets must let that user in; the domain XML is the one
//! docs/libvirt.md shows, read from the page itself.
//!
//! libvirt 11 and QEMU 10 come from bookworm-backports (`scripts/setup.sh`). When no
//! libvirtd answers on `qemu:///system`, the test starts `virtlogd` and `libvirtd` and
//! stops them at the end; a running libvirtd is used and left running.
//!
//! Also here: a QEMU whose guest memory is not shared is named in vswitchd's log.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::qemu::{guest_image, kv, num, Vm, VmSpec};
use common::{serial, wait_for, TempDir, Vswitchd};

/// libvirt's connection URI.
const URI: &str = "qemu:///system";
/// The group libvirt's QEMU runs in on Debian.
const QEMU_GROUP: &str = "libvirt-qemu";
/// Bytes each TCP stream carries (verified byte by byte by the receiving guest).
const BULK: u64 = 16 << 20;

/// `virsh -c URI ARGS`; returns (success, stdout + stderr).
fn virsh(args: &[&str]) -> (bool, String) {
    let out = Command::new("virsh")
        .args(["-c", URI])
        .args(args)
        .output()
        .expect("run virsh (scripts/setup.sh installs libvirt-clients)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn virsh_ok(args: &[&str]) -> String {
    let (ok, text) = virsh(args);
    assert!(ok, "virsh {args:?}: {text}");
    text
}

/// The daemons this test started (none when a libvirtd already answered).
struct Libvirt {
    started: Vec<(String, PathBuf)>,
}

impl Libvirt {
    /// Uses the running libvirtd, or starts virtlogd and libvirtd (pid files in `dir`).
    fn ensure(dir: &TempDir) -> Libvirt {
        let mut lv = Libvirt {
            started: Vec::new(),
        };
        if virsh(&["version"]).0 {
            return lv;
        }
        for d in ["virtlogd", "libvirtd"] {
            let pid = dir.path(&format!("{d}.pid"));
            let st = Command::new(d)
                .args(["--daemon", "--pid-file"])
                .arg(&pid)
                .status()
                .unwrap_or_else(|e| {
                    panic!("start {d} (scripts/setup.sh installs libvirt-daemon-system): {e}")
                });
            assert!(st.success(), "{d} did not start");
            lv.started.push((d.to_string(), pid));
        }
        wait_for(Duration::from_secs(30), "libvirtd answering", || {
            virsh(&["version"]).0.then_some(())
        });
        lv
    }
}

impl Drop for Libvirt {
    fn drop(&mut self) {
        for (name, pid) in self.started.iter().rev() {
            let Some(p) = std::fs::read_to_string(pid)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            else {
                continue;
            };
            // SAFETY: kill(2) on a daemon this test started (its pid file).
            unsafe { libc::kill(p, libc::SIGTERM) };
            let start = Instant::now();
            while Path::new(&format!("/proc/{p}")).exists()
                && start.elapsed() < Duration::from_secs(10)
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            eprintln!("stopped {name} ({p})");
        }
    }
}

/// docs/libvirt.md's XML block after `<!-- libvirt: server-mode port -->`.
fn readme_xml() -> String {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/libvirt.md");
    let readme = std::fs::read_to_string(&page).expect("docs/libvirt.md");
    let after = readme
        .split_once("<!-- libvirt: server-mode port -->")
        .expect("docs/libvirt.md's libvirt XML marker")
        .1;
    let body = after
        .split_once("```xml\n")
        .and_then(|(_, b)| b.split_once("```"))
        .expect("an xml block after the marker")
        .0;
    body.to_string()
}

/// A defined domain, destroyed and undefined on drop.
struct Domain {
    name: String,
    console: PathBuf,
}

impl Domain {
    /// Defines domain `name` from docs/libvirt.md's XML (its socket and MAC replaced) around
    /// the test guest's kernel, initrd and `params` (tests/vm/init.sh).
    fn define(dir: &TempDir, name: &str, socket: &Path, mac: &str, params: &str) -> Domain {
        let xml = readme_xml()
            .replace("/run/vswitch/vm1.sock", &socket.display().to_string())
            .replace("52:54:00:00:00:01", mac);
        let (memory, devices) = xml
            .split_once("<devices>")
            .expect("<devices> in docs/libvirt.md's XML");
        let devices = devices.rsplit_once("</devices>").expect("</devices>").0;
        let console = dir.path(&format!("{name}.console"));
        let domain = format!(
            "<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>512</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 {params}</cmdline>
  </os>
  {memory}
  <on_poweroff>destroy</on_poweroff>
  <devices>
    {devices}
    <serial type='file'>
      <source path='{console}'/>
      <target port='0'/>
    </serial>
  </devices>
</domain>",
            kernel = dir.path("vmlinux").display(),
            initrd = dir.path("initrd.cpio.gz").display(),
            console = console.display(),
        );
        let file = dir.path(&format!("{name}.xml"));
        std::fs::write(&file, domain).unwrap();
        let (_, _) = virsh(&["destroy", name]);
        let (_, _) = virsh(&["undefine", name]);
        virsh_ok(&["define", file.to_str().unwrap()]);
        Domain {
            name: name.to_string(),
            console,
        }
    }

    fn start(&self) {
        let _ = std::fs::remove_file(&self.console);
        virsh_ok(&["start", &self.name]);
    }

    fn destroy(&self) {
        virsh_ok(&["destroy", &self.name]);
    }

    /// The guest's console so far: its complete lines (the file is read while the
    /// guest writes it, so the last line may be half written).
    fn console(&self) -> String {
        let mut text = std::fs::read_to_string(&self.console).unwrap_or_default();
        text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
        text
    }

    /// Waits for `n` console lines starting with `prefix`; panics with the console and
    /// libvirt's QEMU log on timeout or a `RESULT error` line.
    fn wait_lines(&self, prefix: &str, n: usize, timeout: Duration) -> Vec<String> {
        let start = Instant::now();
        loop {
            let text = self.console();
            if let Some(e) = text.lines().find(|l| l.starts_with("RESULT error")) {
                panic!("{}: {e}\n{text}", self.name);
            }
            let got: Vec<String> = text
                .lines()
                .filter(|l| l.starts_with(prefix))
                .map(str::to_string)
                .collect();
            if got.len() >= n {
                return got;
            }
            if start.elapsed() > timeout {
                let log =
                    std::fs::read_to_string(format!("/var/log/libvirt/qemu/{}.log", self.name))
                        .unwrap_or_default();
                panic!(
                    "{}: no {n} x {prefix:?} within {timeout:?}; console:\n{text}\nQEMU log:\n{log}",
                    self.name
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        let _ = virsh(&["destroy", &self.name]);
        let _ = virsh(&["undefine", &self.name]);
    }
}

/// Asserts both ping sizes of a guest's `RESULT ping` lines got every echo back.
fn assert_pings(d: &Domain) {
    for l in d.wait_lines("RESULT ping", 2, Duration::from_secs(120)) {
        let m = kv(&l);
        assert_eq!(num(&m, "sent"), num(&m, "received"), "{}: {l}", d.name);
    }
}

/// The `n`th stream's `RESULT recv` of the server guest, checked whole and intact.
fn assert_stream(server: &Domain, n: usize) {
    let lines = server.wait_lines("RESULT recv", n, Duration::from_secs(240));
    let m = kv(&lines[n - 1]);
    assert_eq!(num(&m, "bytes"), BULK, "stream {n}: {}", lines[n - 1]);
    assert_eq!(num(&m, "bad"), 0, "stream {n}: {}", lines[n - 1]);
}

/// vswitchd's arguments: two server-mode ports with two queue pairs, their sockets
/// owned by libvirt's QEMU group.
fn switch_args(dir: &TempDir) -> Vec<String> {
    let mut a = vec![
        "--vhost-user-socket-group".to_string(),
        QEMU_GROUP.to_string(),
        "--poll".into(),
        "adaptive".into(),
    ];
    for p in ["vm1", "vm2"] {
        a.push("--vhost-user".into());
        a.push(format!(
            "{p}={},queues=2",
            dir.path(&format!("{p}.sock")).display()
        ));
    }
    a
}

/// Asserts the socket file is `srw-rw----` and owned by libvirt's QEMU group.
fn assert_socket_access(path: &Path) {
    let m = std::fs::metadata(path).unwrap();
    let gid = vswitch::sys::group_id(QEMU_GROUP).expect("group libvirt-qemu");
    assert_eq!(m.permissions().mode() & 0o777, 0o660, "{}", path.display());
    assert_eq!(m.gid(), gid, "{}", path.display());
}

/// Whether `port` has a driver now, and how many times one connected.
fn guest(sw: &Vswitchd, port: &str) -> (bool, u64) {
    let p = sw.show_port(port);
    (
        p["connected"].as_bool().unwrap(),
        p["connections"].as_u64().unwrap(),
    )
}

#[test]
fn libvirt_domains_on_group_owned_sockets_survive_restarts() {
    let _g = serial();
    let img = guest_image();
    let dir = TempDir::new("libvirt");
    // libvirt relabels the kernel and initrd for QEMU's user while a domain runs: copies.
    for f in ["vmlinux", "initrd.cpio.gz"] {
        std::fs::copy(img.join(f), dir.path(f)).unwrap();
    }
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _lv = Libvirt::ensure(&dir);
    let mut sw = Vswitchd::start(&dir, &switch_args(&dir));
    let (s1, s2) = (dir.path("vm1.sock"), dir.path("vm2.sock"));
    assert_socket_access(&s1);
    assert_socket_access(&s2);
    let tag = std::process::id();
    let server = Domain::define(
        &dir,
        &format!("vs-test-vm1-{tag}"),
        &s1,
        "52:54:00:00:01:01",
        "vm.ip=10.0.0.1 vm.peer=10.0.0.2 vm.test=server-loop",
    );
    let client = Domain::define(
        &dir,
        &format!("vs-test-vm2-{tag}"),
        &s2,
        "52:54:00:00:01:02",
        &format!("vm.ip=10.0.0.2 vm.peer=10.0.0.1 vm.test=client vm.bytes={BULK} vm.stay=1"),
    );
    server.start();
    client.start();
    assert_pings(&server);
    assert_pings(&client);
    assert_stream(&server, 1);
    let send = kv(&client.wait_lines("RESULT send", 1, Duration::from_secs(60))[0]);
    assert_eq!(num(&send, "verified"), 1, "{send:?}");
    assert_eq!(guest(&sw, "vm2"), (true, 1));
    let queues = sw.show_port("vm1")["ready_queue_pairs"].clone();
    eprintln!("stream 1 through libvirt's QEMU: {send:?}; vm1 ready queue pairs {queues}");

    // The client VM destroyed and started again: a new connection, a new stream.
    client.destroy();
    wait_for(Duration::from_secs(10), "vm2 disconnected", || {
        (!guest(&sw, "vm2").0).then_some(())
    });
    assert_eq!(guest(&sw, "vm2"), (false, 1), "show says the guest is gone");
    client.start();
    assert_pings(&client);
    assert_stream(&server, 2);
    assert_eq!(guest(&sw, "vm2"), (true, 2));

    // vswitchd restarted under the running server VM: its QEMU reconnects (<reconnect>)
    // to the new sockets, group-owned again without anyone's chmod, and carries the
    // next stream.
    client.destroy();
    sw.stop();
    let sw = Vswitchd::start(&dir, &switch_args(&dir));
    assert_socket_access(&s1);
    let t = Instant::now();
    wait_for(Duration::from_secs(30), "vm1's QEMU reconnected", || {
        (sw.show_port("vm1")["link"] == "up").then_some(())
    });
    eprintln!("vm1 reconnected {:?} after vswitchd's restart", t.elapsed());
    client.start();
    assert_pings(&client);
    assert_stream(&server, 3);
    for p in ["vm1", "vm2"] {
        assert_eq!(sw.protocol_errors(p), 0, "{p}: {}", sw.log());
    }
    eprintln!(
        "three verified streams through libvirt domains; after the restart: {:?}",
        sw.stats()
    );
}

/// A QEMU whose guest memory is not shared negotiates, sends no memory table, and
/// runs virtio-net in userspace: vswitchd names the likely cause in its log.
#[test]
fn unshared_guest_memory_is_named_in_the_log() {
    let _g = serial();
    let dir = TempDir::new("memless");
    let sock = dir.path("vm.sock");
    let sw = Vswitchd::start(
        &dir,
        &["--vhost-user".into(), format!("vm={}", sock.display())],
    );
    let _vm = Vm::start(VmSpec {
        shared_memory: false,
        ..VmSpec::new(
            "memless",
            &sock,
            "52:54:00:00:02:01",
            "vm.ip=10.0.0.1 vm.peer=10.0.0.2 vm.test=idle vm.stay=1".into(),
        )
    });
    let t = Instant::now();
    wait_for(
        Duration::from_secs(120),
        "the log naming unshared memory",
        || {
            sw.log()
                .contains("never shared its guest memory")
                .then_some(())
        },
    );
    eprintln!("named {:?} after QEMU started", t.elapsed());
    assert!(sw.log().contains("share=on"), "the log says what to change");
}
