//! Live migration's vhost-user side against raw front-ends: the dirty log marks exactly
//! the pages vswitchd writes, bad logs are refused without harm, and SEND_RARP moves a
//! MAC at once and floods the announcement.

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use common::hostile::{
    log_base_body, memfd, Front, Guest, F_LOG_ALL, F_PROTOCOL_FEATURES, F_VERSION_1, GET_FEATURES,
    GET_PROTOCOL_FEATURES, NEED_REPLY, PF_LOG_SHMFD, PF_RARP, PF_REPLY_ACK, SEND_RARP,
    SET_FEATURES, SET_LOG_BASE, SET_LOG_FD, SET_MEM_TABLE, SET_OWNER, SET_PROTOCOL_FEATURES,
    VERSION_1, VNET_HDR,
};
use common::{serial, start_ab, udp_frame, wait_for, TempDir, Vswitchd};

/// Guest-physical end of the raw guests' memory (region 1 ends at 9 MiB): a log needs
/// 9 MiB / 4 KiB / 8 = 288 bytes.
const MEM_END: u64 = (8 << 20) + (1 << 20);
const LOG_BYTES: u64 = MEM_END / 4096 / 8;

/// The log's bytes, read from its memfd.
fn log_bytes(log: &OwnedFd) -> Vec<u8> {
    let mut b = vec![0u8; LOG_BYTES as usize];
    // SAFETY: pread(2) into our own buffer of that length, from our own fd.
    let n = unsafe { libc::pread(log.as_raw_fd(), b.as_mut_ptr().cast(), b.len(), 0) };
    assert_eq!(n, b.len() as isize);
    b
}

fn marked(log: &[u8], gpa: u64) -> bool {
    let p = gpa / 4096;
    log[(p / 8) as usize] & (1 << (p % 8)) != 0
}

/// The pages marked in `log`, ascending.
fn marked_pages(log: &[u8]) -> Vec<u64> {
    (0..log.len() as u64 * 8)
        .filter(|&p| log[(p / 8) as usize] & (1 << (p % 8)) != 0)
        .collect()
}

fn clear(log: &OwnedFd) {
    let z = vec![0u8; LOG_BYTES as usize];
    // SAFETY: pwrite(2) of our own buffer to our own fd.
    let n = unsafe { libc::pwrite(log.as_raw_fd(), z.as_ptr().cast(), z.len(), 0) };
    assert_eq!(n, z.len() as isize);
}

const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa1];
const BCAST: [u8; 6] = [0xff; 6];

/// Sends `n` broadcast frames from `a`; waits until `b` received them.
fn flood(a: &mut Guest, b: &Guest, n: usize, len: usize) {
    let want = b.rx.used_idx(&b.mem).wrapping_add(n as u16);
    for k in 0..n {
        a.send(&[0; VNET_HDR], &udp_frame(SRC, BCAST, len, k as u8));
    }
    a.tx_done();
    wait_for(Duration::from_secs(5), "frames delivered to b", || {
        (b.rx.used_idx(&b.mem) == want).then_some(())
    });
}

/// `show`'s migration object of `port`, awaited: the switch publishes a connection to
/// `show` just after the backend starts serving it, so a driver's replies can come
/// before the connection is shown.
fn migration_of(sw: &Vswitchd, port: &str) -> serde_json::Value {
    wait_for(Duration::from_secs(5), "the connection shown", || {
        let m = sw.show_port(port)["migration"].clone();
        (!m.is_null()).then_some(m)
    })
}

/// Port b logs (VHOST_F_LOG_ALL, a shared memfd log, the used rings' log addresses):
/// four page-sized receive buffers of eight get frames, and exactly their pages and
/// the receive ring's used ring are marked; `show` reports the logging and the pages.
/// A replacement log gets the marks the old one no longer does. After LOG_ALL is
/// cleared, deliveries mark nothing.
#[test]
fn the_dirty_log_marks_exactly_what_the_switch_writes() {
    let _g = serial();
    let dir = TempDir::new("dlog");
    let (sw, sa, sb) = start_ab(&dir, "vhost-user", "");
    let mut a = Guest::connect(&sa, 0);
    let mut b = Guest::connect_with(&sb, 0, PF_LOG_SHMFD);
    let log = memfd(LOG_BYTES);
    b.start_logging(log.as_raw_fd(), LOG_BYTES);
    let m = migration_of(&sw, "b");
    assert_eq!(m["logging"], true, "{m}");
    // Each buffer is one page of the receive arena (page-aligned, 4096 bytes).
    let bufs = b.post_rx(8, 4096);
    clear(&log);
    flood(&mut a, &b, 4, 1000);
    let l = log_bytes(&log);
    for (k, &(_, addr)) in bufs.iter().enumerate() {
        assert_eq!(marked(&l, addr), k < 4, "buffer {k} at {addr:#x}");
    }
    assert!(marked(&l, b.rx.used_gpa()), "b's receive used ring");
    // Nothing else: the buffers' pages and the used ring's page, and b's transmit used
    // ring if the PMD armed kicks meanwhile (it writes `avail_event` there before it
    // sleeps).
    let mut want: Vec<u64> = bufs[..4].iter().map(|&(_, addr)| addr / 4096).collect();
    want.push(b.rx.used_gpa() / 4096);
    let got: Vec<u64> = marked_pages(&l)
        .into_iter()
        .filter(|&p| p != b.tx.used_gpa() / 4096)
        .collect();
    want.sort_unstable();
    assert_eq!(got, want, "pages marked (tx used ring's page aside)");
    let m = migration_of(&sw, "b");
    assert!(m["pages_marked"].as_u64().unwrap() >= 5, "{m}");
    // Frames b sends: its transmit used ring is marked (and only that).
    clear(&log);
    b.send(
        &[0; VNET_HDR],
        &udp_frame([0x02, 0, 0, 0, 0, 0xb1], BCAST, 200, 1),
    );
    b.tx_done();
    let l = log_bytes(&log);
    assert!(marked(&l, b.tx.used_gpa()), "b's transmit used ring");
    let total: u32 = l.iter().map(|x| x.count_ones()).sum();
    assert_eq!(total, 1, "pages marked: {total}");
    // A new log in place of the first (QEMU's resize): deliveries mark the new one
    // only, and the show counts both logs.
    let log2 = memfd(LOG_BYTES);
    b.set_log_base(log2.as_raw_fd(), LOG_BYTES);
    clear(&log);
    // The four buffers still posted get these frames.
    flood(&mut a, &b, 4, 1000);
    let l2 = log_bytes(&log2);
    for &(_, addr) in &bufs[4..] {
        assert!(marked(&l2, addr), "buffer at {addr:#x} in the new log");
    }
    assert!(
        log_bytes(&log).iter().all(|&x| x == 0),
        "marks in the replaced log"
    );
    assert_eq!(migration_of(&sw, "b")["logs_set"], 2);
    // Logging off: nothing more is marked.
    b.stop_logging();
    assert_eq!(migration_of(&sw, "b")["logging"], false);
    clear(&log2);
    b.post_rx(4, 4096);
    flood(&mut a, &b, 4, 1000);
    assert!(
        log_bytes(&log2).iter().all(|&x| x == 0),
        "marks after logging stopped"
    );
}

/// A front-end that negotiates LOG_SHMFD (and RARP) and shares the raw guests' memory
/// table, acked; its requests are then sent raw.
fn negotiated(path: &std::path::Path, proto: u64) -> (Front, common::hostile::GuestMem) {
    let mut f = Front::connect(path);
    f.get_u64(GET_FEATURES).expect("features");
    f.get_u64(GET_PROTOCOL_FEATURES).expect("protocol features");
    f.send(
        SET_PROTOCOL_FEATURES,
        &(PF_REPLY_ACK | proto).to_le_bytes(),
        &[],
    );
    f.must(SET_OWNER, &[], &[]);
    let features = F_VERSION_1 | F_PROTOCOL_FEATURES | F_LOG_ALL;
    f.must(SET_FEATURES, &features.to_le_bytes(), &[]);
    let mem = common::hostile::GuestMem::new();
    let fd = mem.fd.as_raw_fd();
    f.must(SET_MEM_TABLE, &mem.table(), &[fd, fd]);
    (f, mem)
}

/// Bad logs, each on a fresh connection: a log smaller than guest memory needs, one
/// past the end of its file, an fd that cannot be mapped writable (a read-only file),
/// SET_LOG_BASE without LOG_SHMFD, SET_LOG_FD without an fd: each closes the
/// connection (a protocol error), the daemon lives, and a good log is accepted after.
#[test]
fn bad_dirty_logs_are_refused_and_the_daemon_lives() {
    let _g = serial();
    let dir = TempDir::new("dlogbad");
    let (sw, _sa, sb) = start_ab(&dir, "vhost-user", "");
    let ro_path = dir.path("ro-log");
    std::fs::write(&ro_path, vec![0u8; 4096]).unwrap();
    let ro: OwnedFd = std::fs::File::open(&ro_path).unwrap().into();
    let small = memfd(64);
    let good = memfd(LOG_BYTES);
    let cases: Vec<(&str, u64, Vec<u8>, Vec<i32>)> = vec![
        (
            "too small",
            PF_LOG_SHMFD,
            log_base_body(64, 0),
            vec![small.as_raw_fd()],
        ),
        (
            "past its file",
            PF_LOG_SHMFD,
            log_base_body(4096, 0),
            vec![small.as_raw_fd()],
        ),
        (
            "read-only fd",
            PF_LOG_SHMFD,
            log_base_body(4096, 0),
            vec![ro.as_raw_fd()],
        ),
        (
            "without LOG_SHMFD",
            0,
            log_base_body(LOG_BYTES, 0),
            vec![good.as_raw_fd()],
        ),
    ];
    let errors0 = sw.protocol_errors("b");
    for (k, (what, proto, body, fds)) in cases.iter().enumerate() {
        let (mut f, _mem) = negotiated(&sb, *proto);
        f.send(SET_LOG_BASE, body, fds);
        assert!(f.reply().is_none(), "{what}: the connection is closed");
        let errors = errors0 + k as u64 + 1;
        wait_for(Duration::from_secs(5), "the protocol error counted", || {
            (sw.protocol_errors("b") == errors).then_some(())
        });
        assert!(
            sw.log().contains("SET_LOG_BASE refused") || *proto == 0,
            "{what}"
        );
    }
    // SET_LOG_FD with no fd attached.
    let (mut f, _mem) = negotiated(&sb, PF_LOG_SHMFD);
    f.send_flags(SET_LOG_FD, VERSION_1 | NEED_REPLY, &[], &[]);
    assert!(
        f.reply().is_none(),
        "SET_LOG_FD without an fd closes the connection"
    );
    drop(f);
    // A good log and log fd are accepted: the daemon lives and logs.
    let (mut f, _mem) = negotiated(&sb, PF_LOG_SHMFD);
    let body = log_base_body(LOG_BYTES, 0);
    f.send(SET_LOG_BASE, &body, &[good.as_raw_fd()]);
    assert_eq!(
        f.reply().as_deref(),
        Some(&body[..]),
        "the good log's reply"
    );
    // SAFETY: eventfd(2); the fd is owned from here on.
    let efd = unsafe { OwnedFd::from_raw_fd(libc::eventfd(0, libc::EFD_CLOEXEC)) };
    f.must(SET_LOG_FD, &[], &[efd.as_raw_fd()]);
    let m = migration_of(&sw, "b");
    assert_eq!(m["logging"], true, "{m}");
    assert_eq!(m["logs_set"], 1, "{m}");
}

/// SEND_RARP on port b for a MAC first learned on a: the FDB moves it to b at once,
/// and a receives the broadcast RARP (EtherType 0x8035, sender MAC in it).
#[test]
fn send_rarp_moves_the_mac_and_floods_the_announcement() {
    let _g = serial();
    let dir = TempDir::new("rarp");
    let (sw, sa, sb) = start_ab(&dir, "vhost-user", "");
    let mut a = Guest::connect(&sa, 0);
    let vm = [0x52, 0x54, 0, 0, 0, 0x0a];
    a.send(&[0; VNET_HDR], &udp_frame(vm, BCAST, 100, 0));
    a.tx_done();
    wait_for(Duration::from_secs(5), "the MAC learned on a", || {
        (sw.fdb_port("52:54:00:00:00:0a").as_deref() == Some("a")).then_some(())
    });
    let bufs = a.post_rx(4, 2048);
    let seen = a.rx.used_idx(&a.mem);
    let (mut f, _mem) = negotiated(&sb, PF_RARP);
    let mut mac = [0u8; 8];
    mac[..6].copy_from_slice(&vm);
    // b's rings do not run: the announcement needs only the connection.
    f.must(SEND_RARP, &mac, &[]);
    wait_for(Duration::from_secs(1), "the MAC moved to b", || {
        (sw.fdb_port("52:54:00:00:00:0a").as_deref() == Some("b")).then_some(())
    });
    wait_for(Duration::from_secs(5), "the RARP delivered to a", || {
        (a.rx.used_idx(&a.mem) != seen).then_some(())
    });
    let (id, len) = a.rx.used_elem(&a.mem, seen);
    let addr = bufs
        .iter()
        .find(|&&(h, _)| u32::from(h) == id)
        .map(|&(_, addr)| addr)
        .expect("a buffer a posted");
    let frame = a.mem.read(addr + VNET_HDR as u64, len as usize - VNET_HDR);
    assert_eq!(&frame[..6], &BCAST);
    assert_eq!(&frame[6..12], &vm);
    assert_eq!(&frame[12..14], &[0x80, 0x35], "RARP");
    assert_eq!(&frame[22..28], &vm, "sender hardware address");
    assert_eq!(migration_of(&sw, "b")["announced"], 1);
}
