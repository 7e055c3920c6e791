//! Hostile vhost-user front-ends: a raw front-end (`common::hostile`: no real driver
//! misbehaves on purpose) connects to port `h` and breaks the protocol or its rings,
//! while a DPDK testpmd guest loops frames between ports a and b.
//!
//! After each attack: the daemon answers, the loop still moves frames at a rate not far
//! below the one measured before the attacks, and the attack is counted on `h`, under a
//! named drop reason (by the exact amount) or as a protocol error. At the end the
//! daemon's fds, threads, RSS and guest-memory mappings are back where they started and
//! the loop lost nothing.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

// The virtio-net header as the switch reads it: the test writes exactly what the data
// path parses (`to_bytes`: VERSION_1 layout, num_buffers 0).
use common::footprint::{self, Footprint, Slack};
use common::hostile::*;
use common::hostile_packed::*;
use common::*;
use vswitch::control::protocol::StatsRow;
use vswitch::datapath::packet::{
    VirtioNetHdr, VIRTIO_NET_HDR_F_NEEDS_CSUM as NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4 as GSO_TCPV4,
    VIRTIO_NET_HDR_GSO_TCPV6 as GSO_TCPV6,
};

const MAC_A: &str = "02:00:00:00:00:01";
const MAC_B: &str = "02:00:00:00:00:02";
/// Port h's MAC (static): frames the hostile front-end sends to itself are dropped as
/// `same_port` once they made it through the ring, so they never join the loop.
const MAC_H: &str = "02:00:00:00:00:48";
const BROADCAST: &str = "ff:ff:ff:ff:ff:ff";

fn mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(s.split(':')) {
        *b = u8::from_str_radix(p, 16).unwrap();
    }
    m
}

/// A switch with ports a, b (the loop guest) and h (the attacker), plus `extra` ports.
struct Bed {
    // Fields drop in order: the guest first, then the switch, then the directory.
    lg: Testpmd,
    sw: Vswitchd,
    dir: TempDir,
    /// Port h's socket.
    sh: PathBuf,
    /// The loop's rate before any attack.
    rate0: Rate,
    /// The rate last measured (after the previous attack).
    last_rate: std::cell::Cell<Rate>,
    /// Every rate measured after an attack.
    rates: std::cell::RefCell<Vec<Rate>>,
}

/// The loop's rate over a window: frames received from a and b per second, and per
/// second of CPU time that the scarcer of the loop's two busy threads got (0: they got
/// less than a tenth of a CPU, too little to tell).
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    per_s: f64,
    per_cpu_s: f64,
    /// That CPU time per second of the window.
    cpu_share: f64,
}

impl Rate {
    fn min(&self, o: &Rate) -> Rate {
        Rate {
            per_s: self.per_s.min(o.per_s),
            per_cpu_s: self.per_cpu_s.min(o.per_cpu_s),
            cpu_share: self.cpu_share.min(o.cpu_share),
        }
    }
    fn max(&self, o: &Rate) -> Rate {
        Rate {
            per_s: self.per_s.max(o.per_s),
            per_cpu_s: self.per_cpu_s.max(o.per_cpu_s),
            cpu_share: self.cpu_share.max(o.cpu_share),
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.0} frames/s, {:.0} frames/CPU-s (CPU {:.0}%)",
            self.per_s,
            self.per_cpu_s,
            100.0 * self.cpu_share
        )
    }
}

/// One reading of the loop: frames so far and its threads' CPU time so far.
struct Sample {
    t: Instant,
    frames: u64,
    pmd_ns: u64,
    fwd_ns: u64,
}

/// CPU time so far, in ns, of `pid`'s threads whose name starts with `prefix`
/// (/proc/PID/task/TID/schedstat: time on a CPU).
fn cpu_ns(pid: u32, prefix: &str) -> u64 {
    let mut total = 0;
    let mut found = false;
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let st = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
        if let Some(ns) = st
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        {
            total += ns;
            found = true;
        }
    }
    assert!(found, "no thread {prefix}* in process {pid}");
    total
}

impl Bed {
    /// `a_peer`: where the loop guest's port a sends (MAC_B, or BROADCAST so that every
    /// frame it sends is flooded to h as well).
    fn start(tag: &str, a_peer: &str, extra: &[&str]) -> Bed {
        setup_host();
        let dir = TempDir::new(tag);
        let mut args = Vec::new();
        for p in ["a", "b", "h"].iter().chain(extra) {
            args.push("--vhost-user".to_string());
            args.push(format!("{p}={}", dir.path(&format!("{p}.sock")).display()));
        }
        for (p, m) in [("a", MAC_A), ("b", MAC_B), ("h", MAC_H)] {
            args.push("--static-mac".to_string());
            args.push(format!("{p}={m}"));
        }
        // The PMD on CPU 0, testpmd's forwarding core on CPU 1 (its `-l 0,1`, main
        // lcore 0 idle at its prompt): the loop's two busy threads never take turns on
        // one CPU, which would make its rate swing with the scheduler.
        args.extend(["--pmd-cpus".to_string(), "0".to_string()]);
        let sw = Vswitchd::start(&dir, &args);
        let lg = start_loop_guest_to(&dir, &format!("vs{tag}"), MAC_A, MAC_B, a_peer);
        wait_for(Duration::from_secs(20), "the loop running", || {
            (sw.port("a").stats.rx_packets > 10_000).then_some(())
        });
        let sh = dir.path("h.sock");
        let mut bed = Bed {
            lg,
            sw,
            dir,
            sh,
            rate0: Rate::default(),
            last_rate: std::cell::Cell::new(Rate::default()),
            rates: std::cell::RefCell::new(Vec::new()),
        };
        bed.rate0 = bed.loop_rate(Duration::from_secs(1));
        bed.last_rate.set(bed.rate0);
        eprintln!("loop before the attacks: {}", bed.rate0);
        assert!(bed.rate0.per_s > 1000.0, "the loop runs: {}", bed.rate0);
        bed
    }

    /// What the loop moves and the CPU time its two busy threads get.
    fn sample(&self) -> Sample {
        Sample {
            t: Instant::now(),
            frames: loop_count(&self.sw),
            pmd_ns: cpu_ns(self.sw.pid(), "pmd"),
            fwd_ns: cpu_ns(self.lg.pid(), "rte-worker"),
        }
    }

    /// The loop's rate over `window` (a measurement, not a synchronization).
    fn loop_rate(&self, window: Duration) -> Rate {
        let a = self.sample();
        std::thread::sleep(window);
        let b = self.sample();
        let secs = (b.t - a.t).as_secs_f64();
        let frames = (b.frames - a.frames) as f64;
        let cpu = (b.pmd_ns - a.pmd_ns).min(b.fwd_ns - a.fwd_ns) as f64 / 1e9;
        Rate {
            per_s: frames / secs,
            per_cpu_s: if cpu > 0.1 * secs { frames / cpu } else { 0.0 },
            cpu_share: cpu / secs,
        }
    }

    /// Whether `r` is at least half of `reference`, as frames per second or, when the
    /// loop's threads got a tenth of a CPU or more, as frames per CPU second.
    fn kept(r: &Rate, reference: &Rate) -> bool {
        r.per_s >= 0.5 * reference.per_s
            || (r.per_cpu_s > 0.0 && r.per_cpu_s >= 0.5 * reference.per_cpu_s)
    }

    /// After an attack: the daemon answers and the loop still runs at ≥ 50% of its rate
    /// before the attack (the rate measured after the previous attack, just before this
    /// one started, or before all attacks if that is lower).
    ///
    /// The loop's rate is its frames per second, and its frames per second of CPU that
    /// the scarcer of its two busy threads (vswitchd's PMD, testpmd's forwarding core)
    /// got; either must be at least half of what it was. The machine has 2 cores shared
    /// by those two threads, this test and whatever else runs (another engineer's builds
    /// and DPDK tests, a fuzzer): here the loop's frames per second fell from 233,000 to
    /// 116,000 and from 45,000 to 22,000 within seconds, for seconds, while other tests
    /// started; frames per CPU second do not move with such load, and half of them
    /// tolerates the noise of a 10 ms tick and of caches shared with other processes. A
    /// dip below half is measured up to three more times over a full second before it
    /// fails. A stalled or crashed PMD, or one spending its rounds on the attacker's
    /// ring, moves the loop at a small fraction of its frames per CPU second, far below
    /// half.
    fn check_alive(&self, what: &str) {
        assert!(
            show_json(&self.sw.control).is_ok(),
            "{what}: the daemon answers"
        );
        let reference = self.last_rate.get().min(&self.rate0);
        let mut r = self.loop_rate(Duration::from_millis(500));
        for _ in 0..3 {
            if Bed::kept(&r, &reference) {
                break;
            }
            r = r.max(&self.loop_rate(Duration::from_secs(1)));
        }
        eprintln!("{what}: loop {r}; before: {reference}");
        assert!(
            Bed::kept(&r, &reference),
            "{what}: the loop slowed to {r} from {reference}"
        );
        self.last_rate.set(r);
        self.rates.borrow_mut().push(r);
    }

    /// At the end: the loop runs at ≥ 50% of its rate before all attacks, or of the
    /// median rate measured after each of them if that is lower (as
    /// [`Bed::check_alive`], measured up to three times over a second). Catches a
    /// slowdown that each attack added a little of.
    fn check_rate_kept(&self) {
        let median = |f: fn(&Rate) -> f64| {
            let mut v: Vec<f64> = self.rates.borrow().iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::MAX)
        };
        let reference = Rate {
            per_s: median(|r| r.per_s).min(self.rate0.per_s),
            per_cpu_s: median(|r| r.per_cpu_s).min(self.rate0.per_cpu_s),
            cpu_share: 0.0,
        };
        let mut r = Rate::default();
        for _ in 0..3 {
            r = r.max(&self.loop_rate(Duration::from_secs(1)));
            if Bed::kept(&r, &reference) {
                break;
            }
        }
        eprintln!(
            "after all attacks: loop {r}; before them: {}; reference (lower of that and \
             the median after each): {reference}",
            self.rate0
        );
        assert!(
            Bed::kept(&r, &reference),
            "the loop slowed to {r} from {reference}"
        );
    }

    fn h(&self) -> StatsRow {
        self.sw.port("h")
    }

    /// Waits until h's counters moved from `before` by exactly `rx` frames received
    /// (`None`: not checked) and the drops `want` (reasons not named: zero), and
    /// asserts it. Drops that frames flooded to h cause whatever the attack (h's receive
    /// ring is empty or not set up: no_rx_buffer, port_down) are not looked at.
    fn expect_h(&self, what: &str, before: &StatsRow, rx: Option<u64>, want: &[(&str, u64)]) {
        if let Err(e) = self.try_expect_h(what, before, rx, want) {
            panic!("{e}");
        }
    }

    /// [`Bed::expect_h`], returning what differs instead of panicking.
    fn try_expect_h(
        &self,
        what: &str,
        before: &StatsRow,
        rx: Option<u64>,
        want: &[(&str, u64)],
    ) -> Result<(), String> {
        let want: BTreeMap<String, u64> = want
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (r.to_string(), *n))
            .collect();
        let delta = |s: &StatsRow| {
            let d: BTreeMap<String, u64> = s
                .stats
                .drops
                .iter()
                .filter(|(r, _)| !FLOOD.contains(&r.as_str()))
                .map(|(r, n)| {
                    (
                        r.clone(),
                        n - before.stats.drops.get(r).copied().unwrap_or(0),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect();
            (s.stats.rx_packets - before.stats.rx_packets, d)
        };
        let ok = |d: &(u64, BTreeMap<String, u64>)| rx.is_none_or(|r| r == d.0) && d.1 == want;
        let start = Instant::now();
        let mut d = delta(&self.h());
        while !ok(&d) && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
            d = delta(&self.h());
        }
        if ok(&d) {
            return Ok(());
        }
        Err(format!(
            "{what}: h received {} frames (want {rx:?}) and dropped {:?} (want {want:?})",
            d.0, d.1
        ))
    }
}

/// Drop reasons on h moved by the frames the loop floods to it (see [`Bed::expect_h`]).
const FLOOD: [&str; 2] = ["no_rx_buffer", "port_down"];

/// Frames received from the loop guest's two ports.
fn loop_count(sw: &Vswitchd) -> u64 {
    sw.stats()
        .iter()
        .filter(|r| r.port == "a" || r.port == "b")
        .map(|r| r.stats.rx_packets)
        .sum()
}

/// What the daemon's fds are (for a failure message).
fn fd_targets(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| Some(std::fs::read_link(e.path()).ok()?.display().to_string()))
        .collect();
    v.sort();
    v
}

fn thread_names(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect();
    v.sort();
    v
}

/// The footprint with one well-behaved connection open and answering on `sh` (what a
/// connection holds is then the same whenever it is taken), once no control request is
/// in flight.
fn steady(bed: &Bed) -> Footprint {
    let mut f = Front::connect(&bed.sh);
    assert!(f.answers());
    footprint::quiet(bed.sw.pid(), &bed.sw.control)
}

/// RSS may grow this much over a test, in KiB: glibc keeps the stacks of exited threads
/// (each connection's protocol thread) in a cache of up to 40 MiB and the heap arenas
/// those threads used, so resident memory grows by their touched pages once, then
/// plateaus. A leaked guest memory (5 MiB per connection here, mapped and touched by the
/// switch) or per-connection state would exceed it within a few connections; mappings of
/// guest memory are also checked (none may remain).
const SLACK: Slack = Slack {
    eventfds: 0,
    rss_kib: 8 * 1024,
};

/// Asserts that nothing has grown from `before` (fds by kind, threads, file mappings;
/// RSS within [`SLACK`]) and that no hostile guest's memory is still mapped, waiting for
/// connections that are still closing. A footprint may shrink.
fn assert_footprint_back(bed: &Bed, before: &Footprint) -> Footprint {
    let pid = bed.sw.pid();
    let start = Instant::now();
    let after = loop {
        let mut f = Front::connect(&bed.sh);
        assert!(f.answers());
        let now = footprint::quiet(pid, &bed.sw.control);
        drop(f);
        let done = now.growth(before, SLACK).is_empty() && now.fds_like("memfd:hostile") == 0;
        if done || start.elapsed() > Duration::from_secs(10) {
            break now;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!(
        "footprint: before {} fds, {} threads, {} KiB; after {} fds, {} threads, {} KiB; threads {:?}",
        before.fd_count(),
        before.threads,
        before.rss_kib,
        after.fd_count(),
        after.threads,
        after.rss_kib,
        thread_names(pid)
    );
    let guest_maps = after
        .maps
        .iter()
        .filter(|(k, _)| k.contains("memfd:hostile"))
        .count();
    let grown = after.growth(before, SLACK);
    assert!(
        grown.is_empty() && guest_maps == 0,
        "grew: {grown:?}; hostile guest mappings left: {guest_maps}\nbefore {before:?}\nafter {after:?}"
    );
    after
}

/// Each protocol attack is refused by closing the connection, counted, and leaves the
/// port ready for the next front-end; 1000 reconnects leak nothing; the loop beside it
/// runs on.
#[test]
fn hostile_front_ends_are_refused_and_leave_nothing_behind() {
    let _g = serial();
    let t0 = Instant::now();
    // Port i holds an idle connection through the attacks: idle between messages is
    // legitimate however long (QEMU sends nothing for hours).
    let bed = Bed::start("hostile", MAC_B, &["i"]);
    let (sw, sh) = (&bed.sw, &bed.sh);
    let pid = sw.pid();
    let before = steady(&bed);
    let mut idle = Front::connect(&bed.dir.path("i.sock"));
    assert!(idle.answers());
    let mut refused = 0;
    // Each refusal below is counted once: checks that the count moved by one.
    let mut refused_one = |what: &str| {
        refused += 1;
        wait_for(Duration::from_secs(5), what, || {
            (sw.protocol_errors("h") == refused).then_some(())
        });
        bed.check_alive(what);
    };
    {
        // Unoffered protocol feature: refused; the same without it: served.
        let mut f = Front::connect(sh);
        assert!(f.answers());
        let offered = f.get_u64(GET_PROTOCOL_FEATURES).expect("protocol features");
        assert_eq!(offered & PF_CONFIGURE_MEM_SLOTS, 0, "not offered");
        f.send(SET_PROTOCOL_FEATURES, &offered.to_le_bytes(), &[]);
        assert!(
            f.get_u64(GET_QUEUE_NUM).is_some(),
            "what was offered is accepted"
        );
    }
    {
        let mut f = Front::connect(sh);
        assert!(f.answers());
        let bad = PF_MQ | PF_CONFIGURE_MEM_SLOTS;
        f.send(SET_PROTOCOL_FEATURES, &bad.to_le_bytes(), &[]);
        assert!(f.closed_by_switch(), "an unoffered protocol feature closes");
        refused_one("unoffered protocol feature");
    }
    // A memory region past the end of its file: refused before it is mapped (touching it
    // would raise SIGBUS); a region within its file: served.
    let m = memfd(1 << 20);
    {
        let mut f = Front::connect(sh);
        f.send(SET_MEM_TABLE, &mem_table(1 << 20), &[m.as_raw_fd()]);
        assert!(f.answers(), "a region within its file is mapped");
    }
    {
        let mut f = Front::connect(sh);
        f.send(SET_MEM_TABLE, &mem_table(4 << 20), &[m.as_raw_fd()]);
        assert!(f.closed_by_switch(), "a region past its file's end closes");
        refused_one("region past its file's end");
    }
    {
        // An unknown request claiming a 256 MiB body.
        let mut f = Front::connect(sh);
        f.0.write_all(&[0xad, 0xde, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x10])
            .unwrap();
        assert!(f.closed_by_switch(), "garbage closes");
        refused_one("garbage header");
    }
    {
        // A known request with no body but an unknown request code: closed.
        let mut f = Front::connect(sh);
        assert!(f.answers());
        f.send(999, &[], &[]);
        assert!(f.closed_by_switch(), "an unknown request code closes");
        refused_one("unknown request code");
    }
    {
        // A body larger than the largest message (4 KiB): refused on its header.
        let mut f = Front::connect(sh);
        assert!(f.answers());
        f.send(SET_FEATURES, &vec![0u8; 4097], &[]);
        assert!(f.closed_by_switch(), "an oversized message closes");
        refused_one("oversized message");
    }
    {
        // A body of the largest size for a request that takes 8 bytes.
        let mut f = Front::connect(sh);
        assert!(f.answers());
        f.send(SET_FEATURES, &vec![0u8; 4096], &[]);
        assert!(f.closed_by_switch(), "a body of the wrong size closes");
        refused_one("wrong body size");
    }
    {
        // Reserved header flags, and a wrong version.
        let mut f = Front::connect(sh);
        f.send_flags(GET_FEATURES, VERSION_1 | 0x100, &[], &[]);
        assert!(f.closed_by_switch(), "reserved flags close");
        refused_one("reserved header flags");
        let mut f = Front::connect(sh);
        f.send_flags(GET_FEATURES, 0x2, &[], &[]);
        assert!(f.closed_by_switch(), "version 2 closes");
        refused_one("header version 2");
    }
    {
        // Garbage in the middle of a running session (rings set up, frames flowing to
        // the loop): the connection closes and its rings are let go.
        let mut g = Guest::connect(sh, 0);
        g.send(&[0; VNET_HDR], &udp_frame(mac(MAC_H), mac(MAC_A), 64, 1));
        g.tx_done();
        g.front.send_raw(&[0x55; 40], &[]);
        assert!(g.front.closed_by_switch(), "garbage mid-session closes");
        refused_one("garbage mid-session");
    }
    // Fix A: a message that has started must complete within 5 s.
    for (what, bytes) in [
        // 5 bytes of a 12-byte header, then nothing.
        ("a short header", &[1u8, 0, 0, 0, 1][..]),
        // SET_FEATURES announcing its 8-byte body, which never comes.
        (
            "a missing body",
            &[2u8, 0, 0, 0, 1, 0, 0, 0, 8, 0, 0, 0][..],
        ),
    ] {
        let mut f = Front::connect(sh);
        assert!(f.answers());
        f.0.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        f.send_raw(bytes, &[]);
        let t = Instant::now();
        assert!(f.closed_by_switch(), "{what}: closed");
        let took = t.elapsed();
        eprintln!("{what}: closed after {took:?}");
        assert!(
            took >= Duration::from_secs(4) && took < Duration::from_secs(8),
            "{what}: closed after {took:?}, want about 5 s"
        );
        refused_one(what);
        // The port serves the next front-end right away.
        let t = Instant::now();
        let mut f = Front::connect(sh);
        assert!(f.answers(), "{what}: the next connection is served");
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "{what}: served at once"
        );
    }
    assert!(idle.answers(), "an idle connection stays served");
    drop(idle);
    // Fix B: more fds on one message than the protocol allows (32).
    let fds: Vec<OwnedFd> = (0..40).map(|_| eventfd()).collect();
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    for (what, req, body) in [
        ("40 fds on a header-only message", GET_FEATURES, vec![]),
        (
            "40 fds on SET_VRING_CALL",
            SET_VRING_CALL,
            0u64.to_le_bytes().to_vec(),
        ),
    ] {
        let mut f = Front::connect(sh);
        assert!(f.answers());
        f.0.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        f.send(req, &body, &raw);
        let t = Instant::now();
        assert!(f.closed_by_switch(), "{what}: closed");
        let took = t.elapsed();
        eprintln!("{what}: closed after {took:?}");
        assert!(
            took < Duration::from_secs(2),
            "{what}: closed after {took:?}"
        );
        refused_one(what);
    }
    drop(fds);
    // None of the fds that arrived is kept.
    let start = Instant::now();
    let mut grown = steady(&bed).growth(&before, SLACK);
    while !grown.is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        grown = steady(&bed).growth(&before, SLACK);
    }
    assert!(
        grown.is_empty(),
        "after the 40-fd messages: {grown:?}; now: {:?}",
        fd_targets(pid)
    );
    // 1000 reconnects, each negotiating a little.
    for i in 0..1000 {
        let mut f = Front::connect(sh);
        assert!(f.answers(), "reconnect {i}");
    }
    let after = assert_footprint_back(&bed, &before);
    assert_eq!(sw.protocol_errors("h"), refused);
    let runtime = thread_names(pid).iter().filter(|n| *n == "control").count();
    assert!(runtime <= 16, "tokio threads: {:?}", thread_names(pid));
    bed.check_rate_kept();
    let mut bed = bed;
    bed.lg.cmd("stop");
    let a = bed.sw.port("a").stats;
    let b = bed.sw.port("b").stats;
    assert!(a.rx_packets > 20_000, "the loop ran: {a:?}");
    assert_eq!(a.drops_total + b.drops_total, 0, "{a:?} {b:?}");
    eprintln!(
        "protocol attacks: {refused} refused; fds {} -> {}, RSS {} -> {} KiB; {:?}",
        before.fd_count(),
        after.fd_count(),
        before.rss_kib,
        after.rss_kib,
        t0.elapsed()
    );
}

/// A good frame from h to itself: it makes it through the ring (h's `rx_packets`) and is
/// then dropped as `same_port`, so it never reaches the loop.
fn to_h(len: usize) -> Vec<u8> {
    udp_frame(mac(MAC_H), mac(MAC_H), len, 7)
}

/// An Ethernet frame of `len` bytes (any length) from h to itself, not IP.
fn raw_to_h(len: usize) -> Vec<u8> {
    let mut f = mac(MAC_H).to_vec();
    f.extend_from_slice(&mac(MAC_H));
    f.extend_from_slice(&0x88b5u16.to_be_bytes());
    f.extend((0..len.saturating_sub(14)).map(|i| i as u8));
    f.truncate(len);
    f
}

/// A zero virtio-net header followed by `frame`.
fn with_hdr(frame: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; VNET_HDR];
    v.extend_from_slice(frame);
    v
}

/// Checks that the receive buffer at `addr`, `len` bytes used, holds a virtio-net
/// header and a broadcast from the loop guest's port a.
fn check_flooded(mem: &GuestMem, addr: u64, len: u32) {
    assert!(len as usize >= VNET_HDR + 14, "used length {len}");
    let f = mem.read(addr + VNET_HDR as u64, len as usize - VNET_HDR);
    assert_eq!(f[..6], mac(BROADCAST), "a broadcast: {:02x?}", &f[..14]);
    assert_eq!(f[6..12], mac(MAC_A), "from a: {:02x?}", &f[..14]);
}

/// A fresh connection to h runs `attack` on its transmit ring; once the switch has
/// completed every chain, h's counters must have moved by exactly `rx` frames and the
/// drops `want`, and the daemon and the loop must be fine.
fn tx_attack(
    bed: &Bed,
    what: &str,
    extra: u64,
    rx: Option<u64>,
    want: &[(&str, u64)],
    attack: impl FnOnce(&mut Guest),
) {
    let before = bed.h();
    let mut g = Guest::connect(&bed.sh, extra);
    attack(&mut g);
    g.tx_done();
    bed.expect_h(what, &before, rx, want);
    drop(g);
    bed.check_alive(what);
}

/// A well-behaved front-end: broadcasts from the loop guest's port a land in its
/// receive ring; a frame it sends to a is forwarded (no drop on h) and one it sends to b
/// reaches b and comes back: testpmd forwards what b receives out of a, as a broadcast
/// (what a receives goes out of b to a again, so a frame sent to a stays in that half of
/// the loop, where the test cannot tell it from the loop's own).
fn well_behaved(bed: &Bed) {
    let before = bed.h();
    let a_tx = bed.sw.port("a").stats.tx_packets;
    let mut g = Guest::connect(&bed.sh, F_MRG_RXBUF);
    let mut addr_of = std::collections::HashMap::new();
    let bufs = g.post_rx(64, 2048);
    addr_of.extend(bufs.iter().map(|&(h, a)| (u32::from(h), a)));
    wait_for(
        Duration::from_secs(5),
        "64 broadcasts in h's rx ring",
        || (g.rx.used_idx(&g.mem) == 64).then_some(()),
    );
    for ((id, len), (h, a)) in g.rx.take_used(&g.mem).into_iter().zip(&bufs) {
        assert_eq!(id, u32::from(*h), "buffers used in order");
        check_flooded(&g.mem, *a, len);
        let num_buffers = g.mem.read(*a + 10, 2);
        assert_eq!(num_buffers, [1, 0], "num_buffers");
    }
    g.send(&[0; VNET_HDR], &udp_frame(mac(MAC_H), mac(MAC_A), 100, 1));
    g.tx_done();
    bed.expect_h("a frame to a", &before, Some(1), &[]);
    assert!(bed.sw.port("a").stats.tx_packets > a_tx);
    // A frame with a payload of its own, to b.
    let marker = udp_frame(mac(MAC_H), mac(MAC_B), 200, 0x5a);
    g.send(&[0; VNET_HDR], &marker);
    g.tx_done();
    bed.expect_h("a frame to b", &before, Some(2), &[]);
    wait_for(Duration::from_secs(10), "the frame back from a", || {
        let mut found = false;
        for (id, len) in g.rx.take_used(&g.mem) {
            let f = g
                .mem
                .read(addr_of[&id] + VNET_HDR as u64, len as usize - VNET_HDR);
            found |= f.len() == marker.len() && f[12..] == marker[12..];
        }
        let free = QSIZE - g.rx.avail_idx().wrapping_sub(g.rx.used_idx(&g.mem));
        let more = g.post_rx(usize::from(free.min(64)), 2048);
        addr_of.extend(more.iter().map(|&(h, a)| (u32::from(h), a)));
        found.then_some(())
    });
    drop(g);
    bed.check_alive("well-behaved front-end");
}

/// Descriptor loops: NEXT cycles (two descriptors, one on itself) and cycles in an
/// indirect table run into the chain limit.
fn loops(bed: &Bed) {
    tx_attack(
        bed,
        "NEXT cycles",
        0,
        Some(0),
        &[("bad_descriptor", 2)],
        |g| {
            let b = with_hdr(&to_h(100));
            let a = g.tx_bytes(&b);
            let len = b.len() as u32;
            let d = g.tx.descs(3);
            let desc = |addr, len, next| Desc {
                addr,
                len,
                flags: NEXT,
                next,
            };
            g.tx.write_desc(&g.mem, d[0], desc(a, 60, d[1]));
            g.tx.write_desc(&g.mem, d[1], desc(a + 60, len - 60, d[0]));
            g.tx.write_desc(&g.mem, d[2], desc(a, len, d[2]));
            g.tx.publish(&g.mem, &[d[0], d[2]]);
        },
    );
    tx_attack(
        bed,
        "cycles in indirect tables",
        0,
        Some(0),
        &[("bad_descriptor", 2)],
        |g| {
            let b = with_hdr(&to_h(100));
            let a = g.tx_bytes(&b);
            let len = b.len() as u32;
            let t = g.tx_bytes(&[0; 32]);
            let e = |addr, len, next| Desc {
                addr,
                len,
                flags: NEXT,
                next,
            };
            write_table_entry(&g.mem, t, 0, e(a, 60, 1));
            write_table_entry(&g.mem, t, 1, e(a + 60, len - 60, 0));
            g.send_chain(&[Desc::new(t, 32, INDIRECT)]);
            let t = g.tx_bytes(&[0; 16]);
            write_table_entry(&g.mem, t, 0, e(a, len, 0));
            g.send_chain(&[Desc::new(t, 16, INDIRECT)]);
        },
    );
}

/// Chains longer than allowed: 65 descriptors (64 pass), an indirect table of 70;
/// more than MAX_CHAIN_BYTES (65535 + 18 + 12) in all (exactly that passes).
fn overlong(bed: &Bed) {
    // A chain of `n` descriptors of `piece` bytes each holding a header and a frame.
    let chain = |g: &mut Guest, pieces: &[u32]| {
        let total: u32 = pieces.iter().sum();
        let b = with_hdr(&raw_to_h(total as usize - VNET_HDR));
        let a = g.tx_bytes(&b);
        let mut at = a;
        let descs: Vec<Desc> = pieces
            .iter()
            .map(|&p| {
                let d = Desc::new(at, p, 0);
                at += u64::from(p);
                d
            })
            .collect();
        g.send_chain(&descs);
    };
    tx_attack(
        bed,
        "65 descriptors",
        0,
        Some(1),
        &[("bad_descriptor", 2), ("same_port", 1)],
        |g| {
            chain(g, &[16; 65]);
            chain(g, &[16; 64]);
            let b = with_hdr(&to_h(16 * 70 - VNET_HDR));
            let a = g.tx_bytes(&b);
            let t = g.tx_bytes(&[0; 16 * 70]);
            for k in 0..70u16 {
                let d = Desc {
                    addr: a + 16 * u64::from(k),
                    len: 16,
                    flags: if k < 69 { NEXT } else { 0 },
                    next: k + 1,
                };
                write_table_entry(&g.mem, t, k, d);
            }
            g.send_chain(&[Desc::new(t, 16 * 70, INDIRECT)]);
        },
    );
    tx_attack(
        bed,
        "more than MAX_CHAIN_BYTES",
        0,
        Some(1),
        &[("frame_too_big", 2), ("same_port", 1)],
        |g| {
            chain(g, &[40000, 40000]);
            chain(g, &[40000, 65565 - 40000]);
            chain(g, &[40000, 65566 - 40000]);
        },
    );
}

/// Indirect tables nested, with INDIRECT and NEXT together, of a bad length, outside
/// guest memory or across its end, with a `next` past their end.
fn bad_indirect(bed: &Bed) {
    tx_attack(
        bed,
        "nested indirect tables",
        0,
        Some(0),
        &[("bad_descriptor", 2)],
        |g| {
            let b = with_hdr(&to_h(100));
            let a = g.tx_bytes(&b);
            let t2 = g.tx_bytes(&[0; 16]);
            write_table_entry(&g.mem, t2, 0, Desc::new(a, b.len() as u32, 0));
            let t1 = g.tx_bytes(&[0; 16]);
            write_table_entry(&g.mem, t1, 0, Desc::new(t2, 16, INDIRECT));
            g.send_chain(&[Desc::new(t1, 16, INDIRECT)]);
            // INDIRECT with NEXT (send_chain adds NEXT to all but the last).
            g.send_chain(&[Desc::new(t2, 16, INDIRECT), Desc::new(a, b.len() as u32, 0)]);
        },
    );
    tx_attack(
        bed,
        "indirect tables of bad length or place",
        0,
        Some(0),
        &[("bad_descriptor", 5)],
        |g| {
            let b = with_hdr(&to_h(100));
            let a = g.tx_bytes(&b);
            let t = g.tx_bytes(&[0; 48]);
            write_table_entry(&g.mem, t, 0, Desc::new(a, b.len() as u32, 0));
            g.send_chain(&[Desc::new(t, 24, INDIRECT)]); // not a multiple of 16
            g.send_chain(&[Desc::new(t, 0, INDIRECT)]);
            g.send_chain(&[Desc::new(16 << 20, 32, INDIRECT)]); // outside memory
            g.send_chain(&[Desc::new(LO_SIZE - 16, 32, INDIRECT)]); // into the hole
            let t = g.tx_bytes(&[0; 32]);
            let d = Desc {
                addr: a,
                len: 60,
                flags: NEXT,
                next: 5,
            };
            write_table_entry(&g.mem, t, 0, d);
            g.send_chain(&[Desc::new(t, 32, INDIRECT)]); // next past the table
        },
    );
}

/// Buffers outside every region, across a region's end into the hole or past the top
/// of memory, at an address that wraps; huge lengths. A buffer in the second region
/// passes.
fn bad_addresses(bed: &Bed) {
    tx_attack(
        bed,
        "buffers outside guest memory",
        0,
        Some(1),
        &[("bad_descriptor", 6), ("same_port", 1)],
        |g| {
            let b = with_hdr(&to_h(100));
            let len = b.len() as u32;
            for addr in [
                16 << 20,              // above all memory
                LO_SIZE + (1 << 20),   // in the hole
                LO_SIZE - 50,          // region 0's end into the hole
                HI_GPA + HI_SIZE - 50, // region 1's end
                u64::MAX - 60,         // wraps
            ] {
                g.send_chain(&[Desc::new(addr, len, 0)]);
            }
            let a = g.tx_bytes(&b);
            g.send_chain(&[Desc::new(a, 30, 0), Desc::new(16 << 20, len - 30, 0)]);
            g.mem.write(HI_GPA + 0x1000, &b);
            g.send_chain(&[Desc::new(HI_GPA + 0x1000, len, 0)]);
        },
    );
    tx_attack(
        bed,
        "u32::MAX lengths",
        0,
        Some(0),
        &[("bad_descriptor", 4)],
        |g| {
            let b = with_hdr(&to_h(100));
            let a = g.tx_bytes(&b);
            g.send_chain(&[Desc::new(a, u32::MAX, 0)]);
            g.send_chain(&[Desc::new(a, 30, 0), Desc::new(a + 30, u32::MAX, 0)]);
            let t = g.tx_bytes(&[0; 16]);
            g.send_chain(&[Desc::new(t, 0xffff_fff0, INDIRECT)]);
            let t = g.tx_bytes(&[0; 16]);
            write_table_entry(&g.mem, t, 0, Desc::new(a, u32::MAX, 0));
            g.send_chain(&[Desc::new(t, 16, INDIRECT)]);
        },
    );
}

/// avail.idx far ahead of what the ring holds (more than its size past the switch's
/// position, or behind it): nothing is walked, each index is counted once as
/// bad_descriptor; the true index again: the chain is taken.
fn avail_jumps(bed: &Bed) {
    let before = bed.h();
    let mut g = Guest::connect(&bed.sh, 0);
    let b = with_hdr(&to_h(100));
    let a = g.tx_bytes(&b);
    let head = g.write_chain(&[Desc::new(a, b.len() as u32, 0)]);
    g.tx.write_avail_slot(&g.mem, 0, head);
    for (k, lie) in [1000u16, QSIZE + 1, 0xffff, 0x8000].into_iter().enumerate() {
        g.tx.set_avail_idx(&g.mem, lie);
        // One PMD polls every port's queues in turn: once it has moved another 2000
        // frames of the loop, it has looked at this ring many times.
        let n0 = loop_count(&bed.sw);
        wait_for(Duration::from_secs(5), "PMD rounds", || {
            (loop_count(&bed.sw) > n0 + 2000).then_some(())
        });
        assert_eq!(g.tx.used_idx(&g.mem), 0, "avail.idx {lie}: nothing used");
        // Each impossible index is counted once, however often the PMD looks.
        let seen = k as u64 + 1;
        bed.expect_h(
            &format!("avail.idx {lie}"),
            &before,
            Some(0),
            &[("bad_descriptor", seen)],
        );
    }
    g.tx.publish(&g.mem, &[head]);
    g.tx_done();
    bed.expect_h(
        "avail.idx true again",
        &before,
        Some(1),
        &[("bad_descriptor", 4), ("same_port", 1)],
    );
    drop(g);
    bed.check_alive("avail.idx jumps");
}

/// Heads ≥ the queue size.
fn bad_heads(bed: &Bed) {
    tx_attack(
        bed,
        "heads past the table",
        0,
        Some(1),
        &[("bad_descriptor", 3), ("same_port", 1)],
        |g| {
            g.tx.publish(&g.mem, &[QSIZE, QSIZE + 1, 0xffff]);
            g.send(&[0; VNET_HDR], &to_h(100));
        },
    );
}

/// Frames shorter than an Ethernet header, chains shorter than the virtio-net header;
/// exactly an Ethernet header passes.
fn runts(bed: &Bed) {
    tx_attack(
        bed,
        "runts",
        0,
        Some(1),
        &[("runt", 4), ("same_port", 1)],
        |g| {
            let f = to_h(60);
            g.send(&[0; VNET_HDR], &f[..10]);
            let a = g.tx_bytes(&[0; 8]);
            g.send_chain(&[Desc::new(a, 8, 0)]); // shorter than the header
            g.send_chain(&[Desc::new(a, 0, 0)]); // empty
            let b = with_hdr(&f[..13]);
            let a = g.tx_bytes(&b);
            g.send_chain(&[Desc::new(a, 12, 0), Desc::new(a + 12, 13, 0)]);
            g.send(&[0; VNET_HDR], &f[..14]);
        },
    );
}

/// Device-writable descriptors on the transmit ring (alone, after a readable one, in an
/// indirect table).
fn writable_on_tx(bed: &Bed) {
    tx_attack(
        bed,
        "write-only descriptors on tx",
        0,
        Some(0),
        &[("bad_descriptor", 3)],
        |g| {
            let b = with_hdr(&to_h(100));
            let a = g.tx_bytes(&b);
            let len = b.len() as u32;
            g.send_chain(&[Desc::new(a, len, WRITE)]);
            g.send_chain(&[Desc::new(a, 40, 0), Desc::new(a + 40, len - 40, WRITE)]);
            let t = g.tx_bytes(&[0; 16]);
            write_table_entry(&g.mem, t, 0, Desc::new(a, len, WRITE));
            g.send_chain(&[Desc::new(t, 16, INDIRECT)]);
        },
    );
}

/// Makes receive chains of `descs` each available (one writable chain per entry, as
/// given: flags are the test's), waits until the switch has used them all (the loop's
/// broadcasts keep coming), and returns the used elements.
fn rx_chains(g: &mut Guest, chains: &[Vec<Desc>]) -> Vec<(u32, u32)> {
    let mut heads = Vec::new();
    for c in chains {
        let idx = g.rx.descs(c.len());
        for (k, d) in c.iter().enumerate() {
            let mut d = *d;
            if k + 1 < c.len() {
                d.flags |= NEXT;
                d.next = idx[k + 1];
            }
            g.rx.write_desc(&g.mem, idx[k], d);
        }
        heads.push(idx[0]);
    }
    g.rx.publish(&g.mem, &heads);
    let want = g.rx.avail_idx();
    wait_for(Duration::from_secs(5), "the rx chains used", || {
        (g.rx.used_idx(&g.mem) == want).then_some(())
    });
    let used = g.rx.take_used(&g.mem);
    let ids: Vec<u32> = used.iter().map(|&(id, _)| id).collect();
    let heads: Vec<u32> = heads.into_iter().map(u32::from).collect();
    assert_eq!(ids, heads, "used in order");
    used
}

/// Receive chains the switch cannot write into: read-only, too small for the header
/// (mergeable buffers), outside guest memory, across a region's end. Each is returned
/// empty and counted once; good buffers after them are filled.
fn bad_rx_chains(bed: &Bed) {
    for (what, extra) in [("plain", 0), ("mergeable", F_MRG_RXBUF)] {
        let before = bed.h();
        let mut g = Guest::connect(&bed.sh, extra);
        let mut bad = Vec::new();
        for _ in 0..8 {
            let a = g.rx.alloc(2048);
            bad.push(vec![Desc::new(a, 2048, 0)]); // read-only
        }
        let a = g.rx.alloc(2048);
        bad.push(vec![Desc::new(a, 100, WRITE), Desc::new(a + 100, 100, 0)]);
        bad.push(vec![Desc::new(16 << 20, 2048, WRITE)]);
        bad.push(vec![Desc::new(LO_SIZE - 100, 2048, WRITE)]);
        bad.push(vec![Desc::new(a, 0, WRITE)]); // empty
        if extra & F_MRG_RXBUF != 0 {
            for _ in 0..4 {
                let a = g.rx.alloc(64);
                bad.push(vec![Desc::new(a, 4, WRITE)]); // smaller than the header
            }
        }
        let n = bad.len() as u64;
        for (id, len) in rx_chains(&mut g, &bad) {
            assert_eq!(len, 0, "{what}: chain {id} returned empty");
        }
        let what = format!("bad rx chains ({what})");
        bed.expect_h(&what, &before, Some(0), &[("bad_descriptor", n)]);
        let good = g.post_rx(8, 2048);
        let want = g.rx.avail_idx();
        wait_for(Duration::from_secs(5), "good rx buffers used", || {
            (g.rx.used_idx(&g.mem) == want).then_some(())
        });
        for ((id, len), (h, a)) in g.rx.take_used(&g.mem).into_iter().zip(&good) {
            assert_eq!(id, u32::from(*h));
            check_flooded(&g.mem, *a, len);
        }
        bed.expect_h(&what, &before, Some(0), &[("bad_descriptor", n)]);
        drop(g);
        bed.check_alive(&what);
    }
}

/// Mergeable receive buffers of 32 bytes: each frame spans several, num_buffers says
/// how many, and the pieces make the frame.
fn small_mergeable_buffers(bed: &Bed) {
    let before = bed.h();
    let mut g = Guest::connect(&bed.sh, F_MRG_RXBUF);
    let bufs = g.post_rx(64, 32);
    let first = wait_for(Duration::from_secs(5), "a frame in 32-byte buffers", || {
        let used = g.rx.used_idx(&g.mem);
        let n = u16::from_le_bytes(g.mem.read(bufs[0].1 + 10, 2).try_into().unwrap());
        (used >= 2 && used >= n).then_some(n)
    });
    assert!(first >= 2, "num_buffers {first}");
    let mut bytes = Vec::new();
    for k in 0..first {
        let (id, len) = g.rx.used_elem(&g.mem, k);
        let (h, a) = bufs[usize::from(k)];
        assert_eq!(id, u32::from(h));
        assert!(len <= 32);
        bytes.extend(g.mem.read(a, len as usize));
    }
    let f = &bytes[VNET_HDR..];
    assert_eq!(f[..6], mac(BROADCAST));
    assert_eq!(f[6..12], mac(MAC_A));
    bed.expect_h("32-byte mergeable buffers", &before, Some(0), &[]);
    drop(g);
    bed.check_alive("32-byte mergeable buffers");
}

/// Receive buffers too small for a frame, without mergeable buffers: the frames are
/// dropped as frame_too_big (one per frame flooded to h meanwhile, so the amount is
/// only known to be at least one), and the buffers stay where they are. (Two buffers:
/// with only one, the switch looks for a second before it judges the first too small,
/// and counts no_rx_buffer.)
fn small_plain_buffers(bed: &Bed) {
    let before = bed.h();
    let big0 = before.stats.drops["frame_too_big"];
    let mut g = Guest::connect(&bed.sh, 0);
    g.post_rx(2, 20);
    wait_for(Duration::from_secs(5), "frame_too_big on h", || {
        (bed.h().stats.drops["frame_too_big"] > big0).then_some(())
    });
    assert_eq!(g.rx.used_idx(&g.mem), 0, "the small buffers are not used");
    let h = bed.h();
    assert_eq!(
        h.stats.drops["bad_descriptor"],
        before.stats.drops["bad_descriptor"]
    );
    drop(g);
    bed.check_alive("20-byte receive buffers");
}

/// The receive ring's avail.idx far ahead: nothing written, the frames counted as
/// bad_descriptor (at least one: as many as were flooded to h meanwhile); the true
/// index again: the buffers are filled.
fn rx_avail_jump(bed: &Bed) {
    let before = bed.h();
    let bad0 = before.stats.drops["bad_descriptor"];
    let mut g = Guest::connect(&bed.sh, 0);
    let mut bufs = Vec::new();
    for k in 0..8u16 {
        let a = g.rx.alloc(2048);
        let i = g.rx.descs(1)[0];
        g.rx.write_desc(&g.mem, i, Desc::new(a, 2048, WRITE));
        g.rx.write_avail_slot(&g.mem, k, i);
        bufs.push((i, a));
    }
    g.rx.set_avail_idx(&g.mem, 1000);
    wait_for(Duration::from_secs(5), "bad_descriptor on h", || {
        (bed.h().stats.drops["bad_descriptor"] > bad0).then_some(())
    });
    assert_eq!(g.rx.used_idx(&g.mem), 0, "nothing written");
    let heads: Vec<u16> = bufs.iter().map(|&(h, _)| h).collect();
    g.rx.publish(&g.mem, &heads);
    wait_for(Duration::from_secs(5), "the buffers filled", || {
        (g.rx.used_idx(&g.mem) == 8).then_some(())
    });
    for ((id, len), (h, a)) in g.rx.take_used(&g.mem).into_iter().zip(&bufs) {
        assert_eq!(id, u32::from(*h));
        check_flooded(&g.mem, *a, len);
    }
    let h = bed.h();
    assert_eq!(h.stats.rx_packets, before.stats.rx_packets);
    drop(g);
    bed.check_alive("rx avail.idx jump");
}

/// Hostile virtio-net headers on frames from h (to itself): each is dropped as
/// bad_offload.
fn bad_vnet_headers(bed: &Bed) {
    let tcp = |len| tcp4_frame(mac(MAC_H), mac(MAC_H), len);
    let h = |flags, gso_type, hdr_len, gso_size, csum_start, csum_offset| VirtioNetHdr {
        flags,
        gso_type,
        hdr_len,
        gso_size,
        csum_start,
        csum_offset,
    };
    let tso = F_CSUM | F_HOST_TSO4;
    let cases = [
        (
            "TCPV4 GSO without HOST_TSO4",
            F_CSUM,
            h(NEEDS_CSUM, GSO_TCPV4, 54, 1448, 34, 16),
            3000,
        ),
        (
            "gso_size 1 on a 60 KB frame",
            tso,
            h(NEEDS_CSUM, GSO_TCPV4, 54, 1, 34, 16),
            60_000,
        ),
        (
            "csum_start past the frame",
            F_CSUM,
            h(NEEDS_CSUM, GSO_NONE, 0, 0, 5000, 16),
            100,
        ),
        (
            "csum_offset past the frame",
            F_CSUM,
            h(NEEDS_CSUM, GSO_NONE, 0, 0, 34, 2000),
            100,
        ),
        (
            "hdr_len past the frame",
            tso,
            h(NEEDS_CSUM, GSO_TCPV4, 4000, 1448, 34, 16),
            3000,
        ),
        (
            "gso_type UDP",
            tso,
            h(NEEDS_CSUM, GSO_UDP, 42, 1000, 34, 6),
            3000,
        ),
        (
            "TCPV6 GSO without HOST_TSO6",
            tso,
            h(NEEDS_CSUM, GSO_TCPV6, 74, 1400, 54, 16),
            3000,
        ),
        ("gso_type 2", tso, h(NEEDS_CSUM, 2, 54, 1448, 34, 16), 3000),
        ("gso_type 7", tso, h(NEEDS_CSUM, 7, 54, 1448, 34, 16), 3000),
        (
            "gso_type 0x7f",
            tso,
            h(NEEDS_CSUM, 0x7f, 54, 1448, 34, 16),
            3000,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, features, hdr, len) in cases {
        let before = bed.h();
        let mut g = Guest::connect(&bed.sh, features);
        g.send(&hdr.to_bytes(), &tcp(len));
        g.tx_done();
        if let Err(e) = bed.try_expect_h(what, &before, None, &[("bad_offload", 1)]) {
            wrong.push(e);
        }
        drop(g);
        bed.check_alive(what);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// SET_MEM_TABLE with a new memfd (a copy of the old memory), 20 times, while frames
/// flow both ways: every frame sent is taken, and after the last swap the receive ring
/// is filled in the new memory.
fn mem_table_swaps(bed: &Bed) {
    const SWAPS: u64 = 20;
    const PER_SWAP: u64 = 8;
    let before = bed.h();
    let mut g = Guest::connect(&bed.sh, 0);
    for _ in 0..SWAPS {
        g.post_rx(PER_SWAP as usize, 2048);
        for _ in 0..PER_SWAP {
            g.send(&[0; VNET_HDR], &to_h(100));
        }
        g.swap_memory();
    }
    // Used elements the switch wrote into an older copy after it was copied are not in
    // the new memory, but the next burst publishes the switch's used index there: one
    // more frame, and the used index covers them all.
    g.send(&[0; VNET_HDR], &to_h(100));
    g.tx_done();
    let n = SWAPS * PER_SWAP + 1;
    bed.expect_h("mem-table swaps", &before, Some(n), &[("same_port", n)]);
    // Fresh receive buffers are used after all the older ones: those are checked.
    let fresh = g.post_rx(8, 2048);
    let want = g.rx.avail_idx();
    wait_for(Duration::from_secs(5), "fresh rx buffers used", || {
        (g.rx.used_idx(&g.mem) == want).then_some(())
    });
    for (k, (h, a)) in fresh.iter().enumerate() {
        let (id, len) = g.rx.used_elem(&g.mem, want - 8 + k as u16);
        assert_eq!(id, u32::from(*h));
        check_flooded(&g.mem, *a, len);
    }
    let delivered = bed.h().stats.tx_packets - before.stats.tx_packets;
    assert!(delivered >= SWAPS * PER_SWAP + 8, "delivered {delivered}");
    drop(g);
    bed.check_alive("mem-table swaps");
}

/// Ring attacks, each on a fresh connection to h, while the loop guest sends every frame
/// out of a as a broadcast (so h's receive ring always has frames coming): each is
/// counted under its reason on h, the daemon and the loop are fine after each, and at
/// the end nothing is left behind.
#[test]
fn hostile_rings_are_counted_and_leave_nothing_behind() {
    let _g = serial();
    let t0 = Instant::now();
    let bed = Bed::start("hrings", BROADCAST, &[]);
    let before = steady(&bed);
    well_behaved(&bed);
    loops(&bed);
    overlong(&bed);
    bad_indirect(&bed);
    bad_addresses(&bed);
    avail_jumps(&bed);
    bad_heads(&bed);
    runts(&bed);
    writable_on_tx(&bed);
    bad_rx_chains(&bed);
    small_mergeable_buffers(&bed);
    small_plain_buffers(&bed);
    rx_avail_jump(&bed);
    mem_table_swaps(&bed);
    ring_attacks_left_nothing(bed, &before, "ring attacks", t0);
}

/// The ring attacks on packed virtqueues (virtio 1.2 §2.8): a raw front-end negotiates
/// RING_PACKED on h and writes the descriptor ring itself. Each malformed chain is
/// counted under its reason and returned (the used position moves past it); a good
/// front-end's frames cross the wrap of the ring; an impossible ring position is
/// counted and read as an empty ring. The loop keeps its rate, and the daemon's
/// footprint is back where it was at the end.
#[test]
fn hostile_packed_rings_are_counted_and_leave_nothing_behind() {
    let _g = serial();
    let t0 = Instant::now();
    let bed = Bed::start("hpacked", BROADCAST, &[]);
    let before = steady(&bed);
    packed_well_behaved(&bed);
    packed_tx_attacks(&bed);
    packed_bad_rx_chains(&bed);
    packed_bad_base(&bed);
    ring_attacks_left_nothing(bed, &before, "packed ring attacks", t0);
}

/// The end of a run of ring attacks: the daemon's footprint back to `before`, no
/// protocol error on h, the loop at its rate and without a drop.
fn ring_attacks_left_nothing(mut bed: Bed, before: &Footprint, what: &str, t0: Instant) {
    let after = assert_footprint_back(&bed, before);
    assert_eq!(
        bed.sw.protocol_errors("h"),
        0,
        "no ring attack is a protocol error"
    );
    bed.check_rate_kept();
    bed.lg.cmd("stop");
    let a = bed.sw.port("a").stats;
    let b = bed.sw.port("b").stats;
    assert_eq!(a.drops_total + b.drops_total, 0, "{a:?} {b:?}");
    eprintln!(
        "{what}: fds {} -> {}, RSS {} -> {} KiB; {:?}",
        before.fd_count(),
        after.fd_count(),
        before.rss_kib,
        after.rss_kib,
        t0.elapsed()
    );
}

/// A well-behaved packed front-end: five rounds of 64 receive buffers (320 positions:
/// the ring of 256 wraps) are filled with the loop's broadcasts in order, and its own
/// frames, one per round, are taken.
fn packed_well_behaved(bed: &Bed) {
    let before = bed.h();
    let mut g = PackedGuest::connect(&bed.sh, F_MRG_RXBUF);
    for round in 0..5 {
        let bufs = g.post_rx(64, 2048);
        let used =
            g.rx.wait_all_used(&g.mem, "64 broadcasts in h's packed rx ring");
        assert_eq!(used.len(), 64, "round {round}");
        for ((id, len), (want, a)) in used.into_iter().zip(&bufs) {
            assert_eq!(id, *want, "round {round}: buffers used in order");
            check_flooded(&g.mem, *a, len);
            assert_eq!(g.mem.read(*a + 10, 2), [1, 0], "num_buffers");
        }
        g.send(&[0; VNET_HDR], &to_h(100 + round));
        g.tx_done();
    }
    bed.expect_h("packed front-end", &before, Some(5), &[("same_port", 5)]);
    drop(g);
    bed.check_alive("well-behaved packed front-end");
}

/// A fresh packed connection to h runs `attack` on its transmit ring; once every chain
/// came back, h's counters must have moved by exactly `rx` frames and the drops `want`.
fn packed_tx_attack(
    bed: &Bed,
    what: &str,
    rx: u64,
    want: &[(&str, u64)],
    attack: impl FnOnce(&mut PackedGuest),
) {
    let before = bed.h();
    let mut g = PackedGuest::connect(&bed.sh, 0);
    attack(&mut g);
    g.tx_done();
    bed.expect_h(what, &before, Some(rx), want);
    drop(g);
    bed.check_alive(what);
}

/// Malformed transmit chains on a packed ring, each followed by a good frame.
fn packed_tx_attacks(bed: &Bed) {
    let frame = with_hdr(&to_h(100));
    let len = frame.len() as u32;
    packed_tx_attack(
        bed,
        "packed: a chain through the whole ring, and one of 70 descriptors",
        1,
        &[("bad_descriptor", 2), ("same_port", 1)],
        |g| {
            let a = g.tx_bytes(&frame);
            let all: Vec<Desc> = (0..QSIZE).map(|_| Desc::new(a, 1, NEXT)).collect();
            g.send_raw(&all);
            // It fills the ring: the slots are the driver's again once it came back.
            g.tx_done();
            let long: Vec<Desc> = (0..70).map(|i| Desc::new(a + i, 1, 0)).collect();
            g.send_chain(&long);
            g.send(&[0; VNET_HDR], &to_h(100));
        },
    );
    packed_tx_attack(
        bed,
        "packed: bad indirect tables",
        2,
        &[("bad_descriptor", 6), ("same_port", 2)],
        |g| {
            let a = g.tx_bytes(&frame);
            let t = g.tx_bytes(&[0; 16 * 65]);
            write_packed_entry(&g.mem, t, 0, Desc::new(t, 16, INDIRECT));
            g.send_chain(&[Desc::new(t, 16, INDIRECT)]); // nested
            g.send_chain(&[Desc::new(t, 10, INDIRECT)]); // not a multiple of 16
            g.send_chain(&[Desc::new(t, 0, INDIRECT)]); // empty
            g.send_chain(&[Desc::new(16 << 20, 32, INDIRECT)]); // outside memory
            g.send_raw(&[Desc::new(t, 16, INDIRECT | NEXT), Desc::new(a, len, 0)]);
            let big = g.tx_bytes(&[0; 16 * 65]);
            for i in 0..65 {
                write_packed_entry(&g.mem, big, i, Desc::new(a, 1, 0));
            }
            g.send_chain(&[Desc::new(big, 16 * 65, INDIRECT)]); // 65 entries
                                                                // A good table whose entries carry WRITE, as DPDK leaves them: read.
            let good = g.tx_bytes(&[0; 32]);
            write_packed_entry(&g.mem, good, 0, Desc::new(a, 12, WRITE));
            write_packed_entry(&g.mem, good, 1, Desc::new(a + 12, len - 12, WRITE | NEXT));
            g.send_chain(&[Desc::new(good, 32, INDIRECT)]);
            g.send(&[0; VNET_HDR], &to_h(100));
        },
    );
    packed_tx_attack(
        bed,
        "packed: bad addresses and directions",
        1,
        &[("bad_descriptor", 5), ("same_port", 1)],
        |g| {
            let a = g.tx_bytes(&frame);
            g.send_chain(&[Desc::new(16 << 20, len, 0)]); // outside memory
            g.send_chain(&[Desc::new(LO_SIZE - 50, len, 0)]); // across a region's end
            g.send_chain(&[Desc::new(LO_SIZE + 4096, len, 0)]); // in the hole
            g.send_chain(&[Desc::new(a, len, WRITE)]); // device-writable
            g.send_chain(&[Desc::new(a, 40, 0), Desc::new(a + 40, len - 40, WRITE)]);
            g.send(&[0; VNET_HDR], &to_h(100));
        },
    );
    packed_tx_attack(
        bed,
        "packed: runts",
        1,
        &[("runt", 3), ("same_port", 1)],
        |g| {
            let f = to_h(60);
            g.send(&[0; VNET_HDR], &f[..10]);
            let a = g.tx_bytes(&[0; 8]);
            g.send_chain(&[Desc::new(a, 8, 0)]);
            g.send_chain(&[Desc::new(a, 0, 0)]);
            g.send(&[0; VNET_HDR], &f);
        },
    );
}

/// Receive chains the switch cannot write into (read-only, outside memory, across a
/// region's end, a nested indirect table): each is returned empty and counted; good
/// buffers after them are filled.
fn packed_bad_rx_chains(bed: &Bed) {
    let before = bed.h();
    let mut g = PackedGuest::connect(&bed.sh, F_MRG_RXBUF);
    let a = g.rx.alloc(2048);
    let t = g.rx.alloc(16);
    write_packed_entry(&g.mem, t, 0, Desc::new(t, 16, INDIRECT));
    let bad = vec![
        vec![Desc::new(a, 2048, 0)],
        vec![Desc::new(a, 100, WRITE), Desc::new(a + 100, 100, 0)],
        vec![Desc::new(16 << 20, 2048, WRITE)],
        vec![Desc::new(LO_SIZE - 100, 2048, WRITE)],
        vec![Desc::new(t, 16, INDIRECT)],
    ];
    let n = bad.len() as u64;
    g.rx_chains(&bad);
    let good = g.post_rx(8, 2048);
    let used = g.rx.wait_all_used(&g.mem, "the packed rx chains used");
    assert_eq!(used.len(), bad.len() + good.len());
    for &(id, len) in &used[..bad.len()] {
        assert_eq!(len, 0, "bad chain {id} returned empty");
    }
    for ((id, len), (want, a)) in used[bad.len()..].iter().zip(&good) {
        assert_eq!(id, want);
        check_flooded(&g.mem, *a, *len);
    }
    bed.expect_h(
        "bad packed rx chains",
        &before,
        Some(0),
        &[("bad_descriptor", n)],
    );
    drop(g);
    bed.check_alive("bad packed rx chains");
}

/// SET_VRING_BASE with a slot past the ring's end: the transmit ring reads as empty
/// (counted once), nothing is walked, and the connection stays.
fn packed_bad_base(bed: &Bed) {
    let before = bed.h();
    let mut g = PackedGuest::connect_at(&bed.sh, 0, u32::from(QSIZE + 3) | 1 << 15);
    g.send(&[0; VNET_HDR], &to_h(100));
    wait_for(
        Duration::from_secs(5),
        "the impossible position counted",
        || {
            let d = bed.h().stats.drops["bad_descriptor"] - before.stats.drops["bad_descriptor"];
            (d > 0).then_some(())
        },
    );
    std::thread::sleep(Duration::from_millis(200));
    bed.expect_h(
        "impossible packed base",
        &before,
        Some(0),
        &[("bad_descriptor", 1)],
    );
    assert!(g.front.answers(), "the connection stays");
    drop(g);
    bed.check_alive("impossible packed base");
}

/// Hostile virtio-net headers, each on a fresh connection to h beside the running loop:
/// each frame is dropped and counted as bad_offload on h.
#[test]
fn hostile_vnet_headers_are_dropped_as_bad_offload() {
    let _g = serial();
    let bed = Bed::start("hvnet", MAC_B, &[]);
    bad_vnet_headers(&bed);
    assert_eq!(bed.sw.protocol_errors("h"), 0);
    bed.check_rate_kept();
    let mut bed = bed;
    bed.lg.cmd("stop");
    let a = bed.sw.port("a").stats;
    let b = bed.sw.port("b").stats;
    assert_eq!(a.drops_total + b.drops_total, 0, "{a:?} {b:?}");
}

/// The front-end truncates the memfd behind its guest memory after SET_MEM_TABLE (the
/// upper region's backing is cut off), then posts receive buffers there while the loop
/// floods broadcasts to h: the switch's copy into them faults (SIGBUS), which is
/// contained: the daemon lives, the connection is closed within seconds and counted as
/// a protocol error, h serves the next front-end, the loop keeps its rate, and nothing
/// is left behind.
#[test]
fn truncated_guest_memory_is_contained() {
    let _g = serial();
    let bed = Bed::start("htrunc", BROADCAST, &[]);
    let before = steady(&bed);
    let errors = bed.sw.protocol_errors("h");
    let mut g = Guest::connect(&bed.sh, 0);
    // Cut the file at the end of the lower region: the upper one (8 MiB + 1 MiB of guest
    // memory) has no pages behind it any more. Rings and descriptors stay in the lower.
    // SAFETY: ftruncate on the test's own memfd.
    let cut = unsafe { libc::ftruncate(g.mem.fd.as_raw_fd(), LO_SIZE as i64) };
    assert_eq!(cut, 0);
    let chains: Vec<Vec<Desc>> = (0..16)
        .map(|k| vec![Desc::new(HI_GPA + k * 4096, 2048, WRITE)])
        .collect();
    let mut heads = Vec::new();
    for c in &chains {
        let idx = g.rx.descs(1);
        g.rx.write_desc(&g.mem, idx[0], c[0]);
        heads.push(idx[0]);
    }
    g.rx.publish(&g.mem, &heads);
    g.rx.kick();
    let start = Instant::now();
    assert!(
        wait_for(Duration::from_secs(10), "h's connection closed", || {
            (bed.sw.protocol_errors("h") > errors).then_some(true)
        }),
        "counted"
    );
    eprintln!("faulted connection closed after {:?}", start.elapsed());
    assert!(
        g.front.closed_by_switch(),
        "the switch closed the connection"
    );
    drop(g);
    bed.check_alive("truncated memory");
    // The next front-end is served and receives the loop's broadcasts.
    let mut g = Guest::connect(&bed.sh, 0);
    let posted = g.post_rx(4, 2048);
    let want = g.rx.avail_idx();
    wait_for(
        Duration::from_secs(5),
        "a new connection's buffers filled",
        || (g.rx.used_idx(&g.mem) == want).then_some(()),
    );
    for (k, (_, a)) in posted.iter().enumerate() {
        let (_, len) = g.rx.used_elem(&g.mem, want - 4 + k as u16);
        check_flooded(&g.mem, *a, len);
    }
    drop(g);
    assert_footprint_back(&bed, &before);
    bed.check_rate_kept();
    assert!(
        bed.sw.log().contains("guest memory vanished"),
        "the log names the cause"
    );
    let mut bed = bed;
    bed.lg.cmd("stop");
    let a = bed.sw.port("a").stats;
    let b = bed.sw.port("b").stats;
    assert_eq!(a.drops_total + b.drops_total, 0, "{a:?} {b:?}");
}

/// The hugepage backing of a DPDK guest is removed under the switch: the guest's
/// hugetlbfs file (DPDK's `--single-file-segments` map, which holds its rings and
/// buffers) is truncated to nothing while the switch polls its rings. The switch's
/// next access faults; the fault is contained (a hugetlbfs page is replaced whole), the
/// connection is closed and counted, and the daemon, the loop and the port live on.
#[test]
fn removed_hugepage_backing_is_contained() {
    let _g = serial();
    let bed = Bed::start("hhuge", MAC_B, &[]);
    let errors = bed.sw.protocol_errors("h");
    let prefix = "vshhugeg";
    let peer = format!("--eth-peer=0,{MAC_H}");
    let mut g = Testpmd::start(GuestSpec {
        prefix,
        socket: &bed.sh,
        mac: MAC_H,
        queues: 1,
        server: false,
        extra_vdevs: &[],
        queue_size: None,
        packed: false,
        args: &["--forward-mode=txonly", &peer],
    });
    g.cmd("start");
    wait_for(Duration::from_secs(20), "h's frames taken", || {
        (bed.h().stats.rx_packets > 10_000).then_some(())
    });
    // The guest stops touching its memory (its forwarding core idles at the prompt);
    // the switch goes on polling its rings.
    g.cmd("stop");
    let maps: Vec<std::path::PathBuf> = std::fs::read_dir("/dev/hugepages")
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{prefix}map_")))
        })
        .collect();
    assert!(!maps.is_empty(), "the guest's hugepage files");
    for m in &maps {
        let f = std::fs::OpenOptions::new().write(true).open(m).unwrap();
        f.set_len(0).unwrap();
    }
    let start = Instant::now();
    wait_for(Duration::from_secs(10), "h's connection closed", || {
        (bed.sw.protocol_errors("h") > errors).then_some(())
    });
    eprintln!("faulted connection closed after {:?}", start.elapsed());
    assert!(bed.sw.log().contains("guest memory vanished"));
    g.kill9();
    bed.check_alive("hugepages removed");
    bed.check_rate_kept();
    // h serves the next front-end.
    let mut f = Front::connect(&bed.sh);
    assert!(f.answers());
    drop(f);
    let mut bed = bed;
    bed.lg.cmd("stop");
    let a = bed.sw.port("a").stats;
    let b = bed.sw.port("b").stats;
    assert_eq!(a.drops_total + b.drops_total, 0, "{a:?} {b:?}");
}
