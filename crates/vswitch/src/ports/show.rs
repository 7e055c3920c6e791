//! What `vswitchctl show` says of a port: the view every port kind fills in
//! ([`super::Port::show`]), carried by the control protocol as it is.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
/// Live migration of the VM on a vhost-user port (`vswitchctl show`).
pub struct ShowMigration {
    /// The front-end asked for dirty-page logging (`VHOST_F_LOG_ALL`) and shared a log:
    /// a migration is in progress.
    pub logging: bool,
    /// Guest pages the switch marked dirty on this connection.
    pub pages_marked: u64,
    /// Dirty logs the front-end shared (`SET_LOG_BASE`) on this connection.
    pub logs_set: u64,
    /// MAC announcements sent into the switch after switch-over (`SEND_RARP`).
    pub announced: u64,
}

/// One virtqueue of a vhost-user port in `vswitchctl show`: where the device (the
/// switch) and the driver (the guest) stand. Indices are free-running 16-bit positions
/// (virtio 1.2 §2.7.6, §2.7.8).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShowVring {
    /// Virtqueue index: even for the guest's receive queues, odd for its transmit ones.
    pub index: u16,
    /// The ring was started (SET_VRING_KICK) and not stopped (GET_VRING_BASE).
    pub ready: bool,
    /// SET_VRING_ENABLE enabled it.
    pub enabled: bool,
    /// The driver gave an eventfd for kicks (SET_VRING_KICK).
    pub kick_fd: bool,
    /// The driver gave an eventfd for interrupts (SET_VRING_CALL).
    pub call_fd: bool,
    /// Size in descriptors.
    pub size: u16,
    /// The next available position the switch takes (packed rings: the slot, with the
    /// wrap counter in bit 15).
    pub next_avail: u16,
    /// The next used position the switch writes.
    pub next_used: u16,
    /// Split rings: the driver's `avail.idx` in guest memory. `avail_idx - next_avail`
    /// buffers are waiting for the switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avail_idx: Option<u16>,
    /// Split rings: `used.idx` in guest memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_idx: Option<u16>,
    /// Split rings with EVENT_IDX: the driver's `used_event`, the used position after
    /// which it wants an interrupt; far behind `used_idx`, the driver has not looked at
    /// the ring since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_event: Option<u16>,
}

/// One port in `vswitchctl show`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShowPort {
    /// Port id.
    pub id: u16,
    /// Name.
    pub name: String,
    /// `vhost-user`, `vhost-user-client`, `afxdp` or `tap`.
    pub kind: String,
    /// Socket path.
    pub path: String,
    /// Access VLAN (0: untagged).
    pub vlan: u16,
    /// Bridge domain (`untagged`, `vlan 10`).
    #[serde(default)]
    pub domain: String,
    /// `up` or `down`.
    pub link: String,
    /// vhost-user: a driver (QEMU, virtio-user) is attached to the socket now.
    pub connected: bool,
    /// vhost-user: how many times a driver has connected since the port was added
    /// (the current connection included).
    pub connections: u64,
    /// vhost-user server sockets: ready for the next driver (no driver attached and the
    /// next connection's device set up).
    #[serde(default)]
    pub listening: bool,
    /// vhost-user server sockets: the socket file's mode and group as set
    /// (`mode 0660 group libvirt-qemu`; empty when neither was set).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub socket_access: String,
    /// Connections closed by vswitchd on a protocol error (vhost-user).
    #[serde(default)]
    pub protocol_errors: u64,
    /// Queue pairs offered.
    pub queue_pairs: u16,
    /// Queue pairs the driver enabled.
    pub ready_queue_pairs: Vec<u16>,
    /// Negotiated virtio features.
    pub negotiated_features: Vec<String>,
    /// The negotiated offload features (CSUM, GUEST_CSUM, HOST/GUEST_TSO4/6,
    /// HOST/GUEST_ECN): what frames from and to this port may carry.
    #[serde(default)]
    pub offloads: Vec<String>,
    /// Whether the port offers offloads (`offloads=on`).
    #[serde(default)]
    pub offloads_offered: bool,
    /// PMD index polling each source queue (vhost-user: queue pair's transmit queue;
    /// afxdp: NIC rx queue; tap: the tap).
    pub pmd_of_queue: Vec<usize>,
    /// Frames taken from each source queue so far.
    #[serde(default)]
    pub queue_packets: Vec<u64>,
    /// vhost-user ports with a driver: live-migration state of the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<ShowMigration>,
    /// vhost-user ports with a driver: the state of each virtqueue, the switch's side
    /// and the driver's, for telling a stuck guest from a stuck switch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vrings: Vec<ShowVring>,
    /// afxdp and tap ports: the network interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iface: String,
    /// Ports with `iface_id=`: the OVN logical switch port, and what the chassis made of
    /// it (its switch, VNI and key, or why it is not bound).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ovn: String,
    /// afxdp ports: the AF_XDP mode in use and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub afxdp: Option<ShowAfxdp>,
}

/// An AF_XDP uplink in `vswitchctl show`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShowAfxdp {
    /// `zero-copy`, `native-copy` or `generic`.
    pub mode: String,
    /// Why this mode (nicoffload's decision, or the fallback taken).
    pub reason: String,
    /// AF_XDP sockets (NIC rx queues 0..N).
    pub queues: u16,
    /// Frames received by each socket.
    #[serde(default)]
    pub rx_per_queue: Vec<u64>,
    /// Multi-buffer (`XDP_USE_SG`) is on: frames larger than a UMEM frame pass.
    #[serde(default)]
    pub multi_buffer: bool,
    /// The interface's MTU (bytes), as last reported by the kernel.
    #[serde(default)]
    pub mtu: u32,
    /// Largest frame the uplink transmits (bytes, with Ethernet and VLAN headers).
    #[serde(default)]
    pub max_frame: u32,
    /// The kernel's AF_XDP socket counters, summed over the sockets: drops the switch
    /// never saw.
    #[serde(default)]
    pub kernel: super::afxdp::KernelXskStats,
}
