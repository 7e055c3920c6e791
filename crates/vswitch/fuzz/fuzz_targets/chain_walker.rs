//! Descriptor chains of a hostile guest: split rings and descriptor tables whose
//! every field the input chooses, over guest memory the input lays out.
//!
//! Two modes, chosen by the input:
//!
//! - **Walker**: guest memory of one to three regions (4 KiB to 64 KiB each, at
//!   addresses the input picks: with holes between them, adjacent, or at the top of the
//!   address space), a queue of 1 to 256 descriptors whose rings lie where the input
//!   says (inside a region, straddling its end, in a hole), descriptors with any
//!   address, length, flags (NEXT, WRITE, INDIRECT and unknown bits) and next index,
//!   indirect tables written anywhere, and any available ring (flags, index, entries,
//!   `used_event`). Every available entry's chain is then taken as
//!   [`SplitRing::single_readable`], [`SplitRing::single_writable`] and
//!   [`SplitRing::walk_chain`] in both directions, and the segments found are read,
//!   gathered, written and copied with the scatter-gather helpers of `virtq`.
//!
//!   Asserts: nothing panics and every call returns (loops terminate); every segment
//!   returned is non-empty and lies wholly inside one region of the guest memory the
//!   input built (checked against the layout, not through vm-memory); a chain has at
//!   most [`MAX_CHAIN_DESCS`] segments, their lengths add up to the total returned, a
//!   transmit (device-readable) chain holds at most [`MAX_CHAIN_BYTES`]; a failed walk
//!   leaves the output list as it was; the one-step checks agree with the walk (a chain
//!   they accept walks to exactly that one buffer); the scatter-gather helpers move
//!   exactly the bytes the lists hold past their skip (no more than asked), and read
//!   back the bytes guest memory holds.
//!
//! - **Pipeline**: a switch of three vhost-user ports (two offering offloads), each
//!   with a simulated guest ([`SimGuest`]) of one queue pair whose acked features the
//!   input picks among those the port offers; the input writes the guests' transmit
//!   and receive descriptor tables, their available rings and index (also impossible
//!   ones), and frame bytes (virtio-net header included) anywhere in their memory.
//!   One to three PMD rounds then run the real receive path
//!   (`VhostPort::receive`), the pipeline and delivery into the receive rings.
//!
//!   Asserts: nothing panics; every transmit chain taken is completed (good or bad);
//!   every frame delivered into a guest used at least one of its receive chains, and
//!   every frame received from a guest one of its transmit chains.
//!
//! - **Packed walker** ([`packed_walker`]): the walker's memory and descriptors as a
//!   packed ring (virtio 1.2 §2.8), whose chains are taken, checked and completed as the
//!   data path takes them.
//!
//! Input format (little-endian; see `seeds/gen_seeds.py`): byte 0 is the mode (bit 0
//! clear: walker, bit 1 then selecting the packed walker; bit 0 set: pipeline); then
//! the fields of [`WalkerInput::read`] or
//! [`PipelineInput::read`], in that order.
#![no_main]

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace, GuestMemoryBackend, VolatileSlice};
use vswitch::ports::vhost::virtq::{
    copy_sg, gather_sg, read_sg, write_sg_at, Mem, MemView, Seg, SplitRing, MAX_CHAIN_BYTES,
    MAX_CHAIN_DESCS,
};
use vswitch_fuzz::Reader;

/// A page of guest memory.
const PAGE: u64 = 4096;
/// Largest region of the walker's guest memory.
const MAX_REGION: u64 = 16 * PAGE;

/// Where a region of guest memory starts.
#[derive(Debug)]
enum Base {
    /// At this page (below 256 MiB).
    Page(u16),
    /// Right after the previous region (no hole).
    Adjacent,
    /// Ending this many pages below the top of the address space.
    Top(u8),
}

/// One region of guest memory.
#[derive(Debug)]
struct Region {
    /// Where it starts.
    base: Base,
    /// 1 to 16 pages.
    pages: u8,
}

/// A guest-physical address: mostly relative to a region, so that it hits memory.
#[derive(Debug, Clone, Copy)]
enum Addr {
    /// `off` bytes into region `region`, up to 256 bytes past its end.
    In { region: u8, off: u32 },
    /// This address, as is.
    Raw(u64),
}

impl Addr {
    /// A kind byte (even: `In`, then region `u8` and offset `u32`; odd: `Raw`, then
    /// a `u64`).
    fn read(r: &mut Reader) -> Self {
        if r.u8() % 2 == 0 {
            Addr::In {
                region: r.u8(),
                off: r.u32(),
            }
        } else {
            Addr::Raw(r.u64())
        }
    }

    fn resolve(self, regions: &[(u64, u64)]) -> u64 {
        match self {
            Addr::In { region, off } => {
                let (start, len) = regions[usize::from(region) % regions.len()];
                start.wrapping_add(u64::from(off) % (len + 256))
            }
            Addr::Raw(a) => a,
        }
    }
}

/// A descriptor's length: mostly small.
#[derive(Debug, Clone, Copy)]
enum Len {
    /// Below 64 KiB.
    Small(u16),
    /// Anything.
    Raw(u32),
}

impl Len {
    /// A kind byte (even: a `u16` follows; odd: a `u32`).
    fn read(r: &mut Reader) -> Self {
        if r.u8() % 2 == 0 {
            Len::Small(r.u16())
        } else {
            Len::Raw(r.u32())
        }
    }

    fn get(self) -> u32 {
        match self {
            Len::Small(l) => u32::from(l),
            Len::Raw(l) => l,
        }
    }
}

/// One descriptor (virtio 1.2 §2.7.5).
#[derive(Debug, Clone, Copy)]
struct Desc {
    /// The buffer's address.
    addr: Addr,
    /// Its length.
    len: Len,
    /// Bits 0-2: NEXT, WRITE, INDIRECT; bit 3: an unknown flag (0x10); bit 7: use
    /// `raw_flags` instead.
    flags: u8,
    /// The flags field as is, when bit 7 of `flags` is set.
    raw_flags: u16,
    /// The next descriptor's index.
    next: u16,
}

impl Desc {
    /// Address, length, `flags: u8`, `raw_flags: u16`, `next: u16`.
    fn read(r: &mut Reader) -> Self {
        Desc {
            addr: Addr::read(r),
            len: Len::read(r),
            flags: r.u8(),
            raw_flags: r.u16(),
            next: r.u16(),
        }
    }

    /// A `u8` count, then that many descriptors.
    fn read_list(r: &mut Reader) -> Vec<Self> {
        let n = r.u8();
        (0..n).map(|_| Desc::read(r)).collect()
    }

    fn bytes(&self, regions: &[(u64, u64)]) -> [u8; 16] {
        let flags = if self.flags & 0x80 != 0 {
            self.raw_flags
        } else {
            u16::from(self.flags & 7) | if self.flags & 8 != 0 { 0x10 } else { 0 }
        };
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&self.addr.resolve(regions).to_le_bytes());
        b[8..12].copy_from_slice(&self.len.get().to_le_bytes());
        b[12..14].copy_from_slice(&flags.to_le_bytes());
        b[14..16].copy_from_slice(&self.next.to_le_bytes());
        b
    }
}

/// The walker mode's input.
#[derive(Debug)]
struct WalkerInput {
    /// Guest memory (the first three).
    regions: Vec<Region>,
    /// Queue size 2^(queue_log2 % 9).
    queue_log2: u8,
    /// Where the descriptor table, the available ring and the used ring are.
    desc_at: Addr,
    /// See `desc_at`.
    avail_at: Addr,
    /// See `desc_at`.
    used_at: Addr,
    /// VIRTIO_RING_F_EVENT_IDX negotiated.
    event_idx: bool,
    /// The device's next available position.
    next_avail: u16,
    /// The descriptor table (its first entries).
    descs: Vec<Desc>,
    /// Indirect tables: descriptors written at an address (the first four).
    tables: Vec<(Addr, Vec<Desc>)>,
    /// `avail.flags`.
    avail_flags: u16,
    /// `avail.idx - next_avail`.
    pending: u16,
    /// Available ring entries from `next_avail` on.
    avail: Vec<u16>,
    /// `used_event` (after the available ring).
    used_event: u16,
    /// For `single_writable`.
    need: u16,
    /// Bytes skipped in the transmit and in the receive chains by the scatter-gather
    /// helpers.
    skips: (u16, u16),
}

/// A `u8` count, then that many `u16`s.
fn read_u16s(r: &mut Reader) -> Vec<u16> {
    let n = r.u8();
    (0..n).map(|_| r.u16()).collect()
}

impl WalkerInput {
    /// Region count `u8` (1 to 3), per region a base kind `u8` (0: `Page` and a `u16`,
    /// 1: `Adjacent`, 2: `Top` and a `u8`) and `pages: u8`; then the fields in order of
    /// declaration (lists as a `u8` count and the elements; a table as its address,
    /// then a list of descriptors).
    fn read(r: &mut Reader) -> Self {
        let regions = (0..r.u8() % 3 + 1)
            .map(|_| {
                let base = match r.u8() % 3 {
                    0 => Base::Page(r.u16()),
                    1 => Base::Adjacent,
                    _ => Base::Top(r.u8()),
                };
                Region {
                    base,
                    pages: r.u8(),
                }
            })
            .collect();
        WalkerInput {
            regions,
            queue_log2: r.u8(),
            desc_at: Addr::read(r),
            avail_at: Addr::read(r),
            used_at: Addr::read(r),
            event_idx: r.u8() & 1 != 0,
            next_avail: r.u16(),
            descs: Desc::read_list(r),
            tables: (0..r.u8() % 5)
                .map(|_| (Addr::read(r), Desc::read_list(r)))
                .collect(),
            avail_flags: r.u16(),
            pending: r.u16(),
            avail: read_u16s(r),
            used_event: r.u16(),
            need: r.u16(),
            skips: (r.u16(), r.u16()),
        }
    }
}

/// Which region of `regions` wholly holds `seg`, if one does.
fn inside(regions: &[(u64, u64)], seg: Seg) -> bool {
    regions.iter().any(|&(start, len)| {
        seg.addr >= start
            && seg.addr - start < len
            && u64::from(seg.len) <= len - (seg.addr - start)
    })
}

/// Whether no two segments share a byte.
fn disjoint(a: &[Seg]) -> bool {
    let mut v: Vec<(u64, u64)> = a
        .iter()
        .map(|s| (s.addr, s.addr + u64::from(s.len)))
        .collect();
    v.sort_unstable();
    v.windows(2).all(|w| w[0].1 <= w[1].0)
}

/// The bytes `segs` hold from `skip` on, read segment by segment with vm-memory.
fn reference_bytes(mem: &Mem, segs: &[Seg], skip: u32) -> Vec<u8> {
    let mut all = Vec::new();
    for s in segs {
        let mut b = vec![0u8; s.len as usize];
        mem.read_slice(&mut b, GuestAddress(s.addr))
            .expect("a segment in guest memory");
        all.extend_from_slice(&b);
    }
    all.split_off((skip as usize).min(all.len()))
}

/// Checks a walk's result; returns the chain's segments if it succeeded.
fn check_walk(
    regions: &[(u64, u64)],
    writable: bool,
    before: usize,
    out: &[Seg],
    r: Result<u32, vswitch::model::stats::DropReason>,
) -> Option<Vec<Seg>> {
    match r {
        Ok(total) => {
            let segs = &out[before..];
            assert!(segs.len() <= MAX_CHAIN_DESCS, "{} segments", segs.len());
            let sum: u64 = segs.iter().map(|s| u64::from(s.len)).sum();
            assert_eq!(sum, u64::from(total));
            if !writable {
                assert!(total <= MAX_CHAIN_BYTES, "tx chain of {total} bytes");
            }
            for &s in segs {
                assert!(s.len > 0, "empty segment {s:?}");
                assert!(
                    inside(regions, s),
                    "{s:?} outside guest memory {regions:x?}"
                );
            }
            Some(segs.to_vec())
        }
        Err(_) => {
            assert_eq!(out.len(), before, "a failed walk must not leave segments");
            None
        }
    }
}

/// The walker mode: builds the memory and the queue, then takes every available chain.
fn walker(inp: WalkerInput) {
    let Some((mem, regions)) = build_memory(&inp) else {
        return;
    };
    let Some(q) = build_queue(&mem, &regions, &inp) else {
        return;
    };
    let avail = q.avail_ring();
    let idx = inp.next_avail.wrapping_add(inp.pending);
    let _ = mem.write_obj(inp.avail_flags.to_le(), GuestAddress(avail));
    let _ = mem.write_obj(idx.to_le(), GuestAddress(avail.wrapping_add(2)));
    for (i, &h) in inp.avail.iter().take(usize::from(q.size())).enumerate() {
        let pos = inp.next_avail.wrapping_add(i as u16) & (q.size() - 1);
        let _ = mem.write_obj(
            h.to_le(),
            GuestAddress(avail.wrapping_add(4 + 2 * u64::from(pos))),
        );
    }
    let _ = mem.write_obj(
        inp.used_event.to_le(),
        GuestAddress(avail.wrapping_add(4 + 2 * u64::from(q.size()))),
    );

    let Some(ring) = SplitRing::new(&mem, &q) else {
        return;
    };
    assert_eq!(ring.size(), q.size());
    assert_eq!(ring.avail_idx(), idx);
    let view = MemView::new(&mem);
    let mut out = vec![Seg::default()];
    let mut used = 0u16;
    // At most a burst's worth of entries, as the receive path takes.
    for i in 0..inp.pending.min(64) {
        let head = ring.avail_entry(inp.next_avail.wrapping_add(i));
        ring.prefetch_desc(head);
        out.truncate(1);

        // Transmit direction.
        let before = out.len();
        let r = ring.walk_chain(head, false, &mut out);
        let tx = check_walk(&regions, false, before, &out, r);
        if let Some((seg, bytes)) = ring.single_readable(head) {
            assert_eq!(bytes.len(), seg.len as usize);
            assert!(seg.len > 0 && seg.len <= MAX_CHAIN_BYTES);
            assert_eq!(tx.as_deref(), Some(&[seg][..]), "head {head}");
        }

        // Receive direction.
        let before = out.len();
        let r = ring.walk_chain(head, true, &mut out);
        let rx = check_walk(&regions, true, before, &out, r);
        let need = u32::from(inp.need);
        if let Some(bytes) = ring.single_writable(head, need) {
            assert_eq!(bytes.len(), need as usize);
            let rx = rx
                .as_deref()
                .expect("single_writable accepted what the walk refuses");
            assert_eq!(rx.len(), 1);
            assert!(rx[0].len >= need);
        }
        // A chain is of one direction or the other (or neither), never both.
        assert!(
            tx.is_none() || rx.is_none(),
            "head {head}: both a transmit and a receive chain: {tx:?} / {rx:?}"
        );

        // The scatter-gather helpers over what the walks found.
        let (skip_a, skip_b) = (u32::from(inp.skips.0), u32::from(inp.skips.1));
        for segs in [tx.as_deref(), rx.as_deref()].into_iter().flatten() {
            let want = reference_bytes(&mem, segs, skip_a);
            let mut buf = vec![0u8; want.len() + 7];
            let n = read_sg(&view, segs, skip_a, &mut buf);
            assert_eq!(n, want.len());
            assert_eq!(&buf[..n], &want[..]);
            let short = (want.len() / 2).max(1);
            let mut buf = vec![0u8; short];
            let n = read_sg(&view, segs, skip_a, &mut buf);
            assert_eq!(n, short.min(want.len()));
            assert_eq!(&buf[..n], &want[..n]);
            let mut host = vec![0u8; want.len() + 3];
            let n = gather_sg(&view, segs, skip_a, &VolatileSlice::from(&mut host[..]));
            assert_eq!(n, want.len());
            assert_eq!(&host[..n], &want[..]);
            let mut host = vec![0u8; short];
            let n = gather_sg(&view, segs, skip_a, &VolatileSlice::from(&mut host[..]));
            assert_eq!(n, short.min(want.len()));
            assert_eq!(&host[..n], &want[..n]);
        }
        if let Some(rx) = rx.as_deref() {
            let cap = reference_bytes(&mem, rx, skip_b).len();
            let data: Vec<u8> = (0..(cap + 5) as u32).map(|i| (i * 13) as u8).collect();
            let n = write_sg_at(&view, rx, skip_b, &data);
            assert_eq!(n, cap);
            if disjoint(rx) {
                assert_eq!(reference_bytes(&mem, rx, skip_b), data[..cap]);
            }
            if let Some(tx) = tx.as_deref() {
                let src = reference_bytes(&mem, tx, skip_a).len();
                let n = copy_sg(&view, tx, skip_a, &view, rx, skip_b);
                assert_eq!(n, src.min(cap));
            }
        }
        ring.write_used(used, head, 0);
        used = used.wrapping_add(1);
    }
    ring.publish_used(used);
    let _ = ring.needs_interrupt(0, used);
    let _ = ring.set_kicks(true, inp.next_avail);
    let _ = ring.set_kicks(false, inp.next_avail);
}

/// The walker mode on a packed ring (virtio 1.2 §2.8): the same memory, descriptors
/// and tables, read in the packed layout (each descriptor's `next` field is its flags:
/// AVAIL, USED, NEXT, WRITE, INDIRECT as the input sets them); the available ring's
/// flags and `used_event` are the driver's event suppression structure; `next_avail` is
/// the device's position (slot and wrap counter, impossible ones included). Up to
/// `pending` (at most 64) chains are taken in turn as the data path takes them, in both
/// directions, and completed.
///
/// Asserts, beside [`check_walk`]'s: a chain spans 1 to `size` slots and the position
/// after it is a valid one; the one-step checks agree with the walk; a chain is of one
/// direction only, but for a lone indirect table of device-writable entries (see
/// `PackedRing`'s tolerance of DPDK's transmit tables).
fn packed_walker(inp: WalkerInput) {
    use vswitch::ports::vhost::virtq::{DeviceRing, PackedRing};
    let Some((mem, regions)) = build_memory(&inp) else {
        return;
    };
    let Some(q) = build_queue(&mem, &regions, &inp) else {
        return;
    };
    let driver = q.avail_ring();
    let _ = mem.write_obj(inp.used_event.to_le(), GuestAddress(driver));
    let _ = mem.write_obj(
        inp.avail_flags.to_le(),
        GuestAddress(driver.wrapping_add(2)),
    );
    let Some(ring) = PackedRing::new(&mem, &q) else {
        return;
    };
    let size = ring.size();
    let Ok(mut cur) = ring.avail_cursor(inp.next_avail) else {
        assert!(inp.next_avail & 0x7fff >= size, "a valid position refused");
        return;
    };
    let mut out = vec![Seg::default()];
    let mut used = inp.next_avail;
    for _ in 0..inp.pending.min(64) {
        if !ring.has_avail(&cur) {
            break;
        }
        ring.prefetch_avail(&cur, 16);
        out.truncate(1);
        let before = out.len();
        let (chain, r) = ring.read_chain(&cur, false, &mut out);
        let tx = check_walk(&regions, false, before, &out, r);
        assert!(chain.descs >= 1 && chain.descs <= size, "{chain:?}");
        if let Some((c, seg, bytes)) = ring.readable_single(&cur) {
            assert_eq!(c, chain);
            assert_eq!(bytes.len(), seg.len as usize);
            assert_eq!(tx.as_deref(), Some(&[seg][..]), "{cur:?}");
        }
        let before = out.len();
        let (chain_rx, r) = ring.read_chain(&cur, true, &mut out);
        assert_eq!(chain_rx, chain, "both directions see one chain");
        let rx = check_walk(&regions, true, before, &out, r);
        let need = u32::from(inp.need);
        if let Some((_, seg, bytes)) = ring.writable_single(&cur, need) {
            assert_eq!(bytes.len(), need as usize);
            assert_eq!(rx.as_deref(), Some(&[seg][..]), "{cur:?}");
        }
        // A chain is of one direction or the other, never both, except a lone indirect
        // descriptor whose table's entries are all device-writable: receive buffers,
        // and a transmit chain as DPDK's virtio PMD leaves its tables (WRITE preset).
        let head_flags: u16 = mem
            .read_obj(GuestAddress(
                q.desc_table() + 16 * u64::from(cur.next & 0x7fff) + 14,
            ))
            .map(u16::from_le)
            .unwrap_or(0);
        let lone_indirect = chain.descs == 1 && head_flags & 4 != 0;
        assert!(
            tx.is_none() || rx.is_none() || lone_indirect,
            "{cur:?}: both directions"
        );
        ring.advance(&mut cur, chain);
        assert!(
            cur.next & 0x7fff < size,
            "position {:#x} past the ring",
            cur.next
        );
        used = ring.put_used(used, chain, 0);
        ring.publish(inp.next_avail, used);
    }
    let _ = ring.needs_interrupt(inp.next_avail, used);
    let _ = ring.set_kicks(true, cur.next);
    let _ = ring.set_kicks(false, cur.next);
}

/// Guest memory of the walker's regions, filled recognisably, and the regions
/// `(start, len)`; `None` for a layout no VMM can send.
fn build_memory(inp: &WalkerInput) -> Option<(Mem, Vec<(u64, u64)>)> {
    let mut ranges: Vec<(GuestAddress, usize)> = Vec::new();
    let mut end = 0u64;
    for r in inp.regions.iter().take(3) {
        let size = (u64::from(r.pages % 16) + 1) * PAGE;
        let start = match r.base {
            Base::Page(p) => u64::from(p) * PAGE,
            Base::Adjacent => end,
            Base::Top(k) => u64::MAX - size - u64::from(k) * PAGE + 1,
        };
        end = start.wrapping_add(size);
        ranges.push((GuestAddress(start), size as usize));
    }
    if ranges.is_empty() {
        return None;
    }
    // Overlapping or out of the address space: not a layout a VMM can send.
    let mem = Mem::from_ranges(&ranges).ok()?;
    let regions: Vec<(u64, u64)> = mem
        .iter()
        .map(|r| {
            use vm_memory::GuestMemoryRegion;
            (r.start_addr().0, r.len())
        })
        .collect();
    // Recognisable contents, so that reads that go wrong show: every 8-byte word its
    // offset in the region (over 64 KiB) and the region's number.
    static FILL: OnceLock<Vec<u8>> = OnceLock::new();
    let fill = FILL.get_or_init(|| (0..MAX_REGION).map(|i| (i >> 3) as u8).collect());
    for (n, &(start, len)) in regions.iter().enumerate() {
        mem.write_slice(&fill[..len as usize], GuestAddress(start))
            .expect("fill");
        mem.write_obj(n as u8, GuestAddress(start)).expect("fill");
    }
    Some((mem, regions))
}

/// The walker's queue over `mem`: its size, ring addresses, EVENT_IDX and position; its
/// descriptors and indirect tables written.
fn build_queue(mem: &Mem, regions: &[(u64, u64)], inp: &WalkerInput) -> Option<Queue> {
    let size = 1u16 << (inp.queue_log2 % 9);
    let mut q = Queue::new(256).ok()?;
    q.set_size(size);
    let at = |a: &Addr| {
        let a = a.resolve(regions);
        (Some(a as u32), Some((a >> 32) as u32))
    };
    let (lo, hi) = at(&inp.desc_at);
    q.set_desc_table_address(lo, hi);
    let (lo, hi) = at(&inp.avail_at);
    q.set_avail_ring_address(lo, hi);
    let (lo, hi) = at(&inp.used_at);
    q.set_used_ring_address(lo, hi);
    q.set_event_idx(inp.event_idx);
    q.set_next_avail(inp.next_avail);
    q.set_ready(true);
    let desc = q.desc_table();
    for (i, d) in inp.descs.iter().take(usize::from(q.size())).enumerate() {
        let _ = mem.write_slice(
            &d.bytes(regions),
            GuestAddress(desc.wrapping_add(16 * i as u64)),
        );
    }
    for (a, table) in inp.tables.iter().take(4) {
        let a = a.resolve(regions);
        for (i, d) in table.iter().take(80).enumerate() {
            let _ = mem.write_slice(
                &d.bytes(regions),
                GuestAddress(a.wrapping_add(16 * i as u64)),
            );
        }
    }
    Some(q)
}

/// The pipeline mode's input for one guest.
#[derive(Debug)]
struct GuestInput {
    /// Which of the offered features the driver acked (bit per feature).
    features: u16,
    /// Transmit queue: descriptors.
    tx: Vec<Desc>,
    /// Transmit queue: available ring entries.
    tx_avail: Vec<u16>,
    /// Transmit queue: `avail.idx`.
    tx_idx: u16,
    /// Receive queue: descriptors.
    rx: Vec<Desc>,
    /// Receive queue: available ring entries.
    rx_avail: Vec<u16>,
    /// Receive queue: `avail.idx`.
    rx_idx: u16,
    /// Bytes written at addresses of the guest's memory (frames, headers, tables).
    writes: Vec<(Addr, Vec<u8>)>,
    /// A frame written in descriptor `tx[0]`'s buffer (when it points into memory).
    frame: Vec<u8>,
}

impl GuestInput {
    /// The fields in order of declaration: lists as a `u8` count and the elements,
    /// byte strings as a `u16` length and the bytes.
    fn read(r: &mut Reader) -> Self {
        GuestInput {
            features: r.u16(),
            tx: Desc::read_list(r),
            tx_avail: read_u16s(r),
            tx_idx: r.u16(),
            rx: Desc::read_list(r),
            rx_avail: read_u16s(r),
            rx_idx: r.u16(),
            writes: (0..r.u8() % 9)
                .map(|_| (Addr::read(r), r.blob(1 << 16).to_vec()))
                .collect(),
            frame: r.blob(1 << 16).to_vec(),
        }
    }
}

/// The pipeline mode's input.
#[derive(Debug)]
struct PipelineInput {
    /// Queue size 2^(queue_log2 % 5): 1 to 16.
    queue_log2: u8,
    /// The guests of ports a, b and c.
    guests: [GuestInput; 3],
    /// One to three PMD rounds.
    rounds: u8,
}

impl PipelineInput {
    /// `queue_log2: u8`, `rounds: u8`, then three guests.
    fn read(r: &mut Reader) -> Self {
        let queue_log2 = r.u8();
        let rounds = r.u8();
        PipelineInput {
            queue_log2,
            rounds,
            guests: [
                GuestInput::read(r),
                GuestInput::read(r),
                GuestInput::read(r),
            ],
        }
    }
}

/// The pipeline mode: one execution on the run's switch.
fn pipeline(inp: PipelineInput) {
    use vswitch::datapath::pmd::Pmd;
    use vswitch::switch::Switch;

    // One switch and PMD for the whole run (building them, flow cache included, costs
    // more than the rest of an execution); each execution attaches new guests and
    // starts from an empty FDB.
    thread_local! {
        static SWITCH: RefCell<Option<(Arc<Switch>, Pmd)>> = const { RefCell::new(None) };
    }
    SWITCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_none() {
            let mut cfg = vswitch::testing::config(&[("a", None), ("b", None), ("c", None)], true);
            cfg.ports[0].offloads = true;
            cfg.ports[1].offloads = true;
            let sw = Switch::new(cfg).expect("a switch of three vhost-user ports");
            let pmd = Pmd::new(sw.clone(), 0);
            *s = Some((sw, pmd));
        }
        let (sw, pmd) = s.as_mut().expect("set above");
        for p in 0..3 {
            sw.fdb.flush_port(p, true);
        }
        pipeline_round(inp, sw, pmd);
    });
}

/// One pipeline execution on the run's switch `sw` and its PMD `pmd`.
fn pipeline_round(
    inp: PipelineInput,
    sw: &Arc<vswitch::switch::Switch>,
    pmd: &mut vswitch::datapath::pmd::Pmd,
) {
    use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
    use virtio_bindings::virtio_net::*;
    use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};
    use vswitch::testing::SimGuest;

    const BASE: [u32; 4] = [
        VIRTIO_F_VERSION_1,
        VIRTIO_NET_F_MRG_RXBUF,
        VIRTIO_RING_F_EVENT_IDX,
        VIRTIO_RING_F_INDIRECT_DESC,
    ];
    const OFFLOADS: [u32; 8] = [
        VIRTIO_NET_F_CSUM,
        VIRTIO_NET_F_GUEST_CSUM,
        VIRTIO_NET_F_HOST_TSO4,
        VIRTIO_NET_F_HOST_TSO6,
        VIRTIO_NET_F_GUEST_TSO4,
        VIRTIO_NET_F_GUEST_TSO6,
        VIRTIO_NET_F_HOST_ECN,
        VIRTIO_NET_F_GUEST_ECN,
    ];
    let size = 1u16 << (inp.queue_log2 % 5);
    let mut guests = Vec::new();
    for (p, g) in inp.guests.iter().enumerate() {
        let offered: Vec<u32> = BASE
            .iter()
            .chain(if p < 2 { &OFFLOADS[..] } else { &[] })
            .copied()
            .collect();
        let features = offered
            .iter()
            .enumerate()
            .filter(|(i, _)| g.features & (1 << i) != 0)
            .fold(0u64, |f, (_, &b)| f | 1 << b);
        let guest = SimGuest::with_queue_size(1, features, size);
        vswitch::testing::attach(sw, p as u16, guest.conn.clone());
        let mem = guest.conn.mem.memory();
        let regions: Vec<(u64, u64)> = mem
            .iter()
            .map(|r| {
                use vm_memory::GuestMemoryRegion;
                (r.start_addr().0, r.len())
            })
            .collect();
        // Contents first, rings last: a write may land on a ring, but the available
        // indices are then the ones the input gives.
        for (a, bytes) in g.writes.iter().take(8) {
            let _ = mem.write_slice(bytes, GuestAddress(a.resolve(&regions)));
        }
        if let Some(d) = g.tx.first() {
            let a = d.addr.resolve(&regions);
            let _ = mem.write_slice(&g.frame, GuestAddress(a));
        }
        for (q, descs, heads, idx) in [
            (0, &g.rx, &g.rx_avail, g.rx_idx),
            (1, &g.tx, &g.tx_avail, g.tx_idx),
        ] {
            let st = {
                use vhost_user_backend::VringT;
                let v = guest.conn.vrings[q].get_ref();
                let q = v.get_queue();
                (q.desc_table(), q.avail_ring())
            };
            let (desc, avail) = st;
            for (i, d) in descs.iter().take(usize::from(size)).enumerate() {
                let _ = mem.write_slice(
                    &d.bytes(&regions),
                    GuestAddress(desc.wrapping_add(16 * i as u64)),
                );
            }
            for (i, &h) in heads.iter().take(usize::from(size)).enumerate() {
                let _ = mem.write_obj(
                    h.to_le(),
                    GuestAddress(avail.wrapping_add(4 + 2 * i as u64)),
                );
            }
            let _ = mem.write_obj(idx.to_le(), GuestAddress(avail.wrapping_add(2)));
        }
        guests.push(guest);
    }
    let before: Vec<_> = (0..3).map(|p| sw.port_stats(p)).collect();
    let mut taken = 0usize;
    for _ in 0..(inp.rounds % 3 + 1) {
        taken += pmd.poll_once();
    }
    let mut completed = 0usize;
    for (p, g) in guests.iter().enumerate() {
        // The device's own counts of chains used (the used rings' indices in guest
        // memory are the guest's to scribble on; so are the available indices, which
        // frames delivered into buffers the guest placed over its rings may change).
        let used = |q: usize| {
            use vhost_user_backend::VringT;
            g.conn.vrings[q].get_ref().get_queue().next_used()
        };
        let (rx_used, tx_used) = (used(0), used(1));
        let after = sw.port_stats(p as u16);
        // Every frame delivered to the guest took at least one receive chain, and every
        // frame received from it one transmit chain.
        let delivered = after.tx_packets - before[p].tx_packets;
        let received = after.rx_packets - before[p].rx_packets;
        assert!(
            delivered <= u64::from(rx_used),
            "port {p}: {delivered} frames delivered in {rx_used} chains"
        );
        assert!(
            received <= u64::from(tx_used),
            "port {p}: {received} frames received from {tx_used} chains"
        );
        completed += usize::from(tx_used);
    }
    // Every transmit chain taken is completed, good or bad.
    assert_eq!(completed, taken, "chains completed vs taken");
}

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    let mode = r.u8();
    if mode & 1 == 0 {
        if mode & 2 == 0 {
            walker(WalkerInput::read(&mut r));
        } else {
            packed_walker(WalkerInput::read(&mut r));
        }
    } else {
        pipeline(PipelineInput::read(&mut r));
    }
});
