//! The multicast group database (MDB) of a snooping switch (RFC 4541).
//!
//! [`Mdb`] keeps, per bridge domain `D` and group, the members `M` (ports
//! or remote tunnel endpoints) that want the group and from which sources,
//! and per domain the multicast-router ports (where queries came from).
//! [`Mdb::snoop`] applies a parsed [`Message`]; [`Mdb::members`] and
//! [`Mdb::routers`] answer the forwarding question; [`Mdb::age`] expires
//! state. Nothing here does I/O or reads a clock: the caller passes `now`.
//!
//! # What is simplified
//!
//! - **Per-member filter state, not per-source timers.** RFC 3376 §6.4
//!   keeps a router's state per interface with one timer per source. Here
//!   each member has one filter mode, one source list and one expiry, as a
//!   single host's state (RFC 3376 §3.2): ALLOW adds to an INCLUDE list and
//!   removes from an EXCLUDE list; BLOCK removes from an INCLUDE list and
//!   adds to an EXCLUDE list. This is exact when a member is one host and
//!   errs towards forwarding more when several hosts share a member.
//! - **Fast leave.** An IGMPv2 leave, an MLDv1 done, or any INCLUDE record
//!   with no sources (and a BLOCK emptying an INCLUDE list) removes the
//!   member at once, without a last-member query (as Open vSwitch does).
//! - **Static members** ([`Mdb::add_static`]) are configuration: EXCLUDE
//!   {}, never aged, untouched by reports and leaves; only flushes remove
//!   them.
//! - **Bounded state.** At most [`MdbConfig::max_groups`] (domain, group)
//!   entries; a report for a new group beyond that is refused and counted
//!   in [`Snooped::refused_full`] (the group's traffic is then flooded, as
//!   for any unregistered group). A member's source list holds at most
//!   [`MdbConfig::max_sources`] addresses; a longer INCLUDE list widens the
//!   member to EXCLUDE {} (any source), a longer EXCLUDE list keeps its
//!   lowest `max_sources` addresses: both forward more, never less.
//!
//! # Costs
//!
//! [`Mdb::members`] is one hash lookup on (domain, group) and a scan of the
//! group's members (few: one per port or TEP) with a scan of each one's
//! source list (at most `max_sources`). [`Mdb::snoop`] does the same per
//! record, plus allocation when a group, member or source list grows: it is
//! the control path. [`Mdb::age`] walks the whole table.

use core::net::IpAddr;
use core::time::Duration;
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

use crate::{is_link_local, Message, Record, RecordKind};

/// Bounds on the bridge domain and member types.
pub trait Key: Copy + Eq + Hash + Ord + Debug {}
impl<T: Copy + Eq + Hash + Ord + Debug> Key for T {}

/// [`Mdb`] configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MdbConfig {
    /// Most (domain, group) entries; default 2048 (Open vSwitch's
    /// `mcast-snooping-table-size`).
    pub max_groups: usize,
    /// Most source addresses kept per member; default 64.
    pub max_sources: usize,
    /// How long a member stays without a report; default 300 s (Open
    /// vSwitch's `mcast-snooping-aging-time`; RFC 3376 §8.4's Group
    /// Membership Interval is 260 s with default timers).
    pub aging: Duration,
    /// How long a port stays a multicast-router port after a query; default
    /// 255 s, RFC 3376 §8.5's Other Querier Present Interval with default
    /// timers (2 × 125 s + 10 s / 2), so a querier that misses one query
    /// stays known. (Open vSwitch uses 180 s.)
    pub router_aging: Duration,
}

impl Default for MdbConfig {
    fn default() -> Self {
        MdbConfig {
            max_groups: 2048,
            max_sources: 64,
            aging: Duration::from_secs(300),
            router_aging: Duration::from_secs(255),
        }
    }
}

/// A member's source filter mode (RFC 3376 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum FilterMode {
    /// Traffic from the listed sources only.
    Include,
    /// Traffic from any source except the listed ones (an empty list is a
    /// plain join).
    Exclude,
}

impl FilterMode {
    /// `"include"` or `"exclude"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            FilterMode::Include => "include",
            FilterMode::Exclude => "exclude",
        }
    }
}

impl core::fmt::Display for FilterMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one [`Mdb::snoop`] call changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snooped {
    /// Members added to a group.
    pub joined: u16,
    /// Members removed from a group (fast leave).
    pub left: u16,
    /// Records not applied because the table held
    /// [`MdbConfig::max_groups`] groups.
    pub refused_full: u16,
    /// The message was a query, so the sender is a router port.
    pub router: bool,
}

/// One member of one group, for display ([`Mdb::rows`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GroupRow<D, M> {
    /// Bridge domain.
    pub domain: D,
    /// Multicast group.
    pub group: IpAddr,
    /// The member (port or TEP).
    pub member: M,
    /// Filter mode.
    pub mode: FilterMode,
    /// The source list, sorted.
    pub sources: Vec<IpAddr>,
    /// Time left before the member ages out (zero if overdue); `None` for a
    /// static member ([`Mdb::add_static`]), which never ages.
    pub expires_in: Option<Duration>,
}

/// One multicast-router port, for display ([`Mdb::router_rows`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RouterRow<D, M> {
    /// Bridge domain.
    pub domain: D,
    /// The port or TEP a query came from.
    pub member: M,
    /// Time left before it ages out (zero if overdue).
    pub expires_in: Duration,
}

/// One member's state in one group.
#[derive(Debug, Clone)]
struct Member<M> {
    id: M,
    mode: FilterMode,
    /// Sorted, without duplicates, at most `max_sources` long.
    sources: Vec<IpAddr>,
    /// `None`: static, never ages and reports do not change it.
    expires: Option<Instant>,
}

impl<M> Member<M> {
    fn admits(&self, source: IpAddr) -> bool {
        let listed = self.sources.binary_search(&source).is_ok();
        match self.mode {
            FilterMode::Include => listed,
            FilterMode::Exclude => !listed,
        }
    }
}

/// A router port: the member a query came from and when it expires.
#[derive(Debug, Clone, Copy)]
struct Router<M> {
    id: M,
    expires: Instant,
}

/// The multicast group database: per (bridge domain `D`, group) the
/// members `M` and their source filters, and per domain the router ports.
///
/// Invariant: no group entry has an empty member list, no domain an empty
/// router list.
#[derive(Debug, Clone)]
pub struct Mdb<D, M> {
    config: MdbConfig,
    groups: HashMap<(D, IpAddr), Vec<Member<M>>>,
    routers: HashMap<D, Vec<Router<M>>>,
    generation: u64,
}

impl<D: Key, M: Key> Default for Mdb<D, M> {
    fn default() -> Self {
        Self::new(MdbConfig::default())
    }
}

impl<D: Key, M: Key> Mdb<D, M> {
    /// An empty database.
    pub fn new(config: MdbConfig) -> Self {
        Mdb {
            config,
            groups: HashMap::new(),
            routers: HashMap::new(),
            generation: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &MdbConfig {
        &self.config
    }

    /// Applies `msg`, received from `from` in `domain` at `now`.
    ///
    /// A query makes `from` a router port of `domain` until `now +
    /// router_aging` (the caller does not pass its own queries). Each report
    /// record for a group that is not link-local ([`is_link_local`])
    /// updates `from`'s membership and refreshes its expiry to `now +
    /// aging`, as the module documentation describes.
    pub fn snoop(&mut self, domain: D, from: M, msg: &Message<'_>, now: Instant) -> Snooped {
        let mut out = Snooped::default();
        match msg {
            Message::Query { .. } => {
                self.add_router(domain, from, now);
                out.router = true;
            }
            Message::Report(records) => {
                for r in records.clone() {
                    if !is_link_local(r.group) {
                        self.apply(domain, from, &r, now, &mut out);
                    }
                }
            }
        }
        out
    }

    fn add_router(&mut self, domain: D, from: M, now: Instant) {
        let expires = now + self.config.router_aging;
        let list = self.routers.entry(domain).or_default();
        match list.iter_mut().find(|r| r.id == from) {
            Some(r) => r.expires = expires,
            None => {
                list.push(Router { id: from, expires });
                list.sort_by_key(|r| r.id);
                self.generation += 1;
            }
        }
    }

    /// Applies one record for member `from`.
    fn apply(&mut self, domain: D, from: M, r: &Record<'_>, now: Instant, out: &mut Snooped) {
        let key = (domain, r.group);
        let old = self
            .groups
            .get(&key)
            .and_then(|g| g.iter().find(|m| m.id == from));
        if old.is_some_and(|m| m.expires.is_none()) {
            return; // static
        }
        let (mode, sources) = (old.map(|m| m.mode), old.map(|m| &m.sources[..]));
        let Some((mode, sources)) = self.next_state(mode, sources, r) else {
            if self.remove_member(&key, from) {
                out.left += 1;
            }
            return;
        };
        if !self.groups.contains_key(&key) && self.groups.len() >= self.config.max_groups {
            out.refused_full += 1;
            return;
        }
        let expires = Some(now + self.config.aging);
        let members = self.groups.entry(key).or_default();
        match members.iter_mut().find(|m| m.id == from) {
            Some(m) => {
                if m.mode != mode || m.sources != sources {
                    (m.mode, m.sources) = (mode, sources);
                    self.generation += 1;
                }
                m.expires = expires;
            }
            None => {
                members.push(Member {
                    id: from,
                    mode,
                    sources,
                    expires,
                });
                members.sort_by_key(|m| m.id);
                self.generation += 1;
                out.joined += 1;
            }
        }
    }

    /// The member's filter after record `r`, from its current one (`None`
    /// if not a member); `None` if it is no member afterwards.
    fn next_state(
        &self,
        mode: Option<FilterMode>,
        current: Option<&[IpAddr]>,
        r: &Record<'_>,
    ) -> Option<(FilterMode, Vec<IpAddr>)> {
        use FilterMode::{Exclude, Include};
        let record: Vec<IpAddr> = r.sources.clone().collect();
        let current = current.unwrap_or_default();
        let (mode, mut list) = match (r.kind, mode) {
            (RecordKind::ModeIsExclude | RecordKind::ChangeToExclude, _) => (Exclude, record),
            (RecordKind::ModeIsInclude | RecordKind::ChangeToInclude, _) => (Include, record),
            (RecordKind::AllowNewSources, Some(Exclude)) => (Exclude, minus(current, &record)),
            (RecordKind::AllowNewSources, _) => (Include, union(current, &record)),
            (RecordKind::BlockOldSources, Some(Exclude)) => (Exclude, union(current, &record)),
            (RecordKind::BlockOldSources, Some(Include)) => (Include, minus(current, &record)),
            (RecordKind::BlockOldSources, None) => return None,
        };
        list.sort_unstable();
        list.dedup();
        match mode {
            Include if list.is_empty() => None,
            Include if list.len() > self.config.max_sources => Some((Exclude, Vec::new())),
            _ => {
                list.truncate(self.config.max_sources);
                Some((mode, list))
            }
        }
    }

    /// Removes `id` from group `key`, and the group if it empties; whether
    /// it was a member.
    fn remove_member(&mut self, key: &(D, IpAddr), id: M) -> bool {
        let Some(members) = self.groups.get_mut(key) else {
            return false;
        };
        let before = members.len();
        members.retain(|m| m.id != id);
        let removed = members.len() != before;
        if members.is_empty() {
            self.groups.remove(key);
        }
        if removed {
            self.generation += 1;
        }
        removed
    }

    /// Makes `member` a static member of `group` in `domain`: EXCLUDE {}
    /// (every source), never aged, not changed by reports or leaves; only
    /// the flushes remove it. Static entries are configuration, so they are
    /// added even beyond [`MdbConfig::max_groups`]. Returns whether it was
    /// not already a static member (a learnt membership becomes static).
    pub fn add_static(&mut self, domain: D, member: M, group: IpAddr) -> bool {
        let members = self.groups.entry((domain, group)).or_default();
        let fixed = Member {
            id: member,
            mode: FilterMode::Exclude,
            sources: Vec::new(),
            expires: None,
        };
        match members.iter_mut().find(|m| m.id == member) {
            Some(m) if m.expires.is_none() => return false,
            Some(m) => *m = fixed,
            None => {
                members.push(fixed);
                members.sort_by_key(|m| m.id);
            }
        }
        self.generation += 1;
        true
    }

    /// Pushes onto `out` (which is not cleared) every member of `group` in
    /// `domain` whose filter admits traffic from `source` (EXCLUDE: not
    /// listed; INCLUDE: listed), in member order. Returns `false` when the
    /// group has no entry in `domain` (unregistered: the caller floods, RFC
    /// 4541 §2.1.2), `true` otherwise, even if no member admits `source`.
    /// Router ports are not included: see [`Mdb::routers`].
    pub fn members(&self, domain: D, group: IpAddr, source: IpAddr, out: &mut Vec<M>) -> bool {
        let Some(members) = self.groups.get(&(domain, group)) else {
            return false;
        };
        out.extend(members.iter().filter(|m| m.admits(source)).map(|m| m.id));
        true
    }

    /// The multicast-router ports of `domain`, in member order (RFC 4541
    /// §2.1.1: reports and, with [`Mdb::members`], group traffic go there).
    pub fn routers(&self, domain: D) -> impl Iterator<Item = M> + '_ {
        self.routers
            .get(&domain)
            .into_iter()
            .flatten()
            .map(|r| r.id)
    }

    /// Counts changes to forwarding (a member or router port added or
    /// removed, a member's filter changed; not expiry refreshes). A caller
    /// may cache [`Mdb::members`] answers while it is unchanged.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Removes members and router ports whose expiry is at or before `now`
    /// and the groups left empty; returns how many members and router ports
    /// expired.
    pub fn age(&mut self, now: Instant) -> usize {
        let mut expired = 0;
        self.groups.retain(|_, members| {
            let before = members.len();
            members.retain(|m| !matches!(m.expires, Some(e) if e <= now));
            expired += before - members.len();
            !members.is_empty()
        });
        self.routers.retain(|_, routers| {
            let before = routers.len();
            routers.retain(|r| r.expires > now);
            expired += before - routers.len();
            !routers.is_empty()
        });
        if expired > 0 {
            self.generation += 1;
        }
        expired
    }

    /// Forgets every group and router port of `domain`.
    pub fn flush_domain(&mut self, domain: D) {
        self.groups.retain(|(d, _), _| *d != domain);
        self.routers.remove(&domain);
        self.generation += 1;
    }

    /// Forgets member `m` in every group and as a router port, e.g. when a
    /// port is removed or the topology changes.
    pub fn flush_member(&mut self, m: M) {
        self.groups.retain(|_, members| {
            members.retain(|x| x.id != m);
            !members.is_empty()
        });
        self.routers.retain(|_, routers| {
            routers.retain(|r| r.id != m);
            !routers.is_empty()
        });
        self.generation += 1;
    }

    /// Forgets everything.
    pub fn flush(&mut self) {
        self.groups.clear();
        self.routers.clear();
        self.generation += 1;
    }

    /// Number of (domain, group) entries.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there is no group entry (router ports are not counted).
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Every (domain, group, member), sorted by those three, with time left
    /// as of `now`. Allocates: for a management dump, not the data path.
    pub fn rows(&self, now: Instant) -> Vec<GroupRow<D, M>> {
        let mut rows: Vec<GroupRow<D, M>> = self
            .groups
            .iter()
            .flat_map(|(&(domain, group), members)| {
                members.iter().map(move |m| GroupRow {
                    domain,
                    group,
                    member: m.id,
                    mode: m.mode,
                    sources: m.sources.clone(),
                    expires_in: m.expires.map(|e| e.saturating_duration_since(now)),
                })
            })
            .collect();
        rows.sort_by_key(|r| (r.domain, r.group, r.member));
        rows
    }

    /// Every router port, sorted by (domain, member), with time left as of
    /// `now`.
    pub fn router_rows(&self, now: Instant) -> Vec<RouterRow<D, M>> {
        let mut rows: Vec<RouterRow<D, M>> = self
            .routers
            .iter()
            .flat_map(|(&domain, routers)| {
                routers.iter().map(move |r| RouterRow {
                    domain,
                    member: r.id,
                    expires_in: r.expires.saturating_duration_since(now),
                })
            })
            .collect();
        rows.sort_by_key(|r| (r.domain, r.member));
        rows
    }
}

/// `a ∪ b` (a sorted; the result is sorted by the caller).
fn union(a: &[IpAddr], b: &[IpAddr]) -> Vec<IpAddr> {
    a.iter().chain(b).copied().collect()
}

/// `a − b`.
fn minus(a: &[IpAddr], b: &[IpAddr]) -> Vec<IpAddr> {
    a.iter().copied().filter(|s| !b.contains(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, query};
    use core::net::Ipv4Addr;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const G: Ipv4Addr = Ipv4Addr::new(239, 1, 1, 1);
    const S1: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const S2: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
    const S3: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 3);

    fn msg(frame: &[u8]) -> Message<'_> {
        parse(&frame[14..]).unwrap().unwrap()
    }

    fn report(kind: RecordKind, group: Ipv4Addr, sources: &[Ipv4Addr]) -> Vec<u8> {
        query::igmp_v3_report(MAC, HOST, &[(kind, group, sources)])
    }

    /// Members of G in domain 1 that admit `source`; `None` if unregistered.
    fn admitted(mdb: &Mdb<u8, u8>, source: Ipv4Addr) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        mdb.members(1, G.into(), source.into(), &mut out)
            .then_some(out)
    }

    #[test]
    fn join_and_fast_leave() {
        let t = Instant::now();
        let mut mdb: Mdb<u8, u8> = Mdb::default();
        let join = query::igmp_v2_report(MAC, HOST, G);
        assert_eq!(mdb.snoop(1, 3, &msg(&join), t).joined, 1);
        assert_eq!(mdb.snoop(1, 2, &msg(&join), t).joined, 1);
        assert_eq!(mdb.snoop(1, 2, &msg(&join), t).joined, 0, "a refresh");
        assert_eq!(admitted(&mdb, S1), Some(vec![2, 3]));
        let leave = query::igmp_v2_leave(MAC, HOST, G);
        assert_eq!(mdb.snoop(1, 2, &msg(&leave), t).left, 1);
        assert_eq!(admitted(&mdb, S1), Some(vec![3]));
        assert_eq!(mdb.snoop(1, 3, &msg(&leave), t).left, 1);
        assert_eq!(admitted(&mdb, S1), None);
        assert!(mdb.is_empty());
    }

    #[test]
    fn source_filters() {
        let t = Instant::now();
        let mut mdb: Mdb<u8, u8> = Mdb::default();
        let snoop = |mdb: &mut Mdb<u8, u8>, kind, sources: &[Ipv4Addr]| {
            mdb.snoop(1, 1, &msg(&report(kind, G, sources)), t)
        };
        snoop(&mut mdb, RecordKind::ChangeToInclude, &[S1]);
        assert_eq!(
            (admitted(&mdb, S1), admitted(&mdb, S2)),
            (Some(vec![1]), Some(vec![]))
        );
        snoop(&mut mdb, RecordKind::AllowNewSources, &[S2]);
        assert_eq!(admitted(&mdb, S2), Some(vec![1]));
        snoop(&mut mdb, RecordKind::BlockOldSources, &[S1]);
        assert_eq!(
            (admitted(&mdb, S1), admitted(&mdb, S2)),
            (Some(vec![]), Some(vec![1]))
        );
        // Blocking the last included source is a leave.
        assert_eq!(snoop(&mut mdb, RecordKind::BlockOldSources, &[S2]).left, 1);
        assert_eq!(admitted(&mdb, S2), None);

        snoop(&mut mdb, RecordKind::ChangeToExclude, &[S1]);
        assert_eq!(
            (admitted(&mdb, S1), admitted(&mdb, S3)),
            (Some(vec![]), Some(vec![1]))
        );
        snoop(&mut mdb, RecordKind::BlockOldSources, &[S3]);
        assert_eq!(admitted(&mdb, S3), Some(vec![]));
        snoop(&mut mdb, RecordKind::AllowNewSources, &[S1, S3]);
        assert_eq!(
            (admitted(&mdb, S1), admitted(&mdb, S3)),
            (Some(vec![1]), Some(vec![1]))
        );
        let rows = mdb.rows(t);
        assert_eq!(
            (rows.len(), rows[0].mode, rows[0].sources.len()),
            (1, FilterMode::Exclude, 0)
        );
    }

    #[test]
    fn too_many_sources_widen_the_filter() {
        let t = Instant::now();
        let config = MdbConfig {
            max_sources: 2,
            ..Default::default()
        };
        let mut mdb: Mdb<u8, u8> = Mdb::new(config);
        mdb.snoop(
            1,
            1,
            &msg(&report(RecordKind::ModeIsInclude, G, &[S1, S2, S3])),
            t,
        );
        let row = &mdb.rows(t)[0];
        assert_eq!((row.mode, row.sources.len()), (FilterMode::Exclude, 0));
        mdb.snoop(
            1,
            1,
            &msg(&report(RecordKind::ModeIsExclude, G, &[S3, S2, S1])),
            t,
        );
        let row = &mdb.rows(t)[0];
        assert_eq!(
            (row.mode, &row.sources[..]),
            (FilterMode::Exclude, &[S1.into(), S2.into()][..])
        );
    }

    #[test]
    fn table_full_and_link_local() {
        let t = Instant::now();
        let mut mdb: Mdb<u8, u8> = Mdb::new(MdbConfig {
            max_groups: 1,
            ..Default::default()
        });
        let other = Ipv4Addr::new(239, 1, 1, 2);
        let f = query::igmp_v3_report(
            MAC,
            HOST,
            &[
                (RecordKind::ChangeToExclude, G, &[]),
                (RecordKind::ChangeToExclude, other, &[]),
                (
                    RecordKind::ChangeToExclude,
                    Ipv4Addr::new(224, 0, 0, 251),
                    &[],
                ),
            ],
        );
        let s = mdb.snoop(1, 1, &msg(&f), t);
        assert_eq!((s.joined, s.refused_full, s.router), (1, 1, false));
        // An existing group still takes members.
        assert_eq!(mdb.snoop(1, 2, &msg(&f), t).joined, 1);
        assert_eq!(mdb.len(), 1);
    }

    #[test]
    fn routers_aging_and_generation() {
        let t = Instant::now();
        let mut mdb: Mdb<u8, u8> = Mdb::default();
        let q = query::igmp_general_query(MAC, HOST, Duration::from_secs(10));
        assert!(mdb.snoop(1, 9, &msg(&q), t).router);
        assert_eq!(mdb.routers(1).collect::<Vec<_>>(), [9]);
        assert_eq!(mdb.routers(2).count(), 0);
        let g0 = mdb.generation();
        mdb.snoop(1, 9, &msg(&q), t);
        assert_eq!(mdb.generation(), g0, "a refresh does not change forwarding");
        mdb.snoop(
            1,
            1,
            &msg(&query::igmp_v2_report(MAC, HOST, G)),
            t + Duration::from_secs(100),
        );
        assert!(mdb.generation() > g0);

        let cfg = *mdb.config();
        assert_eq!(mdb.age(t + cfg.router_aging - Duration::from_secs(1)), 0);
        assert_eq!(mdb.age(t + cfg.router_aging), 1, "the router port");
        assert_eq!(mdb.router_rows(t).len(), 0);
        assert_eq!(
            mdb.rows(t)[0].expires_in,
            Some(Duration::from_secs(100) + cfg.aging)
        );
        assert_eq!(
            mdb.age(t + Duration::from_secs(100) + cfg.aging),
            1,
            "the member"
        );
        assert!(mdb.is_empty());
    }

    #[test]
    fn static_members_stay() {
        let t = Instant::now();
        let mut mdb: Mdb<u8, u8> = Mdb::new(MdbConfig {
            max_groups: 1,
            ..Default::default()
        });
        mdb.snoop(1, 2, &msg(&query::igmp_v2_report(MAC, HOST, G)), t);
        assert!(mdb.add_static(1, 1, G.into()));
        assert!(!mdb.add_static(1, 1, G.into()));
        // Beyond max_groups: configuration wins.
        assert!(mdb.add_static(1, 1, Ipv4Addr::new(239, 9, 9, 9).into()));
        mdb.snoop(1, 1, &msg(&query::igmp_v2_leave(MAC, HOST, G)), t);
        mdb.snoop(
            1,
            1,
            &msg(&report(RecordKind::ChangeToInclude, G, &[S1])),
            t,
        );
        assert_eq!(admitted(&mdb, S2), Some(vec![1, 2]));
        assert_eq!(mdb.age(t + Duration::from_secs(10_000)), 1);
        assert_eq!(admitted(&mdb, S2), Some(vec![1]));
        assert_eq!(mdb.rows(t)[0].expires_in, None);
        mdb.flush_member(1);
        assert!(mdb.is_empty());
    }

    #[test]
    fn flushes() {
        let t = Instant::now();
        let mut mdb: Mdb<u8, u8> = Mdb::default();
        let join = query::igmp_v2_report(MAC, HOST, G);
        let q = query::igmp_general_query(MAC, HOST, Duration::from_secs(10));
        for d in [1, 2] {
            for m in [1, 2] {
                mdb.snoop(d, m, &msg(&join), t);
            }
            mdb.snoop(d, 2, &msg(&q), t);
        }
        mdb.flush_member(2);
        assert_eq!(admitted(&mdb, S1), Some(vec![1]));
        assert_eq!(mdb.router_rows(t).len(), 0);
        mdb.flush_domain(1);
        assert_eq!(admitted(&mdb, S1), None);
        assert_eq!(mdb.len(), 1);
        let rows = mdb.rows(t);
        assert_eq!((rows[0].domain, rows[0].member), (2, 1));
        mdb.flush();
        assert!(mdb.is_empty());
    }
}
