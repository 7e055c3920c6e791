//! The control socket: one JSON request line in, one JSON reply line out.
//!
//! Request: `{"cmd":"show"}` (also `stats`, `fdb`, `pmd-stats`).
//! Reply: `{"ok": <value>}` or `{"error": "<message>"}`.

pub mod metrics;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::model::fdb::FdbRow;
use crate::model::stats::PortStats;
use crate::switch::Switch;

/// A control request.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// `show`, `stats`, `fdb`, `pmd-stats`, `flows`, `offloads`, `acl-list`, `acl-add`,
    /// `acl-del`.
    pub cmd: String,
    /// Arguments: `acl-add PORT [POSITION] RULE`, `acl-del PORT INDEX`,
    /// `acl-list [PORT]`, `flows [PMD]`.
    #[serde(default)]
    pub args: Vec<String>,
}

/// One ACL rule in `acl-list`.
#[derive(Debug, Serialize, Deserialize)]
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
#[derive(Debug, Serialize, Deserialize)]
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
#[derive(Debug, Serialize, Deserialize)]
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

/// [`PortStats`] with owned keys, for deserializing in vswitchctl.
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
    /// Drops by reason.
    pub drops: std::collections::BTreeMap<String, u64>,
    /// All drops.
    pub drops_total: u64,
}

impl From<PortStats> for PortStatsOwned {
    fn from(s: PortStats) -> Self {
        PortStatsOwned {
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            tx_packets: s.tx_packets,
            tx_bytes: s.tx_bytes,
            segmented: s.segmented,
            csum_completed: s.csum_completed,
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
#[derive(Debug, Serialize, Deserialize)]
pub struct FdbRowNamed {
    /// VLAN domain.
    pub vlan: u16,
    /// MAC.
    pub mac: String,
    /// Port name.
    pub port: String,
    /// Seconds since last seen.
    pub age_secs: u64,
    /// Static entry.
    pub is_static: bool,
}

/// One PMD in `pmd-stats`.
#[derive(Debug, Serialize, Deserialize)]
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
    /// busy / (busy + idle), percent.
    pub busy_percent: f64,
    /// busy cycles per packet.
    pub cycles_per_packet: f64,
    /// Times it slept waiting for a kick.
    pub sleeps: u64,
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
}

/// Answers one request.
pub fn handle(switch: &Switch, req: &Request) -> Result<serde_json::Value, String> {
    let topo = switch.topo();
    let port_id = |name: &str| {
        topo.by_name(name)
            .map(|p| p.port.id)
            .ok_or_else(|| format!("no port named {name:?}"))
    };
    let v = match req.cmd.as_str() {
        "acl-add" => {
            let (port, rest) = req
                .args
                .split_first()
                .ok_or("acl add: expected PORT [POSITION] RULE")?;
            let id = port_id(port)?;
            let (pos, rule) = match rest.split_first() {
                Some((p, r)) if p.parse::<usize>().is_ok() => (Some(p.parse::<usize>().unwrap_or(0)), r.join(" ")),
                _ => (None, rest.join(" ")),
            };
            let rule: crate::model::acl::AclRule = rule.parse().map_err(|e: crate::model::acl::AclError| e.to_string())?;
            let index = switch
                .edit_acl(id, |a| match pos {
                    Some(i) => a.insert(i, rule).map(|()| i),
                    None => a.push(rule),
                })
                .map_err(|e| e.to_string())?;
            return Ok(serde_json::json!({ "port": port, "index": index }));
        }
        "acl-del" => {
            let [port, index] = req.args.as_slice() else {
                return Err("acl del: expected PORT INDEX".into());
            };
            let id = port_id(port)?;
            let i: usize = index
                .parse()
                .map_err(|_| format!("acl del: INDEX {index:?} is not a number"))?;
            let removed = switch.edit_acl(id, |a| a.remove(i)).map_err(|e| e.to_string())?;
            return Ok(serde_json::json!({ "port": port, "removed": removed.to_string() }));
        }
        "acl-list" => {
            let only = match req.args.first() {
                Some(p) => Some(port_id(p)?),
                None => None,
            };
            let mut rows = Vec::new();
            for p in topo.iter() {
                if only.is_some_and(|o| o != p.port.id) {
                    continue;
                }
                for (i, r) in p.acl.rules.rules().iter().enumerate() {
                    rows.push(AclRow {
                        port: p.port.name.clone(),
                        index: i,
                        rule: r.to_string(),
                        drops: p.acl.drops(i),
                    });
                }
            }
            serde_json::to_value(rows)
        }
        "flows" => {
            let only: Option<usize> = match req.args.first() {
                Some(s) => Some(s.parse().map_err(|_| format!("flows: PMD {s:?} is not a number"))?),
                None => None,
            };
            let mut out = Vec::new();
            for m in &switch.pmds {
                if only.is_some_and(|o| o != m.index) {
                    continue;
                }
                *m.dump.lock().unwrap_or_else(|e| e.into_inner()) = None;
                m.dump_request.store(true, std::sync::atomic::Ordering::Release);
                let _ = m.wake.write(1);
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
                let flows = loop {
                    if let Some(f) = m.dump.lock().unwrap_or_else(|e| e.into_inner()).take() {
                        break f;
                    }
                    if std::time::Instant::now() > deadline {
                        return Err(format!("pmd{} did not answer within 3 s", m.index));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                };
                out.push(FlowsReply { pmd: m.index, flows });
            }
            serde_json::to_value(out)
        }
        "show" => serde_json::to_value(switch.show()),
        "offloads" => serde_json::to_value(
            topo.iter()
                .filter_map(|p| match &p.port.kind {
                    crate::ports::PortKind::Afxdp(x) => Some(OffloadsRow {
                        port: p.port.name.clone(),
                        iface: x.iface.clone(),
                        afxdp_mode: x.mode.to_string(),
                        afxdp_reason: x.reason.clone(),
                        plan: x.plan.clone(),
                    }),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        ),
        "stats" => serde_json::to_value(
            topo.iter()
                .map(|p| StatsRow {
                    port: p.port.name.clone(),
                    link: if p.port.link_up() { "up" } else { "down" }.into(),
                    stats: p.port.stats().into(),
                })
                .collect::<Vec<_>>(),
        ),
        "fdb" => serde_json::to_value(
            switch
                .fdb
                .rows()
                .into_iter()
                .map(|r: FdbRow| FdbRowNamed {
                    vlan: switch.domains.key(r.domain).map_or(0, |k| k.vlan()),
                    mac: r.mac.to_string(),
                    port: match r.dest {
                        crate::model::fdb::Dest::Port(p) => topo
                            .port(p)
                            .map_or_else(|| p.to_string(), |p| p.port.name.clone()),
                    },
                    age_secs: r.age_secs,
                    is_static: r.is_static,
                })
                .collect::<Vec<_>>(),
        ),
        "pmd-stats" => serde_json::to_value(
            switch
                .pmds
                .iter()
                .map(|m| {
                    let c = &m.counters;
                    let (p, b, busy, idle) = (
                        c.packets.get(),
                        c.batches.get(),
                        c.busy_cycles.get(),
                        c.idle_cycles.get(),
                    );
                    PmdStatsRow {
                        pmd: m.index,
                        cpu: m.cpu,
                        queues: topo.pmd_queues[m.index]
                            .iter()
                            .map(|&(port, q)| format!("{}/{}", topo.port(port).map_or("?", |p| p.port.name.as_str()), q))
                            .collect(),
                        queue_packets: topo.pmd_queues[m.index]
                            .iter()
                            .map(|&(port, q)| {
                                topo.port(port)
                                    .and_then(|p| p.port.queue_load(q))
                                    .map_or(0, |l| l.packets.load(std::sync::atomic::Ordering::Relaxed))
                            })
                            .collect(),
                        packets: p,
                        batches: b,
                        mean_batch: if b == 0 { 0.0 } else { p as f64 / b as f64 },
                        busy_cycles: busy,
                        idle_cycles: idle,
                        busy_percent: if busy + idle == 0 {
                            0.0
                        } else {
                            100.0 * busy as f64 / (busy + idle) as f64
                        },
                        cycles_per_packet: if p == 0 { 0.0 } else { busy as f64 / p as f64 },
                        sleeps: c.sleeps.get(),
                        cache_last_flow_hits: m.cache_stats[0].get(),
                        cache_emc_hits: m.cache_stats[1].get(),
                        cache_misses: m.cache_stats[2].get(),
                        cache_stale_misses: m.cache_stats[3].get(),
                        cache_hit_percent: {
                            let hits = m.cache_stats[0].get() + m.cache_stats[1].get();
                            let all = hits + m.cache_stats[2].get();
                            if all == 0 { 0.0 } else { 100.0 * hits as f64 / all as f64 }
                        },
                    }
                })
                .collect::<Vec<_>>(),
        ),
        other => {
            return Err(format!(
                "unknown command {other:?}; expected show, stats, fdb, pmd-stats, flows, offloads, acl-list, acl-add or acl-del"
            ))
        }
    };
    v.map_err(|e| e.to_string())
}

/// Binds the control socket, creating its directory if needed and replacing a stale
/// socket file.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    if path.exists() {
        // A live daemon answers; a stale file from a crashed run does not.
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("another vswitchd is serving {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    UnixListener::bind(path)
}

/// Serves the control socket until the switch stops.
pub fn serve(listener: UnixListener, switch: Arc<Switch>) {
    for stream in listener.incoming() {
        if switch.stopping() {
            break;
        }
        let Ok(stream) = stream else { continue };
        let sw = switch.clone();
        // One short-lived thread per client keeps a slow client from blocking others.
        let _ = std::thread::Builder::new()
            .name("ctl-client".into())
            .spawn(move || {
                if let Err(e) = serve_one(stream, &sw) {
                    warn!(error = %e, "control client");
                }
            });
    }
}

fn serve_one(stream: UnixStream, switch: &Switch) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let reply = match serde_json::from_str::<Request>(&line) {
        Ok(req) => match handle(switch, &req) {
            Ok(v) => serde_json::json!({ "ok": v }),
            Err(e) => serde_json::json!({ "error": e }),
        },
        Err(e) => serde_json::json!({ "error": format!("bad request: {e}") }),
    };
    let mut w = stream;
    writeln!(w, "{reply}")?;
    Ok(())
}

/// Sends one request and returns the `ok` value (client side, used by vswitchctl).
///
/// # Errors
/// The socket cannot be reached, or the daemon answered with an error.
pub fn request(path: &Path, cmd: &str) -> Result<serde_json::Value, String> {
    request_args(path, cmd, &[])
}

/// Sends one request with arguments; see [`request`].
///
/// # Errors
/// The socket cannot be reached, or the daemon answered with an error.
pub fn request_args(path: &Path, cmd: &str, args: &[String]) -> Result<serde_json::Value, String> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach vswitchd at {}: {e} (is it running? use --socket PATH)",
            path.display()
        )
    })?;
    let req = serde_json::to_string(&Request {
        cmd: cmd.into(),
        args: args.to_vec(),
    })
    .map_err(|e| e.to_string())?;
    writeln!(s, "{req}").map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let mut v: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| format!("bad reply from vswitchd: {e}"))?;
    if let Some(e) = v.get("error") {
        return Err(e.as_str().unwrap_or("error").to_string());
    }
    Ok(v.get_mut("ok")
        .map(serde_json::Value::take)
        .unwrap_or_default())
}
