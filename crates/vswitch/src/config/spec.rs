//! Port specs: `NAME=PATH[,…]`, `NAME=IFACE[,…]`, `NAME=IFNAME[,…]`, as vswitchd's
//! flags and `vswitchctl add-port` write them, and the checks every set of ports passes
//! (names, sockets and interfaces unique, values in range).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::file::{TapConfig, UplinkConfig};
use super::{invalid, AfXdpRequest, ConfigError, MacAddr, PortType, MAX_PORTS, MAX_QUEUE_PAIRS};

/// Largest number of AF_XDP queues (sockets) an uplink may open.
pub const MAX_UPLINK_QUEUES: u16 = 64;

/// Largest Geneve VNI (24 bits, RFC 8926 §3.4).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// The flag a port spec is written for: the same in `vswitchd` and `vswitchctl add-port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortFlag {
    /// `--vhost-user NAME=PATH[,queues=N][,vlan=V][,offloads=on|off]`.
    VhostUser,
    /// `--vhost-user-client NAME=PATH[,queues=N][,vlan=V][,offloads=on|off]`.
    VhostUserClient,
    /// `--uplink NAME=IFACE[,mode=M][,queues=N][,vlan=V]`.
    Uplink,
    /// `--tap NAME=IFNAME[,vlan=V]`.
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
}

/// Parses one port spec written for `flag`; returns the field to name in errors (the
/// flag and the spec) and the port.
///
/// # Errors
/// The spec is malformed or a value is out of range; the message names the flag.
pub fn parse_port(flag: PortFlag, spec: &str) -> Result<(String, PortConfig), ConfigError> {
    let field = format!("{} {spec:?}", flag.flag());
    let port = match flag {
        PortFlag::VhostUser => parse_port_spec(flag.flag(), spec, PortType::VhostUser)?,
        PortFlag::VhostUserClient => parse_port_spec(flag.flag(), spec, PortType::VhostUserClient)?,
        PortFlag::Uplink => uplink_port(&field, parse_uplink_spec(spec)?)?,
        PortFlag::Tap => tap_port(&field, parse_tap_spec(spec)?)?,
        PortFlag::Geneve => {
            return Err(invalid(
                &field,
                "a tunnel endpoint is not a port (config::parse_geneve_spec parses it)",
            ))
        }
    };
    Ok((field, port))
}

/// An `[[uplink]]` (or `--uplink`) as a port, its interface name and queues checked.
pub fn uplink_port(field: &str, u: UplinkConfig) -> Result<PortConfig, ConfigError> {
    check_ifname(field, "iface", &u.iface)?;
    if let Some(q) = u.queues {
        if q == 0 || q > MAX_UPLINK_QUEUES {
            return Err(invalid(
                field,
                format!("queues={q}: expected 1..={MAX_UPLINK_QUEUES}"),
            ));
        }
    }
    Ok(PortConfig {
        name: u.name,
        kind: PortType::Afxdp,
        path: PathBuf::new(),
        queues: u.queues.unwrap_or(0),
        vlan: u.vlan,
        vni: u.vni,
        mtu: u.mtu,
        offloads: false,
        iface: u.iface,
        mode: u.mode,
        mac: u.mac,
        allowed_macs: u.allowed_macs,
        max_macs: u.max_macs,
    })
}

/// A `[[tap]]` (or `--tap`) as a port, its interface name checked.
pub fn tap_port(field: &str, t: TapConfig) -> Result<PortConfig, ConfigError> {
    check_ifname(field, "ifname", &t.ifname)?;
    Ok(PortConfig {
        name: t.name,
        kind: PortType::Tap,
        path: PathBuf::new(),
        queues: 1,
        vlan: t.vlan,
        vni: t.vni,
        mtu: t.mtu,
        offloads: false,
        iface: t.ifname,
        mode: AfXdpRequest::Auto,
        mac: t.mac,
        allowed_macs: t.allowed_macs,
        max_macs: t.max_macs,
    })
}

/// A `[[port]]` of the file: only vhost-user kinds, without an interface.
pub fn file_port(field: &str, p: &PortConfig) -> Result<(), ConfigError> {
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
    Ok(())
}

/// Checks a whole set of ports, each with the field that named it: at most
/// [`MAX_PORTS`], names well formed and unique, sockets and interfaces used once,
/// queues and VLANs in range, socket directories present.
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
    for (field, p) in ports {
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
        if !p.kind.is_vhost() && !ifaces.insert(p.iface.clone()) {
            return Err(invalid(
                field,
                format!("interface {:?} is already used by another port", p.iface),
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
        if p.kind.is_vhost() {
            check_socket_dir(field, &p.path)?;
        }
    }
    Ok(())
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
    #[serde(default = "super::file::one")]
    pub queues: u16,
    /// Access VLAN (1..=4094); untagged (VLAN 0 domain) when absent.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// Geneve VNI (0..=16777215) of the logical switch the port joins; never with `vlan`.
    #[serde(default)]
    pub vni: Option<u32>,
    /// On a VNI: the MTU of the network behind the port (bytes of IP packet). Absent:
    /// the underlay's MTU minus the tunnel overhead, offered to guests
    /// (VIRTIO_NET_F_MTU) and set on taps.
    #[serde(default)]
    pub mtu: Option<u16>,
    /// Offer checksum and TSO offloads (CSUM, GUEST_CSUM, HOST_TSO4/6, GUEST_TSO4/6,
    /// HOST_ECN, GUEST_ECN). Default true, as a Linux guest under QEMU expects.
    #[serde(default = "super::file::yes")]
    pub offloads: bool,
    /// afxdp and tap ports: the network interface (empty for vhost-user ports).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iface: String,
    /// afxdp ports: the AF_XDP mode asked for (ignored for other kinds).
    #[serde(default)]
    pub mode: AfXdpRequest,
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

impl PortConfig {
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

/// The options every port kind takes: its bridge domain (an access VLAN or a Geneve
/// VNI, never both), on a VNI the MTU of the network behind it, and its port security
/// and MAC limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortOpts {
    /// `vlan=V`.
    pub vlan: Option<u16>,
    /// `vni=N`.
    pub vni: Option<u32>,
    /// `mtu=M`.
    pub mtu: Option<u16>,
    /// `mac=MAC`.
    pub mac: Option<MacAddr>,
    /// `allowed_macs=MAC+MAC`.
    pub allowed_macs: Vec<MacAddr>,
    /// `max_macs=N`.
    pub max_macs: Option<u32>,
}

/// The options [`PortOpts`] takes, for error messages.
const PORT_OPTS: &str = "vlan=V, vni=N, mtu=M, mac=MAC, allowed_macs=MAC+MAC, max_macs=N";

impl PortOpts {
    /// Takes `k=v` if it is one of these options (`Ok(false)`: not one).
    fn take(&mut self, field: &str, k: &str, v: &str) -> Result<bool, ConfigError> {
        match k {
            "vlan" => {
                self.vlan = Some(v.parse().map_err(|_| {
                    invalid(field, format!("vlan={v}: expected a VLAN id 1..=4094"))
                })?)
            }
            "vni" => {
                self.vni =
                    Some(v.parse().map_err(|_| {
                        invalid(field, format!("vni={v}: expected a VNI 0..=16777215"))
                    })?)
            }
            "mtu" => {
                self.mtu = Some(v.parse().map_err(|_| {
                    invalid(
                        field,
                        format!("mtu={v}: expected an MTU 68..=65535 (bytes)"),
                    )
                })?)
            }
            "mac" => {
                self.mac = Some(
                    v.parse()
                        .map_err(|e: String| invalid(field, format!("mac={v}: {e}")))?,
                )
            }
            "allowed_macs" => {
                self.allowed_macs = v
                    .split('+')
                    .map(|m| {
                        m.parse()
                            .map_err(|e: String| invalid(field, format!("allowed_macs={v}: {e}")))
                    })
                    .collect::<Result<_, _>>()?
            }
            "max_macs" => {
                self.max_macs = Some(v.parse().map_err(|_| {
                    invalid(
                        field,
                        format!("max_macs={v}: expected a number of MACs >= 1"),
                    )
                })?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Puts the options into `port`.
    fn apply(self, port: &mut PortConfig) {
        (port.vlan, port.vni, port.mtu) = (self.vlan, self.vni, self.mtu);
        (port.mac, port.allowed_macs, port.max_macs) = (self.mac, self.allowed_macs, self.max_macs);
    }
}

/// A spec split: the name, the first value, and the `KEY=VALUE` options.
type SplitSpec<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);

/// Splits `NAME=FIRST,KEY=VALUE,...` into the name, the first value and the options.
fn split_spec<'a>(
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

/// Parses `NAME=PATH[,queues=N][,vlan=V|vni=N][,mtu=M][,offloads=on|off]`.
fn parse_port_spec(flag: &str, spec: &str, kind: PortType) -> Result<PortConfig, ConfigError> {
    let field = format!("{flag} {spec:?}");
    let expected = "expected NAME=PATH[,queues=N][,vlan=V|vni=N][,mtu=M][,offloads=on|off]";
    let (name, path, opts) = split_spec(&field, spec, expected)?;
    let mut port = PortConfig {
        name: name.to_string(),
        kind,
        path: PathBuf::from(path),
        queues: 1,
        vlan: None,
        vni: None,
        mtu: None,
        offloads: true,
        iface: String::new(),
        mode: AfXdpRequest::Auto,
        mac: None,
        allowed_macs: Vec::new(),
        max_macs: None,
    };
    let mut d = PortOpts::default();
    for (k, v) in opts {
        if d.take(&field, k, v)? {
            continue;
        }
        match k {
            "queues" => {
                port.queues = v.parse().map_err(|_| {
                    invalid(
                        &field,
                        format!("queues={v}: expected a number 1..={MAX_QUEUE_PAIRS}"),
                    )
                })?
            }
            "offloads" => port.offloads = on_off(&field, k, v)?,
            _ => {
                return Err(invalid(
                    &field,
                    format!(
                        "unknown option {k:?}; expected queues=N, offloads=on|off, {PORT_OPTS}"
                    ),
                ))
            }
        }
    }
    d.apply(&mut port);
    Ok(port)
}

/// `on` or `off` for option `k`.
pub(crate) fn on_off(field: &str, k: &str, v: &str) -> Result<bool, ConfigError> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(invalid(field, format!("{k}={v}: expected on or off"))),
    }
}

/// Parses `NAME=IFACE[,mode=M][,queues=N][,vlan=V|vni=N][,mtu=M]` (`--uplink`).
fn parse_uplink_spec(spec: &str) -> Result<UplinkConfig, ConfigError> {
    let field = format!("--uplink {spec:?}");
    let expected =
        "expected NAME=IFACE[,mode=auto|native|generic|zerocopy][,queues=N][,vlan=V|vni=N]";
    let (name, iface, opts) = split_spec(&field, spec, expected)?;
    let mut u = UplinkConfig {
        name: name.to_string(),
        iface: iface.to_string(),
        mode: AfXdpRequest::Auto,
        queues: None,
        vlan: None,
        vni: None,
        mtu: None,
        mac: None,
        allowed_macs: Vec::new(),
        max_macs: None,
    };
    let mut d = PortOpts::default();
    for (k, v) in opts {
        if d.take(&field, k, v)? {
            continue;
        }
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
            _ => {
                return Err(invalid(
                    &field,
                    format!("unknown option {k:?}; expected mode=M, queues=N, {PORT_OPTS}"),
                ))
            }
        }
    }
    (u.vlan, u.vni, u.mtu) = (d.vlan, d.vni, d.mtu);
    (u.mac, u.allowed_macs, u.max_macs) = (d.mac, d.allowed_macs, d.max_macs);
    Ok(u)
}

/// Parses `NAME=IFNAME[,vlan=V|vni=N][,mtu=M]` (`--tap`).
fn parse_tap_spec(spec: &str) -> Result<TapConfig, ConfigError> {
    let field = format!("--tap {spec:?}");
    let (name, ifname, opts) =
        split_spec(&field, spec, "expected NAME=IFNAME[,vlan=V|vni=N][,mtu=M]")?;
    let mut d = PortOpts::default();
    for (k, v) in opts {
        if !d.take(&field, k, v)? {
            return Err(invalid(
                &field,
                format!("unknown option {k:?}; expected {PORT_OPTS}"),
            ));
        }
    }
    Ok(TapConfig {
        name: name.to_string(),
        ifname: ifname.to_string(),
        vlan: d.vlan,
        vni: d.vni,
        mtu: d.mtu,
        mac: d.mac,
        allowed_macs: d.allowed_macs,
        max_macs: d.max_macs,
    })
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
