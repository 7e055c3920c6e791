//! The live topology: ports, bridge domains, the queue-to-PMD assignment and the ACLs,
//! as one immutable snapshot with a generation number (DESIGN.md §4).
//!
//! The control plane edits a copy and publishes it whole (RCU style, through
//! `arc-swap`); PMD threads pick up the new snapshot between bursts and publish the
//! generation they run ([`crate::switch::PmdShared::generation_seen`]), so an editor
//! knows when no PMD uses the old one any more. Flow caches key their decisions by the
//! generation ([`crate::switch::Switch::decision_generation`]), so a decision made under
//! an older topology misses.
//!
//! A bridge domain is what frames are switched within: an access VLAN (or the untagged
//! domain) today, a Geneve VNI with the overlay. Domains get dense ids ([`DomainId`])
//! from an append-only registry, so an FDB key (domain, MAC) fits in 64 bits and an id
//! never changes meaning while entries keyed by it exist.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use crate::config::PortConfig;
use crate::model::acl::Acl;
use crate::model::fdb::PortId;
use crate::model::stats::Counter;
use crate::ports::Port;

/// Dense id of a bridge domain (see [`Domains`]).
pub type DomainId = u16;

/// Most bridge domains a switch can have (ids 0..MAX_DOMAINS; the FDB key's top 16 bits).
pub const MAX_DOMAINS: usize = (1 << 16) - 1;

/// What a bridge domain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DomainKey {
    /// An access VLAN (1..=4094), or 0: the ports without one (untagged).
    Vlan(u16),
    /// A Geneve VNI (24 bits): a logical switch that spans hosts.
    Vni(u32),
    /// An OVN logical switch, by its `Datapath_Binding.tunnel_key` (also its VNI):
    /// forwarded by OVN's rules ([`crate::model::ovn`]).
    Ovn(u32),
    /// No domain: a port that names an OVN logical switch port (`iface_id=`) not bound
    /// here (yet). Its frames are dropped (`ovn_unbound`); no frame reaches it.
    Detached,
}

impl DomainKey {
    /// Frames carrying an 802.1Q/802.1ad tag are dropped (`vlan_tagged`) on a port of
    /// this domain: it is an access VLAN. The untagged domain passes tagged frames.
    #[inline]
    pub fn is_access(&self) -> bool {
        match *self {
            DomainKey::Vlan(v) => v != 0,
            DomainKey::Vni(_) | DomainKey::Ovn(_) | DomainKey::Detached => true,
        }
    }

    /// The VLAN id shown for the domain (0: untagged or a VNI).
    pub fn vlan(&self) -> u16 {
        match *self {
            DomainKey::Vlan(v) => v,
            _ => 0,
        }
    }

    /// The VNI, for a VNI domain.
    #[inline]
    pub fn vni(&self) -> Option<u32> {
        match *self {
            DomainKey::Vni(v) | DomainKey::Ovn(v) => Some(v),
            DomainKey::Vlan(_) | DomainKey::Detached => None,
        }
    }

    /// The domain a port configured with `vlan` / `vni` is in.
    pub fn of(vlan: Option<u16>, vni: Option<u32>) -> Self {
        match vni {
            Some(v) => DomainKey::Vni(v),
            None => DomainKey::Vlan(vlan.unwrap_or(0)),
        }
    }
}

impl fmt::Display for DomainKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DomainKey::Vlan(0) => f.write_str("untagged"),
            DomainKey::Vlan(v) => write!(f, "vlan {v}"),
            DomainKey::Vni(v) => write!(f, "vni {v}"),
            DomainKey::Ovn(v) => write!(f, "ovn datapath {v}"),
            DomainKey::Detached => f.write_str("none (OVN port not bound)"),
        }
    }
}

/// The registry of bridge domains: ids are handed out once and never reused, so FDB
/// entries keyed by an id stay meaningful while a domain has no port.
#[derive(Debug, Default)]
pub struct Domains {
    inner: RwLock<(HashMap<DomainKey, DomainId>, Vec<DomainKey>)>,
}

/// The registry is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many bridge domains: at most {MAX_DOMAINS}")]
pub struct TooManyDomains;

impl Domains {
    /// The id of `key`, registering it if new.
    ///
    /// # Errors
    /// [`TooManyDomains`] once [`MAX_DOMAINS`] ids are handed out.
    pub fn intern(&self, key: DomainKey) -> Result<DomainId, TooManyDomains> {
        if let Some(&id) = self.read().0.get(&key) {
            return Ok(id);
        }
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = g.0.get(&key) {
            return Ok(id);
        }
        if g.1.len() >= MAX_DOMAINS {
            return Err(TooManyDomains);
        }
        let id = g.1.len() as DomainId;
        g.1.push(key);
        g.0.insert(key, id);
        Ok(id)
    }

    /// The domain of `id`, if registered.
    pub fn key(&self, id: DomainId) -> Option<DomainKey> {
        self.read().1.get(usize::from(id)).copied()
    }

    /// Domains registered so far.
    pub fn len(&self) -> usize {
        self.read().1.len()
    }

    /// No domain is registered yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, (HashMap<DomainKey, DomainId>, Vec<DomainKey>)> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// A port's ingress ACL with its drop counters: one counter per rule and PMD, made
/// fresh with every edit of the ACL, so they count since it last changed.
#[derive(Debug)]
pub struct PortAcl {
    /// The rules, in order.
    pub rules: Acl,
    /// `drops[pmd][rule]`, for rules below [`MAX_ACL_RULES`]; each written by its PMD only.
    drops: Box<[Box<[Counter]>]>,
}

/// Rules per port whose drops are counted individually.
pub const MAX_ACL_RULES: usize = 256;

impl PortAcl {
    /// `rules`, with zeroed counters for `pmds` PMD threads.
    pub fn new(rules: Acl, pmds: usize) -> Self {
        let n = rules.rules().len().min(MAX_ACL_RULES);
        PortAcl {
            rules,
            drops: (0..pmds)
                .map(|_| (0..n).map(|_| Counter::default()).collect())
                .collect(),
        }
    }

    /// Counts a drop by `rule` on PMD `pmd` (rules past [`MAX_ACL_RULES`] are counted
    /// only under the port's `acl` drop reason).
    #[inline]
    pub fn count_drop(&self, pmd: usize, rule: u16) {
        if let Some(c) = self.drops.get(pmd).and_then(|d| d.get(usize::from(rule))) {
            c.add(1);
        }
    }

    /// Frames rule `rule` dropped since this ACL was installed, over every PMD.
    pub fn drops(&self, rule: usize) -> u64 {
        self.drops
            .iter()
            .filter_map(|d| d.get(rule).map(Counter::get))
            .sum()
    }
}

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
}

/// One snapshot of the switch's topology.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// Bumped by every published edit; never reused.
    pub generation: u64,
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
    pub fn domain_ports(&self, d: crate::model::topology::DomainId) -> &[PortId] {
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
    /// domains); `ndomains` is the registry's size. An uplink that carries a tunnel
    /// endpoint is the underlay, in no domain.
    pub fn rebuild_domains(&mut self, ndomains: usize) {
        let mut d: Vec<Vec<PortId>> = vec![Vec::new(); ndomains];
        for p in self.iter() {
            if self.tunnels.is_underlay(p.port.id) || p.domain_key == DomainKey::Detached {
                continue;
            }
            if let Some(m) = d.get_mut(usize::from(p.domain)) {
                m.push(p.port.id);
            }
        }
        self.domains = d;
    }
}
