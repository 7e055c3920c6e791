//! OVN 23.03 `tests/ovn.at` "action parsing", as a table.

#[path = "ovn_cases/actions.rs"]
mod cases;
mod common;

use cases::Expect;
use ovn_lflow::actions;

/// Each input parses to its expected form and prerequisites, or fails with
/// actions.c's message; what parses reformats identically after a reparse
/// (test-ovn.c's "bad reformat" check).
#[test]
fn action_parsing() {
    let symtab = common::symtab();
    let opts = common::opt_tables();
    let pp = common::action_params(&symtab, &opts);
    let mut failures = Vec::new();
    for (input, expect) in cases::ACTIONS {
        let got = actions::parse(input, &pp);
        let ok = match (&got, expect) {
            (Ok(p), Expect::Ok(fmt, pre)) => {
                let printed = p.actions.to_string();
                let prereqs = p.prereqs.as_ref().map(|e| e.to_string());
                let again = actions::parse(&printed, &pp).map(|q| q.actions.to_string());
                printed == fmt.unwrap_or(input)
                    && prereqs.as_deref() == *pre
                    && again.as_deref() == Ok(printed.as_str())
            }
            (Err(e), Expect::Err(m)) => e.to_string() == *m,
            _ => false,
        };
        if !ok {
            let got = match &got {
                Ok(p) => format!(
                    "Ok: {} / prereqs {}",
                    p.actions,
                    p.prereqs.as_ref().map_or("-".into(), |e| e.to_string())
                ),
                Err(e) => format!("Err: {e}"),
            };
            let want = match expect {
                Expect::Ok(f, p) => {
                    format!("Ok: {} / prereqs {}", f.unwrap_or(input), p.unwrap_or("-"))
                }
                Expect::Err(m) => format!("Err: {m}"),
            };
            failures.push(format!("input: {input}\n  want {want}\n   got {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(cases::ACTIONS.len(), 418);
}
