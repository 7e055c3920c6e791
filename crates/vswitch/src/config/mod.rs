//! Daemon configuration: command-line flags, the TOML file, and their validation.
//!
//! Every flag can also come from the file given with `--config`; flags are added to
//! (ports, static FDB entries) or override (scalars) what the file says. Validation
//! happens in [`Config::try_from`] so tests build configurations without a process
//! (the pattern of vhost-device-vsock's `src/main.rs`).

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use clap::{Parser, ValueEnum};
use serde::{Deserialize, Serialize};

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
    /// Spin while traffic flows; after a short idle spell, sleep until a guest kicks.
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

/// One port as the file writes it (`[[port]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Port name, unique in the switch.
    pub name: String,
    /// `vhost-user` (server) or `vhost-user-client`.
    #[serde(rename = "type")]
    pub kind: PortType,
    /// The vhost-user unix socket.
    pub path: PathBuf,
    /// Queue pairs (VIRTIO_NET_F_MQ), 1..=16.
    #[serde(default = "one")]
    pub queues: u16,
    /// Access VLAN (1..=4094); untagged (VLAN 0 domain) when absent.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// Offer checksum and TSO offloads (CSUM, GUEST_CSUM, HOST_TSO4/6, GUEST_TSO4/6,
    /// HOST_ECN, GUEST_ECN). Default true, as a Linux guest under QEMU expects.
    #[serde(default = "yes")]
    pub offloads: bool,
    /// afxdp and tap ports: the network interface (empty for vhost-user ports).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iface: String,
    /// afxdp ports: the AF_XDP mode asked for (ignored for other kinds).
    #[serde(default)]
    pub mode: AfXdpRequest,
}

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
}

pub use nicoffload::AfXdpRequest;

/// Largest number of AF_XDP queues (sockets) an uplink may open.
pub const MAX_UPLINK_QUEUES: u16 = 64;

fn one() -> u16 {
    1
}

fn yes() -> bool {
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
    /// Per-port ACL rules, in order (`[[acl]]` with `port` and the rule's fields).
    #[serde(default)]
    pub acl: Vec<crate::model::acl::AclEntry>,
    /// Flow cache on (default) or off.
    pub flow_cache: Option<bool>,
    /// EMC insertion probability is 1/N (1 = insert every miss).
    pub emc_insert_inv_prob: Option<u32>,
    /// Prometheus endpoint address.
    pub metrics: Option<std::net::SocketAddr>,
}

/// vswitchd: a vhost-user virtual switch.
///
/// Serves VMs (QEMU `-netdev vhost-user`, DPDK virtio-user) over vhost-user sockets and
/// switches their Ethernet frames with a MAC-learning FDB, on PMD threads pinned to CPUs.
/// Every flag can also be set in a TOML file given with --config (flags win; ports and
/// static MACs from both are used). `vswitchctl` talks to the running daemon.
///
/// Example:
///   vswitchd --vhost-user vm1=/tmp/vm1.sock --vhost-user vm2=/tmp/vm2.sock,queues=2 --pmd-cpus 1
#[derive(Debug, Clone, Parser, Default)]
#[command(name = "vswitchd", version, verbatim_doc_comment)]
pub struct Args {
    /// TOML configuration file; keys: pmd_cpus, poll, control, fdb_aging_secs,
    /// `[[port]]` {name, type = "vhost-user"|"vhost-user-client", path, queues, vlan},
    /// `[[uplink]]` {name, iface, mode, queues, vlan}, `[[tap]]` {name, ifname, vlan},
    /// `[[fdb_static]]` {mac, port, vlan}.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Server-mode vhost-user port: vswitchd creates the socket, the VM connects.
    /// `NAME=PATH[,queues=N][,vlan=V][,offloads=on|off]`. Repeatable. `offloads=on` (the
    /// default) offers checksum and TSO offloads; frames a destination cannot take whole
    /// are segmented or checksummed in software. `offloads=off` offers none.
    #[arg(
        long = "vhost-user",
        value_name = "NAME=PATH[,queues=N][,vlan=V][,offloads=on|off]"
    )]
    pub vhost_user: Vec<String>,

    /// Client-mode vhost-user port: vswitchd connects to a socket the VM side listens on
    /// (QEMU `server=on`, virtio-user `server=1`) and retries every second while it is absent
    /// or gone. `NAME=PATH[,queues=N][,vlan=V][,offloads=on|off]`. Repeatable.
    #[arg(
        long = "vhost-user-client",
        value_name = "NAME=PATH[,queues=N][,vlan=V][,offloads=on|off]"
    )]
    pub vhost_user_client: Vec<String>,

    /// AF_XDP uplink: one AF_XDP socket per rx queue of network interface IFACE, each
    /// polled by one PMD thread; vswitchd loads and attaches the XDP program that
    /// redirects to them (and detaches it on exit). `mode=auto` (default) picks zero-copy
    /// when the driver reports it, else native (driver) copy mode, else generic (skb)
    /// mode, and logs why; `queues=N` uses rx queues 0..N (default: all). Repeatable.
    #[arg(
        long = "uplink",
        value_name = "NAME=IFACE[,mode=auto|native|generic|zerocopy][,queues=N][,vlan=V]"
    )]
    pub uplink: Vec<String>,

    /// Tap host port: vswitchd creates tap device IFNAME (IFF_VNET_HDR, so TSO frames pass
    /// unsegmented), brings it up, and moves its frames in batches through io_uring.
    /// `NAME=IFNAME[,vlan=V]`. Repeatable.
    #[arg(long = "tap", value_name = "NAME=IFNAME[,vlan=V]")]
    pub tap: Vec<String>,

    /// CPUs to pin PMD threads to, one thread per CPU: "1,2" or "2-3". Default: one
    /// unpinned PMD thread.
    #[arg(long, value_name = "LIST")]
    pub pmd_cpus: Option<String>,

    /// How PMD threads wait for work: busy (spin, lowest latency), adaptive (spin while
    /// busy, sleep on kicks when idle; the default), interrupt (sleep whenever idle).
    #[arg(long, value_enum)]
    pub poll: Option<PollMode>,

    /// Control socket for vswitchctl.
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,

    /// MAC aging time in seconds (0 disables aging).
    #[arg(long, value_name = "SECS")]
    pub fdb_aging: Option<u64>,

    /// Static FDB entry: `PORT=MAC[,vlan=V]`. Repeatable.
    #[arg(long = "static-mac", value_name = "PORT=MAC[,vlan=V]")]
    pub static_mac: Vec<String>,

    /// ACL rule for frames arriving on PORT, appended in order: `PORT:ACTION FIELD=VALUE...`,
    /// e.g. `vm1:drop ip_proto=udp l4_dst=5000-5999 ip_src=10.0.0.0/8`. Fields: eth_src,
    /// eth_dst (MAC[/MASK]), eth_type, vlan, ip_src, ip_dst (CIDR), ip_proto, ip_frag,
    /// l4_src, l4_dst (PORT or LO-HI). First match wins; no match allows. Repeatable.
    #[arg(long = "acl", value_name = "PORT:RULE")]
    pub acl: Vec<String>,

    /// The flow cache (last-flow check + exact-match cache per PMD): on (default) or off.
    #[arg(long = "flow-cache", value_name = "on|off")]
    pub flow_cache: Option<OnOff>,

    /// Insert a missed flow into the exact-match cache with probability 1/N (default 1).
    /// Larger N protects the cache from thrashing under many short flows.
    #[arg(long, value_name = "N")]
    pub emc_insert_inv_prob: Option<u32>,

    /// Serve the counters for Prometheus at http://ADDR/metrics (e.g. 127.0.0.1:9477).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
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
    /// Static FDB entries.
    pub fdb_static: Vec<StaticFdbEntry>,
    /// ACL rules: (port name, rule), in order per port.
    pub acl: Vec<(String, crate::model::acl::AclRule)>,
    /// Flow cache enabled.
    pub flow_cache: bool,
    /// EMC insertion probability 1/N.
    pub emc_insert_inv_prob: u32,
    /// Prometheus endpoint, if any.
    pub metrics: Option<std::net::SocketAddr>,
}

impl Config {
    /// Number of PMD threads this configuration starts.
    pub fn pmd_count(&self) -> usize {
        self.pmd_cpus.as_ref().map_or(1, |c| c.len())
    }
}

/// Parses `NAME=PATH[,queues=N][,vlan=V]`.
fn parse_port_spec(flag: &str, spec: &str, kind: PortType) -> Result<PortConfig, ConfigError> {
    let field = format!("{flag} {spec:?}");
    let (name, rest) = spec
        .split_once('=')
        .ok_or_else(|| invalid(&field, "expected NAME=PATH[,queues=N][,vlan=V]"))?;
    let mut parts = rest.split(',');
    let path = parts.next().unwrap_or_default();
    let mut port = PortConfig {
        name: name.to_string(),
        kind,
        path: PathBuf::from(path),
        queues: 1,
        vlan: None,
        offloads: true,
        iface: String::new(),
        mode: AfXdpRequest::Auto,
    };
    for opt in parts {
        let (k, v) = opt
            .split_once('=')
            .ok_or_else(|| invalid(&field, format!("option {opt:?}: expected KEY=VALUE")))?;
        match k {
            "queues" => {
                port.queues = v.parse().map_err(|_| {
                    invalid(
                        &field,
                        format!("queues={v}: expected a number 1..={MAX_QUEUE_PAIRS}"),
                    )
                })?
            }
            "vlan" => {
                port.vlan = Some(v.parse().map_err(|_| {
                    invalid(&field, format!("vlan={v}: expected a VLAN id 1..=4094"))
                })?)
            }
            "offloads" => {
                port.offloads = match v {
                    "on" => true,
                    "off" => false,
                    _ => return Err(invalid(&field, format!("offloads={v}: expected on or off"))),
                }
            }
            _ => {
                return Err(invalid(
                    &field,
                    format!("unknown option {k:?}; expected queues=N, vlan=V or offloads=on|off"),
                ))
            }
        }
    }
    Ok(port)
}

/// Parses `NAME=IFACE[,mode=M][,queues=N][,vlan=V]` (`--uplink`).
fn parse_uplink_spec(spec: &str) -> Result<UplinkConfig, ConfigError> {
    let field = format!("--uplink {spec:?}");
    let expected = "expected NAME=IFACE[,mode=auto|native|generic|zerocopy][,queues=N][,vlan=V]";
    let (name, rest) = spec
        .split_once('=')
        .ok_or_else(|| invalid(&field, expected))?;
    let mut parts = rest.split(',');
    let mut u = UplinkConfig {
        name: name.to_string(),
        iface: parts.next().unwrap_or_default().to_string(),
        mode: AfXdpRequest::Auto,
        queues: None,
        vlan: None,
    };
    for opt in parts {
        let (k, v) = opt
            .split_once('=')
            .ok_or_else(|| invalid(&field, format!("option {opt:?}: expected KEY=VALUE")))?;
        match k {
            "mode" => {
                u.mode = match v {
                    "auto" => AfXdpRequest::Auto,
                    "native" => AfXdpRequest::Native,
                    "generic" => AfXdpRequest::Generic,
                    "zerocopy" | "zero-copy" => AfXdpRequest::ZeroCopy,
                    _ => {
                        return Err(invalid(
                            &field,
                            format!("mode={v}: expected auto, native, generic or zerocopy"),
                        ))
                    }
                }
            }
            "queues" => {
                u.queues = Some(v.parse().map_err(|_| {
                    invalid(
                        &field,
                        format!("queues={v}: expected a number 1..={MAX_UPLINK_QUEUES}"),
                    )
                })?)
            }
            "vlan" => {
                u.vlan = Some(v.parse().map_err(|_| {
                    invalid(&field, format!("vlan={v}: expected a VLAN id 1..=4094"))
                })?)
            }
            _ => {
                return Err(invalid(
                    &field,
                    format!("unknown option {k:?}; expected mode=M, queues=N or vlan=V"),
                ))
            }
        }
    }
    Ok(u)
}

/// Parses `NAME=IFNAME[,vlan=V]` (`--tap`).
fn parse_tap_spec(spec: &str) -> Result<TapConfig, ConfigError> {
    let field = format!("--tap {spec:?}");
    let (name, rest) = spec
        .split_once('=')
        .ok_or_else(|| invalid(&field, "expected NAME=IFNAME[,vlan=V]"))?;
    let mut parts = rest.split(',');
    let mut t = TapConfig {
        name: name.to_string(),
        ifname: parts.next().unwrap_or_default().to_string(),
        vlan: None,
    };
    for opt in parts {
        match opt.split_once('=') {
            Some(("vlan", v)) => {
                t.vlan = Some(v.parse().map_err(|_| {
                    invalid(&field, format!("vlan={v}: expected a VLAN id 1..=4094"))
                })?)
            }
            _ => {
                return Err(invalid(
                    &field,
                    format!("unknown option {opt:?}; expected vlan=V"),
                ))
            }
        }
    }
    Ok(t)
}

/// Checks a Linux interface name: 1..=15 bytes (IFNAMSIZ - 1), no `/`, whitespace or `:`.
fn check_ifname(field: &str, what: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty()
        || name.len() > 15
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || !c.is_ascii())
    {
        return Err(invalid(
            field,
            format!("{what} {name:?}: expected an interface name of 1..=15 ASCII characters without '/', ':' or spaces"),
        ));
    }
    Ok(())
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
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad =
            || format!("{part:?} is not a CPU number or range; expected a list like 1,2 or 2-3");
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().map_err(|_| bad())?;
            let b: usize = b.trim().parse().map_err(|_| bad())?;
            if a > b {
                return Err(bad());
            }
            cpus.extend(a..=b);
        } else {
            cpus.push(part.parse().map_err(|_| bad())?);
        }
    }
    if cpus.is_empty() {
        return Err("empty CPU list; expected a list like 1,2 or 2-3".into());
    }
    Ok(cpus)
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

fn check_socket_dir(field: &str, path: &Path) -> Result<(), ConfigError> {
    if path.as_os_str().is_empty() {
        return Err(invalid(field, "empty socket path; expected a file path"));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(invalid(
            field,
            format!("socket directory {} does not exist", dir.display()),
        ));
    }
    // sockaddr_un.sun_path is 108 bytes including the terminating NUL.
    if path.as_os_str().len() > 107 {
        return Err(invalid(
            field,
            format!("socket path {} is longer than 107 bytes", path.display()),
        ));
    }
    Ok(())
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(args: Args) -> Result<Self, Self::Error> {
        let file = match &args.config {
            Some(p) => read_file(p)?,
            None => FileConfig::default(),
        };
        let mut ports: Vec<(String, PortConfig)> = file
            .port
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("port[{i}]"), p.clone()))
            .collect();
        for s in &args.vhost_user {
            let p = parse_port_spec("--vhost-user", s, PortType::VhostUser)?;
            ports.push((format!("--vhost-user {s:?}"), p));
        }
        for s in &args.vhost_user_client {
            let p = parse_port_spec("--vhost-user-client", s, PortType::VhostUserClient)?;
            ports.push((format!("--vhost-user-client {s:?}"), p));
        }
        for (field, p) in &ports {
            if !p.kind.is_vhost() {
                return Err(invalid(
                    field,
                    format!(
                        "type {}: [[port]] is for vhost-user ports; use [[uplink]] or [[tap]]",
                        p.kind
                    ),
                ));
            }
            if !p.iface.is_empty() {
                return Err(invalid(
                    field,
                    "iface: only [[uplink]] and [[tap]] have one",
                ));
            }
        }
        let mut uplinks: Vec<(String, UplinkConfig)> = file
            .uplink
            .iter()
            .enumerate()
            .map(|(i, u)| (format!("uplink[{i}]"), u.clone()))
            .collect();
        for s in &args.uplink {
            uplinks.push((format!("--uplink {s:?}"), parse_uplink_spec(s)?));
        }
        let mut ifaces = HashSet::new();
        for (field, u) in uplinks {
            check_ifname(&field, "iface", &u.iface)?;
            if !ifaces.insert(u.iface.clone()) {
                return Err(invalid(
                    &field,
                    format!("interface {:?} is already used by another port", u.iface),
                ));
            }
            if let Some(q) = u.queues {
                if q == 0 || q > MAX_UPLINK_QUEUES {
                    return Err(invalid(
                        &field,
                        format!("queues={q}: expected 1..={MAX_UPLINK_QUEUES}"),
                    ));
                }
            }
            ports.push((
                field,
                PortConfig {
                    name: u.name,
                    kind: PortType::Afxdp,
                    path: PathBuf::new(),
                    queues: u.queues.unwrap_or(0),
                    vlan: u.vlan,
                    offloads: false,
                    iface: u.iface,
                    mode: u.mode,
                },
            ));
        }
        let mut taps: Vec<(String, TapConfig)> = file
            .tap
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("tap[{i}]"), t.clone()))
            .collect();
        for s in &args.tap {
            taps.push((format!("--tap {s:?}"), parse_tap_spec(s)?));
        }
        for (field, t) in taps {
            check_ifname(&field, "ifname", &t.ifname)?;
            if !ifaces.insert(t.ifname.clone()) {
                return Err(invalid(
                    &field,
                    format!("interface {:?} is already used by another port", t.ifname),
                ));
            }
            ports.push((
                field,
                PortConfig {
                    name: t.name,
                    kind: PortType::Tap,
                    path: PathBuf::new(),
                    queues: 1,
                    vlan: t.vlan,
                    offloads: false,
                    iface: t.ifname,
                    mode: AfXdpRequest::Auto,
                },
            ));
        }
        if let Some((field, _)) = ports.get(MAX_PORTS) {
            return Err(invalid(
                field,
                format!(
                    "too many ports: at most {MAX_PORTS} (vhost-user, AF_XDP and tap together)"
                ),
            ));
        }
        let mut names = HashSet::new();
        let mut paths = HashSet::new();
        for (field, p) in &ports {
            if p.name.is_empty()
                || p.name.len() > 32
                || !p
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(invalid(
                    field,
                    format!(
                        "port name {:?}: expected 1..=32 characters of A-Z a-z 0-9 - _ .",
                        p.name
                    ),
                ));
            }
            if !names.insert(p.name.clone()) {
                return Err(invalid(field, format!("duplicate port name {:?}", p.name)));
            }
            if p.kind.is_vhost() && !paths.insert(p.path.clone()) {
                return Err(invalid(
                    field,
                    format!(
                        "socket {} is already used by another port",
                        p.path.display()
                    ),
                ));
            }
            if p.kind.is_vhost() && (p.queues == 0 || p.queues > MAX_QUEUE_PAIRS) {
                return Err(invalid(
                    field,
                    format!("queues={}: expected 1..={MAX_QUEUE_PAIRS}", p.queues),
                ));
            }
            if let Some(v) = p.vlan {
                if !(1..=4094).contains(&v) {
                    return Err(invalid(field, format!("vlan={v}: expected 1..=4094")));
                }
            }
            if p.kind.is_vhost() {
                check_socket_dir(field, &p.path)?;
            }
        }
        let ports: Vec<PortConfig> = ports.into_iter().map(|(_, p)| p).collect();

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
            let rule: crate::model::acl::AclRule = rule
                .parse()
                .map_err(|e: crate::model::acl::AclError| invalid(&field, e.to_string()))?;
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

        Ok(Config {
            acl: acl.into_iter().map(|(_, p, r)| (p, r)).collect(),
            flow_cache: args
                .flow_cache
                .map(|v| v == OnOff::On)
                .or(file.flow_cache)
                .unwrap_or(true),
            emc_insert_inv_prob,
            metrics: args.metrics.or(file.metrics),
            ports,
            pmd_cpus,
            poll: args.poll.or(file.poll).unwrap_or_default(),
            control,
            fdb_aging_secs: args
                .fdb_aging
                .or(file.fdb_aging_secs)
                .unwrap_or(DEFAULT_FDB_AGING_SECS),
            fdb_static,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        let mut all = vec!["vswitchd"];
        all.extend_from_slice(v);
        Args::parse_from(all)
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
        ] {
            let _ = &d;
            let e = Config::try_from(args(&["--vhost-user", spec])).unwrap_err();
            assert!(e.to_string().contains(want), "{spec}: {e}");
        }
    }
}
