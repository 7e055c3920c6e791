//! The MDB against a reference model, over random joins, leaves, source
//! changes, queries, aging and flushes (s2n-quic-xdp style: generated op
//! lists, state compared after every op).
//!
//! The model is the module documentation's rules written with sets: per
//! (domain, group, member) a filter mode, a source set and an expiry; per
//! (domain, member) a router expiry. Static members have no expiry. Messages go through the real frame
//! builders and `parse`, so the test also covers their round trip.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use mcsnoop::{parse, query, Mdb, MdbConfig, RecordKind};
use proptest::prelude::*;

const MAX_GROUPS: usize = 3;
const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The last group is link-local: ignored.
const GROUPS: [Ipv4Addr; 5] = [
    Ipv4Addr::new(239, 0, 0, 1),
    Ipv4Addr::new(239, 0, 0, 2),
    Ipv4Addr::new(232, 0, 0, 3),
    Ipv4Addr::new(239, 0, 0, 4),
    Ipv4Addr::new(224, 0, 0, 5),
];
/// Sources used in records, plus one (index 4) never listed.
const SOURCES: [Ipv4Addr; 5] = [
    Ipv4Addr::new(192, 0, 2, 1),
    Ipv4Addr::new(192, 0, 2, 2),
    Ipv4Addr::new(192, 0, 2, 3),
    Ipv4Addr::new(192, 0, 2, 4),
    Ipv4Addr::new(198, 51, 100, 1),
];
const KINDS: [RecordKind; 6] = [
    RecordKind::ModeIsInclude,
    RecordKind::ModeIsExclude,
    RecordKind::ChangeToInclude,
    RecordKind::ChangeToExclude,
    RecordKind::AllowNewSources,
    RecordKind::BlockOldSources,
];

#[derive(Clone, Debug)]
enum Op {
    /// IGMPv3 report from member `m` in domain `d`: (kind, group, source bits).
    Report {
        d: u8,
        m: u8,
        records: Vec<(usize, usize, u8)>,
    },
    V2Join {
        d: u8,
        m: u8,
        g: usize,
    },
    V2Leave {
        d: u8,
        m: u8,
        g: usize,
    },
    Query {
        d: u8,
        m: u8,
    },
    /// A static membership (configuration).
    Static {
        d: u8,
        m: u8,
        g: usize,
    },
    /// Advance the clock and age.
    Age {
        secs: u64,
    },
    FlushMember {
        m: u8,
    },
    FlushDomain {
        d: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let record = (0..KINDS.len(), 0..GROUPS.len(), 0u8..16);
    prop_oneof![
        8 => (0u8..2, 0u8..4, prop::collection::vec(record, 1..4))
            .prop_map(|(d, m, records)| Op::Report { d, m, records }),
        3 => (0u8..2, 0u8..4, 0..GROUPS.len()).prop_map(|(d, m, g)| Op::V2Join { d, m, g }),
        2 => (0u8..2, 0u8..4, 0..GROUPS.len()).prop_map(|(d, m, g)| Op::V2Leave { d, m, g }),
        2 => (0u8..2, 0u8..4).prop_map(|(d, m)| Op::Query { d, m }),
        1 => (0u8..2, 0u8..4, 0..4usize).prop_map(|(d, m, g)| Op::Static { d, m, g }),
        2 => (0u64..400).prop_map(|secs| Op::Age { secs }),
        1 => (0u8..4).prop_map(|m| Op::FlushMember { m }),
        1 => (0u8..2).prop_map(|d| Op::FlushDomain { d }),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct Filter {
    include: bool,
    sources: BTreeSet<Ipv4Addr>,
    /// `None`: static.
    expires: Option<Instant>,
}

#[derive(Default)]
struct Model {
    groups: BTreeMap<(u8, Ipv4Addr), BTreeMap<u8, Filter>>,
    routers: BTreeMap<(u8, u8), Instant>,
}

impl Model {
    fn record(
        &mut self,
        d: u8,
        m: u8,
        kind: RecordKind,
        g: Ipv4Addr,
        srcs: &[Ipv4Addr],
        now: Instant,
    ) {
        if g.octets()[..3] == [224, 0, 0] {
            return;
        }
        let b: BTreeSet<Ipv4Addr> = srcs.iter().copied().collect();
        let old = self.groups.get(&(d, g)).and_then(|ms| ms.get(&m));
        if old.is_some_and(|f| f.expires.is_none()) {
            return;
        }
        let new = match (kind, old.map(|f| f.include)) {
            (RecordKind::ModeIsExclude | RecordKind::ChangeToExclude, _) => Some((false, b)),
            (RecordKind::ModeIsInclude | RecordKind::ChangeToInclude, _) => Some((true, b)),
            (RecordKind::AllowNewSources, Some(false)) => Some((false, &old.unwrap().sources - &b)),
            (RecordKind::AllowNewSources, _) => {
                let a = old.map(|f| f.sources.clone()).unwrap_or_default();
                Some((true, &a | &b))
            }
            (RecordKind::BlockOldSources, Some(inc)) => {
                let a = &old.unwrap().sources;
                Some((inc, if inc { a - &b } else { a | &b }))
            }
            (RecordKind::BlockOldSources, None) => None,
        };
        match new {
            Some((true, s)) if s.is_empty() => self.leave(d, m, g),
            None => self.leave(d, m, g),
            Some((include, sources)) => {
                if !self.groups.contains_key(&(d, g)) && self.groups.len() >= MAX_GROUPS {
                    return;
                }
                let f = Filter {
                    include,
                    sources,
                    expires: Some(now + Duration::from_secs(300)),
                };
                self.groups.entry((d, g)).or_default().insert(m, f);
            }
        }
    }

    fn leave(&mut self, d: u8, m: u8, g: Ipv4Addr) {
        if let Some(ms) = self.groups.get_mut(&(d, g)) {
            if ms.get(&m).is_some_and(|f| f.expires.is_none()) {
                return;
            }
            ms.remove(&m);
            if ms.is_empty() {
                self.groups.remove(&(d, g));
            }
        }
    }

    fn age(&mut self, now: Instant) {
        for ms in self.groups.values_mut() {
            ms.retain(|_, f| !matches!(f.expires, Some(e) if e <= now));
        }
        self.groups.retain(|_, ms| !ms.is_empty());
        self.routers.retain(|_, e| *e > now);
    }

    fn members(&self, d: u8, g: Ipv4Addr, s: Ipv4Addr) -> Option<Vec<u8>> {
        let ms = self.groups.get(&(d, g))?;
        Some(
            ms.iter()
                .filter(|(_, f)| f.sources.contains(&s) == f.include)
                .map(|(m, _)| *m)
                .collect(),
        )
    }
}

fn bits(b: u8) -> Vec<Ipv4Addr> {
    (0..4)
        .filter(|i| b & (1 << i) != 0)
        .map(|i| SOURCES[i])
        .collect()
}

fn apply(mdb: &mut Mdb<u8, u8>, model: &mut Model, op: &Op, now: &mut Instant) {
    let t = *now;
    let snoop = |mdb: &mut Mdb<u8, u8>, d, m, frame: Vec<u8>| {
        let msg = parse(&frame[14..]).unwrap().unwrap();
        mdb.snoop(d, m, &msg, t);
    };
    match op {
        Op::Report { d, m, records } => {
            let recs: Vec<(RecordKind, Ipv4Addr, Vec<Ipv4Addr>)> = records
                .iter()
                .map(|&(k, g, b)| (KINDS[k], GROUPS[g], bits(b)))
                .collect();
            let wire: Vec<(RecordKind, Ipv4Addr, &[Ipv4Addr])> =
                recs.iter().map(|(k, g, s)| (*k, *g, &s[..])).collect();
            snoop(mdb, *d, *m, query::igmp_v3_report(MAC, HOST, &wire));
            for (k, g, s) in &recs {
                model.record(*d, *m, *k, *g, s, t);
            }
        }
        Op::V2Join { d, m, g } => {
            snoop(mdb, *d, *m, query::igmp_v2_report(MAC, HOST, GROUPS[*g]));
            model.record(*d, *m, RecordKind::ModeIsExclude, GROUPS[*g], &[], t);
        }
        Op::V2Leave { d, m, g } => {
            snoop(mdb, *d, *m, query::igmp_v2_leave(MAC, HOST, GROUPS[*g]));
            model.leave(*d, *m, GROUPS[*g]);
        }
        Op::Query { d, m } => {
            snoop(
                mdb,
                *d,
                *m,
                query::igmp_general_query(MAC, HOST, Duration::from_secs(10)),
            );
            model.routers.insert((*d, *m), t + Duration::from_secs(255));
        }
        Op::Static { d, m, g } => {
            mdb.add_static(*d, *m, GROUPS[*g].into());
            let f = Filter {
                include: false,
                sources: BTreeSet::new(),
                expires: None,
            };
            model
                .groups
                .entry((*d, GROUPS[*g]))
                .or_default()
                .insert(*m, f);
        }
        Op::Age { secs } => {
            *now += Duration::from_secs(*secs);
            mdb.age(*now);
            model.age(*now);
        }
        Op::FlushMember { m } => {
            mdb.flush_member(*m);
            model.groups.values_mut().for_each(|ms| {
                ms.remove(m);
            });
            model.groups.retain(|_, ms| !ms.is_empty());
            model.routers.retain(|(_, x), _| x != m);
        }
        Op::FlushDomain { d } => {
            mdb.flush_domain(*d);
            model.groups.retain(|(x, _), _| x != d);
            model.routers.retain(|(x, _), _| x != d);
        }
    }
}

fn compare(mdb: &Mdb<u8, u8>, model: &Model, now: Instant) -> Result<(), TestCaseError> {
    for d in 0..2 {
        for g in GROUPS {
            for s in SOURCES {
                let mut out = Vec::new();
                let got = mdb
                    .members(d, g.into(), IpAddr::V4(s), &mut out)
                    .then_some(out);
                prop_assert_eq!(
                    got,
                    model.members(d, g, s),
                    "domain {} group {} source {}",
                    d,
                    g,
                    s
                );
            }
        }
        let routers: Vec<u8> = mdb.routers(d).collect();
        let want: Vec<u8> = model
            .routers
            .keys()
            .filter(|(x, _)| *x == d)
            .map(|(_, m)| *m)
            .collect();
        prop_assert_eq!(routers, want);
    }
    prop_assert_eq!(mdb.len(), model.groups.len());
    let rows = mdb.rows(now);
    prop_assert_eq!(
        rows.len(),
        model.groups.values().map(BTreeMap::len).sum::<usize>()
    );
    for r in &rows {
        let IpAddr::V4(g) = r.group else {
            unreachable!()
        };
        let f = &model.groups[&(r.domain, g)][&r.member];
        prop_assert_eq!(
            r.expires_in,
            f.expires.map(|e| e.saturating_duration_since(now))
        );
        prop_assert_eq!(
            r.mode.as_str(),
            if f.include { "include" } else { "exclude" }
        );
    }
    prop_assert!(rows
        .windows(2)
        .all(|w| (w[0].domain, w[0].group, w[0].member) < (w[1].domain, w[1].group, w[1].member)));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mdb_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        let config = MdbConfig { max_groups: MAX_GROUPS, ..Default::default() };
        let mut mdb: Mdb<u8, u8> = Mdb::new(config);
        let mut model = Model::default();
        let mut now = Instant::now();
        let mut generation = mdb.generation();
        for op in &ops {
            let before = mdb.rows(now);
            let routers_before = mdb.router_rows(now).len();
            apply(&mut mdb, &mut model, op, &mut now);
            compare(&mdb, &model, now)?;
            // Generation: never decreases, and moves when forwarding does.
            prop_assert!(mdb.generation() >= generation);
            let same = |a: &[mcsnoop::GroupRow<u8, u8>], b: &[mcsnoop::GroupRow<u8, u8>]| {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| {
                    (x.domain, x.group, x.member, x.mode, &x.sources)
                        == (y.domain, y.group, y.member, y.mode, &y.sources)
                })
            };
            if !same(&before, &mdb.rows(now)) || routers_before != mdb.router_rows(now).len() {
                prop_assert!(mdb.generation() > generation, "{:?} changed forwarding", op);
            }
            generation = mdb.generation();
        }
    }
}
