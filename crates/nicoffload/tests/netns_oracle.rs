//! `probe` on interfaces made in network namespaces (veth with several
//! queues, dummy, tun/tap, lo), checked against `ethtool -k/-l/-g/-i/-x`,
//! `ethtool IFACE` and `ip -d -j link` as the oracle.
//!
//! Needs root (to create namespaces), iproute2 and ethtool. Each test makes
//! its own namespace `nicoff-PID-TAG`, deleted on drop, so the tests run in
//! parallel.

mod support;

use nicoffload::{
    names, AfXdpMode, AfXdpRequest, Datapath, Job, OffloadNeeds, OffloadPlan, Placement,
};
use support::{assert_matches_oracle, Netns};

/// Not a test on its own: the other tests run it inside a namespace.
#[test]
#[ignore = "helper run by the other tests inside a network namespace"]
fn probe_child() {
    support::probe_child();
}

fn veth_pair(ns: &Netns, queues: &str) {
    ns.ip(&[
        "link",
        "add",
        "va",
        "numtxqueues",
        queues,
        "numrxqueues",
        queues,
        "type",
        "veth",
        "peer",
        "name",
        "vb",
        "numtxqueues",
        queues,
        "numrxqueues",
        queues,
    ]);
}

#[test]
fn veth_with_four_queues_matches_ethtool() {
    let ns = Netns::new("veth");
    veth_pair(&ns, "4");
    let caps = ns.probe("va");
    assert_matches_oracle(&caps, &ns.oracle("va"));

    // Values the kernel's veth driver is known to give, so that a probe
    // and an oracle that were both wrong the same way would still fail.
    assert_eq!(caps.driver.as_deref(), Some("veth"));
    assert_eq!(caps.num_rx_queues, Some(4));
    let ch = caps.channels.as_ref().expect("veth reports channels");
    assert_eq!(
        (ch.rx, ch.rx_max, ch.tx, ch.tx_max),
        (Some(4), Some(4), Some(4), Some(4))
    );
    assert!(caps.feature(names::TX_UDP_TNL_SEGMENTATION).is_some());
    assert!(caps.features.contains_key("receive-hashing"));
    assert!(
        !caps.features.contains_key("rx-hashing"),
        "legacy name must replace the kernel name"
    );
    assert!(
        caps.features.contains_key("tx-scatter-gather"),
        "feature bit 0 must be present"
    );
    let xdp = caps.xdp.as_ref().expect("kernel has the netdev family");
    assert!(xdp.basic && xdp.redirect && !xdp.xsk_zerocopy, "{xdp:?}");
}

#[test]
fn probe_follows_live_changes() {
    let ns = Netns::new("live");
    veth_pair(&ns, "4");
    let before = ns.probe("va");
    let gro_before = before.features["generic-receive-offload"].active;

    let flip = if gro_before { "off" } else { "on" };
    ns.must("ethtool", &["-K", "va", "gro", flip]);
    ns.must("ethtool", &["-L", "va", "rx", "2"]);
    ns.ip(&["link", "set", "va", "mtu", "9000"]);

    let after = ns.probe("va");
    assert_matches_oracle(&after, &ns.oracle("va"));
    assert_eq!(
        after.features["generic-receive-offload"].active,
        !gro_before
    );
    assert_eq!(after.channels.as_ref().unwrap().rx, Some(2));
    assert_eq!(after.mtu, 9000);
}

#[test]
fn veth_xdp_features_follow_the_peer() {
    // drivers/net/veth.c, veth_set_xdp_features(): a veth reports
    // ndo-xmit when its peer has GRO on (or an XDP program), and no XDP
    // features at all when the peer has more tx queues than it has rx queues.
    let ns = Netns::new("xdp");
    veth_pair(&ns, "4");
    ns.ip(&["link", "set", "va", "up"]);
    ns.ip(&["link", "set", "vb", "up"]);
    ns.must("ethtool", &["-K", "vb", "gro", "off"]);
    let off = ns.probe("va").xdp.expect("xdp features");
    assert!(
        off.basic && off.redirect && off.rx_sg && !off.ndo_xmit,
        "{off:?}"
    );

    ns.must("ethtool", &["-K", "vb", "gro", "on"]);
    let on = ns.probe("va").xdp.expect("xdp features");
    assert!(on.ndo_xmit && on.ndo_xmit_sg, "{on:?}");

    ns.must("ethtool", &["-L", "va", "rx", "2"]);
    let cleared = ns.probe("va").xdp.expect("xdp features");
    assert_eq!(cleared.raw, 0, "{cleared:?}");
}

#[test]
fn veth_plan_is_native_copy_and_zero_copy_is_unavailable() {
    let ns = Netns::new("plan");
    veth_pair(&ns, "4");
    let caps = ns.probe("va");

    let auto = OffloadPlan::new(&caps, &OffloadNeeds::default());
    assert_eq!(auto.afxdp_mode(), Some(AfXdpMode::NativeCopy), "{auto}");
    let reason = &auto.get(Job::AfXdp).unwrap().reason;
    assert!(
        reason.contains("zero-copy unavailable") && reason.contains("veth"),
        "{reason}"
    );
    // AF_XDP cannot use the NIC's tunnel TSO; the switch segments.
    assert_eq!(
        auto.get(Job::TunnelTso).unwrap().placement,
        Placement::Software
    );

    let zc = OffloadPlan::new(
        &caps,
        &OffloadNeeds {
            afxdp_mode: AfXdpRequest::ZeroCopy,
            ..OffloadNeeds::default()
        },
    );
    let d = zc.get(Job::AfXdp).unwrap();
    assert_eq!(d.placement, Placement::Unavailable, "{zc}");
    assert!(d.reason.contains("xsk-zerocopy"), "{}", d.reason);

    // Through the kernel stack, veth's tx-udp_tnl-segmentation (on by
    // default) counts as hardware.
    let kernel = OffloadPlan::new(
        &caps,
        &OffloadNeeds {
            datapath: Datapath::KernelStack,
            ..OffloadNeeds::default()
        },
    );
    assert_eq!(
        kernel.get(Job::TunnelTso).unwrap().placement,
        if caps.feature_active(names::TX_UDP_TNL_SEGMENTATION) {
            Placement::Hardware
        } else {
            Placement::Software
        },
        "{kernel}"
    );
    assert_eq!(kernel.afxdp_mode(), None);

    // The plan serializes for `vswitchctl offloads --json`.
    let json = serde_json::to_value(&auto).unwrap();
    assert_eq!(json["decisions"][5]["job"], "af_xdp");
    assert_eq!(json["decisions"][5]["afxdp_mode"], "native_copy");
}

#[test]
fn tap_and_tun_match_ethtool() {
    let ns = Netns::new("tap");
    ns.ip(&["tuntap", "add", "mode", "tap", "name", "tp0"]);
    ns.ip(&["tuntap", "add", "mode", "tun", "name", "tn0"]);
    for dev in ["tp0", "tn0"] {
        let caps = ns.probe(dev);
        assert_matches_oracle(&caps, &ns.oracle(dev));
        assert_eq!(caps.driver.as_deref(), Some("tun"));
    }
    // drivers/net/tun.c gives a tap (IFF_TAP) basic | redirect | ndo-xmit
    // and a layer-3 tun (IFF_TUN) no XDP features.
    let tap = ns.probe("tp0");
    let xdp = tap.xdp.as_ref().expect("xdp features");
    assert!(
        xdp.basic && xdp.redirect && xdp.ndo_xmit && !xdp.xsk_zerocopy,
        "{xdp:?}"
    );
    let plan = OffloadPlan::new(&tap, &OffloadNeeds::default());
    assert_eq!(plan.afxdp_mode(), Some(AfXdpMode::NativeCopy), "{plan}");

    let tun = ns.probe("tn0");
    assert_eq!(tun.xdp.as_ref().map(|x| x.raw), Some(0));
    let plan = OffloadPlan::new(&tun, &OffloadNeeds::default());
    assert_eq!(plan.afxdp_mode(), Some(AfXdpMode::Generic), "{plan}");
    let reason = &plan.get(Job::AfXdp).unwrap().reason;
    assert!(reason.contains("native unavailable"), "{reason}");
}

#[test]
fn loopback_matches_ethtool() {
    let ns = Netns::new("lo");
    let caps = ns.probe("lo");
    assert_matches_oracle(&caps, &ns.oracle("lo"));
    // lo has no ethtool drvinfo, no channels, no rings, no XDP features.
    assert_eq!(caps.driver, None);
    assert_eq!(caps.channels, None);
    assert_eq!(caps.rings, None);
    assert_eq!(caps.xdp.as_ref().map(|x| x.raw), Some(0));
    let plan = OffloadPlan::new(&caps, &OffloadNeeds::default());
    assert_eq!(plan.afxdp_mode(), Some(AfXdpMode::Generic), "{plan}");
}

#[test]
fn dummy_matches_ethtool() {
    let ns = Netns::new("dummy");
    let out = ns.exec("ip", &["link", "add", "d0", "type", "dummy"]);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("Unknown device type"),
            "creating a dummy device failed unexpectedly: {err}"
        );
        eprintln!("SKIPPED dummy_matches_ethtool: this kernel has no dummy driver (CONFIG_DUMMY)");
        return;
    }
    let caps = ns.probe("d0");
    assert_matches_oracle(&caps, &ns.oracle("d0"));
    assert_eq!(caps.driver.as_deref(), Some("dummy"));
}

#[test]
fn json_feature_keys_are_ethtool_names_with_state_and_fixed() {
    let ns = Netns::new("json");
    veth_pair(&ns, "2");
    let (_, json) = ns.probe_as("va", None).expect("probe");
    for key in ["tx-udp_tnl-segmentation", "rx-gro-hw", "receive-hashing"] {
        let f = &json["features"][key];
        assert!(
            f["active"].is_boolean() && f["fixed"].is_boolean(),
            "{key}: {f}"
        );
    }
}

#[test]
fn probe_needs_no_privilege() {
    let ns = Netns::new("nopriv");
    veth_pair(&ns, "2");
    let root = ns.probe("va");
    let (nobody, _) = ns
        .probe_as("va", Some(65534))
        .expect("probe as uid 65534 without capabilities");
    assert_eq!(root, nobody);
}

#[test]
fn missing_interface_is_a_clear_error() {
    let ns = Netns::new("missing");
    let err = ns.probe_as("nosuch0", None).expect_err("no such interface");
    assert!(
        err.contains("no interface named \"nosuch0\" in this network namespace"),
        "{err}"
    );
    // And in the test's own namespace, without a child process.
    let name = format!("nx{}", std::process::id());
    let e = nicoffload::probe(&name).expect_err("no such interface");
    assert!(
        matches!(&e, nicoffload::Error::NoSuchInterface { ifname } if *ifname == name),
        "{e:?}"
    );
    let e = nicoffload::probe("bad/name").expect_err("invalid name");
    assert!(e.to_string().contains("invalid interface name"), "{e}");
}

#[test]
fn own_namespace_devices_match_ethtool() {
    // Interfaces with a bus device (physical or virtio NICs) and lo: these
    // do not come and go while other tests run in this namespace.
    let host = Netns::host();
    let mut seen = 0;
    for entry in std::fs::read_dir("/sys/class/net").expect("sysfs") {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let has_device = std::path::Path::new(&format!("/sys/class/net/{name}/device")).exists();
        if !has_device && name != "lo" {
            continue;
        }
        let caps = nicoffload::probe(&name).unwrap_or_else(|e| panic!("probe({name}): {e}"));
        assert_matches_oracle(&caps, &host.oracle(&name));
        eprintln!("{name}: driver {:?}, matches ethtool and ip", caps.driver);
        seen += 1;
    }
    assert!(seen >= 1, "no interface checked");
}
