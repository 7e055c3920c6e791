//! The crate's one error type.

use std::fmt;
use std::io;

/// Everything that can fail in this crate.
///
/// Decoding errors ([`Error::Type`], [`Error::MissingColumn`]) name the table
/// (when known) and column; server errors of one `transact` operation are
/// [`Error::Operation`] with the operation's index, table and column.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A remote string is not `unix:PATH`, `tcp:IP:PORT` or `tcp:[IPv6]:PORT`.
    #[error("invalid remote {input:?}: expected {expected}")]
    ParseRemote {
        /// The string given.
        input: String,
        /// What was expected instead.
        expected: &'static str,
    },
    /// Connecting to a remote failed.
    #[error("connect to {remote}: {source}")]
    Connect {
        /// The remote, as `unix:PATH` or `tcp:IP:PORT`.
        remote: String,
        /// The socket error.
        source: io::Error,
    },
    /// Reading or writing an established connection failed.
    #[error("connection I/O: {0}")]
    Io(#[source] io::Error),
    /// The server closed the connection.
    #[error("connection closed by the server")]
    Closed,
    /// One JSON-RPC message grew past the limit (bytes) before it ended.
    #[error("a message exceeds {limit} bytes")]
    MessageTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A message is not valid JSON or not a JSON-RPC 1.0 object (RFC 7047 §4).
    #[error("malformed message: {0}")]
    Protocol(String),
    /// The server sent no answer to a probe within the inactivity interval.
    #[error("no answer to an echo within {0:?}")]
    InactivityTimeout(std::time::Duration),
    /// A value does not have the type the column (or Rust type) expects
    /// (RFC 7047 §5.1).
    #[error("{place}: expected {expected}, found {found}")]
    Type {
        /// `table.column`, `column` or `value` when neither is known.
        place: Place,
        /// What the column or Rust type expects, e.g. `0 or 1 uuid`.
        expected: String,
        /// What was found, as compact JSON or a short description.
        found: String,
    },
    /// A row lacks a column that a [`Model`](crate::Model) reads.
    #[error("{place}: no such column in the row")]
    MissingColumn {
        /// `table.column`.
        place: Place,
    },
    /// The database schema sent by the server does not parse (RFC 7047 §3.2).
    #[error("malformed schema: {0}")]
    Schema(String),
    /// The server does not serve the database.
    #[error("the server has no database {name:?} (it has {available:?})")]
    NoSuchDatabase {
        /// The requested database.
        name: String,
        /// The databases that `list_dbs` returned.
        available: Vec<String>,
    },
    /// A monitored or queried table is not in the server's schema.
    #[error("database {database:?} has no table {table:?}")]
    NoSuchTable {
        /// The database.
        database: String,
        /// The table.
        table: String,
    },
    /// A monitored or indexed column is not in the server's schema, or an
    /// index names a column that is not monitored.
    #[error("table {table:?} has no column {column:?}{}", if *.not_monitored { " among the monitored columns" } else { "" })]
    NoSuchColumn {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// True when the column exists but the monitor does not include it.
        not_monitored: bool,
    },
    /// The server is a member of a clustered database that is not connected
    /// to its cluster (its data may be stale), when connecting or later; the
    /// client drops the connection and tries the next remote.
    #[error("the server's copy of clustered database {0:?} is not connected to its cluster")]
    NotClusterMember(String),
    /// A JSON-RPC request failed as a whole (its `error` member was not null).
    #[error("{method} failed: {error}")]
    Rpc {
        /// The method, e.g. `monitor_cond_since`.
        method: String,
        /// The `error` member, as compact JSON.
        error: String,
    },
    /// One operation of a transaction, or its commit, failed
    /// (RFC 7047 §5.2: `error` and `details` of the operation's result).
    #[error("{0}")]
    Operation(Box<OperationError>),
    /// There is no connection to a server at the moment.
    #[error("not connected to a server")]
    NotConnected,
    /// The connection was lost after the request was sent and before its
    /// reply: the request's effect (e.g. a transaction's commit) is unknown.
    #[error("connection lost before the reply (the outcome is unknown)")]
    Disconnected,
    /// The client was shut down.
    #[error("the client is shut down")]
    Shutdown,
}

/// Where a decoding error happened: a table and column when known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// The table, if known.
    pub table: Option<String>,
    /// The column, if known.
    pub column: Option<String>,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.table, &self.column) {
            (Some(t), Some(c)) => write!(f, "{t}.{c}"),
            (None, Some(c)) => write!(f, "column {c}"),
            (Some(t), None) => write!(f, "table {t}"),
            (None, None) => f.write_str("value"),
        }
    }
}

impl Error {
    /// A type mismatch of a value at no known place yet.
    pub(crate) fn type_mismatch(expected: impl Into<String>, found: impl Into<String>) -> Self {
        Error::Type {
            place: Place::default(),
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// Sets the column of a decoding error that has none yet.
    pub fn in_column(mut self, column: &str) -> Self {
        if let Error::Type { place, .. } | Error::MissingColumn { place } = &mut self {
            place.column.get_or_insert_with(|| column.to_owned());
        }
        self
    }

    /// Sets the table of a decoding error that has none yet (used by
    /// [`model!`](crate::model)).
    pub fn in_table(mut self, table: &str) -> Self {
        if let Error::Type { place, .. } | Error::MissingColumn { place } = &mut self {
            place.table.get_or_insert_with(|| table.to_owned());
        }
        self
    }

    /// The operation error, if this is one.
    pub fn as_operation(&self) -> Option<&OperationError> {
        match self {
            Error::Operation(e) => Some(e),
            _ => None,
        }
    }
}

/// The kind of a failed operation, from its `error` string (RFC 7047 §5.2 and
/// ovsdb-server(7) §3.1).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperationErrorKind {
    /// `constraint violation`: a value outside its column's constraints, or
    /// a duplicate in a unique index.
    ConstraintViolation,
    /// `referential integrity violation`: a strong reference to a missing
    /// row, or a delete of a row still referenced.
    ReferentialIntegrity,
    /// `timed out`: a `wait` whose condition did not hold within its timeout.
    TimedOut,
    /// `not owner`: an `assert` on a lock the session does not own.
    NotOwner,
    /// `resources exhausted`: e.g. a table's `maxRows`.
    ResourcesExhausted,
    /// `I/O error`: the server could not commit to disk.
    IoError,
    /// `duplicate uuid-name`.
    DuplicateUuidName,
    /// `domain error` or `range error` of a mutation.
    Arithmetic,
    /// `aborted`: the transaction had an `abort` operation.
    Aborted,
    /// `syntax error`, `unknown column`, `unknown table`: the request did not parse.
    Syntax,
    /// Another error string.
    Other,
}

impl OperationErrorKind {
    pub(crate) fn from_error(error: &str) -> Self {
        match error {
            "constraint violation" => Self::ConstraintViolation,
            "referential integrity violation" => Self::ReferentialIntegrity,
            "timed out" => Self::TimedOut,
            "not owner" => Self::NotOwner,
            "resources exhausted" => Self::ResourcesExhausted,
            "I/O error" => Self::IoError,
            "duplicate uuid-name" => Self::DuplicateUuidName,
            "domain error" | "range error" => Self::Arithmetic,
            "aborted" => Self::Aborted,
            "syntax error" | "unknown column" | "unknown table" => Self::Syntax,
            _ => Self::Other,
        }
    }
}

/// A server error for one operation of a transaction, or for its commit.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationError {
    /// The index of the failed operation in the request, or `None` when
    /// every operation succeeded and the commit failed (the server reports
    /// that as an extra result past the last operation; RFC 7047 §4.1.3).
    pub index: Option<usize>,
    /// The table concerned: the one the server's details name, else the
    /// failed operation's.
    pub table: Option<String>,
    /// The column concerned: the one the server's details name, else the
    /// first column of the operation's row that the schema's constraints
    /// reject (ovsdb-server does not name the column of a range or enum
    /// violation).
    pub column: Option<String>,
    /// The kind, from [`error`](Self::error).
    pub kind: OperationErrorKind,
    /// The server's `error` string, e.g. `constraint violation`.
    pub error: String,
    /// The server's `details`, if any.
    pub details: Option<String>,
}

impl fmt::Display for OperationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "operation {i}")?,
            None => f.write_str("commit")?,
        }
        match (&self.table, &self.column) {
            (Some(t), Some(c)) => write!(f, " ({t}.{c})")?,
            (Some(t), None) => write!(f, " ({t})")?,
            _ => {}
        }
        write!(f, ": {}", self.error)?;
        if let Some(d) = &self.details {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}
