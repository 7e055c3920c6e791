//! # bfd
//!
//! Bidirectional Forwarding Detection (RFC 5880, single hop over UDP as
//! RFC 5881) the way Open vSwitch runs it on its tunnels (`lib/bfd.c`), so
//! that a switch can be a gateway chassis of OVN beside Open vSwitch ones:
//! ovn-controller enables BFD on the Geneve tunnels between chassis and
//! elects the active gateway from the tunnels whose `bfd_status:state` is
//! `up`. No I/O, no `unsafe`, no clock: the caller owns time.
//!
//! * [`wire`]: the Control packet (RFC 5880 §4.1): a typed view
//!   ([`wire::Packet`]) and its high-level form ([`ControlPacket`]), with
//!   the reception checks of §6.8.6.
//! * [`frame`]: the inner Ethernet/IPv4/UDP frame Open vSwitch carries
//!   BFD in over a tunnel, built ([`FrameConfig::emit`]) and recognised
//!   ([`FrameConfig::recognise`]) as Open vSwitch does.
//! * [`session`]: the state machine (RFC 5880 §6.2, §6.8) for a poll-mode
//!   data path ([`Session`]): timers, Poll Sequence, detection, and the
//!   `Interface.bfd_status` values ([`Status`]).
//!
//! ## Two sessions, back to back
//!
//! ```
//! use core::num::NonZeroU32;
//! use bfd::{Config, FrameConfig, Session, State};
//!
//! let disc = |d| NonZeroU32::new(d).unwrap();
//! let mut a = Session::new(Config::default(), disc(1))?;
//! let mut b = Session::new(Config::default(), disc(2))?;
//! // One packet from `tx` to `rx`, through a tunnel as a frame, if one is due.
//! let hop = |tx: &mut Session, rx: &mut Session, now| -> Result<(), bfd::Error> {
//!     let frames = FrameConfig::default();
//!     let mut buf = [0u8; bfd::frame::FRAME_LEN];
//!     if let Some(packet) = tx.poll(now) {
//!         let n = frames.emit([0x02, 0, 0, 0, 0, 1], &packet, &mut buf)?;
//!         let packet = frames.recognise(&buf[..n], 0).expect("BFD")?;
//!         rx.receive(&packet, now)?;
//!     }
//!     Ok(())
//! };
//! let mut now = 0; // ms
//! while a.state() != State::Up || b.state() != State::Up {
//!     hop(&mut a, &mut b, now)?;
//!     hop(&mut b, &mut a, now)?;
//!     now = a.next_wakeup().min(b.next_wakeup()).max(now);
//! }
//! assert!(now <= 2000, "up within two slow (1 s) intervals");
//! assert_eq!(a.status().pairs()[1], ("state", "up".to_string()));
//! # Ok::<(), bfd::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod frame;
pub mod session;
pub mod wire;

pub use frame::FrameConfig;
pub use session::{Config, Session, Status};
pub use wire::{ControlPacket, Diagnostic, State};

/// Errors of this crate: why a packet or frame is dropped, a buffer refused
/// or a configuration rejected. Small and `Copy` for the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Error {
    /// Shorter than 24 bytes or than the Length field (RFC 5880 §6.8.6),
    /// or an IPv4/UDP length beyond the frame.
    #[error("truncated: shorter than 24 bytes or than a length field")]
    Truncated,
    /// Vers is not 1 (RFC 5880 §6.8.6).
    #[error("BFD version is not 1")]
    BadVersion,
    /// The A bit is set; this implementation has no authentication
    /// (RFC 5880 §6.8.6).
    #[error("authentication present but not in use")]
    AuthPresent,
    /// Length below 24 (RFC 5880 §6.8.6).
    #[error("Length field below 24")]
    BadLength,
    /// Detect Mult is 0 (RFC 5880 §6.8.6).
    #[error("Detect Mult is zero")]
    ZeroDetectMult,
    /// The M bit is set (RFC 5880 §6.8.6).
    #[error("Multipoint bit set")]
    Multipoint,
    /// My Discriminator is 0 (RFC 5880 §6.8.6).
    #[error("My Discriminator is zero")]
    ZeroMyDiscriminator,
    /// Your Discriminator is 0 while State is Init or Up (RFC 5880 §6.8.6).
    #[error("Your Discriminator is zero in state Init or Up")]
    ZeroYourDiscriminator,
    /// Your Discriminator is neither 0 nor this session's (RFC 5880
    /// §6.8.6; Open vSwitch binds a session to its port and drops it too).
    #[error("Your Discriminator is not this session's")]
    DiscriminatorMismatch,
    /// The IPv4 TTL is not 255 (RFC 5881 §5).
    #[error("IPv4 TTL is not 255")]
    BadTtl,
    /// The IPv4 header checksum is wrong.
    #[error("bad IPv4 header checksum")]
    BadIpChecksum,
    /// The UDP checksum is non-zero and wrong.
    #[error("bad UDP checksum")]
    BadUdpChecksum,
    /// An output buffer is too short.
    #[error("output buffer too small")]
    BufferTooSmall,
    /// An interval of 0 or above [`session::MAX_INTERVAL_MS`], or a Detect
    /// Mult of 0.
    #[error("invalid session configuration")]
    InvalidConfig,
}
