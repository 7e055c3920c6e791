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
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use rustc_hash::FxHasher;
use serde::Serialize;

use crate::config::MacAddr;
use crate::model::domain::DomainId;

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
    /// An OVN logical port bound on another chassis: that chassis' tunnel endpoint and
    /// the port's key (the egress key of OVN's Geneve option).
    RemotePort {
        /// The chassis' endpoint (its Encap IP).
        remote: crate::model::tunnel::RemoteId,
        /// The logical port's key (`Port_Binding.tunnel_key`).
        key: u16,
    },
    /// An OVN logical port bound on several chassis (a live migration): delivered as
    /// the logical switch's group of this key (the port's key), one copy per place.
    Multi(u16),
    /// The MAC of an OVN logical router port: frames to it need OVN's router pipeline,
    /// which vswitchd does not run (dropped as `ovn_router_unsupported`).
    Router,
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
    /// A static entry the OVN chassis installed (replaced as a whole by
    /// [`Fdb::replace_ovn`], kept by [`Fdb::clear_static`]).
    pub ovn: bool,
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

/// Full flow-cache invalidations that learning may cause at once, and per second after
/// that (a token bucket). Every PMD's cached decisions are invalidated by the FDB's
/// generation, so a guest teaching thousands of MACs (or flapping one between ports)
/// would otherwise flush every flow cache once per burst. Past the bucket the bump is
/// deferred until a token is free or the housekeeping tick ([`Fdb::flush_pending`],
/// every second): meanwhile frames to a newly learned MAC are flooded (correct, only
/// wider) and a moved MAC's cached flows still go to its old port. Removals (aging,
/// flushes) always invalidate at once; normal learning never runs out of tokens.
pub const LEARN_BUMP_BURST: u32 = 64;
/// See [`LEARN_BUMP_BURST`].
pub const LEARN_BUMPS_PER_SEC: u32 = 200;

/// The entries and what is counted of them, under one lock.
#[derive(Debug, Default)]
struct Table {
    map: Map,
    /// Dynamic entries (static ones are configured, not learned).
    learned: u32,
    /// Dynamic entries placed behind each port, by [`PortId`].
    per_port: Vec<u32>,
    /// Learning's invalidation tokens, and when they were last refilled.
    tokens: u32,
    refilled: Option<Instant>,
    /// A learned MAC's invalidation is owed.
    pending: bool,
}

impl Table {
    fn port_count(&self, dest: Dest) -> u32 {
        match dest {
            Dest::Port(p) => self.per_port.get(usize::from(p)).copied().unwrap_or(0),
            _ => 0,
        }
    }

    fn count(&mut self, dest: Dest, add: bool) {
        if let Dest::Port(p) = dest {
            let p = usize::from(p);
            if self.per_port.len() <= p {
                self.per_port.resize(p + 1, 0);
            }
            let c = &mut self.per_port[p];
            *c = if add { *c + 1 } else { c.saturating_sub(1) };
        }
        self.learned = if add {
            self.learned + 1
        } else {
            self.learned.saturating_sub(1)
        };
    }

    /// Counts again from the entries (after a bulk removal).
    fn recount(&mut self) {
        self.learned = 0;
        self.per_port.iter_mut().for_each(|c| *c = 0);
        let dynamic: Vec<Dest> = self
            .map
            .values()
            .filter(|e| !e.is_static)
            .map(|e| e.dest)
            .collect();
        for d in dynamic {
            self.count(d, true);
        }
    }

    /// Whether learning `l` stays within the limits: a new MAC needs room in the table
    /// (`max` learned in all) and behind its port (`l.limit`); a moved one behind its
    /// new port. A static entry is never moved, so it needs nothing.
    /// `extra`: MACs the caller is about to add to the same port before this one.
    fn admits(&self, l: &Learn, max: u32, extra: u32) -> bool {
        let port = self.port_count(l.dest).saturating_add(extra);
        match self.map.get(&l.key) {
            Some(e) if e.is_static => true,
            Some(_) => port < l.limit,
            None => self.learned.saturating_add(extra) < max && port < l.limit,
        }
    }

    /// Takes an invalidation token (refilled at [`LEARN_BUMPS_PER_SEC`]).
    fn take_token(&mut self) -> bool {
        let now = Instant::now();
        let last = *self.refilled.get_or_insert(now - Duration::from_secs(1));
        let add =
            now.duration_since(last).as_millis() as u64 * u64::from(LEARN_BUMPS_PER_SEC) / 1000;
        if add > 0 {
            self.tokens = (u64::from(self.tokens) + add).min(u64::from(LEARN_BUMP_BURST)) as u32;
            self.refilled = Some(now);
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// The MAC-learning table.
#[derive(Debug)]
pub struct Fdb {
    table: RwLock<Table>,
    epoch: Instant,
    /// Aging time, seconds (0: no aging); a reload may change it.
    aging: AtomicU64,
    /// Dynamic entries the table may hold in all; a reload may change it.
    max_macs: AtomicU32,
    /// Bumped on every change that can alter a forwarding decision.
    generation: AtomicU64,
    /// Learn requests refused for a limit, since start.
    refused: AtomicU64,
}

/// A MAC seen on a port that the FDB does not yet place there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learn {
    /// FDB key (see [`fdb_key`]).
    pub key: u64,
    /// Where it was seen.
    pub dest: Dest,
    /// MACs `dest` may have learned behind it (`u32::MAX`: only the table's limit).
    pub limit: u32,
}

impl Fdb {
    /// A new FDB; `aging` of zero disables aging; at most `max_macs` learned entries.
    pub fn new(aging: Duration, max_macs: u32) -> Self {
        Fdb {
            table: RwLock::new(Table::default()),
            epoch: Instant::now(),
            aging: AtomicU64::new(aging.as_secs()),
            max_macs: AtomicU32::new(max_macs),
            generation: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Relaxed);
    }

    /// Seconds since the FDB's epoch.
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_secs()
    }

    /// Generation number; changes whenever an entry is added, moved or removed (an
    /// addition's change may be deferred: [`LEARN_BUMP_BURST`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// Takes the read lock for one burst.
    pub fn reader(&self) -> FdbReader<'_> {
        FdbReader {
            table: self.read(),
            now: self.now(),
            max_macs: self.max_macs.load(Relaxed),
        }
    }

    /// Applies the MACs learned in one burst under one write lock. A MAC learned by
    /// another thread in the meantime is simply overwritten (last writer wins). A
    /// request beyond a limit is refused (counted in [`Fdb::refused`]; the data path
    /// already dropped the frame when it saw the limit reached).
    pub fn learn(&self, learned: &[Learn]) {
        if learned.is_empty() {
            return;
        }
        let now = self.now();
        let max = self.max_macs.load(Relaxed);
        let mut t = self.write();
        let (mut added, mut moved, mut refused) = (false, false, 0);
        for l in learned {
            if !t.admits(l, max, 0) {
                refused += 1;
                continue;
            }
            match t.map.get_mut(&l.key) {
                Some(e) if e.is_static => {}
                Some(e) => {
                    let old = std::mem::replace(&mut e.dest, l.dest);
                    e.last_seen.store(now, Relaxed);
                    t.count(old, false);
                    t.count(l.dest, true);
                    moved = true;
                }
                None => {
                    t.map.insert(
                        l.key,
                        FdbEntry {
                            dest: l.dest,
                            last_seen: AtomicU64::new(now),
                            is_static: false,
                            ovn: false,
                        },
                    );
                    t.count(l.dest, true);
                    added = true;
                }
            }
        }
        if refused > 0 {
            self.refused.fetch_add(refused, Relaxed);
        }
        if moved || added {
            if t.take_token() {
                t.pending = false;
                self.bump();
            } else {
                t.pending = true;
            }
        }
    }

    /// Makes an invalidation that learning deferred (called every second).
    pub fn flush_pending(&self) {
        let mut t = self.write();
        if t.pending {
            t.pending = false;
            self.bump();
        }
    }

    /// Learn requests refused because a limit was reached, since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    /// Dynamic entries behind port `port`.
    pub fn port_macs(&self, port: PortId) -> u32 {
        self.read().port_count(Dest::Port(port))
    }

    /// Adds (or replaces) a static entry.
    pub fn add_static(&self, domain: DomainId, mac: MacAddr, dest: Dest) {
        let mut t = self.write();
        t.map.insert(
            fdb_key(domain, &mac.0),
            FdbEntry {
                dest,
                last_seen: AtomicU64::new(0),
                is_static: true,
                ovn: false,
            },
        );
        t.recount();
        self.bump();
    }

    /// Replaces every OVN entry with `entries` (domain, MAC, destination) in one
    /// change; invalidates cached decisions only when something changed. Returns
    /// whether it did.
    pub fn replace_ovn(&self, entries: &[(DomainId, MacAddr, Dest)]) -> bool {
        let mut t = self.write();
        let want: HashMap<u64, Dest> = entries
            .iter()
            .map(|(d, m, dest)| (fdb_key(*d, &m.0), *dest))
            .collect();
        let same = t.map.iter().filter(|(_, e)| e.ovn).count() == want.len()
            && want
                .iter()
                .all(|(k, d)| t.map.get(k).is_some_and(|e| e.ovn && e.dest == *d));
        if same {
            return false;
        }
        t.map.retain(|k, e| !e.ovn && !want.contains_key(k));
        for (k, dest) in want {
            t.map.insert(
                k,
                FdbEntry {
                    dest,
                    last_seen: AtomicU64::new(0),
                    is_static: true,
                    ovn: true,
                },
            );
        }
        t.recount();
        self.bump();
        true
    }

    /// Sets the aging time (zero disables aging).
    pub fn set_aging(&self, aging: Duration) {
        self.aging.store(aging.as_secs(), Relaxed);
    }

    /// Sets how many entries may be learned in all (those already learned stay).
    pub fn set_max_macs(&self, max: u32) {
        self.max_macs.store(max, Relaxed);
    }

    /// Removes the entries `keep` refuses; returns how many.
    fn remove(&self, keep: impl FnMut(&u64, &mut FdbEntry) -> bool) -> usize {
        let mut t = self.write();
        let before = t.map.len();
        t.map.retain(keep);
        let removed = before - t.map.len();
        if removed > 0 {
            t.recount();
            self.bump();
        }
        removed
    }

    /// Removes dynamic entries older than the aging time; returns how many.
    pub fn age(&self) -> usize {
        let max = self.aging.load(Relaxed);
        if max == 0 {
            return 0;
        }
        let now = self.now();
        self.remove(|_, e| e.is_static || now.saturating_sub(e.last_seen.load(Relaxed)) < max)
    }

    /// Removes every static entry of the configuration (before a reload installs the
    /// file's); the OVN chassis' entries stay.
    pub fn clear_static(&self) -> usize {
        self.remove(|_, e| !e.is_static || e.ovn)
    }

    /// Removes the dynamic entries of a port (its link went down, or it moved to another
    /// domain); with `statics`, its static entries too (the port was deleted).
    pub fn flush_port(&self, port: PortId, statics: bool) -> usize {
        self.remove(|_, e| (e.is_static && !statics) || e.dest != Dest::Port(port))
    }

    /// All entries, sorted by domain and MAC.
    pub fn rows(&self) -> Vec<FdbRow> {
        let now = self.now();
        let t = self.read();
        let mut rows: Vec<FdbRow> = t
            .map
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
        self.read().map.len()
    }

    /// True when the FDB has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The FDB read-locked for one burst.
pub struct FdbReader<'a> {
    table: std::sync::RwLockReadGuard<'a, Table>,
    now: u64,
    max_macs: u32,
}

impl FdbReader<'_> {
    /// Where `key` lives, if known.
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<Dest> {
        self.table.map.get(&key).map(|e| e.dest)
    }

    /// Refreshes `key` seen behind `dest`; returns the learn request when the FDB does not
    /// already place it there (new or moved MAC; static entries are never moved).
    #[inline]
    pub fn observe(&self, key: u64, dest: Dest, limit: u32) -> Option<Learn> {
        match self.table.map.get(&key) {
            Some(e) if e.dest == dest || e.is_static => {
                if !e.is_static && e.last_seen.load(Relaxed) != self.now {
                    e.last_seen.store(self.now, Relaxed);
                }
                None
            }
            _ => Some(Learn { key, dest, limit }),
        }
    }

    /// Whether learning `l` stays within the table's and its port's limits, after
    /// `pending` more MACs of the same burst (a frame whose source MAC cannot be learned
    /// is dropped as `mac_limit`).
    #[inline]
    pub fn admits(&self, l: &Learn, pending: usize) -> bool {
        self.table.admits(l, self.max_macs, pending as u32)
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
        let fdb = Fdb::new(Duration::from_secs(300), 100);
        let k = fdb_key(0, &A);
        assert_eq!(fdb.reader().lookup(k), None);
        let l = fdb.reader().observe(k, P1, 10).unwrap();
        fdb.learn(&[l]);
        assert_eq!(fdb.reader().lookup(k), Some(P1));
        assert_eq!(fdb.reader().observe(k, P1, 10), None);
        let l = fdb.reader().observe(k, P2, 10).unwrap();
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
        let fdb = Fdb::new(Duration::from_secs(1), 100);
        fdb.add_static(0, MacAddr(A), Dest::Port(3));
        let k = fdb_key(0, &A);
        assert_eq!(fdb.reader().observe(k, Dest::Port(4), 10), None);
        fdb.learn(&[Learn {
            key: k,
            dest: Dest::Port(4),
            limit: 10,
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
        let fdb = Fdb::new(Duration::from_secs(300), 100);
        let g = fdb.generation();
        fdb.learn(&[Learn {
            key: fdb_key(0, &A),
            dest: P1,
            limit: 10,
        }]);
        assert!(fdb.generation() > g);
        assert_eq!(fdb.flush_port(1, false), 1);
        assert!(fdb.is_empty());
    }

    fn mac(i: u32) -> [u8; 6] {
        let b = i.to_be_bytes();
        [2, 0, b[0], b[1], b[2], b[3]]
    }

    fn learn_on(fdb: &Fdb, port: PortId, i: u32, limit: u32) -> bool {
        let r = fdb.reader();
        let Some(l) = r.observe(fdb_key(0, &mac(i)), Dest::Port(port), limit) else {
            return true;
        };
        let ok = r.admits(&l, 0);
        drop(r);
        fdb.learn(&[l]);
        ok
    }

    /// A port learns at most its limit, the table at most its own; a refused MAC is
    /// not placed (even when learn is asked regardless, as a racing PMD could); moves
    /// need room behind the new port; flushing a port gives its room back.
    #[test]
    fn limits_per_port_and_in_all() {
        let fdb = Fdb::new(Duration::from_secs(300), 5);
        for i in 0..3 {
            assert!(learn_on(&fdb, 1, i, 3));
        }
        assert!(!learn_on(&fdb, 1, 3, 3), "port 1 is full");
        assert_eq!(fdb.port_macs(1), 3);
        assert_eq!(fdb.refused(), 1);
        assert!(learn_on(&fdb, 2, 10, 3));
        assert!(learn_on(&fdb, 2, 11, 3));
        assert!(!learn_on(&fdb, 2, 12, 3), "the table is full (5)");
        assert_eq!(fdb.len(), 5);
        // A known MAC moving to a port with room is fine; to a full one it is not.
        assert!(
            !learn_on(&fdb, 1, 10, 3),
            "port 1 has no room for a moved MAC"
        );
        assert_eq!(
            fdb.reader().lookup(fdb_key(0, &mac(10))),
            Some(Dest::Port(2))
        );
        fdb.flush_port(1, false);
        assert_eq!(fdb.port_macs(1), 0);
        assert!(learn_on(&fdb, 1, 10, 3), "moved after the flush");
        assert_eq!(fdb.port_macs(1), 1);
        assert_eq!(fdb.port_macs(2), 1);
        // Static entries are not counted against anyone.
        fdb.add_static(0, MacAddr(mac(99)), Dest::Port(1));
        assert_eq!(fdb.port_macs(1), 1);
    }

    /// Learning past the token bucket defers the invalidation to the housekeeping tick
    /// instead of flushing every flow cache once per burst; removals never wait.
    #[test]
    fn learning_invalidations_are_rate_limited() {
        let fdb = Fdb::new(Duration::from_secs(300), 100_000);
        let g0 = fdb.generation();
        for i in 0..1000 {
            learn_on(&fdb, 1, i, u32::MAX);
        }
        let bumps = fdb.generation() - g0;
        assert!(
            (u64::from(LEARN_BUMP_BURST)..u64::from(LEARN_BUMP_BURST) + 50).contains(&bumps),
            "1000 learns made {bumps} invalidations"
        );
        assert_eq!(fdb.len(), 1000, "every MAC was learned all the same");
        let g = fdb.generation();
        fdb.flush_pending();
        assert_eq!(fdb.generation(), g + 1, "the deferred invalidation is made");
        fdb.flush_pending();
        assert_eq!(fdb.generation(), g + 1, "and only once");
        fdb.flush_port(1, false);
        assert_eq!(fdb.generation(), g + 2, "a flush invalidates at once");
    }
}
