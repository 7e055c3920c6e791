//! One pass of the chassis: derive the view, write the claims, publish the view as one
//! topology change (ports' domains and port security, the logical switches' groups, the
//! MACs as static FDB entries), mark running ports up, report `nb_cfg`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use ovsdb::{Client, Condition, Mutation, Mutator, Operation, Row, Uuid};
use tracing::info;

use super::interest::Interest;
use super::pipeline::{BuildCache, Pipelines, Viewpoint};
use super::rows::Dirty;
use super::sb::{Chassis, ChassisPrivate};
use super::view::{self, DestView, PortView, Sb, Touched, View};
use super::Status;
use crate::config::ovn::OvnConfig;
use crate::control::ops::Control;
use crate::model::domain::{DomainId, DomainKey};
use crate::model::fdb::{Dest, PortId};
use crate::model::ovn::{Localnet, McGroup, OvnDomain, OvnTopo};
use crate::switch::topology::Topology;

/// What the last pass applied.
#[derive(Debug, Default)]
pub struct Pass {
    /// The view last published (`up` flags aside).
    published: Option<View>,
    /// The Southbound rows, kept current across passes.
    sb: Option<Sb>,
    /// The local ports (names and ids) and chassis of the last pass that completed.
    settled: Option<(BTreeMap<String, String>, Vec<PortId>, Uuid)>,
    /// The ids of the `iface_id` ports the last published view placed.
    placed: Vec<PortId>,
    /// What changed since the view was last published.
    touched: Touched,
    /// The local ports that announced themselves (RARP) while awaiting activation,
    /// as the last pass saw them.
    announced: BTreeSet<String>,
    /// The rows the server sends (monitor conditions), as last set.
    interest: Interest,
    /// A change of interest was made since the last derivation: derive again even if
    /// the rows it brought changed nothing.
    refollow: bool,
    /// The logical pipelines of the local datapaths, as last built.
    pipelines: Option<Arc<Pipelines>>,
    /// They were built again since the last publication.
    pipelines_new: bool,
    /// What the last build parsed and compiled, for the next.
    build_cache: BuildCache,
    /// The chassis whose tunnel's BFD session is up, by name.
    active_tunnels: BTreeSet<String>,
}

impl Pass {
    /// The chassis to run BFD with and the sessions' timers, as the last pass saw
    /// the database.
    pub fn bfd_peers(&self) -> (BTreeMap<String, std::net::IpAddr>, bfd::Config) {
        match (&self.sb, &self.settled) {
            (Some(sb), Some((_, _, me))) => (
                super::gateway::bfd_chassis(sb, *me),
                super::bfd::config_of(&sb.options),
            ),
            _ => (BTreeMap::new(), bfd::Config::default()),
        }
    }

    /// Notes the chassis whose tunnel's BFD session is Up; when they changed, the
    /// next pass derives the view again (which gateway ports are held here).
    pub fn set_active_tunnels(&mut self, up: &BTreeSet<String>) {
        if *up != self.active_tunnels {
            self.active_tunnels = up.clone();
            self.refollow = true;
        }
    }

    /// Runs one pass on the rows changed since the last (`dirty`, consumed). When
    /// nothing the view is derived from changed since a pass that completed (only
    /// `SB_Global.nb_cfg` moved, say), the view stands and only `nb_cfg` is reported.
    ///
    /// # Errors
    /// A transaction or the topology change failed; the next pass starts over.
    pub async fn run(
        &mut self,
        ctl: &Arc<Control>,
        client: &Client,
        cfg: &OvnConfig,
        status: &Status,
        dirty: &mut Dirty,
    ) -> Result<(), String> {
        let topo = ctl.switch.topo();
        let ports: BTreeMap<String, String> = topo
            .iter()
            .filter_map(|tp| Some((tp.port.name.clone(), tp.config.iface_id.clone()?)))
            .collect();
        // A port deleted and added again under its name between two passes is another
        // port: it must be placed, though the view (by names) is the same.
        let ids: Vec<PortId> = ports
            .keys()
            .filter_map(|n| topo.by_name(n).map(|p| p.port.id))
            .collect();
        let announced = announced(&topo);
        drop(topo);
        let view_rows = dirty.all || dirty.touches_view();
        let (me, private) = {
            let r = client.replica();
            let me = r
                .rows::<Chassis>()
                .find(|(_, c)| c.name == cfg.chassis)
                .map(|(u, _)| u);
            let private = r
                .rows::<ChassisPrivate>()
                .find(|(_, c)| c.name == cfg.chassis);
            match self.sb.as_mut() {
                Some(sb) if !dirty.all => sb.refresh(&r, dirty, &mut self.touched),
                _ => {
                    let stages = self.sb.take().map(|sb| sb.stages);
                    let mut sb = Sb::from_replica(&r);
                    sb.stages = stages.unwrap_or_default();
                    self.sb = Some(sb);
                    self.touched.all = true;
                    self.touched.lflows_unknown = true;
                }
            }
            dirty.clear();
            (me, private)
        };
        let Some(me) = me else {
            return Err("the chassis is not registered yet".into());
        };
        let settled = self.settled.take();
        let same_ports = settled
            .as_ref()
            .is_some_and(|(p, i, m)| (p, i, *m) == (&ports, &ids, me));
        let news = announced != self.announced;
        if !same_ports || news {
            // Other local ports (or a first pass), or a port activated here: no
            // switch's view carries over.
            self.touched.all = true;
        }
        self.announced = announced;
        if view_rows || !same_ports || news || self.refollow {
            self.refollow = false;
            let applied = self
                .derive_and_apply(ctl, client, cfg, status, (&ports, &ids), me)
                .await?;
            if !applied {
                // The rows the view asks for are on their way: nothing of it was
                // published, and nb_cfg waits for them (as ovn-controller waits for
                // its condition changes before reporting).
                self.settled = Some((ports, ids, me));
                return Ok(());
            }
        }
        let nb_cfg = self.sb.as_ref().map_or(0, |sb| sb.nb_cfg);
        status.update(|r| r.nb_cfg = nb_cfg);
        if let Some((u, p)) = private {
            if p.nb_cfg != nb_cfg {
                report_nb_cfg(client, u, nb_cfg).await?;
            }
        }
        self.settled = Some((ports, ids, me));
        Ok(())
    }

    /// Moves the monitor conditions to what view `v` needs; returns whether they
    /// changed (the next pass, woken now, derives with the rows they bring).
    async fn follow_interest(
        &mut self,
        ctl: &Control,
        client: &Client,
        (ports, me): (&BTreeMap<String, String>, Uuid),
        v: &View,
    ) -> Result<bool, String> {
        let Some(sb) = self.sb.as_ref() else {
            return Ok(false);
        };
        let want = Interest::of(ports, Some(me), v, sb);
        if want == self.interest {
            return Ok(false);
        }
        want.apply(&self.interest, client).await?;
        self.interest = want;
        // The rows it brings mark what they touch; a switch new to the view is
        // derived anyway.
        self.refollow = true;
        ctl.ovn_wake.notify_one();
        Ok(true)
    }

    /// Derives the view from the rows and the local ports (name to logical port, and
    /// their ids), claims, publishes what changed (or what another port of the same
    /// name now is), updates the status and marks the running ports up. Returns false,
    /// having published nothing, when the view needs rows not monitored yet (their
    /// conditions are set; the next pass derives with them): no port is marked up on a
    /// partial view of its switch.
    async fn derive_and_apply(
        &mut self,
        ctl: &Arc<Control>,
        client: &Client,
        cfg: &OvnConfig,
        status: &Status,
        (ports, ids): (&BTreeMap<String, String>, &[PortId]),
        me: Uuid,
    ) -> Result<bool, String> {
        let networks: Vec<String> = cfg
            .bridge_mappings
            .iter()
            .map(|m| m.network.clone())
            .collect();
        self.learn_stages(client).await?;
        let sb = self.sb.as_ref().expect("rows decoded");
        let inactive = view::inactive_ports(sb, &self.local(cfg, ports, me));
        self.build_pipelines(ports, (&networks, &inactive), me, status);
        let sb = self.sb.as_ref().expect("rows decoded");
        let local = view::Local {
            pipelines: self.pipelines.as_deref(),
            ..self.local(cfg, ports, me)
        };
        let t0 = std::time::Instant::now();
        let v = view::derive_reusing(sb, &local, self.published.as_ref(), &self.touched);
        tracing::debug!(us = t0.elapsed().as_micros() as u64, "view derived");
        forget_announcements(ctl, &v);
        self.claim(client, &v, me, &cfg.chassis).await?;
        if self.follow_interest(ctl, client, (ports, me), &v).await? {
            return Ok(false);
        }
        // New pipelines matter to the data path only where a switch runs them.
        let runs_pipeline = v.datapaths.values().any(|d| d.lflow);
        let view_same =
            self.published.as_ref().is_some_and(|p| same_but_up(p, &v)) && ids == self.placed;
        if !view_same || (self.pipelines_new && runs_pipeline) {
            let sb = self.sb.as_ref().expect("rows decoded");
            let pipelines = self.pipelines.as_ref();
            let generation = match view_same.then(|| publish_pipelines(ctl, pipelines, sb, me)) {
                Some(Some(generation)) => generation,
                _ => publish(ctl, &v, pipelines, sb, me)?,
            };
            self.pipelines_new = false;
            ctl.adopted(generation).await;
            info!(
                ports = v.ports.len(),
                logical_switches = v.datapaths.len(),
                generation,
                "OVN logical view published"
            );
        }
        // The status first: once the database says `up` or reports this pass's nb_cfg,
        // `vswitchctl ovn` already shows what the data path runs.
        let sb = self.sb.as_ref().expect("rows decoded");
        let (port_rows, chassis_rows) = super::rows(&v, sb);
        status.update(|r| {
            r.ports = port_rows;
            r.other_chassis = chassis_rows;
            r.provider_networks = super::provider_rows(&v);
            r.monitored = [
                ("Port_Binding", sb.ports.len()),
                ("Multicast_Group", sb.groups.len()),
                ("FDB", sb.fdb.len()),
            ]
            .into_iter()
            .map(|(t, n)| (t.to_string(), n as u64))
            .collect();
        });
        self.mark_up(client, &v, me).await?;
        self.published = Some(v);
        self.placed = ids.to_vec();
        self.touched = Touched::default();
        Ok(true)
    }

    /// This chassis as the view sees it (without pipelines).
    fn local<'a>(
        &'a self,
        cfg: &'a OvnConfig,
        ports: &'a BTreeMap<String, String>,
        me: Uuid,
    ) -> view::Local<'a> {
        view::Local {
            name: &cfg.chassis,
            hostname: &cfg.hostname,
            chassis: Some(me),
            pipelines: None,
            ports,
            mappings: &cfg.bridge_mappings,
            announced: &self.announced,
            active_tunnels: &self.active_tunnels,
        }
    }

    /// Reads the names of the stages the next build meets unnamed (when it builds: see
    /// [`Pass::build_pipelines`]), from the flows of the datapaths whose flows changed.
    async fn learn_stages(&mut self, client: &Client) -> Result<(), String> {
        if self.pipelines.is_some() && !self.touched.all && !self.touched.pipeline {
            return Ok(());
        }
        let datapaths: Vec<Uuid> = self.interest.datapaths().collect();
        let changed = (!self.touched.lflows_unknown && self.pipelines.is_some())
            .then_some(&self.touched.lflow_datapaths);
        let sb = self.sb.as_mut().expect("rows decoded");
        super::stages::learn(client, sb, &datapaths, changed).await
    }

    /// Builds the logical pipelines of the local datapaths again when a row they come
    /// from changed (or the local ports did): every switch's view is then derived
    /// again, since whether it runs the pipeline may have changed.
    fn build_pipelines(
        &mut self,
        ports: &BTreeMap<String, String>,
        (networks, inactive): (&[String], &[String]),
        me: Uuid,
        status: &Status,
    ) {
        if self.pipelines.is_some() && !self.touched.all && !self.touched.pipeline {
            return;
        }
        let sb = self.sb.as_ref().expect("rows decoded");
        let datapaths: Vec<Uuid> = self.interest.datapaths().collect();
        let lsps: Vec<String> = ports.values().cloned().collect();
        let t0 = std::time::Instant::now();
        let changed = &self.touched.lflow_datapaths;
        let p = Pipelines::build_changed(
            sb,
            &datapaths,
            Viewpoint::Claiming {
                me: Some(me),
                ports: &lsps,
                inactive,
                networks,
            },
            &mut self.build_cache,
            (!self.touched.lflows_unknown).then_some(changed),
        );
        tracing::debug!(
            compiled = p.compiled.compiled,
            reused = p.compiled.reused,
            shared = p.compiled.shared,
            us = t0.elapsed().as_micros() as u64,
            "logical pipelines built"
        );
        if !p.skipped.is_empty() {
            tracing::warn!(
                flows = p.skipped.len(),
                first = ?p.skipped.first().map(|s| (&s.stage, &s.error)),
                "logical flows that do not parse are skipped"
            );
        }
        if let Some((field, stage, flow)) = &p.unkeyed {
            tracing::warn!(
                field = field.info().name,
                stage = stage.as_str(),
                %flow,
                "a logical flow tests a field the flow cache does not key on: decisions are not cached"
            );
        }
        let p = Arc::new(p);
        status.set_pipelines(p.clone());
        self.pipelines = Some(p);
        self.pipelines_new = true;
        self.touched.all = true;
    }

    /// Claims what the view binds here (main or additional) and releases what no local
    /// port is any more; marks bindings activated here (`name`: this chassis).
    async fn claim(&self, client: &Client, v: &View, me: Uuid, name: &str) -> Result<(), String> {
        let mut ops = Vec::new();
        for pb in &v.claims {
            ops.push(Operation::update(
                "Port_Binding",
                vec![Condition::uuid(*pb)],
                Row::new().with("chassis", Some(me)),
            ));
        }
        for pb in &v.releases {
            ops.push(Operation::update(
                "Port_Binding",
                vec![Condition::uuid(*pb), Condition::eq("chassis", Some(me))],
                Row::new().with("chassis", None::<Uuid>).with("up", false),
            ));
        }
        let me_set: BTreeSet<Uuid> = [me].into();
        for (pbs, mutator) in [(&v.joins, Mutator::Insert), (&v.leaves, Mutator::Delete)] {
            for pb in pbs {
                ops.push(Operation::mutate(
                    "Port_Binding",
                    vec![Condition::uuid(*pb)],
                    vec![Mutation::new("additional_chassis", mutator, &me_set)],
                ));
            }
        }
        let sb = self.sb.as_ref().expect("rows decoded");
        for pb in &v.activations {
            ops.push(activate(sb, *pb, name));
        }
        if super::transact_ops(client, ops, "claiming port bindings").await? == 0 {
            return Ok(());
        }
        info!(
            claimed = v.claims.len(),
            released = v.releases.len(),
            joined = v.joins.len(),
            left = v.leaves.len(),
            activated = v.activations.len(),
            "port bindings claimed and released"
        );
        Ok(())
    }

    /// Sets `up` on the bindings of ports now running in the topology (after their
    /// claim).
    async fn mark_up(&self, client: &Client, v: &View, me: Uuid) -> Result<(), String> {
        let ops: Vec<Operation> = v
            .ports
            .values()
            .filter_map(|p| match p {
                PortView::Bound {
                    binding,
                    up: false,
                    role: view::Role::Main,
                    ..
                } => Some(Operation::update(
                    "Port_Binding",
                    vec![
                        Condition::uuid(*binding),
                        Condition::eq("chassis", Some(me)),
                    ],
                    Row::new().with("up", true),
                )),
                _ => None,
            })
            .collect();
        super::transact_ops(client, ops, "marking ports up")
            .await
            .map(|_| ())
    }
}

/// The operation that adds chassis `name` to binding `pb`'s
/// `options:additional-chassis-activated` (a comma-separated list of chassis names, as
/// ovn-controller writes it after a port's RARP).
fn activate(sb: &Sb, pb: Uuid, name: &str) -> Operation {
    const KEY: &str = "additional-chassis-activated";
    let value = match sb.ports.get(&pb).and_then(|p| p.options.get(KEY)) {
        Some(list) if !list.is_empty() => format!("{list},{name}"),
        _ => name.to_string(),
    };
    let keys: BTreeSet<String> = [KEY.to_string()].into();
    let pair: BTreeMap<String, String> = [(KEY.to_string(), value)].into();
    Operation::mutate(
        "Port_Binding",
        vec![Condition::uuid(pb)],
        vec![
            Mutation::new("options", Mutator::Delete, &keys),
            Mutation::new("options", Mutator::Insert, &pair),
        ],
    )
}

/// The `iface_id` ports of `topo` that announced themselves while awaiting activation.
fn announced(topo: &Topology) -> BTreeSet<String> {
    topo.iter()
        .filter(|tp| tp.config.iface_id.is_some() && tp.port.announced.load(Relaxed))
        .map(|tp| tp.port.name.clone())
        .collect()
}

/// Clears the announcement of every local port that holds no binding awaiting
/// activation any more (main here, or not bound): the next migration to it waits for
/// its own RARP.
fn forget_announcements(ctl: &Control, v: &View) {
    let topo = ctl.switch.topo();
    for (name, p) in &v.ports {
        let waiting = matches!(
            p,
            PortView::Bound {
                role: view::Role::Additional { .. },
                ..
            }
        );
        if !waiting {
            if let Some(tp) = topo.by_name(name) {
                tp.port.announced.store(false, Relaxed);
            }
        }
    }
}

impl Pass {
    /// The view last published and this chassis' row, once a pass completed.
    pub fn published(&self) -> Option<(&View, Uuid)> {
        Some((self.published.as_ref()?, self.settled.as_ref()?.2))
    }

    /// Whether a local port awaits activation in the published view (only then does
    /// the chassis look for announcements).
    pub fn awaiting_activation(&self) -> bool {
        self.published
            .as_ref()
            .is_some_and(|v| v.datapaths.values().any(|d| !d.blocked.is_empty()))
    }
}

/// Whether a pass is due for a port that announced itself since the last one.
pub fn announcement_pending(pass: &Pass, sw: &crate::switch::Switch) -> bool {
    let topo = sw.topo();
    let pending = topo.iter().any(|tp| {
        tp.config.iface_id.is_some()
            && tp.port.announced.load(Relaxed)
            && !pass.announced.contains(&tp.port.name)
    });
    pending
}

/// Writes `Chassis_Private.nb_cfg` (row `u`): this chassis runs what `nb_cfg` covers.
async fn report_nb_cfg(client: &Client, u: Uuid, nb_cfg: i64) -> Result<(), String> {
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let row = Row::new()
        .with("nb_cfg", nb_cfg)
        .with("nb_cfg_timestamp", ts);
    client
        .transact(vec![Operation::update(
            "Chassis_Private",
            vec![Condition::uuid(u)],
            row,
        )])
        .await
        .map(|_| ())
        .map_err(|e| format!("nb_cfg: {e}"))
}

/// Whether `a` and `b` publish the same thing: equal but for the `up` flags, claims
/// and releases (which change by the pass itself, not the data path). Compared in
/// place: a view holds every MAC of every local switch.
fn same_but_up(a: &View, b: &View) -> bool {
    let port_eq = |(na, pa): (&String, &PortView), (nb, pb): (&String, &PortView)| {
        na == nb
            && match (pa, pb) {
                (
                    PortView::Bound {
                        binding: b1,
                        datapath: d1,
                        key: k1,
                        security: s1,
                        role: r1,
                        ..
                    },
                    PortView::Bound {
                        binding: b2,
                        datapath: d2,
                        key: k2,
                        security: s2,
                        role: r2,
                        ..
                    },
                ) => (b1, d1, k1, s1, r1) == (b2, d2, k2, s2, r2),
                (x, y) => x == y,
            }
    };
    a.datapaths == b.datapaths
        && a.ports.len() == b.ports.len()
        && a.ports.iter().zip(&b.ports).all(|(x, y)| port_eq(x, y))
}

/// Publishes `v`: the OVN logical switches' MACs as the FDB's OVN entries, then the
/// topology (each `iface_id` port's domain, key and port security, and the switches'
/// groups), in one generation. Returns it.
fn publish(
    ctl: &Control,
    v: &View,
    pipelines: Option<&Arc<Pipelines>>,
    sb: &Sb,
    me: Uuid,
) -> Result<u64, String> {
    let sw = &ctl.switch;
    let mut dp_domain: HashMap<Uuid, DomainId> = HashMap::new();
    for (u, d) in &v.datapaths {
        let id = sw
            .domains
            .intern(DomainKey::Ovn(d.tunnel_key))
            .map_err(|e| e.to_string())?;
        dp_domain.insert(*u, id);
    }
    let detached = sw
        .domains
        .intern(DomainKey::Detached)
        .map_err(|e| e.to_string())?;
    let r = Resolver {
        sw,
        topo: sw.topo(),
        chassis_of: Default::default(),
    };
    let entries = r.fdb(v, &dp_domain);
    let mut topo = r.ovn_topo(v, &dp_domain);
    if topo.domains.iter().flatten().any(|d| d.lflow) {
        topo.pipeline =
            pipelines.map(|p| p.clone() as Arc<dyn crate::model::lflow::LogicalPipeline>);
    }
    topo.by_key = v
        .datapaths
        .iter()
        .map(|(u, d)| (d.tunnel_key, dp_domain[u]))
        .collect();
    // The other chassis' endpoints, only where a switch runs the pipeline (its outputs
    // name chassis); this chassis is none of them.
    if topo.pipeline.is_some() {
        topo.remote_of = remotes(sw, sb, me);
    }
    let ovn = Arc::new(topo);
    // The FDB first: its new entries are only reached once the topology is published.
    sw.fdb.replace_ovn(&entries);
    let (moved, generation) = sw.publish(|t: &mut Topology| {
        let moved = place_ports(t, v, &dp_domain, detached);
        t.ovn = ovn;
        Ok::<_, String>(moved)
    })?;
    // What a port learned in the switch it left is not behind it any more.
    for p in moved {
        sw.fdb.flush_port(p, false);
    }
    // Chassis new to the overlay get their paths now, not at the overlay's next tick
    // (up to a second after their ports are up: hv1's traffic after a restart).
    ctl.net_changed.notify_one();
    Ok(generation)
}

/// Every other chassis' Geneve endpoint, by chassis name.
fn remotes(
    sw: &crate::switch::Switch,
    sb: &Sb,
    me: Uuid,
) -> HashMap<String, crate::model::tunnel::RemoteId> {
    sb.chassis
        .iter()
        .filter(|(u, _)| **u != me)
        .filter_map(|(_, c)| Some((c.name.clone(), sw.remotes.intern(sb.encap_ip(c)?)?)))
        .collect()
}

/// Publishes new `pipelines` alone, for a view that did not change: the OVN part of the
/// topology as published, its pipeline replaced, so that the PMDs keep the decisions
/// whose datapaths kept their versions. `None` (nothing published: [`publish`] it)
/// when no pipeline ran before, the other chassis' endpoints changed, or another edit
/// came first.
fn publish_pipelines(
    ctl: &Control,
    pipelines: Option<&Arc<Pipelines>>,
    sb: &Sb,
    me: Uuid,
) -> Option<u64> {
    let sw = &ctl.switch;
    let base = sw.topo().ovn.clone();
    base.pipeline.as_ref()?;
    let pipelines = pipelines?.clone();
    if remotes(sw, sb, me) != base.remote_of {
        return None;
    }
    let mut ovn = (*base).clone();
    ovn.pipeline = Some(pipelines as Arc<dyn crate::model::lflow::LogicalPipeline>);
    sw.publish_pipeline(&base, Arc::new(ovn))
}

/// Turns the view's names (ports, chassis addresses) into the data path's ids.
struct Resolver<'a> {
    sw: &'a crate::switch::Switch,
    topo: Arc<Topology>,
    /// Remote ids met so far, with their chassis' names.
    chassis_of: std::cell::RefCell<HashMap<crate::model::tunnel::RemoteId, String>>,
}

impl Resolver<'_> {
    fn port(&self, name: &str) -> Option<crate::model::fdb::PortId> {
        self.topo.by_name(name).map(|p| p.port.id)
    }

    fn remote(
        &self,
        chassis: &str,
        ip: std::net::IpAddr,
    ) -> Option<crate::model::tunnel::RemoteId> {
        let r = self.sw.remotes.intern(ip)?;
        self.chassis_of.borrow_mut().insert(r, chassis.to_string());
        Some(r)
    }

    /// The FDB's OVN entries: every MAC of every logical switch with a local port.
    fn fdb(
        &self,
        v: &View,
        dp_domain: &HashMap<Uuid, DomainId>,
    ) -> Vec<(DomainId, crate::config::MacAddr, Dest)> {
        let mut entries = Vec::new();
        for (u, d) in &v.datapaths {
            for (mac, to) in &d.fdb {
                let dest = match to {
                    DestView::Local(n) => self.port(n).map(Dest::Port),
                    DestView::Remote { chassis, ip, key } => self
                        .remote(chassis, *ip)
                        .map(|remote| Dest::RemotePort { remote, key: *key }),
                    DestView::Router => Some(Dest::Router),
                    DestView::Multi { key, .. } => Some(Dest::Multi(*key)),
                };
                entries.extend(dest.map(|dest| (dp_domain[u], *mac, dest)));
            }
        }
        entries
    }

    /// The uplink and VLAN switch `d` is bridged to, if its localnet port's network is
    /// mapped to an uplink of this switch.
    /// An untagged network cannot share an uplink with a tunnel endpoint (its frames
    /// and the tunnel's are told apart by VLAN only): not bridged.
    fn localnet(&self, d: &view::DatapathView) -> Option<Localnet> {
        let l = d.localnet.as_ref()?;
        let uplink = self.port(l.uplink.as_deref()?)?;
        if l.tag == 0 && self.topo.tunnels.is_underlay(uplink) {
            return None;
        }
        Some(Localnet {
            uplink,
            tag: l.tag,
            key: l.key,
        })
    }

    /// The data path's view of the logical switches, by domain, and what `show` says
    /// of each port.
    fn ovn_topo(&self, v: &View, dp_domain: &HashMap<Uuid, DomainId>) -> OvnTopo {
        let mut domains: Vec<Option<Arc<OvnDomain>>> = Vec::new();
        let mut localnets = Vec::new();
        for (u, d) in &v.datapaths {
            let dom = usize::from(dp_domain[u]);
            if domains.len() <= dom {
                domains.resize(dom + 1, None);
            }
            let groups = d
                .groups
                .iter()
                .map(|g| McGroup {
                    key: g.key,
                    address: g.address,
                    local: g.local.iter().filter_map(|n| self.port(n)).collect(),
                    remotes: g
                        .remotes
                        .iter()
                        .filter_map(|(c, ip)| self.remote(c, *ip))
                        .collect(),
                })
                .collect();
            domains[dom] = Some(Arc::new(OvnDomain {
                tunnel_key: d.tunnel_key,
                name: d.name.clone(),
                local_by_key: d
                    .local
                    .iter()
                    .filter_map(|(n, k)| Some((*k, self.port(n)?)))
                    .collect(),
                groups,
                has_unknown: d.has_unknown,
                learning: d.learning.iter().map(|(_, k)| *k).collect(),
                blocked: d.blocked.iter().map(|(_, k)| *k).collect(),
                localnet: self.localnet(d),
                snoop: d.snoop,
                static_flood: d.static_flood,
                lflow: d.lflow,
            }));
            if let Some(l) = domains[dom].as_ref().and_then(|o| o.localnet) {
                localnets.push((l.uplink, l.tag, dp_domain[u]));
            }
        }
        let port_status = v
            .ports
            .iter()
            .map(|(name, p)| {
                let s = match p {
                    PortView::Bound { datapath, key, .. } => {
                        let d = &v.datapaths[datapath];
                        format!(
                            "bound: logical switch {} (vni {}), port key {key}",
                            d.name, d.tunnel_key
                        )
                    }
                    PortView::Unbound(why) => format!("not bound: {why}"),
                };
                (name.clone(), s)
            })
            .collect();
        localnets.sort_unstable();
        OvnTopo {
            domains,
            localnets,
            chassis_of: self.chassis_of.take(),
            port_status,
            ..OvnTopo::default()
        }
    }
}

/// Gives every `iface_id` port of `t` its domain, key and port security from `v`
/// (detached when not bound); returns the ports whose domain changed.
fn place_ports(
    t: &mut Topology,
    v: &View,
    dp_domain: &HashMap<Uuid, DomainId>,
    detached: DomainId,
) -> Vec<crate::model::fdb::PortId> {
    let mut moved = Vec::new();
    for tp in t.ports.iter_mut().flatten() {
        if tp.config.iface_id.is_none() {
            continue;
        }
        let (domain, key, ovn_key, security) = match v.ports.get(&tp.port.name) {
            Some(PortView::Bound {
                datapath,
                key,
                security,
                ..
            }) if dp_domain.contains_key(datapath) => {
                let tk = v.datapaths[datapath].tunnel_key;
                (
                    dp_domain[datapath],
                    DomainKey::Ovn(tk),
                    *key,
                    security.clone(),
                )
            }
            _ => (detached, DomainKey::Detached, 0, Vec::new()),
        };
        if tp.domain != domain {
            moved.push(tp.port.id);
        }
        tp.domain = domain;
        tp.domain_key = key;
        tp.ovn_key = ovn_key;
        if tp.config.allowed_macs != security || tp.config.mac.is_some() {
            let mut c = (*tp.config).clone();
            c.mac = None;
            c.allowed_macs = security;
            tp.config = Arc::new(c);
        }
    }
    moved
}
