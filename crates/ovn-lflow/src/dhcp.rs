//! Option tables for `put_dhcp_opts`, `put_dhcpv6_opts`, `put_nd_ra_opts`
//! and `trigger_event` (OVN 23.03 `lib/ovn-l7.h` `struct gen_opts_map`).
//!
//! ovn-controller builds the DHCP tables from the Southbound
//! `DHCP_Options` and `DHCPv6_Options` rows, which ovn-northd fills from
//! the lists in ovn-l7.h. [`OptionTable::dhcpv4`] and
//! [`OptionTable::dhcpv6`] ship those lists; [`OptionTable::from_rows`]
//! takes the rows instead.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The type of an option's value (the `type` column of `DHCP_Options`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptType {
    /// `bool`
    Bool,
    /// `uint8`
    Uint8,
    /// `uint16`
    Uint16,
    /// `uint32`
    Uint32,
    /// `ipv4`
    Ipv4,
    /// `static_routes`
    StaticRoutes,
    /// `str`
    Str,
    /// `host_id`: an IPv4 address or a host name.
    HostId,
    /// `domains`: a comma-separated list of domain names.
    Domains,
    /// `ipv6`
    Ipv6,
    /// `mac`
    Mac,
}

impl OptType {
    /// Its name in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            OptType::Bool => "bool",
            OptType::Uint8 => "uint8",
            OptType::Uint16 => "uint16",
            OptType::Uint32 => "uint32",
            OptType::Ipv4 => "ipv4",
            OptType::StaticRoutes => "static_routes",
            OptType::Str => "str",
            OptType::HostId => "host_id",
            OptType::Domains => "domains",
            OptType::Ipv6 => "ipv6",
            OptType::Mac => "mac",
        }
    }

    /// Whether values of this type must be strings (`str`, `domains`);
    /// `host_id` takes either; the rest take integers.
    pub fn is_string(self) -> bool {
        matches!(self, OptType::Str | OptType::Domains)
    }
}

impl FromStr for OptType {
    type Err = Error;
    fn from_str(s: &str) -> Result<OptType> {
        ALL_TYPES
            .iter()
            .copied()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| Error::Symbol(format!("unknown option type {s}")))
    }
}

const ALL_TYPES: [OptType; 11] = [
    OptType::Bool,
    OptType::Uint8,
    OptType::Uint16,
    OptType::Uint32,
    OptType::Ipv4,
    OptType::StaticRoutes,
    OptType::Str,
    OptType::HostId,
    OptType::Domains,
    OptType::Ipv6,
    OptType::Mac,
];

impl fmt::Display for OptType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One option: name, code, type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OptDef {
    /// The name used in actions, e.g. `router` (shared by the options parsed
    /// with it).
    pub name: std::sync::Arc<str>,
    /// The option code on the wire (or an OVN pseudo-code, e.g. `offerip`
    /// is 0).
    pub code: u32,
    /// The value type.
    pub ty: OptType,
}

/// A table of options, looked up by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionTable {
    options: Vec<OptDef>,
}

/// ovn-l7.h `DHCP_OPTION(...)` rows, in the order northd lists them.
pub const DHCPV4_OPTIONS: &[(&str, u32, OptType)] = &[
    ("offerip", 0, OptType::Ipv4),
    ("netmask", 1, OptType::Ipv4),
    ("router", 3, OptType::Ipv4),
    ("dns_server", 6, OptType::Ipv4),
    ("log_server", 7, OptType::Ipv4),
    ("lpr_server", 9, OptType::Ipv4),
    ("hostname", 12, OptType::Str),
    ("domain_name", 15, OptType::Str),
    ("swap_server", 16, OptType::Ipv4),
    ("policy_filter", 21, OptType::Ipv4),
    ("router_solicitation", 32, OptType::Ipv4),
    ("nis_server", 41, OptType::Ipv4),
    ("ntp_server", 42, OptType::Ipv4),
    ("server_id", 54, OptType::Ipv4),
    ("tftp_server", 66, OptType::HostId),
    ("classless_static_route", 121, OptType::StaticRoutes),
    ("ms_classless_static_route", 249, OptType::StaticRoutes),
    ("ip_forward_enable", 19, OptType::Bool),
    ("router_discovery", 31, OptType::Bool),
    ("ethernet_encap", 36, OptType::Bool),
    ("default_ttl", 23, OptType::Uint8),
    ("tcp_ttl", 37, OptType::Uint8),
    ("mtu", 26, OptType::Uint16),
    ("lease_time", 51, OptType::Uint32),
    ("T1", 58, OptType::Uint32),
    ("T2", 59, OptType::Uint32),
    ("bootfile_name", 67, OptType::Str),
    ("wpad", 252, OptType::Str),
    ("path_prefix", 210, OptType::Str),
    ("tftp_server_address", 150, OptType::Ipv4),
    ("domain_search_list", 119, OptType::Domains),
    ("broadcast_address", 28, OptType::Ipv4),
    ("netbios_name_server", 44, OptType::Ipv4),
    ("netbios_node_type", 46, OptType::Uint8),
    ("bootfile_name_alt", 254, OptType::Str),
    ("arp_cache_timeout", 35, OptType::Uint32),
    ("tcp_keepalive_interval", 38, OptType::Uint32),
    ("next_server", 253, OptType::Ipv4),
];

/// ovn-l7.h `DHCPV6_OPT_*` rows.
pub const DHCPV6_OPTIONS: &[(&str, u32, OptType)] = &[
    ("server_id", 2, OptType::Mac),
    ("ia_addr", 5, OptType::Ipv6),
    ("dns_server", 23, OptType::Ipv6),
    ("domain_search", 24, OptType::Str),
];

/// ovn-l7.h `nd_ra_opts_init()`: pseudo-codes 0 (address mode) and 255
/// (router preference), then ND option types (RFC 4861, 8106, 4191).
pub const ND_RA_OPTIONS: &[(&str, u32, OptType)] = &[
    ("addr_mode", 0, OptType::Str),
    ("router_preference", 255, OptType::Str),
    ("slla", 1, OptType::Mac),
    ("prefix", 3, OptType::Ipv6),
    ("mtu", 5, OptType::Uint32),
    ("rdnss", 25, OptType::Ipv6),
    ("dnssl", 31, OptType::Str),
    ("route_info", 24, OptType::Str),
];

/// ovn-l7.h `controller_event_opts_init()` for `empty_lb_backends`.
pub const EMPTY_LB_BACKENDS_OPTIONS: &[(&str, u32, OptType)] = &[
    ("vip", 1, OptType::Str),
    ("protocol", 2, OptType::Str),
    ("load_balancer", 3, OptType::Str),
];

impl OptionTable {
    /// An empty table.
    pub fn new() -> OptionTable {
        OptionTable::default()
    }

    /// A table from `(name, code, type)` rows.
    pub fn from_defs(rows: &[(&str, u32, OptType)]) -> OptionTable {
        let options = rows
            .iter()
            .map(|&(name, code, ty)| OptDef {
                name: name.into(),
                code,
                ty,
            })
            .collect();
        OptionTable { options }
    }

    /// A table from database rows `(name, code, type)` as strings are
    /// typed there (`DHCP_Options`, `DHCPv6_Options`).
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = (&'a str, u32, &'a str)>) -> Result<Self> {
        let mut t = OptionTable::new();
        for (name, code, ty) in rows {
            t.add(name, code, ty.parse()?);
        }
        Ok(t)
    }

    /// OVN's built-in DHCPv4 options.
    pub fn dhcpv4() -> OptionTable {
        OptionTable::from_defs(DHCPV4_OPTIONS)
    }

    /// OVN's built-in DHCPv6 options.
    pub fn dhcpv6() -> OptionTable {
        OptionTable::from_defs(DHCPV6_OPTIONS)
    }

    /// The IPv6 ND router advertisement options.
    pub fn nd_ra() -> OptionTable {
        OptionTable::from_defs(ND_RA_OPTIONS)
    }

    /// The options of the `empty_lb_backends` controller event.
    pub fn empty_lb_backends() -> OptionTable {
        OptionTable::from_defs(EMPTY_LB_BACKENDS_OPTIONS)
    }

    /// Adds (or replaces) an option.
    pub fn add(&mut self, name: &str, code: u32, ty: OptType) {
        self.options.retain(|o| &*o.name != name);
        self.options.push(OptDef {
            name: name.into(),
            code,
            ty,
        });
    }

    /// Looks an option up by name.
    pub fn get(&self, name: &str) -> Option<&OptDef> {
        self.options.iter().find(|o| &*o.name == name)
    }

    /// Every option.
    pub fn iter(&self) -> impl Iterator<Item = &OptDef> {
        self.options.iter()
    }
}
