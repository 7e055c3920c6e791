//! The exact-match cache (EMC): a fixed-capacity, bucketed, hash-indexed
//! table from [`FlowKey`] to the caller's decision, owned by one PMD thread.
//!
//! # Layout
//!
//! `entries / WAYS` buckets of [`WAYS`] (= 4) slots; a key lives only in the
//! bucket `hash & (buckets - 1)`. A bucket's slot metadata (hash, generation,
//! live bit) fills one 64-byte cache line, so a lookup touches that line,
//! then the matching 64-byte key and the action.
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

/// Per-slot metadata; four of them fill one cache line.
#[derive(Clone, Copy, Default)]
struct Meta {
    generation: u64,
    hash: u32,
    live: bool,
}

#[repr(C, align(64))]
struct Bucket<A> {
    meta: [Meta; WAYS],
    keys: [FlowKey; WAYS],
    actions: [Option<A>; WAYS],
    cursor: u8,
}

impl<A> Bucket<A> {
    fn new() -> Self {
        Bucket {
            meta: [Meta::default(); WAYS],
            keys: [FlowKey::default(); WAYS],
            actions: core::array::from_fn(|_| None),
            cursor: 0,
        }
    }
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
/// `entries * (16 + 64 + size_of::<Option<A>>())` bytes, rounded per bucket
/// to 64 bytes. See the [module docs](self) for the replacement policy, the
/// insertion probability and generations.
pub struct FlowCache<A> {
    buckets: Box<[Bucket<A>]>,
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
        let buckets: Box<[Bucket<A>]> = (0..n).map(|_| Bucket::new()).collect();
        FlowCache {
            buckets,
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
        self.buckets.len() * WAYS
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
        let idx = self.bucket_index(hash);
        let b = &mut self.buckets[idx];
        for i in 0..WAYS {
            let m = b.meta[i];
            if m.live && m.hash == hash && b.keys[i] == *key {
                if m.generation == generation {
                    self.stats.emc_hits += 1;
                    return b.actions[i].as_ref();
                }
                b.meta[i].live = false;
                b.actions[i] = None;
                self.len -= 1;
                self.stats.stale_misses += 1;
                break;
            }
        }
        self.stats.misses += 1;
        None
    }

    /// Like [`lookup`](Self::lookup) but changes nothing, not even counters.
    pub fn peek(&self, key: &FlowKey, hash: u32, generation: u64) -> Option<&A> {
        let b = &self.buckets[self.bucket_index(hash)];
        (0..WAYS)
            .find(|&i| {
                let m = b.meta[i];
                m.live && m.hash == hash && m.generation == generation && b.keys[i] == *key
            })
            .and_then(|i| b.actions[i].as_ref())
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
        let idx = self.bucket_index(hash);
        let b = &self.buckets[idx];
        if let Some(i) =
            (0..WAYS).find(|&i| b.meta[i].live && b.meta[i].hash == hash && b.keys[i] == *key)
        {
            let b = &mut self.buckets[idx];
            b.meta[i].generation = generation;
            b.actions[i] = Some(action);
            self.stats.updates += 1;
            return Insert::Updated;
        }
        if !self.admit() {
            self.stats.insert_skipped += 1;
            return Insert::Skipped;
        }
        let b = &mut self.buckets[idx];
        let slot = (0..WAYS)
            .find(|&i| !b.meta[i].live)
            .or_else(|| (0..WAYS).find(|&i| b.meta[i].generation < generation))
            .unwrap_or_else(|| {
                let c = usize::from(b.cursor) % WAYS;
                b.cursor = ((c + 1) % WAYS) as u8;
                c
            });
        let outcome = if b.meta[slot].live {
            self.stats.evictions += 1;
            Insert::Evicted
        } else {
            self.len += 1;
            Insert::Inserted
        };
        b.meta[slot] = Meta {
            generation,
            hash,
            live: true,
        };
        b.keys[slot] = *key;
        b.actions[slot] = Some(action);
        self.stats.insertions += 1;
        outcome
    }

    /// Removes `key`'s entry (any generation), returning its decision.
    pub fn remove(&mut self, key: &FlowKey, hash: u32) -> Option<A> {
        let idx = self.bucket_index(hash);
        let b = &mut self.buckets[idx];
        let i =
            (0..WAYS).find(|&i| b.meta[i].live && b.meta[i].hash == hash && b.keys[i] == *key)?;
        b.meta[i].live = false;
        self.len -= 1;
        b.actions[i].take()
    }

    /// Removes every entry (counters are kept). O(capacity); for routine
    /// invalidation, bump the generation instead.
    pub fn clear(&mut self) {
        for b in self.buckets.iter_mut() {
            for i in 0..WAYS {
                b.meta[i].live = false;
                b.actions[i] = None;
            }
        }
        self.len = 0;
    }

    /// Iterates over the live entries (current and stale: compare
    /// [`Entry::generation`] with the current one), in table order, e.g. for
    /// `vswitchctl flows`. Not for the data path.
    pub fn iter(&self) -> impl Iterator<Item = Entry<'_, A>> + '_ {
        self.buckets.iter().flat_map(|b| {
            (0..WAYS).filter_map(move |i| {
                let m = b.meta[i];
                match (&b.actions[i], m.live) {
                    (Some(action), true) => Some(Entry {
                        key: &b.keys[i],
                        hash: m.hash,
                        generation: m.generation,
                        action,
                    }),
                    _ => None,
                }
            })
        })
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
