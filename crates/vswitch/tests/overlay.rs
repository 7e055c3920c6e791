//! The Geneve overlay between hosts: each "host" is a network namespace running its own
//! vswitchd, its AF_XDP uplink one end of a veth pair to the other host (underlay MTU
//! 1600, 198.51.100.0/24), its "VM" a tap in VNI 5001 with an address in the host's
//! namespace. Nothing is addressed in the root namespace.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use vswitch::control::protocol::{Request, Response, TunnelRow};

/// Two hosts joined by one veth pair.
struct TwoHosts {
    ns: [String; 2],
    link: [String; 2],
}

impl TwoHosts {
    fn new(tag: &str, mtu: u32) -> Self {
        let id = std::process::id() % 10000;
        let h = TwoHosts {
            ns: [format!("vo{tag}{id}a"), format!("vo{tag}{id}b")],
            link: [format!("vo{tag}{id}ua"), format!("vo{tag}{id}ub")],
        };
        h.cleanup();
        for ns in &h.ns {
            run(&["ip", "netns", "add", ns]);
            h.exec(ns, &["ip", "link", "set", "lo", "up"]);
        }
        run(&[
            "ip", "link", "add", &h.link[0], "type", "veth", "peer", "name", &h.link[1],
        ]);
        for k in 0..2 {
            run(&["ip", "link", "set", &h.link[k], "netns", &h.ns[k]]);
            let ns = &h.ns[k];
            let dev = &h.link[k];
            h.exec(
                ns,
                &[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
                ],
            );
            h.exec(ns, &["ip", "link", "set", dev, "mtu", &mtu.to_string()]);
            h.exec(
                ns,
                &[
                    "ip",
                    "addr",
                    "add",
                    &format!("198.51.100.{}/24", k + 1),
                    "dev",
                    dev,
                ],
            );
            h.exec(ns, &["ip", "link", "set", dev, "up"]);
        }
        h
    }

    fn exec(&self, ns: &str, args: &[&str]) -> String {
        let mut a = vec!["ip", "netns", "exec", ns];
        a.extend_from_slice(args);
        run(&a)
    }

    /// vswitchd on host `k`: uplink `u` on its veth end, endpoint `t` flooding to the
    /// other host, tap `vm` in VNI 5001.
    fn vswitchd(&self, k: usize, dir: &TempDir, tap: &str) -> Vswitchd {
        let args: Vec<String> = [
            "--uplink".to_string(),
            format!("u={},mode=generic", self.link[k]),
            "--geneve".into(),
            format!(
                "t=198.51.100.{},uplink=u,remote=198.51.100.{}",
                k + 1,
                2 - k
            ),
            "--tap".into(),
            format!("vm={tap},vni=5001"),
            "--poll".into(),
            "adaptive".into(),
        ]
        .to_vec();
        Vswitchd::start_in(Some(&self.ns[k]), dir, &k.to_string(), &args)
    }

    fn cleanup(&self) {
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.link[0]])
            .status();
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        self.cleanup();
    }
}

fn tunnels(sw: &Vswitchd) -> Vec<TunnelRow> {
    match ctl(&sw.control, Request::Tunnels).expect("tunnels") {
        Response::Tunnels(t) => t,
        other => panic!("{other:?}"),
    }
}

/// A tap "VM" on each of two hosts in VNI 5001: pings both ways, then 64 MiB of TCP,
/// sha256-checked, with the taps' TSO on; every underlay frame fits the 1600-byte MTU.
#[test]
fn two_hosts_taps_ping_and_tcp_across_the_overlay() {
    let _g = serial();
    let hosts = TwoHosts::new("t", 1600);
    let dir = TempDir::new("overlay2");
    let id = std::process::id() % 10000;
    let taps = [format!("vov{id}a"), format!("vov{id}b")];
    let sw: Vec<Vswitchd> = (0..2).map(|k| hosts.vswitchd(k, &dir, &taps[k])).collect();
    for (k, tap) in taps.iter().enumerate() {
        let ns = &hosts.ns[k];
        hosts.exec(
            ns,
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{tap}.disable_ipv6=1"),
            ],
        );
        hosts.exec(
            ns,
            &[
                "ip",
                "addr",
                "add",
                &format!("10.50.0.{}/24", k + 1),
                "dev",
                tap,
            ],
        );
        let mtu = hosts.exec(ns, &["cat", &format!("/sys/class/net/{tap}/mtu")]);
        assert_eq!(mtu.trim(), "1550", "the tap gets the underlay MTU minus 50");
    }
    // The first ping may wait for the kernel to resolve the other endpoint's MAC.
    wait_for(Duration::from_secs(15), "a ping across the overlay", || {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &hosts.ns[0],
                "ping",
                "-c",
                "1",
                "-W",
                "1",
                "10.50.0.2",
            ])
            .output()
            .unwrap();
        o.status.success().then_some(())
    });
    for (k, peer) in [(0, "10.50.0.2"), (1, "10.50.0.1")] {
        hosts.exec(
            &hosts.ns[k],
            &["ping", "-c", "3", "-i", "0.2", "-W", "2", peer],
        );
    }
    tcp_transfer(Some(&hosts.ns[1]), Some(&hosts.ns[0]), "10.50.0.2", 64);
    let t: Vec<TunnelRow> = sw.iter().map(|s| tunnels(s)[0].clone()).collect();
    eprintln!("{t:#?}");
    for row in &t {
        assert_eq!(row.remotes.len(), 1, "{row:?}");
        assert_eq!(row.remotes[0].state, "resolved", "{row:?}");
        // Only frames sent before the kernel had resolved the other endpoint's MAC.
        let drops: u64 = row
            .drops
            .iter()
            .filter(|(k, _)| *k != "tunnel_no_neighbour")
            .map(|(_, v)| v)
            .sum();
        assert_eq!(drops, 0, "{row:?}");
        assert!(row.drops["tunnel_no_neighbour"] <= 3, "{row:?}");
    }
    assert!(
        t[0].segmented > 0,
        "TSO frames from A's tap were segmented: {:?}",
        t[0]
    );
    assert!(t[0].tx_packets > 64 * 1024 * 1024 / 1600, "{:?}", t[0]);
    // The sender's frames: every one fits the underlay (1600 + 14).
    assert!(t[0].tx_bytes <= t[0].tx_packets * 1614);
}
