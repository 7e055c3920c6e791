//! `Conntrack::execute_run`: a run of one connection's packets (or of no
//! connection's), stepped under one lookup, answers (NAT included) and leaves
//! the table exactly as the packets stepped one by one do; `keep` stops it
//! where it says; a commit runs only on a connection found.

mod common;

use common::*;
use conntrack::{Conntrack, CtAction, CtResult, Nat, NatRange, NatResult, Packet, Prepared};
use proptest::prelude::*;

const Z: u16 = 3;

/// A step's answer and what NAT did.
type Answer = (CtResult, Option<NatResult>);

/// Each packet's own step, in order.
fn one_by_one(ct: &Conntrack, pkts: &[Packet], act: &CtAction, now: u64) -> Vec<Answer> {
    pkts.iter()
        .map(|p| {
            let mut nat = None;
            let r = ct.execute_nat(p, &Prepared::of(p), act, now, &mut nat);
            (r, nat)
        })
        .collect()
}

/// The run, every answer kept (it takes at least the first packet); the packets it
/// did not run then take their own steps, as a caller's would.
fn as_run(ct: &Conntrack, pkts: &[Packet], act: &CtAction, now: u64) -> Vec<Answer> {
    let mut out = Vec::new();
    let n = ct.execute_run(pkts, &Prepared::of(&pkts[0]), act, now, |r, nat| {
        out.push((*r, *nat));
        true
    });
    assert_eq!(n, out.len());
    assert!(n >= 1, "the run took no packet");
    out.extend(one_by_one(ct, &pkts[n..], act, now));
    out
}

/// The answers alone.
fn states(a: &[Answer]) -> Vec<CtResult> {
    a.iter().map(|a| a.0).collect()
}

fn dump(ct: &Conntrack) -> Vec<conntrack::ConnEntry> {
    ct.dump(5, None).collect()
}

/// Segments A → B after the handshake: data, duplicates, out-of-window
/// ones, a FIN or a RST among them (what window tracking must see in order).
fn segment() -> impl Strategy<Value = Packet> {
    (
        prop::sample::select(vec![ACK, ACK | PSH, ACK | FIN, RST, ACK | RST, SYN]),
        prop::sample::select(vec![101u32, 601, 1101, 90, 1_000_000]),
        prop::sample::select(vec![0u32, 500, 1400]),
    )
        .prop_map(|(flags, seq, len)| tcp(A, 40000, B, 80, flags, seq, 5001, len))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A TCP run after a handshake, as lookups: the same answers, the same
    /// connection (state, window, expiry) as one step per segment.
    #[test]
    fn a_tcp_run_answers_as_its_segments_one_by_one(
        pkts in prop::collection::vec(segment(), 1..24),
    ) {
        let (a, b) = (tracker(), tracker());
        handshake(&a, Z, 0);
        handshake(&b, Z, 0);
        let act = CtAction::lookup(Z);
        prop_assert_eq!(one_by_one(&a, &pkts, &act, 5), as_run(&b, &pkts, &act, 5));
        prop_assert_eq!(dump(&a), dump(&b));
        // Not vacuous: the connection is there unless a RST closed it.
        let rst = pkts.iter().any(|p| matches!(p.l4, conntrack::L4::Tcp(t) if t.flags.contains(RST)));
        prop_assert!(rst || dump(&b).len() == 1);
    }

    /// A load balancer's connection (A → VIP:80 DNAT'd to B:8080, committed with
    /// its first SYN): runs of either direction, as `ct(nat)` lookups (the reply
    /// found through its alias), answer and translate as one step per segment.
    #[test]
    fn a_translated_run_answers_and_translates_as_its_segments_one_by_one(
        pkts in prop::collection::vec(segment(), 1..16),
        reply in any::<bool>(),
    ) {
        let (a, b) = (tracker(), tracker());
        dnat_handshake(&a);
        dnat_handshake(&b);
        // The reply's segments come from the backend, addresses and ports swapped.
        let pkts: Vec<Packet> = pkts.iter().map(|p| if reply { from_backend(p) } else { to_vip(p) }).collect();
        let act = CtAction::lookup(Z).with_nat(Nat::Existing);
        let run = as_run(&b, &pkts, &act, 5);
        prop_assert_eq!(one_by_one(&a, &pkts, &act, 5), run.clone());
        prop_assert_eq!(dump(&a), dump(&b));
        // Not vacuous: the first segment was translated, each way.
        let want = if reply { ep(VIP, 80, A, 40000) } else { ep(A, 40000, B, 8080) };
        prop_assert!(run[0].0.state.contains(conntrack::CtState::INV)
            || run[0].1.map(|n| n.packet) == Some(want));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// UDP, ICMP echo and other protocols (whose runs take the first packet's step
    /// for all: their state is reached at the first packet): from every state a
    /// connection can be in (just created, seen once more, answered), a run either
    /// way, as lookups or commits, with or without a load balancer's DNAT, answers
    /// and leaves the connection (state, expiry) as one step per packet.
    #[test]
    fn a_run_of_another_protocol_answers_as_its_packets_one_by_one(
        kind in 0u8..3,
        dnat: bool,
        before in prop::collection::vec(any::<bool>(), 0..3),
        reply: bool,
        commit: bool,
        n in 1usize..12,
    ) {
        let (a, b) = (tracker(), tracker());
        // Forward (A → VIP, or A → B) and the reply (B → A), as `kind` carries them.
        let pkt = |reply: bool| {
            let (src, dst) = if reply { (B, A) } else { (A, if dnat { VIP } else { B }) };
            let mut p = match kind {
                0 => udp(src, 5000, dst, 53),
                1 => echo(src, dst, 7, !reply),
                _ => other(src, dst, 47),
            };
            if reply && kind == 0 {
                p.l4 = conntrack::L4::Udp { src_port: if dnat { 5353 } else { 53 }, dst_port: 5000 };
            }
            p
        };
        let open = if dnat {
            let to = NatRange { min: ip(B), max: ip(B), ports: (kind == 0).then_some((5353, 5353)) };
            CtAction::commit(Z).with_nat(Nat::Dst(to))
        } else {
            CtAction::commit(Z)
        };
        for ct in [&a, &b] {
            one_by_one(ct, &[pkt(false)], &open, 0);
            for &r in &before {
                one_by_one(ct, &[pkt(r)], &CtAction::lookup(Z).with_nat(Nat::Existing), 1);
            }
        }
        let act = if commit { CtAction::commit(Z) } else { CtAction::lookup(Z) };
        let act = act.with_nat(Nat::Existing);
        let pkts = vec![pkt(reply); n];
        let run = as_run(&b, &pkts, &act, 5);
        prop_assert_eq!(one_by_one(&a, &pkts, &act, 5), run.clone());
        prop_assert_eq!(dump(&a), dump(&b));
        // Not vacuous: the connection was found, and translated when DNAT'd.
        prop_assert!(run[0].0.state.contains(conntrack::CtState::TRK));
        prop_assert!(!run[0].0.state.contains(NEW) || !reply);
        prop_assert!(!dnat || run[0].1.is_some(), "{:?}", run[0]);
    }
}

/// The VIP of [`dnat_handshake`]'s load balancer.
const VIP: &str = "10.0.0.100";

/// `p` (A:40000 → B:80) sent to the VIP instead.
fn to_vip(p: &Packet) -> Packet {
    let mut q = *p;
    q.dst = ip(VIP);
    q
}

/// `p` (A:40000 → B:80) as the backend's answer: B:8080 → A:40000.
fn from_backend(p: &Packet) -> Packet {
    let mut q = *p;
    (q.src, q.dst) = (ip(B), ip(A));
    if let conntrack::L4::Tcp(t) = &mut q.l4 {
        (t.src_port, t.dst_port) = (8080, 40000);
        (t.seq, t.ack) = (t.seq + 4900, t.ack - 4900);
    }
    q
}

/// A handshake A:40000 → VIP:80, DNAT'd to B:8080 by the SYN's commit.
fn dnat_handshake(ct: &Conntrack) {
    let vip = NatRange {
        min: ip(B),
        max: ip(B),
        ports: Some((8080, 8080)),
    };
    let syn = to_vip(&tcp(A, 40000, B, 80, SYN, 100, 0, 0));
    let act = CtAction::commit(Z).with_nat(Nat::Dst(vip));
    assert_eq!(
        one_by_one(ct, &[syn], &act, 0)[0].0.state,
        NEW | conntrack::CtState::DNAT
    );
    let synack = tcp(B, 8080, A, 40000, SYN | ACK, 5000, 101, 0);
    let nat = CtAction::lookup(Z).with_nat(Nat::Existing);
    assert!(one_by_one(ct, &[synack], &nat, 0)[0]
        .0
        .state
        .contains(EST_RPL));
    let ack = to_vip(&tcp(A, 40000, B, 80, ACK, 101, 5001, 0));
    assert!(one_by_one(ct, &[ack], &nat, 0)[0].0.state.contains(EST));
}

#[test]
fn without_a_connection_a_lookup_answers_each_packet_and_creates_nothing() {
    let (ct, alone) = (tracker(), tracker());
    // A SYN may open a connection (new), a bare ACK may not (inv, counted).
    let pkts = [
        tcp(A, 40000, B, 80, SYN, 100, 0, 0),
        tcp(A, 40000, B, 80, ACK, 101, 5001, 0),
        tcp(A, 40000, B, 80, SYN, 100, 0, 0),
    ];
    let act = CtAction::lookup(Z);
    let run = as_run(&ct, &pkts, &act, 0);
    assert_eq!(run, one_by_one(&alone, &pkts, &act, 0));
    assert_eq!(
        states(&run).iter().map(|r| r.state).collect::<Vec<_>>(),
        [NEW, INV, NEW]
    );
    assert!(ct.is_empty());
    assert_eq!(ct.stats(), alone.stats());
}

#[test]
fn a_commit_runs_only_on_a_connection_found() {
    let ct = tracker();
    let pkts = vec![udp(A, 5000, B, 53); 4];
    let prep = Prepared::of(&pkts[0]);
    let never = |_: &CtResult, _: &Option<NatResult>| -> bool { panic!("no packet runs") };
    let marked = CtAction::commit(Z).with_mark(7, 0xff);
    assert_eq!(ct.execute_run(&pkts, &prep, &marked, 0, never), 0);
    assert!(ct.is_empty());
    // Known now: a commit (its mark written by the first) and a lookup each run all
    // four, as four steps would.
    let alone = tracker();
    commit(&ct, &pkts[0], Z, 0);
    commit(&alone, &pkts[0], Z, 0);
    for act in [marked, CtAction::lookup(Z)] {
        assert_eq!(
            as_run(&ct, &pkts, &act, 1),
            one_by_one(&alone, &pkts, &act, 1)
        );
        assert_eq!(dump(&ct), dump(&alone));
    }
    assert_eq!(dump(&ct)[0].mark, 7);
}

#[test]
fn a_syn_reopening_a_closed_connection_ends_the_run_before_it() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    lookup(&ct, &tcp(A, 40000, B, 80, FIN | ACK, 101, 5001, 0), Z, 1);
    lookup(&ct, &tcp(B, 80, A, 40000, FIN | ACK, 5001, 102, 0), Z, 1);
    // The last ACK of the close, then a SYN reusing the port: the run takes the
    // ACK only; the SYN's own step ends the old connection.
    let pkts = [
        tcp(A, 40000, B, 80, ACK, 102, 5002, 0),
        tcp(A, 40000, B, 80, SYN, 90_000, 0, 0),
    ];
    let n = ct.execute_run(
        &pkts,
        &Prepared::of(&pkts[0]),
        &CtAction::lookup(Z),
        2,
        |r, _| {
            assert_eq!(r.state, EST);
            true
        },
    );
    assert_eq!(n, 1);
    assert_eq!(ct.stats().reopened, 1);
    assert_eq!(commit(&ct, &pkts[1], Z, 2).state, NEW);
    assert_eq!(ct.len(), 1);
}

#[test]
fn keep_stops_the_run_after_the_packet_it_refuses() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    // Data, then a RST, then data the RST makes invalid: the run stops at the RST.
    let pkts = [
        tcp(A, 40000, B, 80, ACK | PSH, 101, 5001, 500),
        tcp(A, 40000, B, 80, RST, 601, 0, 0),
        tcp(A, 40000, B, 80, ACK | PSH, 601, 5001, 500),
    ];
    let mut seen = Vec::new();
    let n = ct.execute_run(
        &pkts,
        &Prepared::of(&pkts[0]),
        &CtAction::lookup(Z),
        1,
        |r, _| {
            seen.push(*r);
            seen.len() < 2
        },
    );
    assert_eq!(n, 2);
    assert_eq!(seen.len(), 2);
    // The third did not run: its own step now meets the reset connection.
    let third = lookup(&ct, &pkts[2], Z, 1);
    let fresh = tracker();
    handshake(&fresh, Z, 0);
    let alone = one_by_one(&fresh, &pkts, &CtAction::lookup(Z), 1);
    assert_eq!(seen, states(&alone[..2]));
    assert_eq!(third, alone[2].0);
}

#[test]
fn same_lookup_ignores_tcp_sequence_and_length_but_not_ports_or_direction() {
    let a = tcp(A, 40000, B, 80, ACK, 101, 5001, 500);
    assert!(a.same_lookup(&tcp(A, 40000, B, 80, ACK | FIN, 9, 9, 0)));
    assert!(!a.same_lookup(&tcp(A, 40001, B, 80, ACK, 101, 5001, 500)));
    assert!(!a.same_lookup(&tcp(B, 80, A, 40000, ACK, 101, 5001, 500)));
    assert!(!a.same_lookup(&udp(A, 40000, B, 80)));
    let mut frag = a;
    frag.fragment = true;
    assert!(!frag.same_lookup(&frag));
    assert!(echo(A, B, 7, true).same_lookup(&echo(A, B, 7, true)));
    assert!(!echo(A, B, 7, true).same_lookup(&echo(A, B, 8, true)));
}
