//! Typed models of the real OVN Southbound schema: a chassis registers
//! itself (Chassis, Encap, Chassis_Private) and claims a Port_Binding.

use std::collections::BTreeMap;

use ovsdb::{
    Atom, ChangeKind, ClientConfig, Condition, Datum, Model, MonitorSpec, Operation,
    OperationResult, Row, TableSpec, Uuid,
};

use crate::support::{connect, next_changes, replica_state, Server, SB_SCHEMA};

ovsdb::model! {
    /// OVN_Southbound Chassis.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Chassis in "Chassis" {
        pub name: String = "name",
        pub hostname: String = "hostname",
        pub encaps: Vec<Uuid> = "encaps",
        pub nb_cfg: i64 = "nb_cfg",
        pub external_ids: BTreeMap<String, String> = "external_ids",
        pub other_config: BTreeMap<String, String> = "other_config",
        pub transport_zones: Vec<String> = "transport_zones",
    }
}

ovsdb::model! {
    /// OVN_Southbound Encap.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Encap in "Encap" {
        pub kind: String = "type",
        pub ip: String = "ip",
        pub chassis_name: String = "chassis_name",
        pub options: BTreeMap<String, String> = "options",
    }
}

ovsdb::model! {
    /// OVN_Southbound Chassis_Private.
    #[derive(Clone, Debug, PartialEq)]
    pub struct ChassisPrivate in "Chassis_Private" {
        pub name: String = "name",
        pub chassis: Option<Uuid> = "chassis",
        pub nb_cfg: i64 = "nb_cfg",
    }
}

ovsdb::model! {
    /// OVN_Southbound Port_Binding.
    #[derive(Clone, Debug, PartialEq)]
    pub struct PortBinding in "Port_Binding" {
        pub logical_port: String = "logical_port",
        pub kind: String = "type",
        pub datapath: Uuid = "datapath",
        pub tunnel_key: i64 = "tunnel_key",
        pub chassis: Option<Uuid> = "chassis",
        pub encap: Option<Uuid> = "encap",
        pub mac: Vec<String> = "mac",
        pub options: BTreeMap<String, String> = "options",
        pub up: Option<bool> = "up",
        pub tag: Option<i64> = "tag",
    }
}

fn named(n: &str) -> Datum {
    Datum::atom(Atom::NamedUuid(n.into()))
}

#[tokio::test]
async fn chassis_registers_and_claims_a_port() {
    let server = Server::start(SB_SCHEMA);
    let spec = MonitorSpec::new("OVN_Southbound")
        .table(TableSpec::of::<Chassis>().index("name"))
        .table(TableSpec::of::<Encap>())
        .table(TableSpec::of::<ChassisPrivate>())
        .table(TableSpec::of::<PortBinding>().index("logical_port"));
    let (client, mut events) = connect(ClientConfig::new(vec![server.unix()]), spec).await;

    // What northd would have written: a datapath and a port.
    let r = client
        .transact(vec![
            Operation::insert_named(
                "Datapath_Binding",
                Row::new().with("tunnel_key", 1i64),
                "dp",
            ),
            Operation::insert(
                "Port_Binding",
                Row::new()
                    .with("logical_port", "vm1")
                    .with("datapath", named("dp"))
                    .with("tunnel_key", 5i64)
                    .with("mac", vec!["00:00:00:00:00:01 10.0.0.1".to_string()]),
            ),
        ])
        .await
        .unwrap();
    let OperationResult::Inserted(port) = r[1] else {
        panic!("{r:?}")
    };
    let pb = next_changes(&mut events)
        .await
        .typed::<PortBinding>()
        .remove(0)
        .new
        .unwrap();
    assert_eq!(
        (pb.logical_port.as_str(), pb.tunnel_key, pb.chassis, pb.up),
        ("vm1", 5, None, None)
    );

    // The chassis registers: Encap + Chassis + Chassis_Private in one transaction.
    let encap = Encap {
        uuid: Uuid::nil(),
        kind: "geneve".into(),
        ip: "192.0.2.1".into(),
        chassis_name: "ch1".into(),
        options: BTreeMap::from([("csum".into(), "true".into())]),
    };
    let mut chassis_row = Row::new()
        .with("name", "ch1")
        .with("hostname", "host1")
        .with(
            "external_ids",
            BTreeMap::from([("ovn-bridge-mappings".to_string(), "".to_string())]),
        );
    chassis_row.insert("encaps", named("encap"));
    let r = client
        .transact(vec![
            Operation::insert_named("Encap", encap.to_row(), "encap"),
            Operation::insert_named("Chassis", chassis_row, "ch"),
            Operation::insert(
                "Chassis_Private",
                Row::new().with("name", "ch1").with("chassis", named("ch")),
            ),
        ])
        .await
        .unwrap();
    let (OperationResult::Inserted(enc), OperationResult::Inserted(ch)) = (&r[0], &r[1]) else {
        panic!("{r:?}")
    };
    let cs = next_changes(&mut events).await;
    assert_eq!(cs.len(), 3);
    assert!(cs.changes.iter().all(|c| c.kind == ChangeKind::Insert));
    {
        let rep = client.replica();
        let chassis = rep.find::<Chassis>("name", &Datum::from("ch1"));
        assert_eq!(chassis.len(), 1);
        assert_eq!(chassis[0].1.encaps, vec![*enc]);
        assert_eq!(
            rep.get::<Encap>(enc).unwrap(),
            Encap {
                uuid: *enc,
                ..encap.clone()
            }
        );
        let private: Vec<ChassisPrivate> = rep.rows::<ChassisPrivate>().map(|(_, p)| p).collect();
        assert_eq!(private[0].chassis, Some(*ch));
    }

    // Claim the port: chassis, encap and up.
    client
        .transact(vec![Operation::update(
            "Port_Binding",
            vec![Condition::eq("logical_port", "vm1")],
            Row::new()
                .with("chassis", Some(*ch))
                .with("encap", Some(*enc))
                .with("up", Some(true)),
        )])
        .await
        .unwrap();
    let cs = next_changes(&mut events).await;
    let change = cs.typed::<PortBinding>().remove(0);
    assert_eq!(change.kind, ChangeKind::Modify);
    assert_eq!(change.old.unwrap().chassis, None);
    let new = change.new.unwrap();
    assert_eq!(
        (new.chassis, new.encap, new.up),
        (Some(*ch), Some(*enc), Some(true))
    );
    assert_eq!(
        client
            .replica()
            .find::<PortBinding>("logical_port", &Datum::from("vm1"))[0]
            .0,
        port
    );

    // The chassis goes away: the weak references from Port_Binding and
    // Chassis_Private are cleared by the server; the Encap is collected.
    client
        .transact(vec![Operation::delete(
            "Chassis",
            vec![Condition::eq("name", "ch1")],
        )])
        .await
        .unwrap();
    let cs = next_changes(&mut events).await;
    let kinds: BTreeMap<&str, ChangeKind> = cs
        .changes
        .iter()
        .map(|c| (c.table.as_str(), c.kind))
        .collect();
    assert_eq!(
        kinds,
        BTreeMap::from([
            ("Chassis", ChangeKind::Delete),
            ("Chassis_Private", ChangeKind::Modify),
            ("Encap", ChangeKind::Delete),
            ("Port_Binding", ChangeKind::Modify),
        ])
    );
    assert_eq!(
        client.replica().get::<PortBinding>(&port).unwrap().chassis,
        None
    );

    // The replica's columns are the models' columns, equal to the server's.
    let dump = server.dump();
    for (table, rows) in replica_state(&client.replica()) {
        assert_eq!(rows.len(), dump[&table].len(), "{table}");
        for (u, row) in rows {
            for (c, d) in row.iter() {
                assert_eq!(dump[&table][&u].datum(c), Some(d), "{table}.{c}");
            }
        }
    }
    assert_eq!(
        PortBinding::COLUMNS.len(),
        client
            .replica()
            .raw_row("Port_Binding", &port)
            .unwrap()
            .len()
    );
}
