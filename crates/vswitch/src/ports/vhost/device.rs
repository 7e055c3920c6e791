//! The vhost-user-net device: protocol handling by vhost-user-backend, rings by the PMDs.
//!
//! vhost-user-backend runs the vhost-user protocol on its own thread per connection and
//! keeps each virtqueue in a [`VringRwLock`]. The switch does not use the library's
//! per-queue epoll workers (they would race the PMDs for kicks): the backend asks for
//! no queues on its worker (`queues_per_thread() == [0]`), and the PMD threads poll the
//! rings themselves. To get at the rings, the backend's vring type [`PortVring`] wraps
//! `VringRwLock` and hands each ring to the connection being built (see
//! [`Connection::establish`]), and wakes the PMDs whenever a ring's state changes.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::{info, warn};
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::Listener;
use vhost_user_backend::{
    MigrationRequest, VhostUserBackend, VhostUserDaemon, VringRwLock, VringStateGuard,
    VringStateMutGuard, VringT,
};
use virtio_bindings::virtio_config::{VIRTIO_F_NOTIFY_ON_EMPTY, VIRTIO_F_VERSION_1};
use virtio_bindings::virtio_net::{
    VIRTIO_NET_F_CSUM, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_ECN, VIRTIO_NET_F_GUEST_TSO4,
    VIRTIO_NET_F_GUEST_TSO6, VIRTIO_NET_F_HOST_ECN, VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO6,
    VIRTIO_NET_F_MQ, VIRTIO_NET_F_MRG_RXBUF, VIRTIO_NET_F_MTU,
};
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};
use virtio_queue::{Error as QueueError, QueueT};
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::eventfd::EventFd;

use crate::ports::vhost::dirty_log::VHOST_F_LOG_ALL;
use crate::ports::vhost::fault::FaultGuard;
use crate::ports::vhost::migration::{ring_size, Migration};
use crate::ports::vhost::virtq::{AtomicMem, Mem, SplitRing};

/// VHOST_USER_F_PROTOCOL_FEATURES (vhost-user spec): protocol features are negotiated.
const VHOST_USER_F_PROTOCOL_FEATURES: u32 = 30;

/// VIRTIO_F_IN_ORDER (virtio 1.2 §6): the device uses buffers in the order they were
/// made available. This device always does (it completes every chain within the burst
/// that took it, in ring order, on both transmit and receive queues), and drivers have
/// faster paths for it (DPDK's in-order rx/tx).
pub const VIRTIO_F_IN_ORDER: u32 = 35;

/// VIRTIO_F_RING_PACKED (virtio 1.2 §6): the packed virtqueue layout (§2.8), which
/// DPDK's virtio-user (`packed_vq=1`) and QEMU (`packed=on`) drivers can use.
pub const VIRTIO_F_RING_PACKED: u32 = 34;

/// Largest virtqueue size offered.
pub const MAX_QUEUE_SIZE: usize = 1024;

/// The virtio features this device offers on every port (virtio 1.2 §5.1.3). Checksum
/// and TSO offloads are added per port by [`offload_features`].
pub fn device_features() -> u64 {
    (1 << VIRTIO_F_VERSION_1)
        | (1 << VIRTIO_NET_F_MRG_RXBUF)
        | (1 << VIRTIO_RING_F_EVENT_IDX)
        | (1 << VIRTIO_RING_F_INDIRECT_DESC)
        | (1 << VIRTIO_NET_F_MQ)
        | (1 << VIRTIO_F_NOTIFY_ON_EMPTY)
        | (1 << VIRTIO_F_IN_ORDER)
        | (1 << VIRTIO_F_RING_PACKED)
        | (1 << VHOST_USER_F_PROTOCOL_FEATURES)
        | (1 << VHOST_F_LOG_ALL)
}

/// The checksum and TSO features offered on ports with `offloads=on`, the default
/// (virtio 1.2 §5.1.3): the device takes partially checksummed and TSO frames (CSUM,
/// HOST_TSO4/6, HOST_ECN for TSO frames with CWR set) and gives them to drivers that
/// accept them (GUEST_CSUM, GUEST_TSO4/6, GUEST_ECN); for the others it completes
/// checksums and segments in software (CWR on the first segment only).
pub fn offload_features() -> u64 {
    (1 << VIRTIO_NET_F_CSUM)
        | (1 << VIRTIO_NET_F_HOST_ECN)
        | (1 << VIRTIO_NET_F_GUEST_ECN)
        | (1 << VIRTIO_NET_F_GUEST_CSUM)
        | (1 << VIRTIO_NET_F_HOST_TSO4)
        | (1 << VIRTIO_NET_F_HOST_TSO6)
        | (1 << VIRTIO_NET_F_GUEST_TSO4)
        | (1 << VIRTIO_NET_F_GUEST_TSO6)
}

/// Names of the negotiated feature bits, for `vswitchctl show`.
pub fn feature_names(bits: u64) -> Vec<&'static str> {
    const NAMES: &[(u32, &str)] = &[
        (VIRTIO_NET_F_CSUM, "CSUM"),
        (VIRTIO_NET_F_GUEST_CSUM, "GUEST_CSUM"),
        (VIRTIO_NET_F_GUEST_TSO4, "GUEST_TSO4"),
        (VIRTIO_NET_F_GUEST_TSO6, "GUEST_TSO6"),
        (VIRTIO_NET_F_HOST_TSO4, "HOST_TSO4"),
        (VIRTIO_NET_F_HOST_TSO6, "HOST_TSO6"),
        (VIRTIO_NET_F_GUEST_ECN, "GUEST_ECN"),
        (VIRTIO_NET_F_HOST_ECN, "HOST_ECN"),
        (VIRTIO_F_VERSION_1, "VERSION_1"),
        (VIRTIO_NET_F_MRG_RXBUF, "MRG_RXBUF"),
        (VIRTIO_RING_F_EVENT_IDX, "EVENT_IDX"),
        (VIRTIO_RING_F_INDIRECT_DESC, "INDIRECT_DESC"),
        (VIRTIO_NET_F_MQ, "MQ"),
        (VIRTIO_NET_F_MTU, "MTU"),
        (VIRTIO_F_NOTIFY_ON_EMPTY, "NOTIFY_ON_EMPTY"),
        (VIRTIO_F_IN_ORDER, "IN_ORDER"),
        (VIRTIO_F_RING_PACKED, "RING_PACKED"),
        (VHOST_USER_F_PROTOCOL_FEATURES, "PROTOCOL_FEATURES"),
        (VHOST_F_LOG_ALL, "LOG_ALL"),
    ];
    NAMES
        .iter()
        .filter(|(b, _)| bits & (1u64 << b) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// Wakes sleeping PMD threads when a ring or a connection changes.
#[derive(Debug, Default)]
pub struct Wakers {
    fds: Mutex<Vec<Arc<EventFd>>>,
}

impl Wakers {
    /// Registers one PMD's wake eventfd.
    pub fn register(&self, fd: Arc<EventFd>) {
        self.fds.lock().unwrap_or_else(|e| e.into_inner()).push(fd);
    }

    /// Wakes every PMD.
    pub fn wake_all(&self) {
        for fd in self.fds.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = fd.write(1);
        }
    }
}

/// The rings of one connection, in virtqueue order: rx0, tx0, rx1, tx1, ...
/// (virtio 1.2 §5.1.2).
pub struct Connection {
    /// The virtqueues.
    pub vrings: Vec<PortVring>,
    /// Guest memory; replaced by SET_MEM_TABLE, loaded once per burst.
    pub mem: AtomicMem,
    /// The features the driver acknowledged (SET_FEATURES); shared with the backend.
    pub acked_features: Arc<AtomicU64>,
    /// Set once SET_FEATURES arrived, cleared by RESET_DEVICE; shared with the backend.
    pub features_set: Arc<AtomicBool>,
    /// Unique id of this connection, for PMD bookkeeping.
    pub id: u64,
    /// Its guest memory regions, registered for SIGBUS containment ([`super::fault`]).
    pub faults: Arc<FaultGuard>,
    /// Live migration: the dirty log, announcements ([`super::migration`]).
    pub migration: Arc<Migration>,
    /// Memory tables received (SET_MEM_TABLE) with at least one region; shared with the
    /// backend.
    pub mem_tables: Arc<AtomicU64>,
    /// Housekeeping ticks seen with features negotiated but no memory table.
    pub(crate) memless_ticks: AtomicU64,
    /// The missing memory table was reported.
    pub(crate) memless_reported: AtomicBool,
}

/// Housekeeping ticks (seconds) after feature negotiation without a memory table before
/// the connection is reported: QEMU sends SET_MEM_TABLE right after SET_FEATURES when it
/// can.
const MEMLESS_TICKS: u64 = 3;

impl Connection {
    /// Reports, once, a connection that negotiated features but has no usable guest
    /// memory after `MEMLESS_TICKS` calls (one a second), or at its end (`ending`):
    /// QEMU sends no SET_MEM_TABLE when the guest's memory is not shared (no `share=on`
    /// backend), and then runs virtio-net in userspace without the switch.
    pub fn report_missing_memory(&self, port: &str, ending: bool) {
        if !self.features_set.load(Ordering::Relaxed)
            || self.mem_tables.load(Ordering::Relaxed) > 0
            || self.memless_reported.load(Ordering::Relaxed)
        {
            return;
        }
        if !ending && self.memless_ticks.fetch_add(1, Ordering::Relaxed) + 1 < MEMLESS_TICKS {
            return;
        }
        self.memless_reported.store(true, Ordering::Relaxed);
        warn!(
            port,
            conn = self.id,
            "vhost-user driver negotiated features but never shared its guest memory (no \
             usable SET_MEM_TABLE): the guest's memory is most likely not shared. QEMU needs \
             a shared memory backend (-object memory-backend-memfd,id=mem,size=...,share=on \
             -numa node,memdev=mem, or -machine memory-backend=mem); libvirt needs \
             <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>. \
             Without it QEMU falls back to virtio-net in userspace and no frame reaches the \
             switch"
        );
    }

    /// Length of the virtio-net header on this connection: 12 bytes with VERSION_1 or
    /// MRG_RXBUF (`struct virtio_net_hdr_mrg_rxbuf`), else 10 (virtio 1.2 §5.1.6).
    pub fn hdr_len(&self) -> u32 {
        let f = self.acked_features.load(Ordering::Relaxed);
        if f & ((1 << VIRTIO_F_VERSION_1) | (1 << VIRTIO_NET_F_MRG_RXBUF)) != 0 {
            12
        } else {
            10
        }
    }

    /// Whether the driver acked feature bit `bit`.
    pub fn has(&self, bit: u32) -> bool {
        self.acked_features.load(Ordering::Relaxed) & (1u64 << bit) != 0
    }

    /// Whether the rings are packed (VIRTIO_F_RING_PACKED acked): virtio 1.2 §2.8.
    #[inline]
    pub fn packed(&self) -> bool {
        self.has(VIRTIO_F_RING_PACKED)
    }

    /// Whether the driver accepted mergeable rx buffers.
    pub fn mergeable(&self) -> bool {
        self.acked_features.load(Ordering::Relaxed) & (1 << VIRTIO_NET_F_MRG_RXBUF) != 0
    }

    /// Queue pairs whose rings are both ready and enabled.
    pub fn ready_pairs(&self) -> Vec<u16> {
        (0..self.vrings.len() / 2)
            .filter(|&i| self.vring_ready(2 * i) && self.vring_ready(2 * i + 1))
            .map(|i| i as u16)
            .collect()
    }

    /// Whether virtqueue `i` is ready and enabled.
    pub fn vring_ready(&self, i: usize) -> bool {
        self.vrings.get(i).is_some_and(|v| {
            let st = v.get_ref();
            st.get_queue().ready() && st.is_enabled()
        })
    }

    /// Each virtqueue's state for `vswitchctl show`: the switch's positions, and for a
    /// split ring the driver's read from guest memory.
    pub fn vring_views(&self) -> Vec<crate::ports::show::ShowVring> {
        let mem = self.mem.memory();
        let packed = self.packed();
        self.vrings
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let st = v.get_ref();
                let q = st.get_queue();
                let mut view = crate::ports::show::ShowVring {
                    index: i as u16,
                    ready: q.ready(),
                    enabled: st.is_enabled(),
                    kick_fd: st.get_kick().is_some(),
                    call_fd: st.get_call().is_some(),
                    size: q.size(),
                    next_avail: q.next_avail(),
                    next_used: q.next_used(),
                    ..Default::default()
                };
                if let Some(ring) = (!packed).then(|| SplitRing::new(&mem, q)).flatten() {
                    let (avail, used, event) = ring.driver_view();
                    view.avail_idx = Some(avail);
                    view.used_idx = Some(used);
                    view.used_event = event;
                }
                view
            })
            .collect()
    }

    /// Link is up when the driver finished feature negotiation and queue pair 0 runs.
    pub fn link_up(&self) -> bool {
        self.features_set.load(Ordering::Relaxed) && self.vring_ready(0) && self.vring_ready(1)
    }
}

thread_local! {
    /// Rings created by `VhostUserDaemon::new` on this thread, for `Connection::establish`.
    static CAPTURE: RefCell<Option<(Arc<Wakers>, Vec<PortVring>)>> = const { RefCell::new(None) };
}

/// A virtqueue as vhost-user-backend sees it: a [`VringRwLock`] that also wakes the
/// PMDs when its state changes, so they re-read kick fds and readiness.
#[derive(Clone)]
pub struct PortVring {
    inner: VringRwLock<AtomicMem>,
    wakers: Option<Arc<Wakers>>,
    /// Virtqueue index: even for receive queues, odd for transmit (virtio 1.2 §5.1.2).
    index: usize,
}

impl PortVring {
    /// A stand-alone ring (for tests and benches), not attached to any PMD.
    pub fn standalone(mem: AtomicMem, max_size: u16) -> Result<Self, QueueError> {
        Ok(PortVring {
            inner: VringRwLock::new(mem, max_size)?,
            wakers: None,
            index: 0,
        })
    }

    fn changed(&self) {
        if let Some(w) = &self.wakers {
            w.wake_all();
        }
    }
}

impl<'a> VringStateGuard<'a, AtomicMem> for PortVring {
    type G = <VringRwLock<AtomicMem> as VringStateGuard<'a, AtomicMem>>::G;
}

impl<'a> VringStateMutGuard<'a, AtomicMem> for PortVring {
    type G = <VringRwLock<AtomicMem> as VringStateMutGuard<'a, AtomicMem>>::G;
}

impl VringT<AtomicMem> for PortVring {
    fn new(mem: AtomicMem, max_queue_size: u16) -> Result<Self, QueueError> {
        let inner = VringRwLock::new(mem, max_queue_size)?;
        let v = CAPTURE.with(|c| {
            let mut c = c.borrow_mut();
            let wakers = c.as_ref().map(|(w, _)| w.clone());
            let index = c.as_ref().map_or(0, |(_, l)| l.len());
            let v = PortVring {
                inner,
                wakers,
                index,
            };
            if let Some((_, list)) = c.as_mut() {
                list.push(v.clone());
            }
            v
        });
        Ok(v)
    }
    fn get_ref(&self) -> <Self as VringStateGuard<'_, AtomicMem>>::G {
        self.inner.get_ref()
    }
    fn get_mut(&self) -> <Self as VringStateMutGuard<'_, AtomicMem>>::G {
        self.inner.get_mut()
    }
    fn add_used(&self, desc_index: u16, len: u32) -> Result<(), QueueError> {
        self.inner.add_used(desc_index, len)
    }
    fn signal_used_queue(&self) -> io::Result<()> {
        self.inner.signal_used_queue()
    }
    fn enable_notification(&self) -> Result<bool, QueueError> {
        self.inner.enable_notification()
    }
    fn disable_notification(&self) -> Result<(), QueueError> {
        self.inner.disable_notification()
    }
    fn needs_notification(&self) -> Result<bool, QueueError> {
        self.inner.needs_notification()
    }
    fn set_enabled(&self, enabled: bool) {
        self.inner.set_enabled(enabled);
        self.changed();
    }
    fn set_queue_info(&self, desc: u64, avail: u64, used: u64) -> Result<(), QueueError> {
        self.inner.set_queue_info(desc, avail, used)
    }
    fn queue_next_avail(&self) -> u16 {
        self.inner.queue_next_avail()
    }
    fn set_queue_next_avail(&self, base: u16) {
        self.inner.set_queue_next_avail(base)
    }
    fn set_queue_next_used(&self, idx: u16) {
        // vhost-user-backend calls this from SET_VRING_ADDR with the ring's own used.idx.
        // This device completes every chain within the burst that took it, so nothing is
        // ever in flight and the next available position is the used index. A front-end
        // that reconnects may send a stale SET_VRING_BASE (DPDK virtio-user in server
        // mode sends 0); like DPDK's vhost library, trust the ring.
        self.inner.set_queue_next_used(idx);
        let base = self.inner.queue_next_avail();
        if base != idx {
            info!(
                base,
                used_idx = idx,
                "ring base differs from used index; resuming at used index"
            );
            self.inner.set_queue_next_avail(idx);
        }
        if self.index.is_multiple_of(2) {
            // Receive queues: the device never waits for rx buffers (a frame with no
            // buffer is dropped and counted), so ask the driver not to kick when it
            // refills; each kick is a system call in the guest. Transmit queues are
            // handled by the PMD, which enables kicks only before it sleeps.
            let _ = self.inner.disable_notification();
        }
    }
    fn queue_used_idx(&self) -> Result<u16, QueueError> {
        self.inner.queue_used_idx()
    }
    fn set_queue_size(&self, num: u16) {
        self.inner.set_queue_size(num)
    }
    fn set_queue_event_idx(&self, enabled: bool) {
        self.inner.set_queue_event_idx(enabled)
    }
    fn set_queue_ready(&self, ready: bool) {
        self.inner.set_queue_ready(ready);
        self.changed();
    }
    fn set_kick(&self, file: Option<File>) {
        self.inner.set_kick(file);
        self.changed();
    }
    fn read_kick(&self) -> io::Result<bool> {
        self.inner.read_kick()
    }
    fn set_call(&self, file: Option<File>) {
        // One interrupt on every new call eventfd, as QEMU's libvhost-user does ("in case
        // of I/O hang after reconnecting"): used elements published while the front-end
        // had no eventfd here, or whose interrupt its previous process never delivered
        // (live migration switches QEMU processes under a running guest), are otherwise
        // never announced; with EVENT_IDX no later batch interrupts either, once the used
        // index is past the driver's used_event, and a guest that waits for one stalls
        // with a full ring. A spurious interrupt costs the driver one look at the ring.
        let some = file.is_some();
        self.inner.set_call(file);
        if some {
            let _ = self.inner.signal_used_queue();
        }
    }
    fn set_err(&self, file: Option<File>) {
        self.inner.set_err(file)
    }
}

/// The vhost-user-net backend of one connection.
#[derive(Clone)]
pub struct NetBackend {
    queue_pairs: u16,
    offloads: bool,
    /// Offer VIRTIO_NET_F_MTU (virtio 1.2 §5.1.3): ports on a VNI, whose frames must fit
    /// the underlay. The value a guest reads comes from its VMM's config space (QEMU's
    /// `host_mtu=`), which QEMU only passes on when the backend offers the feature.
    mtu_advice: bool,
    acked: Arc<AtomicU64>,
    features_set: Arc<AtomicBool>,
    wakers: Arc<Wakers>,
    /// The guest memory regions, registered for SIGBUS containment.
    faults: Arc<FaultGuard>,
    /// Live migration state, shared with the connection.
    migration: Arc<Migration>,
    /// Memory tables with regions received, shared with the connection.
    mem_tables: Arc<AtomicU64>,
    /// The port's name, for logs.
    name: Arc<str>,
}

impl VhostUserBackend for NetBackend {
    type Bitmap = ();
    type Vring = PortVring;

    fn num_queues(&self) -> usize {
        2 * usize::from(self.queue_pairs)
    }
    fn max_queue_size(&self) -> usize {
        MAX_QUEUE_SIZE
    }
    fn features(&self) -> u64 {
        device_features()
            | if self.offloads { offload_features() } else { 0 }
            | if self.mtu_advice {
                1 << VIRTIO_NET_F_MTU
            } else {
                0
            }
    }
    fn acked_features(&self, features: u64) {
        self.acked.store(features, Ordering::Relaxed);
        self.migration
            .set_log_all(features & (1 << VHOST_F_LOG_ALL) != 0);
        self.features_set.store(true, Ordering::Relaxed);
        self.wakers.wake_all();
    }
    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::LOG_SHMFD
            | VhostUserProtocolFeatures::RARP
    }
    fn reset_device(&self) {
        self.features_set.store(false, Ordering::Relaxed);
        self.migration.set_log_all(false);
        self.wakers.wake_all();
    }
    fn set_event_idx(&self, _enabled: bool) {}
    fn update_memory(&self, mem: GuestMemoryAtomic<Mem>) -> io::Result<()> {
        // The AtomicMem we handed to VhostUserDaemon::new is the one the library
        // updates; PMDs load it once per burst, so a new table applies from the next
        // burst and a running burst keeps the old mapping alive until it ends.
        let mem = vm_memory::GuestAddressSpace::memory(&mem).into_inner();
        let end = vm_memory::GuestMemoryBackend::iter(&*mem)
            .map(|r| {
                use vm_memory::GuestMemoryRegion;
                r.start_addr().0 + r.len()
            })
            .max()
            .unwrap_or(0);
        if end > 0 {
            self.mem_tables.fetch_add(1, Ordering::Relaxed);
        }
        self.migration.set_mem_end(end);
        self.faults.track(mem);
        self.wakers.wake_all();
        Ok(())
    }
    fn exit_event(
        &self,
        _thread_index: usize,
    ) -> Option<(
        vmm_sys_util::event::EventConsumer,
        vmm_sys_util::event::EventNotifier,
    )> {
        // Without an exit event the library's worker thread never ends, and dropping the
        // daemon after a disconnect would wait for it forever.
        use vmm_sys_util::event::EventFlag;
        vmm_sys_util::event::new_event_consumer_and_notifier(
            EventFlag::NONBLOCK | EventFlag::CLOEXEC,
        )
        .ok()
    }
    fn stop_vring(&self, index: u32) -> io::Result<()> {
        // GET_VRING_BASE: the ring is stopped (no batch runs on it any more). While
        // logging, the whole used ring is marked: it covers the library's own writes.
        if let Some(v) = self.migration.vring(index as usize) {
            let packed = self.acked.load(Ordering::Relaxed) & (1 << VIRTIO_F_RING_PACKED) != 0;
            let desc = packed.then(|| v.get_ref().get_queue().desc_table());
            self.migration.ring_stopped(index, ring_size(&v), desc);
        }
        Ok(())
    }
    fn migration(&self, request: MigrationRequest<'_>) -> Option<io::Result<()>> {
        Some(self.migrate(request))
    }
    fn queues_per_thread(&self) -> Vec<u64> {
        // No queues on the library's worker: PMD threads own the rings.
        vec![0]
    }
    fn handle_event(
        &self,
        _device_event: u16,
        _evset: EventSet,
        _vrings: &[PortVring],
        _thread_id: usize,
    ) -> io::Result<()> {
        Ok(())
    }
}

impl NetBackend {
    /// Handles one migration request (see [`super::migration`]); a refused log is
    /// logged with the reason, and the error closes the connection.
    fn migrate(&self, request: MigrationRequest<'_>) -> io::Result<()> {
        match request {
            MigrationRequest::LogBase { log, file } => {
                let r = self.migration.set_log(file, log.mmap_offset, log.mmap_size);
                match &r {
                    Ok(()) => info!(
                        port = %self.name,
                        bytes = log.mmap_size,
                        "dirty log set: logging the guest pages the switch writes"
                    ),
                    Err(e) => warn!(port = %self.name, error = %e, "SET_LOG_BASE refused"),
                }
                r
            }
            MigrationRequest::LogFd(file) => {
                self.migration.set_log_fd(file);
                Ok(())
            }
            MigrationRequest::VringLog { index, log } => self.migration.set_used_log(index, log),
            MigrationRequest::SendRarp(mac) => {
                info!(
                    port = %self.name,
                    mac = %crate::config::MacAddr(mac),
                    "announcing the VM's MAC after migration (SEND_RARP)"
                );
                self.migration.request_announce(mac);
                self.wakers.wake_all();
                Ok(())
            }
        }
    }
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The driver closed the socket (or the port was shut down).
    Disconnected,
    /// vswitchd closed it: a request broke the protocol or asked for what was not offered.
    ProtocolError,
}

/// How a connection attaches.
pub enum Endpoint<'a> {
    /// Accept on this listener (server mode); the flag is set while the connection's
    /// device is ready and waits for a driver to connect.
    Listen(&'a mut Listener, &'a AtomicBool),
    /// Connect to this socket path (client mode).
    Connect(&'a str),
}

static NEXT_CONN_ID: AtomicU64 = AtomicU64::new(1);

impl Connection {
    /// Builds a device for `queue_pairs` queue pairs, attaches it through `endpoint`,
    /// publishes it with `publish` once attached, and serves it until the other side goes
    /// away or `shutdown` is set. Returns how it ended, after `publish(None)` was called.
    ///
    /// # Errors
    /// Attaching failed (the socket could not be accepted or connected).
    #[allow(clippy::too_many_arguments)]
    pub fn establish(
        name: &str,
        queue_pairs: u16,
        offloads: bool,
        mtu_advice: bool,
        wakers: &Arc<Wakers>,
        endpoint: Endpoint<'_>,
        publish: &dyn Fn(Option<Arc<Connection>>),
        daemon_slot: &Mutex<Option<vhost_user_backend::ShutdownHandle>>,
    ) -> Result<Ending, vhost_user_backend::Error> {
        let mem = GuestMemoryAtomic::new(Mem::new());
        let acked = Arc::new(AtomicU64::new(0));
        let features_set = Arc::new(AtomicBool::new(false));
        let faults = Arc::new(FaultGuard::default());
        let migration = Arc::new(Migration::new(2 * usize::from(queue_pairs)));
        let mem_tables = Arc::new(AtomicU64::new(0));
        let backend = NetBackend {
            mem_tables: mem_tables.clone(),
            faults: faults.clone(),
            migration: migration.clone(),
            name: name.into(),
            queue_pairs,
            offloads,
            mtu_advice,
            acked: acked.clone(),
            features_set: features_set.clone(),
            wakers: wakers.clone(),
        };
        CAPTURE.with(|c| *c.borrow_mut() = Some((wakers.clone(), Vec::new())));
        let daemon = VhostUserDaemon::new(format!("vhu-{name}"), backend.clone(), mem.clone());
        let vrings = CAPTURE.with(|c| c.borrow_mut().take().map(|(_, v)| v).unwrap_or_default());
        let mut daemon = daemon?;
        migration.attach(vrings.clone());
        let conn = Arc::new(Connection {
            migration,
            vrings,
            mem,
            acked_features: acked,
            features_set,
            id: NEXT_CONN_ID.fetch_add(1, Ordering::Relaxed),
            faults,
            mem_tables,
            memless_ticks: AtomicU64::new(0),
            memless_reported: AtomicBool::new(false),
        });
        let attach = match endpoint {
            Endpoint::Listen(l, listening) => {
                listening.store(true, Ordering::Release);
                let r = daemon.start(l);
                listening.store(false, Ordering::Release);
                r
            }
            Endpoint::Connect(p) => daemon.start_client(p),
        };
        if let Err(e) = attach {
            for h in daemon.get_epoll_handlers() {
                h.send_exit_event();
            }
            return Err(e);
        }
        *daemon_slot.lock().unwrap_or_else(|e| e.into_inner()) = daemon.shutdown_handle();
        info!(
            port = name,
            conn = conn.id,
            "vhost-user connection established"
        );
        publish(Some(conn.clone()));
        let r = daemon.wait();
        *daemon_slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
        conn.report_missing_memory(name, true);
        publish(None);
        for h in daemon.get_epoll_handlers() {
            h.send_exit_event();
        }
        use vhost::vhost_user::Error as VuError;
        use vhost_user_backend::Error as BeError;
        match r {
            Ok(())
            | Err(BeError::HandleRequest(VuError::Disconnected | VuError::PartialMessage)) => {
                info!(port = name, conn = conn.id, "vhost-user peer disconnected");
                Ok(Ending::Disconnected)
            }
            Err(BeError::HandleRequest(VuError::InvalidParam)) => {
                warn!(
                    port = name,
                    queue_pairs,
                    "vhost-user connection closed: a request with invalid parameters (a \
                     driver asking for more queue pairs than the port's queues=N, a protocol \
                     feature that was not offered, a memory region past its file's end)"
                );
                Ok(Ending::ProtocolError)
            }
            Err(e) => {
                warn!(port = name, error = %e, "vhost-user connection closed on a protocol error");
                Ok(Ending::ProtocolError)
            }
        }
    }
}
