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
