//! Properties over generated packets, checked against two models: the
//! crate's own parser (what is emitted parses back to the flow it came
//! from) and etherparse (lengths and checksums).

mod common;

use common::etherparse_check;
use ovn_lflow::{Field, Flow};
use ovn_pinctrl::{build, emit, extract, rewrite, start_flow, ControllerAction as A, Kind};
use proptest::prelude::*;

/// Fields that are not the packet's headers.
const METADATA: [Field; 12] = [
    Field::LogInport,
    Field::LogOutport,
    Field::LogFlags,
    Field::Xxreg0,
    Field::Xxreg1,
    Field::Xreg4,
    Field::CtState,
    Field::CtMark,
    Field::CtLabel,
    Field::PktMark,
    Field::Icmp4FragMtu,
    Field::Icmp6FragMtu,
];

fn headers(f: &Flow) -> Vec<(Field, u128)> {
    Field::all()
        .filter(|x| !METADATA.contains(x))
        .map(|x| (x, f.get(x)))
        .collect()
}

/// A received packet: IPv4 or IPv6, TCP, UDP, SCTP or ICMP, maybe tagged.
fn packet() -> impl Strategy<Value = (Flow, Vec<u8>)> {
    (
        any::<bool>(),
        0usize..4,
        any::<[u128; 4]>(),
        any::<[u16; 4]>(),
        proptest::option::of(0u16..0x1000),
        proptest::collection::vec(any::<u8>(), 0..200),
        any::<u32>(),
    )
        .prop_map(|(v6, l4, addrs, ports, vlan, data, seq)| {
            let mut f = Flow::new()
                .with(Field::EthSrc, addrs[0])
                .with(Field::EthDst, addrs[1])
                .with(Field::IpTtl, u128::from(ports[3] & 0xff))
                .with(Field::IpDscp, u128::from(ports[3] >> 10))
                .with(Field::LogInport, 5)
                .with(Field::Xxreg1, addrs[3]);
            if let Some(v) = vlan {
                f.set(Field::VlanTci, u128::from(v | 0x1000));
            }
            if v6 {
                f.set(Field::EthType, 0x86dd);
                f.set(Field::Ipv6Src, addrs[2]);
                f.set(Field::Ipv6Dst, addrs[3]);
                f.set(Field::Ipv6Label, u128::from(seq & 0xf_ffff));
            } else {
                f.set(Field::EthType, 0x0800);
                f.set(Field::Ipv4Src, addrs[2]);
                f.set(Field::Ipv4Dst, addrs[3]);
            }
            let (proto, src, dst) = [
                (6, Field::TcpSrc, Field::TcpDst),
                (17, Field::UdpSrc, Field::UdpDst),
                (132, Field::SctpSrc, Field::SctpDst),
                if v6 {
                    (58, Field::Icmpv6Type, Field::Icmpv6Code)
                } else {
                    (1, Field::Icmpv4Type, Field::Icmpv4Code)
                },
            ][l4];
            f.set(Field::IpProto, proto);
            f.set(src, u128::from(ports[0]));
            f.set(dst, u128::from(ports[1]));
            let kind = match proto {
                6 => {
                    f.set(Field::TcpFlags, u128::from(ports[2] & 0x0fff));
                    Kind::Tcp {
                        seq,
                        ack: !seq,
                        window: ports[2],
                        data: &data,
                    }
                }
                17 => Kind::Udp { data: &data },
                132 => Kind::Sctp {
                    vtag: seq,
                    chunks: &data,
                },
                _ if v6 => {
                    // Not ND: ND would carry its target and options.
                    f.set(Field::Icmpv6Type, u128::from(ports[0] as u8 & 0x7f));
                    Kind::Icmp6 {
                        rest: seq.to_be_bytes(),
                        data: &data,
                    }
                }
                _ => Kind::Icmp4 {
                    rest: seq.to_be_bytes(),
                    data: &data,
                },
            };
            if proto == 1 || proto == 58 {
                let (t, c) = if v6 {
                    (Field::Icmpv6Type, Field::Icmpv6Code)
                } else {
                    (Field::Icmpv4Type, Field::Icmpv4Code)
                };
                f.set(t, f.get(t) & 0xff);
                f.set(c, f.get(c) & 0xff);
            }
            let frame = emit(&f, &kind).unwrap();
            (f, frame)
        })
}

const ACTIONS: [A; 11] = [
    A::Arp,
    A::NdNs,
    A::NdNa,
    A::NdNaRouter,
    A::Icmp4,
    A::Icmp4Error,
    A::Icmp6,
    A::Icmp6Error,
    A::TcpReset,
    A::SctpAbort,
    A::Reject,
];

proptest! {
    #[test]
    fn what_is_emitted_parses_back_to_its_flow((f, frame) in packet()) {
        let back = extract(&frame);
        let mut want = headers(&f);
        // `emit` always sends an unfragmented packet.
        want.retain(|(x, _)| *x != Field::IpFrag);
        for (x, v) in want {
            prop_assert_eq!(back.get(x), v, "{}", x);
        }
        etherparse_check(&frame);
    }

    #[test]
    fn a_controller_actions_frame_carries_its_start_flow((f, frame) in packet()) {
        for a in ACTIONS {
            let Ok(start) = start_flow(a, &f) else { continue };
            // Nothing pinctrl takes from the flow is lost on the way.
            prop_assert_eq!(start.get(Field::LogInport), 5);
            prop_assert_eq!(start.get(Field::Xxreg1), f.get(Field::Xxreg1));
            let Ok(out) = build(a, &frame, &f, &start) else { continue };
            prop_assert_eq!(headers(&extract(&out)), headers(&start), "{}", a.name());
            etherparse_check(&out);
        }
    }

    #[test]
    fn rewriting_gives_the_frame_of_the_new_flow(
        (f, frame) in packet(),
        new in any::<[u128; 3]>(),
        ttl in any::<u8>(),
    ) {
        let v6 = f.get(Field::EthType) == 0x86dd;
        let mut g = f.clone()
            .with(Field::EthDst, new[0])
            .with(Field::IpTtl, u128::from(ttl))
            .with(if v6 { Field::Ipv6Src } else { Field::Ipv4Src }, new[1]);
        match f.get(Field::IpProto) {
            6 => g.set(Field::TcpDst, new[2]),
            17 => g.set(Field::UdpDst, new[2]),
            132 => g.set(Field::SctpDst, new[2]),
            _ => {}
        }
        // Updated in place (RFC 1624), checksums may come out as 0xffff
        // where a fresh one is 0: the same number in one's complement.
        let mut got = frame.clone();
        rewrite(&mut got, &g);
        let kind_frame = rewrite_model(&g, &frame);
        let (got, kind_frame) = (normalized(got), normalized(kind_frame));
        prop_assert_eq!(got, kind_frame);
    }
}

/// The model for `rewrite`: the frame `g` emits with `frame`'s payload.
fn rewrite_model(g: &Flow, frame: &[u8]) -> Vec<u8> {
    let h = ovn_pinctrl::Headers::parse(frame).unwrap();
    let ip = h.ip.unwrap();
    let l4 = &frame[ip.l4.unwrap()..ip.end];
    let kind = match ip.proto {
        6 => Kind::Tcp {
            seq: u32::from_be_bytes(l4[4..8].try_into().unwrap()),
            ack: u32::from_be_bytes(l4[8..12].try_into().unwrap()),
            window: u16::from_be_bytes(l4[14..16].try_into().unwrap()),
            data: &l4[20..],
        },
        17 => Kind::Udp { data: &l4[8..] },
        132 => Kind::Sctp {
            vtag: u32::from_be_bytes(l4[4..8].try_into().unwrap()),
            chunks: &l4[12..],
        },
        1 => Kind::Icmp4 {
            rest: l4[4..8].try_into().unwrap(),
            data: &l4[8..],
        },
        _ => Kind::Icmp6 {
            rest: l4[4..8].try_into().unwrap(),
            data: &l4[8..],
        },
    };
    emit(g, &kind).unwrap()
}

/// `frame` with an IPv4 header or TCP/ICMP checksum of 0xffff written 0.
fn normalized(mut frame: Vec<u8>) -> Vec<u8> {
    let h = ovn_pinctrl::Headers::parse(&frame).unwrap();
    let ip = h.ip.unwrap();
    let mut at = vec![];
    if !ip.v6 {
        at.push(h.l3 + 10);
    }
    match ip.proto {
        6 => at.push(ip.l4.unwrap() + 16),
        1 | 58 => at.push(ip.l4.unwrap() + 2),
        _ => {}
    }
    for a in at {
        if frame[a..a + 2] == [0xff, 0xff] {
            frame[a..a + 2].fill(0);
        }
    }
    frame
}
