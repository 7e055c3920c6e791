//! The TOML file (`--config`): the same settings as the flags, by the same names.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ConfigError, MacAddr, PollMode};

/// A static FDB entry as the file writes it (`[[fdb_static]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticFdbEntry {
    /// The MAC address.
    pub mac: MacAddr,
    /// The port it lives behind.
    pub port: String,
    /// The VLAN domain (0 or absent: untagged ports).
    #[serde(default)]
    pub vlan: u16,
}

/// The TOML file: the same settings as the flags, by the same names with `_` for `-`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// CPUs for PMD threads.
    pub pmd_cpus: Option<Vec<usize>>,
    /// Poll mode.
    pub poll: Option<PollMode>,
    /// Control socket path.
    pub control: Option<PathBuf>,
    /// MAC aging time, seconds.
    pub fdb_aging_secs: Option<u64>,
    /// MACs the FDB may learn in all.
    pub fdb_max_macs: Option<u32>,
    /// MACs one vhost-user or tap port may teach the FDB.
    pub fdb_port_max_macs: Option<u32>,
    /// Connections the conntrack table may hold.
    pub ct_max_connections: Option<u32>,
    /// Connections one conntrack zone may hold (0: only the global limit).
    pub ct_zone_max: Option<u32>,
    /// Lock shards of the connection tracker.
    pub ct_shards: Option<u32>,
    /// vhost-user ports (`[[port]]`: `name`, `type`, `path` and the flags' option keys;
    /// read by [`super::port::file_port`], the same path as the flags).
    #[serde(default)]
    pub port: Vec<toml::Table>,
    /// AF_XDP uplinks (`[[uplink]]`: `name`, `iface` and the option keys).
    #[serde(default)]
    pub uplink: Vec<toml::Table>,
    /// Tap host ports (`[[tap]]`: `name`, `ifname` and the option keys).
    #[serde(default)]
    pub tap: Vec<toml::Table>,
    /// Group of vhost-user server sockets (`--vhost-user-socket-group`).
    pub vhost_user_socket_group: Option<String>,
    /// Mode of vhost-user server sockets (`--vhost-user-socket-mode`), octal: a string
    /// ("0660") or a TOML octal integer (0o660).
    pub vhost_user_socket_mode: Option<toml::Value>,
    /// Static FDB entries.
    #[serde(default)]
    pub fdb_static: Vec<StaticFdbEntry>,
    /// Geneve tunnel endpoints.
    #[serde(default)]
    pub geneve: Vec<super::GeneveConfig>,
    /// Per-VNI flood lists.
    #[serde(default)]
    pub vni: Vec<super::VniConfig>,
    /// Per-port ACL rules, in order (`[[acl]]` with `port` and the rule's fields).
    #[serde(default)]
    pub acl: Vec<crate::config::acl::AclEntry>,
    /// Flow cache on (default) or off.
    pub flow_cache: Option<bool>,
    /// EMC insertion probability is 1/N (1 = insert every miss).
    pub emc_insert_inv_prob: Option<u32>,
    /// Rebalance rx queues over the PMDs automatically (`--pmd-auto-rebalance`).
    pub pmd_auto_rebalance: Option<bool>,
    /// Prometheus endpoint address.
    pub metrics: Option<std::net::SocketAddr>,
    /// The OVN Southbound database (`--ovn-remote`).
    pub ovn_remote: Option<String>,
    /// The Open vSwitch database ports and bridges come from (`--ovsdb`).
    pub ovsdb: Option<String>,
    /// The OVN chassis name (`--chassis`).
    pub chassis: Option<String>,
    /// Provider networks to uplinks, `"NETWORK:UPLINK[,...]"` (`--ovn-bridge-mappings`).
    pub ovn_bridge_mappings: Option<String>,
    /// What the CMS reads of the chassis (`--ovn-cms-options`).
    pub ovn_cms_options: Option<String>,
    /// The Southbound connection's inactivity probe, ms (`--ovn-remote-probe-interval`).
    pub ovn_remote_probe_interval: Option<u64>,
    /// IGMP/MLD snooping (`--mcast-snooping`).
    pub mcast_snooping: Option<bool>,
    /// Flood frames to unregistered groups (`--mcast-flood-unregistered`).
    pub mcast_flood_unregistered: Option<bool>,
    /// Groups the snooping table holds (`--mcast-table-size`).
    pub mcast_table_size: Option<usize>,
    /// Membership aging, seconds (`--mcast-aging`).
    pub mcast_aging_secs: Option<u64>,
    /// Static memberships, `"PORT=GROUP"` each (`--mcast-static`).
    #[serde(default)]
    pub mcast_static: Vec<String>,
    /// The switch's IGMP/MLD querier (`--mcast-querier`).
    pub mcast_querier: Option<bool>,
    /// The querier only in these domains (`--mcast-querier-domains`), e.g.
    /// `["vlan:10", "vni:5001"]`.
    #[serde(default)]
    pub mcast_querier_domains: Vec<String>,
    /// Seconds between the querier's rounds (`--mcast-query-interval`).
    pub mcast_query_interval_secs: Option<u64>,
}

/// Reads and parses a TOML configuration file.
pub fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::ParseFile {
        path: path.to_owned(),
        message: e.to_string().trim_end().to_string(),
    })
}
