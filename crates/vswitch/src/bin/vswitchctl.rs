//! vswitchctl: inspect a running vswitchd. See `vswitchctl --help`.

use std::process::ExitCode;

use clap::Parser;
use vswitch::control::cli::{AclCmd, Cli, Cmd, CtCmd, OvnCmd};
use vswitch::control::protocol::{
    call, FdbRowNamed, OffloadsRow, PmdStatsRow, Request, Response, ShowReply, StatsRow,
};

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`vswitchctl flows | head`), like other CLI tools.
    // SAFETY: setting SIGPIPE's disposition to the default before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    if let Cmd::Top { interval, count } = cli.cmd {
        return top(&cli.socket, interval, count);
    }
    let minimal = matches!(
        cli.cmd,
        Cmd::Ovn {
            sub: Some(OvnCmd::Trace { minimal: true, .. })
        }
    );
    let req = match request_of(cli.cmd) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vswitchctl: {e}");
            return ExitCode::from(2);
        }
    };
    let reply = match call(&cli.socket, req, REPLY_TIMEOUT) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("vswitchctl: {e}");
            return ExitCode::from(1);
        }
    };
    if cli.json {
        let v = match &reply {
            Response::Show(x) => serde_json::to_value(x),
            Response::Stats(x) => serde_json::to_value(x),
            Response::Fdb(x) => serde_json::to_value(x),
            Response::Mdb(x) => serde_json::to_value(x),
            Response::PmdStats(x) => serde_json::to_value(x),
            Response::Flows(x) => serde_json::to_value(x),
            Response::Offloads(x) => serde_json::to_value(x),
            Response::AclList(x) => serde_json::to_value(x),
            Response::Tunnels(x) => serde_json::to_value(x),
            Response::OvnTrace(x) => serde_json::to_value(x),
            Response::Conntrack(x) => serde_json::to_value(x),
            other => serde_json::to_value(other),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&v.unwrap_or_default()).unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    print_reply(reply, minimal);
    ExitCode::SUCCESS
}

/// How long to wait for a reply (a reload or a port with many queues takes seconds).
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

fn request_of(cmd: Cmd) -> Result<Request, String> {
    Ok(match cmd {
        Cmd::Show => Request::Show,
        Cmd::Stats => Request::Stats,
        Cmd::Fdb => Request::Fdb,
        Cmd::Mdb => Request::Mdb,
        Cmd::PmdStats => Request::PmdStats,
        Cmd::Offloads => Request::Offloads,
        Cmd::Flows { pmd } => Request::Flows { pmd },
        Cmd::Acl(AclCmd::Add {
            port,
            position,
            rule,
        }) => Request::AclAdd {
            port,
            position,
            rule: rule.join(" "),
        },
        Cmd::Acl(AclCmd::Del { port, index }) => Request::AclDel { port, index },
        Cmd::Acl(AclCmd::List { port }) => Request::AclList { port },
        Cmd::AddPort(a) => {
            let (flag, spec) = a.spec().ok_or(
                "add-port: give one of --vhost-user, --vhost-user-client, --uplink or --tap",
            )?;
            Request::AddPort { flag, spec }
        }
        Cmd::DelPort { name } => Request::DelPort { name },
        Cmd::PmdRebalance => Request::PmdRebalance,
        Cmd::Reload => Request::Reload,
        Cmd::Tunnels => Request::Tunnels,
        Cmd::Ovn { sub: None } => Request::Ovn,
        Cmd::Ovn {
            sub: Some(OvnCmd::Trace { microflow, ct, .. }),
        } => Request::OvnTrace { microflow, ct },
        Cmd::Conntrack { sub: None } => Request::Conntrack,
        Cmd::Conntrack {
            sub: Some(CtCmd::Flush { zone }),
        } => Request::ConntrackFlush { zone },
        Cmd::Top { .. } => unreachable!("handled before"),
    })
}

fn print_reply(r: Response, minimal: bool) {
    match r {
        Response::Show(s) => print_show(s),
        Response::Stats(s) => print_stats(s),
        Response::Fdb(s) => print_fdb(s),
        Response::Mdb(s) => print_mdb(s),
        Response::PmdStats(s) => print_pmd(s),
        Response::Offloads(s) => print_offloads(s),
        Response::Flows(rows) => {
            for r in rows {
                println!("pmd{}: {} flows", r.pmd, r.flows.len());
                for f in r.flows {
                    println!("  {f}");
                }
            }
        }
        Response::AclList(rows) => {
            println!("{:<12} {:>5} {:>12}  rule", "port", "index", "drops");
            for r in rows {
                println!("{:<12} {:>5} {:>12}  {}", r.port, r.index, r.drops, r.rule);
            }
        }
        Response::AclAdded { port, index } => println!("{port}: rule added at index {index}"),
        Response::AclDeleted { port, removed } => println!("{port}: removed {removed}"),
        Response::PortAdded { name, id } if id == u16::MAX => {
            println!("tunnel endpoint {name} added")
        }
        Response::PortAdded { name, id } => println!("port {name} added (id {id})"),
        Response::PortDeleted { name } => println!("port {name} deleted"),
        Response::Rebalanced(r) => {
            println!("{} queues moved", r.moved);
            for p in r.pmds {
                println!("pmd{}: {:.1} % of the measured load", p.pmd, p.percent);
                for (q, c) in p.queues.iter().zip(&p.cycles) {
                    println!("    {q}: {c} cycles");
                }
            }
        }
        Response::Tunnels(rows) => print_tunnels(rows),
        Response::Ovn(r) => print_ovn(*r),
        Response::OvnTrace(r) => {
            print!("{}", if minimal { &r.minimal } else { &r.detailed });
        }
        Response::Conntrack(r) => print_conntrack(r),
        Response::ConntrackFlushed { removed } => println!("{removed} connections removed"),
        Response::Reloaded(r) => {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "-".to_string()
                } else {
                    v.join(", ")
                }
            };
            println!("added: {}", list(&r.added));
            println!("deleted: {}", list(&r.deleted));
            println!("changed in place: {}", list(&r.changed));
            println!("replaced: {}", list(&r.replaced));
        }
    }
}

fn print_conntrack(r: vswitch::control::protocol::ConntrackReply) {
    println!(
        "{} connections (at most {}, {} per zone), {} bytes",
        r.connections,
        r.max_connections,
        if r.zone_max == 0 {
            "unlimited".to_string()
        } else {
            r.zone_max.to_string()
        },
        r.memory_bytes
    );
    println!("{:>6} {:>12}  owner", "zone", "connections");
    for z in r.zones {
        println!("{:>6} {:>12}  {}", z.zone, z.connections, z.owner);
    }
    for (k, v) in r.counters {
        println!("{k}: {v}");
    }
}

fn print_ovn(r: vswitch::control::protocol::OvnReply) {
    if r.chassis.is_empty() {
        println!("not an OVN chassis (vswitchd --ovn-remote REMOTE --chassis NAME)");
        return;
    }
    println!(
        "chassis {}  encap geneve {}  southbound {} ({})  connections {}  nb_cfg applied {}",
        r.chassis,
        r.encap_ip,
        r.remotes.join(","),
        r.connection,
        r.connects,
        r.nb_cfg
    );
    println!("ports:");
    for p in &r.ports {
        if p.bound {
            let role = match p.role.as_str() {
                "" | "main" => String::new(),
                r => format!("  ({r} chassis)"),
            };
            println!(
                "  {} = {}  logical switch {} (vni {})  key {}  {}{role}",
                p.port,
                p.logical_port,
                p.logical_switch,
                p.vni,
                p.key,
                if p.up { "up" } else { "claimed" }
            );
        } else {
            println!("  {}: not bound: {}", p.port, p.why_unbound);
        }
    }
    println!("other chassis:");
    for c in &r.other_chassis {
        println!(
            "  {}  encap {}  logical switches {}  frames sent {} received {}",
            c.name,
            c.encap_ip,
            c.logical_switches.join(","),
            c.tx_packets,
            c.rx_packets
        );
    }
    if !r.bfd.is_empty() {
        println!("BFD sessions (gateway HA groups):");
        for b in &r.bfd {
            println!(
                "  {}  {}  remote {}  diagnostic {}  flaps {}",
                b.chassis, b.state, b.remote_state, b.diagnostic, b.flap_count
            );
        }
    }
    let monitored: Vec<String> = r
        .monitored
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    println!(
        "rows monitored (this chassis' part): {}",
        monitored.join(", ")
    );
    println!("provider networks:");
    for l in &r.provider_networks {
        let vlan = match l.vlan {
            0 => "untagged".to_string(),
            v => format!("vlan {v}"),
        };
        if l.uplink.is_empty() {
            println!(
                "  {} ({}): network {} not in --ovn-bridge-mappings: other chassis through tunnels",
                l.logical_switch, l.localnet_port, l.network
            );
        } else {
            println!(
                "  {} ({}): network {} on uplink {}, {vlan}",
                l.logical_switch, l.localnet_port, l.network, l.uplink
            );
        }
    }
    if !r.stages.is_empty() {
        println!("logical pipeline (stages with flows; hits: interpreter runs):");
        for st in r.stages.iter().filter(|st| st.flows > 0) {
            println!(
                "  {:<8} {:<7} {:>2} {:<24} {:>5} flows {:>10} hits",
                st.datapath, st.pipeline, st.table, st.stage, st.flows, st.hits
            );
        }
    }
    let sp = &r.slow_path;
    println!(
        "slow path: {} frames made, {} not made; held for a next hop: {} ({} released, {} expired, {} overflowed, {} orphaned)",
        sp.made, sp.not_made, sp.held, sp.released, sp.expired, sp.overflowed, sp.orphaned
    );
    println!("supported:");
    for s in &r.supported {
        println!("  {s}");
    }
    println!("refused or counted:");
    for s in &r.unsupported {
        println!("  {s}");
    }
}

fn print_tunnels(rows: Vec<vswitch::control::protocol::TunnelRow>) {
    if rows.is_empty() {
        println!("no tunnel endpoints");
    }
    for t in rows {
        println!(
            "tunnel {} local {}{} on {} (link {})  udp {}  checksum {}{}",
            t.name,
            t.local,
            t.device
                .as_deref()
                .map_or(String::new(), |d| format!(" (on {d})")),
            t.uplink,
            t.link,
            t.udp_port,
            if t.udp_checksum { "on" } else { "off" },
            if t.options.is_empty() {
                String::new()
            } else {
                format!("  options {}", t.options.join(" "))
            }
        );
        println!(
            "    rx {} frames {} bytes  tx {} frames {} bytes  segmented {}  options received {}",
            t.rx_packets, t.rx_bytes, t.tx_packets, t.tx_bytes, t.segmented, t.rx_options
        );
        for (k, v) in t.drops.iter().filter(|(_, v)| **v > 0) {
            println!("    drop {k}: {v}");
        }
        for r in t.remotes {
            println!(
                "    remote {}  {}  next hops [{}]  flood VNIs {:?}",
                r.ip,
                r.state,
                r.next_hops.join(" "),
                r.flood_vnis
            );
        }
    }
}

fn print_offloads(rows: Vec<OffloadsRow>) {
    if rows.is_empty() {
        println!("no AF_XDP uplinks");
    }
    for r in rows {
        println!(
            "uplink {} ({}): AF_XDP {} ({})",
            r.port, r.iface, r.afxdp_mode, r.afxdp_reason
        );
        for d in &r.plan.decisions {
            println!("  {d}");
        }
    }
}

/// A vhost-user port's driver now and its connections so far ("" for other kinds).
fn guest_state(p: &vswitch::control::protocol::ShowPort) -> String {
    if !p.kind.starts_with("vhost-user") {
        return String::new();
    }
    let times = |n: u64| {
        if n == 1 {
            "1 time".to_string()
        } else {
            format!("{n} times")
        }
    };
    if p.connected {
        format!(
            "  guest connected (connected {} so far)",
            times(p.connections)
        )
    } else if p.connections == 0 {
        format!(
            "  no guest connected (never connected{})",
            if p.listening { "; listening" } else { "" }
        )
    } else {
        format!(
            "  no guest connected (connected {} before{})",
            times(p.connections),
            if p.listening { "; listening" } else { "" }
        )
    }
}

fn print_show(s: ShowReply) {
    println!(
        "poll mode: {}   fdb entries: {}   topology generation: {}",
        s.poll, s.fdb_entries, s.generation
    );
    if let Some(db) = &s.ovsdb {
        println!(
            "ovsdb: {} ({}, {} connects)   cur_cfg: {}   bridges: {}",
            db.remote,
            db.connection,
            db.connects,
            db.cur_cfg,
            db.bridges.join(", ")
        );
        if !db.failed.is_empty() {
            println!(
                "    not applied (see their Interface error): {}",
                db.failed.join(", ")
            );
        }
    }
    for p in s.ports {
        println!(
            "port {} ({}) {} {}  link {}  {}  queues {} (ready {:?}){}",
            p.id,
            p.name,
            p.kind,
            p.path,
            p.link,
            p.domain,
            p.queue_pairs,
            p.ready_queue_pairs,
            guest_state(&p)
        );
        if !p.socket_access.is_empty() {
            println!("    socket: {}", p.socket_access);
        }
        if !p.ovn.is_empty() {
            println!("    ovn: {}", p.ovn);
        }
        if p.protocol_errors > 0 {
            println!(
                "    protocol errors: {} (connections closed by vswitchd; see its log)",
                p.protocol_errors
            );
        }
        if let Some(m) = p.migration.as_ref().filter(|m| m.logging || m.logs_set > 0) {
            println!(
                "    migration: {}  pages marked {}  dirty logs {}  announcements {}",
                if m.logging {
                    "logging (in progress)"
                } else {
                    "not logging"
                },
                m.pages_marked,
                m.logs_set,
                m.announced
            );
        } else if let Some(m) = p.migration.as_ref().filter(|m| m.announced > 0) {
            println!("    migration: arrived (announcements {})", m.announced);
        }
        if let Some(x) = &p.afxdp {
            println!(
                "    afxdp: iface {}  mode {}  sockets {}  ({})",
                p.iface, x.mode, x.queues, x.reason
            );
            println!(
                "    mtu {}  largest frame sent {} B  multi-buffer {}",
                x.mtu,
                x.max_frame,
                if x.multi_buffer { "on" } else { "off" }
            );
            println!("    rx frames per queue: {:?}", x.rx_per_queue);
            let k = &x.kernel;
            println!(
                "    kernel: rx_dropped {}  rx_ring_full {}  rx_fill_ring_empty {}  rx_invalid_descs {}  tx_invalid_descs {}  tx_ring_empty {}",
                k.rx_dropped,
                k.rx_ring_full,
                k.rx_fill_ring_empty_descs,
                k.rx_invalid_descs,
                k.tx_invalid_descs,
                k.tx_ring_empty_descs
            );
        } else if !p.iface.is_empty() {
            println!("    iface: {}", p.iface);
        } else {
            println!("    features: {}", p.negotiated_features.join(" "));
            println!(
                "    offloads: {}",
                match (p.offloads_offered, p.offloads.is_empty(), p.connected) {
                    (false, _, _) => "none offered (offloads=off)".to_string(),
                    (true, _, false) => "offered; no driver attached".to_string(),
                    (true, true, true) =>
                        "none negotiated: frames arrive and leave whole and checksummed".to_string(),
                    (true, false, true) => p.offloads.join(" "),
                }
            );
        }
        let pmds: Vec<String> = p
            .pmd_of_queue
            .iter()
            .zip(p.queue_packets.iter().chain(std::iter::repeat(&0)))
            .enumerate()
            .map(|(q, (m, n))| format!("q{q}->pmd{m} ({n} frames)"))
            .collect();
        println!("    pmd: {}", pmds.join(" "));
        for v in &p.vrings {
            println!("    {}", vring_line(v));
        }
    }
}

/// One virtqueue of `show`: its state, where the switch stands, and (split rings) where
/// the driver does.
fn vring_line(v: &vswitch::ports::show::ShowVring) -> String {
    let dir = if v.index.is_multiple_of(2) {
        "guest rx"
    } else {
        "guest tx"
    };
    let flag = |on: bool, name: &str| {
        if on {
            name.to_string()
        } else {
            format!("no-{name}")
        }
    };
    let mut line = format!(
        "vring {} ({dir}, {}): {} {} {} {}  switch avail {} used {}",
        v.index,
        v.size,
        flag(v.ready, "ready"),
        flag(v.enabled, "enabled"),
        flag(v.kick_fd, "kick"),
        flag(v.call_fd, "call"),
        v.next_avail,
        v.next_used
    );
    if let (Some(a), Some(u)) = (v.avail_idx, v.used_idx) {
        line += &format!("  driver avail.idx {a} used.idx {u}");
    }
    if let Some(e) = v.used_event {
        line += &format!(" used_event {e}");
    }
    line
}

fn print_stats(rows: Vec<StatsRow>) {
    println!(
        "{:<12} {:>5} {:>14} {:>16} {:>14} {:>16} {:>10}",
        "port", "link", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "drops"
    );
    for r in rows {
        let s = r.stats;
        println!(
            "{:<12} {:>5} {:>14} {:>16} {:>14} {:>16} {:>10}",
            r.port, r.link, s.rx_packets, s.rx_bytes, s.tx_packets, s.tx_bytes, s.drops_total
        );
        if s.segmented + s.csum_completed > 0 {
            println!(
                "    software offloads: {} TSO frames segmented, {} checksums completed",
                s.segmented, s.csum_completed
            );
        }
        for (k, v) in s.drops.iter().filter(|(_, v)| **v > 0) {
            println!("    drop {k}: {v}");
        }
    }
}

fn print_fdb(rows: Vec<FdbRowNamed>) {
    let w = rows
        .iter()
        .map(|r| r.domain.len())
        .max()
        .unwrap_or(0)
        .max(6);
    println!("{:<w$} {:<17} {:<12} {:>8}", "domain", "mac", "port", "age");
    for r in rows {
        let age = if r.is_static {
            "static".to_string()
        } else {
            format!("{}s", r.age_secs)
        };
        println!("{:<w$} {:<17} {:<12} {:>8}", r.domain, r.mac, r.port, age);
    }
}

fn print_mdb(m: vswitch::control::protocol::MdbReply) {
    println!(
        "snooping {}, unregistered groups {}",
        if m.snooping { "on" } else { "off" },
        if m.flood_unregistered {
            "flood"
        } else {
            "to router ports only"
        }
    );
    println!(
        "{:<12} {:<28} {:<20} {:<8} {:>8}  sources",
        "domain", "group", "port", "mode", "expires"
    );
    for r in &m.groups {
        let expires = r
            .expires_secs
            .map_or_else(|| "static".to_string(), |s| format!("{s}s"));
        println!(
            "{:<12} {:<28} {:<20} {:<8} {:>8}  {}",
            r.domain,
            r.group,
            r.port,
            r.mode,
            expires,
            r.sources.join(",")
        );
    }
    for r in &m.routers {
        println!(
            "{:<12} {:<28} {:<20} {:<8} {:>7}s",
            r.domain, "(multicast router)", r.port, "", r.expires_secs
        );
    }
    let counters: Vec<String> = m.counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("{}", counters.join(", "));
}

fn print_pmd(rows: Vec<PmdStatsRow>) {
    for r in rows {
        println!(
            "pmd{} cpu {}: queues [{}]",
            r.pmd,
            r.cpu.map_or("-".to_string(), |c| c.to_string()),
            r.queues
                .iter()
                .zip(r.queue_packets.iter().chain(std::iter::repeat(&0)))
                .map(|(q, n)| format!("{q}: {n} packets"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "    packets {}  batches {}  mean batch {:.1}  busy {:.1}%  cycles/packet {:.0}  busy_cycles {}  idle_cycles {}  sleeps {}  naps {}",
            r.packets, r.batches, r.mean_batch, r.busy_percent, r.cycles_per_packet, r.busy_cycles, r.idle_cycles, r.sleeps, r.naps
        );
        println!(
            "    rounds: busy {}  idle {}  cycles per idle round {:.0}",
            r.busy_rounds,
            r.idle_rounds,
            if r.idle_rounds > 0 {
                r.idle_cycles as f64 / r.idle_rounds as f64
            } else {
                0.0
            }
        );
        println!(
            "    flow cache: hit {:.1}%  last-flow hits {}  emc hits {}  misses {} (stale {})",
            r.cache_hit_percent,
            r.cache_last_flow_hits,
            r.cache_emc_hits,
            r.cache_misses,
            r.cache_stale_misses
        );
        if r.lflow_hits + r.lflow_misses > 0 {
            println!(
                "    OVN pipeline: program hits {} (wildcard {}, stepped together {})  interpreter runs {}  programs kept {} dropped {} by changes",
                r.lflow_hits, r.lflow_wild_hits, r.lflow_together, r.lflow_misses, r.lflow_kept, r.lflow_dropped
            );
        }
    }
}

fn fetch_stats(socket: &std::path::Path) -> Result<Vec<StatsRow>, String> {
    match call(socket, Request::Stats, REPLY_TIMEOUT)? {
        Response::Stats(s) => Ok(s),
        other => Err(format!("unexpected reply: {other:?}")),
    }
}

/// The drop reasons that moved from `before` to `now`, as ` (reason N, ...)`; empty
/// when none did.
fn drop_reasons(
    now: &std::collections::BTreeMap<String, u64>,
    before: &std::collections::BTreeMap<String, u64>,
) -> String {
    let moved: Vec<String> = now
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0);
            (d > 0).then(|| format!("{k} {d}"))
        })
        .collect();
    if moved.is_empty() {
        String::new()
    } else {
        format!(" ({})", moved.join(", "))
    }
}

/// Prints per-port rates every `interval` seconds.
fn top(socket: &std::path::Path, interval: f64, count: u64) -> ExitCode {
    if !(interval > 0.0 && interval.is_finite()) {
        eprintln!("vswitchctl: --interval must be a positive number of seconds");
        return ExitCode::from(2);
    }
    let mut prev = match fetch_stats(socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vswitchctl: {e}");
            return ExitCode::from(1);
        }
    };
    let first = prev.clone();
    let start = std::time::Instant::now();
    let mut last = start;
    let mut n = 0u64;
    while count == 0 || n < count {
        std::thread::sleep(std::time::Duration::from_secs_f64(interval));
        let now = std::time::Instant::now();
        let cur = match fetch_stats(socket) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("vswitchctl: {e}");
                return ExitCode::from(1);
            }
        };
        let dt = now.duration_since(last).as_secs_f64();
        n += 1;
        let mut line = format!("{:>5.1}s", now.duration_since(start).as_secs_f64());
        for (c, p) in cur.iter().zip(&prev) {
            let rx = (c.stats.rx_packets - p.stats.rx_packets) as f64 / dt;
            let tx = (c.stats.tx_packets - p.stats.tx_packets) as f64 / dt;
            let txb = (c.stats.tx_bytes - p.stats.tx_bytes) as f64 * 8.0 / dt;
            let drops = c.stats.drops_total - p.stats.drops_total;
            line.push_str(&format!(
                "  {}: rx {:.3} Mpps, tx {:.3} Mpps {:.2} Gbit/s, drops {}",
                c.port,
                rx / 1e6,
                tx / 1e6,
                txb / 1e9,
                drops
            ));
        }
        println!("{line}");
        prev = cur;
        last = now;
    }
    let total = last.duration_since(start).as_secs_f64();
    println!("summary over {total:.1} s:");
    for (c, p) in prev.iter().zip(&first) {
        let tx = c.stats.tx_packets - p.stats.tx_packets;
        let rx = c.stats.rx_packets - p.stats.rx_packets;
        let txb = c.stats.tx_bytes - p.stats.tx_bytes;
        println!(
            "  {}: received {} frames from the guest, delivered {} frames ({:.3} Mpps, {:.2} Gbit/s), dropped {}{}",
            c.port,
            rx,
            tx,
            tx as f64 / total / 1e6,
            txb as f64 * 8.0 / total / 1e9,
            c.stats.drops_total - p.stats.drops_total,
            drop_reasons(&c.stats.drops, &p.stats.drops)
        );
    }
    ExitCode::SUCCESS
}
