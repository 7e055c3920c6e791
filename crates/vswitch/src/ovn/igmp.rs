//! Memberships snooped in OVN logical switches, written to the Southbound `IGMP_Group`
//! table as ovn-controller writes them (`controller/ip-mcast.c`, driven by `pinctrl`'s
//! `ip_mcast_sync`): one row per group, logical switch and chassis, naming the member
//! ports here. ovn-northd merges every chassis' rows of a group into the
//! `Multicast_Group` named by the group's address, and the data path sends the
//! group's frames to that (here and to the chassis with members). A group whose last
//! local member leaves or ages out loses its row.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ovsdb::{Client, Condition, Operation, Row, Uuid};
use tracing::{info, warn};

use super::apply::Pass;
use super::sb::IgmpGroup;
use super::view::{PortView, View};
use crate::model::mcast::Member;
use crate::switch::Switch;

/// Keeps this chassis' `IGMP_Group` rows current: written when a membership came or
/// went, and after every pass (a port's binding or switch may have changed; an empty
/// difference writes nothing).
#[derive(Debug, Default)]
pub struct Sync {
    /// The [`crate::model::mcast::Mcast::generation`] last written.
    seen: u64,
    /// A pass ran since the rows were last written.
    pub stale: bool,
}

impl Sync {
    /// Writes the rows if anything they come from moved.
    pub async fn run(&mut self, client: &Client, pass: &Pass, sw: &Switch) {
        let g = sw.mcast.generation();
        if g == self.seen && !self.stale {
            return;
        }
        let Some((view, me)) = pass.published() else {
            return;
        };
        match publish(client, me, &local(sw, view)).await {
            Ok(n) => {
                (self.seen, self.stale) = (g, false);
                if n > 0 {
                    info!(rows = n, "multicast memberships written to IGMP_Group");
                }
            }
            Err(e) => warn!(error = %e, "OVN IGMP_Group update failed; tried again"),
        }
    }
}

/// An `IGMP_Group` row's index without the chassis: (logical switch, address).
pub type Key = (Uuid, String);

/// The memberships of local ports in the snooping OVN logical switches of `view`, as
/// `IGMP_Group` rows: (switch, address) -> the member ports' bindings.
pub fn local(sw: &Switch, view: &View) -> BTreeMap<Key, BTreeSet<Uuid>> {
    // (switch key, port key) -> (switch, binding), of the ports bound here.
    let mut bindings: HashMap<(u32, u16), (Uuid, Uuid)> = HashMap::new();
    for p in view.ports.values() {
        if let PortView::Bound {
            binding,
            datapath,
            key,
            ..
        } = p
        {
            if let Some(d) = view.datapaths.get(datapath).filter(|d| d.snoop) {
                bindings.insert((d.tunnel_key, *key), (*datapath, *binding));
            }
        }
    }
    let mut out: BTreeMap<Key, BTreeSet<Uuid>> = BTreeMap::new();
    if bindings.is_empty() {
        return out;
    }
    let topo = sw.topo();
    let (rows, _) = sw.mcast.rows();
    for r in rows {
        let (Member::Port(p), Some(o)) = (r.member, topo.ovn.domain(r.domain)) else {
            continue;
        };
        let Some(&(key, _)) = o.local_by_key.iter().find(|(_, port)| *port == p) else {
            continue;
        };
        if let Some(&(dp, binding)) = bindings.get(&(o.tunnel_key, key)) {
            out.entry((dp, r.group.to_string()))
                .or_default()
                .insert(binding);
        }
    }
    out
}

/// Makes chassis `me`'s `IGMP_Group` rows what `want` says: rows inserted for new
/// groups, their ports updated, rows of groups no local port is in any more deleted.
/// Returns the rows written.
///
/// # Errors
/// The transaction failed (it is tried again on the next tick).
pub async fn publish(
    client: &Client,
    me: Uuid,
    want: &BTreeMap<Key, BTreeSet<Uuid>>,
) -> Result<usize, String> {
    let mut ops = Vec::new();
    let mut kept: BTreeSet<Key> = BTreeSet::new();
    for (u, g) in client.replica().rows::<IgmpGroup>() {
        if g.chassis != Some(me) {
            continue;
        }
        let key = g.datapath.map(|dp| (dp, g.address.clone()));
        match key
            .filter(|k| !kept.contains(k))
            .and_then(|k| want.get_key_value(&k))
        {
            Some((k, ports)) => {
                kept.insert(k.clone());
                if g.ports.iter().copied().collect::<BTreeSet<Uuid>>() != *ports {
                    ops.push(Operation::update(
                        "IGMP_Group",
                        vec![Condition::uuid(u)],
                        Row::new().with("ports", ports.clone()),
                    ));
                }
            }
            None => ops.push(Operation::delete("IGMP_Group", vec![Condition::uuid(u)])),
        }
    }
    for ((dp, address), ports) in want {
        if kept.contains(&(*dp, address.clone())) {
            continue;
        }
        ops.push(Operation::insert(
            "IGMP_Group",
            Row::new()
                .with("address", address.as_str())
                .with("datapath", Some(*dp))
                .with("chassis", Some(me))
                .with("ports", ports.clone()),
        ));
    }
    super::transact_ops(client, ops, "writing multicast memberships to IGMP_Group").await
}
