//! What OVN's logical pipeline decides for a packet, as the data path consumes it
//! (DESIGN.md §7): the interpreter lives with the OVN chassis (`ovn::pipeline`), above
//! the data path, which calls it through [`LogicalPipeline`] on a flow-cache miss and
//! executes what it reports ([`Outcome`]): connection tracking steps through a
//! [`Tracker`], outputs with the packet's final fields, requests to the chassis.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use ovn_lflow::actions::GenOption;
use ovn_lflow::Flow;

use crate::config::MacAddr;

/// Runs OVN's logical pipeline (implemented by the OVN chassis' interpreter).
pub trait LogicalPipeline: Send + Sync + std::fmt::Debug {
    /// Runs `flow` (with `inport` set, and `outport` when `egress`) through datapath
    /// `dp` from the first table of its ingress pipeline (a frame from a port), or of
    /// its egress pipeline (a frame from a tunnel: its sender ran ingress), asking
    /// `ct` for connection tracking. `frame` is the frame the flow is of (its whole
    /// bytes: DHCP options read it), or empty when not at hand; `size` is the length
    /// `check_pkt_larger` compares (bytes from the Ethernet header: the frame's, or for
    /// a TSO frame each segment's).
    fn run(
        &self,
        dp: u32,
        egress: bool,
        flow: Flow,
        frame: Frame<'_>,
        ct: &mut dyn Tracker,
    ) -> Outcome;

    /// The lengths the pipeline's `check_pkt_larger` actions compare with (bytes),
    /// sorted, once each: frames that exceed the same number of them get the same
    /// answers, so the data path keys its decisions by that number.
    fn sizes(&self) -> &[u16];

    /// Whether the data path may cache decisions by its key (no flow tests a field the
    /// key leaves out).
    fn cacheable(&self) -> bool;

    /// Whether the router's `get_arp`/`get_nd` now finds the next hop a frame was held
    /// for ([`Awaited`]).
    fn resolves(&self, awaited: &Awaited) -> bool;

    /// The version of datapath `dp` (`None`: not in the pipeline): a decision cached
    /// for a frame stays valid in a new pipeline while every datapath it crossed
    /// ([`Outcome::datapaths`]) has the same version.
    fn version(&self, dp: u32) -> Option<u64>;
}

/// The frame a pipeline run is for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Frame<'a> {
    /// Its bytes (empty when not at hand).
    pub bytes: &'a [u8],
    /// The length `check_pkt_larger` compares: the frame's, or for a TSO frame the
    /// length of each segment it becomes, as OVS's `check_pkt_len` compares a GSO
    /// packet (Linux `skb_gso_validate_mac_len`).
    pub size: u32,
}

/// A next hop a router asked for (`arp{}`, `nd_ns{}`), under which the frame that asked
/// is held until its MAC is known: the router's key, its output port's key, and the
/// next hop's address, which OVN's router keeps in `reg0` (IPv4) or `xxreg0` (IPv6)
/// where ovn-controller's pinctrl reads it (`pinctrl_handle_buffered_packets`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Awaited {
    /// The router's datapath key.
    pub dp: u32,
    /// The router port's key.
    pub port: u16,
    /// The next hop.
    pub ip: std::net::IpAddr,
}

/// Connection tracking state bits (OVS `CS_*`, `ct_state`).
pub mod cs {
    /// A new connection.
    pub const NEW: u32 = 0x01;
    /// Part of an established connection.
    pub const EST: u32 = 0x02;
    /// Related to an established connection.
    pub const REL: u32 = 0x04;
    /// In the reply direction.
    pub const RPL: u32 = 0x08;
    /// Invalid.
    pub const INV: u32 = 0x10;
    /// Tracked.
    pub const TRK: u32 = 0x20;
}

/// What connection tracking said of a packet: `ct_state`, `ct_mark`, `ct_label`, and
/// for a connection with a translation, the packet's addresses and ports after the step
/// and the connection's original tuple (`ct_nw_dst`, `ct_tp_dst`...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CtResult {
    /// State bits ([`cs`]).
    pub state: u32,
    /// The connection's mark.
    pub mark: u32,
    /// The connection's label.
    pub label: u128,
    /// The connection's translation, when it has one.
    pub nat: Option<NatSeen>,
}

/// A translated connection as a step saw it ([`conntrack::NatResult`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NatSeen {
    /// The packet's addresses and ports after the step.
    pub packet: conntrack::Endpoints,
    /// The connection's original-direction tuple.
    pub original: conntrack::Endpoints,
    /// A related ICMP error the step translated: the endpoints of the header it
    /// embeds ([`conntrack::NatResult::inner`]).
    pub inner: Option<conntrack::Endpoints>,
}

impl From<conntrack::NatResult> for NatSeen {
    fn from(n: conntrack::NatResult) -> Self {
        NatSeen {
            packet: n.packet,
            original: n.original,
            inner: n.inner,
        }
    }
}

/// One connection tracking step the pipeline asks for: OVS `ct(zone=…[, commit][,
/// nat…][, exec(…)])`, which `ct_next`, `ct_commit`, `ct_dnat`, `ct_snat`, `ct_lb_mark`
/// and `ct_commit_nat` compile to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtReq {
    /// The zone.
    pub zone: u16,
    /// Create the connection if the packet may open one, and write `writes`.
    pub commit: bool,
    /// Translate (`nat`, `nat(src=…)`, `nat(dst=…)`).
    pub nat: Option<conntrack::Nat>,
    /// Mark and label writes (with `commit`).
    pub writes: Commit,
}

impl CtReq {
    /// `ct(zone)`: a lookup.
    pub fn lookup(zone: u16) -> CtReq {
        CtReq {
            zone,
            ..CtReq::default()
        }
    }

    /// `ct(commit, zone, exec(writes))`.
    pub fn commit(zone: u16, writes: Commit) -> CtReq {
        CtReq {
            zone,
            commit: true,
            writes,
            nat: None,
        }
    }

    /// A `ct_commit`: a commit that translates nothing and after which the pipeline
    /// does not resume elsewhere ([`Step::Commit`]; every other request is a
    /// [`Step::Ct`]).
    pub fn is_plain_commit(&self) -> bool {
        self.commit && self.nat.is_none()
    }

    /// The conntrack action it is.
    pub fn action(&self) -> conntrack::CtAction {
        let mut a = if self.commit {
            conntrack::CtAction::commit(self.zone)
        } else {
            conntrack::CtAction::lookup(self.zone)
        };
        if self.commit && self.writes.mark.1 != 0 {
            a = a.with_mark(self.writes.mark.0, self.writes.mark.1);
        }
        if self.commit && self.writes.label.1 != 0 {
            a = a.with_label(self.writes.label.0, self.writes.label.1);
        }
        if let Some(n) = self.nat {
            a = a.with_nat(n);
        }
        a
    }
}

/// A `ct_commit`'s writes: bits of the mark and the label (value, mask).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Commit {
    /// Mark (value, mask).
    pub mark: (u32, u32),
    /// Label (value, mask).
    pub label: (u128, u128),
}

/// What the interpreter asks of connection tracking.
pub trait Tracker {
    /// Runs `req` on the packet with fields `flow`, made as `origin` says (the received
    /// frame, or one a controller action builds), and answers its state afterwards.
    fn ct(&mut self, req: &CtReq, pkt: (&Flow, &Origin)) -> CtResult;
    /// The zone of logical port `port` of datapath `dp` ([`DNAT_ZONE`] and
    /// [`SNAT_ZONE`]: the datapath's own NAT zones).
    fn zone(&mut self, dp: u32, port: u16) -> u16;
    /// `chk_lb_aff()`: the backend (address, port) an earlier connection of `key`'s
    /// client to its VIP went to, while the session lasts (none when tracing).
    fn lb_affinity(&mut self, _key: &AffinityKey) -> Option<(std::net::IpAddr, u16)> {
        None
    }
    /// `commit_lb_aff()`: `key`'s client goes to `backend` for as long as it keeps
    /// connecting within `timeout_s` seconds of the last time.
    fn commit_lb_affinity(
        &mut self,
        _key: AffinityKey,
        _backend: (std::net::IpAddr, u16),
        _timeout_s: u16,
    ) {
    }
}

/// A load balancer affinity session (`affinity_timeout`): what OVN's `commit_lb_aff`
/// learns into `OFTABLE_CHK_LB_AFFINITY` and `chk_lb_aff` looks up: the datapath, the
/// client's address, the VIP, the protocol and the VIP's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AffinityKey {
    /// The datapath.
    pub dp: u32,
    /// The client (the packet's source).
    pub client: std::net::IpAddr,
    /// The VIP.
    pub vip: std::net::IpAddr,
    /// The IP protocol (0: none).
    pub proto: u8,
    /// The VIP's port (0: none).
    pub vip_port: u16,
}

/// The load balancers' affinity sessions, shared by the PMDs: a session lives while
/// its client connects again within its timeout (OVN's learned flows have an idle
/// timeout). At most [`LbAffinity::MAX`] sessions; a new one beyond that, after the
/// expired ones are dropped, is not remembered (its client is balanced afresh).
#[derive(Debug, Default)]
pub struct LbAffinity {
    sessions: std::sync::Mutex<std::collections::HashMap<AffinityKey, Session>>,
}

/// One affinity session: the backend, when it expires (ms) and its timeout (s).
#[derive(Debug, Clone, Copy)]
struct Session {
    backend: (std::net::IpAddr, u16),
    expires_ms: u64,
    timeout_s: u16,
}

impl LbAffinity {
    /// Sessions held at most.
    pub const MAX: usize = 100_000;

    /// The backend of `key`'s session at `now_ms`, which the lookup keeps alive.
    pub fn lookup(&self, key: &AffinityKey, now_ms: u64) -> Option<(std::net::IpAddr, u16)> {
        let mut m = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let s = m.get_mut(key)?;
        if s.expires_ms <= now_ms {
            m.remove(key);
            return None;
        }
        s.expires_ms = now_ms + u64::from(s.timeout_s) * 1000;
        Some(s.backend)
    }

    /// Starts (or renews) `key`'s session with `backend` for `timeout_s` seconds.
    pub fn commit(
        &self,
        key: AffinityKey,
        backend: (std::net::IpAddr, u16),
        timeout_s: u16,
        now_ms: u64,
    ) {
        let mut m = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= Self::MAX && !m.contains_key(&key) {
            m.retain(|_, s| s.expires_ms > now_ms);
            if m.len() >= Self::MAX {
                return;
            }
        }
        let expires_ms = now_ms + u64::from(timeout_s) * 1000;
        m.insert(
            key,
            Session {
                backend,
                expires_ms,
                timeout_s,
            },
        );
    }

    /// Sessions held (some may have expired).
    pub fn len(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The port key that names a datapath's DNAT zone (`<datapath>_dnat` in
/// ovn-controller; OVN's `MFF_LOG_DNAT_ZONE`: a router's `ct_next` and `ct_dnat`).
pub const DNAT_ZONE: u16 = 0;
/// The port key that names a datapath's SNAT zone (`<datapath>_snat`;
/// `MFF_LOG_SNAT_ZONE`: `ct_snat`, a router's `ct_commit`). Logical port keys stay
/// under 32768 and multicast groups never own a zone.
pub const SNAT_ZONE: u16 = u16::MAX;

/// How an output's frame is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The received frame, its headers rewritten to the output's fields.
    Received,
    /// A DHCP reply (`put_dhcp_opts`, `put_dhcpv6_opts`) ovn-pinctrl built from the
    /// request, its headers then set to the output's fields.
    Dhcp(Arc<ovn_pinctrl::DhcpReply>),
    /// A DHCP reply when tracing (`ovn-trace` assumes the request is answered): the
    /// options.
    DhcpTraced(Arc<Vec<GenOption>>),
    /// A frame a controller action builds from the received one (`arp`, `icmp4`,
    /// `nd_na`...), the packet's fields at the action in `at`.
    Built {
        /// The action.
        action: ovn_pinctrl::ControllerAction,
        /// The fields at the action.
        at: Arc<Flow>,
    },
    /// A controller action when tracing, as `ovn-trace` transforms the packet.
    Traced(&'static str),
}

impl Origin {
    /// Whether the slow path makes the frame (not the received one rewritten).
    pub fn is_built(&self) -> bool {
        !matches!(self, Origin::Received)
    }
}

/// Where an output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// A logical port bound here (or anywhere, when tracing): delivered.
    Local {
        /// Its datapath.
        dp: u32,
        /// Its key.
        port: u16,
    },
    /// A port or multicast group whose egress runs on another chassis: one tunnel.
    Remote {
        /// The chassis.
        chassis: String,
        /// The datapath (the tunnel's VNI).
        dp: u32,
        /// The ingress key.
        inport: u16,
        /// The egress key (a port's or a group's).
        outport: u16,
    },
    /// A port bound nowhere (a `localnet` port, or a VIF no chassis claimed).
    Nowhere {
        /// Its datapath.
        dp: u32,
        /// Its key.
        port: u16,
    },
}

/// One output: where, the packet's final fields, and how its frame is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Where it goes.
    pub dest: Dest,
    /// The packet's fields at the output.
    pub flow: Flow,
    /// How the frame is made.
    pub origin: Origin,
}

/// A load balancer's choice among several backends (`ct_lb_mark(backends=...)`), by a
/// hash of the packet's addresses, protocol and ports: made again for every packet a
/// cached program runs for, so the program holds for every source port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbPick {
    /// The backends of the packet's family: address and port (0: the packet's).
    pub backends: Box<[(std::net::IpAddr, u16)]>,
    /// The parts hashed ([`LbPick::SRC`]...): OVS `hash_fields`, by default all five.
    pub fields: u8,
}

impl LbPick {
    /// The source address is hashed.
    pub const SRC: u8 = 1;
    /// The destination address.
    pub const DST: u8 = 2;
    /// The IP protocol.
    pub const PROTO: u8 = 4;
    /// The source port.
    pub const SRC_PORT: u8 = 8;
    /// The destination port.
    pub const DST_PORT: u8 = 16;

    /// The backend for a packet with endpoints `e` and IP protocol `proto`.
    pub fn choose(&self, e: &conntrack::Endpoints, proto: u8) -> (std::net::IpAddr, u16) {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        let f = self.fields;
        if f & Self::SRC != 0 {
            e.src.hash(&mut h);
        }
        if f & Self::DST != 0 {
            e.dst.hash(&mut h);
        }
        if f & Self::PROTO != 0 {
            proto.hash(&mut h);
        }
        if f & Self::SRC_PORT != 0 {
            e.src_port.hash(&mut h);
        }
        if f & Self::DST_PORT != 0 {
            e.dst_port.hash(&mut h);
        }
        // Fx's low bits are weak for small inputs: fold the high half in.
        let v = h.finish();
        self.backends[((v ^ (v >> 32)) % self.backends.len() as u64) as usize]
    }

    /// `req` (a `ct_lb_mark` request) translating to the backend for a packet with
    /// endpoints `e` and protocol `proto`.
    pub fn request(&self, req: CtReq, e: &conntrack::Endpoints, proto: u8) -> CtReq {
        let (ip, port) = self.choose(e, proto);
        CtReq {
            nat: Some(conntrack::Nat::Dst(conntrack::NatRange {
                min: ip,
                max: ip,
                ports: (port != 0).then_some((port, port)),
            })),
            ..req
        }
    }
}

/// One thing the pipeline did, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A connection tracking step and its result (what follows depends on it).
    Ct {
        /// The request.
        req: CtReq,
        /// The result.
        result: CtResult,
        /// The load balancer's choice that made the request's translation, when a
        /// program makes it again per packet.
        pick: Option<Arc<LbPick>>,
    },
    /// A `ct_commit`.
    Commit {
        /// The zone.
        zone: u16,
        /// The writes.
        commit: Commit,
    },
    /// An output.
    Output(Box<Output>),
    /// Learn an IP-to-MAC binding behind a router port (`put_arp`, `put_nd`).
    PutMacBinding {
        /// The router.
        dp: u32,
        /// The router port's key.
        port: u16,
        /// The address.
        ip: std::net::IpAddr,
        /// The MAC.
        mac: MacAddr,
    },
    /// Learn a MAC behind a switch port (`put_fdb`).
    PutFdb {
        /// The switch.
        dp: u32,
        /// The port's key.
        port: u16,
        /// The MAC.
        mac: MacAddr,
    },
    /// A `log()` action ran (counted).
    Log,
    /// `handle_svc_check`: the frame answers a load balancer health check, for the
    /// chassis' prober ([`Learned::SvcReply`]); nothing else is done with it.
    SvcCheck,
    /// `igmp`: an IGMP or MLD message from a port of a switch that snoops
    /// (`mcast_snoop=true`), for the chassis' group database, which it writes to
    /// `IGMP_Group` (ovn-controller's `pinctrl_ip_mcast_handle`); nothing else is done
    /// with it.
    Igmp,
    /// `chk_lb_aff`/`commit_lb_aff`: the decision rests on (or starts) a load
    /// balancer affinity session, state outside the flow and its connection.
    Affinity,
    /// A router asked for a next hop's MAC (`arp{}`, `nd_ns{}`): the frame is held
    /// until it is known.
    Await(Awaited),
}

/// What one run of the pipeline did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Something went wrong (an unknown port, a loop): the first error.
    pub error: Option<String>,
    /// The datapaths whose pipelines it ran, each once, in order.
    pub datapaths: Vec<u32>,
    /// It met ovn-northd's drop of IP multicast to a group nobody joined (a `drop`
    /// flow of `ls_in_l2_lkup` matching `ip4.mcast || ip6.mcast`, when the switch
    /// neither floods unregistered groups nor relays them): a frame it sends
    /// nowhere counts as `mcast_unregistered`, as in a switch of the L2 rules.
    pub unregistered_mcast: bool,
    /// Its switch sent it to an IP multicast group ovn-northd made of IGMP/MLD
    /// memberships, or to an unregistered group's `_MC_static`: counted by snooping
    /// (`vswitchctl mdb`) as a switch of the L2 rules counts it.
    pub mcast: Option<McastOut>,
}

/// Where a logical switch sent an IP multicast frame, for snooping's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McastOut {
    /// To a registered group (counter `forwarded`).
    Registered,
    /// To `_MC_static`: no member, ports that flood (`unregistered_to_routers`).
    Static,
}

impl Outcome {
    /// The outputs, in order.
    pub fn outputs(&self) -> impl Iterator<Item = &Output> {
        self.steps.iter().filter_map(|s| match s {
            Step::Output(o) => Some(&**o),
            _ => None,
        })
    }
}

/// Connection tracking zones of logical ports, as ovn-controller assigns them (one
/// per local logical port, one per router): stable for the process' life, so
/// connections survive a pipeline rebuild. Zone 0 is never handed out.
#[derive(Debug, Default)]
pub struct Zones {
    inner: std::sync::Mutex<ZoneMap>,
}

/// The zones handed out by (datapath, port), and the last one.
type ZoneMap = (std::collections::HashMap<(u32, u16), u16>, u16);

impl Zones {
    /// The zone of logical port `port` of datapath `dp` (`port` 0: the datapath's own),
    /// allocated on first use; zone 65535 is shared once every other is taken.
    pub fn of(&self, dp: u32, port: u16) -> u16 {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&z) = g.0.get(&(dp, port)) {
            return z;
        }
        let z = g.1.saturating_add(1).max(1);
        g.1 = z;
        g.0.insert((dp, port), z);
        z
    }

    /// Every zone handed out: ((datapath, port), zone).
    pub fn all(&self) -> Vec<((u32, u16), u16)> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = g.0.iter().map(|(k, z)| (*k, *z)).collect();
        v.sort_unstable();
        v
    }
}

/// Where a frame the slow path made goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowDest {
    /// A local port.
    Port(crate::model::fdb::PortId),
    /// A provider network's uplink, with the network's VLAN (0: untagged).
    Uplink(crate::model::fdb::PortId, u16),
    /// A Geneve tunnel: remote endpoint, VNI (the datapath) and OVN's option keys.
    Tunnel {
        /// The remote endpoint.
        remote: crate::model::tunnel::RemoteId,
        /// The VNI.
        vni: u32,
        /// The ingress key.
        ingress: u16,
        /// The egress key.
        egress: u16,
    },
    /// Back into the pipeline as received from the frame's source port (a held frame
    /// whose next hop became known).
    Resubmit,
}

/// A frame for the slow path: what the pipeline decided for it that a controller
/// action builds (DHCP replies, ARP requests, neighbour advertisements, ICMP errors,
/// TCP resets) or that the data path cannot rewrite in place.
#[derive(Debug, Clone)]
pub struct SlowJob {
    /// The port the frame came from (the one the made frames are charged to).
    pub src: crate::model::fdb::PortId,
    /// The received frame, whole.
    pub frame: Vec<u8>,
    /// Each frame to make: where it goes, how, and its fields at the output.
    pub outs: Vec<(SlowDest, Origin, Flow)>,
    /// The next hop the frame waits for, when it is to be held and sent again once the
    /// next hop is known.
    pub awaits: Option<Awaited>,
}

/// A frame the slow path made, for a PMD to send.
#[derive(Debug, Clone)]
pub struct Injected {
    /// The port charged.
    pub src: crate::model::fdb::PortId,
    /// Where it goes.
    pub dest: SlowDest,
    /// The frame.
    pub frame: Vec<u8>,
}

/// What the slow path did (`vswitchctl ovn`): frames it made, and frames it held for
/// a router's next hop (`arp{}`, `nd_ns{}`) and what became of them. Every frame held
/// is released, expired or overflowed, or still held.
#[derive(Debug, Default)]
pub struct SlowPathStats {
    /// Frames made and handed to PMD 0.
    pub made: AtomicU64,
    /// Frames pinctrl would not make (its rules say nothing is sent).
    pub not_made: AtomicU64,
    /// Frames held for a next hop.
    pub held: AtomicU64,
    /// Held frames sent again once their next hop was known.
    pub released: AtomicU64,
    /// Held frames dropped: no answer within the hold time.
    pub expired: AtomicU64,
    /// Held frames dropped: more frames waited for one next hop than it holds, or
    /// more next hops were awaited than the slow path tracks.
    pub overflowed: AtomicU64,
    /// Released frames dropped: their port left meanwhile.
    pub orphaned: AtomicU64,
}

impl SlowPathStats {
    /// The counters' values, in the order of the fields.
    pub fn read(&self) -> [u64; 7] {
        [
            &self.made,
            &self.not_made,
            &self.held,
            &self.released,
            &self.expired,
            &self.overflowed,
            &self.orphaned,
        ]
        .map(|c| c.load(Relaxed))
    }
}

/// What the pipeline learned for the OVN chassis to write to the Southbound database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Learned {
    /// `put_arp`, `put_nd`: an IP-to-MAC binding behind a router port.
    MacBinding {
        /// The router's key.
        dp: u32,
        /// The router port's key.
        port: u16,
        /// The address.
        ip: std::net::IpAddr,
        /// The MAC.
        mac: MacAddr,
    },
    /// `handle_svc_check`: a frame to the load balancers' health-check MAC (a
    /// backend's answer to a probe), its first [`SVC_REPLY_BYTES`] bytes.
    SvcReply(Vec<u8>),
}

/// How much of a health check's answer the chassis gets: Ethernet, IPv4 and TCP, or
/// an ICMP error with the datagram's headers.
pub const SVC_REPLY_BYTES: usize = 128;

#[cfg(test)]
mod affinity_tests {
    use super::*;

    /// A session lives while its client comes back within the timeout; each lookup
    /// renews it; another client or VIP has none.
    #[test]
    fn a_session_lives_while_used_within_its_timeout() {
        let a = LbAffinity::default();
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let key = AffinityKey {
            dp: 1,
            client: ip("10.0.0.11"),
            vip: ip("172.16.100.100"),
            proto: 6,
            vip_port: 80,
        };
        let backend = (ip("10.0.0.13"), 8080);
        a.commit(key, backend, 60, 1_000);
        assert_eq!(a.lookup(&key, 50_000), Some(backend));
        assert_eq!(a.lookup(&key, 109_000), Some(backend), "renewed at 50 s");
        let other = AffinityKey {
            client: ip("10.0.0.12"),
            ..key
        };
        assert_eq!(a.lookup(&other, 2_000), None);
        assert_eq!(a.lookup(&key, 170_000), None, "idle for 61 s");
        assert!(a.is_empty(), "the expired session is gone");
    }
}
