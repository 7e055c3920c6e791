//! Multicast snooping in the data path, with simulated guests: reports prune group
//! frames to members, queries make router ports, leaves restore flooding, and the
//! decisions hold with the flow cache in front of them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use crate::datapath::pmd::Pmd;
use crate::model::fdb::PortId;
use crate::switch::Switch;
use crate::testing::SimGuest;

const MACS: [[u8; 6]; 4] = [
    [2, 0, 0, 0, 0, 1],
    [2, 0, 0, 0, 0, 2],
    [2, 0, 0, 0, 0, 3],
    [2, 0, 0, 0, 0, 4],
];

struct Lan {
    sw: Arc<Switch>,
    g: Vec<SimGuest>,
    pmd: Pmd,
    head: u16,
}

impl Lan {
    fn new(ports: usize) -> Lan {
        let names: Vec<String> = (0..ports).map(|i| format!("p{i}")).collect();
        let cfg: Vec<(&str, Option<u16>)> = names.iter().map(|n| (n.as_str(), None)).collect();
        let sw = Switch::new(crate::testing::config(&cfg, true)).unwrap();
        let g = (0..ports)
            .map(|p| {
                let mut g = SimGuest::new(1, SimGuest::default_features());
                crate::testing::attach(&sw, p as PortId, g.conn.clone());
                g.post_rx(0, 0, 64, 2048);
                g
            })
            .collect();
        let pmd = Pmd::new(sw.clone(), 0);
        Lan {
            sw,
            g,
            pmd,
            head: 0,
        }
    }

    /// Sends `frames` from port `p` in one burst and returns how many frames each
    /// port received.
    fn send(&mut self, p: usize, frames: &[Vec<u8>]) -> Vec<usize> {
        for f in frames {
            self.g[p].send(0, self.head, f);
            self.head = (self.head + 1) % 128;
        }
        self.pmd.poll_once();
        self.g.iter_mut().map(|g| g.recv(0).len()).collect()
    }

    fn ip4(&self, p: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, 1 + p as u8)
    }

    fn ip6(&self, p: usize) -> Ipv6Addr {
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1 + p as u16)
    }

    fn counter(
        &self,
        f: impl Fn(&crate::model::mcast::McastCounters) -> &std::sync::atomic::AtomicU64,
    ) -> u64 {
        f(&self.sw.mcast.counters).load(Relaxed)
    }
}

/// A UDP datagram from port `p`'s MAC to `group` (IPv4 or IPv6), as an Ethernet frame.
fn to_group(src: [u8; 6], from: IpAddr, group: IpAddr) -> Vec<u8> {
    let mut f = mcsnoop::group_mac(group).to_vec();
    f.extend_from_slice(&src);
    let udp = [0x13, 0x88, 0x13, 0x89, 0, 16, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    match (from, group) {
        (IpAddr::V4(s), IpAddr::V4(g)) => {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 44, 0, 0, 0, 0, 1, 17, 0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&g.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(g)) => {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 16, 17, 1]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&g.octets());
        }
        _ => unreachable!(),
    }
    f.extend_from_slice(&udp);
    f
}

#[test]
fn igmp_reports_prune_group_frames_and_leaves_restore_flooding() {
    let mut lan = Lan::new(4);
    let g: Ipv4Addr = "239.1.1.1".parse().unwrap();
    let data = to_group(MACS[0], lan.ip4(0).into(), g.into());
    // Unregistered: flooded.
    assert_eq!(lan.send(0, std::slice::from_ref(&data)), [0, 1, 1, 1]);
    // Port 1 joins (IGMPv2): the report goes to no port (no router), and the group's
    // frames now reach port 1 only.
    let report = mcsnoop::igmp_v2_report(MACS[1], lan.ip4(1), g);
    assert_eq!(lan.send(1, &[report]), [0, 0, 0, 0]);
    assert_eq!(lan.sw.mcast.groups(), 1);
    assert_eq!(lan.send(0, &[data.clone(), data.clone()]), [0, 2, 0, 0]);
    assert_eq!(lan.counter(|c| &c.forwarded), 2);
    // Port 3 queries: it becomes a router port, which gets the reports and the group's
    // frames too; the query itself floods.
    let query = mcsnoop::igmp_general_query(MACS[3], lan.ip4(3), Duration::from_secs(1));
    assert_eq!(lan.send(3, &[query]), [1, 1, 1, 0]);
    let report = mcsnoop::igmp_v2_report(MACS[1], lan.ip4(1), g);
    assert_eq!(lan.send(1, &[report]), [0, 0, 0, 1]);
    assert_eq!(lan.send(0, std::slice::from_ref(&data)), [0, 1, 0, 1]);
    // A burst mixing an unknown unicast frame (flooded), the group's frames and a
    // broadcast.
    let unicast = crate::testing::frame(MACS[2], MACS[0], 100, 1);
    let bcast = crate::testing::frame([0xff; 6], MACS[0], 100, 2);
    let burst = [data.clone(), unicast, data.clone(), bcast];
    assert_eq!(lan.send(0, &burst), [0, 4, 2, 4]);
    // Port 1 leaves (to the router port): the group has no member left, so it is
    // unregistered again and floods (the default).
    let leave = mcsnoop::igmp_v2_leave(MACS[1], lan.ip4(1), g);
    assert_eq!(lan.send(1, &[leave]), [0, 0, 0, 1]);
    assert_eq!(lan.sw.mcast.groups(), 0);
    assert_eq!(lan.send(0, &[data]), [0, 1, 1, 1]);
    assert!(lan.counter(|c| &c.flooded_unregistered) >= 2);
}

#[test]
fn mldv2_source_filters_choose_members() {
    let mut lan = Lan::new(4);
    let g: Ipv6Addr = "ff0e::1:1".parse().unwrap();
    let (s0, s2) = (lan.ip6(0), lan.ip6(2));
    use mcsnoop::RecordKind::{ChangeToExclude, ChangeToInclude};
    // Port 1: any source (EXCLUDE {}); port 3: only from port 2 (INCLUDE {s2}).
    let r1 = mcsnoop::mld_v2_report(MACS[1], lan.ip6(1), &[(ChangeToExclude, g, &[])]);
    let r3 = mcsnoop::mld_v2_report(MACS[3], lan.ip6(3), &[(ChangeToInclude, g, &[s2])]);
    lan.send(1, &[r1]);
    lan.send(3, &[r3]);
    assert_eq!(
        lan.send(0, &[to_group(MACS[0], s0.into(), g.into())]),
        [0, 1, 0, 0]
    );
    assert_eq!(
        lan.send(2, &[to_group(MACS[2], s2.into(), g.into())]),
        [0, 1, 0, 1]
    );
    // Link-local groups always flood, members or not.
    let ll: Ipv6Addr = "ff02::1:3".parse().unwrap();
    assert_eq!(
        lan.send(0, &[to_group(MACS[0], s0.into(), ll.into())]),
        [0, 1, 1, 1]
    );
}

#[test]
fn snooping_holds_behind_the_flow_cache_and_bad_reports_are_dropped() {
    let mut lan = Lan::new(3);
    // An ACL rule that matches nothing puts port 0's frames through the flow cache.
    lan.sw
        .edit_acl(0, |a| a.push("drop ip_src=172.16.0.0/24".parse().unwrap()))
        .unwrap();
    let g: Ipv4Addr = "239.2.2.2".parse().unwrap();
    let data = to_group(MACS[0], lan.ip4(0).into(), g.into());
    assert_eq!(lan.send(0, std::slice::from_ref(&data)), [0, 1, 1]);
    let report = mcsnoop::igmp_v3_report(
        MACS[2],
        lan.ip4(2),
        &[(mcsnoop::RecordKind::ChangeToExclude, g, &[])],
    );
    lan.send(2, &[report]);
    // The cached decision ("flood") is refined per burst: port 2 only.
    assert_eq!(lan.send(0, &[data.clone(), data.clone()]), [0, 0, 2]);
    // A report with a broken checksum: dropped, counted, nothing learned.
    let mut bad = mcsnoop::igmp_v2_report(MACS[1], lan.ip4(1), "239.3.3.3".parse().unwrap());
    let n = bad.len();
    bad[n - 1] ^= 0x55;
    assert_eq!(lan.send(1, &[bad]), [0, 0, 0]);
    assert_eq!(lan.sw.port_stats(1).drops["bad_mcast_control"], 1);
    assert_eq!(lan.counter(|c| &c.invalid), 1);
    assert_eq!(lan.sw.mcast.groups(), 1);
}

#[test]
fn a_deleted_port_leaves_its_groups() {
    let mut lan = Lan::new(3);
    let g: Ipv4Addr = "239.4.4.4".parse().unwrap();
    lan.send(1, &[mcsnoop::igmp_v2_report(MACS[1], lan.ip4(1), g)]);
    assert_eq!(lan.sw.mcast.groups(), 1);
    lan.sw
        .publish(|t| {
            t.remove(1);
            Ok::<_, std::convert::Infallible>(())
        })
        .unwrap();
    assert_eq!(lan.sw.mcast.groups(), 0);
}

/// A frame flooded to nine ports: every copy is byte-exact, at every size.
#[test]
fn wide_floods_deliver_byte_exact_copies() {
    let ports = 10;
    let names: Vec<String> = (0..ports).map(|i| format!("p{i}")).collect();
    let cfg: Vec<(&str, Option<u16>)> = names.iter().map(|n| (n.as_str(), None)).collect();
    let sw = Switch::new(crate::testing::config(&cfg, true)).unwrap();
    let mut g: Vec<SimGuest> = (0..ports)
        .map(|p| {
            let mut g = SimGuest::new(1, SimGuest::default_features());
            crate::testing::attach(&sw, p as PortId, g.conn.clone());
            g.post_rx(0, 0, 64, 2048);
            g
        })
        .collect();
    let mut pmd = Pmd::new(sw.clone(), 0);
    let sizes = [60usize, 255, 256, 300, 319, 800, 1000, 1514];
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| crate::testing::frame([0xff; 6], MACS[0], n, i as u8))
        .collect();
    for (h, f) in frames.iter().enumerate() {
        g[0].send(0, h as u16, f);
    }
    pmd.poll_once();
    for (p, rx) in g.iter_mut().enumerate().skip(1) {
        assert_eq!(rx.recv(0), frames, "port {p}");
    }
}
