//! A stateful firewall as OVN builds one from ACLs, on the tracker:
//! `cargo run -p conntrack --example firewall`.
//!
//! Two PMD threads share one `Conntrack`. A "web" port (zone 1) allows new
//! connections to TCP port 80 only (`allow-related`): every packet first
//! goes through `ct_next` in the port's zone; `ct.inv` is dropped,
//! `ct.est`/`ct.rel` pass, `ct.new` passes and is committed only if the
//! ACL allows it. Clients talk on `pmd0`; the server's answers go through
//! `pmd1`. A control thread sweeps expired connections.

use std::net::IpAddr;
use std::sync::Arc;
use std::thread;

use conntrack::{Config, Conntrack, CtAction, CtState, Packet, TcpFlags, TcpSegment, L4};

const WEB_ZONE: u16 = 1;

/// What OVN's ACL stage decides for a packet of the web port.
#[derive(Debug, PartialEq)]
enum Verdict {
    Pass,
    Drop(&'static str),
}

/// `ct_next`, then the ACL: allow-related to port 80.
fn acl(ct: &Conntrack, pkt: &Packet, now_ms: u64) -> Verdict {
    let r = ct.execute(pkt, &CtAction::lookup(WEB_ZONE), now_ms);
    if r.state.contains(CtState::INV) {
        return Verdict::Drop("ct.inv");
    }
    if r.state.contains(CtState::EST) || r.state.contains(CtState::REL) {
        return Verdict::Pass;
    }
    let to_web = matches!(pkt.l4, L4::Tcp(TcpSegment { dst_port: 80, .. }));
    if !to_web {
        return Verdict::Drop("no ACL allows it");
    }
    // ct_commit { ct_mark.blocked = 0; } — in the same zone, after ct_next.
    let act = CtAction::commit(WEB_ZONE).with_mark(0, 1);
    match ct.execute_next(pkt, &act, now_ms, &r).refused {
        None => Verdict::Pass,
        Some(_) => Verdict::Drop("zone full"),
    }
}

fn segment(
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    flags: TcpFlags,
    seq: u32,
    ack: u32,
) -> Packet {
    Packet {
        src,
        dst,
        fragment: false,
        l4: L4::Tcp(TcpSegment {
            src_port: sport,
            dst_port: dport,
            flags,
            seq,
            ack,
            window: 65535,
            wscale: None,
            payload_len: 0,
        }),
    }
}

fn main() {
    let ct = Arc::new(Conntrack::new(Config::default()).expect("default config"));
    ct.set_zone_limit(WEB_ZONE, Some(10_000));
    let server: IpAddr = "10.0.0.80".parse().unwrap();
    let (syn, ack) = (TcpFlags::SYN, TcpFlags::ACK);
    let clients = 200u32;

    // pmd0: the clients' SYNs, then their ACKs once the answers came back.
    let (tx, rx) = std::sync::mpsc::channel();
    let pmd0 = {
        let ct = Arc::clone(&ct);
        thread::Builder::new().name("pmd0".into()).spawn(move || {
            let mut passed = 0;
            for i in 0..clients {
                let c = IpAddr::from([192, 168, (i >> 8) as u8, i as u8]);
                // Port 22 is not allowed; port 80 is.
                let dport = if i % 10 == 0 { 22 } else { 80 };
                if acl(&ct, &segment(c, server, 40000, dport, syn, 1, 0), 0) == Verdict::Pass {
                    passed += 1;
                    tx.send((c, dport)).unwrap();
                }
            }
            passed
        })
    }
    .unwrap();
    // pmd1: the server answers every SYN it receives.
    let pmd1 = {
        let ct = Arc::clone(&ct);
        thread::Builder::new().name("pmd1".into()).spawn(move || {
            let mut out = Vec::new();
            for (c, port) in rx {
                let synack = segment(server, c, port, 40000, syn | ack, 7000, 2);
                out.push(acl(&ct, &synack, 1));
            }
            out
        })
    }
    .unwrap();
    let opened = pmd0.join().unwrap();
    let answers = pmd1.join().unwrap();
    assert!(answers.iter().all(|v| *v == Verdict::Pass));

    // A stray ACK of no connection, and an unsolicited SYN|ACK.
    let stray = segment("192.0.2.1".parse().unwrap(), server, 5555, 80, ack, 9, 9);
    let spoof = segment(
        server,
        "192.0.2.1".parse().unwrap(),
        80,
        5556,
        syn | ack,
        9,
        9,
    );
    println!("stray ACK: {:?}", acl(&ct, &stray, 2));
    println!("unsolicited SYN|ACK: {:?}", acl(&ct, &spoof, 2));

    println!(
        "{opened} of {clients} connections allowed; {} in zone {WEB_ZONE}",
        ct.zone_count(WEB_ZONE)
    );
    if let Some(e) = ct.dump(2, Some(WEB_ZONE)).next() {
        println!(
            "e.g. {} -> {:?}, mark {}, expires at {} ms",
            e.orig, e.state, e.mark, e.expires_ms
        );
    }

    // The control thread's sweep: half-open connections end after tcp_syn_recv.
    let control = {
        let ct = Arc::clone(&ct);
        thread::Builder::new()
            .name("ct-sweep".into())
            .spawn(move || ct.sweep_all(31_000))
            .unwrap()
    };
    println!("swept {} expired connections", control.join().unwrap());
    let st = ct.stats();
    println!(
        "created {}, expired {}, invalid {} (not_opener {}), zone_full {}",
        st.created,
        st.expired,
        st.invalid_total(),
        st.invalid(conntrack::InvalidReason::NotOpener),
        st.zone_full
    );
}
