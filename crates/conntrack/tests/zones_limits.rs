//! Zones, ct_mark/ct_label on commit, OVN's ct_next + ct_commit, and the
//! global and per-zone limits with their counters.

mod common;

use common::*;
use conntrack::{Config, Conntrack, CtAction, CtState, Refused};

#[test]
fn the_same_tuple_in_two_zones_is_two_connections() {
    let ct = tracker();
    let q = udp(A, 1000, B, 53);
    commit(&ct, &q, 1, 0);
    assert_eq!(lookup(&ct, &udp(B, 53, A, 1000), 1, 1).state, EST_RPL);
    // Zone 2 never saw it.
    assert_eq!(lookup(&ct, &udp(B, 53, A, 1000), 2, 1).state, NEW);
    commit(&ct, &q, 2, 2);
    assert_eq!((ct.zone_count(1), ct.zone_count(2), ct.len()), (1, 1, 2));
    assert_eq!(ct.zone_counts(), vec![(1, 1), (2, 1)]);
    assert_eq!(ct.flush(Some(1)), 1);
    // Zone 2's connection stays (new: no reply seen there yet); zone 1's
    // is gone.
    let r = lookup(&ct, &q, 2, 3);
    assert_eq!((r.state, r.has_connection()), (NEW, true));
    let r = lookup(&ct, &q, 1, 3);
    assert_eq!((r.state, r.has_connection()), (NEW, false));
}

#[test]
fn commit_writes_mark_and_label_under_their_masks() {
    let ct = tracker();
    let q = udp(A, 1000, B, 53);
    let act = CtAction::commit(7)
        .with_mark(0x1, 0x1)
        .with_label(0xab << 96, 0xff << 96);
    let r = ct.execute(&q, &act, 0);
    assert_eq!((r.mark, r.label), (1, 0xab << 96));
    // Later packets read them, in either direction.
    let r = lookup(&ct, &udp(B, 53, A, 1000), 7, 1);
    assert_eq!((r.mark, r.label), (1, 0xab << 96));
    // ct_commit { ct_mark.blocked = 1 } on an established connection;
    // other bits stay.
    let r = ct.execute(
        &q,
        &CtAction::commit(7).with_mark(0x2, 0x2).with_label(1, 0xf),
        2,
    );
    assert_eq!(r.state, EST);
    assert_eq!((r.mark, r.label), (3, 0xab << 96 | 1));
    // Writes without commit are ignored, as OVS allows them only in commit.
    let r = ct.execute(&q, &CtAction::lookup(7).with_mark(0, u32::MAX), 3);
    assert_eq!(r.mark, 3);
    assert_eq!(ct.dump(3, Some(7)).next().unwrap().mark, 3);
}

#[test]
fn ct_next_then_ct_commit_runs_the_state_machine_once() {
    let ct = tracker();
    handshake(&ct, 1, 0);
    // One data segment through ct_next then ct_commit in zone 1.
    let data = tcp(A, 40000, B, 80, ACK, 101, 5001, 100);
    let first = lookup(&ct, &data, 1, 1);
    assert_eq!(first.state, EST);
    let second = ct.execute_next(&data, &CtAction::commit(1).with_mark(4, 4), 1, &first);
    assert_eq!((second.state, second.mark), (EST, 4));
    // The next segment: a commit of what the connection holds answers the
    // lookup before it; one that changes the mark writes it.
    let next = tcp(A, 40000, B, 80, ACK, 201, 5001, 0);
    let first = lookup(&ct, &next, 1, 1);
    let kept = ct.execute_next(&next, &CtAction::commit(1).with_mark(4, 4), 1, &first);
    assert_eq!(kept, first);
    let cleared = ct.execute_next(&next, &CtAction::commit(1).with_mark(0, 4), 1, &first);
    assert_eq!((cleared.state, cleared.mark), (EST, 0));
    assert_eq!(ct.dump(1, Some(1)).next().unwrap().mark, 0);
    // Through another zone it is a step of its own.
    let other_zone = ct.execute_next(&data, &CtAction::lookup(2), 1, &second);
    assert_eq!(
        other_zone.invalid,
        Some(conntrack::InvalidReason::NotOpener)
    );
    // A new connection: lookup (new, nothing created), then commit.
    let q = udp(A, 9, B, 9);
    let r = lookup(&ct, &q, 1, 2);
    let r = ct.execute_next(&q, &CtAction::commit(1), 2, &r);
    assert!(r.has_connection());
    assert_eq!(r.state, NEW);
    // An invalid packet stays invalid and is counted once.
    let bad = tcp(A, 1, B, 2, ACK, 1, 1, 0);
    let r = lookup(&ct, &bad, 1, 3);
    let r = ct.execute_next(&bad, &CtAction::commit(1), 3, &r);
    assert!(r.state.contains(CtState::INV));
    assert_eq!(ct.stats().invalid_total(), 2);
}

#[test]
fn zone_limit_refuses_only_its_zone() {
    let ct = tracker();
    ct.set_zone_limit(10, Some(2));
    for port in 1..=2 {
        let r = commit(&ct, &udp(A, port, B, 53), 10, 0);
        assert_eq!(r.refused, None);
    }
    let r = commit(&ct, &udp(A, 3, B, 53), 10, 0);
    assert_eq!((r.state, r.refused), (NEW, Some(Refused::ZoneFull)));
    assert!(!r.has_connection());
    // The refused connection does not exist: its next packet is new again.
    assert_eq!(lookup(&ct, &udp(A, 3, B, 53), 10, 1).state, NEW);
    // Zone 11 is not affected, and zone 10's connections still work.
    assert_eq!(commit(&ct, &udp(A, 3, B, 53), 11, 1).refused, None);
    assert_eq!(lookup(&ct, &udp(B, 53, A, 1), 10, 1).state, EST_RPL);
    assert_eq!(ct.stats().zone_full, 1);
    // Raising the limit lets it in.
    ct.set_zone_limit(10, Some(3));
    assert_eq!(commit(&ct, &udp(A, 3, B, 53), 10, 1).refused, None);
}

#[test]
fn default_zone_limit_and_override() {
    let ct = Conntrack::new(Config {
        default_zone_limit: Some(1),
        ..Config::default()
    })
    .unwrap();
    ct.set_zone_limit(5, None);
    ct.set_zone_limit(6, Some(u32::MAX));
    assert_eq!(ct.zone_limit(5), Some(1));
    assert_eq!(ct.zone_limit(7), Some(1));
    for zone in [5, 6, 7] {
        assert_eq!(commit(&ct, &udp(A, 1, B, 2), zone, 0).refused, None);
    }
    assert_eq!(
        commit(&ct, &udp(A, 2, B, 2), 5, 0).refused,
        Some(Refused::ZoneFull)
    );
    assert_eq!(commit(&ct, &udp(A, 2, B, 2), 6, 0).refused, None);
    ct.set_default_zone_limit(None);
    assert_eq!(commit(&ct, &udp(A, 2, B, 2), 5, 0).refused, None);
}

#[test]
fn global_limit_refuses_and_counts() {
    let ct = Conntrack::new(Config {
        max_connections: 3,
        ..Config::default()
    })
    .unwrap();
    for port in 1..=3 {
        assert_eq!(commit(&ct, &udp(A, port, B, 2), port, 0).refused, None);
    }
    let r = commit(&ct, &udp(A, 4, B, 2), 4, 0);
    assert_eq!(r.refused, Some(Refused::TableFull));
    assert_eq!((ct.stats().table_full, ct.zone_count(4)), (1, 0));
    // Expiry frees room.
    ct.sweep_all(60_000);
    assert!(ct.is_empty());
    assert_eq!(commit(&ct, &udp(A, 4, B, 2), 4, 60_000).refused, None);
}

#[test]
fn a_lookup_in_a_zone_that_holds_nothing_answers_as_with_the_table() {
    // An empty zone's lookups are answered without the table (OVN's hairpin
    // check); each answer must equal the table's, before and after the zone
    // holds a connection, and an invalid packet is still counted.
    let ct = tracker();
    let syn = tcp(A, 40000, B, 80, SYN, 100, 0, 0);
    let bare_ack = tcp(A, 40001, B, 80, ACK, 100, 0, 0);
    let invalid_before = ct.stats().invalid.iter().sum::<u64>();
    let r = lookup(&ct, &syn, 9, 0);
    assert_eq!((r.state, r.has_connection()), (NEW, false));
    assert_eq!(lookup(&ct, &udp(A, 1000, B, 53), 9, 0).state, NEW);
    assert_eq!(lookup(&ct, &bare_ack, 9, 0).state, INV);
    assert_eq!(ct.stats().invalid.iter().sum::<u64>(), invalid_before + 1);
    assert_eq!(
        (ct.zone_count(9), ct.len()),
        (0, 0),
        "a lookup creates nothing"
    );
    // Once the zone holds a connection, its packets find it (both ways).
    commit(&ct, &syn, 9, 1);
    let r = lookup(&ct, &syn, 9, 2);
    assert_eq!((r.state, r.has_connection()), (NEW, true));
    let synack = tcp(B, 80, A, 40000, SYN | ACK, 5000, 101, 0);
    assert_eq!(lookup(&ct, &synack, 9, 2).state, EST_RPL);
    // A run in an empty zone is answered packet by packet, up to what `keep` takes.
    let pkts = [syn, tcp(A, 40000, B, 80, SYN, 100, 0, 0)];
    let prep = conntrack::Prepared::of(&pkts[0]);
    let mut seen = Vec::new();
    let n = ct.execute_run(&pkts, &prep, &CtAction::lookup(10), 2, |r, nat| {
        seen.push((r.state, r.has_connection(), nat.is_some()));
        true
    });
    assert_eq!((n, seen), (2, vec![(NEW, false, false); 2]));
    // Emptied again by a flush: answered without the table again.
    assert_eq!(ct.flush(Some(9)), 1);
    let r = lookup(&ct, &syn, 9, 3);
    assert_eq!((r.state, r.has_connection()), (NEW, false));
}
