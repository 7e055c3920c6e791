//! One tracker shared by several PMD-like threads: replies arrive on
//! another thread than their originals, limits hold under races, sweeps
//! and flushes run beside lookups.

mod common;

use std::sync::{mpsc, Arc, Barrier};
use std::thread;

use common::*;
use conntrack::{Config, Conntrack, CtAction, Packet, Refused};

const Z: u16 = 9;

fn client(i: u32) -> String {
    format!("10.1.{}.{}", i >> 8 & 0xff, i & 0xff)
}

#[test]
fn replies_on_another_thread_are_established() {
    let ct = Arc::new(tracker());
    const N: u32 = 2000;
    // Thread "pmd0" sends SYNs; "pmd1" receives them and answers SYN|ACKs
    // that "pmd0" must see as established replies.
    let (to_server, from_client) = mpsc::channel::<u32>();
    let (to_client, from_server) = mpsc::channel::<u32>();
    let server = {
        let ct = Arc::clone(&ct);
        thread::Builder::new()
            .name("pmd1".into())
            .spawn(move || {
                for i in from_client {
                    let synack = tcp(B, 80, &client(i), 40000, SYN | ACK, 9000, 101, 0);
                    assert_eq!(lookup(&ct, &synack, Z, 1).state, EST_RPL, "{i}");
                    to_client.send(i).unwrap();
                }
            })
            .unwrap()
    };
    let client_thread = {
        let ct = Arc::clone(&ct);
        thread::Builder::new()
            .name("pmd0".into())
            .spawn(move || {
                for i in 0..N {
                    let syn = tcp(&client(i), 40000, B, 80, SYN, 100, 0, 0);
                    assert_eq!(commit(&ct, &syn, Z, 0).state, NEW);
                    to_server.send(i).unwrap();
                }
                drop(to_server);
                for i in from_server {
                    let ack = tcp(&client(i), 40000, B, 80, ACK, 101, 9001, 0);
                    assert_eq!(lookup(&ct, &ack, Z, 2).state, EST, "{i}");
                }
            })
            .unwrap()
    };
    client_thread.join().unwrap();
    server.join().unwrap();
    assert_eq!(ct.len(), N as usize);
    assert_eq!(ct.stats().created, u64::from(N));
}

#[test]
fn racing_commits_never_pass_a_limit() {
    let ct = Arc::new(
        Conntrack::new(Config {
            max_connections: 1000,
            ..Config::default()
        })
        .unwrap(),
    );
    ct.set_zone_limit(1, Some(300));
    let threads = 4;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads as u32)
        .map(|t| {
            let (ct, barrier) = (Arc::clone(&ct), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut refused = [0u32; 2];
                for i in 0..1000u32 {
                    let zone = 1 + (i % 2) as u16;
                    let p = udp(&client(t * 1000 + i), 1, B, 2);
                    match commit(&ct, &p, zone, 0).refused {
                        Some(Refused::ZoneFull) => refused[0] += 1,
                        Some(Refused::TableFull) => refused[1] += 1,
                        Some(Refused::NatExhausted) => unreachable!("no NAT here"),
                        None => {}
                    }
                }
                refused
            })
        })
        .collect();
    let refused = handles.into_iter().fold([0, 0], |acc, h| {
        let r = h.join().unwrap();
        [acc[0] + r[0], acc[1] + r[1]]
    });
    // Which zone fills the table first is a race; the limits are not.
    assert!(ct.zone_count(1) <= 300);
    assert_eq!(ct.len(), 1000);
    assert_eq!(ct.zone_count(1) + ct.zone_count(2), 1000);
    let st = ct.stats();
    assert_eq!(
        (st.zone_full, st.table_full),
        (u64::from(refused[0]), u64::from(refused[1]))
    );
    assert_eq!(st.zone_full + st.table_full + 1000, 4000);
}

#[test]
fn lookups_run_beside_sweeps_and_flushes() {
    let ct = Arc::new(tracker());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let control = {
        let (ct, stop) = (Arc::clone(&ct), Arc::clone(&stop));
        thread::spawn(move || {
            let mut now = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                now += 10_000;
                ct.sweep(now, 4096);
                if now % 300_000 == 0 {
                    ct.flush(Some(Z + 1));
                }
            }
        })
    };
    let pmds: Vec<_> = (0..2u32)
        .map(|t| {
            let ct = Arc::clone(&ct);
            thread::spawn(move || {
                for round in 0..20_000u32 {
                    let i = t * 100_000 + round % 500;
                    let zone = Z + (round % 2) as u16;
                    let q: Packet = udp(&client(i), 5000, B, 53);
                    let r = ct.execute(&q, &CtAction::commit(zone), u64::from(round));
                    assert!(r.invalid.is_none());
                    let a = udp(B, 53, &client(i), 5000);
                    let r = lookup(&ct, &a, zone, u64::from(round));
                    assert!(r.invalid.is_none());
                }
            })
        })
        .collect();
    for p in pmds {
        p.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    control.join().unwrap();
    // Counts agree with the table.
    let n = ct.flush(None);
    assert_eq!(ct.len(), 0);
    let st = ct.stats();
    assert_eq!(st.created, st.expired + st.flushed);
    assert!(n <= 2000);
}
