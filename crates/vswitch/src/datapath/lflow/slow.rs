//! The slow path of OVN's logical pipeline (DESIGN.md §7): the frames controller
//! actions make (DHCP replies, ARP requests, neighbour advertisements, ICMP errors,
//! TCP resets, built by `ovn_pinctrl` as ovn-controller's pinctrl builds them), and
//! the rewrites the data path does not do in place. A PMD hands such a frame, with what
//! the pipeline decided for it, to a bounded queue ([`crate::switch::Switch::slow_tx`]),
//! at most [`RATE`] per second and PMD; one thread off the PMDs builds the frames and
//! hands them to PMD 0, which sends them between bursts
//! ([`crate::switch::Switch::inject`]). A full queue or an exhausted rate drops the
//! frame, counted as `slow_path_busy`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::model::lflow::{Injected, Origin, SlowJob};
use crate::switch::Switch;

/// Frames one PMD hands to the slow path per second at most (a guest flooding ARP or
/// DHCP costs the PMD a copy per frame up to this, and a drop beyond).
pub const RATE: u64 = 10_000;
/// The burst the rate allows.
pub const BURST: u64 = 1_000;

/// A token bucket of [`RATE`] per second and [`BURST`] deep, on a millisecond clock.
#[derive(Debug, Default)]
pub struct Bucket {
    tokens: u64,
    at_ms: u64,
}

impl Bucket {
    /// Takes a token at `now_ms`, if one is left.
    pub fn take(&mut self, now_ms: u64) -> bool {
        let earned = now_ms.saturating_sub(self.at_ms) * RATE / 1000;
        if earned > 0 {
            self.tokens = (self.tokens + earned).min(BURST);
            self.at_ms = now_ms;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// What the slow path did.
#[derive(Debug, Default)]
pub struct SlowStats {
    /// Frames made and handed to PMD 0.
    pub made: AtomicU64,
    /// Frames pinctrl would not make (its rules say nothing is sent).
    pub not_made: AtomicU64,
}

/// Makes the frames of `job`.
pub fn make(job: &SlowJob, stats: &SlowStats) -> Vec<Injected> {
    let mut out = Vec::new();
    for (dest, origin, flow) in &job.outs {
        let frame = match origin {
            Origin::Received => {
                let mut f = job.frame.clone();
                ovn_pinctrl::rewrite(&mut f, flow);
                Some(f)
            }
            Origin::Dhcp(reply) => Some(reply.frame(flow)),
            Origin::Built { action, at } => ovn_pinctrl::build(*action, &job.frame, at, flow).ok(),
            Origin::DhcpTraced(_) | Origin::Traced(_) => None,
        };
        match frame {
            Some(frame) => {
                stats.made.fetch_add(1, Relaxed);
                out.push(Injected {
                    src: job.src,
                    dest: *dest,
                    frame,
                });
            }
            None => {
                stats.not_made.fetch_add(1, Relaxed);
            }
        }
    }
    out
}

/// The slow path's thread: makes the frames of every job until the switch stops.
pub fn run(sw: Arc<Switch>, stats: Arc<SlowStats>) {
    let Some(rx) = sw.slow_rx.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    while !sw.stopping() {
        let Ok(job) = rx.recv_timeout(std::time::Duration::from_millis(200)) else {
            continue;
        };
        let mut frames = make(&job, &stats);
        while let Ok(job) = rx.try_recv() {
            frames.extend(make(&job, &stats));
        }
        sw.inject(frames);
    }
}
