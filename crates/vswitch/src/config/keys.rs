//! Every key of the TOML file (`--config`), declared once: the source of the man page
//! vswitchd.toml(5) (`crates/docgen`). A unit test checks this table against the serde
//! structs of `super::file` and the port options [`super::port::PortBuilder`] takes,
//! both ways, so a key cannot be added to one and forgotten in the other.

/// Where a key is written in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The top level of the file.
    Top,
    /// `[[port]]`: a vhost-user port (server or client mode).
    Port,
    /// `[[uplink]]`: an AF_XDP uplink.
    Uplink,
    /// `[[tap]]`: a tap host port.
    Tap,
    /// `[[geneve]]`: a Geneve tunnel endpoint.
    Geneve,
    /// `[[vni]]`: a VNI's own flood list.
    Vni,
    /// `[[acl]]`: one ingress ACL rule.
    Acl,
    /// `[[fdb_static]]`: a static MAC entry.
    FdbStatic,
}

impl Section {
    /// Every section, in the order the man page lists them.
    pub const ALL: [Section; 8] = [
        Section::Top,
        Section::Port,
        Section::Uplink,
        Section::Tap,
        Section::Geneve,
        Section::Vni,
        Section::Acl,
        Section::FdbStatic,
    ];

    /// The section as the file writes it (`[[port]]`), or `top level`.
    pub fn heading(self) -> &'static str {
        match self {
            Section::Top => "top level",
            Section::Port => "[[port]]",
            Section::Uplink => "[[uplink]]",
            Section::Tap => "[[tap]]",
            Section::Geneve => "[[geneve]]",
            Section::Vni => "[[vni]]",
            Section::Acl => "[[acl]]",
            Section::FdbStatic => "[[fdb_static]]",
        }
    }
}

/// Whether `vswitchctl reload` (SIGHUP) applies a change of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Applied to the running switch.
    Live,
    /// Refused by a reload (nothing changes): restart vswitchd to apply it.
    Restart,
    /// Read at start only: a reload neither applies nor refuses a change.
    Start,
}

impl Reload {
    /// As the man page says it.
    pub fn describe(self) -> &'static str {
        match self {
            Reload::Live => "a reload applies a change",
            Reload::Restart => "a reload that changes it is refused: restart vswitchd",
            Reload::Start => "read at start: a reload keeps the running value",
        }
    }
}

/// One key of the file.
#[derive(Debug, Clone, Copy)]
pub struct FileKey {
    /// Where it is written.
    pub section: Section,
    /// Its name.
    pub name: &'static str,
    /// Its TOML type and values, e.g. `integer (seconds)`.
    pub value: &'static str,
    /// Whether a reload applies a change.
    pub reload: Reload,
    /// What it does, its default, and the flag it mirrors.
    pub help: &'static str,
}

const fn key(
    section: Section,
    name: &'static str,
    value: &'static str,
    reload: Reload,
    help: &'static str,
) -> FileKey {
    FileKey {
        section,
        name,
        value,
        reload,
        help,
    }
}

use Reload::{Live, Restart, Start};
use Section::*;

/// Every key of the file, by section.
pub const FILE_KEYS: &[FileKey] = &[
    key(Top, "pmd_cpus", "array of integers", Restart, "CPUs to pin PMD threads to, one thread each (--pmd-cpus). Default: one unpinned PMD thread."),
    key(Top, "poll", "\"busy\" | \"adaptive\" | \"interrupt\"", Live, "How PMD threads wait for work (--poll). Default: adaptive."),
    key(Top, "control", "string (path)", Restart, "The control socket vswitchctl talks to (--control). Default: /run/vswitch/vswitchd.sock."),
    key(Top, "fdb_aging_secs", "integer (seconds)", Live, "MAC aging time; 0 disables aging (--fdb-aging). Default: 300."),
    key(Top, "fdb_max_macs", "integer", Live, "MACs the FDB may learn in all; beyond it frames from new MACs are dropped as mac_limit (--fdb-max-macs). Default: 65536."),
    key(Top, "fdb_port_max_macs", "integer", Live, "MACs one vhost-user or tap port may teach the FDB; a port's max_macs overrides it (--fdb-port-max-macs); a change applies to ports placed from then on. Default: 1024."),
    key(Top, "ct_max_connections", "integer", Start, "Connections OVN's connection tracker holds in all; beyond, new ones are dropped as ct_table_full (--ct-max-connections). Default: 3000000."),
    key(Top, "ct_shards", "integer", Start, "Lock shards of the connection tracker, a power of two up to 4096 (--ct-shards). Default: 8 per PMD thread, at least 16."),
    key(Top, "ct_zone_max", "integer", Start, "Connections one conntrack zone holds; 0: only the global limit (--ct-zone-max). Default: 65536."),
    key(Top, "vhost_user_socket_group", "string (group name)", Live, "Group of every vhost-user server socket, e.g. libvirt-qemu (--vhost-user-socket-group); applies to sockets created from then on."),
    key(Top, "vhost_user_socket_mode", "string \"0660\" or TOML octal 0o660", Live, "Mode of every vhost-user server socket (--vhost-user-socket-mode). Default: 0660 with a group, else what the umask leaves."),
    key(Top, "flow_cache", "boolean", Restart, "The per-PMD flow cache (--flow-cache). Default: true."),
    key(Top, "emc_insert_inv_prob", "integer", Restart, "Insert a missed flow into the exact-match cache with probability 1/N (--emc-insert-inv-prob). Default: 1."),
    key(Top, "pmd_auto_rebalance", "boolean", Live, "Reassign rx queues to PMDs by measured load when the busiest stays overloaded (--pmd-auto-rebalance). Default: false."),
    key(Top, "metrics", "string (IP:PORT)", Restart, "Serve Prometheus counters at http://ADDR/metrics and a health check at /healthz (--metrics). Default: none."),
    key(Top, "ovn_remote", "string", Restart, "Join an OVN deployment: the Southbound database, unix:PATH or tcp:IP:PORT, comma-separated for a cluster (--ovn-remote)."),
    key(Top, "ovsdb", "string", Restart, "Take bridges and ports from the Open vSwitch database, unix:PATH or tcp:IP:PORT, as ovs-vswitchd does (--ovsdb); no [[port]], [[uplink]] or [[tap]] tables then."),
    key(Top, "chassis", "string", Restart, "The OVN chassis name this host registers (--chassis); needed with ovn_remote."),
    key(Top, "ovn_bridge_mappings", "string \"NETWORK:UPLINK[,...]\"", Restart, "OVN provider networks bridged to AF_XDP uplinks (--ovn-bridge-mappings)."),
    key(Top, "ovn_cms_options", "string", Restart, "What the CMS reads of this chassis, published as Chassis other_config:ovn-cms-options, e.g. \"enable-chassis-as-gw\" (--ovn-cms-options)."),
    key(Top, "ovn_remote_probe_interval", "integer (ms)", Restart, "Echo the Southbound database after this much silence and reconnect without an answer; 0: never; 1-999 count as 1000 (--ovn-remote-probe-interval). Default: 5000."),
    key(Top, "mcast_snooping", "boolean", Restart, "IGMP/MLD snooping in every VLAN and VNI domain (--mcast-snooping). Default: true."),
    key(Top, "mcast_flood_unregistered", "boolean", Restart, "Flood frames to groups nobody joined; false sends them to router ports only (--mcast-flood-unregistered). Default: true."),
    key(Top, "mcast_table_size", "integer", Restart, "Groups the snooping table holds in all (--mcast-table-size). Default: 2048."),
    key(Top, "mcast_aging_secs", "integer (seconds)", Restart, "Lifetime of a membership or router port without a refresh (--mcast-aging). Default: 300."),
    key(Top, "mcast_static", "array of strings \"PORT=GROUP\"", Restart, "Static group memberships, never aged (--mcast-static)."),
    key(Top, "mcast_querier", "boolean", Restart, "The switch's own IGMP/MLD querier (--mcast-querier). Default: false."),
    key(Top, "mcast_querier_domains", "array of strings", Restart, "The querier only in these domains: \"untagged\", \"vlan:N\", \"vni:N\" (--mcast-querier-domains)."),
    key(Top, "mcast_query_interval_secs", "integer (seconds)", Restart, "Seconds between the querier's rounds (--mcast-query-interval). Default: 125."),
    key(Top, "port", "array of tables", Live, "vhost-user ports: the [[port]] keys below (--vhost-user, --vhost-user-client)."),
    key(Top, "uplink", "array of tables", Live, "AF_XDP uplinks: the [[uplink]] keys below (--uplink)."),
    key(Top, "tap", "array of tables", Live, "Tap host ports: the [[tap]] keys below (--tap)."),
    key(Top, "geneve", "array of tables", Live, "Geneve tunnel endpoints: the [[geneve]] keys below (--geneve)."),
    key(Top, "vni", "array of tables", Live, "Per-VNI flood lists: the [[vni]] keys below."),
    key(Top, "acl", "array of tables", Live, "Ingress ACL rules, in order: the [[acl]] keys below (--acl)."),
    key(Top, "fdb_static", "array of tables", Live, "Static MAC entries: the [[fdb_static]] keys below (--static-mac)."),
    // [[port]]
    key(Port, "name", "string", Live, "The port's name, unique among ports and tunnel endpoints. Required."),
    key(Port, "type", "\"vhost-user\" | \"vhost-user-client\"", Live, "vhost-user: vswitchd creates the socket and the VM connects; vhost-user-client: vswitchd connects to the VM side's socket and retries every second. Required."),
    key(Port, "path", "string (path)", Live, "The vhost-user socket. Required."),
    key(Port, "queues", "integer 1..=16", Live, "Queue pairs (VIRTIO_NET_F_MQ). Default: 1."),
    key(Port, "offloads", "boolean", Live, "Offer checksum and TSO offloads to the guest. Default: true."),
    key(Port, "socket_group", "string (group name)", Live, "Group of this server socket (vhost-user only); overrides vhost_user_socket_group."),
    key(Port, "socket_mode", "string \"0660\" or TOML octal", Live, "Mode of this server socket (vhost-user only); overrides vhost_user_socket_mode."),
    key(Port, "iface_id", "string", Live, "The OVN logical switch port this port is (with ovn_remote)."),
    key(Port, "vlan", "integer 1..=4094", Live, "Access VLAN; absent: untagged. Changed in place by a reload (the guest stays connected)."),
    key(Port, "vni", "integer 0..=16777215", Live, "The Geneve VNI (bridge domain) the port joins, instead of a VLAN."),
    key(Port, "mtu", "integer 68..=65535 (bytes)", Live, "The port's MTU on a VNI; refused if it plus the tunnel overhead exceeds the underlay's."),
    key(Port, "mac", "string (MAC)", Live, "Port security: only this source MAC (and allowed_macs) enters; others are dropped as spoofed_source."),
    key(Port, "allowed_macs", "array of strings (MACs)", Live, "Port security: further source MACs allowed."),
    key(Port, "max_macs", "integer", Live, "MACs this port may teach the FDB; overrides fdb_port_max_macs."),
    // [[uplink]]
    key(Uplink, "name", "string", Live, "The uplink's name. Required."),
    key(Uplink, "iface", "string (interface)", Live, "The network interface whose rx queues get AF_XDP sockets. Required."),
    key(Uplink, "mode", "\"auto\" | \"native\" | \"generic\" | \"zerocopy\"", Live, "XDP mode; auto takes the best the driver reports and logs why. Default: auto."),
    key(Uplink, "queues", "integer", Live, "Use rx queues 0..N. Default: all of the NIC's."),
    key(Uplink, "vlan", "integer 1..=4094", Live, "Access VLAN; absent: untagged."),
    key(Uplink, "vni", "integer", Live, "The VNI the uplink joins as an access port."),
    key(Uplink, "mtu", "integer (bytes)", Live, "The port's MTU on a VNI."),
    key(Uplink, "mac", "string (MAC)", Live, "Port security: the only source MAC allowed in."),
    key(Uplink, "allowed_macs", "array of strings (MACs)", Live, "Port security: further source MACs allowed."),
    key(Uplink, "max_macs", "integer", Live, "MACs this port may teach the FDB."),
    // [[tap]]
    key(Tap, "name", "string", Live, "The port's name. Required."),
    key(Tap, "ifname", "string (interface)", Live, "The tap device vswitchd creates. Required."),
    key(Tap, "iface_id", "string", Live, "The OVN logical switch port this tap is (with ovn_remote)."),
    key(Tap, "vlan", "integer 1..=4094", Live, "Access VLAN; absent: untagged."),
    key(Tap, "vni", "integer", Live, "The VNI the tap joins; it then gets the underlay MTU minus the overhead."),
    key(Tap, "mtu", "integer (bytes)", Live, "The tap's MTU."),
    key(Tap, "mac", "string (MAC)", Live, "Port security: the only source MAC allowed in."),
    key(Tap, "allowed_macs", "array of strings (MACs)", Live, "Port security: further source MACs allowed."),
    key(Tap, "max_macs", "integer", Live, "MACs this port may teach the FDB."),
    // [[geneve]]
    key(Geneve, "name", "string", Live, "The endpoint's name, unique among ports and endpoints. Required."),
    key(Geneve, "local", "string (IPv4 or IPv6)", Live, "The local address: one the host kernel has on the uplink's interface (or on device). Required."),
    key(Geneve, "uplink", "string", Live, "The AF_XDP uplink it sends and receives through. Required."),
    key(Geneve, "device", "string", Live, "A tap port ([[tap]]) that holds local instead of the uplink's interface, untagged beside it (Open vSwitch's layout with the address on br-phy): the uplink stays a switch port, its Geneve to local is decapsulated and all else switched. Default: none."),
    key(Geneve, "remotes", "array of strings (IPs)", Live, "Remote endpoints every VNI floods to, unless [[vni]] gives a VNI its own list."),
    key(Geneve, "port", "integer", Live, "UDP destination port (RFC 8926 §3.3). Default: 6081."),
    key(Geneve, "csum", "boolean", Live, "Outer UDP checksum. Default: off over IPv4, on over IPv6."),
    key(Geneve, "options", "array of strings \"CLASS:TYPE:HEX\"", Live, "Options sent with every frame (data a multiple of 4 bytes)."),
    // [[vni]]
    key(Vni, "id", "integer", Live, "The VNI. Required."),
    key(Vni, "remotes", "array of strings (IPs)", Live, "Remote endpoints its broadcast, multicast and unknown unicast go to."),
    // [[acl]]
    key(Acl, "port", "string", Live, "The ingress port the rule is for. Required."),
    key(Acl, "action", "\"allow\" | \"drop\"", Live, "What a matching frame gets; first match wins, no match allows. Required."),
    key(Acl, "eth_src", "string MAC[/MASK]", Live, "Source MAC."),
    key(Acl, "eth_dst", "string MAC[/MASK]", Live, "Destination MAC."),
    key(Acl, "eth_type", "integer or string", Live, "EtherType, e.g. 0x0800 or \"ipv6\"."),
    key(Acl, "vlan", "integer", Live, "VLAN id."),
    key(Acl, "ip_src", "string (CIDR)", Live, "IPv4 or IPv6 source prefix."),
    key(Acl, "ip_dst", "string (CIDR)", Live, "IPv4 or IPv6 destination prefix."),
    key(Acl, "ip_proto", "integer or tcp|udp|icmp|icmpv6|sctp", Live, "IP protocol."),
    key(Acl, "ip_frag", "string", Live, "Fragment match: no, first, later, yes."),
    key(Acl, "l4_src", "string PORT or LO-HI", Live, "L4 source port or range."),
    key(Acl, "l4_dst", "string PORT or LO-HI", Live, "L4 destination port or range."),
    // [[fdb_static]]
    key(FdbStatic, "mac", "string (MAC)", Live, "The MAC address. Required."),
    key(FdbStatic, "port", "string", Live, "The port it lives behind. Required."),
    key(FdbStatic, "vlan", "integer", Live, "The VLAN domain; 0 or absent: untagged."),
];

/// The keys of one section, in table order.
pub fn keys_of(section: Section) -> impl Iterator<Item = &'static FileKey> {
    FILE_KEYS.iter().filter(move |k| k.section == section)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{port::PortBuilder, PortType};
    use serde::de::DeserializeOwned;
    use std::collections::BTreeSet;

    /// The field names serde accepts for `T`, read from its unknown-field error
    /// ("unknown field `zz`, expected one of `a`, `b`"), which lists them all.
    fn serde_fields<T: DeserializeOwned + std::fmt::Debug>(required: &str) -> BTreeSet<String> {
        let text = format!("{required}\nzz_not_a_key = 1\n");
        let err = toml::from_str::<T>(&text).expect_err("an unknown key is refused");
        let msg = err.to_string();
        // "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, `c`".
        let list = msg
            .split("expected ")
            .nth(1)
            .unwrap_or_else(|| panic!("no field list in {msg:?}"));
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    fn table_keys(section: Section) -> BTreeSet<String> {
        keys_of(section).map(|k| k.name.to_string()).collect()
    }

    #[test]
    fn every_serde_field_has_a_row_and_every_row_a_field() {
        use crate::config::{acl::AclEntry, FileConfig, GeneveConfig, StaticFdbEntry, VniConfig};
        let cases = [
            (Top, serde_fields::<FileConfig>("")),
            (
                Geneve,
                serde_fields::<GeneveConfig>("name = \"t\"\nlocal = \"192.0.2.1\"\nuplink = \"u\""),
            ),
            (Vni, serde_fields::<VniConfig>("id = 1")),
            (
                Acl,
                serde_fields::<AclEntry>("port = \"p\"\naction = \"drop\""),
            ),
            (
                FdbStatic,
                serde_fields::<StaticFdbEntry>("mac = \"02:00:00:00:00:01\"\nport = \"p\""),
            ),
        ];
        for (section, fields) in cases {
            assert!(!fields.is_empty(), "{section:?}");
            assert_eq!(
                table_keys(section),
                fields,
                "{} in FILE_KEYS (left) against the serde struct (right)",
                section.heading()
            );
        }
    }

    /// A port key is known when [`PortBuilder::set`] does not call it unknown.
    fn port_accepts(kind: PortType, key: &str) -> bool {
        let mut b = PortBuilder::new("t", kind, "p", "x");
        match b.set(key, "?") {
            Ok(()) => true,
            Err(e) => !e.to_string().contains("unknown option"),
        }
    }

    #[test]
    fn every_port_option_has_a_row_and_every_row_an_option() {
        let kinds = [
            (
                Port,
                PortType::VhostUser,
                ["name", "type", "path"].as_slice(),
            ),
            (Port, PortType::VhostUserClient, &["name", "type", "path"]),
            (Uplink, PortType::Afxdp, &["name", "iface"]),
            (Tap, PortType::Tap, &["name", "ifname"]),
        ];
        for (section, kind, own) in kinds {
            // Options the builder names in its own "expected ..." list.
            let listed = crate::config::port::options_for(kind);
            let listed: BTreeSet<String> = listed
                .split(", ")
                .map(|o| o.split('=').next().unwrap_or(o).to_string())
                .collect();
            let rows = table_keys(section);
            for o in &listed {
                assert!(rows.contains(o), "{} lacks option {o:?}", section.heading());
            }
            for r in &rows {
                if own.contains(&r.as_str()) {
                    continue;
                }
                // socket_group/socket_mode are server-mode only: a client port refuses them.
                let server_only = kind == PortType::VhostUserClient
                    && (r == "socket_group" || r == "socket_mode");
                assert_eq!(
                    port_accepts(kind, r),
                    !server_only,
                    "{} row {r:?} against PortBuilder for {kind}",
                    section.heading()
                );
            }
        }
    }

    #[test]
    fn every_row_says_something() {
        let mut seen = BTreeSet::new();
        for k in FILE_KEYS {
            let what = format!("{}.{}", k.section.heading(), k.name);
            assert!(k.help.ends_with('.') && k.help.len() > 5, "{what}: no help");
            assert!(!k.value.is_empty(), "{what}: no value type");
            assert!(seen.insert((k.section.heading(), k.name)), "{what} twice");
        }
    }
}
