//! The sets and maps inside a [`Datum`](crate::Datum): sorted vectors without
//! duplicates. Most OVSDB values are scalars (one-element sets) or a handful of
//! pairs; a B-tree would give each a node of eleven slots (hundreds of bytes),
//! which for a replica of 10^5 rows was most of the client's memory. Lookups are
//! binary searches; a whole difference is applied by one merge. A set of one atom
//! (every scalar column) is held in place, without an allocation of its own.

use std::cmp::Ordering;

use smallvec::SmallVec;

use crate::datum::Atom;

/// A set of atoms, sorted, without duplicates. Ordered like `BTreeSet<Atom>`
/// (lexicographically by elements).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AtomSet(SmallVec<[Atom; 1]>);

/// A map from key atoms to value atoms, sorted by key, keys unique. Ordered like
/// `BTreeMap<Atom, Atom>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AtomMap(Vec<(Atom, Atom)>);

impl AtomSet {
    /// The empty set.
    pub fn new() -> Self {
        Self(SmallVec::new())
    }

    /// The set of `atoms`, or the first duplicate.
    pub fn from_vec(mut atoms: Vec<Atom>) -> Result<Self, Atom> {
        atoms.sort_unstable();
        if let Some(w) = atoms.windows(2).find(|w| w[0] == w[1]) {
            return Err(w[0].clone());
        }
        let mut atoms = SmallVec::from_vec(atoms);
        atoms.shrink_to_fit();
        Ok(Self(atoms))
    }

    /// The number of atoms.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has no atom.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The atoms in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Atom> {
        self.0.iter()
    }

    /// The least atom.
    pub fn first(&self) -> Option<&Atom> {
        self.0.first()
    }

    /// Whether `a` is a member.
    pub fn contains(&self, a: &Atom) -> bool {
        self.0.binary_search(a).is_ok()
    }

    /// Adds `a`; false if it was there.
    pub fn insert(&mut self, a: Atom) -> bool {
        match self.0.binary_search(&a) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, a);
                true
            }
        }
    }

    /// Removes `a`; false if it was not there.
    pub fn remove(&mut self, a: &Atom) -> bool {
        match self.0.binary_search(a) {
            Ok(i) => {
                self.0.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// The atoms in exactly one of the two sets.
    pub fn symmetric_difference(&self, other: &AtomSet) -> AtomSet {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        let mut out = SmallVec::with_capacity(a.len() + b.len());
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                Ordering::Less => {
                    out.push(a[i].clone());
                    i += 1;
                }
                Ordering::Greater => {
                    out.push(b[j].clone());
                    j += 1;
                }
                Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend(a[i..].iter().cloned());
        out.extend(b[j..].iter().cloned());
        out.shrink_to_fit();
        AtomSet(out)
    }
}

impl FromIterator<Atom> for AtomSet {
    /// Duplicates collapse.
    fn from_iter<I: IntoIterator<Item = Atom>>(iter: I) -> Self {
        let mut v: SmallVec<[Atom; 1]> = iter.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        v.shrink_to_fit();
        Self(v)
    }
}

impl<const N: usize> From<[Atom; N]> for AtomSet {
    fn from(atoms: [Atom; N]) -> Self {
        atoms.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a AtomSet {
    type Item = &'a Atom;
    type IntoIter = std::slice::Iter<'a, Atom>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl AtomMap {
    /// The empty map.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// The map of `pairs`, or the first duplicate key.
    pub fn from_vec(mut pairs: Vec<(Atom, Atom)>) -> Result<Self, Atom> {
        pairs.sort_unstable_by(|x, y| x.0.cmp(&y.0));
        if let Some(w) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(w[0].0.clone());
        }
        pairs.shrink_to_fit();
        Ok(Self(pairs))
    }

    /// The number of pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has no pair.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Atom, &Atom)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The value of `k`.
    pub fn get(&self, k: &Atom) -> Option<&Atom> {
        self.find(k).ok().map(|i| &self.0[i].1)
    }

    /// Whether `k` has a value.
    pub fn contains_key(&self, k: &Atom) -> bool {
        self.find(k).is_ok()
    }

    /// Sets `k` to `v`; the old value, if any.
    pub fn insert(&mut self, k: Atom, v: Atom) -> Option<Atom> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, v)),
            Err(i) => {
                self.0.insert(i, (k, v));
                None
            }
        }
    }

    /// Removes `k`; its value, if any.
    pub fn remove(&mut self, k: &Atom) -> Option<Atom> {
        self.find(k).ok().map(|i| self.0.remove(i).1)
    }

    fn find(&self, k: &Atom) -> Result<usize, usize> {
        self.0.binary_search_by(|(x, _)| x.cmp(k))
    }
}

impl FromIterator<(Atom, Atom)> for AtomMap {
    /// A later pair of a key replaces an earlier one.
    fn from_iter<I: IntoIterator<Item = (Atom, Atom)>>(iter: I) -> Self {
        let mut m = AtomMap::new();
        let mut v: Vec<(Atom, Atom)> = iter.into_iter().collect();
        if v.windows(2).all(|w| w[0].0 < w[1].0) {
            v.shrink_to_fit();
            return AtomMap(v);
        }
        for (k, x) in v {
            m.insert(k, x);
        }
        m.0.shrink_to_fit();
        m
    }
}

impl<const N: usize> From<[(Atom, Atom); N]> for AtomMap {
    fn from(pairs: [(Atom, Atom); N]) -> Self {
        pairs.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn i(n: i64) -> Atom {
        Atom::Integer(n)
    }

    #[test]
    fn sets_behave_as_btree_sets() {
        let mut s = AtomSet::from([i(3), i(1), i(2), i(1)]);
        let mut b = BTreeSet::from([i(3), i(1), i(2)]);
        assert!(s.iter().eq(b.iter()));
        assert_eq!(s.insert(i(0)), b.insert(i(0)));
        assert_eq!(s.insert(i(2)), b.insert(i(2)));
        assert_eq!(s.remove(&i(3)), b.remove(&i(3)));
        assert_eq!(s.remove(&i(9)), b.remove(&i(9)));
        assert!(s.iter().eq(b.iter()));
        let o = AtomSet::from([i(1), i(5)]);
        let ob = BTreeSet::from([i(1), i(5)]);
        assert!(s
            .symmetric_difference(&o)
            .iter()
            .eq(b.symmetric_difference(&ob)));
        assert_eq!(AtomSet::from_vec(vec![i(1), i(2), i(1)]), Err(i(1)));
        assert!(
            AtomSet::from([i(1)])
                < AtomSet::from([i(1), i(0)]).symmetric_difference(&AtomSet::from([i(0), i(2)]))
        );
    }

    #[test]
    fn one_atom_is_held_in_place() {
        // A replica's scalar columns: the atom inside the set, no allocation of its own.
        assert_eq!(std::mem::size_of::<Atom>(), 24);
        assert_eq!(std::mem::size_of::<crate::Datum>(), 40);
        let s = AtomSet::from([Atom::String("ingress".into())]);
        assert!(!s.0.spilled());
        assert!(AtomSet::from([i(1), i(2)]).0.spilled());
    }

    #[test]
    fn maps_behave_as_btree_maps() {
        let mut m = AtomMap::from([(i(2), i(20)), (i(1), i(10))]);
        let mut b = BTreeMap::from([(i(2), i(20)), (i(1), i(10))]);
        assert_eq!(m.insert(i(1), i(11)), b.insert(i(1), i(11)));
        assert_eq!(m.insert(i(0), i(0)), b.insert(i(0), i(0)));
        assert_eq!(m.remove(&i(2)), b.remove(&i(2)));
        assert_eq!(m.get(&i(1)), b.get(&i(1)));
        assert!(m.iter().eq(b.iter()));
        assert_eq!(
            AtomMap::from_vec(vec![(i(1), i(0)), (i(1), i(2))]),
            Err(i(1))
        );
        let later = AtomMap::from_iter([(i(1), i(1)), (i(1), i(2))]);
        assert_eq!(later.get(&i(1)), Some(&i(2)));
    }
}
