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

use crate::checksum::{self, add, finish};
use crate::gso::{GsoMeta, GsoType};
use crate::net::{
    be16, be32, parse_tcp, put16, tcp_flags, tcp_pseudo_sum, TcpFrame, IPV4_HEADER_LEN,
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

/// Most flows a [`Coalescer`] keeps open at once within a batch (as Linux's
/// `MAX_GRO_SKBS`).
pub const MAX_OPEN_FLOWS: usize = 8;

/// Bytes of one merge buffer: the largest IP packet plus Ethernet and two
/// VLAN tags.
const MERGE_BUF_LEN: usize = MAX_MERGED_IP_LEN + 22;

/// Coalesces batches. Holds one merge buffer per open flow (up to
/// [`MAX_OPEN_FLOWS`], each allocated on first use and reused after), so a
/// batch allocates nothing once warm.
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
    /// Arrival order of the first segment, for flushing oldest first.
    order: u64,
    first: Seg<'f>,
    count: usize,
    next_seq: u32,
    last_id: u16,
    id_step: Option<u16>,
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
    pub fn coalesce<'f, F>(&mut self, frames: &[&'f [u8]], mut deliver: F)
    where
        F: FnMut(Coalesced<'_>),
    {
        let mut open: [Option<Open<'f>>; MAX_OPEN_FLOWS] = Default::default();
        let mut order = 0u64;
        for &f in frames {
            let Some(seg) = self.candidate(f) else {
                // Keep the flow's order: flush its open frame first.
                if let Ok(t) = parse_tcp(f) {
                    for slot in open.iter_mut() {
                        if slot.as_ref().is_some_and(|o| same_flow(&o.first, f, &t)) {
                            let o = slot.take().expect("checked is_some");
                            self.flush(o, &mut deliver);
                        }
                    }
                }
                deliver(Coalesced::Unchanged(f));
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
                    if self.append(o, &seg) {
                        let ends = seg.flags & (tcp_flags::PSH | tcp_flags::FIN) != 0
                            || seg.t.payload_len < o.first.t.payload_len;
                        if ends {
                            let o = open[k].take().expect("found above");
                            self.flush(o, &mut deliver);
                        }
                    } else {
                        // Bad checksum: ends the open frame, passes through.
                        let o = open[k].take().expect("found above");
                        self.flush(o, &mut deliver);
                        deliver(Coalesced::Unchanged(f));
                    }
                    continue;
                }
                let o = open[k].take().expect("found above");
                self.flush(o, &mut deliver);
            }
            let payload_sum = if self.verify_checksums {
                checksum::sum_fast(&f[seg.t.hdr_len()..seg.t.end()])
            } else {
                trusted_payload_sum(&seg)
            };
            if !self.tcp_ok(&seg, payload_sum) || seg.flags & (tcp_flags::PSH | tcp_flags::FIN) != 0
            {
                deliver(Coalesced::Unchanged(f));
                continue;
            }
            let slot = match open.iter().position(Option::is_none) {
                Some(k) => k,
                None => {
                    let k = oldest(&open).expect("all slots are open");
                    let o = open[k].take().expect("oldest is open");
                    self.flush(o, &mut deliver);
                    k
                }
            };
            open[slot] = Some(Open {
                slot,
                order,
                next_seq: seg.seq.wrapping_add(seg.t.payload_len as u32),
                last_id: seg.id,
                id_step: None,
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
            self.flush(o, &mut deliver);
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
                None if step == 1 || (step == 0 && df) => o.id_step = Some(step),
                Some(st) if st == step => {}
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

    /// Copies a segment's payload after the merged frame while summing it
    /// (one pass), then checks its TCP checksum. Returns false, leaving the
    /// merged frame as it was, if the checksum is bad.
    fn append(&mut self, o: &mut Open<'_>, s: &Seg<'_>) -> bool {
        let k = o.slot;
        if o.count == 1 {
            if self.bufs[k].len() < MERGE_BUF_LEN {
                // First use of this slot: the only allocation, ever.
                self.bufs[k] = vec![0; MERGE_BUF_LEN];
            }
            let end = o.first.t.end();
            self.bufs[k][..end].copy_from_slice(&o.first.frame[..end]);
            self.lens[k] = end;
        }
        let n = s.t.payload_len;
        let len = self.lens[k];
        let dst = &mut self.bufs[k][len..len + n];
        let src = &s.frame[s.t.hdr_len()..s.t.end()];
        let ps = if self.verify_checksums {
            let ps = checksum::copy_and_sum(dst, src);
            if !self.tcp_ok(s, ps) {
                return false;
            }
            ps
        } else {
            dst.copy_from_slice(src);
            trusted_payload_sum(s)
        };
        self.lens[k] += n;
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

    fn flush<F: FnMut(Coalesced<'_>)>(&mut self, o: Open<'_>, deliver: &mut F) {
        if o.count == 1 {
            deliver(Coalesced::Unchanged(o.first.frame));
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
        deliver(Coalesced::Merged {
            frame: &self.bufs[o.slot][..self.lens[o.slot]],
            meta,
            segments: o.count,
        });
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
    let mut i = 0;
    let mut ts_at = None;
    while i < a.len() {
        match a[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let Some(&len) = a.get(i + 1) else {
                    return false;
                };
                if len < 2 {
                    return false;
                }
                if kind == 8 && len == 10 {
                    ts_at = Some(i);
                }
                i += usize::from(len);
            }
        }
    }
    let Some(ts) = ts_at else { return false };
    if ts + 10 > a.len() {
        return false;
    }
    a[..ts + 2] == b[..ts + 2] && a[ts + 10..] == b[ts + 10..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gso::{example_tcp_frame, segment, SegmentPlan};

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
}
