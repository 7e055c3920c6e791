//! The report: which tables, plots and targets each scenario gets, and the text that
//! says what each figure measures.

use serde::Serialize;
use serde_json::Value;

use crate::aggregate::{find, Aggregate};
use crate::plot::{Chart, Series};
use crate::raw::Record;
use crate::table::{self, switches_of, Metric, TableSpec};

const MPPS: Metric = Metric {
    name: "mpps",
    label: "Mpps",
    decimals: 3,
};
const GBPS: Metric = Metric {
    name: "gbps",
    label: "Gbit/s",
    decimals: 2,
};
const CPP: Metric = Metric {
    name: "cycles_per_packet",
    label: "cycles/pkt",
    decimals: 0,
};
const P50_US: Metric = Metric {
    name: "p50_us",
    label: "p50 µs",
    decimals: 0,
};
const P99_US: Metric = Metric {
    name: "p99_us",
    label: "p99 µs",
    decimals: 0,
};
const DROPS: Metric = Metric {
    name: "drops",
    label: "drops",
    decimals: 0,
};
const CPS: Metric = Metric {
    name: "cps",
    label: "connections/s",
    decimals: 0,
};
const LOST: Metric = Metric {
    name: "lost",
    label: "lost (share)",
    decimals: 4,
};

/// One report section: a scenario, what it measures, and its table layout.
pub struct Section {
    /// Heading.
    pub title: &'static str,
    /// What the figures measure, in prose.
    pub what: &'static str,
    /// The table.
    pub spec: TableSpec,
    /// Plot stems (written by [`charts`]) shown under the table.
    pub plots: &'static [&'static str],
}

/// The sections, in report order.
pub const SECTIONS: &[Section] = &[
    Section {
        title: "1. PVP loop, 1 flow",
        what: "One DPDK testpmd guest with two virtio-user ports loops frames in io mode (64 bursts injected with `tx_first`); every frame crosses the switch once per guest forward. The switch polls on CPU 0, the guest on CPU 1. Mpps: frames the guest received per second over the measured window; Gbit/s: those frames' bits (frame size × 8, FCS included, no preamble or gap); drops: the guest ports' RX-missed + RX-errors + TX-errors over the window (frames the switch did not take or deliver in time); cycles/pkt: the switch's own TSC cycles per packet it received over the window — vswitchd `pmd-stats` busy cycles, OVS `dpif-netdev/pmd-stats-show` processing cycles, testpmd `--record-core-cycles` busy cycles. `limit` is testpmd's own vhost PMD doing io forwarding between the two sockets (it copies each frame twice: out of one guest and into the other; the switches copy once). ring: the guest's virtqueues, split (virtio 1.2 §2.7) or packed (§2.8, `packed_vq=1`; every switch serves them, `bench-pvp.sh --packed`).",
        spec: TableSpec {
            scenario: "pvp",
            rows: &["ring", "frame_size"],
            metrics: &[MPPS, GBPS, CPP, DROPS],
            ratios: &[("vswitchd", "ovs", "mpps"), ("vswitchd", "limit", "mpps")],
        },
        plots: &["pvp_mpps", "pvp_gbps", "pvp_cycles"],
    },
    Section {
        title: "2. Flow count (testpmd flowgen)",
        what: "The same two ports, but the guest generates (testpmd `flowgen`, `--flowgen-flows=N`: N IPv4/UDP flows, 64-byte frames, both ports) and counts what comes back instead of looping; all three switches see the same traffic. Mpps: frames received by the guest per second; cycles/pkt as in section 1.",
        spec: TableSpec {
            scenario: "flows",
            rows: &["flows", "frame_size"],
            metrics: &[MPPS, CPP],
            ratios: &[("vswitchd", "ovs", "mpps"), ("vswitchd", "limit", "mpps")],
        },
        plots: &["flows_mpps", "flows_cycles"],
    },
    Section {
        title: "3. ACL + flow cache",
        what: "vswitchd only (a third port injects a scapy-written pcap of 1280 IPv4/UDP flows once; the guest then loops them, as `bench-pvp.sh --flows 1280`), with 100 ingress ACL rules on each guest port that all have to be scanned (none matches), flow cache on (`--flow-cache on`) and off. Open vSwitch and testpmd have no third port in this loop and do not take part.",
        spec: TableSpec {
            scenario: "acl",
            rows: &["flow_cache", "flows", "acl_rules", "frame_size"],
            metrics: &[MPPS, CPP],
            ratios: &[],
        },
        plots: &[],
    },
    Section {
        title: "3b. Security groups: OVN's logical pipeline with conntrack",
        what: "The PVP loop of section 1 (64-byte frames, split rings) with both guest ports logical switch ports of one OVN logical switch, Neutron's security groups on them (`bench-pvp.sh` switches `vswitchd-sg` and `ovs-sg`): port security on MAC and IPv4, a drop-everything group at priority 1001 and an allow-related group at 1002 (all IPv4 out, IPv4 UDP in from the group's addresses), so that every frame passes conntrack twice (the sender's zone and the receiver's) as an established connection's. An OVN central (NB, SB, ovn-northd 23.03) beside the switch; `vswitchd`: vswitchd as the OVN chassis (`--ovn-remote`, the ports `iface_id=`); `ovs`: Open vSwitch with DPDK as the chassis, programmed by ovn-controller; `vswitchd-l2`: vswitchd's plain L2 loop in the same run (section 1's), the issue's reference for the pipeline's cost. Mpps and cycles/pkt as in section 1.",
        spec: TableSpec {
            scenario: "sg",
            rows: &["frame_size"],
            metrics: &[MPPS, CPP, DROPS],
            ratios: &[("vswitchd", "ovs", "mpps"), ("vswitchd", "vswitchd-l2", "mpps")],
        },
        plots: &[],
    },
    Section {
        title: "3c. NAT: a load balancer's VIP",
        what: "Section 3b's chassis and security groups on logical switch `pvplb` (ports with port security on their own MAC and IPv4 only) with a UDP load balancer from VIP 198.18.0.100:9 to port b's 198.18.0.2:9 (`bench-pvp.sh` switches `vswitchd-lb` and `ovs-lb`). The guest runs testpmd's `5tswap` on a loop topology (each port answers what it receives, addresses and ports swapped) and port a sends to the VIP: each a→VIP frame is DNAT'd to b, each answer un-DNAT'd back from the VIP, every frame through conntrack twice. Mpps and cycles/pkt as in section 1.",
        spec: TableSpec {
            scenario: "lb",
            rows: &["frame_size"],
            metrics: &[MPPS, CPP, DROPS],
            ratios: &[("vswitchd", "ovs", "mpps")],
        },
        plots: &[],
    },
    Section {
        title: "3d. NAT: a floating IP on a gateway router",
        what: "A gateway router bound to the chassis between switch `fipout` (port a, the external client) and `fipin` (port b, the VM), `dnat_and_snat` of a floating IP to b (`bench-pvp.sh` switches `vswitchd-fip` and `ovs-fip`). A router decrements the TTL, so no loop survives it: the guest generates frames on both ports (testpmd `flowgen`, one flow) to the floating IP and counts what reaches b, each frame having crossed fipout, the router (its SNAT and DNAT zones) and fipin, DNAT'd. Port b's own frames fail its port security and are dropped at once; the switch's cycles/pkt count them too.",
        spec: TableSpec {
            scenario: "fip",
            rows: &["frame_size"],
            metrics: &[MPPS, CPP, DROPS],
            ratios: &[("vswitchd", "ovs", "mpps")],
        },
        plots: &[],
    },
    Section {
        title: "3e. New connections per second through a load balancer VIP",
        what: "`bench-cps.sh`: the chassis of sections 3c and 3d, with a TCP load balancer VIP of three backends (`cps-lb`, Neutron's security groups on both ports) and a floating IP on a gateway router (`cps-fip`). A testpmd guest replays a file of unique TCP SYNs (60,000 source ports per client address) into port a as fast as the switch takes them (tx retry) and counts what reaches port b over the window: each is a connection the switch opened. `limit`: testpmd's own vhost forwarding of the same SYNs, no connection tracking (the generator's ceiling). Both switches' conntrack limits are raised out of the way (12M connections, no per-zone limit).",
        spec: TableSpec {
            scenario: "cps-lb",
            rows: &["connections"],
            metrics: &[CPS, LOST],
            ratios: &[("vswitchd", "ovs", "cps")],
        },
        plots: &[],
    },
    Section {
        title: "3f. New connections per second through a floating IP",
        what: "As section 3e, through the floating IP (each SYN DNAT'd in the gateway router's DNAT zone).",
        spec: TableSpec {
            scenario: "cps-fip",
            rows: &["connections"],
            metrics: &[CPS, LOST],
            ratios: &[("vswitchd", "ovs", "cps")],
        },
        plots: &[],
    },
    Section {
        title: "4. AF_XDP uplink ↔ vhost-user guest",
        what: "A veth pair: the device under test has an AF_XDP socket on one end (native XDP mode) and a vhost-user port to a testpmd guest; a testpmd on `net_af_xdp` on the other end generates or sinks 64-byte frames. `testpmd` is DPDK's own `net_af_xdp` + `net_vhost` io forwarding. The generator and the sink share CPU 0, the device under test polls on CPU 1. Mpps: the sink's Rx-pps.",
        spec: TableSpec {
            scenario: "afxdp",
            rows: &["direction"],
            metrics: &[MPPS],
            ratios: &[("vswitchd", "testpmd", "mpps")],
        },
        plots: &[],
    },
    Section {
        title: "5. TCP through tap ports and through the overlay",
        what: "Two hosts (network namespaces) joined by a veth pair (MTU 1600); on each, a switch with an AF_XDP uplink on its veth end (native mode) and a \"VM\" that is a tap in the namespace (vswitchd's tap port; OVS's internal port). `plain`: the tap and the uplink in one L2 domain, frames cross the veth as they are; `geneve`: the VM is in VNI 5001 and frames cross the veth Geneve-encapsulated; `ovn`: both switches are OVN chassis of one deployment (an OVN central beside them; vswitchd chassis ↔ vswitchd chassis, OVS + ovn-controller ↔ OVS + ovn-controller), the VMs ports of logical switch sw0, frames Geneve-encapsulated with OVN's option, VM MTU 1542. iperf3 from host 0's VM to host 1's for the window. vswitchd runs `--poll adaptive`, OVS (userspace `netdev` datapath, no DPDK) with `pmd-maxsleep=50`, the switch of host k on CPU k. Gbit/s: iperf3's receiver; CPU s/GB: CPU seconds (user + system, from /proc) both switch processes spent during the transfer per 10⁹ bytes received — it includes adaptive polling's idle spinning and excludes the kernel's TCP, tap and veth work. On two cores the TCP stacks, the veth and both switches share the CPUs: the ratio within one run is what compares the switches.",
        spec: TableSpec {
            scenario: "tcp",
            rows: &["topology", "streams"],
            metrics: &[
                GBPS,
                Metric {
                    name: "cpu_s_per_gb",
                    label: "CPU s/GB",
                    decimals: 2,
                },
                Metric {
                    name: "retransmits",
                    label: "retransmits",
                    decimals: 0,
                },
            ],
            ratios: &[("vswitchd", "ovs", "gbps")],
        },
        plots: &[],
    },
    Section {
        title: "5b. Request/response between two VMs (TCP_RR, TCP_CRR)",
        what: "Two QEMU guests (the test guest of `tests/vm/`, TCG: this machine has no usable KVM; one vCPU each) on two vhost-user ports of the switch (`bench-vm-rr.sh`): vswitchd with `--poll adaptive`, OVS with DPDK (`dpdkvhostuserclient` ports, NORMAL action, `pmd-maxsleep=50`). One guest answers; the other runs netperf-style TCP_RR (1-byte request and response on one connection, TCP_NODELAY) and then TCP_CRR (a connection per transaction), each for the window (`vmtool rr`/`crr`, `tests/vm/rr.rs`). `vswitchd-sg` and `ovs-sg`: the same two switches as one OVN 23.03 chassis each (vswitchd `--ovn-remote`; OVS + ovn-controller), the guests on one logical switch with Neutron's security groups (`neutron_pg_drop`, and a group admitting TCP port 5002 and ICMP from its members by `allow-related` ACLs; `scripts/lib/ovn-sg.sh`): every connection is committed to conntrack in both guests' zones. transactions/s and the transactions' latency percentiles, µs. Under TCG the guests' emulated network stacks take nearly all of each transaction, so these figures measure the guests far more than the switch; only the ratio within one run compares the switches.",
        spec: TableSpec {
            scenario: "rr",
            rows: &["test"],
            metrics: &[
                Metric {
                    name: "rate",
                    label: "transactions/s",
                    decimals: 0,
                },
                P50_US,
                P99_US,
            ],
            ratios: &[
                ("vswitchd", "ovs", "rate"),
                ("vswitchd-sg", "ovs-sg", "rate"),
            ],
        },
        plots: &[],
    },
    Section {
        title: "6. Latency under load",
        what: "In the topology of section 5, ICMP echo round trips (`ping -i 0.002`, 500 per level) between the two VMs while iperf3 (TCP, paced with `-b`) runs at 10 %, 50 % and 90 % of the Gbit/s that switch reached in the same round (load 0: no iperf3). The round trip crosses both switches twice and both kernels' ICMP paths; µs.",
        spec: TableSpec {
            scenario: "latency",
            rows: &["topology", "load_pct"],
            metrics: &[
                Metric {
                    name: "min_us",
                    label: "min µs",
                    decimals: 0,
                },
                P50_US,
                P99_US,
                Metric {
                    name: "max_us",
                    label: "max µs",
                    decimals: 0,
                },
            ],
            ratios: &[],
        },
        plots: &["latency_plain", "latency_geneve"],
    },
    Section {
        title: "7. Scale (criterion pipeline bench)",
        what: "`cargo bench --bench pipeline -- scale`: the whole pipeline on in-memory virtqueues (one PMD `poll_once` per 32-frame burst: chain walk, flow key, flow cache or slow path with FDB, grouping, copy into the destination guests' receive buffers); ns per 64-byte frame (criterion's median estimate). Flows: distinct IPv4 source addresses, round-robin, so consecutive frames are of different flows; ports: 1 sending + P−1 receiving guests, the destination MAC cycling over them (1000 flows).",
        spec: TableSpec {
            scenario: "scale",
            rows: &["ports", "flows"],
            metrics: &[Metric {
                name: "ns_per_packet",
                label: "ns/pkt",
                decimals: 1,
            }],
            ratios: &[],
        },
        plots: &["scale_flows", "scale_ports"],
    },
    Section {
        title: "8. Multicast replication",
        what: "One sender, N receivers (`bench-mcast.sh`): the receivers are N virtio-user ports (256-entry rings) of testpmd in rxonly mode on CPU 1, 32 per process; the sender writes 800-byte frames to 239.1.1.1 into a tap port of the switch, paced (`scripts/mcast-sender.py`, on CPU 1 too). vswitchd: one PMD on CPU 0, the receivers static members of the group (`--mcast-static`; testpmd sends no IGMP); OVS: `mcast_snooping_enable=true`, the group unregistered and flooded to the same N ports (the sender's tap is DPDK's `net_tap` as a dpdk port, polled by the PMD as vswitchd polls its tap port). The rate per receiver climbs (40, 80, … kpps) until one receiver loses more than 0.01 % of the frames sent. held kpps: the highest rate held (0: none); replicated Mpps: frames delivered to all receivers per second at it; sender kpps: the rate the sender reached (the sender, not the switch, can be the limit).",
        spec: TableSpec {
            scenario: "mcast_best",
            rows: &["receivers", "frame_size"],
            metrics: &[
                Metric {
                    name: "held_kpps",
                    label: "held kpps",
                    decimals: 0,
                },
                Metric {
                    name: "replicated_mpps",
                    label: "replicated Mpps",
                    decimals: 3,
                },
                Metric {
                    name: "sender_kpps",
                    label: "sender kpps",
                    decimals: 1,
                },
            ],
            ratios: &[("vswitchd", "ovs", "replicated_mpps")],
        },
        plots: &[],
    },
];

/// Whether a target's figure must be at least or at most its bound.
#[derive(Debug, Clone, Copy, Serialize)]
pub enum Bound {
    /// figure ≥ bound.
    AtLeast(f64),
    /// figure ≤ bound.
    AtMost(f64),
}

/// A ratio target: the median of `metric` for `num` over the median for `den`.
pub struct TargetSpec {
    /// What is wanted, in words.
    pub name: &'static str,
    /// Scenario of both figures.
    pub scenario: &'static str,
    /// Metric compared.
    pub metric: &'static str,
    /// Numerator: switch and parameters.
    pub num: (&'static str, &'static [(&'static str, &'static str)]),
    /// Denominator: switch and parameters.
    pub den: (&'static str, &'static [(&'static str, &'static str)]),
    /// The bound on the ratio.
    pub bound: Bound,
}

/// The issue's targets.
pub const TARGETS: &[TargetSpec] = &[
    TargetSpec {
        name: "64 B PVP, split rings: vswitchd Mpps ≥ 1.3× Open vSwitch",
        scenario: "pvp",
        metric: "mpps",
        num: ("vswitchd", &[("ring", "split"), ("frame_size", "64")]),
        den: ("ovs", &[("ring", "split"), ("frame_size", "64")]),
        bound: Bound::AtLeast(1.3),
    },
    TargetSpec {
        name: "64 B PVP, split rings: vswitchd Mpps ≥ 1.0× testpmd io forwarding",
        scenario: "pvp",
        metric: "mpps",
        num: ("vswitchd", &[("ring", "split"), ("frame_size", "64")]),
        den: ("limit", &[("ring", "split"), ("frame_size", "64")]),
        bound: Bound::AtLeast(1.0),
    },
    TargetSpec {
        name: "64 B PVP, split rings: vswitchd cycles/packet ≤ testpmd io forwarding's",
        scenario: "pvp",
        metric: "cycles_per_packet",
        num: ("vswitchd", &[("ring", "split"), ("frame_size", "64")]),
        den: ("limit", &[("ring", "split"), ("frame_size", "64")]),
        bound: Bound::AtMost(1.0),
    },
    TargetSpec {
        name: "1518 B PVP, split rings: vswitchd Mpps ≥ 1.6× Open vSwitch",
        scenario: "pvp",
        metric: "mpps",
        num: ("vswitchd", &[("ring", "split"), ("frame_size", "1518")]),
        den: ("ovs", &[("ring", "split"), ("frame_size", "1518")]),
        bound: Bound::AtLeast(1.6),
    },
    TargetSpec {
        name: "1518 B PVP, split rings: vswitchd Mpps ≥ 1.1× testpmd io forwarding",
        scenario: "pvp",
        metric: "mpps",
        num: ("vswitchd", &[("ring", "split"), ("frame_size", "1518")]),
        den: ("limit", &[("ring", "split"), ("frame_size", "1518")]),
        bound: Bound::AtLeast(1.1),
    },
    TargetSpec {
        name: "64 B PVP, packed rings: vswitchd Mpps ≥ 1.3× Open vSwitch",
        scenario: "pvp",
        metric: "mpps",
        num: ("vswitchd", &[("ring", "packed"), ("frame_size", "64")]),
        den: ("ovs", &[("ring", "packed"), ("frame_size", "64")]),
        bound: Bound::AtLeast(1.3),
    },
    TargetSpec {
        name: "64 B PVP, packed rings: vswitchd cycles/packet ≤ testpmd io forwarding's",
        scenario: "pvp",
        metric: "cycles_per_packet",
        num: ("vswitchd", &[("ring", "packed"), ("frame_size", "64")]),
        den: ("limit", &[("ring", "packed"), ("frame_size", "64")]),
        bound: Bound::AtMost(1.0),
    },
    TargetSpec {
        name: "1518 B PVP, packed rings: vswitchd Mpps ≥ 1.6× Open vSwitch",
        scenario: "pvp",
        metric: "mpps",
        num: ("vswitchd", &[("ring", "packed"), ("frame_size", "1518")]),
        den: ("ovs", &[("ring", "packed"), ("frame_size", "1518")]),
        bound: Bound::AtLeast(1.6),
    },
    TargetSpec {
        name: "1280 flows: vswitchd cycles/packet ≤ 1.1× those of 1 flow",
        scenario: "flows",
        metric: "cycles_per_packet",
        num: ("vswitchd", &[("flows", "1280")]),
        den: ("vswitchd", &[("flows", "1")]),
        bound: Bound::AtMost(1.1),
    },
    TargetSpec {
        name: "64 B PVP with security groups: vswitchd Mpps ≥ 2× Open vSwitch + ovn-controller",
        scenario: "sg",
        metric: "mpps",
        num: ("vswitchd", &[("frame_size", "64")]),
        den: ("ovs", &[("frame_size", "64")]),
        bound: Bound::AtLeast(2.0),
    },
    TargetSpec {
        name: "64 B PVP with security groups: vswitchd Mpps ≥ 0.7× its own plain L2 PVP",
        scenario: "sg",
        metric: "mpps",
        num: ("vswitchd", &[("frame_size", "64")]),
        den: ("vswitchd-l2", &[("frame_size", "64")]),
        bound: Bound::AtLeast(0.7),
    },
    TargetSpec {
        name: "64 B PVP through a load balancer's VIP (DNAT): vswitchd Mpps ≥ 2× Open vSwitch + ovn-controller",
        scenario: "lb",
        metric: "mpps",
        num: ("vswitchd", &[("frame_size", "64")]),
        den: ("ovs", &[("frame_size", "64")]),
        bound: Bound::AtLeast(2.0),
    },
    TargetSpec {
        name: "64 B through a floating IP (DNAT on a gateway router): vswitchd Mpps ≥ 2× Open vSwitch + ovn-controller",
        scenario: "fip",
        metric: "mpps",
        num: ("vswitchd", &[("frame_size", "64")]),
        den: ("ovs", &[("frame_size", "64")]),
        bound: Bound::AtLeast(2.0),
    },
    TargetSpec {
        name: "New connections per second through a load balancer VIP: vswitchd ≥ 2× Open vSwitch + ovn-controller",
        scenario: "cps-lb",
        metric: "cps",
        num: ("vswitchd", &[]),
        den: ("ovs", &[]),
        bound: Bound::AtLeast(2.0),
    },
    TargetSpec {
        name: "New connections per second through a floating IP: vswitchd ≥ 2× Open vSwitch + ovn-controller",
        scenario: "cps-fip",
        metric: "cps",
        num: ("vswitchd", &[]),
        den: ("ovs", &[]),
        bound: Bound::AtLeast(2.0),
    },
    TargetSpec {
        name: "TCP_CRR through security groups: vswitchd connections/s ≥ Open vSwitch + ovn-controller",
        scenario: "rr",
        metric: "rate",
        num: ("vswitchd-sg", &[("test", "tcp_crr")]),
        den: ("ovs-sg", &[("test", "tcp_crr")]),
        bound: Bound::AtLeast(1.0),
    },
    TargetSpec {
        // Per core (TSC over the busy cycles per delivered copy): defined for both
        // switches whether or not they held a rate at 64 receivers (section 8 gives
        // the rates held).
        name: "Multicast, 64 receivers: vswitchd replicated Mpps per core ≥ 1.5× Open vSwitch",
        scenario: "mcast_best",
        metric: "mcopies_per_core_s",
        num: ("vswitchd", &[("receivers", "64")]),
        den: ("ovs", &[("receivers", "64")]),
        bound: Bound::AtLeast(1.5),
    },
    TargetSpec {
        name: "Overlay TCP (1 stream): vswitchd Gbit/s ≥ 3× Open vSwitch userspace Geneve",
        scenario: "tcp",
        metric: "gbps",
        num: ("vswitchd", &[("topology", "geneve"), ("streams", "1")]),
        den: ("ovs", &[("topology", "geneve"), ("streams", "1")]),
        bound: Bound::AtLeast(3.0),
    },
];

/// A target's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// What is wanted.
    pub name: String,
    /// The bound on the ratio.
    pub bound: Bound,
    /// Numerator and denominator medians, when both were measured.
    pub figures: Option<(f64, f64)>,
    /// The ratio.
    pub ratio: Option<f64>,
    /// Met, not met, or not measured (`None`).
    pub met: Option<bool>,
}

/// Evaluates every target over `aggs`.
pub fn targets(aggs: &[Aggregate]) -> Vec<Outcome> {
    TARGETS
        .iter()
        .map(|t| {
            let get = |(sw, p): (&str, &[(&str, &str)])| {
                find(aggs, t.scenario, sw, p).and_then(|a| a.median(t.metric))
            };
            let figures = get(t.num).zip(get(t.den));
            let ratio = figures.and_then(|(n, d)| (d != 0.0).then_some(n / d));
            let met = ratio.map(|r| match t.bound {
                Bound::AtLeast(b) => r >= b,
                Bound::AtMost(b) => r <= b,
            });
            Outcome {
                name: t.name.into(),
                bound: t.bound,
                figures,
                ratio,
                met,
            }
        })
        .collect()
}

/// The targets as a markdown table.
pub fn targets_table(outcomes: &[Outcome]) -> String {
    let mut s = String::from("| target | figures (medians) | ratio | met |\n|---|---|---|---|\n");
    for o in outcomes {
        let (figs, ratio) = match (o.figures, o.ratio) {
            (Some((n, d)), Some(r)) => (format!("{} / {}", sig(n), sig(d)), format!("{r:.2}×")),
            _ => ("not measured".into(), "–".into()),
        };
        let met = match o.met {
            Some(true) => "**met**",
            Some(false) => "**not met**",
            None => "not measured",
        };
        s.push_str(&format!("| {} | {figs} | {ratio} | {met} |\n", o.name));
    }
    s
}

/// Three significant-ish digits: 7.12, 71.2, 712.
fn sig(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// Points (x = numeric parameter `x_key`, y = median of `metric`) per switch of
/// `scenario`, over aggregates whose parameters include `filter`.
fn series_by_switch(
    aggs: &[Aggregate],
    scenario: &str,
    x_key: &str,
    metric: &str,
    filter: &[(&str, &str)],
) -> Vec<Series> {
    let mine: Vec<&Aggregate> = aggs
        .iter()
        .filter(|a| a.scenario == scenario)
        .filter(|a| {
            filter.iter().all(|(k, v)| {
                a.params
                    .get(*k)
                    .is_some_and(|x| crate::raw::value_text(x) == *v)
            })
        })
        .collect();
    switches_of(&mine)
        .into_iter()
        .map(|sw| {
            let mut points: Vec<(f64, f64)> = mine
                .iter()
                .filter(|a| a.switch == sw)
                .filter_map(|a| Some((a.param_f64(x_key)?, a.median(metric)?)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { name: sw, points }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn chart(stem: &str, title: &str, x: &str, y: &str, log_x: bool, series: Vec<Series>) -> Chart {
    Chart {
        stem: stem.into(),
        title: title.into(),
        x_label: x.into(),
        y_label: y.into(),
        log_x,
        // Costs and latencies rise to the right; rates fall.
        legend_left: stem.contains("cycles")
            || stem.starts_with("scale")
            || stem.starts_with("latency"),
        series,
    }
}

/// Every chart of the report (charts without points are skipped when written).
pub fn charts(aggs: &[Aggregate]) -> Vec<Chart> {
    let size = "frame size (bytes)";
    let mut v = vec![
        chart(
            "pvp_mpps",
            "PVP loop, 1 flow: Mpps against frame size",
            size,
            "Mpps (guest RX)",
            false,
            series_by_switch(aggs, "pvp", "frame_size", "mpps", &[]),
        ),
        chart(
            "pvp_gbps",
            "PVP loop, 1 flow: Gbit/s against frame size",
            size,
            "Gbit/s (frame bits)",
            false,
            series_by_switch(aggs, "pvp", "frame_size", "gbps", &[]),
        ),
        chart(
            "pvp_cycles",
            "PVP loop: the switch's CPU cycles per packet",
            size,
            "TSC cycles per packet",
            false,
            series_by_switch(aggs, "pvp", "frame_size", "cycles_per_packet", &[]),
        ),
        chart(
            "flows_mpps",
            "flowgen, 64 B: Mpps against flow count",
            "flows",
            "Mpps (guest RX)",
            true,
            series_by_switch(aggs, "flows", "flows", "mpps", &[]),
        ),
        chart(
            "flows_cycles",
            "flowgen, 64 B: cycles per packet against flow count",
            "flows",
            "TSC cycles per packet",
            true,
            series_by_switch(aggs, "flows", "flows", "cycles_per_packet", &[]),
        ),
        chart(
            "scale_flows",
            "pipeline bench, 2 ports: ns per packet against flows",
            "flows",
            "ns per packet",
            true,
            series_by_switch(aggs, "scale", "flows", "ns_per_packet", &[("ports", "2")]),
        ),
        chart(
            "scale_ports",
            "pipeline bench, 1000 flows: ns per packet against ports",
            "ports",
            "ns per packet",
            true,
            series_by_switch(
                aggs,
                "scale",
                "ports",
                "ns_per_packet",
                &[("flows", "1000")],
            ),
        ),
    ];
    for topo in ["plain", "geneve"] {
        let mut series = Vec::new();
        for pct in ["p50_us", "p99_us"] {
            for mut s in series_by_switch(aggs, "latency", "load_pct", pct, &[("topology", topo)]) {
                s.name = format!("{} {}", s.name, &pct[..3]);
                series.push(s);
            }
        }
        v.push(chart(
            &format!("latency_{topo}"),
            &format!("ICMP round trip under TCP load ({topo})"),
            "load (% of the switch's maximum)",
            "µs",
            false,
            series,
        ));
    }
    v
}

/// Where a series of points rises most steeply from one point to the next: the pair of
/// x values and the factor by which y grew; `None` with fewer than two points.
pub fn steepest_rise(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    points
        .windows(2)
        .filter(|w| w[0].1 > 0.0)
        .map(|w| (w[0].0, w[1].0, w[1].1 / w[0].1))
        .max_by(|a, b| a.2.total_cmp(&b.2))
}

/// The scale section's reading of its own figures: where ns/packet bends, and why.
fn scale_notes(aggs: &[Aggregate]) -> String {
    let mut s = String::new();
    let flows = series_by_switch(aggs, "scale", "flows", "ns_per_packet", &[("ports", "2")]);
    if let Some((a, b, f)) = flows.first().and_then(|x| steepest_rise(&x.points)) {
        let (lo, hi) = flows[0]
            .points
            .iter()
            .fold((f64::INFINITY, 0f64), |(lo, hi), p| {
                (lo.min(p.1), hi.max(p.1))
            });
        if f < 1.25 {
            s.push_str(&format!(
                "\nFlows: no bend — from the fewest to the most flows the cost per packet stays \
                 within {lo:.1}–{hi:.1} ns (the steepest step, {a} → {b} flows, is ×{f:.2}). Past \
                 8192 flows the exact-match cache (`flowcache::emc::DEFAULT_ENTRIES`, 4-way \
                 buckets) can no longer hold every flow, yet the cost stays flat: with no ACL \
                 rules the slow path is one FDB lookup and a cache insert, which here costs about \
                 what a hit does; with rules, a miss also pays the rule scan (section 3's cache \
                 on/off figures show what that costs).\n"
            ));
        } else {
            s.push_str(&format!(
                "\nFlows: the cost per packet bends between {a} and {b} flows (×{f:.2}). The \
                 exact-match cache holds 8192 flows per PMD (4-way buckets, \
                 `flowcache::emc::DEFAULT_ENTRIES`): beyond it most lookups miss, evict and take \
                 the slow path (admission, ACL, FDB, install), and the table's working set \
                 outgrows the L1/L2 caches.\n"
            ));
        }
    }
    let ports = series_by_switch(
        aggs,
        "scale",
        "ports",
        "ns_per_packet",
        &[("flows", "1000")],
    );
    if let Some((a, b, f)) = ports.first().and_then(|x| steepest_rise(&x.points)) {
        s.push_str(&format!(
            "\nPorts: the cost per packet bends between {a} and {b} ports (×{f:.2}). A burst \
             of 32 frames is grouped by destination, and each destination costs one batch: a \
             used-ring update, a notification check and its own receive-buffer walk; with 63 \
             destinations a burst has about one frame per batch, so those per-batch costs are \
             paid per frame.\n"
        ));
    }
    s
}

/// The "not run" notes of `scenario` as markdown bullets.
fn not_run(records: &[Record], scenario: &str) -> String {
    let mut seen = Vec::new();
    for r in records.iter().filter(|r| r.scenario == scenario) {
        if let Some(why) = &r.not_run {
            let who = if r.switch.is_empty() {
                String::new()
            } else {
                format!("{} ", r.switch)
            };
            let line = format!("- {who}not run: {why}\n");
            if !seen.contains(&line) {
                seen.push(line);
            }
        }
    }
    seen.concat()
}

/// A field of the machine description, or "?".
pub fn field(machine: &Value, key: &str) -> String {
    machine
        .get(key)
        .map(crate::raw::value_text)
        .unwrap_or_else(|| "?".into())
}

/// The machine and run in one paragraph.
pub fn machine_line(machine: &Value) -> String {
    format!(
        "Run of {} ({} mode, rounds: {}, switches interleaved in each) on {}, {} cores, kernel {}; vswitch {}, Open vSwitch {}, DPDK {}.",
        field(machine, "date"),
        field(machine, "mode"),
        field(machine, "rounds"),
        field(machine, "cpu_model"),
        field(machine, "cores"),
        field(machine, "kernel"),
        field(machine, "vswitch_version"),
        field(machine, "ovs_version"),
        field(machine, "dpdk_version"),
    )
}

/// The whole report.md.
pub fn markdown(
    machine: &Value,
    records: &[Record],
    aggs: &[Aggregate],
    plots: &[String],
) -> String {
    let mut s = String::from("# vswitch benchmark report\n\n");
    s.push_str(&machine_line(machine));
    s.push_str(
        "\n\nEvery figure below was measured by the run that wrote this file (`results.json` \
         holds each round's raw figure); cells are medians over rounds with the min–max range \
         in brackets.\n\n## Targets\n\n",
    );
    s.push_str(&targets_table(&targets(aggs)));
    for sec in SECTIONS {
        s.push_str(&format!("\n## {}\n\n{}\n\n", sec.title, sec.what));
        match table::render(&sec.spec, aggs) {
            Some(t) => s.push_str(&t),
            None if records.iter().any(|r| r.scenario == sec.spec.scenario) => {}
            None => s.push_str("Not run in this run (not selected).\n"),
        }
        let nr = not_run(records, sec.spec.scenario);
        if !nr.is_empty() {
            s.push('\n');
            s.push_str(&nr);
        }
        if sec.spec.scenario == "scale" {
            s.push_str(&scale_notes(aggs));
        }
        for p in sec.plots {
            if plots.iter().any(|x| x == p) {
                s.push_str(&format!("\n![{p}](plots/{p}.svg)\n"));
            }
        }
    }
    s
}

/// The excerpt for docs/benchmarks.md: machine, targets, the PVP table and one plot at
/// `plot_path`; `report_link` is the full report's path from the page that shows it.
pub fn readme_excerpt(
    machine: &Value,
    aggs: &[Aggregate],
    report_link: &str,
    plot_path: Option<&str>,
) -> String {
    let mut s = format!(
        "{}\nGenerated by `scripts/bench-report.sh`; every scenario (flow counts, ACL and flow cache, AF_XDP, TCP and overlay, latency, pipeline scale) is in [{report_link}]({report_link}), this run's copy of `target/bench-report/report.md`. Medians over rounds, min–max in brackets.\n\n",
        machine_line(machine)
    );
    s.push_str(&targets_table(&targets(aggs)));
    if let Some(t) = table::render(&SECTIONS[0].spec, aggs) {
        s.push_str(&format!(
            "\nPVP loop, 1 flow ({}):\n\n{t}",
            "section 1 of the report"
        ));
    }
    if let Some(p) = plot_path {
        s.push_str(&format!("\n![PVP Mpps against frame size]({p})\n"));
    }
    s
}

/// The README's one headline figure: 64 B PVP on split rings against Open vSwitch with
/// DPDK and testpmd's own vhost forwarding, with the run it comes from and a link to
/// `details` (the page with every figure). `None` when the run did not measure it.
pub fn headline(machine: &Value, aggs: &[Aggregate], details: &str) -> Option<String> {
    let outcomes = targets(aggs);
    let pvp64 = |den: &str| {
        outcomes.iter().find(|o| {
            o.name.starts_with("64 B PVP, split rings: vswitchd Mpps") && o.name.contains(den)
        })
    };
    let (ovs, limit) = (pvp64("Open vSwitch")?, pvp64("testpmd")?);
    let ((mpps, _), ovs_ratio) = (ovs.figures?, ovs.ratio?);
    let limit_ratio = limit.ratio?;
    Some(format!(
        "**64 B PVP, split rings, one PMD: vswitchd {} Mpps, {ovs_ratio:.2}× Open vSwitch with \
         DPDK and {limit_ratio:.2}× testpmd's own vhost forwarding** (run of {} on {}, {} \
         cores; medians of {} rounds). Every scenario, its targets and how to reproduce \
         them: [{details}]({details}).",
        sig(mpps),
        field(machine, "date"),
        field(machine, "cpu_model"),
        field(machine, "cores"),
        field(machine, "rounds"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::aggregate;
    use crate::raw::parse_lines;

    fn sample() -> (Vec<Record>, Vec<Aggregate>) {
        let text = r#"
{"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":64,"flows":1},"metrics":{"mpps":7.0,"cycles_per_packet":200}}
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":64,"flows":1},"metrics":{"mpps":5.0,"cycles_per_packet":290}}
{"scenario":"pvp","switch":"limit","round":1,"params":{"frame_size":64,"flows":1},"metrics":{"mpps":7.0,"cycles_per_packet":180}}
{"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":64,"flows":1,"ring":"packed"},"metrics":{"mpps":1.0,"cycles_per_packet":500}}
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":64,"flows":1,"ring":"packed"},"metrics":{"mpps":2.0}}
{"scenario":"flows","switch":"vswitchd","round":1,"params":{"frame_size":64,"flows":1},"metrics":{"mpps":7.0,"cycles_per_packet":200}}
{"scenario":"flows","switch":"vswitchd","round":1,"params":{"frame_size":64,"flows":1280},"metrics":{"mpps":6.0,"cycles_per_packet":230}}
{"scenario":"latency","switch":"limit","not_run":"testpmd has no tap"}
"#;
        let r = parse_lines(text).unwrap();
        let a = aggregate(&r);
        (r, a)
    }

    #[test]
    fn targets_met_not_met_and_unmeasured() {
        let (_, aggs) = sample();
        let t = targets(&aggs);
        assert_eq!(t.len(), TARGETS.len());
        // 7/5 = 1.4 ≥ 1.3
        assert_eq!(t[0].met, Some(true));
        assert!((t[0].ratio.unwrap() - 1.4).abs() < 1e-9);
        // 7/7 = 1.0 ≥ 1.0
        assert_eq!(t[1].met, Some(true));
        // 200/180 > 1.0
        assert_eq!(t[2].met, Some(false));
        // no 1518 B figures
        assert_eq!(t[3].met, None);
        // Packed rings: the packed figures only (1/2), not the split ones; no packed
        // figures for testpmd.
        assert_eq!(t[5].figures, Some((1.0, 2.0)));
        assert_eq!(t[5].met, Some(false));
        assert_eq!(t[6].met, None);
        // 230/200 = 1.15 > 1.1
        assert_eq!(t[8].met, Some(false));
        let table = targets_table(&t);
        assert!(
            table.contains(
                "| 64 B PVP, split rings: vswitchd Mpps ≥ 1.3× Open vSwitch | 7.000 / 5.000 | 1.40× | **met** |"
            ),
            "{table}"
        );
        assert!(table.contains("not measured"));
    }

    #[test]
    fn markdown_has_sections_tables_not_run_and_plots() {
        let (records, aggs) = sample();
        let machine = serde_json::json!({"date": "2026-11-26", "cpu_model": "Xeon", "cores": 2, "mode": "quick"});
        let md = markdown(&machine, &records, &aggs, &["pvp_mpps".into()]);
        assert!(md.contains("Run of 2026-11-26 (quick mode"));
        assert!(md.contains("on Xeon, 2 cores"));
        assert!(md.contains("| ring | frame size | vswitchd Mpps |"), "{md}");
        assert!(md.contains("- limit not run: testpmd has no tap"));
        assert!(md.contains("![pvp_mpps](plots/pvp_mpps.svg)"));
        assert!(!md.contains("plots/pvp_gbps.svg"));
        // Not selected at all:
        assert!(md.contains("Not run in this run (not selected)."));
        let ex = readme_excerpt(
            &machine,
            &aggs,
            "bench/report.md",
            Some("bench/pvp_mpps.svg"),
        );
        assert!(ex.contains("![PVP Mpps against frame size](bench/pvp_mpps.svg)"));
        assert!(ex.contains("[bench/report.md](bench/report.md)"));
    }

    #[test]
    fn headline_is_the_64b_pvp_figure_against_both_references() {
        let (_, aggs) = sample();
        let machine =
            serde_json::json!({"date": "2026-11-26", "cpu_model": "Xeon", "cores": 2, "rounds": 3});
        let h = headline(&machine, &aggs, "docs/benchmarks.md").expect("measured");
        assert!(h.contains("vswitchd 7.000 Mpps, 1.40× Open vSwitch"), "{h}");
        assert!(h.contains("1.00× testpmd"), "{h}");
        assert!(
            h.contains("[docs/benchmarks.md](docs/benchmarks.md)"),
            "{h}"
        );
        assert_eq!(headline(&machine, &aggs[..0], "x"), None);
    }

    #[test]
    fn steepest_rise_finds_the_bend() {
        let pts = [
            (1.0, 20.0),
            (1000.0, 22.0),
            (10000.0, 44.0),
            (100000.0, 50.0),
        ];
        assert_eq!(steepest_rise(&pts), Some((1000.0, 10000.0, 2.0)));
        assert_eq!(steepest_rise(&pts[..1]), None);
    }

    #[test]
    fn chart_series_sorted_per_switch() {
        let (_, aggs) = sample();
        let c = charts(&aggs);
        let flows = c.iter().find(|c| c.stem == "flows_cycles").unwrap();
        assert_eq!(flows.series.len(), 1);
        assert_eq!(flows.series[0].points, vec![(1.0, 200.0), (1280.0, 230.0)]);
        let pvp = c.iter().find(|c| c.stem == "pvp_mpps").unwrap();
        let names: Vec<&str> = pvp.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["vswitchd", "ovs", "limit"]);
    }
}
