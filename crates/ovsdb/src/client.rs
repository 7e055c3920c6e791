//! The client: a handle ([`Client`]) to one session task that owns the
//! connection.
//!
//! # Threading
//!
//! [`Client::start`] spawns one task on the caller's tokio runtime. That
//! task alone owns the socket: it connects, monitors, answers the server's
//! `echo`, sends requests and reads replies and updates, and reconnects.
//! Handles talk to it over a channel. The [`Replica`] sits behind a
//! `std::sync::RwLock` that the task write-locks only to apply a computed
//! change set (no I/O, no `.await` under it); readers take the read guard
//! from [`Client::replica`] and must not hold it across an `.await`.
//! Events go out on an unbounded channel, each change set after it was
//! applied to the replica.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::datum::{parse_uuid, short, Uuid};
use crate::jsonrpc::{self, Framer, Message};
use crate::monitor::{self, conditions_json, MonitorSpec, Resolved};
use crate::operation::{self, Condition, Operation, OperationResult};
use crate::remote::Remote;
use crate::replica::{ChangeSet, Replica};
use crate::schema::DatabaseSchema;
use crate::Error;

/// How a [`Client`] connects.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Servers to try in turn (e.g. the members of a clustered database);
    /// on failure the client moves on to the next one.
    pub remotes: Vec<Remote>,
    /// The first wait after a failed attempt (default 100 ms).
    pub backoff_min: Duration,
    /// The longest wait; waits double from `backoff_min` up to this after
    /// each failed attempt (default 8 s). Each wait is drawn uniformly from
    /// its upper half (jitter).
    pub backoff_max: Duration,
    /// After this much silence from a TCP server the client sends an `echo`,
    /// and drops the connection when nothing arrives within another such
    /// interval (default 5 s, as ovsdb-server's own probe). `None`: never.
    /// Also bounds connecting and each write. A Unix socket is not probed
    /// ([`Remote::needs_probes`]).
    pub inactivity_probe: Option<Duration>,
    /// The largest message accepted, in bytes (default 64 MiB).
    pub max_message: usize,
}

impl ClientConfig {
    /// The defaults for these remotes.
    pub fn new(remotes: Vec<Remote>) -> Self {
        ClientConfig {
            remotes,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(8),
            inactivity_probe: Some(Duration::from_secs(5)),
            max_message: jsonrpc::DEFAULT_MAX_MESSAGE,
        }
    }
}

/// Where the session task is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionState {
    /// Connecting to, or setting up the monitor on, `remote`; `attempts`
    /// failed attempts since the last established connection.
    Connecting {
        /// The remote being tried.
        remote: Remote,
        /// Failed attempts so far.
        attempts: u32,
    },
    /// Monitoring `remote`; the replica is in sync with it.
    Connected {
        /// The server.
        remote: Remote,
        /// When the monitor was established.
        since: Instant,
    },
    /// Waiting before the next attempt.
    Backoff {
        /// When the next attempt starts.
        until: Instant,
        /// Failed attempts so far.
        attempts: u32,
        /// Why the last attempt or connection failed.
        last_error: String,
    },
    /// Shut down, or every handle was dropped.
    Shutdown,
}

/// What the session reports, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A monitor was established; the replica already equals the server's
    /// state. The difference from what the replica held before follows as
    /// one [`Event::Changes`] (unless empty).
    Connected {
        /// The server.
        remote: Remote,
        /// True when the server still had the replica's last transaction
        /// (`monitor_cond_since` found it) and sent only what changed since;
        /// false when it sent its whole state, which was diffed against the
        /// replica.
        incremental: bool,
    },
    /// An established connection was lost (or a connection attempt got as
    /// far as a server that refused the monitor, e.g. for a missing table);
    /// the replica keeps its rows until the next connection resyncs it.
    Disconnected {
        /// The server.
        remote: Remote,
        /// Why, e.g. `connection closed by the server`.
        reason: String,
    },
    /// One server transaction (one update message), or one resync after a
    /// connection: already applied to the replica.
    Changes(ChangeSet),
}

enum Command {
    Transact {
        ops: Vec<Operation>,
        reply: oneshot::Sender<Result<Vec<OperationResult>, Error>>,
    },
    SetCondition {
        table: String,
        condition: Vec<Condition>,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    SetProbe(Option<Duration>),
    Shutdown,
}

struct Shared {
    replica: RwLock<Replica>,
    state: watch::Sender<ConnectionState>,
    database: String,
}

/// A handle to an OVSDB session; cheap to clone. The session task stops
/// when [`shutdown`](Self::shutdown) is called or every handle is dropped.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("database", &self.shared.database)
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

impl Client {
    /// Starts the session task on the current tokio runtime and returns a
    /// handle and the event stream.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (as `tokio::spawn`).
    pub fn start(
        config: ClientConfig,
        monitor: MonitorSpec,
    ) -> (Client, mpsc::UnboundedReceiver<Event>) {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let first = config.remotes.first().cloned();
        let initial = match first {
            Some(remote) => ConnectionState::Connecting {
                remote,
                attempts: 0,
            },
            None => ConnectionState::Shutdown,
        };
        let shared = Arc::new(Shared {
            replica: RwLock::new(Replica::default()),
            state: watch::Sender::new(initial),
            database: monitor.database().to_owned(),
        });
        let session = Session {
            config,
            spec: monitor,
            shared: shared.clone(),
            commands: commands_rx,
            events: events_tx,
            last_txn_id: None,
            deferred: Vec::new(),
            resolved: Resolved::default(),
        };
        tokio::spawn(session.run());
        (Client { shared, commands }, events)
    }

    /// A read guard on the replica. Hold it briefly and never across an
    /// `.await` (the session task needs the write lock to apply updates).
    pub fn replica(&self) -> RwLockReadGuard<'_, Replica> {
        self.shared
            .replica
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's state.
    pub fn state(&self) -> ConnectionState {
        self.shared.state.borrow().clone()
    }

    /// Waits until the session is connected (or shut down: `Err(Shutdown)`).
    ///
    /// # Errors
    ///
    /// [`Error::Shutdown`].
    pub async fn connected(&self) -> Result<(), Error> {
        let mut rx = self.shared.state.subscribe();
        let state = rx
            .wait_for(|s| {
                matches!(
                    s,
                    ConnectionState::Connected { .. } | ConnectionState::Shutdown
                )
            })
            .await
            .map_err(|_| Error::Shutdown)?;
        match *state {
            ConnectionState::Connected { .. } => Ok(()),
            _ => Err(Error::Shutdown),
        }
    }

    /// The monitored database's name.
    pub fn database(&self) -> &str {
        &self.shared.database
    }

    /// Runs a transaction on the monitored database (RFC 7047 §4.1.3):
    /// one result per operation.
    ///
    /// The update notification a transaction causes reaches the replica
    /// before the reply (ovsdb-server sends it first), so the replica
    /// holds the transaction's effect when this returns `Ok`.
    ///
    /// # Errors
    ///
    /// [`Error::NotConnected`] at once without a connection;
    /// [`Error::Operation`] for the first failed operation (or the commit),
    /// naming its index, table and column; [`Error::Disconnected`] if the
    /// connection dropped before the reply (the outcome is unknown);
    /// [`Error::Rpc`] if the request as a whole failed; [`Error::Shutdown`].
    pub async fn transact(&self, ops: Vec<Operation>) -> Result<Vec<OperationResult>, Error> {
        if !matches!(
            *self.shared.state.borrow(),
            ConnectionState::Connected { .. }
        ) {
            return Err(Error::NotConnected);
        }
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::Transact { ops, reply })
            .map_err(|_| Error::Shutdown)?;
        rx.await.map_err(|_| Error::Shutdown)?
    }

    /// Replaces the condition of a monitored table (`monitor_cond_change`,
    /// ovsdb-server(7) §4.1.13): rows that now match arrive as inserts,
    /// rows that no longer do as deletes, in one change set before this
    /// returns. The condition is remembered for later reconnections; when
    /// not connected it only is remembered.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchTable`] if the table is not monitored;
    /// [`Error::Rpc`] if the server refuses the change (the session then
    /// reconnects with the new condition); [`Error::Disconnected`];
    /// [`Error::Shutdown`].
    pub async fn set_condition(&self, table: &str, condition: Vec<Condition>) -> Result<(), Error> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::SetCondition {
                table: table.to_owned(),
                condition,
                reply,
            })
            .map_err(|_| Error::Shutdown)?;
        rx.await.map_err(|_| Error::Shutdown)?
    }

    /// Changes the inactivity probe ([`ClientConfig::inactivity_probe`]) of the
    /// running session: the connection up now (over TCP) probes at the new interval
    /// from the next wait on, and so do later connections. `None`: never. What
    /// ovsdb-idl's `ovsdb_idl_set_probe_interval` does when ovn-controller reads a
    /// new `external_ids:ovn-remote-probe-interval`.
    pub fn set_inactivity_probe(&self, probe: Option<Duration>) {
        let _ = self.commands.send(Command::SetProbe(probe));
    }

    /// Stops the session task and closes its connection; pending requests
    /// fail with [`Error::Shutdown`]. Returns once the task has stopped.
    pub async fn shutdown(self) {
        let mut rx = self.shared.state.subscribe();
        if self.commands.send(Command::Shutdown).is_ok() {
            let _ = rx.wait_for(|s| *s == ConnectionState::Shutdown).await;
        }
    }
}

/// The request kinds awaiting a reply.
enum Pending {
    Transact {
        ops: Vec<Operation>,
        reply: oneshot::Sender<Result<Vec<OperationResult>, Error>>,
    },
    CondChange(oneshot::Sender<Result<(), Error>>),
    Echo,
}

/// Which monitor method the server accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    CondSince,
    Cond,
    Plain,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::CondSince => "monitor_cond_since",
            Method::Cond => "monitor_cond",
            Method::Plain => "monitor",
        }
    }

    fn notification(self) -> &'static str {
        match self {
            Method::CondSince => "update3",
            Method::Cond => "update2",
            Method::Plain => "update",
        }
    }
}

/// The id of our monitor of the database on a connection.
const MONITOR_ID: &str = "ovsdb-rs";
/// The id of our monitor of `_Server` (cluster membership).
const SERVER_MONITOR_ID: &str = "ovsdb-rs-server";

/// Fails if a `_Server` Database `<table-updates2>` says a clustered
/// database is not connected to its cluster (a `modify` carries the new
/// value of the scalar `connected`).
fn check_membership(updates: &Value, db: &str) -> Result<(), Error> {
    let rows = updates.get("Database").and_then(Value::as_object);
    for update in rows.into_iter().flat_map(|r| r.values()) {
        let Some(row) = update.as_object().and_then(|o| o.values().next()) else {
            continue;
        };
        let clustered = row.get("model").and_then(Value::as_str) == Some("clustered");
        // update2 omits a false `connected` from initial rows (the default).
        let connected = row
            .get("connected")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let modify = update.get("modify").is_some();
        if (clustered && !connected)
            || (modify && row.get("connected") == Some(&Value::Bool(false)))
        {
            return Err(Error::NotClusterMember(db.to_owned()));
        }
    }
    Ok(())
}

enum Outcome {
    /// Stop the task.
    Shutdown,
    /// The attempt or connection failed; `established` if a monitor was up.
    Failed { error: Error, established: bool },
}

struct Session {
    config: ClientConfig,
    spec: MonitorSpec,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<Event>,
    /// The last transaction id of update3, for `monitor_cond_since`; `None`
    /// after a condition changed while disconnected.
    last_txn_id: Option<Uuid>,
    /// Condition changes that arrived while the monitor was being set up.
    deferred: Vec<Command>,
    /// The spec checked against the connected server's schema.
    resolved: Resolved,
}

impl Session {
    fn read_replica(&self) -> RwLockReadGuard<'_, Replica> {
        self.shared
            .replica
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write_replica(&self) -> RwLockWriteGuard<'_, Replica> {
        self.shared
            .replica
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    async fn run(mut self) {
        let n = self.config.remotes.len();
        if n == 0 {
            tracing::warn!("ovsdb client started without remotes");
            self.shared.state.send_replace(ConnectionState::Shutdown);
            return;
        }
        let mut index = 0;
        let mut attempts: u32 = 0;
        let mut backoff = self.config.backoff_min;
        loop {
            let remote = self.config.remotes[index % n].clone();
            self.shared.state.send_replace(ConnectionState::Connecting {
                remote: remote.clone(),
                attempts,
            });
            let (error, established) = match self.connection(&remote).await {
                Outcome::Shutdown => break,
                Outcome::Failed { error, established } => (error, established),
            };
            if established {
                tracing::warn!(%remote, %error, "ovsdb connection lost");
                attempts = 0;
                backoff = self.config.backoff_min;
            } else {
                tracing::info!(%remote, %error, "ovsdb connection attempt failed");
                attempts = attempts.saturating_add(1);
                index += 1;
            }
            let wait = jitter(backoff);
            if !established {
                backoff = (backoff * 2).min(self.config.backoff_max);
            }
            let until = Instant::now() + wait;
            self.shared.state.send_replace(ConnectionState::Backoff {
                until,
                attempts,
                last_error: error.to_string(),
            });
            let refused = matches!(
                error,
                Error::NoSuchTable { .. }
                    | Error::NoSuchColumn { .. }
                    | Error::NoSuchDatabase { .. }
            );
            if established || refused {
                let _ = self.events.send(Event::Disconnected {
                    remote: remote.clone(),
                    reason: error.to_string(),
                });
            }
            if self.idle_until(until).await.is_err() {
                break;
            }
        }
        self.shared.state.send_replace(ConnectionState::Shutdown);
    }

    /// Waits, answering commands that need a connection with `NotConnected`
    /// and remembering conditions. `Err` on shutdown.
    async fn idle_until(&mut self, until: Instant) -> Result<(), ()> {
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(until) => return Ok(()),
                c = self.commands.recv() => self.offline_command(c)?,
            }
        }
    }

    /// Handles a command while no monitor is up. `Err` on shutdown.
    fn offline_command(&mut self, c: Option<Command>) -> Result<(), ()> {
        match c {
            None | Some(Command::Shutdown) => Err(()),
            Some(Command::Transact { reply, .. }) => {
                let _ = reply.send(Err(Error::NotConnected));
                Ok(())
            }
            Some(Command::SetCondition {
                table,
                condition,
                reply,
            }) => {
                let r = self
                    .check_condition(&table, &condition)
                    .and_then(|()| self.remember_condition(&table, condition));
                if r.is_ok() {
                    // The history the server keeps is for the old condition.
                    self.last_txn_id = None;
                }
                let _ = reply.send(r);
                Ok(())
            }
            Some(Command::SetProbe(probe)) => {
                self.config.inactivity_probe = probe;
                Ok(())
            }
        }
    }

    /// Checks that a condition's columns are in the connected server's
    /// schema, so that a bad condition is refused now rather than making
    /// every later monitor request fail.
    fn check_condition(&self, table: &str, condition: &[Condition]) -> Result<(), Error> {
        let replica = self.read_replica();
        let Some(ts) = replica.schema().and_then(|s| s.tables.get(table)) else {
            return Ok(());
        };
        for c in condition {
            if let Condition::Compare { column, .. } = c {
                if ts.column(column).is_none() {
                    return Err(Error::NoSuchColumn {
                        table: table.to_owned(),
                        column: column.clone(),
                        not_monitored: false,
                    });
                }
            }
        }
        Ok(())
    }

    fn remember_condition(&mut self, table: &str, condition: Vec<Condition>) -> Result<(), Error> {
        let db = self.spec.database().to_owned();
        let t = self.spec.get_mut(table).ok_or_else(|| Error::NoSuchTable {
            database: db,
            table: table.to_owned(),
        })?;
        t.set_condition(condition);
        Ok(())
    }

    /// One connection: connect, set up the monitor, serve until it fails.
    async fn connection(&mut self, remote: &Remote) -> Outcome {
        let timeout = self
            .config
            .inactivity_probe
            .unwrap_or(Duration::from_secs(3600));
        let connect = tokio::time::timeout(timeout, connect(remote));
        tokio::pin!(connect);
        let connected = loop {
            tokio::select! {
                r = &mut connect => break r,
                c = self.commands.recv() => {
                    if self.offline_command(c).is_err() {
                        return Outcome::Shutdown;
                    }
                }
            }
        };
        let mut conn = match connected {
            Ok(Ok(c)) => {
                let mut conn = Conn::new(c, remote.needs_probes(), self.config.max_message);
                conn.set_probe(self.config.inactivity_probe);
                conn
            }
            Ok(Err(e)) => {
                return Outcome::Failed {
                    error: Error::Connect {
                        remote: remote.to_string(),
                        source: e,
                    },
                    established: false,
                }
            }
            Err(_) => {
                return Outcome::Failed {
                    error: Error::Connect {
                        remote: remote.to_string(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "connect timed out",
                        ),
                    },
                    established: false,
                }
            }
        };
        let method = match self.setup(&mut conn, remote).await {
            Ok(m) => m,
            Err(None) => return Outcome::Shutdown,
            Err(Some(error)) => {
                // Condition changes that arrived meanwhile are remembered
                // for the next attempt.
                for c in std::mem::take(&mut self.deferred) {
                    let _ = self.offline_command(Some(c));
                }
                return Outcome::Failed {
                    error,
                    established: false,
                };
            }
        };
        let mut pending: HashMap<u64, Pending> = HashMap::new();
        let result = self.serve(&mut conn, method, &mut pending).await;
        let disconnected = match &result {
            Ok(()) => Error::Shutdown,
            Err(_) => Error::Disconnected,
        };
        for (_, p) in pending.drain() {
            match p {
                Pending::Transact { reply, .. } => {
                    let _ = reply.send(Err(clone_simple(&disconnected)));
                }
                Pending::CondChange(reply) => {
                    let _ = reply.send(Err(clone_simple(&disconnected)));
                }
                Pending::Echo => {}
            }
        }
        match result {
            Ok(()) => Outcome::Shutdown,
            Err(error) => Outcome::Failed {
                error,
                established: true,
            },
        }
    }

    /// `list_dbs`, `get_schema`, the monitor and the first sync. `Err(None)`
    /// on shutdown.
    async fn setup(&mut self, conn: &mut Conn, remote: &Remote) -> Result<Method, Option<Error>> {
        let db = self.spec.database().to_owned();
        let dbs = self.call(conn, "list_dbs", json!([])).await??;
        let available: Vec<String> = dbs
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if !available.contains(&db) {
            return Err(Some(Error::NoSuchDatabase {
                name: db,
                available,
            }));
        }
        if available.iter().any(|d| d == "_Server") {
            self.watch_cluster_membership(conn, &db).await?;
        }
        let schema = self.call(conn, "get_schema", json!([db])).await??;
        let schema = Arc::new(DatabaseSchema::from_json(&schema)?);
        let resolved = self.spec.resolve(&schema)?;

        let (method, reply) = self.monitor(conn, &db, &resolved).await?;
        if method == Method::Plain && self.spec.tables().any(|t| t.current_condition().is_some()) {
            tracing::warn!("the server has no monitor_cond: conditions are ignored");
        }

        // The first sync: the reply's updates either continue the replica's
        // history (monitor_cond_since found it) or are the whole state.
        let (found, txn, updates) = match method {
            Method::CondSince => {
                let [found, txn, updates] = reply.as_array().map(Vec::as_slice).unwrap_or_default()
                else {
                    return Err(Some(Error::Protocol(format!(
                        "monitor_cond_since result {} is not [found, last-txn-id, updates]",
                        short(&reply)
                    ))));
                };
                (
                    found.as_bool().unwrap_or(false),
                    txn.as_str().and_then(parse_uuid),
                    updates.clone(),
                )
            }
            _ => (false, None, reply),
        };
        let updates = monitor::decode_updates(&updates, &resolved, method != Method::Plain)?;
        self.write_replica().configure(resolved.clone(), schema);
        self.resolved = resolved;
        let changes = {
            let replica = self.read_replica();
            if found {
                replica.changes_of(&updates)?
            } else {
                replica.diff_to(&updates)
            }
        };
        self.write_replica().apply(&changes);
        self.last_txn_id = txn.filter(|t| !t.is_nil());
        tracing::info!(%remote, method = method.name(), found, changes = changes.len(), "ovsdb monitor established");
        self.shared.state.send_replace(ConnectionState::Connected {
            remote: remote.clone(),
            since: Instant::now(),
        });
        let _ = self.events.send(Event::Connected {
            remote: remote.clone(),
            incremental: found,
        });
        if !changes.is_empty() {
            let _ = self.events.send(Event::Changes(changes));
        }
        Ok(method)
    }

    /// Sends the best monitor request the server accepts: falls back from
    /// `monitor_cond_since` to `monitor_cond` to `monitor` when the server
    /// answers `unknown method`.
    async fn monitor(
        &mut self,
        conn: &mut Conn,
        db: &str,
        resolved: &Resolved,
    ) -> Result<(Method, Value), Option<Error>> {
        let mut method = Method::CondSince;
        tracing::debug!(last_txn_id = ?self.last_txn_id, "monitoring");
        loop {
            let params = match method {
                Method::CondSince => json!([
                    db,
                    MONITOR_ID,
                    self.spec.requests(resolved, true),
                    self.last_txn_id.unwrap_or(Uuid::nil()).to_string()
                ]),
                Method::Cond => json!([db, MONITOR_ID, self.spec.requests(resolved, true)]),
                Method::Plain => json!([db, MONITOR_ID, self.spec.requests(resolved, false)]),
            };
            match self.call(conn, method.name(), params).await? {
                Ok(r) => return Ok((method, r)),
                Err(Error::Rpc { error, .. })
                    if error.contains("unknown method") && method != Method::Plain =>
                {
                    tracing::debug!(%error, "falling back from {}", method.name());
                    method = match method {
                        Method::CondSince => Method::Cond,
                        _ => Method::Plain,
                    };
                }
                Err(e) => return Err(Some(e)),
            }
        }
    }

    /// Watches the database's row of `_Server`'s Database table
    /// (ovsdb-server(5)) with a second monitor, and refuses a member of a
    /// clustered database that is not connected to its cluster (its data
    /// may be stale), now or later, as ovsdb-idl does.
    async fn watch_cluster_membership(
        &mut self,
        conn: &mut Conn,
        db: &str,
    ) -> Result<(), Option<Error>> {
        let params = json!(["_Server", SERVER_MONITOR_ID, {"Database": [{
            "columns": ["name", "model", "connected"], "where": [["name", "==", db]]}]}]);
        let initial = self.call(conn, "monitor_cond", params).await??;
        check_membership(&initial, db).map_err(Some)
    }

    /// Sends a request and waits for its reply while answering echoes and
    /// commands. Outer `Err(None)`: shutdown; outer `Err(Some)`: the
    /// connection failed; inner `Err`: the server returned an error.
    async fn call(
        &mut self,
        conn: &mut Conn,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, Error>, Option<Error>> {
        let id = conn.next_id();
        conn.send(&jsonrpc::request(method, params, id)).await?;
        loop {
            let input = tokio::select! {
                r = conn.read() => r?,
                c = self.commands.recv() => {
                    match c {
                        Some(c @ Command::SetCondition { .. }) => self.deferred.push(c),
                        Some(Command::SetProbe(probe)) => self.set_probe(conn, probe),
                        c => self.offline_command(c).map_err(|()| None)?,
                    }
                    continue;
                }
            };
            match input {
                Input::ProbeDue => {
                    conn.probe().await?;
                }
                Input::Message(Message::Request { method, params, id }) => {
                    conn.answer(&method, params, id).await?
                }
                Input::Message(Message::Response {
                    id: rid,
                    result,
                    error,
                }) if rid.as_u64() == Some(id) => {
                    return Ok(if error.is_null() {
                        Ok(result)
                    } else {
                        Err(Error::Rpc {
                            method: method.to_owned(),
                            error: short(&error),
                        })
                    });
                }
                Input::Message(m) => tracing::debug!(?m, "ignored during setup"),
            }
        }
    }

    /// Serves an established monitor. `Ok` on shutdown.
    async fn serve(
        &mut self,
        conn: &mut Conn,
        method: Method,
        pending: &mut HashMap<u64, Pending>,
    ) -> Result<(), Error> {
        for c in std::mem::take(&mut self.deferred) {
            if !self.command(conn, method, pending, c).await? {
                return Ok(());
            }
        }
        loop {
            let input = tokio::select! {
                r = conn.read() => r?,
                c = self.commands.recv() => {
                    let Some(c) = c else { return Ok(()) };
                    if self.command(conn, method, pending, c).await? {
                        continue;
                    }
                    return Ok(());
                }
            };
            tracing::trace!(?input, "received");
            match input {
                Input::ProbeDue => {
                    let id = conn.probe().await?;
                    pending.insert(id, Pending::Echo);
                }
                Input::Message(Message::Request { method, params, id }) => {
                    conn.answer(&method, params, id).await?
                }
                Input::Message(Message::Notification { method: m, .. }) => {
                    self.notification(&m)?;
                }
                Input::Message(Message::Updates { method: m, params }) => {
                    self.updates(method, &m, &params)?;
                }
                Input::Message(Message::Response { id, result, error }) => {
                    let Some(p) = id.as_u64().and_then(|id| pending.remove(&id)) else {
                        tracing::debug!(%id, "reply to no pending request");
                        continue;
                    };
                    self.reply(p, result, error);
                }
            }
        }
    }

    /// Handles a command on an established monitor; `false` on shutdown.
    async fn command(
        &mut self,
        conn: &mut Conn,
        method: Method,
        pending: &mut HashMap<u64, Pending>,
        c: Command,
    ) -> Result<bool, Error> {
        match c {
            Command::Shutdown => return Ok(false),
            Command::Transact { ops, reply } => {
                let id = conn.next_id();
                let msg = jsonrpc::request(
                    "transact",
                    operation::transact_params(self.spec.database(), &ops),
                    id,
                );
                // Pending first: if the send fails, the caller hears Disconnected.
                pending.insert(id, Pending::Transact { ops, reply });
                conn.send(&msg).await?;
            }
            Command::SetCondition {
                table,
                condition,
                reply,
            } => {
                let where_ = conditions_json(&condition);
                if let Err(e) = self.check_condition(&table, &condition) {
                    let _ = reply.send(Err(e));
                    return Ok(true);
                }
                if let Err(e) = self.remember_condition(&table, condition) {
                    let _ = reply.send(Err(e));
                    return Ok(true);
                }
                if method == Method::Plain {
                    tracing::warn!(%table, "the server has no monitor_cond: the condition is ignored");
                    let _ = reply.send(Ok(()));
                    return Ok(true);
                }
                let id = conn.next_id();
                let msg = jsonrpc::request(
                    "monitor_cond_change",
                    json!([MONITOR_ID, MONITOR_ID, {table: [{"where": where_}]}]),
                    id,
                );
                pending.insert(id, Pending::CondChange(reply));
                conn.send(&msg).await?;
            }
            Command::SetProbe(probe) => self.set_probe(conn, probe),
        }
        Ok(true)
    }

    /// Puts probe interval `probe` in force on `conn` and on later connections.
    fn set_probe(&mut self, conn: &mut Conn, probe: Option<Duration>) {
        self.config.inactivity_probe = probe;
        conn.set_probe(probe);
    }

    fn reply(&mut self, p: Pending, result: Value, error: Value) {
        let rpc_error = |method: &str| Error::Rpc {
            method: method.to_owned(),
            error: short(&error),
        };
        match p {
            Pending::Echo => {}
            Pending::Transact { ops, reply } => {
                let r = if error.is_null() {
                    operation::decode_results(&result, &ops, self.read_replica().schema())
                } else {
                    Err(rpc_error("transact"))
                };
                let _ = reply.send(r);
            }
            Pending::CondChange(reply) => {
                let r = if error.is_null() {
                    Ok(())
                } else {
                    // The server kept the old condition; the next connection
                    // asks for the new one.
                    self.last_txn_id = None;
                    Err(rpc_error("monitor_cond_change"))
                };
                let _ = reply.send(r);
            }
        }
    }

    /// Handles a notification other than an update.
    fn notification(&mut self, name: &str) -> Result<(), Error> {
        if name == "monitor_canceled" {
            return Err(Error::Protocol("the server canceled the monitor".into()));
        }
        tracing::debug!(name, "ignored notification");
        Ok(())
    }

    /// Applies an update notification (`update`, `update2`, `update3`, its
    /// params as text) and delivers its change set.
    fn updates(&mut self, method: Method, name: &str, params: &RawValue) -> Result<(), Error> {
        let shape = || {
            let text: String = params.get().chars().take(100).collect();
            Error::Protocol(format!(
                "{name} params {text} do not have the expected shape"
            ))
        };
        let p: Vec<&RawValue> = serde_json::from_str(params.get()).map_err(|_| shape())?;
        let value = |v: &RawValue| serde_json::from_str::<Value>(v.get()).map_err(|_| shape());
        if let ("update2", [id, updates]) = (name, p.as_slice()) {
            if value(id)?.as_str() == Some(SERVER_MONITOR_ID) {
                return check_membership(&value(updates)?, self.spec.database());
            }
        }
        if name != method.notification() {
            tracing::debug!(name, "ignored notification");
            return Ok(());
        }
        let (id, txn, updates) = match (method, p.as_slice()) {
            (Method::CondSince, [id, txn, u]) => {
                let txn = value(txn)?;
                (value(id)?, txn.as_str().and_then(parse_uuid), *u)
            }
            (Method::Cond | Method::Plain, [id, u]) => (value(id)?, None, *u),
            _ => return Err(shape()),
        };
        if id.as_str() != Some(MONITOR_ID) {
            tracing::debug!(%id, "update for another monitor");
            return Ok(());
        }
        // Decoded and diffed without the write lock (only this task writes),
        // then applied under it. update2/update3 go from text to rows.
        let decoded = match method {
            Method::Plain => {
                value(updates).and_then(|v| monitor::decode_updates(&v, &self.resolved, false))
            }
            _ => crate::stream::decode_updates2(updates.get(), &self.resolved),
        };
        let result = decoded.and_then(|updates| self.read_replica().changes_of(&updates));
        let cs = match result {
            Ok(cs) => cs,
            Err(e) => {
                // Resync from scratch on the next connection.
                self.last_txn_id = None;
                return Err(e);
            }
        };
        self.write_replica().apply(&cs);
        tracing::trace!(?txn, changes = cs.len(), "update");
        if let Some(t) = txn {
            self.last_txn_id = Some(t).filter(|t| !t.is_nil());
        }
        if !cs.is_empty() {
            let _ = self.events.send(Event::Changes(cs));
        }
        Ok(())
    }
}

/// Errors that are plain values, for fanning one out to several waiters.
fn clone_simple(e: &Error) -> Error {
    match e {
        Error::Shutdown => Error::Shutdown,
        _ => Error::Disconnected,
    }
}

/// A duration drawn uniformly from `[d/2, d]`.
fn jitter(d: Duration) -> Duration {
    let r = RandomState::new().build_hasher().finish();
    let half = d / 2;
    half + half.mul_f64((r >> 11) as f64 / (1u64 << 53) as f64)
}

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

async fn connect(remote: &Remote) -> std::io::Result<(Reader, Writer)> {
    Ok(match remote {
        Remote::Unix(path) => {
            let (r, w) = tokio::net::UnixStream::connect(path).await?.into_split();
            (Box::new(r), Box::new(w))
        }
        Remote::Tcp(addr) => {
            let s = tokio::net::TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            let (r, w) = s.into_split();
            (Box::new(r), Box::new(w))
        }
    })
}

#[derive(Debug)]
enum Input {
    Message(Message),
    /// The server was silent for the probe interval: send an echo.
    ProbeDue,
}

/// One connection's socket halves, framing and inactivity timer.
struct Conn {
    reader: Reader,
    writer: Writer,
    framer: Framer,
    next_id: u64,
    /// Whether this remote is probed at all ([`Remote::needs_probes`]).
    probed: bool,
    probe: Option<Duration>,
    last_rx: Instant,
    probe_sent: Option<Instant>,
}

impl Conn {
    /// A connection over `reader`/`writer`, probed (see [`Conn::set_probe`]) only
    /// if `probed`.
    fn new((reader, writer): (Reader, Writer), probed: bool, max_message: usize) -> Self {
        Conn {
            reader,
            writer,
            framer: Framer::new(max_message),
            next_id: 0,
            probed,
            probe: None,
            last_rx: Instant::now(),
            probe_sent: None,
        }
    }

    /// Probes after `probe` of silence from now on (never: `None`, or a remote
    /// not probed). A probe already sent is answered within the new interval.
    fn set_probe(&mut self, probe: Option<Duration>) {
        self.probe = probe.filter(|_| self.probed);
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Writes one message whole, within the probe interval, reading what the server
    /// sends meanwhile into the framer's buffer (for [`Conn::read`]): a server that
    /// answers requests in order stops reading while its own writes to us block, so a
    /// client that only wrote would wait on it forever once both sockets' buffers are
    /// full (several large condition changes sent while it sends their rows).
    async fn send(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let write = async {
            let mut rest = bytes;
            while !rest.is_empty() {
                let buf = self.framer.buffer();
                buf.reserve(64 * 1024);
                tokio::select! {
                    n = self.writer.write(rest) => match n? {
                        0 => return Err(std::io::ErrorKind::WriteZero.into()),
                        n => rest = &rest[n..],
                    },
                    n = self.reader.read_buf(buf) => match n? {
                        0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                        _ => {
                            self.last_rx = Instant::now();
                            self.probe_sent = None;
                        }
                    },
                }
            }
            self.writer.flush().await
        };
        match self.probe {
            Some(p) => tokio::time::timeout(p, write).await.map_err(|_| {
                Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "write timed out",
                ))
            })?,
            None => write.await,
        }
        .map_err(Error::Io)
    }

    /// Sends our inactivity probe; returns its id.
    async fn probe(&mut self) -> Result<u64, Error> {
        let id = self.next_id();
        self.probe_sent = Some(Instant::now());
        self.send(&jsonrpc::request("echo", json!([]), id)).await?;
        Ok(id)
    }

    /// Answers a request from the server: `echo` returns its params
    /// (RFC 7047 §4.1.11); others get an error.
    async fn answer(&mut self, method: &str, params: Value, id: Value) -> Result<(), Error> {
        let msg = if method == "echo" {
            jsonrpc::response(params, id)
        } else {
            tracing::debug!(method, "unknown request from the server");
            json!({"result": null, "error": "unknown method", "id": id})
                .to_string()
                .into_bytes()
        };
        self.send(&msg).await
    }

    /// The next message or a due probe. Cancel-safe: it only reads into
    /// the framer's buffer and waits on a timer.
    async fn read(&mut self) -> Result<Input, Error> {
        loop {
            if let Some(frame) = self.framer.next_frame()? {
                return Ok(Input::Message(Message::from_frame(frame)?));
            }
            let deadline = match (self.probe, self.probe_sent) {
                (None, _) => None,
                (Some(p), None) => Some(self.last_rx + p),
                (Some(p), Some(sent)) => Some(sent + p),
            };
            let buf = self.framer.buffer();
            buf.reserve(64 * 1024);
            let n = tokio::select! {
                r = self.reader.read_buf(buf) => r.map_err(Error::Io)?,
                () = sleep_until(deadline) => {
                    return match (self.probe_sent, self.probe) {
                        (Some(_), Some(p)) => Err(Error::InactivityTimeout(p)),
                        _ => Ok(Input::ProbeDue),
                    };
                }
            };
            if n == 0 {
                return Err(Error::Closed);
            }
            self.last_rx = Instant::now();
            self.probe_sent = None;
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
