//! Criterion bench: tool-argument validation (`cargo bench -p pi-rs-schema --bench validation`).
//!
//! One edit-tool-like schema, compiled once as a tool does, and three calls' worth of arguments:
//! already valid, valid after coercion (numbers and booleans sent as strings), and invalid (every
//! failure explained). `compile` measures the once-per-tool cost.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pi_schema::{validate_tool_arguments, ArgumentValidator};
use serde_json::{json, Map, Value};
use std::hint::black_box;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "dryRun": {"type": "boolean"},
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "line": {"type": "integer", "minimum": 1},
                        "oldText": {"type": "string"},
                        "newText": {"type": "string"},
                        "mode": {"enum": ["replace", "insert", "delete"]}
                    },
                    "required": ["line", "oldText", "newText"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["path", "edits"]
    })
}

/// Arguments with `edits` edits; `line` and `dryRun` as strings when `strings`, an unknown field
/// and a missing one in every edit when `broken`.
fn arguments(edits: usize, strings: bool, broken: bool) -> Map<String, Value> {
    let edits: Vec<Value> = (1..=edits)
        .map(|line| {
            let mut edit = json!({"line": line, "oldText": format!("old {line}"), "newText": "new", "mode": "replace"});
            if strings {
                edit["line"] = json!(line.to_string());
            }
            if broken {
                edit["extra"] = json!(true);
                if let Some(edit) = edit.as_object_mut() {
                    edit.remove("newText");
                }
            }
            edit
        })
        .collect();
    let dry_run = if strings { json!("false") } else { json!(false) };
    match json!({"path": "src/main.rs", "dryRun": dry_run, "edits": edits}) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn bench(c: &mut Criterion) {
    let schema = schema();
    c.bench_function("compile", |b| b.iter(|| black_box(ArgumentValidator::new(black_box(&schema)).is_ok())));

    let Ok(validator) = ArgumentValidator::new(&schema) else { return };
    let mut group = c.benchmark_group("validate_tool_arguments");
    for edits in [1, 100] {
        group.throughput(Throughput::Elements(edits as u64));
        for (label, strings, broken) in [("valid", false, false), ("coerced", true, false), ("invalid", false, true)] {
            let args = arguments(edits, strings, broken);
            // The case measures the path its label names.
            let outcome = validate_tool_arguments("edit", &validator, &args, None);
            assert_eq!(outcome.is_ok(), !broken, "{label}: {outcome:?}");
            group.bench_with_input(BenchmarkId::new(label, edits), &args, |b, args| {
                b.iter(|| black_box(validate_tool_arguments("edit", &validator, args, None).is_ok()))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
