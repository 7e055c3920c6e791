//! Fuzz target: a replica of the test schema fed a stream of arbitrary
//! `<table-updates2>` messages never panics; a rejected message changes
//! nothing; after each message the index on `name` agrees with a scan and
//! the change set's new rows are the replica's rows. A second replica fed each
//! message's text (decoded as the client decodes notifications, without a
//! `Value` tree) accepts and rejects the same messages and ends equal.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ovsdb::schema::DatabaseSchema;
use ovsdb::{MonitorSpec, Replica, TableSpec};
use serde_json::Value;

fn schema() -> &'static DatabaseSchema {
    static S: OnceLock<DatabaseSchema> = OnceLock::new();
    S.get_or_init(|| {
        let text = include_str!("../../tests/server/test.ovsschema");
        DatabaseSchema::from_json(&serde_json::from_str(text).expect("JSON")).expect("schema")
    })
}

fuzz_target!(|data: &[u8]| {
    let spec = MonitorSpec::new("Test")
        .table(TableSpec::new("Thing").index("name"))
        .table(TableSpec::new("Child"))
        .table(TableSpec::new("Holder"));
    let mut replica = Replica::for_test(&spec, schema().clone()).expect("replica");
    let mut from_text = replica.clone();
    for msg in serde_json::Deserializer::from_slice(data).into_iter::<Value>() {
        let Ok(msg) = msg else { break };
        let before = replica.clone();
        let text = from_text.apply_updates2_text(&msg.to_string());
        let value = replica.apply_updates2(&msg);
        assert_eq!(text.is_ok(), value.is_ok(), "{text:?} vs {value:?}");
        for t in ["Thing", "Child", "Holder"] {
            assert!(replica.raw_rows(t).eq(from_text.raw_rows(t)));
        }
        match value {
            Ok(cs) => {
                for c in &cs.changes {
                    assert_eq!(replica.raw_row(&c.table, &c.uuid), c.new.as_ref());
                }
            }
            Err(_) => {
                for t in ["Thing", "Child", "Holder"] {
                    assert!(replica.raw_rows(t).eq(before.raw_rows(t)));
                }
            }
        }
        // The index answers as a scan would.
        for (_, row) in replica.raw_rows("Thing") {
            let Some(name) = row.datum("name") else {
                continue;
            };
            let scan: Vec<_> = replica
                .raw_rows("Thing")
                .filter(|(_, r)| r.datum("name") == Some(name))
                .map(|(u, _)| *u)
                .collect();
            assert_eq!(replica.find_uuids("Thing", "name", name), scan);
        }
    }
});
