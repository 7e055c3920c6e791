//! Fuzz target: `mcsnoop::parse` on arbitrary bytes (an IP packet from an
//! untrusted guest) never panics; whatever it accepts iterates without
//! panicking and goes through an MDB: snooped, dumped, looked up, aged.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use mcsnoop::{parse, Mdb, MdbConfig, Message};

fuzz_target!(|data: &[u8]| {
    let Ok(Some(msg)) = parse(data) else { return };
    let mut groups = Vec::new();
    if let Message::Report(records) = &msg {
        let n = records.len();
        let mut seen = 0;
        for r in records.clone() {
            assert!(r.group.is_multicast());
            let k = r.sources.len();
            assert_eq!(r.sources.count(), k);
            groups.push(r.group);
            seen += 1;
        }
        assert_eq!(seen, n);
    }
    let now = Instant::now();
    let mut mdb: Mdb<u8, u8> = Mdb::new(MdbConfig { max_groups: 8, max_sources: 4, ..Default::default() });
    let s = mdb.snoop(1, 1, &msg, now);
    assert_eq!(s.router, matches!(msg, Message::Query { .. }));
    mdb.snoop(1, 2, &msg, now);
    assert!(mdb.len() <= 8);
    let mut out = Vec::new();
    for g in groups {
        mdb.members(1, g, IpAddr::V4(Ipv4Addr::UNSPECIFIED), &mut out);
    }
    for row in mdb.rows(now) {
        assert!(row.sources.len() <= 4);
    }
    mdb.age(now + Duration::from_secs(301));
    assert!(mdb.is_empty());
});
