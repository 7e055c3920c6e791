//! The crate's error type.

use std::io;
use std::path::PathBuf;

/// What [`probe`](crate::probe) can fail with. Every variant names the
/// interface or resource and the request that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The name cannot be a Linux interface name.
    #[error("invalid interface name {ifname:?}: {reason}")]
    InvalidInterfaceName {
        /// The name given.
        ifname: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No interface of that name in the caller's network namespace.
    #[error(
        "no interface named {ifname:?} in this network namespace \
         (`ip link show` lists the ones there are)"
    )]
    NoSuchInterface {
        /// The name given.
        ifname: String,
    },
    /// The kernel refused a request for lack of privilege.
    #[error(
        "permission denied reading {what} of {ifname:?}: {source} \
         (run as root or with CAP_NET_ADMIN in the interface's network namespace)"
    )]
    PermissionDenied {
        /// The interface.
        ifname: String,
        /// The request, e.g. `ethtool FEATURES_GET`.
        what: &'static str,
        /// The kernel's error.
        source: io::Error,
    },
    /// A netlink socket could not be opened.
    #[error("cannot open a {protocol} netlink socket: {source}")]
    OpenSocket {
        /// `NETLINK_ROUTE` or `NETLINK_GENERIC`.
        protocol: &'static str,
        /// The socket error.
        source: io::Error,
    },
    /// A generic netlink family the probe needs is missing.
    #[error(
        "generic netlink family {family:?} is not available: {source} \
         (kernel built without CONFIG_ETHTOOL_NETLINK?)"
    )]
    ResolveFamily {
        /// The family name, e.g. `ethtool`.
        family: &'static str,
        /// The controller's error.
        source: io::Error,
    },
    /// A request about the interface failed for another reason.
    #[error("{what} for {ifname:?} failed: {source}")]
    Query {
        /// The interface.
        ifname: String,
        /// The request, e.g. `ethtool CHANNELS_GET`.
        what: &'static str,
        /// The kernel's or socket's error, with the kernel's extended ack text.
        source: io::Error,
    },
    /// A sysfs attribute could not be read or parsed.
    #[error("reading {path}: {source}")]
    ReadSysfs {
        /// The sysfs file.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
}
