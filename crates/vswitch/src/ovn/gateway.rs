//! Gateway ports on this chassis: the `chassisredirect` bindings of distributed gateway
//! ports, which the active chassis of each port's `HA_Chassis_Group` holds. The
//! decision is ovn-controller's (`controller/ha-chassis.c`,
//! `ha_chassis_group_is_active`; `binding.c` claims and releases the binding by it):
//!
//! - a group of one chassis: that chassis;
//! - a chassis that is the only one of its group still registered: it;
//! - otherwise the highest-priority chassis (ties: the greater name) among this one
//!   and those whose tunnel's BFD session is up (`active_tunnels`); a chassis with no
//!   session up has lost the others and is active nowhere, and one that sees no other
//!   candidate is active only while it still reaches one of the group's reference
//!   chassis (the chassis with ports behind the gateway).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ovsdb::Uuid;

use super::rows::Sb;
use super::sb::HaChassisGroup;

/// Whether chassis `me` is the active chassis of `group`, the chassis whose tunnel
/// BFD is up being `active` (by name).
pub fn is_active(sb: &Sb, group: &HaChassisGroup, me: Uuid, active: &BTreeSet<String>) -> bool {
    let members: Vec<(Option<Uuid>, i64)> = group
        .ha_chassis
        .iter()
        .filter_map(|u| sb.ha_chassis.get(u))
        .map(|h| (h.chassis, h.priority))
        .collect();
    if members.len() <= 1 {
        return members.first().is_some_and(|m| m.0 == Some(me));
    }
    let registered: Vec<(Uuid, i64)> = members.iter().filter_map(|&(c, p)| Some((c?, p))).collect();
    if registered.len() == 1 && registered[0].0 == me {
        return true;
    }
    if active.is_empty() {
        return false;
    }
    let name = |c: Uuid| sb.chassis.get(&c).map_or("", |ch| ch.name.as_str());
    let mut live: Vec<(i64, &str, Uuid)> = registered
        .iter()
        .filter(|&&(c, _)| c == me || active.contains(name(c)))
        .map(|&(c, p)| (p, name(c), c))
        .collect();
    if live.len() == 1 {
        let reaches_a_reference = group.ref_chassis.iter().any(|r| active.contains(name(*r)));
        return reaches_a_reference && live[0].2 == me;
    }
    live.sort_by(|a, b| (b.0, b.1).cmp(&(a.0, a.1)));
    live.first().is_some_and(|l| l.2 == me)
}

/// The gateway bindings (`chassisredirect`, with an HA group that names `me`) this
/// chassis is to claim (active, not held yet) and to release (held, not active).
pub fn claims_and_releases(sb: &Sb, me: Uuid, active: &BTreeSet<String>) -> (Vec<Uuid>, Vec<Uuid>) {
    let (mut claims, mut releases) = (Vec::new(), Vec::new());
    for (u, pb) in &sb.ports {
        if pb.kind != "chassisredirect" {
            continue;
        }
        let Some(group) = pb.ha_chassis_group.and_then(|g| sb.ha_groups.get(&g)) else {
            continue;
        };
        let mine = is_active(sb, group, me, active);
        if mine && pb.chassis != Some(me) {
            claims.push(*u);
        } else if !mine && pb.chassis == Some(me) {
            releases.push(*u);
        }
    }
    claims.sort();
    releases.sort();
    (claims, releases)
}

/// The HA groups that name chassis `me`: the gateway ports it may hold.
pub fn groups_of(sb: &Sb, me: Uuid) -> BTreeSet<Uuid> {
    sb.ha_groups
        .iter()
        .filter(|(_, g)| {
            g.ha_chassis
                .iter()
                .filter_map(|h| sb.ha_chassis.get(h))
                .any(|h| h.chassis == Some(me))
        })
        .map(|(u, _)| *u)
        .collect()
}

/// The chassis this one runs BFD with, by name, with their Geneve endpoints
/// (ovn-controller's `bfd_calculate_chassis`): for each HA group of two or more
/// chassis, its members and reference chassis when this chassis is a member, its
/// members when this chassis is a reference chassis.
pub fn bfd_chassis(sb: &Sb, me: Uuid) -> BTreeMap<String, IpAddr> {
    let mut out = BTreeMap::new();
    for g in sb.ha_groups.values().filter(|g| g.ha_chassis.len() >= 2) {
        let members: Vec<Uuid> = g
            .ha_chassis
            .iter()
            .filter_map(|h| sb.ha_chassis.get(h)?.chassis)
            .collect();
        let peers: Vec<Uuid> = if members.contains(&me) {
            members.iter().chain(&g.ref_chassis).copied().collect()
        } else if g.ref_chassis.contains(&me) {
            members
        } else {
            continue;
        };
        for c in peers.into_iter().filter(|c| *c != me) {
            let Some(ch) = sb.chassis.get(&c) else {
                continue;
            };
            if ch
                .other_config
                .get("is-remote")
                .is_some_and(|v| v == "true")
            {
                continue;
            }
            if let Some(ip) = sb.encap_ip(ch) {
                out.insert(ch.name.clone(), ip);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ovn::sb::{Chassis, HaChassis};

    /// A database with chassis `names`, the first `prios.len()` of them in one group
    /// at `prios`, the chassis `refs` its reference chassis; returns it, the group
    /// and the chassis' rows.
    fn group(names: &[&str], prios: &[i64], refs: &[usize]) -> (Sb, HaChassisGroup, Vec<Uuid>) {
        let mut sb = Sb::default();
        let mut ids = Vec::new();
        let mut ha = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let c = Uuid::from_u128(100 + i as u128);
            let row = Chassis {
                uuid: c,
                name: n.to_string(),
                hostname: String::new(),
                encaps: Vec::new(),
                other_config: Default::default(),
            };
            sb.chassis.insert(c, row);
            ids.push(c);
            if let Some(&priority) = prios.get(i) {
                let h = Uuid::from_u128(200 + i as u128);
                let chassis = Some(c);
                let row = HaChassis {
                    uuid: h,
                    chassis,
                    priority,
                };
                sb.ha_chassis.insert(h, row);
                ha.push(h);
            }
        }
        let g = HaChassisGroup {
            uuid: Uuid::from_u128(300),
            name: "lrp".into(),
            ha_chassis: ha,
            ref_chassis: refs.iter().map(|&i| ids[i]).collect(),
        };
        (sb, g, ids)
    }

    fn up(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_group_of_one_is_its_chassis() {
        let (sb, g, ids) = group(&["gw1", "hv"], &[10], &[]);
        assert!(is_active(&sb, &g, ids[0], &up(&[])));
        assert!(!is_active(&sb, &g, ids[1], &up(&[])));
    }

    /// The highest priority among the live wins; with no BFD session up, nobody.
    #[test]
    fn the_highest_live_priority_wins() {
        let (sb, g, ids) = group(&["gw1", "gw2", "hv"], &[20, 10], &[2]);
        assert!(is_active(&sb, &g, ids[0], &up(&["gw2", "hv"])));
        assert!(!is_active(&sb, &g, ids[1], &up(&["gw1", "hv"])));
        assert!(!is_active(&sb, &g, ids[0], &up(&[])), "lost every session");
    }

    /// gw1 died: gw2 takes over while it reaches a reference chassis.
    #[test]
    fn the_next_takes_over_while_it_reaches_a_reference_chassis() {
        let (sb, g, ids) = group(&["gw1", "gw2", "hv", "other"], &[20, 10], &[2]);
        assert!(is_active(&sb, &g, ids[1], &up(&["hv"])));
        assert!(!is_active(&sb, &g, ids[1], &up(&["other"])));
    }

    /// Equal priorities: the greater name.
    #[test]
    fn ties_go_to_the_greater_name() {
        let (sb, g, ids) = group(&["a", "b"], &[10, 10], &[]);
        assert!(is_active(&sb, &g, ids[1], &up(&["a"])));
        assert!(!is_active(&sb, &g, ids[0], &up(&["b"])));
    }

    /// BFD peers: a member runs sessions with the other members and the reference
    /// chassis; a reference chassis with the members; anyone else with nobody. A
    /// group of one needs none.
    #[test]
    fn bfd_runs_with_the_group_and_its_reference_chassis() {
        let (mut sb, g, ids) = group(&["gw1", "gw2", "hv", "other"], &[20, 10], &[2]);
        for (i, c) in ids.iter().enumerate() {
            let e = Uuid::from_u128(400 + i as u128);
            let encap = crate::ovn::sb::Encap {
                uuid: e,
                kind: "geneve".into(),
                ip: format!("198.51.100.{}", i + 1),
                options: Default::default(),
                chassis_name: String::new(),
            };
            sb.encaps.insert(e, encap);
            sb.chassis.get_mut(c).unwrap().encaps = vec![e];
        }
        sb.ha_groups.insert(g.uuid, g.clone());
        let names = |me: usize| -> Vec<String> { bfd_chassis(&sb, ids[me]).into_keys().collect() };
        assert_eq!(names(0), ["gw2", "hv"]);
        assert_eq!(names(2), ["gw1", "gw2"]);
        assert!(names(3).is_empty());
        let (sb1, g1, ids1) = group(&["gw1", "hv"], &[20], &[1]);
        let mut sb1 = sb1;
        sb1.ha_groups.insert(g1.uuid, g1);
        assert!(bfd_chassis(&sb1, ids1[1]).is_empty(), "a group of one");
    }

    /// A chassis whose row went away leaves the other the only candidate.
    #[test]
    fn the_only_registered_candidate_is_active() {
        let (mut sb, g, ids) = group(&["gw1", "gw2"], &[20, 10], &[]);
        sb.ha_chassis.get_mut(&g.ha_chassis[0]).unwrap().chassis = None;
        assert!(is_active(&sb, &g, ids[1], &up(&[])));
    }
}
