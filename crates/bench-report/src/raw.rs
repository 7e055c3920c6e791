//! The raw figures: one JSON object per line, as the benchmark scripts write them
//! (`--json FILE` of `bench-pvp.sh`, `bench-afxdp.sh`, `bench-overlay.sh`, and the
//! criterion summary of `bench-report.sh`).
//!
//! ```json
//! {"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":64,"flows":1},
//!  "metrics":{"mpps":7.1,"gbps":3.6,"drops":0,"cycles_per_packet":214.0}}
//! {"scenario":"latency","switch":"limit","not_run":"testpmd 22.11 cannot ..."}
//! ```
//!
//! A metric the script could not read is `null`; a record with `not_run` says why a
//! scenario (or one switch in it) has no figures.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One measurement (or one "not run" note) of one switch in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Scenario name: `pvp`, `flows`, `acl`, `afxdp`, `tcp`, `latency`, `scale`.
    pub scenario: String,
    /// The switch (or device under test) measured: `vswitchd`, `ovs`, `limit`, ….
    #[serde(default)]
    pub switch: String,
    /// Round number, from 1 (0 for records outside the rounds, e.g. criterion).
    #[serde(default)]
    pub round: u32,
    /// What was varied: frame size in bytes, flow count, direction, ….
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// The figures, in the units their names carry (`mpps`, `gbps`, `cycles_per_packet`,
    /// `ns_per_packet`, `cpu_s_per_gb`, `p99_us`, …); `None` where not measurable.
    #[serde(default)]
    pub metrics: BTreeMap<String, Option<f64>>,
    /// Why there are no figures, when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
}

impl Record {
    /// The parameters as one stable, readable key: `flows=1 frame_size=64`.
    pub fn params_key(&self) -> String {
        params_key(&self.params)
    }
}

/// `k=v` pairs sorted by key, space-separated; strings unquoted.
pub fn params_key(params: &BTreeMap<String, Value>) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={}", value_text(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A parameter value as text: strings without quotes, numbers as JSON writes them.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Parses JSON lines; blank lines and lines starting with `#` are skipped.
///
/// # Errors
/// A line that is not a valid record, with its line number.
pub fn parse_lines(text: &str) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let r: Record =
            serde_json::from_str(line).with_context(|| format!("raw line {}: {line}", i + 1))?;
        if r.scenario.is_empty() {
            bail!("raw line {}: empty scenario", i + 1);
        }
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_measurement_and_not_run() {
        let text = r#"
# comment
{"scenario":"pvp","switch":"ovs","round":2,"params":{"frame_size":64,"flows":1},"metrics":{"mpps":3.5,"cycles_per_packet":null}}

{"scenario":"latency","switch":"limit","not_run":"no rate control"}
"#;
        let r = parse_lines(text).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].switch, "ovs");
        assert_eq!(r[0].round, 2);
        assert_eq!(r[0].metrics["mpps"], Some(3.5));
        assert_eq!(r[0].metrics["cycles_per_packet"], None);
        assert_eq!(r[0].params_key(), "flows=1 frame_size=64");
        assert_eq!(r[1].not_run.as_deref(), Some("no rate control"));
        assert!(r[1].metrics.is_empty());
    }

    #[test]
    fn string_params_are_unquoted() {
        let r = parse_lines(r#"{"scenario":"tcp","params":{"topology":"geneve","streams":1}}"#)
            .unwrap();
        assert_eq!(r[0].params_key(), "streams=1 topology=geneve");
    }

    #[test]
    fn bad_line_names_its_number() {
        let e = parse_lines("{\"scenario\":\"a\"}\nnot json\n").unwrap_err();
        assert!(format!("{e:#}").contains("raw line 2"), "{e:#}");
        let e = parse_lines("{\"scenario\":\"\"}").unwrap_err();
        assert!(format!("{e:#}").contains("empty scenario"));
    }
}
