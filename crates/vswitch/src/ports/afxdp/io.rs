//! An uplink's bursts: received frames handed to the pipeline in place in the UMEM, and
//! delivery batches copied into UMEM transmit frames.

use super::{AfxdpPort, FRAME_SIZE};
use crate::datapath::packet::{BurstHandler, FrameLoc, Pkt, RxBurst, TxBatch, BURST};
use crate::model::stats::{DropReason, PortCounters};
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
