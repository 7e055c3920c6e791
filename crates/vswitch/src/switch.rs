//! The switch: ports, the FDB, and the per-PMD state that `vswitchctl` reads.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};

use crate::model::acl::Acl;
use crate::model::stats::Counter;
use serde::Serialize;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::config::{Config, PortType};
use crate::model::fdb::{Fdb, PortId, Vlan};
use crate::model::stats::{PmdCounters, PortCounters, PortStats};
use crate::ports::vhost::device::{feature_names, Connection, Wakers};

/// One switch port.
pub struct Port {
    /// Index in [`Switch::ports`].
    pub id: PortId,
    /// Name from the configuration.
    pub name: String,
    /// Server or client vhost-user.
    pub kind: PortType,
    /// The vhost-user socket.
    pub path: PathBuf,
    /// VLAN domain (access VLAN, or 0 for untagged).
    pub vlan: Vlan,
    /// Queue pairs offered.
    pub queue_pairs: u16,
    /// Checksum/TSO offloads offered.
    pub offloads: bool,
    /// The attached driver, if any. PMDs load it once per burst.
    pub conn: ArcSwapOption<Connection>,
    /// Connections accepted or made so far.
    pub connections: AtomicU64,
    /// Link state last seen by housekeeping, for up/down logging and FDB flushes.
    pub was_up: AtomicBool,
    /// What moves the port's frames.
    pub backend: Backend,
}

/// What moves a port's frames.
pub enum Backend {
    /// A vhost-user socket: [`Port::conn`].
    Vhost,
    /// AF_XDP sockets on a NIC.
    Afxdp(Box<crate::ports::afxdp::AfxdpPort>),
    /// A tap device.
    Tap(Box<crate::ports::tap::TapPort>),
}

impl Port {
    /// Whether the port can receive: a driver is attached and queue pair 0 runs (vhost-user),
    /// the interface is up with carrier (AF_XDP), or the tap is up.
    pub fn link_up(&self) -> bool {
        match &self.backend {
            Backend::Vhost => self.conn.load().as_ref().is_some_and(|c| c.link_up()),
            Backend::Afxdp(x) => x.link_up(),
            Backend::Tap(t) => t.link_up(),
        }
    }

    /// Whether flooded frames may be sent to the port: a vhost-user driver is attached,
    /// or the uplink's or tap's link is up.
    #[inline]
    pub fn has_driver(&self) -> bool {
        match &self.backend {
            Backend::Vhost => self.conn.load().is_some(),
            Backend::Afxdp(x) => x.link_up(),
            Backend::Tap(t) => t.link_up(),
        }
    }

    /// Source queues the PMDs poll: queue pairs (vhost-user), AF_XDP sockets, 1 (tap).
    pub fn source_queues(&self) -> u16 {
        match &self.backend {
            Backend::Vhost => self.queue_pairs,
            Backend::Afxdp(x) => x.xsks.len() as u16,
            Backend::Tap(_) => 1,
        }
    }
}

/// Opens the AF_XDP sockets or tap device of a port, for [`Switch::new`].
fn open_backend(p: &crate::config::PortConfig) -> std::io::Result<Backend> {
    let named = |e: String| std::io::Error::other(format!("port {}: {e}", p.name));
    Ok(match p.kind {
        PortType::VhostUser | PortType::VhostUserClient => Backend::Vhost,
        PortType::Afxdp => {
            let x = crate::ports::afxdp::AfxdpPort::open(&p.iface, p.mode, p.queues)
                .map_err(|e| named(e.to_string()))?;
            tracing::info!(
                port = %p.name,
                iface = %p.iface,
                mode = %x.mode,
                queues = x.xsks.len(),
                reason = %x.reason,
                "AF_XDP uplink open"
            );
            Backend::Afxdp(Box::new(x))
        }
        PortType::Tap => {
            let t = crate::ports::tap::TapPort::open(&p.iface).map_err(|e| named(e.to_string()))?;
            tracing::info!(port = %p.name, ifname = %p.iface, "tap port open");
            Backend::Tap(Box::new(t))
        }
    })
}

/// What one PMD thread shares with the control plane.
pub struct PmdShared {
    /// PMD index.
    pub index: usize,
    /// CPU it is pinned to, if any.
    pub cpu: Option<usize>,
    /// Its own counters.
    pub counters: PmdCounters,
    /// Its counters per port, indexed by port id.
    pub port_counters: Vec<PortCounters>,
    /// The transmit queues it polls: (port, queue pair).
    pub queues: Vec<(PortId, u16)>,
    /// Frames taken from each of `queues` (same index).
    pub queue_packets: Vec<Counter>,
    /// Written to wake the thread from a sleep.
    pub wake: Arc<EventFd>,
    /// Frames dropped by each ACL rule, `[port][rule]`, for rules below
    /// [`MAX_ACL_RULES`]. Zeroed by the PMD itself when the port's ACL changes.
    pub acl_drops: Vec<Vec<Counter>>,
    /// The ACL generation of each port that `acl_drops` counts against (PMD-written).
    pub acl_gen_seen: Vec<AtomicU64>,
    /// Flow-cache statistics, mirrored from the PMD's cache after each burst:
    /// last-flow hits, EMC hits, misses, stale misses, insertions, evictions.
    pub cache_stats: [Counter; 6],
    /// Set by the control thread to ask for a dump of the PMD's cached flows.
    pub dump_request: AtomicBool,
    /// The dump, filled by the PMD.
    pub dump: std::sync::Mutex<Option<Vec<String>>>,
}

/// Rules per port whose drops are counted individually.
pub const MAX_ACL_RULES: usize = 256;

/// The whole switch, shared by PMDs, vhost-user threads and the control socket.
pub struct Switch {
    /// Ports, indexed by id.
    pub ports: Vec<Arc<Port>>,
    /// The MAC table.
    pub fdb: Fdb,
    /// PMD thread state.
    pub pmds: Vec<Arc<PmdShared>>,
    /// Wakes PMDs on ring changes.
    pub wakers: Arc<Wakers>,
    /// Set at shutdown.
    pub shutdown: AtomicBool,
    /// The configuration it was built from.
    pub config: Config,
    /// Ingress ACL of each port, indexed by port id; replaced whole on every edit.
    pub acls: ArcSwap<Vec<Acl>>,
    /// Serializes ACL editors (the control thread); readers never take it.
    pub acl_edit: std::sync::Mutex<()>,
    /// Bumped on every configuration change that can alter a forwarding decision
    /// (ACL edits); with the FDB's generation it invalidates the flow caches.
    pub config_gen: AtomicU64,
}

impl Switch {
    /// Builds the switch for `config`: ports (not yet attached), FDB with the static
    /// entries, and PMD state with transmit queues assigned round-robin.
    pub fn new(config: Config) -> std::io::Result<Arc<Switch>> {
        let ports: Vec<Arc<Port>> = config
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                Ok(Arc::new(Port {
                    backend: open_backend(p)?,
                    id: i as PortId,
                    name: p.name.clone(),
                    kind: p.kind,
                    path: p.path.clone(),
                    vlan: p.vlan.unwrap_or(0),
                    queue_pairs: p.queues,
                    offloads: p.offloads,
                    conn: ArcSwapOption::empty(),
                    connections: AtomicU64::new(0),
                    was_up: AtomicBool::new(false),
                }))
            })
            .collect::<std::io::Result<_>>()?;
        let fdb = Fdb::new(std::time::Duration::from_secs(config.fdb_aging_secs));
        for e in &config.fdb_static {
            if let Some(p) = ports.iter().find(|p| p.name == e.port) {
                fdb.add_static(e.vlan, e.mac, p.id);
            }
        }
        let npmd = config.pmd_count();
        let mut assignment: Vec<Vec<(PortId, u16)>> = vec![Vec::new(); npmd];
        let mut k = 0;
        for p in &ports {
            for q in 0..p.source_queues() {
                assignment[k % npmd].push((p.id, q));
                k += 1;
            }
        }
        let wakers = Arc::new(Wakers::default());
        let mut pmds = Vec::new();
        for (i, queues) in assignment.into_iter().enumerate() {
            let wake = Arc::new(EventFd::new(EFD_NONBLOCK)?);
            wakers.register(wake.clone());
            pmds.push(Arc::new(PmdShared {
                index: i,
                cpu: config.pmd_cpus.as_ref().map(|c| c[i]),
                counters: PmdCounters::default(),
                port_counters: (0..ports.len()).map(|_| PortCounters::default()).collect(),
                queue_packets: queues.iter().map(|_| Counter::default()).collect(),
                queues,
                wake,
                acl_drops: (0..ports.len())
                    .map(|_| (0..MAX_ACL_RULES).map(|_| Counter::default()).collect())
                    .collect(),
                acl_gen_seen: (0..ports.len()).map(|_| AtomicU64::new(0)).collect(),
                cache_stats: Default::default(),
                dump_request: AtomicBool::new(false),
                dump: std::sync::Mutex::new(None),
            }));
        }
        let mut acls = vec![Acl::new(); ports.len()];
        for (port, rule) in &config.acl {
            if let Some(p) = ports.iter().find(|p| &p.name == port) {
                // Rules were validated with the configuration.
                let _ = acls[p.id as usize].push(rule.clone());
            }
        }
        Ok(Arc::new(Switch {
            acls: ArcSwap::from_pointee(acls),
            acl_edit: std::sync::Mutex::new(()),
            config_gen: AtomicU64::new(0),
            ports,
            fdb,
            pmds,
            wakers,
            shutdown: AtomicBool::new(false),
            config,
        }))
    }

    /// A port's counters summed over all PMDs.
    pub fn port_stats(&self, id: PortId) -> PortStats {
        let mut s = PortStats::zero();
        for pmd in &self.pmds {
            if let Some(c) = pmd.port_counters.get(id as usize) {
                s.accumulate(c);
            }
        }
        s
    }

    /// The decision generation: changes whenever the FDB or the ACLs change, so flow
    /// caches drop decisions made before (both counters only grow).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.fdb.generation() + self.config_gen.load(Ordering::Acquire)
    }

    /// Applies `edit` to port `port`'s ACL and publishes the result (RCU style).
    pub fn edit_acl<T>(
        &self,
        port: PortId,
        edit: impl FnOnce(&mut Acl) -> Result<T, crate::model::acl::AclError>,
    ) -> Result<T, crate::model::acl::AclError> {
        let _g = self.acl_edit.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<Acl> = (**self.acls.load()).clone();
        let r = edit(&mut all[port as usize])?;
        self.acls.store(Arc::new(all));
        self.config_gen.fetch_add(1, Ordering::Release);
        self.wakers.wake_all();
        Ok(r)
    }

    /// Frames dropped by rule `rule` of port `port` since the port's ACL last changed,
    /// summed over the PMDs that have seen that change (the others have not counted
    /// anything under it yet).
    pub fn acl_drops(&self, port: PortId, rule: usize) -> u64 {
        let current = self
            .acls
            .load()
            .get(port as usize)
            .map_or(0, |a| a.generation());
        self.pmds
            .iter()
            .filter(|m| {
                m.acl_gen_seen
                    .get(port as usize)
                    .is_some_and(|g| g.load(Ordering::Acquire) == current)
            })
            .filter_map(|m| m.acl_drops.get(port as usize)?.get(rule).map(Counter::get))
            .sum()
    }

    /// Whether shutdown has begun.
    pub fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// The `show` view.
    pub fn show(&self) -> ShowReply {
        let ports = self
            .ports
            .iter()
            .map(|p| {
                let conn = p.conn.load();
                let (features, ready) = match conn.as_ref() {
                    Some(c) => (
                        feature_names(c.acked_features.load(Ordering::Relaxed))
                            .into_iter()
                            .map(String::from)
                            .collect(),
                        c.ready_pairs(),
                    ),
                    None => (Vec::new(), Vec::new()),
                };
                let pmd_of_queue = (0..p.source_queues())
                    .map(|q| {
                        self.pmds
                            .iter()
                            .find(|m| m.queues.contains(&(p.id, q)))
                            .map_or(usize::MAX, |m| m.index)
                    })
                    .collect();
                ShowPort {
                    id: p.id,
                    name: p.name.clone(),
                    kind: p.kind.to_string(),
                    path: p.path.display().to_string(),
                    vlan: p.vlan,
                    link: if p.link_up() { "up" } else { "down" }.into(),
                    connected: conn.is_some(),
                    connections: p.connections.load(Ordering::Relaxed),
                    queue_pairs: p.queue_pairs,
                    ready_queue_pairs: ready,
                    offloads: features
                        .iter()
                        .filter(|f| f.contains("CSUM") || f.contains("TSO") || f.contains("ECN"))
                        .cloned()
                        .collect(),
                    offloads_offered: p.offloads,
                    negotiated_features: features,
                    pmd_of_queue,
                    iface: match &p.backend {
                        Backend::Vhost => String::new(),
                        Backend::Afxdp(x) => x.iface.clone(),
                        Backend::Tap(t) => t.ifname.clone(),
                    },
                    afxdp: match &p.backend {
                        Backend::Afxdp(x) => Some(ShowAfxdp {
                            mode: x.mode.to_string(),
                            reason: x.reason.clone(),
                            queues: x.xsks.len() as u16,
                            rx_per_queue: x.xsks.iter().map(|q| q.rx_frames.get()).collect(),
                            multi_buffer: x.sg,
                            mtu: x.mtu(),
                            max_frame: x.max_tx_frame(),
                            kernel: x.kernel_stats(),
                        }),
                        _ => None,
                    },
                }
            })
            .collect();
        ShowReply {
            poll: self.config.poll.to_string(),
            fdb_entries: self.fdb.len(),
            ports,
        }
    }
}

/// `vswitchctl show`.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct ShowReply {
    /// Poll mode.
    pub poll: String,
    /// FDB size.
    pub fdb_entries: usize,
    /// Ports.
    pub ports: Vec<ShowPort>,
}

/// One port in `vswitchctl show`.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct ShowPort {
    /// Port id.
    pub id: PortId,
    /// Name.
    pub name: String,
    /// `vhost-user`, `vhost-user-client`, `afxdp` or `tap`.
    pub kind: String,
    /// Socket path.
    pub path: String,
    /// VLAN domain.
    pub vlan: Vlan,
    /// `up` or `down`.
    pub link: String,
    /// A driver is attached to the socket.
    pub connected: bool,
    /// Connections so far.
    pub connections: u64,
    /// Queue pairs offered.
    pub queue_pairs: u16,
    /// Queue pairs the driver enabled.
    pub ready_queue_pairs: Vec<u16>,
    /// Negotiated virtio features.
    pub negotiated_features: Vec<String>,
    /// The negotiated offload features (CSUM, GUEST_CSUM, HOST/GUEST_TSO4/6,
    /// HOST/GUEST_ECN): what frames from and to this port may carry.
    #[serde(default)]
    pub offloads: Vec<String>,
    /// Whether the port offers offloads (`offloads=on`).
    #[serde(default)]
    pub offloads_offered: bool,
    /// PMD index polling each source queue (vhost-user: queue pair's transmit queue;
    /// afxdp: NIC rx queue; tap: the tap).
    pub pmd_of_queue: Vec<usize>,
    /// afxdp and tap ports: the network interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iface: String,
    /// afxdp ports: the AF_XDP mode in use and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub afxdp: Option<ShowAfxdp>,
}

/// An AF_XDP uplink in `vswitchctl show`.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct ShowAfxdp {
    /// `zero-copy`, `native-copy` or `generic`.
    pub mode: String,
    /// Why this mode (nicoffload's decision, or the fallback taken).
    pub reason: String,
    /// AF_XDP sockets (NIC rx queues 0..N).
    pub queues: u16,
    /// Frames received by each socket.
    #[serde(default)]
    pub rx_per_queue: Vec<u64>,
    /// Multi-buffer (`XDP_USE_SG`) is on: frames larger than a UMEM frame pass.
    #[serde(default)]
    pub multi_buffer: bool,
    /// The interface's MTU (bytes), as last reported by the kernel.
    #[serde(default)]
    pub mtu: u32,
    /// Largest frame the uplink transmits (bytes, with Ethernet and VLAN headers).
    #[serde(default)]
    pub max_frame: u32,
    /// The kernel's AF_XDP socket counters, summed over the sockets: drops the switch
    /// never saw.
    #[serde(default)]
    pub kernel: crate::ports::afxdp::KernelXskStats,
}
