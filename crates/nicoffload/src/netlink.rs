//! A small synchronous netlink client: one request, its replies, its ack.
//!
//! Sockets are `netlink-sys` sockets used in blocking mode; messages are
//! built and parsed with `netlink-packet-core`, `netlink-packet-generic`,
//! `netlink-packet-route` and the `ethtool` crate's message types. Where the
//! rust-netlink crates have no message type (ethtool `FEATURES_GET` with
//! compact bitsets, `STRSET_GET`, `RSS_GET`, and the whole `netdev` family),
//! [`RawGenl`] carries hand-encoded attributes (see `attr`).

use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;

use netlink_packet_core::{
    DecodeError, Emitable, NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    NetlinkSerializable, NlasIterator, ParseableParametrized, NLM_F_ACK, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::{protocols, Socket};

/// `NLMSGERR_ATTR_MSG` from `<linux/netlink.h>`: the extended-ack text.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// Size of `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;

/// What a single netlink request can fail with, before the caller gives it
/// context (which interface, which request).
#[derive(Debug)]
pub(crate) enum NlError {
    /// The socket itself failed (create, bind, send, receive).
    Io(io::Error),
    /// The kernel answered with an error; `message` is its extended ack.
    Kernel {
        /// Positive errno.
        errno: i32,
        /// `NLMSGERR_ATTR_MSG`, when the kernel gave one.
        message: Option<String>,
    },
    /// A reply did not parse.
    Decode(DecodeError),
}

impl NlError {
    /// The errno, for kernel errors and socket errors that carry one.
    pub(crate) fn errno(&self) -> Option<i32> {
        match self {
            NlError::Io(e) => e.raw_os_error(),
            NlError::Kernel { errno, .. } => Some(*errno),
            NlError::Decode(_) => None,
        }
    }

    /// The error as an `io::Error`, with the kernel's extended ack appended.
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            NlError::Io(e) => e,
            NlError::Kernel { errno, message } => {
                let base = io::Error::from_raw_os_error(errno);
                match message {
                    Some(m) => io::Error::new(base.kind(), format!("{base} ({m})")),
                    None => base,
                }
            }
            NlError::Decode(e) => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
        }
    }
}

/// A blocking netlink socket with a sequence counter.
pub(crate) struct NlSocket {
    socket: Socket,
    seq: u32,
}

impl NlSocket {
    /// Opens and binds a socket of `protocol` (`NETLINK_ROUTE`,
    /// `NETLINK_GENERIC`), asking for extended acks with capped echo.
    pub(crate) fn new(protocol: isize) -> io::Result<Self> {
        let mut socket = Socket::new(protocol)?;
        socket.bind_auto()?;
        // Both are best-effort: an old kernel without them still answers,
        // only without the error text.
        let _ = socket.set_ext_ack(true);
        let _ = socket.set_cap_ack(true);
        Ok(Self { socket, seq: 0 })
    }

    /// A `NETLINK_GENERIC` socket.
    pub(crate) fn generic() -> io::Result<Self> {
        Self::new(protocols::NETLINK_GENERIC)
    }

    /// A `NETLINK_ROUTE` socket.
    pub(crate) fn route() -> io::Result<Self> {
        Self::new(protocols::NETLINK_ROUTE)
    }

    /// Sends `payload` with `message_type` as one `NLM_F_REQUEST | NLM_F_ACK`
    /// request and collects every reply up to the kernel's ack.
    pub(crate) fn request<P>(&mut self, message_type: u16, payload: P) -> Result<Vec<P>, NlError>
    where
        P: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK;
        header.sequence_number = seq;
        header.message_type = message_type;
        let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(payload));
        msg.finalize();
        // `finalize` sets the type from the payload; generic netlink payloads
        // report 0 until resolved, so put the resolved type back.
        msg.header.message_type = message_type;
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        self.socket.send(&buf, 0).map_err(NlError::Io)?;

        let mut replies = Vec::new();
        loop {
            let (datagram, _) = self.socket.recv_from_full().map_err(NlError::Io)?;
            let mut offset = 0;
            while offset < datagram.len() {
                let bytes = &datagram[offset..];
                let reply = NetlinkMessage::<P>::deserialize(bytes).map_err(NlError::Decode)?;
                let len = reply.header.length as usize;
                if len < NLMSG_HDRLEN {
                    return Err(NlError::Decode(DecodeError::from(
                        "netlink message shorter than its header",
                    )));
                }
                offset += (len + 3) & !3;
                if reply.header.sequence_number != seq {
                    continue;
                }
                match reply.payload {
                    NetlinkPayload::InnerMessage(p) => replies.push(p),
                    NetlinkPayload::Error(e) => match e.code {
                        None => return Ok(replies),
                        Some(code) => {
                            return Err(NlError::Kernel {
                                errno: code.get().abs(),
                                message: extack_message(&e.header),
                            })
                        }
                    },
                    NetlinkPayload::Done(_) => return Ok(replies),
                    NetlinkPayload::Noop | NetlinkPayload::Overrun(_) => {}
                    _ => {}
                }
            }
        }
    }

    /// Resolves a generic netlink family name to its id (`CTRL_CMD_GETFAMILY`).
    pub(crate) fn resolve_family(&mut self, name: &str) -> Result<u16, NlError> {
        let ctrl = GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName(name.to_owned())],
        };
        let msg = GenlMessage::from_payload(ctrl);
        // nlctrl has the static id GENL_ID_CTRL.
        let replies = self.request(libc::GENL_ID_CTRL as u16, msg)?;
        replies
            .iter()
            .flat_map(|r| r.payload.nlas.iter())
            .find_map(|a| match a {
                GenlCtrlAttrs::FamilyId(id) => Some(*id),
                _ => None,
            })
            .ok_or(NlError::Decode(DecodeError::from(
                "CTRL_CMD_GETFAMILY reply without CTRL_ATTR_FAMILY_ID",
            )))
    }

    /// One generic netlink request to the family whose id is `family_id`.
    pub(crate) fn genl_request<F>(&mut self, family_id: u16, payload: F) -> Result<Vec<F>, NlError>
    where
        F: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + Debug,
    {
        let mut msg = GenlMessage::from_payload(payload);
        msg.set_resolved_family_id(family_id);
        let replies = self.request(family_id, msg)?;
        Ok(replies.into_iter().map(|m| m.payload).collect())
    }
}

/// The extended-ack text in an `NLMSG_ERROR` payload after the error code.
/// With `NETLINK_CAP_ACK` the echoed request is only its `nlmsghdr`; the TLVs
/// follow it.
fn extack_message(after_code: &[u8]) -> Option<String> {
    let tlvs = after_code.get(NLMSG_HDRLEN..)?;
    NlasIterator::new(tlvs)
        .filter_map(Result::ok)
        .find(|nla| nla.kind() == NLMSGERR_ATTR_MSG)
        .map(|nla| {
            let v = nla.value();
            let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
            String::from_utf8_lossy(&v[..end]).into_owned()
        })
}

/// Names a generic netlink family for [`RawGenl`].
pub(crate) trait Family: Debug {
    /// The family name the kernel registers (`ETHTOOL_GENL_NAME`, ...).
    const NAME: &'static str;
    /// The family version (`ETHTOOL_GENL_VERSION`, ...).
    const VERSION: u8;
}

/// The `ethtool` generic netlink family (`<linux/ethtool_netlink.h>`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EthtoolFamily;
impl Family for EthtoolFamily {
    const NAME: &'static str = "ethtool";
    const VERSION: u8 = 1;
}

/// The `netdev` generic netlink family (`<linux/netdev.h>`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NetdevFamily;
impl Family for NetdevFamily {
    const NAME: &'static str = "netdev";
    const VERSION: u8 = 1;
}

/// A generic netlink message whose attributes are raw bytes: a command and
/// its already-encoded attribute stream.
#[derive(Debug, Clone)]
pub(crate) struct RawGenl<F> {
    /// The generic netlink command (`genlmsghdr.cmd`).
    pub(crate) cmd: u8,
    /// The encoded attributes.
    pub(crate) attrs: Vec<u8>,
    family: PhantomData<F>,
}

impl<F> RawGenl<F> {
    /// A message with command `cmd` and the encoded attributes `attrs`.
    pub(crate) fn new(cmd: u8, attrs: Vec<u8>) -> Self {
        Self {
            cmd,
            attrs,
            family: PhantomData,
        }
    }
}

impl<F: Family> GenlFamily for RawGenl<F> {
    fn family_name() -> &'static str {
        F::NAME
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        F::VERSION
    }
}

impl<F> Emitable for RawGenl<F> {
    fn buffer_len(&self) -> usize {
        self.attrs.len()
    }
    fn emit(&self, buffer: &mut [u8]) {
        buffer[..self.attrs.len()].copy_from_slice(&self.attrs);
    }
}

impl<F> ParseableParametrized<[u8], GenlHeader> for RawGenl<F> {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        Ok(Self::new(header.cmd, buf.to_vec()))
    }
}

/// Encoding and reading netlink attributes (`struct nlattr`, host byte
/// order, 4-byte aligned).
pub(crate) mod attr {
    /// `NLA_F_NESTED`.
    const NLA_F_NESTED: u16 = 1 << 15;
    /// Clears `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER`.
    const NLA_TYPE_MASK: u16 = !(3 << 14);

    /// Appends one attribute of `kind` with `value`, padded to 4 bytes.
    pub(crate) fn put(buf: &mut Vec<u8>, kind: u16, value: &[u8]) {
        let len = u16::try_from(4 + value.len()).expect("netlink attribute longer than 64 KiB");
        buf.extend_from_slice(&len.to_ne_bytes());
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(value);
        buf.resize((buf.len() + 3) & !3, 0);
    }

    /// Appends a nested attribute whose content is `inner`.
    pub(crate) fn put_nested(buf: &mut Vec<u8>, kind: u16, inner: &[u8]) {
        put(buf, kind | NLA_F_NESTED, inner);
    }

    /// Appends a u32 attribute.
    pub(crate) fn put_u32(buf: &mut Vec<u8>, kind: u16, value: u32) {
        put(buf, kind, &value.to_ne_bytes());
    }

    /// Iterates `(kind, value)` over an attribute stream (kind without the
    /// `NLA_F_NESTED` / byte-order flags), stopping at the first malformed
    /// attribute.
    pub(crate) fn iter(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
        std::iter::from_fn(move || {
            let len = usize::from(u16::from_ne_bytes(buf.get(..2)?.try_into().ok()?));
            let kind = u16::from_ne_bytes(buf.get(2..4)?.try_into().ok()?);
            if len < 4 || len > buf.len() {
                return None;
            }
            let value = &buf[4..len];
            buf = buf.get((len + 3) & !3..).unwrap_or(&[]);
            Some((kind & NLA_TYPE_MASK, value))
        })
    }

    /// The value of the first attribute of `kind`.
    pub(crate) fn find(buf: &[u8], kind: u16) -> Option<&[u8]> {
        iter(buf).find(|(k, _)| *k == kind).map(|(_, v)| v)
    }

    /// A u32 attribute's value.
    pub(crate) fn u32_of(value: &[u8]) -> Option<u32> {
        Some(u32::from_ne_bytes(value.get(..4)?.try_into().ok()?))
    }

    /// A u64 attribute's value.
    pub(crate) fn u64_of(value: &[u8]) -> Option<u64> {
        Some(u64::from_ne_bytes(value.get(..8)?.try_into().ok()?))
    }

    /// A NUL-terminated string attribute's value.
    pub(crate) fn str_of(value: &[u8]) -> String {
        let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
        String::from_utf8_lossy(&value[..end]).into_owned()
    }
}
