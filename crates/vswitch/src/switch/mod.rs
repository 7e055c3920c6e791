//! The switch: the state PMD threads, vhost-user threads and the control plane share.
//!
//! The topology (ports, domains, queue assignment, ACLs) is one snapshot published
//! RCU-style ([`topology`]); the FDB changes per burst and is shared under
//! its own lock; each PMD's counters are written by that PMD alone.

pub mod topology;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::config::{Config, PollMode, PortConfig};
use crate::model::acl::Acl;
use crate::model::acl::PortAcl;
use crate::model::domain::{DomainKey, Domains};
use crate::model::fdb::{Dest, Fdb, PortId};
use crate::model::stats::{Counter, PmdCounters, PortStats};
use crate::ports::vhost::device::Wakers;
use crate::ports::{OpenError, Port};
use crate::switch::topology::{TopoPort, Topology};

/// Frames the slow path's queue holds at most.
pub const SLOW_PATH_QUEUE: usize = 1024;

/// What one PMD thread shares with the control plane.
pub struct PmdShared {
    /// PMD index.
    pub index: usize,
    /// CPU it is pinned to, if any.
    pub cpu: Option<usize>,
    /// Its own counters.
    pub counters: PmdCounters,
    /// Written to wake the thread from a sleep.
    pub wake: Arc<EventFd>,
    /// Flow-cache statistics, mirrored from the PMD's cache after each burst:
    /// last-flow hits, EMC hits, misses, stale misses, insertions, evictions.
    pub cache_stats: [Counter; 6],
    /// OVN logical pipeline statistics, mirrored after each burst that ran it: program
    /// cache hits, interpreter runs, programs kept and dropped by topology changes,
    /// hits of wildcard programs, hits stepped together with earlier frames of their
    /// flow.
    pub lflow_stats: [Counter; 6],
    /// Set by the control plane to ask for a dump of the PMD's cached flows.
    pub dump_request: AtomicBool,
    /// The dump, filled by the PMD.
    pub dump: Mutex<Option<Vec<String>>>,
    /// The topology generation the PMD runs (it no longer uses older snapshots).
    pub generation_seen: AtomicU64,
    /// Bumped by the running thread at least once a second (for the health check).
    pub heartbeat: AtomicU64,
    /// The thread runs (set when it starts, cleared when it ends, also by a panic).
    pub alive: AtomicBool,
}

impl PmdShared {
    /// The wake eventfd's fd.
    pub fn wake_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.wake.as_raw_fd()
    }
}

/// The whole switch, shared by PMDs, vhost-user threads and the control plane.
pub struct Switch {
    /// The live topology; PMDs pick up a new snapshot between bursts.
    pub topology: Arc<ArcSwap<Topology>>,
    /// The bridge domains registered so far.
    pub domains: Domains,
    /// The remote tunnel endpoints registered so far.
    pub remotes: crate::model::tunnel::Remotes,
    /// The MAC table.
    pub fdb: Fdb,
    /// Multicast snooping's group database.
    pub mcast: crate::model::mcast::Mcast,
    /// Connection tracking for OVN's logical pipeline (shared by every PMD: a reply
    /// may arrive on another queue than its connection's first packet).
    pub conntrack: Arc<conntrack::Conntrack>,
    /// The conntrack zone of each logical port.
    pub ct_zones: crate::model::lflow::Zones,
    /// Frames for the slow path (controller actions), a bounded queue: a PMD that finds
    /// it full drops the frame (`slow_path_busy`).
    pub slow_tx: std::sync::mpsc::SyncSender<crate::model::lflow::SlowJob>,
    /// The queue's other end, taken by the slow path's thread.
    pub slow_rx: Mutex<Option<std::sync::mpsc::Receiver<crate::model::lflow::SlowJob>>>,
    /// What the slow path did.
    pub slow_stats: crate::model::lflow::SlowPathStats,
    /// Frames the slow path made, for PMD 0 to send.
    pub injected: Mutex<Vec<crate::model::lflow::Injected>>,
    /// `injected` is not empty.
    pub injected_pending: AtomicBool,
    /// BFD Control packets received on the tunnels, with the sender's endpoint, for
    /// the OVN chassis' sessions ([`crate::ovn::bfd`]).
    pub bfd_rx: Mutex<Vec<(std::net::IpAddr, bfd::ControlPacket)>>,
    /// The OVN chassis runs BFD sessions (else BFD frames are dropped and counted).
    pub bfd_on: AtomicBool,
    /// The OVN load balancers' affinity sessions (`affinity_timeout`).
    pub lb_affinity: crate::model::lflow::LbAffinity,
    /// What the pipeline learned, for the OVN chassis to write (MAC bindings).
    pub learned: Mutex<Vec<crate::model::lflow::Learned>>,
    /// PMD thread state.
    pub pmds: Vec<Arc<PmdShared>>,
    /// Wakes PMDs on ring changes.
    pub wakers: Arc<Wakers>,
    /// Set at shutdown.
    pub shutdown: AtomicBool,
    /// The configuration in force (the start's, then each reload's).
    config: ArcSwap<Config>,
    /// Its poll mode, read by idle PMDs.
    poll: std::sync::atomic::AtomicU8,
    /// Serializes topology editors; readers never take it.
    edit: Mutex<()>,
}

/// A topology edit failed; nothing was published.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// A port could not be opened.
    #[error("{0}")]
    Open(#[from] OpenError),
    /// Something named does not exist, or the edit is not possible (the message says).
    #[error("{0}")]
    Invalid(String),
}

impl Switch {
    /// Builds the switch for `config`: its ports (vhost-user sockets not yet bound, see
    /// [`crate::ports::vhost::VhostPort::bind`]; uplinks and taps opened), the FDB with
    /// the static entries, and PMD state; queues are given to PMDs round-robin.
    ///
    /// # Errors
    /// A port could not be opened (the message names it), or the PMDs' eventfds could
    /// not be made.
    pub fn new(config: Config) -> std::io::Result<Arc<Switch>> {
        let npmd = config.pmd_count();
        let wakers = Arc::new(Wakers::default());
        let mut pmds = Vec::new();
        for i in 0..npmd {
            let wake = Arc::new(EventFd::new(EFD_NONBLOCK)?);
            wakers.register(wake.clone());
            pmds.push(Arc::new(PmdShared {
                index: i,
                cpu: config.pmd_cpus.as_ref().map(|c| c[i]),
                counters: PmdCounters::default(),
                wake,
                cache_stats: Default::default(),
                lflow_stats: Default::default(),
                dump_request: AtomicBool::new(false),
                dump: Mutex::new(None),
                generation_seen: AtomicU64::new(0),
                heartbeat: AtomicU64::new(0),
                alive: AtomicBool::new(false),
            }));
        }
        let (slow_tx, slow_rx) = std::sync::mpsc::sync_channel(SLOW_PATH_QUEUE);
        let sw = Switch {
            topology: Arc::new(ArcSwap::from_pointee(Topology::new(npmd))),
            domains: Domains::default(),
            remotes: Default::default(),
            fdb: Fdb::new(
                Duration::from_secs(config.fdb_aging_secs),
                config.fdb_max_macs,
            ),
            mcast: crate::model::mcast::Mcast::new(&config.mcast),
            conntrack: Arc::new(
                conntrack::Conntrack::new(conntrack::Config {
                    max_connections: config.ct_max_connections,
                    default_zone_limit: config.ct_zone_max,
                    shards: config.ct_shards as usize,
                    ..Default::default()
                })
                .map_err(std::io::Error::other)?,
            ),
            ct_zones: Default::default(),
            slow_tx,
            slow_rx: Mutex::new(Some(slow_rx)),
            slow_stats: Default::default(),
            injected: Mutex::new(Vec::new()),
            injected_pending: AtomicBool::new(false),
            bfd_rx: Mutex::new(Vec::new()),
            bfd_on: AtomicBool::new(false),
            lb_affinity: Default::default(),
            learned: Mutex::new(Vec::new()),
            pmds,
            wakers,
            shutdown: AtomicBool::new(false),
            poll: std::sync::atomic::AtomicU8::new(config.poll as u8),
            config: ArcSwap::from_pointee(config.clone()),
            edit: Mutex::new(()),
        };
        let mut ports = Vec::new();
        for (i, p) in config.ports.iter().enumerate() {
            let ctx = crate::ports::OpenCtx::new(&config, &p.name, npmd);
            let port = Port::open(i as PortId, p, &ctx).map_err(std::io::Error::other)?;
            ports.push(
                sw.placed(Arc::new(port), p, &config)
                    .map_err(std::io::Error::other)?,
            );
        }
        sw.publish(|t| {
            for p in ports {
                t.insert(p);
            }
            Ok::<_, EditError>(())
        })
        .map_err(std::io::Error::other)?;
        sw.install_static_macs(&config);
        Ok(Arc::new(sw))
    }

    /// The configuration in force.
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }

    /// Replaces the configuration in force (after a reload applied it).
    pub fn set_config(&self, c: Config) {
        self.poll.store(c.poll as u8, Ordering::Relaxed);
        self.config.store(Arc::new(c));
    }

    /// How idle PMDs wait now (`--poll`; a reload may change it).
    #[inline]
    pub fn poll_mode(&self) -> PollMode {
        match self.poll.load(Ordering::Relaxed) {
            x if x == PollMode::Busy as u8 => PollMode::Busy,
            x if x == PollMode::Interrupt as u8 => PollMode::Interrupt,
            _ => PollMode::Adaptive,
        }
    }

    /// The current topology snapshot.
    pub fn topo(&self) -> Arc<Topology> {
        self.topology.load_full()
    }

    /// `port` as the topology places it for configuration `cfg`: its domain and its ACL
    /// from `config`'s rules for it.
    ///
    /// # Errors
    /// The domain registry is full.
    pub fn placed(
        &self,
        port: Arc<Port>,
        cfg: &PortConfig,
        config: &Config,
    ) -> Result<TopoPort, EditError> {
        // An OVN port is in no domain until the chassis binds it (`crate::ovn`), nor is
        // a port of a secure database bridge that is no OVN port.
        let key = if cfg.iface_id.is_some() || cfg.unbound {
            DomainKey::Detached
        } else {
            DomainKey::of(cfg.bridge, cfg.vlan, cfg.vni)
        };
        let domain = self
            .domains
            .intern(key)
            .map_err(|e| EditError::Invalid(e.to_string()))?;
        let mut acl = Acl::new();
        for (name, rule) in &config.acl {
            if *name == cfg.name {
                // Rules were validated with the configuration.
                let _ = acl.push(rule.clone());
            }
        }
        // Guests and taps get the per-port default; an uplink, which legitimately carries
        // a whole network's MACs, only the table's.
        let mac_limit = cfg.max_macs.unwrap_or(match cfg.kind {
            crate::config::PortType::Afxdp => u32::MAX,
            _ => config.fdb_port_max_macs,
        });
        Ok(TopoPort {
            ovn_key: 0,
            trunk: None,
            mac_limit,
            acl: Arc::new(PortAcl::new(acl, self.pmds.len())),
            config: Arc::new(cfg.clone()),
            domain,
            domain_key: key,
            port,
        })
    }

    /// The overlay part of topology `t` under configuration `config`: its local
    /// endpoints (kept, with their counters and paths, when unchanged), the domain of
    /// each VNI a port of `t` is in, and each such domain's flood list (the VNI's
    /// `[[vni]]` list, else every endpoint's `remote=`).
    pub fn build_tunnels(&self, config: &Config, t: &Topology) -> crate::model::tunnel::Tunnels {
        use crate::model::tunnel::{Tep, Tunnels};
        let old = &t.tunnels;
        let mut out = Tunnels::default();
        for g in &config.geneve {
            let Some(uplink) = t.by_name(&g.uplink).map(|u| u.port.id) else {
                continue;
            };
            let kept = old
                .teps
                .iter()
                .position(|x| x.config == *g && x.uplink == uplink);
            let (tep, paths) = match kept {
                Some(i) => (
                    old.teps[i].clone(),
                    old.paths.get(i).cloned().unwrap_or_default(),
                ),
                None => match Tep::new(g.clone(), uplink, self.pmds.len(), config.ovn.is_some()) {
                    Ok(tep) => (Arc::new(tep), Default::default()),
                    Err(e) => {
                        tracing::warn!(tep = %g.name, error = %e, "tunnel endpoint not usable");
                        continue;
                    }
                },
            };
            out.teps.push(tep);
            out.paths.push(paths);
        }
        for tp in t.iter() {
            if let DomainKey::Vni(v) | DomainKey::Ovn(v) = tp.domain_key {
                out.vni_domains.insert(v, tp.domain);
            }
        }
        // OVN datapaths with no local port (an external network, a router whose
        // gateway port is here) take frames by tunnel too.
        out.vni_domains
            .extend(t.ovn.by_key.iter().map(|(&k, &d)| (k, d)));
        out.flood = vec![Vec::new(); self.domains.len()];
        for (&vni, &d) in &out.vni_domains {
            // OVN's logical switches flood to their groups' chassis, not static lists.
            if t.ovn.domain(d).is_some() {
                continue;
            }
            let ips: Vec<std::net::IpAddr> = match config.vnis.iter().find(|v| v.id == vni) {
                Some(v) => v.remotes.clone(),
                None => config
                    .geneve
                    .iter()
                    .flat_map(|g| g.remotes.clone())
                    .collect(),
            };
            let mut ids: Vec<_> = ips
                .iter()
                .filter_map(|ip| self.remotes.intern(*ip))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            if let Some(f) = out.flood.get_mut(usize::from(d)) {
                *f = ids;
            }
        }
        out
    }

    /// Installs `config`'s static FDB entries (replacing any present).
    pub fn install_static_macs(&self, config: &Config) {
        self.fdb.clear_static();
        let topo = self.topo();
        for e in &config.fdb_static {
            if let Some(p) = topo.by_name(&e.port) {
                self.fdb.add_static(p.domain, e.mac, Dest::Port(p.port.id));
            }
        }
    }

    /// Installs the configuration's static group memberships (`--mcast-static`) of the
    /// ports `topo` has, in their domains.
    fn install_static_groups(&self, topo: &Topology) {
        for (name, group) in &self.config().mcast.statics {
            if let Some(tp) = topo.iter().find(|tp| &tp.port.name == name) {
                self.mcast.add_static(tp.domain, tp.port.id, *group);
            }
        }
    }

    /// Gives every trunk of `t` its VLANs' domains (interned here), from the VLANs
    /// its bridge's ports use; a plan that did not change keeps its allocation.
    fn plan_trunks(&self, t: &mut Topology) {
        use crate::model::trunk::TrunkPlan;
        let mut used: std::collections::BTreeMap<u16, Vec<u16>> = Default::default();
        for p in t.iter().filter(|p| !t.tunnels.is_underlay(p.port.id)) {
            let (Some(b), DomainKey::Bridge { vlan, .. }) = (p.config.bridge, p.domain_key) else {
                continue;
            };
            let vlans = used.entry(b).or_default();
            vlans.push(vlan);
            if let Some(tr) = &p.config.trunk {
                vlans.extend(&tr.vlans);
            }
        }
        for vlans in used.values_mut() {
            vlans.sort_unstable();
            vlans.dedup();
        }
        let underlay: Vec<bool> = t
            .ports
            .iter()
            .map(|p| p.as_ref().is_some_and(|p| t.tunnels.is_underlay(p.port.id)))
            .collect();
        for (i, p) in t.ports.iter_mut().enumerate() {
            let Some(p) = p else { continue };
            let plan = match (&p.config.trunk, p.config.bridge, p.domain_key) {
                (Some(tr), Some(b), DomainKey::Bridge { .. }) if !underlay[i] => {
                    let bridge_vlans = used.get(&b).map_or(&[][..], Vec::as_slice);
                    TrunkPlan::new(tr, (p.domain, p.domain_key), bridge_vlans, |vlan| {
                        self.domains
                            .intern(DomainKey::Bridge { bridge: b, vlan })
                            .ok()
                    })
                }
                _ => None,
            };
            if p.trunk.as_deref() != plan.as_ref() {
                p.trunk = plan.map(Arc::new);
            }
        }
    }

    /// Applies `edit` to a copy of the topology and publishes it with the next
    /// generation (rebuilding the domains' member lists), then wakes the PMDs. Editors
    /// are serialized; readers and PMDs never wait. Returns `edit`'s result and the new
    /// generation.
    ///
    /// # Errors
    /// `edit`'s: nothing is published.
    pub fn publish<T, E>(
        &self,
        edit: impl FnOnce(&mut Topology) -> Result<T, E>,
    ) -> Result<(T, u64), E> {
        let _g = self.edit.lock().unwrap_or_else(|e| e.into_inner());
        let mut t = (**self.topology.load()).clone();
        let r = edit(&mut t)?;
        t.generation += 1;
        t.lflow_epoch = t.generation;
        t.tunnels = self.build_tunnels(&self.config(), &t);
        self.plan_trunks(&mut t);
        t.rebuild_domains(self.domains.len());
        let generation = t.generation;
        let t = Arc::new(t);
        self.topology.store(t.clone());
        self.wakers.wake_all();
        self.mcast
            .forget_departed(|p| t.port(p).map(|tp| tp.domain));
        self.install_static_groups(&t);
        Ok((r, generation))
    }

    /// Publishes the topology with OVN part `ovn`, which differs from `base` only in its
    /// logical pipeline, if `base` is still the published one's: the PMDs keep their
    /// cached decisions whose datapaths did not change (the epoch stays). Returns the
    /// new generation, or `None` when another edit replaced `base` meanwhile.
    pub fn publish_pipeline(
        &self,
        base: &Arc<crate::model::ovn::OvnTopo>,
        ovn: Arc<crate::model::ovn::OvnTopo>,
    ) -> Option<u64> {
        let _g = self.edit.lock().unwrap_or_else(|e| e.into_inner());
        let cur = self.topology.load_full();
        if !Arc::ptr_eq(&cur.ovn, base) {
            return None;
        }
        let mut t = (*cur).clone();
        t.ovn = ovn;
        t.generation += 1;
        let generation = t.generation;
        self.topology.store(Arc::new(t));
        self.wakers.wake_all();
        Some(generation)
    }

    /// Waits until every PMD runs generation `generation` or newer (none uses an older
    /// snapshot any more), up to `timeout`. Returns whether they all did.
    pub fn wait_adopted(&self, generation: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self
                .pmds
                .iter()
                .all(|m| m.generation_seen.load(Ordering::Acquire) >= generation)
            {
                return true;
            }
            if self.stopping() || Instant::now() > deadline {
                return false;
            }
            self.wakers.wake_all();
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A port's counters summed over all PMDs (zero for an unknown port).
    pub fn port_stats(&self, id: PortId) -> PortStats {
        self.topo()
            .port(id)
            .map_or_else(PortStats::zero, |p| p.port.stats())
    }

    /// Applies `edit` to port `port`'s ACL and publishes the result; its rule counters
    /// start from zero.
    ///
    /// # Errors
    /// `edit`'s, or [`crate::model::acl::AclError::NoSuchRule`]-style errors for an
    /// unknown port.
    pub fn edit_acl<T>(
        &self,
        port: PortId,
        edit: impl FnOnce(&mut Acl) -> Result<T, crate::model::acl::AclError>,
    ) -> Result<T, crate::model::acl::AclError> {
        let pmds = self.pmds.len();
        self.publish(|t| {
            let Some(Some(tp)) = t.ports.get_mut(usize::from(port)) else {
                return Err(crate::model::acl::AclError::NoPort(port));
            };
            let mut rules = tp.acl.rules.clone();
            let r = edit(&mut rules)?;
            tp.acl = Arc::new(PortAcl::new(rules, pmds));
            Ok(r)
        })
        .map(|(r, _)| r)
    }

    /// Frames dropped by rule `rule` of port `port` since the port's ACL last changed.
    pub fn acl_drops(&self, port: PortId, rule: usize) -> u64 {
        self.topo().port(port).map_or(0, |p| p.acl.drops(rule))
    }

    /// Hands `frames` the slow path made to PMD 0, which sends them between bursts.
    pub fn inject(&self, frames: Vec<crate::model::lflow::Injected>) {
        if frames.is_empty() {
            return;
        }
        self.injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(frames);
        self.injected_pending.store(true, Ordering::Release);
        if let Some(p) = self.pmds.first() {
            let _ = p.wake.write(1);
        }
    }

    /// Notes what the pipeline learned, for the OVN chassis.
    pub fn learn_ovn(&self, l: crate::model::lflow::Learned) {
        let mut g = self.learned.lock().unwrap_or_else(|e| e.into_inner());
        if g.len() < 4096 && !g.contains(&l) {
            g.push(l);
        }
    }

    /// Whether shutdown has begun.
    pub fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switch")
            .field("generation", &self.topology.load().generation)
            .finish()
    }
}
