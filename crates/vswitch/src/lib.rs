//! vswitch: a multi-threaded virtual switch serving VMs over vhost-user.
//!
//! The folders follow the architecture (DESIGN.md §1):
//! - [`config`]: flags, the TOML file, port specs, and their validation;
//! - [`model`]: the FDB, ACLs and counters;
//! - [`datapath`]: the PMD threads and the pipeline they run;
//! - [`ports`]: one module per port kind (vhost-user, AF_XDP uplink, tap);
//! - [`control`]: the `vswitchctl` socket and the Prometheus endpoint;
//! - [`ovn`]: vswitchd as an OVN chassis (the Southbound database -> bridge domains);
//! - [`switch`]: the state PMDs and the control plane share; [`daemon`]: start and stop;
//! - [`sys`]: group lookup and unix sockets created with their group and mode.
#![deny(missing_docs)]

pub mod config;
pub mod control;
pub mod daemon;
pub mod datapath;
pub mod model;
pub mod ovn;
pub mod ports;
pub mod switch;
pub mod sys;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;
