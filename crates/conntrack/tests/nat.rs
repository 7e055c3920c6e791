//! NAT (Open vSwitch's `ct(nat)`, `ct(commit, nat(src=…))`,
//! `ct(commit, nat(dst=…))`): set-up, translation each way, port
//! preservation and collisions, exhaustion, translated-once, aliases gone
//! with their connections, zones, IPv6, and two threads racing.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use conntrack::packet::icmp;
use conntrack::{
    Config, Conntrack, CtAction, CtResult, CtState, Endpoints, Nat, NatRange, NatResult, Packet,
    Prepared, Refused, Tuple, L4,
};

const Z: u16 = 3;
const SNAT: CtState = CtState::SNAT;
const DNAT: CtState = CtState::DNAT;
/// The server clients talk to, and the address SNAT gives them.
const S: &str = "192.0.2.1";
const X: &str = "203.0.113.1";

fn range(min: &str, max: &str, ports: Option<(u16, u16)>) -> NatRange {
    NatRange {
        min: ip(min),
        max: ip(max),
        ports,
    }
}

fn snat_to(addr: &str) -> Nat {
    Nat::Src(range(addr, addr, None))
}

/// A step's answer and what NAT did ([`Conntrack::execute_nat`]).
type Answer = (CtResult, Option<NatResult>);

fn step(ct: &Conntrack, p: &Packet, act: &CtAction, now: u64) -> Answer {
    let mut nat = None;
    let r = ct.execute_nat(p, &Prepared::of(p), act, now, &mut nat);
    (r, nat)
}

/// [`Conntrack::execute_next_nat`] after `prev`.
fn step_next(ct: &Conntrack, p: &Packet, act: &CtAction, now: u64, prev: Answer) -> Answer {
    let (prev, mut nat) = prev;
    let r = ct.execute_next_nat(p, &Prepared::of(p), act, now, &prev, &mut nat);
    (r, nat)
}

fn commit_nat(ct: &Conntrack, p: &Packet, nat: Nat, now: u64) -> Answer {
    step(ct, p, &CtAction::commit(Z).with_nat(nat), now)
}

/// `ct(zone=Z, nat)`.
fn nat_step(ct: &Conntrack, p: &Packet, now: u64) -> Answer {
    step(ct, p, &CtAction::lookup(Z).with_nat(Nat::Existing), now)
}

/// `ct(zone=Z)`, with what it reports of NAT.
fn lookup_nat(ct: &Conntrack, p: &Packet, now: u64) -> Answer {
    step(ct, p, &CtAction::lookup(Z), now)
}

/// The packet the caller writes after a step: `p` with `e`'s endpoints.
fn rewritten(p: &Packet, e: Endpoints) -> Packet {
    let mut out = *p;
    (out.src, out.dst) = (e.src, e.dst);
    match &mut out.l4 {
        L4::Tcp(t) => (t.src_port, t.dst_port) = (e.src_port, e.dst_port),
        L4::Udp { src_port, dst_port } => (*src_port, *dst_port) = (e.src_port, e.dst_port),
        _ => {}
    }
    out
}

/// The translated port the commit of `p` gave its source.
fn snat_port(nat: Option<NatResult>) -> u16 {
    nat.expect("translated").packet.src_port
}

#[test]
fn snat_tcp_handshake_data_and_fin_both_ways() {
    let ct = tracker();
    let syn = tcp(A, 40000, S, 80, SYN, 100, 0, 0);
    let (r, n) = commit_nat(&ct, &syn, snat_to(X), 0);
    assert_eq!(r.state, NEW | SNAT);
    let nat = n.unwrap();
    // Port preserved (RFC 4787 §4.1), source translated.
    assert_eq!(nat.packet, ep(X, 40000, S, 80));
    assert_eq!(nat.original, ep(A, 40000, S, 80));
    assert_eq!(ct.len(), 1);

    // Each packet of the trace: (packet as sent, endpoints on the other side, state).
    let trace = [
        (
            tcp(S, 80, X, 40000, SYN | ACK, 5000, 101, 0),
            ep(S, 80, A, 40000),
            EST_RPL,
        ),
        (
            tcp(A, 40000, S, 80, ACK, 101, 5001, 0),
            ep(X, 40000, S, 80),
            EST,
        ),
        (
            tcp(A, 40000, S, 80, ACK | PSH, 101, 5001, 500),
            ep(X, 40000, S, 80),
            EST,
        ),
        (
            tcp(S, 80, X, 40000, ACK | PSH, 5001, 601, 1000),
            ep(S, 80, A, 40000),
            EST_RPL,
        ),
        (
            tcp(A, 40000, S, 80, FIN | ACK, 601, 6001, 0),
            ep(X, 40000, S, 80),
            EST,
        ),
        (
            tcp(S, 80, X, 40000, FIN | ACK, 6001, 602, 0),
            ep(S, 80, A, 40000),
            EST_RPL,
        ),
        (
            tcp(A, 40000, S, 80, ACK, 602, 6002, 0),
            ep(X, 40000, S, 80),
            EST,
        ),
    ];
    for (i, (p, after, state)) in trace.into_iter().enumerate() {
        let (r, n) = nat_step(&ct, &p, 1 + i as u64);
        assert_eq!(
            r.state,
            state
                | if state.contains(CtState::RPL) {
                    DNAT
                } else {
                    SNAT
                },
            "packet {i}"
        );
        let nat = n.unwrap();
        assert_eq!(nat.packet, after, "packet {i}");
        assert_eq!(nat.original, ep(A, 40000, S, 80));
    }
    let e = ct.dump(10, None).next().unwrap();
    assert_eq!(e.orig, Tuple::ports(ip(A), ip(S), 6, 40000, 80));
    assert_eq!(e.reply, Tuple::ports(ip(S), ip(X), 6, 80, 40000));
    assert_eq!(
        e.state,
        conntrack::ProtoState::Tcp {
            orig: conntrack::TcpState::FinWait2,
            reply: conntrack::TcpState::FinWait2
        }
    );
    assert_eq!((ct.len(), ct.dump(10, None).count()), (1, 1));
}

#[test]
fn dnat_udp_both_ways() {
    let ct = tracker();
    let (vip, backend) = ("198.51.100.10", "10.0.0.5");
    let q = udp(A, 5353, vip, 53);
    let (r, n) = commit_nat(&ct, &q, Nat::Dst(range(backend, backend, None)), 0);
    assert_eq!(r.state, NEW | DNAT);
    assert_eq!(n.unwrap().packet, ep(A, 5353, backend, 53));
    let (r, n) = nat_step(&ct, &udp(backend, 53, A, 5353), 1);
    assert_eq!(r.state, EST_RPL | SNAT);
    assert_eq!(n.unwrap().packet, ep(vip, 53, A, 5353));
    assert_eq!(n.unwrap().original, ep(A, 5353, vip, 53));
    let (r, n) = nat_step(&ct, &q, 2);
    assert_eq!(r.state, EST | DNAT);
    assert_eq!(n.unwrap().packet, ep(A, 5353, backend, 53));
    let e = ct.dump(2, None).next().unwrap();
    assert_eq!(e.reply, Tuple::ports(ip(backend), ip(A), 17, 53, 5353));
}

#[test]
fn colliding_source_ports_get_different_ports() {
    let ct = tracker();
    let a1 = commit_nat(&ct, &udp(A, 5000, S, 53), snat_to(X), 0);
    let a2 = commit_nat(&ct, &udp(B, 5000, S, 53), snat_to(X), 0);
    assert_eq!(snat_port(a1.1), 5000, "the first keeps its port");
    let p2 = snat_port(a2.1);
    assert!(p2 != 5000 && p2 >= 1024, "{p2}");
    // Each reply goes back to its own client.
    let back = |port| nat_step(&ct, &udp(S, 53, X, port), 1).1.unwrap().packet;
    assert_eq!(back(5000), ep(S, 53, A, 5000));
    assert_eq!(back(p2), ep(S, 53, B, 5000));
    assert_eq!(ct.len(), 2);
}

#[test]
fn a_port_range_is_used_and_exhausted() {
    let ct = tracker();
    let nat = Nat::Src(range(X, X, Some((1000, 1001))));
    let mut ports = Vec::new();
    for (i, client) in ["10.0.0.1", "10.0.0.2"].into_iter().enumerate() {
        let (r, n) = commit_nat(&ct, &udp(client, 5000 + i as u16, S, 53), nat, 0);
        assert_eq!(r.state, NEW | SNAT);
        ports.push(snat_port(n));
    }
    ports.sort();
    assert_eq!(ports, [1000, 1001]);
    let (r, n) = commit_nat(&ct, &udp("10.0.0.3", 5000, S, 53), nat, 0);
    assert_eq!(r.state, NEW, "not translated");
    assert_eq!(
        (r.refused, n, r.has_connection()),
        (Some(Refused::NatExhausted), None, false)
    );
    assert_eq!(ct.stats().nat_exhausted, 1);
    assert_eq!((ct.len(), ct.zone_count(Z), ct.stats().created), (2, 2, 2));
    // A second address makes room.
    let wider = Nat::Src(range(X, "203.0.113.2", Some((1000, 1001))));
    let (_, n) = commit_nat(&ct, &udp("10.0.0.3", 5000, S, 53), wider, 0);
    assert_eq!(n.unwrap().packet.src, ip("203.0.113.2"));
}

#[test]
fn ports_are_preserved_unless_they_collide_and_dnat_does_not_move_them() {
    let ct = tracker();
    // A real host already uses X:7000 → S:53: SNAT of A:7000 must move.
    commit(&ct, &udp(X, 7000, S, 53), Z, 0);
    let (_, n) = commit_nat(&ct, &udp(A, 7000, S, 53), snat_to(X), 0);
    assert_ne!(snat_port(n), 7000);
    // DNAT without ports keeps the port; a collision exhausts it.
    let dnat = Nat::Dst(range(S, S, None));
    let (r, _) = commit_nat(&ct, &udp(X, 7000, "198.51.100.10", 53), dnat, 0);
    assert_eq!(r.refused, Some(Refused::NatExhausted));
    let (_, n) = commit_nat(&ct, &udp(X, 7001, "198.51.100.10", 53), dnat, 0);
    assert_eq!(n.unwrap().packet, ep(X, 7001, S, 53));
}

#[test]
fn a_translation_to_itself_has_no_alias() {
    let ct = tracker();
    let (r, n) = commit_nat(&ct, &udp(A, 5000, S, 53), snat_to(A), 0);
    assert_eq!(r.state, NEW | SNAT);
    assert_eq!(n.unwrap().packet, ep(A, 5000, S, 53));
    let (r, n) = nat_step(&ct, &udp(S, 53, A, 5000), 1);
    assert_eq!(r.state, EST_RPL | DNAT);
    assert_eq!(n.unwrap().packet, ep(S, 53, A, 5000));
    let e = ct.dump(1, None).next().unwrap();
    assert_eq!(e.reply, Tuple::ports(ip(S), ip(A), 17, 53, 5000));
    assert_eq!(ct.flush(None), 1);
    assert_eq!(lookup(&ct, &udp(S, 53, A, 5000), Z, 2).state, NEW);
}

#[test]
fn lookups_without_nat_report_and_do_not_translate() {
    let ct = tracker();
    commit_nat(&ct, &udp(A, 5000, S, 53), snat_to(X), 0);
    // The translated reply, looked up without nat: found, not translated.
    let reply = udp(S, 53, X, 5000);
    let (r, n) = lookup_nat(&ct, &reply, 1);
    assert_eq!(r.state, EST_RPL);
    let nat = n.unwrap();
    assert_eq!(nat.packet, ep(S, 53, X, 5000));
    assert_eq!(nat.original, ep(A, 5000, S, 53));
    let (r, n) = lookup_nat(&ct, &udp(A, 5000, S, 53), 1);
    assert_eq!(r.state, EST);
    assert_eq!(n.unwrap().packet, ep(A, 5000, S, 53));
    // A connection without NAT reports none.
    let (_, n) = step(&ct, &udp(B, 1, S, 2), &CtAction::commit(Z), 1);
    assert_eq!(n, None);
    let (r, n) = nat_step(&ct, &udp(B, 1, S, 2), 1);
    assert_eq!((r.state, n), (NEW, None));
}

#[test]
fn a_packet_is_translated_once_in_a_zone() {
    let ct = tracker();
    let out = udp(A, 5000, S, 53);
    commit_nat(&ct, &out, snat_to(X), 0);
    commit_nat(&ct, &udp(S, 53, X, 5000), Nat::Existing, 0);
    // Original direction: translated, then the translated packet again.
    let (_, n) = nat_step(&ct, &out, 1);
    let once = rewritten(&out, n.unwrap().packet);
    assert_eq!(once, udp(X, 5000, S, 53));
    let (r, n) = nat_step(&ct, &once, 1);
    assert_eq!(r.state, EST, "found through the alias, not translated");
    assert_eq!(n.unwrap().packet, ep(X, 5000, S, 53));
    // Reply direction: un-NAT'd, then the un-NAT'd packet again.
    let back = udp(S, 53, X, 5000);
    let (r, n) = nat_step(&ct, &back, 2);
    assert_eq!(r.state, EST_RPL | DNAT);
    let once = rewritten(&back, n.unwrap().packet);
    assert_eq!(once, udp(S, 53, A, 5000));
    let (r, n) = nat_step(&ct, &once, 2);
    assert_eq!(r.state, EST_RPL);
    assert_eq!(n.unwrap().packet, ep(S, 53, A, 5000));
    // A commit with nat(src=…) of an existing connection changes nothing.
    let (_, n) = commit_nat(&ct, &out, snat_to("203.0.113.99"), 3);
    assert_eq!(n.unwrap().packet, ep(X, 5000, S, 53));
    assert_eq!(ct.len(), 1);
}

#[test]
fn execute_next_takes_the_translated_packet() {
    let ct = tracker();
    let out = udp(A, 5000, S, 53);
    let first = commit_nat(&ct, &out, snat_to(X), 0);
    let (r, n) = first;
    let translated = rewritten(&out, n.unwrap().packet);
    let mark = CtAction::commit(Z).with_mark(7, 0xff);
    let (r2, n2) = step_next(&ct, &translated, &mark, 0, first);
    assert_eq!((r2.mark, r2.state, n2), (7, r.state, n));
    let r = lookup(&ct, &udp(S, 53, X, 5000), Z, 1);
    assert_eq!((r.mark, r.state), (7, EST_RPL));
    // The reply, un-NAT'd and passed again: found by its original key.
    let back = udp(S, 53, X, 5000);
    let first = nat_step(&ct, &back, 2);
    let unnat = rewritten(&back, first.1.unwrap().packet);
    let mark = CtAction::commit(Z).with_mark(9, 0xff);
    let (r2, n2) = step_next(&ct, &unnat, &mark, 2, first);
    assert_eq!((r2.mark, n2), (9, first.1));
    // The plain entry point answers the same, without the NAT result.
    let r3 = ct.execute_next(&unnat, &CtAction::lookup(Z), 2, &first.0);
    assert_eq!(r3, r2);
}

/// `ct(zone=Z)` then `ct(zone=Z, nat)` on one packet (OVN's `chk_lb_hairpin_reply`
/// lookup, then `ct_snat`): the second step, on the cached connection, translates
/// what the first only reported, once.
#[test]
fn execute_next_translates_what_the_lookup_before_it_only_reported() {
    let ct = tracker();
    let out = udp(A, 5000, S, 53);
    let (_, n) = commit_nat(&ct, &out, snat_to(X), 0);
    let port = snat_port(n);
    let back = udp(S, 53, X, port);
    let seen = lookup_nat(&ct, &back, 1);
    assert_eq!(
        seen.0.state, EST_RPL,
        "a lookup without nat translates nothing"
    );
    assert_eq!(seen.1.unwrap().packet, ep(S, 53, X, port));
    let act = CtAction::lookup(Z).with_nat(Nat::Existing);
    let next = step_next(&ct, &back, &act, 1, seen);
    let (r, n) = next;
    assert_eq!(r.state, EST_RPL | DNAT);
    assert_eq!(n.unwrap().packet, ep(S, 53, A, 5000));
    // Translated now: a third step in the zone leaves it.
    let unnat = rewritten(&back, n.unwrap().packet);
    let again = step_next(&ct, &unnat, &act, 1, next);
    assert_eq!(again.1.unwrap().packet, ep(S, 53, A, 5000));
}

#[test]
fn expiry_removes_the_alias() {
    let ct = tracker();
    commit_nat(&ct, &udp(A, 5000, S, 53), snat_to(X), 0);
    commit_nat(&ct, &udp(B, 5000, S, 53), snat_to(X), 0);
    // Lazy expiry, reached through the alias.
    let late = 61_000;
    assert_eq!(nat_step(&ct, &udp(S, 53, X, 5000), late).0.state, NEW);
    assert_eq!(ct.len(), 1);
    // The sweep takes the other.
    assert_eq!(ct.sweep_all(late), 1);
    assert!(ct.is_empty());
    assert_eq!(ct.stats().expired, 2);
    for port in 1024..=65535 {
        let (r, n) = lookup_nat(&ct, &udp(S, 53, X, port), late);
        assert!(n.is_none() && r.state == NEW, "{port}");
    }
    // The translated tuple is free for a host that really has it.
    let (r, n) = step(&ct, &udp(X, 5000, S, 53), &CtAction::commit(Z), late);
    assert_eq!((r.state, n), (NEW, None));
}

#[test]
fn flushes_remove_aliases() {
    let ct = tracker();
    let syn = |client| tcp(client, 40000, S, 80, SYN, 100, 0, 0);
    let synack = |port| tcp(S, 80, X, port, SYN | ACK, 5000, 101, 0);
    let p1 = snat_port(commit_nat(&ct, &syn(A), snat_to(X), 0).1);
    let p2 = snat_port(commit_nat(&ct, &syn(B), snat_to(X), 0).1);
    assert_eq!(ct.flush(Some(Z + 1)), 0);
    assert_eq!(lookup(&ct, &synack(p1), Z, 1).state, EST_RPL);
    assert_eq!(ct.flush(Some(Z)), 2);
    assert_eq!(lookup(&ct, &synack(p1), Z, 1).state, INV);
    assert_eq!(lookup(&ct, &synack(p2), Z, 1).state, INV);
    // flush_tuple by the translated reply tuple.
    let p1 = snat_port(commit_nat(&ct, &syn(A), snat_to(X), 2).1);
    let reply = Tuple::ports(ip(S), ip(X), 6, 80, p1);
    assert!(ct.flush_tuple(Z, &reply));
    assert!(ct.is_empty());
    assert_eq!(lookup(&ct, &synack(p1), Z, 3).state, INV);
    commit_nat(&ct, &syn(A), snat_to(X), 4);
    assert_eq!(ct.flush(None), 1);
    assert_eq!(lookup(&ct, &synack(p1), Z, 5).state, INV);
}

#[test]
fn zones_keep_translations_apart() {
    let ct = tracker();
    commit_nat(&ct, &udp(A, 5000, S, 53), snat_to(X), 0);
    let back = udp(S, 53, X, 5000);
    let lookup_there = CtAction::lookup(Z + 1).with_nat(Nat::Existing);
    let (r, n) = step(&ct, &back, &lookup_there, 1);
    assert_eq!((r.state, n), (NEW, None));
    // The same client in another zone gets the same translation there.
    let commit_there = CtAction::commit(Z + 1).with_nat(snat_to(X));
    let (_, n) = step(&ct, &udp(A, 5000, S, 53), &commit_there, 1);
    assert_eq!(snat_port(n), 5000);
    assert_eq!((ct.zone_count(Z), ct.zone_count(Z + 1)), (1, 1));
}

#[test]
fn ipv6_snat_of_udp_and_icmpv6_echo() {
    let ct = tracker();
    let (a, s, x) = ("2001:db8::1", "2001:db8:1::1", "2001:db8:ff::1");
    let nat = Nat::Src(range(x, "2001:db8:ff::ffff", Some((2000, 2999))));
    let (_, n) = commit_nat(&ct, &udp(a, 5000, s, 53), nat, 0);
    let got = n.unwrap().packet;
    assert!((2000..=2999).contains(&got.src_port), "{got:?}");
    assert!(got.src >= ip(x) && got.src <= ip("2001:db8:ff::ffff"));
    let (r, n) = nat_step(&ct, &udp(s, 53, &got.src.to_string(), got.src_port), 1);
    assert_eq!(r.state, EST_RPL | DNAT);
    assert_eq!(n.unwrap().packet, ep(s, 53, a, 5000));
    // ICMPv6 echo: the address is translated, the id kept.
    let (_, n) = commit_nat(&ct, &echo(a, s, 77, true), snat_to(x), 2);
    assert_eq!(n.unwrap().packet, ep(x, 77, s, 77));
    let (r, n) = nat_step(&ct, &echo(s, x, 77, false), 3);
    assert_eq!(r.state, EST_RPL | DNAT);
    assert_eq!(n.unwrap().packet, ep(s, 77, a, 77));
    // A family mismatch between packet and range: no translation.
    let (r, _) = commit_nat(&ct, &udp(a, 6000, s, 53), snat_to(X), 4);
    assert_eq!(r.refused, Some(Refused::NatExhausted));
}

/// An ICMP error about a NAT'd connection's packet is `rel`; its outer address on the
/// translated side and the header it embeds are both translated (RFC 5508 §7): the
/// host the error reaches finds the connection it knows.
#[test]
fn icmp_errors_are_related_and_their_embedded_header_is_translated() {
    let ct = tracker();
    let (_, n) = commit_nat(&ct, &tcp(A, 40000, S, 80, SYN, 100, 0, 0), snat_to(X), 0);
    let port = snat_port(n);
    // A router past the NAT reports the translated SYN to X.
    let inner = Tuple::ports(ip(X), ip(S), 6, port, 80);
    let err = icmp_error("198.51.100.254", X, icmp::DEST_UNREACH, inner);
    let (r, n) = nat_step(&ct, &err, 1);
    assert_eq!(r.state, REL_RPL | DNAT);
    let n = n.unwrap();
    // The outer destination goes back to A; ports (none) and router stay.
    assert_eq!(n.packet, ep("198.51.100.254", 0, A, 0));
    // The embedded SYN becomes the one A sent.
    assert_eq!(n.inner, Some(ep(A, 40000, S, 80)));

    // A reports S's reply (as A received it) back to S: the reply S sent, to X.
    let inner = Tuple::ports(ip(S), ip(A), 6, 80, 40000);
    let err = icmp_error(A, S, icmp::DEST_UNREACH, inner);
    let (r, n) = nat_step(&ct, &err, 2);
    assert_eq!(r.state, CtState::TRK | CtState::REL | SNAT);
    let n = n.unwrap();
    assert_eq!(n.packet, ep(X, 0, S, 0));
    assert_eq!(n.inner, Some(ep(S, 80, X, port)));

    // A lookup that does not translate reports no embedded header.
    let (_, n) = lookup_nat(&ct, &err, 3);
    assert_eq!(n.unwrap().inner, None);
}

/// Two threads create, look up and flush NAT'd connections over 16 shards
/// for about a second, all SNAT'd to one address and 64 ports (so the
/// translations collide across threads and shards): no deadlock, and then
/// every connection is found by its translated reply tuple, no two share
/// one, and a flush leaves nothing behind.
#[test]
fn two_threads_race_on_nat_without_deadlock() {
    let ct = Arc::new(
        Conntrack::new(Config {
            shards: 16,
            ..Config::default()
        })
        .unwrap(),
    );
    let nat = Nat::Src(range(X, X, Some((10000, 10063))));
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2u32)
        .map(|t| {
            let (ct, stop, barrier) = (Arc::clone(&ct), Arc::clone(&stop), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut i = 0u32;
                let mut translated = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let client = format!("10.{t}.{}.{}", i >> 8 & 0xff, i & 0xff);
                    let p = udp(&client, 5000, S, 53);
                    let (r, n) = step(&ct, &p, &CtAction::commit(Z).with_nat(nat), 0);
                    if let Some(n) = n {
                        translated += 1;
                        let back = rewritten(&p, n.packet.reversed());
                        let (r, b) = nat_step(&ct, &back, 0);
                        // The other thread may have flushed it meanwhile, and
                        // another client's connection taken its translation since.
                        if let Some(b) = b {
                            let back_to = n.original.reversed();
                            assert_eq!(
                                (b.packet.src, b.packet.src_port),
                                (back_to.src, back_to.src_port)
                            );
                            assert!(r.state.contains(CtState::RPL | DNAT));
                        }
                    } else {
                        assert_eq!(r.refused, Some(Refused::NatExhausted));
                    }
                    if i % 97 == 0 {
                        ct.flush(Some(Z));
                    } else if i % 13 == 0 {
                        ct.flush_tuple(Z, &Tuple::ports(ip(&client), ip(S), 17, 5000, 53));
                    }
                    i = i.wrapping_add(1);
                }
                translated
            })
        })
        .collect();
    let start = Instant::now();
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let translated: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(translated > 100, "{translated}");

    let entries: Vec<_> = ct.dump(0, None).collect();
    assert_eq!(entries.len(), ct.len());
    assert!(entries.len() <= 64);
    let mut replies: Vec<_> = entries.iter().map(|e| e.reply).collect();
    replies.sort_by_key(|r| r.dst_port);
    replies.dedup();
    assert_eq!(replies.len(), entries.len(), "reply tuples are unique");
    for e in &entries {
        let back = udp(&e.reply.src.to_string(), 53, X, e.reply.dst_port);
        let (r, n) = lookup_nat(&ct, &back, 0);
        assert_eq!(r.state, EST_RPL, "{e:?}");
        assert_eq!(n.unwrap().original.src, e.orig.src);
    }
    ct.flush(None);
    ct.sweep_all(0);
    assert!(ct.is_empty());
    for port in 10000..=10063 {
        let (r, n) = lookup_nat(&ct, &udp(S, 53, X, port), 0);
        assert_eq!((r.state, n), (NEW, None), "{port}");
    }
}
