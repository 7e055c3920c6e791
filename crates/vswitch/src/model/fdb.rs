//! The forwarding database: MAC learning with aging, and static entries, keyed by
//! bridge domain and MAC, each pointing to a destination.
//!
//! The FDB is shared by all PMD threads. The data path takes the read lock once per
//! burst, looks up every frame of the burst under it, and refreshes the age of known
//! MACs with a relaxed store into the entry (no write lock). Only a MAC that is new or
//! has moved to another port needs the write lock, which the PMD takes once, after the
//! burst, for all such MACs together. Aging runs on the housekeeping thread.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use rustc_hash::FxHasher;
use serde::Serialize;

use crate::config::MacAddr;
use crate::model::topology::DomainId;

/// Index of a port in the switch's port table (at most [`crate::config::MAX_PORTS`] ports; 16 bits
/// keep a forwarding decision, cached per flow, within two machine words).
pub type PortId = u16;

/// An 802.1Q VLAN id (1..=4094), or 0 for untagged.
pub type Vlan = u16;

/// Where a MAC lives: a local port (and, with the overlay, a remote tunnel endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Dest {
    /// Behind a port of this switch.
    Port(PortId),
    /// Behind a remote tunnel endpoint (learned from decapsulated frames).
    Remote(crate::model::tunnel::RemoteId),
}

/// FDB key: bridge domain in bits 48..64, MAC in bits 0..48.
#[inline]
pub fn fdb_key(domain: DomainId, mac: &[u8; 6]) -> u64 {
    (u64::from(domain) << 48)
        | u64::from(mac[0]) << 40
        | u64::from(mac[1]) << 32
        | u64::from(mac[2]) << 24
        | u64::from(mac[3]) << 16
        | u64::from(mac[4]) << 8
        | u64::from(mac[5])
}

/// One learned or static MAC.
#[derive(Debug)]
pub struct FdbEntry {
    /// Where the MAC was last seen.
    pub dest: Dest,
    /// Seconds since the FDB's epoch when the MAC was last seen (refreshed per burst).
    last_seen: AtomicU64,
    /// Static entries never age and are never moved by learning.
    pub is_static: bool,
}

/// One FDB row as `vswitchctl fdb` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FdbRow {
    /// Bridge domain.
    pub domain: DomainId,
    /// MAC address.
    pub mac: MacAddr,
    /// Where it lives.
    pub dest: Dest,
    /// Seconds since last seen (0 for static entries).
    pub age_secs: u64,
    /// Static entry.
    pub is_static: bool,
}

type Map = HashMap<u64, FdbEntry, BuildHasherDefault<FxHasher>>;

/// The MAC-learning table.
#[derive(Debug)]
pub struct Fdb {
    map: RwLock<Map>,
    epoch: Instant,
    /// Aging time, seconds (0: no aging); a reload may change it.
    aging: AtomicU64,
    /// Bumped on every change that can alter a forwarding decision.
    generation: AtomicU64,
}

/// A MAC seen on a port that the FDB does not yet place there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learn {
    /// FDB key (see [`fdb_key`]).
    pub key: u64,
    /// Where it was seen.
    pub dest: Dest,
}

impl Fdb {
    /// A new FDB; `aging` of zero disables aging.
    pub fn new(aging: Duration) -> Self {
        Fdb {
            map: RwLock::new(Map::default()),
            epoch: Instant::now(),
            aging: AtomicU64::new(aging.as_secs()),
            generation: AtomicU64::new(0),
        }
    }

    /// Seconds since the FDB's epoch.
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_secs()
    }

    /// Generation number; changes whenever an entry is added, moved or removed.
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// Takes the read lock for one burst.
    pub fn reader(&self) -> FdbReader<'_> {
        FdbReader {
            map: self.map.read().unwrap_or_else(|e| e.into_inner()),
            now: self.now(),
        }
    }

    /// Applies the MACs learned in one burst under one write lock. A MAC learned by
    /// another thread in the meantime is simply overwritten (last writer wins).
    pub fn learn(&self, learned: &[Learn]) {
        if learned.is_empty() {
            return;
        }
        let now = self.now();
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        for l in learned {
            match map.get_mut(&l.key) {
                Some(e) if e.is_static => {}
                Some(e) => {
                    e.dest = l.dest;
                    e.last_seen.store(now, Relaxed);
                }
                None => {
                    map.insert(
                        l.key,
                        FdbEntry {
                            dest: l.dest,
                            last_seen: AtomicU64::new(now),
                            is_static: false,
                        },
                    );
                }
            }
        }
        self.generation.fetch_add(1, Relaxed);
    }

    /// Adds (or replaces) a static entry.
    pub fn add_static(&self, domain: DomainId, mac: MacAddr, dest: Dest) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.insert(
            fdb_key(domain, &mac.0),
            FdbEntry {
                dest,
                last_seen: AtomicU64::new(0),
                is_static: true,
            },
        );
        self.generation.fetch_add(1, Relaxed);
    }

    /// Sets the aging time (zero disables aging).
    pub fn set_aging(&self, aging: Duration) {
        self.aging.store(aging.as_secs(), Relaxed);
    }

    /// Removes dynamic entries older than the aging time; returns how many.
    pub fn age(&self) -> usize {
        let max = self.aging.load(Relaxed);
        if max == 0 {
            return 0;
        }
        let now = self.now();
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let before = map.len();
        map.retain(|_, e| e.is_static || now.saturating_sub(e.last_seen.load(Relaxed)) < max);
        let removed = before - map.len();
        if removed > 0 {
            self.generation.fetch_add(1, Relaxed);
        }
        removed
    }

    /// Removes every static entry (before a reload installs the file's).
    pub fn clear_static(&self) -> usize {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let before = map.len();
        map.retain(|_, e| !e.is_static);
        let removed = before - map.len();
        if removed > 0 {
            self.generation.fetch_add(1, Relaxed);
        }
        removed
    }

    /// Removes the dynamic entries of a port (its link went down, or it moved to another
    /// domain); with `statics`, its static entries too (the port was deleted).
    pub fn flush_port(&self, port: PortId, statics: bool) -> usize {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let before = map.len();
        map.retain(|_, e| (e.is_static && !statics) || e.dest != Dest::Port(port));
        let removed = before - map.len();
        if removed > 0 {
            self.generation.fetch_add(1, Relaxed);
        }
        removed
    }

    /// All entries, sorted by domain and MAC.
    pub fn rows(&self) -> Vec<FdbRow> {
        let now = self.now();
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<FdbRow> = map
            .iter()
            .map(|(k, e)| {
                let b = k.to_be_bytes();
                FdbRow {
                    domain: (*k >> 48) as DomainId,
                    mac: MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]]),
                    dest: e.dest,
                    age_secs: if e.is_static {
                        0
                    } else {
                        now.saturating_sub(e.last_seen.load(Relaxed))
                    },
                    is_static: e.is_static,
                }
            })
            .collect();
        rows.sort_by_key(|r| (r.domain, r.mac));
        rows
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when the FDB has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The FDB read-locked for one burst.
pub struct FdbReader<'a> {
    map: std::sync::RwLockReadGuard<'a, Map>,
    now: u64,
}

impl FdbReader<'_> {
    /// Where `key` lives, if known.
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<Dest> {
        self.map.get(&key).map(|e| e.dest)
    }

    /// Refreshes `key` seen behind `dest`; returns the learn request when the FDB does not
    /// already place it there (new or moved MAC; static entries are never moved).
    #[inline]
    pub fn observe(&self, key: u64, dest: Dest) -> Option<Learn> {
        match self.map.get(&key) {
            Some(e) if e.dest == dest || e.is_static => {
                if !e.is_static && e.last_seen.load(Relaxed) != self.now {
                    e.last_seen.store(self.now, Relaxed);
                }
                None
            }
            _ => Some(Learn { key, dest }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const P1: Dest = Dest::Port(1);
    const P2: Dest = Dest::Port(2);

    #[test]
    fn learn_lookup_move() {
        let fdb = Fdb::new(Duration::from_secs(300));
        let k = fdb_key(0, &A);
        assert_eq!(fdb.reader().lookup(k), None);
        let l = fdb.reader().observe(k, P1).unwrap();
        fdb.learn(&[l]);
        assert_eq!(fdb.reader().lookup(k), Some(P1));
        assert_eq!(fdb.reader().observe(k, P1), None);
        let l = fdb.reader().observe(k, P2).unwrap();
        fdb.learn(&[l]);
        assert_eq!(fdb.reader().lookup(k), Some(P2));
        assert_ne!(
            fdb.reader().lookup(fdb_key(5, &A)),
            Some(P2),
            "domains are separate"
        );
    }

    #[test]
    fn static_entries_do_not_move_or_age() {
        let fdb = Fdb::new(Duration::from_secs(1));
        fdb.add_static(0, MacAddr(A), Dest::Port(3));
        let k = fdb_key(0, &A);
        assert_eq!(fdb.reader().observe(k, Dest::Port(4)), None);
        fdb.learn(&[Learn {
            key: k,
            dest: Dest::Port(4),
        }]);
        assert_eq!(fdb.reader().lookup(k), Some(Dest::Port(3)));
        assert_eq!(fdb.flush_port(3, false), 0);
        let rows = fdb.rows();
        assert_eq!(rows.len(), 1);
        assert!(rows[0].is_static);
        assert_eq!(rows[0].mac, MacAddr(A));
    }

    #[test]
    fn flush_port_removes_dynamic() {
        let fdb = Fdb::new(Duration::from_secs(300));
        let g = fdb.generation();
        fdb.learn(&[Learn {
            key: fdb_key(0, &A),
            dest: P1,
        }]);
        assert!(fdb.generation() > g);
        assert_eq!(fdb.flush_port(1, false), 1);
        assert!(fdb.is_empty());
    }
}
