//! The `geneve_pcap` example run on frames made by scapy, its output checked
//! by tshark (checksums, VNI, options, reassembled payload, MTU) and scapy.
//!
//! Needs Debian's `python3-scapy` and `tshark`; fails naming the missing
//! tool otherwise.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Command;

const PYTHON: &str = "/usr/bin/python3";

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("geneve-oracle-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn require_tools() {
    let scapy = Command::new(PYTHON)
        .args(["-c", "import scapy.contrib.geneve"])
        .output();
    assert!(
        scapy.map(|o| o.status.success()).unwrap_or(false),
        "missing tool: {PYTHON} with scapy (Debian package python3-scapy)"
    );
    let tshark = Command::new("tshark").arg("--version").output();
    assert!(
        tshark.map(|o| o.status.success()).unwrap_or(false),
        "missing tool: tshark (Debian package tshark)"
    );
}

/// The example binary, (re)built with the test's own profile and target
/// directory: `cargo test --test oracle` alone does not build examples.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let mut c = Command::new(env!("CARGO"));
    c.args([
        "build",
        "--quiet",
        "-p",
        "geneve",
        "--example",
        "geneve_pcap",
        "--target-dir",
    ])
    .arg(target_dir);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        c.arg("--release");
    }
    let st = c
        .status()
        .expect("running cargo build --example geneve_pcap");
    assert!(st.success(), "cargo build --example geneve_pcap failed");
    let bin = profile_dir.join("examples").join("geneve_pcap");
    assert!(
        bin.exists(),
        "example binary not found at {}",
        bin.display()
    );
    bin
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{cmd:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned() + &stderr
}

fn scapy(args: &[&Path], mode: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scapy_oracle.py");
    run(Command::new(PYTHON).arg(script).arg(mode).args(args));
}

const FIELDS: [&str; 10] = [
    "frame.len",
    "geneve.vni",
    "geneve.option",
    "ip.checksum.status",
    "tcp.checksum.status",
    "udp.checksum.status",
    "tcp.srcport",
    "tcp.seq_raw",
    "tcp.flags",
    "tcp.payload",
];

/// One row of tshark fields per frame, with checksum validation on.
fn tshark(pcap: &Path) -> Vec<BTreeMap<&'static str, String>> {
    let mut c = Command::new("tshark");
    c.args([
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "tcp.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
    ]);
    c.args(["-T", "fields", "-E", "separator=/t", "-r"])
        .arg(pcap);
    for f in FIELDS {
        c.args(["-e", f]);
    }
    let out = c.output().expect("running tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            FIELDS
                .iter()
                .copied()
                .zip(l.split('\t').map(str::to_owned))
                .collect()
        })
        .collect()
}

/// Every checksum tshark verified is good (status 1), and at least `min`
/// were verified per frame.
fn assert_checksums_good(rows: &[BTreeMap<&'static str, String>], min: usize) {
    for (i, r) in rows.iter().enumerate() {
        let mut n = 0;
        for f in [
            "ip.checksum.status",
            "tcp.checksum.status",
            "udp.checksum.status",
        ] {
            for v in r[f].split(',').filter(|v| !v.is_empty()) {
                assert_eq!(v, "1", "frame {}: {f} = {v} (0 bad, 2 unverified)", i + 1);
                n += 1;
            }
        }
        assert!(n >= min, "frame {}: only {n} checksums verified", i + 1);
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// TCP payload per source port, reassembled in sequence order (relative to
/// the lowest sequence number, wrapping).
fn reassemble(rows: &[BTreeMap<&'static str, String>]) -> BTreeMap<u16, Vec<u8>> {
    let mut segs: BTreeMap<u16, Vec<(u32, Vec<u8>)>> = BTreeMap::new();
    for r in rows {
        if r["tcp.srcport"].is_empty() {
            continue;
        }
        let port: u16 = r["tcp.srcport"].parse().unwrap();
        let seq: u32 = r["tcp.seq_raw"].parse().unwrap();
        segs.entry(port)
            .or_default()
            .push((seq, hex(&r["tcp.payload"])));
    }
    segs.into_iter()
        .map(|(port, mut v)| {
            let base = v[0].0;
            v.sort_by_key(|(s, _)| s.wrapping_sub(base));
            let mut next = base;
            let mut data = Vec::new();
            for (s, p) in v {
                assert_eq!(s, next, "port {port}: gap or overlap at seq {s}");
                next = s.wrapping_add(p.len() as u32);
                data.extend_from_slice(&p);
            }
            (port, data)
        })
        .collect()
}

fn expected(dir: &TempDir, port: u16) -> Vec<u8> {
    std::fs::read(dir.path(&format!("{port}.bin"))).unwrap()
}

fn flags(r: &BTreeMap<&'static str, String>) -> u16 {
    u16::from_str_radix(r["tcp.flags"].trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn segment_with_geneve_checked_by_tshark() {
    require_tools();
    let d = TempDir::new("segment-geneve");
    scapy(&[&d.path("in.pcap"), &d.0], "segment-input");
    run(Command::new(example())
        .args(["segment", "--in"])
        .arg(d.path("in.pcap"))
        .arg("--out")
        .arg(d.path("out.pcap"))
        .args([
            "--mss",
            "1400",
            "--vni",
            "5001",
            "--local",
            "192.0.2.1",
            "--remote",
            "192.0.2.2",
        ])
        .args([
            "--option",
            "0x0102:0x80:deadbeef",
            "--option",
            "0xffff:1:0102030405060708",
            "--udp-checksum",
        ]));
    let rows = tshark(&d.path("out.pcap"));
    // 30000/1400 → 22, 20000/1400 → 15, one small TCP, one UDP.
    assert_eq!(rows.len(), 22 + 15 + 1 + 1);
    // Outer IPv4 header, outer UDP, inner IP (v4) or none (v6), inner L4.
    assert_checksums_good(&rows, 3);
    let outer_len = 14 + 20 + 8 + 8 + 8 + 12;
    for r in &rows {
        assert_eq!(r["geneve.vni"], "0x001389", "VNI 5001");
        assert_eq!(
            r["geneve.option"],
            "01028001deadbeef,ffff01020102030405060708"
        );
        let len: usize = r["frame.len"].parse().unwrap();
        assert!(
            len - outer_len <= 1514,
            "inner frame of {} bytes exceeds a 1500-byte MTU",
            len - outer_len
        );
    }
    let flows = reassemble(&rows);
    for port in [40001, 40002, 40003] {
        assert_eq!(
            flows[&port],
            expected(&d, port),
            "port {port}: reassembled payload differs"
        );
    }
    // PSH (0x08) and FIN (0x01) only on each flow's last segment.
    let v4: Vec<_> = rows
        .iter()
        .filter(|r| r["tcp.srcport"] == "40001")
        .collect();
    assert!(v4[..v4.len() - 1].iter().all(|r| flags(r) & 0x08 == 0));
    assert_eq!(flags(v4[v4.len() - 1]) & 0x08, 0x08);
    let v6: Vec<_> = rows
        .iter()
        .filter(|r| r["tcp.srcport"] == "40002")
        .collect();
    assert!(v6[..v6.len() - 1].iter().all(|r| flags(r) & 0x01 == 0));
    assert_eq!(flags(v6[v6.len() - 1]) & 0x01, 0x01);
}

#[test]
fn plain_tso_checked_by_tshark() {
    require_tools();
    let d = TempDir::new("segment-plain");
    scapy(&[&d.path("in.pcap"), &d.0], "segment-input");
    run(Command::new(example())
        .args(["segment", "--in"])
        .arg(d.path("in.pcap"))
        .arg("--out")
        .arg(d.path("out.pcap"))
        .args(["--mss", "1000"]));
    let rows = tshark(&d.path("out.pcap"));
    assert_eq!(rows.len(), 30 + 20 + 1 + 1);
    assert_checksums_good(&rows, 1);
    for r in &rows {
        assert!(r["geneve.vni"].is_empty());
        assert!(r["frame.len"].parse::<usize>().unwrap() <= 14 + 1100);
    }
    let flows = reassemble(&rows);
    for port in [40001, 40002, 40003] {
        assert_eq!(flows[&port], expected(&d, port), "port {port}");
    }
}

#[test]
fn coalesce_checked_by_tshark() {
    require_tools();
    let d = TempDir::new("coalesce");
    scapy(&[&d.path("in.pcap"), &d.0], "coalesce-input");
    let log = run(Command::new(example())
        .args(["coalesce", "--in"])
        .arg(d.path("in.pcap"))
        .arg("--out")
        .arg(d.path("out.pcap")));
    assert!(log.contains("61 frames in, 3 frames out"), "{log}");
    let rows = tshark(&d.path("out.pcap"));
    assert_eq!(rows.len(), 3, "ARP unchanged + one merged frame per flow");
    assert!(rows[0]["tcp.srcport"].is_empty(), "ARP first, untouched");
    assert_checksums_good(&rows[1..], 1);
    let flows = reassemble(&rows);
    assert_eq!(flows[&41001], expected(&d, 41001));
    assert_eq!(flows[&41002], expected(&d, 41002));
    assert_eq!(rows[1]["frame.len"], (14 + 20 + 20 + 40 * 1448).to_string());
    assert_eq!(flags(&rows[1]), 0x18, "ACK|PSH from the last segment");
}

fn read_frames(p: &Path) -> Vec<Vec<u8>> {
    let mut r = pcap_file::pcap::PcapReader::new(BufReader::new(File::open(p).unwrap())).unwrap();
    let mut v = Vec::new();
    while let Some(pkt) = r.next_packet() {
        v.push(pkt.unwrap().data.into_owned());
    }
    v
}

#[test]
fn decap_matches_scapy_and_names_drops() {
    require_tools();
    let d = TempDir::new("decap");
    scapy(
        &[&d.path("in.pcap"), &d.path("expected.pcap")],
        "decap-input",
    );
    let log = run(Command::new(example())
        .args(["decap", "--in"])
        .arg(d.path("in.pcap"))
        .arg("--out")
        .arg(d.path("out.pcap"))
        .args(["--known-option", "0x0102:0x80"]));
    assert_eq!(
        read_frames(&d.path("out.pcap")),
        read_frames(&d.path("expected.pcap"))
    );
    for reason in [
        "unknown_critical_option: 1",
        "control_packet: 1",
        "bad_version: 1",
        "bad_udp_checksum: 1",
        "not_geneve: 1",
    ] {
        assert!(log.contains(reason), "missing '{reason}' in: {log}");
    }
}

#[test]
fn encap_ipv6_checked_by_tshark_and_scapy() {
    require_tools();
    let d = TempDir::new("encap");
    scapy(&[&d.path("in.pcap"), &d.0], "segment-input");
    run(Command::new(example())
        .args(["encap", "--in"])
        .arg(d.path("in.pcap"))
        .arg("--out")
        .arg(d.path("out.pcap"))
        .args([
            "--vni",
            "77",
            "--local",
            "fd00:1::1",
            "--remote",
            "fd00:1::2",
            "--option",
            "0x0103:0x05:00000001",
        ]));
    let rows = tshark(&d.path("out.pcap"));
    assert_eq!(rows.len(), 4);
    assert_checksums_good(&rows, 2);
    for r in &rows {
        assert_eq!(r["geneve.vni"], "0x00004d");
        assert_eq!(r["geneve.option"], "0103050100000001");
        assert!(
            r["udp.checksum.status"].starts_with('1'),
            "outer UDP checksum verified over IPv6"
        );
    }
    let out = run(Command::new(PYTHON)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scapy_oracle.py"))
        .arg("check-encap")
        .arg(d.path("in.pcap"))
        .arg(d.path("out.pcap"))
        .arg("77"));
    assert!(out.contains("ok 4"), "{out}");
}
