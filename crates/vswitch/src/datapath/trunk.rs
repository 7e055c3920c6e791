//! Trunk ports in the data path ([`crate::model::trunk`]): a trunk's tagged frames are
//! switched without their tag in their VLAN's domain (copied out of the receive
//! buffer, as provider networks' are), its untagged frames as they are in its own
//! domain, and the VLANs it does not carry dropped as `vlan_tagged`. Frames leaving a
//! trunk get their domain's tag in [`super::forward`].

use super::packet::{Pkt, RxBurst};
use super::pipeline::{Pipeline, Source};
use crate::model::stats::DropReason;
use crate::model::trunk::TrunkPlan;
use crate::switch::topology::{TopoPort, Topology};

impl Pipeline {
    /// Switches a burst from trunk `tp` (its plan `plan`).
    pub(super) fn trunk_rx<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        (tp, plan): (&TopoPort, &TrunkPlan),
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        let mut u = std::mem::take(&mut self.untagged);
        let refused = u.sort_by(burst, pkts, |vid| plan.ingress(vid));
        if refused > 0 {
            tp.port
                .counters(self.pmd)
                .drop(DropReason::VlanTagged, refused);
        }
        if !u.rest.is_empty() {
            let src = Source::local(topo, tp);
            self.classify(topo, &src, burst, &mut u.rest);
            self.forward(topo, &src, queue, burst, &mut u.rest);
        }
        self.switch_copied(topo, tp, queue, &mut u);
        self.untagged = u;
    }
}
