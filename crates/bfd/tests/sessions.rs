//! Two sessions back to back on a simulated link with simulated time: the
//! behaviour RFC 5880 §6.2, §6.5, §6.8 and Open vSwitch's `lib/bfd.c`
//! prescribe, each test named after it.

use std::num::NonZeroU32;

use bfd::frame::FRAME_LEN;
use bfd::{Config, ControlPacket, Diagnostic, Error, FrameConfig, Session, State};

/// A packet sent, at its time, by `from` (0 = A, 1 = B).
#[derive(Debug, Clone, Copy)]
struct Sent {
    at: u64,
    from: usize,
    packet: ControlPacket,
}

/// Sessions A and B joined by a link of zero delay, each direction of which
/// can be cut. Packets cross as frames (emit, then recognise).
struct Link {
    s: [Session; 2],
    /// Whether A→B and B→A deliver.
    open: [bool; 2],
    now: u64,
    log: Vec<Sent>,
}

fn disc(d: u32) -> NonZeroU32 {
    NonZeroU32::new(d).unwrap()
}

fn fast() -> Config {
    Config {
        min_tx_ms: 100,
        min_rx_ms: 100,
        ..Config::default()
    }
}

impl Link {
    fn new(a: Config, b: Config) -> Link {
        Link {
            s: [
                Session::with_seed(a, disc(0xa), 1).unwrap(),
                Session::with_seed(b, disc(0xb), 2).unwrap(),
            ],
            open: [true, true],
            now: 0,
            log: Vec::new(),
        }
    }

    /// Polls both sessions at the current time, delivering what they send,
    /// until neither has anything due now.
    fn settle(&mut self) {
        let frames = FrameConfig::default();
        let mut buf = [0u8; FRAME_LEN];
        loop {
            let mut sent = false;
            for from in 0..2 {
                let Some(packet) = self.s[from].poll(self.now) else {
                    continue;
                };
                sent = true;
                assert!(!(packet.poll && packet.final_), "P and F together (§6.5)");
                self.log.push(Sent {
                    at: self.now,
                    from,
                    packet,
                });
                if self.open[from] {
                    let n = frames.emit([2, 0, 0, 0, 0, 1], &packet, &mut buf).unwrap();
                    let rx = frames.recognise(&buf[..n], 0).unwrap().unwrap();
                    assert_eq!(rx, packet);
                    self.s[1 - from].receive(&rx, self.now).unwrap();
                }
            }
            if !sent {
                break;
            }
        }
    }

    /// Runs until `cond` holds (checked after each instant) or `limit` ms
    /// pass; returns the time it held.
    fn run_until(&mut self, limit: u64, mut cond: impl FnMut(&Link) -> bool) -> Option<u64> {
        let end = self.now + limit;
        loop {
            self.settle();
            if cond(self) {
                return Some(self.now);
            }
            let next = self.s[0].next_wakeup().min(self.s[1].next_wakeup());
            if next > end {
                self.now = end;
                return None;
            }
            self.now = next.max(self.now);
        }
    }

    fn run_for(&mut self, ms: u64) {
        let _ = self.run_until(ms, |_| false);
    }

    fn both(&self, s: State) -> bool {
        self.s[0].state() == s && self.s[1].state() == s
    }

    fn sent_by(&self, from: usize, since: u64) -> Vec<Sent> {
        self.log
            .iter()
            .filter(|p| p.from == from && p.at >= since)
            .copied()
            .collect()
    }
}

#[test]
fn comes_up_within_one_slow_interval_with_ovs_defaults() {
    let mut l = Link::new(Config::default(), Config::default());
    // A: Down → B: Down→Init → A: Down→Up on B's Init → B: Init→Up on
    // A's next packet, at most 1 s later (slow TX while not Up, §6.8.3).
    let t = l.run_until(1000, |l| l.both(State::Up)).expect("Up");
    assert!(t >= 750, "the third packet waits a jittered second: {t}");
    for s in &l.s {
        let st = s.status();
        assert!(st.forwarding);
        assert_eq!((st.flap_count, st.diagnostic), (1, Diagnostic::None));
    }
    // B went Up on A's Up; A has heard B only in Init so far.
    assert_eq!(l.s[1].remote_state(), State::Up);
    assert_eq!(l.s[0].remote_state(), State::Init);
    // Before Up, packets advertise at least 1 s; A's third, sent Up, 100 ms
    // (with no Poll Sequence, as Open vSwitch).
    assert!(l.log[..2]
        .iter()
        .all(|p| p.packet.desired_min_tx_us == 1_000_000));
    assert_eq!(l.log[2].packet.state, State::Up);
    assert_eq!(l.log[2].packet.desired_min_tx_us, 100_000);
    assert!(!l.log[2].packet.poll);
    let p = l.log[0].packet;
    assert_eq!((p.state, p.your_discriminator), (State::Down, 0));
    assert_eq!(l.log[1].packet.your_discriminator, 0xa);
}

#[test]
fn init_on_down_up_on_init_or_up() {
    let mut s = Session::new(Config::default(), disc(1)).unwrap();
    let mut pkt = ControlPacket {
        diag: Diagnostic::None,
        state: State::Down,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discriminator: 9,
        your_discriminator: 0,
        desired_min_tx_us: 1_000_000,
        required_min_rx_us: 1_000_000,
        required_min_echo_rx_us: 0,
    };
    s.receive(&pkt, 0).unwrap();
    assert_eq!(s.state(), State::Init);
    pkt.state = State::Init;
    pkt.your_discriminator = 1;
    s.receive(&pkt, 10).unwrap();
    assert_eq!(s.state(), State::Up);
    // Up stays Up on Init or Up, goes Down on Down.
    s.receive(&pkt, 20).unwrap();
    assert_eq!(s.state(), State::Up);
    pkt.state = State::Down;
    s.receive(&pkt, 30).unwrap();
    assert_eq!(
        (s.state(), s.diag()),
        (State::Down, Diagnostic::NeighborSignaledSessionDown)
    );
    assert_eq!(s.remote_discriminator(), 0, "forgotten on going Down");
}

#[test]
fn foreign_your_discriminator_is_dropped() {
    let mut s = Session::new(Config::default(), disc(1)).unwrap();
    let pkt = ControlPacket {
        diag: Diagnostic::None,
        state: State::Init,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discriminator: 9,
        your_discriminator: 2,
        desired_min_tx_us: 1_000_000,
        required_min_rx_us: 1_000_000,
        required_min_echo_rx_us: 0,
    };
    assert_eq!(s.receive(&pkt, 0), Err(Error::DiscriminatorMismatch));
    assert_eq!((s.state(), s.remote_discriminator()), (State::Down, 0));
}

#[test]
fn transmits_every_75_to_100_percent_of_the_interval() {
    let mut l = Link::new(fast(), fast());
    let up = l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.run_for(20_000);
    let gaps: Vec<u64> = l
        .sent_by(0, up + 200)
        .windows(2)
        .map(|w| w[1].at - w[0].at)
        .collect();
    assert!(gaps.len() > 150);
    assert!(gaps.iter().all(|g| (75..=100).contains(g)), "{gaps:?}");
    assert!(*gaps.iter().min().unwrap() <= 77 && *gaps.iter().max().unwrap() >= 98);
    assert!(l.both(State::Up));
}

#[test]
fn transmits_every_75_to_90_percent_with_detect_mult_1() {
    let one = Config { mult: 1, ..fast() };
    let mut l = Link::new(one, one);
    let up = l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.run_for(20_000);
    let gaps: Vec<u64> = l
        .sent_by(1, up + 200)
        .windows(2)
        .map(|w| w[1].at - w[0].at)
        .collect();
    assert!(gaps.iter().all(|g| (75..=90).contains(g)), "{gaps:?}");
    assert!(*gaps.iter().min().unwrap() <= 77 && *gaps.iter().max().unwrap() >= 88);
    assert!(l.both(State::Up), "no false detection at mult 1");
}

#[test]
fn the_slower_side_sets_the_pace() {
    // A wants 100 ms, B will receive only every 500 ms (§6.8.7).
    let b = Config {
        min_rx_ms: 500,
        ..fast()
    };
    let mut l = Link::new(fast(), b);
    let up = l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.run_for(5000);
    assert_eq!(l.s[0].tx_interval_ms(), 500);
    assert_eq!(l.s[1].rx_interval_ms(), 500);
    let a = l.sent_by(0, up + 1000);
    assert!(a
        .windows(2)
        .all(|w| (375..=500).contains(&(w[1].at - w[0].at))));
}

#[test]
fn slow_transmission_while_not_up() {
    let mut s = Session::with_seed(
        Config {
            min_tx_ms: 10,
            ..fast()
        },
        disc(1),
        7,
    )
    .unwrap();
    let mut times = Vec::new();
    let mut now = 0;
    while now < 10_000 {
        if s.poll(now).is_some() {
            times.push(now);
        }
        now = s.next_wakeup().max(now + 1);
    }
    assert_eq!(times[0], 0, "the first packet at once");
    assert!(times
        .windows(2)
        .all(|w| (750..=1000).contains(&(w[1] - w[0]))));
    assert_eq!(s.state(), State::Down, "nothing heard: no detection timer");
}

#[test]
fn goes_down_after_detection_time_when_the_remote_falls_silent() {
    let mut l = Link::new(fast(), fast());
    l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.run_for(1000);
    let cut = l.now;
    let last_from_a = l.sent_by(0, 0).last().unwrap().at;
    l.open[0] = false; // A's packets no longer reach B
    let t = l
        .run_until(1000, |l| l.s[1].state() == State::Down)
        .unwrap();
    // Detection time: B's rx interval (max(100, A's 100)) × A's mult 3,
    // from the last packet heard (§6.8.4).
    assert_eq!(t, last_from_a + 300, "cut at {cut}");
    assert_eq!(l.s[1].diag(), Diagnostic::ControlDetectionTimeExpired);
    // B's next packet, Down, takes A Down, Neighbor Signaled.
    l.run_until(100, |l| l.s[0].state() == State::Down).unwrap();
    assert_eq!(l.s[0].diag(), Diagnostic::NeighborSignaledSessionDown);
    let st = l.s[1].status();
    assert_eq!((st.forwarding, st.flap_count), (false, 2));
    assert_eq!(st.remote_state, State::Down);
    // Link back: both Up again, three flaps.
    l.open[0] = true;
    l.run_until(3000, |l| l.both(State::Up)).unwrap();
    assert_eq!(l.s[1].status().flap_count, 3);
}

#[test]
fn detection_time_uses_the_remote_multiplier_and_slower_tx() {
    let a = Config {
        min_tx_ms: 250,
        mult: 5,
        ..fast()
    };
    let mut l = Link::new(a, fast());
    l.run_until(3000, |l| l.both(State::Up)).unwrap();
    l.run_for(2000);
    let last = l.sent_by(0, 0).last().unwrap().at;
    l.open[0] = false;
    let t = l
        .run_until(3000, |l| l.s[1].state() == State::Down)
        .unwrap();
    assert_eq!(t, last + 250 * 5);
}

#[test]
fn poll_sequence_on_faster_rx_applies_it_only_at_the_final() {
    let mut l = Link::new(Config::default(), Config::default());
    l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.run_for(3000);
    assert_eq!(l.s[1].tx_interval_ms(), 1000);
    // A asks for packets every 300 ms instead of 1 s.
    let cfg = Config {
        min_rx_ms: 300,
        ..l.s[0].config()
    };
    l.s[0].set_config(cfg).unwrap();
    assert!(l.s[0].in_poll());
    assert_eq!(l.s[0].rx_interval_ms(), 1000, "not yet: the Final first");
    assert_eq!(l.s[0].next_wakeup(), 0, "the Poll goes out at once");
    let t0 = l.now;
    l.open[1] = false; // hold the Final back (less than A's 3 s detection time)
    l.run_for(1600);
    let polls = l.sent_by(0, t0);
    assert!(polls.len() >= 2 && polls.iter().all(|p| p.packet.poll));
    assert!(l.both(State::Up));
    assert!(polls.iter().all(|p| p.packet.required_min_rx_us == 300_000));
    assert!(l.s[0].in_poll());
    // Each Poll answered by a Final at once, besides B's periodic packets.
    let b = l.sent_by(1, t0);
    assert!(b.iter().all(|p| !p.packet.poll));
    for p in &polls {
        assert!(
            b.iter().any(|f| f.at == p.at && f.packet.final_),
            "F at once"
        );
    }
    l.open[1] = true;
    l.run_until(2000, |l| !l.s[0].in_poll()).unwrap();
    assert_eq!(l.s[0].rx_interval_ms(), 300);
    assert_eq!(l.s[1].tx_interval_ms(), 300);
    let t1 = l.now;
    l.run_for(3000);
    let after = l.sent_by(0, t1 + 1);
    assert!(
        after.iter().all(|p| !p.packet.poll && !p.packet.final_),
        "{after:#?}"
    );
    assert!(l.both(State::Up));
}

#[test]
fn poll_sequence_on_slower_tx_keeps_the_old_rate_until_the_final() {
    let mut l = Link::new(fast(), fast());
    l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.run_for(1000);
    let cfg = Config {
        min_tx_ms: 400,
        ..fast()
    };
    l.s[1].set_config(cfg).unwrap();
    // Still 100 ms until the Final (§6.8.3), then 400 ms.
    assert_eq!(l.s[1].tx_interval_ms(), 100);
    let t = l.run_until(1000, |l| !l.s[1].in_poll()).unwrap();
    assert_eq!(l.s[1].tx_interval_ms(), 400);
    let t1 = l.now;
    l.run_for(4000);
    let gaps: Vec<u64> = l
        .sent_by(1, t1 + 1)
        .windows(2)
        .map(|w| w[1].at - w[0].at)
        .collect();
    assert!(
        gaps.iter().all(|g| (300..=400).contains(g)),
        "{gaps:?} after {t}"
    );
    // A's detection time follows B's slower rate: no false Down.
    assert_eq!(l.s[0].rx_interval_ms(), 400);
    assert!(l.both(State::Up));
}

#[test]
fn faster_tx_applies_at_once() {
    let mut l = Link::new(Config::default(), Config::default());
    l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.s[0]
        .set_config(Config {
            min_tx_ms: 50,
            ..Config::default()
        })
        .unwrap();
    assert!(l.s[0].in_poll());
    let p = l.s[0].poll(l.now).unwrap();
    assert!(p.poll);
    assert_eq!(p.desired_min_tx_us, 50_000);
}

#[test]
fn no_poll_sequence_while_down() {
    let mut s = Session::new(fast(), disc(1)).unwrap();
    s.set_config(Config {
        min_rx_ms: 700,
        ..fast()
    })
    .unwrap();
    assert!(!s.in_poll());
    assert_eq!(s.rx_interval_ms(), 700);
    let p = s.poll(0).unwrap();
    assert!(!p.poll && p.required_min_rx_us == 700_000);
}

#[test]
fn admin_down_takes_the_remote_down_and_ignores_it() {
    let mut l = Link::new(fast(), fast());
    l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.s[0].set_admin_down(true);
    assert_eq!(
        (l.s[0].state(), l.s[0].diag()),
        (State::AdminDown, Diagnostic::AdministrativelyDown)
    );
    assert!(!l.s[0].status().forwarding);
    let t0 = l.now;
    l.run_for(5000);
    // B went Down, Neighbor Signaled, and stays Down: no Init on AdminDown.
    assert_eq!(
        (l.s[1].state(), l.s[1].diag()),
        (State::Down, Diagnostic::NeighborSignaledSessionDown)
    );
    assert_eq!(l.s[1].remote_state(), State::AdminDown);
    assert_eq!(l.s[0].state(), State::AdminDown, "B's packets ignored");
    // AdminDown keeps sending, slowly (§6.8.16, §6.8.3).
    let a = l.sent_by(0, t0 + 1);
    assert!(a.iter().all(|p| p.packet.state == State::AdminDown));
    assert!(a
        .iter()
        .all(|p| p.packet.diag == Diagnostic::AdministrativelyDown));
    assert!(a.windows(2).all(|w| w[1].at - w[0].at >= 750));
    l.s[0].set_admin_down(false);
    assert_eq!(l.s[0].state(), State::Down);
    l.run_until(3000, |l| l.both(State::Up)).unwrap();
}

#[test]
fn concatenated_path_down_stops_the_remote_forwarding() {
    let cp = Config {
        cpath_down: true,
        ..fast()
    };
    let mut l = Link::new(cp, fast());
    l.run_until(2000, |l| l.both(State::Up)).unwrap();
    assert_eq!(l.s[0].diag(), Diagnostic::ConcatenatedPathDown);
    let st = l.s[1].status();
    assert_eq!(st.remote_diagnostic, Diagnostic::ConcatenatedPathDown);
    assert!(!st.forwarding, "Up but not forwarding");
    assert!(l.s[0].status().forwarding);
    // Cleared: A polls, diag None, B forwards again.
    l.s[0].set_config(fast()).unwrap();
    l.run_for(500);
    assert_eq!(l.s[0].diag(), Diagnostic::None);
    assert!(l.s[1].status().forwarding);
}

#[test]
fn status_is_what_ovs_writes_to_bfd_status() {
    let mut l = Link::new(fast(), fast());
    assert!(l.s[0].take_status_change());
    assert!(!l.s[0].take_status_change());
    l.run_until(2000, |l| l.both(State::Up)).unwrap();
    l.run_for(500);
    assert!(l.s[0].take_status_change());
    let pairs = l.s[0].status().pairs();
    let expect = [
        ("forwarding", "true"),
        ("state", "up"),
        ("diagnostic", "No Diagnostic"),
        ("flap_count", "1"),
        ("remote_state", "up"),
        ("remote_diagnostic", "No Diagnostic"),
    ];
    for ((k, v), (ek, ev)) in pairs.iter().zip(expect) {
        assert_eq!((*k, v.as_str()), (ek, ev));
    }
    l.open[1] = false;
    l.run_until(1000, |l| l.s[0].state() == State::Down)
        .unwrap();
    assert!(l.s[0].take_status_change());
    let pairs = l.s[0].status().pairs();
    assert_eq!(pairs[2].1, "Control Detection Time Expired");
    assert_eq!(pairs[0].1, "false");
}

#[test]
fn same_seed_same_schedule() {
    let run = || {
        let mut l = Link::new(fast(), fast());
        l.run_for(5000);
        l.log.iter().map(|p| (p.at, p.from)).collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn invalid_configs_are_refused() {
    for bad in [
        Config { mult: 0, ..fast() },
        Config {
            min_tx_ms: 0,
            ..fast()
        },
        Config {
            min_rx_ms: 0,
            ..fast()
        },
        Config {
            min_rx_ms: bfd::session::MAX_INTERVAL_MS + 1,
            ..fast()
        },
    ] {
        assert_eq!(Session::new(bad, disc(1)).err(), Some(Error::InvalidConfig));
        let mut s = Session::new(fast(), disc(1)).unwrap();
        assert_eq!(s.set_config(bad), Err(Error::InvalidConfig));
        assert_eq!(s.config(), fast());
    }
    let max = Config {
        min_tx_ms: bfd::session::MAX_INTERVAL_MS,
        min_rx_ms: bfd::session::MAX_INTERVAL_MS,
        mult: 255,
        cpath_down: false,
    };
    let mut s = Session::new(max, disc(1)).unwrap();
    let p = s.poll(0).unwrap();
    assert_eq!(p.required_min_rx_us, bfd::session::MAX_INTERVAL_MS * 1000);
}
