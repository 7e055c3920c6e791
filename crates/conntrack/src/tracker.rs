//! [`Conntrack`]: the sharded table and Open vSwitch's `ct()` semantics.
//!
//! Connections live in `shards` tables, each behind its own lock; a key's
//! hash picks the shard (high bits) and the bucket (low bits). Both
//! directions of a connection share one canonical key, so any packet costs
//! one hash, one uncontended lock and one probe, on whichever thread it
//! arrives. A conntrack step must write protocol state (TCP windows) per
//! packet, so it locks, as Open vSwitch (a mutex per connection) and Linux
//! (a spinlock per TCP connection) do; the shard locks are held for
//! tens of nanoseconds, and the control plane holds one at a time, for a
//! bounded chunk of slots.
//!
//! The lock is a spin lock that yields the CPU while it waits
//! (`spin::mutex::SpinMutex` with `Yield`): taking it is one compare-and-swap
//! and releasing it one plain store, where a futex mutex pays a second atomic
//! read-modify-write on release (a PMD takes two to four locks per packet, one
//! per conntrack step). Waiting only happens when two threads meet on a shard:
//! the holder keeps it for one step or one bounded sweep chunk.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use spin::mutex::{SpinMutex, SpinMutexGuard};
use spin::relax::Yield;

use crate::conn::{self, Conn};
use crate::key::KeyHasher;
use crate::limits::Limits;
use crate::lookup::Lookup;
use crate::packet::Packet;
use crate::parse::{self, Checksums, ParseError};
use crate::table::{tag, Table};
use crate::tcp::Update;
use crate::timeouts::{LiveTimeouts, Timeouts};
use crate::verdict::{CtAction, CtResult, CtState, InvalidReason, Refused};
use crate::{Config, Error};

/// Largest shard count accepted by [`Conntrack::new`].
pub const MAX_SHARDS: usize = 4096;

/// One shard: its table and its counters (plain integers, written under
/// the shard's lock, summed on read).
#[derive(Debug, Default)]
pub(crate) struct Shard {
    pub table: Table,
    pub counters: Counters,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub created: u64,
    pub expired: u64,
    pub flushed: u64,
    pub reopened: u64,
    pub invalid: [u64; InvalidReason::COUNT],
    pub table_full: u64,
    pub zone_full: u64,
}

/// A shard's lock on its own pair of cache lines, so that two PMDs taking
/// neighbouring shards do not share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct ShardCell(SpinMutex<Shard, Yield>);

/// A packet's lookup, made once for all the zones it passes
/// ([`Conntrack::execute_prepared`]): its tuple in canonical order, or why the
/// packet is invalid before any table is read.
#[derive(Debug, Clone, Copy)]
pub struct Prepared(Result<Lookup, InvalidReason>);

impl Prepared {
    /// The lookup of `pkt`.
    #[inline]
    pub fn of(pkt: &Packet) -> Prepared {
        Prepared(Lookup::of(pkt, 0))
    }
}

/// A userspace connection tracker shared by every PMD thread
/// (`Send + Sync`; wrap it in an `Arc`).
pub struct Conntrack {
    pub(crate) shards: Box<[ShardCell]>,
    shard_shift: u32,
    hasher: KeyHasher,
    pub(crate) timeouts: LiveTimeouts,
    pub(crate) limits: Limits,
    tcp_liberal: AtomicBool,
    tcp_loose: AtomicBool,
    /// Invalid packets refused before any shard is known (fragments,
    /// malformed input): rare, so shared atomics.
    early_invalid: [AtomicU64; InvalidReason::COUNT],
    pub(crate) sweep_cursor: Mutex<(usize, usize)>,
}

/// A summary: the table itself is read with [`Conntrack::dump`].
impl core::fmt::Debug for Conntrack {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Conntrack")
            .field("connections", &self.limits.total())
            .field("max_connections", &self.limits.max_connections())
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

impl Conntrack {
    /// A tracker configured by `config`.
    ///
    /// Errors: [`Error::ShardCount`] unless `config.shards` is a power of
    /// two in `1..=`[`MAX_SHARDS`].
    pub fn new(config: Config) -> Result<Conntrack, Error> {
        let n = config.shards;
        if !n.is_power_of_two() || n > MAX_SHARDS {
            return Err(Error::ShardCount(n));
        }
        Ok(Conntrack {
            shards: (0..n).map(|_| ShardCell::default()).collect(),
            shard_shift: 64 - n.trailing_zeros(),
            hasher: KeyHasher::random(),
            timeouts: LiveTimeouts::new(&config.timeouts),
            limits: Limits::new(config.max_connections, config.default_zone_limit),
            tcp_liberal: AtomicBool::new(config.tcp_liberal),
            tcp_loose: AtomicBool::new(config.tcp_loose),
            early_invalid: Default::default(),
            sweep_cursor: Mutex::new((0, 0)),
        })
    }

    pub(crate) fn lock_shard(&self, i: usize) -> SpinMutexGuard<'_, Shard> {
        self.shards[i].0.lock()
    }

    pub(crate) fn hash_key(&self, k: &crate::key::Key) -> u64 {
        self.hasher.hash(k)
    }

    pub(crate) fn shard_index(&self, h: u64) -> usize {
        // `checked_shr`: one shard means a shift of 64.
        h.checked_shr(self.shard_shift).unwrap_or(0) as usize
    }

    /// One conntrack step on `pkt` at `now_ms` (milliseconds of the
    /// caller's monotonic clock): Open vSwitch's `ct()` action.
    ///
    /// - A packet of a connection (either direction) advances its state:
    ///   `est` once the protocol says both sides spoke (`rpl` in the reply
    ///   direction), `new` while its opener repeats, `inv` when the
    ///   protocol refuses it (TCP flags or window).
    /// - An ICMP error embedding a connection's packet is `rel` (`rpl` too
    ///   when it travels in the reply direction) and changes no state.
    /// - A packet of no connection is `new` if it may open one (TCP SYN,
    ///   UDP, ICMP echo request, other protocols), `inv` otherwise. With
    ///   `commit` it creates the connection unless a limit refuses it
    ///   ([`CtResult::refused`]).
    /// - With `commit`, the mark and label writes apply to the connection.
    ///
    /// No allocation unless the commit grows a table.
    pub fn execute(&self, pkt: &Packet, act: &CtAction, now_ms: u64) -> CtResult {
        self.execute_prepared(pkt, &Prepared::of(pkt), act, now_ms)
    }

    /// [`execute`](Self::execute) with the packet's lookup made beforehand
    /// ([`Prepared::of`]), for a packet that passes several zones: the tuple is
    /// read and put in canonical order once, and each zone only hashes it.
    /// `prep` must be `pkt`'s.
    pub fn execute_prepared(
        &self,
        pkt: &Packet,
        prep: &Prepared,
        act: &CtAction,
        now_ms: u64,
    ) -> CtResult {
        let mut lk = match prep.0 {
            Ok(lk) => lk,
            Err(r) => return self.early(act.zone, r),
        };
        lk.key.zone = act.zone;
        let h = self.hasher.hash(&lk.key);
        let mut shard = self.lock_shard(self.shard_index(h));
        self.step(&mut shard, pkt, &lk, tag(h), act, now_ms)
    }

    /// [`execute`](Self::execute) for a packet that already went through
    /// `prev` in an earlier step of the same pipeline pass. In the same
    /// zone, as Open vSwitch's cached-connection path does, the protocol
    /// state does not run again: an invalid packet stays invalid, and a
    /// packet with a connection only has the mark and label read (and, with
    /// `commit`, written). This is OVN's `ct_next` then `ct_commit` in one
    /// zone. In another zone, or without a connection, it is `execute`.
    pub fn execute_next(
        &self,
        pkt: &Packet,
        act: &CtAction,
        now_ms: u64,
        prev: &CtResult,
    ) -> CtResult {
        self.execute_next_prepared(pkt, &Prepared::of(pkt), act, now_ms, prev)
    }

    /// [`execute_next`](Self::execute_next) with the packet's lookup made
    /// beforehand, as [`execute_prepared`](Self::execute_prepared).
    pub fn execute_next_prepared(
        &self,
        pkt: &Packet,
        prep: &Prepared,
        act: &CtAction,
        now_ms: u64,
        prev: &CtResult,
    ) -> CtResult {
        if prev.zone != act.zone {
            return self.execute_prepared(pkt, prep, act, now_ms);
        }
        if prev.state.contains(CtState::INV) {
            return *prev;
        }
        if !prev.has_conn {
            return self.execute_prepared(pkt, prep, act, now_ms);
        }
        let Ok(mut lk) = prep.0 else {
            return *prev;
        };
        lk.key.zone = act.zone;
        let h = self.hasher.hash(&lk.key);
        let mut shard = self.lock_shard(self.shard_index(h));
        let Some(i) = shard.table.find(tag(h), &lk.key) else {
            // Removed in between (flush): a fresh step.
            drop(shard);
            return self.execute_prepared(pkt, prep, act, now_ms);
        };
        let c = shard.table.get_mut(i);
        if act.commit {
            apply_writes(c, act);
        }
        CtResult {
            mark: c.mark,
            label: c.label(),
            ..*prev
        }
    }

    /// Parses `l3` ([`parse::parse`]) and runs [`execute`](Self::execute);
    /// a packet that does not parse is `inv`, counted as
    /// [`InvalidReason::Malformed`] (or `Checksum`).
    pub fn execute_l3(
        &self,
        l3: &[u8],
        checksums: Checksums,
        act: &CtAction,
        now_ms: u64,
    ) -> CtResult {
        match parse::parse(l3, checksums) {
            Ok(pkt) => self.execute(&pkt, act, now_ms),
            Err(ParseError::Checksum) => self.early(act.zone, InvalidReason::Checksum),
            Err(_) => self.early(act.zone, InvalidReason::Malformed),
        }
    }

    fn early(&self, zone: u16, r: InvalidReason) -> CtResult {
        self.early_invalid[r.index()].fetch_add(1, Relaxed);
        CtResult::of_invalid(zone, r)
    }

    /// The step under the shard lock.
    fn step(
        &self,
        s: &mut Shard,
        pkt: &Packet,
        lk: &Lookup,
        tag: u32,
        act: &CtAction,
        now_ms: u64,
    ) -> CtResult {
        if let Some(i) = self.find_live(s, tag, lk, now_ms) {
            if let Some(r) = self.on_conn(s, i, pkt, lk, act, now_ms) {
                return r;
            }
        }
        self.on_miss(s, pkt, lk, tag, act, now_ms)
    }

    /// The slot of `lk`'s connection; an expired one is removed on the way
    /// (lazy expiry) and not found.
    fn find_live(&self, s: &mut Shard, tag: u32, lk: &Lookup, now_ms: u64) -> Option<usize> {
        let i = s.table.find(tag, &lk.key)?;
        if !s.table.get(i).expired(now_ms) {
            return Some(i);
        }
        self.remove_at(s, i);
        s.counters.expired += 1;
        None
    }

    pub(crate) fn remove_at(&self, s: &mut Shard, i: usize) -> Conn {
        let c = s.table.remove(i);
        self.limits.release(c.key.zone);
        c
    }

    /// A packet of an existing connection; `None` when a SYN reopens a
    /// closed TCP connection (removed here, then handled as a miss).
    fn on_conn(
        &self,
        s: &mut Shard,
        i: usize,
        pkt: &Packet,
        lk: &Lookup,
        act: &CtAction,
        now_ms: u64,
    ) -> Option<CtResult> {
        let liberal = self.tcp_liberal.load(Relaxed);
        let c = s.table.get_mut(i);
        let reply = lk.flipped != c.flipped;
        let rpl = if reply { CtState::RPL } else { CtState(0) };
        let state = if lk.related {
            CtState::REL | rpl
        } else {
            match c.update(pkt, reply, liberal, &self.timeouts, now_ms) {
                Update::Valid => CtState::EST | rpl,
                Update::ValidNew => CtState::NEW,
                Update::Invalid(r) => {
                    let out = CtResult {
                        mark: c.mark,
                        label: c.label(),
                        ..CtResult::of_invalid(act.zone, r)
                    };
                    s.counters.invalid[r.index()] += 1;
                    return Some(out);
                }
                Update::Reopen => {
                    self.remove_at(s, i);
                    s.counters.reopened += 1;
                    return None;
                }
            }
        };
        if act.commit {
            apply_writes(c, act);
        }
        Some(CtResult {
            mark: c.mark,
            label: c.label(),
            has_conn: true,
            ..CtResult::new(act.zone, state)
        })
    }

    /// A packet of no connection: `inv`, or `new` (created on commit).
    fn on_miss(
        &self,
        s: &mut Shard,
        pkt: &Packet,
        lk: &Lookup,
        tag: u32,
        act: &CtAction,
        now_ms: u64,
    ) -> CtResult {
        let opens = if lk.related {
            Err(InvalidReason::IcmpUnrelated)
        } else {
            conn::may_open(pkt, lk.icmp_opener, self.tcp_loose.load(Relaxed))
        };
        if let Err(r) = opens {
            s.counters.invalid[r.index()] += 1;
            return CtResult::of_invalid(act.zone, r);
        }
        let mut out = CtResult::new(act.zone, CtState::NEW);
        if !act.commit {
            return out;
        }
        if let Err(refused) = self.limits.admit(act.zone) {
            match refused {
                Refused::TableFull => s.counters.table_full += 1,
                Refused::ZoneFull => s.counters.zone_full += 1,
            }
            out.refused = Some(refused);
            return out;
        }
        let mut c = Conn::new(pkt, lk.key, lk.flipped, &self.timeouts, now_ms);
        apply_writes(&mut c, act);
        s.table.insert(tag, c);
        s.counters.created += 1;
        CtResult {
            mark: c.mark,
            label: c.label(),
            has_conn: true,
            ..out
        }
    }
}

fn apply_writes(c: &mut Conn, act: &CtAction) {
    if let Some(m) = act.mark {
        c.mark = m.apply(c.mark);
    }
    if let Some(l) = act.label {
        c.set_label(l.apply(c.label()));
    }
}

/// Settings.
impl Conntrack {
    /// Sets the global maximum of connections (existing ones stay).
    pub fn set_max_connections(&self, n: u32) {
        self.limits.set_max_connections(n);
    }

    /// The global maximum of connections.
    pub fn max_connections(&self) -> u32 {
        self.limits.max_connections()
    }

    /// Sets `zone`'s maximum; `None` makes it follow the default.
    pub fn set_zone_limit(&self, zone: u16, limit: Option<u32>) {
        self.limits.set_zone_limit(zone, limit);
    }

    /// Sets the maximum of zones without their own; `None`: unlimited.
    pub fn set_default_zone_limit(&self, limit: Option<u32>) {
        self.limits.set_default_zone_limit(limit);
    }

    /// The default zone maximum (`None`: unlimited).
    pub fn default_zone_limit(&self) -> Option<u32> {
        self.limits.default_zone_limit()
    }

    /// `zone`'s effective maximum (`None`: unlimited).
    pub fn zone_limit(&self, zone: u16) -> Option<u32> {
        self.limits.zone_limit(zone)
    }

    /// Replaces the timeouts; each connection takes them at its next update.
    pub fn set_timeouts(&self, t: &Timeouts) {
        self.timeouts.set(t);
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts.get()
    }

    /// Turns TCP window checking off (`true`) or on.
    pub fn set_tcp_liberal(&self, liberal: bool) {
        self.tcp_liberal.store(liberal, Relaxed);
    }

    pub(crate) fn early_invalid(&self) -> [u64; InvalidReason::COUNT] {
        core::array::from_fn(|i| self.early_invalid[i].load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Conntrack>();
    }

    /// One lookup prepared for two zones gives what a fresh lookup in each gives:
    /// the zones stay apart, and a reply finds its connection.
    #[test]
    fn prepared_lookup_serves_every_zone() {
        use core::net::{IpAddr, Ipv4Addr};
        let ct = Conntrack::new(Config::default()).unwrap();
        let (a, b) = (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        );
        let udp = |src, dst, sp, dp| Packet {
            src,
            dst,
            fragment: false,
            l4: crate::L4::Udp {
                src_port: sp,
                dst_port: dp,
            },
        };
        let out = udp(a, b, 4000, 53);
        let prep = Prepared::of(&out);
        let r1 = ct.execute_prepared(&out, &prep, &CtAction::commit(1), 0);
        assert_eq!(r1.state, CtState::TRK | CtState::NEW);
        // Zone 2 has no connection yet, whatever zone 1 holds.
        let r2 = ct.execute_next_prepared(&out, &prep, &CtAction::lookup(2), 0, &r1);
        assert_eq!((r2.zone, r2.state), (2, CtState::TRK | CtState::NEW));
        assert_eq!(ct.len(), 1);
        // The reply, prepared once, is established in zone 1 and new in zone 2.
        let back = udp(b, a, 53, 4000);
        let prep = Prepared::of(&back);
        let r = ct.execute_prepared(&back, &prep, &CtAction::lookup(1), 1);
        assert_eq!(r.state, CtState::TRK | CtState::EST | CtState::RPL);
        assert_eq!(r, ct.execute(&back, &CtAction::lookup(1), 1));
        let r = ct.execute_prepared(&back, &prep, &CtAction::lookup(2), 1);
        assert_eq!(r.state, CtState::TRK | CtState::NEW);
    }

    #[test]
    fn shard_counts_are_checked() {
        for bad in [0, 3, 8192] {
            let cfg = Config {
                shards: bad,
                ..Config::default()
            };
            assert!(matches!(Conntrack::new(cfg), Err(Error::ShardCount(n)) if n == bad));
        }
        let one = Conntrack::new(Config {
            shards: 1,
            ..Config::default()
        })
        .unwrap();
        assert_eq!(one.shard_index(u64::MAX), 0);
    }
}
