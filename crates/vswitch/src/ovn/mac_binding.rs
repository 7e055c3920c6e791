//! IP-to-MAC bindings the logical pipeline learned behind router ports (`put_arp`,
//! `put_nd`), written to the Southbound `MAC_Binding` table as ovn-controller's pinctrl
//! writes them: one row per (router port, IP); an existing row with another MAC is
//! updated. Every chassis' routers then resolve the address (`get_arp`, `get_nd`).

use ovsdb::{Client, Condition, Operation, Row};

use super::sb::{DatapathBinding, MacBinding, PortBinding};
use crate::model::lflow::Learned;

/// Writes `learned` (from the data path) to `MAC_Binding`. Returns the rows written.
///
/// # Errors
/// The transaction failed (the bindings are learned again by the next packets).
pub async fn publish(client: &Client, learned: Vec<Learned>) -> Result<usize, String> {
    let ops = {
        let r = client.replica();
        let dps: Vec<(ovsdb::Uuid, DatapathBinding)> = r.rows::<DatapathBinding>().collect();
        let ports: Vec<PortBinding> = r.rows::<PortBinding>().map(|(_, p)| p).collect();
        let have: Vec<(ovsdb::Uuid, MacBinding)> = r.rows::<MacBinding>().collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut ops = Vec::new();
        for (dp, port, ip, mac) in learned.into_iter().filter_map(|l| match l {
            Learned::MacBinding { dp, port, ip, mac } => Some((dp, port, ip, mac)),
            Learned::SvcReply(_) => None,
        }) {
            let Some((dp_uuid, _)) = dps.iter().find(|(_, d)| d.tunnel_key == i64::from(dp)) else {
                continue;
            };
            let Some(pb) = ports
                .iter()
                .find(|p| p.datapath == *dp_uuid && p.tunnel_key == i64::from(port))
            else {
                continue;
            };
            let (ip, mac) = (ip.to_string(), mac.to_string());
            let existing = have
                .iter()
                .find(|(_, b)| b.logical_port == pb.logical_port && b.ip == ip);
            match existing {
                Some((_, b)) if b.mac == mac => {}
                Some((u, _)) => ops.push(Operation::update(
                    "MAC_Binding",
                    vec![Condition::uuid(*u)],
                    Row::new().with("mac", mac).with("timestamp", now),
                )),
                None => ops.push(Operation::insert(
                    "MAC_Binding",
                    Row::new()
                        .with("logical_port", pb.logical_port.clone())
                        .with("ip", ip)
                        .with("mac", mac)
                        .with("datapath", *dp_uuid)
                        .with("timestamp", now),
                )),
            }
        }
        ops
    };
    super::transact_ops(client, ops, "writing learned MAC bindings").await
}
