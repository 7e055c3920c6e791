//! Removing connections without stopping the PMDs: the incremental
//! [`sweep`](Conntrack::sweep) of expired ones, and flushes.
//!
//! Expiry is lazy on lookup (an expired connection is removed when a
//! packet finds it) and incremental in the background: `sweep` walks the
//! shards' entries from a cursor, at most [`SWEEP_CHUNK`] entries per lock
//! hold, so a PMD never waits behind more than one chunk (a few
//! microseconds). Open vSwitch's clean thread does the same with its
//! expiration lists and a per-call cap.

use crate::key::Oriented;
use crate::shard::{Found, Shard};
use crate::table::tag;
use crate::{Conntrack, Tuple};

/// Entries examined per shard-lock hold by [`Conntrack::sweep`].
pub const SWEEP_CHUNK: usize = 1024;

/// What one [`Conntrack::sweep`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sweep {
    /// Entries examined (aliases included).
    pub scanned: usize,
    /// Connections removed because they expired.
    pub expired: usize,
    /// The cursor went past the last shard: every connection that had
    /// expired when this round began is gone.
    pub round_done: bool,
}

impl Conntrack {
    /// Removes expired connections, examining about `budget` entries from
    /// where the last call stopped, and stopping early at the end of a
    /// round (past the last shard). Call it from a control thread, e.g.
    /// every 100 ms with a budget that covers the table every few seconds.
    pub fn sweep(&self, now_ms: u64, budget: usize) -> Sweep {
        let mut out = Sweep::default();
        self.drain_orphans();
        let mut cursor = self.sweep_cursor.lock().unwrap_or_else(|e| e.into_inner());
        let (mut shard, mut pos) = *cursor;
        while out.scanned < budget {
            let chunk = SWEEP_CHUNK.min(budget - out.scanned);
            let mut s = self.lock_shard(shard % self.shards.len());
            // The table may have shrunk (a flush) since the cursor was left.
            pos = pos.min(s.table.len());
            let [end, examined, expired] = self.sweep_chunk(&mut s, pos, chunk, now_ms);
            out.scanned += examined;
            out.expired += expired;
            if end >= s.table.len() {
                s.table.maybe_shrink();
                self.shards[shard % self.shards.len()].published(&mut s);
                drop(s);
                shard += 1;
                pos = 0;
                // An empty shard costs a lock: count it as one entry.
                out.scanned += 1;
                if shard >= self.shards.len() {
                    shard = 0;
                    out.round_done = true;
                    break;
                }
            } else {
                pos = end;
            }
        }
        *cursor = (shard, pos);
        out
    }

    /// Sweeps every shard from the first, until the round is done: every
    /// connection expired at `now_ms` is gone. For tests and shutdown.
    pub fn sweep_all(&self, now_ms: u64) -> usize {
        *self.sweep_cursor.lock().unwrap_or_else(|e| e.into_inner()) = (0, 0);
        let mut expired = 0;
        loop {
            let s = self.sweep(now_ms, usize::MAX / 2);
            expired += s.expired;
            if s.round_done {
                return expired;
            }
        }
    }

    /// Examines `n` entries of one shard from position `pos` (fewer at its
    /// end); returns where it stopped, how many it examined and how many it
    /// removed.
    fn sweep_chunk(&self, s: &mut Shard, pos: usize, n: usize, now_ms: u64) -> [usize; 3] {
        let (mut i, mut examined, mut expired) = (pos, 0, 0);
        while examined < n && i < s.table.len() {
            examined += 1;
            if s.conn_at(i).is_some_and(|c| c.expired(now_ms)) {
                // The last entry, moved into `i`, is examined next.
                self.remove_in_scan(s, i);
                expired += 1;
            } else {
                i += 1;
            }
        }
        s.counters.expired += expired as u64;
        [i, examined, expired]
    }

    /// Removes every connection (`zone` `None`) or those of one zone;
    /// returns how many. One shard is locked at a time.
    pub fn flush(&self, zone: Option<u16>) -> usize {
        let mut n = 0;
        for i in 0..self.shards.len() {
            let mut s = self.lock_shard(i);
            let mut removed = 0;
            let mut j = 0;
            while j < s.table.len() {
                // An alias goes with its connection (which may be created in
                // a shard this flush has passed: its alias stays).
                let hit = s
                    .conn_at(j)
                    .is_some_and(|c| zone.is_none_or(|z| c.key.zone == z));
                if hit {
                    self.remove_in_scan(&mut s, j);
                    removed += 1;
                } else {
                    j += 1;
                }
            }
            s.table.maybe_shrink();
            self.shards[i].published(&mut s);
            s.counters.flushed += removed as u64;
            n += removed;
        }
        self.drain_orphans();
        n
    }

    /// Removes the connection of `tuple` (either direction, original or
    /// translated) in `zone`; whether there was one.
    pub fn flush_tuple(&self, zone: u16, tuple: &Tuple) -> bool {
        let Some(o) = Oriented::from_tuple(tuple) else {
            return false;
        };
        let (key, _) = o.canonical(zone);
        let h = self.hash_key(&key);
        let mut s = self.lock_shard(self.shard_index(h));
        let alias = match s.find(tag(h), &key) {
            Found::Conn(i) => {
                self.remove_at(&mut s, i);
                s.counters.flushed += 1;
                return true;
            }
            Found::Alias(a) => Some(a),
            Found::Nothing => None,
        };
        drop(s);
        // `now` 0: a primary found this way is removed, expired or not.
        match alias.and_then(|a| self.primary_of(&a, 0)) {
            Some((mut p, i, _)) => {
                self.remove_at(&mut p, i);
                p.counters.flushed += 1;
                true
            }
            None => false,
        }
    }
}
