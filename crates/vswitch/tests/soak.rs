//! Soak: the PVP loop (a testpmd guest forwarding between ports a and b) runs while,
//! round after round, a second guest connects to port c and goes away (cleanly or by
//! kill -9), a port is added and deleted, an ACL rule is added and deleted on a, and a
//! scraper reads `/metrics` several times a second. vswitchd's RSS, fds and threads are
//! sampled every 10 s: they must stay flat, and at the end every frame the loop sent was
//! delivered or counted.
//!
//! `SOAK_SECS` sets the length (the test suite runs 120 s; `scripts/soak.sh MINUTES`
//! runs longer ones). The closing line starts with `soak:`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::footprint::{self, Footprint, Slack};
use common::looping::*;
use common::*;

/// One sample of the daemon's footprint, at `secs` into the run.
#[derive(Debug, Clone)]
struct Sample {
    secs: f64,
    fp: Footprint,
}

/// A sample taken once no control request is in flight.
fn sample(sw: &Vswitchd, start: Instant) -> Sample {
    let fp = footprint::quiet(sw.pid(), &sw.control);
    Sample {
        secs: start.elapsed().as_secs_f64(),
        fp,
    }
}

/// Waits until port c has no driver and listens for the next one.
fn c_listening(sw: &Vswitchd) {
    wait_for(
        Duration::from_secs(10),
        "c disconnected and listening",
        || {
            let c = sw.show_port("c");
            (c["link"] == "down" && c["listening"] == true).then_some(())
        },
    );
}

/// Least-squares slope of RSS over time, KiB per minute.
fn rss_slope(s: &[Sample]) -> f64 {
    let n = s.len() as f64;
    let (mx, my) = (
        s.iter().map(|x| x.secs).sum::<f64>() / n,
        s.iter().map(|x| x.fp.rss_kib as f64).sum::<f64>() / n,
    );
    let num: f64 = s
        .iter()
        .map(|x| (x.secs - mx) * (x.fp.rss_kib as f64 - my))
        .sum();
    let den: f64 = s.iter().map(|x| (x.secs - mx).powi(2)).sum();
    if den == 0.0 {
        0.0
    } else {
        num / den * 60.0
    }
}

/// Reads `/metrics` from `addr` once; true if it answered 200.
fn scrape(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

#[test]
fn soak_loop_with_churn_stays_flat() {
    let _g = serial();
    setup_host();
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let dir = TempDir::new("soak");
    let metrics = format!("127.0.0.1:{}", 20_000 + std::process::id() % 10_000);
    let sw = start_loop_switch(
        &dir,
        &[
            "--vhost-user".into(),
            format!("c={}", dir.path("c.sock").display()),
            "--metrics".into(),
            metrics.clone(),
        ],
    );
    let mut lg = start_loop_guest(&dir, "vssoak", LOOP_MAC_A, LOOP_MAC_B);
    wait_for(Duration::from_secs(20), "the loop running", || {
        (sw.port("a").stats.rx_packets > 10_000).then_some(())
    });

    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let scraper = {
        let (stop, scrapes, metrics) = (stop.clone(), scrapes.clone(), metrics.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                assert!(scrape(&metrics), "a scrape failed");
                scrapes.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };

    let pid = sw.pid();
    let start = Instant::now();
    let mut samples = vec![sample(&sw, start)];
    let mut next_sample = Duration::from_secs(10);
    let (mut rounds, mut reconnects) = (0u64, 0u64);
    let sc = dir.path("c.sock");
    let e_spec = format!("e={}", dir.path("e.sock").display());
    while start.elapsed() < Duration::from_secs(secs) {
        rounds += 1;
        // A guest on c comes and goes: cleanly on even rounds, kill -9 on odd ones.
        let mut g = Testpmd::start(GuestSpec {
            prefix: "vssoakc",
            socket: &sc,
            mac: "02:00:00:00:00:0c",
            queues: 1,
            server: false,
            extra_vdevs: &[],
            queue_size: None,
            packed: false,
            args: &["--forward-mode=rxonly"],
        });
        g.cmd("start");
        wait_for(Duration::from_secs(10), "c connected", || {
            (sw.port("c").link == "up").then_some(())
        });
        reconnects += 1;
        if rounds % 2 == 0 {
            g.cmd("stop");
            drop(g);
        } else {
            g.kill9();
        }
        // A port comes and goes; an ACL rule that matches none of the loop's frames is
        // added to a (its frames then take the flow cache) and deleted.
        let ctl = |args: &[&str]| {
            let out = vswitchctl_out(&sw.control, args);
            assert!(out.status.success(), "vswitchctl {args:?}: {out:?}");
        };
        ctl(&["add-port", "--vhost-user", &e_spec]);
        ctl(&["acl", "add", "a", "drop", "ip_proto=udp", "l4_dst=7777"]);
        ctl(&["del-port", "e"]);
        ctl(&["acl", "del", "a", "0"]);
        if start.elapsed() >= next_sample {
            // Sampled with c's connection gone and c listening again (the next
            // connection's device set up), so that what a connection holds is not
            // counted at one end and not the other.
            c_listening(&sw);
            samples.push(sample(&sw, start));
            next_sample += Duration::from_secs(10);
        }
    }
    stop.store(true, Ordering::Relaxed);
    scraper.join().expect("the scraper");
    lg.cmd("stop");
    let (a, b) = settled(&sw);
    c_listening(&sw);
    // The first sample is taken before any churn; compare with the first one after.
    // Connections of the last scrapes close on their own: nothing may have grown once
    // they have (awaited). RSS is judged by its slope below, not by one sample.
    let first = samples[1.min(samples.len() - 1)].clone();
    let slack = Slack {
        eventfds: 0,
        rss_kib: u64::MAX / 2,
    };
    let last = Sample {
        fp: footprint::assert_nothing_grows(
            pid,
            &sw.control,
            &first.fp,
            slack,
            // A loaded CI machine once kept two eventfds (one vring's kick and call) for
            // over 10 s after the last churn round; the local run had none left.
            Duration::from_secs(30),
            || format!("{samples:?}"),
        ),
        secs: start.elapsed().as_secs_f64(),
    };
    samples.push(last.clone());
    for s in &samples {
        eprintln!(
            "t={:>6.1}s rss={} KiB fds={} threads={}",
            s.secs,
            s.fp.rss_kib,
            s.fp.fd_count(),
            s.fp.threads
        );
    }
    let slope = rss_slope(&samples[1.min(samples.len() - 1)..]);
    println!(
        "soak: {:.0} s, {rounds} rounds, {reconnects} guest reconnects, {rounds} port add/del, \
         {rounds} ACL add/del, {} scrapes; loop a->b {} b->a {} frames, drops a {} b {}; \
         RSS {} -> {} KiB (slope {slope:.0} KiB/min), fds {} -> {}, threads {} -> {}",
        last.secs,
        scrapes.load(Ordering::Relaxed),
        b.tx_packets,
        a.tx_packets,
        a.drops_total,
        b.drops_total,
        first.fp.rss_kib,
        last.fp.rss_kib,
        first.fp.fd_count(),
        last.fp.fd_count(),
        first.fp.threads,
        last.fp.threads,
    );
    assert_loop_whole(&a, &b, 0);
    assert!(rounds >= 3, "only {rounds} rounds ran");
    // Flat: under 1 MiB per minute of drift (the allocator's arenas settle in the first
    // rounds; a leak of one buffer per reconnect or per scrape would show far above).
    assert!(slope < 1024.0, "RSS grows {slope:.0} KiB/min: {samples:?}");
}
