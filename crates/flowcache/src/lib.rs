//! Flow caching for software switches: most packets skip the slow path.
//!
//! Three pieces, all without I/O, locks or per-packet allocation, meant to
//! be owned by one PMD (poll-mode driver) thread each. The only `unsafe` is
//! one software-prefetch hint (x86_64 `_mm_prefetch`, which cannot fault),
//! kept because it measurably speeds up batched lookups in large tables; see
//! [`FlowCache::lookup_batch`].
//!
//! - [`FlowKey`]: a 64-byte exact-match key extracted from a raw Ethernet
//!   frame (in_port, tunnel VNI, VLAN tags, Ethernet addresses and type,
//!   IPv4/IPv6 addresses, IP protocol and fragment state, L4 ports or ICMP
//!   type/code) with a fast hash. Extraction never panics on short or
//!   malformed frames (fuzzed by `fuzz/fuzz_targets/extract_key.rs`).
//! - Level 1, the **last-flow check** ([`Burst`]): a packet with the same
//!   key as the previous packet of its burst reuses that decision.
//! - Level 2, the **exact-match cache** ([`FlowCache`], EMC): a bucketed,
//!   hash-indexed table of fixed capacity (default 8192 entries, 4-way
//!   buckets) from key to the caller's decision type `A`, with a documented
//!   [replacement policy](emc#replacement-policy), an optional
//!   [insertion probability](emc#insertion-probability) against thrashing,
//!   and [generation-based invalidation](emc#generations): a decision made
//!   under one configuration generation is never returned for another.
//!
//! Counters ([`Stats`]) count hits per level, misses, stale misses,
//! insertions, updates, evictions and skipped insertions.
//!
//! # A PMD loop
//!
//! ```
//! use flowcache::{Burst, EmcConfig, FlowCache, FlowKey};
//!
//! #[derive(Clone, Copy, Debug, PartialEq)]
//! enum Action { Output(u32), Drop }
//!
//! // A toy slow path: drop telnet, otherwise output on port 2.
//! fn slow_path(key: &FlowKey) -> Action {
//!     match key.l4_ports() {
//!         Some((_, 23)) => Action::Drop,
//!         _ => Action::Output(2),
//!     }
//! }
//!
//! // One IPv4/TCP frame to port 80, one to port 23.
//! let mut web = [0u8; 54];
//! web[12..14].copy_from_slice(&[0x08, 0x00]);
//! web[14] = 0x45;
//! web[16..18].copy_from_slice(&40u16.to_be_bytes());
//! web[23] = 6;
//! web[36..38].copy_from_slice(&80u16.to_be_bytes());
//! let mut telnet = web;
//! telnet[36..38].copy_from_slice(&23u16.to_be_bytes());
//!
//! let mut cache: FlowCache<Action> = FlowCache::new(EmcConfig::default());
//! let mut burst: Burst<Action> = Burst::new();
//! let generation = 1; // from the switch's configuration snapshot
//! for _ in 0..2 {
//!     burst.clear();
//!     for frame in [&web[..], &web[..], &telnet[..]] {
//!         burst.push_frame(frame, 1, None).expect("burst has room");
//!     }
//!     burst.classify(&mut cache, generation);
//!     burst.resolve(&mut cache, generation, |_, key| slow_path(key));
//!     assert_eq!(burst.decision(0), Some(&Action::Output(2)));
//!     assert_eq!(burst.decision(1), Some(&Action::Output(2)));
//!     assert_eq!(burst.decision(2), Some(&Action::Drop));
//! }
//! let s = cache.stats();
//! // Burst 1: two misses and one last-flow hit; burst 2: two EMC hits and
//! // one last-flow hit.
//! assert_eq!((s.misses, s.emc_hits, s.last_flow_hits), (2, 2, 2));
//! ```
//!
//! # Features
//!
//! - `serde`: derives `serde::Serialize` for [`Stats`].

#![deny(unsafe_code)]
#![deny(missing_docs)]

mod burst;
pub mod emc;
mod key;
mod prefetch;

pub use burst::{Burst, BurstFull, Level, MAX_BURST};
pub use emc::{EmcConfig, Entry, FlowCache, Insert, Stats, DEFAULT_ENTRIES, MAX_ENTRIES, WAYS};
pub use key::{
    FlowKey, Fragment, KeyMask, Wildcards, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_QINQ,
    ETHERTYPE_VLAN, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP,
    IPPROTO_UDPLITE, KEY_LEN, MAX_IPV6_EXT_HEADERS,
};
