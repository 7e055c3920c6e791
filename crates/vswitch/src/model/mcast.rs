//! Multicast snooping state: the switch's group database (IGMP/MLD, [`mcsnoop::Mdb`]),
//! shared by all PMD threads.
//!
//! Reports, leaves and queries are rare: the PMD that receives one applies it under the
//! write lock. Frames to groups look their group up under the read lock, once per
//! group, source and burst ([`crate::datapath`]'s snooping pass). Aging runs on the
//! housekeeping thread; a topology change forgets the memberships of ports that left a
//! domain.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use mcsnoop::{Mdb, MdbConfig, Message};
use serde::Serialize;

use crate::config::mcast::McastConfig;
use crate::model::domain::DomainId;
use crate::model::fdb::PortId;
use crate::model::tunnel::RemoteId;

/// A member of a group, or a multicast-router port: a local port, or a remote tunnel
/// endpoint (a report or query that arrived through the overlay).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Member {
    /// A port of this switch.
    Port(PortId),
    /// A remote tunnel endpoint.
    Remote(RemoteId),
}

/// A membership row of the switch's database.
pub type GroupRow = mcsnoop::GroupRow<DomainId, Member>;
/// A multicast-router port row of the switch's database.
pub type RouterRow = mcsnoop::RouterRow<DomainId, Member>;

/// The group database with its settings and counters.
#[derive(Debug)]
pub struct Mcast {
    /// Snooping on (`--mcast-snooping`).
    pub snooping: bool,
    /// Unregistered groups flood (`--mcast-flood-unregistered`).
    pub flood_unregistered: bool,
    mdb: RwLock<Mdb<DomainId, Member>>,
    /// The querier's interval, when it is on (`--mcast-querier`).
    pub querier: Option<Duration>,
    /// The domains it serves, as [`crate::model::domain::DomainKey`] shows them
    /// (empty: every VLAN and VNI domain).
    pub querier_domains: Vec<String>,
    /// A round of queries is due ([`crate::datapath::querier`]).
    query_due: AtomicBool,
    /// Moves whenever a membership comes or goes (the OVN chassis writes
    /// `IGMP_Group` rows when it moved).
    generation: AtomicU64,
    /// What snooping did.
    pub counters: McastCounters,
}

/// Snooping's counters (`vswitchctl mdb`, metrics `vswitch_mcast_*`).
#[derive(Debug, Default, Serialize)]
pub struct McastCounters {
    /// IGMP/MLD reports (and leaves) snooped.
    pub reports: AtomicU64,
    /// Queries snooped (their ports became multicast-router ports).
    pub queries: AtomicU64,
    /// Memberships added by reports.
    pub joins: AtomicU64,
    /// Memberships removed by leaves.
    pub leaves: AtomicU64,
    /// Memberships and router ports aged out.
    pub expired: AtomicU64,
    /// Group records not learned because the table was full (the report still went on).
    pub refused_full: AtomicU64,
    /// IGMP/MLD messages dropped as malformed (bad checksum, length, group).
    pub invalid: AtomicU64,
    /// Frames sent to a registered group's members and router ports only.
    pub forwarded: AtomicU64,
    /// Frames to unregistered groups flooded.
    pub flooded_unregistered: AtomicU64,
    /// Frames to unregistered groups sent to router ports only (flooding off), or in
    /// an OVN logical switch to its `_MC_static` group.
    pub unregistered_to_routers: AtomicU64,
    /// Rounds of general queries (IGMPv3 and MLDv2) the querier sent into a domain.
    pub queries_sent: AtomicU64,
}

impl Mcast {
    /// An empty database for `cfg`.
    pub fn new(cfg: &McastConfig) -> Self {
        Mcast {
            snooping: cfg.snooping,
            flood_unregistered: cfg.flood_unregistered,
            mdb: RwLock::new(Mdb::new(MdbConfig {
                max_groups: cfg.table_size,
                aging: Duration::from_secs(cfg.aging_secs),
                router_aging: Duration::from_secs(cfg.aging_secs),
                ..MdbConfig::default()
            })),
            querier: cfg
                .querier
                .then(|| Duration::from_secs(cfg.query_interval_secs)),
            querier_domains: cfg.querier_domains.clone(),
            query_due: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            counters: McastCounters::default(),
        }
    }

    /// Asks PMD 0 for a round of general queries (the housekeeping, every query
    /// interval while the querier is on).
    pub fn request_queries(&self) {
        self.query_due.store(true, Relaxed);
    }

    /// Whether a round of queries was asked for (and clears the request).
    #[inline]
    pub fn take_query_due(&self) -> bool {
        self.query_due.load(Relaxed) && self.query_due.swap(false, Relaxed)
    }

    /// The database, read-locked (PMDs: once per group looked up in a burst).
    pub fn read(&self) -> RwLockReadGuard<'_, Mdb<DomainId, Member>> {
        self.mdb.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Mdb<DomainId, Member>> {
        self.mdb.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one IGMP/MLD message from `from` in `domain`.
    pub fn snoop(&self, domain: DomainId, from: Member, msg: &Message<'_>, now: Instant) {
        let s = self.write().snoop(domain, from, msg, now);
        if s.joined + s.left > 0 {
            self.generation.fetch_add(1, Relaxed);
        }
        let c = &self.counters;
        if matches!(msg, Message::Query { .. }) {
            c.queries.fetch_add(1, Relaxed);
        } else {
            c.reports.fetch_add(1, Relaxed);
        }
        c.joins.fetch_add(u64::from(s.joined), Relaxed);
        c.leaves.fetch_add(u64::from(s.left), Relaxed);
        c.refused_full.fetch_add(u64::from(s.refused_full), Relaxed);
    }

    /// Ages memberships and router ports (housekeeping, once a second); returns how
    /// many expired.
    pub fn age(&self, now: Instant) -> usize {
        let n = self.write().age(now);
        if n > 0 {
            self.counters.expired.fetch_add(n as u64, Relaxed);
            self.generation.fetch_add(1, Relaxed);
        }
        n
    }

    /// Forgets the memberships and router roles of ports no longer in the domain they
    /// were learned in (`domain_of`: each port's domain in the topology just published,
    /// `None` for a port deleted): a port deleted, or moved to another VLAN or VNI.
    /// Static memberships are installed again by the caller.
    pub fn forget_departed(&self, domain_of: impl Fn(PortId) -> Option<DomainId>) {
        let now = Instant::now();
        let mut mdb = self.write();
        let gone = |d: DomainId, m: Member| match m {
            Member::Port(p) => domain_of(p) != Some(d),
            Member::Remote(_) => false,
        };
        let mut departed: Vec<Member> = mdb
            .rows(now)
            .iter()
            .map(|r| (r.domain, r.member))
            .chain(mdb.router_rows(now).iter().map(|r| (r.domain, r.member)))
            .filter(|&(d, m)| gone(d, m))
            .map(|(_, m)| m)
            .collect();
        departed.sort_unstable();
        departed.dedup();
        if !departed.is_empty() {
            self.generation.fetch_add(1, Relaxed);
        }
        for m in departed {
            mdb.flush_member(m);
        }
    }

    /// A number that moves whenever a membership comes or goes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// Groups in the table.
    pub fn groups(&self) -> usize {
        self.read().len()
    }

    /// Membership and router rows as `vswitchctl mdb` shows them.
    pub fn rows(&self) -> (Vec<GroupRow>, Vec<RouterRow>) {
        let now = Instant::now();
        let mdb = self.read();
        (mdb.rows(now), mdb.router_rows(now))
    }

    /// Static membership of port `port` in `group` of `domain` (never aged).
    pub fn add_static(&self, domain: DomainId, port: PortId, group: IpAddr) {
        self.write().add_static(domain, Member::Port(port), group);
        self.generation.fetch_add(1, Relaxed);
    }
}
