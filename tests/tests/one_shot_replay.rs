//! The classifier and image-generation cases of `fixtures/providers-extra` (`entry: "classify"`
//! / `"generateImages"`, goldens printed by the oracle's runner at pi-ai 1.6.1): at least six per
//! API, and beyond the compared core subset (which `provider_replay.rs` checks for the whole
//! set), every request of a case equal to the reference's, path and whole body, in order.
//! llama.cpp's cases make several requests (`responses`), so this is where their tokenize,
//! template and completion bodies are pinned.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use pi_testkit::provider_replay::replay_case;
use pi_testkit::provider_replay_compare::{compare_traces, first_diff};
use serde_json::Value;

const ONE_SHOT_APIS: [&str; 6] = [
    "typesafe-system-one",
    "cloudflare-workers-ai-system-one",
    "openai-decisions",
    "pi-decision",
    "llama-cpp-classify",
    "openrouter-images",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/providers-extra")
}

fn cases(api: &str) -> Vec<(String, PathBuf, PathBuf)> {
    let mut out: Vec<_> = std::fs::read_dir(root().join("cases").join(api))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|case| {
            let stem = case.file_stem().unwrap().to_string_lossy().into_owned();
            let golden = root().join("golden").join(api).join(format!("{stem}.jsonl"));
            (format!("{api}/{stem}"), case, golden)
        })
        .collect();
    out.sort();
    out
}

fn requests(trace: &str) -> Vec<Value> {
    trace
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["kind"] == "request")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_one_shot_case_matches_its_golden_request_for_request() {
    let mut failures = Vec::new();
    for api in ONE_SHOT_APIS {
        let cases = cases(api);
        assert!(cases.len() >= 6, "{api}: {} cases, at least 6 wanted", cases.len());
        for (name, case, golden) in cases {
            let expected = std::fs::read_to_string(&golden).unwrap_or_else(|_| panic!("golden for {name}"));
            let actual = replay_case(&case).await.unwrap_or_else(|e| panic!("{name}: {e}"));
            if let Err(diff) = compare_traces(&expected, &actual) {
                failures.push(format!("{name}: {diff}"));
                continue;
            }
            let (want, got) = (requests(&expected), requests(&actual));
            if want.len() != got.len() {
                failures.push(format!("{name}: {} requests expected, {} sent", want.len(), got.len()));
                continue;
            }
            for (index, (want, got)) in want.iter().zip(&got).enumerate() {
                for key in ["method", "path", "body"] {
                    if let Some((path, x, y)) = first_diff(&want[key], &got[key], &format!("$[{index}].{key}")) {
                        failures.push(format!("{name}: {path}: expected {x}, got {y}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
