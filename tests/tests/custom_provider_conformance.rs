//! A provider crate written on the public `AssistantMessageBuilder` alone
//! (`examples/custom-provider`) replays every conformance scenario exactly as the faux provider
//! does: the scenario runner streams the scenario's scripted responses through it instead of the
//! faux provider, in pieces of the same size, and the traces equal the reference's goldens
//! (the public scenarios and our own).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use custom_provider::ScriptedProvider;
use pi_types::{AssistantMessage, StreamFn};
use serde_json::Value;

fn scripted(responses: Vec<AssistantMessage>, token_size: usize) -> Arc<dyn StreamFn> {
    // The faux provider streams `4 × tokenSize` UTF-16 units per delta.
    let provider = ScriptedProvider::new(token_size.saturating_mul(4));
    for response in responses {
        provider.push_reply(response);
    }
    Arc::new(provider)
}

/// JSON lines, numbers compared by value (`1 == 1.0`) as compare.py does.
fn lines(text: &str) -> Result<Vec<Value>, String> {
    fn comparable(value: Value) -> Value {
        match value {
            Value::Number(n) => n.as_f64().map_or(Value::Number(n), Value::from),
            Value::Array(items) => Value::Array(items.into_iter().map(comparable).collect()),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, comparable(v))).collect()),
            other => other,
        }
    }
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map(comparable).map_err(|e| e.to_string()))
        .collect()
}

fn check(dir: &Path) -> Result<usize, String> {
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(dir.join("scenarios"))
        .map_err(|e| e.to_string())?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    scenarios.sort();
    let mut failures = Vec::new();
    for path in &scenarios {
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        let golden = std::fs::read_to_string(dir.join("golden").join(format!("{name}.jsonl")))
            .map_err(|e| format!("{name}: {e}"))?;
        let trace = pi_testkit::replay::replay_file_with(path, &scripted).map_err(|e| format!("{name}: {e}"))?;
        // The one text that is each provider's own wording: the error of an exhausted script.
        let trace = trace.replace("No more scripted replies queued", "No more faux responses queued");
        let (expected, actual) = (lines(&golden)?, lines(&trace)?);
        if let Some(line) = (0..expected.len().max(actual.len())).find(|&i| expected.get(i) != actual.get(i)) {
            failures.push(format!(
                "{name}, line {}:\n  expected: {:?}\n  actual:   {:?}",
                line + 1,
                expected.get(line),
                actual.get(line)
            ));
        }
    }
    if failures.is_empty() {
        Ok(scenarios.len())
    } else {
        Err(format!("{} of {} scenarios differ:\n{}", failures.len(), scenarios.len(), failures.join("\n")))
    }
}

#[test]
fn a_builder_provider_replays_the_public_scenarios_like_the_faux_provider() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for dir in ["conformance", "conformance-extra"] {
        match check(&fixtures.join(dir)) {
            Ok(count) => assert!(count > 0, "no scenarios in {dir}"),
            Err(failures) => panic!("{dir}: {failures}"),
        }
    }
}
