//! Developer commands for pi-rs: a thin command line over `pi-testkit`.
//!
//! ```text
//! cargo xtask replay SCENARIO.json             conformance scenario -> normalized trace
//! cargo xtask replay-provider CASE.json        recorded provider case -> normalized trace
//! cargo xtask catalog [--check]                the model catalog as JSON; --check: against the reference
//!                                              (chat, classifier and image catalogs)
//! cargo xtask catalog --type classifier|image [--check]
//!                                              the classifier or image catalog as JSON
//! cargo xtask reference-update --version X     pin pi-ai X, regenerate the catalog, reprint every provider golden
//! cargo xtask bench [--runs N] [--threads N] [--against DIR] [WORKLOAD[:SIZE] ...]
//!                                              the shared/bench workloads (faux and HTTP), one process
//!                                              and JSON line each
//! cargo xtask diff-fuzz --seed S --count N     random scenarios, reference vs ours (needs node)
//! cargo xtask sync-fixtures                    re-vendor ../shared conformance and provider fixtures
//! cargo xtask gen-streaming-json-fixtures      regenerate the streaming-JSON fixtures with node
//! cargo xtask gen-validation-fixtures          regenerate the validation fixtures with node
//! cargo xtask proxy-interop                    our proxy server against the reference streamProxy client
//! cargo xtask proxy-load [--streams N]         N concurrent streams through the proxy over loopback
//! cargo xtask proxy-abuse                      the same streams while slow, idle and big requests attack
//! cargo xtask public-api [--check]             record (check) each library crate's public API in docs/api
//! cargo xtask sse-floor [API ...]              SSE decoding rates beside a memchr floor
//! ```

mod bench_args;
mod bench_load;
mod bench_runs;
mod catalog;
mod catalog_types;
mod diff_fuzz;
mod proxy_abuse;
mod proxy_common;
mod proxy_interop;
mod proxy_load;
mod public_api;
mod reference_update;
mod sse_floor;
mod streaming_fixtures;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The `pi` binary's allocator, so that `proxy-load` and `proxy-abuse` measure the server as
/// `pi proxy serve` runs it. The case binaries keep the system allocator of a library user.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  replay SCENARIO.json            run a conformance scenario, print its trace
  replay-provider CASE.json       replay a recorded provider response, print its trace
  catalog --type classifier|image [--check]
                                  the classifier or image catalog, same shape; --check against pi-ai 1.6.1
  catalog [--check]               print the model catalog as one JSON object {provider: [model, ...]};
                                  --check: compare it field by field with the reference's (needs node, npm)
  reference-update --version X [--jobs N]
                                  move to pi-ai X: pin it in xtask/node, regenerate the catalog and the
                                  providers' key variables, reprint every provider golden under tests/fixtures
                                  with its replay runner (N at a time, default up to 4); lists the goldens
                                  that changed (needs node, npm)
  bench [--runs N] [--threads N] [--no-usage-estimate] [--quiet C] [--max-wait S] [--against DIR]
        [WORKLOAD[:SIZE] ...]
                                  run benchmark workloads (stream, tools, turns, agents, args, loopstream,
                                  prompts; over HTTP: sse-API, sse-args-API, sse-thinking-API with API one of
                                  anthropic, completions, responses, google, and sse-agents), each in its own
                                  process; --runs N: N interleaved rounds, then a table of medians;
                                  --threads N: multi-thread runtime with N workers (default current_thread);
                                  --no-usage-estimate: the faux provider gets an empty transcript (turns,
                                  prompts); --max-wait S: before each run wait up to S s (default 0) until
                                  other processes use < C cores (--quiet, default 0.3); --against DIR:
                                  each case also in another build's binaries (its target/release), the two
                                  taking turns at going first, then a table comparing them. HTTP cases use
                                  BENCH_SSE_URL or start `node sse-server.mjs` (vendored in pi-testkit)
  diff-fuzz --seed S --count N    differential test on random scenarios (needs node)
  sync-fixtures                   copy ../shared conformance and provider fixtures into tests/fixtures
  gen-streaming-json-fixtures     regenerate crates/pi-json/tests/fixtures/streaming-json.json (needs node)
  gen-validation-fixtures         regenerate crates/pi-schema/tests/fixtures/validation.json (needs node)
  proxy-interop                   drive our proxy server with the reference streamProxy client (needs node, npm)
  sse-floor [--runs N] [--chars N] [API ...]
                                  bytes/s of each API's SSE body: memchr scan and loopback read floors
                                  beside the sse-API workload's rate per core (needs node)
  proxy-load [--release] [--streams N] [--chars N] [--tokens-per-second R]
                                  N concurrent proxy streams over loopback (default 500): throughput, latency
                                  per event against the provider direct, RSS per stream
  proxy-abuse [--release] [--streams N] [--slow N] [--idle N] [--big N]
                                  N paced proxy streams (default 500) while slow bodies (500), idle
                                  connections (1000) and big bodies (16) arrive: every stream completes,
                                  largest gap under 200 ms, RSS after within 2x of before
  public-api [--check]            write each publishable library crate's public API to docs/api/<crate>.txt;
                                  --check: fail if one differs from its file (rustdoc JSON via RUSTC_BOOTSTRAP)";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), PathBuf::from)
}

fn print_line(line: Result<String, String>) -> ExitCode {
    match line {
        Ok(line) => {
            // A closed pipe (`| head`) is not a failure of the command.
            let _ = writeln!(std::io::stdout(), "{line}");
            ExitCode::SUCCESS
        }
        Err(error) => fail(error),
    }
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(2)
}

fn print_trace(trace: Result<String, impl std::fmt::Display>) -> ExitCode {
    match trace {
        Ok(trace) => {
            print!("{trace}");
            ExitCode::SUCCESS
        }
        Err(error) => fail(error),
    }
}

/// Run each case in its own process (peak RSS is per process), one JSON line each; with
/// `--runs N`, N interleaved rounds and then a table of medians (see `bench_runs`); with
/// `--against DIR`, each case also in the other build's binary, and a table comparing them. HTTP
/// cases (`sse-*`) talk to `BENCH_SSE_URL`, or to a `sse-server.mjs` started here for all runs.
fn bench(args: &[String]) -> ExitCode {
    match run_bench(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(error),
    }
}

fn run_bench(args: &[String]) -> Result<(), String> {
    let parsed = bench_args::parse(args)?;
    let exes =
        parsed.specs.iter().map(|(workload, _)| bench_args::case_binary(workload)).collect::<Result<Vec<_>, _>>()?;
    let against = match &parsed.against {
        Some(dir) => Some(
            parsed
                .specs
                .iter()
                .map(|(workload, _)| bench_args::case_binary_in(dir, workload))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let needs_server = parsed.specs.iter().any(|(workload, _)| workload.starts_with("sse-"));
    let server = match needs_server && std::env::var_os("BENCH_SSE_URL").is_none() {
        true => {
            let server = pi_testkit::bench_sse::SseServer::start()?;
            eprintln!("sse-server.mjs (pid {}) at {}", server.pid(), server.url());
            Some(server)
        }
        false => None,
    };
    let mut flags = Vec::new();
    if let Some(threads) = parsed.options.threads {
        flags.extend(["--threads".to_owned(), threads.to_string()]);
    }
    if !parsed.options.usage_estimate {
        flags.push("--no-usage-estimate".to_owned());
    }
    let new_cases = || -> Vec<bench_runs::CaseRuns> {
        parsed
            .specs
            .iter()
            .map(|(workload, size)| {
                let label =
                    std::iter::once(format!("{workload}:{size}")).chain(flags.iter().cloned()).collect::<Vec<_>>();
                bench_runs::CaseRuns { label: label.join(" "), lines: Vec::new() }
            })
            .collect()
    };
    let (mut cases, mut other_cases) = (new_cases(), new_cases());
    let run = BenchRun { flags: &flags, server: server.as_ref(), quiet: parsed.quiet, max_wait_s: parsed.max_wait_s };
    for round in 0..parsed.runs {
        for (index, (workload, size)) in parsed.specs.iter().enumerate() {
            let case = format!("{workload}:{size}");
            let (Some(current), Some(exe)) = (cases.get_mut(index), exes.get(index)) else { continue };
            let mut builds = vec![(exe, current)];
            if let Some(other) = against.as_ref().and_then(|exes| exes.get(index)).zip(other_cases.get_mut(index)) {
                builds.push(other);
                // The builds take turns at going first, so neither always runs on a warmer machine.
                if round % 2 == 1 {
                    builds.reverse();
                }
            }
            for (exe, runs) in builds {
                runs.lines.extend(run.case(exe, &case)?);
            }
        }
    }
    drop(server);
    if against.is_some() {
        println!();
        print!("{}", bench_runs::comparison(&other_cases, &cases));
    } else if parsed.runs > 1 {
        println!();
        print!("{}", bench_runs::table(&cases));
    }
    Ok(())
}

/// How `bench` runs one case in a case binary.
struct BenchRun<'a> {
    flags: &'a [String],
    server: Option<&'a pi_testkit::bench_sse::SseServer>,
    quiet: f64,
    max_wait_s: u64,
}

impl BenchRun<'_> {
    /// Run `case` in `exe`: its output lines, printed and with the load of other processes added.
    fn case(&self, exe: &std::path::Path, case: &str) -> Result<Vec<serde_json::Value>, String> {
        let waited_s = bench_load::wait_for_quiet(self.quiet, std::time::Duration::from_secs(self.max_wait_s));
        let mut command = std::process::Command::new(exe);
        command.arg(case).args(self.flags).stderr(std::process::Stdio::inherit());
        if let Some(server) = self.server {
            command.env("BENCH_SSE_URL", server.url());
        }
        let cpu_before = bench_load::cpu_ticks();
        let server_before = self.server.map(|s| bench_load::process_ticks(s.pid()));
        let output = command.output().map_err(|e| e.to_string())?;
        let server_ticks =
            self.server.zip(server_before).map(|(s, before)| bench_load::process_ticks(s.pid()).saturating_sub(before));
        let cpu_after = bench_load::cpu_ticks();
        if !output.status.success() {
            return Err(format!("{case} failed in {}: {}", exe.display(), output.status));
        }
        let mut lines = Vec::new();
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let Ok(serde_json::Value::Object(mut fields)) = serde_json::from_str(line) else { continue };
            let own_cpu_s = fields.get("cpuS").and_then(serde_json::Value::as_f64).unwrap_or(0.0);
            let load = cpu_before
                .zip(cpu_after)
                .map(|(before, after)| bench_load::run_load(before, after, own_cpu_s, server_ticks));
            if let Some(load) = &load {
                fields.insert("othersCores".into(), load.others_cores.into());
                if let Some(server) = load.server_cores {
                    fields.insert("serverCores".into(), server.into());
                }
                fields.insert("waitedS".into(), waited_s.into());
            }
            let value = serde_json::Value::Object(fields);
            println!("{value}");
            lines.push(value);
        }
        Ok(lines)
    }
}

/// One case in this process (the `bench-one` command; `bench` runs the lean
/// `xtask-bench-one` and `xtask-bench-sse` binaries instead).
fn bench_one(args: &[String]) -> ExitCode {
    match bench_args::run_one(args, pi_testkit::bench::run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(error),
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(to)?;
    let mut copied = 0;
    for entry in std::fs::read_dir(from)? {
        let path = entry?.path();
        let target = to.join(path.file_name().unwrap_or_default());
        if path.is_dir() {
            copied += copy_dir(&path, &target)?;
        } else {
            std::fs::copy(&path, &target)?;
            copied += 1;
        }
    }
    Ok(copied)
}

fn sync_fixtures() -> ExitCode {
    let root = repo_root();
    let shared = root.join("../shared");
    let pairs = [
        ("conformance/scenarios", "tests/fixtures/conformance/scenarios"),
        ("conformance/golden", "tests/fixtures/conformance/golden"),
        ("providers/cases", "tests/fixtures/providers/cases"),
        ("providers/golden", "tests/fixtures/providers/golden"),
    ];
    for (from, to) in pairs {
        match copy_dir(&shared.join(from), &root.join(to)) {
            Ok(count) => println!("{from}: {count} files"),
            Err(error) => return fail(format!("{from}: {error}")),
        }
    }
    ExitCode::SUCCESS
}

fn run_node_script(script: &str) -> ExitCode {
    let root = repo_root();
    let node_dir = root.join("xtask/node");
    if let Err(error) = streaming_fixtures::ensure_node_modules(&node_dir) {
        return fail(error);
    }
    match std::process::Command::new("node").arg(node_dir.join(script)).current_dir(&root).status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => fail(format!("node {script} failed: {status}")),
        Err(error) => fail(format!("cannot run node: {error}")),
    }
}

/// `catalog --check`: the chat catalog, then the classifier and image catalogs.
fn check_catalogs(root: &Path) -> Result<String, String> {
    let mut lines = vec![catalog::check(root)?];
    for kind in catalog_types::TYPES {
        lines.push(catalog_types::check(root, kind)?);
    }
    Ok(lines.join("\n"))
}

fn main() -> ExitCode {
    if let Some(code) = public_api::act_as_rustdoc() {
        return code;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match (args.first().map(String::as_str), args.get(1)) {
        (Some("replay"), Some(path)) => print_trace(pi_testkit::replay::replay_file(Path::new(path))),
        (Some("replay-provider"), Some(path)) => {
            print_trace(pi_testkit::provider_replay::replay_case_blocking(Path::new(path)))
        }
        (Some("catalog"), None) => print_line(catalog::print()),
        (Some("catalog"), Some(flag)) if flag == "--check" => print_line(check_catalogs(&repo_root())),
        (Some("catalog"), Some(flag)) if flag == "--type" => match (args.get(2), args.get(3).map(String::as_str)) {
            (Some(kind), None) => print_line(catalog_types::print(kind)),
            (Some(kind), Some("--check")) => print_line(catalog_types::check(&repo_root(), kind)),
            _ => fail("usage: cargo xtask catalog --type classifier|image [--check]".to_owned()),
        },
        (Some("reference-update"), _) => print_line(reference_update::run(&repo_root(), &args[1..])),
        (Some("bench"), _) => bench(&args[1..]),
        (Some("bench-one"), _) => bench_one(&args[1..]),
        (Some("diff-fuzz"), _) => match diff_fuzz::run(&args[1..], &repo_root()) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(error) => fail(error),
        },
        (Some("sync-fixtures"), None) => sync_fixtures(),
        (Some("gen-streaming-json-fixtures"), None) => match streaming_fixtures::run(&repo_root()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => fail(error),
        },
        (Some("gen-validation-fixtures"), None) => run_node_script("validation-fixtures.mjs"),
        (Some("proxy-interop"), None) => print_line(proxy_interop::run(&target_dir())),
        (Some("proxy-load"), _) => print_line(proxy_load::run(&args[1..])),
        (Some("proxy-abuse"), _) => print_line(proxy_abuse::run(&args[1..])),
        (Some("public-api"), None) => print_line(public_api::update(&repo_root()).map_err(|e| e.to_string())),
        (Some("public-api"), Some(flag)) if flag == "--check" => {
            print_line(public_api::check(&repo_root()).map_err(|e| e.to_string()))
        }
        (Some("sse-floor"), _) => print_trace(sse_floor::run(&args[1..])),
        _ => fail(USAGE),
    }
}
