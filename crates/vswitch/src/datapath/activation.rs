//! OVN's RARP activation strategy in the data path: a port whose binding on this
//! chassis is additional and awaits activation (`activation-strategy=rarp`, a live
//! migration's destination) sends nothing but RARP (RFC 903) until it has sent one;
//! that RARP is forwarded as usual and marks the port announced, which the OVN chassis
//! turns into the binding's `additional-chassis-activated` (ovn-controller's
//! `pinctrl` RARP handler and `physical.c` blocking flows do the same). Frames to such
//! a port are not delivered: it is in none of its switch's delivery lists.

use std::sync::atomic::Ordering::Relaxed;

use super::lflow::Entry;
use super::packet::{Pkt, RxBurst};
use super::pipeline::{Mode, Pipeline, Source};
use crate::model::stats::DropReason;
use crate::switch::topology::Topology;

/// RARP's EtherType, in the frame's byte order (RFC 903).
const ETHERTYPE_RARP: [u8; 2] = [0x80, 0x35];

impl Pipeline {
    /// Switches the RARP frames of a burst from `src`, a port awaiting activation,
    /// drops (and counts) the others, and marks the port announced once a RARP passed.
    pub(super) fn awaiting_activation<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        let mut rarp = std::mem::take(&mut self.rarp);
        rarp.clear();
        let mut hdr = [0u8; 14];
        for p in pkts.iter() {
            if burst.read(p, 0, &mut hdr) == 14 && hdr[12..14] == ETHERTYPE_RARP {
                rarp.push(*p);
            }
        }
        let dropped = (pkts.len() - rarp.len()) as u64;
        if dropped > 0 {
            src.port
                .counters(self.pmd)
                .drop(DropReason::OvnNotActivated, dropped);
        }
        if !rarp.is_empty() {
            match src.mode {
                Mode::Ovn(o) if o.lflow => {
                    self.lflow(topo, src, queue, burst, &mut rarp, Entry::Port);
                }
                _ => {
                    self.classify(topo, src, burst, &mut rarp);
                    self.forward(topo, src, queue, burst, &mut rarp);
                }
            }
            src.port.announced.store(true, Relaxed);
        }
        self.rarp = rarp;
    }
}
