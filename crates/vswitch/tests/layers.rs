//! The crate's layers import only downward (DESIGN.md §1, STYLE.md §14): config at the
//! bottom, then the model, the ports, the shared switch state, the data path, the
//! control plane, the OVN chassis and the Open vSwitch database client, and the
//! daemon. A module that needs something from a
//! layer above it gets it through a trait the lower layer defines (the control plane's
//! `OvnChassis`, the data path's `BurstHandler` seen from the ports).
//!
//! This test reads every source file and fails on a `crate::` path that climbs: code
//! only; comments (doc links may point anywhere) and `#[cfg(test)]` code (a unit test
//! may drive the whole switch) are not imports of the layer.

use std::path::{Path, PathBuf};

/// The layers, bottom first; a module may use its own layer and those before it.
const LAYERS: [&[&str]; 9] = [
    &["sys"],
    &["config"],
    &["model"],
    &["ports"],
    &["switch"],
    &["datapath"],
    &["control"],
    &["ovn", "ovsdb_config"],
    &["daemon"],
];

/// Files that are tests as a whole (declared under `#[cfg(test)]` by their parent).
const TEST_FILES: [&str; 3] = [
    "datapath/tests.rs",
    "datapath/packed_tests.rs",
    "datapath/snoop_tests.rs",
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `crate::X` module names a line of code refers to.
fn targets(line: &str) -> Vec<&str> {
    let code = line.split("//").next().unwrap_or("");
    code.match_indices("crate::")
        .filter(|(i, _)| !code[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(i, _)| {
            let rest = &code[i + 7..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

/// Every climbing reference of `file` (relative to `src`), as "file:line: a -> b".
fn climbs(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/");
    let top = rel.split('/').next().unwrap().trim_end_matches(".rs");
    let Some(own) = rank(top) else {
        return Vec::new(); // lib.rs, bin/, testing/: above every layer
    };
    if TEST_FILES.contains(&rel.as_str()) {
        return Vec::new();
    }
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            let next = lines.get(n + 1).map_or("", |l| l.trim());
            if next.starts_with("mod ") && next.ends_with(';') {
                continue; // a test file declared: TEST_FILES
            }
            break; // the unit tests come last in every file
        }
        if line.trim_start().starts_with("//") {
            continue;
        }
        for t in targets(line) {
            if rank(t).is_some_and(|r| r > own) {
                found.push(format!("{rel}:{}: {top} -> {t}", n + 1));
            }
        }
    }
    found
}

#[test]
fn layers_import_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 50, "the sources were not found in {src:?}");
    let bad: Vec<String> = files.iter().flat_map(|f| climbs(&src, f)).collect();
    assert!(
        bad.is_empty(),
        "imports that climb the layers:\n{}",
        bad.join("\n")
    );
}

#[test]
fn a_climbing_import_is_found() {
    assert_eq!(targets("use crate::ovn::Status; // crate::daemon"), ["ovn"]);
    assert_eq!(targets("let x = mycrate::ovn::f();"), Vec::<&str>::new());
    assert!(rank("model") < rank("ports") && rank("switch") < rank("datapath"));
}
