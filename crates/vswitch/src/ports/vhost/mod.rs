//! vhost-user ports: the device (protocol handling) and the split virtqueues.

pub mod device;
pub mod virtq;
