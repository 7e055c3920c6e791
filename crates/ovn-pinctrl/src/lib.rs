//! The packets of OVN's controller actions, built as ovn-controller's
//! `pinctrl` builds them (OVN 23.03 `controller/pinctrl.c`), for a switch
//! that runs OVN's logical pipeline itself instead of sending the packet
//! to ovn-controller. Pure functions over bytes and
//! [`ovn_lflow::Flow`]s; no I/O, no unsafe code.
//!
//! - [`emit()`]: a frame from a logical flow's fields ([`Kind`] supplies
//!   what a flow does not hold), with lengths and checksums.
//! - [`rewrite()`]: a flow's header fields committed to a frame in place,
//!   checksums updated as Open vSwitch's set-field actions update them.
//! - [`start_flow`] and [`build`]: `arp`, `nd_ns`, `nd_na`,
//!   `nd_na_router`, `icmp4`, `icmp4_error`, `icmp6`, `icmp6_error`,
//!   `tcp_reset`, `sctp_abort`, `reject`: the new packet's fields for the
//!   nested actions to run on, then its frame once they ran.
//! - [`put_dhcp_opts`] and [`put_dhcpv6_opts`]: the DHCP replies.
//! - [`Headers`] and [`extract`]: a received frame's headers, bounds-checked.
//!
//! Every builder returns an [`Error`] wherever pinctrl sends nothing.
//!
//! ```
//! use ovn_lflow::{Field, Flow};
//! use ovn_pinctrl::{build, emit, start_flow, ControllerAction, Kind};
//!
//! // A UDP datagram to a closed port, as the switch received it.
//! let at = Flow::new()
//!     .with(Field::EthSrc, 0x0a00_0000_0001)
//!     .with(Field::EthDst, 0x0a00_0000_0002)
//!     .with(Field::EthType, 0x0800)
//!     .with(Field::IpProto, 17)
//!     .with(Field::IpTtl, 64)
//!     .with(Field::Ipv4Src, 0xc0a8_0001)
//!     .with(Field::Ipv4Dst, 0xc0a8_0002)
//!     .with(Field::UdpSrc, 5000)
//!     .with(Field::UdpDst, 9);
//! let received = emit(&at, &Kind::Udp { data: b"hello" })?;
//!
//! // `reject { ... };`: the new packet's fields (back to the sender,
//! // ICMP port unreachable), then the frame once the nested actions ran.
//! let new = start_flow(ControllerAction::Reject, &at)?;
//! assert_eq!(new.get(Field::Ipv4Dst), 0xc0a8_0001);
//! assert_eq!(new.get(Field::Icmpv4Code), 3);
//! let frame = build(ControllerAction::Reject, &received, &at, &new)?;
//! // Ethernet, IPv4, ICMP, then the quoted datagram (IP header on).
//! assert_eq!(frame.len(), 14 + 20 + 8 + received.len() - 14);
//! assert_eq!(&frame[42..], &received[14..]);
//! # Ok::<(), ovn_pinctrl::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod action;
pub mod dhcp4;
pub mod dhcp6;
pub mod emit;
pub mod error;
mod flowbits;
pub mod headers;
mod reply;
pub mod rewrite;
pub mod wire;

pub use action::{build, start_flow, ControllerAction};
pub use dhcp4::put_dhcp_opts;
pub use dhcp6::put_dhcpv6_opts;
pub use emit::{emit, Kind};
pub use error::{Error, Header, Result};
pub use headers::{extract, with_headers, Headers};
pub use reply::DhcpReply;
pub use rewrite::rewrite;
