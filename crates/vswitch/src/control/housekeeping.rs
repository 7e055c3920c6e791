//! Once a second on the control plane's runtime: FDB and multicast group aging, expiry
//! of connection tracking entries (a bounded sweep: PMDs meet at most one shard's lock
//! for one chunk of it), the PMDs' health, and the automatic rebalance of rx queues
//! (`--pmd-auto-rebalance`).
//!
//! Automatic rebalance, like Open vSwitch's `pmd-auto-lb`: every
//! [`AUTO_INTERVAL`] each PMD's busy share over the interval is measured (busy cycles
//! over busy + idle). When the busiest PMD stays at or above [`AUTO_LOAD_PERCENT`] for
//! [`AUTO_INTERVALS`] intervals in a row, the assignment `pmd-rebalance` would make is
//! computed from the queues' measured cycles, and applied if it lowers the busiest
//! PMD's load by at least [`AUTO_IMPROVEMENT_PERCENT`]; never twice within
//! [`AUTO_MIN_SPACING`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info};

use super::ops::Control;

/// How often the PMDs' loads are measured for the automatic rebalance.
pub const AUTO_INTERVAL: Duration = Duration::from_secs(10);
/// Busy share (percent) from which a PMD counts as overloaded (OVS's default: 95).
pub const AUTO_LOAD_PERCENT: f64 = 95.0;
/// Consecutive overloaded intervals before a rebalance is considered.
pub const AUTO_INTERVALS: u32 = 3;
/// Least improvement of the busiest PMD's load (percent) worth a rebalance (OVS: 25).
pub const AUTO_IMPROVEMENT_PERCENT: f64 = 25.0;
/// Least time between two automatic rebalances (OVS: 1 minute).
pub const AUTO_MIN_SPACING: Duration = Duration::from_secs(60);

/// Conntrack entries (connections and NAT aliases) swept per second (the tracker
/// also drops an expired entry when a lookup meets it).
pub const CT_SWEEP_ENTRIES: usize = 1 << 18;

/// A PMD whose heartbeat has not moved for this long is reported as stalled.
pub const STALL: Duration = Duration::from_secs(3);

/// Runs the housekeeping until the runtime stops.
pub async fn run(ctl: Arc<Control>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut auto = AutoState::default();
    let mut last_query: Option<Instant> = None;
    loop {
        tick.tick().await;
        if let Some(interval) = ctl.switch.mcast.querier {
            if last_query.is_none_or(|t| t.elapsed() >= interval) {
                last_query = Some(Instant::now());
                ctl.switch.mcast.request_queries();
                ctl.switch.wakers.wake_all();
            }
        }
        ctl.switch.fdb.flush_pending();
        close_faulted(&ctl);
        report_memless(&ctl);
        let aged = ctl.switch.fdb.age();
        if aged > 0 {
            debug!(aged, "FDB entries aged out");
        }
        if !ctl.switch.conntrack.is_empty() {
            let now = crate::datapath::lflow::ct::now_ms();
            let s = ctl.switch.conntrack.sweep(now, CT_SWEEP_ENTRIES);
            if s.expired > 0 {
                debug!(expired = s.expired, "connections expired");
            }
        }
        let aged = ctl.switch.mcast.age(Instant::now());
        if aged > 0 {
            debug!(aged, "multicast memberships or router ports aged out");
        }
        let _ = ctl.health();
        if ctl.switch.config().pmd_auto_rebalance && auto.due() {
            auto_rebalance(&ctl, &mut auto).await;
        }
    }
}

/// Closes the vhost-user connections whose guest memory faulted under the switch
/// (`ports::vhost::fault`).
fn close_faulted(ctl: &Control) {
    if !crate::ports::vhost::fault::take_faulted() {
        return;
    }
    for tp in ctl.switch.topo().iter() {
        if let crate::ports::PortKind::Vhost(v) = &tp.port.kind {
            v.close_if_faulted(&tp.port.name);
        }
    }
}

/// Names the vhost-user connections that negotiated but shared no guest memory
/// ([`crate::ports::vhost::device::Connection::report_missing_memory`]).
fn report_memless(ctl: &Control) {
    for tp in ctl.switch.topo().iter() {
        if let Some(c) = tp.port.vhost().and_then(|v| v.conn.load_full()) {
            c.report_missing_memory(&tp.port.name, false);
        }
    }
}

impl Control {
    /// Whether every PMD thread runs and has made progress within [`STALL`]; else
    /// which does not.
    ///
    /// # Errors
    /// A message naming the PMD that stopped or stalled.
    pub fn health(&self) -> Result<(), String> {
        let now = Instant::now();
        let mut beats = self.beats.lock().unwrap_or_else(|e| e.into_inner());
        beats.resize(self.switch.pmds.len(), (u64::MAX, now));
        for (m, b) in self.switch.pmds.iter().zip(beats.iter_mut()) {
            if !m.alive.load(std::sync::atomic::Ordering::Acquire) {
                return Err(format!("pmd{} is not running", m.index));
            }
            let hb = m.heartbeat.load(std::sync::atomic::Ordering::Relaxed);
            if hb != b.0 {
                *b = (hb, now);
            } else if now.duration_since(b.1) > STALL {
                return Err(format!(
                    "pmd{} has made no progress for {} s",
                    m.index,
                    now.duration_since(b.1).as_secs()
                ));
            }
        }
        Ok(())
    }
}

/// The automatic rebalance's measurements between intervals.
#[derive(Default)]
struct AutoState {
    last_check: Option<Instant>,
    /// Each PMD's busy and idle cycles at the last check.
    cycles: Vec<(u64, u64)>,
    overloaded: u32,
    last_rebalance: Option<Instant>,
}

impl AutoState {
    fn due(&mut self) -> bool {
        let now = Instant::now();
        match self.last_check {
            Some(t) if now.duration_since(t) < AUTO_INTERVAL => false,
            _ => {
                self.last_check = Some(now);
                true
            }
        }
    }
}

async fn auto_rebalance(ctl: &Arc<Control>, st: &mut AutoState) {
    let now: Vec<(u64, u64)> = ctl
        .switch
        .pmds
        .iter()
        .map(|m| (m.counters.busy_cycles.get(), m.counters.idle_cycles.get()))
        .collect();
    let busiest = now
        .iter()
        .zip(st.cycles.iter().chain(std::iter::repeat(&(0, 0))))
        .map(|(n, o)| {
            let (b, i) = (n.0.saturating_sub(o.0), n.1.saturating_sub(o.1));
            if b + i == 0 {
                0.0
            } else {
                100.0 * b as f64 / (b + i) as f64
            }
        })
        .fold(0.0, f64::max);
    st.cycles = now;
    if ctl.switch.pmds.len() < 2 {
        return;
    }
    st.overloaded = if busiest >= AUTO_LOAD_PERCENT {
        st.overloaded + 1
    } else {
        0
    };
    let spaced = st
        .last_rebalance
        .is_none_or(|t| t.elapsed() >= AUTO_MIN_SPACING);
    if st.overloaded < AUTO_INTERVALS || !spaced {
        return;
    }
    let _g = ctl.ops.lock().await;
    let (before, after) = ctl.rebalance_gain();
    if after <= before * (1.0 - AUTO_IMPROVEMENT_PERCENT / 100.0) {
        let r = ctl.rebalance_locked();
        info!(
            busiest_percent = busiest,
            moved = r.moved,
            before_cycles = before,
            after_cycles = after,
            "automatic rebalance of rx queues"
        );
        st.last_rebalance = Some(Instant::now());
        st.overloaded = 0;
    } else {
        debug!(before, after, "automatic rebalance would not help enough");
    }
}
