//! One faux benchmark case in this process (what `cargo xtask bench` runs for each faux
//! workload): a binary that links the runtime and the faux provider only, so a case's peak RSS
//! is the runtime's, not the HTTP stack's or the provider SDKs' the rest of xtask carries.

#[path = "../bench_args.rs"]
mod bench_args;
#[allow(dead_code)] // the one-case binary reads only its own CPU time
#[path = "../bench_load.rs"]
mod bench_load;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match bench_args::run_one(&args, pi_testkit::bench::run_faux) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask-bench-one: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
