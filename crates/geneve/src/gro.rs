//! Software TCP coalescing (LRO/GRO) within a batch, following the rules of
//! Linux GRO (`tcp_gro_receive` in `net/ipv4/tcp_offload.c`,
//! `inet_gro_receive` in `net/ipv4/af_inet.c`).
//!
//! [`Coalescer::coalesce`] walks a batch of Ethernet frames (inner frames,
//! after decapsulation) in order. Consecutive in-order segments of one TCP
//! flow merge into one frame of at most 65535 bytes of IP packet, delivered
//! with [`GsoMeta`] for a guest that accepts large frames (virtio
//! `GUEST_TSO4/6`). Everything it cannot merge is delivered unchanged.
//!
//! Two segments merge when all of these hold (as in Linux GRO):
//! * same Ethernet header (and VLAN tags), same IP version and header
//!   length; no IPv4 options, no fragments;
//! * same addresses, IPv4 TOS/TTL/DF or IPv6 traffic class, flow label and
//!   hop limit;
//! * IPv4 ID consistent: +1 per segment, or constant with DF set;
//! * same ports, ACK number, window, TCP header length and flags, except
//!   that PSH and FIN may appear on the last segment and CWR only on the
//!   first;
//! * TCP options byte-identical, except the values of a timestamp option
//!   (the merged frame keeps the first segment's options);
//! * the new segment's sequence number follows the previous one's data;
//! * the new segment carries data and no more than the first one (the
//!   MSS); a shorter segment is merged and ends the frame;
//! * neither SYN, RST nor URG is set (such a segment passes through and ends
//!   the open frame); PSH or FIN on a segment merges it and ends the frame;
//! * the IPv4 header and TCP checksums verify (if `verify_checksums`).
//!
//! The merged frame has a complete TCP checksum and a valid IPv4 header
//! checksum; its metadata says `data_valid`, `gso_size` = the first
//! segment's payload length, and `csum_start`/`csum_offset` of the TCP
//! checksum.
//!
//! Up to [`MAX_OPEN_FLOWS`] flows merge at once, so interleaved flows
//! (A B A B) still merge; within a flow the output keeps the input order.
//!
//! Two ways to build the merged frame, with the same rules and the same
//! bytes: [`Coalescer::coalesce`] copies the payloads into a buffer of the
//! coalescer (one slice out); [`Coalescer::coalesce_by_reference`] only
//! rewrites the headers and hands out the payloads where they are
//! ([`MergedRef`]), as Linux GRO merges by attaching each segment's data
//! as a fragment of the first `sk_buff` (`skb_gro_receive`) and DPDK's
//! GRO library by chaining mbufs. By reference suits a consumer that
//! copies the frame anyway (into a guest's receive buffers): the payload
//! is copied once instead of twice.
//!
//! The rules above are applied to a flow's first segment; the segments that
//! follow it in the batch are first matched against its headers (a
//! template: one masked compare of the first 128 bytes, the fields that may
//! differ checked on their own, checksums verified incrementally), headers
//! of a run of segments first, then their payloads copied and summed back
//! to back. A segment that does not fit the template goes through the
//! rules, which decide the same for every segment the template accepts
//! (tested against the rules alone by a differential property test and
//! the `segment_coalesce` fuzz target).

use crate::checksum::{self, add, finish, fold};
use crate::gso::{GsoMeta, GsoType};
use crate::net::{
    be16, be32, parse_tcp, put16, tcp_flags, tcp_pseudo_sum, TcpFrame, IPV4_HEADER_LEN,
    IPV6_HEADER_LEN, TCP_HEADER_LEN,
};

/// Largest IP packet a merged frame may hold, in bytes (16-bit length).
pub const MAX_MERGED_IP_LEN: usize = 65535;

/// One frame out of [`Coalescer::coalesce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coalesced<'a> {
    /// A frame from the batch, untouched.
    Unchanged(&'a [u8]),
    /// Several segments merged into one frame.
    Merged {
        /// The merged Ethernet frame.
        frame: &'a [u8],
        /// Its offload metadata (for the guest's `virtio_net_hdr`).
        meta: GsoMeta,
        /// How many segments it was made of (≥ 2).
        segments: usize,
    },
}

impl<'a> Coalesced<'a> {
    /// The frame bytes, merged or not.
    pub fn frame(&self) -> &'a [u8] {
        match *self {
            Coalesced::Unchanged(f) => f,
            Coalesced::Merged { frame, .. } => frame,
        }
    }
}

/// One frame out of [`Coalescer::coalesce_by_reference`].
#[derive(Debug, Clone, Copy)]
pub enum CoalescedRef<'a> {
    /// A frame from the batch, untouched.
    Unchanged(&'a [u8]),
    /// Several segments merged into one frame, by reference.
    Merged(MergedRef<'a>),
}

impl<'a> CoalescedRef<'a> {
    /// Bytes of the frame, merged or not.
    pub fn len(&self) -> usize {
        match self {
            CoalescedRef::Unchanged(f) => f.len(),
            CoalescedRef::Merged(m) => m.len(),
        }
    }

    /// Whether the frame has no bytes (never true of a merged frame).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame as one contiguous `Vec` (copies; for tests and tools).
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            CoalescedRef::Unchanged(f) => f.to_vec(),
            CoalescedRef::Merged(m) => m.to_vec(),
        }
    }
}

/// A merged frame as a header plus the payloads of its segments, which stay
/// where they are in the batch's frames (as a Linux GRO `sk_buff` holds
/// its segments as page fragments, or DPDK's GRO library chains mbufs).
/// The bytes of the frame are `header()` followed by every slice of
/// `payloads()`, in order: a frame with the same bytes and metadata as
/// [`Coalescer::coalesce`] would have built by copying.
#[derive(Clone, Copy)]
pub struct MergedRef<'a> {
    header: &'a [u8],
    frames: &'a [&'a [u8]],
    spans: &'a [Span],
    /// Bytes of the whole frame.
    len: usize,
    /// Offload metadata of the merged frame (for the guest's
    /// `virtio_net_hdr`).
    pub meta: GsoMeta,
    /// How many segments it was made of (≥ 2).
    pub segments: usize,
}

/// Where one segment's payload is in the batch: `frames[frame]`, bytes
/// `hdr_len..hdr_len + len` (the flow's header length).
#[derive(Debug, Clone, Copy)]
struct Span {
    frame: u32,
    len: u32,
}

/// Lengths and metadata, not the bytes (the batch's frames would print
/// whole).
impl core::fmt::Debug for MergedRef<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MergedRef")
            .field("header_len", &self.header.len())
            .field("len", &self.len())
            .field("meta", &self.meta)
            .field("segments", &self.segments)
            .finish()
    }
}

impl<'a> MergedRef<'a> {
    /// The merged frame's Ethernet, IP and TCP headers (lengths, flags and
    /// checksums final: the TCP checksum covers the payloads).
    pub fn header(&self) -> &'a [u8] {
        self.header
    }

    /// The segments' payloads in order, each a slice of its input frame.
    pub fn payloads(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let (frames, h) = (self.frames, self.header.len());
        self.spans
            .iter()
            .map(move |s| &frames[s.frame as usize][h..h + s.len as usize])
    }

    /// Where each payload is, in order: the index of its frame in the batch and the
    /// byte range within that frame (for a consumer that keeps its own handles to the
    /// batch's frames rather than the slices).
    pub fn parts(&self) -> impl ExactSizeIterator<Item = (usize, core::ops::Range<usize>)> + 'a {
        let h = self.header.len();
        self.spans
            .iter()
            .map(move |s| (s.frame as usize, h..h + s.len as usize))
    }

    /// Bytes of the merged frame (header and payloads).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a merged frame has a header and at least two payloads.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Copies the frame into the start of `out` (the copy that delivery
    /// into a guest's receive buffers makes anyway) and returns its length.
    ///
    /// # Panics
    /// If `out` is shorter than [`MergedRef::len`].
    pub fn write_to(&self, out: &mut [u8]) -> usize {
        let mut at = self.header.len();
        out[..at].copy_from_slice(self.header);
        for p in self.payloads() {
            out[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        at
    }

    /// The merged frame as one contiguous `Vec` (copies).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len()];
        self.write_to(&mut v);
        v
    }
}

/// Most flows a [`Coalescer`] keeps open at once within a batch (as Linux's
/// `MAX_GRO_SKBS`).
pub const MAX_OPEN_FLOWS: usize = 8;

/// [`Open::id_step`] before the second segment.
const ID_STEP_UNKNOWN: u32 = 1 << 16;

/// Bytes of one merge buffer: the largest IP packet plus Ethernet and two
/// VLAN tags.
const MERGE_BUF_LEN: usize = MAX_MERGED_IP_LEN + 22;

/// Bytes of one header buffer by reference: the longest headers of a
/// candidate (Ethernet with two VLAN tags, IPv6, TCP with 40 bytes of
/// options).
const HEADER_BUF_LEN: usize = 22 + IPV6_HEADER_LEN + 60;

/// Coalesces batches. Holds one merge buffer per open flow (up to
/// [`MAX_OPEN_FLOWS`], each allocated on first use and reused after: 64 KiB
/// when copying, a header's bytes and a list of payloads by reference), so
/// a batch allocates nothing once warm.
#[derive(Debug, Clone)]
pub struct Coalescer {
    /// Verify the IPv4 header and TCP checksums of each segment before
    /// merging (default true). Turn off only when the NIC or the outer UDP
    /// checksum has already vouched for the inner bytes. Off, the payload
    /// is not summed at all: the merged frame's TCP checksum is derived from
    /// the segments' TCP checksum fields, which must then be complete.
    pub verify_checksums: bool,
    /// Largest IP packet of a merged frame, bytes (≤ 65535, default 65535).
    pub max_ip_len: usize,
    /// Merge buffers, one per open-flow slot; `lens[k]` bytes of `bufs[k]`
    /// are in use.
    bufs: Vec<Vec<u8>>,
    lens: [usize; MAX_OPEN_FLOWS],
    /// By reference: the payloads of each slot's merged frame.
    spans: Vec<Vec<Span>>,
    /// Header templates of the open flows, one per slot (the fast path).
    templates: Vec<Template>,
    /// Whether later segments are matched against the templates (always,
    /// except in differential tests of the fast path against the rules).
    fast_path: bool,
}

impl Default for Coalescer {
    fn default() -> Self {
        Self::new()
    }
}

struct Seg<'f> {
    frame: &'f [u8],
    t: TcpFrame,
    flags: u8,
    seq: u32,
    id: u16,
}

struct Open<'f> {
    /// Merge buffer slot.
    slot: usize,
    /// Index of the first segment's frame in the batch.
    index: usize,
    /// Arrival order of the first segment, for flushing oldest first.
    order: u64,
    first: Seg<'f>,
    count: usize,
    next_seq: u32,
    last_id: u16,
    /// IPv4 ID step between segments (0 or 1) once two are merged, else
    /// [`ID_STEP_UNKNOWN`]. A plain integer, not an `Option<u16>`: written
    /// as two parts and read back as one word, an `Option` defeated store
    /// forwarding on every segment.
    id_step: u32,
    payload_total: usize,
    payload_sum: u16,
    last_flags: u8,
}

impl Coalescer {
    /// A coalescer with checksum verification on and 64 KiB frames.
    pub fn new() -> Self {
        Coalescer {
            verify_checksums: true,
            max_ip_len: MAX_MERGED_IP_LEN,
            bufs: vec![Vec::new(); MAX_OPEN_FLOWS],
            lens: [0; MAX_OPEN_FLOWS],
            spans: vec![Vec::new(); MAX_OPEN_FLOWS],
            templates: vec![Template::UNUSABLE; MAX_OPEN_FLOWS],
            fast_path: true,
        }
    }

    /// A coalescer that applies the merge rules to every segment (no
    /// template fast path), for differential tests: its output must equal
    /// [`Coalescer::new`]'s on any batch.
    #[cfg(any(test, feature = "test-utils"))]
    pub fn without_fast_path() -> Self {
        Coalescer {
            fast_path: false,
            ..Self::new()
        }
    }

    /// Coalesces one batch of Ethernet frames, calling `deliver` once per
    /// output frame. Each input frame is delivered exactly once: unchanged,
    /// or as part of exactly one merged frame.
    ///
    /// Order: frames of one TCP flow come out in their batch order; up to
    /// [`MAX_OPEN_FLOWS`] flows merge at once, and a merged frame is
    /// delivered when its flow's run ends (PSH, FIN, a short or unmergeable
    /// segment of that flow, a ninth flow evicting the oldest, or the end
    /// of the batch), so it may come after later frames of other flows.
    /// Frames that are not TCP candidates pass through at once.
    ///
    /// A merged frame is built by copying the segments' payloads into a
    /// buffer of the coalescer (summed while copied), so it is one slice;
    /// [`Coalescer::coalesce_by_reference`] merges the same frames without
    /// copying.
    pub fn coalesce<F>(&mut self, frames: &[&[u8]], deliver: F)
    where
        F: FnMut(Coalesced<'_>),
    {
        // One dispatch for the whole batch: the copy-and-sum kernel inlines
        // into the fast path (see `checksum::arch`).
        checksum::arch().dispatch(Batch {
            c: self,
            frames,
            sink: Copying(deliver),
        });
    }

    /// As [`Coalescer::coalesce`], the same rules and the same output
    /// frames, but a merged frame is delivered by reference: its rewritten
    /// headers plus the segments' payloads where they are in `frames`
    /// ([`MergedRef`]), as Linux GRO keeps segments as fragments of one
    /// `sk_buff`. Payloads are summed to verify their checksums, not
    /// copied: the one copy is left to the consumer, who makes it anyway
    /// when it writes the frame into a guest's receive buffers
    /// ([`MergedRef::write_to`], or one slice at a time).
    pub fn coalesce_by_reference<F>(&mut self, frames: &[&[u8]], deliver: F)
    where
        F: FnMut(CoalescedRef<'_>),
    {
        checksum::arch().dispatch(Batch {
            c: self,
            frames,
            sink: ByReference(deliver),
        });
    }

    /// The body of [`Coalescer::coalesce`] and
    /// [`Coalescer::coalesce_by_reference`] (`S::BY_REFERENCE`).
    #[inline(always)]
    fn run<'f, S: Sink>(&mut self, frames: &[&'f [u8]], deliver: &mut S) {
        let mut open: [Option<Open<'f>>; MAX_OPEN_FLOWS] = Default::default();
        let mut order = 0u64;
        // The slot last merged into or opened: where the next segment most
        // likely belongs.
        let mut recent = 0;
        let mut i = 0;
        while i < frames.len() {
            if self.fast_path {
                if let Some(o) = open[recent].as_mut() {
                    let (merged, end) = self.fast_run::<S>(o, frames, i);
                    i += merged;
                    match end {
                        RunEnd::More => continue,
                        RunEnd::Ends => {
                            let o = open[recent].take().expect("matched above");
                            self.flush(o, frames, deliver);
                            continue;
                        }
                        RunEnd::BadChecksum => {
                            // As the rules below: ends the open frame,
                            // passes through.
                            let o = open[recent].take().expect("matched above");
                            self.flush(o, frames, deliver);
                            deliver.unchanged(frames[i]);
                            i += 1;
                            continue;
                        }
                        RunEnd::Rules => {}
                    }
                }
            }
            let f = frames[i];
            i += 1;
            let Some(seg) = self.candidate(f) else {
                // Keep the flow's order: flush its open frame first.
                if let Ok(t) = parse_tcp(f) {
                    for slot in open.iter_mut() {
                        if slot.as_ref().is_some_and(|o| same_flow(&o.first, f, &t)) {
                            let o = slot.take().expect("checked is_some");
                            self.flush(o, frames, deliver);
                        }
                    }
                }
                deliver.unchanged(f);
                continue;
            };
            let hit = (0..MAX_OPEN_FLOWS).find(|&k| {
                open[k]
                    .as_ref()
                    .is_some_and(|o| same_flow(&o.first, seg.frame, &seg.t))
            });
            if let Some(k) = hit {
                let o = open[k].as_mut().expect("found above");
                if self.can_merge(o, &seg) {
                    recent = k;
                    if self.append::<S>(o, &seg, i - 1) {
                        let ends = seg.flags & (tcp_flags::PSH | tcp_flags::FIN) != 0
                            || seg.t.payload_len < o.first.t.payload_len;
                        if ends {
                            let o = open[k].take().expect("found above");
                            self.flush(o, frames, deliver);
                        }
                    } else {
                        // Bad checksum: ends the open frame, passes through.
                        let o = open[k].take().expect("found above");
                        self.flush(o, frames, deliver);
                        deliver.unchanged(f);
                    }
                    continue;
                }
                let o = open[k].take().expect("found above");
                self.flush(o, frames, deliver);
            }
            let payload_sum = if self.verify_checksums {
                checksum::sum_fast(&f[seg.t.hdr_len()..seg.t.end()])
            } else {
                trusted_payload_sum(&seg)
            };
            if !self.tcp_ok(&seg, payload_sum) || seg.flags & (tcp_flags::PSH | tcp_flags::FIN) != 0
            {
                deliver.unchanged(f);
                continue;
            }
            let slot = match open.iter().position(Option::is_none) {
                Some(k) => k,
                None => {
                    let k = oldest(&open).expect("all slots are open");
                    let o = open[k].take().expect("oldest is open");
                    self.flush(o, frames, deliver);
                    k
                }
            };
            self.templates[slot] = Template::of(&seg);
            recent = slot;
            open[slot] = Some(Open {
                slot,
                index: i - 1,
                order,
                next_seq: seg.seq.wrapping_add(seg.t.payload_len as u32),
                last_id: seg.id,
                id_step: ID_STEP_UNKNOWN,
                payload_total: seg.t.payload_len,
                payload_sum,
                last_flags: seg.flags,
                count: 1,
                first: seg,
            });
            order += 1;
        }
        while let Some(k) = oldest(&open) {
            let o = open[k].take().expect("oldest is open");
            self.flush(o, frames, deliver);
        }
    }

    /// Parses a frame as a merge candidate, or `None` to pass it through.
    fn candidate<'f>(&self, f: &'f [u8]) -> Option<Seg<'f>> {
        let t = parse_tcp(f).ok()?;
        if t.payload_len == 0 || (t.ipv4 && t.l3_len != IPV4_HEADER_LEN) {
            return None;
        }
        let l4 = t.l4_off();
        let flags = f[l4 + 13];
        if flags & (tcp_flags::SYN | tcp_flags::RST | tcp_flags::URG) != 0 {
            return None;
        }
        // No IPv4 options here (checked above): a 20-byte header.
        if self.verify_checksums
            && t.ipv4
            && checksum::sum20(f[t.l2_len..l4].try_into().ok()?) != 0xffff
        {
            return None;
        }
        Some(Seg {
            frame: f,
            t,
            flags,
            seq: be32(f, l4 + 4),
            id: if t.ipv4 { be16(f, t.l2_len + 4) } else { 0 },
        })
    }

    /// Whether the TCP checksum verifies, given the payload's partial sum
    /// (always true with `verify_checksums` off).
    fn tcp_ok(&self, s: &Seg<'_>, payload_sum: u16) -> bool {
        if !self.verify_checksums {
            return true;
        }
        let (f, t) = (s.frame, &s.t);
        let tcp_len = t.l4_len + t.payload_len;
        let hdr = checksum::sum(&f[t.l4_off()..t.hdr_len()]);
        add(add(tcp_pseudo_sum(f, t, tcp_len), hdr), payload_sum) == 0xffff
    }

    fn can_merge(&self, o: &mut Open<'_>, s: &Seg<'_>) -> bool {
        let a = o.first.frame;
        let b = s.frame;
        let (ta, tb) = (o.first.t, s.t);
        if ta.l2_len != tb.l2_len
            || ta.l3_len != tb.l3_len
            || ta.l4_len != tb.l4_len
            || ta.ipv4 != tb.ipv4
        {
            return false;
        }
        if s.t.payload_len > ta.payload_len
            || ta.l3_len + ta.l4_len + o.payload_total + s.t.payload_len
                > self.max_ip_len.min(MAX_MERGED_IP_LEN)
        {
            return false;
        }
        let l3 = ta.l2_len;
        let l4 = ta.l4_off();
        if a[..l3] != b[..l3] {
            return false;
        }
        if ta.ipv4 {
            // ver/IHL + TOS, flags (DF; fragments were rejected), TTL +
            // protocol, addresses.
            if a[l3..l3 + 2] != b[l3..l3 + 2]
                || a[l3 + 6] != b[l3 + 6]
                || a[l3 + 8..l3 + 10] != b[l3 + 8..l3 + 10]
            {
                return false;
            }
            if a[l3 + 12..l3 + 20] != b[l3 + 12..l3 + 20] {
                return false;
            }
            let step = s.id.wrapping_sub(o.last_id);
            let df = a[l3 + 6] & 0x40 != 0;
            match o.id_step {
                ID_STEP_UNKNOWN if step == 1 || (step == 0 && df) => o.id_step = u32::from(step),
                st if st == u32::from(step) => {}
                _ => return false,
            }
        } else if a[l3..l3 + 4] != b[l3..l3 + 4] || a[l3 + 6..l3 + 40] != b[l3 + 6..l3 + 40] {
            return false;
        }
        // Ports, sequence, ACK, data offset, window.
        if a[l4..l4 + 4] != b[l4..l4 + 4]
            || s.seq != o.next_seq
            || a[l4 + 8..l4 + 13] != b[l4 + 8..l4 + 13]
        {
            return false;
        }
        if a[l4 + 14..l4 + 16] != b[l4 + 14..l4 + 16] {
            return false;
        }
        if s.flags & tcp_flags::CWR != 0
            || (s.flags ^ o.first.flags) & !(tcp_flags::PSH | tcp_flags::FIN | tcp_flags::CWR) != 0
        {
            return false;
        }
        options_match(&a[l4 + 20..ta.hdr_len()], &b[l4 + 20..tb.hdr_len()])
    }

    /// Copies a segment's payload (`frames[index]`) after the merged frame
    /// while summing it (one pass), or by reference only sums it and
    /// records where it is, then checks its TCP checksum. Returns false,
    /// leaving the merged frame as it was, if the checksum is bad.
    fn append<S: Sink>(&mut self, o: &mut Open<'_>, s: &Seg<'_>, index: usize) -> bool {
        let k = o.slot;
        if o.count == 1 {
            self.start_merge::<S>(o);
        }
        let n = s.t.payload_len;
        let src = &s.frame[s.t.hdr_len()..s.t.end()];
        let len = self.lens[k];
        let ps = if self.verify_checksums {
            let ps = if S::BY_REFERENCE {
                checksum::sum_fast(src)
            } else {
                checksum::copy_and_sum(&mut self.bufs[k][len..len + n], src)
            };
            if !self.tcp_ok(s, ps) {
                return false;
            }
            ps
        } else {
            if !S::BY_REFERENCE {
                self.bufs[k][len..len + n].copy_from_slice(src);
            }
            trusted_payload_sum(s)
        };
        if S::BY_REFERENCE {
            self.spans[k].push(Span {
                frame: index as u32,
                len: n as u32,
            });
        } else {
            self.lens[k] += n;
        }
        let ps = if o.payload_total % 2 == 1 {
            ps.swap_bytes()
        } else {
            ps
        };
        o.payload_sum = add(o.payload_sum, ps);
        o.payload_total += n;
        o.next_seq = o.next_seq.wrapping_add(n as u32);
        o.last_id = s.id;
        o.last_flags = s.flags;
        o.count += 1;
        true
    }

    /// Copies the first segment of `o` into its merge buffer, when a
    /// second one is about to be appended; by reference only its headers,
    /// and its payload's place.
    fn start_merge<S: Sink>(&mut self, o: &Open<'_>) {
        let k = o.slot;
        let end = if S::BY_REFERENCE {
            let span = Span {
                frame: o.index as u32,
                len: o.first.t.payload_len as u32,
            };
            self.spans[k].clear();
            self.spans[k].push(span);
            o.first.t.hdr_len()
        } else {
            o.first.t.end()
        };
        let need = if S::BY_REFERENCE {
            HEADER_BUF_LEN
        } else {
            MERGE_BUF_LEN
        };
        if self.bufs[k].len() < need {
            // First use of this slot (copying: the first since it held
            // headers only): the only allocation, ever.
            self.bufs[k] = vec![0; need];
        }
        self.bufs[k][..end].copy_from_slice(&o.first.frame[..end]);
        self.lens[k] = end;
    }

    /// The fast path: appends to `o` the frames at the start of `frames`
    /// whose first [`TEMPLATE_LEN`] bytes equal the template of `o`
    /// wherever the merge rules require equal headers (one masked compare
    /// of 16 words instead of parsing and comparing field by field), and
    /// whose fields that may differ pass the same checks as in
    /// [`Coalescer::can_merge`] and [`Coalescer::append`]. The IPv4 header
    /// and TCP checksums are verified incrementally from the template's
    /// sums plus the differing fields (RFC 1624), each payload summed while
    /// it is copied.
    ///
    /// In two passes over up to [`RUN`] frames: the headers first (stopping
    /// at the first frame that does not fit, or after one that ends the
    /// merged frame), then the copies, back to back. Interleaved, the
    /// header work of each frame held up its copy, at a third of the
    /// throughput of the copies alone.
    ///
    /// Returns how many frames were appended and why it stopped. With
    /// [`RunEnd::Rules`] the next frame goes through the rules, which
    /// decide the same for every frame this path accepts (equal headers
    /// imply the same parse, the same flow and the same options).
    #[inline(always)]
    fn fast_run<S: Sink>(
        &mut self,
        o: &mut Open<'_>,
        batch: &[&[u8]],
        at: usize,
    ) -> (usize, RunEnd) {
        let frames = &batch[at..];
        let tp = &self.templates[o.slot];
        if !tp.usable {
            return (0, RunEnd::Rules);
        }
        let t = o.first.t;
        let hdr_len = t.hdr_len();
        // Pass 1: headers, with the L2 length and IP version as constants
        // (every field at a fixed offset: no bounds checks, 16-bit loads).
        let mut recs = [Rec::default(); RUN];
        let mut st = RunState {
            next_seq: o.next_seq,
            last_id: o.last_id,
            id_step: o.id_step,
            total: o.payload_total,
        };
        let ctx = RunCtx {
            tp,
            t,
            verify: self.verify_checksums,
            max_ip: self.max_ip_len.min(MAX_MERGED_IP_LEN),
        };
        let (m, end) = match (t.l2_len, t.ipv4) {
            (14, true) => headers::<14, true>(&ctx, &mut st, frames, &mut recs),
            (18, true) => headers::<18, true>(&ctx, &mut st, frames, &mut recs),
            (22, true) => headers::<22, true>(&ctx, &mut st, frames, &mut recs),
            (14, false) => headers::<14, false>(&ctx, &mut st, frames, &mut recs),
            (18, false) => headers::<18, false>(&ctx, &mut st, frames, &mut recs),
            (22, false) => headers::<22, false>(&ctx, &mut st, frames, &mut recs),
            // `l2` yields only these lengths (0, 1 or 2 VLAN tags).
            _ => (0, RunEnd::Rules),
        };
        if m == 0 {
            return (0, end);
        }
        // Pass 2: copies, into the merge buffer after the merged frame (by
        // reference: sums only, the payloads' places recorded), with the
        // running state in locals (written back once).
        if o.count == 1 {
            self.start_merge::<S>(o);
        }
        let k = o.slot;
        let verify = self.verify_checksums;
        let buf = &mut self.bufs[k][..];
        let spans = &mut self.spans[k];
        if S::BY_REFERENCE {
            spans.reserve(m);
        }
        let (mut len, mut sum, mut total) = (self.lens[k], o.payload_sum, o.payload_total);
        let (mut done, mut end) = (m, end);
        for (j, (r, f)) in recs[..m].iter().zip(frames).enumerate() {
            let n = r.n as usize;
            let payload = &f[hdr_len..hdr_len + n];
            let ps = if S::BY_REFERENCE {
                if verify {
                    checksum::sum_block(payload)
                } else {
                    0
                }
            } else {
                checksum::copy_and_sum_block(&mut buf[len..len + n], payload)
            };
            let ps = if !verify {
                // As `trusted_payload_sum`.
                finish(r.hdr_sum)
            } else if add(r.hdr_sum, ps) == 0xffff {
                ps
            } else {
                (done, end) = (j, RunEnd::BadChecksum);
                break;
            };
            if S::BY_REFERENCE {
                spans.push(Span {
                    frame: (at + j) as u32,
                    len: n as u32,
                });
            } else {
                len += n;
            }
            sum = add(sum, if total % 2 == 1 { ps.swap_bytes() } else { ps });
            total += n;
        }
        if done > 0 {
            let r = &recs[done - 1];
            self.lens[k] = len;
            o.payload_sum = sum;
            o.next_seq = o.next_seq.wrapping_add((total - o.payload_total) as u32);
            o.payload_total = total;
            o.last_id = r.id;
            o.id_step = r.id_step;
            o.last_flags = r.flags;
            o.count += done;
        }
        (done, end)
    }

    /// Delivers the frame of `o`: the first segment unchanged if it is
    /// alone, else the merged frame with its headers completed.
    fn flush<S: Sink>(&mut self, o: Open<'_>, frames: &[&[u8]], deliver: &mut S) {
        if o.count == 1 {
            deliver.unchanged(o.first.frame);
            return;
        }
        let t = o.first.t;
        let l3 = t.l2_len;
        let l4 = t.l4_off();
        let tcp_len = t.l4_len + o.payload_total;
        let f = &mut self.bufs[o.slot][..self.lens[o.slot]];
        if t.ipv4 {
            put16(f, l3 + 2, (t.l3_len + tcp_len) as u16);
            put16(f, l3 + 10, 0);
            let c = checksum::checksum(&f[l3..l4]);
            put16(f, l3 + 10, c);
        } else {
            put16(f, l3 + 4, tcp_len as u16);
        }
        f[l4 + 13] = o.first.flags | (o.last_flags & (tcp_flags::PSH | tcp_flags::FIN));
        put16(f, l4 + 16, 0);
        let pseudo = tcp_pseudo_sum(f, &t, tcp_len);
        let c = finish(add(
            add(pseudo, checksum::sum(&f[l4..t.hdr_len()])),
            o.payload_sum,
        ));
        put16(f, l4 + 16, c);
        let meta = GsoMeta {
            gso_type: if t.ipv4 {
                GsoType::TcpV4
            } else {
                GsoType::TcpV6
            },
            ecn: o.first.flags & tcp_flags::CWR != 0,
            gso_size: t.payload_len as u16,
            hdr_len: t.hdr_len() as u16,
            needs_csum: false,
            data_valid: true,
            csum_start: l4 as u16,
            csum_offset: 16,
        };
        deliver.merged(MergedRef {
            header: &self.bufs[o.slot][..self.lens[o.slot]],
            frames,
            spans: if S::BY_REFERENCE {
                &self.spans[o.slot]
            } else {
                &[]
            },
            len: t.hdr_len() + o.payload_total,
            meta,
            segments: o.count,
        });
    }
}

/// Where [`Coalescer::run`] delivers frames: the callback of
/// [`Coalescer::coalesce`] or of [`Coalescer::coalesce_by_reference`].
trait Sink {
    /// Whether merged frames are built by reference (payloads summed and
    /// recorded as [`Span`]s) instead of copied into a merge buffer.
    const BY_REFERENCE: bool;
    fn unchanged(&mut self, frame: &[u8]);
    /// A merged frame. Copying, its `header` is the whole frame and it has
    /// no spans.
    fn merged(&mut self, m: MergedRef<'_>);
}

/// The sink of [`Coalescer::coalesce`].
struct Copying<F>(F);

impl<F: FnMut(Coalesced<'_>)> Sink for Copying<F> {
    const BY_REFERENCE: bool = false;

    #[inline(always)]
    fn unchanged(&mut self, frame: &[u8]) {
        (self.0)(Coalesced::Unchanged(frame));
    }

    #[inline(always)]
    fn merged(&mut self, m: MergedRef<'_>) {
        debug_assert_eq!(m.header.len(), m.len);
        (self.0)(Coalesced::Merged {
            frame: m.header,
            meta: m.meta,
            segments: m.segments,
        });
    }
}

/// The sink of [`Coalescer::coalesce_by_reference`].
struct ByReference<F>(F);

impl<F: FnMut(CoalescedRef<'_>)> Sink for ByReference<F> {
    const BY_REFERENCE: bool = true;

    #[inline(always)]
    fn unchanged(&mut self, frame: &[u8]) {
        (self.0)(CoalescedRef::Unchanged(frame));
    }

    #[inline(always)]
    fn merged(&mut self, m: MergedRef<'_>) {
        (self.0)(CoalescedRef::Merged(m));
    }
}

/// The partial sum of a segment's payload derived from its TCP checksum
/// field, which is trusted to be complete (`verify_checksums` off): a
/// complete segment sums to 0xffff with its pseudo-header (RFC 9293 §3.1),
/// so the payload sums to the complement of pseudo-header plus header
/// (RFC 1624 arithmetic). Saves summing the payload; a wrong field gives a
/// wrong merged checksum, as it would be wrong in the segment.
fn trusted_payload_sum(s: &Seg<'_>) -> u16 {
    let (f, t) = (s.frame, &s.t);
    let tcp_len = t.l4_len + t.payload_len;
    let hdr = checksum::sum(&f[t.l4_off()..t.hdr_len()]);
    finish(add(tcp_pseudo_sum(f, t, tcp_len), hdr))
}

/// [`Coalescer::coalesce`] and [`Coalescer::coalesce_by_reference`] as a
/// `pulp` operation.
struct Batch<'c, 'b, 'f, K> {
    c: &'c mut Coalescer,
    frames: &'b [&'f [u8]],
    sink: K,
}

impl<K: Sink> pulp::WithSimd for Batch<'_, '_, '_, K> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(mut self, _: S) {
        self.c.run(self.frames, &mut self.sink);
    }
}

/// What the header pass carries from one frame to the next.
struct RunState {
    next_seq: u32,
    last_id: u16,
    id_step: u32,
    total: usize,
}

/// What the header pass needs of the open flow and the coalescer.
struct RunCtx<'a> {
    tp: &'a Template,
    t: TcpFrame,
    verify: bool,
    max_ip: usize,
}

/// The header pass of [`Coalescer::fast_run`] for flows whose IP header
/// starts at `L3` (14, 18 or 22: 0, 1 or 2 VLAN tags) and is IPv4 without
/// options (`V4`, as every IPv4 merge candidate) or IPv6: fills `recs` for
/// the frames that fit, returns how many and why it stopped.
#[inline(always)]
fn headers<const L3: usize, const V4: bool>(
    c: &RunCtx<'_>,
    st: &mut RunState,
    frames: &[&[u8]],
    recs: &mut [Rec; RUN],
) -> (usize, RunEnd) {
    let l4 = L3 + if V4 { IPV4_HEADER_LEN } else { IPV6_HEADER_LEN };
    let (tp, t) = (c.tp, &c.t);
    let hdr_len = l4 + t.l4_len;
    let full = hdr_len + t.payload_len;
    // Payload bytes the merged frame may still take.
    let room = c.max_ip.saturating_sub(l4 - L3 + t.l4_len);
    let mut m = 0;
    for (rec, f) in recs.iter_mut().zip(frames) {
        let Some(h) = f.first_chunk::<TEMPLATE_LEN>() else {
            return (m, RunEnd::Rules);
        };
        // Quick check of what most segments are: full size, headers equal
        // to the template but for the sequence number the run expects and
        // (IPv4) the next ID in the flow's step with its checksum, all
        // compared as words. Anything else takes the checks below; both
        // accept such a segment and record the same.
        if f.len() == full
            && st.total + t.payload_len <= room
            && (!V4 || st.id_step != ID_STEP_UNKNOWN)
        {
            let mut diff = 0;
            for k in 0..TEMPLATE_WORDS {
                let w = u64::from_ne_bytes(h[8 * k..8 * k + 8].try_into().expect("8 bytes"));
                diff |= (w ^ tp.quick_bytes[k]) & tp.quick_care[k];
            }
            let seq = u32::from_be_bytes([h[l4 + 4], h[l4 + 5], h[l4 + 6], h[l4 + 7]]);
            let id = st.last_id.wrapping_add(st.id_step as u16);
            let ip_ok = !V4 || {
                let c = !fold(tp.quick_ip_sum + u64::from(id));
                let want = tp.quick_ip_word | u64::from(id) << 48 | u64::from(c);
                let w: [u8; 8] = h[L3 + 4..L3 + 12].try_into().expect("8 bytes");
                u64::from_be_bytes(w) == want
            };
            if diff == 0 && seq == st.next_seq && ip_ok {
                let mut hdr_sum = tp.quick_tcp_sum
                    + u64::from(seq >> 16)
                    + u64::from(seq & 0xffff)
                    + u64::from(rd16(h, l4 + 16))
                    + u64::from(rd16(h, l4 + 18));
                if let Some(p) = tp.ts {
                    hdr_sum += u64::from(timestamp_sum(h, p));
                }
                let n = t.payload_len;
                *rec = Rec {
                    n: n as u32,
                    hdr_sum: fold(hdr_sum),
                    id: if V4 { id } else { 0 },
                    id_step: st.id_step,
                    flags: h[l4 + 13],
                };
                m += 1;
                st.next_seq = st.next_seq.wrapping_add(n as u32);
                st.last_id = if V4 { id } else { 0 };
                st.total += n;
                continue;
            }
        }
        let mut diff = 0;
        for k in 0..TEMPLATE_WORDS {
            let w = u64::from_ne_bytes(h[8 * k..8 * k + 8].try_into().expect("8 bytes"));
            diff |= (w ^ tp.bytes[k]) & tp.care[k];
        }
        // Only frames that end where their IP packet ends (no Ethernet
        // padding): the payload length comes from the slice length and the
        // length field is only compared (`parse_tcp` and `candidate` accept
        // these lengths).
        let n = f.len() - hdr_len;
        let tcp_len = t.l4_len + n;
        let ip_len = if V4 {
            rd16(h, L3 + 2)
        } else {
            rd16(h, L3 + 4).wrapping_add(IPV6_HEADER_LEN as u16)
        };
        let flags = h[l4 + 13];
        let seq = u32::from_be_bytes([h[l4 + 4], h[l4 + 5], h[l4 + 6], h[l4 + 7]]);
        if diff != 0
            || usize::from(ip_len) != l4 - L3 + tcp_len
            || n == 0
            || n > t.payload_len
            || l4 - L3 + t.l4_len + st.total + n > c.max_ip
            || flags & tcp_flags::CWR != 0
            || seq != st.next_seq
        {
            return (m, RunEnd::Rules);
        }
        let id = if V4 {
            let id = rd16(h, L3 + 4);
            let step = id.wrapping_sub(st.last_id);
            match st.id_step {
                ID_STEP_UNKNOWN if step == 1 || (step == 0 && tp.df) => {
                    st.id_step = u32::from(step);
                }
                s if s == u32::from(step) => {}
                _ => return (m, RunEnd::Rules),
            }
            let ip_sum = u32::from(tp.ip_fixed)
                + u32::from(ip_len)
                + u32::from(id)
                + u32::from(rd16(h, L3 + 10));
            if c.verify && fold(u64::from(ip_sum)) != 0xffff {
                return (m, RunEnd::Rules);
            }
            id
        } else {
            0
        };
        // The pseudo-header and TCP header sum: the template's without the
        // fields that may differ, plus this segment's (RFC 1624), added as
        // integers and folded once (the same value as a chain of `add`).
        let mut hdr_sum = u64::from(tp.pseudo0)
            + tcp_len as u64
            + u64::from(tp.tcp_fixed)
            + u64::from(seq >> 16)
            + u64::from(seq & 0xffff)
            + u64::from(rd16(h, l4 + 12))
            + u64::from(rd16(h, l4 + 16))
            + u64::from(rd16(h, l4 + 18));
        if let Some(p) = tp.ts {
            hdr_sum += u64::from(timestamp_sum(h, p));
        }
        *rec = Rec {
            n: n as u32,
            hdr_sum: fold(hdr_sum),
            id,
            id_step: st.id_step,
            flags,
        };
        m += 1;
        st.next_seq = st.next_seq.wrapping_add(n as u32);
        st.last_id = id;
        st.total += n;
        if flags & (tcp_flags::PSH | tcp_flags::FIN) != 0 || n < t.payload_len {
            return (m, RunEnd::Ends);
        }
    }
    (m, RunEnd::More)
}

/// The big-endian 16-bit word at `at` of a frame's first bytes (`at` a
/// constant below 127 once inlined: no bounds check).
#[inline(always)]
fn rd16(h: &[u8; TEMPLATE_LEN], at: usize) -> u16 {
    u16::from_be_bytes([h[at], h[at + 1]])
}

/// Why [`Coalescer::fast_run`] stopped.
enum RunEnd {
    /// At the end of the batch or after [`RUN`] frames: the merged frame
    /// stays open.
    More,
    /// After a frame that ends the merged frame (PSH, FIN or short).
    Ends,
    /// At a frame whose TCP checksum does not verify (not appended).
    BadChecksum,
    /// At a frame that does not fit the template: apply the rules.
    Rules,
}

/// Most frames [`Coalescer::fast_run`] takes in one run.
const RUN: usize = 64;

/// What the header pass of [`Coalescer::fast_run`] found in one frame.
#[derive(Clone, Copy, Default)]
struct Rec {
    /// Payload bytes.
    n: u32,
    /// Pseudo-header and TCP header sum.
    hdr_sum: u16,
    id: u16,
    id_step: u32,
    flags: u8,
}

/// Bytes of a segment compared at once against its flow's template: the
/// headers must lie within them (Ethernet with two VLAN tags, IPv6 and 66
/// bytes of TCP header do).
const TEMPLATE_LEN: usize = 128;
const TEMPLATE_WORDS: usize = TEMPLATE_LEN / 8;

/// The first segment of an open flow, as the fast path compares later
/// segments with it.
#[derive(Debug, Clone, Copy)]
struct Template {
    /// The first segment's first [`TEMPLATE_LEN`] bytes, native-endian
    /// words.
    bytes: [u64; TEMPLATE_WORDS],
    /// The bits later segments must have equal to `bytes`: all header bits
    /// except the fields a segment may change (IPv4 total length, ID and
    /// checksum; IPv6 payload length; TCP sequence number, PSH, FIN and CWR,
    /// checksum, urgent pointer, timestamp values), none past the headers.
    care: [u64; TEMPLATE_WORDS],
    /// Whether the headers fit [`TEMPLATE_LEN`] (else the rules only).
    usable: bool,
    /// The IPv4 DF bit (equal in every merged segment).
    df: bool,
    /// IPv4 header sum without total length, ID and checksum.
    ip_fixed: u16,
    /// TCP header sum without sequence number, data offset and flags,
    /// checksum, urgent pointer and timestamp values.
    tcp_fixed: u16,
    /// TCP pseudo-header sum with length 0.
    pseudo0: u16,
    /// Frame offset of the timestamp values that may differ (8 bytes).
    ts: Option<usize>,
    /// The quick check of a full-size segment in the middle of a run:
    /// `bytes` with the TCP flags a middle segment has (PSH, FIN and CWR
    /// clear), compared under `quick_care`: `care` plus the IP length (a
    /// full segment's) and all the flag bits.
    quick_bytes: [u64; TEMPLATE_WORDS],
    quick_care: [u64; TEMPLATE_WORDS],
    /// IPv4 header sum of a full segment without ID and checksum.
    quick_ip_sum: u64,
    /// The IPv4 header's 8 bytes from the ID to the checksum, big-endian,
    /// with both zero.
    quick_ip_word: u64,
    /// Pseudo-header and TCP header sum of a full middle segment without
    /// the sequence number, checksum, urgent pointer and timestamps.
    quick_tcp_sum: u64,
}

impl Template {
    const UNUSABLE: Template = Template {
        bytes: [0; TEMPLATE_WORDS],
        care: [0; TEMPLATE_WORDS],
        usable: false,
        df: false,
        ip_fixed: 0,
        tcp_fixed: 0,
        pseudo0: 0,
        ts: None,
        quick_bytes: [0; TEMPLATE_WORDS],
        quick_care: [0; TEMPLATE_WORDS],
        quick_ip_sum: 0,
        quick_ip_word: 0,
        quick_tcp_sum: 0,
    };

    /// The template of a flow's first segment (a merge candidate).
    fn of(s: &Seg<'_>) -> Template {
        let (f, t) = (s.frame, &s.t);
        let (l3, l4, hdr_len) = (t.l2_len, t.l4_off(), t.hdr_len());
        if f.len() < TEMPLATE_LEN || hdr_len > TEMPLATE_LEN {
            return Template::UNUSABLE;
        }
        let mut care = [0u8; TEMPLATE_LEN];
        care[..hdr_len].fill(0xff);
        let ip = &f[l3..l4];
        let ip_fixed = if t.ipv4 {
            care[l3 + 2..l3 + 6].fill(0);
            care[l3 + 10..l3 + 12].fill(0);
            let varying = add(add(be16(ip, 2), be16(ip, 4)), be16(ip, 10));
            add(checksum::sum(ip), finish(varying))
        } else {
            care[l3 + 4..l3 + 6].fill(0);
            0
        };
        care[l4 + 4..l4 + 8].fill(0);
        care[l4 + 13] = !(tcp_flags::PSH | tcp_flags::FIN | tcp_flags::CWR);
        care[l4 + 16..l4 + 20].fill(0);
        let tcp = &f[l4..hdr_len];
        let ts = timestamp_at(&tcp[TCP_HEADER_LEN..]).map(|i| l4 + TCP_HEADER_LEN + i + 2);
        let mut varying = add(
            add(be16(tcp, 4), be16(tcp, 6)),
            add(be16(tcp, 12), add(be16(tcp, 16), be16(tcp, 18))),
        );
        if let Some(p) = ts {
            care[p..p + 8].fill(0);
            varying = add(
                varying,
                timestamp_sum(f[..TEMPLATE_LEN].try_into().expect("checked above"), p),
            );
        }
        let words = |b: &[u8]| -> [u64; TEMPLATE_WORDS] {
            core::array::from_fn(|k| u64::from_ne_bytes(b[8 * k..8 * k + 8].try_into().expect("8")))
        };
        let mut quick: [u8; TEMPLATE_LEN] = f[..TEMPLATE_LEN].try_into().expect("checked above");
        let quick_flags = f[l4 + 13] & !(tcp_flags::PSH | tcp_flags::FIN | tcp_flags::CWR);
        quick[l4 + 13] = quick_flags;
        let mut quick_care = care;
        quick_care[l4 + 13] = 0xff;
        let ip_len_at = if t.ipv4 { l3 + 2 } else { l3 + 4 };
        quick_care[ip_len_at..ip_len_at + 2].fill(0xff);
        let tcp_fixed = add(checksum::sum(tcp), finish(varying));
        let pseudo0 = tcp_pseudo_sum(f, t, 0);
        let (quick_ip_sum, quick_ip_word) = if t.ipv4 {
            let w = u64::from_be_bytes(f[l3 + 4..l3 + 12].try_into().expect("in the header"));
            (
                u64::from(ip_fixed) + u64::from(be16(f, l3 + 2)),
                w & 0x0000_ffff_ffff_0000,
            )
        } else {
            (0, 0)
        };
        let quick_tcp_sum = u64::from(pseudo0)
            + (t.l4_len + t.payload_len) as u64
            + u64::from(tcp_fixed)
            + u64::from(u16::from_be_bytes([f[l4 + 12], quick_flags]));
        Template {
            bytes: words(&f[..TEMPLATE_LEN]),
            care: words(&care),
            usable: true,
            df: t.ipv4 && f[l3 + 6] & 0x40 != 0,
            ip_fixed,
            tcp_fixed,
            pseudo0,
            ts,
            quick_bytes: words(&quick),
            quick_care: words(&quick_care),
            quick_ip_sum,
            quick_ip_word,
            quick_tcp_sum,
        }
    }
}

/// The contribution of the 8 timestamp-value bytes at frame offset `p` to
/// the TCP checksum: their 16-bit words, byte-swapped if they start at an
/// odd offset (the TCP header starts at an even one; RFC 1071 §2(B)).
#[inline(always)]
fn timestamp_sum(h: &[u8; TEMPLATE_LEN], p: usize) -> u16 {
    // `p + 8` is within the headers, so within `h`; the `min` only drops
    // the bounds check. One 8-byte load: folded, its value is the sum of
    // its four 16-bit words (2^16 ≡ 1 modulo 0xffff).
    let p8 = p.min(TEMPLATE_LEN - 8);
    let s = fold(u64::from_be_bytes(
        h[p8..p8 + 8].try_into().expect("8 bytes"),
    ));
    if p % 2 == 1 {
        s.swap_bytes()
    } else {
        s
    }
}

/// Index of the open flow whose first segment arrived first.
fn oldest(open: &[Option<Open<'_>>]) -> Option<usize> {
    open.iter()
        .enumerate()
        .filter_map(|(k, o)| o.as_ref().map(|o| (o.order, k)))
        .min()
        .map(|(_, k)| k)
}

/// Same TCP flow: same L2 header (MACs, VLAN tags, EtherType), IP version,
/// addresses and ports. Each frame is read at its own offsets.
fn same_flow(a: &Seg<'_>, b: &[u8], tb: &TcpFrame) -> bool {
    let (fa, ta) = (a.frame, &a.t);
    if ta.ipv4 != tb.ipv4 || ta.l2_len != tb.l2_len || fa[..ta.l2_len] != b[..tb.l2_len] {
        return false;
    }
    let l3 = ta.l2_len;
    let addrs = if ta.ipv4 {
        l3 + 12..l3 + 20
    } else {
        l3 + 8..l3 + 40
    };
    fa[addrs.clone()] == b[addrs]
        && fa[ta.l4_off()..ta.l4_off() + 4] == b[tb.l4_off()..tb.l4_off() + 4]
}

/// TCP options equal, except the TSval/TSecr of a timestamp option
/// (kind 8, length 10) at the same place (RFC 7323 §3).
fn options_match(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let Some(ts) = timestamp_at(a) else {
        return false;
    };
    a[..ts + 2] == b[..ts + 2] && a[ts + 10..] == b[ts + 10..]
}

/// Offset in the TCP options `a` of the timestamp option (kind 8, length
/// 10; the last one before the end of the option list) whose values may
/// differ between merged segments, if the options parse and it lies within
/// them.
fn timestamp_at(a: &[u8]) -> Option<usize> {
    let mut i = 0;
    let mut ts_at = None;
    while i < a.len() {
        match a[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let &len = a.get(i + 1)?;
                if len < 2 {
                    return None;
                }
                if kind == 8 && len == 10 {
                    ts_at = Some(i);
                }
                i += usize::from(len);
            }
        }
    }
    ts_at.filter(|&ts| ts + 10 <= a.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gso::{example_tcp_frame, segment, SegmentPlan};
    use proptest::prelude::*;

    fn segments(payload: usize, mss: u16) -> (Vec<u8>, Vec<Vec<u8>>) {
        let f = example_tcp_frame(payload);
        let meta = GsoMeta::from_virtio_net_hdr(1, 1, 54, mss, 34, 16).unwrap();
        let plan = SegmentPlan::new(&f, &meta, 0).unwrap();
        let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
        segment(&f, &meta, None, &mut bufs).unwrap();
        for (i, b) in bufs.iter_mut().enumerate() {
            b.truncate(plan.segment_len(i));
        }
        (f, bufs)
    }

    fn run(c: &mut Coalescer, frames: &[&[u8]]) -> Vec<(Vec<u8>, Option<GsoMeta>)> {
        let mut out = Vec::new();
        c.coalesce(frames, |o| match o {
            Coalesced::Unchanged(f) => out.push((f.to_vec(), None)),
            Coalesced::Merged { frame, meta, .. } => out.push((frame.to_vec(), Some(meta))),
        });
        out
    }

    #[test]
    fn trusted_checksums_give_the_same_frame() {
        // Odd payload lengths too: the derived sums must byte-swap alike.
        for (payload, mss) in [(10_000, 1448), (7_777, 1001), (3_001, 999)] {
            let (_, segs) = segments(payload, mss);
            let refs: Vec<&[u8]> = segs.iter().map(|s| &s[..]).collect();
            let verified = run(&mut Coalescer::new(), &refs);
            let mut trusted = Coalescer::new();
            trusted.verify_checksums = false;
            assert_eq!(run(&mut trusted, &refs), verified, "{payload}/{mss}");
            assert_eq!(verified.len(), 1);
        }
    }

    #[test]
    fn merges_back_to_original() {
        let (orig, segs) = segments(10_000, 1448);
        let refs: Vec<&[u8]> = segs.iter().map(|s| &s[..]).collect();
        let out = run(&mut Coalescer::new(), &refs);
        assert_eq!(out.len(), 1);
        let (m, meta) = &out[0];
        let meta = meta.unwrap();
        assert_eq!(meta.gso_size, 1448);
        assert_eq!(meta.gso_type, GsoType::TcpV4);
        assert_eq!(&m[54..], &orig[54..]);
        // Headers equal the original's except the TCP checksum, which the
        // original carried as a partial (pseudo-header) sum.
        assert_eq!(&m[..50], &orig[..50]);
        let ph = checksum::pseudo_header_v4(
            [192, 168, 1, 1],
            [192, 168, 1, 2],
            6,
            (m.len() - 34) as u16,
        );
        assert_eq!(add(ph, checksum::sum(&m[34..])), 0xffff);
    }

    #[test]
    fn flushes_and_passthrough() {
        let (_, segs) = segments(5000, 1000);
        let mut c = Coalescer::new();
        // A corrupted segment in the middle passes through unchanged and
        // splits the run.
        let mut bad = segs[2].clone();
        bad[60] ^= 1;
        let refs: Vec<&[u8]> = vec![&segs[0], &segs[1], &bad, &segs[3], &segs[4]];
        let out = run(&mut c, &refs);
        assert_eq!(out.len(), 3);
        assert!(out[0].1.is_some());
        assert_eq!(out[1].0, bad);
        // segs[3] then segs[4] are not contiguous with segs[1]; they merge
        // with each other (seq contiguous).
        assert!(out[2].1.is_some());

        // Out of order: no merge.
        let refs: Vec<&[u8]> = vec![&segs[1], &segs[0]];
        let out = run(&mut c, &refs);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|o| o.1.is_none()));

        // SYN passes through.
        let mut syn = segs[1].clone();
        syn[47] |= tcp_flags::SYN;
        let refs: Vec<&[u8]> = vec![&segs[0], &syn];
        let out = run(&mut c, &refs);
        assert_eq!(out.len(), 2);

        // Differing window: no merge.
        let mut w = segs[1].clone();
        put16(&mut w, 48, 100);
        put16(&mut w, 50, 0);
        let cs = {
            let t = parse_tcp(&w).unwrap();
            let ph = tcp_pseudo_sum(&w, &t, w.len() - 34);
            finish(add(ph, checksum::sum(&w[34..])))
        };
        put16(&mut w, 50, cs);
        let refs: Vec<&[u8]> = vec![&segs[0], &w];
        assert_eq!(run(&mut c, &refs).len(), 2);
    }

    /// A copy of `f` with TCP source port `port` and a fixed-up checksum.
    fn with_port(f: &[u8], port: u16) -> Vec<u8> {
        let mut g = f.to_vec();
        let t = parse_tcp(&g).unwrap();
        put16(&mut g, t.l4_off(), port);
        put16(&mut g, t.l4_off() + 16, 0);
        let ph = tcp_pseudo_sum(&g, &t, t.l4_len + t.payload_len);
        let c = finish(add(ph, checksum::sum(&g[t.l4_off()..t.end()])));
        put16(&mut g, t.l4_off() + 16, c);
        g
    }

    fn port(f: &[u8]) -> u16 {
        be16(f, 34)
    }

    #[test]
    fn interleaved_flows_merge() {
        let (orig, segs) = segments(4000, 1000);
        let a: Vec<Vec<u8>> = segs.iter().map(|s| with_port(s, 1001)).collect();
        let b: Vec<Vec<u8>> = segs.iter().map(|s| with_port(s, 1002)).collect();
        let mut refs: Vec<&[u8]> = Vec::new();
        for i in 0..4 {
            refs.push(&a[i]);
            refs.push(&b[i]);
        }
        let out = run(&mut Coalescer::new(), &refs);
        assert_eq!(out.len(), 2, "one merged frame per flow");
        for (m, meta) in &out {
            assert!(meta.is_some());
            assert_eq!(&m[54..], &orig[54..]);
        }
        assert_eq!((port(&out[0].0), port(&out[1].0)), (1001, 1002));
    }

    #[test]
    fn same_flow_passthrough_flushes_first() {
        let (_, segs) = segments(3000, 1000);
        // A pure ACK of the same flow (no payload) is not a candidate; the
        // open frame of its flow must come out before it.
        let t = parse_tcp(&segs[0]).unwrap();
        let mut ack = segs[0][..t.hdr_len()].to_vec();
        put16(&mut ack, 16, (t.l3_len + t.l4_len) as u16);
        put16(&mut ack, 24, 0);
        let c = checksum::checksum(&ack[14..34]);
        put16(&mut ack, 24, c);
        let other = with_port(&segs[2], 999);
        let refs: Vec<&[u8]> = vec![&segs[0], &segs[1], &other, &ack, &segs[2]];
        let out = run(&mut Coalescer::new(), &refs);
        // Out: merged(0,1), the ACK, segs[2] (PSH: passes at once), then
        // the other flow's single segment at the end of the batch.
        let pos_merged = out.iter().position(|o| o.1.is_some()).unwrap();
        let pos_ack = out.iter().position(|o| o.0 == ack).unwrap();
        assert!(pos_merged < pos_ack);
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn ninth_flow_evicts_oldest() {
        let (_, segs) = segments(2000, 1000);
        let flows: Vec<Vec<Vec<u8>>> = (0..9u16)
            .map(|p| segs.iter().map(|s| with_port(s, 2000 + p)).collect())
            .collect();
        let mut refs: Vec<&[u8]> = flows.iter().map(|f| &f[0][..]).collect();
        refs.extend(flows.iter().map(|f| &f[1][..]));
        let out = run(&mut Coalescer::new(), &refs);
        // Flow 0 was evicted by flow 8 before its second segment came, so
        // it leaves as two unchanged frames; flows 1..=8 merge.
        assert_eq!(out.len(), 10);
        assert_eq!(out.iter().filter(|o| o.1.is_some()).count(), 8);
        assert_eq!(port(&out[0].0), 2000);
        assert!(out[0].1.is_none());
    }

    #[test]
    fn timestamp_options() {
        let ts = |v: u8| [1u8, 1, 8, 10, v, 0, 0, 1, 0, 0, 0, 2];
        assert!(options_match(&ts(1), &ts(2)));
        let mut other = ts(1);
        other[0] = 0;
        assert!(!options_match(&ts(1), &other));
        assert!(!options_match(&[2, 4, 5, 0xb4], &[2, 4, 5, 0xb0]));
    }

    /// Fixes the IPv4 header checksum and the TCP checksum of a frame
    /// after a change (so that the change, not a bad checksum, decides).
    fn fix_checksums(f: &mut [u8]) {
        let Ok(t) = parse_tcp(f) else { return };
        let l3 = t.l2_len;
        if t.ipv4 {
            put16(f, l3 + 10, 0);
            let c = checksum::checksum(&f[l3..t.l4_off()]);
            put16(f, l3 + 10, c);
        }
        let l4 = t.l4_off();
        put16(f, l4 + 16, 0);
        let ph = tcp_pseudo_sum(f, &t, t.l4_len + t.payload_len);
        let c = finish(add(ph, checksum::sum(&f[l4..t.end()])));
        put16(f, l4 + 16, c);
    }

    /// A TSO frame: `tags` VLAN tags, IPv4 (ID, DF) or IPv6, TCP with the
    /// given options and flags, `payload` bytes.
    #[allow(clippy::too_many_arguments)]
    fn frame(
        ipv6: bool,
        tags: usize,
        options: &[u8],
        flags: u8,
        sport: u16,
        id: u16,
        df: bool,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        for k in 0..tags {
            f.extend_from_slice(&[0x81, 0, 0, 10 + k as u8]);
        }
        let tcp_len = 20 + options.len() + payload.len();
        if ipv6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(tcp_len as u16).to_be_bytes());
            f.extend_from_slice(&[6, 64]);
            f.extend_from_slice(&[0xfd; 16]);
            f.extend_from_slice(&[0xfe; 16]);
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            f.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
            f.extend_from_slice(&id.to_be_bytes());
            f.extend_from_slice(&[if df { 0x40 } else { 0 }, 0, 64, 6, 0, 0]);
            f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        }
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&[0x14, 0x51, 0x10, 0, 0, 0, 0x20, 0, 0, 0]);
        f.push(((20 + options.len()) / 4 * 16) as u8);
        f.extend_from_slice(&[flags | tcp_flags::ACK, 0x10, 0, 0, 0, 0, 0]);
        f.extend_from_slice(options);
        f.extend_from_slice(payload);
        fix_checksums(&mut f);
        f
    }

    /// TCP option lists (multiples of 4 bytes): none, timestamps as Linux
    /// sends them, timestamps at an odd offset, timestamps after another
    /// option, and a list that does not parse.
    const OPTIONS: [&[u8]; 5] = [
        &[],
        &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
        &[1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1],
        &[3, 3, 7, 1, 1, 1, 8, 10, 0, 0, 1, 0, 0, 0, 2, 0],
        &[1, 8, 1, 0],
    ];

    /// One change to a batch.
    #[derive(Debug, Clone)]
    enum Change {
        /// Flip bit `bit` of byte `at` (modulo the length) of frame `i`.
        Flip { i: usize, at: usize, bit: u8 },
        /// The same, then fix the checksums.
        FlipFixed { i: usize, at: usize, bit: u8 },
        /// Append `n` bytes of Ethernet padding to frame `i`.
        Pad { i: usize, n: usize },
        /// Cut frame `i` to `n` bytes.
        Cut { i: usize, n: usize },
        /// Swap frames `i` and `i + 1`.
        Swap { i: usize },
        /// Repeat frame `i`.
        Repeat { i: usize },
        /// Set new timestamp values in frame `i` (checksums fixed).
        Timestamps { i: usize, v: u32 },
        /// Give frame `i` the IPv4 ID of the frame before it (checksums
        /// fixed): a constant ID, which merges only with DF.
        SameId { i: usize },
    }

    fn change() -> impl Strategy<Value = Change> {
        let i = 0usize..64;
        prop_oneof![
            (i.clone(), 0usize..200, 0u8..8).prop_map(|(i, at, bit)| Change::Flip { i, at, bit }),
            (i.clone(), 0usize..128, 0u8..8).prop_map(|(i, at, bit)| Change::FlipFixed {
                i,
                at,
                bit
            }),
            (i.clone(), 1usize..8).prop_map(|(i, n)| Change::Pad { i, n }),
            (i.clone(), 0usize..200).prop_map(|(i, n)| Change::Cut { i, n }),
            i.clone().prop_map(|i| Change::Swap { i }),
            i.clone().prop_map(|i| Change::Repeat { i }),
            (i.clone(), any::<u32>()).prop_map(|(i, v)| Change::Timestamps { i, v }),
            i.prop_map(|i| Change::SameId { i }),
        ]
    }

    fn apply(batch: &mut Vec<Vec<u8>>, c: &Change) {
        let len = batch.len();
        if len == 0 {
            return;
        }
        match *c {
            Change::Flip { i, at, bit } | Change::FlipFixed { i, at, bit } => {
                let f = &mut batch[i % len];
                if !f.is_empty() {
                    let k = at % f.len();
                    f[k] ^= 1 << bit;
                    if matches!(c, Change::FlipFixed { .. }) {
                        fix_checksums(f);
                    }
                }
            }
            Change::Pad { i, n } => batch[i % len].extend(std::iter::repeat_n(0, n)),
            Change::Cut { i, n } => {
                let f = &mut batch[i % len];
                f.truncate(n.min(f.len()));
            }
            Change::Swap { i } => {
                if len > 1 {
                    batch.swap(i % (len - 1), i % (len - 1) + 1);
                }
            }
            Change::Repeat { i } => {
                let f = batch[i % len].clone();
                batch.insert(i % len, f);
            }
            Change::SameId { i } => {
                let i = i % len;
                if i > 0 && parse_tcp(&batch[i - 1]).is_ok_and(|t| t.ipv4) {
                    let l3 = parse_tcp(&batch[i - 1]).expect("checked").l2_len;
                    let id = be16(&batch[i - 1], l3 + 4);
                    let f = &mut batch[i];
                    if parse_tcp(f).is_ok_and(|t| t.ipv4 && t.l2_len == l3) {
                        put16(f, l3 + 4, id);
                        fix_checksums(f);
                    }
                }
            }
            Change::Timestamps { i, v } => {
                let f = &mut batch[i % len];
                if let Ok(t) = parse_tcp(f) {
                    let opts = t.l4_off() + TCP_HEADER_LEN..t.hdr_len();
                    if let Some(ts) = timestamp_at(&f[opts.clone()]) {
                        let p = opts.start + ts + 2;
                        f[p..p + 4].copy_from_slice(&v.to_be_bytes());
                        f[p + 4..p + 8].copy_from_slice(&(!v).to_be_bytes());
                        fix_checksums(f);
                    }
                }
            }
        }
    }

    /// A coalescer's output: each frame, with its metadata and segment
    /// count if merged.
    type Output = Vec<(Vec<u8>, Option<(GsoMeta, usize)>)>;

    fn outputs(c: &mut Coalescer, batch: &[Vec<u8>]) -> Output {
        let refs: Vec<&[u8]> = batch.iter().map(|f| &f[..]).collect();
        let mut out = Vec::new();
        c.coalesce(&refs, |o| match o {
            Coalesced::Unchanged(f) => out.push((f.to_vec(), None)),
            Coalesced::Merged {
                frame,
                meta,
                segments,
            } => out.push((frame.to_vec(), Some((meta, segments)))),
        });
        out
    }

    /// As [`outputs`], by reference; asserts that nothing was copied: each
    /// unchanged frame is a frame of the batch and each merged payload lies
    /// in one.
    fn outputs_by_reference(c: &mut Coalescer, batch: &[Vec<u8>]) -> Output {
        let refs: Vec<&[u8]> = batch.iter().map(|f| &f[..]).collect();
        let within = |p: &[u8]| {
            refs.iter().any(|f| {
                let r = f.as_ptr_range();
                r.start <= p.as_ptr() && p.as_ptr_range().end <= r.end
            })
        };
        let mut out = Vec::new();
        c.coalesce_by_reference(&refs, |o| {
            match o {
                CoalescedRef::Unchanged(f) => {
                    assert!(
                        refs.iter().any(|r| std::ptr::eq(*r, f)),
                        "not a batch frame"
                    );
                    out.push((f.to_vec(), None));
                }
                CoalescedRef::Merged(m) => {
                    assert!(m.payloads().all(within), "a payload was copied");
                    assert_eq!(m.payloads().len(), m.segments);
                    for ((i, r), p) in m.parts().zip(m.payloads()) {
                        assert!(std::ptr::eq(&refs[i][r], p), "parts() names each payload");
                    }
                    out.push((m.to_vec(), Some((m.meta, m.segments))));
                }
            }
            assert_eq!(out.last().expect("pushed").0.len(), o.len());
        });
        out
    }

    proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 400,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// The template fast path decides exactly as the rules: same
        /// output frames, metadata and segment counts, in the same order,
        /// on batches of segmented flows (IPv4 with ID steps 1 or 0 with
        /// DF, IPv6, VLAN tags, timestamp options at even and odd offsets)
        /// with bits flipped (checksums then bad, or fixed), padding,
        /// cuts, swaps, repeats and changed timestamps. Merging by
        /// reference gives the same frames, without copying, on either
        /// path.
        #[test]
        fn fast_path_equals_rules(
            flows in proptest::collection::vec(
                (any::<bool>(), 0usize..3, 0usize..OPTIONS.len(), proptest::sample::select(vec![0u8, tcp_flags::PSH, tcp_flags::FIN, tcp_flags::CWR]), any::<bool>(), 1usize..6000, 100u16..1500),
                1..4,
            ),
            picks in proptest::collection::vec(0usize..4, 0..80),
            changes in proptest::collection::vec(change(), 0..8),
            verify: bool,
            max_ip in proptest::sample::select(vec![MAX_MERGED_IP_LEN, 4000, 1500]),
        ) {
            // Segment each flow's frame.
            let mut segs: Vec<std::collections::VecDeque<Vec<u8>>> = Vec::new();
            for (k, &(ipv6, tags, opt, flags, df, len, mss)) in flows.iter().enumerate() {
                let payload: Vec<u8> = (0..len).map(|i| (i * 7 + k) as u8).collect();
                let f = frame(ipv6, tags, OPTIONS[opt], flags, 1000 + k as u16, 0xfff0, df, &payload);
                let meta = GsoMeta::from_virtio_net_hdr(
                    0,
                    if ipv6 { GsoMeta::VIRTIO_NET_HDR_GSO_TCPV6 } else { GsoMeta::VIRTIO_NET_HDR_GSO_TCPV4 },
                    0, mss, 0, 0,
                ).unwrap();
                let plan = SegmentPlan::new(&f, &meta, 0).unwrap();
                let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
                segment(&f, &meta, None, &mut bufs).unwrap();
                let mut q = std::collections::VecDeque::new();
                for (i, mut b) in bufs.into_iter().enumerate() {
                    b.truncate(plan.segment_len(i));
                    q.push_back(b);
                }
                segs.push(q);
            }
            // Interleave the flows as `picks` says, then the rest in order.
            let mut batch = Vec::new();
            for p in picks {
                let k = p % segs.len();
                if let Some(s) = segs[k].pop_front() {
                    batch.push(s);
                }
            }
            for q in segs {
                batch.extend(q);
            }
            for c in &changes {
                apply(&mut batch, c);
            }
            let mut fast = Coalescer::new();
            let mut rules = Coalescer::without_fast_path();
            for c in [&mut fast, &mut rules] {
                c.verify_checksums = verify;
                c.max_ip_len = max_ip;
            }
            // By reference first, so the copying run after it on the same
            // coalescer finds header-sized buffers to replace.
            let c = outputs_by_reference(&mut fast, &batch);
            let d = outputs_by_reference(&mut rules, &batch);
            let a = outputs(&mut fast, &batch);
            let b = outputs(&mut rules, &batch);
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(&c, &a);
            prop_assert_eq!(&d, &a);
        }
    }

    #[test]
    fn odd_offset_timestamps_merge() {
        // TS option at an odd offset within the options: values of the
        // later segments differ; both paths verify and merge all three.
        let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let f = frame(false, 0, OPTIONS[2], 0, 1000, 7, true, &payload);
        let meta = GsoMeta::from_virtio_net_hdr(0, 1, 0, 1000, 0, 0).unwrap();
        let plan = SegmentPlan::new(&f, &meta, 0).unwrap();
        let mut bufs = vec![vec![0u8; plan.max_segment_len()]; plan.count()];
        segment(&f, &meta, None, &mut bufs).unwrap();
        let mut batch: Vec<Vec<u8>> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| b[..plan.segment_len(i)].to_vec())
            .collect();
        for (i, v) in [(1, 0x0102_0304), (2, 0x0a0b_0c0d)] {
            apply(&mut batch, &Change::Timestamps { i, v });
        }
        for mut c in [Coalescer::new(), Coalescer::without_fast_path()] {
            let out = outputs(&mut c, &batch);
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].1.map(|(_, n)| n), Some(3));
        }
    }
}
