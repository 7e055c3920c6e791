//! Watches an OVN Southbound database and prints Chassis and Port_Binding
//! changes as they happen.
//!
//! ```sh
//! cargo run -p ovsdb --example sb_watch -- unix:/var/run/ovn/ovnsb_db.sock
//! cargo run -p ovsdb --example sb_watch -- tcp:192.0.2.10:6642 tcp:192.0.2.11:6642
//! ```

use std::collections::BTreeMap;

use clap::Parser;
use ovsdb::{ChangeKind, Client, ClientConfig, Event, MonitorSpec, Remote, TableSpec, Uuid};

ovsdb::model! {
    /// A hypervisor or gateway registered by its ovn-controller.
    #[derive(Clone, Debug)]
    pub struct Chassis in "Chassis" {
        /// The chassis name (its system-id).
        pub name: String = "name",
        /// The host name.
        pub hostname: String = "hostname",
        /// Its tunnel encapsulations (Encap rows).
        pub encaps: Vec<Uuid> = "encaps",
    }
}

ovsdb::model! {
    /// A logical port and where it is bound.
    #[derive(Clone, Debug)]
    pub struct PortBinding in "Port_Binding" {
        /// The logical port's name.
        pub logical_port: String = "logical_port",
        /// Its type ("" for a VM or container port).
        pub kind: String = "type",
        /// The tunnel key within its datapath.
        pub tunnel_key: i64 = "tunnel_key",
        /// The chassis it is bound to.
        pub chassis: Option<Uuid> = "chassis",
        /// Whether ovn-controller reported it up.
        pub up: Option<bool> = "up",
        /// Type-specific options.
        pub options: BTreeMap<String, String> = "options",
    }
}

/// Prints OVN Southbound Chassis and Port_Binding changes.
#[derive(Parser)]
struct Args {
    /// Southbound servers: unix:PATH, tcp:IP:PORT or tcp:[IPv6]:PORT (the
    /// members of a cluster, tried in turn).
    #[arg(required = true)]
    remotes: Vec<Remote>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "ovsdb=info".into()),
        )
        .init();
    let args = Args::parse();
    let spec = MonitorSpec::new("OVN_Southbound")
        .table(TableSpec::of::<Chassis>().index("name"))
        .table(TableSpec::of::<PortBinding>().index("logical_port"));
    let (client, mut events) = Client::start(ClientConfig::new(args.remotes), spec);
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            event = events.recv() => match event {
                Some(event) => print_event(&client, event),
                None => break,
            },
        }
    }
    client.shutdown().await;
    Ok(())
}

fn print_event(client: &Client, event: Event) {
    match event {
        Event::Connected {
            remote,
            incremental,
        } => {
            let r = client.replica();
            println!(
                "connected to {remote} ({}): {} chassis, {} port bindings",
                if incremental { "resumed" } else { "full sync" },
                r.table_len("Chassis"),
                r.table_len("Port_Binding")
            );
        }
        Event::Disconnected { remote, reason } => println!("disconnected from {remote}: {reason}"),
        Event::Changes(changes) => {
            for c in changes.typed::<Chassis>() {
                let ch = c.new.as_ref().or(c.old.as_ref());
                let name = ch.map_or("?", |ch| ch.name.as_str());
                match c.kind {
                    ChangeKind::Insert => println!(
                        "chassis {name} added ({} encaps)",
                        ch.map_or(0, |c| c.encaps.len())
                    ),
                    ChangeKind::Modify => println!("chassis {name} changed"),
                    ChangeKind::Delete => println!("chassis {name} removed"),
                }
            }
            let chassis_name = |u: Option<Uuid>| {
                u.map_or_else(
                    || "-".to_string(),
                    |u| {
                        client
                            .replica()
                            .get::<Chassis>(&u)
                            .map_or_else(|| u.to_string(), |c| c.name)
                    },
                )
            };
            for c in changes.typed::<PortBinding>() {
                match (c.kind, &c.old, &c.new) {
                    (ChangeKind::Insert, _, Some(pb)) => println!(
                        "port {} (type {:?}, key {}) on {}",
                        pb.logical_port,
                        pb.kind,
                        pb.tunnel_key,
                        chassis_name(pb.chassis)
                    ),
                    (ChangeKind::Modify, Some(old), Some(new)) => {
                        if old.chassis != new.chassis {
                            println!(
                                "port {} moved {} -> {}",
                                new.logical_port,
                                chassis_name(old.chassis),
                                chassis_name(new.chassis)
                            );
                        }
                        if old.up != new.up {
                            println!("port {} up={:?}", new.logical_port, new.up);
                        }
                    }
                    (ChangeKind::Delete, Some(pb), _) => {
                        println!("port {} removed", pb.logical_port)
                    }
                    _ => {}
                }
            }
        }
    }
}
