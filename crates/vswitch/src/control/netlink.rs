//! The host kernel's network state, followed through rtnetlink on the control plane's
//! runtime (the `rtnetlink` crate on a tokio socket): links, addresses, routes and
//! neighbours. This task is the one owner of uplink and tap link state: it sets each
//! port's link (and an uplink's MTU) from the kernel's notifications.
//!
//! The state is read whole at start and again every [`RESYNC`] (notifications can be
//! lost when the socket's buffer overflows), and kept current from the multicast
//! groups in between. Addresses, routes and neighbours are kept for the overlay (its
//! tunnel endpoints' next hops come from the kernel's tables).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::stream::{StreamExt, TryStreamExt};
use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage};
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::{new_multicast_connection, Handle, MulticastGroup, RouteMessageBuilder};
use tracing::{debug, info, warn};

use crate::ports::PortKind;
use crate::switch::Switch;

/// How often the whole state is read again.
pub const RESYNC: Duration = Duration::from_secs(10);

/// One network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Interface name.
    pub name: String,
    /// Administratively up (`IFF_UP`).
    pub admin_up: bool,
    /// Operationally up (`IFF_RUNNING`: carrier).
    pub running: bool,
    /// MTU, bytes.
    pub mtu: u32,
    /// Its MAC address.
    pub mac: Option<[u8; 6]>,
}

impl Link {
    /// Frames can be sent: up and running.
    pub fn usable(&self) -> bool {
        self.admin_up && self.running
    }
}

/// One route of the main table: destination prefix and its next hops (gateway, output
/// interface); several next hops for ECMP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination network.
    pub dst: IpAddr,
    /// Its prefix length.
    pub prefix: u8,
    /// Next hops: gateway (none: on link) and output interface index.
    pub hops: Vec<(Option<IpAddr>, u32)>,
}

/// One neighbour (ARP / NDP) entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// Link-layer address, once resolved.
    pub mac: Option<[u8; 6]>,
    /// The kernel's state (`reachable`, `stale`, `incomplete`, `failed`, …).
    pub state: String,
}

/// The kernel's tables as last read.
#[derive(Debug, Clone, Default)]
pub struct NetState {
    /// Links by ifindex.
    pub links: BTreeMap<u32, Link>,
    /// Addresses: (ifindex, address, prefix length).
    pub addrs: Vec<(u32, IpAddr, u8)>,
    /// Routes of the main table.
    pub routes: Vec<Route>,
    /// Neighbours by (ifindex, address).
    pub neighbours: HashMap<(u32, IpAddr), Neighbour>,
}

/// Follows the kernel's network state into `net` and the switch's ports until the
/// runtime stops. Without rtnetlink (an error opening the socket) ports keep the link
/// state they were opened with; that is logged.
pub async fn watch(
    switch: Arc<Switch>,
    net: Arc<RwLock<NetState>>,
    changed: Arc<tokio::sync::Notify>,
) {
    let groups = [
        MulticastGroup::Link,
        MulticastGroup::Ipv4Ifaddr,
        MulticastGroup::Ipv6Ifaddr,
        MulticastGroup::Ipv4Route,
        MulticastGroup::Ipv6Route,
        MulticastGroup::Neigh,
    ];
    let (conn, handle, mut messages) = match new_multicast_connection(&groups) {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "cannot watch the kernel's network state (rtnetlink); ports keep their link state from start");
            return;
        }
    };
    tokio::spawn(conn);
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            _ = resync.tick() => match dump(&handle).await {
                Ok(state) => {
                    *net.write().unwrap_or_else(|e| e.into_inner()) = state;
                    apply_links(&switch, &net);
                    changed.notify_one();
                }
                Err(e) => warn!(error = %e, "reading the kernel's network state failed"),
            },
            m = messages.next() => {
                let Some((m, _)) = m else {
                    warn!("rtnetlink notifications ended");
                    return;
                };
                if let rtnetlink::packet_core::NetlinkPayload::InnerMessage(m) = m.payload {
                    let links = matches!(m, RouteNetlinkMessage::NewLink(_) | RouteNetlinkMessage::DelLink(_));
                    update(&mut net.write().unwrap_or_else(|e| e.into_inner()), m);
                    if links {
                        apply_links(&switch, &net);
                    }
                    changed.notify_one();
                }
            }
        }
    }
}

/// Reads the whole state.
async fn dump(h: &Handle) -> Result<NetState, rtnetlink::Error> {
    let mut s = NetState::default();
    let mut links = h.link().get().execute();
    while let Some(m) = links.try_next().await? {
        let (i, l) = link(&m);
        s.links.insert(i, l);
    }
    let mut addrs = h.address().get().execute();
    while let Some(m) = addrs.try_next().await? {
        s.addrs.extend(addr(&m));
    }
    for v4 in [true, false] {
        let req = if v4 {
            RouteMessageBuilder::<std::net::Ipv4Addr>::new().build()
        } else {
            RouteMessageBuilder::<std::net::Ipv6Addr>::new().build()
        };
        let mut routes = h.route().get(req).execute();
        while let Some(m) = routes.try_next().await? {
            s.routes.extend(route(&m));
        }
    }
    let mut neigh = h.neighbours().get().execute();
    while let Some(m) = neigh.try_next().await? {
        if let Some((k, n)) = neighbour(&m) {
            s.neighbours.insert(k, n);
        }
    }
    Ok(s)
}

/// Applies one notification.
fn update(s: &mut NetState, m: RouteNetlinkMessage) {
    match m {
        RouteNetlinkMessage::NewLink(m) => {
            let (i, l) = link(&m);
            debug!(ifindex = i, ?l, "link");
            s.links.insert(i, l);
        }
        RouteNetlinkMessage::DelLink(m) => {
            s.links.remove(&m.header.index);
        }
        RouteNetlinkMessage::NewAddress(m) => {
            for a in addr(&m) {
                if !s.addrs.contains(&a) {
                    s.addrs.push(a);
                }
            }
        }
        RouteNetlinkMessage::DelAddress(m) => {
            let gone = addr(&m);
            s.addrs.retain(|a| !gone.contains(a));
        }
        RouteNetlinkMessage::NewRoute(m) => {
            if let Some(r) = route(&m) {
                s.routes.retain(|x| !same_route(x, &r));
                s.routes.push(r);
            }
        }
        RouteNetlinkMessage::DelRoute(m) => {
            if let Some(r) = route(&m) {
                s.routes.retain(|x| !same_route(x, &r));
            }
        }
        RouteNetlinkMessage::NewNeighbour(m) => {
            if let Some((k, n)) = neighbour(&m) {
                s.neighbours.insert(k, n);
            }
        }
        RouteNetlinkMessage::DelNeighbour(m) => {
            if let Some((k, _)) = neighbour(&m) {
                s.neighbours.remove(&k);
            }
        }
        _ => {}
    }
}

/// Whether two routes are one kernel route (same destination, same first output
/// interface: two interfaces on one network each have their own).
fn same_route(a: &Route, b: &Route) -> bool {
    (a.dst, a.prefix, a.hops.first().map(|h| h.1)) == (b.dst, b.prefix, b.hops.first().map(|h| h.1))
}

/// Sets every uplink's and tap's link state (and an uplink's MTU) from the kernel's.
fn apply_links(switch: &Switch, net: &RwLock<NetState>) {
    let net = net.read().unwrap_or_else(|e| e.into_inner());
    let mut changed = false;
    for tp in switch.topo().iter() {
        let p = &tp.port;
        match &p.kind {
            PortKind::Tap(t) => {
                // The tap has carrier while vswitchd holds it: only IFF_UP matters. A
                // tap moved to another network namespace (a container's, a test's
                // "VM") is out of this watcher's sight: it counts as up, and the
                // kernel's refusal of writes to a downed tap is counted (`tx_error`).
                let up = net.links.get(&t.ifindex).is_none_or(|l| l.admin_up);
                if up != t.link_up() {
                    info!(port = %p.name, iface = %t.ifname, link = if up { "up" } else { "down" }, "tap link state");
                    t.set_link(up);
                    changed = true;
                }
            }
            PortKind::Afxdp(x) => {
                let l = net.links.get(&x.ifindex);
                let up = l.is_some_and(Link::usable);
                let mtu = l.map_or(x.mtu(), |l| if l.mtu == 0 { x.mtu() } else { l.mtu });
                if up != x.link_up() || mtu != x.mtu() {
                    info!(port = %p.name, iface = %x.iface, link = if up { "up" } else { "down" }, mtu, "uplink link state");
                    // Learned MACs stay: frames switched to a down uplink are counted
                    // as `port_down` until it comes back or they age out.
                    x.set_link(up, mtu);
                    changed = true;
                }
            }
            PortKind::Vhost(_) => {}
        }
    }
    if changed {
        switch.wakers.wake_all();
    }
}

fn link(m: &LinkMessage) -> (u32, Link) {
    let mut l = Link {
        name: String::new(),
        admin_up: m.header.flags.contains(LinkFlags::Up),
        running: m.header.flags.contains(LinkFlags::Running),
        mtu: 0,
        mac: None,
    };
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => l.name = n.clone(),
            LinkAttribute::Mtu(v) => l.mtu = *v,
            LinkAttribute::Address(b) if b.len() == 6 => {
                l.mac = Some([b[0], b[1], b[2], b[3], b[4], b[5]])
            }
            _ => {}
        }
    }
    (m.header.index, l)
}

fn addr(m: &AddressMessage) -> Vec<(u32, IpAddr, u8)> {
    m.attributes
        .iter()
        .filter_map(|a| match a {
            AddressAttribute::Address(ip) | AddressAttribute::Local(ip) => Some(*ip),
            _ => None,
        })
        .map(|ip| (m.header.index, ip, m.header.prefix_len))
        .fold(Vec::new(), |mut v, a| {
            if !v.contains(&a) {
                v.push(a);
            }
            v
        })
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v) => Some(IpAddr::V4(*v)),
        RouteAddress::Inet6(v) => Some(IpAddr::V6(*v)),
        _ => None,
    }
}

/// A main-table unicast route; `None` for the others.
fn route(m: &RouteMessage) -> Option<Route> {
    if m.header.table != rtnetlink::packet_route::route::RouteHeader::RT_TABLE_MAIN {
        return None;
    }
    let v4 = m.header.address_family == rtnetlink::packet_route::AddressFamily::Inet;
    let mut r = Route {
        dst: if v4 {
            IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
        },
        prefix: m.header.destination_prefix_length,
        hops: Vec::new(),
    };
    let (mut gw, mut oif) = (None, 0);
    for a in &m.attributes {
        match a {
            RouteAttribute::Destination(d) => r.dst = route_ip(d)?,
            RouteAttribute::Gateway(g) => gw = route_ip(g),
            RouteAttribute::Oif(i) => oif = *i,
            RouteAttribute::MultiPath(hops) => {
                for h in hops {
                    let g = h.attributes.iter().find_map(|a| match a {
                        RouteAttribute::Gateway(g) => route_ip(g),
                        _ => None,
                    });
                    r.hops.push((g, h.interface_index));
                }
            }
            _ => {}
        }
    }
    if r.hops.is_empty() {
        r.hops.push((gw, oif));
    }
    Some(r)
}

fn neighbour(m: &NeighbourMessage) -> Option<((u32, IpAddr), Neighbour)> {
    let mut ip = None;
    let mut mac = None;
    for a in &m.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v)) => ip = Some(IpAddr::V4(*v)),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v)) => {
                ip = Some(IpAddr::V6(*v))
            }
            NeighbourAttribute::LinkLayerAddress(b) if b.len() == 6 => {
                mac = Some([b[0], b[1], b[2], b[3], b[4], b[5]])
            }
            _ => {}
        }
    }
    Some((
        (m.header.ifindex, ip?),
        Neighbour {
            mac,
            state: format!("{:?}", m.header.state).to_lowercase(),
        },
    ))
}
