//! Idle transmit queues polled with one load.
//!
//! A PMD polls every queue it owns in every round, and a full poll of a vhost-user
//! queue (the connection and guest memory loaded, the ring's lock taken, its areas
//! translated, `avail.idx` read) costs over a hundred cycles: with 64 guests that only
//! receive (the multicast benchmark's), the polls of their empty transmit queues took a
//! quarter of the PMD. DPDK's vhost library answers an empty poll with one load of
//! `avail.idx`; this does the same. When a full poll finds a queue empty, the PMD keeps
//! the host address and value of the one 16-bit word the driver must write to make a
//! buffer available there (split rings: `avail.idx`, virtio 1.2 §2.7.6; packed rings:
//! the flags of the descriptor at the device's position, §2.8.21), and the next polls
//! only compare that word until it changes.
//!
//! The watch keeps what makes the load safe: the guest memory it points into stays
//! mapped (an `Arc` of that memory table) and registered for SIGBUS containment (the
//! connection's [`FaultGuard`]), however the connection changes meanwhile. What the
//! word cannot tell (a new ring address or position from the front-end, a new
//! connection, a migration's announcement) a full poll picks up: every
//! `MAX_SKIPS`th poll is one, and a PMD drops its watches before it sleeps.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use super::fault::{self, FaultGuard};
use super::virtq::Mem;

/// Polls answered from the watched word before a full poll: 64 rounds, some 20 µs for a
/// busy PMD with 64 idle queues, before a reconfigured ring is seen.
const MAX_SKIPS: u16 = 64;

/// One owned queue's watch (PMD-local: no sharing, no atomics of its own).
#[derive(Default)]
pub struct IdleWatch {
    held: Option<Held>,
    skips: u16,
}

/// A watched word and what keeps it readable.
pub(crate) struct Held {
    faults: Arc<FaultGuard>,
    mem: Arc<Mem>,
    /// Host address of the word: 2-byte aligned, inside `mem`'s mapping.
    word: usize,
    /// Its value (little-endian as read) when the queue was found empty.
    quiet: u16,
}

impl IdleWatch {
    /// Whether the queue is still as empty as when the watch was armed: its word is
    /// unchanged. False when there is no watch, when a full poll is due, or while a
    /// guest memory fault waits for housekeeping.
    #[inline]
    pub fn still_quiet(&mut self) -> bool {
        let Some(h) = &self.held else { return false };
        if self.skips >= MAX_SKIPS || fault::pending() {
            self.skips = 0;
            return false;
        }
        // SAFETY: `word` is 2-byte aligned inside a mapping that `h.mem` keeps mapped
        // and `h.faults` keeps registered for SIGBUS containment (a truncated file reads
        // as zeros). Atomic: the driver writes it concurrently.
        let v = unsafe { (*(h.word as *const AtomicU16)).load(Ordering::Acquire) };
        if v != h.quiet {
            return false;
        }
        self.skips += 1;
        true
    }

    /// Takes the watch for a full poll, which re-arms it ([`Self::arm`]) if it finds the
    /// queue empty again.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<Held> {
        self.skips = 0;
        self.held.take()
    }

    /// Arms the watch on `word` (host address, 2-byte aligned, inside `mem`), which read
    /// `quiet`; reuses `old`'s references when they are the same connection's.
    pub(crate) fn arm(
        &mut self,
        old: Option<Held>,
        faults: &Arc<FaultGuard>,
        mem: &Arc<Mem>,
        word: usize,
        quiet: u16,
    ) {
        let held = match old {
            Some(h) if Arc::ptr_eq(&h.faults, faults) && Arc::ptr_eq(&h.mem, mem) => {
                Held { word, quiet, ..h }
            }
            _ => Held {
                faults: faults.clone(),
                mem: mem.clone(),
                word,
                quiet,
            },
        };
        self.held = Some(held);
    }

    /// Drops the watch (and the memory it keeps mapped).
    pub fn clear(&mut self) {
        self.held = None;
        self.skips = 0;
    }
}
