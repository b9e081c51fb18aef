//! Every case of `fixtures/validation.json` (written by `xtask/node/validation-fixtures.mjs` from the reference,
//! pi-ai's `validateToolArguments`) gives the same result here: the same coerced arguments, or the same error text,
//! and the same issues from the validator itself.

use pi_schema::{validate_tool_arguments, ArgumentValidator};
use serde_json::Value;

const FIXTURES: &str = include_str!("fixtures/validation.json");
const TOOL: &str = "tool";

/// Equal as JavaScript values: numbers by value, object keys in the same order.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, p), (l, q))| k == l && same(p, q))
        }
        _ => a == b,
    }
}

fn check_case(case: &Value) -> Result<(), String> {
    let schema = &case["schema"];
    let args = match case.get("argsText").and_then(Value::as_str) {
        Some(text) => serde_json::from_str::<Value>(text).map_err(|e| e.to_string())?,
        None => case["args"].clone(),
    };
    let args = args.as_object().cloned().unwrap_or_default();
    let arguments_error = case.get("argumentsError").and_then(Value::as_str);
    let validator = match ArgumentValidator::new(schema) {
        Ok(v) => v,
        Err(e) => {
            let expected = case.get("compileError").and_then(Value::as_str);
            return match expected {
                Some(message) if message == e.to_string() => Ok(()),
                _ => Err(format!("compile error {e:?}, expected {expected:?}")),
            };
        }
    };
    if let Some(message) = case.get("compileError") {
        return Err(format!("compiled, expected compile error {message}"));
    }
    let ours = validate_tool_arguments(TOOL, &validator, &args, arguments_error);
    match (&ours, case.get("coerced"), case.get("error").and_then(Value::as_str)) {
        (Ok(value), Some(expected), _) if same(value, expected) => {}
        (Err(text), _, Some(expected)) if text == expected => {}
        _ => {
            return Err(format!(
                "got {ours:#?}\nexpected coerced {:?} / error {:?}",
                case.get("coerced"),
                case.get("error")
            ))
        }
    }
    let issues: Vec<(String, String)> = match validator.parse(&Value::Object(args)) {
        Ok(_) => Vec::new(),
        Err(issues) => issues.into_iter().map(|i| (i.pointer, i.message)).collect(),
    };
    let expected: Vec<(String, String)> = case["issues"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|i| (i["path"].as_str().unwrap_or("").to_owned(), i["message"].as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default();
    if issues != expected {
        return Err(format!("issues {issues:?}\nexpected {expected:?}"));
    }
    Ok(())
}

#[test]
fn matches_the_reference_on_every_fixture() {
    let cases: Vec<Value> = serde_json::from_str(FIXTURES).expect("fixtures parse");
    assert!(cases.len() >= 60, "only {} cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let name = case["name"].as_str().unwrap_or("?");
            check_case(case).err().map(|e| format!("## {name}\n{e}"))
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}
