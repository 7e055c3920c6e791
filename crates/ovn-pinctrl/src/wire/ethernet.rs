//! Ethernet II frames with at most one IEEE 802.1Q tag.
//!
//! After [`Frame::new_checked`], no accessor panics.

use crate::error::{Error, Header, Result};

/// Byte ranges of the header.
mod field {
    use std::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const TYPE: Range<usize> = 12..14;
    /// With a tag: its TCI, then the inner EtherType.
    pub const TCI: Range<usize> = 14..16;
    pub const INNER_TYPE: Range<usize> = 16..18;
}

/// Untagged header length.
pub const HEADER_LEN: usize = 14;
/// Length of one 802.1Q tag.
pub const VLAN_LEN: usize = 4;
/// The 802.1Q TPID.
pub const TPID_8021Q: u16 = 0x8100;
/// IPv4's EtherType.
pub const IPV4: u16 = 0x0800;
/// IPv6's EtherType.
pub const IPV6: u16 = 0x86dd;
/// ARP's EtherType.
pub const ARP: u16 = 0x0806;
/// RARP's EtherType.
pub const RARP: u16 = 0x8035;

/// A view of an Ethernet frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8], r: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([b[r.start], b[r.start + 1]])
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// A view without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// A view of a buffer holding at least the whole header (and its tag).
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Frame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Whether the header (with its tag, if any) fits.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || (self.outer_type() == TPID_8021Q && len < HEADER_LEN + VLAN_LEN) {
            return Err(Error::Truncated(Header::Ethernet));
        }
        Ok(())
    }

    fn outer_type(&self) -> u16 {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return 0;
        }
        be16(b, field::TYPE)
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    /// Source address.
    pub fn src(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    /// The 802.1Q tag's TCI, if tagged.
    pub fn tci(&self) -> Option<u16> {
        (self.outer_type() == TPID_8021Q).then(|| be16(self.buffer.as_ref(), field::TCI))
    }

    /// The EtherType of the payload (inside the tag, if any).
    pub fn ethertype(&self) -> u16 {
        match self.tci() {
            Some(_) => be16(self.buffer.as_ref(), field::INNER_TYPE),
            None => self.outer_type(),
        }
    }

    /// Header length: 14, or 18 with a tag.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + if self.tci().is_some() { VLAN_LEN } else { 0 }
    }

    /// The payload (the L3 header on).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    pub fn set_dst(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }

    /// Sets the tag's TCI; does nothing on an untagged frame.
    pub fn set_tci(&mut self, tci: u16) {
        if self.tci().is_some() {
            self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.to_be_bytes());
        }
    }
}

/// What an Ethernet header says, to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Destination.
    pub dst: [u8; 6],
    /// Source.
    pub src: [u8; 6],
    /// The 802.1Q TCI, if tagged (as on the wire: OVS's CFI "present" bit
    /// is not part of it).
    pub tci: Option<u16>,
    /// The payload's EtherType.
    pub ethertype: u16,
}

impl Repr {
    /// Header length in bytes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + if self.tci.is_some() { VLAN_LEN } else { 0 }
    }

    /// Appends the header to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.dst);
        out.extend_from_slice(&self.src);
        if let Some(tci) = self.tci {
            out.extend_from_slice(&TPID_8021Q.to_be_bytes());
            out.extend_from_slice(&tci.to_be_bytes());
        }
        out.extend_from_slice(&self.ethertype.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAGGED: [u8; 20] = [
        1, 2, 3, 4, 5, 6, 10, 11, 12, 13, 14, 15, 0x81, 0x00, 0x20, 0x0a, 0x08, 0x00, 0x45, 0,
    ];

    #[test]
    fn deconstruct() {
        let f = Frame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(f.dst(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(f.src(), [10, 11, 12, 13, 14, 15]);
        assert_eq!(f.tci(), Some(0x200a));
        assert_eq!(f.ethertype(), IPV4);
        assert_eq!(f.payload(), &[0x45, 0]);
    }

    #[test]
    fn construct() {
        let mut buf = [0xa5u8; 20];
        buf[12..14].copy_from_slice(&[0x81, 0x00]);
        let mut f = Frame::new_checked(&mut buf[..]).unwrap();
        f.set_dst([1, 2, 3, 4, 5, 6]);
        f.set_src([10, 11, 12, 13, 14, 15]);
        f.set_tci(0x200a);
        assert_eq!(&buf[..16], &TAGGED[..16]);
    }

    #[test]
    fn emit() {
        let r = Repr {
            dst: [1, 2, 3, 4, 5, 6],
            src: [10, 11, 12, 13, 14, 15],
            tci: Some(0x200a),
            ethertype: IPV4,
        };
        let mut out = Vec::new();
        r.emit(&mut out);
        assert_eq!(out.len(), r.buffer_len());
        assert_eq!(out, &TAGGED[..18]);
    }

    #[test]
    fn a_tag_cut_short_is_truncated() {
        assert!(Frame::new_checked(&TAGGED[..16]).is_err());
        assert!(Frame::new_checked(&TAGGED[..13]).is_err());
    }
}
