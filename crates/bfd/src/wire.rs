//! The BFD Control packet (RFC 5880 §4.1), version 1, without authentication.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Vers |  Diag   |Sta|P|F|C|A|D|M|  Detect Mult  |    Length     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       My Discriminator                        |
//! |                      Your Discriminator                       |
//! |                    Desired Min TX Interval                    |
//! |                   Required Min RX Interval                    |
//! |                 Required Min Echo RX Interval                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! [`Packet`] is a typed view over the bytes; [`ControlPacket`] its high-level
//! form. [`Packet::new_checked`] makes sure the buffer holds the 24 mandatory
//! bytes and everything the Length field claims; after it no accessor panics.
//! [`ControlPacket::parse`] applies the stateless reception checks of
//! RFC 5880 §6.8.6, in Open vSwitch's order (`lib/bfd.c`,
//! `bfd_process_packet`); the one check that needs a session (Your
//! Discriminator is ours) is [`crate::Session::receive`]'s.

use core::fmt;

use crate::Error;

/// The protocol version this crate speaks (RFC 5880 §4.1).
pub const VERSION: u8 = 1;

/// Length of a Control packet without an authentication section, in bytes.
pub const PACKET_LEN: usize = 24;

/// Byte ranges of the fields (RFC 5880 §4.1).
mod field {
    use core::ops::Range;

    pub const VERS_DIAG: usize = 0;
    pub const FLAGS: usize = 1;
    pub const DETECT_MULT: usize = 2;
    pub const LENGTH: usize = 3;
    pub const MY_DISC: Range<usize> = 4..8;
    pub const YOUR_DISC: Range<usize> = 8..12;
    pub const DESIRED_MIN_TX: Range<usize> = 12..16;
    pub const REQUIRED_MIN_RX: Range<usize> = 16..20;
    pub const REQUIRED_MIN_ECHO_RX: Range<usize> = 20..24;
}

/// Flag bits of the second byte, below the 2-bit state.
mod flag {
    pub const POLL: u8 = 1 << 5;
    pub const FINAL: u8 = 1 << 4;
    pub const CPI: u8 = 1 << 3;
    pub const AUTH: u8 = 1 << 2;
    pub const DEMAND: u8 = 1 << 1;
    pub const MULTIPOINT: u8 = 1 << 0;
}

/// bfd.SessionState and the Sta field (RFC 5880 §4.1, §6.2).
///
/// Ordered as the field's values: `AdminDown < Down < Init < Up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// 0: the session is held down by configuration.
    AdminDown,
    /// 1: no session, or it went down.
    Down,
    /// 2: the remote was heard in Down.
    Init,
    /// 3: both ends see each other.
    Up,
}

impl State {
    /// The 2-bit Sta field value.
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// The state of a 2-bit Sta value (the upper bits of `bits` are ignored).
    pub const fn from_bits(bits: u8) -> State {
        match bits & 3 {
            0 => State::AdminDown,
            1 => State::Down,
            2 => State::Init,
            _ => State::Up,
        }
    }

    /// The name Open vSwitch shows in `Interface.bfd_status:state`
    /// (`admin_down`, `down`, `init`, `up`; `lib/bfd.c`, `bfd_state_str`).
    pub const fn as_str(self) -> &'static str {
        match self {
            State::AdminDown => "admin_down",
            State::Down => "down",
            State::Init => "init",
            State::Up => "up",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// bfd.LocalDiag and the Diag field (RFC 5880 §4.1): why the session last
/// left Up, or was held down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Diagnostic {
    /// 0: No Diagnostic.
    None,
    /// 1: Control Detection Time Expired.
    ControlDetectionTimeExpired,
    /// 2: Echo Function Failed.
    EchoFunctionFailed,
    /// 3: Neighbor Signaled Session Down.
    NeighborSignaledSessionDown,
    /// 4: Forwarding Plane Reset.
    ForwardingPlaneReset,
    /// 5: Path Down.
    PathDown,
    /// 6: Concatenated Path Down.
    ConcatenatedPathDown,
    /// 7: Administratively Down.
    AdministrativelyDown,
    /// 8: Reverse Concatenated Path Down.
    ReverseConcatenatedPathDown,
    /// 9–31: reserved values, kept as received (a packet carrying one is
    /// not discarded: RFC 5880 §6.8.6 does not say to).
    Reserved(u8),
}

impl Diagnostic {
    /// The 5-bit Diag field value.
    pub const fn bits(self) -> u8 {
        match self {
            Diagnostic::None => 0,
            Diagnostic::ControlDetectionTimeExpired => 1,
            Diagnostic::EchoFunctionFailed => 2,
            Diagnostic::NeighborSignaledSessionDown => 3,
            Diagnostic::ForwardingPlaneReset => 4,
            Diagnostic::PathDown => 5,
            Diagnostic::ConcatenatedPathDown => 6,
            Diagnostic::AdministrativelyDown => 7,
            Diagnostic::ReverseConcatenatedPathDown => 8,
            Diagnostic::Reserved(v) => v & 0x1f,
        }
    }

    /// The diagnostic of a 5-bit Diag value (the upper bits of `bits` are
    /// ignored).
    pub const fn from_bits(bits: u8) -> Diagnostic {
        match bits & 0x1f {
            0 => Diagnostic::None,
            1 => Diagnostic::ControlDetectionTimeExpired,
            2 => Diagnostic::EchoFunctionFailed,
            3 => Diagnostic::NeighborSignaledSessionDown,
            4 => Diagnostic::ForwardingPlaneReset,
            5 => Diagnostic::PathDown,
            6 => Diagnostic::ConcatenatedPathDown,
            7 => Diagnostic::AdministrativelyDown,
            8 => Diagnostic::ReverseConcatenatedPathDown,
            v => Diagnostic::Reserved(v),
        }
    }

    /// The text Open vSwitch shows in `Interface.bfd_status:diagnostic`
    /// (RFC 5880 §4.1's names; `Invalid Diagnostic` for a reserved value, as
    /// `lib/bfd.c`'s `bfd_diag_str`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Diagnostic::None => "No Diagnostic",
            Diagnostic::ControlDetectionTimeExpired => "Control Detection Time Expired",
            Diagnostic::EchoFunctionFailed => "Echo Function Failed",
            Diagnostic::NeighborSignaledSessionDown => "Neighbor Signaled Session Down",
            Diagnostic::ForwardingPlaneReset => "Forwarding Plane Reset",
            Diagnostic::PathDown => "Path Down",
            Diagnostic::ConcatenatedPathDown => "Concatenated Path Down",
            Diagnostic::AdministrativelyDown => "Administratively Down",
            Diagnostic::ReverseConcatenatedPathDown => "Reverse Concatenated Path Down",
            Diagnostic::Reserved(_) => "Invalid Diagnostic",
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed view over the bytes of a BFD Control packet (RFC 5880 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks: accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view of a buffer that [`Packet::check_len`] accepts; after it no
    /// accessor panics.
    ///
    /// # Errors
    /// [`Error::Truncated`] as [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the 24 mandatory bytes and at least the
    /// Length field's bytes (RFC 5880 §6.8.6: "If the Length field is
    /// greater than the payload of the encapsulating protocol, the packet
    /// MUST be discarded").
    ///
    /// # Errors
    /// [`Error::Truncated`] when either is longer than the buffer.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < PACKET_LEN || len < usize::from(self.length()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn byte(&self, i: usize) -> u8 {
        self.buffer.as_ref()[i]
    }

    fn word(&self, r: core::ops::Range<usize>) -> u32 {
        let b = &self.buffer.as_ref()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The Vers field (3 bits).
    pub fn version(&self) -> u8 {
        self.byte(field::VERS_DIAG) >> 5
    }

    /// The Diag field.
    pub fn diag(&self) -> Diagnostic {
        Diagnostic::from_bits(self.byte(field::VERS_DIAG))
    }

    /// The Sta field.
    pub fn state(&self) -> State {
        State::from_bits(self.byte(field::FLAGS) >> 6)
    }

    /// The Poll (P) bit.
    pub fn poll(&self) -> bool {
        self.byte(field::FLAGS) & flag::POLL != 0
    }

    /// The Final (F) bit.
    pub fn final_(&self) -> bool {
        self.byte(field::FLAGS) & flag::FINAL != 0
    }

    /// The Control Plane Independent (C) bit.
    pub fn control_plane_independent(&self) -> bool {
        self.byte(field::FLAGS) & flag::CPI != 0
    }

    /// The Authentication Present (A) bit.
    pub fn auth_present(&self) -> bool {
        self.byte(field::FLAGS) & flag::AUTH != 0
    }

    /// The Demand (D) bit.
    pub fn demand(&self) -> bool {
        self.byte(field::FLAGS) & flag::DEMAND != 0
    }

    /// The Multipoint (M) bit.
    pub fn multipoint(&self) -> bool {
        self.byte(field::FLAGS) & flag::MULTIPOINT != 0
    }

    /// The Detect Mult field.
    pub fn detect_mult(&self) -> u8 {
        self.byte(field::DETECT_MULT)
    }

    /// The Length field, in bytes.
    pub fn length(&self) -> u8 {
        self.byte(field::LENGTH)
    }

    /// The My Discriminator field.
    pub fn my_discriminator(&self) -> u32 {
        self.word(field::MY_DISC)
    }

    /// The Your Discriminator field.
    pub fn your_discriminator(&self) -> u32 {
        self.word(field::YOUR_DISC)
    }

    /// The Desired Min TX Interval field, in microseconds.
    pub fn desired_min_tx_us(&self) -> u32 {
        self.word(field::DESIRED_MIN_TX)
    }

    /// The Required Min RX Interval field, in microseconds.
    pub fn required_min_rx_us(&self) -> u32 {
        self.word(field::REQUIRED_MIN_RX)
    }

    /// The Required Min Echo RX Interval field, in microseconds.
    pub fn required_min_echo_rx_us(&self) -> u32 {
        self.word(field::REQUIRED_MIN_ECHO_RX)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_word(&mut self, r: core::ops::Range<usize>, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    fn set_flag(&mut self, bit: u8, on: bool) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = if on { *b | bit } else { *b & !bit };
    }

    /// Sets the Vers field (3 bits; higher bits of `v` are dropped).
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VERS_DIAG];
        *b = (*b & 0x1f) | (v << 5);
    }

    /// Sets the Diag field.
    pub fn set_diag(&mut self, d: Diagnostic) {
        let b = &mut self.buffer.as_mut()[field::VERS_DIAG];
        *b = (*b & 0xe0) | d.bits();
    }

    /// Sets the Sta field.
    pub fn set_state(&mut self, s: State) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & 0x3f) | (s.bits() << 6);
    }

    /// Sets the Poll (P) bit.
    pub fn set_poll(&mut self, on: bool) {
        self.set_flag(flag::POLL, on);
    }

    /// Sets the Final (F) bit.
    pub fn set_final(&mut self, on: bool) {
        self.set_flag(flag::FINAL, on);
    }

    /// Sets the Control Plane Independent (C) bit.
    pub fn set_control_plane_independent(&mut self, on: bool) {
        self.set_flag(flag::CPI, on);
    }

    /// Sets the Authentication Present (A) bit.
    pub fn set_auth_present(&mut self, on: bool) {
        self.set_flag(flag::AUTH, on);
    }

    /// Sets the Demand (D) bit.
    pub fn set_demand(&mut self, on: bool) {
        self.set_flag(flag::DEMAND, on);
    }

    /// Sets the Multipoint (M) bit.
    pub fn set_multipoint(&mut self, on: bool) {
        self.set_flag(flag::MULTIPOINT, on);
    }

    /// Sets the Detect Mult field.
    pub fn set_detect_mult(&mut self, v: u8) {
        self.buffer.as_mut()[field::DETECT_MULT] = v;
    }

    /// Sets the Length field, in bytes.
    pub fn set_length(&mut self, v: u8) {
        self.buffer.as_mut()[field::LENGTH] = v;
    }

    /// Sets the My Discriminator field.
    pub fn set_my_discriminator(&mut self, v: u32) {
        self.set_word(field::MY_DISC, v);
    }

    /// Sets the Your Discriminator field.
    pub fn set_your_discriminator(&mut self, v: u32) {
        self.set_word(field::YOUR_DISC, v);
    }

    /// Sets the Desired Min TX Interval field, in microseconds.
    pub fn set_desired_min_tx_us(&mut self, v: u32) {
        self.set_word(field::DESIRED_MIN_TX, v);
    }

    /// Sets the Required Min RX Interval field, in microseconds.
    pub fn set_required_min_rx_us(&mut self, v: u32) {
        self.set_word(field::REQUIRED_MIN_RX, v);
    }

    /// Sets the Required Min Echo RX Interval field, in microseconds.
    pub fn set_required_min_echo_rx_us(&mut self, v: u32) {
        self.set_word(field::REQUIRED_MIN_ECHO_RX, v);
    }
}

/// A BFD Control packet in high-level form (the `Repr` of [`Packet`]).
///
/// The A and M bits are absent: [`ControlPacket::parse`] rejects them and
/// [`ControlPacket::emit`] writes them clear. Emitted packets are always
/// 24 bytes, version 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControlPacket {
    /// Diag: the sender's bfd.LocalDiag.
    pub diag: Diagnostic,
    /// Sta: the sender's bfd.SessionState.
    pub state: State,
    /// P: the sender starts or continues a Poll Sequence (RFC 5880 §6.5).
    pub poll: bool,
    /// F: the answer to a Poll.
    pub final_: bool,
    /// C: the sender's BFD does not share fate with its control plane.
    pub control_plane_independent: bool,
    /// D: the sender wishes Demand mode (Open vSwitch never sets it).
    pub demand: bool,
    /// Detect Mult: the sender's bfd.DetectMult (never 0 once parsed).
    pub detect_mult: u8,
    /// My Discriminator: the sender's bfd.LocalDiscr (never 0 once parsed).
    pub my_discriminator: u32,
    /// Your Discriminator: the sender's bfd.RemoteDiscr, 0 if unknown.
    pub your_discriminator: u32,
    /// Desired Min TX Interval, in microseconds.
    pub desired_min_tx_us: u32,
    /// Required Min RX Interval, in microseconds.
    pub required_min_rx_us: u32,
    /// Required Min Echo RX Interval, in microseconds (0: no echo; Open
    /// vSwitch always sends 0).
    pub required_min_echo_rx_us: u32,
}

impl ControlPacket {
    /// Parses a checked view, applying the stateless checks of RFC 5880
    /// §6.8.6 in Open vSwitch's order (`bfd_process_packet`).
    ///
    /// A Length above 24 within the buffer is accepted (RFC 5880 only asks
    /// that it fit the payload; Open vSwitch logs it and goes on); the bytes
    /// past 24 are ignored. A reserved Diag value is kept
    /// ([`Diagnostic::Reserved`]).
    ///
    /// # Errors
    /// In order: [`Error::BadVersion`] (Vers not 1), [`Error::AuthPresent`]
    /// (A bit: this crate does no authentication), [`Error::BadLength`]
    /// (Length below 24), [`Error::ZeroDetectMult`], [`Error::Multipoint`]
    /// (M bit), [`Error::ZeroMyDiscriminator`],
    /// [`Error::ZeroYourDiscriminator`] (Your Discriminator 0 while the
    /// state is neither AdminDown nor Down).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<ControlPacket, Error> {
        if packet.version() != VERSION {
            return Err(Error::BadVersion);
        }
        if packet.auth_present() {
            return Err(Error::AuthPresent);
        }
        if usize::from(packet.length()) < PACKET_LEN {
            return Err(Error::BadLength);
        }
        if packet.detect_mult() == 0 {
            return Err(Error::ZeroDetectMult);
        }
        if packet.multipoint() {
            return Err(Error::Multipoint);
        }
        if packet.my_discriminator() == 0 {
            return Err(Error::ZeroMyDiscriminator);
        }
        if packet.your_discriminator() == 0 && packet.state() > State::Down {
            return Err(Error::ZeroYourDiscriminator);
        }
        Ok(ControlPacket {
            diag: packet.diag(),
            state: packet.state(),
            poll: packet.poll(),
            final_: packet.final_(),
            control_plane_independent: packet.control_plane_independent(),
            demand: packet.demand(),
            detect_mult: packet.detect_mult(),
            my_discriminator: packet.my_discriminator(),
            your_discriminator: packet.your_discriminator(),
            desired_min_tx_us: packet.desired_min_tx_us(),
            required_min_rx_us: packet.required_min_rx_us(),
            required_min_echo_rx_us: packet.required_min_echo_rx_us(),
        })
    }

    /// [`Packet::new_checked`] then [`ControlPacket::parse`]: a UDP payload
    /// (RFC 5881 §4) to a Control packet.
    ///
    /// # Errors
    /// [`Error::Truncated`], then those of [`ControlPacket::parse`].
    pub fn decode(bytes: &[u8]) -> Result<ControlPacket, Error> {
        ControlPacket::parse(&Packet::new_checked(bytes)?)
    }

    /// Bytes [`ControlPacket::emit`] writes: 24.
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the packet into the first 24 bytes of the view (Vers 1,
    /// Length 24, A and M clear). Fields are written as given; a sender must
    /// not set both P and F (RFC 5880 §6.5), which [`crate::Session`] never
    /// does.
    ///
    /// # Panics
    /// When the view's buffer is shorter than 24 bytes
    /// ([`ControlPacket::encode`] returns an error instead).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.buffer.as_mut()[..PACKET_LEN].fill(0);
        packet.set_version(VERSION);
        packet.set_diag(self.diag);
        packet.set_state(self.state);
        packet.set_poll(self.poll);
        packet.set_final(self.final_);
        packet.set_control_plane_independent(self.control_plane_independent);
        packet.set_demand(self.demand);
        packet.set_detect_mult(self.detect_mult);
        packet.set_length(PACKET_LEN as u8);
        packet.set_my_discriminator(self.my_discriminator);
        packet.set_your_discriminator(self.your_discriminator);
        packet.set_desired_min_tx_us(self.desired_min_tx_us);
        packet.set_required_min_rx_us(self.required_min_rx_us);
        packet.set_required_min_echo_rx_us(self.required_min_echo_rx_us);
    }

    /// Writes the packet to the start of `buf`; returns its length (24).
    ///
    /// # Errors
    /// [`Error::BufferTooSmall`] when `buf` is shorter than 24 bytes.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let buf = buf.get_mut(..PACKET_LEN).ok_or(Error::BufferTooSmall)?;
        self.emit(&mut Packet::new_unchecked(buf));
        Ok(PACKET_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up, Final, mult 3, my 0x01020304, your 0x0a0b0c0d, tx 100 ms,
    /// rx 1 s, echo 0; diag 3 (Neighbor Signaled Session Down).
    static BYTES: [u8; 24] = [
        0x23, 0xd0, 0x03, 0x18, 0x01, 0x02, 0x03, 0x04, 0x0a, 0x0b, 0x0c, 0x0d, 0x00, 0x01, 0x86,
        0xa0, 0x00, 0x0f, 0x42, 0x40, 0x00, 0x00, 0x00, 0x00,
    ];

    fn repr() -> ControlPacket {
        ControlPacket {
            diag: Diagnostic::NeighborSignaledSessionDown,
            state: State::Up,
            poll: false,
            final_: true,
            control_plane_independent: false,
            demand: false,
            detect_mult: 3,
            my_discriminator: 0x0102_0304,
            your_discriminator: 0x0a0b_0c0d,
            desired_min_tx_us: 100_000,
            required_min_rx_us: 1_000_000,
            required_min_echo_rx_us: 0,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&BYTES[..]).unwrap();
        assert_eq!(p.version(), 1);
        assert_eq!(p.diag(), Diagnostic::NeighborSignaledSessionDown);
        assert_eq!(p.state(), State::Up);
        assert!(!p.poll() && p.final_());
        assert!(!p.control_plane_independent() && !p.auth_present());
        assert!(!p.demand() && !p.multipoint());
        assert_eq!(p.detect_mult(), 3);
        assert_eq!(p.length(), 24);
        assert_eq!(p.my_discriminator(), 0x0102_0304);
        assert_eq!(p.your_discriminator(), 0x0a0b_0c0d);
        assert_eq!(p.desired_min_tx_us(), 100_000);
        assert_eq!(p.required_min_rx_us(), 1_000_000);
        assert_eq!(p.required_min_echo_rx_us(), 0);
    }

    #[test]
    fn construct() {
        let mut buf = [0xa5u8; 24];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_version(1);
        p.set_diag(Diagnostic::NeighborSignaledSessionDown);
        p.set_state(State::Up);
        p.set_poll(false);
        p.set_final(true);
        p.set_control_plane_independent(false);
        p.set_auth_present(false);
        p.set_demand(false);
        p.set_multipoint(false);
        p.set_detect_mult(3);
        p.set_length(24);
        p.set_my_discriminator(0x0102_0304);
        p.set_your_discriminator(0x0a0b_0c0d);
        p.set_desired_min_tx_us(100_000);
        p.set_required_min_rx_us(1_000_000);
        p.set_required_min_echo_rx_us(0);
        assert_eq!(buf, BYTES);
    }

    #[test]
    fn parse() {
        assert_eq!(ControlPacket::decode(&BYTES).unwrap(), repr());
    }

    #[test]
    fn emit() {
        let mut buf = [0xa5u8; 24];
        assert_eq!(repr().encode(&mut buf), Ok(24));
        assert_eq!(buf, BYTES);
        assert_eq!(repr().encode(&mut buf[..23]), Err(Error::BufferTooSmall));
    }

    fn with(f: impl FnOnce(&mut Packet<&mut [u8]>)) -> Result<ControlPacket, Error> {
        let mut buf = BYTES;
        f(&mut Packet::new_unchecked(&mut buf[..]));
        ControlPacket::decode(&buf)
    }

    #[test]
    fn rejections_of_rfc5880_6_8_6() {
        assert_eq!(ControlPacket::decode(&BYTES[..23]), Err(Error::Truncated));
        assert_eq!(with(|p| p.set_length(25)), Err(Error::Truncated));
        assert_eq!(with(|p| p.set_version(0)), Err(Error::BadVersion));
        assert_eq!(with(|p| p.set_version(2)), Err(Error::BadVersion));
        assert_eq!(with(|p| p.set_auth_present(true)), Err(Error::AuthPresent));
        assert_eq!(with(|p| p.set_length(23)), Err(Error::BadLength));
        assert_eq!(with(|p| p.set_length(0)), Err(Error::BadLength));
        assert_eq!(with(|p| p.set_detect_mult(0)), Err(Error::ZeroDetectMult));
        assert_eq!(with(|p| p.set_multipoint(true)), Err(Error::Multipoint));
        assert_eq!(
            with(|p| p.set_my_discriminator(0)),
            Err(Error::ZeroMyDiscriminator)
        );
        for s in [State::Init, State::Up] {
            let r = with(|p| {
                p.set_your_discriminator(0);
                p.set_state(s);
            });
            assert_eq!(r, Err(Error::ZeroYourDiscriminator));
        }
        for s in [State::AdminDown, State::Down] {
            let r = with(|p| {
                p.set_your_discriminator(0);
                p.set_state(s);
            });
            assert_eq!(r.unwrap().state, s);
        }
        // The A bit is checked before the length, as Open vSwitch does.
        let r = with(|p| {
            p.set_auth_present(true);
            p.set_length(26);
        });
        assert_eq!(r, Err(Error::Truncated));
        let mut long = [0u8; 26];
        long[..24].copy_from_slice(&BYTES);
        long[3] = 26;
        long[1] |= 1 << 2;
        assert_eq!(ControlPacket::decode(&long), Err(Error::AuthPresent));
    }

    #[test]
    fn longer_length_within_the_payload_is_accepted() {
        let mut long = [0u8; 30];
        long[..24].copy_from_slice(&BYTES);
        long[3] = 28;
        assert_eq!(ControlPacket::decode(&long).unwrap(), repr());
    }

    #[test]
    fn reserved_diagnostic_kept() {
        let r = with(|p| p.set_diag(Diagnostic::Reserved(31))).unwrap();
        assert_eq!(r.diag, Diagnostic::Reserved(31));
        assert_eq!(r.diag.as_str(), "Invalid Diagnostic");
        for v in 0..32 {
            assert_eq!(Diagnostic::from_bits(v).bits(), v);
        }
    }
}
