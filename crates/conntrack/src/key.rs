//! Connection keys: a zone and a 5-tuple in *canonical* order, so that
//! both directions of a connection find one table entry with one lookup.
//!
//! An endpoint is (address, port or ICMP id, ICMP type). A tuple is
//! canonical when its source endpoint is not greater than its destination
//! endpoint; [`Key::canonical`] swaps them otherwise and says so. A packet
//! is in a connection's reply direction when its swap flag differs from the
//! one the connection was created with. Open vSwitch keeps two keys per
//! connection in its `cmap` for the same purpose; NAT, whose reply tuple is
//! not the reverse of the original one, adds a second key for the
//! translated reply tuple, an alias in a second table (see `nat.rs`).
//!
//! ICMP queries key as Open vSwitch does (`extract_l4_icmp`): both ports are
//! the identifier, and each endpoint carries the type it sends (an echo
//! request from A to B is A:request → B:reply), so a reply reverses to
//! its request and two hosts pinging each other with one id stay apart.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::packet::{icmp, Tuple, IPPROTO_ICMP, IPPROTO_ICMPV6};

/// Zone and canonical tuple: 42 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Key {
    /// Source address (IPv4: the 4 bytes, then zeros).
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    pub zone: u16,
    pub proto: u8,
    pub v6: bool,
    /// ICMP type the source endpoint sends; 0 for other protocols.
    pub src_type: u8,
    /// ICMP type the destination endpoint sends.
    pub dst_type: u8,
}

impl Key {
    /// A blank key for tests to fill in.
    #[cfg(test)]
    pub const BLANK: Key = Key {
        src: [0; 16],
        dst: [0; 16],
        src_port: 0,
        dst_port: 0,
        zone: 0,
        proto: crate::packet::IPPROTO_TCP,
        v6: false,
        src_type: 0xff,
        dst_type: 0xff,
    };
}

/// A tuple in the packet's own orientation, before canonical ordering.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Oriented {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub src_type: u8,
    pub dst_type: u8,
}

impl Oriented {
    /// The same tuple seen from the other end.
    pub fn reversed(self) -> Oriented {
        Oriented {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            src_type: self.dst_type,
            dst_type: self.src_type,
            proto: self.proto,
        }
    }

    /// The oriented form of a public tuple given in its original direction.
    /// `None` for mixed families or an ICMP query type the tracker does not
    /// key.
    pub fn from_tuple(t: &Tuple) -> Option<Oriented> {
        if t.src.is_ipv6() != t.dst.is_ipv6() {
            return None;
        }
        let mut o = Oriented {
            src: t.src,
            dst: t.dst,
            proto: t.proto,
            src_port: t.src_port,
            dst_port: t.dst_port,
            src_type: 0,
            dst_type: 0,
        };
        if is_icmp(t.src.is_ipv6(), t.proto) {
            match icmp::kind(t.src.is_ipv6(), t.icmp_type) {
                icmp::Kind::Query { reverse, .. } if t.icmp_code == 0 => {
                    o.dst_port = t.src_port;
                    o.src_type = t.icmp_type;
                    o.dst_type = reverse;
                }
                _ => return None,
            }
        }
        Some(o)
    }

    /// The zone's canonical key and whether the endpoints were swapped.
    #[inline]
    pub fn canonical(&self, zone: u16) -> (Key, bool) {
        // Addresses compared as integers: the order of their bytes (IPv4 first,
        // zero-padded), with no byte-array comparison through memory.
        let (s, d) = (ordinal(self.src), ordinal(self.dst));
        let swap = (d, self.dst_port, self.dst_type) < (s, self.src_port, self.src_type);
        let ((s, sp, st), (d, dp, dt)) = if swap {
            (
                (d, self.dst_port, self.dst_type),
                (s, self.src_port, self.src_type),
            )
        } else {
            (
                (s, self.src_port, self.src_type),
                (d, self.dst_port, self.dst_type),
            )
        };
        let key = Key {
            src: s.to_be_bytes(),
            dst: d.to_be_bytes(),
            src_port: sp,
            dst_port: dp,
            src_type: st,
            dst_type: dt,
            zone,
            proto: self.proto,
            v6: self.src.is_ipv6(),
        };
        (key, swap)
    }
}

/// An address as the integer its key bytes spell (big-endian; IPv4 in the top 32 bits),
/// so that integer order is the keys' byte order.
#[inline]
pub(crate) fn ordinal(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// Whether `proto` is the ICMP of this address family.
pub(crate) fn is_icmp(v6: bool, proto: u8) -> bool {
    proto == if v6 { IPPROTO_ICMPV6 } else { IPPROTO_ICMP }
}

pub(crate) fn addr(o: [u8; 16], v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(o))
    } else {
        IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], o[3]))
    }
}

impl Key {
    /// The oriented tuple in the direction `swapped` names (false:
    /// canonical order): `canonical` undone.
    pub fn oriented(&self, swapped: bool) -> Oriented {
        let (s, d, sp, dp, st, dt) = if swapped {
            (
                self.dst,
                self.src,
                self.dst_port,
                self.src_port,
                self.dst_type,
                self.src_type,
            )
        } else {
            (
                self.src,
                self.dst,
                self.src_port,
                self.dst_port,
                self.src_type,
                self.dst_type,
            )
        };
        Oriented {
            src: addr(s, self.v6),
            dst: addr(d, self.v6),
            proto: self.proto,
            src_port: sp,
            dst_port: dp,
            src_type: st,
            dst_type: dt,
        }
    }

    /// The tuple in the direction `swapped` names (false: canonical order).
    pub fn tuple(&self, swapped: bool) -> Tuple {
        let (s, d, sp, dp, st) = if swapped {
            (
                self.dst,
                self.src,
                self.dst_port,
                self.src_port,
                self.dst_type,
            )
        } else {
            (
                self.src,
                self.dst,
                self.src_port,
                self.dst_port,
                self.src_type,
            )
        };
        Tuple {
            src: addr(s, self.v6),
            dst: addr(d, self.v6),
            proto: self.proto,
            src_port: sp,
            dst_port: dp,
            icmp_type: st,
            icmp_code: 0,
        }
    }
}

/// A keyed hash of [`Key`]s: folded 64×64→128 multiplies (the construction
/// of foldhash and wyhash) over the key's words, with a per-table random
/// seed so that guests cannot aim tuples at one bucket chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHasher {
    seed: [u64; 4],
}

const MUL: u64 = 0x5851_f42d_4c95_7f2d;

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
fn word(b: &[u8; 16], half: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[half * 8..half * 8 + 8]);
    u64::from_ne_bytes(w)
}

impl Key {
    /// Ports, zone, protocol and family in one word; the ICMP types in another.
    #[inline]
    fn meta_words(&self) -> (u64, u64) {
        let meta = u64::from(self.src_port)
            | u64::from(self.dst_port) << 16
            | u64::from(self.zone) << 32
            | u64::from(self.proto) << 48
            | u64::from(self.v6) << 56;
        (
            meta,
            u64::from(self.src_type) | u64::from(self.dst_type) << 8,
        )
    }
}

impl KeyHasher {
    /// A hasher with a random seed (from `std`'s `RandomState`, which asks
    /// the OS once per process and then increments).
    pub fn random() -> KeyHasher {
        use std::hash::{BuildHasher, Hasher};
        let state = std::collections::hash_map::RandomState::new();
        let mut seed = [0u64; 4];
        for (i, s) in seed.iter_mut().enumerate() {
            let mut h = state.build_hasher();
            h.write_usize(i);
            *s = h.finish() | 1;
        }
        KeyHasher { seed }
    }

    /// A fixed seed, for reproducible tests.
    #[cfg(test)]
    pub fn with_seed(seed: u64) -> KeyHasher {
        KeyHasher {
            seed: [seed | 1, seed.rotate_left(17) | 1, !seed | 1, seed ^ MUL],
        }
    }

    /// 64 bits: the high ones pick the shard, the low 32 the bucket.
    #[inline]
    pub fn hash(&self, k: &Key) -> u64 {
        self.hash_in_zone(k, k.zone)
    }

    /// [`hash`](Self::hash) of `k` moved to `zone`. A packet's key is prepared once
    /// and hashed in each zone it passes: reading it in place, with the zone from a
    /// register, spares the PMD a copy whose narrow stores a wide load of the ports
    /// would wait for (a store-forwarding stall that doubled the cost of a hit).
    #[inline]
    pub fn hash_in_zone(&self, k: &Key, zone: u16) -> u64 {
        let (mut meta, types) = k.meta_words();
        meta = (meta & !(0xffff << 32)) | u64::from(zone) << 32;
        let [s0, s1, s2, s3] = self.seed;
        let a = fold_mul(word(&k.src, 0) ^ s0, word(&k.src, 1) ^ s1);
        let b = fold_mul(word(&k.dst, 0) ^ s2, word(&k.dst, 1) ^ s3);
        let c = fold_mul(meta ^ s1, types ^ b ^ s0);
        fold_mul(a ^ c, MUL ^ s2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: [u8; 4], d: [u8; 4], sp: u16, dp: u16) -> Oriented {
        Oriented {
            src: IpAddr::from(s),
            dst: IpAddr::from(d),
            proto: 6,
            src_port: sp,
            dst_port: dp,
            src_type: 0,
            dst_type: 0,
        }
    }

    #[test]
    fn both_directions_share_one_key() {
        let o = v4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80);
        let (k1, s1) = o.canonical(7);
        let (k2, s2) = o.reversed().canonical(7);
        assert_eq!(k1, k2);
        assert_ne!(s1, s2);
        assert_eq!(k1.tuple(s1).src, o.src);
        assert_eq!(k1.tuple(s1).src_port, 1000);
        assert_eq!(k1.tuple(s2).src, o.dst);
        assert_eq!(k1.oriented(s1).canonical(7), (k1, s1));
        assert_eq!(k1.oriented(s2).src_port, 80);
    }

    #[test]
    fn zones_and_families_key_apart() {
        let o = v4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80);
        assert_ne!(o.canonical(1).0, o.canonical(2).0);
        let h = KeyHasher::with_seed(5);
        assert_ne!(h.hash(&o.canonical(1).0), h.hash(&o.canonical(2).0));
        let mapped = Oriented {
            src: IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_compatible()),
            dst: IpAddr::V6(Ipv4Addr::new(10, 0, 0, 2).to_ipv6_compatible()),
            ..o
        };
        assert_ne!(mapped.canonical(1).0, o.canonical(1).0);
    }

    #[test]
    fn icmp_requests_in_both_directions_stay_apart() {
        let a = IpAddr::from([10, 0, 0, 1]);
        let b = IpAddr::from([10, 0, 0, 2]);
        let ping = |src, dst| Tuple {
            src,
            dst,
            proto: IPPROTO_ICMP,
            src_port: 0,
            dst_port: 0,
            icmp_type: icmp::ECHO_REQUEST,
            icmp_code: 0,
        };
        let ab = Oriented::from_tuple(&ping(a, b)).unwrap();
        let ba = Oriented::from_tuple(&ping(b, a)).unwrap();
        assert_ne!(ab.canonical(0).0, ba.canonical(0).0);
        // The reply to a→b is b→a with the reply type: a's key.
        let reply = Oriented {
            src_type: icmp::ECHO_REPLY,
            dst_type: icmp::ECHO_REQUEST,
            ..ab.reversed()
        };
        assert_eq!(reply.canonical(0).0, ab.canonical(0).0);
    }
}
