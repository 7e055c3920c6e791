//! Software GRO toward guests and taps (DESIGN.md §3): TCP segments that came out of a
//! tunnel, bound for a destination that takes TSO frames, are merged per flow within
//! the burst by the `geneve` crate's coalescer, by reference (Linux GRO's rules; the
//! merged frame is its rewritten headers plus the segments' payloads where they lie, so
//! delivery copies each payload once), and delivered as one large frame with a GSO
//! virtio-net header.

use geneve::gro::CoalescedRef;

use super::packet::{MergedDesc, Pkt, RxBurst, TxItem, TxOffloads, VirtioNetHdr, BURST};
use super::pipeline::Pipeline;
use crate::model::stats::PortCounters;

/// The GRO state of one PMD.
#[derive(Debug, Default)]
pub struct Gro {
    coalescer: geneve::gro::Coalescer,
    /// The merged frames of the batch being built.
    pub merged: Vec<MergedDesc>,
    /// Their payloads: (frame index in the burst, start, length).
    pub parts: Vec<(u16, u32, u32)>,
}

impl Gro {
    /// Forgets the previous batch's merged frames.
    pub fn clear(&mut self) {
        self.merged.clear();
        self.parts.clear();
    }
}

impl Pipeline {
    /// Fills `self.items` with group `g`'s frames merged where they can be: each merged
    /// frame whose offloads `takes` accepts as one item, the rest whole.
    pub(super) fn prepare_gro<'m, B: RxBurst<'m>>(
        &mut self,
        g: usize,
        takes: TxOffloads,
        burst: &B,
        pkts: &[Pkt],
        counters: &PortCounters,
    ) {
        let group = &self.groups.groups[g];
        let sel = group.frames();
        let mut refs: [&[u8]; BURST] = [&[]; BURST];
        for (r, &i) in refs.iter_mut().zip(sel) {
            *r = burst.bytes(&pkts[usize::from(i)]).unwrap_or(&[]);
        }
        let refs = &refs[..sel.len()];
        let (items, soft, gro) = (&mut self.items, &mut self.soft, &mut self.gro);
        let Gro {
            coalescer,
            merged,
            parts,
        } = gro;
        coalescer.coalesce_by_reference(refs, |o| match o {
            CoalescedRef::Unchanged(f) => {
                let k = refs
                    .iter()
                    .position(|r| std::ptr::eq(*r, f))
                    .expect("an unchanged frame is a batch frame");
                items.push(TxItem::Whole { pkt: sel[k] });
            }
            CoalescedRef::Merged(m) => {
                let meta = m.meta;
                let vhdr = VirtioNetHdr {
                    flags: meta.virtio_flags(),
                    gso_type: meta.virtio_gso_type(),
                    hdr_len: meta.hdr_len,
                    gso_size: meta.gso_size,
                    csum_start: meta.csum_start,
                    csum_offset: meta.csum_offset,
                };
                if !takes.accepts(&vhdr) {
                    items.extend(m.parts().map(|(k, _)| TxItem::Whole { pkt: sel[k] }));
                    return;
                }
                let start = parts.len() as u16;
                let mut first = None;
                for (k, r) in m.parts() {
                    first.get_or_insert(sel[k]);
                    parts.push((sel[k], r.start as u32, r.len() as u32));
                }
                let head = soft.push_copy(m.header());
                merged.push(MergedDesc {
                    head,
                    parts: (start, m.segments as u16),
                    vhdr,
                    len: m.len() as u32,
                });
                items.push(TxItem::Merged {
                    pkt: first.expect("a merged frame has parts"),
                    m: merged.len() as u32 - 1,
                });
                counters.coalesced.add(1);
                counters.coalesced_segments.add(m.segments as u64);
            }
        });
    }
}
