//! Joining an OVN deployment (`--ovn-remote`, `--chassis`): the Southbound database to
//! read, the chassis name to register, and what the operator accepts (DESIGN.md §7).

use serde::Serialize;

use super::{invalid, ConfigError, GeneveConfig, PortConfig};

/// Bytes OVN's Geneve option (class 0x0102, type 0x80; ovn-architecture(7), "Tunnel
/// Encapsulations") adds to every tunnelled frame: its 4-byte header and 4 bytes of
/// data. With it the Geneve overhead over IPv4 is 58 bytes (14 + 20 + 8 + 8 + 8).
pub const OPTION_BYTES: usize = 8;

/// vswitchd as an OVN chassis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OvnConfig {
    /// The Southbound database: one remote, or the members of a clustered database
    /// (`unix:PATH`, `tcp:IP:PORT`), tried in turn.
    pub remotes: Vec<String>,
    /// The chassis name (`Chassis.name`; OVS's `external_ids:system-id`).
    pub chassis: String,
    /// The host name registered (`Chassis.hostname`).
    pub hostname: String,
    /// Provider networks: which uplink carries each physical network a `localnet` port
    /// names (`options:network_name`), as Open vSwitch's `ovn-bridge-mappings` maps
    /// networks to bridges.
    pub bridge_mappings: Vec<BridgeMapping>,
    /// What the CMS reads of this chassis (`Chassis.other_config:ovn-cms-options`, as
    /// ovn-controller publishes Open vSwitch's `external_ids:ovn-cms-options`), e.g.
    /// `enable-chassis-as-gw`, by which Neutron schedules gateway routers. Not read by
    /// vswitchd itself; empty when unset.
    pub cms_options: String,
    /// The Southbound connection's inactivity probe, ms; 0: none
    /// ([`probe_interval_ms`] makes it from a setting).
    pub probe_interval_ms: u64,
}

/// The inactivity probe of the Southbound connection when none is set, ms
/// (ovn-controller's `DEFAULT_PROBE_INTERVAL_MSEC`).
pub const DEFAULT_PROBE_INTERVAL_MS: u64 = 5000;

/// The probe interval a setting of `ms` gives, as ovn-controller reads
/// `ovn-remote-probe-interval` (ovn-controller(8)): 0 stays 0 (no probes), other
/// values are at least 1000 ms.
pub fn probe_interval_ms(ms: u64) -> u64 {
    if ms == 0 {
        0
    } else {
        ms.max(1000)
    }
}

/// One entry of `--ovn-bridge-mappings`: physical network `network` is reached
/// through AF_XDP uplink `uplink`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BridgeMapping {
    /// The physical network's name (`Port_Binding.options:network_name`).
    pub network: String,
    /// The uplink's port name.
    pub uplink: String,
}

/// The settings [`resolve`] checks, each with the flag or key it came from.
#[derive(Debug, Clone, Copy, Default)]
pub struct OvnSettings<'a> {
    /// `--ovn-remote` / `ovn_remote`.
    pub remote: Option<(&'a str, &'a str)>,
    /// `--chassis` / `chassis`.
    pub chassis: Option<(&'a str, &'a str)>,
    /// `--ovn-bridge-mappings` / `ovn_bridge_mappings`.
    pub bridge_mappings: Option<(&'a str, &'a str)>,
    /// `--ovn-cms-options` / `ovn_cms_options`.
    pub cms_options: Option<(&'a str, &'a str)>,
    /// `--ovn-remote-probe-interval` / `ovn_remote_probe_interval`, ms.
    pub probe_interval: Option<(&'a str, u64)>,
}

/// Builds the OVN settings from the flags over the file and checks them against the
/// tunnel endpoints and ports: a chassis name, remotes that parse, an IPv4 Geneve
/// endpoint (its address is the chassis' Encap IP) with room for OVN's option, and
/// `iface_id=` only with OVN and never with `vlan=`/`vni=` (OVN decides the domain),
/// bridge mappings that name uplinks which carry no tunnel endpoint.
///
/// # Errors
/// The first setting that fails, named by its flag or key.
pub fn resolve(
    s: OvnSettings<'_>,
    teps: &[GeneveConfig],
    ports: &[(String, PortConfig)],
) -> Result<Option<OvnConfig>, ConfigError> {
    let OvnSettings {
        remote,
        chassis,
        bridge_mappings,
        cms_options,
        probe_interval,
    } = s;
    let Some((field, remote)) = remote else {
        if let Some((field, _)) = bridge_mappings {
            return Err(invalid(
                field,
                "bridge mappings are only used with --ovn-remote",
            ));
        }
        if let Some((field, _)) = cms_options {
            return Err(invalid(
                field,
                "CMS options are only used with --ovn-remote",
            ));
        }
        if let Some((field, _)) = probe_interval {
            return Err(invalid(
                field,
                "the Southbound probe interval is only used with --ovn-remote",
            ));
        }
        if let Some((field, p)) = ports.iter().find(|(_, p)| p.iface_id.is_some()) {
            return Err(invalid(
                field,
                format!(
                    "iface_id={}: a logical switch port needs an OVN Southbound database (--ovn-remote and --chassis)",
                    p.iface_id.as_deref().unwrap_or_default()
                ),
            ));
        }
        if let Some((field, _)) = chassis {
            return Err(invalid(field, "--chassis is only used with --ovn-remote"));
        }
        return Ok(None);
    };
    let mut remotes = Vec::new();
    for r in remote.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        r.parse::<ovsdb::Remote>()
            .map_err(|e| invalid(field, format!("{r}: {e}")))?;
        remotes.push(r.to_string());
    }
    if remotes.is_empty() {
        return Err(invalid(
            field,
            "expected unix:PATH or tcp:IP:PORT (several, comma-separated, for a clustered database)",
        ));
    }
    let Some((_, chassis)) = chassis.filter(|(_, c)| !c.is_empty()) else {
        return Err(invalid(
            field,
            "--chassis NAME is needed with --ovn-remote (the chassis name other chassis and ovn-northd know this host by)",
        ));
    };
    if chassis.len() > 64 || chassis.chars().any(|c| c.is_whitespace() || c == ',') {
        return Err(invalid(
            "--chassis",
            format!("{chassis:?}: expected 1..=64 characters without spaces or commas"),
        ));
    }
    if !teps.iter().any(|g| g.local.is_ipv4()) {
        return Err(invalid(
            field,
            "an OVN chassis needs an IPv4 Geneve tunnel endpoint (--geneve NAME=LOCAL_IP,uplink=UPLINK): its address is the chassis' Encap IP",
        ));
    }
    for g in teps {
        let opts: usize = g
            .options
            .iter()
            .filter_map(|o| super::geneve::parse_option(o).ok())
            .map(|o| 4 + o.2.len())
            .sum();
        if opts + OPTION_BYTES > geneve::wire::MAX_OPTIONS_LEN {
            return Err(invalid(
                format!("--geneve {}", g.name),
                "its options leave no room for OVN's 8-byte option",
            ));
        }
    }
    for (f, p) in ports {
        if p.iface_id.is_some() && (p.vlan.is_some() || p.vni.is_some()) {
            return Err(invalid(
                f,
                "iface_id= with vlan= or vni=: OVN decides an OVN port's logical switch",
            ));
        }
    }
    let bridge_mappings = match bridge_mappings {
        Some((f, m)) => parse_bridge_mappings(f, m, ports)?,
        None => Vec::new(),
    };
    Ok(Some(OvnConfig {
        remotes,
        chassis: chassis.to_string(),
        hostname: hostname(),
        bridge_mappings,
        cms_options: cms_options.map_or_else(String::new, |(_, o)| o.to_string()),
        probe_interval_ms: probe_interval_ms(
            probe_interval.map_or(DEFAULT_PROBE_INTERVAL_MS, |(_, ms)| ms),
        ),
    }))
}

/// Parses `NETWORK:UPLINK[,NETWORK:UPLINK...]` (setting `field`): each network once,
/// each uplink an `--uplink` port.
fn parse_bridge_mappings(
    field: &str,
    text: &str,
    ports: &[(String, PortConfig)],
) -> Result<Vec<BridgeMapping>, ConfigError> {
    let mut out: Vec<BridgeMapping> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((network, uplink)) = entry
            .split_once(':')
            .filter(|(n, u)| !n.is_empty() && !u.is_empty())
        else {
            return Err(invalid(
                field,
                format!("{entry:?}: expected NETWORK:UPLINK (a physical network and the --uplink port that reaches it)"),
            ));
        };
        if out.iter().any(|m| m.network == network) {
            return Err(invalid(field, format!("network {network} mapped twice")));
        }
        let is_uplink = ports
            .iter()
            .any(|(_, p)| p.name == uplink && p.kind == super::PortType::Afxdp);
        if !is_uplink {
            return Err(invalid(
                field,
                format!("{entry}: {uplink} is not an --uplink (AF_XDP) port"),
            ));
        }
        out.push(BridgeMapping {
            network: network.to_string(),
            uplink: uplink.to_string(),
        });
    }
    if out.is_empty() {
        return Err(invalid(
            field,
            "expected NETWORK:UPLINK[,NETWORK:UPLINK...]",
        ));
    }
    Ok(out)
}

impl OvnConfig {
    /// `Chassis.other_config:ovn-bridge-mappings`: `network:uplink` pairs, comma-separated.
    pub fn bridge_mappings_text(&self) -> String {
        self.bridge_mappings
            .iter()
            .map(|m| format!("{}:{}", m.network, m.uplink))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The Southbound connection's inactivity probe (`None`: never).
    pub fn inactivity_probe(&self) -> Option<std::time::Duration> {
        (self.probe_interval_ms > 0)
            .then(|| std::time::Duration::from_millis(self.probe_interval_ms))
    }

    /// The uplink mapped to physical network `network`.
    pub fn uplink_of(&self, network: &str) -> Option<&str> {
        self.bridge_mappings
            .iter()
            .find(|m| m.network == network)
            .map(|m| m.uplink.as_str())
    }
}

/// This host's name (gethostname(2)), or "localhost".
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `buf.len()` bytes into our buffer.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
