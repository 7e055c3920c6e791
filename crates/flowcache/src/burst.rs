//! [`Burst`]: per-burst key storage, the last-flow check, EMC lookups and
//! the list of misses for the slow path, all in fixed arrays.

use core::fmt;

use crate::emc::FlowCache;
use crate::key::FlowKey;

/// Largest burst a [`Burst`] holds, in packets.
pub const MAX_BURST: usize = 32;

/// Tables of at least this many entries (4 MiB of keys) are prefetched by
/// [`Burst::classify`] before the lookups.
const PREFETCH_MIN_ENTRIES: usize = 1 << 16;

/// The burst is full ([`MAX_BURST`] packets); the packet was not added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstFull;

impl fmt::Display for BurstFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "burst already holds {MAX_BURST} packets")
    }
}

impl std::error::Error for BurstFull {}

/// Where a packet's decision came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Same key as the previous packet of the burst: its decision is reused
    /// (level 1).
    LastFlow,
    /// Found in the exact-match cache (level 2).
    Emc,
    /// Missed both; decided by the slow path (or, if it is unresolved,
    /// waiting for it). A flow that misses several times in one burst runs
    /// the slow path once: later misses with the same key reuse the first
    /// miss's decision.
    SlowPath,
}

/// One burst of ≤ [`MAX_BURST`] packets of one PMD thread, reused burst
/// after burst (it never allocates).
///
/// Per burst: [`clear`](Self::clear), [`push_frame`](Self::push_frame) (or
/// [`push`](Self::push)) each packet, [`classify`](Self::classify) against
/// the thread's [`FlowCache`], then [`resolve`](Self::resolve) the
/// [`misses`](Self::misses) through the slow path (or do that yourself with
/// [`complete`](Self::complete)), and finally read
/// [`decision`](Self::decision) per packet.
///
/// The last-flow check (level 1) compares each packet's key with the
/// previous packet's in the same burst: runs of one flow cost one EMC lookup
/// (or one slow-path call) per run. It never spans two bursts, so a burst
/// classified under one generation can never see a decision of another.
///
/// Cloning: an EMC hit clones the cached `A` once per run of equal keys; a
/// slow-path decision is cloned once into the cache. Use `Copy` decisions,
/// or indices/`Arc`s into the caller's action table, on a data path.
pub struct Burst<A> {
    len: usize,
    keys: [FlowKey; MAX_BURST],
    hashes: [u32; MAX_BURST],
    /// Index of the packet whose decision slot holds this packet's decision.
    owner: [u8; MAX_BURST],
    level: [Level; MAX_BURST],
    decisions: [Option<A>; MAX_BURST],
    misses: [u8; MAX_BURST],
    n_misses: usize,
}

impl<A> Default for Burst<A> {
    fn default() -> Self {
        Burst::new()
    }
}

impl<A> fmt::Debug for Burst<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Burst")
            .field("len", &self.len)
            .field("misses", &self.n_misses)
            .finish()
    }
}

impl<A> Burst<A> {
    /// An empty burst.
    pub fn new() -> Self {
        Burst {
            len: 0,
            keys: [FlowKey::default(); MAX_BURST],
            hashes: [0; MAX_BURST],
            owner: [0; MAX_BURST],
            level: [Level::SlowPath; MAX_BURST],
            decisions: core::array::from_fn(|_| None),
            misses: [0; MAX_BURST],
            n_misses: 0,
        }
    }

    /// Empties the burst (drops the previous burst's decisions).
    pub fn clear(&mut self) {
        for d in &mut self.decisions[..self.len] {
            *d = None;
        }
        self.len = 0;
        self.n_misses = 0;
    }

    /// Number of packets in the burst.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the burst holds no packet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a packet by key; returns its index in the burst.
    ///
    /// # Errors
    /// [`BurstFull`] if the burst already holds [`MAX_BURST`] packets.
    #[inline]
    pub fn push(&mut self, key: FlowKey) -> Result<usize, BurstFull> {
        let i = self.len;
        if i >= MAX_BURST {
            return Err(BurstFull);
        }
        self.hashes[i] = key.flow_hash();
        self.keys[i] = key;
        self.owner[i] = i as u8;
        self.level[i] = Level::SlowPath;
        self.decisions[i] = None;
        self.len = i + 1;
        Ok(i)
    }

    /// Extracts the key of `frame` ([`FlowKey::extract`]) and adds it.
    ///
    /// # Errors
    /// [`BurstFull`] if the burst already holds [`MAX_BURST`] packets.
    #[inline]
    pub fn push_frame(
        &mut self,
        frame: &[u8],
        in_port: u32,
        vni: Option<u32>,
    ) -> Result<usize, BurstFull> {
        if self.len >= MAX_BURST {
            return Err(BurstFull);
        }
        self.push(FlowKey::extract(frame, in_port, vni))
    }

    /// Key of packet `i`. Panics if `i >= len()`.
    pub fn key(&self, i: usize) -> &FlowKey {
        &self.keys[..self.len][i]
    }

    /// Hash of packet `i`'s key. Panics if `i >= len()`.
    pub fn hash(&self, i: usize) -> u32 {
        self.hashes[..self.len][i]
    }

    /// Where packet `i`'s decision came from, or `None` if `i >= len()`.
    /// Meaningful after [`classify`](Self::classify).
    pub fn level(&self, i: usize) -> Option<Level> {
        self.level[..self.len].get(i).copied()
    }

    /// Indices of the packets that missed both levels and need the slow
    /// path, in burst order (after [`classify`](Self::classify)). Packets
    /// reusing a missed packet's decision through the last-flow check are not
    /// listed; they get it when that packet is resolved.
    pub fn misses(&self) -> impl Iterator<Item = usize> + '_ {
        self.misses[..self.n_misses].iter().map(|&i| usize::from(i))
    }

    /// Number of [`misses`](Self::misses).
    pub fn n_misses(&self) -> usize {
        self.n_misses
    }

    /// Packet `i`'s decision; `None` if `i >= len()` or it awaits the slow
    /// path.
    #[inline]
    pub fn decision(&self, i: usize) -> Option<&A> {
        let o = *self.owner[..self.len].get(i)?;
        self.decisions[usize::from(o)].as_ref()
    }
}

impl<A: Clone> Burst<A> {
    /// Runs levels 1 and 2 for every packet: the last-flow check against the
    /// previous packet, then an EMC lookup under `generation` (the current
    /// configuration generation). Fills decisions for hits and the
    /// [`misses`](Self::misses) list. Counts `last_flow_hits` in the cache's
    /// [`Stats`](crate::Stats); the EMC counts its own hits and misses.
    pub fn classify(&mut self, cache: &mut FlowCache<A>, generation: u64) {
        self.n_misses = 0;
        // In a table larger than the L2 cache, prefetch every key's entry
        // first so that the burst's misses overlap (a resident table only
        // pays for the extra pass: about 2 ns per packet at 1280 flows).
        if cache.capacity() >= PREFETCH_MIN_ENTRIES {
            for &h in &self.hashes[..self.len] {
                cache.prefetch_entry(h);
            }
        }
        for i in 0..self.len {
            if i > 0 && self.hashes[i] == self.hashes[i - 1] && self.keys[i] == self.keys[i - 1] {
                self.owner[i] = self.owner[i - 1];
                self.level[i] = Level::LastFlow;
                cache.stats_mut().last_flow_hits += 1;
                continue;
            }
            self.owner[i] = i as u8;
            match cache.lookup(&self.keys[i], self.hashes[i], generation) {
                Some(a) => {
                    self.decisions[i] = Some(a.clone());
                    self.level[i] = Level::Emc;
                }
                None => {
                    self.decisions[i] = None;
                    self.level[i] = Level::SlowPath;
                    self.misses[self.n_misses] = i as u8;
                    self.n_misses += 1;
                }
            }
        }
    }

    /// Records the slow path's `action` for missed packet `i`, decided under
    /// `generation`, and inserts it into `cache`. Does nothing if `i` is not
    /// a packet of the burst.
    pub fn complete(&mut self, cache: &mut FlowCache<A>, i: usize, action: A, generation: u64) {
        if i >= self.len {
            return;
        }
        cache.insert(&self.keys[i], self.hashes[i], action.clone(), generation);
        self.owner[i] = i as u8;
        self.level[i] = Level::SlowPath;
        self.decisions[i] = Some(action);
    }

    /// Resolves every miss: calls `slow_path(i, &key)` once per distinct
    /// missed key (a later miss with the same key in this burst reuses the
    /// decision), stores the decision and inserts it into `cache` under
    /// `generation`, the generation of the configuration the slow path
    /// decided with.
    pub fn resolve<F>(&mut self, cache: &mut FlowCache<A>, generation: u64, mut slow_path: F)
    where
        F: FnMut(usize, &FlowKey) -> A,
    {
        for m in 0..self.n_misses {
            let i = usize::from(self.misses[m]);
            let dup = self.misses[..m]
                .iter()
                .map(|&j| usize::from(j))
                .find(|&j| self.hashes[j] == self.hashes[i] && self.keys[j] == self.keys[i]);
            match dup {
                // `j` was resolved first; packets that reuse `i` through
                // the last-flow check read slot `i`, so fill it.
                Some(j) => {
                    let d = self.decisions[usize::from(self.owner[j])].clone();
                    self.decisions[i] = d;
                }
                None => {
                    let a = slow_path(i, &self.keys[i]);
                    self.complete(cache, i, a, generation);
                }
            }
        }
    }
}
