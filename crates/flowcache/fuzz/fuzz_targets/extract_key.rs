//! Fuzz target: `FlowKey::extract` on arbitrary bytes never panics, and the
//! key reports back what the caller supplied.
//!
//! Input layout: byte 0 selects whether a VNI is given (bit 0), bytes 1..5
//! are in_port, bytes 5..9 the VNI, the rest is the frame.
#![no_main]

use flowcache::{Burst, FlowCache, FlowKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let in_port = u32::from_be_bytes([data[1], data[2], data[3], data[4]]);
    let vni = (data[0] & 1 != 0).then(|| u32::from_be_bytes([data[5], data[6], data[7], data[8]]));
    let frame = &data[9..];

    let k = FlowKey::extract(frame, in_port, vni);
    assert_eq!(k.in_port(), in_port);
    assert_eq!(k.vni(), vni.map(|v| v & 0x00ff_ffff));
    if frame.len() < 14 {
        assert!(k.is_malformed());
    }
    if let Some((_, _)) = k.l4_ports() {
        assert!(k.ip_proto().is_some());
    }
    // Display and the hash must not panic either.
    let s = k.to_string();
    assert!(s.starts_with("in_port("));
    assert_eq!(k.flow_hash(), FlowKey::from_bytes(*k.as_bytes()).flow_hash());

    // Every prefix of the frame, through a burst and a tiny EMC.
    let mut cache: FlowCache<usize> = FlowCache::new(flowcache::EmcConfig {
        entries: 4,
        ..Default::default()
    });
    let mut burst: Burst<usize> = Burst::new();
    for end in (0..=frame.len()).step_by(frame.len() / 16 + 1).take(flowcache::MAX_BURST) {
        let _ = burst.push_frame(&frame[..end], in_port, vni);
    }
    burst.classify(&mut cache, 1);
    burst.resolve(&mut cache, 1, |i, _| i);
    for i in 0..burst.len() {
        assert!(burst.decision(i).is_some());
    }
});
