//! Multicast snooping settings (`--mcast-*`, TOML `mcast_*`).

use serde::Serialize;

use super::{invalid, Args, ConfigError, FileConfig, OnOff};

/// Default of `--mcast-table-size`: groups the database holds (Open vSwitch's default).
pub const DEFAULT_MCAST_TABLE_SIZE: usize = 2048;
/// Default of `--mcast-aging`: seconds a membership or router port lives without a
/// report or query refreshing it (Open vSwitch's and RFC 3376's group membership
/// interval, rounded as OVS does).
pub const DEFAULT_MCAST_AGING_SECS: u64 = 300;
/// Default of `--mcast-query-interval` (RFC 3376 §8.2's Query Interval).
pub const DEFAULT_MCAST_QUERY_INTERVAL_SECS: u64 = 125;
/// Largest `--mcast-table-size` accepted.
pub const MAX_MCAST_TABLE_SIZE: usize = 1 << 20;

/// How bridge domains treat multicast ([`crate::model::mcast`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McastConfig {
    /// IGMP/MLD snooping in every VLAN and VNI domain (default on: unregistered groups
    /// still flood, so turning it on changes nothing until a receiver reports).
    pub snooping: bool,
    /// Frames to a group no port has joined go to every port (default, as OVS) rather
    /// than to multicast-router ports only.
    pub flood_unregistered: bool,
    /// Groups the database holds; reports for new groups beyond it are forwarded but
    /// not learned (counted `refused_full`).
    pub table_size: usize,
    /// Seconds a membership or router port lives without being refreshed.
    pub aging_secs: u64,
    /// Static memberships: (port name, group), never aged (`--mcast-static`).
    pub statics: Vec<(String, std::net::IpAddr)>,
    /// The switch sends general queries where no multicast router does
    /// (`--mcast-querier`, default off as in Open vSwitch and the Linux bridge).
    pub querier: bool,
    /// Seconds between the querier's rounds (RFC 3376's Query Interval, 125).
    pub query_interval_secs: u64,
    /// The domains the querier serves, as [`crate::model::domain::DomainKey`] shows
    /// them (`untagged`, `vlan 10`, `vni 5001`); empty: every VLAN and VNI domain
    /// (`--mcast-querier-domains`).
    pub querier_domains: Vec<String>,
}

impl Default for McastConfig {
    fn default() -> Self {
        McastConfig {
            snooping: true,
            flood_unregistered: true,
            table_size: DEFAULT_MCAST_TABLE_SIZE,
            aging_secs: DEFAULT_MCAST_AGING_SECS,
            statics: Vec::new(),
            querier: false,
            query_interval_secs: DEFAULT_MCAST_QUERY_INTERVAL_SECS,
            querier_domains: Vec::new(),
        }
    }
}

impl McastConfig {
    /// The settings from the flags, then the file, then the defaults.
    ///
    /// # Errors
    /// A table size of 0 or over [`MAX_MCAST_TABLE_SIZE`], an aging time of 0, or a
    /// static membership that is not `PORT=GROUP` with a multicast group (the field
    /// and the value are named).
    pub fn resolve(args: &Args, file: &FileConfig) -> Result<Self, ConfigError> {
        let on = |flag: Option<OnOff>, key: Option<bool>, default: bool| {
            flag.map(|v| v == OnOff::On).or(key).unwrap_or(default)
        };
        let table_size = args
            .mcast_table_size
            .or(file.mcast_table_size)
            .unwrap_or(DEFAULT_MCAST_TABLE_SIZE);
        if table_size == 0 || table_size > MAX_MCAST_TABLE_SIZE {
            return Err(invalid(
                "mcast_table_size",
                format!("expected 1..={MAX_MCAST_TABLE_SIZE} groups, got {table_size}"),
            ));
        }
        let aging_secs = args
            .mcast_aging
            .or(file.mcast_aging_secs)
            .unwrap_or(DEFAULT_MCAST_AGING_SECS);
        if aging_secs == 0 {
            return Err(invalid("mcast_aging_secs", "expected at least 1 second"));
        }
        let query_interval_secs = args
            .mcast_query_interval
            .or(file.mcast_query_interval_secs)
            .unwrap_or(DEFAULT_MCAST_QUERY_INTERVAL_SECS);
        if query_interval_secs == 0 {
            return Err(invalid(
                "mcast_query_interval_secs",
                "expected at least 1 second",
            ));
        }
        let querier_domains = match &args.mcast_querier_domains {
            Some(list) => list
                .split(',')
                .map(|d| parse_domain("--mcast-querier-domains", d.trim()))
                .collect::<Result<Vec<_>, _>>()?,
            None => file
                .mcast_querier_domains
                .iter()
                .map(|d| parse_domain("mcast_querier_domains", d.trim()))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let mut statics = Vec::new();
        for spec in file.mcast_static.iter().chain(&args.mcast_static) {
            statics.push(parse_static(spec)?);
        }
        Ok(McastConfig {
            snooping: on(args.mcast_snooping, file.mcast_snooping, true),
            flood_unregistered: on(
                args.mcast_flood_unregistered,
                file.mcast_flood_unregistered,
                true,
            ),
            table_size,
            aging_secs,
            statics,
            querier: on(args.mcast_querier, file.mcast_querier, false)
                || !querier_domains.is_empty(),
            query_interval_secs,
            querier_domains,
        })
    }
}

/// `PORT=GROUP`, e.g. `vm1=239.1.1.1` or `vm1=ff0e::1:3`.
fn parse_static(spec: &str) -> Result<(String, std::net::IpAddr), ConfigError> {
    let field = format!("--mcast-static {spec}");
    let (port, group) = spec
        .split_once('=')
        .ok_or_else(|| invalid(&field, "expected PORT=GROUP, e.g. vm1=239.1.1.1"))?;
    let group: std::net::IpAddr = group
        .parse()
        .map_err(|_| invalid(&field, format!("{group:?} is not an IPv4 or IPv6 address")))?;
    if !group.is_multicast() || mcsnoop::is_link_local(group) {
        return Err(invalid(
            &field,
            format!("{group} is not a multicast group outside the link-local range (224.0.0.0/24, ff0X:: with scope 0-2 always flood)"),
        ));
    }
    if port.is_empty() {
        return Err(invalid(&field, "the port name is empty"));
    }
    Ok((port.to_string(), group))
}

/// A domain as `--mcast-querier-domains` writes it (`untagged`, `vlan:N`, `vni:N`), in
/// the form `vswitchctl` shows (`untagged`, `vlan N`, `vni N`).
fn parse_domain(field: &str, d: &str) -> Result<String, ConfigError> {
    let bad = || {
        invalid(
            field,
            format!("{d:?}: expected untagged, vlan:N (1..=4094) or vni:N (0..2^24)"),
        )
    };
    if d == "untagged" {
        return Ok(d.into());
    }
    let (kind, n) = d.split_once(':').ok_or_else(bad)?;
    let n: u32 = n.parse().map_err(|_| bad())?;
    match kind {
        "vlan" if (1..=4094).contains(&n) => Ok(format!("vlan {n}")),
        "vni" if n < 1 << 24 => Ok(format!("vni {n}")),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn querier_domains_parse_and_bad_ones_name_the_field() {
        assert_eq!(parse_domain("f", "vlan:10").unwrap(), "vlan 10");
        assert_eq!(parse_domain("f", "vni:5001").unwrap(), "vni 5001");
        assert_eq!(parse_domain("f", "untagged").unwrap(), "untagged");
        for bad in [
            "vlan:0",
            "vlan:4095",
            "vni:16777216",
            "vlan",
            "ovn:3",
            "vlan:x",
        ] {
            let e = parse_domain("--mcast-querier-domains", bad)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("--mcast-querier-domains") && e.contains(bad),
                "{e}"
            );
        }
    }

    #[test]
    fn static_members_must_be_routable_groups() {
        assert!(parse_static("vm1=239.1.1.1").is_ok());
        assert!(parse_static("vm1=ff0e::1").is_ok());
        for bad in [
            "vm1",
            "vm1=10.0.0.1",
            "vm1=224.0.0.251",
            "vm1=ff02::1",
            "=239.1.1.1",
        ] {
            assert!(parse_static(bad).is_err(), "{bad}");
        }
    }
}
