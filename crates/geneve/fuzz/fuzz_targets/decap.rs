//! Decapsulation and option parsing of untrusted wire bytes: must never
//! panic, and whatever it accepts must be self-consistent.
#![no_main]

use geneve::decap::{Decapsulator, DropReason};
use geneve::wire::{self, OptionIter, OptionList, Packet, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut dec = Decapsulator::default();
    dec.registry.insert(0x0102, 0x80);
    for verify in [true, false] {
        dec.verify_checksums = verify;
        dec.allow_ipv6_zero_checksum = !verify;
        match dec.decapsulate(data) {
            Ok(d) => {
                assert!(d.inner_offset + d.inner.len() <= data.len());
                assert_eq!(&data[d.inner_offset..d.inner_offset + d.inner.len()], d.inner);
                assert!(d.vni <= wire::MAX_VNI);
                // Accepted options re-parse and rebuild to the same bytes.
                let mut rebuilt = OptionList::new();
                for o in OptionIter::new(d.options) {
                    let o = o.expect("decap accepted malformed options");
                    rebuilt.push(o.class(), o.option_type(), o.data()).unwrap();
                }
                // Same bytes except the 3 reserved bits of each option's
                // length byte, which are ignored on parse and zero on emit.
                assert_eq!(rebuilt.len(), d.options.len());
                for (a, b) in OptionIter::new(rebuilt.as_bytes()).zip(OptionIter::new(d.options)) {
                    let (a, b) = (a.unwrap(), b.unwrap());
                    assert_eq!((a.class(), a.option_type(), a.data()), (b.class(), b.option_type(), b.data()));
                }
            }
            Err(r) => assert!(r.index() < DropReason::COUNT),
        }
    }
    // The bare Geneve header parser on the same bytes.
    if let Ok(p) = Packet::new_checked(data) {
        let _ = p.payload();
        if let Ok(r) = Repr::parse(&p) {
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..])).unwrap();
            assert_eq!(&buf[..], &data[..r.buffer_len()].iter().enumerate().map(|(i, &b)| match i {
                // Reserved bits are ignored on parse and zero on emit.
                1 => b & 0xc0,
                7 => 0,
                _ => b,
            }).collect::<Vec<u8>>()[..]);
        }
    }
    for o in OptionIter::new(data) {
        if let Ok(o) = o {
            assert!(o.total_len() <= data.len());
        }
    }
});
