//! The Open_vSwitch database's tables vswitchd reads and writes, each declared once
//! (vswitch.ovsschema 8.3 of Open vSwitch 3.1, ovs-vswitchd.conf.db(5); only the
//! columns used).

use std::collections::BTreeMap;

use ovsdb::Uuid;

/// The database's name.
pub const DATABASE: &str = "Open_vSwitch";

ovsdb::model! {
    /// `Open_vSwitch`: the one root row.
    #[derive(Clone, Debug, PartialEq)]
    pub struct OpenVswitch in "Open_vSwitch" {
        /// Its bridges.
        pub bridges: Vec<Uuid> = "bridges",
        /// Bumped by every `ovs-vsctl` command that waits (without `--no-wait`).
        pub next_cfg: i64 = "next_cfg",
        /// The `next_cfg` the switch has applied; `ovs-vsctl` returns once it is reached.
        pub cur_cfg: i64 = "cur_cfg",
        /// `vhost-sock-dir` (relative to the run directory), ...
        pub other_config: BTreeMap<String, String> = "other_config",
        /// `system-id`, `ovn-remote`, ... (read by ovn-controller).
        pub external_ids: BTreeMap<String, String> = "external_ids",
        /// Written here: the switch's version.
        pub ovs_version: Option<String> = "ovs_version",
        /// Written here: what kind of system runs the switch.
        pub system_type: Option<String> = "system_type",
        /// Written here: the `Interface.type`s the switch supports.
        pub iface_types: Vec<String> = "iface_types",
        /// Written here: the `Bridge.datapath_type`s the switch supports.
        pub datapath_types: Vec<String> = "datapath_types",
    }
}

ovsdb::model! {
    /// `Bridge`: one switch of the host.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Bridge in "Bridge" {
        /// Its name (also its own internal port's).
        pub name: String = "name",
        /// `netdev` (userspace, what vswitchd is), `system` or `""` (the kernel's).
        pub datapath_type: String = "datapath_type",
        /// Its ports.
        pub ports: Vec<Uuid> = "ports",
        /// `secure`: nothing is forwarded but by flows (for vswitchd: between OVN
        /// logical ports); `standalone` or none: a learning switch.
        pub fail_mode: Option<String> = "fail_mode",
    }
}

ovsdb::model! {
    /// `Port`: a bridge port, with one interface (several: a bond).
    #[derive(Clone, Debug, PartialEq)]
    pub struct Port in "Port" {
        /// Its name.
        pub name: String = "name",
        /// Its interfaces.
        pub interfaces: Vec<Uuid> = "interfaces",
        /// Access VLAN, 0..=4095.
        pub tag: Option<i64> = "tag",
        /// Trunked VLANs (none: all, on a trunk port).
        pub trunks: Vec<i64> = "trunks",
        /// `access`, `trunk`, `native-tagged`, `native-untagged`, `dot1q-tunnel`.
        pub vlan_mode: Option<String> = "vlan_mode",
    }
}

ovsdb::model! {
    /// `Interface`: what the switch attaches, and what the switch says about it.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Interface in "Interface" {
        /// Its name (unique in the database).
        pub name: String = "name",
        /// `dpdkvhostuser`, `dpdkvhostuserclient`, `internal`, `system` (`""`), ...
        pub kind: String = "type",
        /// `vhost-server-path`, `n_rxq`, ...
        pub options: BTreeMap<String, String> = "options",
        /// The MTU asked for, bytes of IP packet.
        pub mtu_request: Option<i64> = "mtu_request",
        /// The Ethernet address asked for (internal ports).
        pub mac: Option<String> = "mac",
        /// `iface-id` (the OVN logical port), `attached-mac`, `vm-uuid`, ...
        pub external_ids: BTreeMap<String, String> = "external_ids",
        /// The OpenFlow port number asked for.
        pub ofport_request: Option<i64> = "ofport_request",
        /// Written here: the OpenFlow port number; -1 when the interface failed.
        pub ofport: Option<i64> = "ofport",
        /// Written here (this and the rest are ephemeral: lost when ovsdb-server
        /// restarts, written again on reconnection); see [`State`].
        pub admin_state: Option<String> = "admin_state",
        /// Written here.
        pub link_state: Option<String> = "link_state",
        /// Written here.
        pub mtu: Option<i64> = "mtu",
        /// Written here.
        pub mac_in_use: Option<String> = "mac_in_use",
        /// Written here.
        pub ifindex: Option<i64> = "ifindex",
        /// Written here.
        pub statistics: BTreeMap<String, i64> = "statistics",
        /// Written here.
        pub status: BTreeMap<String, String> = "status",
        /// Written here.
        pub error: Option<String> = "error",
    }
}

impl Interface {
    /// What the row says the switch last wrote.
    pub fn state(&self) -> State {
        State {
            admin_state: self.admin_state.clone(),
            link_state: self.link_state.clone(),
            mtu: self.mtu,
            mac_in_use: self.mac_in_use.clone(),
            ifindex: self.ifindex,
            statistics: self.statistics.clone(),
            status: self.status.clone(),
            error: self.error.clone(),
        }
    }
}

/// What the switch writes about an interface (ovs-vswitchd.conf.db(5), Interface
/// "Status", "Statistics" and "Error"): compared with the row so only what changed is
/// written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// `up` (the switch does not take ports down by configuration).
    pub admin_state: Option<String>,
    /// `up` or `down`: a guest attached (vhost-user), the device up (internal).
    pub link_state: Option<String>,
    /// The MTU in force, bytes.
    pub mtu: Option<i64>,
    /// The MAC in use, `xx:xx:xx:xx:xx:xx`.
    pub mac_in_use: Option<String>,
    /// The kernel's interface index (internal ports).
    pub ifindex: Option<i64>,
    /// `rx_packets`, `rx_bytes`, `tx_packets`, `tx_bytes`, `rx_dropped`, `tx_dropped`,
    /// `rx_errors`, `tx_errors`, from the switch's side.
    pub statistics: BTreeMap<String, i64>,
    /// Per kind: vhost-user `mode`, `socket`, `status`, `n_rxq`; internal
    /// `driver_name`; AF_XDP `driver_name`, `xdp-mode` (the mode in use), `n_rxq`.
    pub status: BTreeMap<String, String>,
    /// Why the interface could not be applied; none when it was.
    pub error: Option<String>,
}

impl State {
    /// The columns of `self` that differ from `old`, as a row to update.
    pub fn changes(&self, old: &State) -> ovsdb::Row {
        let mut row = ovsdb::Row::new();
        if self.admin_state != old.admin_state {
            row.set("admin_state", &self.admin_state);
        }
        if self.link_state != old.link_state {
            row.set("link_state", &self.link_state);
        }
        if self.mtu != old.mtu {
            row.set("mtu", self.mtu);
        }
        if self.mac_in_use != old.mac_in_use {
            row.set("mac_in_use", &self.mac_in_use);
        }
        if self.ifindex != old.ifindex {
            row.set("ifindex", self.ifindex);
        }
        if self.statistics != old.statistics {
            row.set("statistics", &self.statistics);
        }
        if self.status != old.status {
            row.set("status", &self.status);
        }
        if self.error != old.error {
            row.set("error", &self.error);
        }
        row
    }
}

/// The columns of `Interface` only the switch writes (a change to them alone is the
/// switch's own write coming back, not configuration).
pub const IFACE_WRITTEN: [&str; 9] = [
    "ofport",
    "admin_state",
    "link_state",
    "mtu",
    "mac_in_use",
    "ifindex",
    "statistics",
    "status",
    "error",
];

/// The columns of `Open_vSwitch` only the switch writes.
pub const ROOT_WRITTEN: [&str; 5] = [
    "cur_cfg",
    "ovs_version",
    "system_type",
    "iface_types",
    "datapath_types",
];
