//! Helpers of the OVN chassis tests: vswitchd as a chassis on a fabric host, its
//! `vswitchctl ovn` view, taps with addresses, pings and TCP streams between host
//! namespaces.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::fabric::{tunnels, Capture, Fabric};
use super::ovn::OvnCentral;
use super::*;
use vswitch::control::protocol::{OvnReply, Request, Response};

pub const HV1_VIF: &str = "02:00:00:00:01:01";
pub const HV1_VIF_B: &str = "02:00:00:00:01:02";
pub const TAP_MAC: &str = "02:00:00:00:02:01";
pub const TAP_B_MAC: &str = "02:00:00:00:02:03";
pub const VM_MAC: &str = "52:54:00:00:02:02";
/// Bytes of each TCP transfer (the issue: 32 MiB each way).
pub const MB: usize = 32;

/// `vswitchctl ovn` of `sw`.
pub fn ovn(sw: &Vswitchd) -> OvnReply {
    match ctl(&sw.control, Request::Ovn).expect("ovn") {
        Response::Ovn(r) => *r,
        other => panic!("{other:?}"),
    }
}

/// The `vswitchctl ovn` row of local port `port`.
pub fn ovn_port(sw: &Vswitchd, port: &str) -> vswitch::control::protocol::OvnPortRow {
    ovn(sw)
        .ports
        .into_iter()
        .find(|p| p.port == port)
        .unwrap_or_else(|| panic!("no {port} in vswitchctl ovn"))
}

/// The (ingress, egress) keys of OVN's option in a tshark `geneve.options` field.
pub fn ovn_keys(hex: &str) -> Option<(u16, u16)> {
    let h: String = hex.chars().filter(char::is_ascii_hexdigit).collect();
    let b: Vec<u8> = (0..h.len() / 2)
        .filter_map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok())
        .collect();
    let mut rest = &b[..];
    while rest.len() >= 4 {
        let len = 4 + 4 * usize::from(rest[3] & 0x1f);
        if rest.len() < len {
            return None;
        }
        if rest[0..2] == [0x01, 0x02] && rest[2] == 0x80 && len == 8 {
            let v = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
            return Some((((v >> 16) & 0x7fff) as u16, v as u16));
        }
        rest = &rest[len..];
    }
    None
}

/// Sends `n` UDP frames from `src` to `dst` out of `iface` in namespace `ns` (scapy).
pub fn send_frames(ns: &str, iface: &str, src: &str, dst: &str, n: u32) {
    send_payload(ns, iface, src, dst, "b'x'*64", n);
}

/// As [`send_frames`], each frame's UDP payload the Python bytes expression `payload`.
pub fn send_payload(ns: &str, iface: &str, src: &str, dst: &str, payload: &str, n: u32) {
    let script = format!(
        "from scapy.all import Ether,IP,UDP,sendp\n\
         sendp(Ether(src='{src}',dst='{dst}')/IP(src='10.0.0.2',dst='10.0.0.99')/UDP(dport=9)/({payload}),iface='{iface}',count={n},verbose=False)"
    );
    // Debian's python (python3-scapy), whatever python3 comes first in PATH.
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "/usr/bin/python3", "-c", &script])
        .output()
        .expect("python3-scapy");
    assert!(o.status.success(), "scapy: {o:?}");
}

/// How vswitchd forwards a logical switch of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub enum Forwarding {
    /// By the L2 rules (a switch without ACLs).
    L2,
    /// Through OVN's logical pipeline: the switch gets an `allow-related` ACL on IPv4
    /// both ways ([`Forwarding::prepare`]).
    Pipeline,
}

#[allow(dead_code)]
impl Forwarding {
    /// Gives logical switch `ls` what makes vswitchd forward it this way.
    pub fn prepare(self, c: &OvnCentral, ls: &str) {
        if self == Forwarding::Pipeline {
            for dir in ["from-lport", "to-lport"] {
                c.nbctl(&["acl-add", ls, dir, "1000", "ip4", "allow-related"]);
            }
        }
    }

    /// Asserts that `sw` (chassis `who`) ran frames through the pipeline this way
    /// (none with the L2 rules).
    pub fn assert_ran(self, sw: &Vswitchd, who: &str) {
        let runs: u64 = pmd_stats(&sw.control)
            .iter()
            .map(|r| r.lflow_hits + r.lflow_misses)
            .sum();
        match self {
            Forwarding::Pipeline => assert!(runs > 0, "{who} ran frames through the pipeline"),
            Forwarding::L2 => assert_eq!(runs, 0, "{who} forwarded by the L2 rules"),
        }
    }
}

/// A port's drop counter `reason`.
pub fn drops(sw: &Vswitchd, port: &str, reason: &str) -> u64 {
    sw.port(port).stats.drops.get(reason).copied().unwrap_or(0)
}

/// vswitchd on fabric host `k` as OVN chassis `name` of `c`: an AF_XDP uplink, a Geneve
/// endpoint on the host's underlay address, adaptive polling, and `ports` (flags and
/// their specs, e.g. `--tap`, `t0=IF,iface_id=LSP`).
pub fn chassis_args(
    f: &Fabric,
    k: usize,
    c: &OvnCentral,
    name: &str,
    ports: &[String],
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--uplink".into(),
        format!("u={},mode=generic", f.link[k]),
        "--geneve".into(),
        format!("t={},uplink=u", f.addr(k)),
        "--ovn-remote".into(),
        c.sb_remote(),
        "--chassis".into(),
        name.into(),
        "--poll".into(),
        "adaptive".into(),
    ];
    a.extend(ports.iter().cloned());
    a
}

/// `--tap NAME=IFNAME,iface_id=LSP`.
pub fn tap(name: &str, ifname: &str, lsp: &str) -> [String; 2] {
    ["--tap".into(), format!("{name}={ifname},iface_id={lsp}")]
}

/// Tap `tap` of host `k`: MAC `mac`, address `addr`, IPv6 off, up.
pub fn tap_up(f: &Fabric, k: usize, tap: &str, mac: &str, addr: &str) {
    let ns = &f.ns[k];
    f.exec(
        ns,
        &[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
        ],
    );
    f.exec(ns, &["ip", "link", "set", tap, "address", mac]);
    f.exec(ns, &["ip", "addr", "add", addr, "dev", tap]);
    f.exec(ns, &["ip", "link", "set", tap, "up"]);
}

/// Pings `ip` from namespace `ns` until one answers (within `secs`); returns whether.
pub fn ping_ok(ns: &str, ip: &str, secs: u64) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        let ok = Command::new("ip")
            .args(["netns", "exec", ns, "ping", "-c", "1", "-W", "1", ip])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return true;
        }
    }
    false
}

/// A receiver of one TCP stream on `ip`:5001 in namespace `ns` (python3), which prints
/// the byte count and sha256 when the stream ends.
pub fn tcp_sink(ns: &str, ip: &str) -> (KillOnDrop, std::io::BufReader<std::process::ChildStdout>) {
    tcp_sink_on(ns, ip, 5001)
}

/// As [`tcp_sink`], on `port`.
pub fn tcp_sink_on(
    ns: &str,
    ip: &str,
    port: u16,
) -> (KillOnDrop, std::io::BufReader<std::process::ChildStdout>) {
    let script = format!(
        "import socket,hashlib\n\
         s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
         s.bind(('{ip}',{port})); s.listen(8); print('ready',flush=True)\n\
         c,_=s.accept(); h=hashlib.sha256(); n=0\n\
         while True:\n d=c.recv(1<<20)\n if not d: break\n h.update(d); n+=len(d)\n\
         print(n,h.hexdigest(),flush=True)\n"
    );
    python_ready(ns, &script)
}

/// Python `script` running in namespace `ns`, once it printed `ready`: the process
/// (killed when dropped) and the rest of its output.
pub fn python_ready(
    ns: &str,
    script: &str,
) -> (KillOnDrop, std::io::BufReader<std::process::ChildStdout>) {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "python3", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready", "{script}");
    (KillOnDrop(child), out)
}

/// Sends `mb` MiB of a pattern to `ip`:5001 from namespace `ns` (retrying the connect
/// for 120 s while the receiver starts); returns "BYTES SHA256".
pub fn tcp_send(ns: &str, ip: &str, mb: usize) -> String {
    let script = format!(
        "import socket,hashlib,time\n\
         data=bytes((i*7)&255 for i in range(1<<20))*{mb}\n\
         t=time.time()\n\
         while True:\n try:\n  s=socket.create_connection(('{ip}',5001),timeout=30); break\n except OSError:\n  time.sleep(0.2); assert time.time()-t<120\n\
         s.sendall(data); s.close(); print(len(data),hashlib.sha256(data).hexdigest())\n"
    );
    let o = Command::new("ip")
        .args([
            "netns", "exec", ns, "timeout", "300", "python3", "-c", &script,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Time from `since` until one ping (a new process each try, 200 ms for its answer)
/// from namespace `ns` to `ip` is answered; None after `limit`. A fresh socket and
/// neighbour lookup per try: a long-lived ping can stall on its own send buffer while
/// the neighbour entry of the moved address is re-resolved, and would time that instead.
pub fn first_answer(ns: &str, ip: &str, since: Instant, limit: Duration) -> Option<Duration> {
    while since.elapsed() < limit {
        let ok = Command::new("ip")
            .args([
                "netns", "exec", ns, "ping", "-n", "-q", "-c", "1", "-W", "0.2", ip,
            ])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(since.elapsed());
        }
    }
    None
}

/// A 10 ms ping from namespace `ns` to `ip` that runs until [`stop_ping`]; its
/// replies are read as they come (a full pipe would stall ping).
pub struct Flood {
    child: KillOnDrop,
    out: std::thread::JoinHandle<String>,
}

/// Starts a [`Flood`].
pub fn ping_flood(ns: &str, ip: &str) -> Flood {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-n", "-i", "0.01", ip])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    Flood {
        child: KillOnDrop(child),
        out,
    }
}

/// Echoes of a [`Flood`] that may still be on their way when ping is interrupted:
/// 100 ms of them (a loaded machine's round trip can take several 10 ms intervals).
const IN_FLIGHT: u64 = 10;

/// Stops a [`ping_flood`] with SIGINT; returns (transmitted, received). The echoes sent
/// after the last one answered, up to [`IN_FLIGHT`] of them, may still be on their way
/// when ping is interrupted: they are not counted as sent (any other missing reply is a
/// loss, and so are more unanswered ones at the end).
pub fn stop_ping(mut f: Flood) -> (u64, u64) {
    // SAFETY: kill(2) on our own child (`ip netns exec` execs ping in place).
    unsafe { libc::kill(f.child.0.id() as i32, libc::SIGINT) };
    f.child.0.wait().unwrap();
    let text = f.out.join().unwrap();
    let (tx, rx) = ping_counts(&text).unwrap_or_else(|| panic!("no ping summary: {text}"));
    let last_answered = text
        .lines()
        .filter_map(|l| {
            l.split("icmp_seq=")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    let in_flight = tx.saturating_sub(last_answered);
    (
        if in_flight <= IN_FLIGHT {
            tx - in_flight
        } else {
            tx
        },
        rx,
    )
}

/// Frames every tunnel endpoint of `sw` dropped, all reasons.
pub fn tunnel_drops(sw: &Vswitchd) -> u64 {
    tunnels(sw)
        .iter()
        .map(|t| t.drops.values().sum::<u64>())
        .sum()
}

/// The topology generation vswitchd runs.
pub fn generation(sw: &Vswitchd) -> u64 {
    sw.show()["generation"].as_u64().unwrap()
}

/// The names of the chassis in `Port_Binding` column `col` (`chassis`,
/// `additional_chassis`) of logical port `lsp`, comma-separated.
pub fn binding_chassis(c: &OvnCentral, lsp: &str, col: &str) -> String {
    c.sb_get("Port_Binding", "logical_port", lsp, col)
        .split_whitespace()
        .map(|u| {
            c.sbctl(&["get", "chassis", u, "name"])
                .trim()
                .trim_matches('"')
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The egress keys of the Geneve frames from `src` to `dst` (underlay addresses)
/// carrying an inner frame to `mac`, as captured.
pub fn egress_keys(cap: &Capture, src: &str, dst: &str, mac: &str) -> Vec<u16> {
    let filter = format!("ip.src == {src} && ip.dst == {dst} && eth.dst == {mac}");
    cap.fields(&filter, &["geneve.options"])
        .iter()
        .filter_map(|r| ovn_keys(r.first()?).map(|(_, egress)| egress))
        .collect()
}
