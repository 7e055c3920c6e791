//! OVN provider networks in the data path: an uplink mapped to a physical network
//! (`--ovn-bridge-mappings`) carries the logical switches that have a `localnet` port
//! for it, each on its VLAN (ovn-architecture(7), "Logical Switches with localnet
//! ports"; OVN's `controller/physical.c` matches `dl_vlan` and strips the tag on the
//! way in, pushes it on the way out).
//!
//! - In: a frame received on such an uplink with a provider network's VLAN (or
//!   untagged, for an untagged network) is switched in that logical switch, without
//!   its tag. It is copied out of the receive buffer with the tag removed (the
//!   receive memory is read-only to the pipeline); the uplink's other frames are
//!   switched in its own domain as before, or decapsulated when the uplink carries a
//!   tunnel endpoint (its XDP program then steers tagged frames to vswitchd too; an
//!   untagged provider network cannot share such an uplink with the tunnel).
//! - Out: a frame of such a switch bound for the uplink gets the tag (802.1Q TPID,
//!   PCP 0) in a soft buffer ([`crate::datapath::offload::SoftFrames::tagged`]).

use super::packet::{FrameLoc, Pkt, RxBurst};
use super::pipeline::{Mode, Pipeline, Source};
use crate::model::domain::{DomainId, DomainKey};
use crate::model::fdb::Dest;
use crate::model::trunk::Ingress;
use crate::ports::host::{HostFrames, IN_LINEAR};
use crate::switch::topology::{TopoPort, Topology};

/// 802.1Q's TPID, in the frame's byte order.
pub const TPID_8021Q: [u8; 2] = [0x81, 0x00];

/// A burst's frames of provider networks, copied without their tags (buffers kept
/// across bursts).
#[derive(Debug, Default)]
pub struct Untagged {
    /// The frames' bytes, one after another.
    pub(super) buf: Vec<u8>,
    /// Each frame, in `buf` ([`IN_LINEAR`]).
    pub(super) pkts: Vec<Pkt>,
    /// Each frame's domain.
    pub(super) domains: Vec<DomainId>,
    /// The port's other frames.
    pub(super) rest: Vec<Pkt>,
}

/// The VLAN of a frame whose first bytes are `hdr`: (VLAN id, tagged).
#[inline]
fn vlan_of(hdr: &[u8]) -> (u16, bool) {
    if hdr.len() >= 16 && hdr[12..14] == TPID_8021Q {
        (u16::from_be_bytes([hdr[14], hdr[15]]) & 0x0fff, true)
    } else {
        (0, false)
    }
}

impl Untagged {
    /// Sorts `pkts` of `burst` by what `ingress` says of each frame's VLAN (None:
    /// untagged): frames to switch in another domain are copied here without their
    /// tag, those to switch as they are kept in `rest`, refused ones dropped. Returns
    /// how many were refused.
    pub(super) fn sort_by<'m, B: RxBurst<'m>>(
        &mut self,
        burst: &B,
        pkts: &[Pkt],
        mut ingress: impl FnMut(Option<u16>) -> Ingress,
    ) -> u64 {
        self.buf.clear();
        self.pkts.clear();
        self.domains.clear();
        self.rest.clear();
        let mut refused = 0;
        let mut hdr = [0u8; 16];
        for p in pkts {
            let n = burst.read(p, 0, &mut hdr);
            let (vlan, tagged) = vlan_of(&hdr[..n]);
            let d = match ingress(tagged.then_some(vlan)) {
                Ingress::Strip(d) if n >= 14 => d,
                Ingress::Refused => {
                    refused += 1;
                    continue;
                }
                _ => {
                    self.rest.push(*p);
                    continue;
                }
            };
            let start = self.buf.len();
            let len = p.len as usize;
            self.buf.resize(start + len, 0);
            let got = burst.read(p, 0, &mut self.buf[start..]);
            self.buf.truncate(start + got);
            // Without the tag: the MAC addresses move up over it.
            let cut = if tagged { 4 } else { 0 };
            self.buf.copy_within(start..start + 12, start + cut);
            self.pkts.push(Pkt {
                loc: FrameLoc {
                    head: 0,
                    start: (start + cut) as u32,
                    end: IN_LINEAR,
                },
                len: (got - cut) as u32,
                ..Pkt::default()
            });
            self.domains.push(d);
        }
        refused
    }

    /// Sorts `pkts` of `burst` from uplink `uplink`: provider network frames are copied
    /// here without their tag, the rest kept in `rest`.
    fn sort<'m, B: RxBurst<'m>>(&mut self, topo: &Topology, uplink: u16, burst: &B, pkts: &[Pkt]) {
        let underlay = topo.tunnels.is_underlay(uplink);
        self.sort_by(burst, pkts, |vid| {
            let tagged = vid.is_some();
            topo.ovn
                .localnet_domain(uplink, vid.unwrap_or(0))
                .filter(|_| tagged || !underlay)
                .map_or(Ingress::Own, Ingress::Strip)
        });
    }
}

impl Pipeline {
    /// Switches a burst from uplink `tp`, which carries provider networks: their frames
    /// in their logical switches (in runs of one domain), the others in the uplink's
    /// own domain.
    pub(super) fn localnet_rx<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        tp: &TopoPort,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        let mut u = std::mem::take(&mut self.untagged);
        u.sort(topo, tp.port.id, burst, pkts);
        if !u.rest.is_empty() {
            if topo.tunnels.is_underlay(tp.port.id) {
                self.decap(topo, &tp.port, queue, burst, &mut u.rest);
            } else {
                let src = Source::local(topo, tp);
                self.classify(topo, &src, burst, &mut u.rest);
                self.forward(topo, &src, queue, burst, &mut u.rest);
            }
        }
        self.switch_copied(topo, tp, queue, &mut u);
        self.untagged = u;
    }

    /// Switches the frames `u` copied (each in its domain), in runs of one domain.
    pub(super) fn switch_copied(
        &mut self,
        topo: &Topology,
        tp: &TopoPort,
        queue: u16,
        u: &mut Untagged,
    ) {
        // SAFETY: every frame described lies in `u.buf` (IN_LINEAR), which is not
        // changed while `frames` lives; the area is empty.
        let frames = unsafe { HostFrames::new(std::ptr::null(), 0, &u.buf) };
        self.switch_untagged(topo, tp, queue, &frames, &mut u.pkts, &u.domains);
    }

    /// Switches `pkts` (in `frames`, each in domain `domains[i]`) in runs of one domain.
    fn switch_untagged(
        &mut self,
        topo: &Topology,
        tp: &TopoPort,
        queue: u16,
        frames: &HostFrames<'_>,
        pkts: &mut [Pkt],
        domains: &[DomainId],
    ) {
        let mut i = 0;
        while i < pkts.len() {
            let domain = domains[i];
            let j = i + domains[i..].iter().take_while(|&&d| d == domain).count();
            let key = self
                .switch
                .domains
                .key(domain)
                .unwrap_or(DomainKey::Detached);
            let mode = Mode::of(topo, domain, key);
            let ovn_key = match mode {
                Mode::Ovn(o) => o.localnet.map_or(0, |l| l.key),
                _ => 0,
            };
            let src = Source {
                mode,
                ovn_key,
                port: &tp.port,
                domain,
                domain_key: key,
                acl: &tp.acl,
                learn: Dest::Port(tp.port.id),
                tep: None,
                in_port: u32::from(tp.port.id) | u32::from(domain) << 16,
                security: None,
                mac_limit: tp.mac_limit,
            };
            if matches!(mode, Mode::Ovn(o) if o.lflow) {
                let entry = super::lflow::Entry::Port;
                self.lflow(topo, &src, queue, frames, &mut pkts[i..j], entry);
            } else {
                self.classify(topo, &src, frames, &mut pkts[i..j]);
                self.forward(topo, &src, queue, frames, &mut pkts[i..j]);
            }
            i = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_of_reads_the_8021q_tag() {
        let mut f = [0u8; 18];
        f[12..14].copy_from_slice(&TPID_8021Q);
        f[14..16].copy_from_slice(&0x2064u16.to_be_bytes());
        assert_eq!(vlan_of(&f), (100, true), "PCP 1, VID 100");
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(vlan_of(&f), (0, false));
        assert_eq!(vlan_of(&f[..15]), (0, false), "too short for a tag");
    }
}
