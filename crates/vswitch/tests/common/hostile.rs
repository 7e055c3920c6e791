//! A vhost-user front-end that can misbehave, for `tests/hostile_guests.rs`.
//!
//! [`Front`] speaks raw vhost-user messages through its own writer (with SCM_RIGHTS), so
//! it can send what no real driver would. [`Guest`] drives a `Front` as a well-behaved
//! VMM does, up to a running queue pair 0: features negotiated, a memfd shared as guest
//! memory (two regions with a hole between them), both rings set up over that memory.
//! The test maps the same memfd ([`GuestMem`]), so it writes descriptors, available
//! entries and frames itself ([`Ring`]), well formed or not, and reads what the switch
//! completed from the used rings.
//!
//! This is a mock only because no real driver misbehaves on purpose; the switch on the
//! other side is the real vswitchd.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use super::wait_for;

// vhost-user requests (vhost-user spec, "Front-end message types").
pub const GET_FEATURES: u32 = 1;
pub const SET_FEATURES: u32 = 2;
pub const SET_OWNER: u32 = 3;
pub const SET_MEM_TABLE: u32 = 5;
pub const SET_LOG_BASE: u32 = 6;
pub const SET_LOG_FD: u32 = 7;
pub const SET_VRING_NUM: u32 = 8;
pub const SET_VRING_ADDR: u32 = 9;
pub const SET_VRING_BASE: u32 = 10;
pub const SET_VRING_KICK: u32 = 12;
pub const SET_VRING_CALL: u32 = 13;
pub const GET_PROTOCOL_FEATURES: u32 = 15;
pub const SET_PROTOCOL_FEATURES: u32 = 16;
pub const GET_QUEUE_NUM: u32 = 17;
pub const SET_VRING_ENABLE: u32 = 18;
pub const SEND_RARP: u32 = 19;

/// Header flags: protocol version 1.
pub const VERSION_1: u32 = 0x1;
/// Header flags: the sender wants an ack (with REPLY_ACK negotiated).
pub const NEED_REPLY: u32 = 0x8;

// Virtio feature bits (virtio 1.2 §5.1.3, §6; vhost-user spec).
pub const F_CSUM: u64 = 1 << 0;
pub const F_GUEST_CSUM: u64 = 1 << 1;
pub const F_GUEST_TSO4: u64 = 1 << 7;
pub const F_HOST_TSO4: u64 = 1 << 11;
pub const F_HOST_TSO6: u64 = 1 << 12;
pub const F_MRG_RXBUF: u64 = 1 << 15;
/// VHOST_F_LOG_ALL: the back-end logs its writes in the dirty log.
pub const F_LOG_ALL: u64 = 1 << 26;
pub const F_INDIRECT_DESC: u64 = 1 << 28;
pub const F_PROTOCOL_FEATURES: u64 = 1 << 30;
pub const F_VERSION_1: u64 = 1 << 32;

// vhost-user protocol features.
pub const PF_MQ: u64 = 1 << 0;
pub const PF_LOG_SHMFD: u64 = 1 << 1;
pub const PF_RARP: u64 = 1 << 2;
pub const PF_REPLY_ACK: u64 = 1 << 3;
/// VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS, which vswitchd does not offer.
pub const PF_CONFIGURE_MEM_SLOTS: u64 = 1 << 15;

// Descriptor flags (virtio 1.2 §2.7.5).
pub const NEXT: u16 = 1;
pub const WRITE: u16 = 2;
pub const INDIRECT: u16 = 4;
/// Avail-ring flag: the driver wants no interrupts (it polls the used ring).
const AVAIL_F_NO_INTERRUPT: u16 = 1;

/// Guest memory: region 0 at guest-physical 0 (4 MiB), a hole from 4 to 8 MiB, region 1
/// at 8 MiB (1 MiB). Both live in one memfd, region 1 at file offset 4 MiB.
pub const LO_SIZE: u64 = 4 << 20;
pub const HI_GPA: u64 = 8 << 20;
pub const HI_SIZE: u64 = 1 << 20;
pub const MEM_FILE: u64 = LO_SIZE + HI_SIZE;
/// Where guest-physical 0 lies in the front-end's "address space": vhost-user ring
/// addresses are front-end virtual addresses, translated through the memory table.
pub const UADDR: u64 = 0x7f00_0000_0000;

/// Descriptors per ring.
pub const QSIZE: u16 = 256;
/// Virtqueue 0 (the guest's receive queue) and 1 (its transmit queue): desc, avail,
/// used, and the arena their buffers come from.
pub const RX_LAYOUT: Layout = Layout {
    desc: 0x0000,
    avail: 0x1000,
    used: 0x2000,
    arena: (0x1_0000, 0x20_0000),
};
pub const TX_LAYOUT: Layout = Layout {
    desc: 0x4000,
    avail: 0x5000,
    used: 0x6000,
    arena: (0x20_0000, 0x40_0000),
};

/// virtio-net header length with VERSION_1 (`struct virtio_net_hdr_mrg_rxbuf`).
pub const VNET_HDR: usize = 12;

/// A vhost-user front-end that speaks raw messages, well or badly.
pub struct Front(pub UnixStream);

impl Front {
    /// Connects to `path` (retrying while the port's service gets back to accept).
    pub fn connect(path: &Path) -> Front {
        let s = wait_for(Duration::from_secs(10), "the port's socket", || {
            UnixStream::connect(path).ok()
        });
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Front(s)
    }

    /// Sends one message: header (request, flags, size) and body, with `fds` attached.
    pub fn send(&self, request: u32, body: &[u8], fds: &[RawFd]) {
        self.send_flags(request, VERSION_1, body, fds);
    }

    /// [`Front::send`] with header flags `flags`.
    pub fn send_flags(&self, request: u32, flags: u32, body: &[u8], fds: &[RawFd]) {
        let mut msg = Vec::with_capacity(12 + body.len());
        msg.extend_from_slice(&request.to_le_bytes());
        msg.extend_from_slice(&flags.to_le_bytes());
        msg.extend_from_slice(&(body.len() as u32).to_le_bytes());
        msg.extend_from_slice(body);
        send_with_fds(self.0.as_raw_fd(), &msg, fds);
    }

    /// Sends `bytes` as they are (any framing), with `fds` attached.
    pub fn send_raw(&self, bytes: &[u8], fds: &[RawFd]) {
        send_with_fds(self.0.as_raw_fd(), bytes, fds);
    }

    /// Sends a request with NEED_REPLY and returns the ack's value (0: success), `None`
    /// if vswitchd closed the connection.
    pub fn ack(&mut self, request: u32, body: &[u8], fds: &[RawFd]) -> Option<u64> {
        self.send_flags(request, VERSION_1 | NEED_REPLY, body, fds);
        let b = self.reply()?;
        Some(u64::from_le_bytes(b[..8].try_into().unwrap()))
    }

    /// [`Front::ack`], which must succeed.
    pub fn must(&mut self, request: u32, body: &[u8], fds: &[RawFd]) {
        assert_eq!(
            self.ack(request, body, fds),
            Some(0),
            "request {request} refused"
        );
    }

    /// Reads one reply and returns its body; `None` if vswitchd closed the connection.
    pub fn reply(&mut self) -> Option<Vec<u8>> {
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
    pub fn get_u64(&mut self, request: u32) -> Option<u64> {
        self.send(request, &[], &[]);
        let b = self.reply()?;
        Some(u64::from_le_bytes(b[..8].try_into().unwrap()))
    }

    /// Whether vswitchd closed the connection (within the read timeout).
    pub fn closed_by_switch(&mut self) -> bool {
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
    pub fn answers(&mut self) -> bool {
        self.get_u64(GET_FEATURES).is_some()
    }
}

/// sendmsg(2) of `data` with `fds` as SCM_RIGHTS. A connection the switch already closed
/// is fine (EPIPE, ECONNRESET): the caller checks what it expects.
pub fn send_with_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) {
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
    let err = std::io::Error::last_os_error();
    assert!(
        n == data.len() as isize
            || matches!(err.raw_os_error(), Some(libc::EPIPE | libc::ECONNRESET)),
        "sendmsg: {err}"
    );
}

/// SET_LOG_BASE's body (vhost-user `VhostUserLog`): the log's size and its offset in
/// the fd, in bytes.
pub fn log_base_body(size: u64, offset: u64) -> Vec<u8> {
    let mut b = size.to_le_bytes().to_vec();
    b.extend_from_slice(&offset.to_le_bytes());
    b
}

/// A memfd of `len` bytes.
pub fn memfd(len: u64) -> OwnedFd {
    // SAFETY: memfd_create with a valid C string; the fd is owned from here on.
    let fd = unsafe { libc::memfd_create(c"hostile".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: fd was just created and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own fd.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len as i64) }, 0);
    fd
}

/// An eventfd (kick or call).
pub fn eventfd() -> OwnedFd {
    // SAFETY: eventfd(2) with valid flags; the fd is owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    // SAFETY: fd was just created and is owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// SET_MEM_TABLE's body for regions `(guest_phys_addr, size, user_addr, mmap_offset)`.
pub fn mem_table_body(regions: &[(u64, u64, u64, u64)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(regions.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // padding
    for &(gpa, size, uaddr, off) in regions {
        for v in [gpa, size, uaddr, off] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

/// SET_MEM_TABLE's body for one region of `size` bytes at file offset 0.
pub fn mem_table(size: u64) -> Vec<u8> {
    mem_table_body(&[(0, size, UADDR, 0)])
}

/// Connects to `path` and negotiates as a VMM does up to shared guest memory: checks
/// that `features`, REPLY_ACK and protocol features `proto` are offered, acks them
/// (with MQ when offered), SET_OWNER, SET_FEATURES, SET_MEM_TABLE with a new
/// [`GuestMem`]. Every step after the protocol features is acked.
pub fn negotiate(path: &Path, features: u64, proto: u64) -> (Front, GuestMem) {
    let mut front = Front::connect(path);
    let offered = front.get_u64(GET_FEATURES).expect("GET_FEATURES");
    assert_eq!(
        offered & features,
        features,
        "features {features:#x} offered ({offered:#x})"
    );
    let pf = front
        .get_u64(GET_PROTOCOL_FEATURES)
        .expect("GET_PROTOCOL_FEATURES");
    assert_ne!(pf & PF_REPLY_ACK, 0, "REPLY_ACK offered");
    assert_eq!(
        pf & proto,
        proto,
        "protocol features {proto:#x} offered ({pf:#x})"
    );
    front.send(
        SET_PROTOCOL_FEATURES,
        &(pf & (PF_MQ | PF_REPLY_ACK | proto)).to_le_bytes(),
        &[],
    );
    front.must(SET_OWNER, &[], &[]);
    front.must(SET_FEATURES, &features.to_le_bytes(), &[]);
    let mem = GuestMem::new();
    let fd = mem.fd.as_raw_fd();
    front.must(SET_MEM_TABLE, &mem.table(), &[fd, fd]);
    (front, mem)
}

/// Starts virtqueue `index` as a VMM does, each message acked: SET_VRING_NUM
/// ([`QSIZE`]), SET_VRING_ADDR (`addr_body`), SET_VRING_BASE (`base`), the call and
/// kick eventfds, SET_VRING_ENABLE.
pub fn start_vring(
    front: &mut Front,
    index: u32,
    addr_body: &[u8],
    base: u32,
    call: &OwnedFd,
    kick: &OwnedFd,
) {
    front.must(SET_VRING_NUM, &vring_state(index, u32::from(QSIZE)), &[]);
    front.must(SET_VRING_ADDR, addr_body, &[]);
    front.must(SET_VRING_BASE, &vring_state(index, base), &[]);
    front.must(
        SET_VRING_CALL,
        &u64::from(index).to_le_bytes(),
        &[call.as_raw_fd()],
    );
    front.must(
        SET_VRING_KICK,
        &u64::from(index).to_le_bytes(),
        &[kick.as_raw_fd()],
    );
    front.must(SET_VRING_ENABLE, &vring_state(index, 1), &[]);
}

/// `len` bytes of buffer space from `arena` (64-byte aligned; the arena is reused round
/// robin from `next` on, so buffers live until about the arena's size later).
pub fn arena_alloc(arena: (u64, u64), next: &mut u64, len: usize) -> u64 {
    let len = (len as u64).div_ceil(64) * 64;
    assert!(len <= arena.1 - arena.0);
    if *next + len > arena.1 {
        *next = arena.0;
    }
    let a = *next;
    *next += len;
    a
}

/// A vring state body (SET_VRING_NUM, SET_VRING_BASE, SET_VRING_ENABLE).
pub fn vring_state(index: u32, num: u32) -> Vec<u8> {
    let mut b = index.to_le_bytes().to_vec();
    b.extend_from_slice(&num.to_le_bytes());
    b
}

/// The test's view of guest memory: the memfd, mapped shared.
pub struct GuestMem {
    pub fd: OwnedFd,
    base: *mut u8,
}

impl GuestMem {
    /// A new zeroed guest memory.
    pub fn new() -> GuestMem {
        let fd = memfd(MEM_FILE);
        // SAFETY: a fresh shared mapping of our own memfd, MEM_FILE bytes long (its size).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MEM_FILE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap");
        GuestMem {
            fd,
            base: base.cast(),
        }
    }

    /// The memory table that shares this memory: both regions, from this memfd.
    pub fn table(&self) -> Vec<u8> {
        mem_table_body(&[
            (0, LO_SIZE, UADDR, 0),
            (HI_GPA, HI_SIZE, UADDR + HI_GPA, LO_SIZE),
        ])
    }

    /// Where the `len` bytes at guest-physical `gpa` lie in the mapping; they must be
    /// inside one region (the test only ever touches its own memory).
    fn ptr(&self, gpa: u64, len: usize) -> *mut u8 {
        let end = gpa + len as u64;
        let off = if end <= LO_SIZE {
            gpa
        } else if gpa >= HI_GPA && end <= HI_GPA + HI_SIZE {
            gpa - HI_GPA + LO_SIZE
        } else {
            panic!("{gpa:#x}+{len} is not guest memory");
        };
        // SAFETY: off + len <= MEM_FILE, the mapping's length.
        unsafe { self.base.add(off as usize) }
    }

    pub fn write(&self, gpa: u64, data: &[u8]) {
        // SAFETY: ptr() checked the range; the switch may read it concurrently (shared
        // memory with another process), which for plain bytes is what a guest does too.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr(gpa, data.len()), data.len())
        }
    }

    pub fn read(&self, gpa: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        // SAFETY: ptr() checked the range.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr(gpa, len), v.as_mut_ptr(), len) }
        v
    }

    fn atomic16(&self, gpa: u64) -> &AtomicU16 {
        let p = self.ptr(gpa, 2);
        assert!(p.align_offset(2) == 0);
        // SAFETY: p is 2-aligned, inside the mapping (which lives as long as self), and
        // only ever accessed atomically or by another process.
        unsafe { AtomicU16::from_ptr(p.cast()) }
    }

    pub fn store16(&self, gpa: u64, v: u16) {
        self.atomic16(gpa).store(v.to_le(), Ordering::Release);
    }

    pub fn load16(&self, gpa: u64) -> u16 {
        u16::from_le(self.atomic16(gpa).load(Ordering::Acquire))
    }

    /// Copies all of `other` into this memory.
    pub fn copy_from(&self, other: &GuestMem) {
        // SAFETY: both mappings are MEM_FILE bytes long and distinct.
        unsafe { std::ptr::copy_nonoverlapping(other.base, self.base, MEM_FILE as usize) }
    }
}

impl Default for GuestMem {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for GuestMem {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in new().
        unsafe { libc::munmap(self.base.cast(), MEM_FILE as usize) };
    }
}

/// Where a ring and its buffers lie (guest-physical addresses).
#[derive(Clone, Copy)]
pub struct Layout {
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
    pub arena: (u64, u64),
}

/// One descriptor, as the test writes it.
#[derive(Debug, Clone, Copy)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub flags: u16,
    pub next: u16,
}

impl Desc {
    /// A descriptor without NEXT.
    pub fn new(addr: u64, len: u32, flags: u16) -> Desc {
        Desc {
            addr,
            len,
            flags,
            next: 0,
        }
    }
}

/// The driver side of one split ring in [`GuestMem`].
pub struct Ring {
    /// Virtqueue index (0: receive, 1: transmit).
    pub index: u32,
    l: Layout,
    /// Next available index to publish (free-running).
    avail_idx: u16,
    /// Next descriptor index to hand out.
    next_desc: u16,
    /// Next buffer address in the arena.
    arena_next: u64,
    /// Used entries consumed by [`Ring::take_used`] so far (free-running).
    seen_used: u16,
    pub kick: OwnedFd,
    pub call: OwnedFd,
}

impl Ring {
    fn new(index: u32, l: Layout) -> Ring {
        Ring {
            index,
            l,
            avail_idx: 0,
            next_desc: 0,
            arena_next: l.arena.0,
            seen_used: 0,
            kick: eventfd(),
            call: eventfd(),
        }
    }

    /// The guest-physical address of the used ring.
    pub fn used_gpa(&self) -> u64 {
        self.l.used
    }

    /// SET_VRING_ADDR's body for this ring; with `log`, VHOST_VRING_F_LOG and that
    /// log address.
    pub fn addr_body(&self, log: Option<u64>) -> Vec<u8> {
        let mut addr = self.index.to_le_bytes().to_vec();
        addr.extend_from_slice(&u32::from(log.is_some()).to_le_bytes()); // flags
        for a in [self.l.desc, self.l.used, self.l.avail] {
            addr.extend_from_slice(&(UADDR + a).to_le_bytes());
        }
        addr.extend_from_slice(&log.unwrap_or(0).to_le_bytes());
        addr
    }

    /// `n` consecutive descriptor indices (modulo the ring size).
    pub fn descs(&mut self, n: usize) -> Vec<u16> {
        (0..n)
            .map(|_| {
                let i = self.next_desc;
                self.next_desc = (self.next_desc + 1) % QSIZE;
                i
            })
            .collect()
    }

    /// `len` bytes of buffer space in this ring's arena (64-byte aligned; the arena is
    /// reused round-robin, so buffers live until about 2 MiB later).
    pub fn alloc(&mut self, len: usize) -> u64 {
        arena_alloc(self.l.arena, &mut self.arena_next, len)
    }

    /// Writes descriptor `i` of the ring's table.
    pub fn write_desc(&self, mem: &GuestMem, i: u16, d: Desc) {
        write_table_entry(mem, self.l.desc, i, d);
    }

    /// The next available index this ring will publish.
    pub fn avail_idx(&self) -> u16 {
        self.avail_idx
    }

    /// Makes `heads` available (ring entries, then one `avail.idx` store with Release)
    /// and kicks.
    pub fn publish(&mut self, mem: &GuestMem, heads: &[u16]) {
        for &h in heads {
            let slot = self.l.avail + 4 + 2 * u64::from(self.avail_idx % QSIZE);
            mem.write(slot, &h.to_le_bytes());
            self.avail_idx = self.avail_idx.wrapping_add(1);
        }
        mem.store16(self.l.avail + 2, self.avail_idx);
        self.kick();
    }

    /// Stores `avail.idx = idx` as it is (a lie, or the truth again) and kicks; the
    /// ring's own count is left alone.
    pub fn set_avail_idx(&self, mem: &GuestMem, idx: u16) {
        mem.store16(self.l.avail + 2, idx);
        self.kick();
    }

    /// Writes head `head` into available slot `pos` (free-running) without publishing.
    pub fn write_avail_slot(&self, mem: &GuestMem, pos: u16, head: u16) {
        mem.write(
            self.l.avail + 4 + 2 * u64::from(pos % QSIZE),
            &head.to_le_bytes(),
        );
    }

    pub fn kick(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: write(2) of 8 bytes to our own eventfd.
        let n = unsafe { libc::write(self.kick.as_raw_fd(), one.as_ptr().cast(), 8) };
        assert_eq!(n, 8, "kick");
    }

    /// The switch's `used.idx`.
    pub fn used_idx(&self, mem: &GuestMem) -> u16 {
        mem.load16(self.l.used + 2)
    }

    /// Used element at free-running position `pos`: (id, len).
    pub fn used_elem(&self, mem: &GuestMem, pos: u16) -> (u32, u32) {
        let b = mem.read(self.l.used + 4 + 8 * u64::from(pos % QSIZE), 8);
        (
            u32::from_le_bytes(b[..4].try_into().unwrap()),
            u32::from_le_bytes(b[4..].try_into().unwrap()),
        )
    }

    /// Waits until the switch has used everything made available.
    pub fn wait_all_used(&self, mem: &GuestMem, what: &str) {
        let want = self.avail_idx;
        wait_for(Duration::from_secs(5), what, || {
            (self.used_idx(mem) == want).then_some(())
        });
    }

    /// The used elements written since the last call.
    pub fn take_used(&mut self, mem: &GuestMem) -> Vec<(u32, u32)> {
        let upto = self.used_idx(mem);
        let mut v = Vec::new();
        while self.seen_used != upto {
            v.push(self.used_elem(mem, self.seen_used));
            self.seen_used = self.seen_used.wrapping_add(1);
        }
        v
    }

    /// Skips the used elements written so far (they are not looked at).
    pub fn skip_used(&mut self, mem: &GuestMem) {
        self.seen_used = self.used_idx(mem);
    }
}

/// Writes entry `i` of the descriptor table at `table`.
pub fn write_table_entry(mem: &GuestMem, table: u64, i: u16, d: Desc) {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&d.addr.to_le_bytes());
    b[8..12].copy_from_slice(&d.len.to_le_bytes());
    b[12..14].copy_from_slice(&d.flags.to_le_bytes());
    b[14..16].copy_from_slice(&d.next.to_le_bytes());
    mem.write(table + 16 * u64::from(i), &b);
}

/// A front-end with queue pair 0 running over shared memory.
pub struct Guest {
    pub front: Front,
    pub mem: GuestMem,
    /// Virtqueue 0: the guest's receive queue (the switch writes frames into it).
    pub rx: Ring,
    /// Virtqueue 1: the guest's transmit queue (the switch reads frames from it).
    pub tx: Ring,
    /// The virtio features acked.
    pub features: u64,
}

impl Guest {
    /// Connects to `path` and sets up queue pair 0 as a VMM does, acking VERSION_1,
    /// PROTOCOL_FEATURES, INDIRECT_DESC and `extra` (each must be offered). Every step
    /// is acked (REPLY_ACK), so when this returns the rings run.
    pub fn connect(path: &Path, extra: u64) -> Guest {
        Self::connect_with(path, extra, 0)
    }

    /// [`Guest::connect`], also acking protocol features `proto` (each must be offered).
    pub fn connect_with(path: &Path, extra: u64, proto: u64) -> Guest {
        let features = F_VERSION_1 | F_PROTOCOL_FEATURES | F_INDIRECT_DESC | extra;
        let (front, mem) = negotiate(path, features, proto);
        let mut g = Guest {
            front,
            mem,
            rx: Ring::new(0, RX_LAYOUT),
            tx: Ring::new(1, TX_LAYOUT),
            features,
        };
        // No interrupts wanted: the test polls the used rings.
        g.mem.store16(RX_LAYOUT.avail, AVAIL_F_NO_INTERRUPT);
        g.mem.store16(TX_LAYOUT.avail, AVAIL_F_NO_INTERRUPT);
        for r in [&g.rx, &g.tx] {
            start_vring(
                &mut g.front,
                r.index,
                &r.addr_body(None),
                0,
                &r.call,
                &r.kick,
            );
        }
        g
    }

    /// Puts one frame, behind virtio-net header `vhdr`, on the transmit ring as a single
    /// readable descriptor, and kicks. Returns the head.
    pub fn send(&mut self, vhdr: &[u8; VNET_HDR], frame: &[u8]) -> u16 {
        let mut b = vhdr.to_vec();
        b.extend_from_slice(frame);
        let a = self.tx.alloc(b.len());
        self.mem.write(a, &b);
        self.send_chain(&[Desc::new(a, b.len() as u32, 0)])
    }

    /// Puts a chain made of `descs` on the transmit ring (consecutive descriptors, NEXT
    /// added to all but the last; their own `next` is ignored), and kicks. Returns the
    /// head.
    pub fn send_chain(&mut self, descs: &[Desc]) -> u16 {
        let head = self.write_chain(descs);
        self.tx.publish(&self.mem, &[head]);
        head
    }

    /// Writes a chain made of `descs` into the transmit ring's table (as
    /// [`Guest::send_chain`]) without making it available. Returns the head.
    pub fn write_chain(&mut self, descs: &[Desc]) -> u16 {
        let idx = self.tx.descs(descs.len());
        for (k, d) in descs.iter().enumerate() {
            let mut d = *d;
            if k + 1 < descs.len() {
                d.flags |= NEXT;
                d.next = idx[k + 1];
            }
            self.tx.write_desc(&self.mem, idx[k], d);
        }
        idx[0]
    }

    /// Copies `data` into the transmit arena; returns its guest-physical address.
    pub fn tx_bytes(&mut self, data: &[u8]) -> u64 {
        let a = self.tx.alloc(data.len().max(1));
        self.mem.write(a, data);
        a
    }

    /// Waits until the switch has completed every transmit chain made available.
    pub fn tx_done(&self) {
        self.tx
            .wait_all_used(&self.mem, "the switch to complete the tx chains");
    }

    /// Makes `n` receive buffers of `len` bytes available (one writable descriptor
    /// each); returns (head, address) of each.
    pub fn post_rx(&mut self, n: usize, len: u32) -> Vec<(u16, u64)> {
        let mut v = Vec::new();
        for _ in 0..n {
            let a = self.rx.alloc(len as usize);
            let i = self.rx.descs(1)[0];
            self.rx.write_desc(&self.mem, i, Desc::new(a, len, WRITE));
            v.push((i, a));
        }
        let heads: Vec<u16> = v.iter().map(|&(h, _)| h).collect();
        self.rx.publish(&self.mem, &heads);
        v
    }

    /// Starts a migration's dirty logging as QEMU does: SET_LOG_BASE with `log`
    /// (`size` bytes of it from offset 0; the reply echoes the request), SET_FEATURES
    /// with VHOST_F_LOG_ALL, and SET_VRING_ADDR with VHOST_VRING_F_LOG at each used ring.
    pub fn start_logging(&mut self, log: RawFd, size: u64) {
        self.set_log_base(log, size);
        self.front.must(
            SET_FEATURES,
            &(self.features | F_LOG_ALL).to_le_bytes(),
            &[],
        );
        for r in [&self.rx, &self.tx] {
            self.front
                .must(SET_VRING_ADDR, &r.addr_body(Some(r.used_gpa())), &[]);
        }
    }

    /// SET_LOG_BASE with `log` (`size` bytes of it from offset 0): the first log of
    /// [`Guest::start_logging`], or a replacement while logging, as QEMU sends when guest
    /// memory grows. Returns once vswitchd replied, checking the reply echoes the request.
    pub fn set_log_base(&mut self, log: RawFd, size: u64) {
        let body = log_base_body(size, 0);
        self.front.send(SET_LOG_BASE, &body, &[log]);
        let reply = self.front.reply().expect("SET_LOG_BASE's reply");
        assert_eq!(reply, body, "SET_LOG_BASE's reply echoes the log");
    }

    /// Ends the logging: SET_FEATURES without VHOST_F_LOG_ALL, rings without the flag.
    pub fn stop_logging(&mut self) {
        self.front
            .must(SET_FEATURES, &self.features.to_le_bytes(), &[]);
        for r in [&self.rx, &self.tx] {
            self.front.must(SET_VRING_ADDR, &r.addr_body(None), &[]);
        }
    }

    /// Replaces guest memory with a new memfd holding a copy of the old one
    /// (SET_MEM_TABLE, acked). The old mapping is released here; vswitchd releases its own
    /// once no burst uses it.
    pub fn swap_memory(&mut self) {
        let m = GuestMem::new();
        m.copy_from(&self.mem);
        let fd = m.fd.as_raw_fd();
        self.front.must(SET_MEM_TABLE, &m.table(), &[fd, fd]);
        self.mem = m;
    }
}

/// No GSO.
pub const GSO_NONE: u8 = 0;
/// VIRTIO_NET_HDR_GSO_UDP, which the switch never takes.
pub const GSO_UDP: u8 = 3;

/// An Ethernet/IPv4/TCP frame of `len` bytes from `src` to `dst` (valid IPv4 header
/// checksum, TCP checksum left for the offload: the pseudo-header sum, as a driver that
/// asks for NEEDS_CSUM leaves it).
pub fn tcp4_frame(src: [u8; 6], dst: [u8; 6], len: usize) -> Vec<u8> {
    assert!(len >= 54);
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - 14) as u16;
    let mut ip = [
        0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 9, 10, 0, 0, 1,
    ];
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    let sum = fold(
        ip.chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum(),
    );
    ip[10..12].copy_from_slice(&(!sum).to_be_bytes());
    f.extend_from_slice(&ip);
    let tcp_len = ip_len - 20;
    let mut tcp = [0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // PSH ACK
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    // Pseudo-header sum: addresses, protocol, TCP length.
    let pseudo = fold(0x0a00 + 0x0009 + 0x0a00 + 0x0001 + 6 + u32::from(tcp_len));
    tcp[16..18].copy_from_slice(&pseudo.to_be_bytes());
    f.extend_from_slice(&tcp);
    let mut i = 0u32;
    while f.len() < len {
        f.push((i % 251) as u8);
        i += 1;
    }
    f
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}
