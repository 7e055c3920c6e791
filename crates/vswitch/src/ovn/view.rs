//! The logical view: what this chassis derives from the Southbound database and its own
//! ports, as one pure function ([`derive()`]) of its inputs, the way ovn-controller's
//! engine derives flows (STYLE.md §13). The chassis applies the result as one topology
//! change and the claims it implies as one transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use ovsdb::Uuid;
use rustc_hash::{FxHashMap, FxHashSet};

use super::sb::{Fdb, MulticastGroup, PortBinding};
use crate::config::MacAddr;
use crate::model::ovn::{MAX_PORT_KEY, MC_FLOOD};

pub use super::rows::{Sb, Touched};

/// This chassis and its ports with an `iface_id`.
#[derive(Debug, Clone)]
pub struct Local<'a> {
    /// The chassis name.
    pub name: &'a str,
    /// Its host name (`requested-chassis` may name either).
    pub hostname: &'a str,
    /// Its `Chassis` row, once registered.
    pub chassis: Option<Uuid>,
    /// The logical pipelines of the local datapaths, once built.
    pub pipelines: Option<&'a super::pipeline::Pipelines>,
    /// Local port name -> the logical switch port it is.
    pub ports: &'a BTreeMap<String, String>,
    /// Physical networks and the uplinks that reach them (`--ovn-bridge-mappings`).
    pub mappings: &'a [crate::config::ovn::BridgeMapping],
    /// Local ports that announced themselves (RARP) while their binding here awaited
    /// activation: active here from now on, as ovn-controller unblocks a port on its
    /// RARP before the database says so.
    pub announced: &'a BTreeSet<String>,
    /// The chassis whose tunnel's BFD session is up (by name): who is alive, for the
    /// gateway ports' HA groups ([`super::gateway`]).
    pub active_tunnels: &'a BTreeSet<String>,
}

impl Local<'_> {
    /// Whether `name` (of `requested-chassis`) is this chassis: its name or host name.
    fn is_named(&self, name: &str) -> bool {
        name == self.name || name == self.hostname
    }
}

/// How this chassis holds a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The binding's `chassis`: the first chassis `requested-chassis` names, or the
    /// only one.
    Main,
    /// One of its `additional_chassis` (a live migration's destination).
    /// `blocked`: `activation-strategy=rarp` and no RARP from the port yet (frames
    /// from the port other than RARP, and frames to it, are dropped).
    Additional {
        /// Awaiting activation.
        blocked: bool,
    },
}

/// What one local port is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortView {
    /// Bound here (or being claimed): its binding, logical switch, key and the source
    /// MACs its port security allows (empty: any).
    Bound {
        /// The `Port_Binding` row.
        binding: Uuid,
        /// The logical switch.
        datapath: Uuid,
        /// Its logical port key.
        key: u16,
        /// Port security MACs.
        security: Vec<MacAddr>,
        /// `Port_Binding.up` as the database has it.
        up: bool,
        /// Main or additional chassis.
        role: Role,
    },
    /// In no domain, and why.
    Unbound(String),
}

/// Where a MAC of a logical switch lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum DestView {
    /// A local port, by name.
    Local(String),
    /// A port bound on another chassis.
    Remote {
        /// That chassis' name.
        chassis: String,
        /// Its Geneve endpoint.
        ip: IpAddr,
        /// The port's key.
        key: u16,
    },
    /// A logical router port.
    Router,
    /// A port bound on several chassis (during a live migration): a copy to each,
    /// here too when `local` names an active local port.
    Multi {
        /// The local port, if the binding is active here.
        local: Option<String>,
        /// The other chassis: (name, Geneve endpoint).
        remotes: Vec<(String, IpAddr)>,
        /// The port's key.
        key: u16,
    },
}

/// A multicast group as this chassis sends and delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// Its key.
    pub key: u16,
    /// The IP multicast group it carries, for the groups ovn-northd makes from
    /// `IGMP_Group` rows (named by the address).
    pub address: Option<IpAddr>,
    /// Local member ports, by name.
    pub local: Vec<String>,
    /// Other chassis with members: (name, Geneve endpoint).
    pub remotes: Vec<(String, IpAddr)>,
}

/// The `localnet` port of a logical switch (a provider network): its frames to other
/// chassis go out of an uplink onto the physical network instead of into tunnels, as
/// ovn-controller bridges them (`controller/physical.c`: remote ports and multicast
/// groups go through the localnet port when the datapath has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalnetView {
    /// The localnet logical port.
    pub port: String,
    /// Its key.
    pub key: u16,
    /// The physical network (`options:network_name`).
    pub network: String,
    /// The uplink mapped to the network; none: the network is not mapped here, and the
    /// switch's other chassis are reached through tunnels (as ovn-controller ignores a
    /// localnet port of an unplugged network).
    pub uplink: Option<String>,
    /// The VLAN frames carry on the network (`tag`; 0: untagged).
    pub tag: u16,
}

/// One logical switch with a local port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatapathView {
    /// Its tunnel key (VNI).
    pub tunnel_key: u32,
    /// Its name.
    pub name: String,
    /// Its local ports (name, key).
    pub local: Vec<(String, u16)>,
    /// MAC -> destination.
    pub fdb: Vec<(MacAddr, DestView)>,
    /// Its multicast groups.
    pub groups: Vec<GroupView>,
    /// Some port has `unknown` addresses.
    pub has_unknown: bool,
    /// Local ports that learn source MACs (`unknown` addresses, no port security):
    /// (name, key).
    pub learning: Vec<(String, u16)>,
    /// Local ports awaiting activation (see [`Role::Additional`]): (name, key).
    pub blocked: Vec<(String, u16)>,
    /// Its `localnet` port, if it has one.
    pub localnet: Option<LocalnetView>,
    /// It snoops IGMP/MLD (`IP_Multicast.enabled`, from `mcast_snoop=true`).
    pub snoop: bool,
    /// The key of its `_MC_static` group (ports with `options:mcast_flood=true`), where
    /// unregistered multicast goes while it snoops, if that group has members.
    pub static_flood: Option<u16>,
    /// Its frames run OVN's logical pipeline (its flows do more than L2 forwarding:
    /// ACLs, DHCP, a router).
    pub lflow: bool,
}

/// The derived view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// Each local port with an `iface_id`, by name.
    pub ports: BTreeMap<String, PortView>,
    /// The logical switches with local ports (shared with the next view where
    /// nothing of a switch changed).
    pub datapaths: BTreeMap<Uuid, Arc<DatapathView>>,
    /// Bindings to claim (their `chassis` is not this one yet).
    pub claims: Vec<Uuid>,
    /// Bindings bound here that no local port is any more.
    pub releases: Vec<Uuid>,
    /// Bindings to join as an additional chassis.
    pub joins: Vec<Uuid>,
    /// Bindings whose `additional_chassis` must not hold this chassis any more (no
    /// local port is them, or this chassis is now their main one).
    pub leaves: Vec<Uuid>,
    /// Bindings to mark activated here (`options:additional-chassis-activated`).
    pub activations: Vec<Uuid>,
}

/// The rows grouped once per derivation, so that each logical switch costs its own
/// rows rather than a scan of the whole database (FxHash: keys are the database's own
/// names and UUIDs, and this runs over every row on every pass).
struct Index<'a> {
    /// Port bindings by logical port name.
    by_lsp: FxHashMap<&'a str, (Uuid, &'a PortBinding)>,
    /// Port bindings by datapath.
    by_dp: FxHashMap<Uuid, Vec<(Uuid, &'a PortBinding)>>,
    /// Multicast groups by datapath.
    groups: FxHashMap<Uuid, Vec<&'a MulticastGroup>>,
    /// FDB rows by datapath key.
    fdb: FxHashMap<i64, Vec<&'a Fdb>>,
    /// The datapaths that snoop IGMP/MLD (`IP_Multicast.enabled`).
    snooping: FxHashSet<Uuid>,
}

impl<'a> Index<'a> {
    fn new(sb: &'a Sb) -> Self {
        let mut ix = Index {
            by_lsp: FxHashMap::with_capacity_and_hasher(sb.ports.len(), Default::default()),
            by_dp: FxHashMap::default(),
            groups: FxHashMap::default(),
            fdb: FxHashMap::default(),
            snooping: sb
                .ip_multicast
                .values()
                .filter(|m| m.enabled == Some(true))
                .map(|m| m.datapath)
                .collect(),
        };
        for (u, p) in &sb.ports {
            ix.by_lsp.insert(p.logical_port.as_str(), (*u, p));
            ix.by_dp.entry(p.datapath).or_default().push((*u, p));
        }
        for g in &sb.groups {
            ix.groups.entry(g.datapath).or_default().push(g);
        }
        for f in &sb.fdb {
            ix.fdb.entry(f.dp_key).or_default().push(f);
        }
        ix
    }

    /// The port bindings of datapath `dp`.
    fn ports(&self, dp: Uuid) -> &[(Uuid, &'a PortBinding)] {
        self.by_dp.get(&dp).map_or(&[], Vec::as_slice)
    }
}

/// Derives the view from the database `sb` and this chassis `local`.
pub fn derive(sb: &Sb, local: &Local<'_>) -> View {
    derive_reusing(sb, local, None, &Touched::everything())
}

/// As [`derive()`], taking from `prev` (a view derived from the same local ports) the
/// switches no changed row `touched`.
pub fn derive_reusing(sb: &Sb, local: &Local<'_>, prev: Option<&View>, touched: &Touched) -> View {
    let mut v = View::default();
    let ix = Index::new(sb);
    for (name, lsp) in local.ports {
        let state = match ix.by_lsp.get(lsp.as_str()) {
            None => PortView::Unbound(format!(
                "logical switch port {lsp:?} is not in the Southbound database (ovn-nbctl lsp-add it)"
            )),
            Some((u, pb)) => claim(sb, local, lsp, *u, pb),
        };
        if let PortView::Bound { binding, role, .. } = &state {
            note_claim(sb, local, name, *binding, *role, &mut v);
        }
        v.ports.insert(name.clone(), state);
    }
    let claimed: HashSet<Uuid> = v
        .ports
        .values()
        .filter_map(|p| match p {
            PortView::Bound { binding, .. } => Some(*binding),
            PortView::Unbound(_) => None,
        })
        .collect();
    if let Some(me) = local.chassis {
        let (claims, releases) = super::gateway::claims_and_releases(sb, me, local.active_tunnels);
        v.claims.extend(claims);
        v.releases.extend(releases);
        for (u, p) in &sb.ports {
            if !p.kind.is_empty() || claimed.contains(u) {
                continue;
            }
            if p.chassis == Some(me) {
                v.releases.push(*u);
            }
            if p.additional_chassis.contains(&me) {
                v.leaves.push(*u);
            }
        }
        v.releases.sort();
        v.leaves.sort();
    }
    let mut datapaths: BTreeSet<Uuid> = v
        .ports
        .values()
        .filter_map(|p| match p {
            PortView::Bound { datapath, .. } => Some(*datapath),
            PortView::Unbound(_) => None,
        })
        .collect();
    datapaths.extend(pipeline_only_datapaths(sb, local));
    let local_of: HashMap<Uuid, Here<'_>> = v
        .ports
        .iter()
        .filter_map(|(n, p)| match p {
            PortView::Bound { binding, role, .. } => Some((
                *binding,
                Here {
                    name: n.as_str(),
                    blocked: *role == Role::Additional { blocked: true },
                },
            )),
            PortView::Unbound(_) => None,
        })
        .collect();
    for dp in datapaths {
        let kept = prev
            .and_then(|p| p.datapaths.get(&dp))
            .filter(|d| !touched.concerns(dp, d.tunnel_key));
        if let Some(d) = kept {
            v.datapaths.insert(dp, d.clone());
        } else if let Some(d) = datapath(sb, &ix, local, dp, &local_of) {
            v.datapaths.insert(dp, Arc::new(d));
        }
    }
    v
}

/// The datapaths the local pipeline reaches that get frames here though no local
/// port is on them: logical switches with a `localnet` port mapped here (an external
/// network behind a gateway: frames from the physical network enter them), and
/// routers whose gateway port (`chassisredirect`) this chassis holds (other chassis
/// send it their frames by tunnel, in the router's VNI).
fn pipeline_only_datapaths(sb: &Sb, local: &Local<'_>) -> Vec<Uuid> {
    let Some(p) = local.pipelines else {
        return Vec::new();
    };
    let holds_gateway = |d: &super::pipeline::tables::Datapath| {
        d.ports.values().any(|pt| {
            pt.kind == "chassisredirect" && pt.location == super::pipeline::tables::Location::Local
        })
    };
    sb.datapaths
        .iter()
        .filter_map(|(u, row)| {
            let key = u32::try_from(row.tunnel_key).ok()?;
            let d = p.datapath(key)?;
            let provider = !d.router && d.localnet.is_some() && p.needs_pipeline(key);
            (provider || (d.router && holds_gateway(d))).then_some(*u)
        })
        .collect()
}

/// A binding held here: the local port's name, and whether it awaits activation.
#[derive(Debug, Clone, Copy)]
struct Here<'a> {
    name: &'a str,
    blocked: bool,
}

/// Notes what local port `name`, bound as `role` to `binding`, asks of the database:
/// the main chassis claims `chassis` (and leaves `additional_chassis`); an additional
/// one joins `additional_chassis`, and marks the binding activated once the port
/// announced itself.
fn note_claim(sb: &Sb, local: &Local<'_>, name: &str, binding: Uuid, role: Role, v: &mut View) {
    let pb = &sb.ports[&binding];
    let me = local.chassis;
    match role {
        Role::Main => {
            if pb.chassis != me || me.is_none() {
                v.claims.push(binding);
            }
            if me.is_some_and(|m| pb.additional_chassis.contains(&m)) {
                v.leaves.push(binding);
            }
        }
        Role::Additional { blocked } => {
            if me.is_none_or(|m| !pb.additional_chassis.contains(&m)) {
                v.joins.push(binding);
            }
            if !blocked
                && needs_activation(pb)
                && !activated(pb, local)
                && local.announced.contains(name)
            {
                v.activations.push(binding);
            }
        }
    }
}

/// The binding has `activation-strategy=rarp`: an additional chassis blocks the port
/// until its RARP.
fn needs_activation(pb: &PortBinding) -> bool {
    pb.options.get("activation-strategy").map(String::as_str) == Some("rarp")
}

/// `options:additional-chassis-activated` names this chassis.
fn activated(pb: &PortBinding, local: &Local<'_>) -> bool {
    pb.options
        .get("additional-chassis-activated")
        .is_some_and(|a| a.split(',').any(|c| c.trim() == local.name))
}

/// The chassis `options:requested-chassis` names, in order (the first is the main one).
fn requested_chassis(pb: &PortBinding) -> Vec<&str> {
    pb.options
        .get("requested-chassis")
        .map(|r| {
            r.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// How this chassis holds binding `pb` of logical switch port `lsp` if it may: the main
/// chassis unless `requested-chassis` names it after another.
fn role_here(pb: &PortBinding, local: &Local<'_>, lsp: &str) -> Role {
    let here = |n: &&str| local.is_named(n);
    match requested_chassis(pb).iter().position(here) {
        None | Some(0) => Role::Main,
        Some(_) => Role::Additional {
            blocked: needs_activation(pb)
                && !activated(pb, local)
                && !local.announced.contains(lsp_local_name(local, lsp)),
        },
    }
}

/// The logical switch ports that local ports name but that are not active here: bound
/// here awaiting activation ([`Role::Additional`] `blocked`), requested on other chassis
/// only, or bound to another chassis that none requested. The logical pipelines deliver
/// nothing to them here ([`super::pipeline::tables::Viewpoint::Claiming`]).
pub fn inactive_ports(sb: &Sb, local: &Local<'_>) -> Vec<String> {
    let lsps: BTreeSet<&str> = local.ports.values().map(String::as_str).collect();
    let here = |n: &&str| local.is_named(n);
    let inactive = |pb: &PortBinding| {
        let requested = requested_chassis(pb);
        if requested.is_empty() {
            return pb.chassis.is_some() && pb.chassis != local.chassis;
        }
        !requested.iter().any(here)
            || role_here(pb, local, &pb.logical_port) == Role::Additional { blocked: true }
    };
    let mut v: Vec<String> = sb
        .ports
        .values()
        .filter(|pb| pb.kind.is_empty() && lsps.contains(pb.logical_port.as_str()))
        .filter(|pb| inactive(pb))
        .map(|pb| pb.logical_port.clone())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Whether this chassis may have binding `pb` of logical switch port `lsp`, by OVN's
/// rules (`lport_can_bind_on_this_chassis`): a VIF, `requested-chassis` empty or
/// naming this chassis (by name or host name), not bound to another chassis unless
/// requested here, and (unless allowed) on a switch without ACLs.
fn claim(sb: &Sb, local: &Local<'_>, lsp: &str, u: Uuid, pb: &PortBinding) -> PortView {
    if !pb.kind.is_empty() {
        return PortView::Unbound(format!(
            "logical switch port {lsp:?} has type {:?}; a vswitchd chassis binds VIF ports (type \"\") only",
            pb.kind
        ));
    }
    let requested = requested_chassis(pb);
    let here = |n: &&str| local.is_named(n);
    let role = role_here(pb, local, lsp);
    if !requested.is_empty() && !requested.iter().any(here) {
        return PortView::Unbound(format!(
            "logical switch port {lsp:?} is requested on chassis {}",
            requested.join(",")
        ));
    }
    if let Some(other) = pb.chassis.filter(|c| Some(*c) != local.chassis) {
        if requested.is_empty() {
            let name = sb
                .chassis
                .get(&other)
                .map_or_else(|| other.to_string(), |c| c.name.clone());
            return PortView::Unbound(format!(
                "logical switch port {lsp:?} is bound to chassis {name}"
            ));
        }
    }
    let Some(dp) = sb.datapaths.get(&pb.datapath) else {
        return PortView::Unbound(format!("logical switch port {lsp:?} has no datapath yet"));
    };
    let name = dp.external_ids.get("name").cloned().unwrap_or_default();
    let dp_key = u32::try_from(dp.tunnel_key).unwrap_or(0);
    // A switch the L2 rules forward needs none of its flows' actions.
    let refusal = local
        .pipelines
        .filter(|p| p.needs_pipeline(dp_key))
        .and_then(|p| p.refusal(dp_key));
    if let Some((via, action, stage, flow)) = refusal {
        return PortView::Unbound(format!(
            "logical switch {name:?} reaches datapath {via:?}, whose logical flow {flow} (stage {stage}) uses {action}, which vswitchd does not execute; not claimed"
        ));
    }
    // Whether a switch has ACLs (security groups) is known from its flows: a chassis
    // building pipelines claims no port before its switch's flows are here. A view
    // derived without pipelines (the L2 view's own tests) knows nothing of ACLs.
    let waiting = local
        .pipelines
        .is_some_and(|p| p.datapath(dp_key).is_none_or(|d| d.tables[0].is_empty()));
    if waiting {
        return PortView::Unbound(format!(
            "logical switch {name:?}: waiting for its logical flows (they enforce its ACLs, if any)"
        ));
    }
    let key = match u16::try_from(pb.tunnel_key) {
        Ok(k) if (1..=MAX_PORT_KEY).contains(&k) => k,
        _ => {
            return PortView::Unbound(format!(
                "logical switch port {lsp:?} has key {}, outside 1..=32767",
                pb.tunnel_key
            ))
        }
    };
    PortView::Bound {
        binding: u,
        datapath: pb.datapath,
        key,
        security: macs(&pb.port_security),
        up: pb.up == Some(true),
        role,
    }
}

/// The local port that is logical port `lsp` (empty if none).
fn lsp_local_name<'a>(local: &Local<'a>, lsp: &str) -> &'a str {
    local
        .ports
        .iter()
        .find(|(_, l)| l.as_str() == lsp)
        .map_or("", |(n, _)| n.as_str())
}

/// The MACs of `"MAC [IP...]"` entries.
fn macs(entries: &[String]) -> Vec<MacAddr> {
    entries
        .iter()
        .filter_map(|e| e.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Logical switch `dp` as this chassis forwards it, or None when it is not a switch
/// with a usable key.
fn datapath(
    sb: &Sb,
    ix: &Index<'_>,
    local: &Local<'_>,
    dp: Uuid,
    local_of: &HashMap<Uuid, Here<'_>>,
) -> Option<DatapathView> {
    let db = sb.datapaths.get(&dp)?;
    let tunnel_key = u32::try_from(db.tunnel_key)
        .ok()
        .filter(|&k| k <= crate::config::MAX_VNI)?;
    let mut d = DatapathView {
        tunnel_key,
        name: db.external_ids.get("name").cloned().unwrap_or_default(),
        local: Vec::new(),
        fdb: Vec::new(),
        groups: Vec::new(),
        has_unknown: false,
        learning: Vec::new(),
        blocked: Vec::new(),
        localnet: None,
        snoop: ix.snooping.contains(&dp),
        static_flood: None,
        lflow: local
            .pipelines
            .is_some_and(|p| p.needs_pipeline(tunnel_key)),
    };
    let place = place_ports(sb, ix, local, dp, local_of, &mut d);
    for (u, pb) in ix.ports(dp) {
        let Some(to) = place.get(u) else { continue };
        let addrs = if pb.kind == "router" {
            router_macs(ix, pb)
        } else {
            pb.mac.clone()
        };
        for m in macs(&addrs) {
            d.fdb.push((m, to.clone()));
        }
    }
    learned_macs(ix, dp, tunnel_key, &place, &mut d.fdb);
    d.fdb.sort();
    d.local.sort();
    d.learning.sort();
    d.blocked.sort();
    let bridged = d.localnet.as_ref().is_some_and(|l| l.uplink.is_some());
    d.groups = groups(ix, dp, &place, bridged);
    // A port bound on several chassis is reached as a group of its own, keyed by the
    // port's key: a copy to each of its places (OVN tunnels to every chassis that
    // holds the binding, a provider network notwithstanding).
    for to in place.values() {
        if let DestView::Multi {
            local,
            remotes,
            key,
        } = to
        {
            d.groups.push(GroupView {
                key: *key,
                address: None,
                local: local.iter().cloned().collect(),
                remotes: remotes.clone(),
            });
        }
    }
    d.groups.sort_by_key(|g| g.key);
    let static_key = ix
        .groups
        .get(&dp)
        .and_then(|gs| gs.iter().find(|g| g.name == MC_STATIC))
        .and_then(|g| u16::try_from(g.tunnel_key).ok());
    d.static_flood = static_key.filter(|k| d.groups.iter().any(|g| g.key == *k));
    Some(d)
}

/// Where each port of switch `dp` is: here (by local port name; a mapped `localnet`
/// port is its uplink), on another chassis (its Geneve endpoint), a router port, or
/// nowhere yet. Notes the switch's local ports, learning ports, `unknown` addresses and
/// localnet port in `d`.
fn place_ports(
    sb: &Sb,
    ix: &Index<'_>,
    local: &Local<'_>,
    dp: Uuid,
    local_of: &HashMap<Uuid, Here<'_>>,
    d: &mut DatapathView,
) -> HashMap<Uuid, DestView> {
    let mut place: HashMap<Uuid, DestView> = HashMap::new();
    for (u, pb) in ix.ports(dp) {
        let Ok(key) = u16::try_from(pb.tunnel_key) else {
            continue;
        };
        let unknown = pb.mac.iter().any(|m| m == "unknown");
        d.has_unknown |= unknown;
        if pb.kind == "localnet" {
            let l = localnet(local, pb, key);
            if let Some(up) = &l.uplink {
                place.insert(*u, DestView::Local(up.clone()));
            }
            d.localnet = Some(l);
        } else if pb.kind == "router" {
            place.insert(*u, DestView::Router);
        } else {
            let here = local_of.get(u).copied();
            if let Some(h) = here {
                let at = (h.name.to_string(), key);
                if h.blocked {
                    d.blocked.push(at);
                } else {
                    if unknown && pb.port_security.is_empty() {
                        d.learning.push(at.clone());
                    }
                    d.local.push(at);
                }
            }
            let active = here.filter(|h| !h.blocked).map(|h| h.name.to_string());
            if let Some(to) = placement(sb, local, pb, key, active) {
                place.insert(*u, to);
            }
        }
    }
    place
}

/// Where VIF binding `pb` (key `key`) is: `active`, the local port that is it (active
/// here), and the other chassis that hold it (main and additional).
fn placement(
    sb: &Sb,
    local: &Local<'_>,
    pb: &PortBinding,
    key: u16,
    active: Option<String>,
) -> Option<DestView> {
    let mut remotes: Vec<(String, IpAddr)> = Vec::new();
    for c in pb.chassis.iter().chain(&pb.additional_chassis) {
        if Some(*c) == local.chassis {
            continue;
        }
        let Some(ch) = sb.chassis.get(c) else {
            continue;
        };
        let Some(ip) = sb.encap_ip(ch) else { continue };
        if !remotes.iter().any(|(n, _)| *n == ch.name) {
            remotes.push((ch.name.clone(), ip));
        }
    }
    match (active, remotes.len()) {
        (Some(name), 0) => Some(DestView::Local(name)),
        (None, 0) => None,
        (None, 1) => {
            let (chassis, ip) = remotes.pop()?;
            Some(DestView::Remote { chassis, ip, key })
        }
        (local, _) => {
            remotes.sort();
            Some(DestView::Multi {
                local,
                remotes,
                key,
            })
        }
    }
}

/// Localnet port `pb` (key `key`) as this chassis bridges it: to the uplink its
/// network is mapped to, with its VLAN.
fn localnet(local: &Local<'_>, pb: &PortBinding, key: u16) -> LocalnetView {
    let network = pb.options.get("network_name").cloned().unwrap_or_default();
    LocalnetView {
        port: pb.logical_port.clone(),
        key,
        uplink: local
            .mappings
            .iter()
            .find(|m| m.network == network)
            .map(|m| m.uplink.clone()),
        network,
        tag: pb
            .tag
            .and_then(|t| u16::try_from(t).ok())
            .filter(|t| (1..=4094).contains(t))
            .unwrap_or(0),
    }
}

/// The name of the group of a logical switch's ports that flood unregistered IP
/// multicast (`options:mcast_flood=true`; ovn-northd).
pub(crate) const MC_STATIC: &str = "_MC_static";

/// The multicast groups of switch `dp` with a member here or on another chassis. On a
/// switch `bridged` to a physical network, other chassis get their copies from the
/// network, not through tunnels.
fn groups(
    ix: &Index<'_>,
    dp: Uuid,
    place: &HashMap<Uuid, DestView>,
    bridged: bool,
) -> Vec<GroupView> {
    let mut out = Vec::new();
    for g in ix.groups.get(&dp).map_or(&[][..], Vec::as_slice) {
        let Ok(key) = u16::try_from(g.tunnel_key) else {
            continue;
        };
        if key < MC_FLOOD {
            continue;
        }
        let mut gv = GroupView {
            key,
            address: g.name.parse().ok().filter(IpAddr::is_multicast),
            local: Vec::new(),
            remotes: Vec::new(),
        };
        for m in &g.ports {
            let (here, there): (Option<&String>, Vec<(&String, &IpAddr)>) = match place.get(m) {
                Some(DestView::Local(n)) => (Some(n), Vec::new()),
                Some(DestView::Remote { chassis, ip, .. }) => (None, vec![(chassis, ip)]),
                Some(DestView::Multi { local, remotes, .. }) => (
                    local.as_ref(),
                    remotes.iter().map(|(c, ip)| (c, ip)).collect(),
                ),
                _ => (None, Vec::new()),
            };
            gv.local.extend(here.cloned());
            for (chassis, ip) in there {
                if !bridged && !gv.remotes.iter().any(|(c, _)| c == chassis) {
                    gv.remotes.push((chassis.clone(), *ip));
                }
            }
        }
        gv.local.sort();
        gv.remotes.sort();
        if !gv.local.is_empty() || !gv.remotes.is_empty() {
            out.push(gv);
        }
    }
    out.sort_by_key(|g| g.key);
    out
}

/// Adds the Southbound `FDB` rows of logical switch `dp` (key `tunnel_key`) to `fdb`:
/// each learned MAC where its port is (`place`), unless a port's own addresses name
/// the MAC already (those win, as in OVN's `ls_in_l2_lkup`, which matches them first).
fn learned_macs(
    ix: &Index<'_>,
    dp: Uuid,
    tunnel_key: u32,
    place: &HashMap<Uuid, DestView>,
    fdb: &mut Vec<(MacAddr, DestView)>,
) {
    let Some(rows) = ix.fdb.get(&i64::from(tunnel_key)) else {
        return;
    };
    let by_key: HashMap<i64, Uuid> = ix
        .ports(dp)
        .iter()
        .map(|(u, p)| (p.tunnel_key, *u))
        .collect();
    let named: HashSet<MacAddr> = fdb.iter().map(|(m, _)| *m).collect();
    for row in rows {
        let Ok(mac) = row.mac.parse::<MacAddr>() else {
            continue;
        };
        let to = by_key.get(&row.port_key).and_then(|u| place.get(u));
        if let (Some(to), false) = (to, named.contains(&mac)) {
            fdb.push((mac, to.clone()));
        }
    }
}

/// The MAC of the logical router port a `router` port of a switch peers with
/// (`options:peer` names the router port's binding, whose `mac` holds its MAC).
fn router_macs(ix: &Index<'_>, pb: &PortBinding) -> Vec<String> {
    let Some(peer) = pb.options.get("router-port").or(pb.options.get("peer")) else {
        return Vec::new();
    };
    ix.by_lsp
        .get(peer.as_str())
        .map(|(_, p)| p.mac.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ovn::sb::{Chassis, DatapathBinding, Encap};

    fn uuid(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn pb(lsp: &str, dp: Uuid, key: i64, mac: &str, chassis: Option<Uuid>) -> PortBinding {
        PortBinding {
            uuid: Uuid::nil(),
            logical_port: lsp.into(),
            kind: String::new(),
            datapath: dp,
            tunnel_key: key,
            mac: vec![mac.into()],
            chassis,
            requested_chassis: None,
            options: Default::default(),
            port_security: Vec::new(),
            up: Some(false),
            tag: None,
            ha_chassis_group: None,
            additional_chassis: Vec::new(),
        }
    }

    /// sw0 (key 5) with p-here (claimable), p-hv1 and p-hv1b (bound on hv1), p-rtr (a
    /// router port whose peer has 02:..:ff), p-unk (`unknown`); chassis hv1 and us.
    fn sb() -> Sb {
        let (dp, hv1, me, enc) = (uuid(1), uuid(10), uuid(11), uuid(20));
        let mut s = Sb::default();
        s.datapaths.insert(
            dp,
            DatapathBinding {
                uuid: dp,
                tunnel_key: 5,
                external_ids: [("name".to_string(), "sw0".to_string())].into(),
            },
        );
        s.chassis.insert(
            hv1,
            Chassis {
                uuid: hv1,
                name: "hv1".into(),
                hostname: "host1".into(),
                encaps: vec![enc],
                other_config: Default::default(),
            },
        );
        s.chassis.insert(
            me,
            Chassis {
                uuid: me,
                name: "hv2".into(),
                hostname: "host2".into(),
                encaps: vec![],
                other_config: Default::default(),
            },
        );
        s.encaps.insert(
            enc,
            Encap {
                uuid: enc,
                kind: "geneve".into(),
                ip: "198.51.100.1".into(),
                options: Default::default(),
                chassis_name: "hv1".into(),
            },
        );
        s.ports.insert(
            uuid(100),
            pb("p-here", dp, 1, "02:00:00:00:00:01 10.0.0.1", None),
        );
        s.ports.insert(
            uuid(101),
            pb("p-hv1", dp, 2, "02:00:00:00:00:02", Some(hv1)),
        );
        s.ports.insert(
            uuid(102),
            pb("p-hv1b", dp, 3, "02:00:00:00:00:03", Some(hv1)),
        );
        let mut rtr = pb("p-rtr", dp, 4, "router", None);
        rtr.kind = "router".into();
        rtr.options.insert("router-port".into(), "lrp0".into());
        s.ports.insert(uuid(103), rtr);
        s.ports.insert(
            uuid(104),
            pb("lrp0", uuid(2), 1, "02:00:00:00:00:ff 10.0.0.254/24", None),
        );
        s.ports
            .insert(uuid(105), pb("p-unk", dp, 5, "unknown", None));
        s.groups.push(MulticastGroup {
            uuid: uuid(200),
            datapath: dp,
            name: "_MC_flood".into(),
            tunnel_key: 0x8000,
            ports: vec![uuid(100), uuid(101), uuid(102), uuid(103)],
        });
        s
    }

    static NONE_ANNOUNCED: BTreeSet<String> = BTreeSet::new();

    fn local<'a>(ports: &'a BTreeMap<String, String>) -> Local<'a> {
        Local {
            pipelines: None,
            name: "hv2",
            hostname: "host2",
            chassis: Some(uuid(11)),
            ports,
            mappings: &[],
            announced: &NONE_ANNOUNCED,
            active_tunnels: &NONE_ANNOUNCED,
        }
    }

    fn ports(p: &[(&str, &str)]) -> BTreeMap<String, String> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// A claimable port is bound with its key, its switch becomes a domain whose MACs
    /// point here, at hv1 (by key) or at the router port; _MC_flood reaches the local
    /// port and hv1 once.
    #[test]
    fn a_local_port_and_its_switch() {
        let ps = ports(&[("vm1", "p-here")]);
        let v = derive(&sb(), &local(&ps));
        assert_eq!(v.claims, vec![uuid(100)]);
        let PortView::Bound { key, datapath, .. } = &v.ports["vm1"] else {
            panic!("{:?}", v.ports["vm1"]);
        };
        assert_eq!((*key, *datapath), (1, uuid(1)));
        let d = &v.datapaths[&uuid(1)];
        assert_eq!(
            (d.tunnel_key, d.name.as_str(), d.has_unknown),
            (5, "sw0", true)
        );
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        let fdb: BTreeMap<String, DestView> = d
            .fdb
            .iter()
            .map(|(m, t)| (m.to_string(), t.clone()))
            .collect();
        assert_eq!(fdb["02:00:00:00:00:01"], DestView::Local("vm1".into()));
        assert_eq!(
            fdb["02:00:00:00:00:03"],
            DestView::Remote {
                chassis: "hv1".into(),
                ip,
                key: 3
            }
        );
        assert_eq!(fdb["02:00:00:00:00:ff"], DestView::Router);
        assert_eq!(
            d.groups,
            vec![GroupView {
                address: None,
                key: 0x8000,
                local: vec!["vm1".into()],
                remotes: vec![("hv1".into(), ip)],
            }]
        );
    }

    /// A switch with `mcast_snoop=true` (its `IP_Multicast` row) snoops; the group
    /// ovn-northd names by an address carries that address, members here and on hv1;
    /// `_MC_static` with a member is where unregistered multicast goes; a switch
    /// without the row does not snoop.
    #[test]
    fn snooping_switch_and_its_ip_multicast_groups() {
        let ps = ports(&[("vm1", "p-here")]);
        let mut s = sb();
        let plain = derive(&s, &local(&ps));
        assert!(!plain.datapaths[&uuid(1)].snoop);
        s.ip_multicast.insert(
            uuid(300),
            crate::ovn::sb::IpMulticast {
                uuid: uuid(300),
                datapath: uuid(1),
                enabled: Some(true),
                idle_timeout: Some(300),
            },
        );
        for (u, name, key, ports) in [
            (201, "239.1.2.3", 0x8010, vec![uuid(100), uuid(101)]),
            (202, "ff0e::1:3", 0x8011, vec![uuid(102)]),
            (203, "_MC_static", 0x8004, vec![uuid(100)]),
            (204, "239.9.9.9", 0x8012, vec![]),
        ] {
            s.groups.push(MulticastGroup {
                uuid: uuid(u),
                datapath: uuid(1),
                name: name.into(),
                tunnel_key: key,
                ports,
            });
        }
        let v = derive(&s, &local(&ps));
        let d = &v.datapaths[&uuid(1)];
        assert!(d.snoop);
        assert_eq!(d.static_flood, Some(0x8004));
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        let g = |k: u16| d.groups.iter().find(|g| g.key == k).cloned();
        assert_eq!(
            g(0x8010),
            Some(GroupView {
                key: 0x8010,
                address: Some("239.1.2.3".parse().unwrap()),
                local: vec!["vm1".into()],
                remotes: vec![("hv1".into(), ip)],
            })
        );
        let v6 = g(0x8011).unwrap();
        assert_eq!(v6.address, Some("ff0e::1:3".parse().unwrap()));
        assert!(v6.local.is_empty());
        assert_eq!(g(0x8004).unwrap().address, None);
        assert_eq!(
            g(0x8012),
            None,
            "a group with no member is not forwarded to"
        );
    }

    /// OVN's binding rules: unknown port, non-VIF type, requested elsewhere (by name
    /// or host name), bound elsewhere, a switch with ACLs; requested here wins over a
    /// binding elsewhere.
    #[test]
    fn claims_follow_ovns_rules() {
        let mut s = sb();
        let why = |s: &Sb, lsp: &str| -> Option<String> {
            let ps = ports(&[("x", lsp)]);
            match &derive(s, &local(&ps)).ports["x"] {
                PortView::Unbound(w) => Some(w.clone()),
                PortView::Bound { .. } => None,
            }
        };
        assert!(why(&s, "nope").unwrap().contains("not in the Southbound"));
        assert!(why(&s, "p-rtr").unwrap().contains("type \"router\""));
        assert!(why(&s, "p-hv1").unwrap().contains("bound to chassis hv1"));
        s.ports
            .get_mut(&uuid(101))
            .unwrap()
            .options
            .insert("requested-chassis".into(), "host2".into());
        assert_eq!(why(&s, "p-hv1"), None, "requested here by host name");
        s.ports
            .get_mut(&uuid(100))
            .unwrap()
            .options
            .insert("requested-chassis".into(), "hv1,hv3".into());
        assert!(why(&s, "p-here")
            .unwrap()
            .contains("requested on chassis hv1,hv3"));
    }

    /// A chassis that builds pipelines claims a port only once its switch's flows are
    /// here (whether the switch has ACLs is known from them): not while its datapath
    /// has no pipeline, and at once when it has one.
    #[test]
    fn ports_wait_for_their_switchs_flows() {
        use crate::ovn::pipeline::tables::{Pipelines, Viewpoint};
        let mut s = sb();
        let ps = ports(&[("x", "p-here")]);
        let lsps = vec!["p-here".to_string()];
        let view = Viewpoint::Claiming {
            me: Some(uuid(11)),
            ports: &lsps,
            inactive: &[],
            networks: &[],
        };
        let port = |s: &Sb, p: &Pipelines| {
            let l = Local {
                pipelines: Some(p),
                ..local(&ps)
            };
            derive(s, &l).ports["x"].clone()
        };
        let none = Pipelines::build(&s, &[], view);
        let PortView::Unbound(why) = port(&s, &none) else {
            panic!("claimed before its switch's flows");
        };
        assert!(why.contains("waiting for its logical flows"), "{why}");
        s.lflows.insert(
            uuid(500),
            crate::ovn::sb::LogicalFlow::new(
                (Some(uuid(1)), None),
                "ingress",
                0,
                50,
                ("1", "next;"),
            ),
        );
        let built = Pipelines::build(&s, &[uuid(1)], view);
        assert!(matches!(port(&s, &built), PortView::Bound { .. }));
    }

    /// A binding this chassis holds with no local port naming it any more is released.
    #[test]
    fn orphan_bindings_are_released() {
        let mut s = sb();
        s.ports.get_mut(&uuid(100)).unwrap().chassis = Some(uuid(11));
        let none = ports(&[]);
        let v = derive(&s, &local(&none));
        assert_eq!(v.releases, vec![uuid(100)]);
        assert!(v.datapaths.is_empty());
        let ps = ports(&[("vm1", "p-here")]);
        let v = derive(&s, &local(&ps));
        assert!(
            v.releases.is_empty() && v.claims.is_empty(),
            "already ours: {v:?}"
        );
    }

    /// `FDB` rows: a MAC learned behind hv1's port is reached there by its key, one
    /// behind a local `unknown` port here; a row naming a port's own MAC, another
    /// switch or no port is ignored. The local `unknown` port without port security
    /// learns; one with port security does not.
    #[test]
    fn learned_macs_from_the_fdb_table() {
        let mut s = sb();
        let row = |mac: &str, dp_key: i64, port_key: i64| Fdb {
            uuid: Uuid::nil(),
            mac: mac.into(),
            dp_key,
            port_key,
        };
        s.fdb = vec![
            row("0a:00:00:00:00:01", 5, 2),
            row("0a:00:00:00:00:02", 5, 5),
            row("02:00:00:00:00:03", 5, 5),
            row("0a:00:00:00:00:03", 6, 2),
            row("0a:00:00:00:00:04", 5, 99),
        ];
        let ps = ports(&[("vm1", "p-here"), ("r", "p-unk")]);
        let v = derive(&s, &local(&ps));
        let d = &v.datapaths[&uuid(1)];
        let fdb: BTreeMap<String, DestView> = d
            .fdb
            .iter()
            .map(|(m, t)| (m.to_string(), t.clone()))
            .collect();
        assert_eq!(
            fdb["0a:00:00:00:00:01"],
            DestView::Remote {
                chassis: "hv1".into(),
                ip: "198.51.100.1".parse().unwrap(),
                key: 2
            }
        );
        assert_eq!(fdb["0a:00:00:00:00:02"], DestView::Local("r".into()));
        assert!(matches!(
            fdb["02:00:00:00:00:03"],
            DestView::Remote { key: 3, .. }
        ));
        assert!(!fdb.contains_key("0a:00:00:00:00:03"));
        assert!(!fdb.contains_key("0a:00:00:00:00:04"));
        assert_eq!(d.learning, vec![("r".to_string(), 5)]);
        s.ports.get_mut(&uuid(105)).unwrap().port_security = vec!["0a:00:00:00:00:09".into()];
        let v = derive(&s, &local(&ps));
        assert!(v.datapaths[&uuid(1)].learning.is_empty());
    }

    /// A localnet port whose network is mapped here bridges its switch to the uplink:
    /// the uplink is a member of the switch's groups and the other chassis get no
    /// tunnelled copies; unmapped, the switch stays on tunnels. Remote ports keep their
    /// chassis (the data path sends to them through the uplink).
    #[test]
    fn localnet_bridges_a_switch_to_its_uplink() {
        let mut s = sb();
        let mut ln = pb("ln-sw0", uuid(1), 9, "unknown", None);
        ln.kind = "localnet".into();
        ln.options.insert("network_name".into(), "physnet1".into());
        ln.tag = Some(100);
        s.ports.insert(uuid(106), ln);
        s.groups[0].ports.push(uuid(106));
        let ps = ports(&[("vm1", "p-here")]);
        let maps = [crate::config::ovn::BridgeMapping {
            network: "physnet1".into(),
            uplink: "phys".into(),
        }];
        let mut l = local(&ps);
        l.mappings = &maps;
        let v = derive(&s, &l);
        let d = &v.datapaths[&uuid(1)];
        assert_eq!(
            d.localnet,
            Some(LocalnetView {
                port: "ln-sw0".into(),
                key: 9,
                network: "physnet1".into(),
                uplink: Some("phys".into()),
                tag: 100,
            })
        );
        assert_eq!(
            d.groups,
            vec![GroupView {
                address: None,
                key: 0x8000,
                local: vec!["phys".into(), "vm1".into()],
                remotes: vec![],
            }]
        );
        assert!(d
            .fdb
            .iter()
            .any(|(_, t)| matches!(t, DestView::Remote { key: 3, .. })));
        let v = derive(&s, &local(&ps));
        let d = &v.datapaths[&uuid(1)];
        assert_eq!(d.localnet.as_ref().map(|l| l.uplink.clone()), Some(None));
        assert_eq!(d.groups[0].local, vec!["vm1".to_string()]);
        assert_eq!(d.groups[0].remotes.len(), 1, "unmapped: tunnels");
    }

    /// Multi-chassis binding (`requested-chassis=hv1,hv2`, `activation-strategy=rarp`)
    /// seen from hv2, the additional chassis: it joins `additional_chassis`, blocks
    /// the port until its RARP (frames to it go to hv1 only), then marks it activated
    /// and reaches it here and on hv1. Seen from a third chassis, frames to the port go
    /// to both.
    #[test]
    fn multi_chassis_binding_and_activation() {
        let mut s = sb();
        let me = uuid(11);
        {
            let p = s.ports.get_mut(&uuid(101)).unwrap();
            p.options
                .insert("requested-chassis".into(), "hv1,hv2".into());
            p.options
                .insert("activation-strategy".into(), "rarp".into());
        }
        let ps = ports(&[("vm1", "p-here"), ("mig", "p-hv1")]);
        let v = derive(&s, &local(&ps));
        let PortView::Bound { role, .. } = &v.ports["mig"] else {
            panic!("{:?}", v.ports["mig"]);
        };
        assert_eq!(*role, Role::Additional { blocked: true });
        assert_eq!(
            (v.joins.clone(), v.claims.clone()),
            (vec![uuid(101)], vec![uuid(100)])
        );
        let d = &v.datapaths[&uuid(1)];
        assert_eq!(d.blocked, vec![("mig".to_string(), 2)]);
        assert!(!d.local.iter().any(|(n, _)| n == "mig"));
        let to_mig = |d: &DatapathView| {
            d.fdb
                .iter()
                .find(|(m, _)| m.to_string() == "02:00:00:00:00:02")
                .map(|(_, t)| t.clone())
        };
        assert!(matches!(to_mig(d), Some(DestView::Remote { key: 2, .. })));

        s.ports.get_mut(&uuid(101)).unwrap().additional_chassis = vec![me];
        let announced: BTreeSet<String> = ["mig".to_string()].into();
        let mut l = local(&ps);
        l.announced = &announced;
        let v = derive(&s, &l);
        assert!(v.joins.is_empty());
        assert_eq!(v.activations, vec![uuid(101)]);
        let d = &v.datapaths[&uuid(1)];
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        assert_eq!(
            to_mig(d),
            Some(DestView::Multi {
                local: Some("mig".into()),
                remotes: vec![("hv1".into(), ip)],
                key: 2
            })
        );
        assert!(d.groups.iter().any(|g| g.key == 2
            && g.local == vec!["mig".to_string()]
            && g.remotes == vec![("hv1".to_string(), ip)]));

        // Activated in the database: nothing more to write.
        s.ports
            .get_mut(&uuid(101))
            .unwrap()
            .options
            .insert("additional-chassis-activated".into(), "hv2".into());
        assert!(derive(&s, &l).activations.is_empty());

        // hv2 is now the main chassis: it claims and leaves additional_chassis.
        s.ports
            .get_mut(&uuid(101))
            .unwrap()
            .options
            .insert("requested-chassis".into(), "hv2".into());
        let v = derive(&s, &local(&ps));
        assert!(matches!(
            v.ports["mig"],
            PortView::Bound {
                role: Role::Main,
                ..
            }
        ));
        assert!(v.claims.contains(&uuid(101)) && v.leaves == vec![uuid(101)]);
    }

    /// Where the logical pipelines place a multi-chassis port (as
    /// `multi_chassis_binding_and_activation`'s, hv1 main, hv2 additional): seen from
    /// hv2, on hv1 alone while it awaits activation, here and on hv1 once announced;
    /// seen from a third chassis, on both. A port requested on another chassis only is
    /// not here though a local port names it.
    #[test]
    fn pipeline_locations_of_a_multi_chassis_port() {
        use crate::ovn::pipeline::tables::{Location, Pipelines, Viewpoint};
        let mut s = sb();
        {
            let p = s.ports.get_mut(&uuid(101)).unwrap();
            p.options
                .insert("requested-chassis".into(), "hv1,hv2".into());
            p.options
                .insert("activation-strategy".into(), "rarp".into());
            p.additional_chassis = vec![uuid(11)];
        }
        let location = |s: &Sb, l: &Local<'_>, me: Uuid| {
            let inactive = inactive_ports(s, l);
            let lsps: Vec<String> = l.ports.values().cloned().collect();
            let view = Viewpoint::Claiming {
                me: Some(me),
                ports: &lsps,
                inactive: &inactive,
                networks: &[],
            };
            let p = Pipelines::build(s, &[uuid(1)], view);
            let (d, k) = p.ports["p-hv1"];
            p.datapaths[&d].ports[&k].location.clone()
        };
        let ps = ports(&[("vm1", "p-here"), ("mig", "p-hv1")]);
        assert_eq!(inactive_ports(&s, &local(&ps)), vec!["p-hv1".to_string()]);
        assert_eq!(
            location(&s, &local(&ps), uuid(11)),
            Location::Remote("hv1".into())
        );
        let announced: BTreeSet<String> = ["mig".to_string()].into();
        let mut l = local(&ps);
        l.announced = &announced;
        assert_eq!(
            location(&s, &l, uuid(11)),
            Location::Multi {
                here: true,
                remotes: vec!["hv1".into()]
            }
        );
        // A third chassis (no local port names it).
        let none = ports(&[]);
        assert_eq!(
            location(&s, &local(&none), uuid(12)),
            Location::Multi {
                here: false,
                remotes: vec!["hv1".into(), "hv2".into()]
            }
        );
        // Requested on hv1 alone: the local port that names it is not it.
        {
            let p = s.ports.get_mut(&uuid(101)).unwrap();
            p.options.insert("requested-chassis".into(), "hv1".into());
            p.additional_chassis.clear();
        }
        assert_eq!(
            location(&s, &local(&ps), uuid(11)),
            Location::Remote("hv1".into())
        );
    }

    /// A switch no changed row touched is taken from the previous view as it is (the
    /// same allocation); a touched one is derived again and shows the change.
    #[test]
    fn untouched_switches_carry_over() {
        let mut s = sb();
        let ps = ports(&[("vm1", "p-here")]);
        let first = derive(&s, &local(&ps));
        let same = derive_reusing(&s, &local(&ps), Some(&first), &Touched::default());
        assert!(Arc::ptr_eq(
            &first.datapaths[&uuid(1)],
            &same.datapaths[&uuid(1)]
        ));
        s.ports.get_mut(&uuid(101)).unwrap().mac = vec!["02:00:00:00:00:22".into()];
        let mut touched = Touched::default();
        touched.datapaths.insert(uuid(1));
        let next = derive_reusing(&s, &local(&ps), Some(&first), &touched);
        let d = &next.datapaths[&uuid(1)];
        assert!(d
            .fdb
            .iter()
            .any(|(m, _)| m.to_string() == "02:00:00:00:00:22"));
        assert_eq!(next, derive(&s, &local(&ps)));
    }
}
