//! What a packet looks up: its zone's canonical key, its orientation, and
//! whether it is an ICMP error standing for the connection it embeds.

use crate::key::{is_icmp, Key, Oriented};
use crate::packet::{icmp, Packet, IPPROTO_TCP, IPPROTO_UDP, L4};
use crate::verdict::InvalidReason;

/// A packet's key and how to read what the table holds under it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lookup {
    pub key: Key,
    /// The packet's sender is the key's destination endpoint.
    pub flipped: bool,
    /// An ICMP error: `key` is its embedded tuple, reversed (Open vSwitch's
    /// `extract_l4_icmp`), so the error travels in that connection's
    /// opposite direction to the embedded packet.
    pub related: bool,
    /// An ICMP query type that may open a connection (a request).
    pub icmp_opener: bool,
}

impl Lookup {
    /// The lookup of `pkt` in `zone`, or why the packet is invalid before
    /// any table is read.
    #[inline]
    pub fn of(pkt: &Packet, zone: u16) -> Result<Lookup, InvalidReason> {
        if pkt.fragment {
            return Err(InvalidReason::Fragment);
        }
        let v6 = pkt.src.is_ipv6();
        if v6 != pkt.dst.is_ipv6() {
            return Err(InvalidReason::Malformed);
        }
        let mut o = Oriented {
            src: pkt.src,
            dst: pkt.dst,
            proto: pkt.proto(),
            src_port: 0,
            dst_port: 0,
            src_type: 0,
            dst_type: 0,
        };
        let (mut related, mut icmp_opener) = (false, false);
        match &pkt.l4 {
            L4::Tcp(t) => (o.src_port, o.dst_port) = ports(t.src_port, t.dst_port)?,
            L4::Udp { src_port, dst_port } => {
                (o.src_port, o.dst_port) = ports(*src_port, *dst_port)?
            }
            L4::Icmp(m) => match icmp::kind(v6, m.icmp_type) {
                icmp::Kind::Query { reverse, opener } if m.code == 0 => {
                    (o.src_port, o.dst_port) = (m.id, m.id);
                    (o.src_type, o.dst_type) = (m.icmp_type, reverse);
                    icmp_opener = opener;
                }
                icmp::Kind::Error => {
                    o = embedded(pkt, m.inner.as_ref())?;
                    related = true;
                }
                _ => return Err(InvalidReason::UnsupportedIcmp),
            },
            L4::Other { proto } => {
                if matches!(*proto, IPPROTO_TCP | IPPROTO_UDP) || is_icmp(v6, *proto) {
                    return Err(InvalidReason::Malformed);
                }
            }
        }
        let (key, flipped) = o.canonical(zone);
        Ok(Lookup {
            key,
            flipped,
            related,
            icmp_opener,
        })
    }
}

fn ports(src: u16, dst: u16) -> Result<(u16, u16), InvalidReason> {
    if src == 0 || dst == 0 {
        Err(InvalidReason::Malformed)
    } else {
        Ok((src, dst))
    }
}

/// The connection an ICMP error is about: the embedded tuple reversed. It
/// must have been sent by the host the error goes to.
fn embedded(pkt: &Packet, inner: Option<&crate::Tuple>) -> Result<Oriented, InvalidReason> {
    let inner = inner.ok_or(InvalidReason::Malformed)?;
    if inner.src != pkt.dst {
        return Err(InvalidReason::IcmpUnrelated);
    }
    let o = Oriented::from_tuple(inner).ok_or(InvalidReason::Malformed)?;
    if matches!(o.proto, IPPROTO_TCP | IPPROTO_UDP) && (o.src_port == 0 || o.dst_port == 0) {
        return Err(InvalidReason::Malformed);
    }
    Ok(o.reversed())
}
