//! What vswitchd writes back to the database, as ovs-vswitchd does, so that tools read
//! the switch's state where they expect it (ovs-vswitchd.conf.db(5)):
//! - `Open_vSwitch`: `cur_cfg` (the `next_cfg` applied: `ovs-vsctl` without
//!   `--no-wait` returns then), `ovs_version`, `system_type`, `iface_types`,
//!   `datapath_types`;
//! - `Interface`: `ofport` (stable; -1 for an interface that failed), `admin_state`,
//!   `link_state`, `mtu`, `mac_in_use`, `ifindex`, `statistics`, `status`, `error`.
//!
//! Only columns whose value changed are written.

use std::collections::{BTreeMap, BTreeSet};

use ovsdb::{Condition, Operation, Row, Uuid};

use super::schema::{Interface, OpenVswitch, State};
use super::wanted::{Wanted, DATAPATH_TYPES, IFACE_TYPES};
use crate::config::PortType;
use crate::model::stats::PortStats;
use crate::ports::{Port, PortKind};

/// OpenFlow's LOCAL port: a bridge's own internal port (OFPP_LOCAL).
pub const OFPP_LOCAL: i64 = 65534;

/// What `Open_vSwitch.system_type` says.
pub const SYSTEM_TYPE: &str = "vswitchd";

/// Stable OpenFlow port numbers by interface name: an interface keeps its number while
/// it exists (and across vswitchd restarts, from the row's `ofport`); a bridge's own
/// internal port is [`OFPP_LOCAL`]; others take `ofport_request` when free, else the
/// lowest free number from 1.
#[derive(Debug, Default)]
pub struct Ofports(BTreeMap<String, i64>);

impl Ofports {
    /// The number of interface `i` (on bridge `bridge`).
    pub fn assign(&mut self, i: &Interface, bridge: &str) -> i64 {
        if let Some(&n) = self.0.get(&i.name) {
            return n;
        }
        let used: BTreeSet<i64> = self.0.values().copied().collect();
        let free = |n: &i64| (1..OFPP_LOCAL).contains(n) && !used.contains(n);
        let n = if i.name == bridge && i.kind == "internal" {
            OFPP_LOCAL
        } else if let Some(n) = i.ofport.filter(free) {
            n
        } else if let Some(n) = i.ofport_request.filter(free) {
            n
        } else {
            (1..OFPP_LOCAL).find(|n| !used.contains(n)).unwrap_or(-1)
        };
        self.0.insert(i.name.clone(), n);
        n
    }

    /// Forgets the interfaces not in `keep`.
    pub fn retain(&mut self, keep: &BTreeSet<String>) {
        self.0.retain(|k, _| keep.contains(k));
    }
}

/// The state of running port `port` whose row asks for MTU `mtu_request`; `stats` its
/// counters when they are due (else the row's are kept, `old`).
pub fn port_state(
    port: &Port,
    mtu_request: Option<i64>,
    stats: Option<PortStats>,
    old: &State,
) -> State {
    let up = |b: bool| Some(if b { "up" } else { "down" }.to_string());
    let mut s = State {
        admin_state: up(true),
        link_state: up(port.link_up()),
        mtu: Some(mtu_request.unwrap_or(1500)),
        statistics: match stats {
            Some(st) => statistics(&st),
            None => old.statistics.clone(),
        },
        ..State::default()
    };
    match &port.kind {
        PortKind::Vhost(v) => s.status = vhost_status(v),
        PortKind::Tap(t) => {
            let status = [("driver_name", "tun".to_string())];
            kernel_state(&mut s, &t.ifname, t.ifindex, status);
        }
        PortKind::Afxdp(x) => {
            let status = [
                ("driver_name", "af_xdp".to_string()),
                ("xdp-mode", x.mode.to_string()),
                ("n_rxq", x.xsks.len().to_string()),
            ];
            kernel_state(&mut s, &x.iface, x.ifindex, status);
        }
    }
    s
}

/// The state of a geneve interface whose tunnel is in force.
pub fn tunnel_state(t: super::tunnels::Tunnel) -> State {
    State {
        admin_state: Some("up".into()),
        link_state: Some("up".into()),
        status: [
            ("tunnel_type", "geneve".to_string()),
            ("local_ip", t.local.to_string()),
            ("remote_ip", t.remote.to_string()),
            ("key", t.key.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        ..State::default()
    }
}

/// A vhost-user port's `status`: `mode` (vswitchd the socket's `server` or `client`),
/// `socket`, `status` (`connected` or `disconnected`: a driver attached), `n_rxq`.
fn vhost_status(v: &crate::ports::VhostPort) -> BTreeMap<String, String> {
    let mode = if v.mode == PortType::VhostUser {
        "server"
    } else {
        "client"
    };
    let connected = if v.conn.load().is_some() {
        "connected"
    } else {
        "disconnected"
    };
    [
        ("mode", mode.to_string()),
        ("socket", v.path.display().to_string()),
        ("status", connected.to_string()),
        ("n_rxq", v.queue_pairs.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Fills `s` for a port on kernel device `name` (`ifindex`): `ifindex`, `status`, and
/// the device's MAC and MTU while it is in vswitchd's namespace.
fn kernel_state<const N: usize>(
    s: &mut State,
    name: &str,
    ifindex: u32,
    status: [(&str, String); N],
) {
    s.ifindex = Some(i64::from(ifindex));
    s.status = status
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if let Some((mac, mtu)) = kernel_link(name, ifindex) {
        s.mac_in_use = Some(mac);
        s.mtu = Some(mtu);
    }
}

/// The state of an interface that could not be applied: why, written to `error`.
pub fn failed_state(why: &str) -> State {
    State {
        admin_state: Some("down".into()),
        link_state: Some("down".into()),
        error: Some(why.to_string()),
        ..State::default()
    }
}

/// `Interface.statistics` from the switch's counters: rx is what the switch received
/// from the interface, tx what it sent into it (ovs-vswitchd's view, too).
fn statistics(s: &PortStats) -> BTreeMap<String, i64> {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    [
        ("rx_packets", n(s.rx_packets)),
        ("rx_bytes", n(s.rx_bytes)),
        ("tx_packets", n(s.tx_packets)),
        ("tx_bytes", n(s.tx_bytes)),
        ("rx_dropped", n(s.drops_total)),
        ("tx_dropped", 0),
        ("rx_errors", 0),
        ("tx_errors", 0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The MAC and MTU of kernel interface `name` when it is still `ifindex` in this
/// network namespace (`/sys/class/net`); `None` once moved to another namespace.
pub fn kernel_link(name: &str, ifindex: u32) -> Option<(String, i64)> {
    let dir = std::path::Path::new("/sys/class/net").join(name);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    if read("ifindex")?.trim().parse::<u32>().ok()? != ifindex {
        return None;
    }
    let mac = read("address")?.trim().to_string();
    let mtu = read("mtu")?.trim().parse().ok()?;
    Some((mac, mtu))
}

/// The update of interface row `uuid` (now `row`) to `state` and `ofport`, if anything
/// changes.
pub fn iface_op(uuid: Uuid, row: &Interface, state: &State, ofport: i64) -> Option<Operation> {
    let mut changes = state.changes(&row.state());
    if row.ofport != Some(ofport) {
        changes.set("ofport", Some(ofport));
    }
    if changes.is_empty() {
        return None;
    }
    Some(Operation::update(
        "Interface",
        vec![Condition::uuid(uuid)],
        changes,
    ))
}

/// The update of the root row to say what vswitchd is and that `cur_cfg` (the
/// `next_cfg` a pass applied) is in force, if anything changes.
pub fn root_op(uuid: Uuid, root: &OpenVswitch, cur_cfg: Option<i64>) -> Option<Operation> {
    let mut row = Row::new();
    let version = Some(env!("CARGO_PKG_VERSION").to_string());
    if root.ovs_version != version {
        row.set("ovs_version", &version);
    }
    let system_type = Some(SYSTEM_TYPE.to_string());
    if root.system_type != system_type {
        row.set("system_type", &system_type);
    }
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    if root.iface_types != strings(&IFACE_TYPES) {
        row.set("iface_types", strings(&IFACE_TYPES));
    }
    if root.datapath_types != strings(&DATAPATH_TYPES) {
        row.set("datapath_types", strings(&DATAPATH_TYPES));
    }
    if let Some(c) = cur_cfg.filter(|&c| c != root.cur_cfg) {
        row.set("cur_cfg", c);
    }
    if row.is_empty() {
        return None;
    }
    Some(Operation::update(
        "Open_vSwitch",
        vec![Condition::uuid(uuid)],
        row,
    ))
}

/// Interfaces of `wanted` whose port failed to open: their error replaces the mapping.
pub fn with_failures(
    wanted: &mut Wanted,
    names: &BTreeMap<Uuid, String>,
    failed: &[(String, String)],
) {
    for (uuid, result) in wanted.ifaces.iter_mut() {
        let Some(name) = names.get(uuid) else {
            continue;
        };
        if let Some((_, why)) = failed.iter().find(|(n, _)| n == name) {
            *result = Err(why.clone());
        }
    }
}
