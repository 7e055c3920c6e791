//! One shard of the tracker: a table whose entries are connections, each
//! under its canonical key, and NAT aliases, each under a translated reply
//! tuple's key (see `nat.rs`), with NAT'd connections' translations beside
//! them; and the shard's counters.
//!
//! Connections and aliases share the table, as Linux and Open vSwitch hash
//! both directions of a connection into one table: a lookup that finds
//! nothing (every new connection's first) reads one index line, not one in
//! each of two tables, and a new translation checks that its reply tuple is
//! free, of connections and aliases alike, with one probe. A key is in the
//! table at most once, as a connection or as an alias: a connection is
//! created only after its key was found free, an alias only under a key no
//! connection or alias holds, both under the shard's lock.

use spin::mutex::{SpinMutex, SpinMutexGuard};
use spin::relax::Yield;

use crate::conn::Conn;
use crate::key::Key;
use crate::nat::{Alias, NatInfo};
use crate::prefetch::Geometry;
use crate::table::{Entry, Table};
use crate::verdict::InvalidReason;

/// One shard: its table and its counters (plain integers, written under
/// the shard's lock, summed on read).
#[derive(Debug)]
pub(crate) struct Shard {
    /// Connections and aliases; each NAT'd connection's translation beside it.
    pub table: Table<Slot, NatInfo>,
    pub counters: Counters,
}

/// A locked shard.
pub(crate) type Guard<'a> = SpinMutexGuard<'a, Shard>;

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub created: u64,
    pub expired: u64,
    pub flushed: u64,
    pub reopened: u64,
    pub invalid: [u64; InvalidReason::COUNT],
    pub table_full: u64,
    pub zone_full: u64,
    pub nat_exhausted: u64,
}

/// A shard's lock on its own pair of cache lines, so that two PMDs taking
/// neighbouring shards do not share a line, and where its table is for
/// prefetches made without the lock.
#[derive(Debug)]
#[repr(C, align(128))]
pub(crate) struct ShardCell {
    // The lock first, with the table's header beside it: the geometry is read only
    // by prefetches and written only when the table moved.
    lock: SpinMutex<Shard, Yield>,
    pub geometry: Geometry,
}

impl ShardCell {
    pub fn new() -> ShardCell {
        ShardCell {
            lock: SpinMutex::new(Shard {
                table: Table::default(),
                counters: Counters::default(),
            }),
            geometry: Geometry::default(),
        }
    }

    #[inline]
    pub fn lock(&self) -> Guard<'_> {
        self.lock.lock()
    }

    #[inline]
    pub fn try_lock(&self) -> Option<Guard<'_>> {
        self.lock.try_lock()
    }

    /// Publishes where `s`'s (this shard's, locked) table is if its arrays moved:
    /// after whatever may grow, shrink or add to them (an insert, a side value, a
    /// shrink).
    #[inline]
    pub fn published(&self, s: &mut Shard) {
        if s.table.take_moved() {
            self.geometry.publish(&s.table);
        }
    }
}

/// A table entry (96 bytes, as a connection alone: the alias fits
/// beside the connection's niche).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slot {
    Conn(Conn),
    /// An alias, under its own key.
    Alias(Key, Alias),
}

impl Entry for Slot {
    #[inline]
    fn key(&self) -> &Key {
        match self {
            Slot::Conn(c) => &c.key,
            Slot::Alias(k, _) => k,
        }
    }
}

/// What a key names in a shard.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Found {
    /// A connection, at this position.
    Conn(usize),
    /// An alias: the connection is in the shard of its primary key.
    Alias(Alias),
    Nothing,
}

impl Shard {
    /// What `key` (of tag `t`) names here.
    #[inline]
    pub fn find(&self, t: u32, key: &Key) -> Found {
        match self.table.find(t, key) {
            None => Found::Nothing,
            Some(i) => match self.table.get(i) {
                Slot::Conn(_) => Found::Conn(i),
                Slot::Alias(_, a) => Found::Alias(*a),
            },
        }
    }

    /// The connection at position `i`, which a [`Found::Conn`] named.
    #[inline]
    pub fn conn(&self, i: usize) -> &Conn {
        match self.table.get(i) {
            Slot::Conn(c) => c,
            Slot::Alias(..) => unreachable!("position {i} holds an alias"),
        }
    }

    /// The connection at position `i`, which a [`Found::Conn`] named.
    #[inline]
    pub fn conn_mut(&mut self, i: usize) -> &mut Conn {
        match self.table.get_mut(i) {
            Slot::Conn(c) => c,
            Slot::Alias(..) => unreachable!("position {i} holds an alias"),
        }
    }

    /// The connection at position `i` (below the table's `len`), `None` for
    /// an alias.
    #[inline]
    pub fn conn_at(&self, i: usize) -> Option<&Conn> {
        match self.table.get(i) {
            Slot::Conn(c) => Some(c),
            Slot::Alias(..) => None,
        }
    }

    /// `at`, if the connection under `key` is there.
    #[inline]
    pub fn conn_hinted(&self, at: usize, key: &Key) -> Option<usize> {
        let here =
            at < self.table.len() && matches!(self.table.get(at), Slot::Conn(c) if c.key == *key);
        here.then_some(at)
    }

    /// The translation of the NAT'd connection at position `i`.
    #[inline]
    pub fn nat_info(&self, i: usize) -> &NatInfo {
        debug_assert!(self.conn(i).nat);
        self.table.side(i)
    }

    /// Inserts `alias` under `key` (of tag `t`) unless a connection or an
    /// alias holds that key; whether it did.
    pub fn claim_alias(&mut self, t: u32, key: &Key, alias: Alias) -> bool {
        if self.table.find(t, key).is_some() {
            return false;
        }
        self.table.insert(t, Slot::Alias(*key, alias));
        true
    }

    /// Removes `key`'s alias if it still has `serial`.
    pub fn remove_alias(&mut self, t: u32, key: &Key, serial: u32) {
        if let Some(i) = self.table.find(t, key) {
            if matches!(self.table.get(i), Slot::Alias(_, a) if a.serial == serial) {
                self.table.remove(i);
            }
        }
    }

    /// How many aliases the shard holds.
    #[cfg(test)]
    pub fn aliases(&self) -> usize {
        (0..self.table.len())
            .filter(|&i| self.conn_at(i).is_none())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_a_connection_s_96_bytes() {
        assert_eq!(core::mem::size_of::<Conn>(), 96);
        assert_eq!(core::mem::size_of::<Slot>(), 96);
    }
}
