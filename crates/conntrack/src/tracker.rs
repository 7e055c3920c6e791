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
//! bounded chunk of entries.
//!
//! The lock is a spin lock that yields the CPU while it waits
//! (`spin::mutex::SpinMutex` with `Yield`): taking it is one compare-and-swap
//! and releasing it one plain store, where a futex mutex pays a second atomic
//! read-modify-write on release (a PMD takes two to four locks per packet, one
//! per conntrack step). Waiting only happens when two threads meet on a shard:
//! the holder keeps it for one step or one bounded sweep chunk.
//!
//! NAT adds a second key per connection (the alias of its translated reply
//! tuple), which may hash to another shard. No thread ever waits for a
//! shard lock while it holds one, so two PMDs cannot deadlock: a packet
//! found through an alias releases that shard before it locks the
//! connection's (and checks there, by serial, that the connection still
//! owns the alias); a commit setting up a translation holds its own shard
//! and only `try_lock`s the candidate alias's, stepping again from scratch
//! when it is busy; a removal `try_lock`s the alias's shard and otherwise
//! queues the alias as an orphan, removed by the next sweep, flush or
//! retry.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::conn::{self, Conn};
use crate::key::{Key, KeyHasher};
use crate::limits::Limits;
use crate::lookup::Lookup;
use crate::nat::{self, Alias, NatInfo};
use crate::packet::Packet;
use crate::parse::{self, Checksums, ParseError};
use crate::shard::{Found, Guard, Shard, ShardCell, Slot};
use crate::table::tag;
use crate::tcp::Update;
use crate::timeouts::{LiveTimeouts, Timeouts};
use crate::verdict::{
    CtAction, CtResult, CtState, InvalidReason, Nat, NatRange, NatResult, Refused,
};
use crate::{Config, Error};

/// Largest shard count accepted by [`Conntrack::new`].
pub const MAX_SHARDS: usize = 4096;

/// How a packet found its connection: by the connection's own key, or by
/// the alias of its translated reply tuple (with the translation the alias
/// was checked against, so that it is not looked up twice).
#[derive(Debug, Clone, Copy)]
enum Via<'a> {
    Key,
    Alias { reply_swap: bool, info: &'a NatInfo },
}

/// Why no translation was set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoTranslation {
    /// No free tuple in the range.
    Exhausted,
    /// A candidate's shard was locked by another thread: step again.
    Busy,
}

/// A packet's lookup, made once for all the zones it passes
/// ([`Conntrack::execute_prepared`]): its tuple in canonical order, or why the
/// packet is invalid before any table is read.
#[derive(Debug, Clone, Copy)]
pub struct Prepared(Result<Lookup, InvalidReason>);

impl Prepared {
    /// The lookup of `pkt`.
    ///
    /// Not inlined, so that the lookup is written where the caller keeps it: inlined,
    /// it was built apart and copied whole right after, which the CPU cannot serve from
    /// its store buffer (a stall on every packet's first step).
    #[inline(never)]
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
    /// The last [`NatInfo::serial`] given.
    nat_serial: AtomicU32,
    /// Aliases (key, serial) whose connection was removed while their
    /// shard was locked by another thread; removed by the next sweep,
    /// flush or NAT retry. A leaf lock: never held while taking a shard's.
    orphans: Mutex<Vec<(Key, u32)>>,
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
        let hasher = KeyHasher::random();
        Ok(Conntrack {
            shards: (0..n).map(|_| ShardCell::new()).collect(),
            shard_shift: 64 - n.trailing_zeros(),
            hasher,
            timeouts: LiveTimeouts::new(&config.timeouts),
            limits: Limits::new(config.max_connections, config.default_zone_limit),
            tcp_liberal: AtomicBool::new(config.tcp_liberal),
            tcp_loose: AtomicBool::new(config.tcp_loose),
            early_invalid: Default::default(),
            sweep_cursor: Mutex::new((0, 0)),
            nat_serial: AtomicU32::new(0),
            orphans: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn lock_shard(&self, i: usize) -> Guard<'_> {
        self.shards[i].lock()
    }

    pub(crate) fn hash_key(&self, k: &crate::key::Key) -> u64 {
        self.hasher.hash(k)
    }

    pub(crate) fn shard_index(&self, h: u64) -> usize {
        // `checked_shr`: one shard means a shift of 64.
        h.checked_shr(self.shard_shift).unwrap_or(0) as usize
    }

    /// Starts loading into the cache what a step of `prep` in `zone` reads
    /// first (the index line at its key's home slot), without taking a lock
    /// or waiting for the load. A caller
    /// with a burst prefetches every packet's step before running the first,
    /// so their cache misses overlap (VPP's bucket prefetch, DPDK's
    /// `rte_hash_lookup_bulk`); with a table larger than the caches, a step
    /// otherwise waits for memory two or three times in a row. Changes nothing
    /// a step answers; an invalid packet's lookup prefetches nothing.
    ///
    /// ```
    /// use std::net::Ipv4Addr;
    /// use conntrack::{Config, Conntrack, CtAction, Packet, Prepared, L4};
    ///
    /// let ct = Conntrack::new(Config::default()).unwrap();
    /// let burst: Vec<Packet> = (0..32u16)
    ///     .map(|i| Packet {
    ///         src: Ipv4Addr::new(10, 0, 0, 1).into(),
    ///         dst: Ipv4Addr::new(192, 0, 2, 1).into(),
    ///         fragment: false,
    ///         l4: L4::Udp { src_port: 5000 + i, dst_port: 53 },
    ///     })
    ///     .collect();
    /// let preps: Vec<Prepared> = burst.iter().map(Prepared::of).collect();
    /// let act = CtAction::commit(1);
    /// for prep in &preps {
    ///     ct.prefetch(prep, act.zone);
    /// }
    /// for (pkt, prep) in burst.iter().zip(&preps) {
    ///     ct.execute_prepared(pkt, prep, &act, 0);
    /// }
    /// assert_eq!(ct.len(), 32);
    /// ```
    #[inline]
    pub fn prefetch(&self, prep: &Prepared, zone: u16) {
        if let Ok(lk) = &prep.0 {
            let h = self.hasher.hash_in_zone(&lk.key, zone);
            self.shards[self.shard_index(h)].geometry.prefetch(tag(h));
        }
    }

    /// The second stage of [`prefetch`](Self::prefetch), for a caller that
    /// made the first for every packet of its burst: reads the index line the
    /// first loaded (under the shard's lock, if free at once) and starts
    /// loading the entries whose tags match, with their translations. A step
    /// then finds its entry in the cache where it would otherwise wait for
    /// the index line and then for the entry, one after the other (DPDK's
    /// `rte_hash_lookup_bulk` stages its bucket and key loads alike). Changes
    /// nothing a step answers.
    #[inline]
    pub fn prefetch_entry(&self, prep: &Prepared, zone: u16) {
        if let Ok(lk) = &prep.0 {
            let h = self.hasher.hash_in_zone(&lk.key, zone);
            if let Some(s) = self.shards[self.shard_index(h)].try_lock() {
                s.table.prefetch_entries(tag(h));
            }
        }
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
    /// - NAT ([`CtAction::nat`], see the crate docs): a commit creating a
    ///   connection with [`Nat::Src`]/[`Nat::Dst`] sets up its
    ///   translation (or refuses, [`Refused::NatExhausted`]); a step with
    ///   any `nat` translates a packet of a NAT'd connection that arrives
    ///   untranslated (`snat`/`dnat`). The packet's endpoints after the
    ///   translation come from [`execute_nat`](Self::execute_nat), which a
    ///   caller that rewrites packets uses instead.
    ///
    /// No allocation unless the commit grows a table or sets up a
    /// translation.
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
        self.run(pkt, prep, act, now_ms, &mut None)
    }

    /// [`execute_prepared`](Self::execute_prepared), and what NAT did: `nat`
    /// is set to the packet's [`NatResult`] when its connection has a
    /// translation (with or without `nat` in `act`: the packet's endpoints
    /// after the step, translated or not, and the connection's original
    /// tuple, as Open vSwitch's `nat_packet`/`un_nat_packet` rewrite the
    /// packet and `ct_orig_tuple` records), and to `None` otherwise.
    ///
    /// A step on a connection without NAT writes nothing else into `nat`:
    /// the [`CtResult`] stays small and a plain hit pays for NAT only the
    /// test of the connection's flag.
    ///
    /// ```
    /// use std::net::Ipv4Addr;
    /// use conntrack::{Config, Conntrack, CtAction, CtState, Nat, NatRange, Packet, Prepared, L4};
    ///
    /// let ct = Conntrack::new(Config::default()).unwrap();
    /// let x = Ipv4Addr::new(203, 0, 113, 1).into();
    /// let snat = Nat::Src(NatRange { min: x, max: x, ports: None });
    /// let out = Packet {
    ///     src: Ipv4Addr::new(10, 0, 0, 1).into(),
    ///     dst: Ipv4Addr::new(192, 0, 2, 1).into(),
    ///     fragment: false,
    ///     l4: L4::Udp { src_port: 5000, dst_port: 53 },
    /// };
    /// let mut nat = None;
    /// let act = CtAction::commit(1).with_nat(snat);
    /// let r = ct.execute_nat(&out, &Prepared::of(&out), &act, 0, &mut nat);
    /// assert_eq!(r.state, CtState::TRK | CtState::NEW | CtState::SNAT);
    /// let n = nat.unwrap();
    /// assert_eq!((n.packet.src, n.packet.src_port), (x, 5000)); // written into the packet
    /// assert_eq!(n.original.src, out.src); // `ct_nw_src`
    /// ```
    pub fn execute_nat(
        &self,
        pkt: &Packet,
        prep: &Prepared,
        act: &CtAction,
        now_ms: u64,
        nat: &mut Option<NatResult>,
    ) -> CtResult {
        *nat = None;
        self.run(pkt, prep, act, now_ms, nat)
    }

    /// The step of [`execute_nat`](Self::execute_nat), `nat` written only
    /// for a NAT'd connection.
    #[inline(always)]
    fn run(
        &self,
        pkt: &Packet,
        prep: &Prepared,
        act: &CtAction,
        now_ms: u64,
        nat: &mut Option<NatResult>,
    ) -> CtResult {
        let lk0 = match &prep.0 {
            Ok(lk) => lk,
            Err(r) => return self.early(act.zone, *r),
        };
        if let Some(r) = self.in_empty_zone(pkt, lk0, act) {
            return r;
        }
        let h = self.hasher.hash_in_zone(&lk0.key, act.zone);
        loop {
            let shard = self.lock_shard(self.shard_index(h));
            // The zone's key is written once the lock is taken: stores still in
            // flight would hold the lock's atomic back.
            let mut lk = *lk0;
            lk.key.zone = act.zone;
            let r = self.step(shard, pkt, &lk, h, act, now_ms, nat);
            if !r.is_again() {
                return r;
            }
            // A NAT set-up met a locked shard, or an alias was stale.
            self.back_off();
        }
    }

    /// Between two tries of a step: lets the other thread finish, and
    /// removes the aliases left behind meanwhile.
    #[cold]
    fn back_off(&self) {
        std::thread::yield_now();
        self.drain_orphans();
    }

    /// [`execute`](Self::execute) for a packet that already went through
    /// `prev` in an earlier step of the same pipeline pass. In the same
    /// zone, as Open vSwitch's cached-connection path does, the protocol
    /// state does not run again: an invalid packet stays invalid, and a
    /// packet with a connection only has the mark and label read (and, with
    /// `commit`, written). A commit of what `prev` read them to be (without
    /// NAT) answers `prev` and takes no lock. This is OVN's `ct_next` then
    /// `ct_commit` in one zone. In another zone, or without a connection, it
    /// is `execute`.
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
        self.execute_next_nat(pkt, prep, act, now_ms, prev, &mut None)
    }

    /// [`execute_next_prepared`](Self::execute_next_prepared) with what NAT
    /// did, as [`execute_nat`](Self::execute_nat). `pkt` is the packet as
    /// the steps before translated it, and `nat` holds on entry what the
    /// step that answered `prev` wrote there: it is the packet's NAT state
    /// across the pass, as Open vSwitch keeps `ct_orig_tuple` in the packet's
    /// metadata. A step that takes `prev`'s answer (an invalid packet, or
    /// the same connection not translated now, Open vSwitch's
    /// `process_one_fast`) leaves it; one that translates the packet now
    /// (`ct(zone=Z)` then `ct(zone=Z, nat)`), or a fresh step (another zone,
    /// no connection), writes it.
    pub fn execute_next_nat(
        &self,
        pkt: &Packet,
        prep: &Prepared,
        act: &CtAction,
        now_ms: u64,
        prev: &CtResult,
        nat: &mut Option<NatResult>,
    ) -> CtResult {
        if prev.zone != act.zone {
            return self.execute_nat(pkt, prep, act, now_ms, nat);
        }
        if prev.state.contains(CtState::INV) {
            return *prev;
        }
        if !prev.has_conn {
            return self.execute_nat(pkt, prep, act, now_ms, nat);
        }
        if act.nat.is_none() && act.commits_nothing(prev) {
            // The connection already holds what the step would write (OVN's
            // `ct_commit` after `ct_next`, on an existing connection): its
            // answer is `prev`'s, and no lock is taken for it. Open vSwitch's
            // `process_one_fast` does not look the connection up again either.
            return *prev;
        }
        let Ok(lk0) = &prep.0 else {
            return *prev;
        };
        let h = self.hasher.hash_in_zone(&lk0.key, act.zone);
        let mut lk = *lk0;
        lk.key.zone = act.zone;
        let mut shard = self.lock_shard(self.shard_index(h));
        let alias = match shard.find(tag(h), &lk.key) {
            Found::Conn(i) => return next_on(&mut shard, i, pkt, Via::Key, act, prev, nat),
            // A translated packet finds its connection through the alias.
            Found::Alias(a) => Some(a),
            Found::Nothing => None,
        };
        drop(shard);
        if let Some(a) = alias {
            if let Some((mut p, i, info)) = self.primary_of(&a, now_ms) {
                let via = Via::Alias {
                    reply_swap: a.reply_swap,
                    info: &info,
                };
                return next_on(&mut p, i, pkt, via, act, prev, nat);
            }
        }
        // Removed in between (flush): a fresh step.
        self.execute_nat(pkt, prep, act, now_ms, nat)
    }

    /// [`execute_nat`](Self::execute_nat) for a run of packets of one
    /// connection in one direction, in their order: `prep` is the lookup of
    /// each of `pkts` (see [`Packet::same_lookup`]). The connection is found
    /// once (by its key, or by a translated connection's alias), and each
    /// packet's step (its state update, e.g. TCP's window) runs under that
    /// one lock, answering as it would alone (a connection of another protocol
    /// than TCP, whose state is reached at its first packet, gives the later
    /// packets the first one's answer); a packet of no connection is
    /// answered `new` or `inv` as alone, under the lock of its shard (a lookup
    /// in a zone that holds no connection answers `new` without it).
    ///
    /// `keep` reads each packet's answer and what NAT did for it as soon as
    /// they are made (NAT is reported once for the run: packets with equal
    /// answers have equal reports); the run stops after the first packet it
    /// returns `false` for. Returns how many packets ran, from the first; the others
    /// did not (their own steps may follow). A caller that steps several
    /// packets together (VPP's vectors) uses `keep` to stop where a packet's
    /// answer would make the next packets' answers depend on its later steps.
    ///
    /// A commit runs only on a connection found (its writes, and a
    /// translation's set-up, are what a commit does to an existing
    /// connection: the writes only). Runs nothing (returns 0) when `act`
    /// commits and no connection is there, or when an alias leads to no
    /// connection: a packet that may create runs its own step. A SYN that
    /// reopens a closed connection ends the run before it.
    pub fn execute_run(
        &self,
        pkts: &[Packet],
        prep: &Prepared,
        act: &CtAction,
        now_ms: u64,
        mut keep: impl FnMut(&CtResult, &Option<NatResult>) -> bool,
    ) -> usize {
        let Ok(lk0) = &prep.0 else {
            return 0;
        };
        let mut n = 0;
        while let Some(pkt) = pkts.get(n) {
            let Some(r) = self.in_empty_zone(pkt, lk0, act) else {
                break;
            };
            n += 1;
            if !keep(&r, &None) {
                return n;
            }
        }
        if n > 0 {
            return n;
        }
        let h = self.hasher.hash_in_zone(&lk0.key, act.zone);
        let mut s = self.lock_shard(self.shard_index(h));
        let mut lk = *lk0;
        lk.key.zone = act.zone;
        let alias = match self.find_live(&mut s, tag(h), &lk, now_ms) {
            Found::Conn(i) => {
                return self.run_on(&mut s, i, pkts, &lk, Via::Key, act, now_ms, keep)
            }
            Found::Alias(a) => Some(a),
            Found::Nothing if act.commit => return 0,
            Found::Nothing => None,
        };
        let Some(a) = alias else {
            // No connection: each packet's answer, as alone; nothing is created.
            let mut n = 0;
            while let Some(pkt) = pkts.get(n) {
                let r = self
                    .refuse_opening(&mut s, pkt, &lk, act)
                    .unwrap_or_else(|| CtResult::new(act.zone, CtState::NEW));
                n += 1;
                if !keep(&r, &None) {
                    break;
                }
            }
            return n;
        };
        drop(s);
        let Some((mut p, i, info)) = self.primary_of(&a, now_ms) else {
            return 0;
        };
        let via = Via::Alias {
            reply_swap: a.reply_swap,
            info: &info,
        };
        self.run_on(&mut p, i, pkts, &lk, via, act, now_ms, keep)
    }

    /// The steps of a run on connection `i` of `s`, found `via` (inlined always: a
    /// run found by key then steps with `via` known).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn run_on(
        &self,
        s: &mut Shard,
        i: usize,
        pkts: &[Packet],
        lk: &Lookup,
        via: Via<'_>,
        act: &CtAction,
        now_ms: u64,
        mut keep: impl FnMut(&CtResult, &Option<NatResult>) -> bool,
    ) -> usize {
        let memo = NatMemo::default();
        let mut n = 0;
        while let Some(pkt) = pkts.get(n) {
            let mut nat = None;
            let r = self.on_conn(s, i, pkt, lk, via, act, now_ms, (&mut nat, Some(&memo)));
            if r.is_again() {
                // Reopened, and removed: this packet's own step creates anew.
                break;
            }
            n += 1;
            if !keep(&r, &nat) {
                break;
            }
            if s.conn(i).idempotent() {
                // Each later packet's step would do what this one's did, and
                // answer alike: their answer is this one's.
                while n < pkts.len() {
                    n += 1;
                    if !keep(&r, &nat) {
                        break;
                    }
                }
                break;
            }
        }
        n
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

    /// The answer to a lookup (no commit) in a zone that holds no connection, and
    /// so no alias either, of a packet that may open one: `new`, without a lock or
    /// a table read (OVN's hairpin check looks every load-balanced packet up in the
    /// switch's own zone, which holds nothing unless a VIP leads a client back to
    /// itself). `None` when the step must run: a commit, a zone with connections, or
    /// a packet the step would find invalid (counted under its shard's lock).
    ///
    /// A connection another thread is committing in the zone at the same time is
    /// not seen, as if this lookup had come first.
    #[inline]
    fn in_empty_zone(&self, pkt: &Packet, lk: &Lookup, act: &CtAction) -> Option<CtResult> {
        if act.commit || lk.related || self.limits.zone_count(act.zone) != 0 {
            return None;
        }
        conn::may_open(pkt, lk.icmp_opener, self.tcp_loose.load(Relaxed)).ok()?;
        Some(CtResult::new(act.zone, CtState::NEW))
    }

    fn early(&self, zone: u16, r: InvalidReason) -> CtResult {
        self.early_invalid[r.index()].fetch_add(1, Relaxed);
        CtResult::of_invalid(zone, r)
    }

    /// The step, from the lock of the shard of `lk`'s hash `h`; `nat` is
    /// written only for a NAT'd connection. [`CtResult::AGAIN`]: step again
    /// (see [`back_off`](Self::back_off)).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        mut s: Guard<'_>,
        pkt: &Packet,
        lk: &Lookup,
        h: u64,
        act: &CtAction,
        now_ms: u64,
        nat: &mut Option<NatResult>,
    ) -> CtResult {
        match self.find_live(&mut s, tag(h), lk, now_ms) {
            Found::Conn(i) => {
                let r = self.on_conn(&mut s, i, pkt, lk, Via::Key, act, now_ms, (nat, None));
                if !r.is_again() {
                    return r;
                }
            }
            Found::Alias(a) => {
                drop(s);
                return self.step_alias(a, pkt, lk, h, act, now_ms, nat);
            }
            Found::Nothing => {}
        }
        self.on_miss(s, pkt, lk, h, act, now_ms, nat)
    }

    /// The step of a packet whose key is alias `a` (its shard's lock
    /// already released: one lock at a time), on the primary in its own
    /// shard. [`CtResult::AGAIN`] (step again) when the alias was stale, now removed, or
    /// a SYN reopened the connection.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn step_alias(
        &self,
        a: Alias,
        pkt: &Packet,
        lk: &Lookup,
        h: u64,
        act: &CtAction,
        now_ms: u64,
        nat: &mut Option<NatResult>,
    ) -> CtResult {
        if let Some((mut p, i, info)) = self.primary_of(&a, now_ms) {
            let via = Via::Alias {
                reply_swap: a.reply_swap,
                info: &info,
            };
            let r = self.on_conn(&mut p, i, pkt, lk, via, act, now_ms, (nat, None));
            if !r.is_again() {
                return r;
            }
        }
        self.lock_shard(self.shard_index(h))
            .remove_alias(tag(h), &lk.key, a.serial);
        CtResult::AGAIN
    }

    /// The primary of alias `a`, locked, with its position and its translation:
    /// `None` if it is gone, no longer has `a`'s translation, or expired
    /// (then removed).
    pub(crate) fn primary_of(&self, a: &Alias, now_ms: u64) -> Option<(Guard<'_>, usize, NatInfo)> {
        let hp = self.hasher.hash(&a.primary);
        let mut p = self.lock_shard(self.shard_index(hp));
        let i = match p.conn_hinted(a.at as usize, &a.primary) {
            Some(i) => i,
            None => match p.find(tag(hp), &a.primary) {
                Found::Conn(i) => i,
                _ => return None,
            },
        };
        if p.conn(i).expired(now_ms) {
            self.remove_at(&mut p, i);
            p.counters.expired += 1;
            return None;
        }
        if !p.conn(i).nat {
            return None;
        }
        let info = *p.nat_info(i);
        (info.serial == a.serial).then_some((p, i, info))
    }

    /// What `lk`'s key names in `s`; an expired connection is removed on
    /// the way (lazy expiry) and not found.
    fn find_live(&self, s: &mut Shard, tag: u32, lk: &Lookup, now_ms: u64) -> Found {
        let found = s.find(tag, &lk.key);
        if let Found::Conn(i) = found {
            if s.conn(i).expired(now_ms) {
                self.remove_at(s, i);
                s.counters.expired += 1;
                return Found::Nothing;
            }
        }
        found
    }

    /// Removes the connection at position `i`, its translation and its alias (at
    /// once, wherever it is: see [`remove_in_scan`](Self::remove_in_scan)
    /// for a caller walking `s`'s positions).
    pub(crate) fn remove_at(&self, s: &mut Shard, i: usize) -> Conn {
        self.remove_conn(s, i, false)
    }

    /// Removes the connection at position `i` and its translation for a
    /// caller walking `s`'s positions upwards (a sweep, a flush): only the
    /// last entry moves, to `i`, the next to examine. An alias in `s` is
    /// left to [`drain_orphans`](Self::drain_orphans), since removing it
    /// would move the last entry to the alias's position, which the walk
    /// may have passed; until then it is stale, as any orphan.
    pub(crate) fn remove_in_scan(&self, s: &mut Shard, i: usize) -> Conn {
        self.remove_conn(s, i, true)
    }

    fn remove_conn(&self, s: &mut Shard, i: usize, scanning: bool) -> Conn {
        let c = *s.conn(i);
        let info = c.nat.then(|| *s.nat_info(i));
        s.table.remove(i);
        self.limits.release(c.key.zone);
        if let Some(info) = info {
            self.drop_nat(s, &c, info, scanning);
        }
        c
    }

    /// Counts NAT'd connection `c` (just removed from `s`, its translation
    /// `info`) gone and removes its alias: at once if the alias lives in
    /// `s` (unless `scanning`) or its shard's lock is free (`try_lock`:
    /// never wait for a second shard while holding one), else later
    /// ([`drain_orphans`](Self::drain_orphans)).
    #[cold]
    fn drop_nat(&self, s: &mut Shard, c: &Conn, info: NatInfo, scanning: bool) {
        let key = &c.key;
        if !info.aliased {
            return;
        }
        let (serial, (ka, _)) = (info.serial, info.alias_key(key, c.flipped));
        let hq = self.hasher.hash(&ka);
        let q = self.shard_index(hq);
        let own = q == self.shard_index(self.hasher.hash(key));
        if own && !scanning {
            s.remove_alias(tag(hq), &ka, serial);
        } else if let Some(mut g) = (!own).then(|| self.shards[q].try_lock()).flatten() {
            g.remove_alias(tag(hq), &ka, serial);
        } else {
            let mut orphans = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
            orphans.push((ka, serial));
        }
    }

    /// Removes the aliases [`drop_nat`](Self::drop_nat) left behind, one
    /// shard lock at a time. Until then such an alias is stale: a lookup
    /// treats it as absent (and removes it), a new translation avoids it.
    pub(crate) fn drain_orphans(&self) {
        let orphans = core::mem::take(&mut *self.orphans.lock().unwrap_or_else(|e| e.into_inner()));
        for (ka, serial) in orphans {
            let hq = self.hasher.hash(&ka);
            self.lock_shard(self.shard_index(hq))
                .remove_alias(tag(hq), &ka, serial);
        }
    }

    /// A packet of an existing connection, found `via` its key or alias
    /// (`nat` written if the connection is NAT'd); [`CtResult::AGAIN`] when a
    /// SYN reopens a closed TCP connection (removed here, then handled as a
    /// miss).
    #[allow(clippy::too_many_arguments)]
    fn on_conn(
        &self,
        s: &mut Shard,
        i: usize,
        pkt: &Packet,
        lk: &Lookup,
        via: Via<'_>,
        act: &CtAction,
        now_ms: u64,
        (nat, memo): (&mut Option<NatResult>, Option<&NatMemo>),
    ) -> CtResult {
        let liberal = self.tcp_liberal.load(Relaxed);
        let c = s.conn_mut(i);
        let reply = match via {
            Via::Key => lk.flipped != c.flipped,
            Via::Alias { reply_swap, .. } => lk.flipped == reply_swap,
        };
        let rpl = if reply { CtState::RPL } else { CtState(0) };
        let state = if lk.related {
            CtState::REL | rpl
        } else {
            match c.update(pkt, reply, liberal, &self.timeouts, now_ms) {
                Update::Valid => CtState::EST | rpl,
                Update::ValidNew => CtState::NEW,
                Update::Invalid(r) => {
                    let mut out = CtResult {
                        mark: c.mark,
                        label: c.label(),
                        ..CtResult::of_invalid(act.zone, r)
                    };
                    let nat_conn = c.nat;
                    s.counters.invalid[r.index()] += 1;
                    if nat_conn {
                        // Reported, not translated.
                        let p = Passage {
                            via,
                            reply,
                            related: false,
                            translate: false,
                            memo,
                        };
                        report_slot(s, i, pkt, p, &mut out.state, nat);
                    }
                    return out;
                }
                Update::Reopen => {
                    self.remove_at(s, i);
                    s.counters.reopened += 1;
                    return CtResult::AGAIN;
                }
            }
        };
        if act.commit {
            apply_writes(c, act);
        }
        if c.nat {
            let p = Passage {
                via,
                reply,
                related: lk.related,
                translate: act.nat.is_some(),
                memo,
            };
            return nat_conn_result(s, i, pkt, p, act.zone, state, nat);
        }
        // Built in place, field by field: a result built in a temporary and copied
        // whole stalls on the copy's wide loads (store forwarding).
        CtResult {
            state: state | CtState::TRK,
            zone: act.zone,
            mark: c.mark,
            label: c.label(),
            invalid: None,
            refused: None,
            has_conn: true,
        }
    }

    /// The `inv` answer (counted) to a packet of no connection that may not
    /// open one; `None` when it may.
    fn refuse_opening(
        &self,
        s: &mut Shard,
        pkt: &Packet,
        lk: &Lookup,
        act: &CtAction,
    ) -> Option<CtResult> {
        let opens = if lk.related {
            Err(InvalidReason::IcmpUnrelated)
        } else {
            conn::may_open(pkt, lk.icmp_opener, self.tcp_loose.load(Relaxed))
        };
        let r = opens.err()?;
        s.counters.invalid[r.index()] += 1;
        Some(CtResult::of_invalid(act.zone, r))
    }

    /// A packet of no connection: `inv`, or `new` (created on commit, with
    /// its translation if asked). [`CtResult::AGAIN`]: step again (a NAT set-up met a
    /// locked shard; nothing was created).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn on_miss(
        &self,
        mut s: Guard<'_>,
        pkt: &Packet,
        lk: &Lookup,
        h: u64,
        act: &CtAction,
        now_ms: u64,
        nat: &mut Option<NatResult>,
    ) -> CtResult {
        if let Some(inv) = self.refuse_opening(&mut s, pkt, lk, act) {
            return inv;
        }
        let mut out = CtResult::new(act.zone, CtState::NEW);
        if !act.commit {
            return out;
        }
        if let Err(refused) = self.limits.admit(act.zone) {
            match refused {
                Refused::TableFull => s.counters.table_full += 1,
                _ => s.counters.zone_full += 1,
            }
            out.refused = Some(refused);
            return out;
        }
        let mut c = Conn::new(pkt, lk.key, lk.flipped, &self.timeouts, now_ms);
        apply_writes(&mut c, act);
        let mut info = None;
        if let Some(Nat::Src(range) | Nat::Dst(range)) = act.nat {
            let src_nat = matches!(act.nat, Some(Nat::Src(_)));
            match self.set_up_nat(&mut s, lk, h, src_nat, &range) {
                Ok(v) => {
                    c.nat = true;
                    info = Some(v);
                }
                Err(NoTranslation::Busy) => {
                    self.limits.release(act.zone);
                    return CtResult::AGAIN;
                }
                Err(NoTranslation::Exhausted) => {
                    self.limits.release(act.zone);
                    s.counters.nat_exhausted += 1;
                    out.refused = Some(Refused::NatExhausted);
                    return out;
                }
            }
        }
        let i = s.table.insert(tag(h), Slot::Conn(c));
        if let Some(info) = info {
            s.table.set_side(i, info);
        }
        self.shards[self.shard_index(h)].published(&mut s);
        s.counters.created += 1;
        out = CtResult {
            mark: c.mark,
            label: c.label(),
            has_conn: true,
            ..out
        };
        if let Some(info) = &info {
            let p = Passage {
                via: Via::Key,
                reply: false,
                related: false,
                translate: true,
                memo: None,
            };
            // From the values in hand: the entry and the translation were just
            // written to lines that may not be in the cache yet, and a read the
            // CPU cannot forward from those stores waits for them.
            report_nat(Some(info), &c.key, c.flipped, pkt, p, &mut out.state, nat);
        }
        out
    }

    /// A new translation for the connection `lk` is creating (in `s`, the
    /// shard of its hash `h`), as Open vSwitch's `nat_get_unique_tuple`:
    /// the first candidate of [`nat::probe`] whose translated reply tuple is
    /// neither a connection's key nor an alias in its zone. Its alias is
    /// inserted here; the caller inserts the connection before it releases
    /// `s`, so no thread sees one without the other.
    #[cold]
    #[inline(never)]
    fn set_up_nat(
        &self,
        s: &mut Shard,
        lk: &Lookup,
        h: u64,
        src_nat: bool,
        range: &NatRange,
    ) -> Result<NatInfo, NoTranslation> {
        let o = lk.key.oriented(lk.flipped);
        let home = self.shard_index(h);
        let serial = self.nat_serial.fetch_add(1, Relaxed).wrapping_add(1);
        let found = nat::probe(&o, src_nat, range, h, |addr, port| {
            let t = nat::translate(&o, src_nat, addr, port);
            let (ka, reply_swap) = t.reversed().canonical(lk.key.zone);
            if ka == lk.key {
                // A translation to itself: no alias.
                return Some(Ok((addr, port, false)));
            }
            let alias = Alias {
                primary: lk.key,
                reply_swap,
                serial,
                at: 0,
            };
            match self.claim_alias(s, home, &ka, alias) {
                Ok(true) => Some(Ok((addr, port, true))),
                Ok(false) => None,
                Err(busy) => Some(Err(busy)),
            }
        });
        let (addr, port, aliased) = found.ok_or(NoTranslation::Exhausted)??;
        Ok(NatInfo {
            src_nat,
            addr,
            port,
            aliased,
            serial,
        })
    }

    /// Inserts `alias` under `ka` unless a connection or an alias holds
    /// that key (`Ok(false)`). `s` is the locked shard `home`; another
    /// shard is only tried (`try_lock`), never waited for.
    #[cold]
    #[inline(never)]
    fn claim_alias(
        &self,
        s: &mut Shard,
        home: usize,
        ka: &Key,
        alias: Alias,
    ) -> Result<bool, NoTranslation> {
        let hq = self.hasher.hash(ka);
        let q = self.shard_index(hq);
        // The connection goes to the home table's end right after, behind the
        // alias if it is there too.
        let at = s.table.len() + usize::from(q == home);
        let alias = Alias {
            at: at as u32,
            ..alias
        };
        let claim = |s: &mut Shard| {
            let claimed = s.claim_alias(tag(hq), ka, alias);
            self.shards[q].published(s);
            claimed
        };
        if q == home {
            return Ok(claim(s));
        }
        match self.shards[q].try_lock() {
            Some(mut g) => Ok(claim(&mut g)),
            None => Err(NoTranslation::Busy),
        }
    }
}

/// How a packet passed its NAT'd connection: found `via` which key, in
/// which direction, whether an ICMP error, whether the step asks for NAT.
#[derive(Debug, Clone, Copy)]
struct Passage<'a> {
    via: Via<'a>,
    reply: bool,
    related: bool,
    translate: bool,
    /// A run's packets' report, made for its first ([`NatMemo`]).
    memo: Option<&'a NatMemo>,
}

/// What NAT reported for a run's first packet, by whether the step asked to
/// translate it (a valid packet) or not (an invalid one): the state bits added
/// and the [`NatResult`]. A run's packets share their endpoints, their
/// connection and their direction, so each later packet's report is the same.
type NatMemo = [core::cell::Cell<Option<(CtState, NatResult)>>; 2];

/// Writes `nat` for a packet of the NAT'd connection `key` (original
/// direction: `flipped`; its translation `own`, found beside it) and translates it if the step asks for NAT and the
/// packet arrived untranslated: an original-direction packet by the key, a
/// reply by the alias (with no alias, a translation to itself, every
/// packet), adding `snat`/`dnat` to `state`. A packet that arrived translated
/// is left as it is, so a second step in the zone does not translate it
/// back. Open vSwitch's `handle_nat`: `nat_packet` one way, `un_nat_packet`
/// the other.
#[cold]
#[inline(never)]
fn report_nat(
    own: Option<&NatInfo>,
    key: &Key,
    flipped: bool,
    pkt: &Packet,
    p: Passage<'_>,
    state: &mut CtState,
    nat: &mut Option<NatResult>,
) {
    let slot = p.memo.map(|m| &m[usize::from(p.translate)]);
    if let Some((bits, n)) = slot.and_then(|m| m.get()) {
        *state |= bits;
        *nat = Some(n);
        return;
    }
    // Found through the alias: its translation is at hand, checked then.
    let info = match p.via {
        Via::Alias { info, .. } => info,
        Via::Key => match own {
            Some(info) => info,
            None => return,
        },
    };
    let original = nat::key_endpoints(key, flipped);
    let own = nat::packet_endpoints(pkt);
    let untranslated = match p.via {
        Via::Key => !p.reply || !info.aliased,
        Via::Alias { .. } => p.reply,
    };
    let translate = p.translate && untranslated;
    let (bits, packet) = if translate {
        let bits = info.state(p.reply);
        (bits, info.rewrite(original, own, p.reply, p.related))
    } else {
        (CtState(0), own)
    };
    *state |= bits;
    let inner = (translate && p.related).then(|| info.embedded(original, p.reply));
    let n = NatResult {
        packet,
        original,
        inner,
    };
    *nat = Some(n);
    if let Some(m) = slot {
        m.set(Some((bits, n)));
    }
}

/// The result of a step on NAT'd connection `i` of `s` (its writes
/// applied), its NAT in `nat`.
#[cold]
#[inline(never)]
fn nat_conn_result(
    s: &mut Shard,
    i: usize,
    pkt: &Packet,
    p: Passage<'_>,
    zone: u16,
    state: CtState,
    nat: &mut Option<NatResult>,
) -> CtResult {
    let c = s.conn(i);
    let mut out = CtResult {
        mark: c.mark,
        label: c.label(),
        has_conn: true,
        ..CtResult::new(zone, state)
    };
    report_slot(s, i, pkt, p, &mut out.state, nat);
    out
}

/// [`report_nat`] for the NAT'd connection at position `i` of `s`.
fn report_slot(
    s: &Shard,
    i: usize,
    pkt: &Packet,
    p: Passage<'_>,
    state: &mut CtState,
    nat: &mut Option<NatResult>,
) {
    let c = s.conn(i);
    let info = c.nat.then(|| s.nat_info(i));
    report_nat(info, &c.key, c.flipped, pkt, p, state, nat);
}

/// [`Conntrack::execute_next`]'s step on a known connection: the writes.
///
/// With NAT asked for, a packet of a NAT'd connection that this pass has not
/// translated yet is translated now, as Open vSwitch's `process_one_fast`
/// does (`ct(zone=Z)` then `ct(zone=Z, nat)`: the second translates), and
/// `nat` written; otherwise `nat` keeps what the step before wrote.
fn next_on(
    s: &mut Shard,
    i: usize,
    pkt: &Packet,
    via: Via<'_>,
    act: &CtAction,
    prev: &CtResult,
    nat: &mut Option<NatResult>,
) -> CtResult {
    let c = s.conn_mut(i);
    if act.commit {
        apply_writes(c, act);
    }
    let mut out = CtResult {
        mark: c.mark,
        label: c.label(),
        ..*prev
    };
    let translated = prev.state.translated();
    if act.nat.is_some() && c.nat && !translated {
        let p = Passage {
            via,
            reply: prev.state.contains(CtState::RPL),
            related: prev.state.contains(CtState::REL),
            translate: true,
            memo: None,
        };
        report_slot(s, i, pkt, p, &mut out.state, nat);
    }
    out
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

    fn udp(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> Packet {
        Packet {
            src: src.into(),
            dst: dst.into(),
            fragment: false,
            l4: crate::L4::Udp {
                src_port: sp,
                dst_port: dp,
            },
        }
    }

    fn snat(addr: [u8; 4]) -> CtAction {
        let a = addr.into();
        CtAction::commit(1).with_nat(Nat::Src(NatRange {
            min: a,
            max: a,
            ports: None,
        }))
    }

    /// Aliases and translations over all shards.
    fn nat_entries(ct: &Conntrack) -> (usize, usize) {
        (0..ct.shards.len()).fold((0, 0), |(a, n), i| {
            let s = ct.lock_shard(i);
            let t = (0..s.table.len())
                .filter(|&j| s.conn_at(j).is_some_and(|c| c.nat))
                .count();
            (a + s.aliases(), n + t)
        })
    }

    /// An alias names where its connection was put; once removals moved it,
    /// a reply through the alias still finds it by its key.
    #[test]
    fn an_alias_s_hint_names_its_connection_until_it_moves() {
        let ct = Conntrack::new(Config {
            shards: 4,
            ..Config::default()
        })
        .unwrap();
        let client = |i: u16| {
            udp(
                [10, 0, (i >> 8) as u8, i as u8],
                1000 + i,
                [192, 0, 2, 1],
                53,
            )
        };
        let reply = |i: u16| udp([192, 0, 2, 1], 53, [203, 0, 113, 1], 1000 + i);
        for i in 0..300 {
            let r = ct.execute(&client(i), &snat([203, 0, 113, 1]), 0);
            assert!(r.has_connection(), "{i}");
        }
        let hinted = |ct: &Conntrack| {
            let aliases: Vec<Alias> = (0..ct.shards.len())
                .flat_map(|q| {
                    let s = ct.lock_shard(q);
                    (0..s.table.len())
                        .filter_map(|j| match *s.table.get(j) {
                            Slot::Alias(_, a) => Some(a),
                            Slot::Conn(_) => None,
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let at_hint = |a: &Alias| {
                let s = ct.lock_shard(ct.shard_index(ct.hasher.hash(&a.primary)));
                s.conn_hinted(a.at as usize, &a.primary).is_some()
            };
            aliases.iter().filter(|a| at_hint(a)).count()
        };
        assert_eq!(hinted(&ct), 300);
        for i in (0..300).step_by(7) {
            let (src, dst) = (
                [10, 0, (i >> 8) as u8, i as u8].into(),
                [192, 0, 2, 1].into(),
            );
            let t = crate::Tuple::ports(src, dst, crate::packet::IPPROTO_UDP, 1000 + i, 53);
            assert!(ct.flush_tuple(1, &t));
        }
        let left = 300 - (0..300).step_by(7).count();
        let stale = left - hinted(&ct);
        assert!(stale > 0, "no connection moved");
        for i in (0..300).filter(|i| i % 7 != 0) {
            let r = ct.execute(&reply(i), &snat([203, 0, 113, 1]), 1);
            assert!(r.state.contains(CtState::EST | CtState::RPL), "{i}: {r:?}");
        }
    }

    #[test]
    fn aliases_follow_their_connections() {
        let ct = Conntrack::new(Config::default()).unwrap();
        ct.execute(
            &udp([10, 0, 0, 1], 5000, [192, 0, 2, 1], 53),
            &snat([10, 0, 0, 1]),
            0,
        );
        assert_eq!(nat_entries(&ct), (0, 1), "a translation to itself");
        ct.execute(
            &udp([10, 0, 0, 2], 5000, [192, 0, 2, 1], 53),
            &snat([203, 0, 113, 1]),
            0,
        );
        assert_eq!(nat_entries(&ct), (1, 2));
        ct.flush(None);
        assert_eq!(nat_entries(&ct), (0, 0));
    }

    /// An alias whose shard is locked when its connection goes becomes an
    /// orphan: stale to lookups (removed by the one that meets it while NAT
    /// is in use), and drained by the next sweep.
    #[test]
    fn a_busy_alias_shard_leaves_an_orphan() {
        let ct = Conntrack::new(Config::default()).unwrap();
        let x = [203, 0, 113, 1];
        // A client whose connection and alias live in different shards.
        let (client, q) = (1..=255u8)
            .find_map(|n| {
                let p = udp([10, 0, 0, n], 5000, [192, 0, 2, 1], 53);
                let lk = Lookup::of(&p, 1).unwrap();
                let back = Lookup::of(&udp([192, 0, 2, 1], 53, x, 5000), 1).unwrap();
                let (hp, hq) = (ct.hash_key(&lk.key), ct.hash_key(&back.key));
                let q = ct.shard_index(hq);
                (ct.shard_index(hp) != q).then_some(([10, 0, 0, n], q))
            })
            .unwrap();
        ct.execute(&udp(client, 5000, [192, 0, 2, 1], 53), &snat(x), 0);
        let held = ct.lock_shard(q);
        std::thread::scope(|t| {
            t.spawn(|| {
                let tuple = crate::Tuple::ports(client.into(), [192, 0, 2, 1].into(), 17, 5000, 53);
                assert!(ct.flush_tuple(1, &tuple));
            });
        });
        drop(held);
        assert_eq!(ct.orphans.lock().unwrap().len(), 1);
        assert_eq!(nat_entries(&ct), (1, 0));
        // Stale: the translated reply is of no connection.
        let back = udp([192, 0, 2, 1], 53, x, 5000);
        assert_eq!(
            ct.execute(&back, &CtAction::lookup(1), 1).state,
            CtState::TRK | CtState::NEW
        );
        // With NAT in use the lookup follows it, finds it stale, removes it.
        ct.execute(&udp([10, 9, 9, 9], 1, [192, 0, 2, 1], 53), &snat(x), 1);
        assert_eq!(nat_entries(&ct), (2, 1));
        assert_eq!(
            ct.execute(&back, &CtAction::lookup(1), 1).state,
            CtState::TRK | CtState::NEW
        );
        assert_eq!(nat_entries(&ct), (1, 1));
        ct.sweep(1, 16);
        assert!(ct.orphans.lock().unwrap().is_empty());
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
