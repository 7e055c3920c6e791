//! Property tests: the codec round-trips and never panics on untrusted
//! bytes; two sessions on a lossy link keep RFC 5880's invariants.

use std::net::Ipv4Addr;
use std::num::NonZeroU32;

use bfd::frame::FRAME_LEN;
use bfd::{Config, ControlPacket, Diagnostic, FrameConfig, Session, State};
use proptest::prelude::*;

fn state() -> impl Strategy<Value = State> {
    (0u8..4).prop_map(State::from_bits)
}

/// Packets [`ControlPacket::parse`] accepts: mult and My Discriminator
/// non-zero, Your Discriminator non-zero in Init and Up, not both P and F.
fn valid_packet() -> impl Strategy<Value = ControlPacket> {
    (
        (0u8..32, state(), 0u8..3, any::<bool>(), any::<bool>()),
        (1u8..=255, 1u32.., any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u32>()),
    )
        .prop_map(
            |((diag, state, pf, cpi, demand), (mult, my, your), (tx, rx, echo))| {
                let your = if state > State::Down {
                    your.max(1)
                } else {
                    your
                };
                ControlPacket {
                    diag: Diagnostic::from_bits(diag),
                    state,
                    poll: pf == 1,
                    final_: pf == 2,
                    control_plane_independent: cpi,
                    demand,
                    detect_mult: mult,
                    my_discriminator: my,
                    your_discriminator: your,
                    desired_min_tx_us: tx,
                    required_min_rx_us: rx,
                    required_min_echo_rx_us: echo,
                }
            },
        )
}

fn frame_config() -> impl Strategy<Value = FrameConfig> {
    (
        proptest::option::of(any::<[u8; 6]>()),
        any::<[u8; 6]>(),
        any::<[u8; 4]>(),
        any::<[u8; 4]>(),
        49152u16..,
    )
        .prop_map(|(src_mac, dst_mac, src, dst, port)| FrameConfig {
            local_src_mac: src_mac,
            local_dst_mac: dst_mac,
            src_ip: Ipv4Addr::from(src),
            dst_ip: Ipv4Addr::from(dst),
            udp_src_port: port,
            ..FrameConfig::default()
        })
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(p in valid_packet()) {
        let mut buf = [0xa5u8; 24];
        prop_assert_eq!(p.encode(&mut buf), Ok(24));
        prop_assert_eq!(ControlPacket::decode(&buf), Ok(p));
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(p) = ControlPacket::decode(&bytes) {
            // Whatever decodes re-encodes to its first 24 bytes, Length 24.
            let mut buf = [0u8; 24];
            p.encode(&mut buf).unwrap();
            prop_assert_eq!(&buf[4..], &bytes[4..24]);
        }
    }

    #[test]
    fn frame_round_trip(p in valid_packet(), cfg in frame_config(), mac in any::<[u8; 6]>()) {
        let mut buf = [0xa5u8; FRAME_LEN + 8];
        let n = cfg.emit(mac, &p, &mut buf).unwrap();
        // The receiving side with default settings takes any addresses.
        prop_assert_eq!(FrameConfig::default().recognise(&buf[..n], 0), Some(Ok(p)));
        // Checksums verified by an independent parser.
        let s = etherparse::SlicedPacket::from_ethernet(&buf[..n]).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = s.net else { panic!("IPv4") };
        let h = ip.header().to_header();
        prop_assert_eq!(h.header_checksum, h.calc_header_checksum());
        let Some(etherparse::TransportSlice::Udp(udp)) = s.transport else { panic!("UDP") };
        let u = udp.to_header();
        prop_assert_eq!(u.checksum, u.calc_checksum_ipv4(&h, udp.payload()).unwrap());
    }

    #[test]
    fn recognise_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..128),
        key in any::<u64>(),
        cfg in frame_config(),
    ) {
        let _ = cfg.recognise(&bytes, key);
        let _ = FrameConfig::default().recognise(&bytes, key);
    }

    #[test]
    fn recognise_survives_corrupted_frames(
        p in valid_packet(),
        flips in proptest::collection::vec((0..FRAME_LEN, any::<u8>()), 1..6),
        cut in 0..=FRAME_LEN,
    ) {
        let mut buf = [0u8; FRAME_LEN];
        FrameConfig::default().emit([2, 0, 0, 0, 0, 1], &p, &mut buf).unwrap();
        for (i, b) in flips {
            buf[i] ^= b;
        }
        let _ = FrameConfig::default().recognise(&buf[..cut], 0);
        let _ = FrameConfig::default().recognise(&buf, 0);
    }

    /// Two sessions on a link that loses packets at random, in simulated
    /// time: no packet carries both P and F; a session is never Up for longer than the detection time without hearing the
    /// remote; with a clean link at the end both are Up within 3 s.
    #[test]
    fn sessions_on_a_lossy_link(
        seed in any::<u64>(),
        losses in proptest::collection::vec(any::<bool>(), 64),
        tx in 10u32..400,
        rx in 10u32..400,
        mult in 1u8..5,
    ) {
        let cfg = Config { min_tx_ms: tx, min_rx_ms: rx, mult, cpath_down: false };
        let mut s = [
            Session::with_seed(cfg, NonZeroU32::new(1).unwrap(), seed).unwrap(),
            Session::with_seed(cfg, NonZeroU32::new(2).unwrap(), !seed).unwrap(),
        ];
        let mut now = 0u64;
        let mut heard = [0u64; 2];
        let mut sent = 0usize;
        let mut up_at = None;
        while now < 20_000 {
            for from in 0..2 {
                if let Some(p) = s[from].poll(now) {
                    prop_assert!(!(p.poll && p.final_));
                    // Lossy for the first 10 s, clean after.
                    let lost = now < 10_000 && losses[sent % losses.len()];
                    sent += 1;
                    if !lost {
                        s[1 - from].receive(&p, now).unwrap();
                        heard[1 - from] = now;
                    }
                }
            }
            for k in 0..2 {
                if s[k].state() == State::Up {
                    let limit = s[k].rx_interval_ms() * u64::from(s[k].remote_detect_mult());
                    prop_assert!(now <= heard[k] + limit);
                }
            }
            if now >= 10_000 && up_at.is_none() && s.iter().all(|x| x.state() == State::Up) {
                up_at = Some(now);
            }
            now = s[0].next_wakeup().min(s[1].next_wakeup()).max(now + 1);
        }
        let up = up_at.expect("Up on the clean link");
        prop_assert!(up <= 13_000, "Up at {}", up);
    }
}
