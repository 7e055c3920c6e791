//! vswitchd's command line (clap derive; the doc comments are the help).

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use super::PollMode;

/// vswitchd: a vhost-user virtual switch.
///
/// Serves VMs (QEMU `-netdev vhost-user`, DPDK virtio-user) over vhost-user sockets and
/// switches their Ethernet frames with a MAC-learning FDB, on PMD threads pinned to CPUs.
/// Every flag can also be set in a TOML file given with --config (flags win; ports and
/// static MACs from both are used). `vswitchctl` talks to the running daemon.
///
/// Example:
///   vswitchd --vhost-user vm1=/tmp/vm1.sock --vhost-user vm2=/tmp/vm2.sock,queues=2 --pmd-cpus 1
#[derive(Debug, Clone, Parser, Default)]
#[command(
    name = "vswitchd",
    version,
    verbatim_doc_comment,
    after_long_help = "Files: /etc/vswitch/vswitchd.toml, the configuration the packaged \
        unit vswitchd.service gives --config (every key: man vswitchd.toml); \
        /run/vswitch/vswitchd.sock, the control socket. `systemctl reload vswitchd` (or \
        `vswitchctl reload`, or SIGHUP) applies an edited file to the running switch. \
        See also vswitchctl(8), vswitchd.toml(5), and the documentation by task in \
        /usr/share/doc/vswitch and docs/."
)]
pub struct Args {
    /// TOML configuration file; keys: the flags' names with `_` for `-` (pmd_cpus, poll,
    /// control, fdb_aging_secs, fdb_max_macs, fdb_port_max_macs, ct_max_connections,
    /// ct_zone_max, ct_shards, mcast_snooping,
    /// mcast_flood_unregistered, mcast_table_size, mcast_aging_secs, mcast_static,
    /// mcast_querier, mcast_querier_domains, mcast_query_interval_secs,
    /// vhost_user_socket_group, vhost_user_socket_mode, ...),
    /// `[[port]]` {name, type = "vhost-user"|"vhost-user-client", path},
    /// `[[uplink]]` {name, iface}, `[[tap]]` {name, ifname}, each with the option keys its
    /// flag takes (queues, vlan, vni, mtu, mac, allowed_macs, max_macs, socket_group, ...);
    /// `[[fdb_static]]` {mac, port, vlan}.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Server-mode vhost-user port: vswitchd creates the socket, the VM connects.
    /// `NAME=PATH[,queues=N][,vlan=V][,offloads=on|off][,socket_group=G][,socket_mode=M]`.
    /// Repeatable. `offloads=on` (the default) offers checksum and TSO offloads; frames a
    /// destination cannot take whole are segmented or checksummed in software.
    /// `offloads=off` offers none. `socket_group=`/`socket_mode=` set the socket file's
    /// group and mode (see --vhost-user-socket-group).
    /// Every port kind also takes `vni=N`, `mtu=M`, and port security: `mac=MAC` and
    /// `allowed_macs=MAC+MAC` (then frames from any other source MAC are dropped as
    /// `spoofed_source`), `max_macs=N` (MACs the port may teach the FDB); vhost-user and
    /// tap ports take `iface_id=LSP`, the OVN logical switch port they are.
    #[arg(
        long = "vhost-user",
        value_name = "NAME=PATH[,queues=N][,vlan=V][,offloads=on|off][,socket_group=G]"
    )]
    pub vhost_user: Vec<String>,

    /// Group that owns every vhost-user server socket (a port's `socket_group=`
    /// overrides it), so that QEMU running as another user in that group can connect:
    /// libvirt runs QEMU as `libvirt-qemu` (group `libvirt-qemu` on Debian). The socket is
    /// created with the group and mode already set, at every start and `add-port`.
    #[arg(long, value_name = "GROUP")]
    pub vhost_user_socket_group: Option<String>,

    /// Mode of every vhost-user server socket, octal (a port's `socket_mode=` overrides
    /// it). Default: 0660 when a group is given, else what the umask leaves (0755 under
    /// the usual umask 022: only the daemon's user can connect).
    #[arg(long, value_name = "MODE")]
    pub vhost_user_socket_mode: Option<String>,

    /// Client-mode vhost-user port: vswitchd connects to a socket the VM side listens on
    /// (QEMU `server=on`, virtio-user `server=1`) and retries every second while it is absent
    /// or gone. `NAME=PATH[,queues=N][,vlan=V][,offloads=on|off]`. Repeatable.
    #[arg(
        long = "vhost-user-client",
        value_name = "NAME=PATH[,queues=N][,vlan=V][,offloads=on|off]"
    )]
    pub vhost_user_client: Vec<String>,

    /// AF_XDP uplink: one AF_XDP socket per rx queue of network interface IFACE, each
    /// polled by one PMD thread; vswitchd loads and attaches the XDP program that
    /// redirects to them (and detaches it on exit). `mode=auto` (default) picks zero-copy
    /// when the driver reports it, else native (driver) copy mode, else generic (skb)
    /// mode, and logs why; `queues=N` uses rx queues 0..N (default: all). Repeatable.
    #[arg(
        long = "uplink",
        value_name = "NAME=IFACE[,mode=auto|native|generic|zerocopy][,queues=N][,vlan=V]"
    )]
    pub uplink: Vec<String>,

    /// Tap host port: vswitchd creates tap device IFNAME (IFF_VNET_HDR, so TSO frames pass
    /// unsegmented), brings it up, and moves its frames in batches through io_uring.
    /// `NAME=IFNAME[,vlan=V]`. Repeatable.
    #[arg(long = "tap", value_name = "NAME=IFNAME[,vlan=V]")]
    pub tap: Vec<String>,

    /// Geneve tunnel endpoint (RFC 8926) on AF_XDP uplink UPLINK: LOCAL_IP (IPv4 or
    /// IPv6) must be an address the host kernel has on the uplink's interface, which
    /// keeps its ARP/ND, ICMP and routes; the uplink's XDP program steers only Geneve
    /// for LOCAL_IP to vswitchd. `remote=` lists the remote endpoints every VNI floods
    /// to (`[[vni]]` in the file gives a VNI its own list); `csum=` the outer UDP
    /// checksum (default off over IPv4, on over IPv6); `opt=CLASS:TYPE:HEX` an option
    /// sent with every frame. Ports join a VNI with `vni=N`. `device=TAP` puts LOCAL_IP
    /// on tap port TAP instead, untagged beside the uplink (Open vSwitch's userspace
    /// layout, the address on br-phy): the uplink then stays a switch port, its Geneve
    /// for LOCAL_IP is decapsulated and everything else switched, so the kernel answers
    /// ARP for LOCAL_IP through the tap. Repeatable.
    #[arg(
        long = "geneve",
        value_name = "NAME=LOCAL_IP,uplink=UPLINK[,device=TAP][,remote=IP+IP...][,port=6081][,csum=on|off][,opt=C:T:HEX]"
    )]
    pub geneve: Vec<String>,

    /// CPUs to pin PMD threads to, one thread per CPU: "1,2" or "2-3". Default: one
    /// unpinned PMD thread.
    #[arg(long, value_name = "LIST")]
    pub pmd_cpus: Option<String>,

    /// How PMD threads wait for work: busy (spin, lowest latency), adaptive (spin while
    /// bursts are full, nap up to 50 µs while they are light, sleep on kicks after ~10 ms
    /// idle; the default), interrupt (sleep whenever idle).
    #[arg(long, value_enum)]
    pub poll: Option<PollMode>,

    /// Control socket for vswitchctl.
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,

    /// MAC aging time in seconds (0 disables aging).
    #[arg(long, value_name = "SECS")]
    pub fdb_aging: Option<u64>,

    /// MACs the FDB may learn in all (default 65536). A frame whose source MAC would be
    /// a new entry beyond it is dropped as `mac_limit`.
    #[arg(long, value_name = "N")]
    pub fdb_max_macs: Option<u32>,

    /// MACs one vhost-user or tap port may teach the FDB (default 1024; a port's own
    /// `max_macs=N` overrides it). Beyond it the port's frames from new MACs are dropped
    /// as `mac_limit`, so one guest cannot fill the table or flush every flow cache.
    #[arg(long, value_name = "N")]
    pub fdb_port_max_macs: Option<u32>,

    /// Connections OVN's connection tracker may hold in all (default 3,000,000, Open
    /// vSwitch's `ct-set-maxconns` default). Beyond it a packet that would open one is
    /// dropped as `ct_table_full`.
    #[arg(long, value_name = "N")]
    pub ct_max_connections: Option<u32>,

    /// Connections one conntrack zone (one logical port, one router) may hold (default
    /// 65536; 0: only the global limit). Beyond it the port's new connections are
    /// dropped as `ct_zone_full`, never another port's.
    #[arg(long, value_name = "N")]
    pub ct_zone_max: Option<u32>,

    /// Lock shards of the connection tracker, a power of two up to 4096 (default: 8 per
    /// PMD thread, at least 16). Each shard is a table under its own lock: more shards,
    /// fewer PMDs meeting on one; fewer, fewer lines to keep in the cache: new
    /// connections through NAT came 8-13 % faster at 16 than at 256 with one PMD
    /// (docs/tuning.md).
    #[arg(long, value_name = "N")]
    pub ct_shards: Option<u32>,

    /// Static FDB entry: `PORT=MAC[,vlan=V]`. Repeatable.
    #[arg(long = "static-mac", value_name = "PORT=MAC[,vlan=V]")]
    pub static_mac: Vec<String>,

    /// ACL rule for frames arriving on PORT, appended in order: `PORT:ACTION FIELD=VALUE...`,
    /// e.g. `vm1:drop ip_proto=udp l4_dst=5000-5999 ip_src=10.0.0.0/8`. Fields: eth_src,
    /// eth_dst (MAC[/MASK]), eth_type, vlan, ip_src, ip_dst (CIDR), ip_proto, ip_frag,
    /// l4_src, l4_dst (PORT or LO-HI). First match wins; no match allows. Repeatable.
    #[arg(long = "acl", value_name = "PORT:RULE")]
    pub acl: Vec<String>,

    /// The flow cache (last-flow check + exact-match cache per PMD): on (default) or off.
    #[arg(long = "flow-cache", value_name = "on|off")]
    pub flow_cache: Option<OnOff>,

    /// Insert a missed flow into the exact-match cache with probability 1/N (default 1).
    /// Larger N protects the cache from thrashing under many short flows.
    #[arg(long, value_name = "N")]
    pub emc_insert_inv_prob: Option<u32>,

    /// Reassign rx queues to PMDs by measured load when the busiest PMD stays at 95 %
    /// busy or more for 30 s and moving queues would lower its load by 25 % or more
    /// (checked every 10 s, at most once a minute; like Open vSwitch's pmd-auto-lb).
    /// `vswitchctl pmd-rebalance` does it on demand.
    #[arg(long)]
    pub pmd_auto_rebalance: bool,

    /// Serve the counters for Prometheus at http://ADDR/metrics (e.g. 127.0.0.1:9477).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,

    /// Join an OVN deployment as a chassis: read the OVN Southbound database at REMOTE
    /// (`unix:PATH` or `tcp:IP:6642`; several, comma-separated, for a clustered
    /// database) and turn its logical switches into bridge domains. Registers the
    /// chassis (with --chassis) and its Encap (the IPv4 --geneve endpoint's address),
    /// claims the logical switch ports named by `iface_id=LSP` on --vhost-user,
    /// --vhost-user-client and --tap, and forwards by OVN's rules (docs/ovn.md says
    /// what works and what is refused).
    #[arg(long, value_name = "REMOTE[,REMOTE...]")]
    pub ovn_remote: Option<String>,

    /// Take bridges and ports from the Open vSwitch database at REMOTE (`unix:PATH` or
    /// `tcp:IP:PORT`), as ovs-vswitchd does: `ovs-vsctl add-br`, `add-port`, `del-port`
    /// apply live, and vswitchd writes back what ovs-vswitchd writes (cur_cfg, ofport,
    /// link_state, statistics, error). Ports then come from the database only: with
    /// --ovsdb, port flags (--vhost-user, --tap, ...) and TOML port tables are refused,
    /// and `vswitchctl add-port`/`del-port` say to use ovs-vsctl. The other flags (PMDs,
    /// poll mode, control socket, metrics) still hold. docs/ovsdb.md.
    #[arg(long, value_name = "REMOTE")]
    pub ovsdb: Option<String>,

    /// The OVN chassis name this host registers (Open vSwitch's
    /// `external_ids:system-id`); needed with --ovn-remote.
    #[arg(long, value_name = "NAME")]
    pub chassis: Option<String>,

    /// Provider networks of the OVN deployment: logical switches with a `localnet` port
    /// for NETWORK (`options:network_name`) are bridged to --uplink UPLINK, their frames
    /// tagged with the port's VLAN (`tag`), and reach other chassis over that network
    /// rather than through tunnels (Open vSwitch's `ovn-bridge-mappings`, with uplinks
    /// for bridges). An uplink that also carries a --geneve endpoint takes VLAN
    /// networks only (untagged frames are the tunnel's). Example:
    /// `physnet1:phys0,physnet2:eth0up`.
    #[arg(long, value_name = "NETWORK:UPLINK[,...]")]
    pub ovn_bridge_mappings: Option<String>,

    /// Options the cloud management system reads of this OVN chassis, published as
    /// `Chassis.other_config:ovn-cms-options` (Open vSwitch's
    /// `external_ids:ovn-cms-options`). Neutron schedules gateway routers only on chassis
    /// with `enable-chassis-as-gw`; vswitchd itself reads nothing in them. Example:
    /// `enable-chassis-as-gw,availability-zones=az0`.
    #[arg(long, value_name = "OPTIONS")]
    pub ovn_cms_options: Option<String>,

    /// How long the OVN Southbound connection may be silent before vswitchd sends an
    /// echo, in milliseconds; with no answer within as long again it reconnects (to
    /// the next member of a cluster). 0: never probe. Values from 1 to 999 count as
    /// 1000. Unix sockets are not probed. Open vSwitch's
    /// `external_ids:ovn-remote-probe-interval`. Default: 5000.
    #[arg(long, value_name = "MS")]
    pub ovn_remote_probe_interval: Option<u64>,

    /// IGMP (v1, v2, v3) and MLD (v1, v2) snooping in every VLAN and VNI bridge domain:
    /// on (default) or off. Reports build a group table per domain; frames to a joined
    /// group go only to its member ports and to multicast-router ports (where queries
    /// come from); reports go to router ports (and the VNI's remote endpoints) only.
    /// Link-local groups (224.0.0.0/24, ff02::/16) always flood. On by default because
    /// unregistered groups still flood: nothing changes until a receiver reports.
    /// `vswitchctl mdb` shows the table.
    #[arg(long = "mcast-snooping", value_name = "on|off")]
    pub mcast_snooping: Option<OnOff>,

    /// Frames to a group nobody joined: on (default, as Open vSwitch) floods them to the
    /// domain; off sends them to multicast-router ports only.
    #[arg(long = "mcast-flood-unregistered", value_name = "on|off")]
    pub mcast_flood_unregistered: Option<OnOff>,

    /// Groups the snooping table holds in all (default 2048, as Open vSwitch). Reports
    /// for more are forwarded but not learned (counted `refused_full`).
    #[arg(long, value_name = "N")]
    pub mcast_table_size: Option<usize>,

    /// Seconds a group membership or a multicast-router port lives without a report or
    /// query refreshing it (default 300).
    #[arg(long, value_name = "SECS")]
    pub mcast_aging: Option<u64>,

    /// A static group membership, never aged: `PORT=GROUP` (e.g. `vm1=239.1.1.1`), for
    /// receivers that do not send IGMP/MLD reports. Repeatable.
    #[arg(long = "mcast-static", value_name = "PORT=GROUP")]
    pub mcast_static: Vec<String>,

    /// The switch's own IGMP/MLD querier: on, or off (default, as Open vSwitch and the
    /// Linux bridge). On a segment without a multicast router nobody asks receivers to
    /// report again, so their memberships age out while they still listen; with the
    /// querier, every --mcast-query-interval the switch sends an IGMPv3 and an MLDv2
    /// general query out of each VLAN and VNI domain's ports where no other querier is
    /// heard (from 0.0.0.0 and fe80::76:73ff:fe00:1, MAC 02:76:73:00:00:01).
    #[arg(long = "mcast-querier", value_name = "on|off")]
    pub mcast_querier: Option<OnOff>,

    /// The querier only in these domains (implies --mcast-querier on), comma-separated:
    /// `untagged`, `vlan:N`, `vni:N`; e.g. `vlan:10,vni:5001`.
    #[arg(long, value_name = "DOMAIN[,DOMAIN...]")]
    pub mcast_querier_domains: Option<String>,

    /// Seconds between the querier's rounds (default 125, RFC 3376's Query Interval).
    /// Keep it below --mcast-aging, or memberships age between two rounds.
    #[arg(long, value_name = "SECS")]
    pub mcast_query_interval: Option<u64>,
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}
