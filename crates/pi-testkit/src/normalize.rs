//! Trace normalization: the canonical JSON text of a trace line.
//!
//! Every object member named `timestamp` becomes `0`, members named `usage` or
//! `durationMs` are removed, object keys are sorted (by UTF-16 code units) and the text is
//! compact JavaScript `JSON.stringify` output.

use serde_json::{Map, Value};

/// Sort object keys recursively (UTF-16 code-unit order, as JavaScript's default sort).
pub fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().map(|(k, v)| (k, sort_keys(v))).collect();
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            Value::Object(entries.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

/// Apply the conformance normalization (timestamps, dropped keys) and sort keys.
pub fn normalize(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map
                .into_iter()
                .filter(|(k, _)| k != "usage" && k != "durationMs")
                .map(|(k, v)| if k == "timestamp" { (k, Value::from(0)) } else { (k, normalize(v)) })
                .collect();
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            Value::Object(entries.into_iter().collect::<Map<_, _>>())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(normalize).collect()),
        other => other,
    }
}

/// The canonical line for any serializable record.
pub fn canonical_line(record: &impl serde::Serialize) -> String {
    let value = serde_json::to_value(record).unwrap_or(Value::Null);
    pi_types::json::stringify(&normalize(value))
}

/// Compact JSON with sorted keys and no other normalization (the scenarios' `echoArgs`).
pub fn sorted_json(value: &Value) -> String {
    pi_types::json::stringify(&sort_keys(value.clone()))
}
