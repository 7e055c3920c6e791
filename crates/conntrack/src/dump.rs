//! Looking inside: the connection dump (Open vSwitch's
//! `conntrack_dump_*` / `ovs-appctl dpctl/dump-conntrack`), counts per
//! zone, counters and memory.

use crate::conn::{Conn, IcmpState, L4State, MultiState};
use crate::nat::NatInfo;
use crate::tcp::TcpState;
use crate::verdict::InvalidReason;
use crate::{Conntrack, Tuple};

/// A connection's protocol state, as dumped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum ProtoState {
    /// TCP: each peer's state.
    Tcp {
        /// The original sender's state.
        orig: TcpState,
        /// The reply sender's state.
        reply: TcpState,
    },
    /// UDP.
    Udp(MultiState),
    /// ICMP or ICMPv6 query.
    Icmp(IcmpState),
    /// Other protocols.
    Other(MultiState),
}

/// One connection, as [`Conntrack::dump`] yields it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ConnEntry {
    /// Its zone.
    pub zone: u16,
    /// The tuple of its original direction.
    pub orig: Tuple,
    /// The tuple of its reply direction: the reverse of `orig`, or, for a
    /// NAT'd connection, of `orig` translated.
    pub reply: Tuple,
    /// Protocol state.
    pub state: ProtoState,
    /// `ct_mark`.
    pub mark: u32,
    /// `ct_label`.
    pub label: u128,
    /// When it expires, in the caller's milliseconds.
    pub expires_ms: u64,
}

impl ConnEntry {
    fn of(c: &Conn, nat: Option<&NatInfo>) -> ConnEntry {
        let mut orig = c.key.tuple(c.flipped);
        let mut reply = c.key.tuple(!c.flipped);
        if crate::key::is_icmp(c.key.v6, c.key.proto) {
            // Both ports of an ICMP tuple hold the id.
            orig.dst_port = orig.src_port;
            reply.dst_port = reply.src_port;
        }
        if let Some(n) = nat {
            // The translated side's address and port (ICMP: the id, other
            // protocols: 0, both unchanged).
            if n.src_nat {
                (reply.dst, reply.dst_port) = (n.addr, n.port);
            } else {
                (reply.src, reply.src_port) = (n.addr, n.port);
            }
        }
        let state = match c.l4 {
            L4State::Tcp(t) => ProtoState::Tcp {
                orig: t.peers[0].state,
                reply: t.peers[1].state,
            },
            L4State::Udp(s) => ProtoState::Udp(s),
            L4State::Icmp(s) => ProtoState::Icmp(s),
            L4State::Other(s) => ProtoState::Other(s),
        };
        ConnEntry {
            zone: c.key.zone,
            orig,
            reply,
            state,
            mark: c.mark,
            label: c.label(),
            expires_ms: c.expires,
        }
    }
}

/// Iterator over connections, one shard at a time: each shard is copied
/// out under its lock, so a slow consumer never holds a lock.
#[derive(Debug)]
pub struct Dump<'a> {
    ct: &'a Conntrack,
    zone: Option<u16>,
    now_ms: u64,
    next_shard: usize,
    buf: Vec<ConnEntry>,
}

impl Iterator for Dump<'_> {
    type Item = ConnEntry;

    fn next(&mut self) -> Option<ConnEntry> {
        while self.buf.is_empty() {
            if self.next_shard >= self.ct.shards.len() {
                return None;
            }
            let s = self.ct.lock_shard(self.next_shard);
            self.next_shard += 1;
            for i in (0..s.table.len()).rev() {
                let Some(c) = s.conn_at(i) else {
                    continue;
                };
                if !c.expired(self.now_ms) && self.zone.is_none_or(|z| c.key.zone == z) {
                    let nat = c.nat.then(|| s.nat_info(i));
                    self.buf.push(ConnEntry::of(c, nat));
                }
            }
        }
        self.buf.pop()
    }
}

/// Counters, summed over the shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// Connections in the table (expired ones not yet swept included).
    pub connections: u64,
    /// Connections created by commits.
    pub created: u64,
    /// Connections removed on expiry (by a sweep or a lookup).
    pub expired: u64,
    /// Connections removed by flushes.
    pub flushed: u64,
    /// TCP connections closed in both directions that a new SYN replaced.
    pub reopened: u64,
    /// Invalid packets, by [`InvalidReason::index`].
    pub invalid: [u64; InvalidReason::COUNT],
    /// Commits refused by the global limit (`ct_table_full`).
    pub table_full: u64,
    /// Commits refused by a zone's limit (`ct_zone_full`).
    pub zone_full: u64,
    /// Commits refused for want of a free address/port in their NAT range
    /// ([`Refused::NatExhausted`](crate::Refused::NatExhausted)).
    pub nat_exhausted: u64,
}

impl Stats {
    /// The invalid count for `r`.
    pub fn invalid(&self, r: InvalidReason) -> u64 {
        self.invalid[r.index()]
    }

    /// All invalid packets.
    pub fn invalid_total(&self) -> u64 {
        self.invalid.iter().sum()
    }
}

impl Conntrack {
    /// The connections not expired at `now_ms`, of one zone or all.
    pub fn dump(&self, now_ms: u64, zone: Option<u16>) -> Dump<'_> {
        Dump {
            ct: self,
            zone,
            now_ms,
            next_shard: 0,
            buf: Vec::new(),
        }
    }

    /// Connections in the table, expired ones not yet removed included.
    pub fn len(&self) -> usize {
        self.limits.total() as usize
    }

    /// Whether the table holds no connection.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Connections of `zone` (expired ones not yet removed included).
    pub fn zone_count(&self, zone: u16) -> u32 {
        self.limits.zone_count(zone)
    }

    /// `(zone, connections)` of every zone that has some, ascending.
    pub fn zone_counts(&self) -> Vec<(u16, u32)> {
        self.limits.zones()
    }

    /// The counters. Locks each shard briefly.
    pub fn stats(&self) -> Stats {
        let mut st = Stats {
            invalid: self.early_invalid(),
            ..Stats::default()
        };
        for i in 0..self.shards.len() {
            let c = self.lock_shard(i).counters;
            st.created += c.created;
            st.expired += c.expired;
            st.flushed += c.flushed;
            st.reopened += c.reopened;
            st.table_full += c.table_full;
            st.zone_full += c.zone_full;
            st.nat_exhausted += c.nat_exhausted;
            for (a, b) in st.invalid.iter_mut().zip(c.invalid) {
                *a += b;
            }
        }
        st.connections = self.len() as u64;
        st
    }

    /// Heap bytes the tracker holds: tables (connections, aliases, translations),
    /// shard locks, zone arrays.
    pub fn memory_bytes(&self) -> usize {
        let tables: usize = (0..self.shards.len())
            .map(|i| {
                let s = self.lock_shard(i);
                s.table.bytes()
            })
            .sum();
        tables
            + self.shards.len() * core::mem::size_of::<crate::shard::ShardCell>()
            + self.limits.bytes()
    }
}
