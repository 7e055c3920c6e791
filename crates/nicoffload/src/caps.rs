//! What [`probe`](crate::probe) reports about one network interface.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Kernel feature names (`netdev_features_strings[]`, the `ETH_SS_FEATURES`
/// string set) of the offloads a switch cares about. Look them up with
/// [`NicCapabilities::feature`].
pub mod names {
    /// IPv4-only TCP/UDP tx checksum (`NETIF_F_IP_CSUM`).
    pub const TX_CHECKSUM_IPV4: &str = "tx-checksum-ipv4";
    /// Protocol-generic tx checksum (`NETIF_F_HW_CSUM`).
    pub const TX_CHECKSUM_IP_GENERIC: &str = "tx-checksum-ip-generic";
    /// IPv6-only TCP/UDP tx checksum (`NETIF_F_IPV6_CSUM`).
    pub const TX_CHECKSUM_IPV6: &str = "tx-checksum-ipv6";
    /// Rx checksum validation (`NETIF_F_RXCSUM`); `ethtool -k` prints `rx-checksumming`.
    pub const RX_CHECKSUM: &str = "rx-checksum";
    /// Scatter-gather tx (`NETIF_F_SG`).
    pub const TX_SCATTER_GATHER: &str = "tx-scatter-gather";
    /// TCPv4 segmentation (`NETIF_F_TSO`).
    pub const TX_TCP_SEGMENTATION: &str = "tx-tcp-segmentation";
    /// TCPv6 segmentation (`NETIF_F_TSO6`).
    pub const TX_TCP6_SEGMENTATION: &str = "tx-tcp6-segmentation";
    /// Segmentation of UDP-tunnelled (VXLAN, Geneve) TCP (`NETIF_F_GSO_UDP_TUNNEL`).
    pub const TX_UDP_TNL_SEGMENTATION: &str = "tx-udp_tnl-segmentation";
    /// The same with the outer UDP checksum filled in (`NETIF_F_GSO_UDP_TUNNEL_CSUM`).
    pub const TX_UDP_TNL_CSUM_SEGMENTATION: &str = "tx-udp_tnl-csum-segmentation";
    /// Software GSO (`NETIF_F_GSO`); `ethtool -k` prints `generic-segmentation-offload`.
    pub const TX_GENERIC_SEGMENTATION: &str = "tx-generic-segmentation";
    /// Software GRO (`NETIF_F_GRO`); `ethtool -k` prints `generic-receive-offload`.
    pub const RX_GRO: &str = "rx-gro";
    /// Hardware GRO (`NETIF_F_GRO_HW`).
    pub const RX_GRO_HW: &str = "rx-gro-hw";
    /// LRO (`NETIF_F_LRO`); `ethtool -k` prints `large-receive-offload`.
    pub const RX_LRO: &str = "rx-lro";
    /// Rx hash delivered with packets (`NETIF_F_RXHASH`); `ethtool -k` prints `receive-hashing`.
    pub const RX_HASHING: &str = "rx-hashing";
    /// n-tuple rx filters (`NETIF_F_NTUPLE`); `ethtool -k` prints `ntuple-filters`.
    pub const RX_NTUPLE_FILTER: &str = "rx-ntuple-filter";
    /// UDP tunnel port offload (`NETIF_F_RX_UDP_TUNNEL_PORT`).
    pub const RX_UDP_TUNNEL_PORT_OFFLOAD: &str = "rx-udp_tunnel-port-offload";
    /// Rx VLAN tag stripping (`NETIF_F_HW_VLAN_CTAG_RX`); `ethtool -k` prints `rx-vlan-offload`.
    pub const RX_VLAN_HW_PARSE: &str = "rx-vlan-hw-parse";
    /// Tx VLAN tag insertion (`NETIF_F_HW_VLAN_CTAG_TX`); `ethtool -k` prints `tx-vlan-offload`.
    pub const TX_VLAN_HW_INSERT: &str = "tx-vlan-hw-insert";
    /// Rx VLAN filtering (`NETIF_F_HW_VLAN_CTAG_FILTER`).
    pub const RX_VLAN_FILTER: &str = "rx-vlan-filter";
    /// 802.1ad tag stripping (`NETIF_F_HW_VLAN_STAG_RX`).
    pub const RX_VLAN_STAG_HW_PARSE: &str = "rx-vlan-stag-hw-parse";
    /// 802.1ad tag insertion (`NETIF_F_HW_VLAN_STAG_TX`).
    pub const TX_VLAN_STAG_HW_INSERT: &str = "tx-vlan-stag-hw-insert";
}

/// One offload feature's state, as `ethtool -k` shows it.
///
/// Source: ethtool netlink `ETHTOOL_MSG_FEATURES_GET` (bitsets
/// `ETHTOOL_A_FEATURES_HW`, `_WANTED`, `_ACTIVE`, `_NOCHANGE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureState {
    /// The kernel's name of the feature bit (`netdev_features_strings[]`),
    /// e.g. `rx-hashing` where `ethtool -k` prints `receive-hashing`.
    pub kernel_name: String,
    /// On now (`ETHTOOL_A_FEATURES_ACTIVE`). `ethtool -k`: `on` / `off`.
    pub active: bool,
    /// Cannot be changed: not in `ETHTOOL_A_FEATURES_HW`, or in
    /// `ETHTOOL_A_FEATURES_NOCHANGE`. `ethtool -k`: `[fixed]`.
    pub fixed: bool,
    /// Requested by the user (`ETHTOOL_A_FEATURES_WANTED`); differs from
    /// `active` when the driver refused. `ethtool -k`: `[requested on|off]`.
    pub requested: bool,
}

impl FeatureState {
    /// `on`, `off`, `on [fixed]`, `off [fixed]`, or `off [requested on]`, as `ethtool -k` prints it.
    pub fn describe(&self) -> String {
        let state = if self.active { "on" } else { "off" };
        if self.fixed {
            format!("{state} [fixed]")
        } else if self.requested != self.active {
            let req = if self.requested { "on" } else { "off" };
            format!("{state} [requested {req}]")
        } else {
            state.to_owned()
        }
    }

    /// On, or off but changeable (`ethtool -K IFACE NAME on` may turn it on).
    pub fn available(&self) -> bool {
        self.active || !self.fixed
    }
}

/// Channel (queue) counts. Each field is `None` when the driver does not
/// report it (`ethtool -l` prints `n/a`).
///
/// Source: ethtool netlink `ETHTOOL_MSG_CHANNELS_GET` (`ETHTOOL_A_CHANNELS_*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channels {
    /// Maximum rx-only channels.
    pub rx_max: Option<u32>,
    /// Maximum tx-only channels.
    pub tx_max: Option<u32>,
    /// Maximum other (link interrupt, ...) channels.
    pub other_max: Option<u32>,
    /// Maximum combined rx+tx channels.
    pub combined_max: Option<u32>,
    /// Current rx-only channels.
    pub rx: Option<u32>,
    /// Current tx-only channels.
    pub tx: Option<u32>,
    /// Current other channels.
    pub other: Option<u32>,
    /// Current combined channels.
    pub combined: Option<u32>,
}

impl Channels {
    /// Rx queues a receiver can bind to: combined plus rx-only channels.
    pub fn rx_queues(&self) -> u32 {
        self.combined.unwrap_or(0) + self.rx.unwrap_or(0)
    }
}

/// Ring sizes in descriptors. Each field is `None` when the driver does not
/// report it (`ethtool -g` prints `n/a`).
///
/// Source: ethtool netlink `ETHTOOL_MSG_RINGS_GET` (`ETHTOOL_A_RINGS_*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rings {
    /// Maximum rx ring size.
    pub rx_max: Option<u32>,
    /// Maximum rx mini ring size.
    pub rx_mini_max: Option<u32>,
    /// Maximum rx jumbo ring size.
    pub rx_jumbo_max: Option<u32>,
    /// Maximum tx ring size.
    pub tx_max: Option<u32>,
    /// Current rx ring size.
    pub rx: Option<u32>,
    /// Current rx mini ring size.
    pub rx_mini: Option<u32>,
    /// Current rx jumbo ring size.
    pub rx_jumbo: Option<u32>,
    /// Current tx ring size.
    pub tx: Option<u32>,
}

/// Receive-side scaling configuration of the default context.
///
/// Source: ethtool netlink `ETHTOOL_MSG_RSS_GET` (`ETHTOOL_A_RSS_HFUNC`,
/// `_INDIR`, `_HKEY`), the data `ethtool -x` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rss {
    /// Hash function bitmap (`ETH_RSS_HASH_TOP` = 1 Toeplitz, 2 XOR, 4 CRC32); `None` if not reported.
    pub hfunc: Option<u32>,
    /// Indirection table entries (rx queue per hash bucket); its length is the table size.
    pub indirection_table: Vec<u32>,
    /// The hash key, bytes.
    pub hash_key: Vec<u8>,
}

impl Rss {
    /// Number of entries in the indirection table.
    pub fn indirection_table_size(&self) -> usize {
        self.indirection_table.len()
    }
}

/// Which header fields a flow type's RSS hash covers (`RXH_*` bits of
/// `<linux/ethtool.h>`).
///
/// Source: `SIOCETHTOOL` ioctl `ETHTOOL_GRXFH`, what `ethtool -n IFACE
/// rx-flow-hash udp4` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxHashFields {
    /// The raw `RXH_*` bitmap; 0 means the flow type is not hashed.
    pub bits: u64,
}

impl RxHashFields {
    /// `RXH_L4_B_0_1`: the hash covers the L4 source port.
    pub const L4_SRC_PORT: u64 = 1 << 6;
    /// `RXH_L4_B_2_3`: the hash covers the L4 destination port.
    pub const L4_DST_PORT: u64 = 1 << 7;

    /// Whether the hash covers the L4 source port, which carries a Geneve
    /// packet's inner flow entropy.
    pub fn covers_l4_src_port(&self) -> bool {
        self.bits & Self::L4_SRC_PORT != 0
    }

    /// The fields in `ethtool -N ... rx-flow-hash` letters (`m` L2 dst, `v`
    /// VLAN, `t` L3 proto, `s` IP src, `d` IP dst, `f` L4 bytes 0-1, `n` L4
    /// bytes 2-3, `r` discard); empty when none.
    pub fn letters(&self) -> String {
        [
            (1 << 1, 'm'),
            (1 << 2, 'v'),
            (1 << 3, 't'),
            (1 << 4, 's'),
            (1 << 5, 'd'),
            (1 << 6, 'f'),
            (1 << 7, 'n'),
            (1 << 31, 'r'),
        ]
        .into_iter()
        .filter_map(|(bit, c)| (self.bits & bit != 0).then_some(c))
        .collect()
    }
}

/// XDP and AF_XDP capabilities.
///
/// Source: generic netlink family `netdev`, `NETDEV_CMD_DEV_GET`
/// (`<linux/netdev.h>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpFeatures {
    /// The raw `NETDEV_A_DEV_XDP_FEATURES` bitmap (`enum netdev_xdp_act`).
    pub raw: u64,
    /// `NETDEV_XDP_ACT_BASIC`: XDP_ABORTED, DROP, PASS, TX in the driver (native XDP).
    pub basic: bool,
    /// `NETDEV_XDP_ACT_REDIRECT`: XDP_REDIRECT in the driver (needed to
    /// redirect into an AF_XDP socket in native mode).
    pub redirect: bool,
    /// `NETDEV_XDP_ACT_NDO_XMIT`: the driver accepts redirected frames for tx.
    pub ndo_xmit: bool,
    /// `NETDEV_XDP_ACT_XSK_ZEROCOPY`: AF_XDP zero-copy.
    pub xsk_zerocopy: bool,
    /// `NETDEV_XDP_ACT_HW_OFFLOAD`: the program can run on the NIC.
    pub hw_offload: bool,
    /// `NETDEV_XDP_ACT_RX_SG`: multi-buffer (non-linear) frames on rx.
    pub rx_sg: bool,
    /// `NETDEV_XDP_ACT_NDO_XMIT_SG`: multi-buffer frames through ndo_xdp_xmit.
    pub ndo_xmit_sg: bool,
    /// `NETDEV_A_DEV_XDP_ZC_MAX_SEGS`: buffers per frame in zero-copy mode
    /// (1 = no multi-buffer); `None` if not reported.
    pub zc_max_segs: Option<u32>,
    /// `NETDEV_A_DEV_XDP_RX_METADATA_FEATURES` (`enum
    /// netdev_xdp_rx_metadata`: 1 timestamp, 2 hash, 4 VLAN tag).
    pub rx_metadata: Option<u64>,
    /// `NETDEV_A_DEV_XSK_FEATURES` (`enum netdev_xsk_flags`: 1 tx
    /// timestamp, 2 tx checksum, 4 tx launch time); `None` on kernels
    /// before 6.8 that do not report it.
    pub xsk_features: Option<u64>,
}

/// `NETDEV_XSK_FLAGS_TX_CHECKSUM`.
pub(crate) const XSK_FLAGS_TX_CHECKSUM: u64 = 2;
/// `NETDEV_XDP_RX_METADATA_HASH`.
pub(crate) const XDP_RX_METADATA_HASH: u64 = 2;

impl XdpFeatures {
    /// Decodes the `NETDEV_A_DEV_XDP_FEATURES` bitmap.
    pub fn from_bits(raw: u64) -> Self {
        Self {
            raw,
            basic: raw & 1 != 0,
            redirect: raw & 2 != 0,
            ndo_xmit: raw & 4 != 0,
            xsk_zerocopy: raw & 8 != 0,
            hw_offload: raw & 16 != 0,
            rx_sg: raw & 32 != 0,
            ndo_xmit_sg: raw & 64 != 0,
            ..Self::default()
        }
    }

    /// The set flags by their `netdev.yaml` names (`basic`, `redirect`,
    /// `ndo-xmit`, `xsk-zerocopy`, `hw-offload`, `rx-sg`, `ndo-xmit-sg`).
    pub fn flag_names(&self) -> Vec<&'static str> {
        [
            (self.basic, "basic"),
            (self.redirect, "redirect"),
            (self.ndo_xmit, "ndo-xmit"),
            (self.xsk_zerocopy, "xsk-zerocopy"),
            (self.hw_offload, "hw-offload"),
            (self.rx_sg, "rx-sg"),
            (self.ndo_xmit_sg, "ndo-xmit-sg"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

/// Everything [`probe`](crate::probe) learned about one interface.
///
/// `Option` fields are `None` when the kernel or driver does not report the
/// value (the request fails with `EOPNOTSUPP`, or the attribute is absent);
/// each field's doc names its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicCapabilities {
    /// Interface name, as given to `probe`.
    pub ifname: String,
    /// Interface index (rtnetlink `RTM_GETLINK`, `ifinfomsg.ifi_index`).
    pub ifindex: u32,
    /// Driver name (`SIOCETHTOOL` `ETHTOOL_GDRVINFO`, what `ethtool -i` prints).
    pub driver: Option<String>,
    /// Link kind of a virtual device, e.g. `veth`, `tun`, `dummy`
    /// (rtnetlink `IFLA_LINKINFO` / `IFLA_INFO_KIND`).
    pub link_kind: Option<String>,
    /// MTU, bytes (rtnetlink `IFLA_MTU`).
    pub mtu: u32,
    /// Largest MTU the driver accepts, bytes (rtnetlink `IFLA_MAX_MTU`);
    /// `None` when the driver sets no bound (0, e.g. `lo`) or the kernel does not say.
    pub max_mtu: Option<u32>,
    /// Link speed, Mbit/s; `None` when unknown (`SPEED_UNKNOWN`) or not
    /// reported (ethtool netlink `ETHTOOL_MSG_LINKMODES_GET`,
    /// `ETHTOOL_A_LINKMODES_SPEED`).
    pub speed_mbps: Option<u32>,
    /// NUMA node of the device (sysfs `/sys/class/net/IFACE/device/numa_node`);
    /// `None` for virtual devices and when the platform reports -1.
    pub numa_node: Option<u32>,
    /// Tx queues the kernel allocated (rtnetlink `IFLA_NUM_TX_QUEUES`).
    pub num_tx_queues: Option<u32>,
    /// Rx queues the kernel allocated (rtnetlink `IFLA_NUM_RX_QUEUES`).
    pub num_rx_queues: Option<u32>,
    /// Channel counts (ethtool netlink `ETHTOOL_MSG_CHANNELS_GET`).
    pub channels: Option<Channels>,
    /// Ring sizes (ethtool netlink `ETHTOOL_MSG_RINGS_GET`).
    pub rings: Option<Rings>,
    /// RSS key and indirection table (ethtool netlink `ETHTOOL_MSG_RSS_GET`).
    pub rss: Option<Rss>,
    /// Fields the RSS hash covers for UDP over IPv4 (`SIOCETHTOOL`
    /// `ETHTOOL_GRXFH`, `UDP_V4_FLOW`); `None` if the driver does not say.
    pub udp4_rx_flow_hash: Option<RxHashFields>,
    /// The same for UDP over IPv6 (`UDP_V6_FLOW`).
    pub udp6_rx_flow_hash: Option<RxHashFields>,
    /// Every offload feature, keyed by the name `ethtool -k` prints for it
    /// (the legacy name, e.g. `receive-hashing`, where `ethtool` uses one for
    /// a single kernel bit; otherwise the kernel name, e.g.
    /// `tx-udp_tnl-segmentation`). Source: ethtool netlink
    /// `ETHTOOL_MSG_FEATURES_GET` and `ETHTOOL_MSG_STRSET_GET`
    /// (`ETH_SS_FEATURES`).
    pub features: BTreeMap<String, FeatureState>,
    /// XDP features (netdev generic netlink `NETDEV_CMD_DEV_GET`); `None`
    /// when the kernel has no `netdev` family (before 6.3).
    pub xdp: Option<XdpFeatures>,
}

impl NicCapabilities {
    /// The state of the feature whose kernel name is `kernel_name` (see
    /// [`names`]); `None` if this kernel has no such feature bit.
    pub fn feature(&self, kernel_name: &str) -> Option<&FeatureState> {
        self.features
            .values()
            .find(|f| f.kernel_name == kernel_name)
    }

    /// Whether the feature `kernel_name` is on now.
    pub fn feature_active(&self, kernel_name: &str) -> bool {
        self.feature(kernel_name).is_some_and(|f| f.active)
    }
}

fn opt<T: fmt::Display>(v: &Option<T>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "n/a".to_owned(),
    }
}

impl fmt::Display for NicCapabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "interface {} (ifindex {})", self.ifname, self.ifindex)?;
        writeln!(f, "  driver:      {}", opt(&self.driver))?;
        writeln!(f, "  link kind:   {}", opt(&self.link_kind))?;
        writeln!(
            f,
            "  mtu:         {} (max {})",
            self.mtu,
            opt(&self.max_mtu)
        )?;
        writeln!(
            f,
            "  speed:       {}",
            self.speed_mbps
                .map_or_else(|| "unknown".to_owned(), |s| format!("{s} Mb/s"))
        )?;
        writeln!(f, "  numa node:   {}", opt(&self.numa_node))?;
        writeln!(
            f,
            "  queues:      rx {} tx {} (kernel)",
            opt(&self.num_rx_queues),
            opt(&self.num_tx_queues)
        )?;
        match &self.channels {
            Some(c) => {
                let parts: Vec<String> = [
                    ("rx", c.rx, c.rx_max),
                    ("tx", c.tx, c.tx_max),
                    ("other", c.other, c.other_max),
                    ("combined", c.combined, c.combined_max),
                ]
                .into_iter()
                .filter(|(_, cur, max)| cur.is_some() || max.is_some())
                .map(|(name, cur, max)| format!("{name} {}/{}", opt(&cur), opt(&max)))
                .collect();
                writeln!(f, "  channels:    {} (current/max)", parts.join(" "))?;
            }
            None => writeln!(f, "  channels:    not reported")?,
        }
        match &self.rings {
            Some(r) => writeln!(
                f,
                "  rings:       rx {}/{} tx {}/{} (current/max)",
                opt(&r.rx),
                opt(&r.rx_max),
                opt(&r.tx),
                opt(&r.tx_max)
            )?,
            None => writeln!(f, "  rings:       not reported")?,
        }
        match &self.rss {
            Some(r) => writeln!(
                f,
                "  rss:         hfunc {} key {} bytes, indirection table {} entries",
                r.hfunc
                    .map_or_else(|| "n/a".to_owned(), |h| format!("{h:#x}")),
                r.hash_key.len(),
                r.indirection_table_size()
            )?,
            None => writeln!(f, "  rss:         not reported")?,
        }
        let hash = |h: &Option<RxHashFields>| match h {
            Some(h) if h.bits == 0 => "none".to_owned(),
            Some(h) => h.letters(),
            None => "n/a".to_owned(),
        };
        writeln!(
            f,
            "  rx-flow-hash: udp4 {} udp6 {} (ethtool -N letters)",
            hash(&self.udp4_rx_flow_hash),
            hash(&self.udp6_rx_flow_hash)
        )?;
        match &self.xdp {
            Some(x) => {
                let flags = x.flag_names();
                writeln!(
                    f,
                    "  xdp:         {} (zc max segs {})",
                    if flags.is_empty() {
                        "none".to_owned()
                    } else {
                        flags.join(" ")
                    },
                    opt(&x.zc_max_segs)
                )?;
            }
            None => writeln!(f, "  xdp:         not reported (no netdev netlink family)")?,
        }
        writeln!(f, "  offloads:")?;
        for name in [
            names::TX_CHECKSUM_IPV4,
            names::TX_CHECKSUM_IPV6,
            names::TX_CHECKSUM_IP_GENERIC,
            names::RX_CHECKSUM,
            names::TX_SCATTER_GATHER,
            names::TX_TCP_SEGMENTATION,
            names::TX_TCP6_SEGMENTATION,
            names::TX_UDP_TNL_SEGMENTATION,
            names::TX_UDP_TNL_CSUM_SEGMENTATION,
            names::TX_GENERIC_SEGMENTATION,
            names::RX_GRO,
            names::RX_GRO_HW,
            names::RX_LRO,
            names::RX_HASHING,
            names::RX_NTUPLE_FILTER,
            names::RX_UDP_TUNNEL_PORT_OFFLOAD,
            names::RX_VLAN_HW_PARSE,
            names::TX_VLAN_HW_INSERT,
            names::RX_VLAN_FILTER,
        ] {
            if let Some((label, st)) = self.features.iter().find(|(_, s)| s.kernel_name == name) {
                writeln!(f, "    {label:<30} {}", st.describe())?;
            }
        }
        Ok(())
    }
}
