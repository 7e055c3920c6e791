//! Live migration of a VM on a vhost-user port (vhost-user spec, "Migration").
//!
//! - **Dirty-page logging**: while the front-end acks `VHOST_F_LOG_ALL` and has shared
//!   a log (`SET_LOG_BASE`), every guest page the switch writes is marked in it, per
//!   batch and only after the write: the receive buffers of a delivery batch (recorded
//!   as they are filled, marked before `used.idx` lets the driver reuse them), the used
//!   elements and `used.idx` / `used.flags` / `avail_event`, at the used ring's log
//!   address from `SET_VRING_ADDR` (`VHOST_VRING_F_LOG`). A packed ring's used
//!   descriptors are in its descriptor ring, marked at its own address, and its device
//!   area at the log address. When logging is off this costs the data path one relaxed
//!   load per batch.
//! - **Ring hand-over** needs nothing here: every chain is completed within the burst
//!   that took it, under the ring's lock, so when `GET_VRING_BASE` stops a ring nothing
//!   is in flight, and the index it returns is where the destination resumes.
//! - **Announcement**: after switch-over the destination QEMU asks the back-end to
//!   announce the VM (`SEND_RARP`); the PMD polling the port's first transmit queue
//!   takes the MAC and runs a broadcast RARP from it through the pipeline as if the
//!   guest had sent it: the FDB moves the MAC to this port at once (learning
//!   invalidates cached flows), and the flood carries it over every tunnel, so other
//!   hosts relearn the MAC behind this host's endpoint.

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwapOption;
use vhost_user_backend::VringT;
use virtio_queue::QueueT;

use super::device::PortVring;
use super::dirty_log::DirtyLog;

/// No log address: the ring's used writes are not logged (`VHOST_VRING_F_LOG` clear).
const NO_LOG: u64 = u64::MAX;

/// The migration state of one connection, shared by its protocol thread and the PMDs.
pub struct Migration {
    /// `VHOST_F_LOG_ALL` acked and a log mapped: the data path marks what it writes.
    active: AtomicBool,
    /// `VHOST_F_LOG_ALL` acked.
    log_all: AtomicBool,
    log: ArcSwapOption<DirtyLog>,
    /// Per vring, the guest-physical address its used ring is logged at, or [`NO_LOG`].
    used_log: Box<[AtomicU64]>,
    /// End of guest memory (guest-physical), which a log must cover.
    mem_end: AtomicU64,
    /// Pages newly marked since the connection began.
    pages: AtomicU64,
    /// Logs accepted (`SET_LOG_BASE`).
    logs_set: AtomicU64,
    /// `SET_LOG_FD`'s eventfd, signalled after a batch marked pages.
    log_fd: Mutex<Option<File>>,
    has_log_fd: AtomicBool,
    /// MACs to announce (`SEND_RARP`), taken by the PMD polling transmit queue 0.
    announce: Mutex<Vec<[u8; 6]>>,
    announce_pending: AtomicBool,
    /// Announcements sent into the switch.
    announced: AtomicU64,
    /// The connection's rings, to wait out running batches when logging starts.
    vrings: OnceLock<Vec<PortVring>>,
}

impl Migration {
    /// The state of a connection with `vrings` virtqueues: not logging.
    pub fn new(vrings: usize) -> Self {
        Migration {
            active: AtomicBool::new(false),
            log_all: AtomicBool::new(false),
            log: ArcSwapOption::empty(),
            used_log: (0..vrings).map(|_| AtomicU64::new(NO_LOG)).collect(),
            mem_end: AtomicU64::new(0),
            pages: AtomicU64::new(0),
            logs_set: AtomicU64::new(0),
            log_fd: Mutex::new(None),
            has_log_fd: AtomicBool::new(false),
            announce: Mutex::new(Vec::new()),
            announce_pending: AtomicBool::new(false),
            announced: AtomicU64::new(0),
            vrings: OnceLock::new(),
        }
    }

    /// Attaches the connection's rings (once, when it is built).
    pub fn attach(&self, vrings: Vec<PortVring>) {
        let _ = self.vrings.set(vrings);
    }

    /// Ring `index` of the connection, once attached.
    pub fn vring(&self, index: usize) -> Option<PortVring> {
        self.vrings.get()?.get(index).cloned()
    }

    /// Records the end of guest memory after `SET_MEM_TABLE` / `ADD_MEM_REG`.
    pub fn set_mem_end(&self, end: u64) {
        self.mem_end.store(end, Ordering::Relaxed);
    }

    /// `SET_FEATURES`: whether `VHOST_F_LOG_ALL` is acked. Clearing it (a migration
    /// cancelled or failed) also unmaps the log: QEMU shares a new one
    /// (`SET_LOG_BASE`) before it sets the feature again.
    pub fn set_log_all(&self, on: bool) {
        self.log_all.store(on, Ordering::Relaxed);
        self.update();
        if !on {
            self.log.store(None);
        }
    }

    /// `SET_LOG_BASE`: maps the log (`size` bytes at `offset` of `file`), checked to
    /// cover guest memory, in place of the previous one; a replacement returns once no
    /// batch marks into the previous log any more.
    ///
    /// # Errors
    /// The log was refused ([`super::dirty_log::LogError`], as an `InvalidInput` error).
    pub fn set_log(&self, file: &File, offset: u64, size: u64) -> io::Result<()> {
        let end = self.mem_end.load(Ordering::Relaxed);
        let log = DirtyLog::map(file, offset, size, end)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let old = self.log.swap(Some(Arc::new(log)));
        self.logs_set.fetch_add(1, Ordering::Relaxed);
        self.update();
        if old.is_some() && self.is_logging() {
            // A replacement (QEMU resizes the log when guest memory grows): QEMU reads
            // the old log one last time after this request's reply, so the batches still
            // marking into it must end first.
            self.wait_batches();
        }
        Ok(())
    }

    /// `SET_VRING_ADDR`: ring `index`'s used ring is logged at `log` (`None`: not).
    ///
    /// # Errors
    /// `index` is not one of the connection's rings.
    pub fn set_used_log(&self, index: u32, log: Option<u64>) -> io::Result<()> {
        let slot = usize::try_from(index)
            .ok()
            .and_then(|i| self.used_log.get(i))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no such vring"))?;
        slot.store(log.unwrap_or(NO_LOG), Ordering::Relaxed);
        Ok(())
    }

    /// `SET_LOG_FD`: the eventfd to signal after pages were marked.
    pub fn set_log_fd(&self, file: File) {
        *self.log_fd.lock().unwrap_or_else(|e| e.into_inner()) = Some(file);
        self.has_log_fd.store(true, Ordering::Relaxed);
    }

    /// Turns logging on when both the feature and a log are there (off otherwise). When
    /// it turns on, waits until every batch that started before has ended (each holds
    /// its ring's lock), so that every write after this returns is marked.
    fn update(&self) {
        let on = self.log_all.load(Ordering::Relaxed) && self.log.load().is_some();
        let was = self.active.swap(on, Ordering::SeqCst);
        if on && !was {
            self.wait_batches();
        }
    }

    /// Waits until every batch running on the connection's rings has ended: takes each
    /// ring's lock once (a batch holds it from its first guest access to its last mark).
    fn wait_batches(&self) {
        for v in self.vrings.get().into_iter().flatten() {
            drop(v.get_mut());
        }
    }

    /// Whether the data path is logging (a migration is in progress).
    pub fn is_logging(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Pages marked since the connection began.
    pub fn pages_marked(&self) -> u64 {
        self.pages.load(Ordering::Relaxed)
    }

    /// Logs accepted on this connection.
    pub fn logs_set(&self) -> u64 {
        self.logs_set.load(Ordering::Relaxed)
    }

    /// Whether the log's file was truncated under the switch (the connection must close).
    pub fn log_faulted(&self) -> bool {
        self.log.load().as_ref().is_some_and(|l| l.faulted())
    }

    /// The logging context of one batch, or `None` when not logging: one relaxed load.
    #[inline(always)]
    pub fn logging(&self) -> Option<LogBatch<'_>> {
        if !self.active.load(Ordering::Relaxed) {
            return None;
        }
        self.logging_slow()
    }

    #[inline(never)]
    fn logging_slow(&self) -> Option<LogBatch<'_>> {
        let log = self.log.load_full()?;
        Some(LogBatch {
            m: self,
            log,
            new: 0,
        })
    }

    /// `SEND_RARP`: queues an announcement of `mac` for the data path.
    pub fn request_announce(&self, mac: [u8; 6]) {
        self.announce
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(mac);
        self.announce_pending.store(true, Ordering::Release);
    }

    /// Whether announcements wait (one relaxed load, per poll of transmit queue 0).
    #[inline(always)]
    pub fn announce_pending(&self) -> bool {
        self.announce_pending.load(Ordering::Relaxed)
    }

    /// Takes the waiting announcements.
    pub fn take_announcements(&self) -> Vec<[u8; 6]> {
        self.announce_pending.store(false, Ordering::Relaxed);
        let macs = std::mem::take(&mut *self.announce.lock().unwrap_or_else(|e| e.into_inner()));
        self.announced
            .fetch_add(macs.len() as u64, Ordering::Relaxed);
        macs
    }

    /// Announcements sent into the switch on this connection.
    pub fn announced(&self) -> u64 {
        self.announced.load(Ordering::Relaxed)
    }

    /// `GET_VRING_BASE` stopped ring `index` (`size` descriptors): marks its whole used
    /// ring, which covers the writes the vhost-user library itself made there
    /// (notification flags when the ring was set up). A packed ring (`packed_desc`: its
    /// descriptor ring's address) has its device area at the log address, and its used
    /// descriptors in the descriptor ring, which is marked whole too.
    pub fn ring_stopped(&self, index: u32, size: u16, packed_desc: Option<u64>) {
        if let Some(mut b) = self.logging() {
            match (b.used_log(index as usize), packed_desc) {
                (Some(at), None) => b.mark(at, 6 + 8 * u64::from(size) + 2),
                (Some(at), Some(desc)) => {
                    b.mark(at, 4);
                    b.mark(desc, 16 * u64::from(size));
                }
                (None, _) => {}
            }
        }
    }
}

/// The marks of one batch; the pages it newly marked are counted (and `SET_LOG_FD`'s
/// eventfd signalled) when it drops.
pub struct LogBatch<'a> {
    m: &'a Migration,
    log: Arc<DirtyLog>,
    new: u64,
}

impl LogBatch<'_> {
    /// Marks the `len` bytes at guest-physical `gpa`.
    #[inline]
    pub fn mark(&mut self, gpa: u64, len: u64) {
        self.new += self.log.mark(gpa, len);
    }

    fn used_log(&self, vring: usize) -> Option<u64> {
        let at = self.m.used_log.get(vring)?.load(Ordering::Relaxed);
        (at != NO_LOG).then_some(at)
    }

    /// Marks the used elements at free-running positions `[old, new)` of vring `vring`
    /// (`size` descriptors) and its `flags`/`idx` words, at the ring's log address. Call
    /// after publishing `used.idx`.
    pub fn used(&mut self, vring: usize, size: u16, old: u16, new: u16) {
        let Some(at) = self.used_log(vring) else {
            return;
        };
        fence(Ordering::SeqCst);
        self.mark(at, 4);
        let n = u64::from(new.wrapping_sub(old)).min(u64::from(size));
        let first = u64::from(old & size.wrapping_sub(1));
        let size = u64::from(size);
        let tail = n.min(size - first);
        self.mark(at + 4 + 8 * first, 8 * tail);
        self.mark(at + 4, 8 * (n - tail));
    }

    /// Marks vring `vring`'s `flags`/`idx` words and `avail_event` (`size`
    /// descriptors), after the notification settings were written.
    pub fn used_header(&mut self, vring: usize, size: u16) {
        let Some(at) = self.used_log(vring) else {
            return;
        };
        fence(Ordering::SeqCst);
        self.mark(at, 4);
        self.mark(at + 4 + 8 * u64::from(size), 2);
    }
}

impl Drop for LogBatch<'_> {
    fn drop(&mut self) {
        if self.new == 0 {
            return;
        }
        self.m.pages.fetch_add(self.new, Ordering::Relaxed);
        if self.m.has_log_fd.load(Ordering::Relaxed) {
            if let Some(f) = self
                .m
                .log_fd
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
            {
                let _ = f.write(&1u64.to_ne_bytes());
            }
        }
    }
}

/// The size of vring `v`'s queue (0 if it has none).
pub fn ring_size(v: &PortVring) -> u16 {
    v.get_ref().get_queue().size()
}

/// A RARP request announcing `mac` (RFC 903), as QEMU's `announce_self_create` and
/// Open vSwitch build it: broadcast, EtherType 0x8035, sender and target hardware
/// address `mac`, protocol addresses 0, padded to the 60-byte minimum.
pub fn rarp_frame(mac: [u8; 6]) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&0x8035u16.to_be_bytes());
    f[14..16].copy_from_slice(&1u16.to_be_bytes()); // Ethernet
    f[16..18].copy_from_slice(&0x0800u16.to_be_bytes()); // IPv4
    f[18] = 6;
    f[19] = 4;
    f[20..22].copy_from_slice(&3u16.to_be_bytes()); // reverse request
    f[22..28].copy_from_slice(&mac);
    f[32..38].copy_from_slice(&mac);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarp_announces_the_mac_from_the_mac() {
        let mac = [0x52, 0x54, 0, 0, 0, 0x0a];
        let f = rarp_frame(mac);
        assert_eq!(&f[..6], &[0xff; 6]);
        assert_eq!(&f[6..12], &mac);
        assert_eq!(&f[12..14], &[0x80, 0x35]);
        assert_eq!(&f[20..22], &[0, 3]);
        assert_eq!(&f[22..28], &mac);
        assert_eq!(&f[28..32], &[0; 4]);
        assert_eq!(&f[32..38], &mac);
    }

    #[test]
    fn logging_needs_the_feature_and_a_log() {
        let m = Migration::new(2);
        assert!(m.logging().is_none());
        m.set_log_all(true);
        assert!(!m.is_logging(), "no log yet");
        // SAFETY: memfd_create with a NUL-terminated name; the fd is owned by the File.
        let fd = unsafe { libc::memfd_create(c"log".as_ptr(), libc::MFD_CLOEXEC) };
        // SAFETY: a fresh fd no one else owns.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(4096).unwrap();
        m.set_mem_end(1 << 20);
        m.set_log(&f, 0, 4096).unwrap();
        assert!(m.is_logging());
        m.set_used_log(1, Some(0x10_0000)).unwrap();
        assert!(m.set_used_log(2, Some(0)).is_err());
        {
            let mut b = m.logging().unwrap();
            // Used elements 254..258 of a 256-entry ring wrap: both ends of the ring.
            b.used(1, 256, 254, 258);
        }
        // flags/idx page, and the elements' page(s): the ring spans 0x10_0000..+2054.
        assert_eq!(m.pages_marked(), 1);
        m.set_log_all(false);
        assert!(m.logging().is_none());
        m.set_mem_end(1 << 30);
        assert!(m.set_log(&f, 0, 4096).is_err(), "4 KiB cannot cover 1 GiB");
    }
}
