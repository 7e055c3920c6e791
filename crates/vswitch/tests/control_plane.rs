//! The control plane against real clients, no guests: many `vswitchctl` processes at
//! once, oversized and silent clients on the control socket, concurrent and silent
//! metrics scrapers, systemd readiness, ports added and deleted, and configuration
//! reloads (vswitchctl and SIGHUP), including a broken file that changes nothing.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use vswitch::control::protocol::{ReplyLine, Request, Response};

fn vswitchctl(ctl: &Path, args: &[&str]) -> std::process::Output {
    vswitchctl_out(ctl, args)
}

fn ports(ctl: &Path) -> Vec<(String, u64)> {
    let show = show_json(ctl).expect("show");
    show["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["vlan"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn generation(ctl: &Path) -> u64 {
    show_json(ctl).unwrap()["generation"].as_u64().unwrap()
}

#[test]
fn control_socket_serves_many_clients_and_bounds_lines_and_idle_clients() {
    let dir = TempDir::new("ctl");
    let a = format!("a={}", dir.path("a.sock").display());
    let sw = Vswitchd::start(&dir, &["--vhost-user".into(), a]);
    let ctl = sw.control.clone();
    let mode = std::fs::metadata(&ctl).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660, "control socket mode {mode:o}");

    // A client that connects and says nothing does not hold up the others.
    let mut silent = UnixStream::connect(&ctl).unwrap();

    // 64 vswitchctl processes at once: every one answered.
    let children: Vec<_> = (0..64)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_vswitchctl"))
                .arg("--socket")
                .arg(&ctl)
                .args(["--json", "stats"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rows[0]["port"], "a", "{rows}");
    }

    // A 10 MiB request line: an error, the connection closed, the daemon serving on.
    let mut big = UnixStream::connect(&ctl).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut writer = big.try_clone().unwrap();
    let w = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..10 {
            if writer.write_all(&chunk).is_err() {
                return false;
            }
        }
        writer.write_all(b"\n").is_ok()
    });
    let mut line = String::new();
    BufReader::new(big.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    let reply: ReplyLine = serde_json::from_str(&line).unwrap();
    let err = reply.error.expect("an error reply");
    assert!(err.contains("longer than 1048576 bytes"), "{err}");
    let mut rest = Vec::new();
    let _ = big.read_to_end(&mut rest);
    assert!(rest.is_empty(), "nothing after the error");
    assert!(
        !w.join().unwrap(),
        "the daemon stopped reading the oversized line"
    );
    let t = Instant::now();
    assert!(vswitchctl(&ctl, &["stats"]).status.success());
    assert!(t.elapsed() < Duration::from_secs(2));

    // Several requests on one connection, one reply line each; a wrong version refused.
    let mut c = UnixStream::connect(&ctl).unwrap();
    writeln!(c, r#"{{"version":1,"cmd":"fdb"}}"#).unwrap();
    writeln!(c, r#"{{"version":99,"cmd":"fdb"}}"#).unwrap();
    writeln!(c, r#"{{"version":1,"cmd":"no-such"}}"#).unwrap();
    let mut r = BufReader::new(c);
    let replies: Vec<ReplyLine> = (0..3)
        .map(|_| {
            let mut l = String::new();
            r.read_line(&mut l).unwrap();
            serde_json::from_str(&l).unwrap()
        })
        .collect();
    assert!(
        matches!(replies[0].ok, Some(Response::Fdb(_))),
        "{replies:?}"
    );
    assert!(replies[1].error.as_ref().unwrap().contains("version 99"));
    assert!(replies[2].error.as_ref().unwrap().contains("bad request"));

    // The silent client is dropped after the idle timeout, told why.
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(&mut silent).read_line(&mut line).unwrap();
    assert!(line.contains("idle"), "{line}");
}

#[test]
fn metrics_answer_32_scrapes_within_a_second_beside_a_silent_client() {
    let dir = TempDir::new("metrics32");
    let port = 30000 + (std::process::id() % 20000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let sw = Vswitchd::start(
        &dir,
        &[
            "--vhost-user".into(),
            format!("a={}", dir.path("a.sock").display()),
            "--metrics".into(),
            addr.clone(),
        ],
    );
    let _silent = std::net::TcpStream::connect(&addr).unwrap();
    let start = Instant::now();
    let scrapes: Vec<_> = (0..32)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(&addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                let mut body = String::new();
                s.read_to_string(&mut body).unwrap();
                body
            })
        })
        .collect();
    for s in scrapes {
        let body = s.join().unwrap();
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        assert!(body.contains("vswitch_port_rx_packets_total{port=\"a\"}"));
        assert!(body.trim_end().ends_with("# EOF"), "{body}");
    }
    let took = start.elapsed();
    assert!(took < Duration::from_secs(1), "32 scrapes took {took:?}");
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(
        body.starts_with("HTTP/1.1 200 OK") && body.ends_with("ok\n"),
        "{body}"
    );
    drop(sw);
}

#[test]
fn readiness_is_notified_once_the_ports_exist() {
    let dir = TempDir::new("notify");
    let notify = dir.path("notify.sock");
    let sock = UnixDatagram::bind(&notify).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (a, b) = (dir.path("a.sock"), dir.path("b.sock"));
    let ctl = dir.path("ctl.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vswitchd"))
        .args(["--vhost-user", &format!("a={}", a.display())])
        .args(["--vhost-user-client", &format!("b={}", b.display())])
        .arg("--control")
        .arg(&ctl)
        .env("NOTIFY_SOCKET", &notify)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("a notification");
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    // Checked at once: the ports existed when READY=1 was sent.
    let socket_there = a.exists();
    let answers = show_json(&ctl).is_ok();
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg:?}");
    assert!(msg.contains("STATUS=2 ports"), "{msg:?}");
    assert!(socket_there, "the vhost-user socket exists at READY=1");
    assert!(answers, "the control socket answers at READY=1");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let n = sock.recv(&mut buf).expect("the stop notification");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1"));
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn ports_are_added_and_deleted_by_their_flag_spec() {
    let dir = TempDir::new("adddel");
    let sw = Vswitchd::start(
        &dir,
        &[
            "--vhost-user".into(),
            format!("a={}", dir.path("a.sock").display()),
        ],
    );
    let ctl = &sw.control;
    let spec = format!("c={},queues=2,vlan=10", dir.path("c.sock").display());
    let out = vswitchctl(ctl, &["add-port", "--vhost-user", &spec]);
    assert!(out.status.success(), "{out:?}");
    assert!(dir.path("c.sock").exists());
    assert_eq!(ports(ctl), vec![("a".into(), 0), ("c".into(), 10)]);
    // A clash is refused with the reason, and nothing changes.
    let g = generation(ctl);
    for (args, want) in [
        (
            vec!["add-port", "--vhost-user", &spec],
            "duplicate port name \"c\"",
        ),
        (
            vec!["add-port", "--tap", "c2=bad/name"],
            "expected an interface name",
        ),
        (vec!["del-port", "nosuch"], "no port named \"nosuch\""),
    ] {
        let out = vswitchctl(ctl, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert_eq!(generation(ctl), g, "refused changes publish nothing");
    let out = vswitchctl(ctl, &["add-port"]);
    assert_eq!(out.status.code(), Some(2), "no spec is a usage error");
    assert!(vswitchctl(ctl, &["del-port", "c"]).status.success());
    assert!(!dir.path("c.sock").exists(), "the socket is removed");
    assert_eq!(ports(ctl), vec![("a".into(), 0)]);
    // The name and socket can be used again.
    assert!(vswitchctl(ctl, &["add-port", "--vhost-user", &spec])
        .status
        .success());
    assert_eq!(ports(ctl), vec![("a".into(), 0), ("c".into(), 10)]);
}

#[test]
fn reload_applies_the_difference_and_a_broken_file_changes_nothing() {
    let dir = TempDir::new("reload");
    let file = dir.path("vswitchd.toml");
    let port = |name: &str, vlan: Option<u16>| {
        format!(
            "[[port]]\nname = \"{name}\"\ntype = \"vhost-user\"\npath = \"{}\"\n{}\n",
            dir.path(&format!("{name}.sock")).display(),
            vlan.map_or(String::new(), |v| format!("vlan = {v}"))
        )
    };
    let write = |ports: &[(&str, Option<u16>)], extra: &str| {
        let mut s = String::from("fdb_aging_secs = 300\n");
        s.push_str(extra);
        for (n, v) in ports {
            s.push_str(&port(n, *v));
        }
        std::fs::write(&file, s).unwrap();
    };
    write(&[("p1", Some(10)), ("p2", None), ("p3", None)], "");
    let sw = Vswitchd::start(&dir, &["--config".into(), file.display().to_string()]);
    let ctl = &sw.control;
    assert_eq!(
        ports(ctl),
        vec![("p1".into(), 10), ("p2".into(), 0), ("p3".into(), 0)]
    );
    // One port added, one VLAN changed, one port deleted.
    write(&[("p1", Some(20)), ("p2", None), ("p4", None)], "");
    let out = vswitchctl(ctl, &["--json", "reload"]);
    assert!(out.status.success(), "{out:?}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["data"]["added"], serde_json::json!(["p4"]), "{r}");
    assert_eq!(r["data"]["deleted"], serde_json::json!(["p3"]), "{r}");
    assert_eq!(r["data"]["changed"], serde_json::json!(["p1"]), "{r}");
    assert_eq!(
        ports(ctl),
        vec![("p1".into(), 20), ("p2".into(), 0), ("p4".into(), 0)]
    );
    assert!(!dir.path("p3.sock").exists() && dir.path("p4.sock").exists());

    // Broken files: the error names the file and the field, and nothing changes.
    let before = show_json(ctl).unwrap();
    for (text, want) in [
        ("[[port]\nname =", "vswitchd.toml"),
        ("fdb_aging_secs = \"x\"\n", "fdb_aging_secs"),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = vswitchctl(ctl, &["reload"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
    }
    write(&[("p1", Some(5000))], "");
    let out = vswitchctl(ctl, &["reload"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("port[0]") && err.contains("vlan=5000"),
        "{err}"
    );
    write(
        &[("p1", Some(20)), ("p2", None), ("p4", None)],
        "pmd_cpus = [0]\n",
    );
    let out = vswitchctl(ctl, &["reload"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pmd_cpus cannot change"), "{err}");
    assert_eq!(
        show_json(ctl).unwrap(),
        before,
        "a failed reload changes nothing"
    );

    // SIGHUP reloads too.
    write(&[("p1", Some(20)), ("p2", Some(30))], "");
    sw.signal(libc::SIGHUP);
    wait_for(Duration::from_secs(10), "the SIGHUP reload", || {
        (ports(ctl) == vec![("p1".into(), 20), ("p2".into(), 30)]).then_some(())
    });
    assert!(!dir.path("p4.sock").exists());
    let r = ctl_request(ctl, Request::Reload);
    assert!(
        matches!(&r, Response::Reloaded(x) if x.added.is_empty() && x.deleted.is_empty() && x.changed.is_empty()),
        "reloading the same file changes nothing: {r:?}"
    );
}

fn ctl_request(ctl: &Path, req: Request) -> Response {
    ctl_call(ctl, req).expect("request")
}

fn ctl_call(ctl: &Path, req: Request) -> Result<Response, String> {
    common::ctl(ctl, req)
}

/// Who may change the switch: a client that can connect but is neither root nor the
/// daemon's user (here `nobody`, through a socket opened up for the test) reads
/// `stats` and `acl list` but is refused `acl add`, `del-port` and `reload`, naming its
/// uid, and nothing changes; root's same request is served.
#[test]
fn only_root_or_the_daemons_user_may_change_the_switch() {
    let dir = TempDir::new("ctlperm");
    let a = format!("a={}", dir.path("a.sock").display());
    let sw = Vswitchd::start(&dir, &["--vhost-user".into(), a]);
    let ctl = sw.control.clone();
    // Let `nobody` reach the socket (its directory and the socket itself).
    for p in [dir.path(""), ctl.clone()] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_vswitchctl"))
            .arg("--socket")
            .arg(&ctl)
            .args(args)
            .output()
            .expect("setpriv runs vswitchctl")
    };
    let out = as_nobody(&["stats"]);
    assert!(out.status.success(), "nobody reads stats: {out:?}");
    assert!(as_nobody(&["acl", "list"]).status.success());
    for change in [
        &["acl", "add", "a", "drop", "ip_proto=udp"][..],
        &["del-port", "a"],
        &["reload"],
    ] {
        let out = as_nobody(change);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{change:?} refused: {out:?}");
        assert!(
            err.contains("permission denied") && err.contains("uid 65534"),
            "{change:?}: {err}"
        );
    }
    assert_eq!(ports(&ctl).len(), 1, "the port is still there");
    let out = vswitchctl(&ctl, &["acl", "add", "a", "drop", "ip_proto=udp"]);
    assert!(out.status.success(), "root adds the rule: {out:?}");
}
