//! Test doubles: a simulated virtio-net driver over in-memory split or packed rings.
//!
//! Real guests (DPDK testpmd, QEMU) are what the integration tests use. This driver
//! exists for what no real guest does on purpose — malformed descriptor chains — and
//! for benchmarks that must not include a second process. It lays out split rings in a
//! [`GuestMemoryMmap`](vm_memory::GuestMemoryMmap) exactly as virtio 1.2 §2.7 describes
//! (or packed rings, §2.8, when its features include VIRTIO_F_RING_PACKED: see
//! [`packed`]) and attaches them to a port as a [`Connection`], bypassing the
//! vhost-user socket.

mod packed;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use vhost_user_backend::VringT;
use vm_memory::{Bytes, GuestAddress, GuestMemoryAtomic};

use crate::config::{Config, PollMode, PortConfig, PortType};
use crate::ports::vhost::device::{Connection, PortVring};
use crate::ports::vhost::virtq::{Mem, VRING_DESC_F_WRITE};

/// Descriptors per simulated queue (default).
pub const QUEUE_SIZE: u16 = 256;
/// Bytes of buffer per descriptor slot.
pub const SLOT: u64 = 2048;

/// One descriptor as the simulated driver writes it.
#[derive(Debug, Clone, Copy)]
pub struct RawDesc {
    /// Guest-physical address.
    pub addr: u64,
    /// Length.
    pub len: u32,
    /// VRING_DESC_F_* flags.
    pub flags: u16,
    /// Next index.
    pub next: u16,
}

/// A simulated guest: memory, rings, and the driver side of each queue.
pub struct SimGuest {
    /// The connection to attach to a port.
    pub conn: Arc<Connection>,
    mem: Arc<Mem>,
    /// Split: the driver's `avail.idx`. Packed: its next avail position (`slot | wrap
    /// << 15`).
    avail_idx: Vec<u16>,
    /// Split: used elements read. Packed: the next used position to read.
    used_seen: Vec<u16>,
    size: u16,
    /// Packed rings (VIRTIO_F_RING_PACKED acked).
    packed: bool,
    /// Packed: per queue, the position up to which used descriptors were counted, and
    /// how many (for [`used_idx`](Self::used_idx)).
    used_scan: std::cell::RefCell<Vec<(u16, u16)>>,
    /// Packed: per queue, each buffer id's `(addr, len, device-writable)` as last made
    /// available (for [`republish`](Self::republish)).
    posted: Vec<Vec<(u64, u32, bool)>>,
    /// Packed: per queue and head slot, the buffer id and ring slots of the chain made
    /// available there (a used descriptor stands for the chains from its slot up to the
    /// one with its id, as DPDK's in-order driver reads them).
    slot_chain: Vec<Vec<(u16, u16)>>,
    /// Length of the virtio-net header on this guest's frames.
    pub hdr_len: usize,
}

impl SimGuest {
    /// A guest with `queue_pairs` queue pairs of [`QUEUE_SIZE`] descriptors and the given
    /// acked virtio `features`.
    pub fn new(queue_pairs: u16, features: u64) -> Self {
        Self::with_queue_size(queue_pairs, features, QUEUE_SIZE)
    }

    /// As [`new`](Self::new), with `queue_size` descriptors per queue (a power of two);
    /// each queue has `8 * queue_size` buffer slots of [`SLOT`] bytes.
    pub fn with_queue_size(queue_pairs: u16, features: u64, queue_size: u16) -> Self {
        assert!(queue_size.is_power_of_two());
        let nq = 2 * usize::from(queue_pairs);
        let size = nq as u64 * Self::queue_area(queue_size);
        let mem = Mem::from_ranges(&[(GuestAddress(0), size as usize)]).expect("guest memory");
        let atomic = GuestMemoryAtomic::new(mem.clone());
        let event_idx =
            features & (1 << virtio_bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX) != 0;
        let packed = features & (1 << crate::ports::vhost::device::VIRTIO_F_RING_PACKED) != 0;
        let mut vrings = Vec::new();
        for q in 0..nq {
            let v = PortVring::standalone(atomic.clone(), queue_size).expect("vring");
            let base = q as u64 * Self::queue_area(queue_size);
            let (avail, used) = Self::ring_offsets(queue_size);
            v.set_queue_size(queue_size);
            v.set_queue_info(base, base + avail, base + used)
                .expect("queue info");
            v.set_queue_event_idx(event_idx);
            if packed {
                Self::packed_init(&v);
            }
            v.set_queue_ready(true);
            v.set_enabled(true);
            vrings.push(v);
        }
        let conn = Arc::new(Connection {
            vrings,
            mem: atomic,
            acked_features: Arc::new(AtomicU64::new(features)),
            features_set: Arc::new(AtomicBool::new(true)),
            id: 1_000_000 + u64::from(rand_id()),
            faults: Default::default(),
            migration: Arc::new(crate::ports::vhost::migration::Migration::new(nq)),
            mem_tables: Arc::new(AtomicU64::new(1)),
            memless_ticks: AtomicU64::new(0),
            memless_reported: AtomicBool::new(false),
        });
        let hdr_len = conn.hdr_len() as usize;
        let start = if packed { packed::START } else { 0 };
        SimGuest {
            conn,
            mem: Arc::new(mem),
            avail_idx: vec![start; nq],
            used_seen: vec![start; nq],
            size: queue_size,
            packed,
            used_scan: std::cell::RefCell::new(vec![(start, 0); nq]),
            posted: vec![vec![(0, 0, false); usize::from(queue_size)]; nq],
            slot_chain: vec![vec![(0, 1); usize::from(queue_size)]; nq],
            hdr_len,
        }
    }

    /// Turns live migration's dirty logging on for this guest's connection, as QEMU
    /// does (`VHOST_F_LOG_ALL`, a shared log covering its memory, each used ring logged
    /// at its own address). Returns the log's memfd (one bit per 4 KiB page).
    pub fn start_dirty_log(&self) -> std::fs::File {
        use std::os::fd::FromRawFd;
        let m = &self.conn.migration;
        let end = self.base_of(self.avail_idx.len());
        // SAFETY: memfd_create with a NUL-terminated name; the fd is owned by the File.
        let fd = unsafe { libc::memfd_create(c"dirty-log".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create");
        // SAFETY: a fresh fd no one else owns.
        let f = unsafe { std::fs::File::from_raw_fd(fd) };
        let bytes = crate::ports::vhost::dirty_log::log_bytes_for(end);
        f.set_len(bytes).expect("size the log");
        m.set_mem_end(end);
        m.set_log(&f, 0, bytes).expect("log accepted");
        let (_, used) = Self::ring_offsets(self.size);
        for q in 0..self.avail_idx.len() {
            m.set_used_log(q as u32, Some(self.base_of(q) + used))
                .expect("ring");
        }
        m.set_log_all(true);
        f
    }

    /// The features a modern Linux guest acks without offloads: VERSION_1, MRG_RXBUF,
    /// EVENT_IDX, INDIRECT_DESC.
    pub fn default_features() -> u64 {
        use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
        use virtio_bindings::virtio_net::VIRTIO_NET_F_MRG_RXBUF;
        use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};
        (1 << VIRTIO_F_VERSION_1)
            | (1 << VIRTIO_NET_F_MRG_RXBUF)
            | (1 << VIRTIO_RING_F_EVENT_IDX)
            | (1 << VIRTIO_RING_F_INDIRECT_DESC)
    }

    /// Offsets of the available and used rings from the descriptor table (4 KiB aligned).
    fn ring_offsets(size: u16) -> (u64, u64) {
        let s = u64::from(size);
        let avail = (16 * s).div_ceil(4096) * 4096;
        let used = avail + (6 + 2 * s).div_ceil(4096) * 4096;
        (avail, used)
    }

    fn ring_area(size: u16) -> u64 {
        let (_, used) = Self::ring_offsets(size);
        used + (6 + 8 * u64::from(size)).div_ceil(4096) * 4096
    }

    fn queue_area(size: u16) -> u64 {
        Self::ring_area(size) + u64::from(size) * SLOT * 8
    }

    fn base_of(&self, q: usize) -> u64 {
        q as u64 * Self::queue_area(self.size)
    }

    /// Address of buffer slot `slot` (of 8 × queue size) of queue `q` of a guest with the
    /// default queue size.
    pub fn slot_addr(q: usize, slot: u16) -> u64 {
        q as u64 * Self::queue_area(QUEUE_SIZE)
            + Self::ring_area(QUEUE_SIZE)
            + u64::from(slot) * SLOT
    }

    /// Address of buffer slot `slot` of queue `q` of this guest.
    pub fn slot(&self, q: usize, slot: u32) -> u64 {
        self.base_of(q) + Self::ring_area(self.size) + u64::from(slot) * SLOT
    }

    /// Writes descriptor `i` of queue `q`.
    pub fn write_desc(&self, q: usize, i: u16, d: RawDesc) {
        let a = GuestAddress(self.base_of(q) + 16 * u64::from(i));
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&d.addr.to_le_bytes());
        b[8..12].copy_from_slice(&d.len.to_le_bytes());
        b[12..14].copy_from_slice(&d.flags.to_le_bytes());
        b[14..16].copy_from_slice(&d.next.to_le_bytes());
        self.mem.write_slice(&b, a).expect("desc");
    }

    /// Writes `data` at guest address `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) {
        self.mem
            .write_slice(data, GuestAddress(addr))
            .expect("write");
    }

    /// Reads `len` bytes at guest address `addr`.
    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.mem
            .read_slice(&mut v, GuestAddress(addr))
            .expect("read");
        v
    }

    /// Publishes head `head` in queue `q`'s available ring (and bumps avail.idx); split
    /// rings only.
    pub fn publish(&mut self, q: usize, head: u16) {
        self.publish_split(q, &[head]);
    }

    /// Republishes the heads of the last `n` publications again (steady-state benches:
    /// the buffers and descriptors are unchanged).
    pub fn republish(&mut self, q: usize, heads: &[u16]) {
        if self.packed {
            for &h in heads {
                let (addr, len, writable) = self.posted[q][usize::from(h) % usize::from(self.size)];
                self.packed_make_avail(q, h, addr, len, writable);
            }
            return;
        }
        self.publish_split(q, heads);
    }

    /// Writes `heads` into queue `q`'s available ring from `avail.idx` on and publishes
    /// them with one Release store of the index.
    fn publish_split(&mut self, q: usize, heads: &[u16]) {
        let base = self.base_of(q) + Self::ring_offsets(self.size).0;
        for &h in heads {
            let off = 4 + 2 * u64::from(self.avail_idx[q] % self.size);
            self.mem
                .write_obj(h.to_le(), GuestAddress(base + off))
                .unwrap();
            self.avail_idx[q] = self.avail_idx[q].wrapping_add(1);
        }
        self.mem
            .store(
                self.avail_idx[q].to_le(),
                GuestAddress(base + 2),
                Ordering::Release,
            )
            .unwrap();
    }

    /// Queues a frame for transmission on queue pair `qp` in one descriptor (slot = head).
    /// Returns the head index.
    pub fn send(&mut self, qp: usize, head: u16, frame: &[u8]) -> u16 {
        let q = 2 * qp + 1;
        let addr = self.slot(q, u32::from(head));
        let mut buf = vec![0u8; self.hdr_len];
        buf.extend_from_slice(frame);
        assert!(buf.len() as u64 <= SLOT * 8, "frame too large for a slot");
        self.write(addr, &buf);
        self.make_avail(q, head, addr, buf.len() as u32, false);
        head
    }

    /// Makes buffer `id` (`len` bytes at `addr`, device-writable or not) available on
    /// queue `q` as a chain of one descriptor: split, descriptor `id` and an available
    /// ring entry; packed, the next ring slot with buffer id `id`.
    pub fn make_avail(&mut self, q: usize, id: u16, addr: u64, len: u32, writable: bool) {
        if self.packed {
            self.packed_make_avail(q, id, addr, len, writable);
            return;
        }
        let flags = if writable { VRING_DESC_F_WRITE } else { 0 };
        let d = RawDesc {
            addr,
            len,
            flags,
            next: 0,
        };
        self.write_desc(q, id, d);
        self.publish(q, id);
    }

    /// Queues a frame with an explicit 12-byte virtio-net header (offload fields) on
    /// transmit queue pair `qp`, in one descriptor using slots from `head` on.
    pub fn send_with_hdr(&mut self, qp: usize, head: u16, hdr: [u8; 12], frame: &[u8]) {
        let q = 2 * qp + 1;
        let addr = self.slot(q, u32::from(head));
        let mut buf = hdr[..self.hdr_len].to_vec();
        buf.extend_from_slice(frame);
        self.write(addr, &buf);
        self.make_avail(q, head, addr, buf.len() as u32, false);
    }

    /// Queues a raw (possibly malformed) chain on transmit queue pair `qp`.
    pub fn send_chain(&mut self, qp: usize, head: u16, descs: &[(u16, RawDesc)]) {
        let q = 2 * qp + 1;
        for &(i, d) in descs {
            self.write_desc(q, i, d);
        }
        self.publish(q, head);
    }

    /// Posts `n` receive buffers of `len` bytes (≤ 8 × SLOT) on queue pair `qp`,
    /// descriptor i using slot i. Returns the heads.
    pub fn post_rx(&mut self, qp: usize, first: u16, n: u16, len: u32) -> Vec<u16> {
        let q = 2 * qp;
        let mut heads = Vec::new();
        for i in first..first + n {
            let addr = self.slot(
                q,
                (u32::from(i) * (len as u64).div_ceil(SLOT) as u32) % (8 * u32::from(self.size)),
            );
            self.make_avail(q, i, addr, len, true);
            heads.push(i);
        }
        heads
    }

    /// Gives queue `q` a call eventfd (the guest's interrupt) and returns it, non-blocking:
    /// `read()` returns the number of interrupts since the last read, or fails when none.
    /// The interrupt the switch sends when the eventfd is set is read already.
    pub fn call_eventfd(&self, q: usize) -> vmm_sys_util::eventfd::EventFd {
        let efd = self.new_call_eventfd(q);
        efd.read().expect("an interrupt when the eventfd was set");
        efd
    }

    /// As [`call_eventfd`](Self::call_eventfd), as SET_VRING_CALL leaves it: with the
    /// interrupt the switch sends on a new eventfd unread.
    pub fn new_call_eventfd(&self, q: usize) -> vmm_sys_util::eventfd::EventFd {
        use std::os::fd::{FromRawFd, IntoRawFd};
        let efd = vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).expect("eventfd");
        let dup = efd.try_clone().expect("dup eventfd");
        // SAFETY: `into_raw_fd` hands over sole ownership of a valid, open fd.
        let file = unsafe { std::fs::File::from_raw_fd(dup.into_raw_fd()) };
        self.conn.vrings[q].set_call(Some(file));
        efd
    }

    /// Writes the driver's `used_event` (EVENT_IDX) of queue `q`: the device interrupts
    /// once its used index passes `v` (virtio 1.2 §2.7.10).
    pub fn set_used_event(&self, q: usize, v: u16) {
        let a = self.base_of(q) + Self::ring_offsets(self.size).0 + 4 + 2 * u64::from(self.size);
        self.mem.write_obj(v.to_le(), GuestAddress(a)).unwrap();
    }

    /// Sets or clears the driver's VRING_AVAIL_F_NO_INTERRUPT flag on queue `q` (packed:
    /// its event suppression flags, DISABLE or ENABLE).
    pub fn set_no_interrupt(&self, q: usize, on: bool) {
        if self.packed {
            self.set_driver_event(q, u16::from(on), 0);
            return;
        }
        let a = self.base_of(q) + Self::ring_offsets(self.size).0;
        self.mem
            .write_obj(u16::from(on).to_le(), GuestAddress(a))
            .unwrap();
    }

    /// Used-ring index of queue `q` (as the device published it; packed: the used
    /// descriptors written so far, modulo 2^16).
    pub fn used_idx(&self, q: usize) -> u16 {
        if self.packed {
            return self.packed_used_count(q);
        }
        let v: u16 = self
            .mem
            .load(
                GuestAddress(self.base_of(q) + Self::ring_offsets(self.size).1 + 2),
                Ordering::Acquire,
            )
            .unwrap();
        u16::from_le(v)
    }

    /// Transmit chains completed on queue pair `qp` so far.
    pub fn tx_completed(&self, qp: usize) -> u16 {
        self.used_idx(2 * qp + 1)
    }

    /// Frames received on queue pair `qp` since the last call: reassembles mergeable
    /// buffers by num_buffers and strips the virtio-net header.
    pub fn recv(&mut self, qp: usize) -> Vec<Vec<u8>> {
        self.recv_with_hdr(qp).into_iter().map(|(_, f)| f).collect()
    }

    /// As [`recv`](Self::recv), with each frame's virtio-net header (zero-padded to 12).
    pub fn recv_with_hdr(&mut self, qp: usize) -> Vec<([u8; 12], Vec<u8>)> {
        let q = 2 * qp;
        if self.packed {
            return self.reassemble(|g| g.packed_take_used(q));
        }
        let used = self.used_idx(q);
        self.reassemble(|g| {
            if g.used_seen[q] == used {
                return None;
            }
            let (id, len) = g.used_elem(q, g.used_seen[q]);
            g.used_seen[q] = g.used_seen[q].wrapping_add(1);
            Some((g.read_desc(q, id as u16).addr, len))
        })
    }

    /// Frames from the used buffers `next` takes, in order (guest-physical address and
    /// length written): mergeable buffers reassembled by num_buffers, each frame's
    /// virtio-net header returned apart (zero-padded to 12).
    fn reassemble(
        &mut self,
        mut next: impl FnMut(&mut Self) -> Option<(u64, u32)>,
    ) -> Vec<([u8; 12], Vec<u8>)> {
        let mut frames = Vec::new();
        while let Some((addr, len)) = next(self) {
            let first = self.read(addr, len as usize);
            if first.len() < self.hdr_len {
                frames.push(([0; 12], Vec::new()));
                continue;
            }
            let mut hdr = [0u8; 12];
            hdr[..self.hdr_len].copy_from_slice(&first[..self.hdr_len]);
            let nbuf = if self.hdr_len == 12 {
                u16::from_le_bytes([first[10], first[11]]).max(1)
            } else {
                1
            };
            let mut f = first[self.hdr_len..].to_vec();
            for _ in 1..nbuf {
                let Some((addr, len)) = next(self) else {
                    break;
                };
                f.extend(self.read(addr, len as usize));
            }
            frames.push((hdr, f));
        }
        frames
    }

    /// Marks every used entry of queue `q` as seen without reading it (benches).
    pub fn skip_used(&mut self, q: usize) -> u16 {
        if self.packed {
            return self.packed_skip_used(q);
        }
        let used = self.used_idx(q);
        let n = used.wrapping_sub(self.used_seen[q]);
        self.used_seen[q] = used;
        n
    }

    fn used_elem(&self, q: usize, pos: u16) -> (u32, u32) {
        let a =
            self.base_of(q) + Self::ring_offsets(self.size).1 + 4 + 8 * u64::from(pos % self.size);
        let id: u32 = self.mem.read_obj(GuestAddress(a)).unwrap();
        let len: u32 = self.mem.read_obj(GuestAddress(a + 4)).unwrap();
        (u32::from_le(id), u32::from_le(len))
    }

    fn read_desc(&self, q: usize, i: u16) -> RawDesc {
        let b = self.read(self.base_of(q) + 16 * u64::from(i), 16);
        RawDesc {
            addr: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            len: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            flags: u16::from_le_bytes(b[12..14].try_into().unwrap()),
            next: u16::from_le_bytes(b[14..16].try_into().unwrap()),
        }
    }
}

fn rand_id() -> u32 {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed) as u32
}

/// Attaches a simulated guest's connection to vhost-user port `port` of `sw`, as a
/// driver connecting over the socket would.
///
/// # Panics
/// If `port` is not a vhost-user port of `sw`.
pub fn attach(sw: &crate::switch::Switch, port: crate::model::fdb::PortId, conn: Arc<Connection>) {
    sw.topo()
        .port(port)
        .and_then(|p| p.port.vhost())
        .expect("a vhost-user port")
        .conn
        .store(Some(conn));
}

/// An Ethernet frame of `len` bytes from `src` to `dst` with a recognisable payload.
pub fn frame(dst: [u8; 6], src: [u8; 6], len: usize, seed: u8) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&0x88b5u16.to_be_bytes()); // IEEE local experimental ethertype
    let mut i = 0u32;
    while f.len() < len {
        f.push((i as u8).wrapping_mul(7).wrapping_add(seed));
        i += 1;
    }
    f
}

/// A switch configuration for tests and benches: server-mode ports with the given names
/// and access VLANs (sockets under a directory that does not exist: they are never
/// bound), one unpinned busy-polling PMD, the flow cache on or off, no ACLs.
pub fn config(ports: &[(&str, Option<u16>)], flow_cache: bool) -> Config {
    Config {
        ports: ports
            .iter()
            .map(|&(name, vlan)| PortConfig {
                vlan,
                offloads: false,
                ..PortConfig::new(
                    PortType::VhostUser,
                    name,
                    &format!("/nonexistent/{name}.sock"),
                )
            })
            .collect(),
        pmd_cpus: None,
        poll: PollMode::Busy,
        control: "/nonexistent/ctl.sock".into(),
        fdb_aging_secs: 300,
        fdb_max_macs: crate::config::DEFAULT_FDB_MAX_MACS,
        fdb_port_max_macs: crate::config::DEFAULT_FDB_PORT_MAX_MACS,
        ct_max_connections: crate::config::DEFAULT_CT_MAX_CONNECTIONS,
        ct_zone_max: Some(crate::config::DEFAULT_CT_ZONE_MAX),
        ct_shards: crate::config::default_ct_shards(1),
        fdb_static: Vec::new(),
        acl: Vec::new(),
        flow_cache,
        emc_insert_inv_prob: 1,
        metrics: None,
        pmd_auto_rebalance: false,
        geneve: Vec::new(),
        vnis: Vec::new(),
        vhost_user_socket: Default::default(),
        ovn: None,
        ovsdb: None,
        mcast: Default::default(),
    }
}
