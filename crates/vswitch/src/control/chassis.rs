//! The OVN chassis' settings in the switch's configuration: made a chassis from the
//! Open vSwitch database (`external_ids:ovn-remote`, `--ovsdb`), and changed there while
//! running, as ovn-controller follows its `external_ids`:
//! - provider networks, CMS options and the host name change in place
//!   ([`Control::update_chassis`]): the chassis task republishes its rows and
//!   re-derives its view;
//! - the Southbound remote, the chassis name and the Encap IP re-register it
//!   ([`Control::rechassis`]): the task removes its rows and stops, the tunnel endpoint
//!   moves, and the caller starts the task again.

use std::sync::Arc;

use crate::config::ovn::OvnConfig;
use crate::config::GeneveConfig;

use super::ops::Control;

impl Control {
    /// Makes the running switch an OVN chassis: `ovn` in force and the tunnel endpoint
    /// `tep` (its `ovn` flag set) on its uplink, checked as at start. The caller starts
    /// the chassis itself.
    ///
    /// # Errors
    /// The switch is already a chassis, or the endpoint does not fit the host (its
    /// address not on its uplink, the MTU too small); nothing changed.
    pub async fn become_chassis(
        self: &Arc<Self>,
        ovn: OvnConfig,
        tep: GeneveConfig,
    ) -> Result<(), String> {
        let _g = self.ops.lock().await;
        let old = (**self.switch.config()).clone();
        if old.ovn.is_some() {
            return Err("vswitchd is already an OVN chassis".into());
        }
        let config = chassis_config(&old, ovn, tep)?;
        self.set_tunnels(&old, config).await
    }

    /// Stops the running chassis task (it removes its Southbound rows, as
    /// ovn-controller does on exit) and puts `ovn` and the tunnel endpoint `tep` in
    /// force in its place; the caller starts the task again.
    ///
    /// # Errors
    /// The switch is no chassis, or the endpoint does not fit the host: nothing
    /// changed, the task still runs.
    pub async fn rechassis(
        self: &Arc<Self>,
        ovn: OvnConfig,
        tep: GeneveConfig,
    ) -> Result<(), String> {
        let _g = self.ops.lock().await;
        let old = (**self.switch.config()).clone();
        if old.ovn.is_none() {
            return Err("vswitchd is no OVN chassis".into());
        }
        let config = chassis_config(&old, ovn, tep)?;
        super::ops::check_overlay(&config)?;
        let stopped = self.ovn_stopped.notified();
        self.ovn_stop.notify_one();
        if tokio::time::timeout(std::time::Duration::from_secs(5), stopped)
            .await
            .is_err()
        {
            tracing::warn!("the OVN chassis took over 5 s to stop; replaced anyway");
        }
        self.set_tunnels(&old, config).await
    }

    /// Changes the running chassis' settings that apply in place (`ovn` differs from
    /// the configuration in force only in provider networks, CMS options and host
    /// name): the uplinks' XDP filters follow the provider networks, and the chassis
    /// task takes `ovn` on its next pass, which it is woken for.
    pub async fn update_chassis(&self, ovn: OvnConfig) {
        let _g = self.ops.lock().await;
        let old = (**self.switch.config()).clone();
        let mut config = old.clone();
        config.ovn = Some(ovn.clone());
        self.switch.set_config(config.clone());
        self.refilter(&old, &config);
        *self.ovn_update.lock().unwrap_or_else(|e| e.into_inner()) = Some(ovn);
        self.ovn_wake.notify_one();
    }
}

/// `old` with `ovn` and the endpoint `tep` (its `ovn` flag set, replacing one of its
/// name) in force, checked against the host.
///
/// # Errors
/// The endpoint's address is not where it says, or its MTU leaves too little room.
fn chassis_config(
    old: &crate::config::Config,
    ovn: OvnConfig,
    mut tep: GeneveConfig,
) -> Result<crate::config::Config, String> {
    tep.ovn = true;
    let mut config = old.clone();
    config.ovn = Some(ovn);
    config.geneve.retain(|g| g.name != tep.name);
    config.geneve.push(tep);
    crate::config::geneve::check_host(&config)?;
    Ok(config)
}
