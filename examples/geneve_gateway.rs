//! A Geneve gateway built from vswitch's library crates alone: it joins a tap
//! device (the local "VM" side) to one Geneve tunnel (RFC 8926) carried by an
//! ordinary kernel UDP socket. No AF_XDP, no vhost-user, no `vswitch` crate.
//!
//! ```text
//! tap (64 KB TSO frames, virtio-net header) ──► flowcache: FlowKey, EMC ──► geneve: software GSO
//!        ▲                                                                    │ ≤ MTU datagrams
//!        └── geneve: GRO (64 KB frames + GSO metadata) ◄── geneve: decap ◄── UDP socket :6081
//! ```
//!
//! * `nicoffload` probes the underlay interface and plans a `UdpSocket`
//!   datapath: the kernel owns the outer IP/UDP headers, the gateway
//!   segments, checksums and coalesces the inner TCP in software.
//! * `geneve` segments each TSO frame from the tap into MSS-sized inner
//!   segments written straight behind a prebuilt Geneve header, and after
//!   decapsulation merges received segments back into one large frame.
//! * `flowcache` keys each tap frame by its flow; the flow's cached decision
//!   is which UDP socket (hence which outer source port) carries it.
//!
//! ```text
//! ip netns exec host1 cargo run --example geneve_gateway -- \
//!     --underlay veth1 --local 198.51.100.2 --remote 198.51.100.1 --vni 5001 --tap gw0
//! ip netns exec host1 ip addr add 10.50.0.2/24 dev gw0
//! ip netns exec host1 ip link set gw0 up
//! ```
//! It prints the offload plan, then `ready`, and runs until killed.

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

use anyhow::{ensure, Context, Result};
use clap::Parser;
use flowcache::{EmcConfig, FlowCache, FlowKey};
use geneve::decap::Decapsulator;
use geneve::gro::{Coalesced, Coalescer};
use geneve::wire::{Packet, Repr, ETHERTYPE_TEB};
use geneve::{segment, GsoMeta, VIRTIO_NET_HDR_LEN};
use nicoffload::{Datapath, Job, OffloadNeeds, OffloadPlan, Placement};

/// Joins a tap device to a Geneve tunnel over a UDP socket.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Underlay interface: probed for its MTU and offloads.
    #[arg(long)]
    underlay: String,
    /// Local tunnel endpoint: an address of the underlay interface.
    #[arg(long)]
    local: Ipv4Addr,
    /// Remote tunnel endpoint (e.g. vswitchd's `--geneve` address).
    #[arg(long)]
    remote: Ipv4Addr,
    /// Virtual Network Identifier, 0..=16777215.
    #[arg(long, default_value_t = 5001)]
    vni: u32,
    /// Tap device to create.
    #[arg(long, default_value = "gw0")]
    tap: String,
    /// UDP sockets to send from: each has its own source port, picked per flow.
    #[arg(long, default_value_t = 4)]
    source_ports: usize,
}

/// Outer overhead over IPv4: IP 20 + UDP 8 + Geneve 8 + inner Ethernet 14 bytes.
const OVERHEAD: usize = 20 + 8 + 8 + 14;
/// Geneve header without options (RFC 8926 §3.4).
const GENEVE_LEN: usize = 8;
/// Largest frame a TSO tap hands over: a 64 KiB IP packet plus Ethernet.
const TAP_FRAME_MAX: usize = 65_535 + 14 + 4;
/// Datagrams received (and coalesced) per batch.
const BATCH: usize = 64;
/// The tap's port number in flow keys (a switch with more ports numbers them).
const TAP_PORT: u32 = 1;

fn main() -> Result<()> {
    let args = Args::parse();

    // 1. What does the underlay NIC do for us? A user-space endpoint over a UDP
    //    socket gets the kernel's outer IP/UDP work, but the inner TCP is payload
    //    to the kernel: segmentation, checksums and coalescing are ours.
    let caps = nicoffload::probe(&args.underlay).context("probing the underlay")?;
    let needs = OffloadNeeds {
        datapath: Datapath::UdpSocket,
        ..OffloadNeeds::default()
    };
    let plan = OffloadPlan::new(&caps, &needs);
    print!("{plan}");
    let software = |job| plan.get(job).map(|d| d.placement) == Some(Placement::Software);
    ensure!(
        software(Job::TunnelTso) && software(Job::ReceiveCoalescing),
        "the plan does not leave segmentation and coalescing to us"
    );
    let underlay_mtu = caps.mtu as usize;
    // The inner frames must fit the underlay once wrapped: the tap's MTU (its IP
    // packet size, so the kernel's TCP MSS) is the underlay's minus the overhead.
    let tap_mtu = underlay_mtu - OVERHEAD;

    // 2. The tap, with a virtio-net header before each frame and TSO/checksum
    //    offload on, so the kernel hands us 64 KB TCP frames with partial checksums.
    let tap = tap::open(&args.tap, tap_mtu).context("creating the tap")?;

    // 3. The tunnel's sockets: one receiving on port 6081, a few sending, each
    //    bound to its own ephemeral port (the outer source port carries flow
    //    entropy for ECMP and RSS, RFC 8926 §3.3). Never fragment: a datagram
    //    over the path MTU is an error, not two fragments. The kernel adds the
    //    outer UDP checksum (on a veth it stays partial: a receiver reading the
    //    wire before a kernel sees only the pseudo-header's sum, which vswitchd
    //    accepts).
    let rx = UdpSocket::bind(SocketAddrV4::new(args.local, geneve::wire::UDP_PORT))?;
    let remote = SocketAddrV4::new(args.remote, geneve::wire::UDP_PORT);
    let mut senders = Vec::new();
    for _ in 0..args.source_ports.max(1) {
        let s = UdpSocket::bind(SocketAddrV4::new(args.local, 0))?;
        s.connect(remote)?;
        tap::set_int(
            &s,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )?;
        senders.push(s);
    }

    // 4. The Geneve header is the same for every datagram of this tunnel (no
    //    options): build it once.
    let mut header = [0u8; GENEVE_LEN];
    let repr = Repr {
        control: false,
        critical: false,
        protocol_type: ETHERTYPE_TEB,
        vni: args.vni,
        options: &[],
    };
    repr.emit(&mut Packet::new_unchecked(&mut header[..]))
        .context("--vni must fit in 24 bits")?;

    println!("ready: tap {} mtu {tap_mtu}, vni {}", args.tap, args.vni);
    let tap_rx = tap.try_clone()?;
    let up = std::thread::Builder::new()
        .name("tap-to-tunnel".into())
        .spawn(move || tap_to_tunnel(tap_rx, &senders, header, underlay_mtu))?;
    let down = std::thread::Builder::new()
        .name("tunnel-to-tap".into())
        .spawn(move || tunnel_to_tap(&rx, tap, args.vni))?;
    // Both loops run until an I/O error; report the first.
    let (a, b) = (up.join(), down.join());
    a.expect("tap-to-tunnel panicked")?;
    b.expect("tunnel-to-tap panicked")
}

/// One UDP payload being built: the Geneve header, written once, then an inner
/// segment. `segment` writes through `AsMut`, so it sees only the part after
/// the header and never touches the header again.
struct Datagram(Box<[u8]>);

impl AsMut<[u8]> for Datagram {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.0[GENEVE_LEN..]
    }
}

/// Tap → tunnel: read a frame (up to 64 KB), find its flow's socket, segment it
/// into MTU-sized inner frames behind the Geneve header, send each.
fn tap_to_tunnel(
    mut tap: File,
    senders: &[UdpSocket],
    header: [u8; GENEVE_LEN],
    underlay_mtu: usize,
) -> Result<()> {
    let mut buf = vec![0u8; VIRTIO_NET_HDR_LEN + TAP_FRAME_MAX];
    // Enough datagrams for a 64 KiB frame cut at the smallest MSS we expect
    // (536 bytes, RFC 9293 §3.7.1); each sized for the largest datagram.
    let mut out: Vec<Datagram> = (0..128)
        .map(|_| {
            let mut d = vec![0u8; underlay_mtu].into_boxed_slice();
            d[..GENEVE_LEN].copy_from_slice(&header);
            Datagram(d)
        })
        .collect();
    // The flow cache's decision for a flow: the index of its sending socket.
    // This gateway's configuration never changes, so one generation serves.
    let mut cache: FlowCache<usize> = FlowCache::new(EmcConfig::default());
    const GENERATION: u64 = 1;
    loop {
        let n = tap.read(&mut buf).context("reading the tap")?;
        if n < VIRTIO_NET_HDR_LEN + 14 {
            continue;
        }
        // The virtio-net header (virtio 1.2 §5.1.6) says whether this is a TSO
        // frame (gso_type, gso_size = MSS) and where a partial checksum is.
        let (hdr, frame) = buf[..n].split_at(VIRTIO_NET_HDR_LEN);
        let Ok(meta) = GsoMeta::parse_virtio_net_hdr(hdr) else {
            continue; // UDP GSO and unknown types: not asked for in TUNSETOFFLOAD
        };
        // The flow key (addresses, protocol, ports...) and its hash. The hash
        // indexes the cache; on a miss the "slow path" decides, and a real
        // switch would consult its FDB and ACLs there. Here it spreads flows
        // over the sending sockets by the same hash.
        let key = FlowKey::extract(frame, TAP_PORT, None);
        let hash = key.flow_hash();
        let sock = match cache.lookup(&key, hash, GENERATION) {
            Some(&s) => s,
            None => {
                // Multiply-shift maps the 32-bit hash onto 0..len, uniformly.
                let s = ((u64::from(hash) * senders.len() as u64) >> 32) as usize;
                cache.insert(&key, hash, s, GENERATION);
                s
            }
        };
        // Software GSO: one TSO frame becomes `plan.count()` segments with
        // their own IP IDs, sequence numbers and complete checksums; a
        // non-TSO frame is copied once, its partial checksum completed.
        let plan = match segment(frame, &meta, None, &mut out) {
            Ok(plan) => plan,
            Err(_) => continue, // not TCP, malformed, or smaller MSS than we buffer
        };
        for (i, d) in out.iter().enumerate().take(plan.count()) {
            let len = GENEVE_LEN + plan.segment_len(i);
            // A datagram the path cannot carry fails with EMSGSIZE: drop it.
            match senders[sock].send(&d.0[..len]) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e).context("sending to the tunnel"),
            }
        }
    }
}

/// Tunnel → tap: receive a batch of datagrams, decapsulate them, coalesce the
/// TCP segments of each flow into large frames, write each to the tap with
/// its virtio-net header (a merged frame is marked as a TSO frame with a
/// verified checksum, so the kernel's TCP takes 64 KB at once).
fn tunnel_to_tap(rx: &UdpSocket, mut tap: File, vni: u32) -> Result<()> {
    let mut bufs = vec![[0u8; 2048]; BATCH];
    let mut lens = [0usize; BATCH];
    let decap = Decapsulator::default();
    let mut gro = Coalescer::new();
    loop {
        // Block for the first datagram, then take whatever else is queued.
        let mut n = 0;
        while n < BATCH {
            let flags = if n == 0 { 0 } else { libc::MSG_DONTWAIT };
            match tap::recv(rx, &mut bufs[n], flags) {
                Ok(len) => {
                    lens[n] = len;
                    n += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("receiving from the tunnel"),
            }
        }
        // Decapsulate: the kernel checked the outer headers; we check the
        // Geneve header and options and keep our VNI's Ethernet frames.
        let inner: Vec<&[u8]> = bufs[..n]
            .iter()
            .zip(&lens)
            .filter_map(|(b, &len)| decap.decapsulate_payload(&b[..len]).ok())
            .filter(|p| p.vni == vni && p.protocol_type == ETHERTYPE_TEB)
            .map(|p| p.inner)
            .collect();
        // GRO: in-order segments of one flow become one frame plus GSO
        // metadata; everything else passes unchanged, in order.
        gro.coalesce(&inner, |c| {
            let (meta, frame) = match c {
                Coalesced::Unchanged(f) => (GsoMeta::NONE, f),
                Coalesced::Merged { frame, meta, .. } => (meta, frame),
            };
            let hdr = meta.to_virtio_net_hdr();
            // One write per frame: the tap takes header and frame as one iovec
            // list. A frame the kernel refuses (the tap is down: EIO) is dropped,
            // as a NIC would drop it.
            let _ = tap.write_vectored(&[IoSlice::new(&hdr), IoSlice::new(frame)]);
        });
    }
}

/// The few system calls std has no wrapper for. Constants from
/// `<linux/if_tun.h>` (see Linux `Documentation/networking/tuntap.rst`).
mod tap {
    use super::*;

    const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
    const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
    const IFF_TAP: libc::c_short = 0x0002;
    const IFF_NO_PI: libc::c_short = 0x1000;
    const IFF_VNET_HDR: libc::c_short = 0x4000;
    const TUN_F_CSUM: libc::c_ulong = 0x01;
    const TUN_F_TSO4: libc::c_ulong = 0x02;
    const TUN_F_TSO6: libc::c_ulong = 0x04;

    /// `struct ifreq`: the name, then a union (flags or MTU here), 40 bytes.
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: libc::c_int,
        _pad: [u8; 20],
    }

    fn ifreq(name: &str, data: libc::c_int) -> io::Result<IfReq> {
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data,
            _pad: [0; 20],
        };
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad tap name"));
        }
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        Ok(req)
    }

    fn check(r: libc::c_int) -> io::Result<()> {
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Creates tap `name` with a 10-byte virtio-net header per frame (the
    /// default size) and TSO4/TSO6/checksum offload, and sets its MTU.
    pub fn open(name: &str, mtu: usize) -> io::Result<File> {
        let tun = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")?;
        let flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
        let mut req = ifreq(name, libc::c_int::from(flags))?;
        // SAFETY: TUNSETIFF reads and writes a struct ifreq, which `req` is.
        check(unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETIFF, &mut req) })?;
        let offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
        // SAFETY: TUNSETOFFLOAD takes its argument by value.
        check(unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETOFFLOAD, offloads) })?;
        let req = ifreq(name, mtu as libc::c_int)?;
        let sock = UdpSocket::bind("0.0.0.0:0")?;
        // SAFETY: SIOCSIFMTU reads a struct ifreq with the MTU in its union.
        check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFMTU, &req) })?;
        Ok(tun)
    }

    /// setsockopt(2) of an int option.
    pub fn set_int(
        s: &UdpSocket,
        level: libc::c_int,
        opt: libc::c_int,
        v: libc::c_int,
    ) -> io::Result<()> {
        // SAFETY: setsockopt reads `size_of::<c_int>()` bytes at `&v`.
        check(unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                level,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        })
    }

    /// recv(2) with `flags` (std's `recv` has none: MSG_DONTWAIT drains a
    /// blocking socket without switching it to non-blocking).
    pub fn recv(s: &UdpSocket, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
        // SAFETY: recv writes at most `buf.len()` bytes into `buf`.
        let r = unsafe { libc::recv(s.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}
