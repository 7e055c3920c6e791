//! Generated action lists print to text that parses back to the same
//! actions (and prints identically).

mod common;

use ovn_lflow::actions;
use proptest::prelude::*;

/// One action, drawn from the forms northd emits.
fn action() -> impl Strategy<Value = String> {
    let field = prop::sample::select(vec![
        ("reg0", "0x1234"),
        ("reg9[16..31]", "65535"),
        ("eth.dst", "00:11:22:33:44:55"),
        ("ip4.dst", "10.0.0.1"),
        ("ip6.src", "fe80::1"),
        ("xxreg0", "::1"),
        ("flags.loopback", "1"),
        ("outport", "\"lsp\\\"1\""),
        ("eth.src[40]", "0"),
        ("reg1", "0x10/0xf0"),
    ]);
    let ip = prop::sample::select(vec!["192.168.0.1", "fd00::5", "0.0.0.0"]);
    prop_oneof![
        Just("output;".to_string()),
        (0..24u8).prop_map(|t| format!("next({t});")),
        Just("next(pipeline=egress, table=3);".to_string()),
        field.prop_map(|(f, v)| format!("{f} = {v};")),
        Just("reg0 = reg1; outport = inport; eth.src <-> eth.dst;".to_string()),
        Just("ip.ttl--; ct_next; ct_clear; ct_commit_nat; ct_snat_to_vip;".to_string()),
        (any::<u32>(), any::<u128>()).prop_map(|(m, l)| format!("ct_commit(ct_mark={m}, ct_label={l:#x});")),
        Just("ct_commit { ct_mark.blocked = 1; ct_label.label = 7; };".to_string()),
        (ip.clone(), 1..1000u16, 1000..2000u16)
            .prop_map(|(a, lo, hi)| format!("ct_dnat({a}, {lo}-{hi}); ct_snat_in_czone({a});")),
        (1..65535u16).prop_map(|p| format!("ct_lb_mark(backends=10.0.0.1:{p},[fd00::1]:{p}; hash_fields=\"ip_src\"; skip_snat);")),
        (1..100u16, 1..100u16).prop_map(|(a, b)| format!("reg9[16..31] = select({a}={b}, 2, 3);")),
        (0..1500u16).prop_map(|n| format!("reg0[0] = check_pkt_larger({n});")),
        (0..0xf001u16).prop_map(|q| format!("set_queue({q});")),
        Just("log(name=\"acl1\", verdict=drop, severity=alert, meter=\"m\");".to_string()),
        Just("reg0[0] = put_dhcp_opts(offerip = 10.0.0.4, router = 10.0.0.1, dns_server = {8.8.8.8, 7.7.7.7});".to_string()),
        Just("reg0[3] = put_nd_ra_opts(addr_mode = \"slaac\", slla = 00:00:00:00:00:01, prefix = fd00::/64);".to_string()),
        Just("reg0[0] = lookup_arp(inport, arp.spa, arp.sha); put_arp(inport, arp.spa, arp.sha);".to_string()),
        Just("get_nd(outport, xxreg0); reg2[2] = lookup_nd_ip(inport, ip6.src);".to_string()),
        Just("outport = get_fdb(eth.dst); reg0[1] = lookup_fdb(inport, eth.src); put_fdb(inport, eth.src);".to_string()),
        Just("trigger_event(event = \"empty_lb_backends\", vip = \"10.0.0.1:80\", protocol = \"tcp\", load_balancer = \"12345678-abcd-9876-fedc-11119f8e7d6c\");".to_string()),
        Just("commit_lb_aff(vip = \"[::1]:8080\", backend = \"[::2]:8080\", proto = tcp, timeout = 30);".to_string()),
        (1..65535u16, 0..256u32).prop_map(|(p, d)| format!("sample(probability={p},collector_set=1,obs_domain={d},obs_point=$cookie);")),
        Just("fwd_group(liveness=true, childports=\"a\", \"b\"); bind_vport(\"v\", inport);".to_string()),
        Just("icmp4.frag_mtu = 1500; handle_svc_check(inport); handle_dhcpv6_reply; igmp;".to_string()),
    ]
}

fn actions_text() -> impl Strategy<Value = String> {
    let list = prop::collection::vec(action(), 1..4).prop_map(|v| v.join(" "));
    list.prop_recursive(3, 12, 3, |inner| {
        let kw = prop::sample::select(vec![
            "clone",
            "arp",
            "icmp4",
            "icmp4_error",
            "icmp6",
            "icmp6_error",
            "nd_ns",
            "nd_na",
            "nd_na_router",
            "tcp_reset",
            "sctp_abort",
            "reject",
        ]);
        (kw, inner.clone(), inner).prop_map(|(k, a, b)| format!("{k} {{ {a} }}; {b}"))
    })
}

proptest! {
    #[test]
    fn actions_round_trip(text in actions_text()) {
        let symtab = common::symtab();
        let opts = common::opt_tables();
        let pp = common::action_params(&symtab, &opts);
        let parsed = actions::parse(&text, &pp).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let printed = parsed.actions.to_string();
        let again = actions::parse(&printed, &pp).map_err(|e| TestCaseError::fail(format!("{printed}: {e}")))?;
        prop_assert_eq!(&again.actions, &parsed.actions, "{}", printed);
        prop_assert_eq!(again.actions.to_string(), printed);
    }
}
