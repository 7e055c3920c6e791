//! The switch's model: the live topology (ports, bridge domains, queue assignment,
//! ACLs), the forwarding database, access control lists and counters.

pub mod acl;
pub mod domain;
pub mod fdb;
pub mod lflow;
pub mod mcast;
pub mod ovn;
pub mod stats;
pub mod trunk;
pub mod tunnel;
