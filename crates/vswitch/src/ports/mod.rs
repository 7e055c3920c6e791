//! Port kinds: vhost-user (VMs), AF_XDP uplinks (NICs) and taps (the host stack).

pub mod afxdp;
pub mod tap;
pub mod vhost;
