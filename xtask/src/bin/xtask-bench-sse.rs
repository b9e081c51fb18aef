//! One HTTP benchmark case in this process (what `cargo xtask bench` runs for each `sse-*`
//! workload, against the server at `BENCH_SSE_URL`): the runtime, the HTTP stack and the
//! adapters, without the provider SDKs the rest of xtask carries.

#[path = "../bench_args.rs"]
mod bench_args;
#[allow(dead_code)] // the one-case binary reads only its own CPU time
#[path = "../bench_load.rs"]
mod bench_load;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match bench_args::run_one(&args, pi_testkit::bench::run) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask-bench-sse: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
