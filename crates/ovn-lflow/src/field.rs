//! The base fields that OVN's symbols map onto, like Open vSwitch's
//! `MFF_*` (`include/openvswitch/meta-flow.h` of OVS 3.1) restricted to the
//! ones `ovn_init_symtab()` of OVN 23.03 uses, plus OVN's own
//! `icmp4.frag_mtu` and `icmp6.frag_mtu` (`lib/logical-fields.c`).
//!
//! A [`Flow`](crate::Flow) stores one value per base field, indexed by
//! [`Field::index`].

use std::fmt;

/// One base field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Field {
    /// Logical input port key (OVN `MFF_LOG_INPORT`, reg14).
    LogInport,
    /// Logical output port key (OVN `MFF_LOG_OUTPORT`, reg15).
    LogOutport,
    /// OVN's logical flags (`MFF_LOG_FLAGS`, reg10).
    LogFlags,
    /// 128-bit register `xxreg0` (reg0..reg3).
    Xxreg0,
    /// 128-bit register `xxreg1` (reg4..reg7).
    Xxreg1,
    /// 64-bit register `xreg4` (reg8, reg9).
    Xreg4,
    /// Connection tracking state bits (`ct_state`).
    CtState,
    /// Connection tracking mark.
    CtMark,
    /// Connection tracking label.
    CtLabel,
    /// Ethernet source.
    EthSrc,
    /// Ethernet destination.
    EthDst,
    /// Ethertype.
    EthType,
    /// 802.1Q TCI, with the CFI bit (12) meaning "VLAN header present".
    VlanTci,
    /// IP protocol.
    IpProto,
    /// IP DSCP, in the low 6 bits.
    IpDscp,
    /// IP ECN, in the low 2 bits.
    IpEcn,
    /// IP TTL or hop limit.
    IpTtl,
    /// OVS fragment bits: bit 0 "is a fragment", bit 1 "later fragment".
    IpFrag,
    /// IPv4 source.
    Ipv4Src,
    /// IPv4 destination.
    Ipv4Dst,
    /// IPv6 source.
    Ipv6Src,
    /// IPv6 destination.
    Ipv6Dst,
    /// IPv6 flow label (20 bits).
    Ipv6Label,
    /// ARP opcode.
    ArpOp,
    /// ARP sender protocol address.
    ArpSpa,
    /// ARP target protocol address.
    ArpTpa,
    /// ARP sender hardware address.
    ArpSha,
    /// ARP target hardware address.
    ArpTha,
    /// ND target address.
    NdTarget,
    /// ND source link-layer address option.
    NdSll,
    /// ND target link-layer address option.
    NdTll,
    /// TCP source port.
    TcpSrc,
    /// TCP destination port.
    TcpDst,
    /// TCP flags (12 bits).
    TcpFlags,
    /// UDP source port.
    UdpSrc,
    /// UDP destination port.
    UdpDst,
    /// SCTP source port.
    SctpSrc,
    /// SCTP destination port.
    SctpDst,
    /// ICMPv4 type.
    Icmpv4Type,
    /// ICMPv4 code.
    Icmpv4Code,
    /// ICMPv6 type.
    Icmpv6Type,
    /// ICMPv6 code.
    Icmpv6Code,
    /// Packet mark (skb mark).
    PktMark,
    /// OVN field `icmp4.frag_mtu` (16 bits), written by `icmp4_error`.
    Icmp4FragMtu,
    /// OVN field `icmp6.frag_mtu` (32 bits), written by `icmp6_error`.
    Icmp6FragMtu,
}

/// What the field table says about one base field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldInfo {
    /// The field.
    pub field: Field,
    /// OVS's name (`ovs-fields(7)`), e.g. `eth_src`.
    pub name: &'static str,
    /// The OXM/NXM name `ovn-trace`/`test-ovn dump-symtab` print.
    pub nxm: &'static str,
    /// Width in bits (1..=128).
    pub n_bits: u8,
    /// Whether OVS can match any bit pattern of it (`MFM_FULLY`), which
    /// makes its OVN symbol ordinal rather than nominal.
    pub maskable: bool,
    /// Whether actions may write it.
    pub writable: bool,
}

const fn f(
    field: Field,
    name: &'static str,
    nxm: &'static str,
    n_bits: u8,
    maskable: bool,
    writable: bool,
) -> FieldInfo {
    FieldInfo {
        field,
        name,
        nxm,
        n_bits,
        maskable,
        writable,
    }
}

use Field::*;

/// The field table, in [`Field`] order.
pub const FIELDS: [FieldInfo; Field::COUNT] = [
    f(LogInport, "reg14", "NXM_NX_REG14", 32, true, true),
    f(LogOutport, "reg15", "NXM_NX_REG15", 32, true, true),
    f(LogFlags, "reg10", "NXM_NX_REG10", 32, true, true),
    f(Xxreg0, "xxreg0", "NXM_NX_XXREG0", 128, true, true),
    f(Xxreg1, "xxreg1", "NXM_NX_XXREG1", 128, true, true),
    f(Xreg4, "xreg4", "OXM_OF_PKT_REG4", 64, true, true),
    f(CtState, "ct_state", "NXM_NX_CT_STATE", 32, true, false),
    f(CtMark, "ct_mark", "NXM_NX_CT_MARK", 32, true, true),
    f(CtLabel, "ct_label", "NXM_NX_CT_LABEL", 128, true, true),
    f(EthSrc, "eth_src", "NXM_OF_ETH_SRC", 48, true, true),
    f(EthDst, "eth_dst", "NXM_OF_ETH_DST", 48, true, true),
    f(EthType, "eth_type", "NXM_OF_ETH_TYPE", 16, false, false),
    f(VlanTci, "vlan_tci", "NXM_OF_VLAN_TCI", 16, true, true),
    f(IpProto, "nw_proto", "NXM_OF_IP_PROTO", 8, false, false),
    f(IpDscp, "ip_dscp", "OXM_OF_IP_DSCP", 6, false, true),
    f(IpEcn, "nw_ecn", "NXM_NX_IP_ECN", 2, false, true),
    f(IpTtl, "nw_ttl", "NXM_NX_IP_TTL", 8, false, true),
    f(IpFrag, "ip_frag", "NXM_NX_IP_FRAG", 2, true, false),
    f(Ipv4Src, "ip_src", "NXM_OF_IP_SRC", 32, true, true),
    f(Ipv4Dst, "ip_dst", "NXM_OF_IP_DST", 32, true, true),
    f(Ipv6Src, "ipv6_src", "NXM_NX_IPV6_SRC", 128, true, true),
    f(Ipv6Dst, "ipv6_dst", "NXM_NX_IPV6_DST", 128, true, true),
    f(Ipv6Label, "ipv6_label", "NXM_NX_IPV6_LABEL", 20, true, true),
    f(ArpOp, "arp_op", "NXM_OF_ARP_OP", 16, false, true),
    f(ArpSpa, "arp_spa", "NXM_OF_ARP_SPA", 32, true, true),
    f(ArpTpa, "arp_tpa", "NXM_OF_ARP_TPA", 32, true, true),
    f(ArpSha, "arp_sha", "NXM_NX_ARP_SHA", 48, true, true),
    f(ArpTha, "arp_tha", "NXM_NX_ARP_THA", 48, true, true),
    f(NdTarget, "nd_target", "NXM_NX_ND_TARGET", 128, true, true),
    f(NdSll, "nd_sll", "NXM_NX_ND_SLL", 48, true, true),
    f(NdTll, "nd_tll", "NXM_NX_ND_TLL", 48, true, true),
    f(TcpSrc, "tcp_src", "NXM_OF_TCP_SRC", 16, true, true),
    f(TcpDst, "tcp_dst", "NXM_OF_TCP_DST", 16, true, true),
    f(TcpFlags, "tcp_flags", "NXM_NX_TCP_FLAGS", 12, true, false),
    f(UdpSrc, "udp_src", "NXM_OF_UDP_SRC", 16, true, true),
    f(UdpDst, "udp_dst", "NXM_OF_UDP_DST", 16, true, true),
    f(SctpSrc, "sctp_src", "OXM_OF_SCTP_SRC", 16, true, true),
    f(SctpDst, "sctp_dst", "OXM_OF_SCTP_DST", 16, true, true),
    f(Icmpv4Type, "icmp_type", "NXM_OF_ICMP_TYPE", 8, false, true),
    f(Icmpv4Code, "icmp_code", "NXM_OF_ICMP_CODE", 8, false, true),
    f(
        Icmpv6Type,
        "icmpv6_type",
        "NXM_NX_ICMPV6_TYPE",
        8,
        false,
        true,
    ),
    f(
        Icmpv6Code,
        "icmpv6_code",
        "NXM_NX_ICMPV6_CODE",
        8,
        false,
        true,
    ),
    f(PktMark, "pkt_mark", "NXM_NX_PKT_MARK", 32, true, true),
    f(
        Icmp4FragMtu,
        "icmp4.frag_mtu",
        "icmp4.frag_mtu",
        16,
        false,
        true,
    ),
    f(
        Icmp6FragMtu,
        "icmp6.frag_mtu",
        "icmp6.frag_mtu",
        32,
        false,
        true,
    ),
];

impl Field {
    /// Number of base fields.
    pub const COUNT: usize = 45;

    /// Every field, in order.
    pub fn all() -> impl Iterator<Item = Field> {
        FIELDS.iter().map(|i| i.field)
    }

    /// Its row of the field table.
    pub fn info(self) -> &'static FieldInfo {
        &FIELDS[self as usize]
    }

    /// Its index into a [`Flow`](crate::Flow), `0..Field::COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Width in bits.
    pub fn n_bits(self) -> u32 {
        self.info().n_bits.into()
    }

    /// All-ones mask of its width.
    pub fn full_mask(self) -> u128 {
        low_bits(self.n_bits())
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.info().name)
    }
}

/// A mask of the low `n` bits (`n <= 128`).
pub(crate) fn low_bits(n: u32) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_enum_order() {
        for (i, info) in FIELDS.iter().enumerate() {
            assert_eq!(info.field.index(), i, "{}", info.name);
            assert!(info.n_bits >= 1 && info.n_bits <= 128);
        }
    }
}
