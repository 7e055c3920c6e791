//! TCP window tracking: Guido van Rooij's "Real Stateful TCP Packet
//! Filtering in IP Filter", as OpenBSD pf and Open vSwitch
//! (`lib/conntrack-tcp.c`) implement it, with RFC 7323 window scaling.
//!
//! Each peer keeps the highest sequence number it sent (`seqlo`), the
//! highest the other end allowed it to send (`seqhi`: acknowledged plus
//! window), its largest unscaled window and its window scale. A segment is
//! valid when its data ends within what the receiver allowed, starts no
//! more than one window back, and acknowledges neither far behind nor
//! beyond what the other end sent (`MAX_ACK_WINDOW`). Resets must carry the
//! exact (or ±1) expected sequence number. The states and their order are
//! Open vSwitch's `CT_DPIF_TCPS_*`; only the ones the algorithm moves
//! through are used.

use crate::packet::{TcpFlags, TcpSegment};
use crate::timeouts::Timeout;
use crate::verdict::InvalidReason;

/// A TCP peer's state (Open vSwitch's `ct_dpif_tcp_state`, same order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum TcpState {
    /// Nothing sent yet (or the connection is being reopened).
    #[default]
    Closed = 0,
    /// Not used by the tracker (kept for OVS's numbering).
    Listen,
    /// Sent a SYN (or its first segment).
    SynSent,
    /// Not used by the tracker (kept for OVS's numbering).
    SynRecv,
    /// Its SYN was acknowledged.
    Established,
    /// Not used by the tracker.
    CloseWait,
    /// Not used by the tracker.
    FinWait1,
    /// Sent a FIN.
    Closing,
    /// Not used by the tracker.
    LastAck,
    /// Its FIN was acknowledged.
    FinWait2,
    /// Reset, or closed in both directions long enough ago.
    TimeWait,
}

/// Largest shift of a Window Scale option (RFC 7323 §2.3).
const MAX_WSCALE: u8 = 14;
/// `wscale` bit: the peer sent a Window Scale option.
const WSCALE_SEEN: u8 = 0x80;
/// `wscale` bit: picked up mid-stream, scale unknown (loose mode).
const WSCALE_UNKNOWN: u8 = 0x40;
const WSCALE_MASK: u8 = 0x0f;
/// How far an ACK may lag or lead: one maximal unscaled window plus a
/// fudge of 1500 bytes (pf's `MAXACKWINDOW`).
const MAX_ACK_WINDOW: u32 = 0xffff + 1500;

/// One direction's sequence space. 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Peer {
    /// Highest sequence number sent (end of its data).
    seqlo: u32,
    /// Highest sequence number the other end allows it to send.
    seqhi: u32,
    /// Largest window it advertised, unscaled.
    max_win: u16,
    /// Window scale shift | `WSCALE_SEEN` | `WSCALE_UNKNOWN`.
    wscale: u8,
    pub state: TcpState,
}

/// Both peers: `[original sender, reply sender]`. 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tcp {
    pub peers: [Peer; 2],
}

/// What a segment did to an existing connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Update {
    /// Valid; `ct.est`.
    Valid,
    /// Valid, still opening (a SYN again); `ct.new`.
    ValidNew,
    /// A SYN on a connection closed in both directions: the old
    /// connection ends and this SYN may open a new one.
    Reopen,
    /// `ct.inv`.
    Invalid(InvalidReason),
}

fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn seq_geq(a: u32, b: u32) -> bool {
    !seq_lt(a, b)
}

fn seq_gt(a: u32, b: u32) -> bool {
    seq_lt(b, a)
}

/// pf's flag sanity check: SYN excludes RST and FIN; without SYN there
/// must be ACK or RST; FIN, PSH and URG need ACK.
pub(crate) fn invalid_flags(f: TcpFlags) -> bool {
    if f.contains(TcpFlags::SYN) {
        if f.intersects(TcpFlags::RST | TcpFlags::FIN) {
            return true;
        }
    } else if !f.intersects(TcpFlags::ACK | TcpFlags::RST) {
        return true;
    }
    !f.contains(TcpFlags::ACK) && f.intersects(TcpFlags::FIN | TcpFlags::PSH | TcpFlags::URG)
}

/// Whether a segment of no connection may open one: a SYN without ACK,
/// or (`loose`, Open vSwitch's and Linux's default pickup) any valid
/// segment but SYN|ACK.
pub(crate) fn valid_new(seg: &TcpSegment, loose: bool) -> Result<(), InvalidReason> {
    if invalid_flags(seg.flags) {
        return Err(InvalidReason::TcpFlags);
    }
    let syn = seg.flags.contains(TcpFlags::SYN);
    let ack = seg.flags.contains(TcpFlags::ACK);
    match (syn, ack) {
        (true, false) => Ok(()),
        (false, _) if loose => Ok(()),
        _ => Err(InvalidReason::NotOpener),
    }
}

fn wscale_of(seg: &TcpSegment) -> u8 {
    seg.wscale.map_or(0, |s| s.min(MAX_WSCALE) | WSCALE_SEEN)
}

fn div_round_up(win: u32, shift: u8) -> u32 {
    win.div_ceil(1 << shift)
}

impl Tcp {
    /// The connection a valid opener creates, and its first timeout.
    pub fn new(seg: &TcpSegment) -> (Tcp, Timeout) {
        let mut src = Peer {
            seqlo: seg.seq,
            seqhi: seg.seq.wrapping_add(seg.payload_len).wrapping_add(1),
            state: TcpState::SynSent,
            ..Peer::default()
        };
        let mut dst = Peer {
            seqhi: 1,
            max_win: 1,
            ..Peer::default()
        };
        if seg.flags.contains(TcpFlags::SYN) {
            src.seqhi = src.seqhi.wrapping_add(1);
            src.wscale = wscale_of(seg);
        } else {
            src.wscale = WSCALE_UNKNOWN;
            dst.wscale = WSCALE_UNKNOWN;
        }
        let mut win = u32::from(seg.window.max(1));
        if src.wscale & WSCALE_MASK != 0 {
            win = div_round_up(win, src.wscale & WSCALE_MASK);
        }
        src.max_win = win as u16;
        if seg.flags.contains(TcpFlags::FIN) {
            src.seqhi = src.seqhi.wrapping_add(1);
        }
        (Tcp { peers: [src, dst] }, Timeout::TcpSynSent)
    }

    /// Tracks one segment; `reply` is its direction. Returns the verdict
    /// and, when the connection's expiry moves, its new timeout.
    /// `liberal` skips the window check (OVS's `tcp_seq_chk=false`).
    pub fn update(
        &mut self,
        seg: &TcpSegment,
        reply: bool,
        liberal: bool,
    ) -> (Update, Option<Timeout>) {
        let f = seg.flags;
        if invalid_flags(f) {
            return (Update::Invalid(InvalidReason::TcpFlags), None);
        }
        let (s, d) = if reply { (1, 0) } else { (0, 1) };
        if f.contains(TcpFlags::SYN) && !f.contains(TcpFlags::ACK) {
            let [src, dst] = [self.peers[s], self.peers[d]];
            if src.state >= TcpState::FinWait2 && dst.state >= TcpState::FinWait2 {
                self.peers[s].state = TcpState::Closed;
                self.peers[d].state = TcpState::Closed;
                return (Update::Reopen, None);
            }
            if src.state <= TcpState::SynSent {
                self.peers[s].state = TcpState::SynSent;
                return (Update::ValidNew, Some(Timeout::TcpSynSent));
            }
        }
        let [src, dst] = self.pair(reply);
        track(src, dst, seg, liberal)
    }

    /// `[sender, receiver]` of a segment.
    fn pair(&mut self, reply: bool) -> [&mut Peer; 2] {
        let [p0, p1] = &mut self.peers;
        if !reply {
            [p0, p1]
        } else {
            [p1, p0]
        }
    }
}

/// The scale shifts to apply to the sender's and receiver's windows.
fn shifts(src: &Peer, dst: &Peer, syn: bool) -> (u8, u8) {
    if syn {
        (0, 0)
    } else if src.wscale & dst.wscale & WSCALE_SEEN != 0 {
        (src.wscale & WSCALE_MASK, dst.wscale & WSCALE_MASK)
    } else if src.wscale & dst.wscale & WSCALE_UNKNOWN != 0 {
        (MAX_WSCALE, MAX_WSCALE)
    } else {
        (0, 0)
    }
}

/// Sequence space a segment occupies: `[seq, end)`, SYN and FIN counting one.
fn seg_end(seg: &TcpSegment) -> u32 {
    let mut end = seg.seq.wrapping_add(seg.payload_len);
    if seg.flags.contains(TcpFlags::SYN) {
        end = end.wrapping_add(1);
    }
    if seg.flags.contains(TcpFlags::FIN) {
        end = end.wrapping_add(1);
    }
    end
}

/// What the window check reads of a segment, after the sender's first
/// segment has set its side up.
struct View {
    /// Sender's and receiver's window scale shifts.
    sws: u8,
    dws: u8,
    /// The window, unscaled (the first SYN|ACK's: already divided).
    win: u32,
    /// Whether the ACK's distance to what the receiver sent is checked.
    check_ackskew: bool,
}

/// The first segment from a peer (usually the SYN|ACK): sets up its
/// sequence space and window scale. pf's "may need to slide the window"
/// case: a connection picked up late skips the ACK check once.
fn first_segment(src: &mut Peer, dst: &mut Peer, seg: &TcpSegment, end: u32, mut v: View) -> View {
    if seg.flags.contains(TcpFlags::SYN) && dst.wscale & WSCALE_SEEN != 0 {
        src.wscale = wscale_of(seg);
        if src.wscale & WSCALE_SEEN != 0 {
            v.sws = src.wscale & WSCALE_MASK;
            v.win = div_round_up(v.win, v.sws);
            v.dws = dst.wscale & WSCALE_MASK;
        } else {
            // The other end offered scaling, this one did not: neither
            // scales (RFC 7323 §2.2). Undo the other's.
            let unscaled = u32::from(dst.max_win) << (dst.wscale & WSCALE_MASK);
            dst.max_win = unscaled.min(0xffff) as u16;
            dst.wscale = 0;
        }
    }
    src.seqlo = seg.seq;
    src.state = TcpState::SynSent;
    let reach = end.wrapping_add((u32::from(dst.max_win) << v.dws).max(1));
    if src.seqhi == 1 || seq_geq(reach, src.seqhi) {
        src.seqhi = reach;
        v.check_ackskew = false;
    }
    if v.win > u32::from(src.max_win) {
        src.max_win = v.win.min(0xffff) as u16;
    }
    v
}

/// The window check and state moves for a segment from `src` to `dst`.
fn track(
    src: &mut Peer,
    dst: &mut Peer,
    seg: &TcpSegment,
    liberal: bool,
) -> (Update, Option<Timeout>) {
    let f = seg.flags;
    let (sws, dws) = shifts(src, dst, f.contains(TcpFlags::SYN));
    let mut v = View {
        sws,
        dws,
        win: u32::from(seg.window),
        check_ackskew: true,
    };
    let mut end = seg_end(seg);
    if src.state < TcpState::SynSent {
        v = first_segment(src, dst, seg, end, v);
    }
    let ack = if !f.contains(TcpFlags::ACK)
        || (seg.ack == 0 && f.contains(TcpFlags::ACK | TcpFlags::RST))
    {
        // No ACK to check (or a broken stack's RST|ACK with ack 0).
        dst.seqlo
    } else {
        seg.ack
    };
    let mut seq = seg.seq;
    if seq == end {
        // No data: ease the sequence check.
        seq = src.seqlo;
        end = seq;
    }
    let ackskew = if v.check_ackskew {
        dst.seqlo.wrapping_sub(ack) as i32 as i64
    } else {
        0
    };
    let back = u32::from(dst.max_win) << v.dws;
    let rst_ok = !f.contains(TcpFlags::RST)
        || seg.seq == src.seqlo
        || seg.seq == src.seqlo.wrapping_add(1)
        || seg.seq.wrapping_add(1) == src.seqlo;
    let in_window = seq_geq(src.seqhi, end)
        && seq_geq(seq, src.seqlo.wrapping_sub(back))
        && ackskew >= -i64::from(MAX_ACK_WINDOW)
        && ackskew <= i64::from(MAX_ACK_WINDOW) << v.sws
        && rst_ok;

    if in_window || liberal {
        advance(src, dst, v.win, ack, end, v.sws);
        move_states(src, dst, f);
        (Update::Valid, Some(timeout_of(src.state, dst.state)))
    } else if (dst.state < TcpState::SynSent
        || dst.state >= TcpState::FinWait2
        || src.state >= TcpState::FinWait2)
        && seq_geq(src.seqhi.wrapping_add(MAX_ACK_WINDOW), end)
        && seq_geq(seq, src.seqlo.wrapping_sub(MAX_ACK_WINDOW))
    {
        // Shotgunned SYNs, a connection picked up late, stragglers after
        // close: accepted within a window either way, without moving the
        // expiry (a flood must not keep the entry alive).
        advance(src, dst, v.win, ack, end, v.sws);
        if f.contains(TcpFlags::FIN) && src.state < TcpState::Closing {
            src.state = TcpState::Closing;
        }
        if f.contains(TcpFlags::RST) {
            src.state = TcpState::TimeWait;
            dst.state = TcpState::TimeWait;
        }
        (Update::Valid, None)
    } else {
        (Update::Invalid(InvalidReason::TcpWindow), None)
    }
}

/// Records what a valid segment tells: the sender's window and sequence,
/// and how far the receiver may now send.
fn advance(src: &mut Peer, dst: &mut Peer, win: u32, ack: u32, end: u32, sws: u8) {
    if u32::from(src.max_win) < win {
        src.max_win = win.min(0xffff) as u16;
    }
    if seq_gt(end, src.seqlo) {
        src.seqlo = end;
    }
    let scaled = win << sws;
    if seq_geq(ack.wrapping_add(scaled), dst.seqhi) {
        dst.seqhi = ack.wrapping_add(scaled.max(1));
    }
}

fn move_states(src: &mut Peer, dst: &mut Peer, f: TcpFlags) {
    if f.contains(TcpFlags::SYN) && src.state < TcpState::SynSent {
        src.state = TcpState::SynSent;
    }
    if f.contains(TcpFlags::FIN) && src.state < TcpState::Closing {
        src.state = TcpState::Closing;
    }
    if f.contains(TcpFlags::ACK) {
        if dst.state == TcpState::SynSent {
            dst.state = TcpState::Established;
        } else if dst.state == TcpState::Closing {
            dst.state = TcpState::FinWait2;
        }
    }
    if f.contains(TcpFlags::RST) {
        src.state = TcpState::TimeWait;
        dst.state = TcpState::TimeWait;
    }
}

/// The timeout of a pair of peer states (OVS's `CT_TM_TCP_*` choice).
fn timeout_of(a: TcpState, b: TcpState) -> Timeout {
    use TcpState::*;
    if a >= FinWait2 && b >= FinWait2 {
        Timeout::TcpClose
    } else if a >= Closing && b >= Closing {
        Timeout::TcpTimeWait
    } else if a < Established || b < Established {
        Timeout::TcpSynRecv
    } else if a >= Closing || b >= Closing {
        Timeout::TcpFinWait
    } else {
        Timeout::TcpEstablished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(flags: TcpFlags, seq: u32, ack: u32, window: u16, len: u32) -> TcpSegment {
        TcpSegment {
            src_port: 1,
            dst_port: 2,
            flags,
            seq,
            ack,
            window,
            wscale: None,
            payload_len: len,
        }
    }
    const SYN: TcpFlags = TcpFlags::SYN;
    const ACK: TcpFlags = TcpFlags::ACK;

    #[test]
    fn sequence_compare_wraps() {
        assert!(seq_lt(u32::MAX, 0));
        assert!(seq_gt(5, u32::MAX - 5));
        assert!(seq_geq(7, 7));
    }

    #[test]
    fn flag_sanity_is_pfs() {
        assert!(!invalid_flags(SYN));
        assert!(!invalid_flags(SYN | ACK));
        assert!(invalid_flags(SYN | TcpFlags::RST));
        assert!(invalid_flags(SYN | TcpFlags::FIN));
        assert!(invalid_flags(TcpFlags(0)));
        assert!(invalid_flags(TcpFlags::FIN));
        assert!(!invalid_flags(TcpFlags::RST));
        assert!(invalid_flags(TcpFlags::RST | TcpFlags::PSH));
        assert!(!invalid_flags(TcpFlags::FIN | ACK));
    }

    #[test]
    fn handshake_establishes_both_peers() {
        let (mut c, t) = Tcp::new(&seg(SYN, 100, 0, 65535, 0));
        assert_eq!(t, Timeout::TcpSynSent);
        let (u, t) = c.update(&seg(SYN | ACK, 5000, 101, 65535, 0), true, false);
        assert_eq!(u, Update::Valid);
        assert_eq!(t, Some(Timeout::TcpSynRecv));
        assert_eq!(c.peers[0].state, TcpState::Established);
        let (u, t) = c.update(&seg(ACK, 101, 5001, 65535, 0), false, false);
        assert_eq!((u, t), (Update::Valid, Some(Timeout::TcpEstablished)));
        assert_eq!(c.peers[1].state, TcpState::Established);
    }

    #[test]
    fn data_beyond_the_window_is_invalid() {
        let (mut c, _) = Tcp::new(&seg(SYN, 100, 0, 1000, 0));
        c.update(&seg(SYN | ACK, 5000, 101, 1000, 0), true, false);
        c.update(&seg(ACK, 101, 5001, 1000, 0), false, false);
        // The responder allowed 1000 bytes from 101.
        let (u, _) = c.update(&seg(ACK, 101, 5001, 1000, 1000), false, false);
        assert_eq!(u, Update::Valid);
        let (u, _) = c.update(&seg(ACK, 1101, 5001, 1000, 100_000), false, false);
        assert_eq!(u, Update::Invalid(InvalidReason::TcpWindow));
        // Liberal mode lets it through.
        let (u, _) = c.update(&seg(ACK, 1101, 5001, 1000, 100_000), false, true);
        assert_eq!(u, Update::Valid);
    }

    #[test]
    fn window_scale_applies_after_both_syns_offer_it() {
        let mut s = seg(SYN, 0, 0, 65535, 0);
        s.wscale = Some(7);
        let (mut c, _) = Tcp::new(&s);
        let mut sa = seg(SYN | ACK, 1000, 1, 65535, 0);
        sa.wscale = Some(7);
        c.update(&sa, true, false);
        c.update(&seg(ACK, 1, 1001, 512, 0), false, false);
        // Windows in SYNs are never scaled: the responder allowed 65535.
        let big = seg(ACK, 1, 1001, 512, 4_000_000);
        assert_eq!(
            c.update(&big, false, false).0,
            Update::Invalid(InvalidReason::TcpWindow)
        );
        // Its first ACK opens 65535 << 7 bytes: 4 MB in flight is fine.
        assert_eq!(
            c.update(&seg(ACK, 1001, 1, 65535, 0), true, false).0,
            Update::Valid
        );
        assert_eq!(c.update(&big, false, false).0, Update::Valid);
        // Shift counts above 14 are clamped (RFC 7323 §2.3).
        let mut big = seg(SYN, 0, 0, 1, 0);
        big.wscale = Some(200);
        assert_eq!(wscale_of(&big), 14 | WSCALE_SEEN);
    }

    #[test]
    fn rst_needs_the_exact_sequence() {
        let (mut c, _) = Tcp::new(&seg(SYN, 100, 0, 65535, 0));
        c.update(&seg(SYN | ACK, 5000, 101, 65535, 0), true, false);
        c.update(&seg(ACK, 101, 5001, 65535, 0), false, false);
        let (u, _) = c.update(&seg(TcpFlags::RST, 5001 + 30_000, 0, 0, 0), true, false);
        assert_eq!(u, Update::Invalid(InvalidReason::TcpWindow));
        let (u, t) = c.update(&seg(TcpFlags::RST, 5001, 0, 0, 0), true, false);
        assert_eq!((u, t), (Update::Valid, Some(Timeout::TcpClose)));
        assert_eq!(c.peers[0].state, TcpState::TimeWait);
    }
}
