//! NAT: a connection's translation, the alias of its translated reply
//! tuple, how a new translation is picked and how a packet is rewritten
//! (Open vSwitch's `lib/conntrack.c`: `conn_not_found` with `nat`,
//! `nat_get_unique_tuple`, `handle_nat`, `nat_packet`, `un_nat_packet`).
//!
//! A NAT'd connection is one table entry under its original tuple's
//! canonical key, as any other, with [`Conn::nat`](crate::conn::Conn) set
//! and its [`NatInfo`] beside it in the table (a side value, found at its
//! position, no lookup of its own). Its translated reply tuple keys an
//! [`Alias`], an entry of the same kind of table in the shard of *that* key's
//! hash (`shard.rs`), naming the primary key and a serial: a lookup that
//! finds an alias follows it to the primary, and the serial tells a live
//! alias from one whose connection is gone (see the tracker for the
//! locking).
//!
//! History, measured in `scripts/bench-cps.sh` (see the README): the
//! translations and aliases were `HashMap`s (every key hashed again, twice
//! per alias claimed, every entry rehashed as they grew), then tables of
//! their own under the tag the tracker already has, then the translation
//! moved beside its connection and the alias into the connections' table,
//! so that a lookup that finds nothing reads one index line, not two.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::key::{addr, ordinal, Key, Oriented};
use crate::packet::{Packet, IPPROTO_TCP, IPPROTO_UDP, L4};
use crate::table::Side;
use crate::verdict::{CtState, Endpoints, NatRange};

/// Candidates (address, port) tried per new translation, at most: a
/// commit never holds its shard lock for more than this many probes
/// (about 65k: one full port range).
pub(crate) const MAX_PROBES: u32 = 1 << 16;

/// First port of the range source NAT falls back to when the packet's own
/// port collides (the dynamic range of RFC 6335 starts at 49152; Open
/// vSwitch and Linux use all of 1024..=65535).
const FALLBACK_LO: u16 = 1024;

/// A connection's translation, beside it in its shard's table (28 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NatInfo {
    /// Source NAT (else destination NAT).
    pub src_nat: bool,
    /// The address the translated side takes.
    pub addr: IpAddr,
    /// The port (TCP/UDP), ICMP id (unchanged) or 0 the translated side takes.
    pub port: u16,
    /// Whether the translated reply tuple has an alias (its key:
    /// [`alias_key`](Self::alias_key)); not for a translation to itself.
    pub aliased: bool,
    /// This translation's number: an alias whose serial the primary no
    /// longer has is stale. A 32-bit count wraps after 4 billion
    /// translations (over two hours at a million a second), while a stale
    /// alias lives until the next sweep at most (`drain_orphans`).
    pub serial: u32,
}

/// An alias: the translated reply tuple's key points to its connection.
/// (Aligned to 2, as its keys are, so that an alias entry fits a
/// connection's 96 bytes with the connection's niche free.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(2))]
pub(crate) struct Alias {
    /// The connection's (canonical) key.
    pub primary: Key,
    /// A packet whose lookup has this swap flag travels in the reply
    /// direction; the other, in the (translated) original direction.
    pub reply_swap: bool,
    /// The connection's [`NatInfo::serial`].
    pub serial: u32,
    /// Where the connection was put in its shard's table: a hint, right
    /// until an entry before it is removed (a lookup through the alias
    /// checks the key there, and finds the connection by its key otherwise),
    /// that spares a hit the index line's wait.
    pub at: u32,
}

impl Side for NatInfo {
    const VACANT: NatInfo = NatInfo {
        src_nat: false,
        addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        port: 0,
        aliased: false,
        serial: 0,
    };
}

impl NatInfo {
    /// The key of the alias of connection `key` (whose original direction's
    /// sender is its destination endpoint when `flipped`): its translated
    /// reply tuple, canonical, and whether that tuple is swapped in it.
    pub fn alias_key(&self, key: &Key, flipped: bool) -> (Key, bool) {
        let o = key.oriented(flipped);
        translate(&o, self.src_nat, self.addr, self.port)
            .reversed()
            .canonical(key.zone)
    }

    /// `ct.snat` or `ct.dnat` for a packet translated in the original direction; a
    /// reply un-NATed gets the other (Open vSwitch `un_nat_packet`: the reply of a
    /// source-NAT'd connection has its destination rewritten, `CS_DST_NAT`).
    pub fn state(&self, reply: bool) -> CtState {
        if self.src_nat != reply {
            CtState::SNAT
        } else {
            CtState::DNAT
        }
    }

    /// The original direction's endpoints after translation.
    pub fn translated(&self, original: Endpoints) -> Endpoints {
        let mut t = original;
        if self.src_nat {
            (t.src, t.src_port) = (self.addr, self.port);
        } else {
            (t.dst, t.dst_port) = (self.addr, self.port);
        }
        t
    }

    /// What the header embedded in a related ICMP error becomes
    /// ([`NatResult::inner`](crate::NatResult::inner)): an error travelling
    /// in the reply direction (`reply`) embeds an original-direction packet,
    /// written back to the original tuple; one in the original direction
    /// embeds a reply, written to the translated tuple's reverse.
    pub fn embedded(&self, original: Endpoints, reply: bool) -> Endpoints {
        if reply {
            original
        } else {
            self.translated(original).reversed()
        }
    }

    /// The packet `own` rewritten: an original-direction packet to the
    /// translated tuple, a reply to the original tuple's reverse. A related
    /// ICMP error (`related`) has only its outer address of the translated
    /// side rewritten here; its embedded header is [`embedded`](Self::embedded)'s.
    pub fn rewrite(
        &self,
        original: Endpoints,
        own: Endpoints,
        reply: bool,
        related: bool,
    ) -> Endpoints {
        let target = if reply {
            original.reversed()
        } else {
            self.translated(original)
        };
        let mut out = own;
        // Source NAT rewrites the original's source and the reply's
        // destination; destination NAT the other two.
        if self.src_nat != reply {
            out.src = target.src;
            if !related {
                out.src_port = target.src_port;
            }
        } else {
            out.dst = target.dst;
            if !related {
                out.dst_port = target.dst_port;
            }
        }
        out
    }
}

/// The endpoints of `key`'s tuple in the direction `swapped` names (ICMP
/// queries: the id in both ports).
pub(crate) fn key_endpoints(key: &Key, swapped: bool) -> Endpoints {
    let (s, d, sp, dp) = if swapped {
        (key.dst, key.src, key.dst_port, key.src_port)
    } else {
        (key.src, key.dst, key.src_port, key.dst_port)
    };
    Endpoints {
        src: addr(s, key.v6),
        dst: addr(d, key.v6),
        src_port: sp,
        dst_port: dp,
    }
}

/// A packet's own endpoints (an ICMP error: its addresses, ports 0).
pub(crate) fn packet_endpoints(pkt: &Packet) -> Endpoints {
    let (src_port, dst_port) = match &pkt.l4 {
        L4::Tcp(t) => (t.src_port, t.dst_port),
        L4::Udp { src_port, dst_port } => (*src_port, *dst_port),
        L4::Icmp(m) if m.inner.is_none() => (m.id, m.id),
        _ => (0, 0),
    };
    Endpoints {
        src: pkt.src,
        dst: pkt.dst,
        src_port,
        dst_port,
    }
}

/// Whether `o`'s protocol has ports NAT may change (TCP, UDP).
fn ported(o: &Oriented) -> bool {
    matches!(o.proto, IPPROTO_TCP | IPPROTO_UDP)
}

/// `o` (an original-direction tuple) with its source (`src_nat`) or
/// destination translated to `addr`, `port`.
pub(crate) fn translate(o: &Oriented, src_nat: bool, addr: IpAddr, port: u16) -> Oriented {
    let mut t = *o;
    if src_nat {
        t.src = addr;
    } else {
        t.dst = addr;
    }
    // ICMP queries keep their id, other protocols have no ports.
    if ported(o) {
        if src_nat {
            t.src_port = port;
        } else {
            t.dst_port = port;
        }
    }
    t
}

/// Calls `try_one(address, port)` on the candidates for the translated side
/// of `o` in `range`, in Open vSwitch's "hash" order, until it answers
/// `Some`: addresses from `min + hash % n` upwards (wrapping), and per
/// address the ports: from `lo + hash % span` through the given range,
/// or, without one, the packet's own port first (RFC 4787 §4.1 port
/// preservation) and then, for source NAT of TCP/UDP, 1024..=65535 from a
/// hashed start. ICMP queries keep their id and other protocols have no
/// ports: one candidate per address. At most [`MAX_PROBES`] calls; `None`
/// when none fit (or the range is of the other family, or empty).
pub(crate) fn probe<T>(
    o: &Oriented,
    src_nat: bool,
    range: &NatRange,
    hash: u64,
    mut try_one: impl FnMut(IpAddr, u16) -> Option<T>,
) -> Option<T> {
    let v6 = o.src.is_ipv6();
    if range.min.is_ipv6() != v6 || range.max.is_ipv6() != v6 {
        return None;
    }
    let (lo, hi) = (ordinal(range.min), ordinal(range.max));
    if lo > hi {
        return None;
    }
    // IPv4 ordinals sit in the top 32 bits.
    let shift = if v6 { 0 } else { 96 };
    let n = ((hi - lo) >> shift).saturating_add(1);
    // A `u128` remainder is a library call: ranges short enough (all but the
    // widest IPv6 ones) take the 64-bit one, and the walk wraps by comparison.
    let start = match u64::try_from(n) {
        Ok(n) => u128::from(hash % n),
        Err(_) => u128::from(hash) % n,
    };
    let own = if src_nat { o.src_port } else { o.dst_port };
    let mut budget = MAX_PROBES;
    let (mut k, mut i) = (start, 0u128);
    while i < n && budget > 0 {
        let a = from_ordinal(lo + (k << shift), v6);
        let found = probe_ports(o, src_nat, range, own, hash >> 32, &mut budget, |p| {
            try_one(a, p)
        });
        if found.is_some() {
            return found;
        }
        i += 1;
        k = if k + 1 == n { 0 } else { k + 1 };
    }
    None
}

/// The ports of one address, as [`probe`] describes, counting `budget` down.
fn probe_ports<T>(
    o: &Oriented,
    src_nat: bool,
    range: &NatRange,
    own: u16,
    hash: u64,
    budget: &mut u32,
    mut try_one: impl FnMut(u16) -> Option<T>,
) -> Option<T> {
    let (lo, hi, first) = match (ported(o), range.ports) {
        (false, _) => (own, own, own),
        (true, Some((lo, hi))) => {
            let (lo, hi) = (lo.min(hi).max(1), hi.max(lo).max(1));
            let span = u64::from(hi - lo) + 1;
            (lo, hi, lo + (hash % span) as u16)
        }
        (true, None) => {
            *budget -= 1;
            if let Some(t) = try_one(own) {
                return Some(t);
            }
            if !src_nat {
                return None;
            }
            let span = u64::from(u16::MAX - FALLBACK_LO) + 1;
            (FALLBACK_LO, u16::MAX, FALLBACK_LO + (hash % span) as u16)
        }
    };
    let mut p = first;
    loop {
        if *budget == 0 {
            return None;
        }
        *budget -= 1;
        if let Some(t) = try_one(p) {
            return Some(t);
        }
        p = if p == hi { lo } else { p + 1 };
        if p == first {
            return None;
        }
    }
}

fn from_ordinal(o: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(o))
    } else {
        IpAddr::V4(Ipv4Addr::from((o >> 96) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(sp: u16) -> Oriented {
        Oriented {
            src: IpAddr::from([10, 0, 0, 1]),
            dst: IpAddr::from([192, 0, 2, 1]),
            proto: IPPROTO_UDP,
            src_port: sp,
            dst_port: 53,
            src_type: 0,
            dst_type: 0,
        }
    }

    fn range(min: [u8; 4], max: [u8; 4], ports: Option<(u16, u16)>) -> NatRange {
        NatRange {
            min: IpAddr::from(min),
            max: IpAddr::from(max),
            ports,
        }
    }

    /// Every candidate, in order, up to `limit`.
    fn all(o: &Oriented, src_nat: bool, r: &NatRange, limit: usize) -> Vec<(IpAddr, u16)> {
        let mut v = Vec::new();
        probe::<()>(o, src_nat, r, 12345, |a, p| {
            v.push((a, p));
            (v.len() >= limit).then_some(())
        });
        v
    }

    #[test]
    fn own_port_first_then_the_fallback_range() {
        let r = range([192, 0, 2, 9], [192, 0, 2, 9], None);
        let v = all(&udp(5000), true, &r, 100_000);
        assert_eq!(v[0], (IpAddr::from([192, 0, 2, 9]), 5000));
        assert_eq!(v.len(), 1 + 64512);
        assert!(v[1..].iter().all(|&(_, p)| p >= 1024));
        // Destination NAT without ports keeps the port or gives up.
        assert_eq!(all(&udp(5000), false, &r, 100).len(), 1);
    }

    #[test]
    fn a_port_range_is_walked_once_per_address() {
        let r = range([192, 0, 2, 9], [192, 0, 2, 10], Some((100, 102)));
        let v = all(&udp(5000), true, &r, 100);
        assert_eq!(v.len(), 6);
        let mut sorted = v.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 6);
        assert!(v.iter().all(|&(_, p)| (100..=102).contains(&p)));
    }

    #[test]
    fn wrong_family_or_empty_ranges_have_no_candidate() {
        let v6 = NatRange {
            min: "2001:db8::1".parse().unwrap(),
            max: "2001:db8::1".parse().unwrap(),
            ports: None,
        };
        assert!(all(&udp(5000), true, &v6, 10).is_empty());
        let empty = range([192, 0, 2, 10], [192, 0, 2, 9], None);
        assert!(all(&udp(5000), true, &empty, 10).is_empty());
    }

    #[test]
    fn a_large_v6_range_stops_at_the_budget() {
        let o = Oriented {
            src: "2001:db8::1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
            ..udp(5000)
        };
        let r = NatRange {
            min: "2001:db8:1::".parse().unwrap(),
            max: "2001:db8:1::ffff:ffff".parse().unwrap(),
            ports: Some((7, 7)),
        };
        assert_eq!(all(&o, true, &r, usize::MAX).len(), MAX_PROBES as usize);
    }

    #[test]
    fn a_translation_is_28_bytes() {
        assert_eq!(core::mem::size_of::<NatInfo>(), 28);
    }

    #[test]
    fn rewrite_each_way() {
        let info = NatInfo {
            src_nat: true,
            addr: IpAddr::from([192, 0, 2, 9]),
            port: 7000,
            aliased: false,
            serial: 1,
        };
        let orig = Endpoints {
            src: IpAddr::from([10, 0, 0, 1]),
            dst: IpAddr::from([192, 0, 2, 1]),
            src_port: 5000,
            dst_port: 53,
        };
        let out = info.rewrite(orig, orig, false, false);
        assert_eq!(out, info.translated(orig));
        assert_eq!((out.src, out.src_port), (info.addr, 7000));
        let back = info.rewrite(orig, out.reversed(), true, false);
        assert_eq!(back, orig.reversed());
        // A related error keeps its ports (0) and its router's address.
        let router = IpAddr::from([198, 51, 100, 1]);
        let err = Endpoints {
            src: router,
            dst: info.addr,
            src_port: 0,
            dst_port: 0,
        };
        let e = info.rewrite(orig, err, true, true);
        assert_eq!((e.src, e.dst, e.dst_port), (router, orig.src, 0));
    }
}
