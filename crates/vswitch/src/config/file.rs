//! The TOML file (`--config`): the same settings as the flags, by the same names.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::spec::PortConfig;
use super::{AfXdpRequest, ConfigError, MacAddr, PollMode};

/// An AF_XDP uplink as the file writes it (`[[uplink]]`), the same as `--uplink`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UplinkConfig {
    /// Port name, unique in the switch.
    pub name: String,
    /// The network interface (e.g. `eth0`).
    pub iface: String,
    /// `auto` (default), `native`, `generic` or `zerocopy`.
    #[serde(default)]
    pub mode: AfXdpRequest,
    /// Rx queues to open an AF_XDP socket on (queues 0..N); absent: all of the NIC's.
    #[serde(default)]
    pub queues: Option<u16>,
    /// Access VLAN (1..=4094); untagged when absent.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// Geneve VNI of the logical switch the port joins; never with `vlan`.
    #[serde(default)]
    pub vni: Option<u32>,
    /// On a VNI: the inner MTU (default: the underlay's MTU minus the overhead).
    #[serde(default)]
    pub mtu: Option<u16>,
    /// Port security: the port's own MAC. With `allowed_macs`, the only source MACs the
    /// port's frames may carry; others are dropped as `spoofed_source` (OVS
    /// `port_security`, OpenStack allowed-address-pairs). Absent with `allowed_macs`
    /// empty: any source MAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// Port security: further source MACs the port may send from (see `mac`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_macs: Vec<MacAddr>,
    /// MACs this port may teach the FDB (default: `fdb_port_max_macs` for vhost-user and
    /// tap ports, only the global `fdb_max_macs` for uplinks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_macs: Option<u32>,
}

/// A tap host port as the file writes it (`[[tap]]`), the same as `--tap`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapConfig {
    /// Port name, unique in the switch.
    pub name: String,
    /// The tap interface to create (at most 15 bytes, IFNAMSIZ - 1).
    pub ifname: String,
    /// Access VLAN (1..=4094); untagged when absent.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// Geneve VNI of the logical switch the port joins; never with `vlan`.
    #[serde(default)]
    pub vni: Option<u32>,
    /// On a VNI: the inner MTU (default: the underlay's MTU minus the overhead).
    #[serde(default)]
    pub mtu: Option<u16>,
    /// Port security: the port's own MAC. With `allowed_macs`, the only source MACs the
    /// port's frames may carry; others are dropped as `spoofed_source` (OVS
    /// `port_security`, OpenStack allowed-address-pairs). Absent with `allowed_macs`
    /// empty: any source MAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// Port security: further source MACs the port may send from (see `mac`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_macs: Vec<MacAddr>,
    /// MACs this port may teach the FDB (default: `fdb_port_max_macs` for vhost-user and
    /// tap ports, only the global `fdb_max_macs` for uplinks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_macs: Option<u32>,
}

pub(crate) fn one() -> u16 {
    1
}

pub(crate) fn yes() -> bool {
    true
}

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
    /// Ports.
    #[serde(default)]
    pub port: Vec<PortConfig>,
    /// AF_XDP uplinks.
    #[serde(default)]
    pub uplink: Vec<UplinkConfig>,
    /// Tap host ports.
    #[serde(default)]
    pub tap: Vec<TapConfig>,
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
    pub acl: Vec<crate::model::acl::AclEntry>,
    /// Flow cache on (default) or off.
    pub flow_cache: Option<bool>,
    /// EMC insertion probability is 1/N (1 = insert every miss).
    pub emc_insert_inv_prob: Option<u32>,
    /// Rebalance rx queues over the PMDs automatically (`--pmd-auto-rebalance`).
    pub pmd_auto_rebalance: Option<bool>,
    /// Prometheus endpoint address.
    pub metrics: Option<std::net::SocketAddr>,
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
