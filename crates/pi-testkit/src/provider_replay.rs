//! Differential replay of a recorded provider response (the `replay-provider` runner).
//!
//! A case (see `tests/fixtures/providers/README` / the shared oracle's README) holds a model,
//! a context, options and a recorded HTTP response (or, for flows of several requests, a
//! `responses` list served in request order). [`replay_case`] serves it on a `127.0.0.1`
//! listener exactly as the reference oracle does (same bytes and chunk boundaries, chunked
//! transfer encoding when `chunks` is given, `content-length` otherwise, status 599 for any
//! request past the last answer), runs our adapter for the case's API against it, and returns
//! the normalized JSON Lines trace: one `request` line per request received, one `event` line
//! per stream event (with the partial message as it was when the event was emitted) and a
//! final `result` line. A case with `calls` makes more calls in the same session, each with the
//! context of the call before, its result and the call's `append` messages; its trace is, per
//! call, that call's requests, events and result. One-shot entries (`entry: "classify"` / `"generateImages"`) go through
//! `Models::classify` / `Models::generate_images` and print no events.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use pi_providers::api::google::gemini::{GoogleGenerativeAi, ToolCallIds};
use pi_types::transcript::normalize_context;
use pi_types::{Context, Model, StreamFn, StreamOptions, ThinkingLevel};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const DEFAULT_API_KEY: &str = "test-api-key-0000";
const DEFAULT_TIMEOUT_MS: u64 = 5000;
const DEFAULT_CHUNK_DELAY_MS: u64 = 3;
const BASE_URL_PLACEHOLDER: &str = "{{BASE_URL}}";

pub use crate::error::ReplayError;

/// A request the loopback server received.
#[derive(Clone, Debug)]
struct Received {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// What the server answers to the first request.
#[derive(Clone, Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    chunks: Option<Vec<usize>>,
    delay: Duration,
    disconnect: bool,
}

/// Replay one case file; returns the normalized trace (JSON Lines, trailing newline).
pub async fn replay_case(case_path: &Path) -> Result<String, ReplayError> {
    replay_case_on(case_path, DecodePath::Fast).await
}

/// Replay one case file as [`replay_case`] does, but with an `on_provider_stream_event` hook set
/// (one that does nothing): the adapters then read every event through their general path (a
/// parsed JSON value for the hook), never their typed decodes or the driver's delta fast path.
/// The trace must be [`replay_case`]'s.
pub async fn replay_case_general(case_path: &Path) -> Result<String, ReplayError> {
    replay_case_on(case_path, DecodePath::General).await
}

/// Which decode path a replay takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DecodePath {
    /// As a caller without a provider-event hook streams.
    Fast,
    /// With a hook that does nothing: every event parsed whole.
    General,
}

async fn replay_case_on(case_path: &Path, path: DecodePath) -> Result<String, ReplayError> {
    let text = tokio::fs::read_to_string(case_path).await?;
    let case: Value = serde_json::from_str(&text).map_err(|e| ReplayError::Case(e.to_string()))?;
    replay_value(&case, path).await
}

/// Replay one case file on a fresh current-thread runtime (for binaries and sync tests).
pub fn replay_case_blocking(case_path: &Path) -> Result<String, ReplayError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(replay_case(case_path))
}

/// The answers in request order: `responses` (multi-request flows) or the one `response`.
fn answers_of(case: &Value) -> Result<Vec<Answer>, ReplayError> {
    match case.get("responses").and_then(Value::as_array) {
        Some(list) => list.iter().map(answer_of).collect(),
        None => Ok(vec![answer_of(case.get("response").ok_or_else(|| ReplayError::Case("missing response".into()))?)?]),
    }
}

fn answer_of(response: &Value) -> Result<Answer, ReplayError> {
    let status = response.get("status").and_then(Value::as_u64).unwrap_or(200) as u16;
    let headers = response
        .get("headers")
        .and_then(Value::as_object)
        .map(|h| h.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned))).collect())
        .unwrap_or_default();
    // `body_base64` carries binary bodies (Bedrock's event stream); `body` is UTF-8 text.
    let body = match response.get("body_base64").and_then(Value::as_str) {
        Some(encoded) => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| ReplayError::Case(format!("invalid body_base64: {e}")))?
        }
        None => response.get("body").and_then(Value::as_str).unwrap_or("").as_bytes().to_vec(),
    };
    let chunks = response
        .get("chunks")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
        .map(|c| c.iter().filter_map(Value::as_u64).map(|n| n as usize).collect());
    let delay = std::env::var("REPLAY_CHUNK_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .or_else(|| response.get("chunk_delay_ms").and_then(Value::as_u64))
        .unwrap_or(DEFAULT_CHUNK_DELAY_MS);
    Ok(Answer {
        status,
        headers,
        body,
        chunks,
        delay: Duration::from_millis(delay),
        disconnect: response.get("disconnect") == Some(&Value::Bool(true)),
    })
}

fn substitute(value: &Value, base_url: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace(BASE_URL_PLACEHOLDER, base_url)),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, base_url)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), substitute(v, base_url))).collect()),
        other => other.clone(),
    }
}

/// A per-case tool-call id source: `<name>_<now>_<n>` with `n` from 1.
struct CaseIds(AtomicU64);

impl ToolCallIds for CaseIds {
    fn next_id(&self, name: &str) -> String {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        format!("{name}_{}_{n}", pi_types::now_ms())
    }
}

fn adapter_for(api: &str) -> Result<Arc<dyn StreamFn>, ReplayError> {
    Ok(match api {
        "openai-completions" => Arc::new(pi_providers::api::openai::completions::OpenAICompletions),
        "anthropic-messages" => Arc::new(pi_providers::api::anthropic::AnthropicMessages),
        "openai-responses" => Arc::new(pi_providers::api::openai::responses::OpenAIResponses),
        "azure-openai-responses" => Arc::new(pi_providers::api::openai::azure::AzureOpenAIResponses::default()),
        "openai-codex-responses" => Arc::new(pi_providers::api::openai::codex::OpenAICodexResponses::default()),
        "google-generative-ai" => Arc::new(GoogleGenerativeAi::with_ids(Arc::new(CaseIds(AtomicU64::new(0))))),
        "mistral-conversations" => Arc::new(pi_providers::api::mistral::MistralConversations),
        "google-vertex" => {
            Arc::new(pi_providers::api::google::vertex::GoogleVertex::with_ids(Arc::new(CaseIds(AtomicU64::new(0)))))
        }
        "pi-messages" => Arc::new(pi_providers::api::pi_messages::PiMessages),
        "bedrock-converse-stream" => Arc::new(pi_providers::api::bedrock::BedrockConverseStream),
        other => return Err(ReplayError::UnknownApi(other.to_owned())),
    })
}

/// Held while a case with a `sessionId` runs (see [`replay_value`]).
static SESSION_CASES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn replay_value(case: &Value, path: DecodePath) -> Result<String, ReplayError> {
    let api = case.get("api").and_then(Value::as_str).unwrap_or_default().to_owned();
    let entry = case.get("entry").and_then(Value::as_str).unwrap_or("streamSimple");
    let adapter = match entry {
        "classify" | "generateImages" => None,
        _ => Some(adapter_for(&api)?),
    };
    let answers = Arc::new(answers_of(case)?);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let base_url = format!("http://127.0.0.1:{port}");
    let received: Arc<Mutex<Vec<Received>>> = Arc::new(Mutex::new(Vec::new()));
    let server = tokio::spawn(serve(listener, answers, Arc::clone(&received)));

    let mut model_json = json!({
        "input": ["text"],
        "reasoning": false,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 128000,
        "maxTokens": 8192,
    });
    let case_model = substitute(case.get("model").unwrap_or(&Value::Null), &base_url);
    if let (Some(target), Some(id)) = (model_json.as_object_mut(), case_model.get("id")) {
        target.insert("name".into(), id.clone());
    }
    if let (Some(target), Some(source)) = (model_json.as_object_mut(), case_model.as_object()) {
        for (k, v) in source {
            target.insert(k.clone(), v.clone());
        }
        target.insert("api".into(), json!(api));
    }
    let Some(adapter) = adapter else {
        let result = one_shot(entry, case, model_json, &base_url).await?;
        server.abort();
        let requests = received.lock().map(|r| r.clone()).unwrap_or_default();
        let mut lines: Vec<Value> =
            requests.iter().map(|request| normalize(&request_record(request), &base_url, false)).collect();
        lines.push(normalize(&json!({"kind": "result", "message": result}), &base_url, false));
        return Ok(lines.iter().map(|line| pi_types::json::stringify(line) + "\n").collect());
    };
    let model: Model = serde_json::from_value(model_json).map_err(|e| ReplayError::Case(format!("model: {e}")))?;
    let context: Context = serde_json::from_value(case.get("context").cloned().unwrap_or(json!({"messages": []})))
        .map_err(|e| ReplayError::Case(format!("context: {e}")))?;
    let case_options = case.get("options").cloned().unwrap_or(json!({}));
    let on_path = |mut options: StreamOptions| {
        if path == DecodePath::General {
            options.on_provider_stream_event = Some(Arc::new(|_: &Value, _: &Model| Box::pin(async {}) as _));
        }
        options
    };
    let mut options = on_path(call_options_of(case, &case_options, entry, &api, &base_url)?);
    // What an adapter remembers per session (strict tool limits, message threads) lives for the
    // process; each case starts as in a fresh reference process, and cases with a session run
    // one at a time.
    let _session_guard = match &options.session_id {
        Some(_) => {
            let guard = SESSION_CASES.lock().await;
            pi_providers::cleanup_session_resources(None).map_err(|e| ReplayError::Case(e.to_string()))?;
            Some(guard)
        }
        None => None,
    };
    // `calls`: more calls in the same session, each with the context of the call before, its
    // result and the call's `append` messages, and the call's `options` (else the ones before).
    // The trace is, per call, its requests, its events and its result.
    let calls = case.get("calls").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let google = api == "google-generative-ai";
    let mut context = context;
    let mut seen = 0;
    let mut lines = Vec::new();
    for step in 0..=calls.len() {
        if let Some(call) = step.checked_sub(1).and_then(|i| calls.get(i)) {
            let append: Vec<pi_types::Message> =
                serde_json::from_value(call.get("append").cloned().unwrap_or(json!([])))
                    .map_err(|e| ReplayError::Case(format!("calls.append: {e}")))?;
            context.messages.extend(append);
            if let Some(call_options) = call.get("options") {
                options = on_path(call_options_of(case, call_options, entry, &api, &base_url)?);
            }
        }
        let mut stream = adapter.stream(&model, normalize_context(context.clone()), options.clone());
        let mut event_lines = Vec::new();
        while let Some(event) = stream.next().await {
            let value = serde_json::to_value(&event).map_err(|e| ReplayError::Case(e.to_string()))?;
            event_lines.push(json!({"kind": "event", "event": value}));
        }
        let result = stream.final_message().cloned();
        let requests = received.lock().map(|r| r[seen..].to_vec()).unwrap_or_default();
        seen += requests.len();
        for request in &requests {
            lines.push(normalize(&request_record(request), &base_url, google));
        }
        for line in &event_lines {
            lines.push(normalize(line, &base_url, google));
        }
        let message = result.as_ref().map(|m| serde_json::to_value(m.as_ref()).unwrap_or(Value::Null));
        lines.push(normalize(&json!({"kind": "result", "message": message.unwrap_or(Value::Null)}), &base_url, google));
        if let Some(reply) = result.filter(|_| step < calls.len()) {
            context.messages.push(pi_types::Message::Assistant(reply));
        }
    }
    server.abort();
    let mut out = String::new();
    for line in lines {
        out.push_str(&pi_types::json::stringify(&line));
        out.push('\n');
    }
    Ok(out)
}

/// The options of one call: the case's key, retries and timeout, its `env`, and the call's
/// options (the API's own for `entry: "stream"`).
fn call_options_of(
    case: &Value,
    case_options: &Value,
    entry: &str,
    api: &str,
    base_url: &str,
) -> Result<StreamOptions, ReplayError> {
    let options = StreamOptions {
        api_key: Some(case.get("apiKey").and_then(Value::as_str).unwrap_or(DEFAULT_API_KEY).to_owned()),
        max_tokens: case_options.get("maxTokens").and_then(Value::as_u64),
        reasoning: case_options.get("reasoning").and_then(|r| serde_json::from_value::<ThinkingLevel>(r.clone()).ok()),
        max_retries: Some(0),
        timeout_ms: Some(case_options.get("timeoutMs").and_then(Value::as_u64).unwrap_or(DEFAULT_TIMEOUT_MS)),
        transport: case_options.get("transport").and_then(|t| serde_json::from_value(t.clone()).ok()),
        session_id: case_options.get("sessionId").and_then(Value::as_str).map(str::to_owned),
        cache_retention: case_options.get("cacheRetention").and_then(|c| serde_json::from_value(c.clone()).ok()),
        disable_continuation: case_options.get("disableContinuation") == Some(&Value::Bool(true)),
        // The case's variables reach the adapter as `options.env` (the reference also sets them
        // in its process; here cases share one process, so they stay per request).
        env: case.get("env").and_then(Value::as_object).map(|env| {
            Arc::new(
                env.iter()
                    .map(|(k, v)| {
                        (k.clone(), substitute(v, base_url).as_str().map_or_else(|| v.to_string(), str::to_owned))
                    })
                    .collect(),
            )
        }),
        ..Default::default()
    };
    match entry {
        "stream" => own_options(api, case_options, options),
        _ => Ok(options),
    }
}

/// The options of an `entry: "stream"` case: the case's options as the API's own options type
/// (as the reference's `stream()` takes them), and its neutral members (`temperature`).
fn own_options(api: &str, case_options: &Value, mut options: StreamOptions) -> Result<StreamOptions, ReplayError> {
    use pi_providers::api::{anthropic, bedrock, google, mistral, openai, pi_messages, with_own_options};
    fn parse<T: serde::de::DeserializeOwned>(options: &Value) -> Result<T, ReplayError> {
        serde_json::from_value(options.clone()).map_err(|e| ReplayError::Case(format!("options: {e}")))
    }
    options.temperature = case_options.get("temperature").and_then(Value::as_f64);
    let o = case_options;
    Ok(match api {
        "anthropic-messages" => with_own_options(options, parse::<anthropic::AnthropicOptions>(o)?),
        "bedrock-converse-stream" => with_own_options(options, parse::<bedrock::BedrockOptions>(o)?),
        "google-generative-ai" => with_own_options(options, parse::<google::gemini::GoogleOptions>(o)?),
        "google-vertex" => with_own_options(options, parse::<google::vertex::GoogleVertexOptions>(o)?),
        "mistral-conversations" => with_own_options(options, parse::<mistral::MistralOptions>(o)?),
        "openai-completions" => with_own_options(options, parse::<openai::completions::OpenAICompletionsOptions>(o)?),
        "openai-responses" => with_own_options(options, parse::<openai::responses::OpenAIResponsesOptions>(o)?),
        "azure-openai-responses" => with_own_options(options, parse::<openai::azure::AzureOpenAIResponsesOptions>(o)?),
        "openai-codex-responses" => with_own_options(options, parse::<openai::codex::OpenAICodexResponsesOptions>(o)?),
        "pi-messages" => with_own_options(options, parse::<pi_messages::PiMessagesStreamOptions>(o)?),
        other => return Err(ReplayError::UnknownApi(other.to_owned())),
    })
}

/// A one-shot call (`classify`, `generateImages`) through a registry holding the case's
/// provider with the case's key, as the reference runner does; the result as JSON.
async fn one_shot(entry: &str, case: &Value, model_json: Value, base_url: &str) -> Result<Value, ReplayError> {
    use pi_providers::{Auth, Models, Provider};
    let case_options = case.get("options").cloned().unwrap_or(json!({}));
    let api_key = case.get("apiKey").and_then(Value::as_str).unwrap_or(DEFAULT_API_KEY).to_owned();
    let options = StreamOptions {
        api_key: Some(api_key.clone()),
        max_retries: Some(0),
        timeout_ms: Some(case_options.get("timeoutMs").and_then(Value::as_u64).unwrap_or(DEFAULT_TIMEOUT_MS)),
        temperature: case_options.get("temperature").and_then(Value::as_f64),
        session_id: case_options.get("sessionId").and_then(Value::as_str).map(str::to_owned),
        env: case.get("env").and_then(Value::as_object).map(|env| {
            Arc::new(
                env.iter()
                    .map(|(k, v)| {
                        (k.clone(), substitute(v, base_url).as_str().map_or_else(|| v.to_string(), str::to_owned))
                    })
                    .collect(),
            )
        }),
        ..Default::default()
    };
    let provider = model_json.get("provider").and_then(Value::as_str).unwrap_or_default().to_owned();
    let models = Models::new();
    models.set_provider(Provider::new(provider).with_auth(Auth::ApiKey(api_key)));
    let context = case.get("context").cloned().unwrap_or(Value::Null);
    let to_json = |value: Result<Value, serde_json::Error>| value.map_err(|e| ReplayError::Case(e.to_string()));
    if entry == "classify" {
        let model: pi_providers::classifier::ClassifierModel =
            serde_json::from_value(model_json).map_err(|e| ReplayError::Case(format!("model: {e}")))?;
        let context: pi_providers::classifier::ClassifierContext =
            serde_json::from_value(context).map_err(|e| ReplayError::Case(format!("context: {e}")))?;
        to_json(serde_json::to_value(models.classify(&model, &context, options).await))
    } else {
        let model: pi_providers::images::ImageModel =
            serde_json::from_value(model_json).map_err(|e| ReplayError::Case(format!("model: {e}")))?;
        let context: pi_providers::images::ImagesContext =
            serde_json::from_value(context).map_err(|e| ReplayError::Case(format!("context: {e}")))?;
        to_json(serde_json::to_value(models.generate_images(&model, &context, options).await))
    }
}

async fn serve(listener: TcpListener, answers: Arc<Vec<Answer>>, received: Arc<Mutex<Vec<Received>>>) {
    loop {
        let Ok((socket, _)) = listener.accept().await else { return };
        let answers = Arc::clone(&answers);
        let received = Arc::clone(&received);
        tokio::spawn(async move {
            let _ = handle_connection(socket, answers, received).await;
        });
    }
}

async fn read_request(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<Option<Received>> {
    let header_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    buffer.drain(..header_end + 4);
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or("/").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let get = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let body = if let Some(length) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        while buffer.len() < length {
            let mut chunk = [0u8; 8192];
            let n = socket.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buffer.extend_from_slice(&chunk[..n]);
        }
        let take = length.min(buffer.len());
        buffer.drain(..take).collect()
    } else if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(socket, buffer).await?
    } else {
        Vec::new()
    };
    Ok(Some(Received { method, target, headers, body }))
}

async fn read_chunked(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(pos) = buffer.windows(2).position(|w| w == b"\r\n") {
                break pos;
            }
            let mut chunk = [0u8; 8192];
            let n = socket.read(&mut chunk).await?;
            if n == 0 {
                return Ok(body);
            }
            buffer.extend_from_slice(&chunk[..n]);
        };
        let size_text = String::from_utf8_lossy(&buffer[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("0").trim(), 16).unwrap_or(0);
        buffer.drain(..line_end + 2);
        while buffer.len() < size + 2 {
            let mut chunk = [0u8; 8192];
            let n = socket.read(&mut chunk).await?;
            if n == 0 {
                return Ok(body);
            }
            buffer.extend_from_slice(&chunk[..n]);
        }
        body.extend(buffer.drain(..size));
        buffer.drain(..2);
        if size == 0 {
            return Ok(body);
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Site Overloaded",
        _ => "Unknown",
    }
}

async fn handle_connection(
    mut socket: TcpStream,
    answers: Arc<Vec<Answer>>,
    received: Arc<Mutex<Vec<Received>>>,
) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut socket, &mut buffer).await? {
        let count = {
            let mut all = received.lock().map_err(|_| std::io::Error::other("poisoned"))?;
            all.push(request);
            all.len()
        };
        let Some(answer) = answers.get(count - 1) else {
            let body = b"replay: unexpected extra request";
            let head = format!(
                "HTTP/1.1 599 Unknown\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n",
                body.len()
            );
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body).await?;
            socket.flush().await?;
            continue;
        };
        let mut head = format!("HTTP/1.1 {} {}\r\n", answer.status, reason_phrase(answer.status));
        let streamed = answer.chunks.is_some();
        for (name, value) in &answer.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let has_length = answer.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length"));
        if streamed {
            head.push_str("transfer-encoding: chunked\r\n");
        } else if !has_length {
            head.push_str(&format!("content-length: {}\r\n", answer.body.len()));
        }
        head.push_str("connection: keep-alive\r\n\r\n");
        socket.write_all(head.as_bytes()).await?;
        socket.flush().await?;
        match &answer.chunks {
            None => {
                socket.write_all(&answer.body).await?;
                socket.flush().await?;
            }
            Some(points) => {
                let mut cuts: Vec<usize> =
                    points.iter().copied().filter(|p| *p > 0 && *p < answer.body.len()).collect();
                cuts.sort_unstable();
                cuts.dedup();
                let mut start = 0;
                let mut pieces = Vec::new();
                for cut in cuts {
                    pieces.push(&answer.body[start..cut]);
                    start = cut;
                }
                pieces.push(&answer.body[start..]);
                for (index, piece) in pieces.iter().enumerate() {
                    if index > 0 && !answer.delay.is_zero() {
                        tokio::time::sleep(answer.delay).await;
                    }
                    if !piece.is_empty() {
                        socket.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await?;
                        socket.write_all(piece).await?;
                        socket.write_all(b"\r\n").await?;
                        socket.flush().await?;
                    }
                }
                if answer.disconnect {
                    tokio::time::sleep(answer.delay).await;
                    return Ok(());
                }
                socket.write_all(b"0\r\n\r\n").await?;
                socket.flush().await?;
            }
        }
    }
    Ok(())
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&text[i + 1..i + 3], 16) {
                Ok(byte) => {
                    out.push(byte);
                    i += 3;
                }
                Err(_) => {
                    out.push(b'%');
                    i += 1;
                }
            },
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn request_record(request: &Received) -> Value {
    let (path, query_text) = match request.target.split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (request.target.clone(), String::new()),
    };
    let mut query = Map::new();
    for pair in query_text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query.insert(percent_decode(k), Value::String(percent_decode(v)));
    }
    let get = |name: &str| request.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let present = |name: &str| get(name).is_some_and(|v| !v.is_empty());
    let raw = String::from_utf8_lossy(&request.body).into_owned();
    let body = if raw.is_empty() {
        Value::Null
    } else {
        serde_json::from_str::<Value>(&raw).unwrap_or_else(|_| json!({"__unparsed__": raw}))
    };
    json!({
        "kind": "request",
        "method": request.method,
        "path": path,
        "query": query,
        "headers": {
            "content-type": get("content-type").map_or(Value::Null, Value::String),
            "authorization": present("authorization"),
            "x-api-key": present("x-api-key"),
            "x-goog-api-key": present("x-goog-api-key"),
        },
        "body": body,
    })
}

/// The oracle's rule for ids the Gemini adapter synthesizes from the clock: `<prefix>_<13 digits>_<n>`
/// becomes `<prefix>_0_<n>`, whatever the prefix (the call's name, or `undefined` for a call
/// that came without one).
fn normalize_google_id(id: &str) -> String {
    let Some((head, counter)) = id.rsplit_once('_') else { return id.to_owned() };
    let Some((prefix, clock)) = head.rsplit_once('_') else { return id.to_owned() };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if clock.len() == 13 && digits(clock) && digits(counter) {
        format!("{prefix}_0_{counter}")
    } else {
        id.to_owned()
    }
}

/// The oracle's normalization: sorted keys, `timestamp` numbers 0, no `durationMs`, base URL
/// placeholder, Gemini synthesized tool-call ids without their clock part.
pub fn normalize(value: &Value, base_url: &str, google: bool) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(|v| normalize(v, base_url, google)).collect()),
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            let mut out = Map::new();
            for (key, v) in sorted {
                if key == "durationMs" {
                    continue;
                }
                let v = if key == "timestamp" && v.is_number() {
                    json!(0)
                } else if key == "id" && google && map.get("type").and_then(Value::as_str) == Some("toolCall") {
                    match v.as_str() {
                        Some(id) => Value::String(normalize_google_id(id)),
                        None => v.clone(),
                    }
                } else {
                    v.clone()
                };
                out.insert(key.clone(), normalize(&v, base_url, google));
            }
            Value::Object(out)
        }
        Value::String(s) if !base_url.is_empty() && s.contains(base_url) => {
            Value::String(s.replace(base_url, BASE_URL_PLACEHOLDER))
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_clock_ids_lose_their_clock_whatever_the_prefix() {
        assert_eq!(normalize_google_id("read_screen_1767225600123_2"), "read_screen_0_2");
        assert_eq!(normalize_google_id("undefined_1767225600123_3"), "undefined_0_3");
        assert_eq!(normalize_google_id("_1767225600123_3"), "_0_3");
        assert_eq!(normalize_google_id("call_abc"), "call_abc");
        assert_eq!(normalize_google_id("f_123_1"), "f_123_1");
        let call = json!({"type": "toolCall", "id": "undefined_1767225600123_4", "name": ""});
        assert_eq!(normalize(&call, "", true)["id"], "undefined_0_4");
        assert_eq!(normalize(&call, "", false)["id"], "undefined_1767225600123_4");
    }
}
