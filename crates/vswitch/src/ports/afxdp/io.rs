//! An uplink's bursts: received frames handed to the pipeline in place in the UMEM, and
//! delivery batches copied into UMEM transmit frames.

use geneve::encap::TunnelTemplate;

use super::{AfxdpPort, FRAME_SIZE};
use crate::model::stats::{DropReason, PortCounters};
use crate::model::tunnel::{TepCounters, TunnelDrop};
use crate::ports::frame::EncapItem;
use crate::ports::frame::{BurstHandler, FrameLoc, Pkt, RxBurst, TxBatch, BURST};
use crate::ports::host::{HostFrames, IN_LINEAR};
use crate::ports::{Port, RxScratch};

impl AfxdpPort {
    /// Takes one burst from AF_XDP socket `q`, runs `handler` on it with the frames read
    /// in place, then gives the frames back to the fill ring. Returns the frames taken.
    pub(crate) fn receive<H: BurstHandler>(
        &self,
        port: &Port,
        q: u16,
        rx: &mut RxScratch,
        handler: &mut H,
    ) -> usize {
        let Some(xsk) = self.xsks.get(usize::from(q)) else {
            return 0;
        };
        let mut ring = xsk.rx.lock().unwrap_or_else(|e| e.into_inner());
        let drops = ring.receive(&mut rx.xframes, BURST as u32);
        let n = rx.xframes.len();
        let counters = port.counters(rx.pmd);
        if drops.too_big > 0 {
            counters.drop(DropReason::FrameTooBig, drops.too_big);
        }
        if drops.bad > 0 {
            counters.drop(DropReason::Runt, drops.bad);
        }
        if n == 0 {
            ring.recycle();
            return 0;
        }
        xsk.rx_frames.add(n as u64);
        rx.pkts.clear();
        rx.pkts.extend(rx.xframes.iter().map(|f| Pkt {
            loc: FrameLoc {
                head: 0,
                start: f.off,
                end: if f.linear { IN_LINEAR } else { 0 },
            },
            len: f.len,
            ..Pkt::default()
        }));
        let (base, len) = xsk.area();
        // SAFETY: the UMEM area lives as long as `xsk`, which outlives this call; the
        // frames of `rx.xframes` were received on this socket's rx ring and are held
        // (not put on the fill ring) until `ring.recycle()` below, which needs `ring`
        // mutably and so cannot run while `frames` borrows `ring.linear()`.
        let frames = unsafe { HostFrames::new(base, len, ring.linear()) };
        handler.handle(port, q, &frames, &mut rx.pkts);
        ring.recycle();
        n
    }

    /// Transmits `batch` in one AF_XDP tx batch on the socket with the source queue's
    /// index (modulo the sockets): each frame is copied into a free UMEM tx frame, or a
    /// chain of them (multi-buffer). Frames larger than the uplink takes are dropped
    /// (`frame_too_big`); the pipeline made every frame plain before.
    pub(crate) fn transmit<'m, B: RxBurst<'m>>(
        &self,
        batch: &TxBatch<'_, 'm, B>,
        counters: &PortCounters,
    ) {
        if !self.link_up() {
            counters.drop(DropReason::PortDown, batch.items.len() as u64);
            return;
        }
        let xsk = &self.xsks[usize::from(batch.src_queue) % self.xsks.len()];
        let mut tx = xsk.tx.lock().unwrap_or_else(|e| e.into_inner());
        tx.begin();
        let (mut packets, mut bytes, mut lost) = (0u64, 0u64, 0u64);
        let max = self.max_tx_frame();
        for it in batch.items {
            debug_assert!(!batch.vhdr(it).has_offload(), "offloads are done before");
            let len = batch.len(it);
            if len > max {
                counters.drop(DropReason::FrameTooBig, 1);
                continue;
            }
            // One tx frame, or (multi-buffer) a chain of them.
            let pieces = len.div_ceil(FRAME_SIZE).max(1);
            let (lost_early, room) = tx.make_room(pieces as usize);
            lost += lost_early as u64;
            if !room {
                counters.drop(DropReason::NoTxBuffer, 1);
                continue;
            }
            for i in 0..pieces {
                let addr = tx.take().expect("free frames counted above");
                let off = i * FRAME_SIZE;
                let plen = (len - off).min(FRAME_SIZE);
                // SAFETY: `addr` was just taken from this socket's free list under its
                // tx lock, so no one else touches the frame.
                let buf = unsafe { xsk.tx_frame(addr) };
                batch.read(it, off, &mut buf[..plen as usize]);
                tx.push_frag(addr, plen, i + 1 < pieces);
            }
            packets += 1;
            bytes += u64::from(len);
        }
        lost += tx.commit() as u64;
        drop(tx);
        if lost > 0 {
            counters.drop(DropReason::NoTxBuffer, lost);
        }
        counters.tx_packets.add(packets - lost.min(packets));
        counters.tx_bytes.add(bytes);
    }
}

/// A UMEM tx frame as a segment buffer for `geneve::segment` (which writes segments
/// straight into the frames the uplink sends).
pub(crate) struct TxBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: a TxBuf only points into a UMEM tx frame that the thread holding the socket's
// tx lock took from the free list; it is used and dropped under that lock.
unsafe impl Send for TxBuf {}

impl AsMut<[u8]> for TxBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: built by `encap_tso` from a frame taken from the free list under the
        // tx lock (exclusive to this thread until pushed), `len` ≤ FRAME_SIZE inside the
        // UMEM area, and used before the lock is released.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl AfxdpPort {
    /// Encapsulates `items` (frames of a burst, each with its outer header template)
    /// into UMEM tx frames and sends them in one batch on the socket of the source
    /// queue's index: a TSO or partially checksummed frame is gathered once and
    /// segmented (or completed) and encapsulated by `geneve::segment` straight into the
    /// UMEM; a plain frame is copied in behind the outer header, which is then written
    /// in front of it. Counts on the endpoint (`tep`) and on the uplink port (`port`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn transmit_encap<'m, B: RxBurst<'m>>(
        &self,
        burst: &B,
        pkts: &[Pkt],
        items: &[EncapItem],
        templates: &mut [TunnelTemplate],
        scratch: &mut Vec<u8>,
        src_queue: u16,
        tep: &TepCounters,
        port: &PortCounters,
    ) {
        let xsk = &self.xsks[usize::from(src_queue) % self.xsks.len()];
        let mut tx = xsk.tx.lock().unwrap_or_else(|e| e.into_inner());
        tx.begin();
        let max = self.max_tx_frame().min(FRAME_SIZE);
        let (mut packets, mut bytes, mut lost) = (0u64, 0u64, 0u64);
        for it in items {
            let p = &pkts[usize::from(it.pkt)];
            let t = &mut templates[it.tmpl as usize];
            let sent = if p.vhdr.has_offload() {
                encap_tso(xsk, &mut tx, burst, p, t, scratch, max)
            } else {
                encap_one(xsk, &mut tx, burst, p, t, max)
            };
            match sent {
                Ok((n, b, l)) => {
                    if p.vhdr.gso() != 0 {
                        tep.segmented.add(1);
                    }
                    packets += n;
                    bytes += b;
                    lost += l;
                }
                Err(r) => tep.drop(r, 1),
            }
        }
        lost += tx.commit() as u64;
        drop(tx);
        if lost > 0 {
            tep.drop(TunnelDrop::NoTxBuffer, lost);
        }
        let ok = packets - lost.min(packets);
        tep.tx_packets.add(ok);
        tep.tx_bytes.add(bytes);
        port.tx_packets.add(ok);
        port.tx_bytes.add(bytes);
    }
}

/// Sent: (frames, bytes, frames the ring did not take).
type Sent = Result<(u64, u64, u64), TunnelDrop>;

/// Encapsulates a plain frame into one UMEM tx frame.
fn encap_one<'m, B: RxBurst<'m>>(
    xsk: &super::Xsk,
    tx: &mut super::XskTx,
    burst: &B,
    p: &Pkt,
    t: &mut TunnelTemplate,
    max: u32,
) -> Sent {
    let h = t.header_len();
    let total = h + p.len as usize;
    if total > max as usize {
        return Err(TunnelDrop::TooBig);
    }
    let (lost, room) = tx.make_room(1);
    if !room {
        return Err(TunnelDrop::NoTxBuffer);
    }
    let addr = tx.take().expect("a free frame counted above");
    // SAFETY: `addr` was just taken from this socket's free list under its tx lock.
    let buf = unsafe { xsk.tx_frame(addr) };
    if burst.read(p, 0, &mut buf[h..total]) != p.len as usize
        || t.encapsulate_in_place(&mut buf[..total], p.len as usize)
            .is_err()
    {
        tx.give_back(addr);
        return Err(TunnelDrop::TooBig);
    }
    tx.push(addr, total as u32);
    Ok((1, total as u64, lost as u64))
}

/// Gathers an offload frame, then segments (or completes its checksum) and
/// encapsulates it into as many UMEM tx frames as it has segments.
fn encap_tso<'m, B: RxBurst<'m>>(
    xsk: &super::Xsk,
    tx: &mut super::XskTx,
    burst: &B,
    p: &Pkt,
    t: &mut TunnelTemplate,
    scratch: &mut Vec<u8>,
    max: u32,
) -> Sent {
    let meta = p.vhdr.gso_meta().map_err(|_| TunnelDrop::TooBig)?;
    scratch.resize(p.len as usize, 0);
    if burst.read(p, 0, scratch) != scratch.len() {
        return Err(TunnelDrop::TooBig);
    }
    let plan =
        geneve::SegmentPlan::new(scratch, &meta, t.header_len()).map_err(|_| TunnelDrop::TooBig)?;
    let n = plan.count();
    if (0..n).any(|k| plan.segment_len(k) > max as usize) {
        return Err(TunnelDrop::TooBig);
    }
    let (lost, room) = tx.make_room(n);
    if !room {
        return Err(TunnelDrop::NoTxBuffer);
    }
    let mut addrs = std::mem::take(&mut tx.seg_addrs);
    let mut bufs = std::mem::take(&mut tx.seg_bufs);
    addrs.clear();
    bufs.clear();
    for k in 0..n {
        let addr = tx.take().expect("free frames counted above");
        // SAFETY: `addr` was just taken from this socket's free list under its tx lock;
        // the frame is FRAME_SIZE bytes inside the UMEM and no one else touches it.
        let buf = unsafe { xsk.tx_frame(addr) };
        bufs.push(TxBuf {
            ptr: std::ptr::NonNull::from(&mut buf[0]),
            len: plan.segment_len(k),
        });
        addrs.push(addr);
    }
    let r = geneve::segment(scratch, &meta, Some(t), &mut bufs);
    let mut bytes = 0u64;
    for (&a, b) in addrs.iter().zip(&bufs) {
        if r.is_ok() {
            tx.push(a, b.len as u32);
            bytes += b.len as u64;
        } else {
            tx.give_back(a);
        }
    }
    tx.seg_addrs = addrs;
    tx.seg_bufs = bufs;
    r.map_err(|_| TunnelDrop::TooBig)?;
    Ok((n as u64, bytes, lost as u64))
}
