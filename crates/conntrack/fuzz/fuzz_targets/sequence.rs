//! Fuzz target: sequences of packets (TCP with chosen flags, sequence and
//! window fields, UDP, ICMP echo and errors, another protocol, fragments)
//! between four hosts in four zones, with and without commit, mark and
//! label writes, time passing, sweeps, flushes and limit changes. Never
//! panics, and every answer and count keeps the tracker's invariants.
//!
//! Each operation takes 8 bytes:
//! `[op, zone|commit|reply|v6, hosts, tcp flags, seq, ack, window|len, dt]`.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use conntrack::packet::icmp;
use conntrack::{
    Config, Conntrack, CtAction, CtResult, CtState, IcmpMessage, Packet, TcpFlags, TcpSegment,
    Tuple, L4,
};
use libfuzzer_sys::fuzz_target;

const MAX: u32 = 24;

fn tracker() -> &'static Conntrack {
    static CT: OnceLock<Conntrack> = OnceLock::new();
    CT.get_or_init(|| {
        Conntrack::new(Config {
            shards: 4,
            max_connections: MAX,
            ..Config::default()
        })
        .unwrap()
    })
}

fn host(i: u8, v6: bool) -> IpAddr {
    if v6 {
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(i & 3) + 1).into()
    } else {
        Ipv4Addr::new(10, 0, 0, (i & 3) + 1).into()
    }
}

fn packet(b: &[u8]) -> Packet {
    let v6 = b[1] & 0x20 != 0;
    let reply = b[1] & 0x10 != 0;
    let (mut src, mut dst) = (host(b[2], v6), host(b[2] >> 2, v6));
    let (mut sport, mut dport) = (1 + u16::from(b[2] >> 4 & 1), 80 + u16::from(b[2] >> 5 & 1));
    if reply {
        core::mem::swap(&mut src, &mut dst);
        core::mem::swap(&mut sport, &mut dport);
    }
    let l4 = match b[0] >> 2 & 7 {
        0..=2 => L4::Tcp(TcpSegment {
            src_port: sport,
            dst_port: dport,
            flags: TcpFlags(b[3]),
            seq: u32::from(b[4]) << 12,
            ack: u32::from(b[5]) << 12,
            window: u16::from(b[6] & 0xf0) << 8,
            wscale: (b[3] & 0x40 != 0).then_some(b[6] & 0x0f),
            payload_len: u32::from(b[6] & 0x0f) << 10,
        }),
        3 => L4::Udp {
            src_port: sport,
            dst_port: dport,
        },
        4 => {
            let t = if v6 {
                [icmp::V6_ECHO_REQUEST, icmp::V6_ECHO_REPLY]
            } else {
                [icmp::ECHO_REQUEST, icmp::ECHO_REPLY]
            };
            L4::Icmp(IcmpMessage {
                icmp_type: t[usize::from(b[3] & 1)],
                code: b[3] >> 7,
                id: u16::from(b[4] & 3),
                inner: None,
            })
        }
        5 => {
            // An error about the packet `dst` would have sent to `src`.
            let proto = [6, 17, if v6 { 58 } else { 1 }, 47][usize::from(b[5] & 3)];
            let mut inner = Tuple::ports(dst, src, proto, dport, sport);
            if proto == 1 || proto == 58 {
                inner.icmp_type = if v6 {
                    icmp::V6_ECHO_REQUEST
                } else {
                    icmp::ECHO_REQUEST
                };
                inner.src_port = u16::from(b[4] & 3);
                inner.dst_port = inner.src_port;
            }
            L4::Icmp(IcmpMessage {
                icmp_type: if v6 {
                    icmp::V6_DEST_UNREACH
                } else {
                    icmp::DEST_UNREACH
                },
                code: 1,
                id: 0,
                inner: Some(inner),
            })
        }
        _ => L4::Other {
            proto: 47 + (b[3] & 1),
        },
    };
    Packet {
        src,
        dst,
        fragment: b[0] & 0xe0 == 0xe0,
        l4,
    }
}

fn check(r: &CtResult, zone: u16) {
    let s = r.state;
    assert!(s.contains(CtState::TRK));
    assert_eq!(r.zone, zone);
    assert_eq!(s.contains(CtState::INV), r.invalid.is_some());
    if s.contains(CtState::INV) {
        assert_eq!(s.bits() & !(CtState::INV | CtState::TRK).bits(), 0);
    }
    assert!(!(s.contains(CtState::NEW) && s.contains(CtState::EST)));
    assert!(!s.contains(CtState::RPL) || s.contains(CtState::EST) || s.contains(CtState::REL));
    if r.refused.is_some() {
        assert_eq!(s, CtState::TRK | CtState::NEW);
        assert!(!r.has_connection());
    }
    if !r.has_connection() && !s.contains(CtState::INV) {
        assert_eq!((r.mark, r.label), (0, 0));
    }
}

fn invariants(ct: &Conntrack, now: u64) {
    // Only zones 0..4 are used (`zone_counts` would scan all 65,536).
    let sum: u32 = (0..4).map(|z| ct.zone_count(z)).sum();
    assert_eq!(sum as usize, ct.len());
    assert!(ct.len() <= MAX as usize);
    let mut dumped = 0;
    for e in ct.dump(now, None) {
        assert!(e.expires_ms > now);
        assert_eq!((e.orig.src, e.orig.dst), (e.reply.dst, e.reply.src));
        dumped += 1;
    }
    assert!(dumped <= ct.len());
    // Every connection created is still there or was removed once.
    let st = ct.stats();
    assert_eq!(
        st.created,
        st.expired + st.flushed + st.reopened + ct.len() as u64
    );
}

fuzz_target!(|data: &[u8]| {
    let ct = tracker();
    ct.flush(None);
    ct.set_default_zone_limit(None);
    for z in 0..4 {
        ct.set_zone_limit(z, None);
    }
    ct.set_tcp_liberal(false);
    let mut now = 0u64;
    let mut prev: Option<(Packet, CtResult)> = None;
    for b in data.chunks_exact(8) {
        now += u64::from(b[7]) * 250;
        let zone = u16::from(b[1] & 3);
        match b[0] & 3 {
            3 => {
                match b[1] >> 2 & 7 {
                    0 => drop(ct.sweep(now, usize::from(b[2]) * 8)),
                    1 => drop(ct.flush(Some(zone))),
                    2 => ct.set_zone_limit(zone, Some(u32::from(b[2] & 7))),
                    3 => ct.set_default_zone_limit(Some(u32::from(b[2] & 15))),
                    4 => ct.set_tcp_liberal(b[2] & 1 != 0),
                    5 => {
                        if let Some(e) = ct.dump(now, Some(zone)).next() {
                            assert!(ct.flush_tuple(zone, &e.reply));
                        }
                    }
                    _ => drop(ct.sweep_all(now)),
                }
                prev = None;
            }
            kind => {
                // Kind 2 after a packet: that packet's next step
                // (`execute_next` is for the same packet only).
                let p = match (kind, prev) {
                    (2, Some((pp, _))) => pp,
                    _ => packet(b),
                };
                let mut act = if b[1] & 0x4 != 0 {
                    CtAction::commit(zone)
                } else {
                    CtAction::lookup(zone)
                };
                if b[1] & 0x8 != 0 {
                    act = act
                        .with_mark(u32::from(b[5]), u32::from(b[6]))
                        .with_label(u128::from(b[4]) << 64, u128::MAX);
                }
                let before = ct.zone_count(zone);
                let r = match (kind, prev) {
                    (2, Some((_, pr))) => ct.execute_next(&p, &act, now, &pr),
                    _ => ct.execute(&p, &act, now),
                };
                check(&r, zone);
                if ct.zone_count(zone) > before {
                    // A connection was created: within its zone's limit.
                    assert!(act.commit && r.has_connection() && r.state.contains(CtState::NEW));
                    assert!(ct.zone_limit(zone).is_none_or(|l| ct.zone_count(zone) <= l));
                }
                if p.fragment {
                    assert_eq!(r.invalid, Some(conntrack::InvalidReason::Fragment));
                }
                prev = Some((p, r));
            }
        }
        invariants(ct, now);
    }
});
