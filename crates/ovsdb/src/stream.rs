//! `<table-updates2>` (ovsdb-server(7) §4.1.14, the `update2` and `update3`
//! notifications) decoded from the message's text straight into rows.
//!
//! A database's first update after a monitor condition change can be tens of MB
//! of JSON: parsed into a `serde_json::Value` tree first, it took six times its
//! size (350 MB for a 40,000-port OVN deployment's logical flows) before one row
//! was decoded. Here only one column's value is a `Value` at a time. The result
//! and the errors are those of [`decode_updates`](crate::monitor::decode_updates)
//! on the same text.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::datum::{parse_uuid, short, Datum};
use crate::monitor::{Resolved, ResolvedTable, RowUpdate, TableUpdates};
use crate::row::{intern, Row};
use crate::Error;

/// Decodes the `<table-updates2>` object `text`.
///
/// # Errors
///
/// As [`decode_updates`](crate::monitor::decode_updates): [`Error::Protocol`]
/// for malformed JSON, a table that is not monitored or a malformed row
/// update; [`Error::Type`] naming the table and column for a value of the
/// wrong type.
pub(crate) fn decode_updates2(text: &str, resolved: &Resolved) -> Result<TableUpdates, Error> {
    let failed = RefCell::new(None);
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = Tables {
        resolved,
        out: &mut out,
        failed: &failed,
    };
    match seed.deserialize(&mut de).and_then(|()| de.end()) {
        Ok(()) => Ok(out),
        Err(e) => Err(failed
            .take()
            .unwrap_or_else(|| Error::Protocol(format!("table updates: {e}")))),
    }
}

/// Where a visitor leaves the [`Error`] it failed with (serde's errors carry a
/// message only).
type Failed = RefCell<Option<Error>>;

fn fail<E: de::Error>(slot: &Failed, e: Error) -> E {
    let message = e.to_string();
    *slot.borrow_mut() = Some(e);
    E::custom(message)
}

struct Tables<'a> {
    resolved: &'a Resolved,
    out: &'a mut TableUpdates,
    failed: &'a Failed,
}

impl<'de> DeserializeSeed<'de> for Tables<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Tables<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("table updates (an object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Tables {
            resolved,
            out,
            failed,
        } = self;
        while let Some(table) = map.next_key::<String>()? {
            let Some(rt) = resolved.tables.get(&table) else {
                let e = Error::Protocol(format!("update for unmonitored table {table:?}"));
                return Err(fail(failed, e));
            };
            map.next_value_seed(Rows {
                table: &table,
                rt,
                out: &mut *out,
                failed,
            })?;
        }
        Ok(())
    }
}

struct Rows<'a> {
    table: &'a str,
    rt: &'a ResolvedTable,
    out: &'a mut TableUpdates,
    failed: &'a Failed,
}

impl<'de> DeserializeSeed<'de> for Rows<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Rows<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "updates of {} (an object)", self.table)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (table, failed) = (self.table, self.failed);
        while let Some(uuid) = map.next_key::<String>()? {
            let Some(uuid) = parse_uuid(&uuid) else {
                let e = Error::Protocol(format!("bad row UUID {uuid:?} in {table}"));
                return Err(fail(failed, e));
            };
            let update = map
                .next_value_seed(Update {
                    rt: self.rt,
                    failed,
                })
                .map_err(|e| {
                    // Say where, as decode_updates does.
                    let inner = failed.borrow_mut().take();
                    let e = match inner {
                        Some(Error::Protocol(m)) => {
                            Error::Protocol(format!("{table} row {uuid}: {m}"))
                        }
                        Some(inner) => inner.in_table(table),
                        None => Error::Protocol(format!("{table} row {uuid}: {e}")),
                    };
                    fail::<A::Error>(failed, e)
                })?;
            self.out.push((table.to_owned(), uuid, update));
        }
        Ok(())
    }
}

/// One `<row-update2>`: a one-member object.
struct Update<'a> {
    rt: &'a ResolvedTable,
    failed: &'a Failed,
}

impl<'de> DeserializeSeed<'de> for Update<'_> {
    type Value = RowUpdate;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<RowUpdate, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Update<'_> {
    type Value = RowUpdate;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a row update (a one-member object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RowUpdate, A::Error> {
        let not_one = || Error::Protocol("row update is not a one-member object".into());
        let Some(kind) = map.next_key::<String>()? else {
            return Err(fail(self.failed, not_one()));
        };
        let row = |fill, diff| RowSeed {
            rt: self.rt,
            fill,
            diff,
            failed: self.failed,
        };
        let update = match kind.as_str() {
            "initial" | "insert" => RowUpdate::Insert(map.next_value_seed(row(true, false))?),
            "modify" => RowUpdate::Modify(map.next_value_seed(row(false, true))?),
            "delete" => {
                map.next_value::<IgnoredAny>()?;
                RowUpdate::Delete
            }
            k => {
                let e = Error::Protocol(format!("unknown row update kind {k:?}"));
                return Err(fail(self.failed, e));
            }
        };
        if map.next_key::<IgnoredAny>()?.is_some() {
            return Err(fail(self.failed, not_one()));
        }
        Ok(update)
    }
}

/// A `<row>` of monitored columns: omitted ones take their defaults when `fill`,
/// composite ones are differences when `diff`.
struct RowSeed<'a> {
    rt: &'a ResolvedTable,
    fill: bool,
    diff: bool,
    failed: &'a Failed,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = Row;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Row, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = Row;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a row object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Row, A::Error> {
        let mut columns = Vec::with_capacity(self.rt.columns.len());
        while let Some(c) = map.next_key::<String>()? {
            let v: Value = map.next_value()?;
            let Some(t) = self.rt.columns.get(&c) else {
                let e = Error::type_mismatch("a monitored column", "an unknown column");
                return Err(fail(self.failed, e.in_column(&c)));
            };
            let d = if self.diff && t.is_composite() {
                Datum::from_json_unbounded(&v, t)
            } else {
                Datum::from_json(&v, t)
            };
            match d {
                Ok(d) => columns.push((intern(&c), d)),
                Err(e) => return Err(fail(self.failed, e.in_column(&c))),
            }
        }
        if self.fill {
            let given: Vec<_> = columns.iter().map(|(c, _)| c.clone()).collect();
            let omitted = self
                .rt
                .columns
                .iter()
                .filter(|(c, _)| !given.iter().any(|g| **g == ***c));
            let defaults: Vec<_> = omitted
                .map(|(c, t)| (intern(c), Datum::default_of(t)))
                .collect();
            columns.extend(defaults);
        }
        Ok(Row::sealed(columns))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Row, E> {
        Err(fail(
            self.failed,
            Error::type_mismatch("a row object", short(&Value::Null)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::monitor::decode_updates;
    use crate::monitor::tests::{malformed_updates, resolved, U};

    /// The text decodes to what its `Value` decodes to.
    #[test]
    fn rows_are_those_of_the_value_tree() {
        let r = resolved();
        for v in [
            json!({"A": {U: {"insert": {"name": "a"}}}}),
            json!({"A": {U: {"initial": {"name": "b", "n": 2, "tags": ["set", ["x"]]}}}}),
            json!({"A": {U: {"modify": {"n": 3, "tags": ["set", ["y"]]}}}}),
            json!({"A": {U: {"delete": null}}}),
            json!({"A": {}}),
            json!({}),
        ] {
            let want = decode_updates(&v, &r, true).unwrap();
            assert_eq!(decode_updates2(&v.to_string(), &r).unwrap(), want, "{v}");
        }
    }

    #[test]
    fn malformed_updates_fail_alike() {
        let r = resolved();
        let mut cases = malformed_updates();
        cases.extend([
            (json!({"A": {U: {}}}), "one-member"),
            (json!({"A": {U: {"insert": null}}}), "a row object"),
            (json!({"A": []}), "an object"),
            (json!([]), "an object"),
        ]);
        for (v, want) in cases {
            let e = decode_updates2(&v.to_string(), &r).unwrap_err().to_string();
            assert!(e.contains(want), "{v}: {e}");
        }
        let e = decode_updates2(r#"{"A": {"#, &r).unwrap_err();
        assert!(matches!(e, Error::Protocol(_)), "{e}");
    }
}
