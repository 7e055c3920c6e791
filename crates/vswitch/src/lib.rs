//! vswitch: a multi-threaded virtual switch serving VMs over vhost-user.
//!
//! - [`config`]: flags, the TOML file and their validation;
//! - [`vhost`]: the vhost-user-net device on rust-vmm's vhost-user-backend;
//! - [`virtq`]: burst access to split virtqueues through vm-memory's checked accessors;
//! - [`pmd`]: the poll-mode data path;
//! - [`afxdp`]: AF_XDP uplinks, with [`xdp`] their XDP program; [`tap`]: tap host ports;
//! - [`fdb`]: MAC learning;
//! - [`switch`]: ports and shared state; [`daemon`]: start and stop;
//! - [`control`]: the `vswitchctl` socket; [`stats`]: counters.
#![deny(missing_docs)]

pub mod acl;
pub mod afxdp;
pub mod config;
pub mod control;
pub mod daemon;
pub mod fdb;
pub mod metrics;
pub mod pmd;
#[cfg(test)]
mod pmd_tests;
pub mod stats;
pub mod switch;
pub mod tap;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;
pub mod vhost;
pub mod virtq;
pub mod xdp;
