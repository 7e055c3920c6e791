//! The EMC and the burst pipeline against a HashMap reference model.
//!
//! The model is "the last decision inserted for each key, with the
//! generation it was made under". The cache may forget (capacity,
//! evictions, insertion probability) but must never answer differently from
//! the model: a hit returns exactly the model's decision, and only when that
//! decision's generation is the current one. So a decision cached before a
//! generation bump is never returned after it.

use std::collections::HashMap;

use flowcache::{Burst, EmcConfig, FlowCache, FlowKey, Insert, Level, WAYS};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Insert pool key `k` with decision `a`, decided `lag` generations ago.
    Insert {
        k: usize,
        a: u16,
        lag: u64,
    },
    Lookup {
        k: usize,
    },
    Remove {
        k: usize,
    },
    /// Publish a new configuration: generation += 1.
    Bump,
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<usize>(), any::<u16>(), prop_oneof![8 => Just(0u64), 1 => 1u64..3])
            .prop_map(|(k, a, lag)| Op::Insert { k, a, lag }),
        8 => any::<usize>().prop_map(|k| Op::Lookup { k }),
        1 => any::<usize>().prop_map(|k| Op::Remove { k }),
        1 => Just(Op::Bump),
        1 => Just(Op::Clear),
    ]
}

/// Distinct keys. Each starts from a real extracted key and has random
/// bytes overwritten, so some differ in one field only.
fn pool(max: usize) -> impl Strategy<Value = Vec<FlowKey>> {
    prop::collection::vec((any::<[u8; 8]>(), 0usize..57), 1..=max).prop_map(|seeds| {
        let mut keys: Vec<FlowKey> = Vec::new();
        for (bytes, at) in seeds {
            let mut b = [0u8; 64];
            b[0] = 1;
            b[24..26].copy_from_slice(&0x0800u16.to_be_bytes());
            b[at..at + 8].copy_from_slice(&bytes);
            let k = FlowKey::from_bytes(b);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    })
}

/// How the test hashes keys: the real hash, or a degraded one that puts
/// different keys on equal hashes and in the same bucket.
#[derive(Clone, Copy, Debug)]
enum HashMode {
    Real,
    TwoBits,
    Constant,
}

impl HashMode {
    fn hash(self, k: &FlowKey) -> u32 {
        match self {
            HashMode::Real => k.flow_hash(),
            HashMode::TwoBits => k.flow_hash() & 3,
            HashMode::Constant => 0x5eed,
        }
    }
}

fn hash_mode() -> impl Strategy<Value = HashMode> {
    prop_oneof![
        Just(HashMode::Real),
        Just(HashMode::TwoBits),
        Just(HashMode::Constant)
    ]
}

struct Run {
    cache: FlowCache<u16>,
    model: HashMap<FlowKey, (u16, u64)>,
    generation: u64,
    lookups: u64,
    complete: bool,
}

impl Run {
    fn step(&mut self, keys: &[FlowKey], mode: HashMode, op: &Op) -> Result<(), TestCaseError> {
        let g = self.generation;
        match *op {
            Op::Insert { k, a, lag } => {
                let key = &keys[k % keys.len()];
                let made_under = g.saturating_sub(lag);
                let was = self.cache.peek(key, mode.hash(key), made_under).is_some()
                    || self.cache.iter().any(|e| e.key == key);
                let r = self.cache.insert(key, mode.hash(key), a, made_under);
                // A key the cache holds is always updated, never skipped.
                prop_assert_eq!(was, r == Insert::Updated);
                self.model.insert(*key, (a, made_under));
            }
            Op::Lookup { k } => {
                let key = &keys[k % keys.len()];
                self.lookups += 1;
                let got = self.cache.lookup(key, mode.hash(key), g).copied();
                let want = self
                    .model
                    .get(key)
                    .filter(|(_, gen)| *gen == g)
                    .map(|(a, _)| *a);
                match got {
                    // Soundness: a hit is the model's decision, current generation.
                    Some(a) => prop_assert_eq!(Some(a), want, "stale or wrong decision"),
                    // Completeness when nothing can have been evicted.
                    None if self.complete => prop_assert_eq!(want, None, "lost entry"),
                    None => {}
                }
            }
            Op::Remove { k } => {
                let key = &keys[k % keys.len()];
                let got = self.cache.remove(key, mode.hash(key));
                let want = self.model.remove(key);
                if got.is_some() {
                    // Any generation may be removed, but only the model's decision.
                    prop_assert_eq!(got, want.map(|(a, _)| a));
                } else if self.complete {
                    // A current entry cannot have gone; a stale one may have
                    // been freed by a lookup.
                    prop_assert!(want.is_none_or(|(_, gen)| gen != g), "lost entry");
                }
            }
            Op::Bump => self.generation += 1,
            Op::Clear => {
                self.cache.clear();
                self.model.clear();
            }
        }
        // The cache's content is a subset of the model, entry for entry.
        let mut n = 0;
        for e in self.cache.iter() {
            n += 1;
            prop_assert_eq!(self.model.get(e.key), Some(&(*e.action, e.generation)));
        }
        prop_assert_eq!(n, self.cache.len());
        prop_assert!(n <= self.cache.capacity());
        let s = self.cache.stats();
        prop_assert_eq!(s.emc_hits + s.misses, self.lookups);
        prop_assert!(s.stale_misses <= s.misses);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random insert/lookup/remove/bump/clear sequences, small caches (so
    /// buckets overflow), degraded hashes (so different keys share a hash),
    /// and insertion probabilities 1, 1/2 and 0.
    #[test]
    fn cache_agrees_with_model(
        keys in pool(24),
        ops in prop::collection::vec(op(), 1..300),
        entries in prop::sample::select(vec![4usize, 8, 16, 64, 8192]),
        mode in hash_mode(),
        inv_prob in prop::sample::select(vec![1u32, 1, 2, 0]),
        seed in any::<u32>(),
    ) {
        let cache = FlowCache::new(EmcConfig { entries, insert_inv_prob: inv_prob, seed });
        // With at most WAYS keys, always inserting, no key can be evicted:
        // then every current model entry must hit.
        let complete = keys.len() <= WAYS && inv_prob == 1;
        let mut run = Run { cache, model: HashMap::new(), generation: 1, lookups: 0, complete };
        for op in &ops {
            run.step(&keys, mode, op)?;
        }
    }

    /// Everything cached before a generation bump misses after it, is
    /// counted as a stale miss once, and is freed.
    #[test]
    fn generation_bump_invalidates_everything(
        keys in pool(64),
        bumps in 1u64..4,
        mode in hash_mode(),
    ) {
        let mut cache = FlowCache::new(EmcConfig::default());
        let g = 10;
        for (i, k) in keys.iter().enumerate() {
            cache.insert(k, mode.hash(k), i as u32, g);
        }
        let resident = cache.len() as u64;
        for k in &keys {
            prop_assert!(cache.peek(k, mode.hash(k), g).is_some() || cache.len() < keys.len());
        }
        for k in &keys {
            prop_assert_eq!(cache.lookup(k, mode.hash(k), g + bumps), None);
        }
        prop_assert_eq!(cache.stats().stale_misses, resident);
        prop_assert_eq!(cache.len(), 0);
        // Decisions made under the new generation hit again.
        for (i, k) in keys.iter().enumerate() {
            cache.insert(k, mode.hash(k), 1000 + i as u32, g + bumps);
        }
        for (i, k) in keys.iter().enumerate() {
            if let Some(a) = cache.lookup(k, mode.hash(k), g + bumps) {
                prop_assert_eq!(*a, 1000 + i as u32);
            }
        }
    }

    /// Bursts through last-flow + EMC + slow path give, for every packet,
    /// exactly the decision the slow path gives under the current
    /// configuration, across random configuration changes, evictions and
    /// insertion probabilities.
    #[test]
    fn burst_decisions_equal_slow_path(
        keys in pool(40),
        bursts in prop::collection::vec(
            (prop::collection::vec((any::<usize>(), 1usize..4), 1..20), any::<bool>()),
            1..40,
        ),
        entries in prop::sample::select(vec![4usize, 16, 8192]),
        inv_prob in prop::sample::select(vec![1u32, 3, 0]),
    ) {
        let mut cache: FlowCache<u64> =
            FlowCache::new(EmcConfig { entries, insert_inv_prob: inv_prob, seed: 7 });
        let mut burst = Burst::new();
        // The "configuration": its generation changes the slow path's answers.
        let mut generation = 1u64;
        let slow = |g: u64, k: &FlowKey| u64::from(k.flow_hash()) ^ (g << 40);
        let mut packets = 0u64;
        let mut slow_calls = 0u64;
        for (frames, change) in &bursts {
            if *change {
                generation += 1;
            }
            burst.clear();
            'fill: for &(k, run) in frames {
                for _ in 0..run {
                    if burst.push(keys[k % keys.len()]).is_err() {
                        break 'fill;
                    }
                }
            }
            burst.classify(&mut cache, generation);
            let misses_before = burst.n_misses();
            let mut calls = 0;
            burst.resolve(&mut cache, generation, |_, k| {
                calls += 1;
                slow(generation, k)
            });
            // One slow-path call per distinct missed key.
            let mut distinct: Vec<FlowKey> = burst.misses().map(|i| *burst.key(i)).collect();
            distinct.dedup();
            distinct.sort_by_key(|k| *k.as_bytes());
            distinct.dedup();
            prop_assert_eq!(calls, distinct.len());
            prop_assert!(calls <= misses_before);
            slow_calls += calls as u64;
            for i in 0..burst.len() {
                prop_assert_eq!(burst.decision(i).copied(), Some(slow(generation, burst.key(i))));
                let same_as_prev = i > 0 && burst.key(i) == burst.key(i - 1);
                prop_assert_eq!(burst.level(i) == Some(Level::LastFlow), same_as_prev);
            }
            packets += burst.len() as u64;
        }
        let s = cache.stats();
        prop_assert_eq!(s.packets(), packets);
        prop_assert!(slow_calls <= s.misses);
        if inv_prob == 0 {
            prop_assert_eq!(s.emc_hits, 0);
        }
    }
}

#[test]
fn replacement_prefers_free_then_stale_then_round_robin() {
    // One bucket of 4 (entries = 4), every key on the same hash.
    let mut c: FlowCache<u8> = FlowCache::new(EmcConfig {
        entries: 4,
        ..EmcConfig::default()
    });
    let key = |n: u8| {
        let mut b = [0u8; 64];
        b[63] = n;
        FlowKey::from_bytes(b)
    };
    for n in 0..4 {
        assert_eq!(c.insert(&key(n), 9, n, 1), Insert::Inserted);
    }
    assert_eq!(c.insert(&key(2), 9, 22, 1), Insert::Updated);
    // Full of current entries: round-robin evicts slot 0 then 1.
    assert_eq!(c.insert(&key(4), 9, 4, 1), Insert::Evicted);
    assert_eq!(c.peek(&key(0), 9, 1), None);
    assert_eq!(c.insert(&key(5), 9, 5, 1), Insert::Evicted);
    assert_eq!(c.peek(&key(1), 9, 1), None);
    assert_eq!(c.peek(&key(2), 9, 1), Some(&22));
    // Key 3 refreshed under generation 2; a generation-2 insert then takes
    // the first stale (generation 1) slot rather than the cursor's.
    assert_eq!(c.insert(&key(3), 9, 33, 2), Insert::Updated);
    assert_eq!(c.insert(&key(6), 9, 6, 2), Insert::Evicted);
    assert_eq!(
        c.peek(&key(4), 9, 1),
        None,
        "oldest-generation slot 0 reused"
    );
    assert_eq!(c.peek(&key(3), 9, 2), Some(&33));
    assert_eq!(c.peek(&key(5), 9, 1), Some(&5));
    // A freed slot is preferred over everything.
    assert_eq!(c.remove(&key(5), 9), Some(5));
    assert_eq!(c.insert(&key(7), 9, 7, 2), Insert::Inserted);
    assert_eq!(c.len(), 4);
    let s = c.stats();
    assert_eq!((s.insertions, s.updates, s.evictions), (8, 2, 3));
}

#[test]
fn insertion_probability() {
    let keys: Vec<FlowKey> = (0..20_000u32)
        .map(|n| {
            let mut b = [0u8; 64];
            b[0..4].copy_from_slice(&n.to_be_bytes());
            FlowKey::from_bytes(b)
        })
        .collect();
    for (inv, lo, hi) in [(1u32, 20_000, 20_000), (100, 120, 290), (0, 0, 0)] {
        let mut c: FlowCache<()> = FlowCache::new(EmcConfig {
            entries: 1 << 16,
            insert_inv_prob: inv,
            seed: 12345,
        });
        for k in &keys {
            c.insert(k, k.flow_hash(), (), 1);
        }
        let s = c.stats();
        // Binomial(20000, 1/100): mean 200, sd 14; bounds are > 5 sd.
        assert!(
            (lo..=hi).contains(&s.insertions),
            "inv_prob {inv}: {} inserted",
            s.insertions
        );
        assert_eq!(s.insertions + s.insert_skipped, 20_000);
    }
}

#[test]
fn stale_entry_is_freed_on_lookup() {
    let mut c: FlowCache<&'static str> = FlowCache::default();
    let k = FlowKey::from_bytes([7; 64]);
    let h = k.flow_hash();
    c.insert(&k, h, "old", 1);
    assert_eq!(c.lookup(&k, h, 1), Some(&"old"));
    assert_eq!(c.lookup(&k, h, 2), None);
    assert_eq!(c.len(), 0);
    assert_eq!(
        c.lookup(&k, h, 1),
        None,
        "freed, even for its own generation"
    );
    let s = c.stats();
    assert_eq!((s.emc_hits, s.misses, s.stale_misses), (1, 2, 1));
}

/// Two different keys with the same 32-bit hash, found by a birthday search.
fn colliding_pair() -> (FlowKey, FlowKey) {
    let mut seen: HashMap<u32, FlowKey> = HashMap::new();
    for n in 0u32.. {
        let mut b = [0u8; 64];
        b[60..64].copy_from_slice(&n.to_be_bytes());
        let k = FlowKey::from_bytes(b);
        if let Some(other) = seen.insert(k.flow_hash(), k) {
            return (other, k);
        }
    }
    unreachable!("2^32 keys always collide")
}

#[test]
fn equal_hashes_are_not_equal_keys() {
    let (a, b) = colliding_pair();
    assert_ne!(a, b);
    assert_eq!(a.flow_hash(), b.flow_hash());
    let mut cache: FlowCache<FlowKey> = FlowCache::default();
    let mut burst = Burst::new();
    for k in [a, b, b, a] {
        burst.push(k).unwrap();
    }
    burst.classify(&mut cache, 1);
    assert_eq!(burst.level(1), Some(Level::SlowPath));
    assert_eq!(burst.level(2), Some(Level::LastFlow));
    assert_eq!(burst.level(3), Some(Level::SlowPath));
    burst.resolve(&mut cache, 1, |_, k| *k);
    for i in 0..4 {
        assert_eq!(burst.decision(i), Some(burst.key(i)));
    }
    // In the EMC too: both live in one bucket under one hash.
    let h = a.flow_hash();
    assert_eq!(cache.lookup(&a, h, 1), Some(&a));
    assert_eq!(cache.lookup(&b, h, 1), Some(&b));
}
