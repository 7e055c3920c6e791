//! vswitchd configured through the Open vSwitch database (`--ovsdb`), as ovs-vswitchd
//! is: a client of the local `ovsdb-server` serving `vswitch.ovsschema`, so that
//! `ovs-vsctl`, os-vif and libvirt drive it unchanged.
//!
//! One task on the control plane's runtime. It monitors `Open_vSwitch`, `Bridge`,
//! `Port` and `Interface` ([`schema`]); each batch of changes is one pass: the rows
//! are read from the replica, the wanted ports derived ([`wanted::derive`], pure), the
//! difference put in force through the same machinery as `vswitchctl add-port`,
//! `del-port` and reloads ([`Control::apply_ports`]: other ports are undisturbed),
//! and the result written back ([`writeback`]): every interface's `ofport`, state
//! and `error`, then `cur_cfg = next_cfg`, which `ovs-vsctl` (without `--no-wait`)
//! waits for. Every [`TICK`] the interfaces' state is written again where it changed
//! (link state, a guest attached), their `statistics` every [`STATS_INTERVAL`]
//! (ovs-vswitchd's default; `Open_vSwitch other_config:stats-update-interval`, ms,
//! sets it, at least 5000 as there: [`stats_interval`]).
//!
//! While the database is away the switch keeps its ports and forwards; the client
//! reconnects, the replica resyncs, and the next pass applies only the difference (the
//! ephemeral columns a restarted server lost are written again). A database without
//! its `Open_vSwitch` row is not read as "no bridges": nothing is deleted then.
//!
//! - [`schema`]: the four tables, typed, and the state columns written back;
//! - [`wanted`]: rows -> ports (bridges as isolated sets of domains, interface types,
//!   tags, `fail_mode`), pure;
//! - [`tunnels`]: `geneve` interfaces -> tunnel endpoints and VNI flood lists;
//! - [`chassis`]: `Open_vSwitch.external_ids` -> an OVN chassis, as ovn-controller;
//! - [`writeback`]: ofports and each interface's state, and the root row.
//!
//! Sources: vswitch.ovsschema 8.3 (Open vSwitch 3.1), ovs-vswitchd.conf.db(5),
//! ovn-controller(8).

pub mod chassis;
pub mod schema;
pub mod tunnels;
pub mod wanted;
pub mod writeback;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ovsdb::{Client, ClientConfig, Event, MonitorSpec, Remote, TableSpec};
use tracing::{info, warn};

use crate::config::MacAddr;
use crate::control::ops::Control;
use crate::control::protocol::OvsdbShow;
use schema::{Bridge, Interface, OpenVswitch, Port, IFACE_WRITTEN, ROOT_WRITTEN};
use wanted::{BridgeNumbers, Ctx, Db, IfaceIds, Wanted};
use writeback::Ofports;

/// How often interface state (link, guest attached) is written back where it changed.
pub const TICK: Duration = Duration::from_secs(1);

/// How often `Interface.statistics` is refreshed (ovs-vswitchd's default
/// `other_config:stats-update-interval`, 5000 ms).
pub const STATS_INTERVAL: Duration = Duration::from_secs(5);

/// The statistics refresh `other_config:stats-update-interval` asks for (ms; below
/// 5000 or unreadable: 5000, as ovs-vswitchd).
pub fn stats_interval(other_config: &BTreeMap<String, String>) -> Duration {
    other_config
        .get("stats-update-interval")
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(STATS_INTERVAL, |ms| {
            Duration::from_millis(ms).max(STATS_INTERVAL)
        })
}

/// A failed pass is tried again after this long, even if nothing changes meanwhile.
const RETRY: Duration = Duration::from_secs(1);

/// The tables and columns monitored (the columns written back included, to write only
/// what changed).
pub fn monitor_spec() -> MonitorSpec {
    MonitorSpec::new(schema::DATABASE)
        .table(TableSpec::of::<OpenVswitch>())
        .table(TableSpec::of::<Bridge>())
        .table(TableSpec::of::<Port>())
        .table(TableSpec::of::<Interface>().index("name"))
}

/// Open vSwitch's run directory, where `dpdkvhostuser` sockets go: `OVS_RUNDIR`, else
/// `/var/run/openvswitch` (ovs-vswitchd's `ovs_rundir()`).
pub fn rundir() -> PathBuf {
    std::env::var_os("OVS_RUNDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/run/openvswitch"))
}

/// Starts the database client on the current runtime.
///
/// # Errors
/// `remote` does not read as an OVSDB remote (config validation checked it already).
pub fn spawn(ctl: Arc<Control>, remote: &str) -> Result<(), String> {
    let remote: Remote = remote
        .parse()
        .map_err(|e| format!("--ovsdb {remote}: {e}"))?;
    tokio::spawn(run(ctl, remote));
    Ok(())
}

/// What the task keeps between passes.
struct Session {
    ctl: Arc<Control>,
    client: Client,
    numbers: BridgeNumbers,
    ofports: Ofports,
    /// The last pass's result, for the ticks between passes.
    wanted: Wanted,
    stats_at: Option<Instant>,
    /// The OVN chassis of `external_ids`.
    chassis: Chassis,
    /// The tunnel endpoints and VNIs the geneve interfaces put in force.
    overlay: (Vec<String>, Vec<u32>),
}

/// Where the OVN chassis of `Open_vSwitch.external_ids` is.
#[derive(Debug, Default)]
enum Chassis {
    /// Not asked for (no `ovn-remote`), or started by `--ovn-remote`.
    #[default]
    None,
    /// Asked for, not started: why (logged once per reason; tried again every tick).
    Waiting(String),
    /// Running with settings `ids`, reporting into `status`; `pending`: why the
    /// database's newer settings are not in force yet (logged once per reason; tried
    /// again every tick).
    Running {
        ids: chassis::OvnIds,
        status: Arc<crate::ovn::Status>,
        pending: Option<String>,
    },
}

/// The client task.
async fn run(ctl: Arc<Control>, remote: Remote) {
    info!(%remote, "ports and bridges come from the Open vSwitch database");
    *ctl.ovsdb.lock().unwrap_or_else(|e| e.into_inner()) = Some(OvsdbShow {
        remote: remote.to_string(),
        connection: "connecting".into(),
        ..OvsdbShow::default()
    });
    let (client, mut events) = Client::start(ClientConfig::new(vec![remote]), monitor_spec());
    let mut s = Session {
        ctl,
        client,
        numbers: BridgeNumbers::default(),
        ofports: Ofports::default(),
        wanted: Wanted::default(),
        stats_at: None,
        chassis: Chassis::None,
        overlay: Default::default(),
    };
    let mut connected = false;
    let mut retry: Option<tokio::time::Instant> = None;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let retry_at = retry.unwrap_or_else(|| tokio::time::Instant::now() + TICK * 3600);
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else { break };
                let mut changed = relevant(&ev);
                connected = note(&s.ctl, ev, connected);
                while let Ok(ev) = events.try_recv() {
                    changed |= relevant(&ev);
                    connected = note(&s.ctl, ev, connected);
                }
                if !changed && retry.is_none() {
                    continue;
                }
            }
            () = tokio::time::sleep_until(retry_at), if retry.is_some() => {}
            _ = tick.tick(), if connected && retry.is_none() => {
                s.tick().await;
                continue;
            }
        }
        if !connected {
            continue;
        }
        retry = match s.pass().await {
            Ok(()) => None,
            Err(e) => {
                warn!(error = %e, "Open vSwitch database pass failed; retried in 1 s or on the next change");
                Some(tokio::time::Instant::now() + RETRY)
            }
        };
    }
}

impl Session {
    /// Between passes: the chassis tried again while it waits (its encap address may
    /// have appeared on an uplink), interface state written where it changed.
    async fn tick(&mut self) {
        if matches!(
            self.chassis,
            Chassis::Waiting(_)
                | Chassis::Running {
                    pending: Some(_),
                    ..
                }
        ) {
            let ids = self
                .client
                .replica()
                .rows::<OpenVswitch>()
                .next()
                .and_then(|(_, r)| chassis::OvnIds::from_external_ids(&r.external_ids));
            self.chassis_from(ids).await;
        }
        if let Err(e) = self.write_back(None).await {
            warn!(error = %e, "writing interface state to the Open vSwitch database failed");
        }
    }

    /// Derives the wanted ports from the replica, puts them in force, writes back.
    ///
    /// # Errors
    /// The write-back transaction failed (the ports were applied).
    async fn pass(&mut self) -> Result<(), String> {
        let db = Db::from_replica(&self.client.replica());
        let Some((_, root)) = &db.root else {
            // No root row: an uninitialized database (`ovs-vsctl init` not run yet).
            return Ok(());
        };
        let next_cfg = root.next_cfg;
        let rundir = rundir();
        let ids = chassis::OvnIds::from_external_ids(&root.external_ids);
        let by_flags = self.ctl.switch.config().ovn.is_some()
            && !matches!(self.chassis, Chassis::Running { .. });
        let iface_ids = match &ids {
            _ if by_flags => IfaceIds::All,
            Some(Ok(i)) => IfaceIds::Bridge(&i.bridge),
            _ => IfaceIds::Off,
        };
        let ctx = Ctx {
            rundir: &rundir,
            iface_ids,
        };
        let mut w = wanted::derive(&db, &ctx, &mut self.numbers);
        for (name, n) in self.numbers.iter() {
            self.ctl.switch.domains.name_bridge(n, name);
        }
        let failed = self.ctl.apply_ports(&w.ports).await;
        for (port, why) in &failed {
            warn!(port, error = %why, "interface from the Open vSwitch database not applied");
        }
        apply_device(&self.ctl, &db);
        self.apply_tunnels(&mut w).await;
        let names: BTreeMap<_, _> = db
            .ifaces
            .iter()
            .map(|(u, i)| (*u, i.name.clone()))
            .collect();
        writeback::with_failures(&mut w, &names, &failed);
        let mut bridges: Vec<String> = db.bridges.values().map(|b| b.name.clone()).collect();
        bridges.sort();
        let failed: Vec<String> = w
            .ifaces
            .iter()
            .filter(|(_, r)| r.is_err())
            .filter_map(|(u, _)| names.get(u).cloned())
            .collect();
        show(&self.ctl, |s| {
            s.cur_cfg = next_cfg;
            s.bridges = bridges;
            s.failed = failed;
        });
        self.wanted = w;
        if !by_flags {
            self.chassis_from(ids).await;
        }
        self.write_back_db(&db, Some(next_cfg)).await
    }

    /// Starts the OVN chassis `ids` asks for, or puts its changed settings in force;
    /// logs why it cannot (once per reason; tried again every tick). Without
    /// `ovn-remote` (`ids` None) a running chassis keeps running on its last settings.
    async fn chassis_from(&mut self, ids: Option<Result<chassis::OvnIds, String>>) {
        let Some(ids) = ids else { return };
        if let Chassis::Running { .. } = self.chassis {
            self.chassis_change(ids).await;
            return;
        }
        let result = match ids.and_then(|i| Ok((i.mappings(|b| self.uplinks_of(b))?, i))) {
            Ok((mappings, i)) => chassis::start(&self.ctl, &i, mappings)
                .await
                .map(|status| (i, status)),
            Err(e) => Err(e),
        };
        self.chassis = match result {
            Ok((ids, status)) => Chassis::Running {
                ids,
                status,
                pending: None,
            },
            Err(e) => {
                if !matches!(&self.chassis, Chassis::Waiting(last) if *last == e) {
                    warn!(error = %e, "not an OVN chassis yet");
                }
                Chassis::Waiting(e)
            }
        };
    }

    /// Puts the running chassis' changed settings `new` in force (nothing when they
    /// are those in force).
    async fn chassis_change(&mut self, new: Result<chassis::OvnIds, String>) {
        let Chassis::Running { ids, status, .. } = &self.chassis else {
            return;
        };
        let result = if new.as_ref() == Ok(ids) {
            Ok(None)
        } else {
            let (running, status) = (ids.clone(), status.clone());
            match new.and_then(|n| Ok((n.mappings(|b| self.uplinks_of(b))?, n))) {
                Ok((m, new)) => chassis::change(&self.ctl, (&running, &new), m, &status)
                    .await
                    .map(|()| Some(new)),
                Err(e) => Err(e),
            }
        };
        let Chassis::Running { ids, pending, .. } = &mut self.chassis else {
            return;
        };
        match result {
            Ok(applied) => {
                if let Some(new) = applied {
                    info!(chassis = %new.chassis, "Open_vSwitch external_ids OVN settings applied");
                    *ids = new;
                }
                *pending = None;
            }
            Err(e) => {
                if pending.as_ref() != Some(&e) {
                    warn!(error = %e, "Open_vSwitch external_ids OVN settings changed but not applied; the chassis runs on the last ones");
                }
                *pending = Some(e);
            }
        }
    }

    /// Puts the geneve interfaces' endpoints and flood lists in force (once their
    /// uplinks run); when that fails, each tunnel's row gets why.
    async fn apply_tunnels(&mut self, w: &mut Wanted) {
        let result = match tunnels::overlay(&w.tunnels, &self.ctl.switch.config().ports) {
            Ok((teps, vnis)) => {
                let names: Vec<String> = teps.iter().map(|g| g.name.clone()).collect();
                let ids: Vec<u32> = vnis.iter().map(|v| v.id).collect();
                let (old_teps, old_vnis) = &self.overlay;
                let r = self
                    .ctl
                    .replace_overlay(old_teps, old_vnis, teps, vnis)
                    .await;
                if r.is_ok() {
                    self.overlay = (names, ids);
                }
                r
            }
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            warn!(error = %e, "geneve interfaces not applied");
            for u in w.tunnels.keys() {
                w.ifaces.insert(*u, Err(e.clone()));
            }
            w.tunnels.clear();
        }
    }

    /// The AF_XDP uplinks of bridge `bridge` the last pass put in force.
    fn uplinks_of(&self, bridge: &str) -> Vec<String> {
        let Some(n) = self.numbers.get(bridge) else {
            return Vec::new();
        };
        let running = self.ctl.switch.topo();
        self.wanted
            .ports
            .iter()
            .filter(|p| p.kind == crate::config::PortType::Afxdp && p.bridge == Some(n))
            .filter(|p| running.by_name(&p.name).is_some())
            .map(|p| p.name.clone())
            .collect()
    }

    /// Writes the interfaces' state where it changed (statistics when due), and
    /// `cur_cfg` when a pass applied one.
    async fn write_back(&mut self, cur_cfg: Option<i64>) -> Result<(), String> {
        let db = Db::from_replica(&self.client.replica());
        self.write_back_db(&db, cur_cfg).await
    }

    async fn write_back_db(&mut self, db: &Db, cur_cfg: Option<i64>) -> Result<(), String> {
        let Some((root_uuid, root)) = &db.root else {
            return Ok(());
        };
        let every = stats_interval(&root.other_config);
        let stats_due = !matches!(self.stats_at, Some(t) if t.elapsed() < every);
        let topo = self.ctl.switch.topo();
        let mut ops = Vec::new();
        let mut running = BTreeSet::new();
        // Rows that have an ofport first, so a new interface cannot take a number an
        // existing one (after a vswitchd restart) still holds.
        let mut order: Vec<_> = self
            .wanted
            .ifaces
            .iter()
            .filter_map(|(u, r)| db.ifaces.get(u).map(|row| (*u, r, row)))
            .collect();
        order.sort_by_key(|(_, _, row)| row.ofport.is_none_or(|n| n <= 0));
        for (uuid, result, row) in order {
            let old = row.state();
            let tunnel = self.wanted.tunnels.get(&uuid).copied();
            let (state, ofport) = match (result, tunnel, topo.by_name(&row.name)) {
                (Ok(bridge), Some(t), _) => {
                    running.insert(row.name.clone());
                    (writeback::tunnel_state(t), self.ofports.assign(row, bridge))
                }
                (Ok(bridge), None, Some(tp)) => {
                    running.insert(row.name.clone());
                    // A port new to the row gets its counters at once.
                    let due = stats_due || old.statistics.is_empty();
                    let stats = due.then(|| self.ctl.switch.port_stats(tp.port.id));
                    let st = writeback::port_state(&tp.port, row.mtu_request, stats, &old);
                    (st, self.ofports.assign(row, bridge))
                }
                (Ok(_), None, None) => (writeback::failed_state("not running"), -1),
                (Err(why), _, _) => (writeback::failed_state(why), -1),
            };
            ops.extend(writeback::iface_op(uuid, row, &state, ofport));
        }
        self.ofports.retain(&running);
        ops.extend(writeback::root_op(*root_uuid, root, cur_cfg));
        if stats_due {
            self.stats_at = Some(Instant::now());
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.client
            .transact(ops)
            .await
            .map(|_| ())
            .map_err(|e| format!("writing back to the Open vSwitch database: {e}"))
    }
}

/// Sets the device MTU of every running internal port and AF_XDP uplink of `db`, and
/// the MAC of every internal port, whose `mtu_request` or `mac` differs from its
/// device's (in place: the port keeps running; an uplink's MTU is the kernel device's,
/// which its XDP mode may refuse: logged).
/// A device moved to another network namespace cannot be reached by name here: logged,
/// its `mtu` and `mac_in_use` columns keep showing what is in force.
fn apply_device(ctl: &Control, db: &Db) {
    use crate::ports::PortKind;
    let topo = ctl.switch.topo();
    for i in db.ifaces.values() {
        let (ifname, ifindex, tap) = match topo.by_name(&i.name).map(|tp| &tp.port.kind) {
            Some(PortKind::Tap(t)) => (&t.ifname, t.ifindex, true),
            Some(PortKind::Afxdp(x)) => (&x.iface, x.ifindex, false),
            _ => continue,
        };
        let now = writeback::kernel_link(ifname, ifindex);
        if let Some(m) = i.mtu_request.and_then(|m| u32::try_from(m).ok()) {
            if now.as_ref().map(|(_, mtu)| *mtu) != Some(i64::from(m)) {
                match crate::ports::tap::set_mtu(ifname, m) {
                    Ok(()) => info!(port = %i.name, mtu = m, "mtu_request applied"),
                    Err(e) => {
                        warn!(port = %i.name, mtu = m, error = %e, "cannot apply mtu_request")
                    }
                }
            }
        }
        // A NIC keeps its own address (OVS sets `mac` on internal ports).
        let Some(mac) = i.mac.as_deref().and_then(|m| m.parse::<MacAddr>().ok()) else {
            continue;
        };
        if tap && now.as_ref().map(|(m, _)| m.parse::<MacAddr>().ok()) != Some(Some(mac)) {
            match crate::ports::tap::set_mac(ifname, mac.0) {
                Ok(()) => info!(port = %i.name, %mac, "mac applied"),
                Err(e) => warn!(port = %i.name, %mac, error = %e, "cannot apply mac"),
            }
        }
    }
}

/// Whether event `ev` can change the wanted ports: a connection, or a change to a
/// column the switch does not only write itself (its own writes come back as changes
/// too).
fn relevant(ev: &Event) -> bool {
    match ev {
        Event::Changes(cs) => cs.changes.iter().any(|c| {
            let written: &[&str] = match c.table.as_str() {
                "Interface" => &IFACE_WRITTEN,
                "Open_vSwitch" => &ROOT_WRITTEN,
                _ => &[],
            };
            c.changed_columns().iter().any(|col| !written.contains(col))
        }),
        Event::Connected { .. } => true,
        Event::Disconnected { .. } => false,
    }
}

/// Logs connection events and notes them for `vswitchctl show`; returns whether the
/// database is connected now.
fn note(ctl: &Control, ev: Event, connected: bool) -> bool {
    match ev {
        Event::Connected {
            remote,
            incremental,
        } => {
            info!(%remote, incremental, "connected to the Open vSwitch database");
            show(ctl, |s| {
                s.connection = "connected".into();
                s.connects += 1;
            });
            true
        }
        Event::Disconnected { remote, reason } => {
            warn!(%remote, %reason, "Open vSwitch database connection lost; ports kept, forwarding goes on");
            show(ctl, |s| s.connection = format!("disconnected: {reason}"));
            false
        }
        Event::Changes(_) => connected,
    }
}

/// Updates what `vswitchctl show` says of the database client.
fn show(ctl: &Control, f: impl FnOnce(&mut OvsdbShow)) {
    if let Some(s) = ctl.ovsdb.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        f(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_refreshed_as_other_config_asks_at_most_every_5_s() {
        let oc = |v: &str| [("stats-update-interval".to_string(), v.to_string())].into();
        assert_eq!(stats_interval(&BTreeMap::new()), Duration::from_secs(5));
        assert_eq!(stats_interval(&oc("12000")), Duration::from_secs(12));
        assert_eq!(stats_interval(&oc("1000")), Duration::from_secs(5));
        assert_eq!(stats_interval(&oc("soon")), Duration::from_secs(5));
    }
}
