//! Fuzz target: `conntrack::parse` on arbitrary bytes (an L3 packet from an
//! untrusted guest or the wire) never panics, in either checksum mode; what
//! it accepts is self-consistent and goes through a tracker (lookup, then
//! commit, then the reverse direction) without panicking.
#![no_main]

use std::sync::OnceLock;

use conntrack::{parse, Checksums, Config, Conntrack, CtAction, CtState, Packet, L4};
use libfuzzer_sys::fuzz_target;

fn tracker() -> &'static Conntrack {
    static CT: OnceLock<Conntrack> = OnceLock::new();
    CT.get_or_init(|| {
        Conntrack::new(Config {
            shards: 4,
            max_connections: 1000,
            ..Config::default()
        })
        .unwrap()
    })
}

fn reversed(p: &Packet) -> Packet {
    let mut r = Packet {
        src: p.dst,
        dst: p.src,
        ..*p
    };
    match &mut r.l4 {
        L4::Tcp(t) => core::mem::swap(&mut t.src_port, &mut t.dst_port),
        L4::Udp { src_port, dst_port } => core::mem::swap(src_port, dst_port),
        _ => {}
    }
    r
}

fuzz_target!(|data: &[u8]| {
    let verified = parse(data, Checksums::Verify);
    let trusted = parse(data, Checksums::Trust);
    // Verifying only ever refuses more.
    if let Ok(p) = &verified {
        assert_eq!(trusted.as_ref().ok(), Some(p));
    }
    let Ok(p) = trusted else { return };
    assert_eq!(p.src.is_ipv6(), p.dst.is_ipv6());
    if let L4::Tcp(t) = &p.l4 {
        assert!(t.payload_len as usize <= data.len());
    }
    if p.fragment {
        assert!(matches!(p.l4, L4::Other { .. }));
    }
    let ct = tracker();
    ct.flush(None);
    let zone = data.len() as u16 & 3;
    for act in [CtAction::lookup(zone), CtAction::commit(zone)] {
        let r = ct.execute(&p, &act, 1);
        assert!(r.state.contains(CtState::TRK));
        assert_eq!(r.state.contains(CtState::INV), r.invalid.is_some());
        if p.fragment {
            assert!(r.invalid.is_some());
        }
    }
    let r = ct.execute(&reversed(&p), &CtAction::lookup(zone), 2);
    assert!(r.state.contains(CtState::TRK));
    assert!(ct.len() <= 1);
    // And through the byte entry point.
    let r = ct.execute_l3(data, Checksums::Verify, &CtAction::commit(zone), 3);
    assert!(r.state.contains(CtState::TRK));
});
