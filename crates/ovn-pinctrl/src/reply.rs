//! A DHCP reply as pinctrl hands it back to the logical pipeline.

use ovn_lflow::Flow;

use crate::headers::with_headers;
use crate::rewrite::rewrite;

/// pinctrl's reply to a DHCPv4 or DHCPv6 request ([`put_dhcp_opts`],
/// [`put_dhcpv6_opts`]), before the logical pipeline rewrites its
/// addresses and ports.
///
/// [`put_dhcp_opts`]: crate::put_dhcp_opts
/// [`put_dhcpv6_opts`]: crate::put_dhcpv6_opts
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpReply {
    pub(crate) packet: Vec<u8>,
    pub(crate) l4: usize,
    pub(crate) msg_type: u8,
}

impl DhcpReply {
    /// The reply's message type: DHCPOFFER (2), DHCPACK (5) or DHCPNAK (6)
    /// for DHCPv4; ADVERTISE (2) or REPLY (7) for DHCPv6.
    pub fn message_type(&self) -> u8 {
        self.msg_type
    }

    /// The frame pinctrl resumes the pipeline with (the request's
    /// Ethernet and IP headers, adjusted, with the new UDP payload).
    pub fn packet(&self) -> &[u8] {
        &self.packet
    }

    /// The reply's UDP payload: the BOOTP message or the DHCPv6 message.
    pub fn udp_payload(&self) -> &[u8] {
        &self.packet[self.l4 + 8..]
    }

    /// The fields the pipeline continues with after the action (OVS
    /// re-extracts them from the packet a controller resumes with): `at`'s
    /// registers, logical ports and connection state, the reply's header
    /// fields (for DHCPv4 its IPv4 destination differs from the
    /// request's). The caller then sets the action's result bit to 1.
    pub fn resume_flow(&self, at: &Flow) -> Flow {
        with_headers(at, &self.packet)
    }

    /// The frame sent once the pipeline's actions left the fields
    /// `final_flow` (for DHCPv4, `ls_in_dhcp_response`'s `eth.dst =
    /// eth.src; eth.src = E; ip4.src = S; udp.src = 67; udp.dst = 68;`):
    /// the reply with those fields committed, checksums updated as Open
    /// vSwitch updates them ([`rewrite`](crate::rewrite())).
    pub fn frame(&self, final_flow: &Flow) -> Vec<u8> {
        let mut f = self.packet.clone();
        rewrite(&mut f, final_flow);
        f
    }
}
