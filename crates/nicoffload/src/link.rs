//! Link state notifications: which interfaces are up, have carrier, and what their MTU
//! is, as the kernel announces changes (rtnetlink `RTM_NEWLINK` / `RTM_DELLINK` on the
//! `RTNLGRP_LINK` multicast group, `man 7 rtnetlink`).
//!
//! A switch keeps one [`LinkWatch`] on a thread of its own: [`LinkWatch::recv`] blocks
//! until the kernel reports changes. Subscribe first, then read the current state with
//! [`LinkWatch::dump`], so no change between the two is lost.

use std::io;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage, State};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols, Socket, SocketAddr};

/// `RTNLGRP_LINK` (include/uapi/linux/rtnetlink.h) as a legacy group bit (`RTMGRP_LINK`).
const RTMGRP_LINK: u32 = 1;

/// One interface's state as the kernel reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEvent {
    /// Interface index.
    pub ifindex: u32,
    /// Interface name (`IFLA_IFNAME`; empty if the message had none).
    pub ifname: String,
    /// Administratively up (`IFF_UP`).
    pub admin_up: bool,
    /// Operationally up: `IFF_RUNNING` (carrier, RFC 2863 operstate up or unknown).
    pub running: bool,
    /// MTU in bytes (`IFLA_MTU`; 0 if the message had none).
    pub mtu: u32,
    /// The interface was removed (`RTM_DELLINK`).
    pub removed: bool,
}

impl LinkEvent {
    /// Whether frames can be sent: up, running, and not removed.
    pub fn usable(&self) -> bool {
        self.admin_up && self.running && !self.removed
    }

    fn from_message(m: &LinkMessage, removed: bool) -> Self {
        let mut e = LinkEvent {
            ifindex: m.header.index,
            ifname: String::new(),
            admin_up: m.header.flags.contains(LinkFlags::Up),
            running: m.header.flags.contains(LinkFlags::Running),
            mtu: 0,
            removed,
        };
        for a in &m.attributes {
            match a {
                LinkAttribute::IfName(n) => e.ifname = n.clone(),
                LinkAttribute::Mtu(v) => e.mtu = *v,
                // IFF_RUNNING mirrors operstate (up or unknown); a dormant or
                // lower-layer-down state says otherwise.
                LinkAttribute::OperState(State::Down | State::LowerLayerDown | State::Dormant) => {
                    e.running = false
                }
                _ => {}
            }
        }
        e
    }
}

/// A netlink socket subscribed to link changes.
pub struct LinkWatch {
    socket: Socket,
    seq: u32,
}

impl std::os::fd::AsRawFd for LinkWatch {
    /// The netlink socket (e.g. to poll it or set `SO_RCVTIMEO`).
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.socket.as_raw_fd()
    }
}

impl LinkWatch {
    /// Opens a `NETLINK_ROUTE` socket subscribed to `RTNLGRP_LINK`.
    ///
    /// # Errors
    ///
    /// The socket or its bind failed (e.g. netlink unavailable in a sandbox).
    pub fn new() -> io::Result<Self> {
        let mut socket = Socket::new(protocols::NETLINK_ROUTE)?;
        socket.bind(&SocketAddr::new(0, RTMGRP_LINK))?;
        Ok(LinkWatch { socket, seq: 0 })
    }

    /// Asks the kernel for every interface's state (`RTM_GETLINK` dump); the answers
    /// arrive through [`LinkWatch::recv`] like notifications.
    ///
    /// # Errors
    ///
    /// The request could not be sent.
    pub fn dump(&mut self) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = self.seq;
        let mut msg = NetlinkMessage::new(
            header,
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::GetLink(LinkMessage::default())),
        );
        msg.finalize();
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        self.socket.send(&buf, 0)?;
        Ok(())
    }

    /// Blocks until the kernel sends link messages and returns them (a datagram may hold
    /// several). Messages that are not link state (dump ends, acks) are skipped.
    ///
    /// # Errors
    ///
    /// Receiving failed (`ENOBUFS`: notifications were lost because the socket's buffer
    /// overflowed; call [`LinkWatch::dump`] to resynchronise).
    pub fn recv(&mut self) -> io::Result<Vec<LinkEvent>> {
        let (datagram, _) = self.socket.recv_from_full()?;
        let mut out = Vec::new();
        let mut off = 0;
        while off + 16 <= datagram.len() {
            let len =
                u32::from_ne_bytes(datagram[off..off + 4].try_into().expect("4 bytes")) as usize;
            if len < 16 || off + len > datagram.len() {
                break;
            }
            if let Ok(m) =
                NetlinkMessage::<RouteNetlinkMessage>::deserialize(&datagram[off..off + len])
            {
                match m.payload {
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) => {
                        out.push(LinkEvent::from_message(&l, false))
                    }
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelLink(l)) => {
                        out.push(LinkEvent::from_message(&l, true))
                    }
                    _ => {}
                }
            }
            off += (len + 3) & !3;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dump reports `lo`, up and running, with its MTU.
    #[test]
    fn dump_reports_loopback() {
        let mut w = match LinkWatch::new() {
            Ok(w) => w,
            Err(e) => panic!("netlink route socket: {e}"),
        };
        w.dump().unwrap();
        let mut seen = None;
        for _ in 0..64 {
            let ev = w.recv().unwrap();
            if let Some(lo) = ev.into_iter().find(|e| e.ifname == "lo") {
                seen = Some(lo);
                break;
            }
        }
        let lo = seen.expect("lo in the RTM_GETLINK dump");
        assert!(lo.usable(), "{lo:?}");
        let mtu: u32 = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(lo.mtu, mtu);
    }
}
