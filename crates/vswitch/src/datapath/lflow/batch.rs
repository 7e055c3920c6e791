//! Runs of one flow's frames in a burst, stepped together (as VPP steps a vector):
//! the run's program is found once, and each zone's connection is found and locked
//! once for all its frames ([`conntrack::Conntrack::execute_run`]); each frame's
//! state update (TCP's window) is still its own, in the frames' order.
//!
//! A frame's decision is the one it gets alone. Stepping together runs one step for
//! every frame before the next step for any: that gives each frame its answers alone
//! only if no later step of an earlier frame changes what an earlier step of a later
//! frame read. So a lookup is taken together only where every path the run's frames
//! may still take ([`Walk::ahead`]) leaves its zone's connection as it is (`quiet`):
//! OVN's `ct_next` then `ct_commit` of what the connection holds. A lookup of an
//! existing translation (`ct_dnat`, `ct_lb_mark` on a known connection: `nat`) is
//! taken together too: every frame of the run is translated alike, and the next
//! zones see the packets as translated. Where a frame's answer differs from the
//! first's, that frame and the frames after it go on alone from there, in order
//! ([`Together::place`]): their steps come after the earlier frames', as alone.
//! Commits that may create or change a connection, and setting a translation up,
//! are each frame's own.

use conntrack::{Conntrack, Endpoints, NatResult, Packet, Prepared};

use super::ct::{moved, result_of};
use super::program::{PStep, Variant, Walk};

/// A conntrack step's answer and what NAT did in it.
pub type Answer = (conntrack::CtResult, Option<NatResult>);

/// Where a run's frames stand between steps: what the tracker of a frame that goes
/// on alone resumes from ([`super::ct::LiveCt::resumed`]).
#[derive(Debug, Clone, Copy)]
pub struct Resume {
    /// The lookup of the packet as the steps so far translated it.
    pub prep: Prepared,
    /// The answer to the last step, and what NAT did in it (`None`: no step yet).
    pub last: Option<Answer>,
    /// The packet's endpoints as translated so far (`None`: as received).
    pub moved: Option<Endpoints>,
}

/// Whether no path the run's frames may still take (the variants `walk`, just past a
/// step in `zone` answered `r`, has not ruled out) changes that zone's connection:
/// each later step in `zone` comes right after a step in `zone` and is [`calm`]
/// there. A step in `zone` after another zone's (which steps the connection again)
/// or a load balancer's pick in `zone` is not quiet.
fn quiet(walk: &Walk<'_>, zone: u16, r: &conntrack::CtResult) -> bool {
    walk.ahead().all(|steps| {
        let mut last = zone;
        steps.iter().all(|s| {
            let (z, ok) = match s {
                PStep::Out(_) => return true,
                PStep::Commit(a) | PStep::Ct(a) => (a.zone, calm(a, r)),
                PStep::CtLb(req, _) => (req.zone, false),
            };
            let fine = z != zone || (last == zone && ok);
            last = z;
            fine
        })
    })
}

/// Whether `a`, right after a step in its zone that answered `r`, leaves the zone's
/// connection as it is ([`Conntrack::execute_next`]): an invalid answer is repeated; a
/// connection found is at most written, with what it holds; where none was found, a
/// lookup creates none.
fn calm(a: &conntrack::CtAction, r: &conntrack::CtResult) -> bool {
    r.state.contains(conntrack::CtState::INV) || !a.commit || a.commits_nothing(r)
}

/// Whether `a`, right after a step in its zone that answered `last`, answers `last`
/// again for every frame of the run, with no lock: [`calm`], on a connection found
/// (or an invalid answer), and no translation left to make (none asked, none there,
/// or made already).
fn repeats(a: &conntrack::CtAction, (r, nat): &Answer) -> bool {
    let done = r.state.translated();
    r.state.contains(conntrack::CtState::INV)
        || (r.has_connection() && calm(a, r) && (a.nat.is_none() || nat.is_none() || done))
}

/// Whether the first frame's answer `r` (and NAT report `nat`) to a lookup in `zone`
/// takes the run on together: `walk` takes it, no embedded header is to translate
/// (an ICMP error's: each frame's own), and the zone is [`quiet`] after it. Out of
/// line: the other frames' answers are only compared.
#[inline(never)]
fn leads(walk: &mut Walk<'_>, zone: u16, r: &conntrack::CtResult, nat: &Option<NatResult>) -> bool {
    walk.took(result_of(r, *nat)).is_ok()
        && nat.is_none_or(|n| n.inner.is_none())
        && quiet(walk, zone, r)
}

/// Whether `a` and `b` are the same answer; the label is compared by halves (written
/// so by the step just made, it is read back so: one wide read of it would wait for
/// both stores).
#[inline(always)]
fn same_answer(a: &conntrack::CtResult, b: &conntrack::CtResult) -> bool {
    let halves = |l: u128| [l as u64, (l >> 64) as u64];
    let same = a.state == b.state
        && a.zone == b.zone
        && a.mark == b.mark
        && halves(a.label) == halves(b.label)
        && a.invalid == b.invalid
        && a.refused == b.refused
        && a.has_connection() == b.has_connection();
    debug_assert_eq!(same, a == b, "every field compared");
    same
}

/// Where a run parted.
#[derive(Debug, Clone, Copy)]
pub struct Split<'v> {
    /// The first frame (index in the run) that parted; the frames after it did too.
    pub at: usize,
    /// Frame `at`'s answer to the step of `walk`, when it ran it (it differed from the
    /// first frame's); the frames after it did not run that step.
    pub answer: Option<Answer>,
    /// Where they stand: at the step they parted on.
    pub walk: Walk<'v>,
    /// Their state before that step.
    pub state: Resume,
}

/// How far a run went together.
#[derive(Debug)]
pub struct Together<'v> {
    /// How many of the run's frames, from its first, stayed together.
    pub n: usize,
    /// Where they went together to (its end: their program is its variant).
    pub walk: Walk<'v>,
    /// Their state there.
    pub state: Resume,
    /// Where the rest parted, in the order they did (each split's frame is before the
    /// one before it).
    pub splits: Vec<Split<'v>>,
}

/// Where a frame of a run stands after [`step_together`] (`'t`: the [`Together`]
/// it is read from).
#[derive(Debug, Clone, Copy)]
pub enum Place<'t, 'v> {
    /// Done: its program.
    Done(&'v Variant),
    /// To go on alone.
    Alone {
        /// From this step.
        walk: &'t Walk<'v>,
        /// Its state before it.
        state: &'t Resume,
        /// Its answer to `walk`'s step, already run: to be taken first.
        answer: Option<&'t Answer>,
    },
}

impl<'v> Together<'v> {
    /// Where frame `f` of the run stands.
    pub fn place(&self, f: usize) -> Place<'_, 'v> {
        if f < self.n {
            return match self.walk.next() {
                None => Place::Done(self.walk.variant()),
                Some(_) => Place::Alone {
                    walk: &self.walk,
                    state: &self.state,
                    answer: None,
                },
            };
        }
        // The first split (they came at frames ever nearer the run's start) at or
        // before `f` holds it: a later one holds only frames that were still together.
        let s = self
            .splits
            .iter()
            .find(|s| s.at <= f)
            .expect("a frame past the run's together ones is in a split");
        Place::Alone {
            walk: &s.walk,
            state: &s.state,
            answer: s.answer.as_ref().filter(|_| f == s.at),
        }
    }
}

/// Finishes alone a frame of a run from `walk` ([`Place::Alone`]): takes its `answer`
/// first when it has one, then runs its steps left on `live` (its tracker, resumed
/// where the run left it).
pub fn finish_alone<'v>(
    mut walk: Walk<'v>,
    answer: Option<Answer>,
    live: &mut super::ct::LiveCt<'_>,
) -> Result<&'v Variant, super::program::Partial> {
    if let Some((r, nat)) = answer {
        walk.took(live.answered(r, nat))?;
    }
    walk.finish(live)
}

/// Steps the run `pkts` (of one key and one lookup: `prep` is each one's) through
/// `variants` (an exact key's) together, as far as the steps and the results allow;
/// `translated` holds the run's packets as a translation made them (kept by the
/// caller: its room is reused).
pub fn step_together<'v>(
    variants: &'v [Variant],
    ct: &Conntrack,
    (pkts, prep): (&[Packet], &Prepared),
    now_ms: u64,
    translated: &mut Vec<Packet>,
) -> Together<'v> {
    let mut t = Together {
        n: pkts.len(),
        walk: Walk::new(variants, None),
        state: Resume {
            prep: *prep,
            last: None,
            moved: None,
        },
        splits: Vec::new(),
    };
    while let Some(step) = t.walk.next() {
        match step {
            PStep::Out(_) => t.walk.passed(),
            PStep::Commit(a) | PStep::Ct(a) if t.state.last.is_some_and(|l| l.0.zone == a.zone) => {
                // Right after a step in its zone (whose `quiet` held): the answer
                // before, for each frame, as `execute_next` gives it.
                let last = t.state.last.expect("a step before");
                if !repeats(a, &last) {
                    break;
                }
                if matches!(step, PStep::Commit(_)) {
                    t.walk.committed();
                } else if t.walk.may_take().is_err()
                    || t.walk.took(result_of(&last.0, last.1)).is_err()
                {
                    break;
                }
            }
            PStep::Ct(act) if t.walk.may_take().is_ok() => {
                let now = if t.state.moved.is_some() {
                    &translated[..t.n]
                } else {
                    &pkts[..t.n]
                };
                let (mut walk, mut first, mut parted, mut i) = (t.walk, None, None, 0);
                let ran = ct.execute_run(now, &t.state.prep, act, now_ms, |r, nat| {
                    let at = i;
                    i += 1;
                    let same = match &first {
                        // Equal answers carry equal NAT reports (execute_run's).
                        Some((f, fnat)) => {
                            let same = same_answer(r, f);
                            debug_assert!(!same || nat == fnat);
                            same
                        }
                        None => {
                            first = Some((*r, *nat));
                            leads(&mut walk, act.zone, r, nat)
                        }
                    };
                    if !same {
                        parted = Some((at, (*r, *nat)));
                    }
                    same
                });
                if ran == 0 {
                    // A commit, or an alias to nothing: each frame's own step.
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
                        state: t.state,
                    });
                    t.n = at;
                }
                let Some((r, nat)) = first.filter(|_| t.n > 0) else {
                    break;
                };
                t.walk = walk;
                t.state.last = Some((r, nat));
                if let Some(e) = nat.filter(|_| r.state.translated()).map(|n| n.packet) {
                    // In place: each packet is read before it is written.
                    if t.state.moved.is_none() {
                        translated.clear();
                        translated.extend_from_slice(&pkts[..t.n]);
                    }
                    for p in &mut translated[..t.n] {
                        *p = moved(p, &e);
                    }
                    t.state.prep = Prepared::of(&translated[0]);
                    t.state.moved = Some(e);
                }
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

    use conntrack::{
        Config, Conntrack, CtAction, CtState, Nat, NatRange, Packet, Prepared, TcpFlags, L4,
    };
    use proptest::prelude::*;

    use super::{finish_alone, step_together, Place};
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
        let t = step_together(vs, ct, (pkts, &prep), 5, &mut Vec::new());
        let out = (0..pkts.len())
            .map(|f| match t.place(f) {
                Place::Done(v) => Ok(index(vs, v)),
                Place::Alone {
                    walk,
                    state,
                    answer,
                } => {
                    let mut live = LiveCt::new(ct, &zones, Some(pkts[f]), 5).resumed(state);
                    finish_alone(*walk, answer.copied(), &mut live).map(|v| index(vs, v))
                }
            })
            .collect();
        (out, t.n)
    }

    fn tcp(flags: u8, seq: u32, len: u32) -> Packet {
        seg(A, 40000, B, 80, flags, seq, 5001, len)
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

    /// The connections, by zone and tuple (the table's order is its slots', which
    /// depend on when each was made).
    fn dump(ct: &Conntrack) -> Vec<conntrack::ConnEntry> {
        let mut d: Vec<_> = ct.dump(5, None).collect();
        d.sort_by_key(|e| (e.zone, format!("{:?}", e.orig)));
        d
    }

    const EST: CtState = CtState::EST;

    #[test]
    fn a_known_flows_run_goes_together_to_its_program() {
        let vs = program(7, &[[CtState::NEW, CtState::NEW], [EST, EST]]);
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
    fn a_second_lookup_in_a_zone_or_a_commit_after_another_zone_sends_frames_alone() {
        let pkts: Vec<_> = (0..4).map(|i| tcp(0x10, 101 + i * 100, 100)).collect();
        // Z1's lookup again after Z2's: none goes together (the first lookup is not
        // quiet). A commit to Z2 before Z2's lookup: together through Z1's lookup,
        // each alone from the commit (4 together, not to the end).
        let mut twice = program(0, &[[EST, EST]]);
        twice[0].steps[3] = PStep::Ct(CtAction::lookup(Z1));
        let mut early = program(0, &[[EST, EST]]);
        early[0].steps[1] = PStep::Commit(CtAction::commit(Z2));
        for (vs, together_n) in [(twice, 0), (early, 4)] {
            let [a, b] = trackers(0);
            let (t, n) = together(&vs, &b, &pkts);
            assert_eq!(n, together_n);
            assert_eq!(one_by_one(&vs, &a, &pkts), t, "{:?}", vs[0].steps);
            assert_eq!(dump(&a), dump(&b));
        }
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

    /// The client, the load balancer's backend (B:8080) and its VIP.
    const A: &str = "10.0.0.1";
    const B: &str = "10.0.0.2";
    const VIP: &str = "10.0.0.100";
    const ZN: u16 = 3;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A TCP segment `src:sport -> dst:dport`.
    #[allow(clippy::too_many_arguments)]
    fn seg(
        src: &str,
        sport: u16,
        dst: &str,
        dport: u16,
        flags: u8,
        seq: u32,
        ack: u32,
        len: u32,
    ) -> Packet {
        Packet {
            src: ip(src),
            dst: ip(dst),
            fragment: false,
            l4: L4::Tcp(conntrack::TcpSegment {
                src_port: sport,
                dst_port: dport,
                flags: TcpFlags(flags),
                seq,
                ack,
                window: 65535,
                wscale: None,
                payload_len: len,
            }),
        }
    }

    /// An OVN load balancer's path, as vswitchd runs it (`vswitchd-lb`): `ct_lb_mark`
    /// in the sender's zone (`nat`: DNAT on the way in, un-DNAT on the way back), a
    /// lookup in the switch's own zone (`chk_lb_hairpin_reply`: no connection), the
    /// receiver's stateful stages (`ct_lb_mark`, `ct_commit` of `mark`), an output.
    /// Towards the backend the zones are ZN (A's), Z2, Z1 (B's); back, Z1, Z2, ZN.
    fn lb_steps(back: bool, mark: u32) -> Vec<PStep> {
        let nat = |z| PStep::Ct(CtAction::lookup(z).with_nat(Nat::Existing));
        let (first, last) = if back { (Z1, ZN) } else { (ZN, Z1) };
        vec![
            nat(first),
            PStep::Ct(CtAction::lookup(Z2)),
            nat(last),
            PStep::Commit(CtAction::commit(last).with_mark(mark, 0xff)),
            PStep::Out(Out {
                target: Target::Drop(DropReason::OvnPipeline),
                rewrite: Box::new([]),
                embedded: None,
            }),
        ]
    }

    /// Two trackers with a load balancer's connection A:40000 -> VIP:80, DNAT'd to
    /// B:8080 in ZN, and as translated in Z1, both committed with `mark`, handshake
    /// done.
    fn lb_trackers(mark: u32) -> [Conntrack; 2] {
        let to_b = NatRange {
            min: ip(B),
            max: ip(B),
            ports: Some((8080, 8080)),
        };
        let nat = CtAction::lookup(ZN).with_nat(Nat::Existing);
        [0, 1].map(|_| {
            let ct = Conntrack::new(Config::default()).unwrap();
            let syn = seg(A, 40000, VIP, 80, 0x02, 100, 0, 0);
            let lb = CtAction::commit(ZN)
                .with_nat(Nat::Dst(to_b))
                .with_mark(mark, 0xff);
            ct.execute(&syn, &lb, 0);
            let syn_b = seg(A, 40000, B, 8080, 0x02, 100, 0, 0);
            ct.execute(&syn_b, &CtAction::commit(Z1).with_mark(mark, 0xff), 0);
            let synack = seg(B, 8080, A, 40000, 0x12, 5000, 101, 0);
            ct.execute(&synack, &CtAction::lookup(Z1), 0);
            ct.execute(&synack, &nat, 0);
            ct.execute(&seg(A, 40000, VIP, 80, 0x10, 101, 5001, 0), &nat, 0);
            ct.execute(
                &seg(A, 40000, B, 8080, 0x10, 101, 5001, 0),
                &CtAction::lookup(Z1),
                0,
            );
            ct
        })
    }

    /// Each frame's decision (its results, all steps taken) one by one, learning the
    /// variants as a cache does: a frame whose results none had yet adds its own.
    fn learn(
        steps: &[PStep],
        ct: &Conntrack,
        pkts: &[Packet],
    ) -> (Vec<Vec<CtResult>>, Vec<Variant>) {
        let zones = Zones::default();
        let mut vs: Vec<Variant> = Vec::new();
        let mut out = Vec::new();
        for p in pkts {
            let mut live = LiveCt::new(ct, &zones, Some(*p), 5);
            let results = if vs.is_empty() {
                finish_live(steps, Vec::new(), &mut live)
            } else {
                match program::run(&vs, &mut live, None) {
                    Ok(v) => v.ct.clone(),
                    Err((done, _)) => finish_live(steps, done, &mut live),
                }
            };
            if !vs.iter().any(|v| v.ct == results) {
                vs.push(Variant {
                    ct: results.clone(),
                    steps: steps.to_vec(),
                    punts: 0,
                    dps: Box::new([]),
                    rel: None,
                    mcast: None,
                });
            }
            out.push(results);
        }
        (out, vs)
    }

    /// The results `done` (of the first lookups of `steps`, whose commits before the
    /// last of them ran too), then those of the rest of `steps`, run live: what the
    /// interpreter would run after a miss.
    fn finish_live(
        steps: &[PStep],
        mut done: Vec<CtResult>,
        live: &mut LiveCt<'_>,
    ) -> Vec<CtResult> {
        let mut taken = done.len();
        for s in steps {
            match s {
                PStep::Ct(_) if taken > 0 => taken -= 1,
                PStep::Ct(a) => done.push(live.step(a)),
                PStep::Commit(a) if taken == 0 => {
                    live.step(a);
                }
                _ => {}
            }
        }
        done
    }

    /// Each frame's decision stepped together through `vs` (all of `steps`' paths),
    /// and how many went together to the end.
    fn together_results(
        steps: &[PStep],
        vs: &[Variant],
        ct: &Conntrack,
        pkts: &[Packet],
    ) -> (Vec<Vec<CtResult>>, usize) {
        let zones = Zones::default();
        let t = step_together(vs, ct, (pkts, &Prepared::of(&pkts[0])), 5, &mut Vec::new());
        let out = (0..pkts.len())
            .map(|f| match t.place(f) {
                Place::Done(v) => v.ct.clone(),
                Place::Alone {
                    walk,
                    state,
                    answer,
                } => {
                    let mut live = LiveCt::new(ct, &zones, Some(pkts[f]), 5).resumed(state);
                    match finish_alone(*walk, answer.copied(), &mut live) {
                        Ok(v) => v.ct.clone(),
                        Err((done, _)) => finish_live(steps, done, &mut live),
                    }
                }
            })
            .collect();
        (out, t.n)
    }

    /// Segments of the load balancer's connection after the handshake, towards the
    /// VIP (or back from the backend): data, FIN, RST, out-of-window, a SYN.
    fn lb_segment(back: bool) -> impl Strategy<Value = Packet> {
        (
            prop::sample::select(vec![0x10u8, 0x18, 0x11, 0x04, 0x14, 0x02]),
            prop::sample::select(vec![0u32, 500, 1000, 1_000_000]),
            prop::sample::select(vec![0u32, 500]),
        )
            .prop_map(move |(f, off, len)| match back {
                false => seg(A, 40000, VIP, 80, f, 101 + off, 5001, len),
                true => seg(B, 8080, A, 40000, f, 5001 + off, 101, len),
            })
    }

    #[test]
    fn a_translated_flows_run_goes_together_and_is_translated_alike() {
        for back in [false, true] {
            let steps = lb_steps(back, 7);
            let [a, b] = lb_trackers(7);
            let pkts: Vec<_> = (0..8)
                .map(|i| match back {
                    false => seg(A, 40000, VIP, 80, 0x10, 101 + i * 100, 5001, 100),
                    true => seg(B, 8080, A, 40000, 0x10, 5001 + i * 100, 101, 100),
                })
                .collect();
            let (alone, vs) = learn(&steps, &a, &pkts);
            let (t, n) = together_results(&steps, &vs, &b, &pkts);
            assert_eq!(n, 8, "back {back}: all together");
            assert_eq!(alone, t);
            assert_eq!(dump(&a), dump(&b));
            // Translated in ZN: DNAT'd there first, or un-DNAT'd there last on the way
            // back from the VIP.
            let nat = t[0][if back { 2 } else { 0 }].nat.expect("translated");
            let want = if back { (ip(VIP), 80) } else { (ip(B), 8080) };
            let got = if back {
                (nat.packet.src, nat.packet.src_port)
            } else {
                (nat.packet.dst, nat.packet.dst_port)
            };
            assert_eq!(got, want);
        }
    }

    /// A floating IP's path on its gateway router (`vswitchd-fip`): a lookup that finds
    /// nothing (Z2), the router's `ct_dnat(B)` (a commit with DNAT, of a connection
    /// there: the translation it has), `ct_dnat` again in its zone (answered from the
    /// step before), a commit, an output.
    fn fip_steps() -> Vec<PStep> {
        let to_b = NatRange {
            min: ip(B),
            max: ip(B),
            ports: Some((8080, 8080)),
        };
        vec![
            PStep::Ct(CtAction::lookup(Z2).with_nat(Nat::Existing)),
            PStep::Ct(CtAction::commit(ZN).with_nat(Nat::Dst(to_b))),
            PStep::Ct(CtAction::lookup(ZN).with_nat(Nat::Existing)),
            PStep::Commit(CtAction::commit(ZN)),
            PStep::Out(Out {
                target: Target::Drop(DropReason::OvnPipeline),
                rewrite: Box::new([]),
                embedded: None,
            }),
        ]
    }

    #[test]
    fn a_floating_ips_run_goes_together_through_its_dnat_commit() {
        let steps = fip_steps();
        let [a, b] = lb_trackers(0);
        let pkts: Vec<_> = (0..8)
            .map(|i| seg(A, 40000, VIP, 80, 0x10, 101 + i * 100, 5001, 100))
            .collect();
        let (alone, vs) = learn(&steps, &a, &pkts);
        let (t, n) = together_results(&steps, &vs, &b, &pkts);
        assert_eq!(n, 8, "all together");
        assert_eq!(alone, t);
        assert_eq!(dump(&a), dump(&b));
        assert_eq!(t[0][2].nat.map(|n| n.packet.dst), Some(ip(B)), "DNAT'd");
    }

    /// Each frame's decision and the connections after, for `pkts` through `steps` on
    /// [`lb_trackers`] committed with `mark`: one frame at a time, then stepped
    /// together through the variants a cache learnt from the same frames on a third
    /// tracker.
    fn alone_and_together(
        steps: &[PStep],
        mark: u32,
        pkts: &[Packet],
    ) -> [(Vec<Vec<CtResult>>, Vec<conntrack::ConnEntry>); 2] {
        let [a, b] = lb_trackers(mark);
        let [c, _] = lb_trackers(mark);
        let (_, vs) = learn(steps, &c, pkts);
        let (alone, _) = learn(steps, &a, pkts);
        let (together, _) = together_results(steps, &vs, &b, pkts);
        [(alone, dump(&a)), (together, dump(&b))]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the segments of a floating IP's connection, each frame's decision
        /// and the connections are those of one frame at a time.
        #[test]
        fn a_floating_ips_run_decides_as_its_frames_one_by_one(
            mark in prop::sample::select(vec![0u32, 7]),
            pkts in prop::collection::vec(lb_segment(false), 1..16),
        ) {
            let [alone, together] = alone_and_together(&fip_steps(), mark, &pkts);
            prop_assert_eq!(alone, together);
        }

        /// Whatever the segments of a load balancer's connection (either way, with a
        /// mark the commit rewrites or not), each frame's decision and the
        /// connections are those of one frame at a time.
        #[test]
        fn a_translated_run_decides_as_its_frames_one_by_one(
            back in any::<bool>(),
            mark in prop::sample::select(vec![0u32, 7]),
            seed in prop::collection::vec(lb_segment(false), 1..16),
            seed_back in prop::collection::vec(lb_segment(true), 1..16),
        ) {
            let pkts = if back { seed_back } else { seed };
            let [alone, together] = alone_and_together(&lb_steps(back, 7), mark, &pkts);
            prop_assert_eq!(alone, together);
        }
    }
}
