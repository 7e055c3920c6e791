//! An OVSDB client (RFC 7047) on tokio: a replica plus a change stream.
//!
//! - [`Client::start`] spawns one session task that connects to a list of
//!   [`Remote`]s (`unix:PATH`, `tcp:IP:PORT`), checks the monitored tables
//!   and columns against the server's schema, monitors them with
//!   `monitor_cond_since` (update3), falling back to `monitor_cond`
//!   (update2) and `monitor` (update), answers the server's `echo`, probes a
//!   silent server, and reconnects with jittered exponential backoff,
//!   trying the next remote of a cluster after a failure.
//! - The [`Replica`] holds every monitored row; each update message (one
//!   server transaction) becomes one [`ChangeSet`] applied to the replica
//!   atomically and then delivered as [`Event::Changes`]. After a
//!   reconnection the replica is brought to the server's state and the
//!   difference is delivered as one change set, not a wipe and a reload.
//! - Tables are typed: [`model!`] declares a struct per table once
//!   ([`Model`]); [`Replica::rows`], [`Replica::get`], [`Replica::find`]
//!   (through hash indexes when declared) and [`ChangeSet::typed`] decode
//!   rows, reporting rows that do not decode instead of panicking.
//! - [`Client::transact`] runs [`Operation`]s (RFC 7047 §5.2) and returns
//!   typed [`OperationResult`]s or an [`Error::Operation`] naming the failed
//!   operation's index, table and column.
//!
//! Values follow RFC 7047 §5.1 ([`Atom`], [`Datum`], [`Row`]); decoding
//! never panics on any input (fuzzed).
//!
//! # Threading
//!
//! The session task owns the socket. The replica is behind a
//! `std::sync::RwLock` that the task write-locks only to apply a computed
//! change set; [`Client::replica`] returns a read guard, which must not be
//! held across an `.await` (a guard taken inside the arguments of an
//! awaited call lives until the end of the statement: take what you need in
//! a statement of its own).
//!
//! # Example
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use ovsdb::{Client, ClientConfig, Event, MonitorSpec, Operation, Row, TableSpec, Uuid};
//!
//! ovsdb::model! {
//!     /// OVN_Southbound's Chassis table (the columns read here).
//!     #[derive(Clone, Debug)]
//!     pub struct Chassis in "Chassis" {
//!         /// The chassis name (system-id).
//!         pub name: String = "name",
//!         /// The host's name.
//!         pub hostname: String = "hostname",
//!         /// Encapsulations (Encap rows).
//!         pub encaps: Vec<Uuid> = "encaps",
//!     }
//! }
//!
//! # async fn run() -> Result<(), ovsdb::Error> {
//! let config = ClientConfig::new(vec!["unix:/var/run/ovn/ovnsb_db.sock".parse()?]);
//! let spec = MonitorSpec::new("OVN_Southbound").table(TableSpec::of::<Chassis>().index("name"));
//! let (client, mut events) = Client::start(config, spec);
//! client.connected().await?;
//! client
//!     .transact(vec![Operation::insert("Chassis", Row::new().with("name", "ch1").with("hostname", "h1"))])
//!     .await?;
//! while let Some(event) = events.recv().await {
//!     if let Event::Changes(changes) = event {
//!         for c in changes.typed::<Chassis>() {
//!             println!("{:?} {:?} -> {:?}", c.kind, c.old.map(|o| o.name), c.new.map(|n| n.name));
//!         }
//!         println!("{} chassis", client.replica().table_len("Chassis"));
//!     }
//! }
//! # Ok(()) }
//! ```

//! # Features
//!
//! - `test-utils`: `Replica::for_test` and `Replica::apply_updates2`, a
//!   replica fed `<table-updates2>` by hand, for consumers' tests without a
//!   server (and the `update` fuzz target).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod client;
mod datum;
mod error;
pub mod jsonrpc;
mod monitor;
mod operation;
mod remote;
mod replica;
mod row;
pub mod schema;
mod sorted;
mod stream;

pub use client::{Client, ClientConfig, ConnectionState, Event};
pub use datum::{Atom, AtomicType, Datum, Uuid};
pub use error::{Error, OperationError, OperationErrorKind, Place};
pub use monitor::{MonitorSpec, TableSpec};
pub use operation::{
    Condition, Function, Mutation, Mutator, Operation, OperationResult, WaitUntil,
};
pub use remote::Remote;
pub use replica::{ChangeKind, ChangeSet, Replica, RowChange, TypedChange};
pub use row::{AtomValue, FromDatum, Model, Row, ToDatum};
pub use schema::{ColumnType, DatabaseSchema};
pub use sorted::{AtomMap, AtomSet};
