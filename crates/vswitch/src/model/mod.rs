//! The switch's model: the forwarding database, access control lists and counters.

pub mod acl;
pub mod fdb;
pub mod stats;
