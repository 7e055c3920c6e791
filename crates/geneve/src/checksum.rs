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

/// Folds a wide ones'-complement accumulator into 16 bits.
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
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

/// The best instruction set of this CPU, detected once.
///
/// `pulp` (a safe SIMD crate: its `Arch::dispatch` runs a closure inside
/// a `#[target_feature]` function chosen by runtime detection) keeps the
/// `unsafe` of entering such a function on its side, so this crate stays
/// `#![forbid(unsafe_code)]`. The kernels below are plain Rust: compiled
/// inside the dispatch, the loop vectoriser uses AVX-512 (x86-64-v4) or
/// AVX2 (x86-64-v3) registers; elsewhere, baseline SSE2.
#[inline]
fn arch() -> pulp::Arch {
    static ARCH: std::sync::OnceLock<pulp::Arch> = std::sync::OnceLock::new();
    *ARCH.get_or_init(pulp::Arch::new)
}

/// The partial sum of `data`, the fast variant used on payloads.
///
/// Same result as [`sum`]. Each 64-bit word is added, wrapping, into one
/// accumulator and its upper half into another (why that is exact: the
/// private `Wide`): three
/// vector operations per vector of data (16 bytes with SSE2, 32 with AVX2,
/// 64 with AVX-512, chosen at run time), no carries to track.
#[inline]
pub fn sum_fast(data: &[u8]) -> u16 {
    if data.len() < DISPATCH_MIN {
        return sum_words(data);
    }
    arch().dispatch(SumWords(data))
}

/// [`sum_words`] as a `pulp` operation (a struct, not a closure: the
/// closure's call shim is not inlined into the dispatched function).
struct SumWords<'a>(&'a [u8]);

impl pulp::WithSimd for SumWords<'_> {
    type Output = u16;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> u16 {
        sum_words(self.0)
    }
}

/// The loop of [`sum_fast`], inlined into each instruction-set variant:
/// whole 256-byte blocks (four vectors per iteration under AVX-512), then
/// up to three 64-byte blocks in eight-lane arrays (one vector each, as in
/// [`copy_and_sum_words`]), then the last words: the vectoriser's scalar
/// remainder loop of up to 31 words would cost more than the vector part
/// on a 1448-byte segment.
#[inline(always)]
fn sum_words(data: &[u8]) -> u16 {
    let n = data.len() / 256 * 32;
    let (body, rest) = data.split_at(n * 8);
    let mut w = Wide::default();
    for i in 0..n {
        w.add(u64::from_ne_bytes(
            body[8 * i..8 * i + 8].try_into().expect("8 bytes"),
        ));
    }
    let mut all = [0u64; 8];
    let mut high = [0u64; 8];
    let mut blocks = rest.chunks_exact(64);
    for b in blocks.by_ref() {
        let v: [u64; 8] = core::array::from_fn(|k| {
            u64::from_ne_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"))
        });
        for k in 0..8 {
            all[k] = all[k].wrapping_add(v[k]);
        }
        for k in 0..8 {
            high[k] += v[k] >> 32;
        }
    }
    for k in 0..8 {
        w.all = w.all.wrapping_add(all[k]);
        w.high += high[k];
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for c in words.by_ref() {
        w.add(u64::from_ne_bytes(c.try_into().expect("chunks_exact")));
    }
    w.finish(sum_ne(words.remainder()))
}

/// Wide ones'-complement accumulator for the hot loops.
///
/// Every 64-bit native-endian word `w` of the data is added, wrapping, into
/// `all`, and its upper 32 bits `w >> 32` into `high` (exact: each term is
/// below 2^32). The sum of the lower halves is then exactly
/// `all - (high << 32)` (wrapping; exact while it is below 2^64, i.e. for
/// fewer than 2^32 words, 32 GiB). Since 2^16 ≡ 1 (mod 2^16 - 1), a word
/// is congruent to the sum of its 16-bit pieces, so `lower + high` is
/// congruent to the ones'-complement sum of the data (RFC 1071 §2: the
/// end-around carries are that reduction). One add, one shift and one add
/// per word: the loop vectoriser turns it into `paddq`/`psrlq`/`paddq` per
/// vector with several independent accumulators (both reductions are
/// associative: wrapping addition and exact addition).
#[derive(Clone, Copy, Default)]
struct Wide {
    all: u64,
    high: u64,
}

impl Wide {
    #[inline(always)]
    fn add(&mut self, w: u64) {
        self.all = self.all.wrapping_add(w);
        self.high += w >> 32;
    }

    /// The partial sum (network order), with `tail` (a native-endian wide
    /// sum of the bytes after the last word, from [`sum_ne`]) added.
    #[inline(always)]
    fn finish(&self, tail: u64) -> u16 {
        let low = self.all.wrapping_sub(self.high << 32);
        let t = u64::from(fold(tail)) + u64::from(fold(low)) + u64::from(fold(self.high));
        u16::from_be(fold(t))
    }
}

/// Copies `src` into `dst` and returns the partial sum of the bytes, in one
/// pass: each word is loaded once, stored and summed. The first few bytes
/// (up to 63) are done apart so that the stores of the main loop are
/// 64-byte aligned: unaligned stores that cross cache lines cost half the
/// speed when both ends sit at header offsets (54, 104, ...).
///
/// # Panics
/// If `dst.len() != src.len()` (a caller bug, like `copy_from_slice`).
#[inline]
pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "copy_and_sum: lengths differ");
    if dst.len() < DISPATCH_MIN {
        return copy_and_sum_aligned(dst, src);
    }
    arch().dispatch(CopyAndSum(dst, src))
}

/// [`copy_and_sum_aligned`] as a `pulp` operation (see [`SumWords`]).
struct CopyAndSum<'a, 'b>(&'a mut [u8], &'b [u8]);

impl pulp::WithSimd for CopyAndSum<'_, '_> {
    type Output = u16;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> u16 {
        copy_and_sum_aligned(self.0, self.1)
    }
}

/// [`copy_and_sum`] after the dispatch: the unaligned head, then the loop.
#[inline(always)]
fn copy_and_sum_aligned(dst: &mut [u8], src: &[u8]) -> u16 {
    let head = dst.as_ptr().align_offset(64).min(dst.len());
    let (dh, dst) = dst.split_at_mut(head);
    let (sh, src) = src.split_at(head);
    dh.copy_from_slice(sh);
    let rest = copy_and_sum_words(dst, src);
    // A head of odd length puts the rest in the other byte lane (RFC 1071
    // §2(B)).
    add(
        sum(sh),
        if head % 2 == 1 {
            rest.swap_bytes()
        } else {
            rest
        },
    )
}

/// The main loop of [`copy_and_sum`]. Three parts:
///
/// 1. whole 256-byte blocks, one 64-bit word at a time, each word loaded
///    once, stored and added into a [`Wide`]: the loop vectoriser makes it
///    four 64-byte vectors per iteration under AVX-512 (loads, stores,
///    `vpaddq`/`vpsrlq`/`vpaddq`). Written with indices into two equally
///    long slices: a `zip` of `chunks_exact` iterators was not vectorised
///    once inlined. Its trip count is a multiple of 32 words, so the
///    vectoriser's scalar remainder loop never runs;
/// 2. the remaining 64-byte blocks (up to three), each copied whole and
///    added lane-wise into eight-lane arrays that the SLP vectoriser turns
///    into one vector each (the scalar remainder of part 1 cost a fifth of
///    a 1448-byte segment's time);
/// 3. the last words and bytes.
#[inline(always)]
fn copy_and_sum_words(dst: &mut [u8], src: &[u8]) -> u16 {
    let n = dst.len() / 256 * 32;
    let (d, drest) = dst.split_at_mut(n * 8);
    let (s, srest) = src[..d.len() + drest.len()].split_at(n * 8);
    let mut w = Wide::default();
    for i in 0..n {
        let v = u64::from_ne_bytes(s[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        d[8 * i..8 * i + 8].copy_from_slice(&v.to_ne_bytes());
        w.add(v);
    }
    let mut all = [0u64; 8];
    let mut high = [0u64; 8];
    let mut dc = drest.chunks_exact_mut(64);
    let mut sc = srest.chunks_exact(64);
    for (db, sb) in dc.by_ref().zip(sc.by_ref()) {
        let sb: &[u8; 64] = sb.try_into().expect("chunks_exact");
        let db: &mut [u8; 64] = db.try_into().expect("chunks_exact");
        *db = *sb;
        let v: [u64; 8] = core::array::from_fn(|k| {
            u64::from_ne_bytes(sb[8 * k..8 * k + 8].try_into().expect("8 bytes"))
        });
        for k in 0..8 {
            all[k] = all[k].wrapping_add(v[k]);
        }
        for k in 0..8 {
            high[k] += v[k] >> 32;
        }
    }
    for k in 0..8 {
        w.all = w.all.wrapping_add(all[k]);
        w.high += high[k];
    }
    let (dr, sr) = (dc.into_remainder(), sc.remainder());
    let mut dw = dr.chunks_exact_mut(8);
    let mut sw = sr.chunks_exact(8);
    for (x, y) in dw.by_ref().zip(sw.by_ref()) {
        x.copy_from_slice(y);
        w.add(u64::from_ne_bytes(y.try_into().expect("chunks_exact")));
    }
    let (dr, sr) = (dw.into_remainder(), sw.remainder());
    dr.copy_from_slice(sr);
    w.finish(sum_ne(sr))
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
    if csum_start > frame.len() || field.checked_add(2).map_or(true, |e| e > frame.len()) {
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
        let data: Vec<u8> = (0..300u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
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

    #[test]
    fn copy_and_sum_any_alignment() {
        let data: Vec<u8> = (0..400u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        let mut out = vec![0u8; 440];
        for doff in 0..19 {
            for soff in [0, 1, 6] {
                for len in [0, 1, 2, 7, 15, 16, 17, 33, 64, 127, 200, 391] {
                    let s = &data[soff..soff + len];
                    out.fill(0xa5);
                    assert_eq!(
                        copy_and_sum(&mut out[doff..doff + len], s),
                        reference(s),
                        "doff {doff} soff {soff} len {len}"
                    );
                    assert_eq!(&out[doff..doff + len], s);
                    assert!(out[..doff].iter().all(|&b| b == 0xa5));
                    assert!(out[doff + len..].iter().all(|&b| b == 0xa5));
                }
            }
        }
    }

    /// Lengths on both sides of the dispatch threshold and of the 256- and
    /// 64-byte block boundaries, at every store alignment.
    #[test]
    fn dispatched_kernels_match_reference() {
        let data: Vec<u8> = (0..2200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
            .collect();
        let mut out = vec![0u8; 2300];
        for len in [
            255, 256, 257, 319, 320, 383, 511, 512, 575, 767, 1448, 1449, 2047,
        ] {
            for doff in [0, 1, 2, 10, 54, 63] {
                let s = &data[doff % 7..doff % 7 + len];
                assert_eq!(sum_fast(s), reference(s), "len {len}");
                out.fill(0xa5);
                assert_eq!(
                    copy_and_sum(&mut out[doff..doff + len], s),
                    reference(s),
                    "len {len} doff {doff}"
                );
                assert_eq!(&out[doff..doff + len], s);
                assert!(out[..doff].iter().all(|&b| b == 0xa5));
                assert!(out[doff + len..].iter().all(|&b| b == 0xa5));
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
