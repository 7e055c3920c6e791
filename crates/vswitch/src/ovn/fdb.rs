//! MACs learned behind `unknown` ports, written to the Southbound `FDB` table as
//! ovn-controller does (`pinctrl`'s `put_fdb`): one row per MAC and logical switch;
//! an existing row of another port is moved to this one. Rows are never deleted here
//! (OVN 23.03 does not age them; ovn-northd deletes a port's rows with the port).

use std::collections::BTreeMap;

use ovsdb::{Client, Condition, Operation, Row};

use super::sb::Fdb;
use crate::model::fdb::Dest;
use crate::switch::Switch;

/// A learned MAC as an `FDB` row's index: (MAC, logical switch key).
type Key = (String, i64);

/// The MACs the data path learned behind local ports that learn (OVN logical
/// switches' `unknown` ports), as `FDB` rows: (MAC, switch key) -> port key.
pub fn learned(sw: &Switch) -> BTreeMap<Key, i64> {
    let topo = sw.topo();
    let mut out = BTreeMap::new();
    for row in sw.fdb.rows().into_iter().filter(|r| !r.is_static) {
        let (Dest::Port(p), Some(o)) = (row.dest, topo.ovn.domain(row.domain)) else {
            continue;
        };
        let key = o
            .local_by_key
            .iter()
            .find(|(_, port)| *port == p)
            .map(|(k, _)| *k);
        if let Some(k) = key.filter(|k| o.learns(*k)) {
            out.insert((row.mac.to_string(), i64::from(o.tunnel_key)), i64::from(k));
        }
    }
    out
}

/// Writes `learned` to the `FDB` table: rows inserted for new MACs, moved for MACs
/// now behind another port. Returns the rows written.
///
/// # Errors
/// The transaction failed (it is tried again on the next change).
pub async fn publish(client: &Client, learned: &BTreeMap<Key, i64>) -> Result<usize, String> {
    let have: BTreeMap<Key, (ovsdb::Uuid, i64)> = client
        .replica()
        .rows::<Fdb>()
        .map(|(u, f)| ((f.mac, f.dp_key), (u, f.port_key)))
        .collect();
    let mut ops = Vec::new();
    for ((mac, dp_key), port_key) in learned {
        match have.get(&(mac.clone(), *dp_key)) {
            Some((_, k)) if k == port_key => {}
            Some((u, _)) => ops.push(Operation::update(
                "FDB",
                vec![Condition::uuid(*u)],
                Row::new().with("port_key", *port_key),
            )),
            None => ops.push(Operation::insert(
                "FDB",
                Row::new()
                    .with("mac", mac.clone())
                    .with("dp_key", *dp_key)
                    .with("port_key", *port_key),
            )),
        }
    }
    super::transact_ops(client, ops, "writing learned MACs to FDB").await
}
