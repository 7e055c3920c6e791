//! vmtool's request/response modes, netperf's TCP_RR and TCP_CRR: one byte each way per
//! transaction, over one connection (rr) or a fresh connection per transaction (crr),
//! for a fixed time; the rate and latency percentiles as one RESULT line.
//!
//! ```text
//! vmtool rrserve PORT         answer every byte with one byte, on every connection,
//!                             each in its own thread, forever
//! vmtool rr HOST PORT SECS    one connection (TCP_NODELAY), transactions for SECS
//! vmtool crr HOST PORT SECS   connect, one transaction, close, for SECS
//! ```
//! RESULT line: `RESULT rr|crr transactions=N secs=S rate=PER_S p50_us=.. p99_us=..`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::fail;

/// Serves request/response connections on `port`.
pub fn serve(port: u16) {
    let l = TcpListener::bind(("0.0.0.0", port)).unwrap_or_else(|e| fail(format!("bind: {e}")));
    println!("LISTENING port={port}");
    for s in l.incoming() {
        let Ok(mut s) = s else { continue };
        std::thread::spawn(move || {
            let _ = s.set_nodelay(true);
            let mut b = [0u8; 1];
            while let Ok(1) = s.read(&mut b) {
                if s.write_all(&b).is_err() {
                    break;
                }
            }
        });
    }
}

/// One transaction on `s`: a byte out, a byte back.
fn transact(s: &mut TcpStream) -> std::io::Result<()> {
    s.write_all(b"r")?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b)
}

/// Connects to `host:port`, retrying for up to 60 s while the server boots.
fn connect(host: &str, port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return s;
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => fail(format!("connect: {e}")),
        }
    }
}

/// TCP_RR (`per_conn` false) or TCP_CRR (true) against `host:port` for `secs` seconds.
pub fn run(host: &str, port: u16, secs: u64, per_conn: bool) {
    let name = if per_conn { "crr" } else { "rr" };
    // The server is up once one connection succeeds; time only what follows.
    drop(connect(host, port));
    let mut conn = (!per_conn).then(|| connect(host, port));
    let mut lat: Vec<u32> = Vec::with_capacity(1 << 16);
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    while Instant::now() < end {
        let t = Instant::now();
        let r = match conn.as_mut() {
            Some(s) => transact(s),
            None => TcpStream::connect((host, port)).and_then(|mut s| {
                s.set_nodelay(true)?;
                transact(&mut s)
            }),
        };
        if let Err(e) = r {
            fail(format!("{name}: {e}"));
        }
        lat.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: usize| lat.get((lat.len() * p / 100).min(lat.len().saturating_sub(1)));
    println!(
        "RESULT {name} transactions={} secs={secs:.2} rate={:.1} p50_us={} p99_us={}",
        lat.len(),
        lat.len() as f64 / secs,
        pct(50).copied().unwrap_or(0),
        pct(99).copied().unwrap_or(0),
    );
}
