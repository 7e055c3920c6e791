//! vhost-user messages of a hostile front-end (VMM or DPDK virtio-user), with the file
//! descriptors they carry, against the daemon's real backend.
//!
//! Each execution connects to a vhost-user socket the target listens on, writes a
//! sequence of up to 32 messages built from the input (12-byte header: request, flags
//! with version 1 or anything, size matching the body or anything; then the body),
//! each with the descriptors the input picks attached (memfds of 1 to 64 pages whose
//! first bytes the input writes, eventfds, `/dev/null`, pipes, sockets, none, or more
//! than a message may carry), closes its sending side, and then serves the connection
//! with [`Connection::establish`], the function `vswitchd` serves every vhost-user
//! connection with: rust-vmm's `VhostUserDaemon` over the port's `NetBackend`,
//! calling `handle_request()` until the messages end or one is refused. A port of 1 to
//! 4 queue pairs, with or without offloads and `VIRTIO_NET_F_MTU`, is served.
//! Afterwards, every ring the messages made ready is viewed as the PMDs would
//! ([`SplitRing::new`]) and its available chains are walked.
//!
//! Asserts: nothing panics or aborts (a SIGBUS from a mapping past its file's end
//! would kill the target); the connection ends (no hang); every chain the rings hold
//! afterwards walks to buffers inside guest memory; descriptors, threads and guest
//! memory mappings are not leaked across executions (their counts, checked every 64
//! executions, stay within a small margin of the first count).
//!
//! Input format (see `seeds/gen_seeds.py`): `port: u8` (bits 0-1: queue pairs - 1;
//! bit 2: offloads; bit 3: VIRTIO_NET_F_MTU), then messages as [`Msg::read`] reads
//! them until the input ends.
#![no_main]

use std::cell::RefCell;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use vhost::vhost_user::Listener;
use vhost_user_backend::VringT;
use virtio_queue::QueueT;
use vm_memory::GuestAddressSpace;
use vswitch::ports::vhost::device::{Connection, Endpoint, Wakers};
use vswitch::ports::vhost::virtq::{Seg, SplitRing};
use vswitch_fuzz::Reader;

/// vhost-user protocol version 1 in the flags field.
const VERSION_1: u32 = 0x1;
/// The front-end wants an ack (REPLY_ACK).
const NEED_REPLY: u32 = 0x8;
/// Largest body written (the protocol's limit is 4 KiB; a bigger `size` is refused
/// from the header alone).
const MAX_BODY: usize = 1024;
/// A page of a memfd.
const PAGE: u64 = 4096;

/// A descriptor attached to a message.
#[derive(Debug)]
enum Fd {
    /// A memfd of `pages % 64 + 1` pages starting with `data`.
    Memfd { pages: u8, data: Vec<u8> },
    /// An eventfd (kick, call, err).
    EventFd,
    /// `/dev/null`, not a memfd nor an eventfd.
    DevNull,
    /// The read end of a pipe.
    Pipe,
    /// One end of a socket pair.
    Socket,
    /// `n % 48 + 1` eventfds at once (more than the 32 a message may carry).
    Many(u8),
}

impl Fd {
    /// A kind byte (taken modulo 6: memfd, then `pages: u8` and a byte string; eventfd;
    /// `/dev/null`; pipe; socket; many, then `n: u8`).
    fn read(r: &mut Reader) -> Self {
        match r.u8() % 6 {
            0 => Fd::Memfd {
                pages: r.u8(),
                data: r.blob(1 << 16).to_vec(),
            },
            1 => Fd::EventFd,
            2 => Fd::DevNull,
            3 => Fd::Pipe,
            4 => Fd::Socket,
            _ => Fd::Many(r.u8()),
        }
    }
}

/// One message: its bytes and the descriptors to attach.
#[derive(Debug)]
struct Msg {
    /// Header and body.
    data: Vec<u8>,
    /// Descriptors to create and attach.
    fds: Vec<Fd>,
}

impl Msg {
    /// `request: u8` (0xff: a raw `u32` follows); `flags: u8` (0: version 1, 1: version
    /// 1 and NEED_REPLY, else a raw `u32` follows); `size: u8` (0: the body's length,
    /// else a raw `u32` follows); the body as a byte string (at most 1 KiB); a `u8`
    /// count (at most 4) and that many descriptors.
    fn read(r: &mut Reader) -> Self {
        let request = match r.u8() {
            0xff => r.u32(),
            c => u32::from(c),
        };
        let flags = match r.u8() {
            0 => VERSION_1,
            1 => VERSION_1 | NEED_REPLY,
            _ => r.u32(),
        };
        let size = match r.u8() {
            0 => None,
            _ => Some(r.u32()),
        };
        let body = r.blob(MAX_BODY);
        let mut data = Vec::with_capacity(12 + body.len());
        data.extend_from_slice(&request.to_le_bytes());
        data.extend_from_slice(&flags.to_le_bytes());
        data.extend_from_slice(&size.unwrap_or(body.len() as u32).to_le_bytes());
        data.extend_from_slice(body);
        let fds = (0..r.u8() % 5).map(|_| Fd::read(r)).collect();
        Msg { data, fds }
    }
}

/// An fd the target created, closed when dropped.
fn owned(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: `fd` was just returned by a successful system call and nothing else owns
    // it.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates the descriptors of `fd`, appending them to `out`.
fn make_fds(fd: &Fd, out: &mut Vec<OwnedFd>) {
    match fd {
        Fd::Memfd { pages, data } => {
            // SAFETY: memfd_create with a NUL-terminated name and valid flags.
            let Some(m) =
                owned(unsafe { libc::memfd_create(c"vhu-fuzz".as_ptr(), libc::MFD_CLOEXEC) })
            else {
                return;
            };
            let len = (u64::from(*pages % 64) + 1) * PAGE;
            let mut f = std::fs::File::from(m);
            if f.set_len(len).is_err() {
                return;
            }
            let _ = f.write_all(&data[..data.len().min(len as usize)]);
            out.push(f.into());
        }
        Fd::EventFd => {
            // SAFETY: eventfd with valid flags.
            out.extend(owned(unsafe {
                libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK)
            }));
        }
        Fd::DevNull => {
            if let Ok(f) = std::fs::File::open("/dev/null") {
                out.push(f.into());
            }
        }
        Fd::Pipe => {
            let mut p = [0; 2];
            // SAFETY: pipe2 writes two fds into an array of two.
            if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } == 0 {
                out.extend(owned(p[0]));
                drop(owned(p[1]));
            }
        }
        Fd::Socket => {
            if let Ok((a, _b)) = UnixStream::pair() {
                out.push(a.into());
            }
        }
        Fd::Many(n) => {
            for _ in 0..=(n % 48) {
                make_fds(&Fd::EventFd, out);
            }
        }
    }
}

/// Sends `data` with `fds` attached (SCM_RIGHTS), without SIGPIPE.
fn send(sock: &UnixStream, data: &[u8], fds: &[RawFd]) -> bool {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: CMSG_SPACE is a pure computation on a length.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) } as usize;
    let mut cmsg_buf = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; all-zero is valid, the fields used are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = cmsg_buf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: msg_control points at `space` bytes, room for one header and `fds`;
        // CMSG_FIRSTHDR and CMSG_DATA stay inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(c).cast::<RawFd>(),
                fds.len(),
            );
        }
    }
    // SAFETY: sendmsg on an open socket with a msghdr whose buffers outlive the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    n == data.len() as isize
}

/// The socket the target serves connections on, for the whole run.
struct Server {
    /// Bound at `path`; each execution accepts one connection on it.
    listener: Mutex<Listener>,
    /// In the temporary directory, named after the process.
    path: std::path::PathBuf,
    /// The PMD wakers a port hands its connections (no PMD here).
    wakers: Arc<Wakers>,
    /// Where a connection's shutdown handle is kept while it runs.
    slot: Mutex<Option<vhost_user_backend::ShutdownHandle>>,
}

/// The run's server, created at the first execution.
fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| {
        let path =
            std::env::temp_dir().join(format!("vswitch-fuzz-vhu-{}.sock", std::process::id()));
        let listener = Listener::new(&path, true).expect("listen on the fuzz socket");
        Server {
            listener: Mutex::new(listener),
            path,
            wakers: Arc::new(Wakers::default()),
            slot: Mutex::new(None),
        }
    })
}

/// Counts the entries of a `/proc/self` directory.
fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// Mappings of the memfds this target sends (guest memory the backend mapped).
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| {
        m.lines().filter(|l| l.contains("memfd:vhu-fuzz")).count()
    })
}

/// Open descriptors, threads and memory mappings.
fn resources() -> [usize; 3] {
    [count("/proc/self/fd"), count("/proc/self/task"), mappings()]
}

/// How many more of each resource than at the first check is a leak.
const SLACK: [usize; 3] = [32, 8, 16];

/// Checks every 64 executions that descriptors, threads and mappings (of guest
/// memory) do not pile up.
fn check_leaks() {
    thread_local! {
        static N: RefCell<(u64, Option<[usize; 3]>)> = const { RefCell::new((0, None)) };
    }
    N.with(|n| {
        let mut n = n.borrow_mut();
        n.0 += 1;
        if n.0 % 64 != 0 {
            return;
        }
        let over =
            |now: &[usize; 3], first: &[usize; 3]| (0..3).any(|i| now[i] > first[i] + SLACK[i]);
        // Worker threads exit after the connection ends: give them a moment.
        let mut now = resources();
        if let Some(first) = n.1 {
            for _ in 0..50 {
                if !over(&now, &first) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
                now = resources();
            }
            assert!(
                !over(&now, &first),
                "leak: [fds, threads, mappings] {now:?} now, {first:?} at first"
            );
        } else {
            n.1 = Some(now);
        }
    });
}

/// Walks the available chains of every ring the connection made ready, as a PMD
/// would, and checks the segments lie in guest memory.
fn walk_rings(conn: &Connection) {
    let mem = conn.mem.memory();
    for v in &conn.vrings {
        let st = v.get_ref();
        let q = st.get_queue();
        let Some(ring) = SplitRing::new(&mem, q) else {
            continue;
        };
        let next = q.next_avail();
        let mut segs: Vec<Seg> = Vec::new();
        for i in 0..ring.avail_idx().wrapping_sub(next).min(ring.size()).min(32) {
            let head = ring.avail_entry(next.wrapping_add(i));
            for writable in [false, true] {
                segs.clear();
                if ring.walk_chain(head, writable, &mut segs).is_ok() {
                    for s in &segs {
                        assert!(
                            ring.mem().slice(s.addr, s.len as usize).is_some(),
                            "{s:?} outside guest memory"
                        );
                    }
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let port = r.u8();
    let srv = server();
    let Ok(client) = UnixStream::connect(&srv.path) else {
        return;
    };
    let _ = client.set_nonblocking(true);
    let mut total = 0usize;
    for _ in 0..32 {
        if r.is_empty() {
            break;
        }
        let m = Msg::read(&mut r);
        let mut fds = Vec::new();
        for f in &m.fds {
            make_fds(f, &mut fds);
        }
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        total += m.data.len();
        // Bounded: the socket buffer holds it all, so nothing blocks.
        if total > 64 * 1024 || !send(&client, &m.data, &raw) {
            break;
        }
        // Ours are closed here; the backend has its own copies in flight.
    }
    let _ = client.shutdown(std::net::Shutdown::Write);

    let conn: RefCell<Option<Arc<Connection>>> = RefCell::new(None);
    let publish = |c: Option<Arc<Connection>>| {
        if c.is_some() {
            *conn.borrow_mut() = c;
        }
    };
    let mut listener = srv.listener.lock().unwrap_or_else(|e| e.into_inner());
    let r = Connection::establish(
        "fuzz",
        u16::from(port & 3) + 1,
        port & 4 != 0,
        port & 8 != 0,
        &srv.wakers,
        Endpoint::Listen(&mut listener, &std::sync::atomic::AtomicBool::new(false)),
        &publish,
        &srv.slot,
    );
    drop(listener);
    assert!(r.is_ok(), "accepting the connection failed: {:?}", r.err());
    drop(client);
    if let Some(c) = conn.borrow_mut().take() {
        walk_rings(&c);
    }
    check_leaks();
});
