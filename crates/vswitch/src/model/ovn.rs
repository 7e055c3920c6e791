//! OVN's logical switches as the data path sees them (DESIGN.md §7): the part of the
//! topology snapshot the OVN chassis ([`crate::ovn`]) derives from the Southbound
//! database.
//!
//! A logical switch with a local port is a bridge domain ([`DomainKey::Ovn`] of its
//! `Datapath_Binding.tunnel_key`, also its Geneve VNI). Frames in it are forwarded by
//! OVN's rules, not by learning: destinations come from the ports' MACs
//! (`Port_Binding.mac`), installed as static FDB entries (a local port, or
//! [`Dest::RemotePort`](crate::model::fdb::Dest::RemotePort): a remote chassis and the
//! port's key); broadcast and multicast go to the `_MC_flood` group, unknown unicast to
//! `_MC_unknown` (or is dropped when no port has `unknown` addresses).
//!
//! Every frame sent to another chassis carries OVN's Geneve option (ovn-architecture(7),
//! "Tunnel Encapsulations"; ovn `controller/physical.c`): class 0x0102, type 0x80
//! (critical), 4 bytes `0 | ingress port key (15 bits) | egress port or group key
//! (16 bits)`. A received frame is delivered by its egress key and never re-tunnelled.
//!
//! [`DomainKey::Ovn`]: crate::model::domain::DomainKey::Ovn

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use crate::model::domain::DomainId;
use crate::model::fdb::PortId;
use crate::model::tunnel::RemoteId;

/// Geneve option class of OVN's metadata (ovn-architecture(7)).
pub const OPTION_CLASS: u16 = 0x0102;
/// Geneve option type of OVN's metadata: 0x80, the critical bit set (RFC 8926 §3.5).
pub const OPTION_TYPE: u8 = 0x80;
pub use crate::config::ovn::OPTION_BYTES;
/// Egress key of the `_MC_flood` multicast group (broadcast, multicast).
pub const MC_FLOOD: u16 = 0x8000;
/// Egress key of the `_MC_unknown` multicast group (unknown unicast).
pub const MC_UNKNOWN: u16 = 0x8001;
/// Largest logical port key (15 bits: the option's ingress field).
pub const MAX_PORT_KEY: u16 = 0x7fff;

/// The option's 4 data bytes for ingress key `ingress` (15 bits) and egress key
/// `egress` (16 bits), network byte order.
#[inline]
pub fn option_data(ingress: u16, egress: u16) -> [u8; 4] {
    ((u32::from(ingress & MAX_PORT_KEY) << 16) | u32::from(egress)).to_be_bytes()
}

/// The (ingress, egress) keys of OVN's option among a frame's Geneve options
/// (`options`: the option bytes after the fixed header), if present and well formed.
pub fn find_option(options: &[u8]) -> Option<(u16, u16)> {
    geneve::wire::OptionIter::new(options)
        .map_while(Result::ok)
        .map(|o| geneve::wire::OptionRepr::parse(&o))
        .find(|o| o.class == OPTION_CLASS && o.option_type == OPTION_TYPE)
        .and_then(|o| {
            let d: [u8; 4] = o.data.try_into().ok()?;
            let v = u32::from_be_bytes(d);
            Some((((v >> 16) as u16) & MAX_PORT_KEY, v as u16))
        })
}

/// One multicast group of a logical switch (`Multicast_Group`), or the places of a
/// port bound on several chassis (keyed by the port's key): its members here and the
/// other chassis that have members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McGroup {
    /// The group's key (`tunnel_key`, 0x8000 and up).
    pub key: u16,
    /// The IP multicast group it carries (a group ovn-northd made from `IGMP_Group`
    /// rows, named by the address).
    pub address: Option<IpAddr>,
    /// Local member ports.
    pub local: Vec<PortId>,
    /// Remote chassis with at least one member: one copy each (head-end replication).
    pub remotes: Vec<RemoteId>,
}

/// One OVN logical switch with a local port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OvnDomain {
    /// `Datapath_Binding.tunnel_key`: the VNI.
    pub tunnel_key: u32,
    /// The logical switch's name (`external_ids:name`), for `show`.
    pub name: String,
    /// Local ports by their logical port key (`Port_Binding.tunnel_key`): where frames
    /// received with that egress key go.
    pub local_by_key: Vec<(u16, PortId)>,
    /// Multicast groups with a local member or a remote chassis.
    pub groups: Vec<McGroup>,
    /// Some port of the switch has `unknown` among its addresses: unknown unicast goes
    /// to `_MC_unknown` rather than being dropped.
    pub has_unknown: bool,
    /// Keys of the local ports that learn source MACs (`unknown` addresses, no port
    /// security), as OVN's `ls_in_put_fdb` stage does; the chassis writes what they
    /// learn to the Southbound `FDB` table.
    pub learning: Vec<u16>,
    /// Keys of the local ports whose binding here awaits activation
    /// (`activation-strategy=rarp` on an additional chassis): only their RARP frames
    /// pass, and nothing reaches them.
    pub blocked: Vec<u16>,
    /// The switch is a provider network bridged to an uplink (its `localnet` port's
    /// network is mapped here): frames to ports on other chassis, and the copies of
    /// multicast groups they would get, go out of the uplink with the VLAN tag.
    pub localnet: Option<Localnet>,
    /// The switch snoops IGMP/MLD (`IP_Multicast.enabled`): reports are taken in, not
    /// forwarded; frames to a registered IP multicast group go to its group, others
    /// to [`OvnDomain::static_flood`] or nowhere (ovn-northd(8), `ls_in_l2_lkup`).
    pub snoop: bool,
    /// The `_MC_static` group's key (ports with `options:mcast_flood=true`).
    pub static_flood: Option<u16>,
    /// Its frames run OVN's logical pipeline ([`OvnTopo::pipeline`]): ACLs, routers,
    /// DHCP and the rest of the logical flows, instead of the L2 rules above.
    pub lflow: bool,
}

/// Where a logical port is on this chassis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalOut {
    /// A local port.
    Port(PortId),
    /// A provider network's uplink, with the network's VLAN (0: untagged).
    Uplink(PortId, u16),
}

/// Where a logical switch with a `localnet` port meets the physical network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Localnet {
    /// The AF_XDP uplink (`--ovn-bridge-mappings`).
    pub uplink: PortId,
    /// The 802.1Q VLAN id its frames carry there (0: untagged).
    pub tag: u16,
    /// The localnet port's key: the ingress key of frames from the network.
    pub key: u16,
}

impl OvnDomain {
    /// The local port with logical key `key`.
    #[inline]
    pub fn local_port(&self, key: u16) -> Option<PortId> {
        self.local_by_key
            .iter()
            .find(|(k, _)| *k == key)
            .map(|&(_, p)| p)
    }

    /// Where logical port `key` is here: a local port, or the uplink of the switch's
    /// provider network (with its VLAN, 0: untagged) for its `localnet` port.
    #[inline]
    pub fn local_out(&self, key: u16) -> Option<LocalOut> {
        match self.localnet {
            Some(l) if l.key == key => Some(LocalOut::Uplink(l.uplink, l.tag)),
            _ => self.local_port(key).map(LocalOut::Port),
        }
    }

    /// Whether the local port with key `key` learns source MACs.
    #[inline]
    pub fn learns(&self, key: u16) -> bool {
        key != 0 && self.learning.contains(&key)
    }

    /// Whether the local port with key `key` awaits activation.
    #[inline]
    pub fn blocks(&self, key: u16) -> bool {
        !self.blocked.is_empty() && self.blocked.contains(&key)
    }

    /// Group `key`, if it has members the switch reaches.
    #[inline]
    pub fn group(&self, key: u16) -> Option<&McGroup> {
        self.groups.iter().find(|g| g.key == key)
    }

    /// The key of the group carrying IP multicast group `address`, if one is
    /// registered (some chassis' port joined it) and has members the switch reaches.
    #[inline]
    pub fn registered(&self, address: IpAddr) -> Option<u16> {
        self.groups
            .iter()
            .find(|g| g.address == Some(address))
            .map(|g| g.key)
    }
}

/// The OVN part of a topology snapshot: the logical switches with local ports, by the
/// bridge domain they are.
#[derive(Debug, Clone, Default)]
pub struct OvnTopo {
    /// By [`DomainId`]; `None` for domains that are not OVN logical switches.
    pub domains: Vec<Option<Arc<OvnDomain>>>,
    /// Each remote chassis' name, for `show` (by remote id).
    pub chassis_of: HashMap<RemoteId, String>,
    /// The provider networks: (uplink, VLAN (0: untagged), domain), sorted; a frame
    /// received on the uplink with that VLAN is in that domain.
    pub localnets: Vec<(PortId, u16, DomainId)>,
    /// What each local port with an `iface_id` is, for `show`: its logical switch port,
    /// switch and key, or why it is not bound (by port name).
    pub port_status: HashMap<String, String>,
    /// The logical pipeline of the local datapaths (switches with local ports and
    /// what their routers reach), when some switch runs it ([`OvnDomain::lflow`]).
    pub pipeline: Option<Arc<dyn crate::model::lflow::LogicalPipeline>>,
    /// The domain of each logical switch with local ports, by its key.
    pub by_key: HashMap<u32, DomainId>,
    /// Each remote chassis' Geneve endpoint, by chassis name.
    pub remote_of: HashMap<String, RemoteId>,
}

impl OvnTopo {
    /// The local port with logical key `port` in the logical switch of key `dp`.
    #[inline]
    pub fn local_port(&self, dp: u32, port: u16) -> Option<PortId> {
        let d = *self.by_key.get(&dp)?;
        self.domain(d)?.local_port(port)
    }

    /// Where logical port `port` of the logical switch of key `dp` is here.
    #[inline]
    pub fn local_out(&self, dp: u32, port: u16) -> Option<LocalOut> {
        let d = *self.by_key.get(&dp)?;
        self.domain(d)?.local_out(port)
    }

    /// The OVN logical switch domain `d` is, if it is one.
    #[inline]
    pub fn domain(&self, d: DomainId) -> Option<&OvnDomain> {
        self.domains.get(usize::from(d)).and_then(|x| x.as_deref())
    }

    /// Whether uplink `port` carries a provider network.
    #[inline]
    pub fn bridges(&self, port: PortId) -> bool {
        !self.localnets.is_empty() && self.localnets.iter().any(|l| l.0 == port)
    }

    /// The domain of the frames received on uplink `port` with VLAN `vlan` (0:
    /// untagged), if a provider network is there.
    #[inline]
    pub fn localnet_domain(&self, port: PortId, vlan: u16) -> Option<DomainId> {
        self.localnets
            .iter()
            .find(|l| l.0 == port && l.1 == vlan)
            .map(|l| l.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option's layout: ingress in bits 16..31, egress in 0..16, the top bit 0.
    #[test]
    fn option_data_layout() {
        assert_eq!(option_data(1, 2), [0x00, 0x01, 0x00, 0x02]);
        assert_eq!(option_data(0x7fff, MC_FLOOD), [0x7f, 0xff, 0x80, 0x00]);
        // A 16-bit ingress loses its top bit: the field is 15 bits.
        assert_eq!(option_data(0xffff, 1), [0x7f, 0xff, 0x00, 0x01]);
    }

    /// Found among other options, its keys read back; a wrong length is no option.
    #[test]
    fn option_found_among_others() {
        let mut list = geneve::wire::OptionList::new();
        list.push(0x0101, 0x01, &[1, 2, 3, 4]).unwrap();
        list.push(OPTION_CLASS, OPTION_TYPE, &option_data(5, MC_UNKNOWN))
            .unwrap();
        assert_eq!(find_option(list.as_bytes()), Some((5, MC_UNKNOWN)));
        let mut bad = geneve::wire::OptionList::new();
        bad.push(OPTION_CLASS, OPTION_TYPE, &[0; 8]).unwrap();
        assert_eq!(find_option(bad.as_bytes()), None);
        assert_eq!(find_option(&[]), None);
    }
}
