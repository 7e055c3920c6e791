//! Bridge domains: what frames are switched within. An access VLAN (or the untagged
//! domain), a Geneve VNI with the overlay, or an OVN logical switch. Domains get dense
//! ids ([`DomainId`]) from an append-only registry ([`Domains`]), so an FDB key
//! (domain, MAC) fits in 64 bits and an id never changes meaning while entries keyed by
//! it exist.

use std::collections::HashMap;
use std::fmt;
use std::sync::RwLock;

/// Dense id of a bridge domain (see [`Domains`]).
pub type DomainId = u16;

/// Most bridge domains a switch can have (ids 0..MAX_DOMAINS; the FDB key's top 16 bits).
pub const MAX_DOMAINS: usize = (1 << 16) - 1;

/// What a bridge domain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DomainKey {
    /// An access VLAN (1..=4094), or 0: the ports without one (untagged).
    Vlan(u16),
    /// A Geneve VNI (24 bits): a logical switch that spans hosts.
    Vni(u32),
    /// An OVN logical switch, by its `Datapath_Binding.tunnel_key` (also its VNI):
    /// forwarded by OVN's rules ([`crate::model::ovn`]).
    Ovn(u32),
    /// An access VLAN (or 0, untagged) of one bridge of the Open vSwitch database
    /// (`--ovsdb`): bridges are isolated from each other as VLANs are.
    Bridge {
        /// The bridge's number (vswitchd's, stable while it runs).
        bridge: u16,
        /// The VLAN (`Port.tag`), 0: untagged.
        vlan: u16,
    },
    /// No domain: a port that names an OVN logical switch port (`iface_id=`) not bound
    /// here (yet). Its frames are dropped (`ovn_unbound`); no frame reaches it.
    Detached,
}

impl DomainKey {
    /// Frames carrying an 802.1Q/802.1ad tag are dropped (`vlan_tagged`) on a port of
    /// this domain: it is an access VLAN. The untagged domain passes tagged frames.
    #[inline]
    pub fn is_access(&self) -> bool {
        match *self {
            DomainKey::Vlan(v) | DomainKey::Bridge { vlan: v, .. } => v != 0,
            DomainKey::Vni(_) | DomainKey::Ovn(_) | DomainKey::Detached => true,
        }
    }

    /// The VLAN id shown for the domain (0: untagged or a VNI).
    pub fn vlan(&self) -> u16 {
        match *self {
            DomainKey::Vlan(v) | DomainKey::Bridge { vlan: v, .. } => v,
            _ => 0,
        }
    }

    /// The VNI, for a VNI domain.
    #[inline]
    pub fn vni(&self) -> Option<u32> {
        match *self {
            DomainKey::Vni(v) | DomainKey::Ovn(v) => Some(v),
            DomainKey::Vlan(_) | DomainKey::Bridge { .. } | DomainKey::Detached => None,
        }
    }

    /// The domain a port configured with `vlan` / `vni` on `bridge` (a database
    /// bridge's number; `None`: the switch of flag and TOML ports) is in.
    pub fn of(bridge: Option<u16>, vlan: Option<u16>, vni: Option<u32>) -> Self {
        match (vni, bridge) {
            (Some(v), _) => DomainKey::Vni(v),
            (None, Some(bridge)) => DomainKey::Bridge {
                bridge,
                vlan: vlan.unwrap_or(0),
            },
            (None, None) => DomainKey::Vlan(vlan.unwrap_or(0)),
        }
    }
}

impl fmt::Display for DomainKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DomainKey::Vlan(0) => f.write_str("untagged"),
            DomainKey::Vlan(v) => write!(f, "vlan {v}"),
            DomainKey::Vni(v) => write!(f, "vni {v}"),
            DomainKey::Ovn(v) => write!(f, "ovn datapath {v}"),
            DomainKey::Bridge { bridge, vlan: 0 } => write!(f, "bridge {bridge} untagged"),
            DomainKey::Bridge { bridge, vlan } => write!(f, "bridge {bridge} vlan {vlan}"),
            DomainKey::Detached => f.write_str("none (OVN port not bound)"),
        }
    }
}

/// The registry of bridge domains: ids are handed out once and never reused, so FDB
/// entries keyed by an id stay meaningful while a domain has no port.
#[derive(Debug, Default)]
pub struct Domains {
    inner: RwLock<(HashMap<DomainKey, DomainId>, Vec<DomainKey>)>,
    /// The Open vSwitch database's bridges by number (`--ovsdb`), for showing domains.
    bridge_names: RwLock<HashMap<u16, String>>,
}

/// The registry is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many bridge domains: at most {MAX_DOMAINS}")]
pub struct TooManyDomains;

impl Domains {
    /// The id of `key`, registering it if new.
    ///
    /// # Errors
    /// [`TooManyDomains`] once [`MAX_DOMAINS`] ids are handed out.
    pub fn intern(&self, key: DomainKey) -> Result<DomainId, TooManyDomains> {
        if let Some(&id) = self.read().0.get(&key) {
            return Ok(id);
        }
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = g.0.get(&key) {
            return Ok(id);
        }
        if g.1.len() >= MAX_DOMAINS {
            return Err(TooManyDomains);
        }
        let id = g.1.len() as DomainId;
        g.1.push(key);
        g.0.insert(key, id);
        Ok(id)
    }

    /// The domain of `id`, if registered.
    pub fn key(&self, id: DomainId) -> Option<DomainKey> {
        self.read().1.get(usize::from(id)).copied()
    }

    /// Names bridge number `bridge` `name` (a database bridge, `--ovsdb`).
    pub fn name_bridge(&self, bridge: u16, name: &str) {
        let mut names = self.bridge_names.write().unwrap_or_else(|e| e.into_inner());
        if names.get(&bridge).map(String::as_str) != Some(name) {
            names.insert(bridge, name.to_string());
        }
    }

    /// `key` as `vswitchctl` shows it: [`DomainKey`]'s text, with a database bridge's
    /// name for its number (`bridge br-int vlan 10`).
    pub fn describe(&self, key: DomainKey) -> String {
        let DomainKey::Bridge { bridge, vlan } = key else {
            return key.to_string();
        };
        let names = self.bridge_names.read().unwrap_or_else(|e| e.into_inner());
        let Some(name) = names.get(&bridge) else {
            return key.to_string();
        };
        match vlan {
            0 => format!("bridge {name} untagged"),
            v => format!("bridge {name} vlan {v}"),
        }
    }

    /// Domains registered so far.
    pub fn len(&self) -> usize {
        self.read().1.len()
    }

    /// No domain is registered yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, (HashMap<DomainKey, DomainId>, Vec<DomainKey>)> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_bridge_is_shown_by_name_once_named() {
        let d = Domains::default();
        let key = DomainKey::Bridge {
            bridge: 3,
            vlan: 10,
        };
        assert_eq!(d.describe(key), "bridge 3 vlan 10");
        d.name_bridge(3, "br-int");
        assert_eq!(d.describe(key), "bridge br-int vlan 10");
        let untagged = DomainKey::Bridge { bridge: 3, vlan: 0 };
        assert_eq!(d.describe(untagged), "bridge br-int untagged");
        assert_eq!(d.describe(DomainKey::Vni(5001)), "vni 5001");
    }
}
