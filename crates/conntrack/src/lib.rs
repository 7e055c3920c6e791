//! A userspace connection tracker for software switches, with Open
//! vSwitch's `ct()` semantics: what OVN's `ct_next` and `ct_commit` need
//! for stateful ACLs.
//!
//! - [`Conntrack`] holds connections in zones (a `u16`; the same 5-tuple
//!   in two zones is two connections), keyed so that both directions find
//!   one entry. It is `Send + Sync`: PMD threads share it through an `Arc`,
//!   and a reply may arrive on any thread.
//! - [`Conntrack::execute`] is one `ct(zone, [commit], [mark], [label], [nat])`
//!   step ([`CtAction`]) on a [`Packet`], answering a [`CtResult`]:
//!   `ct_state` bits ([`CtState`]: `new`, `est`, `rel`, `rpl`, `inv`,
//!   `trk`), `ct_mark`, `ct_label`, and why a packet is invalid or a commit
//!   was refused. Without commit nothing is created (`new` means "would be
//!   new"); with commit a packet that may open a connection creates it
//!   and the mark/label writes apply.
//! - Protocols: TCP with window tracking as Open vSwitch's
//!   `conntrack-tcp.c` (pf's algorithm, RFC 7323 window scaling); UDP and
//!   other IP protocols by direction seen; ICMP/ICMPv6 echo (and ICMP
//!   timestamp/information) by identifier; ICMP/ICMPv6 errors *related* to
//!   the connection of the header they embed.
//! - Fragments are not reassembled: they are invalid
//!   ([`InvalidReason::Fragment`]) and counted.
//! - Per-state [`Timeouts`] (Open vSwitch's defaults), lazy expiry on
//!   lookup plus an incremental [`Conntrack::sweep`] for a control
//!   thread; [`Conntrack::flush`], [`Conntrack::dump`], [`Conntrack::stats`].
//! - A global maximum and per-zone maxima; a refused commit is
//!   [`Refused::TableFull`] or [`Refused::ZoneFull`] and counted.
//! - NAT: source and destination NAT with address and port ranges, as
//!   Open vSwitch's `ct(nat)` (see [NAT](#nat) below).
//! - [`parse()`] turns L3 bytes (IPv4, IPv6 with extension headers) into a
//!   [`Packet`]; callers that already have a flow key fill `Packet` directly.
//!
//! No I/O, no clock reads (callers pass `now_ms`, milliseconds of any
//! monotonic clock), no allocation on the lookup path (NAT allocates when
//! a commit sets up a translation), no `unsafe` but the one prefetch
//! instruction of [`Conntrack::prefetch`] and [`Conntrack::prefetch_entry`].
//!
//! # Example
//!
//! ```
//! use std::net::{IpAddr, Ipv4Addr};
//! use conntrack::{Config, Conntrack, CtAction, CtState, Packet, TcpFlags, TcpSegment, L4};
//!
//! let ct = Conntrack::new(Config::default()).unwrap();
//! let (a, b) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
//! let seg = |flags, seq, ack| TcpSegment { flags, seq, ack, window: 65535, ..TcpSegment::default() };
//! let tcp = |src, dst, sport, dport, s: TcpSegment| Packet {
//!     src, dst, fragment: false,
//!     l4: L4::Tcp(TcpSegment { src_port: sport, dst_port: dport, ..s }),
//! };
//! let zone = 5;
//! let now = 1_000;
//!
//! // ct_next: a SYN would be new; nothing is created.
//! let syn = tcp(a, b, 40000, 80, seg(TcpFlags::SYN, 100, 0));
//! let r = ct.execute(&syn, &CtAction::lookup(zone), now);
//! assert_eq!(r.state, CtState::TRK | CtState::NEW);
//! assert_eq!(ct.len(), 0);
//!
//! // ct_commit { ct_mark.blocked = 0; }: created, with its mark.
//! let r = ct.execute_next(&syn, &CtAction::commit(zone).with_mark(0, 1), now, &r);
//! assert!(r.state.contains(CtState::NEW));
//! assert_eq!(ct.len(), 1);
//!
//! // The SYN|ACK comes back: established, reply direction.
//! let synack = tcp(b, a, 80, 40000, seg(TcpFlags::SYN | TcpFlags::ACK, 7000, 101));
//! let r = ct.execute(&synack, &CtAction::lookup(zone), now + 1);
//! assert_eq!(r.state, CtState::TRK | CtState::EST | CtState::RPL);
//!
//! // Another zone knows nothing of it; an ACK of no connection is invalid.
//! let ack = tcp(a, b, 40000, 80, seg(TcpFlags::ACK, 101, 7001));
//! let r = ct.execute(&ack, &CtAction::lookup(zone + 1), now + 2);
//! assert!(r.state.contains(CtState::INV));
//! ```
//!
//! # NAT
//!
//! Open vSwitch's `ct(nat)`, `ct(commit, nat(src=…))` and
//! `ct(commit, nat(dst=…))` ([`CtAction::with_nat`], [`Nat`]), with the
//! semantics of its userspace `lib/conntrack.c`:
//!
//! - A commit that *creates* a connection with [`Nat::Src`] /
//!   [`Nat::Dst`] sets up its translation: the source (destination) becomes
//!   an address of [`NatRange`] `min..=max` and, with `ports`, a port of
//!   `lo..=hi`; without `ports` the packet's port is kept (RFC 4787 §4.1
//!   port preservation) unless that collides, when source NAT of TCP/UDP
//!   takes another from 1024..=65535. The address and port start at a hash
//!   of the original tuple and are probed linearly (OVS's "hash"
//!   selection) until the translated reply tuple is unique in the zone;
//!   none free (or at most 65,536 candidates tried): the commit creates
//!   nothing, [`Refused::NatExhausted`], counted as
//!   [`Stats::nat_exhausted`]. ICMP queries keep their id (address only);
//!   other protocols are translated by address only. A connection's
//!   translation never changes: a later commit with `Src`/`Dst` applies
//!   the existing one.
//! - Both directions find the connection: its original tuple (its key, as
//!   always) and its translated reply tuple (a second key, the *alias*;
//!   none when the translation maps the tuple to itself). A NAT'd
//!   connection counts once in limits, [`Conntrack::len`] and
//!   [`Conntrack::dump`] (whose [`ConnEntry::reply`] is the translated
//!   reply tuple).
//! - A step with `nat` translates the packet of a NAT'd connection once
//!   per zone: an original-direction packet that arrives with the original
//!   tuple gets the translated source/destination, a reply that arrives
//!   with the translated reply tuple gets the original tuple's reverse
//!   (un-NAT). A packet that arrives already translated (found through the
//!   alias in the original direction, or through the key in the reply
//!   direction) is left as it is. `snat`/`dnat` is set when the step
//!   translated the packet, by the connection's kind of translation (in
//!   both directions).
//! - What to write into the packet comes separately from the
//!   [`CtResult`], which stays small for the packets of connections without
//!   NAT: [`Conntrack::execute_nat`] and [`Conntrack::execute_next_nat`]
//!   fill an `Option<`[`NatResult`]`>` for every packet of a NAT'd
//!   connection, with the packet's endpoints after the step
//!   ([`NatResult::packet`]) and the original tuple
//!   ([`NatResult::original`], Open vSwitch's `ct_orig_tuple`). The other
//!   entry points translate alike but do not report the endpoints.
//! - A step without `nat` finds the connection by either tuple and reports
//!   the [`NatResult`] with the packet's own endpoints, translating
//!   nothing. [`Conntrack::execute_next`] takes the translated packet as
//!   well.
//!
//! Storage: each shard is an index of 8-byte slots (a hash tag and a
//! position) over a dense pool of 96-byte entries that never move while
//! the index grows (`table.rs`): a million connections take about 120
//! bytes each, a million SNAT'd ones about 300 (`tests/memory.rs`). A
//! NAT'd connection is a normal entry with a flag and its translation
//! beside it in the pool; its alias is an entry of the shard of the
//! alias's own hash, under the translated reply tuple's key. A lookup
//! consults the aliases only after a table miss and only while the tracker
//! holds a NAT'd connection, so connections
//! without NAT pay one predictable branch on a miss and the test of the
//! connection's flag on a hit. No step ever waits for a second shard lock while
//! holding one: a packet found through an alias releases the alias's shard
//! before it locks its connection's; creating a translation only *tries*
//! the alias's shard lock (and steps again from scratch if it is busy);
//! removing a connection tries to remove its alias at once and otherwise
//! leaves it to the next sweep, flush or retry (until then a lookup that
//! meets it sees a stale alias, treats it as absent and removes it).
//!
//! ICMP errors related to a NAT'd connection are found (`rel`); their outer
//! address on the translated side is reported rewritten, and the endpoints
//! the header they embed must carry ([`NatResult::inner`]); the caller
//! writes both into the packet.
//!
//! Limits: no ALGs (FTP, TFTP), no
//! `persistent`/`random` range flags (selection is always by hash), no
//! port-range classes as OVS keeps for source ports below 1024, no
//! source-port change for destination NAT: a DNAT without ports whose
//! translated tuple collides is exhausted.
//!
//! # Features
//!
//! - `serde`: derives `serde::Serialize` for [`ConnEntry`], [`Stats`] and
//!   their parts, and `Serialize`/`Deserialize` for [`Timeouts`].

#![deny(unsafe_code)]
#![deny(missing_docs)]

mod checksum;
mod conn;
mod dump;
mod expire;
mod key;
mod limits;
mod lookup;
mod nat;
pub mod packet;
mod parse;
mod prefetch;
mod shard;
mod table;
mod tcp;
mod timeouts;
mod tracker;
mod verdict;

pub use conn::{IcmpState, MultiState};
pub use dump::{ConnEntry, Dump, ProtoState, Stats};
pub use expire::{Sweep, SWEEP_CHUNK};
pub use packet::{IcmpMessage, Packet, TcpFlags, TcpSegment, Tuple, L4};
pub use parse::{parse, Checksums, ParseError, MAX_EXTENSION_HEADERS};
pub use tcp::TcpState;
pub use timeouts::{Timeout, Timeouts};
pub use tracker::{Conntrack, Prepared, MAX_SHARDS};
pub use verdict::{
    CtAction, CtResult, CtState, Endpoints, InvalidReason, Masked, Nat, NatRange, NatResult,
    Refused,
};

/// Open vSwitch's default global maximum (`ct-set-maxconns`).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 3_000_000;

/// How a [`Conntrack`] is built. `Default` is Open vSwitch's behaviour
/// except where the crate docs say otherwise (TCP pickup off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Global maximum of connections (Open vSwitch: 3,000,000).
    pub max_connections: u32,
    /// Maximum per zone without a limit of its own; `None`: unlimited.
    pub default_zone_limit: Option<u32>,
    /// Per-state timeouts.
    pub timeouts: Timeouts,
    /// Skip TCP sequence and window checks (Linux `nf_conntrack_tcp_be_liberal`,
    /// Open vSwitch `tcp_seq_chk=false`). Off.
    pub tcp_liberal: bool,
    /// Let a TCP segment other than SYN (but not SYN|ACK) open a
    /// connection, picking it up mid-stream (Linux `nf_conntrack_tcp_loose`,
    /// Open vSwitch's behaviour). Off: a new TCP connection needs a SYN.
    pub tcp_loose: bool,
    /// Number of table shards, a power of two up to [`MAX_SHARDS`]: more
    /// shards, fewer PMDs meeting on one lock and shorter sweeps. 256.
    pub shards: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            default_zone_limit: None,
            timeouts: Timeouts::default(),
            tcp_liberal: false,
            tcp_loose: false,
            shards: 256,
        }
    }
}

/// Errors of this crate (the data path answers with [`CtResult`] instead).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The shard count is not a power of two in `1..=MAX_SHARDS`.
    #[error("shard count {0} is not a power of two in 1..={MAX_SHARDS}")]
    ShardCount(usize),
    /// A packet did not parse.
    #[error("packet does not parse: {0}")]
    Parse(#[from] ParseError),
}
