//! Wildcard programs, Open vSwitch's megaflows for the logical pipeline: a program the
//! interpreter made without reading a TCP or UDP frame's source address, source port,
//! destination address or destination port ([`ovn_lflow::Flow::reads`]) holds for
//! every frame whose key differs from it only there. A connection's first packet (a
//! new source port, often a new client) then runs a cached program, not the
//! interpreter: what new connections per second through a load balancer or a floating
//! IP cost.
//!
//! Such a program's conntrack results cannot be compared as they are: a new
//! connection's translation names its own ports and addresses. They are compared
//! relative to the packet before each step ([`RelResult`]): each address and port a
//! translation gives is the packet's source, its destination, or a constant (the
//! backend, the floating IP's VM). Two frames whose results agree so took the same
//! path through the pipeline, whose outputs rewrite constants only (a field the
//! pipeline copied from the packet was read, and is in the key).

use std::net::IpAddr;

use conntrack::{CtState, Endpoints};
use flowcache::{FlowKey, Fragment, KeyMask, Wildcards};
use ovn_lflow::{Field, Flow};

use crate::model::lflow::{CtResult, NatSeen};

/// The parts of `key` a program whose pipeline read what `flow` says
/// ([`ovn_lflow::Flow::reads`], [`ovn_lflow::Flow::read_bits`]) may leave out: those
/// of a TCP or UDP frame (not a fragment) whose fields it never read, and of each IP
/// address the bits after the last it read (Open vSwitch's prefix tracking: a route or
/// a CIDR test reads a prefix, an equality that failed the bits down to the first that
/// differed).
pub fn unread(flow: &Flow, key: &FlowKey) -> KeyMask {
    use Field::*;
    if !matches!(key.ip_proto(), Some(6 | 17))
        || key.fragment() != Fragment::No
        || key.is_malformed()
    {
        return KeyMask::whole(Wildcards::NONE);
    }
    let reads = flow.reads();
    let read = |fields: &[Field]| fields.iter().any(|f| reads & (1 << f.index()) != 0);
    let mut w = Wildcards::NONE;
    for (part, fields) in [
        (Wildcards::L4_SRC, &[TcpSrc, UdpSrc, SctpSrc][..]),
        (Wildcards::L4_DST, &[TcpDst, UdpDst, SctpDst]),
    ] {
        if !read(fields) {
            w |= part;
        }
    }
    let (src, dst) = match key.is_ipv4() {
        true => (prefix(flow, Ipv4Src, 32), prefix(flow, Ipv4Dst, 32)),
        false => (prefix(flow, Ipv6Src, 128), prefix(flow, Ipv6Dst, 128)),
    };
    for (part, bits) in [(Wildcards::IP_SRC, src), (Wildcards::IP_DST, dst)] {
        if bits == 0 {
            w |= part;
        }
    }
    KeyMask {
        wild: w,
        ip_src_bits: src,
        ip_dst_bits: dst,
    }
}

/// How many leading bits of address field `field` (`width` bits) a decision read: up
/// to the lowest bit read (128 for all of an address).
fn prefix(flow: &Flow, field: Field, width: u32) -> u8 {
    let bits = flow.read_bits(field);
    if bits == 0 {
        return 0;
    }
    match width - bits.trailing_zeros() {
        n if n >= width => 128,
        n => n as u8,
    }
}

/// A value as the packet before a step has it: its source's, its destination's, or
/// another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rel<T> {
    Src,
    Dst,
    Const(T),
}

impl<T: PartialEq + Copy> Rel<T> {
    fn of(v: T, (src, dst): (T, T)) -> Rel<T> {
        if v == src {
            Rel::Src
        } else if v == dst {
            Rel::Dst
        } else {
            Rel::Const(v)
        }
    }

    fn value(self, (src, dst): (T, T)) -> T {
        match self {
            Rel::Src => src,
            Rel::Dst => dst,
            Rel::Const(v) => v,
        }
    }
}

/// Endpoints relative to a packet's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RelEnds {
    src: Rel<IpAddr>,
    dst: Rel<IpAddr>,
    src_port: Rel<u16>,
    dst_port: Rel<u16>,
}

impl RelEnds {
    fn of(e: &Endpoints, b: &Endpoints) -> RelEnds {
        let (a, p) = ((b.src, b.dst), (b.src_port, b.dst_port));
        RelEnds {
            src: Rel::of(e.src, a),
            dst: Rel::of(e.dst, a),
            src_port: Rel::of(e.src_port, p),
            dst_port: Rel::of(e.dst_port, p),
        }
    }

    fn value(&self, b: &Endpoints) -> Endpoints {
        let (a, p) = ((b.src, b.dst), (b.src_port, b.dst_port));
        Endpoints {
            src: self.src.value(a),
            dst: self.dst.value(a),
            src_port: self.src_port.value(p),
            dst_port: self.dst_port.value(p),
        }
    }
}

/// A conntrack result relative to the packet before its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelResult {
    state: u32,
    mark: u32,
    label: u128,
    /// The translated packet's and the connection's original endpoints.
    nat: Option<(RelEnds, RelEnds)>,
}

impl RelResult {
    /// `r` relative to `before`; `None` for a result that embeds a translated header
    /// (an ICMP error: never wildcarded).
    pub fn of(r: &CtResult, before: &Endpoints) -> Option<RelResult> {
        let nat = match &r.nat {
            Some(n) if n.inner.is_some() => return None,
            Some(n) => Some((
                RelEnds::of(&n.packet, before),
                RelEnds::of(&n.original, before),
            )),
            None => None,
        };
        Some(RelResult {
            state: r.state,
            mark: r.mark,
            label: r.label,
            nat,
        })
    }

    /// The result this is for a packet that was `before`.
    pub fn value(&self, before: &Endpoints) -> CtResult {
        CtResult {
            state: self.state,
            mark: self.mark,
            label: self.label,
            nat: self.nat.map(|(p, o)| NatSeen {
                packet: p.value(before),
                original: o.value(before),
                inner: None,
            }),
        }
    }
}

/// The packet after a step with result `r` that was `before`: translated when the
/// step translated it (as [`super::ct::LiveCt::step`] tracks it).
pub fn after(before: Endpoints, r: &CtResult) -> Endpoints {
    let translated = r.state & u32::from((CtState::SNAT | CtState::DNAT).bits()) != 0;
    match &r.nat {
        Some(n) if translated => n.packet,
        _ => before,
    }
}

/// The results `ct` (a program's, in order) relative to the packet each step saw, the
/// first step's being `received`; `None` when one cannot be ([`RelResult::of`]).
pub fn relative(ct: &[CtResult], received: Endpoints) -> Option<Box<[RelResult]>> {
    let mut before = received;
    ct.iter()
        .map(|r| {
            let rel = RelResult::of(r, &before)?;
            before = after(before, r);
            Some(rel)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> Endpoints {
        Endpoints {
            src: IpAddr::from(src),
            dst: IpAddr::from(dst),
            src_port: sp,
            dst_port: dp,
        }
    }

    fn dnat(packet: Endpoints, original: Endpoints) -> CtResult {
        CtResult {
            state: u32::from((CtState::NEW | CtState::TRK | CtState::DNAT).bits()),
            mark: 2,
            label: 0,
            nat: Some(NatSeen {
                packet,
                original,
                inner: None,
            }),
        }
    }

    #[test]
    fn two_connections_to_one_backend_agree_relative_to_their_packets() {
        let (vip, backend) = ([198, 18, 0, 100], [198, 18, 0, 2]);
        let p1 = ends([10, 0, 0, 1], 1024, vip, 80);
        let p2 = ends([10, 0, 0, 1], 1025, vip, 80);
        let r1 = dnat(ends([10, 0, 0, 1], 1024, backend, 80), p1);
        let r2 = dnat(ends([10, 0, 0, 1], 1025, backend, 80), p2);
        assert_ne!(r1, r2);
        let (a, b) = (relative(&[r1], p1).unwrap(), relative(&[r2], p2).unwrap());
        assert_eq!(a, b);
        assert_eq!(
            a[0].value(&p2),
            r2,
            "the relative result gives back the absolute one"
        );
        // Another backend is another result.
        let r3 = dnat(ends([10, 0, 0, 1], 1025, [198, 18, 0, 3], 80), p2);
        assert_ne!(relative(&[r3], p2).unwrap(), a);
    }

    #[test]
    fn a_later_step_is_relative_to_the_translated_packet() {
        let p = ends([10, 0, 0, 1], 1024, [10, 253, 0, 0], 80);
        let vm = ends([10, 0, 0, 1], 1024, [198, 18, 1, 2], 80);
        let plain = CtResult {
            state: u32::from((CtState::NEW | CtState::TRK).bits()),
            ..CtResult::default()
        };
        let rel = relative(&[dnat(vm, p), plain], p).unwrap();
        assert_eq!(after(p, &dnat(vm, p)), vm);
        assert_eq!(rel[1].value(&vm), plain);
        let icmp = CtResult {
            nat: Some(NatSeen {
                packet: vm,
                original: p,
                inner: Some(p),
            }),
            ..dnat(vm, p)
        };
        assert!(
            relative(&[icmp], p).is_none(),
            "an embedded header is never wildcarded"
        );
    }

    /// The key of an IPv4 frame of protocol `proto`, addresses and ports 0.
    fn ipv4_key(proto: u8) -> FlowKey {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[23] = proto;
        FlowKey::extract(&f, 1, None)
    }

    #[test]
    fn only_unread_parts_of_tcp_and_udp_keys_are_left_out() {
        let key = ipv4_key(6);
        let read = |fields: &[Field]| {
            let flow = Flow::new();
            fields.iter().for_each(|&f| flow.note_read(f));
            flow
        };
        let all = read(&[Field::Ipv4Src, Field::Ipv4Dst, Field::TcpDst]);
        assert_eq!(unread(&all, &key), KeyMask::whole(Wildcards::L4_SRC));
        let w = Wildcards::IP_SRC | Wildcards::IP_DST | Wildcards::L4_SRC;
        assert_eq!(unread(&read(&[Field::TcpDst]), &key).wild, w);
        let icmp = ipv4_key(1);
        assert_eq!(unread(&Flow::new(), &icmp), KeyMask::whole(Wildcards::NONE));
    }

    /// A destination tested against a /8 that it is in, and against an address it
    /// differs from first in its 25th bit: its first 25 bits are kept.
    #[test]
    fn an_address_keeps_the_prefix_its_tests_read() {
        let key = ipv4_key(17);
        let flow = Flow::new().with(Field::Ipv4Dst, 0x0a00_00c8); // 10.0.0.200
        let test = |mask: u128, value: u128| ovn_lflow::Test {
            field: Field::Ipv4Dst,
            op: ovn_lflow::Relop::Eq,
            mask,
            value,
        };
        assert!(test(0xff00_0000, 0x0a00_0000).eval(&flow));
        assert!(!test(0xffff_ffff, 0x0a00_000c).eval(&flow)); // 10.0.0.12
        flow.note_read(Field::UdpDst);
        let m = unread(&flow, &key);
        assert_eq!(
            (m.ip_dst_bits, m.wild),
            (25, Wildcards::IP_SRC | Wildcards::L4_SRC)
        );
        // The whole address once read as a value (copied, hashed).
        let _ = flow.get(Field::Ipv4Dst);
        assert_eq!(unread(&flow, &key).ip_dst_bits, 128);
    }
}
