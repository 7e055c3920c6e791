//! Software TCP segmentation (TSO/GSO) with virtio-net metadata
//! (virtio 1.2 §5.1.6.2 "Packet Transmission"), optionally Geneve
//! encapsulating each segment, and checksum completion.
//!
//! ## Use from a virtio-net (vhost-user) transmit path
//!
//! ```
//! use geneve::{segment, GsoMeta, SegmentPlan};
//! # let frame = geneve::gso::example_tcp_frame(4000);
//! // Fields of the guest's struct virtio_net_hdr (converted from le16):
//! let meta = GsoMeta::from_virtio_net_hdr(
//!     GsoMeta::VIRTIO_NET_HDR_F_NEEDS_CSUM, // flags
//!     GsoMeta::VIRTIO_NET_HDR_GSO_TCPV4,    // gso_type
//!     54,                                    // hdr_len (a hint; recomputed)
//!     1448,                                  // gso_size (MSS, payload bytes)
//!     34,                                    // csum_start
//!     16,                                    // csum_offset
//! )?;
//! let plan = SegmentPlan::new(&frame, &meta, 0)?;
//! let mut bufs = vec![[0u8; 1514]; plan.count()];
//! let plan = segment(&frame, &meta, None, &mut bufs)?;
//! for (i, buf) in bufs.iter().enumerate() {
//!     let wire_frame = &buf[..plan.segment_len(i)];
//!     assert!(wire_frame.len() <= 1514);
//! }
//! # Ok::<(), geneve::Error>(())
//! ```
//!
//! Every segment leaves with complete checksums (inner IPv4 header, inner
//! TCP; outer IPv4 header and, if the tunnel has it on, outer UDP). The
//! guest's checksum field is not trusted: it is recomputed, so both the
//! Linux convention (pseudo-header sum pre-loaded) and a full checksum work.
//!
//! UDP segmentation (virtio `GSO_UDP`/`GSO_UDP_L4`) is out of scope: such a
//! frame returns [`Error::UnsupportedGsoType`].

use crate::checksum::{self, add, finish};
use crate::encap::{flow_hash, TunnelTemplate};
use crate::net::{
    be16, be32, parse_tcp, put16, put32, tcp_flags, tcp_pseudo_sum, TcpFrame, TcpParseError,
};
use crate::Error;

/// Bytes of a `struct virtio_net_hdr` without `num_buffers` (virtio 1.2
/// §5.1.6): `flags`, `gso_type`, `hdr_len`, `gso_size`, `csum_start`,
/// `csum_offset`.
pub const VIRTIO_NET_HDR_LEN: usize = 10;

/// Kind of segmentation a frame asks for (virtio `gso_type` without the ECN
/// bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GsoType {
    /// Not a large frame: at most a checksum to complete.
    None,
    /// TCP over IPv4 (`VIRTIO_NET_HDR_GSO_TCPV4`).
    TcpV4,
    /// TCP over IPv6 (`VIRTIO_NET_HDR_GSO_TCPV6`).
    TcpV6,
}

/// Offload metadata of one frame, as in `struct virtio_net_hdr`
/// (virtio 1.2 §5.1.6), in host byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GsoMeta {
    /// What segmentation the frame needs.
    pub gso_type: GsoType,
    /// `VIRTIO_NET_HDR_GSO_ECN`: the sender does ECN; CWR on the first
    /// segment only (which this segmenter always does).
    pub ecn: bool,
    /// Payload bytes per segment (the MSS). Ignored for [`GsoType::None`].
    pub gso_size: u16,
    /// Length of the headers (Ethernet + IP + TCP) in bytes. A hint: the
    /// segmenter parses the headers itself.
    pub hdr_len: u16,
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the L4 checksum is partial and
    /// `csum_start`/`csum_offset` say where.
    pub needs_csum: bool,
    /// `VIRTIO_NET_HDR_F_DATA_VALID` (receive side): checksums were verified.
    pub data_valid: bool,
    /// Offset of the start of the checksummed range (the L4 header), bytes.
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`, bytes (16 for TCP).
    pub csum_offset: u16,
}

impl GsoMeta {
    /// virtio `flags` bit: checksum partial.
    pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
    /// virtio `flags` bit: checksum verified.
    pub const VIRTIO_NET_HDR_F_DATA_VALID: u8 = 2;
    /// virtio `gso_type`: no segmentation.
    pub const VIRTIO_NET_HDR_GSO_NONE: u8 = 0;
    /// virtio `gso_type`: TCP over IPv4.
    pub const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
    /// virtio `gso_type`: UDP fragmentation (not supported).
    pub const VIRTIO_NET_HDR_GSO_UDP: u8 = 3;
    /// virtio `gso_type`: TCP over IPv6.
    pub const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
    /// virtio `gso_type`: UDP segmentation (not supported).
    pub const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
    /// virtio `gso_type` bit: ECN.
    pub const VIRTIO_NET_HDR_GSO_ECN: u8 = 0x80;

    /// Metadata for a frame that needs nothing.
    pub const NONE: GsoMeta = GsoMeta {
        gso_type: GsoType::None,
        ecn: false,
        gso_size: 0,
        hdr_len: 0,
        needs_csum: false,
        data_valid: false,
        csum_start: 0,
        csum_offset: 0,
    };

    /// Builds metadata from the fields of a `struct virtio_net_hdr`
    /// (already converted to host order).
    ///
    /// # Errors
    /// [`Error::UnsupportedGsoType`] for UDP GSO or an unknown type;
    /// [`Error::BadGsoSize`] for a TCP GSO type with `gso_size` 0.
    pub fn from_virtio_net_hdr(
        flags: u8,
        gso_type: u8,
        hdr_len: u16,
        gso_size: u16,
        csum_start: u16,
        csum_offset: u16,
    ) -> Result<Self, Error> {
        let t = match gso_type & !Self::VIRTIO_NET_HDR_GSO_ECN {
            Self::VIRTIO_NET_HDR_GSO_NONE => GsoType::None,
            Self::VIRTIO_NET_HDR_GSO_TCPV4 => GsoType::TcpV4,
            Self::VIRTIO_NET_HDR_GSO_TCPV6 => GsoType::TcpV6,
            _ => return Err(Error::UnsupportedGsoType),
        };
        if t != GsoType::None && gso_size == 0 {
            return Err(Error::BadGsoSize);
        }
        Ok(GsoMeta {
            gso_type: t,
            ecn: gso_type & Self::VIRTIO_NET_HDR_GSO_ECN != 0,
            gso_size,
            hdr_len,
            needs_csum: flags & Self::VIRTIO_NET_HDR_F_NEEDS_CSUM != 0,
            data_valid: flags & Self::VIRTIO_NET_HDR_F_DATA_VALID != 0,
            csum_start,
            csum_offset,
        })
    }

    /// The virtio `flags` byte for this metadata.
    pub fn virtio_flags(&self) -> u8 {
        (if self.needs_csum {
            Self::VIRTIO_NET_HDR_F_NEEDS_CSUM
        } else {
            0
        }) | (if self.data_valid {
            Self::VIRTIO_NET_HDR_F_DATA_VALID
        } else {
            0
        })
    }

    /// The virtio `gso_type` byte for this metadata.
    pub fn virtio_gso_type(&self) -> u8 {
        let t = match self.gso_type {
            GsoType::None => Self::VIRTIO_NET_HDR_GSO_NONE,
            GsoType::TcpV4 => Self::VIRTIO_NET_HDR_GSO_TCPV4,
            GsoType::TcpV6 => Self::VIRTIO_NET_HDR_GSO_TCPV6,
        };
        t | if self.ecn {
            Self::VIRTIO_NET_HDR_GSO_ECN
        } else {
            0
        }
    }

    /// Parses a `struct virtio_net_hdr` (virtio 1.2 §5.1.6: `flags`,
    /// `gso_type`, then `hdr_len`, `gso_size`, `csum_start`, `csum_offset`
    /// as little-endian u16s) from the first [`VIRTIO_NET_HDR_LEN`] bytes of
    /// `hdr`, as a tap with `IFF_VNET_HDR` or a virtqueue hands it over.
    /// Longer headers (the 12-byte `virtio_net_hdr_mrg_rxbuf` with
    /// `num_buffers`) parse the same; the bytes after the tenth are ignored.
    ///
    /// # Errors
    /// [`Error::Truncated`] if `hdr` is shorter than 10 bytes; otherwise as
    /// [`GsoMeta::from_virtio_net_hdr`].
    pub fn parse_virtio_net_hdr(hdr: &[u8]) -> Result<Self, Error> {
        let h: &[u8; VIRTIO_NET_HDR_LEN] = hdr
            .get(..VIRTIO_NET_HDR_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(Error::Truncated)?;
        let le = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
        Self::from_virtio_net_hdr(h[0], h[1], le(2), le(4), le(6), le(8))
    }

    /// This metadata as the 10 bytes of a `struct virtio_net_hdr` (virtio
    /// 1.2 §5.1.6, little-endian fields), ready to precede a frame written to
    /// a tap with `IFF_VNET_HDR` (with a 12-byte header, `num_buffers`
    /// follows as 0). The inverse of [`GsoMeta::parse_virtio_net_hdr`].
    pub fn to_virtio_net_hdr(&self) -> [u8; VIRTIO_NET_HDR_LEN] {
        let mut h = [0u8; VIRTIO_NET_HDR_LEN];
        h[0] = self.virtio_flags();
        h[1] = self.virtio_gso_type();
        for (i, v) in [
            self.hdr_len,
            self.gso_size,
            self.csum_start,
            self.csum_offset,
        ]
        .into_iter()
        .enumerate()
        {
            h[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_le_bytes());
        }
        h
    }
}

/// Completes the partial checksum of a frame with
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM` (virtio 1.2 §5.1.6.2): the Internet
/// checksum over `frame[csum_start..]` stored at `csum_start + csum_offset`.
/// Does nothing if `meta.needs_csum` is false. Works for any L4 protocol
/// (TCP, UDP, SCTP-less); the field must hold the pseudo-header sum, as
/// virtio requires.
///
/// # Errors
/// [`Error::BadChecksumOffset`] if the field lies outside the frame.
pub fn complete_checksum(frame: &mut [u8], meta: &GsoMeta) -> Result<(), Error> {
    if !meta.needs_csum {
        return Ok(());
    }
    checksum::complete_partial(
        frame,
        usize::from(meta.csum_start),
        usize::from(meta.csum_offset),
    )
}

/// How a frame will be segmented: number of segments and each one's length.
/// Computing it does not write anything, so a caller can size its buffers
/// first (e.g. count the guest rx descriptors or UMEM frames it needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentPlan {
    outer_len: usize,
    tcp: Option<TcpFrame>,
    frame_len: usize,
    mss: usize,
    count: usize,
}

impl SegmentPlan {
    /// Plans the segmentation of `frame` with `meta`, each segment preceded
    /// by `outer_len` bytes of outer header (0 for plain TSO,
    /// [`TunnelTemplate::header_len`] for Geneve).
    ///
    /// # Errors
    /// [`Error::NotTcp`] if the frame is not Ethernet + IPv4/IPv6 + TCP of
    /// `meta.gso_type` (or is an IPv4 fragment); [`Error::BadLength`] or
    /// [`Error::Truncated`] for inconsistent headers;
    /// [`Error::BadChecksumOffset`] if `needs_csum` and `csum_start` /
    /// `csum_offset` are not the TCP header / 16; [`Error::BadGsoSize`] for
    /// `gso_size` 0; [`Error::TooLong`] if a segment's IP packet would
    /// exceed 65535 bytes.
    pub fn new(frame: &[u8], meta: &GsoMeta, outer_len: usize) -> Result<Self, Error> {
        if meta.gso_type == GsoType::None {
            return Ok(SegmentPlan {
                outer_len,
                tcp: None,
                frame_len: frame.len(),
                mss: 0,
                count: 1,
            });
        }
        let t = parse_tcp(frame).map_err(|e| match e {
            TcpParseError::Truncated => Error::Truncated,
            TcpParseError::BadLength => Error::BadLength,
            TcpParseError::NotIp | TcpParseError::NotTcp | TcpParseError::Fragment => Error::NotTcp,
        })?;
        if t.ipv4 != (meta.gso_type == GsoType::TcpV4) {
            return Err(Error::NotTcp);
        }
        if meta.needs_csum && (usize::from(meta.csum_start) != t.l4_off() || meta.csum_offset != 16)
        {
            return Err(Error::BadChecksumOffset);
        }
        if meta.gso_size == 0 {
            return Err(Error::BadGsoSize);
        }
        let mss = usize::from(meta.gso_size);
        if t.l3_len + t.l4_len + mss.min(t.payload_len) > 65535 {
            return Err(Error::TooLong);
        }
        let count = t.payload_len.div_ceil(mss).max(1);
        Ok(SegmentPlan {
            outer_len,
            tcp: Some(t),
            frame_len: t.end(),
            mss,
            count,
        })
    }

    /// Number of segments (≥ 1).
    pub const fn count(&self) -> usize {
        self.count
    }

    /// Length in bytes of segment `i` (outer header included), `i < count()`.
    pub fn segment_len(&self, i: usize) -> usize {
        match self.tcp {
            None => self.outer_len + self.frame_len,
            Some(t) => {
                let start = i * self.mss;
                let chunk = self.mss.min(t.payload_len.saturating_sub(start));
                self.outer_len + t.hdr_len() + chunk
            }
        }
    }

    /// Offset of the inner L4 header within each segment (outer header
    /// included), bytes: the `csum_start` of segments made with
    /// [`InnerChecksum::Partial`] (`csum_offset` is 16 for TCP). For a
    /// [`GsoType::None`] frame: `outer_len` + the frame's own `csum_start`.
    pub fn csum_start(&self, meta: &GsoMeta) -> usize {
        self.outer_len
            + self
                .tcp
                .map_or(usize::from(meta.csum_start), |t| t.l4_off())
    }

    /// Length in bytes of the largest segment (the first).
    pub fn max_segment_len(&self) -> usize {
        self.segment_len(0)
    }

    /// Length of the inner Ethernet + IP + TCP headers copied into every
    /// segment, in bytes (the whole frame for [`GsoType::None`]).
    pub fn inner_header_len(&self) -> usize {
        self.tcp.map_or(self.frame_len, |t| t.hdr_len())
    }
}

/// Segments one frame into `out[0..plan.count()]`, optionally Geneve
/// encapsulating each segment with `encap`. Returns the plan; segment `i`
/// is `out[i][..plan.segment_len(i)]`.
///
/// For [`GsoType::TcpV4`] / [`GsoType::TcpV6`] each segment carries
/// `gso_size` payload bytes (the last the rest) and gets: IPv4 total length,
/// ID (first segment's ID + i, wrapping), header checksum; or IPv6 payload
/// length; TCP sequence number + i × `gso_size`; CWR only on the first
/// segment, FIN and PSH only on the last; full TCP checksum. With `encap`,
/// the outer header is written from the template (UDP source port from the
/// inner flow hash, outer IPv4 ID from the template's counter, UDP checksum
/// if the tunnel has it on, computed from the same payload sums).
///
/// For [`GsoType::None`] the frame is copied once, its partial checksum
/// completed if `needs_csum`, and encapsulated if `encap` is given.
///
/// Nothing is allocated. Nothing is written unless every buffer needed is
/// present and large enough.
///
/// # Errors
/// As [`SegmentPlan::new`]; [`Error::BufferTooSmall`] if `out` has fewer
/// than `count()` buffers or one is shorter than its segment;
/// [`Error::BadChecksumOffset`] for a [`GsoType::None`] frame whose
/// checksum field lies outside it; [`Error::TooLong`] if an outer UDP
/// length would exceed 65535.
pub fn segment<B: AsMut<[u8]>>(
    frame: &[u8],
    meta: &GsoMeta,
    encap: Option<&mut TunnelTemplate>,
    out: &mut [B],
) -> Result<SegmentPlan, Error> {
    segment_with(frame, meta, encap, out, InnerChecksum::Full)
}

/// How [`segment_with`] leaves each segment's inner L4 checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InnerChecksum {
    /// Complete checksum in every segment (what [`segment`] does).
    Full,
    /// Partial checksum, for a next hop that completes it (a guest with
    /// `VIRTIO_NET_F_GUEST_CSUM`, or a NIC with checksum offload): the TCP
    /// checksum field holds the folded pseudo-header sum of the segment and
    /// the segment needs `NEEDS_CSUM` with `csum_start` =
    /// [`SegmentPlan::csum_start`], `csum_offset` = 16. The payload is copied
    /// by the same kernel as with `Full` (its sum, nearly free beside the
    /// loads and stores, is not used). With an encapsulating template that computes the UDP
    /// checksum, the outer checksum is computed with local checksum offload
    /// (LCO, Linux `Documentation/networking/checksum-offloads.rst`): it is
    /// valid once the inner checksum has been completed. For a
    /// [`GsoType::None`] frame with `needs_csum`, the frame's own partial
    /// checksum is left as it is.
    Partial,
}

/// As [`segment`], choosing how the inner checksum is left.
///
/// # Errors
/// As [`segment`].
pub fn segment_with<B: AsMut<[u8]>>(
    frame: &[u8],
    meta: &GsoMeta,
    mut encap: Option<&mut TunnelTemplate>,
    out: &mut [B],
    inner_csum: InnerChecksum,
) -> Result<SegmentPlan, Error> {
    let partial = inner_csum == InnerChecksum::Partial;
    let outer_len = encap.as_ref().map_or(0, |t| t.header_len());
    let plan = SegmentPlan::new(frame, meta, outer_len)?;
    if out.len() < plan.count {
        return Err(Error::BufferTooSmall);
    }
    // Every segment but the last has the first one's length.
    let (full, last) = (plan.segment_len(0), plan.segment_len(plan.count - 1));
    let (most, tail) = out[..plan.count].split_at_mut(plan.count - 1);
    if most.iter_mut().any(|b| b.as_mut().len() < full) || tail[0].as_mut().len() < last {
        return Err(Error::BufferTooSmall);
    }
    if let Some(tpl) = encap.as_deref() {
        tpl.check_inner_len(plan.max_segment_len() - outer_len)?;
    }
    if plan.tcp.is_none()
        && meta.needs_csum
        && usize::from(meta.csum_start) + usize::from(meta.csum_offset) + 2 > frame.len()
    {
        return Err(Error::BadChecksumOffset);
    }
    let hash = if encap.is_some() { flow_hash(frame) } else { 0 };
    let Some(t) = plan.tcp else {
        let dst = out[0].as_mut();
        let inner = &mut dst[outer_len..outer_len + frame.len()];
        inner.copy_from_slice(frame);
        let leave_partial = partial && meta.needs_csum;
        if !leave_partial {
            complete_checksum(inner, meta)?;
        }
        if let Some(tpl) = encap.as_deref_mut() {
            let port = tpl.port_for_hash(hash);
            let s = if !tpl.udp_checksum() {
                0
            } else if leave_partial {
                lco_sum(
                    inner,
                    usize::from(meta.csum_start),
                    usize::from(meta.csum_offset),
                )
            } else {
                checksum::sum_fast(inner)
            };
            tpl.write_header(&mut dst[..outer_len], frame.len(), port, hash, s)?;
        }
        return Ok(plan);
    };

    let hdr_len = t.hdr_len();
    let l3 = t.l2_len;
    let l4 = t.l4_off();
    let h = &frame[l3..l4];
    // IP header sum without the fields each segment patches (IPv4 total
    // length, ID and checksum; IPv6 payload length): each segment adds its
    // own (incremental, RFC 1624), so no header is summed per segment.
    let ip_sum0 = if t.ipv4 {
        add(
            checksum::sum(h),
            finish(add(add(be16(h, 2), be16(h, 4)), be16(h, 10))),
        )
    } else {
        add(checksum::sum(h), finish(be16(h, 4)))
    };
    // Likewise the TCP header without sequence number, data offset + flags
    // word and checksum.
    let tcp_base = {
        let h = &frame[l4..hdr_len];
        let patched = add(add(be16(h, 4), be16(h, 6)), add(be16(h, 12), be16(h, 16)));
        add(checksum::sum(h), finish(patched))
    };
    // Outer header template and inner headers side by side, copied into
    // each segment as one piece.
    let mut headers = [0u8; HEADERS_MAX];
    let headers_len = outer_len + hdr_len;
    let fits = headers_len <= HEADERS_MAX;
    if fits {
        if let Some(tpl) = encap.as_deref() {
            headers[..outer_len].copy_from_slice(tpl.header());
        }
        headers[outer_len..headers_len].copy_from_slice(&frame[..hdr_len]);
    }
    let pseudo0 = tcp_pseudo_sum(frame, &t, 0);
    let l2_sum = checksum::sum(&frame[..l3]);
    let mid = if fits {
        middle_template(
            &headers,
            frame,
            &t,
            plan.mss,
            plan.count,
            partial,
            outer_len,
            ip_sum0,
            tcp_base,
            pseudo0,
            l2_sum,
            encap.as_deref_mut(),
            hash,
        )
    } else {
        None
    };
    let mut seg = TcpSegments {
        frame,
        t,
        mss: plan.mss,
        count: plan.count,
        partial,
        outer_len,
        headers: fits.then_some(&headers),
        mid: mid.as_ref(),
        seq0: be32(frame, l4 + 4),
        flags0: frame[l4 + 13],
        id0: if t.ipv4 { be16(frame, l3 + 4) } else { 0 },
        pseudo0,
        l2_sum,
        ip_sum0,
        tcp_base,
        port: encap.as_ref().map_or(0, |tpl| tpl.port_for_hash(hash)),
        hash,
        encap,
        out: &mut out[..plan.count],
    };
    // One dispatch for the whole loop: the copy-and-sum kernel inlines
    // into each segment's work (see `checksum::arch`).
    checksum::arch().dispatch(&mut seg)?;
    Ok(plan)
}

/// Room for the outer and inner headers copied into each segment as one
/// piece: two 64-byte blocks. Longer headers (many Geneve or TCP options)
/// take a plain copy.
const HEADERS_MAX: usize = 128;

/// The per-segment loop of [`segment_with`] for a TCP frame, with what is
/// computed once per frame.
struct TcpSegments<'a, 'o, 't, B> {
    frame: &'a [u8],
    t: TcpFrame,
    mss: usize,
    count: usize,
    partial: bool,
    outer_len: usize,
    /// Outer template followed by the inner headers, if they fit
    /// [`HEADERS_MAX`].
    headers: Option<&'a [u8; HEADERS_MAX]>,
    /// The headers of the segments between the first and the last, if
    /// they take the fast path.
    mid: Option<&'a Middle>,
    seq0: u32,
    flags0: u8,
    id0: u16,
    /// TCP pseudo-header sum with length 0.
    pseudo0: u16,
    /// Sum of the inner L2 header (constant per segment).
    l2_sum: u16,
    /// IP header sum without the per-segment fields.
    ip_sum0: u16,
    /// TCP header sum without the per-segment fields.
    tcp_base: u16,
    port: u16,
    hash: u32,
    encap: Option<&'t mut TunnelTemplate>,
    out: &'o mut [B],
}

impl<B: AsMut<[u8]>> pulp::WithSimd for &mut TcpSegments<'_, '_, '_, B> {
    type Output = Result<(), Error>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Result<(), Error> {
        // Everything per frame in locals: the stores into the segments
        // would otherwise make the compiler reload each field.
        let TcpSegments {
            frame,
            t,
            mss,
            count,
            partial,
            outer_len,
            headers,
            mid,
            seq0,
            flags0,
            id0,
            pseudo0,
            l2_sum,
            ip_sum0,
            tcp_base,
            port,
            hash,
            ref mut encap,
            ref mut out,
        } = *self;
        let (l3, l4, hdr_len) = (t.l2_len, t.l4_off(), t.hdr_len());
        let hl = outer_len + hdr_len;
        let payload = &frame[hdr_len..t.end()];
        let doff = frame[l4 + 12];
        let oid0 = encap.as_deref().map_or(0, TunnelTemplate::next_id);
        // Without CWR the first segment's headers are a middle one's too
        // (same lengths; FIN and PSH only on the last).
        let first = usize::from(flags0 & tcp_flags::CWR != 0);
        let mut i = 0;
        while i < count {
            if let Some(m) = mid.filter(|_| i == first) {
                m.write(first, &mut out[first..count - 1], payload);
                i = count - 1;
                continue;
            }
            let b = &mut out[i];
            let start = i * mss;
            let chunk = mss.min(payload.len() - start);
            let seg_len = hl + chunk;
            let dst = &mut b.as_mut()[..seg_len];
            // Headers first: the fixed-size copy may run into the payload
            // area, which the payload copy then overwrites.
            match headers {
                Some(h) if seg_len >= HEADERS_MAX => {
                    if hl <= HEADERS_MAX / 2 {
                        dst[..HEADERS_MAX / 2].copy_from_slice(&h[..HEADERS_MAX / 2]);
                    } else {
                        dst[..HEADERS_MAX].copy_from_slice(h);
                    }
                }
                Some(h) => dst[..hl].copy_from_slice(&h[..hl]),
                None => {
                    if let Some(tpl) = encap.as_deref() {
                        dst[..outer_len].copy_from_slice(tpl.header());
                    }
                    dst[outer_len..hl].copy_from_slice(&frame[..hdr_len]);
                }
            }
            let (outer, inner) = dst.split_at_mut(outer_len);
            // One pass: copy the payload chunk and sum it for the
            // checksums (the sum costs next to nothing beside the loads
            // and stores, so the partial variant uses the same kernel).
            let payload_sum =
                checksum::copy_and_sum_block(&mut inner[hdr_len..], &payload[start..start + chunk]);
            let tcp_len = t.l4_len + chunk;
            let ip_sum = if t.ipv4 {
                let tot = (t.l3_len + tcp_len) as u16;
                let id = id0.wrapping_add(i as u16);
                let c = finish(add(ip_sum0, add(tot, id)));
                put16(inner, l3 + 2, tot);
                put16(inner, l3 + 4, id);
                put16(inner, l3 + 10, c);
                // A header with its checksum sums to 0xffff.
                0xffff
            } else {
                put16(inner, l3 + 4, tcp_len as u16);
                add(ip_sum0, tcp_len as u16)
            };
            let seq = seq0.wrapping_add(start as u32);
            put32(inner, l4 + 4, seq);
            let mut flags = flags0;
            if i > 0 {
                flags &= !tcp_flags::CWR;
            }
            if i + 1 < count {
                flags &= !(tcp_flags::FIN | tcp_flags::PSH);
            }
            inner[l4 + 13] = flags;
            let pseudo = add(pseudo0, tcp_len as u16);
            if partial {
                // Linux/virtio convention: the folded pseudo-header sum.
                put16(inner, l4 + 16, pseudo);
            } else {
                let w12 = u16::from_be_bytes([doff, flags]);
                let hdr_sum = add(tcp_base, add(add((seq >> 16) as u16, seq as u16), w12));
                put16(
                    inner,
                    l4 + 16,
                    finish(add(pseudo, add(hdr_sum, payload_sum))),
                );
            }
            if let Some(tpl) = encap.as_deref_mut() {
                tpl.set_next_id(oid0.wrapping_add(i as u16));
                // A complete TCP segment sums to !pseudo; so, by LCO, does
                // one whose partial checksum will be completed. l3 and l4
                // are even (L2 14/18/22, L3 a multiple of 4): no byte swap.
                let s = if tpl.udp_checksum() {
                    add(add(l2_sum, ip_sum), finish(pseudo))
                } else {
                    0
                };
                tpl.patch_header(outer, inner.len(), port, hash, s)?;
            }
            i += 1;
        }
        Ok(())
    }
}

/// Offset of the outer IPv4 header in a Geneve segment.
const OUTER_IP_OFF: usize = crate::net::ETHERNET_HEADER_LEN;

/// What the segments between the first and the last share: all their
/// headers but the per-segment fields, and sums to finish those.
struct Middle {
    /// Outer and inner headers of a middle segment (full MSS lengths,
    /// CWR, PSH and FIN clear, outer UDP checksum complete: it is the same
    /// in every middle segment), with IPv4 IDs 0.
    hdr: [u8; HEADERS_MAX],
    /// Outer IPv4: the header sum without ID and checksum (both zero in
    /// `hdr`, merged into its block per segment).
    outer_ip: Option<u16>,
    /// Inner IPv4: the header sum without ID and checksum, and the 8 bytes
    /// from its ID to its checksum as a big-endian word with both zero.
    inner_ip: Option<(u16, u64)>,
    /// Pseudo-header and TCP header sum without the sequence number.
    tcp_sum: u64,
    /// Outer + inner header bytes, and of them the block copied from
    /// `hdr` (64 or 128).
    hl: usize,
    block: usize,
    /// Payload bytes per segment (the MSS).
    mss: usize,
    /// Offsets in a segment of the inner IPv4 ID, the TCP sequence number
    /// and the TCP checksum.
    inner_id_at: usize,
    seq_at: usize,
    csum_at: usize,
    /// The first segment's TCP sequence number, inner and outer IPv4 IDs.
    seq0: u32,
    id0: u16,
    oid0: u16,
    /// The TCP checksum is left partial (it holds the pseudo-header sum,
    /// in `hdr`).
    partial: bool,
}

impl Middle {
    /// Writes segments `first..first + out.len()` of the frame whose TCP
    /// payload is `payload` into `out` (segment `first + k` into `out[k]`,
    /// each at least `hl + mss` bytes: checked by the caller), all
    /// full-MSS segments with a middle segment's headers (the first one
    /// too if the frame has no CWR). In a loop of its own, everything per frame decided
    /// before it: interleaved with the general path's code, the loop kept
    /// fewer values in registers (measured 6–8 % slower).
    ///
    /// Per segment: the header block, the IPv4 IDs with their header
    /// checksums and the sequence number, stored *before* the payload
    /// (stores to the header line while it is being fetched anyway; after
    /// the copy they measured 3–8 % slower), then the payload copied and
    /// summed, then the TCP checksum.
    #[inline(always)]
    fn write<B: AsMut<[u8]>>(&self, first: usize, out: &mut [B], payload: &[u8]) {
        debug_assert!(self.outer_ip.is_none() || self.block == HEADERS_MAX);
        let (hl, mss) = (self.hl, self.mss);
        for (k, b) in out.iter_mut().enumerate() {
            let i = first + k;
            let start = i * mss;
            let dst = &mut b.as_mut()[..hl + mss];
            // Constant lengths: a copy of `self.block` bytes is a call. An
            // outer header makes the block 128 bytes (50 + at least 54
            // bytes of headers).
            if self.block == HEADERS_MAX / 2 {
                dst[..HEADERS_MAX / 2].copy_from_slice(&self.hdr[..HEADERS_MAX / 2]);
            } else if let Some(sum) = self.outer_ip {
                // The outer IPv4 ID (bytes 18..20) and header checksum
                // (24..26), zero in the template, merged into its words
                // in registers: one store of the block, none after it.
                let id = self.oid0.wrapping_add(i as u16);
                let c = id_checksum(sum, id);
                let mut w: [u64; HEADERS_MAX / 8] = core::array::from_fn(|k| {
                    u64::from_ne_bytes(self.hdr[8 * k..8 * k + 8].try_into().expect("8 bytes"))
                });
                w[2] |= u64::from_ne_bytes([0, 0, (id >> 8) as u8, id as u8, 0, 0, 0, 0]);
                w[3] |= u64::from_ne_bytes([(c >> 8) as u8, c as u8, 0, 0, 0, 0, 0, 0]);
                for (d, w) in dst[..HEADERS_MAX].chunks_exact_mut(8).zip(w) {
                    d.copy_from_slice(&w.to_ne_bytes());
                }
            } else {
                dst[..HEADERS_MAX].copy_from_slice(&self.hdr);
            }
            if let Some((sum, word)) = self.inner_ip {
                let id = self.id0.wrapping_add(i as u16);
                put_id_sum(dst, self.inner_id_at, word, id, sum);
            }
            let seq = self.seq0.wrapping_add(start as u32);
            put32(dst, self.seq_at, seq);
            let payload_sum =
                checksum::copy_and_sum_block(&mut dst[hl..], &payload[start..start + mss]);
            if !self.partial {
                let s = self.tcp_sum
                    + u64::from(seq >> 16)
                    + u64::from(seq & 0xffff)
                    + u64::from(payload_sum);
                put16(dst, self.csum_at, finish(checksum::fold(s)));
            }
        }
    }
}

/// The IPv4 header checksum for ID `id`, given the header sum `sum`
/// without ID and checksum.
#[inline(always)]
fn id_checksum(sum: u16, id: u16) -> u16 {
    finish(checksum::fold(u64::from(sum) + u64::from(id)))
}

/// The bytes of an IPv4 header from its ID to its checksum, as a
/// big-endian word, without the ID and the checksum.
const ID_SUM_MASK: u64 = 0x0000_ffff_ffff_0000;

/// Writes 8 bytes at `at`: `word` with the IPv4 `id` in its first two
/// bytes and the header checksum (header sum `sum` + `id`) in its last
/// two.
#[inline(always)]
fn put_id_sum(dst: &mut [u8], at: usize, word: u64, id: u16, sum: u16) {
    let c = id_checksum(sum, id);
    let w = word | u64::from(id) << 48 | u64::from(c);
    dst[at..at + 8].copy_from_slice(&w.to_be_bytes());
}

/// Builds the [`Middle`] of a frame of at least three segments whose
/// headers fit a [`HEADERS_MAX`] block (`headers`): the headers a middle
/// segment gets from the general path, with IDs 0. `None` if no segment
/// is between the first and the last, or a middle segment is shorter
/// than the header block copied into it.
#[allow(clippy::too_many_arguments)]
fn middle_template(
    headers: &[u8; HEADERS_MAX],
    frame: &[u8],
    t: &TcpFrame,
    mss: usize,
    count: usize,
    partial: bool,
    outer_len: usize,
    ip_sum0: u16,
    tcp_base: u16,
    pseudo0: u16,
    l2_sum: u16,
    encap: Option<&mut TunnelTemplate>,
    hash: u32,
) -> Option<Middle> {
    let hl = outer_len + t.hdr_len();
    let block = if hl <= HEADERS_MAX / 2 {
        HEADERS_MAX / 2
    } else {
        HEADERS_MAX
    };
    if count < 3 || hl + mss < block {
        return None;
    }
    #[cfg(test)]
    if tests::NO_MIDDLE.with(|c| c.get()) {
        return None;
    }
    let (l3, l4) = (t.l2_len, t.l4_off());
    let mut hdr = *headers;
    let (outer, inner) = hdr.split_at_mut(outer_len);
    let tcp_len = t.l4_len + mss;
    let (inner_ip, ip_sum) = if t.ipv4 {
        let tot = (t.l3_len + tcp_len) as u16;
        // Read from `headers`, not from the bytes just patched (a wide load
        // of narrow stores waits for them: no store forwarding).
        let at = outer_len + l3 + 4;
        let word = u64::from_be_bytes(headers[at..at + 8].try_into().ok()?) & ID_SUM_MASK;
        put16(inner, l3 + 2, tot);
        put16(inner, l3 + 4, 0);
        put16(inner, l3 + 10, 0);
        (Some((add(ip_sum0, tot), word)), 0xffff)
    } else {
        put16(inner, l3 + 4, tcp_len as u16);
        (None, add(ip_sum0, tcp_len as u16))
    };
    let flags = frame[l4 + 13] & !(tcp_flags::CWR | tcp_flags::FIN | tcp_flags::PSH);
    inner[l4 + 13] = flags;
    let pseudo = add(pseudo0, tcp_len as u16);
    let w12 = u16::from_be_bytes([frame[l4 + 12], flags]);
    let tcp_sum = u64::from(pseudo) + u64::from(tcp_base) + u64::from(w12);
    if partial {
        put16(inner, l4 + 16, pseudo);
    }
    let mut outer_ip = None;
    let mut oid0 = 0;
    if let Some(tpl) = encap {
        let s = if tpl.udp_checksum() {
            add(add(l2_sum, ip_sum), finish(pseudo))
        } else {
            0
        };
        let next = tpl.next_id();
        oid0 = next;
        tpl.set_next_id(0);
        let r = tpl.patch_header(outer, t.hdr_len() + mss, tpl.port_for_hash(hash), hash, s);
        tpl.set_next_id(next);
        r.ok()?;
        if tpl.is_ipv4() {
            // The checksum for ID 0 is the complement of the header sum.
            let sum = !be16(outer, OUTER_IP_OFF + 10);
            put16(outer, OUTER_IP_OFF + 10, 0);
            outer_ip = Some(sum);
        }
    }
    Some(Middle {
        hdr,
        outer_ip,
        inner_ip,
        tcp_sum,
        hl,
        block,
        mss,
        inner_id_at: outer_len + l3 + 4,
        seq_at: outer_len + l4 + 4,
        csum_at: outer_len + l4 + 16,
        seq0: be32(frame, l4 + 4),
        id0: if t.ipv4 { be16(frame, l3 + 4) } else { 0 },
        oid0,
        partial,
    })
}

/// Local checksum offload (LCO): the partial sum that `frame` will have
/// once its partial checksum at `csum_start`/`csum_offset` is completed,
/// computed without reading past `csum_start` + the field: the completed
/// range `[csum_start..]` sums to the complement of the value pre-loaded in
/// the field.
fn lco_sum(frame: &[u8], csum_start: usize, csum_offset: usize) -> u16 {
    let field = csum_start + csum_offset;
    let preloaded = u16::from_be_bytes([frame[field], frame[field + 1]]);
    let mut tail = finish(preloaded);
    if (field - csum_start) % 2 == 1 {
        tail = tail.swap_bytes();
    }
    if csum_start % 2 == 1 {
        tail = tail.swap_bytes();
    }
    add(checksum::sum(&frame[..csum_start]), tail)
}

/// An Ethernet + IPv4 + TCP frame with `payload_len` bytes of patterned
/// payload, ACK|PSH, valid IPv4 checksum and a pseudo-header sum in the TCP
/// checksum field (as a Linux guest sends with NEEDS_CSUM). For examples
/// and tests.
pub fn example_tcp_frame(payload_len: usize) -> Vec<u8> {
    let mut f = vec![0u8; 54 + payload_len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    put16(&mut f, 12, crate::net::ETHERTYPE_IPV4);
    f[14] = 0x45;
    put16(&mut f, 16, (40 + payload_len).min(65535) as u16);
    put16(&mut f, 18, 0x1000);
    put16(&mut f, 20, 0x4000);
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[192, 168, 1, 1]);
    f[30..34].copy_from_slice(&[192, 168, 1, 2]);
    let c = checksum::checksum(&f[14..34]);
    put16(&mut f, 24, c);
    put16(&mut f, 34, 40000);
    put16(&mut f, 36, 5201);
    put32(&mut f, 38, 0x1000_0000);
    put32(&mut f, 42, 0x2000_0000);
    f[46] = 0x50;
    f[47] = tcp_flags::ACK | tcp_flags::PSH;
    put16(&mut f, 48, 0xffff);
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let ph = checksum::pseudo_header_v4(
        [192, 168, 1, 1],
        [192, 168, 1, 2],
        6,
        (20 + payload_len) as u16,
    );
    put16(&mut f, 50, ph);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// virtio 1.2 §5.1.6 byte layout: a Linux tap's header for a 64 KB
    /// TCPv4 TSO frame with a partial checksum (NEEDS_CSUM, gso_type
    /// TCPV4 | ECN, hdr_len 66, gso_size 1448, csum_start 34, csum_offset 16).
    const TAP_TSO_HDR: [u8; 10] = [0x01, 0x81, 66, 0, 0xa8, 0x05, 34, 0, 16, 0];

    #[test]
    fn virtio_net_hdr_parse_and_emit() {
        let m = GsoMeta::parse_virtio_net_hdr(&TAP_TSO_HDR).unwrap();
        assert_eq!(
            m,
            GsoMeta {
                gso_type: GsoType::TcpV4,
                ecn: true,
                gso_size: 1448,
                hdr_len: 66,
                needs_csum: true,
                data_valid: false,
                csum_start: 34,
                csum_offset: 16,
            }
        );
        assert_eq!(m.to_virtio_net_hdr(), TAP_TSO_HDR);
        // A 12-byte header (num_buffers after) parses the same.
        let mut mrg = [0xa5u8; 12];
        mrg[..10].copy_from_slice(&TAP_TSO_HDR);
        assert_eq!(GsoMeta::parse_virtio_net_hdr(&mrg), Ok(m));
        assert_eq!(
            GsoMeta::parse_virtio_net_hdr(&TAP_TSO_HDR[..9]),
            Err(Error::Truncated)
        );
        let mut udp = TAP_TSO_HDR;
        udp[1] = GsoMeta::VIRTIO_NET_HDR_GSO_UDP_L4;
        assert_eq!(
            GsoMeta::parse_virtio_net_hdr(&udp),
            Err(Error::UnsupportedGsoType)
        );
        assert_eq!(GsoMeta::NONE.to_virtio_net_hdr(), [0; 10]);
    }

    std::thread_local! {
        /// Turns the middle-segment fast path off on this thread.
        pub(super) static NO_MIDDLE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    /// A TCP frame built by etherparse: IPv4 or IPv6, optional VLAN tag
    /// and timestamp option, `flags` (PSH 0x08, FIN 0x01, CWR 0x80).
    fn frame(ipv6: bool, vlan: bool, ts: bool, flags: u8, id: u16, seq: u32, n: usize) -> Vec<u8> {
        use etherparse::PacketBuilder;
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let b = if ipv6 {
            b.ipv6([0xfd; 16], [0xfe; 16], 64)
        } else {
            let mut ip = etherparse::Ipv4Header::new(
                0,
                64,
                etherparse::IpNumber::TCP,
                [10, 1, 0, 1],
                [10, 1, 0, 2],
            )
            .unwrap();
            ip.identification = id;
            ip.dont_fragment = true;
            b.ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
        };
        let mut b = b.tcp(40000, 5201, seq, 1000).ack(77);
        if flags & 0x08 != 0 {
            b = b.psh();
        }
        if flags & 0x01 != 0 {
            b = b.fin();
        }
        if flags & 0x80 != 0 {
            b = b.cwr();
        }
        if ts {
            b = b
                .options(&[
                    etherparse::TcpOptionElement::Noop,
                    etherparse::TcpOptionElement::Noop,
                    etherparse::TcpOptionElement::Timestamp(123, 456),
                ])
                .unwrap();
        }
        let payload: Vec<u8> = (0..n)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut out = Vec::with_capacity(b.size(n));
        b.write(&mut out, &payload).unwrap();
        if vlan {
            out.splice(12..12, [0x81, 0x00, 0x00, 100]);
        }
        out
    }

    /// The middle-segment fast path writes exactly what the general path
    /// writes, byte for byte (and leaves the same outer IPv4 ID counter),
    /// over IPv4/IPv6 inner and outer headers, VLAN tags, TCP and Geneve
    /// options, UDP checksums on and off, full and partial checksums,
    /// MSS and lengths around the header block sizes, IDs and sequence
    /// numbers about to wrap.
    #[test]
    fn middle_fast_path_equals_general_path() {
        use crate::encap::TunnelConfig;
        use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut fast_count = 0;
        for case in 0..1500 {
            let r = next();
            let (ipv6, vlan, ts) = (r & 1 != 0, r & 2 != 0, r & 4 != 0);
            let flags = [0u8, 0x08, 0x01, 0x09, 0x80, 0x88][(r >> 3) as usize % 6];
            let mss =
                [1, 7, 10, 13, 24, 64, 73, 100, 536, 1448, 1460, 8000][(r >> 8) as usize % 12];
            let n = 1 + (next() as usize % (mss * 6).min(30_000));
            let id = [0xfffe, 0xffff, 0, 1234][(r >> 12) as usize % 4];
            let seq = [u32::MAX - 3000, 7][(r >> 14) as usize % 2];
            let f = frame(ipv6, vlan, ts, flags, id, seq, n);
            let meta = GsoMeta::from_virtio_net_hdr(
                1,
                if ipv6 {
                    GsoMeta::VIRTIO_NET_HDR_GSO_TCPV6
                } else {
                    GsoMeta::VIRTIO_NET_HDR_GSO_TCPV4
                },
                0,
                mss as u16,
                (14 + if vlan { 4 } else { 0 } + if ipv6 { 40 } else { 20 }) as u16,
                16,
            )
            .unwrap();
            let tpl = match (r >> 16) % 4 {
                0 => None,
                k => {
                    let (l, rm) = if k == 3 {
                        (
                            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
                            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
                        )
                    } else {
                        (
                            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
                            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
                        )
                    };
                    let mut c =
                        TunnelConfig::new([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb], l, rm, 77);
                    c.udp_checksum = k != 1 || (r >> 18) & 1 != 0;
                    if (r >> 19) & 1 != 0 {
                        c.options.push(0x0102, 0x80, &[1, 2, 3, 4]).unwrap();
                    }
                    let mut t = TunnelTemplate::new(&c).unwrap();
                    t.set_next_id([0xfffd, 0, 999][(r >> 20) as usize % 3]);
                    Some(t)
                }
            };
            let how = if (r >> 22) & 1 != 0 {
                InnerChecksum::Partial
            } else {
                InnerChecksum::Full
            };
            let outer = tpl.as_ref().map_or(0, TunnelTemplate::header_len);
            let Ok(plan) = SegmentPlan::new(&f, &meta, outer) else {
                continue;
            };
            let mut outs = [vec![], vec![]];
            let mut ids = [0, 0];
            for (k, o) in outs.iter_mut().enumerate() {
                NO_MIDDLE.with(|c| c.set(k == 1));
                let mut t = tpl.clone();
                let mut bufs = vec![vec![0xa5u8; plan.max_segment_len() + 3]; plan.count()];
                let res = segment_with(&f, &meta, t.as_mut(), &mut bufs, how);
                NO_MIDDLE.with(|c| c.set(false));
                res.unwrap();
                *o = bufs;
                ids[k] = t.as_ref().map_or(0, TunnelTemplate::next_id);
            }
            assert_eq!(outs[0], outs[1], "case {case}");
            assert_eq!(ids[0], ids[1], "case {case}");
            fast_count += usize::from(plan.count() >= 3);
        }
        assert!(fast_count > 300, "{fast_count}");
    }

    fn tso_meta(mss: u16) -> GsoMeta {
        GsoMeta::from_virtio_net_hdr(1, GsoMeta::VIRTIO_NET_HDR_GSO_TCPV4, 54, mss, 34, 16).unwrap()
    }

    #[test]
    fn segments_fields() {
        let mut f = example_tcp_frame(3000);
        f[47] |= tcp_flags::CWR | tcp_flags::FIN;
        let meta = tso_meta(1000);
        let mut bufs = vec![vec![0xa5u8; 1100]; 3];
        let plan = segment(&f, &meta, None, &mut bufs).unwrap();
        assert_eq!(plan.count(), 3);
        for (i, b) in bufs.iter().enumerate() {
            let s = &b[..plan.segment_len(i)];
            assert_eq!(s.len(), 1054);
            assert_eq!(be16(s, 16), 1040);
            assert_eq!(be16(s, 18), 0x1000 + i as u16);
            assert_eq!(checksum::sum(&s[14..34]), 0xffff);
            assert_eq!(be32(s, 38), 0x1000_0000 + 1000 * i as u32);
            let fl = s[47];
            assert_eq!(fl & tcp_flags::CWR != 0, i == 0);
            assert_eq!(fl & (tcp_flags::FIN | tcp_flags::PSH) != 0, i == 2);
            assert_eq!(fl & tcp_flags::ACK, tcp_flags::ACK);
            let ph = checksum::pseudo_header_v4([192, 168, 1, 1], [192, 168, 1, 2], 6, 1020);
            assert_eq!(add(ph, checksum::sum(&s[34..])), 0xffff);
            assert_eq!(&s[54..], &f[54 + 1000 * i..54 + 1000 * (i + 1)]);
        }
    }

    #[test]
    fn rejects_bad_meta_and_small_buffers() {
        let f = example_tcp_frame(3000);
        let mut bufs = vec![vec![0u8; 1100]; 2];
        assert_eq!(
            segment(&f, &tso_meta(1000), None, &mut bufs).unwrap_err(),
            Error::BufferTooSmall
        );
        let mut bufs = vec![vec![0u8; 1000]; 3];
        assert_eq!(
            segment(&f, &tso_meta(1000), None, &mut bufs).unwrap_err(),
            Error::BufferTooSmall
        );
        let mut m = tso_meta(1000);
        m.csum_start = 30;
        assert_eq!(
            SegmentPlan::new(&f, &m, 0).unwrap_err(),
            Error::BadChecksumOffset
        );
        m = tso_meta(1000);
        m.gso_type = GsoType::TcpV6;
        assert_eq!(SegmentPlan::new(&f, &m, 0).unwrap_err(), Error::NotTcp);
        assert_eq!(
            GsoMeta::from_virtio_net_hdr(0, 5, 0, 100, 0, 0).unwrap_err(),
            Error::UnsupportedGsoType
        );
        assert_eq!(
            GsoMeta::from_virtio_net_hdr(0, 1, 0, 0, 0, 0).unwrap_err(),
            Error::BadGsoSize
        );
        assert_eq!(
            SegmentPlan::new(&f[..30], &tso_meta(1000), 0).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            SegmentPlan::new(&f[..100], &tso_meta(1000), 0).unwrap_err(),
            Error::BadLength
        );
    }

    #[test]
    fn gso_none_completes_checksum() {
        let f = example_tcp_frame(100);
        let meta = GsoMeta {
            gso_type: GsoType::None,
            needs_csum: true,
            csum_start: 34,
            csum_offset: 16,
            ..GsoMeta::NONE
        };
        let mut bufs = [[0u8; 200]];
        let plan = segment(&f, &meta, None, &mut bufs).unwrap();
        assert_eq!(plan.count(), 1);
        let s = &bufs[0][..plan.segment_len(0)];
        let ph = checksum::pseudo_header_v4([192, 168, 1, 1], [192, 168, 1, 2], 6, 120);
        assert_eq!(add(ph, checksum::sum(&s[34..])), 0xffff);
        let mut g = f.clone();
        complete_checksum(&mut g, &meta).unwrap();
        assert_eq!(&g[..], s);
    }

    #[test]
    fn errors_leave_buffers_untouched() {
        let f = example_tcp_frame(100);
        let meta = GsoMeta {
            needs_csum: true,
            csum_start: 150,
            csum_offset: 16,
            ..GsoMeta::NONE
        };
        let mut bufs = [[0xa5u8; 300]];
        assert_eq!(
            segment(&f, &meta, None, &mut bufs).unwrap_err(),
            Error::BadChecksumOffset
        );
        assert!(bufs[0].iter().all(|&b| b == 0xa5));

        // A 65480-byte MSS segment does not fit an outer UDP length.
        let big = example_tcp_frame(65480);
        let mut c = crate::encap::TunnelConfig::new(
            [0; 6],
            [0; 6],
            core::net::IpAddr::V4(core::net::Ipv4Addr::LOCALHOST),
            core::net::IpAddr::V4(core::net::Ipv4Addr::LOCALHOST),
            1,
        );
        c.udp_checksum = false;
        let mut tpl = TunnelTemplate::new(&c).unwrap();
        let m = tso_meta(65480);
        let mut bufs = vec![vec![0xa5u8; 70_000]; 1];
        assert_eq!(
            segment(&big, &m, Some(&mut tpl), &mut bufs).unwrap_err(),
            Error::TooLong
        );
        assert!(bufs[0].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn virtio_roundtrip_of_meta_bytes() {
        let m = GsoMeta::from_virtio_net_hdr(3, 0x84, 74, 1440, 54, 16).unwrap();
        assert_eq!(m.gso_type, GsoType::TcpV6);
        assert!(m.ecn && m.needs_csum && m.data_valid);
        assert_eq!((m.virtio_flags(), m.virtio_gso_type()), (3, 0x84));
    }
}
