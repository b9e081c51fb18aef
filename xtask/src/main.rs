//! Developer commands for pi-rs: a thin command line over `pi-testkit`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: cargo xtask <command>\n\ncommands:\n  replay SCENARIO.json            run a conformance scenario, print its trace");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("replay") => {
            let Some(path) = args.get(1) else { return usage() };
            match pi_testkit::replay::replay_file(Path::new(path)) {
                Ok(trace) => {
                    print!("{trace}");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("{error}");
                    ExitCode::from(2)
                }
            }
        }
        _ => usage(),
    }
}

#[allow(dead_code)]
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}
