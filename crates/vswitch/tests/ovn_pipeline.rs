//! vswitchd's logical pipeline against `ovn-trace` (Debian's `ovn-common` 23.03), the
//! oracle for what OVN's logical flows decide: the OpenStack-shaped tenant of
//! `common::tenant` built by real ovn-northd, with load balancers on its switches, then
//! generated packets (ARP, IPv4 and IPv6 with TCP, UDP and ICMP, DHCP, neighbour
//! discovery, spoofed sources, TTLs that run out, to the load balancers' VIPs and
//! hairpins) from every VM, each traced by both with the same connection tracking
//! states (`--ct`), and their minimal traces (what changed, every transformation and
//! output, in order) compared.
//!
//! Most packets go to one `ovn-trace --detach` daemon (its `--ct` list is consumed
//! once, so it answers with the default `est|trk`); the packets with their own
//! `--ct` states run one `ovn-trace` each.

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use common::ovn::OvnCentral;
use common::tenant::{self, Vm, ROUTER, VMS};
use common::{wait_for, TempDir};
use ovsdb::{Client, ClientConfig, Event};
use vswitch::ovn::pipeline::trace::{minimal, parse_ct_state, trace};
use vswitch::ovn::pipeline::{BuildCache, BuildStats, Mode, Pipelines, Viewpoint};
use vswitch::ovn::rows::Sb;

/// Packets traced with the default connection tracking state.
const DEFAULT_CT_PACKETS: usize = 8_400;
/// The load balancers' VIPs: one backend each, so `ovn-trace` (which picks at random)
/// and vswitchd (by hash) pick the same.
const VIPS: [&str; 2] = ["172.16.100.100", "172.16.100.101"];

/// Load balancers on the tenant's switches: a TCP VIP on both (backend vm4, in sw1:
/// through the router from sw0), a UDP VIP and a TCP VIP whose backend (vm3) is its own
/// client when it sends to it (hairpin) on sw0.
fn add_load_balancers(c: &OvnCentral) {
    c.nbctl(&[
        "lb-add",
        "lb-web",
        "172.16.100.100:80",
        "10.0.1.14:8080",
        "tcp",
    ]);
    c.nbctl(&[
        "lb-add",
        "lb-dns",
        "172.16.100.100:53",
        "10.0.0.12:5353",
        "udp",
    ]);
    c.nbctl(&[
        "lb-add",
        "lb-hp",
        "172.16.100.101:80",
        "10.0.0.13:80",
        "tcp",
    ]);
    for lb in ["lb-web", "lb-dns", "lb-hp"] {
        c.nbctl(&["ls-lb-add", "sw0", lb]);
    }
    c.nbctl(&["ls-lb-add", "sw1", "lb-web"]);
    c.nbctl(&["--wait=sb", "sync"]);
}

/// Packets traced with their own `--ct` states.
const SCRIPTED_CT_PACKETS: usize = 1_600;

/// The Southbound database read whole, and the pipelines of every datapath as
/// `ovn-trace` sees them (every port local).
fn pipelines(c: &OvnCentral) -> (Sb, Pipelines) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let remote = c.sb_remote().parse().unwrap();
        let (client, mut events) = Client::start(
            ClientConfig::new(vec![remote]),
            vswitch::ovn::monitor_spec_all(),
        );
        loop {
            match events.recv().await {
                Some(Event::Connected { .. }) => break,
                Some(_) => {}
                None => panic!("the Southbound session ended"),
            }
        }
        let mut sb = Sb::from_replica(&client.replica());
        let all: Vec<_> = sb.datapaths.keys().copied().collect();
        // The stage names, as the chassis reads them (one flow per table).
        vswitch::ovn::stages::learn(&client, &mut sb, &all, None)
            .await
            .unwrap();
        assert!(
            sb.stages.knows(vswitch::ovn::stages::StageKey {
                router: false,
                egress: false,
                table: 0
            }),
            "the first table of the switches' ingress pipeline is named"
        );
        client.shutdown().await;
        let p = Pipelines::build(&sb, &all, Viewpoint::Everywhere);
        (sb, p)
    })
}

/// Every datapath's tables as (stage, [(flow, priority, compiled match, actions)]).
type Tables = Vec<(u32, String, Vec<(String, u16, String, String)>)>;

fn tables(p: &Pipelines) -> Tables {
    let mut out = Vec::new();
    for (k, dp) in &p.datapaths {
        for t in dp.tables.iter().flatten() {
            let flows = t
                .flows
                .iter()
                .map(|f| {
                    let m = format!("{:?}", f.matcher);
                    (
                        f.uuid.to_string(),
                        f.priority,
                        m,
                        format!("{:?}", f.actions),
                    )
                })
                .collect();
            out.push((*k, t.stage.clone(), flows));
        }
    }
    out
}

/// How many (datapath, flow) pairs have a match naming `token` (`$set` or `@group`,
/// a whole name), on datapath `only` or on all.
fn flows_naming(sb: &Sb, p: &Pipelines, token: &str, only: Option<u32>) -> usize {
    let named = |m: &str| {
        m.match_indices(token).any(|(i, _)| {
            let next = m[i + token.len()..].chars().next();
            !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    p.datapaths
        .values()
        .filter(|dp| only.is_none_or(|k| k == dp.key))
        .flat_map(|dp| dp.tables.iter().flatten())
        .flat_map(|t| &t.flows)
        .filter(|f| named(sb.lflows[&f.uuid].match_()))
        .count()
}

/// Builds with a [`BuildCache`] equal builds from nothing, and recompile exactly the
/// flows whose inputs changed: none for the same rows; those naming an address set
/// after it gains an address; those naming a port group after it loses a member.
fn incremental_builds_equal_full_builds(sb: &Sb) {
    let all: Vec<_> = sb.datapaths.keys().copied().collect();
    let mut cache = BuildCache::default();
    let first = Pipelines::build_with(sb, &all, Viewpoint::Everywhere, &mut cache);
    assert_eq!(first.compiled.reused, 0, "an empty cache reuses nothing");
    // A flow's texts are its row's (which shares them with the replica's atoms):
    // never a copy per datapath or per build. Equal compiled matches are one.
    let mut matchers = std::collections::HashMap::new();
    let mut flows = 0;
    for t in first
        .datapaths
        .values()
        .flat_map(|dp| dp.tables.iter().flatten())
    {
        for f in &t.flows {
            let row = &sb.lflows[&f.uuid];
            assert!(
                Arc::ptr_eq(&f.match_text, row.match_())
                    && Arc::ptr_eq(&f.actions_text, row.actions()),
                "flow {} holds a copy of its row's texts",
                f.uuid
            );
            let one = matchers.entry(&*f.matcher).or_insert(&f.matcher);
            assert!(
                Arc::ptr_eq(one, &f.matcher),
                "flow {}: a second copy of a match",
                f.uuid
            );
            flows += 1;
        }
    }
    assert!(
        matchers.len() < flows,
        "{flows} flows, {} matches: no two flows share one",
        matchers.len()
    );
    assert!(
        first.compiled.shared > 0,
        "datapath groups' flows are compiled once: {:?}",
        first.compiled
    );
    let again = Pipelines::build_with(sb, &all, Viewpoint::Everywhere, &mut cache);
    let pairs = first.compiled.compiled + first.compiled.shared;
    assert_eq!(
        again.compiled,
        BuildStats {
            compiled: 0,
            reused: pairs,
            shared: 0
        },
        "the same rows compile nothing"
    );
    assert_eq!(tables(&again), tables(&first));

    let (u, set) = sb
        .address_sets
        .iter()
        .map(|(u, a)| (*u, a.name.clone()))
        .filter(|(_, n)| flows_naming(sb, &first, &format!("${n}"), None) > 0)
        .min_by(|a, b| a.1.cmp(&b.1))
        .expect("the tenant's security groups have address sets named in ACL flows");
    let mut sb = sb.clone();
    std::sync::Arc::make_mut(&mut sb.address_sets.get_mut(&u).unwrap().addresses)
        .push("10.99.99.99".into());
    let naming = flows_naming(&sb, &first, &format!("${set}"), None);
    let p = Pipelines::build_with(&sb, &all, Viewpoint::Everywhere, &mut cache);
    assert_eq!(
        p.compiled.compiled + p.compiled.shared,
        naming,
        "${set} gained an address: its flows recompile (once each, shared across a datapath group): {:?}",
        p.compiled
    );
    assert_eq!(
        tables(&p),
        tables(&Pipelines::build(&sb, &all, Viewpoint::Everywhere))
    );

    let (u, group) = sb
        .port_groups
        .iter()
        .filter(|(_, g)| g.ports.len() > 1)
        .map(|(u, g)| (*u, g.name.clone()))
        .min_by(|a, b| a.1.cmp(&b.1))
        .expect("the tenant's port groups have members");
    std::sync::Arc::make_mut(&mut sb.port_groups.get_mut(&u).unwrap().ports).pop();
    // SB names a group `<datapath key>_<name>`; flows name `@<name>`.
    let (key, name) = group.split_once('_').expect("a datapath's port group");
    let naming = flows_naming(&sb, &first, &format!("@{name}"), Some(key.parse().unwrap()));
    let p = Pipelines::build_with(&sb, &all, Viewpoint::Everywhere, &mut cache);
    assert!(naming > 0, "@{name} is named by flows of its datapath");
    assert_eq!(
        p.compiled.compiled + p.compiled.shared,
        naming,
        "@{name} lost a member: its datapath's flows naming it recompile"
    );
    assert_eq!(
        tables(&p),
        tables(&Pipelines::build(&sb, &all, Viewpoint::Everywhere))
    );

    // Told what changed (as the chassis is, through the flow index): nothing, then a
    // flow row of one datapath removed. The result still equals a build from nothing.
    let none = std::collections::HashSet::new();
    let p = Pipelines::build_changed(&sb, &all, Viewpoint::Everywhere, &mut cache, Some(&none));
    assert_eq!(p.compiled.compiled, 0, "nothing changed: nothing compiles");
    let before = tables(&p);
    assert_eq!(
        before,
        tables(&Pipelines::build(&sb, &all, Viewpoint::Everywhere))
    );
    let (fu, f) = sb
        .lflows
        .iter()
        .filter(|(_, f)| f.logical_datapath().is_some() && f.logical_dp_group().is_none())
        .map(|(u, f)| (*u, f.clone()))
        .min_by_key(|(u, _)| *u)
        .expect("a flow of one datapath");
    let mut changed = std::collections::HashSet::new();
    let ix = sb
        .lflow_index
        .as_mut()
        .expect("rows from a replica are indexed");
    ix.remove(fu, &f, &sb.dp_groups, &mut changed);
    sb.lflows.remove(&fu);
    assert_eq!(changed.len(), 1, "one datapath's flows changed");
    let p = Pipelines::build_changed(&sb, &all, Viewpoint::Everywhere, &mut cache, Some(&changed));
    assert_eq!(
        tables(&p),
        tables(&Pipelines::build(&sb, &all, Viewpoint::Everywhere)),
        "a flow removed, told by the index"
    );
    assert_ne!(tables(&p), before, "the removed flow is gone");
}

/// A tiny deterministic generator (xorshift64*), so a failure names a packet that
/// the next run generates again.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[(self.next() % v.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// One generated packet from `vm`, as a microflow both tracers take.
fn packet(rng: &mut Rng, vm: &Vm) -> String {
    let router = ROUTER.iter().find(|r| r.0 == vm.switch).unwrap();
    let peer = *rng.pick(&VMS);
    let same_net = peer.switch == vm.switch;
    let spoof = rng.chance(8);
    let src_mac = if spoof && rng.chance(50) {
        "50:54:00:00:aa:aa"
    } else {
        vm.mac
    };
    let (dst_mac, ip4_dst, ip6_dst) = match rng.next() % 7 {
        0 => (router.1, router.2, router.3),
        6 => (router.1, *rng.pick(&VIPS), peer.ip6),
        1 => ("ff:ff:ff:ff:ff:ff", "255.255.255.255", "ff02::1"),
        2 => (router.1, "10.0.9.9", "2001:db8:9::9"),
        _ if same_net => (peer.mac, peer.ip4, peer.ip6),
        _ => (router.1, peer.ip4, peer.ip6),
    };
    let ip4_src = if spoof && !rng.chance(50) {
        "10.0.0.99"
    } else {
        vm.ip4
    };
    let ttl = *rng.pick(&[64, 64, 64, 2, 1, 0]);
    let head = format!("inport == \"{}\" && eth.src == {src_mac}", vm.name);
    match rng.next() % 10 {
        0 => {
            let tpa = *rng.pick(&[router.2, peer.ip4, "10.0.0.99", vm.ip4]);
            let op = *rng.pick(&[1, 1, 2]);
            let dst = if op == 1 { "ff:ff:ff:ff:ff:ff" } else { router.1 };
            format!(
                "{head} && eth.dst == {dst} && arp && arp.op == {op} && arp.sha == {src_mac} && arp.spa == {ip4_src} && arp.tha == 00:00:00:00:00:00 && arp.tpa == {tpa}"
            )
        }
        1 => format!(
            "{head} && eth.dst == ff:ff:ff:ff:ff:ff && ip4 && ip4.src == {} && ip4.dst == 255.255.255.255 && ip.ttl == 64 && udp && udp.src == 68 && udp.dst == 67",
            if rng.chance(50) { "0.0.0.0" } else { ip4_src }
        ),
        2 | 3 => {
            let (l4, src, dst) = l4(rng);
            format!(
                "{head} && eth.dst == {dst_mac} && ip6 && ip6.src == {} && ip6.dst == {ip6_dst} && ip.ttl == {ttl} && {l4} && {l4}.src == {src} && {l4}.dst == {dst}",
                if spoof { "2001:db8::99" } else { vm.ip6 }
            )
        }
        4 => format!(
            "{head} && eth.dst == {dst_mac} && ip6 && ip6.src == {} && ip6.dst == {ip6_dst} && ip.ttl == {ttl} && icmp6 && icmp6.type == 128 && icmp6.code == 0",
            vm.ip6
        ),
        5 => {
            // Not the router's address: ovn-trace 23.03 aborts on the `nd_na_router`
            // that answers it (an assertion in its `execute_nd_na`); the router's
            // neighbour advertisements are tested end to end instead.
            let target = *rng.pick(&[peer.ip6, vm.ip6, "2001:db8::99"]);
            let sn = "ff02::1";
            format!(
                "{head} && eth.dst == 33:33:ff:00:00:01 && ip6 && ip6.src == {} && ip6.dst == {sn} && ip.ttl == 255 && icmp6 && icmp6.type == 135 && icmp6.code == 0 && nd.target == {target} && nd.sll == {src_mac}",
                vm.ip6
            )
        }
        6 => format!(
            "{head} && eth.dst == {dst_mac} && ip4 && ip4.src == {ip4_src} && ip4.dst == {ip4_dst} && ip.ttl == {ttl} && icmp4 && icmp4.type == 8 && icmp4.code == 0"
        ),
        _ => {
            let (l4, src, dst) = l4(rng);
            format!(
                "{head} && eth.dst == {dst_mac} && ip4 && ip4.src == {ip4_src} && ip4.dst == {ip4_dst} && ip.ttl == {ttl} && {l4} && {l4}.src == {src} && {l4}.dst == {dst}"
            )
        }
    }
}

fn l4(rng: &mut Rng) -> (&'static str, u16, u16) {
    let proto = *rng.pick(&["tcp", "tcp", "udp"]);
    let dst = *rng.pick(&[80, 5432, 22, 53]);
    (proto, 40_000 + (rng.next() % 1000) as u16, dst)
}

/// Connection tracking states for the scripted packets (one per `ct_next`).
fn ct_script(rng: &mut Rng) -> Vec<&'static str> {
    let one = ["new", "est", "est,rpl", "inv", "rel", "new,inv"];
    (0..1 + rng.next() % 3).map(|_| *rng.pick(&one)).collect()
}

/// What is compared: the decisions of a minimal trace, one line per output (or
/// error), with the packet changes and transformations on the way to it. Connection
/// tracking nodes are transparent: the states they answered are the test's input.
/// `ovn-trace` keeps a packet's `ct_state` across a patch port where OVN clears it
/// (`physical.c`: `ct_clear` before the peer's ingress); vswitchd's trace mode keeps
/// it too, but the hairpin checks its load balancers' switches then run again write
/// zeros that change nothing, and are left out.
fn decisions(minimal: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut path: Vec<(String, bool)> = Vec::new(); // (node, opened a block)
    for line in minimal.lines().filter(|l| !l.starts_with('#')) {
        let mut l = line.trim().to_string();
        while let (Some(a), Some(b)) = (l.find("/*"), l.find("*/")) {
            if b < a {
                break;
            }
            l.replace_range(a..b + 2, "");
        }
        let l = l.replace(" )", ")").trim().to_string();
        if l == "};" {
            while let Some((_, block)) = path.pop() {
                if block {
                    break;
                }
            }
            continue;
        }
        let (node, opens) = match l.strip_suffix('{') {
            Some(n) => (n.trim().to_string(), true),
            None => (l.trim_end_matches(';').trim().to_string(), false),
        };
        // The hairpin checks (`ls_in_pre_hairpin` on a tracked packet) run again in
        // ovn-trace after a patch port, where its packet is still tracked: a 0 they
        // write changes nothing (a 1 does, and is compared).
        if node.is_empty() || node == "reg0[6] = 0" || node == "reg0[12] = 0" {
            continue;
        }
        let ct = ["ct_next", "ct_commit_nat", "ct_lb_mark", "ct_lb"]
            .iter()
            .any(|c| node.starts_with(c));
        if opens {
            path.push((
                if ct {
                    String::new()
                } else {
                    format!("{node} {{")
                },
                true,
            ));
        } else if node.starts_with("output(") || node.starts_with("***") {
            let p: Vec<&str> = path
                .iter()
                .map(|(n, _)| n.as_str())
                .filter(|n| !n.is_empty())
                .collect();
            out.push(format!("{} {node}", p.join(" ")));
        } else if !ct {
            path.push((node, false));
        }
    }
    out
}

/// A running `ovn-trace --detach`, asked through its unixctl socket.
struct TraceDaemon {
    ctl: PathBuf,
    pidfile: PathBuf,
}

impl TraceDaemon {
    fn start(c: &OvnCentral) -> TraceDaemon {
        let ctl = c.dir().join("ovn-trace.ctl");
        let pidfile = c.dir().join("ovn-trace.pid");
        c.trace(&[
            "--detach",
            &format!("--unixctl={}", ctl.display()),
            &format!("--pidfile={}", pidfile.display()),
            &format!("--log-file={}", c.dir().join("ovn-trace.log").display()),
        ]);
        wait_for(
            std::time::Duration::from_secs(20),
            "ovn-trace's socket",
            || ctl.exists().then_some(()),
        );
        TraceDaemon { ctl, pidfile }
    }

    /// `ovs-appctl trace --minimal MICROFLOW`, over one JSON-RPC exchange.
    fn trace(&self, microflow: &str) -> String {
        let mut s = UnixStream::connect(&self.ctl).expect("ovn-trace's unixctl socket");
        let req =
            serde_json::json!({"id": 0, "method": "trace", "params": ["--minimal", microflow]});
        s.write_all(req.to_string().as_bytes()).unwrap();
        let mut de = serde_json::Deserializer::from_reader(&mut s).into_iter::<serde_json::Value>();
        let reply = match de.next() {
            Some(r) => r.expect("JSON"),
            None => panic!(
                "ovn-trace closed the connection on {microflow:?}; its log:\n{}",
                std::fs::read_to_string(self.ctl.with_file_name("ovn-trace.log"))
                    .unwrap_or_default()
            ),
        };
        match reply.get("result").and_then(|r| r.as_str()) {
            Some(r) => r.to_string(),
            None => panic!("ovn-trace refused {microflow}: {reply}"),
        }
    }
}

impl Drop for TraceDaemon {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pidfile) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                // SAFETY: kill(2) on the pid the daemon's own pidfile names.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
    }
}

/// Ours, for `microflow` with `ct`.
fn ours(p: &Pipelines, microflow: &str, ct: &[&str]) -> String {
    let states = ct.iter().map(|s| parse_ct_state(s).unwrap()).collect();
    let (_, nodes) =
        trace(p, microflow, states, Mode::Trace).unwrap_or_else(|e| panic!("{microflow}: {e}"));
    minimal(&nodes)
}

fn theirs_scripted(sb: &str, microflow: &str, ct: &[&str]) -> String {
    let mut cmd = Command::new("ovn-trace");
    cmd.arg(format!("--db={sb}")).arg("--minimal");
    for s in ct {
        cmd.arg(format!("--ct={s}"));
    }
    let out = cmd.arg(microflow).output().expect("ovn-trace runs");
    assert!(
        out.status.success(),
        "ovn-trace {microflow}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn decisions_equal_ovn_trace_for_ten_thousand_packets() {
    let dir = TempDir::new("ovn-pipeline");
    let c = OvnCentral::start(&dir);
    tenant::build(&c);
    add_load_balancers(&c);
    let (sb_rows, p) = pipelines(&c);
    incremental_builds_equal_full_builds(&sb_rows);
    assert!(
        p.skipped.is_empty(),
        "flows that did not parse: {:?}",
        p.skipped
    );
    assert_eq!(
        p.unkeyed, None,
        "the tenant's flows are decided from the data path's cache key"
    );
    for dp in p.datapaths.values() {
        assert_eq!(
            dp.unsupported, None,
            "datapath {} uses an action not run here",
            dp.name
        );
    }
    let daemon = TraceDaemon::start(&c);
    let mut rng = Rng(0x005e_ed0f_0c7a);
    let mut failures = Vec::new();
    let mut outputs = 0usize;
    let mut balanced = 0usize;
    let mut check =
        |microflow: String, ct: Vec<&str>, theirs: String, failures: &mut Vec<String>| {
            let mine = ours(&p, &microflow, &ct);
            outputs += mine.matches("output(").count();
            if microflow.contains("ip4.dst == 172.16.100.") && mine.contains("output(") {
                balanced += 1;
            }
            if decisions(&mine) != decisions(&theirs) {
                failures.push(format!(
                    "--ct {ct:?} {microflow}\n--- ovn-trace:\n{theirs}--- vswitchd:\n{mine}"
                ));
            }
        };
    // OVN_TRACE_PACKETS=N scales the run down for development (N packets in all).
    let scale = |n: usize| {
        std::env::var("OVN_TRACE_PACKETS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(n, |t| n * t / (DEFAULT_CT_PACKETS + SCRIPTED_CT_PACKETS))
    };
    for i in 0..scale(DEFAULT_CT_PACKETS) {
        let vm = VMS[i % VMS.len()];
        let m = packet(&mut rng, &vm);
        let theirs = daemon.trace(&m);
        check(m, Vec::new(), theirs, &mut failures);
    }
    let sb = c.sb_remote();
    for i in 0..scale(SCRIPTED_CT_PACKETS) {
        let vm = VMS[i % VMS.len()];
        let m = packet(&mut rng, &vm);
        let ct = ct_script(&mut rng);
        let theirs = theirs_scripted(&sb, &m, &ct);
        check(m, ct, theirs, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} of {} packets decided differently; the first:\n{}",
        failures.len(),
        scale(DEFAULT_CT_PACKETS) + scale(SCRIPTED_CT_PACKETS),
        failures
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Packets to the VIPs reach their backends (or an error comes back).
    assert!(
        balanced > scale(100),
        "only {balanced} packets to a VIP had an output"
    );
    // The generator reaches every kind of decision: deliveries, routed packets,
    // drops, replies built by the pipeline.
    assert!(
        outputs > scale(2_000),
        "only {outputs} outputs: the packets mostly dropped"
    );
}
