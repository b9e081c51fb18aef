//! `cargo xtask catalog --type classifier|image [--check]`: the built-in classifier or image
//! catalog as one JSON object `{provider: [model, ...]}` in the shape of the reference's
//! `getBuiltinClassifierModels` / `getBuiltinImageModels` per provider (providers without such
//! models left out); `--check` compares it field by field with what pi-ai 1.6.1 returns
//! (needs node and npm; installs the reference into `xtask/node`).

use std::path::Path;
use std::process::Command;

use pi_testkit::provider_replay_compare::first_diff;
use serde_json::Value;

/// The model types beside chat.
pub const TYPES: [&str; 2] = ["classifier", "image"];

fn ours(kind: &str) -> Result<Value, String> {
    match kind {
        "classifier" => serde_json::to_value(pi_providers::classifier::catalog::catalog()),
        "image" => serde_json::to_value(pi_providers::images::catalog::catalog()),
        other => return Err(format!("unknown model type {other:?} (classifier or image)")),
    }
    .map_err(|e| e.to_string())
}

/// The catalog of one type, one line of JSON.
pub fn print(kind: &str) -> Result<String, String> {
    Ok(pi_types::json::stringify(&ours(kind)?))
}

/// Compare one type's catalog with the reference; a summary line when equal.
pub fn check(root: &Path, kind: &str) -> Result<String, String> {
    let ours = ours(kind)?;
    let node_dir = root.join("xtask/node");
    crate::streaming_fixtures::ensure_node_modules(&node_dir)?;
    let output = Command::new("node")
        .arg(node_dir.join("catalog-types-reference.mjs"))
        .arg(kind)
        .current_dir(&node_dir)
        .output()
        .map_err(|error| format!("cannot run node: {error}"))?;
    if !output.status.success() {
        return Err(format!("node catalog-types-reference.mjs failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let reference: Value = serde_json::from_slice(&output.stdout).map_err(|e| format!("reference output: {e}"))?;
    let (Some(expected), Some(actual)) = (reference.as_object(), ours.as_object()) else {
        return Err(format!("{kind} catalog: not a JSON object"));
    };
    let order = |map: &serde_json::Map<String, Value>| map.keys().cloned().collect::<Vec<_>>();
    if order(expected) != order(actual) {
        return Err(format!("{kind} providers differ: reference {:?}, ours {:?}", order(expected), order(actual)));
    }
    let mut models = 0;
    for (provider, list) in expected {
        if let Some((path, want, got)) = first_diff(list, &actual[provider], &format!("$.{provider}")) {
            return Err(format!("{kind} {path}: reference {want}, ours {got}"));
        }
        models += list.as_array().map_or(0, Vec::len);
    }
    Ok(format!("{kind} catalog equal to the reference: {} providers, {models} models, every field", expected.len()))
}
