//! Prometheus export (`vswitchd --metrics ADDR`) through hyper on the control plane's
//! runtime: the same counters `vswitchctl` shows, in the OpenMetrics text format,
//! encoded by `prometheus-client` on each scrape from the per-PMD counters (nothing is
//! added to the data path), and a health check.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use tracing::{debug, warn};

use crate::model::stats::{DropReason, PortStats};
use crate::switch::Switch;

use super::ops::Control;

/// Reads the switch's counters on each scrape.
#[derive(Debug)]
pub struct SwitchCollector(pub Arc<Switch>);

type PortField = fn(&PortStats) -> u64;

impl Collector for SwitchCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sw = &self.0;
        let stats: Vec<(String, PortStats, bool)> = sw
            .topo()
            .iter()
            .map(|p| (p.port.name.clone(), p.port.stats(), p.port.link_up()))
            .collect();
        let fields: [(&str, &str, PortField); 4] = [
            (
                "vswitch_port_rx_packets",
                "Frames received from the port's guest.",
                |s| s.rx_packets,
            ),
            (
                "vswitch_port_rx_bytes",
                "Bytes received from the port's guest.",
                |s| s.rx_bytes,
            ),
            (
                "vswitch_port_tx_packets",
                "Frames delivered to the port's guest.",
                |s| s.tx_packets,
            ),
            (
                "vswitch_port_tx_bytes",
                "Bytes delivered to the port's guest.",
                |s| s.tx_bytes,
            ),
        ];
        for (name, help, get) in fields {
            let c = ConstCounter::new(0u64);
            let mut m = enc.encode_descriptor(name, help, None, c.metric_type())?;
            for (port, s, _) in &stats {
                ConstCounter::new(get(s)).encode(m.encode_family(&[("port", port.as_str())])?)?;
            }
        }
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(
            "vswitch_port_drops",
            "Frames dropped, by port and reason.",
            None,
            c.metric_type(),
        )?;
        for (port, s, _) in &stats {
            for r in DropReason::ALL {
                let n = s.drops.get(r.name()).copied().unwrap_or(0);
                ConstCounter::new(n)
                    .encode(m.encode_family(&[("port", port.as_str()), ("reason", r.name())])?)?;
            }
        }
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "vswitch_port_link_up",
            "1 when the port's link is up.",
            None,
            g.metric_type(),
        )?;
        for (port, _, up) in &stats {
            ConstGauge::new(i64::from(*up)).encode(m.encode_family(&[("port", port.as_str())])?)?;
        }
        let pmd_fields: [(&str, &str, usize); 8] = [
            (
                "vswitch_pmd_packets",
                "Frames processed by the PMD thread.",
                0,
            ),
            ("vswitch_pmd_batches", "Non-empty bursts processed.", 1),
            (
                "vswitch_pmd_busy_cycles",
                "Cycles in rounds that found work.",
                2,
            ),
            (
                "vswitch_pmd_idle_cycles",
                "Cycles in empty rounds and asleep.",
                3,
            ),
            (
                "vswitch_pmd_busy_rounds",
                "Poll rounds (every owned queue once) that found work.",
                6,
            ),
            (
                "vswitch_pmd_idle_rounds",
                "Poll rounds that found nothing.",
                7,
            ),
            (
                "vswitch_pmd_cache_hits_last_flow",
                "Frames decided by the previous frame of the burst.",
                4,
            ),
            (
                "vswitch_pmd_cache_hits_emc",
                "Frames decided by the exact-match cache.",
                5,
            ),
        ];
        for (name, help, i) in pmd_fields {
            let c = ConstCounter::new(0u64);
            let mut m = enc.encode_descriptor(name, help, None, c.metric_type())?;
            for pmd in &sw.pmds {
                let c = &pmd.counters;
                let v = match i {
                    0 => c.packets.get(),
                    1 => c.batches.get(),
                    2 => c.busy_cycles.get(),
                    3 => c.idle_cycles.get(),
                    4 => pmd.cache_stats[0].get(),
                    5 => pmd.cache_stats[1].get(),
                    6 => c.busy_rounds.get(),
                    _ => c.idle_rounds.get(),
                };
                let idx = pmd.index.to_string();
                ConstCounter::new(v).encode(m.encode_family(&[("pmd", idx.as_str())])?)?;
            }
        }
        let c = ConstCounter::new(0u64);
        let mut m = enc.encode_descriptor(
            "vswitch_pmd_cache_misses",
            "Frames that took the slow path.",
            None,
            c.metric_type(),
        )?;
        for pmd in &sw.pmds {
            let idx = pmd.index.to_string();
            ConstCounter::new(pmd.cache_stats[2].get())
                .encode(m.encode_family(&[("pmd", idx.as_str())])?)?;
        }
        encode_mcast(sw, &mut enc)?;
        encode_tunnels(sw, &mut enc)
    }
}

/// `vswitch_mcast_*`: the snooping table's size (groups, memberships, router ports)
/// and snooping's counters.
fn encode_mcast(sw: &Switch, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let (groups, routers) = sw.mcast.rows();
    let mut distinct: Vec<_> = groups.iter().map(|r| (r.domain, r.group)).collect();
    distinct.dedup();
    for (name, help, v) in [
        (
            "vswitch_mcast_groups",
            "Groups in the snooping table.",
            distinct.len(),
        ),
        (
            "vswitch_mcast_memberships",
            "Group memberships (group, port) in the snooping table.",
            groups.len(),
        ),
        (
            "vswitch_mcast_router_ports",
            "Multicast-router ports (per domain).",
            routers.len(),
        ),
    ] {
        let g = ConstGauge::new(v as i64);
        g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)?;
    }
    let c = &sw.mcast.counters;
    for (name, help, v) in [
        (
            "vswitch_mcast_reports",
            "IGMP/MLD reports and leaves snooped.",
            &c.reports,
        ),
        (
            "vswitch_mcast_queries",
            "IGMP/MLD queries snooped.",
            &c.queries,
        ),
        (
            "vswitch_mcast_joins",
            "Memberships added by reports.",
            &c.joins,
        ),
        (
            "vswitch_mcast_leaves",
            "Memberships removed by leaves.",
            &c.leaves,
        ),
        (
            "vswitch_mcast_expired",
            "Memberships and router ports aged out.",
            &c.expired,
        ),
        (
            "vswitch_mcast_refused_full",
            "Group records not learned: table full.",
            &c.refused_full,
        ),
        (
            "vswitch_mcast_invalid",
            "Malformed IGMP/MLD messages dropped.",
            &c.invalid,
        ),
        (
            "vswitch_mcast_forwarded",
            "Frames sent to a registered group's members and router ports only.",
            &c.forwarded,
        ),
        (
            "vswitch_mcast_flooded_unregistered",
            "Frames to unregistered groups flooded.",
            &c.flooded_unregistered,
        ),
        (
            "vswitch_mcast_unregistered_to_routers",
            "Frames to unregistered groups sent to router ports only.",
            &c.unregistered_to_routers,
        ),
        (
            "vswitch_mcast_queries_sent",
            "Rounds of general queries the querier sent into a domain.",
            &c.queries_sent,
        ),
    ] {
        let m = ConstCounter::new(v.load(Relaxed));
        m.encode(enc.encode_descriptor(name, help, None, m.metric_type())?)?;
    }
    Ok(())
}

/// `vswitch_tunnel_*`: each local endpoint's frames and bytes each way, segmented
/// frames, options received, and drops by reason.
fn encode_tunnels(sw: &Switch, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    use crate::model::tunnel::{TepCounters, TunnelDrop};
    let topo = sw.topo();
    let teps = &topo.tunnels.teps;
    type Field = fn(&TepCounters) -> u64;
    let fields: [(&str, &str, Field); 6] = [
        (
            "vswitch_tunnel_rx_packets",
            "Geneve frames received (outer).",
            |c| c.rx_packets.get(),
        ),
        (
            "vswitch_tunnel_rx_bytes",
            "Bytes of Geneve frames received (outer).",
            |c| c.rx_bytes.get(),
        ),
        (
            "vswitch_tunnel_tx_packets",
            "Geneve frames sent (outer, after segmentation).",
            |c| c.tx_packets.get(),
        ),
        (
            "vswitch_tunnel_tx_bytes",
            "Bytes of Geneve frames sent (outer).",
            |c| c.tx_bytes.get(),
        ),
        (
            "vswitch_tunnel_segmented",
            "TSO frames segmented while encapsulated.",
            |c| c.segmented.get(),
        ),
        (
            "vswitch_tunnel_rx_options",
            "Geneve options received.",
            |c| c.rx_options.get(),
        ),
    ];
    for (name, help, get) in fields {
        let mut m =
            enc.encode_descriptor(name, help, None, ConstCounter::new(0u64).metric_type())?;
        for t in teps {
            let v: u64 = t.counters.iter().map(get).sum();
            ConstCounter::new(v).encode(m.encode_family(&[("tep", t.config.name.as_str())])?)?;
        }
    }
    let mut m = enc.encode_descriptor(
        "vswitch_tunnel_drops",
        "Frames dropped by a tunnel endpoint, by reason.",
        None,
        ConstCounter::new(0u64).metric_type(),
    )?;
    for t in teps {
        let name = t.config.name.as_str();
        for r in geneve::decap::DropReason::ALL {
            let v: u64 = t
                .counters
                .iter()
                .map(|c| c.decap_drops[r.index()].get())
                .sum();
            ConstCounter::new(v)
                .encode(m.encode_family(&[("tep", name), ("reason", r.as_str())])?)?;
        }
        for r in TunnelDrop::ALL {
            let v: u64 = t.counters.iter().map(|c| c.drops[r as usize].get()).sum();
            ConstCounter::new(v)
                .encode(m.encode_family(&[("tep", name), ("reason", r.name())])?)?;
        }
    }
    Ok(())
}

/// `vswitch_ovn_*`: the OVN chassis' Southbound connection, the `nb_cfg` applied, its
/// ports by state, the frames exchanged with each other chassis, and its slow path.
#[derive(Debug)]
pub struct OvnCollector {
    status: Arc<dyn super::ops::OvnChassis>,
    switch: Arc<Switch>,
}

impl Collector for OvnCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = self.status.reply(&self.switch);
        let gauge = |enc: &mut DescriptorEncoder, name: &str, help: &str, v: i64| {
            let g = ConstGauge::new(v);
            g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)
        };
        gauge(
            &mut enc,
            "vswitch_ovn_southbound_connected",
            "1 while the OVN Southbound database is connected.",
            i64::from(r.connection.starts_with("connected")),
        )?;
        gauge(
            &mut enc,
            "vswitch_ovn_nb_cfg",
            "The SB_Global.nb_cfg this chassis last applied.",
            r.nb_cfg,
        )?;
        let c = ConstCounter::new(r.connects);
        c.encode(enc.encode_descriptor(
            "vswitch_ovn_southbound_connects",
            "Connections made to the OVN Southbound database.",
            None,
            c.metric_type(),
        )?)?;
        let mut m = enc.encode_descriptor(
            "vswitch_ovn_ports",
            "Local ports naming an OVN logical switch port, by state.",
            None,
            ConstGauge::new(0i64).metric_type(),
        )?;
        let bound = r.ports.iter().filter(|p| p.bound).count() as i64;
        for (state, n) in [("bound", bound), ("unbound", r.ports.len() as i64 - bound)] {
            ConstGauge::new(n).encode(m.encode_family(&[("state", state)])?)?;
        }
        for (name, help, get) in [
            (
                "vswitch_ovn_chassis_tx_packets",
                "Frames sent to another OVN chassis (inner, before segmentation).",
                (|c: &crate::control::protocol::OvnChassisRow| c.tx_packets) as fn(&_) -> u64,
            ),
            (
                "vswitch_ovn_chassis_rx_packets",
                "Frames received from another OVN chassis (inner, after decapsulation).",
                |c| c.rx_packets,
            ),
        ] {
            let mut m =
                enc.encode_descriptor(name, help, None, ConstCounter::new(0u64).metric_type())?;
            for c in &r.other_chassis {
                ConstCounter::new(get(c))
                    .encode(m.encode_family(&[("chassis", c.name.as_str())])?)?;
            }
        }
        let sp = &r.slow_path;
        let mut m = enc.encode_descriptor(
            "vswitch_ovn_slow_path_frames",
            "Frames of OVN's slow path: made (controller actions) and not made; held for a router's next hop and released, expired, overflowed or orphaned.",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (what, v) in [
            ("made", sp.made),
            ("not_made", sp.not_made),
            ("held", sp.held),
            ("released", sp.released),
            ("expired", sp.expired),
            ("overflowed", sp.overflowed),
            ("orphaned", sp.orphaned),
        ] {
            ConstCounter::new(v).encode(m.encode_family(&[("what", what)])?)?;
        }
        Ok(())
    }
}

/// Longest a client may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest a whole connection may last (request, encoding, reply).
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Most connections served at once; more wait in the kernel's accept queue.
const MAX_CONNECTIONS: usize = 256;

/// Serves the metrics endpoint on the tokio runtime until it stops: `GET /metrics`
/// (OpenMetrics text, [`SwitchCollector`]), `GET /healthz` (200 `ok` while every PMD
/// thread runs, else 503 with the reason). Every connection is its own task, bounded in
/// time (`HEADER_TIMEOUT`, `CONNECTION_TIMEOUT`), so a slow or idle client never
/// holds up another scrape.
pub async fn serve(listener: TcpListener, ctl: Arc<Control>) {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SwitchCollector(ctl.switch.clone())));
    if let Some(status) = ctl.ovn.get() {
        registry.register_collector(Box::new(OvnCollector {
            status: status.clone(),
            switch: ctl.switch.clone(),
        }));
    }
    let registry = Arc::new(registry);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                warn!(error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (registry, ctl) = (registry.clone(), ctl.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let r = respond(&req, &registry, &ctl);
                async move { Ok::<_, std::convert::Infallible>(r) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            if tokio::time::timeout(CONNECTION_TIMEOUT, conn)
                .await
                .is_err()
            {
                debug!("metrics client too slow; disconnected");
            }
            drop(permit);
        });
    }
}

/// The reply to one HTTP request.
fn respond(req: &Request<Incoming>, registry: &Registry, ctl: &Control) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .expect("a valid response")
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
    }
    match req.uri().path() {
        "/metrics" => {
            let mut body = String::new();
            if let Err(e) = prometheus_client::encoding::text::encode(&mut body, registry) {
                return text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"));
            }
            Response::builder()
                .header(
                    "content-type",
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                )
                .body(Full::new(Bytes::from(body)))
                .expect("a valid response")
        }
        "/healthz" => match ctl.health() {
            Ok(()) => text(StatusCode::OK, "ok\n".into()),
            Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; try /metrics or /healthz\n".into(),
        ),
    }
}
