//! A switch whose ports a and b carry a testpmd guest's MAC-forwarding loop
//! ([`super::start_loop_guest`]), and the loop's accounting: tests that change or
//! stress the switch run it beside their work and check it lost nothing.

use std::time::Duration;

use vswitch::control::protocol::PortStatsOwned;

use super::{wait_for, TempDir, Vswitchd};

/// The loop guest's MAC on port a.
pub const LOOP_MAC_A: &str = "02:00:00:00:00:01";
/// The loop guest's MAC on port b.
pub const LOOP_MAC_B: &str = "02:00:00:00:00:02";

/// vswitchd with loop ports a and b (MACs static, so no frame of the loop is flooded)
/// plus `extra` flags.
pub fn start_loop_switch(dir: &TempDir, extra: &[String]) -> Vswitchd {
    let mut args = vec![
        "--vhost-user".to_string(),
        format!("a={}", dir.path("a.sock").display()),
        "--vhost-user".into(),
        format!("b={}", dir.path("b.sock").display()),
        "--static-mac".into(),
        format!("a={LOOP_MAC_A}"),
        "--static-mac".into(),
        format!("b={LOOP_MAC_B}"),
        "--poll".into(),
        "adaptive".into(),
    ];
    args.extend_from_slice(extra);
    Vswitchd::start(dir, &args)
}

/// Waits until the loop's counters stop moving after its guest stopped forwarding.
pub fn settled(sw: &Vswitchd) -> (PortStatsOwned, PortStatsOwned) {
    let mut last = (sw.port("a").stats, sw.port("b").stats);
    wait_for(
        Duration::from_secs(10),
        "the loop's counters to settle",
        || {
            std::thread::sleep(Duration::from_millis(200));
            let now = (sw.port("a").stats, sw.port("b").stats);
            let same =
                now.0.rx_packets == last.0.rx_packets && now.1.rx_packets == last.1.rx_packets;
            last = now.clone();
            same.then_some(now)
        },
    )
}

/// The loop's accounting: no drop on a or b; every frame taken from a was delivered to
/// b; every frame taken from b, and each of the `injected` frames other ports sent to
/// A, was delivered to a.
pub fn assert_loop_whole(a: &PortStatsOwned, b: &PortStatsOwned, injected: u64) {
    assert_eq!(a.drops_total, 0, "drops on a: {a:?}");
    assert_eq!(b.drops_total, 0, "drops on b: {b:?}");
    assert_eq!(b.tx_packets, a.rx_packets, "a → b: {a:?} {b:?}");
    assert_eq!(a.tx_packets, b.rx_packets + injected, "b → a: {a:?} {b:?}");
    assert!(a.rx_packets > 20_000, "the loop ran: {a:?}");
}
