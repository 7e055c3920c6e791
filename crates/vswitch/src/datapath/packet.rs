//! What the pipeline decides for a frame: an [`Action`] and the [`Decision`] the flow
//! cache stores. The frames themselves and the interface to the ports are
//! [`crate::ports::frame`], re-exported here.

use crate::model::domain::DomainId;
use crate::model::fdb::PortId;
use crate::model::stats::DropReason;

pub use crate::ports::frame::*;

/// Where a frame goes: what classification decides for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// To one port.
    Output(PortId),
    /// To every other port of the bridge domain whose link can take it, and (unless it
    /// came from a tunnel) one copy to each remote endpoint of the domain's VNI.
    Flood(DomainId),
    /// Into a Geneve tunnel to a remote endpoint, with OVN's option carrying this
    /// egress key when it is not 0 (a port on another OVN chassis).
    Encap(crate::model::tunnel::RemoteId, u16),
    /// To an OVN multicast group of the domain (`_MC_flood`, `_MC_unknown`, or the
    /// group a tunnelled frame names): its local members other than the source, and
    /// (unless it came from a tunnel) one copy to each remote chassis with members.
    Multicast(DomainId, u16),
    /// To an IP multicast group's snooped destinations in the domain (member and
    /// multicast-router ports, remotes with members), or an IGMP/MLD report's (router
    /// ports, the VNI's remotes): target set `k` of the burst's snooping pass
    /// ([`super::snoop`]). Never cached.
    Snooped(DomainId, u16),
    /// Decided by OVN's logical pipeline: frame `i` of the burst goes to the targets
    /// the pipeline's pass recorded for it ([`super::lflow::Lflow::spans`]).
    Lflow(u16),
    /// Dropped and counted under the reason.
    Drop(DropReason),
}

/// The whole forwarding decision for a flow, as the flow cache stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Where the frame goes.
    pub action: Action,
    /// The ACL rule that dropped it, or [`NO_RULE`].
    pub rule: u16,
    /// FDB key of the source MAC to learn or refresh, or [`NO_LEARN`].
    pub learn: u64,
}

// Two machine words: returned in registers and kept there by the compiler. A bigger
// decision lives in memory, copied piecewise between the slow path, the cache and the
// burst, and a wide reload of one just stored in pieces stalls until they reach the cache.
const _: () = assert!(std::mem::size_of::<Decision>() <= 16);

/// [`Decision::rule`] when no ACL rule dropped the frame.
pub const NO_RULE: u16 = u16::MAX;
/// [`Decision::learn`] when the source MAC is not learned (group address, dropped).
pub const NO_LEARN: u64 = u64::MAX;
