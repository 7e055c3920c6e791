//! Virtqueue access for one burst: split rings (virtio 1.2 §2.7, [`split`]) and packed
//! rings (virtio 1.2 §2.8, [`packed`]), behind one interface, [`DeviceRing`], that the
//! transmit and receive paths are written against.
//!
//! virtio-queue's [`Queue`](virtio_queue::Queue) keeps the ring state (addresses, size,
//! `next_avail`, `next_used`, EVENT_IDX), as vhost-user-backend sets it up; for a packed
//! ring the two indices hold a slot and its wrap counter (`slot | wrap << 15`, the form
//! vhost-user's `SET_VRING_BASE` carries). These modules read and write the rings
//! themselves, in bursts: what the driver made available is read once per burst where
//! the format allows, used elements are written one by one and published once, and the
//! notification decision is taken once per burst. Every guest access goes through
//! vm-memory's checked accessors on slices validated when the burst starts; a guest that
//! lies (loops, indices or addresses out of range, nested indirect tables, oversized
//! chains) gets its chain dropped and counted, never a panic.

use vm_memory::{
    GuestAddress, GuestMemoryAtomic, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion,
    GuestRegionMmap, MemoryRegionAddress, VolatileSlice,
};

use std::cell::Cell;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use crate::model::stats::DropReason;
use crate::ports::vhost::migration::LogBatch;

pub mod packed;
mod sg;
pub mod split;

pub use packed::PackedRing;
pub use sg::{copy_sg, gather_sg, read_sg, stream, write_sg, write_sg_at};
pub use split::SplitRing;

/// Guest memory as the vhost-user backend maps it.
pub type Mem = GuestMemoryMmap<()>;
/// Guest memory that the vhost-user thread can swap under running PMDs (RCU style).
pub type AtomicMem = GuestMemoryAtomic<Mem>;

/// Descriptor flag: the chain continues in `next`.
pub const VRING_DESC_F_NEXT: u16 = 1;
/// Descriptor flag: device-writable buffer.
pub const VRING_DESC_F_WRITE: u16 = 2;
/// Descriptor flag: the buffer is a table of descriptors (VIRTIO_RING_F_INDIRECT_DESC).
pub const VRING_DESC_F_INDIRECT: u16 = 4;
/// Used-ring flag: the device does not want kicks (without EVENT_IDX).
pub const VRING_USED_F_NO_NOTIFY: u16 = 1;
/// Avail-ring flag: the driver does not want interrupts (without EVENT_IDX).
pub const VRING_AVAIL_F_NO_INTERRUPT: u16 = 1;

/// Most descriptors one chain may have, indirect ones included. Linux sends at most
/// MAX_SKB_FRAGS + 2 (19) for a 64 KiB TSO frame; DPDK's multi-segment mbufs far fewer.
pub const MAX_CHAIN_DESCS: usize = 64;

/// Largest chain payload accepted: a 64 KiB IP packet, its Ethernet + VLAN header and a
/// 12-byte virtio-net header.
pub const MAX_CHAIN_BYTES: u32 = 65535 + 18 + 12;

/// One buffer of a descriptor chain, a guest-physical range already checked to lie
/// inside guest memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seg {
    /// Guest-physical address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
}

/// A descriptor chain the device took from a ring, as far as completing it needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chain {
    /// The id its used element carries: the head descriptor's index (split rings), the
    /// buffer id of its last descriptor (packed rings, virtio 1.2 §2.8.6).
    pub id: u16,
    /// Descriptor ring slots it occupies: 1 for a split ring (whose chains are linked by
    /// `next`), the chain's length in the ring for a packed one (an indirect table
    /// counts as one).
    pub descs: u16,
}

/// Where the device takes the next available chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AvailCursor {
    /// Split: free-running index into the available ring. Packed: descriptor slot and
    /// the device's avail wrap counter, `slot | wrap << 15`.
    pub next: u16,
    /// Split: the driver's `avail.idx` as last read. Packed: unused.
    end: u16,
}

/// One virtqueue as the device side of a burst sees it, split or packed.
///
/// Positions (`next_avail`, `used`) are the forms the ring state keeps: free-running
/// indices for split rings, `slot | wrap << 15` for packed ones. A chain is taken in
/// three steps: look at it ([`readable_single`](Self::readable_single) /
/// [`writable_single`](Self::writable_single) for the one-buffer shape, else
/// [`read_chain`](Self::read_chain)), [`advance`](Self::advance) past it, and later
/// complete it with [`put_used`](Self::put_used) and [`publish`](Self::publish).
pub trait DeviceRing<'m> {
    /// The guest memory the ring lives in, with its region cache.
    fn mem(&self) -> &MemView<'m>;
    /// Queue size (descriptors).
    fn size(&self) -> u16;
    /// A cursor at `next_avail`, reading what the driver made available since.
    ///
    /// # Errors
    /// The driver's available index, when it is impossible (a split ring's `avail.idx`
    /// more than a ring's size ahead; a packed position past the ring's end): the ring
    /// must read as empty until the driver publishes a sane one.
    fn avail_cursor(&self, next_avail: u16) -> Result<AvailCursor, u16>;
    /// Whether a chain waits at `cur` (as far as the cursor has read: see
    /// [`refresh`](Self::refresh)).
    fn has_avail(&self, cur: &AvailCursor) -> bool;
    /// Reads again what the driver made available, once everything read was taken
    /// (split rings re-read `avail.idx`; packed rings read each descriptor's flags as
    /// they go, so nothing is cached).
    fn refresh(&self, _cur: &mut AvailCursor) {}
    /// Starts loading the descriptors of up to `n` chains from `cur`.
    fn prefetch_avail(&self, cur: &AvailCursor, n: usize);
    /// Starts loading, for writing, the first bytes of the receive buffer of the
    /// chain `ahead` places after `cur` when it is a single writable buffer the cursor
    /// has seen: a delivery batch writes each buffer once, and the guest's core touched
    /// it last, so without this every frame's copy waits for its own cache misses.
    fn prefetch_buffer(&self, _cur: &AvailCursor, _ahead: u16) {}
    /// The word the driver must write to make a chain available at `cur`, for an empty
    /// ring: its host address (2-byte aligned) and value (split: `avail.idx`; packed:
    /// the flags of the descriptor at `cur`). An idle queue's polls only compare it
    /// ([`super::idle::IdleWatch`]). `None`: no such word (every poll is a full one).
    fn quiet_word(&self, _cur: &AvailCursor) -> Option<(usize, u16)> {
        None
    }
    /// The chain at `cur` if it is one device-readable buffer of 1 to [`MAX_CHAIN_BYTES`]
    /// bytes inside guest memory: the chain, the buffer and its bytes. `None` means
    /// "not that shape": read it with [`read_chain`](Self::read_chain), which also
    /// judges whether it is malformed.
    fn readable_single(&self, cur: &AvailCursor) -> Option<(Chain, Seg, VolatileSlice<'m>)>;
    /// The chain at `cur` if it is one device-writable buffer of at least `need` bytes
    /// wholly inside guest memory: the chain, the buffer and its first `need` bytes.
    fn writable_single(
        &self,
        cur: &AvailCursor,
        need: u32,
    ) -> Option<(Chain, Seg, VolatileSlice<'m>)>;
    /// Walks the chain at `cur`, appending its buffers to `out`: the chain (always, so
    /// that a malformed one can be completed and skipped) and its total length.
    /// `writable` is the direction its buffers must have.
    ///
    /// # Errors
    /// [`DropReason::BadDescriptor`] for an index out of range, a loop, a nested or
    /// malformed indirect table, a buffer outside guest memory or of the wrong direction,
    /// more than [`MAX_CHAIN_DESCS`] descriptors; [`DropReason::FrameTooBig`] for a
    /// transmit chain of more than [`MAX_CHAIN_BYTES`]. `out` is then as on entry.
    fn read_chain(
        &self,
        cur: &AvailCursor,
        writable: bool,
        out: &mut Vec<Seg>,
    ) -> (Chain, Result<u32, DropReason>);
    /// Moves `cur` past `chain`.
    fn advance(&self, cur: &mut AvailCursor, chain: Chain);
    /// Writes the used element of `chain` (`len` bytes written into it) at `used` and
    /// returns the position after it. Not visible to the driver before
    /// [`publish`](Self::publish) (split rings); visible at once (packed rings, whose
    /// elements carry their own flags, stored with Release).
    fn put_used(&self, used: u16, chain: Chain, len: u32) -> u16;
    /// Completes `chains`, taken in this order and written into by nothing, from `used`
    /// on, and returns the position after them: one used element each, or, when
    /// `in_order` (VIRTIO_F_IN_ORDER negotiated) and the ring's format allows it, one
    /// for the whole run (see [`PackedRing`]).
    #[inline]
    fn put_used_all(&self, used: u16, chains: &[Chain], in_order: bool) -> u16 {
        let _ = in_order;
        chains.iter().fold(used, |u, &c| self.put_used(u, c, 0))
    }
    /// Makes the used elements from `old` to `new` visible to the driver.
    fn publish(&self, old: u16, new: u16);
    /// Whether the driver wants an interrupt after the used position moved from `old`
    /// to `new` (its event suppression settings, EVENT_IDX or the packed ring's
    /// descriptor event).
    fn needs_interrupt(&self, old: u16, new: u16) -> bool;
    /// Asks the driver to kick (`enable`) or not. When enabling, returns whether a chain
    /// arrived at `next_avail` meanwhile (the caller must not sleep).
    fn set_kicks(&self, enable: bool, next_avail: u16) -> bool;
    /// Live migration: marks what [`put_used`](Self::put_used) and
    /// [`publish`](Self::publish) wrote for positions `old..new` of vring `vring`.
    fn log_used(&self, log: &mut LogBatch<'_>, vring: usize, old: u16, new: u16);
    /// Live migration: marks what [`set_kicks`](Self::set_kicks) wrote on vring `vring`.
    fn log_kicks(&self, log: &mut LogBatch<'_>, vring: usize);
}

/// One ring area in guest memory (a descriptor ring, an available or used ring, an
/// event suppression structure) for one burst, accessed through its address.
///
/// Rings are the hottest guest memory: polled, read and written for every chain.
/// vm-memory's generic atomic accessors cost a function call and a bounds check of
/// their own per access; here each access is one compare against the area's length and
/// one load or store. The range was checked to lie inside guest memory by vm-memory's
/// `get_slice` when the burst started, and its mapping's alignment when the area was
/// made, so every access is in bounds and aligned.
#[derive(Clone, Copy)]
pub(crate) struct Area<'m> {
    base: *mut u8,
    len: usize,
    _mem: std::marker::PhantomData<VolatileSlice<'m>>,
}

impl<'m> Area<'m> {
    /// The area of `slice`; `None` unless its mapping is `align`-byte aligned (a
    /// front-end's memory table could place a region at any offset).
    pub(crate) fn new(slice: VolatileSlice<'m>, align: usize) -> Option<Self> {
        let base = slice.ptr_guard_mut().as_ptr();
        if !(base as usize).is_multiple_of(align) {
            return None;
        }
        Some(Area {
            base,
            len: slice.len(),
            _mem: std::marker::PhantomData,
        })
    }

    /// The host address of byte `off`, if a `u16` there is in bounds and aligned.
    #[inline]
    pub(crate) fn addr_of_u16(&self, off: usize) -> Option<usize> {
        if off.checked_add(2)? > self.len || !off.is_multiple_of(2) {
            return None;
        }
        Some(self.base as usize + off)
    }

    /// The `u16` at byte `off` (little-endian), loaded atomically with `order`; `None`
    /// out of bounds or unaligned.
    #[inline(always)]
    pub(crate) fn load_u16(&self, off: usize, order: Ordering) -> Option<u16> {
        if off.checked_add(2)? > self.len || !off.is_multiple_of(2) {
            return None;
        }
        // SAFETY: in bounds (checked) of a mapping valid for 'm, 2-byte aligned (the
        // base is, and `off` is even). Atomic: the driver writes concurrently.
        let v = unsafe { (*self.base.add(off).cast::<AtomicU16>()).load(order) };
        Some(u16::from_le(v))
    }

    /// Stores `v` (little-endian) at byte `off` atomically with `order`; nothing out of
    /// bounds or unaligned.
    #[inline(always)]
    pub(crate) fn store_u16(&self, off: usize, v: u16, order: Ordering) {
        if off.checked_add(2).is_none_or(|e| e > self.len) || !off.is_multiple_of(2) {
            return;
        }
        // SAFETY: as in `load_u16`.
        unsafe { (*self.base.add(off).cast::<AtomicU16>()).store(v.to_le(), order) };
    }

    /// The `u64` at byte `off` (little-endian), which must be 8-byte aligned, as one
    /// volatile load; `None` out of bounds or unaligned.
    #[inline(always)]
    pub(crate) fn read_u64(&self, off: usize) -> Option<u64> {
        if off.checked_add(8)? > self.len || !(self.base as usize + off).is_multiple_of(8) {
            return None;
        }
        // SAFETY: in bounds (checked) of a mapping valid for 'm, 8-byte aligned (checked).
        // Volatile: the driver may write concurrently.
        Some(u64::from_le(unsafe {
            std::ptr::read_volatile(self.base.add(off).cast::<u64>())
        }))
    }

    /// Stores `v` (little-endian) at byte `off`, which must be 8-byte aligned, atomically
    /// with `order`; nothing out of bounds or unaligned.
    #[inline(always)]
    pub(crate) fn store_u64(&self, off: usize, v: u64, order: Ordering) {
        if off.checked_add(8).is_none_or(|e| e > self.len)
            || !(self.base as usize + off).is_multiple_of(8)
        {
            return;
        }
        // SAFETY: in bounds (checked) of a mapping valid for 'm, 8-byte aligned (checked).
        // Atomic: the driver reads concurrently.
        unsafe { (*self.base.add(off).cast::<AtomicU64>()).store(v.to_le(), order) };
    }

    /// Starts loading the cache line of byte `off` (nothing out of bounds).
    #[inline(always)]
    pub(crate) fn prefetch(&self, off: usize) {
        if off < self.len {
            prefetch(self.base.wrapping_add(off));
        }
    }
}

/// Checks one buffer of a chain and appends it to `out`, adding its length to `total`:
/// the split and packed walks' common step. A zero-length buffer is skipped.
///
/// # Errors
/// [`DropReason::BadDescriptor`] for a buffer of the wrong direction (`flags`' WRITE
/// bit against `writable`) or not wholly inside one region of guest memory;
/// [`DropReason::FrameTooBig`] when a transmit chain passes [`MAX_CHAIN_BYTES`] (or the
/// total overflows).
#[inline]
pub(crate) fn take_buffer(
    mem: &MemView<'_>,
    (addr, len, flags): (u64, u32, u16),
    writable: bool,
    total: &mut u32,
    out: &mut Vec<Seg>,
) -> Result<(), DropReason> {
    use DropReason::{BadDescriptor, FrameTooBig};
    if (flags & VRING_DESC_F_WRITE != 0) != writable {
        return Err(BadDescriptor);
    }
    if len == 0 {
        return Ok(());
    }
    mem.slice(addr, len as usize).ok_or(BadDescriptor)?;
    *total = total.checked_add(len).ok_or(FrameTooBig)?;
    if *total > MAX_CHAIN_BYTES && !writable {
        return Err(FrameTooBig);
    }
    out.push(Seg { addr, len });
    Ok(())
}

/// The first `need` bytes of the receive buffer `seg`, if it holds that many and lies
/// wholly inside one region of guest memory (as the walks check it: a buffer that runs
/// out of guest memory is malformed whatever the size of the frame put in it).
#[inline(always)]
pub(crate) fn first_bytes<'m>(mem: &MemView<'m>, seg: Seg, need: u32) -> Option<VolatileSlice<'m>> {
    if seg.len < need {
        return None;
    }
    mem.slice(seg.addr, seg.len as usize)?
        .subslice(0, need as usize)
        .ok()
}

/// Guest memory for one burst, with the last region used remembered.
///
/// Guests have one to a few memory regions and consecutive buffers almost always lie
/// in the same one, so a range check against the cached region replaces
/// `GuestMemoryMmap`'s region search on nearly every access. Every slice is still
/// produced by vm-memory's checked `get_slice`, so it lies inside guest memory.
pub struct MemView<'m> {
    mem: &'m Mem,
    last: Cell<Option<&'m GuestRegionMmap<()>>>,
}

impl<'m> MemView<'m> {
    /// A view of `mem`.
    pub fn new(mem: &'m Mem) -> Self {
        MemView {
            mem,
            last: Cell::new(None),
        }
    }

    /// The `len` bytes at guest-physical `addr`, if they lie inside one region.
    #[inline]
    pub fn slice(&self, addr: u64, len: usize) -> Option<VolatileSlice<'m>> {
        let r = match self.last.get() {
            Some(r) if addr >= r.start_addr().0 && addr - r.start_addr().0 < r.len() => r,
            _ => {
                let r = self.mem.find_region(GuestAddress(addr))?;
                self.last.set(Some(r));
                r
            }
        };
        r.get_slice(MemoryRegionAddress(addr - r.start_addr().0), len)
            .ok()
    }

    /// Starts loading the cache line at guest-physical `addr` (no effect outside guest
    /// memory). Used to overlap the cache misses of a burst: buffers and descriptors
    /// are written by the guest's core, so the first touch of each is a miss.
    #[inline]
    pub fn prefetch(&self, addr: u64) {
        if let Some(s) = self.slice(addr, 1) {
            prefetch(s.ptr_guard().as_ptr());
        }
    }

    /// Starts loading, to be written, the first [`PREFETCH_BYTES`] of receive buffer
    /// `seg` (its first byte only when they are not all in one region of guest memory).
    #[inline]
    pub fn prefetch_rx_buffer(&self, seg: Seg) {
        let (addr, len) = (seg.addr, (seg.len as usize).min(PREFETCH_BYTES));
        match self.slice(addr, len) {
            Some(s) => {
                let p = s.ptr_guard().as_ptr();
                let first = p as usize & !63;
                for line in (first..p as usize + len).step_by(64) {
                    prefetch_write(line as *const u8);
                }
            }
            None => self.prefetch(addr),
        }
    }
}

/// Bytes of a receive buffer [`DeviceRing::prefetch_buffer`] loads: the virtio-net
/// header and a 64-byte frame, which straddle two cache lines at the usual offsets.
pub const PREFETCH_BYTES: usize = 76;

/// Prefetches the cache line holding `p` in the exclusive state, to be written
/// (PREFETCHW).
#[inline]
pub fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHW is a hint: it never faults and has no architectural effect,
    // whatever the address.
    unsafe {
        core::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, readonly, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Prefetches the cache line holding `p` into all cache levels.
#[inline]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it never faults and has no architectural effect,
    // whatever the address; SSE is part of the x86_64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
