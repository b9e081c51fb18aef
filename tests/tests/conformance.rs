//! Every vendored conformance scenario replays to its golden trace.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/conformance")
}

fn check_level(prefix: &str) {
    check_dir(&fixtures(), prefix);
}

fn check_dir(fixtures: &Path, prefix: &str) {
    let replay = |path: &Path| pi_testkit::replay::replay_file(path).map_err(|e| e.to_string());
    match pi_integration_tests::check_scenarios(fixtures, prefix, &replay, &|v| v) {
        Ok(count) => assert!(count > 0, "no {prefix} scenarios vendored"),
        Err(failures) => panic!("{failures}"),
    }
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
