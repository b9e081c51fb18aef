//! `cargo xtask gen-streaming-json-fixtures`: regenerates
//! `crates/pi-json/tests/fixtures/streaming-json.json` by running the reference runtime
//! (`@earendil-works/pi-ai`, pinned in `xtask/node/package.json`) under Node.

use std::path::Path;
use std::process::Command;

/// Installs the Node dependencies of `xtask/node` when they are missing, then runs
/// `streaming-json-fixtures.mjs`, which writes the fixture file.
pub fn run(repo_root: &Path) -> Result<(), String> {
    let node_dir = repo_root.join("xtask").join("node");
    if !node_dir.join("streaming-json-fixtures.mjs").is_file() {
        return Err(format!("{} has no streaming-json-fixtures.mjs", node_dir.display()));
    }
    ensure_node_modules(&node_dir)?;
    let output = repo_root.join("crates").join("pi-json").join("tests").join("fixtures").join("streaming-json.json");
    run_command(
        Command::new("node").arg("streaming-json-fixtures.mjs").arg(&output).current_dir(&node_dir),
        "node streaming-json-fixtures.mjs",
    )
}

/// Install `xtask/node`'s pinned packages unless they are there already (a pi-ai of another
/// version than the pinned one, left by an earlier pin, is replaced).
pub fn ensure_node_modules(node_dir: &Path) -> Result<(), String> {
    let pinned = std::fs::read_to_string(node_dir.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|package| package["dependencies"]["@earendil-works/pi-ai"].as_str().map(str::to_owned));
    if installed_version(node_dir).is_some_and(|installed| pinned.is_none_or(|pinned| pinned == installed)) {
        return Ok(());
    }
    let install = if node_dir.join("package-lock.json").is_file() { "ci" } else { "install" };
    let npm = if cfg!(windows) { "npm.cmd" } else { "npm" };
    run_command(
        Command::new(npm).arg(install).arg("--no-audit").arg("--no-fund").current_dir(node_dir),
        &format!("npm {install}"),
    )
}

/// The version of the pi-ai installed in `node_dir`, if any.
pub fn installed_version(node_dir: &Path) -> Option<String> {
    let path = node_dir.join("node_modules").join("@earendil-works").join("pi-ai").join("package.json");
    let package: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    package["version"].as_str().map(str::to_owned)
}

/// Run a command to its end; an error names it and its exit status.
pub fn run_command(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command.status().map_err(|error| format!("cannot run {what}: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed with {status}"))
    }
}
