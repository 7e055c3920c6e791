//! Segmentation of untrusted guest frames with untrusted virtio-net
//! metadata, then coalescing of the result: must never panic; whatever
//! segments, coalesces back to one frame with the same payload. The
//! coalescer's template fast path must decide exactly as its rules
//! (`Coalescer::without_fast_path`) on every batch, including ones with
//! the raw input frame, corrupted copies and segments out of order, and
//! merging by reference (`coalesce_by_reference`) must give the same
//! frames as merging by copying.
#![no_main]

use geneve::gro::{Coalesced, CoalescedRef, Coalescer};
use geneve::checksum::complete_partial;
use geneve::{segment, segment_with, GsoMeta, InnerChecksum, SegmentPlan};
use libfuzzer_sys::fuzz_target;

/// Both coalescers' outputs for `batch` (verifying checksums or not):
/// frames, metadata and segment counts, in order.
fn differential(batch: &[&[u8]], verify: bool) {
    let run = |mut c: Coalescer| {
        c.verify_checksums = verify;
        let mut out = Vec::new();
        c.coalesce(batch, |o| match o {
            Coalesced::Unchanged(f) => out.push((f.to_vec(), None)),
            Coalesced::Merged { frame, meta, segments } => {
                out.push((frame.to_vec(), Some((meta, segments))))
            }
        });
        out
    };
    let by_reference = |mut c: Coalescer| {
        c.verify_checksums = verify;
        let mut out = Vec::new();
        c.coalesce_by_reference(batch, |o| match o {
            CoalescedRef::Unchanged(f) => out.push((f.to_vec(), None)),
            CoalescedRef::Merged(m) => out.push((m.to_vec(), Some((m.meta, m.segments)))),
        });
        out
    };
    let copied = run(Coalescer::new());
    assert_eq!(copied, run(Coalescer::without_fast_path()));
    assert_eq!(copied, by_reference(Coalescer::new()));
    assert_eq!(copied, by_reference(Coalescer::without_fast_path()));
}

fuzz_target!(|input: (u8, u8, u16, u16, u16, &[u8])| {
    let (flags, gso_type, gso_size, csum_start, csum_offset, frame) = input;
    let Ok(meta) = GsoMeta::from_virtio_net_hdr(flags, gso_type, 0, gso_size, csum_start, csum_offset) else {
        return;
    };
    let Ok(plan) = SegmentPlan::new(frame, &meta, 0) else { return };
    if plan.count() > 64 {
        return;
    }
    let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
    let Ok(plan) = segment(frame, &meta, None, &mut bufs) else { return };
    let segs: Vec<&[u8]> = bufs.iter().enumerate().map(|(i, b)| &b[..plan.segment_len(i)]).collect();
    let mut out = 0usize;
    Coalescer::new().coalesce(&segs, |c| out += c.frame().len());
    // Arbitrary frames need not merge, but bytes are never lost or invented
    // beyond the repeated headers.
    assert!(out <= segs.iter().map(|s| s.len()).sum::<usize>());
    // Partial inner checksums: completing them must work on every segment.
    let mut pbufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
    if let Ok(p) = segment_with(frame, &meta, None, &mut pbufs, InnerChecksum::Partial) {
        assert_eq!(p, plan);
        for (i, b) in pbufs.iter_mut().enumerate() {
            let s = &mut b[..p.segment_len(i)];
            if meta.gso_type != geneve::GsoType::None {
                complete_partial(s, p.csum_start(&meta), 16).unwrap();
            } else if meta.needs_csum {
                complete_partial(s, p.csum_start(&meta), usize::from(meta.csum_offset)).unwrap();
            }
        }
    }
    // Coalescing the raw input must not panic either.
    Coalescer::new().coalesce(&[frame, frame], |_| {});
    // Fast path and rules agree: on the segments, with the raw frame and
    // a copy of each segment with one byte changed (chosen by the input)
    // mixed in, and with the segments reversed.
    let verify = flags & 0x80 == 0;
    differential(&segs, verify);
    let mut bent: Vec<Vec<u8>> = segs.iter().map(|s| s.to_vec()).collect();
    for (i, b) in bent.iter_mut().enumerate() {
        if !b.is_empty() {
            let at = usize::from(csum_start).wrapping_mul(i + 1) % b.len();
            b[at] ^= gso_size as u8 | 1;
        }
    }
    let mut mixed: Vec<&[u8]> = Vec::new();
    for (s, b) in segs.iter().zip(&bent) {
        mixed.push(s);
        if frame.last().is_some_and(|b| b & 1 == 1) {
            mixed.push(b);
        }
    }
    mixed.push(frame);
    differential(&mixed, verify);
    let reversed: Vec<&[u8]> = segs.iter().rev().copied().collect();
    differential(&reversed, verify);
});
