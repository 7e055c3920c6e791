//! Multicast address helpers: link-local scope (RFC 4541 §2.1.2) and the
//! Ethernet group address of an IP multicast group (RFC 1112 §6.4,
//! RFC 2464 §7).

use core::net::IpAddr;

/// Whether `group` is a multicast group that snooping must not constrain:
/// IPv4 224.0.0.0/24 (RFC 4541 §2.1.2 (2): flooded to all ports), or IPv6
/// multicast of scope ≤ 2 (the scope nibble of `ffXS::`, any flags: ff00::,
/// ff01:: interface-local, ff02:: link-local; RFC 4291 §2.7, RFC 4541
/// §3). Returns `false` for unicast addresses.
pub fn is_link_local(group: IpAddr) -> bool {
    match group {
        IpAddr::V4(a) => matches!(a.octets(), [224, 0, 0, _]),
        IpAddr::V6(a) => a.is_multicast() && a.octets()[1] & 0x0f <= 2,
    }
}

/// The Ethernet destination of IP multicast group `group`: IPv4
/// `01:00:5e` followed by the group's low 23 bits (RFC 1112 §6.4), IPv6
/// `33:33` followed by its low 32 bits (RFC 2464 §7). Defined for any
/// address; only meaningful for multicast ones.
pub fn group_mac(group: IpAddr) -> [u8; 6] {
    match group {
        IpAddr::V4(a) => {
            let o = a.octets();
            [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
        }
        IpAddr::V6(a) => {
            let o = a.octets();
            [0x33, 0x33, o[12], o[13], o[14], o[15]]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn link_local_scopes() {
        assert!(is_link_local(Ipv4Addr::new(224, 0, 0, 251).into()));
        assert!(!is_link_local(Ipv4Addr::new(224, 0, 1, 1).into()));
        assert!(!is_link_local(Ipv4Addr::new(10, 0, 0, 1).into()));
        for (a, ll) in [
            ("ff02::1", true),
            ("ff01::1", true),
            ("ff00::1", true),
            ("ff12::1:3", true),
            ("ff05::2", false),
            ("ff0e::1", false),
            ("fe80::1", false),
        ] {
            assert_eq!(
                is_link_local(a.parse::<Ipv6Addr>().unwrap().into()),
                ll,
                "{a}"
            );
        }
    }

    #[test]
    fn macs() {
        assert_eq!(
            group_mac(Ipv4Addr::new(239, 129, 2, 3).into()),
            [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]
        );
        let g: Ipv6Addr = "ff02::1:ff00:abcd".parse().unwrap();
        assert_eq!(group_mac(g.into()), [0x33, 0x33, 0xff, 0x00, 0xab, 0xcd]);
    }
}
