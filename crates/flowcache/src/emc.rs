//! The exact-match cache (EMC): a fixed-capacity, bucketed, hash-indexed
//! table from [`FlowKey`] to the caller's decision, owned by one PMD thread.
//!
//! # Layout
//!
//! `entries / WAYS` buckets of [`WAYS`] (= 4) slots; a key lives only in the
//! bucket `hash & (buckets - 1)`. The table is split by how often each part
//! is read, as Open vSwitch's EMC/SMC split signatures from entries:
//!
//! * a dense signature array, one `[u16; WAYS]` (8 bytes) per bucket: the
//!   16 hash bits above bit 15 (never 0; 0 marks a free slot). A lookup
//!   reads it first; 8 buckets share a cache line, so it stays in L2/L3
//!   even when the entries do not (512 KiB for 262,144 entries);
//! * the keys, one 64-byte-aligned cache line each, read only for a slot
//!   whose signature matches (a false match costs one key compare, with
//!   probability about 3 in 65,536);
//! * generation + decision per slot (16 bytes for a 4-byte decision),
//!   read only after a signature match, in parallel with the key;
//! * the full hash and the round-robin cursor, read only by inserts and
//!   [`FlowCache::iter`].
//!
//! So a hit touches one signature line (usually cached) and two entry
//! lines whose loads are independent; earlier the per-slot metadata line,
//! the key line and the action line were three dependent misses.
//!
//! # Replacement policy
//!
//! Inserting a key already in its bucket overwrites that slot's decision and
//! generation. A new key takes, in this order: the first free slot; else the
//! first slot whose generation is older than the new entry's (stale: it can
//! never hit again while generations only grow); else the slot under the
//! bucket's round-robin cursor, which then advances (so a full bucket of
//! current entries evicts them in insertion order, FIFO). Evictions are
//! counted in [`Stats::evictions`].
//!
//! # Insertion probability
//!
//! With [`EmcConfig::insert_inv_prob`] = N, a *new* key is inserted with
//! probability 1/N (N = 1: always, the default; N = 0: never, which turns the
//! EMC off). Updates of a key already cached always happen. With many more
//! flows than entries, always inserting makes flows evict each other before
//! they hit ("thrashing"); inserting 1 in N keeps long flows resident: a flow
//! gets in after about N misses, while short flows mostly stay out. Open
//! vSwitch uses N = 100 (`emc-insert-inv-prob`). The draw is a per-cache
//! xorshift32 seeded by [`EmcConfig::seed`], so runs are reproducible.
//!
//! # Generations
//!
//! Every entry carries the generation of the configuration snapshot its
//! decision was made under; a lookup gives the current generation and an
//! entry of any other generation misses (and is freed, counted in
//! [`Stats::stale_misses`]). Publishing a new snapshot with a new generation
//! therefore invalidates every cached decision at once without touching the
//! table. Generations should only grow (the replacement policy prefers slots
//! of older generations); equality is what makes lookups correct.

use crate::key::FlowKey;

/// Slots per bucket (the associativity of the EMC).
pub const WAYS: usize = 4;
/// Default number of entries, as in Open vSwitch's EMC.
pub const DEFAULT_ENTRIES: usize = 8192;
/// Largest number of entries a cache may have (2^22).
pub const MAX_ENTRIES: usize = 1 << 22;

/// Configuration of a [`FlowCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmcConfig {
    /// Number of entries; rounded up to a power of two and clamped to
    /// `WAYS..=MAX_ENTRIES`. Default 8192.
    pub entries: usize,
    /// Insert a new key with probability 1/`insert_inv_prob`; 1 = always
    /// (default), 0 = never. See the module docs.
    pub insert_inv_prob: u32,
    /// Seed of the insertion draw (any value; 0 is replaced by a constant).
    pub seed: u32,
}

impl Default for EmcConfig {
    fn default() -> Self {
        EmcConfig {
            entries: DEFAULT_ENTRIES,
            insert_inv_prob: 1,
            seed: 0x2545_f491,
        }
    }
}

/// Counters of one cache, plain integers owned by its PMD thread. Sum them
/// across threads with `+=`.
///
/// Every packet classified through a [`Burst`](crate::Burst) is counted
/// exactly once in `last_flow_hits`, `emc_hits` or `misses`; direct
/// [`FlowCache::lookup`] calls count in `emc_hits` or `misses`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// Packets whose decision came from the previous packet of the burst.
    pub last_flow_hits: u64,
    /// Lookups that found a current entry.
    pub emc_hits: u64,
    /// Lookups that found no current entry (includes `stale_misses`).
    pub misses: u64,
    /// Misses that found the key with an old generation (the entry is freed).
    pub stale_misses: u64,
    /// New keys written into the table.
    pub insertions: u64,
    /// Inserts of a key already cached (decision and generation overwritten).
    pub updates: u64,
    /// New keys that overwrote another key's live entry (current or stale).
    pub evictions: u64,
    /// New keys not inserted because of the insertion probability.
    pub insert_skipped: u64,
}

impl Stats {
    /// Packets (or lookups) counted: `last_flow_hits + emc_hits + misses`.
    pub fn packets(&self) -> u64 {
        self.last_flow_hits + self.emc_hits + self.misses
    }

    /// Fraction of packets that skipped the slow path, in `0.0..=1.0`
    /// (0 when nothing was counted).
    pub fn hit_rate(&self) -> f64 {
        let p = self.packets();
        if p == 0 {
            0.0
        } else {
            (self.last_flow_hits + self.emc_hits) as f64 / p as f64
        }
    }
}

impl core::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.last_flow_hits += o.last_flow_hits;
        self.emc_hits += o.emc_hits;
        self.misses += o.misses;
        self.stale_misses += o.stale_misses;
        self.insertions += o.insertions;
        self.updates += o.updates;
        self.evictions += o.evictions;
        self.insert_skipped += o.insert_skipped;
    }
}

/// What [`FlowCache::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// The key was cached already; its decision and generation were replaced.
    Updated,
    /// The key took a free slot.
    Inserted,
    /// The key took the slot of another key, which was evicted.
    Evicted,
    /// The insertion probability said no; nothing changed.
    Skipped,
}

/// A key in its own cache line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct KeySlot(FlowKey);

/// What a hit reads besides the key.
struct Val<A> {
    generation: u64,
    action: Option<A>,
}

/// The signature of `hash`: bits 16..32, 0 mapped to 1 (0 is a free slot).
#[inline(always)]
fn signature(hash: u32) -> u16 {
    let s = (hash >> 16) as u16;
    s | u16::from(s == 0)
}

/// The ways of a bucket whose signature is `sig`, as a lane mask: bit
/// `16 * i + 15` set where `sigs[i] == sig`, nothing else set. Iterate with
/// [`first_way`] and `m &= m - 1`.
///
/// Branch-free SWAR on the bucket's four signatures as one 64-bit word: a
/// lane of `x ^ sig` is zero exactly where the signature matches, and
/// `(y & 0x7fff) + 0x7fff` sets a lane's top bit for any non-zero low 15 bits
/// without carrying into the next lane, so the test is exact (no false
/// matches, unlike the borrow-based "has zero byte" trick).
#[inline(always)]
fn sig_matches(sigs: [u16; WAYS], sig: u16) -> u64 {
    const _: () = assert!(WAYS == 4, "sig_matches packs four 16-bit signatures");
    const LOW15: u64 = 0x7fff_7fff_7fff_7fff;
    let x = u64::from(sigs[0])
        | u64::from(sigs[1]) << 16
        | u64::from(sigs[2]) << 32
        | u64::from(sigs[3]) << 48;
    let y = x ^ (u64::from(sig) * 0x0001_0001_0001_0001);
    !(((y & LOW15) + LOW15) | y | LOW15)
}

/// The lowest way set in a non-zero [`sig_matches`] mask.
#[inline(always)]
fn first_way(m: u64) -> usize {
    m.trailing_zeros() as usize / 16
}

/// One cached entry, as yielded by [`FlowCache::iter`].
#[derive(Debug)]
pub struct Entry<'a, A> {
    /// The flow key.
    pub key: &'a FlowKey,
    /// The hash the entry was inserted with.
    pub hash: u32,
    /// The generation the decision was made under. The entry hits only for
    /// lookups with this generation.
    pub generation: u64,
    /// The cached decision.
    pub action: &'a A,
}

/// An EMC-style exact-match flow cache for one PMD thread, generic over the
/// caller's decision type `A` (no bounds; `Copy` or cheap `Clone` types, such
/// as an enum or an index into a table of actions, suit a data path best).
///
/// No locks, no sharing, no allocation after [`new`](Self::new): memory is
/// about `entries * (2 + 64 + 4 + size_of::<(u64, Option<A>)>())` bytes plus
/// one byte per bucket (see the [module docs](self) for the layout). See the [module docs](self) for the replacement policy, the
/// insertion probability and generations.
pub struct FlowCache<A> {
    /// Per bucket, per way: [`signature`] of the slot's hash, 0 if free.
    sigs: Box<[[u16; WAYS]]>,
    /// Per slot (`bucket * WAYS + way`).
    keys: Box<[KeySlot]>,
    /// Per slot.
    vals: Box<[Val<A>]>,
    /// Per slot: the full hash, for inserts and `iter`.
    hashes: Box<[u32]>,
    /// Per bucket: the round-robin eviction cursor.
    cursors: Box<[u8]>,
    mask: usize,
    len: usize,
    insert_inv_prob: u32,
    rng: u32,
    stats: Stats,
}

impl<A> Default for FlowCache<A> {
    fn default() -> Self {
        FlowCache::new(EmcConfig::default())
    }
}

impl<A> FlowCache<A> {
    /// Allocates an empty cache (the only allocation it ever makes).
    pub fn new(config: EmcConfig) -> Self {
        let entries = config.entries.clamp(WAYS, MAX_ENTRIES).next_power_of_two();
        let n = entries / WAYS;
        FlowCache {
            sigs: vec![[0; WAYS]; n].into_boxed_slice(),
            keys: vec![KeySlot::default(); entries].into_boxed_slice(),
            vals: (0..entries)
                .map(|_| Val {
                    generation: 0,
                    action: None,
                })
                .collect(),
            hashes: vec![0; entries].into_boxed_slice(),
            cursors: vec![0; n].into_boxed_slice(),
            mask: n - 1,
            len: 0,
            insert_inv_prob: config.insert_inv_prob,
            rng: if config.seed == 0 {
                0x2545_f491
            } else {
                config.seed
            },
            stats: Stats::default(),
        }
    }

    /// Number of slots (entries), a power of two.
    pub fn capacity(&self) -> usize {
        self.sigs.len() * WAYS
    }

    /// Number of live entries, current or stale (stale entries are freed
    /// when a lookup meets them or a new key takes their slot).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Mutable counters (e.g. to reset them, or for a caller's own
    /// first-level cache to count its hits).
    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// Current insertion inverse probability (see the module docs).
    pub fn insert_inv_prob(&self) -> u32 {
        self.insert_inv_prob
    }

    /// Changes the insertion inverse probability; takes effect at the next
    /// insert.
    pub fn set_insert_inv_prob(&mut self, n: u32) {
        self.insert_inv_prob = n;
    }

    #[inline(always)]
    fn bucket_index(&self, hash: u32) -> usize {
        hash as usize & self.mask
    }

    /// The slot of `key` in its bucket, any generation: the first way whose
    /// signature matches and whose key is equal.
    #[inline(always)]
    fn find(&self, key: &FlowKey, hash: u32) -> Option<usize> {
        let b = self.bucket_index(hash);
        let mut m = sig_matches(self.sigs[b], signature(hash));
        while m != 0 {
            let e = b * WAYS + first_way(m);
            if self.keys[e].0 == *key {
                return Some(e);
            }
            m &= m - 1;
        }
        None
    }

    /// Frees slot `e` (its signature and decision).
    fn free(&mut self, e: usize) -> Option<A> {
        self.sigs[e / WAYS][e % WAYS] = 0;
        self.len -= 1;
        self.vals[e].action.take()
    }

    /// Counts the outcome of a probe that found entry `found`: a hit when the entry is of
    /// `generation` (returns it), else a stale miss (the entry is freed) or a miss.
    #[inline(always)]
    fn settle(&mut self, found: Option<usize>, generation: u64) -> Option<usize> {
        match found {
            Some(e) if self.vals[e].generation == generation => {
                self.stats.emc_hits += 1;
                Some(e)
            }
            Some(e) => {
                self.free(e);
                self.stats.stale_misses += 1;
                self.stats.misses += 1;
                None
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Looks `key` up. `hash` must be `key.flow_hash()` (or any other
    /// function of the key alone, used consistently for inserts and lookups);
    /// `generation` is the current configuration generation.
    ///
    /// Returns the decision of an entry with an equal key inserted under
    /// exactly `generation`, counting an EMC hit; otherwise `None`, counting a
    /// miss. An entry with the key but another generation is freed and also
    /// counted as a stale miss. O(WAYS); no allocation.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, hash: u32, generation: u64) -> Option<&A> {
        let found = self.find(key, hash);
        let e = self.settle(found, generation)?;
        self.vals[e].action.as_ref()
    }

    /// Prefetch, step 1 of 2: asks the CPU to fetch the signature line of
    /// `hash`'s bucket. A hint only: changes nothing, never fails.
    ///
    /// For a burst, call it for every key, then [`prefetch_entry`] for every
    /// key, then [`lookup`](Self::lookup) each: the memory accesses of the
    /// whole burst then overlap instead of following each other (what
    /// [`lookup_batch`](Self::lookup_batch) does). Worth it when the table
    /// is larger than the L2 cache; [`prefetch_entry`] alone suffices when
    /// the signatures are cached (small tables).
    ///
    /// [`prefetch_entry`]: Self::prefetch_entry
    #[inline(always)]
    pub fn prefetch_bucket(&self, hash: u32) {
        crate::prefetch::prefetch(&self.sigs[self.bucket_index(hash)]);
    }

    /// Prefetch, step 2 of 2: reads `hash`'s bucket signatures and asks the
    /// CPU to fetch the key and decision lines of the first slot whose
    /// signature matches (the slot a hit will read). A hint only: changes
    /// nothing, never fails. See [`prefetch_bucket`](Self::prefetch_bucket).
    #[inline(always)]
    pub fn prefetch_entry(&self, hash: u32) {
        let b = self.bucket_index(hash);
        let m = sig_matches(self.sigs[b], signature(hash));
        if m != 0 {
            let e = b * WAYS + first_way(m);
            crate::prefetch::prefetch(&self.keys[e]);
            crate::prefetch::prefetch(&self.vals[e]);
        }
    }

    /// Like [`lookup`](Self::lookup) but changes nothing, not even counters.
    pub fn peek(&self, key: &FlowKey, hash: u32, generation: u64) -> Option<&A> {
        let e = self.find(key, hash)?;
        let v = &self.vals[e];
        if v.generation == generation {
            v.action.as_ref()
        } else {
            None
        }
    }

    fn admit(&mut self) -> bool {
        match self.insert_inv_prob {
            0 => false,
            1 => true,
            n => {
                // xorshift32 (Marsaglia 2003); state is never 0.
                let mut x = self.rng;
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                self.rng = x;
                // Maps x uniformly onto 0..n (Lemire); admit on 0.
                (u64::from(x) * u64::from(n)) >> 32 == 0
            }
        }
    }

    /// Caches `action` for `key` as decided under configuration `generation`
    /// (the generation of the snapshot the slow path used, which may already
    /// be older than the current one: then the entry simply never hits).
    /// `hash` as for [`lookup`](Self::lookup).
    ///
    /// Follows the replacement policy and insertion probability of the
    /// [module docs](self). O(WAYS); no allocation (dropping an evicted `A`
    /// runs its destructor).
    pub fn insert(&mut self, key: &FlowKey, hash: u32, action: A, generation: u64) -> Insert {
        if let Some(e) = self.find(key, hash) {
            self.vals[e] = Val {
                generation,
                action: Some(action),
            };
            self.hashes[e] = hash;
            self.stats.updates += 1;
            return Insert::Updated;
        }
        if !self.admit() {
            self.stats.insert_skipped += 1;
            return Insert::Skipped;
        }
        let b = self.bucket_index(hash);
        let sigs = self.sigs[b];
        let way = (0..WAYS)
            .find(|&i| sigs[i] == 0)
            .or_else(|| (0..WAYS).find(|&i| self.vals[b * WAYS + i].generation < generation))
            .unwrap_or_else(|| {
                let c = usize::from(self.cursors[b]) % WAYS;
                self.cursors[b] = ((c + 1) % WAYS) as u8;
                c
            });
        let outcome = if sigs[way] != 0 {
            self.stats.evictions += 1;
            Insert::Evicted
        } else {
            self.len += 1;
            Insert::Inserted
        };
        let e = b * WAYS + way;
        self.sigs[b][way] = signature(hash);
        self.keys[e] = KeySlot(*key);
        self.vals[e] = Val {
            generation,
            action: Some(action),
        };
        self.hashes[e] = hash;
        self.stats.insertions += 1;
        outcome
    }

    /// Removes `key`'s entry (any generation), returning its decision.
    pub fn remove(&mut self, key: &FlowKey, hash: u32) -> Option<A> {
        let e = self.find(key, hash)?;
        self.free(e)
    }

    /// Removes every entry (counters are kept). O(capacity); for routine
    /// invalidation, bump the generation instead.
    pub fn clear(&mut self) {
        for s in self.sigs.iter_mut() {
            *s = [0; WAYS];
        }
        for v in self.vals.iter_mut() {
            v.action = None;
        }
        self.len = 0;
    }

    /// Iterates over the live entries (current and stale: compare
    /// [`Entry::generation`] with the current one), in table order, e.g. for
    /// `vswitchctl flows`. Not for the data path.
    pub fn iter(&self) -> impl Iterator<Item = Entry<'_, A>> + '_ {
        (0..self.keys.len()).filter_map(move |e| {
            let v = &self.vals[e];
            match (&v.action, self.sigs[e / WAYS][e % WAYS] != 0) {
                (Some(action), true) => Some(Entry {
                    key: &self.keys[e].0,
                    hash: self.hashes[e],
                    generation: v.generation,
                    action,
                }),
                _ => None,
            }
        })
    }
}

impl<A: Clone> FlowCache<A> {
    /// Looks up a batch of keys: `out[j]` becomes a clone of what
    /// [`lookup`](Self::lookup)`(&keys[j], hashes[j], generation)` would
    /// return, with the same counting and stale-entry freeing. Any length;
    /// processed [`MAX_BURST`](crate::MAX_BURST) keys at a time.
    ///
    /// Faster than one `lookup` per key when the table does not fit in the
    /// CPU caches: for each group it first reads every key's bucket
    /// signatures, then issues a software prefetch of the key and decision
    /// lines of each key's matching slot, and only then compares. The
    /// prefetches do not hold up the CPU's reorder window as plain loads do,
    /// so the cache (and TLB) misses of the whole group overlap: at 100,000
    /// flows about 3× fewer ns per key than with plain touching loads (see
    /// the crate README). The prefetch is this crate's one `unsafe`
    /// (`prefetch.rs`).
    ///
    /// # Panics
    /// If `hashes` or `out` is shorter than `keys`.
    pub fn lookup_batch(
        &mut self,
        keys: &[FlowKey],
        hashes: &[u32],
        generation: u64,
        out: &mut [Option<A>],
    ) {
        const GROUP: usize = crate::MAX_BURST;
        let n = keys.len();
        assert!(
            hashes.len() >= n && out.len() >= n,
            "lookup_batch: short slices"
        );
        let mut start = 0;
        while start < n {
            let end = (start + GROUP).min(n);
            let mut slot = [usize::MAX; GROUP];
            // Stage 1: every key's bucket signatures (independent loads).
            let mut sigs = [[0u16; WAYS]; GROUP];
            for j in start..end {
                sigs[j - start] = self.sigs[self.bucket_index(hashes[j])];
            }
            // Stage 2: first matching slot of each key, touching its key and
            // decision lines (independent loads again).
            for j in start..end {
                let h = hashes[j];
                let m = sig_matches(sigs[j - start], signature(h));
                if m != 0 {
                    let e = self.bucket_index(h) * WAYS + first_way(m);
                    slot[j - start] = e;
                    crate::prefetch::prefetch(&self.keys[e]);
                    crate::prefetch::prefetch(&self.vals[e]);
                }
            }
            // Stage 3: compare, count, free stale entries, clone decisions.
            for j in start..end {
                let e = slot[j - start];
                // The slot is still live unless an earlier key of this
                // batch (the same key, stale) freed it.
                let found = if e == usize::MAX {
                    None
                } else if self.sigs[e / WAYS][e % WAYS] != 0 && self.keys[e].0 == keys[j] {
                    Some(e)
                } else {
                    // Freed, or a false signature match: look at every
                    // matching way.
                    self.find(&keys[j], hashes[j])
                };
                out[j] = self
                    .settle(found, generation)
                    .and_then(|e| self.vals[e].action.clone());
            }
            start = end;
        }
    }
}

impl<A> core::fmt::Debug for FlowCache<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FlowCache")
            .field("capacity", &self.capacity())
            .field("len", &self.len)
            .field("insert_inv_prob", &self.insert_inv_prob)
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The ways whose signature is `sig`, one by one.
    fn naive(sigs: [u16; WAYS], sig: u16) -> Vec<usize> {
        (0..WAYS).filter(|&i| sigs[i] == sig).collect()
    }

    fn ways(mut m: u64) -> Vec<usize> {
        let mut v = Vec::new();
        while m != 0 {
            v.push(first_way(m));
            m &= m - 1;
        }
        v
    }

    #[test]
    fn sig_matches_edge_values() {
        // Lanes that differ from `sig` only in the top bit, or are its
        // neighbours, must not match; repeated and boundary signatures must.
        for sig in [1u16, 0x7fff, 0x8000, 0x8001, 0xffff] {
            for sigs in [
                [sig, sig ^ 0x8000, sig.wrapping_add(1), sig.wrapping_sub(1)],
                [0, sig, 0, sig],
                [sig; WAYS],
                [0xffff, 0x7fff, 0x8000, 1],
            ] {
                assert_eq!(
                    ways(sig_matches(sigs, sig)),
                    naive(sigs, sig),
                    "{sigs:x?} {sig:x}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The SWAR match equals the lane-by-lane compare (half the lanes
        /// are forced equal to `sig`, so matches are common).
        #[test]
        fn sig_matches_equals_naive(
            mut sigs in any::<[u16; WAYS]>(),
            sig in any::<u16>(),
            force in any::<[bool; WAYS]>(),
        ) {
            for i in 0..WAYS {
                if force[i] {
                    sigs[i] = sig;
                }
            }
            prop_assert_eq!(ways(sig_matches(sigs, sig)), naive(sigs, sig));
        }
    }
}
