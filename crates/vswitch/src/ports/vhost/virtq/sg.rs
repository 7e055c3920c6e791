//! Copies between scatter-gather lists in guest memory.

use vm_memory::VolatileSlice;

use super::{MemView, Seg};

/// Copies between scatter-gather lists in guest memory, byte-exact, with checked slices.
///
/// Returns the number of bytes copied: the smaller of the two lists' lengths after
/// `src_skip` and `dst_skip`.
pub fn copy_sg(
    src_mem: &MemView<'_>,
    src: &[Seg],
    mut src_skip: u32,
    dst_mem: &MemView<'_>,
    dst: &[Seg],
    mut dst_skip: u32,
) -> usize {
    let mut copied = 0usize;
    let mut si = 0;
    let mut di = 0;
    while si < src.len() && src_skip >= src[si].len {
        src_skip -= src[si].len;
        si += 1;
    }
    while di < dst.len() && dst_skip >= dst[di].len {
        dst_skip -= dst[di].len;
        di += 1;
    }
    let mut s_off = src_skip;
    let mut d_off = dst_skip;
    while si < src.len() && di < dst.len() {
        let s = src[si];
        let d = dst[di];
        let n = (s.len - s_off).min(d.len - d_off);
        let (Some(from), Some(to)) = (
            src_mem.slice(s.addr + u64::from(s_off), n as usize),
            dst_mem.slice(d.addr + u64::from(d_off), n as usize),
        ) else {
            // Cannot happen for segments checked by walk_chain under the same memory
            // snapshot; stop rather than copy garbage.
            break;
        };
        from.copy_to_volatile_slice(to);
        copied += n as usize;
        s_off += n;
        d_off += n;
        if s_off == s.len {
            si += 1;
            s_off = 0;
        }
        if d_off == d.len {
            di += 1;
            d_off = 0;
        }
    }
    copied
}

/// The pieces of the scatter-gather list that cover `len` bytes from `skip` bytes in,
/// in order: `(offset within those len bytes, the piece in guest memory)`. Ends early
/// where the list ends or a piece lies outside guest memory.
fn sg_pieces<'a, 'm>(
    mem: &'a MemView<'m>,
    segs: &'a [Seg],
    mut skip: u32,
    len: usize,
) -> impl Iterator<Item = (usize, VolatileSlice<'m>)> + 'a {
    let mut segs = segs.iter();
    let mut done = 0usize;
    std::iter::from_fn(move || {
        while done < len {
            let s = segs.next()?;
            if skip >= s.len {
                skip -= s.len;
                continue;
            }
            let n = ((s.len - skip) as usize).min(len - done);
            let v = mem.slice(s.addr + u64::from(skip), n)?;
            skip = 0;
            let at = done;
            done += n;
            return Some((at, v));
        }
        None
    })
}

/// The usual case of [`sg_pieces`], in one step: the `len` bytes from `skip` bytes in
/// all lie in the first buffer.
#[inline]
fn first_piece<'m>(
    mem: &MemView<'m>,
    segs: &[Seg],
    skip: u32,
    len: usize,
) -> Option<VolatileSlice<'m>> {
    let first = segs.first()?;
    if u64::from(skip) + len as u64 > u64::from(first.len) {
        return None;
    }
    mem.slice(first.addr + u64::from(skip), len)
}

/// Copies the scatter-gather list, from `skip` bytes in, into the contiguous `dst`.
/// Returns the bytes copied: the smaller of `dst.len()` and what the list holds.
#[inline]
pub fn gather_sg(mem: &MemView<'_>, segs: &[Seg], skip: u32, dst: &VolatileSlice<'_>) -> usize {
    if let Some(from) = first_piece(mem, segs, skip, dst.len()) {
        from.copy_to_volatile_slice(*dst);
        return dst.len();
    }
    let mut done = 0;
    for (at, from) in sg_pieces(mem, segs, skip, dst.len()) {
        let Ok(to) = dst.offset(at) else { break };
        from.copy_to_volatile_slice(to);
        done = at + from.len();
    }
    done
}

/// Reads up to `buf.len()` bytes starting `skip` bytes into the scatter-gather list.
/// Returns the number read.
#[inline]
pub fn read_sg(mem: &MemView<'_>, segs: &[Seg], skip: u32, buf: &mut [u8]) -> usize {
    if let Some(v) = first_piece(mem, segs, skip, buf.len()) {
        return v.copy_to(buf);
    }
    let mut done = 0;
    for (at, v) in sg_pieces(mem, segs, skip, buf.len()) {
        done = at + v.copy_to(&mut buf[at..at + v.len()]);
    }
    done
}

/// Writes `data` at the start of the scatter-gather list. Returns the number written.
pub fn write_sg(mem: &MemView<'_>, segs: &[Seg], data: &[u8]) -> usize {
    write_sg_at(mem, segs, 0, data)
}

/// Writes `data` starting `skip` bytes into the scatter-gather list. Returns the number
/// written.
pub fn write_sg_at(mem: &MemView<'_>, segs: &[Seg], skip: u32, data: &[u8]) -> usize {
    let mut done = 0;
    for (at, v) in sg_pieces(mem, segs, skip, data.len()) {
        v.copy_from(&data[at..at + v.len()]);
        done = at + v.len();
    }
    done
}

/// Copies with non-temporal stores: writes that go to memory without first reading the
/// lines they fill (no read-for-ownership) and without evicting cached data. For a frame
/// replicated to many guests, whose buffers together outgrow the caches: the copies
/// then cost about half (64 receivers of 800-byte frames: 650 cycles per copy against
/// 1,200-1,300).
pub mod stream {
    use vm_memory::VolatileSlice;

    use super::{first_piece, sg_pieces, MemView, Seg};

    /// Copies `n` bytes from `src` to `dst`: the 16-byte-aligned middle of `dst` with
    /// streaming stores (MOVNTDQ), the ends with ordinary ones. A batch of these must be
    /// followed by [`fence`] before what they wrote is published.
    ///
    /// # Safety
    /// `dst` is valid for writes and `src` for reads of `n` bytes; they do not overlap.
    #[inline]
    pub unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
            let head = dst.align_offset(16).min(n);
            std::ptr::copy_nonoverlapping(src, dst, head);
            let mut i = head;
            while i + 16 <= n {
                let v = _mm_loadu_si128(src.add(i).cast::<__m128i>());
                _mm_stream_si128(dst.add(i).cast::<__m128i>(), v);
                i += 16;
            }
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), n - i);
        }
        #[cfg(not(target_arch = "x86_64"))]
        std::ptr::copy_nonoverlapping(src, dst, n);
    }

    /// [`super::gather_sg`] with streaming stores.
    #[inline]
    pub fn gather_sg(mem: &MemView<'_>, segs: &[Seg], skip: u32, dst: &VolatileSlice<'_>) -> usize {
        let to = dst.ptr_guard_mut().as_ptr();
        if let Some(from) = first_piece(mem, segs, skip, dst.len()) {
            // SAFETY: both slices are valid for their lengths (guest memory, mapped for
            // the burst), `from` is no longer than `dst`, and a guest's transmit buffer
            // is not the receive buffer being filled (a driver that shares them only
            // garbles its own frame).
            unsafe { copy(to, from.ptr_guard().as_ptr(), from.len()) };
            return from.len();
        }
        let mut done = 0;
        for (at, from) in sg_pieces(mem, segs, skip, dst.len()) {
            if at + from.len() > dst.len() {
                break;
            }
            // SAFETY: as above; `at + from.len()` is within `dst` (checked).
            unsafe { copy(to.add(at), from.ptr_guard().as_ptr(), from.len()) };
            done = at + from.len();
        }
        done
    }

    /// Orders the streaming stores before every later store (SFENCE).
    #[inline]
    pub fn fence() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SFENCE has no operands and no preconditions.
        unsafe {
            core::arch::x86_64::_mm_sfence()
        };
    }
}

#[cfg(test)]
mod stream_tests {
    use super::stream;

    /// Every alignment of the destination and every length around the 16-byte steps
    /// copies exactly the source, and nothing outside the destination.
    #[test]
    fn streaming_copy_is_exact_at_every_alignment_and_length() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for off in 0..32 {
            for n in (0..80).chain([255, 256, 257, 270]) {
                let mut dst = vec![0xAAu8; 340];
                // SAFETY: dst holds off + n bytes (n ≤ 270, off < 32); src holds n.
                unsafe { stream::copy(dst.as_mut_ptr().add(off), src.as_ptr(), n) };
                stream::fence();
                assert_eq!(&dst[off..off + n], &src[..n], "off {off} n {n}");
                assert!(dst[..off].iter().all(|&b| b == 0xAA), "off {off} n {n}");
                assert!(dst[off + n..].iter().all(|&b| b == 0xAA), "off {off} n {n}");
            }
        }
    }
}
