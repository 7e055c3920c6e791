//! [`OffloadPlan`]: for each job a switch has on an uplink, whether the NIC
//! does it, the switch does it in software, or it cannot be done, and why.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::caps::{names, NicCapabilities, XDP_RX_METADATA_HASH, XSK_FLAGS_TX_CHECKSUM};

/// How the switch moves the uplink's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Datapath {
    /// AF_XDP sockets, one per rx queue: frames bypass the kernel stack, so
    /// only offloads reachable through XDP/AF_XDP count.
    AfXdp,
    /// The kernel network stack (a socket or tap): every netdev feature counts.
    KernelStack,
    /// A user-space tunnel endpoint over a kernel UDP socket (a switch
    /// that encapsulates Geneve itself and sends it with `send`/`sendmmsg`):
    /// the kernel builds, checksums and routes the outer IP/UDP headers, so
    /// the NIC's outer offloads count, but it sees the Geneve header and the
    /// inner frame as opaque payload, so inner TCP segmentation, inner
    /// checksums and coalescing of inner segments are the switch's.
    UdpSocket,
}

/// The AF_XDP mode the configuration asks for (`mode=` of an afxdp port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AfXdpRequest {
    /// Zero-copy when the NIC reports it, else native copy mode, else generic.
    #[default]
    Auto,
    /// Zero-copy only (`XDP_ZEROCOPY`).
    ZeroCopy,
    /// Native (driver) XDP in copy mode only (`XDP_COPY`, `XDP_FLAGS_DRV_MODE`).
    Native,
    /// Generic (skb) XDP only (`XDP_FLAGS_SKB_MODE`).
    Generic,
}

/// The AF_XDP mode chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AfXdpMode {
    /// The NIC DMAs straight into UMEM (`XDP_ZEROCOPY`).
    ZeroCopy,
    /// Driver XDP; the kernel copies frames into UMEM (`XDP_COPY` with `XDP_FLAGS_DRV_MODE`).
    NativeCopy,
    /// Generic XDP after skb allocation (`XDP_FLAGS_SKB_MODE`); works on any device, slowest.
    Generic,
}

impl fmt::Display for AfXdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AfXdpMode::ZeroCopy => "zero-copy",
            AfXdpMode::NativeCopy => "native-copy",
            AfXdpMode::Generic => "generic",
        })
    }
}

/// What the switch needs on one uplink. `Default` is vswitch's AF_XDP
/// uplink carrying Geneve: every job needed, AF_XDP mode `auto`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffloadNeeds {
    /// How packets move.
    pub datapath: Datapath,
    /// Segment large Geneve-encapsulated TCP frames on tx.
    pub tunnel_tso: bool,
    /// Complete L4 checksums on tx.
    pub tx_checksum: bool,
    /// Verify L4 checksums on rx.
    pub rx_checksum: bool,
    /// Coalesce received TCP segments (LRO/GRO).
    pub receive_coalescing: bool,
    /// Spread tunnelled flows over rx queues by their inner headers.
    pub inner_rss: bool,
    /// The AF_XDP mode asked for; ignored unless `datapath` is `AfXdp`.
    pub afxdp_mode: AfXdpRequest,
}

impl Default for OffloadNeeds {
    fn default() -> Self {
        Self {
            datapath: Datapath::AfXdp,
            tunnel_tso: true,
            tx_checksum: true,
            rx_checksum: true,
            receive_coalescing: true,
            inner_rss: true,
            afxdp_mode: AfXdpRequest::Auto,
        }
    }
}

/// A job on the uplink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Job {
    /// Segmentation of Geneve-encapsulated TCP (tunnel TSO).
    TunnelTso,
    /// Tx L4 checksum completion.
    TxChecksum,
    /// Rx L4 checksum verification.
    RxChecksum,
    /// Rx coalescing (LRO / GRO).
    ReceiveCoalescing,
    /// RSS on the inner headers of tunnelled traffic.
    InnerRss,
    /// The AF_XDP socket mode.
    AfXdp,
}

impl fmt::Display for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Job::TunnelTso => "tunnel TSO",
            Job::TxChecksum => "tx checksum",
            Job::RxChecksum => "rx checksum",
            Job::ReceiveCoalescing => "LRO/GRO",
            Job::InnerRss => "inner RSS",
            Job::AfXdp => "AF_XDP mode",
        })
    }
}

/// Where a job is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// By the NIC.
    Hardware,
    /// By the switch or the kernel, on the CPU.
    Software,
    /// Asked for but impossible on this NIC (e.g. AF_XDP zero-copy on veth).
    Unavailable,
    /// The needs did not ask for it.
    NotNeeded,
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Placement::Hardware => "hardware",
            Placement::Software => "software",
            Placement::Unavailable => "unavailable",
            Placement::NotNeeded => "not needed",
        })
    }
}

/// One job's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The job.
    pub job: Job,
    /// Where it is done.
    pub placement: Placement,
    /// For [`Job::AfXdp`]: the mode chosen (`None` when unavailable or not needed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub afxdp_mode: Option<AfXdpMode>,
    /// Why, naming the feature or attribute it was decided from.
    pub reason: String,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match self.afxdp_mode {
            Some(m) => m.to_string(),
            None => self.placement.to_string(),
        };
        write!(
            f,
            "{:<12} {:<12} {}",
            self.job.to_string(),
            place,
            self.reason
        )
    }
}

/// The offload plan of one uplink: a [`Decision`] per [`Job`], in the order
/// tunnel TSO, tx checksum, rx checksum, LRO/GRO, inner RSS, AF_XDP mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffloadPlan {
    /// The interface.
    pub ifname: String,
    /// The datapath the plan is for.
    pub datapath: Datapath,
    /// One decision per job.
    pub decisions: Vec<Decision>,
}

impl fmt::Display for OffloadPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dp = match self.datapath {
            Datapath::AfXdp => "AF_XDP",
            Datapath::KernelStack => "kernel stack",
            Datapath::UdpSocket => "UDP socket",
        };
        writeln!(f, "offload plan for {} ({dp})", self.ifname)?;
        for d in &self.decisions {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

fn decision(job: Job, placement: Placement, reason: impl Into<String>) -> Decision {
    Decision {
        job,
        placement,
        afxdp_mode: None,
        reason: reason.into(),
    }
}

fn not_needed(job: Job) -> Decision {
    decision(job, Placement::NotNeeded, "not asked for")
}

impl OffloadPlan {
    /// Decides each job from what the NIC reports (`caps`) and what the
    /// switch needs (`needs`). Pure: no I/O.
    ///
    /// AF_XDP mode, for `auto`: zero-copy when the driver reports
    /// `xsk-zerocopy` (`NETDEV_XDP_ACT_XSK_ZEROCOPY`), else native copy mode
    /// when it reports `basic` and `redirect`, else generic; the reason says
    /// why each better mode was passed over.
    pub fn new(caps: &NicCapabilities, needs: &OffloadNeeds) -> Self {
        let decisions = vec![
            if needs.tunnel_tso {
                tunnel_tso(caps, needs.datapath)
            } else {
                not_needed(Job::TunnelTso)
            },
            if needs.tx_checksum {
                tx_checksum(caps, needs.datapath)
            } else {
                not_needed(Job::TxChecksum)
            },
            if needs.rx_checksum {
                rx_checksum(caps, needs.datapath)
            } else {
                not_needed(Job::RxChecksum)
            },
            if needs.receive_coalescing {
                receive_coalescing(caps, needs.datapath)
            } else {
                not_needed(Job::ReceiveCoalescing)
            },
            if needs.inner_rss {
                inner_rss(caps, needs.datapath)
            } else {
                not_needed(Job::InnerRss)
            },
            match needs.datapath {
                Datapath::AfXdp => afxdp_mode(caps, needs.afxdp_mode),
                Datapath::KernelStack => decision(
                    Job::AfXdp,
                    Placement::NotNeeded,
                    "datapath is the kernel stack",
                ),
                Datapath::UdpSocket => {
                    decision(Job::AfXdp, Placement::NotNeeded, "datapath is a UDP socket")
                }
            },
        ];
        Self {
            ifname: caps.ifname.clone(),
            datapath: needs.datapath,
            decisions,
        }
    }

    /// The decision for `job`.
    pub fn get(&self, job: Job) -> Option<&Decision> {
        self.decisions.iter().find(|d| d.job == job)
    }

    /// The AF_XDP mode chosen, if any.
    pub fn afxdp_mode(&self) -> Option<AfXdpMode> {
        self.get(Job::AfXdp).and_then(|d| d.afxdp_mode)
    }
}

/// `name: on [fixed]` etc., or `name: absent` when this kernel lacks the bit.
fn feat(caps: &NicCapabilities, kernel_name: &str) -> String {
    match caps
        .features
        .iter()
        .find(|(_, s)| s.kernel_name == kernel_name)
    {
        Some((label, s)) => format!("{label} {}", s.describe()),
        None => format!("{kernel_name} absent"),
    }
}

fn driver(caps: &NicCapabilities) -> &str {
    caps.driver
        .as_deref()
        .or(caps.link_kind.as_deref())
        .unwrap_or("the driver")
}

fn tunnel_tso(caps: &NicCapabilities, dp: Datapath) -> Decision {
    let job = Job::TunnelTso;
    let nic = feat(caps, names::TX_UDP_TNL_SEGMENTATION);
    match dp {
        Datapath::AfXdp => decision(
            job,
            Placement::Software,
            format!(
                "AF_XDP has no segmentation offload (frames go out as given); \
                 the switch segments Geneve TCP itself. NIC: {nic}, usable only by the kernel stack"
            ),
        ),
        Datapath::UdpSocket => decision(
            job,
            Placement::Software,
            format!(
                "the kernel sees Geneve as opaque UDP payload (its tunnel GSO serves only its own \
                 geneve devices); the switch segments inner TCP to the MTU before sending. NIC: {nic}"
            ),
        ),
        Datapath::KernelStack => {
            let f = caps.feature(names::TX_UDP_TNL_SEGMENTATION);
            if f.is_some_and(|f| f.active) {
                decision(
                    job,
                    Placement::Hardware,
                    format!("NIC segments UDP-tunnelled TCP: {nic}"),
                )
            } else if f.is_some_and(|f| !f.fixed) {
                decision(
                    job,
                    Placement::Software,
                    format!(
                        "{nic}; `ethtool -K {} tx-udp_tnl-segmentation on` would move it to the NIC; \
                         kernel GSO segments meanwhile",
                        caps.ifname
                    ),
                )
            } else {
                decision(
                    job,
                    Placement::Software,
                    format!("NIC cannot segment UDP-tunnelled TCP ({nic}); kernel GSO segments"),
                )
            }
        }
    }
}

fn nic_tx_csum(caps: &NicCapabilities) -> Option<&'static str> {
    [
        names::TX_CHECKSUM_IP_GENERIC,
        names::TX_CHECKSUM_IPV4,
        names::TX_CHECKSUM_IPV6,
    ]
    .into_iter()
    .find(|n| caps.feature_active(n))
}

fn tx_checksum(caps: &NicCapabilities, dp: Datapath) -> Decision {
    let job = Job::TxChecksum;
    let nic = nic_tx_csum(caps);
    match dp {
        Datapath::AfXdp => {
            let xsk = caps.xdp.as_ref().and_then(|x| x.xsk_features);
            match (xsk, nic) {
                (Some(f), Some(n)) if f & XSK_FLAGS_TX_CHECKSUM != 0 => decision(
                    job,
                    Placement::Hardware,
                    format!("driver offers AF_XDP tx checksum (NETDEV_A_DEV_XSK_FEATURES tx-checksum) and {n} is on"),
                ),
                (Some(f), _) if f & XSK_FLAGS_TX_CHECKSUM != 0 => decision(
                    job,
                    Placement::Software,
                    "driver offers AF_XDP tx checksum but no tx-checksum-* feature is on; the switch computes checksums",
                ),
                (Some(_), _) => decision(
                    job,
                    Placement::Software,
                    format!(
                        "{} does not offer AF_XDP tx checksum (NETDEV_A_DEV_XSK_FEATURES lacks tx-checksum); \
                         the switch computes checksums",
                        driver(caps)
                    ),
                ),
                (None, _) => decision(
                    job,
                    Placement::Software,
                    "kernel does not report NETDEV_A_DEV_XSK_FEATURES (before 6.8): no AF_XDP tx checksum; \
                     the switch computes checksums",
                ),
            }
        }
        Datapath::UdpSocket => decision(
            job,
            Placement::Software,
            format!(
                "inner checksums are inside the UDP payload: the switch completes them; the outer \
                 UDP checksum is the kernel's ({})",
                nic.map_or_else(|| "computed in software".to_owned(), |n| format!("{n} on"))
            ),
        ),
        Datapath::KernelStack => match nic {
            Some(n) => decision(job, Placement::Hardware, format!("{n} on")),
            None => decision(
                job,
                Placement::Software,
                format!(
                    "no tx checksum feature on ({}, {}, {}); the kernel computes checksums",
                    feat(caps, names::TX_CHECKSUM_IP_GENERIC),
                    feat(caps, names::TX_CHECKSUM_IPV4),
                    feat(caps, names::TX_CHECKSUM_IPV6)
                ),
            ),
        },
    }
}

fn rx_checksum(caps: &NicCapabilities, dp: Datapath) -> Decision {
    let job = Job::RxChecksum;
    match dp {
        Datapath::AfXdp => decision(
            job,
            Placement::Software,
            format!(
                "AF_XDP rx descriptors carry no checksum status (XDP rx metadata has timestamp, hash, VLAN tag only); \
                 the switch verifies. NIC: {}",
                feat(caps, names::RX_CHECKSUM)
            ),
        ),
        Datapath::UdpSocket => decision(
            job,
            Placement::Software,
            format!(
                "the socket reports nothing about inner checksums: the switch verifies them; the \
                 kernel verifies the outer UDP checksum ({})",
                feat(caps, names::RX_CHECKSUM)
            ),
        ),
        Datapath::KernelStack => {
            if caps.feature_active(names::RX_CHECKSUM) {
                decision(job, Placement::Hardware, feat(caps, names::RX_CHECKSUM))
            } else {
                decision(
                    job,
                    Placement::Software,
                    format!("{}; the kernel verifies", feat(caps, names::RX_CHECKSUM)),
                )
            }
        }
    }
}

fn receive_coalescing(caps: &NicCapabilities, dp: Datapath) -> Decision {
    let job = Job::ReceiveCoalescing;
    let hw = feat(caps, names::RX_GRO_HW);
    let lro = feat(caps, names::RX_LRO);
    match dp {
        Datapath::AfXdp => decision(
            job,
            Placement::Software,
            format!(
                "XDP sees frames before the kernel's GRO; attaching generic XDP turns LRO and rx-gro-hw \
                 off (generic_xdp_install) and drivers refuse or disable them for native XDP; \
                 the switch coalesces within each rx batch. NIC: {hw}, {lro}"
            ),
        ),
        Datapath::UdpSocket => decision(
            job,
            Placement::Software,
            format!(
                "LRO, rx-gro-hw and the kernel's UDP GRO merge outer datagrams, not the inner TCP \
                 segments inside them; the switch coalesces within each receive batch. NIC: {hw}, {lro}"
            ),
        ),
        Datapath::KernelStack => {
            if caps.feature_active(names::RX_GRO_HW) {
                decision(job, Placement::Hardware, hw)
            } else if caps.feature_active(names::RX_LRO) {
                decision(job, Placement::Hardware, lro)
            } else if caps.feature_active(names::RX_GRO) {
                decision(
                    job,
                    Placement::Software,
                    format!("kernel GRO ({}); NIC: {hw}, {lro}", feat(caps, names::RX_GRO)),
                )
            } else {
                decision(
                    job,
                    Placement::Software,
                    format!("no coalescing on ({}, {hw}, {lro})", feat(caps, names::RX_GRO)),
                )
            }
        }
    }
}

fn inner_rss(caps: &NicCapabilities, dp: Datapath) -> Decision {
    let job = Job::InnerRss;
    let queues = caps
        .channels
        .as_ref()
        .map(|c| c.rx_queues())
        .filter(|&q| q > 0)
        .or(caps.num_rx_queues)
        .unwrap_or(1);
    let hash_md = match (dp, caps.xdp.as_ref().and_then(|x| x.rx_metadata)) {
        (Datapath::AfXdp, Some(m)) if m & XDP_RX_METADATA_HASH != 0 => {
            "; the NIC's hash is readable as XDP rx metadata"
        }
        _ => "",
    };
    let udp4 = caps.udp4_rx_flow_hash;
    match &caps.rss {
        Some(_) if queues > 1 && udp4.is_some_and(|h| !h.covers_l4_src_port()) => decision(
            job,
            Placement::Software,
            format!(
                "NIC hashes UDP/IPv4 without the source port (rx-flow-hash udp4: {}), so all Geneve \
                 traffic between two TEPs lands on one rx queue; `ethtool -N {} rx-flow-hash udp4 sdfn` \
                 would let the outer source port (the inner flow hash) spread it; meanwhile the \
                 switch spreads inner flows in software",
                udp4.map(|h| if h.bits == 0 { "none".to_owned() } else { h.letters() })
                    .unwrap_or_default(),
                caps.ifname
            ),
        ),
        Some(rss) if queues > 1 && !rss.indirection_table.is_empty() => decision(
            job,
            Placement::Hardware,
            format!(
                "NIC hashes outer headers into {queues} rx queues ({}-entry indirection table, \
                 {}-byte key{}); the Geneve outer UDP source port carries the inner flow hash \
                 (RFC 8926 §3.3), so inner flows spread{hash_md}",
                rss.indirection_table_size(),
                rss.hash_key.len(),
                match udp4 {
                    Some(h) => format!(", rx-flow-hash udp4: {}", h.letters()),
                    None => ", udp4 hash fields not reported".to_owned(),
                }
            ),
        ),
        _ if queues <= 1 => decision(
            job,
            Placement::Software,
            "one rx queue: the switch spreads inner flows over PMD threads in software",
        ),
        _ => decision(
            job,
            Placement::Software,
            format!(
                "{queues} rx queues but {} reports no RSS (ETHTOOL_MSG_RSS_GET unsupported or empty), \
                 so the rx queue is the driver's choice; the switch spreads inner flows in software",
                driver(caps)
            ),
        ),
    }
}

fn afxdp_mode(caps: &NicCapabilities, req: AfXdpRequest) -> Decision {
    let job = Job::AfXdp;
    let drv = driver(caps);
    let Some(x) = caps.xdp.as_ref() else {
        let reason = "kernel does not report XDP features (no netdev netlink family, before 6.3)";
        return match req {
            AfXdpRequest::Generic | AfXdpRequest::Auto => Decision {
                job,
                placement: Placement::Software,
                afxdp_mode: Some(AfXdpMode::Generic),
                reason: format!("{reason}; generic XDP works on every device"),
            },
            _ => decision(job, Placement::Unavailable, reason),
        };
    };
    let zc_no = format!(
        "zero-copy unavailable: {drv} does not report xsk-zerocopy in NETDEV_A_DEV_XDP_FEATURES"
    );
    let native_ok = x.basic && x.redirect;
    let native_no = format!(
        "native unavailable: {drv} reports {} (needs basic and redirect)",
        if x.flag_names().is_empty() {
            "no XDP features".to_owned()
        } else {
            x.flag_names().join(" ")
        }
    );
    let zc_segs = x
        .zc_max_segs
        .map(|s| format!(", up to {s} buffers per frame"))
        .unwrap_or_default();
    let zero_copy = || Decision {
        job,
        placement: Placement::Hardware,
        afxdp_mode: Some(AfXdpMode::ZeroCopy),
        reason: format!("{drv} reports xsk-zerocopy{zc_segs}: the NIC DMAs into UMEM"),
    };
    let native = |prefix: &str| Decision {
        job,
        placement: Placement::Software,
        afxdp_mode: Some(AfXdpMode::NativeCopy),
        reason: format!("{prefix}native XDP in copy mode: {drv} reports basic and redirect"),
    };
    let generic = |prefix: &str| Decision {
        job,
        placement: Placement::Software,
        afxdp_mode: Some(AfXdpMode::Generic),
        reason: format!("{prefix}generic (skb) XDP, the slowest mode, works on every device"),
    };
    match req {
        AfXdpRequest::Auto if x.xsk_zerocopy => zero_copy(),
        AfXdpRequest::Auto if native_ok => native(&format!("{zc_no}; ")),
        AfXdpRequest::Auto => generic(&format!("{zc_no}; {native_no}; ")),
        AfXdpRequest::ZeroCopy if x.xsk_zerocopy => zero_copy(),
        AfXdpRequest::ZeroCopy => decision(job, Placement::Unavailable, zc_no),
        AfXdpRequest::Native if native_ok => native(""),
        AfXdpRequest::Native => decision(job, Placement::Unavailable, native_no),
        AfXdpRequest::Generic => generic("requested: "),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::caps::{Channels, FeatureState, Rss, RxHashFields, XdpFeatures};

    fn caps(xdp_bits: Option<u64>, features: &[(&str, bool, bool)]) -> NicCapabilities {
        NicCapabilities {
            ifname: "nic0".into(),
            ifindex: 7,
            driver: Some("drv".into()),
            link_kind: None,
            mtu: 1500,
            max_mtu: Some(9000),
            speed_mbps: Some(25_000),
            numa_node: Some(0),
            num_tx_queues: Some(8),
            num_rx_queues: Some(8),
            channels: Some(Channels {
                combined: Some(8),
                combined_max: Some(8),
                ..Channels::default()
            }),
            rings: None,
            rss: Some(Rss {
                hfunc: Some(1),
                indirection_table: vec![0; 128],
                hash_key: vec![0x6d; 40],
            }),
            udp4_rx_flow_hash: Some(RxHashFields { bits: 0xf0 }),
            udp6_rx_flow_hash: None,
            features: features
                .iter()
                .map(|&(n, active, fixed)| {
                    (
                        n.to_owned(),
                        FeatureState {
                            kernel_name: n.to_owned(),
                            active,
                            fixed,
                            requested: active,
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
            xdp: xdp_bits.map(XdpFeatures::from_bits),
        }
    }

    #[test]
    fn auto_picks_zero_copy_then_native_then_generic() {
        let needs = OffloadNeeds::default();
        let zc = OffloadPlan::new(&caps(Some(1 | 2 | 4 | 8), &[]), &needs);
        assert_eq!(zc.afxdp_mode(), Some(AfXdpMode::ZeroCopy));
        let native = OffloadPlan::new(&caps(Some(1 | 2), &[]), &needs);
        assert_eq!(native.afxdp_mode(), Some(AfXdpMode::NativeCopy));
        let reason = &native.get(Job::AfXdp).unwrap().reason;
        assert!(reason.contains("zero-copy unavailable"), "{reason}");
        let generic = OffloadPlan::new(&caps(Some(0), &[]), &needs);
        assert_eq!(generic.afxdp_mode(), Some(AfXdpMode::Generic));
        assert!(generic
            .get(Job::AfXdp)
            .unwrap()
            .reason
            .contains("native unavailable"));
    }

    #[test]
    fn explicit_zero_copy_without_support_is_unavailable() {
        let needs = OffloadNeeds {
            afxdp_mode: AfXdpRequest::ZeroCopy,
            ..OffloadNeeds::default()
        };
        let plan = OffloadPlan::new(&caps(Some(1 | 2), &[]), &needs);
        let d = plan.get(Job::AfXdp).unwrap();
        assert_eq!(d.placement, Placement::Unavailable);
        assert_eq!(d.afxdp_mode, None);
    }

    #[test]
    fn kernel_stack_uses_nic_tunnel_tso_and_rss() {
        let needs = OffloadNeeds {
            datapath: Datapath::KernelStack,
            ..OffloadNeeds::default()
        };
        let c = caps(None, &[(names::TX_UDP_TNL_SEGMENTATION, true, false)]);
        let plan = OffloadPlan::new(&c, &needs);
        assert_eq!(
            plan.get(Job::TunnelTso).unwrap().placement,
            Placement::Hardware
        );
        assert_eq!(
            plan.get(Job::InnerRss).unwrap().placement,
            Placement::Hardware
        );
        assert_eq!(
            plan.get(Job::AfXdp).unwrap().placement,
            Placement::NotNeeded
        );
        let off = caps(None, &[(names::TX_UDP_TNL_SEGMENTATION, false, true)]);
        let plan = OffloadPlan::new(&off, &needs);
        let d = plan.get(Job::TunnelTso).unwrap();
        assert_eq!(d.placement, Placement::Software);
        assert!(d.reason.contains("cannot"), "{}", d.reason);
    }

    #[test]
    fn rss_without_udp_source_port_is_software_with_the_fix() {
        let needs = OffloadNeeds::default();
        let mut c = caps(Some(3), &[]);
        assert_eq!(
            OffloadPlan::new(&c, &needs)
                .get(Job::InnerRss)
                .unwrap()
                .placement,
            Placement::Hardware
        );
        // RXH_IP_SRC | RXH_IP_DST only, as ixgbe hashes UDP by default.
        c.udp4_rx_flow_hash = Some(RxHashFields { bits: 0x30 });
        let plan = OffloadPlan::new(&c, &needs);
        let d = plan.get(Job::InnerRss).unwrap();
        assert_eq!(d.placement, Placement::Software);
        assert!(
            d.reason.contains("rx-flow-hash udp4 sdfn") && d.reason.contains("udp4: sd)"),
            "{}",
            d.reason
        );
    }

    #[test]
    fn udp_socket_does_inner_work_in_software_whatever_the_nic_offers() {
        let needs = OffloadNeeds {
            datapath: Datapath::UdpSocket,
            ..OffloadNeeds::default()
        };
        let c = caps(
            Some(15),
            &[
                (names::TX_UDP_TNL_SEGMENTATION, true, false),
                (names::TX_CHECKSUM_IP_GENERIC, true, false),
                (names::RX_CHECKSUM, true, false),
                (names::RX_GRO_HW, true, false),
            ],
        );
        let plan = OffloadPlan::new(&c, &needs);
        for job in [
            Job::TunnelTso,
            Job::TxChecksum,
            Job::RxChecksum,
            Job::ReceiveCoalescing,
        ] {
            let d = plan.get(job).unwrap();
            assert_eq!(d.placement, Placement::Software, "{d}");
        }
        assert!(plan
            .get(Job::TunnelTso)
            .unwrap()
            .reason
            .contains("opaque UDP payload"));
        assert_eq!(
            plan.get(Job::AfXdp).unwrap().placement,
            Placement::NotNeeded
        );
        assert!(plan.to_string().contains("(UDP socket)"));
        let json = serde_json::to_string(&plan).unwrap();
        assert!(json.contains(r#""datapath":"udp_socket""#), "{json}");
    }

    #[test]
    fn af_xdp_tunnel_tso_is_software_even_when_nic_has_it() {
        let c = caps(Some(15), &[(names::TX_UDP_TNL_SEGMENTATION, true, false)]);
        let plan = OffloadPlan::new(&c, &OffloadNeeds::default());
        assert_eq!(
            plan.get(Job::TunnelTso).unwrap().placement,
            Placement::Software
        );
    }

    #[test]
    fn af_xdp_tx_checksum_needs_xsk_flag() {
        let mut c = caps(Some(15), &[(names::TX_CHECKSUM_IP_GENERIC, true, false)]);
        let plan = OffloadPlan::new(&c, &OffloadNeeds::default());
        assert_eq!(
            plan.get(Job::TxChecksum).unwrap().placement,
            Placement::Software
        );
        c.xdp.as_mut().unwrap().xsk_features = Some(XSK_FLAGS_TX_CHECKSUM);
        let plan = OffloadPlan::new(&c, &OffloadNeeds::default());
        assert_eq!(
            plan.get(Job::TxChecksum).unwrap().placement,
            Placement::Hardware
        );
    }

    #[test]
    fn unneeded_jobs_say_so_and_serialize() {
        let needs = OffloadNeeds {
            tunnel_tso: false,
            ..OffloadNeeds::default()
        };
        let plan = OffloadPlan::new(&caps(Some(3), &[]), &needs);
        assert_eq!(
            plan.get(Job::TunnelTso).unwrap().placement,
            Placement::NotNeeded
        );
        assert_eq!(plan.decisions.len(), 6);
        let text = plan.to_string();
        assert!(text.contains("native-copy"), "{text}");
    }
}
