//! From the database's rows to the ports the switch should run (pure: no I/O, tested
//! on rows built by hand).
//!
//! Each interface of a `netdev` bridge becomes one [`PortConfig`] named as the
//! interface, or an error written to its row (`Interface.error`): the other rows still
//! apply. Mapping (ovs-vswitchd.conf.db(5)):
//! - `dpdkvhostuser`: a server-mode vhost-user port on `SOCK_DIR/NAME`, where SOCK_DIR
//!   is `Open_vSwitch.other_config:vhost-sock-dir` under the run directory, as
//!   ovs-vswitchd (a leading `/` does not escape it; `..` is refused);
//! - `dpdkvhostuserclient`: a client-mode vhost-user port on
//!   `options:vhost-server-path`;
//! - `internal`: a tap named as the interface (the bridge's own port too);
//! - `afxdp`, `system` and `""`: the existing kernel device of that name as an AF_XDP
//!   uplink (`options:xdp-mode`, `options:n_rxq`);
//! - `geneve`: a static tunnel ([`super::tunnels`]); the bridge's other ports join its
//!   VNI;
//! - `Bridge.fail_mode=secure`: its ports that are no OVN logical port forward nothing
//!   (as Open vSwitch without flows);
//! - `Port.tag`: the access VLAN, within the bridge; `mtu_request` and `mac` are checked
//!   here and set on an internal port's device once it runs (`super::apply_device`);
//!   `external_ids:iface-id`: the OVN logical port, when vswitchd is an OVN chassis;
//!   `options:n_rxq`: vhost-user queue pairs.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use ovsdb::{Replica, Uuid};

use super::schema::{Bridge, Interface, OpenVswitch, Port};
use super::tunnels::{self, Tunnel};
use crate::config::{AfXdpRequest, Native, PortConfig, PortType, TrunkConfig};

/// The interface types vswitchd runs (`Open_vSwitch.iface_types`; `""` is `system`).
pub const IFACE_TYPES: [&str; 6] = [
    "afxdp",
    "dpdkvhostuser",
    "dpdkvhostuserclient",
    "geneve",
    "internal",
    "system",
];

/// The bridge datapath types vswitchd runs (`Open_vSwitch.datapath_types`).
pub const DATAPATH_TYPES: [&str; 1] = ["netdev"];

/// Longest Linux interface name (IFNAMSIZ - 1), for internal ports.
const IFNAME_MAX: usize = 15;

/// The rows the wanted ports are derived from, by uuid.
#[derive(Debug, Clone, Default)]
pub struct Db {
    /// The `Open_vSwitch` row (none before `ovs-vsctl init` or `ovs-vswitchd` ran).
    pub root: Option<(Uuid, OpenVswitch)>,
    /// Bridges.
    pub bridges: HashMap<Uuid, Bridge>,
    /// Ports.
    pub ports: HashMap<Uuid, Port>,
    /// Interfaces.
    pub ifaces: HashMap<Uuid, Interface>,
}

impl Db {
    /// The rows of `r` (rows that do not decode are left out).
    pub fn from_replica(r: &Replica) -> Db {
        Db {
            root: r.rows::<OpenVswitch>().next(),
            bridges: r.rows::<Bridge>().collect(),
            ports: r.rows::<Port>().collect(),
            ifaces: r.rows::<Interface>().collect(),
        }
    }
}

/// What the rows ask for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Wanted {
    /// The ports, ordered by bridge name, then interface name.
    pub ports: Vec<PortConfig>,
    /// Every interface of a bridge: the bridge's name when it maps to a port of
    /// `ports`, else why it cannot (written to `Interface.error`).
    pub ifaces: BTreeMap<Uuid, Result<String, String>>,
    /// The geneve interfaces that are tunnels (also in `ifaces`, as applied).
    pub tunnels: BTreeMap<Uuid, Tunnel>,
}

/// Stable numbers for bridges by name: a bridge keeps its number (its domains) while
/// vswitchd runs, and a number is not reused for another bridge.
#[derive(Debug, Clone, Default)]
pub struct BridgeNumbers(BTreeMap<String, u16>);

impl BridgeNumbers {
    /// The number of bridge `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<u16> {
        self.0.get(name).copied()
    }

    /// Every bridge numbered so far: (name, number).
    pub fn iter(&self) -> impl Iterator<Item = (&str, u16)> {
        self.0.iter().map(|(n, &k)| (n.as_str(), k))
    }

    /// The number of bridge `name`, assigned when new; `None` when every number is
    /// taken.
    pub fn of(&mut self, name: &str) -> Option<u16> {
        if let Some(&n) = self.0.get(name) {
            return Some(n);
        }
        let n = u16::try_from(self.0.len()).ok()?;
        self.0.insert(name.to_string(), n);
        Some(n)
    }
}

/// What derivation needs besides the rows.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    /// Open vSwitch's run directory (`OVS_RUNDIR`, else `/var/run/openvswitch`).
    pub rundir: &'a Path,
    /// Where `external_ids:iface-id` names an OVN logical port.
    pub iface_ids: IfaceIds<'a>,
}

/// Where `Interface.external_ids:iface-id` names an OVN logical port (the port then
/// waits, in no domain, until the chassis binds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfaceIds<'a> {
    /// Nowhere: vswitchd is no OVN chassis (os-vif and libvirt set iface-id anyway).
    Off,
    /// On every bridge (`--ovn-remote` given as a flag).
    All,
    /// On this bridge only (`external_ids:ovn-bridge`, default `br-int`).
    Bridge(&'a str),
}

impl IfaceIds<'_> {
    /// Whether iface-id binds ports of bridge `bridge`.
    fn on(self, bridge: &str) -> bool {
        match self {
            IfaceIds::Off => false,
            IfaceIds::All => true,
            IfaceIds::Bridge(b) => b == bridge,
        }
    }
}

/// The ports `db` asks for, and why the interfaces that cannot be ports cannot.
pub fn derive(db: &Db, ctx: &Ctx<'_>, numbers: &mut BridgeNumbers) -> Wanted {
    let mut w = Wanted::default();
    let Some((_, root)) = &db.root else {
        return w;
    };
    let sock_dir = sock_dir(root, ctx.rundir);
    let mut bridges: Vec<&Bridge> = root
        .bridges
        .iter()
        .filter_map(|u| db.bridges.get(u))
        .collect();
    bridges.sort_by(|a, b| a.name.cmp(&b.name));
    let mut accepted: Vec<(String, PortConfig)> = Vec::new();
    for b in bridges {
        let number = numbers.of(&b.name);
        let vni = bridge_tunnels(db, b, &mut w);
        for (port, iface_uuid, iface) in interfaces_of(db, b) {
            if iface.kind == "geneve" {
                continue;
            }
            let cfg = bridge_ok(b)
                .and_then(|()| number.ok_or_else(|| "too many bridges".to_string()))
                .and_then(|n| {
                    let (vlan, trunk) = port_vlans(port)?;
                    let dir = sock_dir.as_ref().map_err(Clone::clone)?;
                    let mut cfg = iface_port(iface, dir, ctx.iface_ids.on(&b.name))?;
                    cfg.bridge = Some(n);
                    cfg.unbound =
                        b.fail_mode.as_deref() == Some("secure") && cfg.iface_id.is_none();
                    let plain = cfg.iface_id.is_none() && !cfg.unbound;
                    if let Some(v) = vni.filter(|_| cfg.iface_id.is_none()) {
                        if vlan.is_some() || trunk.as_ref().is_some_and(|t| !t.vlans.is_empty()) {
                            return Err(format!(
                                "port {}: tag on a bridge with geneve tunnels (VNI {v}): \
                                 a port has a VLAN or a VNI",
                                port.name
                            ));
                        }
                        cfg.vni = Some(v);
                    }
                    cfg.vlan = vlan;
                    // A logical port's VLANs are OVN's, a VNI's port has none.
                    cfg.trunk = trunk.filter(|_| plain && cfg.vni.is_none());
                    bond_ok(port)?;
                    Ok(cfg)
                })
                .and_then(|cfg| {
                    let mut all = accepted.clone();
                    all.push((format!("Interface {}", iface.name), cfg.clone()));
                    crate::config::validate_ports(&all).map_err(|e| e.to_string())?;
                    accepted = all;
                    Ok(cfg)
                });
            w.ifaces.insert(iface_uuid, cfg.map(|_| b.name.clone()));
        }
    }
    w.ports = accepted.into_iter().map(|(_, p)| p).collect();
    w
}

/// Notes the geneve interfaces of bridge `b` in `w` (tunnels, or errors); returns the
/// bridge's VNI when it has tunnels.
fn bridge_tunnels(db: &Db, b: &Bridge, w: &mut Wanted) -> Option<u32> {
    let geneve: Vec<(Uuid, &Interface)> = interfaces_of(db, b)
        .into_iter()
        .filter(|(_, _, i)| i.kind == "geneve")
        .map(|(_, u, i)| (u, i))
        .collect();
    let refused = bridge_ok(b).err();
    let (vni, tunnels) = tunnels::of_bridge(&geneve);
    for (u, t) in tunnels {
        let t = match &refused {
            Some(e) => Err(e.clone()),
            None => t,
        };
        match t {
            Ok(t) => {
                w.tunnels.insert(u, t);
                w.ifaces.insert(u, Ok(b.name.clone()));
            }
            Err(e) => {
                w.ifaces.insert(u, Err(e));
            }
        }
    }
    vni.filter(|_| refused.is_none())
}

/// The (port, interface uuid, interface) rows of bridge `b`, by interface name.
fn interfaces_of<'a>(db: &'a Db, b: &Bridge) -> Vec<(&'a Port, Uuid, &'a Interface)> {
    let mut out: Vec<_> = b
        .ports
        .iter()
        .filter_map(|u| db.ports.get(u))
        .flat_map(|p| {
            p.interfaces
                .iter()
                .filter_map(move |u| db.ifaces.get(u).map(|i| (p, *u, i)))
        })
        .collect();
    out.sort_by(|a, b| a.2.name.cmp(&b.2.name));
    out
}

/// Refuses a bridge vswitchd does not run.
fn bridge_ok(b: &Bridge) -> Result<(), String> {
    if b.datapath_type == "netdev" {
        return Ok(());
    }
    let dt = if b.datapath_type.is_empty() {
        "\"\" (system)".to_string()
    } else {
        format!("{:?}", b.datapath_type)
    };
    Err(format!(
        "bridge {}: datapath_type {dt} is the kernel's datapath; vswitchd is a userspace \
         switch: set Bridge datapath_type=netdev",
        b.name
    ))
}

/// Refuses a port of several interfaces (a bond).
fn bond_ok(p: &Port) -> Result<(), String> {
    if p.interfaces.len() > 1 {
        return Err(format!(
            "port {}: {} interfaces (a bond); vswitchd takes one interface per port",
            p.name,
            p.interfaces.len()
        ));
    }
    Ok(())
}

/// Port `p`'s VLAN configuration (vswitchd.conf.db(5), `Port` "VLAN Configuration"):
/// its access or native VLAN (`tag`), and, for a trunk, the VLANs it carries tagged.
/// Without `vlan_mode`, a port with a `tag` is an access port and one without is a
/// trunk (of `trunks`, or of every VLAN), as in Open vSwitch.
///
/// # Errors
/// A tag out of 1..=4094, a trunk VLAN out of 0..=4095, `trunks` on an access port, a
/// native mode without a tag, `dot1q-tunnel` or an unknown mode.
fn port_vlans(p: &Port) -> Result<(Option<u16>, Option<TrunkConfig>), String> {
    let tag = match p.tag {
        None | Some(0) => None,
        Some(t @ 1..=4094) => Some(t as u16),
        Some(t) => return Err(format!("port {}: tag {t}: expected 1..=4094", p.name)),
    };
    let mut vlans = Vec::with_capacity(p.trunks.len());
    for &v in &p.trunks {
        match u16::try_from(v) {
            Ok(v @ 0..=4095) => vlans.push(v),
            _ => return Err(format!("port {}: trunks {v}: expected 0..=4095", p.name)),
        }
    }
    vlans.sort_unstable();
    vlans.dedup();
    let trunk = |native| TrunkConfig { vlans, native };
    let mode = p.vlan_mode.as_deref();
    match (mode, tag) {
        (None, Some(_)) | (Some("access"), _) if !p.trunks.is_empty() => Err(format!(
            "port {}: trunks on an access port (tag without vlan_mode): set vlan_mode \
             native-tagged or native-untagged for a trunk with a native VLAN",
            p.name
        )),
        (None, Some(t)) | (Some("access"), Some(t)) => Ok((Some(t), None)),
        (Some("access"), None) => Ok((None, None)),
        (None | Some("trunk"), _) => Ok((None, Some(trunk(None)))),
        (Some("native-tagged"), Some(t)) => Ok((Some(t), Some(trunk(Some(Native::Tagged))))),
        (Some("native-untagged"), Some(t)) => Ok((Some(t), Some(trunk(Some(Native::Untagged))))),
        (Some(m @ ("native-tagged" | "native-untagged")), None) => Err(format!(
            "port {}: vlan_mode {m} needs a tag (the native VLAN)",
            p.name
        )),
        (Some(m), _) => Err(format!(
            "port {}: vlan_mode {m}: expected access, trunk, native-tagged or \
             native-untagged (dot1q-tunnel is not supported)",
            p.name
        )),
    }
}

/// Where `dpdkvhostuser` sockets go: `other_config:vhost-sock-dir` under `rundir`
/// (default: `rundir` itself), as ovs-vswitchd puts them.
///
/// # Errors
/// The directory contains `..` (ovs-vswitchd refuses it too).
pub fn sock_dir(root: &OpenVswitch, rundir: &Path) -> Result<PathBuf, String> {
    match root.other_config.get("vhost-sock-dir") {
        None => Ok(rundir.to_path_buf()),
        Some(d) if d.split('/').any(|c| c == "..") => Err(format!(
            "Open_vSwitch other_config:vhost-sock-dir={d}: \"..\" is not allowed"
        )),
        Some(d) => Ok(rundir.join(d.trim_start_matches('/'))),
    }
}

/// The port interface `i` asks for (its bridge and VLAN left to the caller).
///
/// # Errors
/// An unsupported type, a missing or bad option, a name a tap cannot have.
fn iface_port(i: &Interface, sock_dir: &Path, ovn: bool) -> Result<PortConfig, String> {
    let mut cfg = match i.kind.as_str() {
        "dpdkvhostuser" => {
            let path = sock_dir.join(&i.name);
            PortConfig::new(PortType::VhostUser, &i.name, &path.to_string_lossy())
        }
        "dpdkvhostuserclient" => {
            let path = i.options.get("vhost-server-path").ok_or(
                "type dpdkvhostuserclient needs options:vhost-server-path (the socket the VM listens on)",
            )?;
            PortConfig::new(PortType::VhostUserClient, &i.name, path)
        }
        "internal" => {
            if i.name.len() > IFNAME_MAX {
                return Err(format!(
                    "name {:?}: an internal port is a Linux interface, at most {IFNAME_MAX} characters",
                    i.name
                ));
            }
            PortConfig::new(PortType::Tap, &i.name, &i.name)
        }
        "afxdp" | "system" | "" => uplink(i)?,
        other => {
            return Err(format!(
                "type {other:?} is not supported by vswitchd (supported: {})",
                IFACE_TYPES.join(", ")
            ))
        }
    };
    if let Some(m) = i.mtu_request {
        // Applied to the device after the port runs (super::apply_device), not as the
        // port's configured MTU, which is an overlay setting.
        if !(68..=65535).contains(&m) {
            return Err(format!("mtu_request {m}: expected 68..=65535"));
        }
    }
    if let Some(m) = &i.mac {
        m.parse::<crate::config::MacAddr>()
            .map_err(|_| format!("mac {m:?}: expected xx:xx:xx:xx:xx:xx"))?;
    }
    if let Some(n) = i.options.get("n_rxq") {
        if cfg.kind.is_vhost() || cfg.kind == PortType::Afxdp {
            cfg.queues = n
                .parse()
                .map_err(|_| format!("options:n_rxq={n}: expected a number of queues"))?;
        }
    }
    if ovn {
        cfg.iface_id = i.external_ids.get("iface-id").cloned();
    }
    Ok(cfg)
}

/// Kernel device `i.name` as an AF_XDP uplink, in the mode `options:xdp-mode` asks
/// for (OVS's names: `best-effort`, the default, tries zero-copy, then native, then
/// generic; `native-with-zerocopy`, `native`, `generic` take only that mode).
///
/// # Errors
/// An unknown `xdp-mode`.
fn uplink(i: &Interface) -> Result<PortConfig, String> {
    let mut cfg = PortConfig::new(PortType::Afxdp, &i.name, &i.name);
    cfg.mode = match i.options.get("xdp-mode").map(String::as_str) {
        None | Some("best-effort") => AfXdpRequest::Auto,
        Some("native-with-zerocopy") => AfXdpRequest::ZeroCopy,
        Some("native") => AfXdpRequest::Native,
        Some("generic") => AfXdpRequest::Generic,
        Some(m) => {
            return Err(format!(
            "options:xdp-mode={m}: expected best-effort, native-with-zerocopy, native or generic"
        ))
        }
    };
    Ok(cfg)
}

/// An interface row with every column empty (for tests of this and sibling modules).
#[cfg(test)]
pub(crate) fn tests_iface(name: &str, kind: &str) -> Interface {
    tests::iface(name, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuid(n: u8) -> Uuid {
        format!("00000000-0000-0000-0000-0000000000{n:02x}")
            .parse()
            .unwrap()
    }

    pub(super) fn iface(name: &str, kind: &str) -> Interface {
        Interface {
            uuid: Uuid::default(),
            name: name.into(),
            kind: kind.into(),
            options: BTreeMap::new(),
            mtu_request: None,
            mac: None,
            external_ids: BTreeMap::new(),
            ofport_request: None,
            ofport: None,
            admin_state: None,
            link_state: None,
            mtu: None,
            mac_in_use: None,
            ifindex: None,
            statistics: BTreeMap::new(),
            status: BTreeMap::new(),
            error: None,
        }
    }

    /// One bridge `br` of `datapath_type`, one port per interface (tagged `tag`).
    fn db(datapath_type: &str, ifaces: Vec<(Interface, Option<i64>)>) -> Db {
        let mut d = Db::default();
        let mut ports = Vec::new();
        for (k, (i, tag)) in ifaces.into_iter().enumerate() {
            let (pu, iu) = (uuid(100 + k as u8), uuid(k as u8));
            d.ports.insert(
                pu,
                Port {
                    uuid: pu,
                    name: i.name.clone(),
                    interfaces: vec![iu],
                    tag,
                    trunks: Vec::new(),
                    vlan_mode: None,
                },
            );
            d.ifaces.insert(iu, i);
            ports.push(pu);
        }
        d.bridges.insert(
            uuid(200),
            Bridge {
                uuid: uuid(200),
                name: "br0".into(),
                datapath_type: datapath_type.into(),
                ports,
                fail_mode: None,
            },
        );
        let root = OpenVswitch {
            uuid: uuid(250),
            bridges: vec![uuid(200)],
            next_cfg: 1,
            cur_cfg: 0,
            other_config: [("vhost-sock-dir".to_string(), "/tmp".to_string())].into(),
            external_ids: BTreeMap::new(),
            ovs_version: None,
            system_type: None,
            iface_types: Vec::new(),
            datapath_types: Vec::new(),
        };
        d.root = Some((uuid(250), root));
        d
    }

    fn run(d: &Db) -> Wanted {
        let ctx = Ctx {
            rundir: Path::new("/"),
            iface_ids: IfaceIds::Bridge("br-int"),
        };
        derive(d, &ctx, &mut BridgeNumbers::default())
    }

    #[test]
    fn vhost_user_sockets_go_under_the_run_directory() {
        // Run directory "/", vhost-sock-dir "/tmp": /tmp, which exists (ports are
        // validated as a whole: a server socket's directory must exist).
        let mut client = iface("vm2", "dpdkvhostuserclient");
        client
            .options
            .insert("vhost-server-path".into(), "/tmp/vm2.sock".into());
        let w = run(&db(
            "netdev",
            vec![(iface("vm1", "dpdkvhostuser"), Some(10)), (client, None)],
        ));
        assert_eq!(w.ports.len(), 2, "{w:?}");
        assert_eq!(w.ports[0].path, Path::new("/tmp/vm1"));
        assert_eq!(w.ports[0].kind, PortType::VhostUser);
        assert_eq!((w.ports[0].vlan, w.ports[0].bridge), (Some(10), Some(0)));
        assert_eq!(w.ports[1].path, Path::new("/tmp/vm2.sock"));
        assert_eq!(w.ports[1].kind, PortType::VhostUserClient);
        assert!(w.ifaces.values().all(|r| r.as_deref() == Ok("br0")));
    }

    #[test]
    fn a_bad_row_is_an_error_and_the_others_still_apply() {
        let mut long = iface("a-very-long-internal-name", "internal");
        long.mtu_request = Some(1400);
        let mut tiny = iface("t2", "internal");
        tiny.mtu_request = Some(40);
        let w = run(&db(
            "netdev",
            vec![
                (iface("br0", "internal"), None),
                (iface("vm2", "dpdkvhostuserclient"), None),
                (iface("vx0", "vxlan"), None),
                (
                    Interface {
                        options: [("xdp-mode".to_string(), "turbo".to_string())].into(),
                        ..iface("eth9", "afxdp")
                    },
                    None,
                ),
                (long, None),
                (iface("t1", "internal"), Some(4095)),
                (tiny, None),
            ],
        ));
        assert_eq!(w.ports.len(), 1);
        assert_eq!(
            (w.ports[0].name.as_str(), w.ports[0].kind),
            ("br0", PortType::Tap)
        );
        let errors: Vec<String> = w.ifaces.values().filter_map(|r| r.clone().err()).collect();
        assert_eq!(errors.len(), 6, "{errors:?}");
        for want in [
            "xdp-mode=turbo",
            "mtu_request 40",
            "vhost-server-path",
            "\"vxlan\" is not supported",
            "at most 15",
            "tag 4095",
        ] {
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{want}: {errors:?}"
            );
        }
    }

    #[test]
    fn vlan_configurations_read_as_open_vswitch_reads_them() {
        let port = |tag: Option<i64>, trunks: &[i64], mode: Option<&str>| Port {
            uuid: uuid(1),
            name: "p".into(),
            interfaces: Vec::new(),
            tag,
            trunks: trunks.to_vec(),
            vlan_mode: mode.map(str::to_string),
        };
        let trunk = |vlans: &[u16], native| {
            Some(TrunkConfig {
                vlans: vlans.to_vec(),
                native,
            })
        };
        for (p, want) in [
            (port(Some(10), &[], None), (Some(10), None)),
            (port(None, &[], None), (None, trunk(&[], None))),
            (
                port(None, &[20, 10, 20], None),
                (None, trunk(&[10, 20], None)),
            ),
            (
                port(Some(5), &[10], Some("trunk")),
                (None, trunk(&[10], None)),
            ),
            (
                port(Some(5), &[10], Some("native-untagged")),
                (Some(5), trunk(&[10], Some(Native::Untagged))),
            ),
            (
                port(Some(5), &[], Some("native-tagged")),
                (Some(5), trunk(&[], Some(Native::Tagged))),
            ),
            (port(None, &[], Some("access")), (None, None)),
        ] {
            assert_eq!(port_vlans(&p).unwrap(), want, "{p:?}");
        }
        for (p, want) in [
            (port(Some(10), &[20], None), "trunks on an access port"),
            (port(None, &[4096], None), "trunks 4096"),
            (port(None, &[], Some("native-tagged")), "needs a tag"),
            (
                port(Some(3), &[], Some("dot1q-tunnel")),
                "dot1q-tunnel is not supported",
            ),
        ] {
            let e = port_vlans(&p).unwrap_err();
            assert!(e.contains(want), "{p:?}: {e}");
        }
    }

    #[test]
    fn a_system_bridge_is_refused_on_each_interface() {
        let w = run(&db("system", vec![(iface("br0", "internal"), None)]));
        assert!(w.ports.is_empty());
        let e = w.ifaces.values().next().unwrap().clone().unwrap_err();
        assert!(e.contains("datapath_type=netdev"), "{e}");
    }

    #[test]
    fn dot_dot_in_the_socket_directory_is_refused() {
        let mut d = db("netdev", vec![(iface("vm1", "dpdkvhostuser"), None)]);
        d.root
            .as_mut()
            .unwrap()
            .1
            .other_config
            .insert("vhost-sock-dir".into(), "../etc".into());
        let w = run(&d);
        assert!(w.ports.is_empty());
        assert!(w
            .ifaces
            .values()
            .next()
            .unwrap()
            .clone()
            .unwrap_err()
            .contains(".."));
    }

    #[test]
    fn a_secure_bridge_binds_only_logical_ports() {
        let mut lsp = iface("vm1", "internal");
        lsp.external_ids.insert("iface-id".into(), "lsp1".into());
        let mut d = db(
            "netdev",
            vec![(iface("br0", "internal"), None), (lsp, None)],
        );
        d.bridges.values_mut().next().unwrap().fail_mode = Some("secure".into());
        let ctx = Ctx {
            rundir: Path::new("/"),
            iface_ids: IfaceIds::Bridge("br0"),
        };
        let w = derive(&d, &ctx, &mut BridgeNumbers::default());
        let unbound: Vec<(&str, bool)> = w
            .ports
            .iter()
            .map(|p| (p.name.as_str(), p.unbound))
            .collect();
        assert_eq!(unbound, [("br0", true), ("vm1", false)]);
        assert_eq!(w.ports[1].iface_id.as_deref(), Some("lsp1"));
    }

    #[test]
    fn bridges_keep_their_numbers() {
        let mut n = BridgeNumbers::default();
        assert_eq!(
            (n.of("br1"), n.of("br0"), n.of("br1")),
            (Some(0), Some(1), Some(0))
        );
    }
}
