//! One connection as the table stores it (96 bytes), and the protocol
//! state machines other than TCP's: UDP and other protocols (Open vSwitch's
//! `conntrack-other.c`) and ICMP queries (`conntrack-icmp.c`).

use crate::key::Key;
use crate::packet::{Packet, L4};
use crate::tcp::{self, Tcp, Update};
use crate::timeouts::{LiveTimeouts, Timeout};

/// State of a UDP or other-protocol connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum MultiState {
    /// One packet seen.
    #[default]
    First,
    /// More packets, original direction only.
    Multiple,
    /// Both directions seen.
    Bidir,
}

/// State of an ICMP query connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum IcmpState {
    /// Request(s) seen.
    #[default]
    First,
    /// A reply seen.
    Reply,
}

/// Protocol state, per protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum L4State {
    Tcp(Tcp),
    Udp(MultiState),
    Icmp(IcmpState),
    Other(MultiState),
}

/// A connection: its canonical key, which way is original, protocol state,
/// mark, label and expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conn {
    pub key: Key,
    /// The original direction's sender is the key's destination endpoint.
    pub flipped: bool,
    /// The connection has a translation (its `NatInfo` beside it in the
    /// table; its alias, if any, a slot in the alias key's shard).
    pub nat: bool,
    pub l4: L4State,
    pub mark: u32,
    /// `ct_label`, low and high 64 bits (kept 8-aligned: a `u128` field
    /// would pad the entry to 112 bytes).
    label: [u64; 2],
    /// Expiry, in the caller's milliseconds.
    pub expires: u64,
}

impl crate::table::Entry for Conn {
    fn key(&self) -> &Key {
        &self.key
    }
}

impl Conn {
    /// A blank connection for tests to fill in.
    #[cfg(test)]
    pub const BLANK: Conn = Conn {
        key: Key::BLANK,
        flipped: false,
        nat: false,
        l4: L4State::Other(MultiState::First),
        mark: 0,
        label: [0; 2],
        expires: 0,
    };

    /// The connection `pkt` (a valid opener) creates.
    pub fn new(pkt: &Packet, key: Key, flipped: bool, t: &LiveTimeouts, now_ms: u64) -> Conn {
        let (l4, timeout) = match &pkt.l4 {
            L4::Tcp(seg) => {
                let (c, t) = Tcp::new(seg);
                (L4State::Tcp(c), t)
            }
            L4::Udp { .. } => (L4State::Udp(MultiState::First), Timeout::UdpFirst),
            L4::Icmp(_) => (L4State::Icmp(IcmpState::First), Timeout::IcmpFirst),
            L4::Other { .. } => (L4State::Other(MultiState::First), Timeout::OtherFirst),
        };
        Conn {
            key,
            flipped,
            nat: false,
            l4,
            mark: 0,
            label: [0; 2],
            expires: t.expiry(timeout, now_ms),
        }
    }

    pub fn label(&self) -> u128 {
        u128::from(self.label[0]) | u128::from(self.label[1]) << 64
    }

    pub fn set_label(&mut self, v: u128) {
        self.label = [v as u64, (v >> 64) as u64];
    }

    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires
    }

    /// Whether a packet's [`update`](Self::update) done again at the same time by
    /// another packet of the same lookup and direction changes nothing and answers
    /// the same: every state but TCP's, whose window moves with each segment (UDP,
    /// ICMP and other protocols reach their state at the first packet and stay).
    pub fn idempotent(&self) -> bool {
        !matches!(self.l4, L4State::Tcp(_))
    }

    /// Runs the protocol state machine for a packet of this connection.
    pub fn update(
        &mut self,
        pkt: &Packet,
        reply: bool,
        liberal: bool,
        t: &LiveTimeouts,
        now_ms: u64,
    ) -> Update {
        let (u, timeout) = match (&mut self.l4, &pkt.l4) {
            (L4State::Tcp(c), L4::Tcp(seg)) => c.update(seg, reply, liberal),
            (L4State::Udp(s), _) => {
                let (u, m) = multi(s, reply);
                (
                    u,
                    Some([Timeout::UdpFirst, Timeout::UdpSingle, Timeout::UdpMultiple][m]),
                )
            }
            (L4State::Other(s), _) => {
                let (u, m) = multi(s, reply);
                (
                    u,
                    Some(
                        [
                            Timeout::OtherFirst,
                            Timeout::OtherSingle,
                            Timeout::OtherMultiple,
                        ][m],
                    ),
                )
            }
            (L4State::Icmp(s), _) => icmp(s, reply),
            // A key holds the protocol, so a TCP key only meets TCP packets.
            (L4State::Tcp(_), _) => (Update::Valid, None),
        };
        if let Some(timeout) = timeout {
            self.expires = t.expiry(timeout, now_ms);
        }
        u
    }
}

/// Open vSwitch's `other_conn_update`: `ct.new` until the reply direction
/// is seen, then `ct.est`. Returns the verdict and the state's index.
fn multi(s: &mut MultiState, reply: bool) -> (Update, usize) {
    if reply {
        *s = MultiState::Bidir;
    } else if *s == MultiState::First {
        *s = MultiState::Multiple;
    }
    match s {
        MultiState::Bidir => (Update::Valid, 2),
        MultiState::Multiple => (Update::ValidNew, 1),
        MultiState::First => (Update::ValidNew, 0),
    }
}

/// Open vSwitch's `icmp_conn_update`: requests are `ct.new` until a reply
/// is seen, then everything is `ct.est`.
fn icmp(s: &mut IcmpState, reply: bool) -> (Update, Option<Timeout>) {
    if reply {
        *s = IcmpState::Reply;
    }
    match s {
        IcmpState::Reply => (Update::Valid, Some(Timeout::IcmpReply)),
        IcmpState::First => (Update::ValidNew, Some(Timeout::IcmpFirst)),
    }
}

/// Whether a packet of no connection may open one (`valid_new`).
pub(crate) fn may_open(
    pkt: &Packet,
    icmp_opener: bool,
    tcp_loose: bool,
) -> Result<(), crate::InvalidReason> {
    match &pkt.l4 {
        L4::Tcp(seg) => tcp::valid_new(seg, tcp_loose),
        L4::Icmp(_) if !icmp_opener => Err(crate::InvalidReason::NotOpener),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_96_bytes() {
        assert_eq!(core::mem::size_of::<Key>(), 42);
        assert_eq!(core::mem::size_of::<Tcp>(), 24);
        // The protocol tag, `flipped` and `nat` fit in padding.
        assert_eq!(core::mem::size_of::<Conn>(), 96);
    }

    #[test]
    fn udp_is_new_until_the_reply() {
        let mut s = MultiState::First;
        assert_eq!(multi(&mut s, false).0, Update::ValidNew);
        assert_eq!(s, MultiState::Multiple);
        assert_eq!(multi(&mut s, true).0, Update::Valid);
        assert_eq!(multi(&mut s, false).0, Update::Valid);
        assert_eq!(s, MultiState::Bidir);
    }

    #[test]
    fn icmp_is_new_until_the_reply() {
        let mut s = IcmpState::First;
        assert_eq!(icmp(&mut s, false).0, Update::ValidNew);
        assert_eq!(
            icmp(&mut s, true),
            (Update::Valid, Some(Timeout::IcmpReply))
        );
        assert_eq!(icmp(&mut s, false).0, Update::Valid);
    }
}
