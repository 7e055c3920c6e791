//! IPv4 headers (RFC 791).
//!
//! After [`Packet::new_checked`], no accessor panics: the buffer holds the
//! whole header and at least the total length the header states, which
//! is at least the header's length (Open vSwitch's `ipv4_sanity_check`,
//! which, like this, does not look at the version nibble).

use super::checksum;
use crate::error::{Error, Header, Result};

/// Byte offsets of the header's fields.
mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTO: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// The "don't fragment" flag in the flags/fragment-offset word.
pub const DONT_FRAGMENT: u16 = 0x4000;
/// The "more fragments" flag.
pub const MORE_FRAGMENTS: u16 = 0x2000;

/// A view of an IPv4 packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view of a well-formed packet (see the module doc).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Whether header length and total length agree with the buffer.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated(Header::Ipv4));
        }
        let hl = self.header_len();
        let tl = usize::from(self.total_len());
        if hl < HEADER_LEN || tl < hl {
            return Err(Error::Malformed(Header::Ipv4));
        }
        if b.len() < hl || b.len() < tl {
            return Err(Error::Truncated(Header::Ipv4));
        }
        Ok(())
    }

    fn be16(&self, at: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    fn addr(&self, at: usize) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.buffer.as_ref()[at..at + 4]);
        a
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The type-of-service byte (DSCP << 2 | ECN).
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// Total length in bytes, header included.
    pub fn total_len(&self) -> u16 {
        self.be16(field::LEN)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        self.be16(field::IDENT)
    }

    /// Flags and fragment offset.
    pub fn flags_frag(&self) -> u16 {
        self.be16(field::FLAGS_FRAG)
    }

    /// Whether this is a fragment other than the first (its L4 header is
    /// elsewhere).
    pub fn is_later_fragment(&self) -> bool {
        self.flags_frag() & 0x1fff != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTO]
    }

    /// Header checksum.
    pub fn checksum(&self) -> u16 {
        self.be16(field::CHECKSUM)
    }

    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        self.addr(field::SRC)
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        self.addr(field::DST)
    }

    /// The payload, up to the total length (Ethernet padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_be16(&mut self, at: usize, v: u16) {
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the type-of-service byte.
    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::TOS] = tos;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        self.set_be16(field::LEN, len);
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the header checksum.
    pub fn set_checksum(&mut self, c: u16) {
        self.set_be16(field::CHECKSUM, c);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::SRC..field::SRC + 4].copy_from_slice(&a);
    }

    /// Sets the destination address.
    pub fn set_dst(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::DST..field::DST + 4].copy_from_slice(&a);
    }

    /// Computes and sets the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::of(&self.buffer.as_ref()[..hl]);
        self.set_checksum(c);
    }
}

/// What a header without options says, to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source.
    pub src: [u8; 4],
    /// Destination.
    pub dst: [u8; 4],
    /// Protocol of the payload.
    pub protocol: u8,
    /// DSCP << 2 | ECN.
    pub tos: u8,
    /// Time to live.
    pub ttl: u8,
    /// Identification.
    pub ident: u16,
    /// Flags and fragment offset.
    pub flags_frag: u16,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl Repr {
    /// Header length: 20 bytes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Appends the header, with its checksum, to `out`.
    ///
    /// # Errors
    /// [`Error::TooLong`] if the total length exceeds 65535 bytes.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        let total = HEADER_LEN + self.payload_len;
        let total16 = u16::try_from(total).map_err(|_| Error::TooLong(total))?;
        let at = out.len();
        out.extend_from_slice(&[0x45, self.tos]);
        out.extend_from_slice(&total16.to_be_bytes());
        out.extend_from_slice(&self.ident.to_be_bytes());
        out.extend_from_slice(&self.flags_frag.to_be_bytes());
        out.extend_from_slice(&[self.ttl, self.protocol, 0, 0]);
        out.extend_from_slice(&self.src);
        out.extend_from_slice(&self.dst);
        let c = checksum::of(&out[at..]);
        out[at + field::CHECKSUM..at + field::CHECKSUM + 2].copy_from_slice(&c.to_be_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header of a 24-byte ICMP packet from 10.0.0.1 to 10.0.0.2, TTL
    /// 64, DF, checksum zero (filled in by `with_checksum`).
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x18, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 10, 0, 0, 1, 10, 0,
        0, 2,
    ];

    fn with_checksum() -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..20].copy_from_slice(&HDR);
        let c = checksum::of(&HDR);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        b[20..].copy_from_slice(&[8, 0, 0xf7, 0xff]);
        b
    }

    #[test]
    fn deconstruct() {
        let b = with_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 24);
        assert_eq!(p.ident(), 0x1234);
        assert_eq!(p.flags_frag(), DONT_FRAGMENT);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), 1);
        assert_eq!(p.src(), [10, 0, 0, 1]);
        assert_eq!(p.dst(), [10, 0, 0, 2]);
        assert_eq!(p.payload(), &[8, 0, 0xf7, 0xff]);
        assert_eq!(checksum::of(&b[..20]), 0);
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 24];
        b[..20].copy_from_slice(&HDR);
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_tos(0);
        p.set_ttl(64);
        p.set_src([10, 0, 0, 1]);
        p.set_dst([10, 0, 0, 2]);
        p.set_total_len(24);
        p.fill_checksum();
        assert_eq!(&b[..20], &with_checksum()[..20]);
    }

    #[test]
    fn emit() {
        let r = Repr {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            protocol: 1,
            tos: 0,
            ttl: 64,
            ident: 0x1234,
            flags_frag: DONT_FRAGMENT,
            payload_len: 4,
        };
        let mut out = vec![];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &with_checksum()[..20]);
    }

    #[test]
    fn lengths_are_checked() {
        let b = with_checksum();
        assert_eq!(
            Packet::new_checked(&b[..23]).unwrap_err(),
            Error::Truncated(Header::Ipv4)
        );
        let mut bad = b;
        bad[0] = 0x44;
        assert_eq!(
            Packet::new_checked(&bad[..]).unwrap_err(),
            Error::Malformed(Header::Ipv4)
        );
        let mut short = b;
        short[3] = 19;
        assert!(Packet::new_checked(&short[..]).is_err());
    }
}
