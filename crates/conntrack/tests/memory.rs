//! Bytes per connection at one million connections, counted by a global
//! allocator that tracks live heap bytes (this test binary only).
//!
//! Target: ≤ 256 bytes per connection; ≤ 768 per SNAT'd connection (its
//! translation and the second key of its reply; issue 41: Calico-VPP holds 1M
//! NAT'd flows in 2 GB, 2,000 bytes each).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use conntrack::{Config, Conntrack, CtAction, Nat, NatRange, Packet, Prepared, L4};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments,
// which uphold `GlobalAlloc`'s contract; the counter has no effect on the
// memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Relaxed);
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// One test at a time: the count of live bytes is the whole binary's.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The `i`-th of a million distinct UDP flows (IPv4; the key has room for
/// IPv6, so IPv6 connections cost the same).
fn flow(i: u32) -> Packet {
    Packet {
        src: std::net::Ipv4Addr::from(0x0a00_0000 | (i >> 4)).into(),
        dst: std::net::Ipv4Addr::new(192, 0, 2, 1).into(),
        fragment: false,
        l4: L4::Udp {
            src_port: 1024 + (i & 0xf) as u16,
            dst_port: 53,
        },
    }
}

#[test]
fn a_million_connections_fit_in_256_bytes_each() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: u32 = 1_000_000;
    let before = LIVE.load(Relaxed);
    let ct = Conntrack::new(Config::default()).unwrap();
    let act = CtAction::commit(1);
    for i in 0..N {
        assert!(ct.execute(&flow(i), &act, 0).has_connection());
    }
    let used = LIVE.load(Relaxed) - before;
    let per_conn = used as f64 / f64::from(N);
    println!(
        "{N} connections: {used} bytes, {per_conn:.1} bytes/connection (tracker's own count {})",
        ct.memory_bytes()
    );
    assert_eq!(ct.len(), N as usize);
    assert!(per_conn <= 256.0, "{per_conn:.1} bytes per connection");
    // The tracker's own accounting is what the allocator saw.
    let own = ct.memory_bytes() as f64;
    assert!(
        (own - used as f64).abs() / (used as f64) < 0.01,
        "{own} vs {used}"
    );
}

#[test]
fn a_million_snat_connections_fit_in_768_bytes_each() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: u32 = 1_000_000;
    let before = LIVE.load(Relaxed);
    let ct = Conntrack::new(Config::default()).unwrap();
    // 256 addresses with their ports: room for the million.
    let snat = Nat::Src(NatRange {
        min: std::net::Ipv4Addr::new(203, 0, 113, 0).into(),
        max: std::net::Ipv4Addr::new(203, 0, 113, 255).into(),
        ports: Some((1024, 65535)),
    });
    let act = CtAction::commit(1).with_nat(snat);
    let mut nat = None;
    for i in 0..N {
        let p = flow(i);
        let r = ct.execute_nat(&p, &Prepared::of(&p), &act, 0, &mut nat);
        assert!(r.has_connection() && nat.is_some(), "{i}: {r:?}");
    }
    let used = LIVE.load(Relaxed) - before;
    let per_conn = used as f64 / f64::from(N);
    println!(
        "{N} SNAT'd connections: {used} bytes, {per_conn:.1} bytes/connection (tracker's own count {})",
        ct.memory_bytes()
    );
    assert_eq!(ct.len(), N as usize);
    assert!(per_conn <= 768.0, "{per_conn:.1} bytes per connection");
    let own = ct.memory_bytes() as f64;
    assert!(
        (own - used as f64).abs() / (used as f64) < 0.02,
        "{own} vs {used}"
    );
}
