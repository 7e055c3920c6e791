//! The OVN Southbound tables the chassis reads and writes, each declared once
//! (ovn-sb(5), schema 20.27 of OVN 23.03; only the columns used).

use std::collections::BTreeMap;
use std::sync::Arc;

use ovsdb::Uuid;

/// The Southbound database's name.
pub const DATABASE: &str = "OVN_Southbound";

ovsdb::model! {
    /// `SB_Global`: the configuration sequence number ovn-northd copies from the
    /// Northbound database (`ovn-nbctl --wait=hv` waits for every chassis to reach it).
    #[derive(Clone, Debug, PartialEq)]
    pub struct SbGlobal in "SB_Global" {
        /// The sequence number.
        pub nb_cfg: i64 = "nb_cfg",
        /// Deployment-wide options (`bfd-min-tx`, `bfd-min-rx`, `bfd-mult`, ...).
        pub options: BTreeMap<String, String> = "options",
    }
}

ovsdb::model! {
    /// `Chassis`: a hypervisor or gateway.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Chassis in "Chassis" {
        /// Its name (`external_ids:system-id` of an OVS chassis).
        pub name: String = "name",
        /// Its host name.
        pub hostname: String = "hostname",
        /// Its tunnel encapsulations (`Encap` rows).
        pub encaps: Vec<Uuid> = "encaps",
        /// What it supports (`datapath-type`, `iface-types`, feature flags).
        pub other_config: BTreeMap<String, String> = "other_config",
    }
}

ovsdb::model! {
    /// `Encap`: how to reach a chassis through a tunnel.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Encap in "Encap" {
        /// `geneve`, `vxlan` or `stt`.
        pub kind: String = "type",
        /// The tunnel endpoint address.
        pub ip: String = "ip",
        /// Options (`csum`).
        pub options: BTreeMap<String, String> = "options",
        /// The chassis' name.
        pub chassis_name: String = "chassis_name",
    }
}

ovsdb::model! {
    /// `Chassis_Private`: what a chassis writes about itself (the `nb_cfg` it applied).
    #[derive(Clone, Debug, PartialEq)]
    pub struct ChassisPrivate in "Chassis_Private" {
        /// The chassis' name.
        pub name: String = "name",
        /// The chassis row (a weak reference).
        pub chassis: Option<Uuid> = "chassis",
        /// The `SB_Global.nb_cfg` the chassis has applied.
        pub nb_cfg: i64 = "nb_cfg",
    }
}

ovsdb::model! {
    /// `Datapath_Binding`: a logical switch or router.
    #[derive(Clone, Debug, PartialEq)]
    pub struct DatapathBinding in "Datapath_Binding" {
        /// Its key: the Geneve VNI of its traffic.
        pub tunnel_key: i64 = "tunnel_key",
        /// `name`, `logical-switch` or `logical-router`.
        pub external_ids: BTreeMap<String, String> = "external_ids",
    }
}

ovsdb::model! {
    /// `Port_Binding`: a logical port and where it is bound.
    #[derive(Clone, Debug, PartialEq)]
    pub struct PortBinding in "Port_Binding" {
        /// The logical port's name (the `iface_id` of the local port that is it).
        pub logical_port: String = "logical_port",
        /// `""` for a VIF; `router`, `localnet`, `patch`, `localport`, ...
        pub kind: String = "type",
        /// Its logical switch or router.
        pub datapath: Uuid = "datapath",
        /// Its key within the datapath (1..=32767): the option's port keys.
        pub tunnel_key: i64 = "tunnel_key",
        /// Its addresses: `"MAC [IP...]"`, `unknown`, `router`, `dynamic`.
        pub mac: Vec<String> = "mac",
        /// The chassis it is bound to (the main one, with several).
        pub chassis: Option<Uuid> = "chassis",
        /// Further chassis it is bound to (a live migration's destination: OVN's
        /// multi-chassis binding, `requested-chassis=MAIN,ADDITIONAL`).
        pub additional_chassis: Vec<Uuid> = "additional_chassis",
        /// The chassis the CMS asks for (from `options:requested-chassis`).
        pub requested_chassis: Option<Uuid> = "requested_chassis",
        /// `requested-chassis`, `activation-strategy`, `additional-chassis-activated`,
        /// `peer` (router ports), `network_name` (localnet), ...
        pub options: BTreeMap<String, String> = "options",
        /// Port security: `"MAC [IP...]"` entries.
        pub port_security: Vec<String> = "port_security",
        /// The port is up (set by its chassis once it runs).
        pub up: Option<bool> = "up",
        /// A `localnet` port's VLAN (1..=4094); none: the network is untagged.
        pub tag: Option<i64> = "tag",
        /// A gateway port's (`chassisredirect`) chassis and their priorities.
        pub ha_chassis_group: Option<Uuid> = "ha_chassis_group",
    }
}

ovsdb::model! {
    /// `Service_Monitor`: one load balancer backend whose health the chassis of its
    /// logical port checks (ovn-northd makes one per backend of a load balancer with
    /// a `Load_Balancer_Health_Check`, and leaves a backend whose status is `offline`
    /// out of the load balancer's flows).
    #[derive(Clone, Debug, PartialEq)]
    pub struct ServiceMonitor in "Service_Monitor" {
        /// The backend's address.
        pub ip: String = "ip",
        /// `tcp` or `udp` (none: `tcp`).
        pub protocol: Option<String> = "protocol",
        /// The backend's port.
        pub port: i64 = "port",
        /// The backend's logical port: the chassis that holds it checks.
        pub logical_port: String = "logical_port",
        /// The probes' source MAC (`svc_monitor_mac`).
        pub src_mac: String = "src_mac",
        /// The probes' source address (`ip_port_mappings`).
        pub src_ip: String = "src_ip",
        /// `online`, `offline` or `error`, as the checking chassis writes it.
        pub status: Option<String> = "status",
        /// `interval`, `timeout` (seconds), `success_count`, `failure_count`.
        pub options: BTreeMap<String, String> = "options",
    }
}

ovsdb::model! {
    /// `HA_Chassis_Group`: the chassis that may hold a gateway port, by priority
    /// (ovn-northd makes one per distributed gateway port from its `Gateway_Chassis`
    /// rows, or copies the Northbound group).
    #[derive(Clone, Debug, PartialEq)]
    pub struct HaChassisGroup in "HA_Chassis_Group" {
        /// Its name (the gateway port's, for groups made from `Gateway_Chassis`).
        pub name: String = "name",
        /// Its `HA_Chassis` rows.
        pub ha_chassis: Vec<Uuid> = "ha_chassis",
        /// Chassis with ports behind the gateway (ovn-northd's reference chassis):
        /// a candidate that still reaches one of them is alive.
        pub ref_chassis: Vec<Uuid> = "ref_chassis",
    }
}

ovsdb::model! {
    /// `HA_Chassis`: one chassis of an `HA_Chassis_Group` and its priority.
    #[derive(Clone, Debug, PartialEq)]
    pub struct HaChassis in "HA_Chassis" {
        /// The chassis (a weak reference: empty once the chassis' row is gone).
        pub chassis: Option<Uuid> = "chassis",
        /// Higher wins, 0..=32767.
        pub priority: i64 = "priority",
    }
}

ovsdb::model! {
    /// `Multicast_Group`: a set of logical ports (`_MC_flood`, `_MC_unknown`, ...).
    #[derive(Clone, Debug, PartialEq)]
    pub struct MulticastGroup in "Multicast_Group" {
        /// Its datapath.
        pub datapath: Uuid = "datapath",
        /// Its name.
        pub name: String = "name",
        /// Its key (32768 and up): the egress key of frames to it.
        pub tunnel_key: i64 = "tunnel_key",
        /// Member ports (`Port_Binding` rows).
        pub ports: Vec<Uuid> = "ports",
    }
}

/// `Logical_Flow`: one flow of a datapath's logical pipeline (ovn-sb(5)), in the
/// match and action languages of `ovn_lflow`.
///
/// Held as the replica's row (one shared pointer), read through accessors: a chassis
/// keeps 10^5 flows, and a decoded copy of every column cost 150 bytes each. Decoding
/// ([`Model::from_row`](ovsdb::Model::from_row)) checks every column's type, so the
/// accessors cannot fail. `external_ids` is not monitored (as ovn-controller omits
/// it): the stage names it gives are read per table ([`super::stages`]).
/// Its UUID is the key it is held under (a field of 16 bytes more per flow made the
/// map of 125,000 flows 4 MB larger).
#[derive(Clone, Debug, PartialEq)]
pub struct LogicalFlow {
    row: ovsdb::Row,
}

/// `Logical_Flow` as the chassis monitors it: [`LogicalFlow`]'s columns.
pub fn logical_flows() -> ovsdb::TableSpec {
    ovsdb::TableSpec::of::<LogicalFlow>()
}

/// `Logical_Flow`'s columns: (datapath, datapath group, pipeline, table, priority,
/// match, actions).
const LFLOW_COLUMNS: [&str; 7] = [
    "logical_datapath",
    "logical_dp_group",
    "pipeline",
    "table_id",
    "priority",
    "match",
    "actions",
];

impl ovsdb::Model for LogicalFlow {
    const TABLE: &'static str = "Logical_Flow";
    const COLUMNS: &'static [&'static str] = &LFLOW_COLUMNS;

    fn from_row(_uuid: Uuid, row: &ovsdb::Row) -> Result<Self, ovsdb::Error> {
        let check = |e: ovsdb::Error| e.in_table("Logical_Flow");
        row.get::<Option<Uuid>>("logical_datapath").map_err(check)?;
        row.get::<Option<Uuid>>("logical_dp_group").map_err(check)?;
        for text in ["pipeline", "match", "actions"] {
            row.get::<Arc<str>>(text).map_err(check)?;
        }
        row.get::<i64>("table_id").map_err(check)?;
        row.get::<i64>("priority").map_err(check)?;
        Ok(LogicalFlow { row: row.clone() })
    }

    fn to_row(&self) -> ovsdb::Row {
        self.row.clone()
    }
}

impl LogicalFlow {
    /// A flow from its columns (tests and tools; the chassis decodes rows).
    pub fn new(
        (logical_datapath, logical_dp_group): (Option<Uuid>, Option<Uuid>),
        pipeline: &str,
        table_id: i64,
        priority: i64,
        (match_, actions): (&str, &str),
    ) -> LogicalFlow {
        let row = ovsdb::Row::new()
            .with("logical_datapath", logical_datapath)
            .with("logical_dp_group", logical_dp_group)
            .with("pipeline", pipeline)
            .with("table_id", table_id)
            .with("priority", priority)
            .with("match", match_)
            .with("actions", actions);
        LogicalFlow { row }
    }

    /// Its datapath, or none when `logical_dp_group` gives several.
    pub fn logical_datapath(&self) -> Option<Uuid> {
        self.row.get("logical_datapath").ok().flatten()
    }

    /// A group of datapaths sharing the flow.
    pub fn logical_dp_group(&self) -> Option<Uuid> {
        self.row.get("logical_dp_group").ok().flatten()
    }

    /// `ingress` or `egress`.
    pub fn pipeline(&self) -> &str {
        self.text("pipeline")
    }

    /// Its table (stage) within the pipeline, 0..=254.
    pub fn table_id(&self) -> i64 {
        self.row.get("table_id").unwrap_or(-1)
    }

    /// Higher first, 0..=65535.
    pub fn priority(&self) -> i64 {
        self.row.get("priority").unwrap_or(0)
    }

    /// The match expression (the replica's copy).
    pub fn match_(&self) -> &Arc<str> {
        self.text("match")
    }

    /// The actions (the replica's copy).
    pub fn actions(&self) -> &Arc<str> {
        self.text("actions")
    }

    /// The text of string column `column` (checked when decoded).
    fn text(&self, column: &str) -> &Arc<str> {
        static EMPTY: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
        match self.row.datum(column).and_then(|d| d.as_set()?.first()) {
            Some(ovsdb::Atom::String(s)) => s,
            _ => EMPTY.get_or_init(|| Arc::from("")),
        }
    }
}

ovsdb::model! {
    /// `Address_Set`: a named set of addresses, `$name` in a match.
    #[derive(Clone, Debug, PartialEq)]
    pub struct AddressSet in "Address_Set" {
        /// Its name.
        pub name: String = "name",
        /// Its addresses (IPv4/IPv6 with optional prefix, or MACs): the replica's
        /// texts, shared with the builds that lexed them.
        pub addresses: Arc<Vec<Arc<str>>> = "addresses",
    }
}

ovsdb::model! {
    /// `Port_Group`: a named set of logical ports, `@name` in a match. ovn-northd names
    /// the Southbound rows `<datapath tunnel_key>_<name>`, one per switch of the group.
    #[derive(Clone, Debug, PartialEq)]
    pub struct PortGroup in "Port_Group" {
        /// `<datapath key>_<Northbound name>`.
        pub name: String = "name",
        /// Logical port names (shared with the builds that name the group).
        pub ports: Arc<Vec<String>> = "ports",
    }
}

ovsdb::model! {
    /// `MAC_Binding`: an IP-to-MAC binding a chassis learned behind a router port
    /// (`put_arp`, `put_nd`), read by `get_arp`/`get_nd`/`lookup_*`.
    #[derive(Clone, Debug, PartialEq)]
    pub struct MacBinding in "MAC_Binding" {
        /// The router port it was learned on.
        pub logical_port: String = "logical_port",
        /// The IP address (IPv4 or IPv6 text).
        pub ip: String = "ip",
        /// The MAC.
        pub mac: String = "mac",
        /// The router.
        pub datapath: Uuid = "datapath",
        /// When it was learned (ms since the epoch; OVN's aging).
        pub timestamp: i64 = "timestamp",
    }
}

ovsdb::model! {
    /// `Static_MAC_Binding`: an IP-to-MAC binding the administrator set.
    #[derive(Clone, Debug, PartialEq)]
    pub struct StaticMacBinding in "Static_MAC_Binding" {
        /// The router port.
        pub logical_port: String = "logical_port",
        /// The IP address.
        pub ip: String = "ip",
        /// The MAC.
        pub mac: String = "mac",
        /// It wins over a learned binding.
        pub override_dynamic_mac: bool = "override_dynamic_mac",
        /// The router.
        pub datapath: Uuid = "datapath",
    }
}

ovsdb::model! {
    /// `DHCP_Options`: a DHCPv4 option `put_dhcp_opts` may name (ovn-northd fills the
    /// table from the options it supports).
    #[derive(Clone, Debug, PartialEq)]
    pub struct DhcpOptions in "DHCP_Options" {
        /// The option's name in actions.
        pub name: String = "name",
        /// Its code (RFC 2132).
        pub code: i64 = "code",
        /// Its type (`bool`, `uint8`, `ipv4`, `static_routes`, `str`, ...).
        pub kind: String = "type",
    }
}

ovsdb::model! {
    /// `DHCPv6_Options`: a DHCPv6 option `put_dhcpv6_opts` may name.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Dhcpv6Options in "DHCPv6_Options" {
        /// The option's name in actions.
        pub name: String = "name",
        /// Its code (RFC 8415).
        pub code: i64 = "code",
        /// Its type (`ipv6`, `str`, `mac`).
        pub kind: String = "type",
    }
}

ovsdb::model! {
    /// `Logical_DP_Group`: datapaths sharing logical flows.
    #[derive(Clone, Debug, PartialEq)]
    pub struct LogicalDpGroup in "Logical_DP_Group" {
        /// The datapaths.
        pub datapaths: Vec<Uuid> = "datapaths",
    }
}

ovsdb::model! {
    /// `FDB`: a MAC learned behind a logical port with `unknown` addresses, written by
    /// the chassis that learned it (one row per MAC and logical switch, the `mac` +
    /// `dp_key` index), read by every chassis: unicast to it goes to that port rather
    /// than to `_MC_unknown`. OVN 23.03 does not age these rows; ovn-northd deletes a
    /// port's rows with the port.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Fdb in "FDB" {
        /// The MAC, lower-case `xx:xx:xx:xx:xx:xx`.
        pub mac: String = "mac",
        /// The logical switch's key (`Datapath_Binding.tunnel_key`).
        pub dp_key: i64 = "dp_key",
        /// The logical port's key (`Port_Binding.tunnel_key`).
        pub port_key: i64 = "port_key",
    }
}

ovsdb::model! {
    /// `IP_Multicast`: a logical switch's multicast snooping settings, as ovn-northd
    /// copies them from the Northbound `Logical_Switch.other_config:mcast_*` (one row
    /// per switch that has any).
    #[derive(Clone, Debug, PartialEq)]
    pub struct IpMulticast in "IP_Multicast" {
        /// The logical switch.
        pub datapath: Uuid = "datapath",
        /// Snooping is on (`mcast_snoop=true`).
        pub enabled: Option<bool> = "enabled",
        /// Idle timeout of a membership, seconds (`mcast_idle_timeout`, OVN's default
        /// 300).
        pub idle_timeout: Option<i64> = "idle_timeout",
    }
}

ovsdb::model! {
    /// `IGMP_Group`: the ports of one chassis that joined an IP multicast group of a
    /// logical switch (the `address` + `datapath` + `chassis` index), written by that
    /// chassis from the IGMP/MLD reports it snooped. ovn-northd merges every chassis'
    /// rows of a group into the `Multicast_Group` named by the address, which carries
    /// the group's frames.
    #[derive(Clone, Debug, PartialEq)]
    pub struct IgmpGroup in "IGMP_Group" {
        /// The group: dotted IPv4 (`239.1.2.3`) or IPv6 text (`ff0e::1`).
        pub address: String = "address",
        /// The logical switch (a weak reference).
        pub datapath: Option<Uuid> = "datapath",
        /// The chassis the member ports are on (a weak reference).
        pub chassis: Option<Uuid> = "chassis",
        /// The member ports (`Port_Binding` rows, weak references).
        pub ports: Vec<Uuid> = "ports",
    }
}

/// The feature flags and settings ovn-controller 23.03 writes in
/// `Chassis.other_config`. ovn-northd enables a feature only when every chassis
/// advertises it (`northd/northd.c`, `build_chassis_features`), so a chassis without
/// them would downgrade every other chassis' flows: vswitchd advertises them. It runs
/// none of the logical pipelines they concern (conntrack labels, MAC binding
/// timestamps, LB-related conntrack), so none changes what it does.
pub const FEATURES: [(&str, &str); 4] = [
    ("port-up-notif", "true"),
    ("ct-no-masked-label", "true"),
    ("mac-binding-timestamp", "true"),
    ("ovn-ct-lb-related", "true"),
];
