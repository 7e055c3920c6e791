//! Daemon configuration: command-line flags, the TOML file, and their validation.
//!
//! Every flag can also come from the file given with `--config`; flags are added to
//! (ports, static FDB entries) or override (scalars) what the file says. Validation
//! happens in [`Config::try_from`] so tests build configurations without a process
//! (the pattern of vhost-device-vsock's `src/main.rs`).

pub mod acl;
mod args;
mod file;
pub mod geneve;
pub mod keys;
pub mod mcast;
pub mod ovn;
pub mod port;

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

pub use args::{Args, OnOff};
pub use file::{read_file, FileConfig, StaticFdbEntry};
pub use geneve::{parse_geneve_spec, GeneveConfig, VniConfig};
pub use port::{
    parse_port, validate_ports, Native, PortConfig, PortFlag, TrunkConfig,
    DEFAULT_GROUP_SOCKET_MODE, MAX_UPLINK_QUEUES, MAX_VNI,
};

/// Default control socket path, shared by `vswitchd --control` and `vswitchctl --socket`.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/vswitch/vswitchd.sock";
/// Default MAC aging time in seconds (IEEE 802.1D's default).
pub const DEFAULT_FDB_AGING_SECS: u64 = 300;
/// Largest number of queue pairs a vhost-user port may ask for.
pub const MAX_QUEUE_PAIRS: u16 = 16;

/// Errors in the configuration. Each names the flag or field and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("cannot read config file {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration file is not valid TOML or has unknown or mistyped keys.
    #[error("config file {path}: {message}")]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A flag or field has a bad value.
    #[error("{field}: {message}")]
    Invalid {
        /// The flag (`--vhost-user`) or file field (`port[1].path`).
        field: String,
        /// What was wrong and what was expected.
        message: String,
    },
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Most ports a switch can have: port numbers ([`crate::model::fdb::PortId`]) are 16 bits.
pub const MAX_PORTS: usize = 1 << 16;

/// How PMD threads wait for work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PollMode {
    /// Spin on the virtqueues forever: lowest latency, one core at 100 % always.
    Busy,
    /// Spin while bursts come full; nap up to 50 µs while they are light or empty; after
    /// about 10 ms without work, sleep until a guest kicks.
    #[default]
    Adaptive,
    /// Sleep on kick eventfds whenever a poll round finds nothing: least CPU, highest latency.
    Interrupt,
}

impl fmt::Display for PollMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PollMode::Busy => "busy",
            PollMode::Adaptive => "adaptive",
            PollMode::Interrupt => "interrupt",
        })
    }
}

/// A 48-bit Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// True for group (multicast and broadcast) addresses: the I/G bit, IEEE 802 §8.2.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let expected = || {
            format!("{s:?} is not a MAC address; expected six hex octets like 02:00:00:00:00:01")
        };
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in out.iter_mut() {
            let p = parts.next().ok_or_else(expected)?;
            if p.len() != 2 {
                return Err(expected());
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| expected())?;
        }
        if parts.next().is_some() {
            return Err(expected());
        }
        Ok(MacAddr(out))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Which side of a vhost-user socket vswitchd is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortType {
    /// vswitchd creates and listens on the socket; QEMU or virtio-user connects.
    VhostUser,
    /// vswitchd connects to a socket the VM side listens on, and reconnects every second.
    VhostUserClient,
    /// A NIC attached through AF_XDP sockets, one per rx queue (`--uplink`).
    Afxdp,
    /// A tap device into the host's kernel stack (`--tap`).
    Tap,
}

impl PortType {
    /// Whether the port is a vhost-user socket (server or client).
    pub fn is_vhost(self) -> bool {
        matches!(self, PortType::VhostUser | PortType::VhostUserClient)
    }
}

impl fmt::Display for PortType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PortType::VhostUser => "vhost-user",
            PortType::VhostUserClient => "vhost-user-client",
            PortType::Afxdp => "afxdp",
            PortType::Tap => "tap",
        })
    }
}

pub use nicoffload::AfXdpRequest;

/// Largest CPU number a CPU list may name (Linux's `NR_CPUS` is at most 8192), so a list
/// like `0-1000000` is refused before anything is allocated for it.
pub const MAX_CPU: usize = 8191;

/// Default of `--fdb-max-macs`: MACs the whole FDB may learn.
pub const DEFAULT_FDB_MAX_MACS: u32 = 65_536;
/// Default of `--fdb-port-max-macs`: MACs one vhost-user or tap port may teach the FDB.
pub const DEFAULT_FDB_PORT_MAX_MACS: u32 = 1024;
/// Default of `--ct-max-connections` (Open vSwitch's `ct-set-maxconns` default).
pub const DEFAULT_CT_MAX_CONNECTIONS: u32 = 3_000_000;
/// Default of `--ct-zone-max`: connections one logical port's zone may hold.
pub const DEFAULT_CT_ZONE_MAX: u32 = 65_536;

/// Default of `--ct-shards` for `pmds` PMD threads: 8 each, at least 16, a power of
/// two, at most [`conntrack::MAX_SHARDS`] (what the count trades: docs/tuning.md).
pub fn default_ct_shards(pmds: usize) -> u32 {
    // MAX_SHARDS is a power of two: the next one up from the clamp never passes it.
    let n = pmds.saturating_mul(8).clamp(16, conntrack::MAX_SHARDS);
    n.next_power_of_two() as u32
}

/// PMD threads started on `cpus` (`None`: one unpinned).
fn pmd_count_of(cpus: Option<&[usize]>) -> usize {
    cpus.map_or(1, <[usize]>::len)
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// Ports, in the order given (file first, then flags).
    pub ports: Vec<PortConfig>,
    /// PMD CPUs; `None` for one unpinned PMD thread.
    pub pmd_cpus: Option<Vec<usize>>,
    /// Poll mode.
    pub poll: PollMode,
    /// Control socket.
    pub control: PathBuf,
    /// MAC aging time, seconds; 0 disables aging.
    pub fdb_aging_secs: u64,
    /// MACs the FDB may learn in all (static entries not counted).
    pub fdb_max_macs: u32,
    /// MACs one vhost-user or tap port may teach the FDB unless its `max_macs=` says
    /// otherwise (uplinks: only the global limit).
    pub fdb_port_max_macs: u32,
    /// Static FDB entries.
    pub fdb_static: Vec<StaticFdbEntry>,
    /// Connections OVN's conntrack table may hold in all.
    pub ct_max_connections: u32,
    /// Connections one conntrack zone may hold (`None`: only the global limit).
    pub ct_zone_max: Option<u32>,
    /// Lock shards of the connection tracker (a power of two, at most 4096).
    pub ct_shards: u32,
    /// ACL rules: (port name, rule), in order per port.
    pub acl: Vec<(String, crate::config::acl::AclRule)>,
    /// Flow cache enabled.
    pub flow_cache: bool,
    /// EMC insertion probability 1/N.
    pub emc_insert_inv_prob: u32,
    /// Prometheus endpoint, if any.
    pub metrics: Option<std::net::SocketAddr>,
    /// Rebalance rx queues over the PMDs automatically.
    pub pmd_auto_rebalance: bool,
    /// Geneve tunnel endpoints.
    pub geneve: Vec<GeneveConfig>,
    /// Per-VNI flood lists.
    pub vnis: Vec<VniConfig>,
    /// Group and mode of vhost-user server sockets whose port does not set its own.
    pub vhost_user_socket: SocketDefaults,
    /// vswitchd as an OVN chassis (`--ovn-remote`), if it is one.
    pub ovn: Option<ovn::OvnConfig>,
    /// The Open vSwitch database bridges and ports come from (`--ovsdb`), checked to
    /// read as an OVSDB remote; with it, `ports` is empty at start.
    pub ovsdb: Option<String>,
    /// Multicast snooping.
    pub mcast: mcast::McastConfig,
}

/// The daemon-wide group and mode of vhost-user server sockets
/// (`--vhost-user-socket-group`, `--vhost-user-socket-mode`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SocketDefaults {
    /// The group (name or numeric id).
    pub group: Option<String>,
    /// The mode.
    pub mode: Option<u32>,
}

impl SocketDefaults {
    /// Fills what a server-mode vhost-user port leaves open: the group, then the mode
    /// (the default mode, else [`DEFAULT_GROUP_SOCKET_MODE`] when the socket has a group).
    /// Ports `add-port` adds go through it too, so a default holds for every port.
    pub fn complete(&self, p: &mut PortConfig) {
        if p.kind != PortType::VhostUser {
            return;
        }
        if p.socket_group.is_none() {
            p.socket_group.clone_from(&self.group);
        }
        if p.socket_mode.is_none() {
            p.socket_mode = self
                .mode
                .or(p.socket_group.as_ref().map(|_| DEFAULT_GROUP_SOCKET_MODE));
        }
    }
}

impl Config {
    /// Number of PMD threads this configuration starts.
    pub fn pmd_count(&self) -> usize {
        pmd_count_of(self.pmd_cpus.as_deref())
    }

    /// Whether uplink `name` carries OVN provider networks (`--ovn-bridge-mappings`).
    pub fn bridges(&self, name: &str) -> bool {
        self.ovn
            .as_ref()
            .is_some_and(|o| o.bridge_mappings.iter().any(|m| m.uplink == name))
    }
}

/// Parses `PORT=MAC[,vlan=V]`.
fn parse_static_mac(spec: &str) -> Result<StaticFdbEntry, ConfigError> {
    let field = format!("--static-mac {spec:?}");
    let (port, rest) = spec
        .split_once('=')
        .ok_or_else(|| invalid(&field, "expected PORT=MAC[,vlan=V]"))?;
    let mut parts = rest.split(',');
    let mac = parts
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|e: String| invalid(&field, e))?;
    let mut vlan = 0;
    for opt in parts {
        match opt.split_once('=') {
            Some(("vlan", v)) => {
                vlan = v.parse().map_err(|_| {
                    invalid(&field, format!("vlan={v}: expected a VLAN id 1..=4094"))
                })?
            }
            _ => {
                return Err(invalid(
                    &field,
                    format!("unknown option {opt:?}; expected vlan=V"),
                ))
            }
        }
    }
    Ok(StaticFdbEntry {
        mac,
        port: port.to_string(),
        vlan,
    })
}

/// Parses a CPU list such as `1,2` or `0-3,6`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    let too_big = |c: usize| {
        format!("CPU {c} is past the largest CPU number Linux supports ({MAX_CPU}); expected a list like 1,2 or 2-3")
    };
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad =
            || format!("{part:?} is not a CPU number or range; expected a list like 1,2 or 2-3");
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().map_err(|_| bad())?;
            let b: usize = b.trim().parse().map_err(|_| bad())?;
            if a > b {
                return Err(bad());
            }
            if b > MAX_CPU {
                return Err(too_big(b));
            }
            cpus.extend(a..=b);
        } else {
            let c = part.parse().map_err(|_| bad())?;
            if c > MAX_CPU {
                return Err(too_big(c));
            }
            cpus.push(c);
        }
    }
    if cpus.is_empty() {
        return Err("empty CPU list; expected a list like 1,2 or 2-3".into());
    }
    Ok(cpus)
}

/// Every port of the file and the flags, in that order (file `[[port]]`, flags
/// `--vhost-user`, `--vhost-user-client`, then uplinks and taps, file first), each with
/// the field that named it and checked on its own. Both sources take one path
/// ([`port::PortBuilder`]).
fn collect_ports(args: &Args, file: &FileConfig) -> Result<Vec<(String, PortConfig)>, ConfigError> {
    let mut ports = Vec::new();
    let file_ports = |table: &str, rows: &[toml::Table], out: &mut Vec<_>| {
        for (i, t) in rows.iter().enumerate() {
            out.push(port::file_port(table, i, t)?);
        }
        Ok::<_, ConfigError>(())
    };
    let flag_ports = |flag: PortFlag, specs: &[String], out: &mut Vec<_>| {
        for s in specs {
            out.push(parse_port(flag, s)?);
        }
        Ok::<_, ConfigError>(())
    };
    file_ports("port", &file.port, &mut ports)?;
    flag_ports(PortFlag::VhostUser, &args.vhost_user, &mut ports)?;
    flag_ports(
        PortFlag::VhostUserClient,
        &args.vhost_user_client,
        &mut ports,
    )?;
    file_ports("uplink", &file.uplink, &mut ports)?;
    flag_ports(PortFlag::Uplink, &args.uplink, &mut ports)?;
    file_ports("tap", &file.tap, &mut ports)?;
    flag_ports(PortFlag::Tap, &args.tap, &mut ports)?;
    Ok(ports)
}

/// The daemon-wide defaults of vhost-user server sockets' group and mode, from the flags
/// over the file.
fn socket_defaults(args: &Args, file: &FileConfig) -> Result<SocketDefaults, ConfigError> {
    let (group, field) = match (&args.vhost_user_socket_group, &file.vhost_user_socket_group) {
        (Some(g), _) => (Some(g.clone()), "--vhost-user-socket-group"),
        (None, g) => (g.clone(), "vhost_user_socket_group"),
    };
    if let Some(g) = &group {
        if crate::sys::group_id(g).is_none() {
            return Err(invalid(field, format!("{g}: no such group on this host")));
        }
    }
    let mode = match (&args.vhost_user_socket_mode, &file.vhost_user_socket_mode) {
        (Some(m), _) => Some(port::parse_mode("--vhost-user-socket-mode", "mode", m)?),
        (None, Some(toml::Value::Integer(n))) => Some(port::parse_mode(
            "vhost_user_socket_mode",
            "mode",
            &format!("{n:o}"),
        )?),
        (None, Some(toml::Value::String(m))) => {
            Some(port::parse_mode("vhost_user_socket_mode", "mode", m)?)
        }
        (None, Some(_)) => {
            return Err(invalid(
                "vhost_user_socket_mode",
                "expected an octal mode: \"0660\" or 0o660",
            ))
        }
        (None, None) => None,
    };
    Ok(SocketDefaults { group, mode })
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(args: Args) -> Result<Self, Self::Error> {
        let file = match &args.config {
            Some(p) => read_file(p)?,
            None => FileConfig::default(),
        };
        let vhost_user_socket = socket_defaults(&args, &file)?;
        let mut ports = collect_ports(&args, &file)?;
        for (_, p) in &mut ports {
            vhost_user_socket.complete(p);
        }
        validate_ports(&ports)?;
        let ovsdb = ovsdb_remote(&args, &file, &ports)?;
        let ovn = ovn::resolve(
            ovn::OvnSettings {
                remote: either(
                    ("--ovn-remote", &args.ovn_remote),
                    ("ovn_remote", &file.ovn_remote),
                ),
                chassis: either(("--chassis", &args.chassis), ("chassis", &file.chassis)),
                bridge_mappings: either(
                    ("--ovn-bridge-mappings", &args.ovn_bridge_mappings),
                    ("ovn_bridge_mappings", &file.ovn_bridge_mappings),
                ),
                cms_options: either(
                    ("--ovn-cms-options", &args.ovn_cms_options),
                    ("ovn_cms_options", &file.ovn_cms_options),
                ),
                probe_interval: args
                    .ovn_remote_probe_interval
                    .map(|ms| ("--ovn-remote-probe-interval", ms))
                    .or(file
                        .ovn_remote_probe_interval
                        .map(|ms| ("ovn_remote_probe_interval", ms))),
            },
            &file
                .geneve
                .iter()
                .cloned()
                .chain(args.geneve.iter().filter_map(|s| parse_geneve_spec(s).ok()))
                .collect::<Vec<_>>(),
            &ports,
        )?;
        let ports: Vec<PortConfig> = ports.into_iter().map(|(_, p)| p).collect();
        let mut teps: Vec<(String, GeneveConfig)> = file
            .geneve
            .iter()
            .enumerate()
            .map(|(i, g)| (format!("geneve[{i}]"), g.clone()))
            .collect();
        for s in &args.geneve {
            teps.push((format!("--geneve {s:?}"), parse_geneve_spec(s)?));
        }
        for (_, g) in &mut teps {
            g.ovn = ovn.is_some();
        }
        let vnis: Vec<(String, VniConfig)> = file
            .vni
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("vni[{i}]"), v.clone()))
            .collect();
        geneve::validate_tunnels(&teps, &vnis, &ports)?;

        let pmd_cpus = match &args.pmd_cpus {
            Some(s) => Some(parse_cpu_list(s).map_err(|e| invalid("--pmd-cpus", e))?),
            None => file.pmd_cpus.clone(),
        };
        if let Some(cpus) = &pmd_cpus {
            let field = if args.pmd_cpus.is_some() {
                "--pmd-cpus"
            } else {
                "pmd_cpus"
            };
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            let online = core_affinity::get_core_ids()
                .map(|ids| ids.iter().map(|c| c.id).collect::<Vec<_>>())
                .unwrap_or_else(|| (0..n).collect());
            let mut seen = HashSet::new();
            for &c in cpus {
                if !online.contains(&c) {
                    return Err(invalid(
                        field,
                        format!("CPU {c} is not available to this process; available: {online:?}"),
                    ));
                }
                if !seen.insert(c) {
                    return Err(invalid(field, format!("CPU {c} is listed twice")));
                }
            }
            if cpus.is_empty() {
                return Err(invalid(field, "empty CPU list"));
            }
        }

        let mut fdb_static = file.fdb_static.clone();
        for s in &args.static_mac {
            fdb_static.push(parse_static_mac(s)?);
        }
        for (i, e) in fdb_static.iter().enumerate() {
            let field = format!("fdb_static[{i}] ({} on {})", e.mac, e.port);
            let Some(port) = ports.iter().find(|p| p.name == e.port) else {
                return Err(invalid(field, format!("no port named {:?}", e.port)));
            };
            if e.mac.is_multicast() {
                return Err(invalid(field, "a static entry needs a unicast MAC"));
            }
            if e.vlan != port.vlan.unwrap_or(0) {
                return Err(invalid(
                    field,
                    format!(
                        "vlan {} does not match port {:?}'s VLAN {}",
                        e.vlan,
                        port.name,
                        port.vlan.unwrap_or(0)
                    ),
                ));
            }
        }

        let control = args
            .control
            .clone()
            .or(file.control.clone())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTROL_SOCKET));
        let field = if args.control.is_some() {
            "--control"
        } else {
            "control"
        };
        if control.as_os_str().is_empty() {
            return Err(invalid(field, "empty path"));
        }

        let mut acl = Vec::new();
        for (i, e) in file.acl.iter().enumerate() {
            let field = format!("acl[{i}]");
            let (port, rule) = e
                .clone()
                .into_parts()
                .map_err(|e| invalid(&field, e.to_string()))?;
            acl.push((field, port, rule));
        }
        for s in &args.acl {
            let field = format!("--acl {s:?}");
            let (port, rule) = s
                .split_once(':')
                .ok_or_else(|| invalid(&field, "expected PORT:RULE, e.g. vm1:drop ip_proto=udp"))?;
            let rule: crate::config::acl::AclRule = rule
                .parse()
                .map_err(|e: crate::config::acl::AclError| invalid(&field, e.to_string()))?;
            acl.push((field, port.to_string(), rule));
        }
        for (field, port, _) in &acl {
            if !ports.iter().any(|p| &p.name == port) {
                return Err(invalid(field, format!("no port named {port:?}")));
            }
        }
        let emc_insert_inv_prob = args
            .emc_insert_inv_prob
            .or(file.emc_insert_inv_prob)
            .unwrap_or(1);
        if emc_insert_inv_prob == 0 {
            return Err(invalid(
                "--emc-insert-inv-prob",
                "expected N >= 1 (insert with probability 1/N)",
            ));
        }

        let mcast = mcast::McastConfig::resolve(&args, &file)?;
        for (port, _) in &mcast.statics {
            if !ports.iter().any(|p| &p.name == port) {
                return Err(invalid(
                    format!("--mcast-static {port}=..."),
                    format!("no port named {port:?}"),
                ));
            }
        }
        let fdb_max_macs = args
            .fdb_max_macs
            .or(file.fdb_max_macs)
            .unwrap_or(DEFAULT_FDB_MAX_MACS);
        let fdb_port_max_macs = args
            .fdb_port_max_macs
            .or(file.fdb_port_max_macs)
            .unwrap_or(DEFAULT_FDB_PORT_MAX_MACS);
        for (field, v) in [
            ("fdb_max_macs", fdb_max_macs),
            ("fdb_port_max_macs", fdb_port_max_macs),
        ] {
            if v == 0 {
                return Err(invalid(field, "expected at least 1 MAC"));
            }
        }

        let ct_max_connections = args
            .ct_max_connections
            .or(file.ct_max_connections)
            .unwrap_or(DEFAULT_CT_MAX_CONNECTIONS);
        if ct_max_connections == 0 {
            return Err(invalid(
                "ct_max_connections",
                "expected at least 1 connection",
            ));
        }
        let ct_zone_max = match args
            .ct_zone_max
            .or(file.ct_zone_max)
            .unwrap_or(DEFAULT_CT_ZONE_MAX)
        {
            0 => None,
            n => Some(n),
        };
        let ct_shards = args
            .ct_shards
            .or(file.ct_shards)
            .unwrap_or_else(|| default_ct_shards(pmd_count_of(pmd_cpus.as_deref())));
        if !ct_shards.is_power_of_two() || ct_shards as usize > conntrack::MAX_SHARDS {
            let field = if args.ct_shards.is_some() {
                "--ct-shards"
            } else {
                "ct_shards"
            };
            return Err(invalid(
                field,
                format!(
                    "expected a power of two from 1 to {}, got {ct_shards}",
                    conntrack::MAX_SHARDS
                ),
            ));
        }

        Ok(Config {
            ct_max_connections,
            ct_zone_max,
            ct_shards,
            acl: acl.into_iter().map(|(_, p, r)| (p, r)).collect(),
            flow_cache: args
                .flow_cache
                .map(|v| v == OnOff::On)
                .or(file.flow_cache)
                .unwrap_or(true),
            emc_insert_inv_prob,
            metrics: args.metrics.or(file.metrics),
            pmd_auto_rebalance: args.pmd_auto_rebalance || file.pmd_auto_rebalance.unwrap_or(false),
            geneve: teps.into_iter().map(|(_, g)| g).collect(),
            vnis: vnis.into_iter().map(|(_, v)| v).collect(),
            ports,
            pmd_cpus,
            poll: args.poll.or(file.poll).unwrap_or_default(),
            control,
            fdb_aging_secs: args
                .fdb_aging
                .or(file.fdb_aging_secs)
                .unwrap_or(DEFAULT_FDB_AGING_SECS),
            fdb_max_macs,
            fdb_port_max_macs,
            fdb_static,
            vhost_user_socket,
            ovn,
            ovsdb,
            mcast,
        })
    }
}

/// A setting from the flag `(flag, value)`, else the file's `(key, value)`, with the
/// name of where it came from (for errors).
fn either<'a>(
    (flag, a): (&'static str, &'a Option<String>),
    (key, f): (&'static str, &'a Option<String>),
) -> Option<(&'static str, &'a str)> {
    a.as_deref()
        .map(|v| (flag, v))
        .or(f.as_deref().map(|v| (key, v)))
}

/// The Open vSwitch database remote (`--ovsdb` over the file's `ovsdb`), checked to
/// read as `unix:PATH` or `tcp:IP:PORT`.
///
/// # Errors
/// The remote does not read, or ports are given besides: with a database, ports come
/// from its `Port`/`Interface` rows only.
fn ovsdb_remote(
    args: &Args,
    file: &FileConfig,
    ports: &[(String, PortConfig)],
) -> Result<Option<String>, ConfigError> {
    let (field, remote) = match (&args.ovsdb, &file.ovsdb) {
        (Some(r), _) => ("--ovsdb", r),
        (None, Some(r)) => ("ovsdb", r),
        (None, None) => return Ok(None),
    };
    remote
        .parse::<ovsdb::Remote>()
        .map_err(|e| invalid(field, format!("{remote}: {e}")))?;
    if let Some((port_field, _)) = ports.first() {
        return Err(invalid(
            port_field,
            format!(
                "ports come from the Open vSwitch database with {field}: add them with \
                 ovs-vsctl add-port, not with flags or [[port]]/[[uplink]]/[[tap]] tables"
            ),
        ));
    }
    Ok(Some(remote.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(v: &[&str]) -> Args {
        let mut all = vec!["vswitchd"];
        all.extend_from_slice(v);
        Args::parse_from(all)
    }

    #[test]
    fn ovsdb_takes_no_port_flags() {
        let c = Config::try_from(args(&["--ovsdb", "unix:/run/openvswitch/db.sock"])).unwrap();
        assert_eq!(c.ovsdb.as_deref(), Some("unix:/run/openvswitch/db.sock"));
        let e = Config::try_from(args(&["--ovsdb", "unix:/x", "--tap", "t=t0"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ovs-vsctl add-port") && e.contains("--tap"),
            "{e}"
        );
        let e = Config::try_from(args(&["--ovsdb", "udp:1.2.3.4:6640"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--ovsdb") && e.contains("udp:1.2.3.4:6640"),
            "{e}"
        );
    }

    #[test]
    fn ports_from_flags() {
        let d = tempfile::tempdir().unwrap();
        let a = format!("a={}/a.sock,queues=2,vlan=10", d.path().display());
        let b = format!("b={}/b.sock", d.path().display());
        let c = Config::try_from(args(&["--vhost-user", &a, "--vhost-user-client", &b])).unwrap();
        assert_eq!(c.ports.len(), 2);
        assert_eq!(c.ports[0].queues, 2);
        assert_eq!(c.ports[0].vlan, Some(10));
        assert_eq!(c.ports[1].kind, PortType::VhostUserClient);
        assert_eq!(c.poll, PollMode::Adaptive);
        assert_eq!(c.fdb_aging_secs, 300);
        assert_eq!(c.control, PathBuf::from(DEFAULT_CONTROL_SOCKET));
    }

    #[test]
    fn missing_socket_dir_names_the_flag() {
        let e = Config::try_from(args(&["--vhost-user", "a=/nonexistent-dir/a.sock"])).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("--vhost-user"), "{s}");
        assert!(s.contains("/nonexistent-dir does not exist"), "{s}");
    }

    #[test]
    fn more_ports_than_port_numbers_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let specs: Vec<String> = (0..=MAX_PORTS)
            .map(|i| format!("p{i}={}/{i}.sock", d.path().display()))
            .collect();
        let mut argv = Vec::new();
        for s in &specs {
            argv.extend(["--vhost-user", s.as_str()]);
        }
        let e = Config::try_from(args(&argv)).unwrap_err().to_string();
        assert!(e.contains("too many ports: at most 65536"), "{e}");
        assert!(
            e.contains(&format!("p{MAX_PORTS}=")),
            "names the first port too many: {e}"
        );
    }

    #[test]
    fn duplicate_names_and_paths_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let a = format!("a={}/a.sock", d.path().display());
        let a2 = format!("a={}/b.sock", d.path().display());
        let b = format!("b={}/a.sock", d.path().display());
        let e = Config::try_from(args(&["--vhost-user", &a, "--vhost-user", &a2])).unwrap_err();
        assert!(e.to_string().contains("duplicate port name \"a\""), "{e}");
        let e = Config::try_from(args(&["--vhost-user", &a, "--vhost-user", &b])).unwrap_err();
        assert!(e.to_string().contains("already used"), "{e}");
    }

    #[test]
    fn bad_mac_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let a = format!("a={}/a.sock", d.path().display());
        let e = Config::try_from(args(&[
            "--vhost-user",
            &a,
            "--static-mac",
            "a=02:00:00:00:00",
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("is not a MAC address"), "{e}");
        let e = Config::try_from(args(&[
            "--vhost-user",
            &a,
            "--static-mac",
            "zz=02:00:00:00:00:01",
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("no port named \"zz\""), "{e}");
    }

    #[test]
    fn file_unknown_key_and_malformed_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        std::fs::write(&f, "pmd_cpus = [0]\nbogus = 1\n").unwrap();
        let e = Config::try_from(args(&["--config", f.to_str().unwrap()])).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("c.toml") && s.contains("bogus"), "{s}");
        std::fs::write(&f, "[[port]\nname=").unwrap();
        let e = Config::try_from(args(&["--config", f.to_str().unwrap()])).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
    }

    #[test]
    fn file_and_flags_merge() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        std::fs::write(
            &f,
            format!(
                "poll = \"busy\"\nfdb_aging_secs = 10\n[[port]]\nname = \"f\"\ntype = \"vhost-user\"\npath = \"{}/f.sock\"\n\n[[fdb_static]]\nmac = \"02:00:00:00:00:09\"\nport = \"f\"\n",
                d.path().display()
            ),
        )
        .unwrap();
        let b = format!("b={}/b.sock", d.path().display());
        let c = Config::try_from(args(&[
            "--config",
            f.to_str().unwrap(),
            "--vhost-user",
            &b,
            "--poll",
            "interrupt",
        ]))
        .unwrap();
        assert_eq!(
            c.ports.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["f", "b"]
        );
        assert_eq!(c.poll, PollMode::Interrupt);
        assert_eq!(c.fdb_aging_secs, 10);
        assert_eq!(c.fdb_static.len(), 1);
    }

    #[test]
    fn ct_shards_are_a_power_of_two_eight_per_pmd() {
        let e = Config::try_from(args(&["--ct-shards", "48"])).unwrap_err();
        assert!(e.to_string().contains("--ct-shards"), "{e}");
        assert!(e.to_string().contains("power of two"), "{e}");
        let e = Config::try_from(args(&["--ct-shards", "8192"])).unwrap_err();
        assert!(e.to_string().contains("4096"), "{e}");
        let c = Config::try_from(args(&["--ct-shards", "4"])).unwrap();
        assert_eq!(c.ct_shards, 4);
        assert_eq!(Config::try_from(args(&[])).unwrap().ct_shards, 16);
        assert_eq!(
            Config::try_from(args(&["--pmd-cpus", "0"]))
                .unwrap()
                .ct_shards,
            16
        );
        assert_eq!(default_ct_shards(3), 32, "8 per PMD, a power of two");
        assert_eq!(default_ct_shards(1000), 4096);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("1,2").unwrap(), vec![1, 2]);
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("3-1").is_err());
        let e = Config::try_from(args(&["--pmd-cpus", "4096"])).unwrap_err();
        assert!(e.to_string().contains("--pmd-cpus"), "{e}");
    }

    #[test]
    fn uplink_and_tap_from_flags_and_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        std::fs::write(
            &f,
            "[[uplink]]\nname = \"u1\"\niface = \"eth1\"\nmode = \"generic\"\nqueues = 2\n\n[[tap]]\nname = \"host\"\nifname = \"vs0\"\n",
        )
        .unwrap();
        let c = Config::try_from(args(&[
            "--config",
            f.to_str().unwrap(),
            "--uplink",
            "u2=eth2,mode=native,vlan=5",
            "--tap",
            "t2=vs1",
        ]))
        .unwrap();
        let k: Vec<_> = c
            .ports
            .iter()
            .map(|p| (p.name.as_str(), p.kind, p.iface.as_str(), p.queues, p.mode))
            .collect();
        assert_eq!(
            k,
            [
                ("u1", PortType::Afxdp, "eth1", 2, AfXdpRequest::Generic),
                ("u2", PortType::Afxdp, "eth2", 0, AfXdpRequest::Native),
                ("host", PortType::Tap, "vs0", 1, AfXdpRequest::Auto),
                ("t2", PortType::Tap, "vs1", 1, AfXdpRequest::Auto),
            ]
        );
        assert_eq!(c.ports[1].vlan, Some(5));
    }

    #[test]
    fn uplink_and_tap_errors_name_the_flag() {
        for (flag, spec, want) in [
            ("--uplink", "noequals", "expected NAME=IFACE"),
            (
                "--uplink",
                "u=eth0,mode=fast",
                "mode=fast: expected auto, native",
            ),
            ("--uplink", "u=eth0,queues=0", "queues=0: expected 1..=64"),
            ("--uplink", "u=eth0,queues=x", "queues=x"),
            ("--uplink", "u=eth0,color=red", "unknown option"),
            ("--uplink", "u=", "expected an interface name"),
            (
                "--uplink",
                "u=averyveryverylongname",
                "expected an interface name",
            ),
            ("--tap", "t", "expected NAME=IFNAME"),
            ("--tap", "t=a/b", "expected an interface name"),
            ("--tap", "t=tap0,queues=2", "unknown option"),
        ] {
            let e = Config::try_from(args(&[flag, spec])).unwrap_err();
            let s = e.to_string();
            assert!(s.contains(flag) && s.contains(want), "{spec}: {s}");
        }
        let e = Config::try_from(args(&["--uplink", "u=eth0", "--tap", "t=eth0"])).unwrap_err();
        assert!(e.to_string().contains("already used"), "{e}");
        let e = Config::try_from(args(&["--uplink", "u=eth0", "--tap", "u=tap0"])).unwrap_err();
        assert!(e.to_string().contains("duplicate port name"), "{e}");
    }

    #[test]
    fn port_spec_errors() {
        let d = tempfile::tempdir().unwrap();
        for (spec, want) in [
            ("noequals", "expected NAME=PATH"),
            ("a=/tmp/x.sock,queues=0", "queues=0"),
            ("a=/tmp/x.sock,queues=99", "queues=99"),
            ("a=/tmp/x.sock,vlan=5000", "vlan=5000"),
            ("a=/tmp/x.sock,color=red", "unknown option"),
            ("bad name=/tmp/x.sock", "port name"),
            ("a=/tmp/x.sock,mac=02:00", "mac=02:00"),
            ("a=/tmp/x.sock,mac=01:00:5e:00:00:01", "group address"),
            (
                "a=/tmp/x.sock,allowed_macs=02:00:00:00:00:01+zz",
                "allowed_macs=",
            ),
            ("a=/tmp/x.sock,max_macs=0", "max_macs=0"),
            ("a=/tmp/x.sock,max_macs=-1", "max_macs=-1"),
        ] {
            let _ = &d;
            let e = Config::try_from(args(&["--vhost-user", spec])).unwrap_err();
            assert!(e.to_string().contains(want), "{spec}: {e}");
        }
    }

    /// Port security and MAC limits from a flag spec, a tap spec and the file; the
    /// global limits from flags over the file; a CPU list past Linux's largest CPU is
    /// refused before it is expanded.
    #[test]
    fn port_security_and_limits() {
        let d = tempfile::tempdir().unwrap();
        let a = format!(
            "a={}/a.sock,mac=02:00:00:00:00:01,allowed_macs=02:00:00:00:00:02+02:00:00:00:00:03,max_macs=8",
            d.path().display()
        );
        let c = Config::try_from(args(&[
            "--vhost-user",
            &a,
            "--tap",
            "t=vs-t,mac=02:00:00:00:00:09",
            "--fdb-max-macs",
            "100",
        ]))
        .unwrap();
        let p = &c.ports[0];
        assert_eq!(p.mac, Some(MacAddr([2, 0, 0, 0, 0, 1])));
        assert_eq!(p.allowed_macs.len(), 2);
        assert_eq!(p.max_macs, Some(8));
        assert!(p.permits_source(&[2, 0, 0, 0, 0, 3]));
        assert!(!p.permits_source(&[2, 0, 0, 0, 0, 4]));
        assert_eq!(c.ports[1].mac, Some(MacAddr([2, 0, 0, 0, 0, 9])));
        assert_eq!(c.fdb_max_macs, 100);
        assert_eq!(c.fdb_port_max_macs, DEFAULT_FDB_PORT_MAX_MACS);
        let e = Config::try_from(args(&["--pmd-cpus", "0-1000000"])).unwrap_err();
        assert!(e.to_string().contains("largest CPU"), "{e}");
        let e = Config::try_from(args(&["--fdb-port-max-macs", "0"])).unwrap_err();
        assert!(e.to_string().contains("fdb_port_max_macs"), "{e}");
    }

    /// One path: every option key reads the same from a flag spec and from the file.
    #[test]
    fn flags_and_file_give_the_same_port() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().display();
        let cases: &[(&str, &str, &str, &str)] = &[
            ("vhost-user", "port", "queues=4", "queues = 4"),
            ("vhost-user", "port", "offloads=off", "offloads = false"),
            ("vhost-user", "port", "vlan=7", "vlan = 7"),
            (
                "vhost-user",
                "port",
                "mac=02:00:00:00:00:01",
                "mac = \"02:00:00:00:00:01\"",
            ),
            (
                "vhost-user",
                "port",
                "allowed_macs=02:00:00:00:00:02+02:00:00:00:00:03",
                "allowed_macs = [\"02:00:00:00:00:02\", \"02:00:00:00:00:03\"]",
            ),
            ("vhost-user", "port", "max_macs=9", "max_macs = 9"),
            (
                "vhost-user",
                "port",
                "socket_group=root",
                "socket_group = \"root\"",
            ),
            (
                "vhost-user",
                "port",
                "socket_mode=0640",
                "socket_mode = 0o640",
            ),
            (
                "vhost-user",
                "port",
                "socket_mode=0640",
                "socket_mode = \"0640\"",
            ),
            (
                "uplink",
                "uplink",
                "mode=generic,queues=2",
                "mode = \"generic\"\nqueues = 2",
            ),
            ("tap", "tap", "vlan=7", "vlan = 7"),
        ];
        for (flag, table, opts, toml_opts) in cases {
            let (first_key, first) = match *table {
                "port" => ("path", format!("{dir}/a.sock")),
                "uplink" => ("iface", "eth9".to_string()),
                _ => ("ifname", "vs-t9".to_string()),
            };
            let spec = format!("a={first},{opts}");
            let from_flag = Config::try_from(args(&[&format!("--{flag}"), &spec])).unwrap();
            let f = d.path().join("c.toml");
            let ty = if *table == "port" {
                format!("type = \"{flag}\"\n")
            } else {
                String::new()
            };
            std::fs::write(
                &f,
                format!("[[{table}]]\nname = \"a\"\n{ty}{first_key} = \"{first}\"\n{toml_opts}\n"),
            )
            .unwrap();
            let from_file = Config::try_from(args(&["--config", f.to_str().unwrap()]))
                .unwrap_or_else(|e| panic!("{toml_opts}: {e}"));
            assert_eq!(
                from_flag.ports, from_file.ports,
                "{flag} {opts} vs {toml_opts}"
            );
        }
    }

    /// The file's errors name the table, the entry and the key.
    #[test]
    fn file_port_errors_name_the_key() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        for (body, want) in [
            ("[[port]]\nname = \"a\"\ntype = \"vhost-user\"\npath = \"/tmp/a.sock\"\ncolor = \"red\"\n", "unknown option \"color\""),
            ("[[port]]\nname = \"a\"\ntype = \"tap\"\npath = \"/tmp/a.sock\"\n", "port[0].type"),
            ("[[port]]\nname = \"a\"\ntype = \"vhost-user\"\n", "missing key \"path\""),
            ("[[uplink]]\nname = \"u\"\niface = \"eth0\"\nqueues = {a = 1}\n", "uplink[0].queues"),
            ("[[tap]]\nname = \"t\"\nifname = \"t0\"\nqueues = 2\n", "unknown option \"queues\" for a tap port"),
            ("[[tap]]\nname = \"t\"\nifname = \"t0\"\nsocket_group = \"root\"\n", "tap[0]"),
        ] {
            std::fs::write(&f, body).unwrap();
            let e = Config::try_from(args(&["--config", f.to_str().unwrap()])).unwrap_err();
            assert!(e.to_string().contains(want), "{body}: {e}");
        }
    }

    /// Socket group and mode: the daemon default, a port's own, 0660 by default with a
    /// group, refused for client ports and unknown groups.
    #[test]
    fn socket_group_and_mode() {
        let d = tempfile::tempdir().unwrap();
        let a = format!("a={}/a.sock", d.path().display());
        let b = format!(
            "b={}/b.sock,socket_group=0,socket_mode=600",
            d.path().display()
        );
        let c = format!("c={}/c.sock", d.path().display());
        let cfg = Config::try_from(args(&[
            "--vhost-user-socket-group",
            "root",
            "--vhost-user",
            &a,
            "--vhost-user",
            &b,
            "--vhost-user-client",
            &c,
        ]))
        .unwrap();
        assert_eq!(cfg.ports[0].socket_group.as_deref(), Some("root"));
        assert_eq!(cfg.ports[0].socket_mode, Some(0o660));
        assert_eq!(cfg.ports[1].socket_group.as_deref(), Some("0"));
        assert_eq!(cfg.ports[1].socket_mode, Some(0o600));
        assert_eq!(cfg.ports[2].socket_group, None, "client sockets are QEMU's");
        let plain = Config::try_from(args(&["--vhost-user", &a])).unwrap();
        assert_eq!(
            plain.ports[0].socket_mode, None,
            "no group, no mode: as before"
        );
        let e = Config::try_from(args(&[
            "--vhost-user-socket-group",
            "no-such-group-x",
            "--vhost-user",
            &a,
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--vhost-user-socket-group") && e.contains("no such group"),
            "{e}"
        );
        let e = Config::try_from(args(&["--vhost-user", &format!("{a},socket_mode=999")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("socket_mode=999: expected an octal file mode"),
            "{e}"
        );
        let e = Config::try_from(args(&[
            "--vhost-user-client",
            &format!("{c},socket_group=root"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("client mode QEMU creates the socket"), "{e}");
        let e = Config::try_from(args(&[
            "--vhost-user",
            &format!("{a},socket_group=no-such-group-x"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("socket_group=no-such-group-x: no such group"),
            "{e}"
        );
    }

    /// `iface_id=` needs an OVN Southbound database, which needs a chassis name and an
    /// IPv4 Geneve endpoint; the errors say so, from a flag or the file alike.
    #[test]
    fn ovn_settings_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let a = format!("a={}/a.sock,iface_id=lsp1", d.path().display());
        let e = Config::try_from(args(&["--vhost-user", &a]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("iface_id=lsp1") && e.contains("--ovn-remote"),
            "{e}"
        );
        let f = d.path().join("c.toml");
        std::fs::write(
            &f,
            format!(
                "[[tap]]\nname = \"t\"\nifname = \"t0\"\niface_id = \"lsp2\"\n[[port]]\nname = \"b\"\ntype = \"vhost-user\"\npath = \"{}/b.sock\"\n",
                d.path().display()
            ),
        )
        .unwrap();
        let e = Config::try_from(args(&["--config", f.to_str().unwrap()]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tap[0]") && e.contains("iface_id=lsp2"), "{e}");
        let e = Config::try_from(args(&["--ovn-remote", "unix:/run/ovn/sb.sock"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--chassis NAME is needed"), "{e}");
        let e = Config::try_from(args(&["--ovn-remote", "tcp:1.2.3.4", "--chassis", "hv1"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--ovn-remote") && e.contains("tcp:1.2.3.4"),
            "{e}"
        );
        let e = Config::try_from(args(&[
            "--ovn-remote",
            "tcp:127.0.0.1:6642",
            "--chassis",
            "hv1",
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("IPv4 Geneve tunnel endpoint"), "{e}");
        let e = Config::try_from(args(&["--chassis", "hv1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("only used with --ovn-remote"), "{e}");
    }

    /// `--ovn-bridge-mappings`: NETWORK:UPLINK pairs naming uplinks (with a tunnel
    /// endpoint or not), each network once; advertised as written.
    #[test]
    fn bridge_mappings_are_checked() {
        let with = |m: &str| {
            Config::try_from(args(&[
                "--uplink",
                "u=eth0",
                "--uplink",
                "p=eth1",
                "--geneve",
                "t=198.51.100.1,uplink=u",
                "--ovn-remote",
                "tcp:127.0.0.1:6642",
                "--chassis",
                "hv1",
                "--ovn-bridge-mappings",
                m,
            ]))
        };
        let c = with("physnet1:p, physnet2:u").unwrap();
        assert!(c.bridges("p") && c.bridges("u"));
        let o = c.ovn.unwrap();
        assert_eq!(o.bridge_mappings_text(), "physnet1:p,physnet2:u");
        assert_eq!(o.uplink_of("physnet2"), Some("u"));
        for (bad, says) in [
            ("physnet1", "expected NETWORK:UPLINK"),
            ("physnet1:", "expected NETWORK:UPLINK"),
            ("physnet1:nope", "nope is not an --uplink"),
            ("physnet1:p,physnet1:p", "mapped twice"),
            (",", "expected NETWORK:UPLINK"),
        ] {
            let e = with(bad).unwrap_err().to_string();
            assert!(
                e.contains("--ovn-bridge-mappings") && e.contains(says),
                "{bad}: {e}"
            );
        }
        let e = Config::try_from(args(&["--ovn-bridge-mappings", "a:b"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("only used with --ovn-remote"), "{e}");
    }

    /// `--ovn-cms-options`: published as given, empty without it, refused without
    /// `--ovn-remote`.
    #[test]
    fn cms_options_go_with_the_chassis() {
        let with = |more: &[&str]| {
            let mut a = vec![
                "--uplink",
                "u=eth0",
                "--geneve",
                "t=198.51.100.1,uplink=u",
                "--ovn-remote",
                "tcp:127.0.0.1:6642",
                "--chassis",
                "hv1",
            ];
            a.extend(more);
            Config::try_from(args(&a)).unwrap().ovn.unwrap()
        };
        let o = with(&["--ovn-cms-options", "enable-chassis-as-gw"]);
        assert_eq!(o.cms_options, "enable-chassis-as-gw");
        assert_eq!(with(&[]).cms_options, "");
        let e = Config::try_from(args(&["--ovn-cms-options", "enable-chassis-as-gw"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--ovn-cms-options") && e.contains("only used with --ovn-remote"),
            "{e}"
        );
        // The Southbound probe: 5 s unless set; 0 is none; below 1 s is 1 s.
        assert_eq!(with(&[]).probe_interval_ms, 5000);
        for (v, want) in [("0", 0), ("200", 1000), ("15000", 15000)] {
            let o = with(&["--ovn-remote-probe-interval", v]);
            assert_eq!(o.probe_interval_ms, want, "{v}");
        }
        let e = Config::try_from(args(&["--ovn-remote-probe-interval", "1000"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--ovn-remote-probe-interval") && e.contains("only used with --ovn-remote"),
            "{e}"
        );
    }
}
