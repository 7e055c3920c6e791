//! The Southbound rows the chassis derives its view from, decoded once and then kept
//! current row by row: a pass re-decodes only the rows its batch of change sets named
//! (a change to one port of a deployment of thousands costs one row, not the whole
//! replica).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use ovsdb::{ChangeSet, Replica, Uuid};

use super::sb::{
    AddressSet, Chassis, DatapathBinding, DhcpOptions, Dhcpv6Options, Encap, Fdb, HaChassis,
    HaChassisGroup, IpMulticast, LogicalDpGroup, LogicalFlow, MacBinding, MulticastGroup,
    PortBinding, PortGroup, SbGlobal, StaticMacBinding,
};

/// The Southbound rows the view is derived from, by uuid.
#[derive(Debug, Clone, Default)]
pub struct Sb {
    /// `SB_Global.nb_cfg`.
    pub nb_cfg: i64,
    /// `SB_Global.options`.
    pub options: std::collections::BTreeMap<String, String>,
    /// Chassis.
    pub chassis: HashMap<Uuid, Chassis>,
    /// Encaps.
    pub encaps: HashMap<Uuid, Encap>,
    /// Datapath bindings.
    pub datapaths: HashMap<Uuid, DatapathBinding>,
    /// Port bindings.
    pub ports: HashMap<Uuid, PortBinding>,
    /// Multicast groups.
    pub groups: Vec<MulticastGroup>,
    /// MACs learned behind `unknown` ports (by any chassis).
    pub fdb: Vec<Fdb>,
    /// Multicast snooping settings of logical switches, by row.
    pub ip_multicast: HashMap<Uuid, IpMulticast>,
    /// The logical pipeline: the local datapaths' logical flows.
    pub lflows: HashMap<Uuid, LogicalFlow>,
    /// The names of their stages (not monitored: read per table, kept across full
    /// decodes).
    pub stages: super::stages::StageNames,
    /// `lflows` by datapath, when kept (rows decoded from a replica; `None` for rows
    /// put together by hand, whose builds group the flows themselves).
    pub lflow_index: Option<super::lflow_index::LflowIndex>,
    /// Datapath groups of logical flows.
    pub dp_groups: HashMap<Uuid, LogicalDpGroup>,
    /// Address sets (`$name`).
    pub address_sets: HashMap<Uuid, AddressSet>,
    /// Port groups (`@name`), one row per datapath of a group.
    pub port_groups: HashMap<Uuid, PortGroup>,
    /// IP-to-MAC bindings learned behind router ports.
    pub mac_bindings: HashMap<Uuid, MacBinding>,
    /// IP-to-MAC bindings the administrator set.
    pub static_mac_bindings: HashMap<Uuid, StaticMacBinding>,
    /// The DHCPv4 options `put_dhcp_opts` may name.
    pub dhcp_options: HashMap<Uuid, DhcpOptions>,
    /// The DHCPv6 options `put_dhcpv6_opts` may name.
    pub dhcpv6_options: HashMap<Uuid, Dhcpv6Options>,
    /// Gateway chassis groups.
    pub ha_groups: HashMap<Uuid, HaChassisGroup>,
    /// Their members.
    pub ha_chassis: HashMap<Uuid, HaChassis>,
}

impl Sb {
    /// The rows of `r` (rows that do not decode are skipped: logged by the caller's
    /// counters, never fatal).
    pub fn from_replica(r: &Replica) -> Sb {
        let mut sb = Sb {
            nb_cfg: nb_cfg(r),
            options: sb_options(r),
            chassis: r.rows::<Chassis>().collect(),
            encaps: r.rows::<Encap>().collect(),
            datapaths: r.rows::<DatapathBinding>().collect(),
            ports: r.rows::<PortBinding>().collect(),
            groups: r.rows::<MulticastGroup>().map(|(_, g)| g).collect(),
            lflow_index: None,
            fdb: r.rows::<Fdb>().map(|(_, f)| f).collect(),
            ip_multicast: r.rows::<IpMulticast>().collect(),
            lflows: r.rows::<LogicalFlow>().collect(),
            stages: Default::default(),
            dp_groups: r.rows::<LogicalDpGroup>().collect(),
            address_sets: r.rows::<AddressSet>().collect(),
            port_groups: r.rows::<PortGroup>().collect(),
            mac_bindings: r.rows::<MacBinding>().collect(),
            static_mac_bindings: r.rows::<StaticMacBinding>().collect(),
            dhcp_options: r.rows::<DhcpOptions>().collect(),
            dhcpv6_options: r.rows::<Dhcpv6Options>().collect(),
            ha_groups: r.rows::<HaChassisGroup>().collect(),
            ha_chassis: r.rows::<HaChassis>().collect(),
        };
        sb.lflow_index = Some(super::lflow_index::LflowIndex::build(
            &sb.lflows,
            &sb.dp_groups,
        ));
        sb
    }

    /// Brings the rows `dirty` names up to date with `r` (decoded again, or removed
    /// when gone). Notes in `touched` what the changed rows concern.
    pub fn refresh(&mut self, r: &Replica, dirty: &Dirty, touched: &mut Touched) {
        for (table, u) in &dirty.rows {
            touched.pipeline |= PIPELINE_TABLES.contains(&table.as_str());
            match table.as_str() {
                "SB_Global" => {
                    self.nb_cfg = nb_cfg(r);
                    self.options = sb_options(r);
                }
                "Chassis" => {
                    put(&mut self.chassis, *u, r.get(u));
                    touched.all = true;
                }
                "Encap" => {
                    put(&mut self.encaps, *u, r.get(u));
                    touched.all = true;
                }
                "Datapath_Binding" => {
                    put(&mut self.datapaths, *u, r.get(u));
                    touched.datapaths.insert(*u);
                }
                "Port_Binding" => {
                    touched
                        .datapaths
                        .extend(self.ports.get(u).map(|p| p.datapath));
                    put(&mut self.ports, *u, r.get::<PortBinding>(u));
                    touched
                        .datapaths
                        .extend(self.ports.get(u).map(|p| p.datapath));
                }
                "Multicast_Group" => {
                    touched.datapaths.extend(
                        self.groups
                            .iter()
                            .filter(|g| g.uuid == *u)
                            .map(|g| g.datapath),
                    );
                    self.groups.retain(|g| g.uuid != *u);
                    self.groups.extend(r.get::<MulticastGroup>(u));
                    touched.datapaths.extend(
                        self.groups
                            .iter()
                            .filter(|g| g.uuid == *u)
                            .map(|g| g.datapath),
                    );
                }
                "FDB" => {
                    touched
                        .keys
                        .extend(self.fdb.iter().filter(|f| f.uuid == *u).map(|f| f.dp_key));
                    self.fdb.retain(|f| f.uuid != *u);
                    self.fdb.extend(r.get::<Fdb>(u));
                    touched
                        .keys
                        .extend(self.fdb.iter().filter(|f| f.uuid == *u).map(|f| f.dp_key));
                }
                "IP_Multicast" => {
                    touched
                        .datapaths
                        .extend(self.ip_multicast.get(u).map(|m| m.datapath));
                    put(&mut self.ip_multicast, *u, r.get::<IpMulticast>(u));
                    touched
                        .datapaths
                        .extend(self.ip_multicast.get(u).map(|m| m.datapath));
                }
                "Logical_Flow" => {
                    let row = r.get::<LogicalFlow>(u);
                    if let Some(ix) = &mut self.lflow_index {
                        let changed = &mut touched.lflow_datapaths;
                        if let Some(old) = self.lflows.get(u) {
                            ix.remove(*u, old, &self.dp_groups, changed);
                        }
                        if let Some(new) = &row {
                            ix.add(*u, new, &self.dp_groups, changed);
                        }
                    }
                    put(&mut self.lflows, *u, row);
                }
                "Logical_DP_Group" => {
                    let row = r.get::<LogicalDpGroup>(u);
                    if let Some(ix) = &mut self.lflow_index {
                        let old = self.dp_groups.get(u);
                        ix.regroup(*u, old, row.as_ref(), &mut touched.lflow_datapaths);
                    }
                    put(&mut self.dp_groups, *u, row);
                }
                "Address_Set" => put(&mut self.address_sets, *u, r.get(u)),
                "Port_Group" => put(&mut self.port_groups, *u, r.get(u)),
                "MAC_Binding" => put(&mut self.mac_bindings, *u, r.get(u)),
                "Static_MAC_Binding" => put(&mut self.static_mac_bindings, *u, r.get(u)),
                "DHCP_Options" => put(&mut self.dhcp_options, *u, r.get(u)),
                "DHCPv6_Options" => put(&mut self.dhcpv6_options, *u, r.get(u)),
                "HA_Chassis_Group" => {
                    put(&mut self.ha_groups, *u, r.get(u));
                    touched.all = true;
                }
                "HA_Chassis" => {
                    put(&mut self.ha_chassis, *u, r.get(u));
                    touched.all = true;
                }
                _ => {}
            }
        }
    }

    /// The flows of datapath `dp` (a flow naming it and a group of it comes twice):
    /// from [`Sb::lflow_index`] when kept, else by walking every flow (rows put together
    /// by hand).
    pub fn flows_of(&self, dp: &Uuid) -> Vec<(Uuid, &LogicalFlow)> {
        match &self.lflow_index {
            Some(ix) => ix
                .flows_of(dp)
                .filter_map(|u| Some((*u, self.lflows.get(u)?)))
                .collect(),
            None => self
                .lflows
                .iter()
                .filter(|(_, f)| {
                    super::lflow_index::datapaths_of(f, &self.dp_groups).any(|d| d == *dp)
                })
                .map(|(u, f)| (*u, f))
                .collect(),
        }
    }

    /// The Geneve endpoint address of chassis `c`.
    pub fn encap_ip(&self, c: &Chassis) -> Option<IpAddr> {
        c.encaps
            .iter()
            .filter_map(|u| self.encaps.get(u))
            .find(|e| e.kind == "geneve")
            .and_then(|e| e.ip.parse().ok())
    }
}

/// What changed rows concern, since the view was last derived: logical switches (by
/// row, and by key for `FDB` rows), or everything (chassis, encaps, ACLs, a full
/// decode). A switch not touched keeps its derived view.
#[derive(Debug, Default)]
pub struct Touched {
    /// Everything.
    pub all: bool,
    /// `Datapath_Binding` rows.
    pub datapaths: HashSet<Uuid>,
    /// `Datapath_Binding.tunnel_key`s (of `FDB` rows).
    pub keys: HashSet<i64>,
    /// A row the logical pipelines are built from.
    pub pipeline: bool,
    /// Datapaths whose logical flows changed (with [`Sb::lflow_index`]).
    pub lflow_datapaths: HashSet<Uuid>,
    /// The rows were decoded afresh: `lflow_datapaths` does not say what changed.
    pub lflows_unknown: bool,
}

impl Touched {
    /// Everything changed.
    pub fn everything() -> Touched {
        Touched {
            all: true,
            lflows_unknown: true,
            ..Default::default()
        }
    }

    /// Whether the view of switch `dp` (key `key`) must be derived again.
    pub fn concerns(&self, dp: Uuid, key: u32) -> bool {
        self.all || self.datapaths.contains(&dp) || self.keys.contains(&i64::from(key))
    }
}

/// Rows changed since the last pass, as the change sets named them.
#[derive(Debug, Default)]
pub struct Dirty {
    /// (table, row).
    rows: Vec<(String, Uuid)>,
    /// Everything: decode the whole replica again (after a reconnect).
    pub all: bool,
}

impl Dirty {
    /// Notes the rows of change set `cs`.
    pub fn note(&mut self, cs: &ChangeSet) {
        if !self.all {
            self.rows
                .extend(cs.changes.iter().map(|c| (c.table.clone(), c.uuid)));
        }
    }

    /// Whether a noted row is one the view is derived from (anything but
    /// `SB_Global`, whose `nb_cfg` is only reported, and the rows of
    /// [`WRITTEN_HERE`]).
    pub fn touches_view(&self) -> bool {
        self.rows
            .iter()
            .any(|(t, _)| t != "SB_Global" && !WRITTEN_HERE.contains(&t.as_str()))
    }

    /// Forgets what was noted (a pass consumed it).
    pub fn clear(&mut self) {
        self.rows.clear();
        self.all = false;
    }
}

/// Tables the logical pipelines are built from.
pub const PIPELINE_TABLES: [&str; 13] = [
    "Datapath_Binding",
    "Port_Binding",
    "Multicast_Group",
    "FDB",
    "Chassis",
    "Logical_Flow",
    "Logical_DP_Group",
    "Address_Set",
    "Port_Group",
    "MAC_Binding",
    "Static_MAC_Binding",
    "DHCP_Options",
    "DHCPv6_Options",
];

/// Tables whose monitored rows are only what this chassis writes about itself: no
/// view is derived from them (without this, every write would start a pass).
pub const WRITTEN_HERE: [&str; 2] = ["Chassis_Private", "IGMP_Group"];

/// Sets or removes row `u` of `map`.
fn put<T>(map: &mut HashMap<Uuid, T>, u: Uuid, row: Option<T>) {
    match row {
        Some(row) => map.insert(u, row),
        None => map.remove(&u),
    };
}

/// `SB_Global.nb_cfg` (0 before northd wrote it).
fn nb_cfg(r: &Replica) -> i64 {
    r.rows::<SbGlobal>()
        .map(|(_, g)| g.nb_cfg)
        .next()
        .unwrap_or(0)
}

/// `SB_Global.options` (empty before northd wrote them).
fn sb_options(r: &Replica) -> std::collections::BTreeMap<String, String> {
    r.rows::<SbGlobal>()
        .map(|(_, g)| g.options)
        .next()
        .unwrap_or_default()
}
