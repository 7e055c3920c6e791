//! The in-memory replica of the monitored tables and the change sets that
//! move it forward (STYLE §13: a database client is a replica plus a
//! change stream).
//!
//! Every change set is computed against the replica without touching it,
//! then applied whole: a malformed update leaves the replica as it was.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::datum::{Datum, Uuid};
use crate::monitor::{Resolved, RowUpdate, TableUpdates};
use crate::row::{Model, Row};
use crate::schema::DatabaseSchema;
use crate::Error;

/// What happened to a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// The row appeared (inserted, or now matches the monitor's condition).
    Insert,
    /// Some monitored column changed.
    Modify,
    /// The row disappeared (deleted, or no longer matches the condition).
    Delete,
}

/// One row's change, with the row before and after (all monitored columns).
#[derive(Clone, Debug, PartialEq)]
pub struct RowChange {
    /// The table.
    pub table: String,
    /// The row's UUID.
    pub uuid: Uuid,
    /// Insert, modify or delete.
    pub kind: ChangeKind,
    /// The row before: `None` for an insert.
    pub old: Option<Row>,
    /// The row after: `None` for a delete.
    pub new: Option<Row>,
}

impl RowChange {
    /// The columns whose values differ between `old` and `new` (all the
    /// row's columns for an insert or delete).
    pub fn changed_columns(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        let (old, new) = (self.old.as_ref(), self.new.as_ref());
        for (c, d) in old.iter().flat_map(|r| r.iter()) {
            if new.and_then(|n| n.datum(c)) != Some(d) {
                out.insert(c);
            }
        }
        for (c, d) in new.iter().flat_map(|r| r.iter()) {
            if old.and_then(|o| o.datum(c)) != Some(d) {
                out.insert(c);
            }
        }
        out
    }

    /// The old row as a model (decoding errors as `Err`).
    pub fn old_as<M: Model>(&self) -> Option<Result<M, Error>> {
        self.old.as_ref().map(|r| M::from_row(self.uuid, r))
    }

    /// The new row as a model (decoding errors as `Err`).
    pub fn new_as<M: Model>(&self) -> Option<Result<M, Error>> {
        self.new.as_ref().map(|r| M::from_row(self.uuid, r))
    }
}

/// A typed row change of one table (see [`ChangeSet::typed`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TypedChange<M> {
    /// The row's UUID.
    pub uuid: Uuid,
    /// Insert, modify or delete.
    pub kind: ChangeKind,
    /// The row before (`None` for an insert or if it does not decode).
    pub old: Option<M>,
    /// The row after (`None` for a delete or if it does not decode).
    pub new: Option<M>,
}

/// What changed in one update message (one server transaction) or one
/// resynchronisation after a (re)connection, already applied to the
/// replica when it is delivered. At most one change per row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChangeSet {
    /// The changes, sorted by table, then row UUID.
    pub changes: Vec<RowChange>,
}

impl ChangeSet {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The number of row changes.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// The changes of one table.
    pub fn table<'a>(&'a self, table: &'a str) -> impl Iterator<Item = &'a RowChange> + 'a {
        self.changes.iter().filter(move |c| c.table == table)
    }

    /// The changes of a model's table, decoded. A row that does not decode
    /// is logged and given as `None`.
    pub fn typed<M: Model>(&self) -> Vec<TypedChange<M>> {
        let decode = |r: Option<Result<M, Error>>| {
            r.and_then(|r| {
                r.map_err(|e| tracing::warn!(table = M::TABLE, error = %e, "row does not decode"))
                    .ok()
            })
        };
        self.table(M::TABLE)
            .map(|c| TypedChange {
                uuid: c.uuid,
                kind: c.kind,
                old: decode(c.old_as()),
                new: decode(c.new_as()),
            })
            .collect()
    }
}

#[derive(Clone, Debug, Default)]
struct Table {
    /// Sorted, so that iteration order does not depend on hashing.
    rows: BTreeMap<Uuid, Row>,
    /// Indexed column → value → rows.
    indexes: BTreeMap<String, HashMap<Datum, BTreeSet<Uuid>>>,
}

impl Table {
    fn index_row(&mut self, uuid: Uuid, row: &Row, add: bool) {
        for (column, index) in &mut self.indexes {
            let Some(d) = row.datum(column) else { continue };
            if add {
                index.entry(d.clone()).or_default().insert(uuid);
            } else if let Some(set) = index.get_mut(d) {
                set.remove(&uuid);
                if set.is_empty() {
                    index.remove(d);
                }
            }
        }
    }
}

/// The in-memory copy of the monitored tables: every monitored row by
/// UUID, with every monitored column, and hash indexes on the columns the
/// [`MonitorSpec`](crate::MonitorSpec) asked for.
///
/// Read it through [`Client::replica`](crate::Client::replica), a read
/// guard: keep it briefly and never across an `.await`.
#[derive(Clone, Debug, Default)]
pub struct Replica {
    tables: BTreeMap<String, Table>,
    resolved: Resolved,
    schema: Option<Arc<DatabaseSchema>>,
}

impl Replica {
    /// The database schema of the last connection, once connected.
    pub fn schema(&self) -> Option<&DatabaseSchema> {
        self.schema.as_deref()
    }

    /// The rows of a model's table that decode, with their UUIDs, sorted by
    /// UUID; a row
    /// that does not decode is logged and skipped (see
    /// [`try_rows`](Self::try_rows)).
    pub fn rows<M: Model>(&self) -> impl Iterator<Item = (Uuid, M)> + '_ {
        self.try_rows::<M>().filter_map(|(u, r)| match r {
            Ok(m) => Some((u, m)),
            Err(e) => {
                tracing::warn!(table = M::TABLE, uuid = %u, error = %e, "row does not decode");
                None
            }
        })
    }

    /// Every row of a model's table, decoded or with its decoding error.
    pub fn try_rows<M: Model>(&self) -> impl Iterator<Item = (Uuid, Result<M, Error>)> + '_ {
        self.tables
            .get(M::TABLE)
            .into_iter()
            .flat_map(|t| t.rows.iter())
            .map(|(u, r)| (*u, M::from_row(*u, r)))
    }

    /// One row of a model's table; `None` if absent or if it does not
    /// decode (logged).
    pub fn get<M: Model>(&self, uuid: &Uuid) -> Option<M> {
        match self.try_get::<M>(uuid)? {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!(table = M::TABLE, uuid = %uuid, error = %e, "row does not decode");
                None
            }
        }
    }

    /// One row of a model's table, decoded or with its decoding error.
    pub fn try_get<M: Model>(&self, uuid: &Uuid) -> Option<Result<M, Error>> {
        self.raw_row(M::TABLE, uuid).map(|r| M::from_row(*uuid, r))
    }

    /// The rows of a model's table whose `column` equals `value`, through
    /// the column's index if it has one, else by a scan. Rows that do not
    /// decode are logged and skipped.
    pub fn find<M: Model>(&self, column: &str, value: &Datum) -> Vec<(Uuid, M)> {
        self.find_uuids(M::TABLE, column, value)
            .into_iter()
            .filter_map(|u| self.get::<M>(&u).map(|m| (u, m)))
            .collect()
    }

    /// The UUIDs of the rows of `table` whose `column` equals `value`
    /// (index or scan, as [`find`](Self::find)), sorted.
    pub fn find_uuids(&self, table: &str, column: &str, value: &Datum) -> Vec<Uuid> {
        let Some(t) = self.tables.get(table) else {
            return Vec::new();
        };
        if let Some(index) = t.indexes.get(column) {
            return index
                .get(value)
                .map_or(Vec::new(), |s| s.iter().copied().collect());
        }
        let mut out: Vec<Uuid> = t
            .rows
            .iter()
            .filter(|(_, r)| r.datum(column) == Some(value))
            .map(|(u, _)| *u)
            .collect();
        out.sort();
        out
    }

    /// Whether `column` of `table` has an index.
    pub fn is_indexed(&self, table: &str, column: &str) -> bool {
        self.tables
            .get(table)
            .is_some_and(|t| t.indexes.contains_key(column))
    }

    /// One row as stored: every monitored column.
    pub fn raw_row(&self, table: &str, uuid: &Uuid) -> Option<&Row> {
        self.tables.get(table)?.rows.get(uuid)
    }

    /// Every row of a table as stored, sorted by UUID.
    pub fn raw_rows<'a>(&'a self, table: &str) -> impl Iterator<Item = (&'a Uuid, &'a Row)> + 'a {
        self.tables
            .get(table)
            .into_iter()
            .flat_map(|t| t.rows.iter())
    }

    /// The number of rows of a table (0 if not monitored).
    pub fn table_len(&self, table: &str) -> usize {
        self.tables.get(table).map_or(0, |t| t.rows.len())
    }

    /// The monitored tables' names.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }

    /// Sets what is monitored for a (new) connection: tables no longer
    /// monitored go, new ones come empty, indexes are rebuilt. Rows stay,
    /// so that the connection's first state is diffed against them.
    pub(crate) fn configure(&mut self, resolved: Resolved, schema: Arc<DatabaseSchema>) {
        self.tables
            .retain(|name, _| resolved.tables.contains_key(name));
        for (name, rt) in &resolved.tables {
            let t = self.tables.entry(name.clone()).or_default();
            t.indexes = rt
                .indexes
                .iter()
                .map(|c| (c.clone(), HashMap::new()))
                .collect();
            let rows: Vec<(Uuid, Row)> = t.rows.iter().map(|(u, r)| (*u, r.clone())).collect();
            for (u, r) in rows {
                t.index_row(u, &r, true);
            }
        }
        self.resolved = resolved;
        self.schema = Some(schema);
    }

    /// The change set an update message makes, without applying it.
    ///
    /// # Errors
    ///
    /// [`Error::Protocol`] for a `modify` of a row the replica lacks.
    pub(crate) fn changes_of(&self, updates: &TableUpdates) -> Result<ChangeSet, Error> {
        let mut pending: BTreeMap<(&str, Uuid), RowChange> = BTreeMap::new();
        for (table, uuid, update) in updates {
            let rt = self.resolved.tables.get(table);
            let key = (table.as_str(), *uuid);
            // The row as of the previous update of this message, if any.
            let current: Option<Row> = match pending.get(&key) {
                Some(c) => c.new.clone(),
                None => self.raw_row(table, uuid).cloned(),
            };
            let new = match update {
                RowUpdate::Insert(r) | RowUpdate::Replace(r) => Some(r.clone()),
                RowUpdate::Delete => None,
                RowUpdate::Modify(diff) => {
                    let mut row = current.clone().ok_or_else(|| {
                        Error::Protocol(format!(
                            "modify of {table} row {uuid}, which the replica lacks"
                        ))
                    })?;
                    for (c, d) in diff.iter() {
                        let Some(t) = rt.and_then(|rt| rt.columns.get(c)) else {
                            continue;
                        };
                        let mut v = row
                            .datum(c)
                            .cloned()
                            .unwrap_or_else(|| Datum::default_of(t));
                        v.apply_diff(d, t);
                        row.insert(c, v);
                    }
                    Some(row)
                }
            };
            let old = match pending.remove(&key) {
                Some(c) => c.old,
                None => self.raw_row(table, uuid).cloned(),
            };
            if let Some(c) = change(table, *uuid, old, new) {
                pending.insert(key, c);
            } else {
                pending.remove(&key);
            }
        }
        Ok(ChangeSet {
            changes: pending.into_values().collect(),
        })
    }

    /// The change set that turns the replica into `full`, the complete
    /// contents of the monitored tables (a monitor reply without history).
    pub(crate) fn diff_to(&self, full: &TableUpdates) -> ChangeSet {
        let mut new_rows: BTreeMap<(&str, Uuid), &Row> = BTreeMap::new();
        for (table, uuid, update) in full {
            if let RowUpdate::Insert(r) | RowUpdate::Replace(r) = update {
                new_rows.insert((table.as_str(), *uuid), r);
            }
        }
        let mut changes = Vec::new();
        for (name, t) in &self.tables {
            let gone = t
                .rows
                .iter()
                .filter(|(u, _)| !new_rows.contains_key(&(name.as_str(), **u)));
            changes.extend(gone.filter_map(|(u, r)| change(name, *u, Some(r.clone()), None)));
        }
        for ((table, uuid), row) in new_rows {
            let old = self.raw_row(table, &uuid).cloned();
            changes.extend(change(table, uuid, old, Some(row.clone())));
        }
        changes.sort_by(|a, b| (&a.table, a.uuid).cmp(&(&b.table, b.uuid)));
        ChangeSet { changes }
    }

    /// Applies a change set computed by [`changes_of`](Self::changes_of)
    /// or [`diff_to`](Self::diff_to).
    pub(crate) fn apply(&mut self, cs: &ChangeSet) {
        for c in &cs.changes {
            let t = self.tables.entry(c.table.clone()).or_default();
            if let Some(old) = t.rows.remove(&c.uuid) {
                t.index_row(c.uuid, &old, false);
            }
            if let Some(new) = &c.new {
                t.index_row(c.uuid, new, true);
                t.rows.insert(c.uuid, new.clone());
            }
        }
    }
}

fn change(table: &str, uuid: Uuid, old: Option<Row>, new: Option<Row>) -> Option<RowChange> {
    let kind = match (&old, &new) {
        (None, None) => return None,
        (None, Some(_)) => ChangeKind::Insert,
        (Some(_), None) => ChangeKind::Delete,
        (Some(o), Some(n)) if o == n => return None,
        (Some(_), Some(_)) => ChangeKind::Modify,
    };
    Some(RowChange {
        table: table.to_owned(),
        uuid,
        kind,
        old,
        new,
    })
}

/// Test doubles: a replica fed by hand, for consumers' tests without a
/// server, and for fuzzing.
#[cfg(feature = "test-utils")]
impl Replica {
    /// An empty replica of what `spec` monitors, checked against `schema`.
    ///
    /// # Errors
    ///
    /// As [`Client::start`](crate::Client::start) would report them:
    /// [`Error::NoSuchTable`], [`Error::NoSuchColumn`].
    pub fn for_test(spec: &crate::MonitorSpec, schema: DatabaseSchema) -> Result<Replica, Error> {
        let resolved = spec.resolve(&schema)?;
        let mut r = Replica::default();
        r.configure(resolved, Arc::new(schema));
        Ok(r)
    }

    /// Applies a `<table-updates2>` object (ovsdb-server(7) §4.1.14) as the
    /// session applies one update2/update3 message: all or nothing, and
    /// returns its change set.
    ///
    /// # Errors
    ///
    /// [`Error::Protocol`] or [`Error::Type`] for a malformed update, which
    /// leaves the replica unchanged.
    pub fn apply_updates2(&mut self, updates: &serde_json::Value) -> Result<ChangeSet, Error> {
        let updates = crate::monitor::decode_updates(updates, &self.resolved, true)?;
        let cs = self.changes_of(&updates)?;
        self.apply(&cs);
        Ok(cs)
    }

    /// [`apply_updates2`](Self::apply_updates2) of the object's text, decoded
    /// as the client decodes `update2`/`update3` notifications (straight into
    /// rows, no `serde_json::Value` tree).
    ///
    /// # Errors
    ///
    /// As `apply_updates2`, also for text that is not JSON.
    pub fn apply_updates2_text(&mut self, updates: &str) -> Result<ChangeSet, Error> {
        let updates = crate::stream::decode_updates2(updates, &self.resolved)?;
        let cs = self.changes_of(&updates)?;
        self.apply(&cs);
        Ok(cs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::{MonitorSpec, TableSpec};
    use serde_json::json;

    fn replica() -> Replica {
        let schema = DatabaseSchema::from_json(&json!({"name": "T", "tables": {"A": {"columns": {
            "name": {"type": "string"},
            "tags": {"type": {"key": "string", "min": 0, "max": "unlimited"}},
        }}}}))
        .unwrap();
        let spec = MonitorSpec::new("T").table(TableSpec::new("A").index("name"));
        let resolved = spec.resolve(&schema).unwrap();
        let mut r = Replica::default();
        r.configure(resolved, Arc::new(schema));
        r
    }

    fn row(name: &str, tags: &[&str]) -> Row {
        Row::new().with("name", name).with(
            "tags",
            tags.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn insert_modify_delete_and_index() {
        let mut r = replica();
        let u = Uuid::from_u128(1);
        let cs = r
            .changes_of(&vec![("A".into(), u, RowUpdate::Insert(row("a", &["x"])))])
            .unwrap();
        assert_eq!(cs.changes[0].kind, ChangeKind::Insert);
        r.apply(&cs);
        assert_eq!(r.find_uuids("A", "name", &Datum::from("a")), vec![u]);
        let diff = Row::new()
            .with("name", "b")
            .with("tags", vec!["x".to_string(), "y".to_string()]);
        let cs = r
            .changes_of(&vec![("A".into(), u, RowUpdate::Modify(diff))])
            .unwrap();
        assert_eq!(cs.changes[0].new, Some(row("b", &["y"])));
        assert_eq!(
            cs.changes[0].changed_columns(),
            BTreeSet::from(["name", "tags"])
        );
        r.apply(&cs);
        assert!(r.find_uuids("A", "name", &Datum::from("a")).is_empty());
        assert_eq!(r.find_uuids("A", "name", &Datum::from("b")), vec![u]);
        let cs = r
            .changes_of(&vec![("A".into(), u, RowUpdate::Delete)])
            .unwrap();
        r.apply(&cs);
        assert_eq!(r.table_len("A"), 0);
        assert!(r.find_uuids("A", "name", &Datum::from("b")).is_empty());
    }

    #[test]
    fn modify_of_a_missing_row_changes_nothing() {
        let r = replica();
        let e = r.changes_of(&vec![(
            "A".into(),
            Uuid::from_u128(9),
            RowUpdate::Modify(Row::new()),
        )]);
        assert!(matches!(e, Err(Error::Protocol(_))));
    }

    #[test]
    fn diff_to_full_state() {
        let mut r = replica();
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let cs = r
            .changes_of(&vec![
                ("A".into(), a, RowUpdate::Insert(row("a", &[]))),
                ("A".into(), b, RowUpdate::Insert(row("b", &[]))),
            ])
            .unwrap();
        r.apply(&cs);
        let full = vec![
            ("A".into(), b, RowUpdate::Insert(row("b", &["t"]))),
            ("A".into(), c, RowUpdate::Insert(row("c", &[]))),
        ];
        let cs = r.diff_to(&full);
        let kinds: Vec<_> = cs.changes.iter().map(|c| (c.uuid, c.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (a, ChangeKind::Delete),
                (b, ChangeKind::Modify),
                (c, ChangeKind::Insert)
            ]
        );
        r.apply(&cs);
        assert_eq!(r.diff_to(&full), ChangeSet::default());
    }
}
