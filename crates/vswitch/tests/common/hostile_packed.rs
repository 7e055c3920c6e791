//! The hostile front-end of [`super::hostile`] on packed virtqueues (virtio 1.2 §2.8,
//! VIRTIO_F_RING_PACKED): [`PackedGuest`] negotiates packed rings over the real
//! vhost-user protocol (`SET_VRING_BASE` carrying the wrap counter in bit 15) and
//! writes the descriptor ring itself, well formed or not ([`PackedRing`]).
//!
//! The rings use the same guest-memory layout as the split ones: the descriptor ring
//! where the split descriptor table is, the driver event suppression structure where
//! the available ring is, the device's where the used ring is.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use super::hostile::*;
use super::wait_for;
use vswitch::ports::vhost::virtq::packed::packed_advance;

/// VIRTIO_F_RING_PACKED.
pub const F_RING_PACKED: u64 = 1 << 34;
/// Packed descriptor flags: the driver's avail wrap counter, the device's used one.
pub const P_AVAIL: u16 = 1 << 7;
pub const P_USED: u16 = 1 << 15;
/// A position's wrap counter bit (`slot | wrap << 15`).
pub const WRAP: u16 = 1 << 15;
/// Event suppression flags: no interrupts wanted (the test polls).
const EVENT_DISABLE: u16 = 1;

/// The driver side of one packed ring in [`GuestMem`].
pub struct PackedRing {
    /// Virtqueue index (0: receive, 1: transmit).
    pub index: u32,
    l: Layout,
    /// Next position to make available, `slot | wrap << 15`.
    avail: u16,
    /// Next position to read a used descriptor at.
    used: u16,
    arena_next: u64,
    /// Ring slots of the chain last made available with each buffer id.
    slots: HashMap<u16, u16>,
    next_id: u16,
    /// Chains made available, and used descriptors read, so far.
    made: u64,
    seen: u64,
    pub kick: OwnedFd,
    pub call: OwnedFd,
}

impl PackedRing {
    fn new(index: u32, l: Layout) -> PackedRing {
        PackedRing {
            index,
            l,
            avail: WRAP,
            used: WRAP,
            arena_next: l.arena.0,
            slots: HashMap::new(),
            next_id: 0,
            made: 0,
            seen: 0,
            kick: eventfd(),
            call: eventfd(),
        }
    }

    /// SET_VRING_ADDR's body: descriptor ring, device area (as the used ring), driver
    /// area (as the available ring).
    fn addr_body(&self) -> Vec<u8> {
        let mut addr = self.index.to_le_bytes().to_vec();
        addr.extend_from_slice(&0u32.to_le_bytes());
        for a in [self.l.desc, self.l.used, self.l.avail] {
            addr.extend_from_slice(&(UADDR + a).to_le_bytes());
        }
        addr.extend_from_slice(&0u64.to_le_bytes());
        addr
    }

    /// `len` bytes of buffer space in this ring's arena (as [`Ring::alloc`]).
    pub fn alloc(&mut self, len: usize) -> u64 {
        arena_alloc(self.l.arena, &mut self.arena_next, len)
    }

    fn slot_gpa(&self, pos: u16) -> u64 {
        self.l.desc + 16 * u64::from(pos & !WRAP)
    }

    /// Makes a chain of `descs` available in consecutive slots (flags as given, NEXT
    /// added to all but the last when `link`; the avail bits of each slot's position
    /// added), a fresh buffer id in every descriptor, the head's flags stored last with
    /// Release; kicks. Returns the buffer id.
    pub fn chain(&mut self, mem: &GuestMem, descs: &[Desc], link: bool) -> u16 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1) % QSIZE;
        let head = self.avail;
        let mut pos = head;
        let mut head_flags = 0;
        for (k, d) in descs.iter().enumerate() {
            let mut flags = d.flags;
            if link && k + 1 < descs.len() {
                flags |= NEXT;
            }
            flags |= if pos & WRAP != 0 { P_AVAIL } else { P_USED };
            let mut b = [0u8; 14];
            b[..8].copy_from_slice(&d.addr.to_le_bytes());
            b[8..12].copy_from_slice(&d.len.to_le_bytes());
            b[12..14].copy_from_slice(&id.to_le_bytes());
            mem.write(self.slot_gpa(pos), &b);
            if k == 0 {
                head_flags = flags;
            } else {
                mem.store16(self.slot_gpa(pos) + 14, flags);
            }
            pos = packed_advance(pos, 1, QSIZE);
        }
        mem.store16(self.slot_gpa(head) + 14, head_flags);
        self.avail = pos;
        self.slots.insert(id, descs.len() as u16);
        self.made += 1;
        let one = 1u64.to_ne_bytes();
        // SAFETY: write(2) of 8 bytes to our own eventfd.
        let n = unsafe { libc::write(self.kick.as_raw_fd(), one.as_ptr().cast(), 8) };
        assert_eq!(n, 8, "kick");
        id
    }

    /// The used descriptors written since the last call: (buffer id, length).
    pub fn take_used(&mut self, mem: &GuestMem) -> Vec<(u16, u32)> {
        let mut v = Vec::new();
        loop {
            let at = self.slot_gpa(self.used);
            let flags = mem.load16(at + 14);
            let wrap = self.used & WRAP != 0;
            if (flags & P_AVAIL != 0) != wrap || (flags & P_USED != 0) != wrap {
                return v;
            }
            let b = mem.read(at + 8, 6);
            let len = u32::from_le_bytes(b[..4].try_into().unwrap());
            let id = u16::from_le_bytes(b[4..6].try_into().unwrap());
            let n = self.slots.get(&id).copied().unwrap_or(1);
            self.used = packed_advance(self.used, n, QSIZE);
            self.seen += 1;
            v.push((id, len));
        }
    }

    /// Waits until the switch has returned every chain made available; returns the used
    /// descriptors read meanwhile.
    pub fn wait_all_used(&mut self, mem: &GuestMem, what: &str) -> Vec<(u16, u32)> {
        let mut all = Vec::new();
        wait_for(Duration::from_secs(5), what, || {
            all.extend(self.take_used(mem));
            (self.seen == self.made).then_some(())
        });
        all
    }
}

/// A front-end with queue pair 0 on packed rings over shared memory.
pub struct PackedGuest {
    pub front: Front,
    pub mem: GuestMem,
    /// Virtqueue 0: the guest's receive queue.
    pub rx: PackedRing,
    /// Virtqueue 1: the guest's transmit queue.
    pub tx: PackedRing,
}

impl PackedGuest {
    /// Connects to `path` and sets up queue pair 0 on packed rings, acking VERSION_1,
    /// PROTOCOL_FEATURES, INDIRECT_DESC, RING_PACKED and `extra`; both rings start at
    /// slot 0 with the wrap counter set.
    pub fn connect(path: &Path, extra: u64) -> PackedGuest {
        Self::connect_at(path, extra, u32::from(WRAP))
    }

    /// [`PackedGuest::connect`], with `base` as the transmit ring's `SET_VRING_BASE`
    /// (the ring's own idea of its position stays slot 0, wrap 1).
    pub fn connect_at(path: &Path, extra: u64, base: u32) -> PackedGuest {
        let features = F_VERSION_1 | F_PROTOCOL_FEATURES | F_INDIRECT_DESC | F_RING_PACKED | extra;
        let (front, mem) = negotiate(path, features, 0);
        let mut g = PackedGuest {
            front,
            mem,
            rx: PackedRing::new(0, RX_LAYOUT),
            tx: PackedRing::new(1, TX_LAYOUT),
        };
        // No interrupts wanted: the test polls the rings.
        g.mem.store16(RX_LAYOUT.avail + 2, EVENT_DISABLE);
        g.mem.store16(TX_LAYOUT.avail + 2, EVENT_DISABLE);
        for r in [&g.rx, &g.tx] {
            let base = if r.index == 1 { base } else { u32::from(WRAP) };
            start_vring(
                &mut g.front,
                r.index,
                &r.addr_body(),
                base,
                &r.call,
                &r.kick,
            );
        }
        g
    }

    /// One frame behind virtio-net header `vhdr` in one readable descriptor; returns
    /// the buffer id.
    pub fn send(&mut self, vhdr: &[u8; VNET_HDR], frame: &[u8]) -> u16 {
        let mut b = vhdr.to_vec();
        b.extend_from_slice(frame);
        let a = self.tx_bytes(&b);
        self.send_chain(&[Desc::new(a, b.len() as u32, 0)])
    }

    /// A transmit chain of `descs` in consecutive slots, NEXT added to all but the last.
    pub fn send_chain(&mut self, descs: &[Desc]) -> u16 {
        self.tx.chain(&self.mem, descs, true)
    }

    /// A transmit chain of `descs` with their flags exactly as given.
    pub fn send_raw(&mut self, descs: &[Desc]) -> u16 {
        self.tx.chain(&self.mem, descs, false)
    }

    /// Copies `data` into the transmit arena; returns its guest-physical address.
    pub fn tx_bytes(&mut self, data: &[u8]) -> u64 {
        let a = self.tx.alloc(data.len().max(1));
        self.mem.write(a, data);
        a
    }

    /// Waits until the switch has returned every transmit chain.
    pub fn tx_done(&mut self) {
        self.tx
            .wait_all_used(&self.mem, "the switch to complete the tx chains");
    }

    /// Receive chains, one per entry of `chains` (flags as given, NEXT added within a
    /// chain); returns their buffer ids.
    pub fn rx_chains(&mut self, chains: &[Vec<Desc>]) -> Vec<u16> {
        chains
            .iter()
            .map(|c| self.rx.chain(&self.mem, c, true))
            .collect()
    }

    /// `n` receive buffers of `len` bytes; returns (buffer id, address) of each.
    pub fn post_rx(&mut self, n: usize, len: u32) -> Vec<(u16, u64)> {
        (0..n)
            .map(|_| {
                let a = self.rx.alloc(len as usize);
                (
                    self.rx.chain(&self.mem, &[Desc::new(a, len, WRITE)], true),
                    a,
                )
            })
            .collect()
    }
}

/// Writes entry `i` of the packed indirect table at `table` (virtio 1.2 §2.8.7: the
/// packed descriptor layout, `addr`, `len`, `id`, `flags`; the id left 0).
pub fn write_packed_entry(mem: &GuestMem, table: u64, i: u16, d: Desc) {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&d.addr.to_le_bytes());
    b[8..12].copy_from_slice(&d.len.to_le_bytes());
    b[14..16].copy_from_slice(&d.flags.to_le_bytes());
    mem.write(table + 16 * u64::from(i), &b);
}
