//! Each controller action's frame, byte for byte, as pinctrl builds it
//! (OVN 23.03 `controller/pinctrl.c`), with the nested actions northd
//! writes around it applied to the new packet's fields. The expected
//! frames are written out header by header from pinctrl's code; their
//! checksums are computed here independently of the crate.

mod common;

use common::*;
use ovn_lflow::{Field, Flow};
use ovn_pinctrl::{build, emit, extract, start_flow, ControllerAction as A, Error, Kind};

const VM: u128 = 0x5054_0000_0001;
const VM2: u128 = 0x5054_0000_0002;
const RTR: u128 = 0x0000_0000_ff01;
const VM_IP: u128 = 0x0a00_0005;

/// The flow of `frame` as the switch has it at the action: its header
/// fields and a logical input port.
fn at_of(frame: &[u8]) -> Flow {
    extract(frame)
        .with(Field::LogInport, 3)
        .with(Field::Xxreg0, 0xabcd)
}

fn udp_from_vm(ttl: u128, len: usize) -> Vec<u8> {
    let f = ip4_flow(VM, RTR, VM_IP, 0x0808_0808, 17)
        .with(Field::IpTtl, ttl)
        .with(Field::UdpSrc, 5000)
        .with(Field::UdpDst, 53);
    emit(
        &f,
        &Kind::Udp {
            data: &vec![0x5a; len],
        },
    )
    .unwrap()
}

#[test]
fn arp_asks_for_the_next_hop_as_lr_in_arp_request_does() {
    let at = ip4_flow(RTR, 0, VM_IP, 0xac10_0009, 17).with(Field::VlanTci, 0x1005);
    let rx = emit(
        &at.clone().with(Field::UdpDst, 7),
        &Kind::Udp { data: b"x" },
    )
    .unwrap();
    let start = start_flow(A::Arp, &at).unwrap();
    assert_eq!(start.get(Field::ArpSpa), VM_IP, "arp.spa starts as ip4.src");
    assert_eq!(start.get(Field::ArpSha), RTR);
    assert_eq!(
        start.get(Field::Xxreg0),
        0,
        "registers come from the packet"
    );
    // arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0; arp.op = 1; output; };
    let fin = start
        .with(Field::EthDst, 0xffff_ffff_ffff)
        .with(Field::ArpSpa, 0xac10_0001)
        .with(Field::ArpTpa, 0xac10_00fe);
    let got = build(A::Arp, &rx, &at, &fin).unwrap();
    let want = hex(
        "ffffffffffff 00000000ff01 8100 0005 0806 | 0001 0800 06 04 0001
         00000000ff01 ac100001 000000000000 ac1000fe",
    );
    assert_eq!(got, want);
    etherparse_check(&got);
}

#[test]
fn arp_needs_ipv4() {
    let at = ip6_flow(RTR, 0, 1, 2, 17);
    assert_eq!(
        start_flow(A::Arp, &at),
        Err(Error::WrongPacket {
            action: "arp",
            needs: "an IPv4 packet"
        })
    );
}

#[test]
fn nd_ns_solicits_the_destination_from_a_link_local_source() {
    let dst: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0009;
    let at = ip6_flow(RTR, 0, 0x2001_0db8 << 96 | 1, dst, 17).with(Field::VlanTci, 0x1005);
    let rx = emit(&at, &Kind::Udp { data: b"x" }).unwrap();
    let start = start_flow(A::NdNs, &at).unwrap();
    // nd_ns { nd.target = xxreg0; output; }: the same target here.
    let got = build(A::NdNs, &rx, &at, &start.clone().with(Field::NdTarget, dst)).unwrap();
    let mut want = hex("3333ff000009 00000000ff01 86dd | 60000000 0020 3a ff
         fe80000000000000 020000fffe00ff01  ff020000000000000000 0001 ff000009
         | 87 00 0000 00000000 20010db8000000000000000000000009 | 01 01 00000000ff01");
    let p = pseudo6(&want[22..38], &want[38..54], 32, 58);
    fill_csum(&mut want, 54, 56, &p);
    assert_eq!(got, want, "no VLAN tag: pinctrl pushes none for ND");
    etherparse_check(&got);
}

/// A neighbour solicitation from the VM for `fd00::1`.
fn solicitation() -> Vec<u8> {
    let target: u128 = 0xfd00 << 112 | 1;
    let f = ip6_flow(
        VM,
        0x3333_ff00_0001,
        0xfe80 << 112 | 0x5054_00ff_fe00_0001,
        0xff02 << 112 | 0x1_ff00_0001,
        58,
    )
    .with(Field::IpTtl, 255)
    .with(Field::Icmpv6Type, 135)
    .with(Field::NdTarget, target)
    .with(Field::NdSll, VM);
    emit(&f, &Kind::NdNs).unwrap()
}

fn advertisement(action: A, flags: &str) {
    let rx = solicitation();
    let at = at_of(&rx);
    let start = start_flow(action, &at).unwrap();
    assert_eq!(
        start.get(Field::EthSrc),
        0x3333_ff00_0001,
        "from the solicitation's eth.dst"
    );
    assert_eq!(start.get(Field::NdTll), 0x3333_ff00_0001);
    // nd_na { eth.src = E; ip6.src = A; nd.target = A; nd.tll = E; outport = inport; ... }
    let a: u128 = 0xfd00 << 112 | 1;
    let fin = start
        .with(Field::EthSrc, RTR)
        .with(Field::Ipv6Src, a)
        .with(Field::NdTarget, a)
        .with(Field::NdTll, RTR);
    let got = build(action, &rx, &at, &fin).unwrap();
    let mut want = hex(&format!(
        "505400000001 00000000ff01 86dd | 60000000 0020 3a ff
         fd000000000000000000000000000001 fe80000000000000505400fffe000001
         | 88 00 0000 {flags} fd000000000000000000000000000001 | 02 01 00000000ff01"
    ));
    let p = pseudo6(&want[22..38], &want[38..54], 32, 58);
    fill_csum(&mut want, 54, 56, &p);
    assert_eq!(got, want);
    etherparse_check(&got);
}

#[test]
fn nd_na_is_solicited_and_overrides() {
    advertisement(A::NdNa, "60000000");
}

#[test]
fn nd_na_router_also_sets_the_router_flag() {
    advertisement(A::NdNaRouter, "e0000000");
}

#[test]
fn nd_na_needs_a_solicitation() {
    let rx = udp_from_vm(64, 4);
    assert!(matches!(
        start_flow(A::NdNa, &at_of(&rx)),
        Err(Error::WrongPacket { .. })
    ));
}

#[test]
fn icmp4_time_exceeded_quotes_the_whole_datagram() {
    let rx = udp_from_vm(1, 100);
    let at = at_of(&rx);
    let start = start_flow(A::Icmp4, &at).unwrap();
    assert_eq!(
        (start.get(Field::Icmpv4Type), start.get(Field::Icmpv4Code)),
        (3, 3)
    );
    assert_eq!(start.get(Field::IpTtl), 255);
    // icmp4 { eth.dst <-> eth.src; icmp4.type = 11; icmp4.code = 0;
    //         ip4.dst = ip4.src; ip4.src = 10.0.0.1; ip.ttl = 255; next; };
    let fin = start
        .clone()
        .with(Field::EthSrc, start.get(Field::EthDst))
        .with(Field::EthDst, start.get(Field::EthSrc))
        .with(Field::Icmpv4Type, 11)
        .with(Field::Icmpv4Code, 0)
        .with(Field::Ipv4Dst, VM_IP)
        .with(Field::Ipv4Src, 0x0a00_0001);
    let got = build(A::Icmp4, &rx, &at, &fin).unwrap();
    let mut want = hex(
        "505400000001 00000000ff01 0800 | 45 00 009c 0000 4000 ff 01 0000 0a000001 0a000005
         | 0b 00 0000 00000000",
    );
    want.extend_from_slice(&rx[14..]);
    fill_ip4_csum(&mut want, 14);
    fill_csum(&mut want, 34, 36, &[]);
    assert_eq!(got, want);
    etherparse_check(&got);
}

#[test]
fn icmp4_error_frag_needed_quotes_534_bytes_of_the_rewritten_datagram() {
    let rx = udp_from_vm(64, 1472);
    assert_eq!(rx.len(), 1514);
    // The pipeline had decremented the TTL and routed the packet.
    let at = at_of(&rx)
        .with(Field::IpTtl, 63)
        .with(Field::EthSrc, RTR)
        .with(Field::EthDst, 0x0200_0000_0009);
    let start = start_flow(A::Icmp4Error, &at).unwrap();
    assert_eq!(
        start.get(Field::Icmpv4Code),
        1,
        "icmp4_error never says port unreachable"
    );
    // icmp4_error { icmp4.type = 3; icmp4.code = 4; icmp4.frag_mtu = 1442;
    //   eth.dst = E; ip4.dst = ip4.src; ip4.src = I; ip.ttl = 255; ... };
    let fin = start
        .with(Field::Icmpv4Type, 3)
        .with(Field::Icmpv4Code, 4)
        .with(Field::Icmp4FragMtu, 1442)
        .with(Field::EthDst, VM)
        .with(Field::Ipv4Dst, VM_IP)
        .with(Field::Ipv4Src, 0x0a00_0001);
    let got = build(A::Icmp4Error, &rx, &at, &fin).unwrap();
    let mut quoted = rx[14..14 + 534].to_vec();
    quoted[8] = 63;
    fill_ip4_csum(&mut quoted, 0);
    let mut want = hex(
        "505400000001 00000000ff01 0800 | 45 00 0232 0000 4000 ff 01 0000 0a000001 0a000005
         | 03 04 0000 0000 05a2",
    );
    want.extend_from_slice(&quoted);
    fill_ip4_csum(&mut want, 14);
    fill_csum(&mut want, 34, 36, &[]);
    assert_eq!(got.len(), 576);
    assert_eq!(got, want);
    etherparse_check(&got);
}

#[test]
fn icmp6_error_packet_too_big_quotes_1218_bytes() {
    let src: u128 = 0xfd00 << 112 | 5;
    let dst: u128 = 0x2001_0db8 << 96 | 7;
    let f = ip6_flow(VM, RTR, src, dst, 6)
        .with(Field::TcpSrc, 40000)
        .with(Field::TcpDst, 443);
    let rx = emit(
        &f,
        &Kind::Tcp {
            seq: 1,
            ack: 2,
            window: 512,
            data: &[0x11; 1440],
        },
    )
    .unwrap();
    let at = at_of(&rx);
    // icmp6_error { icmp6.type = 2; icmp6.code = 0; icmp6.frag_mtu = 1422;
    //   eth.dst = E; ip6.dst = ip6.src; ip6.src = I; ip.ttl = 255; ... };
    let router: u128 = 0xfd00 << 112 | 1;
    let fin = start_flow(A::Icmp6Error, &at)
        .unwrap()
        .with(Field::Icmpv6Type, 2)
        .with(Field::Icmpv6Code, 0)
        .with(Field::Icmp6FragMtu, 1422)
        .with(Field::EthDst, VM)
        .with(Field::EthSrc, RTR)
        .with(Field::Ipv6Dst, src)
        .with(Field::Ipv6Src, router);
    let got = build(A::Icmp6Error, &rx, &at, &fin).unwrap();
    let mut want = hex("505400000001 00000000ff01 86dd | 60000000 04ca 3a ff
         fd000000000000000000000000000001 fd000000000000000000000000000005
         | 02 00 0000 0000058e");
    want.extend_from_slice(&rx[14..14 + 1218]);
    let p = pseudo6(&want[22..38], &want[38..54], 8 + 1218, 58);
    fill_csum(&mut want, 54, 56, &p);
    assert_eq!(got.len(), 1280);
    assert_eq!(got, want);
    etherparse_check(&got);
}

#[test]
fn reject_of_udp_over_ipv6_is_port_unreachable_back_to_the_sender() {
    let src: u128 = 0xfd00 << 112 | 5;
    let dst: u128 = 0xfd00 << 112 | 6;
    let f = ip6_flow(VM, VM2, src, dst, 17)
        .with(Field::UdpSrc, 1000)
        .with(Field::UdpDst, 9);
    let rx = emit(&f, &Kind::Udp { data: b"abc" }).unwrap();
    let at = at_of(&rx);
    let start = start_flow(A::Reject, &at).unwrap();
    let got = build(A::Reject, &rx, &at, &start).unwrap();
    let mut want = hex("505400000001 505400000002 86dd | 60000000 003b 3a ff
         fd000000000000000000000000000006 fd000000000000000000000000000005
         | 01 04 0000 00000000");
    want.extend_from_slice(&rx[14..]);
    let p = pseudo6(&want[22..38], &want[38..54], 8 + 51, 58);
    fill_csum(&mut want, 54, 56, &p);
    assert_eq!(got, want);
    etherparse_check(&got);
}

fn syn(seq: u32, flags: u128) -> Vec<u8> {
    let f = ip4_flow(VM, VM2, VM_IP, 0x0a00_0006, 6)
        .with(Field::TcpSrc, 40000)
        .with(Field::TcpDst, 80)
        .with(Field::TcpFlags, flags);
    emit(
        &f,
        &Kind::Tcp {
            seq,
            ack: 0,
            window: 64240,
            data: b"",
        },
    )
    .unwrap()
}

#[test]
fn reject_of_a_syn_is_a_reset_acking_seq_plus_one() {
    let rx = syn(0x0102_0304, 0x002);
    let at = at_of(&rx);
    let start = start_flow(A::Reject, &at).unwrap();
    // reject { outport <-> inport; next(pipeline=egress, table=...); }: no header change.
    let got = build(A::Reject, &rx, &at, &start).unwrap();
    let mut want = hex(
        "505400000001 505400000002 0800 | 45 00 0028 0000 4000 3f 06 0000 0a000006 0a000005
         | 0050 9c40 00000000 01020305 5014 0000 0000 0000",
    );
    fill_ip4_csum(&mut want, 14);
    let p = pseudo4(&want[26..30], &want[30..34], 20, 6);
    fill_csum(&mut want, 34, 50, &p);
    assert_eq!(got, want);
    etherparse_check(&got);
}

#[test]
fn tcp_reset_swaps_the_ports_but_not_the_addresses() {
    let rx = syn(7, 0x010);
    let at = at_of(&rx);
    let start = start_flow(A::TcpReset, &at).unwrap();
    assert_eq!(start.get(Field::Ipv4Src), VM_IP);
    assert_eq!(
        (start.get(Field::TcpSrc), start.get(Field::TcpDst)),
        (80, 40000)
    );
    assert_eq!(start.get(Field::IpTtl), 63);
    // tcp_reset { eth.dst <-> eth.src; ip4.dst <-> ip4.src; next; };
    let fin = start
        .clone()
        .with(Field::EthSrc, VM2)
        .with(Field::EthDst, VM)
        .with(Field::Ipv4Src, 0x0a00_0006)
        .with(Field::Ipv4Dst, VM_IP);
    let got = build(A::TcpReset, &rx, &at, &fin).unwrap();
    assert_eq!(
        got,
        build(A::Reject, &rx, &at, &start_flow(A::Reject, &at).unwrap()).unwrap()
    );
}

#[test]
fn reject_answers_no_reset_and_no_unreachable() {
    let rst = syn(7, 0x004);
    assert!(matches!(
        start_flow(A::Reject, &at_of(&rst)),
        Err(Error::Ignored(_))
    ));
    let f = ip4_flow(VM, VM2, VM_IP, 0x0a00_0006, 1).with(Field::Icmpv4Type, 3);
    let unreachable = emit(
        &f,
        &Kind::Icmp4 {
            rest: [0; 4],
            data: b"",
        },
    )
    .unwrap();
    assert!(matches!(
        start_flow(A::Reject, &at_of(&unreachable)),
        Err(Error::Ignored(_))
    ));
}

fn sctp(vtag: u32, chunk: &[u8]) -> Vec<u8> {
    let f = ip4_flow(VM, VM2, VM_IP, 0x0a00_0006, 132)
        .with(Field::SctpSrc, 5000)
        .with(Field::SctpDst, 5001);
    emit(
        &f,
        &Kind::Sctp {
            vtag,
            chunks: chunk,
        },
    )
    .unwrap()
}

/// CRC32c, bit by bit (RFC 9260 Appendix A), written again here.
fn crc32c(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82f6_3b78
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn abort(vtag: &str, flags: &str) -> Vec<u8> {
    let mut want = hex(&format!(
        "505400000001 505400000002 0800 | 45 00 0024 0000 4000 3f 84 0000 0a000006 0a000005
         | 1389 1388 {vtag} 00000000 | 06 {flags} 0004"
    ));
    fill_ip4_csum(&mut want, 14);
    let crc = crc32c(&want[34..]);
    want[42..46].copy_from_slice(&crc.to_le_bytes());
    want
}

#[test]
fn reject_of_an_sctp_init_aborts_with_the_initiate_tag() {
    let init = hex("01 00 0014 deadbeef 00010000 0001 0001 00000001");
    let rx = sctp(0, &init);
    let at = at_of(&rx);
    let got = build(A::Reject, &rx, &at, &start_flow(A::Reject, &at).unwrap()).unwrap();
    assert_eq!(got, abort("deadbeef", "00"));
    etherparse_check(&got);
}

#[test]
fn reject_of_other_sctp_chunks_reflects_the_tag() {
    let data = hex("00 03 0014 00000001 0000 0000 00000000 61626364");
    let rx = sctp(0x1122_3344, &data);
    let at = at_of(&rx);
    let got = build(A::Reject, &rx, &at, &start_flow(A::Reject, &at).unwrap()).unwrap();
    assert_eq!(got, abort("11223344", "01"));
}

#[test]
fn sctp_abort_never_answers_an_abort() {
    let rx = sctp(0x1122_3344, &hex("06 00 0004"));
    let at = at_of(&rx);
    let start = start_flow(A::SctpAbort, &at).unwrap();
    assert_eq!(
        build(A::SctpAbort, &rx, &at, &start),
        Err(Error::Ignored("an SCTP ABORT"))
    );
    let cut = sctp(0, &hex("01 00 0014 deadbeef"));
    let at = at_of(&cut);
    let start = start_flow(A::SctpAbort, &at).unwrap();
    assert!(matches!(
        build(A::SctpAbort, &cut, &at, &start),
        Err(Error::Truncated(_))
    ));
}

#[test]
fn icmp_quotes_never_run_past_the_frame() {
    let mut rx = udp_from_vm(64, 40);
    rx[16..18].copy_from_slice(&2000u16.to_be_bytes()); // total length lies
    let at = at_of(&rx)
        .with(Field::EthType, 0x0800)
        .with(Field::IpProto, 17);
    let got = build(
        A::Icmp4Error,
        &rx,
        &at,
        &start_flow(A::Icmp4Error, &at).unwrap(),
    )
    .unwrap();
    assert_eq!(got.len(), 14 + 20 + 8 + (rx.len() - 14));
    rx[16..18].copy_from_slice(&19u16.to_be_bytes());
    assert!(matches!(
        build(
            A::Icmp4Error,
            &rx,
            &at,
            &start_flow(A::Icmp4Error, &at).unwrap()
        ),
        Err(Error::Malformed(_))
    ));
}
