//! The tracker against a reference model over random operation lists
//! (packets of UDP, ICMP echo, TCP and another protocol between three
//! hosts, in two zones, with and without commit; time passing; sweeps and
//! flushes), as s2n-quic-xdp checks its rings against a model.
//!
//! The model is a plain map from (zone, protocol, unordered endpoint pair)
//! to the original direction and a per-protocol state, written from the
//! rules of Open vSwitch's `conntrack-other.c`, `conntrack-icmp.c` and
//! `conntrack-tcp.c` flag handling. TCP runs with window checks off
//! (`tcp_liberal`) so that the model needs no sequence numbers; windows
//! have their own tests.

use std::collections::HashMap;

use conntrack::packet::icmp;
use conntrack::{
    Config, Conntrack, CtAction, CtState, IcmpMessage, InvalidReason, Packet, Refused, TcpFlags,
    TcpSegment, Timeouts, L4,
};
use proptest::prelude::*;

const HOSTS: [[u8; 4]; 3] = [[10, 0, 0, 1], [10, 0, 0, 2], [10, 0, 0, 3]];
const TCP_FLAGS: [u8; 7] = [0x02, 0x12, 0x10, 0x11, 0x04, 0x14, 0x01];
const ZONE1_LIMIT: usize = 4;
const MAX_CONNS: usize = 7;

#[derive(Debug, Clone, Copy)]
enum Kind {
    Udp(u16, u16),
    Echo(u16, bool),
    Tcp(u16, u16, u8),
    Other(u8),
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Pkt {
        src: usize,
        dst: usize,
        kind: Kind,
        zone: u16,
        commit: bool,
        dt: u64,
    },
    Sweep,
    Flush(u16),
}

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        (1u16..3, 1u16..3).prop_map(|(s, d)| Kind::Udp(s, d)),
        (1u16..3, any::<bool>()).prop_map(|(i, r)| Kind::Echo(i, r)),
        (1u16..3, 1u16..3, 0..TCP_FLAGS.len()).prop_map(|(s, d, f)| Kind::Tcp(s, d, TCP_FLAGS[f])),
        prop::sample::select(vec![47u8, 50]).prop_map(Kind::Other),
    ];
    prop_oneof![
        20 => (0..3usize, 0..3usize, kind, 0u16..2, any::<bool>(), prop::sample::select(vec![0u64, 1, 500, 20_000, 40_000]))
            .prop_map(|(src, dst, kind, zone, commit, dt)| Op::Pkt { src, dst, kind, zone, commit, dt }),
        1 => Just(Op::Sweep),
        1 => (0u16..2).prop_map(Op::Flush),
    ]
}

fn packet(src: usize, dst: usize, kind: Kind) -> Packet {
    let l4 = match kind {
        Kind::Udp(s, d) => L4::Udp {
            src_port: s,
            dst_port: d,
        },
        Kind::Echo(id, request) => L4::Icmp(IcmpMessage {
            icmp_type: if request {
                icmp::ECHO_REQUEST
            } else {
                icmp::ECHO_REPLY
            },
            code: 0,
            id,
            inner: None,
        }),
        Kind::Tcp(s, d, f) => L4::Tcp(TcpSegment {
            src_port: s,
            dst_port: d,
            flags: TcpFlags(f),
            window: 1000,
            ..TcpSegment::default()
        }),
        Kind::Other(proto) => L4::Other { proto },
    };
    Packet {
        src: HOSTS[src].into(),
        dst: HOSTS[dst].into(),
        fragment: false,
        l4,
    }
}

/// (host, port or id, ICMP type)
type Endpoint = (usize, u16, u8);

fn endpoints(src: usize, dst: usize, kind: Kind) -> (u8, Endpoint, Endpoint) {
    match kind {
        Kind::Udp(s, d) => (17, (src, s, 0), (dst, d, 0)),
        Kind::Tcp(s, d, _) => (6, (src, s, 0), (dst, d, 0)),
        Kind::Other(p) => (p, (src, 0, 0), (dst, 0, 0)),
        Kind::Echo(id, true) => (1, (src, id, 8), (dst, id, 0)),
        Kind::Echo(id, false) => (1, (src, id, 0), (dst, id, 8)),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Peer {
    Closed,
    SynSent,
    Established,
    Closing,
    FinWait2,
    TimeWait,
}

#[derive(Debug, Clone, Copy)]
enum St {
    Multi(u8), // 0 first, 1 multiple, 2 bidir
    Icmp(bool),
    Tcp([Peer; 2]),
}

#[derive(Debug, Clone, Copy)]
struct MConn {
    orig_src: Endpoint,
    st: St,
    expires: u64,
}

type MKey = (u16, u8, Endpoint, Endpoint);

#[derive(Default)]
struct Model {
    conns: HashMap<MKey, MConn>,
}

enum Upd {
    Valid,
    ValidNew,
    Invalid,
    Reopen,
}

fn secs(t: u32) -> u64 {
    u64::from(t) * 1000
}

fn tcp_invalid_flags(f: u8) -> bool {
    let (syn, ack, rst, fin) = (f & 2 != 0, f & 0x10 != 0, f & 4 != 0, f & 1 != 0);
    (syn && (rst || fin)) || (!syn && !ack && !rst) || (!ack && fin)
}

fn tcp_timeout(t: &Timeouts, a: Peer, b: Peer) -> u32 {
    use Peer::*;
    if a >= FinWait2 && b >= FinWait2 {
        t.tcp_close
    } else if a >= Closing && b >= Closing {
        t.tcp_time_wait
    } else if a < Established || b < Established {
        t.tcp_syn_recv
    } else if a >= Closing || b >= Closing {
        t.tcp_fin_wait
    } else {
        t.tcp_established
    }
}

/// OVS's flag-driven TCP states with the window check bypassed.
fn tcp_update(p: &mut [Peer; 2], f: u8, reply: bool, t: &Timeouts, exp: &mut u64, now: u64) -> Upd {
    if tcp_invalid_flags(f) {
        return Upd::Invalid;
    }
    let (s, d) = if reply { (1, 0) } else { (0, 1) };
    let (syn, ack, rst, fin) = (f & 2 != 0, f & 0x10 != 0, f & 4 != 0, f & 1 != 0);
    if syn && !ack {
        if p[s] >= Peer::FinWait2 && p[d] >= Peer::FinWait2 {
            return Upd::Reopen;
        }
        if p[s] <= Peer::SynSent {
            p[s] = Peer::SynSent;
            *exp = now + secs(t.tcp_syn_sent);
            return Upd::ValidNew;
        }
    }
    if p[s] < Peer::SynSent {
        p[s] = Peer::SynSent;
    }
    if fin && p[s] < Peer::Closing {
        p[s] = Peer::Closing;
    }
    if ack {
        if p[d] == Peer::SynSent {
            p[d] = Peer::Established;
        } else if p[d] == Peer::Closing {
            p[d] = Peer::FinWait2;
        }
    }
    if rst {
        p[s] = Peer::TimeWait;
        p[d] = Peer::TimeWait;
    }
    *exp = now + secs(tcp_timeout(t, p[0], p[1]));
    Upd::Valid
}

impl Model {
    fn zone_count(&self, zone: u16) -> usize {
        self.conns.keys().filter(|k| k.0 == zone).count()
    }

    /// Expected (state, invalid, refused, has_connection).
    fn step(
        &mut self,
        src: usize,
        dst: usize,
        kind: Kind,
        zone: u16,
        commit: bool,
        now: u64,
    ) -> (CtState, Option<InvalidReason>, Option<Refused>, bool) {
        let t = Timeouts::default();
        let (proto, s, d) = endpoints(src, dst, kind);
        let key = (zone, proto, s.min(d), s.max(d));
        if self.conns.get(&key).is_some_and(|c| now >= c.expires) {
            self.conns.remove(&key);
        }
        let trk = CtState::TRK;
        if let Some(c) = self.conns.get_mut(&key) {
            let reply = s != c.orig_src;
            let u = match (&mut c.st, kind) {
                (St::Multi(m), _) => {
                    *m = if reply { 2 } else { (*m).max(1) };
                    let tm = [t.udp_first, t.udp_single, t.udp_multiple];
                    let to = [t.other_first, t.other_single, t.other_multiple];
                    c.expires = now + secs(if proto == 17 { tm } else { to }[usize::from(*m)]);
                    if *m == 2 {
                        Upd::Valid
                    } else {
                        Upd::ValidNew
                    }
                }
                (St::Icmp(replied), _) => {
                    *replied |= reply;
                    c.expires = now + secs(if *replied { t.icmp_reply } else { t.icmp_first });
                    if *replied {
                        Upd::Valid
                    } else {
                        Upd::ValidNew
                    }
                }
                (St::Tcp(p), Kind::Tcp(_, _, f)) => {
                    tcp_update(p, f, reply, &t, &mut c.expires, now)
                }
                _ => unreachable!(),
            };
            let rpl = if reply { CtState::RPL } else { CtState(0) };
            match u {
                Upd::Valid => return (trk | CtState::EST | rpl, None, None, true),
                Upd::ValidNew => return (trk | CtState::NEW, None, None, true),
                Upd::Invalid => {
                    return (
                        trk | CtState::INV,
                        Some(InvalidReason::TcpFlags),
                        None,
                        false,
                    )
                }
                Upd::Reopen => {
                    self.conns.remove(&key);
                }
            }
        }
        // No connection.
        let (st, timeout) = match kind {
            Kind::Tcp(_, _, f) if tcp_invalid_flags(f) => {
                return (
                    trk | CtState::INV,
                    Some(InvalidReason::TcpFlags),
                    None,
                    false,
                )
            }
            Kind::Tcp(_, _, f) if f & 0x12 != 0x02 => {
                return (
                    trk | CtState::INV,
                    Some(InvalidReason::NotOpener),
                    None,
                    false,
                )
            }
            Kind::Echo(_, false) => {
                return (
                    trk | CtState::INV,
                    Some(InvalidReason::NotOpener),
                    None,
                    false,
                )
            }
            Kind::Tcp(..) => (St::Tcp([Peer::SynSent, Peer::Closed]), t.tcp_syn_sent),
            Kind::Echo(..) => (St::Icmp(false), t.icmp_first),
            Kind::Udp(..) => (St::Multi(0), t.udp_first),
            Kind::Other(_) => (St::Multi(0), t.other_first),
        };
        if !commit {
            return (trk | CtState::NEW, None, None, false);
        }
        if zone == 1 && self.zone_count(1) >= ZONE1_LIMIT {
            return (trk | CtState::NEW, None, Some(Refused::ZoneFull), false);
        }
        if self.conns.len() >= MAX_CONNS {
            return (trk | CtState::NEW, None, Some(Refused::TableFull), false);
        }
        self.conns.insert(
            key,
            MConn {
                orig_src: s,
                st,
                expires: now + secs(timeout),
            },
        );
        (trk | CtState::NEW, None, None, true)
    }
}

fn run(ops: &[Op], shards: usize) -> Result<(), TestCaseError> {
    let ct = Conntrack::new(Config {
        tcp_liberal: true,
        max_connections: MAX_CONNS as u32,
        shards,
        ..Config::default()
    })
    .unwrap();
    ct.set_zone_limit(1, Some(ZONE1_LIMIT as u32));
    let mut model = Model::default();
    let mut now = 0u64;
    for (n, op) in ops.iter().enumerate() {
        match *op {
            Op::Pkt {
                src,
                dst,
                kind,
                zone,
                commit,
                dt,
            } => {
                now += dt;
                let act = if commit {
                    CtAction::commit(zone)
                } else {
                    CtAction::lookup(zone)
                };
                let r = ct.execute(&packet(src, dst, kind), &act, now);
                let want = model.step(src, dst, kind, zone, commit, now);
                let got = (
                    r.state,
                    r.invalid,
                    r.refused,
                    r.has_connection() && !r.state.contains(CtState::INV),
                );
                prop_assert_eq!(got, want, "op {} {:?} at {}", n, op, now);
            }
            Op::Sweep => {
                ct.sweep_all(now);
                model.conns.retain(|_, c| now < c.expires);
            }
            Op::Flush(zone) => {
                let want = model.zone_count(zone);
                model.conns.retain(|k, _| k.0 != zone);
                prop_assert_eq!(ct.flush(Some(zone)), want);
            }
        }
        prop_assert_eq!(ct.len(), model.conns.len(), "after op {} {:?}", n, op);
        prop_assert_eq!(ct.zone_count(1) as usize, model.zone_count(1));
        prop_assert_eq!(
            ct.dump(now, None).count(),
            model.conns.values().filter(|c| now < c.expires).count()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn tracker_matches_the_model(ops in prop::collection::vec(op(), 1..120)) {
        run(&ops, 4)?;
    }

    #[test]
    fn one_shard_matches_the_model_too(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops, 1)?;
    }
}
