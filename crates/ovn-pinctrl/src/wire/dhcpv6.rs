//! DHCPv6 client/server messages (RFC 8415 §8, §21).
//!
//! After [`Message::new_checked`], no accessor panics: the buffer holds the
//! message type and transaction id. Options are read with bounds checks.

use crate::error::{Error, Header, Result};

/// Message types (RFC 8415 §7.3).
pub mod msg {
    /// SOLICIT.
    pub const SOLICIT: u8 = 1;
    /// ADVERTISE.
    pub const ADVERTISE: u8 = 2;
    /// REQUEST.
    pub const REQUEST: u8 = 3;
    /// CONFIRM.
    pub const CONFIRM: u8 = 4;
    /// RENEW.
    pub const RENEW: u8 = 5;
    /// REBIND.
    pub const REBIND: u8 = 6;
    /// REPLY.
    pub const REPLY: u8 = 7;
    /// RELEASE.
    pub const RELEASE: u8 = 8;
    /// DECLINE.
    pub const DECLINE: u8 = 9;
    /// INFORMATION-REQUEST.
    pub const INFORMATION_REQUEST: u8 = 11;
}

/// Option codes (RFC 8415 §21, RFC 3646).
pub mod opt {
    /// Client Identifier.
    pub const CLIENT_ID: u16 = 1;
    /// Server Identifier.
    pub const SERVER_ID: u16 = 2;
    /// Identity Association for Non-temporary Addresses.
    pub const IA_NA: u16 = 3;
    /// IA Address.
    pub const IA_ADDR: u16 = 5;
    /// DNS Recursive Name Server (RFC 3646).
    pub const DNS_SERVERS: u16 = 23;
    /// Domain Search List (RFC 3646).
    pub const DOMAIN_LIST: u16 = 24;
}

/// Length of the message type and transaction id.
pub const HEADER_LEN: usize = 4;

/// A view of a DHCPv6 message (the UDP payload).
#[derive(Debug, Clone, Copy)]
pub struct Message<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Message<T> {
    /// A view of a buffer holding at least the message type and
    /// transaction id.
    pub fn new_checked(buffer: T) -> Result<Message<T>> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated(Header::Dhcpv6));
        }
        Ok(Message { buffer })
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Transaction id.
    pub fn transaction_id(&self) -> [u8; 3] {
        let b = self.buffer.as_ref();
        [b[1], b[2], b[3]]
    }

    /// The options: (offset of the option in the message, code, value),
    /// ending at the first one that does not fit.
    pub fn options(&self) -> Options<'_> {
        Options {
            msg: self.buffer.as_ref(),
            at: HEADER_LEN,
        }
    }
}

/// One option of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opt<'a> {
    /// Offset of its header in the message.
    pub at: usize,
    /// Its code.
    pub code: u16,
    /// Its value.
    pub data: &'a [u8],
}

impl Opt<'_> {
    /// The whole option, header included, as it goes on the wire.
    pub fn wire_len(&self) -> usize {
        4 + self.data.len()
    }
}

/// Iterator over DHCPv6 options (see [`Message::options`]).
#[derive(Debug, Clone)]
pub struct Options<'a> {
    msg: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Options<'a> {
    type Item = Opt<'a>;

    fn next(&mut self) -> Option<Opt<'a>> {
        let h = self.msg.get(self.at..self.at + 4)?;
        let code = u16::from_be_bytes([h[0], h[1]]);
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let data = self.msg.get(self.at + 4..self.at + 4 + len)?;
        let o = Opt {
            at: self.at,
            code,
            data,
        };
        self.at += 4 + len;
        Some(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deconstruct() {
        let b = [
            1, 0xaa, 0xbb, 0xcc, 0, 1, 0, 2, 0xde, 0xad, 0, 3, 0, 12, 0, 0, 0, 7,
        ];
        let m = Message::new_checked(&b[..]).unwrap();
        assert_eq!(m.msg_type(), msg::SOLICIT);
        assert_eq!(m.transaction_id(), [0xaa, 0xbb, 0xcc]);
        let o: Vec<_> = m.options().collect();
        assert_eq!(o.len(), 1, "the IA_NA runs past the end");
        assert_eq!(o[0].code, opt::CLIENT_ID);
        assert_eq!(o[0].data, &[0xde, 0xad]);
        assert_eq!(o[0].wire_len(), 6);
        assert!(Message::new_checked(&b[..3]).is_err());
    }
}
