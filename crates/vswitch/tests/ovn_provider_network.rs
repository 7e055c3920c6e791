//! OVN provider networks (issue 28 §1), in a real OVN deployment: logical switch sw0
//! has a `localnet` port for physnet1 on VLAN 100. **hv1** is Open vSwitch +
//! ovn-controller (`ovn-bridge-mappings=physnet1:br-phy`), **hv2** is vswitchd
//! (`--ovn-bridge-mappings physnet1:phys`, `phys` an AF_XDP uplink of its own; or, in
//! the second test, the uplink that also carries its Geneve endpoint), and
//! **host** is a plain Linux namespace with a VLAN 100 interface, no switch. The
//! "physical network" is the fabric's Linux bridge, which also carries the underlay.
//!
//! - All three ping each other and move TCP (sha256 checked).
//! - On hv2's physical port, sw0's frames are tagged 100 (none untagged); on its
//!   underlay port no Geneve frame passes: chassis reach each other over the
//!   physical network, not through tunnels, as OVN does for switches with a
//!   localnet port.

mod common;

use common::chassis::*;
use common::fabric::{tunnels, vlan_interface, Capture, Fabric};
use common::ovn::OvnCentral;
use common::ovs::Ovs;
use common::*;

/// MiB per TCP transfer.
const TCP_MB: usize = 16;

/// The host's VLAN interface.
const HOST_IF: &str = "vlan100";

/// Turns off VLAN tag offload on `dev` in namespace `ns`: tags stay in the frames'
/// bytes, where a generic-mode XDP program (and a capture) sees them, rather than in
/// the kernel's packet metadata.
fn tags_inline(f: &Fabric, ns: &str, dev: &str) {
    f.exec(
        ns,
        &["ethtool", "-K", dev, "rxvlan", "off", "txvlan", "off"],
    );
}

#[test]
fn a_provider_network_is_bridged_to_its_uplink() {
    provider_network(false, false);
}

#[test]
fn a_provider_network_shares_the_tunnel_uplink() {
    provider_network(true, false);
}

/// With a security group on lsp-a, sw0 runs OVN's logical pipeline on hv2: the
/// localnet port is an input and an output of the pipeline, frames to hv1's port go
/// through it (physical.c's `PORT_LOCALNET`), and the ACLs hold for frames from the
/// physical network.
#[test]
fn a_provider_network_runs_the_logical_pipeline() {
    provider_network(false, true);
}

/// Port group `pg_a` (lsp-a) with a security group: IP out, ICMP and TCP in,
/// related replies, nothing else in.
fn security_group(c: &OvnCentral) {
    c.nbctl(&["pg-add", "pg_a", "lsp-a"]);
    for (dir, prio, m, verdict) in [
        (
            "from-lport",
            "1002",
            "inport == @pg_a && ip4",
            "allow-related",
        ),
        (
            "to-lport",
            "1002",
            "outport == @pg_a && ip4 && (icmp4 || tcp)",
            "allow-related",
        ),
        ("to-lport", "1001", "outport == @pg_a && ip", "drop"),
    ] {
        c.nbctl(&["acl-add", "pg_a", dir, prio, m, verdict]);
    }
}

/// The test, hv2's physical network on its own uplink or (`shared`) on the uplink of
/// its Geneve endpoint; (`acl`) with a security group on hv2's port.
fn provider_network(shared: bool, acl: bool) {
    let _g = serial();
    setup_host();
    let prefix = match (shared, acl) {
        (true, _) => "opns",
        (false, true) => "opna",
        (false, false) => "opn",
    };
    let f = Fabric::new(prefix, 3, 1600);
    let dir = TempDir::new("ovn-localnet");
    let c = OvnCentral::start(&dir);
    c.nbctl(&["ls-add", "sw0"]);
    for (lsp, addr) in [
        ("lsp-hv1", format!("{HV1_VIF} 10.0.0.1")),
        ("lsp-a", format!("{TAP_MAC} 10.0.0.2")),
    ] {
        c.nbctl(&["lsp-add", "sw0", lsp]);
        c.nbctl(&["lsp-set-addresses", lsp, &addr]);
    }
    c.nbctl(&["lsp-add", "sw0", "ln-sw0"]);
    c.nbctl(&["lsp-set-type", "ln-sw0", "localnet"]);
    c.nbctl(&["lsp-set-addresses", "ln-sw0", "unknown"]);
    c.nbctl(&["lsp-set-options", "ln-sw0", "network_name=physnet1"]);
    c.nbctl(&["set", "logical_switch_port", "ln-sw0", "tag=100"]);
    if acl {
        security_group(&c);
    }

    // hv2's physical port: a veth of its own on the fabric bridge, or its underlay
    // link.
    let id = std::process::id() % 10000;
    let (phys, peer) = if shared {
        (f.link[1].clone(), f.port[1].clone())
    } else {
        let (phys, peer) = (format!("vopn{id}x"), format!("vopn{id}y"));
        run(&[
            "ip", "link", "add", &phys, "type", "veth", "peer", "name", &peer,
        ]);
        run(&["ip", "link", "set", &phys, "netns", &f.ns[1]]);
        run(&["ip", "link", "set", &peer, "netns", &f.fabric]);
        f.exec(
            &f.fabric,
            &[
                "ip", "link", "set", &peer, "mtu", "1600", "master", "br0", "up",
            ],
        );
        let v6 = format!("net.ipv6.conf.{phys}.disable_ipv6=1");
        f.exec(&f.ns[1], &["sysctl", "-qw", &v6]);
        f.exec(&f.ns[1], &["ip", "link", "set", &phys, "mtu", "1600", "up"]);
        (phys, peer)
    };
    tags_inline(&f, &f.ns[1], &phys);
    for p in f.port.iter().chain((!shared).then_some(&peer)) {
        tags_inline(&f, &f.fabric, p);
    }

    // host: VLAN 100 on its fabric link, through a userspace 802.1Q driver.
    let h = &f.ns[2];
    let _vlan = vlan_interface(h, &f.link[2], HOST_IF, 100);
    let v6 = format!("net.ipv6.conf.{HOST_IF}.disable_ipv6=1");
    f.exec(h, &["sysctl", "-qw", &v6]);
    f.exec(h, &["ip", "link", "set", HOST_IF, "mtu", "1500", "up"]);
    f.exec(h, &["ip", "addr", "add", "10.0.0.3/24", "dev", HOST_IF]);

    let hv1 = Ovs::ovn_chassis(&f, 0, &dir, "hv1", &c.sb_remote());
    hv1.vsctl(&[
        "set",
        "open",
        ".",
        "external_ids:ovn-bridge-mappings=physnet1:br-phy",
    ]);
    hv1.vif(&f, "vif0", "lsp-hv1", HV1_VIF, "10.0.0.1/24", 1500);
    let ta = format!("vopn{id}a");
    let mut args = chassis_args(&f, 1, &c, "hv2", &tap("ta", &ta, "lsp-a"));
    let uplink = if shared {
        "u"
    } else {
        args.extend(["--uplink".to_string(), format!("phys={phys},mode=generic")]);
        "phys"
    };
    args.extend([
        "--ovn-bridge-mappings".to_string(),
        format!("physnet1:{uplink}"),
    ]);
    let sw = Vswitchd::start_in(Some(&f.ns[1]), &dir, "hv2", &args);
    tap_up(&f, 1, &ta, TAP_MAC, "10.0.0.2/24");
    c.wait_chassis("hv2");
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);

    // The database and vswitchctl say what this chassis bridges.
    assert_eq!(
        c.sb_get("Port_Binding", "logical_port", "ln-sw0", "tag"),
        "100"
    );
    let mappings = c.sbctl(&["get", "chassis", "hv2", "other_config:ovn-bridge-mappings"]);
    assert_eq!(
        mappings.trim().trim_matches('"'),
        format!("physnet1:{uplink}")
    );
    let r = ovn(&sw);
    assert_eq!(r.provider_networks.len(), 1, "{:?}", r.provider_networks);
    let pn = &r.provider_networks[0];
    assert_eq!(
        (pn.localnet_port.as_str(), pn.uplink.as_str(), pn.vlan),
        ("ln-sw0", uplink, 100)
    );

    let mut on_phys = Capture::on(&f, &peer, "greater 0", &dir);
    let mut underlay = (!shared).then(|| Capture::start(&f, 1, &dir));
    let (hv1_ns, hv2_ns) = (&f.ns[0], &f.ns[1]);
    for (from, to, what) in [
        (hv2_ns, "10.0.0.1", "hv2 -> hv1"),
        (hv2_ns, "10.0.0.3", "hv2 -> host"),
        (hv1_ns, "10.0.0.2", "hv1 -> hv2"),
        (hv1_ns, "10.0.0.3", "hv1 -> host"),
        (h, "10.0.0.1", "host -> hv1"),
        (h, "10.0.0.2", "host -> hv2"),
    ] {
        assert!(ping_ok(from, to, 20), "{what}: no answer");
    }
    tcp_transfer(Some(hv1_ns), Some(hv2_ns), "10.0.0.1", TCP_MB);
    tcp_transfer(Some(hv2_ns), Some(hv1_ns), "10.0.0.2", TCP_MB);
    tcp_transfer(Some(h), Some(hv2_ns), "10.0.0.3", TCP_MB);
    tcp_transfer(Some(hv2_ns), Some(h), "10.0.0.2", TCP_MB);
    tcp_transfer(Some(hv1_ns), Some(h), "10.0.0.1", TCP_MB);
    on_phys.stop();
    if let Some(u) = underlay.as_mut() {
        u.stop();
    }

    let tagged = on_phys
        .fields("vlan.id == 100 && ip.addr == 10.0.0.0/24", &["frame.len"])
        .len();
    let untagged = on_phys
        .fields("!vlan && ip.addr == 10.0.0.0/24", &["frame.len"])
        .len();
    let largest = on_phys
        .fields("vlan.id == 100", &["frame.len"])
        .iter()
        .filter_map(|r| r.first()?.parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    let geneve = underlay
        .as_ref()
        .unwrap_or(&on_phys)
        .fields("geneve", &["geneve.vni"])
        .len();
    eprintln!(
        "hv2's physical port: {tagged} frames of sw0 tagged 100 (largest {largest} B), {untagged} untagged; \
         Geneve frames on its underlay port: {geneve}"
    );
    assert!(
        tagged > 2 * (TCP_MB << 20) / 1500,
        "{tagged} tagged frames for 4 x {TCP_MB} MiB through hv2"
    );
    assert_eq!(untagged, 0, "sw0's frames leave hv2 tagged");
    assert!(
        largest <= 1600 + 18,
        "segmented to the network's MTU: {largest}"
    );
    assert_eq!(geneve, 0, "sw0 is bridged: no tunnel between hv1 and hv2");
    let t = tunnels(&sw);
    assert!(
        t.iter().all(|t| t.tx_packets == 0),
        "vswitchd sent nothing into its tunnel: {t:?}"
    );
    for reason in ["bad_descriptor", "no_destination"] {
        assert_eq!(drops(&sw, "ta", reason), 0, "ta: {reason}");
    }
    if acl {
        security_group_holds(&c, &sw, h, hv1_ns);
    }
}

/// The security group decides on hv2 for frames from the physical network: a new
/// rule that drops the host's pings to lsp-a holds at once, hv1's pings still pass,
/// and both went through the logical pipeline.
fn security_group_holds(c: &OvnCentral, sw: &Vswitchd, host: &str, hv1: &str) {
    let runs: u64 = pmd_stats(&sw.control)
        .iter()
        .map(|r| r.lflow_hits + r.lflow_misses)
        .sum();
    assert!(
        runs > 1000,
        "sw0's frames went through the pipeline: {runs}"
    );
    c.nbctl(&[
        "acl-add",
        "pg_a",
        "to-lport",
        "1003",
        "outport == @pg_a && ip4.src == 10.0.0.3 && icmp4",
        "drop",
    ]);
    c.nbctl(&["--timeout=30", "--wait=hv", "sync"]);
    assert!(ping_ok(hv1, "10.0.0.2", 10), "hv1 -> hv2 still passes");
    assert!(
        !ping_ok(host, "10.0.0.2", 3),
        "host -> hv2 is dropped by the new ACL"
    );
}
