//! Criterion's saved estimates as raw records: `target/criterion/GROUP/FUNCTION/VALUE/`
//! holds `new/benchmark.json` (ids, throughput) and `new/estimates.json` (ns per
//! iteration). The scale bench names its ids `{P}ports/{F}flows`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::raw::Record;

/// Reads every benchmark under `group_dir` whose function id is `{P}ports` and value
/// `{F}flows`, and returns one `scale` record each with `ns_per_packet` = criterion's
/// median ns per iteration ÷ the elements per iteration (its `Throughput::Elements`).
///
/// # Errors
/// Unreadable directories or JSON files.
pub fn scale_records(group_dir: &Path) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(group_dir)
        .with_context(|| format!("criterion results {}", group_dir.display()))?;
    let mut dirs: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    dirs.sort();
    for func in dirs.iter().filter(|p| p.is_dir()) {
        let mut vals: Vec<_> = std::fs::read_dir(func)?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .collect();
        vals.sort();
        for val in vals {
            let bench = val.join("new/benchmark.json");
            let est = val.join("new/estimates.json");
            if !bench.exists() || !est.exists() {
                continue;
            }
            if let Some(r) = record(&read_json(&bench)?, &read_json(&est)?) {
                out.push(r);
            }
        }
    }
    Ok(out)
}

fn read_json(p: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}", p.display()))
}

/// One record from a `benchmark.json` and an `estimates.json`; `None` when the ids do
/// not follow `{P}ports` / `{F}flows`.
pub fn record(bench: &Value, est: &Value) -> Option<Record> {
    let ports: u64 = bench["function_id"]
        .as_str()?
        .strip_suffix("ports")?
        .parse()
        .ok()?;
    let flows: u64 = bench["value_str"]
        .as_str()?
        .strip_suffix("flows")?
        .parse()
        .ok()?;
    let per_iter = bench["throughput"]["Elements"].as_f64().unwrap_or(1.0);
    let median_ns = est["median"]["point_estimate"].as_f64()?;
    let mut params = BTreeMap::new();
    params.insert("ports".into(), Value::from(ports));
    params.insert("flows".into(), Value::from(flows));
    let mut metrics = BTreeMap::new();
    metrics.insert("ns_per_packet".into(), Some(median_ns / per_iter));
    Some(Record {
        scenario: "scale".into(),
        switch: "vswitchd".into(),
        round: 0,
        params,
        metrics,
        not_run: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_and_per_packet_time() {
        let bench = json!({"group_id": "scale", "function_id": "16ports", "value_str": "1000flows",
                           "throughput": {"Elements": 32}});
        let est = json!({"median": {"point_estimate": 1600.0}});
        let r = record(&bench, &est).unwrap();
        assert_eq!(r.params_key(), "flows=1000 ports=16");
        assert_eq!(r.metrics["ns_per_packet"], Some(50.0));
        let other = json!({"function_id": "64B", "value_str": "1mac"});
        assert!(record(&other, &est).is_none());
    }

    #[test]
    fn walks_the_group_directory() {
        let dir = std::env::temp_dir().join(format!("bench-report-crit-{}", std::process::id()));
        let d = dir.join("2ports/100000flows/new");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("benchmark.json"),
            r#"{"function_id":"2ports","value_str":"100000flows","throughput":{"Elements":32}}"#,
        )
        .unwrap();
        std::fs::write(
            d.join("estimates.json"),
            r#"{"median":{"point_estimate":3200.0}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("report")).unwrap();
        let r = scale_records(&dir).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].metrics["ns_per_packet"], Some(100.0));
        std::fs::remove_dir_all(dir).unwrap();
        assert!(scale_records(Path::new("/nonexistent/criterion")).is_err());
    }
}
