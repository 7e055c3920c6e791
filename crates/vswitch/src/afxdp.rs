//! AF_XDP uplink ports: one XDP socket (XSK) per NIC rx queue, each with its own UMEM
//! and fill, completion, rx and tx rings (Linux `Documentation/networking/af_xdp.rst`),
//! through the `xdpilone` ring implementation.
//!
//! UMEM layout per socket: [`FRAMES`] frames of [`FRAME_SIZE`] bytes; the first half is
//! lent to the kernel through the fill ring for receiving, the second half is this side's
//! pool of transmit frames (a free list refilled from the completion ring). Nothing is
//! allocated per packet: rx descriptors are read into a per-PMD array, rx frames go back
//! to the fill ring after the burst, tx frames cycle between the free list and the tx
//! ring.
//!
//! Locking: the rx half ([`XskRx`]: rx + fill rings) is touched only by the PMD that owns
//! the queue; the tx half ([`XskTx`]: tx + completion rings, free frames) by any PMD
//! delivering to the uplink, under its mutex, once per batch. A thread holding a tx lock
//! never takes another lock, so the two kinds cannot deadlock.

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Mutex;

use nicoffload::{AfXdpMode, AfXdpRequest};
use xdpilone::xdp::XdpDesc;
use xdpilone::{
    CompletionQueue, FillQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig,
    User,
};

use crate::xdp::{XdpProgram, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};

/// Bytes per UMEM frame (one page: the largest aligned chunk size).
pub const FRAME_SIZE: u32 = 4096;
/// Frames per socket: half for rx (fill ring), half for tx.
pub const FRAMES: u32 = 2048;
/// Ring sizes (fill, completion, rx, tx): one half of the frames each.
const RING: u32 = FRAMES / 2;
/// Headroom the kernel leaves before a received frame in copy mode
/// (`XDP_PACKET_HEADROOM`).
const XDP_PACKET_HEADROOM: u32 = 256;
/// Largest frame one UMEM frame receives (bytes, Ethernet header to end of payload):
/// the frame minus the kernel's headroom.
pub const MAX_RX_FRAME: u32 = FRAME_SIZE - XDP_PACKET_HEADROOM;
/// Largest frame this side transmits from one UMEM frame (bytes).
pub const MAX_TX_FRAME: u32 = FRAME_SIZE;

/// `sockaddr_xdp.sxdp_flags` (include/uapi/linux/if_xdp.h).
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;

/// Errors opening an uplink.
#[derive(Debug, thiserror::Error)]
pub enum AfxdpError {
    /// The interface does not exist.
    #[error("no network interface {0:?}")]
    NoInterface(String),
    /// The interface could not be probed (nicoffload).
    #[error("cannot probe {iface}: {source}")]
    Probe {
        /// Interface.
        iface: String,
        /// Why.
        source: nicoffload::Error,
    },
    /// The mode asked for is not possible on this NIC.
    #[error("{iface}: AF_XDP mode {mode} unavailable: {reason}")]
    ModeUnavailable {
        /// Interface.
        iface: String,
        /// Mode asked for.
        mode: String,
        /// nicoffload's reason.
        reason: String,
    },
    /// More queues asked for than the NIC has.
    #[error("{iface}: queues={asked} but the interface has {has} rx queues")]
    TooManyQueues {
        /// Interface.
        iface: String,
        /// Asked for.
        asked: u16,
        /// The NIC's rx queues.
        has: u16,
    },
    /// Mapping the UMEM failed.
    #[error("cannot map {bytes} bytes of UMEM: {source}")]
    Mmap {
        /// Size.
        bytes: usize,
        /// Why.
        source: std::io::Error,
    },
    /// A socket step failed (`what`: umem, socket, fill/completion rings, rx/tx rings, bind).
    #[error("{iface} queue {queue}: AF_XDP {what} failed: errno {errno}")]
    Socket {
        /// Interface.
        iface: String,
        /// Queue.
        queue: u32,
        /// The step.
        what: &'static str,
        /// errno.
        errno: i32,
    },
    /// Loading or attaching the XDP program failed.
    #[error("{iface}: {source}")]
    Xdp {
        /// Interface.
        iface: String,
        /// Why.
        source: crate::xdp::XdpError,
    },
}

/// An anonymous, page-aligned mapping holding one socket's UMEM.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> Result<Self, AfxdpError> {
        // SAFETY: anonymous private mapping; no file, no fixed address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(AfxdpError::Mmap {
                bytes: len,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(Area {
            ptr: NonNull::new(p.cast()).expect("mmap returned NULL"),
            len,
        })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; the sockets using it were
        // dropped before (field order of `Xsk`).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The receive half of one socket: rx ring and fill ring. Owned by one PMD.
pub struct XskRx {
    rx: RingRx,
    fill: FillQueue,
    /// Frames (UMEM offsets) received and not yet given back to the fill ring.
    held: Vec<u64>,
}

/// The transmit half of one socket: tx ring, completion ring and free tx frames.
pub struct XskTx {
    tx: RingTx,
    comp: CompletionQueue,
    /// UMEM offsets of tx frames this side may fill.
    free: Vec<u64>,
    /// Descriptors of the batch being built.
    batch: Vec<XdpDesc>,
    /// Copy mode: the kernel transmits only inside sendmsg, so every batch needs a kick.
    copy_mode: bool,
}

/// One AF_XDP socket bound to one NIC rx queue.
pub struct Xsk {
    /// The NIC rx queue.
    pub queue: u32,
    /// Rx half (owner PMD only).
    pub rx: Mutex<XskRx>,
    /// Tx half (any PMD, per batch).
    pub tx: Mutex<XskTx>,
    /// Frames received on this socket (written by the owner PMD only, once per burst).
    pub rx_frames: crate::stats::Counter,
    fd: i32,
    base: NonNull<u8>,
    _user: User,
    _umem: UmemBox,
    _area: Area,
}

/// xdpilone's [`Umem`] holds a raw pointer to the area, so it is not `Send`; it is only
/// kept alive here (its fd registers the area with the kernel) and never used after setup.
struct UmemBox(#[allow(dead_code)] Umem);
// SAFETY: the Umem is never accessed after setup; dropping it only closes its fd.
unsafe impl Send for UmemBox {}
// SAFETY: as above: no method is called on it from any thread after setup.
unsafe impl Sync for UmemBox {}

// SAFETY: `base` points into `_area`, which lives as long as the Xsk; the bytes it
// reaches are accessed only for frames the accessing thread owns (a received frame before
// it is given back to the fill ring; a tx frame taken from the free list under the tx
// lock), so no two threads touch one frame at once.
unsafe impl Send for Xsk {}
// SAFETY: see `Send`; the rings are behind mutexes.
unsafe impl Sync for Xsk {}

impl Xsk {
    /// The socket's fd (POLLIN: frames in the rx ring).
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// The bytes of a received frame.
    ///
    /// # Safety
    ///
    /// `addr..addr+len` must be a frame the caller received on this socket's rx ring and
    /// has not yet given back with [`XskRx::recycle`].
    pub unsafe fn frame(&self, addr: u64, len: u32) -> &[u8] {
        // SAFETY: the kernel only hands out descriptors within the UMEM (it checks them
        // against the registered size); the caller owns the frame.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(addr as usize), len as usize) }
    }

    /// UMEM base pointer and length, for [`crate::pmd`]'s host frame source.
    pub fn area(&self) -> (*const u8, usize) {
        (self.base.as_ptr(), self._area.len)
    }
}

impl XskRx {
    /// Reads up to `out.capacity()` rx descriptors into `out` (cleared first); the frames
    /// are held until [`XskRx::recycle`].
    pub fn receive(&mut self, out: &mut Vec<XdpDesc>, max: u32) -> usize {
        out.clear();
        let mut r = self.rx.receive(max);
        for d in r.by_ref() {
            out.push(d);
            self.held.push(d.addr & !u64::from(FRAME_SIZE - 1));
        }
        r.release();
        out.len()
    }

    /// Gives held frames back to the kernel through the fill ring; wakes the driver
    /// when it asks (need_wakeup).
    pub fn recycle(&mut self) {
        if !self.held.is_empty() {
            let mut w = self.fill.fill(self.held.len() as u32);
            let n = w.insert(self.held.iter().copied()) as usize;
            w.commit();
            drop(w);
            self.held.drain(..n);
        }
        if self.fill.needs_wakeup() {
            self.fill.wake();
        }
    }
}

impl XskTx {
    /// Takes back frames the kernel finished sending.
    fn reclaim(&mut self) {
        let mut c = self.comp.complete(RING);
        for a in c.by_ref() {
            self.free.push(a & !u64::from(FRAME_SIZE - 1));
        }
        c.release();
    }

    /// Starts a batch: reclaims completed frames.
    pub fn begin(&mut self) {
        self.reclaim();
        self.batch.clear();
    }

    /// A free tx frame's UMEM offset, or None (drop: no_tx_buffer).
    pub fn take(&mut self) -> Option<u64> {
        self.free.pop()
    }

    /// Queues the frame at `addr` of `len` bytes in the batch.
    pub fn push(&mut self, addr: u64, len: u32) {
        self.batch.push(XdpDesc {
            addr,
            len,
            options: 0,
        });
    }

    /// Puts the batch on the tx ring and kicks the kernel. Returns frames the ring did
    /// not take (their frames go back to the free list; the caller counts them).
    pub fn commit(&mut self) -> usize {
        if self.batch.is_empty() {
            return 0;
        }
        let mut w = self.tx.transmit(self.batch.len() as u32);
        let n = w.insert(self.batch.iter().copied()) as usize;
        w.commit();
        drop(w);
        let lost = self.batch.len() - n;
        for d in self.batch.drain(n..) {
            self.free.push(d.addr);
        }
        if self.copy_mode || self.tx.needs_wakeup() {
            // Copy mode sends at most 32 frames per sendmsg (TX_BATCH_SIZE in
            // net/xdp/xsk.c); kick until the ring drains or the kernel stops taking.
            for _ in 0..(RING / 32) {
                self.tx.wake();
                if self.tx.pending() == 0 {
                    break;
                }
            }
        }
        self.batch.clear();
        lost
    }
}

/// Where a frame's bytes go in a tx frame.
impl Xsk {
    /// A writable view of tx frame `addr` (a frame from [`XskTx::take`]).
    ///
    /// # Safety
    ///
    /// `addr` must come from [`XskTx::take`] on this socket and not be pushed yet; the
    /// caller holds the tx lock.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn tx_frame(&self, addr: u64) -> &mut [u8] {
        // SAFETY: tx frames lie inside the area; the caller owns the frame exclusively.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base.as_ptr().add(addr as usize),
                FRAME_SIZE as usize,
            )
        }
    }
}

/// An AF_XDP uplink: the XDP program and one socket per rx queue.
pub struct AfxdpPort {
    /// Interface name.
    pub iface: String,
    /// Interface index.
    pub ifindex: u32,
    /// The mode in use.
    pub mode: AfXdpMode,
    /// Why that mode (nicoffload's reason, or the fallback taken).
    pub reason: String,
    /// The offload plan of the uplink.
    pub plan: nicoffload::OffloadPlan,
    /// One socket per rx queue, indexed by queue.
    pub xsks: Vec<Xsk>,
    prog: Mutex<Option<XdpProgram>>,
}

fn sock_err<'a>(
    iface: &'a str,
    queue: u32,
    what: &'static str,
) -> impl Fn(xdpilone::Errno) -> AfxdpError + 'a {
    move |e| AfxdpError::Socket {
        iface: iface.to_string(),
        queue,
        what,
        errno: e.get_raw(),
    }
}

/// Rx queues of `iface` (sysfs `/sys/class/net/IFACE/queues/rx-*`).
pub fn rx_queue_count(iface: &str) -> Option<u16> {
    let rd = std::fs::read_dir(format!("/sys/class/net/{iface}/queues")).ok()?;
    let n = rd
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    Some(n as u16)
}

impl AfxdpPort {
    /// Probes `iface`, picks the mode (`request`; see [`nicoffload::OffloadPlan`]), attaches
    /// the XDP program and opens one socket on each of rx queues `0..queues` (0: all).
    pub fn open(iface: &str, request: AfXdpRequest, queues: u16) -> Result<Self, AfxdpError> {
        let cname = CString::new(iface).map_err(|_| AfxdpError::NoInterface(iface.into()))?;
        // SAFETY: if_nametoindex reads a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(AfxdpError::NoInterface(iface.into()));
        }
        let caps = nicoffload::probe(iface).map_err(|source| AfxdpError::Probe {
            iface: iface.into(),
            source,
        })?;
        let needs = nicoffload::OffloadNeeds {
            afxdp_mode: request,
            ..Default::default()
        };
        let plan = nicoffload::OffloadPlan::new(&caps, &needs);
        let decision = plan
            .get(nicoffload::Job::AfXdp)
            .cloned()
            .expect("the plan has an AF_XDP decision");
        let Some(mut mode) = decision.afxdp_mode else {
            return Err(AfxdpError::ModeUnavailable {
                iface: iface.into(),
                mode: format!("{request:?}").to_lowercase(),
                reason: decision.reason,
            });
        };
        let mut reason = decision.reason.clone();
        let has = rx_queue_count(iface).unwrap_or(1).max(1);
        let nq = if queues == 0 { has } else { queues };
        if nq > has {
            return Err(AfxdpError::TooManyQueues {
                iface: iface.into(),
                asked: nq,
                has,
            });
        }
        let xdp_err = |source| AfxdpError::Xdp {
            iface: iface.into(),
            source,
        };
        let flags = |m: AfXdpMode| match m {
            AfXdpMode::Generic => XDP_FLAGS_SKB_MODE,
            _ => XDP_FLAGS_DRV_MODE,
        };
        let prog = match XdpProgram::attach(ifindex, u32::from(nq), flags(mode)) {
            Ok(p) => p,
            Err(e) if request == AfXdpRequest::Auto && mode != AfXdpMode::Generic => {
                reason = format!("{reason}; but {e}, so generic");
                mode = AfXdpMode::Generic;
                XdpProgram::attach(ifindex, u32::from(nq), XDP_FLAGS_SKB_MODE).map_err(xdp_err)?
            }
            Err(e) => return Err(xdp_err(e)),
        };
        let mut xsks = Vec::new();
        for q in 0..u32::from(nq) {
            // A socket of a run that just died may still be tearing down (its queue
            // answers EBUSY for a moment): retry for up to 3 s.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
            let x = loop {
                match open_xsk(iface, &cname, q, mode) {
                    Err(AfxdpError::Socket { errno, .. })
                        if errno == libc::EBUSY && std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    r => break r?,
                }
            };
            prog.insert(q, x.fd).map_err(xdp_err)?;
            xsks.push(x);
        }
        Ok(AfxdpPort {
            iface: iface.into(),
            ifindex,
            mode,
            reason,
            plan,
            xsks,
            prog: Mutex::new(Some(prog)),
        })
    }

    /// Detaches the XDP program (frames go back to the kernel stack). Idempotent; also
    /// done on drop.
    pub fn detach(&self) {
        if let Some(mut p) = self.prog.lock().unwrap_or_else(|e| e.into_inner()).take() {
            for x in &self.xsks {
                p.remove(x.queue);
            }
            p.detach();
        }
    }
}

impl Drop for AfxdpPort {
    fn drop(&mut self) {
        self.detach();
    }
}

fn open_xsk(iface: &str, cname: &CString, q: u32, mode: AfXdpMode) -> Result<Xsk, AfxdpError> {
    let area = Area::new((FRAMES * FRAME_SIZE) as usize)?;
    let slice = NonNull::slice_from_raw_parts(area.ptr, area.len);
    let cfg = UmemConfig {
        fill_size: RING,
        complete_size: RING,
        frame_size: FRAME_SIZE,
        headroom: 0,
        flags: 0,
    };
    // SAFETY: the area is a fresh page-aligned mapping of FRAMES * FRAME_SIZE bytes that
    // lives in the returned Xsk after the Umem (dropped first).
    let umem = unsafe { Umem::new(cfg, slice) }.map_err(sock_err(iface, q, "umem"))?;
    let mut info = IfInfo::invalid();
    info.from_name(cname)
        .map_err(sock_err(iface, q, "interface"))?;
    info.set_queue(q);
    let sock = Socket::with_shared(&info, &umem).map_err(sock_err(iface, q, "socket"))?;
    let device = umem
        .fq_cq(&sock)
        .map_err(sock_err(iface, q, "fill/completion rings"))?;
    let bind_flags = XDP_USE_NEED_WAKEUP
        | if mode == AfXdpMode::ZeroCopy {
            XDP_ZEROCOPY
        } else {
            XDP_COPY
        };
    let sc = SocketConfig {
        rx_size: std::num::NonZeroU32::new(RING),
        tx_size: std::num::NonZeroU32::new(RING),
        bind_flags,
    };
    let user = umem
        .rx_tx(&sock, &sc)
        .map_err(sock_err(iface, q, "rx/tx rings"))?;
    let rx = user.map_rx().map_err(sock_err(iface, q, "rx ring mmap"))?;
    let tx = user.map_tx().map_err(sock_err(iface, q, "tx ring mmap"))?;
    umem.bind(&user).map_err(sock_err(iface, q, "bind"))?;
    let (mut fill, comp) = device.into_parts();
    // Lend the first half of the frames to the kernel for receiving.
    let mut w = fill.fill(RING);
    let n = w.insert((0..RING).map(|i| u64::from(i * FRAME_SIZE)));
    w.commit();
    drop(w);
    debug_assert_eq!(n, RING);
    let fd = rx.as_raw_fd();
    Ok(Xsk {
        queue: q,
        rx: Mutex::new(XskRx {
            rx,
            fill,
            held: Vec::with_capacity(RING as usize),
        }),
        tx: Mutex::new(XskTx {
            tx,
            comp,
            free: (RING..FRAMES).map(|i| u64::from(i * FRAME_SIZE)).collect(),
            batch: Vec::with_capacity(RING as usize),
            copy_mode: mode != AfXdpMode::ZeroCopy,
        }),
        rx_frames: Default::default(),
        fd,
        base: area.ptr,
        _user: user,
        _umem: UmemBox(umem),
        _area: area,
    })
}
