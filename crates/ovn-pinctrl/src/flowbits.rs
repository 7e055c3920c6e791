//! Conversions between a [`Flow`](ovn_lflow::Flow)'s `u128` values and
//! wire bytes: MACs in the low 48 bits, IPv4 addresses in the low 32,
//! everything big-endian.

/// A big-endian byte string (at most 16 bytes) as a number.
pub(crate) fn u128_of(b: &[u8]) -> u128 {
    b.iter().fold(0, |v, &x| (v << 8) | u128::from(x))
}

/// A MAC as a flow value.
pub(crate) fn mac_u128(m: [u8; 6]) -> u128 {
    u128_of(&m)
}

/// The low `N` bytes of a flow value, big-endian.
pub(crate) fn low<const N: usize>(v: u128) -> [u8; N] {
    let all = v.to_be_bytes();
    let mut out = [0; N];
    out.copy_from_slice(&all[16 - N..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let m = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
        assert_eq!(mac_u128(m), 0x5254_0012_3456);
        assert_eq!(low::<6>(mac_u128(m)), m);
        assert_eq!(low::<4>(0x0a00_0001), [10, 0, 0, 1]);
        assert_eq!(low::<2>(0x1_0800), [8, 0]);
    }
}
