//! BFD on the Geneve tunnels to other chassis, as ovn-controller has Open vSwitch run
//! it (`controller/bfd.c`; the protocol is `crates/bfd`): one session per chassis that
//! shares a gateway port's HA group with this one (`bfd_calculate_chassis`), with
//! Open vSwitch's defaults (100 ms transmission, 1 s reception, multiplier 3) unless
//! `SB_Global:options` sets `bfd-min-tx`, `bfd-min-rx` or `bfd-mult` ([`config_of`]).
//! The chassis
//! whose session is Up are the "active tunnels" the gateway decision reads
//! ([`super::gateway`]).
//!
//! Frames go as Open vSwitch puts them in a tunnel: VNI 0, no option, an inner
//! Ethernet/IPv4/UDP frame to port 3784. The PMDs hand received ones to
//! [`crate::switch::Switch::bfd_rx`]; a thread of its own ([`spawn`]) runs the sessions
//! every [`TICK`] and sends through PMD 0 ([`crate::switch::Switch::inject`]), so that
//! a long pass of the chassis task (a pipeline built, a transaction awaited) never
//! delays a packet past the peer's detection time.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bfd::{Config, FrameConfig, Session, State};

use super::Status;
use crate::control::ops::Control;
use crate::model::lflow::{Injected, SlowDest};
use crate::switch::Switch;

/// How often the sessions run: a tenth of Open vSwitch's fastest default interval.
pub const TICK: Duration = Duration::from_millis(10);

/// What one [`Bfd::run`] changed.
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    /// Some session's status (state, diagnostics, flaps).
    pub status: bool,
    /// The set of chassis whose session is Up.
    pub up: bool,
}

/// One session, to one chassis.
struct Peer {
    /// The chassis' Geneve endpoint.
    ip: IpAddr,
    /// The protocol's state.
    session: Session,
    /// The inner frame's UDP source port.
    frame: FrameConfig,
}

/// The sessions to the other chassis.
pub struct Bfd {
    peers: BTreeMap<String, Peer>,
    /// The inner frames' source MAC (one per chassis, as an OVS tunnel port has one).
    mac: [u8; 6],
    /// The clock's origin.
    start: Instant,
    /// The next discriminator.
    next_disc: u32,
    /// The chassis whose session is Up, as last reported.
    up: BTreeSet<String>,
    /// Control packets received that were not valid (TTL, checksums, fields).
    pub bad: u64,
}

impl Default for Bfd {
    fn default() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seed = std::process::id() ^ nanos.rotate_left(8);
        Bfd {
            peers: BTreeMap::new(),
            mac: [
                0x02,
                0xbf,
                0xd0,
                (seed >> 16) as u8,
                (seed >> 8) as u8,
                seed as u8,
            ],
            start: Instant::now(),
            next_disc: seed.max(1),
            up: BTreeSet::new(),
            bad: 0,
        }
    }
}

impl Bfd {
    /// Keeps one session per chassis of `want` (name -> Geneve endpoint) with timers
    /// `config`: new chassis get a session, chassis no longer wanted lose theirs.
    pub fn set_peers(&mut self, want: &BTreeMap<String, IpAddr>, config: Config) {
        self.peers.retain(|name, p| want.get(name) == Some(&p.ip));
        for (name, ip) in want {
            if let Some(p) = self.peers.get_mut(name) {
                if p.session.config() != config {
                    let _ = p.session.set_config(config);
                }
                continue;
            }
            self.next_disc = self.next_disc.wrapping_add(0x9e37_79b9).max(1);
            let disc = NonZeroU32::new(self.next_disc).expect("nonzero");
            let Ok(session) = Session::new(config, disc) else {
                continue;
            };
            let frame = FrameConfig {
                udp_src_port: FrameConfig::source_port(self.peers.len() as u32),
                ..FrameConfig::default()
            };
            self.peers.insert(
                name.clone(),
                Peer {
                    ip: *ip,
                    session,
                    frame,
                },
            );
        }
    }

    /// Feeds the sessions what the PMDs received, sends what is due; says what
    /// changed.
    pub fn run(&mut self, sw: &Switch) -> Tick {
        let now = self.start.elapsed().as_millis() as u64;
        let received = std::mem::take(&mut *sw.bfd_rx.lock().unwrap_or_else(|e| e.into_inner()));
        for (ip, pkt) in received {
            let ok = self
                .peers
                .values_mut()
                .find(|p| p.ip == ip)
                .is_some_and(|p| p.session.receive(&pkt, now).is_ok());
            self.bad += u64::from(!ok);
        }
        let topo = sw.topo();
        let mut frames = Vec::new();
        for p in self.peers.values_mut() {
            let Some(pkt) = p.session.poll(now) else {
                continue;
            };
            // Charged to the uplink of the endpoint of the peer's address family.
            let uplink = topo
                .tunnels
                .teps
                .iter()
                .find(|t| t.config.local.is_ipv6() == p.ip.is_ipv6())
                .map(|t| t.uplink);
            let (Some(remote), Some(src)) = (sw.remotes.intern(p.ip), uplink) else {
                continue;
            };
            let mut buf = vec![0u8; bfd::frame::FRAME_LEN];
            if let Ok(n) = p.frame.emit(self.mac, &pkt, &mut buf) {
                buf.truncate(n);
                frames.push(Injected {
                    src,
                    dest: SlowDest::Tunnel {
                        remote,
                        vni: 0,
                        ingress: 0,
                        egress: 0,
                    },
                    frame: buf,
                });
            }
        }
        sw.inject(frames);
        let up: BTreeSet<String> = self
            .peers
            .iter()
            .filter(|(_, p)| p.session.state() == State::Up)
            .map(|(n, _)| n.clone())
            .collect();
        let mut status = false;
        for p in self.peers.values_mut() {
            status |= p.session.take_status_change();
        }
        let changed = up != self.up;
        if changed {
            tracing::info!(up = ?up, "BFD: chassis reachable through their tunnels");
            self.up = up;
        }
        Tick {
            status,
            up: changed,
        }
    }

    /// Whether any session runs.
    pub fn active(&self) -> bool {
        !self.peers.is_empty()
    }

    /// The chassis whose session is Up (OVN's active tunnels).
    pub fn up(&self) -> &BTreeSet<String> {
        &self.up
    }

    /// Each session, as `vswitchctl ovn` shows it (Open vSwitch's
    /// `Interface.bfd_status`).
    pub fn rows(&self) -> Vec<crate::control::protocol::OvnBfdRow> {
        self.peers
            .iter()
            .map(|(n, p)| {
                let s = p.session.status();
                crate::control::protocol::OvnBfdRow {
                    chassis: n.clone(),
                    state: s.state.as_str().to_string(),
                    remote_state: s.remote_state.as_str().to_string(),
                    diagnostic: s.diagnostic.as_str().to_string(),
                    flap_count: s.flap_count,
                }
            })
            .collect()
    }
}

/// What the chassis task and the BFD thread share.
#[derive(Debug, Default)]
pub struct Shared {
    /// The chassis to run sessions with and their timers, when the chassis task asks
    /// for a change.
    want: Mutex<Option<(BTreeMap<String, IpAddr>, Config)>>,
    /// The chassis whose session is Up.
    up: Mutex<BTreeSet<String>>,
    /// The thread is to end.
    stop: AtomicBool,
}

impl Shared {
    /// Asks for sessions with `peers` (name -> Geneve endpoint) with timers `config`.
    pub fn want(&self, peers: BTreeMap<String, IpAddr>, config: Config) {
        *self.want.lock().unwrap_or_else(|e| e.into_inner()) = Some((peers, config));
    }

    /// The chassis whose session is Up.
    pub fn up(&self) -> BTreeSet<String> {
        self.up.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Ends the thread (its sessions stop: the peers see them time out).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts the BFD thread of the chassis: it wakes the chassis task when the set of
/// chassis whose session is Up changes, and keeps `status` current.
///
/// # Errors
/// The thread could not be started.
pub fn spawn(ctl: Arc<Control>, status: Arc<Status>) -> std::io::Result<Arc<Shared>> {
    let shared = Arc::new(Shared::default());
    let s = shared.clone();
    std::thread::Builder::new()
        .name("ovn-bfd".into())
        .spawn(move || {
            let mut bfd = Bfd::default();
            while !s.stop.load(Ordering::Relaxed) {
                let want = s.want.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some((want, config)) = want {
                    bfd.set_peers(&want, config);
                    ctl.switch.bfd_on.store(bfd.active(), Ordering::Relaxed);
                    status.update(|r| r.bfd = bfd.rows());
                }
                if bfd.active() {
                    let tick = bfd.run(&ctl.switch);
                    if tick.status {
                        status.update(|r| r.bfd = bfd.rows());
                    }
                    if tick.up {
                        *s.up.lock().unwrap_or_else(|e| e.into_inner()) = bfd.up().clone();
                        ctl.ovn_wake.notify_one();
                    }
                }
                std::thread::sleep(TICK);
            }
        })?;
    Ok(shared)
}

/// The session timers `SB_Global:options` asks for (`bfd-min-tx`, `bfd-min-rx`,
/// `bfd-mult`, as ovn-controller copies them into `Interface.bfd`), Open vSwitch's
/// defaults for the others.
pub fn config_of(options: &BTreeMap<String, String>) -> Config {
    let keys = [
        ("bfd-min-tx", "min_tx"),
        ("bfd-min-rx", "min_rx"),
        ("bfd-mult", "mult"),
    ];
    Config::from_ovsdb(
        keys.iter()
            .filter_map(|(sb, ovs)| Some((*ovs, options.get(*sb)?.as_str()))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_from_sb_global_options() {
        assert_eq!(config_of(&BTreeMap::new()), Config::default());
        let o: BTreeMap<String, String> = [("bfd-min-rx", "300"), ("bfd-mult", "5"), ("x", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let c = config_of(&o);
        assert_eq!((c.min_tx_ms, c.min_rx_ms, c.mult), (100, 300, 5));
    }
}
