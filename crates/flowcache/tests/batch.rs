//! `FlowCache::lookup_batch` answers and counts exactly as one `lookup` per
//! key, including stale entries, hash collisions and missing keys.

use flowcache::{EmcConfig, FlowCache, FlowKey};

fn key(i: u32) -> FlowKey {
    let mut b = [0u8; 64];
    b[0] = 1;
    b[24..26].copy_from_slice(&0x0800u16.to_be_bytes());
    b[32..36].copy_from_slice(&i.to_be_bytes());
    FlowKey::from_bytes(b)
}

#[test]
fn batch_equals_single_lookups() {
    for collide in [false, true] {
        // Tiny table (8 entries) so buckets are full and signatures collide;
        // with `collide`, every key gets one of 3 hashes.
        let cfg = EmcConfig {
            entries: 8,
            ..EmcConfig::default()
        };
        let mut a: FlowCache<u32> = FlowCache::new(cfg);
        let mut b: FlowCache<u32> = FlowCache::new(cfg);
        let hash = |k: &FlowKey, i: u32| if collide { i % 3 } else { k.flow_hash() };
        let mut x = 0x1234_5678u32;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for round in 0..200u64 {
            let gen = round / 20;
            for _ in 0..4 {
                let i = rnd() % 24;
                let k = key(i);
                let lag = u64::from(rnd() % 4 == 0);
                a.insert(&k, hash(&k, i), i, gen.saturating_sub(lag));
                b.insert(&k, hash(&k, i), i, gen.saturating_sub(lag));
            }
            let ids: Vec<u32> = (0..40).map(|_| rnd() % 30).collect();
            let keys: Vec<FlowKey> = ids.iter().map(|&i| key(i)).collect();
            let hashes: Vec<u32> = keys.iter().zip(&ids).map(|(k, &i)| hash(k, i)).collect();
            let single: Vec<Option<u32>> = keys
                .iter()
                .zip(&hashes)
                .map(|(k, &h)| a.lookup(k, h, gen).copied())
                .collect();
            let mut batch = vec![None; keys.len()];
            b.lookup_batch(&keys, &hashes, gen, &mut batch);
            assert_eq!(single, batch, "round {round} collide {collide}");
            assert_eq!(a.stats(), b.stats());
            assert_eq!(a.len(), b.len());
        }
        assert!(a.stats().emc_hits > 0 && a.stats().stale_misses > 0);
    }
}
