//! OVN's logical pipeline on this chassis (DESIGN.md §7): the logical flows of the
//! local datapaths, built into tables ([`tables`]) and executed by an interpreter
//! ([`interp`]) the way `ovn-trace` interprets them, one function per action. The data
//! path runs it on a flow-cache miss; `vswitchctl ovn trace` runs it with a trace.
//!
//! - [`tables`]: [`Pipelines`], one immutable snapshot built from the Southbound rows;
//! - [`cache`]: what one build keeps for the next (parses, compiled flows with the
//!   context they depended on);
//! - [`interp`]: the interpreter and what it reports ([`Outcome`]);
//! - [`portsec`]: `check_in_port_sec()` and `check_out_port_sec()`;
//! - [`support`]: which actions vswitchd executes (a datapath using another is refused);
//! - [`trace`]: microflows, and traces printed as `ovn-trace` prints them.

pub mod cache;
pub mod interp;
pub mod nat;
pub mod portsec;
pub mod support;
pub mod tables;
pub mod trace;

pub use cache::{BuildCache, BuildStats};
pub use interp::{CtResult, Mode, Outcome, Run, Tracker};
pub use tables::{Pipelines, Viewpoint};

impl crate::model::lflow::LogicalPipeline for Pipelines {
    fn cacheable(&self) -> bool {
        // More lengths than a class holds would put different answers in one class.
        self.unkeyed.is_none() && self.sizes.len() < usize::from(u8::MAX)
    }

    fn version(&self, dp: u32) -> Option<u64> {
        self.datapath(dp).map(|d| d.version)
    }

    fn resolves(&self, a: &crate::model::lflow::Awaited) -> bool {
        self.datapath(a.dp)
            .is_some_and(|dp| dp.mac_bindings.contains_key(&(a.port, a.ip)))
    }

    fn run(
        &self,
        dp: u32,
        egress: bool,
        flow: ovn_lflow::Flow,
        frame: crate::model::lflow::Frame<'_>,
        ct: &mut dyn Tracker,
    ) -> Outcome {
        let pipeline = if egress {
            ovn_lflow::actions::Pipeline::Egress
        } else {
            ovn_lflow::actions::Pipeline::Ingress
        };
        Run::new(self, ct, Mode::Chassis)
            .with_frame(frame.bytes)
            .with_size(frame.size)
            .run(dp, pipeline, flow, None)
    }

    fn sizes(&self) -> &[u16] {
        &self.sizes
    }
}
