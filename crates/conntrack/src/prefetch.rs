//! Prefetches of the lines a step will read, made before its shard's lock is
//! taken, so that a caller holding several packets (a burst) waits for their
//! cache misses together rather than one after the other (VPP's and DPDK's
//! hash tables do the same: `clib_bihash_prefetch_bucket`,
//! `rte_hash_lookup_bulk`).
//!
//! A shard publishes where its table's arrays are ([`Geometry`]) under its lock
//! right after they moved (`ShardCell::published`: after an insert, a side value
//! or a shrink); a prefetch reads that without the lock. A stale
//! geometry (a table that grew meanwhile) only prefetches lines nobody will
//! read: a prefetch never faults and changes nothing the program observes.
//! This is the crate's only `unsafe`: the instruction itself.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::nat::NatInfo;
use crate::shard::Slot;
use crate::table::{home, Table};

/// Where a shard's table arrays are: their addresses (0 for an array not
/// allocated) and the capacity, as of the last time they moved.
#[derive(Debug, Default)]
pub(crate) struct Geometry {
    hashes: AtomicUsize,
    slots: AtomicUsize,
    side: AtomicUsize,
    capacity: AtomicUsize,
}

impl Geometry {
    /// Records where `t`'s arrays are (under the shard's lock, after they moved).
    #[cold]
    pub fn publish(&self, t: &Table<Slot, NatInfo>) {
        let (hashes, slots, side, capacity) = t.geometry();
        self.hashes.store(hashes, Relaxed);
        self.slots.store(slots, Relaxed);
        self.side.store(side, Relaxed);
        self.capacity.store(capacity, Relaxed);
    }

    /// Starts loading what a lookup of `tag` reads first: the hash line at its
    /// home slot, that slot's entry (two lines: an entry is 96 bytes) and its
    /// translation (where the table has translations). A key not at its home
    /// slot (a third of them) still finds its hash line loaded.
    #[inline]
    pub fn prefetch(&self, tag: u32) {
        let capacity = self.capacity.load(Relaxed);
        if capacity == 0 {
            return;
        }
        let home = home(tag, capacity);
        let hashes = self.hashes.load(Relaxed);
        let slots = self.slots.load(Relaxed);
        let side = self.side.load(Relaxed);
        let entry = core::mem::size_of::<Slot>();
        line(hashes.wrapping_add(home * 4));
        line(slots.wrapping_add(home * entry));
        line(slots.wrapping_add(home * entry + entry - 1));
        if side != 0 {
            line(side.wrapping_add(home * core::mem::size_of::<NatInfo>()));
        }
    }
}

/// Asks for the cache line holding `addr` (any address: nothing is read).
#[inline(always)]
#[allow(unsafe_code)]
fn line(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint: it reads nothing the program observes and
    // never faults, whatever the address; SSE is part of x86-64's baseline.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Conntrack, CtAction, Packet, L4};
    use std::net::Ipv4Addr;

    fn published(g: &Geometry) -> (usize, usize, usize, usize) {
        let l = |a: &AtomicUsize| a.load(Relaxed);
        (l(&g.hashes), l(&g.slots), l(&g.side), l(&g.capacity))
    }

    /// Every shard's published geometry is its table's, through growth, NAT's
    /// side arrays, flushes and a sweep that shrinks.
    #[test]
    fn shards_publish_where_their_tables_are() {
        let ct = Conntrack::new(Config::default()).unwrap();
        let check = |what: &str| {
            for (i, cell) in ct.shards.iter().enumerate() {
                let s = cell.lock();
                assert_eq!(
                    published(&cell.geometry),
                    s.table.geometry(),
                    "{what}, shard {i}"
                );
            }
        };
        let x = Ipv4Addr::new(203, 0, 113, 1).into();
        let snat = crate::Nat::Src(crate::NatRange {
            min: x,
            max: x,
            ports: None,
        });
        for i in 0..20_000u32 {
            let pkt = Packet {
                src: Ipv4Addr::from(0x0a00_0000 | i).into(),
                dst: Ipv4Addr::new(192, 0, 2, 1).into(),
                fragment: false,
                l4: L4::Udp {
                    src_port: 5000,
                    dst_port: 53,
                },
            };
            let act = if i % 2 == 0 {
                CtAction::commit(1)
            } else {
                CtAction::commit(2).with_nat(snat)
            };
            ct.execute(&pkt, &act, 0);
        }
        check("filled");
        assert!(ct.shards.iter().all(|c| published(&c.geometry).3 > 0));
        assert!(
            ct.shards.iter().any(|c| published(&c.geometry).2 != 0),
            "no side array"
        );
        let grown: Vec<usize> = ct.shards.iter().map(|c| published(&c.geometry).3).collect();
        // Zone 2 flushed (its tables shrink), then the rest expires (a day later).
        ct.flush(Some(2));
        check("zone 2 flushed");
        ct.sweep_all(86_400_000);
        check("swept");
        let shrunk = (ct.shards.iter().zip(&grown)).filter(|(c, &g)| published(&c.geometry).3 < g);
        assert!(shrunk.count() > 0, "no table shrank");
        ct.flush(None);
        check("flushed");
    }
}
