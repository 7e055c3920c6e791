//! Fuzz target: arbitrary bytes → JSON → `Datum` for each of a set of
//! column types → JSON → `Datum` gives the same datum, and nothing panics
//! (decoding, constraint checks, update2 differences).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ovsdb::{AtomicType as T, ColumnType, Datum};
use serde_json::{json, Value};

fn column_types() -> &'static [ColumnType] {
    static TYPES: OnceLock<Vec<ColumnType>> = OnceLock::new();
    TYPES.get_or_init(|| {
        let mut v = Vec::new();
        for t in [T::Integer, T::Real, T::Boolean, T::String, T::Uuid] {
            v.push(ColumnType::scalar(t));
            v.push(ColumnType::set(t, 0, Some(1)));
            v.push(ColumnType::set(t, 0, None));
        }
        v.push(ColumnType::set(T::Integer, 1, Some(3)));
        for (k, val) in [(T::String, T::String), (T::Integer, T::Real), (T::Uuid, T::Boolean), (T::String, T::Uuid)] {
            v.push(ColumnType::map(k, val));
        }
        for t in [
            json!({"key": {"type": "string", "enum": ["set", ["a", "b"]]}, "min": 0, "max": 1}),
            json!({"key": {"type": "integer", "minInteger": 1, "maxInteger": 4095}}),
            json!({"key": {"type": "string", "minLength": 1, "maxLength": 3}, "value": "integer", "min": 0, "max": 2}),
        ] {
            v.push(ColumnType::from_json(&t).expect("a valid type"));
        }
        v
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // The bytes may also be a column type.
    let _ = ColumnType::from_json(&v);
    for t in column_types() {
        let _ = t.describe();
        if let Ok(d) = Datum::from_json(&v, t) {
            let j = d.to_json();
            let again = Datum::from_json(&j, t)
                .unwrap_or_else(|e| panic!("{j} does not decode again as {t:?}: {e}"));
            assert_eq!(again, d, "{j}");
            let _ = t.check(&d);
            let _ = d.to_string();
            // update2: applying the difference from the default gives the value.
            let default = Datum::default_of(t);
            let mut applied = default.clone();
            if let Some(diff) = Datum::diff(&default, &d, t) {
                applied.apply_diff(&diff, t);
            }
            assert_eq!(applied, d);
        }
        if let Ok(diff) = Datum::from_json_unbounded(&v, t) {
            let mut d = Datum::default_of(t);
            d.apply_diff(&diff, t);
            let _ = t.check(&d);
        }
    }
});
