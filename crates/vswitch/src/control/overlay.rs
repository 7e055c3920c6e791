//! The overlay's paths, kept current from the kernel's tables (DESIGN.md §6): for each
//! local tunnel endpoint and each remote endpoint, the route the kernel would take
//! (longest prefix, out of the endpoint's uplink, or out of the tap that holds its
//! address; several next hops for ECMP) and each
//! next hop's MAC from the kernel's neighbour table. No home-made ARP: a missing
//! neighbour is requested from the kernel (RTM_NEWNEIGH with NTF_USE, as a packet to it
//! would), and frames meanwhile are dropped and counted (`tunnel_no_neighbour`).
//!
//! Runs once a second and whenever the kernel's tables change; publishes a new topology
//! only when a path's MACs changed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use super::netlink::NetState;
use super::ops::Control;
use crate::model::tunnel::{Path, RemoteId};
use crate::switch::topology::Topology;

/// Each local endpoint's paths as computed: remote → (uplink MAC, next-hop MACs).
type FreshPaths = Vec<HashMap<RemoteId, ([u8; 6], Vec<[u8; 6]>)>>;

/// How often an unresolved neighbour is requested again.
const RESOLVE_EVERY: Duration = Duration::from_secs(1);

/// Keeps the paths current until the runtime stops.
pub async fn run(ctl: Arc<Control>) {
    let handle = match rtnetlink::new_connection() {
        Ok((conn, handle, _)) => {
            tokio::spawn(conn);
            Some(handle)
        }
        Err(e) => {
            warn!(error = %e, "cannot ask the kernel to resolve neighbours (rtnetlink)");
            None
        }
    };
    let mut asked: HashMap<(u32, IpAddr), Instant> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = ctl.net_changed.notified() => {}
        }
        let unresolved = refresh(&ctl);
        if let Some(h) = &handle {
            for (ifindex, ip) in unresolved {
                let now = Instant::now();
                if asked
                    .get(&(ifindex, ip))
                    .is_some_and(|t| now.duration_since(*t) < RESOLVE_EVERY)
                {
                    continue;
                }
                asked.insert((ifindex, ip), now);
                resolve(h, ifindex, ip).await;
            }
        }
    }
}

/// Recomputes every path from the kernel's tables, publishes them if any changed, and
/// returns the (interface, next hop) neighbours still unknown.
pub fn refresh(ctl: &Control) -> Vec<(u32, IpAddr)> {
    let topo = ctl.switch.topo();
    if topo.tunnels.teps.is_empty() {
        return Vec::new();
    }
    let net = ctl.net.read().unwrap_or_else(|e| e.into_inner()).clone();
    let remotes = ctl.switch.remotes.all();
    let mut unresolved = Vec::new();
    let mut fresh: FreshPaths = Vec::new();
    for tep in &topo.tunnels.teps {
        let mut m = HashMap::new();
        if let Some(ifindex) = address_ifindex(&topo, tep) {
            let src_mac = net
                .links
                .get(&ifindex)
                .and_then(|l| l.mac)
                .unwrap_or([0; 6]);
            for (rid, ip) in remotes.iter().enumerate() {
                if ip.is_ipv4() != tep.config.local.is_ipv4() {
                    continue;
                }
                let hops = next_hops(&net, *ip, ifindex, &mut unresolved);
                m.insert(rid as RemoteId, (src_mac, hops));
            }
        }
        fresh.push(m);
    }
    if changed(&topo, &fresh) {
        let r = ctl.switch.publish(|t| {
            t.tunnels.paths = fresh
                .into_iter()
                .map(|m| {
                    m.into_iter()
                        .map(|(rid, (src_mac, hops))| {
                            (
                                rid,
                                Arc::new(Path {
                                    src_mac,
                                    hops,
                                    ..Path::default()
                                }),
                            )
                        })
                        .collect()
                })
                .collect();
            Ok::<_, ()>(())
        });
        if let Ok((_, generation)) = r {
            info!(generation, "tunnel paths changed");
        }
    }
    unresolved.sort_unstable();
    unresolved.dedup();
    unresolved
}

/// The interface whose routes and neighbours lead to endpoint `tep`'s remotes, and
/// whose MAC its frames carry: the tap holding its address (`device`, OVS's `br-phy`
/// layout: the kernel routes and resolves through it, and the frames leave by the
/// uplink on the tap's network), else its uplink's.
fn address_ifindex(topo: &Topology, tep: &crate::model::tunnel::Tep) -> Option<u32> {
    let port = match &tep.config.device {
        Some(d) => topo.by_name(d)?,
        None => topo.port(tep.uplink)?,
    };
    match &port.port.kind {
        crate::ports::PortKind::Afxdp(x) => Some(x.ifindex),
        crate::ports::PortKind::Tap(t) => Some(t.ifindex),
        crate::ports::PortKind::Vhost(_) => None,
    }
}

/// Whether `fresh` differs from the topology's paths.
fn changed(topo: &Topology, fresh: &FreshPaths) -> bool {
    if topo.tunnels.paths.len() != fresh.len() {
        return true;
    }
    topo.tunnels.paths.iter().zip(fresh).any(|(old, new)| {
        old.len() != new.len()
            || new.iter().any(|(rid, (mac, hops))| {
                old.get(rid)
                    .is_none_or(|p| p.src_mac != *mac || p.hops != *hops)
            })
    })
}

/// The MACs of the next hops toward `ip` out of interface `ifindex` (the route's
/// gateways, or `ip` itself on a connected network); hops whose neighbour is not
/// known are added to `unresolved`.
fn next_hops(
    net: &NetState,
    ip: IpAddr,
    ifindex: u32,
    unresolved: &mut Vec<(u32, IpAddr)>,
) -> Vec<[u8; 6]> {
    let routes = lookup(net, ip);
    if routes.is_empty() {
        debug!(%ip, "no route to the remote endpoint");
    }
    let mut macs = Vec::new();
    for &(gw, oif) in routes.iter().flat_map(|r| r.hops.iter()) {
        if oif != ifindex {
            continue;
        }
        let nh = gw.unwrap_or(ip);
        match net.neighbours.get(&(oif, nh)) {
            Some(n) if usable(&n.state) && n.mac.is_some() => {
                macs.extend(n.mac);
            }
            _ => unresolved.push((oif, nh)),
        }
    }
    macs
}

/// The kernel neighbour states whose MAC may be used.
fn usable(state: &str) -> bool {
    matches!(
        state,
        "reachable" | "stale" | "delay" | "probe" | "permanent" | "noarp"
    )
}

/// The longest-prefix routes of the main table to `ip` (several when interfaces share a
/// network: each endpoint then takes the one out of its own uplink).
fn lookup(net: &NetState, ip: IpAddr) -> Vec<&super::netlink::Route> {
    let matching = net.routes.iter().filter(|r| contains(r.dst, r.prefix, ip));
    let Some(best) = matching.clone().map(|r| r.prefix).max() else {
        return Vec::new();
    };
    matching.filter(|r| r.prefix == best).collect()
}

fn contains(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(prefix.min(128)))
                .unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// Asks the kernel to resolve neighbour `ip` on `ifindex` (RTM_NEWNEIGH, NTF_USE: the
/// kernel sends an ARP request or neighbour solicitation as it would for a packet).
async fn resolve(h: &rtnetlink::Handle, ifindex: u32, ip: IpAddr) {
    use rtnetlink::packet_route::neighbour::{NeighbourFlags, NeighbourState};
    let r = h
        .neighbours()
        .add(ifindex, ip)
        .flags(NeighbourFlags::Use)
        .state(NeighbourState::Stale)
        .replace()
        .execute()
        .await;
    match r {
        Ok(()) => debug!(ifindex, %ip, "asked the kernel to resolve a neighbour"),
        Err(e) => debug!(ifindex, %ip, error = %e, "neighbour resolution request refused"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match() {
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(contains(a("198.51.100.0"), 24, a("198.51.100.7")));
        assert!(!contains(a("198.51.100.0"), 24, a("198.51.101.7")));
        assert!(contains(a("0.0.0.0"), 0, a("203.0.113.1")));
        assert!(contains(a("2001:db8::"), 64, a("2001:db8::2")));
        assert!(!contains(a("2001:db8::"), 64, a("2001:db8:1::2")));
        assert!(!contains(a("2001:db8::"), 64, a("198.51.100.7")));
    }
}
