//! What to monitor ([`MonitorSpec`]), the monitor requests built from it
//! (RFC 7047 §4.1.5 `monitor`; ovsdb-server(7) §4.1.12 `monitor_cond`,
//! §4.1.15 `monitor_cond_since`) and the decoding of the updates the
//! server sends back (`<table-updates>`, `<table-updates2>`).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::datum::{parse_uuid, short, Datum, Uuid};
use crate::operation::Condition;
use crate::row::{Model, Row};
use crate::schema::{ColumnType, DatabaseSchema};
use crate::Error;

/// What a [`Client`](crate::Client) replicates: one database, some of its
/// tables, some of their columns, and optionally only the rows matching a
/// condition.
///
/// ```
/// use ovsdb::{Condition, MonitorSpec, TableSpec};
/// let spec = MonitorSpec::new("OVN_Southbound")
///     .table(TableSpec::new("Chassis").columns(&["name", "hostname", "encaps"]).index("name"))
///     .table(TableSpec::new("Port_Binding").condition(vec![Condition::eq("type", "")]));
/// assert_eq!(spec.tables().count(), 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorSpec {
    database: String,
    tables: BTreeMap<String, TableSpec>,
}

/// One monitored table.
#[derive(Clone, Debug, PartialEq)]
pub struct TableSpec {
    name: String,
    columns: Vec<String>,
    indexes: Vec<String>,
    condition: Option<Vec<Condition>>,
}

impl MonitorSpec {
    /// Monitors nothing of `database` yet.
    pub fn new(database: &str) -> Self {
        MonitorSpec {
            database: database.to_owned(),
            tables: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) a table.
    pub fn table(mut self, table: TableSpec) -> Self {
        self.tables.insert(table.name.clone(), table);
        self
    }

    /// The database's name.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The monitored tables.
    pub fn tables(&self) -> impl Iterator<Item = &TableSpec> {
        self.tables.values()
    }

    /// One monitored table.
    pub fn get(&self, table: &str) -> Option<&TableSpec> {
        self.tables.get(table)
    }

    pub(crate) fn get_mut(&mut self, table: &str) -> Option<&mut TableSpec> {
        self.tables.get_mut(table)
    }

    /// Checks the spec against a schema and resolves "all columns".
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchTable`], [`Error::NoSuchColumn`] (also for an index
    /// or condition on a column that is not monitored; conditions may use
    /// `_uuid`).
    pub(crate) fn resolve(&self, schema: &DatabaseSchema) -> Result<Resolved, Error> {
        let mut tables = BTreeMap::new();
        for t in self.tables.values() {
            let ts = schema.table(&t.name)?;
            let no_column = |c: &str, not_monitored| Error::NoSuchColumn {
                table: t.name.clone(),
                column: c.to_owned(),
                not_monitored,
            };
            let mut columns = BTreeMap::new();
            if t.columns.is_empty() {
                columns.extend(ts.columns.iter().map(|(c, ty)| (c.clone(), ty.clone())));
            }
            for c in &t.columns {
                let ty = ts.columns.get(c).ok_or_else(|| no_column(c, false))?;
                columns.insert(c.clone(), ty.clone());
            }
            for c in &t.indexes {
                if !columns.contains_key(c) {
                    return Err(no_column(c, ts.columns.contains_key(c)));
                }
            }
            for cond in t.condition.iter().flatten() {
                if let Condition::Compare { column, .. } = cond {
                    if ts.column(column).is_none() {
                        return Err(no_column(column, false));
                    }
                }
            }
            tables.insert(
                t.name.clone(),
                ResolvedTable {
                    columns,
                    indexes: t.indexes.clone(),
                },
            );
        }
        Ok(Resolved { tables })
    }

    /// `<monitor-requests>` or `<monitor-cond-requests>`: conditions only
    /// when `with_conditions` (plain `monitor` has none).
    pub(crate) fn requests(&self, resolved: &Resolved, with_conditions: bool) -> Value {
        let mut out = Map::new();
        for t in self.tables.values() {
            let cols: Vec<&String> = resolved
                .tables
                .get(&t.name)
                .map_or(Vec::new(), |r| r.columns.keys().collect());
            let mut req = json!({"columns": cols});
            if let (true, Some(c), Some(obj)) = (with_conditions, &t.condition, req.as_object_mut())
            {
                obj.insert("where".into(), conditions_json(c));
            }
            out.insert(t.name.clone(), json!([req]));
        }
        Value::Object(out)
    }
}

pub(crate) fn conditions_json(c: &[Condition]) -> Value {
    Value::Array(c.iter().map(Condition::to_json).collect())
}

impl TableSpec {
    /// All columns, all rows, no index.
    pub fn new(table: &str) -> Self {
        TableSpec {
            name: table.to_owned(),
            columns: Vec::new(),
            indexes: Vec::new(),
            condition: None,
        }
    }

    /// The columns of a [`Model`]'s table that it reads.
    pub fn of<M: Model>() -> Self {
        Self::new(M::TABLE).columns(M::COLUMNS)
    }

    /// Monitors these columns (adding to those already listed); none
    /// listed means all.
    pub fn columns(mut self, columns: &[&str]) -> Self {
        for c in columns {
            if !self.columns.iter().any(|x| x == c) {
                self.columns.push((*c).to_owned());
            }
        }
        self
    }

    /// Keeps a hash index on a monitored column for
    /// [`Replica::find`](crate::Replica::find).
    pub fn index(mut self, column: &str) -> Self {
        if !self.indexes.iter().any(|x| x == column) {
            self.indexes.push(column.to_owned());
        }
        self
    }

    /// Replicates only the rows matching **any** of the conditions
    /// (`monitor_cond` semantics; `vec![]` or `[Condition::Const(true)]`
    /// match all rows, `[Condition::Const(false)]` none).
    pub fn condition(mut self, condition: Vec<Condition>) -> Self {
        self.condition = Some(condition);
        self
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The listed columns (empty: all).
    pub fn column_names(&self) -> &[String] {
        &self.columns
    }

    /// The indexed columns.
    pub fn indexes(&self) -> &[String] {
        &self.indexes
    }

    /// The condition, if any.
    pub fn current_condition(&self) -> Option<&[Condition]> {
        self.condition.as_deref()
    }

    pub(crate) fn set_condition(&mut self, condition: Vec<Condition>) {
        self.condition = Some(condition);
    }
}

/// A spec checked against the server's schema.
#[derive(Clone, Debug, Default)]
pub(crate) struct Resolved {
    pub(crate) tables: BTreeMap<String, ResolvedTable>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ResolvedTable {
    /// Monitored columns and their types.
    pub(crate) columns: BTreeMap<String, ColumnType>,
    pub(crate) indexes: Vec<String>,
}

impl ResolvedTable {
    /// Decodes a row of monitored columns, filling the columns it omits
    /// with their defaults when `fill` (update2 `initial`/`insert` omit
    /// default values).
    fn decode_row(&self, v: &Value, fill: bool, diff: bool) -> Result<Row, Error> {
        let obj = v
            .as_object()
            .ok_or_else(|| Error::type_mismatch("a row object", short(v)))?;
        let mut columns = Vec::with_capacity(if fill { self.columns.len() } else { obj.len() });
        if fill {
            let omitted = self.columns.iter().filter(|(c, _)| !obj.contains_key(*c));
            columns.extend(omitted.map(|(c, t)| (crate::row::intern(c), Datum::default_of(t))));
        }
        for (c, cv) in obj {
            let t = self.columns.get(c).ok_or_else(|| {
                Error::type_mismatch("a monitored column", "an unknown column").in_column(c)
            })?;
            let d = if diff && t.is_composite() {
                Datum::from_json_unbounded(cv, t)
            } else {
                Datum::from_json(cv, t)
            };
            columns.push((crate::row::intern(c), d.map_err(|e| e.in_column(c))?));
        }
        Ok(Row::sealed(columns))
    }
}

/// One row's update as the server sent it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RowUpdate {
    /// update2 `initial` or `insert` (defaults filled in), or update `new`
    /// without `old`: the whole row.
    Insert(Row),
    /// update2 `modify`: changed columns, composite ones as differences.
    Modify(Row),
    /// update (v1) `new` with `old`: the whole new row.
    Replace(Row),
    /// `delete`, or update (v1) `old` without `new`.
    Delete,
}

/// The updates of one message, in the order received.
pub(crate) type TableUpdates = Vec<(String, Uuid, RowUpdate)>;

/// Decodes `<table-updates2>` (`v2`) or `<table-updates>` (v1).
///
/// # Errors
///
/// [`Error::Protocol`] for a table that is not monitored or a malformed
/// row update; [`Error::Type`] naming the table and column for a value of
/// the wrong type.
pub(crate) fn decode_updates(
    v: &Value,
    resolved: &Resolved,
    v2: bool,
) -> Result<TableUpdates, Error> {
    let tables = v
        .as_object()
        .ok_or_else(|| Error::Protocol(format!("table updates {} are not an object", short(v))))?;
    let mut out = Vec::new();
    for (table, rows) in tables {
        let rt = resolved
            .tables
            .get(table)
            .ok_or_else(|| Error::Protocol(format!("update for unmonitored table {table:?}")))?;
        let rows = rows
            .as_object()
            .ok_or_else(|| Error::Protocol(format!("updates of {table} are not an object")))?;
        for (uuid, ru) in rows {
            let uuid = parse_uuid(uuid)
                .ok_or_else(|| Error::Protocol(format!("bad row UUID {uuid:?} in {table}")))?;
            let update = if v2 {
                decode_row_update2(ru, rt)
            } else {
                decode_row_update(ru, rt)
            }
            .map_err(|e| match e {
                Error::Protocol(m) => Error::Protocol(format!("{table} row {uuid}: {m}")),
                e => e.in_table(table),
            })?;
            out.push((table.clone(), uuid, update));
        }
    }
    Ok(out)
}

fn decode_row_update2(v: &Value, rt: &ResolvedTable) -> Result<RowUpdate, Error> {
    let obj = v.as_object().filter(|o| o.len() == 1).ok_or_else(|| {
        Error::Protocol(format!(
            "row update {} is not a one-member object",
            short(v)
        ))
    })?;
    let Some((kind, row)) = obj.iter().next() else {
        return Err(Error::Protocol("empty row update".into()));
    };
    Ok(match kind.as_str() {
        "initial" | "insert" => RowUpdate::Insert(rt.decode_row(row, true, false)?),
        "modify" => RowUpdate::Modify(rt.decode_row(row, false, true)?),
        "delete" => RowUpdate::Delete,
        k => return Err(Error::Protocol(format!("unknown row update kind {k:?}"))),
    })
}

fn decode_row_update(v: &Value, rt: &ResolvedTable) -> Result<RowUpdate, Error> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::Protocol(format!("row update {} is not an object", short(v))))?;
    let old = obj.get("old").filter(|o| !o.is_null());
    Ok(match obj.get("new").filter(|n| !n.is_null()) {
        Some(new) if old.is_some() => RowUpdate::Replace(rt.decode_row(new, true, false)?),
        Some(new) => RowUpdate::Insert(rt.decode_row(new, true, false)?),
        None if old.is_some() => RowUpdate::Delete,
        None => {
            return Err(Error::Protocol(
                "row update with neither old nor new".into(),
            ))
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn resolved() -> Resolved {
        let schema = DatabaseSchema::from_json(&json!({"name": "T", "tables": {"A": {"columns": {
            "name": {"type": "string"},
            "n": {"type": "integer"},
            "tags": {"type": {"key": "string", "min": 0, "max": 1}},
        }}}}))
        .unwrap();
        MonitorSpec::new("T")
            .table(TableSpec::new("A"))
            .resolve(&schema)
            .unwrap()
    }

    pub(crate) const U: &str = "36bdd6a5-9a0c-4d4c-9a0c-1b0e1cc3e0a1";

    #[test]
    fn update2_rows() {
        let r = resolved();
        let u = decode_updates(&json!({"A": {U: {"insert": {"name": "a"}}}}), &r, true).unwrap();
        // Omitted columns hold their defaults.
        let want = Row::new()
            .with("name", "a")
            .with("n", 0i64)
            .with("tags", None::<String>);
        assert_eq!(u[0].2, RowUpdate::Insert(want));
        let u = decode_updates(&json!({"A": {U: {"modify": {"n": 3}}}}), &r, true).unwrap();
        assert_eq!(u[0].2, RowUpdate::Modify(Row::new().with("n", 3i64)));
        let u = decode_updates(&json!({"A": {U: {"delete": null}}}), &r, true).unwrap();
        assert_eq!(u[0].2, RowUpdate::Delete);
    }

    #[test]
    fn update_v1_rows() {
        let r = resolved();
        let full = json!({"name": "a", "n": 1, "tags": ["set", []]});
        let u = decode_updates(&json!({"A": {U: {"new": full}}}), &r, false).unwrap();
        assert!(matches!(u[0].2, RowUpdate::Insert(_)));
        let u = decode_updates(
            &json!({"A": {U: {"old": {"n": 0}, "new": full}}}),
            &r,
            false,
        )
        .unwrap();
        assert!(matches!(u[0].2, RowUpdate::Replace(_)));
        let u = decode_updates(&json!({"A": {U: {"old": full}}}), &r, false).unwrap();
        assert_eq!(u[0].2, RowUpdate::Delete);
    }

    /// Malformed `<table-updates2>`, each with what its error says (whichever
    /// decoder reads it).
    pub(crate) fn malformed_updates() -> Vec<(Value, &'static str)> {
        vec![
            (json!({"B": {}}), "unmonitored table"),
            (json!({"A": {"x": {"delete": null}}}), "bad row UUID"),
            (
                json!({"A": {U: {"insert": {"name": 1}}}}),
                "A.name: expected string",
            ),
            (json!({"A": {U: {"insert": {"colour": 1}}}}), "A.colour"),
            (json!({"A": {U: {"upsert": {}}}}), "unknown row update kind"),
            (
                json!({"A": {U: {"insert": {}, "delete": null}}}),
                "one-member",
            ),
        ]
    }

    #[test]
    fn malformed_updates_are_errors() {
        let r = resolved();
        let mut cases = malformed_updates();
        cases.push((json!([]), "not an object"));
        for (v, want) in cases {
            let e = decode_updates(&v, &r, true).unwrap_err().to_string();
            assert!(e.contains(want), "{v}: {e}");
        }
    }
}
