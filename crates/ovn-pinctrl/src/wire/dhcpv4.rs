//! BOOTP/DHCPv4 messages (RFC 951, RFC 2131 §2, RFC 2132 §2).
//!
//! After [`Packet::new_checked`], no accessor panics: the buffer holds the
//! 236-byte fixed part. The magic cookie and the options are read with
//! bounds checks.

use crate::error::{Error, Header, Result};

/// Byte ranges of the fixed part.
mod field {
    use std::ops::Range;
    pub const OP: usize = 0;
    pub const FLAGS: Range<usize> = 10..12;
    pub const CIADDR: Range<usize> = 12..16;
    pub const YIADDR: Range<usize> = 16..20;
    pub const SIADDR: Range<usize> = 20..24;
    pub const COOKIE: Range<usize> = 236..240;
}

/// Length of the fixed part (op to file).
pub const HEADER_LEN: usize = 236;
/// The magic cookie that starts the options (RFC 2131 §3).
pub const MAGIC_COOKIE: u32 = 0x6382_5363;
/// BOOTREQUEST.
pub const OP_REQUEST: u8 = 1;
/// BOOTREPLY.
pub const OP_REPLY: u8 = 2;
/// The BROADCAST bit of the flags (RFC 2131 §2, figure 2).
pub const FLAG_BROADCAST: u16 = 0x8000;

/// Option codes this crate reads or writes (RFC 2132).
pub mod opt {
    /// Pad.
    pub const PAD: u8 = 0;
    /// Subnet mask.
    pub const NETMASK: u8 = 1;
    /// Requested IP address.
    pub const REQUESTED_IP: u8 = 50;
    /// IP address lease time.
    pub const LEASE_TIME: u8 = 51;
    /// DHCP message type.
    pub const MESSAGE_TYPE: u8 = 53;
    /// Renewal (T1) time.
    pub const T1: u8 = 58;
    /// Rebinding (T2) time.
    pub const T2: u8 = 59;
    /// Bootfile name.
    pub const BOOTFILE: u8 = 67;
    /// Etherboot (iPXE) encapsulated options: their presence marks an iPXE
    /// client.
    pub const ETHERBOOT: u8 = 175;
    /// OVN's `next_server` (sets `siaddr`; site-specific range).
    pub const NEXT_SERVER: u8 = 253;
    /// OVN's `bootfile_name_alt` (site-specific range).
    pub const BOOTFILE_ALT: u8 = 254;
    /// End.
    pub const END: u8 = 255;
}

/// DHCP message types (RFC 2132 §9.6).
pub mod msg {
    /// DHCPDISCOVER.
    pub const DISCOVER: u8 = 1;
    /// DHCPOFFER.
    pub const OFFER: u8 = 2;
    /// DHCPREQUEST.
    pub const REQUEST: u8 = 3;
    /// DHCPDECLINE.
    pub const DECLINE: u8 = 4;
    /// DHCPACK.
    pub const ACK: u8 = 5;
    /// DHCPNAK.
    pub const NAK: u8 = 6;
    /// DHCPRELEASE.
    pub const RELEASE: u8 = 7;
    /// DHCPINFORM.
    pub const INFORM: u8 = 8;
}

/// A view of a BOOTP/DHCP message (the UDP payload).
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view of a buffer holding the fixed part.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated(Header::Dhcpv4));
        }
        Ok(Packet { buffer })
    }

    fn addr(&self, r: std::ops::Range<usize>) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.buffer.as_ref()[r]);
        a
    }

    /// Message op code: 1 request, 2 reply.
    pub fn op(&self) -> u8 {
        self.buffer.as_ref()[field::OP]
    }

    /// Flags (bit 15: BROADCAST).
    pub fn flags(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::FLAGS];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Client IP address.
    pub fn ciaddr(&self) -> [u8; 4] {
        self.addr(field::CIADDR)
    }

    /// "Your" (client) IP address.
    pub fn yiaddr(&self) -> [u8; 4] {
        self.addr(field::YIADDR)
    }

    /// Next server's IP address.
    pub fn siaddr(&self) -> [u8; 4] {
        self.addr(field::SIADDR)
    }

    /// The magic cookie, if the buffer holds one.
    pub fn cookie(&self) -> Option<u32> {
        let b = self.buffer.as_ref().get(field::COOKIE)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The options after the cookie: (code, value) until END, skipping PAD,
    /// ending early at an option that does not fit (as pinctrl's loop).
    pub fn options(&self) -> Options<'_> {
        Options {
            rest: self.buffer.as_ref().get(field::COOKIE.end..).unwrap_or(&[]),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the op code.
    pub fn set_op(&mut self, op: u8) {
        self.buffer.as_mut()[field::OP] = op;
    }

    /// Sets `yiaddr`.
    pub fn set_yiaddr(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::YIADDR].copy_from_slice(&a);
    }

    /// Sets `siaddr`.
    pub fn set_siaddr(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::SIADDR].copy_from_slice(&a);
    }
}

/// Iterator over DHCP options (see [`Packet::options`]).
#[derive(Debug, Clone)]
pub struct Options<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Options<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        loop {
            match *self.rest {
                [] | [opt::END, ..] => return None,
                [opt::PAD, ref tail @ ..] => self.rest = tail,
                [code, len, ref tail @ ..] if tail.len() >= usize::from(len) => {
                    let (value, tail) = tail.split_at(usize::from(len));
                    self.rest = tail;
                    return Some((code, value));
                }
                _ => {
                    self.rest = &[];
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn discover() -> Vec<u8> {
        let mut b = vec![0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&[1, 1, 6, 0]);
        b[4..8].copy_from_slice(&[0x63, 0x59, 0xaa, 0x76]);
        b[10] = 0x80;
        b[28..34].copy_from_slice(&[0xf0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(&MAGIC_COOKIE.to_be_bytes());
        b.extend_from_slice(&[53, 1, 1, 0, 50, 4, 10, 0, 0, 4, 255]);
        b
    }

    #[test]
    fn deconstruct() {
        let b = discover();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.op(), OP_REQUEST);
        assert_eq!(p.flags(), FLAG_BROADCAST);
        assert_eq!(p.ciaddr(), [0; 4]);
        assert_eq!(p.cookie(), Some(MAGIC_COOKIE));
        let o: Vec<_> = p.options().collect();
        assert_eq!(o, vec![(53, &[1u8][..]), (50, &[10u8, 0, 0, 4][..])]);
    }

    #[test]
    fn construct() {
        let mut b = discover();
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_op(OP_REPLY);
        p.set_yiaddr([10, 0, 0, 4]);
        p.set_siaddr([10, 0, 0, 1]);
        assert_eq!(p.yiaddr(), [10, 0, 0, 4]);
        assert_eq!(p.siaddr(), [10, 0, 0, 1]);
        assert_eq!(b[0], 2);
    }

    #[test]
    fn an_option_cut_short_ends_the_walk() {
        let mut b = discover();
        b.truncate(b.len() - 3);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.options().count(), 1);
        assert!(Packet::new_checked(&b[..235]).is_err());
    }
}
