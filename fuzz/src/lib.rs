//! The bodies of the fuzz targets, shared with the regression tests in `tests/`.
//!
//! Each function panics exactly when it finds a bug: a panic inside pi, or a broken property.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use pi_providers::transport::sse::{FrameGuard, GeminiFramer, GeminiItem, SseDecoder, SseEvent};
use pi_types::transcript::normalize_context;
use pi_types::{Context, Message, Model, StreamFn, StreamOptions, UserMessage};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Split `data` into pieces: the first byte is the piece length (1..=256), the rest the text.
fn pieces(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((first, rest)) => (usize::from(*first) + 1, rest),
        None => (1, data),
    }
}

/// The body a loopback server sends next, already cut into writes.
static BODY: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

struct Loopback {
    url: String,
    runtime: tokio::runtime::Runtime,
}

fn loopback() -> &'static Loopback {
    static SERVER: OnceLock<Loopback> = OnceLock::new();
    SERVER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
                tx.send(format!("http://{}", listener.local_addr().expect("address"))).expect("send");
                loop {
                    let Ok((mut socket, _)) = listener.accept().await else { continue };
                    tokio::spawn(async move {
                        let mut head = Vec::new();
                        let mut buffer = [0u8; 8192];
                        // Read the head and the body (content-length) of the request.
                        loop {
                            let Ok(n) = socket.read(&mut buffer).await else { return };
                            if n == 0 {
                                return;
                            }
                            head.extend_from_slice(&buffer[..n]);
                            if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                                let text = String::from_utf8_lossy(&head[..end]).to_lowercase();
                                let length = text
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .and_then(|v| v.trim().parse::<usize>().ok())
                                    .unwrap_or(0);
                                if head.len() >= end + 4 + length {
                                    break;
                                }
                            }
                        }
                        let writes = BODY.lock().map(|b| b.clone()).unwrap_or_default();
                        let _ = socket
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
                            .await;
                        for write in writes {
                            if socket.write_all(&write).await.is_err() {
                                return;
                            }
                            let _ = socket.flush().await;
                        }
                        let _ = socket.shutdown().await;
                    });
                }
            });
        });
        let url = rx.recv().expect("server address");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        Loopback { url, runtime }
    })
}

fn adapter_for(api: &str, base_url: &str) -> Box<dyn StreamFn> {
    match api {
        "proxy" => Box::new(pi_proxy::ProxyStreamFn::new(base_url, "fuzz-token")),
        "openai-completions" => Box::new(pi_providers::api::openai::completions::OpenAICompletions),
        "anthropic-messages" => Box::new(pi_providers::api::anthropic::AnthropicMessages),
        "openai-responses" => Box::new(pi_providers::api::openai::responses::OpenAIResponses),
        "mistral-conversations" => Box::new(pi_providers::api::mistral::MistralConversations),
        "azure-openai-responses" => Box::new(pi_providers::api::openai::azure::AzureOpenAIResponses::default()),
        "openai-codex-responses" => Box::new(pi_providers::api::openai::codex::OpenAICodexResponses::default()),
        "google-vertex" => Box::new(pi_providers::api::google::vertex::GoogleVertex::default()),
        "pi-messages" => Box::new(pi_providers::api::pi_messages::PiMessages),
        "bedrock-converse-stream" => Box::new(pi_providers::api::bedrock::BedrockConverseStream),
        _ => Box::new(pi_providers::api::google::gemini::GoogleGenerativeAi::default()),
    }
}

/// `{"alg":"none"}` . `{"https://api.openai.com/auth":{"chatgpt_account_id":"acct-fuzz"}}` . (no signature)
const CODEX_FUZZ_TOKEN: &str =
    "eyJhbGciOiJub25lIn0.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOnsiY2hhdGdwdF9hY2NvdW50X2lkIjoiYWNjdC1mdXp6In19.";

/// One adapter over a body served in pieces: no panic, one terminal event, last, in bounded time.
/// `api` `"proxy"` is the proxy client reading a proxy server's event stream.
pub fn adapter(api: &str, data: &[u8]) {
    let (size, body) = pieces(data);
    if let Ok(mut slot) = BODY.lock() {
        *slot = body.chunks(size).map(<[u8]>::to_vec).collect();
    }
    let server = loopback();
    let mut model = Model::new("fuzz-model").with_api(api).with_provider("fuzz");
    model.base_url = server.url.clone();
    model.max_tokens = 1000;
    model.context_window = 100_000;
    let context = normalize_context(Context {
        system_prompt: None,
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    });
    // Codex reads its account id from the key, an (unsigned) JWT.
    let key = if api == "openai-codex-responses" { CODEX_FUZZ_TOKEN } else { "fuzz-key" };
    let options = StreamOptions {
        api_key: Some(key.into()),
        max_retries: Some(0),
        timeout_ms: Some(5_000),
        idle_timeout_ms: Some(5_000),
        // The fuzzed body is an HTTP answer: Codex's WebSocket transport is not tried.
        transport: Some(pi_types::Transport::Sse),
        ..Default::default()
    };
    let adapter = adapter_for(api, &server.url);
    let events = server.runtime.block_on(async {
        let collect = async {
            let mut stream = adapter.stream(&model, context, options);
            let mut events = Vec::new();
            while let Some(event) = stream.next().await {
                events.push(event);
            }
            events
        };
        tokio::time::timeout(Duration::from_secs(20), collect).await.expect("adapter hangs")
    });
    let terminals = events.iter().filter(|e| e.final_message().is_some()).count();
    assert_eq!(terminals, 1, "{api}: {} terminal events", terminals);
    assert!(events.last().and_then(|e| e.final_message()).is_some(), "{api}: terminal event not last");
}

fn sse_all(chunks: &mut dyn Iterator<Item = &[u8]>) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new();
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.push(chunk, &mut out);
    }
    decoder.finish(&mut out);
    out
}

fn gemini_all(chunks: &mut dyn Iterator<Item = &[u8]>) -> (Vec<String>, String, bool) {
    let mut framer = GeminiFramer::default();
    let mut out = Vec::new();
    for chunk in chunks {
        framer.push(chunk, &mut out);
    }
    let complete = framer.finish().is_ok();
    let mut data = Vec::new();
    let mut text = String::new();
    for item in out {
        match item {
            GeminiItem::Data(d) => data.push(d),
            GeminiItem::Chunk(c) => text.push_str(&c),
        }
    }
    (data, text, complete)
}

/// Framing is independent of where the network splits the bytes.
pub fn sse_framing(data: &[u8]) {
    let (size, body) = pieces(data);
    let whole = sse_all(&mut std::iter::once(body));
    let split = sse_all(&mut body.chunks(size));
    assert_eq!(whole, split, "standard SSE depends on the split");
    let whole = gemini_all(&mut std::iter::once(body));
    let split = gemini_all(&mut body.chunks(size));
    assert_eq!(whole, split, "Gemini framing depends on the split");
    let mut small = FrameGuard::new(64, 256);
    let mut guard_whole = FrameGuard::new(64, 256);
    let split_ok = body.chunks(size).all(|chunk| small.check(chunk).is_ok());
    assert_eq!(split_ok, guard_whole.check(body).is_ok(), "frame guard depends on the split");
}

/// Numbers compare by value (`1 == 1.0`).
fn comparable(value: Value) -> Value {
    match value {
        Value::Number(n) => n.as_f64().map(Value::from).unwrap_or(Value::Number(n)),
        Value::Array(items) => Value::Array(items.into_iter().map(comparable).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, comparable(v))).collect()),
        other => other,
    }
}

/// The streaming parser never panics, whatever the pieces; on small complete JSON objects its
/// final snapshot equals the final parse of the whole text.
pub fn streaming_json(data: &[u8]) {
    let (size, body) = pieces(data);
    let Ok(text) = std::str::from_utf8(body) else { return };
    let mut parser = pi_types::json::StreamingJsonParser::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = size.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        parser.append(&rest[..cut]);
        let _ = parser.snapshot();
        rest = &rest[cut..];
    }
    let streamed = parser.snapshot().cloned();
    let final_parse = pi_types::json::parse_streaming_json(Some(text));
    // Small texts never lag (each piece earns more snapshot credit than the text has members).
    let Ok(strict @ Value::Object(_)) = serde_json::from_str::<Value>(text) else { return };
    if text.len() > 200 || depth(&strict) > 30 || !finite(&strict) {
        return;
    }
    assert_eq!(comparable(final_parse), comparable(strict.clone()), "final parse differs from JSON.parse");
    assert_eq!(streamed.map(comparable), Some(comparable(strict)), "streamed value differs from JSON.parse");
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn finite(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64().is_some_and(f64::is_finite),
        Value::Array(items) => items.iter().all(finite),
        Value::Object(map) => map.values().all(finite),
        _ => true,
    }
}

/// Wire types: deserializing never panics, and what deserializes re-serializes to a value that
/// deserializes to the same thing.
pub fn wire_json(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    if let Ok(message) = pi_types::AgentMessage::from_json(value.clone()) {
        let again = serde_json::to_value(&message).expect("serialize AgentMessage");
        let back = pi_types::AgentMessage::from_json(again.clone()).expect("AgentMessage round trip");
        assert_eq!(serde_json::to_value(&back).expect("serialize"), again, "AgentMessage round trip");
    }
    if let Ok(event) = serde_json::from_value::<pi_types::AgentEvent>(value.clone()) {
        let again = serde_json::to_value(&event).expect("serialize AgentEvent");
        let back: pi_types::AgentEvent = serde_json::from_value(again.clone()).expect("AgentEvent round trip");
        assert_eq!(serde_json::to_value(&back).expect("serialize"), again, "AgentEvent round trip");
    }
    if let Ok(event) = serde_json::from_value::<pi_types::AssistantMessageEvent>(value.clone()) {
        let _ = serde_json::to_value(&event).expect("serialize AssistantMessageEvent");
    }
    let _ = serde_json::from_value::<pi_types::Model>(value.clone()).map(|m| format!("{m:?}"));
    let _ = serde_json::from_value::<pi_types::Context>(value).map(normalize_context);
}

/// Argument validation: `schema \0 arguments`; never panics, and coerced arguments validate.
pub fn arg_validation(data: &[u8]) {
    let mut parts = data.splitn(2, |b| *b == 0);
    let (Some(schema), Some(args)) = (parts.next(), parts.next()) else { return };
    let (Ok(schema), Ok(Value::Object(args))) =
        (serde_json::from_slice::<Value>(schema), serde_json::from_slice::<Value>(args))
    else {
        return;
    };
    let Ok(validator) = pi_types::validation::ArgumentValidator::new(&schema) else { return };
    let _ = validator.parse(&Value::Object(args.clone()));
    let _ = pi_types::validation::validate_tool_arguments("fuzz", &validator, &args, None);
}
