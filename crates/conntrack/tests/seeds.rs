//! The fuzz seeds in `fuzz/seeds/`: packets built by etherparse for the
//! `parse` target, operation lists for the `sequence` target. This test
//! checks that they are there and still mean what they should; regenerate
//! with `CONNTRACK_BLESS=1 cargo test -p conntrack --test seeds`.

use std::path::PathBuf;

use conntrack::{parse, Checksums};
use etherparse::{Icmpv4Type, Icmpv6Type, PacketBuilder, TcpOptionElement};

const A4: [u8; 4] = [10, 0, 0, 1];
const B4: [u8; 4] = [10, 0, 0, 2];
const A6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const B6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

fn packets() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .tcp(40000, 80, 1, 65535)
        .syn()
        .options(&[
            TcpOptionElement::MaximumSegmentSize(1460),
            TcpOptionElement::WindowScale(7),
        ])
        .unwrap()
        .write(&mut b, &[])
        .unwrap();
    out.push(("tcp4_syn_wscale", b));
    let mut b = Vec::new();
    PacketBuilder::ipv6(A6, B6, 64)
        .tcp(40000, 443, 1, 512)
        .ack(9)
        .psh()
        .write(&mut b, b"GET / HTTP/1.1\r\n")
        .unwrap();
    out.push(("tcp6_data", b));
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .udp(5353, 53)
        .write(&mut b, &[1; 12])
        .unwrap();
    out.push(("udp4", b));
    let mut b = Vec::new();
    PacketBuilder::ipv6(A6, B6, 64)
        .icmpv6_echo_request(7, 1)
        .write(&mut b, &[0; 8])
        .unwrap();
    out.push(("icmp6_echo", b));
    let mut inner = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .udp(5353, 53)
        .write(&mut inner, &[0; 8])
        .unwrap();
    inner.truncate(28);
    let mut b = Vec::new();
    PacketBuilder::ipv4(B4, A4, 64)
        .icmpv4(Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Port,
        ))
        .write(&mut b, &inner)
        .unwrap();
    out.push(("icmp4_port_unreach", b));
    let mut inner = Vec::new();
    PacketBuilder::ipv6(A6, B6, 64)
        .tcp(1, 2, 3, 4)
        .write(&mut inner, &[0; 100])
        .unwrap();
    let mut b = Vec::new();
    PacketBuilder::ipv6(B6, A6, 64)
        .icmpv6(Icmpv6Type::PacketTooBig { mtu: 1280 })
        .write(&mut b, &inner[..60])
        .unwrap();
    out.push(("icmp6_too_big", b));
    let mut b = Vec::new();
    PacketBuilder::ipv4(A4, B4, 64)
        .udp(1, 2)
        .write(&mut b, &[0; 8])
        .unwrap();
    b[6] |= 0x20;
    fix_ipv4_checksum(&mut b);
    out.push(("ipv4_first_fragment", b));
    out
}

fn fix_ipv4_checksum(b: &mut [u8]) {
    b[10..12].fill(0);
    let sum: u32 = b[..20]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    b[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
}

/// 8 bytes per operation: `[op, zone|commit|mark|reply|v6, hosts, tcp
/// flags, seq, ack, window|len, dt]` (see `fuzz_targets/sequence.rs`).
fn sequences() -> Vec<(&'static str, Vec<u8>)> {
    let tcp = [
        [0x00, 0x04, 0x04, 0x02, 1, 0, 0xf0, 1], // SYN, commit
        [0x00, 0x10, 0x04, 0x12, 5, 1, 0xf0, 1], // SYN|ACK reply
        [0x00, 0x00, 0x04, 0x10, 1, 5, 0xf0, 1], // ACK
        [0x00, 0x00, 0x04, 0x18, 1, 5, 0xf1, 1], // data
        [0x02, 0x0c, 0x04, 0x18, 1, 5, 0xf1, 0], // again, execute_next + commit with mark
        [0x00, 0x00, 0x04, 0x11, 2, 5, 0xf0, 1], // FIN|ACK
        [0x00, 0x10, 0x04, 0x11, 5, 2, 0xf0, 1], // FIN|ACK reply
        [0x03, 0x00, 0x40, 0, 0, 0, 0, 255],     // sweep
    ];
    let udp_icmp = [
        [0x0c, 0x05, 0x04, 0, 0, 0, 0, 1], // UDP, commit, zone 1
        [0x0c, 0x11, 0x04, 0, 0, 0, 0, 1], // UDP reply
        [0x10, 0x06, 0x04, 0, 0, 0, 0, 1], // ICMP echo request, commit, zone 2
        [0x10, 0x12, 0x04, 1, 0, 0, 0, 1], // echo reply
        [0x14, 0x02, 0x04, 0, 0, 2, 0, 1], // error about the echo
        [0x03, 0x09, 0x01, 0, 0, 0, 0, 0], // zone 1 limit 1
        [0x0c, 0x25, 0x24, 0, 0, 0, 0, 1], // IPv6 UDP, commit, zone 1: refused
        [0xe0, 0x04, 0x04, 0, 0, 0, 0, 1], // fragment
        [0x03, 0x04, 0x00, 0, 0, 0, 0, 0], // flush zone 0
    ];
    vec![
        ("tcp_handshake_fin", tcp.concat()),
        ("udp_icmp_limits", udp_icmp.concat()),
    ]
}

fn dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target)
}

fn check_or_bless(target: &str, seeds: Vec<(&'static str, Vec<u8>)>) {
    let bless = std::env::var_os("CONNTRACK_BLESS").is_some();
    for (name, bytes) in seeds {
        let path = dir(target).join(name);
        if bless {
            std::fs::create_dir_all(dir(target)).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        } else {
            let on_disk =
                std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(on_disk, bytes, "{} is stale: bless again", path.display());
        }
    }
}

#[test]
fn parse_seeds_parse() {
    let seeds = packets();
    for (name, b) in &seeds {
        assert!(parse(b, Checksums::Verify).is_ok(), "{name}");
    }
    check_or_bless("parse", seeds);
}

#[test]
fn sequence_seeds_are_current() {
    check_or_bless("sequence", sequences());
}
