//! Geneve encapsulation, decapsulation, software TSO and GRO on pcap files:
//! an oracle for the `geneve` crate and a tool for debugging an overlay.
//!
//! ```text
//! cargo run --release --example geneve_pcap -- encap    --in inner.pcap --out outer.pcap --vni 5001 --local 192.0.2.1 --remote 192.0.2.2
//! cargo run --release --example geneve_pcap -- decap    --in outer.pcap --out inner.pcap
//! cargo run --release --example geneve_pcap -- segment  --in big.pcap   --out segs.pcap  --mss 1448 [--vni 5001 --local .. --remote ..]
//! cargo run --release --example geneve_pcap -- coalesce --in segs.pcap  --out big.pcap
//! ```

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use clap::{Parser, ValueEnum};
use geneve::decap::{Decapsulator, DropReason};
use geneve::encap::{TunnelConfig, TunnelTemplate};
use geneve::gro::{Coalesced, Coalescer};
use geneve::wire::OptionList;
use geneve::{segment, GsoMeta, GsoType, SegmentPlan};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::DataLink;

/// What to do with each frame of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Wrap every frame in Ethernet/IP/UDP/Geneve (needs --vni, --local, --remote).
    Encap,
    /// Strip Geneve; frames that fail validation are dropped and counted by reason.
    Decap,
    /// Split TCP frames whose payload exceeds --mss into segments (software TSO);
    /// with --vni, also encapsulate every output frame.
    Segment,
    /// Merge consecutive in-order TCP segments (software GRO) within batches of
    /// --batch frames; Geneve frames are decapsulated first.
    Coalesce,
}

/// Geneve (RFC 8926) encap/decap, software TSO and GRO over pcap files.
///
/// Reads Ethernet frames from --in, writes the result to --out, and prints a
/// one-line summary (and drop reasons) on stderr. Timestamps are kept.
#[derive(Debug, Parser)]
#[command(
    version,
    after_help = "Examples:\n  \
    geneve_pcap encap --in inner.pcap --out outer.pcap --vni 5001 --local 192.0.2.1 --remote 192.0.2.2 --option 0x0102:0x80:deadbeef\n  \
    geneve_pcap decap --in outer.pcap --out inner.pcap --known-option 0x0102:0x80\n  \
    geneve_pcap segment --in big.pcap --out segs.pcap --mss 1448 --vni 5001 --local 192.0.2.1 --remote 192.0.2.2\n  \
    geneve_pcap coalesce --in segs.pcap --out merged.pcap"
)]
struct Args {
    /// Operation.
    mode: Mode,
    /// Input pcap file (Ethernet link type).
    #[arg(long = "in", value_name = "IN.pcap")]
    input: PathBuf,
    /// Output pcap file (created or truncated).
    #[arg(long = "out", value_name = "OUT.pcap")]
    output: PathBuf,
    /// Virtual Network Identifier, 0..=16777215 (encap; segment to encapsulate).
    #[arg(long)]
    vni: Option<u32>,
    /// Local tunnel endpoint (outer source IP), IPv4 or IPv6.
    #[arg(long)]
    local: Option<IpAddr>,
    /// Remote tunnel endpoint (outer destination IP), same family as --local.
    #[arg(long)]
    remote: Option<IpAddr>,
    /// TCP payload bytes per segment (segment).
    #[arg(long)]
    mss: Option<u16>,
    /// Geneve option CLASS:TYPE:HEXDATA, e.g. 0x0102:0x80:deadbeef (TYPE's high
    /// bit is the critical bit; data a multiple of 4 bytes). Repeatable.
    #[arg(long = "option", value_name = "CLASS:TYPE:HEX")]
    options: Vec<String>,
    /// Compute the outer UDP checksum (always on over IPv6).
    #[arg(long)]
    udp_checksum: bool,
    /// Outer source MAC.
    #[arg(long, default_value = "02:00:00:00:00:01")]
    src_mac: String,
    /// Outer destination MAC.
    #[arg(long, default_value = "02:00:00:00:00:02")]
    dst_mac: String,
    /// Critical option CLASS:TYPE this endpoint knows (decap, coalesce). Repeatable.
    #[arg(long = "known-option", value_name = "CLASS:TYPE")]
    known_options: Vec<String>,
    /// Frames per coalescing batch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
}

fn parse_num(s: &str, what: &str) -> Result<u32> {
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16)
    } else {
        s.parse()
    };
    r.with_context(|| format!("{what}: expected a decimal or 0x-hex number, got {s:?}"))
}

fn parse_option(s: &str, list: &mut OptionList) -> Result<()> {
    let ctx = || format!("--option {s:?}: expected CLASS:TYPE:HEXDATA, e.g. 0x0102:0x80:deadbeef");
    let mut it = s.splitn(3, ':');
    let (Some(c), Some(t), Some(d)) = (it.next(), it.next(), it.next()) else {
        bail!(ctx())
    };
    let class = u16::try_from(parse_num(c, "option class")?).with_context(ctx)?;
    let ty = u8::try_from(parse_num(t, "option type")?).with_context(ctx)?;
    ensure!(
        d.len() % 2 == 0,
        "{}: hex data has an odd number of digits",
        ctx()
    );
    let data = (0..d.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&d[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .with_context(ctx)?;
    list.push(class, ty, &data)
        .map_err(|e| anyhow::anyhow!("{}: {e}", ctx()))?;
    Ok(())
}

fn parse_mac(s: &str, what: &str) -> Result<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    ensure!(
        parts.len() == 6,
        "{what} {s:?}: expected six hex bytes like 02:00:00:00:00:01"
    );
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16)
            .with_context(|| format!("{what} {s:?}: bad hex byte {p:?}"))?;
    }
    Ok(m)
}

fn template(a: &Args) -> Result<Option<TunnelTemplate>> {
    let Some(vni) = a.vni else { return Ok(None) };
    let (Some(local), Some(remote)) = (a.local, a.remote) else {
        bail!("--vni needs --local IP and --remote IP (the outer source and destination)");
    };
    let mut c = TunnelConfig::new(
        parse_mac(&a.src_mac, "--src-mac")?,
        parse_mac(&a.dst_mac, "--dst-mac")?,
        local,
        remote,
        vni,
    );
    for o in &a.options {
        parse_option(o, &mut c.options)?;
    }
    c.udp_checksum = a.udp_checksum || remote.is_ipv6();
    Ok(Some(TunnelTemplate::new(&c).with_context(|| {
        format!("tunnel --vni {vni} --local {local} --remote {remote}")
    })?))
}

fn decapsulator(a: &Args) -> Result<Decapsulator> {
    let mut d = Decapsulator::default();
    for k in &a.known_options {
        let (c, t) = k
            .split_once(':')
            .with_context(|| format!("--known-option {k:?}: expected CLASS:TYPE"))?;
        let class = u16::try_from(parse_num(c, "option class")?)
            .with_context(|| format!("--known-option {k:?}"))?;
        let ty = u8::try_from(parse_num(t, "option type")?)
            .with_context(|| format!("--known-option {k:?}"))?;
        d.registry.insert(class, ty);
    }
    Ok(d)
}

fn read_all(path: &Path) -> Result<Vec<(Duration, Vec<u8>)>> {
    let f = File::open(path).with_context(|| format!("opening input {}", path.display()))?;
    let mut r = PcapReader::new(BufReader::new(f))
        .with_context(|| format!("{}: not a pcap file", path.display()))?;
    ensure!(
        r.header().datalink == DataLink::ETHERNET,
        "{}: link type {:?}, expected Ethernet",
        path.display(),
        r.header().datalink
    );
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p =
            p.with_context(|| format!("{}: reading packet {}", path.display(), out.len() + 1))?;
        out.push((p.timestamp, p.data.into_owned()));
    }
    Ok(out)
}

/// Segmentation metadata for a frame, as a guest would describe it in its
/// virtio_net_hdr: TCP frames with more than `mss` payload bytes get TCPv4 /
/// TCPv6 GSO; everything else passes through (GSO none). `hdr_len` is left
/// 0: it is a hint that `segment` recomputes.
fn tso_meta(f: &[u8], mss: u16) -> GsoMeta {
    let Ok(p) = etherparse::SlicedPacket::from_ethernet(f) else {
        return GsoMeta::NONE;
    };
    let (Some(net), Some(etherparse::TransportSlice::Tcp(tcp))) = (&p.net, &p.transport) else {
        return GsoMeta::NONE;
    };
    if tcp.payload().len() <= usize::from(mss) {
        return GsoMeta::NONE;
    }
    let gso_type = match net {
        etherparse::NetSlice::Ipv4(_) => GsoType::TcpV4,
        etherparse::NetSlice::Ipv6(_) => GsoType::TcpV6,
    };
    GsoMeta {
        gso_type,
        gso_size: mss,
        ..GsoMeta::NONE
    }
}

fn main() -> Result<()> {
    let a = Args::parse();
    let frames = read_all(&a.input)?;
    let out = File::create(&a.output)
        .with_context(|| format!("creating output {}", a.output.display()))?;
    let header = PcapHeader {
        snaplen: 262_144,
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut w =
        PcapWriter::with_header(BufWriter::new(out), header).context("writing pcap header")?;
    let mut written = 0usize;
    let mut put = |ts: Duration, data: &[u8]| -> Result<()> {
        w.write_packet(&PcapPacket::new(ts, data.len() as u32, data))
            .with_context(|| format!("writing {}", a.output.display()))?;
        written += 1;
        Ok(())
    };
    let mut drops = [0u64; DropReason::COUNT];
    let mut buf = vec![0u8; 70_000];
    match a.mode {
        Mode::Encap => {
            let mut t = template(&a)?.context("encap needs --vni, --local and --remote")?;
            for (i, (ts, f)) in frames.iter().enumerate() {
                let n = t.encapsulate(f, &mut buf).with_context(|| {
                    format!("{}: frame {}: encapsulating", a.input.display(), i + 1)
                })?;
                put(*ts, &buf[..n])?;
            }
        }
        Mode::Decap => {
            let d = decapsulator(&a)?;
            for (ts, f) in &frames {
                match d.decapsulate(f) {
                    Ok(g) => put(*ts, g.inner)?,
                    Err(r) => drops[r.index()] += 1,
                }
            }
        }
        Mode::Segment => {
            let mss = a
                .mss
                .context("segment needs --mss N (TCP payload bytes per segment)")?;
            ensure!(mss > 0, "--mss must be at least 1");
            let mut t = template(&a)?;
            let mut bufs: Vec<Vec<u8>> = Vec::new();
            for (i, (ts, f)) in frames.iter().enumerate() {
                let meta = tso_meta(f, mss);
                let outer = t.as_ref().map_or(0, |t| t.header_len());
                let plan = SegmentPlan::new(f, &meta, outer)
                    .with_context(|| format!("{}: frame {}", a.input.display(), i + 1))?;
                bufs.resize(bufs.len().max(plan.count()), Vec::new());
                for b in &mut bufs[..plan.count()] {
                    b.resize(plan.max_segment_len(), 0);
                }
                let plan = segment(f, &meta, t.as_mut(), &mut bufs).with_context(|| {
                    format!("{}: frame {}: segmenting", a.input.display(), i + 1)
                })?;
                for (k, b) in bufs[..plan.count()].iter().enumerate() {
                    put(*ts, &b[..plan.segment_len(k)])?;
                }
            }
        }
        Mode::Coalesce => {
            ensure!(a.batch > 0, "--batch must be at least 1");
            let d = decapsulator(&a)?;
            let mut c = Coalescer::new();
            for chunk in frames.chunks(a.batch) {
                let inner: Vec<&[u8]> = chunk
                    .iter()
                    .map(|(_, f)| d.decapsulate(f).map_or(&f[..], |g| g.inner))
                    .collect();
                let ts = chunk[0].0;
                let mut res = Ok(());
                c.coalesce(&inner, |o: Coalesced<'_>| {
                    if res.is_ok() {
                        res = put(ts, o.frame());
                    }
                });
                res?;
            }
        }
    }
    w.into_writer()
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("flushing {}", a.output.display()))?;
    let dropped: u64 = drops.iter().sum();
    eprintln!(
        "{:?}: {} frames in, {written} frames out, {dropped} dropped",
        a.mode,
        frames.len()
    );
    for r in DropReason::ALL {
        if drops[r.index()] > 0 {
            eprintln!("  dropped {}: {}", r.as_str(), drops[r.index()]);
        }
    }
    Ok(())
}
