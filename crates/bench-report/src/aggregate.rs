//! Rounds folded into medians and ranges, per scenario, switch and parameter set.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::raw::Record;

/// Median and range of one metric over the rounds that measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Rounds with a value.
    pub n: usize,
}

impl Stat {
    /// The statistic of `values`; `None` when there are none. NaNs are ignored.
    pub fn of(values: &[f64]) -> Option<Stat> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }
}

/// One switch's figures for one parameter set of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    /// Scenario name.
    pub scenario: String,
    /// Switch name.
    pub switch: String,
    /// Parameters (as in the raw records).
    pub params: BTreeMap<String, Value>,
    /// Per metric name, the statistic over rounds (metrics never measured are absent).
    pub metrics: BTreeMap<String, Stat>,
}

impl Aggregate {
    /// The median of `metric`, if measured.
    pub fn median(&self, metric: &str) -> Option<f64> {
        self.metrics.get(metric).map(|s| s.median)
    }

    /// Parameter `key` as a number, if it is one.
    pub fn param_f64(&self, key: &str) -> Option<f64> {
        self.params.get(key).and_then(Value::as_f64)
    }
}

/// Groups measurements (records without `not_run`) by scenario, switch and parameters,
/// in that order, and folds each metric over the rounds.
pub fn aggregate(records: &[Record]) -> Vec<Aggregate> {
    // (scenario, switch, parameters) → (the group's first record, values per metric)
    type Key = (String, String, String);
    let mut groups: BTreeMap<Key, (&Record, BTreeMap<String, Vec<f64>>)> = BTreeMap::new();
    for r in records.iter().filter(|r| r.not_run.is_none()) {
        let key = (r.scenario.clone(), r.switch.clone(), r.params_key());
        let entry = groups.entry(key).or_insert_with(|| (r, BTreeMap::new()));
        for (m, v) in &r.metrics {
            let values = entry.1.entry(m.clone()).or_default();
            if let Some(v) = v {
                values.push(*v);
            }
        }
    }
    groups
        .into_values()
        .map(|(first, metrics)| Aggregate {
            scenario: first.scenario.clone(),
            switch: first.switch.clone(),
            params: first.params.clone(),
            metrics: metrics
                .into_iter()
                .filter_map(|(m, v)| Stat::of(&v).map(|s| (m, s)))
                .collect(),
        })
        .collect()
}

/// Finds the aggregate of `scenario` and `switch` whose parameters include every
/// `(key, value)` of `want` (values compared as text).
pub fn find<'a>(
    aggs: &'a [Aggregate],
    scenario: &str,
    switch: &str,
    want: &[(&str, &str)],
) -> Option<&'a Aggregate> {
    aggs.iter().find(|a| {
        a.scenario == scenario
            && a.switch == switch
            && want.iter().all(|(k, v)| match a.params.get(*k) {
                Some(x) => crate::raw::value_text(x) == *v,
                // Figures from before packed virtqueues were measured name no ring:
                // they are split rings.
                None => *k == "ring" && *v == "split",
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::parse_lines;

    #[test]
    fn median_odd_even_and_nan() {
        let s = Stat::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        let s = Stat::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        let s = Stat::of(&[f64::NAN, 5.0]).unwrap();
        assert_eq!((s.median, s.n), (5.0, 1));
        assert_eq!(Stat::of(&[]), None);
    }

    #[test]
    fn rounds_fold_per_switch_and_params() {
        let text = r#"
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":64},"metrics":{"mpps":3.0}}
{"scenario":"pvp","switch":"ovs","round":2,"params":{"frame_size":64},"metrics":{"mpps":5.0}}
{"scenario":"pvp","switch":"ovs","round":3,"params":{"frame_size":64},"metrics":{"mpps":4.0,"cycles_per_packet":null}}
{"scenario":"pvp","switch":"ovs","round":1,"params":{"frame_size":1518},"metrics":{"mpps":1.0}}
{"scenario":"pvp","switch":"vswitchd","round":1,"params":{"frame_size":64},"metrics":{"mpps":7.0}}
{"scenario":"pvp","switch":"limit","not_run":"x"}
"#;
        let aggs = aggregate(&parse_lines(text).unwrap());
        assert_eq!(aggs.len(), 3);
        let a = find(&aggs, "pvp", "ovs", &[("frame_size", "64")]).unwrap();
        let s = a.metrics["mpps"];
        assert_eq!((s.median, s.min, s.max, s.n), (4.0, 3.0, 5.0, 3));
        assert!(!a.metrics.contains_key("cycles_per_packet"));
        assert_eq!(
            find(&aggs, "pvp", "ovs", &[("frame_size", "1518")])
                .unwrap()
                .median("mpps"),
            Some(1.0)
        );
        assert!(find(&aggs, "pvp", "limit", &[]).is_none());
    }
}
