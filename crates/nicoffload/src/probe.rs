//! [`probe`]: ask the kernel what one interface can do.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::PathBuf;

use ethtool::{
    EthtoolAttr, EthtoolChannelAttr, EthtoolCmd, EthtoolHeader, EthtoolLinkModeAttr,
    EthtoolMessage, EthtoolRingAttr,
};
use netlink_packet_route::link::{LinkAttribute, LinkInfo, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;

use crate::caps::{Channels, FeatureState, NicCapabilities, Rings, Rss, RxHashFields, XdpFeatures};
use crate::netlink::{attr, EthtoolFamily, NetdevFamily, NlError, NlSocket, RawGenl};
use crate::{ioctl, Error};

// <linux/ethtool_netlink.h>: message ids (userspace to kernel).
const ETHTOOL_MSG_STRSET_GET: u8 = 1;
const ETHTOOL_MSG_FEATURES_GET: u8 = 11;
const ETHTOOL_MSG_RSS_GET: u8 = 38;
// Every ethtool request's first attribute is its header nest.
const ETHTOOL_A_X_HEADER: u16 = 1;
const ETHTOOL_A_HEADER_DEV_INDEX: u16 = 1;
const ETHTOOL_A_HEADER_FLAGS: u16 = 3;
const ETHTOOL_FLAG_COMPACT_BITSETS: u32 = 1;
// Bitsets.
const ETHTOOL_A_BITSET_NOMASK: u16 = 1;
const ETHTOOL_A_BITSET_SIZE: u16 = 2;
const ETHTOOL_A_BITSET_VALUE: u16 = 4;
// FEATURES_GET reply.
const ETHTOOL_A_FEATURES_HW: u16 = 2;
const ETHTOOL_A_FEATURES_WANTED: u16 = 3;
const ETHTOOL_A_FEATURES_ACTIVE: u16 = 4;
const ETHTOOL_A_FEATURES_NOCHANGE: u16 = 5;
// STRSET_GET.
const ETHTOOL_A_STRSET_STRINGSETS: u16 = 2;
const ETHTOOL_A_STRINGSETS_STRINGSET: u16 = 1;
const ETHTOOL_A_STRINGSET_ID: u16 = 1;
const ETHTOOL_A_STRINGSET_STRINGS: u16 = 3;
const ETHTOOL_A_STRINGS_STRING: u16 = 1;
const ETHTOOL_A_STRING_INDEX: u16 = 1;
const ETHTOOL_A_STRING_VALUE: u16 = 2;
/// `ETH_SS_FEATURES` (`<linux/ethtool.h>`, `enum ethtool_stringset`).
const ETH_SS_FEATURES: u32 = 4;
// RSS_GET reply.
const ETHTOOL_A_RSS_HFUNC: u16 = 3;
const ETHTOOL_A_RSS_INDIR: u16 = 4;
const ETHTOOL_A_RSS_HKEY: u16 = 5;
/// `SPEED_UNKNOWN` (`<linux/ethtool.h>`).
const SPEED_UNKNOWN: u32 = u32::MAX;

// <linux/netdev.h>.
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NETDEV_A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;
const NETDEV_A_DEV_XDP_RX_METADATA_FEATURES: u16 = 5;
const NETDEV_A_DEV_XSK_FEATURES: u16 = 6;

/// The kernel-internal `ENOTSUPP`, which some drivers leak to user space.
const ENOTSUPP: i32 = 524;

/// `ethtool`'s legacy feature labels (ethtool `off_flag_def[]`): `ethtool
/// -k` prints the label instead of the kernel name when the pattern matches
/// exactly one kernel feature bit. A pattern has at most one `*`.
const LEGACY_LABELS: &[(&str, &str)] = &[
    ("rx-checksumming", "rx-checksum"),
    ("tx-checksumming", "tx-checksum-*"),
    ("scatter-gather", "tx-scatter-gather*"),
    ("tcp-segmentation-offload", "tx-tcp*-segmentation"),
    ("udp-fragmentation-offload", "tx-udp-fragmentation"),
    ("generic-segmentation-offload", "tx-generic-segmentation"),
    ("generic-receive-offload", "rx-gro"),
    ("large-receive-offload", "rx-lro"),
    ("rx-vlan-offload", "rx-vlan-hw-parse"),
    ("tx-vlan-offload", "tx-vlan-hw-insert"),
    ("ntuple-filters", "rx-ntuple-filter"),
    ("receive-hashing", "rx-hashing"),
];

/// Reads what the interface `ifname` (in the caller's network namespace)
/// can do: driver, MTU, speed, NUMA node, channels, rings, RSS, every
/// offload feature with its state, and the XDP features.
///
/// Needs no privilege on current kernels (every request is an ethtool or
/// netdev "get"); a kernel that refuses one gives
/// [`Error::PermissionDenied`]. A value the driver does not report is
/// `None`, never an error.
///
/// # Errors
///
/// [`Error::InvalidInterfaceName`] for a name Linux cannot have,
/// [`Error::NoSuchInterface`] when there is no such interface in this
/// network namespace, [`Error::PermissionDenied`], [`Error::OpenSocket`],
/// [`Error::ResolveFamily`] when the kernel has no `ethtool` netlink family,
/// and [`Error::Query`] / [`Error::ReadSysfs`] for other failures.
pub fn probe(ifname: &str) -> Result<NicCapabilities, Error> {
    validate_ifname(ifname)?;
    let mut route = NlSocket::route().map_err(|source| Error::OpenSocket {
        protocol: "NETLINK_ROUTE",
        source,
    })?;
    let link = get_link(&mut route, ifname)?;

    let mut genl = NlSocket::generic().map_err(|source| Error::OpenSocket {
        protocol: "NETLINK_GENERIC",
        source,
    })?;
    let ethtool_id = genl
        .resolve_family("ethtool")
        .map_err(|e| Error::ResolveFamily {
            family: "ethtool",
            source: e.into_io(),
        })?;
    let q = Querier {
        ifname,
        ifindex: link.ifindex,
    };

    let features = q.features(&mut genl, ethtool_id)?;
    let channels = q.channels(&mut genl, ethtool_id)?;
    let rings = q.rings(&mut genl, ethtool_id)?;
    let speed_mbps = q.speed(&mut genl, ethtool_id)?.flatten();
    let rss = q.rss(&mut genl, ethtool_id)?;
    let xdp = q.xdp(&mut genl)?;
    let driver = match ioctl::driver_name(ifname) {
        Ok(d) => Some(d),
        Err(e) if is_unsupported(e.raw_os_error()) => None,
        Err(e) => return Err(q.classify("SIOCETHTOOL ETHTOOL_GDRVINFO", e)),
    };
    let numa_node = numa_node(ifname)?;
    let udp4_rx_flow_hash = q.rx_flow_hash(ioctl::UDP_V4_FLOW)?;
    let udp6_rx_flow_hash = q.rx_flow_hash(ioctl::UDP_V6_FLOW)?;

    Ok(NicCapabilities {
        ifname: ifname.to_owned(),
        ifindex: link.ifindex,
        driver,
        link_kind: link.kind,
        mtu: link.mtu,
        max_mtu: link.max_mtu,
        speed_mbps,
        numa_node,
        num_tx_queues: link.num_tx_queues,
        num_rx_queues: link.num_rx_queues,
        channels,
        rings,
        rss,
        udp4_rx_flow_hash,
        udp6_rx_flow_hash,
        features,
        xdp,
    })
}

fn validate_ifname(ifname: &str) -> Result<(), Error> {
    let reason = if ifname.is_empty() {
        "empty"
    } else if ifname.len() >= libc::IFNAMSIZ {
        "longer than 15 bytes (IFNAMSIZ - 1)"
    } else if ifname
        .bytes()
        .any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace())
    {
        "contains '/', NUL or whitespace"
    } else if ifname == "." || ifname == ".." {
        "'.' and '..' are not interface names"
    } else {
        return Ok(());
    };
    Err(Error::InvalidInterfaceName {
        ifname: ifname.to_owned(),
        reason,
    })
}

fn is_unsupported(errno: Option<i32>) -> bool {
    matches!(errno, Some(libc::EOPNOTSUPP) | Some(ENOTSUPP))
}

struct Link {
    ifindex: u32,
    mtu: u32,
    max_mtu: Option<u32>,
    kind: Option<String>,
    num_tx_queues: Option<u32>,
    num_rx_queues: Option<u32>,
}

/// rtnetlink `RTM_GETLINK` by `IFLA_IFNAME`.
fn get_link(route: &mut NlSocket, ifname: &str) -> Result<Link, Error> {
    let mut msg = LinkMessage::default();
    msg.attributes
        .push(LinkAttribute::IfName(ifname.to_owned()));
    let req = RouteNetlinkMessage::GetLink(msg);
    let replies = route
        .request(libc::RTM_GETLINK, req)
        .map_err(|e| match e.errno() {
            Some(libc::ENODEV) => Error::NoSuchInterface {
                ifname: ifname.to_owned(),
            },
            _ => Querier { ifname, ifindex: 0 }.classify("rtnetlink RTM_GETLINK", e.into_io()),
        })?;
    let link = replies
        .into_iter()
        .find_map(|r| match r {
            RouteNetlinkMessage::NewLink(l) => Some(l),
            _ => None,
        })
        .ok_or_else(|| Error::NoSuchInterface {
            ifname: ifname.to_owned(),
        })?;
    let mut out = Link {
        ifindex: link.header.index,
        mtu: 0,
        max_mtu: None,
        kind: None,
        num_tx_queues: None,
        num_rx_queues: None,
    };
    for a in link.attributes {
        match a {
            LinkAttribute::Mtu(m) => out.mtu = m,
            LinkAttribute::MaxMtu(m) => out.max_mtu = Some(m).filter(|&m| m != 0),
            LinkAttribute::NumTxQueues(n) => out.num_tx_queues = Some(n),
            LinkAttribute::NumRxQueues(n) => out.num_rx_queues = Some(n),
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    if let LinkInfo::Kind(k) = i {
                        out.kind = Some(k.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Sysfs `device/numa_node`; absent (virtual device) or -1 gives `None`.
fn numa_node(ifname: &str) -> Result<Option<u32>, Error> {
    let path = PathBuf::from(format!("/sys/class/net/{ifname}/device/numa_node"));
    match fs::read_to_string(&path) {
        Ok(s) => {
            let v: i64 = s.trim().parse().map_err(|e| Error::ReadSysfs {
                path: path.clone(),
                source: io::Error::new(io::ErrorKind::InvalidData, e),
            })?;
            Ok(u32::try_from(v).ok())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::ReadSysfs { path, source }),
    }
}

struct Querier<'a> {
    ifname: &'a str,
    ifindex: u32,
}

impl Querier<'_> {
    /// Gives a failed request its context.
    fn classify(&self, what: &'static str, source: io::Error) -> Error {
        let ifname = self.ifname.to_owned();
        match source.raw_os_error() {
            Some(libc::ENODEV) => Error::NoSuchInterface { ifname },
            Some(libc::EPERM) | Some(libc::EACCES) => Error::PermissionDenied {
                ifname,
                what,
                source,
            },
            _ => Error::Query {
                ifname,
                what,
                source,
            },
        }
    }

    /// `SIOCETHTOOL` `ETHTOOL_GRXFH` for `flow_type`; `None` when the driver
    /// does not support it (`EOPNOTSUPP`) or not for this flow type (`EINVAL`).
    fn rx_flow_hash(&self, flow_type: u32) -> Result<Option<RxHashFields>, Error> {
        match ioctl::rx_flow_hash(self.ifname, flow_type) {
            Ok(bits) => Ok(Some(RxHashFields { bits })),
            Err(e)
                if is_unsupported(e.raw_os_error()) || e.raw_os_error() == Some(libc::EINVAL) =>
            {
                Ok(None)
            }
            Err(e) => Err(self.classify("SIOCETHTOOL ETHTOOL_GRXFH", e)),
        }
    }

    /// `Ok(None)` for "not supported by this device", the value otherwise.
    fn optional<T>(&self, what: &'static str, r: Result<T, NlError>) -> Result<Option<T>, Error> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(e) if is_unsupported(e.errno()) => Ok(None),
            Err(e) => Err(self.classify(what, e.into_io())),
        }
    }

    /// The ethtool request header nest, by ifindex.
    fn header(&self, flags: u32) -> Vec<u8> {
        let mut h = Vec::new();
        attr::put_u32(&mut h, ETHTOOL_A_HEADER_DEV_INDEX, self.ifindex);
        if flags != 0 {
            attr::put_u32(&mut h, ETHTOOL_A_HEADER_FLAGS, flags);
        }
        let mut out = Vec::new();
        attr::put_nested(&mut out, ETHTOOL_A_X_HEADER, &h);
        out
    }

    /// The same header for the `ethtool` crate's messages: by ifindex, so
    /// every request of one probe names the same device.
    fn crate_header(&self) -> Vec<EthtoolHeader> {
        vec![EthtoolHeader::DevIndex(self.ifindex)]
    }

    fn ethtool_raw(
        &self,
        genl: &mut NlSocket,
        family: u16,
        cmd: u8,
        attrs: Vec<u8>,
    ) -> Result<Vec<u8>, NlError> {
        let replies = genl.genl_request(family, RawGenl::<EthtoolFamily>::new(cmd, attrs))?;
        Ok(replies
            .into_iter()
            .next()
            .map(|r| r.attrs)
            .unwrap_or_default())
    }

    /// `ETHTOOL_MSG_FEATURES_GET` with compact bitsets, named through
    /// `ETHTOOL_MSG_STRSET_GET` (`ETH_SS_FEATURES`), as `ethtool -k` does.
    fn features(
        &self,
        genl: &mut NlSocket,
        family: u16,
    ) -> Result<BTreeMap<String, FeatureState>, Error> {
        const WHAT_STRSET: &str = "ethtool STRSET_GET (ETH_SS_FEATURES)";
        const WHAT: &str = "ethtool FEATURES_GET";
        let mut req = self.header(0);
        let mut set = Vec::new();
        attr::put_u32(&mut set, ETHTOOL_A_STRINGSET_ID, ETH_SS_FEATURES);
        let mut sets = Vec::new();
        attr::put_nested(&mut sets, ETHTOOL_A_STRINGSETS_STRINGSET, &set);
        attr::put_nested(&mut req, ETHTOOL_A_STRSET_STRINGSETS, &sets);
        let reply = self
            .ethtool_raw(genl, family, ETHTOOL_MSG_STRSET_GET, req)
            .map_err(|e| self.classify(WHAT_STRSET, e.into_io()))?;
        let names = parse_feature_names(&reply);
        if names.is_empty() {
            return Err(self.classify(
                WHAT_STRSET,
                io::Error::new(io::ErrorKind::InvalidData, "reply has no feature names"),
            ));
        }

        let reply = self
            .ethtool_raw(
                genl,
                family,
                ETHTOOL_MSG_FEATURES_GET,
                self.header(ETHTOOL_FLAG_COMPACT_BITSETS),
            )
            .map_err(|e| self.classify(WHAT, e.into_io()))?;
        let bits = |kind| {
            attr::find(&reply, kind)
                .map(parse_compact_bitset)
                .unwrap_or_default()
        };
        let (hw, wanted, active, nochange) = (
            bits(ETHTOOL_A_FEATURES_HW),
            bits(ETHTOOL_A_FEATURES_WANTED),
            bits(ETHTOOL_A_FEATURES_ACTIVE),
            bits(ETHTOOL_A_FEATURES_NOCHANGE),
        );
        let test = |words: &Vec<u32>, i: u32| {
            words
                .get((i / 32) as usize)
                .is_some_and(|w| w & (1 << (i % 32)) != 0)
        };
        let mut out = BTreeMap::new();
        for (&index, kernel_name) in &names {
            if kernel_name.is_empty() {
                continue;
            }
            let state = FeatureState {
                kernel_name: kernel_name.clone(),
                active: test(&active, index),
                fixed: !test(&hw, index) || test(&nochange, index),
                requested: test(&wanted, index),
            };
            out.insert(ethtool_label(kernel_name, &names), state);
        }
        Ok(out)
    }

    /// `ETHTOOL_MSG_CHANNELS_GET` through the `ethtool` crate's message.
    fn channels(&self, genl: &mut NlSocket, family: u16) -> Result<Option<Channels>, Error> {
        let r = genl.genl_request(
            family,
            EthtoolMessage {
                cmd: EthtoolCmd::ChannelGet,
                nlas: vec![EthtoolAttr::Channel(EthtoolChannelAttr::Header(
                    self.crate_header(),
                ))],
            },
        );
        let Some(replies) = self.optional("ethtool CHANNELS_GET", r)? else {
            return Ok(None);
        };
        let mut c = Channels::default();
        for a in replies.into_iter().flat_map(|m| m.nlas) {
            if let EthtoolAttr::Channel(a) = a {
                match a {
                    EthtoolChannelAttr::RxMax(v) => c.rx_max = Some(v),
                    EthtoolChannelAttr::TxMax(v) => c.tx_max = Some(v),
                    EthtoolChannelAttr::OtherMax(v) => c.other_max = Some(v),
                    EthtoolChannelAttr::CombinedMax(v) => c.combined_max = Some(v),
                    EthtoolChannelAttr::RxCount(v) => c.rx = Some(v),
                    EthtoolChannelAttr::TxCount(v) => c.tx = Some(v),
                    EthtoolChannelAttr::OtherCount(v) => c.other = Some(v),
                    EthtoolChannelAttr::CombinedCount(v) => c.combined = Some(v),
                    _ => {}
                }
            }
        }
        Ok(Some(c))
    }

    /// `ETHTOOL_MSG_RINGS_GET` through the `ethtool` crate's message.
    fn rings(&self, genl: &mut NlSocket, family: u16) -> Result<Option<Rings>, Error> {
        let r = genl.genl_request(
            family,
            EthtoolMessage {
                cmd: EthtoolCmd::RingGet,
                nlas: vec![EthtoolAttr::Ring(EthtoolRingAttr::Header(
                    self.crate_header(),
                ))],
            },
        );
        let Some(replies) = self.optional("ethtool RINGS_GET", r)? else {
            return Ok(None);
        };
        let mut g = Rings::default();
        for a in replies.into_iter().flat_map(|m| m.nlas) {
            if let EthtoolAttr::Ring(a) = a {
                match a {
                    EthtoolRingAttr::RxMax(v) => g.rx_max = Some(v),
                    EthtoolRingAttr::RxMiniMax(v) => g.rx_mini_max = Some(v),
                    EthtoolRingAttr::RxJumboMax(v) => g.rx_jumbo_max = Some(v),
                    EthtoolRingAttr::TxMax(v) => g.tx_max = Some(v),
                    EthtoolRingAttr::Rx(v) => g.rx = Some(v),
                    EthtoolRingAttr::RxMini(v) => g.rx_mini = Some(v),
                    EthtoolRingAttr::RxJumbo(v) => g.rx_jumbo = Some(v),
                    EthtoolRingAttr::Tx(v) => g.tx = Some(v),
                    _ => {}
                }
            }
        }
        Ok(Some(g))
    }

    /// `ETHTOOL_MSG_LINKMODES_GET` through the `ethtool` crate's message.
    fn speed(&self, genl: &mut NlSocket, family: u16) -> Result<Option<Option<u32>>, Error> {
        let r = genl.genl_request(
            family,
            EthtoolMessage {
                cmd: EthtoolCmd::LinkModeGet,
                nlas: vec![EthtoolAttr::LinkMode(EthtoolLinkModeAttr::Header(
                    self.crate_header(),
                ))],
            },
        );
        let Some(replies) = self.optional("ethtool LINKMODES_GET", r)? else {
            return Ok(None);
        };
        let speed = replies
            .into_iter()
            .flat_map(|m| m.nlas)
            .find_map(|a| match a {
                EthtoolAttr::LinkMode(EthtoolLinkModeAttr::Speed(s)) => Some(s),
                _ => None,
            })
            .filter(|&s| s != SPEED_UNKNOWN && s != 0);
        Ok(Some(speed))
    }

    /// `ETHTOOL_MSG_RSS_GET` (no message type in the `ethtool` crate).
    fn rss(&self, genl: &mut NlSocket, family: u16) -> Result<Option<Rss>, Error> {
        let r = self.ethtool_raw(genl, family, ETHTOOL_MSG_RSS_GET, self.header(0));
        let Some(reply) = self.optional("ethtool RSS_GET", r)? else {
            return Ok(None);
        };
        let hfunc = attr::find(&reply, ETHTOOL_A_RSS_HFUNC).and_then(attr::u32_of);
        let indirection_table: Vec<u32> = attr::find(&reply, ETHTOOL_A_RSS_INDIR)
            .map(|v| {
                v.chunks_exact(4)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            })
            .unwrap_or_default();
        let hash_key = attr::find(&reply, ETHTOOL_A_RSS_HKEY)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if hfunc.is_none() && indirection_table.is_empty() && hash_key.is_empty() {
            return Ok(None);
        }
        Ok(Some(Rss {
            hfunc,
            indirection_table,
            hash_key,
        }))
    }

    /// netdev `NETDEV_CMD_DEV_GET`; `None` when the kernel has no netdev family.
    fn xdp(&self, genl: &mut NlSocket) -> Result<Option<XdpFeatures>, Error> {
        let family = match genl.resolve_family("netdev") {
            Ok(id) => id,
            Err(e) if e.errno() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => {
                return Err(Error::ResolveFamily {
                    family: "netdev",
                    source: e.into_io(),
                })
            }
        };
        let mut req = Vec::new();
        attr::put_u32(&mut req, NETDEV_A_DEV_IFINDEX, self.ifindex);
        let r = genl
            .genl_request(
                family,
                RawGenl::<NetdevFamily>::new(NETDEV_CMD_DEV_GET, req),
            )
            .map(|v| v.into_iter().next().map(|m| m.attrs).unwrap_or_default());
        let Some(reply) = self.optional("netdev DEV_GET", r)? else {
            return Ok(None);
        };
        let raw = attr::find(&reply, NETDEV_A_DEV_XDP_FEATURES)
            .and_then(attr::u64_of)
            .unwrap_or(0);
        let u32_or_u64 = |v: &[u8]| attr::u64_of(v).or_else(|| attr::u32_of(v).map(u64::from));
        Ok(Some(XdpFeatures {
            zc_max_segs: attr::find(&reply, NETDEV_A_DEV_XDP_ZC_MAX_SEGS).and_then(attr::u32_of),
            rx_metadata: attr::find(&reply, NETDEV_A_DEV_XDP_RX_METADATA_FEATURES)
                .and_then(u32_or_u64),
            xsk_features: attr::find(&reply, NETDEV_A_DEV_XSK_FEATURES).and_then(u32_or_u64),
            ..XdpFeatures::from_bits(raw)
        }))
    }
}

/// Index → name from a `STRSET_GET` reply for `ETH_SS_FEATURES`.
fn parse_feature_names(reply: &[u8]) -> BTreeMap<u32, String> {
    let mut names = BTreeMap::new();
    let Some(sets) = attr::find(reply, ETHTOOL_A_STRSET_STRINGSETS) else {
        return names;
    };
    for (kind, set) in attr::iter(sets) {
        if kind != ETHTOOL_A_STRINGSETS_STRINGSET
            || attr::find(set, ETHTOOL_A_STRINGSET_ID).and_then(attr::u32_of)
                != Some(ETH_SS_FEATURES)
        {
            continue;
        }
        let Some(strings) = attr::find(set, ETHTOOL_A_STRINGSET_STRINGS) else {
            continue;
        };
        for (kind, s) in attr::iter(strings) {
            if kind != ETHTOOL_A_STRINGS_STRING {
                continue;
            }
            let index = attr::find(s, ETHTOOL_A_STRING_INDEX).and_then(attr::u32_of);
            let value = attr::find(s, ETHTOOL_A_STRING_VALUE).map(attr::str_of);
            if let (Some(i), Some(v)) = (index, value) {
                names.insert(i, v);
            }
        }
    }
    names
}

/// The value words of a compact bitset (`ETHTOOL_A_BITSET_VALUE`, u32 words).
/// A verbose bitset (no `ETHTOOL_A_BITSET_VALUE`) gives no bits; the request
/// asks for compact ones.
fn parse_compact_bitset(nest: &[u8]) -> Vec<u32> {
    let _nomask = attr::find(nest, ETHTOOL_A_BITSET_NOMASK).is_some();
    let size = attr::find(nest, ETHTOOL_A_BITSET_SIZE)
        .and_then(attr::u32_of)
        .unwrap_or(0);
    let mut words: Vec<u32> = attr::find(nest, ETHTOOL_A_BITSET_VALUE)
        .map(|v| {
            v.chunks_exact(4)
                .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
        .unwrap_or_default();
    words.resize(size.div_ceil(32) as usize, 0);
    words
}

fn pattern_match(name: &str, pattern: &str) -> bool {
    match pattern.split_once('*') {
        Some((pre, post)) => {
            name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post)
        }
        None => name == pattern,
    }
}

/// The name `ethtool -k` prints for the kernel feature `kernel_name`: a
/// legacy label whose pattern matches this one feature alone, else the
/// kernel name.
pub(crate) fn ethtool_label(kernel_name: &str, all: &BTreeMap<u32, String>) -> String {
    for (label, pattern) in LEGACY_LABELS {
        if pattern_match(kernel_name, pattern)
            && all.values().filter(|n| pattern_match(n, pattern)).count() == 1
        {
            return (*label).to_owned();
        }
    }
    kernel_name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> BTreeMap<u32, String> {
        list.iter()
            .enumerate()
            .map(|(i, n)| (i as u32, (*n).to_owned()))
            .collect()
    }

    #[test]
    fn single_match_legacy_names_replace_kernel_names() {
        let all = names(&["rx-hashing", "rx-gro", "rx-gro-hw", "tx-checksum-ipv4"]);
        assert_eq!(ethtool_label("rx-hashing", &all), "receive-hashing");
        assert_eq!(ethtool_label("rx-gro", &all), "generic-receive-offload");
        assert_eq!(ethtool_label("rx-gro-hw", &all), "rx-gro-hw");
        // One tx-checksum-* bit alone would be printed under the group label.
        assert_eq!(ethtool_label("tx-checksum-ipv4", &all), "tx-checksumming");
    }

    #[test]
    fn group_patterns_keep_kernel_names() {
        let all = names(&["tx-tcp-segmentation", "tx-tcp6-segmentation"]);
        assert_eq!(
            ethtool_label("tx-tcp6-segmentation", &all),
            "tx-tcp6-segmentation"
        );
        assert!(pattern_match(
            "tx-tcp-ecn-segmentation",
            "tx-tcp*-segmentation"
        ));
        assert!(!pattern_match(
            "tx-udp_tnl-segmentation",
            "tx-tcp*-segmentation"
        ));
    }

    #[test]
    fn ifname_validation() {
        assert!(validate_ifname("eth0").is_ok());
        for bad in ["", "a/b", "a b", "0123456789abcdef", ".."] {
            assert!(
                matches!(
                    validate_ifname(bad),
                    Err(Error::InvalidInterfaceName { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn errors_name_the_interface_and_request() {
        let q = Querier {
            ifname: "eth9",
            ifindex: 9,
        };
        let e = q.classify("ethtool RSS_GET", io::Error::from_raw_os_error(libc::EPERM));
        assert!(matches!(e, Error::PermissionDenied { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("eth9")
                && text.contains("ethtool RSS_GET")
                && text.contains("CAP_NET_ADMIN"),
            "{text}"
        );
        let e = q.classify(
            "ethtool CHANNELS_GET",
            io::Error::from_raw_os_error(libc::ENODEV),
        );
        assert!(matches!(e, Error::NoSuchInterface { .. }), "{e:?}");
        let e = q.classify(
            "ethtool CHANNELS_GET",
            io::Error::from_raw_os_error(libc::EIO),
        );
        assert!(
            e.to_string()
                .starts_with("ethtool CHANNELS_GET for \"eth9\" failed"),
            "{e}"
        );
        assert!(is_unsupported(Some(libc::EOPNOTSUPP)) && is_unsupported(Some(ENOTSUPP)));
    }

    #[test]
    fn compact_bitset_words() {
        let mut nest = Vec::new();
        attr::put(&mut nest, ETHTOOL_A_BITSET_NOMASK, &[]);
        attr::put_u32(&mut nest, ETHTOOL_A_BITSET_SIZE, 40);
        attr::put(
            &mut nest,
            ETHTOOL_A_BITSET_VALUE,
            &[1, 0, 0, 0x80, 2, 0, 0, 0],
        );
        assert_eq!(
            parse_compact_bitset(&nest),
            vec![
                u32::from_ne_bytes([1, 0, 0, 0x80]),
                u32::from_ne_bytes([2, 0, 0, 0])
            ]
        );
    }
}
