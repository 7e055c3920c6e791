//! An uplink shared by the switch and a tunnel endpoint behind a tap (Open vSwitch's
//! userspace layout, `Documentation/howto/userspace-tunneling.rst`: the NIC a port of
//! `br-phy`, the endpoint's address on `br-phy`'s internal port). Every frame of such
//! an uplink reaches vswitchd; its Geneve datagrams to the endpoint (IPv4 or IPv6 to the
//! endpoint's address, UDP to its port, no later fragment) are decapsulated, and all
//! others are switched in the uplink's domain, so the kernel behind the tap answers ARP
//! and neighbour discovery for the address.

use super::packet::{Pkt, RxBurst};
use super::pipeline::Pipeline;
use crate::config::GeneveConfig;
use crate::ports::Port;
use crate::switch::topology::Topology;

/// Bytes read to classify a frame: Ethernet, IPv4 with options or IPv6, UDP.
const HDR: usize = 14 + 60 + 8;

/// Whether a frame whose first bytes are `hdr` is a Geneve datagram to endpoint `g`.
pub(super) fn to_endpoint(hdr: &[u8], g: &GeneveConfig) -> bool {
    let Some(ethertype) = hdr.get(12..14) else {
        return false;
    };
    let udp = match (ethertype, g.local) {
        ([0x08, 0x00], std::net::IpAddr::V4(a)) => {
            let Some(ip) = hdr.get(14..34) else {
                return false;
            };
            let later_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff != 0;
            if ip[9] != 17 || later_fragment || ip[16..20] != a.octets() {
                return false;
            }
            14 + usize::from(ip[0] & 0x0f) * 4
        }
        ([0x86, 0xdd], std::net::IpAddr::V6(a)) => {
            let Some(ip) = hdr.get(14..54) else {
                return false;
            };
            if ip[6] != 17 || ip[24..40] != a.octets() {
                return false;
            }
            54
        }
        _ => return false,
    };
    hdr.get(udp + 2..udp + 4)
        .is_some_and(|p| u16::from_be_bytes([p[0], p[1]]) == g.port)
}

impl Pipeline {
    /// Decapsulates the frames of `pkts` (a burst from uplink `port`, which endpoints
    /// behind a tap share) sent to those endpoints, and moves the others, in their
    /// order, to the front: returns how many those are, for the caller to switch.
    pub(super) fn take_tunnelled<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        port: &Port,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    ) -> usize {
        let mut tunnelled = std::mem::take(&mut self.tunnelled);
        tunnelled.clear();
        let mut hdr = [0u8; HDR];
        let mut kept = 0;
        for i in 0..pkts.len() {
            let p = pkts[i];
            let n = burst.read(&p, 0, &mut hdr);
            let to_us = topo
                .tunnels
                .on_uplink(port.id)
                .any(|(_, t)| to_endpoint(&hdr[..n], &t.config));
            if to_us {
                tunnelled.push(p);
            } else {
                pkts[kept] = p;
                kept += 1;
            }
        }
        if !tunnelled.is_empty() {
            self.decap(topo, port, queue, burst, &mut tunnelled);
        }
        self.tunnelled = tunnelled;
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tep(local: &str) -> GeneveConfig {
        crate::config::parse_geneve_spec(&format!("t={local},uplink=up0,device=br-phy")).unwrap()
    }

    /// An Ethernet + IPv4 + UDP header to `dst`:`port`.
    fn udp4(dst: [u8; 4], port: u16, frag: u16) -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[20..22].copy_from_slice(&frag.to_be_bytes());
        f[23] = 17;
        f[30..34].copy_from_slice(&dst);
        f[36..38].copy_from_slice(&port.to_be_bytes());
        f
    }

    #[test]
    fn geneve_to_the_endpoint_is_recognised_and_nothing_else() {
        let g = tep("198.51.100.1");
        let us = [198, 51, 100, 1];
        assert!(to_endpoint(&udp4(us, 6081, 0), &g));
        // The first fragment (more fragments set) still is; a later one is not.
        assert!(to_endpoint(&udp4(us, 6081, 0x2000), &g));
        assert!(!to_endpoint(&udp4(us, 6081, 0x0010), &g));
        assert!(!to_endpoint(&udp4(us, 4789, 0), &g), "another UDP port");
        assert!(
            !to_endpoint(&udp4([198, 51, 100, 2], 6081, 0), &g),
            "another host"
        );
        let mut tcp = udp4(us, 6081, 0);
        tcp[23] = 6;
        assert!(!to_endpoint(&tcp, &g), "TCP");
        let mut arp = udp4(us, 6081, 0);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!to_endpoint(&arp, &g), "ARP");
        assert!(!to_endpoint(&udp4(us, 6081, 0)[..37], &g), "truncated");
        assert!(!to_endpoint(&udp4(us, 6081, 0), &tep("2001:db8::1")));
    }

    #[test]
    fn ipv4_options_move_the_udp_header() {
        let g = tep("198.51.100.1");
        let mut f = udp4([198, 51, 100, 1], 0, 0);
        f[14] = 0x46;
        f.splice(34..34, [1u8, 1, 1, 0]);
        f[40..42].copy_from_slice(&6081u16.to_be_bytes());
        assert!(to_endpoint(&f, &g));
    }

    #[test]
    fn ipv6_geneve_to_the_endpoint_is_recognised() {
        let g = tep("2001:db8::1");
        let a: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
        let mut f = vec![0u8; 62];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[20] = 17;
        f[38..54].copy_from_slice(&a.octets());
        f[56..58].copy_from_slice(&6081u16.to_be_bytes());
        assert!(to_endpoint(&f, &g));
        f[20] = 44; // a fragment header first
        assert!(!to_endpoint(&f, &g));
    }
}
