//! The logical flows of each datapath, kept current as rows change, so that a pipeline
//! build visits the flows of the datapaths whose flows changed, not every flow of every
//! local datapath (a pass cost tens of ms at 30,000 flows before).
//!
//! A flow applies to its `logical_datapath` and to every datapath of its
//! `logical_dp_group` (ovn-sb(5) "Logical_Flow"); a group may arrive after the flows
//! naming it, and its membership may change, which moves every flow naming it.

use std::collections::{HashMap, HashSet};

use ovsdb::Uuid;

use super::sb::{LogicalDpGroup, LogicalFlow};

/// Flows by datapath, and flows by the group they name.
#[derive(Debug, Clone, Default)]
pub struct LflowIndex {
    by_dp: HashMap<Uuid, Flows>,
    by_group: HashMap<Uuid, Flows>,
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
        let mut unused = HashSet::new();
        for (u, f) in flows {
            ix.add(*u, f, groups, &mut unused);
        }
        ix
    }

    /// The flows of datapath `dp`.
    pub fn flows_of(&self, dp: &Uuid) -> Option<&Flows> {
        self.by_dp.get(dp)
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
        for dp in datapaths_of(f, groups) {
            self.by_dp.entry(dp).or_default().insert(u);
            changed.insert(dp);
        }
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
        for dp in datapaths_of(f, groups) {
            drop_from(&mut self.by_dp, dp, u);
            changed.insert(dp);
        }
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
        let flows: Vec<Uuid> = self
            .by_group
            .get(&g)
            .map_or_else(Vec::new, |s| s.iter().copied().collect());
        for dp in old.difference(&new) {
            for u in &flows {
                drop_from(&mut self.by_dp, *dp, *u);
            }
            changed.insert(*dp);
        }
        for dp in new.difference(&old) {
            let set = self.by_dp.entry(*dp).or_default();
            for u in &flows {
                set.insert(*u);
            }
            changed.insert(*dp);
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
            Uuid::default(),
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
        let same = |ix: &LflowIndex, flows: &_, groups: &_| {
            assert_eq!(ix.by_dp, LflowIndex::build(flows, groups).by_dp);
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
        assert_eq!(ix.flows_of(&uuid(4)), Some(&Flows(vec![uuid(101)])));
        // The group's flow goes.
        changed.clear();
        let f = flows.remove(&uuid(101)).unwrap();
        ix.remove(uuid(101), &f, &groups, &mut changed);
        same(&ix, &flows, &groups);
        assert_eq!(changed, HashSet::from([uuid(3), uuid(4)]));
        assert_eq!(ix.flows_of(&uuid(3)), None);
    }
}
