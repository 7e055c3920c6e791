//! One BFD session (RFC 5880 §6.2, §6.8) as Open vSwitch runs it on a
//! tunnel (`lib/bfd.c`), for a poll-mode data path that owns time.
//!
//! The caller gives every call the current time in milliseconds on any
//! monotonic clock (`now_ms`), and:
//!
//! * hands each Control packet received to [`Session::receive`];
//! * calls [`Session::poll`] no later than [`Session::next_wakeup`] (and
//!   right after a `receive`: a Poll is answered at once), sending what it
//!   returns.
//!
//! What follows Open vSwitch rather than the letter of RFC 5880:
//!
//! * Asynchronous mode only: Demand mode and the Echo function are not
//!   implemented (a received D bit is ignored; Required Min Echo RX is 0).
//! * While not Up, the interval advertised and used is at least 1 s
//!   (§6.8.3), without a Poll Sequence when the session comes Up and
//!   switches to the configured, faster one.
//! * A configured interval change while Up starts a Poll Sequence (§6.5):
//!   a faster transmission or slower reception takes effect at once, the
//!   other direction only when the Final arrives. A Poll received cancels
//!   our own Poll (a packet cannot carry both P and F); it is restarted at
//!   the next [`Session::poll`].
//! * Leaving Down resets the remote's values (discriminator, intervals,
//!   state, diagnostic).
//! * `decay_min_rx`, `forwarding_if_rx` and `bfd/set-forwarding` are not
//!   implemented (they need the port's data counters).

use core::num::NonZeroU32;

use crate::wire::{ControlPacket, Diagnostic, State};
use crate::Error;

/// The slowest transmission interval while not Up, in milliseconds
/// (RFC 5880 §6.8.3: "not less than one second").
pub const SLOW_TX_MS: u64 = 1000;

/// The largest interval configurable, in milliseconds: what a 32-bit field
/// of microseconds holds.
pub const MAX_INTERVAL_MS: u32 = u32::MAX / 1000;

/// A session's timers and flags: the `Interface.bfd` keys of Open vSwitch
/// that concern the protocol. [`Config::default`] is Open vSwitch's
/// defaults, which is also what ovn-controller configures on its tunnels
/// unless `SB_Global:options` sets `bfd-min-tx`, `bfd-min-rx` or
/// `bfd-mult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// bfd.DesiredMinTxInterval while Up, in milliseconds (`min_tx`,
    /// default 100; 1..=[`MAX_INTERVAL_MS`]).
    pub min_tx_ms: u32,
    /// bfd.RequiredMinRxInterval, in milliseconds (`min_rx`, default 1000;
    /// 1..=[`MAX_INTERVAL_MS`]).
    pub min_rx_ms: u32,
    /// bfd.DetectMult (`mult`, default 3; 1..=255).
    pub mult: u8,
    /// Signal Concatenated Path Down (diagnostic 6) in every packet
    /// (`cpath_down`, default false).
    pub cpath_down: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_tx_ms: 100,
            min_rx_ms: 1000,
            mult: 3,
            cpath_down: false,
        }
    }
}

impl Config {
    /// The configuration Open vSwitch reads from an `Interface.bfd` column
    /// (`bfd_configure`): keys `min_tx`, `min_rx`, `mult`, `cpath_down`;
    /// other keys ignored. As Open vSwitch, a missing or unparsable number
    /// takes the default, intervals below 1 become 1 (and, here, above
    /// [`MAX_INTERVAL_MS`] become that), a multiplier outside 1..=255
    /// becomes 3, and only `true` is true. The result is always valid.
    pub fn from_ovsdb<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Config {
        let mut cfg = Config::default();
        let interval = |v: &str, default: u32| {
            v.trim()
                .parse::<i64>()
                .map_or(default, |ms| ms.clamp(1, i64::from(MAX_INTERVAL_MS)) as u32)
        };
        for (k, v) in pairs {
            match k {
                "min_tx" => cfg.min_tx_ms = interval(v, 100),
                "min_rx" => cfg.min_rx_ms = interval(v, 1000),
                "mult" => cfg.mult = v.trim().parse::<u8>().ok().filter(|&m| m > 0).unwrap_or(3),
                "cpath_down" => cfg.cpath_down = v == "true",
                _ => {}
            }
        }
        cfg
    }

    fn validate(&self) -> Result<(), Error> {
        let ok = |ms: u32| (1..=MAX_INTERVAL_MS).contains(&ms);
        if !ok(self.min_tx_ms) || !ok(self.min_rx_ms) || self.mult == 0 {
            return Err(Error::InvalidConfig);
        }
        Ok(())
    }
}

/// What Open vSwitch writes to `Interface.bfd_status`
/// (`bfd_get_status`): [`Status::pairs`] gives the column's keys and
/// values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// bfd.SessionState (`state`).
    pub state: State,
    /// Whether the tunnel may carry traffic: Up, and the remote does not
    /// signal Path Down, Concatenated or Reverse Concatenated Path Down
    /// (`forwarding`).
    pub forwarding: bool,
    /// bfd.LocalDiag (`diagnostic`).
    pub diagnostic: Diagnostic,
    /// bfd.RemoteSessionState (`remote_state`).
    pub remote_state: State,
    /// The remote's last Diag (`remote_diagnostic`).
    pub remote_diagnostic: Diagnostic,
    /// How many times `forwarding` changed (`flap_count`).
    pub flap_count: u64,
}

impl Status {
    /// The `Interface.bfd_status` column as Open vSwitch fills it: keys
    /// and values in its order and spelling (`forwarding` is `true` or
    /// `false`; states `admin_down`, `down`, `init`, `up`; diagnostics by
    /// their RFC 5880 names).
    pub fn pairs(&self) -> [(&'static str, String); 6] {
        [
            ("forwarding", self.forwarding.to_string()),
            ("state", self.state.as_str().to_string()),
            ("diagnostic", self.diagnostic.as_str().to_string()),
            ("flap_count", self.flap_count.to_string()),
            ("remote_state", self.remote_state.as_str().to_string()),
            (
                "remote_diagnostic",
                self.remote_diagnostic.as_str().to_string(),
            ),
        ]
    }
}

/// One BFD session in Asynchronous mode (RFC 5880 §6.8), as Open vSwitch
/// runs it. Times are milliseconds on the caller's monotonic clock.
#[derive(Debug, Clone)]
pub struct Session {
    cfg: Config,
    disc: u32,
    state: State,
    diag: Diagnostic,
    /// P is set on every packet until the Final arrives.
    poll: bool,
    /// F is set on the next packet, sent at once.
    final_: bool,
    /// bfd.DesiredMinTxInterval and bfd.RequiredMinRxInterval in effect.
    min_tx: u64,
    min_rx: u64,
    /// The values a Poll Sequence in progress advertises.
    poll_min_tx: u64,
    poll_min_rx: u64,
    remote: Remote,
    /// Last and next transmission; `next_tx` 0 means "now".
    last_tx: u64,
    next_tx: u64,
    /// When the session goes Down unless a packet arrives (§6.8.4).
    detect_time: u64,
    forwarding: bool,
    flap_count: u64,
    status_changed: bool,
    jitter: Jitter,
}

/// What the last packet said about the remote system.
#[derive(Debug, Clone, Copy)]
struct Remote {
    disc: u32,
    state: State,
    diag: Diagnostic,
    mult: u8,
    /// bfd.RemoteMinRxInterval, ms (1 until heard).
    min_rx: u64,
    /// The remote's Desired Min TX, ms (0 until heard).
    min_tx: u64,
    poll: bool,
}

impl Remote {
    /// What a session assumes of a remote it has not heard (or that went
    /// Down): RFC 5880 §6.8.1's initial values, as Open vSwitch resets them.
    const UNKNOWN: Remote = Remote {
        disc: 0,
        state: State::Down,
        diag: Diagnostic::None,
        mult: 0,
        min_rx: 1,
        min_tx: 0,
        poll: false,
    };
}

impl Session {
    /// A session in state Down with local discriminator `my_discriminator`
    /// (RFC 5880 §6.8.1: random and unique among the system's sessions,
    /// which is the caller's to ensure). Its jitter is seeded from the
    /// discriminator; [`Session::with_seed`] chooses the seed. The first
    /// packet is due at once.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`]: an interval of 0 or above
    /// [`MAX_INTERVAL_MS`], or a multiplier of 0. (Open vSwitch instead
    /// clamps intervals to at least 1 and takes 3 for a bad multiplier.)
    pub fn new(config: Config, my_discriminator: NonZeroU32) -> Result<Session, Error> {
        let seed = u64::from(my_discriminator.get());
        Session::with_seed(config, my_discriminator, seed)
    }

    /// [`Session::new`] with the transmission jitter drawn from a
    /// deterministic generator seeded with `seed`, so that a test is
    /// reproducible.
    ///
    /// # Errors
    /// As [`Session::new`].
    pub fn with_seed(
        config: Config,
        my_discriminator: NonZeroU32,
        seed: u64,
    ) -> Result<Session, Error> {
        config.validate()?;
        Ok(Session {
            cfg: config,
            disc: my_discriminator.get(),
            state: State::Down,
            diag: if config.cpath_down {
                Diagnostic::ConcatenatedPathDown
            } else {
                Diagnostic::None
            },
            poll: false,
            final_: false,
            min_tx: u64::from(config.min_tx_ms),
            min_rx: u64::from(config.min_rx_ms),
            poll_min_tx: 0,
            poll_min_rx: 0,
            remote: Remote::UNKNOWN,
            last_tx: 0,
            next_tx: 0,
            detect_time: 0,
            forwarding: false,
            flap_count: 0,
            status_changed: true,
            jitter: Jitter(seed),
        })
    }

    /// Applies a new configuration, as Open vSwitch does when
    /// `Interface.bfd` changes (`bfd_configure`). While Up, a changed
    /// interval starts a Poll Sequence (RFC 5880 §6.5, §6.8.3): a smaller
    /// transmission interval or a larger reception interval takes effect
    /// now, the others when the remote's Final arrives. Otherwise the new
    /// intervals take effect now. A changed `cpath_down` resets the
    /// diagnostic (to Concatenated Path Down or none) and polls.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] as [`Session::new`]; the session is then
    /// unchanged.
    pub fn set_config(&mut self, config: Config) -> Result<(), Error> {
        config.validate()?;
        let mut need_poll = false;
        let (new_tx, new_rx) = (u64::from(config.min_tx_ms), u64::from(config.min_rx_ms));
        let old = core::mem::replace(&mut self.cfg, config);
        if u64::from(old.min_tx_ms) != new_tx {
            if self.state != State::Up || (!self.poll && new_tx < self.min_tx) {
                self.min_tx = new_tx;
            }
            need_poll = true;
        }
        if u64::from(old.min_rx_ms) != new_rx {
            if self.state != State::Up || (!self.poll && new_rx > self.min_rx) {
                self.min_rx = new_rx;
            }
            need_poll = true;
        }
        if old.cpath_down != config.cpath_down {
            self.set_state(self.state, Diagnostic::None);
            need_poll = true;
        }
        if need_poll {
            self.start_poll();
        }
        Ok(())
    }

    /// Holds the session down (`true`, RFC 5880 §6.8.16: state AdminDown,
    /// diagnostic Administratively Down; packets keep going out, every
    /// second, so the remote goes Down with Neighbor Signaled Session Down
    /// rather than by timeout; received packets are ignored) or releases
    /// it (`false`: state Down, no diagnostic).
    pub fn set_admin_down(&mut self, admin_down: bool) {
        match (admin_down, self.state == State::AdminDown) {
            (true, false) => self.set_state(State::AdminDown, Diagnostic::AdministrativelyDown),
            (false, true) => self.set_state(State::Down, Diagnostic::None),
            _ => {}
        }
        self.update_forwarding();
    }

    /// Processes a Control packet (already through [`ControlPacket::parse`]
    /// or [`crate::FrameConfig::recognise`]) received at `now_ms`: RFC 5880
    /// §6.8.6 from "If the Your Discriminator field is nonzero" on, as
    /// Open vSwitch (`bfd_process_packet`). The remote's values and the
    /// detection time are updated even while AdminDown, where the packet
    /// then changes no state. A Poll makes the next packet a Final, due at
    /// once: call [`Session::poll`] next.
    ///
    /// # Errors
    /// [`Error::DiscriminatorMismatch`]: Your Discriminator is neither 0
    /// nor ours. The session is then unchanged.
    pub fn receive(&mut self, packet: &ControlPacket, now_ms: u64) -> Result<(), Error> {
        if packet.your_discriminator != 0 && packet.your_discriminator != self.disc {
            return Err(Error::DiscriminatorMismatch);
        }
        if self.remote.state != packet.state {
            self.status_changed = true;
        }
        self.remote.disc = packet.my_discriminator;
        self.remote.state = packet.state;
        self.remote.poll = packet.poll;
        self.remote.diag = packet.diag;
        if packet.final_ && self.poll {
            self.min_tx = self.poll_min_tx;
            self.min_rx = self.poll_min_rx;
            self.poll = false;
        }
        if packet.poll {
            self.poll = false;
            self.final_ = true;
        }
        self.remote.mult = packet.detect_mult;
        let rmt_min_rx = u64::from(packet.required_min_rx_us / 1000).max(1);
        if self.remote.min_rx != rmt_min_rx {
            self.remote.min_rx = rmt_min_rx;
            if self.next_tx != 0 {
                self.set_next_tx();
            }
        }
        self.remote.min_tx = u64::from(packet.desired_min_tx_us / 1000).max(1);
        self.detect_time = now_ms + self.rx_interval_ms() * u64::from(self.remote.mult);

        if self.state != State::AdminDown {
            self.transition(packet.state);
        }
        self.update_forwarding();
        Ok(())
    }

    /// The state table of RFC 5880 §6.2 for a packet from a remote in
    /// `remote`, with the diagnostics Open vSwitch sets.
    fn transition(&mut self, remote: State) {
        if remote == State::AdminDown {
            if self.state != State::Down {
                self.set_state(State::Down, Diagnostic::NeighborSignaledSessionDown);
            }
            return;
        }
        let diag = self.diag;
        match (self.state, remote) {
            (State::Down, State::Down) => self.set_state(State::Init, diag),
            (State::Down, State::Init) | (State::Init, State::Init | State::Up) => {
                self.set_state(State::Up, diag)
            }
            (State::Up, State::Down) => {
                self.set_state(State::Down, Diagnostic::NeighborSignaledSessionDown)
            }
            _ => {}
        }
    }

    /// Runs the timers at `now_ms` and returns the packet to send now, if
    /// one is due (a Final at once; otherwise one per transmission
    /// interval, jittered to 75–100 % of it, or 75–90 % with a multiplier
    /// of 1: RFC 5880 §6.8.7). Past the detection time (§6.8.4) the
    /// session goes Down with Control Detection Time Expired. Restarts a
    /// Poll Sequence that a changed configuration still needs.
    pub fn poll(&mut self, now_ms: u64) -> Option<ControlPacket> {
        if self.state > State::Down && now_ms >= self.detect_time {
            self.set_state(State::Down, Diagnostic::ControlDetectionTimeExpired);
        }
        self.update_forwarding();
        if self.min_tx != u64::from(self.cfg.min_tx_ms)
            || self.min_rx != u64::from(self.cfg.min_rx_ms)
        {
            self.start_poll();
        }
        if !self.final_ && now_ms < self.next_tx {
            return None;
        }
        let (min_tx, min_rx) = if self.poll {
            (self.poll_min_tx, self.poll_min_rx)
        } else {
            (self.effective_min_tx(), self.min_rx)
        };
        let packet = ControlPacket {
            diag: self.diag,
            state: self.state,
            poll: self.poll,
            final_: self.final_,
            control_plane_independent: false,
            demand: false,
            detect_mult: self.cfg.mult,
            my_discriminator: self.disc,
            your_discriminator: self.remote.disc,
            // At most MAX_INTERVAL_MS (validated config) or SLOW_TX_MS,
            // so the microseconds fit in 32 bits.
            desired_min_tx_us: (min_tx * 1000) as u32,
            required_min_rx_us: (min_rx * 1000) as u32,
            required_min_echo_rx_us: 0,
        };
        self.final_ = false;
        self.last_tx = now_ms;
        self.set_next_tx();
        Some(packet)
    }

    /// When [`Session::poll`] must run next, in ms on the caller's clock:
    /// the next transmission or, unless Down or AdminDown, the detection
    /// time if sooner; 0 (now) while a Final is pending.
    pub fn next_wakeup(&self) -> u64 {
        if self.final_ {
            0
        } else if self.state > State::Down {
            self.next_tx.min(self.detect_time)
        } else {
            self.next_tx
        }
    }

    /// bfd.SessionState.
    pub fn state(&self) -> State {
        self.state
    }

    /// bfd.RemoteSessionState (Down until heard, and after going Down).
    pub fn remote_state(&self) -> State {
        self.remote.state
    }

    /// bfd.LocalDiag.
    pub fn diag(&self) -> Diagnostic {
        self.diag
    }

    /// bfd.LocalDiscr.
    pub fn local_discriminator(&self) -> u32 {
        self.disc
    }

    /// bfd.RemoteDiscr (0 until heard, and after going Down).
    pub fn remote_discriminator(&self) -> u32 {
        self.remote.disc
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        self.cfg
    }

    /// Whether a Poll Sequence of ours awaits its Final.
    pub fn in_poll(&self) -> bool {
        self.poll
    }

    /// The remote's Required Min RX Interval, ms (1 until heard).
    pub fn remote_min_rx_ms(&self) -> u64 {
        self.remote.min_rx
    }

    /// The remote's Desired Min TX Interval, ms (0 until heard).
    pub fn remote_min_tx_ms(&self) -> u64 {
        self.remote.min_tx
    }

    /// The remote's Detect Mult (0 until heard).
    pub fn remote_detect_mult(&self) -> u8 {
        self.remote.mult
    }

    /// The transmission interval before jitter, ms: the larger of our
    /// Desired Min TX (at least [`SLOW_TX_MS`] while not Up) and the
    /// remote's Required Min RX (RFC 5880 §6.8.7).
    pub fn tx_interval_ms(&self) -> u64 {
        self.effective_min_tx().max(self.remote.min_rx)
    }

    /// The reception interval, ms: the larger of our Required Min RX and
    /// the remote's Desired Min TX. Times the remote's Detect Mult, it is
    /// the detection time (RFC 5880 §6.8.4).
    pub fn rx_interval_ms(&self) -> u64 {
        self.min_rx.max(self.remote.min_tx)
    }

    /// The `Interface.bfd_status` values.
    pub fn status(&self) -> Status {
        Status {
            state: self.state,
            forwarding: self.forwarding,
            diagnostic: self.diag,
            remote_state: self.remote.state,
            remote_diagnostic: self.remote.diag,
            flap_count: self.flap_count,
        }
    }

    /// Whether [`Session::status`] changed since the last call (true at
    /// first), resetting the flag: when to rewrite `Interface.bfd_status`
    /// (`bfd_check_status_change`).
    pub fn take_status_change(&mut self) -> bool {
        core::mem::take(&mut self.status_changed)
    }

    /// bfd.DesiredMinTxInterval as used: at least 1 s while not Up
    /// (RFC 5880 §6.8.3).
    fn effective_min_tx(&self) -> u64 {
        if self.state == State::Up {
            self.min_tx
        } else {
            self.min_tx.max(SLOW_TX_MS)
        }
    }

    /// Starts a Poll Sequence with the configured intervals, unless Down,
    /// already polling or owing a Final; the first Poll goes out at once.
    fn start_poll(&mut self) {
        if self.state > State::Down && !self.poll && !self.final_ {
            self.poll_min_tx = u64::from(self.cfg.min_tx_ms);
            self.poll_min_rx = u64::from(self.cfg.min_rx_ms);
            self.poll = true;
            self.next_tx = 0;
        }
    }

    fn set_next_tx(&mut self) {
        let interval = self.tx_interval_ms();
        let cut = if self.cfg.mult == 1 {
            10 + self.jitter.below(16)
        } else {
            self.jitter.below(26)
        };
        self.next_tx = self.last_tx + interval - interval * cut / 100;
    }

    fn set_state(&mut self, state: State, diag: Diagnostic) {
        let diag = if self.cfg.cpath_down {
            Diagnostic::ConcatenatedPathDown
        } else {
            diag
        };
        if self.state == state && self.diag == diag {
            return;
        }
        self.state = state;
        self.diag = diag;
        if state <= State::Down {
            self.remote = Remote::UNKNOWN;
        }
        self.status_changed = true;
    }

    fn update_forwarding(&mut self) {
        let forwarding = self.state == State::Up
            && !matches!(
                self.remote.diag,
                Diagnostic::PathDown
                    | Diagnostic::ConcatenatedPathDown
                    | Diagnostic::ReverseConcatenatedPathDown
            );
        if forwarding != self.forwarding {
            self.forwarding = forwarding;
            self.flap_count += 1;
            self.status_changed = true;
        }
    }
}

/// SplitMix64: a small deterministic generator for the transmission jitter,
/// one per session so that no global state is shared.
#[derive(Debug, Clone)]
struct Jitter(u64);

impl Jitter {
    /// A value in `0..n` (`n` > 0; the modulo bias is irrelevant for n ≤ 26).
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_ovsdb_as_ovs_reads_it() {
        assert_eq!(Config::from_ovsdb([("enable", "true")]), Config::default());
        let ovn = [
            ("enable", "true"),
            ("min_tx", "200"),
            ("min_rx", "300"),
            ("mult", "5"),
        ];
        let cfg = Config::from_ovsdb(ovn);
        assert_eq!((cfg.min_tx_ms, cfg.min_rx_ms, cfg.mult), (200, 300, 5));
        let odd = [
            ("min_tx", "0"),
            ("min_rx", "x"),
            ("mult", "256"),
            ("cpath_down", "yes"),
        ];
        let cfg = Config::from_ovsdb(odd);
        assert_eq!((cfg.min_tx_ms, cfg.min_rx_ms, cfg.mult), (1, 1000, 3));
        assert!(!cfg.cpath_down);
        let cfg = Config::from_ovsdb([("mult", "0"), ("min_rx", "99999999999")]);
        assert_eq!((cfg.mult, cfg.min_rx_ms), (3, MAX_INTERVAL_MS));
        assert!(Config::from_ovsdb([("cpath_down", "true")]).cpath_down);
    }
}
