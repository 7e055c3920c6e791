//! Trunk ports of a database bridge: ports that carry several of its VLANs, tagged
//! (vswitchd.conf.db(5), `Port` "VLAN Configuration": `trunks`, `vlan_mode`). A
//! trunk is a member of each VLAN's domain; a tagged frame it sends is switched,
//! without its tag, in its VLAN's domain; a frame leaving it in a VLAN's domain gets
//! that VLAN's tag, except the native VLAN of a `native-untagged` port (and VLAN 0).
//!
//! A port without `tag` and `trunks` trunks every VLAN of its bridge, as in Open
//! vSwitch: tagged frames of a VLAN no port of the bridge is in stay, tagged, in the
//! untagged domain (as before any VLAN existed).

use crate::config::{Native, TrunkConfig};
use crate::model::domain::{DomainId, DomainKey};

/// The VLAN ids (0..=4095).
pub const VLANS: usize = 4096;

/// No domain: the port does not carry the VLAN.
const NONE: DomainId = DomainId::MAX;

/// Where a frame received on a trunk goes ([`TrunkPlan::ingress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingress {
    /// Switched in this domain, without its tag.
    Strip(DomainId),
    /// Switched in the port's own domain as it is (untagged, or a VLAN of no domain on
    /// a trunk of every VLAN).
    Own,
    /// Dropped (`vlan_tagged`): a VLAN the port does not carry.
    Refused,
}

/// A trunk port's VLANs as domains, computed when the topology is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrunkPlan {
    /// The domain of each VLAN's tagged frames ([`NONE`]: not carried).
    rx: Box<[DomainId]>,
    /// The domains it is a member of (their flood lists hold it).
    pub domains: Vec<DomainId>,
    /// Untagged frames are admitted, into the port's own domain.
    pub untagged: bool,
    /// It carries every VLAN.
    pub all: bool,
    /// The VLAN whose frames leave it untagged (`native-untagged`); 0: none.
    pub native_untagged: u16,
}

impl TrunkPlan {
    /// The plan of a trunk `t` whose own domain is `own` (the native VLAN's, or the
    /// untagged one), on a bridge whose ports use VLANs `bridge_vlans`; `domain(v)`
    /// gives VLAN `v`'s domain (interning it). None when the port is no more than an
    /// untagged port: every VLAN, and no VLAN besides 0 on its bridge.
    pub fn new(
        t: &TrunkConfig,
        (own, own_key): (DomainId, DomainKey),
        bridge_vlans: &[u16],
        mut domain: impl FnMut(u16) -> Option<DomainId>,
    ) -> Option<TrunkPlan> {
        let all = t.vlans.is_empty();
        let native = t.native.map(|_| own_key.vlan());
        let carried: Vec<u16> = if all { bridge_vlans } else { &t.vlans }
            .iter()
            .copied()
            .filter(|&v| v != 0 && Some(v) != native)
            .collect();
        if all && carried.is_empty() && native.is_none() {
            return None;
        }
        let mut rx = vec![NONE; VLANS].into_boxed_slice();
        let mut domains = Vec::with_capacity(carried.len() + 1);
        let untagged = native.is_some() || all || t.vlans.contains(&0);
        if untagged {
            domains.push(own);
        }
        for v in carried {
            if let Some(d) = domain(v) {
                rx[usize::from(v)] = d;
                domains.push(d);
            }
        }
        if let Some(v) = native {
            // Its tagged frames too (a native-tagged peer sends them so).
            rx[usize::from(v)] = own;
        }
        Some(TrunkPlan {
            rx,
            domains,
            untagged,
            all,
            native_untagged: match t.native {
                Some(Native::Untagged) => native.unwrap_or(0),
                _ => 0,
            },
        })
    }

    /// Where a frame with VLAN tag `vid` (None: untagged) goes.
    #[inline]
    pub fn ingress(&self, vid: Option<u16>) -> Ingress {
        match vid {
            None if self.untagged => Ingress::Own,
            None => Ingress::Refused,
            Some(v) => match self.rx[usize::from(v & 0x0fff)] {
                NONE if self.all => Ingress::Own,
                NONE => Ingress::Refused,
                d => Ingress::Strip(d),
            },
        }
    }

    /// The tag a frame of domain `key` gets leaving the port (0: none).
    #[inline]
    pub fn egress_tag(&self, key: DomainKey) -> u16 {
        match key.vlan() {
            v if v == self.native_untagged => 0,
            v => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(v: u16) -> DomainKey {
        DomainKey::Bridge { bridge: 1, vlan: v }
    }

    /// Domain ids 100 + VLAN.
    fn plan(vlans: &[u16], native: Option<Native>, own: u16, bridge: &[u16]) -> Option<TrunkPlan> {
        let t = TrunkConfig {
            vlans: vlans.to_vec(),
            native,
        };
        TrunkPlan::new(&t, (100 + own, key(own)), bridge, |v| Some(100 + v))
    }

    #[test]
    fn a_trunk_of_listed_vlans_strips_them_and_refuses_the_rest() {
        let p = plan(&[10, 20], None, 0, &[10, 20, 30]).unwrap();
        assert_eq!(p.ingress(Some(10)), Ingress::Strip(110));
        assert_eq!(p.ingress(Some(20)), Ingress::Strip(120));
        assert_eq!(p.ingress(Some(30)), Ingress::Refused);
        assert_eq!(p.ingress(None), Ingress::Refused, "VLAN 0 not listed");
        assert_eq!(p.domains, [110, 120]);
        assert_eq!(p.egress_tag(key(10)), 10);
        let with0 = plan(&[0, 10], None, 0, &[]).unwrap();
        assert_eq!(with0.ingress(None), Ingress::Own);
        assert_eq!(with0.domains, [100, 110]);
    }

    #[test]
    fn a_trunk_of_every_vlan_follows_the_bridge() {
        assert_eq!(plan(&[], None, 0, &[]), None, "no VLAN: a plain port");
        assert_eq!(plan(&[], None, 0, &[0]), None);
        let p = plan(&[], None, 0, &[10]).unwrap();
        assert_eq!(p.ingress(Some(10)), Ingress::Strip(110));
        assert_eq!(
            p.ingress(Some(99)),
            Ingress::Own,
            "unknown VLANs pass tagged"
        );
        assert_eq!(p.ingress(None), Ingress::Own);
        assert_eq!(p.domains, [100, 110]);
        assert_eq!(p.egress_tag(key(0)), 0);
        assert_eq!(p.egress_tag(key(10)), 10);
    }

    #[test]
    fn native_vlans_arrive_untagged_and_leave_as_their_mode_says() {
        let u = plan(&[20], Some(Native::Untagged), 10, &[]).unwrap();
        assert_eq!(u.ingress(None), Ingress::Own);
        assert_eq!(u.ingress(Some(10)), Ingress::Strip(110));
        assert_eq!(u.ingress(Some(20)), Ingress::Strip(120));
        assert_eq!(u.domains, [110, 120]);
        assert_eq!(u.egress_tag(key(10)), 0);
        assert_eq!(u.egress_tag(key(20)), 20);
        let t = plan(&[20], Some(Native::Tagged), 10, &[]).unwrap();
        assert_eq!(t.egress_tag(key(10)), 10);
    }
}
