//! Runs of one flow's frames in a burst, stepped together (as VPP steps a vector):
//! the run's program is found once, and each zone's connection is found and locked
//! once for all its frames ([`conntrack::Conntrack::execute_run`]); each frame's
//! state update (TCP's window) is still its own, in the frames' order.
//!
//! A frame's decision is the one it gets alone. Stepping together runs one step for
//! every frame before the next step for any: that gives each frame its answers alone
//! only if no later step of an earlier frame changes what an earlier step of a later
//! frame read. So a run is stepped together only through programs where each zone
//! has one lookup, followed only by commits to that lookup's connection
//! ([`eligible`]), and, at each lookup, only while those commits would change nothing
//! for its answer (OVN's `ct_next` then `ct_commit` on a known connection); without
//! NAT or load balancing. Where a frame's answer differs from the first's, that frame
//! and the frames after it go on alone from there, in order ([`Together::place`]):
//! their steps come after the earlier frames', as alone.

use conntrack::{Conntrack, Packet, Prepared};

use super::ct::result_of;
use super::program::{PStep, Variant, Walk};

/// Whether a run may step through `variants` (one key's) together: in each variant,
/// every zone has at most one lookup and its commits follow it; no NAT, no load
/// balancer, no commit that is not its zone's lookup's.
pub fn eligible(variants: &[Variant]) -> bool {
    variants.iter().all(|v| {
        let mut zones = [0u16; super::program::MAX_CT_STEPS];
        let mut n = 0;
        let mut zone = None;
        v.steps.iter().all(|s| match s {
            PStep::Out(_) => true,
            PStep::CtLb(..) => false,
            PStep::Ct(a) => {
                let fresh = a.nat.is_none() && !a.commit && !zones[..n].contains(&a.zone);
                if fresh && n < zones.len() {
                    zones[n] = a.zone;
                    n += 1;
                    zone = Some(a.zone);
                    true
                } else {
                    false
                }
            }
            PStep::Commit(a) => a.nat.is_none() && zone == Some(a.zone),
        })
    })
}

/// Whether every commit to `zone` in `variants` changes nothing on a connection a
/// lookup answered `r` for.
fn quiet(variants: &[Variant], zone: u16, r: &conntrack::CtResult) -> bool {
    variants.iter().flat_map(|v| &v.steps).all(|s| match s {
        PStep::Commit(a) if a.zone == zone => a.commits_nothing(r),
        _ => true,
    })
}

/// Where a run parted.
#[derive(Debug, Clone, Copy)]
pub struct Split<'v> {
    /// The first frame (index in the run) that parted; the frames after it did too.
    pub at: usize,
    /// Frame `at`'s answer to the step of `walk`, when it ran it (it differed from the
    /// first frame's); the frames after it did not run that step.
    pub answer: Option<conntrack::CtResult>,
    /// Where they stand: at the step they parted on.
    pub walk: Walk<'v>,
    /// Their answer to the step before it.
    pub last: Option<conntrack::CtResult>,
}

/// How far a run went together.
#[derive(Debug)]
pub struct Together<'v> {
    /// How many of the run's frames, from its first, stayed together.
    pub n: usize,
    /// Where they went together to (its end: their program is its variant).
    pub walk: Walk<'v>,
    /// Their answer to the step before `walk`'s.
    pub last: Option<conntrack::CtResult>,
    /// Where the rest parted, in the order they did (each split's frame is before the
    /// one before it).
    pub splits: Vec<Split<'v>>,
}

/// Where a frame of a run stands after [`step_together`].
#[derive(Debug, Clone, Copy)]
pub enum Place<'v> {
    /// Done: its program.
    Done(&'v Variant),
    /// To go on alone.
    Alone {
        /// From this step.
        walk: Walk<'v>,
        /// Its answer to the step before (`answer` when there is one).
        last: Option<conntrack::CtResult>,
        /// Its answer to `walk`'s step, already run: to be taken first.
        answer: Option<conntrack::CtResult>,
    },
}

impl<'v> Together<'v> {
    /// Where frame `f` of the run stands.
    pub fn place(&self, f: usize) -> Place<'v> {
        if f < self.n {
            return match self.walk.next() {
                None => Place::Done(self.walk.variant()),
                Some(_) => Place::Alone {
                    walk: self.walk,
                    last: self.last,
                    answer: None,
                },
            };
        }
        // The last split at or before `f` holds it.
        let s = self
            .splits
            .iter()
            .rev()
            .find(|s| s.at <= f)
            .expect("a frame past the run's together ones is in a split");
        Place::Alone {
            walk: s.walk,
            last: s.answer.filter(|_| f == s.at).or(s.last),
            answer: s.answer.filter(|_| f == s.at),
        }
    }
}

/// Finishes alone a frame of a run from `walk` ([`Place::Alone`]): takes its `answer`
/// first when it has one, then runs its steps left on `live` (its tracker, resumed at
/// its last answer).
pub fn finish_alone<'v>(
    mut walk: Walk<'v>,
    answer: Option<conntrack::CtResult>,
    live: &mut super::ct::LiveCt<'_>,
) -> Result<&'v Variant, super::program::Partial> {
    if let Some(r) = answer {
        walk.took(result_of(&r, None))?;
    }
    walk.finish(live)
}

/// Steps the run `pkts` (of one key and one lookup: `prep` is each one's) through
/// `variants` ([`eligible`]) together, as far as the steps and the results allow.
pub fn step_together<'v>(
    variants: &'v [Variant],
    ct: &Conntrack,
    pkts: &[Packet],
    prep: &Prepared,
    now_ms: u64,
) -> Together<'v> {
    let mut t = Together {
        n: pkts.len(),
        walk: Walk::new(variants, None),
        last: None,
        splits: Vec::new(),
    };
    while let Some(step) = t.walk.next() {
        match step {
            PStep::Out(_) => t.walk.passed(),
            PStep::Commit(a) if t.last.is_some_and(|l| l.zone == a.zone) => {
                // `quiet` held for this zone's answer: a commit of nothing, as
                // `execute_next` answers it (no lock), for each frame.
                t.walk.committed();
            }
            PStep::Ct(act) if t.walk.may_take().is_ok() => {
                let (mut walk, mut first, mut parted, mut i) = (t.walk, None, None, 0);
                let ran = ct.execute_run(&pkts[..t.n], prep, act, now_ms, |r| {
                    let at = i;
                    i += 1;
                    let same = match first {
                        Some(f) => *r == f,
                        None => {
                            let ok = walk.took(result_of(r, None)).is_ok()
                                && quiet(variants, act.zone, r);
                            first = Some(*r);
                            ok
                        }
                    };
                    if !same {
                        parted = Some((at, *r));
                    }
                    same
                });
                if ran == 0 {
                    // No connection (or a translated one): each frame's own step.
                    break;
                }
                // The frames from `at` on part: `at` with its answer when it differed,
                // without one when the run ended before it (a reopened connection).
                let split = match parted {
                    Some((at, answer)) => Some((at, Some(answer))),
                    None => (ran < t.n).then_some((ran, None)),
                };
                if let Some((at, answer)) = split {
                    t.splits.push(Split {
                        at,
                        answer,
                        walk: t.walk,
                        last: t.last,
                    });
                    t.n = at;
                }
                if t.n == 0 {
                    break;
                }
                (t.walk, t.last) = (walk, first);
            }
            _ => break,
        }
    }
    t
}

#[cfg(test)]
mod tests {
    //! A run stepped together decides each frame and leaves the connections as the
    //! frames stepped one by one do ([`super::super::program::run`]).

    use std::net::IpAddr;

    use conntrack::{Config, Conntrack, CtAction, CtState, Packet, Prepared, TcpFlags, L4};
    use proptest::prelude::*;

    use super::{eligible, finish_alone, step_together, Place};
    use crate::datapath::lflow::ct::LiveCt;
    use crate::datapath::lflow::program::{self, Out, PStep, Partial, Target, Variant};
    use crate::model::lflow::{CtResult, Zones};
    use crate::model::stats::DropReason;

    const Z1: u16 = 1;
    const Z2: u16 = 2;

    fn state(s: CtState) -> CtResult {
        CtResult {
            state: u32::from((s | CtState::TRK).bits()),
            ..CtResult::default()
        }
    }

    /// OVN's stateful stages in two zones (`ct_next`, `ct_commit` with `mark`'s
    /// write) then an output, for each pair of `results`.
    fn program(mark: u32, results: &[[CtState; 2]]) -> Vec<Variant> {
        let commit = |z| PStep::Commit(CtAction::commit(z).with_mark(mark, 0xff));
        let steps = vec![
            PStep::Ct(CtAction::lookup(Z1)),
            commit(Z1),
            PStep::Ct(CtAction::lookup(Z2)),
            commit(Z2),
            PStep::Out(Out {
                target: Target::Drop(DropReason::OvnPipeline),
                rewrite: Box::new([]),
                embedded: None,
            }),
        ];
        results
            .iter()
            .map(|r| Variant {
                ct: r.iter().map(|&s| CtResult { mark, ..state(s) }).collect(),
                steps: steps.clone(),
                punts: 0,
                dps: Box::new([]),
                rel: None,
                mcast: None,
            })
            .collect()
    }

    /// Which variant, or the miss.
    type Decision = Result<usize, Partial>;

    fn index(vs: &[Variant], v: &Variant) -> usize {
        vs.iter().position(|w| std::ptr::eq(w, v)).unwrap()
    }

    fn one_by_one(vs: &[Variant], ct: &Conntrack, pkts: &[Packet]) -> Vec<Decision> {
        let zones = Zones::default();
        pkts.iter()
            .map(|p| {
                let mut live = LiveCt::new(ct, &zones, Some(*p), 5);
                program::run(vs, &mut live, None).map(|v| index(vs, v))
            })
            .collect()
    }

    fn together(vs: &[Variant], ct: &Conntrack, pkts: &[Packet]) -> (Vec<Decision>, usize) {
        let zones = Zones::default();
        let prep = Prepared::of(&pkts[0]);
        let t = step_together(vs, ct, pkts, &prep, 5);
        let out = (0..pkts.len())
            .map(|f| match t.place(f) {
                Place::Done(v) => Ok(index(vs, v)),
                Place::Alone { walk, last, answer } => {
                    let mut live = LiveCt::new(ct, &zones, Some(pkts[f]), 5).resumed(prep, last);
                    finish_alone(walk, answer, &mut live).map(|v| index(vs, v))
                }
            })
            .collect();
        (out, t.n)
    }

    fn tcp(flags: u8, seq: u32, len: u32) -> Packet {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        Packet {
            src: ip("10.0.0.1"),
            dst: ip("10.0.0.2"),
            fragment: false,
            l4: L4::Tcp(conntrack::TcpSegment {
                src_port: 40000,
                dst_port: 80,
                flags: TcpFlags(flags),
                seq,
                ack: 5001,
                window: 65535,
                wscale: None,
                payload_len: len,
            }),
        }
    }

    /// Two trackers with the connection of A:40000 → B:80 in both zones, its
    /// handshake done and committed with `mark`.
    fn trackers(mark: u32) -> [Conntrack; 2] {
        let syn = tcp(0x02, 100, 0);
        let mut synack = tcp(0x12, 5000, 0);
        (synack.src, synack.dst) = (syn.dst, syn.src);
        if let L4::Tcp(t) = &mut synack.l4 {
            (t.src_port, t.dst_port, t.ack) = (80, 40000, 101);
        }
        [0, 1].map(|_| {
            let ct = Conntrack::new(Config::default()).unwrap();
            for z in [Z1, Z2] {
                ct.execute(&syn, &CtAction::commit(z).with_mark(mark, 0xff), 0);
                ct.execute(&synack, &CtAction::lookup(z), 0);
            }
            ct
        })
    }

    /// The connections, by zone (the table's order is its slots').
    fn dump(ct: &Conntrack) -> Vec<conntrack::ConnEntry> {
        let mut d: Vec<_> = ct.dump(5, None).collect();
        d.sort_by_key(|e| e.zone);
        d
    }

    const EST: CtState = CtState::EST;

    #[test]
    fn a_known_flows_run_goes_together_to_its_program() {
        let vs = program(7, &[[CtState::NEW, CtState::NEW], [EST, EST]]);
        assert!(eligible(&vs));
        let [a, b] = trackers(7);
        let pkts: Vec<_> = (0..8).map(|i| tcp(0x10, 101 + i * 100, 100)).collect();
        let (t, n) = together(&vs, &b, &pkts);
        assert_eq!(n, 8, "all together");
        assert_eq!(t, vec![Ok(1); 8]);
        assert_eq!(one_by_one(&vs, &a, &pkts), t);
        assert_eq!(dump(&a), dump(&b));
    }

    #[test]
    fn a_commit_that_changes_the_mark_sends_every_frame_alone() {
        // Committed with mark 3; the program writes 7: the first frame's commit
        // changes the connection, which the next frames' lookups must see.
        let vs = program(7, &[[EST, EST]]);
        let [a, b] = trackers(3);
        let pkts: Vec<_> = (0..4).map(|i| tcp(0x10, 101 + i * 100, 100)).collect();
        let (t, n) = together(&vs, &b, &pkts);
        assert_eq!(n, 0);
        assert_eq!(one_by_one(&vs, &a, &pkts), t);
        assert_eq!(dump(&a), dump(&b));
    }

    #[test]
    fn eligible_refuses_two_lookups_in_a_zone_and_a_commit_of_another_zone() {
        let mut vs = program(0, &[[EST, EST]]);
        vs[0].steps[2] = PStep::Ct(CtAction::lookup(Z1));
        assert!(!eligible(&vs));
        let mut vs = program(0, &[[EST, EST]]);
        vs[0].steps[1] = PStep::Commit(CtAction::commit(Z2));
        assert!(!eligible(&vs));
    }

    /// Segments after the handshake: data, FIN, RST, out-of-window, a SYN.
    fn segment() -> impl Strategy<Value = Packet> {
        (
            prop::sample::select(vec![0x10u8, 0x18, 0x11, 0x04, 0x14, 0x02]),
            prop::sample::select(vec![101u32, 601, 1101, 90, 1_000_000]),
            prop::sample::select(vec![0u32, 500]),
        )
            .prop_map(|(f, seq, len)| tcp(f, seq, len))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the segments (a run whose answers part, or end the run), each
        /// frame's decision and the connections are those of one frame at a time.
        #[test]
        fn a_run_decides_as_its_frames_one_by_one(
            pkts in prop::collection::vec(segment(), 1..16),
            mark in prop::sample::select(vec![0u32, 7]),
        ) {
            let inv = CtState::INV;
            let vs = program(mark, &[[EST, EST], [inv, inv], [CtState::NEW, CtState::NEW]]);
            let [a, b] = trackers(0);
            let (t, _) = together(&vs, &b, &pkts);
            prop_assert_eq!(one_by_one(&vs, &a, &pkts), t);
            prop_assert_eq!(dump(&a), dump(&b));
        }
    }
}
