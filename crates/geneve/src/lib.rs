//! # geneve
//!
//! The Geneve tunnel (RFC 8926) as a library with no I/O and no `unsafe`:
//!
//! * [`wire`]: typed views over the Geneve header and its options
//!   ([`wire::Packet`], [`wire::GeneveOption`]) and their high-level forms
//!   ([`wire::Repr`], [`wire::OptionRepr`], [`wire::OptionList`]).
//! * [`encap`]: encapsulation from a prebuilt per-tunnel header template
//!   (outer Ethernet + IPv4/IPv6 + UDP + Geneve), patched per packet.
//! * [`decap`]: decapsulation with validation and a named [`decap::DropReason`]
//!   for every drop.
//! * [`gso`]: software TCP segmentation (TSO/GSO) of one large frame with
//!   virtio-net metadata into caller-provided buffers, optionally
//!   encapsulating each segment; also plain TSO and checksum completion.
//! * [`gro`]: software coalescing (LRO/GRO) of in-order TCP segments into one
//!   large frame with GSO metadata, following Linux GRO's rules: copied
//!   into one slice, or by reference (rewritten headers plus the segments'
//!   payloads in place, as Linux GRO's fragments).
//! * [`checksum`]: the Internet checksum (RFC 1071) and pseudo-headers.
//!
//! ## Emit, then parse
//!
//! ```
//! use geneve::wire::{OptionList, Packet, Repr, ETHERTYPE_TEB};
//!
//! let mut options = OptionList::new();
//! options.push(0x0102, 0x03, &[0xde, 0xad, 0xbe, 0xef])?;
//! let repr = Repr {
//!     control: false,
//!     critical: options.critical(),
//!     protocol_type: ETHERTYPE_TEB,
//!     vni: 5001,
//!     options: options.as_bytes(),
//! };
//! let inner = [0u8; 60]; // an inner Ethernet frame
//! let mut buf = vec![0u8; repr.buffer_len() + inner.len()];
//! let mut packet = Packet::new_unchecked(&mut buf[..]);
//! repr.emit(&mut packet)?;
//! packet.payload_mut().copy_from_slice(&inner);
//!
//! let packet = Packet::new_checked(&buf[..])?;
//! let parsed = Repr::parse(&packet)?;
//! assert_eq!(parsed, repr);
//! assert_eq!(packet.payload(), &inner[..]);
//! let opt = packet.options_iter().next().unwrap()?;
//! assert_eq!((opt.class(), opt.option_type(), opt.data()), (0x0102, 0x03, &[0xde, 0xad, 0xbe, 0xef][..]));
//! # Ok::<(), geneve::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod checksum;
pub mod decap;
pub mod encap;
pub mod gro;
pub mod gso;
pub mod net;
pub mod wire;

/// Errors of this crate's parsers, builders and segmenter. Small and `Copy`
/// so the data path can return it without cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// A buffer is shorter than the header or length field says.
    #[error("truncated: buffer shorter than the header or its length field")]
    Truncated,
    /// The Geneve version is not 0 (RFC 8926 §3.4).
    #[error("Geneve version is not 0 (RFC 8926 §3.4)")]
    BadVersion,
    /// An option runs past the options area, or its data is not a multiple
    /// of 4 bytes or longer than 124 bytes (RFC 8926 §3.5).
    #[error("malformed Geneve option (RFC 8926 §3.5)")]
    BadOption,
    /// The options area exceeds 252 bytes or is not a multiple of 4 bytes
    /// (RFC 8926 §3.4).
    #[error("Geneve options longer than 252 bytes or not a multiple of 4")]
    OptionsTooLong,
    /// A VNI above 24 bits.
    #[error("VNI does not fit in 24 bits")]
    BadVni,
    /// `csum_start + csum_offset` does not leave room for the 2-byte field,
    /// or `csum_start` is not where the TCP header starts.
    #[error("csum_start/csum_offset do not point at the TCP checksum field")]
    BadChecksumOffset,
    /// Outer and tunnel addresses are of different IP families.
    #[error("local and remote tunnel addresses are of different IP families")]
    AddressFamilyMismatch,
    /// IPv6 underlay with the UDP checksum off, without explicitly allowing
    /// zero checksums (RFC 6935, RFC 6936).
    #[error(
        "IPv6 underlay requires the UDP checksum unless zero checksums are allowed (RFC 6935/6936)"
    )]
    Ipv6ZeroChecksum,
    /// Empty or reversed UDP source port range.
    #[error("UDP source port range is empty")]
    BadPortRange,
    /// An output buffer is too short or there are too few of them.
    #[error("output buffer too small")]
    BufferTooSmall,
    /// A packet would exceed a 16-bit length field (65535 bytes).
    #[error("packet longer than a 16-bit length field allows")]
    TooLong,
    /// GSO type not supported (only TCPv4 and TCPv6; UDP GSO is out of scope).
    #[error("GSO type not supported (only TCPv4/TCPv6)")]
    UnsupportedGsoType,
    /// `gso_size` is 0.
    #[error("gso_size is 0")]
    BadGsoSize,
    /// The frame is not Ethernet + IPv4/IPv6 (no extension headers) + TCP
    /// matching the GSO type, or is an IPv4 fragment.
    #[error("frame is not Ethernet + IPv4/IPv6 + TCP of the GSO type")]
    NotTcp,
    /// An IP or TCP length field disagrees with the frame.
    #[error("an IP or TCP length field disagrees with the frame")]
    BadLength,
}

pub use gso::{
    complete_checksum, segment, segment_with, GsoMeta, GsoType, InnerChecksum, SegmentPlan,
    VIRTIO_NET_HDR_LEN,
};
