//! `cargo xtask diff-fuzz --seed S --count N`: differential test against the reference runtime.
//!
//! Generates random valid scenarios ([`gen`]), runs each through the reference runner twice
//! ([`reference`](mod@reference), two long-lived Node processes; a scenario whose two reference traces differ
//! is skipped as non-deterministic) and through ours in-process (`pi_testkit::replay::replay_file`,
//! the code path of `xtask replay`), compares the traces as `compare.py` does ([`compare`]) and
//! saves every confirmed divergence, minimized ([`minimize`]), with its reference golden under
//! `tests/fixtures/conformance-extra/` as `x-fuzz-s<seed>-<index>`, where
//! `tests/tests/conformance.rs` replays it. Needs `node` and `npm`; not part of `.ci/run`.

mod compare;
mod gen;
mod minimize;
mod reference;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use compare::{first_difference, Difference};
use reference::{RefOutcome, Reference};

/// How long our runner may take on one scenario.
const OURS_TIMEOUT: Duration = Duration::from_secs(60);

const USAGE: &str = "usage: cargo xtask diff-fuzz [--seed S] [--count N] [--batch B] [--out DIR] \
                     [--max-saved M] [--max-checks C] [--avoid-known] [--keep-work]";

/// Command-line options.
struct Options {
    seed: u64,
    count: usize,
    batch: usize,
    out: PathBuf,
    max_saved: usize,
    max_checks: usize,
    keep_work: bool,
    avoid_known: bool,
}

impl Options {
    fn parse(args: &[String], repo: &Path) -> Result<Self, String> {
        let mut options = Self {
            seed: 1,
            count: 200,
            batch: 25,
            out: repo.join("tests/fixtures/conformance-extra"),
            max_saved: 20,
            max_checks: 600,
            keep_work: false,
            avoid_known: false,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            if flag == "--keep-work" || flag == "--avoid-known" {
                options.keep_work |= flag == "--keep-work";
                options.avoid_known |= flag == "--avoid-known";
                continue;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            let number = || value.parse::<usize>().map_err(|_| format!("{flag}: not a number: {value}"));
            match flag.as_str() {
                "--seed" => options.seed = value.parse().map_err(|_| format!("--seed: not a number: {value}"))?,
                "--count" => options.count = number()?,
                "--batch" => options.batch = number()?.max(1),
                "--out" => options.out = PathBuf::from(value),
                "--max-saved" => options.max_saved = number()?,
                "--max-checks" => options.max_checks = number()?,
                _ => return Err(format!("unknown option {flag}\n{USAGE}")),
            }
        }
        Ok(options)
    }
}

/// What our runner made of a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ours {
    Trace(String),
    Rejected(String),
    Panicked,
    TimedOut,
}

impl Ours {
    fn kind(&self) -> &'static str {
        match self {
            Ours::Trace(_) => "trace",
            Ours::Rejected(_) => "rejected",
            Ours::Panicked => "panicked",
            Ours::TimedOut => "timed out",
        }
    }
}

fn run_ours(path: &Path) -> Ours {
    let (sender, receiver) = mpsc::channel();
    let owned = path.to_owned();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(|| pi_testkit::replay::replay_file(&owned));
        let _ = sender.send(outcome);
    });
    match receiver.recv_timeout(OURS_TIMEOUT) {
        Ok(Ok(Ok(trace))) => Ours::Trace(trace),
        Ok(Ok(Err(error))) => Ours::Rejected(error.to_string()),
        Ok(Err(_)) => Ours::Panicked,
        Err(_) => Ours::TimedOut,
    }
}

/// The verdict on one scenario.
enum Verdict {
    Invalid(String),
    NonDeterministic,
    Agreed,
    Diverged { golden: String, ours: Ours, difference: Option<Difference> },
}

/// The two reference processes and the scratch directory.
struct Harness {
    refs: [Reference; 2],
    work: PathBuf,
}

impl Harness {
    fn write(&self, scenario: &Value) -> Result<PathBuf, String> {
        let name = scenario["name"].as_str().unwrap_or("unnamed");
        let path = self.work.join(format!("{name}.json"));
        let text = serde_json::to_string_pretty(scenario).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    /// Both reference runs and ours, concurrently, for every path.
    fn run_all(&mut self, paths: &[PathBuf]) -> Result<Vec<(RefOutcome, RefOutcome, Ours)>, String> {
        let [first, second] = &mut self.refs;
        let (a, b, ours) = std::thread::scope(|scope| {
            let a = scope.spawn(|| paths.iter().map(|p| first.run(p)).collect::<Result<Vec<_>, _>>());
            let b = scope.spawn(|| paths.iter().map(|p| second.run(p)).collect::<Result<Vec<_>, _>>());
            let ours: Vec<Ours> = paths.iter().map(|p| run_ours(p)).collect();
            (a.join(), b.join(), ours)
        });
        let a = a.map_err(|_| "reference thread panicked".to_owned())??;
        let b = b.map_err(|_| "reference thread panicked".to_owned())??;
        Ok(a.into_iter().zip(b).zip(ours).map(|((a, b), ours)| (a, b, ours)).collect())
    }

    fn verdict(a: RefOutcome, b: RefOutcome, ours: Ours) -> Verdict {
        match (a, b) {
            (RefOutcome::Invalid(message), _) | (_, RefOutcome::Invalid(message)) => Verdict::Invalid(message),
            (RefOutcome::Trace(a), RefOutcome::Trace(b)) if a == b => {
                let difference = match &ours {
                    Ours::Trace(trace) => first_difference(&a, trace),
                    _ => None,
                };
                if matches!(ours, Ours::Trace(_)) && difference.is_none() {
                    Verdict::Agreed
                } else {
                    Verdict::Diverged { golden: a, ours, difference }
                }
            }
            _ => Verdict::NonDeterministic,
        }
    }

    /// Run once more: the divergence holds when both references agree again and ours
    /// still differs the same way.
    fn confirm(&mut self, path: &Path, ours_kind: &str) -> Result<Option<String>, String> {
        let mut outcomes = self.run_all(&[path.to_owned()])?;
        let Some((a, b, ours)) = outcomes.pop() else { return Ok(None) };
        Ok(match Self::verdict(a, b, ours) {
            Verdict::Diverged { golden, ours, .. } if ours.kind() == ours_kind => Some(golden),
            _ => None,
        })
    }
}

/// What became of a confirmed divergence.
enum Save {
    Saved(Saved),
    Duplicate,
    NoLongerDiverges,
}

/// A divergence as saved.
struct Saved {
    name: String,
    difference: String,
}

/// Results over the whole run.
#[derive(Default)]
struct Tally {
    generated: usize,
    invalid: usize,
    non_deterministic: usize,
    agreed: usize,
    diverged: usize,
    flaky: usize,
    saved: Vec<Saved>,
    duplicates: usize,
    not_saved: usize,
}

/// `cargo xtask diff-fuzz ...`; `repo` is the repository root.
pub fn run(args: &[String], repo: &Path) -> Result<bool, String> {
    let options = Options::parse(args, repo)?;
    let base = repo.join("target/diff-fuzz");
    let run_mjs = reference::prepare(&repo.join("../shared/conformance/reference"), &base.join("reference"))?;
    let driver = repo.join("xtask/node/diff-fuzz-reference.mjs");
    let work = base.join(format!("work-s{}", options.seed));
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    for dir in ["scenarios", "golden"] {
        std::fs::create_dir_all(options.out.join(dir)).map_err(|e| format!("{}: {e}", options.out.display()))?;
    }
    let mut harness =
        Harness { refs: [Reference::start(&driver, &run_mjs)?, Reference::start(&driver, &run_mjs)?], work };

    let started = Instant::now();
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let mut tally = Tally::default();
    let mut seen = HashSet::new();
    let mut index = 0;
    while index < options.count {
        let end = (index + options.batch).min(options.count);
        let mut scenarios = Vec::new();
        for i in index..end {
            let mut scenario_rng = fastrand::Rng::with_seed(rng.u64(..));
            scenarios
                .push((i, gen::scenario(&mut scenario_rng, &format!("f-s{}-{i}", options.seed), options.avoid_known)));
        }
        let paths = scenarios.iter().map(|(_, s)| harness.write(s)).collect::<Result<Vec<_>, _>>()?;
        let outcomes = harness.run_all(&paths)?;
        for (((i, scenario), path), (a, b, ours)) in scenarios.into_iter().zip(&paths).zip(outcomes) {
            tally.generated += 1;
            match Harness::verdict(a, b, ours) {
                Verdict::Invalid(message) => {
                    tally.invalid += 1;
                    eprintln!("scenario {i}: rejected by the reference ({message}); kept at {}", path.display());
                    continue;
                }
                Verdict::NonDeterministic => tally.non_deterministic += 1,
                Verdict::Agreed => tally.agreed += 1,
                Verdict::Diverged { ours, difference, .. } => {
                    let kind = ours.kind();
                    if harness.confirm(path, kind)?.is_none() {
                        tally.flaky += 1;
                        eprintln!(
                            "scenario {i}: diverged once, not on a second run (skipped as flaky; kept at {})",
                            path.display()
                        );
                        continue;
                    }
                    tally.diverged += 1;
                    let what = describe(&ours, difference.as_ref());
                    eprintln!("scenario {i}: DIVERGED: {what}");
                    if tally.saved.len() >= options.max_saved {
                        tally.not_saved += 1;
                        continue;
                    }
                    match save_minimized(&mut harness, &options, i, scenario, kind, &mut seen)? {
                        Save::Saved(saved) => {
                            eprintln!("  saved {} ({})", saved.name, saved.difference);
                            tally.saved.push(saved);
                        }
                        Save::Duplicate => tally.duplicates += 1,
                        Save::NoLongerDiverges => {
                            tally.diverged = tally.diverged.saturating_sub(1);
                            tally.flaky += 1;
                        }
                    }
                }
            }
            if !options.keep_work {
                let _ = std::fs::remove_file(path);
            }
        }
        index = end;
        eprintln!(
            "[{:>5}/{}] agreed {} diverged {} non-deterministic {} ({:.0}s)",
            index,
            options.count,
            tally.agreed,
            tally.diverged,
            tally.non_deterministic,
            started.elapsed().as_secs_f64()
        );
    }
    print_summary(&options, &tally, started.elapsed());
    Ok(tally.diverged == 0 && tally.invalid == 0)
}

fn describe(ours: &Ours, difference: Option<&Difference>) -> String {
    match (ours, difference) {
        (_, Some(difference)) => difference.to_string(),
        (Ours::Rejected(message), None) => format!("ours rejected the scenario: {message}"),
        (ours, None) => format!("ours {}", ours.kind()),
    }
}

/// Minimize a confirmed divergence and save it with its golden (unless its minimized form was
/// already saved in this run, or it stopped diverging).
fn save_minimized(
    harness: &mut Harness,
    options: &Options,
    index: usize,
    scenario: Value,
    kind: &str,
    seen: &mut HashSet<String>,
) -> Result<Save, String> {
    let probe_name = format!("f-s{}-min", options.seed);
    let mut failure = None;
    let minimized = {
        let mut minimizer = minimize::Minimizer::new(options.max_checks, |candidate: &Value| {
            let mut candidate = candidate.clone();
            candidate["name"] = Value::from(probe_name.clone());
            let outcome = harness.write(&candidate).and_then(|path| harness.run_all(&[path]));
            match outcome {
                Ok(mut outcomes) => match outcomes.pop() {
                    Some((a, b, ours)) => matches!(
                        Harness::verdict(a, b, ours),
                        Verdict::Diverged { ours, .. } if ours.kind() == kind
                    ),
                    None => false,
                },
                Err(error) => {
                    failure.get_or_insert(error);
                    false
                }
            }
        });
        let minimized = minimizer.minimize(scenario.clone());
        eprintln!("  minimized with {} checks", minimizer.checks());
        minimized
    };
    if let Some(error) = failure {
        return Err(error);
    }
    let mut key = minimized.clone();
    if let Some(object) = key.as_object_mut() {
        object.shift_remove("name");
        object.shift_remove("description");
    }
    if !seen.insert(pi_testkit::normalize::sort_keys(key).to_string()) {
        return Ok(Save::Duplicate);
    }

    // Save under its final name and take the golden from a fresh reference run of that file.
    let name = format!("x-fuzz-s{}-{index}", options.seed);
    let mut saved = minimized;
    saved["name"] = Value::from(name.clone());
    let path = harness.write(&saved)?;
    let mut outcomes = harness.run_all(std::slice::from_ref(&path))?;
    let Some((a, b, ours)) = outcomes.pop() else { return Ok(Save::NoLongerDiverges) };
    let (golden, difference) = match Harness::verdict(a, b, ours) {
        Verdict::Diverged { golden, ours, difference } => (golden, describe(&ours, difference.as_ref())),
        _ => {
            // Timing under load: counted as flaky, not saved.
            eprintln!("  {name}: the minimized scenario no longer diverges (not saved)");
            return Ok(Save::NoLongerDiverges);
        }
    };
    if let Some(object) = saved.as_object_mut() {
        let description =
            format!("diff-fuzz seed {} scenario {index}, minimized. Diverged at {difference}.", options.seed);
        object.shift_remove("description");
        object.shift_insert(1, "description".into(), Value::from(description));
    }
    let text = serde_json::to_string_pretty(&saved).map_err(|e| e.to_string())? + "\n";
    let scenario_path = options.out.join("scenarios").join(format!("{name}.json"));
    std::fs::write(&scenario_path, text).map_err(|e| format!("{}: {e}", scenario_path.display()))?;
    let golden_path = options.out.join("golden").join(format!("{name}.jsonl"));
    std::fs::write(&golden_path, golden).map_err(|e| format!("{}: {e}", golden_path.display()))?;
    let _ = std::fs::remove_file(path);
    Ok(Save::Saved(Saved { name, difference }))
}

fn print_summary(options: &Options, tally: &Tally, elapsed: Duration) {
    println!("diff-fuzz seed {} ({:.0}s)", options.seed, elapsed.as_secs_f64());
    println!("  generated:                  {}", tally.generated);
    println!("  rejected by the reference:  {}", tally.invalid);
    println!("  skipped, non-deterministic: {}", tally.non_deterministic);
    println!("  skipped, diverged once:     {}", tally.flaky);
    println!("  agreed:                     {}", tally.agreed);
    println!("  diverged:                   {}", tally.diverged);
    for saved in &tally.saved {
        println!("    saved {}: {}", saved.name, saved.difference);
    }
    if tally.duplicates > 0 {
        println!("    {} more minimized to an already saved scenario", tally.duplicates);
    }
    if tally.not_saved > 0 {
        println!("    {} more not minimized (--max-saved {} reached)", tally.not_saved, options.max_saved);
    }
}
