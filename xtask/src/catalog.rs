//! `cargo xtask catalog [--check]`: the built-in model catalog as one JSON object
//! `{provider: [model, ...]}` in the reference's order and shape; `--check` compares it, model
//! by model and field by field, with what the reference's `getBuiltinModels` returns (needs
//! node and npm; installs the reference into `xtask/node`).

use std::path::Path;
use std::process::Command;

use pi_testkit::provider_replay_compare::first_diff;
use serde_json::Value;

/// The catalog as the Rust types hold it, serialized back to JSON.
fn ours() -> Result<Value, String> {
    serde_json::to_value(pi_providers::catalog::catalog()).map_err(|e| e.to_string())
}

/// The catalog, one line of JSON (numbers written as JavaScript writes them).
pub fn print() -> Result<String, String> {
    Ok(pi_types::json::stringify(&ours()?))
}

/// Compare with the reference; a summary line when equal, the first difference otherwise.
pub fn check(root: &Path) -> Result<String, String> {
    let node_dir = root.join("xtask/node");
    crate::streaming_fixtures::ensure_node_modules(&node_dir)?;
    let output = Command::new("node")
        .arg(node_dir.join("catalog-reference.mjs"))
        .current_dir(&node_dir)
        .output()
        .map_err(|error| format!("cannot run node: {error}"))?;
    if !output.status.success() {
        return Err(format!("node catalog-reference.mjs failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let reference: Value = serde_json::from_slice(&output.stdout).map_err(|e| format!("reference output: {e}"))?;
    let ours = ours()?;
    let (Some(expected), Some(actual)) = (reference.as_object(), ours.as_object()) else {
        return Err("catalog: not a JSON object".into());
    };
    let order = |map: &serde_json::Map<String, Value>| map.keys().cloned().collect::<Vec<_>>();
    if order(expected) != order(actual) {
        return Err(format!("providers differ: reference {:?}, ours {:?}", order(expected), order(actual)));
    }
    let mut models = 0;
    for (provider, list) in expected {
        if let Some((path, want, got)) = first_diff(list, &actual[provider], &format!("$.{provider}")) {
            return Err(format!("{path}: reference {want}, ours {got}"));
        }
        models += list.as_array().map_or(0, Vec::len);
    }
    Ok(format!("catalog equal to the reference: {} providers, {models} models, every field", expected.len()))
}
