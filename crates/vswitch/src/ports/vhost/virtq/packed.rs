//! Packed virtqueues (virtio 1.2 §2.8, VIRTIO_F_RING_PACKED): one descriptor ring that
//! the driver and the device both write, and two event suppression structures.
//!
//! - A descriptor is available when its AVAIL flag equals the device's avail wrap
//!   counter and its USED flag differs (§2.8.1); a chain is consecutive ring slots
//!   linked by NEXT (wrapping at the end of the ring), and its buffer id is in its last
//!   descriptor (§2.8.6); an INDIRECT descriptor's table is read in order, all of it
//!   (§2.8.7, its NEXT flags and ids ignored).
//! - The device writes a used descriptor over the chain's first slot (it completes
//!   chains in the order it took them, so the used position is always where the chain
//!   began): `len`, `id` and the flags (AVAIL = USED = the used wrap counter) as one
//!   8-byte store with Release, so the driver that sees the flags sees the rest; the
//!   used position then moves by the chain's slot count.
//! - Positions are kept as `slot | wrap << 15`, as vhost-user's `SET_VRING_BASE`
//!   carries them; a ring starts at slot 0 with both wrap counters set.
//! - Event suppression (§2.8.10): the driver's structure (driver area) says whether it
//!   wants interrupts (ENABLE, DISABLE, or DESC with EVENT_IDX: when the used
//!   descriptor at its `off_wrap` is written); the device's (device area) whether it
//!   wants kicks, which this device only ever enables or disables.
//!
//! Memory ordering: a descriptor's flags are loaded with Acquire before the rest of it
//! (and, for a chain, before the later slots, which the driver wrote before the head's
//! flags); a `SeqCst` fence separates writing used descriptors from reading the
//! driver's event structure, and enabling kicks from re-reading the next slot's flags.

use std::sync::atomic::{fence, Ordering};

use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, VolatileMemory, VolatileSlice};

use super::{
    first_bytes, take_buffer, Area, AvailCursor, Chain, DeviceRing, Mem, MemView, Seg,
    MAX_CHAIN_BYTES, MAX_CHAIN_DESCS, VRING_DESC_F_INDIRECT, VRING_DESC_F_NEXT, VRING_DESC_F_WRITE,
};
use crate::model::stats::DropReason;
use crate::ports::vhost::migration::LogBatch;

/// Descriptor flag: the driver's avail wrap counter when it made the descriptor
/// available (virtio 1.2 §2.8.1).
pub const VRING_PACKED_DESC_F_AVAIL: u16 = 1 << 7;
/// Descriptor flag: the device's used wrap counter when it wrote the used descriptor.
pub const VRING_PACKED_DESC_F_USED: u16 = 1 << 15;
/// Event suppression flags (virtio 1.2 §2.8.10): notifications on.
pub const RING_EVENT_FLAGS_ENABLE: u16 = 0;
/// Event suppression flags: notifications off.
pub const RING_EVENT_FLAGS_DISABLE: u16 = 1;
/// Event suppression flags: a notification when the descriptor at `off_wrap` is reached
/// (VIRTIO_F_RING_EVENT_IDX only).
pub const RING_EVENT_FLAGS_DESC: u16 = 2;

/// The wrap counter bit of a position (`slot | wrap << 15`).
const WRAP: u16 = 1 << 15;

/// The position of slot 0 with the wrap counter set: where a fresh ring starts, for the
/// device's avail and used positions alike.
pub const PACKED_START: u16 = WRAP;

/// The position `n` slots after `pos` in a ring of `size` slots, flipping the wrap
/// counter each time the end of the ring is passed.
#[inline(always)]
pub fn packed_advance(pos: u16, n: u16, size: u16) -> u16 {
    let mut slot = u32::from(pos & !WRAP) + u32::from(n);
    let mut wrap = pos & WRAP;
    while slot >= u32::from(size) {
        slot -= u32::from(size);
        wrap ^= WRAP;
    }
    slot as u16 | wrap
}

/// A packed ring's three areas, validated for one burst.
pub struct PackedRing<'m> {
    mem: MemView<'m>,
    desc: Slots<'m>,
    /// The driver event suppression structure (written by the driver).
    driver: VolatileSlice<'m>,
    /// The device event suppression structure (written by the device).
    device: VolatileSlice<'m>,
    desc_gpa: u64,
    device_gpa: u64,
    size: u16,
    event_idx: bool,
}

/// The descriptor ring for one burst: [`Area`] accessors by slot.
struct Slots<'m> {
    area: Area<'m>,
}

impl<'m> Slots<'m> {
    /// The slots of `ring`, `size` descriptors of 16 bytes; `None` unless `ring` is
    /// that long and its mapping 16-byte aligned.
    fn new(ring: VolatileSlice<'m>, size: u16) -> Option<Self> {
        if ring.len() != 16 * usize::from(size) {
            return None;
        }
        Some(Slots {
            area: Area::new(ring, 16)?,
        })
    }

    /// The flags of `slot` (0 past the ring), loaded with Acquire.
    #[inline(always)]
    fn flags(&self, slot: u16) -> u16 {
        self.area
            .load_u16(usize::from(slot) * 16 + 14, Ordering::Acquire)
            .unwrap_or(0)
    }

    /// Descriptor `slot`: `(addr, len, id, flags)`, as two 8-byte volatile loads;
    /// `None` past the ring.
    #[inline(always)]
    fn read(&self, slot: u16) -> Option<(u64, u32, u16, u16)> {
        let off = usize::from(slot) * 16;
        let addr = self.area.read_u64(off)?;
        let rest = self.area.read_u64(off + 8)?;
        Some((addr, rest as u32, (rest >> 32) as u16, (rest >> 48) as u16))
    }

    /// Stores bytes 8..16 of `slot` (`len`, `id`, `flags` of a used descriptor) with
    /// Release: one store, so the driver that sees the flags sees the rest.
    #[inline(always)]
    fn store_used(&self, slot: u16, v: u64) {
        self.area
            .store_u64(usize::from(slot) * 16 + 8, v, Ordering::Release);
    }

    /// Starts loading the cache line of `slot`.
    #[inline(always)]
    fn prefetch(&self, slot: u16) {
        self.area.prefetch(usize::from(slot) * 16);
    }
}

impl<'m> PackedRing<'m> {
    /// Views the ring of `q` in `mem` (its descriptor ring at `desc_table`, the driver
    /// area at `avail_ring`, the device area at `used_ring`). Fails when the queue is not
    /// ready, its size is not a power of two, the descriptor ring is not 16-byte aligned
    /// or an area does not lie inside one region of guest memory.
    pub fn new(mem: &'m Mem, q: &Queue) -> Option<Self> {
        let size = q.size();
        if !q.ready() || size == 0 || !size.is_power_of_two() || size > WRAP {
            return None;
        }
        if !q.desc_table().is_multiple_of(16)
            || !q.avail_ring().is_multiple_of(4)
            || !q.used_ring().is_multiple_of(4)
        {
            return None;
        }
        let desc = Slots::new(
            mem.get_slice(GuestAddress(q.desc_table()), 16 * usize::from(size))
                .ok()?,
            size,
        )?;
        let driver = mem.get_slice(GuestAddress(q.avail_ring()), 4).ok()?;
        let device = mem.get_slice(GuestAddress(q.used_ring()), 4).ok()?;
        Some(PackedRing {
            mem: MemView::new(mem),
            desc,
            driver,
            device,
            desc_gpa: q.desc_table(),
            device_gpa: q.used_ring(),
            size,
            event_idx: q.event_idx_enabled(),
        })
    }

    /// The flags of slot `slot`, loaded with Acquire.
    #[inline(always)]
    fn flags(&self, slot: u16) -> u16 {
        self.desc.flags(slot)
    }

    /// Whether the descriptor at position `pos` is available to the device.
    #[inline(always)]
    fn is_avail(&self, pos: u16) -> bool {
        let slot = pos & !WRAP;
        if slot >= self.size {
            return false;
        }
        avail_flags(self.flags(slot), pos)
    }

    /// Reads descriptor `i` of `table` (the ring, or an indirect table): `(addr, len,
    /// id, flags)`, as two bounds-checked 8-byte volatile reads.
    #[inline(always)]
    fn read_desc(table: &VolatileSlice<'_>, i: usize) -> Option<(u64, u32, u16, u16)> {
        let addr: u64 = table.get_ref::<u64>(i * 16).ok()?.load();
        let rest: u64 = u64::from_le(table.get_ref::<u64>(i * 16 + 8).ok()?.load());
        Some((
            u64::from_le(addr),
            rest as u32,
            (rest >> 32) as u16,
            (rest >> 48) as u16,
        ))
    }

    /// The descriptor at `cur` if it is a whole chain of one non-empty buffer in
    /// direction `writable` (a transmit buffer also at most [`MAX_CHAIN_BYTES`]).
    #[inline(always)]
    fn single_desc(&self, cur: &AvailCursor, writable: bool) -> Option<(Chain, Seg)> {
        let slot = cur.next & !WRAP;
        let (addr, len, id, flags) = self.desc.read(slot)?;
        let expected = if writable { VRING_DESC_F_WRITE } else { 0 };
        let shape = flags & (VRING_DESC_F_NEXT | VRING_DESC_F_WRITE | VRING_DESC_F_INDIRECT);
        if shape != expected || len == 0 || (!writable && len > MAX_CHAIN_BYTES) {
            return None;
        }
        Some((Chain { id, descs: 1 }, Seg { addr, len }))
    }

    /// The chain at `cur`: its slots in the ring (following NEXT, at most a ring's
    /// size) and its buffer id, without judging its buffers.
    fn extent(&self, cur: &AvailCursor) -> Chain {
        let mut slot = cur.next & !WRAP;
        let mut descs = 0u16;
        loop {
            descs += 1;
            let (_, _, id, flags) = self.desc.read(slot).unwrap_or((0, 0, 0, 0));
            if flags & VRING_DESC_F_NEXT == 0 || descs == self.size {
                return Chain { id, descs };
            }
            slot = if slot + 1 == self.size { 0 } else { slot + 1 };
        }
    }

    /// Appends the buffers of the chain `chain` at `cur` to `out`; its total length.
    fn walk(
        &self,
        cur: &AvailCursor,
        chain: Chain,
        writable: bool,
        out: &mut Vec<Seg>,
    ) -> Result<u32, DropReason> {
        use DropReason::BadDescriptor;
        if usize::from(chain.descs) > MAX_CHAIN_DESCS {
            return Err(BadDescriptor);
        }
        let mut total = 0u32;
        let mut slot = cur.next & !WRAP;
        for k in 0..chain.descs {
            let (addr, len, _, flags) = self.desc.read(slot).ok_or(BadDescriptor)?;
            if flags & VRING_DESC_F_INDIRECT != 0 {
                // virtio 1.2 §2.8.7: an indirect descriptor is a whole chain.
                if chain.descs != 1 || k != 0 {
                    return Err(BadDescriptor);
                }
                return self.walk_indirect(addr, len, writable, out);
            }
            take_buffer(&self.mem, (addr, len, flags), writable, &mut total, out)?;
            slot = if slot + 1 == self.size { 0 } else { slot + 1 };
        }
        Ok(total)
    }

    /// Appends the buffers of the indirect table at `addr` (`len` bytes) to `out`.
    fn walk_indirect(
        &self,
        addr: u64,
        len: u32,
        writable: bool,
        out: &mut Vec<Seg>,
    ) -> Result<u32, DropReason> {
        use DropReason::BadDescriptor;
        let n = len as usize / 16;
        if !len.is_multiple_of(16) || n == 0 || n > MAX_CHAIN_DESCS {
            return Err(BadDescriptor);
        }
        let table = self.mem.slice(addr, len as usize).ok_or(BadDescriptor)?;
        let mut total = 0u32;
        for i in 0..n {
            let (addr, len, _, flags) = Self::read_desc(&table, i).ok_or(BadDescriptor)?;
            // Only WRITE is meaningful in an indirect table (§2.8.7); INDIRECT would nest.
            if flags & VRING_DESC_F_INDIRECT != 0 {
                return Err(BadDescriptor);
            }
            // DPDK's virtio PMD presets its transmit tables' entries with WRITE
            // (`vring_desc_init_indirect_packed`) and never clears it; DPDK's vhost
            // library ignores the flag there. A transmit chain's table is therefore read
            // whatever its entries' WRITE bits say: the device only reads it. Receive
            // chains keep the check.
            let flags = if writable {
                flags
            } else {
                flags & !VRING_DESC_F_WRITE
            };
            take_buffer(&self.mem, (addr, len, flags), writable, &mut total, out)?;
        }
        Ok(total)
    }
}

impl<'m> DeviceRing<'m> for PackedRing<'m> {
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
        if next_avail & !WRAP >= self.size {
            return Err(next_avail);
        }
        Ok(AvailCursor {
            next: next_avail,
            end: 0,
        })
    }

    #[inline(always)]
    fn has_avail(&self, cur: &AvailCursor) -> bool {
        self.is_avail(cur.next)
    }

    #[inline]
    fn quiet_word(&self, cur: &AvailCursor) -> Option<(usize, u16)> {
        let slot = cur.next & !WRAP;
        let off = usize::from(slot) * 16 + 14;
        // Read again, and watched only if this read also says "not available": the
        // driver may have filled the slot since `has_avail` looked.
        let flags = self.flags(slot);
        if avail_flags(flags, cur.next) {
            return None;
        }
        Some((self.desc.area.addr_of_u16(off)?, flags))
    }

    #[inline]
    fn prefetch_avail(&self, cur: &AvailCursor, n: usize) {
        // Four descriptors per cache line; the first line is being read already.
        let slot = usize::from(cur.next & !WRAP);
        let size = usize::from(self.size);
        for k in (4..n.min(size)).step_by(4) {
            self.desc.prefetch(((slot + k) % size) as u16);
        }
    }

    #[inline(always)]
    fn prefetch_buffer(&self, cur: &AvailCursor, ahead: u16) {
        // Receive chains are one descriptor each in the usual shape: `ahead` slots on.
        let pos = packed_advance(cur.next, ahead, self.size);
        if self.is_avail(pos) {
            let ahead = AvailCursor { next: pos, ..*cur };
            if let Some((_, seg)) = self.single_desc(&ahead, true) {
                self.mem.prefetch_rx_buffer(seg);
            }
        }
    }

    #[inline(always)]
    fn readable_single(&self, cur: &AvailCursor) -> Option<(Chain, Seg, VolatileSlice<'m>)> {
        let (chain, seg) = self.single_desc(cur, false)?;
        Some((chain, seg, self.mem.slice(seg.addr, seg.len as usize)?))
    }

    #[inline(always)]
    fn writable_single(
        &self,
        cur: &AvailCursor,
        need: u32,
    ) -> Option<(Chain, Seg, VolatileSlice<'m>)> {
        let (chain, seg) = self.single_desc(cur, true)?;
        Some((chain, seg, first_bytes(&self.mem, seg, need)?))
    }

    fn read_chain(
        &self,
        cur: &AvailCursor,
        writable: bool,
        out: &mut Vec<Seg>,
    ) -> (Chain, Result<u32, DropReason>) {
        let chain = self.extent(cur);
        let start = out.len();
        let r = self.walk(cur, chain, writable, out);
        if r.is_err() {
            out.truncate(start);
        }
        (chain, r)
    }

    #[inline(always)]
    fn advance(&self, cur: &mut AvailCursor, chain: Chain) {
        cur.next = packed_advance(cur.next, chain.descs, self.size);
    }

    #[inline(always)]
    fn put_used(&self, used: u16, chain: Chain, len: u32) -> u16 {
        let flags = if used & WRAP != 0 {
            VRING_PACKED_DESC_F_AVAIL | VRING_PACKED_DESC_F_USED
        } else {
            0
        };
        let v = u64::from(len) | u64::from(chain.id) << 32 | u64::from(flags) << 48;
        // len, id and flags in one store: the driver that sees the flags sees the rest.
        self.desc.store_used(used & !WRAP, v);
        packed_advance(used, chain.descs, self.size)
    }

    /// With IN_ORDER, one used descriptor for the whole run, with the last chain's
    /// buffer id, at the run's first slot; the used position moves past every chain's
    /// slots (virtio 1.2 §2.8.20: "the device can write out a single used descriptor
    /// with the Buffer ID corresponding to the last descriptor in the batch"). The
    /// driver reads the lengths of none of them (transmit chains).
    #[inline]
    fn put_used_all(&self, used: u16, chains: &[Chain], in_order: bool) -> u16 {
        let Some(last) = chains.last() else {
            return used;
        };
        if !in_order {
            return chains.iter().fold(used, |u, &c| self.put_used(u, c, 0));
        }
        let slots: u32 = chains.iter().map(|c| u32::from(c.descs)).sum();
        let slots = slots.min(u32::from(self.size)) as u16;
        self.put_used(
            used,
            Chain {
                id: last.id,
                descs: slots,
            },
            0,
        )
    }

    #[inline(always)]
    fn publish(&self, _old: u16, _new: u16) {}

    #[inline]
    fn needs_interrupt(&self, old: u16, new: u16) -> bool {
        if old == new {
            return false;
        }
        fence(Ordering::SeqCst);
        let load = |off| {
            self.driver
                .load::<u16>(off, Ordering::Relaxed)
                .map(u16::from_le)
                .unwrap_or(0)
        };
        match load(2) {
            RING_EVENT_FLAGS_DISABLE => false,
            RING_EVENT_FLAGS_DESC if self.event_idx => {
                // Whether the event position lies in [old, new): positions compared on
                // the 2 × size cycle that the slot and its wrap counter describe.
                let lin = |p: u16| {
                    u32::from(p & !WRAP)
                        + if p & WRAP != 0 {
                            0
                        } else {
                            u32::from(self.size)
                        }
                };
                let cycle = 2 * u32::from(self.size);
                let dist = |p: u16| (lin(p) + cycle - lin(old)) % cycle;
                dist(load(0)) < dist(new)
            }
            _ => true,
        }
    }

    fn set_kicks(&self, enable: bool, next_avail: u16) -> bool {
        let v = if enable {
            RING_EVENT_FLAGS_ENABLE
        } else {
            RING_EVENT_FLAGS_DISABLE
        };
        let _ = self.device.store(v.to_le(), 2, Ordering::Relaxed);
        if enable {
            fence(Ordering::SeqCst);
            self.is_avail(next_avail)
        } else {
            false
        }
    }

    fn log_used(&self, log: &mut LogBatch<'_>, _vring: usize, old: u16, new: u16) {
        fence(Ordering::SeqCst);
        let size = u64::from(self.size);
        let first = u64::from(old & !WRAP);
        let end = u64::from(new & !WRAP);
        let n = if end > first || (end == first && old == new) {
            end - first
        } else {
            end + size - first
        };
        let tail = n.min(size - first);
        log.mark(self.desc_gpa + 16 * first, 16 * tail);
        log.mark(self.desc_gpa, 16 * (n - tail));
    }

    fn log_kicks(&self, log: &mut LogBatch<'_>, _vring: usize) {
        fence(Ordering::SeqCst);
        log.mark(self.device_gpa, 4);
    }
}

/// Whether descriptor flags `f` make the descriptor at position `pos` (`slot | wrap <<
/// 15`) available to the device (virtio 1.2 §2.8.1: AVAIL equal to the wrap counter,
/// USED not).
#[inline(always)]
fn avail_flags(f: u16, pos: u16) -> bool {
    let wrap = pos & WRAP != 0;
    (f & VRING_PACKED_DESC_F_AVAIL != 0) == wrap && (f & VRING_PACKED_DESC_F_USED != 0) != wrap
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_wrap_with_their_counter() {
        assert_eq!(packed_advance(PACKED_START, 1, 8), 1 | WRAP);
        assert_eq!(packed_advance(7 | WRAP, 1, 8), 0);
        assert_eq!(packed_advance(6 | WRAP, 3, 8), 1);
        assert_eq!(packed_advance(7, 2, 8), 1 | WRAP);
        assert_eq!(packed_advance(3, 0, 8), 3);
    }
}
