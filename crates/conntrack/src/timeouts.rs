//! Per-state timeouts, with Open vSwitch's userspace defaults
//! (`lib/conntrack-tp.c` `ct_dpif_netdev_tp_def`, in seconds).
//!
//! Each protocol update picks one [`Timeout`] (OVS's `CT_TM_*` mapped to
//! the `ct-dpif` timeout-policy attribute it reads) and the connection
//! expires that many seconds after the packet. A changed timeout applies
//! from each connection's next update on.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Which timeout a connection's state uses. The names are the timeout
/// policy attributes of Open vSwitch (`ovs-vsctl add-zone-tp … tcp_syn_sent=…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum Timeout {
    /// TCP: only the opener's SYN seen (`CT_TM_TCP_FIRST_PACKET`).
    TcpSynSent,
    /// TCP: a peer not yet established (`CT_TM_TCP_OPENING`).
    TcpSynRecv,
    /// TCP: both peers established.
    TcpEstablished,
    /// TCP: one peer closing (`CT_TM_TCP_CLOSING`).
    TcpFinWait,
    /// TCP: both peers closing (`CT_TM_TCP_FIN_WAIT`).
    TcpTimeWait,
    /// TCP: both FINs acknowledged, or reset (`CT_TM_TCP_CLOSED`).
    TcpClose,
    /// UDP: one packet seen.
    UdpFirst,
    /// UDP: several packets, one direction.
    UdpSingle,
    /// UDP: both directions.
    UdpMultiple,
    /// ICMP/ICMPv6 query: the request seen.
    IcmpFirst,
    /// ICMP/ICMPv6 query: the reply seen.
    IcmpReply,
    /// Other protocols: one packet seen.
    OtherFirst,
    /// Other protocols: several packets, one direction.
    OtherSingle,
    /// Other protocols: both directions.
    OtherMultiple,
}

impl Timeout {
    /// Number of timeouts.
    pub const COUNT: usize = 14;
}

/// Timeouts in seconds, one per [`Timeout`]. `Default` is Open vSwitch's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct Timeouts {
    /// 30 s.
    pub tcp_syn_sent: u32,
    /// 30 s.
    pub tcp_syn_recv: u32,
    /// 86 400 s (24 h).
    pub tcp_established: u32,
    /// 900 s.
    pub tcp_fin_wait: u32,
    /// 45 s.
    pub tcp_time_wait: u32,
    /// 30 s.
    pub tcp_close: u32,
    /// 60 s.
    pub udp_first: u32,
    /// 60 s.
    pub udp_single: u32,
    /// 30 s.
    pub udp_multiple: u32,
    /// 60 s.
    pub icmp_first: u32,
    /// 30 s.
    pub icmp_reply: u32,
    /// 60 s (OVS reads `udp_first` for other protocols).
    pub other_first: u32,
    /// 60 s.
    pub other_single: u32,
    /// 30 s.
    pub other_multiple: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            tcp_syn_sent: 30,
            tcp_syn_recv: 30,
            tcp_established: 24 * 60 * 60,
            tcp_fin_wait: 15 * 60,
            tcp_time_wait: 45,
            tcp_close: 30,
            udp_first: 60,
            udp_single: 60,
            udp_multiple: 30,
            icmp_first: 60,
            icmp_reply: 30,
            other_first: 60,
            other_single: 60,
            other_multiple: 30,
        }
    }
}

impl Timeouts {
    /// Seconds for `t`.
    pub fn get(&self, t: Timeout) -> u32 {
        self.as_array()[t as usize]
    }

    fn as_array(&self) -> [u32; Timeout::COUNT] {
        [
            self.tcp_syn_sent,
            self.tcp_syn_recv,
            self.tcp_established,
            self.tcp_fin_wait,
            self.tcp_time_wait,
            self.tcp_close,
            self.udp_first,
            self.udp_single,
            self.udp_multiple,
            self.icmp_first,
            self.icmp_reply,
            self.other_first,
            self.other_single,
            self.other_multiple,
        ]
    }

    fn from_array(a: [u32; Timeout::COUNT]) -> Timeouts {
        Timeouts {
            tcp_syn_sent: a[0],
            tcp_syn_recv: a[1],
            tcp_established: a[2],
            tcp_fin_wait: a[3],
            tcp_time_wait: a[4],
            tcp_close: a[5],
            udp_first: a[6],
            udp_single: a[7],
            udp_multiple: a[8],
            icmp_first: a[9],
            icmp_reply: a[10],
            other_first: a[11],
            other_single: a[12],
            other_multiple: a[13],
        }
    }
}

/// The live timeouts, readable from every PMD without a lock.
#[derive(Debug)]
pub(crate) struct LiveTimeouts([AtomicU32; Timeout::COUNT]);

impl LiveTimeouts {
    pub fn new(t: &Timeouts) -> LiveTimeouts {
        LiveTimeouts(t.as_array().map(AtomicU32::new))
    }

    pub fn set(&self, t: &Timeouts) {
        for (slot, v) in self.0.iter().zip(t.as_array()) {
            slot.store(v, Relaxed);
        }
    }

    pub fn get(&self) -> Timeouts {
        Timeouts::from_array(core::array::from_fn(|i| self.0[i].load(Relaxed)))
    }

    /// Expiry time in ms for a packet at `now_ms` in state `t`.
    #[inline]
    pub fn expiry(&self, t: Timeout, now_ms: u64) -> u64 {
        now_ms.saturating_add(u64::from(self.0[t as usize].load(Relaxed)) * 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_open_vswitch_userspace_ones() {
        let t = Timeouts::default();
        assert_eq!(t.get(Timeout::TcpSynSent), 30);
        assert_eq!(t.get(Timeout::TcpEstablished), 86_400);
        assert_eq!(t.get(Timeout::TcpFinWait), 900);
        assert_eq!(t.get(Timeout::TcpTimeWait), 45);
        assert_eq!(t.get(Timeout::UdpFirst), 60);
        assert_eq!(t.get(Timeout::UdpMultiple), 30);
        assert_eq!(t.get(Timeout::IcmpFirst), 60);
        assert_eq!(t.get(Timeout::IcmpReply), 30);
        assert_eq!(Timeouts::from_array(t.as_array()), t);
    }
}
