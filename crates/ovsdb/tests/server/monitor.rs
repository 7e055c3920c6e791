//! Monitoring: rows inserted, modified and deleted by other clients appear
//! in the replica and the change stream with the right old and new rows;
//! indexes; conditions; schema checks.

use std::collections::BTreeMap;

use ovsdb::{
    ChangeKind, Client, ClientConfig, Condition, Datum, Event, Model, MonitorSpec, Operation, Row,
    TableSpec, Uuid,
};
use serde_json::json;

use crate::support::{
    connect, next_changes, next_event, no_event, replica_state, Server, TEST_SCHEMA,
};

ovsdb::model! {
    /// The test schema's Thing table.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Thing in "Thing" {
        pub name: String = "name",
        pub count: i64 = "count",
        pub ratio: f64 = "ratio",
        pub flag: bool = "flag",
        pub kind: Option<String> = "kind",
        pub tags: Vec<String> = "tags",
        pub opts: BTreeMap<String, String> = "opts",
        pub peer: Option<Uuid> = "peer",
    }
}

fn inserted(r: &serde_json::Value, i: usize) -> Uuid {
    Uuid::parse_str(r[i]["uuid"][1].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn changes_from_another_client() {
    let server = Server::start(TEST_SCHEMA);
    let spec = MonitorSpec::new("Test").table(TableSpec::of::<Thing>().index("name"));
    let (client, mut events) = connect(ClientConfig::new(vec![server.tcp()]), spec).await;
    assert_eq!(client.replica().table_len("Thing"), 0);

    // Insert through ovsdb-client: defaults fill the columns the update omits.
    let r = server.transact(json!([
        {"op": "insert", "table": "Thing", "row": {"name": "a", "tags": ["set", ["x", "y"]], "opts": ["map", [["k", "v"]]]}, "uuid-name": "a"},
        {"op": "insert", "table": "Thing", "row": {"name": "b", "peer": ["named-uuid", "a"], "ratio": 2}},
    ]));
    let (a, b) = (inserted(&r, 0), inserted(&r, 1));
    let cs = next_changes(&mut events).await;
    assert_eq!(cs.len(), 2, "one change set for one transaction: {cs:?}");
    assert!(cs
        .changes
        .iter()
        .all(|c| c.kind == ChangeKind::Insert && c.old.is_none()));
    let things = cs.typed::<Thing>();
    let ta = things
        .iter()
        .find(|c| c.uuid == a)
        .unwrap()
        .new
        .clone()
        .unwrap();
    assert_eq!(
        ta,
        Thing {
            uuid: a,
            name: "a".into(),
            count: 0,
            ratio: 0.0,
            flag: false,
            kind: None,
            tags: vec!["x".into(), "y".into()],
            opts: BTreeMap::from([("k".into(), "v".into())]),
            peer: None,
        }
    );
    assert_eq!(client.replica().get::<Thing>(&b).unwrap().peer, Some(a));
    assert_eq!(client.replica().get::<Thing>(&b).unwrap().ratio, 2.0);

    // Modify: a set, a map (one key changed, one added) and a scalar.
    server.transact(json!([
        {"op": "mutate", "table": "Thing", "where": [["name", "==", "a"]], "mutations": [
            ["tags", "delete", "x"], ["tags", "insert", "z"], ["opts", "insert", ["map", [["k2", "v2"]]]]]},
        {"op": "update", "table": "Thing", "where": [["name", "==", "a"]], "row": {"count": 4}},
    ]));
    let cs = next_changes(&mut events).await;
    assert_eq!(cs.len(), 1);
    let c = &cs.changes[0];
    assert_eq!((c.kind, c.uuid), (ChangeKind::Modify, a));
    assert_eq!(
        c.old.as_ref().unwrap().get::<Vec<String>>("tags").unwrap(),
        ["x", "y"]
    );
    assert_eq!(
        c.new.as_ref().unwrap().get::<Vec<String>>("tags").unwrap(),
        ["y", "z"]
    );
    assert_eq!(
        c.changed_columns().into_iter().collect::<Vec<_>>(),
        ["count", "opts", "tags"]
    );
    let ta = client.replica().get::<Thing>(&a).unwrap();
    assert_eq!(ta.opts.len(), 2);
    assert_eq!(ta.count, 4);

    // Index lookups follow renames.
    server.transact(json!([{"op": "update", "table": "Thing", "where": [["name", "==", "a"]], "row": {"name": "a2"}}]));
    next_changes(&mut events).await;
    assert!(client.replica().is_indexed("Thing", "name"));
    assert!(client
        .replica()
        .find::<Thing>("name", &Datum::from("a"))
        .is_empty());
    assert_eq!(
        client.replica().find::<Thing>("name", &Datum::from("a2"))[0].0,
        a
    );
    // An unindexed column is scanned.
    assert_eq!(
        client.replica().find::<Thing>("peer", &Datum::from(a))[0].0,
        b
    );

    // Delete a: b's weak reference goes too, in the same change set.
    server.transact(json!([{"op": "delete", "table": "Thing", "where": [["name", "==", "a2"]]}]));
    let cs = next_changes(&mut events).await;
    let kinds: BTreeMap<Uuid, ChangeKind> = cs.changes.iter().map(|c| (c.uuid, c.kind)).collect();
    assert_eq!(
        kinds,
        BTreeMap::from([(a, ChangeKind::Delete), (b, ChangeKind::Modify)])
    );
    let del = cs.changes.iter().find(|c| c.uuid == a).unwrap();
    assert_eq!(del.old_as::<Thing>().unwrap().unwrap().name, "a2");
    assert!(del.new.is_none());
    assert_eq!(client.replica().get::<Thing>(&b).unwrap().peer, None);
    assert!(client
        .replica()
        .find::<Thing>("name", &Datum::from("a2"))
        .is_empty());
    assert_eq!(client.replica().rows::<Thing>().count(), 1);

    // Our own transactions come back through the change stream too.
    client
        .transact(vec![Operation::insert(
            "Thing",
            Row::new().with("name", "c"),
        )])
        .await
        .unwrap();
    assert_eq!(
        next_changes(&mut events).await.changes[0].kind,
        ChangeKind::Insert
    );
    no_event(&mut events);

    // Only Thing's listed columns are in the replica.
    let (_, row) = client
        .replica()
        .raw_rows("Thing")
        .next()
        .map(|(u, r)| (*u, r.clone()))
        .unwrap();
    assert_eq!(row.len(), Thing::COLUMNS.len());
    client.shutdown().await;
}

#[tokio::test]
async fn conditions_and_set_condition() {
    let server = Server::start(TEST_SCHEMA);
    server.transact(json!([
        {"op": "insert", "table": "Thing", "row": {"name": "a", "count": 1}},
        {"op": "insert", "table": "Thing", "row": {"name": "b", "count": 2}},
        {"op": "insert", "table": "Thing", "row": {"name": "c", "count": 3}},
    ]));
    let spec = MonitorSpec::new("Test")
        .table(TableSpec::of::<Thing>().condition(vec![Condition::eq("name", "a")]));
    let (client, mut events) = connect(ClientConfig::new(vec![server.unix()]), spec).await;
    let names = |c: &Client| {
        let mut v: Vec<String> = c.replica().rows::<Thing>().map(|(_, t)| t.name).collect();
        v.sort();
        v
    };
    assert_eq!(next_changes(&mut events).await.len(), 1);
    assert_eq!(names(&client), ["a"]);

    // Any condition matches (monitor conditions are a disjunction): b and c
    // come in, a goes, in one change set delivered before set_condition returns.
    client
        .set_condition(
            "Thing",
            vec![Condition::eq("name", "b"), Condition::eq("name", "c")],
        )
        .await
        .unwrap();
    assert_eq!(names(&client), ["b", "c"]);
    let cs = next_changes(&mut events).await;
    let mut kinds: Vec<ChangeKind> = cs.changes.iter().map(|c| c.kind).collect();
    kinds.sort_by_key(|k| *k as u8);
    assert_eq!(
        kinds,
        [ChangeKind::Insert, ChangeKind::Insert, ChangeKind::Delete]
    );

    // A change to a row outside the condition is not seen.
    server.transact(json!([{"op": "update", "table": "Thing", "where": [["name", "==", "a"]], "row": {"count": 9}}]));
    server.transact(json!([{"op": "update", "table": "Thing", "where": [["name", "==", "b"]], "row": {"count": 9}}]));
    let cs = next_changes(&mut events).await;
    assert_eq!(cs.changes[0].new_as::<Thing>().unwrap().unwrap().name, "b");

    client
        .set_condition("Thing", vec![Condition::Const(false)])
        .await
        .unwrap();
    assert!(names(&client).is_empty());
    assert!(matches!(
        client.set_condition("Nope", vec![]).await,
        Err(ovsdb::Error::NoSuchTable { .. })
    ));
    // A column the table lacks is refused and not remembered.
    let e = client
        .set_condition("Thing", vec![Condition::eq("colour", "red")])
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "table \"Thing\" has no column \"colour\"");
    assert_eq!(
        client.replica().raw_rows("Thing").count(),
        0,
        "the previous condition (false) still holds"
    );
}

/// Condition changes sent back to back, each large and each bringing many rows: the
/// server answers them in order and stops reading while its writes to the client block,
/// so the client must read while it writes (else, both sockets' buffers full, each
/// waits on the other forever).
#[tokio::test]
async fn large_condition_changes_sent_together_all_complete() {
    const ROWS: usize = 2_000;
    let server = Server::start(TEST_SCHEMA);
    let name = |i: usize| format!("{i:05}-{}", "x".repeat(1_000));
    let spec = MonitorSpec::new("Test")
        .table(TableSpec::of::<Thing>().condition(vec![Condition::Const(false)]));
    let (client, _events) = connect(ClientConfig::new(vec![server.unix()]), spec).await;
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(200) {
        let ops = chunk
            .iter()
            .map(|i| Operation::insert("Thing", Row::new().with("name", name(*i))))
            .collect();
        client.transact(ops).await.unwrap();
    }
    // Five changes, each naming 400 more rows (up to 2 MB a request), sent at once.
    let changes = (1..=5).map(|k| {
        let clauses = (0..k * ROWS / 5)
            .map(|i| Condition::eq("name", name(i)))
            .collect();
        client.set_condition("Thing", clauses)
    });
    let all = futures::future::try_join_all(changes);
    tokio::time::timeout(std::time::Duration::from_secs(60), all)
        .await
        .expect("the condition changes completed (no write-write deadlock)")
        .unwrap();
    assert_eq!(client.replica().raw_rows("Thing").count(), ROWS);
    client.shutdown().await;
}

#[tokio::test]
async fn missing_table_or_column_is_named() {
    let server = Server::start(TEST_SCHEMA);
    for (spec, want) in [
        (
            MonitorSpec::new("Test").table(TableSpec::new("Nope")),
            "has no table \"Nope\"",
        ),
        (
            MonitorSpec::new("Test").table(TableSpec::new("Thing").columns(&["name", "colour"])),
            "table \"Thing\" has no column \"colour\"",
        ),
        (
            MonitorSpec::new("Test")
                .table(TableSpec::new("Thing").columns(&["name"]).index("count")),
            "has no column \"count\" among the monitored columns",
        ),
        (MonitorSpec::new("Tset"), "no database \"Tset\""),
    ] {
        let (client, mut events) = Client::start(ClientConfig::new(vec![server.unix()]), spec);
        match next_event(&mut events).await {
            Event::Disconnected { reason, .. } => assert!(reason.contains(want), "{reason}"),
            e => panic!("{e:?}"),
        }
        assert!(
            matches!(client.state(), ovsdb::ConnectionState::Backoff { last_error, .. } if last_error.contains(want))
        );
        client.shutdown().await;
    }
}

#[tokio::test]
async fn replica_equals_dump_with_all_columns() {
    let server = Server::start(TEST_SCHEMA);
    let (client, mut events) = crate::support::monitor_all(&server).await;
    server.transact(json!([
        {"op": "insert", "table": "Child", "row": {"value": 5}, "uuid-name": "c"},
        {"op": "insert", "table": "Thing", "row": {"name": "a", "children": ["named-uuid", "c"], "ports": ["set", [1, 2]],
            "weights": ["map", [["w", 3]]], "kind": "c", "flag": true, "ratio": 1.5}, "uuid-name": "a"},
        {"op": "insert", "table": "Holder", "row": {"thing": ["named-uuid", "a"]}},
    ]));
    next_changes(&mut events).await;
    assert_eq!(replica_state(&client.replica()), server.dump());
}
