//! The overlay's model (DESIGN.md §6): local tunnel endpoints (TEPs) on AF_XDP
//! uplinks, remote endpoints, the VNIs' flood lists, and the path to each remote
//! (next-hop MACs from the kernel's routes and neighbours), as part of the topology
//! snapshot.
//!
//! Remote endpoints get dense ids ([`RemoteId`]) from an append-only registry, as
//! domains do: an FDB entry can point at a remote (`Dest::Remote`) and a cached decision
//! can say `Encap(remote)` in two machine words, and an id keeps its meaning while
//! entries use it. A PMD registers a remote it hears from for the first time (rare: one
//! write lock); the control plane then finds its path.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::config::GeneveConfig;
use crate::model::domain::DomainId;
use crate::model::fdb::PortId;
use crate::model::stats::Counter;

/// Dense id of a remote tunnel endpoint (see [`Remotes`]).
pub type RemoteId = u16;

/// Most remote endpoints a switch keeps.
pub const MAX_REMOTES: usize = (1 << 16) - 1;

/// The registry of remote endpoints: ids are handed out once and never reused. Also
/// counts the inner frames sent to and received from each remote (added per batch,
/// not per frame).
#[derive(Debug)]
pub struct Remotes {
    inner: RwLock<(HashMap<IpAddr, RemoteId>, Vec<IpAddr>)>,
    /// Frames sent to each remote, by id.
    tx: Box<[AtomicU64]>,
    /// Frames received from each remote, by id.
    rx: Box<[AtomicU64]>,
}

impl Default for Remotes {
    fn default() -> Self {
        Remotes {
            inner: RwLock::default(),
            tx: zeroed_counters(MAX_REMOTES),
            rx: zeroed_counters(MAX_REMOTES),
        }
    }
}

/// `n` counters at zero, allocated zeroed: pages of remotes never used are never
/// touched (512 KiB of address space per table, not of resident memory).
fn zeroed_counters(n: usize) -> Box<[AtomicU64]> {
    let b = Box::<[AtomicU64]>::new_zeroed_slice(n);
    // SAFETY: an all-zero AtomicU64 is a valid AtomicU64 holding 0 (it has the layout
    // of u64), and every element was zeroed by the allocation.
    unsafe { b.assume_init() }
}

impl Remotes {
    /// The id of `ip`, registering it if new; None when the registry is full.
    pub fn intern(&self, ip: IpAddr) -> Option<RemoteId> {
        if let Some(&id) = self.read().0.get(&ip) {
            return Some(id);
        }
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = g.0.get(&ip) {
            return Some(id);
        }
        if g.1.len() >= MAX_REMOTES {
            return None;
        }
        let id = g.1.len() as RemoteId;
        g.1.push(ip);
        g.0.insert(ip, id);
        Some(id)
    }

    /// The id of `ip`, if registered (never registers).
    pub fn id(&self, ip: IpAddr) -> Option<RemoteId> {
        self.read().0.get(&ip).copied()
    }

    /// Counts `n` inner frames sent to remote `id`.
    #[inline]
    pub fn count_tx(&self, id: RemoteId, n: u64) {
        if let Some(c) = self.tx.get(usize::from(id)) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Counts `n` inner frames received from remote `id`.
    #[inline]
    pub fn count_rx(&self, id: RemoteId, n: u64) {
        if let Some(c) = self.rx.get(usize::from(id)) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Inner frames (sent, received) to and from remote `id` so far.
    pub fn frames(&self, id: RemoteId) -> (u64, u64) {
        let get = |t: &[AtomicU64]| {
            t.get(usize::from(id))
                .map_or(0, |c| c.load(Ordering::Relaxed))
        };
        (get(&self.tx), get(&self.rx))
    }

    /// The address of remote `id`.
    pub fn ip(&self, id: RemoteId) -> Option<IpAddr> {
        self.read().1.get(usize::from(id)).copied()
    }

    /// Every remote registered so far, by id.
    pub fn all(&self) -> Vec<IpAddr> {
        self.read().1.clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, (HashMap<IpAddr, RemoteId>, Vec<IpAddr>)> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why a frame to or from a tunnel was dropped besides the decapsulator's reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TunnelDrop {
    /// No neighbour (MAC) known yet for the next hop toward the remote; the kernel was
    /// asked to resolve it.
    NoNeighbour = 0,
    /// A VNI no local port is in.
    UnknownVni,
    /// No local endpoint of the remote's address family has its uplink up.
    NoEndpoint,
    /// The encapsulated frame does not fit the uplink (MTU, UMEM) or the frame's
    /// offload metadata is unusable.
    TooBig,
    /// No free UMEM transmit frame.
    NoTxBuffer,
    /// A tunnelled frame from a remote would go back into a tunnel (split horizon).
    SplitHorizon,
    /// A frame of an OVN logical switch arrived without OVN's Geneve option (class
    /// 0x0102, type 0x80), so its egress port is unknown.
    OvnNoOption,
    /// A frame of an OVN logical switch arrived for an egress port not bound here, or a
    /// multicast group without local members.
    OvnNotHere,
    /// A BFD frame (VNI 0, UDP port 3784) that is not a valid Control packet (TTL,
    /// checksums, fields; RFC 5880 §6.8.6), or that came when no session runs.
    BfdInvalid,
}

impl TunnelDrop {
    /// Every reason, in counter order.
    pub const ALL: [TunnelDrop; 9] = [
        TunnelDrop::NoNeighbour,
        TunnelDrop::UnknownVni,
        TunnelDrop::NoEndpoint,
        TunnelDrop::TooBig,
        TunnelDrop::NoTxBuffer,
        TunnelDrop::SplitHorizon,
        TunnelDrop::OvnNoOption,
        TunnelDrop::OvnNotHere,
        TunnelDrop::BfdInvalid,
    ];

    /// The name used in `vswitchctl tunnels` and metrics.
    pub fn name(self) -> &'static str {
        match self {
            TunnelDrop::NoNeighbour => "tunnel_no_neighbour",
            TunnelDrop::UnknownVni => "unknown_vni",
            TunnelDrop::NoEndpoint => "no_endpoint",
            TunnelDrop::TooBig => "tunnel_too_big",
            TunnelDrop::NoTxBuffer => "tunnel_no_tx_buffer",
            TunnelDrop::SplitHorizon => "split_horizon",
            TunnelDrop::OvnNoOption => "ovn_no_option",
            TunnelDrop::OvnNotHere => "ovn_not_here",
            TunnelDrop::BfdInvalid => "bfd_invalid",
        }
    }
}

/// Counters one PMD keeps for one local endpoint (single writer).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct TepCounters {
    /// Geneve frames received (outer frames, decapsulated or dropped).
    pub rx_packets: Counter,
    /// Their bytes (outer).
    pub rx_bytes: Counter,
    /// Frames sent (outer, after segmentation).
    pub tx_packets: Counter,
    /// Their bytes (outer).
    pub tx_bytes: Counter,
    /// TSO frames segmented while encapsulated.
    pub segmented: Counter,
    /// Geneve options received.
    pub rx_options: Counter,
    /// Decapsulation drops by `geneve::decap::DropReason::index`.
    pub decap_drops: [Counter; geneve::decap::DropReason::COUNT],
    /// Other drops by [`TunnelDrop`].
    pub drops: [Counter; TunnelDrop::ALL.len()],
}

impl TepCounters {
    /// Counts `n` drops for `r`.
    #[inline]
    pub fn drop(&self, r: TunnelDrop, n: u64) {
        self.drops[r as usize].add(n);
    }
}

/// A local tunnel endpoint as the topology places it.
#[derive(Debug)]
pub struct Tep {
    /// Its configuration.
    pub config: GeneveConfig,
    /// The AF_XDP uplink it uses.
    pub uplink: PortId,
    /// Counters, one set per PMD.
    pub counters: Box<[TepCounters]>,
    /// The decapsulator (UDP port, the options it understands).
    pub decap: geneve::decap::Decapsulator,
    /// The options sent with every frame.
    pub options: geneve::wire::OptionList,
    /// An OVN chassis' endpoint: OVN's option (class 0x0102, type 0x80) is understood
    /// on receive and added to frames of OVN logical switches.
    pub ovn: bool,
}

impl Tep {
    /// The endpoint `config` on uplink `uplink`, counting for `pmds` PMDs.
    ///
    /// # Errors
    /// An option that does not fit the option list.
    pub fn new(
        config: GeneveConfig,
        uplink: PortId,
        pmds: usize,
        ovn: bool,
    ) -> Result<Self, String> {
        let mut options = geneve::wire::OptionList::new();
        let mut decap = geneve::decap::Decapsulator {
            udp_port: config.port,
            allow_ipv6_zero_checksum: false,
            // A kernel sender on this host (a veth peer) hands AF_XDP its frames with
            // the UDP checksum left to offload.
            accept_partial_checksum: true,
            ..Default::default()
        };
        for o in &config.options {
            let (class, typ, data) = crate::config::geneve::parse_option(o)?;
            options
                .push(class, typ, &data)
                .map_err(|e| format!("option {o}: {e}"))?;
            decap.registry.insert(class, typ);
        }
        if ovn {
            decap.registry.insert(
                crate::model::ovn::OPTION_CLASS,
                crate::model::ovn::OPTION_TYPE,
            );
        }
        Ok(Tep {
            ovn,
            config,
            uplink,
            counters: (0..pmds.max(1)).map(|_| TepCounters::default()).collect(),
            decap,
            options,
        })
    }

    /// The counters PMD `pmd` writes.
    #[inline]
    pub fn counters(&self, pmd: usize) -> &TepCounters {
        &self.counters[pmd.min(self.counters.len() - 1)]
    }
}

/// The way to one remote through one local endpoint: the next hops' MACs (several for
/// an ECMP route; frames pick one by flow hash), empty while no neighbour is known.
#[derive(Debug, Default)]
pub struct Path {
    /// Outer source MAC: the uplink's.
    pub src_mac: [u8; 6],
    /// Outer destination MACs, one per usable next hop.
    pub hops: Vec<[u8; 6]>,
    /// Set by a PMD that dropped a frame for want of a neighbour (the control plane
    /// asks the kernel to resolve it).
    pub wanted: AtomicBool,
}

impl Path {
    /// Marks the path as wanted by traffic.
    #[inline]
    pub fn want(&self) {
        if !self.wanted.load(Ordering::Relaxed) {
            self.wanted.store(true, Ordering::Relaxed);
        }
    }
}

/// The overlay part of a topology snapshot.
#[derive(Debug, Clone, Default)]
pub struct Tunnels {
    /// Local endpoints, by index.
    pub teps: Vec<Arc<Tep>>,
    /// The domain of each VNI that has a local port.
    pub vni_domains: HashMap<u32, DomainId>,
    /// The remotes each VNI domain floods to, by [`DomainId`].
    pub flood: Vec<Vec<RemoteId>>,
    /// The path to each remote through each local endpoint: `paths[tep][remote]`
    /// (absent: not computed yet).
    pub paths: Vec<HashMap<RemoteId, Arc<Path>>>,
}

impl Tunnels {
    /// The endpoints on uplink port `port` (at most one per address family).
    #[inline]
    pub fn on_uplink(&self, port: PortId) -> impl Iterator<Item = (usize, &Arc<Tep>)> {
        self.teps
            .iter()
            .enumerate()
            .filter(move |(_, t)| t.uplink == port)
    }

    /// Whether port `port` is the underlay only: it carries a tunnel endpoint whose
    /// address its own interface holds, so every frame vswitchd takes from it is
    /// tunnelled (its XDP program passes the rest to the kernel), and it is in no
    /// domain.
    #[inline]
    pub fn is_underlay(&self, port: PortId) -> bool {
        self.teps
            .iter()
            .any(|t| t.uplink == port && t.config.device.is_none())
    }

    /// Whether port `port` is a switch port that also carries a tunnel endpoint whose
    /// address a tap holds (`device`, OVS's `br-phy` layout): its frames to the
    /// endpoint are decapsulated, the others switched.
    #[inline]
    pub fn shares(&self, port: PortId) -> bool {
        self.teps
            .iter()
            .any(|t| t.uplink == port && t.config.device.is_some())
    }

    /// The remotes domain `d` floods to.
    #[inline]
    pub fn flood_of(&self, d: DomainId) -> &[RemoteId] {
        self.flood.get(usize::from(d)).map_or(&[], Vec::as_slice)
    }

    /// The endpoint named `name`.
    pub fn by_name(&self, name: &str) -> Option<&Arc<Tep>> {
        self.teps.iter().find(|t| t.config.name == name)
    }
}
