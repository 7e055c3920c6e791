//! The Internet checksum (RFC 1071) and the IPv6 pseudo-header of
//! RFC 8200 §8.1, as used by IGMP (RFC 2236 §2.3, RFC 3376 §4.1.2) and
//! MLD (RFC 2710 §3.3 through ICMPv6, RFC 4443 §2.3).
//!
//! A *sum* here is the 16-bit ones'-complement sum, folded and not
//! complemented; the checksum field holds its complement. A message
//! verifies when the sum over it (checksum field included) is `0xffff`.

use core::net::Ipv6Addr;

/// IPv6 next-header value of ICMPv6 (RFC 4443).
const NEXT_HEADER_ICMPV6: u8 = 58;

/// Adds the big-endian 16-bit words of `data` into `acc` (an odd trailing
/// byte is padded with zero, RFC 1071 §1). Cannot overflow for any slice
/// shorter than 2^48 bytes.
fn add_words(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in words.by_ref() {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(u16::from_be_bytes([*last, 0]));
    }
    acc
}

/// Folds a wide accumulator into 16 bits with end-around carries.
fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The folded sum of `data`.
pub(crate) fn sum(data: &[u8]) -> u16 {
    fold(add_words(0, data))
}

/// The folded sum of the ICMPv6 pseudo-header (source, destination,
/// upper-layer length, next header 58; RFC 8200 §8.1) and `icmp`.
pub(crate) fn icmpv6_sum(src: &Ipv6Addr, dst: &Ipv6Addr, icmp: &[u8]) -> u16 {
    let mut acc = add_words(0, &src.octets());
    acc = add_words(acc, &dst.octets());
    // The 32-bit length: slices here are far shorter than 2^32 bytes.
    acc += icmp.len() as u64;
    acc += u64::from(NEXT_HEADER_ICMPV6);
    fold(add_words(acc, icmp))
}

/// The checksum field value for data whose field was zero when summed.
pub(crate) fn finish(sum: u16) -> u16 {
    !sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the sum of 00 01 f2 03 f4 f5 f6 f7 is ddf2.
        assert_eq!(
            sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn carries_wrap_around() {
        assert_eq!(sum(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
        assert_eq!(sum(&[]), 0);
    }
}
