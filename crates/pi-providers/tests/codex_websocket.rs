//! Codex's WebSocket transport against the reference: each case of
//! `fixtures/codex_websocket/cases.json` runs against a loopback server answering WebSocket
//! upgrades and SSE POSTs with the case's frames, and what the server received, the events and
//! the final message must equal what pi-ai 1.6.1 printed for it (`golden.jsonl`, printed by
//! `reference_ws.mjs` beside it, which documents the format and its normalization).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pi_providers::api::openai::codex::OpenAICodexResponses;
use pi_types::transcript::normalize_context;
use pi_types::{Context, Model, StreamFn, StreamOptions};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const CASES: &str = include_str!("fixtures/codex_websocket/cases.json");
const GOLDEN: &str = include_str!("fixtures/codex_websocket/golden.jsonl");

/// Handshake and transport mechanics, not the adapter's headers (as the runner skips them).
const SKIPPED: [&str; 12] = [
    "host",
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "content-length",
    "transfer-encoding",
    "accept-encoding",
    "accept-language",
    "sec-fetch-mode",
    "user-agent",
];

fn is_uuid_v7(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
    lens == [8, 4, 4, 4, 12]
        && text.chars().all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        && parts[2].starts_with('7')
        && parts[3].starts_with(['8', '9', 'a', 'b'])
}

fn headers_of(raw: &[(String, String)]) -> Value {
    let mut out = BTreeMap::new();
    for (name, value) in raw {
        if SKIPPED.contains(&name.as_str()) {
            continue;
        }
        let value = if name == "authorization" {
            "<present>".to_owned()
        } else if is_uuid_v7(value) {
            "<uuid>".to_owned()
        } else {
            value.clone()
        };
        out.insert(name.clone(), Value::String(value));
    }
    json!(out)
}

fn normalize(value: &Value, base_url: &str) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(|v| normalize(v, base_url)).collect()),
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            let mut out = Map::new();
            for (key, v) in sorted {
                if key == "stack" || key == "durationMs" {
                    continue;
                }
                let v = if key == "timestamp" && v.is_number() { json!(0) } else { normalize(v, base_url) };
                out.insert(key.clone(), v);
            }
            Value::Object(out)
        }
        Value::String(s) if s.contains(base_url) => Value::String(s.replace(base_url, "{{BASE_URL}}")),
        other => other.clone(),
    }
}

/// What the server holds for one case, and what it received.
struct Script {
    connections: VecDeque<Value>,
    sse: VecDeque<String>,
    received: Vec<Value>,
    upgrades: u64,
}

type Shared = Arc<Mutex<Script>>;

async fn read_head(socket: &mut TcpStream) -> Option<(String, String, Vec<(String, String)>, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
    let rest = buffer[end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Some((method, path, headers, rest))
}

async fn serve(listener: TcpListener, script: Shared) {
    loop {
        let Ok((socket, _)) = listener.accept().await else { return };
        tokio::spawn(connection(socket, Arc::clone(&script)));
    }
}

async fn connection(mut socket: TcpStream, script: Shared) {
    let Some((method, path, headers, mut rest)) = read_head(&mut socket).await else { return };
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    if header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket")) {
        let (index, plan) = {
            let mut script = script.lock().unwrap();
            let index = script.upgrades;
            script.upgrades += 1;
            script
                .received
                .push(json!({"kind": "upgrade", "connection": index, "path": path, "headers": headers_of(&headers)}));
            (index, script.connections.pop_front().unwrap_or(json!({"reject": 503})))
        };
        if let Some(status) = plan.get("reject").and_then(Value::as_u64) {
            let answer = format!("HTTP/1.1 {status} Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = socket.write_all(answer.as_bytes()).await;
            return;
        }
        let accept = derive_accept_key(header("sec-websocket-key").unwrap_or_default().as_bytes());
        let answer = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
        );
        socket.write_all(answer.as_bytes()).await.unwrap();
        let mut ws = WebSocketStream::from_raw_socket(socket, Role::Server, None).await;
        let mut answers: VecDeque<Value> = plan["answers"].as_array().cloned().unwrap_or_default().into();
        while let Some(Ok(message)) = ws.next().await {
            let Message::Text(text) = message else { continue };
            let message: Value = serde_json::from_str(text.as_str()).unwrap();
            script.lock().unwrap().received.push(json!({"kind": "message", "connection": index, "message": message}));
            for frame in answers.pop_front().and_then(|a| a.as_array().cloned()).unwrap_or_default() {
                if let Some(close) = frame.get("close") {
                    let code = CloseCode::from(close[0].as_u64().unwrap() as u16);
                    let reason = close[1].as_str().unwrap_or_default().to_owned();
                    let _ = ws.close(Some(CloseFrame { code, reason: reason.into() })).await;
                    break;
                }
                ws.send(Message::text(frame.to_string())).await.unwrap();
            }
        }
        return;
    }
    let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while rest.len() < length {
        let mut chunk = vec![0u8; length - rest.len()];
        let Ok(n) = socket.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        rest.extend_from_slice(&chunk[..n]);
    }
    let body: Value = if rest.is_empty() { Value::Null } else { serde_json::from_slice(&rest).unwrap() };
    let answer = {
        let mut script = script.lock().unwrap();
        script.received.push(
            json!({"kind": "http", "method": method, "path": path, "headers": headers_of(&headers), "body": body}),
        );
        script.sse.pop_front()
    };
    let response = match answer {
        Some(body) => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        None => "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
    };
    let _ = socket.write_all(response.as_bytes()).await;
}

/// A server playing `case`'s connections and SSE answers, and the case's model pointed at it.
async fn start(case: &Value) -> (Shared, Model, String, tokio::task::JoinHandle<()>) {
    let script = Arc::new(Mutex::new(Script {
        connections: case["connections"].as_array().unwrap().iter().cloned().collect(),
        sse: case["sse"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect(),
        received: Vec::new(),
        upgrades: 0,
    }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let server = tokio::spawn(serve(listener, Arc::clone(&script)));
    let model_text = case["model"].to_string().replace("{{BASE_URL}}", &base_url);
    (script, serde_json::from_str(&model_text).unwrap(), base_url, server)
}

async fn run_case(case: &Value) -> Vec<Value> {
    pi_providers::cleanup_session_resources(None).unwrap();
    let (script, model, base_url, server) = start(case).await;
    let name = case["name"].as_str().unwrap();
    let mut lines = Vec::new();
    let mut context: Option<Value> = None;
    let mut last_result = Value::Null;
    for (index, request) in case["requests"].as_array().unwrap().iter().enumerate() {
        let next = match request.get("continue") {
            Some(text) => {
                let mut next = context.clone().unwrap();
                let messages = next["messages"].as_array_mut().unwrap();
                messages.push(last_result.clone());
                messages.push(json!({"role": "user", "content": text, "timestamp": 1}));
                next
            }
            None => request["context"].clone(),
        };
        context = Some(next.clone());
        let parsed: Context = serde_json::from_value(next).unwrap();
        let options = &request["options"];
        let options = StreamOptions {
            api_key: Some(case["apiKey"].as_str().unwrap().to_owned()),
            max_retries: Some(0),
            timeout_ms: Some(5000),
            transport: serde_json::from_value(options["transport"].clone()).ok(),
            session_id: options["sessionId"].as_str().map(str::to_owned),
            ..Default::default()
        };
        script.lock().unwrap().received.clear();
        let mut stream = OpenAICodexResponses::default().stream(&model, normalize_context(parsed), options);
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(serde_json::to_value(&event).unwrap());
        }
        let result = serde_json::to_value(stream.final_message().unwrap().as_ref()).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let received = std::mem::take(&mut script.lock().unwrap().received);
        for mut record in received {
            record["request"] = json!(index);
            lines.push(record);
        }
        for event in events {
            lines.push(json!({"request": index, "kind": "event", "event": event}));
        }
        lines.push(json!({"request": index, "kind": "result", "message": result}));
        last_result = result;
    }
    server.abort();
    lines
        .into_iter()
        .map(|mut line| {
            line["case"] = json!(name);
            normalize(&line, &base_url)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_cases_replay_as_the_reference() {
    let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
    let golden: Vec<&str> = GOLDEN.lines().collect();
    let mut lines = Vec::new();
    for case in &cases {
        // Printed as `JSON.stringify` prints (numbers as JavaScript writes them).
        lines.extend(run_case(case).await.iter().map(pi_types::json::stringify));
    }
    let mut mismatches = Vec::new();
    for (index, (ours, theirs)) in lines.iter().zip(&golden).enumerate() {
        if ours != *theirs {
            mismatches.push(format!("line {}:\n  ours:      {ours}\n  reference: {theirs}", index + 1));
        }
    }
    assert!(
        mismatches.is_empty() && lines.len() == golden.len(),
        "{} lines (reference {}); differences:\n{}",
        lines.len(),
        golden.len(),
        mismatches.join("\n")
    );
}

/// The first case's model with these connections and SSE answers.
async fn start_with(connections: Value, sse: Value) -> (Shared, Model, tokio::task::JoinHandle<()>) {
    let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
    let case = json!({"model": cases[0]["model"], "connections": connections, "sse": sse});
    let (script, model, _, server) = start(&case).await;
    (script, model, server)
}

fn hello() -> pi_types::TranscriptContext {
    normalize_context(
        serde_json::from_value(json!({"messages": [{"role": "user", "content": "Hi", "timestamp": 1}]})).unwrap(),
    )
}

fn key() -> String {
    let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
    cases[0]["apiKey"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_socket_hits_the_idle_limit_and_falls_back_to_sse() {
    let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
    let sse = cases[2]["sse"][0].clone();
    let (script, model, server) = start_with(json!([{"answers": [[]]}]), json!([sse])).await;
    let options = StreamOptions {
        api_key: Some(key()),
        timeout_ms: Some(300),
        transport: Some(pi_types::Transport::Websocket),
        session_id: Some("ws-idle".into()),
        ..Default::default()
    };
    let run = OpenAICodexResponses::default().stream(&model, hello(), options);
    let message = tokio::time::timeout(Duration::from_secs(20), run.result()).await.expect("no hang").unwrap();
    assert_eq!(message.text(), "Hi.");
    let diagnostic = serde_json::to_value(&message.diagnostics.as_ref().unwrap()[0]).unwrap();
    assert_eq!(diagnostic["error"]["message"], "WebSocket idle timeout after 300ms");
    assert_eq!(diagnostic["details"]["fallbackTransport"], "sse");
    let kinds: Vec<Value> = script.lock().unwrap().received.iter().map(|r| r["kind"].clone()).collect();
    assert_eq!(kinds, [json!("upgrade"), json!("message"), json!("http")]);
    server.abort();
    pi_providers::cleanup_session_resources(Some("ws-idle")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_stream_aborts_without_a_fallback() {
    let cases: Vec<Value> = serde_json::from_str(CASES).unwrap();
    // The first delta, then silence: only the cancellation ends the wait.
    let frames: Vec<Value> = cases[0]["connections"][0]["answers"][0].as_array().unwrap()[..4].to_vec();
    let (script, model, server) = start_with(json!([{"answers": [frames]}]), json!([])).await;
    let cancel = pi_types::CancellationToken::new();
    let options = StreamOptions {
        api_key: Some(key()),
        cancel: Some(cancel.clone()),
        transport: Some(pi_types::Transport::Websocket),
        ..Default::default()
    };
    let mut stream = OpenAICodexResponses::default().stream(&model, hello(), options);
    let mut kinds = Vec::new();
    let run = async {
        while let Some(event) = stream.next().await {
            if event.type_name() == "text_delta" {
                cancel.cancel();
            }
            kinds.push(event.type_name());
        }
    };
    tokio::time::timeout(Duration::from_secs(20), run).await.expect("no hang");
    assert_eq!(kinds, ["start", "text_start", "text_delta", "error"]);
    let message = stream.final_message().unwrap();
    assert_eq!(message.stop_reason, pi_types::StopReason::Aborted);
    assert_eq!(message.error_message.as_deref(), Some("Request was aborted"));
    assert!(message.diagnostics.is_none());
    assert!(script.lock().unwrap().received.iter().all(|r| r["kind"] != "http"), "no SSE request");
    server.abort();
}
