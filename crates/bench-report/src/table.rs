//! Markdown tables: one row per parameter set, one column per switch and metric, each
//! cell the median over rounds with the min–max range.

use std::cmp::Ordering;

use serde_json::Value;

use crate::aggregate::{Aggregate, Stat};
use crate::raw::value_text;

/// One metric column.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Metric name in the raw records.
    pub name: &'static str,
    /// Column label, with its unit.
    pub label: &'static str,
    /// Decimals shown.
    pub decimals: usize,
}

/// The layout of one scenario's table.
#[derive(Debug, Clone, Copy)]
pub struct TableSpec {
    /// Scenario name in the raw records.
    pub scenario: &'static str,
    /// Parameter keys that make a row, in order (e.g. `frame_size`).
    pub rows: &'static [&'static str],
    /// Metric columns, repeated per switch.
    pub metrics: &'static [Metric],
    /// Ratio columns of medians: (numerator switch, denominator switch, metric).
    pub ratios: &'static [(&'static str, &'static str, &'static str)],
}

/// Switches in the order tables and plots show them; others follow by name.
pub const SWITCH_ORDER: &[&str] = &[
    "vswitchd",
    "vswitchd-nocache",
    "ovs",
    "limit",
    "testpmd",
    "criterion",
];

/// The switches present in `aggs`, in display order.
pub fn switches_of(aggs: &[&Aggregate]) -> Vec<String> {
    let mut v: Vec<String> = aggs.iter().map(|a| a.switch.clone()).collect();
    v.sort_by_key(|s| {
        (
            SWITCH_ORDER
                .iter()
                .position(|o| o == s)
                .unwrap_or(SWITCH_ORDER.len()),
            s.clone(),
        )
    });
    v.dedup();
    v
}

/// Orders parameter values: numbers ascending, then strings (so `imix` follows 1518).
pub fn cmp_values(a: &Value, b: &Value) -> Ordering {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => value_text(a).cmp(&value_text(b)),
    }
}

/// A number with `decimals` decimals; NaN as "–".
pub fn num(x: f64, decimals: usize) -> String {
    if x.is_nan() {
        "–".into()
    } else {
        format!("{x:.decimals$}")
    }
}

/// "median" or "median (min–max)" when the rounds differ.
pub fn cell(s: Option<&Stat>, decimals: usize) -> String {
    match s {
        None => "–".into(),
        Some(s) if s.n > 1 && num(s.min, decimals) != num(s.max, decimals) => format!(
            "{} ({}–{})",
            num(s.median, decimals),
            num(s.min, decimals),
            num(s.max, decimals)
        ),
        Some(s) => num(s.median, decimals),
    }
}

/// Renders the table of `spec` over the aggregates of its scenario; `None` when there
/// are none.
pub fn render(spec: &TableSpec, aggs: &[Aggregate]) -> Option<String> {
    let mine: Vec<&Aggregate> = aggs
        .iter()
        .filter(|a| a.scenario == spec.scenario)
        .collect();
    if mine.is_empty() {
        return None;
    }
    let switches = switches_of(&mine);
    let row_of = |a: &Aggregate| -> Vec<Value> {
        spec.rows
            .iter()
            .map(|k| a.params.get(*k).cloned().unwrap_or(Value::Null))
            .collect()
    };
    let mut rows: Vec<Vec<Value>> = mine.iter().map(|a| row_of(a)).collect();
    rows.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .map(|(x, y)| cmp_values(x, y))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    rows.dedup();

    let mut head: Vec<String> = spec.rows.iter().map(|r| r.replace('_', " ")).collect();
    for sw in &switches {
        for m in spec.metrics {
            head.push(format!("{sw} {}", m.label));
        }
    }
    for (n, d, m) in spec.ratios {
        head.push(format!("{n}/{d} {}", short(m)));
    }
    let mut out = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for row in &rows {
        let at = |sw: &str| mine.iter().find(|a| a.switch == sw && &row_of(a) == row);
        let mut cells: Vec<String> = row.iter().map(value_text).collect();
        for sw in &switches {
            for m in spec.metrics {
                cells.push(cell(at(sw).and_then(|a| a.metrics.get(m.name)), m.decimals));
            }
        }
        for (n, d, m) in spec.ratios {
            let r = match (
                at(n).and_then(|a| a.median(m)),
                at(d).and_then(|a| a.median(m)),
            ) {
                (Some(x), Some(y)) if y != 0.0 => format!("{:.2}×", x / y),
                _ => "–".into(),
            };
            cells.push(r);
        }
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    Some(out)
}

fn short(metric: &str) -> &str {
    match metric {
        "mpps" => "Mpps",
        "gbps" => "Gbit/s",
        "cycles_per_packet" => "cycles/pkt",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::aggregate;
    use crate::raw::parse_lines;

    const SPEC: TableSpec = TableSpec {
        scenario: "pvp",
        rows: &["frame_size"],
        metrics: &[Metric {
            name: "mpps",
            label: "Mpps",
            decimals: 2,
        }],
        ratios: &[("vswitchd", "ovs", "mpps")],
    };

    #[test]
    fn table_rows_columns_ranges_and_ratio() {
        let text = r#"
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":"imix"},"metrics":{"mpps":1.0}}
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":1518},"metrics":{"mpps":1.0}}
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":64},"metrics":{"mpps":3.0}}
{"scenario":"pvp","switch":"ovs","round":2,"params":{"frame_size":64},"metrics":{"mpps":5.0}}
{"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":64},"metrics":{"mpps":6.0}}
{"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":1518},"metrics":{"mpps":2.0}}
{"scenario":"other","switch":"x","round":1,"params":{},"metrics":{"mpps":9.0}}
"#;
        let aggs = aggregate(&parse_lines(text).unwrap());
        let t = render(&SPEC, &aggs).unwrap();
        let expected = "\
| frame size | vswitchd Mpps | ovs Mpps | vswitchd/ovs Mpps |
|---|---|---|---|
| 64 | 6.00 | 4.00 (3.00–5.00) | 1.50× |
| 1518 | 2.00 | 1.00 | 2.00× |
| imix | – | 1.00 | – |
";
        assert_eq!(t, expected);
    }

    #[test]
    fn no_rows_no_table() {
        assert!(render(&SPEC, &[]).is_none());
    }

    #[test]
    fn switch_order_known_first() {
        let text = r#"
{"scenario":"s","switch":"zeta","metrics":{"a":1}}
{"scenario":"s","switch":"ovs","metrics":{"a":1}}
{"scenario":"s","switch":"alpha","metrics":{"a":1}}
{"scenario":"s","switch":"vswitchd","metrics":{"a":1}}
"#;
        let aggs = aggregate(&parse_lines(text).unwrap());
        let refs: Vec<&Aggregate> = aggs.iter().collect();
        assert_eq!(switches_of(&refs), ["vswitchd", "ovs", "alpha", "zeta"]);
    }
}
