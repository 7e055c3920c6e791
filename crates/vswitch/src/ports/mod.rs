//! Ports: one module per kind behind one interface (DESIGN.md §2).
//!
//! [`Port`] is what the pipeline and the control plane see: receive a burst from a
//! source queue, transmit a batch, link state, what a sleeping PMD waits on, and the
//! `show` view. Each operation is one `match` over [`PortKind`] in this file; the PMD
//! loop never branches on the kind. Raw buffer pointers (UMEM, tap buffers) stay in
//! their module, handed to the pipeline only as an [`RxBurst`] borrowed for one burst.
//!
//! - [`vhost`]: a VM (QEMU, DPDK virtio-user) over a vhost-user socket;
//! - [`afxdp`]: a NIC through AF_XDP sockets, one per rx queue;
//! - [`tap`]: the host's kernel stack through a tap device.

pub mod afxdp;
pub mod frame;
pub mod host;
pub mod show;
pub mod tap;
pub mod vhost;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::{PortConfig, PortType};
use crate::model::domain::DomainKey;
use crate::model::fdb::PortId;
use crate::model::stats::{PortCounters, PortStats};
use crate::ports::frame::{BurstHandler, RxBurst, TxBatch, TxOffloads, TxPlan};

pub use afxdp::AfxdpPort;
pub use show::ShowPort;
pub use tap::TapPort;
pub use vhost::deliver::TxScratch;
pub use vhost::idle::IdleWatch;
pub use vhost::VhostPort;

/// What moves a port's frames.
pub enum PortKind {
    /// A VM over a vhost-user socket.
    Vhost(VhostPort),
    /// A NIC through AF_XDP sockets.
    Afxdp(Box<AfxdpPort>),
    /// A tap device into the host's stack.
    Tap(Box<TapPort>),
}

/// Load measured on one source queue, for `pmd-rebalance`: written with atomic adds by
/// whichever PMD polls the queue, once per non-empty burst.
#[derive(Debug, Default)]
pub struct QueueLoad {
    /// Frames taken from the queue.
    pub packets: AtomicU64,
    /// TSC cycles spent on its bursts (receive, pipeline, delivery).
    pub cycles: AtomicU64,
}

/// One switch port.
pub struct Port {
    /// Its id: index in the topology's port table, fixed for the port's life.
    pub id: PortId,
    /// Name from the configuration.
    pub name: String,
    /// What moves its frames.
    pub kind: PortKind,
    /// Counters, one set per PMD thread (each written by its PMD only).
    counters: Box<[PortCounters]>,
    /// Load per source queue.
    queue_load: Box<[QueueLoad]>,
    /// The port sent a RARP while its OVN binding here awaited activation (set by its
    /// PMD, read and cleared by the OVN chassis).
    pub announced: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

impl Port {
    /// A port with id `id` over `kind`, counting for `pmds` PMD threads.
    pub fn new(id: PortId, name: String, kind: PortKind, pmds: usize) -> Self {
        let queues = match &kind {
            PortKind::Vhost(v) => v.queue_pairs,
            PortKind::Afxdp(x) => x.xsks.len() as u16,
            PortKind::Tap(_) => 1,
        };
        Port {
            id,
            name,
            kind,
            counters: (0..pmds.max(1)).map(|_| PortCounters::default()).collect(),
            queue_load: (0..queues).map(|_| QueueLoad::default()).collect(),
            announced: Default::default(),
        }
    }

    /// Opens what the configuration describes: a vhost-user port (not yet bound), an
    /// AF_XDP uplink (with `tep`, the filter of the tunnel endpoints it carries), or a
    /// tap. Nothing runs yet.
    ///
    /// # Errors
    /// What failed, with the port named.
    pub fn open(id: PortId, cfg: &PortConfig, ctx: &OpenCtx) -> Result<Port, OpenError> {
        let pmds = ctx.pmds;
        let tep = ctx.tep.as_ref();
        let named = |e: String| OpenError {
            port: cfg.name.clone(),
            message: e,
        };
        let kind = match cfg.kind {
            PortType::VhostUser | PortType::VhostUserClient => {
                PortKind::Vhost(VhostPort::open(cfg).map_err(named)?)
            }
            PortType::Afxdp => {
                let x = AfxdpPort::open(&cfg.iface, cfg.mode, cfg.queues, tep)
                    .map_err(|e| named(e.to_string()))?;
                tracing::info!(
                    port = %cfg.name,
                    iface = %cfg.iface,
                    mode = %x.mode,
                    queues = x.xsks.len(),
                    reason = %x.reason,
                    "AF_XDP uplink open"
                );
                PortKind::Afxdp(Box::new(x))
            }
            PortType::Tap => {
                let t = TapPort::open(&cfg.iface).map_err(|e| named(e.to_string()))?;
                let mtu = cfg
                    .mtu
                    .map(u32::from)
                    .or(ctx.inner_mtu.filter(|_| cfg.on_overlay()));
                if let Some(m) = mtu {
                    tap::set_mtu(&cfg.iface, m)
                        .map_err(|e| named(format!("cannot set MTU {m}: {e}")))?;
                }
                tracing::info!(port = %cfg.name, ifname = %cfg.iface, mtu, "tap port open");
                PortKind::Tap(Box::new(t))
            }
        };
        Ok(Port::new(id, cfg.name.clone(), kind, pmds))
    }

    /// The vhost-user side of the port, if it is one.
    pub fn vhost(&self) -> Option<&VhostPort> {
        match &self.kind {
            PortKind::Vhost(v) => Some(v),
            _ => None,
        }
    }

    /// Source queues the PMDs poll: queue pairs (vhost-user), AF_XDP sockets, 1 (tap).
    pub fn rx_queues(&self) -> u16 {
        self.queue_load.len() as u16
    }

    /// Whether the port can receive: a driver is attached and queue pair 0 runs
    /// (vhost-user), the interface is up with carrier (AF_XDP), or the tap is up.
    pub fn link_up(&self) -> bool {
        match &self.kind {
            PortKind::Vhost(v) => v.link_up(),
            PortKind::Afxdp(x) => x.link_up(),
            PortKind::Tap(t) => t.link_up(),
        }
    }

    /// Whether flooded frames may be sent to the port: a vhost-user driver is attached,
    /// or the uplink's or tap's link is up.
    #[inline]
    pub fn can_flood(&self) -> bool {
        match &self.kind {
            PortKind::Vhost(v) => v.conn.load().is_some(),
            PortKind::Afxdp(x) => x.link_up(),
            PortKind::Tap(t) => t.link_up(),
        }
    }

    /// Receives one burst from source queue `q` and runs `handler` on it; returns the
    /// frames taken (including dropped ones). `watch` is the polling PMD's for this
    /// queue (vhost-user ports answer an idle queue's polls from it).
    #[inline]
    pub fn receive<H: BurstHandler>(
        &self,
        q: u16,
        watch: &mut IdleWatch,
        rx: &mut RxScratch,
        handler: &mut H,
    ) -> usize {
        match &self.kind {
            PortKind::Vhost(v) => v.receive(self, q, watch, rx, handler),
            PortKind::Afxdp(x) => x.receive(self, q, rx, handler),
            PortKind::Tap(t) => t.receive(self, rx, handler),
        }
    }

    /// What the port takes now: the offloads it takes whole, and whether it spreads
    /// frames over several receive queues by flow hash.
    #[inline]
    pub fn tx_plan(&self) -> TxPlan {
        match &self.kind {
            PortKind::Vhost(v) => v.tx_plan(),
            PortKind::Afxdp(_) => TxPlan {
                takes: TxOffloads::NONE,
                spreads: false,
            },
            PortKind::Tap(_) => TxPlan {
                takes: TxOffloads::ALL,
                spreads: false,
            },
        }
    }

    /// Transmits one batch (delivers it into the VM, the NIC or the host stack).
    #[inline]
    pub fn transmit<'m, B: RxBurst<'m>>(
        &self,
        batch: &TxBatch<'_, 'm, B>,
        scratch: &mut TxScratch,
    ) {
        let c = self.counters(batch.pmd);
        match &self.kind {
            PortKind::Vhost(v) => v.transmit(batch, scratch, c),
            PortKind::Afxdp(x) => x.transmit(batch, c),
            PortKind::Tap(t) => t.transmit(batch, c),
        }
    }

    /// Prepares source queue `q` for a sleeping PMD: adds what wakes it to `set`.
    /// Returns true when work is already pending (the PMD must not sleep).
    pub fn arm_wakeup(&self, q: u16, set: &mut SleepSet) -> bool {
        match &self.kind {
            PortKind::Vhost(v) => v.arm_wakeup(q, set),
            PortKind::Afxdp(x) => {
                if let Some(s) = x.xsks.get(usize::from(q)) {
                    set.push_fd(s.fd());
                }
                false
            }
            PortKind::Tap(t) => {
                set.push_fd(t.poll_fd());
                false
            }
        }
    }

    /// The counters PMD `pmd` writes for this port.
    #[inline]
    pub fn counters(&self, pmd: usize) -> &PortCounters {
        &self.counters[pmd.min(self.counters.len() - 1)]
    }

    /// The port's counters summed over the PMDs.
    pub fn stats(&self) -> PortStats {
        let mut s = PortStats::zero();
        for c in self.counters.iter() {
            s.accumulate(c);
        }
        s
    }

    /// The load measured on source queue `q`.
    pub fn queue_load(&self, q: u16) -> Option<&QueueLoad> {
        self.queue_load.get(usize::from(q))
    }

    /// Records one non-empty burst of `packets` frames on queue `q` that took `cycles`.
    #[inline]
    pub fn account(&self, q: u16, packets: u64, cycles: u64) {
        if let Some(l) = self.queue_load.get(usize::from(q)) {
            l.packets.fetch_add(packets, Ordering::Relaxed);
            l.cycles.fetch_add(cycles, Ordering::Relaxed);
        }
    }

    /// The port's `show` view, running with `cfg` in domain `domain`: `pmd_of_queue`
    /// is the PMD polling each source queue (`usize::MAX`: none), `ovn` what the OVN
    /// chassis made of its `iface_id` (`None`: nothing yet).
    pub fn show(
        &self,
        cfg: &PortConfig,
        domain: DomainKey,
        pmd_of_queue: Vec<usize>,
        ovn: Option<&str>,
    ) -> ShowPort {
        let queues = self.rx_queues();
        let mut s = ShowPort {
            id: self.id,
            name: self.name.clone(),
            kind: cfg.kind.to_string(),
            path: cfg.path.display().to_string(),
            vlan: domain.vlan(),
            domain: domain.to_string(),
            link: if self.link_up() { "up" } else { "down" }.into(),
            connected: false,
            connections: 0,
            listening: false,
            socket_access: socket_access(cfg),
            protocol_errors: 0,
            queue_pairs: queues,
            ready_queue_pairs: Vec::new(),
            negotiated_features: Vec::new(),
            offloads: Vec::new(),
            offloads_offered: false,
            pmd_of_queue,
            queue_packets: (0..queues)
                .map(|q| {
                    self.queue_load(q)
                        .map_or(0, |l| l.packets.load(Ordering::Relaxed))
                })
                .collect(),
            migration: None,
            vrings: Vec::new(),
            iface: cfg.iface.clone(),
            afxdp: None,
            ovn: match &cfg.iface_id {
                Some(lsp) => format!(
                    "{lsp}: {}",
                    ovn.unwrap_or("waiting for the OVN Southbound database")
                ),
                None => String::new(),
            },
        };
        match &self.kind {
            PortKind::Vhost(v) => v.show(&mut s),
            PortKind::Afxdp(x) => s.afxdp = Some(x.show()),
            PortKind::Tap(_) => {}
        }
        s
    }

    /// Stops the port's service (vhost-user: closes the connection, the guest sees its
    /// link go down, and removes the socket; uplinks and taps: detaches the XDP program).
    /// The rest is released when the last reference goes.
    pub fn close(&self) {
        match &self.kind {
            PortKind::Vhost(v) => v.close(&self.name),
            PortKind::Afxdp(x) => x.detach(),
            PortKind::Tap(_) => {}
        }
    }
}

/// What opening a port needs besides its configuration.
#[derive(Debug, Clone, Default)]
pub struct OpenCtx {
    /// PMD threads (one set of counters each).
    pub pmds: usize,
    /// For an uplink that carries tunnel endpoints: its XDP filter.
    pub tep: Option<afxdp::xdp::TepFilter>,
    /// The overlay's inner MTU, for ports on a VNI without their own `mtu=`.
    pub inner_mtu: Option<u32>,
}

impl OpenCtx {
    /// What opening port `name` under `config` needs, with `pmds` PMD threads.
    pub fn new(config: &crate::config::Config, name: &str, pmds: usize) -> Self {
        OpenCtx {
            pmds,
            tep: crate::ports::afxdp::xdp::TepFilter::of(
                &config.geneve,
                name,
                config.bridges(name),
            ),
            inner_mtu: crate::config::geneve::inner_mtu(config),
        }
    }
}

/// A port could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("port {port}: {message}")]
pub struct OpenError {
    /// Port name.
    pub port: String,
    /// What failed.
    pub message: String,
}

/// The PMD-owned arrays a receive burst fills, allocated once per PMD.
pub struct RxScratch {
    /// The PMD receiving (whose counters are written).
    pub pmd: usize,
    /// The burst's good frames.
    pub pkts: Vec<crate::ports::frame::Pkt>,
    /// vhost-user: descriptor segments of the burst's chains.
    pub segs: Vec<vhost::virtq::Seg>,
    /// vhost-user: every chain taken, good or not, in ring order.
    pub heads: Vec<vhost::virtq::Chain>,
    /// AF_XDP: the burst's rx descriptors.
    pub xframes: Vec<afxdp::RxFrame>,
    /// tap: completed reads (buffer offset, bytes).
    pub tap_reads: Vec<(u32, u32)>,
}

impl RxScratch {
    /// The arrays of PMD `pmd`.
    pub fn new(pmd: usize) -> Self {
        use crate::ports::frame::BURST;
        RxScratch {
            pmd,
            pkts: Vec::with_capacity(BURST),
            segs: Vec::with_capacity(BURST * vhost::virtq::MAX_CHAIN_DESCS),
            heads: Vec::with_capacity(BURST),
            xframes: Vec::with_capacity(BURST),
            tap_reads: Vec::with_capacity(BURST),
        }
    }
}

/// What a sleeping PMD waits on: its wake eventfd, kick eventfds (read after waking) and
/// other pollable fds (AF_XDP sockets, tap rings; only polled). Holds its own duplicate
/// of every kick eventfd: SET_VRING_KICK closes a ring's old kick fd whenever the
/// front-end likes, and the number could be reused for another file (a socket whose
/// bytes the PMD would then read) while the PMD sleeps on it.
pub struct SleepSet {
    kicks: Vec<libc::pollfd>,
    others: Vec<libc::pollfd>,
    held: Vec<std::os::fd::OwnedFd>,
}

impl SleepSet {
    /// An empty set that wakes on `wake` (an eventfd).
    pub fn new(wake: i32) -> Self {
        SleepSet {
            kicks: vec![pollin(wake)],
            others: Vec::new(),
            held: Vec::new(),
        }
    }

    /// Adds an eventfd to drain after waking (the set owns it: a duplicate).
    pub fn push_eventfd(&mut self, fd: std::os::fd::OwnedFd) {
        self.kicks
            .push(pollin(std::os::fd::AsRawFd::as_raw_fd(&fd)));
        self.held.push(fd);
    }

    /// Adds an fd that is only polled for readability.
    pub fn push_fd(&mut self, fd: i32) {
        self.others.push(pollin(fd));
    }

    /// Sleeps until one of the fds is readable or `timeout_ms` passes; drains the
    /// eventfds that fired.
    pub fn wait(mut self, timeout_ms: i32) {
        let eventfds = self.kicks.len();
        let mut fds = std::mem::take(&mut self.kicks);
        fds.extend_from_slice(&self.others);
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs; every fd in it is
        // open for the duration of the call (the wake fd is owned by the PMD's shared
        // state, the kick fds by `held` (duplicates of the rings' own), the others by the ports the
        // PMD's topology snapshot holds).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n > 0 {
            for f in &fds[..eventfds] {
                if f.revents & libc::POLLIN != 0 {
                    let mut buf = [0u8; 8];
                    // SAFETY: reads 8 bytes into a valid 8-byte buffer from an open
                    // eventfd; the fd is non-blocking or known readable.
                    unsafe { libc::read(f.fd, buf.as_mut_ptr().cast(), 8) };
                }
            }
        }
    }
}

fn pollin(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// A server socket's mode and group as configured (`mode 0660 group libvirt-qemu`).
fn socket_access(cfg: &PortConfig) -> String {
    let mut parts = Vec::new();
    if let Some(m) = cfg.socket_mode {
        parts.push(format!("mode {m:04o}"));
    }
    if let Some(g) = &cfg.socket_group {
        parts.push(format!("group {g}"));
    }
    parts.join(" ")
}
