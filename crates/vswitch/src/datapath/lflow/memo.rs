//! Frames of one flow in a row carry the same headers but for the fields that change
//! per packet and that no decision reads: an IPv4 identification and checksums (the
//! tracker trusts a guest's checksums, and no logical flow matches on them). A frame
//! whose headers equal the frame before's in every other byte has that frame's cache
//! key and IP packet, so [`super::decide::heads`] copies them instead of parsing it
//! again (VPP and Open vSwitch parse every packet; a run of one flow's frames is what
//! a poll mode burst mostly holds).
//!
//! Only IPv4 TCP and UDP frames, not fragments, whose headers (Ethernet, one VLAN
//! tag at most, IP with options, TCP with options) fit [`MEMO_BYTES`], are memoized:
//! the bytes compared are all the bytes those parses read.

/// The longest headers memoized (Ethernet 14, a VLAN tag 4, IPv4 20, TCP 20 and
/// 22 bytes of options, e.g. timestamps with padding: 80).
pub const MEMO_BYTES: usize = 80;
const WORDS: usize = MEMO_BYTES / 8;

/// The headers of a frame whose head was parsed, and where its head is kept.
#[derive(Debug, Clone, Copy)]
pub struct HeadMemo {
    /// The burst index of the frame parsed.
    pub from: usize,
    len: u32,
    /// The end of its headers: the bytes compared.
    end: u32,
    /// The frame's first bytes, as words; only the bytes under `mask` count.
    words: [u64; WORDS],
    /// Per byte, 0xff where frames must agree: the headers but for the IPv4
    /// identification, the IPv4 checksum and the transport checksum.
    mask: [u64; WORDS],
}

impl HeadMemo {
    /// The memo of frame `from` (of `len` bytes, its first `n` bytes read into `hdr`,
    /// its IPv4 header at `l3`), or `None` when the frame is not one memoized.
    pub fn of<const N: usize>(
        hdr: &[u8; N],
        n: usize,
        l3: usize,
        from: usize,
        len: u32,
    ) -> Option<HeadMemo> {
        const { assert!(N >= MEMO_BYTES) };
        let read = &hdr[..n.min(N)];
        let vihl = *read.get(l3)?;
        let frag = u16::from_be_bytes([*read.get(l3 + 6)?, *read.get(l3 + 7)?]);
        if vihl >> 4 != 4 || frag & 0x3fff != 0 {
            return None;
        }
        let l4 = l3 + usize::from(vihl & 0x0f) * 4;
        let (end, csum) = transport_head(read, *read.get(l3 + 9)?, l4)?;
        if end > MEMO_BYTES.min(read.len()) || csum + 2 > end {
            return None;
        }
        // Built in words (every frame parsed makes one): the bytes before `end`,
        // but for the holes.
        let mut mask: [u64; WORDS] = core::array::from_fn(|k| match end.saturating_sub(k * 8) {
            0 => 0,
            b @ 1..=7 => (1u64 << (b * 8)) - 1,
            _ => !0,
        });
        for hole in [l3 + 4, l3 + 10, csum] {
            for b in hole..hole + 2 {
                mask[b / 8] &= !(0xffu64 << (b % 8 * 8));
            }
        }
        let head: &[u8; MEMO_BYTES] = hdr[..MEMO_BYTES].try_into().unwrap();
        Some(HeadMemo {
            from,
            len,
            end: end as u32,
            words: words(head),
            mask,
        })
    }

    /// Whether a frame of `len` bytes, whose first `n` bytes are read into `hdr`
    /// (what follows them is stale), has the memoized frame's head.
    #[inline]
    pub fn matches<const N: usize>(&self, hdr: &[u8; N], n: usize, len: u32) -> bool {
        const { assert!(N >= MEMO_BYTES) };
        // The bytes compared are the memoized frame's headers, read here too (the
        // mask leaves out the stale bytes after them). Read in place: a copy of
        // `n` bytes first was a call to `memcpy`.
        if len != self.len || n < self.end as usize {
            return false;
        }
        let head: &[u8; MEMO_BYTES] = hdr[..MEMO_BYTES].try_into().unwrap();
        let diff = words(head)
            .iter()
            .zip(self.words.iter().zip(&self.mask))
            .fold(0, |d, (w, (m, k))| d | (w ^ m) & k);
        diff == 0
    }
}

/// Where the TCP (`proto` 6) or UDP (17) header at `l4` of frame `b` ends, and where
/// its checksum is; `None` for another protocol, or a TCP header whose data offset was
/// not read.
pub fn transport_head(b: &[u8], proto: u8, l4: usize) -> Option<(usize, usize)> {
    match proto {
        6 => Some((l4 + usize::from(*b.get(l4 + 12)? >> 4) * 4, l4 + 16)),
        17 => Some((l4 + 8, l4 + 6)),
        _ => None,
    }
}

#[inline]
fn words(b: &[u8; MEMO_BYTES]) -> [u64; WORDS] {
    // Little-endian: byte `j` of a word is its bits `8j..8j + 8`, as the masks say.
    core::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + UDP frame of 64 bytes.
    fn udp_frame() -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&50u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&5000u16.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f
    }

    /// Frame `b` read as [`super::super::decide::heads`] reads it: its first bytes,
    /// stale ones after them.
    fn read(b: &[u8], stale: u8) -> ([u8; 128], usize) {
        let mut hdr = [stale; 128];
        let n = b.len().min(128);
        hdr[..n].copy_from_slice(&b[..n]);
        (hdr, n)
    }

    /// Whether frame `b` matches `m`.
    fn matches(m: &HeadMemo, b: &[u8], len: u32) -> bool {
        let (hdr, n) = read(b, 0xaa);
        m.matches(&hdr, n, len)
    }

    /// The memo of frame `b`.
    fn memo(b: &[u8]) -> Option<HeadMemo> {
        let (hdr, n) = read(b, 0x55);
        HeadMemo::of(&hdr, n, 14, 0, b.len() as u32)
    }

    #[test]
    fn identification_checksums_and_payload_may_differ() {
        let a = udp_frame();
        let m = memo(&a).unwrap();
        let mut b = a.clone();
        b[18] = 0x12; // identification
        b[25] = 0x34; // IP checksum
        b[41] = 0x56; // UDP checksum
        b[50] = 0x78; // payload
        assert!(matches(&m, &b, 64));
        assert!(!matches(&m, &b, 65), "another length");
        assert!(!matches(&m, &b[..41], 64), "headers not all read");
    }

    #[test]
    fn every_other_header_byte_counts() {
        let a = udp_frame();
        let m = memo(&a).unwrap();
        let holes = [18, 19, 24, 25, 40, 41];
        for i in (0..42).filter(|i| !holes.contains(i)) {
            let mut b = a.clone();
            b[i] ^= 1;
            assert!(!matches(&m, &b, 64), "byte {i}");
        }
    }

    /// A TCP frame with 12 bytes of options: its headers end at 66, inside a word.
    #[test]
    fn headers_ending_inside_a_word_count_to_their_last_byte() {
        let mut a = udp_frame();
        a.resize(80, 0);
        a[23] = 6;
        a[46] = 8 << 4; // data offset: 32 bytes
        let m = memo(&a).unwrap();
        let mut b = a.clone();
        b[65] ^= 1; // the last option byte
        assert!(!matches(&m, &b, 80));
        let mut c = a.clone();
        c[66] ^= 1; // the first payload byte
        c[50] ^= 1; // the TCP checksum
        assert!(matches(&m, &c, 80));
    }

    #[test]
    fn fragments_and_other_protocols_are_not_memoized() {
        let mut a = udp_frame();
        a[20] = 0x20; // more fragments
        assert!(memo(&a).is_none());
        let mut b = udp_frame();
        b[23] = 1; // ICMP
        assert!(memo(&b).is_none());
    }
}
