//! Values (RFC 7047 §5.1): atoms, sets and maps, and their JSON notation.
//!
//! A [`Datum`] is what a column holds: a set of atoms (a scalar column is a
//! one-element set, an optional column a set of 0 or 1) or a map from atoms
//! to atoms. Both are kept sorted and without duplicates, so `==` is value
//! equality. JSON decoding needs the column's [`ColumnType`]: a real may be
//! written `0`, and a one-element set is written as its bare atom. Decoding
//! never panics on any input (fuzzed by `fuzz/fuzz_targets/datum.rs`).

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Value};
pub use uuid::Uuid;

use crate::schema::ColumnType;
use crate::sorted::{AtomMap, AtomSet};
use crate::Error;

/// An atomic type (RFC 7047 §3.2 `<atomic-type>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AtomicType {
    /// A 64-bit signed integer.
    Integer,
    /// An IEEE 754 double.
    Real,
    /// `true` or `false`.
    Boolean,
    /// A UTF-8 string.
    String,
    /// A UUID (a row reference when the column has a `refTable`).
    Uuid,
}

impl AtomicType {
    pub(crate) fn from_name(name: &str) -> Result<Self, Error> {
        Ok(match name {
            "integer" => Self::Integer,
            "real" => Self::Real,
            "boolean" => Self::Boolean,
            "string" => Self::String,
            "uuid" => Self::Uuid,
            _ => return Err(Error::Schema(format!("unknown atomic type {name:?}"))),
        })
    }
}

impl fmt::Display for AtomicType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Integer => "integer",
            Self::Real => "real",
            Self::Boolean => "boolean",
            Self::String => "string",
            Self::Uuid => "uuid",
        })
    }
}

/// One atomic value (RFC 7047 §5.1 `<atom>`).
///
/// Ordered and hashed by type, then value; reals by [`f64::total_cmp`] (so
/// `-0.0 != 0.0` and equality is bit equality).
#[derive(Clone, Debug)]
pub enum Atom {
    /// `<integer>`.
    Integer(i64),
    /// `<real>`. JSON cannot carry NaN or infinities: such a value encodes
    /// as `null`, which the server rejects.
    Real(f64),
    /// `<boolean>`.
    Boolean(bool),
    /// `<string>`: shared, so that a decoded row's `Arc<str>` fields and the
    /// replica hold one copy of a text (a logical flow's match and actions).
    String(Arc<str>),
    /// `["uuid", "<uuid>"]`.
    Uuid(Uuid),
    /// `["named-uuid", "<id>"]`: in a transaction, the row inserted by the
    /// `insert` operation with that `uuid-name` (RFC 7047 §5.2.1).
    NamedUuid(Arc<str>),
}

impl Atom {
    /// The atom's type (a named UUID is a UUID).
    pub fn atomic_type(&self) -> AtomicType {
        match self {
            Atom::Integer(_) => AtomicType::Integer,
            Atom::Real(_) => AtomicType::Real,
            Atom::Boolean(_) => AtomicType::Boolean,
            Atom::String(_) => AtomicType::String,
            Atom::Uuid(_) | Atom::NamedUuid(_) => AtomicType::Uuid,
        }
    }

    /// The default value of a type: 0, 0.0, false, "" or the all-zero UUID
    /// (RFC 7047 §5.2.1).
    pub fn default_of(t: AtomicType) -> Atom {
        match t {
            AtomicType::Integer => Atom::Integer(0),
            AtomicType::Real => Atom::Real(0.0),
            AtomicType::Boolean => Atom::Boolean(false),
            AtomicType::String => Atom::String(Arc::from("")),
            AtomicType::Uuid => Atom::Uuid(Uuid::nil()),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Atom::Integer(_) => 0,
            Atom::Real(_) => 1,
            Atom::Boolean(_) => 2,
            Atom::String(_) => 3,
            Atom::Uuid(_) => 4,
            Atom::NamedUuid(_) => 5,
        }
    }

    /// The JSON notation.
    pub fn to_json(&self) -> Value {
        match self {
            Atom::Integer(i) => json!(i),
            Atom::Real(r) => serde_json::Number::from_f64(*r).map_or(Value::Null, Value::Number),
            Atom::Boolean(b) => json!(b),
            Atom::String(s) => json!(&**s),
            Atom::Uuid(u) => json!(["uuid", u.to_string()]),
            Atom::NamedUuid(n) => json!(["named-uuid", &**n]),
        }
    }

    /// Parses the JSON notation of an atom of type `t`. A real column
    /// accepts integers; a uuid column accepts `["named-uuid", ..]`.
    pub fn from_json(v: &Value, t: AtomicType) -> Result<Atom, Error> {
        let bad = || Error::type_mismatch(t.to_string(), short(v));
        Ok(match t {
            AtomicType::Integer => Atom::Integer(v.as_i64().ok_or_else(bad)?),
            AtomicType::Real => Atom::Real(v.as_f64().ok_or_else(bad)?),
            AtomicType::Boolean => Atom::Boolean(v.as_bool().ok_or_else(bad)?),
            AtomicType::String => Atom::String(shared_text(v.as_str().ok_or_else(bad)?)),
            AtomicType::Uuid => match v.as_array().map(Vec::as_slice) {
                Some([Value::String(tag), Value::String(s)]) if tag == "uuid" => {
                    Atom::Uuid(parse_uuid(s).ok_or_else(bad)?)
                }
                Some([Value::String(tag), Value::String(s)]) if tag == "named-uuid" => {
                    Atom::NamedUuid(s.as_str().into())
                }
                _ => return Err(bad()),
            },
        })
    }
}

/// The longest text (bytes) decoded string atoms share a copy of.
pub const SHARED_TEXT_MAX: usize = 64;

/// The texts decoded string atoms share, with the size at which the pool next drops
/// those no atom holds any more.
struct TextPool {
    texts: HashSet<Arc<str>>,
    prune_at: usize,
}

/// The process' copy of text `s` when it is at most [`SHARED_TEXT_MAX`] bytes, else a
/// new one. A replica of an OVN Southbound database holds 10^5 logical flows whose
/// short strings repeat (`ingress`, the `external_ids` keys, stage names, `next;`):
/// one allocation each instead of one per row. Texts no atom holds any more are
/// dropped whenever the pool has doubled since it last did so.
pub(crate) fn shared_text(s: &str) -> Arc<str> {
    static POOL: OnceLock<Mutex<TextPool>> = OnceLock::new();
    if s.len() > SHARED_TEXT_MAX {
        return Arc::from(s);
    }
    let mut pool = POOL
        .get_or_init(|| {
            Mutex::new(TextPool {
                texts: HashSet::new(),
                prune_at: 4096,
            })
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(t) = pool.texts.get(s) {
        return t.clone();
    }
    if pool.texts.len() >= pool.prune_at {
        // Only the pool hands out its texts, under this lock: a count of 1 is final.
        pool.texts.retain(|t| Arc::strong_count(t) > 1);
        pool.prune_at = (pool.texts.len() * 2).max(4096);
    }
    let t: Arc<str> = Arc::from(s);
    pool.texts.insert(t.clone());
    t
}

/// Parses a UUID in the 36-character form RFC 7047 §5.1 requires.
pub(crate) fn parse_uuid(s: &str) -> Option<Uuid> {
    if s.len() != 36 {
        return None;
    }
    Uuid::try_parse(s).ok()
}

/// A JSON value shortened for an error message.
pub(crate) fn short(v: &Value) -> String {
    let mut s = v.to_string();
    if s.len() > 80 {
        let mut end = 77;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

impl PartialEq for Atom {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Atom {}

impl PartialOrd for Atom {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Atom {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Atom::Integer(a), Atom::Integer(b)) => a.cmp(b),
            (Atom::Real(a), Atom::Real(b)) => a.total_cmp(b),
            (Atom::Boolean(a), Atom::Boolean(b)) => a.cmp(b),
            (Atom::String(a), Atom::String(b)) => a.cmp(b),
            (Atom::Uuid(a), Atom::Uuid(b)) => a.cmp(b),
            (Atom::NamedUuid(a), Atom::NamedUuid(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl Hash for Atom {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Atom::Integer(i) => i.hash(state),
            // Consistent with `total_cmp` equality, which is bit equality.
            Atom::Real(r) => r.to_bits().hash(state),
            Atom::Boolean(b) => b.hash(state),
            Atom::String(s) => s.hash(state),
            Atom::NamedUuid(s) => s.hash(state),
            Atom::Uuid(u) => u.hash(state),
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Integer(i) => write!(f, "{i}"),
            Atom::Real(r) => write!(f, "{r}"),
            Atom::Boolean(b) => write!(f, "{b}"),
            Atom::String(s) => write!(f, "{s:?}"),
            Atom::Uuid(u) => write!(f, "{u}"),
            Atom::NamedUuid(n) => write!(f, "@{n}"),
        }
    }
}

/// A column's value (RFC 7047 §5.1 `<value>`): a set of atoms or a map.
///
/// A scalar is a one-element set. Sets and maps are sorted and free of
/// duplicate elements (keys), so `==` compares values. An empty map column
/// is `Map` with no pairs; decoding with a [`ColumnType`] keeps the two
/// apart.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Datum {
    /// A set of atoms (also a scalar or an optional value).
    Set(AtomSet),
    /// A map from key atoms to value atoms.
    Map(AtomMap),
}

impl Datum {
    /// The empty set.
    pub fn empty_set() -> Self {
        Datum::Set(AtomSet::new())
    }

    /// The empty map.
    pub fn empty_map() -> Self {
        Datum::Map(AtomMap::new())
    }

    /// A one-element set.
    pub fn atom(a: Atom) -> Self {
        Datum::Set(AtomSet::from([a]))
    }

    /// The default value of a column type (RFC 7047 §5.2.1): the empty set
    /// or map when `min` is 0, else the atom type's default.
    pub fn default_of(t: &ColumnType) -> Self {
        match (&t.value, t.min) {
            (Some(_), _) => Datum::empty_map(),
            (None, 0) => Datum::empty_set(),
            (None, _) => Datum::atom(Atom::default_of(t.key.atomic)),
        }
    }

    /// The number of elements (pairs of a map).
    pub fn len(&self) -> usize {
        match self {
            Datum::Set(s) => s.len(),
            Datum::Map(m) => m.len(),
        }
    }

    /// Whether the set or map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The atoms, if a set.
    pub fn as_set(&self) -> Option<&AtomSet> {
        match self {
            Datum::Set(s) => Some(s),
            Datum::Map(_) => None,
        }
    }

    /// The pairs, if a map.
    pub fn as_map(&self) -> Option<&AtomMap> {
        match self {
            Datum::Map(m) => Some(m),
            Datum::Set(_) => None,
        }
    }

    /// The atom of a one-element set.
    pub fn as_atom(&self) -> Option<&Atom> {
        match self {
            Datum::Set(s) if s.len() == 1 => s.first(),
            _ => None,
        }
    }

    /// The JSON notation: a one-element set as its bare atom, other sets as
    /// `["set", [..]]`, maps as `["map", [[k, v], ..]]`.
    pub fn to_json(&self) -> Value {
        match self {
            Datum::Set(s) if s.len() == 1 => s.first().map_or(Value::Null, Atom::to_json),
            Datum::Set(s) => json!(["set", s.iter().map(Atom::to_json).collect::<Vec<_>>()]),
            Datum::Map(m) => json!([
                "map",
                m.iter()
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    /// Parses the JSON notation of a value of column type `t`: atom types
    /// and the number of elements are checked (`min..=max`), and so are
    /// duplicate elements or keys (rejected, as ovsdb-server does). Other
    /// constraints (enums, ranges) are not: see [`ColumnType::check`].
    pub fn from_json(v: &Value, t: &ColumnType) -> Result<Self, Error> {
        let d = Self::from_json_unbounded(v, t)?;
        let n = d.len();
        if n < t.min || t.max.is_some_and(|m| n > m) {
            return Err(Error::type_mismatch(t.describe(), short(v)));
        }
        Ok(d)
    }

    /// As [`from_json`](Self::from_json) without the bounds on the number of
    /// elements (an update2 difference may exceed `max`).
    pub fn from_json_unbounded(v: &Value, t: &ColumnType) -> Result<Self, Error> {
        let bad = || Error::type_mismatch(t.describe(), short(v));
        let tagged = match v.as_array().map(Vec::as_slice) {
            Some([Value::String(tag), Value::Array(items)]) if tag == "set" || tag == "map" => {
                Some((tag.as_str(), items))
            }
            _ => None,
        };
        match (&t.value, tagged) {
            (Some(vt), Some(("map", items))) => {
                let mut m = Vec::with_capacity(items.len());
                for pair in items {
                    let Some([k, val]) = pair.as_array().map(Vec::as_slice) else {
                        return Err(bad());
                    };
                    let k = Atom::from_json(k, t.key.atomic).map_err(|_| bad())?;
                    let val = Atom::from_json(val, vt.atomic).map_err(|_| bad())?;
                    m.push((k, val));
                }
                AtomMap::from_vec(m)
                    .map(Datum::Map)
                    .map_err(|_| Error::type_mismatch("a map without duplicate keys", short(v)))
            }
            // ovsdb-server accepts an empty set for an empty map.
            (Some(_), Some(("set", items))) if items.is_empty() => Ok(Datum::empty_map()),
            (Some(_), _) => Err(bad()),
            (None, Some(("set", items))) => {
                let s = items
                    .iter()
                    .map(|a| Atom::from_json(a, t.key.atomic).map_err(|_| bad()))
                    .collect::<Result<Vec<_>, _>>()?;
                AtomSet::from_vec(s)
                    .map(Datum::Set)
                    .map_err(|_| Error::type_mismatch("a set without duplicates", short(v)))
            }
            (None, Some(_)) => Err(bad()),
            (None, None) => Ok(Datum::atom(
                Atom::from_json(v, t.key.atomic).map_err(|_| bad())?,
            )),
        }
    }

    /// Applies an update2 `modify` difference of a column of type `t` in
    /// place (ovsdb-server(7) §4.1.14): a non-composite column (`max` 1)
    /// takes the difference as its new value; a set toggles each element
    /// of the difference (symmetric difference); a map deletes a key whose
    /// pair in the difference equals its current pair, replaces the value
    /// of a key present with another value, and adds a new key.
    pub fn apply_diff(&mut self, diff: &Datum, t: &ColumnType) {
        if !t.is_composite() {
            *self = diff.clone();
            return;
        }
        match (self, diff) {
            (Datum::Set(s), Datum::Set(d)) => *s = s.symmetric_difference(d),
            (Datum::Map(m), Datum::Map(d)) => {
                for (k, v) in d.iter() {
                    match m.get(k) {
                        Some(old) if old == v => {
                            m.remove(k);
                        }
                        _ => {
                            m.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            // An empty map decoded as an empty set, or a type mix-up: a
            // difference of the other kind can only replace the value.
            (_, d) if d.is_empty() => {}
            (me, d) => *me = d.clone(),
        }
    }

    /// The update2 difference from `old` to `new` for a column of type `t`,
    /// such that `old.apply_diff(diff) == new`; `None` when they are equal.
    pub fn diff(old: &Datum, new: &Datum, t: &ColumnType) -> Option<Datum> {
        if old == new {
            return None;
        }
        if !t.is_composite() {
            return Some(new.clone());
        }
        Some(match (old, new) {
            (Datum::Set(o), Datum::Set(n)) => Datum::Set(o.symmetric_difference(n)),
            (Datum::Map(o), Datum::Map(n)) => {
                let mut d = Vec::new();
                for (k, v) in o.iter() {
                    match n.get(k) {
                        None => d.push((k.clone(), v.clone())),
                        Some(nv) if nv != v => d.push((k.clone(), nv.clone())),
                        Some(_) => {}
                    }
                }
                for (k, v) in n.iter() {
                    if !o.contains_key(k) {
                        d.push((k.clone(), v.clone()));
                    }
                }
                Datum::Map(d.into_iter().collect())
            }
            _ => new.clone(),
        })
    }
}

impl fmt::Display for Datum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Datum::Set(s) if s.len() == 1 => s.iter().try_for_each(|a| write!(f, "{a}")),
            Datum::Set(s) => {
                f.write_str("[")?;
                for (i, a) in s.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str("]")
            }
            Datum::Map(m) => {
                f.write_str("{")?;
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

impl From<Atom> for Datum {
    fn from(a: Atom) -> Self {
        Datum::atom(a)
    }
}

impl From<&str> for Datum {
    fn from(s: &str) -> Self {
        Datum::atom(Atom::String(Arc::from(s)))
    }
}

impl From<String> for Datum {
    fn from(s: String) -> Self {
        Datum::atom(Atom::String(Arc::from(s)))
    }
}

impl From<i64> for Datum {
    fn from(i: i64) -> Self {
        Datum::atom(Atom::Integer(i))
    }
}

impl From<bool> for Datum {
    fn from(b: bool) -> Self {
        Datum::atom(Atom::Boolean(b))
    }
}

impl From<f64> for Datum {
    fn from(r: f64) -> Self {
        Datum::atom(Atom::Real(r))
    }
}

impl From<Uuid> for Datum {
    fn from(u: Uuid) -> Self {
        Datum::atom(Atom::Uuid(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnType;
    use AtomicType as T;

    fn set(atoms: &[Atom]) -> Datum {
        Datum::Set(atoms.iter().cloned().collect())
    }

    fn s(x: &str) -> Atom {
        Atom::String(x.into())
    }

    #[test]
    fn decoded_short_texts_share_one_copy() {
        let text = |v: &Value| match Atom::from_json(v, T::String) {
            Ok(Atom::String(t)) => t,
            other => panic!("not a string: {other:?}"),
        };
        let (a, b) = (text(&json!("stage-name")), text(&json!("stage-name")));
        assert!(Arc::ptr_eq(&a, &b));
        let long = "x".repeat(SHARED_TEXT_MAX + 1);
        let (c, d) = (text(&json!(long)), text(&json!(long)));
        assert_eq!(c, d);
        assert!(!Arc::ptr_eq(&c, &d));
    }

    #[test]
    fn parse() {
        let t = ColumnType::scalar(T::Real);
        assert_eq!(Datum::from_json(&json!(0), &t).unwrap(), Datum::from(0.0));
        let t = ColumnType::set(T::String, 0, None);
        assert_eq!(Datum::from_json(&json!("a"), &t).unwrap(), set(&[s("a")]));
        assert_eq!(
            Datum::from_json(&json!(["set", ["b", "a"]]), &t).unwrap(),
            set(&[s("a"), s("b")])
        );
        let t = ColumnType::set(T::Uuid, 0, Some(1));
        let u = "36bdd6a5-9a0c-4d4c-9a0c-1b0e1cc3e0a1";
        assert_eq!(
            Datum::from_json(&json!(["uuid", u]), &t).unwrap(),
            Datum::from(Uuid::parse_str(u).unwrap())
        );
        assert_eq!(
            Datum::from_json(&json!(["set", []]), &t).unwrap(),
            Datum::empty_set()
        );
        let t = ColumnType::map(T::String, T::Integer);
        assert_eq!(
            Datum::from_json(&json!(["map", [["a", 1]]]), &t).unwrap(),
            Datum::Map(AtomMap::from([(s("a"), Atom::Integer(1))]))
        );
    }

    #[test]
    fn parse_errors_say_what_was_expected() {
        let t = ColumnType::set(T::Uuid, 0, Some(1));
        let e = Datum::from_json(&json!("x"), &t).unwrap_err().to_string();
        assert!(e.contains("expected 0 or 1 uuid"), "{e}");
        let t = ColumnType::scalar(T::Integer);
        assert!(Datum::from_json(&json!(["set", []]), &t).is_err());
        assert!(Datum::from_json(&json!(1.5), &t).is_err());
        let t = ColumnType::set(T::String, 0, None);
        assert!(Datum::from_json(&json!(["set", ["a", "a"]]), &t).is_err());
        let t = ColumnType::set(T::Uuid, 1, Some(1));
        assert!(Datum::from_json(&json!(["uuid", "not-a-uuid"]), &t).is_err());
    }

    #[test]
    fn emit() {
        assert_eq!(set(&[s("a")]).to_json(), json!("a"));
        assert_eq!(set(&[]).to_json(), json!(["set", []]));
        assert_eq!(
            set(&[Atom::Integer(2), Atom::Integer(1)]).to_json(),
            json!(["set", [1, 2]])
        );
        assert_eq!(Datum::empty_map().to_json(), json!(["map", []]));
        assert_eq!(
            Datum::atom(Atom::NamedUuid("r".into())).to_json(),
            json!(["named-uuid", "r"])
        );
    }

    #[test]
    fn update2_diff_of_a_map() {
        // ovsdb-server(7) §4.1.14: removed keys carry their old value, changed
        // keys their new one, added keys their value.
        let t = ColumnType::map(T::String, T::String);
        let old = Datum::Map(AtomMap::from([(s("k"), s("v")), (s("gone"), s("x"))]));
        let new = Datum::Map(AtomMap::from([(s("k"), s("w")), (s("new"), s("y"))]));
        let d = Datum::diff(&old, &new, &t).unwrap();
        assert_eq!(
            d,
            Datum::Map(AtomMap::from([
                (s("k"), s("w")),
                (s("gone"), s("x")),
                (s("new"), s("y"))
            ]))
        );
        let mut o = old.clone();
        o.apply_diff(&d, &t);
        assert_eq!(o, new);
    }

    #[test]
    fn update2_diff_of_an_optional_is_the_new_value() {
        let t = ColumnType::set(T::String, 0, Some(1));
        let mut d = set(&[s("a")]);
        d.apply_diff(&set(&[s("b")]), &t);
        assert_eq!(d, set(&[s("b")]));
        let t = ColumnType::set(T::String, 0, None);
        d.apply_diff(&set(&[s("b"), s("c")]), &t);
        assert_eq!(d, set(&[s("c")]));
    }
}
