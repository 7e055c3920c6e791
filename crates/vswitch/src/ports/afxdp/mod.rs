//! AF_XDP uplink ports: one XDP socket (XSK) per NIC rx queue, each with its own UMEM
//! and fill, completion, rx and tx rings (Linux `Documentation/networking/af_xdp.rst`),
//! through the `xdpilone` ring implementation.
//!
//! UMEM layout per socket: [`FRAMES`] frames of [`FRAME_SIZE`] bytes; the first
//! `RX_RING` are lent to the kernel through the fill ring for receiving, the other
//! `TX_RING` are this side's pool of transmit frames (a free list refilled from the completion ring). Nothing is
//! allocated per packet: rx descriptors are read into a per-PMD array, rx frames go back
//! to the fill ring after the burst, tx frames cycle between the free list and the tx
//! ring.
//!
//! Multi-buffer (`XDP_USE_SG`, `af_xdp.rst` "Multi-Buffer Support", Linux ≥ 6.6): a frame
//! larger than one UMEM frame arrives as a chain of descriptors, all but the last with
//! `XDP_PKT_CONTD`; the chain is copied into one contiguous per-socket buffer for the
//! switch (jumbo frames are rare, and everything after rx wants one slice). On transmit a
//! large frame is written over several tx frames chained the same way. Limits: at most
//! [`MAX_SG_FRAME`] bytes per frame (17 descriptors, the kernel's `MAX_SKB_FRAGS` in copy
//! mode), and never more than the interface's MTU plus an Ethernet and a VLAN header;
//! anything larger is dropped and counted (`frame_too_big`). Without multi-buffer (an
//! older kernel) the limits are [`MAX_RX_FRAME`] and [`MAX_TX_FRAME`], and frames the
//! kernel could not place show in the socket's `rx_dropped` statistic.
//!
//! Locking: the rx half ([`XskRx`]: rx + fill rings) is touched only by the PMD that owns
//! the queue; the tx half ([`XskTx`]: tx + completion rings, free frames) by any PMD
//! delivering to the uplink, under its mutex, once per batch. A thread holding a tx lock
//! never takes another lock, so the two kinds cannot deadlock.

pub(crate) mod io;
pub mod xdp;

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

use nicoffload::{AfXdpMode, AfXdpRequest};
use xdpilone::xdp::XdpDesc;
use xdpilone::{
    CompletionQueue, FillQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig,
    User,
};

use crate::ports::afxdp::xdp::{XdpProgram, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};

/// Bytes per UMEM frame (one page: the largest aligned chunk size).
pub const FRAME_SIZE: u32 = 4096;
/// Receive ring sizes (fill and rx), in frames: all lent to the kernel. Deep enough to
/// hold what arrives while the PMD is off its core (a 2 ms time slice at 2 Mpps): with
/// 1024, a PMD sharing a core with another busy thread lost most of a 0.3 Mpps stream
/// to `rx_fill_ring_empty` (scripts/bench-overlay.sh).
const RX_RING: u32 = 4096;
/// Transmit ring sizes (tx and completion), in frames: this side's pool of tx frames.
const TX_RING: u32 = 2048;
/// Frames per socket: `RX_RING` for receiving, then `TX_RING` for transmitting
/// (24 MiB of UMEM).
pub const FRAMES: u32 = RX_RING + TX_RING;
/// Headroom the kernel leaves before a received frame in copy mode
/// (`XDP_PACKET_HEADROOM`).
const XDP_PACKET_HEADROOM: u32 = 256;
/// Largest frame one UMEM frame receives (bytes, Ethernet header to end of payload):
/// the frame minus the kernel's headroom.
pub const MAX_RX_FRAME: u32 = FRAME_SIZE - XDP_PACKET_HEADROOM;
/// Largest frame this side transmits from one UMEM frame (bytes).
pub const MAX_TX_FRAME: u32 = FRAME_SIZE;
/// Most descriptors in one multi-buffer frame: the kernel's `MAX_SKB_FRAGS` (17), which
/// bounds a copy-mode transmit (net/xdp/xsk.c `xsk_build_skb`).
pub const MAX_SG_DESCS: u32 = 17;
/// Largest frame with multi-buffer, either way (bytes): enough for a 64 KiB IP packet
/// with Ethernet and VLAN headers.
pub const MAX_SG_FRAME: u32 = MAX_SG_DESCS * FRAME_SIZE;

/// `sockaddr_xdp.sxdp_flags` (include/uapi/linux/if_xdp.h).
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_USE_SG: u16 = 1 << 4;
/// `xdp_desc.options`: more descriptors of this frame follow.
const XDP_PKT_CONTD: u32 = 1;

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
        source: crate::ports::afxdp::xdp::XdpError,
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
    /// The UMEM (for copying multi-buffer chains out of it).
    base: NonNull<u8>,
    umem_len: usize,
    /// Multi-buffer frames of the current burst, each contiguous; the chain being
    /// assembled starts at `chain_start` (kept across bursts if unfinished).
    linear: Vec<u8>,
    chain_start: usize,
    in_chain: bool,
    /// The chain being assembled is dropped at its end (too long, or a bad descriptor).
    chain_bad: Option<RxDrop>,
}

/// A frame of an rx burst: UMEM bytes `off..off+len` (`linear: false`), or bytes
/// `off..off+len` of the socket's contiguous buffer of multi-buffer frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxFrame {
    /// Offset in the UMEM or in the contiguous buffer.
    pub off: u32,
    /// Bytes (Ethernet header to end of payload).
    pub len: u32,
    /// The frame came in several descriptors and was copied into the contiguous buffer.
    pub linear: bool,
}

/// Why a received frame was dropped before the switch saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxDrop {
    /// A chain longer than [`MAX_SG_FRAME`].
    TooBig,
    /// A descriptor outside the UMEM, or a frame shorter than an Ethernet header.
    Bad,
}

/// What one [`XskRx::receive`] produced besides the frames.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxDrops {
    /// Chains longer than [`MAX_SG_FRAME`].
    pub too_big: u64,
    /// Bad descriptors and runts.
    pub bad: u64,
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
    /// Multi-buffer is on: frames may span several tx frames.
    sg: bool,
    /// The tx frames one TSO frame is segmented into, and their buffers (reused).
    pub(crate) seg_addrs: Vec<u64>,
    pub(crate) seg_bufs: Vec<io::TxBuf>,
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
    pub rx_frames: crate::model::stats::Counter,
    /// Multi-buffer (`XDP_USE_SG`) is on for this socket.
    pub sg: bool,
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

    /// UMEM base pointer and length, for [`crate::datapath::pmd`]'s host frame source.
    pub fn area(&self) -> (*const u8, usize) {
        (self.base.as_ptr(), self._area.len)
    }

    /// The kernel's counters of this socket (`getsockopt(XDP_STATISTICS)`): frames it
    /// dropped or could not place, which the switch never saw.
    pub fn kernel_stats(&self) -> KernelXskStats {
        match self._user.statistics_v2() {
            Ok(s) => KernelXskStats {
                rx_dropped: s.rx_dropped,
                rx_invalid_descs: s.rx_invalid_descs,
                tx_invalid_descs: s.tx_invalid_descs,
                rx_ring_full: s.rx_ring_full,
                rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
                tx_ring_empty_descs: s.tx_ring_empty_descs,
            },
            Err(_) => KernelXskStats::default(),
        }
    }
}

/// `struct xdp_statistics` (include/uapi/linux/if_xdp.h) of one socket, or summed over an
/// uplink's sockets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelXskStats {
    /// Frames the kernel dropped for this socket (e.g. larger than a UMEM frame without
    /// multi-buffer, or no fill-ring frame for a whole multi-buffer chain).
    pub rx_dropped: u64,
    /// Invalid descriptors on the fill ring.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors on the tx ring (e.g. a frame larger than the kernel accepts).
    pub tx_invalid_descs: u64,
    /// Frames dropped because the rx ring was full (the PMD fell behind).
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the tx ring was empty when the kernel looked for frames.
    pub tx_ring_empty_descs: u64,
}

impl std::ops::AddAssign for KernelXskStats {
    fn add_assign(&mut self, o: Self) {
        self.rx_dropped += o.rx_dropped;
        self.rx_invalid_descs += o.rx_invalid_descs;
        self.tx_invalid_descs += o.tx_invalid_descs;
        self.rx_ring_full += o.rx_ring_full;
        self.rx_fill_ring_empty_descs += o.rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += o.tx_ring_empty_descs;
    }
}

impl XskRx {
    /// Reads up to `max` rx descriptors and turns them into frames in `out` (cleared
    /// first): a one-descriptor frame stays in the UMEM, a multi-buffer chain is copied
    /// into the contiguous buffer ([`XskRx::linear`]). A chain cut by `max` is finished
    /// by the next call. The UMEM frames are held until [`XskRx::recycle`]. Returns the
    /// frames dropped here, by reason.
    pub fn receive(&mut self, out: &mut Vec<RxFrame>, max: u32) -> RxDrops {
        out.clear();
        if self.in_chain {
            self.linear.drain(..self.chain_start);
        } else {
            self.linear.clear();
        }
        self.chain_start = 0;
        let mut drops = RxDrops::default();
        let mut r = self.rx.receive(max);
        for d in r.by_ref() {
            self.held.push(d.addr & !u64::from(FRAME_SIZE - 1));
            let more = d.options & XDP_PKT_CONTD != 0;
            let inside = (d.addr as usize)
                .checked_add(d.len as usize)
                .is_some_and(|end| end <= self.umem_len);
            if !self.in_chain && !more {
                if inside && d.len >= 14 {
                    out.push(RxFrame {
                        off: d.addr as u32,
                        len: d.len,
                        linear: false,
                    });
                } else {
                    drops.bad += 1;
                }
                continue;
            }
            if !self.in_chain {
                self.in_chain = true;
                self.chain_start = self.linear.len();
                self.chain_bad = None;
            }
            if !inside {
                self.chain_bad = Some(RxDrop::Bad);
            } else if self.linear.len() - self.chain_start + d.len as usize > MAX_SG_FRAME as usize
            {
                self.chain_bad.get_or_insert(RxDrop::TooBig);
            } else if self.chain_bad.is_none() {
                // SAFETY: `addr..addr+len` lies inside the UMEM (checked above) and the
                // kernel handed this frame to us: it is not written until recycled.
                let b = unsafe {
                    std::slice::from_raw_parts(
                        self.base.as_ptr().add(d.addr as usize),
                        d.len as usize,
                    )
                };
                self.linear.extend_from_slice(b);
            }
            if !more {
                self.in_chain = false;
                let len = self.linear.len() - self.chain_start;
                let bad = match self.chain_bad.take() {
                    None if len >= 14 => None,
                    None => Some(RxDrop::Bad),
                    b => b,
                };
                match bad {
                    None => out.push(RxFrame {
                        off: self.chain_start as u32,
                        len: len as u32,
                        linear: true,
                    }),
                    Some(why) => {
                        match why {
                            RxDrop::TooBig => drops.too_big += 1,
                            RxDrop::Bad => drops.bad += 1,
                        }
                        self.linear.truncate(self.chain_start);
                    }
                }
                self.chain_start = self.linear.len();
            }
        }
        r.release();
        drops
    }

    /// The contiguous buffer of this burst's multi-buffer frames ([`RxFrame::linear`]).
    pub fn linear(&self) -> &[u8] {
        &self.linear
    }

    /// Gives held frames back to the kernel through the fill ring; wakes the driver
    /// when it asks (need_wakeup).
    pub fn recycle(&mut self) {
        // Several calls when needed: xdpilone's `fill(n)` offers only the slots its cached
        // consumer head shows until it believes the ring full (then it re-reads the head).
        while !self.held.is_empty() {
            let mut w = self.fill.fill(self.held.len() as u32);
            let n = w.insert(self.held.iter().copied()) as usize;
            w.commit();
            drop(w);
            if n == 0 {
                break;
            }
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
        let mut c = self.comp.complete(TX_RING);
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

    /// Returns a frame taken but not pushed to the free list.
    pub fn give_back(&mut self, addr: u64) {
        self.free.push(addr);
    }

    /// Free tx frames (a frame of `len` bytes needs `len.div_ceil(FRAME_SIZE)`).
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// Ensures `n` free tx frames if the kernel can give them back: when short, hands the
    /// batch so far to the kernel (the kick sends it; copy mode completes frames as it
    /// sends) and reclaims completions. Returns the frames the ring did not take (as
    /// [`XskTx::commit`]) and whether `n` frames are now free.
    pub fn make_room(&mut self, n: usize) -> (usize, bool) {
        if self.free.len() >= n {
            return (0, true);
        }
        let lost = self.commit();
        self.reclaim();
        (lost, self.free.len() >= n)
    }

    /// Multi-buffer is on: a frame may span several tx frames ([`XskTx::push_frag`]).
    pub fn sg(&self) -> bool {
        self.sg
    }

    /// Queues the frame at `addr` of `len` bytes in the batch.
    pub fn push(&mut self, addr: u64, len: u32) {
        self.push_frag(addr, len, false);
    }

    /// Queues one piece of a multi-buffer frame; `more`: further pieces of the same frame
    /// follow (`XDP_PKT_CONTD`).
    pub fn push_frag(&mut self, addr: u64, len: u32, more: bool) {
        self.batch.push(XdpDesc {
            addr,
            len,
            options: if more { XDP_PKT_CONTD } else { 0 },
        });
    }

    /// Puts the batch on the tx ring and kicks the kernel. Returns frames the ring did
    /// not take (their tx frames go back to the free list; the caller counts them). A
    /// multi-buffer frame is put on the ring whole or not at all.
    pub fn commit(&mut self) -> usize {
        if self.batch.is_empty() {
            return 0;
        }
        // The ring's true free space from the shared heads: xdpilone's `transmit(n)`
        // refreshes its cached consumer head only when it believes the ring full, so one
        // call may offer fewer slots than are free; insert in as many calls as it takes.
        let free = (TX_RING - self.tx.pending().min(TX_RING)) as usize;
        let mut cut = free.min(self.batch.len());
        while cut > 0 && self.batch[cut - 1].options & XDP_PKT_CONTD != 0 {
            cut -= 1;
        }
        let mut n = 0;
        while n < cut {
            let mut w = self.tx.transmit((cut - n) as u32);
            let k = w.insert(self.batch[n..cut].iter().copied()) as usize;
            w.commit();
            drop(w);
            if k == 0 {
                break;
            }
            n += k;
        }
        let lost = self.batch[n..]
            .iter()
            .filter(|d| d.options & XDP_PKT_CONTD == 0)
            .count();
        for d in self.batch.drain(n..) {
            self.free.push(d.addr);
        }
        if self.copy_mode || self.tx.needs_wakeup() {
            // Copy mode sends at most 32 frames per sendmsg (TX_BATCH_SIZE in
            // net/xdp/xsk.c); kick until the ring drains or the kernel stops taking.
            for _ in 0..(TX_RING / 32) {
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
    /// Multi-buffer (`XDP_USE_SG`) is on for every socket.
    pub sg: bool,
    /// The interface is administratively up and has carrier (`IFF_UP | IFF_RUNNING`),
    /// kept current by [`crate::link::LinkWatch`].
    link_up: AtomicBool,
    /// The interface's MTU (bytes of IP packet), kept current like `link_up`.
    mtu: AtomicU32,
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
    /// Whether the interface can send (up, with carrier).
    #[inline]
    pub fn link_up(&self) -> bool {
        self.link_up.load(Ordering::Relaxed)
    }

    /// The interface's MTU (bytes).
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.mtu.load(Ordering::Relaxed)
    }

    /// Records a link change (from the link watcher).
    pub fn set_link(&self, up: bool, mtu: u32) {
        self.link_up.store(up, Ordering::Relaxed);
        self.mtu.store(mtu, Ordering::Relaxed);
    }

    /// Largest frame the uplink transmits (bytes, Ethernet header to end of payload):
    /// the MTU plus an Ethernet and a VLAN header, at most one UMEM frame without
    /// multi-buffer and [`MAX_SG_FRAME`] with it.
    #[inline]
    pub fn max_tx_frame(&self) -> u32 {
        let umem = if self.sg { MAX_SG_FRAME } else { MAX_TX_FRAME };
        (self.mtu() + 18).min(umem)
    }

    /// The uplink's part of a `show` view.
    pub fn show(&self) -> crate::ports::show::ShowAfxdp {
        crate::ports::show::ShowAfxdp {
            mode: self.mode.to_string(),
            reason: self.reason.clone(),
            queues: self.xsks.len() as u16,
            rx_per_queue: self.xsks.iter().map(|q| q.rx_frames.get()).collect(),
            multi_buffer: self.sg,
            mtu: self.mtu(),
            max_frame: self.max_tx_frame(),
            kernel: self.kernel_stats(),
        }
    }

    /// The kernel's socket counters summed over the uplink's sockets.
    pub fn kernel_stats(&self) -> KernelXskStats {
        let mut t = KernelXskStats::default();
        for x in &self.xsks {
            t += x.kernel_stats();
        }
        t
    }

    /// Probes `iface`, picks the mode (`request`; see [`nicoffload::OffloadPlan`]), attaches
    /// the XDP program and opens one socket on each of rx queues `0..queues` (0: all).
    pub fn open(
        iface: &str,
        request: AfXdpRequest,
        queues: u16,
        filter: Option<&crate::ports::afxdp::xdp::TepFilter>,
    ) -> Result<Self, AfxdpError> {
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
        let prog = match XdpProgram::attach(ifindex, u32::from(nq), flags(mode), filter) {
            Ok(p) => p,
            Err(e) if request == AfXdpRequest::Auto && mode != AfXdpMode::Generic => {
                reason = format!("{reason}; but {e}, so generic");
                mode = AfXdpMode::Generic;
                XdpProgram::attach(ifindex, u32::from(nq), XDP_FLAGS_SKB_MODE, filter)
                    .map_err(xdp_err)?
            }
            Err(e) => return Err(xdp_err(e)),
        };
        // Multi-buffer needs the program's frags flag and the socket's XDP_USE_SG; the
        // first socket tells whether the kernel (and, zero-copy, the driver) takes it.
        let mut sg = prog.frags;
        let mut xsks = Vec::new();
        for q in 0..u32::from(nq) {
            // A socket of a run that just died may still be tearing down (its queue
            // answers EBUSY for a moment): retry for up to 3 s.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
            let x = loop {
                match open_xsk(iface, &cname, q, mode, sg) {
                    Err(AfxdpError::Socket { errno, .. })
                        if errno == libc::EBUSY && std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    Err(AfxdpError::Socket { errno, what, .. })
                        if sg && what == "bind" && q == 0 =>
                    {
                        tracing::info!(
                            iface,
                            errno,
                            "AF_XDP multi-buffer (XDP_USE_SG) refused; frames limited to one UMEM frame"
                        );
                        sg = false;
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
            sg,
            link_up: AtomicBool::new(iface_link_up(iface)),
            mtu: AtomicU32::new(caps.mtu),
            prog: Mutex::new(Some(prog)),
        })
    }

    /// Steers only `filter`'s Geneve frames to the sockets from now on (or, with none,
    /// every frame): the uplink's program is replaced, its sockets stay.
    ///
    /// # Errors
    /// The new program could not be loaded or attached; the old one stays.
    pub fn set_filter(
        &self,
        filter: Option<&crate::ports::afxdp::xdp::TepFilter>,
    ) -> Result<(), AfxdpError> {
        let mut p = self.prog.lock().unwrap_or_else(|e| e.into_inner());
        match p.as_mut() {
            Some(p) => p.set_filter(filter).map_err(|source| AfxdpError::Xdp {
                iface: self.iface.clone(),
                source,
            }),
            None => Ok(()),
        }
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

/// Whether `iface` is up with carrier now (sysfs `operstate`; `unknown`, as on tun and
/// dummy devices, counts as up when the interface is administratively up).
pub fn iface_link_up(iface: &str) -> bool {
    let oper =
        std::fs::read_to_string(format!("/sys/class/net/{iface}/operstate")).unwrap_or_default();
    match oper.trim() {
        "up" => true,
        "unknown" => std::fs::read_to_string(format!("/sys/class/net/{iface}/flags"))
            .ok()
            .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
            .is_some_and(|f| f & libc::IFF_UP as u32 != 0),
        _ => false,
    }
}

fn open_xsk(
    iface: &str,
    cname: &CString,
    q: u32,
    mode: AfXdpMode,
    sg: bool,
) -> Result<Xsk, AfxdpError> {
    let area = Area::new((FRAMES * FRAME_SIZE) as usize)?;
    let slice = NonNull::slice_from_raw_parts(area.ptr, area.len);
    let cfg = UmemConfig {
        fill_size: RX_RING,
        complete_size: TX_RING,
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
        }
        | if sg { XDP_USE_SG } else { 0 };
    let sc = SocketConfig {
        rx_size: std::num::NonZeroU32::new(RX_RING),
        tx_size: std::num::NonZeroU32::new(TX_RING),
        bind_flags,
    };
    let user = umem
        .rx_tx(&sock, &sc)
        .map_err(sock_err(iface, q, "rx/tx rings"))?;
    let rx = user.map_rx().map_err(sock_err(iface, q, "rx ring mmap"))?;
    let tx = user.map_tx().map_err(sock_err(iface, q, "tx ring mmap"))?;
    umem.bind(&user).map_err(sock_err(iface, q, "bind"))?;
    let (mut fill, comp) = device.into_parts();
    // Lend the receive frames to the kernel.
    let mut w = fill.fill(RX_RING);
    let n = w.insert((0..RX_RING).map(|i| u64::from(i * FRAME_SIZE)));
    w.commit();
    drop(w);
    debug_assert_eq!(n, RX_RING);
    let fd = rx.as_raw_fd();
    Ok(Xsk {
        queue: q,
        rx: Mutex::new(XskRx {
            rx,
            fill,
            held: Vec::with_capacity(RX_RING as usize),
            base: area.ptr,
            umem_len: area.len,
            linear: Vec::new(),
            chain_start: 0,
            in_chain: false,
            chain_bad: None,
        }),
        tx: Mutex::new(XskTx {
            tx,
            comp,
            free: (RX_RING..FRAMES)
                .map(|i| u64::from(i * FRAME_SIZE))
                .collect(),
            batch: Vec::with_capacity(TX_RING as usize),
            copy_mode: mode != AfXdpMode::ZeroCopy,
            sg,
            seg_addrs: Vec::new(),
            seg_bufs: Vec::new(),
        }),
        rx_frames: Default::default(),
        sg,
        fd,
        base: area.ptr,
        _user: user,
        _umem: UmemBox(umem),
        _area: area,
    })
}
