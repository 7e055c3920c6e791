//! Every builder of ovn-pinctrl on untrusted wire bytes: parsing a
//! received frame, committing a flow to it, every controller action, both
//! DHCP replies. Nothing may panic, and what is built must parse back.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ovn_lflow::actions::{self, Action, ActionParams, GenOption, Pipeline};
use ovn_lflow::dhcp::OptionTable;
use ovn_lflow::{Field, SymbolTable};
use ovn_pinctrl::{
    build, extract, put_dhcp_opts, put_dhcpv6_opts, rewrite, start_flow, ControllerAction, Headers,
};

const DHCP4: &str = r#"reg0[3] = put_dhcp_opts(offerip = 10.0.0.4, bootfile_name = "pxelinux.0", bootfile_name_alt = "http://10.0.0.1/boot.ipxe", next_server = 10.0.0.9, lease_time = 3600, netmask = 255.255.255.0, router = 10.0.0.1, server_id = 10.0.0.1, classless_static_route = {30.0.0.0/24, 10.0.0.4, 0.0.0.0/0, 10.0.0.1}, domain_search_list = "ovn.org,abc.ovn.org", mtu = 1442, T1 = 1800);"#;
const DHCP6: &str = r#"reg0[3] = put_dhcpv6_opts(ia_addr = ae70::4, server_id = 00:00:00:00:10:02, dns_server = {ae70::1, ae70::2}, domain_search = "ovn.org");"#;

fn options(s: &str) -> Vec<GenOption> {
    let symtab = SymbolTable::ovn();
    let (v4, v6) = (OptionTable::dhcpv4(), OptionTable::dhcpv6());
    let (ra, ev) = (OptionTable::nd_ra(), OptionTable::empty_lb_backends());
    let params = ActionParams {
        symtab: &symtab,
        dhcp_opts: &v4,
        dhcpv6_opts: &v6,
        nd_ra_opts: &ra,
        event_opts: &ev,
        pipeline: Pipeline::Ingress,
        n_tables: 30,
        cur_ltable: 10,
    };
    match &actions::parse(s, &params).unwrap().actions.0[0] {
        Action::PutDhcpv4Opts(o) | Action::PutDhcpv6Opts(o) => o.options.clone(),
        _ => unreachable!(),
    }
}

const ACTIONS: [ControllerAction; 11] = [
    ControllerAction::Arp,
    ControllerAction::NdNs,
    ControllerAction::NdNa,
    ControllerAction::NdNaRouter,
    ControllerAction::Icmp4,
    ControllerAction::Icmp4Error,
    ControllerAction::Icmp6,
    ControllerAction::Icmp6Error,
    ControllerAction::TcpReset,
    ControllerAction::SctpAbort,
    ControllerAction::Reject,
];

fuzz_target!(|data: &[u8]| {
    static OPTS: OnceLock<(Vec<GenOption>, Vec<GenOption>)> = OnceLock::new();
    let (v4, v6) = OPTS.get_or_init(|| (options(DHCP4), options(DHCP6)));

    let _ = Headers::parse(data);
    let at = extract(data);

    // Committing a frame's own fields to it changes nothing.
    let mut same = data.to_vec();
    rewrite(&mut same, &at);
    if Headers::parse(data).is_ok() {
        assert_eq!(same, data);
    }
    // Committing another flow never changes the length, and never panics.
    let mut other = data.to_vec();
    let mut changed = at.clone();
    for f in [
        Field::Ipv4Src,
        Field::Ipv6Dst,
        Field::TcpDst,
        Field::UdpSrc,
        Field::SctpDst,
    ] {
        changed.set(f, at.get(f) ^ 0x5a5a);
    }
    changed.set(Field::NdTll, 0x0200_0000_0001);
    rewrite(&mut other, &changed);
    assert_eq!(other.len(), data.len());

    for a in ACTIONS {
        let Ok(start) = start_flow(a, &at) else {
            continue;
        };
        if let Ok(frame) = build(a, data, &at, &start) {
            let h = Headers::parse(&frame).expect("a built frame parses");
            assert!(h.ip.is_some() || h.eth_type == 0x0806);
            let back = extract(&frame);
            assert_eq!(back.get(Field::EthSrc), start.get(Field::EthSrc));
            assert_eq!(back.get(Field::EthType), start.get(Field::EthType));
        }
    }
    if let Ok(r) = put_dhcp_opts(data, &at, v4) {
        assert!(r.packet().len() >= r.udp_payload().len());
        let _ = r.frame(&r.resume_flow(&at));
    }
    if let Ok(r) = put_dhcpv6_opts(data, &at, v6) {
        let _ = r.frame(&r.resume_flow(&at));
    }
});
