//! Per-port and per-PMD counters.
//!
//! Every counter has exactly one writer, the PMD thread that owns it, so it is a plain
//! `AtomicU64` updated with `Relaxed` load and store (no read-modify-write, no lock);
//! readers (`vswitchctl`) sum the per-PMD copies. Relaxed is enough: a counter is a
//! statistic, no other memory is published through it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

/// Why the switch dropped a frame. Every drop is counted under exactly one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum DropReason {
    /// The destination guest had no rx buffer available (its rx virtqueue was empty).
    NoRxBuffer = 0,
    /// A descriptor chain was malformed: a loop, an index or address out of range,
    /// a nested indirect table, too many descriptors, or a write-only buffer on tx.
    BadDescriptor,
    /// The frame was larger than the destination's rx buffers can hold, or than 64 KiB, or
    /// (AF_XDP uplinks) than the uplink's MTU plus 18 bytes, or than a multi-buffer chain
    /// of 17 UMEM frames (one UMEM frame without multi-buffer): see docs/afxdp.md, "Jumbo frames".
    FrameTooBig,
    /// The frame was shorter than an Ethernet header.
    Runt,
    /// The destination port's link was down (no driver attached, its rings not ready, or an
    /// AF_XDP uplink's interface down or without carrier).
    PortDown,
    /// A frame of a VLAN the port does not carry: tagged on an access (VLAN-tagged)
    /// port, or outside a trunk port's VLANs.
    VlanTagged,
    /// The destination is the port the frame came from (a MAC learned behind the source).
    SamePort,
    /// A flooded frame (broadcast, multicast, unknown unicast) found no other port up in
    /// its VLAN.
    NoDestination,
    /// An ingress ACL rule said drop (also counted per rule: `vswitchctl acl list`).
    Acl,
    /// The virtio-net header asked for an offload that cannot or may not be done: one
    /// the driver did not negotiate (each GSO type needs its own HOST_TSO feature), an
    /// unknown or UDP GSO type, a `gso_size` below 48 bytes, or checksum, TCP or
    /// `hdr_len` offsets outside the frame (`VirtioNetHdr::is_valid_for`).
    BadOffload,
    /// An AF_XDP or tap port had no free transmit buffer: every UMEM tx frame was still
    /// in flight (the completion ring had not returned them) or the tx ring was full, or
    /// all tap write buffers were in use.
    NoTxBuffer,
    /// The kernel refused a frame written to a tap device (e.g. the tap was down, or the
    /// virtio-net header was refused), or an AF_XDP transmit was not accepted.
    TxError,
    /// A frame from a Geneve tunnel was bound for a MAC behind another tunnel: tunnelled
    /// frames never go back into a tunnel (split horizon).
    SplitHorizon,
    /// The frame's source MAC was new, and learning it would pass the FDB's limit
    /// (`--fdb-max-macs`) or its port's (`max_macs=`, `--fdb-port-max-macs`).
    MacLimit,
    /// Port security: the frame's source MAC is not the port's `mac=` or one of its
    /// `allowed_macs=` (for an OVN port: not in its `Port_Binding.port_security`).
    SpoofedSource,
    /// The port names an OVN logical switch port (`iface_id=`) that is not bound here:
    /// the port is in no bridge domain (`vswitchctl show` and `vswitchctl ovn` say why).
    OvnUnbound,
    /// Unicast to a MAC no port of the OVN logical switch has, while no port has
    /// `unknown` addresses (OVN drops it too).
    OvnUnknownUnicast,
    /// Bound for an OVN logical router port's MAC: routing needs OVN's logical router
    /// pipeline, which a vswitchd chassis does not run (docs/ovn.md, "What a vswitchd
    /// chassis does not do").
    OvnRouterUnsupported,
    /// From an OVN port whose binding on this chassis awaits activation (an additional
    /// chassis with `activation-strategy=rarp`, before the port's RARP): only RARP
    /// passes.
    OvnNotActivated,
    /// A malformed IGMP or MLD message (bad checksum or length, a group that is not
    /// multicast, over 9216 bytes): multicast snooping drops it rather than act on it.
    BadMcastControl,
    /// IP multicast to a group no port joined, in an OVN logical switch that snoops
    /// (`mcast_snoop=true`) and has no `mcast_flood` port: OVN drops it too
    /// (`mcast_flood_unregistered` is not visible to a chassis; see docs/ovn.md).
    McastUnregistered,
    /// Dropped by OVN's logical pipeline: a security group (ACL), port security, no
    /// route, no destination, a TTL run out with no error sent back (`vswitchctl ovn
    /// trace` tells which flow).
    OvnPipeline,
    /// A new connection beyond its conntrack zone's maximum (`--ct-zone-max`): only that
    /// logical port's new connections are refused.
    CtZoneFull,
    /// A new connection beyond the conntrack table's maximum (`--ct-max-connections`).
    CtTableFull,
    /// A frame for the slow path (ARP/ND, DHCP, ICMP errors, TCP resets) while its
    /// queue was full or its rate limit reached.
    SlowPathBusy,
    /// A new connection to translate (SNAT, DNAT, a load balancer) while every address
    /// and port of its range was taken.
    NatExhausted,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 26] = [
        DropReason::NoRxBuffer,
        DropReason::BadDescriptor,
        DropReason::FrameTooBig,
        DropReason::Runt,
        DropReason::PortDown,
        DropReason::VlanTagged,
        DropReason::SamePort,
        DropReason::NoDestination,
        DropReason::Acl,
        DropReason::BadOffload,
        DropReason::NoTxBuffer,
        DropReason::TxError,
        DropReason::SplitHorizon,
        DropReason::MacLimit,
        DropReason::SpoofedSource,
        DropReason::OvnUnbound,
        DropReason::OvnUnknownUnicast,
        DropReason::OvnRouterUnsupported,
        DropReason::OvnNotActivated,
        DropReason::BadMcastControl,
        DropReason::McastUnregistered,
        DropReason::OvnPipeline,
        DropReason::CtZoneFull,
        DropReason::CtTableFull,
        DropReason::SlowPathBusy,
        DropReason::NatExhausted,
    ];

    /// The snake_case name used in `vswitchctl stats` and metrics.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::NoRxBuffer => "no_rx_buffer",
            DropReason::BadDescriptor => "bad_descriptor",
            DropReason::FrameTooBig => "frame_too_big",
            DropReason::Runt => "runt",
            DropReason::PortDown => "port_down",
            DropReason::VlanTagged => "vlan_tagged",
            DropReason::SamePort => "same_port",
            DropReason::NoDestination => "no_destination",
            DropReason::Acl => "acl",
            DropReason::BadOffload => "bad_offload",
            DropReason::NoTxBuffer => "no_tx_buffer",
            DropReason::TxError => "tx_error",
            DropReason::SplitHorizon => "split_horizon",
            DropReason::MacLimit => "mac_limit",
            DropReason::SpoofedSource => "spoofed_source",
            DropReason::OvnUnbound => "ovn_unbound",
            DropReason::OvnUnknownUnicast => "ovn_unknown_unicast",
            DropReason::OvnRouterUnsupported => "ovn_router_unsupported",
            DropReason::OvnNotActivated => "ovn_not_activated",
            DropReason::BadMcastControl => "bad_mcast_control",
            DropReason::McastUnregistered => "mcast_unregistered",
            DropReason::OvnPipeline => "ovn_pipeline",
            DropReason::CtZoneFull => "ct_zone_full",
            DropReason::CtTableFull => "ct_table_full",
            DropReason::SlowPathBusy => "slow_path_busy",
            DropReason::NatExhausted => "nat_exhausted",
        }
    }
}

const NREASONS: usize = DropReason::ALL.len();

/// A single-writer counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning thread may call this (single writer).
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Reads the value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Counters one PMD thread keeps for one port.
///
/// `rx` is what the switch received from the port (the guest's transmit queue);
/// `tx` is what the switch delivered into the port (the guest's receive queue), as Open
/// vSwitch counts. Drops are charged to the port where the frame was lost: the source
/// port for bad descriptors and runts, the destination port for the rest.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct PortCounters {
    /// Frames received from the guest.
    pub rx_packets: Counter,
    /// Bytes received from the guest (Ethernet frame, without the virtio-net header).
    pub rx_bytes: Counter,
    /// Frames delivered to the guest.
    pub tx_packets: Counter,
    /// Bytes delivered to the guest.
    pub tx_bytes: Counter,
    /// TSO frames segmented in software for this guest (it lacks GUEST_TSO4/6).
    pub segmented: Counter,
    /// Partial checksums completed in software for this guest (it lacks GUEST_CSUM).
    pub csum_completed: Counter,
    /// Frames merged by software GRO for this port (tunnelled TCP segments delivered as
    /// one large frame).
    pub coalesced: Counter,
    /// The segments those frames were made of.
    pub coalesced_segments: Counter,
    drops: [Counter; NREASONS],
}

impl PortCounters {
    /// Counts `n` drops for `reason`.
    #[inline]
    pub fn drop(&self, reason: DropReason, n: u64) {
        self.drops[reason as usize].add(n);
    }

    /// Drops counted for `reason`.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops[reason as usize].get()
    }
}

/// A port's counters summed over all PMD threads, as `vswitchctl stats` shows them.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received from the guest.
    pub rx_packets: u64,
    /// Bytes received from the guest.
    pub rx_bytes: u64,
    /// Frames delivered to the guest.
    pub tx_packets: u64,
    /// Bytes delivered to the guest.
    pub tx_bytes: u64,
    /// TSO frames segmented in software for this guest.
    pub segmented: u64,
    /// Partial checksums completed in software for this guest.
    pub csum_completed: u64,
    /// Frames merged by software GRO for this port.
    pub coalesced: u64,
    /// The segments they were made of.
    pub coalesced_segments: u64,
    /// Drops by reason; every reason is present, zero or not.
    pub drops: std::collections::BTreeMap<&'static str, u64>,
    /// Sum of all drops.
    pub drops_total: u64,
}

impl PortStats {
    /// Adds one PMD's counters for this port.
    pub fn accumulate(&mut self, c: &PortCounters) {
        self.rx_packets += c.rx_packets.get();
        self.rx_bytes += c.rx_bytes.get();
        self.tx_packets += c.tx_packets.get();
        self.tx_bytes += c.tx_bytes.get();
        self.segmented += c.segmented.get();
        self.csum_completed += c.csum_completed.get();
        self.coalesced += c.coalesced.get();
        self.coalesced_segments += c.coalesced_segments.get();
        for r in DropReason::ALL {
            let n = c.drops(r);
            *self.drops.entry(r.name()).or_default() += n;
            self.drops_total += n;
        }
    }

    /// An all-zero record with every drop reason present.
    pub fn zero() -> Self {
        let mut s = PortStats::default();
        for r in DropReason::ALL {
            s.drops.insert(r.name(), 0);
        }
        s
    }
}

/// Counters of one PMD thread's own work.
#[derive(Debug, Default)]
pub struct PmdCounters {
    /// Frames processed (popped from tx virtqueues).
    pub packets: Counter,
    /// Non-empty bursts processed.
    pub batches: Counter,
    /// TSC cycles (or ns where there is no TSC) spent in rounds that found work.
    pub busy_cycles: Counter,
    /// Cycles spent in rounds that found nothing, including sleeping.
    pub idle_cycles: Counter,
    /// Poll rounds (every owned queue polled once) that found work.
    pub busy_rounds: Counter,
    /// Poll rounds that found nothing (Open vSwitch's idle iterations): with busy
    /// polling, `idle_cycles / idle_rounds` is what one empty pass over the queues costs.
    pub idle_rounds: Counter,
    /// Times the thread went to sleep waiting for a kick.
    pub sleeps: Counter,
    /// Short sleeps (≤ 50 µs) of an adaptive PMD after a light burst.
    pub naps: Counter,
    /// TSC cycles per pipeline stage ([`STAGE_NAMES`]), counted only in builds with the
    /// `stage-cycles` feature.
    pub stages: [Counter; STAGE_NAMES.len()],
}

/// The data path's stages in [`PmdCounters::stages`] order: the receive walk,
/// classification, grouping by destination, delivery, the source's completion.
pub const STAGE_NAMES: [&str; 5] = ["rx", "classify", "group", "deliver", "complete"];

/// Reads a cycle counter: the TSC on x86_64, nanoseconds elsewhere.
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions and touches no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::time::Instant;
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_sum_over_pmds() {
        let a = PortCounters::default();
        let b = PortCounters::default();
        a.rx_packets.add(3);
        b.rx_packets.add(4);
        a.drop(DropReason::NoRxBuffer, 2);
        b.drop(DropReason::PortDown, 1);
        let mut s = PortStats::zero();
        s.accumulate(&a);
        s.accumulate(&b);
        assert_eq!(s.rx_packets, 7);
        assert_eq!(s.drops["no_rx_buffer"], 2);
        assert_eq!(s.drops["port_down"], 1);
        assert_eq!(s.drops["bad_descriptor"], 0);
        assert_eq!(s.drops_total, 3);
    }
}
