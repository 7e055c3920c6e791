//! The control protocol: one JSON message per line over the control socket, a typed
//! request and a typed reply shared by `vswitchd` and `vswitchctl`.
//!
//! A request is `{"version":1,"cmd":"stats"}` (a [`Request`] tagged by `cmd`, with its
//! fields beside it); a reply is `{"version":1,"ok":{"reply":"stats","data":[…]}}` or
//! `{"version":1,"error":"…"}`. A client may send several requests on one connection,
//! one line each, and gets one reply line per request, in order.
//!
//! Limits (the server's): a request line is at most [`MAX_REQUEST_BYTES`] (a longer
//! one gets an error reply and the connection is closed); a client that sends nothing
//! for [`IDLE_TIMEOUT`] is disconnected. Any number of clients are served at once.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::PortFlag;
pub use crate::ports::show::{ShowAfxdp, ShowMigration, ShowPort};

/// The protocol version this build speaks. A request with another version is refused.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request line the server reads (bytes, newline included).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// A client that sends no complete request for this long is disconnected.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// A request to the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// Ports, link, queues, features, PMD of each queue.
    Show,
    /// Per-port counters and drops by reason.
    Stats,
    /// The MAC table.
    Fdb,
    /// The multicast group table (IGMP/MLD snooping): groups, members, router ports.
    Mdb,
    /// Per-PMD counters and flow-cache hits.
    PmdStats,
    /// The flows each PMD (or only `pmd`) has cached.
    Flows {
        /// Only this PMD.
        #[serde(default)]
        pmd: Option<usize>,
    },
    /// Per AF_XDP uplink, the offload plan.
    Offloads,
    /// ACL rules with their drop counts (of every port, or only `port`).
    AclList {
        /// Only this port.
        #[serde(default)]
        port: Option<String>,
    },
    /// Adds a rule to `port`'s ACL, at the end or at `position`.
    AclAdd {
        /// Port name.
        port: String,
        /// Insert at this index instead of appending.
        #[serde(default)]
        position: Option<usize>,
        /// The rule in the one-line syntax (`drop ip_proto=udp l4_dst=5000-5999`).
        rule: String,
    },
    /// Deletes rule `index` of `port`'s ACL.
    AclDel {
        /// Port name.
        port: String,
        /// Rule index.
        index: usize,
    },
    /// Adds a port, written exactly as vswitchd's flag `flag` takes it.
    AddPort {
        /// The flag the spec is written for.
        flag: PortFlag,
        /// `NAME=PATH[,…]`, `NAME=IFACE[,…]` or `NAME=IFNAME[,…]`.
        spec: String,
    },
    /// Deletes a port of any kind.
    DelPort {
        /// Port name.
        name: String,
    },
    /// Reassigns rx queues to PMDs by measured load.
    PmdRebalance,
    /// Re-reads the configuration file and applies the difference.
    Reload,
    /// Tunnel endpoints: remotes with their next hops, counters, drops by reason.
    Tunnels,
    /// The OVN chassis: Southbound connection, claimed ports, other chassis.
    Ovn,
    /// A packet through OVN's logical pipeline, as `ovn-trace` traces it.
    OvnTrace {
        /// The packet as a microflow: `inport == "vm1" && eth.src == ... && ip4 && ...`.
        microflow: String,
        /// The state each connection tracking lookup answers, in turn (`new`,
        /// `est|rpl`...; then `est|trk`).
        #[serde(default)]
        ct: Vec<String>,
    },
    /// Connection tracking: connections per zone, limits, counters.
    Conntrack,
    /// Removes connections: every one, or one zone's.
    ConntrackFlush {
        /// The zone (none: all).
        #[serde(default)]
        zone: Option<u16>,
    },
}

impl Request {
    /// Whether the request changes the switch (ports, ACLs, queue placement, the
    /// configuration) rather than reading it: only root and the daemon's own user may
    /// send those (the control socket's group may read).
    pub fn is_change(&self) -> bool {
        matches!(
            self,
            Request::AclAdd { .. }
                | Request::AclDel { .. }
                | Request::AddPort { .. }
                | Request::DelPort { .. }
                | Request::PmdRebalance
                | Request::Reload
                | Request::ConntrackFlush { .. }
        )
    }
}

/// A request line: the protocol version and the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestLine {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The request.
    #[serde(flatten)]
    pub request: Request,
}

/// Parses one request line exactly as the server does: the JSON of a [`RequestLine`]
/// (a trailing newline is allowed), refused when its version is not
/// [`PROTOCOL_VERSION`]. The line's length is bounded by the reader
/// ([`MAX_REQUEST_BYTES`]) before it gets here.
///
/// # Errors
/// The message the server replies with: the line is not a request, or is of another
/// protocol version.
pub fn parse_request_line(line: &[u8]) -> Result<Request, String> {
    match serde_json::from_slice::<RequestLine>(line) {
        Ok(r) if r.version != PROTOCOL_VERSION => Err(format!(
            "protocol version {} not supported; this vswitchd speaks {PROTOCOL_VERSION}",
            r.version
        )),
        Ok(r) => Ok(r.request),
        Err(e) => Err(format!("bad request: {e}")),
    }
}

/// A successful reply's data.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reply", content = "data", rename_all = "kebab-case")]
pub enum Response {
    /// To [`Request::Show`].
    Show(ShowReply),
    /// To [`Request::Stats`].
    Stats(Vec<StatsRow>),
    /// To [`Request::Fdb`].
    Fdb(Vec<FdbRowNamed>),
    /// To [`Request::Mdb`].
    Mdb(MdbReply),
    /// To [`Request::PmdStats`].
    PmdStats(Vec<PmdStatsRow>),
    /// To [`Request::Flows`].
    Flows(Vec<FlowsReply>),
    /// To [`Request::Offloads`].
    Offloads(Vec<OffloadsRow>),
    /// To [`Request::AclList`].
    AclList(Vec<AclRow>),
    /// To [`Request::AclAdd`]: where the rule went.
    AclAdded {
        /// Port name.
        port: String,
        /// The rule's index.
        index: usize,
    },
    /// To [`Request::AclDel`]: the rule removed.
    AclDeleted {
        /// Port name.
        port: String,
        /// The rule, in the one-line syntax.
        removed: String,
    },
    /// To [`Request::AddPort`].
    PortAdded {
        /// Port name.
        name: String,
        /// Its id.
        id: u16,
    },
    /// To [`Request::DelPort`].
    PortDeleted {
        /// Port name.
        name: String,
    },
    /// To [`Request::PmdRebalance`].
    Rebalanced(RebalanceReply),
    /// To [`Request::Reload`].
    Reloaded(ReloadReply),
    /// To [`Request::Tunnels`].
    Tunnels(Vec<TunnelRow>),
    /// To [`Request::Ovn`].
    Ovn(Box<OvnReply>),
    /// To [`Request::OvnTrace`].
    OvnTrace(OvnTraceReply),
    /// To [`Request::Conntrack`].
    Conntrack(ConntrackReply),
    /// To [`Request::ConntrackFlush`].
    ConntrackFlushed {
        /// Connections removed.
        removed: u64,
    },
}

/// `vswitchctl ovn trace`: what the logical pipeline does with a packet.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OvnTraceReply {
    /// The detailed trace: pipelines, tables with the flow that matched, actions.
    pub detailed: String,
    /// The minimal trace: what changed, transformations, outputs.
    pub minimal: String,
    /// Each output: `port` (here), `port@chassis` (by tunnel), or `port (nowhere)`.
    pub outputs: Vec<String>,
}

/// One conntrack zone in `vswitchctl conntrack`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CtZoneRow {
    /// The zone.
    pub zone: u16,
    /// What it is: `LOGICAL_PORT` (its ingress and egress steps), or the router's
    /// name.
    pub owner: String,
    /// Connections in it.
    pub connections: u64,
}

/// `vswitchctl conntrack`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConntrackReply {
    /// Connections in all.
    pub connections: u64,
    /// The global maximum (`--ct-max-connections`).
    pub max_connections: u64,
    /// The per-zone maximum (`--ct-zone-max`; 0: none).
    pub zone_max: u64,
    /// Bytes the table holds.
    pub memory_bytes: u64,
    /// Zones with connections, or handed out to a logical port.
    pub zones: Vec<CtZoneRow>,
    /// Counters: created, expired, flushed, table_full, zone_full, invalid_*.
    pub counters: std::collections::BTreeMap<String, u64>,
}

/// A reply line: the protocol version and either the data or an error message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplyLine {
    /// [`PROTOCOL_VERSION`].
    pub version: u32,
    /// The data, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<Response>,
    /// What went wrong, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReplyLine {
    /// The reply to a request that succeeded or failed.
    pub fn new(r: Result<Response, String>) -> Self {
        match r {
            Ok(v) => ReplyLine {
                version: PROTOCOL_VERSION,
                ok: Some(v),
                error: None,
            },
            Err(e) => ReplyLine {
                version: PROTOCOL_VERSION,
                ok: None,
                error: Some(e),
            },
        }
    }
}

/// Sends `req` to the daemon at `socket` and returns its reply (blocking; the client side
/// used by vswitchctl and the tests). Waits up to `timeout` for the reply.
///
/// # Errors
/// The socket cannot be reached, the daemon answered with an error, or the reply is
/// not one this build understands.
pub fn call(socket: &Path, req: Request, timeout: Duration) -> Result<Response, String> {
    let mut s = UnixStream::connect(socket).map_err(|e| {
        format!(
            "cannot reach vswitchd at {}: {e} (is it running? use --socket PATH)",
            socket.display()
        )
    })?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let line = serde_json::to_string(&RequestLine {
        version: PROTOCOL_VERSION,
        request: req,
    })
    .map_err(|e| e.to_string())?;
    writeln!(s, "{line}").map_err(|e| format!("cannot send the request: {e}"))?;
    let mut reply = String::new();
    BufReader::new(s)
        .read_line(&mut reply)
        .map_err(|e| format!("no reply from vswitchd: {e}"))?;
    if reply.is_empty() {
        return Err("vswitchd closed the connection without replying".into());
    }
    let r: ReplyLine =
        serde_json::from_str(&reply).map_err(|e| format!("bad reply from vswitchd: {e}"))?;
    match (r.ok, r.error) {
        (_, Some(e)) => Err(e),
        (Some(v), None) => Ok(v),
        (None, None) => Err("empty reply from vswitchd".into()),
    }
}

/// Moves of one `pmd-rebalance`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RebalanceReply {
    /// Queues that changed PMD.
    pub moved: usize,
    /// The assignment now in force.
    pub pmds: Vec<PmdLoad>,
}

/// One PMD's queues after a rebalance, with the load each was measured at.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PmdLoad {
    /// PMD index.
    pub pmd: usize,
    /// `port/queue` polled.
    pub queues: Vec<String>,
    /// Measured load of each queue (TSC cycles over the measurement window).
    pub cycles: Vec<u64>,
    /// The PMD's share of all measured cycles, percent.
    pub percent: f64,
}

/// One local tunnel endpoint in `tunnels`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TunnelRow {
    /// Name.
    pub name: String,
    /// Local address.
    pub local: String,
    /// The AF_XDP uplink it uses, and that uplink's link state.
    pub uplink: String,
    /// `up` or `down`.
    pub link: String,
    /// The tap that holds the local address, when the uplink's interface does not
    /// (OVS's `br-phy` layout); the uplink is then a switch port too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// UDP destination port.
    pub udp_port: u16,
    /// Outer UDP checksum computed.
    pub udp_checksum: bool,
    /// Options sent with every frame.
    pub options: Vec<String>,
    /// Geneve frames received (outer).
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames sent (outer, after segmentation).
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// TSO frames segmented while encapsulated.
    pub segmented: u64,
    /// Geneve options received.
    pub rx_options: u64,
    /// Drops by reason (the decapsulator's and the tunnel's).
    pub drops: std::collections::BTreeMap<String, u64>,
    /// Remote endpoints of its address family.
    pub remotes: Vec<RemoteRow>,
}

/// A remote endpoint in `tunnels`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RemoteRow {
    /// Its address.
    pub ip: String,
    /// VNIs that flood to it.
    pub flood_vnis: Vec<u32>,
    /// Next-hop MACs (several for ECMP; none while the neighbour is unresolved).
    pub next_hops: Vec<String>,
    /// `resolved`, `unresolved` (the kernel was asked), or `no path`.
    pub state: String,
}

/// What a reload changed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReloadReply {
    /// Ports added.
    pub added: Vec<String>,
    /// Ports deleted.
    pub deleted: Vec<String>,
    /// Ports whose VLAN or ACL changed in place.
    pub changed: Vec<String>,
    /// Ports deleted and added again (a setting that needs a new socket or device).
    pub replaced: Vec<String>,
}

/// One ACL rule in `acl-list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AclRow {
    /// Port name.
    pub port: String,
    /// Position in the port's list (first match wins).
    pub index: usize,
    /// The rule in the one-line syntax.
    pub rule: String,
    /// Frames it dropped since the port's ACL last changed.
    pub drops: u64,
}

/// One uplink in `offloads`: the AF_XDP mode in use and nicoffload's plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OffloadsRow {
    /// Port name.
    pub port: String,
    /// Network interface.
    pub iface: String,
    /// AF_XDP mode in use (`zero-copy`, `native-copy`, `generic`).
    pub afxdp_mode: String,
    /// Why that mode.
    pub afxdp_reason: String,
    /// Per job (tunnel TSO, checksums, LRO/GRO, inner RSS, AF_XDP mode): hardware,
    /// software or unavailable, and why.
    pub plan: nicoffload::OffloadPlan,
}

/// One PMD's flows in `flows`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowsReply {
    /// PMD index.
    pub pmd: usize,
    /// Cached flows: key, freshness, actions.
    pub flows: Vec<String>,
}

/// One port's counters in `stats`.
#[derive(Debug, Serialize, Deserialize, Clone)]
pub struct StatsRow {
    /// Port name.
    pub port: String,
    /// Link state.
    pub link: String,
    /// Counters.
    #[serde(flatten)]
    pub stats: PortStatsOwned,
}

/// [`crate::model::stats::PortStats`] with owned keys, for deserializing in vswitchctl.
#[derive(Debug, Serialize, Deserialize, Clone, Default)]
pub struct PortStatsOwned {
    /// Frames received from the guest.
    pub rx_packets: u64,
    /// Bytes received from the guest.
    pub rx_bytes: u64,
    /// Frames delivered to the guest.
    pub tx_packets: u64,
    /// Bytes delivered to the guest.
    pub tx_bytes: u64,
    /// TSO frames segmented in software for this guest.
    #[serde(default)]
    pub segmented: u64,
    /// Partial checksums completed in software for this guest.
    #[serde(default)]
    pub csum_completed: u64,
    /// Frames merged by software GRO for this port.
    #[serde(default)]
    pub coalesced: u64,
    /// The segments they were made of.
    #[serde(default)]
    pub coalesced_segments: u64,
    /// Drops by reason.
    pub drops: std::collections::BTreeMap<String, u64>,
    /// All drops.
    pub drops_total: u64,
}

impl From<crate::model::stats::PortStats> for PortStatsOwned {
    fn from(s: crate::model::stats::PortStats) -> Self {
        PortStatsOwned {
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            tx_packets: s.tx_packets,
            tx_bytes: s.tx_bytes,
            segmented: s.segmented,
            csum_completed: s.csum_completed,
            coalesced: s.coalesced,
            coalesced_segments: s.coalesced_segments,
            drops: s
                .drops
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            drops_total: s.drops_total,
        }
    }
}

/// One FDB row in `fdb`, with the port's name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FdbRowNamed {
    /// VLAN (0: untagged or a VNI).
    pub vlan: u16,
    /// Bridge domain (`untagged`, `vlan 10`, `vni 5001`).
    #[serde(default)]
    pub domain: String,
    /// MAC.
    pub mac: String,
    /// Port name, or `remote IP` for a MAC behind a tunnel endpoint.
    pub port: String,
    /// Seconds since last seen.
    pub age_secs: u64,
    /// Static entry.
    pub is_static: bool,
}

/// The multicast group table (`vswitchctl mdb`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct MdbReply {
    /// Snooping on.
    pub snooping: bool,
    /// Unregistered groups flood.
    pub flood_unregistered: bool,
    /// One row per group and member, sorted by domain, group, member.
    pub groups: Vec<MdbGroupRow>,
    /// Multicast-router ports (where queries came from).
    pub routers: Vec<MdbRouterRow>,
    /// Snooping's counters by name (`reports`, `queries`, `joins`, `leaves`, `expired`,
    /// `refused_full`, `invalid`, `forwarded`, `flooded_unregistered`,
    /// `unregistered_to_routers`, `queries_sent`).
    pub counters: std::collections::BTreeMap<String, u64>,
}

/// One member of one group in `vswitchctl mdb`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MdbGroupRow {
    /// Bridge domain (`untagged`, `vlan 10`, `vni 5001`).
    pub domain: String,
    /// The group address.
    pub group: String,
    /// Port name, or `remote IP` for a tunnel endpoint with receivers behind it.
    pub port: String,
    /// Source filter: `exclude` (any source but `sources`) or `include` (only
    /// `sources`), as IGMPv3/MLDv2 report it; v1/v2 joins are `exclude` of none.
    pub mode: String,
    /// The filter's sources.
    pub sources: Vec<String>,
    /// Seconds until it expires unless refreshed; `None` for a static membership.
    pub expires_secs: Option<u64>,
}

/// One multicast-router port in `vswitchctl mdb`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MdbRouterRow {
    /// Bridge domain.
    pub domain: String,
    /// Port name, or `remote IP`.
    pub port: String,
    /// Seconds until it expires unless a query refreshes it.
    pub expires_secs: u64,
}

/// One PMD in `pmd-stats`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PmdStatsRow {
    /// PMD index.
    pub pmd: usize,
    /// Pinned CPU.
    pub cpu: Option<usize>,
    /// Transmit queues polled, as `port/queue`.
    pub queues: Vec<String>,
    /// Frames taken from each of `queues` (same order).
    #[serde(default)]
    pub queue_packets: Vec<u64>,
    /// Frames processed.
    pub packets: u64,
    /// Non-empty bursts.
    pub batches: u64,
    /// packets / batches.
    pub mean_batch: f64,
    /// Cycles in rounds that found work.
    pub busy_cycles: u64,
    /// Cycles in empty rounds and sleeping.
    pub idle_cycles: u64,
    /// Poll rounds that found work.
    #[serde(default)]
    pub busy_rounds: u64,
    /// Poll rounds that found nothing.
    #[serde(default)]
    pub idle_rounds: u64,
    /// busy / (busy + idle), percent.
    pub busy_percent: f64,
    /// busy cycles per packet.
    pub cycles_per_packet: f64,
    /// Times it slept waiting for a kick.
    pub sleeps: u64,
    /// Naps of at most 50 µs after light bursts (adaptive polling).
    #[serde(default)]
    pub naps: u64,
    /// Flow cache: frames decided by the previous frame of the burst.
    pub cache_last_flow_hits: u64,
    /// Flow cache: exact-match cache hits.
    pub cache_emc_hits: u64,
    /// Flow cache: misses (slow path).
    pub cache_misses: u64,
    /// Flow cache: misses on entries invalidated by a configuration or FDB change.
    pub cache_stale_misses: u64,
    /// Flow cache: (last-flow + EMC hits) / frames, percent.
    pub cache_hit_percent: f64,
    /// OVN logical pipeline: frames decided by a cached program.
    #[serde(default)]
    pub lflow_hits: u64,
    /// OVN logical pipeline: frames the interpreter ran for.
    #[serde(default)]
    pub lflow_misses: u64,
    /// OVN logical pipeline: cached programs kept by new pipelines (their datapaths
    /// unchanged).
    #[serde(default)]
    pub lflow_kept: u64,
    /// OVN logical pipeline: cached programs dropped by new pipelines or topologies.
    #[serde(default)]
    pub lflow_dropped: u64,
    /// OVN logical pipeline: of the frames decided by a cached program, those whose
    /// program was a wildcard one (it holds for every source port, say: a new
    /// connection's first packet).
    #[serde(default)]
    pub lflow_wild_hits: u64,
    /// OVN logical pipeline: of the frames decided by a cached program, those stepped
    /// through it together with earlier frames of their flow in their burst (one
    /// program lookup, one conntrack lookup per zone for the run).
    #[serde(default)]
    pub lflow_together: u64,
    /// TSC cycles per pipeline stage (`rx`, `classify`, `group`, `deliver`, `complete`;
    /// [`crate::datapath::stages`]), only from builds with the `stage-cycles` feature.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub stage_cycles: std::collections::BTreeMap<String, u64>,
}

/// `vswitchctl show`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShowReply {
    /// Poll mode.
    pub poll: String,
    /// FDB size.
    pub fdb_entries: usize,
    /// Topology generation (bumped by every port, VLAN, ACL or queue change).
    #[serde(default)]
    pub generation: u64,
    /// Ports.
    pub ports: Vec<ShowPort>,
    /// The Open vSwitch database the ports come from (`vswitchd --ovsdb`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ovsdb: Option<OvsdbShow>,
}

/// `vswitchctl show`'s view of the Open vSwitch database client (`--ovsdb`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OvsdbShow {
    /// The database's remote.
    pub remote: String,
    /// `connected`, `connecting`, or `disconnected: WHY` (ports kept meanwhile).
    pub connection: String,
    /// Connections made so far (more than 1: the server restarted or was unreachable).
    pub connects: u64,
    /// The `Open_vSwitch.next_cfg` last applied (written to `cur_cfg`).
    pub cur_cfg: i64,
    /// Bridges in the database.
    pub bridges: Vec<String>,
    /// Interfaces that could not be applied (each with its `error` in the database).
    pub failed: Vec<String>,
}

/// `vswitchctl ovn`: vswitchd as an OVN chassis.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OvnReply {
    /// The chassis name (empty: vswitchd is no OVN chassis).
    pub chassis: String,
    /// The Southbound database remotes.
    pub remotes: Vec<String>,
    /// `connected to REMOTE`, `connecting`, or `disconnected from REMOTE: why`.
    pub connection: String,
    /// Connections made to the database so far.
    pub connects: u64,
    /// The chassis' Encap IP (its Geneve endpoint).
    pub encap_ip: String,
    /// The `SB_Global.nb_cfg` last applied (and reported in `Chassis_Private`).
    pub nb_cfg: i64,
    /// Every local port that names a logical switch port (`iface_id=`).
    pub ports: Vec<OvnPortRow>,
    /// Other chassis that have ports on this chassis' logical switches.
    pub other_chassis: Vec<OvnChassisRow>,
    /// This chassis' logical switches with a `localnet` port (provider networks).
    #[serde(default)]
    pub provider_networks: Vec<OvnLocalnetRow>,
    /// BFD sessions on the tunnels to the chassis that share a gateway's HA group.
    #[serde(default)]
    pub bfd: Vec<OvnBfdRow>,
    /// Rows replicated of the tables monitored by interest (`Port_Binding`,
    /// `Multicast_Group`, `FDB`): this chassis' part of the deployment.
    #[serde(default)]
    pub monitored: std::collections::BTreeMap<String, u64>,
    /// The logical pipeline: per stage of each local datapath, its flows and how often
    /// the interpreter chose one of them.
    #[serde(default)]
    pub stages: Vec<OvnStageRow>,
    /// What the slow path (OVN's controller actions) did.
    #[serde(default)]
    pub slow_path: OvnSlowPathRow,
    /// What works on a vswitchd chassis and what does not.
    pub supported: Vec<String>,
    /// What is refused or counted.
    pub unsupported: Vec<String>,
}

/// What the slow path did (`vswitchctl ovn`): frames it made for controller actions,
/// and frames it held for a router's next hop (`arp{}`, `nd_ns{}`, as ovn-controller
/// buffers them) and what became of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OvnSlowPathRow {
    /// Frames made (DHCP replies, ARP requests, ICMP errors...) and sent.
    pub made: u64,
    /// Frames pinctrl's rules say are not sent.
    pub not_made: u64,
    /// Frames held for a next hop.
    pub held: u64,
    /// Held frames sent again once their next hop was known.
    pub released: u64,
    /// Held frames dropped without an answer within 10 s.
    pub expired: u64,
    /// Held frames dropped: over 4 for one next hop, or over 1,000 next hops.
    pub overflowed: u64,
    /// Released frames dropped because their port had left.
    pub orphaned: u64,
}

/// One stage of a datapath's logical pipeline in `vswitchctl ovn`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OvnStageRow {
    /// The datapath's name.
    pub datapath: String,
    /// `ingress` or `egress`.
    pub pipeline: String,
    /// The table id.
    pub table: u8,
    /// The stage name (`ls_in_acl`).
    pub stage: String,
    /// Logical flows in it.
    pub flows: u64,
    /// Interpreter runs that chose one of its flows.
    pub hits: u64,
}

/// A local port in `vswitchctl ovn`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OvnPortRow {
    /// The local port.
    pub port: String,
    /// The logical switch port it is.
    pub logical_port: String,
    /// Bound here.
    pub bound: bool,
    /// `Port_Binding.up`.
    pub up: bool,
    /// Its logical switch.
    pub logical_switch: String,
    /// The switch's tunnel key (VNI).
    pub vni: u32,
    /// The port's key.
    pub key: u16,
    /// Why it is not bound (empty when bound).
    pub why_unbound: String,
    /// How this chassis holds the binding: `main`, `additional`, or `additional,
    /// awaiting RARP` (a live migration's destination before activation).
    #[serde(default)]
    pub role: String,
}

/// A provider network in `vswitchctl ovn`: a logical switch with a `localnet` port.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OvnLocalnetRow {
    /// The logical switch.
    pub logical_switch: String,
    /// Its localnet port.
    pub localnet_port: String,
    /// The physical network (`options:network_name`).
    pub network: String,
    /// The uplink mapped to it (empty: not mapped; the switch uses tunnels).
    pub uplink: String,
    /// Its VLAN (0: untagged).
    pub vlan: u16,
}

/// A BFD session in `vswitchctl ovn`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OvnBfdRow {
    /// The other chassis.
    pub chassis: String,
    /// `up`, `down`, `init` or `admin_down` (RFC 5880 §4.1), as Open vSwitch's
    /// `Interface.bfd_status:state`.
    pub state: String,
    /// The other end's state, as it last said.
    pub remote_state: String,
    /// Why the session last went down (`Control Detection Time Expired`...).
    pub diagnostic: String,
    /// Times the session went up or down.
    pub flap_count: u64,
}

/// One other OVN chassis.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OvnChassisRow {
    /// Its name.
    pub name: String,
    /// Its Geneve endpoint.
    pub encap_ip: String,
    /// The logical switches it shares with this chassis.
    pub logical_switches: Vec<String>,
    /// Geneve frames sent to it and received from it (outer, after segmentation).
    pub tx_packets: u64,
    /// See `tx_packets`.
    pub rx_packets: u64,
}
