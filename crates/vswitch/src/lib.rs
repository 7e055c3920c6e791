//! vswitch: a multi-threaded virtual switch serving VMs over vhost-user.
//!
//! The folders follow the architecture (DESIGN.md §1), in layers that import only
//! downward (`tests/layers.rs` checks it), bottom first:
//! - [`sys`], [`config`]: group lookup and unix sockets; flags, the TOML file, port specs,
//!   ACL rule syntax, and their validation;
//! - [`model`]: bridge domains, the FDB, compiled ACLs, multicast groups, tunnels, OVN's
//!   logical switches as the data path sees them, and counters;
//! - [`ports`]: one module per port kind (vhost-user, AF_XDP uplink, tap) behind one
//!   interface, and the frames and bursts they exchange with the pipeline
//!   ([`ports::frame`]);
//! - [`switch`]: the state PMDs and the control plane share, with the published
//!   topology snapshot ([`switch::topology`]);
//! - [`datapath`]: the PMD threads and the pipeline they run;
//! - [`control`]: the `vswitchctl` socket and the Prometheus endpoint;
//! - [`ovn`]: vswitchd as an OVN chassis (the Southbound database -> bridge domains and
//!   the logical pipeline), seen by the control plane through
//!   [`control::ops::OvnChassis`];
//! - [`ovsdb_config`]: bridges and ports from the Open vSwitch database (`--ovsdb`), as
//!   ovs-vswitchd takes them, with what it writes back;
//! - [`daemon`]: start and stop.
//!
//! A lower layer that needs something of a higher one defines a trait the higher one
//! implements (the ports call the pipeline as a [`ports::frame::BurstHandler`]).
#![deny(missing_docs)]

pub mod config;
pub mod control;
pub mod daemon;
pub mod datapath;
pub mod model;
pub mod ovn;
pub mod ovsdb_config;
pub mod ports;
pub mod switch;
pub mod sys;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;
