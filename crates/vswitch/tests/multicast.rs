//! Multicast snooping against real IGMP/MLD stacks: each "host" is a network namespace
//! whose kernel sits behind one of vswitchd's taps (198.51.100.0/24, 2001:db8::/64).
//! Receivers join groups with sockets, so the reports and leaves are the Linux
//! kernel's own (IGMPv3 by default, v2 and MLDv1 by `force_*_version`); an AF_PACKET
//! sniffer in each namespace counts the group's frames that reach it, joined or not
//! (`tests/common/mcast.py`). Nothing is addressed in the root namespace.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::fabric::*;
use common::*;
use vswitch::control::protocol::{MdbReply, Request, Response};

const MCAST_PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/mcast.py");
const WAIT: Duration = Duration::from_secs(10);

/// vswitchd with taps t0.. each moved into a namespace of its own (its "host").
struct Lan {
    sw: Vswitchd,
    dir: TempDir,
    ns: Vec<String>,
    tap: Vec<String>,
}

impl Lan {
    fn new(tag: &str, hosts: usize, extra: &[&str]) -> Lan {
        setup_host();
        let id = std::process::id() % 10000;
        let dir = TempDir::new(&format!("mcast-{tag}"));
        let tap: Vec<String> = (0..hosts).map(|k| format!("vsm{tag}{id}{k}")).collect();
        let ns: Vec<String> = (0..hosts).map(|k| format!("vsm{tag}{id}n{k}")).collect();
        let mut args = Vec::new();
        for (k, t) in tap.iter().enumerate() {
            args.push("--tap".to_string());
            args.push(format!("t{k}={t}"));
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let sw = Vswitchd::start(&dir, &args);
        for k in 0..hosts {
            let _ = Command::new("ip")
                .args(["netns", "del", &ns[k]])
                .stderr(Stdio::null())
                .status();
            run(&["ip", "netns", "add", &ns[k]]);
            run(&["ip", "link", "set", &tap[k], "netns", &ns[k]]);
            let ip = |a: &[&str]| {
                let mut v = vec!["ip", "netns", "exec", &ns[k]];
                v.extend_from_slice(a);
                run(&v);
            };
            ip(&["ip", "link", "set", "lo", "up"]);
            ip(&[
                "ip",
                "addr",
                "add",
                &format!("198.51.100.{}/24", 10 + k),
                "dev",
                &tap[k],
            ]);
            ip(&[
                "ip",
                "-6",
                "addr",
                "add",
                &format!("2001:db8::{}/64", 10 + k),
                "dev",
                &tap[k],
                "nodad",
            ]);
            ip(&["ip", "link", "set", &tap[k], "up"]);
        }
        Lan { sw, dir, ns, tap }
    }

    fn sysctl(&self, k: usize, key: &str) {
        run(&["ip", "netns", "exec", &self.ns[k], "sysctl", "-qw", key]);
    }

    /// Runs `mcast.py ARGS` in host `k` in the background; its count goes to `out`.
    fn peer(&self, k: usize, args: &[&str]) -> KillOnDrop {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns[k], "python3", MCAST_PY])
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3");
        KillOnDrop(child)
    }

    /// Joins `group` on host `k` (port 5001); the count of datagrams is `count(&out)`.
    fn join(&self, k: usize, group: &str) -> (KillOnDrop, PathBuf) {
        let out = self.dir.path(&format!("recv{k}-{group}"));
        let _ = std::fs::remove_file(&out);
        let p = self.peer(
            k,
            &["recv", &self.tap[k], group, "5001", out.to_str().unwrap()],
        );
        wait_for(WAIT, "the receiver's socket", || count_of(&out));
        (p, out)
    }

    /// Counts the frames to `group` reaching host `k`.
    fn sniff(&self, k: usize, group: &str) -> (KillOnDrop, PathBuf) {
        let out = self.dir.path(&format!("sniff{k}-{group}"));
        let _ = std::fs::remove_file(&out);
        let p = self.peer(k, &["sniff", &self.tap[k], group, out.to_str().unwrap()]);
        wait_for(WAIT, "the sniffer", || count_of(&out));
        (p, out)
    }

    /// Runs `mcast.py ARGS` in host `k` and waits for it.
    fn py(&self, k: usize, args: &[&str]) {
        let mut a = vec!["ip", "netns", "exec", &self.ns[k], "python3", MCAST_PY];
        a.extend_from_slice(args);
        run(&a);
    }

    /// Sends `n` datagrams to `group`:5001 from host `k`.
    fn send(&self, k: usize, group: &str, n: usize) {
        self.py(k, &["send", &self.tap[k], group, "5001", &n.to_string()]);
    }

    /// Sends one Ethernet frame out of host `k`'s tap.
    fn raw(&self, k: usize, frame: &[u8]) {
        let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
        self.py(k, &["raw", &self.tap[k], &hex]);
    }

    fn mdb(&self) -> MdbReply {
        mdb(&self.sw)
    }

    /// Waits until `group`'s member ports are `ports`.
    fn members_become(&self, group: &str, ports: &[&str]) {
        let want: BTreeSet<String> = ports.iter().map(|s| s.to_string()).collect();
        wait_for(WAIT, &format!("{group}'s members to be {ports:?}"), || {
            (members(&self.mdb(), group) == want).then_some(())
        });
    }

    fn mac(&self, k: usize) -> [u8; 6] {
        let s = run(&[
            "ip",
            "netns",
            "exec",
            &self.ns[k],
            "cat",
            &format!("/sys/class/net/{}/address", self.tap[k]),
        ]);
        let mut m = [0u8; 6];
        for (b, h) in m.iter_mut().zip(s.trim().split(':')) {
            *b = u8::from_str_radix(h, 16).unwrap();
        }
        m
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn mdb(sw: &Vswitchd) -> MdbReply {
    match ctl(&sw.control, Request::Mdb).expect("mdb") {
        Response::Mdb(m) => m,
        other => panic!("{other:?}"),
    }
}

fn members(m: &MdbReply, group: &str) -> BTreeSet<String> {
    m.groups
        .iter()
        .filter(|r| r.group == group)
        .map(|r| r.port.clone())
        .collect()
}

fn count_of(out: &PathBuf) -> Option<u64> {
    std::fs::read_to_string(out).ok()?.trim().parse().ok()
}

fn count(out: &PathBuf) -> u64 {
    count_of(out).unwrap_or(0)
}

fn counter(m: &MdbReply, name: &str) -> u64 {
    m.counters[name]
}

/// Waits until the sniffers `outs` have counted `want` frames each.
fn reach(outs: &[&PathBuf], want: u64) {
    wait_for(WAIT, &format!("{want} frames at each receiver"), || {
        outs.iter().all(|o| count(o) == want).then_some(())
    });
}

/// IGMPv3 (host 1), IGMPv2 (host 2), MLDv2 (host 1) and MLDv1 (host 3) receivers join
/// and leave; a group's frames reach exactly its members; unregistered groups flood;
/// a query makes its port a multicast-router port, which then gets every group's
/// frames; a malformed report is dropped and counted.
#[test]
fn linux_receivers_join_and_leave_igmp_and_mld_groups() {
    let _g = serial();
    let lan = Lan::new("j", 4, &[]);
    let g4 = "239.1.1.1";
    lan.sysctl(
        2,
        &format!("net.ipv4.conf.{}.force_igmp_version=2", lan.tap[2]),
    );
    let sniff: Vec<_> = (1..4).map(|k| lan.sniff(k, g4)).collect();
    let (s1, s2, s3) = (&sniff[0].1, &sniff[1].1, &sniff[2].1);
    let (r1, _) = lan.join(1, g4);
    let (r2, _) = lan.join(2, g4);
    lan.members_become(g4, &["t1", "t2"]);
    let m = lan.mdb();
    assert!(m.snooping && m.flood_unregistered, "{m:?}");
    assert!(
        m.groups
            .iter()
            .all(|r| r.mode == "exclude" && r.sources.is_empty()),
        "{m:?}"
    );
    assert!(
        counter(&m, "joins") >= 2 && counter(&m, "reports") >= 2,
        "{m:?}"
    );

    lan.send(0, g4, 50);
    reach(&[s1, s2], 50);
    assert_eq!(
        count(s3),
        0,
        "a host that did not join got the group's frames"
    );
    assert!(counter(&lan.mdb(), "forwarded") >= 50);

    // Host 2 leaves (IGMPv2 leave when its socket closes).
    drop(r2);
    lan.members_become(g4, &["t1"]);
    assert!(counter(&lan.mdb(), "leaves") >= 1);
    lan.send(0, g4, 50);
    reach(&[s1], 100);
    assert_eq!((count(s2), count(s3)), (50, 0), "frames after the leave");

    // An unregistered group floods (the default).
    let g9 = "239.9.9.9";
    let sn9: Vec<_> = (1..4).map(|k| lan.sniff(k, g9)).collect();
    let before = counter(&lan.mdb(), "flooded_unregistered");
    lan.send(0, g9, 20);
    reach(&sn9.iter().map(|s| &s.1).collect::<Vec<_>>(), 20);
    assert!(counter(&lan.mdb(), "flooded_unregistered") >= before + 20);

    // MLDv2 on host 1, MLDv1 on host 3.
    let g6 = "ff0e::1:1";
    lan.sysctl(
        3,
        &format!("net.ipv6.conf.{}.force_mld_version=1", lan.tap[3]),
    );
    let sn6: Vec<_> = (1..4).map(|k| lan.sniff(k, g6)).collect();
    let (_r61, _) = lan.join(1, g6);
    let (_r63, _) = lan.join(3, g6);
    lan.members_become(g6, &["t1", "t3"]);
    lan.send(0, g6, 40);
    reach(&[&sn6[0].1, &sn6[2].1], 40);
    assert_eq!(
        count(&sn6[1].1),
        0,
        "MLD: a host that did not join got the frames"
    );

    // A general query from host 2 makes t2 a router port: it now gets group frames.
    let q = mcsnoop::igmp_general_query(
        lan.mac(2),
        "198.51.100.12".parse().unwrap(),
        Duration::from_secs(1),
    );
    lan.raw(2, &q);
    wait_for(WAIT, "t2 as a multicast-router port", || {
        lan.mdb()
            .routers
            .iter()
            .any(|r| r.port == "t2")
            .then_some(())
    });
    assert!(counter(&lan.mdb(), "queries") >= 1);
    lan.send(0, g4, 10);
    reach(&[s1], 110);
    reach(&[s2], 60);
    assert_eq!(count(s3), 0);

    // A report with a bad checksum is dropped and counted, and learns nothing.
    let mut bad = mcsnoop::igmp_v2_report(
        lan.mac(3),
        "198.51.100.13".parse().unwrap(),
        "239.7.7.7".parse().unwrap(),
    );
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let invalid = counter(&lan.mdb(), "invalid");
    lan.raw(3, &bad);
    wait_for(WAIT, "the malformed report counted", || {
        (counter(&lan.mdb(), "invalid") == invalid + 1).then_some(())
    });
    assert_eq!(lan.sw.port("t3").stats.drops["bad_mcast_control"], 1);
    assert!(members(&lan.mdb(), "239.7.7.7").is_empty());
    drop(r1);
}

/// `--mcast-flood-unregistered off`: an unregistered group's frames go nowhere without
/// router ports (counted); memberships age out after `--mcast-aging` without reports
/// (the querier serves only vlan 10); `--mcast-static` members get frames without ever
/// reporting.
#[test]
fn unregistered_groups_stay_home_memberships_age_and_static_members_stay() {
    let _g = serial();
    let lan = Lan::new(
        "a",
        3,
        &[
            "--mcast-flood-unregistered",
            "off",
            "--mcast-aging",
            "2",
            "--mcast-static",
            "t2=239.6.6.6",
            // A querier for another domain: this one gets no query.
            "--mcast-querier-domains",
            "vlan:10",
            "--mcast-query-interval",
            "1",
        ],
    );
    let m = lan.mdb();
    assert!(!m.flood_unregistered);
    assert_eq!(
        members(&m, "239.6.6.6"),
        BTreeSet::from(["t2".to_string()]),
        "{m:?}"
    );
    assert!(
        m.groups.iter().all(|r| r.expires_secs.is_none()),
        "static: {m:?}"
    );

    let g = "239.5.5.5";
    let sn: Vec<_> = (1..3).map(|k| lan.sniff(k, g)).collect();
    lan.send(0, g, 20);
    wait_for(WAIT, "the unregistered frames counted", || {
        (counter(&lan.mdb(), "unregistered_to_routers") == 20).then_some(())
    });
    assert_eq!(
        (count(&sn[0].1), count(&sn[1].1)),
        (0, 0),
        "unregistered frames went out"
    );
    assert_eq!(lan.sw.port("t0").stats.drops["no_destination"], 20);

    let (r1, _) = lan.join(1, g);
    lan.members_become(g, &["t1"]);
    lan.send(0, g, 20);
    reach(&[&sn[0].1], 20);
    assert_eq!(count(&sn[1].1), 0);

    // No querier here, so the kernel reports only when it joins: the membership ages.
    lan.members_become(g, &[]);
    assert!(counter(&lan.mdb(), "expired") >= 1);
    lan.send(0, g, 20);
    wait_for(WAIT, "the unregistered frames counted", || {
        (counter(&lan.mdb(), "unregistered_to_routers") == 40).then_some(())
    });
    assert_eq!(count(&sn[0].1), 20, "frames to an aged group went out");

    // The static member never ages and gets its group's frames.
    let sg = "239.6.6.6";
    let s6: Vec<_> = (1..3).map(|k| lan.sniff(k, sg)).collect();
    lan.send(0, sg, 15);
    reach(&[&s6[1].1], 15);
    assert_eq!(count(&s6[0].1), 0);
    assert_eq!(members(&lan.mdb(), sg), BTreeSet::from(["t2".to_string()]));
    assert_eq!(
        counter(&lan.mdb(), "queries_sent"),
        0,
        "a query outside vlan 10"
    );
    drop(r1);
}

/// Three overlay hosts, a receiver on host 1 only: its report crosses the tunnels and
/// registers host 1's endpoint at host 0, so host 0's frames to the group go to host 1
/// alone (head-end replication pruned); host 2 receives no copy on the underlay.
#[test]
fn overlay_replication_goes_only_to_hosts_with_receivers() {
    let _g = serial();
    let f = Fabric::new("mc", 3, 1600);
    let dir = TempDir::new("mcast-overlay");
    let id = std::process::id() % 10000;
    let taps: Vec<String> = (0..3).map(|k| format!("vomc{id}{k}")).collect();
    // One report per join, no retransmission, so the underlay carries nothing else while
    // the frames are counted: a device takes its robustness variable (the number of
    // unsolicited reports) from igmp_qrv when it is created, so before the taps are.
    for ns in &f.ns {
        f.exec(ns, &["sysctl", "-qw", "net.ipv4.igmp_qrv=1"]);
    }
    let sw: Vec<Vswitchd> = (0..3).map(|k| f.vswitchd(k, &dir, &taps[k])).collect();
    f.ping_until(0, "10.50.0.2");
    f.ping_until(0, "10.50.0.3");
    f.pin_neighbours(&taps);
    let g = "239.1.2.3";
    let py = |k: usize, args: &[&str]| {
        KillOnDrop(
            Command::new("ip")
                .args(["netns", "exec", &f.ns[k], "python3", MCAST_PY])
                .args(args)
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let out1 = dir.path("recv1");
    let _r1 = py(1, &["recv", &taps[1], g, "5001", out1.to_str().unwrap()]);
    wait_for(WAIT, "host 1's receiver", || count_of(&out1));
    wait_for(WAIT, "host 1's endpoint registered at host 0", || {
        members(&mdb(&sw[0]), g)
            .contains("remote 198.51.100.2")
            .then_some(())
    });
    assert_eq!(members(&mdb(&sw[1]), g), BTreeSet::from(["vm".to_string()]));
    wait_for(WAIT, "host 1's report at host 2", || {
        (counter(&mdb(&sw[2]), "reports") >= 1).then_some(())
    });
    let rx = |k: usize| tunnels(&sw[k])[0].rx_packets;
    let (rx1, rx2) = (rx(1), rx(2));
    let tx0 = tunnels(&sw[0])[0].tx_packets;
    run(&[
        "ip", "netns", "exec", &f.ns[0], "python3", MCAST_PY, "send", &taps[0], g, "5001", "30",
    ]);
    wait_for(WAIT, "30 datagrams at host 1", || {
        (count(&out1) == 30).then_some(())
    });
    assert_eq!(rx(1) - rx1, 30);
    assert_eq!(
        tunnels(&sw[0])[0].tx_packets - tx0,
        30,
        "one copy per frame, to host 1 only"
    );
    assert_eq!(rx(2) - rx2, 0, "host 2 has no receiver and got copies");
    assert!(counter(&mdb(&sw[0]), "forwarded") >= 30);
}

/// `--mcast-querier-domains untagged`: the switch's general queries (IGMPv3 and MLDv2)
/// make the hosts' kernels report again, so a membership outlives `--mcast-aging` while
/// its receiver listens; a host that stops listening ages out.
#[test]
fn the_querier_keeps_memberships_of_listening_hosts() {
    let _g = serial();
    let lan = Lan::new(
        "q",
        3,
        &[
            "--mcast-querier-domains",
            "untagged",
            "--mcast-query-interval",
            "1",
            "--mcast-aging",
            "3",
        ],
    );
    let (g4, g6) = ("239.8.8.8", "ff0e::8:8");
    let _r4 = lan.join(1, g4);
    let _r6 = lan.join(1, g6);
    let _r2 = lan.join(2, g4);
    lan.members_become(g4, &["t1", "t2"]);
    lan.members_become(g6, &["t1"]);
    // Host 2 goes silent without a leave (its link down): it answers no query, and
    // ages out.
    run(&[
        "ip",
        "netns",
        "exec",
        &lan.ns[2],
        "ip",
        "link",
        "set",
        &lan.tap[2],
        "down",
    ]);
    lan.members_become(g4, &["t1"]);
    // Several aging times later t1 is still a member: the kernel answered the queries.
    let sent = counter(&lan.mdb(), "queries_sent");
    wait_for(
        Duration::from_secs(20),
        "three aging times of queries",
        || (counter(&lan.mdb(), "queries_sent") >= sent + 9).then_some(()),
    );
    let m = lan.mdb();
    assert_eq!(members(&m, g4), BTreeSet::from(["t1".to_string()]), "{m:?}");
    assert_eq!(members(&m, g6), BTreeSet::from(["t1".to_string()]), "{m:?}");
    assert_eq!(counter(&m, "expired"), 1, "only host 2 aged out: {m:?}");
    assert!(
        counter(&m, "reports") >= 6,
        "the hosts answered the queries: {m:?}"
    );
    // The switch's own queries make no router port of anyone.
    assert!(m.routers.is_empty(), "{m:?}");
}
