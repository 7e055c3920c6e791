//! The logical pipelines of the local datapaths, built from the Southbound rows
//! (`Logical_Flow`, `Logical_DP_Group`, `Port_Binding`, `Multicast_Group`,
//! `Address_Set`, `Port_Group`, `MAC_Binding`, `Static_MAC_Binding`, `FDB`,
//! `DHCP_Options`, `DHCPv6_Options`) into one immutable [`Pipelines`] value, swapped
//! whole like the topology.
//!
//! Each flow's match is parsed once per text, then annotated and compiled per datapath
//! (port names and `@port_group`s resolve per datapath, as ovn-controller's
//! `lookup_port_cb` and expr.c's `get_sb_port_group_name` do); its actions are parsed
//! once per (text, pipeline, table). A flow that does not parse is skipped and counted
//! ([`Pipelines::skipped`]), as ovn-controller skips it; a flow whose actions vswitchd
//! does not execute makes its datapath [`Datapath::unsupported`].

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use ovn_lflow::actions::{ActionParams, Pipeline};
use ovn_lflow::dhcp::OptionTable;
use ovn_lflow::{Actions, CompiledExpr, Context, Expr, SymbolTable};
use ovsdb::Uuid;

use super::cache::{BuildCache, Compiled, CompiledFlow, DpBuild, DpContext, DpOut, Parsed};
use super::portsec::PortSecurity;
use super::support::refusal;
use crate::config::MacAddr;
use crate::ovn::rows::Sb;
use crate::ovn::sb::{LogicalFlow, PortBinding};
use crate::ovn::stages;

/// Tables per pipeline (ovn-controller's `LOG_PIPELINE_LEN`: OpenFlow tables 8..37 and
/// 42..64 hold them).
pub const N_TABLES: u8 = 29;

/// Where a logical port is, as this chassis sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// Bound to this chassis.
    Local,
    /// Bound to another chassis, by name.
    Remote(String),
    /// Bound nowhere (or a port type that is everywhere: patch ports).
    Nowhere,
    /// Bound to several chassis (a live migration, `requested-chassis=MAIN,OTHER`:
    /// `Port_Binding.additional_chassis`): `here` when it is active on this one too
    /// (its main chassis, or an additional one not awaiting activation), and the
    /// others by name, sorted. OVN sends its frames to each (physical.c, by tunnel
    /// even where a provider network joins them).
    Multi {
        /// Active on this chassis.
        here: bool,
        /// The other chassis.
        remotes: Vec<String>,
    },
}

impl Location {
    /// Whether frames to the port are delivered on this chassis.
    pub fn is_here(&self) -> bool {
        matches!(self, Location::Local | Location::Multi { here: true, .. })
    }
}

/// One logical port of a datapath.
#[derive(Debug, Clone, Hash)]
pub struct LPort {
    /// Its name (`Port_Binding.logical_port`).
    pub name: String,
    /// Its key in the datapath.
    pub key: u16,
    /// `Port_Binding.type`: `""` (a VIF), `patch`, `localnet`, `localport`,
    /// `chassisredirect`, `l3gateway`, ...
    pub kind: String,
    /// Its peer, for a patch port: (datapath key, port key).
    pub peer: Option<(u32, u16)>,
    /// Where it is bound.
    pub location: Location,
    /// Its port security (`check_in_port_sec`, `check_out_port_sec`).
    pub security: PortSecurity,
    /// For a `chassisredirect` port: the key of its distributed gateway port
    /// (`options:distributed-port`), which it stands for on the gateway chassis.
    pub distributed: Option<u16>,
}

/// A multicast group of a datapath (`_MC_flood`, `_MC_unknown`, ...).
#[derive(Debug, Clone, Hash)]
pub struct Group {
    /// Its name.
    pub name: String,
    /// Member port keys.
    pub members: Vec<u16>,
}

/// One logical flow as the interpreter runs it.
#[derive(Debug)]
pub struct Lflow {
    /// Its `Logical_Flow` row.
    pub uuid: Uuid,
    /// Higher first.
    pub priority: u16,
    /// The compiled match (with the actions' prerequisites).
    pub matcher: Arc<CompiledExpr>,
    /// The actions.
    pub actions: Arc<Actions>,
    /// The match as the database has it (for traces).
    pub match_text: Arc<str>,
    /// The actions as the database has them (for traces).
    pub actions_text: Arc<str>,
    /// Times the interpreter chose this flow (a cached decision does not count: the
    /// counters cost nothing on the data path's hits).
    pub hits: std::sync::atomic::AtomicU64,
}

/// One table (stage) of a pipeline: its flows, highest priority first.
#[derive(Debug, Default)]
pub struct Table {
    /// Its stage name (`ls_in_acl`): `external_ids:stage-name` of one of its flows
    /// ([`crate::ovn::stages`]), `""` when not known.
    pub stage: String,
    /// Its flows, by priority, highest first.
    pub flows: Vec<Lflow>,
}

/// One logical datapath (switch or router) with its pipelines.
#[derive(Debug, Default)]
pub struct Datapath {
    /// `Datapath_Binding.tunnel_key`.
    pub key: u32,
    /// Its name (`external_ids:name`).
    pub name: String,
    /// A logical router (`external_ids:logical-router`).
    pub router: bool,
    /// The ingress and egress tables, by table id.
    pub tables: Arc<[Vec<Table>; 2]>,
    /// Ports by key.
    pub ports: BTreeMap<u16, LPort>,
    /// Port and multicast group keys by name (`lookup_port_cb`: `none` is 0).
    pub names: HashMap<String, u16>,
    /// Multicast groups by key.
    pub groups: BTreeMap<u16, Group>,
    /// IP-to-MAC bindings (`MAC_Binding`, `Static_MAC_Binding`) by (port key, IP).
    pub mac_bindings: HashMap<(u16, IpAddr), MacAddr>,
    /// MACs learned behind ports (`FDB`): MAC -> port key.
    pub fdb: HashMap<MacAddr, u16>,
    /// The key of its `localnet` port when that port's network is mapped here: the
    /// switch reaches ports on other chassis through the physical network, not
    /// tunnels (ovn-controller's `physical.c`, `PORT_LOCALNET`).
    pub localnet: Option<u16>,
    /// The first flow whose action vswitchd does not execute: (action, stage, flow).
    pub unsupported: Option<(String, String, Uuid)>,
    /// Its flows do more than a logical switch's L2 forwarding: ACLs (an ACL stage
    /// that does more than pass packets on, [`stages::filters`]), DHCP, or a router
    /// attached (a patch port).
    pub beyond_l2: bool,
    /// Equal in two builds when everything a decision through this datapath reads is
    /// (its tables, ports, groups, MAC bindings, FDB): a decision the data path cached
    /// stays valid while every datapath it crossed keeps its version.
    pub version: u64,
}

impl Datapath {
    /// The ingress (`Pipeline::Ingress`) or egress tables.
    pub fn tables(&self, p: Pipeline) -> &[Table] {
        &self.tables[p as usize]
    }

    /// The port or group name of `key` (`""` when none).
    pub fn name_of(&self, key: u16) -> &str {
        if let Some(p) = self.ports.get(&key) {
            return &p.name;
        }
        self.groups.get(&key).map_or("", |g| g.name.as_str())
    }
}

/// A logical flow skipped because it did not parse.
#[derive(Debug, Clone)]
pub struct Skipped {
    /// Its row.
    pub uuid: Uuid,
    /// Its stage.
    pub stage: String,
    /// What failed.
    pub error: String,
}

/// The logical pipelines of the local datapaths: one snapshot.
#[derive(Debug, Default)]
pub struct Pipelines {
    /// Datapaths by key.
    pub datapaths: BTreeMap<u32, Datapath>,
    /// Logical ports by name: (datapath key, port key).
    pub ports: HashMap<String, (u32, u16)>,
    /// Flows skipped because they did not parse.
    pub skipped: Vec<Skipped>,
    /// The symbol table.
    pub symtab: Arc<SymbolTable>,
    /// DHCPv4 options (`DHCP_Options`).
    pub dhcp_opts: Arc<OptionTable>,
    /// DHCPv6 options (`DHCPv6_Options`).
    pub dhcpv6_opts: Arc<OptionTable>,
    /// A flow tests a field the data path's cache key leaves out (and that varies
    /// within a flow of the key): (field, stage, flow). The data path then caches
    /// nothing, since a cached decision could be another frame's.
    pub unkeyed: Option<(ovn_lflow::Field, String, Uuid)>,
    /// What this build did with each (datapath, flow) pair: compiled, reused from the
    /// last build, or shared with another datapath's.
    pub compiled: super::cache::BuildStats,
    /// The lengths `check_pkt_larger` actions compare with (bytes, an Ethernet frame or
    /// a segment of one), sorted, once each: the data path keys its decisions by how
    /// many a frame exceeds.
    pub sizes: Vec<u16>,
}

/// Fields a decision may rest on that the data path's cache key leaves out: TCP
/// flags and the IPv6 flow label. (ARP and neighbour discovery fields are not keyed
/// either, but their frames are never cached; other fields are keyed or start at a
/// constant.)
pub const UNKEYED_FIELDS: [ovn_lflow::Field; 2] =
    [ovn_lflow::Field::TcpFlags, ovn_lflow::Field::Ipv6Label];

/// Who is where: the chassis whose view the pipelines are built for.
#[derive(Debug, Clone, Copy)]
pub enum Viewpoint<'a> {
    /// Every port is local, as `ovn-trace` assumes.
    Everywhere,
    /// This chassis (its `Chassis` row), with the datapaths it runs.
    Chassis(Option<Uuid>),
    /// This chassis as it claims ports: bindings by chassis name are resolved through
    /// `Sb`; `ports` are bound here regardless of the database (a claim in flight);
    /// `networks` are the physical networks mapped here (`--ovn-bridge-mappings`),
    /// whose `localnet` ports are local.
    Claiming {
        /// This chassis' row.
        me: Option<Uuid>,
        /// Logical ports bound here.
        ports: &'a [String],
        /// Of those, the ones not active here: bound as an additional chassis
        /// awaiting activation (`activation-strategy=rarp`), or requested or bound
        /// elsewhere ([`crate::ovn::view::inactive_ports`]).
        inactive: &'a [String],
        /// Physical networks mapped here.
        networks: &'a [String],
    },
}

impl Pipelines {
    /// The pipelines of datapaths `local` (by row) as chassis `view` sees them, built
    /// from nothing.
    pub fn build(sb: &Sb, local: &[Uuid], view: Viewpoint<'_>) -> Pipelines {
        Self::build_with(sb, local, view, &mut BuildCache::default())
    }

    /// [`build`](Self::build), reusing what an earlier build with `cache` parsed and
    /// compiled where its inputs are unchanged (see [`super::cache`]).
    pub fn build_with(
        sb: &Sb,
        local: &[Uuid],
        view: Viewpoint<'_>,
        cache: &mut BuildCache,
    ) -> Pipelines {
        Self::build_changed(sb, local, view, cache, None)
    }

    /// [`build_with`](Self::build_with), told which datapaths' flow rows changed since
    /// the last build with `cache` (`None`: unknown): the others keep the last build's
    /// signature without their flows being read (with [`Sb::lflow_index`]).
    pub fn build_changed(
        sb: &Sb,
        local: &[Uuid],
        view: Viewpoint<'_>,
        cache: &mut BuildCache,
        changed: Option<&std::collections::HashSet<Uuid>>,
    ) -> Pipelines {
        let symtab = Arc::new(SymbolTable::ovn());
        let v4 = sb.dhcp_options.values().map(|o| (&o.name, o.code, &o.kind));
        let v6 = sb
            .dhcpv6_options
            .values()
            .map(|o| (&o.name, o.code, &o.kind));
        let mut options: Vec<(String, i64, String)> = v4
            .chain(v6.map(|(n, c, k)| (n, c + (1 << 32), k)))
            .map(|(n, c, k)| (n.clone(), c, k.clone()))
            .collect();
        options.sort();
        cache.set_options(options);
        let mut p = Pipelines {
            symtab: symtab.clone(),
            dhcp_opts: Arc::new(option_table(
                sb.dhcp_options
                    .values()
                    .map(|o| (o.name.as_str(), o.code, o.kind.as_str())),
                OptionTable::dhcpv4,
            )),
            dhcpv6_opts: Arc::new(option_table(
                sb.dhcpv6_options
                    .values()
                    .map(|o| (o.name.as_str(), o.code, o.kind.as_str())),
                OptionTable::dhcpv6,
            )),
            ..Pipelines::default()
        };
        let by_dp = ports_by_datapath(sb);
        for u in local {
            if let Some(dp) = datapath_of(sb, *u, by_dp.get(u).map_or(&[][..], Vec::as_slice), view)
            {
                for pt in dp.ports.values() {
                    p.ports.insert(pt.name.clone(), (dp.key, pt.key));
                }
                p.datapaths.insert(dp.key, dp);
            }
        }
        p.resolve_peers(sb);
        cache.start();
        p.add_flows(sb, local, view, cache, changed);
        for dp in p.datapaths.values_mut() {
            dp.version = cache.version(dp.key, &dp.tables, fingerprint(dp));
        }
        cache.finish();
        p.compiled = cache.stats;
        p
    }

    /// Sets each patch port's peer (datapath key, port key) from `options:peer`.
    fn resolve_peers(&mut self, sb: &Sb) {
        let peers: HashMap<&str, &str> = sb
            .ports
            .values()
            .filter(|pb| pb.kind == "patch" || pb.kind == "l3gateway")
            .filter_map(|pb| Some((pb.logical_port.as_str(), pb.options.get("peer")?.as_str())))
            .collect();
        let ports = &self.ports;
        for dp in self.datapaths.values_mut() {
            for pt in dp.ports.values_mut() {
                pt.peer = peers
                    .get(pt.name.as_str())
                    .and_then(|peer| ports.get(*peer).copied());
            }
        }
    }

    /// Parses and compiles the logical flows of every datapath, adopting the tables of
    /// those the cache still holds.
    fn add_flows(
        &mut self,
        sb: &Sb,
        local: &[Uuid],
        view: Viewpoint<'_>,
        cache: &mut BuildCache,
        changed: Option<&std::collections::HashSet<Uuid>>,
    ) {
        let sets = cache.address_sets(
            sb.address_sets
                .values()
                .map(|a| (a.name.as_str(), &a.addresses)),
        );
        let groups =
            cache.port_groups(sb.port_groups.values().map(|g| (g.name.as_str(), &g.ports)));
        // Other stage names: every datapath's tables are named (and filter) anew.
        let generation = sb.stages.generation();
        let changed = changed.filter(|_| cache.stages_generation == generation);
        cache.stages_generation = generation;
        for (key, u, flows) in flows_by_datapath(sb, local) {
            let Some(dp) = self.datapaths.get(&key) else {
                continue;
            };
            // Unchanged rows: the last signature, without reading them.
            let kept = changed
                .filter(|c| !c.contains(&u) && flows.is_none())
                .and_then(|_| cache.last_signature(key));
            let read = || {
                let mut f = flows.clone().unwrap_or_else(|| sb.flows_of(&u));
                f.sort_unstable_by_key(|(u, _)| *u);
                f.dedup_by_key(|(u, _)| *u);
                f
            };
            let (mut rows, sig) = match kept {
                Some(sig) => (None, sig),
                None => {
                    let f = read();
                    let sig = signature(&f, generation);
                    (Some(f), sig)
                }
            };
            let resident = |name: &str| self.is_resident(name, view);
            let ctx = DpContext {
                key,
                router: dp.router,
                stages: &sb.stages,
                names: &dp.names,
                sets: &sets,
                groups: &groups,
                resident: &resident,
            };
            let out = match cache.datapath(key, sig, &ctx) {
                Ok(out) => out,
                Err(mut b) => {
                    let f = rows.take().unwrap_or_else(read);
                    let out = self.build_tables(&f, &ctx, cache, &mut b);
                    cache.built(key, sig, b, out.clone());
                    out
                }
            };
            self.skipped.extend(out.skipped.iter().cloned());
            if self.unkeyed.is_none() {
                self.unkeyed.clone_from(&out.unkeyed);
            }
            let dp = self.datapaths.get_mut(&key).expect("looked up above");
            dp.tables = out.tables;
            dp.beyond_l2 = out.beyond_l2;
            dp.unsupported = out.unsupported;
            self.sizes.extend(&out.sizes);
        }
        self.sizes.sort_unstable();
        self.sizes.dedup();
    }

    /// Datapath `ctx.key`'s tables from its `flows`, each compiled or reused from `b`.
    fn build_tables(
        &self,
        flows: &[(Uuid, &LogicalFlow)],
        ctx: &DpContext<'_>,
        cache: &mut BuildCache,
        b: &mut DpBuild,
    ) -> DpOut {
        let mut tables: [Vec<Table>; 2] = Default::default();
        let mut out = DpOut {
            tables: Arc::default(),
            beyond_l2: false,
            unsupported: None,
            unkeyed: None,
            skipped: Vec::new(),
            sizes: Vec::new(),
            flows: flows.len(),
        };
        for &(uuid, f) in flows {
            if let Err(error) = self.add_flow(uuid, f, ctx, cache, b, &mut tables, &mut out) {
                let stage = ctx.stage(f).to_string();
                out.skipped.push(Skipped { uuid, stage, error });
            }
        }
        out.sizes.sort_unstable();
        out.sizes.dedup();
        for t in tables.iter_mut().flatten() {
            t.flows
                .sort_by(|a, b| b.priority.cmp(&a.priority).then(a.uuid.cmp(&b.uuid)));
            t.flows.shrink_to_fit();
        }
        out.tables = Arc::new(tables);
        out
    }

    /// Compiles (or reuses) flow `f` into `tables`, noting in `out` what it says of
    /// its datapath; why not when it does not parse.
    #[allow(clippy::too_many_arguments)]
    fn add_flow(
        &self,
        uuid: Uuid,
        f: &LogicalFlow,
        ctx: &DpContext<'_>,
        cache: &mut BuildCache,
        b: &mut DpBuild,
        tables: &mut [Vec<Table>; 2],
        out: &mut DpOut,
    ) -> Result<(), String> {
        let (Some(pipeline), Ok(table)) = (pipeline_of(f.pipeline()), u8::try_from(f.table_id()))
        else {
            return Err("bad pipeline or table_id".into());
        };
        let stage = ctx
            .stages
            .name(stages::StageKey::at(ctx.router, pipeline, table));
        let key = (uuid, pipeline as u8, table);
        let (symtab, dhcp, dhcpv6) = (&self.symtab, &self.dhcp_opts, &self.dhcpv6_opts);
        let ((match_text, actions_text), compiled) = cache.compiled(
            b,
            (key, f.logical_dp_group().is_some()),
            (f.match_(), f.actions()),
            ctx,
            |ctx, parsed, m, a| compile(symtab, dhcp, dhcpv6, (m, a), pipeline, table, ctx, parsed),
        );
        let c = compiled?;
        if out.unkeyed.is_none() {
            if let Some(field) = c.unkeyed {
                out.unkeyed = Some((field, stage.to_string(), uuid));
            }
        }
        out.beyond_l2 |= stages::filters(stage, f) || f.actions().contains("put_dhcp");
        if out.unsupported.is_none() {
            if let Some(a) = &c.refusal {
                out.unsupported = Some((a.clone(), stage.to_string(), uuid));
            }
        }
        out.sizes.extend(&c.sizes);
        let tables = &mut tables[pipeline as usize];
        if tables.len() <= usize::from(table) {
            tables.resize_with(usize::from(table) + 1, Table::default);
        }
        let t = &mut tables[usize::from(table)];
        if t.stage.is_empty() {
            t.stage = stage.to_string();
        }
        t.flows.push(Lflow {
            uuid,
            priority: u16::try_from(f.priority()).unwrap_or(0),
            matcher: c.matcher.clone(),
            actions: c.actions.clone(),
            match_text,
            actions_text,
            hits: Default::default(),
        });
        Ok(())
    }

    fn is_resident(&self, name: &str, view: Viewpoint<'_>) -> bool {
        if name.is_empty() || matches!(view, Viewpoint::Everywhere) {
            return true;
        }
        self.ports.get(name).is_some_and(|&(d, k)| {
            self.datapaths
                .get(&d)
                .and_then(|dp| dp.ports.get(&k))
                .is_some_and(|p| p.location.is_here())
        })
    }

    /// The datapath with key `key`.
    pub fn datapath(&self, key: u32) -> Option<&Datapath> {
        self.datapaths.get(&key)
    }

    /// The datapaths a packet entering datapath `key` can reach through patch ports
    /// (its routers and their other switches), `key` included, in key order.
    pub fn reachable(&self, key: u32) -> Vec<u32> {
        let mut seen = std::collections::BTreeSet::from([key]);
        let mut todo = vec![key];
        while let Some(k) = todo.pop() {
            let Some(dp) = self.datapaths.get(&k) else {
                continue;
            };
            for (peer, _) in dp.ports.values().filter_map(|p| p.peer) {
                if seen.insert(peer) {
                    todo.push(peer);
                }
            }
        }
        seen.into_iter().collect()
    }

    /// Why a packet entering datapath `key` could meet an action vswitchd does not
    /// execute: the datapath, the action, the stage and the flow, for the first one
    /// reachable.
    pub fn refusal(&self, key: u32) -> Option<(&str, &str, &str, Uuid)> {
        self.reachable(key).into_iter().find_map(|k| {
            let dp = self.datapaths.get(&k)?;
            let (a, stage, u) = dp.unsupported.as_ref()?;
            Some((dp.name.as_str(), a.as_str(), stage.as_str(), *u))
        })
    }

    /// Whether datapath `key` runs the pipeline rather than the L2 rules: it, or a
    /// datapath it reaches, does more than L2 forwarding (a router attached reaches
    /// one by itself).
    pub fn needs_pipeline(&self, key: u32) -> bool {
        self.datapaths
            .get(&key)
            .is_some_and(|dp| dp.beyond_l2 || dp.ports.values().any(|p| p.peer.is_some()))
    }
}

/// Parses (once per text) and compiles flow `f` for the datapath `ctx` resolves in.
#[allow(clippy::too_many_arguments)]
fn compile(
    symtab: &SymbolTable,
    dhcp: &OptionTable,
    dhcpv6: &OptionTable,
    (mtext, atext): (&Arc<str>, &Arc<str>),
    pipeline: Pipeline,
    table: u8,
    ctx: &dyn Context,
    parsed: &mut Parsed,
) -> Compiled {
    let m = parsed
        .matches
        .entry(mtext.clone())
        .or_insert_with(|| Expr::parse(mtext, symtab).map_err(|e| format!("match: {e}")))
        .clone()?;
    let (actions, prereqs) = parsed
        .actions
        .entry((atext.clone(), pipeline as u8, table))
        .or_insert_with(|| {
            let nd_ra = OptionTable::nd_ra();
            let events = OptionTable::new();
            let params = ActionParams {
                symtab,
                dhcp_opts: dhcp,
                dhcpv6_opts: dhcpv6,
                nd_ra_opts: &nd_ra,
                event_opts: &events,
                pipeline,
                n_tables: N_TABLES,
                cur_ltable: table,
            };
            ovn_lflow::actions::parse(atext, &params)
                .map(|p| (Arc::new(p.actions), p.prereqs))
                .map_err(|e| format!("actions: {e}"))
        })
        .clone()?;
    let m = match prereqs {
        Some(p) => Expr::And(vec![m, p]),
        None => m,
    };
    let annotated = m.annotate(symtab, ctx).map_err(|e| format!("match: {e}"))?;
    let matcher = CompiledExpr::compile(&annotated, ctx).map_err(|e| format!("match: {e}"))?;
    let matcher = parsed.matcher(matcher);
    let unkeyed = matcher
        .fields()
        .into_iter()
        .find(|f| UNKEYED_FIELDS.contains(f));
    let refusal = actions
        .walk()
        .into_iter()
        .find_map(refusal)
        .map(str::to_string);
    let sizes = actions
        .walk()
        .into_iter()
        .filter_map(|a| match a {
            ovn_lflow::Action::CheckPktLarger { len, .. } => Some(*len),
            _ => None,
        })
        .collect();
    Ok(Arc::new(CompiledFlow {
        matcher,
        actions,
        unkeyed,
        refusal,
        sizes,
    }))
}

/// The option table of the database's rows, or the built-in one before northd
/// wrote them.
fn option_table<'a>(
    rows: impl Iterator<Item = (&'a str, i64, &'a str)>,
    builtin: fn() -> OptionTable,
) -> OptionTable {
    let rows: Vec<(&str, u32, &str)> = rows
        .filter_map(|(n, c, t)| Some((n, u32::try_from(c).ok()?, t)))
        .collect();
    if rows.is_empty() {
        return builtin();
    }
    OptionTable::from_rows(rows).unwrap_or_else(|_| builtin())
}

/// The pipeline `Logical_Flow.pipeline` names.
pub(crate) fn pipeline_of(s: &str) -> Option<Pipeline> {
    match s {
        "ingress" => Some(Pipeline::Ingress),
        "egress" => Some(Pipeline::Egress),
        _ => None,
    }
}

/// A hash over a datapath's flow rows (in uuid order) and the generation of the
/// stage names they are read with: what makes its tables.
fn signature(flows: &[(Uuid, &LogicalFlow)], stages: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    stages.hash(&mut h);
    for (u, f) in flows {
        u.hash(&mut h);
        (f.pipeline(), f.table_id(), f.priority()).hash(&mut h);
        (f.match_(), f.actions()).hash(&mut h);
    }
    h.finish()
}

/// The local datapaths with flows, by key: (key, row, its flows when they had to be
/// grouped here). With [`Sb::lflow_index`] the flows are left to be read from it
/// ([`Sb::flows_of`]).
#[allow(clippy::type_complexity)]
fn flows_by_datapath<'s>(
    sb: &'s Sb,
    local: &[Uuid],
) -> Vec<(u32, Uuid, Option<Vec<(Uuid, &'s LogicalFlow)>>)> {
    let key_of: HashMap<Uuid, u32> = local
        .iter()
        .filter_map(|u| Some((*u, u32::try_from(sb.datapaths.get(u)?.tunnel_key).ok()?)))
        .collect();
    if let Some(ix) = &sb.lflow_index {
        let mut v: Vec<_> = key_of
            .iter()
            .filter(|(u, _)| ix.has_flows(u))
            .map(|(u, k)| (*k, *u, None))
            .collect();
        v.sort_unstable_by_key(|x| x.0);
        return v;
    }
    let mut by_dp: BTreeMap<u32, (Uuid, Vec<(Uuid, &LogicalFlow)>)> = BTreeMap::new();
    for (uuid, f) in &sb.lflows {
        for d in crate::ovn::lflow_index::datapaths_of(f, &sb.dp_groups) {
            if let Some(k) = key_of.get(&d) {
                by_dp
                    .entry(*k)
                    .or_insert_with(|| (d, Vec::new()))
                    .1
                    .push((*uuid, f));
            }
        }
    }
    by_dp
        .into_iter()
        .map(|(k, (u, f))| (k, u, Some(f)))
        .collect()
}

fn ports_by_datapath(sb: &Sb) -> HashMap<Uuid, Vec<&PortBinding>> {
    let mut m: HashMap<Uuid, Vec<&PortBinding>> = HashMap::new();
    for pb in sb.ports.values() {
        m.entry(pb.datapath).or_default().push(pb);
    }
    m
}

/// Datapath `u` with its ports, groups, MAC bindings and FDB (no flows yet).
fn datapath_of(sb: &Sb, u: Uuid, ports: &[&PortBinding], view: Viewpoint<'_>) -> Option<Datapath> {
    let row = sb.datapaths.get(&u)?;
    let key = u32::try_from(row.tunnel_key).ok()?;
    let mut dp = Datapath {
        key,
        name: row.external_ids.get("name").cloned().unwrap_or_default(),
        router: row.external_ids.contains_key("logical-router"),
        ..Datapath::default()
    };
    dp.names.insert("none".into(), 0);
    for pb in ports {
        let Ok(k) = u16::try_from(pb.tunnel_key) else {
            continue;
        };
        dp.names.insert(pb.logical_port.clone(), k);
        dp.ports.insert(
            k,
            LPort {
                name: pb.logical_port.clone(),
                key: k,
                kind: pb.kind.clone(),
                peer: None,
                location: location(sb, pb, view),
                security: PortSecurity::parse(&pb.port_security),
                distributed: None,
            },
        );
    }
    for pb in ports.iter().filter(|pb| pb.kind == "chassisredirect") {
        let d = pb
            .options
            .get("distributed-port")
            .and_then(|n| dp.names.get(n));
        if let Some(p) = u16::try_from(pb.tunnel_key)
            .ok()
            .and_then(|k| dp.ports.get_mut(&k))
        {
            p.distributed = d.copied();
        }
    }
    dp.localnet = dp
        .ports
        .values()
        .find(|p| p.kind == "localnet" && p.location == Location::Local)
        .map(|p| p.key);
    for g in sb.groups.iter().filter(|g| g.datapath == u) {
        let Ok(k) = u16::try_from(g.tunnel_key) else {
            continue;
        };
        // By name, in the order `ovn-trace` visits them.
        let mut rows: Vec<&PortBinding> = g.ports.iter().filter_map(|p| sb.ports.get(p)).collect();
        rows.sort_by(|a, b| a.logical_port.cmp(&b.logical_port));
        let members = rows
            .iter()
            .filter_map(|pb| u16::try_from(pb.tunnel_key).ok())
            .collect();
        dp.names.insert(g.name.clone(), k);
        dp.groups.insert(
            k,
            Group {
                name: g.name.clone(),
                members,
            },
        );
    }
    add_mac_bindings(sb, u, &mut dp);
    for f in sb.fdb.iter().filter(|f| f.dp_key == row.tunnel_key) {
        if let (Ok(mac), Ok(port)) = (f.mac.parse::<MacAddr>(), u16::try_from(f.port_key)) {
            dp.fdb.insert(mac, port);
        }
    }
    Some(dp)
}

/// A hash of what a decision through `dp` reads besides its tables: its kind, ports
/// (with their peers, locations and port security), groups, MAC bindings and FDB.
fn fingerprint(dp: &Datapath) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    dp.router.hash(&mut h);
    dp.ports.hash(&mut h);
    dp.groups.hash(&mut h);
    let mut bindings: Vec<_> = dp.mac_bindings.iter().collect();
    bindings.sort_unstable();
    bindings.hash(&mut h);
    let mut fdb: Vec<_> = dp.fdb.iter().collect();
    fdb.sort_unstable();
    fdb.hash(&mut h);
    h.finish()
}

/// `MAC_Binding` rows of router `u`, then `Static_MAC_Binding` rows (which win over a
/// learned binding when they say so).
fn add_mac_bindings(sb: &Sb, u: Uuid, dp: &mut Datapath) {
    let parse = |port: &str, ip: &str, mac: &str| {
        let port = *dp.names.get(port)?;
        Some((
            (port, ip.parse::<IpAddr>().ok()?),
            mac.parse::<MacAddr>().ok()?,
        ))
    };
    let learned: Vec<_> = sb
        .mac_bindings
        .values()
        .filter(|b| b.datapath == u)
        .filter_map(|b| parse(&b.logical_port, &b.ip, &b.mac))
        .collect();
    let fixed: Vec<_> = sb
        .static_mac_bindings
        .values()
        .filter(|b| b.datapath == u)
        .filter_map(|b| {
            Some((
                parse(&b.logical_port, &b.ip, &b.mac)?,
                b.override_dynamic_mac,
            ))
        })
        .collect();
    dp.mac_bindings.extend(learned);
    for ((k, mac), override_dynamic) in fixed {
        if override_dynamic || !dp.mac_bindings.contains_key(&k) {
            dp.mac_bindings.insert(k, mac);
        }
    }
}

/// Where binding `pb` is, seen from `view`. A `localnet` port is here when its
/// network is mapped here (ovn-controller's `update_ld_localnet_port` ignores the
/// others), and nowhere otherwise.
fn location(sb: &Sb, pb: &PortBinding, view: Viewpoint<'_>) -> Location {
    if pb.kind == "localnet" {
        let network = pb.options.get("network_name");
        return match view {
            Viewpoint::Claiming { networks, .. }
                if network.is_some_and(|n| networks.contains(n)) =>
            {
                Location::Local
            }
            _ => Location::Nowhere,
        };
    }
    if matches!(pb.kind.as_str(), "patch" | "localport") {
        return Location::Nowhere;
    }
    let holds = |me: Option<Uuid>| {
        me.is_some_and(|m| pb.chassis == Some(m) || pb.additional_chassis.contains(&m))
    };
    let (me, here) = match view {
        Viewpoint::Everywhere => return Location::Local,
        Viewpoint::Chassis(me) => (me, holds(me)),
        Viewpoint::Claiming {
            me,
            ports,
            inactive,
            ..
        } => {
            let lp = &pb.logical_port;
            let held = ports.contains(lp) || holds(me);
            (me, held && !inactive.contains(lp))
        }
    };
    // The other chassis that hold it: its main one, and while it has additional ones
    // (a migration) those too. A port claimed here is here alone until then.
    let multi = !pb.additional_chassis.is_empty();
    let mut remotes: Vec<String> = pb
        .chassis
        .iter()
        .filter(|_| multi || !here)
        .chain(pb.additional_chassis.iter())
        .filter(|&&c| Some(c) != me)
        .filter_map(|c| sb.chassis.get(c).map(|ch| ch.name.clone()))
        .collect();
    remotes.sort();
    remotes.dedup();
    match (here, remotes.len()) {
        (true, 0) => Location::Local,
        (false, 0) => Location::Nowhere,
        (false, 1) => Location::Remote(remotes.remove(0)),
        _ => Location::Multi { here, remotes },
    }
}
