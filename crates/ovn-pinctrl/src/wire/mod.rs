//! Typed views over the bytes of the headers this crate reads and writes,
//! in the manner of smoltcp's `wire` module: `Packet<T: AsRef<[u8]>>` (or
//! `Frame`, `Message`) with `new_unchecked`, `new_checked` (after which no
//! accessor panics), getters for `AsRef`, setters for `AsMut`, and a
//! `Repr` to emit where this crate emits the header whole.

pub mod checksum;
pub mod dhcpv4;
pub mod dhcpv6;
pub mod ethernet;
pub mod ipv4;
pub mod ipv6;
