//! Frames in host memory (a UMEM, tap rx buffers) as the pipeline reads them.

use std::marker::PhantomData;

use crate::ports::frame::{FrameSrc, Pkt, RxBurst};

/// [`crate::ports::frame::FrameLoc::end`] of a frame that lies in
/// [`HostFrames`]'s contiguous buffer (an AF_XDP multi-buffer frame copied out of the
/// UMEM) rather than in the area.
pub const IN_LINEAR: u32 = 1;

/// The frames of one burst in a buffer area that the kernel also writes: frame `p` is
/// the `p.len` bytes at offset `p.loc.start` of the area, or of `linear` when
/// `p.loc.end` is [`IN_LINEAR`]. Only frames the burst owns are ever viewed as slices.
pub struct HostFrames<'a> {
    base: *const u8,
    len: usize,
    linear: &'a [u8],
    /// Borrows the receive half that owns the frames, so they cannot be given back to
    /// the kernel while the burst can read them.
    _owner: PhantomData<&'a ()>,
}

impl<'a> HostFrames<'a> {
    /// The frames of a burst in the area `base..base+len`.
    ///
    /// # Safety
    ///
    /// `base..base+len` must stay mapped for `'a`, and for `'a` the bytes of every frame
    /// the caller describes with a [`Pkt`] must belong to the caller: received, not yet
    /// given back to the kernel, and written by no one. The caller ties `'a` to the
    /// borrow of whatever gives the frames back (a UMEM's fill ring, a tap's reads).
    pub unsafe fn new(base: *const u8, len: usize, linear: &'a [u8]) -> Self {
        HostFrames {
            base,
            len,
            linear,
            _owner: PhantomData,
        }
    }

    #[inline]
    fn bytes(&self, p: &Pkt) -> &[u8] {
        let start = p.loc.start as usize;
        let end = start + p.len as usize;
        if p.loc.end == IN_LINEAR {
            return &self.linear[start..end];
        }
        assert!(end <= self.len, "host frame outside its area");
        // SAFETY: inside the area (checked above), which `new`'s contract keeps mapped;
        // the frame's bytes belong to this burst and nothing writes them meanwhile.
        unsafe { std::slice::from_raw_parts(self.base.add(start), p.len as usize) }
    }
}

impl<'m> RxBurst<'m> for HostFrames<'_> {
    #[inline]
    fn read(&self, p: &Pkt, off: u32, out: &mut [u8]) -> usize {
        let b = self.bytes(p);
        let b = &b[(off as usize).min(b.len())..];
        let n = b.len().min(out.len());
        out[..n].copy_from_slice(&b[..n]);
        n
    }

    #[inline]
    fn frame<'b>(&'b self, p: &Pkt) -> FrameSrc<'b, 'm> {
        FrameSrc::Host(self.bytes(p))
    }

    #[inline]
    fn bytes(&self, p: &Pkt) -> Option<&[u8]> {
        Some(HostFrames::bytes(self, p))
    }
}
