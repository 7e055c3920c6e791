//! What a port hands the pipeline, and what it takes from it (DESIGN.md §2, §3).
//!
//! A port kind's receive burst hands the pipeline its frames as [`Pkt`] metadata plus an
//! [`RxBurst`] that reads their bytes where they lie (guest memory, UMEM, tap buffers);
//! the pipeline ([`BurstHandler`]) decides where each goes and gives each destination
//! port one [`TxBatch`]. Neither side sees the other's buffers: raw pointers stay in the
//! port modules, behind the `RxBurst` borrow that ends with the burst.

use super::vhost::virtq::{MemView, Seg};

/// Most frames taken from one receive queue per burst.
pub const BURST: usize = 32;

/// virtio-net header flag: the checksum at `csum_start + csum_offset` is partial
/// (virtio 1.2 §5.1.6).
pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// virtio-net GSO type: TCP over IPv4.
pub const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
/// virtio-net GSO type: TCP over IPv6.
pub const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
/// virtio-net GSO flag: the TSO frame has CWR set (needs HOST_ECN / GUEST_ECN).
pub const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;
/// Smallest `gso_size` a guest may ask for, in payload bytes per segment: Linux's
/// `TCP_MIN_SND_MSS` (include/net/tcp.h: `TCP_MIN_MSS`, 88, less 40 bytes of headers),
/// the floor of every Linux TCP sender's MSS, so no real driver is refused. A 64 KiB
/// frame thus makes at most 1,366 segments (one with `gso_size` 1 would make 65,000).
pub const MIN_GSO_SIZE: u16 = 48;
/// Offset of the checksum field in a TCP header (RFC 9293 §3.1): where a TSO frame's
/// partial checksum must point (Linux `virtio_net_hdr_to_skb`).
const TCP_CSUM_OFFSET: u16 = 16;

/// The offload fields of a `struct virtio_net_hdr` (virtio 1.2 §5.1.6), in host order;
/// all zero for a frame that carries no offload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VirtioNetHdr {
    /// `VIRTIO_NET_HDR_F_*` (only NEEDS_CSUM is kept).
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`, with the ECN bit.
    pub gso_type: u8,
    /// Bytes of headers (Ethernet to TCP) of a GSO frame.
    pub hdr_len: u16,
    /// Payload bytes per segment of a GSO frame.
    pub gso_size: u16,
    /// Offset of the first byte summed by a partial checksum.
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VirtioNetHdr {
    /// Parses the first ten bytes of a header (little endian, as VERSION_1 devices use).
    #[inline]
    pub fn from_bytes(b: &[u8; 10]) -> Self {
        let w = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VirtioNetHdr {
            flags: b[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: b[1],
            hdr_len: w(2),
            gso_size: w(4),
            csum_start: w(6),
            csum_offset: w(8),
        }
    }

    /// The ten header bytes, with `num_buffers` (bytes 10..12) zero.
    #[inline]
    pub fn to_bytes(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// The frame's checksum is partial.
    #[inline]
    pub fn needs_csum(&self) -> bool {
        self.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0
    }

    /// The GSO type without the ECN bit (0: not a GSO frame).
    #[inline]
    pub fn gso(&self) -> u8 {
        self.gso_type & !VIRTIO_NET_HDR_GSO_ECN
    }

    /// The frame carries an offload: a partial checksum or TSO.
    #[inline]
    pub fn has_offload(&self) -> bool {
        self.needs_csum() || self.gso_type != 0
    }

    /// Whether a driver that negotiated `acked` (its HOST_* features, device side) may
    /// send this header with a `len`-byte frame (virtio 1.2 §5.1.6.2, and Linux's
    /// `virtio_net_hdr_to_skb` rules): every offload asked for was negotiated (a TSO4
    /// frame needs HOST_TSO4, not just any of CSUM/TSO4/TSO6; CWR needs HOST_ECN; UDP and
    /// unknown GSO types are refused); a partial checksum's field lies in the frame; a
    /// TSO frame's checksum is the TCP one, `hdr_len` lies in the frame and `gso_size` is
    /// at least [`MIN_GSO_SIZE`]. A frame with a header that fails is dropped as
    /// `bad_offload`, so nothing a guest asks for reaches another guest unchecked.
    #[inline]
    pub fn is_valid_for(&self, len: u32, acked: &TxOffloads) -> bool {
        if !self.has_offload() {
            return true;
        }
        if !acked.accepts(self) {
            return false;
        }
        if self.needs_csum() && u32::from(self.csum_start) + u32::from(self.csum_offset) + 2 > len {
            return false;
        }
        self.gso() == 0
            || (self.gso_size >= MIN_GSO_SIZE
                && u32::from(self.hdr_len) <= len
                && (!self.needs_csum() || self.csum_offset == TCP_CSUM_OFFSET))
    }

    /// The header as the `geneve` crate's segmentation metadata.
    ///
    /// # Errors
    /// The crate's, for an unknown GSO type or a GSO frame with `gso_size` 0.
    pub fn gso_meta(&self) -> Result<geneve::GsoMeta, geneve::Error> {
        geneve::GsoMeta::from_virtio_net_hdr(
            self.flags,
            self.gso_type,
            self.hdr_len,
            self.gso_size,
            self.csum_start,
            self.csum_offset,
        )
    }
}

/// The offloads a destination takes whole (the rest is done in software before its
/// transmit lock is taken): for a vhost-user port its driver's GUEST_* features, for a
/// tap all of them, for an AF_XDP uplink none (AF_XDP descriptors carry no metadata).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxOffloads {
    /// Partial checksums (GUEST_CSUM).
    pub csum: bool,
    /// TCP over IPv4 TSO frames (GUEST_TSO4).
    pub tso4: bool,
    /// TCP over IPv6 TSO frames (GUEST_TSO6).
    pub tso6: bool,
    /// TSO frames with CWR set (GUEST_ECN).
    pub ecn: bool,
}

impl TxOffloads {
    /// Takes every offload.
    pub const ALL: TxOffloads = TxOffloads {
        csum: true,
        tso4: true,
        tso6: true,
        ecn: true,
    };
    /// Takes none.
    pub const NONE: TxOffloads = TxOffloads {
        csum: false,
        tso4: false,
        tso6: false,
        ecn: false,
    };

    /// Whether a frame with header `h` can go whole (virtio 1.2 §5.1.6.4).
    #[inline]
    pub fn accepts(&self, h: &VirtioNetHdr) -> bool {
        !h.has_offload()
            || ((!h.needs_csum() || self.csum)
                && (h.gso_type & VIRTIO_NET_HDR_GSO_ECN == 0 || self.ecn)
                && match h.gso() {
                    0 => true,
                    VIRTIO_NET_HDR_GSO_TCPV4 => self.tso4,
                    VIRTIO_NET_HDR_GSO_TCPV6 => self.tso6,
                    _ => false,
                })
    }
}

/// What a destination takes, read once per batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxPlan {
    /// The offloads it takes whole.
    pub takes: TxOffloads,
    /// It spreads a batch over several receive queues by flow hash, so every frame
    /// sent there needs its hash.
    pub spreads: bool,
}

/// Where a frame lies, in the terms of the port kind that received it: a descriptor
/// head and a range of the burst's descriptor segments (vhost-user), or an offset into
/// the port's buffer area (AF_XDP, tap). Only that port's [`RxBurst`] reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameLoc {
    /// Descriptor head (vhost-user) or 0.
    pub head: u16,
    /// Start: first segment index, or byte offset.
    pub start: u32,
    /// End: one past the last segment index, or a port-kind flag.
    pub end: u32,
}

/// One received frame's metadata.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pkt {
    /// Where its bytes are.
    pub loc: FrameLoc,
    /// Frame length in bytes (Ethernet header to end of payload, no virtio-net header).
    pub len: u32,
    /// Its offload metadata (zero when the source negotiated no offload).
    pub vhdr: VirtioNetHdr,
    /// Flow hash ([`flowcache::FlowKey::flow_hash`]) when `hashed`: computed at most once
    /// per frame, for the flow cache, the choice of a multiqueue guest's rx queue and
    /// (with the overlay) the Geneve UDP source port.
    pub hash: u32,
    /// `hash` is valid.
    pub hashed: bool,
}

/// The bytes of a frame being delivered.
pub enum FrameSrc<'a, 'm> {
    /// A guest's transmit buffers, after its virtio-net header.
    Guest {
        /// The source guest's memory.
        mem: &'a MemView<'m>,
        /// The frame's descriptor segments.
        segs: &'a [Seg],
        /// Bytes to skip (the virtio-net header).
        skip: u32,
    },
    /// Bytes in host memory: UMEM or tap buffers, or a frame made by the switch.
    Host(&'a [u8]),
    /// A frame merged by software GRO: its rewritten headers, then the segments'
    /// payloads where they lie.
    Merged {
        /// Headers (Ethernet, IP, TCP).
        head: &'a [u8],
        /// Payloads, in order.
        parts: &'a [&'a [u8]],
    },
}

impl FrameSrc<'_, '_> {
    /// Copies bytes `off..` of a host or merged frame into `out`; returns the bytes
    /// copied (0 for a guest's frame, which is read through its memory).
    pub fn read_host(&self, off: usize, out: &mut [u8]) -> usize {
        let mut chunks: [&[u8]; 1] = [&[]];
        let (head, parts): (&[u8], &[&[u8]]) = match *self {
            FrameSrc::Host(b) => {
                chunks[0] = b;
                (&[], &chunks)
            }
            FrameSrc::Merged { head, parts } => (head, parts),
            FrameSrc::Guest { .. } => return 0,
        };
        let (mut skip, mut n) = (off, 0);
        for c in std::iter::once(head).chain(parts.iter().copied()) {
            if skip >= c.len() {
                skip -= c.len();
                continue;
            }
            let take = (c.len() - skip).min(out.len() - n);
            out[n..n + take].copy_from_slice(&c[skip..skip + take]);
            n += take;
            skip = 0;
            if n == out.len() {
                break;
            }
        }
        n
    }
}

/// The frames of one receive burst, readable for as long as the burst lasts.
pub trait RxBurst<'m> {
    /// Copies bytes `off..` of frame `p` into `out`; returns the bytes copied.
    fn read(&self, p: &Pkt, off: u32, out: &mut [u8]) -> usize;
    /// The frame's bytes for delivery.
    fn frame<'a>(&'a self, p: &Pkt) -> FrameSrc<'a, 'm>;
    /// The frame as one slice, when it lies in host memory (an uplink's or a tap's
    /// frames; a guest's are scattered over its buffers).
    fn bytes(&self, p: &Pkt) -> Option<&[u8]>;
}

/// What a port kind's receive calls with each burst: the pipeline.
pub trait BurstHandler {
    /// Classifies and delivers the frames `pkts` of `burst`, received on queue `queue`
    /// of port `src`.
    fn handle<'m, B: RxBurst<'m>>(
        &mut self,
        src: &super::Port,
        queue: u16,
        burst: &B,
        pkts: &mut [Pkt],
    );
}

/// One frame of a transmit batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxItem {
    /// Frame `pkt` of the burst, whole, with its offload metadata.
    Whole {
        /// Index in the burst.
        pkt: u16,
    },
    /// A frame the switch made from frame `pkt` (a segment, or the frame with its
    /// checksum completed), in soft buffer `buf`; it carries no offload.
    Soft {
        /// Index in the burst of the frame it was made from.
        pkt: u16,
        /// Index of the soft buffer.
        buf: u32,
    },
    /// Frames merged by software GRO, starting with frame `pkt`: merged frame `m` of
    /// the batch.
    Merged {
        /// Index in the burst of its first segment.
        pkt: u16,
        /// Index in [`TxBatch::merged`].
        m: u32,
    },
}

/// A frame merged by software GRO, as a transmit batch carries it.
#[derive(Debug, Clone, Copy, Default)]
pub struct MergedDesc {
    /// Its headers: soft buffer `head` of the batch.
    pub head: u32,
    /// Its payloads: `TxBatch::parts[parts.0..parts.0 + parts.1]`.
    pub parts: (u16, u16),
    /// Its offload metadata (TSO, checksum valid).
    pub vhdr: VirtioNetHdr,
    /// Bytes of the whole frame.
    pub len: u32,
}

impl TxItem {
    /// The burst frame this item comes from.
    #[inline]
    pub fn pkt(&self) -> usize {
        match *self {
            TxItem::Whole { pkt } | TxItem::Soft { pkt, .. } | TxItem::Merged { pkt, .. } => {
                usize::from(pkt)
            }
        }
    }
}

/// What a destination port transmits in one batch: frames of one burst, each whole or
/// made plain by software offload beforehand.
pub struct TxBatch<'a, 'm, B> {
    /// The burst the frames come from.
    pub burst: &'a B,
    /// Its frames' metadata.
    pub pkts: &'a [Pkt],
    /// What to send, in order.
    pub items: &'a [TxItem],
    /// Frames made by software offload, indexed by [`TxItem::Soft::buf`].
    pub soft: &'a [Vec<u8>],
    /// Frames merged by software GRO, indexed by [`TxItem::Merged::m`].
    pub merged: &'a [MergedDesc],
    /// Their payloads.
    pub parts: &'a [&'a [u8]],
    /// The source queue (keeps a source queue's frames on one transmit queue).
    pub src_queue: u16,
    /// The PMD transmitting (its counters are the ones written).
    pub pmd: usize,
    /// The burst is replicated to many destinations: its copies into guest memory
    /// bypass the cache ([`crate::ports::vhost::deliver`]).
    pub streaming: bool,
    /// Ties `'m` (the burst's memory) to the batch.
    pub _mem: std::marker::PhantomData<&'m ()>,
}

impl<'a, 'm, B: RxBurst<'m>> TxBatch<'a, 'm, B> {
    /// The item's offload metadata (none for soft frames).
    #[inline]
    pub fn vhdr(&self, it: &TxItem) -> VirtioNetHdr {
        match *it {
            TxItem::Whole { pkt } => self.pkts[usize::from(pkt)].vhdr,
            TxItem::Soft { .. } => VirtioNetHdr::default(),
            TxItem::Merged { m, .. } => self.merged[m as usize].vhdr,
        }
    }

    /// The item's length in bytes.
    #[inline]
    pub fn len(&self, it: &TxItem) -> u32 {
        match *it {
            TxItem::Whole { pkt } => self.pkts[usize::from(pkt)].len,
            TxItem::Soft { buf, .. } => self.soft[buf as usize].len() as u32,
            TxItem::Merged { m, .. } => self.merged[m as usize].len,
        }
    }

    /// The item's bytes.
    #[inline]
    pub fn frame(&self, it: &TxItem) -> FrameSrc<'a, 'm> {
        match *it {
            TxItem::Whole { pkt } => self.burst.frame(&self.pkts[usize::from(pkt)]),
            TxItem::Soft { buf, .. } => FrameSrc::Host(&self.soft[buf as usize]),
            TxItem::Merged { m, .. } => {
                let d = &self.merged[m as usize];
                let (s, n) = (usize::from(d.parts.0), usize::from(d.parts.1));
                FrameSrc::Merged {
                    head: &self.soft[d.head as usize],
                    parts: &self.parts[s..s + n],
                }
            }
        }
    }

    /// Copies bytes `off..` of the item into `out`; returns the bytes copied.
    #[inline]
    pub fn read(&self, it: &TxItem, off: u32, out: &mut [u8]) -> usize {
        match *it {
            TxItem::Whole { pkt } => self.burst.read(&self.pkts[usize::from(pkt)], off, out),
            TxItem::Soft { .. } | TxItem::Merged { .. } => {
                self.frame(it).read_host(off as usize, out)
            }
        }
    }

    /// The item's flow hash (valid when the pipeline computed it for this destination).
    #[inline]
    pub fn hash(&self, it: &TxItem) -> u32 {
        self.pkts[it.pkt()].hash
    }
}

/// One frame of an encapsulation batch: burst frame `pkt` with template `tmpl`.
#[derive(Debug, Clone, Copy)]
pub struct EncapItem {
    /// Index in the burst.
    pub pkt: u16,
    /// Index in the PMD's templates.
    pub tmpl: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtio_net_hdr_round_trip() {
        let b = [1, 0x81, 54, 0, 0xa8, 5, 34, 0, 16, 0];
        let h = VirtioNetHdr::from_bytes(&b);
        assert_eq!(h.hdr_len, 54);
        assert_eq!(h.gso_size, 1448);
        assert_eq!(h.gso(), VIRTIO_NET_HDR_GSO_TCPV4);
        assert!(h.needs_csum() && h.has_offload());
        assert_eq!(&h.to_bytes()[..10], &b);
        assert_eq!(&h.to_bytes()[10..], &[0, 0]);
    }

    #[test]
    fn offload_acceptance_follows_the_features() {
        let tso4 = VirtioNetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_TCPV4,
            ..Default::default()
        };
        let ecn = VirtioNetHdr {
            gso_type: VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN,
            ..tso4
        };
        let csum = VirtioNetHdr {
            flags: VIRTIO_NET_HDR_F_NEEDS_CSUM,
            ..Default::default()
        };
        assert!(TxOffloads::NONE.accepts(&VirtioNetHdr::default()));
        assert!(!TxOffloads::NONE.accepts(&csum));
        assert!(TxOffloads::ALL.accepts(&ecn));
        let no_ecn = TxOffloads {
            ecn: false,
            ..TxOffloads::ALL
        };
        assert!(no_ecn.accepts(&tso4) && !no_ecn.accepts(&ecn));
        let no_csum = TxOffloads {
            csum: false,
            ..TxOffloads::ALL
        };
        assert!(
            !no_csum.accepts(&tso4),
            "TSO needs the partial checksum taken too"
        );
        let udp = VirtioNetHdr {
            gso_type: 3,
            ..Default::default()
        };
        assert!(!TxOffloads::ALL.accepts(&udp), "UDP GSO is not offered");
    }
}
