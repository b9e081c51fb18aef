//! Every vendored conformance scenario replays to its golden trace.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/conformance")
}

/// Numbers compare by value (`1 == 1.0`), as compare.py does.
fn comparable(value: Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().map(Value::from).unwrap_or(Value::Number(n)),
        Value::Array(items) => Value::Array(items.into_iter().map(comparable).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, comparable(v))).collect()),
        other => other,
    }
}

fn parse_lines(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| comparable(serde_json::from_str(l).unwrap())).collect()
}

fn first_difference(expected: &[Value], actual: &[Value]) -> Option<String> {
    for (index, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e != a {
            return Some(format!("line {}:\n  expected: {e}\n  actual:   {a}", index + 1));
        }
    }
    (expected.len() != actual.len())
        .then(|| format!("line count: expected {}, actual {}", expected.len(), actual.len()))
}

fn check_level(prefix: &str) {
    check_dir(&fixtures(), prefix);
}

fn check_dir(fixtures: &Path, prefix: &str) {
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(fixtures.join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
        .collect();
    scenarios.sort();
    assert!(!scenarios.is_empty(), "no {prefix} scenarios vendored");
    let mut failures = Vec::new();
    for path in &scenarios {
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let golden = std::fs::read_to_string(fixtures.join("golden").join(format!("{name}.jsonl"))).unwrap();
        match pi_testkit::replay::replay_file(path) {
            Ok(trace) => {
                if let Some(diff) = first_difference(&parse_lines(&golden), &parse_lines(&trace)) {
                    failures.push(format!("{name}: {diff}"));
                }
            }
            Err(error) => failures.push(format!("{name}: {error}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios differ:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
}

#[test]
fn loop_scenarios_match_goldens() {
    check_level("loop-");
}

/// Our own scenarios, with goldens from the reference runner.
#[test]
fn extra_scenarios_match_goldens() {
    check_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/conformance-extra"), "x-");
}

#[test]
fn agent_scenarios_match_goldens() {
    check_level("agent-");
}

/// The vendored copies equal `../shared/conformance` when it is present.
#[test]
fn vendored_fixtures_have_not_drifted() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance");
    if !shared.exists() {
        eprintln!("../shared/conformance not found; drift check skipped");
        return;
    }
    let mut drift = Vec::new();
    for dir in ["scenarios", "golden"] {
        for entry in std::fs::read_dir(shared.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let vendored = fixtures().join(dir).join(path.file_name().unwrap());
            if std::fs::read(&path).ok() != std::fs::read(&vendored).ok() {
                drift.push(vendored.display().to_string());
            }
        }
    }
    assert!(
        drift.is_empty(),
        "vendored conformance fixtures drifted (run `cargo xtask sync-fixtures`):\n{}",
        drift.join("\n")
    );
}

/// Every replayed trace obeys the event grammar (runs, turns, messages, tool executions).
#[test]
fn every_trace_obeys_the_event_grammar() {
    let dir = fixtures().join("scenarios");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let trace = pi_testkit::replay::replay_file(&path).unwrap();
        let events: Vec<pi_types::AgentEvent> = trace
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|record| record["kind"] == "event")
            .map(|record| serde_json::from_value(record["event"].clone()).unwrap())
            .collect();
        let runs = pi_testkit::grammar::check_runs(&events).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(runs >= 1, "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 27);
}
