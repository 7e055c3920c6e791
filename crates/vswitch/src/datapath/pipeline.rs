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
use super::packet::EncapItem;
use super::packet::{Action, BurstHandler, Decision, Pkt, RxBurst, TxItem, BURST};
use super::tunnel::Templates;
use crate::config::PortConfig;
use crate::model::acl::PortAcl;
use crate::model::domain::{DomainId, DomainKey};
use crate::model::fdb::{Dest, Learn};
use crate::model::tunnel::RemoteId;
use crate::ports::{Port, TxScratch};
use crate::switch::topology::{TopoPort, Topology};
use crate::switch::{PmdShared, Switch};

/// Where a burst's frames come from: a local port in its domain, or a tunnel (the
/// uplink that carries it, the VNI's domain, the remote that sent them).
pub struct Source<'a> {
    /// The port the frames arrived on (its counters are charged).
    pub port: &'a Port,
    /// Their bridge domain.
    pub domain: DomainId,
    /// What that domain is.
    pub domain_key: DomainKey,
    /// The ingress ACL (empty for tunnelled frames).
    pub acl: &'a PortAcl,
    /// Where their source MACs are learned: the port, or the remote endpoint.
    pub learn: Dest,
    /// The local endpoint that decapsulated them (split horizon), if tunnelled.
    pub tep: Option<usize>,
    /// The flow key's `in_port`: the port and the domain, so that flows of two VNIs
    /// arriving on one uplink never share a cached decision.
    pub in_port: u32,
    /// The port's configuration when port security restricts its source MACs.
    pub security: Option<&'a PortConfig>,
    /// MACs the source may teach the FDB (`u32::MAX` for a remote: only the table's).
    pub mac_limit: u32,
    /// How destinations are decided in the frames' domain.
    pub mode: Mode<'a>,
    /// The source's OVN logical port key (the ingress key of OVN's Geneve option; 0:
    /// not an OVN port, or tunnelled).
    pub ovn_key: u16,
}

/// How a domain decides destinations.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// Learning: source MACs are learned, unknown destinations flooded (VLANs, VNIs).
    Learn,
    /// An OVN logical switch: destinations from OVN's port MACs, no learning
    /// ([`crate::model::ovn`]).
    Ovn(&'a crate::model::ovn::OvnDomain),
    /// No domain (an OVN port not bound here): every frame dropped.
    Detached,
}

impl<'a> Mode<'a> {
    /// The mode of domain `d` (of key `key`) in `topo`.
    #[inline]
    pub fn of(topo: &'a Topology, d: DomainId, key: DomainKey) -> Self {
        match key {
            DomainKey::Ovn(_) => match topo.ovn.domain(d) {
                Some(o) => Mode::Ovn(o),
                None => Mode::Detached,
            },
            DomainKey::Detached => Mode::Detached,
            _ => Mode::Learn,
        }
    }
}

impl<'a> Source<'a> {
    /// Frames from local port `tp` of `topo`.
    #[inline]
    pub fn local(topo: &'a Topology, tp: &'a TopoPort) -> Self {
        Source {
            mode: Mode::of(topo, tp.domain, tp.domain_key),
            ovn_key: tp.ovn_key,
            port: &tp.port,
            domain: tp.domain,
            domain_key: tp.domain_key,
            acl: &tp.acl,
            learn: Dest::Port(tp.port.id),
            tep: None,
            in_port: u32::from(tp.port.id) | u32::from(tp.domain) << 16,
            security: tp.config.has_port_security().then_some(&*tp.config),
            mac_limit: tp.mac_limit,
        }
    }
}

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
    /// Decapsulated frames of a burst and where each came from (domain, remote,
    /// endpoint).
    pub(super) inner: Vec<Pkt>,
    /// With the action OVN's option decided, for frames of OVN logical switches.
    pub(super) inner_from: Vec<(DomainId, RemoteId, usize, super::tunnel::Delivery)>,
    /// The last remote heard from.
    pub(super) last_remote: Option<(std::net::IpAddr, RemoteId)>,
    /// Outer header templates.
    pub(super) templates: Templates,
    /// One encapsulation batch.
    pub(super) encap_items: Vec<EncapItem>,
    pub(super) encap_sel: Vec<u16>,
    /// A TSO frame gathered to be segmented and encapsulated.
    pub(super) encap_scratch: Vec<u8>,
    /// Software GRO of tunnelled TCP.
    pub(super) gro: super::gro::Gro,
    /// Frames of OVN provider networks, without their VLAN tags.
    pub(super) untagged: super::localnet::Untagged,
    /// The tunnelled frames of an uplink shared with a tunnel endpoint
    /// ([`super::shared_tep`]).
    pub(super) tunnelled: Vec<Pkt>,
    /// The RARP frames of a port awaiting activation.
    pub(super) rarp: Vec<Pkt>,
    /// Multicast snooping's per-burst state.
    pub(super) snoop: super::snoop::Snoop,
    /// OVN's logical pipeline: program cache and per-burst state.
    pub(super) lflow: super::lflow::Lflow,
    /// The last stage boundary's TSC ([`super::stages`]).
    #[cfg(feature = "stage-cycles")]
    pub(super) stage_mark: u64,
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
            inner: Vec::with_capacity(BURST),
            inner_from: Vec::with_capacity(BURST),
            last_remote: None,
            templates: Templates::default(),
            encap_items: Vec::with_capacity(BURST),
            encap_sel: Vec::with_capacity(BURST),
            encap_scratch: Vec::new(),
            gro: Default::default(),
            untagged: Default::default(),
            tunnelled: Vec::with_capacity(BURST),
            rarp: Vec::new(),
            snoop: Default::default(),
            lflow: Default::default(),
            #[cfg(feature = "stage-cycles")]
            stage_mark: 0,
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
        self.pipeline.lap(super::stages::Stage::Rx);
        let Some(tp) = self.topo.port(src.id) else {
            // A PMD polls only the ports of the topology it runs.
            debug_assert!(false, "port {} polled outside its topology", src.name);
            return;
        };
        let mut pkts = pkts;
        if self.topo.tunnels.shares(src.id) {
            let n = self
                .pipeline
                .take_tunnelled(self.topo, src, queue, burst, pkts);
            pkts = &mut pkts[..n];
            if pkts.is_empty() {
                return;
            }
        }
        if self.topo.ovn.bridges(src.id) {
            self.pipeline.localnet_rx(self.topo, tp, queue, burst, pkts);
            return;
        }
        if self.topo.tunnels.is_underlay(src.id) {
            self.pipeline.decap(self.topo, src, queue, burst, pkts);
            return;
        }
        if let Some(plan) = &tp.trunk {
            self.pipeline
                .trunk_rx(self.topo, (tp, plan), queue, burst, pkts);
            return;
        }
        let src = Source::local(self.topo, tp);
        if let Mode::Ovn(o) = src.mode {
            if o.blocks(tp.ovn_key) {
                self.pipeline
                    .awaiting_activation(self.topo, &src, queue, burst, pkts);
                return;
            }
            if o.lflow {
                self.pipeline.lflow(
                    self.topo,
                    &src,
                    queue,
                    burst,
                    pkts,
                    super::lflow::Entry::Port,
                );
                return;
            }
        }
        self.pipeline.classify(self.topo, &src, burst, pkts);
        self.pipeline.lap(super::stages::Stage::Classify);
        self.pipeline.forward(self.topo, &src, queue, burst, pkts);
    }
}

fn describe(topo: &Topology, d: &Decision) -> String {
    match d.action {
        Action::Output(p) => topo
            .port(p)
            .map_or_else(|| p.to_string(), |tp| tp.port.name.clone()),
        Action::Flood(_) => "flood".into(),
        Action::Multicast(_, g) => format!("multicast(ovn group {g:#x})"),
        Action::Snooped(..) => "snooped".into(),
        Action::Encap(r, 0) => format!("encap(remote {r})"),
        Action::Encap(r, k) => format!("encap(remote {r}, ovn port {k})"),
        Action::Lflow(_) => "ovn logical pipeline".into(),
        Action::Drop(crate::model::stats::DropReason::Acl) => format!("drop(acl rule {})", d.rule),
        Action::Drop(r) => format!("drop({})", r.name()),
    }
}
