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
//!    deliberate differences, is left alone); a case with `calls` (several calls in one
//!    session) goes through `providers-extra/tools/replay_calls.mjs`, which runs them in one
//!    process;
//! 4. reprints the goldens of pi-providers' own reference scripts
//!    (`crates/pi-providers/tests/fixtures/<folder>/reference_*.mjs`: sign-in flows, cache
//!    warming, Codex's WebSocket, deferred responses, the live model store), see [`SCRIPTS`].
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

/// pi-providers' reference scripts, in `crates/pi-providers/tests/fixtures/<folder>`: each runs
/// as `node <script> <xtask/node>` into its one golden, or, with [`Golden::PerName`], as
/// `node <script> <xtask/node> <name>` into `<name>.json` for each `.json` of the folder but its
/// inputs.
const SCRIPTS: [(&str, &str, Golden); 5] = [
    ("auth", "reference_flows.mjs", Golden::PerName { inputs: &["answers.json"] }),
    ("cache_warming", "reference_cache_warming.mjs", Golden::One("golden.json")),
    ("codex_websocket", "reference_ws.mjs", Golden::One("golden.jsonl")),
    ("deferred", "reference_deferred.mjs", Golden::One("deferred.json")),
    ("models_store", "reference_refresh.mjs", Golden::PerName { inputs: &["cases.json"] }),
];

/// What a reference script prints.
#[derive(Clone, Copy)]
enum Golden {
    /// One golden, this file of the folder.
    One(&'static str),
    /// One golden per name: the folder's other `.json` files.
    PerName { inputs: &'static [&'static str] },
}

/// One golden and the `node` arguments that print it.
struct Print {
    args: Vec<PathBuf>,
    golden: PathBuf,
}

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
    let runners = Runners {
        replay: node_dir.join("replay.mjs"),
        calls: root.join("tests/fixtures/providers-extra/tools/replay_calls.mjs"),
        node_dir: node_dir.clone(),
    };
    let mut prints = Vec::new();
    for set in FIXTURE_SETS {
        collect_cases(&root.join(set), &runners, &mut prints)?;
    }
    collect_scripts(&root.join("crates/pi-providers/tests/fixtures"), &node_dir, &mut prints)?;
    let changed = reprint(&prints, args.jobs)?;
    let mut summary =
        format!("pi-ai {installed}: catalog {catalog}; {} goldens reprinted, {} changed", prints.len(), changed.len());
    for path in changed {
        let shown = path.strip_prefix(root).unwrap_or(&path);
        summary.push_str(&format!("\n  {}", shown.display()));
    }
    summary.push_str("\nnext: cargo xtask catalog --check; cargo test -p pi-integration-tests --test provider_replay");
    Ok(summary)
}

/// The runners of the replay cases.
struct Runners {
    /// The shared oracle's runner: one call.
    replay: PathBuf,
    /// The runner of a case with `calls`: several calls in one process.
    calls: PathBuf,
    /// The folder the reference is installed in (`replay_calls.mjs` takes it).
    node_dir: PathBuf,
}

impl Runners {
    /// The `node` arguments that print `case`.
    fn args(&self, case: &Path) -> Result<Vec<PathBuf>, String> {
        let text = std::fs::read_to_string(case).map_err(|e| format!("{}: {e}", case.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", case.display()))?;
        Ok(match value.get("calls") {
            Some(_) => vec![self.calls.clone(), self.node_dir.clone(), case.to_owned()],
            None => vec![self.replay.clone(), case.to_owned()],
        })
    }
}

/// Every `cases/<api>/<name>.json` of a fixture set, printed into `golden/<api>/<name>.jsonl`.
fn collect_cases(set: &Path, runners: &Runners, out: &mut Vec<Print>) -> Result<(), String> {
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
            out.push(Print { args: runners.args(&case)?, golden });
        }
    }
    Ok(())
}

/// The goldens of [`SCRIPTS`], in `fixtures` (pi-providers' test fixtures).
fn collect_scripts(fixtures: &Path, node_dir: &Path, out: &mut Vec<Print>) -> Result<(), String> {
    for (folder, script, golden) in SCRIPTS {
        let dir = fixtures.join(folder);
        let script = dir.join(script);
        match golden {
            Golden::One(name) => out.push(Print { args: vec![script, node_dir.to_owned()], golden: dir.join(name) }),
            Golden::PerName { inputs } => {
                let mut goldens: Vec<PathBuf> = read_dir(&dir)?
                    .into_iter()
                    .filter(|p| p.extension().is_some_and(|e| e == "json"))
                    .filter(|p| p.file_name().is_none_or(|n| !inputs.iter().any(|input| n == *input)))
                    .collect();
                goldens.sort();
                for golden in goldens {
                    let Some(name) = golden.file_stem().map(PathBuf::from) else { continue };
                    out.push(Print { args: vec![script.clone(), node_dir.to_owned(), name], golden });
                }
            }
        }
    }
    Ok(())
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(entries.filter_map(|entry| entry.ok().map(|e| e.path())).collect())
}

/// Print every golden, `jobs` runner processes at a time; the goldens whose bytes changed, in
/// order.
fn reprint(prints: &[Print], jobs: usize) -> Result<Vec<PathBuf>, String> {
    let next = AtomicUsize::new(0);
    let changed = Mutex::new(Vec::new());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(print) = prints.get(index) else { break };
                match print_golden(print) {
                    Ok(true) => changed.lock().unwrap_or_else(|e| e.into_inner()).push((index, print.golden.clone())),
                    Ok(false) => {}
                    Err(error) => failures.lock().unwrap_or_else(|e| e.into_inner()).push(error),
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    if !failures.is_empty() {
        return Err(format!("the runner failed on {} goldens:\n{}", failures.len(), failures.join("\n")));
    }
    let mut changed = changed.into_inner().unwrap_or_else(|e| e.into_inner());
    changed.sort();
    Ok(changed.into_iter().map(|(_, path)| path).collect())
}

/// Run the reference for one golden and write it; whether the bytes changed.
fn print_golden(print: &Print) -> Result<bool, String> {
    let golden = &print.golden;
    let output = Command::new("node")
        .args(&print.args)
        .output()
        .map_err(|e| format!("{}: cannot run node: {e}", golden.display()))?;
    if !output.status.success() || output.stdout.is_empty() {
        return Err(format!("{}: {}", golden.display(), String::from_utf8_lossy(&output.stderr).trim()));
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

    /// The runner each vendored golden is printed with: the multi-call cases by
    /// `replay_calls.mjs`, the rest by `replay.mjs`, and every golden of the crate's reference
    /// scripts (none of their inputs) by its script.
    #[test]
    fn every_golden_has_its_runner() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let runners = Runners { replay: "replay.mjs".into(), calls: "replay_calls.mjs".into(), node_dir: "n".into() };
        let mut prints = Vec::new();
        for set in FIXTURE_SETS {
            assert_eq!(collect_cases(&root.join(set), &runners, &mut prints), Ok(()));
        }
        let by_calls: Vec<String> = prints
            .iter()
            .filter(|print| print.args.first().is_some_and(|runner| runner == Path::new("replay_calls.mjs")))
            .filter_map(|print| print.golden.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            by_calls,
            ["thread_continue", "thread_disable_continuation", "thread_rejected_new_thread", "thread_unsupported_off"]
        );
        let mut scripts = Vec::new();
        let fixtures = root.join("crates/pi-providers/tests/fixtures");
        assert_eq!(collect_scripts(&fixtures, Path::new("n"), &mut scripts), Ok(()));
        let goldens: Vec<String> = scripts
            .iter()
            .filter_map(|print| print.golden.strip_prefix(&fixtures).ok())
            .map(|path| path.to_string_lossy().into_owned())
            .collect();
        assert!(goldens.iter().all(|g| !g.ends_with("answers.json") && !g.ends_with("cases.json")), "{goldens:?}");
        for expected in ["auth/anthropic-browser.json", "cache_warming/golden.json", "codex_websocket/golden.jsonl"] {
            assert!(goldens.iter().any(|g| g == expected), "{expected} in {goldens:?}");
        }
        assert!(goldens.iter().any(|g| g == "models_store/radius-refresh.json"), "{goldens:?}");
        assert!(scripts.iter().all(|print| print.golden.exists()), "every golden is vendored");
        let per_name = scripts.iter().find(|print| print.golden.ends_with("models_store/radius-refresh.json"));
        let args: Vec<_> = per_name.map(|print| print.args.iter().skip(1).cloned().collect()).unwrap_or_default();
        assert_eq!(args, [PathBuf::from("n"), PathBuf::from("radius-refresh")]);
    }

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
