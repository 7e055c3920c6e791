//! Ports, one path for every source: a port is a kind, a name, its first value (the
//! socket path, interface or tap name) and `KEY=VALUE` options. `vswitchd`'s flags and
//! `vswitchctl add-port` write them as `NAME=FIRST,KEY=VALUE,...`; the TOML file writes
//! the same keys in `[[port]]`, `[[uplink]]` and `[[tap]]` tables. Both go through
//! [`PortBuilder::set`], which knows every key once: which kinds take it, how its value
//! reads, what it means. [`validate_ports`] then checks a whole set of ports.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{invalid, AfXdpRequest, ConfigError, MacAddr, PortType, MAX_PORTS, MAX_QUEUE_PAIRS};

/// Largest number of AF_XDP queues (sockets) an uplink may open.
pub const MAX_UPLINK_QUEUES: u16 = 64;

/// Largest Geneve VNI (24 bits, RFC 8926 §3.4).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// Mode of a vhost-user server socket when a group is given without a mode: owner and
/// group read and write (what QEMU needs to connect), nobody else.
pub const DEFAULT_GROUP_SOCKET_MODE: u32 = 0o660;

/// The flag a port spec is written for: the same in `vswitchd` and `vswitchctl add-port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortFlag {
    /// `--vhost-user NAME=PATH[,KEY=VALUE...]`.
    VhostUser,
    /// `--vhost-user-client NAME=PATH[,KEY=VALUE...]`.
    VhostUserClient,
    /// `--uplink NAME=IFACE[,KEY=VALUE...]`.
    Uplink,
    /// `--tap NAME=IFNAME[,KEY=VALUE...]`.
    Tap,
    /// `--geneve NAME=LOCAL_IP,uplink=UPLINK[,…]`: a tunnel endpoint (not a port, but
    /// added and deleted like one).
    Geneve,
}

impl PortFlag {
    /// The flag as written on the command line.
    pub fn flag(self) -> &'static str {
        match self {
            PortFlag::VhostUser => "--vhost-user",
            PortFlag::VhostUserClient => "--vhost-user-client",
            PortFlag::Uplink => "--uplink",
            PortFlag::Tap => "--tap",
            PortFlag::Geneve => "--geneve",
        }
    }

    /// The port kind the flag adds (`None`: a tunnel endpoint).
    fn kind(self) -> Option<PortType> {
        match self {
            PortFlag::VhostUser => Some(PortType::VhostUser),
            PortFlag::VhostUserClient => Some(PortType::VhostUserClient),
            PortFlag::Uplink => Some(PortType::Afxdp),
            PortFlag::Tap => Some(PortType::Tap),
            PortFlag::Geneve => None,
        }
    }
}

/// One port, validated on its own (see [`validate_ports`] for a set of ports).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortConfig {
    /// Port name, unique in the switch.
    pub name: String,
    /// The port kind.
    #[serde(rename = "type")]
    pub kind: PortType,
    /// vhost-user ports: the unix socket (empty for other kinds).
    pub path: PathBuf,
    /// Queue pairs (vhost-user, VIRTIO_NET_F_MQ, 1..=16); AF_XDP sockets (uplink, 0: one
    /// per rx queue of the NIC); 1 for taps.
    pub queues: u16,
    /// Access VLAN (1..=4094); untagged (VLAN 0 domain) when absent.
    pub vlan: Option<u16>,
    /// Geneve VNI (0..=16777215) of the logical switch the port joins; never with `vlan`.
    pub vni: Option<u32>,
    /// On a VNI: the MTU of the network behind the port (bytes of IP packet). Absent:
    /// the underlay's MTU minus the tunnel overhead, offered to guests
    /// (VIRTIO_NET_F_MTU) and set on taps.
    pub mtu: Option<u16>,
    /// vhost-user: offer checksum and TSO offloads (CSUM, GUEST_CSUM, HOST_TSO4/6,
    /// GUEST_TSO4/6, HOST_ECN, GUEST_ECN). Default true, as a Linux guest under QEMU
    /// expects.
    pub offloads: bool,
    /// AF_XDP and tap ports: the network interface (empty for vhost-user ports).
    pub iface: String,
    /// AF_XDP ports: the AF_XDP mode asked for (ignored for other kinds).
    pub mode: AfXdpRequest,
    /// Port security: the port's own MAC. With `allowed_macs`, the only source MACs the
    /// port's frames may carry; others are dropped as `spoofed_source` (OVS
    /// `port_security`, OpenStack allowed-address-pairs). Absent with `allowed_macs`
    /// empty: any source MAC.
    pub mac: Option<MacAddr>,
    /// Port security: further source MACs the port may send from (see `mac`).
    pub allowed_macs: Vec<MacAddr>,
    /// MACs this port may teach the FDB (default: `fdb_port_max_macs` for vhost-user and
    /// tap ports, only the global `fdb_max_macs` for uplinks).
    pub max_macs: Option<u32>,
    /// vhost-user server sockets: the group that owns the socket file (a name or a
    /// numeric id), so that a VM running as another user of that group may connect
    /// (libvirt's QEMU runs as `libvirt-qemu`). Absent: the daemon's
    /// `vhost_user_socket_group`, else the daemon's own group.
    pub socket_group: Option<String>,
    /// vhost-user server sockets: the socket file's mode (e.g. 0o660). Absent: the
    /// daemon's `vhost_user_socket_mode`, else [`DEFAULT_GROUP_SOCKET_MODE`] when a group
    /// is set, else what the umask leaves.
    pub socket_mode: Option<u32>,
    /// vhost-user and tap ports: the OVN logical switch port this port is
    /// (`Port_Binding.logical_port`; Open vSwitch's `external_ids:iface-id`).
    pub iface_id: Option<String>,
    /// The Open vSwitch database's bridge the port is on (`--ovsdb`), by the number
    /// vswitchd gave the bridge: each bridge is its own set of VLAN domains. `None`:
    /// the one switch of flag and TOML ports.
    #[serde(default)]
    pub bridge: Option<u16>,
    /// In no domain (its frames dropped as `ovn_unbound`, none delivered to it): a
    /// port of a `fail_mode=secure` database bridge that is no OVN logical port, which
    /// Open vSwitch would forward nothing for without flows.
    #[serde(default)]
    pub unbound: bool,
    /// A database port that carries VLANs tagged (Open vSwitch `Port` `trunks` and
    /// `vlan_mode`); `vlan` is then its native VLAN, if any. `None`: an access port
    /// (`vlan`), or untagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trunk: Option<TrunkConfig>,
}

/// The VLANs a trunk port carries (vswitchd.conf.db(5), `Port` "VLAN Configuration").
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TrunkConfig {
    /// The VLANs (0..=4095) carried tagged; empty: every VLAN of the bridge. A frame
    /// without a tag is in VLAN 0 (or the native VLAN).
    pub vlans: Vec<u16>,
    /// The native VLAN's mode, the port's `vlan` being that VLAN: its frames arrive
    /// untagged and leave tagged (`native-tagged`) or untagged (`native-untagged`).
    pub native: Option<Native>,
}

/// How a trunk port's native VLAN leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Native {
    /// Tagged (`vlan_mode=native-tagged`).
    Tagged,
    /// Untagged (`vlan_mode=native-untagged`).
    Untagged,
}

impl TrunkConfig {
    /// Whether the port carries VLAN `v` tagged (its list, or every VLAN).
    pub fn carries(&self, v: u16) -> bool {
        self.vlans.is_empty() || self.vlans.contains(&v)
    }
}

impl PortConfig {
    /// A port of `kind` named `name` with every option at its default; `first` is the
    /// socket path (vhost-user) or the interface (AF_XDP, tap).
    pub fn new(kind: PortType, name: &str, first: &str) -> Self {
        let (path, iface) = if kind.is_vhost() {
            (PathBuf::from(first), String::new())
        } else {
            (PathBuf::new(), first.to_string())
        };
        PortConfig {
            name: name.to_string(),
            kind,
            path,
            queues: match kind {
                PortType::Afxdp => 0,
                _ => 1,
            },
            vlan: None,
            vni: None,
            mtu: None,
            offloads: kind.is_vhost(),
            iface,
            mode: AfXdpRequest::Auto,
            mac: None,
            allowed_macs: Vec::new(),
            max_macs: None,
            socket_group: None,
            socket_mode: None,
            iface_id: None,
            bridge: None,
            unbound: false,
            trunk: None,
        }
    }

    /// Whether the port's frames cross the overlay: it is on a VNI, or it is an OVN
    /// logical switch port (its MTU is the overlay's inner MTU).
    pub fn on_overlay(&self) -> bool {
        self.vni.is_some() || self.iface_id.is_some()
    }

    /// Whether port security restricts the source MACs of the port's frames.
    pub fn has_port_security(&self) -> bool {
        self.mac.is_some() || !self.allowed_macs.is_empty()
    }

    /// Whether a frame from source MAC `mac` may enter through this port.
    #[inline]
    pub fn permits_source(&self, mac: &[u8; 6]) -> bool {
        let m = MacAddr(*mac);
        !self.has_port_security() || self.mac == Some(m) || self.allowed_macs.contains(&m)
    }
}

/// The options, each once: its key, the kinds that take it, and how its value reads.
/// A `PortBuilder` takes them one by one from a flag spec or a file table.
pub struct PortBuilder {
    field: String,
    port: PortConfig,
}

/// The options a kind of port takes, for error messages.
pub(crate) fn options_for(kind: PortType) -> String {
    let own = match kind {
        PortType::VhostUser => {
            "queues=N, offloads=on|off, socket_group=GROUP, socket_mode=MODE, iface_id=LSP"
        }
        PortType::VhostUserClient => "queues=N, offloads=on|off, iface_id=LSP",
        PortType::Afxdp => "mode=auto|native|generic|zerocopy, queues=N",
        PortType::Tap => "iface_id=LSP",
    };
    format!("{own}, vlan=V, vni=N, mtu=M, mac=MAC, allowed_macs=MAC+MAC, max_macs=N")
}

impl PortBuilder {
    /// A port of `kind` named `name` whose first value is `first`; errors name `field`.
    pub fn new(field: impl Into<String>, kind: PortType, name: &str, first: &str) -> Self {
        PortBuilder {
            field: field.into(),
            port: PortConfig::new(kind, name, first),
        }
    }

    /// Takes option `key` with value `value` (as a flag spec writes it).
    ///
    /// # Errors
    /// The key is unknown for this kind of port, or the value does not read as the key
    /// expects; the message names the field, the key and what was expected.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let kind = self.port.kind;
        let vhost = kind.is_vhost();
        let (f, p, v) = (&self.field, &mut self.port, value);
        let num = |what: &str| invalid(f, format!("{key}={v}: expected {what}"));
        match key {
            "queues" if vhost => {
                p.queues = v
                    .parse()
                    .map_err(|_| num(&format!("a number 1..={MAX_QUEUE_PAIRS}")))?
            }
            "queues" if kind == PortType::Afxdp => {
                let q: u16 = v
                    .parse()
                    .map_err(|_| num(&format!("a number 1..={MAX_UPLINK_QUEUES}")))?;
                if q == 0 || q > MAX_UPLINK_QUEUES {
                    return Err(num(&format!("1..={MAX_UPLINK_QUEUES}")));
                }
                p.queues = q;
            }
            "offloads" if vhost => p.offloads = on_off(f, key, v)?,
            "mode" if kind == PortType::Afxdp => {
                p.mode = match v {
                    "auto" => AfXdpRequest::Auto,
                    "native" => AfXdpRequest::Native,
                    "generic" => AfXdpRequest::Generic,
                    "zerocopy" | "zero-copy" => AfXdpRequest::ZeroCopy,
                    _ => return Err(num("auto, native, generic or zerocopy")),
                }
            }
            "vlan" => p.vlan = Some(v.parse().map_err(|_| num("a VLAN id 1..=4094"))?),
            "vni" => p.vni = Some(v.parse().map_err(|_| num("a VNI 0..=16777215"))?),
            "mtu" => p.mtu = Some(v.parse().map_err(|_| num("an MTU 68..=65535 (bytes)"))?),
            "mac" => {
                p.mac = Some(
                    v.parse()
                        .map_err(|e: String| invalid(f, format!("mac={v}: {e}")))?,
                )
            }
            "allowed_macs" => {
                p.allowed_macs = v
                    .split('+')
                    .map(|m| {
                        m.parse()
                            .map_err(|e: String| invalid(f, format!("allowed_macs={v}: {e}")))
                    })
                    .collect::<Result<_, _>>()?
            }
            "max_macs" => p.max_macs = Some(v.parse().map_err(|_| num("a number of MACs >= 1"))?),
            "socket_group" if kind == PortType::VhostUser => {
                p.socket_group = Some(parse_group(f, key, v)?)
            }
            "socket_mode" if kind == PortType::VhostUser => {
                p.socket_mode = Some(parse_mode(f, key, v)?)
            }
            "iface_id" if vhost || kind == PortType::Tap => {
                if v.is_empty() || v.len() > 255 || v.chars().any(|c| c.is_control()) {
                    return Err(num(
                        "a logical switch port name (1..=255 printable characters)",
                    ));
                }
                p.iface_id = Some(v.to_string())
            }
            _ => {
                let hint = match key {
                    "socket_group" | "socket_mode" if kind == PortType::VhostUserClient => {
                        "; in client mode QEMU creates the socket: give its directory to QEMU's user instead (docs/libvirt.md)"
                    }
                    _ => "",
                };
                return Err(invalid(
                    f,
                    format!(
                        "unknown option {key:?} for a {kind} port; expected {}{hint}",
                        options_for(kind)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The port, checked on its own (names, ranges and interface names; not against
    /// other ports).
    ///
    /// # Errors
    /// The interface name is malformed.
    pub fn build(self) -> Result<(String, PortConfig), ConfigError> {
        let p = self.port;
        match p.kind {
            PortType::Afxdp => check_ifname(&self.field, "iface", &p.iface)?,
            PortType::Tap => check_ifname(&self.field, "ifname", &p.iface)?,
            _ => {}
        }
        Ok((self.field, p))
    }
}

/// Reads a group name or numeric id (checked when the ports are validated).
fn parse_group(field: &str, key: &str, v: &str) -> Result<String, ConfigError> {
    if v.is_empty()
        || v.len() > 64
        || v.contains([':', '/', ','])
        || v.contains(char::is_whitespace)
    {
        return Err(invalid(
            field,
            format!("{key}={v}: expected a group name or numeric id"),
        ));
    }
    Ok(v.to_string())
}

/// Reads a file mode in octal (`660`, `0660`, `0o660`), at most 0o777.
pub(crate) fn parse_mode(field: &str, key: &str, v: &str) -> Result<u32, ConfigError> {
    let digits = v.strip_prefix("0o").unwrap_or(v);
    match u32::from_str_radix(digits, 8) {
        Ok(m) if m <= 0o777 => Ok(m),
        _ => Err(invalid(
            field,
            format!("{key}={v}: expected an octal file mode such as 0660 (at most 0777)"),
        )),
    }
}

/// Parses one port spec written for `flag` (`NAME=FIRST[,KEY=VALUE...]`); returns the
/// field to name in errors (the flag and the spec) and the port.
///
/// # Errors
/// The spec is malformed or a value is out of range; the message names the flag.
pub fn parse_port(flag: PortFlag, spec: &str) -> Result<(String, PortConfig), ConfigError> {
    let field = format!("{} {spec:?}", flag.flag());
    let Some(kind) = flag.kind() else {
        return Err(invalid(
            &field,
            "a tunnel endpoint is not a port (config::parse_geneve_spec parses it)",
        ));
    };
    let first = match kind {
        PortType::VhostUser | PortType::VhostUserClient => "PATH",
        PortType::Afxdp => "IFACE",
        PortType::Tap => "IFNAME",
    };
    let expected = format!(
        "expected NAME={first}[,KEY=VALUE...] with KEY=VALUE one of {}",
        options_for(kind)
    );
    let (name, value, opts) = split_spec(&field, spec, &expected)?;
    let mut b = PortBuilder::new(field, kind, name, value);
    for (k, v) in opts {
        b.set(k, v)?;
    }
    b.build()
}

/// Parses one port of the file: table `table` (`port`, `uplink` or `tap`) entry `i`.
/// Its keys are the flags' option keys, plus `name`, and `type` and `path` (`[[port]]`),
/// `iface` (`[[uplink]]`) or `ifname` (`[[tap]]`). Values are TOML strings, integers,
/// booleans (`offloads`) or arrays of strings (`allowed_macs`).
///
/// # Errors
/// A key is missing, unknown or of the wrong type; the message names `table[i].key`.
pub fn file_port(
    table: &str,
    i: usize,
    t: &toml::Table,
) -> Result<(String, PortConfig), ConfigError> {
    let field = format!("{table}[{i}]");
    let text = |key: &str| -> Result<&str, ConfigError> {
        match t.get(key) {
            Some(toml::Value::String(s)) => Ok(s),
            Some(_) => Err(invalid(format!("{field}.{key}"), "expected a string")),
            None => Err(invalid(&field, format!("missing key {key:?}"))),
        }
    };
    let (kind, first_key) = match table {
        "port" => {
            let kind = match text("type")? {
                "vhost-user" => PortType::VhostUser,
                "vhost-user-client" => PortType::VhostUserClient,
                other => {
                    return Err(invalid(
                        format!("{field}.type"),
                        format!("{other:?}: [[port]] is for vhost-user ports (\"vhost-user\" or \"vhost-user-client\"); use [[uplink]] or [[tap]] for the others"),
                    ))
                }
            };
            (kind, "path")
        }
        "uplink" => (PortType::Afxdp, "iface"),
        _ => (PortType::Tap, "ifname"),
    };
    let mut b = PortBuilder::new(field.clone(), kind, text("name")?, text(first_key)?);
    for (k, v) in t {
        if k == "name" || k == first_key || (table == "port" && k == "type") {
            continue;
        }
        let v = file_value(k, v).map_err(|m| invalid(format!("{field}.{k}"), m))?;
        b.set(k, &v)?;
    }
    b.build()
}

/// A file value as a flag spec writes it.
fn file_value(key: &str, v: &toml::Value) -> Result<String, String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        // A TOML integer mode is the number itself (0o660 in TOML is 432): octal digits.
        toml::Value::Integer(n) if key == "socket_mode" => format!("{n:o}"),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Boolean(b) => if *b { "on" } else { "off" }.to_string(),
        toml::Value::Array(a) => a
            .iter()
            .map(|x| match x {
                toml::Value::String(s) => Ok(s.clone()),
                _ => Err("expected an array of strings".to_string()),
            })
            .collect::<Result<Vec<_>, _>>()?
            .join("+"),
        _ => return Err("expected a string, an integer, a boolean or an array of strings".into()),
    })
}

/// A spec split: the name, the first value, and the `KEY=VALUE` options.
type SplitSpec<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);

/// Splits `NAME=FIRST,KEY=VALUE,...` into the name, the first value and the options.
pub(crate) fn split_spec<'a>(
    field: &str,
    spec: &'a str,
    expected: &str,
) -> Result<SplitSpec<'a>, ConfigError> {
    let (name, rest) = spec
        .split_once('=')
        .ok_or_else(|| invalid(field, expected.to_string()))?;
    let mut parts = rest.split(',');
    let first = parts.next().unwrap_or_default();
    let opts = parts
        .map(|opt| {
            opt.split_once('=')
                .ok_or_else(|| invalid(field, format!("option {opt:?}: expected KEY=VALUE")))
        })
        .collect::<Result<_, _>>()?;
    Ok((name, first, opts))
}

/// `on` or `off` for option `k`.
pub(crate) fn on_off(field: &str, k: &str, v: &str) -> Result<bool, ConfigError> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(invalid(field, format!("{k}={v}: expected on or off"))),
    }
}

/// Checks a whole set of ports, each with the field that named it: at most
/// [`MAX_PORTS`], names well formed and unique, sockets, interfaces and OVN logical
/// ports used once, queues, VLANs and MTUs in range, socket directories and groups
/// present.
///
/// # Errors
/// The first port that fails, named by its field.
pub fn validate_ports(ports: &[(String, PortConfig)]) -> Result<(), ConfigError> {
    if let Some((field, _)) = ports.get(MAX_PORTS) {
        return Err(invalid(
            field,
            format!("too many ports: at most {MAX_PORTS} (vhost-user, AF_XDP and tap together)"),
        ));
    }
    let mut names = HashSet::new();
    let mut paths = HashSet::new();
    let mut ifaces = HashSet::new();
    let mut lsps = HashSet::new();
    for (field, p) in ports {
        check_name(field, &p.name)?;
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
        if !p.kind.is_vhost() && !ifaces.insert(p.iface.clone()) {
            return Err(invalid(
                field,
                format!("interface {:?} is already used by another port", p.iface),
            ));
        }
        if let Some(l) = &p.iface_id {
            if !lsps.insert(l.clone()) {
                return Err(invalid(
                    field,
                    format!("iface_id={l}: another port is already that logical switch port"),
                ));
            }
        }
        check_values(field, p)?;
        if p.kind.is_vhost() {
            check_socket_dir(field, &p.path)?;
        }
        if let Some(g) = &p.socket_group {
            if crate::sys::group_id(g).is_none() {
                return Err(invalid(
                    field,
                    format!("socket_group={g}: no such group on this host"),
                ));
            }
        }
    }
    Ok(())
}

/// A port name: 1..=32 characters of `A-Z a-z 0-9 - _ .`.
fn check_name(field: &str, name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("port name {name:?}: expected 1..=32 characters of A-Z a-z 0-9 - _ ."),
        ))
    }
}

/// The ranges and combinations of one port's values.
fn check_values(field: &str, p: &PortConfig) -> Result<(), ConfigError> {
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
    if let Some(v) = p.vni {
        if v > MAX_VNI {
            return Err(invalid(field, format!("vni={v}: expected 0..={MAX_VNI}")));
        }
        if p.vlan.is_some() {
            return Err(invalid(
                field,
                "vlan= and vni= both given: a port is in one bridge domain, an access VLAN or a Geneve VNI",
            ));
        }
    }
    if let Some(m) = p.mtu {
        if p.vni.is_none() {
            return Err(invalid(
                field,
                format!("mtu={m}: only a port on a VNI has one (the overlay's inner MTU)"),
            ));
        }
        if m < 68 {
            return Err(invalid(field, format!("mtu={m}: expected 68..=65535")));
        }
    }
    for m in p.mac.iter().chain(&p.allowed_macs) {
        if m.is_multicast() {
            return Err(invalid(
                field,
                format!("port security MAC {m} is a group address; expected a unicast MAC"),
            ));
        }
    }
    if p.max_macs == Some(0) {
        return Err(invalid(field, "max_macs=0: expected a number of MACs >= 1"));
    }
    Ok(())
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

/// Checks a unix socket path: not empty, its directory exists, it fits `sun_path`.
pub fn check_socket_dir(field: &str, path: &Path) -> Result<(), ConfigError> {
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
