//! vswitchd as an OVN chassis (DESIGN.md §7): it reads the OVN Southbound database
//! itself (no OpenFlow, no ovn-controller) through [`ovsdb`], registers its `Chassis`,
//! `Encap` and `Chassis_Private` rows, claims the `Port_Binding`s its ports name with
//! `iface_id=`, and turns the logical switches with local ports into bridge domains.
//!
//! One task on the control plane's runtime: each batch of database changes (or a port
//! added or deleted) is one pass: the rows are read from the replica, the logical view
//! is derived ([`view::derive`], pure), the claims it implies are written in one
//! transaction, the view is published as one topology change ([`apply`]) and the ports
//! now running are marked `up`; then `Chassis_Private.nb_cfg` is set to the
//! `SB_Global.nb_cfg` the pass saw, so `ovn-nbctl --wait=hv sync` returns once this
//! chassis has applied a change. While the database is away the data path keeps the
//! last view; after a reconnect the replica resyncs and the next pass publishes only
//! the difference. Every [`FDB_TICK`], when the data path's FDB has changed, MACs
//! learned behind `unknown` ports are written to the `FDB` table ([`fdb`]).

pub mod apply;
pub mod bfd;
pub mod fdb;
pub mod gateway;
pub mod igmp;
pub mod interest;
pub mod lflow_index;
pub mod mac_binding;
pub mod pipeline;
pub mod registration;
pub mod rows;
pub mod sb;
pub mod stages;
pub mod svc_monitor;
pub mod view;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use ovsdb::{Client, ClientConfig, Condition, Event, MonitorSpec, TableSpec};
use tracing::{info, warn};

use crate::config::ovn::OvnConfig;
use crate::control::ops::Control;
use crate::control::protocol::{OvnChassisRow, OvnLocalnetRow, OvnPortRow, OvnReply};

/// What `vswitchctl ovn` shows, updated by every pass.
#[derive(Debug, Default)]
pub struct Status {
    reply: Mutex<OvnReply>,
    /// The logical pipelines last built (for `vswitchctl ovn trace`).
    pipelines: Mutex<Option<Arc<pipeline::Pipelines>>>,
}

impl Status {
    /// The current view for `vswitchctl ovn`.
    pub fn reply(&self) -> OvnReply {
        self.reply.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&mut OvnReply)) {
        f(&mut self.reply.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// What works on a vswitchd chassis (`vswitchctl ovn`; docs/ovn.md).
pub const SUPPORTED: [&str; 18] = [
    "logical switches (Datapath_Binding) with VIF ports (Port_Binding type \"\") bound here by iface_id=",
    "OVN's logical pipeline (Logical_Flow) for every switch whose flows do more than L2 forwarding (ACLs, DHCP, a router): interpreted as ovn-trace does, one function per action, and cached per flow and connection state",
    "security groups: ACLs, port groups and address sets, allow-related through connection tracking (a zone per logical port; --ct-zone-max, --ct-max-connections)",
    "distributed logical routers: routing on the sending chassis, TTL, ARP and ICMP echo answered by the router's flows, MAC bindings read from MAC_Binding",
    "NAT and load balancers: ct_dnat, ct_snat (and _in_czone), ct_lb_mark/ct_lb with backends (hash of the 5-tuple or selection_fields), ct_commit_nat, hairpin (chk_lb_hairpin, chk_lb_hairpin_reply, ct_snat_to_vip); session affinity (commit_lb_aff, chk_lb_aff); a DNAT and an SNAT zone per datapath; gateway routers bound here (options:chassis) with SNAT and floating IPs; ICMP errors about translated packets translated whole, the header they embed included (RFC 5508 §7); nat_exhausted when a range is full",
    "load balancer health checks (Service_Monitor) of the backends on this chassis: TCP SYN or UDP probes from svc_monitor_mac over IPv4 or IPv6, answers through handle_svc_check, status written for ovn-northd to leave offline backends out",
    "distributed gateway ports: the chassisredirect binding claimed and released by its HA_Chassis_Group as ovn-controller decides, with BFD on the tunnels to the group's chassis (failover with OVS gateways); SNAT, centralized and distributed floating IPs on an external provider network; other chassis' frames to the gateway taken by tunnel; a gateway MTU (options:gateway_mtu: check_pkt_larger on each frame, or on each segment of a TSO frame, and ICMP fragmentation needed / packet too big)",
    "provider networks (localnet ports) in switches that run the pipeline: an input and output of the pipeline, ports on other chassis reached through it",
    "OVN's controller actions, built off the PMDs as ovn-controller's pinctrl builds them (crates/ovn-pinctrl): DHCPv4 and DHCPv6 replies from DHCP_Options, ARP requests, IPv6 neighbour solicitations and advertisements, ICMP errors (TTL exceeded, unreachable), TCP resets, SCTP aborts; MAC bindings learned by put_arp/put_nd written to MAC_Binding; a frame whose router asks for its next hop (arp{}, nd_ns{}) held (4 per next hop, 10 s) and sent again once the MAC is known, as ovn-controller buffers it; at most 10,000 frames per second and PMD (slow_path_busy beyond)",
    "destinations by Port_Binding.mac, on this chassis or by Geneve to the port's chassis (OVN's option 0x0102/0x80 with ingress and egress keys)",
    "broadcast and multicast to _MC_flood: local members plus one copy per chassis with members",
    "unknown unicast to _MC_unknown when a port has 'unknown' addresses, else dropped (ovn_unknown_unicast)",
    "port security (Port_Binding.port_security): MACs and, in switches that run the pipeline, IP addresses",
    "MACs learned behind 'unknown' ports without port security, written to the FDB table; other chassis' FDB rows read back (unicast to the port, not _MC_unknown)",
    "requested-chassis, port up notification (Port_Binding.up), nb_cfg (ovn-nbctl --wait=hv)",
    "live migration: multi-chassis bindings (requested-chassis=MAIN,OTHER) with activation-strategy=rarp, in switches forwarded by the L2 rules and in those that run the pipeline: frames to the port go to every chassis that holds it; an additional chassis blocks the port until its RARP",
    "forwarding on the last state while the Southbound database is away; resync on reconnect",
    "provider networks; IGMP/MLD snooping (mcast_snoop=true) in switches forwarded by the L2 rules and, through the igmp action, in those that run the pipeline",
];

/// What a vswitchd chassis refuses or counts, never silently skips.
pub const UNSUPPORTED: [&str; 5] = [
    "DNS, QoS meters, ECMP (select) and the other actions listed by `vswitchctl ovn` for a refused port: a switch whose pipeline reaches a flow using one is not claimed, and the action and flow are named",
    "controller actions beyond DHCP, ARP/ND, ICMP errors, TCP resets, SCTP aborts, MAC binding learning and health check answers (IPv6 router advertisements, DNS, the logical router BFD of the BFD table): their datapaths are refused",
    "port types other than VIF and gateway ports (localport, virtual, external, vtep) are not bound; a localnet port whose network is not mapped leaves its switch on tunnels",
    "IP fragments through connection tracking are not reassembled: they are ct.inv, and OVN's ACL stages drop them",
    "multicast: OVN's querier, per-switch mcast_idle_timeout/mcast_table_size (--mcast-aging/--mcast-table-size apply), mcast_flood_unregistered=true, mcast_flood_reports and relay through routers; reports from a provider network are not snooped",
];

impl Status {
    /// Keeps `p` for `vswitchctl ovn trace`.
    pub fn set_pipelines(&self, p: Arc<pipeline::Pipelines>) {
        *self.pipelines.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
    }

    fn pipelines(&self) -> Option<Arc<pipeline::Pipelines>> {
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl crate::control::ops::OvnChassis for Status {
    fn reply(&self, sw: &crate::switch::Switch) -> OvnReply {
        reply_of(self, sw)
    }

    fn trace(
        &self,
        microflow: &str,
        ct: &[String],
    ) -> Result<crate::control::protocol::OvnTraceReply, String> {
        let p = self
            .pipelines()
            .ok_or("no logical pipeline yet (no port bound to a switch of this chassis)")?;
        let states = ct
            .iter()
            .map(|s| pipeline::trace::parse_ct_state(s))
            .collect::<Result<Vec<u32>, String>>()?;
        let (outcome, nodes) =
            pipeline::trace::trace(&p, microflow, states, pipeline::interp::Mode::Chassis)?;
        let outputs = outcome
            .outputs()
            .map(|o| {
                let name = |dp: u32, port: u16| {
                    p.datapath(dp)
                        .map_or(String::new(), |d| d.name_of(port).to_string())
                };
                match &o.dest {
                    pipeline::interp::Dest::Local { dp, port } => name(*dp, *port),
                    pipeline::interp::Dest::Remote {
                        chassis,
                        dp,
                        outport,
                        ..
                    } => format!("{}@{chassis}", name(*dp, *outport)),
                    pipeline::interp::Dest::Nowhere { dp, port } => {
                        format!("{} (nowhere)", name(*dp, *port))
                    }
                }
            })
            .collect();
        Ok(crate::control::protocol::OvnTraceReply {
            detailed: pipeline::trace::detailed(&nodes),
            minimal: pipeline::trace::minimal(&nodes),
            outputs,
        })
    }

    fn zone_owner(&self, dp: u32, port: u16) -> Option<String> {
        let p = self.pipelines()?;
        let d = p.datapath(dp)?;
        use crate::model::lflow::{DNAT_ZONE, SNAT_ZONE};
        Some(match port {
            // ovn-controller's names: `<datapath>_dnat`, `<datapath>_snat`.
            DNAT_ZONE => format!("{}_dnat", d.name),
            SNAT_ZONE => format!("{}_snat", d.name),
            _ => d.name_of(port).to_string(),
        })
    }
}

/// The reply of chassis `status` on `sw`, with the frames exchanged with each other
/// chassis.
pub fn reply_of(status: &Status, sw: &crate::switch::Switch) -> OvnReply {
    let mut r = status.reply();
    for c in &mut r.other_chassis {
        let id = c.encap_ip.parse().ok().and_then(|ip| sw.remotes.id(ip));
        if let Some(id) = id {
            (c.tx_packets, c.rx_packets) = sw.remotes.frames(id);
        }
    }
    if let Some(p) = status.pipelines() {
        r.stages = stage_rows(&p);
    }
    let [made, not_made, held, released, expired, overflowed, orphaned] = sw.slow_stats.read();
    r.slow_path = crate::control::protocol::OvnSlowPathRow {
        made,
        not_made,
        held,
        released,
        expired,
        overflowed,
        orphaned,
    };
    if !r.chassis.is_empty() {
        r.supported = SUPPORTED.iter().map(|s| s.to_string()).collect();
        r.unsupported = UNSUPPORTED.iter().map(|s| s.to_string()).collect();
    }
    r
}

/// Every stage of every datapath of `p`, with its flows and interpreter hits.
fn stage_rows(p: &pipeline::Pipelines) -> Vec<crate::control::protocol::OvnStageRow> {
    let mut rows = Vec::new();
    for dp in p.datapaths.values() {
        for (pl, tables) in ["ingress", "egress"].iter().zip(dp.tables.iter()) {
            for (i, t) in tables.iter().enumerate() {
                rows.push(crate::control::protocol::OvnStageRow {
                    datapath: dp.name.clone(),
                    pipeline: pl.to_string(),
                    table: i as u8,
                    stage: t.stage.clone(),
                    flows: t.flows.len() as u64,
                    hits: t
                        .flows
                        .iter()
                        .map(|f| f.hits.load(std::sync::atomic::Ordering::Relaxed))
                        .sum(),
                });
            }
        }
    }
    rows
}

/// The Southbound tables and columns the chassis monitors: `Port_Binding`,
/// `Multicast_Group`, `FDB`, `Logical_Flow` and `MAC_Binding` only as far as the
/// chassis' interest ([`interest`]) goes (of `Port_Binding`, every patch port
/// besides); the rest whole.
pub fn monitor_spec() -> MonitorSpec {
    MonitorSpec::new(sb::DATABASE)
        .table(TableSpec::of::<sb::SbGlobal>())
        .table(TableSpec::of::<sb::Chassis>().index("name"))
        .table(TableSpec::of::<sb::Encap>())
        .table(TableSpec::of::<sb::ChassisPrivate>().index("name"))
        .table(TableSpec::of::<sb::DatapathBinding>())
        .table(
            TableSpec::of::<sb::PortBinding>()
                .index("logical_port")
                .condition(interest::patch_ports()),
        )
        .table(TableSpec::of::<sb::MulticastGroup>().condition(none()))
        .table(TableSpec::of::<sb::Fdb>().condition(none()))
        .table(TableSpec::of::<sb::IpMulticast>())
        .table(TableSpec::of::<sb::IgmpGroup>().condition(none()))
        .table(sb::logical_flows().condition(none()))
        .table(TableSpec::of::<sb::LogicalDpGroup>())
        .table(TableSpec::of::<sb::AddressSet>())
        .table(TableSpec::of::<sb::PortGroup>())
        .table(TableSpec::of::<sb::MacBinding>().condition(none()))
        .table(TableSpec::of::<sb::StaticMacBinding>())
        .table(TableSpec::of::<sb::DhcpOptions>())
        .table(TableSpec::of::<sb::Dhcpv6Options>())
        .table(TableSpec::of::<sb::HaChassisGroup>())
        .table(TableSpec::of::<sb::HaChassis>())
        .table(TableSpec::of::<sb::ServiceMonitor>())
}

/// Every table the chassis and its logical pipeline read, whole (ovn-controller's
/// `ovn-monitor-all=true`): for tools and tests that look at a whole deployment.
pub fn monitor_spec_all() -> MonitorSpec {
    MonitorSpec::new(sb::DATABASE)
        .table(TableSpec::of::<sb::SbGlobal>())
        .table(TableSpec::of::<sb::Chassis>().index("name"))
        .table(TableSpec::of::<sb::Encap>())
        .table(TableSpec::of::<sb::DatapathBinding>())
        .table(TableSpec::of::<sb::PortBinding>().index("logical_port"))
        .table(TableSpec::of::<sb::MulticastGroup>())
        .table(TableSpec::of::<sb::Fdb>())
        .table(TableSpec::of::<sb::IpMulticast>())
        .table(sb::logical_flows())
        .table(TableSpec::of::<sb::LogicalDpGroup>())
        .table(TableSpec::of::<sb::AddressSet>())
        .table(TableSpec::of::<sb::PortGroup>())
        .table(TableSpec::of::<sb::MacBinding>())
        .table(TableSpec::of::<sb::StaticMacBinding>())
        .table(TableSpec::of::<sb::DhcpOptions>())
        .table(TableSpec::of::<sb::Dhcpv6Options>())
        .table(TableSpec::of::<sb::HaChassisGroup>())
        .table(TableSpec::of::<sb::HaChassis>())
        .table(TableSpec::of::<sb::ServiceMonitor>())
}

/// No row: the conditioned tables' start ([`interest`] widens them as the view grows).
fn none() -> Vec<Condition> {
    vec![Condition::Const(false)]
}

/// Starts the chassis on a thread of its own; returns its status.
pub fn spawn(ctl: Arc<Control>, cfg: OvnConfig) -> Arc<Status> {
    let status = Arc::new(Status::default());
    spawn_with(ctl, cfg, status.clone());
    status
}

/// Starts the chassis for `cfg` on a thread of its own, reporting into `status` (that
/// of one stopped before it, when the chassis is re-registered: `vswitchctl ovn` keeps
/// answering).
pub fn spawn_with(ctl: Arc<Control>, cfg: OvnConfig, status: Arc<Status>) {
    let encap = ctl
        .switch
        .config()
        .geneve
        .iter()
        .find(|g| g.local.is_ipv4())
        .map(|g| (g.local, g.udp_checksum()));
    status.update(|r| {
        r.chassis = cfg.chassis.clone();
        r.remotes = cfg.remotes.clone();
        r.encap_ip = encap.map(|e| e.0.to_string()).unwrap_or_default();
        r.connection = "connecting".into();
    });
    let Some(encap) = encap else {
        // Config validation refuses OVN without an IPv4 endpoint.
        warn!("OVN chassis without an IPv4 Geneve endpoint; not started");
        return;
    };
    // A thread and runtime of its own: the chassis' allocations (10^5 rows decoded,
    // pipelines built and rebuilt) then stay in one malloc arena. Spread over the
    // control runtime's workers, each worker's arena kept its own freed pages: at
    // 40,000 ports, RSS 312-325 MiB from run to run against 307 MiB on one thread.
    // The thread inherits the caller's CPU affinity (the control threads', off the
    // PMDs' cores).
    let spawned = std::thread::Builder::new()
        .name("ovn-chassis".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(run(ctl, cfg, encap, status)),
                Err(e) => warn!(error = %e, "OVN chassis: no runtime; not started"),
            }
        });
    if let Err(e) = spawned {
        warn!(error = %e, "OVN chassis: its thread did not start; not started");
    }
}

/// The chassis task.
async fn run(ctl: Arc<Control>, mut cfg: OvnConfig, encap: (IpAddr, bool), status: Arc<Status>) {
    let remotes: Vec<ovsdb::Remote> = cfg.remotes.iter().filter_map(|r| r.parse().ok()).collect();
    let client_cfg = ClientConfig {
        inactivity_probe: cfg.inactivity_probe(),
        ..ClientConfig::new(remotes)
    };
    let (client, mut events) = Client::start(client_cfg, monitor_spec());
    let mut reg = registration::Registration::new(&cfg, encap);
    let mut pass = apply::Pass::default();
    let mut connected = false;
    // A pass that failed (a transaction refused, the connection lost midway) is tried
    // again after this long even if nothing changes meanwhile.
    let mut retry: Option<tokio::time::Instant> = None;
    let mut fdb_tick = tokio::time::interval(FDB_TICK);
    fdb_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut fdb_seen = u64::MAX;
    let mut igmp = igmp::Sync::default();
    let mut activation_tick = tokio::time::interval(ACTIVATION_TICK);
    activation_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut trim = Trim::default();
    let mut dirty = rows::Dirty::default();
    dirty.all = true;
    let bfd = match bfd::spawn(ctl.clone(), status.clone()) {
        Ok(b) => b,
        Err(e) => {
            warn!(error = %e, "OVN chassis: the BFD thread did not start; not started");
            return;
        }
    };
    let mut bfd_peers = (BTreeMap::new(), ::bfd::Config::default());
    let mut prober = svc_monitor::Prober::default();
    loop {
        let retry_at = retry.unwrap_or_else(|| tokio::time::Instant::now() + RETRY_IDLE);
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else { break };
                let mut changed = relevant(&ev);
                connected = note(&status, ev, connected, &mut dirty);
                // Everything already queued is one batch.
                changed |= note_queued(&mut events, &status, &mut connected, &mut dirty);
                if !changed && retry.is_none() {
                    continue;
                }
            }
            () = ctl.ovn_wake.notified() => {}
            () = tokio::time::sleep_until(retry_at), if retry.is_some() => {}
            _ = fdb_tick.tick(), if connected => {
                let g = ctl.switch.fdb.generation();
                if g != fdb_seen {
                    match fdb::publish(&client, &fdb::learned(&ctl.switch)).await {
                        Ok(n) => {
                            fdb_seen = g;
                            if n > 0 {
                                info!(rows = n, "learned MACs written to the Southbound FDB table");
                            }
                        }
                        Err(e) => warn!(error = %e, "OVN FDB update failed; tried again"),
                    }
                }
                igmp.run(&client, &pass, &ctl.switch).await;
                let learned = std::mem::take(
                    &mut *ctl.switch.learned.lock().unwrap_or_else(|e| e.into_inner()),
                );
                let (answers, bindings): (Vec<_>, Vec<_>) = learned
                    .into_iter()
                    .partition(|l| matches!(l, crate::model::lflow::Learned::SvcReply(_)));
                if !bindings.is_empty() {
                    if let Err(e) = mac_binding::publish(&client, bindings).await {
                        warn!(error = %e, "MAC_Binding update failed");
                    }
                }
                let answers = answers
                    .into_iter()
                    .filter_map(|l| match l {
                        crate::model::lflow::Learned::SvcReply(f) => Some(f),
                        crate::model::lflow::Learned::MacBinding { .. } => None,
                    })
                    .collect();
                if let Err(e) = prober.run(&client, &ctl.switch, answers).await {
                    warn!(error = %e, "Service_Monitor update failed");
                }
                continue;
            }
            _ = activation_tick.tick(), if connected && pass.awaiting_activation() => {
                if !apply::announcement_pending(&pass, &ctl.switch) {
                    continue;
                }
            }
            () = ctl.ovn_stop.notified() => {
                bfd.stop();
                if connected {
                    reg.unregister(&client, &ctl).await;
                }
                client.shutdown().await;
                ctl.ovn_stopped.notify_one();
                return;
            }
        }
        let update = ctl
            .ovn_update
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(new) = update {
            info!(
                bridge_mappings = %new.bridge_mappings_text(),
                cms_options = %new.cms_options,
                hostname = %new.hostname,
                probe_interval_ms = new.probe_interval_ms,
                "OVN chassis settings changed in place"
            );
            if new.probe_interval_ms != cfg.probe_interval_ms {
                client.set_inactivity_probe(new.inactivity_probe());
            }
            reg = registration::Registration::new(&new, encap);
            cfg = new;
            dirty.all = true;
        }
        // A pass woken otherwise (its own condition change asks for the next) sees the
        // rows already replicated: the change sets queued meanwhile are noted first.
        note_queued(&mut events, &status, &mut connected, &mut dirty);
        if !connected {
            continue;
        }
        pass.set_active_tunnels(&bfd.up());
        let result = match reg.ensure(&client).await {
            Ok(()) => pass.run(&ctl, &client, &cfg, &status, &mut dirty).await,
            Err(e) => Err(format!("registering the chassis: {e}")),
        };
        retry = match result {
            Ok(()) => {
                trim.run();
                igmp.stale = true;
                let peers = pass.bfd_peers();
                if peers != bfd_peers {
                    bfd.want(peers.0.clone(), peers.1);
                    bfd_peers = peers;
                }
                None
            }
            Err(e) => {
                warn!(error = %e, "OVN pass failed; retried in 1 s or on the next change");
                Some(tokio::time::Instant::now() + RETRY)
            }
        };
    }
}

/// Sends `ops` as one transaction, unless there are none; returns how many it sent.
///
/// # Errors
/// The transaction failed: `"{what}: {error}"` (the caller tries again later).
pub(crate) async fn transact_ops(
    client: &Client,
    ops: Vec<ovsdb::Operation>,
    what: &str,
) -> Result<usize, String> {
    if ops.is_empty() {
        return Ok(0);
    }
    let n = ops.len();
    client
        .transact(ops)
        .await
        .map(|_| n)
        .map_err(|e| format!("{what}: {e}"))
}

/// How often the chassis looks for newly learned MACs to write to the `FDB` table
/// (ovn-controller writes on the first frame; a frame to such a MAC from another
/// chassis goes to `_MC_unknown`, still delivered, until the row is there).
pub const FDB_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// How often the chassis looks for ports that sent their RARP while awaiting
/// activation (a few atomic loads): the port is active here, and the binding marked
/// so, within this of its RARP.
pub const ACTIVATION_TICK: std::time::Duration = std::time::Duration::from_millis(10);

/// Returns the heap a pass freed to the kernel (glibc's `malloc_trim`), at most once
/// per [`Trim::EVERY`]. A pass decodes the whole replica into owned rows and drops
/// them; glibc keeps such freed memory in its per-thread arenas, where it would count
/// as the chassis' resident memory for as long as the process runs.
#[derive(Debug, Default)]
struct Trim {
    last: Option<std::time::Instant>,
}

impl Trim {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(1);

    fn run(&mut self) {
        if self.last.is_some_and(|t| t.elapsed() < Self::EVERY) {
            return;
        }
        self.last = Some(std::time::Instant::now());
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only returns free heap pages to the kernel.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// How long after a failed pass the next one runs when nothing else wakes the chassis.
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// A placeholder deadline while no retry is due (the branch is disabled then).
const RETRY_IDLE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Whether event `ev` can change the view: any change but those to the tables this
/// chassis only writes ([`rows::WRITTEN_HERE`]: its `nb_cfg`, its `IGMP_Group` rows;
/// without this, every pass would be followed by a second one for its own write).
fn relevant(ev: &Event) -> bool {
    match ev {
        Event::Changes(cs) => cs
            .changes
            .iter()
            .any(|c| !rows::WRITTEN_HERE.contains(&c.table.as_str())),
        Event::Connected { .. } | Event::Disconnected { .. } => true,
    }
}

/// Notes the events already queued on `events` ([`note`]); returns whether any can
/// change the view ([`relevant`]).
fn note_queued(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
    status: &Status,
    connected: &mut bool,
    dirty: &mut rows::Dirty,
) -> bool {
    let mut changed = false;
    while let Ok(ev) = events.try_recv() {
        changed |= relevant(&ev);
        *connected = note(status, ev, *connected, dirty);
    }
    changed
}

/// Notes event `ev` in the status and its rows in `dirty`; returns whether the
/// database is connected now.
fn note(status: &Status, ev: Event, connected: bool, dirty: &mut rows::Dirty) -> bool {
    match ev {
        Event::Connected {
            remote,
            incremental,
        } => {
            info!(%remote, incremental, "connected to the OVN Southbound database");
            status.update(|r| {
                r.connection = format!("connected to {remote}");
                r.connects += 1;
            });
            dirty.all = true;
            true
        }
        Event::Disconnected { remote, reason } => {
            warn!(%remote, %reason, "OVN Southbound database connection lost; forwarding on the last state");
            status.update(|r| r.connection = format!("disconnected from {remote}: {reason}"));
            false
        }
        Event::Changes(cs) => {
            dirty.note(&cs);
            connected
        }
    }
}

/// The rows of `vswitchctl ovn` for `view`.
fn rows(view: &view::View, sb: &view::Sb) -> (Vec<OvnPortRow>, Vec<OvnChassisRow>) {
    let mut ports = Vec::new();
    for (name, p) in &view.ports {
        let mut row = OvnPortRow {
            port: name.clone(),
            ..Default::default()
        };
        match p {
            view::PortView::Bound {
                binding,
                datapath,
                key,
                up,
                role,
                ..
            } => {
                row.role = match role {
                    view::Role::Main => "main",
                    view::Role::Additional { blocked: false } => "additional",
                    view::Role::Additional { blocked: true } => "additional, awaiting RARP",
                }
                .into();
                row.logical_port = sb
                    .ports
                    .get(binding)
                    .map(|b| b.logical_port.clone())
                    .unwrap_or_default();
                if let Some(d) = view.datapaths.get(datapath) {
                    row.logical_switch = d.name.clone();
                    row.vni = d.tunnel_key;
                }
                row.key = *key;
                row.bound = true;
                row.up = *up;
            }
            view::PortView::Unbound(why) => row.why_unbound = why.clone(),
        }
        ports.push(row);
    }
    let mut chassis: BTreeMap<String, OvnChassisRow> = BTreeMap::new();
    for d in view.datapaths.values() {
        for (_, dest) in &d.fdb {
            if let view::DestView::Remote { chassis: c, ip, .. } = dest {
                let row = chassis.entry(c.clone()).or_insert_with(|| OvnChassisRow {
                    name: c.clone(),
                    encap_ip: ip.to_string(),
                    ..Default::default()
                });
                if !row.logical_switches.contains(&d.name) {
                    row.logical_switches.push(d.name.clone());
                }
            }
        }
    }
    (ports, chassis.into_values().collect())
}

/// The provider networks of the view's logical switches, for `vswitchctl ovn`.
pub(crate) fn provider_rows(view: &view::View) -> Vec<OvnLocalnetRow> {
    view.datapaths
        .values()
        .filter_map(|d| {
            let l = d.localnet.as_ref()?;
            Some(OvnLocalnetRow {
                logical_switch: d.name.clone(),
                localnet_port: l.port.clone(),
                network: l.network.clone(),
                uplink: l.uplink.clone().unwrap_or_default(),
                vlan: l.tag,
            })
        })
        .collect()
}
