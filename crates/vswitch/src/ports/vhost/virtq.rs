//! Split virtqueue access for one burst (virtio 1.2 §2.7).
//!
//! virtio-queue's [`Queue`] keeps the ring state (addresses, size, `next_avail`,
//! `next_used`, EVENT_IDX), as vhost-user-backend sets it up. This module reads and
//! writes the rings themselves, in bursts: the available index is read once per burst,
//! used elements are written one by one and the used index is published once, and the
//! notification decision is taken once per burst. Every guest access goes through
//! vm-memory's checked accessors on slices validated when the burst starts; a guest that
//! lies (loops, indices or addresses out of range, nested indirect tables, oversized
//! chains) gets its chain dropped and counted, never a panic.
//!
//! Memory ordering, as the spec's driver/device protocol requires:
//! - `avail.idx` is loaded with `Acquire` before the ring entries and descriptors it
//!   covers are read (pairs with the driver's write barrier before it bumps the index);
//! - used elements are written before `used.idx` is stored with `Release`;
//! - a `SeqCst` fence separates publishing `used.idx` from reading `used_event` (and
//!   publishing `avail_event` from re-reading `avail.idx`), as Linux's
//!   `virtqueue_kick_prepare` does, so that neither side misses a notification.

use std::sync::atomic::{fence, Ordering};

use std::cell::Cell;

use virtio_queue::{Queue, QueueT};
use vm_memory::{
    Bytes, GuestAddress, GuestMemoryAtomic, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion,
    GuestRegionMmap, MemoryRegionAddress, VolatileMemory, VolatileSlice,
};

use crate::model::stats::DropReason;

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

/// A split ring's three areas, validated for one burst.
pub struct SplitRing<'m> {
    mem: MemView<'m>,
    desc: VolatileSlice<'m>,
    avail: VolatileSlice<'m>,
    used: VolatileSlice<'m>,
    size: u16,
    event_idx: bool,
}

impl<'m> SplitRing<'m> {
    /// Views the rings of `q` in `mem`. Fails when the queue is not ready or an area does
    /// not lie inside one region of guest memory.
    pub fn new(mem: &'m Mem, q: &Queue) -> Option<Self> {
        let size = q.size();
        if !q.ready() || size == 0 || !size.is_power_of_two() {
            return None;
        }
        let n = usize::from(size);
        let desc = mem.get_slice(GuestAddress(q.desc_table()), 16 * n).ok()?;
        let avail = mem
            .get_slice(GuestAddress(q.avail_ring()), 6 + 2 * n)
            .ok()?;
        let used = mem.get_slice(GuestAddress(q.used_ring()), 6 + 8 * n).ok()?;
        Some(SplitRing {
            mem: MemView::new(mem),
            desc,
            avail,
            used,
            size,
            event_idx: q.event_idx_enabled(),
        })
    }

    /// Queue size (number of descriptors).
    pub fn size(&self) -> u16 {
        self.size
    }

    /// Prefetches descriptor `head` of the ring's own table.
    #[inline]
    pub fn prefetch_desc(&self, head: u16) {
        if let Ok(s) = self
            .desc
            .subslice(usize::from(head & (self.size - 1)) * 16, 16)
        {
            prefetch(s.ptr_guard().as_ptr());
        }
    }

    /// The driver's `avail.idx`, loaded with Acquire.
    #[inline]
    pub fn avail_idx(&self) -> u16 {
        self.avail
            .load::<u16>(2, Ordering::Acquire)
            .map(u16::from_le)
            .unwrap_or(0)
    }

    /// The head descriptor index at free-running available position `pos`.
    #[inline]
    pub fn avail_entry(&self, pos: u16) -> u16 {
        let off = 4 + 2 * usize::from(pos & (self.size - 1));
        self.avail
            .load::<u16>(off, Ordering::Relaxed)
            .map(u16::from_le)
            .unwrap_or(u16::MAX)
    }

    /// Reads descriptor `i` of the table `table` (the ring's own, or an indirect one):
    /// `(addr, len, flags, next)`, as two bounds-checked 8-byte volatile reads (which
    /// need no alignment).
    #[inline]
    fn read_desc(table: &VolatileSlice<'_>, i: usize) -> Option<(u64, u32, u16, u16)> {
        let addr: u64 = table.get_ref::<u64>(i * 16).ok()?.load();
        let rest: u64 = table.get_ref::<u64>(i * 16 + 8).ok()?.load();
        let rest = u64::from_le(rest);
        Some((
            u64::from_le(addr),
            rest as u32,
            (rest >> 32) as u16,
            (rest >> 48) as u16,
        ))
    }

    /// The common receive chain, checked in one step: if descriptor `head` is a single
    /// device-writable buffer (no NEXT, no INDIRECT) of at least `need` bytes, wholly
    /// inside guest memory, its first `need` bytes. `None` means "not that shape": walk
    /// the chain with [`walk_chain`](Self::walk_chain), which also judges whether it is
    /// malformed.
    #[inline]
    pub fn single_writable(&self, head: u16, need: u32) -> Option<VolatileSlice<'m>> {
        let seg = self.single_desc(head, true)?;
        if seg.len < need {
            return None;
        }
        // The whole buffer, as walk_chain checks it: one that runs out of guest memory
        // is malformed whatever the size of the frame put in it.
        self.mem
            .slice(seg.addr, seg.len as usize)?
            .subslice(0, need as usize)
            .ok()
    }

    /// The common transmit chain, checked in one step: if descriptor `head` is a single
    /// device-readable buffer (no NEXT, WRITE or INDIRECT) of 1 to [`MAX_CHAIN_BYTES`]
    /// bytes inside guest memory, that buffer, as [`walk_chain`](Self::walk_chain)
    /// would append it, and its bytes. `None` means "not that shape": walk the chain,
    /// which also judges whether it is malformed.
    #[inline]
    pub fn single_readable(&self, head: u16) -> Option<(Seg, VolatileSlice<'m>)> {
        self.single(head, false)
    }

    /// Descriptor `head` and its bytes if it is a whole chain of one non-empty buffer
    /// in direction `writable` inside guest memory (a transmit buffer also at most
    /// [`MAX_CHAIN_BYTES`]).
    #[inline(always)]
    fn single(&self, head: u16, writable: bool) -> Option<(Seg, VolatileSlice<'m>)> {
        let seg = self.single_desc(head, writable)?;
        Some((seg, self.mem.slice(seg.addr, seg.len as usize)?))
    }

    /// Descriptor `head` if it is a whole chain of one non-empty buffer in direction
    /// `writable` (a transmit buffer also at most [`MAX_CHAIN_BYTES`]); where the
    /// buffer lies is not checked.
    #[inline(always)]
    fn single_desc(&self, head: u16, writable: bool) -> Option<Seg> {
        if head >= self.size {
            return None;
        }
        let (addr, len, flags, _) = Self::read_desc(&self.desc, usize::from(head))?;
        let expected = if writable { VRING_DESC_F_WRITE } else { 0 };
        if flags != expected || len == 0 || (!writable && len > MAX_CHAIN_BYTES) {
            return None;
        }
        Some(Seg { addr, len })
    }

    /// Walks the chain starting at `head`, appending its buffers to `out`, and returns
    /// the total length in bytes. `writable` selects the direction the chain must have:
    /// `false` for a transmit chain (device-readable buffers only), `true` for a receive
    /// chain (device-writable only).
    ///
    /// # Errors
    /// [`DropReason::BadDescriptor`] for an index out of range, a loop, a nested or
    /// malformed indirect table, a buffer outside guest memory, a buffer of the wrong
    /// direction or more than [`MAX_CHAIN_DESCS`] descriptors;
    /// [`DropReason::FrameTooBig`] when the chain holds more than [`MAX_CHAIN_BYTES`].
    /// On error, `out` is restored to its length on entry.
    pub fn walk_chain(
        &self,
        head: u16,
        writable: bool,
        out: &mut Vec<Seg>,
    ) -> Result<u32, DropReason> {
        let start = out.len();
        let r = self.walk_inner(head, writable, out);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    fn walk_inner(&self, head: u16, writable: bool, out: &mut Vec<Seg>) -> Result<u32, DropReason> {
        use DropReason::{BadDescriptor, FrameTooBig};
        // Most chains are one direct descriptor: take those without the walk.
        if let Some((seg, _)) = self.single(head, writable) {
            out.push(seg);
            return Ok(seg.len);
        }
        if head >= self.size {
            return Err(BadDescriptor);
        }
        let mut table = self.desc;
        let mut table_len = usize::from(self.size);
        let mut idx = usize::from(head);
        let mut indirect = false;
        let mut total: u32 = 0;
        let mut count = 0usize;
        loop {
            // Bounds every walk: a loop runs into this limit.
            count += 1;
            if count > MAX_CHAIN_DESCS {
                return Err(BadDescriptor);
            }
            let (addr, len, flags, next) = Self::read_desc(&table, idx).ok_or(BadDescriptor)?;
            if flags & VRING_DESC_F_INDIRECT != 0 {
                // virtio 1.2 §2.7.5.3.1: no nested tables, no INDIRECT with NEXT.
                if indirect || flags & VRING_DESC_F_NEXT != 0 || len % 16 != 0 || len == 0 {
                    return Err(BadDescriptor);
                }
                table = self.mem.slice(addr, len as usize).ok_or(BadDescriptor)?;
                table_len = len as usize / 16;
                idx = 0;
                indirect = true;
                continue;
            }
            if (flags & VRING_DESC_F_WRITE != 0) != writable {
                return Err(BadDescriptor);
            }
            if len > 0 {
                // Checks the whole buffer lies inside one region of guest memory.
                self.mem.slice(addr, len as usize).ok_or(BadDescriptor)?;
                total = total.checked_add(len).ok_or(FrameTooBig)?;
                if total > MAX_CHAIN_BYTES && !writable {
                    return Err(FrameTooBig);
                }
                out.push(Seg { addr, len });
            }
            if flags & VRING_DESC_F_NEXT == 0 {
                return Ok(total);
            }
            idx = usize::from(next);
            if idx >= table_len {
                return Err(BadDescriptor);
            }
        }
    }

    /// Writes used element `(id, len)` at free-running used position `pos`.
    ///
    /// The used ring is only 4-byte aligned (virtio 1.2 §2.7), so the element is
    /// written as one unaligned 8-byte store; the Release store of `used.idx`
    /// publishes it.
    #[inline]
    pub fn write_used(&self, pos: u16, id: u16, len: u32) {
        let off = 4 + 8 * usize::from(pos & (self.size - 1));
        let e = (u64::from(len) << 32 | u64::from(id)).to_le();
        // The used ring was validated to cover this offset. One 8-byte volatile store
        // (alignment-free); the driver reads the element only after `used.idx`.
        if let Ok(r) = self.used.get_ref::<u64>(off) {
            r.store(e);
        }
    }

    /// The used element at free-running used position `pos`, as written: `(id, len)`
    /// (for the dirty log, which marks the buffers a batch filled).
    #[inline]
    pub fn used_entry(&self, pos: u16) -> (u16, u32) {
        let off = 4 + 8 * usize::from(pos & (self.size - 1));
        let e = self
            .used
            .get_ref::<u64>(off)
            .map_or(0, |r| u64::from_le(r.load()));
        (e as u16, (e >> 32) as u32)
    }

    /// Publishes `used.idx = idx` with Release, making the elements written before visible.
    #[inline]
    pub fn publish_used(&self, idx: u16) {
        let _ = self.used.store(idx.to_le(), 2, Ordering::Release);
    }

    /// Whether the driver wants an interrupt after the device moved `used.idx` from `old`
    /// to `new` (virtio 1.2 §2.7.10, `vring_need_event` with EVENT_IDX; the
    /// NO_INTERRUPT flag without).
    #[inline]
    pub fn needs_interrupt(&self, old: u16, new: u16) -> bool {
        if old == new {
            return false;
        }
        fence(Ordering::SeqCst);
        if self.event_idx {
            let off = 4 + 2 * usize::from(self.size);
            let event = self
                .avail
                .load::<u16>(off, Ordering::Relaxed)
                .map(u16::from_le)
                .unwrap_or(new.wrapping_sub(1));
            new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
        } else {
            let flags = self
                .avail
                .load::<u16>(0, Ordering::Relaxed)
                .map(u16::from_le)
                .unwrap_or(0);
            flags & VRING_AVAIL_F_NO_INTERRUPT == 0
        }
    }

    /// Asks the driver to kick (`enable`) or not to kick. With EVENT_IDX, enabling writes
    /// `avail_event = next_avail`, and disabling is a no-op (a stale `avail_event` means
    /// at most one kick per 2^16 buffers); without, it sets or clears NO_NOTIFY.
    /// When enabling, returns true if buffers arrived meanwhile (the caller must not sleep).
    pub fn set_kicks(&self, enable: bool, next_avail: u16) -> bool {
        if self.event_idx {
            if enable {
                let off = 4 + 8 * usize::from(self.size);
                let _ = self.used.store(next_avail.to_le(), off, Ordering::Relaxed);
            }
        } else {
            let v: u16 = if enable { 0 } else { VRING_USED_F_NO_NOTIFY };
            let _ = self.used.store(v.to_le(), 0, Ordering::Relaxed);
        }
        if enable {
            fence(Ordering::SeqCst);
            self.avail_idx() != next_avail
        } else {
            false
        }
    }

    /// The guest memory the ring lives in, with its region cache.
    pub fn mem(&self) -> &MemView<'m> {
        &self.mem
    }
}

/// Copies between scatter-gather lists in guest memory, byte-exact, with checked slices.
///
/// Returns the number of bytes copied: the smaller of the two lists' lengths after
/// `src_skip` and `dst_skip`.
pub fn copy_sg(
    src_mem: &MemView<'_>,
    src: &[Seg],
    mut src_skip: u32,
    dst_mem: &MemView<'_>,
    dst: &[Seg],
    mut dst_skip: u32,
) -> usize {
    let mut copied = 0usize;
    let mut si = 0;
    let mut di = 0;
    while si < src.len() && src_skip >= src[si].len {
        src_skip -= src[si].len;
        si += 1;
    }
    while di < dst.len() && dst_skip >= dst[di].len {
        dst_skip -= dst[di].len;
        di += 1;
    }
    let mut s_off = src_skip;
    let mut d_off = dst_skip;
    while si < src.len() && di < dst.len() {
        let s = src[si];
        let d = dst[di];
        let n = (s.len - s_off).min(d.len - d_off);
        let (Some(from), Some(to)) = (
            src_mem.slice(s.addr + u64::from(s_off), n as usize),
            dst_mem.slice(d.addr + u64::from(d_off), n as usize),
        ) else {
            // Cannot happen for segments checked by walk_chain under the same memory
            // snapshot; stop rather than copy garbage.
            break;
        };
        from.copy_to_volatile_slice(to);
        copied += n as usize;
        s_off += n;
        d_off += n;
        if s_off == s.len {
            si += 1;
            s_off = 0;
        }
        if d_off == d.len {
            di += 1;
            d_off = 0;
        }
    }
    copied
}

/// The pieces of the scatter-gather list that cover `len` bytes from `skip` bytes in,
/// in order: `(offset within those len bytes, the piece in guest memory)`. Ends early
/// where the list ends or a piece lies outside guest memory.
fn sg_pieces<'a, 'm>(
    mem: &'a MemView<'m>,
    segs: &'a [Seg],
    mut skip: u32,
    len: usize,
) -> impl Iterator<Item = (usize, VolatileSlice<'m>)> + 'a {
    let mut segs = segs.iter();
    let mut done = 0usize;
    std::iter::from_fn(move || {
        while done < len {
            let s = segs.next()?;
            if skip >= s.len {
                skip -= s.len;
                continue;
            }
            let n = ((s.len - skip) as usize).min(len - done);
            let v = mem.slice(s.addr + u64::from(skip), n)?;
            skip = 0;
            let at = done;
            done += n;
            return Some((at, v));
        }
        None
    })
}

/// The usual case of [`sg_pieces`], in one step: the `len` bytes from `skip` bytes in
/// all lie in the first buffer.
#[inline]
fn first_piece<'m>(
    mem: &MemView<'m>,
    segs: &[Seg],
    skip: u32,
    len: usize,
) -> Option<VolatileSlice<'m>> {
    let first = segs.first()?;
    if u64::from(skip) + len as u64 > u64::from(first.len) {
        return None;
    }
    mem.slice(first.addr + u64::from(skip), len)
}

/// Copies the scatter-gather list, from `skip` bytes in, into the contiguous `dst`.
/// Returns the bytes copied: the smaller of `dst.len()` and what the list holds.
#[inline]
pub fn gather_sg(mem: &MemView<'_>, segs: &[Seg], skip: u32, dst: &VolatileSlice<'_>) -> usize {
    if let Some(from) = first_piece(mem, segs, skip, dst.len()) {
        from.copy_to_volatile_slice(*dst);
        return dst.len();
    }
    let mut done = 0;
    for (at, from) in sg_pieces(mem, segs, skip, dst.len()) {
        let Ok(to) = dst.offset(at) else { break };
        from.copy_to_volatile_slice(to);
        done = at + from.len();
    }
    done
}

/// Reads up to `buf.len()` bytes starting `skip` bytes into the scatter-gather list.
/// Returns the number read.
#[inline]
pub fn read_sg(mem: &MemView<'_>, segs: &[Seg], skip: u32, buf: &mut [u8]) -> usize {
    if let Some(v) = first_piece(mem, segs, skip, buf.len()) {
        return v.copy_to(buf);
    }
    let mut done = 0;
    for (at, v) in sg_pieces(mem, segs, skip, buf.len()) {
        done = at + v.copy_to(&mut buf[at..at + v.len()]);
    }
    done
}

/// Writes `data` at the start of the scatter-gather list. Returns the number written.
pub fn write_sg(mem: &MemView<'_>, segs: &[Seg], data: &[u8]) -> usize {
    write_sg_at(mem, segs, 0, data)
}

/// Writes `data` starting `skip` bytes into the scatter-gather list. Returns the number
/// written.
pub fn write_sg_at(mem: &MemView<'_>, segs: &[Seg], skip: u32, data: &[u8]) -> usize {
    let mut done = 0;
    for (at, v) in sg_pieces(mem, segs, skip, data.len()) {
        v.copy_from(&data[at..at + v.len()]);
        done = at + v.len();
    }
    done
}

#[cfg(test)]
mod tests {
    use virtio_queue::{Queue, QueueT};
    use vm_memory::{Bytes, GuestAddress};

    use super::*;

    /// 64 KiB of guest memory at 0, a 16-descriptor queue with its rings at 0, 0x1000
    /// and 0x2000, and descriptor 0 as given.
    fn ring_with(addr: u64, len: u32, flags: u16) -> (Mem, Queue) {
        let mem = Mem::from_ranges(&[(GuestAddress(0), 0x10000)]).unwrap();
        let mut q = Queue::new(16).unwrap();
        q.set_desc_table_address(Some(0), Some(0));
        q.set_avail_ring_address(Some(0x1000), Some(0));
        q.set_used_ring_address(Some(0x2000), Some(0));
        q.set_ready(true);
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        mem.write_slice(&d, GuestAddress(0)).unwrap();
        (mem, q)
    }

    /// Found by the chain_walker fuzz target: a receive buffer that runs past the end
    /// of guest memory was taken by the one-step check when the frame fitted in its
    /// first bytes, but refused by the walk.
    #[test]
    fn single_writable_refuses_a_buffer_running_out_of_memory() {
        let (mem, q) = ring_with(0xF000, 0x2000, VRING_DESC_F_WRITE);
        let ring = SplitRing::new(&mem, &q).unwrap();
        assert!(ring.single_writable(0, 64).is_none());
        let mut out = Vec::new();
        assert_eq!(
            ring.walk_chain(0, true, &mut out),
            Err(DropReason::BadDescriptor)
        );
        assert!(out.is_empty());

        let (mem, q) = ring_with(0xE000, 0x2000, VRING_DESC_F_WRITE);
        let ring = SplitRing::new(&mem, &q).unwrap();
        assert_eq!(ring.single_writable(0, 64).map(|s| s.len()), Some(64));
        assert_eq!(ring.walk_chain(0, true, &mut out), Ok(0x2000));
        assert_eq!(
            out,
            [Seg {
                addr: 0xE000,
                len: 0x2000
            }]
        );
    }

    /// Found by the chain_walker fuzz target (pipeline mode): a guest whose receive
    /// buffer lies over its own available ring has the frame delivered into it rewrite
    /// `avail.idx` to an impossible value in the middle of the batch. The re-read must
    /// refuse it as the first read does, not walk tens of thousands of entries.
    #[test]
    fn delivery_refuses_an_avail_idx_rewritten_by_a_delivered_frame() {
        use vhost_user_backend::VringT;

        use crate::datapath::pmd::Pmd;
        use crate::testing::{attach, config, frame, RawDesc, SimGuest};

        let sw = crate::switch::Switch::new(config(&[("a", None), ("b", None)], true)).unwrap();
        let features = SimGuest::default_features();
        let mut ga = SimGuest::new(1, features);
        attach(&sw, 0, ga.conn.clone());
        let mut gb = SimGuest::with_queue_size(1, features, 4);
        attach(&sw, 1, gb.conn.clone());
        let avail = gb.conn.vrings[0].get_ref().get_queue().avail_ring();
        // Receive buffer 0 puts byte 20 of the frame (after the 12-byte header) on
        // avail.idx; the frame's later bytes, zero, on the ring's entries.
        let over_ring = avail + 2 - 12 - 20;
        gb.write_desc(
            0,
            0,
            RawDesc {
                addr: over_ring,
                len: 2048,
                flags: VRING_DESC_F_WRITE,
                next: 0,
            },
        );
        gb.publish(0, 0);
        gb.post_rx(0, 1, 3, 2048);
        let mut f = frame([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], 64, 0);
        f[14..].fill(0);
        f[20..22].copy_from_slice(&0xfff0u16.to_le_bytes());
        for head in 0..8 {
            ga.send(0, head, &f);
        }
        let mut pmd = Pmd::new(sw.clone(), 0);
        assert_eq!(pmd.poll_once(), 8);
        // Four chains were available; the rewritten index is refused, so the other four
        // frames find no buffer.
        assert_eq!(gb.conn.vrings[0].get_ref().get_queue().next_used(), 4);
        let s = sw.port_stats(1);
        assert_eq!(s.tx_packets, 4);
        assert_eq!(s.drops["no_rx_buffer"], 4);
    }
}
