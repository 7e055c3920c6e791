//! One shard's entries (its connections and NAT aliases, see `nat.rs`),
//! each under its key's tag (the tracker's hash of the key, which the
//! tracker has at hand wherever it looks one up): an open-addressing index
//! with linear probing over a dense pool of entries.
//!
//! - The **pool** holds the entries in positions `0..len`, in chunks of
//!   [`CHUNK`] that are never moved nor copied: a new entry goes to the
//!   end, so a burst of new connections writes lines one after the other
//!   rather than one line in a random place each; a removed entry's place
//!   takes the last one (a position stays valid until the next removal).
//!   Beside each entry its tag, and, once any was set, a side value
//!   ([`Side`]; none by default): a NAT'd connection's translation.
//! - The **index** is an array of 8-byte slots, a tag and a position
//!   (tag 0 = empty), eight per cache line: a lookup reads the line at the
//!   key's home slot and, where a tag matches, that position's entry. A miss
//!   (every new connection's first lookup) costs about one line.
//!
//! The index doubles when its load passes 4/5 and shrinks to half full
//! when a sweep or flush leaves it under 1/5; growing rewrites its 8-byte
//! slots only, never an entry. (Entries stored in the index itself, 96
//! bytes per slot at 1.25 to 2.5 slots per entry, made a growing tracker
//! move every entry at each doubling and write each new one to a random
//! line: while millions of connections opened, as in
//! `scripts/bench-cps.sh`, the doublings alone took a fifth of the time;
//! and a million connections took 210 bytes each.) The index never holds
//! tombstones: removal shifts the following slots back (Knuth's Algorithm
//! R), which keeps probe runs short under churn. The home slot is
//! `tag × capacity >> 32` (Lemire's fast range), so the capacity need not
//! be a power of two (a shrunk index is half full).

use crate::key::Key;

const MIN_CAPACITY: usize = 16;
/// log2 of [`CHUNK`].
const CHUNK_BITS: u32 = 7;
/// Entries per pool chunk (12 KiB of 96-byte entries).
const CHUNK: usize = 1 << CHUNK_BITS;

/// What a [`Table`] holds: plain data under a [`Key`].
pub(crate) trait Entry: Copy {
    /// The entry's key.
    fn key(&self) -> &Key;
}

/// A value kept beside some entries (see [`Table::set_side`]).
pub(crate) trait Side: Copy {
    /// What an entry without one has.
    const VACANT: Self;
}

impl Side for () {
    const VACANT: () = ();
}

#[cfg(test)]
impl Side for u32 {
    const VACANT: u32 = u32::MAX;
}

/// An index slot: a tag (0: empty) and the position of its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(8))]
struct IndexSlot {
    tag: u32,
    at: u32,
}

impl IndexSlot {
    const EMPTY: IndexSlot = IndexSlot { tag: 0, at: 0 };
}

/// Bytes of an index slot.
pub(crate) const INDEX_SLOT: usize = core::mem::size_of::<IndexSlot>();

#[derive(Debug)]
pub(crate) struct Table<E, S = ()> {
    index: Vec<IndexSlot>,
    entries: Pool<E>,
    /// Each entry's tag, by position.
    tags: Pool<u32>,
    /// Side values, one per entry once any was set (else empty); only an
    /// entry that says it has one has a meaningful value.
    side: Pool<S>,
    /// The index was allocated or freed since [`take_moved`](Self::take_moved)
    /// last said so.
    moved: bool,
}

impl<E, S> Default for Table<E, S> {
    fn default() -> Self {
        Table {
            index: Vec::new(),
            entries: Pool::default(),
            tags: Pool::default(),
            side: Pool::default(),
            moved: true,
        }
    }
}

/// A key hash as stored: non-zero.
#[inline]
pub(crate) fn tag(h: u64) -> u32 {
    (h as u32).max(1)
}

/// The home slot of `tag` in an index of `capacity` slots (Lemire's fast range).
#[inline]
pub(crate) fn home(tag: u32, capacity: usize) -> usize {
    ((u64::from(tag) * capacity as u64) >> 32) as usize
}

impl<E: Entry, S: Side> Table<E, S> {
    /// How many entries the table holds: their positions are `0..len`.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Slots in the index.
    pub fn capacity(&self) -> usize {
        self.index.len()
    }

    /// The address of the index (0 when not allocated) and its capacity,
    /// for prefetches (`prefetch.rs`).
    pub fn geometry(&self) -> (usize, usize) {
        match self.capacity() {
            0 => (0, 0),
            cap => (self.index.as_ptr() as usize, cap),
        }
    }

    /// Whether the index was allocated or freed since the last call (the
    /// table's [`geometry`](Self::geometry) changed), and forgets it.
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
        self.index.capacity() * core::mem::size_of::<IndexSlot>()
            + self.entries.bytes()
            + self.tags.bytes()
            + self.side.bytes()
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        home(tag, self.index.len())
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.index.len() {
            0
        } else {
            i + 1
        }
    }

    /// The position of the entry under `key`, if any.
    #[inline]
    pub fn find(&self, tag: u32, key: &Key) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let mut i = self.home(tag);
        loop {
            let s = self.index[i];
            if s.tag == 0 {
                return None;
            }
            if s.tag == tag && self.entries.get(s.at as usize).key() == key {
                return Some(s.at as usize);
            }
            i = self.next(i);
        }
    }

    /// Prefetches the entries (and side values) of the slots tagged `tag`
    /// in the probe run from its home, up to a line's worth of slots.
    #[inline]
    pub fn prefetch_entries(&self, tag: u32) {
        if self.index.is_empty() {
            return;
        }
        let mut i = self.home(tag);
        for _ in 0..64 / INDEX_SLOT {
            let s = self.index[i];
            if s.tag == 0 {
                return;
            }
            if s.tag == tag {
                let p = s.at as usize;
                crate::prefetch::value(self.entries.get(p));
                if !self.side.is_empty() {
                    crate::prefetch::value(self.side.get(p));
                }
            }
            i = self.next(i);
        }
    }

    /// The entry at position `p`.
    ///
    /// # Panics
    /// `p` is not below [`len`](Self::len).
    #[inline]
    pub fn get(&self, p: usize) -> &E {
        self.entries.get(p)
    }

    /// The entry at position `p`.
    ///
    /// # Panics
    /// `p` is not below [`len`](Self::len).
    #[inline]
    pub fn get_mut(&mut self, p: usize) -> &mut E {
        self.entries.get_mut(p)
    }

    /// The side value of the entry at `p`, which one was set for (the
    /// caller's entry says so; reading any other is a bug, and panics if
    /// the table never had one).
    #[inline]
    pub fn side(&self, p: usize) -> &S {
        self.side.get(p)
    }

    /// Sets the side value of the entry at `p` (allocating the side
    /// values at the first).
    pub fn set_side(&mut self, p: usize, v: S) {
        while self.side.len() < self.len() {
            self.side.push(S::VACANT);
        }
        *self.side.get_mut(p) = v;
    }

    /// Inserts an entry whose key is not in the table; returns its position.
    pub fn insert(&mut self, tag: u32, e: E) -> usize {
        let p = self.len();
        assert!(
            p < u32::MAX as usize,
            "a shard holds at most 2^32 - 1 entries"
        );
        if (p + 1) * 5 > self.capacity() * 4 {
            let grown = (2 * self.capacity()).max(MIN_CAPACITY);
            self.resize(grown);
        }
        self.entries.push(e);
        self.tags.push(tag);
        if !self.side.is_empty() {
            self.side.push(S::VACANT);
        }
        self.place(IndexSlot { tag, at: p as u32 });
        p
    }

    /// Writes `s` at the first free slot from its home.
    fn place(&mut self, s: IndexSlot) {
        let mut i = self.home(s.tag);
        while self.index[i].tag != 0 {
            i = self.next(i);
        }
        self.index[i] = s;
    }

    /// The index slot of the entry at `p` (present).
    ///
    /// # Panics
    /// The probe run from its home ends without it (a broken index: a panic
    /// rather than a loop under the shard's lock).
    fn slot_of(&self, p: usize) -> usize {
        let tag = *self.tags.get(p);
        let mut i = self.home(tag);
        while self.index[i] != (IndexSlot { tag, at: p as u32 }) {
            assert_ne!(self.index[i].tag, 0, "position {p} is not indexed");
            i = self.next(i);
        }
        i
    }

    /// Removes the entry at `p` and returns it. The last entry takes its
    /// position (unless it was the last): a scan of positions upwards
    /// examines `p` again.
    pub fn remove(&mut self, p: usize) -> E {
        let i = self.slot_of(p);
        self.unlink(i);
        let last = self.len() - 1;
        if p != last {
            let j = self.slot_of(last);
            self.index[j].at = p as u32;
        }
        if !self.side.is_empty() {
            self.side.swap_remove(p);
        }
        self.tags.swap_remove(p);
        self.entries.swap_remove(p)
    }

    /// Empties index slot `i`; the slots after it in its probe run move
    /// back where their homes allow.
    fn unlink(&mut self, mut i: usize) {
        self.index[i] = IndexSlot::EMPTY;
        let mut j = i;
        loop {
            j = self.next(j);
            let s = self.index[j];
            if s.tag == 0 {
                return;
            }
            let k = self.home(s.tag);
            // The slot at j stays if its home lies cyclically in (i, j].
            let stays = if i <= j {
                i < k && k <= j
            } else {
                i < k || k <= j
            };
            if !stays {
                self.index[i] = s;
                self.index[j] = IndexSlot::EMPTY;
                i = j;
            }
        }
    }

    /// Shrinks after mass removal (expiry, flush), keeping the index's
    /// load ≤ 1/2.
    pub fn maybe_shrink(&mut self) {
        let cap = self.capacity();
        let len = self.len();
        if len == 0 && cap > 0 {
            *self = Table::default();
        } else if cap > MIN_CAPACITY && len * 5 < cap {
            self.resize((len * 2).max(MIN_CAPACITY));
        }
    }

    /// Builds an index of `cap` slots and places every slot in it (in the
    /// old index's order: the homes rise, so the writes go forward).
    fn resize(&mut self, cap: usize) {
        self.moved = true;
        let old = core::mem::replace(&mut self.index, vec![IndexSlot::EMPTY; cap]);
        for s in old {
            if s.tag != 0 {
                self.place(s);
            }
        }
    }
}

/// Values in positions `0..len`, in chunks of [`CHUNK`] that never move.
#[derive(Debug)]
struct Pool<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Copy> Pool<T> {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn get(&self, p: usize) -> &T {
        &self.chunks[p >> CHUNK_BITS][p & (CHUNK - 1)]
    }

    #[inline]
    fn get_mut(&mut self, p: usize) -> &mut T {
        &mut self.chunks[p >> CHUNK_BITS][p & (CHUNK - 1)]
    }

    fn push(&mut self, v: T) {
        let c = self.len >> CHUNK_BITS;
        if c == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        self.chunks[c].push(v);
        self.len += 1;
    }

    /// Removes the value at `p`; the last takes its place.
    fn swap_remove(&mut self, p: usize) -> T {
        self.len -= 1;
        let c = self.len >> CHUNK_BITS;
        let last = self.chunks[c]
            .pop()
            .expect("the last chunk holds the last value");
        // An emptied chunk stays as a spare (no allocation at the next push);
        // those after it go.
        if self.chunks[c].is_empty() {
            self.chunks.truncate(c + 1);
        }
        if p == self.len {
            last
        } else {
            core::mem::replace(self.get_mut(p), last)
        }
    }

    fn bytes(&self) -> usize {
        self.chunks.capacity() * core::mem::size_of::<Vec<T>>()
            + self
                .chunks
                .iter()
                .map(|c| c.capacity() * core::mem::size_of::<T>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Conn;

    fn conn(n: u32) -> (u32, Conn) {
        let mut c = Conn::BLANK;
        c.key.src[..4].copy_from_slice(&n.to_be_bytes());
        // A poor hash on purpose: long runs, wrap-around, shared homes.
        (tag(u64::from(n % 7) << 29 | 1), c)
    }

    #[test]
    fn an_index_slot_is_8_bytes() {
        assert_eq!(core::mem::size_of::<IndexSlot>(), 8);
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
            let found = t.find(h, &c.key);
            assert_eq!(found.is_some(), n % 3 != 0, "{n}");
            if let Some(p) = found {
                assert_eq!(t.get(p).key, c.key);
            }
        }
        let missing = Key {
            proto: 99,
            ..Key::BLANK
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
        // Removals move the last entries into the gaps.
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
                    assert_eq!(t.remove(i).key, c.key);
                    model.remove(&n);
                }
                (Some(i), _) => assert_eq!(*t.side(i), model[&n], "{n}"),
                (None, _) => {
                    let i = t.insert(h, c);
                    t.set_side(i, n);
                    model.insert(n, n);
                }
            }
            if round % 5000 == 4999 {
                t.maybe_shrink();
            }
        }
        assert_eq!(t.len(), model.len());
        for n in 0..3000u32 {
            let (h, c) = conn(n);
            let h = if n % 3 == 0 { tag(u64::MAX) } else { h };
            let found = t.find(h, &c.key).map(|i| *t.side(i));
            assert_eq!(found, model.get(&n).copied(), "{n}");
        }
        // Every position holds a distinct entry the index finds there.
        for p in 0..t.len() {
            let key = t.get(p).key;
            let n = u32::from_be_bytes(key.src[..4].try_into().unwrap());
            let (h, _) = conn(n);
            let h = if n % 3 == 0 { tag(u64::MAX) } else { h };
            assert_eq!(t.find(h, &key), Some(p));
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
        // The pool keeps one spare chunk at most.
        assert!(t.entries.chunks.len() <= 2, "{}", t.entries.chunks.len());
        for n in 990..1000 {
            let (h, c) = conn(n);
            assert!(t.find(h, &c.key).is_some());
        }
        for n in 990..1000 {
            let (h, c) = conn(n);
            t.remove(t.find(h, &c.key).unwrap());
        }
        t.maybe_shrink();
        assert_eq!((t.capacity(), t.bytes()), (0, 0));
    }
}
