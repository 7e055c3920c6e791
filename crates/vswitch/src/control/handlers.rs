//! Answers to the control requests that read or edit the switch in place: show,
//! counters, the FDB, flows, offloads and ACLs. Port additions and deletions, reloads
//! and rebalances are in [`super::ops`].

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::ops::Control;
use super::protocol::{
    AclRow, ConntrackReply, CtZoneRow, FdbRowNamed, FlowsReply, OffloadsRow, PmdStatsRow, Request,
    Response, ShowReply, StatsRow,
};
use crate::model::fdb::Dest;
use crate::ports::PortKind;
use crate::switch::topology::Topology;
use crate::switch::Switch;

/// How long `flows` waits for a PMD to dump its cache.
const FLOWS_TIMEOUT: Duration = Duration::from_secs(3);

/// Answers one request.
///
/// # Errors
/// A message for the client: what was wrong with the request, or what failed.
pub async fn dispatch(ctl: &std::sync::Arc<Control>, req: Request) -> Result<Response, String> {
    let sw = &ctl.switch;
    Ok(match req {
        Request::Show => Response::Show(ShowReply {
            ovsdb: ctl.ovsdb.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            ..show(sw)
        }),
        Request::Stats => Response::Stats(stats(&sw.topo())),
        Request::Fdb => Response::Fdb(fdb(sw)),
        Request::Mdb => Response::Mdb(mdb(sw)),
        Request::PmdStats => Response::PmdStats(pmd_stats(sw)),
        Request::Flows { pmd } => Response::Flows(flows(sw, pmd).await?),
        Request::Offloads => Response::Offloads(offloads(&sw.topo())),
        Request::AclList { port } => Response::AclList(acl_list(&sw.topo(), port.as_deref())?),
        Request::AclAdd {
            port,
            position,
            rule,
        } => {
            let _g = ctl.ops.lock().await;
            acl_add(sw, port, position, &rule)?
        }
        Request::AclDel { port, index } => {
            let _g = ctl.ops.lock().await;
            acl_del(sw, port, index)?
        }
        Request::AddPort { flag, spec } => {
            database_driven(sw, "add-port")?;
            ctl.add_port(flag, &spec).await?
        }
        Request::DelPort { name } => {
            database_driven(sw, "del-port")?;
            ctl.del_port(&name).await?
        }
        Request::PmdRebalance => ctl.rebalance().await?,
        Request::Reload => ctl.reload().await?,
        Request::Tunnels => Response::Tunnels(tunnels(sw)),
        Request::Ovn => Response::Ovn(Box::new(ctl.ovn_reply())),
        Request::OvnTrace { microflow, ct } => match ctl.ovn.get() {
            Some(o) => Response::OvnTrace(o.trace(&microflow, &ct)?),
            None => return Err("vswitchd is no OVN chassis (--ovn-remote)".into()),
        },
        Request::Conntrack => Response::Conntrack(conntrack(ctl)),
        Request::ConntrackFlush { zone } => Response::ConntrackFlushed {
            removed: sw.conntrack.flush(zone) as u64,
        },
    })
}

/// Refuses `command` on a switch whose ports come from the Open vSwitch database
/// (`--ovsdb`): the database would not know the port, and would undo the change.
///
/// # Errors
/// The message names the database and the `ovs-vsctl` command to use instead.
fn database_driven(sw: &Switch, command: &str) -> Result<(), String> {
    match &sw.config().ovsdb {
        Some(db) => Err(format!(
            "vswitchd takes its ports from the Open vSwitch database at {db} (--ovsdb): \
             use ovs-vsctl {command} instead"
        )),
        None => Ok(()),
    }
}

fn port_id(topo: &Topology, name: &str) -> Result<u16, String> {
    topo.by_name(name)
        .map(|p| p.port.id)
        .ok_or_else(|| format!("no port named {name:?}"))
}

/// Per-port counters.
pub fn stats(topo: &Topology) -> Vec<StatsRow> {
    topo.iter()
        .map(|p| StatsRow {
            port: p.port.name.clone(),
            link: if p.port.link_up() { "up" } else { "down" }.into(),
            stats: p.port.stats().into(),
        })
        .collect()
}

fn mdb(sw: &Switch) -> crate::control::protocol::MdbReply {
    use crate::control::protocol::{MdbGroupRow, MdbReply, MdbRouterRow};
    use crate::model::mcast::Member;
    let topo = sw.topo();
    let domain = |d| {
        sw.domains
            .key(d)
            .map_or_else(|| format!("domain {d}"), |k| sw.domains.describe(k))
    };
    let port = |m: Member| match m {
        Member::Port(p) => topo
            .port(p)
            .map_or_else(|| p.to_string(), |tp| tp.port.name.clone()),
        Member::Remote(r) => sw
            .remotes
            .ip(r)
            .map_or_else(|| format!("remote {r}"), |ip| format!("remote {ip}")),
    };
    let (groups, routers) = sw.mcast.rows();
    let c = &sw.mcast.counters;
    let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    MdbReply {
        snooping: sw.mcast.snooping,
        flood_unregistered: sw.mcast.flood_unregistered,
        groups: groups
            .into_iter()
            .map(|r| MdbGroupRow {
                domain: domain(r.domain),
                group: r.group.to_string(),
                port: port(r.member),
                mode: r.mode.to_string(),
                sources: r.sources.iter().map(ToString::to_string).collect(),
                expires_secs: r.expires_in.map(|e| e.as_secs()),
            })
            .collect(),
        routers: routers
            .into_iter()
            .map(|r| MdbRouterRow {
                domain: domain(r.domain),
                port: port(r.member),
                expires_secs: r.expires_in.as_secs(),
            })
            .collect(),
        counters: [
            ("reports", get(&c.reports)),
            ("queries", get(&c.queries)),
            ("joins", get(&c.joins)),
            ("leaves", get(&c.leaves)),
            ("expired", get(&c.expired)),
            ("refused_full", get(&c.refused_full)),
            ("invalid", get(&c.invalid)),
            ("forwarded", get(&c.forwarded)),
            ("flooded_unregistered", get(&c.flooded_unregistered)),
            ("unregistered_to_routers", get(&c.unregistered_to_routers)),
            ("queries_sent", get(&c.queries_sent)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    }
}

fn fdb(sw: &Switch) -> Vec<FdbRowNamed> {
    let topo = sw.topo();
    sw.fdb
        .rows()
        .into_iter()
        .map(|r| FdbRowNamed {
            vlan: sw.domains.key(r.domain).map_or(0, |k| k.vlan()),
            domain: sw
                .domains
                .key(r.domain)
                .map_or_else(String::new, |k| sw.domains.describe(k)),
            mac: r.mac.to_string(),
            port: match r.dest {
                Dest::Port(p) => topo
                    .port(p)
                    .map_or_else(|| p.to_string(), |p| p.port.name.clone()),
                Dest::Remote(r) => sw
                    .remotes
                    .ip(r)
                    .map_or_else(|| format!("remote {r}"), |ip| format!("remote {ip}")),
                Dest::RemotePort { remote, key } => {
                    let chassis = topo.ovn.chassis_of.get(&remote).cloned();
                    let ip = sw.remotes.ip(remote).map(|ip| ip.to_string());
                    format!(
                        "chassis {} ({}) port key {key}",
                        chassis.unwrap_or_default(),
                        ip.unwrap_or_default()
                    )
                }
                Dest::Router => "ovn router port (unsupported)".to_string(),
                Dest::Multi(key) => format!("ovn port {key} on several chassis"),
            },
            age_secs: r.age_secs,
            is_static: r.is_static,
        })
        .collect()
}

fn pmd_stats(sw: &Switch) -> Vec<PmdStatsRow> {
    let topo = sw.topo();
    sw.pmds
        .iter()
        .map(|m| {
            let c = &m.counters;
            let (p, b, busy, idle) = (
                c.packets.get(),
                c.batches.get(),
                c.busy_cycles.get(),
                c.idle_cycles.get(),
            );
            let queues = topo.pmd_queues.get(m.index).map_or(&[][..], Vec::as_slice);
            let hits = m.cache_stats[0].get() + m.cache_stats[1].get();
            let lookups = hits + m.cache_stats[2].get();
            PmdStatsRow {
                pmd: m.index,
                cpu: m.cpu,
                queues: queues
                    .iter()
                    .map(|&(port, q)| {
                        let name = topo.port(port).map_or("?", |p| p.port.name.as_str());
                        format!("{name}/{q}")
                    })
                    .collect(),
                queue_packets: queues
                    .iter()
                    .map(|&(port, q)| {
                        topo.port(port)
                            .and_then(|p| p.port.queue_load(q))
                            .map_or(0, |l| l.packets.load(Ordering::Relaxed))
                    })
                    .collect(),
                packets: p,
                batches: b,
                mean_batch: ratio(p, b, 1.0),
                busy_cycles: busy,
                idle_cycles: idle,
                busy_rounds: c.busy_rounds.get(),
                idle_rounds: c.idle_rounds.get(),
                busy_percent: ratio(busy, busy + idle, 100.0),
                cycles_per_packet: ratio(busy, p, 1.0),
                sleeps: c.sleeps.get(),
                naps: c.naps.get(),
                cache_last_flow_hits: m.cache_stats[0].get(),
                cache_emc_hits: m.cache_stats[1].get(),
                cache_misses: m.cache_stats[2].get(),
                cache_stale_misses: m.cache_stats[3].get(),
                cache_hit_percent: ratio(hits, lookups, 100.0),
                lflow_hits: m.lflow_stats[0].get(),
                lflow_misses: m.lflow_stats[1].get(),
                lflow_kept: m.lflow_stats[2].get(),
                lflow_dropped: m.lflow_stats[3].get(),
                lflow_wild_hits: m.lflow_stats[4].get(),
                lflow_together: m.lflow_stats[5].get(),
                stage_cycles: if cfg!(feature = "stage-cycles") {
                    crate::datapath::stages::NAMES
                        .iter()
                        .zip(&c.stages)
                        .map(|(n, v)| (n.to_string(), v.get()))
                        .collect()
                } else {
                    Default::default()
                },
            }
        })
        .collect()
}

fn ratio(a: u64, b: u64, scale: f64) -> f64 {
    if b == 0 {
        0.0
    } else {
        scale * a as f64 / b as f64
    }
}

/// Asks each PMD (or only `only`) for its cached flows and waits for the answers.
async fn flows(sw: &Switch, only: Option<usize>) -> Result<Vec<FlowsReply>, String> {
    if let Some(o) = only {
        if o >= sw.pmds.len() {
            return Err(format!("flows: no PMD {o}; there are {}", sw.pmds.len()));
        }
    }
    let mut out = Vec::new();
    for m in &sw.pmds {
        if only.is_some_and(|o| o != m.index) {
            continue;
        }
        *m.dump.lock().unwrap_or_else(|e| e.into_inner()) = None;
        m.dump_request.store(true, Ordering::Release);
        let _ = m.wake.write(1);
        let deadline = Instant::now() + FLOWS_TIMEOUT;
        let flows = loop {
            if let Some(f) = m.dump.lock().unwrap_or_else(|e| e.into_inner()).take() {
                break f;
            }
            if Instant::now() > deadline {
                return Err(format!("pmd{} did not answer within 3 s", m.index));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        out.push(FlowsReply {
            pmd: m.index,
            flows,
        });
    }
    Ok(out)
}

fn offloads(topo: &Topology) -> Vec<OffloadsRow> {
    topo.iter()
        .filter_map(|p| match &p.port.kind {
            PortKind::Afxdp(x) => Some(OffloadsRow {
                port: p.port.name.clone(),
                iface: x.iface.clone(),
                afxdp_mode: x.mode.to_string(),
                afxdp_reason: x.reason.clone(),
                plan: x.plan.clone(),
            }),
            _ => None,
        })
        .collect()
}

fn acl_list(topo: &Topology, only: Option<&str>) -> Result<Vec<AclRow>, String> {
    let only = only.map(|n| port_id(topo, n)).transpose()?;
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
    Ok(rows)
}

fn acl_add(
    sw: &Switch,
    port: String,
    position: Option<usize>,
    rule: &str,
) -> Result<Response, String> {
    let id = port_id(&sw.topo(), &port)?;
    let rule: crate::model::acl::AclRule = rule
        .parse()
        .map_err(|e: crate::model::acl::AclError| e.to_string())?;
    let index = sw
        .edit_acl(id, |a| match position {
            Some(i) => a.insert(i, rule).map(|()| i),
            None => a.push(rule),
        })
        .map_err(|e| e.to_string())?;
    Ok(Response::AclAdded { port, index })
}

fn acl_del(sw: &Switch, port: String, index: usize) -> Result<Response, String> {
    let id = port_id(&sw.topo(), &port)?;
    let removed = sw
        .edit_acl(id, |a| a.remove(index))
        .map_err(|e| e.to_string())?;
    Ok(Response::AclDeleted {
        port,
        removed: removed.to_string(),
    })
}

/// Every local tunnel endpoint with its remotes and counters.
fn tunnels(sw: &Switch) -> Vec<super::protocol::TunnelRow> {
    use crate::model::tunnel::TunnelDrop;
    let topo = sw.topo();
    let t = &topo.tunnels;
    let mac = |m: &[u8; 6]| crate::config::MacAddr(*m).to_string();
    t.teps
        .iter()
        .enumerate()
        .map(|(i, tep)| {
            let mut row = super::protocol::TunnelRow {
                name: tep.config.name.clone(),
                local: tep.config.local.to_string(),
                uplink: tep.config.uplink.clone(),
                link: match topo.port(tep.uplink) {
                    Some(u) if u.port.link_up() => "up",
                    _ => "down",
                }
                .into(),
                device: tep.config.device.clone(),
                udp_port: tep.config.port,
                udp_checksum: tep.config.udp_checksum(),
                options: tep.config.options.clone(),
                ..Default::default()
            };
            for c in tep.counters.iter() {
                row.rx_packets += c.rx_packets.get();
                row.rx_bytes += c.rx_bytes.get();
                row.tx_packets += c.tx_packets.get();
                row.tx_bytes += c.tx_bytes.get();
                row.segmented += c.segmented.get();
                row.rx_options += c.rx_options.get();
                for r in geneve::decap::DropReason::ALL {
                    *row.drops.entry(r.as_str().to_string()).or_default() +=
                        c.decap_drops[r.index()].get();
                }
                for r in TunnelDrop::ALL {
                    *row.drops.entry(r.name().to_string()).or_default() +=
                        c.drops[r as usize].get();
                }
            }
            for (rid, ip) in sw.remotes.all().into_iter().enumerate() {
                if ip.is_ipv4() != tep.config.local.is_ipv4() {
                    continue;
                }
                let rid = rid as crate::model::tunnel::RemoteId;
                let path = t.paths.get(i).and_then(|m| m.get(&rid));
                row.remotes.push(super::protocol::RemoteRow {
                    ip: ip.to_string(),
                    flood_vnis: t
                        .vni_domains
                        .iter()
                        .filter(|(_, d)| t.flood_of(**d).contains(&rid))
                        .map(|(v, _)| *v)
                        .collect(),
                    next_hops: path.map_or_else(Vec::new, |p| p.hops.iter().map(mac).collect()),
                    state: match path {
                        Some(p) if !p.hops.is_empty() => "resolved",
                        Some(_) => "unresolved",
                        None => "no path",
                    }
                    .into(),
                });
            }
            row.remotes.sort_by(|a, b| a.ip.cmp(&b.ip));
            row
        })
        .collect()
}

/// The `show` view: every port as the topology places it.
pub fn show(sw: &Switch) -> ShowReply {
    let topo = sw.topo();
    ShowReply {
        poll: sw.config().poll.to_string(),
        fdb_entries: sw.fdb.len(),
        generation: topo.generation,
        ovsdb: None,
        ports: topo
            .iter()
            .map(|tp| {
                let p = &tp.port;
                let pmds = (0..p.rx_queues())
                    .map(|q| topo.pmd_of(p.id, q).unwrap_or(usize::MAX))
                    .collect();
                let ovn = topo.ovn.port_status.get(&p.name).map(String::as_str);
                let mut s = p.show(&tp.config, tp.domain_key, pmds, ovn);
                s.domain = sw.domains.describe(tp.domain_key);
                if let (Some(t), Some(_)) = (&tp.config.trunk, &tp.trunk) {
                    s.domain.push_str(&trunk_text(t));
                }
                s
            })
            .collect(),
    }
}

/// How `show` describes a trunk after its own domain: `, trunk of vlans 10,20`
/// (or `of every vlan`), and its native VLAN's mode.
fn trunk_text(t: &crate::config::TrunkConfig) -> String {
    let vlans = if t.vlans.is_empty() {
        "every vlan".to_string()
    } else {
        let v: Vec<String> = t.vlans.iter().map(u16::to_string).collect();
        format!("vlans {}", v.join(","))
    };
    let native = match t.native {
        Some(crate::config::Native::Tagged) => " (native-tagged)",
        Some(crate::config::Native::Untagged) => " (native-untagged)",
        None => "",
    };
    format!(", trunk of {vlans}{native}")
}

/// `vswitchctl conntrack`: the table, each zone handed out with its owner, counters.
fn conntrack(ctl: &Control) -> ConntrackReply {
    let ct = &ctl.switch.conntrack;
    let counts: std::collections::HashMap<u16, u32> = ct.zone_counts().into_iter().collect();
    let owner = |dp: u32, port: u16| {
        ctl.ovn
            .get()
            .and_then(|o| o.zone_owner(dp, port))
            .unwrap_or_else(|| format!("datapath {dp} port {port}"))
    };
    let mut zones: Vec<CtZoneRow> = ctl
        .switch
        .ct_zones
        .all()
        .into_iter()
        .map(|((dp, port), zone)| CtZoneRow {
            zone,
            owner: owner(dp, port),
            connections: u64::from(counts.get(&zone).copied().unwrap_or(0)),
        })
        .collect();
    zones.sort_by_key(|z| z.zone);
    let s = ct.stats();
    let mut counters: std::collections::BTreeMap<String, u64> = [
        ("created", s.created),
        ("expired", s.expired),
        ("flushed", s.flushed),
        ("table_full", s.table_full),
        ("zone_full", s.zone_full),
        ("nat_exhausted", s.nat_exhausted),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for r in conntrack::InvalidReason::ALL {
        counters.insert(format!("invalid_{}", r.name()), s.invalid(r));
    }
    ConntrackReply {
        connections: ct.len() as u64,
        max_connections: u64::from(ct.max_connections()),
        zone_max: u64::from(ct.default_zone_limit().unwrap_or(0)),
        memory_bytes: ct.memory_bytes() as u64,
        zones,
        counters,
    }
}
