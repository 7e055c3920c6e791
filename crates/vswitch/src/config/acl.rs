//! The rules of the stateless per-port ACL (issue 5): ordered rules over
//! [`flowcache::FlowKey`] fields, first match wins. This module is their syntax and
//! matching semantics (what a user writes); the model's `Acl` holds a port's compiled
//! list and classifies keys with it (`model::acl`).
//!
//! A port's rules are scanned in order; the verdict is the action of the first
//! [`AclRule`] whose every present field matches the key; when no rule matches, it
//! is [`DEFAULT_ACTION`] (**allow**). The scan is linear, allocates nothing and takes
//! no lock: it runs on the slow path, which the flow cache exists to skip.
//!
//! # Matching semantics
//!
//! Every field of a rule is optional; an absent field matches anything. A
//! present field matches only when the key *has* that field and its value is
//! selected:
//!
//! | field | value | matches when |
//! |---|---|---|
//! | `eth_src`, `eth_dst` | MAC, optionally `/mask` | `key & mask == addr & mask` (no mask: all 48 bits) |
//! | `eth_type` | `0x0800`, `2048`, `ipv4`, `ipv6`, `arp` | the EtherType after the parsed VLAN tags equals it |
//! | `vlan` | VLAN ID `0..=4095` | the frame has an outer tag with that VID (untagged frames never match) |
//! | `ip_src`, `ip_dst` | IPv4 or IPv6 prefix (`10.0.0.0/8`, `fd00::/64`; no `/len` = host) | the frame is IP of the same family and the address is in the prefix (`/0` matches any address of that family, never the other) |
//! | `ip_proto` | `0..=255`, `tcp`, `udp`, `icmp`, `icmpv6`, `sctp`, `udplite` | the frame is IP and its protocol (IPv6: the last next header reached) equals it |
//! | `ip_frag` | `no`, `yes`, `first`, `later`, `not_later` | the frame is IP and its fragment state ([`FlowKey::fragment`]) is: not a fragment; any fragment; the first (offset 0, more-fragments set); a later one (offset > 0); not a later one |
//! | `l4_src`, `l4_dst` | port `80` or inclusive range `1000-2000` | the frame has an L4 header and its port is in the range; for ICMP/ICMPv6 the "ports" are type (`l4_src`) and code (`l4_dst`), as in [`FlowKey::l4_ports`] |
//!
//! Consequences worth knowing: a later IP fragment carries no L4 header, so a
//! rule with `l4_src`/`l4_dst` never matches it (it falls through to the next
//! rules and finally to the default allow; add `drop ip_frag=later` where
//! that matters); an IPv4 prefix never matches an
//! IPv6 frame; a malformed frame has only the fields parsed before the point
//! where parsing stopped (see [`FlowKey::extract`]). The ACL decides from the
//! key alone, as the flow cache's exactness contract requires.
//!
//! # Syntax
//!
//! One line (the `vswitchctl acl add` form, [`AclRule`]'s `FromStr` and
//! `Display`): the action first, then `field=value` pairs separated by
//! whitespace, each field at most once, in any order:
//!
//! ```text
//! drop ip_proto=udp l4_dst=5000-5999 ip_src=10.0.0.0/8
//! allow eth_src=02:00:00:00:00:00/ff:ff:ff:00:00:00 vlan=10
//! drop
//! ```
//!
//! `Display` writes the fields in the order of the table above, so
//! `rule.to_string().parse()` gives back an equal rule.
//!
//! TOML (the config file): one table per rule with the same field names;
//! `[[acl]]` entries name their port ([`AclEntry`]). Values are strings, and
//! numeric fields also take TOML integers:
//!
//! ```toml
//! [[acl]]
//! port = "vm1"
//! action = "drop"
//! ip_proto = "udp"
//! l4_dst = "5000-5999"
//! ip_src = "10.0.0.0/8"
//!
//! [[acl]]
//! port = "vm1"
//! action = "allow"
//! eth_type = 0x0806
//! ```
//!
//! Unknown fields are refused (`deny_unknown_fields`), and a value that does
//! not parse yields an [`AclError`] naming the field and what was expected.

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use flowcache::{
    FlowKey, Fragment, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP,
    IPPROTO_TCP, IPPROTO_UDP, IPPROTO_UDPLITE,
};
use serde::{Deserialize, Serialize};

/// EtherType of ARP (RFC 826), accepted as `arp` in `eth_type`.
pub const ETHERTYPE_ARP: u16 = 0x0806;

/// The largest VLAN ID (12 bits, IEEE 802.1Q).
pub const MAX_VLAN_ID: u16 = 4095;

/// The action taken when no rule matches: allow.
pub const DEFAULT_ACTION: Action = Action::Allow;

/// What went wrong parsing or editing an ACL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// A field's value did not parse. For the value types' own `FromStr`,
    /// `field` names the kind of value (e.g. `MAC`); in a rule it is the
    /// rule's field name (e.g. `eth_src`).
    #[error("{field}: invalid value `{value}`: expected {expected}")]
    InvalidValue {
        /// The field (or kind of value) that failed.
        field: &'static str,
        /// The text given.
        value: String,
        /// What the field accepts.
        expected: &'static str,
    },
    /// The action was missing or not `allow`/`drop`.
    #[error("action: got `{0}`: expected `allow` or `drop` as the first word")]
    InvalidAction(String),
    /// A field name that rules do not have.
    #[error("unknown field `{0}`: expected one of {FIELD_NAMES}")]
    UnknownField(String),
    /// A `field=value` pair without `=` or without a value.
    #[error("{0}: missing value: expected `{0}=VALUE`")]
    MissingValue(String),
    /// The same field given twice in one rule.
    #[error("{0}: given twice")]
    DuplicateField(&'static str),
    /// `ip_src` and `ip_dst` of one rule are of different IP versions, so
    /// the rule could never match.
    #[error("ip_dst: `{dst}` is not of the IP version of ip_src `{src}`: expected both IPv4 or both IPv6")]
    MixedIpVersions {
        /// The rule's `ip_src`.
        src: IpPrefix,
        /// The rule's `ip_dst`.
        dst: IpPrefix,
    },
    /// No port has this id (it was deleted).
    #[error("no port with id {0}")]
    NoPort(u16),
    /// A rule index past the end of the list.
    #[error("rule index {index}: expected an index below {len} (the number of rules)")]
    NoSuchRule {
        /// The index asked for.
        index: usize,
        /// The number of rules (for an insert, the highest valid index).
        len: usize,
    },
}

/// The rule field names, in `Display` order, for error messages.
const FIELD_NAMES: &str =
    "eth_src, eth_dst, eth_type, vlan, ip_src, ip_dst, ip_proto, ip_frag, l4_src, l4_dst";

fn invalid(field: &'static str, value: &str, expected: &'static str) -> AclError {
    AclError::InvalidValue {
        field,
        value: value.to_owned(),
        expected,
    }
}

/// Implements `Serialize` through `Display` and `Deserialize` through
/// `FromStr`, accepting a string or (for TOML's numeric fields) an integer.
macro_rules! serde_via_str {
    ($t:ty, $what:literal) => {
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$t, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$t, E> {
                        v.to_string().parse().map_err(E::custom)
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$t, E> {
                        v.to_string().parse().map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

/// What a matching rule does with the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Let the frame continue through the pipeline.
    Allow,
    /// Drop the frame (the caller counts it against the rule).
    Drop,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Allow => "allow",
            Action::Drop => "drop",
        })
    }
}

impl FromStr for Action {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        match s {
            "allow" => Ok(Action::Allow),
            "drop" => Ok(Action::Drop),
            _ => Err(AclError::InvalidAction(s.to_owned())),
        }
    }
}

/// A MAC address with a mask: matches an address `a` when
/// `a & mask == addr & mask`. Text: `02:00:00:00:00:01` (mask all ones) or
/// `02:00:00:00:00:00/ff:ff:ff:00:00:00`.
///
/// Invariant: `addr` has no bits outside `mask` (the constructor clears
/// them), so equal matches compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MacMatch {
    addr: [u8; 6],
    mask: [u8; 6],
}

impl MacMatch {
    /// A match on `addr` under `mask` (bits of `addr` outside `mask` are cleared).
    pub fn new(addr: [u8; 6], mask: [u8; 6]) -> MacMatch {
        let mut a = addr;
        for (b, m) in a.iter_mut().zip(mask) {
            *b &= m;
        }
        MacMatch { addr: a, mask }
    }

    /// An exact match on all 48 bits of `addr`.
    pub fn exact(addr: [u8; 6]) -> MacMatch {
        MacMatch::new(addr, [0xff; 6])
    }

    /// The address (bits outside the mask are zero).
    pub fn addr(&self) -> [u8; 6] {
        self.addr
    }

    /// The mask.
    pub fn mask(&self) -> [u8; 6] {
        self.mask
    }

    /// Whether `mac` is selected.
    #[inline]
    pub fn matches(&self, mac: [u8; 6]) -> bool {
        let mut i = 0;
        while i < 6 {
            if mac[i] & self.mask[i] != self.addr[i] {
                return false;
            }
            i += 1;
        }
        true
    }
}

const MAC_EXPECTED: &str =
    "a MAC address such as 02:00:00:00:00:01, optionally with a mask such as /ff:ff:ff:00:00:00";

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn write_mac(f: &mut fmt::Formatter<'_>, m: [u8; 6]) -> fmt::Result {
    write!(
        f,
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

impl FromStr for MacMatch {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        let err = || invalid("MAC", s, MAC_EXPECTED);
        let (a, m) = match s.split_once('/') {
            Some((a, m)) => (a, Some(m)),
            None => (s, None),
        };
        let addr = parse_mac(a).ok_or_else(err)?;
        let mask = match m {
            Some(m) => parse_mac(m).ok_or_else(err)?,
            None => [0xff; 6],
        };
        Ok(MacMatch::new(addr, mask))
    }
}

impl fmt::Display for MacMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_mac(f, self.addr)?;
        if self.mask != [0xff; 6] {
            f.write_str("/")?;
            write_mac(f, self.mask)?;
        }
        Ok(())
    }
}

serde_via_str!(MacMatch, "a MAC address with an optional /mask");

/// An EtherType to match. Text: `0x0806` (hex), `2054` (decimal), or one of
/// `ipv4`, `ipv6`, `arp`; written back as `0x` and four hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EtherType(pub u16);

impl FromStr for EtherType {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        let v = match s {
            "ipv4" => Some(ETHERTYPE_IPV4),
            "ipv6" => Some(ETHERTYPE_IPV6),
            "arp" => Some(ETHERTYPE_ARP),
            _ => match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(h) => u16::from_str_radix(h, 16).ok(),
                None => s.parse().ok(),
            },
        };
        v.map(EtherType).ok_or_else(|| {
            invalid(
                "eth_type",
                s,
                "an EtherType 0x0000-0xffff (hex with 0x, or decimal) or ipv4, ipv6, arp",
            )
        })
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", self.0)
    }
}

serde_via_str!(EtherType, "an EtherType");

/// An IP protocol number to match. Text: `0`..`255` or one of `tcp`, `udp`,
/// `icmp`, `icmpv6`, `sctp`, `udplite`; written back by name where it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpProto(pub u8);

const PROTO_NAMES: [(&str, u8); 6] = [
    ("tcp", IPPROTO_TCP),
    ("udp", IPPROTO_UDP),
    ("icmp", IPPROTO_ICMP),
    ("icmpv6", IPPROTO_ICMPV6),
    ("sctp", IPPROTO_SCTP),
    ("udplite", IPPROTO_UDPLITE),
];

impl FromStr for IpProto {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        PROTO_NAMES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|&(_, p)| p)
            .or_else(|| s.parse().ok())
            .map(IpProto)
            .ok_or_else(|| {
                invalid(
                    "ip_proto",
                    s,
                    "a protocol number 0-255 or tcp, udp, icmp, icmpv6, sctp, udplite",
                )
            })
    }
}

impl fmt::Display for IpProto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match PROTO_NAMES.iter().find(|&&(_, p)| p == self.0) {
            Some((n, _)) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

serde_via_str!(IpProto, "an IP protocol number or name");

/// An IPv4 or IPv6 prefix (CIDR). Text: `10.0.0.0/8`, `fd00::/64`, or an
/// address alone for a host (`/32`, `/128`). Host bits under the prefix must
/// be zero (`10.0.0.1/8` is refused as a likely typo).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpPrefix {
    /// An IPv4 prefix: network address and length `0..=32`.
    V4(Ipv4Addr, u8),
    /// An IPv6 prefix: network address and length `0..=128`.
    V6(Ipv6Addr, u8),
}

pub(crate) fn mask_v4(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

pub(crate) fn mask_v6(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

const PREFIX_EXPECTED: &str =
    "an IPv4 or IPv6 address or prefix such as 10.0.0.0/8 or fd00::/64, with zero host bits";

impl IpPrefix {
    /// The prefix `addr/len`. Errors if `len` exceeds the address width or
    /// `addr` has bits set past `len`.
    pub fn new(addr: IpAddr, len: u8) -> Result<IpPrefix, AclError> {
        let err = || invalid("ip prefix", &format!("{addr}/{len}"), PREFIX_EXPECTED);
        match addr {
            IpAddr::V4(a) if len <= 32 && u32::from(a) & !mask_v4(len) == 0 => {
                Ok(IpPrefix::V4(a, len))
            }
            IpAddr::V6(a) if len <= 128 && u128::from(a) & !mask_v6(len) == 0 => {
                Ok(IpPrefix::V6(a, len))
            }
            _ => Err(err()),
        }
    }

    /// Whether this is an IPv6 prefix.
    pub fn is_ipv6(&self) -> bool {
        matches!(self, IpPrefix::V6(..))
    }

    /// Whether IPv4 address `a` is in the prefix (never, for an IPv6 prefix).
    #[inline]
    pub fn contains_v4(&self, a: Ipv4Addr) -> bool {
        match *self {
            IpPrefix::V4(n, len) => u32::from(a) & mask_v4(len) == u32::from(n),
            IpPrefix::V6(..) => false,
        }
    }

    /// Whether IPv6 address `a` is in the prefix (never, for an IPv4 prefix).
    #[inline]
    pub fn contains_v6(&self, a: Ipv6Addr) -> bool {
        match *self {
            IpPrefix::V6(n, len) => u128::from(a) & mask_v6(len) == u128::from(n),
            IpPrefix::V4(..) => false,
        }
    }
}

impl FromStr for IpPrefix {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        let err = || invalid("ip prefix", s, PREFIX_EXPECTED);
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| err())?;
        let len = match len {
            // `u8::from_str` accepts a leading `+`; a prefix length does not.
            Some(l) if l.bytes().all(|b| b.is_ascii_digit()) => l.parse().map_err(|_| err())?,
            Some(_) => return Err(err()),
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        IpPrefix::new(addr, len).map_err(|_| err())
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpPrefix::V4(a, 32) => write!(f, "{a}"),
            IpPrefix::V4(a, l) => write!(f, "{a}/{l}"),
            IpPrefix::V6(a, 128) => write!(f, "{a}"),
            IpPrefix::V6(a, l) => write!(f, "{a}/{l}"),
        }
    }
}

serde_via_str!(IpPrefix, "an IP prefix");

/// An inclusive range of L4 ports (for ICMP: of type or code values).
/// Text: `80` or `1000-2000`. Invariant: `first <= last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortRange {
    first: u16,
    last: u16,
}

impl PortRange {
    /// The range `first..=last`; errors if `first > last`.
    pub fn new(first: u16, last: u16) -> Result<PortRange, AclError> {
        if first <= last {
            Ok(PortRange { first, last })
        } else {
            Err(invalid(
                "port range",
                &format!("{first}-{last}"),
                PORTS_EXPECTED,
            ))
        }
    }

    /// The single port `p`.
    pub fn single(p: u16) -> PortRange {
        PortRange { first: p, last: p }
    }

    /// The lowest port in the range.
    pub fn first(&self) -> u16 {
        self.first
    }

    /// The highest port in the range.
    pub fn last(&self) -> u16 {
        self.last
    }

    /// Whether `p` is in the range.
    #[inline]
    pub fn contains(&self, p: u16) -> bool {
        self.first <= p && p <= self.last
    }
}

const PORTS_EXPECTED: &str = "a port 0-65535 or an inclusive range LOW-HIGH with LOW <= HIGH";

fn parse_port(s: &str) -> Option<u16> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl FromStr for PortRange {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        let err = || invalid("port range", s, PORTS_EXPECTED);
        let (lo, hi) = match s.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (s, s),
        };
        let lo = parse_port(lo).ok_or_else(err)?;
        let hi = parse_port(hi).ok_or_else(err)?;
        PortRange::new(lo, hi).map_err(|_| err())
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

serde_via_str!(PortRange, "a port or an inclusive port range LOW-HIGH");

/// Which IP fragments to match (the values of Open vSwitch's `nw_frag`).
/// Text: `no`, `yes`, `first`, `later`, `not_later`. Non-IP frames match none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FragMatch {
    /// Not a fragment.
    No,
    /// Any fragment, first or later.
    Yes,
    /// The first fragment (offset 0, more-fragments set): it has the L4 header.
    First,
    /// A later fragment (offset > 0): it has no L4 header.
    Later,
    /// Not a later fragment: a whole packet or a first fragment.
    NotLater,
}

impl FragMatch {
    /// Whether fragment state `f` is selected.
    #[inline]
    pub fn matches(self, f: Fragment) -> bool {
        matches!(
            (self, f),
            (FragMatch::No, Fragment::No)
                | (FragMatch::Yes, Fragment::First | Fragment::Later)
                | (FragMatch::First, Fragment::First)
                | (FragMatch::Later, Fragment::Later)
                | (FragMatch::NotLater, Fragment::No | Fragment::First)
        )
    }
}

pub(crate) const FRAG_NAMES: [(&str, FragMatch); 5] = [
    ("no", FragMatch::No),
    ("yes", FragMatch::Yes),
    ("first", FragMatch::First),
    ("later", FragMatch::Later),
    ("not_later", FragMatch::NotLater),
];

impl FromStr for FragMatch {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        FRAG_NAMES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|&(_, f)| f)
            .ok_or_else(|| invalid("ip_frag", s, "one of no, yes, first, later, not_later"))
    }
}

impl fmt::Display for FragMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = FRAG_NAMES
            .iter()
            .find(|&&(_, m)| m == *self)
            .map_or("?", |&(n, _)| n);
        f.write_str(name)
    }
}

serde_via_str!(FragMatch, "one of no, yes, first, later, not_later");

/// One ACL rule: an action and optional match fields (absent = wildcard).
/// See the [module documentation](self) for what each field matches and
/// the TOML and one-line syntax.
///
/// A rule built field by field (or deserialized) is checked by
/// [`validate`](Self::validate) when it enters a port's ACL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclRule {
    /// What to do with a matching frame.
    pub action: Action,
    /// Ethernet source address under a mask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eth_src: Option<MacMatch>,
    /// Ethernet destination address under a mask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eth_dst: Option<MacMatch>,
    /// EtherType after the VLAN tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eth_type: Option<EtherType>,
    /// Outer VLAN ID, `0..=4095`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// IP source prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_src: Option<IpPrefix>,
    /// IP destination prefix (same IP version as `ip_src` when both are given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_dst: Option<IpPrefix>,
    /// IP protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_proto: Option<IpProto>,
    /// IP fragment state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_frag: Option<FragMatch>,
    /// L4 source port range (ICMP: type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l4_src: Option<PortRange>,
    /// L4 destination port range (ICMP: code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l4_dst: Option<PortRange>,
}

impl AclRule {
    /// A rule with `action` and no match fields (it matches every frame).
    pub fn new(action: Action) -> AclRule {
        AclRule {
            action,
            eth_src: None,
            eth_dst: None,
            eth_type: None,
            vlan: None,
            ip_src: None,
            ip_dst: None,
            ip_proto: None,
            ip_frag: None,
            l4_src: None,
            l4_dst: None,
        }
    }

    /// Checks what the field types cannot: `vlan <= 4095`, and `ip_src` and
    /// `ip_dst` of the same IP version.
    pub fn validate(&self) -> Result<(), AclError> {
        if let Some(v) = self.vlan {
            if v > MAX_VLAN_ID {
                return Err(invalid("vlan", &v.to_string(), VLAN_EXPECTED));
            }
        }
        if let (Some(src), Some(dst)) = (self.ip_src, self.ip_dst) {
            if src.is_ipv6() != dst.is_ipv6() {
                return Err(AclError::MixedIpVersions { src, dst });
            }
        }
        Ok(())
    }

    /// Whether every present field matches `key` (see the module docs).
    /// Allocates nothing.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        if let Some(m) = &self.eth_src {
            if !m.matches(key.eth_src()) {
                return false;
            }
        }
        if let Some(m) = &self.eth_dst {
            if !m.matches(key.eth_dst()) {
                return false;
            }
        }
        if let Some(t) = self.eth_type {
            if key.eth_type() != t.0 {
                return false;
            }
        }
        if let Some(v) = self.vlan {
            if key.vlan_id() != Some(v) {
                return false;
            }
        }
        if self.ip_src.is_some() || self.ip_dst.is_some() {
            let ok = if let Some((s, d)) = key.ipv4() {
                wild_or(self.ip_src, |p| p.contains_v4(s))
                    && wild_or(self.ip_dst, |p| p.contains_v4(d))
            } else if let Some((s, d)) = key.ipv6() {
                wild_or(self.ip_src, |p| p.contains_v6(s))
                    && wild_or(self.ip_dst, |p| p.contains_v6(d))
            } else {
                false
            };
            if !ok {
                return false;
            }
        }
        if let Some(p) = self.ip_proto {
            if key.ip_proto() != Some(p.0) {
                return false;
            }
        }
        if let Some(m) = self.ip_frag {
            if !(key.is_ipv4() || key.is_ipv6()) || !m.matches(key.fragment()) {
                return false;
            }
        }
        if self.l4_src.is_some() || self.l4_dst.is_some() {
            match key.l4_ports() {
                Some((s, d)) => {
                    if !wild_or(self.l4_src, |r| r.contains(s))
                        || !wild_or(self.l4_dst, |r| r.contains(d))
                    {
                        return false;
                    }
                }
                None => return false,
            }
        }
        true
    }
}

/// `true` for an absent (wildcard) field, else `f` of its value. (Spelled
/// out rather than `Option::is_none_or`, which needs Rust 1.82 and the
/// workspace declares 1.80.)
#[inline(always)]
fn wild_or<T>(field: Option<T>, f: impl FnOnce(T) -> bool) -> bool {
    match field {
        None => true,
        Some(v) => f(v),
    }
}

const VLAN_EXPECTED: &str = "a VLAN ID 0-4095";

fn set_once<T>(
    slot: &mut Option<T>,
    field: &'static str,
    value: &str,
    parse: impl FnOnce(&str) -> Result<T, AclError>,
) -> Result<(), AclError> {
    if slot.is_some() {
        return Err(AclError::DuplicateField(field));
    }
    let v = parse(value).map_err(|e| match e {
        AclError::InvalidValue {
            value, expected, ..
        } => AclError::InvalidValue {
            field,
            value,
            expected,
        },
        e => e,
    })?;
    *slot = Some(v);
    Ok(())
}

/// The one-line syntax: `ACTION [FIELD=VALUE]...`, e.g.
/// `drop ip_proto=udp l4_dst=5000-5999 ip_src=10.0.0.0/8`.
impl FromStr for AclRule {
    type Err = AclError;
    fn from_str(s: &str) -> Result<Self, AclError> {
        let mut words = s.split_whitespace();
        let action: Action = words.next().unwrap_or("").parse()?;
        let mut r = AclRule::new(action);
        for w in words {
            let (k, v) = w.split_once('=').unwrap_or((w, ""));
            if !FIELD_NAMES.split(", ").any(|f| f == k) {
                return Err(AclError::UnknownField(k.to_owned()));
            }
            if v.is_empty() {
                return Err(AclError::MissingValue(k.to_owned()));
            }
            match k {
                "eth_src" => set_once(&mut r.eth_src, "eth_src", v, str::parse)?,
                "eth_dst" => set_once(&mut r.eth_dst, "eth_dst", v, str::parse)?,
                "eth_type" => set_once(&mut r.eth_type, "eth_type", v, str::parse)?,
                "vlan" => set_once(&mut r.vlan, "vlan", v, |v| {
                    v.parse::<u16>()
                        .ok()
                        .filter(|&id| id <= MAX_VLAN_ID && !v.starts_with('+'))
                        .ok_or_else(|| invalid("vlan", v, VLAN_EXPECTED))
                })?,
                "ip_src" => set_once(&mut r.ip_src, "ip_src", v, str::parse)?,
                "ip_dst" => set_once(&mut r.ip_dst, "ip_dst", v, str::parse)?,
                "ip_proto" => set_once(&mut r.ip_proto, "ip_proto", v, str::parse)?,
                "ip_frag" => set_once(&mut r.ip_frag, "ip_frag", v, str::parse)?,
                "l4_src" => set_once(&mut r.l4_src, "l4_src", v, str::parse)?,
                "l4_dst" => set_once(&mut r.l4_dst, "l4_dst", v, str::parse)?,
                _ => return Err(AclError::UnknownField(k.to_owned())),
            }
        }
        r.validate()?;
        Ok(r)
    }
}

/// Writes the one-line syntax, fields in a fixed order; parses back equal.
impl fmt::Display for AclRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.action)?;
        fn field<T: fmt::Display>(
            f: &mut fmt::Formatter<'_>,
            name: &str,
            v: &Option<T>,
        ) -> fmt::Result {
            match v {
                Some(v) => write!(f, " {name}={v}"),
                None => Ok(()),
            }
        }
        field(f, "eth_src", &self.eth_src)?;
        field(f, "eth_dst", &self.eth_dst)?;
        field(f, "eth_type", &self.eth_type)?;
        field(f, "vlan", &self.vlan)?;
        field(f, "ip_src", &self.ip_src)?;
        field(f, "ip_dst", &self.ip_dst)?;
        field(f, "ip_proto", &self.ip_proto)?;
        field(f, "ip_frag", &self.ip_frag)?;
        field(f, "l4_src", &self.l4_src)?;
        field(f, "l4_dst", &self.l4_dst)
    }
}

/// A rule of the config file's `[[acl]]` array: the port it belongs to and
/// the rule's fields (same names and values as [`AclRule`]; unknown fields
/// refused). `serde(flatten)` cannot be combined with `deny_unknown_fields`,
/// hence the repeated fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclEntry {
    /// The port name the rule is for.
    pub port: String,
    /// See [`AclRule::action`].
    pub action: Action,
    /// See [`AclRule::eth_src`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eth_src: Option<MacMatch>,
    /// See [`AclRule::eth_dst`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eth_dst: Option<MacMatch>,
    /// See [`AclRule::eth_type`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eth_type: Option<EtherType>,
    /// See [`AclRule::vlan`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// See [`AclRule::ip_src`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_src: Option<IpPrefix>,
    /// See [`AclRule::ip_dst`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_dst: Option<IpPrefix>,
    /// See [`AclRule::ip_proto`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_proto: Option<IpProto>,
    /// See [`AclRule::ip_frag`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_frag: Option<FragMatch>,
    /// See [`AclRule::l4_src`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l4_src: Option<PortRange>,
    /// See [`AclRule::l4_dst`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l4_dst: Option<PortRange>,
}

impl AclEntry {
    /// Splits the entry into its port name and its rule, validated.
    pub fn into_parts(self) -> Result<(String, AclRule), AclError> {
        let rule = AclRule {
            action: self.action,
            eth_src: self.eth_src,
            eth_dst: self.eth_dst,
            eth_type: self.eth_type,
            vlan: self.vlan,
            ip_src: self.ip_src,
            ip_dst: self.ip_dst,
            ip_proto: self.ip_proto,
            ip_frag: self.ip_frag,
            l4_src: self.l4_src,
            l4_dst: self.l4_dst,
        };
        rule.validate()?;
        Ok((self.port, rule))
    }
}
