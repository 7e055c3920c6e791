//! `Conntrack::execute_run`: a run of one known connection's packets,
//! stepped under one lookup, answers and leaves the table exactly as the
//! packets stepped one by one do; `keep` stops it where it says; what may
//! create a connection runs nothing.

mod common;

use common::*;
use conntrack::{Conntrack, CtAction, CtResult, Packet, Prepared};
use proptest::prelude::*;

const Z: u16 = 3;

/// Each packet's own step, in order.
fn one_by_one(ct: &Conntrack, pkts: &[Packet], act: &CtAction, now: u64) -> Vec<CtResult> {
    pkts.iter().map(|p| ct.execute(p, act, now)).collect()
}

/// The run, every answer kept; the packets it did not run then take their own
/// steps, as a caller's would.
fn as_run(ct: &Conntrack, pkts: &[Packet], act: &CtAction, now: u64) -> Vec<CtResult> {
    let mut out = Vec::new();
    let n = ct.execute_run(pkts, &Prepared::of(&pkts[0]), act, now, |r| {
        out.push(*r);
        true
    });
    assert_eq!(n, out.len());
    out.extend(one_by_one(ct, &pkts[n..], act, now));
    out
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
}

#[test]
fn without_a_connection_or_with_a_commit_nothing_runs() {
    let ct = tracker();
    let pkts = vec![udp(A, 5000, B, 53); 4];
    let prep = Prepared::of(&pkts[0]);
    let never = |_: &CtResult| -> bool { panic!("no packet runs") };
    assert_eq!(
        ct.execute_run(&pkts, &prep, &CtAction::lookup(Z), 0, never),
        0
    );
    assert!(ct.is_empty());
    commit(&ct, &pkts[0], Z, 0);
    let before = dump(&ct);
    assert_eq!(
        ct.execute_run(&pkts, &prep, &CtAction::commit(Z), 0, never),
        0
    );
    assert_eq!(dump(&ct), before);
    // Known now: a lookup runs all four, as four lookups would.
    let alone = tracker();
    commit(&alone, &pkts[0], Z, 0);
    assert_eq!(
        as_run(&ct, &pkts, &CtAction::lookup(Z), 1),
        one_by_one(&alone, &pkts, &CtAction::lookup(Z), 1)
    );
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
        |r| {
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
        |r| {
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
    assert_eq!(seen, alone[..2]);
    assert_eq!(third, alone[2]);
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
