//! `cargo xtask reference-update --version X [--jobs N]`: moves the project to another release
//! of the reference (`@earendil-works/pi-ai`), everything that is generated from it at once:
//!
//! 1. pins `xtask/node` to pi-ai `X` (`npm install --save-exact`), the package `catalog --check`,
//!    the fixture generators and the replay runner run against;
//! 2. regenerates the built-in catalog and the providers' key variables
//!    (`crates/pi-providers/tools/gen_catalog.mjs` writes `src/catalog.json` and
//!    `src/provider_keys.json`);
//! 3. reprints every vendored provider golden with that release's runner (`xtask/node/replay.mjs`,
//!    the shared oracle's): `tests/fixtures/providers`, `providers-extra` and `providers-real`,
//!    each `cases/<api>/<name>.json` to `golden/<api>/<name>.jsonl` (`golden-pi-rs`, our own
//!    deliberate differences, is left alone).
//!
//! It ends with the goldens whose bytes changed. Porting what changed is then a person's work:
//! `cargo xtask catalog --check` and the replay tests (`cargo test -p pi-integration-tests --test
//! provider_replay`) say what is left.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The folders whose goldens the reference prints.
const FIXTURE_SETS: [&str; 3] =
    ["tests/fixtures/providers", "tests/fixtures/providers-extra", "tests/fixtures/providers-real"];

/// The parsed arguments.
struct Args {
    version: String,
    jobs: usize,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut version = None;
    let mut jobs = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--version" => version = rest.next().cloned(),
            "--jobs" => {
                jobs = rest
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("--jobs takes a positive number")?;
            }
            other => return Err(format!("reference-update: unknown argument {other}")),
        }
    }
    let version = version.ok_or("usage: cargo xtask reference-update --version X [--jobs N]")?;
    // A version, not an npm argument in disguise.
    if version.is_empty() || !version.chars().all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c)) {
        return Err(format!("reference-update: not a version: {version:?}"));
    }
    Ok(Args { version, jobs })
}

/// Run the whole update; the summary to print.
pub fn run(root: &Path, args: &[String]) -> Result<String, String> {
    let args = parse(args)?;
    let node_dir = root.join("xtask/node");
    let package = format!("@earendil-works/pi-ai@{}", args.version);
    crate::streaming_fixtures::run_command(
        Command::new("npm")
            .args(["install", "--save-exact", "--no-audit", "--no-fund", &package])
            .current_dir(&node_dir),
        &format!("npm install {package}"),
    )?;
    let installed = crate::streaming_fixtures::installed_version(&node_dir)
        .ok_or("pi-ai is not installed in xtask/node after npm install")?;
    let output = Command::new("node")
        .arg(root.join("crates/pi-providers/tools/gen_catalog.mjs"))
        .arg(node_dir.join("node_modules"))
        .output()
        .map_err(|e| format!("cannot run node: {e}"))?;
    if !output.status.success() {
        return Err(format!("gen_catalog.mjs failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let catalog = String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or_default().to_owned();
    let mut cases = Vec::new();
    for set in FIXTURE_SETS {
        collect_cases(&root.join(set), &mut cases)?;
    }
    let changed = reprint(&node_dir.join("replay.mjs"), &cases, args.jobs)?;
    let mut summary =
        format!("pi-ai {installed}: catalog {catalog}; {} goldens reprinted, {} changed", cases.len(), changed.len());
    for path in changed {
        let shown = path.strip_prefix(root).unwrap_or(&path);
        summary.push_str(&format!("\n  {}", shown.display()));
    }
    summary.push_str("\nnext: cargo xtask catalog --check; cargo test -p pi-integration-tests --test provider_replay");
    Ok(summary)
}

/// Every `cases/<api>/<name>.json` of a fixture set with the golden it prints to.
fn collect_cases(set: &Path, out: &mut Vec<(PathBuf, PathBuf)>) -> Result<(), String> {
    let cases = set.join("cases");
    let mut apis: Vec<PathBuf> = read_dir(&cases)?.into_iter().filter(|p| p.is_dir()).collect();
    apis.sort();
    for api in apis {
        let mut files: Vec<PathBuf> =
            read_dir(&api)?.into_iter().filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
        files.sort();
        for case in files {
            let (Some(api_name), Some(stem)) = (api.file_name(), case.file_stem()) else { continue };
            let golden = set.join("golden").join(api_name).join(format!("{}.jsonl", stem.to_string_lossy()));
            out.push((case, golden));
        }
    }
    Ok(())
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(entries.filter_map(|entry| entry.ok().map(|e| e.path())).collect())
}

/// Print every case's trace into its golden, `jobs` runner processes at a time; the goldens
/// whose bytes changed, in case order.
fn reprint(runner: &Path, cases: &[(PathBuf, PathBuf)], jobs: usize) -> Result<Vec<PathBuf>, String> {
    let next = AtomicUsize::new(0);
    let changed = Mutex::new(Vec::new());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some((case, golden)) = cases.get(index) else { break };
                match print_golden(runner, case, golden) {
                    Ok(true) => changed.lock().unwrap_or_else(|e| e.into_inner()).push((index, golden.clone())),
                    Ok(false) => {}
                    Err(error) => failures.lock().unwrap_or_else(|e| e.into_inner()).push(error),
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    if !failures.is_empty() {
        return Err(format!("the runner failed on {} cases:\n{}", failures.len(), failures.join("\n")));
    }
    let mut changed = changed.into_inner().unwrap_or_else(|e| e.into_inner());
    changed.sort();
    Ok(changed.into_iter().map(|(_, path)| path).collect())
}

/// Run the reference on one case and write its golden; whether the bytes changed.
fn print_golden(runner: &Path, case: &Path, golden: &Path) -> Result<bool, String> {
    let output = Command::new("node")
        .arg(runner)
        .arg(case)
        .output()
        .map_err(|e| format!("{}: cannot run node: {e}", case.display()))?;
    if !output.status.success() || output.stdout.is_empty() {
        return Err(format!("{}: {}", case.display(), String::from_utf8_lossy(&output.stderr).trim()));
    }
    let before = std::fs::read(golden).ok();
    if before.as_deref() == Some(&output.stdout[..]) {
        return Ok(false);
    }
    if let Some(dir) = golden.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(golden, &output.stdout).map_err(|e| format!("{}: {e}", golden.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_only() {
        let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let parsed = parse(&args(&["--version", "1.6.1", "--jobs", "3"])).map_err(|e| e.to_string());
        assert!(matches!(parsed, Ok(Args { ref version, jobs: 3 }) if version == "1.6.1"));
        assert!(parse(&args(&["--version", "--registry=x"])).is_err());
        assert!(parse(&args(&["--version", "1.6.1 x"])).is_err());
        assert!(parse(&args(&[])).is_err());
        assert!(parse(&args(&["--version", "1.6.1", "--jobs", "0"])).is_err());
    }
}
