//! Runs `examples/nic_report` (built by `cargo test`) on a veth pair in a
//! network namespace and checks its text and JSON output against `ethtool -k`.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::{parse_ethtool_k, Netns};

/// Not a test on its own: the shared support code's child entry point.
#[test]
#[ignore = "helper run by the other tests inside a network namespace"]
fn probe_child() {
    support::probe_child();
}

/// `target/debug/examples/nic_report`, next to this test's `deps/` directory.
fn nic_report() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("examples").join("nic_report");
    path.exists().then_some(path)
}

#[test]
fn nic_report_prints_capabilities_and_plan() {
    let Some(bin) = nic_report() else {
        eprintln!("SKIPPED: examples/nic_report not built (`cargo test -p nicoffload` builds it)");
        return;
    };
    let bin = bin.to_str().unwrap();
    let ns = Netns::new("example");
    ns.ip(&[
        "link",
        "add",
        "va",
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        "vb",
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
    ]);

    let text = ns.must(bin, &["va"]);
    assert!(text.contains("driver:      veth"), "{text}");
    assert!(text.contains("AF_XDP mode  native-copy"), "{text}");

    let json: serde_json::Value = serde_json::from_str(&ns.must(bin, &["va", "--json"])).unwrap();
    let (oracle, _) = parse_ethtool_k(&ns.must("ethtool", &["-k", "va"]));
    let features = json["capabilities"]["features"].as_object().unwrap();
    assert_eq!(features.len(), oracle.len());
    for (name, o) in &oracle {
        let f = &features[name];
        assert_eq!(f["active"], o.active, "{name}");
        assert_eq!(f["fixed"], o.fixed, "{name}");
    }
    let afxdp = &json["plan"]["decisions"][5];
    assert_eq!(afxdp["job"], "af_xdp");
    assert_eq!(afxdp["afxdp_mode"], "native_copy");

    let missing = ns.exec(bin, &["nosuch0"]);
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("no interface named \"nosuch0\""), "{err}");

    let help = Command::new(bin)
        .arg("--help")
        .output()
        .expect("running nic_report --help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--afxdp-mode") && help.contains("ip netns exec"),
        "{help}"
    );
}
