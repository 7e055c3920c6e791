//! Per-state timeouts, lazy expiry, the incremental sweep, flushes, dumps.

mod common;

use common::*;
use conntrack::{Config, Conntrack, InvalidReason, Timeout, Timeouts, SWEEP_CHUNK};

const Z: u16 = 2;
const S: u64 = 1000;

/// Expiry (ms after `now`) of the only connection.
fn expires_in(ct: &Conntrack, now: u64) -> u64 {
    ct.dump(now, None)
        .next()
        .expect("one connection")
        .expires_ms
        - now
}

#[test]
fn each_state_takes_its_timeout() {
    let t = Timeouts::default();
    let ct = tracker();
    // TCP: SYN sent, opening, established, closing, both closing, closed.
    commit(&ct, &tcp(A, 1, B, 2, SYN, 100, 0, 0), Z, 0);
    assert_eq!(
        expires_in(&ct, 0),
        u64::from(t.get(Timeout::TcpSynSent)) * S
    );
    lookup(&ct, &tcp(B, 2, A, 1, SYN | ACK, 500, 101, 0), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.tcp_syn_recv) * S);
    lookup(&ct, &tcp(A, 1, B, 2, ACK, 101, 501, 0), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.tcp_established) * S);
    lookup(&ct, &tcp(A, 1, B, 2, FIN | ACK, 101, 501, 0), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.tcp_fin_wait) * S);
    lookup(&ct, &tcp(B, 2, A, 1, FIN | ACK, 501, 102, 0), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.tcp_time_wait) * S);
    lookup(&ct, &tcp(A, 1, B, 2, ACK, 102, 502, 0), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.tcp_close) * S);
    ct.flush(None);

    // UDP: first, single, multiple.
    commit(&ct, &udp(A, 1, B, 2), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.udp_first) * S);
    lookup(&ct, &udp(A, 1, B, 2), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.udp_single) * S);
    lookup(&ct, &udp(B, 2, A, 1), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.udp_multiple) * S);
    ct.flush(None);

    // ICMP: first, reply.
    commit(&ct, &echo(A, B, 1, true), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.icmp_first) * S);
    lookup(&ct, &echo(B, A, 1, false), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.icmp_reply) * S);
    ct.flush(None);

    // Other: first, single, multiple.
    commit(&ct, &other(A, B, 132), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.other_first) * S);
    lookup(&ct, &other(A, B, 132), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.other_single) * S);
    lookup(&ct, &other(B, A, 132), Z, 0);
    assert_eq!(expires_in(&ct, 0), u64::from(t.other_multiple) * S);
}

#[test]
fn timeouts_are_configurable() {
    let ct = Conntrack::new(Config {
        timeouts: Timeouts {
            udp_first: 5,
            ..Timeouts::default()
        },
        ..Config::default()
    })
    .unwrap();
    commit(&ct, &udp(A, 1, B, 2), Z, 0);
    assert_eq!(expires_in(&ct, 0), 5 * S);
    ct.set_timeouts(&Timeouts {
        udp_single: 7,
        ..ct.timeouts()
    });
    lookup(&ct, &udp(A, 1, B, 2), Z, 0);
    assert_eq!(expires_in(&ct, 0), 7 * S);
}

#[test]
fn an_expired_connection_is_gone_on_lookup() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    lookup(&ct, &tcp(A, 40000, B, 80, FIN | ACK, 101, 5001, 0), Z, 0);
    lookup(&ct, &tcp(B, 80, A, 40000, FIN | ACK, 5001, 102, 0), Z, 0);
    lookup(&ct, &tcp(A, 40000, B, 80, ACK, 102, 5002, 0), Z, 0);
    // tcp_close is 30 s: at 29.999 s it is still there, at 30 s it is gone.
    let late_ack = tcp(A, 40000, B, 80, ACK, 102, 5002, 0);
    assert_eq!(lookup(&ct, &late_ack, Z, 29_999).state, EST);
    let r = lookup(&ct, &late_ack, Z, 29_999 + 30_000);
    assert_eq!(r.invalid, Some(InvalidReason::NotOpener));
    assert!(ct.is_empty());
    assert_eq!(ct.stats().expired, 1);
}

#[test]
fn dump_hides_expired_connections() {
    let ct = tracker();
    commit(&ct, &udp(A, 1, B, 2), Z, 0);
    assert_eq!(ct.dump(59_999, None).count(), 1);
    assert_eq!(ct.dump(60_000, None).count(), 0);
    assert_eq!(ct.len(), 1, "still in the table until swept or looked up");
}

#[test]
fn sweep_is_incremental_and_finds_everything() {
    let ct = Conntrack::new(Config {
        shards: 16,
        ..Config::default()
    })
    .unwrap();
    for i in 0..5000u32 {
        let p = udp(A, (i % 60_000 + 1) as u16, B, (i / 60_000 + 1) as u16);
        commit(&ct, &p, Z, 0);
    }
    // All expire at 60 s (udp_first). A call never examines more than its
    // budget (plus one per shard boundary it crosses).
    let s = ct.sweep(60_000, SWEEP_CHUNK);
    assert!(s.scanned <= SWEEP_CHUNK + 16, "{s:?}");
    assert!(s.expired > 0 && s.expired <= s.scanned);
    let mut total = s.expired;
    let mut rounds = 0;
    loop {
        let s = ct.sweep(60_000, 700);
        total += s.expired;
        rounds += 1;
        if s.round_done {
            break;
        }
    }
    assert!(rounds > 5, "{rounds}");
    assert_eq!(total, 5000);
    assert!(ct.is_empty());
    assert_eq!(ct.stats().expired, 5000);
    // Nothing expired: a sweep removes nothing.
    commit(&ct, &udp(A, 1, B, 2), Z, 100_000);
    assert_eq!(ct.sweep_all(100_000), 0);
    assert_eq!(ct.len(), 1);
}

#[test]
fn flush_all_one_zone_or_one_tuple() {
    let ct = tracker();
    for zone in 1..=3 {
        for port in 1..=10 {
            commit(&ct, &udp(A, port, B, 53), zone, 0);
        }
    }
    assert_eq!(ct.flush(Some(2)), 10);
    assert_eq!(ct.zone_count(2), 0);
    assert_eq!(ct.dump(0, Some(2)).count(), 0);
    assert_eq!(ct.dump(0, Some(1)).count(), 10);
    // A tuple, given in either direction.
    let reply = conntrack::Tuple::ports(ip(B), ip(A), 17, 53, 4);
    assert!(ct.flush_tuple(1, &reply));
    assert!(!ct.flush_tuple(1, &reply));
    assert_eq!(ct.flush(None), 19);
    assert!(ct.is_empty());
    assert_eq!(ct.stats().flushed, 30);
}

#[test]
fn sweep_resumes_after_a_flush_shrank_its_shard() {
    let ct = Conntrack::new(Config {
        shards: 1,
        ..Config::default()
    })
    .unwrap();
    for port in 1..=2000 {
        commit(&ct, &udp(A, port, B, 53), Z, 0);
    }
    // Leave the cursor deep in the shard, then shrink it.
    assert!(!ct.sweep(0, 1500).round_done);
    ct.flush(None);
    commit(&ct, &udp(A, 1, B, 53), Z, 0);
    assert_eq!(ct.sweep_all(60_000), 1);
}
