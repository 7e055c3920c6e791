//! Property: after any sequence of transactions (inserts, updates, set and
//! map mutations, deletes, references), the replica equals the server's
//! state as `ovsdb-client dump` prints it, and replaying the change stream
//! (checking each change's old row against the rows so far) gives the
//! same state. This checks update2/update3 `modify` differences for sets,
//! maps and optional columns against the real server.

use std::collections::BTreeMap;

use ovsdb::{Atom, ChangeKind, Condition, Datum, Error, Event, Mutation, Mutator, Operation, Row};
use proptest::prelude::*;

use crate::support::{monitor_all, replica_state, Server, State, PATIENCE, TEST_SCHEMA};

const NAMES: [&str; 5] = ["n0", "n1", "n2", "n3", "n4"];
const TAGS: [&str; 4] = ["x", "y", "z", "w"];
const KEYS: [&str; 3] = ["k1", "k2", "k3"];
const VALUES: [&str; 2] = ["v1", "v2"];

#[derive(Clone, Debug)]
enum Op {
    Insert {
        name: usize,
        count: i64,
        tags: Vec<usize>,
        opts: Vec<(usize, usize)>,
        kind: Option<usize>,
        ports: Vec<i64>,
    },
    Update {
        name: usize,
        count: Option<i64>,
        ratio: Option<i32>,
        flag: Option<bool>,
        tags: Option<Vec<usize>>,
        opts: Option<Vec<(usize, usize)>>,
        kind: Option<Option<usize>>,
    },
    MutateTags {
        name: usize,
        insert: Vec<usize>,
        delete: Vec<usize>,
    },
    MutateOpts {
        name: usize,
        insert: Vec<(usize, usize)>,
        delete_keys: Vec<usize>,
        delete_pairs: Vec<(usize, usize)>,
    },
    MutateWeights {
        name: usize,
        insert: Vec<(usize, i64)>,
        delete_keys: Vec<usize>,
    },
    AddCount {
        name: usize,
        delta: i64,
    },
    Delete {
        name: usize,
    },
    /// Inserts a row and points `name`'s weak `peer` at it.
    PeerToNew {
        name: usize,
        new: usize,
    },
    /// Inserts a child and adds it to `name`'s strong `children`.
    AddChild {
        name: usize,
        value: i64,
    },
    /// Empties `name`'s children (they are garbage collected).
    DropChildren {
        name: usize,
    },
}

fn strings(ix: &[usize], pool: &[&str]) -> Vec<String> {
    ix.iter().map(|i| pool[*i].to_string()).collect()
}

fn map(pairs: &[(usize, usize)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (KEYS[*k].to_string(), VALUES[*v].to_string()))
        .collect()
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    let tags = prop::collection::vec(0..TAGS.len(), 0..3);
    let pairs = prop::collection::vec((0..KEYS.len(), 0..VALUES.len()), 0..3);
    let keys = prop::collection::vec(0..KEYS.len(), 0..2);
    prop_oneof![
        (
            name.clone(),
            0i64..1100,
            tags.clone(),
            pairs.clone(),
            prop::option::of(0usize..3),
            prop::collection::vec(0i64..9, 0..5)
        )
            .prop_map(|(name, count, tags, opts, kind, ports)| Op::Insert {
                name,
                count,
                tags,
                opts,
                kind,
                ports
            }),
        (
            name.clone(),
            prop::option::of(0i64..1100),
            prop::option::of(-3i32..3),
            prop::option::of(any::<bool>()),
            prop::option::of(tags.clone()),
            prop::option::of(pairs.clone()),
            prop::option::of(prop::option::of(0usize..3)),
        )
            .prop_map(|(name, count, ratio, flag, tags, opts, kind)| Op::Update {
                name,
                count,
                ratio,
                flag,
                tags,
                opts,
                kind
            }),
        (name.clone(), tags.clone(), tags).prop_map(|(name, insert, delete)| Op::MutateTags {
            name,
            insert,
            delete
        }),
        (name.clone(), pairs.clone(), keys.clone(), pairs).prop_map(
            |(name, insert, delete_keys, delete_pairs)| Op::MutateOpts {
                name,
                insert,
                delete_keys,
                delete_pairs
            }
        ),
        (
            name.clone(),
            prop::collection::vec((0..KEYS.len(), -2i64..3), 0..3),
            keys
        )
            .prop_map(|(name, insert, delete_keys)| Op::MutateWeights {
                name,
                insert,
                delete_keys
            }),
        (name.clone(), -5i64..5).prop_map(|(name, delta)| Op::AddCount { name, delta }),
        name.clone().prop_map(|name| Op::Delete { name }),
        (name.clone(), name.clone()).prop_map(|(name, new)| Op::PeerToNew { name, new }),
        (name.clone(), 0i64..100).prop_map(|(name, value)| Op::AddChild { name, value }),
        name.prop_map(|name| Op::DropChildren { name }),
    ]
}

fn named(n: &str) -> Datum {
    Datum::atom(Atom::NamedUuid(n.into()))
}

/// The operations of one `Op`; `i` makes its uuid-names unique.
fn operations(op: &Op, i: usize) -> Vec<Operation> {
    let by_name = |n: usize| vec![Condition::eq("name", NAMES[n])];
    let mutate = |n: usize, m: Vec<Mutation>| Operation::mutate("Thing", by_name(n), m);
    match op {
        Op::Insert {
            name,
            count,
            tags,
            opts,
            kind,
            ports,
        } => vec![Operation::insert(
            "Thing",
            Row::new()
                .with("name", NAMES[*name])
                .with("count", *count)
                .with("tags", strings(tags, &TAGS))
                .with("opts", map(opts))
                .with("kind", kind.map(|k| ["a", "b", "c"][k].to_string()))
                .with("ports", ports.clone()),
        )],
        Op::Update {
            name,
            count,
            ratio,
            flag,
            tags,
            opts,
            kind,
        } => {
            let mut row = Row::new();
            if let Some(c) = count {
                row.set("count", *c);
            }
            if let Some(r) = ratio {
                row.set("ratio", f64::from(*r) / 4.0);
            }
            if let Some(f) = flag {
                row.set("flag", *f);
            }
            if let Some(t) = tags {
                row.set("tags", strings(t, &TAGS));
            }
            if let Some(o) = opts {
                row.set("opts", map(o));
            }
            if let Some(k) = kind {
                row.set("kind", k.map(|k| ["a", "b", "c"][k].to_string()));
            }
            vec![Operation::update("Thing", by_name(*name), row)]
        }
        Op::MutateTags {
            name,
            insert,
            delete,
        } => vec![mutate(
            *name,
            vec![
                Mutation::new("tags", Mutator::Delete, strings(delete, &TAGS)),
                Mutation::new("tags", Mutator::Insert, strings(insert, &TAGS)),
            ],
        )],
        Op::MutateOpts {
            name,
            insert,
            delete_keys,
            delete_pairs,
        } => vec![mutate(
            *name,
            vec![
                Mutation::new("opts", Mutator::Delete, strings(delete_keys, &KEYS)),
                Mutation::new("opts", Mutator::Delete, map(delete_pairs)),
                Mutation::new("opts", Mutator::Insert, map(insert)),
            ],
        )],
        Op::MutateWeights {
            name,
            insert,
            delete_keys,
        } => vec![mutate(
            *name,
            vec![
                Mutation::new("weights", Mutator::Delete, strings(delete_keys, &KEYS)),
                Mutation::new(
                    "weights",
                    Mutator::Insert,
                    insert
                        .iter()
                        .map(|(k, v)| (KEYS[*k].to_string(), *v))
                        .collect::<BTreeMap<_, _>>(),
                ),
            ],
        )],
        Op::AddCount { name, delta } => vec![mutate(
            *name,
            vec![Mutation::new("count", Mutator::Add, *delta)],
        )],
        Op::Delete { name } => vec![Operation::delete("Thing", by_name(*name))],
        Op::PeerToNew { name, new } => {
            let id = format!("peer{i}");
            vec![
                Operation::insert_named("Thing", Row::new().with("name", NAMES[*new]), &id),
                Operation::update("Thing", by_name(*name), Row::new().with("peer", named(&id))),
            ]
        }
        Op::AddChild { name, value } => {
            let id = format!("child{i}");
            vec![
                Operation::insert_named("Child", Row::new().with("value", *value), &id),
                mutate(
                    *name,
                    vec![Mutation::new("children", Mutator::Insert, named(&id))],
                ),
            ]
        }
        Op::DropChildren { name } => {
            vec![Operation::update(
                "Thing",
                by_name(*name),
                Row::new().with("children", Datum::empty_set()),
            )]
        }
    }
}

/// Applies a change set to a mirror of the replica, checking each
/// change's old row against the mirror.
fn replay(mirror: &mut State, cs: &ovsdb::ChangeSet) {
    for c in &cs.changes {
        let table = mirror.entry(c.table.clone()).or_default();
        assert_eq!(table.get(&c.uuid), c.old.as_ref(), "old row of {c:?}");
        match (c.kind, &c.new) {
            (ChangeKind::Delete, None) => {
                table.remove(&c.uuid);
            }
            (ChangeKind::Insert | ChangeKind::Modify, Some(new)) => {
                table.insert(c.uuid, new.clone());
            }
            _ => panic!("inconsistent change {c:?}"),
        }
    }
}

async fn run_case(txns: Vec<Vec<Op>>) {
    let server = Server::start(TEST_SCHEMA);
    let (client, mut events) = monitor_all(&server).await;
    let mut mirror = replica_state(&client.replica());
    let mut committed = 0;
    for (t, ops) in txns.iter().enumerate() {
        let ops: Vec<Operation> = ops
            .iter()
            .enumerate()
            .flat_map(|(i, op)| operations(op, t * 10 + i))
            .collect();
        match client.transact(ops).await {
            Ok(_) => committed += 1,
            Err(Error::Operation(_)) => {}
            Err(e) => panic!("transaction {t}: {e}"),
        }
    }
    // Every update reached the replica before its transaction's reply.
    while let Ok(e) = events.try_recv() {
        match e {
            Event::Changes(cs) => replay(&mut mirror, &cs),
            e => panic!("unexpected {e:?}"),
        }
    }
    let dump = server.dump();
    if std::env::var_os("OVSDB_PROPTEST_STATS").is_some() {
        let rows: usize = dump.values().map(BTreeMap::len).sum();
        eprintln!(
            "{} transactions, {committed} committed, {rows} rows at the end",
            txns.len()
        );
    }
    assert_eq!(replica_state(&client.replica()), dump);
    assert_eq!(mirror, dump);
    client.shutdown().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn replica_equals_server_after_random_transactions(
        txns in prop::collection::vec(prop::collection::vec(op_strategy(), 1..4), 1..30)
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async { tokio::time::timeout(PATIENCE, run_case(txns)).await }).expect("case finished in time");
    }
}
