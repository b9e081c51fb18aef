//! Trace comparison with the rules of the oracle's `compare.py`: request lines are reduced to
//! the compared core subset, values are compared as JSON (numbers by value, missing ≠ null),
//! and a JavaScript `JSON.parse` error clause in an expected string matches any non-empty
//! parser message of ours as long as the text around it is equal. A tool call's clock-based id
//! (`<prefix>_<13 digits>_<n>`, in any object whose `type` is `toolCall`) is compared as
//! `<prefix>_0_<n>` on both sides.
//! Beyond `compare.py`, a diagnostic's JavaScript stack trace and `details.timestampMs` clock are
//! not compared.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

const CORE_BODY_KEYS: [&str; 18] = [
    "model",
    "messages",
    "system",
    "input",
    "contents",
    "systemInstruction",
    "tools",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "generationConfig.maxOutputTokens",
    "inferenceConfig",              // bedrock-converse-stream
    "toolConfig",                   // bedrock-converse-stream
    "additionalModelRequestFields", // bedrock-converse-stream
    "context",                      // pi-messages
    "options",                      // pi-messages
];

/// A request line projected onto the compared core subset.
pub fn core_request(line: &Value) -> Value {
    let body = line.get("body");
    let core_body = match body {
        Some(Value::Object(map)) => {
            let mut out = Map::new();
            for key in CORE_BODY_KEYS {
                if let Some((parent, child)) = key.split_once('.') {
                    if let Some(v) = map.get(parent).and_then(|p| p.get(child)) {
                        out.insert(key.to_owned(), v.clone());
                    }
                } else if let Some(v) = map.get(key) {
                    out.insert(key.to_owned(), v.clone());
                }
            }
            Value::Object(out)
        }
        other => other.cloned().unwrap_or(Value::Null),
    };
    let headers = line.get("headers").cloned().unwrap_or(Value::Null);
    let content_type = match headers.get("content-type") {
        Some(Value::String(s)) => Value::String(s.split(';').next().unwrap_or("").trim().to_lowercase()),
        Some(other) => other.clone(),
        None => Value::Null,
    };
    let flag = |name: &str| Value::Bool(headers.get(name).is_some_and(pi_types::json::js::truthy));
    let mut query = Map::new();
    if let Some(alt) = line.get("query").and_then(|q| q.get("alt")) {
        query.insert("alt".into(), alt.clone());
    }
    serde_json::json!({
        "kind": "request",
        "method": line.get("method").cloned().unwrap_or(Value::Null),
        "path": line.get("path").cloned().unwrap_or(Value::Null),
        "query": query,
        "headers": {
            "content-type": content_type,
            "authorization": flag("authorization"),
            "x-api-key": flag("x-api-key"),
            "x-goog-api-key": flag("x-goog-api-key"),
            "api-key": flag("api-key"),
        },
        "body": core_body,
    })
}

fn engine_error() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        #[allow(clippy::expect_used)]
        Regex::new(
            r"(?:Unterminated string|Unexpected (?:token|end|non-whitespace)[^;]*?|Expected [^;]*?|Bad (?:control|escaped)[^;]*?) in JSON at position \d+(?: \(line \d+ column \d+\))?",
        )
        .expect("static pattern")
    })
}

fn engine_text_matches(expected: &str, actual: &str) -> bool {
    let Some(m) = engine_error().find(expected) else { return false };
    let (prefix, suffix) = (&expected[..m.start()], &expected[m.end()..]);
    actual.len() > prefix.len() + suffix.len() && actual.starts_with(prefix) && actual.ends_with(suffix)
}

/// The first difference: (JSON path, expected, actual); `None` when equal.
pub fn first_diff(expected: &Value, actual: &Value, path: &str) -> Option<(String, String, String)> {
    let show = |v: &Value| v.to_string();
    match (expected, actual) {
        (Value::String(a), Value::String(b)) if a == b || engine_text_matches(a, b) => None,
        (Value::Number(a), Value::Number(b)) => {
            (a.as_f64() != b.as_f64()).then(|| (path.to_owned(), show(expected), show(actual)))
        }
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let sub = format!("{path}.{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => {
                        if let Some(d) = first_diff(x, y, &sub) {
                            return Some(d);
                        }
                    }
                    (x, y) => {
                        let show_opt = |v: Option<&Value>| v.map_or_else(|| "<missing>".to_owned(), Value::to_string);
                        return Some((sub, show_opt(x), show_opt(y)));
                    }
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                if let Some(d) = first_diff(x, y, &format!("{path}[{i}]")) {
                    return Some(d);
                }
            }
            if a.len() != b.len() {
                let i = a.len().min(b.len());
                let show_at = |v: &Vec<Value>| v.get(i).map_or_else(|| "<missing>".to_owned(), Value::to_string);
                return Some((format!("{path}[{i}]"), show_at(a), show_at(b)));
            }
            None
        }
        (a, b) if a == b => None,
        _ => Some((path.to_owned(), show(expected), show(actual))),
    }
}

fn clock_id() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        #[allow(clippy::expect_used)]
        Regex::new(r"(?s)^(.*)_[0-9]{13}_([0-9]+)$").expect("static pattern")
    })
}

/// `compare.py`'s rule for ids synthesized from the clock: in any object with `"type": "toolCall"`,
/// an `id` `<prefix>_<13 digits>_<n>` becomes `<prefix>_0_<n>` (prefix and counter kept).
pub fn normalize_clock_ids(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(normalize_clock_ids).collect()),
        Value::Object(map) => {
            let mut out: Map<String, Value> = map.iter().map(|(k, v)| (k.clone(), normalize_clock_ids(v))).collect();
            if out.get("type").and_then(Value::as_str) == Some("toolCall") {
                if let Some(Value::String(id)) = out.get("id") {
                    let id = clock_id().replace(id, "${1}_0_${2}").into_owned();
                    out.insert("id".into(), Value::String(id));
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn prepare(text: &str) -> Result<Vec<Value>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).map_err(|e| format!("bad trace line: {e}")))
        .map(|line| {
            line.map(|line| {
                if line.get("kind").and_then(Value::as_str) == Some("request") {
                    core_request(&line)
                } else {
                    let mut line = normalize_clock_ids(&line);
                    normalize_diagnostics(&mut line);
                    line
                }
            })
        })
        .collect()
}

/// Diagnostics carry values of the runtime that wrote them: a JavaScript stack trace
/// (`error.stack`) and the clock (`details.timestampMs`, which the oracle's timestamp
/// normalization does not cover). Both are dropped before comparing, on both sides.
fn normalize_diagnostics(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(diagnostics)) = map.get_mut("diagnostics") {
                for diagnostic in diagnostics {
                    if let Some(Value::Object(error)) = diagnostic.get_mut("error") {
                        error.remove("stack");
                    }
                    if let Some(Value::Object(details)) = diagnostic.get_mut("details") {
                        details.remove("timestampMs");
                    }
                }
            }
            map.values_mut().for_each(normalize_diagnostics);
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_diagnostics),
        _ => {}
    }
}

/// Compare two traces as `compare.py` does; `Err` describes the first differing line.
pub fn compare_traces(expected: &str, actual: &str) -> Result<(), String> {
    let expected = prepare(expected)?;
    let actual = prepare(actual)?;
    for (index, (a, b)) in expected.iter().zip(actual.iter()).enumerate() {
        if let Some((path, x, y)) = first_diff(a, b, "$") {
            let kind = a.get("event").and_then(|e| e.get("type")).or_else(|| a.get("kind"));
            return Err(format!(
                "line {} ({}): {path}\n  expected: {}\n  actual:   {}",
                index + 1,
                kind.and_then(Value::as_str).unwrap_or("?"),
                truncate(&x),
                truncate(&y)
            ));
        }
    }
    if expected.len() != actual.len() {
        return Err(format!("expected {} lines, got {}", expected.len(), actual.len()));
    }
    Ok(())
}

fn truncate(text: &str) -> String {
    if text.chars().count() <= 300 {
        text.to_owned()
    } else {
        format!("{}...", text.chars().take(300).collect::<String>())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn event(id: &str) -> String {
        serde_json::json!({"kind": "event", "event": {"type": "toolcall_end", "toolCall": {"type": "toolCall", "id": id, "name": "f"}}})
            .to_string()
    }

    #[test]
    fn clock_based_tool_call_ids_compare_without_their_clock() {
        assert!(compare_traces(&event("f_0_3"), &event("f_1767225600123_3")).is_ok());
        assert!(compare_traces(&event("undefined_0_3"), &event("undefined_1767225600123_3")).is_ok());
        assert!(compare_traces(&event("a_b_1767225600123_12"), &event("a_b_1767225600999_12")).is_ok());
        // The prefix and the counter still count; 12 digits are no clock.
        assert!(compare_traces(&event("undefined_0_3"), &event("_1767225600123_3")).is_err());
        assert!(compare_traces(&event("f_0_3"), &event("f_1767225600123_4")).is_err());
        assert!(compare_traces(&event("f_0_3"), &event("f_176722560012_3")).is_err());
        // Only in objects whose type is toolCall.
        let other = |id: &str| serde_json::json!({"kind": "event", "event": {"type": "x", "id": id}}).to_string();
        assert!(compare_traces(&other("f_0_3"), &other("f_1767225600123_3")).is_err());
    }
}
