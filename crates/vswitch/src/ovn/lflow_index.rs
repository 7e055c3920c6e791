//! The logical flows of each datapath, kept current as rows change, so that a pipeline
//! build visits the flows of the datapaths whose flows changed, not every flow of every
//! local datapath (a pass cost tens of ms at 30,000 flows before).
//!
//! A flow applies to its `logical_datapath` and to every datapath of its
//! `logical_dp_group` (ovn-sb(5) "Logical_Flow"); a group may arrive after the flows
//! naming it, and its membership may change, which moves every flow naming it. A
//! group's flows are listed once, under the group, not under each of its datapaths: a
//! group of all 2,000 switches of a deployment holds a hundred flows, 200,000 entries
//! when listed per datapath for the 400 a chassis has.

use std::collections::{HashMap, HashSet};

use ovsdb::Uuid;

use super::sb::{LogicalDpGroup, LogicalFlow};

/// Flows by datapath (their own), flows by the group they name, and the groups of each
/// datapath.
#[derive(Debug, Clone, Default)]
pub struct LflowIndex {
    by_dp: HashMap<Uuid, Flows>,
    by_group: HashMap<Uuid, Flows>,
    groups_of: HashMap<Uuid, Vec<Uuid>>,
}

/// A set of flows: their UUIDs, sorted (a hash set's buckets, a power of two, held
/// twice a datapath's few hundred flows on average).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flows(Vec<Uuid>);

impl Flows {
    /// Adds `u`.
    fn insert(&mut self, u: Uuid) {
        if let Err(i) = self.0.binary_search(&u) {
            self.0.insert(i, u);
        }
    }

    /// Removes `u`.
    fn remove(&mut self, u: &Uuid) {
        if let Ok(i) = self.0.binary_search(u) {
            self.0.remove(i);
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The flows, in UUID order.
    pub fn iter(&self) -> std::slice::Iter<'_, Uuid> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a Flows {
    type Item = &'a Uuid;
    type IntoIter = std::slice::Iter<'a, Uuid>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The datapaths flow `f` applies to, with `groups` as they are.
pub fn datapaths_of<'a>(
    f: &'a LogicalFlow,
    groups: &'a HashMap<Uuid, LogicalDpGroup>,
) -> impl Iterator<Item = Uuid> + 'a {
    let group = f
        .logical_dp_group()
        .and_then(|g| groups.get(&g))
        .map_or(&[][..], |g| g.datapaths.as_slice());
    f.logical_datapath()
        .into_iter()
        .chain(group.iter().copied())
}

impl LflowIndex {
    /// The index of `flows` with `groups`.
    pub fn build(
        flows: &HashMap<Uuid, LogicalFlow>,
        groups: &HashMap<Uuid, LogicalDpGroup>,
    ) -> LflowIndex {
        let mut ix = LflowIndex::default();
        for (g, row) in groups {
            ix.join(*g, &row.datapaths);
        }
        let mut unused = HashSet::new();
        for (u, f) in flows {
            ix.add(*u, f, groups, &mut unused);
        }
        ix
    }

    /// The flows of datapath `dp`: its own, then its groups' (a flow naming both the
    /// datapath and a group of it comes twice).
    pub fn flows_of<'a>(&'a self, dp: &Uuid) -> impl Iterator<Item = &'a Uuid> + 'a {
        let groups = self.groups_of.get(dp).map_or(&[][..], Vec::as_slice);
        self.by_dp
            .get(dp)
            .into_iter()
            .flatten()
            .chain(groups.iter().filter_map(|g| self.by_group.get(g)).flatten())
    }

    /// Whether datapath `dp` has flows.
    pub fn has_flows(&self, dp: &Uuid) -> bool {
        self.flows_of(dp).next().is_some()
    }

    /// Adds flow `u` (row `f`); notes its datapaths in `changed`.
    pub fn add(
        &mut self,
        u: Uuid,
        f: &LogicalFlow,
        groups: &HashMap<Uuid, LogicalDpGroup>,
        changed: &mut HashSet<Uuid>,
    ) {
        if let Some(g) = f.logical_dp_group() {
            self.by_group.entry(g).or_default().insert(u);
        }
        if let Some(dp) = f.logical_datapath() {
            self.by_dp.entry(dp).or_default().insert(u);
        }
        changed.extend(datapaths_of(f, groups));
    }

    /// Removes flow `u` (row `f`, as indexed); notes its datapaths in `changed`.
    pub fn remove(
        &mut self,
        u: Uuid,
        f: &LogicalFlow,
        groups: &HashMap<Uuid, LogicalDpGroup>,
        changed: &mut HashSet<Uuid>,
    ) {
        if let Some(g) = f.logical_dp_group() {
            drop_from(&mut self.by_group, g, u);
        }
        if let Some(dp) = f.logical_datapath() {
            drop_from(&mut self.by_dp, dp, u);
        }
        changed.extend(datapaths_of(f, groups));
    }

    /// Group `g` goes from `old` to `new` datapaths (`None`: absent): its flows leave
    /// the datapaths it loses and join those it gains, which are noted in `changed`.
    pub fn regroup(
        &mut self,
        g: Uuid,
        old: Option<&LogicalDpGroup>,
        new: Option<&LogicalDpGroup>,
        changed: &mut HashSet<Uuid>,
    ) {
        let dps = |x: Option<&LogicalDpGroup>| -> HashSet<Uuid> {
            x.map_or_else(HashSet::new, |x| x.datapaths.iter().copied().collect())
        };
        let (old, new) = (dps(old), dps(new));
        let has_flows = self.by_group.get(&g).is_some_and(|f| !f.is_empty());
        for dp in old.difference(&new) {
            if let Some(gs) = self.groups_of.get_mut(dp) {
                gs.retain(|x| *x != g);
                if gs.is_empty() {
                    self.groups_of.remove(dp);
                }
            }
            if has_flows {
                changed.insert(*dp);
            }
        }
        let gained: Vec<Uuid> = new.difference(&old).copied().collect();
        self.join(g, &gained);
        if has_flows {
            changed.extend(gained);
        }
    }

    /// Notes that datapaths `dps` are in group `g`.
    fn join(&mut self, g: Uuid, dps: &[Uuid]) {
        for dp in dps {
            let gs = self.groups_of.entry(*dp).or_default();
            if !gs.contains(&g) {
                gs.push(g);
            }
        }
    }
}

fn drop_from(m: &mut HashMap<Uuid, Flows>, k: Uuid, u: Uuid) {
    if let Some(s) = m.get_mut(&k) {
        s.remove(&u);
        if s.is_empty() {
            m.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuid(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn flow(dp: Option<u128>, group: Option<u128>) -> LogicalFlow {
        LogicalFlow::new(
            (dp.map(uuid), group.map(uuid)),
            "ingress",
            0,
            0,
            ("1", "next;"),
        )
    }

    fn group(dps: &[u128]) -> LogicalDpGroup {
        LogicalDpGroup {
            uuid: Uuid::default(),
            datapaths: dps.iter().map(|d| uuid(*d)).collect(),
        }
    }

    /// Kept current through flows added and removed and a group that arrives late and
    /// changes, the index equals one built from the rows at each step, and what changed
    /// names exactly the datapaths whose flows changed.
    #[test]
    fn the_index_follows_flows_and_groups() {
        let mut flows = HashMap::new();
        let mut groups = HashMap::new();
        let mut ix = LflowIndex::default();
        let mut changed = HashSet::new();
        let same = |ix: &LflowIndex, flows: &_, groups: &HashMap<Uuid, LogicalDpGroup>| {
            let built = LflowIndex::build(flows, groups);
            for dp in (1..=4).map(uuid) {
                let mut a: Vec<&Uuid> = ix.flows_of(&dp).collect();
                let mut b: Vec<&Uuid> = built.flows_of(&dp).collect();
                a.sort();
                b.sort();
                assert_eq!(a, b, "datapath {dp}");
            }
        };
        // A flow of datapath 1 and a flow of group 10 (not there yet).
        for (u, f) in [(100, flow(Some(1), None)), (101, flow(None, Some(10)))] {
            ix.add(uuid(u), &f, &groups, &mut changed);
            flows.insert(uuid(u), f);
        }
        assert_eq!(changed, HashSet::from([uuid(1)]));
        same(&ix, &flows, &groups);
        // The group arrives with datapaths 2 and 3, then drops 2 and gains 4.
        for (old, new) in [
            (None, group(&[2, 3])),
            (Some(group(&[2, 3])), group(&[3, 4])),
        ] {
            changed.clear();
            ix.regroup(uuid(10), old.as_ref(), Some(&new), &mut changed);
            groups.insert(uuid(10), new);
            same(&ix, &flows, &groups);
        }
        assert_eq!(changed, HashSet::from([uuid(2), uuid(4)]));
        assert_eq!(ix.flows_of(&uuid(4)).collect::<Vec<_>>(), [&uuid(101)]);
        // The group's flow goes.
        changed.clear();
        let f = flows.remove(&uuid(101)).unwrap();
        ix.remove(uuid(101), &f, &groups, &mut changed);
        same(&ix, &flows, &groups);
        assert_eq!(changed, HashSet::from([uuid(3), uuid(4)]));
        assert!(!ix.has_flows(&uuid(3)));
    }
}
