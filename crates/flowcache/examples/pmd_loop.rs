//! A PMD loop with a toy slow path: bursts of ≤ 32 frames go through key
//! extraction, the last-flow check and the EMC; misses go to the slow path
//! (a tiny FDB plus one ACL rule) and their decisions are cached. Halfway
//! through, the "configuration" changes (an FDB entry moves and the
//! generation is bumped): the cache must not return any decision made
//! before the change. Every decision is checked against the slow path run
//! directly.
//!
//! Run: `cargo run --release -p flowcache --example pmd_loop`

use flowcache::{Burst, EmcConfig, FlowCache, FlowKey, Level, MAX_BURST};

/// The decision the switch caches: small and `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Output(u32),
    Flood,
    Drop(DropReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DropReason {
    Acl,
    Malformed,
}

/// The configuration snapshot a PMD thread reads once per burst.
struct Config {
    generation: u64,
    /// FDB: destination MAC's last byte → output port (toy).
    fdb: [Option<u32>; 256],
}

/// The slow path: ACL (drop TCP to port 23), then the FDB, else flood.
fn slow_path(cfg: &Config, key: &FlowKey) -> Action {
    if key.is_malformed() {
        return Action::Drop(DropReason::Malformed);
    }
    if key.ip_proto() == Some(flowcache::IPPROTO_TCP) && matches!(key.l4_ports(), Some((_, 23))) {
        return Action::Drop(DropReason::Acl);
    }
    match cfg.fdb[usize::from(key.eth_dst()[5])] {
        Some(port) => Action::Output(port),
        None => Action::Flood,
    }
}

/// An Ethernet/IPv4/TCP frame of 64 bytes for flow number `flow`.
fn frame(flow: u32) -> [u8; 64] {
    let mut f = [0u8; 64];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, (flow % 8) as u8]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 1, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, (flow >> 8) as u8, flow as u8]);
    f[34..36].copy_from_slice(&(1024 + (flow % 1000) as u16).to_be_bytes());
    let dport: u16 = if flow % 10 == 0 { 23 } else { 80 };
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

fn main() {
    const FLOWS: u32 = 1280;
    const BURSTS: u32 = 20_000;
    let frames: Vec<[u8; 64]> = (0..FLOWS).map(frame).collect();

    let mut cfg = Config {
        generation: 1,
        fdb: [None; 256],
    };
    for (mac, port) in [(1usize, 1u32), (2, 2), (3, 3), (4, 1)] {
        cfg.fdb[mac] = Some(port);
    }

    let mut cache: FlowCache<Action> = FlowCache::new(EmcConfig::default());
    let mut burst: Burst<Action> = Burst::new();
    let mut rng = 0x1234_5678u32;
    let mut checked = 0u64;
    let mut per_port = [0u64; 4];

    for n in 0..BURSTS {
        if n == BURSTS / 2 {
            // Configuration change: MAC ..:04 moves from port 1 to port 3.
            cfg.fdb[4] = Some(3);
            cfg.generation += 1;
        }
        // rx: a burst of 32 frames, in runs of 1..4 packets of one flow.
        burst.clear();
        while burst.len() < MAX_BURST {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            let f = &frames[(rng % FLOWS) as usize];
            for _ in 0..1 + (rng >> 30) {
                if burst.push_frame(f, 7, None).is_err() {
                    break;
                }
            }
        }
        // Level 1 and 2, then the slow path for what missed both.
        burst.classify(&mut cache, cfg.generation);
        burst.resolve(&mut cache, cfg.generation, |_, key| slow_path(&cfg, key));
        // "tx": here just count, and check against the slow path.
        for i in 0..burst.len() {
            let got = burst.decision(i).copied();
            assert_eq!(got, Some(slow_path(&cfg, burst.key(i))), "packet {i}");
            if let Some(Action::Output(p)) = got {
                per_port[p as usize] += 1;
            }
            checked += 1;
        }
        if n == 0 {
            let l = burst.level(0);
            assert_eq!(l, Some(Level::SlowPath));
        }
    }

    let s = cache.stats();
    println!("packets checked against the slow path: {checked} (all equal)");
    println!(
        "last-flow hits {} | EMC hits {} | misses {} (stale {}) | hit rate {:.1}%",
        s.last_flow_hits,
        s.emc_hits,
        s.misses,
        s.stale_misses,
        100.0 * s.hit_rate()
    );
    println!(
        "insertions {} | updates {} | evictions {} | cached {}/{}",
        s.insertions,
        s.updates,
        s.evictions,
        cache.len(),
        cache.capacity()
    );
    println!("output per port: {:?}", &per_port[1..]);
    let current = cache.iter().find(|e| e.generation == cfg.generation);
    if let Some(e) = current {
        println!("a cached flow: {} -> {:?}", e.key, e.action);
    }
}
