//! vswitchd as an OVN chassis configured the way ovn-controller is: from
//! `Open_vSwitch.external_ids` (ovn-controller(8), "Configuration"), instead of
//! `--ovn-remote` and `--chassis`:
//! - `ovn-remote`: the Southbound database (comma-separated for a cluster);
//! - `system-id`: the chassis name; `hostname`: its host name (default: the host's);
//! - `ovn-encap-type`: `geneve` (vswitchd carries no other);
//! - `ovn-encap-ip`: the tunnel endpoint's address, on an AF_XDP uplink of the
//!   database (an `afxdp` or `system` interface: the NIC, with the address on it, added
//!   to a bridge such as `br-phy`), or on the internal port of the NIC's bridge (OVS's
//!   userspace layout: the address on `br-phy`, the NIC a port of it);
//! - `ovn-bridge` (default `br-int`): the bridge whose interfaces'
//!   `external_ids:iface-id` name logical ports;
//! - `ovn-bridge-mappings` (`physnet1:br-ex,...`): each provider network reached
//!   through the AF_XDP uplink of its bridge (a bridge holds one uplink);
//! - `ovn-remote-probe-interval` (ms, default 5000; 0: none; at least 1000): the
//!   Southbound connection's inactivity probe;
//! - `ovn-cms-options`: published in `Chassis.other_config`.
//!
//! The chassis starts once these are complete and the uplinks run; later changes
//! apply while it runs ([`change`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use crate::config::ovn::{probe_interval_ms, BridgeMapping, OvnConfig, DEFAULT_PROBE_INTERVAL_MS};
use crate::config::{GeneveConfig, PortConfig, PortType};
use crate::control::ops::Control;

/// The name of the tunnel endpoint the chassis gets (`vswitchctl tunnels`).
pub const TEP_NAME: &str = "ovn-encap";

/// The chassis settings of `Open_vSwitch.external_ids`.
#[derive(Debug, Clone, PartialEq)]
pub struct OvnIds {
    /// `ovn-remote`, split at commas.
    pub remotes: Vec<String>,
    /// `system-id`.
    pub chassis: String,
    /// `hostname`, else the host's name.
    pub hostname: String,
    /// `ovn-encap-ip`.
    pub encap_ip: IpAddr,
    /// `ovn-bridge`, default `br-int`.
    pub bridge: String,
    /// `ovn-bridge-mappings`: (physical network, bridge).
    pub bridge_mappings: Vec<(String, String)>,
    /// `ovn-cms-options` (empty when unset).
    pub cms_options: String,
    /// `ovn-remote-probe-interval`, ms, as [`probe_interval_ms`] reads it.
    pub probe_interval_ms: u64,
}

impl OvnIds {
    /// The settings in `ids`; `None` without `ovn-remote` (no chassis wanted).
    ///
    /// # Errors
    /// A setting missing or unusable, named with its key and what was expected.
    pub fn from_external_ids(ids: &BTreeMap<String, String>) -> Option<Result<OvnIds, String>> {
        let remote = ids.get("ovn-remote")?;
        Some(Self::parse(remote, ids))
    }

    fn parse(remote: &str, ids: &BTreeMap<String, String>) -> Result<OvnIds, String> {
        let need = |k: &str| {
            ids.get(k)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("Open_vSwitch external_ids:{k} is needed with ovn-remote"))
        };
        let remotes: Vec<String> = remote.split(',').map(|r| r.trim().to_string()).collect();
        for r in &remotes {
            r.parse::<ovsdb::Remote>()
                .map_err(|e| format!("external_ids:ovn-remote={remote}: {e}"))?;
        }
        match need("ovn-encap-type")?.as_str() {
            "geneve" => {}
            t => {
                return Err(format!(
                    "external_ids:ovn-encap-type={t}: vswitchd carries geneve only"
                ))
            }
        }
        let ip = need("ovn-encap-ip")?;
        let encap_ip: IpAddr = ip
            .parse()
            .map_err(|_| format!("external_ids:ovn-encap-ip={ip}: expected an IPv4 address"))?;
        if !encap_ip.is_ipv4() {
            return Err(format!(
                "external_ids:ovn-encap-ip={ip}: expected an IPv4 address"
            ));
        }
        Ok(OvnIds {
            remotes,
            chassis: need("system-id")?.clone(),
            hostname: ids
                .get("hostname")
                .cloned()
                .unwrap_or_else(crate::config::ovn::hostname),
            encap_ip,
            bridge: ids
                .get("ovn-bridge")
                .cloned()
                .unwrap_or_else(|| "br-int".into()),
            bridge_mappings: match ids.get("ovn-bridge-mappings") {
                Some(m) => parse_mappings(m)?,
                None => Vec::new(),
            },
            cms_options: ids.get("ovn-cms-options").cloned().unwrap_or_default(),
            probe_interval_ms: match ids.get("ovn-remote-probe-interval") {
                Some(ms) => probe_interval_ms(ms.trim().parse().map_err(|_| {
                    format!(
                        "external_ids:ovn-remote-probe-interval={ms}: expected milliseconds \
                         (0: no probes)"
                    )
                })?),
                None => DEFAULT_PROBE_INTERVAL_MS,
            },
        })
    }

    /// The provider networks, each with the uplink of its bridge; `uplinks(bridge)`
    /// gives the running AF_XDP uplinks of a bridge.
    ///
    /// # Errors
    /// A bridge without an uplink (yet), or with several.
    pub fn mappings(
        &self,
        uplinks: impl Fn(&str) -> Vec<String>,
    ) -> Result<Vec<BridgeMapping>, String> {
        self.bridge_mappings
            .iter()
            .map(|(network, bridge)| match uplinks(bridge).as_slice() {
                [uplink] => Ok(BridgeMapping {
                    network: network.clone(),
                    uplink: uplink.clone(),
                }),
                [] => Err(format!(
                    "external_ids:ovn-bridge-mappings {network}:{bridge}: no AF_XDP uplink \
                     on {bridge} (yet); add the NIC of {network} to it"
                )),
                more => Err(format!(
                    "external_ids:ovn-bridge-mappings {network}:{bridge}: {bridge} has {} \
                     uplinks ({}); vswitchd reaches a network through one",
                    more.len(),
                    more.join(", ")
                )),
            })
            .collect()
    }

    /// The chassis configuration with provider networks `mappings` (`--ovn-remote`,
    /// `--chassis`, `--ovn-bridge-mappings` would give the same).
    pub fn config(&self, mappings: Vec<BridgeMapping>) -> OvnConfig {
        OvnConfig {
            remotes: self.remotes.clone(),
            chassis: self.chassis.clone(),
            hostname: self.hostname.clone(),
            bridge_mappings: mappings,
            cms_options: self.cms_options.clone(),
            probe_interval_ms: self.probe_interval_ms,
        }
    }
}

/// `NETWORK:BRIDGE[,NETWORK:BRIDGE...]`, each network once.
///
/// # Errors
/// An entry that is not `NETWORK:BRIDGE`, a network twice.
fn parse_mappings(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (n, b) = entry
            .split_once(':')
            .filter(|(n, b)| !n.is_empty() && !b.is_empty())
            .ok_or_else(|| {
                format!("external_ids:ovn-bridge-mappings {entry:?}: expected NETWORK:BRIDGE")
            })?;
        if out.iter().any(|(m, _)| m == n) {
            return Err(format!(
                "external_ids:ovn-bridge-mappings: network {n} mapped twice"
            ));
        }
        out.push((n.to_string(), b.to_string()));
    }
    Ok(out)
}

/// The chassis' tunnel endpoint at `ip` ([`tep_named`]).
///
/// # Errors
/// No port has it (yet): the message says what to add.
pub fn tep_for(ip: IpAddr, ports: &[PortConfig]) -> Result<GeneveConfig, String> {
    tep_named(TEP_NAME, ip, ports).map_err(|e| format!("external_ids:ovn-encap-ip={ip}: {e}"))
}

/// The tunnel endpoint `name` at `ip`: on the running AF_XDP uplink among `ports` whose
/// device has that address, else behind the internal port that has it, on the one
/// AF_XDP uplink of that port's bridge (OVS's userspace layout: the NIC a port of
/// `br-phy`, the address on `br-phy`'s own port).
///
/// # Errors
/// No port has the address (yet), or its bridge has no uplink or several: the message
/// says what to add.
pub fn tep_named(name: &str, ip: IpAddr, ports: &[PortConfig]) -> Result<GeneveConfig, String> {
    let has = |p: &&PortConfig| crate::config::geneve::iface_has_addr(&p.iface, ip);
    let spec = if let Some(uplink) = ports.iter().filter(|p| p.kind == PortType::Afxdp).find(has) {
        format!("{name}={ip},uplink={}", uplink.name)
    } else if let Some(tap) = ports
        .iter()
        .filter(|p| p.kind == PortType::Tap && p.bridge.is_some())
        .find(has)
    {
        let uplink = bridge_uplink(tap, ports)?;
        format!("{name}={ip},uplink={uplink},device={}", tap.name)
    } else {
        return Err(format!(
            "no AF_XDP uplink or internal port has the address {ip}; add the NIC that has \
             it to a bridge (ovs-vsctl add-port br-phy NIC), or put it on the internal port \
             of the NIC's bridge (ip addr add {ip}/PREFIX dev br-phy)"
        ));
    };
    crate::config::parse_geneve_spec(&spec).map_err(|e| e.to_string())
}

/// The one AF_XDP uplink on internal port `tap`'s bridge, untagged as the tap.
///
/// # Errors
/// None, or several.
fn bridge_uplink<'a>(tap: &PortConfig, ports: &'a [PortConfig]) -> Result<&'a str, String> {
    let uplinks: Vec<&str> = ports
        .iter()
        .filter(|p| p.kind == PortType::Afxdp && p.bridge == tap.bridge && p.vlan.is_none())
        .map(|p| p.name.as_str())
        .collect();
    match uplinks.as_slice() {
        [one] => Ok(one),
        [] => Err(format!(
            "the internal port {} has it, but its bridge has no untagged AF_XDP uplink \
             (yet); add the NIC to that bridge",
            tap.name
        )),
        more => Err(format!(
            "the internal port {} has it, but its bridge has {} AF_XDP uplinks ({}); \
             vswitchd sends tunnels through one",
            tap.name,
            more.len(),
            more.join(", ")
        )),
    }
}

/// Makes the switch chassis `ids` (provider networks `mappings`) and starts the
/// chassis task (and the thread serving the logical pipeline's controller actions).
/// Returns the chassis' status, for [`change`].
///
/// # Errors
/// No uplink has the encap address, or the endpoint does not fit the host.
pub async fn start(
    ctl: &Arc<Control>,
    ids: &OvnIds,
    mappings: Vec<BridgeMapping>,
) -> Result<Arc<crate::ovn::Status>, String> {
    let tep = tep_for(ids.encap_ip, &ctl.switch.config().ports)?;
    let cfg = ids.config(mappings);
    ctl.become_chassis(cfg.clone(), tep).await?;
    let sw = ctl.switch.clone();
    std::thread::Builder::new()
        .name("slowpath".into())
        .spawn(move || crate::datapath::lflow::slow::run(sw))
        .map_err(|e| format!("cannot start thread slowpath: {e}"))?;
    let status = crate::ovn::spawn(ctl.clone(), cfg);
    let _ = ctl.ovn.set(status.clone());
    tracing::info!(chassis = %ids.chassis, encap_ip = %ids.encap_ip, "OVN chassis from the Open vSwitch database");
    Ok(status)
}

/// Puts the running chassis' new settings `to` (from `from`; provider networks
/// `mappings`) in force, as ovn-controller follows its `external_ids`: a new
/// `ovn-remote`, `system-id` or `ovn-encap-ip` re-registers the chassis (its rows
/// removed, the endpoint moved, the task started again into `status`); provider
/// networks, CMS options and the host name change in place; `ovn-bridge` needs nothing
/// here (the ports' bindings follow it).
///
/// # Errors
/// No port has the new encap address, or the endpoint does not fit the host: the
/// chassis is then stopped, and the caller tries again.
pub async fn change(
    ctl: &Arc<Control>,
    (from, to): (&OvnIds, &OvnIds),
    mappings: Vec<BridgeMapping>,
    status: &Arc<crate::ovn::Status>,
) -> Result<(), String> {
    let cfg = to.config(mappings);
    let again =
        (&from.remotes, &from.chassis, from.encap_ip) != (&to.remotes, &to.chassis, to.encap_ip);
    if !again {
        ctl.update_chassis(cfg).await;
        return Ok(());
    }
    let tep = tep_for(to.encap_ip, &ctl.switch.config().ports)?;
    ctl.rechassis(cfg.clone(), tep).await?;
    crate::ovn::spawn_with(ctl.clone(), cfg, status.clone());
    tracing::info!(chassis = %to.chassis, encap_ip = %to.encap_ip, "OVN chassis registered again with new settings");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_installation_guides_settings_make_a_chassis() {
        let i = OvnIds::from_external_ids(&ids(&[
            ("ovn-remote", "tcp:192.0.2.10:6642,tcp:192.0.2.11:6642"),
            ("ovn-encap-type", "geneve"),
            ("ovn-encap-ip", "192.0.2.21"),
            ("system-id", "hv1"),
            ("hostname", "compute-1"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(i.remotes.len(), 2);
        assert_eq!(
            (i.chassis.as_str(), i.hostname.as_str()),
            ("hv1", "compute-1")
        );
        assert_eq!(i.bridge, "br-int");
        assert_eq!(i.config(Vec::new()).chassis, "hv1");
        assert_eq!(i.probe_interval_ms, 5000);
    }

    /// `ovn-remote-probe-interval` as ovn-controller reads it: 0 is no probe, other
    /// values at least a second.
    #[test]
    fn the_probe_interval_is_read_as_ovn_controller_reads_it() {
        for (v, want) in [("0", 0), ("300", 1000), ("30000", 30000)] {
            let i = OvnIds::from_external_ids(&ids(&[
                ("ovn-remote", "tcp:192.0.2.10:6642"),
                ("ovn-encap-type", "geneve"),
                ("ovn-encap-ip", "192.0.2.21"),
                ("system-id", "hv1"),
                ("ovn-remote-probe-interval", v),
            ]))
            .unwrap()
            .unwrap();
            let cfg = i.config(Vec::new());
            assert_eq!(cfg.probe_interval_ms, want, "{v}");
            assert_eq!(
                cfg.inactivity_probe(),
                (want > 0).then(|| std::time::Duration::from_millis(want)),
                "{v}"
            );
        }
    }

    #[test]
    fn a_mapping_takes_the_one_uplink_of_its_bridge() {
        let mut m = ids(&[
            ("ovn-remote", "tcp:192.0.2.10:6642"),
            ("ovn-encap-type", "geneve"),
            ("ovn-encap-ip", "192.0.2.21"),
            ("system-id", "hv1"),
        ]);
        m.insert("ovn-bridge-mappings".into(), "physnet1:br-ex".into());
        let i = OvnIds::from_external_ids(&m).unwrap().unwrap();
        let uplinks = |n: usize| move |b: &str| (0..n).map(|k| format!("{b}-nic{k}")).collect();
        let got = i.mappings(uplinks(1)).unwrap();
        assert_eq!(
            (got[0].network.as_str(), got[0].uplink.as_str()),
            ("physnet1", "br-ex-nic0")
        );
        assert!(i
            .mappings(uplinks(0))
            .unwrap_err()
            .contains("no AF_XDP uplink on br-ex"));
        assert!(i
            .mappings(uplinks(2))
            .unwrap_err()
            .contains("has 2 uplinks"));
    }

    /// The loopback interface has 127.0.0.1: an internal port on it holds the address.
    #[test]
    fn an_address_on_an_internal_port_puts_the_endpoint_behind_it_on_its_bridges_nic() {
        let on = |kind, name: &str, iface: &str, bridge| PortConfig {
            bridge: Some(bridge),
            ..PortConfig::new(kind, name, iface)
        };
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut ports = vec![
            on(PortType::Tap, "br-phy", "lo", 1),
            on(PortType::Afxdp, "eth1", "vsnonexistent1", 1),
            on(PortType::Afxdp, "eth2", "vsnonexistent2", 2),
        ];
        let g = tep_named("t", ip, &ports).unwrap();
        assert_eq!(
            (g.uplink.as_str(), g.device.as_deref()),
            ("eth1", Some("br-phy"))
        );
        ports[1].bridge = Some(2);
        let e = tep_named("t", ip, &ports).unwrap_err();
        assert!(e.contains("no untagged AF_XDP uplink"), "{e}");
        ports.push(on(PortType::Afxdp, "eth3", "vsnonexistent3", 1));
        ports.push(on(PortType::Afxdp, "eth4", "vsnonexistent4", 1));
        let e = tep_named("t", ip, &ports).unwrap_err();
        assert!(e.contains("2 AF_XDP uplinks (eth3, eth4)"), "{e}");
        let e = tep_named("t", "192.0.2.254".parse().unwrap(), &ports).unwrap_err();
        assert!(
            e.contains("ip addr add 192.0.2.254/PREFIX dev br-phy"),
            "{e}"
        );
    }

    #[test]
    fn no_remote_no_chassis_and_bad_settings_are_named() {
        assert!(OvnIds::from_external_ids(&ids(&[("system-id", "hv1")])).is_none());
        let base = [
            ("ovn-remote", "tcp:192.0.2.10:6642"),
            ("ovn-encap-type", "geneve"),
            ("ovn-encap-ip", "192.0.2.21"),
            ("system-id", "hv1"),
        ];
        for (k, v, want) in [
            ("ovn-encap-type", "vxlan", "geneve only"),
            ("ovn-encap-ip", "2001:db8::1", "IPv4"),
            ("system-id", "", "system-id is needed"),
            ("ovn-remote", "udp:1.2.3.4", "ovn-remote=udp"),
            ("ovn-bridge-mappings", "physnet1", "expected NETWORK:BRIDGE"),
            ("ovn-bridge-mappings", "p:br-a,p:br-b", "mapped twice"),
            ("ovn-remote-probe-interval", "5s", "expected milliseconds"),
        ] {
            let mut m = ids(&base);
            m.insert(k.into(), v.into());
            let e = OvnIds::from_external_ids(&m).unwrap().unwrap_err();
            assert!(e.contains(want), "{k}={v}: {e}");
        }
    }
}
