//! Hostile vhost-user front-ends: a raw front-end (no real driver misbehaves on purpose)
//! connects to port `h` and breaks the protocol, while a DPDK testpmd guest loops frames
//! between ports a and b. After each attack the daemon answers, `h` accepts the next
//! connection, vswitchd counts the closed connection as a protocol error, and at the end
//! its fds and threads are back where they started and the loop lost nothing.

mod common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use common::*;

const MAC_A: &str = "02:00:00:00:00:01";
const MAC_B: &str = "02:00:00:00:00:02";

// vhost-user requests (vhost-user spec, "Front-end message types").
const GET_FEATURES: u32 = 1;
const SET_MEM_TABLE: u32 = 5;
const GET_PROTOCOL_FEATURES: u32 = 15;
const SET_PROTOCOL_FEATURES: u32 = 16;
const GET_QUEUE_NUM: u32 = 17;
/// Header flags: protocol version 1.
const VERSION_1: u32 = 0x1;
/// VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS, which vswitchd does not offer.
const CONFIGURE_MEM_SLOTS: u64 = 1 << 15;

/// A vhost-user front-end that speaks raw messages, well or badly.
struct Front(UnixStream);

impl Front {
    /// Connects to `path` (retrying while the port's service gets back to accept).
    fn connect(path: &Path) -> Front {
        let s = wait_for(Duration::from_secs(10), "the port's socket", || {
            UnixStream::connect(path).ok()
        });
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Front(s)
    }

    /// Sends one message: header (request, flags, size) and body, with `fds` attached.
    fn send(&self, request: u32, body: &[u8], fds: &[RawFd]) {
        let mut msg = Vec::with_capacity(12 + body.len());
        msg.extend_from_slice(&request.to_le_bytes());
        msg.extend_from_slice(&VERSION_1.to_le_bytes());
        msg.extend_from_slice(&(body.len() as u32).to_le_bytes());
        msg.extend_from_slice(body);
        send_with_fds(self.0.as_raw_fd(), &msg, fds);
    }

    /// Reads one reply and returns its body; `None` if vswitchd closed the connection.
    fn reply(&mut self) -> Option<Vec<u8>> {
        let mut hdr = [0u8; 12];
        match self.0.read_exact(&mut hdr) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("reading a reply: {e}"),
        }
        let size = u32::from_le_bytes(hdr[8..12].try_into().unwrap()) as usize;
        let mut body = vec![0u8; size];
        self.0.read_exact(&mut body).ok()?;
        Some(body)
    }

    /// Sends a request that takes no body and returns its u64 reply, `None` if closed.
    fn get_u64(&mut self, request: u32) -> Option<u64> {
        self.send(request, &[], &[]);
        let b = self.reply()?;
        Some(u64::from_le_bytes(b[..8].try_into().unwrap()))
    }

    /// Whether vswitchd closed the connection (within the read timeout).
    fn closed_by_switch(&mut self) -> bool {
        let mut b = [0u8; 64];
        match self.0.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) => panic!("reading: {e}"),
        }
    }

    /// Whether the connection still answers GET_FEATURES.
    fn answers(&mut self) -> bool {
        self.get_u64(GET_FEATURES).is_some()
    }
}

fn send_with_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds);
    let space = if fds.is_empty() {
        0
    } else {
        // SAFETY: CMSG_SPACE only computes a size.
        unsafe { libc::CMSG_SPACE(fd_bytes as u32) as usize }
    };
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; every pointer set below outlives the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: msg_control points at `space` bytes, enough for one header and `fds`.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(c), fd_bytes);
        }
    }
    // SAFETY: msg is valid for the call; the socket is ours.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
    // The switch may already have closed a connection it refused: that is fine.
    assert!(
        n == data.len() as isize
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPIPE),
        "sendmsg: {}",
        std::io::Error::last_os_error()
    );
}

/// A memfd of `len` bytes.
fn memfd(len: u64) -> OwnedFd {
    // SAFETY: memfd_create with a valid C string; the fd is owned from here on.
    let fd = unsafe { libc::memfd_create(c"hostile".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: fd was just created and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own fd.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len as i64) }, 0);
    fd
}

/// SET_MEM_TABLE's body for one region of `size` bytes at file offset 0.
fn mem_table(size: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&1u32.to_le_bytes()); // nregions
    b.extend_from_slice(&0u32.to_le_bytes()); // padding
    for v in [0u64, size, 0x7f00_0000_0000, 0] {
        // guest_phys_addr, memory_size, userspace_addr, mmap_offset
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// The daemon's open fds and its threads other than the tokio runtime's ("control":
/// its blocking pool keeps idle threads for 10 s, so their number drifts).
fn footprint(pid: u32) -> (usize, usize) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let threads = thread_names(pid).iter().filter(|n| *n != "control").count();
    (fds, threads)
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

fn protocol_errors(sw: &Vswitchd, port: &str) -> u64 {
    let show = sw.show();
    show["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == port)
        .unwrap()["protocol_errors"]
        .as_u64()
        .unwrap()
}

/// Each attack is refused by closing the connection, counted, and leaves the port ready
/// for the next front-end; 1000 reconnects leak nothing; the loop beside it runs on.
#[test]
fn hostile_front_ends_are_refused_and_leave_nothing_behind() {
    let _g = serial();
    setup_host();
    let dir = TempDir::new("hostile");
    let sh = dir.path("h.sock");
    let mut args = Vec::new();
    for p in ["a", "b", "h"] {
        args.push("--vhost-user".to_string());
        args.push(format!("{p}={}", dir.path(&format!("{p}.sock")).display()));
    }
    args.extend([
        "--static-mac".to_string(),
        format!("a={MAC_A}"),
        "--static-mac".into(),
        format!("b={MAC_B}"),
    ]);
    let sw = Vswitchd::start(&dir, &args);
    let mut lg = start_loop_guest(&dir, "vshostile", MAC_A, MAC_B);
    wait_for(Duration::from_secs(20), "the loop running", || {
        (sw.port("a").stats.rx_packets > 10_000).then_some(())
    });
    // The footprint is taken with one well-behaved connection open and answering (what
    // a connection holds is then the same at both ends of the test).
    let pid = sw.pid();
    let steady = || {
        let mut f = Front::connect(&sh);
        assert!(f.answers());
        footprint(pid)
    };
    let before = steady();
    let mut refused = 0;
    {
        // Unoffered protocol feature: refused; the same without it: served.
        let mut f = Front::connect(&sh);
        assert!(f.answers());
        let offered = f.get_u64(GET_PROTOCOL_FEATURES).expect("protocol features");
        assert_eq!(offered & CONFIGURE_MEM_SLOTS, 0, "not offered");
        f.send(SET_PROTOCOL_FEATURES, &offered.to_le_bytes(), &[]);
        assert!(
            f.get_u64(GET_QUEUE_NUM).is_some(),
            "what was offered is accepted"
        );
    }
    {
        let mut f = Front::connect(&sh);
        assert!(f.answers());
        let bad = (1u64 << 0) | CONFIGURE_MEM_SLOTS; // MQ and an unoffered bit
        f.send(SET_PROTOCOL_FEATURES, &bad.to_le_bytes(), &[]);
        assert!(f.closed_by_switch(), "an unoffered protocol feature closes");
        refused += 1;
    }
    // A memory region past the end of its file: refused before it is mapped (touching it
    // would raise SIGBUS); a region within its file: served.
    let m = memfd(1 << 20);
    {
        let mut f = Front::connect(&sh);
        f.send(SET_MEM_TABLE, &mem_table(1 << 20), &[m.as_raw_fd()]);
        assert!(f.answers(), "a region within its file is mapped");
    }
    {
        let mut f = Front::connect(&sh);
        f.send(SET_MEM_TABLE, &mem_table(4 << 20), &[m.as_raw_fd()]);
        assert!(f.closed_by_switch(), "a region past its file's end closes");
        refused += 1;
    }
    {
        // An unknown request claiming a 256 MiB body.
        let mut f = Front::connect(&sh);
        f.0.write_all(&[0xad, 0xde, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x10])
            .unwrap();
        assert!(f.closed_by_switch(), "garbage closes");
        refused += 1;
    }
    wait_for(Duration::from_secs(5), "the refusals counted", || {
        (protocol_errors(&sw, "h") >= refused).then_some(())
    });
    // 1000 reconnects, each negotiating a little.
    for i in 0..1000 {
        let mut f = Front::connect(&sh);
        assert!(f.answers(), "reconnect {i}");
    }
    let mut last = before;
    let after = wait_for(Duration::from_secs(10), "fds and threads back", || {
        last = steady();
        eprintln!(
            "fds and threads: before {before:?}, now {last:?} {:?}",
            thread_names(pid)
        );
        (last == before).then_some(last)
    });
    assert_eq!(after, before);
    let runtime = thread_names(pid).iter().filter(|n| *n == "control").count();
    assert!(runtime <= 16, "tokio threads: {:?}", thread_names(pid));
    assert!(show_json(&sw.control).is_ok(), "the daemon answers");

    lg.cmd("stop");
    let a = sw.port("a").stats;
    let b = sw.port("b").stats;
    assert!(a.rx_packets > 20_000, "the loop ran: {a:?}");
    assert_eq!(a.drops_total + b.drops_total, 0, "{a:?} {b:?}");
}
