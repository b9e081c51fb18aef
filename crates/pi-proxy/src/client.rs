//! The proxy client: a [`StreamFn`] that streams through a pi proxy server (the reference's
//! `streamProxy`).
//!
//! One request is one POST of `{model, context, options}` to `{proxy_url}/api/stream`. The
//! answer's `data:` lines are framed by the providers' SSE decoder and applied, in order, to a
//! rebuilt partial message; the stream ends at the first `done` or `error` event (the rest of
//! the body is not read). Every failure is an `error` event with the reference's texts:
//! `Proxy error: …` for a non-2xx answer, the `JSON.parse` message for a malformed line,
//! `Received … for non-… content` for an event that does not fit the message,
//! `Connection closed by proxy server before the response completed` for a body that ends
//! without a terminal event; a cancelled request ends with stop reason `aborted`.
//!
//! Waits are bounded: `timeout_ms` (default 300 s, undici's) until the response headers,
//! `idle_timeout_ms` (default 300 s) between body chunks (0 disables either), error bodies are
//! read up to 64 KiB, and event-stream lines and events are capped as the adapters cap them
//! ([`FrameGuard`]). The client's own error texts are bounded like the adapters'
//! `errorMessage` and never carry the bearer token.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use pi_providers::api::pi_messages::{Protocol, WireEvent};
use pi_providers::transport::sse::{FrameGuard, SseDecoder, SseEvent};
use pi_types::CancellationToken;
use pi_types::{
    AssistantMessageBuilder, AssistantMessageEventStream, Model, StopReason, StreamFn, StreamOptions, TranscriptContext,
};
use serde_json::Value;

use crate::wire::ProxyRequestOptions;

mod models;
pub use models::MODELS_TIMEOUT;

/// Time to response headers when the options set none (undici's `headersTimeout`).
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Largest error body read from a non-2xx answer.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

const ABORTED_BEFORE_HEADERS: &str = "This operation was aborted";
const ABORTED_BY_USER: &str = "Request aborted by user";
const CLOSED_EARLY: &str = "Connection closed by proxy server before the response completed";

/// A [`StreamFn`] that streams through a pi proxy server, usable anywhere a provider is.
///
/// The token is sent as `Authorization: Bearer <token>` to `proxy_url` only, and never
/// printed by `Debug`. The options forwarded are the reference's serializable subset
/// ([`ProxyRequestOptions::from_stream_options`]); the API key stays on the server.
///
/// ```no_run
/// use pi_proxy::ProxyStreamFn;
/// use pi_types::{Model, StreamFn, StreamOptions, TranscriptContext};
/// # async fn run() {
/// let proxy = ProxyStreamFn::new("https://genai.example.com", "my-token");
/// let model = Model::new("claude-sonnet-4-5").with_api("anthropic-messages").with_provider("anthropic");
/// let message = proxy.stream(&model, TranscriptContext::default(), StreamOptions::default()).result().await;
/// # }
/// ```
#[derive(Clone)]
pub struct ProxyStreamFn {
    endpoint: Arc<str>,
    token: Arc<str>,
    /// The client of [`ProxyStreamFn::with_http_client`], if one was given.
    http_client: Option<pi_types::HttpClientHandle>,
}

impl fmt::Debug for ProxyStreamFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyStreamFn")
            .field("endpoint", &self.endpoint)
            .field("token", &"<redacted>")
            .field("http_client", &self.http_client.is_some())
            .finish()
    }
}

impl ProxyStreamFn {
    /// A client of the proxy at `proxy_url` (e.g. `https://genai.example.com`) with a bearer token.
    pub fn new(proxy_url: impl AsRef<str>, token: impl Into<String>) -> Self {
        let base = proxy_url.as_ref().trim_end_matches('/');
        Self { endpoint: format!("{base}/api/stream").into(), token: token.into().into(), http_client: None }
    }

    /// Send requests (streams and [`ProxyStreamFn::models`]) with `client` unless a request's
    /// [`StreamOptions::http_client`] names another, as a registry's client is used (see
    /// [`pi_providers::transport::client`]); otherwise pi-providers' shared client. Every time limit of
    /// the stream holds with any client.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(pi_providers::transport::client::handle(client));
        self
    }

    /// `options` with this proxy client's HTTP client where they name none.
    fn fill_client(&self, options: &mut StreamOptions) {
        if options.http_client.is_none() {
            options.http_client.clone_from(&self.http_client);
        }
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

/// The request body, serialized up front so the transcript is not kept alive by the stream.
fn request_body(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Result<Vec<u8>, String> {
    #[derive(serde::Serialize)]
    struct Body<'a> {
        model: &'a Model,
        context: ContextRef<'a>,
        options: ProxyRequestOptions,
    }
    #[derive(serde::Serialize)]
    struct ContextRef<'a> {
        messages: &'a [pi_types::Message],
    }
    let body = Body {
        model,
        context: ContextRef { messages: context.messages() },
        options: ProxyRequestOptions::from_stream_options(options),
    };
    serde_json::to_vec(&body).map_err(|e| e.to_string())
}

impl StreamFn for ProxyStreamFn {
    fn stream(
        &self,
        model: &Model,
        context: TranscriptContext,
        mut options: StreamOptions,
    ) -> AssistantMessageEventStream {
        self.fill_client(&mut options);
        let body = request_body(model, &context, &options);
        drop(context);
        let model = model.clone();
        let request = Request {
            endpoint: Arc::clone(&self.endpoint),
            token: Arc::clone(&self.token),
            cancel: options.cancel.clone(),
            timeout: limit(options.timeout_ms, DEFAULT_TIMEOUT_MS),
            idle: limit(options.idle_timeout_ms, pi_providers::DEFAULT_IDLE_TIMEOUT_MS),
            client: pi_providers::transport::client::of_options(&options),
        };
        AssistantMessageEventStream::from_producer(move |tx| async move {
            let mut out = AssistantMessageBuilder::for_model(tx, &model);
            let ending = match body {
                Ok(body) => request.run(body, &mut out).await,
                Err(message) => Ending::Failed(message),
            };
            match ending {
                Ending::Finish(reason) => out.done(reason).await,
                // The reference's rule: `aborted` whenever the caller cancelled, whatever failed.
                Ending::Failed(message) if request.is_cancelled() => out.aborted(request.failure(message)).await,
                Ending::Failed(message) => out.error(request.failure(message)).await,
            }
        })
    }
}

struct Request {
    endpoint: Arc<str>,
    token: Arc<str>,
    cancel: Option<CancellationToken>,
    timeout: Option<Duration>,
    idle: Option<Duration>,
    /// The request's own client (`StreamOptions::http_client`), else the shared default.
    client: Result<reqwest::Client, String>,
}

/// A limit in ms: `None` takes the default, `Some(0)` disables it (as the adapters read them).
fn limit(value: Option<u64>, default: u64) -> Option<Duration> {
    Some(Duration::from_millis(value.unwrap_or(default))).filter(|d| !d.is_zero())
}

/// How a request ended.
enum Ending {
    /// A terminal event arrived: end with this stop reason.
    Finish(StopReason),
    /// The request failed with this message.
    Failed(String),
}

async fn cancelled(cancel: Option<&CancellationToken>) {
    match cancel {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

/// The most specific message of an error's source chain.
fn deepest_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

impl Request {
    fn is_cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(CancellationToken::is_cancelled)
    }

    /// A failure as `errorMessage`: a proxy that echoes the request's `Authorization` header
    /// in an error body must not put the token into the transcript, and a huge error text is
    /// cut like the adapters cut theirs.
    fn failure(&self, message: String) -> String {
        let message = if !self.token.is_empty() && message.contains(&*self.token) {
            message.replace(&*self.token, "<redacted>")
        } else {
            message
        };
        pi_providers::bound_error_message(message)
    }

    /// Send the request and stream its events into `out`.
    async fn run(&self, body: Vec<u8>, out: &mut AssistantMessageBuilder) -> Ending {
        let failed = |message: String| Ending::Failed(message);
        if self.is_cancelled() {
            return failed(ABORTED_BEFORE_HEADERS.into());
        }
        let client = match &self.client {
            Ok(client) => client,
            Err(message) => return failed(message.clone()),
        };
        let send = client
            .post(&*self.endpoint)
            .header(reqwest::header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send();
        let response = tokio::select! {
            biased;
            () = cancelled(self.cancel.as_ref()) => return failed(ABORTED_BEFORE_HEADERS.into()),
            result = async {
                match self.timeout {
                    Some(limit) => tokio::time::timeout(limit, send).await.map_err(|_| ()),
                    None => Ok(send.await),
                }
            } => match result {
                Err(()) => return failed("fetch failed: Headers Timeout Error".into()),
                Ok(Err(error)) => return failed(format!("fetch failed: {}", deepest_cause(&error))),
                Ok(Ok(response)) => response,
            },
        };
        if !response.status().is_success() {
            return failed(self.error_text(response).await);
        }
        let mut chunks = response.bytes_stream();
        let mut decoder = SseDecoder::new();
        let mut guard = FrameGuard::default();
        let mut events = Vec::new();
        loop {
            let next = tokio::select! {
                biased;
                () = cancelled(self.cancel.as_ref()) => return failed(ABORTED_BY_USER.into()),
                next = async {
                    match self.idle {
                        Some(limit) => tokio::time::timeout(limit, chunks.next()).await.map_err(|_| limit),
                        None => Ok(chunks.next().await),
                    }
                } => next,
            };
            let end = match next {
                Err(limit) => {
                    return failed(format!("Stream idle timeout: no data received for {} ms", limit.as_millis()))
                }
                Ok(Some(Err(error))) => return failed(format!("terminated: {}", deepest_cause(&error))),
                Ok(Some(Ok(bytes))) => {
                    // A line or event over its cap ends the stream before it is buffered.
                    if let Err(message) = guard.check(&bytes) {
                        return failed(message);
                    }
                    decoder.push(&bytes, &mut events);
                    false
                }
                Ok(None) => {
                    decoder.finish(&mut events);
                    true
                }
            };
            if let Some(ending) = self.apply_events(&mut events, out).await {
                return ending;
            }
            if end {
                return failed(CLOSED_EARLY.into());
            }
        }
    }

    /// Apply decoded SSE events line by line; `Some` when the stream is over.
    async fn apply_events(&self, events: &mut Vec<SseEvent>, out: &mut AssistantMessageBuilder) -> Option<Ending> {
        for event in events.drain(..) {
            for line in &event.raw {
                let mut event = match decode_line(line, out.message().content.len()) {
                    Ok(Some(event)) => event,
                    Ok(None) => continue,
                    Err(message) => return Some(Ending::Failed(message)),
                };
                // The server's error text gets what the client's own gets: a server (or a
                // proxy in between) that echoes the token must not put it in the transcript.
                if let WireEvent::Error { error_message: Some(text), .. } = &mut event {
                    *text = self.failure(std::mem::take(text).into()).into_boxed_str();
                }
                match Protocol::Proxy.rebuild(out, event).await {
                    Ok(None) => {}
                    Ok(Some(reason)) => return Some(Ending::Finish(reason)),
                    Err(message) => return Some(Ending::Failed(message)),
                }
                // The consumer may have cancelled while it handled the event.
                if self.is_cancelled() {
                    return Some(Ending::Failed(ABORTED_BY_USER.into()));
                }
            }
        }
        None
    }

    /// The message of a non-2xx answer: `Proxy error: {error}` when the JSON body's `error` is
    /// truthy, else `Proxy error: {status} {statusText}`.
    async fn error_text(&self, response: reqwest::Response) -> String {
        let status = response.status();
        let fallback = format!("Proxy error: {} {}", status.as_u16(), status.canonical_reason().unwrap_or(""));
        let mut body = Vec::new();
        let mut chunks = response.bytes_stream();
        let limit = self.idle.unwrap_or(Duration::from_millis(pi_providers::DEFAULT_IDLE_TIMEOUT_MS));
        while body.len() < MAX_ERROR_BODY_BYTES {
            let next = tokio::select! {
                biased;
                () = cancelled(self.cancel.as_ref()) => return fallback,
                next = tokio::time::timeout(limit, chunks.next()) => next,
            };
            match next {
                Ok(Some(Ok(bytes))) => body.extend_from_slice(&bytes),
                Ok(None) => break,
                // A body that breaks or stalls is not JSON the reference could read.
                _ => return fallback,
            }
        }
        if body.len() > MAX_ERROR_BODY_BYTES {
            return fallback;
        }
        let text = String::from_utf8_lossy(&body);
        match pi_types::json::parse_js(&text) {
            Ok(value) => match value.get("error") {
                Some(error) if pi_types::json::js::truthy(error) => format!("Proxy error: {}", js_string(error)),
                _ => fallback,
            },
            Err(_) => fallback,
        }
    }
}

/// The reference's `processLine`: `data: ` lines only, trimmed, blank skipped; `None` for a
/// line without an event or with an event type the reference ignores. `blocks`: the blocks of
/// the message so far.
fn decode_line(line: &str, blocks: usize) -> Result<Option<WireEvent>, String> {
    let Some(data) = line.strip_prefix("data: ") else { return Ok(None) };
    let data = pi_types::json::js::js_trim(data);
    if data.is_empty() {
        return Ok(None);
    }
    let value = pi_types::json::parse_js(data).map_err(|error| error.message().to_owned())?;
    Protocol::Proxy.decode(value, blocks)
}

/// JavaScript's `String(value)` of a JSON value (template-literal conversion).
fn js_string(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), pi_types::json::js::format_number),
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|item| if item.is_null() { String::new() } else { js_string(item) })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_values_read_like_javascript() {
        assert_eq!(js_string(&json!("nope")), "nope");
        assert_eq!(js_string(&json!(42)), "42");
        assert_eq!(js_string(&json!([1, null, "a"])), "1,,a");
        assert_eq!(js_string(&json!({"a": 1})), "[object Object]");
        assert!(!pi_types::json::js::truthy(&json!("")));
        assert!(!pi_types::json::js::truthy(&json!(0)));
    }

    #[test]
    fn lines_without_events_are_skipped() {
        assert_eq!(decode_line("event: x", 0), Ok(None));
        assert_eq!(decode_line("data:  ", 0), Ok(None));
        assert_eq!(decode_line("data: {\"type\": \"ping\"}", 0), Ok(None));
        assert_eq!(decode_line("data: {\"type\": \"start\"}", 0), Ok(Some(WireEvent::Start)));
    }

    #[test]
    fn token_is_redacted() {
        let client = ProxyStreamFn::new("http://127.0.0.1:1/", "tok-secret");
        assert!(!format!("{client:?}").contains("tok-secret"));
        assert_eq!(client.endpoint(), "http://127.0.0.1:1/api/stream");
    }
}
