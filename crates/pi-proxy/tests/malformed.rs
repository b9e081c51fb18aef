//! 10 000 malformed requests against the proxy server: each is answered 4xx with a JSON
//! `{"error": "..."}`, none reaches the upstream, the server keeps serving, and the process's
//! memory stays bounded. Its own test binary, so that the resident-set figures are this
//! test's alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "proxy/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use pi_proxy::ProxyStreamFn;
use pi_types::{StreamFn, StreamOptions, TranscriptContext};
use serde_json::{json, Value};

use support::{body_for, config_with, faux, faux_provider, Rng, Stall, TestServer, TOKEN};

const CASES: usize = 10_000;
const SEED: u64 = 0x5eed_0011;
/// Longest wait for one answer before the test calls it a hang.
const PER_REQUEST: Duration = Duration::from_secs(20);
/// The server's body limit in this test (smaller than the default, to keep the run short).
const MAX_BODY: usize = 128 * 1024;

/// One malformed request.
struct Case {
    kind: &'static str,
    method: &'static str,
    path: &'static str,
    content_type: Option<&'static str>,
    token: Option<String>,
    body: Vec<u8>,
}

impl Case {
    fn post(kind: &'static str, body: Vec<u8>) -> Self {
        Self {
            kind,
            method: "POST",
            path: "/api/stream",
            content_type: Some("application/json"),
            token: Some(TOKEN.into()),
            body,
        }
    }
}

/// `value` with the field at `path` (dot-separated; digits index arrays) set to `new`.
fn with_field(mut value: Value, path: &str, new: Value) -> Value {
    let mut target = &mut value;
    for key in path.split('.') {
        target = match key.parse::<usize>() {
            Ok(index) => &mut target[index],
            Err(_) => &mut target[key],
        };
    }
    *target = new;
    value
}

/// Fields and values of the wrong type or out of range for them.
fn wrong_types() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        ("model", vec![json!(1), json!("faux-1"), json!(true), json!([]), json!(null)]),
        ("model.id", vec![json!(1), json!(true), json!([]), json!({}), json!(null)]),
        ("model.api", vec![json!(7), json!(["faux"]), json!(null)]),
        ("model.contextWindow", vec![json!("big"), json!(-1), json!(1.5), json!([]), json!({}), json!(true)]),
        ("model.cost", vec![json!("free"), json!([1, 2]), json!(3)]),
        ("model.input", vec![json!("text"), json!([1]), json!({})]),
        ("context", vec![json!(1), json!("hi"), json!([]), json!(true), json!(null)]),
        ("context.messages", vec![json!(1), json!("hi"), json!({}), json!(true), json!(null)]),
        ("context.messages.0", vec![json!(1), json!("hi"), json!([]), json!({}), json!(null)]),
        ("context.messages.0.role", vec![json!(1), json!("robot"), json!(null), json!([])]),
        ("context.messages.0.content", vec![json!(1), json!(true), json!({"type": "text"}), json!([{"type": "nope"}])]),
        ("context.messages.0.timestamp", vec![json!("now"), json!([]), json!({})]),
        // (`[]` would pass: serde reads an array as a struct's fields in order, all optional here.)
        ("options", vec![json!(1), json!("fast"), json!(["hot"]), json!(true)]),
        ("options.maxTokens", vec![json!(-1), json!("many"), json!(1.5), json!([]), json!({})]),
        ("options.temperature", vec![json!("hot"), json!([]), json!({})]),
        ("options.headers", vec![json!(1), json!("x"), json!([]), json!({"x-trace": 5})]),
        ("options.reasoning", vec![json!("extreme"), json!(1), json!([])]),
        ("options.cacheRetention", vec![json!("forever"), json!(1)]),
        ("options.samplingParams", vec![json!(1), json!("x"), json!([])]),
    ]
}

fn nested(depth: usize, open: &str, close: &str) -> String {
    format!("{}1{}", open.repeat(depth), close.repeat(depth))
}

/// The `index`-th case, drawn from every kind in turn with random content.
fn case(rng: &mut Rng, valid: &Value, index: usize) -> Case {
    let text = valid.to_string();
    assert!(text.contains("\"options\":{}") && text.contains("\"messages\":["), "{text}");
    match index % 12 {
        // Random bytes, any length up to 4 KiB.
        0 => Case::post("random bytes", rng.bytes(4096)),
        // A field of the wrong type.
        1 => {
            let fields = wrong_types();
            let (path, values) = rng.pick(&fields);
            let body = with_field(valid.clone(), path, rng.pick(values).clone());
            Case::post("wrong type", body.to_string().into_bytes())
        }
        // A huge string where the server looks it up or checks it (under the body limit).
        2 => {
            let huge = "x".repeat(16 * 1024 + rng.below(MAX_BODY - 32 * 1024));
            let (path, value) = match rng.below(4) {
                0 => ("model.id", json!(huge)),
                1 => ("model.provider", json!(huge)),
                2 => ("options.headers", json!({ huge: "v" })),
                _ => ("options.samplingParams", json!({ huge: 1 })),
            };
            Case::post("huge string", with_field(valid.clone(), path, value).to_string().into_bytes())
        }
        // Nesting far beyond what the parser accepts, in a field or as the whole body.
        3 => {
            let depth = 200 + rng.below(20_000);
            let deep = match rng.below(2) {
                0 => nested(depth, "[", "]"),
                _ => nested(depth, "{\"a\":", "}"),
            };
            let body = match rng.below(3) {
                0 => deep,
                1 => text.replacen("\"options\":{}", &format!("\"options\":{{\"metadata\":{deep}}}"), 1),
                _ => text.replacen("\"messages\":[", &format!("\"messages\":[{deep},"), 1),
            };
            Case::post("deep nesting", body.into_bytes())
        }
        // The valid body cut short.
        4 => {
            let cut = rng.below(text.len() - 1);
            Case::post("truncated JSON", text.as_bytes()[..cut].to_vec())
        }
        // A valid body declared as something else, or not declared.
        5 => {
            let content_type = *rng.pick(&[
                None,
                Some("text/plain"),
                Some("application/x-www-form-urlencoded"),
                Some("multipart/form-data; boundary=x"),
                Some("application/jsonx"),
                Some("text/json"),
            ]);
            Case { content_type, ..Case::post("wrong content type", text.into_bytes()) }
        }
        // Valid JSON of the wrong shape.
        6 => {
            let body = rng.pick(&["[]", "null", "1", "\"x\"", "true", "{}", "{\"model\":{}}", "[{}]"]);
            Case::post("wrong shape", body.as_bytes().to_vec())
        }
        // Invalid UTF-8 inside a string, or a lone surrogate escape.
        7 => {
            let mut body = text.into_bytes();
            let at = body.windows(2).position(|w| w == b"hi").unwrap();
            if rng.below(2) == 0 {
                body.splice(at..at + 2, [0xff, 0xfe, 0xc3]);
            } else {
                body.splice(at..at + 2, b"\\udc00\\ud800x".iter().copied());
            }
            Case::post("bad string", body)
        }
        // Trailing garbage after a valid body, or a duplicate field.
        8 => {
            let body = match rng.below(2) {
                0 => format!("{text} x{}", String::from_utf8_lossy(&rng.bytes(64))),
                // `model` twice.
                _ => format!("{{\"model\":1,{}", &text[1..]),
            };
            Case::post("trailing data", body.into_bytes())
        }
        // Over the body limit.
        9 => {
            let pad = "p".repeat(MAX_BODY + 1 + rng.below(16 * 1024));
            Case::post(
                "too large",
                with_field(valid.clone(), "options.metadata", json!({ "pad": pad })).to_string().into_bytes(),
            )
        }
        // No or a wrong token, with any body.
        10 => {
            let token =
                rng.pick(&[None, Some(""), Some("Basic abc"), Some("Bearer"), Some("Bearer wrong-token-000000000")]);
            let body = if rng.below(2) == 0 { text.into_bytes() } else { rng.bytes(512) };
            Case { token: token.map(str::to_owned), ..Case::post("bad token", body) }
        }
        // A wrong method or path.
        _ => {
            let (method, path) = *rng.pick(&[
                ("GET", "/api/stream"),
                ("PUT", "/api/stream"),
                ("DELETE", "/api/stream"),
                ("POST", "/api/streams"),
                ("POST", "/"),
                ("GET", "/api/../healthz/x"),
            ]);
            Case { method, path, ..Case::post("wrong method or path", text.into_bytes()) }
        }
    }
}

/// Peak and current resident set of this process in KiB (`VmHWM`, `VmRSS`).
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Status and body of one request; `Err` when no answer came.
async fn send(url: &str, case: &Case) -> Result<(u16, String), String> {
    let client = pi_providers::http_client().map_err(|e| e.to_string())?;
    let method = reqwest::Method::from_bytes(case.method.as_bytes()).map_err(|e| e.to_string())?;
    let mut request = client.request(method, format!("{url}{}", case.path)).body(case.body.clone());
    if let Some(content_type) = case.content_type {
        request = request.header("content-type", content_type);
    }
    if let Some(token) = &case.token {
        let value = if token.is_empty() || token.contains(' ') { token.clone() } else { format!("Bearer {token}") };
        request = request.header("authorization", value);
    }
    let answer = async {
        let response = request.send().await.map_err(|e| format!("{e:?}"))?;
        let status = response.status().as_u16();
        Ok((status, response.text().await.map_err(|e| e.to_string())?))
    };
    tokio::time::timeout(PER_REQUEST, answer).await.map_err(|_| format!("no answer within {PER_REQUEST:?}"))?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_malformed_requests_are_refused_with_json() {
    let stall = Stall::default();
    let faux = faux();
    let mut config = config_with(vec![stall.provider(), faux_provider(&faux)]);
    config.limits.max_body_bytes = MAX_BODY;
    config.allowed_headers = vec!["x-trace".into()];
    let server = TestServer::start(config).await;
    let valid = body_for(&Stall::model());
    let mut rng = Rng(SEED);
    // Cases are made as they are sent and answers checked as they come, so that the memory
    // figures are the server's and the client's, not the test's.
    let (peak_before, rss_before) = memory_kib();
    let started = Instant::now();
    let url = server.url.clone();
    let mut by_kind: BTreeMap<&str, BTreeMap<u16, usize>> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut answers = futures::stream::iter((0..CASES).map(|index| {
        let case = case(&mut rng, &valid, index);
        let url = url.clone();
        async move {
            let result = send(&url, &case).await;
            (index, case, result)
        }
    }))
    .buffer_unordered(8);
    while let Some((index, case, result)) = answers.next().await {
        match result {
            Ok((status, body)) => {
                *by_kind.entry(case.kind).or_default().entry(status).or_default() += 1;
                let has_error = serde_json::from_str::<Value>(&body)
                    .ok()
                    .is_some_and(|v| v["error"].as_str().is_some_and(|e| !e.is_empty()));
                if !(400..500).contains(&status) || !has_error {
                    failures.push(format!("#{index} {}: {status} {}", case.kind, &body[..body.len().min(200)]));
                }
            }
            Err(error) => failures.push(format!(
                "#{index} {}: no answer: {error}: {}",
                case.kind,
                String::from_utf8_lossy(&case.body[..case.body.len().min(300)])
            )),
        }
    }
    drop(answers);
    let elapsed = started.elapsed();
    let (peak_after, rss_after) = memory_kib();
    println!("{CASES} malformed requests in {:.1} s", elapsed.as_secs_f64());
    for (kind, statuses) in &by_kind {
        println!("  {kind:<22} {statuses:?}");
    }
    println!(
        "VmHWM {peak_before} KiB -> {peak_after} KiB, VmRSS {rss_before} KiB -> {rss_after} KiB (client and server)"
    );
    assert!(failures.is_empty(), "{} failures, first: {:#?}", failures.len(), &failures[..failures.len().min(10)]);
    assert!(stall.tokens.lock().unwrap().is_empty(), "a malformed request reached the upstream");
    // Generous bounds (a run measured +10 MiB): what 8 requests of at most 144 KiB in flight
    // need, many times over; a server that kept what it read would grow by hundreds of MiB.
    assert!(peak_after.saturating_sub(peak_before) < 128 * 1024, "peak grew by {} KiB", peak_after - peak_before);
    assert!(rss_after.saturating_sub(rss_before) < 64 * 1024, "RSS grew by {} KiB", rss_after - rss_before);

    // The server still serves.
    let client = ProxyStreamFn::new(&server.url, TOKEN);
    let message = client.stream(&faux.model(), TranscriptContext::default(), StreamOptions::default());
    let message = tokio::time::timeout(Duration::from_secs(20), message.result()).await.expect("answer");
    assert!(message.is_some());
}
