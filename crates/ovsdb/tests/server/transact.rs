//! `transact`: every operation kind (RFC 7047 §5.2), named-uuid references
//! across operations, and per-operation errors.

use std::collections::BTreeMap;

use ovsdb::{
    Atom, Condition, Datum, Error, Function, Mutation, Mutator, Operation, OperationErrorKind,
    OperationResult, Row, WaitUntil,
};

use crate::support::{monitor_all, Server, TEST_SCHEMA};

fn thing(name: &str) -> Row {
    Row::new().with("name", name)
}

fn op_error(r: Result<Vec<OperationResult>, Error>) -> ovsdb::OperationError {
    match r {
        Err(Error::Operation(e)) => *e,
        r => panic!("expected an operation error, got {r:?}"),
    }
}

#[tokio::test]
async fn every_operation_kind() {
    let server = Server::start(TEST_SCHEMA);
    let (client, _events) = monitor_all(&server).await;

    // insert + named-uuid references across operations of one transaction:
    // a child referenced by a thing, a thing referenced by a holder and as
    // the peer of another thing.
    let r = client
        .transact(vec![
            Operation::insert_named("Child", Row::new().with("value", 7i64), "c"),
            Operation::insert_named(
                "Thing",
                thing("a")
                    .with("count", 3i64)
                    .with("ratio", 0.5)
                    .with("flag", true)
                    .with("kind", Some("b".to_string()))
                    .with("tags", vec!["x".to_string(), "y".to_string()])
                    .with("opts", BTreeMap::from([("k".to_string(), "v".to_string())]))
                    .with("children", Datum::atom(Atom::NamedUuid("c".into()))),
                "a",
            ),
            Operation::insert(
                "Thing",
                thing("b").with("peer", Datum::atom(Atom::NamedUuid("a".into()))),
            ),
            Operation::insert(
                "Holder",
                Row::new().with("thing", Datum::atom(Atom::NamedUuid("a".into()))),
            ),
            Operation::Comment("test transaction".into()),
        ])
        .await
        .unwrap();
    let [OperationResult::Inserted(child), OperationResult::Inserted(a), OperationResult::Inserted(b), OperationResult::Inserted(_), OperationResult::Empty] =
        r.as_slice()
    else {
        panic!("{r:?}")
    };
    // The replica already holds the transaction (ovsdb-server sends the
    // update before the reply).
    {
        let rep = client.replica();
        assert_eq!(
            rep.raw_row("Thing", b)
                .unwrap()
                .get::<Option<ovsdb::Uuid>>("peer")
                .unwrap(),
            Some(*a)
        );
        assert_eq!(
            rep.raw_row("Thing", a)
                .unwrap()
                .get::<Vec<ovsdb::Uuid>>("children")
                .unwrap(),
            vec![*child]
        );
    }

    // update, mutate (set insert/delete, map insert/delete, arithmetic), select.
    let r = client
        .transact(vec![
            Operation::update(
                "Thing",
                vec![Condition::eq("name", "a")],
                Row::new().with("ratio", 1.25),
            ),
            Operation::mutate(
                "Thing",
                vec![Condition::uuid(*a)],
                vec![
                    Mutation::new("count", Mutator::Add, 10i64),
                    Mutation::new("tags", Mutator::Delete, vec!["x".to_string()]),
                    Mutation::new("tags", Mutator::Insert, vec!["z".to_string()]),
                    Mutation::new(
                        "opts",
                        Mutator::Insert,
                        BTreeMap::from([("k2".to_string(), "v2".to_string())]),
                    ),
                    Mutation::new("opts", Mutator::Delete, vec!["k".to_string()]),
                ],
            ),
            Operation::Select {
                table: "Thing".into(),
                conditions: vec![Condition::new("count", Function::GreaterEqual, 13i64)],
                columns: Some(vec![
                    "name".into(),
                    "count".into(),
                    "ratio".into(),
                    "tags".into(),
                    "opts".into(),
                ]),
            },
            Operation::Wait {
                table: "Thing".into(),
                conditions: vec![Condition::eq("name", "a")],
                columns: vec!["count".into()],
                until: WaitUntil::Equal,
                rows: vec![Row::new().with("count", 13i64)],
                timeout_ms: Some(0),
            },
            Operation::Commit { durable: false },
        ])
        .await
        .unwrap();
    assert_eq!(r[0], OperationResult::Count(1));
    assert_eq!(r[1], OperationResult::Count(1));
    let OperationResult::Rows(rows) = &r[2] else {
        panic!("{r:?}")
    };
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<String>("name").unwrap(), "a");
    assert_eq!(rows[0].get::<f64>("ratio").unwrap(), 1.25);
    assert_eq!(rows[0].get::<Vec<String>>("tags").unwrap(), ["y", "z"]);
    assert_eq!(
        rows[0].get::<BTreeMap<String, String>>("opts").unwrap(),
        BTreeMap::from([("k2".to_string(), "v2".to_string())])
    );
    assert_eq!(r[3..], [OperationResult::Empty, OperationResult::Empty]);

    // A select of all columns includes _uuid and _version.
    let r = client
        .transact(vec![Operation::select("Child", vec![])])
        .await
        .unwrap();
    let OperationResult::Rows(rows) = &r[0] else {
        panic!("{r:?}")
    };
    assert_eq!(rows[0].get::<ovsdb::Uuid>("_uuid").unwrap(), *child);
    assert!(rows[0].datum("_version").is_some());

    // delete: the holder first (its strong reference), then b, then a; the
    // child goes with a (garbage collected: not a root table).
    let r = client
        .transact(vec![
            Operation::delete("Holder", vec![]),
            Operation::delete(
                "Thing",
                vec![Condition::new("name", Function::NotEqual, "zzz")],
            ),
        ])
        .await
        .unwrap();
    assert_eq!(r, [OperationResult::Count(1), OperationResult::Count(2)]);
    assert_eq!(client.replica().table_len("Thing"), 0);
    assert_eq!(client.replica().table_len("Child"), 0);

    // abort: the transaction fails with `aborted`.
    let e = op_error(
        client
            .transact(vec![
                Operation::insert("Thing", thing("c")),
                Operation::Abort,
            ])
            .await,
    );
    assert_eq!((e.index, e.kind), (Some(1), OperationErrorKind::Aborted));
}

#[tokio::test]
async fn errors_name_operation_table_and_column() {
    let server = Server::start(TEST_SCHEMA);
    let (client, _events) = monitor_all(&server).await;
    client
        .transact(vec![Operation::insert("Thing", thing("a"))])
        .await
        .unwrap();

    // A range constraint (count is 0..=1000) at operation 1.
    let e = op_error(
        client
            .transact(vec![
                Operation::Comment("first".into()),
                Operation::insert("Thing", thing("b").with("count", 5000i64)),
            ])
            .await,
    );
    assert_eq!(e.index, Some(1));
    assert_eq!(e.kind, OperationErrorKind::ConstraintViolation);
    assert_eq!(
        (e.table.as_deref(), e.column.as_deref()),
        (Some("Thing"), Some("count"))
    );
    assert_eq!(
        e.to_string(),
        format!(
            "operation 1 (Thing.count): constraint violation: {}",
            e.details.clone().unwrap()
        )
    );

    // An enum constraint, in an update.
    let e = op_error(
        client
            .transact(vec![Operation::update(
                "Thing",
                vec![],
                Row::new().with("kind", Some("zz".to_string())),
            )])
            .await,
    );
    assert_eq!((e.index, e.column.as_deref()), (Some(0), Some("kind")));

    // A duplicate in the unique index on name: the server names the column.
    let e = op_error(
        client
            .transact(vec![Operation::insert("Thing", thing("a"))])
            .await,
    );
    assert_eq!(e.kind, OperationErrorKind::ConstraintViolation);
    assert_eq!(
        (e.table.as_deref(), e.column.as_deref()),
        (Some("Thing"), Some("name"))
    );

    // A strong reference to a missing row: reported at commit, past the
    // last operation, naming the referencing table and column.
    let e = op_error(
        client
            .transact(vec![Operation::insert(
                "Holder",
                Row::new().with("thing", ovsdb::Uuid::from_u128(0x1111)),
            )])
            .await,
    );
    assert_eq!(e.index, None);
    assert_eq!(e.kind, OperationErrorKind::ReferentialIntegrity);
    assert_eq!(
        (e.table.as_deref(), e.column.as_deref()),
        (Some("Holder"), Some("thing"))
    );

    // Deleting a row still referenced. (The replica's read guard is a
    // temporary: taken in a statement of its own, never across an await.)
    let a = client
        .replica()
        .find_uuids("Thing", "name", &Datum::from("a"))[0];
    client
        .transact(vec![Operation::insert(
            "Holder",
            Row::new().with("thing", a),
        )])
        .await
        .unwrap();
    let e = op_error(
        client
            .transact(vec![Operation::delete(
                "Thing",
                vec![Condition::eq("name", "a")],
            )])
            .await,
    );
    assert_eq!(
        (e.kind, e.table.as_deref()),
        (OperationErrorKind::ReferentialIntegrity, Some("Thing"))
    );

    // A wait that times out.
    let e = op_error(
        client
            .transact(vec![Operation::Wait {
                table: "Thing".into(),
                conditions: vec![],
                columns: vec!["name".into()],
                until: WaitUntil::Equal,
                rows: vec![],
                timeout_ms: Some(0),
            }])
            .await,
    );
    assert_eq!(
        (e.index, e.kind, e.table.as_deref()),
        (Some(0), OperationErrorKind::TimedOut, Some("Thing"))
    );

    // An assert on a lock this session does not own.
    let e = op_error(
        client
            .transact(vec![Operation::Assert("lock".into())])
            .await,
    );
    assert_eq!(
        (e.index, e.kind, e.table),
        (Some(0), OperationErrorKind::NotOwner, None)
    );

    // An unknown column and an unknown table: syntax errors.
    let e = op_error(
        client
            .transact(vec![Operation::insert(
                "Thing",
                Row::new().with("nme", "x"),
            )])
            .await,
    );
    assert_eq!(
        (e.kind, e.column.as_deref()),
        (OperationErrorKind::Syntax, Some("nme"))
    );
    let e = op_error(
        client
            .transact(vec![Operation::insert("Nope", Row::new())])
            .await,
    );
    assert_eq!(e.kind, OperationErrorKind::Syntax);

    // A set with more elements than its max (ports: 0..3): a syntax error
    // from the server, the column found from the schema is not claimed.
    let e = op_error(
        client
            .transact(vec![Operation::insert(
                "Thing",
                thing("p").with("ports", vec![1i64, 2, 3, 4]),
            )])
            .await,
    );
    assert_eq!(e.kind, OperationErrorKind::Syntax);
}

#[tokio::test]
async fn not_connected_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = ovsdb::ClientConfig::new(vec![ovsdb::Remote::Unix(dir.path().join("none.sock"))]);
    let (client, _events) = ovsdb::Client::start(config, ovsdb::MonitorSpec::new("Test"));
    let r = client.transact(vec![Operation::Comment("x".into())]).await;
    assert!(matches!(r, Err(Error::NotConnected)), "{r:?}");
    client.shutdown().await;
}
