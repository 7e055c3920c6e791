//! Geneve tunnel endpoints (`--geneve`, `[[geneve]]`) and per-VNI flood lists
//! (`[[vni]]`): the overlay's configuration (DESIGN.md §6).

use std::collections::HashSet;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::port::{on_off, PortConfig, MAX_VNI};
use super::{invalid, ConfigError, PortType};

/// A local tunnel endpoint as the file writes it (`[[geneve]]`), the same as `--geneve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneveConfig {
    /// Its name, unique among ports and tunnel endpoints.
    pub name: String,
    /// The local address (IPv4 or IPv6): one the host kernel has on the uplink's
    /// interface.
    pub local: IpAddr,
    /// The AF_XDP uplink port (`--uplink`) it sends and receives through.
    pub uplink: String,
    /// The tap port (`--tap`, an OVS internal port) that holds `local`, when the uplink's
    /// own interface does not: Open vSwitch's userspace layout, the NIC a port of
    /// `br-phy` and the address on `br-phy`'s internal port. The uplink then stays a
    /// switch port: its frames to `local`'s Geneve port are decapsulated, all others
    /// switched (the kernel's ARP for `local` goes through the tap), and the paths to
    /// remotes are the kernel's routes and neighbours through this interface.
    /// Absent: the uplink's interface holds `local`, and the uplink is the underlay
    /// only (its XDP program passes non-Geneve frames to the kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Remote endpoints every VNI floods to (static flood-and-learn), unless `[[vni]]`
    /// gives a VNI its own list.
    #[serde(default)]
    pub remotes: Vec<IpAddr>,
    /// UDP destination port (RFC 8926 §3.3: 6081).
    #[serde(default = "geneve_port")]
    pub port: u16,
    /// Outer UDP checksum; absent: off over IPv4 (RFC 8926 §3.3 allows zero), on over
    /// IPv6 (RFC 8200 §8.1, RFC 6935).
    #[serde(default)]
    pub csum: Option<bool>,
    /// Options added to every frame sent, `CLASS:TYPE:HEX` (e.g. `0x0102:0x80:deadbeef`;
    /// data a multiple of 4 bytes).
    #[serde(default)]
    pub options: Vec<String>,
    /// Set when vswitchd is an OVN chassis (not a file key): frames of OVN logical
    /// switches carry OVN's 8-byte option, counted in [`GeneveConfig::overhead`].
    #[serde(skip)]
    pub ovn: bool,
}

fn geneve_port() -> u16 {
    geneve::wire::UDP_PORT
}

impl GeneveConfig {
    /// Whether the outer UDP checksum is computed.
    pub fn udp_checksum(&self) -> bool {
        self.csum.unwrap_or(self.local.is_ipv6())
    }

    /// The outer overhead in bytes: Ethernet 14, IPv4 20 or IPv6 40, UDP 8, Geneve 8 and
    /// its options.
    pub fn overhead(&self) -> usize {
        let ip = if self.local.is_ipv4() { 20 } else { 40 };
        let opts: usize = self
            .options
            .iter()
            .filter_map(|o| parse_option(o).ok())
            .map(|o| 4 + o.2.len())
            .sum();
        let ovn = if self.ovn {
            super::ovn::OPTION_BYTES
        } else {
            0
        };
        14 + ip + 8 + 8 + opts + ovn
    }
}

/// A VNI's own flood list (`[[vni]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VniConfig {
    /// The VNI.
    pub id: u32,
    /// Remote endpoints its broadcast, multicast and unknown unicast go to.
    #[serde(default)]
    pub remotes: Vec<IpAddr>,
}

/// Parses `CLASS:TYPE:HEX` into (class, type, data).
///
/// # Errors
/// A malformed field, data not a multiple of 4 bytes or longer than 124.
pub fn parse_option(s: &str) -> Result<(u16, u8, Vec<u8>), String> {
    let expected = || format!("{s:?}: expected CLASS:TYPE:HEX, e.g. 0x0102:0x80:deadbeef");
    let mut it = s.split(':');
    let (Some(c), Some(t), Some(d), None) = (it.next(), it.next(), it.next(), it.next()) else {
        return Err(expected());
    };
    let num = |x: &str, max: u32| -> Result<u32, String> {
        let v = match x.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16),
            None => x.parse(),
        }
        .map_err(|_| expected())?;
        (v <= max).then_some(v).ok_or_else(expected)
    };
    let class = num(c, 0xffff)? as u16;
    let typ = num(t, 0xff)? as u8;
    if !d.len().is_multiple_of(2) || !d.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(expected());
    }
    let data: Vec<u8> = (0..d.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&d[i..i + 2], 16).expect("hex digits checked"))
        .collect();
    if !data.len().is_multiple_of(4) || data.len() > 124 {
        return Err(format!(
            "{s:?}: option data is {} bytes; expected a multiple of 4, at most 124",
            data.len()
        ));
    }
    Ok((class, typ, data))
}

/// Parses `NAME=LOCAL_IP,uplink=UPLINK[,device=TAP][,remote=IP+IP+…][,port=6081]
/// [,csum=on|off][,opt=CLASS:TYPE:HEX]` (`--geneve`, `vswitchctl add-port --geneve`).
///
/// # Errors
/// A malformed spec; the message names the flag.
pub fn parse_geneve_spec(spec: &str) -> Result<GeneveConfig, ConfigError> {
    let field = format!("--geneve {spec:?}");
    let expected = "expected NAME=LOCAL_IP,uplink=UPLINK[,device=TAP][,remote=IP+IP...][,port=6081][,csum=on|off][,opt=CLASS:TYPE:HEX]";
    let (name, rest) = spec
        .split_once('=')
        .ok_or_else(|| invalid(&field, expected))?;
    let mut parts = rest.split(',');
    let local = parts.next().unwrap_or_default();
    let local: IpAddr = local.parse().map_err(|_| {
        invalid(
            &field,
            format!("{local:?} is not an IPv4 or IPv6 address; {expected}"),
        )
    })?;
    let mut g = GeneveConfig {
        name: name.to_string(),
        local,
        uplink: String::new(),
        device: None,
        remotes: Vec::new(),
        port: geneve_port(),
        csum: None,
        options: Vec::new(),
        ovn: false,
    };
    for opt in parts {
        let (k, v) = opt
            .split_once('=')
            .ok_or_else(|| invalid(&field, format!("option {opt:?}: expected KEY=VALUE")))?;
        match k {
            "uplink" => g.uplink = v.to_string(),
            "device" => g.device = Some(v.to_string()),
            "remote" => {
                for r in v.split('+') {
                    g.remotes.push(
                        r.parse().map_err(|_| {
                            invalid(&field, format!("remote={r}: not an IP address"))
                        })?,
                    );
                }
            }
            "port" => {
                g.port = v
                    .parse()
                    .map_err(|_| invalid(&field, format!("port={v}: expected a UDP port")))?
            }
            "csum" => g.csum = Some(on_off(&field, k, v)?),
            "opt" => g.options.push(v.to_string()),
            _ => return Err(invalid(&field, format!("unknown option {k:?}; {expected}"))),
        }
    }
    if g.uplink.is_empty() {
        return Err(invalid(&field, format!("uplink= missing; {expected}")));
    }
    Ok(g)
}

/// Checks the tunnel endpoints and VNI lists against the ports: names unique (also
/// against ports), each on an `--uplink` port that is not itself in a domain, at most
/// one endpoint per address family on an uplink, remotes of the local address's family,
/// options well formed, VNIs in range and listed once.
///
/// # Errors
/// The first endpoint or VNI that fails, named by its field.
pub fn validate_tunnels(
    teps: &[(String, GeneveConfig)],
    vnis: &[(String, VniConfig)],
    ports: &[PortConfig],
) -> Result<(), ConfigError> {
    let mut names: HashSet<&str> = ports.iter().map(|p| p.name.as_str()).collect();
    let mut on_uplink = HashSet::new();
    for (field, g) in teps {
        if !names.insert(&g.name) {
            return Err(invalid(
                field,
                format!(
                    "duplicate name {:?} (ports and tunnel endpoints share names)",
                    g.name
                ),
            ));
        }
        let Some(u) = ports.iter().find(|p| p.name == g.uplink) else {
            return Err(invalid(
                field,
                format!(
                    "uplink={}: no uplink port of that name (--uplink)",
                    g.uplink
                ),
            ));
        };
        if u.kind != PortType::Afxdp {
            return Err(invalid(
                field,
                format!(
                    "uplink={}: port {:?} is not an AF_XDP uplink",
                    g.uplink, u.name
                ),
            ));
        }
        if u.vlan.is_some() || u.vni.is_some() {
            return Err(invalid(field, format!("uplink={}: an uplink that carries tunnels is the underlay; it cannot have vlan= or vni=", g.uplink)));
        }
        if let Some(d) = &g.device {
            check_device(field, d, u, ports)?;
        }
        if !on_uplink.insert((g.uplink.clone(), g.local.is_ipv4())) {
            return Err(invalid(
                field,
                format!(
                    "uplink={}: already carries an {} tunnel endpoint",
                    g.uplink,
                    if g.local.is_ipv4() { "IPv4" } else { "IPv6" }
                ),
            ));
        }
        if g.local.is_unspecified() || g.local.is_multicast() {
            return Err(invalid(
                field,
                format!("{}: expected a unicast local address", g.local),
            ));
        }
        for r in &g.remotes {
            if r.is_ipv4() != g.local.is_ipv4() || r.is_unspecified() || r.is_multicast() {
                return Err(invalid(
                    field,
                    format!(
                        "remote={r}: expected a unicast address of the local address's family ({})",
                        g.local
                    ),
                ));
            }
        }
        if g.port == 0 {
            return Err(invalid(field, "port=0: expected a UDP port 1..=65535"));
        }
        for o in &g.options {
            parse_option(o).map_err(|e| invalid(field, format!("opt={e}")))?;
        }
    }
    let mut ids = HashSet::new();
    for (field, v) in vnis {
        if v.id > MAX_VNI {
            return Err(invalid(
                field,
                format!("id={}: expected 0..={MAX_VNI}", v.id),
            ));
        }
        if !ids.insert(v.id) {
            return Err(invalid(field, format!("vni {} is listed twice", v.id)));
        }
        for r in &v.remotes {
            if !teps.iter().any(|(_, g)| g.local.is_ipv4() == r.is_ipv4()) {
                return Err(invalid(
                    field,
                    format!("remote {r}: no tunnel endpoint of its address family"),
                ));
            }
        }
    }
    if teps.is_empty() {
        if let Some(p) = ports.iter().find(|p| p.vni.is_some()) {
            return Err(invalid(
                format!("port {:?}", p.name),
                "vni= needs a Geneve tunnel endpoint (--geneve NAME=LOCAL_IP,uplink=UPLINK)",
            ));
        }
    }
    Ok(())
}

/// Checks an endpoint's `device=`: a tap port in the domain of uplink `u` (one
/// bridge, untagged), so that the kernel's ARP through it reaches the uplink's network.
fn check_device(
    field: &str,
    device: &str,
    u: &PortConfig,
    ports: &[PortConfig],
) -> Result<(), ConfigError> {
    let Some(d) = ports.iter().find(|p| p.name == device) else {
        return Err(invalid(
            field,
            format!("device={device}: no tap port of that name (--tap, an internal port)"),
        ));
    };
    if d.kind != PortType::Tap {
        return Err(invalid(
            field,
            format!("device={device}: port {device:?} is not a tap (an internal port)"),
        ));
    }
    if d.bridge != u.bridge || d.vlan.is_some() || d.vni.is_some() {
        return Err(invalid(
            field,
            format!(
                "device={device}: the tap must be untagged on the bridge of the uplink {}, \
                 whose network the kernel reaches through it",
                u.name
            ),
        ));
    }
    Ok(())
}

/// The interface that holds endpoint `g`'s address: its `device`'s, else its uplink's
/// (None when the port is not configured).
pub fn address_iface<'a>(g: &GeneveConfig, ports: &'a [PortConfig]) -> Option<&'a str> {
    let name = g.device.as_deref().unwrap_or(&g.uplink);
    ports
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.iface.as_str())
}

/// The MTU of network interface `iface` (sysfs), if it exists.
pub fn iface_mtu(iface: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The inner MTU the overlay carries: the smallest of every endpoint's uplink MTU
/// minus its overhead (None without endpoints, or when an uplink's MTU cannot be read).
pub fn inner_mtu(config: &super::Config) -> Option<u32> {
    config
        .geneve
        .iter()
        .map(|g| {
            let iface = &config.ports.iter().find(|p| p.name == g.uplink)?.iface;
            Some(iface_mtu(iface)?.saturating_sub(g.overhead() as u32))
        })
        .collect::<Option<Vec<u32>>>()?
        .into_iter()
        .min()
}

/// Checks the overlay against the host: each endpoint's address is on its uplink's
/// interface, or its `device`'s once that exists (the kernel owns the underlay), and
/// every port on a VNI fits the
/// underlay: its `mtu=` (or the overlay's inner MTU) plus the tunnel overhead at most
/// the uplink's MTU.
///
/// # Errors
/// What does not fit, with the numbers, or the missing address.
pub fn check_host(config: &super::Config) -> Result<(), String> {
    for g in &config.geneve {
        let Some(u) = config.ports.iter().find(|p| p.name == g.uplink) else {
            continue;
        };
        let holder = address_iface(g, &config.ports).unwrap_or(&u.iface);
        // A tap vswitchd has yet to create gets its address afterwards, as OVS's
        // guide adds it to br-phy after `add-br`.
        let created_later = g.device.is_some() && iface_mtu(holder).is_none();
        if !created_later && !iface_has_addr(holder, g.local) {
            let whose = match &g.device {
                Some(d) => format!("the tap {d}"),
                None => format!("the uplink {}", u.name),
            };
            return Err(format!(
                "tunnel endpoint {}: {} is not an address of {holder} ({whose}); add it with `ip addr add {}/PREFIX dev {holder}`",
                g.name, g.local, g.local
            ));
        }
        let Some(mtu) = iface_mtu(&u.iface) else {
            return Err(format!(
                "tunnel endpoint {}: cannot read the MTU of {}",
                g.name, u.iface
            ));
        };
        let over = g.overhead() as u32;
        let room = mtu.saturating_sub(over);
        if room < 576 {
            return Err(format!(
                "tunnel endpoint {}: {}'s MTU {mtu} leaves {room} bytes for the overlay after {over} bytes of Geneve overhead; raise the underlay's MTU (1700 or 9000 recommended)",
                g.name, u.iface
            ));
        }
        for p in config.ports.iter().filter(|p| p.vni.is_some()) {
            if let Some(m) = p.mtu {
                if u32::from(m) + over > mtu {
                    return Err(format!(
                        "port {}: mtu={m} + {over} bytes of Geneve overhead ({} over {}) = {} > {}'s MTU {mtu}; lower mtu= to {room} or raise the underlay's MTU (1700 or 9000 recommended)",
                        p.name,
                        g.name,
                        if g.local.is_ipv4() { "IPv4" } else { "IPv6" },
                        u32::from(m) + over,
                        u.iface
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Whether interface `iface` has address `ip` (getifaddrs(3)).
pub fn iface_has_addr(iface: &str, ip: IpAddr) -> bool {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return false;
    }
    let mut found = false;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if name.to_bytes() != iface.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr points at a sockaddr whose family says which struct it is.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        let addr = match family {
            libc::AF_INET => {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let a = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in>() };
                IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes())
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let a = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in6>() };
                IpAddr::from(a.sin6_addr.s6_addr)
            }
            _ => continue,
        };
        if addr == ip {
            found = true;
            break;
        }
    }
    // SAFETY: frees the list getifaddrs allocated, once.
    unsafe { libc::freeifaddrs(head) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geneve_specs() {
        let g = parse_geneve_spec("t1=198.51.100.1,uplink=up0,remote=198.51.100.2+198.51.100.3,csum=on,opt=0x0102:0x80:deadbeef").unwrap();
        assert_eq!(g.local, "198.51.100.1".parse::<IpAddr>().unwrap());
        assert_eq!(g.remotes.len(), 2);
        assert!(g.udp_checksum());
        assert_eq!(g.overhead(), 50 + 8);
        let g6 = parse_geneve_spec("t6=2001:db8::1,uplink=up0").unwrap();
        assert!(g6.udp_checksum(), "on by default over IPv6");
        assert_eq!(g6.overhead(), 70);
        for (spec, want) in [
            ("t1=1.2.3.4", "uplink= missing"),
            ("t1=nope,uplink=u", "not an IPv4 or IPv6 address"),
            ("t1=1.2.3.4,uplink=u,remote=x", "remote=x"),
            ("t1=1.2.3.4,uplink=u,csum=maybe", "expected on or off"),
            ("t1=1.2.3.4,uplink=u,color=red", "unknown option"),
        ] {
            let e = parse_geneve_spec(spec).unwrap_err().to_string();
            assert!(e.contains("--geneve") && e.contains(want), "{spec}: {e}");
        }
    }

    #[test]
    fn a_device_must_be_an_untagged_tap_beside_the_uplink() {
        let ports = |tap: PortConfig| {
            vec![
                PortConfig::new(PortType::Afxdp, "up0", "eth1"),
                tap,
                PortConfig::new(PortType::VhostUser, "vm0", "/tmp/vm0.sock"),
            ]
        };
        let tap = PortConfig::new(PortType::Tap, "br-phy", "br-phy");
        let check = |spec: &str, ports: &[PortConfig]| {
            let g = parse_geneve_spec(spec).unwrap();
            validate_tunnels(&[("--geneve".into(), g)], &[], ports).map_err(|e| e.to_string())
        };
        let ok = "t=198.51.100.1,uplink=up0,device=br-phy";
        assert_eq!(
            parse_geneve_spec(ok).unwrap().device.as_deref(),
            Some("br-phy")
        );
        check(ok, &ports(tap.clone())).unwrap();
        let e = check("t=198.51.100.1,uplink=up0,device=nope", &ports(tap.clone()));
        assert!(e.unwrap_err().contains("device=nope: no tap port"));
        let e = check("t=198.51.100.1,uplink=up0,device=vm0", &ports(tap.clone()));
        assert!(e.unwrap_err().contains("is not a tap"));
        let tagged = PortConfig {
            vlan: Some(10),
            ..tap.clone()
        };
        let e = check(ok, &ports(tagged)).unwrap_err();
        assert!(
            e.contains("untagged on the bridge of the uplink up0"),
            "{e}"
        );
        let elsewhere = PortConfig {
            bridge: Some(2),
            ..tap
        };
        assert!(check(ok, &ports(elsewhere)).is_err());
    }

    #[test]
    fn options_parse_and_are_checked() {
        assert_eq!(
            parse_option("0x0102:0x80:deadbeef").unwrap(),
            (0x0102, 0x80, vec![0xde, 0xad, 0xbe, 0xef])
        );
        assert!(parse_option("258:1:00112233").is_ok());
        assert!(parse_option("0x0102:0x80:dead")
            .unwrap_err()
            .contains("multiple of 4"));
        assert!(parse_option("0x10000:1:00000000").is_err());
        assert!(parse_option("1:1").is_err());
    }
}
