//! Stats arithmetic and (with the `serde` feature) serialization.

use flowcache::{EmcConfig, FlowCache, FlowKey, Stats};

#[test]
fn stats_sum_across_threads() {
    let mut a: FlowCache<u8> = FlowCache::new(EmcConfig::default());
    let k = FlowKey::from_bytes([1; 64]);
    let h = k.flow_hash();
    assert_eq!(a.lookup(&k, h, 1), None);
    a.insert(&k, h, 5, 1);
    assert_eq!(a.lookup(&k, h, 1), Some(&5));
    let mut total = Stats::default();
    total += a.stats();
    total += a.stats();
    assert_eq!((total.emc_hits, total.misses, total.insertions), (2, 2, 2));
    assert_eq!(total.packets(), 4);
    assert!((total.hit_rate() - 0.5).abs() < 1e-9);
    assert_eq!(Stats::default().hit_rate(), 0.0);
}

#[cfg(feature = "serde")]
#[test]
fn stats_serialize() {
    let s = Stats {
        emc_hits: 3,
        misses: 1,
        ..Stats::default()
    };
    let v = serde_json::to_value(s).unwrap();
    assert_eq!(v["emc_hits"], 3);
    assert_eq!(v["misses"], 1);
    assert_eq!(v["last_flow_hits"], 0);
    assert_eq!(v.as_object().unwrap().len(), 8);
}
