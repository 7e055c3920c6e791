//! The switch's receive side of a vhost-user port: one burst of descriptor chains from
//! a guest's transmit queue (virtio 1.2 §5.1.6.2), handed to the pipeline in place.
//!
//! Per burst, on a split or a packed ring alike ([`DeviceRing`]): the chains'
//! descriptors are prefetched, each chain is walked and checked (a bad one is counted
//! and completed empty), the frames go to the pipeline as they lie in guest memory, and
//! then every chain taken is completed with one publication and at most one interrupt.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use vhost_user_backend::{VringState, VringT};
use virtio_bindings::virtio_net::{
    VIRTIO_NET_F_CSUM, VIRTIO_NET_F_HOST_ECN, VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO6,
};
use virtio_queue::QueueT;
use vm_memory::{GuestAddressSpace, VolatileMemory, VolatileSlice};

use super::device::{Connection, VIRTIO_F_IN_ORDER};
use super::idle::{Held, IdleWatch};
use super::virtq::{
    prefetch, read_sg, AtomicMem, DeviceRing, Mem, MemView, PackedRing, Seg, SplitRing,
};
use super::VhostPort;
use crate::model::stats::DropReason;
use crate::ports::frame::{
    BurstHandler, FrameLoc, FrameSrc, Pkt, RxBurst, TxOffloads, VirtioNetHdr, BURST,
};
use crate::ports::{Port, RxScratch};

/// Frames in a guest's transmit descriptor chains, after a `hdr`-byte virtio-net header;
/// a frame's [`FrameLoc`] is its range of `segs`.
pub struct GuestFrames<'a, 'm> {
    /// The guest's memory.
    pub mem: &'a MemView<'m>,
    /// virtio-net header length on this connection.
    pub hdr: u32,
    /// The burst's descriptor segments.
    pub segs: &'a [Seg],
}

impl<'m> RxBurst<'m> for GuestFrames<'_, 'm> {
    #[inline(always)]
    fn read(&self, p: &Pkt, off: u32, out: &mut [u8]) -> usize {
        read_sg(
            self.mem,
            &self.segs[p.loc.start as usize..p.loc.end as usize],
            self.hdr + off,
            out,
        )
    }

    #[inline(always)]
    fn frame<'a>(&'a self, p: &Pkt) -> FrameSrc<'a, 'm> {
        FrameSrc::Guest {
            mem: self.mem,
            segs: &self.segs[p.loc.start as usize..p.loc.end as usize],
            skip: self.hdr,
        }
    }

    fn bytes(&self, _p: &Pkt) -> Option<&[u8]> {
        None
    }
}

/// A full poll's view of the queue's [`IdleWatch`]: the watch, what it held before
/// (reused if the queue is found empty again) and the guest memory of this poll.
pub(crate) struct Polled<'a> {
    watch: &'a mut IdleWatch,
    old: Option<Held>,
    mem: &'a Arc<Mem>,
}

impl VhostPort {
    /// Takes one burst from the guest's transmit queue `q` (queue pair `q`), runs
    /// `handler` on its good frames and completes every chain taken. Returns the chains
    /// taken.
    ///
    /// `watch` is the PMD's for this queue: while it says the queue is as empty as at
    /// the last full poll, this returns 0 after one load ([`IdleWatch`]); a full poll
    /// that finds the queue empty arms it again.
    pub(crate) fn receive<H: BurstHandler>(
        &self,
        port: &Port,
        q: u16,
        watch: &mut IdleWatch,
        rx: &mut RxScratch,
        handler: &mut H,
    ) -> usize {
        if watch.still_quiet() {
            return 0;
        }
        let old = watch.take();
        let guard = self.conn.load();
        let Some(conn) = guard.as_ref() else { return 0 };
        if super::fault::pending() && conn.faults.faulted() {
            // Its memory is gone (housekeeping closes it): read nothing from it.
            return 0;
        }
        if q == 0 && conn.migration.announce_pending() {
            return announce(port, conn, rx, handler);
        }
        let Some(vring) = conn.vrings.get(2 * usize::from(q) + 1) else {
            return 0;
        };
        let mut st = vring.get_mut();
        if !st.is_enabled() || !st.get_queue().ready() {
            return 0;
        }
        let mem = conn.mem.memory().into_inner();
        let mut polled = Polled {
            watch,
            old,
            mem: &mem,
        };
        if conn.packed() {
            match PackedRing::new(&mem, st.get_queue()) {
                Some(ring) => {
                    self.take_burst(&ring, port, conn, q, &mut st, &mut polled, rx, handler)
                }
                None => 0,
            }
        } else {
            match SplitRing::new(&mem, st.get_queue()) {
                Some(ring) => {
                    self.take_burst(&ring, port, conn, q, &mut st, &mut polled, rx, handler)
                }
                None => 0,
            }
        }
    }

    /// [`receive`](Self::receive) on the ring of transmit queue `q`, under its lock `st`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn take_burst<'m, R: DeviceRing<'m>, H: BurstHandler>(
        &self,
        ring: &R,
        port: &Port,
        conn: &Connection,
        q: u16,
        st: &mut VringState<AtomicMem>,
        polled: &mut Polled<'_>,
        rx: &mut RxScratch,
        handler: &mut H,
    ) -> usize {
        let next = st.get_queue().next_avail();
        let kicks = &self.kicks_off_for[usize::from(q)];
        if kicks.load(Ordering::Relaxed) != conn.id {
            super::set_kicks(conn, ring, q, false, next);
            kicks.store(conn.id, Ordering::Relaxed);
        }
        let mut cur = match ring.avail_cursor(next) {
            Ok(cur) => cur,
            Err(avail) => {
                self.impossible_avail(port, conn, q, rx, avail, next);
                return 0;
            }
        };
        if !ring.has_avail(&cur) {
            if let Some((word, quiet)) = ring.quiet_word(&cur) {
                let old = polled.old.take();
                polled
                    .watch
                    .arm(old, &conn.faults, polled.mem, word, quiet.to_le());
            }
            return 0;
        }
        let hdr = conn.hdr_len();
        // What the driver may ask of the switch (its HOST_* features): every header is
        // checked against it, feature by feature.
        let acked = TxOffloads {
            csum: conn.has(VIRTIO_NET_F_CSUM),
            tso4: conn.has(VIRTIO_NET_F_HOST_TSO4),
            tso6: conn.has(VIRTIO_NET_F_HOST_TSO6),
            ecn: conn.has(VIRTIO_NET_F_HOST_ECN),
        };
        let offloads = self.offloads && (acked.csum || acked.tso4 || acked.tso6);
        let counters = port.counters(rx.pmd);
        let RxScratch {
            pkts, segs, heads, ..
        } = rx;
        pkts.clear();
        segs.clear();
        heads.clear();
        // Descriptors first, so that the descriptor misses of the burst overlap instead
        // of serializing.
        ring.prefetch_avail(&cur, BURST);
        while heads.len() < BURST && ring.has_avail(&cur) {
            let start = segs.len() as u32;
            // The usual chain is one buffer: taken in one step, and its slice (checked
            // to lie in guest memory) serves the prefetch and the header read below.
            let single = ring.readable_single(&cur);
            let (chain, walked) = match single {
                Some((chain, seg, _)) => {
                    segs.push(seg);
                    (chain, Ok(seg.len))
                }
                None => ring.read_chain(&cur, false, segs),
            };
            ring.advance(&mut cur, chain);
            heads.push(chain);
            let len = match walked {
                Ok(len) if len >= hdr + 14 => len - hdr,
                Ok(_) => {
                    counters.drop(DropReason::Runt, 1);
                    continue;
                }
                Err(r) => {
                    counters.drop(r, 1);
                    continue;
                }
            };
            let mut vhdr = VirtioNetHdr::default();
            if let Some((_, _, buf)) = single {
                // The Ethernet header, read by classification; the virtio-net header
                // fields as two loads.
                prefetch(buf.ptr_guard().as_ptr().wrapping_add(hdr as usize));
                if offloads {
                    vhdr = read_vhdr(&buf);
                }
            } else {
                if let Some(first) = segs.get(start as usize) {
                    ring.mem()
                        .prefetch(first.addr + u64::from(hdr.min(first.len - 1)));
                }
                if offloads {
                    let mut b = [0u8; 10];
                    read_sg(ring.mem(), &segs[start as usize..], 0, &mut b);
                    vhdr = VirtioNetHdr::from_bytes(&b);
                }
            }
            if !vhdr.is_valid_for(len, &acked) {
                counters.drop(DropReason::BadOffload, 1);
                continue;
            }
            pkts.push(Pkt {
                loc: FrameLoc {
                    head: chain.id,
                    start,
                    end: segs.len() as u32,
                },
                len,
                vhdr,
                hash: 0,
                hashed: false,
            });
        }
        st.get_queue_mut().set_next_avail(cur.next);

        let frames = GuestFrames {
            mem: ring.mem(),
            hdr,
            segs,
        };
        handler.handle(port, q, &frames, pkts);

        // Complete every chain taken: one publication for the burst.
        let queue = st.get_queue_mut();
        let old_used = queue.next_used();
        let used = ring.put_used_all(old_used, heads, conn.has(VIRTIO_F_IN_ORDER));
        ring.publish(old_used, used);
        if let Some(mut l) = conn.migration.logging() {
            ring.log_used(&mut l, 2 * usize::from(q) + 1, old_used, used);
        }
        queue.set_next_used(used);
        if ring.needs_interrupt(old_used, used) {
            let _ = st.signal_used_queue();
        }
        heads.len()
    }

    /// Counts (and logs) an impossible available index on transmit queue `q` once per
    /// index and connection: the ring reads as empty until the driver resets it, rather
    /// than have the switch walk garbage.
    #[cold]
    fn impossible_avail(
        &self,
        port: &Port,
        conn: &Connection,
        q: u16,
        rx: &RxScratch,
        avail: u16,
        next: u16,
    ) {
        let seen = conn.id << 16 | u64::from(avail);
        if self.bad_avail_for[usize::from(q)].swap(seen, Ordering::Relaxed) != seen {
            port.counters(rx.pmd).drop(DropReason::BadDescriptor, 1);
            tracing::warn!(
                port = %port.name,
                queue = q,
                avail,
                next,
                "impossible available index on a transmit queue; waiting for a sane one"
            );
        }
    }
}

/// The first 10 bytes of `buf` (at least 10 long: the virtio-net header fields every
/// header length has, virtio 1.2 §5.1.6) as one 8-byte and one 2-byte load.
#[inline(always)]
fn read_vhdr(buf: &VolatileSlice<'_>) -> VirtioNetHdr {
    let lo: u64 = buf.get_ref::<u64>(0).map_or(0, |r| r.load());
    let hi: u16 = buf.get_ref::<u16>(8).map_or(0, |r| r.load());
    let mut v = [0u8; 10];
    v[..8].copy_from_slice(&lo.to_ne_bytes());
    v[8..].copy_from_slice(&hi.to_ne_bytes());
    VirtioNetHdr::from_bytes(&v)
}

/// Runs the RARP announcements the front-end asked for (`SEND_RARP`, after a live
/// migration) through the pipeline as frames the guest sent on queue 0: the FDB moves
/// the MAC here, and the broadcast reaches every port and tunnel of its domain.
#[inline(never)]
fn announce<H: BurstHandler>(
    port: &Port,
    conn: &super::device::Connection,
    rx: &mut RxScratch,
    handler: &mut H,
) -> usize {
    let macs = conn.migration.take_announcements();
    let mut linear = Vec::with_capacity(60 * macs.len());
    rx.pkts.clear();
    for mac in macs {
        let start = linear.len() as u32;
        linear.extend_from_slice(&super::migration::rarp_frame(mac));
        rx.pkts.push(Pkt {
            loc: FrameLoc {
                head: 0,
                start,
                end: crate::ports::host::IN_LINEAR,
            },
            len: 60,
            vhdr: VirtioNetHdr::default(),
            hash: 0,
            hashed: false,
        });
    }
    let n = rx.pkts.len();
    // SAFETY: no frame lies in the (empty) area: every one is in `linear`, which
    // outlives the burst.
    let frames = unsafe { crate::ports::host::HostFrames::new(std::ptr::null(), 0, &linear) };
    handler.handle(port, 0, &frames, &mut rx.pkts);
    n
}
