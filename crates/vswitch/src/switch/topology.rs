//! The live topology: ports, bridge domains, the queue-to-PMD assignment and the ACLs,
//! as one immutable snapshot with a generation number (DESIGN.md §4).
//!
//! The control plane edits a copy and publishes it whole (RCU style, through
//! `arc-swap`); PMD threads pick up the new snapshot between bursts and publish the
//! generation they run ([`super::PmdShared::generation_seen`]), so an editor knows when
//! no PMD uses the old one any more. Flow caches key their decisions by the generation
//! (with the FDB's: `datapath/classify.rs`), so a decision made under an older topology
//! misses.

use std::sync::Arc;

use crate::config::PortConfig;
use crate::model::acl::PortAcl;
use crate::model::domain::{DomainId, DomainKey};
use crate::model::fdb::PortId;
use crate::ports::Port;

/// A port as the topology places it: the port itself and what can change while it runs
/// (its domain, its ACL).
#[derive(Debug, Clone)]
pub struct TopoPort {
    /// The port.
    pub port: Arc<Port>,
    /// The configuration it runs with (its VLAN may have changed since it was opened).
    pub config: Arc<PortConfig>,
    /// Its bridge domain.
    pub domain: DomainId,
    /// What that domain is.
    pub domain_key: DomainKey,
    /// Its ingress ACL.
    pub acl: Arc<PortAcl>,
    /// MACs it may teach the FDB (its `max_macs=`, else the kind's default).
    pub mac_limit: u32,
    /// Its OVN logical port key (`Port_Binding.tunnel_key`; 0: not an OVN port): the
    /// ingress key of the frames it sends to other chassis.
    pub ovn_key: u16,
    /// A trunk's VLANs as domains (computed at each publish); None: it is in its one
    /// domain.
    pub trunk: Option<Arc<crate::model::trunk::TrunkPlan>>,
}

/// One snapshot of the switch's topology.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// Bumped by every published edit; never reused.
    pub generation: u64,
    /// The generation of the last edit that changed more than OVN's logical pipeline
    /// (ports, domains, OVN bindings, remotes): a PMD keeps its cached pipeline
    /// decisions across a new generation of the same epoch where their datapaths
    /// kept their versions ([`crate::model::lflow::LogicalPipeline::version`]).
    pub lflow_epoch: u64,
    /// Ports by id; a deleted port leaves a hole that a later port may take.
    pub ports: Vec<Option<TopoPort>>,
    /// The member ports of each domain, by [`DomainId`]: its flood list.
    pub domains: Vec<Vec<PortId>>,
    /// The source queues each PMD polls: (port, queue).
    pub pmd_queues: Vec<Vec<(PortId, u16)>>,
    /// The overlay: local endpoints, VNI flood lists, paths to remotes.
    pub tunnels: crate::model::tunnel::Tunnels,
    /// OVN's logical switches with local ports (empty without `--ovn-remote`).
    pub ovn: Arc<crate::model::ovn::OvnTopo>,
}

impl Topology {
    /// An empty topology for `pmds` PMD threads.
    pub fn new(pmds: usize) -> Self {
        Topology {
            generation: 1,
            lflow_epoch: 1,
            ports: Vec::new(),
            domains: Vec::new(),
            pmd_queues: vec![Vec::new(); pmds],
            tunnels: Default::default(),
            ovn: Default::default(),
        }
    }

    /// The port with id `id`.
    #[inline]
    pub fn port(&self, id: PortId) -> Option<&TopoPort> {
        self.ports.get(usize::from(id)).and_then(Option::as_ref)
    }

    /// The port named `name`.
    pub fn by_name(&self, name: &str) -> Option<&TopoPort> {
        self.iter().find(|p| p.port.name == name)
    }

    /// Every port, by id.
    pub fn iter(&self) -> impl Iterator<Item = &TopoPort> {
        self.ports.iter().flatten()
    }

    /// The members of domain `d` (empty for an unknown domain).
    #[inline]
    pub fn domain_ports(&self, d: crate::model::domain::DomainId) -> &[PortId] {
        self.domains.get(usize::from(d)).map_or(&[], Vec::as_slice)
    }

    /// The PMD polling queue `q` of port `port`.
    pub fn pmd_of(&self, port: PortId, q: u16) -> Option<usize> {
        self.pmd_queues
            .iter()
            .position(|qs| qs.contains(&(port, q)))
    }

    /// The lowest free port id, or None when every id is taken.
    pub fn free_id(&self) -> Option<PortId> {
        let i = self
            .ports
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.ports.len());
        PortId::try_from(i).ok()
    }

    /// Places `p` at its id (growing the table as needed) and gives its source queues to
    /// the PMDs with the fewest queues.
    pub fn insert(&mut self, p: TopoPort) {
        let id = usize::from(p.port.id);
        if self.ports.len() <= id {
            self.ports.resize(id + 1, None);
        }
        let queues = p.port.rx_queues();
        let pid = p.port.id;
        self.ports[id] = Some(p);
        for q in 0..queues {
            self.assign(pid, q);
        }
    }

    /// Removes port `id` and its queues; returns it.
    pub fn remove(&mut self, id: PortId) -> Option<TopoPort> {
        let p = self.ports.get_mut(usize::from(id))?.take();
        for qs in &mut self.pmd_queues {
            qs.retain(|&(port, _)| port != id);
        }
        while self.ports.last().is_some_and(Option::is_none) {
            self.ports.pop();
        }
        p
    }

    fn assign(&mut self, port: PortId, q: u16) {
        if let Some(least) = (0..self.pmd_queues.len()).min_by_key(|&i| self.pmd_queues[i].len()) {
            self.pmd_queues[least].push((port, q));
        }
    }

    /// Rebuilds the domain member lists from the ports (after any edit of ports or
    /// domains); `ndomains` is the registry's size. An uplink that is the underlay
    /// only (a tunnel endpoint's address on its own interface) is in no domain; a
    /// trunk is in each of its VLANs'.
    pub fn rebuild_domains(&mut self, ndomains: usize) {
        let mut d: Vec<Vec<PortId>> = vec![Vec::new(); ndomains];
        for p in self.iter() {
            if self.tunnels.is_underlay(p.port.id) || p.domain_key == DomainKey::Detached {
                continue;
            }
            let own = [p.domain];
            let member_of = p.trunk.as_ref().map_or(&own[..], |t| &t.domains[..]);
            for &domain in member_of {
                if let Some(m) = d.get_mut(usize::from(domain)) {
                    m.push(p.port.id);
                }
            }
        }
        self.domains = d;
    }
}
