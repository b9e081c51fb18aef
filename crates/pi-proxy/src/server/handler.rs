//! The request handlers: authentication, stream slots, body checks, and the SSE response
//! that runs the upstream stream.

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::StreamExt;
use pi_providers::api::pi_messages::{Protocol, WireEnd, WireEvent};
use pi_types::{AssistantMessageEvent, AssistantMessageEventStream, StopReason, Usage};
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;

use super::body::{self, BodyBudget};
use super::budget::Budgets;
use super::redact::Redactor;
use super::validate::{check, check_pi_messages, Refusal};
use super::ServerConfig;

pub(super) struct AppState {
    pub(super) config: ServerConfig,
    streams: Arc<Semaphore>,
    per_token: HashMap<String, Arc<Semaphore>>,
    /// Cancelled when the shutdown grace period is over: running streams end.
    drain: CancellationToken,
    /// The server's credentials, kept out of every answer.
    redactor: Arc<Redactor>,
    /// Memory of the bodies being read and checked.
    bodies: BodyBudget,
    /// Per-token request and token budgets.
    budgets: Arc<Budgets>,
}

/// Header names whose values are credentials.
fn is_credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["authorization", "cookie", "key", "token", "secret"].iter().any(|part| name.contains(part))
}

/// Every credential the server holds: see [`super::Redaction`].
fn redactor(config: &ServerConfig) -> Redactor {
    let mut secrets = config.redaction.values();
    secrets.extend(config.tokens.iter().map(|t| t.secret.clone()));
    for model in config.models.models(None) {
        for (name, value) in model.headers.iter().flatten() {
            if is_credential_header(name) {
                // `Bearer <key>`: the key alone is what an echo may quote.
                let key = value.split_once(' ').map_or(value.as_str(), |(_, key)| key.trim());
                secrets.extend([value.clone(), key.to_owned()]);
            }
        }
    }
    Redactor::new(secrets.iter().map(String::as_str))
}

/// The router; `drain` ends running streams when cancelled.
pub(crate) fn router(config: ServerConfig, drain: CancellationToken) -> Router {
    let limits = config.limits.clone();
    let access_log = super::access_log::Tokens::new(&config.tokens);
    let per_token =
        config.tokens.iter().map(|t| (t.id.clone(), Arc::new(Semaphore::new(limits.max_streams_per_token)))).collect();
    let redactor = Arc::new(redactor(&config));
    let bodies = BodyBudget::new(limits.max_body_bytes_in_flight, limits.max_body_bytes);
    let streams = Arc::new(Semaphore::new(limits.max_streams));
    let budgets = Arc::new(Budgets::new(limits.requests_per_minute, limits.tokens_per_day));
    let state = Arc::new(AppState { streams, per_token, config, drain, redactor, bodies, budgets });
    Router::new()
        .route("/api/stream", post(stream))
        // pi-ai's `pi-messages` API: `<baseUrl>/messages`, with or without a `/v1` base.
        .route("/messages", post(messages))
        .route("/v1/messages", post(messages))
        .route("/healthz", get(healthz))
        .route("/api/models", get(list_models))
        .with_state(state)
        .layer(tower_http::limit::RequestBodyLimitLayer::new(limits.max_body_bytes))
        // Outermost, so it also sees the answers of the limit and timeout layers.
        .layer(axum::middleware::map_response(json_errors))
        .layer(axum::middleware::from_fn_with_state(access_log, super::access_log::log))
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    if state.drain.is_cancelled() {
        return json(StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({"status": "draining"}));
    }
    json(StatusCode::OK, serde_json::json!({"status": "ok"}))
}

fn json(status: StatusCode, value: serde_json::Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn refusal_response(refusal: &Refusal) -> Response {
    json(refusal.status, serde_json::json!({"error": refusal.message}))
}

/// Every refusal is JSON (the tower-http limit and timeout layers and the router's
/// unknown-path and wrong-method answers are plain text or empty) and closes the connection.
///
/// Most refusals come before the request body is read; hyper then cannot reuse the
/// connection, and without `connection: close` a pooling client would send its next request
/// on a connection the server is closing and get a broken pipe instead of an answer.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let mut response = json_refusal(response);
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn json_refusal(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json") || v.as_bytes().starts_with(b"text/event"));
    let status = response.status();
    if is_json {
        return response;
    }
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "Request body too large",
        StatusCode::REQUEST_TIMEOUT => "Request body not received in time",
        StatusCode::NOT_FOUND => {
            "Not found: the proxy serves POST /api/stream, POST /messages (also /v1/messages), GET /api/models and GET /healthz"
        }
        StatusCode::METHOD_NOT_ALLOWED => "Method not allowed",
        other => other.canonical_reason().unwrap_or("Request refused"),
    };
    let mut refused = refusal_response(&Refusal::new(status, message));
    // Keep what the client needs from the original answer (`allow` of a 405).
    if let Some(allow) = response.headers().get(header::ALLOW) {
        refused.headers_mut().insert(header::ALLOW, allow.clone());
    }
    refused
}

/// The id of the token in `Authorization: Bearer <token>`. Every configured token is compared,
/// in constant time, whatever matched before.
pub(super) fn authenticate<'a>(state: &'a AppState, headers: &HeaderMap) -> Result<&'a str, Refusal> {
    let unauthorized = |m: &str| Refusal::new(StatusCode::UNAUTHORIZED, m);
    let value = headers.get(header::AUTHORIZATION).ok_or_else(|| unauthorized("Missing bearer token"))?;
    // The scheme name is case-insensitive (RFC 9110 section 11.1).
    let presented = value
        .as_bytes()
        .split_at_checked(7)
        .filter(|(scheme, token)| scheme.eq_ignore_ascii_case(b"bearer ") && !token.is_empty())
        .map(|(_, token)| token)
        .ok_or_else(|| unauthorized("Missing bearer token"))?;
    let mut found = None;
    for token in &state.config.tokens {
        if bool::from(token.secret.as_bytes().ct_eq(presented)) && !token.secret.is_empty() {
            found = Some(token.id.as_str());
        }
    }
    found.ok_or_else(|| unauthorized("Invalid token"))
}

/// The body must be declared JSON (`application/json`, parameters allowed), as the reference
/// client sends it: a body sent as a form or as text is not read as a request.
fn check_content_type(headers: &HeaderMap) -> Result<(), Refusal> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if is_json {
        Ok(())
    } else {
        Err(Refusal::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json"))
    }
}

/// Slots held for the life of one stream.
struct Slots {
    _total: OwnedSemaphorePermit,
    _token: Option<OwnedSemaphorePermit>,
}

fn take_slots(state: &AppState, token_id: &str) -> Result<Slots, Refusal> {
    let busy = |m: &str| Refusal::new(StatusCode::SERVICE_UNAVAILABLE, m);
    let total = Arc::clone(&state.streams).try_acquire_owned().map_err(|_| busy("Too many concurrent streams"))?;
    let token = match state.per_token.get(token_id) {
        Some(semaphore) => Some(
            Arc::clone(semaphore)
                .try_acquire_owned()
                .map_err(|_| busy("Too many concurrent streams for this token"))?,
        ),
        None => None,
    };
    Ok(Slots { _total: total, _token: token })
}

/// One request's log record: emitted once, when the request is answered or its stream ends.
struct RequestLog {
    span: tracing::Span,
    started: Instant,
    outcome: &'static str,
}

impl RequestLog {
    fn new() -> Self {
        let span = tracing::info_span!(
            "proxy_request",
            token_id = Empty,
            provider = Empty,
            model = Empty,
            status = Empty,
            outcome = Empty,
            duration_ms = Empty
        );
        Self { span, started: Instant::now(), outcome: "refused" }
    }
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        // `i64`: OpenTelemetry exporters send it as an integer (a `u64` as text).
        let duration = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.span.record("outcome", self.outcome);
        self.span.record("duration_ms", duration);
        tracing::info!(parent: &self.span, outcome = self.outcome, duration_ms = duration, "proxy request finished");
    }
}

/// `POST /api/stream` (pi-agent-core's proxy): refusals `{"error": "…"}`.
async fn stream(State(state): State<Arc<AppState>>, request: Request) -> Response {
    answer(&state, request, Protocol::Proxy).await
}

/// `POST /messages` (pi-ai's `pi-messages` API): refusals `{"error": {"message": "…"}}`, which
/// the pi-messages client quotes. The same checks and upstream as [`stream`]; the events differ
/// as [`Protocol`] says.
async fn messages(State(state): State<Arc<AppState>>, request: Request) -> Response {
    answer(&state, request, Protocol::PiMessages).await
}

async fn answer(state: &Arc<AppState>, request: Request, protocol: Protocol) -> Response {
    let log = RequestLog::new();
    match accept(Arc::clone(state), request, &log, protocol).await {
        Ok(accepted) => {
            log.span.record("status", 200i64);
            let body = EventBody::new(state, accepted, log, protocol);
            let mut response = Response::new(Body::from_stream(body.into_stream()));
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
            response
        }
        Err(mut refusal) => {
            log.span.record("status", i64::from(refusal.status.as_u16()));
            if let Cow::Owned(clean) = state.redactor.text(&refusal.message) {
                refusal.message = clean;
            }
            let mut response = match protocol {
                Protocol::Proxy => refusal_response(&refusal),
                Protocol::PiMessages => {
                    json(refusal.status, serde_json::json!({"error": {"message": refusal.message}}))
                }
            };
            let retry_after = match refusal.status {
                StatusCode::SERVICE_UNAVAILABLE => Some(state.config.limits.retry_after_secs),
                _ => refusal.retry_after,
            };
            if let Some(seconds) = retry_after {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            }
            response
        }
    }
}

/// Everything before the first byte of the answer; the upstream stream when accepted.
///
/// A stream slot is taken only once a whole, valid request is in hand: a slow or bad body
/// holds no slot, only its bytes' room in the body budget.
async fn accept(
    state: Arc<AppState>,
    request: Request,
    log: &RequestLog,
    protocol: Protocol,
) -> Result<Accepted, Refusal> {
    let deadline = tokio::time::Instant::now() + state.config.limits.body_read_timeout;
    let (parts, body) = request.into_parts();
    let token_id = authenticate(&state, &parts.headers)?;
    log.span.record("token_id", token_id);
    check_content_type(&parts.headers)?;
    if state.drain.is_cancelled() {
        return Err(Refusal::new(StatusCode::SERVICE_UNAVAILABLE, "Proxy server is shutting down"));
    }
    let read = body::read(&state.bodies, body, deadline).await?;
    let shared = Arc::clone(&state);
    let checked = body::check_off_worker(&state.bodies, read, move |bytes| match protocol {
        Protocol::Proxy => check(&shared.config, bytes),
        Protocol::PiMessages => check_pi_messages(&shared.config, bytes),
    })
    .await?;
    let slots = take_slots(&state, token_id)?;
    let admitted = state.budgets.admit(token_id)?;
    log.span.record("provider", checked.model.provider.as_str());
    log.span.record("model", checked.model.id.as_str());
    let limits = &state.config.limits;
    let cancel = pi_types::CancellationToken::new();
    let mut options = pi_types::StreamOptions {
        cancel: Some(cancel.clone()),
        timeout_ms: Some(limits.upstream_headers_timeout.as_millis() as u64),
        idle_timeout_ms: Some(limits.upstream_idle_timeout.as_millis() as u64),
        ..checked.options
    };
    let model_limit = Some(checked.model.max_tokens).filter(|limit| *limit > 0);
    if let Some(left) = admitted.tokens_left {
        options.max_tokens = Some(options.max_tokens.or(model_limit).map_or(left, |limit| limit.min(left)));
    }
    let charge = Charge {
        budgets: Arc::clone(&state.budgets),
        token_id: token_id.to_owned(),
        unreported: options.max_tokens.or(model_limit).unwrap_or(0),
        charged: false,
    };
    let upstream = state.config.models.stream_transcript(&checked.model, checked.context, options);
    Ok(Accepted { upstream, slots, cancel, charge })
}

/// An accepted request: its upstream stream and what it holds until the stream ends.
struct Accepted {
    upstream: AssistantMessageEventStream,
    slots: Slots,
    cancel: pi_types::CancellationToken,
    charge: Charge,
}

/// Charges a stream's tokens to its token's daily budget once: the reported usage at the
/// terminal event, else (dropped before one) the request's `maxTokens`.
struct Charge {
    budgets: Arc<Budgets>,
    token_id: String,
    unreported: u64,
    charged: bool,
}

impl Charge {
    fn usage(&mut self, usage: &Usage) {
        let total = if usage.total_tokens > 0 { usage.total_tokens } else { usage.token_sum() };
        self.budgets.charge(&self.token_id, total);
        self.charged = true;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if !self.charged {
            self.budgets.charge(&self.token_id, self.unreported);
        }
    }
}

/// The SSE answer of one accepted request. Dropping it (client gone, stream over) cancels the
/// upstream request, frees the slots and logs the request.
struct EventBody {
    upstream: AssistantMessageEventStream,
    _cancel_upstream: pi_types::CancelGuard,
    _slots: Slots,
    charge: Charge,
    log: RequestLog,
    drain: CancellationToken,
    deadline: tokio::time::Instant,
    upstream_timeout: Duration,
    keepalive: Duration,
    finished: bool,
    protocol: Protocol,
    redactor: Arc<Redactor>,
}

const KEEPALIVE: &[u8] = b": keepalive\n\n";

impl EventBody {
    fn new(
        state: &AppState,
        Accepted { upstream, slots, cancel, charge }: Accepted,
        log: RequestLog,
        protocol: Protocol,
    ) -> Self {
        let limits = &state.config.limits;
        let mut log = log;
        log.outcome = "disconnected";
        Self {
            upstream,
            _cancel_upstream: cancel.drop_guard(),
            _slots: slots,
            charge,
            log,
            drain: state.drain.clone(),
            deadline: tokio::time::Instant::now() + limits.upstream_timeout,
            upstream_timeout: limits.upstream_timeout,
            keepalive: limits.keepalive_interval,
            finished: false,
            protocol,
            redactor: Arc::clone(&state.redactor),
        }
    }

    fn into_stream(self) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send {
        futures::stream::unfold(self, |mut body| async move {
            let chunk = body.next_chunk().await?;
            Some((Ok(chunk), body))
        })
    }

    /// The next bytes to write, `None` at the end.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.finished {
            return None;
        }
        let line = tokio::select! {
                biased;
                () = self.drain.cancelled() => {
                    self.fail("Proxy server is shutting down", "shutdown")
                }
                () = tokio::time::sleep_until(self.deadline) => {
                    let message = format!("Upstream timed out after {} ms", self.upstream_timeout.as_millis());
                    self.fail(&message, "timeout")
                }
                next = tokio::time::timeout(self.keepalive, self.upstream.next()) => match next {
                    Err(_) => return Some(Bytes::from_static(KEEPALIVE)),
                    Ok(None) => {
                        self.finished = true;
                        self.log.outcome = "incomplete";
                        return None;
                    }
                    Ok(Some(event)) => {
                        match &event {
                            AssistantMessageEvent::Done { .. } => self.log.outcome = "done",
                            AssistantMessageEvent::Error { reason, .. } => {
                                self.log.outcome = if *reason == StopReason::Aborted { "aborted" } else { "error" };
                            }
                            _ => {}
                        }
                        if let Some(message) = event.final_message() {
                            self.charge.usage(&message.usage);
                            self.finished = true;
                        }
                        self.wire_line(&event)
                    }
                },
        };
        Some(line)
    }

    /// The line of an upstream event, with the server's credentials redacted and an error
    /// text bounded.
    fn wire_line(&self, event: &AssistantMessageEvent) -> Bytes {
        let mut event = WireEvent::from_event(event, self.protocol);
        if let WireEvent::Error { error_message: Some(message), .. } = &mut event {
            *message = self.redactor.error_text(message).into_boxed_str();
        }
        self.redacted_line(&event)
    }

    /// `data: <json>\n\n` without credentials: one scan of the line; a line with a hit (rare)
    /// is redacted string by string, so the JSON stays valid.
    fn redacted_line(&self, event: &impl serde::Serialize) -> Bytes {
        let line = data_line(event);
        if !self.redactor.hits(&line) {
            return line;
        }
        let mut value = serde_json::to_value(event).unwrap_or_default();
        self.redactor.value(&mut value);
        data_line(&value)
    }

    /// End the stream with an `error` event of the server's own.
    fn fail(&mut self, message: &str, outcome: &'static str) -> Bytes {
        self.log.outcome = outcome;
        self.finished = true;
        data_line(&WireEvent::Error {
            reason: StopReason::Error,
            error_message: Some(message.into()),
            end: WireEnd::default(),
        })
    }
}

/// `data: <json>\n\n`.
fn data_line(event: &impl serde::Serialize) -> Bytes {
    let mut line = b"data: ".to_vec();
    // Serializing plain data into a Vec cannot fail; an empty object keeps the stream valid.
    if serde_json::to_writer(&mut line, event).is_err() {
        line.extend_from_slice(b"{}");
    }
    line.extend_from_slice(b"\n\n");
    Bytes::from(line)
}

/// `GET /api/models`: 401 without a valid token, else the served models as JSON, redacted as
/// every response is.
async fn list_models(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let (status, body) = match authenticate(&state, &headers) {
        Ok(_) => match serde_json::to_value(super::models::served_models(&state.config)).and_then(|mut list| {
            state.redactor.value(&mut list);
            serde_json::to_vec(&list)
        }) {
            Ok(body) => (StatusCode::OK, body),
            Err(error) => {
                let message = format!("Cannot list the models: {error}");
                (StatusCode::INTERNAL_SERVER_ERROR, serde_json::json!({ "error": message }).to_string().into_bytes())
            }
        },
        Err(refusal) => (refusal.status, serde_json::json!({ "error": refusal.message }).to_string().into_bytes()),
    };
    let mut response = (status, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
