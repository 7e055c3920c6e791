//! `put_dhcp_opts`: the DHCPv4 reply ovn-controller's pinctrl makes of a
//! client's request (OVN 23.03 `lib/actions.c`
//! `encode_PUT_DHCPV4_OPTS()`, `encode_put_dhcpv4_option()`;
//! `controller/pinctrl.c` `pinctrl_handle_put_dhcp_opts()`; RFC 2131,
//! RFC 2132).
//!
//! - DHCPDISCOVER → DHCPOFFER; DHCPREQUEST → DHCPACK, or DHCPNAK when the
//!   requested address (option 50, else `ciaddr`) is not `offerip`;
//!   DHCPINFORM → DHCPACK without `netmask`, `lease_time`, `T1`, `T2`
//!   and with `yiaddr` 0 (RFC 2131 §3.4); DHCPRELEASE, DHCPDECLINE and
//!   other types → no reply.
//! - The reply is the request with its op set to BOOTREPLY, `yiaddr` the
//!   offered address, `siaddr` `next_server` (else the request's), then
//!   the magic cookie, option 53, the options in ovn-controller's order
//!   (`bootfile_name`, `bootfile_name_alt`, `next_server`, then the rest as
//!   the action lists them: northd sorts them by name), four zero bytes,
//!   END, four zero bytes. A NAK carries option 53 only.
//! - iPXE clients (option 175) get `bootfile_name`, others
//!   `bootfile_name_alt` in its place, when both are given.
//! - The reply keeps the request's Ethernet, IP and UDP headers; the IP
//!   destination becomes the offered address, or 255.255.255.255 when the
//!   client set the BROADCAST flag; the UDP checksum is 0. The logical
//!   pipeline then sets the addresses and ports (`ls_in_dhcp_response`).
//!
//! Where pinctrl would emit an option longer than its one-byte length
//! field, this refuses ([`Error::OptionTooLong`]). Everything else,
//! quirks included, is as pinctrl does it: see [`encode_domains`].

use ovn_lflow::actions::{GenOption, Value};
use ovn_lflow::dhcp::OptType;
use ovn_lflow::lex::Int;
use ovn_lflow::Flow;

use crate::error::{Error, Header, Result};
use crate::flowbits::low;
use crate::headers::Headers;
use crate::reply::DhcpReply;
use crate::rewrite::rewrite;
use crate::wire::dhcpv4::{self, msg, opt};
use crate::wire::ipv4;

/// The options of a `put_dhcp_opts` action as ovn-controller encodes them
/// for pinctrl: the offered address, and the options' bytes in the order
/// they go in the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Userdata {
    /// `offerip`.
    pub offer_ip: [u8; 4],
    /// The options, each `code, length, value`.
    pub options: Vec<u8>,
}

/// Encodes `options` as `encode_PUT_DHCPV4_OPTS()` does: `offerip` apart,
/// then `bootfile_name` (67), `bootfile_name_alt` (254) and `next_server`
/// (253) if given, then every other option in order.
///
/// # Errors
/// [`Error::MissingOption`] without `offerip`; [`Error::OptionValue`] for
/// a value of the wrong kind or a code over 255;
/// [`Error::OptionTooLong`] for a value over 255 bytes.
pub fn encode_options(options: &[GenOption]) -> Result<Userdata> {
    let find = |code: u32| options.iter().position(|o| o.code == code);
    let offer = find(0).ok_or(Error::MissingOption("offerip"))?;
    let offer_ip = low::<4>(int(&options[offer])?.value);
    let boot = find(u32::from(opt::BOOTFILE));
    let boot_alt = find(u32::from(opt::BOOTFILE_ALT));
    let next_server = find(u32::from(opt::NEXT_SERVER));
    let mut out = Vec::new();
    for i in [boot, boot_alt].into_iter().flatten() {
        let s = string(&options[i])?;
        put(&mut out, options[i].code, s.as_bytes())?;
    }
    if let Some(i) = next_server {
        put(
            &mut out,
            options[i].code,
            &low::<4>(int(&options[i])?.value),
        )?;
    }
    for (i, o) in options.iter().enumerate() {
        if ![Some(offer), boot, boot_alt, next_server].contains(&Some(i)) {
            encode_option(o, &mut out)?;
        }
    }
    Ok(Userdata {
        offer_ip,
        options: out,
    })
}

/// Appends `code, len, value`.
fn put(out: &mut Vec<u8>, code: u32, value: &[u8]) -> Result<()> {
    let code = u8::try_from(code).map_err(|_| Error::OptionValue(code))?;
    let len = u8::try_from(value.len()).map_err(|_| Error::OptionTooLong {
        code: code.into(),
        len: value.len(),
    })?;
    out.extend_from_slice(&[code, len]);
    out.extend_from_slice(value);
    Ok(())
}

fn int(o: &GenOption) -> Result<&Int> {
    match o.value.values.first() {
        Some(Value::Int(i)) => Ok(i),
        _ => Err(Error::OptionValue(o.code)),
    }
}

fn string(o: &GenOption) -> Result<&str> {
    match o.value.values.first() {
        Some(Value::Str(s)) => Ok(s),
        _ => Err(Error::OptionValue(o.code)),
    }
}

fn ints(o: &GenOption) -> Result<Vec<&Int>> {
    o.value
        .values
        .iter()
        .map(|v| match v {
            Value::Int(i) => Ok(i),
            Value::Str(_) => Err(Error::OptionValue(o.code)),
        })
        .collect()
}

/// One option as `encode_put_dhcpv4_option()` encodes it by type.
fn encode_option(o: &GenOption, out: &mut Vec<u8>) -> Result<()> {
    let value: Vec<u8> = match o.ty {
        OptType::Bool | OptType::Uint8 => low::<1>(int(o)?.value).to_vec(),
        OptType::Uint16 => low::<2>(int(o)?.value).to_vec(),
        OptType::Uint32 => low::<4>(int(o)?.value).to_vec(),
        OptType::Ipv4 => ints(o)?.iter().flat_map(|i| low::<4>(i.value)).collect(),
        OptType::StaticRoutes => static_routes(&ints(o)?),
        OptType::Str => string(o)?.as_bytes().to_vec(),
        OptType::HostId => match o.value.values.first() {
            Some(Value::Str(s)) => s.as_bytes().to_vec(),
            _ => low::<4>(int(o)?.value).to_vec(),
        },
        OptType::Domains => encode_domains(string(o)?),
        // Not DHCPv4 types: ovn-controller writes the header only.
        OptType::Ipv6 | OptType::Mac => Vec::new(),
    };
    put(out, o.code, &value)
}

/// Classless static routes (RFC 3442 §3): for each (destination/prefix,
/// router) pair, the prefix length, the significant octets of the
/// destination, the router. An odd last value is dropped.
fn static_routes(v: &[&Int]) -> Vec<u8> {
    let mut out = Vec::new();
    for pair in v.chunks_exact(2) {
        let plen = match pair[0].mask {
            // OVS `ip_count_cidr_bits()`: 32 minus the mask's trailing zeros.
            Some(m) => 32 - (m as u32).trailing_zeros().min(32),
            None => 32,
        } as usize;
        out.push(plen as u8);
        out.extend_from_slice(&low::<4>(pair[0].value)[..plen.div_ceil(8)]);
        out.extend_from_slice(&low::<4>(pair[1].value));
    }
    out
}

/// A comma-separated domain search list in DNS wire form with compression
/// pointers (RFC 3397, RFC 1035 §4.1.4), exactly as ovn-controller
/// encodes it, quirks included:
///
/// - a suffix is remembered under its text minus the last character, so
///   suffixes that differ only there share a pointer (`abc.com` then
///   `x.abc.cop` encodes the second as `x.abc.com`);
/// - a name over 255 characters makes the whole value empty.
pub fn encode_domains(list: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut seen: Vec<(&[u8], usize)> = Vec::new();
    for domain in list
        .as_bytes()
        .split(|&c| c == b',')
        .filter(|d| !d.is_empty())
    {
        if domain.len() > 255 {
            return Vec::new();
        }
        let mut key = &domain[..domain.len() - 1];
        let mut rest = domain;
        let mut terminated = true;
        loop {
            let start = rest.iter().position(|&c| c != b'.').unwrap_or(rest.len());
            let tail = &rest[start..];
            if tail.is_empty() {
                break;
            }
            let (label, after) = match tail.iter().position(|&c| c == b'.') {
                Some(i) => (&tail[..i], &tail[i + 1..]),
                None => (tail, &tail[tail.len()..]),
            };
            if let Some(&(_, off)) = seen.iter().find(|(k, _)| *k == key) {
                out.extend_from_slice(&(0xc000 | off as u16).to_be_bytes());
                terminated = false;
                break;
            }
            seen.push((key, out.len()));
            out.push(label.len() as u8);
            out.extend_from_slice(label);
            if !after.is_empty() {
                key = &after[..after.len() - 1];
            }
            rest = after;
        }
        if terminated {
            out.push(0);
        }
    }
    out
}

/// What pinctrl reads of a request.
struct Request {
    msg_type: u8,
    requested: [u8; 4],
    ipxe: bool,
}

fn read_request(dhcp: &[u8]) -> Result<Request> {
    let req = dhcpv4::Packet::new_checked(dhcp)?;
    if req.op() != dhcpv4::OP_REQUEST {
        return Err(Error::NotBootRequest(req.op()));
    }
    if req.cookie() != Some(dhcpv4::MAGIC_COOKIE) {
        return Err(Error::NoMagicCookie);
    }
    let (mut msg_type, mut requested, mut ipxe) = (None, req.ciaddr(), false);
    for (code, value) in req.options() {
        match (code, value) {
            (opt::MESSAGE_TYPE, &[t]) => msg_type = Some(t),
            (opt::REQUESTED_IP, &[a, b, c, d]) => requested = [a, b, c, d],
            (opt::ETHERBOOT, _) => ipxe = true,
            _ => {}
        }
    }
    Ok(Request {
        msg_type: msg_type.ok_or(Error::NoMessageType)?,
        requested,
        ipxe,
    })
}

/// `put_dhcp_opts(options)` on the received frame `received` whose fields
/// at the action are `at` (committed to a copy of the frame first, as
/// Open vSwitch does before the packet goes to the controller).
///
/// # Errors
/// Whenever pinctrl answers nothing and writes 0 to the result bit: the
/// options' errors ([`encode_options`]), [`Error::MissingOption`] when
/// `offerip` is the only option, [`Error::WrongPacket`] for anything but
/// IPv4/UDP, [`Error::Truncated`], [`Error::NotBootRequest`],
/// [`Error::NoMagicCookie`], [`Error::NoMessageType`],
/// [`Error::NotAnswered`] (RELEASE, DECLINE, unknown types),
/// [`Error::TooLong`].
pub fn put_dhcp_opts(received: &[u8], at: &Flow, options: &[GenOption]) -> Result<DhcpReply> {
    let ud = encode_options(options)?;
    if ud.options.is_empty() {
        return Err(Error::MissingOption("any besides offerip"));
    }
    let mut pkt_in = received.to_vec();
    rewrite(&mut pkt_in, at);
    let h = Headers::parse(&pkt_in)?;
    let ip =
        h.ip.filter(|ip| !ip.v6 && ip.proto == 17)
            .ok_or(Error::WrongPacket {
                action: "put_dhcp_opts",
                needs: "an IPv4 UDP datagram",
            })?;
    let l4 = ip
        .l4
        .filter(|l4| l4 + 8 <= ip.end)
        .ok_or(Error::Truncated(Header::Udp))?;
    let req = read_request(&pkt_in[l4 + 8..ip.end])?;
    let (reply_type, opts) = match req.msg_type {
        msg::DISCOVER => (msg::OFFER, ud.options),
        msg::REQUEST if req.requested == ud.offer_ip => (msg::ACK, ud.options),
        msg::REQUEST => (msg::NAK, ud.options),
        msg::INFORM => (msg::ACK, without_lease_options(&ud.options)),
        other => return Err(Error::NotAnswered(other)),
    };
    let siaddr = dhcpv4::Packet::new_unchecked(&pkt_in[l4 + 8..]).siaddr();
    let (opts, next_server) = bootfile_pass(opts, req.ipxe, siaddr);
    let mut out = pkt_in[..l4 + 8 + dhcpv4::HEADER_LEN].to_vec();
    {
        let mut d = dhcpv4::Packet::new_unchecked(&mut out[l4 + 8..]);
        d.set_op(dhcpv4::OP_REPLY);
        match (req.msg_type, reply_type) {
            (msg::INFORM, _) => d.set_yiaddr([0; 4]),
            (_, msg::NAK) => {
                d.set_yiaddr([0; 4]);
                d.set_siaddr([0; 4]);
            }
            _ => {
                d.set_yiaddr(ud.offer_ip);
                d.set_siaddr(next_server);
            }
        }
    }
    out.extend_from_slice(&dhcpv4::MAGIC_COOKIE.to_be_bytes());
    out.extend_from_slice(&[opt::MESSAGE_TYPE, 1, reply_type]);
    if reply_type != msg::NAK {
        out.extend_from_slice(&opts);
    }
    out.extend_from_slice(&[0, 0, 0, 0, opt::END, 0, 0, 0, 0]);
    let broadcast =
        dhcpv4::Packet::new_unchecked(&out[l4 + 8..]).flags() & dhcpv4::FLAG_BROADCAST != 0;
    let dst = if broadcast { [255; 4] } else { ud.offer_ip };
    fix_lengths(&mut out, h.l3, l4, dst)?;
    Ok(DhcpReply {
        packet: out,
        l4,
        msg_type: reply_type,
    })
}

/// The UDP length and checksum (0), the IP destination, total length and
/// header checksum of the reply.
fn fix_lengths(out: &mut [u8], l3: usize, l4: usize, dst: [u8; 4]) -> Result<()> {
    let udp_len = u16::try_from(out.len() - l4).map_err(|_| Error::TooLong(out.len() - l4))?;
    let total = u16::try_from(out.len() - l3).map_err(|_| Error::TooLong(out.len() - l3))?;
    out[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
    out[l4 + 6..l4 + 8].fill(0);
    let mut ip = ipv4::Packet::new_unchecked(&mut out[l3..]);
    ip.set_dst(dst);
    ip.set_total_len(total);
    ip.fill_checksum();
    Ok(())
}

/// The options without those RFC 2131 §3.4 leaves out of an ACK to a
/// DHCPINFORM: subnet mask, lease time, T1, T2 (as pinctrl lists them).
fn without_lease_options(opts: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(opts.len());
    let mut rest = opts;
    while let [code, len, ref tail @ ..] = *rest {
        let n = usize::from(len).min(tail.len());
        if ![opt::NETMASK, opt::LEASE_TIME, opt::T1, opt::T2].contains(&code) {
            out.extend_from_slice(&rest[..2 + n]);
        }
        rest = &tail[n..];
    }
    out
}

/// pinctrl's pass over the reply's options: `next_server` (253) becomes
/// `siaddr`; `bootfile_name` (67) followed by `bootfile_name_alt` (254)
/// leaves one of them as 67 (the first for iPXE clients, else the second);
/// a lone 254 becomes 67. Done as pinctrl does it, by dropping bytes from
/// the front of the buffer and writing over them, which is only sound
/// because ovn-controller encodes 67 and 254 first; emulated here byte for
/// byte, with every access bounds-checked.
fn bootfile_pass(mut buf: Vec<u8>, ipxe: bool, mut siaddr: [u8; 4]) -> (Vec<u8>, [u8; 4]) {
    let end = buf.len();
    let (mut front, mut p, mut bootfile_set) = (0usize, 0usize, false);
    let byte = |b: &[u8], i: usize| usize::from(b.get(i).copied().unwrap_or(0));
    while p < end {
        match buf[p] {
            opt::NEXT_SERVER => {
                if let Some(v) = buf.get(p + 2..p + 6) {
                    siaddr.copy_from_slice(v);
                }
            }
            opt::BOOTFILE => {
                let len = 2 + byte(&buf, p + 1);
                let next = p + len;
                if buf.get(next) == Some(&opt::BOOTFILE_ALT) {
                    let alt_len = 2 + byte(&buf, next + 1);
                    if !ipxe && front + len <= end {
                        front += len;
                        buf[next] = opt::BOOTFILE;
                    } else if ipxe && front + alt_len + len <= end && next <= end {
                        let copy = buf[p..next].to_vec();
                        front += alt_len;
                        buf[front..front + len].copy_from_slice(&copy);
                    }
                }
                bootfile_set = true;
            }
            opt::BOOTFILE_ALT if !bootfile_set => buf[p] = opt::BOOTFILE,
            _ => {}
        }
        p += 2;
        if p > end {
            break;
        }
        p += byte(&buf, p - 1);
    }
    (buf.split_off(front), siaddr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_compress_like_ovn() {
        // ovn.at "put_dhcp_opts": domain_search_list="ovn.org,abc.ovn.org".
        assert_eq!(
            encode_domains("ovn.org,abc.ovn.org"),
            b"\x03ovn\x03org\x00\x03abc\xc0\x00".to_vec()
        );
        // The quirk: "abc.cop" is remembered as "abc.co", like "abc.com".
        assert_eq!(
            encode_domains("abc.com,x.abc.cop"),
            b"\x03abc\x03com\x00\x01x\xc0\x00".to_vec()
        );
        assert_eq!(encode_domains(&"a".repeat(256)), Vec::<u8>::new());
    }

    #[test]
    fn the_bootfile_pass_keeps_one_bootfile() {
        let opts =
            b"\x43\x03abc\xfe\x05wxyz!\xfd\x04\x0a\x00\x00\x09\x03\x04\x0a\x00\x00\x01".to_vec();
        let (o, si) = bootfile_pass(opts.clone(), false, [0; 4]);
        assert_eq!(
            o,
            b"\x43\x05wxyz!\xfd\x04\x0a\x00\x00\x09\x03\x04\x0a\x00\x00\x01".to_vec()
        );
        assert_eq!(si, [10, 0, 0, 9]);
        let (o, si) = bootfile_pass(opts, true, [0; 4]);
        assert_eq!(
            o,
            b"\x43\x03abc\xfd\x04\x0a\x00\x00\x09\x03\x04\x0a\x00\x00\x01".to_vec()
        );
        assert_eq!(si, [10, 0, 0, 9]);
        let (o, _) = bootfile_pass(b"\xfe\x01x".to_vec(), false, [0; 4]);
        assert_eq!(o, b"\x43\x01x".to_vec());
    }

    #[test]
    fn inform_drops_mask_lease_and_timers() {
        let opts = b"\x01\x04\xff\xff\xff\x00\x03\x04\x0a\x00\x00\x01\x33\x04\x00\x00\x0e\x10";
        assert_eq!(
            without_lease_options(opts),
            b"\x03\x04\x0a\x00\x00\x01".to_vec()
        );
    }
}
