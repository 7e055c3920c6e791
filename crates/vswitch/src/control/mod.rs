//! The control plane (DESIGN.md §4, §8): one small tokio runtime, never on PMD cores,
//! runs the control socket, the metrics endpoint, the kernel's network state
//! (rtnetlink), the vhost-user port services' reconnect timers, FDB aging and the
//! housekeeping. vhost-user message handling stays on `vhost-user-backend`'s blocking
//! threads (that crate is synchronous), run from the runtime's blocking pool.
//!
//! - [`cli`]: vswitchctl's command line;
//! - [`protocol`]: the typed, versioned JSON-lines protocol shared with `vswitchctl`;
//! - [`server`]: the control socket;
//! - [`handlers`]: answers to queries and ACL edits;
//! - [`ops`]: ports added and deleted, reloads, rebalances;
//! - [`chassis`]: the OVN chassis' settings made and changed at run time;
//! - [`metrics`]: Prometheus and the health check, through hyper;
//! - [`netlink`]: links, addresses, routes and neighbours from the kernel;
//! - [`overlay`]: the tunnels' paths (next hops, neighbours) from those tables;
//! - [`notify`]: systemd readiness.

pub mod chassis;
pub mod cli;
pub mod handlers;
pub mod housekeeping;
pub mod metrics;
pub mod netlink;
pub mod notify;
pub mod ops;
pub mod overlay;
pub mod protocol;
pub mod server;

pub use protocol::{call, Request, Response};
