//! Replays every vendored provider case against our adapters on a loopback server and compares
//! the trace with the reference oracle's golden, with the rules of the oracle's `compare.py`:
//! `fixtures/providers` (the oracle's public cases and pi-rs's own for the first four APIs) and
//! `fixtures/providers-extra` (cases for the other six APIs, goldens printed by the oracle's
//! runner), and `fixtures/providers-real` (streams recorded from the live APIs, see
//! `docs/providers/real-streams.md`). A second pass compares the whole request body (not only the
//! core subset), which pins the thinking/reasoning request fields to what pi-ai sends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use pi_testkit::provider_replay::{replay_case, replay_case_general};
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

/// Real-stream cases where pi-rs deliberately differs from pi-ai 1.6.1: `(api/name, reason)`.
/// Such a case (and its `--split` sibling, whose reference golden is byte-identical) is compared
/// with `providers-real/golden-pi-rs/<api>/<name>.jsonl` instead of the reference golden, which
/// stays untouched. Every override must still differ from the reference golden (a stale one
/// fails), and every file under `golden-pi-rs` must be listed here.
const REAL_DIFFERENCES: &[(&str, &str)] = &[
    (
        "google-generative-ai/google--google-stream-no-args-tool-call",
        "streamed function-call arguments (partialArgs/willContinue pieces, empty functionCall terminators) \
         are merged into the calls they belong to: 3 read_screen calls with {id: A|B|C} instead of 12 calls, \
         9 of them nameless and empty",
    ),
    (
        "google-generative-ai/google--google-stream-tool-call-array-arguments-missing-terminal-function-call",
        "streamed function-call arguments are merged into their call: one writeItems call with both \
         operations instead of 15 calls, 14 of them nameless and empty (the last piece without \
         willContinue ends the call)",
    ),
];

/// The golden a real-stream case is compared with: the override when the case (or the one-write
/// case a `--split` case splits) is listed in [`REAL_DIFFERENCES`].
fn real_golden(name: &str, reference: &Path) -> PathBuf {
    let base = name.strip_suffix("--split").unwrap_or(name);
    if REAL_DIFFERENCES.iter().any(|(listed, _)| *listed == base) {
        fixtures("providers-real").join("golden-pi-rs").join(format!("{base}.jsonl"))
    } else {
        reference.to_path_buf()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_case_matches_its_golden() {
    let cases = cases_of("providers-real", 117);
    let mut listed = Vec::new();
    for (name, reason) in REAL_DIFFERENCES {
        assert!(!reason.is_empty(), "{name}: a deliberate difference needs its reason");
        let (_, _, reference) =
            cases.iter().find(|(n, _, _)| n == name).unwrap_or_else(|| panic!("{name}: no such case"));
        let ours = real_golden(name, reference);
        let ours_text = std::fs::read_to_string(&ours).unwrap_or_else(|_| panic!("override golden for {name}"));
        let reference_text = std::fs::read_to_string(reference).unwrap();
        assert!(
            compare_traces(&reference_text, &ours_text).is_err(),
            "{name}: the override golden no longer differs from the reference golden (stale override)"
        );
        // The override stands for the `--split` sibling only while their reference goldens agree.
        let split = format!("{name}--split");
        if let Some((_, _, split_reference)) = cases.iter().find(|(n, _, _)| *n == split) {
            assert_eq!(std::fs::read_to_string(split_reference).unwrap(), reference_text, "{split}: reference golden");
        }
        listed.push(ours);
    }
    let overrides = fixtures("providers-real").join("golden-pi-rs");
    if overrides.is_dir() {
        for api in std::fs::read_dir(&overrides).unwrap() {
            for file in std::fs::read_dir(api.unwrap().path()).unwrap() {
                let file = file.unwrap().path();
                assert!(listed.contains(&file), "{}: override golden not listed in REAL_DIFFERENCES", file.display());
            }
        }
    }
    let cases = cases.into_iter().map(|(name, case, golden)| {
        let golden = real_golden(&name, &golden);
        (name, case, golden)
    });
    check_set(cases.collect()).await;
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

/// The adapters' typed decodes and the driver's delta fast path are only faster ways to the same
/// events: every case, replayed with a provider-event hook (which sends each event through the
/// general path, parsed whole), gives the same trace (compared as the goldens are).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_streams_alike_on_the_general_path() {
    let mut failures = Vec::new();
    let sets = [cases(), cases_of("providers-extra", 48), cases_of("providers-real", 117)];
    let all: Vec<_> = sets.into_iter().flatten().collect();
    for (name, case, _) in &all {
        let fast = replay_case(case).await.unwrap_or_else(|e| format!("error: {e}"));
        let general = replay_case_general(case).await.unwrap_or_else(|e| format!("error: {e}"));
        if let Err(diff) = compare_traces(&general, &fast) {
            failures.push(format!("{name}: {diff}"));
        }
    }
    println!("{} cases, {} differ", all.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_match_the_reference_exactly() {
    check_request_bodies(cases().into_iter().chain(cases_of("providers-extra", 48)).collect()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_request_bodies_match_the_reference_exactly() {
    // The real set's goldens hold the whole request body pi-ai sent; the one-write cases suffice
    // (a `--split` case sends the same request).
    let cases = cases_of("providers-real", 117).into_iter().filter(|(name, _, _)| !name.ends_with("--split"));
    check_request_bodies(cases.collect()).await;
}

async fn check_request_bodies(cases: Vec<(String, PathBuf, PathBuf)>) {
    let mut failures = Vec::new();
    for (name, case, golden) in cases {
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
