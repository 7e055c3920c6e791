//! Connection tracking for the logical pipeline: the [`Tracker`] the interpreter and
//! the cached programs ask, over the switch's [`conntrack::Conntrack`] (shared by
//! every PMD), for one frame at a time.
//!
//! The frame's IP packet is parsed once; each step runs in the zone the pipeline
//! names. A step in the same zone as the one before (OVN's `ct_next` then
//! `ct_commit` in the stateful stage) takes the cached-connection path
//! ([`conntrack::Conntrack::execute_next`]): TCP's state machine runs once per zone
//! and packet, as in Open vSwitch. A commit the table's or the zone's limit refuses
//! is remembered: the frame is dropped and counted (`ct_table_full`, `ct_zone_full`,
//! `nat_exhausted`).
//!
//! A step that translates the packet (NAT) changes the packet the following steps
//! see: the tracker keeps the packet as translated so far, as the frame will be once
//! its outputs are rewritten.

use conntrack::{
    Checksums, Conntrack, CtAction, Endpoints, NatResult, Packet, Prepared, Refused, L4,
};
use ovn_lflow::Flow;

use crate::model::lflow::{AffinityKey, CtReq, CtResult, LbAffinity, Origin, Tracker, Zones};

/// Milliseconds on a clock that starts with the process (the tracker's timeouts).
pub fn now_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}

/// Connection tracking for one frame.
pub struct LiveCt<'a> {
    ct: &'a Conntrack,
    zones: &'a Zones,
    /// The frame's IP packet as received (`None`: not IP, or it did not parse: every
    /// step `inv`).
    received: Option<Packet>,
    /// The packet as the steps so far translated it.
    pkt: Option<Packet>,
    /// The frame's lookup, made at its first step and used in every zone.
    prep: Option<Prepared>,
    now_ms: u64,
    last: Option<conntrack::CtResult>,
    /// What NAT did in the step of `last`, carried to the next step with it.
    nat: Option<NatResult>,
    /// A commit refused by a limit.
    pub refused: Option<Refused>,
    /// The frame whole and its fields, when the interpreter runs: a packet the
    /// pipeline made of it (a controller action's, a DHCP reply) or whose addresses
    /// it changed is tracked as that packet, built from them.
    whole: Option<(&'a [u8], &'a Flow)>,
    /// The load balancers' affinity sessions.
    affinity: Option<&'a LbAffinity>,
}

impl<'a> LiveCt<'a> {
    /// The tracker for a frame whose IP packet is `pkt` (`None`: not IP, or it did not
    /// parse).
    pub fn new(ct: &'a Conntrack, zones: &'a Zones, pkt: Option<Packet>, now_ms: u64) -> Self {
        LiveCt {
            ct,
            zones,
            received: pkt,
            pkt,
            prep: None,
            now_ms,
            last: None,
            nat: None,
            refused: None,
            whole: None,
            affinity: None,
        }
    }

    /// The endpoints of the frame's TCP or UDP packet as received (`None` for other
    /// frames): what a wildcard program's results are relative to.
    pub fn received_endpoints(&self) -> Option<Endpoints> {
        let p = self.received.as_ref()?;
        let (src_port, dst_port) = ports(p)?;
        Some(Endpoints {
            src: p.src,
            dst: p.dst,
            src_port,
            dst_port,
        })
    }

    /// The endpoints and IP protocol of the packet as the steps so far translated it
    /// (ports 0 but for TCP and UDP); `None` when not IP.
    pub fn current(&self) -> Option<(Endpoints, u8)> {
        let p = self.pkt.as_ref()?;
        let (src_port, dst_port) = ports(p).unwrap_or((0, 0));
        let e = Endpoints {
            src: p.src,
            dst: p.dst,
            src_port,
            dst_port,
        };
        Some((e, p.proto()))
    }

    /// The tracker of a frame that goes on alone after steps run with others
    /// ([`super::batch`]), where they left it: its packet translated as theirs, its
    /// lookup made, its last step's answer and what NAT did in it.
    pub fn resumed(mut self, r: &super::batch::Resume) -> Self {
        if let Some(e) = &r.moved {
            self.translate(e);
        }
        self.prep = Some(r.prep);
        (self.last, self.nat) = match r.last {
            Some((last, nat)) => (Some(last), nat),
            None => (None, None),
        };
        self
    }

    /// Takes `r` as the answer to a step run for the frame with others (and `nat`,
    /// what NAT did in it), as [`step`](Self::step) takes its own.
    pub fn answered(&mut self, r: conntrack::CtResult, nat: Option<NatResult>) -> CtResult {
        self.nat = nat;
        self.settle(r)
    }

    /// With the load balancers' affinity sessions `a` (`chk_lb_aff`, `commit_lb_aff`).
    pub fn with_affinity(mut self, a: &'a LbAffinity) -> Self {
        self.affinity = Some(a);
        self
    }

    /// The tracker with the frame's whole bytes and fields at hand (the interpreter's
    /// runs).
    pub fn with_frame<'b>(self, frame: &'b [u8], fields: &'b Flow) -> LiveCt<'b>
    where
        'a: 'b,
    {
        LiveCt {
            ct: self.ct,
            zones: self.zones,
            received: self.received,
            pkt: self.pkt,
            prep: self.prep,
            now_ms: self.now_ms,
            last: self.last,
            nat: self.nat,
            refused: self.refused,
            whole: Some((frame, fields)),
            affinity: self.affinity,
        }
    }

    /// The IP packet a step in the pipeline concerns: the frame's, unless the pipeline
    /// made another one of it.
    fn packet_of(&self, flow: &Flow, origin: &Origin) -> Option<Packet> {
        let Some((frame, fields)) = self.whole else {
            return self.pkt;
        };
        let same = matches!(origin, Origin::Received) && same_tuple(flow, fields);
        if same {
            return self.received;
        }
        let made = match origin {
            Origin::Received => {
                let mut f = frame.to_vec();
                // Copying the fields into the frame decides nothing (the step's result
                // is what a cached program checks): not noted as read.
                ovn_pinctrl::rewrite(&mut f, &flow.detached());
                Some(f)
            }
            Origin::Dhcp(reply) => Some(reply.frame(flow)),
            Origin::Built { action, at } => ovn_pinctrl::build(*action, frame, at, flow).ok(),
            Origin::DhcpTraced(_) | Origin::Traced(_) => None,
        }?;
        let (_, off) = super::parse::flow_of(&made, 0);
        packet(&made, off.l3?, made.len())
    }

    /// Runs `act` on the packet `pkt` is.
    fn step_on(&mut self, pkt: (&Flow, &Origin), act: &CtAction) -> CtResult {
        let p = self.packet_of(pkt.0, pkt.1);
        if p == self.pkt {
            return self.step(act);
        }
        if p == self.received {
            // Back to the packet as received (a branch of the pipeline before a NAT
            // step): its own steps from here.
            self.pkt = self.received;
            self.prep = None;
            self.last = None;
            return self.step(act);
        }
        // Another packet: its own step (no cached connection of the frame's applies).
        let Some(p) = p else {
            return CtResult {
                state: u32::from((conntrack::CtState::INV | conntrack::CtState::TRK).bits()),
                ..CtResult::default()
            };
        };
        let mut nat = None;
        let r = self
            .ct
            .execute_nat(&p, &Prepared::of(&p), act, self.now_ms, &mut nat);
        if act.commit && r.refused.is_some() {
            self.refused = r.refused;
        }
        result_of(&r, nat)
    }

    /// Runs `act`: the cached-connection path after a step in the same zone.
    pub fn step(&mut self, act: &CtAction) -> CtResult {
        let Some(pkt) = &self.pkt else {
            return CtResult {
                state: u32::from((conntrack::CtState::INV | conntrack::CtState::TRK).bits()),
                ..CtResult::default()
            };
        };
        // What a step returns is read field by field here and copied into `self`
        // only after: a copy read whole right after it was written field by field
        // stalls the PMD (the CPU cannot forward it from its store buffer).
        let (ct, now, last) = (self.ct, self.now_ms, self.last.as_ref());
        let r = match &self.prep {
            Some(prep) => execute(ct, (pkt, prep), act, now, last, &mut self.nat),
            None => {
                let prep = Prepared::of(pkt);
                let r = execute(ct, (pkt, &prep), act, now, last, &mut self.nat);
                self.prep = Some(prep);
                r
            }
        };
        if act.commit && r.refused.is_some() {
            self.refused = r.refused;
        }
        self.settle(r)
    }

    /// The step's answer `r` (what NAT did in `self.nat`): the packet translated as it
    /// says, kept as the last answer.
    fn settle(&mut self, r: conntrack::CtResult) -> CtResult {
        let out = result_of(&r, self.nat);
        let translated = r.state.translated();
        if let Some(n) = self.nat.filter(|_| translated) {
            self.translate(&n.packet);
            if let Some(inner) = &n.inner {
                self.translate_embedded(inner);
            }
        }
        self.last = Some(r);
        out
    }

    /// An ICMP error's embedded header now has `e`'s addresses and ports: a later step
    /// finds the connection by the header as translated.
    fn translate_embedded(&mut self, e: &Endpoints) {
        let Some(p) = &mut self.pkt else { return };
        if let L4::Icmp(conntrack::IcmpMessage { inner: Some(t), .. }) = &mut p.l4 {
            (t.src, t.dst, t.src_port, t.dst_port) = (e.src, e.dst, e.src_port, e.dst_port);
            self.prep = None;
        }
    }

    /// The packet now has `e`'s addresses and ports.
    fn translate(&mut self, e: &Endpoints) {
        let Some(p) = &mut self.pkt else { return };
        if (p.src, p.dst) == (e.src, e.dst) && ports(p) == Some((e.src_port, e.dst_port)) {
            return;
        }
        *p = moved(p, e);
        self.prep = None;
    }
}

/// `p` with `e`'s addresses, and its ports for TCP and UDP.
pub fn moved(p: &Packet, e: &Endpoints) -> Packet {
    let mut q = *p;
    q.src = e.src;
    q.dst = e.dst;
    match &mut q.l4 {
        L4::Tcp(seg) => (seg.src_port, seg.dst_port) = (e.src_port, e.dst_port),
        L4::Udp { src_port, dst_port } => (*src_port, *dst_port) = (e.src_port, e.dst_port),
        L4::Icmp(_) | L4::Other { .. } => {}
    }
    q
}

/// Runs `act` on `pkt` (with its lookup `prep`) after the step that answered `last`
/// (`None`: the frame's first): the cached-connection path when in the same zone.
fn execute(
    ct: &Conntrack,
    (pkt, prep): (&Packet, &Prepared),
    act: &CtAction,
    now_ms: u64,
    last: Option<&conntrack::CtResult>,
    nat: &mut Option<NatResult>,
) -> conntrack::CtResult {
    match last {
        Some(prev) if prev.zone == act.zone => {
            ct.execute_next_nat(pkt, prep, act, now_ms, prev, nat)
        }
        _ => ct.execute_nat(pkt, prep, act, now_ms, nat),
    }
}

/// The TCP or UDP ports of `p`.
fn ports(p: &Packet) -> Option<(u16, u16)> {
    match p.l4 {
        L4::Tcp(seg) => Some((seg.src_port, seg.dst_port)),
        L4::Udp { src_port, dst_port } => Some((src_port, dst_port)),
        _ => None,
    }
}

/// The pipeline's view of a conntrack result and what NAT did.
pub(super) fn result_of(r: &conntrack::CtResult, nat: Option<NatResult>) -> CtResult {
    CtResult {
        state: u32::from(r.state.bits()),
        mark: r.mark,
        label: r.label,
        nat: nat.map(Into::into),
    }
}

impl Tracker for LiveCt<'_> {
    fn ct(&mut self, req: &CtReq, pkt: (&Flow, &Origin)) -> CtResult {
        self.step_on(pkt, &req.action())
    }

    fn zone(&mut self, dp: u32, port: u16) -> u16 {
        self.zones.of(dp, port)
    }

    fn lb_affinity(&mut self, key: &AffinityKey) -> Option<(std::net::IpAddr, u16)> {
        self.affinity?.lookup(key, self.now_ms)
    }

    fn commit_lb_affinity(&mut self, key: AffinityKey, b: (std::net::IpAddr, u16), t: u16) {
        if let Some(a) = self.affinity {
            a.commit(key, b, t, self.now_ms);
        }
    }
}

/// [`packet`], as the parse's result: a frame read whole is parsed straight into the
/// caller's place (converted to an `Option`, the packet would be copied right after it
/// was written, a stall a frame).
pub fn parse_packet(
    hdr: &[u8],
    l3: usize,
    frame_len: usize,
) -> Result<Packet, conntrack::ParseError> {
    match hdr.get(l3..) {
        Some(b) if hdr.len() >= frame_len => conntrack::parse(b, Checksums::Trust),
        _ => packet(hdr, l3, frame_len).ok_or(conntrack::ParseError::Truncated),
    }
}

/// The IP packet of a frame for the tracker, from its first `hdr.len()` bytes (its
/// headers: the payload is not read) and its length `frame_len`: the IP length fields
/// of a copy, and a UDP header's, are cut to the bytes at hand, and a TCP segment's
/// payload length is then taken from the original header (a 64 KiB TSO frame is not
/// read whole).
pub fn packet(hdr: &[u8], l3: usize, frame_len: usize) -> Option<Packet> {
    let b = hdr.get(l3..)?;
    if hdr.len() >= frame_len {
        return conntrack::parse(b, Checksums::Trust).ok();
    }
    let off = super::parse::offsets_of(hdr);
    let mut copy = b.to_vec();
    let (orig_payload, hdr_len) = match copy.first()? >> 4 {
        4 => {
            let total = usize::from(u16::from_be_bytes([*copy.get(2)?, *copy.get(3)?]));
            let n = (copy.len() as u16).to_be_bytes();
            copy[2..4].copy_from_slice(&n);
            (total, usize::from(copy[0] & 0x0f) * 4)
        }
        6 => {
            let payload = usize::from(u16::from_be_bytes([*copy.get(4)?, *copy.get(5)?]));
            let n = (copy.len().checked_sub(40)? as u16).to_be_bytes();
            copy[4..6].copy_from_slice(&n);
            (payload + 40, 40)
        }
        _ => return None,
    };
    if let (17, Some(l4)) = (off.proto, off.l4) {
        // A UDP header's length too: the datagram is cut where the copy ends.
        let at = l4.checked_sub(l3)?;
        let have = copy.len().checked_sub(at)?;
        let len = usize::from(u16::from_be_bytes([*copy.get(at + 4)?, *copy.get(at + 5)?]));
        let n = (len.min(have) as u16).to_be_bytes();
        copy[at + 4..at + 6].copy_from_slice(&n);
    }
    let mut p = conntrack::parse(&copy, Checksums::Trust).ok()?;
    if let L4::Tcp(seg) = &mut p.l4 {
        // The TCP header's offset in the copy: after the IP header and any extension
        // headers the parse walked (what it left as payload is the copy's tail).
        let tcp_at = copy.len() - seg.payload_len as usize;
        let tcp_end_in_ip = tcp_at.max(hdr_len);
        seg.payload_len = orig_payload.saturating_sub(tcp_end_in_ip) as u32;
    }
    Some(p)
}

/// Whether `a` and `b` are one connection's packet in one direction: addresses,
/// protocol, ports or ICMP type and code.
fn same_tuple(a: &Flow, b: &Flow) -> bool {
    use ovn_lflow::Field::*;
    [
        EthType, Ipv4Src, Ipv4Dst, Ipv6Src, Ipv6Dst, IpProto, TcpSrc, TcpDst, UdpSrc, UdpDst,
        SctpSrc, SctpDst, Icmpv4Type, Icmpv4Code, Icmpv6Type, Icmpv6Code,
    ]
    .iter()
    .all(|f| a.peek(*f) == b.peek(*f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::lflow::HDR_BYTES;

    /// An Ethernet frame of a UDP datagram with `payload` bytes, over IPv4 (else IPv6).
    fn udp_frame(v4: bool, payload: usize) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let b = if v4 {
            b.ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        } else {
            b.ipv6([0xfd; 16], [0xfe; 16], 64)
        };
        let b = b.udp(40002, 5001);
        let data = vec![7u8; payload];
        let mut f = Vec::with_capacity(b.size(payload));
        b.write(&mut f, &data).expect("a frame");
        f
    }

    #[test]
    fn a_datagram_longer_than_the_bytes_read_is_its_connection_s_packet() {
        for v4 in [true, false] {
            let f = udp_frame(v4, 600);
            for read in [f.len(), HDR_BYTES, 64] {
                let p = parse_packet(&f[..read], 14, f.len())
                    .unwrap_or_else(|e| panic!("v4 {v4}, {read} of {} B read: {e:?}", f.len()));
                assert_eq!(
                    p.l4,
                    conntrack::L4::Udp {
                        src_port: 40002,
                        dst_port: 5001
                    },
                    "v4 {v4}, {read} B read"
                );
                assert!(!p.fragment);
            }
        }
    }
}
