//! The binaries as a user runs them: bad input is refused with exit code 2, naming the
//! flag or field, and leaves nothing behind; SIGTERM stops cleanly and removes the
//! sockets; vswitchctl explains what it cannot reach. No guests needed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("vswitch-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
    fn path(&self, n: &str) -> PathBuf {
        self.0.join(n)
    }
    fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn vswitchd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vswitchd"))
        .args(args)
        .output()
        .expect("run vswitchd")
}

fn sock(d: &Dir, name: &str) -> String {
    d.path(name).display().to_string()
}

#[test]
fn bad_input_exits_2_naming_the_flag_and_leaves_nothing() {
    let d = Dir::new("bad");
    let ctl = sock(&d, "ctl.sock");
    let a = format!("a={}", sock(&d, "a.sock"));
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--vhost-user".into(), "a=/nonexistent-dir/a.sock".into()],
            "/nonexistent-dir does not exist",
        ),
        (
            vec![
                "--vhost-user".into(),
                a.clone(),
                "--vhost-user".into(),
                format!("a={}", sock(&d, "b.sock")),
            ],
            "duplicate port name",
        ),
        (
            vec![
                "--vhost-user".into(),
                a.clone(),
                "--static-mac".into(),
                "a=02:00:00:00:00".into(),
            ],
            "is not a MAC address",
        ),
        (
            vec![
                "--vhost-user".into(),
                a.clone(),
                "--acl".into(),
                "a:drop ip_src=10.0.0.1/8".into(),
            ],
            "--acl",
        ),
        (
            vec![
                "--vhost-user".into(),
                a.clone(),
                "--pmd-cpus".into(),
                "999".into(),
            ],
            "--pmd-cpus",
        ),
    ];
    for (args, want) in cases {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["--control", &ctl]);
        let out = vswitchd(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: expected {want:?} in: {err}");
        assert!(d.entries().is_empty(), "{args:?} left {:?}", d.entries());
    }
    // A file with an unknown key, and a malformed file.
    let f = d.path("c.toml");
    std::fs::write(&f, "poll = \"busy\"\ncolour = \"blue\"\n").unwrap();
    let out = vswitchd(&["--config", f.to_str().unwrap(), "--control", &ctl]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("c.toml") && err.contains("colour"), "{err}");
    std::fs::write(&f, "[[port]]\nname = \"a\"\ntype = \"vhost-user\"\npath = ").unwrap();
    let out = vswitchd(&["--config", f.to_str().unwrap(), "--control", &ctl]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("c.toml") && err.contains("line 4"), "{err}");
    std::fs::remove_file(&f).unwrap();
    assert!(d.entries().is_empty());
}

fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigterm_stops_cleanly_and_removes_sockets() {
    let d = Dir::new("term");
    let ctl = d.path("ctl.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vswitchd"))
        .args(["--vhost-user", &format!("a={}", sock(&d, "a.sock"))])
        .args(["--vhost-user", &format!("b={}", sock(&d, "b.sock"))])
        .arg("--control")
        .arg(&ctl)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ctl);
    let show = match vswitch::control::call(
        &ctl,
        vswitch::control::Request::Show,
        Duration::from_secs(10),
    )
    .expect("control socket answers")
    {
        vswitch::control::Response::Show(s) => serde_json::to_value(s).unwrap(),
        other => panic!("unexpected reply {other:?}"),
    };
    assert_eq!(show["ports"].as_array().unwrap().len(), 2);
    assert_eq!(d.entries(), ["a.sock", "b.sock", "ctl.sock"]);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
    assert!(d.entries().is_empty(), "left {:?}", d.entries());
}

#[test]
fn vswitchctl_explains_an_absent_daemon_and_help_teaches() {
    let out = Command::new(env!("CARGO_BIN_EXE_vswitchctl"))
        .args(["--socket", "/nonexistent/ctl.sock", "stats"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("cannot reach vswitchd at /nonexistent/ctl.sock"),
        "{err}"
    );
    let help = String::from_utf8_lossy(&vswitchd(&["--help"]).stdout).into_owned();
    for flag in [
        "--vhost-user",
        "--vhost-user-client",
        "--pmd-cpus",
        "--poll",
        "--config",
        "--acl",
        "--flow-cache",
    ] {
        assert!(help.contains(flag), "vswitchd --help lacks {flag}");
    }
    assert!(help.contains("adaptive"), "--help explains the poll modes");
}

#[test]
fn metrics_endpoint_serves_the_counters() {
    use std::io::{Read, Write};
    let d = Dir::new("metrics");
    let ctl = d.path("ctl.sock");
    let port = 20000 + (std::process::id() % 20000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vswitchd"))
        .args(["--vhost-user", &format!("a={}", sock(&d, "a.sock"))])
        .args(["--metrics", &addr])
        .arg("--control")
        .arg(&ctl)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ctl);
    let mut s = std::net::TcpStream::connect(&addr).expect("metrics port");
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    for want in [
        "vswitch_port_rx_packets_total{port=\"a\"} 0",
        "vswitch_port_drops_total{port=\"a\",reason=\"no_rx_buffer\"} 0",
        "vswitch_port_link_up{port=\"a\"} 0",
        "vswitch_pmd_packets_total{pmd=\"0\"} 0",
        "# EOF",
    ] {
        assert!(body.contains(want), "missing {want:?} in:\n{body}");
    }
}
