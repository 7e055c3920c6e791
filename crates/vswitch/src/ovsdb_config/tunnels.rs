//! `Interface type=geneve` (ovs-vswitchd.conf.db(5), "Tunnel Options"): static Geneve
//! tunnels, as the overlay's static VNIs (docs/overlay.md). A bridge with geneve
//! interfaces is one VNI, their `options:key`; its other ports join that VNI, and its
//! broadcast, multicast and unknown unicast go to every tunnel's `options:remote_ip`
//! (flood and learn). `options:local_ip` is the local tunnel endpoint: an address of an
//! AF_XDP uplink of the database (the NIC added to a bridge such as `br-phy`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ovsdb::Uuid;

use super::schema::Interface;
use crate::config::port::MAX_VNI;
use crate::config::{GeneveConfig, PortConfig, VniConfig};

/// One geneve interface's tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    /// `options:local_ip`.
    pub local: IpAddr,
    /// `options:remote_ip`.
    pub remote: IpAddr,
    /// `options:key`, the VNI (default 0).
    pub key: u32,
}

/// Geneve interfaces by uuid, each its tunnel or why it has none.
pub type Tunnels = Vec<(Uuid, Result<Tunnel, String>)>;

/// The tunnel interface `i` asks for.
///
/// # Errors
/// `remote_ip` or `local_ip` missing or not an address (`flow` is refused: vswitchd
/// has no flows), a key out of 0..=16777215, families that differ.
pub fn parse(i: &Interface) -> Result<Tunnel, String> {
    let ip = |k: &str| -> Result<IpAddr, String> {
        let v = i.options.get(k).ok_or_else(|| {
            format!("type geneve needs options:{k} (vswitchd's tunnels are static)")
        })?;
        v.parse()
            .map_err(|_| format!("options:{k}={v}: expected an IP address"))
    };
    let (local, remote) = (ip("local_ip")?, ip("remote_ip")?);
    if local.is_ipv4() != remote.is_ipv4() {
        return Err(format!(
            "options:local_ip={local}, remote_ip={remote}: one address family"
        ));
    }
    let key = match i.options.get("key") {
        None => 0,
        Some(k) => k
            .parse::<u32>()
            .ok()
            .filter(|k| *k <= MAX_VNI)
            .ok_or_else(|| format!("options:key={k}: expected a VNI 0..={MAX_VNI}"))?,
    };
    Ok(Tunnel { local, remote, key })
}

/// The tunnels of one bridge's geneve interfaces `ifaces` (by name) and the bridge's
/// VNI: the first valid tunnel's key; a tunnel with another key is an error.
pub fn of_bridge(ifaces: &[(Uuid, &Interface)]) -> (Option<u32>, Tunnels) {
    let mut vni = None;
    let mut out = Vec::new();
    for (u, i) in ifaces {
        let t = parse(i).and_then(|t| match vni {
            None => {
                vni = Some(t.key);
                Ok(t)
            }
            Some(v) if v == t.key => Ok(t),
            Some(v) => Err(format!(
                "options:key={}: a bridge is one VNI, {v} here (its other tunnels' key)",
                t.key
            )),
        });
        out.push((*u, t));
    }
    (vni, out)
}

/// The tunnel endpoints (one per local address, on the AF_XDP uplink among `ports`
/// whose device has it) and each VNI's flood list that `tunnels` make.
///
/// # Errors
/// No uplink has a local address.
pub fn overlay(
    tunnels: &BTreeMap<Uuid, Tunnel>,
    ports: &[PortConfig],
) -> Result<(Vec<GeneveConfig>, Vec<VniConfig>), String> {
    let mut teps: Vec<GeneveConfig> = Vec::new();
    let mut vnis: BTreeMap<u32, Vec<IpAddr>> = BTreeMap::new();
    for t in tunnels.values() {
        if !teps.iter().any(|g| g.local == t.local) {
            let name = format!("gnv-{}", t.local).replace(':', ".");
            teps.push(super::chassis::tep_named(&name, t.local, ports)?);
        }
        let remotes = vnis.entry(t.key).or_default();
        if !remotes.contains(&t.remote) {
            remotes.push(t.remote);
        }
    }
    let vnis = vnis
        .into_iter()
        .map(|(id, remotes)| VniConfig { id, remotes })
        .collect();
    Ok((teps, vnis))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geneve(name: &str, opts: &[(&str, &str)]) -> Interface {
        let mut i = super::super::wanted::tests_iface(name, "geneve");
        i.options = opts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        i
    }

    #[test]
    fn a_bridge_is_one_vni() {
        let a = geneve(
            "gnv0",
            &[
                ("local_ip", "192.0.2.1"),
                ("remote_ip", "192.0.2.2"),
                ("key", "5001"),
            ],
        );
        let b = geneve(
            "gnv1",
            &[
                ("local_ip", "192.0.2.1"),
                ("remote_ip", "192.0.2.3"),
                ("key", "5002"),
            ],
        );
        let c = geneve("gnv2", &[("remote_ip", "192.0.2.4")]);
        let d = geneve(
            "gnv3",
            &[("local_ip", "192.0.2.1"), ("remote_ip", "2001:db8::1")],
        );
        let u = |n: u8| -> Uuid {
            format!("00000000-0000-0000-0000-0000000000{n:02x}")
                .parse()
                .unwrap()
        };
        let (vni, t) = of_bridge(&[(u(1), &a), (u(2), &b), (u(3), &c), (u(4), &d)]);
        assert_eq!(vni, Some(5001));
        assert_eq!(
            t[0].1.as_ref().map(|t| t.remote.to_string()),
            Ok("192.0.2.2".into())
        );
        let errors: Vec<String> = t.iter().filter_map(|(_, r)| r.clone().err()).collect();
        for want in [
            "a bridge is one VNI, 5001",
            "needs options:local_ip",
            "one address family",
        ] {
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{want}: {errors:?}"
            );
        }
    }
}
