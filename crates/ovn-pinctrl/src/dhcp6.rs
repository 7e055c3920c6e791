//! `put_dhcpv6_opts`: the DHCPv6 reply ovn-controller's pinctrl makes of a
//! client's message (OVN 23.03 `lib/actions.c`
//! `encode_put_dhcpv6_option()`; `controller/pinctrl.c`
//! `pinctrl_handle_put_dhcpv6_opts()`, `compose_out_dhcpv6_opts()`;
//! RFC 8415, RFC 3646).
//!
//! - SOLICIT → ADVERTISE; REQUEST, CONFIRM, DECLINE and
//!   INFORMATION-REQUEST → REPLY. OVN 23.03 answers nothing else: not
//!   RENEW, REBIND or RELEASE, and a SOLICIT with Rapid Commit gets an
//!   ADVERTISE like any other. IA_PD is not served.
//! - The reply is the message type, the request's transaction id, the
//!   request's Client Identifier, then the action's options in the order
//!   it lists them: `server_id` as a DUID-LL (RFC 8415 §11.4, hardware type
//!   1), `ia_addr` inside an IA_NA with the request's IAID and T1, T2,
//!   preferred and valid lifetimes all 0xffffffff (omitted for an
//!   INFORMATION-REQUEST), `dns_server` as is, `domain_search` as a single
//!   length-prefixed label holding the whole string (pinctrl's encoding,
//!   kept: `ovn.org` goes as `07 "ovn.org" 00`, not as two labels).
//! - The request's Ethernet and IPv6 headers stay; the UDP checksum is
//!   computed. The logical pipeline then sets the addresses and ports.
//!
//! pinctrl takes an IAID of 0 for "no IA_NA", and so does this.

use ovn_lflow::actions::{GenOption, Value};
use ovn_lflow::dhcp::OptType;
use ovn_lflow::Flow;

use crate::emit::{fill_l4_checksum, proto, Csum};
use crate::error::{Error, Header, Result};
use crate::flowbits::low;
use crate::headers::Headers;
use crate::reply::DhcpReply;
use crate::rewrite::rewrite;
use crate::wire::dhcpv6::{self, msg, opt};
use crate::wire::ipv6;

/// DUID type "link-layer address" (RFC 8415 §11.4).
const DUID_LL: u16 = 3;
/// Hardware type Ethernet (IANA ARP hardware types).
const HW_ETHERNET: u16 = 1;

/// Encodes `options` as `encode_put_dhcpv6_option()` does: for each, in
/// order, a 2-byte code, a 2-byte length and the value (`ipv6` values
/// back to back, a `mac`'s 6 bytes, a `str`'s bytes).
///
/// # Errors
/// [`Error::OptionValue`] for a value of another type or kind, or a code
/// over 65535; [`Error::OptionTooLong`] past 65535 bytes.
pub fn encode_options(options: &[GenOption]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for o in options {
        let bad = || Error::OptionValue(o.code);
        let value: Vec<u8> = match o.ty {
            OptType::Ipv6 => o
                .value
                .values
                .iter()
                .map(|v| match v {
                    Value::Int(i) => Ok(low::<16>(i.value)),
                    Value::Str(_) => Err(bad()),
                })
                .collect::<Result<Vec<_>>>()?
                .concat(),
            OptType::Mac => match o.value.values.first() {
                Some(Value::Int(i)) => low::<6>(i.value).to_vec(),
                _ => return Err(bad()),
            },
            OptType::Str => match o.value.values.first() {
                Some(Value::Str(s)) => s.as_bytes().to_vec(),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        };
        put(&mut out, o.code, &value)?;
    }
    Ok(out)
}

fn put(out: &mut Vec<u8>, code: u32, value: &[u8]) -> Result<()> {
    let code16 = u16::try_from(code).map_err(|_| Error::OptionValue(code))?;
    let len = u16::try_from(value.len()).map_err(|_| Error::OptionTooLong {
        code,
        len: value.len(),
    })?;
    out.extend_from_slice(&code16.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(value);
    Ok(())
}

/// `compose_out_dhcpv6_opts()`: the reply's options from the encoded
/// ones, with the IAID of the request's IA_NA (0: none).
fn compose(encoded: &[u8], iaid: [u8; 4]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = encoded;
    while let [c0, c1, l0, l1, ref tail @ ..] = *rest {
        let (code, len) = (
            u16::from_be_bytes([c0, c1]),
            usize::from(u16::from_be_bytes([l0, l1])),
        );
        let data = tail.get(..len).ok_or(Error::UnknownOption(code.into()))?;
        match code {
            opt::SERVER_ID => {
                let mac = data.get(..6).ok_or(Error::OptionValue(code.into()))?;
                put(
                    &mut out,
                    code.into(),
                    &[&DUID_LL.to_be_bytes()[..], &HW_ETHERNET.to_be_bytes(), mac].concat(),
                )?;
            }
            opt::IA_ADDR if len != 16 => return Err(Error::OptionValue(code.into())),
            opt::IA_ADDR if iaid == [0; 4] => {}
            opt::IA_ADDR => {
                let forever = [0xff; 4];
                let ia_addr = [data, &forever, &forever].concat();
                let mut ia_na = [&iaid[..], &forever, &forever].concat();
                put(&mut ia_na, opt::IA_ADDR.into(), &ia_addr)?;
                put(&mut out, opt::IA_NA.into(), &ia_na)?;
            }
            opt::DNS_SERVERS => put(&mut out, code.into(), data)?,
            opt::DOMAIN_LIST => {
                let mut v = Vec::with_capacity(len + 2);
                v.push(len as u8);
                v.extend_from_slice(data);
                v.push(0);
                put(&mut out, code.into(), &v)?;
            }
            other => return Err(Error::UnknownOption(other.into())),
        }
        rest = &tail[len..];
    }
    Ok(out)
}

/// What pinctrl reads of a client's message.
struct Request<'a> {
    msg_type: u8,
    iaid: [u8; 4],
    client_id: &'a [u8],
}

/// Reads the message in `udp` (the UDP header and on, `end` bytes long at
/// most: the smaller of the UDP length and what the IP datagram holds).
fn read_request(udp: &[u8]) -> Result<Request<'_>> {
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    let m = dhcpv6::Message::new_checked(&udp[8..udp_len.clamp(8, udp.len())])?;
    let reply = match m.msg_type() {
        msg::SOLICIT => msg::ADVERTISE,
        msg::REQUEST | msg::CONFIRM | msg::DECLINE | msg::INFORMATION_REQUEST => msg::REPLY,
        other => return Err(Error::NotAnswered(other)),
    };
    let (mut iaid, mut client_id) = ([0; 4], None);
    for o in m.options() {
        match o.code {
            opt::IA_NA => {
                if let Some(v) = udp.get(8 + o.at + 4..8 + o.at + 8) {
                    iaid.copy_from_slice(v);
                }
            }
            opt::CLIENT_ID => client_id = udp.get(8 + o.at..8 + o.at + o.wire_len()),
            _ => {}
        }
    }
    let client_id = client_id.ok_or(Error::NoClientId)?;
    if iaid == [0; 4] && m.msg_type() != msg::INFORMATION_REQUEST {
        return Err(Error::NoIaNa);
    }
    Ok(Request {
        msg_type: reply,
        iaid,
        client_id,
    })
}

/// `put_dhcpv6_opts(options)` on the received frame `received` whose
/// fields at the action are `at` (committed to a copy of the frame
/// first).
///
/// # Errors
/// Whenever pinctrl answers nothing and writes 0 to the result bit:
/// [`encode_options`]' errors, [`Error::MissingOption`] without options,
/// [`Error::WrongPacket`] for anything but IPv6/UDP,
/// [`Error::Truncated`], [`Error::NotAnswered`] (RENEW, REBIND, RELEASE
/// and others), [`Error::NoClientId`], [`Error::NoIaNa`],
/// [`Error::UnknownOption`] and [`Error::OptionValue`] for options
/// pinctrl cannot compose, [`Error::TooLong`].
pub fn put_dhcpv6_opts(received: &[u8], at: &Flow, options: &[GenOption]) -> Result<DhcpReply> {
    let encoded = encode_options(options)?;
    if encoded.is_empty() {
        return Err(Error::MissingOption("any"));
    }
    let mut pkt_in = received.to_vec();
    rewrite(&mut pkt_in, at);
    let h = Headers::parse(&pkt_in)?;
    let ip =
        h.ip.filter(|ip| ip.v6 && ip.proto == proto::UDP)
            .ok_or(Error::WrongPacket {
                action: "put_dhcpv6_opts",
                needs: "an IPv6 UDP datagram",
            })?;
    let l4 = ip
        .l4
        .filter(|l4| l4 + 8 <= ip.end)
        .ok_or(Error::Truncated(Header::Udp))?;
    let req = read_request(&pkt_in[l4..ip.end])?;
    let opts = compose(&encoded, req.iaid)?;
    let mut out = pkt_in[..l4 + 8].to_vec();
    out.push(req.msg_type);
    out.extend_from_slice(&pkt_in[l4 + 9..l4 + 12]);
    out.extend_from_slice(req.client_id);
    out.extend_from_slice(&opts);
    let udp_len = out.len() - l4;
    let plen =
        u16::try_from(out.len() - h.l3 - ipv6::HEADER_LEN).map_err(|_| Error::TooLong(udp_len))?;
    ipv6::Packet::new_unchecked(&mut out[h.l3..]).set_payload_len(plen);
    fill_l4_checksum(&mut out, h.l3, l4, true, proto::UDP, Csum::Udp);
    Ok(DhcpReply {
        packet: out,
        l4,
        msg_type: req.msg_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_id_is_a_duid_ll_and_ia_addr_an_ia_na() {
        let encoded = [
            &[0, 2, 0, 6, 0, 0, 0, 0, 0x10, 0x02][..],
            &[0, 5, 0, 16],
            &[0xae, 0x70, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4],
        ]
        .concat();
        let out = compose(&encoded, [0, 0, 0, 7]).unwrap();
        assert_eq!(
            &out[..14],
            &[0, 2, 0, 10, 0, 3, 0, 1, 0, 0, 0, 0, 0x10, 0x02]
        );
        assert_eq!(
            &out[14..30],
            &[0, 3, 0, 40, 0, 0, 0, 7, 255, 255, 255, 255, 255, 255, 255, 255]
        );
        assert_eq!(&out[30..34], &[0, 5, 0, 24]);
        assert_eq!(out.len(), 14 + 44);
        // An INFORMATION-REQUEST (IAID 0) gets no IA_NA.
        assert_eq!(compose(&encoded, [0; 4]).unwrap().len(), 14);
    }

    #[test]
    fn domain_search_is_one_label() {
        let out = compose(b"\x00\x18\x00\x07ovn.org", [0; 4]).unwrap();
        assert_eq!(out, b"\x00\x18\x00\x09\x07ovn.org\x00".to_vec());
    }
}
