//! Rows, typed column access and typed tables ([`Model`], [`model!`](crate::model)).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

use crate::datum::{short, Atom, Datum, Uuid};
use crate::schema::TableSchema;
use crate::{Error, Place};

/// A row (RFC 7047 §5.1 `<row>`): column name → value.
///
/// Rows in the replica hold every monitored column (a column the server
/// omitted holds its default). Rows built for `insert`/`update` hold the
/// columns to write.
///
/// Stored compactly, since a replica holds 10^5 of them: the values in one shared
/// slice (one allocation per row), sorted by column name, beside the list of those
/// names, which every row with the same columns shares (one allocation per distinct
/// list in the process: a table's rows). A clone (the replica's copy, a change
/// set's) shares the values until one of them is changed.
#[derive(Clone, Debug, Default, Eq)]
pub struct Row {
    names: Names,
    values: Arc<[Datum]>,
}

impl PartialEq for Row {
    fn eq(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.names, &other.names) || self.names == other.names)
            && (Arc::ptr_eq(&self.values, &other.values) || self.values == other.values)
    }
}

/// A row's column names, sorted.
type Names = Arc<[Arc<str>]>;

/// The process-wide copy of the column list `names`.
fn intern_names(names: Vec<Arc<str>>) -> Names {
    static LISTS: OnceLock<Mutex<HashSet<Names>>> = OnceLock::new();
    let mut lists = LISTS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(l) = lists.get(names.as_slice()) {
        return l.clone();
    }
    let l: Names = names.into();
    lists.insert(l.clone());
    l
}

/// The process-wide copy of column name `name`.
pub(crate) fn intern(name: &str) -> Arc<str> {
    static NAMES: OnceLock<Mutex<HashSet<Arc<str>>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return n.clone();
    }
    let n: Arc<str> = Arc::from(name);
    names.insert(n.clone());
    n
}

impl Row {
    /// An empty row.
    pub fn new() -> Self {
        Self::default()
    }

    /// The row with `column` set to `value` (a builder for operations).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// let row = ovsdb::Row::new()
    ///     .with("name", "chassis-1")
    ///     .with("external_ids", BTreeMap::from([("k".to_string(), "v".to_string())]));
    /// assert_eq!(row.get::<String>("name").unwrap(), "chassis-1");
    /// ```
    pub fn with(mut self, column: &str, value: impl ToDatum) -> Self {
        self.set(column, value);
        self
    }

    /// Sets `column` to `value`.
    pub fn set(&mut self, column: &str, value: impl ToDatum) {
        self.insert(column, value.to_datum());
    }

    /// Sets `column` to a datum.
    pub fn insert(&mut self, column: impl AsRef<str>, value: Datum) -> Option<Datum> {
        let column = column.as_ref();
        match self.find(column) {
            Ok(i) => Some(std::mem::replace(
                &mut Arc::make_mut(&mut self.values)[i],
                value,
            )),
            Err(i) => {
                let (mut names, mut values) = (self.names.to_vec(), self.values.to_vec());
                names.insert(i, intern(column));
                values.insert(i, value);
                self.names = intern_names(names);
                self.values = values.into();
                None
            }
        }
    }

    /// Removes a column.
    pub fn remove(&mut self, column: &str) -> Option<Datum> {
        let i = self.find(column).ok()?;
        let (mut names, mut values) = (self.names.to_vec(), self.values.to_vec());
        names.remove(i);
        let d = values.remove(i);
        self.names = intern_names(names);
        self.values = values.into();
        Some(d)
    }

    fn find(&self, column: &str) -> Result<usize, usize> {
        self.names.binary_search_by(|c| (**c).cmp(column))
    }

    /// A column's value as a Rust type.
    ///
    /// # Errors
    ///
    /// [`Error::MissingColumn`] when the row has no such column;
    /// [`Error::Type`] naming the column, what `T` expects and what was
    /// found when the value does not convert.
    pub fn get<T: FromDatum>(&self, column: &str) -> Result<T, Error> {
        let d = self.datum(column).ok_or_else(|| Error::MissingColumn {
            place: Place {
                table: None,
                column: Some(column.to_owned()),
            },
        })?;
        T::from_datum(d).map_err(|e| e.in_column(column))
    }

    /// A column's value.
    pub fn datum(&self, column: &str) -> Option<&Datum> {
        self.find(column).ok().map(|i| &self.values[i])
    }

    /// The columns and values, sorted by column name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Datum)> {
        self.names.iter().map(|k| &**k).zip(self.values.iter())
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the row has no columns.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The JSON notation: an object of column → value.
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.iter()
                .map(|(k, v)| (k.to_string(), v.to_json()))
                .collect::<Map<_, _>>(),
        )
    }

    /// Parses a `<row>` of a table, checking each column's type (the
    /// implicit `_uuid` and `_version` included).
    ///
    /// # Errors
    ///
    /// [`Error::Type`] naming the column, also for a column the table lacks.
    pub fn from_json(v: &Value, table: &TableSchema) -> Result<Row, Error> {
        let obj = v
            .as_object()
            .ok_or_else(|| Error::type_mismatch("a row object", short(v)))?;
        let mut columns = Vec::with_capacity(obj.len());
        for (c, cv) in obj {
            let t = table.column(c).ok_or_else(|| {
                Error::type_mismatch("a column of the table", "an unknown column").in_column(c)
            })?;
            columns.push((
                intern(c),
                Datum::from_json(cv, t).map_err(|e| e.in_column(c))?,
            ));
        }
        Ok(Row::sealed(columns))
    }
}

impl Row {
    /// The row of columns pushed in any order; a later value of a column wins.
    pub(crate) fn sealed(mut columns: Vec<(Arc<str>, Datum)>) -> Row {
        columns.sort_by(|a, b| a.0.cmp(&b.0));
        // dedup_by keeps the first of equal neighbours: move the later value in.
        let mut names: Vec<Arc<str>> = Vec::with_capacity(columns.len());
        let mut values: Vec<Datum> = Vec::with_capacity(columns.len());
        for (c, d) in columns {
            match (names.last(), values.last_mut()) {
                (Some(last), Some(v)) if *last == c => *v = d,
                _ => {
                    names.push(c);
                    values.push(d);
                }
            }
        }
        Row {
            names: intern_names(names),
            values: values.into(),
        }
    }
}

impl<S: AsRef<str>> FromIterator<(S, Datum)> for Row {
    fn from_iter<I: IntoIterator<Item = (S, Datum)>>(iter: I) -> Self {
        Row::sealed(
            iter.into_iter()
                .map(|(c, d)| (intern(c.as_ref()), d))
                .collect(),
        )
    }
}

/// A Rust type a column's value converts to.
///
/// Implemented for [`Datum`] itself; the atom types `String`, `i64`,
/// `bool`, `f64`, [`Uuid`] and the integer types `i32`, `u16`, `u32`
/// (a scalar column: exactly one element); `Option<T>` (0 or 1 element);
/// `Vec<T>` and `BTreeSet<T>` (a set); `BTreeMap<K, V>` (a map).
pub trait FromDatum: Sized {
    /// Converts; a mismatch is [`Error::Type`] saying what was expected.
    fn from_datum(d: &Datum) -> Result<Self, Error>;
}

/// A Rust type that converts to a column's value; see [`FromDatum`] for
/// the types.
pub trait ToDatum {
    /// Converts.
    fn to_datum(&self) -> Datum;
}

/// A Rust type of one atom: the element type of sets and maps.
pub trait AtomValue: Sized {
    /// The OVSDB type name, for errors (`string`, `integer`...).
    const TYPE_NAME: &'static str;
    /// Converts an atom of the right type (and range).
    fn from_atom(a: &Atom) -> Option<Self>;
    /// Converts to an atom.
    fn to_atom(&self) -> Atom;
}

impl AtomValue for String {
    const TYPE_NAME: &'static str = "string";
    fn from_atom(a: &Atom) -> Option<Self> {
        match a {
            Atom::String(s) => Some(String::from(&**s)),
            _ => None,
        }
    }
    fn to_atom(&self) -> Atom {
        Atom::String(Arc::from(self.as_str()))
    }
}

/// A string shared with the replica's atom (no copy of the text).
impl AtomValue for Arc<str> {
    const TYPE_NAME: &'static str = "string";
    fn from_atom(a: &Atom) -> Option<Self> {
        match a {
            Atom::String(s) => Some(s.clone()),
            _ => None,
        }
    }
    fn to_atom(&self) -> Atom {
        Atom::String(self.clone())
    }
}

impl AtomValue for i64 {
    const TYPE_NAME: &'static str = "integer";
    fn from_atom(a: &Atom) -> Option<Self> {
        match a {
            Atom::Integer(i) => Some(*i),
            _ => None,
        }
    }
    fn to_atom(&self) -> Atom {
        Atom::Integer(*self)
    }
}

macro_rules! narrow_integer {
    ($($t:ty => $name:literal),*) => {$(
        impl AtomValue for $t {
            const TYPE_NAME: &'static str = $name;
            fn from_atom(a: &Atom) -> Option<Self> {
                match a {
                    Atom::Integer(i) => <$t>::try_from(*i).ok(),
                    _ => None,
                }
            }
            fn to_atom(&self) -> Atom {
                Atom::Integer(i64::from(*self))
            }
        }
    )*};
}
narrow_integer!(i32 => "integer in i32 range", u16 => "integer in u16 range", u32 => "integer in u32 range");

impl AtomValue for bool {
    const TYPE_NAME: &'static str = "boolean";
    fn from_atom(a: &Atom) -> Option<Self> {
        match a {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        }
    }
    fn to_atom(&self) -> Atom {
        Atom::Boolean(*self)
    }
}

impl AtomValue for f64 {
    const TYPE_NAME: &'static str = "real";
    fn from_atom(a: &Atom) -> Option<Self> {
        match a {
            Atom::Real(r) => Some(*r),
            _ => None,
        }
    }
    fn to_atom(&self) -> Atom {
        Atom::Real(*self)
    }
}

impl AtomValue for Uuid {
    const TYPE_NAME: &'static str = "uuid";
    fn from_atom(a: &Atom) -> Option<Self> {
        match a {
            Atom::Uuid(u) => Some(*u),
            _ => None,
        }
    }
    fn to_atom(&self) -> Atom {
        Atom::Uuid(*self)
    }
}

impl AtomValue for Atom {
    const TYPE_NAME: &'static str = "atom";
    fn from_atom(a: &Atom) -> Option<Self> {
        Some(a.clone())
    }
    fn to_atom(&self) -> Atom {
        self.clone()
    }
}

fn found(d: &Datum) -> String {
    short(&d.to_json())
}

macro_rules! scalar {
    ($($t:ty),*) => {$(
        impl FromDatum for $t {
            fn from_datum(d: &Datum) -> Result<Self, Error> {
                d.as_atom()
                    .and_then(<$t as AtomValue>::from_atom)
                    .ok_or_else(|| Error::type_mismatch(<$t as AtomValue>::TYPE_NAME, found(d)))
            }
        }
        impl ToDatum for $t {
            fn to_datum(&self) -> Datum {
                Datum::atom(self.to_atom())
            }
        }
    )*};
}
scalar!(String, Arc<str>, i64, i32, u16, u32, bool, f64, Uuid, Atom);

impl ToDatum for &str {
    fn to_datum(&self) -> Datum {
        Datum::atom(Atom::String(Arc::from(*self)))
    }
}

impl FromDatum for Datum {
    fn from_datum(d: &Datum) -> Result<Self, Error> {
        Ok(d.clone())
    }
}

impl ToDatum for Datum {
    fn to_datum(&self) -> Datum {
        self.clone()
    }
}

fn set_atoms<'a, T: AtomValue + 'a>(
    d: &'a Datum,
    expected: &dyn Fn() -> String,
) -> Result<impl Iterator<Item = T> + 'a, Error> {
    let s = d
        .as_set()
        .ok_or_else(|| Error::type_mismatch(expected(), found(d)))?;
    if s.iter().any(|a| T::from_atom(a).is_none()) {
        return Err(Error::type_mismatch(expected(), found(d)));
    }
    Ok(s.iter().filter_map(T::from_atom))
}

impl<T: AtomValue> FromDatum for Option<T> {
    fn from_datum(d: &Datum) -> Result<Self, Error> {
        let expected = || format!("0 or 1 {}", T::TYPE_NAME);
        if d.len() > 1 {
            return Err(Error::type_mismatch(expected(), found(d)));
        }
        Ok(set_atoms::<T>(d, &expected)?.next())
    }
}

impl<T: AtomValue> ToDatum for Option<T> {
    fn to_datum(&self) -> Datum {
        Datum::Set(self.iter().map(T::to_atom).collect())
    }
}

impl<T: AtomValue> FromDatum for Vec<T> {
    fn from_datum(d: &Datum) -> Result<Self, Error> {
        Ok(set_atoms::<T>(d, &|| format!("set of {}", T::TYPE_NAME))?.collect())
    }
}

impl<T: AtomValue> ToDatum for Vec<T> {
    fn to_datum(&self) -> Datum {
        Datum::Set(self.iter().map(T::to_atom).collect())
    }
}

impl<T: AtomValue + Ord> FromDatum for BTreeSet<T> {
    fn from_datum(d: &Datum) -> Result<Self, Error> {
        Ok(set_atoms::<T>(d, &|| format!("set of {}", T::TYPE_NAME))?.collect())
    }
}

impl<T: AtomValue> ToDatum for BTreeSet<T> {
    fn to_datum(&self) -> Datum {
        Datum::Set(self.iter().map(T::to_atom).collect())
    }
}

impl<K: AtomValue + Ord, V: AtomValue> FromDatum for BTreeMap<K, V> {
    fn from_datum(d: &Datum) -> Result<Self, Error> {
        let expected = || format!("map of {} to {}", K::TYPE_NAME, V::TYPE_NAME);
        match d {
            Datum::Map(m) => m
                .iter()
                .map(|(k, v)| Some((K::from_atom(k)?, V::from_atom(v)?)))
                .collect::<Option<_>>()
                .ok_or_else(|| Error::type_mismatch(expected(), found(d))),
            Datum::Set(s) if s.is_empty() => Ok(BTreeMap::new()),
            Datum::Set(_) => Err(Error::type_mismatch(expected(), found(d))),
        }
    }
}

impl<K: AtomValue, V: AtomValue> ToDatum for BTreeMap<K, V> {
    fn to_datum(&self) -> Datum {
        Datum::Map(
            self.iter()
                .map(|(k, v)| (k.to_atom(), v.to_atom()))
                .collect(),
        )
    }
}

/// A value shared: decoded once, held by several owners (a build's cache and the
/// decoded row).
impl<T: FromDatum> FromDatum for Arc<T> {
    fn from_datum(d: &Datum) -> Result<Self, Error> {
        T::from_datum(d).map(Arc::new)
    }
}

impl<T: ToDatum> ToDatum for Arc<T> {
    fn to_datum(&self) -> Datum {
        (**self).to_datum()
    }
}

impl<T: ToDatum + ?Sized> ToDatum for &T {
    fn to_datum(&self) -> Datum {
        (**self).to_datum()
    }
}

/// A typed table (STYLE §13): a struct with one field per monitored column,
/// declared once with [`model!`](crate::model).
pub trait Model: Sized {
    /// The table's name, e.g. `Port_Binding`.
    const TABLE: &'static str;
    /// The columns the struct reads, e.g. `["logical_port", "chassis"]`.
    const COLUMNS: &'static [&'static str];
    /// Decodes a row.
    ///
    /// # Errors
    ///
    /// [`Error::Type`] or [`Error::MissingColumn`] naming the table and column.
    fn from_row(uuid: Uuid, row: &Row) -> Result<Self, Error>;
    /// The row's columns (without `_uuid`), for `insert` and `update`.
    fn to_row(&self) -> Row;
}

/// Declares a typed table: a struct, its [`Model`] impl and its column names.
///
/// The struct gets a `pub uuid: Uuid` field (the row's `_uuid`) before the
/// declared fields; each field names its column after `=`. Field types are
/// any [`FromDatum`] + [`ToDatum`] type.
///
/// ```
/// use std::collections::BTreeMap;
/// use ovsdb::{Model, Row, Uuid};
///
/// ovsdb::model! {
///     /// A row of OVN_Southbound's Port_Binding table.
///     #[derive(Clone, Debug, PartialEq)]
///     pub struct PortBinding in "Port_Binding" {
///         /// The logical port's name.
///         pub logical_port: String = "logical_port",
///         /// The chassis the port is bound to.
///         pub chassis: Option<Uuid> = "chassis",
///         /// The tunnel key, 1..=32767.
///         pub tunnel_key: i64 = "tunnel_key",
///         /// Options.
///         pub options: BTreeMap<String, String> = "options",
///     }
/// }
///
/// assert_eq!(PortBinding::TABLE, "Port_Binding");
/// assert_eq!(PortBinding::COLUMNS, ["logical_port", "chassis", "tunnel_key", "options"]);
/// let row = Row::new()
///     .with("logical_port", "vm1")
///     .with("chassis", None::<Uuid>)
///     .with("tunnel_key", 7i64)
///     .with("options", BTreeMap::<String, String>::new());
/// let pb = PortBinding::from_row(Uuid::nil(), &row).unwrap();
/// assert_eq!(pb.logical_port, "vm1");
/// assert_eq!(pb.to_row(), row);
/// let bad = row.clone().with("tunnel_key", "seven");
/// let err = PortBinding::from_row(Uuid::nil(), &bad).unwrap_err();
/// assert_eq!(err.to_string(), "Port_Binding.tunnel_key: expected integer, found \"seven\"");
/// ```
#[macro_export]
macro_rules! model {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident in $table:literal {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $ty:ty = $column:literal
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            /// The row's UUID (`_uuid`).
            pub uuid: $crate::Uuid,
            $(
                $(#[$fmeta])*
                $fvis $field: $ty,
            )*
        }

        impl $crate::Model for $name {
            const TABLE: &'static str = $table;
            const COLUMNS: &'static [&'static str] = &[$($column),*];

            fn from_row(uuid: $crate::Uuid, row: &$crate::Row) -> ::std::result::Result<Self, $crate::Error> {
                ::std::result::Result::Ok(Self {
                    uuid,
                    $(
                        $field: row.get::<$ty>($column).map_err(|e| e.in_table($table))?,
                    )*
                })
            }

            fn to_row(&self) -> $crate::Row {
                let mut row = $crate::Row::new();
                $(
                    row.set($column, &self.$field);
                )*
                row
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica holds 10^5 rows: its copies of a row (a change set's, a
    /// clone) share the columns until one is changed, and a decoded `Arc<str>`
    /// is the atom's text, not a copy.
    #[test]
    fn copies_share_until_changed() {
        let row = Row::new()
            .with("match", "ip4 && tcp")
            .with("priority", 5i64);
        let mut copy = row.clone();
        assert!(Arc::ptr_eq(&row.values, &copy.values));
        assert!(Arc::ptr_eq(&row.names, &copy.names));
        let text: Arc<str> = copy.get("match").unwrap();
        let Some(Datum::Set(atoms)) = row.datum("match") else {
            panic!("a scalar is a one-atom set")
        };
        let Some(Atom::String(atom)) = atoms.iter().next() else {
            panic!("a string atom")
        };
        assert!(Arc::ptr_eq(&text, atom));
        copy.set("priority", 6i64);
        assert!(!Arc::ptr_eq(&row.values, &copy.values));
        assert!(Arc::ptr_eq(&row.names, &copy.names));
        assert_eq!(row.get::<i64>("priority").unwrap(), 5);
        assert_eq!(copy.get::<i64>("priority").unwrap(), 6);
        assert_ne!(row, copy);
    }

    #[test]
    fn typed_getters() {
        let u = Uuid::from_u128(7);
        let row = Row::new()
            .with("s", "x")
            .with("i", 5i64)
            .with("o", Some(u))
            .with("none", None::<Uuid>)
            .with("v", vec![1i64, 2])
            .with("m", BTreeMap::from([("a".to_string(), 1i64)]));
        assert_eq!(row.get::<String>("s").unwrap(), "x");
        assert_eq!(row.get::<u16>("i").unwrap(), 5);
        assert_eq!(row.get::<Option<Uuid>>("o").unwrap(), Some(u));
        assert_eq!(row.get::<Option<Uuid>>("none").unwrap(), None);
        assert_eq!(row.get::<Vec<i64>>("v").unwrap(), vec![1, 2]);
        assert_eq!(
            row.get::<BTreeSet<i64>>("v").unwrap(),
            BTreeSet::from([1, 2])
        );
        assert_eq!(row.get::<BTreeMap<String, i64>>("m").unwrap()["a"], 1);
        let e = row.get::<Option<i64>>("v").unwrap_err().to_string();
        assert_eq!(
            e,
            "column v: expected 0 or 1 integer, found [\"set\",[1,2]]"
        );
        let e = row.get::<String>("missing").unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
        assert!(row.get::<Vec<String>>("v").is_err());
    }
}
