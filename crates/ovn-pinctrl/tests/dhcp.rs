//! `put_dhcp_opts` and `put_dhcpv6_opts` against OVN's own test cases
//! (OVN 23.03 `tests/ovn.at`): the options ovn-controller encodes for
//! pinctrl ("action parsing", `encodes as controller(userdata=...)`), and
//! the whole reply frames of the `test_dhcp` and `test_dhcpv6` cases.

mod common;

use common::*;
use ovn_lflow::{Field, Flow};
use ovn_pinctrl::wire::dhcpv4::msg;
use ovn_pinctrl::{dhcp4, dhcp6, extract, put_dhcp_opts, put_dhcpv6_opts, Error};

/// `(action, userdata)` from ovn.at; the userdata's first 16 bytes are the
/// controller opcode and the result field, which pinctrl reads first.
const DHCPV4_ENCODINGS: &[(&str, &str)] = &[
    (
        "reg1[0] = put_dhcp_opts(offerip = 1.2.3.4, router = 10.0.0.1);",
        "00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.40.01.02.03.04.03.04.0a.00.00.01",
    ),
    (
        r#"reg2[5] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.254.0,mtu=1400,domain_name="ovn.org",wpad="https://example.org",bootfile_name="https://127.0.0.1/boot.ipxe",path_prefix="/tftpboot", next_server=10.0.0.9);"#,
        "00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.25.0a.00.00.04.43.1b.68.74.74.70.73.3a.2f.2f.31.32.37.2e.30.2e.30.2e.31.2f.62.6f.6f.74.2e.69.70.78.65.fd.04.0a.00.00.09.03.04.0a.00.00.01.01.04.ff.ff.fe.00.1a.02.05.78.0f.07.6f.76.6e.2e.6f.72.67.fc.13.68.74.74.70.73.3a.2f.2f.65.78.61.6d.70.6c.65.2e.6f.72.67.d2.09.2f.74.66.74.70.62.6f.6f.74",
    ),
    (
        "reg0[15] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.255.0,mtu=1400,ip_forward_enable=1,default_ttl=121,dns_server={8.8.8.8,7.7.7.7},classless_static_route={30.0.0.0/24,10.0.0.4,40.0.0.0/16,10.0.0.6,0.0.0.0/0,10.0.0.1},ethernet_encap=1,router_discovery=0,tftp_server_address={10.0.0.4,10.0.0.5},arp_cache_timeout=10,tcp_keepalive_interval=10);",
        "00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.6f.0a.00.00.04.03.04.0a.00.00.01.01.04.ff.ff.ff.00.1a.02.05.78.13.01.01.17.01.79.06.08.08.08.08.08.07.07.07.07.79.14.18.1e.00.00.0a.00.00.04.10.28.00.0a.00.00.06.00.0a.00.00.01.24.01.01.1f.01.00.96.08.0a.00.00.04.0a.00.00.05.23.04.00.00.00.0a.26.04.00.00.00.0a",
    ),
    (
        "reg0[15] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.255.0,mtu=1400,ip_forward_enable=1,default_ttl=121,dns_server={8.8.8.8,7.7.7.7},classless_static_route={30.0.0.0/24,10.0.0.4,40.0.0.0/16,10.0.0.6,0.0.0.0/0,10.0.0.1},ethernet_encap=1,router_discovery=0,tftp_server=10.0.0.10,broadcast_address=255.255.255.255);",
        "00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.6f.0a.00.00.04.03.04.0a.00.00.01.01.04.ff.ff.ff.00.1a.02.05.78.13.01.01.17.01.79.06.08.08.08.08.08.07.07.07.07.79.14.18.1e.00.00.0a.00.00.04.10.28.00.0a.00.00.06.00.0a.00.00.01.24.01.01.1f.01.00.42.04.0a.00.00.0a.1c.04.ff.ff.ff.ff",
    ),
    (
        r#"reg0[15] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.255.0,mtu=1400,ip_forward_enable=1,default_ttl=121,dns_server={8.8.8.8,7.7.7.7},classless_static_route={30.0.0.0/24,10.0.0.4,40.0.0.0/16,10.0.0.6,0.0.0.0/0,10.0.0.1},ethernet_encap=1,router_discovery=0,tftp_server="tftp_server_test");"#,
        "00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.6f.0a.00.00.04.03.04.0a.00.00.01.01.04.ff.ff.ff.00.1a.02.05.78.13.01.01.17.01.79.06.08.08.08.08.08.07.07.07.07.79.14.18.1e.00.00.0a.00.00.04.10.28.00.0a.00.00.06.00.0a.00.00.01.24.01.01.1f.01.00.42.10.74.66.74.70.5f.73.65.72.76.65.72.5f.74.65.73.74",
    ),
    (
        r#"reg2[5] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.254.0,mtu=1400,domain_name="ovn.org",wpad="https://example.org",bootfile_name="https://127.0.0.1/boot.ipxe",path_prefix="/tftpboot",domain_search_list="ovn.org,abc.ovn.org",netbios_name_server={10.0.0.7,10.0.0.8},netbios_node_type=2);"#,
        "00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.25.0a.00.00.04.43.1b.68.74.74.70.73.3a.2f.2f.31.32.37.2e.30.2e.30.2e.31.2f.62.6f.6f.74.2e.69.70.78.65.03.04.0a.00.00.01.01.04.ff.ff.fe.00.1a.02.05.78.0f.07.6f.76.6e.2e.6f.72.67.fc.13.68.74.74.70.73.3a.2f.2f.65.78.61.6d.70.6c.65.2e.6f.72.67.d2.09.2f.74.66.74.70.62.6f.6f.74.77.0f.03.6f.76.6e.03.6f.72.67.00.03.61.62.63.c0.00.2c.08.0a.00.00.07.0a.00.00.08.2e.01.02",
    ),
    (
        r#"reg2[5] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.254.0,mtu=1400,domain_name="ovn.org",wpad="https://example.org",bootfile_name="https://127.0.0.1/boot.ipxe",path_prefix="/tftpboot",domain_search_list="ovn.org,abc.ovn.org,def.ovn.org,ovn.test,def.ovn.test,test.org,abc.com");"#,
        "00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.25.0a.00.00.04.43.1b.68.74.74.70.73.3a.2f.2f.31.32.37.2e.30.2e.30.2e.31.2f.62.6f.6f.74.2e.69.70.78.65.03.04.0a.00.00.01.01.04.ff.ff.fe.00.1a.02.05.78.0f.07.6f.76.6e.2e.6f.72.67.fc.13.68.74.74.70.73.3a.2f.2f.65.78.61.6d.70.6c.65.2e.6f.72.67.d2.09.2f.74.66.74.70.62.6f.6f.74.77.35.03.6f.76.6e.03.6f.72.67.00.03.61.62.63.c0.00.03.64.65.66.c0.00.03.6f.76.6e.04.74.65.73.74.00.03.64.65.66.c0.15.04.74.65.73.74.c0.04.03.61.62.63.03.63.6f.6d.00",
    ),
    (
        r#"reg2[5] = put_dhcp_opts(offerip=10.0.0.4,router=10.0.0.1,netmask=255.255.254.0,mtu=1400,domain_name="ovn.org",hostname="ip-10-0-0-4");"#,
        "00.00.00.02.00.00.00.00.00.01.de.10.00.00.00.25.0a.00.00.04.03.04.0a.00.00.01.01.04.ff.ff.fe.00.1a.02.05.78.0f.07.6f.76.6e.2e.6f.72.67.0c.0b.69.70.2d.31.30.2d.30.2d.30.2d.34",
    ),
];

const DHCPV6_ENCODINGS: &[(&str, &str)] = &[
    (
        "reg1[0] = put_dhcpv6_opts(ia_addr = ae70::4, server_id = 00:00:00:00:10:02);",
        "00.00.00.05.00.00.00.00.00.01.de.10.00.00.00.40.00.05.00.10.ae.70.00.00.00.00.00.00.00.00.00.00.00.00.00.04.00.02.00.06.00.00.00.00.10.02",
    ),
    (
        "reg1[0] = put_dhcpv6_opts(dns_server={ae70::1,ae70::2});",
        "00.00.00.05.00.00.00.00.00.01.de.10.00.00.00.40.00.17.00.20.ae.70.00.00.00.00.00.00.00.00.00.00.00.00.00.01.ae.70.00.00.00.00.00.00.00.00.00.00.00.00.00.02",
    ),
    (
        "reg1[0] = put_dhcpv6_opts(server_id=12:34:56:78:9a:bc, dns_server={ae70::1,ae89::2});",
        "00.00.00.05.00.00.00.00.00.01.de.10.00.00.00.40.00.02.00.06.12.34.56.78.9a.bc.00.17.00.20.ae.70.00.00.00.00.00.00.00.00.00.00.00.00.00.01.ae.89.00.00.00.00.00.00.00.00.00.00.00.00.00.02",
    ),
    (
        r#"reg1[0] = put_dhcpv6_opts(domain_search = "ovn.org");"#,
        "00.00.00.05.00.00.00.00.00.01.de.10.00.00.00.40.00.18.00.07.6f.76.6e.2e.6f.72.67",
    ),
];

#[test]
fn dhcpv4_options_encode_as_ovn_controller_encodes_them() {
    for (action, userdata) in DHCPV4_ENCODINGS {
        let want = hex(userdata);
        let got = dhcp4::encode_options(&dhcp_options(action)).unwrap();
        assert_eq!(got.offer_ip.to_vec(), want[16..20], "{action}");
        assert_eq!(got.options, want[20..], "{action}");
    }
}

#[test]
fn dhcpv6_options_encode_as_ovn_controller_encodes_them() {
    for (action, userdata) in DHCPV6_ENCODINGS {
        let got = dhcp6::encode_options(&dhcp_options(action)).unwrap();
        assert_eq!(got, hex(userdata)[16..], "{action}");
    }
}

#[test]
fn put_dhcp_opts_needs_offerip_and_another_option() {
    let rx = request("f00000000001", "01", false, "00000000", None);
    let at = extract(&rx);
    let opts = dhcp_options("reg0[3] = put_dhcp_opts(offerip = 10.0.0.4);");
    assert_eq!(
        put_dhcp_opts(&rx, &at, &opts),
        Err(Error::MissingOption("any besides offerip"))
    );
}

/// ovn.at `test_dhcp`'s request: a DHCP message of type `ty` from `mac`,
/// with an unknown option 215, a pad, option 50 if `requested`.
fn request(mac: &str, ty: &str, broadcast: bool, ciaddr: &str, requested: Option<&str>) -> Vec<u8> {
    let (ip_len, udp_len) = if requested.is_some() {
        ("0120", "010b")
    } else {
        ("011a", "0106")
    };
    let flags = if broadcast { "8000" } else { "0000" };
    let mut r = hex(&format!(
        "ffffffffffff {mac} 0800 4510 {ip_len} 0000 0000 8011 0000 00000000 ffffffff
         0044 0043 {udp_len} 0000
         010106006359aa76 0000 {flags} {ciaddr} 000000000000000000000000 {mac}"
    ));
    r.extend_from_slice(&[0; 10 + 64 + 128]);
    r.extend(hex(&format!("63825363 3501{ty} d70701020304050607 00")));
    if let Some(ip) = requested {
        r.extend(hex(&format!("3204 {ip}")));
    }
    r.push(0xff);
    r
}

/// ovn.at `test_dhcp`'s expected reply.
#[allow(clippy::too_many_arguments)]
fn reply(
    mac: &str,
    srv_mac: &str,
    srv_ip: &str,
    dst: &str,
    ty: &str,
    yiaddr: &str,
    ciaddr: &str,
    broadcast: bool,
    opts: &str,
) -> Vec<u8> {
    let opts = hex(opts);
    let ip_len = 280 + opts.len();
    let flags = if broadcast { "8000" } else { "0000" };
    let mut r = hex(&format!(
        "{mac} {srv_mac} 0800 4510 {ip_len:04x} 0000 0000 8011 0000 {srv_ip} {dst}
         0043 0044 {:04x} 0000
         020106006359aa76 0000 {flags} {ciaddr} {yiaddr} 0000000000000000 {mac}",
        ip_len - 20
    ));
    fill_ip4_csum(&mut r, 14);
    r.extend_from_slice(&[0; 10 + 64 + 128]);
    r.extend(hex(&format!("63825363 3501{ty}")));
    r.extend(opts);
    r.extend(hex("00000000 ff 00000000"));
    r
}

const SRV_MAC: &str = "ff1000000001";
const SRV_IP: &str = "0a000001";
const OPTS: &str = "330400000e10 0104ffffff00 03040a000001 36040a000001";

/// northd's actions for the ovn.at case: options sorted by name, then
/// `ls_in_dhcp_response`.
fn serve(rx: &[u8], offer: &str) -> Result<Vec<u8>, Error> {
    let opts = dhcp_options(&format!(
        "reg0[3] = put_dhcp_opts(offerip = {offer}, lease_time = 3600, netmask = 255.255.255.0, router = 10.0.0.1, server_id = 10.0.0.1);"
    ));
    let at = extract(rx).with(Field::LogInport, 1);
    let r = put_dhcp_opts(rx, &at, &opts)?;
    // eth.dst = eth.src; eth.src = ff:10:00:00:00:01; ip4.src = 10.0.0.1;
    // udp.src = 67; udp.dst = 68; outport = inport; flags.loopback = 1; output;
    let mut f = r.resume_flow(&at).with(Field::Xxreg0, 1 << 99);
    f.set(Field::EthDst, f.get(Field::EthSrc));
    f.set(Field::EthSrc, 0xff10_0000_0001);
    f.set(Field::Ipv4Src, 0x0a00_0001);
    f.set(Field::UdpSrc, 67);
    f.set(Field::UdpDst, 68);
    Ok(r.frame(&f))
}

#[test]
fn a_discover_gets_an_offer_ovn_at_test_dhcp_1() {
    let rx = request("f00000000001", "01", false, "00000000", None);
    let got = serve(&rx, "10.0.0.4").unwrap();
    let want = reply(
        "f00000000001",
        SRV_MAC,
        SRV_IP,
        "0a000004",
        "02",
        "0a000004",
        "00000000",
        false,
        OPTS,
    );
    assert_eq!(got, want);
    etherparse_check(&got);
}

#[test]
fn a_request_for_the_offer_gets_an_ack_ovn_at_test_dhcp_2() {
    let rx = request("f00000000002", "03", false, "00000000", Some("0a000006"));
    let got = serve(&rx, "10.0.0.6").unwrap();
    let want = reply(
        "f00000000002",
        SRV_MAC,
        SRV_IP,
        "0a000006",
        "05",
        "0a000006",
        "00000000",
        false,
        OPTS,
    );
    assert_eq!(got, want);
}

#[test]
fn a_request_for_another_address_gets_a_nak_ovn_at_test_dhcp_3() {
    let rx = request("f00000000002", "03", false, "00000000", Some("0a000007"));
    let got = serve(&rx, "10.0.0.6").unwrap();
    let want = reply(
        "f00000000002",
        SRV_MAC,
        SRV_IP,
        "0a000006",
        "06",
        "00000000",
        "00000000",
        false,
        "",
    );
    assert_eq!(got, want);
}

#[test]
fn a_broadcast_request_renewing_by_ciaddr_gets_a_broadcast_ack() {
    let rx = request("f00000000002", "03", true, "0a000006", None);
    let got = serve(&rx, "10.0.0.6").unwrap();
    let want = reply(
        "f00000000002",
        SRV_MAC,
        SRV_IP,
        "ffffffff",
        "05",
        "0a000006",
        "0a000006",
        true,
        OPTS,
    );
    assert_eq!(got, want);
}

#[test]
fn an_inform_gets_an_ack_without_address_or_lease() {
    let rx = request("f00000000002", "08", false, "0a000006", None);
    let got = serve(&rx, "10.0.0.6").unwrap();
    let opts = "03040a000001 36040a000001";
    let want = reply(
        "f00000000002",
        SRV_MAC,
        SRV_IP,
        "0a000006",
        "05",
        "00000000",
        "0a000006",
        false,
        opts,
    );
    assert_eq!(got, want);
}

#[test]
fn release_decline_and_unknown_types_get_nothing() {
    for (ty, n) in [("07", msg::RELEASE), ("04", msg::DECLINE), ("09", 9)] {
        let rx = request("f00000000002", ty, false, "0a000006", None);
        assert_eq!(serve(&rx, "10.0.0.6"), Err(Error::NotAnswered(n)));
    }
}

#[test]
fn malformed_requests_get_nothing() {
    let mut rx = request("f00000000001", "01", false, "00000000", None);
    rx[42] = 2; // BOOTREPLY
    assert_eq!(serve(&rx, "10.0.0.4"), Err(Error::NotBootRequest(2)));
    let mut rx = request("f00000000001", "01", false, "00000000", None);
    rx[278] = 0; // cookie
    assert_eq!(serve(&rx, "10.0.0.4"), Err(Error::NoMagicCookie));
    let mut rx = request("f00000000001", "01", false, "00000000", None);
    rx[282] = 0xd7; // option 53 becomes an unknown one
    assert_eq!(serve(&rx, "10.0.0.4"), Err(Error::NoMessageType));
}

#[test]
fn ipxe_clients_get_bootfile_name_others_the_alternative() {
    let opts = dhcp_options(
        r#"reg0[3] = put_dhcp_opts(offerip = 10.0.0.4, bootfile_name = "pxelinux.0", bootfile_name_alt = "http://10.0.0.1/boot.ipxe", next_server = 10.0.0.9, router = 10.0.0.1);"#,
    );
    let mut rx = request("f00000000001", "01", false, "00000000", None);
    let plain = put_dhcp_opts(&rx, &extract(&rx), &opts).unwrap();
    let p = plain.udp_payload();
    assert_eq!(&p[20..24], &[10, 0, 0, 9], "siaddr is next_server");
    let alt = b"http://10.0.0.1/boot.ipxe";
    let want = [
        &hex("350102 43")[..],
        &[alt.len() as u8],
        alt,
        &hex("fd040a000009 03040a000001 00000000ff00000000"),
    ]
    .concat();
    assert_eq!(&p[240..], &want[..]);
    // An iPXE client: option 175 before the end.
    let end = rx.len() - 1;
    rx.splice(end..end, hex("af020000"));
    rx[16..18].copy_from_slice(&0x011eu16.to_be_bytes());
    rx[38..40].copy_from_slice(&0x010au16.to_be_bytes());
    let ipxe = put_dhcp_opts(&rx, &extract(&rx), &opts).unwrap();
    let want = [
        &hex("350102 430a")[..],
        b"pxelinux.0",
        &hex("fd040a000009 03040a000001 00000000ff00000000"),
    ]
    .concat();
    assert_eq!(&ipxe.udp_payload()[240..], &want[..]);
}

/// ovn.at `test_dhcpv6`'s message `code` from `f0:00:00:00:00:01`.
fn dhcpv6_request(code: &str) -> Vec<u8> {
    let len = if code == "0b" { "1a" } else { "2a" };
    let mut r = hex(&format!(
        "ffffffffffff f00000000001 86dd 0000000000{len}1101 fe80000000000000f20000fffe000001
         ff020000000000000000000000010002
         0222 0223 00{len} ffff {code} 010203
         0001000a00030001 f00000000001"
    ));
    if code != "0b" {
        r.extend(hex("0003000c0102030400000e1000001518"));
    }
    r
}

fn serve6(rx: &[u8]) -> Result<Vec<u8>, Error> {
    let opts = dhcp_options(
        "reg0[3] = put_dhcpv6_opts(ia_addr = ae70::4, server_id = 00:00:00:10:00:01);",
    );
    let at = extract(rx);
    let r = put_dhcpv6_opts(rx, &at, &opts)?;
    // eth.dst = eth.src; eth.src = E; ip6.dst = ip6.src; ip6.src = fe80::200:ff:fe10:1;
    // udp.src = 547; udp.dst = 546; outport = inport; flags.loopback = 1; output;
    let mut f: Flow = r.resume_flow(&at);
    f.set(Field::EthDst, f.get(Field::EthSrc));
    f.set(Field::EthSrc, 0x0000_0010_0001);
    f.set(Field::Ipv6Dst, f.get(Field::Ipv6Src));
    f.set(Field::Ipv6Src, 0xfe80_0000_0000_0000_0200_00ff_fe10_0001);
    f.set(Field::UdpSrc, 547);
    f.set(Field::UdpDst, 546);
    Ok(r.frame(&f))
}

fn dhcpv6_reply(code: &str, ia: bool) -> Vec<u8> {
    let len = if ia { "54" } else { "28" };
    let mut r = hex(&format!(
        "f00000000001 000000100001 86dd 0000000000{len}1101 fe80000000000000020000fffe100001
         fe80000000000000f20000fffe000001
         0223 0222 00{len} 0000 {code} 010203
         0001000a00030001 f00000000001"
    ));
    if ia {
        r.extend(hex("0003002801020304ffffffffffffffff00050018 ae700000000000000000000000000004 ffffffffffffffff"));
    }
    r.extend(hex("0002000a00030001 000000100001"));
    r
}

/// The reply with its UDP checksum zeroed (ovn.at's expected frames carry
/// the one its dummy datapath leaves, so it is checked on its own), and
/// whether the checksum is right.
fn without_udp_checksum(mut f: Vec<u8>) -> (Vec<u8>, bool) {
    let len = f.len() - 54;
    let p = pseudo6(&f[22..38], &f[38..54], len, 17);
    let ok = inet_csum(&[&p, &f[54..]]) == 0;
    f[60..62].fill(0);
    (f, ok)
}

#[test]
fn a_solicit_gets_an_advertise_ovn_at_test_dhcpv6_1() {
    let (got, csum_ok) = without_udp_checksum(serve6(&dhcpv6_request("01")).unwrap());
    assert_eq!(got, dhcpv6_reply("02", true));
    assert!(csum_ok);
}

#[test]
fn a_request_gets_a_reply() {
    let (got, csum_ok) = without_udp_checksum(serve6(&dhcpv6_request("03")).unwrap());
    assert_eq!(got, dhcpv6_reply("07", true));
    assert!(csum_ok);
}

#[test]
fn an_information_request_gets_a_reply_without_ia_na_ovn_at_test_dhcpv6_5() {
    let (got, csum_ok) = without_udp_checksum(serve6(&dhcpv6_request("0b")).unwrap());
    assert_eq!(got, dhcpv6_reply("07", false));
    assert!(csum_ok);
}

#[test]
fn renew_rebind_release_and_unknown_types_get_nothing_in_ovn_23_03() {
    for code in [5u8, 6, 8, 0x10] {
        let rx = dhcpv6_request(&format!("{code:02x}"));
        assert_eq!(serve6(&rx), Err(Error::NotAnswered(code)));
    }
}

#[test]
fn dhcpv6_needs_a_client_id_and_an_ia_na() {
    let mut rx = dhcpv6_request("01");
    rx[66] = 9; // the client id becomes option 9
    assert_eq!(serve6(&rx), Err(Error::NoClientId));
    let mut rx = dhcpv6_request("01");
    rx[84..88].fill(0); // IAID 0 is no IA_NA for pinctrl
    assert_eq!(serve6(&rx), Err(Error::NoIaNa));
}
