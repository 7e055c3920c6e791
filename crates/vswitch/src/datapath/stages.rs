//! Per-stage cycle accounting, for profiling builds (cargo feature `stage-cycles`;
//! `scripts/bench-pvp.sh --stages`). Each non-empty burst's time, from just before its
//! queue is polled until the source's ring is completed, is cut at the stage
//! boundaries below and added to the PMD's [`crate::model::stats::PmdCounters::stages`]
//! with one TSC read per boundary. Without the feature every lap compiles to nothing.
//!
//! Stages ([`NAMES`], in order):
//! - `rx`: the receive walk (available ring, descriptor chains, transmit headers);
//! - `classify`: headers, flow key, flow cache or FDB, learning (and snooping);
//! - `group`: grouping the burst by destination, flood and group expansion;
//! - `deliver`: per destination, offloads in software, the copy into the receive
//!   buffers, the used ring and the interrupt (or encapsulation and the uplink's send);
//! - `complete`: the source's used ring and interrupt after the burst.

use super::pipeline::Pipeline;

pub use crate::model::stats::STAGE_NAMES as NAMES;

/// Index of a stage in [`NAMES`].
#[derive(Debug, Clone, Copy)]
pub enum Stage {
    /// The receive walk.
    Rx = 0,
    /// Classification.
    Classify = 1,
    /// Grouping by destination.
    Group = 2,
    /// Delivery to every destination.
    Deliver = 3,
    /// The source's completion.
    Complete = 4,
}

impl Pipeline {
    /// Starts a burst's clock (before its queue is polled).
    #[inline(always)]
    pub fn stage_start(&mut self) {
        #[cfg(feature = "stage-cycles")]
        {
            self.stage_mark = crate::model::stats::cycles();
        }
    }

    /// Charges the time since the last boundary to `stage`.
    #[inline(always)]
    pub fn lap(&mut self, stage: Stage) {
        #[cfg(feature = "stage-cycles")]
        {
            let now = crate::model::stats::cycles();
            self.shared.counters.stages[stage as usize].add(now.wrapping_sub(self.stage_mark));
            self.stage_mark = now;
        }
        let _ = stage;
    }
}
