//! The chassis' own rows: `Chassis` (name, host name, Encap, what it supports),
//! `Encap` (geneve, the tunnel endpoint's IPv4 address, `csum`) and `Chassis_Private`,
//! written when missing or different, deleted on a clean stop (as ovn-controller
//! does on exit).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ovsdb::{Atom, Client, Condition, Datum, Operation, Row, Uuid};
use tracing::info;

use super::sb::{Chassis, ChassisPrivate, Encap, FEATURES};
use crate::config::ovn::OvnConfig;
use crate::control::ops::Control;

/// The interface types a vswitchd chassis has, in Open vSwitch's names (`iface-types`:
/// what the CMS may ask for on this chassis).
const IFACE_TYPES: &str = "afxdp,dpdkvhostuser,dpdkvhostuserclient,geneve,tap";

/// What this chassis registers.
#[derive(Debug, Clone)]
pub struct Registration {
    name: String,
    hostname: String,
    ip: IpAddr,
    csum: bool,
    bridge_mappings: String,
    cms_options: String,
}

impl Registration {
    /// The rows for `cfg`, the Geneve endpoint address `ip` and its checksum setting.
    pub fn new(cfg: &OvnConfig, (ip, csum): (IpAddr, bool)) -> Self {
        Registration {
            name: cfg.chassis.clone(),
            hostname: cfg.hostname.clone(),
            ip,
            csum,
            bridge_mappings: cfg.bridge_mappings_text(),
            cms_options: cfg.cms_options.clone(),
        }
    }

    /// `Chassis.other_config`: the datapath type, interface types, the bridge mappings
    /// (`network:uplink`), the CMS options (always, empty when unset, as
    /// ovn-controller's `chassis_build_other_config`) and the feature flags of the
    /// deployment's ovn-controller ([`FEATURES`]).
    fn other_config(&self) -> BTreeMap<String, String> {
        let mut m: BTreeMap<String, String> = FEATURES
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        m.insert("datapath-type".into(), "netdev".into());
        m.insert("iface-types".into(), IFACE_TYPES.into());
        m.insert("is-interconn".into(), "false".into());
        m.insert("ovn-bridge-mappings".into(), self.bridge_mappings.clone());
        m.insert("ovn-cms-options".into(), self.cms_options.clone());
        m
    }

    /// The Encap options.
    fn encap_options(&self) -> BTreeMap<String, String> {
        [("csum".to_string(), self.csum.to_string())].into()
    }

    /// Writes the chassis' rows where they are missing or differ from what this chassis
    /// is; nothing when they match.
    ///
    /// # Errors
    /// The transaction failed (the next pass tries again).
    pub async fn ensure(&self, client: &Client) -> Result<(), ovsdb::Error> {
        let ops = self.ops(client);
        if ops.is_empty() {
            return Ok(());
        }
        client.transact(ops).await?;
        info!(chassis = %self.name, encap = %self.ip, "chassis registered in the Southbound database");
        Ok(())
    }

    /// The operations that bring the chassis' rows to what they should be.
    fn ops(&self, client: &Client) -> Vec<Operation> {
        let r = client.replica();
        let chassis = r.rows::<Chassis>().find(|(_, c)| c.name == self.name);
        let private = r
            .rows::<ChassisPrivate>()
            .find(|(_, c)| c.name == self.name);
        let encap_ok = chassis.as_ref().is_some_and(|(_, c)| {
            c.encaps.len() == 1
                && r.get::<Encap>(&c.encaps[0]).is_some_and(|e| {
                    e.kind == "geneve"
                        && e.ip == self.ip.to_string()
                        && e.options == self.encap_options()
                        && e.chassis_name == self.name
                })
        });
        let chassis_ok = encap_ok
            && chassis.as_ref().is_some_and(|(_, c)| {
                c.hostname == self.hostname && c.other_config == self.other_config()
            });
        let mut ops = Vec::new();
        let chassis_ref = match &chassis {
            Some((u, _)) if chassis_ok => Datum::atom(Atom::Uuid(*u)),
            Some((u, _)) => {
                ops.push(self.insert_encap());
                ops.push(Operation::update(
                    "Chassis",
                    vec![Condition::uuid(*u)],
                    self.chassis_row(),
                ));
                Datum::atom(Atom::Uuid(*u))
            }
            None => {
                ops.push(self.insert_encap());
                let mut row = self.chassis_row();
                row.set("name", self.name.as_str());
                ops.push(Operation::insert_named("Chassis", row, "chassis"));
                Datum::atom(Atom::NamedUuid("chassis".into()))
            }
        };
        match &private {
            Some((_, p)) if chassis_ok && p.chassis.is_some() => {}
            Some((u, _)) => {
                let mut row = Row::new();
                row.insert("chassis", chassis_ref);
                ops.push(Operation::update(
                    "Chassis_Private",
                    vec![Condition::uuid(*u)],
                    row,
                ));
            }
            None => {
                let mut row = Row::new().with("name", self.name.as_str());
                row.insert("chassis", chassis_ref);
                ops.push(Operation::insert("Chassis_Private", row));
            }
        }
        ops
    }

    /// A new Encap row, named `encap` in the transaction.
    fn insert_encap(&self) -> Operation {
        let row = Row::new()
            .with("type", "geneve")
            .with("ip", self.ip.to_string().as_str())
            .with("options", self.encap_options())
            .with("chassis_name", self.name.as_str());
        Operation::insert_named("Encap", row, "encap")
    }

    /// The Chassis columns this chassis sets (its Encap as the transaction's `encap`).
    fn chassis_row(&self) -> Row {
        let mut row = Row::new()
            .with("hostname", self.hostname.as_str())
            .with("other_config", self.other_config());
        row.insert("encaps", Datum::atom(Atom::NamedUuid("encap".into())));
        row
    }

    /// Deletes the chassis' rows (its Encap goes with its Chassis; bindings' `chassis`
    /// references are weak and clear) and marks the ports it had bound down.
    pub async fn unregister(&self, client: &Client, _ctl: &Control) {
        let me: Option<Uuid> = client
            .replica()
            .rows::<Chassis>()
            .find(|(_, c)| c.name == self.name)
            .map(|(u, _)| u);
        let mut ops = Vec::new();
        if let Some(me) = me {
            ops.push(Operation::update(
                "Port_Binding",
                vec![Condition::eq("chassis", Some(me))],
                Row::new().with("up", false),
            ));
            ops.push(Operation::delete(
                "IGMP_Group",
                vec![Condition::eq("chassis", Some(me))],
            ));
        }
        ops.push(Operation::delete(
            "Chassis_Private",
            vec![Condition::eq("name", self.name.as_str())],
        ));
        ops.push(Operation::delete(
            "Chassis",
            vec![Condition::eq("name", self.name.as_str())],
        ));
        match tokio::time::timeout(std::time::Duration::from_secs(2), client.transact(ops)).await {
            Ok(Ok(_)) => {
                info!(chassis = %self.name, "chassis removed from the Southbound database")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "could not remove the chassis' rows"),
            Err(_) => tracing::warn!("removing the chassis' rows timed out"),
        }
    }
}
