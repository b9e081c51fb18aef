//! OpenAI Codex Responses (`openai-codex-responses`): the Responses API of a ChatGPT
//! subscription.
//!
//! Two transports carry the same request and decode the same events (`CodexDecode`: Codex's
//! own event mapping in front of the Responses stream processing):
//!
//! - SSE, through the shared driver: `POST <baseUrl>/codex/responses` (`baseUrl` defaults to
//!   `https://chatgpt.com/backend-api`; a base URL already ending in `/codex` or
//!   `/codex/responses` is used as is) with `Authorization: Bearer <access token>`,
//!   `chatgpt-account-id` (read from the token's `https://api.openai.com/auth` claim, see
//!   [`crate::auth::codex`]), `OpenAI-Beta: responses=experimental`, `originator: pi`, `accept:
//!   text/event-stream` and, with a session, `session-id` and `x-client-request-id`. Retries
//!   and error texts are the reference's own loop's (`CodexDialect`).
//! - WebSocket (`transport` `websocket`, `websocket-cached`, `auto` or unset), tried first and
//!   falling back to SSE before its first event: see `websocket.rs`.
//!
//! The body is a Responses request with Codex's fixed members (`store: false`,
//! `text.verbosity`, `include: ["reasoning.encrypted_content"]`, `tool_choice`,
//! `parallel_tool_calls: true`; tools carry `strict: null`).

use pi_types::transcript::{resolve_transcript, resolve_transcript_tools};
use pi_types::{
    AssistantMessageEventStream, CacheRetention, Model, StreamFn, StreamOptions, ThinkingLevel, TranscriptContext,
    Transport,
};
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use crate::api::driver::{self, Call, Cancel, Cx, Exchange, OnCancel, WireApi};
use crate::api::openai::responses::ReasoningSummary;
use crate::api::openai::responses::{
    convert_messages_with_effort_baseline, convert_tools, grammar_inputs, Compat, ResponsesState, TierPricing,
};
use crate::api::own_options;
use crate::api::request_options;
use crate::api::support::{self as adapter_support, Stop};
use crate::auth::codex as codex_auth;
use crate::js_json;
use crate::transport::http::{self, ApiError, ApiErrorKind, Dialect};

mod decode;
mod websocket;

pub(crate) use decode::CodexDecode;
pub(crate) use websocket::forget as forget_sessions;

/// The API id.
pub const API: &str = "openai-codex-responses";

mod options;
pub use options::{CodexToolChoice, OpenAICodexResponsesOptions, TextVerbosity};

/// Stream with the API's own options, as the reference's `stream()` (through a default
/// [`OpenAICodexResponses`]): nothing is derived from `options.reasoning`, and
/// `max_output_tokens` is sent only when `options.max_tokens` is set.
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: OpenAICodexResponsesOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&OpenAICodexResponses::default(), model, context, options, api)
}
/// The base URL used when the model has none.
pub const DEFAULT_BASE_URL: &str = "https://chatgpt.com/backend-api";

const MIN_OUTPUT_TOKENS: u64 = 16;

/// The Codex Responses adapter.
///
/// The fields are the reference's Codex-only request options, which [`StreamOptions`] (shared
/// by every API) does not carry.
#[derive(Clone, Debug, Default)]
pub struct OpenAICodexResponses {
    /// `service_tier` to request (`flex`, `priority`, ...); also prices a `default` answer.
    pub service_tier: Option<String>,
    /// `text.verbosity` (default `low`).
    pub text_verbosity: Option<String>,
    /// `reasoning.summary` (default `auto`).
    pub reasoning_summary: Option<String>,
}

impl OpenAICodexResponses {
    /// Request this service tier.
    pub fn with_service_tier(mut self, tier: impl Into<String>) -> Self {
        self.service_tier = Some(tier.into());
        self
    }

    /// Request this text verbosity.
    pub fn with_text_verbosity(mut self, verbosity: impl Into<String>) -> Self {
        self.text_verbosity = Some(verbosity.into());
        self
    }

    /// Request this reasoning summary mode.
    pub fn with_reasoning_summary(mut self, summary: impl Into<String>) -> Self {
        self.reasoning_summary = Some(summary.into());
        self
    }

    /// The request body the adapter sends over SSE for a context.
    /// Public so that an application can see what its model and options put on the wire without a
    /// server (this crate's own tests of the request fields use it, and cannot reach private items);
    /// the body is the one sent when no `on_payload` hook changes it.
    pub fn build_request_body(&self, model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Value {
        let compat = compat(model);
        let context = resolve_transcript(context.clone(), compat.supports_mid_convo_system_messages);
        let effort = requested_effort(model, options);
        let update = configuration_update_effort(model, &compat, effort.as_deref());
        self.build_body(model, &context, options, &compat, session_id(options).as_deref(), effort.as_deref(), update)
    }
}

/// The request URL for a base URL.
pub fn codex_url(base_url: &str) -> String {
    let raw = if js_json::js_trim(base_url).is_empty() { DEFAULT_BASE_URL } else { base_url };
    let normalized = raw.trim_end_matches('/');
    if normalized.ends_with("/codex/responses") {
        normalized.to_owned()
    } else if normalized.ends_with("/codex") {
        format!("{normalized}/responses")
    } else {
        format!("{normalized}/codex/responses")
    }
}

fn compat(model: &Model) -> Compat {
    let mut compat = Compat::for_model(model);
    let c = model.compat.as_ref();
    compat.supports_strict_mode = c.and_then(|c| c.get("supportsStrictMode")).and_then(Value::as_bool).unwrap_or(true);
    compat.default_strict = None;
    compat
}

/// The session id sent (cache key and headers): none when caching is off, at most 64 chars.
fn session_id(options: &StreamOptions) -> Option<String> {
    if options.cache_retention == Some(CacheRetention::None) {
        return None;
    }
    options.session_id.as_ref().map(|s| s.chars().take(64).collect())
}

/// The effort `streamSimple` hands the adapter: the clamped level, `none` for a reasoning model
/// without one, else nothing.
/// [`OpenAICodexResponsesOptions::reasoning_effort`] wins; a `stream()` call's options without
/// one request none.
fn requested_effort(model: &Model, options: &StreamOptions) -> Option<String> {
    let api = own_options::lookup::<OpenAICodexResponsesOptions>(model, options);
    if let Some(effort) = api.field(|api| &api.reasoning_effort) {
        return Some(effort.as_str().to_owned());
    }
    if api.is_own() {
        return None;
    }
    let level =
        options.reasoning.map(|l| request_options::clamp_thinking_level(model, l)).filter(|l| *l != ThinkingLevel::Off);
    match level {
        Some(level) => Some(level_name(level)),
        None if model.reasoning => Some("none".to_owned()),
        None => None,
    }
}

fn level_name(level: ThinkingLevel) -> String {
    serde_json::to_value(level).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// The provider's effort for a requested one; `None` when the model takes no reasoning field.
fn resolve_effort(model: &Model, effort: &str) -> Option<String> {
    if effort == "none" {
        return match request_options::mapped_level(model, ThinkingLevel::Off) {
            None => Some("none".to_owned()),
            Some(mapped) => mapped.map(str::to_owned),
        };
    }
    let level: Option<ThinkingLevel> = serde_json::from_value(json!(effort)).ok();
    Some(level.map_or_else(|| effort.to_owned(), |l| request_options::mapped_or_level(model, l)))
}

fn configuration_update_effort(model: &Model, compat: &Compat, effort: Option<&str>) -> Option<String> {
    if !compat.supports_mid_convo_effort {
        return None;
    }
    resolve_effort(model, effort?)
}

impl OpenAICodexResponses {
    /// The `service_tier` a request asks for: its API options', else the adapter's.
    fn requested_tier(&self, model: &Model, options: &StreamOptions) -> Option<String> {
        own_options::lookup::<OpenAICodexResponsesOptions>(model, options)
            .field(|api| &api.service_tier)
            .map(|tier| tier.as_str().to_owned())
            .or_else(|| self.service_tier.clone())
    }

    #[allow(clippy::too_many_arguments)]
    fn build_body(
        &self,
        model: &Model,
        context: &TranscriptContext,
        options: &StreamOptions,
        compat: &Compat,
        session: Option<&str>,
        effort: Option<&str>,
        update_effort: Option<String>,
    ) -> Value {
        let tools = resolve_transcript_tools(context.messages(), compat.tool_support());
        // The first effort of the transcript is the request's own and later changes are
        // `configuration_update` items: on the Codex backend a fixed `medium` request with a
        // `high` update can reason less than a `high` request.
        let (input, effort_baseline) =
            convert_messages_with_effort_baseline(model, context, compat, update_effort.as_deref());
        let api = own_options::lookup::<OpenAICodexResponsesOptions>(model, options);
        let max_tokens = match api.is_own() {
            true => options.max_tokens.unwrap_or(0),
            false => request_options::base_max_tokens(model, context, options.max_tokens),
        };
        let verbosity = api.field(|api| &api.text_verbosity).map(TextVerbosity::as_str);
        let mut body = Map::new();
        body.insert("model".into(), json!(model.id));
        body.insert("store".into(), json!(false));
        body.insert("stream".into(), json!(true));
        body.insert("input".into(), Value::Array(input));
        body.insert("text".into(), json!({"verbosity": verbosity.or(self.text_verbosity.as_deref()).unwrap_or("low")}));
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        if let Some(session) = session {
            body.insert("prompt_cache_key".into(), json!(session));
        }
        let tool_choice = match api.field(|api| &api.tool_choice) {
            Some(choice) => json!(choice.as_str()),
            None => options.tool_choice.and_then(|c| serde_json::to_value(c).ok()).unwrap_or(json!("auto")),
        };
        body.insert("tool_choice".into(), tool_choice);
        body.insert("parallel_tool_calls".into(), json!(true));
        if max_tokens > 0 && compat.supports_max_output_tokens {
            body.insert("max_output_tokens".into(), json!(max_tokens.max(MIN_OUTPUT_TOKENS)));
        }
        if let Some(t) = options.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(tier) = self.requested_tier(model, options) {
            body.insert("service_tier".into(), json!(tier));
        }
        if !tools.request_tools.is_empty() {
            body.insert("tools".into(), Value::Array(convert_tools(&tools.request_tools, compat, false)));
        }
        match effort {
            Some(effort) => {
                let sent = effort_baseline.or_else(|| resolve_effort(model, effort));
                if let Some(sent) = sent {
                    let summary = api.field(|api| &api.reasoning_summary).map(ReasoningSummary::as_str);
                    let summary = summary.or(self.reasoning_summary.as_deref()).unwrap_or("auto");
                    body.insert("reasoning".into(), json!({"effort": sent, "summary": summary}));
                }
            }
            None if model.reasoning && !request_options::off_is_null(model) => {
                let off = request_options::mapped_level(model, ThinkingLevel::Off).flatten().unwrap_or("none");
                body.insert("reasoning".into(), json!({"effort": off}));
            }
            None => {}
        }
        Value::Object(body)
    }
}

/// The friendly text of a non-2xx answer, as the reference derives it from the body.
fn status_message(status: u16, reason: &str, body: &[u8]) -> String {
    let raw = String::from_utf8_lossy(body).into_owned();
    let fallback = if !raw.is_empty() {
        raw.clone()
    } else if !reason.is_empty() {
        reason.to_owned()
    } else {
        "Request failed".to_owned()
    };
    let Ok(parsed) = js_json::parse(&raw) else { return fallback };
    let Some(error) = parsed.get("error").filter(|e| js_json::truthy(e)) else { return fallback };
    let text = |v: Option<&Value>| -> Option<String> {
        v.filter(|v| js_json::truthy(v)).map(|v| v.as_str().map_or_else(|| js_json::stringify(v), str::to_owned))
    };
    let code = text(error.get("code")).or_else(|| text(error.get("type"))).unwrap_or_default();
    let lower = code.to_lowercase();
    let mut friendly = None;
    if ["usage_limit_reached", "usage_not_included", "rate_limit_exceeded"].iter().any(|c| lower.contains(c))
        || status == 429
    {
        let plan = match error.get("plan_type").filter(|p| js_json::truthy(p)) {
            None => String::new(),
            Some(Value::String(plan)) => format!(" ({} plan)", plan.to_lowercase()),
            // The reference's `toLowerCase` throws on anything else: the raw body stays.
            Some(_) => return fallback,
        };
        let when = match error.get("resets_at").filter(|r| js_json::truthy(r)) {
            None => String::new(),
            Some(at) => {
                let at = match at {
                    Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                    Value::String(s) => js_json::js_trim(s).parse::<f64>().unwrap_or(f64::NAN),
                    _ => f64::NAN,
                };
                let minutes = ((at * 1000.0 - pi_types::now_ms() as f64) / 60000.0 + 0.5).floor();
                if minutes.is_nan() {
                    " Try again in ~NaN min.".to_owned()
                } else {
                    // `Math.max(0, …)`: never a negative (or negative-zero) count.
                    format!(" Try again in ~{} min.", if minutes > 0.0 { minutes } else { 0.0 })
                }
            }
        };
        friendly = Some(format!("You have hit your ChatGPT usage limit{plan}.{when}").trim().to_owned());
    }
    if let Some(friendly) = friendly {
        return friendly;
    }
    text(error.get("message")).unwrap_or(fallback)
}

/// How Codex's answers and failures read (the reference's own fetch loop).
struct CodexDialect {
    timeout_ms: Option<u64>,
}

const BASE_RETRY_DELAY_MS: f64 = 1000.0;

/// A 429 that waiting will not fix (quota, billing).
fn is_terminal_rate_limit(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "gousagelimiterror",
        "freeusagelimiterror",
        "monthly usage limit reached",
        "available balance",
        "insufficient_quota",
        "out of budget",
        "quota exceeded",
        "billing",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The reference's `isRetryableError`: 429 (unless terminal) and 500/502/503/504, or a
/// transient-sounding body.
fn is_retryable_status(status: u16, text: &str) -> bool {
    if status == 429 && is_terminal_rate_limit(text) {
        return false;
    }
    if matches!(status, 429 | 500 | 502 | 503 | 504) {
        return true;
    }
    static TRANSIENT: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    TRANSIENT
        .get_or_init(|| {
            regex::Regex::new(r"(?i)rate.?limit|overloaded|service.?unavailable|upstream.?connect|connection.?refused")
                .ok()
        })
        .as_ref()
        .is_some_and(|re| re.is_match(text))
}

/// The server's `retry-after-ms` / `retry-after` (seconds or an HTTP date), in ms.
fn server_delay_ms(headers: &HeaderMap) -> Option<f64> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms") {
        let trimmed = js_json::js_trim(ms);
        let value = if trimmed.is_empty() { Some(0.0) } else { trimmed.parse::<f64>().ok() };
        if let Some(value) = value.filter(|v| v.is_finite()) {
            return Some(value.max(0.0));
        }
    }
    let after = get("retry-after").filter(|v| !v.is_empty())?;
    let trimmed = js_json::js_trim(after);
    let seconds = if trimmed.is_empty() { Some(0.0) } else { trimmed.parse::<f64>().ok() };
    if let Some(seconds) = seconds.filter(|v| v.is_finite()) {
        return Some((seconds * 1000.0).max(0.0));
    }
    let when = httpdate::parse_http_date(after).ok()?;
    Some(match when.duration_since(std::time::SystemTime::now()) {
        Ok(ahead) => ahead.as_secs_f64() * 1000.0,
        Err(_) => 0.0,
    })
}

impl Dialect for CodexDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let reason = reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
        ApiError {
            kind: ApiErrorKind::Status,
            status: Some(status),
            headers: Some(headers.clone()),
            message: status_message(status, reason, body),
            // The raw text, which the retry rule reads.
            body: Some(String::from_utf8_lossy(body).into_owned()),
        }
    }

    /// The reference's Codex loop: a retryable status waits for the server's delay (capped) or
    /// 1 s doubling; a connection failure or timeout is retried after 1 s doubling, unless its
    /// message speaks of a usage limit. Other statuses are final (the reference means them to
    /// be, but its own `catch` retries them too: not reproduced).
    fn retry(&self, error: &ApiError, retry_index: u32, max_retry_delay_ms: Option<u64>) -> Option<http::Retry> {
        let backoff = BASE_RETRY_DELAY_MS * 2f64.powi(retry_index.min(30) as i32);
        if let (ApiErrorKind::Status, Some(status)) = (error.kind, error.status) {
            if !is_retryable_status(status, error.body.as_deref().unwrap_or("")) {
                return Some(Ok(None));
            }
            let Some(delay) = error.headers.as_ref().and_then(server_delay_ms) else {
                return Some(Ok(Some(backoff)));
            };
            let max = max_retry_delay_ms.unwrap_or(http::DEFAULT_MAX_RETRY_DELAY_MS);
            if max > 0 && delay > max as f64 {
                return Some(Err(format!(
                    "Server requested {}s retry delay (max: {}s)",
                    (delay / 1000.0).ceil(),
                    (max as f64 / 1000.0).ceil()
                )));
            }
            return Some(Ok(Some(delay)));
        }
        if error.kind == ApiErrorKind::Other || self.format(error).contains("usage limit") {
            return Some(Ok(None));
        }
        Some(Ok(Some(backoff)))
    }

    fn format(&self, error: &ApiError) -> String {
        match error.kind {
            ApiErrorKind::Timeout => format!(
                "Codex SSE response headers timed out after {}ms",
                self.timeout_ms.unwrap_or(http::DEFAULT_HEADERS_TIMEOUT_MS)
            ),
            ApiErrorKind::Connection => {
                let cause = error.message.strip_prefix("Connection error.: ").unwrap_or(&error.message);
                format!("fetch failed: {cause}")
            }
            ApiErrorKind::Status | ApiErrorKind::Other => error.message.clone(),
        }
    }
}

impl StreamFn for OpenAICodexResponses {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(Wire(self.clone()), model, context, options)
    }
}

/// Where a Codex stream looks at cancellation: a cancelled read, or a cancellation seen after
/// an event, fails with the reference's text.
const CODEX_CANCEL: Cancel =
    Cancel { read: OnCancel::Fail(ABORTED), before_event: None, after_event: Some(OnCancel::Fail(ABORTED)) };

const ABORTED: &str = "Request was aborted";

/// The wire API behind [`OpenAICodexResponses`] (crate-private: its decoding types stay private).
struct Wire(OpenAICodexResponses);

impl WireApi for Wire {
    type Dialect = CodexDialect;
    type Decoder = CodexDecode;
    const CANCEL: Cancel = CODEX_CANCEL;
    const API_ID: Option<&'static str> = Some(API);

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, out } = call;
        let compat = compat(model);
        let context = resolve_transcript(context, compat.supports_mid_convo_system_messages);
        let grammar_inputs = grammar_inputs(&context, &compat)?;
        let effort = requested_effort(model, options);
        let update = configuration_update_effort(model, &compat, effort.as_deref());
        if let Some(update) = &update {
            out.metadata_mut().provider_thinking_level = Some(update.clone().into());
        }
        let Some(token) = options.api_key.clone().filter(|k| !k.is_empty()) else {
            return Err(Stop::error(format!("No API key for provider: {}", model.provider)));
        };
        let Some(account) = codex_auth::account_id(&token) else {
            return Err(Stop::error("Failed to extract accountId from token"));
        };
        let session = session_id(options);
        let body = self.0.build_body(model, &context, options, &compat, session.as_deref(), effort.as_deref(), update);
        let body = adapter_support::apply_on_payload(options, model, body).await;
        let bytes = js_json::stringify(&body).into_bytes();
        let mut identity = vec![("originator".to_owned(), Some("pi".to_owned()))];
        identity.extend(adapter_support::identity_headers(model, options));
        let account_headers = vec![
            ("Authorization".to_owned(), Some(format!("Bearer {token}"))),
            ("chatgpt-account-id".to_owned(), Some(account.clone())),
        ];
        let mut sse = account_headers.clone();
        sse.push(("OpenAI-Beta".to_owned(), Some("responses=experimental".to_owned())));
        sse.push(("accept".to_owned(), Some("text/event-stream".to_owned())));
        sse.push(("content-type".to_owned(), Some("application/json".to_owned())));
        if let Some(session) = &session {
            sse.push(("session-id".to_owned(), Some(session.clone())));
            sse.push(("x-client-request-id".to_owned(), Some(session.clone())));
        }
        let sources = [identity, adapter_support::model_headers(model), adapter_support::option_headers(options)];
        let transport = options.transport.unwrap_or(Transport::Auto);
        let ws = (transport != Transport::Sse).then(|| {
            let request_id = session.clone().unwrap_or_else(websocket::uuid_v7);
            let mut fixed = account_headers;
            for name in ["accept", "content-type", "OpenAI-Beta"] {
                fixed.push((name.to_owned(), None));
            }
            fixed.push(("OpenAI-Beta".to_owned(), Some(websocket::BETA.to_owned())));
            fixed.push(("x-client-request-id".to_owned(), Some(request_id.clone())));
            fixed.push(("session-id".to_owned(), Some(request_id)));
            let mut all = sources.to_vec();
            all.push(fixed);
            websocket::Plan {
                url: websocket::url(&model.base_url),
                headers: adapter_support::merge_headers(&all),
                body,
                session: options.session_id.clone().filter(|_| options.cache_retention != Some(CacheRetention::None)),
                account,
                configured: transport,
                cached: matches!(options.transport, Some(Transport::WebsocketCached | Transport::Auto)),
                request_bytes: bytes.len(),
                compat: compat.clone(),
            }
        });
        let mut all = sources.to_vec();
        all.push(sse);
        let request = http::Request {
            url: codex_url(&model.base_url),
            headers: adapter_support::merge_headers(&all),
            body: bytes,
        };
        let mut state =
            ResponsesState::with_pricing(TierPricing::Codex { requested: self.0.requested_tier(model, options) });
        state.grammar_inputs = grammar_inputs;
        let decoder = CodexDecode::new(state, options.on_provider_stream_event.is_none(), ws);
        Ok(Exchange::new(request, CodexDialect { timeout_ms: options.timeout_ms }, decoder))
    }

    async fn own_transport(
        &self,
        _request: &http::Request,
        decoder: &mut CodexDecode,
        cx: &mut Cx<'_>,
    ) -> Option<Result<(), Stop>> {
        websocket::run(decoder, cx).await
    }

    fn refused(&self, _decoder: &mut CodexDecode, _dialect: &CodexDialect, failure: http::Failure) -> Stop {
        if failure.aborted {
            Stop::aborted(ABORTED)
        } else {
            Stop::from(failure)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_the_reference() {
        assert_eq!(codex_url(""), "https://chatgpt.com/backend-api/codex/responses");
        assert_eq!(codex_url("http://h/x/"), "http://h/x/codex/responses");
        assert_eq!(codex_url("http://h/codex"), "http://h/codex/responses");
        assert_eq!(codex_url("http://h/codex/responses//"), "http://h/codex/responses");
    }

    #[test]
    fn usage_limit_messages() {
        let body = br#"{"error":{"code":"usage_limit_reached","plan_type":"PLUS","resets_at":1000}}"#;
        assert_eq!(
            status_message(429, "Too Many Requests", body),
            "You have hit your ChatGPT usage limit (plus plan). Try again in ~0 min."
        );
        assert_eq!(
            status_message(400, "Bad Request", br#"{"error":{"code":"usage_not_included"}}"#),
            "You have hit your ChatGPT usage limit."
        );
        assert_eq!(status_message(500, "Internal Server Error", br#"{"error":{"message":"boom"}}"#), "boom");
        assert_eq!(status_message(502, "Bad Gateway", b""), "Bad Gateway");
        // Half a minute ahead rounds up, as Math.round does; far past is 0, never -0.
        let soon = (pi_types::now_ms() as f64 / 1000.0 + 30.0 + 1.0).floor();
        let body = format!(r#"{{"error":{{"resets_at":{soon}}}}}"#);
        assert_eq!(
            status_message(429, "", body.as_bytes()),
            "You have hit your ChatGPT usage limit. Try again in ~1 min."
        );
        assert_eq!(
            status_message(429, "", br#"{"error":{"resets_at":-5}}"#),
            "You have hit your ChatGPT usage limit. Try again in ~0 min."
        );
        assert_eq!(
            status_message(429, "", br#"{"error":{"resets_at":"x"}}"#),
            "You have hit your ChatGPT usage limit. Try again in ~NaN min."
        );
        assert_eq!(status_message(502, "Bad Gateway", b"upstream"), "upstream");
    }
}
