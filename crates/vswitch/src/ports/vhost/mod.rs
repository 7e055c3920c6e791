//! vhost-user ports: a VM's virtio-net device over a vhost-user socket.
//!
//! - [`device`]: the device on rust-vmm's `vhost-user-backend` (protocol handling on
//!   that crate's blocking threads, one set per connection);
//! - [`virtq`]: burst access to the virtqueues, split and packed;
//! - [`burst`]: the switch's receive side, the guest's transmit queues;
//! - [`deliver`]: the switch's transmit side, copies into the guest's receive queues;
//! - [`migration`] and [`dirty_log`]: live migration (dirty-page logging, the MAC
//!   announcement after switch-over).
//!
//! The port outlives its connections: a guest that disconnects (reboots, is killed)
//! leaves the port in place, and the next connection is served the same way. The
//! service ([`VhostPort::serve_once`]) runs one connection at a time until
//! [`VhostPort::close`].

pub mod burst;
pub mod deliver;
pub mod device;
pub mod dirty_log;
pub mod fault;
pub mod idle;
pub mod migration;
pub mod virtq;

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use tracing::{info, warn};
use vhost::vhost_user::Listener;
use vhost_user_backend::ShutdownHandle;
use virtio_bindings::virtio_net::{
    VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_ECN, VIRTIO_NET_F_GUEST_TSO4,
    VIRTIO_NET_F_GUEST_TSO6,
};

use crate::config::{PortConfig, PortType};
use crate::ports::frame::{TxOffloads, TxPlan};
use crate::ports::SleepSet;
use device::{Connection, Endpoint, Wakers};

/// A vhost-user port: its socket, and the connection currently attached.
pub struct VhostPort {
    /// Server (vswitchd listens) or client (vswitchd connects).
    pub mode: PortType,
    /// The socket.
    pub path: PathBuf,
    /// Queue pairs offered (VIRTIO_NET_F_MQ).
    pub queue_pairs: u16,
    /// Checksum and TSO offloads offered.
    pub offloads: bool,
    /// VIRTIO_NET_F_MTU offered (the port is on a VNI).
    pub mtu_advice: bool,
    /// The attached driver, if any; PMDs load it once per burst.
    pub conn: ArcSwapOption<Connection>,
    /// Connections accepted or made so far.
    pub connections: AtomicU64,
    /// Connections vswitchd closed because the driver broke the protocol.
    pub protocol_errors: AtomicU64,
    /// Server mode: the next connection's device is ready and the socket waits for a
    /// driver (false while a driver is attached, and between connections).
    pub listening: AtomicBool,
    /// Per queue pair: the connection whose transmit-queue kicks were last disabled
    /// (the polling PMD disables them once per connection).
    kicks_off_for: Box<[AtomicU64]>,
    /// Per queue pair: the impossible transmit `avail.idx` last counted, with its
    /// connection (`id << 16 | idx`), so that one is counted once, not every poll.
    bad_avail_for: Box<[AtomicU64]>,
    /// Server mode: the socket file's group and mode.
    access: crate::sys::SocketAccess,
    /// Server mode: the bound socket, used by the service.
    listener: Mutex<Option<Listener>>,
    /// Its fd, to unblock an accept when the port is closed (-1: none).
    listener_fd: std::sync::atomic::AtomicI32,
    /// Set by [`VhostPort::close`].
    closed: AtomicBool,
    /// The running connection's shutdown handle.
    shutdown: Mutex<Option<ShutdownHandle>>,
}

impl VhostPort {
    /// The port for `cfg`, not yet bound (see [`VhostPort::bind`]).
    pub fn open(cfg: &PortConfig) -> Result<Self, String> {
        let gid = match &cfg.socket_group {
            Some(g) => Some(
                crate::sys::group_id(g)
                    .ok_or_else(|| format!("socket_group={g}: no such group on this host"))?,
            ),
            None => None,
        };
        Ok(VhostPort {
            access: crate::sys::SocketAccess {
                gid,
                mode: cfg.socket_mode,
            },
            mode: cfg.kind,
            path: cfg.path.clone(),
            queue_pairs: cfg.queues,
            offloads: cfg.offloads,
            mtu_advice: cfg.on_overlay(),
            conn: ArcSwapOption::empty(),
            connections: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            listening: AtomicBool::new(false),
            kicks_off_for: (0..cfg.queues).map(|_| AtomicU64::new(0)).collect(),
            bad_avail_for: (0..cfg.queues).map(|_| AtomicU64::new(0)).collect(),
            listener: Mutex::new(None),
            listener_fd: std::sync::atomic::AtomicI32::new(-1),
            closed: AtomicBool::new(false),
            shutdown: Mutex::new(None),
        })
    }

    /// Server mode: creates and binds the socket (replacing a stale file) with its group
    /// and mode set before it appears under its name, so QEMU never finds it with other
    /// permissions. Client mode: nothing.
    ///
    /// # Errors
    /// The socket could not be created, or its group or mode set.
    pub fn bind(&self) -> Result<(), vhost::vhost_user::Error> {
        if self.mode != PortType::VhostUser {
            return Ok(());
        }
        let l = crate::sys::bind_unix(&self.path, self.access)
            .map_err(vhost::vhost_user::Error::SocketError)?;
        // The port removes the file when it is closed ([`VhostPort::close`]).
        let l = Listener::from(l);
        self.listener_fd.store(l.as_raw_fd(), Ordering::Release);
        *self.listener.lock().unwrap_or_else(|e| e.into_inner()) = Some(l);
        Ok(())
    }

    /// Whether the port was closed (its service must stop).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether a driver finished feature negotiation and queue pair 0 runs.
    pub fn link_up(&self) -> bool {
        self.conn.load().as_ref().is_some_and(|c| c.link_up())
    }

    /// What the attached driver takes: the offloads it negotiated (GUEST_*), and
    /// whether it has several receive queue pairs (frames spread by flow hash).
    #[inline]
    pub fn tx_plan(&self) -> TxPlan {
        match self.conn.load().as_ref() {
            Some(c) => TxPlan {
                takes: TxOffloads {
                    csum: c.has(VIRTIO_NET_F_GUEST_CSUM),
                    tso4: c.has(VIRTIO_NET_F_GUEST_TSO4),
                    tso6: c.has(VIRTIO_NET_F_GUEST_TSO6),
                    ecn: c.has(VIRTIO_NET_F_GUEST_ECN),
                },
                spreads: c.vrings.len() / 2 > 1,
            },
            None => TxPlan::default(),
        }
    }

    /// Serves one connection: accepts (server) or connects (client), publishes it to the
    /// PMDs through [`VhostPort::conn`], and returns when it ends. `changed(up)` is
    /// called after the connection is published and after it is withdrawn.
    ///
    /// # Errors
    /// The socket could not be accepted or connected (a client retries later).
    pub fn serve_once(
        &self,
        name: &str,
        wakers: &Arc<Wakers>,
        changed: &dyn Fn(bool),
    ) -> Result<(), vhost_user_backend::Error> {
        let publish = |c: Option<Arc<Connection>>| {
            let up = c.is_some();
            if up {
                self.connections.fetch_add(1, Ordering::Relaxed);
            }
            self.conn.store(c);
            changed(up);
        };
        let path = self.path.display().to_string();
        let mut listener = self.listener.lock().unwrap_or_else(|e| e.into_inner());
        let endpoint = match listener.as_mut() {
            Some(l) => Endpoint::Listen(l, &self.listening),
            None => Endpoint::Connect(&path),
        };
        let ending = Connection::establish(
            name,
            self.queue_pairs,
            self.offloads,
            self.mtu_advice,
            wakers,
            endpoint,
            &publish,
            &self.shutdown,
        )?;
        if ending == device::Ending::ProtocolError {
            self.protocol_errors.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Fills the vhost-user part of a `show` view: the driver's negotiated features and
    /// offloads, the queue pairs it runs, the connections so far.
    pub fn show(&self, s: &mut crate::ports::show::ShowPort) {
        s.queue_pairs = self.queue_pairs;
        s.offloads_offered = self.offloads;
        s.connections = self.connections.load(Ordering::Relaxed);
        s.protocol_errors = self.protocol_errors.load(Ordering::Relaxed);
        s.listening = self.listening.load(Ordering::Acquire);
        let Some(c) = self.conn.load_full() else {
            return;
        };
        s.connected = true;
        s.negotiated_features = device::feature_names(c.acked_features.load(Ordering::Relaxed))
            .into_iter()
            .map(String::from)
            .collect();
        s.offloads = s
            .negotiated_features
            .iter()
            .filter(|f| f.contains("CSUM") || f.contains("TSO") || f.contains("ECN"))
            .cloned()
            .collect();
        s.ready_queue_pairs = c.ready_pairs();
        s.vrings = c.vring_views();
        let m = &c.migration;
        s.migration = Some(crate::ports::show::ShowMigration {
            logging: m.is_logging(),
            pages_marked: m.pages_marked(),
            logs_set: m.logs_set(),
            announced: m.announced(),
        });
    }

    /// Closes the connection if its guest memory faulted under the switch (the front-end
    /// truncated a file it shared): counted as a protocol error; the port serves the
    /// next connection. Returns whether it did.
    pub fn close_if_faulted(&self, name: &str) -> bool {
        let Some(c) = self.conn.load_full() else {
            return false;
        };
        if !c.faults.faulted() && !c.migration.log_faulted() {
            return false;
        }
        warn!(
            port = name,
            conn = c.id,
            "vhost-user connection closed: its guest memory vanished under the switch (a \
             shared file was truncated); the accesses were contained"
        );
        self.protocol_errors.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = self
            .shutdown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            h.shutdown();
        }
        true
    }

    /// Stops the service: the connection is closed (the guest sees its link go down),
    /// a blocked accept returns, and a server socket is removed.
    pub fn close(&self, name: &str) {
        self.closed.store(true, Ordering::Release);
        if let Some(h) = self
            .shutdown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            h.shutdown();
        }
        let fd = self.listener_fd.swap(-1, Ordering::AcqRel);
        if fd >= 0 {
            // SAFETY: shutdown(2) on the listener's fd, which stays open (the Listener
            // is dropped with the port); it makes a blocked accept return EINVAL.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            if let Err(e) = std::fs::remove_file(&self.path) {
                warn!(port = name, path = %self.path.display(), error = %e, "cannot remove socket");
            }
        }
        info!(port = name, "vhost-user port closed");
    }

    /// Enables kicks on transmit queue `q` and adds its kick fd to `set`; returns true
    /// when buffers arrived meanwhile (the PMD must not sleep).
    pub fn arm_wakeup(&self, q: u16, set: &mut SleepSet) -> bool {
        use vhost_user_backend::VringT;
        use virtio_queue::QueueT;
        if let Some(k) = self.kicks_off_for.get(usize::from(q)) {
            k.store(0, Ordering::Relaxed);
        }
        let Some(conn) = self.conn.load_full() else {
            return false;
        };
        let Some(vring) = conn.vrings.get(2 * usize::from(q) + 1) else {
            return false;
        };
        let st = vring.get_ref();
        if !st.get_queue().ready() || !st.is_enabled() {
            return false;
        }
        let pending = {
            use vm_memory::GuestAddressSpace;
            let mem = conn.mem.memory();
            let (queue, next) = (st.get_queue(), st.get_queue().next_avail());
            if conn.packed() {
                virtq::PackedRing::new(&mem, queue)
                    .is_some_and(|ring| set_kicks(&conn, &ring, q, true, next))
            } else {
                virtq::SplitRing::new(&mem, queue)
                    .is_some_and(|ring| set_kicks(&conn, &ring, q, true, next))
            }
        };
        // A duplicate, owned by the set: the ring's own may be closed by SET_VRING_KICK
        // while the PMD sleeps.
        let kick = st.get_kick().as_ref().and_then(|k| {
            // SAFETY: the ring's kick fd is open while `st` borrows the ring's state.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(k.as_raw_fd()) };
            fd.try_clone_to_owned().ok()
        });
        drop(st);
        if let Some(fd) = kick {
            set.push_eventfd(fd);
        }
        pending
    }
}

/// [`virtq::DeviceRing::set_kicks`] on transmit queue `q`'s `ring`, and, while the
/// connection migrates, the marks for what it wrote. Returns whether buffers arrived
/// meanwhile (when enabling).
fn set_kicks<'m>(
    conn: &device::Connection,
    ring: &impl virtq::DeviceRing<'m>,
    q: u16,
    enable: bool,
    next_avail: u16,
) -> bool {
    let pending = ring.set_kicks(enable, next_avail);
    if let Some(mut l) = conn.migration.logging() {
        ring.log_kicks(&mut l, 2 * usize::from(q) + 1);
    }
    pending
}
