//! IPv6 headers (RFC 8200) and the extension headers in front of the
//! upper-layer header.
//!
//! After [`Packet::new_checked`], no accessor panics: the buffer holds the
//! fixed header and the payload length it states (Open vSwitch's
//! `ipv6_sanity_check`, which, like this, does not look at the version
//! nibble).

use crate::error::{Error, Header, Result};

/// Byte offsets of the fixed header's fields.
mod field {
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// Most extension headers walked before giving up on finding L4.
const MAX_EXT_HEADERS: usize = 16;

/// A view of an IPv6 packet.
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

    /// Whether the payload length fits the buffer.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated(Header::Ipv6));
        }
        if b.len() < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(Error::Truncated(Header::Ipv6));
        }
        Ok(())
    }

    fn word0(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    fn addr(&self, at: usize) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[at..at + 16]);
        a
    }

    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0xf_ffff
    }

    /// Payload length in bytes (extension headers included).
    pub fn payload_len(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::PAYLOAD_LEN], b[field::PAYLOAD_LEN + 1]])
    }

    /// The first next-header value.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        self.addr(field::SRC)
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        self.addr(field::DST)
    }

    /// The payload (extension headers and upper layer), Ethernet padding
    /// excluded.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// The upper-layer protocol and its offset from the start of the
    /// packet, past hop-by-hop, routing, destination options, fragment and
    /// AH headers (as Open vSwitch's `parse_ipv6_ext_hdrs()`). The offset
    /// is `None` for a fragment other than the first, or when the
    /// extension headers run past the payload.
    pub fn upper_layer(&self) -> (u8, Option<usize>, bool) {
        let p = self.payload();
        let mut next = self.next_header();
        let mut at = 0usize;
        let mut fragment = false;
        for _ in 0..MAX_EXT_HEADERS {
            let (len, later) = match next {
                0 | 43 | 60 => match p.get(at + 1) {
                    Some(&l) => ((usize::from(l) + 1) * 8, false),
                    None => return (next, None, fragment),
                },
                51 => match p.get(at + 1) {
                    Some(&l) => ((usize::from(l) + 2) * 4, false),
                    None => return (next, None, fragment),
                },
                44 => match p.get(at..at + 8) {
                    Some(h) => {
                        let fo = u16::from_be_bytes([h[2], h[3]]);
                        fragment |= fo & 0xfff9 != 0;
                        (8, fo & 0xfff8 != 0)
                    }
                    None => return (next, None, fragment),
                },
                _ => break,
            };
            next = p[at];
            at += len;
            if later {
                return (next, None, true);
            }
            if at > p.len() {
                return (next, None, fragment);
            }
        }
        (next, Some(HEADER_LEN + at), fragment)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets traffic class and flow label (the version nibble stays).
    pub fn set_class_and_label(&mut self, tc: u8, label: u32) {
        let version = self.word0() & 0xf000_0000;
        let w = version | (u32::from(tc) << 20) | (label & 0xf_ffff);
        self.buffer.as_mut()[..4].copy_from_slice(&w.to_be_bytes());
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::PAYLOAD_LEN..field::PAYLOAD_LEN + 2]
            .copy_from_slice(&len.to_be_bytes());
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = h;
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: [u8; 16]) {
        self.buffer.as_mut()[field::SRC..field::SRC + 16].copy_from_slice(&a);
    }

    /// Sets the destination address.
    pub fn set_dst(&mut self, a: [u8; 16]) {
        self.buffer.as_mut()[field::DST..field::DST + 16].copy_from_slice(&a);
    }
}

/// What a fixed header says, to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source.
    pub src: [u8; 16],
    /// Destination.
    pub dst: [u8; 16],
    /// Next header.
    pub next_header: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl Repr {
    /// Header length: 40 bytes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Appends the header to `out`.
    ///
    /// # Errors
    /// [`Error::TooLong`] if the payload exceeds 65535 bytes.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<()> {
        let len = u16::try_from(self.payload_len).map_err(|_| Error::TooLong(self.payload_len))?;
        let w = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xf_ffff);
        out.extend_from_slice(&w.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&[self.next_header, self.hop_limit]);
        out.extend_from_slice(&self.src);
        out.extend_from_slice(&self.dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet() -> Vec<u8> {
        let mut b = vec![0x60, 0x12, 0x34, 0x56, 0, 16, 0, 64];
        b.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        // Hop-by-hop (8 bytes) then UDP (8 bytes).
        b.extend_from_slice(&[17, 0, 5, 2, 0, 0, 1, 0]);
        b.extend_from_slice(&[0, 68, 0, 67, 0, 8, 0, 0]);
        b
    }

    #[test]
    fn deconstruct() {
        let b = packet();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.traffic_class(), 0x01);
        assert_eq!(p.flow_label(), 0x23456);
        assert_eq!(p.payload_len(), 16);
        assert_eq!(p.next_header(), 0);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src()[15], 1);
        assert_eq!(p.dst()[0..2], [0xff, 0x02]);
        assert_eq!(p.upper_layer(), (17, Some(48), false));
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 56];
        b[0] = 0x6a;
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_class_and_label(0x01, 0x23456);
        p.set_payload_len(16);
        p.set_hop_limit(64);
        let want = packet();
        p.set_src(want[8..24].try_into().unwrap());
        p.set_dst(want[24..40].try_into().unwrap());
        b[6] = 0;
        assert_eq!(&b[..40], &want[..40]);
    }

    #[test]
    fn emit() {
        let want = packet();
        let r = Repr {
            src: want[8..24].try_into().unwrap(),
            dst: want[24..40].try_into().unwrap(),
            next_header: 0,
            traffic_class: 1,
            flow_label: 0x23456,
            hop_limit: 64,
            payload_len: 16,
        };
        let mut out = vec![];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &want[..40]);
    }

    #[test]
    fn extension_headers_past_the_payload_hide_l4() {
        let mut b = packet();
        b[41] = 9; // hop-by-hop claims 80 bytes
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.upper_layer().1, None);
        assert_eq!(
            Packet::new_checked(&b[..50]).unwrap_err(),
            Error::Truncated(Header::Ipv6)
        );
    }
}
