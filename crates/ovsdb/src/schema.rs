//! Database schemas (RFC 7047 §3.2), as `get_schema` returns them.
//!
//! The client needs a column's type to decode its values (a real column may
//! arrive as `0`, a one-element set as a bare atom, a default-valued column
//! not at all) and to check what a consumer monitors.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::datum::{Atom, AtomicType, Datum};
use crate::sorted::AtomSet;
use crate::Error;

/// A database schema (RFC 7047 §3.2 `<database-schema>`).
#[derive(Clone, Debug, PartialEq)]
pub struct DatabaseSchema {
    /// The database's name, e.g. `OVN_Southbound`.
    pub name: String,
    /// The schema version, e.g. `20.27.0`.
    pub version: String,
    /// Tables by name.
    pub tables: BTreeMap<String, TableSchema>,
}

/// A table schema (RFC 7047 §3.2 `<table-schema>`).
#[derive(Clone, Debug, PartialEq)]
pub struct TableSchema {
    /// Columns by name, without the implicit `_uuid` and `_version`.
    pub columns: BTreeMap<String, ColumnType>,
    /// Whether rows need no strong reference to survive (`isRoot`).
    pub is_root: bool,
    /// `maxRows`, if limited.
    pub max_rows: Option<u64>,
    /// Column sets whose values must be unique across rows (`indexes`).
    pub indexes: Vec<Vec<String>>,
}

/// A column's type (RFC 7047 §3.2 `<type>`): a set of `min..=max` keys, or
/// a map when `value` is present.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnType {
    /// The type of the atoms (the keys of a map).
    pub key: BaseType,
    /// The type of a map's values; `None` for atoms and sets.
    pub value: Option<BaseType>,
    /// Minimum number of elements: 0 or 1.
    pub min: usize,
    /// Maximum number of elements; `None` for `"unlimited"`.
    pub max: Option<usize>,
}

/// Whether a reference keeps its target alive (RFC 7047 §3.2 `refType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefType {
    /// A strong reference: the target cannot be deleted while referenced.
    Strong,
    /// A weak reference: deleting the target removes the reference.
    Weak,
}

/// An atomic type with its constraints (RFC 7047 §3.2 `<base-type>`).
#[derive(Clone, Debug, PartialEq)]
pub struct BaseType {
    /// The atomic type.
    pub atomic: AtomicType,
    /// The allowed values, if constrained.
    pub enumeration: Option<AtomSet>,
    /// `minInteger`/`maxInteger`, inclusive.
    pub integer_range: (Option<i64>, Option<i64>),
    /// `minReal`/`maxReal`, inclusive.
    pub real_range: (Option<f64>, Option<f64>),
    /// `minLength`/`maxLength` of a string, in bytes (UTF-8), inclusive.
    pub length_range: (Option<u64>, Option<u64>),
    /// `refTable` of a uuid.
    pub ref_table: Option<String>,
    /// `refType` of a uuid (strong when absent).
    pub ref_type: RefType,
}

impl BaseType {
    /// An unconstrained base type.
    pub fn new(atomic: AtomicType) -> Self {
        BaseType {
            atomic,
            enumeration: None,
            integer_range: (None, None),
            real_range: (None, None),
            length_range: (None, None),
            ref_table: None,
            ref_type: RefType::Strong,
        }
    }

    fn from_json(v: &Value) -> Result<Self, Error> {
        if let Some(name) = v.as_str() {
            return Ok(BaseType::new(AtomicType::from_name(name)?));
        }
        let obj = v.as_object().ok_or_else(|| {
            Error::Schema(format!("base type {v} is neither a string nor an object"))
        })?;
        let name = obj
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Schema(format!("base type {v} has no \"type\"")))?;
        let mut b = BaseType::new(AtomicType::from_name(name)?);
        if let Some(e) = obj.get("enum") {
            let ty = ColumnType {
                key: BaseType::new(b.atomic),
                value: None,
                min: 0,
                max: None,
            };
            let d = Datum::from_json(e, &ty).map_err(|e| Error::Schema(format!("enum: {e}")))?;
            b.enumeration = d.as_set().cloned();
        }
        let int = |k: &str| obj.get(k).and_then(Value::as_i64);
        let real = |k: &str| obj.get(k).and_then(Value::as_f64);
        let uint = |k: &str| obj.get(k).and_then(Value::as_u64);
        b.integer_range = (int("minInteger"), int("maxInteger"));
        b.real_range = (real("minReal"), real("maxReal"));
        b.length_range = (uint("minLength"), uint("maxLength"));
        b.ref_table = obj
            .get("refTable")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if obj.get("refType").and_then(Value::as_str) == Some("weak") {
            b.ref_type = RefType::Weak;
        }
        Ok(b)
    }

    /// Checks an atom against the type and its constraints; the error says
    /// why it fails.
    pub fn check(&self, atom: &Atom) -> Result<(), String> {
        if atom.atomic_type() != self.atomic {
            return Err(format!("{atom} is not of type {}", self.atomic));
        }
        if let Some(e) = &self.enumeration {
            if !e.contains(atom) {
                return Err(format!("{atom} is not one of the allowed values"));
            }
        }
        match atom {
            Atom::Integer(i) => {
                let (lo, hi) = self.integer_range;
                if lo.is_some_and(|lo| *i < lo) || hi.is_some_and(|hi| *i > hi) {
                    return Err(format!("{i} is out of range {lo:?}..={hi:?}"));
                }
            }
            Atom::Real(r) => {
                let (lo, hi) = self.real_range;
                if lo.is_some_and(|lo| *r < lo) || hi.is_some_and(|hi| *r > hi) {
                    return Err(format!("{r} is out of range {lo:?}..={hi:?}"));
                }
            }
            Atom::String(s) => {
                let (lo, hi) = self.length_range;
                let n = s.len() as u64;
                if lo.is_some_and(|lo| n < lo) || hi.is_some_and(|hi| n > hi) {
                    return Err(format!("length {n} is out of range {lo:?}..={hi:?}"));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl ColumnType {
    /// A scalar column (exactly one atom) of an unconstrained type.
    pub fn scalar(atomic: AtomicType) -> Self {
        ColumnType {
            key: BaseType::new(atomic),
            value: None,
            min: 1,
            max: Some(1),
        }
    }

    /// A set column of `min..=max` atoms (`max` `None`: unlimited).
    pub fn set(atomic: AtomicType, min: usize, max: Option<usize>) -> Self {
        ColumnType {
            key: BaseType::new(atomic),
            value: None,
            min,
            max,
        }
    }

    /// A map column of any number of pairs.
    pub fn map(key: AtomicType, value: AtomicType) -> Self {
        ColumnType {
            key: BaseType::new(key),
            value: Some(BaseType::new(value)),
            min: 0,
            max: None,
        }
    }

    /// Whether update2 `modify` carries a difference rather than the new
    /// value: `max` > 1 (ovsdb-server(7) §4.1.14; a 0..1 column carries the
    /// new value).
    pub fn is_composite(&self) -> bool {
        self.max != Some(1)
    }

    /// Whether this is a map type.
    pub fn is_map(&self) -> bool {
        self.value.is_some()
    }

    /// Parses a `<type>`.
    pub fn from_json(v: &Value) -> Result<Self, Error> {
        if v.is_string() {
            let key = BaseType::from_json(v)?;
            return Ok(ColumnType {
                key,
                value: None,
                min: 1,
                max: Some(1),
            });
        }
        let obj = v
            .as_object()
            .ok_or_else(|| Error::Schema(format!("type {v} is neither a string nor an object")))?;
        let key = BaseType::from_json(
            obj.get("key")
                .ok_or_else(|| Error::Schema(format!("type {v} has no \"key\"")))?,
        )?;
        let value = obj.get("value").map(BaseType::from_json).transpose()?;
        let min = match obj.get("min") {
            None => 1,
            Some(m) => m
                .as_u64()
                .filter(|m| *m <= 1)
                .ok_or_else(|| Error::Schema(format!("type {v}: min must be 0 or 1")))?
                as usize,
        };
        let max = match obj.get("max") {
            None => Some(1),
            Some(Value::String(s)) if s == "unlimited" => None,
            Some(m) => Some(
                m.as_u64()
                    .filter(|m| *m >= 1)
                    .and_then(|m| usize::try_from(m).ok())
                    .ok_or_else(|| Error::Schema(format!("type {v}: bad max")))?,
            ),
        };
        Ok(ColumnType {
            key,
            value,
            min,
            max,
        })
    }

    /// Checks a datum against the type and every constraint; the error says
    /// why it fails.
    pub fn check(&self, d: &Datum) -> Result<(), String> {
        let n = d.len();
        if n < self.min || self.max.is_some_and(|m| n > m) {
            return Err(format!("{n} elements, not {}", self.bounds()));
        }
        match (d, &self.value) {
            (Datum::Set(s), None) => s.iter().try_for_each(|a| self.key.check(a)),
            (Datum::Map(m), Some(vt)) => m
                .iter()
                .try_for_each(|(k, v)| self.key.check(k).and_then(|()| vt.check(v))),
            (Datum::Set(s), Some(_)) if s.is_empty() => Ok(()),
            _ => Err(format!("{d} is not a {}", self.describe())),
        }
    }

    fn bounds(&self) -> String {
        match self.max {
            Some(m) if m == self.min => format!("{m}"),
            Some(m) => format!("{} to {m}", self.min),
            None => format!("{} or more", self.min),
        }
    }

    /// A short description, as used in errors: `string`, `0 or 1 uuid`,
    /// `0 to 3 integer`, `map string to string`.
    pub fn describe(&self) -> String {
        match &self.value {
            Some(v) => format!(
                "map of {} {} to {}",
                self.bounds(),
                self.key.atomic,
                v.atomic
            ),
            None if self.min == 1 && self.max == Some(1) => self.key.atomic.to_string(),
            None if self.max == Some(1) => format!("0 or 1 {}", self.key.atomic),
            None => format!("set of {} {}", self.bounds(), self.key.atomic),
        }
    }
}

/// The type of `_uuid` and `_version`.
pub(crate) fn uuid_column() -> &'static ColumnType {
    static T: std::sync::OnceLock<ColumnType> = std::sync::OnceLock::new();
    T.get_or_init(|| ColumnType::scalar(AtomicType::Uuid))
}

impl TableSchema {
    /// The type of a column, including the implicit `_uuid` and `_version`.
    pub fn column(&self, name: &str) -> Option<&ColumnType> {
        match name {
            "_uuid" | "_version" => Some(uuid_column()),
            _ => self.columns.get(name),
        }
    }

    fn from_json(name: &str, v: &Value) -> Result<Self, Error> {
        let obj = v
            .as_object()
            .ok_or_else(|| Error::Schema(format!("table {name} is not an object")))?;
        let mut columns = BTreeMap::new();
        let cols = obj
            .get("columns")
            .and_then(Value::as_object)
            .ok_or_else(|| Error::Schema(format!("table {name} has no columns")))?;
        for (c, cv) in cols {
            let ty = cv
                .get("type")
                .ok_or_else(|| Error::Schema(format!("column {name}.{c} has no type")))?;
            let ty = ColumnType::from_json(ty)
                .map_err(|e| Error::Schema(format!("column {name}.{c}: {e}")))?;
            columns.insert(c.clone(), ty);
        }
        let indexes = obj
            .get("indexes")
            .and_then(Value::as_array)
            .map(|ixs| {
                ixs.iter()
                    .filter_map(Value::as_array)
                    .map(|cols| {
                        cols.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(TableSchema {
            columns,
            is_root: obj.get("isRoot").and_then(Value::as_bool).unwrap_or(false),
            max_rows: obj.get("maxRows").and_then(Value::as_u64),
            indexes,
        })
    }
}

impl DatabaseSchema {
    /// Parses a `<database-schema>` (the result of `get_schema`, or an
    /// `.ovsschema` file's contents).
    pub fn from_json(v: &Value) -> Result<Self, Error> {
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Schema("no \"name\"".into()))?;
        let tables = v
            .get("tables")
            .and_then(Value::as_object)
            .ok_or_else(|| Error::Schema("no \"tables\"".into()))?;
        let mut out = BTreeMap::new();
        for (t, tv) in tables {
            out.insert(t.clone(), TableSchema::from_json(t, tv)?);
        }
        Ok(DatabaseSchema {
            name: name.to_owned(),
            version: v
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            tables: out,
        })
    }

    /// A table's schema, or [`Error::NoSuchTable`].
    pub fn table(&self, table: &str) -> Result<&TableSchema, Error> {
        self.tables.get(table).ok_or_else(|| Error::NoSuchTable {
            database: self.name.clone(),
            table: table.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_types() {
        let t = ColumnType::from_json(&json!("integer")).unwrap();
        assert_eq!(t, ColumnType::scalar(AtomicType::Integer));
        let t = ColumnType::from_json(&json!({"key": {"type": "uuid", "refTable": "Chassis", "refType": "weak"}, "min": 0, "max": 1})).unwrap();
        assert_eq!((t.min, t.max, t.key.ref_type), (0, Some(1), RefType::Weak));
        assert!(!t.is_composite());
        let t = ColumnType::from_json(
            &json!({"key": "string", "value": "string", "min": 0, "max": "unlimited"}),
        )
        .unwrap();
        assert!(t.is_map() && t.is_composite());
        let t =
            ColumnType::from_json(&json!({"key": {"type": "string", "enum": ["set", ["a", "b"]]}}))
                .unwrap();
        assert!(t.check(&Datum::from("a")).is_ok());
        assert!(t.check(&Datum::from("c")).unwrap_err().contains("allowed"));
        let t = ColumnType::from_json(
            &json!({"key": {"type": "integer", "minInteger": 1, "maxInteger": 5}}),
        )
        .unwrap();
        assert!(t.check(&Datum::from(6i64)).is_err());
        assert!(t.check(&Datum::empty_set()).is_err());
    }

    #[test]
    fn parse_ovn_sb_schema() {
        let Ok(text) = std::fs::read_to_string("/usr/share/ovn/ovn-sb.ovsschema") else {
            return;
        };
        let s = DatabaseSchema::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(s.name, "OVN_Southbound");
        let pb = s.table("Port_Binding").unwrap();
        assert_eq!(pb.column("chassis").unwrap().describe(), "0 or 1 uuid");
        assert!(s.table("Nope").unwrap_err().to_string().contains("Nope"));
    }
}
