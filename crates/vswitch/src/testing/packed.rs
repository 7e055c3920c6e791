//! The simulated driver's side of packed rings (virtio 1.2 §2.8): the same queue
//! layout as split rings (descriptor ring at the queue's base, the driver event
//! suppression structure where the available ring would be, the device's where the used
//! ring would be), one descriptor per buffer.

use std::sync::atomic::Ordering;

use vhost_user_backend::VringT;
use vm_memory::{Bytes, GuestAddress};

use super::SimGuest;
use crate::ports::vhost::device::PortVring;
use crate::ports::vhost::virtq::packed::{
    packed_advance, VRING_PACKED_DESC_F_AVAIL, VRING_PACKED_DESC_F_USED,
};
use crate::ports::vhost::virtq::VRING_DESC_F_WRITE;

/// Where both sides of a fresh packed ring start: slot 0, wrap counters set.
pub(super) const START: u16 = crate::ports::vhost::virtq::packed::PACKED_START;

/// The wrap counter bit of a position.
const WRAP: u16 = 1 << 15;

impl SimGuest {
    /// Sets the device's positions of a fresh packed ring, as `SET_VRING_BASE` would.
    pub(super) fn packed_init(v: &PortVring) {
        v.set_queue_next_avail(START);
        v.set_queue_next_used(START);
    }

    /// Address of the descriptor at position `pos` of queue `q`.
    fn packed_slot_addr(&self, q: usize, pos: u16) -> u64 {
        self.base_of(q) + 16 * u64::from(pos & !WRAP)
    }

    /// The flags that make a descriptor available at position `pos` (AVAIL = the wrap
    /// counter, USED = its inverse), with `flags` added.
    fn avail_flags(pos: u16, flags: u16) -> u16 {
        if pos & WRAP != 0 {
            flags | VRING_PACKED_DESC_F_AVAIL
        } else {
            flags | VRING_PACKED_DESC_F_USED
        }
    }

    /// Makes buffer `id` available on packed queue `q` in the next slot; its flags are
    /// stored last, with Release.
    pub(super) fn packed_make_avail(
        &mut self,
        q: usize,
        id: u16,
        addr: u64,
        len: u32,
        writable: bool,
    ) {
        self.posted[q][usize::from(id) % usize::from(self.size)] = (addr, len, writable);
        let flags = if writable { VRING_DESC_F_WRITE } else { 0 };
        self.packed_chain(q, &[(addr, len, id, flags)]);
    }

    /// Makes a raw (possibly malformed) chain available on packed queue `q`: each
    /// `(addr, len, id, flags)` in the next slot, with the avail bits of its slot's
    /// position added to `flags`; the head's flags are stored last, with Release, as a
    /// driver must (virtio 1.2 §2.8.21).
    pub fn packed_chain(&mut self, q: usize, descs: &[(u64, u32, u16, u16)]) {
        let head = self.avail_idx[q];
        let mut pos = head;
        let mut head_flags = 0;
        for (k, &(addr, len, id, flags)) in descs.iter().enumerate() {
            let a = self.packed_slot_addr(q, pos);
            let mut b = [0u8; 14];
            b[0..8].copy_from_slice(&addr.to_le_bytes());
            b[8..12].copy_from_slice(&len.to_le_bytes());
            b[12..14].copy_from_slice(&id.to_le_bytes());
            self.mem.write_slice(&b, GuestAddress(a)).expect("desc");
            let f = Self::avail_flags(pos, flags);
            if k == 0 {
                head_flags = f;
            } else {
                self.mem
                    .write_obj(f.to_le(), GuestAddress(a + 14))
                    .expect("flags");
            }
            pos = packed_advance(pos, 1, self.size);
        }
        self.mem
            .store(
                head_flags.to_le(),
                GuestAddress(self.packed_slot_addr(q, head) + 14),
                Ordering::Release,
            )
            .expect("head flags");
        self.avail_idx[q] = pos;
        if let Some(&(_, _, id, _)) = descs.last() {
            self.slot_chain[q][usize::from(head & !WRAP)] = (id, descs.len() as u16);
        }
    }

    /// The position after the used descriptor at `pos` with buffer id `id`: past the
    /// chains made available from `pos` on, up to and including the one with that id
    /// (one chain, or with IN_ORDER a whole batch).
    fn after_used(&self, q: usize, mut pos: u16, id: u16) -> u16 {
        for _ in 0..self.size {
            let (cid, n) = self.slot_chain[q][usize::from(pos & !WRAP)];
            pos = packed_advance(pos, n.max(1), self.size);
            if cid == id {
                break;
            }
        }
        pos
    }

    /// The used descriptor at position `pos` of queue `q`, if the device wrote it:
    /// `(addr, len, id)` (the address is the driver's, which the device leaves).
    fn packed_used(&self, q: usize, pos: u16) -> Option<(u64, u32, u16)> {
        let a = self.packed_slot_addr(q, pos);
        let flags: u16 = u16::from_le(
            self.mem
                .load(GuestAddress(a + 14), Ordering::Acquire)
                .ok()?,
        );
        let wrap = pos & WRAP != 0;
        let avail = flags & VRING_PACKED_DESC_F_AVAIL != 0;
        let used = flags & VRING_PACKED_DESC_F_USED != 0;
        if avail != wrap || used != wrap {
            return None;
        }
        let b = self.read(a, 14);
        Some((
            u64::from_le_bytes(b[0..8].try_into().ok()?),
            u32::from_le_bytes(b[8..12].try_into().ok()?),
            u16::from_le_bytes(b[12..14].try_into().ok()?),
        ))
    }

    /// Used descriptors written on queue `q` so far (modulo 2^16), counted from where
    /// the last count stopped.
    pub(super) fn packed_used_count(&self, q: usize) -> u16 {
        let mut scan = self.used_scan.borrow_mut();
        let (mut pos, mut n) = scan[q];
        while let Some((_, _, id)) = self.packed_used(q, pos) {
            pos = self.after_used(q, pos, id);
            n = n.wrapping_add(1);
        }
        scan[q] = (pos, n);
        n
    }

    /// Takes the next used descriptor of packed queue `q`, if the device wrote it:
    /// `(addr, len)` of its buffer (the position moves past the chains it stands for).
    pub(super) fn packed_take_used(&mut self, q: usize) -> Option<(u64, u32)> {
        let (addr, len, id) = self.packed_used(q, self.used_seen[q])?;
        self.used_seen[q] = self.after_used(q, self.used_seen[q], id);
        Some((addr, len))
    }

    /// Marks every used descriptor of packed queue `q` as read; returns how many.
    pub(super) fn packed_skip_used(&mut self, q: usize) -> u16 {
        let mut n = 0u16;
        while self.packed_take_used(q).is_some() {
            n = n.wrapping_add(1);
        }
        n
    }

    /// Writes the driver event suppression structure of packed queue `q` (virtio 1.2
    /// §2.8.10): `flags` 0 (ENABLE), 1 (DISABLE) or 2 (DESC: an interrupt once the used
    /// descriptor at position `off_wrap` is written, with EVENT_IDX).
    pub fn set_driver_event(&self, q: usize, flags: u16, off_wrap: u16) {
        let a = self.base_of(q) + Self::ring_offsets(self.size).0;
        self.mem
            .write_obj(off_wrap.to_le(), GuestAddress(a))
            .expect("off_wrap");
        self.mem
            .write_obj(flags.to_le(), GuestAddress(a + 2))
            .expect("flags");
    }

    /// The device event suppression flags of packed queue `q`: 0 (kicks wanted) or 1.
    pub fn device_event_flags(&self, q: usize) -> u16 {
        let a = self.base_of(q) + Self::ring_offsets(self.size).1 + 2;
        u16::from_le(self.mem.read_obj(GuestAddress(a)).expect("flags"))
    }

    /// The next avail position of packed queue `q` (`slot | wrap << 15`).
    pub fn avail_position(&self, q: usize) -> u16 {
        self.avail_idx[q]
    }
}
