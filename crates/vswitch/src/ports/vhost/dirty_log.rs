//! The dirty-page log of a live migration (vhost-user spec, "Migration"; the format of
//! Linux vhost's `VHOST_SET_LOG_BASE`).
//!
//! While QEMU migrates a VM it copies guest memory to the destination over and over,
//! each pass resending the pages dirtied since the last one. Pages the switch writes
//! (receive buffers, used rings) are invisible to QEMU's own tracking, so the switch
//! marks them in a bitmap QEMU shares with it (`SET_LOG_BASE`, a memfd): one bit per
//! 4 KiB guest-physical page ([`VHOST_LOG_PAGE`]), page `p` at bit `p % 8` of byte
//! `p / 8`. QEMU atomically takes and clears words of it at every pass, so marks are
//! atomic ORs, and a page is marked only after the switch wrote it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use super::fault::Protected;

/// `VHOST_F_LOG_ALL` (virtio feature bit 26, vhost-user spec): the front-end asks the
/// back-end to log every write to guest memory in the shared log.
pub const VHOST_F_LOG_ALL: u32 = 26;

/// `VHOST_LOG_PAGE`: bytes of guest memory per bit of the log.
pub const VHOST_LOG_PAGE: u64 = 0x1000;

/// Why a log was refused.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The log cannot cover the guest memory the switch may write.
    #[error(
        "dirty log of {size} bytes is too small: guest memory ends at {covers:#x}, which \
         needs {needed} bytes (one bit per 4 KiB page)"
    )]
    TooSmall {
        /// The log's size (bytes).
        size: u64,
        /// The end of guest memory (guest-physical address).
        covers: u64,
        /// The size it needs (bytes).
        needed: u64,
    },
    /// The log lies past the end of its file (mapping it would raise SIGBUS).
    #[error(
        "dirty log at offset {offset} + {size} bytes lies past the end of its {file}-byte file"
    )]
    PastFileEnd {
        /// `mmap_offset` of the request.
        offset: u64,
        /// `mmap_size` of the request.
        size: u64,
        /// The file's size (bytes).
        file: u64,
    },
    /// `fstat` or `mmap` failed on the log's fd.
    #[error("dirty log cannot be mapped: {0}")]
    Map(io::Error),
}

/// Bytes of log that cover guest-physical addresses `[0, end)`.
pub fn log_bytes_for(end: u64) -> u64 {
    end.div_ceil(VHOST_LOG_PAGE).div_ceil(8)
}

/// One mapping of the shared log.
#[derive(Debug)]
pub struct DirtyLog {
    base: NonNull<AtomicU8>,
    len: usize,
    /// Registered for SIGBUS containment while mapped (the front-end can truncate the
    /// file under the switch, as it can guest memory).
    protected: Option<Protected>,
}

// SAFETY: the mapping is shared memory accessed only through atomics; the pointer is
// owned by this value and unmapped once, on drop.
unsafe impl Send for DirtyLog {}
// SAFETY: as above: every access is an atomic operation on the mapped bytes.
unsafe impl Sync for DirtyLog {}

impl DirtyLog {
    /// Maps `size` bytes at `offset` of `file` (the `SET_LOG_BASE` request) as the log
    /// of a guest whose memory ends at guest-physical `covers`.
    ///
    /// # Errors
    /// [`LogError::TooSmall`] if the log cannot cover `[0, covers)`,
    /// [`LogError::PastFileEnd`] if the range exceeds the file, [`LogError::Map`] if the
    /// fd cannot be mapped shared and writable (a pipe, a read-only file, an unaligned
    /// offset).
    pub fn map(file: &File, offset: u64, size: u64, covers: u64) -> Result<Self, LogError> {
        let needed = log_bytes_for(covers);
        if size < needed || size == 0 {
            return Err(LogError::TooSmall {
                size,
                covers,
                needed,
            });
        }
        let file_len = file.metadata().map_err(LogError::Map)?.len();
        if offset.checked_add(size).is_none_or(|end| end > file_len) {
            return Err(LogError::PastFileEnd {
                offset,
                size,
                file: file_len,
            });
        }
        let len =
            usize::try_from(size).map_err(|_| LogError::Map(io::ErrorKind::InvalidInput.into()))?;
        let off = libc::off_t::try_from(offset)
            .map_err(|_| LogError::Map(io::ErrorKind::InvalidInput.into()))?;
        // SAFETY: a new shared mapping chosen by the kernel (no MAP_FIXED) of a range
        // checked to lie inside the file; nothing else in the process aliases it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(LogError::Map(io::Error::last_os_error()));
        }
        let base =
            NonNull::new(p.cast::<AtomicU8>()).ok_or(LogError::Map(io::ErrorKind::Other.into()))?;
        Ok(DirtyLog {
            base,
            len,
            protected: super::fault::protect(p as usize, len),
        })
    }

    /// The log's size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the log has no bytes (never: [`DirtyLog::map`] refuses that).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the front-end truncated the log's file under the switch (the fault was
    /// contained; its marks since are lost, so the connection must close).
    pub fn faulted(&self) -> bool {
        self.protected.as_ref().is_some_and(Protected::faulted)
    }

    /// Marks the pages of guest-physical `[gpa, gpa + len)` dirty; returns how many
    /// were not marked yet. Pages past the log's end are skipped (the log covered guest
    /// memory when it was set; a front-end that grows memory sends a larger log first).
    ///
    /// The caller has written those bytes and made the writes visible first
    /// ([`std::sync::atomic::fence`] `SeqCst` once per batch): a bit already set is left
    /// alone, so QEMU must not be able to take it between the write and this check.
    #[inline]
    pub fn mark(&self, gpa: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let first = gpa / VHOST_LOG_PAGE;
        let last = gpa.saturating_add(len - 1) / VHOST_LOG_PAGE;
        let mut new = 0;
        for page in first..=last {
            let Ok(byte) = usize::try_from(page / 8) else {
                break;
            };
            if byte >= self.len {
                break;
            }
            let bit = 1u8 << (page % 8);
            // SAFETY: `byte < len`, inside the mapping, which lives as long as `self`.
            let b = unsafe { &*self.base.as_ptr().add(byte) };
            if b.load(Ordering::Relaxed) & bit == 0 && b.fetch_or(bit, Ordering::Relaxed) & bit == 0
            {
                new += 1;
            }
        }
        new
    }

    /// Whether page `page` is marked (tests).
    pub fn is_marked(&self, page: u64) -> bool {
        let Ok(byte) = usize::try_from(page / 8) else {
            return false;
        };
        byte < self.len
            // SAFETY: inside the mapping (checked), which lives as long as `self`.
            && unsafe { &*self.base.as_ptr().add(byte) }.load(Ordering::Relaxed) & (1 << (page % 8)) != 0
    }
}

impl Drop for DirtyLog {
    fn drop(&mut self) {
        // Unregistered before it is unmapped, so the SIGBUS handler never patches a
        // range that may be reused.
        self.protected = None;
        // SAFETY: the mapping made in `map`, unmapped once; no reference into it
        // outlives `self`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn memfd(len: u64) -> File {
        // SAFETY: memfd_create with a NUL-terminated name; the fd is owned by the File.
        let fd = unsafe { libc::memfd_create(c"log".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh fd no one else owns.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    #[test]
    fn marks_every_page_a_range_touches_once() {
        let f = memfd(4096);
        let log = DirtyLog::map(&f, 0, 4096, 64 << 20).unwrap();
        // 100 bytes straddling pages 2 and 3.
        assert_eq!(log.mark(3 * 4096 - 50, 100), 2);
        assert!(log.is_marked(2) && log.is_marked(3) && !log.is_marked(4) && !log.is_marked(1));
        assert_eq!(log.mark(2 * 4096, 1), 0, "already marked");
        assert_eq!(log.mark(0, 0), 0);
        // 64 KiB from page 100: 16 pages.
        assert_eq!(log.mark(100 * 4096, 65536), 16);
        // Past the log's end: skipped.
        assert_eq!(log.mark(1 << 40, 4096), 0);
    }

    #[test]
    fn the_shared_file_sees_the_bits() {
        let f = memfd(8);
        let log = DirtyLog::map(&f, 0, 8, 64 * 4096).unwrap();
        log.mark(9 * 4096, 1);
        let mut b = [0u8; 8];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, 0).unwrap();
        assert_eq!(b, [0, 2, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn refuses_a_log_too_small_past_its_file_or_unmappable() {
        let f = memfd(4096);
        // 1 GiB of guest memory needs 32 KiB of log.
        assert!(matches!(
            DirtyLog::map(&f, 0, 4096, 1 << 30),
            Err(LogError::TooSmall { needed: 32768, .. })
        ));
        assert!(matches!(
            DirtyLog::map(&f, 4096, 4096, 1 << 20),
            Err(LogError::PastFileEnd { .. })
        ));
        let dir = std::env::temp_dir().join(format!("vs-log-{}", std::process::id()));
        std::fs::File::create(&dir)
            .unwrap()
            .write_all(&[0; 8192])
            .unwrap();
        let ro = File::open(&dir).unwrap();
        assert!(matches!(
            DirtyLog::map(&ro, 0, 4096, 1 << 20),
            Err(LogError::Map(_))
        ));
        std::fs::remove_file(&dir).unwrap();
    }
}
