//! The overlay in the data path (DESIGN.md §3, §6): Geneve frames received on an
//! uplink that carries a tunnel endpoint are decapsulated and switched in their VNI's
//! domain, their source MACs learned behind the remote that sent them; frames bound
//! for a remote endpoint are encapsulated (segmented to the inner MSS in the same pass
//! when they are TSO frames) straight into the uplink's UMEM.

use std::collections::HashMap;
use std::net::IpAddr;

use geneve::encap::{TunnelConfig, TunnelTemplate};

use super::packet::{EncapItem, FrameLoc, Pkt, RxBurst};
use super::pipeline::{Pipeline, Source};
use crate::model::fdb::Dest;
use crate::model::tunnel::{RemoteId, Tep, TunnelDrop};
use crate::ports::{Port, PortKind};
use crate::switch::topology::Topology;

/// The ACL of tunnelled frames: none.
static NO_ACL: std::sync::LazyLock<crate::model::acl::PortAcl> =
    std::sync::LazyLock::new(|| crate::model::acl::PortAcl::new(Default::default(), 0));

/// ETHERTYPE of an outer IPv6 header, in the frame's byte order.
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];

/// What a template is for: endpoint, remote, VNI, next hop, and OVN's (ingress,
/// egress) keys ((0, 0): no OVN option).
type TemplateKey = (usize, RemoteId, u32, usize, (u16, u16));

/// A PMD's outer header templates (each holds its own IPv4 ID counter), built on first
/// use for a `TemplateKey` and dropped when the topology changes (paths may have
/// moved). OVN's option is part of the template: the ingress key is the source port's,
/// fixed for a burst, so a template per (ingress, egress) pair costs nothing per frame.
#[derive(Debug, Default)]
pub struct Templates {
    generation: u64,
    index: HashMap<TemplateKey, u32>,
    /// The templates.
    pub list: Vec<TunnelTemplate>,
}

impl Templates {
    fn reset_if(&mut self, generation: u64) {
        if self.generation != generation {
            self.generation = generation;
            self.index.clear();
            self.list.clear();
        }
    }

    /// The template for `key`, built with `cfg` if new; None if it cannot be built.
    fn get(&mut self, key: TemplateKey, cfg: impl FnOnce() -> TunnelConfig) -> Option<u32> {
        if let Some(&i) = self.index.get(&key) {
            return Some(i);
        }
        let t = TunnelTemplate::new(&cfg()).ok()?;
        let i = self.list.len() as u32;
        self.list.push(t);
        self.index.insert(key, i);
        Some(i)
    }
}

impl Pipeline {
    /// Decapsulates a burst from uplink `port` (which carries tunnel endpoints) and
    /// switches the inner frames, in runs of one (domain, remote).
    pub(super) fn decap<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        port: &Port,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        let mut inner = std::mem::take(&mut self.inner);
        let mut from = std::mem::take(&mut self.inner_from);
        inner.clear();
        from.clear();
        for p in pkts.iter() {
            let Some(bytes) = burst.bytes(p) else {
                continue;
            };
            let v6 = bytes.get(12..14) == Some(&ETHERTYPE_IPV6[..]);
            let Some((t, tep)) = topo
                .tunnels
                .on_uplink(port.id)
                .find(|(_, t)| t.config.local.is_ipv6() == v6)
            else {
                continue;
            };
            let c = tep.counters(self.pmd);
            c.rx_packets.add(1);
            c.rx_bytes.add(u64::from(p.len));
            let d = match tep.decap.decapsulate(bytes) {
                Ok(d) => d,
                Err(r) => {
                    c.decap_drops[r.index()].add(1);
                    continue;
                }
            };
            if !d.options.is_empty() {
                let n = geneve::wire::OptionIter::new(d.options).count();
                c.rx_options.add(n as u64);
            }
            if d.protocol_type != geneve::wire::ETHERTYPE_TEB || d.inner.len() < 14 {
                c.decap_drops[geneve::decap::DropReason::Truncated.index()].add(1);
                continue;
            }
            // BFD on the tunnel (VNI 0, as Open vSwitch sends it): to the OVN chassis'
            // sessions, never switched.
            if d.vni == 0 {
                if let Some(r) = bfd::FrameConfig::default().recognise(d.inner, 0) {
                    match r {
                        Ok(pkt)
                            if self
                                .switch
                                .bfd_on
                                .load(std::sync::atomic::Ordering::Relaxed) =>
                        {
                            self.switch
                                .bfd_rx
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push((d.outer_src, pkt))
                        }
                        _ => c.drop(TunnelDrop::BfdInvalid, 1),
                    }
                    continue;
                }
            }
            let Some(&domain) = topo.tunnels.vni_domains.get(&d.vni) else {
                c.drop(TunnelDrop::UnknownVni, 1);
                continue;
            };
            // An OVN logical switch: delivered by the egress key of OVN's option (through
            // its egress pipeline when it runs OVN's logical pipeline).
            let ovn = match topo.ovn.domain(domain) {
                Some(o) if o.lflow => match crate::model::ovn::find_option(d.options) {
                    Some((ingress, egress)) => Delivery::Lflow(ingress, egress),
                    None => {
                        c.drop(TunnelDrop::OvnNoOption, 1);
                        continue;
                    }
                },
                Some(o) => match ovn_delivery(o, domain, d.options) {
                    Ok(a) => Delivery::Ovn(a),
                    Err(r) => {
                        c.drop(r, 1);
                        continue;
                    }
                },
                None => Delivery::Classify,
            };
            let Some(remote) = self.remote_id(d.outer_src) else {
                continue;
            };
            inner.push(Pkt {
                loc: FrameLoc {
                    head: 0,
                    start: p.loc.start + d.inner_offset as u32,
                    end: p.loc.end,
                },
                len: d.inner.len() as u32,
                ..Pkt::default()
            });
            from.push((domain, remote, t, ovn));
        }
        let mut i = 0;
        while i < inner.len() {
            let (domain, remote, tep, _) = from[i];
            let j = i + from[i..]
                .iter()
                .take_while(|f| (f.0, f.1, f.2) == (domain, remote, tep))
                .count();
            let domain_key = self
                .switch
                .domains
                .key(domain)
                .unwrap_or(crate::model::domain::DomainKey::Vni(0));
            let src = Source {
                mode: super::pipeline::Mode::of(topo, domain, domain_key),
                ovn_key: 0,
                port,
                domain,
                domain_key,
                acl: &NO_ACL,
                learn: Dest::Remote(remote),
                tep: Some(tep),
                in_port: u32::from(port.id) | u32::from(domain) << 16,
                security: None,
                mac_limit: u32::MAX,
            };
            self.switch.remotes.count_rx(remote, (j - i) as u64);
            match from[i].3 {
                Delivery::Lflow(..) => {
                    let keys: Vec<(u16, u16)> = from[i..j]
                        .iter()
                        .map(|f| match f.3 {
                            Delivery::Lflow(a, b) => (a, b),
                            _ => (0, 0),
                        })
                        .collect();
                    let entry = super::lflow::Entry::Tunnel(&keys);
                    self.lflow(topo, &src, queue, burst, &mut inner[i..j], entry);
                    i = j;
                    continue;
                }
                Delivery::Ovn(_) => {
                    // OVN: the sender decided; no classification, no learning.
                    self.actions.clear();
                    self.actions
                        .extend(from[i..j].iter().filter_map(|f| match f.3 {
                            Delivery::Ovn(a) => Some(a),
                            _ => None,
                        }));
                    let c = port.counters(self.pmd);
                    c.rx_packets.add((j - i) as u64);
                    c.rx_bytes
                        .add(inner[i..j].iter().map(|p| u64::from(p.len)).sum::<u64>());
                }
                Delivery::Classify => self.classify(topo, &src, burst, &mut inner[i..j]),
            }
            self.forward(topo, &src, queue, burst, &mut inner[i..j]);
            i = j;
        }
        self.inner = inner;
        self.inner_from = from;
    }

    /// The id of remote `ip` (remembering the last one: a burst mostly comes from one).
    fn remote_id(&mut self, ip: IpAddr) -> Option<RemoteId> {
        if let Some((last, id)) = self.last_remote {
            if last == ip {
                return Some(id);
            }
        }
        let id = self.switch.remotes.intern(ip)?;
        self.last_remote = Some((ip, id));
        Some(id)
    }

    /// Encapsulates group `g` toward remote `remote` in VNI `vni` with OVN's option
    /// keys `ovn` ((0, 0): no option): each frame through the local endpoint of the
    /// remote's family its flow hash picks among those whose uplink is up, and the
    /// next hop its hash picks among the path's.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn encap<'m, B: RxBurst<'m>>(
        &mut self,
        topo: &Topology,
        src: &Source<'_>,
        (remote, vni, ovn): (RemoteId, u32, (u16, u16)),
        g: usize,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    ) {
        let Some(ip) = self.switch.remotes.ip(remote) else {
            return;
        };
        self.templates.reset_if(topo.generation);
        let (cands, n) = candidates(topo, remote, ip);
        let frames = copy_into(self.groups.groups[g].frames(), &mut self.encap_sel);
        self.switch.remotes.count_tx(remote, frames.len() as u64);
        if n == 0 {
            self.no_endpoint(topo, ip, frames.len() as u64);
            return;
        }
        for (k, &t) in cands[..n].iter().enumerate() {
            self.encap_items.clear();
            let tep = &topo.tunnels.teps[t];
            for &i in frames.iter() {
                let p = &mut pkts[usize::from(i)];
                self.ensure_hash(src, burst, p);
                if p.hash as usize % n != k {
                    continue;
                }
                let Some(tmpl) = self.template(topo, t, tep, (remote, ip), vni, ovn, p.hash) else {
                    continue;
                };
                self.encap_items.push(EncapItem { pkt: i, tmpl });
            }
            if self.encap_items.is_empty() {
                continue;
            }
            let Some(uplink) = topo.port(tep.uplink) else {
                continue;
            };
            let PortKind::Afxdp(x) = &uplink.port.kind else {
                continue;
            };
            x.transmit_encap(
                burst,
                pkts,
                &self.encap_items,
                &mut self.templates.list,
                &mut self.encap_scratch,
                queue,
                tep.counters(self.pmd),
                uplink.port.counters(self.pmd),
            );
        }
        self.encap_sel = frames;
    }

    /// The template for a frame of flow hash `hash` to `remote` through endpoint `t`, or
    /// None (counted) when no neighbour is known for the path yet.
    #[allow(clippy::too_many_arguments)]
    fn template(
        &mut self,
        topo: &Topology,
        t: usize,
        tep: &Tep,
        (remote, ip): (RemoteId, IpAddr),
        vni: u32,
        ovn: (u16, u16),
        hash: u32,
    ) -> Option<u32> {
        let path = topo.tunnels.paths.get(t).and_then(|m| m.get(&remote));
        let Some(path) = path.filter(|p| !p.hops.is_empty()) else {
            tep.counters(self.pmd).drop(TunnelDrop::NoNeighbour, 1);
            if let Some(p) = path {
                p.want();
            }
            return None;
        };
        // The next hop from the upper half of the hash (the endpoint took the lower).
        let hop = (hash >> 16) as usize % path.hops.len();
        let r = self.templates.get((t, remote, vni, hop, ovn), || {
            let mut c = TunnelConfig::new(path.src_mac, path.hops[hop], tep.config.local, ip, vni);
            c.options = tep.options;
            if ovn.1 != 0 {
                let data = crate::model::ovn::option_data(ovn.0, ovn.1);
                // Fits: the endpoint's own options leave room (checked with the
                // configuration: their length plus OVN's 8 bytes at most 252).
                let _ = c.options.push(
                    crate::model::ovn::OPTION_CLASS,
                    crate::model::ovn::OPTION_TYPE,
                    &data,
                );
            }
            c.udp_checksum = tep.config.udp_checksum();
            c.destination_port = tep.config.port;
            c
        });
        if r.is_none() {
            tep.counters(self.pmd).drop(TunnelDrop::TooBig, 1);
        }
        r
    }

    /// Counts frames to remote `ip` that no endpoint could send (every uplink of its
    /// family down), on the first endpoint of the family.
    fn no_endpoint(&self, topo: &Topology, ip: IpAddr, n: u64) {
        if let Some(t) = topo
            .tunnels
            .teps
            .iter()
            .find(|t| t.config.local.is_ipv4() == ip.is_ipv4())
        {
            t.counters(self.pmd).drop(TunnelDrop::NoEndpoint, n);
        }
    }
}

/// Where a frame received for OVN logical switch `o` (domain `domain`) goes, by the
/// egress key of OVN's option among its Geneve `options`: a local port, or the local
/// members of a multicast group; never back into a tunnel.
/// How a decapsulated frame is switched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Classified in its domain (a VNI).
    Classify,
    /// As OVN's option says, in a logical switch forwarded by the L2 rules.
    Ovn(super::packet::Action),
    /// Through the egress pipeline of a logical switch that runs OVN's pipeline, with
    /// the option's (ingress, egress) keys.
    Lflow(u16, u16),
}

fn ovn_delivery(
    o: &crate::model::ovn::OvnDomain,
    domain: crate::model::domain::DomainId,
    options: &[u8],
) -> Result<super::packet::Action, TunnelDrop> {
    use super::packet::Action;
    let (_, egress) = crate::model::ovn::find_option(options).ok_or(TunnelDrop::OvnNoOption)?;
    if egress <= crate::model::ovn::MAX_PORT_KEY {
        return o
            .local_port(egress)
            .map(Action::Output)
            .ok_or(TunnelDrop::OvnNotHere);
    }
    match o.group(egress) {
        Some(g) if !g.local.is_empty() => Ok(Action::Multicast(domain, egress)),
        _ => Err(TunnelDrop::OvnNotHere),
    }
}

/// The local endpoints that can carry frames to `remote` (`ip`): those of its family
/// whose uplink is up and whose path is resolved; while none has a resolved path, every
/// one whose uplink is up (its frames are counted and its neighbour requested).
fn candidates(topo: &Topology, remote: RemoteId, ip: IpAddr) -> ([usize; 4], usize) {
    let mut c = [0usize; 4];
    let mut n = 0;
    for resolved_only in [true, false] {
        for (i, t) in topo.tunnels.teps.iter().enumerate() {
            let up = topo.port(t.uplink).is_some_and(|u| u.port.link_up());
            let resolved = topo
                .tunnels
                .paths
                .get(i)
                .and_then(|m| m.get(&remote))
                .is_some_and(|p| !p.hops.is_empty());
            if t.config.local.is_ipv4() == ip.is_ipv4()
                && up
                && (resolved || !resolved_only)
                && n < c.len()
            {
                c[n] = i;
                n += 1;
            }
        }
        if n > 0 {
            break;
        }
    }
    (c, n)
}

/// `s` copied into the vector taken out of `v` (no allocation once warm; the caller
/// puts it back).
fn copy_into<T: Copy>(s: &[T], v: &mut Vec<T>) -> Vec<T> {
    let mut out = std::mem::take(v);
    out.clear();
    out.extend_from_slice(s);
    out
}
