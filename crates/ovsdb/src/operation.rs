//! Transaction operations and their results (RFC 7047 §5.2), conditions
//! (§5.1 `<condition>`) and mutations (§5.1 `<mutation>`).

use serde_json::{json, Value};

use crate::datum::{parse_uuid, short, Datum, Uuid};
use crate::error::{OperationError, OperationErrorKind};
use crate::row::{Row, ToDatum};
use crate::schema::DatabaseSchema;
use crate::Error;

/// A comparison function of a condition (RFC 7047 §5.1 `<function>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    /// `<`: integers and reals.
    Less,
    /// `<=`.
    LessEqual,
    /// `==`: any type.
    Equal,
    /// `!=`.
    NotEqual,
    /// `>=`.
    GreaterEqual,
    /// `>`.
    Greater,
    /// `includes`: the column's set/map includes the value's elements.
    Includes,
    /// `excludes`: the column's set/map has none of the value's elements.
    Excludes,
}

impl Function {
    fn as_str(self) -> &'static str {
        match self {
            Function::Less => "<",
            Function::LessEqual => "<=",
            Function::Equal => "==",
            Function::NotEqual => "!=",
            Function::GreaterEqual => ">=",
            Function::Greater => ">",
            Function::Includes => "includes",
            Function::Excludes => "excludes",
        }
    }
}

/// A condition: `[column, function, value]` (RFC 7047 §5.1), or a
/// constant, which only `monitor_cond` accepts (ovsdb-server(7) §4.1.12).
///
/// A transaction's `where` holds when every condition holds; a monitor's
/// holds when **any** condition holds (ovsdb-server(7) §4.1.12).
#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    /// `[column, function, value]`.
    Compare {
        /// The column (`_uuid` included).
        column: String,
        /// The comparison.
        function: Function,
        /// The value to compare with.
        value: Datum,
    },
    /// `true` or `false` (monitor conditions only).
    Const(bool),
}

impl Condition {
    /// `[column, function, value]`.
    pub fn new(column: &str, function: Function, value: impl ToDatum) -> Self {
        Condition::Compare {
            column: column.to_owned(),
            function,
            value: value.to_datum(),
        }
    }

    /// `[column, "==", value]`.
    pub fn eq(column: &str, value: impl ToDatum) -> Self {
        Self::new(column, Function::Equal, value)
    }

    /// `["_uuid", "==", ["uuid", uuid]]`.
    pub fn uuid(uuid: Uuid) -> Self {
        Self::eq("_uuid", uuid)
    }

    /// The JSON notation.
    pub fn to_json(&self) -> Value {
        match self {
            Condition::Compare {
                column,
                function,
                value,
            } => json!([column, function.as_str(), value.to_json()]),
            Condition::Const(b) => json!(b),
        }
    }
}

/// A mutator (RFC 7047 §5.1 `<mutator>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutator {
    /// `+=`: integers and reals (each element of a set).
    Add,
    /// `-=`.
    Subtract,
    /// `*=`.
    Multiply,
    /// `/=`.
    Divide,
    /// `%=`: integers.
    Modulo,
    /// `insert`: add the value's elements to a set, or its pairs whose keys
    /// are absent to a map.
    Insert,
    /// `delete`: remove the value's elements from a set; from a map, remove
    /// the given pairs (a map value) or keys (a set value).
    Delete,
}

impl Mutator {
    fn as_str(self) -> &'static str {
        match self {
            Mutator::Add => "+=",
            Mutator::Subtract => "-=",
            Mutator::Multiply => "*=",
            Mutator::Divide => "/=",
            Mutator::Modulo => "%=",
            Mutator::Insert => "insert",
            Mutator::Delete => "delete",
        }
    }
}

/// A mutation: `[column, mutator, value]` (RFC 7047 §5.1).
#[derive(Clone, Debug, PartialEq)]
pub struct Mutation {
    /// The column.
    pub column: String,
    /// The mutator.
    pub mutator: Mutator,
    /// The operand.
    pub value: Datum,
}

impl Mutation {
    /// `[column, mutator, value]`.
    pub fn new(column: &str, mutator: Mutator, value: impl ToDatum) -> Self {
        Mutation {
            column: column.to_owned(),
            mutator,
            value: value.to_datum(),
        }
    }

    fn to_json(&self) -> Value {
        json!([self.column, self.mutator.as_str(), self.value.to_json()])
    }
}

/// When a `wait` is satisfied (RFC 7047 §5.2.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitUntil {
    /// `==`: the selected rows equal the given rows.
    Equal,
    /// `!=`: they differ.
    NotEqual,
}

/// One operation of a transaction (RFC 7047 §5.2).
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// §5.2.1: inserts a row; `uuid_name` lets later operations of the same
    /// transaction refer to it as `Atom::NamedUuid(uuid_name)`.
    Insert {
        /// The table.
        table: String,
        /// The columns to set; others take their defaults.
        row: Row,
        /// The name for `named-uuid` references.
        uuid_name: Option<String>,
    },
    /// §5.2.2: reads the rows matching every condition.
    Select {
        /// The table.
        table: String,
        /// The conditions (all must hold; empty: every row).
        conditions: Vec<Condition>,
        /// The columns to return; `None`: all, with `_uuid` and `_version`.
        columns: Option<Vec<String>>,
    },
    /// §5.2.3: sets columns of the matching rows.
    Update {
        /// The table.
        table: String,
        /// The conditions.
        conditions: Vec<Condition>,
        /// The columns to set.
        row: Row,
    },
    /// §5.2.4: mutates columns of the matching rows.
    Mutate {
        /// The table.
        table: String,
        /// The conditions.
        conditions: Vec<Condition>,
        /// The mutations.
        mutations: Vec<Mutation>,
    },
    /// §5.2.5: deletes the matching rows.
    Delete {
        /// The table.
        table: String,
        /// The conditions.
        conditions: Vec<Condition>,
    },
    /// §5.2.6: waits until the matching rows' `columns` compare to `rows`
    /// as `until` says, or fails with `timed out` after `timeout_ms`
    /// (`None`: wait forever; 0: fail at once).
    Wait {
        /// The table.
        table: String,
        /// The conditions.
        conditions: Vec<Condition>,
        /// The columns compared.
        columns: Vec<String>,
        /// `==` or `!=`.
        until: WaitUntil,
        /// The expected rows (with `columns` only).
        rows: Vec<Row>,
        /// The timeout in milliseconds.
        timeout_ms: Option<u64>,
    },
    /// §5.2.7: commits; `durable` asks for the commit to reach disk first.
    Commit {
        /// Whether the commit must be durable.
        durable: bool,
    },
    /// §5.2.8: aborts the transaction (its result is an `aborted` error).
    Abort,
    /// §5.2.9: a comment for the server's log.
    Comment(String),
    /// §5.2.10: fails with `not owner` unless this session owns the named
    /// lock (RFC 7047 §4.1.8; this client takes no locks, so it always
    /// fails: useful only to check the error path).
    Assert(String),
}

fn conds(c: &[Condition]) -> Value {
    Value::Array(c.iter().map(Condition::to_json).collect())
}

impl Operation {
    /// An insert without a `uuid-name`.
    pub fn insert(table: &str, row: Row) -> Self {
        Operation::Insert {
            table: table.to_owned(),
            row,
            uuid_name: None,
        }
    }

    /// An insert whose row later operations can reference as
    /// `Atom::NamedUuid(uuid_name)`.
    pub fn insert_named(table: &str, row: Row, uuid_name: &str) -> Self {
        Operation::Insert {
            table: table.to_owned(),
            row,
            uuid_name: Some(uuid_name.to_owned()),
        }
    }

    /// An update of the rows matching `conditions`.
    pub fn update(table: &str, conditions: Vec<Condition>, row: Row) -> Self {
        Operation::Update {
            table: table.to_owned(),
            conditions,
            row,
        }
    }

    /// A mutate of the rows matching `conditions`.
    pub fn mutate(table: &str, conditions: Vec<Condition>, mutations: Vec<Mutation>) -> Self {
        Operation::Mutate {
            table: table.to_owned(),
            conditions,
            mutations,
        }
    }

    /// A delete of the rows matching `conditions`.
    pub fn delete(table: &str, conditions: Vec<Condition>) -> Self {
        Operation::Delete {
            table: table.to_owned(),
            conditions,
        }
    }

    /// A select of all columns of the rows matching `conditions`.
    pub fn select(table: &str, conditions: Vec<Condition>) -> Self {
        Operation::Select {
            table: table.to_owned(),
            conditions,
            columns: None,
        }
    }

    /// The table the operation works on, if any.
    pub fn table(&self) -> Option<&str> {
        match self {
            Operation::Insert { table, .. }
            | Operation::Select { table, .. }
            | Operation::Update { table, .. }
            | Operation::Mutate { table, .. }
            | Operation::Delete { table, .. }
            | Operation::Wait { table, .. } => Some(table),
            Operation::Commit { .. }
            | Operation::Abort
            | Operation::Comment(_)
            | Operation::Assert(_) => None,
        }
    }

    /// The JSON notation (RFC 7047 §5.2).
    pub fn to_json(&self) -> Value {
        match self {
            Operation::Insert {
                table,
                row,
                uuid_name,
            } => {
                let mut o = json!({"op": "insert", "table": table, "row": row.to_json()});
                if let (Some(n), Some(obj)) = (uuid_name, o.as_object_mut()) {
                    obj.insert("uuid-name".into(), json!(n));
                }
                o
            }
            Operation::Select {
                table,
                conditions,
                columns,
            } => {
                let mut o = json!({"op": "select", "table": table, "where": conds(conditions)});
                if let (Some(c), Some(obj)) = (columns, o.as_object_mut()) {
                    obj.insert("columns".into(), json!(c));
                }
                o
            }
            Operation::Update {
                table,
                conditions,
                row,
            } => {
                json!({"op": "update", "table": table, "where": conds(conditions), "row": row.to_json()})
            }
            Operation::Mutate {
                table,
                conditions,
                mutations,
            } => json!({
                "op": "mutate", "table": table, "where": conds(conditions),
                "mutations": mutations.iter().map(Mutation::to_json).collect::<Vec<_>>(),
            }),
            Operation::Delete { table, conditions } => {
                json!({"op": "delete", "table": table, "where": conds(conditions)})
            }
            Operation::Wait {
                table,
                conditions,
                columns,
                until,
                rows,
                timeout_ms,
            } => {
                let mut o = json!({
                    "op": "wait", "table": table, "where": conds(conditions), "columns": columns,
                    "until": match until { WaitUntil::Equal => "==", WaitUntil::NotEqual => "!=" },
                    "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
                });
                if let (Some(t), Some(obj)) = (timeout_ms, o.as_object_mut()) {
                    obj.insert("timeout".into(), json!(t));
                }
                o
            }
            Operation::Commit { durable } => json!({"op": "commit", "durable": durable}),
            Operation::Abort => json!({"op": "abort"}),
            Operation::Comment(c) => json!({"op": "comment", "comment": c}),
            Operation::Assert(lock) => json!({"op": "assert", "lock": lock}),
        }
    }

    fn row(&self) -> Option<&Row> {
        match self {
            Operation::Insert { row, .. } | Operation::Update { row, .. } => Some(row),
            _ => None,
        }
    }
}

/// The result of one successful operation (RFC 7047 §5.2).
#[derive(Clone, Debug, PartialEq)]
pub enum OperationResult {
    /// `insert`: the new row's UUID.
    Inserted(Uuid),
    /// `update`, `mutate`, `delete`: the number of rows matched.
    Count(u64),
    /// `select`: the rows, typed by the schema.
    Rows(Vec<Row>),
    /// `wait`, `commit`, `abort`, `comment`, `assert`: nothing.
    Empty,
}

/// The params of a `transact` request (RFC 7047 §4.1.3).
pub(crate) fn transact_params(db: &str, ops: &[Operation]) -> Value {
    let mut p = vec![json!(db)];
    p.extend(ops.iter().map(Operation::to_json));
    Value::Array(p)
}

/// Decodes a `transact` reply's result: one result per operation, or the
/// first error (RFC 7047 §4.1.3).
pub(crate) fn decode_results(
    result: &Value,
    ops: &[Operation],
    schema: Option<&DatabaseSchema>,
) -> Result<Vec<OperationResult>, Error> {
    let arr = result.as_array().ok_or_else(|| {
        Error::Protocol(format!("transact result {} is not an array", short(result)))
    })?;
    // An error anywhere (an operation's, or the commit's past the last
    // operation) fails the whole transaction.
    for (i, r) in arr.iter().enumerate() {
        if let Some(err) = r.get("error").and_then(Value::as_str) {
            let op = ops.get(i);
            return Err(Error::Operation(Box::new(operation_error(
                op.map(|_| i),
                op,
                err,
                r.get("details").and_then(Value::as_str),
                schema,
            ))));
        }
    }
    if arr.len() < ops.len() {
        return Err(Error::Protocol(format!(
            "transact returned {} results for {} operations",
            arr.len(),
            ops.len()
        )));
    }
    ops.iter()
        .zip(arr)
        .map(|(op, r)| decode_one(op, r, schema))
        .collect()
}

fn decode_one(
    op: &Operation,
    r: &Value,
    schema: Option<&DatabaseSchema>,
) -> Result<OperationResult, Error> {
    let bad = || Error::Protocol(format!("unexpected operation result {}", short(r)));
    Ok(match op {
        Operation::Insert { .. } => {
            let u = r.get("uuid").and_then(Value::as_array).ok_or_else(bad)?;
            match u.as_slice() {
                [Value::String(tag), Value::String(s)] if tag == "uuid" => {
                    OperationResult::Inserted(parse_uuid(s).ok_or_else(bad)?)
                }
                _ => return Err(bad()),
            }
        }
        Operation::Update { .. } | Operation::Mutate { .. } | Operation::Delete { .. } => {
            OperationResult::Count(r.get("count").and_then(Value::as_u64).ok_or_else(bad)?)
        }
        Operation::Select { table, .. } => {
            let rows = r.get("rows").and_then(Value::as_array).ok_or_else(bad)?;
            let ts = schema.ok_or(Error::NotConnected)?.table(table)?;
            OperationResult::Rows(
                rows.iter()
                    .map(|row| Row::from_json(row, ts).map_err(|e| e.in_table(table)))
                    .collect::<Result<_, _>>()?,
            )
        }
        _ => OperationResult::Empty,
    })
}

fn operation_error(
    index: Option<usize>,
    op: Option<&Operation>,
    error: &str,
    details: Option<&str>,
    schema: Option<&DatabaseSchema>,
) -> OperationError {
    let kind = OperationErrorKind::from_error(error);
    let named_table = details.and_then(|d| {
        word_after(d, "Table ")
            .or_else(|| word_after(d, "delete "))
            .or_else(|| word_after(d, "rows in "))
    });
    let table = named_table.or_else(|| op.and_then(Operation::table).map(str::to_owned));
    let mut column = details.and_then(|d| word_after(d, "column "));
    if column.is_none() && kind == OperationErrorKind::ConstraintViolation {
        column = offending_column(op, schema);
    }
    if let (None, Some(Operation::Mutate { mutations, .. })) = (&column, op) {
        if let [m] = mutations.as_slice() {
            column = Some(m.column.clone());
        }
    }
    OperationError {
        index,
        table,
        column,
        kind,
        error: error.to_owned(),
        details: details.map(str::to_owned),
    }
}

/// The identifier after `prefix` in `s` (quotes stripped), e.g. the
/// column in `... column "name".` or `Table Holder column thing row ...`.
fn word_after(s: &str, prefix: &str) -> Option<String> {
    let rest = &s[s.find(prefix)? + prefix.len()..];
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let w: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    (!w.is_empty()).then_some(w)
}

/// The first column of an insert's or update's row that the schema's
/// constraints reject (for an insert, the defaults of unset columns too).
fn offending_column(op: Option<&Operation>, schema: Option<&DatabaseSchema>) -> Option<String> {
    let op = op?;
    let ts = schema?.tables.get(op.table()?)?;
    let row = op.row()?;
    for (c, d) in row.iter() {
        if ts.column(c).is_some_and(|t| t.check(d).is_err()) {
            return Some(c.to_owned());
        }
    }
    if let Operation::Insert { .. } = op {
        for (c, t) in &ts.columns {
            if row.datum(c).is_none() && t.check(&Datum::default_of(t)).is_err() {
                return Some(c.clone());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constraint_violation_names_the_column() {
        let schema = DatabaseSchema::from_json(
            &serde_json::from_str(
                &std::fs::read_to_string(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/tests/server/test.ovsschema"
                ))
                .unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let ops = [
            Operation::Comment("c".into()),
            Operation::insert("Thing", Row::new().with("name", "b").with("count", 5000i64)),
        ];
        let result = json!([{}, {"details": "5000 is not in the valid range 0 to 1000 (inclusive)", "error": "constraint violation"}]);
        let e = decode_results(&result, &ops, Some(&schema)).unwrap_err();
        let e = e.as_operation().unwrap();
        assert_eq!(
            (e.index, e.table.as_deref(), e.column.as_deref()),
            (Some(1), Some("Thing"), Some("count"))
        );
    }
}
