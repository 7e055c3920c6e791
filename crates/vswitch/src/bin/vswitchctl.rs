//! vswitchctl: inspect a running vswitchd. See `vswitchctl --help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use vswitch::config::DEFAULT_CONTROL_SOCKET;
use vswitch::control::{
    request, request_args, AclRow, FdbRowNamed, FlowsReply, OffloadsRow, PmdStatsRow, StatsRow,
};
use vswitch::switch::ShowReply;

/// vswitchctl: query a running vswitchd over its control socket.
#[derive(Parser)]
#[command(name = "vswitchctl", version)]
struct Cli {
    /// vswitchd's control socket (vswitchd --control).
    #[arg(long, global = true, default_value = DEFAULT_CONTROL_SOCKET)]
    socket: PathBuf,
    /// Print the daemon's JSON reply instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Ports: kind, socket or interface, link state, queues, negotiated features, PMD of
    /// each queue; for AF_XDP uplinks the mode in use and why.
    Show,
    /// Per AF_XDP uplink, the offload plan (nicoffload): for tunnel TSO, tx/rx checksum,
    /// LRO/GRO, inner RSS and the AF_XDP mode, whether the NIC does it (hardware), the
    /// switch or kernel does it (software), or it cannot be done (unavailable), and why.
    Offloads,
    /// Per-port counters: rx (from the guest), tx (to the guest), drops by reason.
    Stats,
    /// The MAC table: VLAN, MAC, port, age.
    Fdb,
    /// Per-PMD packets, bursts, mean burst size, busy and idle cycles, flow-cache hits.
    PmdStats,
    /// The flows each PMD has cached: flow key, current or stale, actions.
    Flows {
        /// Only this PMD.
        pmd: Option<usize>,
    },
    /// Per-port ingress ACLs: ordered rules, first match wins, no match allows.
    #[command(subcommand)]
    Acl(AclCmd),
    /// Live per-port rates: one line per port every INTERVAL seconds, COUNT times, then
    /// a summary (Mpps and Gbit/s of Ethernet frames, excluding preamble and FCS).
    Top {
        /// Seconds between samples.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Number of samples (0 = until interrupted).
        #[arg(long, default_value_t = 10)]
        count: u64,
    },
}

#[derive(Subcommand)]
enum AclCmd {
    /// Add a rule to PORT's ACL (at the end, or at POSITION):
    /// `vswitchctl acl add vm1 drop ip_proto=udp l4_dst=5000-5999 ip_src=10.0.0.0/8`.
    /// Fields: eth_src, eth_dst (MAC[/MASK]), eth_type, vlan, ip_src, ip_dst (CIDR),
    /// ip_proto (number or tcp/udp/icmp/icmpv6/sctp), ip_frag, l4_src, l4_dst (PORT or LO-HI).
    Add {
        /// Port name.
        port: String,
        /// Insert at this index instead of appending.
        #[arg(long)]
        position: Option<usize>,
        /// The rule: ACTION (allow|drop) then FIELD=VALUE pairs.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        rule: Vec<String>,
    },
    /// Delete rule INDEX (as `acl list` numbers it) from PORT's ACL.
    Del {
        /// Port name.
        port: String,
        /// Rule index.
        index: usize,
    },
    /// List rules with their drop counts.
    List {
        /// Only this port.
        port: Option<String>,
    },
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`vswitchctl flows | head`), like other CLI tools.
    // SAFETY: setting SIGPIPE's disposition to the default before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    if let Cmd::Top { interval, count } = cli.cmd {
        return top(&cli.socket, interval, count);
    }
    let (cmd, args): (&str, Vec<String>) = match &cli.cmd {
        Cmd::Flows { pmd } => ("flows", pmd.iter().map(|p| p.to_string()).collect()),
        Cmd::Acl(AclCmd::Add {
            port,
            position,
            rule,
        }) => {
            let mut a = vec![port.clone()];
            a.extend(position.map(|p| p.to_string()));
            a.extend(rule.iter().cloned());
            ("acl-add", a)
        }
        Cmd::Acl(AclCmd::Del { port, index }) => ("acl-del", vec![port.clone(), index.to_string()]),
        Cmd::Acl(AclCmd::List { port }) => ("acl-list", port.iter().cloned().collect()),
        _ => ("", Vec::new()),
    };
    if !cmd.is_empty() {
        let v = match request_args(&cli.socket, cmd, &args) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("vswitchctl: {e}");
                return ExitCode::from(1);
            }
        };
        if cli.json || cmd == "acl-add" || cmd == "acl-del" {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            return ExitCode::SUCCESS;
        }
        let r = match cmd {
            "flows" => serde_json::from_value::<Vec<FlowsReply>>(v).map(|rows| {
                for r in rows {
                    println!("pmd{}: {} flows", r.pmd, r.flows.len());
                    for f in r.flows {
                        println!("  {f}");
                    }
                }
            }),
            _ => serde_json::from_value::<Vec<AclRow>>(v).map(|rows| {
                println!("{:<12} {:>5} {:>12}  rule", "port", "index", "drops");
                for r in rows {
                    println!("{:<12} {:>5} {:>12}  {}", r.port, r.index, r.drops, r.rule);
                }
            }),
        };
        return match r {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vswitchctl: unexpected reply: {e}");
                ExitCode::from(1)
            }
        };
    }
    let cmd = match cli.cmd {
        Cmd::Top { .. } | Cmd::Flows { .. } | Cmd::Acl(_) => unreachable!(),
        Cmd::Show => "show",
        Cmd::Stats => "stats",
        Cmd::Fdb => "fdb",
        Cmd::PmdStats => "pmd-stats",
        Cmd::Offloads => "offloads",
    };
    let v = match request(&cli.socket, cmd) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("vswitchctl: {e}");
            return ExitCode::from(1);
        }
    };
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let r = match cmd {
        "show" => serde_json::from_value::<ShowReply>(v).map(print_show),
        "stats" => serde_json::from_value::<Vec<StatsRow>>(v).map(print_stats),
        "fdb" => serde_json::from_value::<Vec<FdbRowNamed>>(v).map(print_fdb),
        "offloads" => serde_json::from_value::<Vec<OffloadsRow>>(v).map(print_offloads),
        _ => serde_json::from_value::<Vec<PmdStatsRow>>(v).map(print_pmd),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vswitchctl: unexpected reply: {e}");
            ExitCode::from(1)
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

fn print_show(s: ShowReply) {
    println!("poll mode: {}   fdb entries: {}", s.poll, s.fdb_entries);
    for p in s.ports {
        println!(
            "port {} ({}) {} {}  link {}  vlan {}  queues {} (ready {:?})  connections {}",
            p.id,
            p.name,
            p.kind,
            p.path,
            p.link,
            if p.vlan == 0 {
                "untagged".to_string()
            } else {
                p.vlan.to_string()
            },
            p.queue_pairs,
            p.ready_queue_pairs,
            p.connections
        );
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
            .enumerate()
            .map(|(q, m)| format!("q{q}->pmd{m}"))
            .collect();
        println!("    pmd: {}", pmds.join(" "));
    }
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
    println!("{:>4} {:<17} {:<12} {:>8}", "vlan", "mac", "port", "age");
    for r in rows {
        let age = if r.is_static {
            "static".to_string()
        } else {
            format!("{}s", r.age_secs)
        };
        println!("{:>4} {:<17} {:<12} {:>8}", r.vlan, r.mac, r.port, age);
    }
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
            "    packets {}  batches {}  mean batch {:.1}  busy {:.1}%  cycles/packet {:.0}  busy_cycles {}  idle_cycles {}  sleeps {}",
            r.packets, r.batches, r.mean_batch, r.busy_percent, r.cycles_per_packet, r.busy_cycles, r.idle_cycles, r.sleeps
        );
        println!(
            "    flow cache: hit {:.1}%  last-flow hits {}  emc hits {}  misses {} (stale {})",
            r.cache_hit_percent,
            r.cache_last_flow_hits,
            r.cache_emc_hits,
            r.cache_misses,
            r.cache_stale_misses
        );
    }
}

fn fetch_stats(socket: &std::path::Path) -> Result<Vec<StatsRow>, String> {
    let v = request(socket, "stats")?;
    serde_json::from_value(v).map_err(|e| format!("unexpected reply: {e}"))
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
            "  {}: received {} frames from the guest, delivered {} frames ({:.3} Mpps, {:.2} Gbit/s), dropped {}",
            c.port,
            rx,
            tx,
            tx as f64 / total / 1e6,
            txb as f64 * 8.0 / total / 1e9,
            c.stats.drops_total - p.stats.drops_total
        );
    }
    ExitCode::SUCCESS
}
