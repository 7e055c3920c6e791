//! Prints what a NIC can offload and the offload plan vswitch would follow.
//!
//! ```text
//! cargo run --example nic_report -- eth0
//! cargo run --example nic_report -- eth0 --json
//! cargo run --example nic_report -- eth0 --datapath kernel-stack --afxdp-mode zero-copy
//! cargo run --example nic_report -- eth0 --datapath udp-socket
//! ```

use anyhow::Context;
use clap::{Parser, ValueEnum};
use nicoffload::{probe, AfXdpRequest, Datapath, OffloadNeeds, OffloadPlan};

/// Report a network interface's offload capabilities (ethtool features,
/// channels, rings, RSS, MTU, NUMA node, XDP features) and the offload plan
/// vswitch derives from them: for tunnel TSO, checksums, LRO/GRO, inner RSS
/// and the AF_XDP mode, whether the NIC or software does the job, and why.
///
/// Runs in the current network namespace; to look at an interface in
/// another one: `ip netns exec NS nic_report IFACE`. Needs no privilege.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The interface, e.g. eth0 (see `ip link show`).
    iface: String,
    /// Print JSON: {"capabilities": ..., "plan": ...}. Feature keys are the
    /// names `ethtool -k` prints (e.g. tx-udp_tnl-segmentation, rx-gro-hw,
    /// receive-hashing), each with "active" and "fixed" booleans.
    #[arg(long)]
    json: bool,
    /// How the switch would move the uplink's packets.
    #[arg(long, value_enum, default_value_t = DatapathArg::AfXdp)]
    datapath: DatapathArg,
    /// The AF_XDP mode to ask for: auto picks zero-copy, else native copy
    /// mode, else generic.
    #[arg(long, value_enum, default_value_t = ModeArg::Auto)]
    afxdp_mode: ModeArg,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum DatapathArg {
    /// AF_XDP sockets (vswitch's uplink port).
    AfXdp,
    /// The kernel network stack.
    KernelStack,
    /// A user-space Geneve endpoint over a UDP socket (examples/geneve_gateway.rs).
    UdpSocket,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModeArg {
    Auto,
    ZeroCopy,
    Native,
    Generic,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("nic_report: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> anyhow::Result<()> {
    let caps = probe(&args.iface).with_context(|| format!("probing {}", args.iface))?;
    let needs = OffloadNeeds {
        datapath: match args.datapath {
            DatapathArg::AfXdp => Datapath::AfXdp,
            DatapathArg::KernelStack => Datapath::KernelStack,
            DatapathArg::UdpSocket => Datapath::UdpSocket,
        },
        afxdp_mode: match args.afxdp_mode {
            ModeArg::Auto => AfXdpRequest::Auto,
            ModeArg::ZeroCopy => AfXdpRequest::ZeroCopy,
            ModeArg::Native => AfXdpRequest::Native,
            ModeArg::Generic => AfXdpRequest::Generic,
        },
        ..OffloadNeeds::default()
    };
    let plan = OffloadPlan::new(&caps, &needs);
    if args.json {
        let out = serde_json::json!({ "capabilities": caps, "plan": plan });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{caps}\n{plan}");
    }
    Ok(())
}
