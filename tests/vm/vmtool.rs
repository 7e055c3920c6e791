//! vmtool: the guest side of vswitch's QEMU tests. Built as a static binary by
//! `tests/vm/build-guest.sh` (`rustc -C target-feature=+crt-static`, std only) and run
//! by the guest's /init.
//!
//! ```text
//! vmtool recv PORT                    accept connections until one has sent its stream;
//!                                     verify every byte; print one RESULT line
//! vmtool send HOST PORT BYTES [CONNS] connect (retrying for 60 s), send BYTES of the
//!                                     stream per connection in 64 KiB writes, CONNS
//!                                     connections in parallel threads; wait for the
//!                                     receiver's verdict; print one RESULT line
//! vmtool sendfile HOST PORT FILE RATE connect (retrying for 60 s), send FILE at RATE
//!                                     bytes/s (0: as fast as TCP goes) in 64 KiB writes,
//!                                     wait until the receiver closes; one RESULT line
//! vmtool stats IFACE                  print the guest's counters as one STATS line
//! vmtool tso IFACE DSTMAC DSTIP6 N    send N IPv4 and N IPv6 TCP frames of 64000 bytes
//!                                     through an AF_PACKET socket with PACKET_VNET_HDR
//!                                     (gso_size 1448/1428 for a 1500-byte MTU,
//!                                     partial checksum): the guest's
//!                                     virtio-net driver hands them to the device whole
//!                                     as TSO frames; payload = the stream seeded with 1
//! vmtool rrserve PORT                 request/response server (rr.rs)
//! vmtool rr HOST PORT SECS            TCP_RR: 1-byte transactions on one connection
//! vmtool crr HOST PORT SECS           TCP_CRR: a connection per transaction
//! ```
//!
//! Busybox `nc` writes 1 KiB at a time and never makes TSO frames; this writes 64 KiB
//! per `write`, so with TSO the guest's TCP hands virtio-net frames of up to 64 KiB.
//!
//! The stream is a xorshift64 sequence (little-endian u64 words) seeded by the
//! connection's first 8 bytes, so a misplaced, duplicated or corrupted segment changes
//! the bytes the receiver compares.

mod rr;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const WRITE: usize = 64 * 1024;

struct Stream(u64);

impl Stream {
    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_exact_mut(8) {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            c.copy_from_slice(&x.to_le_bytes());
        }
    }
}

fn fail(msg: String) -> ! {
    println!("RESULT error msg={}", msg.replace(' ', "_"));
    std::process::exit(1);
}

fn recv(port: u16) {
    let l = TcpListener::bind(("0.0.0.0", port)).unwrap_or_else(|e| fail(format!("bind: {e}")));
    println!("LISTENING port={port}");
    let mut total = 0u64;
    let mut conns = 0u32;
    let mut bad = 0u32;
    // One verdict per connection; stops after the first connection whose sender said
    // how many connections to expect have all finished.
    let mut expect = u32::MAX;
    let start = Instant::now();
    let mut handles = Vec::new();
    while conns < expect {
        let (mut s, _) = l.accept().unwrap_or_else(|e| fail(format!("accept: {e}")));
        let mut hdr = [0u8; 12];
        if s.read_exact(&mut hdr).is_err() {
            continue;
        }
        expect = u32::from_le_bytes(hdr[8..12].try_into().unwrap());
        let seed = u64::from_le_bytes(hdr[..8].try_into().unwrap());
        conns += 1;
        handles.push(std::thread::spawn(move || {
            let mut st = Stream(seed);
            let mut got = vec![0u8; WRITE];
            let mut want = vec![0u8; WRITE];
            let mut n = 0u64;
            let mut ok = true;
            loop {
                // Read whole 64 KiB blocks (the sender's stream is a multiple of 8).
                let mut filled = 0;
                while filled < WRITE {
                    match s.read(&mut got[filled..]) {
                        Ok(0) => break,
                        Ok(k) => filled += k,
                        Err(e) => fail(format!("read: {e}")),
                    }
                }
                if filled == 0 {
                    break;
                }
                st.fill(&mut want[..filled.next_multiple_of(8).min(WRITE)]);
                if got[..filled] != want[..filled] {
                    ok = false;
                }
                n += filled as u64;
                if filled < WRITE {
                    break;
                }
            }
            let _ = s.write_all(if ok { b"OK" } else { b"NO" });
            (n, ok)
        }));
    }
    for h in handles {
        let (n, ok) = h.join().unwrap();
        total += n;
        bad += u32::from(!ok);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "RESULT recv bytes={total} conns={conns} bad={bad} secs={secs:.2} mbit={:.1}",
        total as f64 * 8.0 / secs / 1e6
    );
}

fn send(host: &str, port: u16, bytes: u64, conns: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let start = Instant::now();
    let handles: Vec<_> = (0..conns)
        .map(|i| {
            let host = host.to_string();
            std::thread::spawn(move || {
                let mut s = loop {
                    match TcpStream::connect((host.as_str(), port)) {
                        Ok(s) => break s,
                        Err(e) if Instant::now() < deadline => {
                            let _ = e;
                            std::thread::sleep(Duration::from_millis(200));
                        }
                        Err(e) => fail(format!("connect: {e}")),
                    }
                };
                let seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(i + 1);
                let mut hdr = [0u8; 12];
                hdr[..8].copy_from_slice(&seed.to_le_bytes());
                hdr[8..].copy_from_slice(&conns.to_le_bytes());
                s.write_all(&hdr).unwrap_or_else(|e| fail(format!("write: {e}")));
                let mut st = Stream(seed);
                let mut buf = vec![0u8; WRITE];
                let mut left = bytes;
                while left > 0 {
                    let n = (left as usize).min(WRITE);
                    st.fill(&mut buf[..n.next_multiple_of(8)]);
                    s.write_all(&buf[..n])
                        .unwrap_or_else(|e| fail(format!("write: {e}")));
                    left -= n as u64;
                }
                s.shutdown(Shutdown::Write).ok();
                let mut verdict = [0u8; 2];
                s.read_exact(&mut verdict)
                    .unwrap_or_else(|e| fail(format!("verdict: {e}")));
                &verdict == b"OK"
            })
        })
        .collect();
    let ok = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|&ok| ok)
        .count();
    let secs = start.elapsed().as_secs_f64();
    let total = bytes * u64::from(conns);
    println!(
        "RESULT send bytes={total} conns={conns} verified={ok} secs={secs:.2} mbit={:.1}",
        total as f64 * 8.0 / secs / 1e6
    );
}

fn sendfile(host: &str, port: u16, path: &str, rate: u64) {
    let mut file = std::fs::File::open(path).unwrap_or_else(|e| fail(format!("{path}: {e}")));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut s = loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => fail(format!("connect: {e}")),
        }
    };
    let start = Instant::now();
    let mut buf = vec![0u8; WRITE];
    let mut sent = 0u64;
    loop {
        if rate > 0 {
            // Ahead of RATE: sleep until the schedule catches up (at most 100 ms).
            let due = start.elapsed().as_secs_f64() * rate as f64;
            let ahead = sent as f64 - due;
            if ahead > 0.0 {
                std::thread::sleep(Duration::from_secs_f64((ahead / rate as f64).min(0.1)));
                continue;
            }
        }
        let n = file
            .read(&mut buf)
            .unwrap_or_else(|e| fail(format!("{path}: {e}")));
        if n == 0 {
            break;
        }
        s.write_all(&buf[..n])
            .unwrap_or_else(|e| fail(format!("write: {e}")));
        sent += n as u64;
    }
    s.shutdown(Shutdown::Write).ok();
    // The receiver closes once it has everything.
    let mut rest = [0u8; 64];
    while s.read(&mut rest).unwrap_or(0) > 0 {}
    println!(
        "RESULT sendfile bytes={sent} secs={:.2}",
        start.elapsed().as_secs_f64()
    );
}

fn read_num(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Looks up `field` of protocol `proto` in /proc/net/snmp (header line, value line).
fn snmp(text: &str, proto: &str, field: &str) -> u64 {
    let tag = format!("{proto}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&tag));
    let (Some(h), Some(v)) = (lines.next(), lines.next()) else {
        return 0;
    };
    h.split_whitespace()
        .zip(v.split_whitespace())
        .find(|(k, _)| *k == field)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn stats(iface: &str) {
    let snmp_text = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let s = |f: &str| read_num(&format!("/sys/class/net/{iface}/statistics/{f}"));
    println!(
        "STATS rx_packets={} rx_bytes={} tx_packets={} tx_bytes={} rx_errors={} rx_dropped={} \
         tcp_in_csum_errors={} tcp_retrans_segs={} tcp_out_segs={} tcp_in_segs={} ip_in_hdr_errors={} \
         udp_in_csum_errors={} icmp_in_csum_errors={}",
        s("rx_packets"),
        s("rx_bytes"),
        s("tx_packets"),
        s("tx_bytes"),
        s("rx_errors"),
        s("rx_dropped"),
        snmp(&snmp_text, "Tcp", "InCsumErrors"),
        snmp(&snmp_text, "Tcp", "RetransSegs"),
        snmp(&snmp_text, "Tcp", "OutSegs"),
        snmp(&snmp_text, "Tcp", "InSegs"),
        snmp(&snmp_text, "Ip", "InHdrErrors"),
        snmp(&snmp_text, "Udp", "InCsumErrors"),
        snmp(&snmp_text, "Icmp", "InCsumErrors"),
    );
}

extern "C" {
    fn socket(domain: i32, ty: i32, proto: i32) -> i32;
    fn setsockopt(fd: i32, level: i32, name: i32, val: *const u8, len: u32) -> i32;
    fn sendto(fd: i32, buf: *const u8, len: usize, flags: i32, addr: *const u8, alen: u32)
        -> isize;
    fn if_nametoindex(name: *const u8) -> u32;
}

/// One's-complement sum of `data` (RFC 1071), not folded.
fn sum16(data: &[u8], mut acc: u64) -> u64 {
    let mut it = data.chunks_exact(2);
    for w in &mut it {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = it.remainder() {
        acc += u64::from(*b) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fn parse_mac(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).unwrap_or_else(|_| fail(format!("bad MAC {s}"))))
        .collect();
    v.try_into().unwrap_or_else(|_| fail(format!("bad MAC {s}")))
}

/// Sends `n` IPv4 (10.9.9.1 → 10.9.9.2) and `n` IPv6 (fd00::1 → `dst6`) TCP frames of
/// 64000 bytes to `dst` through AF_PACKET with PACKET_VNET_HDR (Linux packet(7); header
/// per virtio 1.2 §5.1.6): TSO frames for a receiver that only captures them.
fn tso(iface: &str, dst: &str, dst6: &str, n: u32) {
    const AF_PACKET: i32 = 17;
    const SOCK_RAW: i32 = 3;
    const SOL_PACKET: i32 = 263;
    const PACKET_VNET_HDR: i32 = 15;
    let src = parse_mac(
        std::fs::read_to_string(format!("/sys/class/net/{iface}/address"))
            .unwrap_or_default()
            .trim(),
    );
    let dst = parse_mac(dst);
    let dst6: std::net::Ipv6Addr = dst6.parse().unwrap_or_else(|_| fail("bad IPv6".into()));
    let cname = format!("{iface}\0");
    // SAFETY: FFI calls with valid pointers and lengths; fd errors are checked.
    let (fd, ifindex) = unsafe {
        let fd = socket(AF_PACKET, SOCK_RAW, 0);
        let one: i32 = 1;
        if fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, (&one as *const i32).cast(), 4) != 0 {
            fail("AF_PACKET socket with PACKET_VNET_HDR".into());
        }
        (fd, if_nametoindex(cname.as_ptr()))
    };
    let mut st = Stream(1);
    let mut seq = 1000u32;
    for i in 0..2 * n {
        let v6 = i % 2 == 1;
        let l3 = if v6 { 40 } else { 20 };
        let hlen = 14 + l3 + 20;
        let total = 64000usize;
        let mut f = vec![0u8; 10 + total];
        let (vh, fr) = f.split_at_mut(10);
        vh[0] = 1; // VIRTIO_NET_HDR_F_NEEDS_CSUM
        vh[1] = if v6 { 4 } else { 1 }; // GSO_TCPV6 / GSO_TCPV4
        vh[2..4].copy_from_slice(&(hlen as u16).to_le_bytes());
        // MSS for a 1500-byte MTU: 1448 after IPv4 + TCP headers, 1428 after IPv6's.
        let mss: u16 = if v6 { 1428 } else { 1448 };
        vh[4..6].copy_from_slice(&mss.to_le_bytes());
        vh[6..8].copy_from_slice(&((14 + l3) as u16).to_le_bytes());
        vh[8..10].copy_from_slice(&16u16.to_le_bytes());
        fr[..6].copy_from_slice(&dst);
        fr[6..12].copy_from_slice(&src);
        let tcp_len = total - 14 - l3;
        let mut pseudo;
        if v6 {
            fr[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            let ip = &mut fr[14..54];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
            ip[6] = 6;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&"fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
            ip[24..40].copy_from_slice(&dst6.octets());
            pseudo = sum16(&ip[8..40], 6 + tcp_len as u64);
        } else {
            fr[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip = &mut fr[14..34];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((total - 14) as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&(i as u16).to_be_bytes());
            ip[6] = 0x40; // DF
            ip[8] = 64;
            ip[9] = 6;
            ip[12..16].copy_from_slice(&[10, 9, 9, 1]);
            ip[16..20].copy_from_slice(&[10, 9, 9, 2]);
            let c = !fold(sum16(ip, 0));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            pseudo = sum16(&ip[12..20], 6 + tcp_len as u64);
        }
        let t = 14 + l3;
        fr[t..t + 2].copy_from_slice(&40000u16.to_be_bytes());
        fr[t + 2..t + 4].copy_from_slice(&5001u16.to_be_bytes());
        fr[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
        fr[t + 8..t + 12].copy_from_slice(&1u32.to_be_bytes());
        fr[t + 12] = 5 << 4;
        fr[t + 13] = 0x18; // ACK | PSH
        fr[t + 14..t + 16].copy_from_slice(&65535u16.to_be_bytes());
        let payload = total - hlen;
        st.fill(&mut fr[hlen..hlen + payload / 8 * 8]);
        seq = seq.wrapping_add(payload as u32);
        // Partial checksum: the pseudo-header sum, not inverted (what the device and a
        // software segmenter complete).
        pseudo = u64::from(fold(pseudo));
        fr[t + 16..t + 18].copy_from_slice(&(pseudo as u16).to_be_bytes());
        let mut sll = [0u8; 20];
        sll[..2].copy_from_slice(&(AF_PACKET as u16).to_ne_bytes());
        sll[4..8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
        sll[11] = 6;
        sll[12..18].copy_from_slice(&dst);
        // SAFETY: `f` and `sll` are valid for their lengths for the duration of the call.
        let r = unsafe { sendto(fd, f.as_ptr(), f.len(), 0, sll.as_ptr(), 20) };
        if r != f.len() as isize {
            fail(format!("sendto: {}", std::io::Error::last_os_error()));
        }
    }
    println!("RESULT tso sent={} bytes_each=64000", 2 * n);
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let arg = |i: usize| -> &str {
        a.get(i)
            .map(String::as_str)
            .unwrap_or_else(|| fail(format!("missing argument {i}")))
    };
    let num = |i: usize| -> u64 {
        arg(i)
            .parse()
            .unwrap_or_else(|_| fail(format!("argument {i} is not a number")))
    };
    match arg(1) {
        "recv" => recv(num(2) as u16),
        "send" => send(
            arg(2),
            num(3) as u16,
            num(4),
            a.get(5).and_then(|s| s.parse().ok()).unwrap_or(1),
        ),
        "sendfile" => sendfile(arg(2), num(3) as u16, arg(4), num(5)),
        "stats" => stats(arg(2)),
        "tso" => tso(arg(2), arg(3), arg(4), num(5) as u32),
        "rrserve" => rr::serve(num(2) as u16),
        "rr" => rr::run(arg(2), num(3) as u16, num(4), false),
        "crr" => rr::run(arg(2), num(3) as u16, num(4), true),
        other => fail(format!("unknown command {other}")),
    }
}
