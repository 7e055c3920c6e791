//! The switch's transmit side of a vhost-user port: one batch copied into a guest's
//! receive queue (virtio 1.2 §5.1.6.3-4).
//!
//! Per batch, under that receive ring's lock: frames are copied straight from where
//! they lie (the source guest's buffers, or host memory) into the guest's receive
//! buffers, several chains per frame with mergeable buffers; one `used.idx` update and
//! at most one interrupt (EVENT_IDX respected). With several queue pairs, each frame
//! goes to the pair its flow hash picks among the ready ones, so one flow stays on one
//! queue and flows spread (the software form of RSS).

use vhost_user_backend::{VringState, VringT};
use virtio_queue::QueueT;
use vm_memory::{GuestAddressSpace, VolatileMemory, VolatileSlice};

use super::device::Connection;
use super::virtq::{
    copy_sg, gather_sg, stream, write_sg, write_sg_at, AtomicMem, AvailCursor, Chain, DeviceRing,
    PackedRing, Seg, SplitRing,
};
use super::VhostPort;
use crate::model::stats::{DropReason, PortCounters};
use crate::ports::frame::{FrameSrc, RxBurst, TxBatch, TxItem};

/// Most receive chains one frame may fill with mergeable buffers.
const MAX_RX_CHAINS: usize = 64;

/// How many frames ahead a delivery prefetches the receive buffer it will write.
const BUFFER_AHEAD: u16 = 4;

/// Largest frame (bytes) after which a delivery prefetches a buffer ahead: for small
/// frames the buffer's first miss is most of a copy's cost (64 B PVP: 6-8 % fewer
/// cycles per packet); for large ones the copy streams many lines and the prefetch
/// measured as a loss (10-25 % more cycles at 1518 B).
const PREFETCH_MAX_FRAME: u32 = 256;

/// One delivery batch into a receive ring: ring positions and what was delivered.
///
/// Kept in registers through the delivery loop: no reference to it leaves the loop
/// (the slow path takes a copy). In memory, its 16-bit positions were stored one at a
/// time and read back by wider loads the store buffer cannot forward from, a stall of
/// two a frame.
#[derive(Clone, Copy)]
struct RxCursor {
    avail: AvailCursor,
    used: u16,
    /// Frames and bytes delivered, added to the port's counters once per batch.
    tx_packets: u64,
    tx_bytes: u64,
    /// Set when the ring ran out of buffers: later frames of the batch are dropped.
    out_of_buffers: bool,
    /// Live migration: the bytes written into guest buffers are recorded in
    /// [`TxScratch::written`], to be marked in the dirty log.
    logging: bool,
    /// Host frames are copied with non-temporal stores (a replicated burst).
    streaming: bool,
}

/// A receive chain taken for one frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct RxChain {
    chain: Chain,
    cap: u32,
}

/// The PMD-owned arrays a delivery uses, allocated once per PMD.
#[derive(Default)]
pub struct TxScratch {
    segs: Vec<Seg>,
    chains: Vec<RxChain>,
    /// Live migration: the guest memory a batch wrote (receive buffers).
    written: Vec<Seg>,
}

impl VhostPort {
    /// Delivers `batch` into the guest's receive queues.
    pub(crate) fn transmit<'m, B: RxBurst<'m>>(
        &self,
        batch: &TxBatch<'_, 'm, B>,
        scratch: &mut TxScratch,
        counters: &PortCounters,
    ) {
        let guard = self.conn.load();
        let Some(conn) = guard.as_ref() else {
            counters.drop(DropReason::PortDown, batch.items.len() as u64);
            return;
        };
        let pairs = conn.vrings.len() / 2;
        if pairs <= 1 {
            deliver(conn, 0, batch, scratch, counters, |_| true);
            return;
        }
        // The ready pairs, in order; each frame goes to the one its hash picks.
        let mut ready = [0u16; crate::config::MAX_QUEUE_PAIRS as usize];
        let mut nready = 0;
        for p in 0..pairs.min(ready.len()) {
            if conn.vring_ready(2 * p) {
                ready[nready] = p as u16;
                nready += 1;
            }
        }
        if nready <= 1 {
            let p = if nready == 1 { ready[0] } else { 0 };
            deliver(conn, p, batch, scratch, counters, |_| true);
            return;
        }
        for (k, &p) in ready[..nready].iter().enumerate() {
            deliver(conn, p, batch, scratch, counters, |it| {
                batch.hash(it) as usize % nready == k
            });
        }
    }
}

/// Delivers the items of `batch` that `pick` selects into receive queue pair `pair`:
/// one batch under that ring's lock.
fn deliver<'m, B: RxBurst<'m>>(
    conn: &Connection,
    pair: u16,
    batch: &TxBatch<'_, 'm, B>,
    scratch: &mut TxScratch,
    counters: &PortCounters,
    pick: impl Fn(&TxItem) -> bool,
) {
    let count = || batch.items.iter().filter(|it| pick(it)).count() as u64;
    let mut st = conn.vrings[2 * usize::from(pair)].get_mut();
    if !st.is_enabled() || !st.get_queue().ready() {
        counters.drop(DropReason::PortDown, count());
        return;
    }
    let dmem = conn.mem.memory();
    let delivered = if conn.packed() {
        PackedRing::new(&dmem, st.get_queue())
            .map(|ring| deliver_into(&ring, conn, pair, &mut st, batch, scratch, counters, &pick))
    } else {
        SplitRing::new(&dmem, st.get_queue())
            .map(|ring| deliver_into(&ring, conn, pair, &mut st, batch, scratch, counters, &pick))
    };
    match delivered {
        Some(Ok(())) => {}
        Some(Err(r)) => counters.drop(r, count()),
        None => counters.drop(DropReason::PortDown, count()),
    }
}

/// [`deliver`] into `ring`, receive queue pair `pair`'s, under its lock `st`.
///
/// # Errors
/// [`DropReason::BadDescriptor`] when the driver's available index is impossible:
/// nothing was delivered.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn deliver_into<'m, 'd, R: DeviceRing<'d>, B: RxBurst<'m>>(
    ring: &R,
    conn: &Connection,
    pair: u16,
    st: &mut VringState<AtomicMem>,
    batch: &TxBatch<'_, 'm, B>,
    scratch: &mut TxScratch,
    counters: &PortCounters,
    pick: &impl Fn(&TxItem) -> bool,
) -> Result<(), DropReason> {
    let dst_hdr = conn.hdr_len();
    let mergeable = conn.mergeable();
    let queue = st.get_queue_mut();
    let avail = ring
        .avail_cursor(queue.next_avail())
        .map_err(|_| DropReason::BadDescriptor)?;
    // Prefetch the receive descriptors this batch will most likely take, then the
    // first buffers; each frame prefetches the buffer BUFFER_AHEAD frames on.
    ring.prefetch_avail(&avail, batch.items.len());
    let small = |it: &TxItem| batch.len(it) <= PREFETCH_MAX_FRAME;
    if batch.items.first().is_some_and(small) {
        for k in 0..BUFFER_AHEAD.min(batch.items.len() as u16) {
            ring.prefetch_buffer(&avail, k);
        }
    }
    let old_used = queue.next_used();
    let mut log = conn.migration.logging();
    scratch.written.clear();
    let mut cur = RxCursor {
        avail,
        used: old_used,
        tx_packets: 0,
        tx_bytes: 0,
        out_of_buffers: false,
        logging: log.is_some(),
        streaming: batch.streaming,
    };
    for it in batch.items {
        if !pick(it) {
            continue;
        }
        if cur.out_of_buffers {
            counters.drop(DropReason::NoRxBuffer, 1);
            continue;
        }
        if small(it) {
            ring.prefetch_buffer(&cur.avail, BUFFER_AHEAD);
        }
        // Whole frames keep their offload fields (virtio 1.2 §5.1.6.4); made ones
        // carry none.
        let hdr = batch.vhdr(it).to_bytes();
        put_frame(
            ring,
            &mut cur,
            scratch,
            mergeable,
            dst_hdr,
            hdr,
            batch.frame(it),
            batch.len(it),
            counters,
        );
    }
    let RxCursor {
        avail,
        used,
        tx_packets,
        tx_bytes,
        ..
    } = cur;
    if batch.streaming {
        // Non-temporal stores are weakly ordered: the frames are visible before the used
        // elements that publish them.
        stream::fence();
    }
    // Live migration: the buffers filled are marked before the driver may reuse them,
    // the used elements after they were published.
    if let Some(l) = log.as_mut() {
        for s in &scratch.written {
            l.mark(s.addr, u64::from(s.len));
        }
    }
    ring.publish(old_used, used);
    if let Some(l) = log.as_mut() {
        ring.log_used(l, 2 * usize::from(pair), old_used, used);
    }
    drop(log);
    queue.set_next_avail(avail.next);
    queue.set_next_used(used);
    if ring.needs_interrupt(old_used, used) {
        let _ = st.signal_used_queue();
    }
    counters.tx_packets.add(tx_packets);
    counters.tx_bytes.add(tx_bytes);
    Ok(())
}

/// Delivers one frame into the receive ring: takes enough chains (mergeable buffers) for
/// the header and `frame_len` bytes, writes the header (`hdr` with num_buffers filled in)
/// and the frame, writes the used elements, and adds the frame to the batch's tx totals.
/// On failure nothing is delivered: chains taken are put back (or, if a malformed chain
/// was consumed meanwhile, returned empty), the drop is counted under its reason, and
/// running out of buffers marks the batch so its later frames are dropped too.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn put_frame<'d, R: DeviceRing<'d>>(
    ring: &R,
    cur: &mut RxCursor,
    scratch: &mut TxScratch,
    mergeable: bool,
    dst_hdr: u32,
    mut hdr: [u8; 12],
    src: FrameSrc<'_, '_>,
    frame_len: u32,
    counters: &PortCounters,
) {
    // The common case in one step, inlined into the delivery loop: the next receive
    // buffer is a single descriptor that holds the header and the whole frame.
    let need = dst_hdr + frame_len;
    ring.refresh(&mut cur.avail);
    if ring.has_avail(&cur.avail) {
        if let Some((chain, seg, buf)) = ring.writable_single(&cur.avail, need) {
            hdr[10..12].copy_from_slice(&1u16.to_le_bytes());
            if fill_buffer(&buf, &hdr, dst_hdr as usize, &src, cur.streaming) == need as usize {
                ring.advance(&mut cur.avail, chain);
                cur.used = ring.put_used(cur.used, chain, need);
                cur.tx_packets += 1;
                cur.tx_bytes += u64::from(frame_len);
                if cur.logging {
                    scratch.written.push(Seg {
                        addr: seg.addr,
                        len: need,
                    });
                }
                return;
            }
        }
    }
    // A copy, so that `cur` itself never escapes (see [`RxCursor`]).
    let mut slow = *cur;
    let done = put_frame_inner(
        ring, &mut slow, scratch, mergeable, dst_hdr, hdr, src, frame_len, counters,
    );
    *cur = slow;
    if let Err(r) = done {
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
fn put_frame_inner<'d, R: DeviceRing<'d>>(
    ring: &R,
    cur: &mut RxCursor,
    scratch: &mut TxScratch,
    mergeable: bool,
    dst_hdr: u32,
    mut hdr: [u8; 12],
    src: FrameSrc<'_, '_>,
    frame_len: u32,
    counters: &PortCounters,
) -> Result<(), DropReason> {
    let need = dst_hdr + frame_len;
    let start_avail = cur.avail;
    let TxScratch {
        segs: rx_segs,
        chains: rx_chains,
        written,
    } = scratch;
    rx_segs.clear();
    rx_chains.clear();
    let mut cap = 0u32;
    let mut fail = None;
    let mut bad_taken = false;
    while cap < need {
        // Too big first: a frame that one plain buffer cannot hold is too big for it
        // whether or not another buffer waits behind it.
        if rx_chains.len() == MAX_RX_CHAINS || (!mergeable && !rx_chains.is_empty()) {
            fail = Some(DropReason::FrameTooBig);
            break;
        }
        ring.refresh(&mut cur.avail);
        if !ring.has_avail(&cur.avail) {
            fail = Some(DropReason::NoRxBuffer);
            break;
        }
        let (chain, walked) = ring.read_chain(&cur.avail, true, rx_segs);
        ring.advance(&mut cur.avail, chain);
        match walked {
            Ok(c) if c >= dst_hdr || !rx_chains.is_empty() => {
                rx_chains.push(RxChain { chain, cap: c });
                cap = cap.saturating_add(c);
            }
            _ => {
                // A malformed (or header-less) receive chain: give it back empty.
                cur.used = ring.put_used(cur.used, chain, 0);
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
                cur.used = ring.put_used(cur.used, c.chain, 0);
            }
        } else {
            // Leave the chains taken for this frame in the available ring.
            cur.avail = start_avail;
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
        FrameSrc::Merged { head, parts } => {
            let mut at = dst_hdr;
            for c in std::iter::once(head).chain(parts.iter().copied()) {
                write_sg_at(ring.mem(), rx_segs, at, c);
                at += c.len() as u32;
            }
        }
    }
    if cur.logging {
        let mut left = need;
        for s in rx_segs.iter() {
            let n = s.len.min(left);
            written.push(Seg {
                addr: s.addr,
                len: n,
            });
            left -= n;
            if left == 0 {
                break;
            }
        }
    }
    let mut left = need;
    for c in rx_chains.iter() {
        let n = c.cap.min(left);
        cur.used = ring.put_used(cur.used, c.chain, n);
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
    streaming: bool,
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
            FrameSrc::Guest { mem, segs, skip } if streaming => {
                stream::gather_sg(mem, segs, skip, &rest)
            }
            FrameSrc::Guest { mem, segs, skip } => gather_sg(mem, segs, skip, &rest),
            FrameSrc::Host(data) if streaming => {
                let n = data.len().min(rest.len());
                // SAFETY: `rest` is valid for writes of its length, `n` is at most that
                // and `data`'s length; the source is a distinct host buffer.
                unsafe { stream::copy(rest.ptr_guard_mut().as_ptr(), data.as_ptr(), n) };
                n
            }
            FrameSrc::Host(data) => {
                rest.copy_from(data);
                data.len().min(rest.len())
            }
            FrameSrc::Merged { head, parts } => {
                let mut at = 0;
                for c in std::iter::once(head).chain(parts.iter().copied()) {
                    let Ok(dst) = rest.offset(at) else { break };
                    dst.copy_from(c);
                    at += c.len().min(dst.len());
                }
                at
            }
        }
}
