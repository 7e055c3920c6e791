//! IGMP and MLD snooping for software switches (RFC 4541): parse
//! membership messages, keep a group database, build querier frames.
//!
//! - [`parse`] reads an IPv4 or IPv6 packet and returns the IGMPv1/v2/v3
//!   (RFC 1112, RFC 2236, RFC 3376) or MLDv1/v2 (RFC 2710, RFC 3810)
//!   [`Message`] in it, `Ok(None)` for other packets, or a [`ParseError`].
//!   It does not allocate: reports are an iterator ([`Records`]) over the
//!   packet's bytes, checked up front. Checksums (IPv4 header, IGMP,
//!   ICMPv6 with the pseudo-header) are verified. Fuzzed by
//!   `fuzz/fuzz_targets/parse.rs`.
//! - [`Mdb`], the multicast group database: per bridge domain and group,
//!   the members (ports or tunnel endpoints) and their source filters, and
//!   per domain the multicast-router ports; aging, flushes, a generation
//!   counter for caching callers and sorted dumps ([`GroupRow`],
//!   [`RouterRow`]). Simplified on purpose, see [`mdb`]: per-member source
//!   state, fast leave, no last-member query.
//! - [`query`] builds Ethernet frames: IGMPv3 and MLDv2 general queries for
//!   a snooping querier, and reports and leaves for tests (also re-exported
//!   at the crate root).
//!
//! No I/O, no clock reads (callers pass `now`), no `unsafe`.
//!
//! # Example
//!
//! ```
//! use std::net::{IpAddr, Ipv4Addr};
//! use std::time::Instant;
//! use mcsnoop::{parse, query, Mdb, MdbConfig, Message, RecordKind};
//!
//! let host = [0x02, 0, 0, 0, 0, 1];
//! let group = Ipv4Addr::new(239, 1, 2, 3);
//! let frame = query::igmp_v3_report(
//!     host,
//!     Ipv4Addr::new(10, 0, 0, 1),
//!     &[(RecordKind::ChangeToExclude, group, &[])],
//! );
//! // The caller strips the 14-byte Ethernet header (and any VLAN tags).
//! let msg = parse(&frame[14..]).expect("valid").expect("a membership message");
//! let Message::Report(records) = &msg else { panic!("a report") };
//! assert_eq!(records.len(), 1);
//!
//! let now = Instant::now();
//! let mut mdb: Mdb<u16, u32> = Mdb::new(MdbConfig::default());
//! let snooped = mdb.snoop(100, 7, &msg, now);
//! assert_eq!(snooped.joined, 1);
//!
//! let mut out = Vec::new();
//! let source = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9));
//! assert!(mdb.members(100, group.into(), source, &mut out));
//! assert_eq!(out, [7]);
//! // Another domain has no entry for the group: flood it there.
//! assert!(!mdb.members(200, group.into(), source, &mut out));
//! ```
//!
//! # Features
//!
//! - `serde`: derives `serde::Serialize` for [`GroupRow`], [`RouterRow`]
//!   and [`FilterMode`].

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod addr;
mod checksum;
pub mod mdb;
mod parse;
pub mod query;
mod wire;

pub use addr::{group_mac, is_link_local};
pub use mdb::{FilterMode, GroupRow, Mdb, MdbConfig, RouterRow, Snooped};
pub use parse::{
    parse, Message, ParseError, Record, RecordKind, Records, Sources, Version,
    MAX_EXTENSION_HEADERS,
};
pub use query::{
    igmp_general_query, igmp_v2_leave, igmp_v2_report, igmp_v3_report, mld_general_query,
    mld_v1_done, mld_v1_report, mld_v2_report,
};
