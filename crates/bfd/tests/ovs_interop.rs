//! BFD against real Open vSwitch over Geneve, as ovn-controller sets it up.
//!
//! Two network namespaces joined by a veth (198.51.100.0/24). In A, a private
//! Open vSwitch (userspace datapath, its database, run directory and logs in
//! a temporary directory; no system OVS touched) set up as its userspace
//! tunnelling guide: `br-phy` holds the veth and A's underlay address
//! 198.51.100.1, `br-int` a Geneve port to 198.51.100.2 with
//! `options:key=flow` and `bfd:enable=true`, what ovn-controller 23.03
//! configures (`controller/encaps.c`, `controller/bfd.c`). In B, this test:
//! a UDP socket on 198.51.100.2:6081, Geneve decapsulation by the `geneve`
//! crate, a [`bfd::Session`], and answers in Geneve as Open vSwitch sends
//! them (VNI 0, no options).
//!
//! Needs root (namespaces) and `ovs-vswitchd`, `ovsdb-server`,
//! `ovsdb-tool`, `ovs-vsctl`, `ovs-appctl` (Debian `openvswitch-switch`);
//! skipped with a message when those are missing.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bfd::frame::{BFD_DST_MAC, DEFAULT_DST_IP, DEFAULT_SRC_IP, FRAME_LEN, TTL, UDP_PORT};
use bfd::{Config, Diagnostic, FrameConfig, Session, State};

const A_ADDR: &str = "198.51.100.1";
const B_ADDR: &str = "198.51.100.2";
/// The MAC of our side's tunnel "port" (the inner frames' source).
const OUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0b, 0x01];

fn run(args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")));
    assert!(
        o.status.success(),
        "{}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn on_path(bin: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|d| d.join(bin).is_file())
}

/// Polls `cond` every 20 ms until it holds; panics after `limit`, with
/// what `explain` says of the state of things.
fn wait_for(
    limit: Duration,
    what: &str,
    explain: &dyn Fn() -> String,
    mut cond: impl FnMut() -> bool,
) -> Duration {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > limit {
            panic!(
                "timed out after {limit:?} waiting for {what}\n{}",
                explain()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

/// A fresh temporary directory, removed on drop (also when the test fails).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let p = std::env::temp_dir().join(format!("bfd-interop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Namespaces A and B and the veth between them; deleted on drop.
struct Net {
    a: String,
    b: String,
    veth_a: String,
}

impl Net {
    fn new() -> Net {
        let id = std::process::id() % 100_000;
        let net = Net {
            a: format!("bfdA{id}"),
            b: format!("bfdB{id}"),
            veth_a: format!("bfa{id}"),
        };
        let veth_b = format!("bfb{id}");
        net.cleanup();
        for ns in [&net.a, &net.b] {
            run(&["ip", "netns", "add", ns], &[]);
            net.exec(ns, &["ip", "link", "set", "lo", "up"]);
            net.exec(ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            net.exec(
                ns,
                &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            );
        }
        // Created inside A, the peer moved to B: nothing in the root namespace.
        net.exec(
            &net.a,
            &[
                "ip",
                "link",
                "add",
                &net.veth_a,
                "type",
                "veth",
                "peer",
                "name",
                &veth_b,
            ],
        );
        net.exec(&net.a, &["ip", "link", "set", &veth_b, "netns", &net.b]);
        net.exec(&net.a, &["ip", "link", "set", &net.veth_a, "up"]);
        let b_cidr = format!("{B_ADDR}/24");
        net.exec(&net.b, &["ip", "addr", "add", &b_cidr, "dev", &veth_b]);
        // B's kernel would leave its UDP checksums to veth "offload"
        // (partial), which OVS, reading the frame off the veth, finds bad.
        net.exec(&net.b, &["ethtool", "-K", &veth_b, "tx", "off"]);
        net.exec(&net.b, &["ip", "link", "set", &veth_b, "up"]);
        net
    }

    fn exec(&self, ns: &str, args: &[&str]) -> String {
        let mut a = vec!["ip", "netns", "exec", ns];
        a.extend_from_slice(args);
        run(&a, &[])
    }

    fn cleanup(&self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// A private Open vSwitch in namespace A.
struct Ovs {
    dir: PathBuf,
    ns: String,
}

impl Ovs {
    fn start(net: &Net, dir: PathBuf) -> Ovs {
        let ovs = Ovs {
            dir,
            ns: net.a.clone(),
        };
        let db = ovs.dir.join("conf.db");
        let db = db.to_str().unwrap();
        ovs.cmd(&[
            "ovsdb-tool",
            "create",
            db,
            "/usr/share/openvswitch/vswitch.ovsschema",
        ]);
        let remote = format!("--remote=p{}", ovs.db());
        ovs.cmd_ns(&[
            "ovsdb-server",
            db,
            &remote,
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
        // br-phy must not share the veth's MAC, or the kernel would take the
        // Geneve frames too.
        ovs.vsctl(&[
            "add-br",
            "br-phy",
            "--",
            "set",
            "bridge",
            "br-phy",
            "datapath_type=netdev",
            "other_config:hwaddr=02:00:00:00:0a:01",
        ]);
        ovs.vsctl(&["add-port", "br-phy", &net.veth_a]);
        let a_cidr = format!("{A_ADDR}/24");
        net.exec(&net.a, &["ip", "addr", "add", &a_cidr, "dev", "br-phy"]);
        net.exec(&net.a, &["ip", "link", "set", "br-phy", "up"]);
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

    fn db(&self) -> String {
        format!("unix:{}", self.dir.join("db.sock").display())
    }

    fn env(&self) -> Vec<(&'static str, &Path)> {
        ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"]
            .into_iter()
            .map(|k| (k, self.dir.as_path()))
            .collect()
    }

    fn cmd(&self, args: &[&str]) -> String {
        run(args, &self.env())
    }

    fn cmd_ns(&self, args: &[&str]) -> String {
        let mut a = vec!["ip", "netns", "exec", &self.ns];
        a.extend_from_slice(args);
        run(&a, &self.env())
    }

    fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db={}", self.db());
        let mut a = vec!["ovs-vsctl", "--timeout=20", &db];
        a.extend_from_slice(args);
        self.cmd(&a)
    }

    /// `bfd_status:KEY` of interface `gnv0`, unquoted; empty when absent.
    fn bfd_status(&self, key: &str) -> String {
        let k = format!("bfd_status:{key}");
        let v = self.vsctl(&["--if-exists", "get", "interface", "gnv0", &k]);
        v.trim().trim_matches('"').to_string()
    }

    /// `ovs-appctl bfd/show gnv0`.
    fn bfd_show(&self) -> String {
        self.appctl(&["bfd/show", "gnv0"])
    }

    /// `ovs-appctl ARGS`: its output, or its error.
    fn appctl(&self, args: &[&str]) -> String {
        let mut c = Command::new("ovs-appctl");
        c.args(args).envs(self.env());
        match c.output() {
            Ok(o) => {
                String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr)
            }
            Err(e) => e.to_string(),
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for name in ["ovs-vswitchd", "ovsdb-server"] {
            let pidfile = self.dir.join(format!("{name}.pid"));
            let Some(pid) = std::fs::read_to_string(pidfile)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            else {
                continue;
            };
            // SAFETY: kill(2) on the pid this instance's own pidfile names.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let proc = PathBuf::from(format!("/proc/{pid}"));
            let deadline = Instant::now() + Duration::from_secs(5);
            while proc.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A UDP socket bound to `addr` in namespace `ns`: made by a thread that
/// entered `ns` (a socket stays in the namespace it was made in).
fn socket_in(ns: &str, addr: SocketAddr) -> UdpSocket {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: setns(2) on a valid namespace fd; it changes only this
        // short-lived thread's network namespace.
        let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        UdpSocket::bind(addr).unwrap()
    })
    .join()
    .unwrap()
}

/// What our side saw and holds, shared with the responder thread.
struct Peer {
    session: Session,
    /// Send what the session asks to; off = "stop answering".
    answering: bool,
    /// Geneve VNIs and option-area lengths of the BFD frames from OVS.
    vnis: BTreeSet<u32>,
    option_lens: BTreeSet<usize>,
    /// The first inner frame OVS sent.
    first_frame: Option<Vec<u8>>,
    received: u64,
    dropped: Vec<String>,
}

struct Responder {
    peer: Arc<Mutex<Peer>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Responder {
    fn start(sock: UdpSocket, session: Session, epoch: Instant) -> Responder {
        let peer = Arc::new(Mutex::new(Peer {
            session,
            answering: true,
            vnis: BTreeSet::new(),
            option_lens: BTreeSet::new(),
            first_frame: None,
            received: 0,
            dropped: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peer.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("bfd-peer".into())
            .spawn(move || respond(&sock, &p, &s, epoch))
            .unwrap();
        Responder {
            peer,
            stop,
            thread: Some(thread),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Peer) -> R) -> R {
        f(&mut self.peer.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn state(&self) -> State {
        self.with(|p| p.session.state())
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The responder loop: decapsulate, recognise, receive; poll and send.
fn respond(sock: &UdpSocket, peer: &Mutex<Peer>, stop: &AtomicBool, epoch: Instant) {
    let frames = FrameConfig::default();
    let decap = geneve::decap::Decapsulator::default();
    let ovs: SocketAddr = format!("{A_ADDR}:6081").parse().unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut out = [0u8; 8 + FRAME_LEN];
    while !stop.load(Ordering::Relaxed) {
        let got = sock.recv(&mut buf).ok();
        let now = epoch.elapsed().as_millis() as u64;
        let mut p = peer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = got {
            match decap.decapsulate_payload(&buf[..n]) {
                Ok(g) => match frames.recognise(g.inner, u64::from(g.vni)) {
                    Some(Ok(packet)) => {
                        p.vnis.insert(g.vni);
                        p.option_lens.insert(g.options.len());
                        p.first_frame.get_or_insert_with(|| g.inner.to_vec());
                        p.received += 1;
                        if let Err(e) = p.session.receive(&packet, now) {
                            p.dropped.push(format!("session: {e}"));
                        }
                    }
                    Some(Err(e)) => p.dropped.push(format!("frame: {e}")),
                    None => p.dropped.push("not BFD".into()),
                },
                Err(r) => p.dropped.push(format!("geneve: {}", r.as_str())),
            }
        }
        if let Some(packet) = p.session.poll(now) {
            if p.answering {
                // Geneve as OVS sends BFD with options:key=flow: VNI 0, no options.
                let repr = geneve::wire::Repr {
                    control: false,
                    critical: false,
                    protocol_type: geneve::wire::ETHERTYPE_TEB,
                    vni: 0,
                    options: &[],
                };
                let mut g = geneve::wire::Packet::new_unchecked(&mut out[..]);
                repr.emit(&mut g).unwrap();
                frames.emit(OUR_MAC, &packet, g.payload_mut()).unwrap();
                sock.send_to(&out, ovs).unwrap();
            }
        }
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

#[test]
fn bfd_with_open_vswitch_over_geneve() {
    let missing: Vec<&str> = [
        "ovs-vswitchd",
        "ovsdb-server",
        "ovsdb-tool",
        "ovs-vsctl",
        "ovs-appctl",
    ]
    .into_iter()
    .filter(|b| !on_path(b))
    .collect();
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED: Open vSwitch binaries missing: {missing:?} (Debian openvswitch-switch)"
        );
        return;
    }
    let test_start = Instant::now();
    let dir = TempDir::new();
    let net = Net::new();
    let ovs = Ovs::start(&net, dir.0.clone());

    // Every BFD message in the log, for a failure's report.
    ovs.appctl(&["vlog/set", "bfd:file:dbg"]);
    let epoch = Instant::now();
    let sock = socket_in(&net.b, format!("{B_ADDR}:6081").parse().unwrap());
    let session = Session::new(Config::default(), NonZeroU32::new(0xb0b).unwrap()).unwrap();
    let peer = Responder::start(sock, session, epoch);
    let limit = Duration::from_secs(10);
    let explain = || {
        let p = peer.with(|p| {
            format!(
                "our session: {:?}\nreceived {}, dropped {:?}",
                p.session.status(),
                p.received,
                p.dropped
            )
        });
        format!(
            "{p}\nOVS bfd/show:\n{}\nOVS datapath flows:\n{}\nOVS neighbours:\n{}\nOVS log:\n{}",
            ovs.bfd_show(),
            ovs.appctl(&["dpctl/dump-flows"]),
            ovs.appctl(&["tnl/neigh/show"]),
            ovs.log_tail()
        )
    };

    // 1. The tunnel as ovn-controller makes it: key=flow, BFD with OVS's defaults.
    ovs.vsctl(&[
        "add-port",
        "br-int",
        "gnv0",
        "--",
        "set",
        "interface",
        "gnv0",
        "type=geneve",
        "options:remote_ip=198.51.100.2",
        "options:key=flow",
        "bfd:enable=true",
    ]);
    let up = wait_for(limit, "both sides Up", &explain, || {
        ovs.bfd_status("state") == "up" && peer.state() == State::Up
    });
    eprintln!("up: {} ms after bfd:enable=true", ms(up));
    // OVS went Up on our Init; it sees us Up once our next packet (up to 1 s later,
    // the slow rate before Up) arrives.
    wait_for(limit, "OVS sees us Up and forwards", &explain, || {
        ovs.bfd_status("remote_state") == "up" && ovs.bfd_status("forwarding") == "true"
    });

    // What OVS puts on the wire (checked, and shown for the record).
    let first = peer.with(|p| p.first_frame.clone()).unwrap();
    assert_eq!(first.len(), FRAME_LEN, "{first:02x?}");
    assert_eq!(first[0..6], BFD_DST_MAC, "inner destination MAC");
    assert_eq!(first[26..30], DEFAULT_SRC_IP.octets(), "inner source IP");
    assert_eq!(
        first[30..34],
        DEFAULT_DST_IP.octets(),
        "inner destination IP"
    );
    assert_eq!((first[15], first[22]), (0xc0, TTL), "TOS, TTL");
    let sport = u16::from_be_bytes([first[34], first[35]]);
    assert!(sport >= 49152, "UDP source port {sport}");
    assert_eq!(u16::from_be_bytes([first[36], first[37]]), UDP_PORT);
    eprintln!(
        "OVS inner frame: dst {:02x?} src {:02x?} {}→{} tos {:#x} ttl {} udp {}→{} csum {:#06x}; \
         Geneve VNIs {:?}, option lengths {:?}",
        &first[0..6],
        &first[6..12],
        Ipv4Addr::new(first[26], first[27], first[28], first[29]),
        Ipv4Addr::new(first[30], first[31], first[32], first[33]),
        first[15],
        first[22],
        sport,
        UDP_PORT,
        u16::from_be_bytes([first[40], first[41]]),
        peer.with(|p| p.vnis.clone()),
        peer.with(|p| p.option_lens.clone()),
    );
    assert_eq!(peer.with(|p| p.vnis.clone()), BTreeSet::from([0]));
    assert_eq!(peer.with(|p| p.option_lens.clone()), BTreeSet::from([0]));
    // Once Up, OVS advertises its configured 100 ms (1 s while not Up).
    wait_for(limit, "OVS's Up timers", &explain, || {
        peer.with(|p| {
            (
                p.session.remote_detect_mult(),
                p.session.remote_min_rx_ms(),
                p.session.remote_min_tx_ms(),
            )
        }) == (3, 1000, 100)
    });

    // 2. OVS polls (its min_rx 1000 → 300 ms while Up): we answer Final,
    // and only then does OVS apply it.
    ovs.vsctl(&["set", "interface", "gnv0", "bfd:min_rx=300"]);
    let d = wait_for(limit, "OVS's poll sequence to complete", &explain, || {
        let show = ovs.bfd_show();
        show.contains("Local Minimum RX Interval: 300ms") && show.contains("Local Flags: none")
    });
    eprintln!("OVS poll sequence done in {} ms", ms(d));
    wait_for(limit, "our view of OVS's min_rx", &explain, || {
        peer.with(|p| p.session.remote_min_rx_ms()) == 300
    });

    // 3. We poll (min_tx 100 → 200 ms while Up): OVS answers Final.
    peer.with(|p| {
        let cfg = Config {
            min_tx_ms: 200,
            ..p.session.config()
        };
        p.session.set_config(cfg).unwrap();
        assert!(p.session.in_poll());
    });
    let d = wait_for(limit, "our poll sequence to complete", &explain, || {
        !peer.with(|p| p.session.in_poll())
            && ovs.bfd_show().contains("Remote Minimum TX Interval: 200ms")
    });
    eprintln!("our poll sequence done in {} ms", ms(d));
    assert_eq!(peer.with(|p| p.session.tx_interval_ms()), 300);

    // 4. We stop answering: OVS detects it (3 × max(300, 200) ms) and tells us.
    peer.with(|p| p.answering = false);
    let d = wait_for(limit, "OVS Down by detection time", &explain, || {
        ovs.bfd_status("state") == "down"
    });
    eprintln!(
        "OVS down: {} ms after we stopped answering (detection time 900 ms)",
        ms(d)
    );
    assert_eq!(
        ovs.bfd_status("diagnostic"),
        "Control Detection Time Expired",
        "{}",
        explain()
    );
    assert_eq!(ovs.bfd_status("forwarding"), "false");
    wait_for(limit, "our session Down (OVS signals it)", &explain, || {
        peer.state() == State::Down
    });
    assert_eq!(
        peer.with(|p| p.session.diag()),
        Diagnostic::NeighborSignaledSessionDown
    );

    // 5. Answering again: both back Up; OVS counted three forwarding flaps.
    peer.with(|p| p.answering = true);
    let d = wait_for(limit, "both sides Up again", &explain, || {
        ovs.bfd_status("state") == "up" && peer.state() == State::Up
    });
    eprintln!("up again in {} ms", ms(d));
    // The third flap is OVS forwarding again, once our Up arrives (as in step 1).
    wait_for(limit, "OVS's third forwarding flap", &explain, || {
        ovs.bfd_status("flap_count") == "3"
    });

    // 6. We go AdminDown: OVS goes Down, Neighbor Signaled Session Down.
    // First we slow to 1 s (a Poll Sequence), so OVS's detection time is
    // 3 × 1000 ms: our first AdminDown packet (due within 1 s) then beats
    // it even on a loaded machine that stalls a process for a while (at
    // 900 ms, a CI run once saw OVS time out first).
    peer.with(|p| {
        let cfg = Config {
            min_tx_ms: 1000,
            ..p.session.config()
        };
        p.session.set_config(cfg).unwrap();
    });
    wait_for(limit, "OVS to take our 1 s min_tx", &explain, || {
        !peer.with(|p| p.session.in_poll())
            && ovs
                .bfd_show()
                .contains("Remote Minimum TX Interval: 1000ms")
    });
    peer.with(|p| p.session.set_admin_down(true));
    let d = wait_for(limit, "OVS Down on our AdminDown", &explain, || {
        ovs.bfd_status("state") == "down"
    });
    eprintln!("OVS down {} ms after our AdminDown", ms(d));
    assert_eq!(
        ovs.bfd_status("diagnostic"),
        "Neighbor Signaled Session Down",
        "{}",
        explain()
    );
    // Going Down, OVS forgets the remote's state; our next packet (AdminDown,
    // sent every second) tells it again.
    wait_for(limit, "OVS to see us AdminDown", &explain, || {
        ovs.bfd_status("remote_state") == "admin_down"
    });
    peer.with(|p| p.session.set_admin_down(false));
    wait_for(limit, "both sides Up after AdminDown", &explain, || {
        ovs.bfd_status("state") == "up" && peer.state() == State::Up
    });

    // 7. OVS disables BFD: it goes silent, we detect it (3 × 1000 ms).
    ovs.vsctl(&["set", "interface", "gnv0", "bfd:enable=false"]);
    let d = wait_for(
        limit,
        "our session Down after bfd:enable=false",
        &explain,
        || peer.state() == State::Down,
    );
    eprintln!(
        "our session down {} ms after bfd:enable=false (detection time 3000 ms)",
        ms(d)
    );
    assert_eq!(
        peer.with(|p| p.session.diag()),
        Diagnostic::ControlDetectionTimeExpired
    );

    // 8. Enabled again (a new session, a new discriminator at OVS), then the
    // port deleted: Down again by detection time.
    ovs.vsctl(&["set", "interface", "gnv0", "bfd:enable=true"]);
    let d = wait_for(limit, "both sides Up after re-enabling", &explain, || {
        ovs.bfd_status("state") == "up" && peer.state() == State::Up
    });
    eprintln!("up {} ms after re-enabling", ms(d));
    ovs.vsctl(&["del-port", "br-int", "gnv0"]);
    let d = wait_for(limit, "our session Down after del-port", &explain, || {
        peer.state() == State::Down
    });
    eprintln!("our session down {} ms after del-port", ms(d));
    assert_eq!(
        peer.with(|p| p.session.diag()),
        Diagnostic::ControlDetectionTimeExpired
    );

    let (received, dropped) = peer.with(|p| (p.received, p.dropped.clone()));
    eprintln!("received {received} BFD frames from OVS; dropped {dropped:?}");
    assert!(dropped.is_empty(), "{dropped:?}");
    eprintln!("interop test took {} ms", ms(test_start.elapsed()));
}
