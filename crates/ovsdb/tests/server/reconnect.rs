//! Reconnection and resync, a cluster's second remote, and the server's
//! inactivity probe.

use std::collections::BTreeMap;
use std::time::Duration;

use ovsdb::{
    ChangeKind, ClientConfig, ConnectionState, Error, Event, Operation, Remote, Row, Uuid,
};
use serde_json::json;

use crate::support::{
    connect, monitor_all, next_changes, next_event, no_event, replica_state, Server, TEST_SCHEMA,
};

fn fast(remotes: Vec<Remote>) -> ClientConfig {
    ClientConfig {
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        ..ClientConfig::new(remotes)
    }
}

fn uuid_of(r: &serde_json::Value, i: usize) -> Uuid {
    Uuid::parse_str(r[i]["uuid"][1].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn offline_changes_arrive_as_one_change_set() {
    let mut server = Server::start(TEST_SCHEMA);
    let r = server.transact(json!([
        {"op": "insert", "table": "Thing", "row": {"name": "keep", "tags": ["set", ["t"]]}},
        {"op": "insert", "table": "Thing", "row": {"name": "modify", "opts": ["map", [["k", "v"]]]}},
        {"op": "insert", "table": "Thing", "row": {"name": "delete"}},
    ]));
    let (modified, deleted) = (uuid_of(&r, 1), uuid_of(&r, 2));
    let (client, mut events) = {
        let mut spec = ovsdb::MonitorSpec::new("Test");
        for t in ["Thing", "Child", "Holder"] {
            spec = spec.table(ovsdb::TableSpec::new(t));
        }
        connect(fast(vec![server.unix()]), spec).await
    };
    assert_eq!(next_changes(&mut events).await.len(), 3);

    server.stop();
    match next_event(&mut events).await {
        Event::Disconnected { remote, reason } => {
            assert_eq!(remote, server.unix());
            assert!(
                reason.contains("closed") || reason.contains("I/O"),
                "{reason}"
            );
        }
        e => panic!("{e:?}"),
    }
    assert!(matches!(
        client.transact(vec![Operation::Comment("x".into())]).await,
        Err(Error::NotConnected)
    ));
    // The replica keeps its rows while disconnected.
    assert_eq!(client.replica().table_len("Thing"), 3);

    let r = server.offline_transact(json!([
        {"op": "insert", "table": "Thing", "row": {"name": "new"}},
        {"op": "mutate", "table": "Thing", "where": [["name", "==", "modify"]],
         "mutations": [["opts", "insert", ["map", [["k2", "v2"]]]], ["count", "+=", 5]]},
        {"op": "delete", "table": "Thing", "where": [["name", "==", "delete"]]},
    ]));
    let new = uuid_of(&r, 0);
    server.restart();

    match next_event(&mut events).await {
        Event::Connected {
            remote,
            incremental,
        } => {
            assert_eq!(remote, server.unix());
            assert!(
                !incremental,
                "a standalone database keeps no transaction history"
            );
        }
        e => panic!("{e:?}"),
    }
    let cs = next_changes(&mut events).await;
    let kinds: BTreeMap<Uuid, ChangeKind> = cs.changes.iter().map(|c| (c.uuid, c.kind)).collect();
    assert_eq!(
        kinds,
        BTreeMap::from([
            (new, ChangeKind::Insert),
            (modified, ChangeKind::Modify),
            (deleted, ChangeKind::Delete)
        ])
    );
    let m = cs.changes.iter().find(|c| c.uuid == modified).unwrap();
    assert_eq!(
        m.changed_columns().into_iter().collect::<Vec<_>>(),
        ["count", "opts"]
    );
    assert_eq!(m.old.as_ref().unwrap().get::<i64>("count").unwrap(), 0);
    assert_eq!(m.new.as_ref().unwrap().get::<i64>("count").unwrap(), 5);
    assert_eq!(replica_state(&client.replica()), server.dump());
    no_event(&mut events);
    assert!(matches!(client.state(), ConnectionState::Connected { .. }));

    // A transaction works on the new connection.
    client
        .transact(vec![Operation::insert(
            "Thing",
            Row::new().with("name", "after"),
        )])
        .await
        .unwrap();
    client.shutdown().await;
}

#[tokio::test]
async fn clustered_database_resumes_from_the_last_transaction() {
    let server = Server::start_clustered(TEST_SCHEMA);
    let (client, mut events) = connect(
        fast(vec![server.unix()]),
        ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing")),
    )
    .await;
    // ovsdb-server trims its history to hold no more atoms than the
    // database: rows that stay keep the transactions below in it.
    let filler =
        (0..50).map(|i| Operation::insert("Thing", Row::new().with("name", format!("filler{i}"))));
    client.transact(filler.collect()).await.unwrap();
    next_changes(&mut events).await;
    client
        .transact(vec![
            Operation::insert("Thing", Row::new().with("name", "a")),
            Operation::insert("Thing", Row::new().with("name", "b")),
        ])
        .await
        .unwrap();
    next_changes(&mut events).await;

    // Close the Unix remote (and its sessions); change the database through
    // TCP meanwhile; open the Unix remote again.
    let sock = format!("punix:{}", server.sock().display());
    server.appctl(&["ovsdb-server/remove-remote", &sock]);
    assert!(matches!(
        next_event(&mut events).await,
        Event::Disconnected { .. }
    ));
    let tcp = format!("tcp:127.0.0.1:{}", server.tcp_port);
    let out = std::process::Command::new("ovsdb-client")
        .args(["transact", &tcp])
        .arg(
            json!(["Test",
                {"op": "insert", "table": "Thing", "row": {"name": "c"}},
                {"op": "update", "table": "Thing", "where": [["name", "==", "a"]], "row": {"count": 1}},
                {"op": "delete", "table": "Thing", "where": [["name", "==", "b"]]}])
            .to_string(),
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    server.appctl(&["ovsdb-server/add-remote", &sock]);

    match next_event(&mut events).await {
        Event::Connected { incremental, .. } => {
            assert!(incremental, "monitor_cond_since found the last txn")
        }
        e => panic!("{e:?}"),
    }
    let cs = next_changes(&mut events).await;
    let mut kinds: Vec<ChangeKind> = cs.changes.iter().map(|c| c.kind).collect();
    kinds.sort_by_key(|k| *k as u8);
    assert_eq!(
        kinds,
        [ChangeKind::Insert, ChangeKind::Modify, ChangeKind::Delete]
    );
    let dump = server.dump();
    assert_eq!(replica_state(&client.replica())["Thing"], dump["Thing"]);
}

#[tokio::test]
async fn second_remote_when_the_first_is_dead() {
    let server = Server::start(TEST_SCHEMA);
    let dead = Remote::Unix(server.path("dead.sock"));
    let (client, _events) = connect(
        fast(vec![dead, server.unix()]),
        ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing")),
    )
    .await;
    assert!(
        matches!(client.state(), ConnectionState::Connected { remote, .. } if remote == server.unix())
    );
}

/// ovsdb-server sends an `echo` after 5 s of silence and drops a client
/// that does not answer within 5 s more; a client that sends nothing of its
/// own (no probe) stays connected only by answering. Waiting is the point.
#[tokio::test]
async fn idle_client_answers_the_servers_probe() {
    let server = Server::start(TEST_SCHEMA);
    let config = ClientConfig {
        inactivity_probe: None,
        ..ClientConfig::new(vec![server.tcp()])
    };
    let (client, mut events) = connect(
        config,
        ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing")),
    )
    .await;
    let ConnectionState::Connected { since, .. } = client.state() else {
        panic!()
    };
    let idle = Duration::from_secs(11);
    let start = std::time::Instant::now();
    while start.elapsed() < idle {
        tokio::select! {
            e = events.recv() => panic!("unexpected event while idle: {e:?}"),
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        assert_eq!(
            client.state(),
            ConnectionState::Connected {
                remote: server.tcp(),
                since
            }
        );
    }
    client
        .transact(vec![Operation::Comment("still here".into())])
        .await
        .unwrap();
}

#[tokio::test]
async fn all_columns_resync_after_restart() {
    let mut server = Server::start(TEST_SCHEMA);
    let (client, mut events) = monitor_all(&server).await;
    server.transact(json!([
        {"op": "insert", "table": "Child", "row": {"value": 1}, "uuid-name": "c"},
        {"op": "insert", "table": "Thing", "row": {"name": "a", "children": ["named-uuid", "c"]}},
    ]));
    next_changes(&mut events).await;
    server.restart();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Disconnected { .. }
    ));
    assert!(matches!(
        next_event(&mut events).await,
        Event::Connected { .. }
    ));
    // Nothing changed: no change set.
    client
        .transact(vec![Operation::Comment("sync".into())])
        .await
        .unwrap();
    no_event(&mut events);
    assert_eq!(replica_state(&client.replica()), server.dump());
}

#[tokio::test]
async fn condition_set_while_disconnected_applies_on_reconnect() {
    let mut server = Server::start(TEST_SCHEMA);
    server.transact(json!([
        {"op": "insert", "table": "Thing", "row": {"name": "a"}},
        {"op": "insert", "table": "Thing", "row": {"name": "b"}},
    ]));
    let (client, mut events) = connect(
        fast(vec![server.unix()]),
        ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing").columns(&["name"])),
    )
    .await;
    assert_eq!(next_changes(&mut events).await.len(), 2);
    server.stop();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Disconnected { .. }
    ));
    client
        .set_condition("Thing", vec![ovsdb::Condition::eq("name", "b")])
        .await
        .unwrap();
    server.restart();
    assert!(matches!(
        next_event(&mut events).await,
        Event::Connected { .. }
    ));
    let cs = next_changes(&mut events).await;
    assert_eq!(cs.len(), 1);
    assert_eq!(cs.changes[0].kind, ChangeKind::Delete);
    assert_eq!(
        cs.changes[0]
            .old
            .as_ref()
            .unwrap()
            .get::<String>("name")
            .unwrap(),
        "a"
    );
    assert_eq!(client.replica().table_len("Thing"), 1);
}

/// A message past `max_message` drops the connection with that reason; the
/// client keeps retrying (here every monitor reply is too large) and says
/// why in its state.
#[tokio::test]
async fn oversized_message_drops_the_connection() {
    let server = Server::start(TEST_SCHEMA);
    let config = ClientConfig {
        max_message: 4096,
        ..fast(vec![server.unix()])
    };
    let (client, mut events) = connect(
        config,
        ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing").columns(&["name"])),
    )
    .await;
    server
        .transact(json!([{"op": "insert", "table": "Thing", "row": {"name": "x".repeat(10_000)}}]));
    match next_event(&mut events).await {
        Event::Disconnected { reason, .. } => assert_eq!(reason, "a message exceeds 4096 bytes"),
        e => panic!("{e:?}"),
    }
    let deadline = std::time::Instant::now() + crate::support::PATIENCE;
    loop {
        if let ConnectionState::Backoff {
            last_error,
            attempts,
            ..
        } = client.state()
        {
            if attempts >= 2 {
                assert_eq!(last_error, "a message exceeds 4096 bytes");
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", client.state());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The replica kept what it had.
    assert_eq!(client.replica().table_len("Thing"), 0);
    client.shutdown().await;
}

/// The client's own probe: a stopped (silent) server is dropped after the
/// probe interval plus another without an answer; once it runs again the
/// client reconnects by itself. Over a Unix socket the same silence is
/// waited out (no probe, as Open vSwitch does on local sockets), and the
/// connection carries on.
#[tokio::test]
async fn silent_server_is_dropped_by_the_probe() {
    let server = Server::start(TEST_SCHEMA);
    let probe = Duration::from_millis(300);
    let config = ClientConfig {
        inactivity_probe: Some(probe),
        ..fast(vec![server.unix()])
    };
    let (client, mut events) = connect(
        config,
        ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing")),
    )
    .await;
    server.signal("STOP");
    tokio::time::sleep(probe * 4).await;
    server.signal("CONT");
    client
        .transact(vec![Operation::Comment("still here".into())])
        .await
        .unwrap();
    no_event(&mut events);
    client.shutdown().await;

    let config = ClientConfig {
        inactivity_probe: Some(probe),
        ..fast(vec![server.tcp()])
    };
    let (client, mut events) = connect(
        config,
        ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing")),
    )
    .await;
    // A responsive server keeps the connection up across several probes.
    tokio::time::sleep(probe * 4).await;
    no_event(&mut events);
    server.signal("STOP");
    let stopped = std::time::Instant::now();
    match next_event(&mut events).await {
        Event::Disconnected { reason, .. } => {
            assert_eq!(reason, "no answer to an echo within 300ms")
        }
        e => panic!("{e:?}"),
    }
    assert!(stopped.elapsed() >= probe, "{:?}", stopped.elapsed());
    server.signal("CONT");
    assert!(matches!(
        next_event(&mut events).await,
        Event::Connected { .. }
    ));
    client
        .transact(vec![Operation::Comment("back".into())])
        .await
        .unwrap();
}

/// The probe set on a running client takes effect on the connection up: with
/// none, a stopped server is waited for; once one is set, the client probes the
/// still silent server and drops it; a restored server is reconnected to.
#[tokio::test]
async fn a_probe_set_later_applies_to_the_connection_up() {
    let server = Server::start(TEST_SCHEMA);
    let config = ClientConfig {
        inactivity_probe: None,
        ..fast(vec![server.tcp()])
    };
    let (client, mut events) = connect(
        config,
        ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing")),
    )
    .await;
    let probe = Duration::from_millis(200);
    server.signal("STOP");
    tokio::time::sleep(probe * 4).await;
    no_event(&mut events);
    let set = std::time::Instant::now();
    client.set_inactivity_probe(Some(probe));
    match next_event(&mut events).await {
        Event::Disconnected { reason, .. } => {
            assert_eq!(reason, "no answer to an echo within 200ms")
        }
        e => panic!("{e:?}"),
    }
    assert!(set.elapsed() >= probe, "{:?}", set.elapsed());
    server.signal("CONT");
    assert!(matches!(
        next_event(&mut events).await,
        Event::Connected { .. }
    ));
    client.shutdown().await;
}

/// A member of a clustered database that loses its cluster (its only
/// peer, the leader, goes down: it cannot elect a leader alone) is dropped
/// by a connected client and refused by a new one, as ovsdb-idl does: its
/// data may be stale.
#[tokio::test]
async fn cluster_member_without_its_cluster_is_refused() {
    let mut leader = Server::start_clustered(TEST_SCHEMA);
    let member = crate::support::Server::join(&leader);
    let spec = ovsdb::MonitorSpec::new("Test").table(ovsdb::TableSpec::new("Thing"));
    // Connected once the member has joined (refused while it joins).
    let (client, mut events) = connect(fast(vec![member.unix()]), spec.clone()).await;

    leader.stop();
    match next_event(&mut events).await {
        Event::Disconnected { reason, .. } => {
            assert!(reason.contains("not connected to its cluster"), "{reason}")
        }
        e => panic!("{e:?}"),
    }
    let (fresh, _events) = ovsdb::Client::start(fast(vec![member.unix()]), spec);
    let deadline = std::time::Instant::now() + crate::support::PATIENCE;
    for c in [&client, &fresh] {
        loop {
            if let ConnectionState::Backoff { last_error, .. } = c.state() {
                if last_error.contains("not connected to its cluster") {
                    break;
                }
            }
            assert!(std::time::Instant::now() < deadline, "{:?}", c.state());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
