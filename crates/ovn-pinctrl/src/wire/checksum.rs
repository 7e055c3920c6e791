//! Checksums: the Internet checksum (RFC 1071) with its pseudo-headers
//! (RFC 768, RFC 8200 §8.1), its incremental update (RFC 1624, as Open
//! vSwitch's `recalc_csum16()` computes it), and SCTP's CRC32c
//! (RFC 9260 Appendix A).

/// Adds `data` to a running one's complement sum, as big-endian 16-bit
/// words (an odd last byte is padded with zero, RFC 1071 §4.1).
pub fn add(mut sum: u32, data: &[u8]) -> u32 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum = fold_once(sum + u32::from(u16::from_be_bytes([w[0], w[1]])));
    }
    if let [last] = words.remainder() {
        sum = fold_once(sum + (u32::from(*last) << 8));
    }
    sum
}

/// Folds a sum once, keeping it well below `u32::MAX` while accumulating.
fn fold_once(sum: u32) -> u32 {
    (sum & 0xffff) + (sum >> 16)
}

/// The checksum field for a running sum: folded and complemented.
pub fn finish(sum: u32) -> u16 {
    !(finish_sum(sum) as u16)
}

/// The Internet checksum of `data`.
pub fn of(data: &[u8]) -> u16 {
    finish(add(0, data))
}

/// The IPv4 pseudo-header's sum (RFC 768): addresses, protocol, length.
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u32 {
    let sum = add(add(0, &src), &dst);
    add(sum, &[0, proto, (len >> 8) as u8, len as u8])
}

/// The IPv6 pseudo-header's sum (RFC 8200 §8.1).
pub fn pseudo_v6(src: [u8; 16], dst: [u8; 16], proto: u8, len: u32) -> u32 {
    let sum = add(add(0, &src), &dst);
    add(add(sum, &len.to_be_bytes()), &[0, 0, 0, proto])
}

/// RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, the sum folded until it fits.
///
/// Open vSwitch's `recalc_csum16()` folds once and truncates: when the sum is
/// 0x1ffff its carry is lost and the checksum comes out one too high (invalid).
/// This one folds fully, so it never differs from a recomputation.
pub fn update16(csum: u16, old: u16, new: u16) -> u16 {
    !(finish_sum(u32::from(!csum) + u32::from(!old) + u32::from(new)) as u16)
}

fn finish_sum(mut sum: u32) -> u32 {
    while sum > 0xffff {
        sum = fold_once(sum);
    }
    sum
}

/// [`update16`] for each 16-bit word of a field that changed from `old` to
/// `new` (both of even length, at an even offset), in order, as OVS's
/// `recalc_csum32/48/128()`.
pub fn update(mut csum: u16, old: &[u8], new: &[u8]) -> u16 {
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        csum = update16(
            csum,
            u16::from_be_bytes([o[0], o[1]]),
            u16::from_be_bytes([n[0], n[1]]),
        );
    }
    csum
}

/// CRC32c (Castagnoli, reflected polynomial 0x82f63b78) of `data`, as SCTP
/// puts it in its common header: the returned value's little-endian bytes
/// are the wire bytes (RFC 9260 Appendix A).
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0x82f6_3b78 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_sums_to_ddf2() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(finish(add(0, &data)), !0xddf2);
    }

    #[test]
    fn incremental_update_matches_recomputation() {
        let mut hdr =
            *b"\x45\x00\x00\x54\x00\x00\x40\x00\x40\x01\x00\x00\x0a\x00\x00\x01\x0a\x00\x00\x02";
        let c = of(&hdr);
        hdr[8] = 0x3f;
        let updated = update16(c, 0x4001, 0x3f01);
        assert_eq!(updated, of(&hdr));
    }

    #[test]
    fn crc32c_of_rfc3720_vectors() {
        // RFC 3720 B.4: 32 bytes of zeros, of ones, incrementing.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let inc: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&inc), 0x46dd_794e);
    }
}
