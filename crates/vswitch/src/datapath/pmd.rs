//! PMD threads: each polls the source queues the topology gives it, in bursts, and runs
//! the whole pipeline for them, including delivery into the destination ports
//! (DESIGN.md §3–4).
//!
//! Between bursts a PMD picks up the newest topology snapshot (one atomic load when it
//! has not changed), rebuilds its queue list when it has, and publishes the generation
//! it now runs so that an editor knows when the old snapshot is out of use. Idle, it
//! busy-polls, sleeps adaptively, or sleeps at once, as `--poll` says.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::pipeline::{Pipeline, Run};
use crate::config::PollMode;
use crate::model::stats::cycles;
use crate::ports::{IdleWatch, Port, RxScratch, SleepSet};
use crate::switch::topology::Topology;
use crate::switch::{PmdShared, Switch};

pub use super::packet::BURST;

/// Empty poll rounds before an adaptive PMD sleeps until kicked: its naps reach
/// [`ADAPTIVE_MAX_NAP_US`] after 50 rounds, then about 10 ms of 50 µs naps follow.
const ADAPTIVE_IDLE_ROUNDS: u32 = 250;

/// Longest sleep (ms): a sleeping PMD wakes at least this often.
const MAX_SLEEP_MS: i32 = 1000;

/// Longest nap (µs) of an adaptive PMD whose bursts stay light or empty, as Open
/// vSwitch's `pmd-maxsleep` does: a PMD that shares its core with guests or the kernel
/// hands the CPU to them while traffic trickles, and collects fuller bursts when it
/// comes back. Costs at most this much latency per hop at low rates (`--poll busy`
/// spins instead).
const ADAPTIVE_MAX_NAP_US: u32 = 50;

/// A round whose largest burst is below this is light (OVS: half of its burst).
const LIGHT_BURST: usize = BURST / 2;

/// One PMD thread's state. Public so benches and tests can drive it without spawning a
/// thread.
pub struct Pmd {
    switch: Arc<Switch>,
    shared: Arc<PmdShared>,
    snap: Snapshot,
    rx: RxScratch,
    pipeline: Pipeline,
}

/// One queue a PMD polls: the port, the queue (pair) and the PMD's idle watch on it.
type Polled = (Arc<Port>, u16, IdleWatch);

/// The topology a PMD runs, and what it polls in it.
struct Snapshot {
    topo: arc_swap::Cache<Arc<ArcSwap<Topology>>, Arc<Topology>>,
    /// The queues it polls, from the topology it runs.
    queues: Vec<Polled>,
    /// The generation of that topology.
    generation: u64,
}

impl Snapshot {
    /// Picks up a new topology if one was published: the queue list is rebuilt and the
    /// generation published in `shared`. Returns the snapshot and the queue list built
    /// from it (so every port polled is in it), borrowed for one round.
    #[inline]
    fn adopt(&mut self, shared: &PmdShared) -> (&Topology, &mut [Polled]) {
        let topo = self.topo.load();
        if topo.generation != self.generation {
            let mine = topo
                .pmd_queues
                .get(shared.index)
                .map_or(&[][..], Vec::as_slice);
            self.queues = mine
                .iter()
                .filter_map(|&(p, q)| {
                    topo.port(p)
                        .map(|tp| (tp.port.clone(), q, IdleWatch::default()))
                })
                .collect();
            self.generation = topo.generation;
            shared
                .generation_seen
                .store(self.generation, Ordering::Release);
        }
        (topo, &mut self.queues)
    }
}

impl Pmd {
    /// The data-path state of PMD `index` of `switch`.
    pub fn new(switch: Arc<Switch>, index: usize) -> Self {
        let mut pmd = Pmd {
            shared: switch.pmds[index].clone(),
            snap: Snapshot {
                topo: arc_swap::Cache::new(switch.topology.clone()),
                queues: Vec::new(),
                generation: 0,
            },
            rx: RxScratch::new(index),
            pipeline: Pipeline::new(switch.clone(), index),
            switch,
        };
        pmd.snap.adopt(&pmd.shared);
        pmd
    }

    /// Polls every owned queue once; returns the number of frames taken.
    pub fn poll_once(&mut self) -> usize {
        self.round(cycles()).work
    }

    /// One round from time `t0`: picks up a new topology, answers a flow dump, and polls
    /// every owned queue once, charging each non-empty burst's cycles to its queue.
    /// Returns the frames taken and the time at the end.
    fn round(&mut self, mut t0: u64) -> Round {
        let (topo, queues) = self.snap.adopt(&self.shared);
        if self.shared.index == 0 {
            self.pipeline.query_if_due(topo);
            self.pipeline.lflow_inject(topo);
        }
        if self.shared.dump_request.load(Ordering::Acquire) {
            let lines = self.pipeline.dump_flows(topo);
            *self.shared.dump.lock().unwrap_or_else(|e| e.into_inner()) = Some(lines);
            self.shared.dump_request.store(false, Ordering::Release);
        }
        let mut run = Run {
            pipeline: &mut self.pipeline,
            topo,
        };
        let mut work = 0;
        let mut largest = 0;
        for (port, q, watch) in queues {
            run.pipeline.stage_start();
            let n = port.receive(*q, watch, &mut self.rx, &mut run);
            if n > 0 {
                run.pipeline.lap(super::stages::Stage::Complete);
                let t1 = cycles();
                port.account(*q, n as u64, t1.wrapping_sub(t0));
                t0 = t1;
                work += n;
                largest = largest.max(n);
                let c = &self.shared.counters;
                c.packets.add(n as u64);
                c.batches.add(1);
            }
        }
        Round {
            work,
            largest,
            end: t0,
        }
    }

    /// Runs the PMD loop until shutdown, waiting as `--poll` says when idle (read again
    /// at every idle round: a reload may change it).
    pub fn run(mut self) {
        let shared = self.shared.clone();
        let _alive = Alive::new(&shared);
        let c = &shared.counters;
        let mut idle_rounds: u32 = 0;
        let mut nap_us: u32 = 0;
        let mut rounds: u32 = 0;
        let mut last = cycles();
        while !self.switch.stopping() {
            rounds = rounds.wrapping_add(1);
            if rounds.is_multiple_of(1024) {
                shared.heartbeat.fetch_add(1, Ordering::Relaxed);
            }
            let round = self.round(last);
            if round.work > 0 {
                c.busy_rounds.add(1);
                c.busy_cycles.add(round.end.wrapping_sub(last));
                idle_rounds = 0;
                last = round.end;
            } else {
                let now = cycles();
                c.idle_rounds.add(1);
                c.idle_cycles.add(now.wrapping_sub(last));
                idle_rounds = idle_rounds.saturating_add(1);
                last = now;
            }
            let wait = match self.switch.poll_mode() {
                PollMode::Busy => Wait::Spin,
                PollMode::Interrupt if round.work == 0 => Wait::Sleep,
                PollMode::Interrupt => Wait::Spin,
                PollMode::Adaptive => {
                    nap_us = next_nap(nap_us, round.largest);
                    if idle_rounds >= ADAPTIVE_IDLE_ROUNDS {
                        Wait::Sleep
                    } else if nap_us > 0 {
                        Wait::Nap(nap_us)
                    } else {
                        Wait::Spin
                    }
                }
            };
            match wait {
                Wait::Spin => {
                    if round.work == 0 {
                        std::hint::spin_loop();
                    }
                    continue;
                }
                Wait::Nap(us) => {
                    std::thread::sleep(std::time::Duration::from_micros(us.into()));
                    c.naps.add(1);
                }
                Wait::Sleep => {
                    self.sleep();
                    shared.heartbeat.fetch_add(1, Ordering::Relaxed);
                    idle_rounds = 0;
                    nap_us = 0;
                }
            }
            // Napping and sleeping time counts as idle.
            let woke = cycles();
            c.idle_cycles.add(woke.wrapping_sub(last));
            last = woke;
        }
    }

    /// Arms every owned queue's wake-up and sleeps until one fires, the switch changes,
    /// or a second passes. Does not sleep if work arrived meanwhile.
    fn sleep(&mut self) {
        let mut set = SleepSet::new(self.shared.wake_fd());
        let mut pending = false;
        let generation = self.snap.generation;
        let (topo, queues) = self.snap.adopt(&self.shared);
        if topo.generation != generation {
            return;
        }
        for (port, q, watch) in queues {
            // A sleeping PMD keeps no guest memory mapped for its watches, and its
            // first polls after waking are full ones.
            watch.clear();
            pending |= port.arm_wakeup(*q, &mut set);
        }
        if pending {
            return;
        }
        self.shared.counters.sleeps.add(1);
        set.wait(MAX_SLEEP_MS);
    }
}

/// What one poll round did.
struct Round {
    /// Frames received over all queues.
    work: usize,
    /// The largest burst from one queue.
    largest: usize,
    /// The cycle counter when the last burst was accounted (the round's start if none).
    end: u64,
}

/// How a PMD waits after a round.
enum Wait {
    /// Poll again at once.
    Spin,
    /// Sleep this many µs.
    Nap(u32),
    /// Sleep until a queue is kicked, the switch changes or a second passes.
    Sleep,
}

/// The nap (µs) of an adaptive PMD after a round whose largest burst was `largest`:
/// 1 µs longer after each light (or empty) round, up to [`ADAPTIVE_MAX_NAP_US`], and
/// none after a fuller one.
fn next_nap(nap_us: u32, largest: usize) -> u32 {
    if largest < LIGHT_BURST {
        (nap_us + 1).min(ADAPTIVE_MAX_NAP_US)
    } else {
        0
    }
}

/// Marks a PMD thread alive while it exists (cleared on return and on unwind).
struct Alive<'a>(&'a PmdShared);

impl<'a> Alive<'a> {
    fn new(s: &'a PmdShared) -> Self {
        s.alive.store(true, Ordering::Release);
        Alive(s)
    }
}

impl Drop for Alive<'_> {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::Release);
    }
}
