//! What a switch's slow path does with OVN's controller actions, on three
//! packets from a VM: a UDP datagram an ACL rejects (`reject { ... }`), a
//! datagram routed to a next hop whose MAC is unknown (`arp { ... }`), and
//! a DHCPDISCOVER (`put_dhcp_opts`). Prints each frame built, in hex.
//!
//! Run with `cargo run -p ovn-pinctrl --example slow_path`.

use ovn_lflow::actions::{self, Action, ActionParams, Pipeline};
use ovn_lflow::dhcp::OptionTable;
use ovn_lflow::{Field, Flow, SymbolTable};
use ovn_pinctrl::{build, emit, extract, put_dhcp_opts, start_flow, ControllerAction, Kind};

const VM_MAC: u128 = 0x5054_0000_0001;
const ROUTER_MAC: u128 = 0x0000_0000_ff01;

fn show(what: &str, frame: &[u8]) {
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    println!("{what} ({} bytes):\n  {hex}", frame.len());
}

fn udp_from_vm(dst_ip: u128, dst_port: u128) -> Vec<u8> {
    let f = Flow::new()
        .with(Field::EthSrc, VM_MAC)
        .with(Field::EthDst, ROUTER_MAC)
        .with(Field::EthType, 0x0800)
        .with(Field::IpProto, 17)
        .with(Field::IpTtl, 64)
        .with(Field::Ipv4Src, 0x0a00_0005)
        .with(Field::Ipv4Dst, dst_ip)
        .with(Field::UdpSrc, 40000)
        .with(Field::UdpDst, dst_port);
    emit(&f, &Kind::Udp { data: b"hello" }).expect("a small datagram")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. reject: an ICMP port unreachable back to the VM. The nested
    //    actions (`outport <-> inport; next(pipeline=egress, ...)`) change
    //    no header field, so the start flow is the final one.
    let rx = udp_from_vm(0x0a00_0006, 9);
    let at = extract(&rx).with(Field::LogInport, 1);
    let new = start_flow(ControllerAction::Reject, &at)?;
    show(
        "reject -> ICMP port unreachable",
        &build(ControllerAction::Reject, &rx, &at, &new)?,
    );

    // 2. arp: the router asks for 172.16.0.254 (lr_in_arp_request:
    //    `arp { eth.dst = ff:ff:ff:ff:ff:ff; arp.spa = reg1; arp.tpa = reg0;
    //    arp.op = 1; output; }`). The switch keeps the datagram until the
    //    reply's `put_arp` teaches it the MAC, as pinctrl buffers it.
    let rx = udp_from_vm(0x0808_0808, 53);
    let at = extract(&rx).with(Field::EthSrc, ROUTER_MAC);
    let fin = start_flow(ControllerAction::Arp, &at)?
        .with(Field::EthDst, 0xffff_ffff_ffff)
        .with(Field::ArpSpa, 0xac10_0001)
        .with(Field::ArpTpa, 0xac10_00fe);
    show(
        "arp -> request for 172.16.0.254",
        &build(ControllerAction::Arp, &rx, &at, &fin)?,
    );

    // 3. put_dhcp_opts: a DISCOVER gets an OFFER; ls_in_dhcp_response then
    //    sets the addresses and ports.
    let mut bootp = vec![0u8; 236];
    bootp[..8].copy_from_slice(&[1, 1, 6, 0, 0x63, 0x59, 0xaa, 0x76]);
    bootp[28..34].copy_from_slice(&VM_MAC.to_be_bytes()[10..]);
    bootp.extend_from_slice(&[0x63, 0x82, 0x53, 0x63, 53, 1, 1, 255]);
    let discover = Flow::new()
        .with(Field::EthSrc, VM_MAC)
        .with(Field::EthDst, 0xffff_ffff_ffff)
        .with(Field::EthType, 0x0800)
        .with(Field::IpProto, 17)
        .with(Field::IpTtl, 64)
        .with(Field::Ipv4Dst, 0xffff_ffff)
        .with(Field::UdpSrc, 68)
        .with(Field::UdpDst, 67);
    let rx = emit(&discover, &Kind::Udp { data: &bootp })?;
    let options = dhcp_options(
        "reg0[3] = put_dhcp_opts(offerip = 10.0.0.5, lease_time = 3600, netmask = 255.255.255.0, \
         router = 10.0.0.1, server_id = 10.0.0.1, dns_server = {8.8.8.8}, mtu = 1442);",
    )?;
    let at = extract(&rx).with(Field::LogInport, 1);
    let reply = put_dhcp_opts(&rx, &at, &options)?;
    let mut fin = reply.resume_flow(&at);
    fin.set(Field::EthDst, fin.get(Field::EthSrc));
    fin.set(Field::EthSrc, ROUTER_MAC);
    fin.set(Field::Ipv4Src, 0x0a00_0001);
    fin.set(Field::UdpSrc, 67);
    fin.set(Field::UdpDst, 68);
    show("put_dhcp_opts -> DHCPOFFER", &reply.frame(&fin));
    Ok(())
}

/// The options of a `put_dhcp_opts` action, parsed by ovn-lflow.
fn dhcp_options(s: &str) -> Result<Vec<actions::GenOption>, ovn_lflow::Error> {
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
        cur_ltable: 20,
    };
    let parsed = actions::parse(s, &params)?;
    match parsed.actions.0.into_iter().next() {
        Some(Action::PutDhcpv4Opts(o)) => Ok(o.options),
        _ => unreachable!("the string is a put_dhcp_opts"),
    }
}
