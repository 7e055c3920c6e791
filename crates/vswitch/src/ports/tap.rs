//! Tap host ports: a tap device into the host's kernel stack (like Open vSwitch's internal
//! port), read and written in batches through io_uring.
//!
//! The device is opened with `IFF_TAP | IFF_NO_PI | IFF_VNET_HDR` and a 12-byte
//! virtio-net header (`TUNSETVNETHDRSZ`; virtio 1.2 §5.1.6, `num_buffers` unused), and
//! `TUNSETOFFLOAD` tells the kernel that this side takes partial checksums and TSO
//! frames (Linux `Documentation/networking/tuntap.rst`): large frames pass unsegmented in
//! both directions, with their offload metadata in the header.
//!
//! Receive: [`RX_BUFS`] reads are kept outstanding on one io_uring; a PMD reaps completed
//! ones from the completion queue (shared memory, no system call), processes them as one
//! burst, and resubmits their reads in one `io_uring_enter`. Transmit: a batch of frames
//! is copied into tx buffers and written with one submission of several writes.
//!
//! Locking is as for AF_XDP uplinks (see [`crate::ports::afxdp`]): the rx half belongs to the
//! PMD polling the tap, the tx half is locked per delivery batch.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Mutex;

use io_uring::{opcode, types, IoUring};

use crate::model::stats::{DropReason, PortCounters};
use crate::ports::frame::{BurstHandler, FrameLoc, Pkt, RxBurst, TxBatch, VirtioNetHdr, BURST};
use crate::ports::host::HostFrames;
use crate::ports::{Port, RxScratch};

/// Bytes of the virtio-net header before each frame (`virtio_net_hdr_mrg_rxbuf`).
pub const VNET_HDR_LEN: u32 = 12;
/// Bytes per buffer: the header and the largest (GSO) frame the kernel hands over.
pub const BUF_SIZE: u32 = 69_632;
/// Reads kept outstanding.
pub const RX_BUFS: u32 = 64;
/// Write buffers: one delivery batch.
pub const TX_BUFS: u32 = 64;

/// How long opening a busy tap waits for its previous owner to let go.
const TAP_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUN_F_CSUM: libc::c_ulong = 0x01;
const TUN_F_TSO4: libc::c_ulong = 0x02;
const TUN_F_TSO6: libc::c_ulong = 0x04;

/// Errors creating a tap port.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// `/dev/net/tun` could not be opened (no tun module, or not root).
    #[error("cannot open /dev/net/tun: {0}")]
    OpenTun(io::Error),
    /// An ioctl on the tap failed (`what` names it).
    #[error("tap {ifname}: {what} failed: {source}")]
    Ioctl {
        /// Interface.
        ifname: String,
        /// The ioctl.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
    /// io_uring could not be set up (kernel without io_uring, or io_uring disabled).
    #[error("tap {ifname}: io_uring setup failed: {source}")]
    Uring {
        /// Interface.
        ifname: String,
        /// Why.
        source: io::Error,
    },
    /// Buffers could not be mapped.
    #[error("cannot map tap buffers: {0}")]
    Mmap(io::Error),
}

/// An anonymous mapping of buffers the kernel writes into asynchronously (so not a
/// Rust-owned `Vec`: only completed buffers are ever viewed as slices).
struct Bufs {
    ptr: NonNull<u8>,
    len: usize,
}

impl Bufs {
    fn new(n: u32) -> Result<Self, TapError> {
        let len = (n * BUF_SIZE) as usize;
        // SAFETY: anonymous private mapping; no file, no fixed address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(TapError::Mmap(io::Error::last_os_error()));
        }
        Ok(Bufs {
            ptr: NonNull::new(p.cast()).expect("mmap returned NULL"),
            len,
        })
    }

    fn at(&self, i: u32) -> *mut u8 {
        // SAFETY: i < the buffer count, so the offset is inside the mapping.
        unsafe { self.ptr.as_ptr().add((i * BUF_SIZE) as usize) }
    }
}

impl Drop for Bufs {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; its ring is declared (so
        // dropped) before it, and TapPort::drop cancels the reads in flight first.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The receive half: reads in flight on the tap.
pub struct TapRx {
    ring: IoUring,
    fd: i32,
    /// Buffers whose frame has been processed and whose read is to be resubmitted.
    done: Vec<u32>,
    bufs: Bufs,
}

/// The transmit half: write buffers and their ring.
pub struct TapTx {
    ring: IoUring,
    fd: i32,
    /// Length of each buffer queued in the current batch, in order.
    lens: Vec<u32>,
    bufs: Bufs,
}

/// A tap port.
pub struct TapPort {
    /// Interface name.
    pub ifname: String,
    /// Interface index (0 if it could not be read).
    pub ifindex: u32,
    /// The tap is administratively up (kept current by the daemon's link watcher); a
    /// downed tap refuses writes, so frames for it are counted as `port_down` instead.
    link_up: std::sync::atomic::AtomicBool,
    /// Rx half (owner PMD only).
    pub rx: Mutex<TapRx>,
    /// Tx half (any PMD, per batch).
    pub tx: Mutex<TapTx>,
    ring_fd: i32,
    fd: OwnedFd,
}

// SAFETY: the raw buffer pointers are only dereferenced under the halves' mutexes (or by
// the owning PMD for rx buffers whose read completed), and the kernel writes only into
// buffers with a read in flight, which no thread views.
unsafe impl Send for TapRx {}
// SAFETY: as for Send; tx buffers are only touched under the tx mutex.
unsafe impl Send for TapTx {}

/// `struct ifreq` with the name and the flags member of its union.
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn ifreq(name: &str, flags: libc::c_short) -> IfReq {
    let mut r = IfReq {
        name: [0; 16],
        flags,
        _pad: [0; 22],
    };
    let b = name.as_bytes();
    r.name[..b.len().min(15)].copy_from_slice(&b[..b.len().min(15)]);
    r
}

impl TapPort {
    /// Whether the tap is up.
    #[inline]
    pub fn link_up(&self) -> bool {
        self.link_up.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records a link change (from the link watcher).
    pub fn set_link(&self, up: bool) {
        self.link_up.store(up, std::sync::atomic::Ordering::Relaxed);
    }

    /// Creates tap `ifname` (or attaches to an existing persistent one), sets the
    /// virtio-net header and offloads, brings it up, and posts the reads.
    pub fn open(ifname: &str) -> Result<Self, TapError> {
        let path = CString::new("/dev/net/tun").expect("no NUL");
        // SAFETY: open(2) with a NUL-terminated path.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        if raw < 0 {
            return Err(TapError::OpenTun(io::Error::last_os_error()));
        }
        // SAFETY: a fresh fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let err = |what: &'static str| TapError::Ioctl {
            ifname: ifname.into(),
            what,
            source: io::Error::last_os_error(),
        };
        // A tap of the same name that is busy may be a crashed vswitchd's: its io_uring
        // holds the tap's fd until the kernel tears the ring down, a moment after the
        // process died, so a restart right after kill -9 waits for that (up to 2 s).
        let deadline = std::time::Instant::now() + TAP_BUSY_WAIT;
        loop {
            let mut req = ifreq(ifname, IFF_TAP | IFF_NO_PI | IFF_VNET_HDR);
            // SAFETY: TUNSETIFF reads and writes a struct ifreq, which `req` is (40 bytes).
            if unsafe { libc::ioctl(raw, TUNSETIFF, &mut req) } == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBUSY) || std::time::Instant::now() > deadline {
                return Err(TapError::Ioctl {
                    ifname: ifname.into(),
                    what: "TUNSETIFF",
                    source: e,
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let hdr: libc::c_int = VNET_HDR_LEN as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads one int.
        if unsafe { libc::ioctl(raw, TUNSETVNETHDRSZ, &hdr) } < 0 {
            return Err(err("TUNSETVNETHDRSZ"));
        }
        // SAFETY: TUNSETOFFLOAD takes its argument by value.
        if unsafe { libc::ioctl(raw, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) } < 0 {
            return Err(err("TUNSETOFFLOAD"));
        }
        set_up(ifname).map_err(|source| TapError::Ioctl {
            ifname: ifname.into(),
            what: "SIOCSIFFLAGS (up)",
            source,
        })?;
        let uring = |source| TapError::Uring {
            ifname: ifname.into(),
            source,
        };
        let rx_ring = IoUring::new(RX_BUFS * 2).map_err(uring)?;
        let tx_ring = IoUring::new(TX_BUFS * 2).map_err(uring)?;
        let ring_fd = rx_ring.as_raw_fd();
        let mut rx = TapRx {
            ring: rx_ring,
            fd: raw,
            done: (0..RX_BUFS).collect(),
            bufs: Bufs::new(RX_BUFS)?,
        };
        rx.recycle();
        let cname = CString::new(ifname).map_err(|_| TapError::Ioctl {
            ifname: ifname.into(),
            what: "if_nametoindex",
            source: io::Error::from(io::ErrorKind::InvalidInput),
        })?;
        // SAFETY: if_nametoindex reads a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        Ok(TapPort {
            ifname: ifname.into(),
            ifindex,
            link_up: std::sync::atomic::AtomicBool::new(true),
            rx: Mutex::new(rx),
            tx: Mutex::new(TapTx {
                ring: tx_ring,
                fd: raw,
                lens: Vec::with_capacity(TX_BUFS as usize),
                bufs: Bufs::new(TX_BUFS)?,
            }),
            ring_fd,
            fd,
        })
    }

    /// The rx ring's fd: POLLIN when a read completed.
    pub fn poll_fd(&self) -> i32 {
        self.ring_fd
    }

    /// The tap's fd.
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

/// Sets `ifname`'s MTU (SIOCSIFMTU): a tap on a VNI gets the overlay's inner MTU, so
/// the host stack's segments fit the underlay once encapsulated.
pub fn set_mtu(ifname: &str, mtu: u32) -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nothing else owns.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    #[repr(C)]
    struct IfReqMtu {
        name: [u8; 16],
        mtu: libc::c_int,
        _pad: [u8; 20],
    }
    let mut req = IfReqMtu {
        name: [0; 16],
        mtu: mtu as libc::c_int,
        _pad: [0; 20],
    };
    let b = ifname.as_bytes();
    req.name[..b.len().min(15)].copy_from_slice(&b[..b.len().min(15)]);
    // SAFETY: SIOCSIFMTU reads a struct ifreq (name and the int member of its union).
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFMTU, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets `ifname`'s Ethernet address (SIOCSIFHWADDR): an internal port's
/// `Interface.mac` (`--ovsdb`).
pub fn set_mac(ifname: &str, mac: [u8; 6]) -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nothing else owns.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    #[repr(C)]
    struct IfReqHwaddr {
        name: [u8; 16],
        family: libc::sa_family_t,
        data: [u8; 14],
        _pad: [u8; 8],
    }
    let mut req = IfReqHwaddr {
        name: [0; 16],
        family: libc::ARPHRD_ETHER,
        data: [0; 14],
        _pad: [0; 8],
    };
    req.data[..6].copy_from_slice(&mac);
    let b = ifname.as_bytes();
    req.name[..b.len().min(15)].copy_from_slice(&b[..b.len().min(15)]);
    // SAFETY: SIOCSIFHWADDR reads a struct ifreq (name and the sockaddr member of its
    // union, 40 bytes in all as `req`).
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFHWADDR, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Brings `ifname` up (SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP).
fn set_up(ifname: &str) -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd nothing else owns.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let mut req = ifreq(ifname, 0);
    // SAFETY: SIOCGIFFLAGS reads and writes a struct ifreq.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    req.flags |= libc::IFF_UP as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads a struct ifreq.
    if unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl TapRx {
    /// Reaps up to `max` completed reads into `out` as (byte offset of the buffer in the
    /// rx area, bytes read including the virtio-net header). Failed and short reads are
    /// resubmitted and counted in the return's second value (runts).
    pub fn receive(&mut self, out: &mut Vec<(u32, u32)>, max: usize) -> (usize, u64) {
        out.clear();
        let mut bad = 0;
        let mut cq = self.ring.completion();
        while out.len() < max {
            let Some(c) = cq.next() else { break };
            let i = c.user_data() as u32;
            let r = c.result();
            if r < (VNET_HDR_LEN + 14) as i32 {
                if r >= 0 || r != -libc::ECANCELED {
                    bad += u64::from(r >= 0);
                }
                self.done.push(i);
                continue;
            }
            out.push((i * BUF_SIZE, r as u32));
        }
        cq.sync();
        drop(cq);
        for &(off, _) in out.iter() {
            self.done.push(off / BUF_SIZE);
        }
        (out.len(), bad)
    }

    /// Rx area base, for reading completed buffers.
    pub fn base(&self) -> (*const u8, usize) {
        (self.bufs.ptr.as_ptr(), self.bufs.len)
    }

    /// An empty contiguous buffer borrowed from the rx half: every tap frame lies in its
    /// read buffer, none is copied out (see [`HostFrames`]).
    fn no_linear(&self) -> &[u8] {
        &[]
    }

    /// Resubmits the reads of processed buffers, in one `io_uring_enter`.
    pub fn recycle(&mut self) {
        if self.done.is_empty() {
            return;
        }
        {
            let mut sq = self.ring.submission();
            for &i in &self.done {
                let e = opcode::Read::new(types::Fd(self.fd), self.bufs.at(i), BUF_SIZE)
                    .build()
                    .user_data(u64::from(i));
                // SAFETY: buffer i is ours until its completion is reaped; it lives as
                // long as the ring (same struct, dropped after it).
                if unsafe { sq.push(&e) }.is_err() {
                    break;
                }
            }
        }
        self.done.clear();
        let _ = self.ring.submit();
    }
}

impl TapTx {
    /// Starts a batch.
    pub fn begin(&mut self) {
        self.lens.clear();
    }

    /// The next free write buffer (virtio-net header then frame), or None when the batch
    /// is full.
    pub fn next_buf(&mut self) -> Option<&mut [u8]> {
        let i = self.lens.len() as u32;
        if i >= TX_BUFS {
            return None;
        }
        // SAFETY: buffer i is inside the mapping and not in flight (the previous batch
        // completed before `commit` returned); the caller holds the tx lock.
        Some(unsafe { std::slice::from_raw_parts_mut(self.bufs.at(i), BUF_SIZE as usize) })
    }

    /// Queues the buffer returned by the last [`TapTx::next_buf`] with `len` bytes.
    pub fn push(&mut self, len: u32) {
        self.lens.push(len);
    }

    /// Writes the batch: one submission, waits for the writes (a tap write completes
    /// without blocking). Returns (frames written, frame bytes written, frames refused).
    pub fn commit(&mut self) -> (u64, u64, u64) {
        let n = self.lens.len();
        if n == 0 {
            return (0, 0, 0);
        }
        {
            let mut sq = self.ring.submission();
            for (i, &len) in self.lens.iter().enumerate() {
                let e = opcode::Write::new(types::Fd(self.fd), self.bufs.at(i as u32), len)
                    .build()
                    .user_data(i as u64);
                // SAFETY: buffer i holds `len` bytes and stays untouched until its
                // completion is reaped below.
                let _ = unsafe { sq.push(&e) };
            }
        }
        let mut left = n;
        let (mut ok, mut bytes, mut bad) = (0u64, 0u64, 0u64);
        while left > 0 {
            if self.ring.submit_and_wait(left).is_err() {
                // Interrupted: keep waiting for the writes in flight.
                continue;
            }
            for c in self.ring.completion() {
                left -= 1;
                let len = self.lens[c.user_data() as usize];
                if c.result() == len as i32 {
                    ok += 1;
                    bytes += u64::from(len - VNET_HDR_LEN);
                } else {
                    bad += 1;
                }
            }
        }
        self.lens.clear();
        (ok, bytes, bad)
    }
}

impl Drop for TapPort {
    fn drop(&mut self) {
        // Reads in flight would write into rx buffers after they are unmapped: cancel
        // them and wait, before the fields (ring, buffers, fd) are dropped.
        let rx = self.rx.get_mut().unwrap_or_else(|e| e.into_inner());
        let e = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(u64::MAX);
        // SAFETY: a cancel request references no buffer.
        if unsafe { rx.ring.submission().push(&e) }.is_ok() {
            let _ = rx.ring.submit_and_wait(1);
        }
    }
}

/// The tap's bursts: completed reads handed to the pipeline in place, and delivery
/// batches written in one submission.
impl TapPort {
    /// Takes one burst of completed reads (each buffer a virtio-net header, whose
    /// offload fields travel with the frame, then the frame), runs `handler` on it, and
    /// resubmits the reads. Returns the frames taken.
    pub(crate) fn receive<H: BurstHandler>(
        &self,
        port: &Port,
        rx: &mut RxScratch,
        handler: &mut H,
    ) -> usize {
        let mut ring = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        let (n, runts) = ring.receive(&mut rx.tap_reads, BURST);
        if runts > 0 {
            port.counters(rx.pmd).drop(DropReason::Runt, runts);
        }
        if n == 0 {
            ring.recycle();
            return 0;
        }
        let (base, len) = ring.base();
        rx.pkts.clear();
        for &(off, got) in &rx.tap_reads {
            // SAFETY: the read into this buffer completed (`got` ≥ VNET_HDR_LEN + 14
            // bytes from `off`, inside the rx area) and it is not resubmitted before
            // `recycle` below.
            let h = unsafe { &*base.add(off as usize).cast::<[u8; 10]>() };
            rx.pkts.push(Pkt {
                loc: FrameLoc {
                    head: 0,
                    start: off + VNET_HDR_LEN,
                    end: 0,
                },
                len: got - VNET_HDR_LEN,
                vhdr: VirtioNetHdr::from_bytes(h),
                hash: 0,
                hashed: false,
            });
        }
        // SAFETY: the rx area lives as long as `ring`; the frames of `rx.pkts` are reads
        // that completed and are resubmitted only by `ring.recycle()` below, which needs
        // `ring` mutably and so cannot run while `frames` borrows it.
        let frames = unsafe { HostFrames::new(base, len, ring.no_linear()) };
        handler.handle(port, 0, &frames, &mut rx.pkts);
        ring.recycle();
        n
    }

    /// Writes `batch` to the tap in one io_uring submission: each frame keeps its offload
    /// metadata in the virtio-net header before it.
    pub(crate) fn transmit<'m, B: RxBurst<'m>>(
        &self,
        batch: &TxBatch<'_, 'm, B>,
        counters: &PortCounters,
    ) {
        if !self.link_up() {
            counters.drop(DropReason::PortDown, batch.items.len() as u64);
            return;
        }
        let hdr = VNET_HDR_LEN as usize;
        let mut tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        tx.begin();
        for it in batch.items {
            let len = batch.len(it) as usize;
            if hdr + len > BUF_SIZE as usize {
                counters.drop(DropReason::FrameTooBig, 1);
                continue;
            }
            let Some(buf) = tx.next_buf() else {
                counters.drop(DropReason::NoTxBuffer, 1);
                continue;
            };
            buf[..hdr].copy_from_slice(&batch.vhdr(it).to_bytes());
            let got = batch.read(it, 0, &mut buf[hdr..hdr + len]);
            if got != len {
                counters.drop(DropReason::BadDescriptor, 1);
                continue;
            }
            tx.push((hdr + len) as u32);
        }
        let (ok, bytes, bad) = tx.commit();
        drop(tx);
        if bad > 0 {
            counters.drop(DropReason::TxError, bad);
        }
        counters.tx_packets.add(ok);
        counters.tx_bytes.add(bytes);
    }
}
