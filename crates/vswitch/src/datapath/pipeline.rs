//! The pipeline one PMD runs on each burst: [`classify`](super::classify) (an action per
//! frame), then [`forward`](super::forward) (grouped by destination once, offloads done
//! in software where a destination lacks them, one transmit batch per destination).
//!
//! Nothing is allocated, logged or locked per packet: the arrays are allocated once per
//! thread and reused, counters are single-writer, locks are per burst.

use std::sync::Arc;

use flowcache::{EmcConfig, FlowCache};

use super::forward::Groups;
use super::offload::SoftFrames;
use super::packet::{Action, BurstHandler, Decision, Pkt, RxBurst, TxItem, BURST};
use crate::model::fdb::Learn;
use crate::model::topology::Topology;
use crate::ports::{Port, TxScratch};
use crate::switch::{PmdShared, Switch};

/// One PMD's pipeline state.
pub struct Pipeline {
    /// PMD index (selects the counters written).
    pub(super) pmd: usize,
    pub(super) switch: Arc<Switch>,
    pub(super) shared: Arc<PmdShared>,
    pub(super) cache: FlowCache<Decision>,
    pub(super) use_cache: bool,
    /// One action per frame of the burst being processed.
    pub(super) actions: Vec<Action>,
    /// Source MACs to learn after the burst.
    pub(super) learns: Vec<Learn>,
    pub(super) groups: Groups,
    /// The batch being transmitted.
    pub(super) items: Vec<TxItem>,
    pub(super) soft: SoftFrames,
    pub(super) tx: TxScratch,
}

impl Pipeline {
    /// The pipeline of PMD `pmd`.
    pub fn new(switch: Arc<Switch>, pmd: usize) -> Self {
        let settings = switch.config();
        Pipeline {
            pmd,
            shared: switch.pmds[pmd].clone(),
            cache: FlowCache::new(EmcConfig {
                insert_inv_prob: settings.emc_insert_inv_prob,
                ..EmcConfig::default()
            }),
            use_cache: settings.flow_cache,
            actions: Vec::with_capacity(BURST),
            learns: Vec::with_capacity(BURST),
            groups: Groups::default(),
            items: Vec::with_capacity(BURST),
            soft: SoftFrames::default(),
            tx: TxScratch::default(),
            switch,
        }
    }

    /// Answers a `vswitchctl flows` request: one line per cached flow (`topo` names
    /// the ports).
    pub(super) fn dump_flows(&self, topo: &Topology) -> Vec<String> {
        let generation = topo.generation + self.switch.fdb.generation();
        self.cache
            .iter()
            .map(|e| {
                format!(
                    "{} {} actions={}",
                    e.key,
                    if e.generation == generation {
                        "current"
                    } else {
                        "stale"
                    },
                    describe(topo, e.action)
                )
            })
            .collect()
    }
}

/// The pipeline running one topology snapshot: what a port's receive hands its bursts to.
pub struct Run<'a> {
    /// The pipeline.
    pub pipeline: &'a mut Pipeline,
    /// The topology the PMD runs.
    pub topo: &'a Topology,
}

impl BurstHandler for Run<'_> {
    fn handle<'m, B: RxBurst<'m>>(&mut self, src: &Port, queue: u16, burst: &B, pkts: &mut [Pkt]) {
        let Some(tp) = self.topo.port(src.id) else {
            // A PMD polls only the ports of the topology it runs.
            debug_assert!(false, "port {} polled outside its topology", src.name);
            return;
        };
        self.pipeline.classify(self.topo, tp, burst, pkts);
        self.pipeline.forward(self.topo, tp, queue, burst, pkts);
    }
}

fn describe(topo: &Topology, d: &Decision) -> String {
    match d.action {
        Action::Output(p) => topo
            .port(p)
            .map_or_else(|| p.to_string(), |tp| tp.port.name.clone()),
        Action::Flood(_) => "flood".into(),
        Action::Drop(crate::model::stats::DropReason::Acl) => format!("drop(acl rule {})", d.rule),
        Action::Drop(r) => format!("drop({})", r.name()),
    }
}
