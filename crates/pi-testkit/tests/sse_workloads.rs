//! Every HTTP workload of `shared/bench/WORKLOADS.md` at a tiny size against the vendored
//! `sse-server.mjs`, so that its checks (event count, transcript, content, one request per
//! model call) run in `cargo test`. Skipped, with the reason printed, when `node` is missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_testkit::bench::{run, BenchOptions};
use pi_testkit::bench_sse::{node_available, SseServer, APIS};

#[test]
fn every_sse_workload_passes_its_checks() {
    if !node_available() {
        println!("skipped: `node` is not installed (sse-server.mjs needs it)");
        return;
    }
    let server = SseServer::start().expect("sse-server.mjs starts");
    // `run` takes the server's URL from the environment, as `xtask-bench-sse` does.
    std::env::set_var("BENCH_SSE_URL", server.url());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut cases: Vec<(String, usize)> = Vec::new();
    for api in APIS {
        cases.push((format!("sse-{api}"), 1_001));
        cases.push((format!("sse-args-{api}"), 101));
        cases.push((format!("sse-thinking-{api}"), 1_003));
    }
    cases.push(("sse-agents".into(), 5));
    for (workload, size) in cases {
        let line = run(&workload, size, &runtime, BenchOptions::default())
            .unwrap_or_else(|error| panic!("{workload}:{size}: {error}"));
        let agents = if workload == "sse-agents" { size } else { 1 };
        let requests = if workload.starts_with("sse-args-") { 2 } else { 1 } * agents as u64;
        assert_eq!(line.requests, Some(requests), "{workload}");
        // One process for all cases: the client's pool may carry a connection over from the
        // case before (the bench runs each case in a process of its own).
        assert!(line.connections.is_some_and(|c| c <= requests), "{workload}: {line:?}");
        println!("{}", serde_json::to_string(&line).unwrap());
    }
}
