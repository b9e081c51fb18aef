//! Codex over a WebSocket (`transport` `websocket`, `websocket-cached`, `auto` or unset), as
//! pi-ai 1.6.1 streams it.
//!
//! The socket goes to the SSE URL with `ws`/`wss` ([`super::codex_url`]), with the SSE headers
//! less `accept`, `content-type` and `OpenAI-Beta`, plus `OpenAI-Beta:
//! responses_websockets=2026-02-06` and `session-id` = `x-client-request-id` = the (clamped)
//! session id, or a fresh UUIDv7. The request is one text message, `{"type":
//! "response.create", ...body}`; each answer message is one event for [`CodexDecode`], and
//! `start` goes out with the first event the stream processing receives.
//!
//! Connections are kept per session and account: a finished request leaves its socket for the
//! session's next one (idle for at most 5 minutes, reused for at most 45 minutes after it was
//! opened); a request while the session's socket is busy opens one of its own. Without a session
//! every request opens and closes its own. With `websocket-cached` or `auto` the socket also keeps
//! the last request and the items of its answer: a next request whose body is the same but for
//! `input`, and whose input starts with that request's input plus the answer, sends only the new
//! items with `previous_response_id` (the socket's server keeps the rest).
//!
//! Failures: a `previous_response_not_found` error is retried once in full; a
//! `websocket_connection_limit_reached` error before any event once, and then falls back like a
//! transport failure. Another error event, an event that is not JSON, or a cancellation fail the
//! request. A transport failure (connect, handshake, close, idle limit, the stream processing's
//! own checks) records a `provider_transport_failure` diagnostic on the message and turns the
//! session's later requests to SSE; before the first event the request itself goes on over SSE,
//! after it the request fails. [`forget`] (through `cleanup_session_resources`) closes a
//! session's sockets and forgets its fallback; the reference keeps fallbacks for the life of the
//! process, which would grow without bound in a long-running host.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pi_types::transcript::normalize_context;
use pi_types::{AssistantMessageDiagnostic, Context, DiagnosticCode, DiagnosticErrorInfo, Message, Transport};
use serde_json::{json, Map, Value};

use crate::api::driver::{self, Cx, Flow};
use crate::api::openai::responses::{convert_messages, Compat};
use crate::api::support::Stop;
use crate::js_json;
use crate::transport::http::{self, DEFAULT_IDLE_TIMEOUT_MS};
use crate::transport::websocket::{self as ws, Socket, WsFailure};

use super::decode::{self, CodexDecode, Failure, Fault};

/// The `OpenAI-Beta` value of the WebSocket protocol.
pub(super) const BETA: &str = "responses_websockets=2026-02-06";
/// How long a session's socket waits for the session's next request.
const IDLE_TTL: Duration = Duration::from_secs(5 * 60);
/// How long after opening a socket is still reused (the server closes it at 60 minutes).
const MAX_AGE: Duration = Duration::from_secs(45 * 60);
const CONNECTION_LIMIT: &str = "websocket_connection_limit_reached";
const PREVIOUS_RESPONSE_NOT_FOUND: &str = "previous_response_not_found";

/// One request's WebSocket side.
pub(crate) struct Plan {
    /// `ws(s)://.../codex/responses`.
    pub(super) url: String,
    /// The upgrade's headers.
    pub(super) headers: Vec<(String, String)>,
    /// The request body (after `on_payload`).
    pub(super) body: Value,
    /// The session the socket is kept for (the unclamped session id, unless caching is off).
    pub(super) session: Option<String>,
    /// The account the socket is kept for.
    pub(super) account: String,
    /// The transport asked for (`auto` when unset).
    pub(super) configured: Transport,
    /// Whether requests go as deltas on a kept socket (`websocket-cached`, `auto` set).
    pub(super) cached: bool,
    /// The body's length, for the diagnostic.
    pub(super) request_bytes: usize,
    /// How the answer's items are rendered for the next delta.
    pub(super) compat: Compat,
}

/// The WebSocket URL of a base URL.
pub(super) fn url(base_url: &str) -> String {
    let url = super::codex_url(base_url);
    match url.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some(("http", rest)) => format!("ws://{rest}"),
        _ => url,
    }
}

/// A UUIDv7 (the request id of a request without a session).
pub(super) fn uuid_v7() -> String {
    let ms = pi_types::now_ms() & 0xffff_ffff_ffff;
    let random = fastrand::u128(..);
    let value = (u128::from(ms) << 80) | (0x7u128 << 76) | (random & 0x0fff_3fff_ffff_ffff_ffff) | (0x2u128 << 62);
    let hex = format!("{value:032x}");
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

struct Continuation {
    body: Value,
    response_id: String,
    items: Vec<Value>,
}

struct Entry {
    /// `None` while a request uses it.
    socket: Option<Socket>,
    busy: bool,
    created: Instant,
    continuation: Option<Continuation>,
    id: u64,
    /// Bumped at each release: an expiry timer only closes the socket it was set for.
    epoch: u64,
}

type Sessions = HashMap<String, HashMap<String, Entry>>;

static SOCKETS: LazyLock<Mutex<Sessions>> = LazyLock::new(|| Mutex::new(HashMap::new()));
static FALLBACKS: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(|| Mutex::new(HashSet::new()));
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn sockets() -> std::sync::MutexGuard<'static, Sessions> {
    SOCKETS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fallbacks() -> std::sync::MutexGuard<'static, HashSet<String>> {
    FALLBACKS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Close a socket from code that cannot wait (a cleanup, a timer): in the background when a
/// runtime runs, else by dropping it.
fn close_detached(socket: Socket, reason: &'static str) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(socket.close(1000, reason));
    }
}

fn remove_entry(sessions: &mut Sessions, session: &str, account: &str, id: u64) -> Option<Entry> {
    let accounts = sessions.get_mut(session)?;
    if accounts.get(account)?.id != id {
        return None;
    }
    let entry = accounts.remove(account);
    if accounts.is_empty() {
        sessions.remove(session);
    }
    entry
}

/// Close the sockets of `session` (every session for `None`) and forget its SSE fallback.
pub(crate) fn forget(session: Option<&str>) {
    let removed: Vec<Entry> = {
        let mut sessions = sockets();
        match session {
            Some(session) => sessions.remove(session).map(|a| a.into_values().collect()).unwrap_or_default(),
            None => sessions.drain().flat_map(|(_, a)| a.into_values()).collect(),
        }
    };
    for socket in removed.into_iter().filter_map(|e| e.socket) {
        close_detached(socket, "debug_close");
    }
    let mut fallbacks = fallbacks();
    match session {
        Some(session) => {
            fallbacks.remove(session);
        }
        None => fallbacks.clear(),
    }
}

/// A socket in use, and where it returns.
struct Lease {
    socket: Socket,
    /// Session, account and entry id of a kept socket.
    slot: Option<(String, String, u64)>,
    continuation: Option<Continuation>,
}

async fn acquire(plan: &Plan, timeout: Option<Duration>, cx: &Cx<'_>) -> Result<Lease, WsFailure> {
    let cancel = cx.options.cancel.as_ref();
    let connect = || ws::connect(&plan.url, &plan.headers, timeout, cancel);
    let Some(session) = plan.session.clone() else {
        return Ok(Lease { socket: connect().await?, slot: None, continuation: None });
    };
    let account = plan.account.clone();
    let mut own = false;
    {
        let mut sessions = sockets();
        if let Some(entry) = sessions.get_mut(&session).and_then(|a| a.get_mut(&account)) {
            let id = entry.id;
            if !entry.busy && entry.created.elapsed() >= MAX_AGE {
                if let Some(socket) = remove_entry(&mut sessions, &session, &account, id).and_then(|e| e.socket) {
                    close_detached(socket, "connection_age_limit");
                }
            } else if !entry.busy && entry.socket.as_ref().is_some_and(Socket::is_open) {
                if let Some(socket) = entry.socket.take() {
                    entry.busy = true;
                    let continuation = entry.continuation.take();
                    return Ok(Lease { socket, slot: Some((session, account, id)), continuation });
                }
            } else if entry.busy {
                own = true;
            } else if let Some(socket) = remove_entry(&mut sessions, &session, &account, id).and_then(|e| e.socket) {
                close_detached(socket, "done");
            }
        }
    }
    let socket = connect().await?;
    if own {
        return Ok(Lease { socket, slot: None, continuation: None });
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let entry = Entry { socket: None, busy: true, created: Instant::now(), continuation: None, id, epoch: 0 };
    if let Some(old) = sockets().entry(session.clone()).or_default().insert(account.clone(), entry) {
        if let Some(socket) = old.socket {
            close_detached(socket, "done");
        }
    }
    Ok(Lease { socket, slot: Some((session, account, id)), continuation: None })
}

async fn release(lease: Lease, keep: bool) {
    let Lease { socket, slot, continuation } = lease;
    let Some((session, account, id)) = slot else {
        socket.close(1000, "done").await;
        return;
    };
    let kept = keep && socket.is_open();
    let refused = {
        let mut sessions = sockets();
        match sessions.get_mut(&session).and_then(|a| a.get_mut(&account)).filter(|e| e.id == id) {
            Some(entry) if kept => {
                entry.socket = Some(socket);
                entry.busy = false;
                entry.continuation = continuation;
                entry.epoch = entry.epoch.wrapping_add(1);
                schedule_expiry(session, account, id, entry.epoch);
                None
            }
            Some(_) => {
                remove_entry(&mut sessions, &session, &account, id);
                Some(socket)
            }
            None => Some(socket),
        }
    };
    if let Some(socket) = refused {
        socket.close(1000, "done").await;
    }
}

fn schedule_expiry(session: String, account: String, id: u64, epoch: u64) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
    handle.spawn(async move {
        tokio::time::sleep(IDLE_TTL).await;
        let socket = {
            let mut sessions = sockets();
            let idle = sessions
                .get(&session)
                .and_then(|a| a.get(&account))
                .is_some_and(|e| e.id == id && e.epoch == epoch && !e.busy);
            if idle {
                remove_entry(&mut sessions, &session, &account, id).and_then(|e| e.socket)
            } else {
                None
            }
        };
        if let Some(socket) = socket {
            socket.close(1000, "idle_timeout").await;
        }
    });
}

fn without_input(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(object) = body.as_object_mut() {
        object.shift_remove("input");
        object.shift_remove("previous_response_id");
    }
    body
}

fn input(body: &Value) -> &[Value] {
    body.get("input").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The new input items of `body` after the continuation's request and answer, if `body`
/// continues them.
fn delta<'b>(body: &'b Value, continuation: &Continuation) -> Option<&'b [Value]> {
    if without_input(body) != without_input(&continuation.body) {
        return None;
    }
    let current = input(body);
    let last = input(&continuation.body);
    let baseline = last.len().checked_add(continuation.items.len())?;
    if current.len() < baseline {
        return None;
    }
    let (prefix, rest) = current.split_at(baseline);
    let matches = prefix.iter().zip(last.iter().chain(continuation.items.iter())).all(|(a, b)| a == b);
    matches.then_some(rest)
}

/// The body to send: a delta on a kept socket that can continue, else the whole body (and a
/// continuation that cannot is dropped).
fn request_body(plan: &Plan, continuation: &mut Option<Continuation>) -> Value {
    let Some(last) = continuation.as_ref() else { return plan.body.clone() };
    let items = match delta(&plan.body, last) {
        Some(items) if !last.response_id.is_empty() => items.to_vec(),
        _ => {
            *continuation = None;
            return plan.body.clone();
        }
    };
    let mut body = plan.body.clone();
    if let Some(object) = body.as_object_mut() {
        object.insert("previous_response_id".into(), json!(last.response_id));
        object.insert("input".into(), Value::Array(items));
    }
    body
}

/// The answer as the next request's input items (tool results left out).
fn answer_items(plan: &Plan, cx: &Cx<'_>) -> Vec<Value> {
    let message = Message::Assistant(std::sync::Arc::new(cx.out.message().clone()));
    let context = normalize_context(Context { system_prompt: None, messages: vec![message], tools: None });
    convert_messages(cx.model, &context, &plan.compat, None)
        .into_iter()
        .filter(|item| {
            !matches!(
                item.get("type").and_then(Value::as_str),
                Some("function_call_output" | "custom_tool_call_output")
            )
        })
        .collect()
}

fn failure(error: WsFailure) -> Failure {
    let stop = if error.aborted { Stop::aborted(error.message) } else { Stop::error(error.message) };
    Failure { stop, fault: Fault::Transport, name: error.name, code: error.code.map(|c| json!(c)) }
}

/// Stream the request over a WebSocket; `None` sends it over SSE (see the module docs).
pub(super) async fn run(decoder: &mut CodexDecode, cx: &mut Cx<'_>) -> Option<Result<(), Stop>> {
    let plan = decoder.ws.take()?;
    if plan.session.as_deref().is_some_and(|s| fallbacks().contains(s)) {
        return None;
    }
    let mut retried_limit = false;
    let mut retried_missing = false;
    loop {
        decoder.emit_start = true;
        decoder.started = false;
        let error = match attempt(&plan, decoder, cx).await {
            Ok(()) => return Some(Ok(())),
            Err(error) => error,
        };
        let aborted = cx.cancelled();
        let started = decoder.started;
        let code = match &error.fault {
            Fault::Api(code) => code.as_deref(),
            _ => None,
        };
        if !aborted && code == Some(PREVIOUS_RESPONSE_NOT_FOUND) && !retried_missing {
            retried_missing = true;
            decoder.reset();
            continue;
        }
        let limit_before_start = !started && code == Some(CONNECTION_LIMIT);
        if !aborted && limit_before_start && !retried_limit {
            retried_limit = true;
            decoder.reset();
            continue;
        }
        if aborted {
            return Some(Err(Stop::aborted(error.stop.message)));
        }
        if error.fault != Fault::Transport && !limit_before_start {
            return Some(Err(error.stop));
        }
        cx.out.metadata_mut().diagnostics.get_or_insert_with(Vec::new).push(diagnostic(&plan, &error, started));
        if let Some(session) = &plan.session {
            fallbacks().insert(session.clone());
        }
        if started {
            return Some(Err(error.stop));
        }
        decoder.reset();
        decoder.emit_start = false;
        return None;
    }
}

async fn attempt(plan: &Plan, decoder: &mut CodexDecode, cx: &mut Cx<'_>) -> Result<(), Failure> {
    let connect_timeout = http::limit(cx.options.websocket_connect_timeout_ms, ws::DEFAULT_CONNECT_TIMEOUT_MS);
    // The reference bounds the silence with `timeoutMs`; without one, the HTTP idle limit.
    let idle = match cx.options.timeout_ms {
        Some(ms) => http::limit(Some(ms), 0),
        None => http::limit(cx.options.idle_timeout_ms, DEFAULT_IDLE_TIMEOUT_MS),
    };
    let mut lease = acquire(plan, connect_timeout, cx).await.map_err(failure)?;
    let body = match plan.cached && lease.slot.is_some() {
        true => request_body(plan, &mut lease.continuation),
        false => plan.body.clone(),
    };
    let mut message = Map::new();
    message.insert("type".into(), json!("response.create"));
    if let Value::Object(body) = body {
        message.extend(body);
    }
    match exchange(&mut lease.socket, Value::Object(message), decoder, cx, idle).await {
        Err(error) => {
            lease.continuation = None;
            release(lease, false).await;
            Err(error)
        }
        Ok(()) => {
            let keep = !cx.cancelled();
            if keep && plan.cached && lease.slot.is_some() {
                if let Some(id) = cx.out.message().response_id.as_deref() {
                    let response_id = id.to_owned();
                    let items = answer_items(plan, cx);
                    lease.continuation = Some(Continuation { body: plan.body.clone(), response_id, items });
                }
            }
            release(lease, keep).await;
            // As the reference, an answer that ended in error counts as the transport's failure
            // (a diagnostic, and SSE for the session).
            driver::tail(cx, decode::NO_STOP_REASON).map_err(Failure::transport)
        }
    }
}

/// Send the request and read its answer up to the terminal event.
async fn exchange(
    socket: &mut Socket,
    message: Value,
    decoder: &mut CodexDecode,
    cx: &mut Cx<'_>,
    idle: Option<Duration>,
) -> Result<(), Failure> {
    socket.send(js_json::stringify(&message), idle, cx.options.cancel.as_ref()).await.map_err(failure)?;
    loop {
        let text = socket.next(idle, cx.options.cancel.as_ref()).await.map_err(failure)?;
        if text.is_empty() {
            continue;
        }
        if decoder.text(&text, cx, "Invalid Codex WebSocket JSON").await? == Flow::End {
            break;
        }
    }
    decoder.checks(cx, false).map_err(Failure::transport)
}

fn diagnostic(plan: &Plan, error: &Failure, started: bool) -> AssistantMessageDiagnostic {
    let mut details = Map::new();
    details.insert("configuredTransport".into(), serde_json::to_value(plan.configured).unwrap_or(Value::Null));
    if !started {
        details.insert("fallbackTransport".into(), json!("sse"));
    }
    details.insert("eventsEmitted".into(), json!(started));
    let phase = if started { "after_message_stream_start" } else { "before_message_stream_start" };
    details.insert("phase".into(), json!(phase));
    details.insert("requestBytes".into(), json!(plan.request_bytes));
    let code = match &error.code {
        Some(Value::String(text)) => Some(DiagnosticCode::Text(text.clone())),
        Some(Value::Number(number)) => Some(DiagnosticCode::Number(number.clone())),
        _ => None,
    };
    AssistantMessageDiagnostic {
        kind: "provider_transport_failure".into(),
        timestamp: pi_types::now_ms(),
        error: Some(DiagnosticErrorInfo {
            name: Some(error.name.into()),
            message: error.stop.message.clone(),
            stack: None,
            code,
        }),
        details: Some(details.into_iter().collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_take_the_websocket_scheme() {
        assert_eq!(url("https://chatgpt.com/backend-api"), "wss://chatgpt.com/backend-api/codex/responses");
        assert_eq!(url("http://127.0.0.1:9/x"), "ws://127.0.0.1:9/x/codex/responses");
    }

    #[test]
    fn request_ids_are_uuid_v7() {
        let id = uuid_v7();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "7");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
    }

    #[test]
    fn deltas_need_the_same_body_and_the_whole_prefix() {
        let last = Continuation {
            body: json!({"model": "m", "input": [{"n": 1}]}),
            response_id: "resp_1".into(),
            items: vec![json!({"n": 2})],
        };
        let next = json!({"model": "m", "input": [{"n": 1}, {"n": 2}, {"n": 3}]});
        assert_eq!(delta(&next, &last), Some(&[json!({"n": 3})][..]));
        assert_eq!(delta(&json!({"model": "other", "input": [{"n": 1}, {"n": 2}]}), &last), None);
        assert_eq!(delta(&json!({"model": "m", "input": [{"n": 9}, {"n": 2}]}), &last), None);
        assert_eq!(delta(&json!({"model": "m", "input": [{"n": 1}]}), &last), None);
    }
}
