//! The Internet checksum (RFC 1071) and the TCP/UDP/ICMPv6 pseudo-headers
//! (RFC 9293 §3.1, RFC 768, RFC 8200 §8.1).

use core::net::IpAddr;

/// One's-complement sum of `data` (big-endian 16-bit words, an odd last
/// byte padded with zero) added to `acc`, not yet folded.
pub(crate) fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds a sum to 16 bits and complements it: 0 when a message with its
/// checksum field verifies.
pub(crate) fn finish(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The pseudo-header sum for an upper-layer message of `len` bytes.
pub(crate) fn pseudo(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> u64 {
    let mut acc = u64::from(proto) + len as u64;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            acc = sum(&s.octets(), acc);
            acc = sum(&d.octets(), acc);
        }
        (s, d) => {
            acc = sum(&v6(s), acc);
            acc = sum(&v6(d), acc);
        }
    }
    acc
}

fn v6(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let s = sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], 0);
        assert_eq!(finish(s), !0xddf2);
        assert_eq!(finish(sum(&[0xff], 0)), !0xff00);
    }
}
