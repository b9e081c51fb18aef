//! The HTTP seam: one shared rustls client, the first-attempt retry policy of pi-ai's
//! `provider-retry.js`, the time-to-headers timeout, cancellation, and a body reader with an
//! idle timeout between chunks.
//!
//! Every wait has a default limit: [`DEFAULT_HEADERS_TIMEOUT_MS`] until the response headers,
//! [`DEFAULT_IDLE_TIMEOUT_MS`] between body chunks (stream and error bodies alike). Error bodies
//! are read up to [`MAX_ERROR_BODY_BYTES`], event-stream lines and events are capped (see
//! [`crate::transport::sse::FrameGuard`]), and an `errorMessage` is bounded by [`bound_error_message`].
//! These limits are applied here, per request, whatever client sends it (see
//! [`crate::transport::client`]). Redirects are never followed by the default client, so provider
//! credentials only reach the configured origin; a client that follows them ends the request
//! with the redirect error. Environment proxies (`HTTP(S)_PROXY`) are opt-in.
//!
//! Each attempt is a `tracing` span `POST` (OpenTelemetry's HTTP client conventions: method,
//! server address and port, resend count, status, `error.type`) under the span current when
//! the request is sent (an agent loop's `chat` span), and each retry an event with its delay.
//! Neither records the URL's path or query, headers or bodies: they can hold keys and content.
//! Numbers are recorded as `i64`, which OpenTelemetry exporters send as integers (`u64`
//! fields reach them as text).

use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use indexmap::IndexMap;
use pi_types::CancellationToken;
use pi_types::{Model, ProviderResponse, StreamOptions};
use reqwest::header::HeaderMap;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::transport::sse::FrameGuard;

/// Cap on a server-requested retry delay when the caller sets none.
pub const DEFAULT_MAX_RETRY_DELAY_MS: u64 = 60_000;
/// Idle timeout between body chunks when the caller sets none (undici's default body timeout).
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 300_000;
/// Time-to-headers limit when the caller sets none (undici's default headers timeout).
pub const DEFAULT_HEADERS_TIMEOUT_MS: u64 = 300_000;
/// Largest error body kept in an error message (UTF-16 units, as the reference counts).
const MAX_ERROR_BODY_CHARS: usize = 4000;
/// Bytes of a non-2xx body read at most; the rest is never read. Error bodies are small JSON
/// documents; a larger one is truncated text anyway once it reaches `errorMessage`.
pub const MAX_ERROR_BODY_BYTES: usize = 1 << 20;
/// Longest `errorMessage` kept whole (UTF-16 units). The reference caps the body at 4000 units
/// and then adds a prefix and its truncation note; the headroom keeps those messages exactly as
/// the reference writes them, and anything longer (a body the reference would not truncate, a
/// stream error event, a parse error quoting its data) is cut to 4000 units the same way.
const MAX_ERROR_MESSAGE_CHARS: usize = MAX_ERROR_BODY_CHARS + 200;

/// The process-wide default client ([`crate::transport::client::shared`]): rustls with the `ring`
/// provider, no environment proxy, no redirects.
pub fn client() -> Result<&'static reqwest::Client, String> {
    crate::transport::client::shared_ref().map_err(|e| e.to_string())
}

pub(crate) use crate::transport::client::deepest_cause;

/// What kind of failure an [`ApiError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// A non-2xx answer.
    Status,
    /// No connection or a broken one before the headers.
    Connection,
    /// No headers within `timeout_ms`.
    Timeout,
    /// Anything else (e.g. the retry-delay cap).
    Other,
}

/// A failed request, shaped like the SDK error the reference would have caught.
#[derive(Clone, Debug)]
pub struct ApiError {
    /// What kind of failure.
    pub kind: ApiErrorKind,
    /// HTTP status.
    pub status: Option<u16>,
    /// Response headers (retry hints).
    pub headers: Option<HeaderMap>,
    /// The SDK's `error.message`.
    pub message: String,
    /// The body as pi-ai's `normalizeProviderError` extracts it (trimmed, truncated).
    pub body: Option<String>,
}

impl ApiError {
    /// A failure that is neither a status, a connection failure nor a timeout (not retried).
    pub fn other(message: impl Into<String>) -> Self {
        Self { kind: ApiErrorKind::Other, status: None, headers: None, message: message.into(), body: None }
    }
}

/// Per-API error shaping: how the SDK builds an error from a bad status and how the adapter
/// formats it into `errorMessage`.
pub trait Dialect: Send + Sync {
    /// The SDK error for a non-2xx response.
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError;
    /// The adapter's `errorMessage` for an error.
    fn format(&self, error: &ApiError) -> String;
    /// Whether the retry policy sees the response headers (Gemini's SDK error has none).
    fn exposes_headers(&self) -> bool {
        true
    }
    /// Whether connection failures are retried (SDK connection errors are provider errors).
    fn retries_connection_errors(&self) -> bool {
        true
    }
    /// An adapter's own retry rule for a failed attempt while retries remain (`None`: the
    /// SDKs' rule of `send`): `Ok(Some(delay_ms))` retries, `Ok(None)` gives up with the
    /// error, `Err` gives up with that message.
    fn retry(&self, _error: &ApiError, _retry_index: u32, _max_retry_delay_ms: Option<u64>) -> Option<Retry> {
        None
    }
}

/// An adapter's decision about retrying (see [`Dialect::retry`]).
pub type Retry = Result<Option<f64>, String>;

/// A failure that ends the stream before any event but `start`.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The `errorMessage`.
    pub message: String,
    /// Whether the request was cancelled.
    pub aborted: bool,
}

/// One prepared POST.
#[derive(Clone)]
pub struct Request {
    /// Where it goes.
    pub url: String,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Header names and the body's length only: values carry credentials.
impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("headers", &self.headers.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>())
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

pub(crate) fn is_cancelled(cancel: Option<&CancellationToken>) -> bool {
    cancel.is_some_and(CancellationToken::is_cancelled)
}

pub(crate) async fn cancelled(cancel: Option<&CancellationToken>) {
    match cancel {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

const ABORTED_BEFORE_HEADERS: &str = "Request was aborted.";

/// Send with pi-ai's retry policy; the response has a 2xx status.
pub(crate) async fn send(
    request: &Request,
    model: &Model,
    options: &StreamOptions,
    dialect: &dyn Dialect,
) -> Result<reqwest::Response, Failure> {
    refuse_credentials_in_url(&request.url)?;
    let cancel = options.cancel.as_ref();
    let max_retries = options.max_retries.unwrap_or(0);
    let mut remaining = max_retries;
    loop {
        if is_cancelled(cancel) {
            return Err(Failure { message: ABORTED_BEFORE_HEADERS.to_owned(), aborted: true });
        }
        let span = attempt_span(&request.url, max_retries - remaining);
        let outcome = attempt(request, options, dialect).instrument(span.clone()).await;
        record_attempt(&span, &outcome);
        drop(span);
        let error = match outcome {
            Ok(Some(response)) => {
                if let Some(hook) = &options.on_response {
                    hook(&provider_response(response.status().as_u16(), response.headers()), model).await;
                }
                return Ok(response);
            }
            Ok(None) => return Err(Failure { message: ABORTED_BEFORE_HEADERS.to_owned(), aborted: true }),
            Err(error) => error,
        };
        if is_cancelled(cancel) {
            return Err(Failure { message: ABORTED_BEFORE_HEADERS.to_owned(), aborted: true });
        }
        // Every attempt that failed with a status reaches the hook too, before the retry
        // decision, with the headers its error carries (none for Gemini's SDK).
        if let (Some(hook), Some(status)) = (&options.on_response, error.status) {
            let response = match &error.headers {
                Some(headers) => provider_response(status, headers),
                None => ProviderResponse { status, headers: IndexMap::new() },
            };
            hook(&response, model).await;
        }
        let retry_index = max_retries - remaining;
        let decision = if remaining == 0 {
            Ok(None)
        } else {
            match dialect.retry(&error, retry_index, options.max_retry_delay_ms) {
                Some(decision) => decision,
                None if !is_retryable(&error, dialect) => Ok(None),
                None => retry_delay_ms(&error, retry_index, options.max_retry_delay_ms).map(Some),
            }
        };
        let delay = match decision {
            Ok(Some(delay)) => delay,
            Ok(None) => return Err(Failure { message: dialect.format(&error), aborted: false }),
            Err(message) => return Err(Failure { message: dialect.format(&ApiError::other(message)), aborted: false }),
        };
        remaining -= 1;
        tracing::info!(
            retry = i64::from(retry_index) + 1,
            delay_ms = delay,
            status = error.status.map(i64::from),
            "retrying provider request"
        );
        tokio::select! {
            biased;
            () = cancelled(cancel) => {
                return Err(Failure { message: "Request aborted".to_owned(), aborted: true });
            }
            () = tokio::time::sleep(delay_duration(delay)) => {}
        }
    }
}

/// A URL that carries credentials (`user:pass@`) is refused before anything is sent: the
/// client would send them as a second `Authorization` beside the key's. The reference's
/// `fetch` refuses such a URL too (`Request cannot be constructed from a URL that includes
/// credentials: <url>`); the same text here, with the credentials themselves left out.
fn refuse_credentials_in_url(url: &str) -> Result<(), Failure> {
    let Ok(mut parsed) = reqwest::Url::parse(url) else { return Ok(()) };
    if parsed.username().is_empty() && parsed.password().is_none() {
        return Ok(());
    }
    let _ = parsed.set_password(None);
    let _ = parsed.set_username("redacted");
    let shown = String::from(parsed).replacen("redacted@", "<redacted>@", 1);
    Err(Failure {
        message: format!("Request cannot be constructed from a URL that includes credentials: {shown}"),
        aborted: false,
    })
}

/// The span of one attempt; `resend_count` is 0 for the first.
fn attempt_span(url: &str, resend_count: u32) -> Span {
    let span = tracing::info_span!(
        "POST",
        otel.kind = "client",
        otel.status_code = Empty,
        http.request.method = "POST",
        http.request.resend_count = (resend_count > 0).then_some(i64::from(resend_count)),
        server.address = Empty,
        server.port = Empty,
        http.response.status_code = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        if let Ok(url) = reqwest::Url::parse(url) {
            span.record("server.address", url.host_str());
            span.record("server.port", url.port_or_known_default().map(i64::from));
        }
    }
    span
}

fn record_attempt(span: &Span, outcome: &Result<Option<reqwest::Response>, ApiError>) {
    if span.is_disabled() {
        return;
    }
    let (status, error_type) = match outcome {
        Ok(Some(response)) => (Some(response.status().as_u16()), None),
        Ok(None) => (None, Some("aborted")),
        Err(error) => (
            error.status,
            Some(match error.kind {
                ApiErrorKind::Status => "status",
                ApiErrorKind::Connection => "connection",
                ApiErrorKind::Timeout => "timeout",
                ApiErrorKind::Other => "_OTHER",
            }),
        ),
    };
    span.record("http.response.status_code", status.map(i64::from));
    if let Some(kind) = error_type {
        // The conventions' error type of an HTTP error answer is its status code.
        match status {
            Some(code) => span.record("error.type", code.to_string()),
            None => span.record("error.type", kind),
        };
        span.record("otel.status_code", "ERROR");
    }
}

/// One attempt: `Ok(None)` when cancelled.
async fn attempt(
    request: &Request,
    options: &StreamOptions,
    dialect: &dyn Dialect,
) -> Result<Option<reqwest::Response>, ApiError> {
    // A client that cannot be had (a handle of another type, a failed build) is a
    // configuration error: not retried.
    let client = crate::transport::client::for_request(options).map_err(ApiError::other)?;
    let mut builder = client.post(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let send = builder.body(request.body.clone()).send();
    let timeout = limit(options.timeout_ms, DEFAULT_HEADERS_TIMEOUT_MS);
    let result = tokio::select! {
        biased;
        () = cancelled(options.cancel.as_ref()) => return Ok(None),
        result = async {
            match timeout {
                Some(limit) => tokio::time::timeout(limit, send).await.map_err(|_| ()),
                None => Ok(send.await),
            }
        } => result,
    };
    let response = match result {
        Err(()) => {
            return Err(ApiError {
                kind: ApiErrorKind::Timeout,
                status: None,
                headers: None,
                message: "Request timed out.".to_owned(),
                body: None,
            })
        }
        Ok(Err(error)) => {
            return Err(ApiError {
                kind: ApiErrorKind::Connection,
                status: None,
                headers: None,
                message: format!("Connection error.: {}", deepest_cause(&error)),
                body: None,
            })
        }
        Ok(Ok(response)) => response,
    };
    if let Some(message) = followed_redirect(&request.url, response.url()) {
        return Err(ApiError::other(message));
    }
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(Some(response));
    }
    if (300..400).contains(&status) {
        return Err(ApiError::other(redirect_message(status, response.headers())));
    }
    let headers = response.headers().clone();
    let mut body = Body::new(response, options);
    let mut bytes = Vec::new();
    // Under the idle limit and the size cap; a body that breaks or stalls keeps what came.
    while bytes.len() < MAX_ERROR_BODY_BYTES {
        match body.next_raw().await {
            Read::Chunk(chunk) => {
                let room = MAX_ERROR_BODY_BYTES - bytes.len();
                bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Read::Aborted => return Ok(None),
            Read::End | Read::Failed(_) => break,
        }
    }
    Err(dialect.status_error(status, &headers, &bytes))
}

/// Largest token-endpoint answer read (OAuth answers are a few hundred bytes).
pub(crate) const MAX_TOKEN_BODY_BYTES: usize = 1 << 20;

/// A whole small body (token endpoints) up to `max` bytes; the rest is never read.
pub(crate) async fn read_to_cap(mut response: reqwest::Response, max: usize) -> reqwest::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    while bytes.len() < max {
        match response.chunk().await? {
            Some(chunk) => bytes.extend_from_slice(&chunk[..chunk.len().min(max - bytes.len())]),
            None => break,
        }
    }
    Ok(bytes)
}

/// A limit in ms: `None` takes the default, `Some(0)` disables it.
pub(crate) fn limit(value: Option<u64>, default: u64) -> Option<Duration> {
    Some(Duration::from_millis(value.unwrap_or(default))).filter(|d| !d.is_zero())
}

/// A retry delay in ms as a sleep: negative and NaN are zero, absurd values saturate.
fn delay_duration(delay_ms: f64) -> Duration {
    // `as` saturates at the integer bounds and maps NaN to 0.
    Duration::from_millis(delay_ms.max(0.0) as u64)
}

const MAX_LOCATION_CHARS: usize = 200;

/// The error for a 3xx answer: redirects are not followed (see [`client`]).
fn redirect_message(status: u16, headers: &HeaderMap) -> String {
    let location = headers
        .get(reqwest::header::LOCATION)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).chars().take(MAX_LOCATION_CHARS).collect::<String>());
    match location {
        Some(location) => format!(
            "Provider answered with a redirect ({status}) to {location}; redirects are not followed so that \
             credentials are only sent to the configured base URL"
        ),
        None => format!(
            "Provider answered with a redirect ({status}); redirects are not followed so that credentials are \
             only sent to the configured base URL"
        ),
    }
}

/// The error for an answer from another URL than the one requested: a client of the user's
/// whose redirect policy follows redirects (the default client's does not).
fn followed_redirect(requested: &str, answered: &reqwest::Url) -> Option<String> {
    if answered.as_str() == requested || reqwest::Url::parse(requested).is_ok_and(|url| url == *answered) {
        return None;
    }
    let mut location: String = answered.as_str().chars().take(MAX_LOCATION_CHARS).collect();
    // The target's query may carry anything; its origin and path name it well enough.
    if let Some(at) = location.find('?') {
        location.truncate(at);
    }
    Some(format!(
        "The HTTP client followed a redirect to {location}; build it with redirect(Policy::none()) so that \
         credentials are only sent to the configured base URL"
    ))
}

fn provider_response(status: u16, response_headers: &HeaderMap) -> ProviderResponse {
    let mut headers = IndexMap::new();
    for (name, value) in response_headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|existing: &mut String| {
                existing.push_str(", ");
                existing.push_str(&value);
            })
            .or_insert(value);
    }
    ProviderResponse { status, headers }
}

fn header<'a>(error: &'a ApiError, dialect: &dyn Dialect, name: &str) -> Option<&'a str> {
    if !dialect.exposes_headers() {
        return None;
    }
    error.headers.as_ref()?.get(name)?.to_str().ok()
}

/// The SDKs' retry rule: `x-should-retry`, then connection errors and 408/409/429/5xx.
fn is_retryable(error: &ApiError, dialect: &dyn Dialect) -> bool {
    match error.kind {
        ApiErrorKind::Other => return false,
        ApiErrorKind::Connection | ApiErrorKind::Timeout => return dialect.retries_connection_errors(),
        ApiErrorKind::Status => {}
    }
    match header(error, dialect, "x-should-retry") {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    match error.status {
        None => true,
        Some(status) => matches!(status, 408 | 409 | 429) || status >= 500,
    }
}

fn check_server_delay(delay_ms: f64, max_retry_delay_ms: Option<u64>, message: &str) -> Result<f64, String> {
    let max = max_retry_delay_ms.unwrap_or(DEFAULT_MAX_RETRY_DELAY_MS);
    if max > 0 && delay_ms > max as f64 {
        return Err(format!(
            "Server requested {}s retry delay (max: {}s). {message}",
            (delay_ms / 1000.0).ceil(),
            (max as f64 / 1000.0).ceil()
        ));
    }
    Ok(delay_ms)
}

/// The delay before retry number `retry_index` (0-based), or the cap error.
fn retry_delay_ms(error: &ApiError, retry_index: u32, max_retry_delay_ms: Option<u64>) -> Result<f64, String> {
    if let Some(headers) = &error.headers {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(delay) = pi_types::server_retry_delay_ms(header) {
            return check_server_delay(delay, max_retry_delay_ms, &error.message);
        }
    }
    let exponential = (0.5 * 2f64.powi(retry_index.min(30) as i32)).min(8.0) * 1000.0;
    Ok(exponential * (1.0 - fastrand::f64() * 0.25))
}

/// What the body reader saw next.
#[derive(Debug)]
pub(crate) enum Read {
    /// Bytes.
    Chunk(Bytes),
    /// The body ended normally.
    End,
    /// The cancellation token fired.
    Aborted,
    /// The connection broke or stalled.
    Failed(String),
}

/// A response body with cancellation, an idle timeout between chunks and, for event streams,
/// the line and event caps of [`FrameGuard`].
pub(crate) struct Body {
    inner: BoxStream<'static, reqwest::Result<Bytes>>,
    cancel: Option<CancellationToken>,
    idle: Option<Duration>,
    guard: FrameGuard,
    /// What [`Body::next_piece`] has not handed out yet of the last chunk.
    held: Bytes,
}

impl Body {
    pub(crate) fn new(response: reqwest::Response, options: &StreamOptions) -> Self {
        Self {
            inner: response.bytes_stream().boxed(),
            cancel: options.cancel.clone(),
            idle: limit(options.idle_timeout_ms, DEFAULT_IDLE_TIMEOUT_MS),
            guard: FrameGuard::default(),
            held: Bytes::new(),
        }
    }

    /// [`Body::next`] for an [`SseDecoder`](crate::transport::sse::SseDecoder): each chunk is handed out a
    /// piece at a time ([`crate::transport::sse::piece_len`]), so that the decoder, which takes a piece's
    /// events before the next piece, never holds a whole chunk. The next chunk is read (and
    /// cancellation looked at) once the last one is handed out, as with whole chunks.
    pub(crate) async fn next_piece(&mut self) -> Read {
        if self.held.is_empty() {
            match self.next().await {
                Read::Chunk(bytes) => self.held = bytes,
                other => return other,
            }
        }
        Read::Chunk(self.held.split_to(crate::transport::sse::piece_len(&self.held)))
    }

    /// The next chunk of an event stream: a line or event over its cap ends the stream.
    pub(crate) async fn next(&mut self) -> Read {
        let read = self.next_raw().await;
        if let Read::Chunk(bytes) = &read {
            if let Err(message) = self.guard.check(bytes) {
                return Read::Failed(message);
            }
        }
        read
    }

    /// The next chunk, without the event-stream caps (binary streams cap their own frames).
    pub(crate) async fn next_raw(&mut self) -> Read {
        let cancel = self.cancel.clone();
        let idle = self.idle;
        let next = self.inner.next();
        let item = tokio::select! {
            biased;
            () = cancelled(cancel.as_ref()) => return Read::Aborted,
            item = async {
                match idle {
                    Some(limit) => tokio::time::timeout(limit, next).await.map_err(|_| ()),
                    None => Ok(next.await),
                }
            } => item,
        };
        match item {
            Err(()) => Read::Failed(format!(
                "Stream idle timeout: no data received for {} ms",
                idle.map_or(0, |d| d.as_millis())
            )),
            Ok(None) => Read::End,
            Ok(Some(Ok(bytes))) => Read::Chunk(bytes),
            Ok(Some(Err(error))) => Read::Failed(format!("terminated: {}", deepest_cause(&error))),
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        is_cancelled(self.cancel.as_ref())
    }
}

/// JavaScript's `String.prototype.length` of a text.
pub(crate) fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// pi-ai's body extraction: trimmed, empty = none, truncated to 4000 UTF-16 units.
pub(crate) fn normalize_body(text: &str) -> Option<String> {
    let trimmed = crate::js_json::js_trim(text);
    if trimmed.is_empty() {
        return None;
    }
    Some(truncate_units(trimmed, MAX_ERROR_BODY_CHARS))
}

/// An `errorMessage` as stored: whole up to a little over the reference's 4000-unit body cap,
/// else cut to 4000 UTF-16 units with the reference's truncation note.
pub fn bound_error_message(message: String) -> String {
    // UTF-16 units never outnumber UTF-8 bytes: short messages skip the count.
    if message.len() <= MAX_ERROR_MESSAGE_CHARS || utf16_len(&message) <= MAX_ERROR_MESSAGE_CHARS {
        return message;
    }
    truncate_units(&message, MAX_ERROR_BODY_CHARS)
}

/// pi-ai's `truncateErrorText`: the first `max` UTF-16 units and a note of how many were cut.
fn truncate_units(text: &str, max: usize) -> String {
    let len = utf16_len(text);
    if len <= max {
        return text.to_owned();
    }
    format!("{}... [truncated {} chars]", utf16_prefix(text, max), len - max)
}

/// The longest prefix of `text` of at most `max` UTF-16 units (JavaScript's `slice(0, max)`,
/// without splitting a character).
pub(crate) fn utf16_prefix(text: &str, max: usize) -> &str {
    let mut units = 0;
    for (index, c) in text.char_indices() {
        units += c.len_utf16();
        if units > max {
            return text.get(..index).unwrap_or(text);
        }
    }
    text
}

/// pi-ai's `formatProviderError(normalizeProviderError(error), prefix)`.
pub(crate) fn format_provider_error(error: &ApiError, prefix: Option<&str>) -> String {
    let carries_body = match &error.body {
        None => true,
        Some(body) => error.message.contains(body.as_str()),
    };
    match (carries_body, error.status, &error.body, prefix) {
        (false, Some(status), Some(body), Some(prefix)) => format!("{prefix} ({status}): {body}"),
        (false, Some(status), Some(body), None) => format!("{status}: {body}"),
        (_, Some(status), _, Some(prefix)) => format!("{prefix} ({status}): {}", error.message),
        _ => error.message.clone(),
    }
}

/// The OpenAI / Anthropic SDKs' `APIError.makeMessage`.
pub(crate) fn sdk_make_message(
    status: Option<u16>,
    error: Option<&serde_json::Value>,
    message: Option<&str>,
) -> String {
    let msg: Option<String> = match error {
        Some(error) if error.get("message").is_some_and(crate::js_json::truthy) => match error.get("message") {
            Some(serde_json::Value::String(text)) => Some(text.clone()),
            Some(other) => Some(crate::js_json::stringify(other)),
            None => None,
        },
        Some(error) if crate::js_json::truthy(error) => Some(crate::js_json::stringify(error)),
        _ => message.map(str::to_owned).filter(|m| !m.is_empty()),
    };
    match (status, msg) {
        (Some(status), Some(msg)) => format!("{status} {msg}"),
        (Some(status), None) => format!("{status} status code (no body)"),
        (None, Some(msg)) => msg,
        (None, None) => "(no status code or body)".to_owned(),
    }
}

/// A plain, non-empty JSON object (pi-ai's `isPlainNonEmptyObject`).
pub(crate) fn plain_non_empty_object(value: Option<&serde_json::Value>) -> Option<&serde_json::Value> {
    value.filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cap_error_text() {
        let error = ApiError {
            kind: ApiErrorKind::Status,
            status: Some(429),
            headers: Some({
                let mut h = HeaderMap::new();
                h.insert("retry-after", "120".parse().unwrap());
                h
            }),
            message: "429 slow down".into(),
            body: None,
        };
        assert_eq!(
            retry_delay_ms(&error, 0, None).unwrap_err(),
            "Server requested 120s retry delay (max: 60s). 429 slow down"
        );
        assert_eq!(retry_delay_ms(&error, 0, Some(0)).unwrap(), 120_000.0);
    }

    #[test]
    fn absurd_delays_saturate_instead_of_panicking() {
        assert_eq!(delay_duration(1e300), Duration::from_millis(u64::MAX));
        assert_eq!(delay_duration(f64::INFINITY), Duration::from_millis(u64::MAX));
        assert_eq!(delay_duration(f64::NAN), Duration::ZERO);
        assert_eq!(delay_duration(-5.0), Duration::ZERO);
        assert_eq!(delay_duration(1500.7), Duration::from_millis(1500));
    }

    #[test]
    fn limits_default_on_and_zero_disables() {
        assert_eq!(limit(None, DEFAULT_HEADERS_TIMEOUT_MS), Some(Duration::from_secs(300)));
        assert_eq!(limit(None, DEFAULT_IDLE_TIMEOUT_MS), Some(Duration::from_secs(300)));
        assert_eq!(limit(Some(0), DEFAULT_HEADERS_TIMEOUT_MS), None);
        assert_eq!(limit(Some(250), DEFAULT_HEADERS_TIMEOUT_MS), Some(Duration::from_millis(250)));
    }

    #[test]
    fn error_messages_are_bounded() {
        let short = "Anthropic API error (500): boom".to_owned();
        assert_eq!(bound_error_message(short.clone()), short);
        // The reference's own shape (prefix + 4000-unit body + note) stays as it is.
        let body = normalize_body(&"b".repeat(9000)).unwrap();
        let shaped = format!("OpenAI API error (500): {body}");
        assert_eq!(bound_error_message(shaped.clone()), shaped);
        // Anything longer is cut to 4000 UTF-16 units with the same note.
        let long = "\u{1f600}".repeat(3000);
        let bounded = bound_error_message(long);
        assert!(bounded.ends_with("... [truncated 2000 chars]"), "{}", &bounded[bounded.len() - 40..]);
        assert_eq!(utf16_len(&bounded), 4000 + "... [truncated 2000 chars]".len());
    }

    #[test]
    fn redirect_error_names_status_and_location() {
        let mut headers = HeaderMap::new();
        headers.insert("location", "https://elsewhere.example/v1".parse().unwrap());
        let message = redirect_message(307, &headers);
        assert!(message.starts_with("Provider answered with a redirect (307) to https://elsewhere.example/v1;"));
        assert!(redirect_message(302, &HeaderMap::new()).starts_with("Provider answered with a redirect (302);"));
    }
}
