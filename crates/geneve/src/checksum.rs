//! The Internet checksum (RFC 1071) and the pseudo-headers of RFC 768 (UDP
//! over IPv4), RFC 9293 §3.1 (TCP) and RFC 8200 §8.1 (upper-layer checksums
//! over IPv6).
//!
//! A *partial sum* here is the 16-bit ones'-complement sum of a byte range,
//! folded, **not** complemented, and in network byte order as a `u16` value
//! (so `sum(&[0x12, 0x34]) == 0x1234`). Partial sums of ranges that start at
//! even offsets add with [`add`]; a range that starts at an odd offset of the
//! whole contributes [`u16::swap_bytes`] of its own sum (RFC 1071 §2(B)).
//! The checksum written into a header is `!sum` ([`finish`]).

use crate::Error;

/// Folds a wide ones'-complement accumulator into 16 bits: the value in
/// `1..=0xffff` congruent to `acc` modulo 0xffff, or 0 for 0.
///
/// Each step adds the two halves with the end-around carry by adding the
/// value to itself rotated by half its width: the upper half of the sum is
/// `hi + lo + carry(lo + hi)`, the ones'-complement sum of the halves
/// (RFC 1071 §2(C)); three instructions per step, no branches.
#[inline]
pub fn fold(acc: u64) -> u16 {
    let x = (acc.wrapping_add(acc.rotate_left(32)) >> 32) as u32;
    (x.wrapping_add(x.rotate_left(16)) >> 16) as u16
}

/// Ones'-complement addition of two partial sums.
#[inline]
pub fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The checksum field value for a partial sum: its ones' complement.
#[inline]
pub fn finish(sum: u16) -> u16 {
    !sum
}

/// The partial sum (folded, not complemented, network order) of `data`.
///
/// Any length; an odd trailing byte is padded with a zero byte (RFC 1071 §1).
/// This is the hot loop of every checksum in the crate: it adds native-endian
/// 32-bit words into a 64-bit accumulator (which the compiler vectorises) and
/// swaps once at the end (RFC 1071 §2(B): the sum is byte-order independent).
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    u16::from_be(fold(sum_ne(data)))
}

/// Native-endian wide sum. Cannot overflow: each term is < 2^32 and a slice
/// holds far fewer than 2^32 words.
#[inline]
fn sum_ne(data: &[u8]) -> u64 {
    let mut pairs = data.chunks_exact(8);
    let mut acc0: u64 = 0;
    let mut acc1: u64 = 0;
    // Two accumulators break the dependency chain when not vectorised.
    for p in pairs.by_ref() {
        acc0 += u64::from(u32::from_ne_bytes([p[0], p[1], p[2], p[3]]));
        acc1 += u64::from(u32::from_ne_bytes([p[4], p[5], p[6], p[7]]));
    }
    let mut rest = pairs.remainder();
    if rest.len() >= 4 {
        acc0 += u64::from(u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]));
        rest = &rest[4..];
    }
    let mut acc = acc0 + acc1;
    let mut i = 0;
    if rest.len() >= 2 {
        acc += u64::from(u16::from_ne_bytes([rest[0], rest[1]]));
        i = 2;
    }
    if rest.len() > i {
        acc += u64::from(u16::from_ne_bytes([rest[i], 0]));
    }
    acc
}

/// Below this many bytes the kernels run inline in the caller (baseline
/// x86-64 code): dispatching to a wider instruction set costs more than
/// it saves on a header-sized range.
const DISPATCH_MIN: usize = 256;

/// Bytes of one block of the kernels: one AVX-512 vector, eight 64-bit
/// lanes (two AVX2 or four SSE2 vectors).
pub(crate) const BLOCK: usize = 64;

/// The best instruction set of this CPU, detected once.
///
/// `pulp` (a safe SIMD crate: its `Arch::dispatch` runs a closure inside
/// a `#[target_feature]` function chosen by runtime detection) keeps the
/// `unsafe` of entering such a function on its side, so this crate stays
/// `#![forbid(unsafe_code)]`. The kernels below are plain Rust: compiled
/// inside the dispatch, the loop vectoriser uses AVX-512 (x86-64-v4) or
/// AVX2 (x86-64-v3) registers; elsewhere, baseline SSE2. Callers with a
/// loop of many short ranges (`segment`, `coalesce`) run the whole loop
/// inside one dispatch and call the `#[inline(always)]` kernels
/// ([`copy_and_sum_block`], [`sum_block`]) from it.
#[inline]
pub(crate) fn arch() -> pulp::Arch {
    static ARCH: std::sync::OnceLock<pulp::Arch> = std::sync::OnceLock::new();
    *ARCH.get_or_init(pulp::Arch::new)
}

/// The partial sum of `data`, the fast variant used on payloads.
///
/// Same result as [`sum`]. Each 64-bit word is added, wrapping, into one
/// accumulator and its upper half into another (why that is exact: the
/// private `Lanes`): three vector operations per vector of data (16 bytes
/// with SSE2, 32 with AVX2, 64 with AVX-512, chosen at run time), no
/// carries to track.
#[inline]
pub fn sum_fast(data: &[u8]) -> u16 {
    if data.len() < DISPATCH_MIN {
        return sum_block(data);
    }
    arch().dispatch(SumBlock(data))
}

/// [`sum_block`] as a `pulp` operation (a struct, not a closure: the
/// closure's call shim is not inlined into the dispatched function).
struct SumBlock<'a>(&'a [u8]);

impl pulp::WithSimd for SumBlock<'_> {
    type Output = u16;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> u16 {
        sum_block(self.0)
    }
}

/// The loop of [`sum_fast`], for inlining into a dispatched caller: the
/// kernel of [`copy_and_sum_block`] without the stores (the first 64 bytes
/// masked up to the first 64-byte line boundary of `data`, whole 256-byte
/// blocks of aligned loads, up to three single blocks, the last 64 bytes
/// masked down to the bytes not yet summed; no scalar remainder loop: on a
/// 1448-byte segment it cost more than the vector part). Ranges shorter
/// than a block take the scalar [`sum`]. Aligned loads: payloads start at
/// header offsets (54, 66, ...), where every 64-byte load spanned two
/// lines (the by-reference merge's payload sums: 11 % faster aligned).
#[inline(always)]
pub(crate) fn sum_block(data: &[u8]) -> u16 {
    block_kernel::<false>(&mut [], data)
}

/// Ones'-complement accumulator for the kernels, eight 64-bit lanes (one
/// AVX-512 vector, two AVX2 or four SSE2: the SLP vectoriser keeps each
/// array in registers).
///
/// Every 64-bit native-endian word `w` of the data is added, wrapping, into
/// its lane of `all`, and its upper 32 bits `w >> 32` into `high` (exact:
/// each term is below 2^32). Per lane, the sum of the lower halves is then
/// exactly `all - (high << 32)` (wrapping; exact while it is below 2^64,
/// i.e. for fewer than 2^32 words, 32 GiB). Since 2^16 ≡ 1 (mod 2^16 - 1),
/// a word is congruent to the sum of its 16-bit pieces, so `lower + high`
/// is congruent to the ones'-complement sum of the data (RFC 1071 §2: the
/// end-around carries are that reduction). One add, one shift and one add
/// per vector (`vpaddq`/`vpsrlq`/`vpaddq`), no carries to track.
///
/// The loops add whole blocks written out as four single-block adds per
/// iteration: a loop of one 64-byte block per iteration is vectorised
/// *across* iterations, into gathers and scatters (see [`sum_block`]).
#[derive(Clone, Copy, Default)]
struct Lanes {
    all: [u64; 8],
    high: [u64; 8],
}

impl Lanes {
    #[inline(always)]
    fn add(&mut self, v: [u64; 8]) {
        for (a, &x) in self.all.iter_mut().zip(&v) {
            *a = a.wrapping_add(x);
        }
        for (h, &x) in self.high.iter_mut().zip(&v) {
            *h += x >> 32;
        }
    }

    /// The partial sum (network order) of two accumulators. Folded lane by
    /// lane first (lower halves plus upper halves, each lane below 2^41),
    /// so one horizontal sum follows instead of two: the end of every
    /// segment's checksum sits on the path to the next one's work.
    #[inline(always)]
    fn finish(a: &Lanes, b: &Lanes) -> u16 {
        let mut t = 0u64;
        for k in 0..8 {
            let all = a.all[k].wrapping_add(b.all[k]);
            let high = a.high[k] + b.high[k];
            let low = all.wrapping_sub(high << 32);
            t += (low & 0xffff_ffff) + (low >> 32) + high;
        }
        u16::from_be(fold(t))
    }
}

/// The 64 bytes of `b` (exactly [`BLOCK`] long) as eight native-endian
/// words.
#[inline(always)]
fn load_block(b: &[u8]) -> [u64; 8] {
    let b: &[u8; BLOCK] = b.try_into().expect("a 64-byte block");
    core::array::from_fn(|k| u64::from_ne_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes")))
}

#[inline(always)]
fn store_block(d: &mut [u8], v: [u64; 8]) {
    let d: &mut [u8; BLOCK] = d.try_into().expect("a 64-byte block");
    for k in 0..8 {
        d[8 * k..8 * k + 8].copy_from_slice(&v[k].to_ne_bytes());
    }
}

/// Byte masks for partial blocks: 64 zero bytes, 64 0xff bytes, 64 zero
/// bytes. `MASKS[t..t + 64]` keeps the last `t` bytes of a block,
/// `MASKS[128 - h..192 - h]` its first `h` bytes (`t`, `h` ≤ 64).
static MASKS: [u8; 3 * BLOCK] = {
    let mut t = [0u8; 3 * BLOCK];
    let mut i = BLOCK;
    while i < 2 * BLOCK {
        t[i] = 0xff;
        i += 1;
    }
    t
};

/// `v` with all but its last `t` bytes (in memory order) zeroed.
#[inline(always)]
fn mask_tail(v: [u64; 8], t: usize) -> [u64; 8] {
    let m = load_block(&MASKS[t..t + BLOCK]);
    core::array::from_fn(|k| v[k] & m[k])
}

/// `v` with all but its first `h` bytes (in memory order) zeroed.
#[inline(always)]
fn mask_head(v: [u64; 8], h: usize) -> [u64; 8] {
    let m = load_block(&MASKS[2 * BLOCK - h..3 * BLOCK - h]);
    core::array::from_fn(|k| v[k] & m[k])
}

/// `v` with the two bytes of every 16-bit word swapped if `yes`: moves a
/// block that starts at an odd offset into the byte lanes of the rest.
#[inline(always)]
fn swap_if(v: [u64; 8], yes: bool) -> [u64; 8] {
    if yes {
        core::array::from_fn(|k| {
            ((v[k] >> 8) & 0x00ff_00ff_00ff_00ff) | ((v[k] << 8) & 0xff00_ff00_ff00_ff00)
        })
    } else {
        v
    }
}

/// Copies `src` into `dst` and returns the partial sum of the bytes, in one
/// pass: each word is loaded once, stored and summed.
///
/// # Panics
/// If `dst.len() != src.len()` (a caller bug, like `copy_from_slice`).
#[inline]
pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "copy_and_sum: lengths differ");
    if dst.len() < DISPATCH_MIN {
        return copy_and_sum_block(dst, src);
    }
    arch().dispatch(CopyAndSum(dst, src))
}

/// [`copy_and_sum_block`] as a `pulp` operation (see [`SumBlock`]).
struct CopyAndSum<'a, 'b>(&'a mut [u8], &'b [u8]);

impl pulp::WithSimd for CopyAndSum<'_, '_> {
    type Output = u16;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> u16 {
        copy_and_sum_block(self.0, self.1)
    }
}

/// The kernel of [`copy_and_sum`], for inlining into a dispatched caller
/// (`dst` and `src` of equal length). In 64-byte blocks, with every load
/// of the main part within one 64-byte line of `src` and no scalar loop
/// and no `memcpy` call:
///
/// 1. the first 64 bytes, copied whole (an unaligned store) and summed up
///    to the first 64-byte boundary of `src` (`head` bytes, masked);
/// 2. from there, whole 256-byte blocks: four 64-byte vectors per
///    iteration under AVX-512, each loaded once, stored and added into a
///    [`Lanes`] (`vpaddq`/`vpsrlq`/`vpaddq`), two accumulators;
/// 3. up to three single 64-byte blocks;
/// 4. the last 64 bytes, copied whole (an unaligned store over bytes
///    already written with the same values) and summed only where not
///    summed yet (masked).
///
/// Parts 2–4 are summed in the byte lanes of `src[head..]`; parts 1 and
/// 4 are swapped into them when they start at an odd distance from it,
/// and the total swapped back if `head` is odd (RFC 1071 §2(B)). Ranges
/// shorter than a block are copied and summed by the scalar [`sum`].
///
/// Why the loads and not the stores: source and destination sit at
/// different header offsets (a payload at 54 + k × 1448 in a frame, at 54
/// or 104 in a segment buffer), so only one side can be aligned. Aligned
/// loads measured faster, in interleaved rounds against aligned stores:
/// `segment` of 64 KiB 3.6 % (plain) to 6.8 % (Geneve with UDP checksum),
/// `coalesce` of 44 × 1448 bytes 7.3 %.
#[inline(always)]
pub(crate) fn copy_and_sum_block(dst: &mut [u8], src: &[u8]) -> u16 {
    let n = dst.len();
    block_kernel::<true>(dst, &src[..n])
}

/// The loop of [`sum_block`] (`COPY` false, `dst` unused) and of
/// [`copy_and_sum_block`] (`COPY`: each block also stored at the same
/// offset of `dst`, as long as `src`). See [`copy_and_sum_block`] for the
/// parts and the byte lanes.
///
/// Without stores, the loop counter goes through
/// [`core::hint::black_box`]: without it, the loop (loads only) was
/// vectorised *across* iterations into gathers, six times slower; as a
/// word-at-a-time loop (what the loop vectoriser handles well) its
/// reductions made a 1.5 KB sum cost 24 ns instead of 9.
#[inline(always)]
fn block_kernel<const COPY: bool>(dst: &mut [u8], src: &[u8]) -> u16 {
    let n = src.len();
    if n < BLOCK {
        if COPY {
            dst.copy_from_slice(src);
        }
        return sum(src);
    }
    // `align_offset` may in principle answer usize::MAX; any value below
    // 64 is correct (only slower if not aligning).
    let head = src.as_ptr().align_offset(BLOCK).min(BLOCK - 1);
    let (mut lanes, mut second) = (Lanes::default(), Lanes::default());
    let first = load_block(&src[..BLOCK]);
    if COPY {
        store_block(&mut dst[..BLOCK], first);
    }
    lanes.add(swap_if(mask_head(first, head), head % 2 == 1));

    let s = &src[head..];
    let m = s.len();
    let mut p = 0;
    while m - p >= 4 * BLOCK {
        let s = &s[p..p + 4 * BLOCK];
        let v: [[u64; 8]; 4] = core::array::from_fn(|j| load_block(&s[j * BLOCK..(j + 1) * BLOCK]));
        if COPY {
            let d = &mut dst[head + p..head + p + 4 * BLOCK];
            for (j, &v) in v.iter().enumerate() {
                store_block(&mut d[j * BLOCK..(j + 1) * BLOCK], v);
            }
        }
        lanes.add(v[0]);
        second.add(v[1]);
        lanes.add(v[2]);
        second.add(v[3]);
        p = if COPY {
            p + 4 * BLOCK
        } else {
            core::hint::black_box(p + 4 * BLOCK)
        };
    }
    for _ in 0..3 {
        if m - p >= BLOCK {
            let v = load_block(&s[p..p + BLOCK]);
            if COPY {
                store_block(&mut dst[head + p..head + p + BLOCK], v);
            }
            lanes.add(v);
            p += BLOCK;
        }
    }
    // The last block starts at n - 64, i.e. at m - 64 from src[head..]:
    // the same parity as m. Loaded only now: kept in a register across the
    // loop, it was spilled to the stack as eight words and reloaded as one
    // vector, which waits for the eight stores (no store forwarding).
    let last = load_block(&src[n - BLOCK..]);
    lanes.add(swap_if(mask_tail(last, m - p), m % 2 == 1));
    if COPY {
        store_block(&mut dst[n - BLOCK..], last);
    }
    let s = Lanes::finish(&lanes, &second);
    if head % 2 == 1 {
        s.swap_bytes()
    } else {
        s
    }
}

/// The partial sum of a 20-byte header (an IPv4 header without options):
/// five straight-line 32-bit adds, no loop.
#[inline]
pub fn sum20(h: &[u8; 20]) -> u16 {
    let w = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    fold(w(0) + w(4) + w(8) + w(12) + w(16))
}

/// The Internet checksum of `data`: the value to store in a checksum field
/// that covers exactly `data` (with the field itself zeroed).
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum_fast(data))
}

/// Partial sum of the IPv4 pseudo-header (RFC 768, RFC 9293 §3.1):
/// source, destination, zero, protocol, upper-layer length in bytes.
#[inline]
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, len: u16) -> u16 {
    let acc = u64::from(u16::from_be_bytes([src[0], src[1]]))
        + u64::from(u16::from_be_bytes([src[2], src[3]]))
        + u64::from(u16::from_be_bytes([dst[0], dst[1]]))
        + u64::from(u16::from_be_bytes([dst[2], dst[3]]))
        + u64::from(protocol)
        + u64::from(len);
    fold(acc)
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 §8.1): source,
/// destination, 32-bit upper-layer length in bytes, next header.
#[inline]
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, len: u32) -> u16 {
    let mut acc: u64 = u64::from(next_header) + u64::from(len >> 16) + u64::from(len & 0xffff);
    for c in src.chunks_exact(2).chain(dst.chunks_exact(2)) {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    fold(acc)
}

/// Completes a partial checksum in place, as a device does for a virtio-net
/// frame with `VIRTIO_NET_HDR_F_NEEDS_CSUM` (virtio 1.2 §5.1.6.2): computes
/// the Internet checksum over `frame[csum_start..]` (including the checksum
/// field, which the sender pre-loaded with the folded pseudo-header sum) and
/// stores its complement, big-endian, at `csum_start + csum_offset`.
///
/// `csum_start` and `csum_offset` are byte offsets, as in `virtio_net_hdr`.
/// A computed value of 0 is stored as 0xffff for UDP-style "no checksum"
/// safety (RFC 768); for TCP both encodings verify.
///
/// # Errors
/// [`Error::BadChecksumOffset`] if the 2-byte field does not lie inside
/// `frame[csum_start..]`.
pub fn complete_partial(
    frame: &mut [u8],
    csum_start: usize,
    csum_offset: usize,
) -> Result<(), Error> {
    let field = csum_start
        .checked_add(csum_offset)
        .ok_or(Error::BadChecksumOffset)?;
    if csum_start > frame.len() || field.checked_add(2).is_none_or(|e| e > frame.len()) {
        return Err(Error::BadChecksumOffset);
    }
    let s = sum_fast(&frame[csum_start..]);
    // The covered range starts at csum_start; the field sits at an even or
    // odd position relative to it, which does not matter because we store
    // the complement of a sum that already includes the field's contents.
    let mut c = finish(s);
    if (field - csum_start) % 2 == 1 {
        // Field at odd offset within the covered range: the sum is in the
        // other byte lane (RFC 1071 §2(B)).
        c = c.swap_bytes();
    }
    if c == 0 {
        c = 0xffff;
    }
    frame[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte-at-a-time reference, straight from RFC 1071 §4.1.
    fn reference(data: &[u8]) -> u16 {
        let mut acc: u64 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            acc += u64::from(u16::from_be_bytes([data[i], data[i + 1]]));
            i += 2;
        }
        if i < data.len() {
            acc += u64::from(data[i]) << 8;
        }
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// `len` pseudo-random bytes (a multiplicative hash of the index,
    /// `shift` choosing which of its bits), so each test sums other data.
    fn pattern(len: u32, shift: u32) -> Vec<u8> {
        (0..len)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> shift) as u8)
            .collect()
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&d), 0xddf2);
        assert_eq!(sum_fast(&d), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // A captured IPv4 header whose checksum field is b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert_eq!(sum(&h), 0xffff);
    }

    #[test]
    fn all_lengths_match_reference() {
        let data = pattern(300, 13);
        for len in 0..data.len() {
            for start in 0..3.min(len + 1) {
                let d = &data[start..len];
                assert_eq!(sum(d), reference(d), "len {len} start {start}");
                assert_eq!(sum_fast(d), reference(d), "len {len} start {start}");
                let mut copy = vec![0u8; d.len()];
                assert_eq!(copy_and_sum(&mut copy, d), reference(d));
                assert_eq!(&copy[..], d);
            }
        }
    }

    /// `copy_and_sum` of `s` into `out` at `doff`: returns `want`, copies `s`
    /// exactly, and writes nothing else of `out` (pre-filled with 0xa5).
    fn check_copy_and_sum(out: &mut [u8], doff: usize, s: &[u8], want: u16) {
        let len = s.len();
        out.fill(0xa5);
        assert_eq!(
            copy_and_sum(&mut out[doff..doff + len], s),
            want,
            "len {len} doff {doff}"
        );
        assert_eq!(&out[doff..doff + len], s, "len {len} doff {doff}");
        assert!(out[..doff].iter().all(|&b| b == 0xa5));
        assert!(out[doff + len..].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn copy_and_sum_any_alignment() {
        let data = pattern(400, 11);
        let mut out = vec![0u8; 440];
        for doff in 0..19 {
            for soff in [0, 1, 6] {
                for len in [0, 1, 2, 7, 15, 16, 17, 33, 64, 127, 200, 391] {
                    let s = &data[soff..soff + len];
                    check_copy_and_sum(&mut out, doff, s, reference(s));
                }
            }
        }
    }

    /// Lengths on both sides of the dispatch threshold and of the 256- and
    /// 64-byte block boundaries, at several destination alignments.
    #[test]
    fn dispatched_kernels_match_reference() {
        let data = pattern(2200, 9);
        let mut out = vec![0u8; 2300];
        for len in [
            255, 256, 257, 319, 320, 383, 511, 512, 575, 767, 1448, 1449, 2047,
        ] {
            for doff in [0, 1, 2, 10, 54, 63] {
                let s = &data[doff % 7..doff % 7 + len];
                assert_eq!(sum_fast(s), reference(s), "len {len}");
                check_copy_and_sum(&mut out, doff, s, reference(s));
            }
        }
    }

    /// Every length up to 700 bytes (the block kernels' head, 256-byte
    /// loop, single blocks and masked tail in every combination) at every
    /// store alignment within a 64-byte line and three source offsets;
    /// nothing written outside the destination range.
    #[test]
    fn block_kernels_every_length_and_alignment() {
        let data = pattern(800, 7);
        let mut out = vec![0u8; 800];
        for len in 0..=700 {
            for soff in [0, 1, 3] {
                let s = &data[soff..soff + len];
                let want = reference(s);
                assert_eq!(sum_fast(s), want, "sum len {len} soff {soff}");
                for doff in 0..64 {
                    check_copy_and_sum(&mut out, doff, s, want);
                }
            }
        }
    }

    /// Both kernels at every source alignment within a 64-byte line (their
    /// loop loads are aligned): the sum for every length up to 400 and
    /// around the block boundaries and 1448, the copy for every seventh
    /// of them at three destination offsets.
    #[test]
    fn kernels_any_source_alignment() {
        let data = pattern(1700, 5);
        let mut out = vec![0u8; 1700];
        for soff in 0..64 {
            for len in (0..=400).chain([511, 512, 513, 1447, 1448, 1449, 1600]) {
                let s = &data[soff..soff + len];
                let want = reference(s);
                assert_eq!(sum_fast(s), want, "len {len} soff {soff}");
                if len % 7 == 0 || len > 400 {
                    for doff in [0, 7, 54] {
                        check_copy_and_sum(&mut out, doff, s, want);
                    }
                }
            }
        }
    }

    #[test]
    fn large_all_ones_does_not_overflow() {
        let d = vec![0xffu8; 200_001];
        assert_eq!(sum_fast(&d), reference(&d));
        let mut c = vec![0u8; d.len()];
        assert_eq!(copy_and_sum(&mut c, &d), reference(&d));
    }

    /// The rotate-and-add fold against the textbook one (RFC 1071 §4.1:
    /// add the carries back until none is left).
    #[test]
    fn fold_matches_repeated_carries() {
        fn slow(mut acc: u64) -> u16 {
            while acc >> 16 != 0 {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            acc as u16
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let edges = [
            0,
            1,
            0xffff,
            0x1_0000,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX,
            u64::MAX - 1,
        ];
        for &e in &edges {
            assert_eq!(fold(e), slow(e), "{e:#x}");
        }
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for v in [x, x >> 16, x >> 32, x >> 48, x | 0xffff_0000_ffff] {
                assert_eq!(fold(v), slow(v), "{v:#x}");
            }
        }
    }

    #[test]
    fn sum20_matches() {
        let h: [u8; 20] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        assert_eq!(sum20(&h), reference(&h));
    }

    #[test]
    fn odd_offset_concatenation() {
        let d: Vec<u8> = (1..=101u8).collect();
        let (a, b) = d.split_at(37);
        assert_eq!(add(sum(a), sum(b).swap_bytes()), sum(&d));
    }

    #[test]
    fn complete_partial_tcp() {
        // 20-byte TCP header + 5 bytes payload, field pre-loaded with the
        // pseudo-header sum as a Linux guest does.
        let src = [10, 0, 0, 1];
        let dst = [10, 0, 0, 2];
        let mut seg = vec![0u8; 25];
        seg[12] = 0x50;
        seg[20..].copy_from_slice(b"hello");
        let ph = pseudo_header_v4(src, dst, 6, 25);
        seg[16..18].copy_from_slice(&ph.to_be_bytes());
        let mut frame = vec![0u8; 34];
        frame.extend_from_slice(&seg);
        complete_partial(&mut frame, 34, 16).unwrap();
        assert_eq!(add(ph, sum(&frame[34..])), 0xffff);
        assert_eq!(
            complete_partial(&mut frame, 34, 58),
            Err(Error::BadChecksumOffset)
        );
        assert_eq!(
            complete_partial(&mut frame, 60, 0),
            Err(Error::BadChecksumOffset)
        );
        assert_eq!(
            complete_partial(&mut frame, usize::MAX, 2),
            Err(Error::BadChecksumOffset)
        );
    }
}
