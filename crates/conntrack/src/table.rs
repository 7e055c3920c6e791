//! An open-addressing table with linear probing and entries stored inline:
//! one shard's connections (with NAT'd ones' translations beside them), and
//! its NAT aliases (see `nat.rs`), each entry under its key's tag (the tracker's hash of the key,
//! which the tracker has at hand wherever it looks one up).
//!
//! A parallel array of 32-bit hashes (0 = empty slot) is what a probe
//! scans: sixteen per cache line, so a miss costs about one line, and only
//! a matching hash leads to an entry (a hit touches one). (Comparing the
//! home slot's key first, to save the hash line on a hit, measured slower
//! at 1k and 1M connections: a third of hits are not at home, and a miss
//! then costs an entry too.) Vacant slots hold [`Entry::VACANT`], never
//! read: a slot's entry is compared only when its hash matches.
//!
//! A table may carry a side value per slot ([`Side`]; none by default),
//! allocated only once one is set and moved with its entry: a NAT'd
//! connection's translation sits beside it, found with its slot, not by a
//! second lookup (a lookup that reaches it reads one more line, at an
//! address known as soon as the entry's, so the two loads overlap).
//!
//! Entries never hold tombstones: removal shifts the
//! following entries back (Knuth's Algorithm R), which keeps probe runs
//! short under churn and lets [`Table::remove`] run in the middle of a
//! sweep. The home bucket is `hash × capacity >> 32` (Lemire's fast range),
//! so the capacity need not be a power of two (a shrunk table is half
//! full). It doubles when the load passes 4/5, so a growing table holds
//! 1.25 to 2.5 slots per entry, and shrinks to half full when a sweep or
//! flush leaves it under 1/5. (Growing by half held 1.25 to 1.9 slots, but
//! moved every entry about twice as often: while millions of connections
//! opened, as in `scripts/bench-cps.sh`, the load balancer's rate was a
//! fifth lower.)

use crate::key::Key;

const MIN_CAPACITY: usize = 16;

/// What a [`Table`] holds: plain data under a [`Key`].
pub(crate) trait Entry: Copy {
    /// What an empty slot holds.
    const VACANT: Self;
    /// The entry's key.
    fn key(&self) -> &Key;
}

/// A value kept beside some slots' entries (see [`Table::set_side`]).
pub(crate) trait Side: Copy {
    /// What a slot without one holds.
    const VACANT: Self;
}

impl Side for () {
    const VACANT: () = ();
}

#[cfg(test)]
impl Side for u32 {
    const VACANT: u32 = u32::MAX;
}

#[derive(Debug)]
pub(crate) struct Table<E, S = ()> {
    /// Hash of each slot's key, never 0 when occupied; 0 when empty.
    hashes: Vec<u32>,
    /// Entries; an empty slot holds [`Entry::VACANT`].
    slots: Vec<E>,
    /// Side values, one per slot once any was set (else empty); only a
    /// slot whose entry says it has one holds a meaningful value.
    side: Vec<S>,
    len: usize,
    /// An array was allocated or freed since [`take_moved`](Self::take_moved) last
    /// said so.
    moved: bool,
}

impl<E, S> Default for Table<E, S> {
    fn default() -> Self {
        Table {
            hashes: Vec::new(),
            slots: Vec::new(),
            side: Vec::new(),
            len: 0,
            moved: true,
        }
    }
}

/// A key hash as stored: non-zero.
#[inline]
pub(crate) fn tag(h: u64) -> u32 {
    (h as u32).max(1)
}

/// The home slot of `tag` in a table of `capacity` slots (Lemire's fast range).
#[inline]
pub(crate) fn home(tag: u32, capacity: usize) -> usize {
    ((u64::from(tag) * capacity as u64) >> 32) as usize
}

impl<E: Entry, S: Side> Table<E, S> {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn capacity(&self) -> usize {
        self.hashes.len()
    }

    /// The addresses of the hash, entry and side arrays (0 where not
    /// allocated) and the capacity, for prefetches (`prefetch.rs`).
    pub fn geometry(&self) -> (usize, usize, usize, usize) {
        let addr = |allocated: bool, a: usize| if allocated { a } else { 0 };
        let cap = self.capacity();
        (
            addr(cap > 0, self.hashes.as_ptr() as usize),
            addr(cap > 0, self.slots.as_ptr() as usize),
            addr(!self.side.is_empty(), self.side.as_ptr() as usize),
            cap,
        )
    }

    /// Whether an array was allocated or freed since the last call (the table's
    /// [`geometry`](Self::geometry) changed), and forgets it.
    #[inline]
    pub fn take_moved(&mut self) -> bool {
        // Read first: nothing is stored when nothing moved.
        if self.moved {
            self.moved = false;
            return true;
        }
        false
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.hashes.capacity() * 4
            + self.slots.capacity() * core::mem::size_of::<E>()
            + self.side.capacity() * core::mem::size_of::<S>()
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        home(tag, self.hashes.len())
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.hashes.len() {
            0
        } else {
            i + 1
        }
    }

    /// The slot holding `key`, if any.
    #[inline]
    pub fn find(&self, tag: u32, key: &Key) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mut i = self.home(tag);
        loop {
            let h = self.hashes[i];
            if h == 0 {
                return None;
            }
            if h == tag && self.slots[i].key() == key {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    /// The occupied slot `i`'s tag, or `None` for an empty slot.
    #[inline]
    pub fn tag_at(&self, i: usize) -> Option<u32> {
        match self.hashes[i] {
            0 => None,
            h => Some(h),
        }
    }

    pub fn get(&self, i: usize) -> &E {
        &self.slots[i]
    }

    pub fn get_mut(&mut self, i: usize) -> &mut E {
        &mut self.slots[i]
    }

    /// The side value of occupied slot `i`, which one was set for (the
    /// caller's entry says so; reading any other is a bug, and panics if
    /// the table never had one).
    #[inline]
    pub fn side(&self, i: usize) -> &S {
        debug_assert_ne!(self.hashes[i], 0);
        &self.side[i]
    }

    /// Sets the side value of occupied slot `i` (allocating the side
    /// array at the first).
    pub fn set_side(&mut self, i: usize, v: S) {
        debug_assert_ne!(self.hashes[i], 0);
        if self.side.is_empty() {
            self.side = vec![S::VACANT; self.capacity()];
            self.moved = true;
        }
        self.side[i] = v;
    }

    /// Inserts an entry whose key is not in the table; returns its slot.
    pub fn insert(&mut self, tag: u32, e: E) -> usize {
        if (self.len + 1) * 5 > self.capacity() * 4 {
            let grown = (2 * self.capacity()).max(MIN_CAPACITY);
            self.resize(grown);
        }
        self.len += 1;
        self.place(tag, e)
    }

    /// Writes an entry at the first free slot from its home; its side
    /// value, if any, is the caller's to write.
    fn place(&mut self, tag: u32, e: E) -> usize {
        let mut i = self.home(tag);
        while self.hashes[i] != 0 {
            i = self.next(i);
        }
        self.hashes[i] = tag;
        self.slots[i] = e;
        i
    }

    /// Removes slot `i` (occupied) and returns its entry. Entries after
    /// it in the probe run move back; the one now at `i`, if any, has not
    /// been seen by a forward scan yet.
    pub fn remove(&mut self, mut i: usize) -> E {
        let out = self.slots[i];
        self.hashes[i] = 0;
        self.slots[i] = E::VACANT;
        self.len -= 1;
        let mut j = i;
        loop {
            j = self.next(j);
            let h = self.hashes[j];
            if h == 0 {
                return out;
            }
            let k = self.home(h);
            // The entry at j stays if its home lies cyclically in (i, j].
            let stays = if i <= j {
                i < k && k <= j
            } else {
                i < k || k <= j
            };
            if !stays {
                self.hashes[i] = h;
                self.slots[i] = self.slots[j];
                if !self.side.is_empty() {
                    self.side[i] = self.side[j];
                }
                self.hashes[j] = 0;
                self.slots[j] = E::VACANT;
                i = j;
            }
        }
    }

    /// Shrinks after mass removal (expiry, flush), keeping load ≤ 1/2.
    pub fn maybe_shrink(&mut self) {
        let cap = self.capacity();
        if cap > MIN_CAPACITY && self.len * 5 < cap {
            self.resize((self.len * 2).max(MIN_CAPACITY));
        } else if self.len == 0 && cap > 0 {
            *self = Table::default();
        }
    }

    /// Builds new arrays of `cap` slots and places every entry in them.
    fn resize(&mut self, cap: usize) {
        self.moved = true;
        let hashes = core::mem::replace(&mut self.hashes, vec![0; cap]);
        let slots = core::mem::replace(&mut self.slots, vec![E::VACANT; cap]);
        let side = core::mem::take(&mut self.side);
        if !side.is_empty() {
            self.side = vec![S::VACANT; cap];
        }
        for (j, (h, c)) in hashes.into_iter().zip(slots).enumerate() {
            if h != 0 {
                let i = self.place(h, c);
                if let Some(&v) = side.get(j) {
                    self.side[i] = v;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Conn;

    fn conn(n: u32) -> (u32, Conn) {
        let mut c = Conn::VACANT;
        c.key.src[..4].copy_from_slice(&n.to_be_bytes());
        // A poor hash on purpose: long runs, wrap-around, shared homes.
        (tag(u64::from(n % 7) << 29 | 1), c)
    }

    #[test]
    fn insert_find_remove_under_collisions() {
        let mut t = Table::<Conn>::default();
        for n in 0..200 {
            let (h, c) = conn(n);
            t.insert(h, c);
        }
        assert_eq!(t.len(), 200);
        assert!(t.capacity() * 4 >= 200 * 5);
        for n in (0..200).step_by(3) {
            let (h, c) = conn(n);
            let i = t.find(h, &c.key).expect("present");
            assert_eq!(t.remove(i).key, c.key);
        }
        for n in 0..200 {
            let (h, c) = conn(n);
            assert_eq!(t.find(h, &c.key).is_some(), n % 3 != 0, "{n}");
        }
        let missing = Key {
            proto: 99,
            ..Key::default()
        };
        assert_eq!(t.find(5, &missing), None);
    }

    #[test]
    fn side_values_move_with_their_entries() {
        let mut t = Table::<Conn, u32>::default();
        for n in 0..300 {
            let (h, c) = conn(n);
            let i = t.insert(h, c);
            if n % 2 == 0 {
                t.set_side(i, n);
            }
        }
        // Removals shift runs back; the growth above moved everything.
        for n in (0..300).step_by(5) {
            let (h, c) = conn(n);
            t.remove(t.find(h, &c.key).unwrap());
        }
        t.maybe_shrink();
        for n in (0..300).filter(|n| n % 2 == 0 && n % 5 != 0) {
            let (h, c) = conn(n);
            assert_eq!(*t.side(t.find(h, &c.key).unwrap()), n);
        }
    }

    /// Inserts, removals and growth against a model, with a hash
    /// that makes long runs, shared homes and runs that wrap.
    #[test]
    fn against_a_model_under_growth_and_removal() {
        let mut t = Table::<Conn, u32>::default();
        let mut model = std::collections::HashMap::new();
        let mut x = 1u32;
        for round in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let n = x % 3000;
            let (h, c) = conn(n);
            // A poorer hash still for a third of the keys: one home.
            let h = if n % 3 == 0 { tag(u64::MAX) } else { h };
            match (t.find(h, &c.key), round % 4) {
                (Some(i), 0) => {
                    t.remove(i);
                    model.remove(&n);
                }
                (Some(i), _) => assert_eq!(*t.side(i), model[&n], "{n}"),
                (None, _) => {
                    let i = t.insert(h, c);
                    t.set_side(i, n);
                    model.insert(n, n);
                }
            }
        }
        assert_eq!(t.len(), model.len());
        for n in 0..3000u32 {
            let (h, c) = conn(n);
            let h = if n % 3 == 0 { tag(u64::MAX) } else { h };
            let found = t.find(h, &c.key).map(|i| *t.side(i));
            assert_eq!(found, model.get(&n).copied(), "{n}");
        }
    }

    #[test]
    fn shrinks_when_emptied() {
        let mut t = Table::<Conn>::default();
        for n in 0..1000 {
            let (h, c) = conn(n);
            t.insert(h, c);
        }
        for n in 0..990 {
            let (h, c) = conn(n);
            let i = t.find(h, &c.key).unwrap();
            t.remove(i);
        }
        t.maybe_shrink();
        assert!(t.capacity() <= 32, "{}", t.capacity());
        for n in 990..1000 {
            let (h, c) = conn(n);
            assert!(t.find(h, &c.key).is_some());
        }
    }
}
