//! PMD threads: poll transmit virtqueues in bursts and run the whole pipeline for them,
//! including delivery into the destination guests' receive virtqueues (DESIGN.md §3–4).
//!
//! Per burst (≤ [`BURST`] chains from one transmit queue):
//! 1. pop and validate descriptor chains (bad ones are completed with length 0, counted);
//! 2. read each frame's Ethernet header in place, learn source MACs, look up the
//!    destination under one FDB read lock;
//! 3. per destination port, one delivery batch under that receive ring's lock: copy
//!    straight from the source guest's buffers into the destination's (mergeable)
//!    receive buffers, one `used.idx` update and at most one interrupt;
//! 4. complete the transmit chains: one `used.idx` update, at most one interrupt.
//!
//! Nothing is allocated, logged or locked per packet: the burst arrays are allocated
//! once per thread, counters are single-writer, locks are per burst.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use vhost_user_backend::VringT;
use virtio_queue::QueueT;
use vm_memory::{GuestAddressSpace, VolatileMemory, VolatileSlice};

use flowcache::{EmcConfig, FlowCache, FlowKey};

use crate::config::PollMode;
use crate::model::acl::{self, Acl};
use crate::model::fdb::{fdb_key, FdbReader, Learn, PortId, Vlan};
use crate::model::stats::{cycles, DropReason};
use crate::ports::vhost::device::Connection;
use crate::ports::vhost::virtq::{
    copy_sg, gather_sg, prefetch, read_sg, write_sg, write_sg_at, MemView, Seg, SplitRing,
};
use crate::switch::{Backend, PmdShared, Port, Switch};

/// Most descriptor chains taken from one transmit queue per burst.
pub const BURST: usize = 32;

/// Most receive chains one frame may fill with mergeable buffers.
const MAX_RX_CHAINS: usize = 64;

/// Empty poll rounds before an adaptive PMD goes to sleep.
const ADAPTIVE_IDLE_ROUNDS: u32 = 20_000;

/// Where a frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Dropped, counted under the reason.
    Drop(DropReason),
    /// To one port.
    Port(PortId),
    /// To every other port of the VLAN that has a driver.
    Flood,
}

/// The whole forwarding decision for a flow, as the flow cache stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Where the frame goes.
    pub action: Action,
    /// The ACL rule that dropped it, or [`NO_RULE`].
    pub rule: u16,
    /// FDB key of the source MAC to learn or refresh, or [`NO_LEARN`].
    pub learn: u64,
}

// Two machine words: returned in registers and kept there by the compiler. A bigger
// decision lives in memory, copied piecewise between the slow path, the cache and the
// burst, and a wide reload of one just stored in pieces stalls until they reach the cache.
const _: () = assert!(std::mem::size_of::<Decision>() <= 16);

/// [`Decision::rule`] when no ACL rule dropped the frame.
pub const NO_RULE: u16 = u16::MAX;
/// [`Decision::learn`] when the source MAC is not learned (group address, dropped).
pub const NO_LEARN: u64 = u64::MAX;

/// Bytes of each frame read for its flow key: Ethernet, two VLAN tags, IPv6 with
/// extension headers, and the L4 ports.
const KEY_BYTES: usize = 128;

#[derive(Debug, Clone, Copy)]
struct Pkt {
    head: u16,
    seg_start: u32,
    seg_end: u32,
    /// Frame length without the virtio-net header.
    frame_len: u32,
    action: Action,
    /// The frame's virtio-net header fields (flags, gso_type, hdr_len, gso_size,
    /// csum_start, csum_offset; virtio 1.2 §5.1.6), all zero when the source port
    /// negotiated no offload.
    vhdr: [u8; 10],
}

impl Pkt {
    /// Whether the frame carries an offload (partial checksum or TSO).
    fn offload(&self) -> bool {
        self.vhdr[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 || self.vhdr[1] != 0
    }
}

/// virtio-net header flag: the checksum at csum_start + csum_offset is partial.
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// virtio-net header GSO types (virtio 1.2 §5.1.6).
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
/// virtio-net header GSO flag: the TSO frame has CWR set (needs HOST_ECN/GUEST_ECN).
const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

/// Where the frames of a burst are read from: a guest's transmit buffers, or host memory
/// (UMEM frames, tap buffers). Classification and delivery are generic over it, so the
/// vhost-user path compiles to the same code as before host ports existed.
trait BurstSrc<'m> {
    /// Copies bytes `off..` of frame `p` (after any virtio-net header) into `out`;
    /// returns the bytes copied.
    fn read(&self, p: &Pkt, segs: &[Seg], off: u32, out: &mut [u8]) -> usize;
    /// The frame's bytes for [`put_frame`].
    fn frame<'a>(&'a self, p: &Pkt, segs: &'a [Seg]) -> FrameSrc<'a, 'm>;
}

/// Frames in a guest's transmit descriptor chains, after a `hdr`-byte virtio-net header.
struct GuestBurst<'a, 'm> {
    mem: &'a MemView<'m>,
    hdr: u32,
}

impl<'m> BurstSrc<'m> for GuestBurst<'_, 'm> {
    #[inline(always)]
    fn read(&self, p: &Pkt, segs: &[Seg], off: u32, out: &mut [u8]) -> usize {
        read_sg(
            self.mem,
            &segs[p.seg_start as usize..p.seg_end as usize],
            self.hdr + off,
            out,
        )
    }
    #[inline(always)]
    fn frame<'a>(&'a self, p: &Pkt, segs: &'a [Seg]) -> FrameSrc<'a, 'm> {
        FrameSrc::Guest {
            mem: self.mem,
            segs: &segs[p.seg_start as usize..p.seg_end as usize],
            skip: self.hdr,
        }
    }
}

/// Frames in host memory (a UMEM or the tap's rx buffers): frame `p` is the
/// `p.frame_len` bytes at offset `p.seg_start` of the area, or, when `p.seg_end` is
/// [`IN_LINEAR`], of `linear` (AF_XDP multi-buffer frames, copied out of the UMEM).
struct HostBurst<'l> {
    base: *const u8,
    len: usize,
    linear: &'l [u8],
}

/// `Pkt::seg_end` of a host frame that lies in [`HostBurst::linear`].
const IN_LINEAR: u32 = 1;

impl HostBurst<'_> {
    #[inline]
    fn bytes(&self, p: &Pkt) -> &[u8] {
        let start = p.seg_start as usize;
        let end = start + p.frame_len as usize;
        if p.seg_end == IN_LINEAR {
            return &self.linear[start..end];
        }
        assert!(end <= self.len, "host frame outside its area");
        // SAFETY: `base..base+len` is a live mapping (the port outlives the burst) and
        // the frame's bytes belong to this PMD until the burst ends: a received UMEM frame
        // not yet given back to the fill ring, or a tap buffer whose read completed and
        // was not resubmitted. Nothing writes them meanwhile.
        unsafe { std::slice::from_raw_parts(self.base.add(start), p.frame_len as usize) }
    }
}

impl<'m> BurstSrc<'m> for HostBurst<'_> {
    #[inline]
    fn read(&self, p: &Pkt, _segs: &[Seg], off: u32, out: &mut [u8]) -> usize {
        let b = self.bytes(p);
        let b = &b[(off as usize).min(b.len())..];
        let n = b.len().min(out.len());
        out[..n].copy_from_slice(&b[..n]);
        n
    }
    #[inline]
    fn frame<'a>(&'a self, p: &Pkt, _segs: &'a [Seg]) -> FrameSrc<'a, 'm> {
        FrameSrc::Host(self.bytes(p))
    }
}

/// Where the bytes of a frame being delivered come from.
enum FrameSrc<'a, 'm> {
    /// The source guest's buffers, after its virtio-net header.
    Guest {
        mem: &'a MemView<'m>,
        segs: &'a [Seg],
        skip: u32,
    },
    /// A buffer of the switch (a software-made segment or a completed frame).
    Host(&'a [u8]),
}

/// One delivery batch into a receive ring: ring positions and what was delivered.
struct RxCursor {
    next_avail: u16,
    avail: u16,
    used: u16,
    /// Frames and bytes delivered, added to the port's counters once per batch.
    tx_packets: u64,
    tx_bytes: u64,
    /// Set when the ring ran out of buffers: later frames of the batch are dropped.
    out_of_buffers: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct RxChain {
    head: u16,
    cap: u32,
}

/// Per-queue bookkeeping of one PMD.
#[derive(Debug, Clone, Copy, Default)]
struct QueueState {
    /// Connection id for which kicks were last disabled (0: none).
    kicks_off_for: u64,
}

/// One PMD thread's data-path state. Public so benches and tests can drive it without
/// spawning a thread.
pub struct Pmd {
    switch: Arc<Switch>,
    shared: Arc<PmdShared>,
    pkts: Vec<Pkt>,
    segs: Vec<Seg>,
    heads: Vec<u16>,
    learns: Vec<Learn>,
    dests: Vec<PortId>,
    sel: Vec<u16>,
    rx_segs: Vec<Seg>,
    rx_chains: Vec<RxChain>,
    qstate: Vec<QueueState>,
    cache: FlowCache<Decision>,
    use_cache: bool,
    /// A frame gathered from guest memory for software offloads (up to 64 KiB).
    scratch: Vec<u8>,
    /// Segments made by software TSO; reused, grown as needed.
    seg_bufs: Vec<Vec<u8>>,
    /// ACL generation last seen per port, to zero this PMD's rule counters on edits.
    acl_seen: Vec<u64>,
    /// Rx descriptors of one AF_XDP burst.
    xframes: Vec<crate::ports::afxdp::RxFrame>,
    /// Completed reads of one tap burst: (buffer offset, bytes).
    tap_reads: Vec<(u32, u32)>,
}

impl Pmd {
    /// The data-path state of PMD `index` of `switch`.
    pub fn new(switch: Arc<Switch>, index: usize) -> Self {
        let shared = switch.pmds[index].clone();
        let nq = shared.queues.len();
        Pmd {
            shared,
            pkts: Vec::with_capacity(BURST),
            segs: Vec::with_capacity(BURST * crate::ports::vhost::virtq::MAX_CHAIN_DESCS),
            heads: Vec::with_capacity(BURST),
            learns: Vec::with_capacity(BURST),
            dests: Vec::with_capacity(BURST),
            sel: Vec::with_capacity(BURST),
            rx_segs: Vec::with_capacity(MAX_RX_CHAINS * 4),
            rx_chains: Vec::with_capacity(MAX_RX_CHAINS),
            qstate: vec![QueueState::default(); nq],
            cache: FlowCache::new(EmcConfig {
                insert_inv_prob: switch.config.emc_insert_inv_prob,
                ..EmcConfig::default()
            }),
            use_cache: switch.config.flow_cache,
            scratch: Vec::with_capacity(crate::ports::vhost::virtq::MAX_CHAIN_BYTES as usize),
            seg_bufs: Vec::new(),
            acl_seen: vec![0; switch.ports.len()],
            xframes: Vec::with_capacity(BURST),
            tap_reads: Vec::with_capacity(BURST),
            switch,
        }
    }

    /// Polls every owned transmit queue once; returns the number of chains processed.
    pub fn poll_once(&mut self) -> usize {
        if self.shared.dump_request.load(Ordering::Acquire) {
            self.dump_flows();
        }
        let mut work = 0;
        let switch = self.switch.clone();
        for i in 0..self.shared.queues.len() {
            let (port, q) = self.shared.queues[i];
            let port = &switch.ports[port as usize];
            work += match &port.backend {
                Backend::Vhost => self.process_txq(port, q, i),
                Backend::Afxdp(x) => self.process_xsk(port, x, q),
                Backend::Tap(t) => self.process_tap(port, t),
            };
        }
        work
    }

    /// Runs the PMD loop until shutdown.
    pub fn run(mut self, mode: PollMode) {
        let mut idle_rounds: u32 = 0;
        let mut last = cycles();
        while !self.switch.stopping() {
            let work = self.poll_once();
            let now = cycles();
            let c = &self.shared.counters;
            if work > 0 {
                c.busy_cycles.add(now.wrapping_sub(last));
                idle_rounds = 0;
            } else {
                c.idle_cycles.add(now.wrapping_sub(last));
                idle_rounds = idle_rounds.saturating_add(1);
                let sleep = match mode {
                    PollMode::Busy => false,
                    PollMode::Adaptive => idle_rounds >= ADAPTIVE_IDLE_ROUNDS,
                    PollMode::Interrupt => true,
                };
                if sleep {
                    self.sleep();
                    idle_rounds = 0;
                } else {
                    std::hint::spin_loop();
                }
            }
            last = cycles();
            if work == 0 {
                // Sleeping time counts as idle.
                self.shared.counters.idle_cycles.add(last.wrapping_sub(now));
            }
        }
    }

    /// Enables kicks on every owned transmit queue and sleeps until one is kicked, the
    /// switch changes, or one second passes. Does not sleep if buffers arrived meanwhile.
    fn sleep(&mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(self.shared.queues.len() + 1);
        fds.push(libc::pollfd {
            fd: self.shared.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // Keeps the rings' kick fds open while we poll them.
        let mut held: Vec<Arc<Connection>> = Vec::new();
        let mut pending = false;
        // AF_XDP sockets (POLLIN: rx ring not empty) and tap rx rings (POLLIN: a read
        // completed); polled, never read.
        let mut host_fds: Vec<libc::pollfd> = Vec::new();
        for (i, &(port, q)) in self.shared.queues.iter().enumerate() {
            self.qstate[i].kicks_off_for = 0;
            let fd = match &self.switch.ports[port as usize].backend {
                Backend::Vhost => None,
                Backend::Afxdp(x) => Some(x.xsks[usize::from(q)].fd()),
                Backend::Tap(t) => Some(t.poll_fd()),
            };
            if let Some(fd) = fd {
                host_fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                continue;
            }
            let guard = self.switch.ports[port as usize].conn.load_full();
            let Some(conn) = guard else { continue };
            let Some(vring) = conn.vrings.get(2 * usize::from(q) + 1) else {
                continue;
            };
            let st = vring.get_ref();
            if !st.get_queue().ready() || !st.is_enabled() {
                continue;
            }
            let mem = conn.mem.memory();
            if let Some(ring) = SplitRing::new(&mem, st.get_queue()) {
                pending |= ring.set_kicks(true, st.get_queue().next_avail());
            }
            if let Some(kick) = st.get_kick() {
                fds.push(libc::pollfd {
                    fd: kick.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            drop(st);
            held.push(conn);
        }
        if pending {
            return;
        }
        self.shared.counters.sleeps.add(1);
        let eventfds = fds.len();
        fds.extend_from_slice(&host_fds);
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs; every fd in it is
        // open for the duration of the call (the wake fd is owned by `self.shared`, the
        // kick fds by the connections in `held`).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1000) };
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
        drop(held);
    }

    /// Processes one burst of transmit queue `q` of `src`. Returns chains processed.
    fn process_txq(&mut self, src: &Port, q: u16, qi: usize) -> usize {
        let guard = src.conn.load();
        let Some(conn) = guard.as_ref() else { return 0 };
        let Some(vring) = conn.vrings.get(2 * usize::from(q) + 1) else {
            return 0;
        };
        let mut st = vring.get_mut();
        if !st.is_enabled() || !st.get_queue().ready() {
            return 0;
        }
        let mem = conn.mem.memory();
        let queue = st.get_queue_mut();
        let Some(ring) = SplitRing::new(&mem, queue) else {
            return 0;
        };
        let next = queue.next_avail();
        if self.qstate[qi].kicks_off_for != conn.id {
            ring.set_kicks(false, next);
            self.qstate[qi].kicks_off_for = conn.id;
        }
        let pending = ring.avail_idx().wrapping_sub(next);
        if pending == 0 || pending > ring.size() {
            // pending > size: the driver published an impossible index; wait for it to
            // be reset rather than walk garbage.
            return 0;
        }
        let n = usize::from(pending).min(BURST);
        let src_hdr = conn.hdr_len();
        let src_offloads = src.offloads
            && (conn.has(virtio_bindings::virtio_net::VIRTIO_NET_F_CSUM)
                || conn.has(virtio_bindings::virtio_net::VIRTIO_NET_F_HOST_TSO4)
                || conn.has(virtio_bindings::virtio_net::VIRTIO_NET_F_HOST_TSO6));
        self.pkts.clear();
        self.segs.clear();
        // Heads first, prefetching their descriptors, so the descriptor misses of the
        // burst overlap instead of serializing.
        self.heads.clear();
        for i in 0..n {
            let head = ring.avail_entry(next.wrapping_add(i as u16));
            ring.prefetch_desc(head);
            self.heads.push(head);
        }
        for i in 0..n {
            let head = self.heads[i];
            let seg_start = self.segs.len() as u32;
            // The usual chain is one buffer: taken in one step, and its slice (checked
            // to lie in guest memory) serves the prefetch and the header read below.
            let single = ring.single_readable(head);
            let walked = match single {
                Some((seg, _)) => {
                    self.segs.push(seg);
                    Ok(seg.len)
                }
                None => ring.walk_chain(head, false, &mut self.segs),
            };
            let (len, action) = match walked {
                Ok(len) if len < src_hdr + 14 => (0, Action::Drop(DropReason::Runt)),
                Ok(len) => (len - src_hdr, Action::Flood),
                Err(r) => (0, Action::Drop(r)),
            };
            let read_hdr = src_offloads && !matches!(action, Action::Drop(_));
            let mut vhdr = [0u8; 10];
            if let Some((_, buf)) = single {
                // The Ethernet header, read by classify below; the virtio-net header
                // fields as two loads.
                prefetch(buf.ptr_guard().as_ptr().wrapping_add(src_hdr as usize));
                if read_hdr {
                    vhdr = read_vhdr(&buf);
                }
            } else {
                if let Some(first) = self.segs.get(seg_start as usize) {
                    ring.mem()
                        .prefetch(first.addr + u64::from(src_hdr.min(first.len - 1)));
                }
                if read_hdr {
                    read_sg(ring.mem(), &self.segs[seg_start as usize..], 0, &mut vhdr);
                }
            }
            self.pkts.push(Pkt {
                head,
                seg_start,
                seg_end: self.segs.len() as u32,
                frame_len: len,
                action,
                vhdr,
            });
        }
        queue.set_next_avail(next.wrapping_add(n as u16));

        let bs = GuestBurst {
            mem: ring.mem(),
            hdr: src_hdr,
        };
        self.classify(src, &bs);
        self.deliver_all(src, q, &bs);

        // Complete the transmit chains: one used.idx update for the burst.
        let queue = st.get_queue_mut();
        let old_used = queue.next_used();
        let mut used = old_used;
        for p in &self.pkts {
            ring.write_used(used, p.head, 0);
            used = used.wrapping_add(1);
        }
        ring.publish_used(used);
        queue.set_next_used(used);
        if ring.needs_interrupt(old_used, used) {
            let _ = st.signal_used_queue();
        }
        let c = &self.shared.counters;
        c.packets.add(n as u64);
        c.batches.add(1);
        self.shared.queue_packets[qi].add(n as u64);
        n
    }

    /// Reads each frame's headers, decides its action through the flow cache (last-flow
    /// check, then the exact-match cache, then the slow path), and learns source MACs.
    fn classify<'m, S: BurstSrc<'m>>(&mut self, src: &Port, bs: &S) {
        let counters = &self.shared.port_counters[src.id as usize];
        // The generation is read before the state it covers (ACLs, FDB), so a decision is
        // never cached under a generation newer than the state it was made from.
        let generation = self.switch.generation();
        let acls = self.switch.acls.load();
        let acl = &acls[src.id as usize];
        if acl.generation() != self.acl_seen[src.id as usize] {
            self.acl_seen[src.id as usize] = acl.generation();
            for c in &self.shared.acl_drops[src.id as usize] {
                c.add(c.get().wrapping_neg());
            }
            self.shared.acl_gen_seen[src.id as usize].store(acl.generation(), Ordering::Release);
        }
        let l2_only = acl.is_empty();
        let fdb = self.switch.fdb.reader();
        self.learns.clear();
        let mut rx_bytes = 0u64;
        let mut rx_packets = 0u64;
        let mut last_learn = NO_LEARN;
        // With the cache, every key is extracted and hashed first and its EMC entry
        // prefetched, so the burst's cache misses overlap; the decisions follow.
        // (Bursts never exceed BURST; the bound only keeps the arrays below in range.)
        let cached = self.use_cache && !l2_only && self.pkts.len() <= BURST;
        let mut keys = [FlowKey::default(); BURST];
        let mut hashes = [0u32; BURST];
        // Each frame's first bytes, copied from the guest. One buffer for the burst:
        // only the bytes just read (`..n`) are ever looked at.
        let mut hdr = [0u8; KEY_BYTES];
        if cached {
            for (i, p) in self.pkts.iter_mut().enumerate() {
                if let Action::Drop(_) = p.action {
                    continue;
                }
                // The first 64 bytes first (the common IPv4 key needs 40), in one copy
                // whose stores `extract_ipv4_l4`'s loads can be forwarded from; the rest
                // only for the general parser.
                let want = (p.frame_len as usize).min(KEY_BYTES);
                let first = want.min(64);
                let n = bs.read(p, &self.segs, 0, &mut hdr[..first]);
                if n < 14 {
                    // Counted below with the other drops.
                    p.action = Action::Drop(DropReason::Runt);
                    continue;
                }
                keys[i] = match FlowKey::extract_ipv4_l4(&hdr[..n], u32::from(src.id), None) {
                    Some(k) => k,
                    None => {
                        let n = if n == first && want > first {
                            first + bs.read(p, &self.segs, first as u32, &mut hdr[first..want])
                        } else {
                            n
                        };
                        FlowKey::extract(&hdr[..n], u32::from(src.id), None)
                    }
                };
                hashes[i] = keys[i].flow_hash();
                self.cache.prefetch_bucket(hashes[i]);
            }
            for &h in &hashes[..self.pkts.len()] {
                self.cache.prefetch_entry(h);
            }
        }
        // The previous classified packet of the burst (`usize::MAX`: none yet) and its
        // decision, for the last-flow check. Two plain variables rather than an
        // `Option<(usize, Decision)>`, which the compiler kept in memory and rebuilt from
        // differently sized pieces each packet (a stalled store-to-load forward).
        let mut last = usize::MAX;
        let mut last_d = Decision {
            action: Action::Flood,
            rule: NO_RULE,
            learn: NO_LEARN,
        };
        for i in 0..self.pkts.len() {
            // Borrowed, not copied: with a copy in hand the compiler writes the new
            // action back as one wide store merged with the copy's other fields, and
            // that store's wide load of the just-made decision waits for its pieces.
            let p = &self.pkts[i];
            if let Action::Drop(r) = p.action {
                counters.drop(r, 1);
                continue;
            }
            let d = if cached {
                rx_packets += 1;
                rx_bytes += u64::from(p.frame_len);
                let (key, hash) = (&keys[i], hashes[i]);
                let d = if last != usize::MAX && hashes[last] == hash && keys[last] == *key {
                    self.cache.stats_mut().last_flow_hits += 1;
                    last_d
                } else {
                    match self.cache.lookup(key, hash, generation) {
                        Some(d) => *d,
                        None => {
                            let d = slow_path(src, key, &fdb, acl);
                            self.cache.insert(key, hash, d, generation);
                            d
                        }
                    }
                };
                last = i;
                last_d = d;
                d
            } else {
                // Without ACL rules the slow path is the FDB alone: the Ethernet header
                // is all it needs, and two FDB lookups cost less than building a flow
                // key, so such ports skip the flow cache (it exists to skip expensive
                // slow paths).
                let want = if l2_only {
                    14
                } else {
                    (p.frame_len as usize).min(KEY_BYTES)
                };
                let n = bs.read(p, &self.segs, 0, &mut hdr[..want]);
                if n < 14 {
                    self.pkts[i].action = Action::Drop(DropReason::Runt);
                    counters.drop(DropReason::Runt, 1);
                    continue;
                }
                rx_packets += 1;
                rx_bytes += u64::from(p.frame_len);
                if l2_only {
                    let ethertype = u16::from_be_bytes([hdr[12], hdr[13]]);
                    let dmac: [u8; 6] = [hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5]];
                    let smac: [u8; 6] = [hdr[6], hdr[7], hdr[8], hdr[9], hdr[10], hdr[11]];
                    let tagged = ethertype == 0x8100 || ethertype == 0x88a8;
                    l2_decide(src, &smac, &dmac, tagged, &fdb)
                } else {
                    slow_path(
                        src,
                        &FlowKey::extract(&hdr[..n], u32::from(src.id), None),
                        &fdb,
                        acl,
                    )
                }
            };
            if d.learn != NO_LEARN && d.learn != last_learn {
                last_learn = d.learn;
                if let Some(l) = fdb.observe(d.learn, src.id) {
                    if !self.learns.contains(&l) {
                        self.learns.push(l);
                    }
                }
            }
            if let Action::Drop(r) = d.action {
                counters.drop(r, 1);
                if let Some(c) = self.shared.acl_drops[src.id as usize].get(usize::from(d.rule)) {
                    c.add(1);
                }
            }
            self.pkts[i].action = d.action;
        }
        drop(fdb);
        counters.rx_packets.add(rx_packets);
        counters.rx_bytes.add(rx_bytes);
        if !self.learns.is_empty() {
            self.switch.fdb.learn(&self.learns);
        }
        let s = self.cache.stats();
        let m = &self.shared.cache_stats;
        for (c, v) in m.iter().zip([
            s.last_flow_hits,
            s.emc_hits,
            s.misses,
            s.stale_misses,
            s.insertions,
            s.evictions,
        ]) {
            c.add(v.wrapping_sub(c.get()));
        }
    }

    /// Answers a `vswitchctl flows` request: one line per cached flow.
    fn dump_flows(&mut self) {
        let generation = self.switch.generation();
        let lines: Vec<String> = self
            .cache
            .iter()
            .map(|e| {
                format!(
                    "{} {} actions={}",
                    e.key,
                    if e.generation == generation {
                        "current"
                    } else {
                        "stale"
                    },
                    describe(&self.switch, e.action)
                )
            })
            .collect();
        *self.shared.dump.lock().unwrap_or_else(|e| e.into_inner()) = Some(lines);
        self.shared.dump_request.store(false, Ordering::Release);
    }

    /// Groups the burst by destination and delivers each group in one batch.
    fn deliver_all<'m, S: BurstSrc<'m>>(&mut self, src: &Port, q: u16, bs: &S) {
        self.dests.clear();
        let mut flood = false;
        for p in &self.pkts {
            match p.action {
                Action::Port(d) if !self.dests.contains(&d) => self.dests.push(d),
                Action::Flood => flood = true,
                _ => {}
            }
        }
        if flood {
            for port in &self.switch.ports {
                if port.id != src.id
                    && port.vlan == src.vlan
                    && !self.dests.contains(&port.id)
                    && port.has_driver()
                {
                    self.dests.push(port.id);
                }
            }
        }
        // A flooded frame that reaches no port is dropped here, and counted.
        let flood_targets = self.dests.iter().any(|&d| {
            let p = &self.switch.ports[d as usize];
            p.vlan == src.vlan && p.id != src.id
        });
        if flood && !flood_targets {
            let n = self
                .pkts
                .iter()
                .filter(|p| p.action == Action::Flood)
                .count();
            self.shared.port_counters[src.id as usize].drop(DropReason::NoDestination, n as u64);
        }
        for di in 0..self.dests.len() {
            let d = self.dests[di];
            self.sel.clear();
            for (i, p) in self.pkts.iter().enumerate() {
                let to_d = match p.action {
                    Action::Port(x) => x == d,
                    Action::Flood => true,
                    Action::Drop(_) => false,
                };
                if to_d {
                    self.sel.push(i as u16);
                }
            }
            if self.sel.is_empty() {
                continue;
            }
            let switch = self.switch.clone();
            let dst = &switch.ports[d as usize];
            match &dst.backend {
                Backend::Vhost => self.deliver(dst, q, bs),
                Backend::Afxdp(x) => self.deliver_xsk(dst, x, q, bs),
                Backend::Tap(t) => self.deliver_tap(dst, t, bs),
            }
        }
    }

    /// Delivers the frames in `self.sel` into `dst`'s receive queue: one batch.
    fn deliver<'m, S: BurstSrc<'m>>(&mut self, dst: &Port, src_q: u16, bs: &S) {
        // A clone of the Arc (once per batch) so `soften` can borrow `self` mutably.
        let shared = self.shared.clone();
        let counters = &shared.port_counters[dst.id as usize];
        let guard = dst.conn.load();
        let Some(conn) = guard.as_ref() else {
            counters.drop(DropReason::PortDown, self.sel.len() as u64);
            return;
        };
        // Same queue pair index as the source when the destination has it (keeps each
        // source queue's frames in order and spreads multiqueue traffic), else pair 0.
        let pairs = conn.vrings.len() / 2;
        if pairs == 0 {
            counters.drop(DropReason::PortDown, self.sel.len() as u64);
            return;
        }
        let want = usize::from(src_q) % pairs;
        let mut st = conn.vrings[2 * want].get_mut();
        if want != 0 && (!st.is_enabled() || !st.get_queue().ready()) {
            drop(st);
            st = conn.vrings[0].get_mut();
        }
        if !st.is_enabled() || !st.get_queue().ready() {
            counters.drop(DropReason::PortDown, self.sel.len() as u64);
            return;
        }
        let dmem = conn.mem.memory();
        let dst_hdr = conn.hdr_len();
        let mergeable = conn.mergeable();
        let queue = st.get_queue_mut();
        let Some(ring) = SplitRing::new(&dmem, queue) else {
            counters.drop(DropReason::PortDown, self.sel.len() as u64);
            return;
        };
        let next_avail = queue.next_avail();
        let avail = ring.avail_idx();
        if avail.wrapping_sub(next_avail) > ring.size() {
            counters.drop(DropReason::BadDescriptor, self.sel.len() as u64);
            return;
        }
        // Prefetch the receive descriptors this batch will most likely take.
        let ahead = usize::from(avail.wrapping_sub(next_avail)).min(self.sel.len());
        for k in 0..ahead {
            ring.prefetch_desc(ring.avail_entry(next_avail.wrapping_add(k as u16)));
        }
        let old_used = queue.next_used();
        let used = old_used;
        let mut cur = RxCursor {
            next_avail,
            avail,
            used,
            tx_packets: 0,
            tx_bytes: 0,
            out_of_buffers: false,
        };
        let guest_csum = conn.has(virtio_bindings::virtio_net::VIRTIO_NET_F_GUEST_CSUM);
        let guest_tso4 = conn.has(virtio_bindings::virtio_net::VIRTIO_NET_F_GUEST_TSO4);
        let guest_tso6 = conn.has(virtio_bindings::virtio_net::VIRTIO_NET_F_GUEST_TSO6);
        let guest_ecn = conn.has(virtio_bindings::virtio_net::VIRTIO_NET_F_GUEST_ECN);
        for si in 0..self.sel.len() {
            // Borrowed, not copied: a copy of the whole `Pkt` is a wide load over the
            // `action` just stored by `classify`, which has to wait for that store.
            let p = &self.pkts[usize::from(self.sel[si])];
            if cur.out_of_buffers {
                counters.drop(DropReason::NoRxBuffer, 1);
                continue;
            }
            let accepts = !p.offload()
                || ((p.vhdr[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM == 0 || guest_csum)
                    && (p.vhdr[1] & VIRTIO_NET_HDR_GSO_ECN == 0 || guest_ecn)
                    && match p.vhdr[1] & !VIRTIO_NET_HDR_GSO_ECN {
                        0 => true,
                        VIRTIO_NET_HDR_GSO_TCPV4 => guest_tso4,
                        VIRTIO_NET_HDR_GSO_TCPV6 => guest_tso6,
                        _ => false,
                    });
            if accepts {
                // Whole, with the offload fields passed through (virtio 1.2 §5.1.6.4).
                let mut hdr = [0u8; 12];
                hdr[..10].copy_from_slice(&p.vhdr);
                hdr[0] &= VIRTIO_NET_HDR_F_NEEDS_CSUM;
                let src = bs.frame(p, &self.segs);
                put_frame(
                    &ring,
                    &mut cur,
                    &mut self.rx_segs,
                    &mut self.rx_chains,
                    mergeable,
                    dst_hdr,
                    hdr,
                    src,
                    p.frame_len,
                    counters,
                );
                continue;
            }
            // Software offload: gather the frame, then segment or complete its checksum.
            let p = *p;
            let Some(n) = self.soften(&p, bs, counters) else {
                continue;
            };
            for k in 0..n.max(1) {
                let f = softened(&self.scratch, &self.seg_bufs, n, k);
                put_frame(
                    &ring,
                    &mut cur,
                    &mut self.rx_segs,
                    &mut self.rx_chains,
                    mergeable,
                    dst_hdr,
                    [0; 12],
                    FrameSrc::Host(f),
                    f.len() as u32,
                    counters,
                );
                if cur.out_of_buffers {
                    break;
                }
            }
        }
        let RxCursor {
            next_avail,
            used,
            tx_packets,
            tx_bytes,
            ..
        } = cur;
        ring.publish_used(used);
        queue.set_next_avail(next_avail);
        queue.set_next_used(used);
        let notify = ring.needs_interrupt(old_used, used);
        if notify {
            let _ = st.signal_used_queue();
        }
        counters.tx_packets.add(tx_packets);
        counters.tx_bytes.add(tx_bytes);
    }
}

/// Frame `k` of what [`Pmd::soften`] returned `n` for: `scratch` when `n` is 0 (the
/// frame with its checksum completed), else segment `k` of `segs[..n]`.
#[inline]
fn softened<'a>(scratch: &'a [u8], segs: &'a [Vec<u8>], n: usize, k: usize) -> &'a [u8] {
    if n == 0 {
        scratch
    } else {
        &segs[k]
    }
}

/// Host ports: AF_XDP uplinks and taps as sources and destinations.
impl Pmd {
    /// Processes one burst of AF_XDP socket `q` of uplink `src`: rx descriptors → classify
    /// (headers read from the UMEM) → deliver per destination → frames back to the fill
    /// ring. Returns frames processed.
    fn process_xsk(&mut self, src: &Port, x: &crate::ports::afxdp::AfxdpPort, q: u16) -> usize {
        let xsk = &x.xsks[usize::from(q)];
        let mut rx = xsk.rx.lock().unwrap_or_else(|e| e.into_inner());
        let drops = rx.receive(&mut self.xframes, BURST as u32);
        let n = self.xframes.len();
        let counters = &self.shared.port_counters[src.id as usize];
        if drops.too_big > 0 {
            counters.drop(DropReason::FrameTooBig, drops.too_big);
        }
        if drops.bad > 0 {
            counters.drop(DropReason::Runt, drops.bad);
        }
        if n == 0 {
            rx.recycle();
            return 0;
        }
        xsk.rx_frames.add(n as u64);
        self.pkts.clear();
        self.segs.clear();
        let (base, len) = xsk.area();
        for f in &self.xframes {
            self.pkts.push(Pkt {
                head: 0,
                seg_start: f.off,
                seg_end: if f.linear { IN_LINEAR } else { 0 },
                frame_len: f.len,
                action: Action::Flood,
                vhdr: [0; 10],
            });
        }
        let bs = HostBurst {
            base,
            len,
            linear: rx.linear(),
        };
        self.classify(src, &bs);
        self.deliver_all(src, q, &bs);
        rx.recycle();
        let c = &self.shared.counters;
        c.packets.add(n as u64);
        c.batches.add(1);
        n
    }

    /// Processes one burst of completed tap reads: each buffer is a virtio-net header
    /// (whose offload fields travel with the frame) and the frame.
    fn process_tap(&mut self, src: &Port, t: &crate::ports::tap::TapPort) -> usize {
        let mut rx = t.rx.lock().unwrap_or_else(|e| e.into_inner());
        let (n, runts) = rx.receive(&mut self.tap_reads, BURST);
        if runts > 0 {
            self.shared.port_counters[src.id as usize].drop(DropReason::Runt, runts);
        }
        if n == 0 {
            rx.recycle();
            return 0;
        }
        self.pkts.clear();
        self.segs.clear();
        let (base, len) = rx.base();
        for &(off, got) in &self.tap_reads {
            let hdr_len = crate::ports::tap::VNET_HDR_LEN;
            let mut vhdr = [0u8; 10];
            // SAFETY: the read into this buffer completed (`got` bytes from `off`) and it
            // is not resubmitted before `recycle` below.
            let h = unsafe { std::slice::from_raw_parts(base.add(off as usize), 10) };
            vhdr.copy_from_slice(h);
            // Only NEEDS_CSUM and the GSO fields mean anything to the destinations.
            vhdr[0] &= VIRTIO_NET_HDR_F_NEEDS_CSUM;
            self.pkts.push(Pkt {
                head: 0,
                seg_start: off + hdr_len,
                seg_end: 0,
                frame_len: got - hdr_len,
                action: Action::Flood,
                vhdr,
            });
        }
        let bs = HostBurst {
            base,
            len,
            linear: &[],
        };
        self.classify(src, &bs);
        self.deliver_all(src, 0, &bs);
        rx.recycle();
        let c = &self.shared.counters;
        c.packets.add(n as u64);
        c.batches.add(1);
        n
    }

    /// Makes a frame that carries an offload (partial checksum or TSO) plain, for a
    /// destination that takes no offload metadata (an AF_XDP uplink): gathers it into
    /// `scratch` and completes its checksum (returns 0: the frame is `scratch`) or
    /// segments it (returns n: the frames are `seg_bufs[..n]`). Drops are counted.
    fn soften<'m, S: BurstSrc<'m>>(
        &mut self,
        p: &Pkt,
        bs: &S,
        counters: &crate::model::stats::PortCounters,
    ) -> Option<usize> {
        let f = u16::from_le_bytes;
        let meta = geneve::GsoMeta::from_virtio_net_hdr(
            p.vhdr[0],
            p.vhdr[1],
            f([p.vhdr[2], p.vhdr[3]]),
            f([p.vhdr[4], p.vhdr[5]]),
            f([p.vhdr[6], p.vhdr[7]]),
            f([p.vhdr[8], p.vhdr[9]]),
        );
        self.scratch.resize(p.frame_len as usize, 0);
        let got = bs.read(p, &self.segs, 0, &mut self.scratch);
        let Ok(meta) = meta else {
            counters.drop(DropReason::BadOffload, 1);
            return None;
        };
        if got != self.scratch.len() {
            counters.drop(DropReason::BadDescriptor, 1);
            return None;
        }
        if p.vhdr[1] & !VIRTIO_NET_HDR_GSO_ECN == 0 {
            if geneve::complete_checksum(&mut self.scratch, &meta).is_err() {
                counters.drop(DropReason::BadOffload, 1);
                return None;
            }
            counters.csum_completed.add(1);
            return Some(0);
        }
        let Ok(plan) = geneve::SegmentPlan::new(&self.scratch, &meta, 0) else {
            counters.drop(DropReason::BadOffload, 1);
            return None;
        };
        let n = plan.count();
        if self.seg_bufs.len() < n {
            self.seg_bufs.resize_with(n, Vec::new);
        }
        for (i, b) in self.seg_bufs[..n].iter_mut().enumerate() {
            b.resize(plan.segment_len(i), 0);
        }
        if geneve::segment(&self.scratch, &meta, None, &mut self.seg_bufs[..n]).is_err() {
            counters.drop(DropReason::BadOffload, 1);
            return None;
        }
        counters.segmented.add(1);
        Some(n)
    }

    /// Delivers the frames in `self.sel` to uplink `x` in one AF_XDP tx batch, on the
    /// socket with the source queue's index (modulo the sockets): each frame is copied
    /// into a free UMEM tx frame (from guest memory with `read_sg`, or from host memory).
    fn deliver_xsk<'m, S: BurstSrc<'m>>(
        &mut self,
        dst: &Port,
        x: &crate::ports::afxdp::AfxdpPort,
        src_q: u16,
        bs: &S,
    ) {
        let shared = self.shared.clone();
        let counters = &shared.port_counters[dst.id as usize];
        if !x.link_up() {
            counters.drop(DropReason::PortDown, self.sel.len() as u64);
            return;
        }
        let xsk = &x.xsks[usize::from(src_q) % x.xsks.len()];
        let mut tx = xsk.tx.lock().unwrap_or_else(|e| e.into_inner());
        tx.begin();
        let (mut packets, mut bytes, mut lost) = (0u64, 0u64, 0u64);
        let max = x.max_tx_frame();
        let chunk = crate::ports::afxdp::FRAME_SIZE;
        for si in 0..self.sel.len() {
            let p = self.pkts[usize::from(self.sel[si])];
            let soft = if p.offload() {
                match self.soften(&p, bs, counters) {
                    Some(n) => Some(n),
                    None => continue,
                }
            } else {
                None
            };
            for k in 0..soft.unwrap_or(0).max(1) {
                let made = soft.map(|n| softened(&self.scratch, &self.seg_bufs, n, k));
                let len = made.map_or(p.frame_len, |f| f.len() as u32);
                if len > max {
                    counters.drop(DropReason::FrameTooBig, 1);
                    continue;
                }
                // One tx frame, or (multi-buffer) a chain of them.
                let pieces = len.div_ceil(chunk).max(1);
                let (lost_early, room) = tx.make_room(pieces as usize);
                lost += lost_early as u64;
                if !room {
                    counters.drop(DropReason::NoTxBuffer, 1);
                    continue;
                }
                for i in 0..pieces {
                    let addr = tx.take().expect("free frames counted above");
                    let off = i * chunk;
                    let plen = (len - off).min(chunk);
                    // SAFETY: `addr` was just taken from this socket's free list under
                    // its tx lock, so no one else touches the frame.
                    let buf = unsafe { xsk.tx_frame(addr) };
                    let buf = &mut buf[..plen as usize];
                    let (o, e) = (off as usize, (off + plen) as usize);
                    match made {
                        None => {
                            bs.read(&p, &self.segs, off, buf);
                        }
                        Some(f) => buf.copy_from_slice(&f[o..e]),
                    }
                    tx.push_frag(addr, plen, i + 1 < pieces);
                }
                packets += 1;
                bytes += u64::from(len);
            }
        }
        lost += tx.commit() as u64;
        drop(tx);
        if lost > 0 {
            counters.drop(DropReason::NoTxBuffer, lost);
        }
        counters.tx_packets.add(packets - lost.min(packets));
        counters.tx_bytes.add(bytes);
    }

    /// Delivers the frames in `self.sel` to tap `t` in one io_uring submission: each
    /// frame keeps its offload metadata in the virtio-net header before it.
    fn deliver_tap<'m, S: BurstSrc<'m>>(
        &mut self,
        dst: &Port,
        t: &crate::ports::tap::TapPort,
        bs: &S,
    ) {
        let shared = self.shared.clone();
        let counters = &shared.port_counters[dst.id as usize];
        if !t.link_up() {
            counters.drop(DropReason::PortDown, self.sel.len() as u64);
            return;
        }
        let hdr = crate::ports::tap::VNET_HDR_LEN as usize;
        let mut tx = t.tx.lock().unwrap_or_else(|e| e.into_inner());
        tx.begin();
        for si in 0..self.sel.len() {
            let p = self.pkts[usize::from(self.sel[si])];
            let len = p.frame_len as usize;
            if hdr + len > crate::ports::tap::BUF_SIZE as usize {
                counters.drop(DropReason::FrameTooBig, 1);
                continue;
            }
            let Some(buf) = tx.next_buf() else {
                counters.drop(DropReason::NoTxBuffer, 1);
                continue;
            };
            buf[..10].copy_from_slice(&p.vhdr);
            buf[0] &= VIRTIO_NET_HDR_F_NEEDS_CSUM;
            buf[10..12].fill(0);
            let got = bs.read(&p, &self.segs, 0, &mut buf[hdr..hdr + len]);
            if got != len {
                counters.drop(DropReason::BadDescriptor, 1);
                continue;
            }
            tx.push((hdr + len) as u32);
        }
        let (ok, bytes, bad) = tx.commit();
        drop(tx);
        if bad > 0 {
            counters.drop(DropReason::TxError, bad);
        }
        counters.tx_packets.add(ok);
        counters.tx_bytes.add(bytes);
    }
}

/// Delivers one frame into the receive ring: takes enough chains (mergeable buffers) for
/// the header and `frame_len` bytes, writes the header (`hdr` with num_buffers filled in)
/// and the frame, writes the used elements, and adds the frame to the batch's tx totals.
/// On failure nothing is delivered: chains taken are put back (or, if a malformed chain
/// was consumed meanwhile, returned empty), the drop is counted under its reason, and
/// running out of buffers marks the batch so its later frames are dropped too.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn put_frame(
    ring: &SplitRing<'_>,
    cur: &mut RxCursor,
    rx_segs: &mut Vec<Seg>,
    rx_chains: &mut Vec<RxChain>,
    mergeable: bool,
    dst_hdr: u32,
    mut hdr: [u8; 12],
    src: FrameSrc<'_, '_>,
    frame_len: u32,
    counters: &crate::model::stats::PortCounters,
) {
    // The common case in one step, inlined into the delivery loop: the next receive
    // buffer is a single descriptor that holds the header and the whole frame.
    let need = dst_hdr + frame_len;
    if cur.next_avail == cur.avail {
        cur.avail = ring.avail_idx();
    }
    if cur.next_avail != cur.avail {
        let head = ring.avail_entry(cur.next_avail);
        if let Some(buf) = ring.single_writable(head, need) {
            hdr[10..12].copy_from_slice(&1u16.to_le_bytes());
            if fill_buffer(&buf, &hdr, dst_hdr as usize, &src) == need as usize {
                cur.next_avail = cur.next_avail.wrapping_add(1);
                ring.write_used(cur.used, head, need);
                cur.used = cur.used.wrapping_add(1);
                cur.tx_packets += 1;
                cur.tx_bytes += u64::from(frame_len);
                return;
            }
        }
    }
    if let Err(r) = put_frame_inner(
        ring, cur, rx_segs, rx_chains, mergeable, dst_hdr, hdr, src, frame_len, counters,
    ) {
        counters.drop(r, 1);
        cur.out_of_buffers |= r == DropReason::NoRxBuffer;
    } else {
        cur.tx_packets += 1;
        cur.tx_bytes += u64::from(frame_len);
    }
}

/// [`put_frame`] for any other shape: chains, mergeable buffers, malformed or missing
/// buffers.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn put_frame_inner(
    ring: &SplitRing<'_>,
    cur: &mut RxCursor,
    rx_segs: &mut Vec<Seg>,
    rx_chains: &mut Vec<RxChain>,
    mergeable: bool,
    dst_hdr: u32,
    mut hdr: [u8; 12],
    src: FrameSrc<'_, '_>,
    frame_len: u32,
    counters: &crate::model::stats::PortCounters,
) -> Result<(), DropReason> {
    let need = dst_hdr + frame_len;
    let start_avail = cur.next_avail;
    rx_segs.clear();
    rx_chains.clear();
    let mut cap = 0u32;
    let mut fail = None;
    let mut bad_taken = false;
    while cap < need {
        if cur.next_avail == cur.avail {
            cur.avail = ring.avail_idx();
            if cur.next_avail == cur.avail {
                fail = Some(DropReason::NoRxBuffer);
                break;
            }
        }
        if rx_chains.len() == MAX_RX_CHAINS || (!mergeable && !rx_chains.is_empty()) {
            fail = Some(DropReason::FrameTooBig);
            break;
        }
        let head = ring.avail_entry(cur.next_avail);
        cur.next_avail = cur.next_avail.wrapping_add(1);
        match ring.walk_chain(head, true, rx_segs) {
            Ok(c) if c >= dst_hdr || !rx_chains.is_empty() => {
                rx_chains.push(RxChain { head, cap: c });
                cap = cap.saturating_add(c);
            }
            _ => {
                // A malformed (or header-less) receive chain: give it back empty.
                ring.write_used(cur.used, head, 0);
                cur.used = cur.used.wrapping_add(1);
                counters.drop(DropReason::BadDescriptor, 1);
                bad_taken = true;
            }
        }
    }
    if let Some(reason) = fail {
        if bad_taken {
            // A malformed chain was consumed meanwhile, so the available ring cannot be
            // rewound past it: give the good chains back empty too.
            for c in rx_chains.iter() {
                ring.write_used(cur.used, c.head, 0);
                cur.used = cur.used.wrapping_add(1);
            }
        } else {
            // Leave the chains taken for this frame in the available ring.
            cur.next_avail = start_avail;
        }
        return Err(reason);
    }
    hdr[10..12].copy_from_slice(&(rx_chains.len() as u16).to_le_bytes());
    write_sg(ring.mem(), rx_segs, &hdr[..dst_hdr as usize]);
    match src {
        FrameSrc::Guest { mem, segs, skip } => {
            copy_sg(mem, segs, skip, ring.mem(), rx_segs, dst_hdr);
        }
        FrameSrc::Host(data) => {
            write_sg_at(ring.mem(), rx_segs, dst_hdr, data);
        }
    }
    let mut left = need;
    for c in rx_chains.iter() {
        let n = c.cap.min(left);
        ring.write_used(cur.used, c.head, n);
        cur.used = cur.used.wrapping_add(1);
        left -= n;
    }
    Ok(())
}

/// Writes the first `hdr_len` bytes of `hdr` (10 or 12) and then the frame `src` into
/// the contiguous receive buffer `buf`. Returns the bytes written (short only if `src`
/// was shorter than promised).
#[inline(always)]
fn fill_buffer(
    buf: &VolatileSlice<'_>,
    hdr: &[u8; 12],
    hdr_len: usize,
    src: &FrameSrc<'_, '_>,
) -> usize {
    // The header as two stores (8 + 4 or 8 + 2 bytes), not a memcpy call.
    let lo = u64::from_le_bytes([
        hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5], hdr[6], hdr[7],
    ]);
    let Ok(r) = buf.get_ref::<u64>(0) else {
        return 0;
    };
    r.store(lo.to_le());
    let tail = match hdr_len {
        12 => buf
            .get_ref::<u32>(8)
            .map(|r| r.store(u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]).to_le())),
        _ => buf
            .get_ref::<u16>(8)
            .map(|r| r.store(u16::from_le_bytes([hdr[8], hdr[9]]).to_le())),
    };
    let (Ok(()), Ok(rest)) = (tail, buf.offset(hdr_len)) else {
        return 0;
    };
    hdr_len
        + match *src {
            FrameSrc::Guest { mem, segs, skip } => gather_sg(mem, segs, skip, &rest),
            FrameSrc::Host(data) => {
                rest.copy_from(data);
                data.len().min(rest.len())
            }
        }
}

/// The first 10 bytes of `buf` (at least 10 long: the virtio-net header fields every
/// header length has, virtio 1.2 §5.1.6) as one 8-byte and one 2-byte load.
#[inline(always)]
fn read_vhdr(buf: &VolatileSlice<'_>) -> [u8; 10] {
    let lo: u64 = buf.get_ref::<u64>(0).map_or(0, |r| r.load());
    let hi: u16 = buf.get_ref::<u16>(8).map_or(0, |r| r.load());
    let mut v = [0u8; 10];
    v[..8].copy_from_slice(&lo.to_ne_bytes());
    v[8..].copy_from_slice(&hi.to_ne_bytes());
    v
}

/// The slow path: VLAN admission, the ingress ACL, then the FDB. Decides from the flow
/// key and the configuration only, so the decision can be cached for the key.
pub fn slow_path(src: &Port, key: &FlowKey, fdb: &FdbReader<'_>, acl: &Acl) -> Decision {
    if src.vlan != 0 && key.vlan_tci().is_some() {
        return l2_decide(src, &key.eth_src(), &key.eth_dst(), true, fdb);
    }
    let verdict = acl.classify(key);
    if verdict.action == acl::Action::Drop {
        return Decision {
            action: Action::Drop(DropReason::Acl),
            rule: verdict
                .rule
                .map_or(NO_RULE, |r| r.min(usize::from(NO_RULE - 1)) as u16),
            learn: NO_LEARN,
        };
    }
    l2_decide(src, &key.eth_src(), &key.eth_dst(), false, fdb)
}

/// The L2 decision: VLAN admission (`tagged`: the frame carries an 802.1Q/802.1ad tag),
/// source learning, and the destination from the FDB (flood for group and unknown MACs).
#[inline]
pub fn l2_decide(
    src: &Port,
    smac: &[u8; 6],
    dmac: &[u8; 6],
    tagged: bool,
    fdb: &FdbReader<'_>,
) -> Decision {
    let vlan: Vlan = src.vlan;
    if vlan != 0 && tagged {
        return Decision {
            action: Action::Drop(DropReason::VlanTagged),
            rule: NO_RULE,
            learn: NO_LEARN,
        };
    }
    let learn = if smac[0] & 1 == 0 {
        fdb_key(vlan, smac)
    } else {
        NO_LEARN
    };
    let action = if dmac[0] & 1 != 0 {
        Action::Flood
    } else {
        match fdb.lookup(fdb_key(vlan, dmac)) {
            Some(port) if port == src.id => Action::Drop(DropReason::SamePort),
            Some(port) => Action::Port(port),
            None => Action::Flood,
        }
    };
    Decision {
        action,
        rule: NO_RULE,
        learn,
    }
}

fn describe(switch: &Switch, d: &Decision) -> String {
    match d.action {
        Action::Port(p) => switch
            .ports
            .get(p as usize)
            .map_or_else(|| p.to_string(), |p| p.name.clone()),
        Action::Flood => "flood".into(),
        Action::Drop(DropReason::Acl) => format!("drop(acl rule {})", d.rule),
        Action::Drop(r) => format!("drop({})", r.name()),
    }
}
