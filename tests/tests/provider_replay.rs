//! Replays every vendored provider case against our adapters on a loopback server and compares
//! the trace with the reference oracle's golden, with the rules of the oracle's `compare.py`:
//! `fixtures/providers` (the oracle's public cases and pi-rs's own for the first four APIs) and
//! `fixtures/providers-extra` (cases for the other six APIs, goldens printed by the oracle's
//! runner). A second pass compares the whole request body (not only the core subset), which
//! pins the thinking/reasoning request fields to what pi-ai sends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use pi_testkit::provider_replay::replay_case;
use pi_testkit::provider_replay_compare::{compare_traces, first_diff};
use serde_json::Value;

fn fixtures(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(set)
}

/// The cases of one fixture set: `(api/name, case, golden)`.
fn cases_of(set: &str, at_least: usize) -> Vec<(String, PathBuf, PathBuf)> {
    let root = fixtures(set);
    let mut out = Vec::new();
    for api in std::fs::read_dir(root.join("cases")).unwrap() {
        let api = api.unwrap().path();
        if !api.is_dir() {
            continue;
        }
        for case in std::fs::read_dir(&api).unwrap() {
            let case = case.unwrap().path();
            if case.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let api_name = api.file_name().unwrap().to_string_lossy().into_owned();
            let stem = case.file_stem().unwrap().to_string_lossy().into_owned();
            let golden = root.join("golden").join(&api_name).join(format!("{stem}.jsonl"));
            out.push((format!("{api_name}/{stem}"), case, golden));
        }
    }
    out.sort();
    assert!(out.len() >= at_least, "{set}: vendored cases missing: {}", out.len());
    out
}

fn cases() -> Vec<(String, PathBuf, PathBuf)> {
    cases_of("providers", 44)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_matches_its_golden() {
    check_set(cases()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_extra_api_case_matches_its_golden() {
    // At least 8 cases for each of the six APIs beyond the first four.
    check_set(cases_of("providers-extra", 48)).await;
}

async fn check_set(cases: Vec<(String, PathBuf, PathBuf)>) {
    let mut failures = Vec::new();
    let total = cases.len();
    for (name, case, golden) in cases {
        let expected = std::fs::read_to_string(&golden).unwrap_or_else(|_| panic!("golden for {name}"));
        let actual = match replay_case(&case).await {
            Ok(trace) => trace,
            Err(error) => {
                failures.push(format!("FAIL {name}: {error}"));
                continue;
            }
        };
        if let Err(diff) = compare_traces(&expected, &actual) {
            failures.push(format!("FAIL {name}: {diff}"));
        }
    }
    println!("{} passed, {} failed", total - failures.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_match_the_reference_exactly() {
    let mut failures = Vec::new();
    for (name, case, golden) in cases().into_iter().chain(cases_of("providers-extra", 48)) {
        let expected = std::fs::read_to_string(&golden).unwrap();
        let expected: Value = serde_json::from_str(expected.lines().next().unwrap()).unwrap();
        let actual = replay_case(&case).await.unwrap();
        let actual: Value = serde_json::from_str(actual.lines().next().unwrap()).unwrap();
        assert_eq!(actual["kind"], expected["kind"], "{name}");
        if expected["kind"] != "request" {
            continue;
        }
        if let Some((path, x, y)) = first_diff(&expected["body"], &actual["body"], "$.body") {
            failures.push(format!("{name}: {path}: expected {x}, got {y}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
