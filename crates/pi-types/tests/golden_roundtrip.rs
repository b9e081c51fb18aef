//! Every message and event the reference produced (vendored goldens) deserializes into the
//! typed structs and serializes back to the same JSON.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use pi_types::{AgentEvent, AgentMessage, AssistantMessage, AssistantMessageEvent};
use serde_json::{Map, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(jsonl_files(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Numbers by value, object key order ignored (IndexMap equality).
fn comparable(value: Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().map(Value::from).unwrap_or(Value::Number(n)),
        Value::Array(items) => Value::Array(items.into_iter().map(comparable).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, comparable(v))).collect()),
        other => other,
    }
}

fn roundtrip<T: serde::de::DeserializeOwned + serde::Serialize>(value: &Value, what: &str) -> Value {
    let typed: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{what}: {e}\n{value}"));
    serde_json::to_value(&typed).unwrap()
}

#[test]
fn provider_golden_events_and_results_roundtrip() {
    let files = jsonl_files(&fixtures().join("providers/golden"));
    assert!(!files.is_empty());
    let mut checked = 0;
    for file in files {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            let (value, back) = match record["kind"].as_str() {
                Some("event") => {
                    let value = record["event"].clone();
                    (value.clone(), roundtrip::<AssistantMessageEvent>(&value, &file.display().to_string()))
                }
                Some("result") => {
                    let value = record["message"].clone();
                    (value.clone(), roundtrip::<AssistantMessage>(&value, &file.display().to_string()))
                }
                _ => continue,
            };
            assert_eq!(comparable(back), comparable(value), "{}", file.display());
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} lines checked");
}

/// Conformance goldens drop `usage`; fill in a default one so assistant messages parse.
fn with_default_usage(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut map: Map<String, Value> = map.into_iter().map(|(k, v)| (k, with_default_usage(v))).collect();
            if map.get("role").and_then(Value::as_str) == Some("assistant") && !map.contains_key("usage") {
                map.insert("usage".into(), serde_json::to_value(pi_types::Usage::default()).unwrap());
            }
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(with_default_usage).collect()),
        other => other,
    }
}

/// The conformance normalization: drop `usage`/`durationMs`, zero `timestamp`.
fn normalized(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| k != "usage" && k != "durationMs")
                .map(|(k, v)| if k == "timestamp" { (k, Value::from(0)) } else { (k, normalized(v)) })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(normalized).collect()),
        other => other,
    }
}

fn check_conformance<T: serde::de::DeserializeOwned + serde::Serialize>(value: &Value, what: &str) {
    let back = roundtrip::<T>(&with_default_usage(value.clone()), what);
    assert_eq!(comparable(normalized(back)), comparable(value.clone()), "{what}");
}

#[test]
fn conformance_golden_messages_and_events_roundtrip() {
    let files = jsonl_files(&fixtures().join("conformance/golden"));
    assert!(!files.is_empty());
    let mut checked = 0;
    for file in files {
        let what = file.display().to_string();
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            match record["kind"].as_str() {
                Some("event") => check_conformance::<AgentEvent>(&record["event"], &what),
                Some("request" | "result" | "state") => {
                    for message in record["messages"].as_array().unwrap() {
                        check_conformance::<AgentMessage>(message, &what);
                    }
                }
                _ => continue,
            }
            checked += 1;
        }
    }
    assert!(checked > 500, "only {checked} lines checked");
}
