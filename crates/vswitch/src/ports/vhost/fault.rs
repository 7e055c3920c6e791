//! Guest memory that disappears under the switch: SIGBUS contained to the connection.
//!
//! A front-end hands the switch a file (memfd, hugetlbfs, tmpfs) and the switch maps it
//! as guest memory. The region is checked against the file's size before it is mapped
//! (the vendored `vhost` patch), but the front-end can still truncate the file later,
//! and the next access to a page past the new end raises SIGBUS, which kills the
//! process and every port with it. Sealing (`F_SEAL_SHRINK`) cannot be required: only
//! memfds carry seals, and DPDK guests hand over hugetlbfs files.
//!
//! So the switch contains the fault instead. Every mapped region is registered in a
//! lock-free table while a connection may use it ([`FaultGuard`]). A SIGBUS handler
//! looks the faulting address up: inside a registered region, it maps anonymous zero
//! pages over the faulting page (`MAP_FIXED`; a hugetlbfs region's whole huge page),
//! marks the region faulted and returns, so the interrupted copy completes on zeros
//! (what the guest sees of it no longer matters: its memory is gone). Housekeeping
//! then closes that connection ([`take_faulted`], counted as a protocol error); the
//! port accepts the next one. Outside every region the fault is not ours: the previous
//! handler (Rust's own, or the default action) gets it.
//!
//! The handler uses only atomics and raw syscalls (`mmap` and `sigaction`), nothing
//! that locks or allocates.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};

use vm_memory::{GuestMemoryBackend, GuestMemoryRegion, MemoryRegionAddress};

use super::virtq::Mem;

/// Regions registered at once (every connection's; a connection has at most 509).
const SLOTS: usize = 4096;

/// One registered region: `[start, end)` of the process's address space; `start` 0
/// marks a free slot.
struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    /// A fault was contained in this region.
    faulted: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
};

static TABLE: [Slot; SLOTS] = [FREE; SLOTS];
/// Some region faulted since the last [`take_faulted`].
static ANY_FAULT: AtomicBool = AtomicBool::new(false);
/// Faults contained since start.
static FAULTS: AtomicUsize = AtomicUsize::new(0);
/// The SIGBUS action before ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();

/// The regions of one connection's guest memory, registered while it may be used.
/// Dropping the guard unregisters them (before the mappings it holds are unmapped).
#[derive(Default)]
pub struct FaultGuard {
    tables: Mutex<Vec<(Arc<Mem>, Vec<usize>)>>,
}

impl FaultGuard {
    /// Registers every region of `mem` (a new memory table) and forgets the tables no
    /// one else uses any more. Regions beyond the table's room stay unprotected (and
    /// are logged).
    pub fn track(&self, mem: Arc<Mem>) {
        install();
        let mut slots = Vec::new();
        for r in mem.iter() {
            let Ok(p) = r.get_host_address(MemoryRegionAddress(0)) else {
                continue;
            };
            match register(p as usize, r.len() as usize) {
                Some(s) => slots.push(s),
                None => tracing::warn!("guest memory fault table full: a region is unprotected"),
            }
        }
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        // A table whose only owner is this guard is unmapped once dropped here: its
        // slots are freed first.
        tables.retain(|(m, s)| {
            let used = Arc::strong_count(m) > 1;
            if !used {
                s.iter().for_each(|&i| unregister(i));
            }
            used
        });
        tables.push((mem, slots));
    }

    /// Whether a fault was contained in one of this connection's regions.
    pub fn faulted(&self) -> bool {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables
            .iter()
            .flat_map(|(_, s)| s)
            .any(|&i| TABLE[i].faulted.load(Ordering::Acquire))
    }
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        let tables = self.tables.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, s) in tables.iter() {
            s.iter().for_each(|&i| unregister(i));
        }
    }
}

/// One more mapping the front-end's file backs (the dirty log), registered for
/// containment while this lives; see [`protect`].
#[derive(Debug)]
pub struct Protected(usize);

impl Protected {
    /// Whether a fault was contained in the mapping.
    pub fn faulted(&self) -> bool {
        TABLE[self.0].faulted.load(Ordering::Acquire)
    }
}

impl Drop for Protected {
    fn drop(&mut self) {
        unregister(self.0);
    }
}

/// Registers the mapping `[start, start + len)` for SIGBUS containment until the
/// returned guard drops (drop it before unmapping). `None` if the table is full (the
/// mapping stays unprotected; logged).
pub fn protect(start: usize, len: usize) -> Option<Protected> {
    install();
    let slot = register(start, len).map(Protected);
    if slot.is_none() {
        tracing::warn!("guest memory fault table full: a dirty log is unprotected");
    }
    slot
}

/// Whether a fault is waiting for housekeeping (one relaxed load: PMDs check it per
/// burst, and only then ask their connection's guard).
#[inline]
pub fn pending() -> bool {
    ANY_FAULT.load(Ordering::Relaxed)
}

/// Whether any region faulted since the last call (housekeeping then looks for the
/// connections whose [`FaultGuard::faulted`] is set).
pub fn take_faulted() -> bool {
    ANY_FAULT.swap(false, Ordering::AcqRel)
}

/// Faults contained since start.
pub fn faults() -> usize {
    FAULTS.load(Ordering::Relaxed)
}

fn register(start: usize, len: usize) -> Option<usize> {
    if start == 0 || len == 0 {
        return None;
    }
    for (i, s) in TABLE.iter().enumerate() {
        if s.start.load(Ordering::Relaxed) != 0 {
            continue;
        }
        // `end` and the flag first, then `start` publishes the slot (Release): the
        // handler reads `start` (Acquire) before `end`.
        s.end.store(start + len, Ordering::Relaxed);
        s.faulted.store(false, Ordering::Relaxed);
        if s.start
            .compare_exchange(0, start, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return Some(i);
        }
    }
    None
}

fn unregister(i: usize) {
    TABLE[i].start.store(0, Ordering::Release);
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sigaction with a zeroed struct filled in below; the handler is an
        // `extern "C"` function with the SA_SIGINFO signature; the old action is read
        // into a local first and only then published.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &sa, &mut old) == 0 {
                let _ = PREVIOUS.set(old);
            }
        }
    });
}

/// The region of the table that holds `addr`, if any.
fn slot_of(addr: usize) -> Option<&'static Slot> {
    TABLE.iter().find(|s| {
        let start = s.start.load(Ordering::Acquire);
        start != 0 && addr >= start && addr < s.end.load(Ordering::Relaxed)
    })
}

/// Maps zero pages over the page holding `addr` (4 KiB, else a 2 MiB or 1 GiB huge
/// page for hugetlbfs mappings, which cannot be split smaller).
fn patch(addr: usize, slot: &Slot) -> bool {
    for size in [4usize << 10, 2 << 20, 1 << 30] {
        let page = addr & !(size - 1);
        if page < slot.start.load(Ordering::Relaxed)
            || page + size > slot.end.load(Ordering::Relaxed)
        {
            continue;
        }
        // SAFETY: the range lies inside a guest memory mapping this process made and
        // still holds (the slot is registered only while its mapping lives); replacing
        // its pages with private anonymous ones changes what the switch reads there,
        // never memory Rust owns.
        let p = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            return true;
        }
    }
    false
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some(slot) = slot_of(addr) {
        if patch(addr, slot) {
            slot.faulted.store(true, Ordering::Release);
            ANY_FAULT.store(true, Ordering::Release);
            FAULTS.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    // Not ours: hand it to the previous action.
    match PREVIOUS.get() {
        Some(prev)
            if prev.sa_sigaction != libc::SIG_DFL
                && prev.sa_sigaction != libc::SIG_IGN
                && prev.sa_flags & libc::SA_SIGINFO != 0 =>
        {
            // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this
            // signature; it is called as the kernel would have.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(prev.sa_sigaction) };
            f(sig, info, ctx);
        }
        _ => {
            // SAFETY: restores the default action; returning re-runs the faulting
            // access, which now terminates the process as SIGBUS always did.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use vm_memory::{GuestAddress, GuestMemoryMmap};

    /// A region backed by a memfd that is truncated after mapping: reading and writing
    /// past the new end completes (zeros), is counted, and marks the guard faulted;
    /// nothing else is touched.
    #[test]
    fn truncated_memfd_is_contained() {
        let fd = memfd(4 << 20);
        let file = std::fs::File::from(fd);
        let mem: Mem = GuestMemoryMmap::from_ranges_with_files([(
            GuestAddress(0),
            4 << 20,
            Some(vm_memory::FileOffset::new(file.try_clone().unwrap(), 0)),
        )])
        .unwrap();
        let mem = Arc::new(mem);
        let guard = FaultGuard::default();
        guard.track(mem.clone());
        use vm_memory::Bytes;
        mem.write_obj(0x5au8, GuestAddress(3 << 20)).unwrap();
        // SAFETY: ftruncate on our own memfd.
        assert_eq!(unsafe { libc::ftruncate(file.as_raw_fd(), 1 << 20) }, 0);
        let before = faults();
        let v: u8 = mem.read_obj(GuestAddress(3 << 20)).unwrap();
        assert_eq!(v, 0, "the page past the end reads as zeros");
        mem.write_obj(7u8, GuestAddress((3 << 20) + 1)).unwrap();
        assert!(faults() > before);
        assert!(guard.faulted());
        assert!(take_faulted());
        // Below the new end the file is still there.
        mem.write_obj(1u8, GuestAddress(0)).unwrap();
        drop(guard);
        let start = mem
            .iter()
            .next()
            .unwrap()
            .get_host_address(MemoryRegionAddress(0));
        assert!(slot_of(start.unwrap() as usize).is_none(), "unregistered");
    }

    fn memfd(len: i64) -> std::os::fd::OwnedFd {
        use std::os::fd::FromRawFd;
        // SAFETY: memfd_create with a valid C string; the fd is owned from here on.
        let fd = unsafe { libc::memfd_create(c"fault-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: fd was just created and is owned by nobody else; ftruncate on it.
        unsafe {
            assert_eq!(libc::ftruncate(fd, len), 0);
            std::os::fd::OwnedFd::from_raw_fd(fd)
        }
    }
}
