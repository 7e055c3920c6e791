//! What a conntrack step is asked to do ([`CtAction`]) and what it answers
//! ([`CtResult`]): Open vSwitch's `ct()` action and the `ct_state`,
//! `ct_zone`, `ct_mark` and `ct_label` fields it sets.

use core::fmt;
use core::net::IpAddr;

/// `ct_state` bits, with Open vSwitch's values (`lib/packets.h` `CS_*`),
/// so a matcher of OVN's `ct.new`, `ct.est`, … can test them as OVS does.
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CtState(pub u8);

impl CtState {
    /// `ct.new`: the packet opens a connection (or would, without commit).
    pub const NEW: CtState = CtState(1 << 0);
    /// `ct.est`: the packet belongs to a connection that saw both
    /// directions (Open vSwitch's rule: the protocol update was valid).
    pub const EST: CtState = CtState(1 << 1);
    /// `ct.rel`: an ICMP error about a tracked connection.
    pub const REL: CtState = CtState(1 << 2);
    /// `ct.rpl`: the packet goes in the connection's reply direction.
    pub const RPL: CtState = CtState(1 << 3);
    /// `ct.inv`: invalid; see [`CtResult::invalid`] for why.
    pub const INV: CtState = CtState(1 << 4);
    /// `ct.trk`: the packet went through the tracker (always set).
    pub const TRK: CtState = CtState(1 << 5);
    /// `ct.snat`: the step translated the packet of a source-NAT'd
    /// connection (either direction; see [`Nat`]).
    pub const SNAT: CtState = CtState(1 << 6);
    /// `ct.dnat`: the step translated the packet of a destination-NAT'd
    /// connection (either direction).
    pub const DNAT: CtState = CtState(1 << 7);

    const NAMES: [&'static str; 8] = ["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"];

    /// The raw bits.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: CtState) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `snat` or `dnat` is set: the step translated the packet.
    pub fn translated(self) -> bool {
        self.0 & (CtState::SNAT.0 | CtState::DNAT.0) != 0
    }
}

impl core::ops::BitOr for CtState {
    type Output = CtState;
    fn bitor(self, rhs: CtState) -> CtState {
        CtState(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for CtState {
    fn bitor_assign(&mut self, rhs: CtState) {
        self.0 |= rhs.0;
    }
}

/// `trk|est|rpl`, in bit order, as `ovs-dpctl` prints `ct_state`.
impl fmt::Display for CtState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for bit in [5usize, 0, 1, 2, 3, 4, 6, 7] {
            if self.0 & (1 << bit) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(Self::NAMES[bit])?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CtState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CtState({self})")
    }
}

/// A value written under a mask: `new = (old & !mask) | (value & mask)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Masked<T> {
    /// The bits to write.
    pub value: T,
    /// Which bits to write.
    pub mask: T,
}

macro_rules! masked_apply {
    ($t:ty) => {
        impl Masked<$t> {
            /// All bits: `value` replaces the old value.
            pub fn exact(value: $t) -> Self {
                Masked {
                    value,
                    mask: <$t>::MAX,
                }
            }

            /// `old` with the masked bits replaced.
            pub fn apply(self, old: $t) -> $t {
                (old & !self.mask) | (self.value & self.mask)
            }
        }
    };
}
masked_apply!(u32);
masked_apply!(u128);

/// One conntrack step: Open vSwitch's `ct(zone=…[, commit][,
/// exec(set_field:…->ct_mark, …->ct_label)])`, which OVN's `ct_next` and
/// `ct_commit { ct_mark.… = …; ct_label.… = …; }` compile to.
///
/// Build it with [`CtAction::lookup`] or [`CtAction::commit`] and the
/// `with_*` methods; fields can be added without breaking callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CtAction {
    /// The zone: a connection belongs to exactly one.
    pub zone: u16,
    /// Create the connection if the packet may open one, and apply the
    /// mark and label writes. Without it the tracker only answers (and
    /// advances the state of an existing connection, as OVS does).
    pub commit: bool,
    /// `ct_mark` write (only with `commit`).
    pub mark: Option<Masked<u32>>,
    /// `ct_label` write (only with `commit`).
    pub label: Option<Masked<u128>>,
    /// `nat`, `nat(src=…)`, `nat(dst=…)`: translate the packet by its
    /// connection's translation, and set one up when a commit creates the
    /// connection.
    pub nat: Option<Nat>,
}

impl CtAction {
    /// Whether this is a commit that leaves the connection `prev` found
    /// (a lookup that found none makes the commit create one) as it is: its
    /// writes, if any, are what its mark and label already hold. Such a
    /// commit after a lookup in its zone
    /// ([`Conntrack::execute_next`](crate::Conntrack::execute_next)) answers
    /// `prev` and changes nothing.
    pub fn commits_nothing(&self, prev: &CtResult) -> bool {
        self.commit
            && prev.has_conn
            && self.mark.is_none_or(|m| m.apply(prev.mark) == prev.mark)
            && self.label.is_none_or(|l| l.apply(prev.label) == prev.label)
    }

    /// `ct(zone=zone)`: look up, never create (`ct_next`).
    pub fn lookup(zone: u16) -> CtAction {
        CtAction {
            zone,
            commit: false,
            mark: None,
            label: None,
            nat: None,
        }
    }

    /// `ct(commit, zone=zone)`: create if new (`ct_commit`).
    pub fn commit(zone: u16) -> CtAction {
        CtAction {
            commit: true,
            ..CtAction::lookup(zone)
        }
    }

    /// Sets `ct_mark` bits on commit.
    pub fn with_mark(mut self, value: u32, mask: u32) -> CtAction {
        self.mark = Some(Masked { value, mask });
        self
    }

    /// Sets `ct_label` bits on commit.
    pub fn with_label(mut self, value: u128, mask: u128) -> CtAction {
        self.label = Some(Masked { value, mask });
        self
    }

    /// Adds a NAT request: `ct(nat)`, `ct(commit, nat(src=…))`, …
    pub fn with_nat(mut self, nat: Nat) -> CtAction {
        self.nat = Some(nat);
        self
    }
}

/// A NAT request of a `ct()` step: Open vSwitch's `nat`, `nat(src=…)`,
/// `nat(dst=…)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nat {
    /// `ct(nat)`: translate the packet by its connection's translation, if
    /// it has one; sets none up.
    Existing,
    /// `ct(commit, nat(src=…))`: source NAT, set up when the commit creates
    /// the connection.
    Src(NatRange),
    /// `ct(commit, nat(dst=…))`: destination NAT, likewise.
    Dst(NatRange),
}

/// Addresses `min..=max` (one family) and, optionally, ports `lo..=hi` to
/// translate to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatRange {
    /// Lowest address.
    pub min: IpAddr,
    /// Highest address (same family as `min`, not below it).
    pub max: IpAddr,
    /// Ports `(lo, hi)`, inclusive; `None`: keep the packet's port
    /// (source NAT takes another from 1024..=65535 if it collides).
    pub ports: Option<(u16, u16)>,
}

/// Addresses and ports of one direction of a connection (ports: TCP/UDP
/// ports, the ICMP query id in both, 0 for other protocols).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoints {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (ICMP query: the id).
    pub src_port: u16,
    /// Destination port (ICMP query: the id).
    pub dst_port: u16,
}

impl Endpoints {
    /// The same endpoints seen from the other end.
    pub fn reversed(self) -> Endpoints {
        Endpoints {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
        }
    }
}

/// What NAT did for a packet of a NAT'd connection: the second output of
/// [`Conntrack::execute_nat`](crate::Conntrack::execute_nat) and
/// [`Conntrack::execute_next_nat`](crate::Conntrack::execute_next_nat), kept
/// out of [`CtResult`] so that a packet of a connection without NAT neither
/// carries nor copies it (114 bytes). Open vSwitch writes the same into the
/// packet: the rewritten header (`nat_packet`, `un_nat_packet`) and the
/// original tuple in its metadata (`ct_orig_tuple`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatResult {
    /// The packet's addresses and ports after the step (what the caller
    /// writes into the packet; equal to the packet's own unless the step
    /// translated it).
    pub packet: Endpoints,
    /// The connection's original-direction tuple before translation (OVS
    /// `ct_nw_src`, `ct_nw_dst`, `ct_tp_src`, `ct_tp_dst`).
    pub original: Endpoints,
    /// A related ICMP error the step translated: the endpoints its embedded
    /// header must carry, that of a packet of the connection as the error's
    /// receiver sent or saw it (Open vSwitch's `nat_inner_packet`, RFC 5508
    /// §7 / RFC 5382 §6: a NAT translates the embedded packet too). An error
    /// in the reply direction embeds an original-direction packet, which
    /// becomes the original tuple; one in the original direction embeds a
    /// reply, which becomes the translated tuple's reverse. ICMP queries: the
    /// id in both ports.
    pub inner: Option<Endpoints>,
}

/// Why a packet is `ct.inv`. Each reason has its own counter
/// ([`Stats::invalid`](crate::Stats::invalid)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum InvalidReason {
    /// An IP fragment: not reassembled, refused.
    Fragment,
    /// Unparseable, or inconsistent (mixed address families, port 0).
    Malformed,
    /// A checksum did not verify (only when the parser was asked to).
    Checksum,
    /// An ICMP type the tracker does not follow (neither a query nor an
    /// error), or a query with a non-zero code.
    UnsupportedIcmp,
    /// No connection, and the packet may not open one: TCP without SYN
    /// or with SYN|ACK, an ICMP echo reply, …
    NotOpener,
    /// An invalid combination of TCP flags (SYN with RST or FIN, none of
    /// SYN/ACK/RST, FIN/PSH/URG without ACK).
    TcpFlags,
    /// A TCP segment outside the window of its connection.
    TcpWindow,
    /// An ICMP error whose embedded header matches no connection (or was
    /// not sent by the error's destination).
    IcmpUnrelated,
}

impl InvalidReason {
    /// Number of reasons.
    pub const COUNT: usize = 8;
    /// Every reason, in counter order.
    pub const ALL: [InvalidReason; Self::COUNT] = [
        InvalidReason::Fragment,
        InvalidReason::Malformed,
        InvalidReason::Checksum,
        InvalidReason::UnsupportedIcmp,
        InvalidReason::NotOpener,
        InvalidReason::TcpFlags,
        InvalidReason::TcpWindow,
        InvalidReason::IcmpUnrelated,
    ];

    /// The counter index, `0..COUNT`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Snake-case name, for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            InvalidReason::Fragment => "fragment",
            InvalidReason::Malformed => "malformed",
            InvalidReason::Checksum => "checksum",
            InvalidReason::UnsupportedIcmp => "unsupported_icmp",
            InvalidReason::NotOpener => "not_opener",
            InvalidReason::TcpFlags => "tcp_flags",
            InvalidReason::TcpWindow => "tcp_window",
            InvalidReason::IcmpUnrelated => "icmp_unrelated",
        }
    }
}

/// Why a commit created no connection although the packet may open one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Refused {
    /// The table holds its global maximum (`ct_table_full`).
    TableFull,
    /// The zone holds its maximum (`ct_zone_full`).
    ZoneFull,
    /// No free address/port in the range for a new translation (counted as
    /// `nat_exhausted` in [`Stats`](crate::Stats)).
    NatExhausted,
}

/// The answer to one conntrack step: the packet's `ct_state`, `ct_zone`,
/// `ct_mark` and `ct_label` afterwards, and why it is invalid or its commit
/// was refused. `Copy`, 32 bytes (at most 48, checked at compile time): it
/// is returned by value on every step. A NAT'd connection's endpoints are
/// not in it but in a [`NatResult`] the NAT entry points fill
/// ([`Conntrack::execute_nat`](crate::Conntrack::execute_nat)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtResult {
    /// `ct_state`; always has [`CtState::TRK`].
    pub state: CtState,
    /// `ct_zone`: the action's zone.
    pub zone: u16,
    /// `ct_mark` of the connection after the step (0 without one).
    pub mark: u32,
    /// `ct_label` of the connection after the step (0 without one).
    pub label: u128,
    /// Set when `state` has [`CtState::INV`].
    pub invalid: Option<InvalidReason>,
    /// Set when a commit of a `ct.new` packet created nothing (the packet
    /// keeps `trk|new`, as in Open vSwitch).
    pub refused: Option<Refused>,
    /// A connection was found or created (see
    /// [`Conntrack::execute_next`](crate::Conntrack::execute_next)).
    pub(crate) has_conn: bool,
}

/// A hit returns this by value: NAT once made it 136 bytes and a hit twice
/// as slow (the README's performance section).
const _: () = assert!(core::mem::size_of::<CtResult>() <= 48);

impl CtResult {
    pub(crate) fn new(zone: u16, state: CtState) -> CtResult {
        CtResult {
            state: state | CtState::TRK,
            zone,
            mark: 0,
            label: 0,
            invalid: None,
            refused: None,
            has_conn: false,
        }
    }

    /// Not a result: the step runs again (a NAT set-up met a busy shard, an
    /// alias was stale, a SYN reopened its connection). A real result always
    /// has [`CtState::TRK`]. Passed back in place of a result rather than in an
    /// `Option`, so each result is written once where the caller wants it.
    pub(crate) const AGAIN: CtResult = CtResult {
        state: CtState(0),
        zone: 0,
        mark: 0,
        label: 0,
        invalid: None,
        refused: None,
        has_conn: false,
    };

    /// Whether this is [`CtResult::AGAIN`].
    #[inline]
    pub(crate) fn is_again(&self) -> bool {
        self.state.0 == 0
    }

    pub(crate) fn of_invalid(zone: u16, reason: InvalidReason) -> CtResult {
        CtResult {
            invalid: Some(reason),
            ..CtResult::new(zone, CtState::INV)
        }
    }

    /// Whether a connection exists for this packet after the step (found,
    /// or created by the commit).
    pub fn has_connection(&self) -> bool {
        self.has_conn
    }
}
