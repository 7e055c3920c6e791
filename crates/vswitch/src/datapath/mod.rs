//! The data path (DESIGN.md §3): PMD threads and the pipeline they run per burst.
//!
//! - [`packet`]: frame metadata, actions, and the traits between pipeline and ports;
//! - [`pmd`]: the thread loop (topology pick-up, polling, sleeping);
//! - [`pipeline`]: the per-PMD state and the burst handler;
//! - [`classify`]: the flow cache and the slow path;
//! - [`forward`]: grouping by destination, flooding, one batch per destination;
//! - [`offload`]: software checksum completion and segmentation;
//! - [`gro`]: software GRO of tunnelled TCP toward guests and taps;
//! - [`tunnel`]: Geneve decapsulation and encapsulation (the overlay);
//! - [`shared_tep`]: an uplink that is a switch port and carries a tunnel endpoint
//!   behind a tap (OVS's `br-phy` layout);
//! - [`lflow`]: OVN's logical pipeline for the logical switches that run it;
//! - [`localnet`]: OVN provider networks (VLAN pop on an uplink's way in, push out);
//! - [`trunk`]: database ports that carry several VLANs tagged;
//! - [`activation`]: OVN's RARP activation of a port on a migration's destination.

pub mod activation;
pub mod classify;
pub mod forward;
pub mod gro;
pub mod lflow;
pub mod localnet;
pub mod offload;
#[cfg(test)]
mod packed_tests;
pub mod packet;
pub mod pipeline;
pub mod pmd;
pub mod querier;
pub mod shared_tep;
pub mod snoop;
#[cfg(test)]
mod snoop_tests;
pub mod stages;
#[cfg(test)]
mod tests;
pub mod trunk;
pub mod tunnel;
