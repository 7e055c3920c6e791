//! Multi-host overlay fixtures: "hosts" are network namespaces on a bridged fabric,
//! each running its own vswitchd with an AF_XDP uplink.

use std::process::Command;
use std::time::Duration;

use vswitch::control::protocol::{Request, Response, TunnelRow};

use super::{ctl, run, wait_for, TempDir, Vswitchd};

/// Hosts joined by a Linux bridge in a "fabric" namespace: host k's uplink is one end
/// of a veth pair, the other end a bridge port; the underlay is 198.51.100.0/24 with
/// host k at .(k+1), MTU `mtu` everywhere. Captures run on the bridge, where the
/// underlay's frames pass as on a wire (a host's own veth end has its XDP program).
pub struct Fabric {
    pub fabric: String,
    pub ns: Vec<String>,
    pub link: Vec<String>,
    /// The bridge port of each host (in the fabric namespace).
    pub port: Vec<String>,
    /// The underlay is IPv6 (2001:db8::/64) rather than IPv4 (198.51.100.0/24).
    pub v6: bool,
}

impl Fabric {
    pub fn new(tag: &str, hosts: usize, mtu: u32) -> Self {
        Self::with(tag, hosts, mtu, false)
    }

    /// Host `k`'s underlay address.
    pub fn addr(&self, k: usize) -> String {
        if self.v6 {
            format!("2001:db8::{}", k + 1)
        } else {
            format!("198.51.100.{}", k + 1)
        }
    }

    pub fn with(tag: &str, hosts: usize, mtu: u32, v6: bool) -> Self {
        let id = std::process::id() % 10000;
        let f = Fabric {
            fabric: format!("vo{tag}{id}f"),
            ns: (0..hosts).map(|k| format!("vo{tag}{id}h{k}")).collect(),
            link: (0..hosts).map(|k| format!("vo{tag}{id}u{k}")).collect(),
            port: (0..hosts).map(|k| format!("vo{tag}{id}p{k}")).collect(),
            v6,
        };
        f.cleanup();
        let m = mtu.to_string();
        run(&["ip", "netns", "add", &f.fabric]);
        f.exec(&f.fabric, &["ip", "link", "add", "br0", "type", "bridge"]);
        f.exec(&f.fabric, &["ip", "link", "set", "br0", "mtu", &m, "up"]);
        for k in 0..hosts {
            let (ns, dev, port) = (&f.ns[k], &f.link[k], f.port[k].clone());
            run(&["ip", "netns", "add", ns]);
            f.exec(ns, &["ip", "link", "set", "lo", "up"]);
            run(&[
                "ip", "link", "add", dev, "type", "veth", "peer", "name", &port,
            ]);
            run(&["ip", "link", "set", dev, "netns", ns]);
            run(&["ip", "link", "set", &port, "netns", &f.fabric]);
            f.exec(
                &f.fabric,
                &["ip", "link", "set", &port, "mtu", &m, "master", "br0", "up"],
            );
            f.exec(ns, &["ip", "link", "set", dev, "mtu", &m]);
            if v6 {
                let a = format!("{}/64", f.addr(k));
                f.exec(ns, &["ip", "addr", "add", &a, "dev", dev, "nodad"]);
            } else {
                let off = format!("net.ipv6.conf.{dev}.disable_ipv6=1");
                f.exec(ns, &["sysctl", "-qw", &off]);
                let a = format!("{}/24", f.addr(k));
                f.exec(ns, &["ip", "addr", "add", &a, "dev", dev]);
            }
            f.exec(ns, &["ip", "link", "set", dev, "up"]);
        }
        f
    }

    pub fn exec(&self, ns: &str, args: &[&str]) -> String {
        let mut a = vec!["ip", "netns", "exec", ns];
        a.extend_from_slice(args);
        run(&a)
    }

    /// vswitchd on host `k`: uplink `u` on its veth end, endpoint `t` flooding to every
    /// other host, tap `vm` in VNI 5001 (its "VM", addressed 10.50.0.(k+1)/24 in the
    /// host's namespace).
    pub fn vswitchd(&self, k: usize, dir: &TempDir, tap: &str) -> Vswitchd {
        let others: Vec<usize> = (0..self.ns.len()).filter(|&j| j != k).collect();
        self.vswitchd_to(k, dir, tap, &others, "")
    }

    /// As [`Fabric::vswitchd`], flooding to hosts `remotes` only, `extra` appended to
    /// the endpoint's spec (`,opt=...`).
    pub fn vswitchd_to(
        &self,
        k: usize,
        dir: &TempDir,
        tap: &str,
        remotes: &[usize],
        extra: &str,
    ) -> Vswitchd {
        let remotes: Vec<String> = remotes.iter().map(|&j| self.addr(j)).collect();
        let args: Vec<String> = vec![
            "--uplink".to_string(),
            format!("u={},mode=generic", self.link[k]),
            "--geneve".into(),
            format!(
                "t={},uplink=u,remote={}{extra}",
                self.addr(k),
                remotes.join("+")
            ),
            "--tap".into(),
            format!("vm={tap},vni=5001"),
            "--poll".into(),
            "adaptive".into(),
        ];
        let sw = Vswitchd::start_in(Some(&self.ns[k]), dir, &k.to_string(), &args);
        self.host_on_tap(k, tap);
        sw
    }

    /// Puts host `k`'s stack behind the tap `tap` of its vswitchd (its "VM"): IPv6 off
    /// (nothing but the test's traffic), address 10.50.0.(k+1)/24, link up.
    pub fn host_on_tap(&self, k: usize, tap: &str) {
        let ns = &self.ns[k];
        self.exec(
            ns,
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
            ],
        );
        let addr = format!("10.50.0.{}/24", k + 1);
        self.exec(ns, &["ip", "addr", "add", &addr, "dev", tap]);
        self.exec(ns, &["ip", "link", "set", tap, "up"]);
    }

    /// Pings `ip` from host `k` until one answers (the first may wait for the kernel
    /// to resolve the other endpoint's MAC).
    pub fn ping_until(&self, k: usize, ip: &str) {
        wait_for(Duration::from_secs(15), "a ping across the overlay", || {
            let o = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.ns[k],
                    "ping",
                    "-c",
                    "1",
                    "-W",
                    "1",
                    ip,
                ])
                .output()
                .unwrap();
            o.status.success().then_some(())
        });
    }

    /// The MAC address of device `dev` in host `k`'s namespace.
    pub fn mac_of(&self, k: usize, dev: &str) -> String {
        self.exec(
            &self.ns[k],
            &["cat", &format!("/sys/class/net/{dev}/address")],
        )
        .trim()
        .to_string()
    }

    /// Makes every host's neighbour entries for the other hosts' "VMs" (10.50.0.(j+1)
    /// behind `taps[j]`) permanent, so no kernel sends ARP probes while a test counts
    /// the frames on the tunnels (a reachable entry goes stale and is probed again
    /// some 15-45 s after the ping that made it, a frame nobody sent on purpose).
    pub fn pin_neighbours(&self, taps: &[String]) {
        let macs: Vec<String> = (0..taps.len()).map(|j| self.mac_of(j, &taps[j])).collect();
        for k in 0..taps.len() {
            for j in (0..taps.len()).filter(|&j| j != k) {
                let ip = format!("10.50.0.{}", j + 1);
                self.exec(
                    &self.ns[k],
                    &[
                        "ip",
                        "neigh",
                        "replace",
                        &ip,
                        "lladdr",
                        &macs[j],
                        "dev",
                        &taps[k],
                        "nud",
                        "permanent",
                    ],
                );
            }
        }
    }

    /// The kernel's checksum error counters (Tcp and Udp InCsumErrors) of host `k`.
    pub fn csum_errors(&self, k: usize) -> u64 {
        let snmp = self.exec(&self.ns[k], &["cat", "/proc/net/snmp"]);
        let mut total = 0;
        let lines: Vec<&str> = snmp.lines().collect();
        for w in lines.windows(2) {
            let (h, v) = (w[0], w[1]);
            if !(h.starts_with("Tcp:") || h.starts_with("Udp:"))
                || h.split(':').next() != v.split(':').next()
            {
                continue;
            }
            for (name, val) in h.split_whitespace().zip(v.split_whitespace()) {
                if name == "InCsumErrors" {
                    total += val.parse::<u64>().unwrap_or(0);
                }
            }
        }
        total
    }

    pub fn cleanup(&self) {
        for ns in self.ns.iter().chain(std::iter::once(&self.fabric)) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// A capture of host `k`'s bridge port, stopped and read by `frames`.
///
/// tcpdump in immediate mode: on stop nothing captured is still in a kernel ring block
/// (tshark/dumpcap's TPACKET_V3 blocks wait for a timeout before they reach the file,
/// and a stop inside that window loses the last frames); SIGINT flushes the file. 32 MiB
/// of kernel buffer and the first 256 bytes of each frame (every header, and the
/// start of the inner payload) keep up with a TCP stream. tshark dissects the file.
pub struct Capture {
    child: Option<std::process::Child>,
    file: std::path::PathBuf,
    /// tcpdump's stderr after "listening on", read to its end (its closing counts).
    summary: Option<std::thread::JoinHandle<String>>,
}

impl Capture {
    pub fn start(f: &Fabric, k: usize, dir: &TempDir) -> Capture {
        Capture::on(f, &f.port[k], "udp port 6081", dir)
    }

    /// A capture of fabric bridge port `port`, of the frames tcpdump filter `filter`
    /// matches.
    pub fn on(f: &Fabric, port: &str, filter: &str, dir: &TempDir) -> Capture {
        let file = dir.path(&format!("underlay-{port}.pcap"));
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &f.fabric,
                "tcpdump",
                "--immediate-mode",
                "-B",
                "32768",
                "-s",
                "256",
                "-i",
                port,
                "-w",
            ])
            .arg(&file)
            .arg(filter)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("tcpdump (Debian package tcpdump)");
        // tcpdump says "listening on IFACE" once it captures.
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut err, &mut line).unwrap_or(0) > 0 {
            if line.contains("listening on") {
                break;
            }
            line.clear();
        }
        let summary = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        Capture {
            child: Some(child),
            file,
            summary: Some(summary),
        }
    }

    /// Stops the capture (the file stays readable by [`Capture::fields`]).
    /// Panics when the kernel dropped frames for the capture: it could not count them.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid (`ip netns exec` execs tcpdump).
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
        }
        if let Some(s) = self.summary.take() {
            let s = s.join().unwrap_or_default();
            let dropped = s
                .lines()
                .find(|l| l.contains("dropped by kernel"))
                .and_then(|l| l.split_whitespace().next()?.parse::<u64>().ok());
            assert_eq!(dropped, Some(0), "the capture lost frames: {s}");
        }
    }

    /// Fields `fields` (their first occurrence: the outer headers where both layers
    /// have one) of the captured frames matching display filter `filter`, one row per
    /// frame.
    pub fn fields(&self, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
        let mut a = vec![
            "tshark",
            "-r",
            self.file.to_str().unwrap(),
            "-Y",
            filter,
            "-T",
            "fields",
            "-E",
            "occurrence=f",
        ];
        for f in fields {
            a.extend(["-e", f]);
        }
        run(&a)
            .lines()
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect()
    }

    /// Stops the capture; returns each Geneve frame's (length, VNI).
    pub fn frames(mut self) -> Vec<(u32, u32)> {
        self.stop();
        let out = run(&[
            "tshark",
            "-r",
            self.file.to_str().unwrap(),
            "-Y",
            "geneve",
            "-T",
            "fields",
            "-e",
            "frame.len",
            "-e",
            "geneve.vni",
        ]);
        out.lines()
            .filter_map(|l| {
                let mut it = l.split('\t');
                let len = it.next()?.parse().ok()?;
                // geneve.vni prints in hex (BASE_HEX_DEC), e.g. 0x00001389.
                let vni = it.next()?;
                let vni = match vni.strip_prefix("0x") {
                    Some(h) => u32::from_str_radix(h, 16).ok()?,
                    None => vni.parse().ok()?,
                };
                Some((len, vni))
            })
            .collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn stat(f: &Fabric, k: usize, dev: &str, name: &str) -> u64 {
    f.exec(
        &f.ns[k],
        &["cat", &format!("/sys/class/net/{dev}/statistics/{name}")],
    )
    .trim()
    .parse()
    .unwrap()
}

/// `vswitchctl tunnels` of `sw`.
pub fn tunnels(sw: &Vswitchd) -> Vec<TunnelRow> {
    match ctl(&sw.control, Request::Tunnels).expect("tunnels") {
        Response::Tunnels(t) => t,
        other => panic!("{other:?}"),
    }
}

/// A VLAN interface `name` for VLAN `vid` on `link` in namespace `ns`, as the kernel's
/// 802.1Q driver makes one (`ip link add link LINK type vlan`), which this test
/// machine's kernel lacks (no CONFIG_VLAN_8021Q): a tap whose frames a script tags onto
/// `link` (a packet socket), and whose receive gets `link`'s frames of the VLAN
/// untagged (the tag read from the frame, or from the packet's metadata where the
/// kernel moved it). Runs until dropped.
pub fn vlan_interface(ns: &str, link: &str, name: &str, vid: u16) -> super::KillOnDrop {
    let script = format!(
        "import fcntl,os,socket,struct,select\n\
         tap=os.open('/dev/net/tun',os.O_RDWR)\n\
         fcntl.ioctl(tap,0x400454ca,struct.pack('16sH',b'{name}',0x0002|0x1000))\n\
         s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(3))\n\
         s.bind(('{link}',0)); s.setsockopt(263,8,1)\n\
         tag=struct.pack('!HH',0x8100,{vid})\n\
         print('ready',flush=True)\n\
         while True:\n\
         \x20r,_,_=select.select([tap,s],[],[])\n\
         \x20if tap in r:\n\
         \x20\x20f=os.read(tap,65536); s.send(f[:12]+tag+f[12:])\n\
         \x20if s in r:\n\
         \x20\x20f,anc,_,addr=s.recvmsg(65536,socket.CMSG_SPACE(20))\n\
         \x20\x20if addr[2]==4: continue\n\
         \x20\x20v=None\n\
         \x20\x20for l,t,d in anc:\n\
         \x20\x20\x20st,_,_,_,_,tci,_=struct.unpack('IIIHHHH',d[:20])\n\
         \x20\x20\x20if l==263 and t==8 and st&0x10: v=tci&0xfff\n\
         \x20\x20if v is None and f[12:14]==b'\\x81\\x00': v=struct.unpack('!H',f[14:16])[0]&0xfff; f=f[:12]+f[16:]\n\
         \x20\x20if v=={vid}: os.write(tap,f)\n"
    );
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(
        line.trim(),
        "ready",
        "the VLAN interface script did not start"
    );
    super::KillOnDrop(child)
}
