//! Software offloads: a frame that carries a partial checksum or TSO, bound for a
//! destination that does not take it whole, is made plain here, before that
//! destination's transmit lock is taken (DESIGN.md §5): its checksum completed, or
//! segmented into gso_size segments by the `geneve` crate's software TSO (CWR on the
//! first segment only).
//!
//! A frame is made plain at most once per burst, whatever the number of destinations
//! that need it (a flooded TSO frame): the result is kept for the burst.

use super::packet::{Pkt, RxBurst, BURST};

/// Soft buffers kept between bursts. A burst of TSO frames with the smallest `gso_size`
/// may need many more (32 × 1,366 at worst); those are freed after the burst, so the
/// memory a PMD holds for software offload stays bounded whatever the guests send.
const SOFT_KEEP: usize = 256;
use crate::model::stats::{DropReason, PortCounters};

/// What making frame `i` of the burst plain gave, once tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Made {
    /// Not tried yet in this burst.
    Untried,
    /// Soft buffers `first..first+count`; `segmented`: TSO (else the checksum was
    /// completed).
    Frames {
        first: u32,
        count: u32,
        segmented: bool,
    },
    /// It cannot be done, for this reason.
    Failed(DropReason),
}

/// The frames made by software offload for one burst, in buffers reused across bursts.
pub struct SoftFrames {
    /// Buffers; `bufs[..used]` hold this burst's frames.
    bufs: Vec<Vec<u8>>,
    used: usize,
    /// A whole frame gathered from where it lies (up to 64 KiB).
    scratch: Vec<u8>,
    made: [Made; BURST],
    /// `made` has an entry other than `Untried` (so `reset` has work).
    tried: bool,
}

impl Default for SoftFrames {
    fn default() -> Self {
        SoftFrames {
            bufs: Vec::new(),
            used: 0,
            scratch: Vec::new(),
            made: [Made::Untried; BURST],
            tried: false,
        }
    }
}

impl SoftFrames {
    /// Forgets the previous burst's frames (their buffers are kept for reuse, up to
    /// `SOFT_KEEP`).
    #[inline]
    pub fn reset(&mut self) {
        self.used = 0;
        if self.bufs.len() > SOFT_KEEP {
            self.bufs.truncate(SOFT_KEEP);
        }
        if self.tried {
            self.made = [Made::Untried; BURST];
            self.tried = false;
        }
    }

    /// The made frames, for [`super::packet::TxBatch::soft`].
    pub fn bufs(&self) -> &[Vec<u8>] {
        &self.bufs[..self.used]
    }

    /// Makes frame `i` (`p`) of the burst plain, or returns what it made before: the
    /// range of soft buffers holding its frames. Counts `segmented` or `csum_completed`
    /// on `counters` (the destination's), or the drop.
    pub fn make<'m, B: RxBurst<'m>>(
        &mut self,
        i: usize,
        p: &Pkt,
        burst: &B,
        counters: &PortCounters,
    ) -> Option<std::ops::Range<u32>> {
        if self.made[i] == Made::Untried {
            self.made[i] = self.make_new(p, burst);
            self.tried = true;
        }
        match self.made[i] {
            Made::Frames {
                first,
                count,
                segmented,
            } => {
                if segmented {
                    counters.segmented.add(1);
                } else {
                    counters.csum_completed.add(1);
                }
                Some(first..first + count)
            }
            Made::Failed(r) => {
                counters.drop(r, 1);
                None
            }
            Made::Untried => unreachable!("made above"),
        }
    }

    fn make_new<'m, B: RxBurst<'m>>(&mut self, p: &Pkt, burst: &B) -> Made {
        let Ok(meta) = p.vhdr.gso_meta() else {
            return Made::Failed(DropReason::BadOffload);
        };
        self.scratch.resize(p.len as usize, 0);
        if burst.read(p, 0, &mut self.scratch) != self.scratch.len() {
            return Made::Failed(DropReason::BadDescriptor);
        }
        let first = self.used;
        if p.vhdr.gso() == 0 {
            if geneve::complete_checksum(&mut self.scratch, &meta).is_err() {
                return Made::Failed(DropReason::BadOffload);
            }
            // The completed frame becomes the soft buffer; the buffer it replaces is the
            // next scratch.
            self.grow(1);
            std::mem::swap(&mut self.bufs[first], &mut self.scratch);
            self.used += 1;
            return Made::Frames {
                first: first as u32,
                count: 1,
                segmented: false,
            };
        }
        let Ok(plan) = geneve::SegmentPlan::new(&self.scratch, &meta, 0) else {
            return Made::Failed(DropReason::BadOffload);
        };
        let n = plan.count();
        self.grow(n);
        for (k, b) in self.bufs[first..first + n].iter_mut().enumerate() {
            b.resize(plan.segment_len(k), 0);
        }
        if geneve::segment(&self.scratch, &meta, None, &mut self.bufs[first..first + n]).is_err() {
            return Made::Failed(DropReason::BadOffload);
        }
        self.used += n;
        Made::Frames {
            first: first as u32,
            count: n as u32,
            segmented: true,
        }
    }

    /// Copies `bytes` into a new soft buffer of this burst; returns its index.
    pub fn push_copy(&mut self, bytes: &[u8]) -> u32 {
        self.grow(1);
        let b = &mut self.bufs[self.used];
        b.clear();
        b.extend_from_slice(bytes);
        self.used += 1;
        (self.used - 1) as u32
    }

    /// Frame `p` of `burst` copied into a new soft buffer with an 802.1Q tag (VLAN
    /// `vid`, PCP 0) after its MAC addresses (IEEE 802.1Q §9.3); returns the buffer's
    /// index, or None when the frame cannot be read whole.
    pub fn tagged<'m, B: RxBurst<'m>>(&mut self, p: &Pkt, burst: &B, vid: u16) -> Option<u32> {
        self.grow(1);
        let b = &mut self.bufs[self.used];
        let len = p.len as usize;
        b.resize(len + 4, 0);
        if len < 14 || burst.read(p, 0, &mut b[4..]) != len {
            return None;
        }
        b.copy_within(4..16, 0);
        b[12..14].copy_from_slice(&super::localnet::TPID_8021Q);
        b[14..16].copy_from_slice(&vid.to_be_bytes());
        self.used += 1;
        Some(self.used as u32 - 1)
    }

    /// Soft buffer `buf` of this burst copied into a new one with an 802.1Q tag (as
    /// [`SoftFrames::tagged`]); returns the new buffer's index.
    pub fn tagged_soft(&mut self, buf: u32, vid: u16) -> u32 {
        self.grow(1);
        let (made, free) = self.bufs.split_at_mut(self.used);
        let (src, dst) = (&made[buf as usize], &mut free[0]);
        dst.clear();
        dst.extend_from_slice(&src[..12]);
        dst.extend_from_slice(&super::localnet::TPID_8021Q);
        dst.extend_from_slice(&vid.to_be_bytes());
        dst.extend_from_slice(&src[12..]);
        self.used += 1;
        self.used as u32 - 1
    }

    /// Makes `n` more buffers available after `used`.
    fn grow(&mut self, n: usize) {
        if self.bufs.len() < self.used + n {
            self.bufs.resize_with(self.used + n, Vec::new);
        }
    }
}
