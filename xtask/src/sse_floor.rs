//! `cargo xtask sse-floor [--runs N] [--chars N] [API ...]`: how far the adapters are from the
//! machine. For each API's `text` body of `--chars` characters (default 1,000,000) from
//! `sse-server.mjs`, three rates in bytes of the body per second:
//!
//! * scan floor: `memchr` over the body in memory for the bytes that end its events (`\n`, and
//!   `\r` for Gemini's `\r\n\r\n`), one core;
//! * read floor: the body read over a loopback TCP connection from the server, nothing decoded
//!   (one POST on a fresh connection, as the adapters' first request);
//! * ours: the `sse-API` workload (HTTP client, SSE framing, typed decode, builder, agent,
//!   listener) in its own process, as the bytes over its CPU time (per core) and over its wall
//!   time.
//!
//! Medians of `--runs` (default 5).

use std::io::{Read, Write};
use std::time::Instant;

use serde_json::Value;

struct Options {
    runs: usize,
    chars: usize,
    apis: Vec<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options { runs: 5, chars: 1_000_000, apis: Vec::new() };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |flag: &str| {
            args.next()
                .and_then(|n| n.replace(['_', ','], "").parse::<usize>().ok())
                .filter(|n| *n > 0)
                .ok_or(format!("{flag} needs a number"))
        };
        match arg.as_str() {
            "--runs" => options.runs = number("--runs")?,
            "--chars" => options.chars = number("--chars")?,
            api if pi_testkit::bench_sse::APIS.contains(&api) => options.apis.push(api.to_owned()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if options.apis.is_empty() {
        options.apis = pi_testkit::bench_sse::APIS.iter().map(|a| (*a).to_owned()).collect();
    }
    Ok(options)
}

/// The route and API id of a short API name.
fn route(api: &str) -> (&'static str, &'static str) {
    match api {
        "anthropic" => ("anthropic-messages", "/anthropic-messages/v1/messages"),
        "completions" => ("openai-completions", "/openai-completions/v1/chat/completions"),
        "responses" => ("openai-responses", "/openai-responses/v1/responses"),
        _ => ("google-generative-ai", "/google-generative-ai/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
    }
}

/// One POST of the `text` body over a fresh connection: the body and the seconds from
/// connecting to its last byte.
fn read_body(url: &str, path: &str, chars: usize) -> Result<(Vec<u8>, f64), String> {
    let authority = url.trim_start_matches("http://");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
         x-bench-shape: text\r\nx-bench-chars: {chars}\r\nConnection: close\r\n\r\n{{}}"
    );
    let started = Instant::now();
    let mut socket = std::net::TcpStream::connect(authority).map_err(|e| format!("{url}: {e}"))?;
    socket.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    socket.read_to_end(&mut response).map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    let head_end = memchr::memmem::find(&response, b"\r\n\r\n").ok_or("no HTTP head")? + 4;
    if !response.starts_with(b"HTTP/1.1 200") {
        return Err(String::from_utf8_lossy(&response[..head_end]).into_owned());
    }
    Ok((response.split_off(head_end), seconds))
}

/// Seconds for one `memchr` pass over the body counting line-break bytes.
fn scan(body: &[u8]) -> f64 {
    let started = Instant::now();
    let breaks = memchr::memchr2_iter(b'\n', b'\r', body).count();
    std::hint::black_box(breaks);
    started.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn mb_per_s(bytes: usize, seconds: f64) -> String {
    format!("{:.0}", bytes as f64 / seconds / 1e6)
}

/// The command: a Markdown table on stdout.
pub fn run(args: &[String]) -> Result<String, String> {
    let options = parse(args)?;
    let exe = crate::bench_args::case_binary("sse-")?;
    let server = match std::env::var("BENCH_SSE_URL") {
        Ok(_) => None,
        Err(_) => Some(pi_testkit::bench_sse::SseServer::start()?),
    };
    let url = match &server {
        Some(server) => server.url().to_owned(),
        None => std::env::var("BENCH_SSE_URL").unwrap_or_default(),
    };
    let mut table = String::from(
        "| API | body MB | scan floor, MB/s | read floor, MB/s | ours, MB/s per core (CPU) | ours, MB/s (wall) \
         | ours / scan floor |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for api in &options.apis {
        let (_, path) = route(api);
        let mut reads = Vec::new();
        let mut body = Vec::new();
        for _ in 0..options.runs {
            let (bytes, seconds) = read_body(&url, path, options.chars)?;
            reads.push(seconds);
            body = bytes;
        }
        let scans = (0..options.runs.max(5) * 4).map(|_| scan(&body)).collect();
        let (mut cpu, mut wall) = (Vec::new(), Vec::new());
        for _ in 0..options.runs {
            let output = std::process::Command::new(&exe)
                .arg(format!("sse-{api}:{}", options.chars))
                .env("BENCH_SSE_URL", &url)
                .stderr(std::process::Stdio::inherit())
                .output()
                .map_err(|e| e.to_string())?;
            if !output.status.success() {
                return Err(format!("sse-{api} failed: {}", output.status));
            }
            let line: Value = serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())?;
            cpu.push(line.get("cpuS").and_then(Value::as_f64).unwrap_or(0.0));
            wall.push(line.get("wallMs").and_then(Value::as_f64).unwrap_or(0.0) / 1000.0);
        }
        let (scan_s, cpu_s) = (median(scans), median(cpu));
        table.push_str(&format!(
            "| {api} | {:.1} | {} | {} | {} | {} | {:.3} |\n",
            body.len() as f64 / 1e6,
            mb_per_s(body.len(), scan_s),
            mb_per_s(body.len(), median(reads)),
            mb_per_s(body.len(), cpu_s),
            mb_per_s(body.len(), median(wall)),
            scan_s / cpu_s,
        ));
    }
    drop(server);
    Ok(table)
}
