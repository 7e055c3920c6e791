//! Port security as `check_in_port_sec()` and `check_out_port_sec()` evaluate it
//! (OVN 23.03: ovn-controller compiles `Port_Binding.port_security` into its own
//! OpenFlow tables; `ovn-trace`'s `execute_check_in_port_sec` states the rules, which
//! this module follows).
//!
//! Each entry is `"MAC [IP...]"`. In: the frame's source MAC must be an entry's; then
//! with addresses, IPv4 sources must be one of its IPv4 addresses (or the DHCP
//! discover `0.0.0.0 -> 255.255.255.255`, UDP 68 -> 67), ARP must carry the MAC as
//! `arp.sha` and one of the addresses as `arp.spa`, IPv6 sources must be one of its
//! IPv6 addresses or the MAC's link-local address, and neighbour discovery must carry
//! the MAC (or nothing) as `nd.sll`/`nd.tll` and an allowed `nd.target`. Out: the
//! destination MAC must be an entry's; with addresses, the destination IP one of them,
//! broadcast or multicast.

use std::net::{Ipv4Addr, Ipv6Addr};

use ovn_lflow::{Field, Flow};

const ETH_IP4: u128 = 0x0800;
const ETH_ARP: u128 = 0x0806;
const ETH_IP6: u128 = 0x86dd;

/// One `port_security` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PsAddr {
    /// The MAC.
    pub mac: [u8; 6],
    /// Its IPv4 addresses (a `/len` suffix is ignored, as `ovn-trace` compares
    /// addresses).
    pub v4: Vec<Ipv4Addr>,
    /// Its IPv6 addresses.
    pub v6: Vec<Ipv6Addr>,
}

impl PsAddr {
    fn no_ips(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// The MAC's IPv6 link-local address (RFC 4291 §2.5.1, modified EUI-64).
    fn lla(&self) -> u128 {
        let m = self.mac;
        let eui = [m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]];
        (0xfe80u128 << 112) | u128::from(u64::from_be_bytes(eui))
    }
}

/// A port's `port_security` (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PortSecurity(pub Vec<PsAddr>);

impl PortSecurity {
    /// The entries of `Port_Binding.port_security`; an entry whose first word is no
    /// MAC is ignored (ovn-controller's `extract_lsp_addresses` refuses it).
    pub fn parse(entries: &[String]) -> PortSecurity {
        PortSecurity(entries.iter().filter_map(|e| parse_entry(e)).collect())
    }

    /// `check_in_port_sec()`: whether a frame from the port with `flow`'s headers is
    /// refused (the action writes 1 then).
    pub fn refuses_in(&self, flow: &Flow) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let src = mac_bits(flow.get(Field::EthSrc));
        let Some(ps) = self.0.iter().find(|p| p.mac == src) else {
            return true;
        };
        !match flow.get(Field::EthType) {
            ETH_IP4 => in_ip4(flow, ps),
            ETH_ARP => in_arp(flow, ps),
            ETH_IP6 => in_ip6(flow, ps),
            _ => true,
        }
    }

    /// `check_out_port_sec()`: whether a frame to the port with `flow`'s headers is
    /// refused.
    pub fn refuses_out(&self, flow: &Flow) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let dst = mac_bits(flow.get(Field::EthDst));
        let Some(ps) = self.0.iter().find(|p| p.mac == dst) else {
            return true;
        };
        !match flow.get(Field::EthType) {
            ETH_IP4 => out_ip4(flow, ps),
            ETH_IP6 => out_ip6(flow, ps),
            _ => true,
        }
    }
}

fn parse_entry(e: &str) -> Option<PsAddr> {
    let mut words = e.split_whitespace();
    let mac: crate::config::MacAddr = words.next()?.parse().ok()?;
    let mut ps = PsAddr {
        mac: mac.0,
        v4: Vec::new(),
        v6: Vec::new(),
    };
    for w in words {
        let addr = w.split('/').next().unwrap_or(w);
        if let Ok(a) = addr.parse::<Ipv4Addr>() {
            ps.v4.push(a);
        } else if let Ok(a) = addr.parse::<Ipv6Addr>() {
            ps.v6.push(a);
        }
    }
    Some(ps)
}

fn mac_bits(v: u128) -> [u8; 6] {
    let b = (v as u64).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn has_v4(ps: &PsAddr, a: u128) -> bool {
    ps.v4.iter().any(|x| u128::from(u32::from(*x)) == a)
}

fn has_v6(ps: &PsAddr, a: u128) -> bool {
    ps.v6.iter().any(|x| u128::from(*x) == a)
}

fn in_ip4(flow: &Flow, ps: &PsAddr) -> bool {
    if ps.no_ips() || has_v4(ps, flow.get(Field::Ipv4Src)) {
        return true;
    }
    // A DHCP discover: 0.0.0.0 -> 255.255.255.255, UDP 68 -> 67.
    flow.get(Field::IpProto) == 17
        && flow.get(Field::UdpSrc) == 68
        && flow.get(Field::UdpDst) == 67
        && flow.get(Field::Ipv4Src) == 0
        && flow.get(Field::Ipv4Dst) == 0xffff_ffff
}

fn in_arp(flow: &Flow, ps: &PsAddr) -> bool {
    mac_bits(flow.get(Field::ArpSha)) == ps.mac
        && (ps.v4.is_empty() || has_v4(ps, flow.get(Field::ArpSpa)))
}

fn in_ip6(flow: &Flow, ps: &PsAddr) -> bool {
    if ps.no_ips() {
        return true;
    }
    let src = flow.get(Field::Ipv6Src);
    if !has_v6(ps, src) && src != ps.lla() {
        return false;
    }
    if flow.get(Field::IpProto) != 58 {
        return true;
    }
    let zero_or_mine = |f: Field| {
        let m = mac_bits(flow.get(f));
        m == [0; 6] || m == ps.mac
    };
    match flow.get(Field::Icmpv6Type) {
        135 => zero_or_mine(Field::NdSll),
        136 => {
            let t = flow.get(Field::NdTarget);
            zero_or_mine(Field::NdTll) && (ps.v6.is_empty() || has_v6(ps, t) || t == ps.lla())
        }
        _ => true,
    }
}

fn out_ip4(flow: &Flow, ps: &PsAddr) -> bool {
    if ps.no_ips() {
        return true;
    }
    if ps.v4.is_empty() {
        return false;
    }
    let dst = flow.get(Field::Ipv4Dst);
    has_v4(ps, dst) || dst == 0xffff_ffff || dst >> 28 == 0xe
}

fn out_ip6(flow: &Flow, ps: &PsAddr) -> bool {
    if ps.no_ips() {
        return true;
    }
    if ps.v6.is_empty() {
        return false;
    }
    let dst = flow.get(Field::Ipv6Dst);
    has_v6(ps, dst) || dst == ps.lla() || dst >> 120 == 0xff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ps() -> PortSecurity {
        PortSecurity::parse(&["50:54:00:00:00:01 10.0.0.11 2001:db8::11".to_string()])
    }

    fn ip4(src: [u8; 6], a: [u8; 4], b: [u8; 4]) -> Flow {
        Flow::new()
            .with(
                Field::EthSrc,
                u128::from(u64::from_be_bytes([
                    0, 0, src[0], src[1], src[2], src[3], src[4], src[5],
                ])),
            )
            .with(Field::EthDst, 0x5054_0000_0001)
            .with(Field::EthType, ETH_IP4)
            .with(Field::Ipv4Src, u128::from(u32::from_be_bytes(a)))
            .with(Field::Ipv4Dst, u128::from(u32::from_be_bytes(b)))
    }

    const MINE: [u8; 6] = [0x50, 0x54, 0, 0, 0, 1];

    #[test]
    fn in_needs_the_mac_and_the_address() {
        let ps = ps();
        assert!(!ps.refuses_in(&ip4(MINE, [10, 0, 0, 11], [10, 0, 0, 12])));
        assert!(
            ps.refuses_in(&ip4(MINE, [10, 0, 0, 99], [10, 0, 0, 12])),
            "spoofed IP"
        );
        assert!(
            ps.refuses_in(&ip4([2, 0, 0, 0, 0, 9], [10, 0, 0, 11], [10, 0, 0, 12])),
            "spoofed MAC"
        );
        let discover = ip4(MINE, [0; 4], [255; 4])
            .with(Field::IpProto, 17)
            .with(Field::UdpSrc, 68)
            .with(Field::UdpDst, 67);
        assert!(!ps.refuses_in(&discover), "a DHCP discover");
        assert!(!PortSecurity::default().refuses_in(&ip4([2; 6], [1; 4], [2; 4])));
    }

    #[test]
    fn ipv6_link_local_of_the_mac_passes() {
        let lla: Ipv6Addr = "fe80::5254:ff:fe00:1".parse().unwrap();
        assert_eq!(ps().0[0].lla(), u128::from(lla));
        let f = Flow::new()
            .with(Field::EthSrc, 0x5054_0000_0001)
            .with(Field::EthType, ETH_IP6)
            .with(Field::Ipv6Src, u128::from(lla));
        assert!(!ps().refuses_in(&f));
        assert!(ps().refuses_in(&f.clone().with(Field::Ipv6Src, 1)));
    }

    #[test]
    fn out_admits_broadcast_and_multicast_destinations() {
        let ps = ps();
        assert!(!ps.refuses_out(&ip4(MINE, [10, 0, 0, 12], [10, 0, 0, 11])));
        assert!(!ps.refuses_out(&ip4(MINE, [10, 0, 0, 12], [239, 1, 1, 1])));
        assert!(ps.refuses_out(&ip4(MINE, [10, 0, 0, 12], [10, 0, 0, 99])));
    }
}
