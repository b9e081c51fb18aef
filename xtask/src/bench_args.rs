//! The arguments of `cargo xtask bench`, and one case run in the calling process.
//!
//! Shared by the `xtask` binary and the two binaries each case runs in (peak RSS is per
//! process): `xtask-bench-one` for the faux workloads, which links the runtime and the faux
//! provider only, and `xtask-bench-sse` for the HTTP ones, which adds the HTTP stack and the
//! adapters. Neither links the provider SDKs the rest of xtask needs (the AWS and Google crates
//! of the replay runner); code and relocations a case does not use would add to its resident
//! memory (the HTTP stack: about 1.5 MB on `agents`).

use std::path::PathBuf;

/// Options of `cargo xtask bench`, and the cases to run.
#[allow(dead_code)] // `runs`, `quiet` and `max_wait_s` are read by the xtask binary only
pub struct BenchArgs {
    pub options: pi_testkit::bench::BenchOptions,
    pub specs: Vec<(String, usize)>,
    /// Runs per case (`--runs N`); above one, a table of medians follows the lines.
    pub runs: usize,
    /// Before each run, wait until other processes use fewer cores than this (`--quiet`)...
    pub quiet: f64,
    /// ...but at most this many seconds (`--max-wait`, default 0: record the load, never wait).
    pub max_wait_s: u64,
    /// Another build's case binaries (`--against DIR`, e.g. its `target/release`): each case also
    /// runs there, the two builds alternating which goes first, and a table compares them.
    pub against: Option<PathBuf>,
}

/// Parse `[--runs N] [--threads N] [--no-usage-estimate] [--quiet CORES] [--max-wait S]
/// [--against DIR] [WORKLOAD[:SIZE] ...]`. Without cases: every faux workload and the HTTP baseline cases
/// (`sse-API` for each API and `sse-agents`), at their default sizes.
pub fn parse(args: &[String]) -> Result<BenchArgs, String> {
    let mut options = pi_testkit::bench::BenchOptions::default();
    let mut specs = Vec::new();
    let mut runs = 1;
    let mut quiet = 0.3;
    let mut max_wait_s = 0;
    let mut against = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                let count = args.next().and_then(|n| n.parse::<usize>().ok()).filter(|n| *n > 0);
                runs = count.ok_or("--runs needs a number of runs")?;
            }
            "--threads" => {
                let threads = args.next().and_then(|n| n.parse::<usize>().ok()).filter(|n| *n > 0);
                options.threads = Some(threads.ok_or("--threads needs a number of worker threads")?);
            }
            "--no-usage-estimate" => options.usage_estimate = false,
            "--quiet" => {
                quiet = args.next().and_then(|n| n.parse::<f64>().ok()).ok_or("--quiet needs a number of cores")?;
            }
            "--against" => against = Some(PathBuf::from(args.next().ok_or("--against needs a folder")?)),
            "--max-wait" => {
                max_wait_s = args.next().and_then(|n| n.parse::<u64>().ok()).ok_or("--max-wait needs seconds")?;
            }
            spec => {
                let (workload, size) = match spec.split_once(':') {
                    Some((workload, size)) => {
                        let size = size.replace(['_', ','], "");
                        (workload, size.parse().map_err(|_| format!("bad size in `{spec}`"))?)
                    }
                    None => (spec, pi_testkit::bench::default_size(spec).ok_or(format!("unknown workload `{spec}`"))?),
                };
                if pi_testkit::bench::default_size(workload).is_none() {
                    return Err(format!("unknown workload `{workload}`"));
                }
                specs.push((workload.to_owned(), size));
            }
        }
    }
    if specs.is_empty() {
        specs = pi_testkit::bench::WORKLOADS
            .iter()
            .chain(pi_testkit::bench_sse::BASELINE.iter())
            .filter_map(|w| Some(((*w).to_owned(), pi_testkit::bench::default_size(w)?)))
            .collect();
    }
    Ok(BenchArgs { options, specs, runs, quiet, max_wait_s, against })
}

/// How a case binary runs one case: `pi_testkit::bench::run_faux`, or `run` for every case.
pub type RunCase = fn(
    &str,
    usize,
    &tokio::runtime::Runtime,
    pi_testkit::bench::BenchOptions,
) -> Result<pi_testkit::bench::BenchLine, String>;

/// Run the cases of `args` in this process with `run_case`, one JSON line each on stdout.
pub fn run_one(args: &[String], run_case: RunCase) -> Result<(), String> {
    let parsed = parse(args)?;
    let runtime = match parsed.options.threads {
        None => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        Some(threads) => tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build(),
    }
    .map_err(|e| e.to_string())?;
    for (workload, size) in &parsed.specs {
        let line = run_case(workload, *size, &runtime, parsed.options)?;
        let mut line = serde_json::to_value(&line).map_err(|e| e.to_string())?;
        if let Some(fields) = line.as_object_mut() {
            let cpu_s = crate::bench_load::own_cpu_s();
            fields.insert("cpuS".into(), ((cpu_s * 100.0).round() / 100.0).into());
        }
        println!("{line}");
    }
    Ok(())
}

/// The binary that runs `workload` (`xtask-bench-sse` for an HTTP case, else
/// `xtask-bench-one`), beside the running one; both are built first (same profile) if needed.
#[allow(dead_code)] // used by the xtask binary only
pub fn case_binary(workload: &str) -> Result<PathBuf, String> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let dir = BUILT.get_or_init(build_case_binaries).clone()?;
    case_binary_in(&dir, workload)
}

/// The binary in `dir` (this build's, or another's) that runs `workload`.
pub fn case_binary_in(dir: &std::path::Path, workload: &str) -> Result<PathBuf, String> {
    let name = if workload.starts_with("sse-") { "xtask-bench-sse" } else { "xtask-bench-one" };
    let exe = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    match exe.is_file() {
        true => Ok(exe),
        false => Err(format!("{} is not there (build that commit's xtask binaries first)", exe.display())),
    }
}

/// Build both case binaries; the folder they are in.
fn build_case_binaries() -> Result<PathBuf, String> {
    let current = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = current.parent().ok_or("the running binary has no folder")?;
    let release = dir.file_name().is_some_and(|name| name == "release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = std::process::Command::new(cargo);
    build.args(["build", "-q", "-p", "xtask", "--bin", "xtask-bench-one", "--bin", "xtask-bench-sse"]);
    if release {
        build.arg("--release");
    }
    // Always asked: cargo rebuilds them only when a source changed.
    let status = build.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    let missing = ["xtask-bench-one", "xtask-bench-sse"]
        .iter()
        .any(|name| !dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX)).is_file());
    if !status.success() || missing {
        return Err(format!("cannot build xtask-bench-one and xtask-bench-sse ({status})"));
    }
    Ok(dir.to_path_buf())
}
