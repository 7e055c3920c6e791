//! Prefetches of the lines a step will read, made before its shard's lock is
//! taken, so that a caller holding several packets (a burst) waits for their
//! cache misses together rather than one after the other (VPP's and DPDK's
//! hash tables do the same: `clib_bihash_prefetch_bucket`,
//! `rte_hash_lookup_bulk`).
//!
//! A shard publishes where its table's index is ([`Geometry`]) under its lock
//! right after it moved (`ShardCell::published`: after an insert or a
//! shrink); a prefetch reads that without the lock. A stale
//! geometry (a table that grew meanwhile) only prefetches lines nobody will
//! read: a prefetch never faults and changes nothing the program observes.
//! This is the crate's only `unsafe`: the instruction itself.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::nat::NatInfo;
use crate::shard::Slot;
use crate::table::{home, Table, INDEX_SLOT};

/// Where a shard's table index is: its address (0 when not allocated) and
/// its capacity, as of the last time it moved.
#[derive(Debug, Default)]
pub(crate) struct Geometry {
    index: AtomicUsize,
    capacity: AtomicUsize,
}

impl Geometry {
    /// Records where `t`'s index is (under the shard's lock, after it moved).
    #[cold]
    pub fn publish(&self, t: &Table<Slot, NatInfo>) {
        let (index, capacity) = t.geometry();
        self.index.store(index, Relaxed);
        self.capacity.store(capacity, Relaxed);
    }

    /// Starts loading what a lookup of `tag` reads first: the index line at
    /// its home slot (where a key not at its home, a third of them, mostly
    /// is too). The entry it leads to is known only once that line is read.
    #[inline]
    pub fn prefetch(&self, tag: u32) {
        let capacity = self.capacity.load(Relaxed);
        if capacity == 0 {
            return;
        }
        let index = self.index.load(Relaxed);
        line(index.wrapping_add(home(tag, capacity) * INDEX_SLOT));
    }
}

/// Asks for the cache lines holding `v` (nothing is read).
#[inline(always)]
pub(crate) fn value<T>(v: &T) {
    let addr = v as *const T as usize;
    line(addr);
    let size = core::mem::size_of::<T>();
    if size > 1 && (addr & 63) + size > 64 {
        line(addr + size - 1);
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

    fn published(g: &Geometry) -> (usize, usize) {
        (g.index.load(Relaxed), g.capacity.load(Relaxed))
    }

    /// Every shard's published geometry is its table's, through growth, NAT,
    /// flushes and a sweep that shrinks.
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
        assert!(ct.shards.iter().all(|c| published(&c.geometry).1 > 0));
        let grown: Vec<usize> = ct.shards.iter().map(|c| published(&c.geometry).1).collect();
        // Zone 2 flushed (its tables shrink), then the rest expires (a day later).
        ct.flush(Some(2));
        check("zone 2 flushed");
        ct.sweep_all(86_400_000);
        check("swept");
        let shrunk = (ct.shards.iter().zip(&grown)).filter(|(c, &g)| published(&c.geometry).1 < g);
        assert!(shrunk.count() > 0, "no table shrank");
        ct.flush(None);
        check("flushed");
    }
}
