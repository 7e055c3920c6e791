//! The slow path of OVN's logical pipeline (DESIGN.md §7): the frames controller
//! actions make (DHCP replies, ARP requests, neighbour advertisements, ICMP errors,
//! TCP resets, built by `ovn_pinctrl` as ovn-controller's pinctrl builds them), and
//! the rewrites the data path does not do in place. A PMD hands such a frame, with what
//! the pipeline decided for it, to a bounded queue ([`crate::switch::Switch::slow_tx`]),
//! at most [`RATE`] per second and PMD; one thread off the PMDs builds the frames and
//! hands them to PMD 0, which sends them between bursts
//! ([`crate::switch::Switch::inject`]). A full queue or an exhausted rate drops the
//! frame, counted as `slow_path_busy`.
//!
//! A frame that made a router ask for its next hop's MAC (`arp{}`, `nd_ns{}`) is held,
//! as ovn-controller's pinctrl holds it (`buffered_packets`): at most [`DEPTH`] frames
//! per next hop, for [`HOLD_MS`]. Once the pipeline finds the next hop (the answer's
//! `put_arp` written to `MAC_Binding` and read back), the frames go back into the
//! pipeline from their port ([`SlowDest::Resubmit`]); pinctrl resumes them at the
//! router's output instead, with the same result for a frame whose earlier stages do
//! not depend on the answer.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use super::ct::now_ms;
use crate::model::fdb::PortId;
use crate::model::lflow::{Awaited, Injected, Origin, SlowDest, SlowJob, SlowPathStats};
use crate::switch::Switch;

/// Frames held per next hop; a newer one pushes out the oldest (pinctrl's
/// `BUFFER_QUEUE_DEPTH`).
pub const DEPTH: usize = 4;
/// How long a next hop's frames are held after the last one came (pinctrl's
/// `BUFFER_MAP_TIMEOUT`), in milliseconds.
pub const HOLD_MS: u64 = 10_000;
/// Next hops awaited at once at most; a frame for another one is dropped.
pub const MAX_NEXT_HOPS: usize = 1_000;
/// How often held frames are checked against the pipeline.
const CHECK_EVERY: Duration = Duration::from_millis(5);

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

/// Makes the frames of `job`.
pub fn make(job: &SlowJob, stats: &SlowPathStats) -> Vec<Injected> {
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

/// Frames held for their next hop.
#[derive(Debug, Default)]
pub struct Held {
    by_hop: HashMap<Awaited, Queue>,
}

/// One next hop's frames: (source port, frame), oldest first, and when the last came.
#[derive(Debug)]
struct Queue {
    frames: VecDeque<(PortId, Vec<u8>)>,
    last_ms: u64,
}

fn bump(c: &AtomicU64, n: usize) {
    c.fetch_add(n as u64, Relaxed);
}

impl Held {
    /// Holds `frame` from `src` until `hop` is known, at `now_ms`.
    pub fn hold(
        &mut self,
        hop: Awaited,
        src: PortId,
        frame: Vec<u8>,
        now_ms: u64,
        stats: &SlowPathStats,
    ) {
        if !self.by_hop.contains_key(&hop) && self.by_hop.len() >= MAX_NEXT_HOPS {
            bump(&stats.overflowed, 1);
            return;
        }
        let q = self.by_hop.entry(hop).or_insert_with(|| Queue {
            frames: VecDeque::with_capacity(DEPTH),
            last_ms: now_ms,
        });
        if q.frames.len() == DEPTH {
            q.frames.pop_front();
            bump(&stats.overflowed, 1);
        }
        q.frames.push_back((src, frame));
        q.last_ms = now_ms;
        bump(&stats.held, 1);
    }

    /// The frames whose next hop `resolves` (to send again, from their port); drops
    /// those held longer than [`HOLD_MS`] at `now_ms`.
    pub fn release(
        &mut self,
        now_ms: u64,
        resolves: impl Fn(&Awaited) -> bool,
        stats: &SlowPathStats,
    ) -> Vec<Injected> {
        let mut out = Vec::new();
        self.by_hop.retain(|hop, q| {
            if resolves(hop) {
                bump(&stats.released, q.frames.len());
                out.extend(q.frames.drain(..).map(|(src, frame)| Injected {
                    src,
                    dest: SlowDest::Resubmit,
                    frame,
                }));
                return false;
            }
            if now_ms.saturating_sub(q.last_ms) >= HOLD_MS {
                bump(&stats.expired, q.frames.len());
                return false;
            }
            true
        });
        out
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.by_hop.values().map(|q| q.frames.len()).sum()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.by_hop.is_empty()
    }
}

/// The slow path's thread: makes the frames of every job, and holds and releases
/// frames awaiting a next hop, until the switch stops.
pub fn run(sw: Arc<Switch>) {
    let Some(rx) = sw.slow_rx.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    let stats = &sw.slow_stats;
    let mut held = Held::default();
    while !sw.stopping() {
        let wait = if held.is_empty() {
            Duration::from_millis(200)
        } else {
            CHECK_EVERY
        };
        let first = rx.recv_timeout(wait).ok();
        let mut frames = Vec::new();
        for job in first
            .into_iter()
            .chain(std::iter::from_fn(|| rx.try_recv().ok()))
        {
            frames.extend(make(&job, stats));
            if let Some(hop) = job.awaits {
                held.hold(hop, job.src, job.frame, now_ms(), stats);
            }
        }
        if !held.is_empty() {
            let topo = sw.topo();
            let pipeline = topo.ovn.pipeline.as_deref();
            let resolves = |hop: &Awaited| pipeline.is_some_and(|p| p.resolves(hop));
            frames.extend(held.release(now_ms(), resolves, stats));
        }
        sw.inject(frames);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(last: u8) -> Awaited {
        Awaited {
            dp: 3,
            port: 2,
            ip: std::net::Ipv4Addr::new(10, 0, 1, last).into(),
        }
    }

    /// Frames wait for their next hop: released in order once it resolves, the oldest
    /// pushed out beyond the depth, the rest dropped after the hold time; every frame
    /// is counted once.
    #[test]
    fn frames_wait_for_their_next_hop() {
        let stats = SlowPathStats::default();
        let mut h = Held::default();
        for i in 0..6u8 {
            h.hold(hop(14), 1, vec![i], 0, &stats);
        }
        h.hold(hop(15), 2, vec![9], 100, &stats);
        assert_eq!((h.len(), stats.overflowed.load(Relaxed)), (5, 2));
        assert!(h.release(50, |_| false, &stats).is_empty());
        let out = h.release(60, |a| *a == hop(14), &stats);
        let frames: Vec<u8> = out.iter().map(|f| f.frame[0]).collect();
        assert_eq!(frames, [2, 3, 4, 5]);
        assert!(out
            .iter()
            .all(|f| f.dest == SlowDest::Resubmit && f.src == 1));
        assert!(h.release(100 + HOLD_MS - 1, |_| false, &stats).is_empty());
        assert_eq!(h.len(), 1);
        assert!(h.release(100 + HOLD_MS, |_| false, &stats).is_empty());
        assert!(h.is_empty());
        let [_, _, held, released, expired, overflowed, _] = stats.read();
        assert_eq!((held, released, expired, overflowed), (7, 4, 1, 2));
    }

    /// Beyond [`MAX_NEXT_HOPS`] next hops, a frame for another one is dropped and
    /// counted; one for a hop already awaited is still held.
    #[test]
    fn next_hops_are_bounded() {
        let stats = SlowPathStats::default();
        let mut h = Held::default();
        for i in 0..MAX_NEXT_HOPS as u32 {
            h.hold(Awaited { dp: i, ..hop(1) }, 1, vec![0], 0, &stats);
        }
        h.hold(hop(200), 1, vec![0], 0, &stats);
        assert_eq!(stats.overflowed.load(Relaxed), 1);
        h.hold(Awaited { dp: 0, ..hop(1) }, 1, vec![1], 0, &stats);
        assert_eq!(h.len(), MAX_NEXT_HOPS + 1);
    }
}
