//! Split virtqueues (virtio 1.2 §2.7): descriptor table, available ring, used ring.
//!
//! Memory ordering, as the spec's driver/device protocol requires:
//! - `avail.idx` is loaded with `Acquire` before the ring entries and descriptors it
//!   covers are read (pairs with the driver's write barrier before it bumps the index);
//! - used elements are written before `used.idx` is stored with `Release`;
//! - a `SeqCst` fence separates publishing `used.idx` from reading `used_event` (and
//!   publishing `avail_event` from re-reading `avail.idx`), as Linux's
//!   `virtqueue_kick_prepare` does, so that neither side misses a notification.

use std::sync::atomic::{fence, Ordering};

use virtio_queue::{Queue, QueueT};
use vm_memory::{GuestAddress, GuestMemoryBackend, VolatileMemory, VolatileSlice};

use super::{
    first_bytes, prefetch, take_buffer, Area, AvailCursor, Chain, DeviceRing, Mem, MemView, Seg,
    MAX_CHAIN_BYTES, MAX_CHAIN_DESCS, VRING_AVAIL_F_NO_INTERRUPT, VRING_DESC_F_INDIRECT,
    VRING_DESC_F_NEXT, VRING_DESC_F_WRITE, VRING_USED_F_NO_NOTIFY,
};
use crate::model::stats::DropReason;
use crate::ports::vhost::migration::LogBatch;

/// A split ring's three areas, validated for one burst.
pub struct SplitRing<'m> {
    mem: MemView<'m>,
    desc: VolatileSlice<'m>,
    avail: Area<'m>,
    used: VolatileSlice<'m>,
    /// The used ring again, for its 2-byte header and `avail_event` words.
    used_words: Area<'m>,
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
            avail: Area::new(avail, 2)?,
            used,
            used_words: Area::new(used, 2)?,
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
        self.avail.load_u16(2, Ordering::Acquire).unwrap_or(0)
    }

    /// The head descriptor index at free-running available position `pos`.
    #[inline]
    pub fn avail_entry(&self, pos: u16) -> u16 {
        let off = 4 + 2 * usize::from(pos & (self.size - 1));
        self.avail
            .load_u16(off, Ordering::Relaxed)
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
        first_bytes(&self.mem, self.single_desc(head, true)?, need)
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
        use DropReason::BadDescriptor;
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
            take_buffer(&self.mem, (addr, len, flags), writable, &mut total, out)?;
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

    /// Publishes `used.idx = idx` with Release, making the elements written before visible.
    #[inline]
    pub fn publish_used(&self, idx: u16) {
        self.used_words.store_u16(2, idx, Ordering::Release);
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
                .load_u16(off, Ordering::Relaxed)
                .unwrap_or(new.wrapping_sub(1));
            new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
        } else {
            let flags = self.avail.load_u16(0, Ordering::Relaxed).unwrap_or(0);
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
                self.used_words
                    .store_u16(off, next_avail, Ordering::Relaxed);
            }
        } else {
            let v: u16 = if enable { 0 } else { VRING_USED_F_NO_NOTIFY };
            self.used_words.store_u16(0, v, Ordering::Relaxed);
        }
        if enable {
            fence(Ordering::SeqCst);
            self.avail_idx() != next_avail
        } else {
            false
        }
    }

    /// The driver's side as it is in guest memory, for `vswitchctl show`:
    /// `(avail.idx, used.idx, used_event)`, `used_event` only with EVENT_IDX.
    pub fn driver_view(&self) -> (u16, u16, Option<u16>) {
        let used = self.used_words.load_u16(2, Ordering::Acquire).unwrap_or(0);
        let event = self.event_idx.then(|| {
            self.avail
                .load_u16(4 + 2 * usize::from(self.size), Ordering::Relaxed)
                .unwrap_or(0)
        });
        (self.avail_idx(), used, event)
    }

    /// The guest memory the ring lives in, with its region cache.
    pub fn mem(&self) -> &MemView<'m> {
        &self.mem
    }
}

impl<'m> DeviceRing<'m> for SplitRing<'m> {
    #[inline(always)]
    fn mem(&self) -> &MemView<'m> {
        &self.mem
    }

    #[inline(always)]
    fn size(&self) -> u16 {
        self.size
    }

    #[inline]
    fn avail_cursor(&self, next_avail: u16) -> Result<AvailCursor, u16> {
        let end = self.avail_idx();
        if end.wrapping_sub(next_avail) > self.size {
            return Err(end);
        }
        Ok(AvailCursor {
            next: next_avail,
            end,
        })
    }

    #[inline(always)]
    fn has_avail(&self, cur: &AvailCursor) -> bool {
        cur.next != cur.end
    }

    #[inline]
    fn quiet_word(&self, cur: &AvailCursor) -> Option<(usize, u16)> {
        Some((self.avail.addr_of_u16(2)?, cur.end))
    }

    /// Reads `avail.idx` again once every chain seen was taken. An index more than a
    /// ring's size ahead of what the device took is impossible (virtio 1.2 §2.7.6: the
    /// driver never offers more than the ring holds): it is ignored, and the ring reads
    /// as empty until the driver publishes a sane one, so the device never walks
    /// entries the driver did not write.
    #[inline(always)]
    fn refresh(&self, cur: &mut AvailCursor) {
        if cur.next == cur.end {
            let avail = self.avail_idx();
            if avail.wrapping_sub(cur.next) <= self.size {
                cur.end = avail;
            }
        }
    }

    #[inline]
    fn prefetch_avail(&self, cur: &AvailCursor, n: usize) {
        let n = usize::from(cur.end.wrapping_sub(cur.next)).min(n);
        for k in 0..n {
            self.prefetch_desc(self.avail_entry(cur.next.wrapping_add(k as u16)));
        }
    }

    #[inline(always)]
    fn prefetch_buffer(&self, cur: &AvailCursor, ahead: u16) {
        if cur.end.wrapping_sub(cur.next) > ahead {
            let head = self.avail_entry(cur.next.wrapping_add(ahead));
            if let Some(seg) = self.single_desc(head, true) {
                self.mem.prefetch_rx_buffer(seg);
            }
        }
    }

    #[inline(always)]
    fn readable_single(&self, cur: &AvailCursor) -> Option<(Chain, Seg, VolatileSlice<'m>)> {
        let head = self.avail_entry(cur.next);
        let (seg, buf) = self.single(head, false)?;
        Some((Chain { id: head, descs: 1 }, seg, buf))
    }

    #[inline(always)]
    fn writable_single(
        &self,
        cur: &AvailCursor,
        need: u32,
    ) -> Option<(Chain, Seg, VolatileSlice<'m>)> {
        let head = self.avail_entry(cur.next);
        let seg = self.single_desc(head, true)?;
        Some((
            Chain { id: head, descs: 1 },
            seg,
            first_bytes(&self.mem, seg, need)?,
        ))
    }

    #[inline]
    fn read_chain(
        &self,
        cur: &AvailCursor,
        writable: bool,
        out: &mut Vec<Seg>,
    ) -> (Chain, Result<u32, DropReason>) {
        let head = self.avail_entry(cur.next);
        (
            Chain { id: head, descs: 1 },
            self.walk_chain(head, writable, out),
        )
    }

    #[inline(always)]
    fn advance(&self, cur: &mut AvailCursor, _chain: Chain) {
        cur.next = cur.next.wrapping_add(1);
    }

    #[inline(always)]
    fn put_used(&self, used: u16, chain: Chain, len: u32) -> u16 {
        self.write_used(used, chain.id, len);
        used.wrapping_add(1)
    }

    #[inline(always)]
    fn publish(&self, _old: u16, new: u16) {
        self.publish_used(new);
    }

    #[inline]
    fn needs_interrupt(&self, old: u16, new: u16) -> bool {
        SplitRing::needs_interrupt(self, old, new)
    }

    fn set_kicks(&self, enable: bool, next_avail: u16) -> bool {
        SplitRing::set_kicks(self, enable, next_avail)
    }

    fn log_used(&self, log: &mut LogBatch<'_>, vring: usize, old: u16, new: u16) {
        log.used(vring, self.size, old, new);
    }

    fn log_kicks(&self, log: &mut LogBatch<'_>, vring: usize) {
        log.used_header(vring, self.size);
    }
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
}
