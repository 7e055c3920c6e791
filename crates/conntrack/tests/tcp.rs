//! TCP as Open vSwitch tracks it: handshake, data, FIN, RST, invalid
//! segments, window checks.

mod common;

use common::*;
use conntrack::{Config, Conntrack, InvalidReason, ProtoState, TcpState};

const Z: u16 = 1;

#[test]
fn syn_without_commit_is_new_and_creates_nothing() {
    let ct = tracker();
    let syn = tcp(A, 40000, B, 80, SYN, 100, 0, 0);
    assert_eq!(lookup(&ct, &syn, Z, 0).state, NEW);
    assert_eq!(lookup(&ct, &syn, Z, 0).state, NEW);
    assert!(ct.is_empty());
    // So the SYN|ACK finds nothing: SYN|ACK may not open a connection.
    let r = lookup(&ct, &tcp(B, 80, A, 40000, SYN | ACK, 5000, 101, 0), Z, 0);
    assert_eq!((r.state, r.invalid), (INV, Some(InvalidReason::NotOpener)));
}

#[test]
fn handshake_then_data_both_ways_is_established() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    let data = tcp(A, 40000, B, 80, ACK | PSH, 101, 5001, 500);
    assert_eq!(lookup(&ct, &data, Z, 1).state, EST);
    let answer = tcp(B, 80, A, 40000, ACK | PSH, 5001, 601, 1400);
    assert_eq!(lookup(&ct, &answer, Z, 2).state, EST_RPL);
    let e = ct.dump(2, None).next().unwrap();
    assert_eq!(
        e.state,
        ProtoState::Tcp {
            orig: TcpState::Established,
            reply: TcpState::Established
        }
    );
    assert_eq!(
        (e.orig.src, e.orig.src_port, e.orig.dst_port),
        (ip(A), 40000, 80)
    );
    assert_eq!((e.reply.src, e.reply.src_port), (ip(B), 80));
    assert_eq!(e.expires_ms, 2 + 86_400_000);
}

#[test]
fn syn_retransmission_stays_new() {
    let ct = tracker();
    let syn = tcp(A, 40000, B, 80, SYN, 100, 0, 0);
    commit(&ct, &syn, Z, 0);
    assert_eq!(lookup(&ct, &syn, Z, 1000).state, NEW);
    assert_eq!(commit(&ct, &syn, Z, 2000).state, NEW);
    assert_eq!(ct.len(), 1);
}

#[test]
fn fin_exchange_closes_and_shortens_the_timeout() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    assert_eq!(
        lookup(&ct, &tcp(A, 40000, B, 80, FIN | ACK, 101, 5001, 0), Z, 10).state,
        EST
    );
    let e = ct.dump(10, None).next().unwrap();
    assert_eq!(e.expires_ms, 10 + 900_000, "one side closing: tcp_fin_wait");
    assert_eq!(
        lookup(&ct, &tcp(B, 80, A, 40000, FIN | ACK, 5001, 102, 0), Z, 20).state,
        EST_RPL
    );
    assert_eq!(
        lookup(&ct, &tcp(A, 40000, B, 80, ACK, 102, 5002, 0), Z, 30).state,
        EST
    );
    let e = ct.dump(30, None).next().unwrap();
    assert_eq!(
        e.state,
        ProtoState::Tcp {
            orig: TcpState::FinWait2,
            reply: TcpState::FinWait2
        }
    );
    assert_eq!(e.expires_ms, 30 + 30_000, "both closed: tcp_close");
}

#[test]
fn syn_on_a_closed_connection_reopens_it() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    lookup(&ct, &tcp(A, 40000, B, 80, FIN | ACK, 101, 5001, 0), Z, 1);
    lookup(&ct, &tcp(B, 80, A, 40000, FIN | ACK, 5001, 102, 0), Z, 1);
    lookup(&ct, &tcp(A, 40000, B, 80, ACK, 102, 5002, 0), Z, 1);
    // Port reuse: a new SYN ends the old connection; commit makes a new one.
    let syn = tcp(A, 40000, B, 80, SYN, 90_000, 0, 0);
    assert_eq!(commit(&ct, &syn, Z, 2).state, NEW);
    assert_eq!(ct.len(), 1);
    assert_eq!(ct.stats().reopened, 1);
    let synack = tcp(B, 80, A, 40000, SYN | ACK, 1, 90_001, 0);
    assert_eq!(lookup(&ct, &synack, Z, 3).state, EST_RPL);
}

#[test]
fn rst_with_the_expected_sequence_closes() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    assert_eq!(
        lookup(&ct, &tcp(B, 80, A, 40000, RST, 5001, 0, 0), Z, 5).state,
        EST_RPL
    );
    let e = ct.dump(5, None).next().unwrap();
    assert_eq!(
        e.state,
        ProtoState::Tcp {
            orig: TcpState::TimeWait,
            reply: TcpState::TimeWait
        }
    );
    assert_eq!(e.expires_ms, 5 + 30_000);
}

#[test]
fn blind_rst_is_invalid() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    let r = lookup(&ct, &tcp(B, 80, A, 40000, RST, 5001 + 40_000, 0, 0), Z, 5);
    assert_eq!((r.state, r.invalid), (INV, Some(InvalidReason::TcpWindow)));
}

#[test]
fn ack_of_no_connection_is_invalid() {
    let ct = tracker();
    for (flags, reason) in [
        (ACK, InvalidReason::NotOpener),
        (ACK | PSH, InvalidReason::NotOpener),
        (RST, InvalidReason::NotOpener),
        (FIN, InvalidReason::TcpFlags),
        (SYN | FIN, InvalidReason::TcpFlags),
        (SYN | RST, InvalidReason::TcpFlags),
        (conntrack::TcpFlags(0), InvalidReason::TcpFlags),
    ] {
        let r = commit(&ct, &tcp(A, 40000, B, 80, flags, 1, 1, 0), Z, 0);
        assert_eq!((r.state, r.invalid), (INV, Some(reason)), "{flags:?}");
    }
    assert!(ct.is_empty());
    let st = ct.stats();
    assert_eq!(st.invalid(InvalidReason::NotOpener), 3);
    assert_eq!(st.invalid(InvalidReason::TcpFlags), 4);
}

#[test]
fn loose_mode_picks_up_mid_stream() {
    let ct = Conntrack::new(Config {
        tcp_loose: true,
        ..Config::default()
    })
    .unwrap();
    let ack = tcp(A, 40000, B, 80, ACK, 1_000_000, 77, 100);
    assert_eq!(commit(&ct, &ack, Z, 0).state, NEW);
    let back = tcp(B, 80, A, 40000, ACK, 77, 1_000_100, 0);
    assert_eq!(lookup(&ct, &back, Z, 1).state, EST_RPL);
    // SYN|ACK still may not open one.
    let r = commit(&ct, &tcp(A, 1, B, 2, SYN | ACK, 1, 1, 0), Z, 0);
    assert_eq!(r.invalid, Some(InvalidReason::NotOpener));
}

#[test]
fn data_beyond_the_receivers_window_is_invalid() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    // B allowed 65535 bytes from 101.
    let ok = tcp(A, 40000, B, 80, ACK, 101, 5001, 65535);
    assert_eq!(lookup(&ct, &ok, Z, 1).state, EST);
    let beyond = tcp(A, 40000, B, 80, ACK, 101 + 65535, 5001, 200_000);
    let r = lookup(&ct, &beyond, Z, 1);
    assert_eq!((r.state, r.invalid), (INV, Some(InvalidReason::TcpWindow)));
    // An ACK for data B never sent.
    let r = lookup(
        &ct,
        &tcp(A, 40000, B, 80, ACK, 101, 5001 + 500_000, 0),
        Z,
        1,
    );
    assert_eq!(r.invalid, Some(InvalidReason::TcpWindow));
    assert_eq!(ct.stats().invalid(InvalidReason::TcpWindow), 2);
    // The connection is still fine.
    assert_eq!(
        lookup(&ct, &tcp(B, 80, A, 40000, ACK, 5001, 65636, 0), Z, 2).state,
        EST_RPL
    );
    // With window checks off, anything goes.
    ct.set_tcp_liberal(true);
    assert_eq!(lookup(&ct, &beyond, Z, 3).state, EST);
}

#[test]
fn retransmission_inside_the_window_is_fine() {
    let ct = tracker();
    handshake(&ct, Z, 0);
    let data = tcp(A, 40000, B, 80, ACK | PSH, 101, 5001, 1000);
    assert_eq!(lookup(&ct, &data, Z, 1).state, EST);
    assert_eq!(lookup(&ct, &data, Z, 2).state, EST);
}

#[test]
fn ipv6_handshake() {
    let ct = tracker();
    let (a, b) = ("2001:db8::1", "2001:db8::2");
    assert_eq!(
        commit(&ct, &tcp(a, 1234, b, 443, SYN, 7, 0, 0), Z, 0).state,
        NEW
    );
    assert_eq!(
        lookup(&ct, &tcp(b, 443, a, 1234, SYN | ACK, 9, 8, 0), Z, 0).state,
        EST_RPL
    );
    assert_eq!(
        lookup(&ct, &tcp(a, 1234, b, 443, ACK, 8, 10, 0), Z, 0).state,
        EST
    );
}
