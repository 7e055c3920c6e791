//! What a Linux NIC can offload, and what a switch should therefore do in
//! hardware and what in software.
//!
//! [`probe`] asks the kernel about one interface and returns
//! [`NicCapabilities`]; [`OffloadPlan::new`] combines those with what the
//! switch needs ([`OffloadNeeds`]) into a decision per job (tunnel TSO,
//! checksums, LRO/GRO, RSS on inner headers, AF_XDP mode), each with its
//! reason. Both types implement `Display` and serde `Serialize`.
//!
//! # Where each value comes from
//!
//! | field | kernel interface |
//! |---|---|
//! | `ifindex`, `mtu`, `max_mtu`, `link_kind`, `num_{rx,tx}_queues` | rtnetlink `RTM_GETLINK` (`IFLA_MTU`, `IFLA_MAX_MTU`, `IFLA_INFO_KIND`, `IFLA_NUM_*_QUEUES`), via `netlink-packet-route` |
//! | `driver` | `SIOCETHTOOL` ioctl, `ETHTOOL_GDRVINFO` (ethtool netlink has no driver info) |
//! | `speed_mbps` | ethtool netlink `ETHTOOL_MSG_LINKMODES_GET`, via the `ethtool` crate's message |
//! | `numa_node` | sysfs `/sys/class/net/IFACE/device/numa_node` |
//! | `channels` | ethtool netlink `ETHTOOL_MSG_CHANNELS_GET`, via the `ethtool` crate's message |
//! | `rings` | ethtool netlink `ETHTOOL_MSG_RINGS_GET`, via the `ethtool` crate's message |
//! | `rss` | ethtool netlink `ETHTOOL_MSG_RSS_GET`, hand-encoded (not in the `ethtool` crate) |
//! | `udp4_rx_flow_hash`, `udp6_rx_flow_hash` | `SIOCETHTOOL` ioctl, `ETHTOOL_GRXFH` (netlink carries it only from Linux 6.16) |
//! | `features` | ethtool netlink `ETHTOOL_MSG_FEATURES_GET` (compact bitsets) named by `ETHTOOL_MSG_STRSET_GET` (`ETH_SS_FEATURES`), hand-encoded: the `ethtool` crate 0.3 drops feature bit 0 (`tx-scatter-gather`) and lists only bits that are set |
//! | `xdp` | generic netlink family `netdev`, `NETDEV_CMD_DEV_GET`, hand-encoded (no rust-netlink crate for it) |
//!
//! Everything is synchronous: blocking `netlink-sys` sockets, no async
//! runtime. The probe runs in the caller's network namespace (the thread's,
//! for netlink and the ioctl; the mount's, for sysfs).
//!
//! # Example
//!
//! ```no_run
//! use nicoffload::{probe, OffloadNeeds, OffloadPlan};
//!
//! let caps = probe("eth0")?;
//! println!("{caps}");
//! let plan = OffloadPlan::new(&caps, &OffloadNeeds::default());
//! println!("{plan}");
//! # Ok::<(), nicoffload::Error>(())
//! ```
#![deny(missing_docs)]
#![cfg(target_os = "linux")]

mod caps;
mod error;
mod ioctl;
pub mod link;
mod netlink;
mod plan;
mod probe;

pub use caps::{names, Channels, FeatureState, NicCapabilities, Rings, Rss, XdpFeatures};
pub use error::Error;
pub use plan::{
    AfXdpMode, AfXdpRequest, Datapath, Decision, Job, OffloadNeeds, OffloadPlan, Placement,
};
pub use probe::probe;
