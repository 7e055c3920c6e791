//! A real ovsdb-server in a temporary directory, killed on drop.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ovsdb::schema::DatabaseSchema;
use ovsdb::{
    ChangeSet, Client, ClientConfig, Datum, Event, MonitorSpec, Remote, Replica, Row, TableSpec,
    Uuid,
};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

/// The test schema: every atomic type, sets with bounds, maps, weak and
/// strong references, a non-root table and a unique index.
pub const TEST_SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/server/test.ovsschema");
/// The OVN Southbound schema installed with OVN.
pub const SB_SCHEMA: &str = "/usr/share/ovn/ovn-sb.ovsschema";

/// How long any awaited condition may take before a test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

pub struct Server {
    dir: tempfile::TempDir,
    child: Option<Child>,
    pub schema: DatabaseSchema,
    pub db_name: String,
    pub tcp_port: u16,
    clustered: bool,
}

impl Server {
    /// Creates a standalone database from `schema` and starts a server.
    pub fn start(schema: &str) -> Server {
        Self::create(schema, false)
    }

    /// Creates a one-member clustered database (Raft), which keeps the
    /// transaction history `monitor_cond_since` resumes from.
    pub fn start_clustered(schema: &str) -> Server {
        Self::create(schema, true)
    }

    fn create(schema: &str, clustered: bool) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = std::fs::read_to_string(schema).expect("read schema");
        let schema_v: Value = serde_json::from_str(&text).expect("schema JSON");
        let parsed = DatabaseSchema::from_json(&schema_v).expect("schema");
        let db = dir.path().join("db.db");
        let mut cmd = Command::new("ovsdb-tool");
        if clustered {
            let raft = format!("unix:{}", dir.path().join("raft.sock").display());
            cmd.arg("create-cluster").arg(&db).arg(schema).arg(raft);
        } else {
            cmd.arg("create").arg(&db).arg(schema);
        }
        run(&mut cmd);
        let mut s = Server {
            dir,
            child: None,
            db_name: parsed.name.clone(),
            schema: parsed,
            tcp_port: 0,
            clustered,
        };
        s.spawn();
        s
    }

    /// A second member of `leader`'s clustered database
    /// (`ovsdb-tool join-cluster`), started.
    pub fn join(leader: &Server) -> Server {
        assert!(leader.clustered);
        let dir = tempfile::tempdir().expect("tempdir");
        let raft = |d: &Path| format!("unix:{}", d.join("raft.sock").display());
        run(Command::new("ovsdb-tool")
            .arg("join-cluster")
            .arg(dir.path().join("db.db"))
            .arg(&leader.db_name)
            .arg(raft(dir.path()))
            .arg(raft(leader.dir.path())));
        let mut s = Server {
            dir,
            child: None,
            schema: leader.schema.clone(),
            db_name: leader.db_name.clone(),
            tcp_port: 0,
            clustered: true,
        };
        s.spawn();
        s
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn sock(&self) -> PathBuf {
        self.path("db.sock")
    }

    pub fn unix(&self) -> Remote {
        Remote::Unix(self.sock())
    }

    pub fn tcp(&self) -> Remote {
        format!("tcp:127.0.0.1:{}", self.tcp_port).parse().unwrap()
    }

    fn spawn(&mut self) {
        let log = self.path("ovsdb-server.log");
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(self.sock());
        let child = Command::new("ovsdb-server")
            .arg(format!("--remote=punix:{}", self.sock().display()))
            .arg("--remote=ptcp:0:127.0.0.1")
            .arg(format!("--pidfile={}", self.path("pid").display()))
            .arg(format!("--unixctl={}", self.path("ctl").display()))
            .arg(format!("--log-file={}", log.display()))
            .arg(self.path("db.db"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ovsdb-server (is openvswitch-common installed?)");
        self.child = Some(child);
        // Ready when the Unix socket accepts and the log names the TCP port.
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let (Some(port), true) = (
                tcp_port(&log),
                std::os::unix::net::UnixStream::connect(self.sock()).is_ok(),
            ) {
                self.tcp_port = port;
                break;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "ovsdb-server exited with {status}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "ovsdb-server not ready");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills the server and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends a signal to the server (`STOP`, `CONT`).
    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        run(Command::new("kill").arg(format!("-{sig}")).arg(pid));
    }

    /// Starts the server again on the same database and socket (a new TCP port).
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// `ovsdb-tool transact` on the database file while the server is down.
    pub fn offline_transact(&self, ops: Value) -> Value {
        assert!(self.child.is_none() && !self.clustered);
        let mut txn = vec![Value::String(self.db_name.clone())];
        txn.extend(ops.as_array().expect("ops array").iter().cloned());
        let out = run(Command::new("ovsdb-tool")
            .arg("transact")
            .arg(self.path("db.db"))
            .arg(Value::Array(txn).to_string()));
        serde_json::from_str(&out).expect("ovsdb-tool transact output")
    }

    /// `ovsdb-client transact` through the server.
    pub fn transact(&self, ops: Value) -> Value {
        let mut txn = vec![Value::String(self.db_name.clone())];
        txn.extend(ops.as_array().expect("ops array").iter().cloned());
        let out = run(Command::new("ovsdb-client")
            .arg("transact")
            .arg(format!("unix:{}", self.sock().display()))
            .arg(Value::Array(txn).to_string()));
        serde_json::from_str(&out).expect("ovsdb-client transact output")
    }

    /// `ovs-appctl -t CTL ARGS...`.
    pub fn appctl(&self, args: &[&str]) -> String {
        run(Command::new("ovs-appctl")
            .arg("-t")
            .arg(self.path("ctl"))
            .args(args))
    }

    /// The database as `ovsdb-client -f json dump` prints it: table → UUID
    /// → row of every column, decoded with the schema's types.
    pub fn dump(&self) -> State {
        let out = run(Command::new("ovsdb-client")
            .args(["-f", "json", "dump"])
            .arg(format!("unix:{}", self.sock().display()))
            .arg(&self.db_name));
        let mut state = State::new();
        for line in out.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).expect("dump line");
            let table = v["caption"]
                .as_str()
                .unwrap()
                .trim_end_matches(" table")
                .to_owned();
            let ts = self.schema.table(&table).unwrap();
            let headings: Vec<&str> = v["headings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_str().unwrap())
                .collect();
            let rows = state.entry(table.clone()).or_default();
            for r in v["data"].as_array().unwrap() {
                let mut row = Row::new();
                let mut uuid = None;
                for (h, cell) in headings.iter().zip(r.as_array().unwrap()) {
                    let d = Datum::from_json(cell, ts.column(h).unwrap()).unwrap();
                    if *h == "_uuid" {
                        uuid = d.as_atom().cloned();
                    } else {
                        row.insert(*h, d);
                    }
                }
                let Some(ovsdb::Atom::Uuid(u)) = uuid else {
                    panic!("no _uuid")
                };
                rows.insert(u, row);
            }
        }
        state
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Table → UUID → row.
pub type State = BTreeMap<String, BTreeMap<Uuid, Row>>;

/// The replica in the shape of [`Server::dump`].
pub fn replica_state(r: &Replica) -> State {
    r.tables()
        .map(|t| {
            (
                t.to_owned(),
                r.raw_rows(t).map(|(u, row)| (*u, row.clone())).collect(),
            )
        })
        .collect()
}

fn tcp_port(log: &Path) -> Option<u16> {
    let f = std::fs::File::open(log).ok()?;
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split("listening on port ")
                .nth(1)
                .and_then(|p| p.trim().parse().ok())
        })
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A client of every table and column of the server's database over its
/// Unix socket, connected.
pub async fn monitor_all(server: &Server) -> (Client, UnboundedReceiver<Event>) {
    let mut spec = MonitorSpec::new(&server.db_name);
    for t in server.schema.tables.keys() {
        spec = spec.table(TableSpec::new(t));
    }
    connect(ClientConfig::new(vec![server.unix()]), spec).await
}

/// Starts a client and waits for it to connect.
pub async fn connect(
    config: ClientConfig,
    spec: MonitorSpec,
) -> (Client, UnboundedReceiver<Event>) {
    init_tracing();
    let (client, mut events) = Client::start(config, spec);
    tokio::time::timeout(PATIENCE, client.connected())
        .await
        .expect("connected in time")
        .expect("connected");
    match events.recv().await {
        Some(Event::Connected { .. }) => {}
        e => panic!("expected Connected, got {e:?}"),
    }
    (client, events)
}

/// The next event, within [`PATIENCE`].
pub async fn next_event(events: &mut UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(PATIENCE, events.recv())
        .await
        .expect("an event in time")
        .expect("the event stream is open")
}

/// The next change set, within [`PATIENCE`]; fails on any other event.
pub async fn next_changes(events: &mut UnboundedReceiver<Event>) -> ChangeSet {
    match next_event(events).await {
        Event::Changes(cs) => cs,
        e => panic!("expected changes, got {e:?}"),
    }
}

/// Fails if an event is already waiting.
pub fn no_event(events: &mut UnboundedReceiver<Event>) {
    if let Ok(e) = events.try_recv() {
        panic!("unexpected event {e:?}");
    }
}

/// Logs to the test's output with `RUST_LOG=ovsdb=debug`.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
