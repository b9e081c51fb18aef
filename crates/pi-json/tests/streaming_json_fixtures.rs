//! Checks pi_json against the reference runtime's behaviour recorded in
//! tests/fixtures/streaming-json.json (regenerate with `cargo xtask gen-streaming-json-fixtures`;
//! the generator, xtask/node/streaming-json-fixtures.mjs, documents the format).
//
// Every document is streamed in pieces of 1..8 UTF-16 units; after every piece the partial
// arguments, the parser snapshot (including whether it is a new one) and the changes must equal
// the reference's, and the final parse must give the same arguments and error text.

use pi_json::js::{stringify, utf16_chunks, utf16_len};
use pi_json::{
    parse_streaming_json, parse_tool_call_arguments, repair_json, JsonChange, PathSegment, StreamingJsonParser,
    ToolCallArgumentsStream,
};
use serde_json::{json, Value};

const FIXTURE: &str = include_str!("fixtures/streaming-json.json");

fn fnv1a64(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Compares `actual` with a recorded value, which may be a `{"$hash", "$length"}` digest.
fn same(expected: &Value, actual: &Value) -> Result<(), String> {
    let text = stringify(actual);
    if let Some(hash) = expected.get("$hash").and_then(Value::as_str) {
        let length = expected.get("$length").and_then(Value::as_u64).unwrap_or(0);
        if fnv1a64(&text) == hash && utf16_len(&text) as u64 == length {
            return Ok(());
        }
        return Err(format!(
            "expected digest {hash} ({length} units), got {} units: {}",
            utf16_len(&text),
            truncate(&text)
        ));
    }
    let wanted = stringify(expected);
    if wanted == text {
        Ok(())
    } else {
        Err(format!("expected {}\n      got {}", truncate(&wanted), truncate(&text)))
    }
}

fn truncate(text: &str) -> String {
    if text.len() <= 400 {
        return text.to_owned();
    }
    let mut end = 400;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

fn path_json(path: &[PathSegment]) -> Value {
    Value::Array(
        path.iter()
            .map(|segment| match segment {
                PathSegment::Key(key) => Value::String(key.to_string()),
                PathSegment::Index(index) => json!(index),
            })
            .collect(),
    )
}

fn same_changes(expected: Option<&Value>, actual: &[JsonChange]) -> Result<(), String> {
    let empty = Vec::new();
    let expected = expected.and_then(Value::as_array).unwrap_or(&empty);
    if expected.len() != actual.len() {
        return Err(format!(
            "expected {} changes {}, got {actual:?}",
            expected.len(),
            truncate(&stringify(&Value::Array(expected.clone())))
        ));
    }
    for (wanted, change) in expected.iter().zip(actual) {
        match change {
            JsonChange::Set { path, value } => {
                same(wanted.get("set").unwrap_or(&Value::Null), &path_json(path))?;
                same(wanted.get("value").unwrap_or(&Value::Null), value)?;
            }
            JsonChange::Append { path, text } => {
                same(wanted.get("append").unwrap_or(&Value::Null), &path_json(path))?;
                same(wanted.get("text").unwrap_or(&Value::Null), &Value::String(text.clone()))?;
            }
        }
    }
    Ok(())
}

fn fixture() -> Value {
    serde_json::from_str(FIXTURE).expect("fixture is JSON")
}

/// Whether `document` has a `\uD800`-`\uDBFF` escape (the generator records no changes then).
fn has_surrogate_escape(document: &str) -> bool {
    document
        .as_bytes()
        .windows(4)
        .any(|w| w[0] == b'\\' && w[1] == b'u' && matches!(w[2], b'd' | b'D') && b"89abAB".contains(&w[3]))
}

fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

#[test]
fn streams_match_reference_on_every_prefix() {
    let fixture = fixture();
    let mut failures = Vec::new();
    let streams = fixture["streams"].as_array().expect("streams");
    for entry in streams {
        let document = str_field(entry, "document");
        let record_changes = !has_surrogate_escape(document);
        for run in entry["runs"].as_array().expect("runs") {
            let size = run["size"].as_u64().unwrap_or(1) as usize;
            let steps = run["steps"].as_array().expect("steps");
            let context =
                |step: usize, what: &str| format!("document {} size {size} step {step}: {what}", truncate(document));
            let pieces: Vec<&str> = steps.iter().map(|step| str_field(step, "p")).collect();
            if utf16_chunks(document, size) != pieces {
                failures.push(context(0, "utf16_chunks differs from the recorded pieces"));
            }
            let mut stream = ToolCallArgumentsStream::new();
            let mut parser = StreamingJsonParser::new();
            for (index, step) in steps.iter().enumerate() {
                let piece = str_field(step, "p");
                let before = stream.revision();
                let arguments = Value::Object(stream.append(piece).clone());
                let changed = stream.revision() != before;
                match step.get("a") {
                    Some(expected) => {
                        // The generator cannot observe whether the first step made a new object.
                        if !changed && index > 0 {
                            failures.push(context(index, "arguments should be new"));
                        }
                        if let Err(error) = same(expected, &arguments) {
                            failures.push(context(index, &format!("arguments: {error}")));
                        }
                    }
                    None if changed => failures.push(context(index, "arguments should be unchanged")),
                    None => {}
                }
                let changes = parser.append(piece).to_vec();
                let before = parser.revision();
                let snapshot = parser.snapshot().cloned();
                let changed = parser.revision() != before;
                match step.get("s") {
                    Some(expected) => {
                        if !changed {
                            failures.push(context(index, "snapshot should be new"));
                        }
                        let undefined = expected.get("$undefined").is_some();
                        let result = match &snapshot {
                            Some(value) if !undefined => same(expected, value),
                            None if undefined => Ok(()),
                            Some(value) => Err(format!("expected undefined, got {value}")),
                            None => Err("snapshot is undefined".to_owned()),
                        };
                        if let Err(error) = result {
                            failures.push(context(index, &format!("snapshot: {error}")));
                        }
                    }
                    None if changed => failures.push(context(index, "snapshot should be unchanged")),
                    None => {}
                }
                if record_changes {
                    if let Err(error) = same_changes(step.get("c"), &changes) {
                        failures.push(context(index, &format!("changes: {error}")));
                    }
                }
            }
            let finished = stream.finish();
            let finish = &run["finish"];
            if let Err(error) = same(&finish["arguments"], &Value::Object(finished.arguments)) {
                failures.push(context(steps.len(), &format!("finish arguments: {error}")));
            }
            let expected_error = finish["argumentsError"].as_str();
            if expected_error != finished.arguments_error.as_deref() {
                failures.push(context(
                    steps.len(),
                    &format!("finish error: expected {expected_error:?}, got {:?}", finished.arguments_error),
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches; first ones:\n{}",
        failures.len(),
        failures.iter().take(15).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn replace_matches_reference() {
    let fixture = fixture();
    for sequence in fixture["replaces"].as_array().expect("replaces") {
        let mut stream = ToolCallArgumentsStream::new();
        for step in sequence.as_array().expect("steps") {
            let replaced = stream.replace(str_field(step, "text"));
            assert_eq!(replaced.delta.as_deref(), step["delta"].as_str(), "{step}");
            let arguments = Value::Object(replaced.arguments.clone());
            if let Err(error) = same(&step["arguments"], &arguments) {
                panic!("{step}: {error}");
            }
        }
    }
}

#[test]
fn parse_functions_match_reference() {
    let fixture = fixture();
    let mut failures = Vec::new();
    for case in fixture["parses"].as_array().expect("parses") {
        let input = case["input"].as_str();
        let streaming = parse_streaming_json(input);
        if let Err(error) = same(&case["streaming"], &streaming) {
            failures.push(format!("parse_streaming_json({input:?}): {error}"));
        }
        let parsed = parse_tool_call_arguments(input);
        if let Err(error) = same(&case["arguments"], &Value::Object(parsed.arguments)) {
            failures.push(format!("parse_tool_call_arguments({input:?}): {error}"));
        }
        if case["argumentsError"].as_str() != parsed.arguments_error.as_deref() {
            failures.push(format!(
                "parse_tool_call_arguments({input:?}) error: expected {:?}, got {:?}",
                case["argumentsError"].as_str(),
                parsed.arguments_error
            ));
        }
        if let Some(input) = input {
            let repaired = repair_json(input);
            if case["repaired"].as_str() != Some(repaired.as_str()) {
                failures.push(format!("repair_json({input:?}): expected {:?}, got {repaired:?}", case["repaired"]));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches; first ones:\n{}",
        failures.len(),
        failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}
