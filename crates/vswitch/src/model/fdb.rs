//! The forwarding database: MAC learning with aging, and static entries.
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

/// Index of a port in the switch's port table (at most [`crate::config::MAX_PORTS`] ports; 16 bits
/// keep a forwarding decision, cached per flow, within two machine words).
pub type PortId = u16;

/// A VLAN domain: the access VLAN of a port, or 0 for untagged ports.
pub type Vlan = u16;

/// FDB key: VLAN in bits 48..60, MAC in bits 0..48.
#[inline]
pub fn fdb_key(vlan: Vlan, mac: &[u8; 6]) -> u64 {
    (u64::from(vlan) << 48)
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
    /// The port the MAC was last seen on.
    pub port: PortId,
    /// Seconds since the FDB's epoch when the MAC was last seen (refreshed per burst).
    last_seen: AtomicU64,
    /// Static entries never age and are never moved by learning.
    pub is_static: bool,
}

/// One FDB row as `vswitchctl fdb` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FdbRow {
    /// VLAN domain.
    pub vlan: Vlan,
    /// MAC address.
    pub mac: MacAddr,
    /// Port id.
    pub port: PortId,
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
    aging: Duration,
    /// Bumped on every change that can alter a forwarding decision.
    generation: AtomicU64,
}

/// A MAC seen on a port that the FDB does not yet place there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learn {
    /// FDB key (see [`fdb_key`]).
    pub key: u64,
    /// The port it was seen on.
    pub port: PortId,
}

impl Fdb {
    /// A new FDB; `aging` of zero disables aging.
    pub fn new(aging: Duration) -> Self {
        Fdb {
            map: RwLock::new(Map::default()),
            epoch: Instant::now(),
            aging,
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
                    e.port = l.port;
                    e.last_seen.store(now, Relaxed);
                }
                None => {
                    map.insert(
                        l.key,
                        FdbEntry {
                            port: l.port,
                            last_seen: AtomicU64::new(now),
                            is_static: false,
                        },
                    );
                }
            }
        }
        self.generation.fetch_add(1, Relaxed);
    }

    /// Adds a static entry.
    pub fn add_static(&self, vlan: Vlan, mac: MacAddr, port: PortId) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.insert(
            fdb_key(vlan, &mac.0),
            FdbEntry {
                port,
                last_seen: AtomicU64::new(0),
                is_static: true,
            },
        );
        self.generation.fetch_add(1, Relaxed);
    }

    /// Removes dynamic entries older than the aging time; returns how many.
    pub fn age(&self) -> usize {
        if self.aging.is_zero() {
            return 0;
        }
        let now = self.now();
        let max = self.aging.as_secs();
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let before = map.len();
        map.retain(|_, e| e.is_static || now.saturating_sub(e.last_seen.load(Relaxed)) < max);
        let removed = before - map.len();
        if removed > 0 {
            self.generation.fetch_add(1, Relaxed);
        }
        removed
    }

    /// Removes the dynamic entries of a port (its link went down).
    pub fn flush_port(&self, port: PortId) -> usize {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let before = map.len();
        map.retain(|_, e| e.is_static || e.port != port);
        let removed = before - map.len();
        if removed > 0 {
            self.generation.fetch_add(1, Relaxed);
        }
        removed
    }

    /// All entries, sorted by VLAN and MAC.
    pub fn rows(&self) -> Vec<FdbRow> {
        let now = self.now();
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<FdbRow> = map
            .iter()
            .map(|(k, e)| {
                let b = k.to_be_bytes();
                FdbRow {
                    vlan: (*k >> 48) as Vlan,
                    mac: MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]]),
                    port: e.port,
                    age_secs: if e.is_static {
                        0
                    } else {
                        now.saturating_sub(e.last_seen.load(Relaxed))
                    },
                    is_static: e.is_static,
                }
            })
            .collect();
        rows.sort_by_key(|r| (r.vlan, r.mac));
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
    /// The port behind `key`, if known.
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<PortId> {
        self.map.get(&key).map(|e| e.port)
    }

    /// Refreshes `key` seen on `port`; returns the learn request when the FDB does not
    /// already place it there (new or moved MAC; static entries are never moved).
    #[inline]
    pub fn observe(&self, key: u64, port: PortId) -> Option<Learn> {
        match self.map.get(&key) {
            Some(e) if e.port == port || e.is_static => {
                if !e.is_static && e.last_seen.load(Relaxed) != self.now {
                    e.last_seen.store(self.now, Relaxed);
                }
                None
            }
            _ => Some(Learn { key, port }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];

    #[test]
    fn learn_lookup_move() {
        let fdb = Fdb::new(Duration::from_secs(300));
        let k = fdb_key(0, &A);
        assert_eq!(fdb.reader().lookup(k), None);
        let l = fdb.reader().observe(k, 1).unwrap();
        fdb.learn(&[l]);
        assert_eq!(fdb.reader().lookup(k), Some(1));
        assert_eq!(fdb.reader().observe(k, 1), None);
        let l = fdb.reader().observe(k, 2).unwrap();
        fdb.learn(&[l]);
        assert_eq!(fdb.reader().lookup(k), Some(2));
        assert_ne!(
            fdb.reader().lookup(fdb_key(5, &A)),
            Some(2),
            "VLANs are separate"
        );
    }

    #[test]
    fn static_entries_do_not_move_or_age() {
        let fdb = Fdb::new(Duration::from_secs(1));
        fdb.add_static(0, MacAddr(A), 3);
        let k = fdb_key(0, &A);
        assert_eq!(fdb.reader().observe(k, 4), None);
        fdb.learn(&[Learn { key: k, port: 4 }]);
        assert_eq!(fdb.reader().lookup(k), Some(3));
        assert_eq!(fdb.flush_port(3), 0);
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
            port: 1,
        }]);
        assert!(fdb.generation() > g);
        assert_eq!(fdb.flush_port(1), 1);
        assert!(fdb.is_empty());
    }
}
