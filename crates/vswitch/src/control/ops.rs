//! Changing the switch while it runs: ports added and deleted, the configuration file
//! reloaded, rx queues rebalanced over the PMDs.
//!
//! Every change is a new topology snapshot (one generation); PMDs pick it up between
//! bursts, so frames of other ports are neither dropped nor delayed. A deleted port is
//! torn down only once every PMD runs a snapshot without it. Changes are serialized by
//! [`Control::ops`].

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::protocol::{PmdLoad, RebalanceReply, ReloadReply, Response};
use crate::config::{Args, Config, PortConfig, PortFlag};
use crate::model::acl::PortAcl;
use crate::model::fdb::PortId;
use crate::ports::Port;
use crate::switch::topology::Topology;
use crate::switch::Switch;

/// How long a change waits for every PMD to run the new topology.
const ADOPT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a deletion waits for a vhost-user port's service to end.
const SERVICE_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The control plane's state: the switch, the command line (a reload re-reads the file
/// it names and keeps its flags), the running vhost-user services, and the lock that
/// serializes changes.
pub struct Control {
    /// The switch.
    pub switch: Arc<Switch>,
    args: Args,
    services: Mutex<HashMap<String, JoinHandle<()>>>,
    /// Held by every change (ports, reloads, rebalances, ACL edits).
    pub ops: tokio::sync::Mutex<()>,
    /// Queue loads (cycles) at the last rebalance, to measure the load since.
    rebalanced_at: Mutex<HashMap<(String, u16), u64>>,
    /// Each PMD's last heartbeat value and when it changed (for the health check).
    pub(super) beats: Mutex<Vec<(u64, std::time::Instant)>>,
    /// The kernel's network state (links, addresses, routes, neighbours).
    pub net: Arc<std::sync::RwLock<super::netlink::NetState>>,
    /// Notified when the kernel's state changed.
    pub net_changed: Arc<tokio::sync::Notify>,
    /// Wakes the OVN chassis: ports were added, deleted or replaced.
    pub ovn_wake: tokio::sync::Notify,
    /// Asks the OVN chassis to remove its rows and stop.
    pub ovn_stop: tokio::sync::Notify,
    /// The OVN chassis has stopped.
    pub ovn_stopped: tokio::sync::Notify,
    /// New settings for the running OVN chassis, taken by its task when woken
    /// ([`Control::update_chassis`]).
    pub ovn_update: Mutex<Option<crate::config::ovn::OvnConfig>>,
    /// The OVN chassis, when vswitchd is one (set once by the daemon).
    pub ovn: std::sync::OnceLock<Arc<dyn OvnChassis>>,
    /// The Open vSwitch database client's state (`--ovsdb`), kept by its task.
    pub ovsdb: Mutex<Option<super::protocol::OvsdbShow>>,
}

/// What the control plane asks of the OVN chassis (which sits above it: `crate::ovn`
/// implements this, the daemon installs it in [`Control::ovn`]).
pub trait OvnChassis: Send + Sync + std::fmt::Debug {
    /// `vswitchctl ovn`'s reply on `sw`.
    fn reply(&self, sw: &Switch) -> super::protocol::OvnReply;

    /// `vswitchctl ovn trace`: `microflow` through the logical pipeline, each
    /// conntrack lookup answered by `ct` in turn.
    ///
    /// # Errors
    /// The microflow does not parse or names no local port; no pipeline yet.
    fn trace(
        &self,
        microflow: &str,
        ct: &[String],
    ) -> Result<super::protocol::OvnTraceReply, String>;

    /// The logical port (or router) a conntrack zone of `(datapath, port)` serves.
    fn zone_owner(&self, dp: u32, port: u16) -> Option<String>;
}

impl Control {
    /// `vswitchctl ovn`'s reply (empty when vswitchd is no OVN chassis).
    pub fn ovn_reply(&self) -> super::protocol::OvnReply {
        match self.ovn.get() {
            Some(o) => o.reply(&self.switch),
            None => Default::default(),
        }
    }

    /// The control plane of `switch`, started from `args`.
    pub fn new(switch: Arc<Switch>, args: Args) -> Arc<Self> {
        Arc::new(Control {
            switch,
            args,
            services: Mutex::new(HashMap::new()),
            ops: tokio::sync::Mutex::new(()),
            rebalanced_at: Mutex::new(HashMap::new()),
            beats: Mutex::new(Vec::new()),
            net: Arc::default(),
            net_changed: Arc::default(),
            ovn_wake: tokio::sync::Notify::new(),
            ovn_stop: tokio::sync::Notify::new(),
            ovn_stopped: tokio::sync::Notify::new(),
            ovn_update: Mutex::new(None),
            ovn: std::sync::OnceLock::new(),
            ovsdb: Mutex::new(None),
        })
    }

    /// Starts serving the vhost-user port `port` (accepting or connecting; a client
    /// retries every second), on the runtime's blocking threads.
    pub fn start_service(self: &Arc<Self>, port: Arc<Port>) {
        if port.vhost().is_none() {
            return;
        }
        let name = port.name.clone();
        let task = tokio::spawn(serve_vhost(self.switch.clone(), port));
        if let Some(old) = self
            .services
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, task)
        {
            old.abort();
        }
    }

    /// Adds the port `flag` `spec` describes.
    ///
    /// # Errors
    /// The spec is invalid, clashes with a port (name, socket, interface), or the port
    /// cannot be opened; nothing changed.
    pub async fn add_port(
        self: &Arc<Self>,
        flag: PortFlag,
        spec: &str,
    ) -> Result<Response, String> {
        let _g = self.ops.lock().await;
        if flag == PortFlag::Geneve {
            return self.add_tunnel(spec).await;
        }
        let (field, mut cfg) = crate::config::parse_port(flag, spec).map_err(|e| e.to_string())?;
        let mut config = (**self.switch.config()).clone();
        // The daemon's socket group and mode hold for added ports as for those at start.
        config.vhost_user_socket.complete(&mut cfg);
        let mut all = named_ports(&config);
        all.push((field, cfg.clone()));
        crate::config::validate_ports(&all).map_err(|e| e.to_string())?;
        config.ports.push(cfg.clone());
        check_overlay(&config)?;
        let previous = (**self.switch.config()).clone();
        // In force before the port is placed: the topology's overlay is built from it.
        self.switch.set_config(config);
        let id = match self.install(&cfg).await {
            Ok(id) => id,
            Err(e) => {
                self.switch.set_config(previous);
                return Err(e);
            }
        };
        info!(port = %cfg.name, id, kind = %cfg.kind, "port added");
        Ok(Response::PortAdded { name: cfg.name, id })
    }

    /// Adds the tunnel endpoint `spec` describes (`--geneve`'s syntax): its uplink's XDP
    /// program is replaced by one that steers its Geneve to the sockets.
    async fn add_tunnel(self: &Arc<Self>, spec: &str) -> Result<Response, String> {
        let g = crate::config::parse_geneve_spec(spec).map_err(|e| e.to_string())?;
        let old = (**self.switch.config()).clone();
        let mut config = old.clone();
        config.geneve.push(g.clone());
        self.set_tunnels(&old, config).await?;
        info!(tep = %g.name, local = %g.local, uplink = %g.uplink, "tunnel endpoint added");
        Ok(Response::PortAdded {
            name: g.name,
            id: u16::MAX,
        })
    }

    /// Replaces the tunnel endpoints named `old_teps` and the flood lists of VNIs
    /// `old_vnis` (what a previous call put in force; the others stay) by `teps` and
    /// `vnis`: the Open vSwitch database's geneve interfaces (`--ovsdb`). Nothing
    /// happens when nothing changes.
    ///
    /// # Errors
    /// The endpoints do not fit the host or clash with others; nothing changed.
    pub async fn replace_overlay(
        self: &Arc<Self>,
        old_teps: &[String],
        old_vnis: &[u32],
        teps: Vec<crate::config::GeneveConfig>,
        vnis: Vec<crate::config::VniConfig>,
    ) -> Result<(), String> {
        let _g = self.ops.lock().await;
        let old = (**self.switch.config()).clone();
        let mut config = old.clone();
        config.geneve.retain(|g| !old_teps.contains(&g.name));
        config.vnis.retain(|v| !old_vnis.contains(&v.id));
        let ovn = config.ovn.is_some();
        config.geneve.extend(
            teps.into_iter()
                .map(|g| crate::config::GeneveConfig { ovn, ..g }),
        );
        config.vnis.extend(vnis);
        if config == old {
            return Ok(());
        }
        check_overlay(&config)?;
        crate::config::geneve::check_host(&config)?;
        self.set_tunnels(&old, config).await
    }

    /// Puts `config` (with a tunnel endpoint more or less than `old`) in force: checked
    /// as a start would, the uplinks' XDP filters changed, the topology's overlay
    /// rebuilt.
    pub(super) async fn set_tunnels(
        self: &Arc<Self>,
        old: &Config,
        config: Config,
    ) -> Result<(), String> {
        check_overlay(&config)?;
        self.switch.set_config(config.clone());
        self.refilter(old, &config);
        let (_, generation) = self.switch.publish(|_| Ok::<_, String>(()))?;
        self.adopted(generation).await;
        self.net_changed.notify_one();
        Ok(())
    }

    /// Opens port `cfg` under the lowest free id, places it in the topology (its domain
    /// from `cfg`, its ACL from the configuration in force), starts its service and waits
    /// until every PMD runs it. Returns its id.
    async fn install(self: &Arc<Self>, cfg: &PortConfig) -> Result<PortId, String> {
        let id = self
            .switch
            .topo()
            .free_id()
            .ok_or("too many ports: every port number is taken")?;
        let port = self.open(id, cfg.clone(), &self.switch.config()).await?;
        self.publish_opened(vec![(port, cfg.clone())], None).await?;
        Ok(id)
    }

    /// Places ports already opened in the topology, each with the VLAN and ACL of
    /// `config` (a reload's; else the configuration in force), in one generation; with
    /// a reload's `config`, the ports it keeps get its VLAN and ACL at the same time.
    /// Starts their services and waits until every PMD runs the result. Returns the
    /// ports changed in place.
    async fn publish_opened(
        self: &Arc<Self>,
        opened: Vec<(Arc<Port>, PortConfig)>,
        reload: Option<&Config>,
    ) -> Result<InPlace, String> {
        let current = self.switch.config();
        let config = reload.unwrap_or(&current);
        let placed: Vec<_> = opened
            .iter()
            .map(|(p, cfg)| self.switch.placed(p.clone(), cfg, config))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let (sw, pmds) = (self.switch.clone(), self.switch.pmds.len());
        let (changed, generation) = self.switch.publish(|t| {
            for tp in placed {
                t.insert(tp);
            }
            Ok::<_, String>(match reload {
                Some(new) => apply_in_place(&sw, t, new, pmds),
                None => InPlace::default(),
            })
        })?;
        for (p, _) in opened {
            self.start_service(p);
        }
        self.adopted(generation).await;
        self.ovn_wake.notify_one();
        Ok(changed)
    }

    /// Deletes port `name`: its queues leave their PMDs, then its guest sees the link go
    /// down (or its XDP program is detached, its tap removed), its socket is removed, its
    /// FDB entries and cached flows go.
    ///
    /// # Errors
    /// No port has that name.
    pub async fn del_port(self: &Arc<Self>, name: &str) -> Result<Response, String> {
        let _g = self.ops.lock().await;
        let mut config = (**self.switch.config()).clone();
        if self.switch.topo().by_name(name).is_none()
            && config.geneve.iter().any(|g| g.name == name)
        {
            let old = config.clone();
            config.geneve.retain(|g| g.name != name);
            self.set_tunnels(&old, config).await?;
            info!(tep = name, "tunnel endpoint deleted");
            return Ok(Response::PortDeleted { name: name.into() });
        }
        self.remove_ports(&[name.to_string()], &mut config).await?;
        self.switch.set_config(config);
        info!(port = name, "port deleted");
        Ok(Response::PortDeleted { name: name.into() })
    }

    /// Removes `names` from the topology in one generation, waits until no PMD uses
    /// them, then tears them down. `config` loses them too.
    async fn remove_ports(
        self: &Arc<Self>,
        names: &[String],
        config: &mut Config,
    ) -> Result<(), String> {
        let (removed, generation) = self.switch.publish(|t| {
            let mut out = Vec::new();
            for n in names {
                let id = t
                    .by_name(n)
                    .map(|p| p.port.id)
                    .ok_or_else(|| format!("no port named {n:?}"))?;
                out.extend(t.remove(id));
            }
            Ok::<_, String>(out)
        })?;
        config.ports.retain(|p| !names.contains(&p.name));
        config.acl.retain(|(p, _)| !names.contains(p));
        config.fdb_static.retain(|e| !names.contains(&e.port));
        self.adopted(generation).await;
        for tp in removed {
            self.teardown(tp.port).await;
        }
        self.ovn_wake.notify_one();
        Ok(())
    }

    /// Closes a port no PMD uses any more and waits for its service to end.
    async fn teardown(&self, port: Arc<Port>) {
        let p = port.clone();
        let _ = tokio::task::spawn_blocking(move || p.close()).await;
        let task = self
            .services
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&port.name);
        if let Some(task) = task {
            if tokio::time::timeout(SERVICE_STOP_TIMEOUT, task)
                .await
                .is_err()
            {
                warn!(port = %port.name, "vhost-user service did not stop within 5 s");
            }
        }
        let n = self.switch.fdb.flush_port(port.id, true);
        info!(port = %port.name, flushed_macs = n, "port torn down");
        // The last references go with `port` here (the topology no longer has it): an
        // uplink's sockets and UMEM, a tap device.
        let _ = tokio::task::spawn_blocking(move || drop(port)).await;
    }

    /// Opens (and binds) a port on a blocking thread, as `config` describes its context
    /// (the tunnel endpoints an uplink carries, the overlay's MTU).
    async fn open(
        &self,
        id: PortId,
        cfg: PortConfig,
        config: &Config,
    ) -> Result<Arc<Port>, String> {
        let ctx = crate::ports::OpenCtx::new(config, &cfg.name, self.switch.pmds.len());
        tokio::task::spawn_blocking(move || {
            let port = Port::open(id, &cfg, &ctx).map_err(|e| e.to_string())?;
            if let Some(v) = port.vhost() {
                v.bind().map_err(|e| {
                    format!(
                        "port {}: cannot listen on {}: {e}",
                        cfg.name,
                        v.path.display()
                    )
                })?;
            }
            Ok(Arc::new(port))
        })
        .await
        .map_err(|e| format!("opening the port failed: {e}"))?
    }

    /// Waits until every PMD runs `generation`.
    pub(crate) async fn adopted(&self, generation: u64) {
        let sw = self.switch.clone();
        let ok = tokio::task::spawn_blocking(move || sw.wait_adopted(generation, ADOPT_TIMEOUT))
            .await
            .unwrap_or(false);
        if !ok && !self.switch.stopping() {
            warn!(
                generation,
                "a PMD did not pick up the new topology within 5 s"
            );
        }
    }

    /// Re-reads the configuration file and applies the difference: ports added,
    /// deleted, changed in place (VLAN, ACL) or replaced (anything else), static MACs,
    /// aging and poll mode.
    ///
    /// # Errors
    /// The file does not parse or validate, changes a setting that needs a restart, or
    /// a new port cannot be opened: nothing changed. A replaced port that cannot be
    /// opened again is reported (the rest was applied).
    pub async fn reload(self: &Arc<Self>) -> Result<Response, String> {
        let _g = self.ops.lock().await;
        let mut new = Config::try_from(self.args.clone()).map_err(|e| e.to_string())?;
        let old = (**self.switch.config()).clone();
        if new.ovsdb.is_some() {
            // The database's ports stay: the file has none (its settings still apply);
            // so do the OVN chassis and tunnel endpoint its external_ids made.
            new.ports.clone_from(&old.ports);
            if new.ovn.is_none() {
                new.ovn.clone_from(&old.ovn);
                for g in old.geneve.iter().filter(|g| g.ovn) {
                    if !new.geneve.iter().any(|n| n.name == g.name) {
                        new.geneve.push(g.clone());
                    }
                }
            }
        }
        restart_needed(&old, &new)?;
        crate::config::geneve::check_host(&new)
            .map_err(|e| format!("reload: {e}; nothing changed"))?;
        let plan = ReloadPlan::new(&old, &new);
        let old_config = old.clone();
        // Ports that are only new are opened first: if one fails, nothing changed.
        let opened = self.open_new(&plan.added, &new).await?;
        let mut config = old;
        self.remove_ports(&plan.gone(), &mut config).await?;
        // In force before the ports are placed: the topology's overlay is built from it.
        self.switch.set_config(new.clone());
        let changed = self.publish_opened(opened, Some(&new)).await?;
        self.refilter(&old_config, &new);
        for name in &changed.domain_changed {
            if let Some(p) = self.switch.topo().by_name(name) {
                self.switch.fdb.flush_port(p.port.id, false);
            }
        }
        // Replaced ports are opened again once the old ones released their sockets.
        let mut failed = Vec::new();
        for cfg in &plan.replaced {
            if let Err(e) = self.install(cfg).await {
                failed.push(e);
            }
        }
        self.switch.install_static_macs(&new);
        self.switch
            .fdb
            .set_aging(Duration::from_secs(new.fdb_aging_secs));
        self.switch.fdb.set_max_macs(new.fdb_max_macs);
        let reply = plan.reply(changed.names);
        info!(?reply, "configuration reloaded");
        if !failed.is_empty() {
            return Err(format!("reload applied except: {}", failed.join("; ")));
        }
        Ok(Response::Reloaded(reply))
    }

    /// Puts the ports of `wanted` in force, port by port (the Open vSwitch database's
    /// bridges and ports, `--ovsdb`): ports it lacks are deleted, ports whose VLAN or
    /// bridge changed are changed in place, others that changed are replaced, new ones
    /// are opened one at a time, so that one that cannot be opened leaves the others
    /// applied. Only `wanted.ports` is read. Returns the ports that could not be put
    /// in force: (name, why); they are not in the switch's configuration afterwards,
    /// so the next call tries them again.
    pub async fn apply_ports(self: &Arc<Self>, wanted: &[PortConfig]) -> Vec<(String, String)> {
        let _g = self.ops.lock().await;
        let old = (**self.switch.config()).clone();
        // The daemon's socket group and mode hold for these ports as for any.
        let mut wanted = wanted.to_vec();
        for p in &mut wanted {
            old.vhost_user_socket.complete(p);
        }
        let wanted = &wanted[..];
        let by_name = |ports: &[PortConfig]| {
            let mut v: Vec<PortConfig> = ports.to_vec();
            v.sort_by(|a, b| a.name.cmp(&b.name));
            v
        };
        if by_name(&old.ports) == by_name(wanted) {
            // Nothing to do: no new topology generation (flow caches stay warm).
            return Vec::new();
        }
        let new = Config {
            ports: wanted.to_vec(),
            ..old.clone()
        };
        let plan = ReloadPlan::new(&old, &new);
        let mut failed = Vec::new();
        let mut config = old;
        let gone = plan.gone();
        if !gone.is_empty() {
            if let Err(e) = self.remove_ports(&gone, &mut config).await {
                failed.push(("*".to_string(), e));
            }
        }
        // The kept ports, with their new VLANs and bridges.
        config.ports = wanted
            .iter()
            .filter(|p| config.ports.iter().any(|o| o.name == p.name))
            .cloned()
            .collect();
        self.switch.set_config(config.clone());
        match self.publish_opened(Vec::new(), Some(&config)).await {
            Ok(changed) => {
                for name in &changed.domain_changed {
                    if let Some(p) = self.switch.topo().by_name(name) {
                        self.switch.fdb.flush_port(p.port.id, false);
                    }
                }
            }
            Err(e) => failed.push(("*".to_string(), e)),
        }
        for cfg in plan.added.iter().chain(&plan.replaced) {
            let mut c = (**self.switch.config()).clone();
            c.ports.push(cfg.clone());
            self.switch.set_config(c);
            if let Err(e) = self.install(cfg).await {
                let mut c = (**self.switch.config()).clone();
                c.ports.retain(|p| p.name != cfg.name);
                self.switch.set_config(c);
                failed.push((cfg.name.clone(), e));
            }
        }
        if !plan.added.is_empty() || !plan.deleted.is_empty() || !plan.replaced.is_empty() {
            info!(reply = ?plan.reply(Vec::new()), failed = failed.len(), "ports applied");
        }
        failed
    }

    /// Gives every kept uplink whose XDP filter changed from `old` to `new` (its
    /// tunnel endpoints, or whether it carries OVN provider networks) its new one.
    pub(super) fn refilter(&self, old: &Config, new: &Config) {
        use crate::ports::afxdp::xdp::TepFilter;
        for tp in self.switch.topo().iter() {
            let crate::ports::PortKind::Afxdp(x) = &tp.port.kind else {
                continue;
            };
            let name = &tp.port.name;
            let (a, b) = (
                TepFilter::of(&old.geneve, name, old.bridges(name)),
                TepFilter::of(&new.geneve, name, new.bridges(name)),
            );
            if a != b {
                if let Err(e) = x.set_filter(b.as_ref()) {
                    warn!(port = %tp.port.name, error = %e, "cannot change the uplink's XDP filter");
                }
            }
        }
    }

    /// Opens `ports` under free ids, or none of them.
    async fn open_new(
        &self,
        ports: &[PortConfig],
        config: &Config,
    ) -> Result<Vec<(Arc<Port>, PortConfig)>, String> {
        let mut opened: Vec<(Arc<Port>, PortConfig)> = Vec::new();
        // A copy of the topology reserves each id taken for the next port.
        let mut ids = (*self.switch.topo()).clone();
        for cfg in ports {
            let id = ids.free_id().ok_or("too many ports")?;
            let port = match self.open(id, cfg.clone(), config).await {
                Ok(p) => p,
                Err(e) => {
                    for (p, _) in &opened {
                        p.close();
                    }
                    return Err(format!("reload: {e}; nothing changed"));
                }
            };
            let tp = self
                .switch
                .placed(port.clone(), cfg, config)
                .map_err(|e| e.to_string())?;
            ids.insert(tp);
            opened.push((port, cfg.clone()));
        }
        Ok(opened)
    }

    /// Reassigns rx queues to PMDs by the load measured since the last rebalance
    /// (greedy, busiest queue first to the least loaded PMD, as Open vSwitch's `cycles`
    /// assignment does).
    ///
    /// # Errors
    /// None today; the signature leaves room for a refused rebalance.
    pub async fn rebalance(self: &Arc<Self>) -> Result<Response, String> {
        let _g = self.ops.lock().await;
        Ok(Response::Rebalanced(self.rebalance_locked()))
    }

    /// The busiest PMD's measured load (cycles since the last rebalance) now, and under
    /// the assignment a rebalance would make.
    pub(super) fn rebalance_gain(&self) -> (f64, f64) {
        let topo = self.switch.topo();
        let last = self.rebalanced_at.lock().unwrap_or_else(|e| e.into_inner());
        let loads = queue_loads(&topo, &last);
        let mut now = vec![0u64; self.switch.pmds.len()];
        for &(p, q, l) in &loads {
            if let Some(m) = topo.pmd_of(p, q) {
                now[m] += l;
            }
        }
        let plan = assign(&loads, self.switch.pmds.len());
        let after = plan
            .iter()
            .map(|qs| qs.iter().map(|q| q.2).sum::<u64>())
            .max()
            .unwrap_or(0);
        (now.into_iter().max().unwrap_or(0) as f64, after as f64)
    }

    pub(super) fn rebalance_locked(&self) -> RebalanceReply {
        let topo = self.switch.topo();
        let mut last = self.rebalanced_at.lock().unwrap_or_else(|e| e.into_inner());
        let loads = queue_loads(&topo, &last);
        let plan = assign(&loads, self.switch.pmds.len());
        let moved = plan
            .iter()
            .enumerate()
            .map(|(pmd, qs)| {
                qs.iter()
                    .filter(|q| topo.pmd_of(q.0, q.1) != Some(pmd))
                    .count()
            })
            .sum();
        if moved > 0 {
            let plan = plan.clone();
            let _ = self.switch.publish(|t| {
                t.pmd_queues = plan
                    .iter()
                    .map(|qs| qs.iter().map(|&(p, q, _)| (p, q)).collect())
                    .collect();
                Ok::<_, ()>(())
            });
        }
        *last = cumulative_loads(&topo);
        let total: u64 = loads.iter().map(|l| l.2).sum::<u64>().max(1);
        let pmds = plan
            .iter()
            .enumerate()
            .map(|(pmd, qs)| PmdLoad {
                pmd,
                queues: qs
                    .iter()
                    .map(|&(p, q, _)| {
                        format!("{}/{q}", topo.port(p).map_or("?", |p| p.port.name.as_str()))
                    })
                    .collect(),
                cycles: qs.iter().map(|q| q.2).collect(),
                percent: 100.0 * qs.iter().map(|q| q.2).sum::<u64>() as f64 / total as f64,
            })
            .collect();
        if moved > 0 {
            info!(moved, "rx queues rebalanced over the PMDs");
        }
        RebalanceReply { moved, pmds }
    }
}

/// Serves a vhost-user port until it is closed: one connection at a time on a blocking
/// thread; a client-mode port that finds no peer retries every second.
async fn serve_vhost(switch: Arc<Switch>, port: Arc<Port>) {
    let mut logged_absent = false;
    loop {
        let v = port.vhost().expect("a vhost-user port");
        if v.is_closed() || switch.stopping() {
            return;
        }
        let (sw, p) = (switch.clone(), port.clone());
        let r = tokio::task::spawn_blocking(move || {
            let changed = |up: bool| {
                if !up {
                    let n = sw.fdb.flush_port(p.id, false);
                    info!(port = %p.name, flushed_macs = n, "port disconnected");
                }
                sw.wakers.wake_all();
            };
            let v = p.vhost().expect("a vhost-user port");
            v.serve_once(&p.name, &sw.wakers, &changed)
        })
        .await;
        let v = port.vhost().expect("a vhost-user port");
        match r {
            Ok(Ok(())) => logged_absent = false,
            Ok(Err(_)) | Err(_) if v.is_closed() || switch.stopping() => return,
            Ok(Err(e)) => {
                if v.mode == crate::config::PortType::VhostUser {
                    warn!(port = %port.name, error = %e, "vhost-user accept failed");
                } else if !logged_absent {
                    info!(port = %port.name, path = %v.path.display(), error = %e,
                          "peer socket not available; retrying every second");
                    logged_absent = true;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                warn!(port = %port.name, error = %e, "vhost-user service thread failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// A changed configuration's tunnel endpoints and VNIs, checked as a start checks them
/// (each named by its name or id), and against the host (addresses, MTUs).
pub(super) fn check_overlay(config: &Config) -> Result<(), String> {
    let teps: Vec<_> = config
        .geneve
        .iter()
        .map(|g| (format!("geneve {:?}", g.name), g.clone()))
        .collect();
    let vnis: Vec<_> = config
        .vnis
        .iter()
        .map(|v| (format!("vni {}", v.id), v.clone()))
        .collect();
    crate::config::geneve::validate_tunnels(&teps, &vnis, &config.ports)
        .map_err(|e| e.to_string())?;
    crate::config::geneve::check_host(config)
}

/// `config`'s ports, each named by its name (for errors about the port set).
fn named_ports(config: &Config) -> Vec<(String, PortConfig)> {
    config
        .ports
        .iter()
        .map(|p| (format!("port {:?}", p.name), p.clone()))
        .collect()
}

/// Settings that cannot change while vswitchd runs.
fn restart_needed(old: &Config, new: &Config) -> Result<(), String> {
    let mut what = Vec::new();
    if old.pmd_cpus != new.pmd_cpus {
        what.push("pmd_cpus");
    }
    if old.control != new.control {
        what.push("control");
    }
    if old.metrics != new.metrics {
        what.push("metrics");
    }
    if old.flow_cache != new.flow_cache {
        what.push("flow_cache");
    }
    if old.emc_insert_inv_prob != new.emc_insert_inv_prob {
        what.push("emc_insert_inv_prob");
    }
    if old.mcast != new.mcast {
        what.push("mcast_*");
    }
    if old.ovn != new.ovn {
        what.push("ovn_remote, chassis, ovn_bridge_mappings, ovn_cms_options");
    }
    if what.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "reload: {} cannot change while vswitchd runs (restart it to apply); nothing changed",
            what.join(", ")
        ))
    }
}

/// Which ports a reload adds, deletes and replaces (compared by name).
struct ReloadPlan {
    added: Vec<PortConfig>,
    deleted: Vec<PortConfig>,
    replaced: Vec<PortConfig>,
}

impl ReloadPlan {
    /// The ports that leave the topology: deleted, or replaced (added again after).
    fn gone(&self) -> Vec<String> {
        self.deleted
            .iter()
            .chain(&self.replaced)
            .map(|p| p.name.clone())
            .collect()
    }

    /// The reply, with the ports `changed` in place.
    fn reply(&self, changed: Vec<String>) -> ReloadReply {
        let names = |v: &[PortConfig]| v.iter().map(|p| p.name.clone()).collect();
        ReloadReply {
            added: names(&self.added),
            deleted: names(&self.deleted),
            changed,
            replaced: names(&self.replaced),
        }
    }

    fn new(old: &Config, new: &Config) -> Self {
        let find = |c: &Config, n: &str| c.ports.iter().find(|p| p.name == n).cloned();
        let mut plan = ReloadPlan {
            added: Vec::new(),
            deleted: Vec::new(),
            replaced: Vec::new(),
        };
        for p in &new.ports {
            match find(old, &p.name) {
                None => plan.added.push(p.clone()),
                Some(o) if !same_but_domain(&o, p) => plan.replaced.push(p.clone()),
                Some(_) => {}
            }
        }
        for p in &old.ports {
            if find(new, &p.name).is_none() {
                plan.deleted.push(p.clone());
            }
        }
        plan
    }
}

/// Whether two configurations of a port differ at most in what changes in place: its
/// VLAN or trunk (and database bridge), its port security and its MAC limit.
fn same_but_domain(a: &PortConfig, b: &PortConfig) -> bool {
    PortConfig {
        vlan: b.vlan,
        trunk: b.trunk.clone(),
        bridge: b.bridge,
        unbound: b.unbound,
        mac: b.mac,
        allowed_macs: b.allowed_macs.clone(),
        max_macs: b.max_macs,
        ..a.clone()
    } == *b
}

/// Ports a reload changed in place; those whose domain changed lose their learned MACs.
#[derive(Default)]
struct InPlace {
    names: Vec<String>,
    domain_changed: Vec<String>,
}

/// Gives every port of `t` that `new` keeps its new VLAN and ACL.
fn apply_in_place(sw: &Switch, t: &mut Topology, new: &Config, pmds: usize) -> InPlace {
    let mut out = InPlace {
        names: Vec::new(),
        domain_changed: Vec::new(),
    };
    for tp in t.ports.iter_mut().flatten() {
        let Some(cfg) = new.ports.iter().find(|p| p.name == tp.port.name) else {
            continue;
        };
        let Ok(placed) = sw.placed(tp.port.clone(), cfg, new) else {
            continue;
        };
        let mut changed = false;
        // An OVN port's domain and port security are the chassis' (`crate::ovn`).
        let ovn = cfg.iface_id.is_some() && cfg.iface_id == tp.config.iface_id;
        if ovn {
            if placed.acl.rules.rules() != tp.acl.rules.rules() {
                tp.acl = Arc::new(PortAcl::new(placed.acl.rules.clone(), pmds));
                out.names.push(cfg.name.clone());
            }
            continue;
        }
        if placed.domain != tp.domain || placed.config.trunk != tp.config.trunk {
            out.domain_changed.push(cfg.name.clone());
            tp.domain = placed.domain;
            tp.domain_key = placed.domain_key;
            changed = true;
        }
        if placed.acl.rules.rules() != tp.acl.rules.rules() {
            tp.acl = Arc::new(PortAcl::new(placed.acl.rules.clone(), pmds));
            changed = true;
        }
        if placed.config.mac != tp.config.mac
            || placed.config.allowed_macs != tp.config.allowed_macs
            || placed.mac_limit != tp.mac_limit
        {
            tp.mac_limit = placed.mac_limit;
            changed = true;
        }
        tp.config = placed.config;
        if changed {
            out.names.push(cfg.name.clone());
        }
    }
    out
}

/// Cumulative cycles per (port name, queue).
fn cumulative_loads(topo: &Topology) -> HashMap<(String, u16), u64> {
    let mut m = HashMap::new();
    for tp in topo.iter() {
        for q in 0..tp.port.rx_queues() {
            if let Some(l) = tp.port.queue_load(q) {
                m.insert((tp.port.name.clone(), q), l.cycles.load(Ordering::Relaxed));
            }
        }
    }
    m
}

/// Each queue of `topo` with the cycles it took since `since` was measured.
fn queue_loads(topo: &Topology, since: &HashMap<(String, u16), u64>) -> Vec<(PortId, u16, u64)> {
    let mut v = Vec::new();
    for tp in topo.iter() {
        for q in 0..tp.port.rx_queues() {
            let now = tp
                .port
                .queue_load(q)
                .map_or(0, |l| l.cycles.load(Ordering::Relaxed));
            let before = since.get(&(tp.port.name.clone(), q)).copied().unwrap_or(0);
            v.push((tp.port.id, q, now.saturating_sub(before)));
        }
    }
    v
}

/// Assigns queues to `pmds` PMDs: busiest first, each to the PMD with the least load so
/// far (fewest queues on a tie). Returns each PMD's (port, queue, load).
pub fn assign(loads: &[(PortId, u16, u64)], pmds: usize) -> Vec<Vec<(PortId, u16, u64)>> {
    let mut sorted = loads.to_vec();
    sorted.sort_by(|a, b| b.2.cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
    let mut out: Vec<Vec<(PortId, u16, u64)>> = vec![Vec::new(); pmds.max(1)];
    let mut total = vec![0u64; pmds.max(1)];
    for l in sorted {
        let i = (0..out.len())
            .min_by_key(|&i| (total[i], out[i].len()))
            .expect("at least one PMD");
        total[i] += l.2;
        out[i].push(l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::assign;

    #[test]
    fn busiest_queues_go_to_the_least_loaded_pmds() {
        // Two busy queues and two idle ones over two PMDs: one busy queue each.
        let loads = [(0, 0, 900), (1, 0, 10), (2, 0, 800), (3, 0, 0)];
        let a = assign(&loads, 2);
        let busy: Vec<u64> = a.iter().map(|qs| qs.iter().map(|q| q.2).sum()).collect();
        assert_eq!(busy, vec![900, 810]);
        assert!(a[0].iter().any(|q| q.0 == 0) && a[1].iter().any(|q| q.0 == 2));
        // Every queue is placed exactly once.
        let mut all: Vec<_> = a.iter().flatten().map(|q| (q.0, q.1)).collect();
        all.sort();
        assert_eq!(all, vec![(0, 0), (1, 0), (2, 0), (3, 0)]);
    }

    #[test]
    fn idle_queues_spread_by_count() {
        let loads: Vec<_> = (0..6).map(|p| (p, 0, 0)).collect();
        let a = assign(&loads, 3);
        assert!(a.iter().all(|qs| qs.len() == 2), "{a:?}");
    }
}
