//! Prometheus export (`vswitchd --metrics ADDR`): the same counters `vswitchctl` shows,
//! in the OpenMetrics text format, encoded by `prometheus-client` on each scrape from
//! the per-PMD counters (nothing is added to the data path).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use tracing::warn;

use crate::model::stats::{DropReason, PortStats};
use crate::switch::Switch;

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
        let pmd_fields: [(&str, &str, usize); 6] = [
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
                    _ => pmd.cache_stats[1].get(),
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
        Ok(())
    }
}

/// Serves `GET /metrics` on `listener` until the switch stops.
pub fn serve(listener: TcpListener, switch: Arc<Switch>) {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SwitchCollector(switch.clone())));
    let registry = Arc::new(registry);
    for stream in listener.incoming() {
        if switch.stopping() {
            break;
        }
        let Ok(stream) = stream else { continue };
        if let Err(e) = serve_one(stream, &registry) {
            warn!(error = %e, "metrics client");
        }
    }
}

fn serve_one(stream: TcpStream, registry: &Registry) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Skip the request headers.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut w = stream;
    if !request.starts_with("GET /metrics") {
        return write!(
            w,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
    }
    let mut body = String::new();
    prometheus_client::encoding::text::encode(&mut body, registry)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    write!(
        w,
        "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}
