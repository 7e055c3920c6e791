//! The crate's one error type.
//!
//! Every `Err` of a builder means what pinctrl does in the same case: it
//! logs, sends nothing, and (for `put_dhcp_opts` and `put_dhcpv6_opts`)
//! writes 0 to the action's result bit. The variant says why, so that a
//! caller can count refusals by cause.

use std::fmt;

/// A header of a frame, as named in an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// Ethernet II, with at most one 802.1Q tag.
    Ethernet,
    /// ARP for IPv4 over Ethernet (RFC 826).
    Arp,
    /// IPv4 (RFC 791).
    Ipv4,
    /// IPv6 and its extension headers (RFC 8200).
    Ipv6,
    /// ICMPv4 (RFC 792) or ICMPv6 (RFC 4443).
    Icmp,
    /// TCP (RFC 9293).
    Tcp,
    /// UDP (RFC 768).
    Udp,
    /// SCTP common header and chunks (RFC 9260).
    Sctp,
    /// BOOTP/DHCPv4 (RFC 951, RFC 2131).
    Dhcpv4,
    /// DHCPv6 (RFC 8415).
    Dhcpv6,
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Header::Ethernet => "Ethernet",
            Header::Arp => "ARP",
            Header::Ipv4 => "IPv4",
            Header::Ipv6 => "IPv6",
            Header::Icmp => "ICMP",
            Header::Tcp => "TCP",
            Header::Udp => "UDP",
            Header::Sctp => "SCTP",
            Header::Dhcpv4 => "DHCPv4",
            Header::Dhcpv6 => "DHCPv6",
        })
    }
}

/// Why nothing was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// The frame ends inside this header.
    #[error("{0} header truncated")]
    Truncated(Header),
    /// This header contradicts itself (a length or version field).
    #[error("{0} header malformed")]
    Malformed(Header),
    /// The action does not apply to this packet (pinctrl's "ARP action on
    /// non-IP packet", "NA action on non-ND packet"...).
    #[error("{action} needs {needs}")]
    WrongPacket {
        /// The action, as written in a logical flow.
        action: &'static str,
        /// What the packet had to be.
        needs: &'static str,
    },
    /// pinctrl deliberately answers nothing: `reject` of a TCP reset or of
    /// an ICMP destination unreachable, `sctp_abort` of an ABORT.
    #[error("not answered: {0}")]
    Ignored(&'static str),
    /// A frame to emit whose EtherType is neither IPv4 nor IPv6.
    #[error("EtherType {0:#06x} is not IP")]
    NotIp(u16),
    /// A packet longer than its length field can say.
    #[error("{0} bytes do not fit the length field")]
    TooLong(usize),
    /// `put_dhcp_opts` or `put_dhcpv6_opts` without the option its reply
    /// needs (`offerip`).
    #[error("option {0} is missing")]
    MissingOption(&'static str),
    /// An option whose value does not fit its length field (255 bytes for
    /// DHCPv4, where ovn-controller would emit a corrupt option).
    #[error("option {code}: {len} bytes do not fit its length field")]
    OptionTooLong {
        /// The option code.
        code: u32,
        /// The value's length in bytes.
        len: usize,
    },
    /// An option value of the wrong kind (a string for an address...).
    #[error("option {0}: value of the wrong type")]
    OptionValue(u32),
    /// A DHCPv4 message that is not a BOOTREQUEST (op 1).
    #[error("BOOTP op {0} is not a request")]
    NotBootRequest(u8),
    /// A DHCPv4 message without the magic cookie (RFC 2131 §3).
    #[error("no DHCP magic cookie")]
    NoMagicCookie,
    /// A DHCPv4 message without option 53.
    #[error("no DHCP message type")]
    NoMessageType,
    /// A DHCP message type pinctrl does not answer (RELEASE, DECLINE and
    /// unknown types for DHCPv4; RENEW, REBIND, RELEASE and others for
    /// DHCPv6 in OVN 23.03).
    #[error("DHCP message type {0} is not answered")]
    NotAnswered(u8),
    /// A DHCPv6 message without a Client Identifier option.
    #[error("no DHCPv6 client identifier")]
    NoClientId,
    /// A DHCPv6 message other than INFORMATION-REQUEST without an IA_NA
    /// (or with IAID 0, which pinctrl takes for none).
    #[error("no DHCPv6 IA_NA")]
    NoIaNa,
    /// A DHCPv6 option pinctrl does not know how to send.
    #[error("DHCPv6 option {0} cannot be sent")]
    UnknownOption(u32),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
