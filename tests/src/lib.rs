//! Cross-crate integration tests for pi-rs live in `tests/tests/`; fixtures in `tests/fixtures/`.
//!
//! This library holds the one comparison of replayed traces with the reference's goldens that
//! every conformance test uses (whichever provider or transport the replay goes through).

use std::path::{Path, PathBuf};

pub mod docs;

use serde_json::Value;

/// Numbers compare by value (`1 == 1.0`), as compare.py does.
pub fn comparable(value: Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().map_or(Value::Number(n), Value::from),
        Value::Array(items) => Value::Array(items.into_iter().map(comparable).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, comparable(v))).collect()),
        other => other,
    }
}

/// The JSON lines of a trace, comparable; `adjust` sees every value first (both sides).
pub fn trace_lines(text: &str, adjust: &dyn Fn(Value) -> Value) -> Result<Vec<Value>, String> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map(|v| comparable(adjust(v))).map_err(|e| e.to_string()))
        .collect()
}

/// Where two traces first differ, if they do.
pub fn first_difference(expected: &[Value], actual: &[Value]) -> Option<String> {
    for (index, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e != a {
            return Some(format!("line {}:\n  expected: {e}\n  actual:   {a}", index + 1));
        }
    }
    (expected.len() != actual.len())
        .then(|| format!("line count: expected {}, actual {}", expected.len(), actual.len()))
}

/// Replay every scenario of `dir/scenarios` whose name starts with `prefix` and compare it with
/// `dir/golden`: the number of scenarios, or one line per scenario that differs.
pub fn check_scenarios(
    dir: &Path,
    prefix: &str,
    replay: &dyn Fn(&Path) -> Result<String, String>,
    adjust: &dyn Fn(Value) -> Value,
) -> Result<usize, String> {
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(dir.join("scenarios"))
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .filter(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
        .collect();
    scenarios.sort();
    let mut failures = Vec::new();
    for path in &scenarios {
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        let outcome = std::fs::read_to_string(dir.join("golden").join(format!("{name}.jsonl")))
            .map_err(|e| e.to_string())
            .and_then(|golden| Ok((golden, replay(path)?)))
            .and_then(|(golden, trace)| Ok((trace_lines(&golden, adjust)?, trace_lines(&trace, adjust)?)));
        match outcome {
            Ok((expected, actual)) => {
                if let Some(diff) = first_difference(&expected, &actual) {
                    failures.push(format!("{name}: {diff}"));
                }
            }
            Err(error) => failures.push(format!("{name}: {error}")),
        }
    }
    if failures.is_empty() {
        Ok(scenarios.len())
    } else {
        Err(format!("{} of {} scenarios differ:\n{}", failures.len(), scenarios.len(), failures.join("\n")))
    }
}
