//! What one build of the [`Pipelines`](super::Pipelines) keeps for the next, so that a
//! Southbound change costs what it touches rather than a parse and compile of every
//! logical flow (ovn-controller's incremental processing, `lflow_handle_changed_*`, has
//! the same aim).
//!
//! - Match and action texts stay parsed (`Parsed`): a parse depends on the text and
//!   the option tables only.
//! - Address sets and port groups stay lexed, each behind an `Arc` that is reused while
//!   its row's contents stay the same: a compiled flow's dependency on one is then a
//!   pointer comparison. An address set is lexed when a flow first names it.
//! - Each compiled flow (per datapath, match, actions, pipeline and table) remembers
//!   what its compilation asked of the datapath's context (`Dep`: a port's key, a
//!   set, a group, a port's residency) and the answers; the next build reuses it when
//!   every question gets the same answer again. A new port group member, address or
//!   port recompiles exactly the flows that asked about it.
//! - A datapath whose flows are the same rows with the same texts (a signature over
//!   them) and whose context answers all its flows' questions as before keeps its
//!   tables whole (shared, hit counters included): a build then costs one pass over
//!   the flow rows plus the datapaths that changed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use ovn_lflow::{Actions, AddressSet, CompiledExpr, Context, Expr, Field};
use ovsdb::Uuid;
use rustc_hash::FxHashMap;

/// Actions parsed, with the prerequisites they add to the match, or why not.
pub(super) type ParsedActions = Result<(Arc<Actions>, Option<Expr>), String>;

/// A flow compiled for one datapath, with what the build notes of it.
#[derive(Debug)]
pub(super) struct CompiledFlow {
    pub matcher: Arc<CompiledExpr>,
    pub actions: Arc<Actions>,
    /// The first field it tests that the data path's cache key leaves out.
    pub unkeyed: Option<Field>,
    /// The first of its actions vswitchd does not execute.
    pub refusal: Option<String>,
    /// The lengths its `check_pkt_larger` actions compare with (bytes).
    pub sizes: Vec<u16>,
}

/// A flow compiled for one datapath, or why not.
pub(super) type Compiled = Result<Arc<CompiledFlow>, String>;

/// Texts parsed: matches by text, actions by (text, pipeline, table); and the
/// compiled matches, one copy of equal ones.
#[derive(Default)]
pub(super) struct Parsed {
    pub matches: HashMap<Arc<str>, Result<Expr, String>>,
    pub actions: HashMap<(Arc<str>, u8, u8), ParsedActions>,
    matchers: rustc_hash::FxHashSet<Arc<CompiledExpr>>,
}

impl Parsed {
    /// The copy of compiled match `m` the flows share: port names compile to
    /// their keys, which repeat from switch to switch (`inport == "ls7p0"` and
    /// `inport == "ls9p0"` are both `inport == 1`), so most of a deployment's
    /// per-switch flows compile to matches other switches have too.
    pub fn matcher(&mut self, m: CompiledExpr) -> Arc<CompiledExpr> {
        if let Some(a) = self.matchers.get(&m) {
            return a.clone();
        }
        let a = Arc::new(m);
        self.matchers.insert(a.clone());
        a
    }

    /// Drops what no compiled flow holds any more: parsed actions and compiled
    /// matches of flows that went (they would otherwise stay for the process's
    /// life).
    fn prune(&mut self) {
        self.actions
            .retain(|_, p| p.as_ref().is_ok_and(|(a, _)| Arc::strong_count(a) > 1));
        self.matchers.retain(|m| Arc::strong_count(m) > 1);
    }
}

/// An address set row's addresses (`sb::AddressSet::addresses`): the cache holds the
/// row's own list, not a copy, and knows it unchanged by its address.
type Addresses = Arc<Vec<Arc<str>>>;

/// One compiled flow's key within its datapath: (flow row, pipeline, table).
pub(super) type FlowKey = (Uuid, u8, u8);

/// A compiled flow with the texts it was compiled from and its dependencies.
#[derive(Clone)]
struct Entry {
    texts: (Arc<str>, Arc<str>),
    deps: Box<[Dep]>,
    result: Compiled,
}

/// A datapath's compiled flows by key: a list sorted by key. (A hash map's buckets
/// are a power of two: 10^5 entries over a deployment's datapaths held twice their
/// size on average.)
#[derive(Default)]
struct FlowMap(Vec<(FlowKey, Option<Entry>)>);

impl FlowMap {
    /// Takes the entry of `key` out, if there is one.
    fn take(&mut self, key: &FlowKey) -> Option<Entry> {
        let i = self.0.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        self.0[i].1.take()
    }

    /// Adds an entry; [`seal`](Self::seal) before taking any.
    fn push(&mut self, key: FlowKey, e: Entry) {
        self.0.push((key, Some(e)));
    }

    /// Sorts the entries pushed by key (the last pushed of a key wins) and drops the
    /// list's slack.
    fn seal(&mut self) {
        self.0.sort_by_key(|(k, _)| *k);
        self.0.reverse();
        self.0.dedup_by(|a, b| a.0 == b.0);
        self.0.reverse();
        self.0.shrink_to_fit();
    }

    /// The keys that still have an entry.
    fn keys(&self) -> impl Iterator<Item = FlowKey> + '_ {
        self.0.iter().filter(|(_, e)| e.is_some()).map(|(k, _)| *k)
    }
}

/// A question compiling a flow asked its datapath's context, with the answer it got.
#[derive(Debug, Clone)]
pub(super) enum Dep {
    /// An address set, by name.
    Set(Arc<str>, Option<Arc<AddressSet>>),
    /// A port group, by name (the datapath-scoped SB name is tried first).
    Group(Arc<str>, Option<Arc<Vec<String>>>),
    Port(Arc<str>, Option<u32>),
    Resident(Arc<str>, bool),
}

fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// What a datapath's build produced that a later build can adopt whole.
#[derive(Debug, Clone)]
pub(super) struct DpOut {
    pub tables: Arc<[Vec<super::tables::Table>; 2]>,
    pub beyond_l2: bool,
    pub unsupported: Option<(String, String, Uuid)>,
    pub unkeyed: Option<(Field, String, Uuid)>,
    pub skipped: Vec<super::tables::Skipped>,
    /// The lengths its flows' `check_pkt_larger` actions compare with, sorted, once
    /// each.
    pub sizes: Vec<u16>,
    /// (Datapath, flow) pairs in its tables.
    pub flows: usize,
}

/// One datapath's part of the cache.
#[derive(Default)]
struct DpCache {
    /// A hash over its flow rows (uuid, pipeline, table, priority, texts, stage).
    sig: u64,
    /// Every question its flows' compilation asked, once each.
    deps: Vec<Dep>,
    flows: FlowMap,
    out: Option<DpOut>,
}

/// What one build did with its (datapath, flow) pairs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Compiled afresh.
    pub compiled: usize,
    /// Taken from the datapath's previous build (the same texts, its questions
    /// answered alike), or its tables kept whole.
    pub reused: usize,
    /// Taken from the same flow compiled for another datapath (of its datapath group)
    /// whose questions this datapath answers alike.
    pub shared: usize,
}

/// A datapath being built: its old entries, the entries it uses, their questions.
#[derive(Default)]
pub(super) struct DpBuild {
    old: FlowMap,
    new: FlowMap,
    deps: Vec<Dep>,
}

/// What builds keep for the next one; [`Default`] is an empty cache (a full build).
#[derive(Default)]
pub struct BuildCache {
    pub(super) parsed: Parsed,
    /// The option rows the parsed actions were parsed with (`DHCP_Options`,
    /// `DHCPv6_Options`): other rows drop every parse.
    pub(super) options: Vec<(String, i64, String)>,
    sets: HashMap<String, Arc<LazySet>>,
    groups: HashMap<String, Arc<Vec<String>>>,
    dps: FxHashMap<u32, DpCache>,
    /// Datapaths this build made or kept, which become the cache of the next.
    used: FxHashMap<u32, DpCache>,
    /// The latest compilation of each flow row of a datapath group, whatever datapath
    /// it was for: the group's other datapaths whose context answers its questions
    /// alike (most of a switch's flows ask none) share it instead of compiling it
    /// again. A flow of one datapath is never another's: it is not kept here.
    shared: FxHashMap<FlowKey, Entry>,
    /// The names the entries' questions asked about.
    names: Names,
    /// What the last build did.
    pub(super) stats: BuildStats,
    /// Each datapath's version in the last build, with the tables and fingerprint it
    /// was given for (the tables held, so that a new table set cannot take their
    /// address).
    versions: FxHashMap<u32, Version>,
    /// The versions of this build, which become `versions` when it ends.
    versions_next: FxHashMap<u32, Version>,
    /// The last version handed out.
    last_version: u64,
    /// The generation of the stage names the cached tables were built with
    /// ([`StageNames::generation`](crate::ovn::stages::StageNames::generation)).
    pub(super) stages_generation: u64,
}

/// A datapath's version and what it was given for.
struct Version {
    tables: Arc<[Vec<super::tables::Table>; 2]>,
    fingerprint: u64,
    version: u64,
}

impl BuildCache {
    /// Drops every parse when the option tables changed.
    pub(super) fn set_options(&mut self, options: Vec<(String, i64, String)>) {
        if options != self.options {
            self.parsed = Parsed::default();
            self.dps.clear();
            self.shared.clear();
            self.options = options;
        }
    }

    /// The address sets of `rows` (name, addresses), each lexed when a flow first asks
    /// for it, reusing the previous build's for a set whose addresses are unchanged.
    pub(super) fn address_sets<'a>(
        &mut self,
        rows: impl Iterator<Item = (&'a str, &'a Addresses)>,
    ) -> HashMap<String, Arc<LazySet>> {
        let mut next = HashMap::new();
        for (name, addrs) in rows {
            let set = match self.sets.remove(name) {
                Some(s) if Arc::ptr_eq(&s.addrs, addrs) || s.addrs == *addrs => s,
                _ => Arc::new(LazySet {
                    addrs: addrs.clone(),
                    lexed: std::sync::OnceLock::new(),
                }),
            };
            next.insert(name.to_string(), set);
        }
        self.sets = next;
        self.sets.clone()
    }

    /// The port groups of `rows` (name, member names): the previous build's `Arc` for
    /// one whose members are unchanged, else the row's.
    pub(super) fn port_groups<'a>(
        &mut self,
        rows: impl Iterator<Item = (&'a str, &'a Arc<Vec<String>>)>,
    ) -> HashMap<String, Arc<Vec<String>>> {
        let mut next = HashMap::new();
        for (name, ports) in rows {
            let g = match self.groups.remove(name) {
                Some(g) if g == *ports => g,
                _ => ports.clone(),
            };
            next.insert(name.to_string(), g);
        }
        self.groups = next;
        self.groups.clone()
    }

    /// The signature datapath `key`'s flows had in the last build, if it was built.
    pub(super) fn last_signature(&self, key: u32) -> Option<u64> {
        self.dps.get(&key).map(|d| d.sig)
    }

    /// Datapath `key`'s tables from the last build if its flows' signature is `sig`
    /// again and `ctx` answers all their questions as before; otherwise what the last
    /// build compiled for it, to build it flow by flow.
    pub(super) fn datapath(
        &mut self,
        key: u32,
        sig: u64,
        ctx: &DpContext<'_>,
    ) -> Result<DpOut, DpBuild> {
        let old = self.dps.remove(&key).unwrap_or_default();
        match &old.out {
            Some(out) if old.sig == sig && old.deps.iter().all(|d| ctx.still(d)) => {
                let out = out.clone();
                self.stats.reused += out.flows;
                self.used.insert(key, old);
                Ok(out)
            }
            _ => {
                tracing::trace!(
                    key,
                    known = old.out.is_some(),
                    same_flows = old.sig == sig,
                    failed = ?old.deps.iter().find(|d| !ctx.still(d)).map(Dep::name),
                    "datapath rebuilt"
                );
                Err(DpBuild {
                    old: old.flows,
                    ..DpBuild::default()
                })
            }
        }
    }

    /// Ends datapath `key`'s build (`b`, producing `out`) with flow signature `sig`.
    pub(super) fn built(&mut self, key: u32, sig: u64, mut b: DpBuild, out: DpOut) {
        b.deps.sort_by(|x, y| x.name().cmp(&y.name()));
        b.deps.dedup_by(|x, y| x.name() == y.name());
        // Kept until the datapath changes: no growth slack (the lists grew by
        // doubling; 10^5 entries over a deployment's datapaths).
        b.deps.shrink_to_fit();
        b.new.seal();
        self.used.insert(
            key,
            DpCache {
                sig,
                deps: b.deps,
                flows: b.new,
                out: Some(out),
            },
        );
    }

    /// The flow compiled for `key` from `texts` (match, actions) by an earlier build
    /// of this datapath, or for another datapath (of its datapath group), if the texts
    /// are the same and `ctx` answers each of its questions as before; otherwise
    /// `compile` runs with a context that records them. `grouped`: the flow row is a
    /// datapath group's (only those are shared). Returns the texts (the row's, or
    /// the earlier build's where equal) and the result.
    pub(super) fn compiled(
        &mut self,
        b: &mut DpBuild,
        (key, grouped): (FlowKey, bool),
        texts: (&Arc<str>, &Arc<str>),
        ctx: &DpContext<'_>,
        compile: impl FnOnce(&dyn Context, &mut Parsed, &Arc<str>, &Arc<str>) -> Compiled,
    ) -> ((Arc<str>, Arc<str>), Compiled) {
        let same = |a: &Arc<str>, b: &Arc<str>| Arc::ptr_eq(a, b) || **a == **b;
        let valid = |e: &Entry| {
            same(&e.texts.0, texts.0)
                && same(&e.texts.1, texts.1)
                && e.deps.iter().all(|d| ctx.still(d))
        };
        let e = match b.old.take(&key) {
            Some(e) if valid(&e) => {
                self.stats.reused += 1;
                e
            }
            old => match self.shared.get(&key).filter(|e| grouped && valid(e)) {
                Some(e) => {
                    self.stats.shared += 1;
                    e.clone()
                }
                None => {
                    let e = self.compile_entry(key, old.as_ref(), texts, ctx, compile);
                    if grouped {
                        self.shared.insert(key, e.clone());
                    }
                    e
                }
            },
        };
        b.deps.extend(e.deps.iter().cloned());
        let out = (e.texts.clone(), e.result.clone());
        b.new.push(key, e);
        out
    }

    /// Compiles `texts` for `key` with a context that records its questions (the
    /// texts are the flow row's, shared: never copied per datapath).
    fn compile_entry(
        &mut self,
        key: FlowKey,
        old: Option<&Entry>,
        texts: (&Arc<str>, &Arc<str>),
        ctx: &DpContext<'_>,
        compile: impl FnOnce(&dyn Context, &mut Parsed, &Arc<str>, &Arc<str>) -> Compiled,
    ) -> Entry {
        if let Some(e) = old {
            let failed = e.deps.iter().find(|d| !ctx.still(d));
            tracing::trace!(?key, failed = ?failed.map(Dep::name), "flow recompiled");
        }
        let (m, a) = (texts.0.clone(), texts.1.clone());
        let mut names = std::mem::take(&mut self.names);
        let rec = Recording {
            ctx,
            deps: RefCell::default(),
            names: RefCell::new(&mut names),
        };
        let result = compile(&rec, &mut self.parsed, &m, &a);
        let deps = rec.deps.into_inner().into_boxed_slice();
        self.names = names;
        self.stats.compiled += 1;
        Entry {
            texts: (m, a),
            deps,
            result,
        }
    }

    /// The version of datapath `key` with `tables` and `fingerprint`: the last build's
    /// when both are the same (the same tables, not equal ones: kept whole), else a new
    /// one.
    pub(super) fn version(
        &mut self,
        key: u32,
        tables: &Arc<[Vec<super::tables::Table>; 2]>,
        fingerprint: u64,
    ) -> u64 {
        let kept = self
            .versions
            .remove(&key)
            .filter(|v| Arc::ptr_eq(&v.tables, tables) && v.fingerprint == fingerprint);
        let v = kept.unwrap_or_else(|| {
            self.last_version += 1;
            Version {
                tables: tables.clone(),
                fingerprint,
                version: self.last_version,
            }
        });
        let version = v.version;
        self.versions_next.insert(key, v);
        version
    }

    /// Starts a build.
    pub(super) fn start(&mut self) {
        self.stats = BuildStats::default();
    }

    /// Ends a build: what it did not use is dropped, and the parsed matches (a
    /// compiled flow no longer needs its syntax tree; a later recompile parses again,
    /// which costs less than holding every tree).
    pub(super) fn finish(&mut self) {
        self.dps = std::mem::take(&mut self.used);
        self.versions = std::mem::take(&mut self.versions_next);
        if self.stats.compiled > 0 {
            // Flows no datapath has any more leave the shared compilations.
            let live: rustc_hash::FxHashSet<FlowKey> =
                self.dps.values().flat_map(|d| d.flows.keys()).collect();
            self.shared.retain(|k, _| live.contains(k));
            // Names no entry asks about any more.
            self.names.retain(|n| Arc::strong_count(n) > 1);
            self.parsed.prune();
        }
        self.parsed.matches = HashMap::new();
    }
}

impl Dep {
    /// What it asked about: (kind, name).
    fn name(&self) -> (u8, &str) {
        match self {
            Dep::Set(n, _) => (0, &**n),
            Dep::Group(n, _) => (1, &**n),
            Dep::Port(n, _) => (2, &**n),
            Dep::Resident(n, _) => (3, &**n),
        }
    }
}

/// An address set's addresses, lexed when first asked for: most of a deployment's
/// sets hold the addresses of ports on switches this chassis does not have, which no
/// local flow names (at 40,000 ports, 7.5 MB lexed whole).
pub(super) struct LazySet {
    addrs: Addresses,
    lexed: std::sync::OnceLock<Arc<AddressSet>>,
}

impl LazySet {
    /// The set, lexed.
    fn lexed(&self) -> &Arc<AddressSet> {
        self.lexed
            .get_or_init(|| Arc::new(AddressSet::new(self.addrs.iter())))
    }
}

/// Per-datapath resolution of names for the expression compiler.
pub(super) struct DpContext<'a> {
    pub key: u32,
    /// A logical router (its stages are named as a router's).
    pub router: bool,
    /// The stage names.
    pub stages: &'a crate::ovn::stages::StageNames,
    pub names: &'a HashMap<String, u16>,
    pub sets: &'a HashMap<String, Arc<LazySet>>,
    pub groups: &'a HashMap<String, Arc<Vec<String>>>,
    pub resident: &'a dyn Fn(&str) -> bool,
}

impl DpContext<'_> {
    /// The name of flow `f`'s stage here (`""` when not known).
    pub fn stage(&self, f: &crate::ovn::sb::LogicalFlow) -> &str {
        crate::ovn::stages::StageKey::of(self.router, f).map_or("", |k| self.stages.name(k))
    }

    /// Group `name` as SB names it for this datapath (expr.c
    /// `get_sb_port_group_name`: `<datapath key>_<name>`), else by the name alone.
    fn group(&self, scoped: &str, name: &str) -> Option<&Arc<Vec<String>>> {
        self.groups.get(scoped).or_else(|| self.groups.get(name))
    }

    fn scoped(&self, name: &str) -> String {
        format!("{}_{name}", self.key)
    }

    /// Whether this context gives the answer `d` recorded.
    fn still(&self, d: &Dep) -> bool {
        match d {
            Dep::Port(n, k) => self.port_key(n) == *k,
            Dep::Resident(n, r) => self.is_chassis_resident(n) == *r,
            Dep::Set(n, s) => same(&self.sets.get(&**n).map(|l| l.lexed().clone()), s),
            // Scoped by this datapath's key: the answer may come from another's.
            Dep::Group(n, g) => same(&self.group(&self.scoped(n), n).cloned(), g),
        }
    }
}

impl Context for DpContext<'_> {
    fn address_set(&self, name: &str) -> Option<&AddressSet> {
        self.sets.get(name).map(|s| &**s.lexed())
    }

    fn port_group(&self, name: &str) -> Option<&[String]> {
        self.group(&self.scoped(name), name).map(|g| g.as_slice())
    }

    fn port_key(&self, name: &str) -> Option<u32> {
        self.names.get(name).map(|&k| u32::from(k))
    }

    fn is_chassis_resident(&self, name: &str) -> bool {
        (self.resident)(name)
    }
}

/// A [`DpContext`] that notes every question and its answer, with the names asked
/// about interned in `names`.
struct Recording<'c, 'a> {
    ctx: &'c DpContext<'a>,
    deps: RefCell<Vec<Dep>>,
    names: RefCell<&'c mut Names>,
}

/// The names compiled flows asked about, one copy each: a port's name is asked by
/// every flow of every datapath that names it (a `String` each took 16 MB of a
/// 40,000-port tenant's heap).
type Names = rustc_hash::FxHashSet<Arc<str>>;

impl Recording<'_, '_> {
    fn note(&self, dep: impl FnOnce(Arc<str>) -> Dep, name: &str) {
        let mut names = self.names.borrow_mut();
        let n = match names.get(name) {
            Some(n) => n.clone(),
            None => {
                let n: Arc<str> = Arc::from(name);
                names.insert(n.clone());
                n
            }
        };
        self.deps.borrow_mut().push(dep(n));
    }
}

impl Context for Recording<'_, '_> {
    fn address_set(&self, name: &str) -> Option<&AddressSet> {
        let s = self.ctx.sets.get(name).map(|l| l.lexed());
        self.note(|n| Dep::Set(n, s.cloned()), name);
        s.map(|s| &**s)
    }

    fn port_group(&self, name: &str) -> Option<&[String]> {
        let scoped = self.ctx.scoped(name);
        let g = self.ctx.group(&scoped, name);
        self.note(|n| Dep::Group(n, g.cloned()), name);
        g.map(|g| g.as_slice())
    }

    fn port_key(&self, name: &str) -> Option<u32> {
        let k = self.ctx.port_key(name);
        self.note(|n| Dep::Port(n, k), name);
        k
    }

    fn is_chassis_resident(&self, name: &str) -> bool {
        let r = self.ctx.is_chassis_resident(name);
        self.note(|n| Dep::Resident(n, r), name);
        r
    }
}

impl std::fmt::Debug for BuildCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildCache")
            .field("matches", &self.parsed.matches.len())
            .field("actions", &self.parsed.actions.len())
            .field("datapaths", &self.dps.len())
            .field("shared", &self.shared.len())
            .field("last_build", &self.stats)
            .finish()
    }
}
