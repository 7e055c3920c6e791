//! A rewrite made once for a run of one flow's frames: the frames of a run whose
//! headers are equal but for the IPv4 identification and the checksums
//! ([`super::memo`]) are rewritten alike, so the rewrite of the first ([`super::rewrite`],
//! field by field, each checksum moved per field) gives the others' headers whole:
//! its rewritten headers, with each frame's own identification, and each checksum
//! moved by the amount the first frame's moved (RFC 1624: an incremental update adds
//! the same one's complement sum to any checksum the same bytes changed under).

use ovn_lflow::Field;

use super::memo::{transport_head, MEMO_BYTES};
use super::parse::Offsets;

/// The first frame's rewrite, for the frames alike to it.
#[derive(Debug, Clone)]
pub struct Patch {
    /// The burst index of the frame rewritten first ([`NONE`]: no patch).
    from: u32,
    /// The changes made, and whether the transport checksum was partial.
    changes: Vec<(Field, u128)>,
    partial: bool,
    /// The rewritten headers (`end` bytes).
    hdr: [u8; MEMO_BYTES],
    end: u8,
    /// The IPv4 header's offset.
    l3: u8,
    /// The IPv4 header checksum's move.
    ip: Move,
    /// The TCP or UDP checksum's offset and move (`None`: a UDP datagram without one).
    l4: Option<(u8, Move)>,
}

const NONE: u32 = u32::MAX;

/// How a checksum moves: the one's complement sum `delta` added, to the checksum
/// complemented (`sum`: false) or to a partial one, which holds the sum itself.
#[derive(Debug, Clone, Copy, Default)]
struct Move {
    delta: u16,
    sum: bool,
}

impl Default for Patch {
    fn default() -> Patch {
        Patch {
            from: NONE,
            changes: Vec::new(),
            partial: false,
            hdr: [0; MEMO_BYTES],
            end: 0,
            l3: 0,
            ip: Move::default(),
            l4: None,
        }
    }
}

impl Patch {
    /// Forgets the patch (a new burst numbers its frames anew).
    pub fn clear(&mut self) {
        self.from = NONE;
    }

    /// Whether the patch is frame `from`'s rewrite by `changes` (`partial`: its
    /// transport checksum is partial).
    pub fn is_for(&self, from: usize, changes: &[(Field, u128)], partial: bool) -> bool {
        self.takes(from, partial) && self.changes == changes
    }

    /// Whether the patch is frame `from`'s (`partial`: a frame whose transport
    /// checksum is partial), by whatever changes it was made for.
    pub fn takes(&self, from: usize, partial: bool) -> bool {
        self.from == from as u32 && self.partial == partial
    }

    /// Keeps the rewrite of frame `from`, `before` and `after` its rewrite by `changes`
    /// (headers at `off`); false (and no patch) when the frame is not one a patch
    /// takes: IPv4 TCP or UDP whose headers fit [`MEMO_BYTES`].
    pub fn make(
        &mut self,
        from: usize,
        (before, after): (&[u8], &[u8]),
        off: &Offsets,
        (changes, partial): (&[(Field, u128)], bool),
    ) -> bool {
        self.from = NONE;
        let (Some(l3), Some(l4), 0x0800) = (off.l3, off.l4, off.eth_type) else {
            return false;
        };
        let Some((end, csum)) = transport_head(after, off.proto, l4) else {
            return false;
        };
        if end > MEMO_BYTES || end > before.len().min(after.len()) || csum + 2 > end {
            return false;
        }
        self.hdr[..end].copy_from_slice(&after[..end]);
        self.end = end as u8;
        self.l3 = l3 as u8;
        self.ip = Move::between(be16(before, l3 + 10), be16(after, l3 + 10), false);
        let (c0, c1) = (be16(before, csum), be16(after, csum));
        self.l4 = (off.proto == 6 || c0 != 0).then(|| (csum as u8, Move::between(c0, c1, partial)));
        self.changes.clear();
        self.changes.extend_from_slice(changes);
        self.partial = partial;
        self.from = from as u32;
        true
    }

    /// Rewrites frame `f`, alike to the patch's frame ([`Patch::is_for`]); false
    /// (nothing written) when it is not one the patch can take: shorter than the
    /// headers, or a UDP datagram with a checksum where the first had none, or
    /// without one where it had one.
    pub fn apply(&self, f: &mut [u8]) -> bool {
        let (end, l3) = (usize::from(self.end), usize::from(self.l3));
        if f.len() < end {
            return false;
        }
        let own_csum = self.l4.map(|(at, _)| be16(f, usize::from(at)));
        if own_csum == Some(0) && self.is_udp() {
            // A datagram without a checksum, where the first had one.
            return false;
        }
        if self.l4.is_none() && be16(f, self.l4_at_udp()) != 0 {
            return false;
        }
        let id = [f[l3 + 4], f[l3 + 5]];
        let ip = self.ip.apply(be16(f, l3 + 10));
        f[..end].copy_from_slice(&self.hdr[..end]);
        f[l3 + 4..l3 + 6].copy_from_slice(&id);
        f[l3 + 10..l3 + 12].copy_from_slice(&ip.to_be_bytes());
        if let (Some((at, m)), Some(c)) = (self.l4, own_csum) {
            let mut c = m.apply(c);
            if c == 0 && !m.sum && self.is_udp() {
                c = 0xffff; // RFC 768: a computed 0 is sent as all ones.
            }
            let at = usize::from(at);
            f[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        true
    }

    fn is_udp(&self) -> bool {
        self.hdr[usize::from(self.l3) + 9] == 17
    }

    /// Where a UDP header's checksum is (the patch's transport header is UDP's when
    /// it has no checksum).
    fn l4_at_udp(&self) -> usize {
        usize::from(self.end) - 2
    }
}

impl Move {
    /// The move that took checksum `before` to `after` (`sum`: a partial checksum).
    fn between(before: u16, after: u16, sum: bool) -> Move {
        // Complemented: ~after = ~before + delta, so delta = ~after - ~before =
        // ~after + before. Partial: after = before + delta.
        let delta = if sum {
            fold(u32::from(after) + u32::from(!before))
        } else {
            fold(u32::from(!after) + u32::from(before))
        };
        Move { delta, sum }
    }

    /// Checksum `c` moved.
    fn apply(self, c: u16) -> u16 {
        // A move of nothing (+0 or -0) leaves the checksum as it is, as the rewrite of
        // the first frame did.
        if self.delta == 0 || self.delta == 0xffff {
            return c;
        }
        if self.sum {
            fold(u32::from(c) + u32::from(self.delta))
        } else {
            !fold(u32::from(!c) + u32::from(self.delta))
        }
    }
}

fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[cfg(test)]
mod tests {
    use super::super::parse::{flow_of, offsets_of};
    use super::super::rewrite;
    use super::*;
    use proptest::prelude::*;

    /// An Ethernet + IPv4 + TCP (`tcp`) or UDP frame of 80 bytes, identification `id`,
    /// both checksums right, the UDP one `udp_csum` (else none).
    fn frame(tcp: bool, id: u16, payload: u8, udp_csum: bool) -> Vec<u8> {
        let mut f = vec![payload; 80];
        f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        f[15] = 0;
        f[16..18].copy_from_slice(&66u16.to_be_bytes());
        f[18..20].copy_from_slice(&id.to_be_bytes());
        f[20..22].copy_from_slice(&[0x40, 0]);
        f[22] = 64;
        f[23] = if tcp { 6 } else { 17 };
        f[24..26].copy_from_slice(&[0, 0]);
        f[26..30].copy_from_slice(&[10, 0, 0, 5]);
        f[30..34].copy_from_slice(&[172, 16, 0, 10]);
        f[34..36].copy_from_slice(&40000u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        let ip = csum(&f[14..34], 0);
        f[24..26].copy_from_slice(&ip.to_be_bytes());
        let (at, len) = if tcp { (50, 46) } else { (40, 46) };
        if tcp {
            f[38..46].fill(0x11);
            f[46] = 0x50;
            f[47] = 0x18;
            f[48..50].copy_from_slice(&[1, 0]);
            f[50..54].fill(0);
        } else {
            f[38..40].copy_from_slice(&46u16.to_be_bytes());
            f[40..42].fill(0);
        }
        if tcp || udp_csum {
            let c = csum(&f[34..], pseudo(&f, if tcp { 6 } else { 17 }, len));
            f[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        f
    }

    fn pseudo(f: &[u8], proto: u8, len: u16) -> u32 {
        f[26..34]
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum::<u32>()
            + u32::from(proto)
            + u32::from(len)
    }

    fn csum(b: &[u8], start: u32) -> u16 {
        let s = b
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum::<u32>()
            + start;
        !fold(s)
    }

    /// DNAT to a backend, and routing (MACs, TTL).
    fn changes(tcp: bool) -> Vec<(Field, u128)> {
        let (src, dst) = if tcp {
            (Field::TcpSrc, Field::TcpDst)
        } else {
            (Field::UdpSrc, Field::UdpDst)
        };
        vec![
            (Field::EthSrc, 0x0000_0000_ff02),
            (Field::EthDst, 0x5054_0000_0104),
            (Field::IpTtl, 63),
            (Field::Ipv4Dst, 0x0a01_0203),
            (Field::Ipv4Src, 0xc0a8_0001),
            (src, 1024),
            (dst, 8080),
        ]
    }

    /// The generic rewrite of frame `f`.
    fn rewritten(f: &[u8], ch: &[(Field, u128)], partial: bool) -> Vec<u8> {
        let mut g = f.to_vec();
        let (_, off) = flow_of(&g, 1);
        rewrite::apply(&mut g, &off, ch, partial).unwrap();
        g
    }

    /// A patch made from `first`'s rewrite gives `other` the bytes the generic
    /// rewrite gives it.
    fn same_as_generic(first: &[u8], other: &[u8], ch: &[(Field, u128)], partial: bool) {
        let after = rewritten(first, ch, partial);
        let mut p = Patch::default();
        assert!(p.make(3, (first, &after), &offsets_of(first), (ch, partial)));
        assert!(p.is_for(3, ch, partial));
        assert!(!p.is_for(4, ch, partial));
        assert!(!p.is_for(3, &ch[1..], partial));
        let mut got = other.to_vec();
        assert!(p.apply(&mut got));
        let want = rewritten(other, ch, partial);
        // +0 and -0 are one checksum: compare them as the receiver does.
        assert_eq!(csum(&got[14..34], 0), 0, "the IPv4 header verifies");
        let norm = |b: &[u8]| {
            let mut b = b.to_vec();
            // The IPv4 and TCP checksums (UDP's 0 means none, never -0).
            for at in [24, 50] {
                if b[at..at + 2] == [0, 0] {
                    b[at..at + 2].copy_from_slice(&[0xff, 0xff]);
                }
            }
            b
        };
        assert_eq!(norm(&got), norm(&want));
    }

    #[test]
    fn a_run_of_tcp_frames_is_rewritten_as_each_alone() {
        let ch = changes(true);
        same_as_generic(
            &frame(true, 1, 0, true),
            &frame(true, 2, 7, true),
            &ch,
            false,
        );
    }

    #[test]
    fn a_run_of_udp_frames_is_rewritten_as_each_alone() {
        let ch = changes(false);
        same_as_generic(
            &frame(false, 1, 0, true),
            &frame(false, 9, 3, true),
            &ch,
            false,
        );
        same_as_generic(
            &frame(false, 1, 0, false),
            &frame(false, 9, 3, false),
            &ch,
            false,
        );
    }

    #[test]
    fn partial_checksums_move_by_the_addresses_only() {
        let ch = changes(true);
        let mut a = frame(true, 1, 0, true);
        let mut b = frame(true, 2, 5, true);
        for f in [&mut a, &mut b] {
            // A partial checksum: the pseudo-header's sum, not complemented.
            let s = fold(pseudo(f, 6, 46));
            f[50..52].copy_from_slice(&s.to_be_bytes());
        }
        same_as_generic(&a, &b, &ch, true);
    }

    #[test]
    fn a_udp_checksum_present_in_one_and_absent_in_the_other_is_refused() {
        let ch = changes(false);
        let (with, without) = (frame(false, 1, 0, true), frame(false, 2, 0, false));
        let mut p = Patch::default();
        let after = rewritten(&with, &ch, false);
        assert!(p.make(0, (&with, &after), &offsets_of(&with), (&ch, false)));
        let mut f = without.clone();
        assert!(!p.apply(&mut f));
        assert_eq!(f, without, "nothing written");
        let after = rewritten(&without, &ch, false);
        assert!(p.make(0, (&without, &after), &offsets_of(&without), (&ch, false)));
        let mut f = with.clone();
        assert!(!p.apply(&mut f));
    }

    #[test]
    fn other_frames_make_no_patch() {
        let mut icmp = frame(false, 1, 0, false);
        icmp[23] = 1;
        let mut p = Patch::default();
        let ch = [(Field::IpTtl, 63)];
        let after = rewritten(&icmp, &ch, false);
        assert!(!p.make(0, (&icmp, &after), &offsets_of(&icmp), (&ch, false)));
        assert!(!p.is_for(0, &ch, false));
    }

    proptest! {
        /// Any identification, payload and addresses: the patch and the generic
        /// rewrite agree.
        #[test]
        fn patch_agrees_with_the_rewrite(
            tcp: bool, id0: u16, id1: u16, pay: u8, dst: u32, port: u16, ttl: u8,
        ) {
            let ch = vec![
                (Field::IpTtl, u128::from(ttl)),
                (Field::Ipv4Dst, u128::from(dst)),
                (if tcp { Field::TcpDst } else { Field::UdpDst }, u128::from(port)),
            ];
            same_as_generic(&frame(tcp, id0, 0, true), &frame(tcp, id1, pay, true), &ch, false);
        }
    }
}
