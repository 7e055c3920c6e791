//! The symbol table, sets and ports of OVN's `tests/test-ovn.c`.
#![allow(dead_code)]

use ovn_lflow::field::Field;
use ovn_lflow::symtab::WR_DEFAULT;
use ovn_lflow::{AddressSet, Context, SymbolTable};
use std::collections::HashMap;

/// test-ovn.c `create_symtab()`: OVN's table plus symbols for negative
/// tests (OVN puts them on the 64-bit `MFF_XREG0`; any 64-bit base field
/// will do here).
pub fn symtab() -> SymbolTable {
    let mut t = SymbolTable::ovn();
    t.add_field("bad_prereq", Field::Xreg4, Some("xyzzy"), false, WR_DEFAULT)
        .unwrap();
    t.add_field(
        "self_recurse",
        Field::Xreg4,
        Some("self_recurse != 0"),
        false,
        WR_DEFAULT,
    )
    .unwrap();
    t.add_field(
        "mutual_recurse_1",
        Field::Xreg4,
        Some("mutual_recurse_2 != 0"),
        false,
        WR_DEFAULT,
    )
    .unwrap();
    t.add_field(
        "mutual_recurse_2",
        Field::Xreg4,
        Some("mutual_recurse_1 != 0"),
        false,
        WR_DEFAULT,
    )
    .unwrap();
    t.add_string("big_string", Field::Xreg4, None).unwrap();
    t
}

/// test-ovn.c `create_addr_sets()`, `create_port_groups()` and its ports.
pub struct TestContext {
    sets: HashMap<String, AddressSet>,
    groups: HashMap<String, Vec<String>>,
    ports: HashMap<String, u32>,
}

pub fn context() -> TestContext {
    let mut sets = HashMap::new();
    sets.insert(
        "set1".into(),
        AddressSet::new(["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
    );
    sets.insert("set2".into(), AddressSet::new(["::1", "::2", "::3"]));
    sets.insert(
        "set3".into(),
        AddressSet::new([
            "00:00:00:00:00:01",
            "00:00:00:00:00:02",
            "00:00:00:00:00:03",
        ]),
    );
    sets.insert("set4".into(), AddressSet::new(Vec::<&str>::new()));
    let mut groups = HashMap::new();
    groups.insert(
        "0_pg1".into(),
        vec!["lsp1".into(), "lsp2".into(), "lsp3".into()],
    );
    groups.insert("0_pg_empty".into(), vec![]);
    let ports = [
        ("eth0", 5),
        ("eth1", 6),
        ("LOCAL", 0xfffe),
        ("lsp1", 0x11),
        ("lsp2", 0x12),
        ("lsp3", 0x13),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_string(), k))
    .collect();
    TestContext {
        sets,
        groups,
        ports,
    }
}

impl Context for TestContext {
    fn address_set(&self, name: &str) -> Option<&AddressSet> {
        self.sets.get(name)
    }
    /// Like expr.c `parse_port_group()`: the SB name `<dp key>_<name>`
    /// (datapath 0 here), then the bare name.
    fn port_group(&self, name: &str) -> Option<&[String]> {
        self.groups
            .get(&format!("0_{name}"))
            .or_else(|| self.groups.get(name))
            .map(Vec::as_slice)
    }
    fn port_key(&self, name: &str) -> Option<u32> {
        self.ports.get(name).copied()
    }
    /// test-ovn.c `is_chassis_resident_cb()`: every known port is resident.
    fn is_chassis_resident(&self, name: &str) -> bool {
        self.ports.contains_key(name)
    }
}

use ovn_lflow::actions::{ActionParams, Pipeline};
use ovn_lflow::dhcp::{OptType, OptionTable};

/// test-ovn.c `create_gen_opts()`.
pub struct OptTables {
    pub dhcp: OptionTable,
    pub dhcpv6: OptionTable,
    pub nd_ra: OptionTable,
    pub events: OptionTable,
}

pub fn opt_tables() -> OptTables {
    use OptType::*;
    let dhcp = OptionTable::from_defs(&[
        ("offerip", 0, Ipv4),
        ("netmask", 1, Ipv4),
        ("router", 3, Ipv4),
        ("dns_server", 6, Ipv4),
        ("log_server", 7, Ipv4),
        ("lpr_server", 9, Ipv4),
        ("hostname", 12, Str),
        ("domain_name", 15, Str),
        ("swap_server", 16, Ipv4),
        ("policy_filter", 21, Ipv4),
        ("router_solicitation", 32, Ipv4),
        ("nis_server", 41, Ipv4),
        ("ntp_server", 42, Ipv4),
        ("server_id", 54, Ipv4),
        ("tftp_server", 66, HostId),
        ("classless_static_route", 121, StaticRoutes),
        ("ip_forward_enable", 19, Bool),
        ("router_discovery", 31, Bool),
        ("ethernet_encap", 36, Bool),
        ("default_ttl", 23, Uint8),
        ("tcp_ttl", 37, Uint8),
        ("mtu", 26, Uint16),
        ("lease_time", 51, Uint32),
        ("wpad", 252, Str),
        ("bootfile_name", 67, Str),
        ("path_prefix", 210, Str),
        ("tftp_server_address", 150, Ipv4),
        ("arp_cache_timeout", 35, Uint32),
        ("tcp_keepalive_interval", 38, Uint32),
        ("domain_search_list", 119, Domains),
        ("bootfile_name_alt", 254, Str),
        ("broadcast_address", 28, Ipv4),
        ("netbios_name_server", 44, Ipv4),
        ("netbios_node_type", 46, Uint8),
        ("next_server", 253, Ipv4),
    ]);
    OptTables {
        dhcp,
        dhcpv6: OptionTable::dhcpv6(),
        nd_ra: OptionTable::nd_ra(),
        events: OptionTable::empty_lb_backends(),
    }
}

/// test-ovn.c `test_parse_actions()`: 24 tables, table 10 of ingress.
pub fn action_params<'a>(symtab: &'a SymbolTable, opts: &'a OptTables) -> ActionParams<'a> {
    ActionParams {
        symtab,
        dhcp_opts: &opts.dhcp,
        dhcpv6_opts: &opts.dhcpv6,
        nd_ra_opts: &opts.nd_ra,
        event_opts: &opts.events,
        pipeline: Pipeline::Ingress,
        n_tables: 24,
        cur_ltable: 10,
    }
}
