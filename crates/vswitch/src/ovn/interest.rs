//! What this chassis monitors of the tables that grow with the deployment, as
//! ovn-controller does by default (`ovn-monitor-all=false`, its `update_sb_monitors`):
//! only the `Port_Binding`, `Multicast_Group` and `FDB` rows of the logical switches
//! with a local port, the bindings its ports name or it holds, and the router ports
//! its switches peer with; of `IGMP_Group` only its own rows, to keep them current.
//! The server filters (`monitor_cond_change`), so a chassis with 200 ports in a
//! deployment of 20,000 replicates, decodes and derives from its own part only.
//!
//! The interest follows the view: a port's binding arrives, its switch becomes local,
//! that switch's rows arrive on the next change of condition. The logical pipeline
//! widens it as ovn-controller's local datapaths do: through each patch port to its
//! peer's datapath (a router, then the router's other switches), so the pipeline of
//! every datapath a local packet can enter is here; their `Logical_Flow` rows (by
//! datapath and datapath group) and `MAC_Binding` rows come with them. A local port's
//! switch is in the interest before its binding is claimed: no port is claimed before
//! its switch's flows are here (whether it has ACLs is known from them).
//! `Chassis`, `Encap`, `Datapath_Binding`, the address sets, port groups, option
//! tables and the patch ports' bindings are monitored whole.

use std::collections::{BTreeMap, BTreeSet};

use ovsdb::{Client, Condition, Function, Uuid};

use super::view::{PortView, Sb, View};

/// The rows of the conditioned tables this chassis needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interest {
    /// Logical ports by name: the local ports' and the patch ports' peers of the
    /// local datapaths.
    lsps: BTreeSet<String>,
    /// This chassis' row: the bindings it holds (to release what no port is any more).
    me: Option<Uuid>,
    /// The local datapaths: the logical switches of the local ports, and what their
    /// patch ports reach.
    datapaths: BTreeSet<Uuid>,
    /// Their keys (`FDB.dp_key`).
    keys: BTreeSet<i64>,
    /// The logical flow datapath groups with a local datapath.
    dp_groups: BTreeSet<Uuid>,
    /// The HA groups naming this chassis: their gateway ports' routers are local.
    gateways: BTreeSet<Uuid>,
}

impl Interest {
    /// What the chassis `me`, with local ports `ports` (name -> logical port), needs
    /// once it has derived `view` from `sb`.
    pub fn of(ports: &BTreeMap<String, String>, me: Option<Uuid>, view: &View, sb: &Sb) -> Self {
        let mut i = Interest {
            lsps: ports.values().cloned().collect(),
            me,
            ..Interest::default()
        };
        for p in view.ports.values() {
            if let PortView::Bound { datapath, .. } = p {
                i.datapaths.insert(*datapath);
            }
        }
        // The routers whose gateway port this chassis may hold.
        if let Some(me) = me {
            i.gateways = super::gateway::groups_of(sb, me);
        }
        for pb in sb.ports.values() {
            if pb.ha_chassis_group.is_some_and(|g| i.gateways.contains(&g)) {
                i.datapaths.insert(pb.datapath);
            }
        }
        // The switches of the local ports not bound (yet): their pipelines decide
        // whether they can be.
        for pb in sb.ports.values() {
            if pb.kind.is_empty() && i.lsps.contains(&pb.logical_port) {
                i.datapaths.insert(pb.datapath);
            }
        }
        i.follow_patch_ports(sb);
        for dp in &i.datapaths {
            i.keys.extend(sb.datapaths.get(dp).map(|d| d.tunnel_key));
        }
        for (u, g) in &sb.dp_groups {
            if g.datapaths.iter().any(|d| i.datapaths.contains(d)) {
                i.dp_groups.insert(*u);
            }
        }
        i
    }

    /// Adds the peers of the local datapaths' patch ports, and their datapaths, until
    /// nothing new is reached with the rows at hand (the rows a new datapath brings
    /// widen it on the next pass).
    fn follow_patch_ports(&mut self, sb: &Sb) {
        let by_name: std::collections::HashMap<&str, Uuid> = sb
            .ports
            .values()
            .map(|pb| (pb.logical_port.as_str(), pb.datapath))
            .collect();
        loop {
            let mut grew = false;
            for pb in sb.ports.values() {
                if !matches!(pb.kind.as_str(), "patch" | "router" | "l3gateway")
                    || !self.datapaths.contains(&pb.datapath)
                {
                    continue;
                }
                let peer = pb.options.get("peer").or(pb.options.get("router-port"));
                let Some(peer) = peer else { continue };
                self.lsps.insert(peer.clone());
                if let Some(d) = by_name.get(peer.as_str()) {
                    grew |= self.datapaths.insert(*d);
                }
            }
            if !grew {
                break;
            }
        }
    }

    /// The local datapaths (their logical pipelines are built).
    pub fn datapaths(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.datapaths.iter().copied()
    }

    /// The tables and conditions to monitor them with (the initial monitor request
    /// uses [`Interest::default`]: none of their rows). Every clause is `==`, so
    /// ovsdb-server finds a row's match in its condition's hash index instead of
    /// testing each clause (at 400 local switches of 2,000, `includes` clauses made
    /// each condition change cost the server seconds).
    pub fn conditions(&self) -> [(&'static str, Vec<Condition>); 6] {
        let mut pb = patch_ports();
        pb.extend(
            self.lsps
                .iter()
                .map(|l| Condition::eq("logical_port", l.as_str())),
        );
        if let Some(me) = self.me {
            pb.push(Condition::eq("chassis", me));
            // `==` on the whole set, not `includes`: a single clause other than `==`
            // makes ovsdb-server test every clause against every row (its condition
            // index, `ovsdb_condition_optimize`, takes `==` conditions only). A
            // binding that names this chassis among other additional chassis comes
            // only when a local port names it: a stale one of those is not released.
            let set: BTreeSet<Uuid> = [me].into();
            pb.push(Condition::new("additional_chassis", Function::Equal, set));
        }
        let by_dp = || -> Vec<Condition> {
            self.datapaths
                .iter()
                .map(|d| Condition::eq("datapath", *d))
                .collect()
        };
        pb.extend(by_dp());
        pb.extend(
            self.gateways
                .iter()
                .map(|g| Condition::eq("ha_chassis_group", *g)),
        );
        let fdb = self
            .keys
            .iter()
            .map(|k| Condition::eq("dp_key", *k))
            .collect();
        let igmp = self
            .me
            .iter()
            .map(|me| Condition::eq("chassis", *me))
            .collect();
        let mut flows: Vec<Condition> = self
            .datapaths
            .iter()
            .map(|d| Condition::eq("logical_datapath", *d))
            .collect();
        flows.extend(
            self.dp_groups
                .iter()
                .map(|g| Condition::eq("logical_dp_group", *g)),
        );
        [
            ("Port_Binding", pb),
            ("Multicast_Group", or_none(by_dp())),
            ("FDB", or_none(fdb)),
            ("IGMP_Group", or_none(igmp)),
            ("Logical_Flow", or_none(flows)),
            ("MAC_Binding", or_none(by_dp())),
        ]
    }

    /// Moves the server's conditions from `prev` to this interest (only the tables
    /// whose condition changed). The rows that now match arrive as a change set.
    ///
    /// # Errors
    /// The server refused a condition (the session reconnects with it).
    pub async fn apply(&self, prev: &Interest, client: &Client) -> Result<(), String> {
        // Sent together and awaited together: one round trip, not one per table.
        let changes = self
            .conditions()
            .into_iter()
            .zip(prev.conditions())
            .filter(|((_, cond), (_, old))| cond != old)
            .map(|((table, cond), _)| async move {
                client
                    .set_condition(table, cond)
                    .await
                    .map_err(|e| format!("monitoring {table}: {e}"))
            });
        futures::future::try_join_all(changes).await?;
        Ok(())
    }
}

/// Every patch port's binding (both sides of each switch-router and router-router
/// link, a few rows per datapath), whatever the interest, as ovn-controller monitors
/// them: a pass follows the links from its switches to their routers and the routers'
/// other switches at once, instead of one condition change per hop.
pub fn patch_ports() -> Vec<Condition> {
    vec![Condition::eq("type", "patch")]
}

/// `clauses`, or a condition no row matches when there is none (an empty list would
/// match every row).
fn or_none(clauses: Vec<Condition>) -> Vec<Condition> {
    if clauses.is_empty() {
        vec![Condition::Const(false)]
    } else {
        clauses
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ovn::sb::{DatapathBinding, PortBinding};
    use crate::ovn::view::Role;

    fn pb(lsp: &str, dp: Uuid, kind: &str, peer: Option<&str>) -> PortBinding {
        PortBinding {
            uuid: Uuid::nil(),
            logical_port: lsp.into(),
            kind: kind.into(),
            datapath: dp,
            tunnel_key: 1,
            mac: Vec::new(),
            chassis: None,
            additional_chassis: Vec::new(),
            requested_chassis: None,
            options: peer
                .map(|p| [("router-port".to_string(), p.to_string())].into())
                .unwrap_or_default(),
            port_security: Vec::new(),
            up: None,
            tag: None,
            ha_chassis_group: None,
        }
    }

    /// Nothing at first; then the local ports' bindings, the rows the chassis holds,
    /// its switches' rows (by uuid and key) and the router ports they peer with.
    #[test]
    fn interest_follows_the_view() {
        let none = Interest::default().conditions();
        assert_eq!(none[0].1, patch_ports(), "the patch ports only");
        assert!(none[1..]
            .iter()
            .all(|(_, c)| *c == vec![Condition::Const(false)]));
        let (dp, other, me) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(9));
        let mut sb = Sb::default();
        sb.datapaths.insert(
            dp,
            DatapathBinding {
                uuid: dp,
                tunnel_key: 5,
                external_ids: Default::default(),
            },
        );
        sb.ports
            .insert(Uuid::from_u128(10), pb("lsp-a", dp, "", None));
        sb.ports
            .insert(Uuid::from_u128(11), pb("rp", dp, "router", Some("lrp0")));
        sb.ports.insert(
            Uuid::from_u128(12),
            pb("rp2", other, "router", Some("lrp9")),
        );
        let ports: BTreeMap<String, String> = [("vm1".to_string(), "lsp-a".to_string())].into();
        let mut view = View::default();
        view.ports.insert(
            "vm1".into(),
            PortView::Bound {
                binding: Uuid::from_u128(10),
                datapath: dp,
                key: 1,
                security: Vec::new(),
                up: false,
                role: Role::Main,
            },
        );
        let i = Interest::of(&ports, Some(me), &view, &sb);
        let lsps: Vec<&str> = i.lsps.iter().map(String::as_str).collect();
        assert_eq!(lsps, ["lrp0", "lsp-a"], "not the other switch's peer");
        let [(_, pbc), (_, mg), (_, fdb), (_, igmp), (_, flows), (_, mb)] = i.conditions();
        assert!(flows.contains(&Condition::eq("logical_datapath", dp)));
        assert_eq!(mb, vec![Condition::eq("datapath", dp)]);
        assert_eq!(
            igmp,
            vec![Condition::eq("chassis", me)],
            "its own rows only"
        );
        assert!(pbc.contains(&Condition::eq("logical_port", "lsp-a")));
        assert!(pbc.contains(&Condition::eq("chassis", me)));
        assert!(pbc.contains(&Condition::eq("datapath", dp)));
        assert_eq!(mg, vec![Condition::eq("datapath", dp)]);
        assert_eq!(fdb, vec![Condition::eq("dp_key", 5i64)]);
        // ovsdb-server indexes a condition only when all its clauses are `==`.
        for (table, clauses) in i.conditions() {
            for c in clauses {
                assert!(
                    matches!(
                        c,
                        Condition::Const(_)
                            | Condition::Compare {
                                function: Function::Equal,
                                ..
                            }
                    ),
                    "{table}: {c:?}"
                );
            }
        }
    }
}
