//! Fuzz target: the JSON-RPC framer finds the same messages (or the same
//! error) however the byte stream is split, and never panics.
//!
//! Input layout: byte 0 is the chunk size (1..=256), the rest the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovsdb::jsonrpc::{Framer, Message};
use serde_json::Value;

/// Messages until the first error or the end of the input.
fn frame(chunks: &mut dyn Iterator<Item = &[u8]>) -> (Vec<Value>, Option<String>) {
    let mut f = Framer::new(4096);
    let mut out = Vec::new();
    for c in chunks {
        f.push(c);
        loop {
            match f.next_message() {
                Ok(Some(v)) => {
                    let _ = Message::from_json(v.clone());
                    out.push(v);
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, stream)) = data.split_first() else {
        return;
    };
    let n = usize::from(n) + 1;
    let whole = frame(&mut std::iter::once(stream));
    let split = frame(&mut stream.chunks(n));
    assert_eq!(whole.0, split.0);
    // A too-large message may be noticed at a different point, but the
    // outcome (error or not) is the same.
    assert_eq!(
        whole.1.is_some(),
        split.1.is_some(),
        "{:?} vs {:?}",
        whole.1,
        split.1
    );
});
