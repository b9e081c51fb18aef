//! The `pi-messages` API: pi's own gateway protocol (`@earendil-works/pi-ai` 1.6.1
//! `api/pi-messages.js`, spoken by the Radius gateway and by `pi proxy serve`).
//!
//! # Protocol
//! * **Request**: `POST <baseUrl>/messages` (trailing slashes of the base URL dropped) with
//!   `Authorization: Bearer <api key>`, `Accept: text/event-stream`,
//!   `Content-Type: application/json` and the body `{model, context, options}`: the model id,
//!   the normalized transcript (`{messages}`, prompt and tools in system messages) and the
//!   options the backend may use, each only when set: `temperature`, `maxTokens`,
//!   `reasoning`, `cacheRetention` (or `"long"` when `PI_CACHE_RETENTION=long`), `sessionId`,
//!   `toolChoice`. The API key travels only in the header, never in the body. Headers: the
//!   identity headers, then the three above, then the request's own headers (later wins).
//! * **Response**: a 2xx answer is an event stream, read with the shared SSE decoder
//!   ([`SseDecoder`](crate::transport::sse::SseDecoder): LF, CRLF and CR line ends); an event's data (its `data:` lines joined),
//!   trimmed, is one [`WireEvent`] as JSON (`[DONE]` and events without data are skipped;
//!   a last event without a blank line after it still counts). The events are the assistant-message events without their `partial` message;
//!   the client rebuilds the message with [`AssistantMessageBuilder`]. The stream ends at the
//!   first `done` or `error` event; anything after it is not read. The events are those of
//!   pi-agent-core's proxy protocol (`pi_proxy`) with more members; [`WireEvent`] serves both,
//!   and [`Protocol`] lists where they differ.
//! * **Errors**: a non-2xx answer becomes `"<status> <reason>: <error.message or the body>"`
//!   plus `" (<error.code>)"` when the JSON body has `{"error": {"message", "code"}}`, with a
//!   `pi_messages_response_failure` diagnostic (status, URL, the error object or the body).
//!   A wire `error` event ends the response with its reason, text and usage, the content so
//!   far kept. A protocol failure (truncated stream: `<provider> stream ended without a terminal
//!   event`; malformed JSON: the parser's message; an event naming a block that does not exist:
//!   `Invalid contentIndex <n> in pi-messages <type> event`) ends it with a fresh error message,
//!   as the reference does: no content, zero usage.
//!
//! # The proxy protocol
//!
//! pi-agent-core's proxy (`POST {proxy}/api/stream`, the reference's `streamProxy`, served by
//! `pi proxy serve` beside `/messages`) streams the same events with fewer members: both use
//! [`WireEvent`], read with [`Protocol::decode`] and [`Protocol::rebuild`] and written with
//! [`WireEvent::from_event`]. Where the two differ:
//!
//! | | [`Protocol::Proxy`] | [`Protocol::PiMessages`] |
//! |---|---|---|
//! | `text_end`, `thinking_end` | `contentSignature` | also `content`, the block's final text, which replaces the streamed text |
//! | `thinking_end.redacted` | not carried | set on the block |
//! | `toolcall_start` | rebuilt as a plain start | rebuilt repeating `id` and `toolName` (as the reference passes its wire event through) |
//! | `toolcall_end.toolCall` | a complete `toolCall` block that replaces the streamed one; dropped when the block is not a tool call | raw members laid over the streamed block (`type` excepted); an error when the block is not a tool call |
//! | `done`, `error` | `usage` (required, well formed), `errorMessage`, `providerThinkingLevel` | also `responseId`, `responseModel` and `rewrite` (kept as a `pi_messages_rewrite` diagnostic); `usage` optional, read leniently (numbers saturate) |
//! | `error.reason` | ends the message as sent | `aborted`, anything else `error` |
//! | content indexes | a `*_start` must name the next block | every index is checked before the event is decoded |
//! | failures | the reference proxy's texts (`Received text_delta for non-text content`, `Invalid proxy event: …`); a `null` event fails | `Invalid contentIndex <n> in pi-messages <type> event`, `Invalid pi-messages <type> event: …`; a `null` event is skipped |
//!
//! Members a protocol does not carry are never written for it and are dropped unread.
//!
//! Differences from the reference (see `docs/providers/pi-messages.md`): a cancelled request
//! keeps the content streamed so far; events have pi-rs's fixed shape (members the backend adds
//! to an event, such as `contentSignature`, are put on the block, not echoed on the event);
//! unknown event types are skipped; a block event must name an open block of its kind and a
//! `*_start` must name the next index (the reference would overwrite or corrupt a block); an
//! API key a backend quotes in an error is replaced by `<redacted>`.

use std::sync::Mutex;

use pi_types::{
    AssistantMessageBuilder, AssistantMessageDiagnostic, AssistantMessageEventStream, CacheRetention, DiagnosticCode,
    DiagnosticErrorInfo, JsonObject, Model, StopReason, StreamFn, StreamOptions, ThinkingLevel, ToolChoice,
    TranscriptContext,
};
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::driver::{self, Call, Cancel, Cx, Decoder, Exchange, Flow, OnCancel, Secrets, Sse, WireApi};
use crate::api::own_options;
use crate::api::support::{self as adapter_support, Stop};
use crate::js_json;
use crate::transport::http::{self, ApiError, ApiErrorKind, Dialect};
use crate::transport::sse::SseEventRef;

/// The API id.
pub const API: &str = "pi-messages";

mod events;
mod options;
mod rebuild;
pub use events::{Protocol, WireEnd, WireEvent};
pub use options::{PiMessagesStreamOptions, PiMessagesToolChoice};

/// Longest frame buffered while waiting for its blank line, in bytes.
/// Longest error body kept in a diagnostic, in UTF-16 units (as the reference counts).
const MAX_DIAGNOSTIC_BODY_UNITS: usize = 8192;

/// The `pi-messages` adapter (a [`StreamFn`]); see the [module docs](self).
#[derive(Clone, Copy, Debug, Default)]
pub struct PiMessages;

impl StreamFn for PiMessages {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(Wire, model, context, options)
    }
}

/// The `options` of a request: what a backend may use, each member only when set (the
/// reference's order). The API key, hooks, timeouts and headers are never sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiMessagesOptions {
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Requested thinking level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ThinkingLevel>,
    /// Prompt-cache retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_retention: Option<CacheRetention>,
    /// Session id for caching and routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Tool selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
}

impl PiMessagesOptions {
    /// The members of `options` that are sent; `cacheRetention` falls back to `"long"` when
    /// `PI_CACHE_RETENTION=long` (the reference's legacy opt-in).
    pub fn from_stream_options(options: &StreamOptions) -> Self {
        let legacy_long =
            || (options.env_var("PI_CACHE_RETENTION").as_deref() == Some("long")).then_some(CacheRetention::Long);
        Self {
            temperature: options.temperature,
            max_tokens: options.max_tokens,
            reasoning: options.reasoning,
            cache_retention: options.cache_retention.or_else(legacy_long),
            session_id: options.session_id.clone(),
            tool_choice: options.tool_choice,
        }
    }

    /// Stream options carrying these members (everything else default).
    pub fn to_stream_options(&self) -> StreamOptions {
        StreamOptions {
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            reasoning: self.reasoning,
            cache_retention: self.cache_retention,
            session_id: self.session_id.clone(),
            tool_choice: self.tool_choice,
            ..StreamOptions::default()
        }
    }
}

/// Stream with the API's own options, as the reference's `stream()` (the same as setting them
/// in `options.api_options`: pi-messages derives nothing from the neutral options).
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: PiMessagesStreamOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&PiMessages, model, context, options, api)
}

/// The request body `{model, context, options}` the adapter sends (before `on_payload`), with
/// the [`PiMessagesStreamOptions`] that are set applied.
/// Public so that an application can see what its model and options put on the wire without a
/// server (this crate's own tests of the request fields use it, and cannot reach private items);
/// the body is the one sent when no `on_payload` hook changes it.
pub fn build_request_body(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Value {
    let api = own_options::lookup::<PiMessagesStreamOptions>(model, options);
    let mut wire = PiMessagesOptions::from_stream_options(options);
    wire.reasoning = api.field(|api| &api.reasoning).or(wire.reasoning);
    let mut options = serde_json::to_value(wire).unwrap_or_default();
    if let (Some(choice), Some(map)) = (api.field(|api| &api.tool_choice), options.as_object_mut()) {
        map.insert("toolChoice".into(), choice.to_wire());
    }
    let messages = serde_json::to_value(context.messages()).unwrap_or(Value::Array(Vec::new()));
    serde_json::json!({
        "model": model.id.as_str(),
        "context": {"messages": messages},
        "options": options,
    })
}

/// The URL requests go to: `<baseUrl>/messages`.
pub fn messages_url(model: &Model) -> String {
    format!("{}/messages", model.base_url.trim_end_matches('/'))
}

/// The URL a request goes to: [`messages_url`], with `?debug=1` when
/// [`PiMessagesStreamOptions::debug`] is set.
fn request_url(model: &Model, options: &StreamOptions) -> String {
    let debug = own_options::lookup::<PiMessagesStreamOptions>(model, options).field(|api| &api.debug);
    match debug {
        Some(true) => format!("{}?debug=1", messages_url(model)),
        _ => messages_url(model),
    }
}

/// The decoding state of one response: the terminal event's stop reason once it came, and the
/// diagnostic of a refused request.
#[derive(Default)]
pub(crate) struct Decode {
    reason: Option<StopReason>,
    diagnostic: Option<AssistantMessageDiagnostic>,
}

/// The wire API behind [`PiMessages`] (crate-private: its decoding types stay private).
struct Wire;

impl WireApi for Wire {
    type Dialect = PiDialect;
    type Decoder = Decode;
    const CANCEL: Cancel =
        Cancel { read: OnCancel::Fail("This operation was aborted"), before_event: None, after_event: None };

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, .. } = call;
        let Some(key) = options.api_key.clone().filter(|k| !k.is_empty()) else {
            return Err(Stop::error(format!("No API key provided for provider \"{}\"", model.provider)));
        };
        let body = build_request_body(model, &context, options);
        let body = adapter_support::apply_on_payload(options, model, body).await;
        let base = vec![
            ("authorization".to_owned(), Some(format!("Bearer {key}"))),
            ("accept".to_owned(), Some("text/event-stream".to_owned())),
            ("content-type".to_owned(), Some("application/json".to_owned())),
        ];
        let headers = adapter_support::merge_headers(&[
            adapter_support::identity_headers(model, options),
            base,
            adapter_support::option_headers(options),
        ]);
        let url = request_url(model, options);
        let request = http::Request { url: url.clone(), headers, body: js_json::stringify(&body).into_bytes() };
        let dialect = PiDialect { model: model.clone(), url, failure: Mutex::new(None) };
        let mut exchange = Exchange::new(request, dialect, Decode::default());
        // The protocol carries its own `start`.
        exchange.start = false;
        Ok(exchange)
    }

    fn refused(&self, decode: &mut Decode, dialect: &PiDialect, failure: http::Failure) -> Stop {
        if !failure.aborted {
            decode.diagnostic = dialect.failure.lock().ok().and_then(|mut slot| slot.take());
        }
        failure.into()
    }

    async fn finish(
        &self,
        model: &Model,
        decode: Option<Decode>,
        out: AssistantMessageBuilder,
        result: Result<(), Stop>,
        secrets: &Secrets,
    ) {
        let Decode { reason, diagnostic } = decode.unwrap_or_default();
        match result {
            Ok(()) => out.done(reason.unwrap_or(StopReason::Stop)).await,
            Err(stop) if stop.aborted => out.aborted(http::bound_error_message(stop.message)).await,
            Err(stop) => {
                // The reference reports a failed request or a broken stream with a new
                // message: no content, zero usage, only the error (and its diagnostic).
                let mut fresh = adapter_support::builder(out.into_sender(), model, &model.api);
                if let Some(mut diagnostic) = diagnostic {
                    secrets.clean_diagnostic(&mut diagnostic);
                    fresh.metadata_mut().diagnostics = Some(vec![diagnostic]);
                }
                fresh.error(http::bound_error_message(stop.message)).await;
            }
        }
    }
}

impl Decoder for Decode {
    type Framing = Sse;

    async fn event<'e>(&mut self, sse: SseEventRef<'e>, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        Sse: 'e,
    {
        let Some(data) = event_data(&sse.data) else { return Ok(Flow::Continue) };
        let event = js_json::parse(data).map_err(Stop::error)?;
        adapter_support::on_event(cx.options, cx.model, &event).await;
        let protocol = Protocol::PiMessages;
        let Some(event) = protocol.decode(event, cx.out.message().content.len()).map_err(Stop::error)? else {
            return Ok(Flow::Continue);
        };
        self.reason = protocol.rebuild(cx.out, event).await.map_err(Stop::error)?;
        Ok(if self.reason.is_some() { Flow::End } else { Flow::Continue })
    }

    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        match self.reason {
            Some(_) => Ok(()),
            None => Err(Stop::error(format!("{} stream ended without a terminal event", cx.model.provider))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP errors
// ---------------------------------------------------------------------------------------------

/// Error shaping for non-2xx answers; keeps the diagnostic of the failed attempt.
pub(crate) struct PiDialect {
    model: Model,
    url: String,
    failure: Mutex<Option<AssistantMessageDiagnostic>>,
}

impl Dialect for PiDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let body = String::from_utf8_lossy(body);
        let (message, diagnostic) = status_failure(&self.model, &self.url, status, &body);
        if let Ok(mut slot) = self.failure.lock() {
            *slot = Some(diagnostic);
        }
        ApiError {
            kind: ApiErrorKind::Status,
            status: Some(status),
            headers: Some(headers.clone()),
            message,
            body: None,
        }
    }

    fn format(&self, error: &ApiError) -> String {
        error.message.clone()
    }
}

/// The error text and diagnostic of a non-2xx answer.
fn status_failure(model: &Model, url: &str, status: u16, body: &str) -> (String, AssistantMessageDiagnostic) {
    let status_text = reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
    // `{"error": {...}}` with an object `error`, else the body as text.
    let error = js_json::parse(body).ok().and_then(|parsed| parsed.get("error").filter(|e| e.is_object()).cloned());
    let field = |name: &str| error.as_ref().and_then(|e| e.get(name)).and_then(Value::as_str).map(str::to_owned);
    let code = field("code");
    let suffix = field("message").unwrap_or_else(|| body.to_owned());
    let code_suffix = code.as_deref().filter(|c| !c.is_empty()).map(|c| format!(" ({c})")).unwrap_or_default();
    let message = format!("{status} {status_text}: {suffix}{code_suffix}");

    let mut details = JsonObject::new();
    details.insert("version".into(), Value::from(1));
    details.insert("provider".into(), Value::from(model.provider.as_str()));
    details.insert("model".into(), Value::from(model.id.as_str()));
    details.insert("url".into(), Value::from(url));
    details.insert("status".into(), Value::from(status));
    details.insert("statusText".into(), Value::from(status_text));
    match error {
        Some(error) => {
            details.insert("error".into(), error);
        }
        None => {
            details.insert("body".into(), Value::from(truncate_units(body, MAX_DIAGNOSTIC_BODY_UNITS)));
        }
    }
    let now = pi_types::now_ms();
    details.insert("timestampMs".into(), Value::from(now));
    let diagnostic = AssistantMessageDiagnostic {
        kind: "pi_messages_response_failure".into(),
        timestamp: now,
        error: Some(DiagnosticErrorInfo {
            name: Some("PiMessagesResponseError".into()),
            message: http::bound_error_message(message.clone()),
            stack: None,
            code: code.map(DiagnosticCode::Text),
        }),
        details: Some(details),
    };
    (message, diagnostic)
}

/// The first `max` UTF-16 units of `text` and `…` when it is longer.
fn truncate_units(text: &str, max: usize) -> String {
    if text.len() <= max || http::utf16_len(text) <= max {
        return text.to_owned();
    }
    format!("{}\u{2026}", http::utf16_prefix(text, max))
}

/// The data of an event, trimmed; `None` for none or `[DONE]`.
fn event_data(data: &str) -> Option<&str> {
    let data = js_json::js_trim(data);
    (!data.is_empty() && data != "[DONE]").then_some(data)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::transport::sse::SseDecoder;

    fn data_of(chunks: &[&[u8]]) -> Vec<Option<String>> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.push(chunk, &mut out);
        }
        decoder.finish(&mut out);
        out.iter().map(|event| event_data(&event.data).map(str::to_owned)).collect()
    }

    #[test]
    fn events_split_anywhere_read_the_same() {
        let body = "data: {\"a\":\"\u{e9}\"}\r\n\r\nevent: x\ndata: [DONE]\n\ndata: {\"b\":\rdata: 1}\r\n";
        let whole = data_of(&[body.as_bytes()]);
        assert_eq!(whole, [Some("{\"a\":\"\u{e9}\"}".to_owned()), None, Some("{\"b\":\n1}".to_owned())]);
        let bytes = body.as_bytes();
        for split in 1..bytes.len() {
            assert_eq!(data_of(&[&bytes[..split], &bytes[split..]]), whole, "split at {split}");
        }
        let single: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(data_of(&single), whole);
        // Comments and blank data are no events.
        assert_eq!(data_of(&[b": comment\n\ndata:  \n\n"]), [None]);
    }

    #[test]
    fn status_errors_read_like_the_reference() {
        let model = Model::new("balanced").with_api(API).with_provider("radius");
        let (message, diagnostic) = status_failure(
            &model,
            "http://x/v1/messages",
            429,
            r#"{"error":{"message":"slow down","code":"rate_limited"}}"#,
        );
        assert_eq!(message, "429 Too Many Requests: slow down (rate_limited)");
        let details = diagnostic.details.unwrap();
        assert_eq!(details["statusText"], "Too Many Requests");
        assert_eq!(details["error"]["code"], "rate_limited");
        assert!(details.get("body").is_none());
        let (message, diagnostic) = status_failure(&model, "u", 500, "boom");
        assert_eq!(message, "500 Internal Server Error: boom");
        assert_eq!(diagnostic.details.unwrap()["body"], "boom");
        let long = "x".repeat(9000);
        let (_, diagnostic) = status_failure(&model, "u", 502, &long);
        let body = diagnostic.details.unwrap()["body"].as_str().unwrap().to_owned();
        assert_eq!(body.chars().count(), 8193);
        assert!(body.ends_with('\u{2026}'));
    }

    #[test]
    fn announced_tool_call_starts_round_trip() {
        let partial = serde_json::json!({"role": "assistant", "content": [], "api": API, "provider": "p", "model": "m",
            "usage": pi_types::Usage::default(), "stopReason": "pending", "timestamp": 0});
        for event in [
            serde_json::json!({"type": "toolcall_start", "contentIndex": 0, "id": "c1", "toolName": "f", "partial": partial}),
            serde_json::json!({"type": "toolcall_start", "contentIndex": 0, "partial": partial}),
        ] {
            let parsed: pi_types::AssistantMessageEvent = serde_json::from_value(event.clone()).unwrap();
            assert_eq!(serde_json::to_value(&parsed).unwrap(), event);
        }
    }

    #[test]
    fn the_key_stays_out_of_the_body() {
        let options = StreamOptions {
            api_key: Some("sk-secret-key".into()),
            temperature: Some(0.5),
            max_tokens: Some(100),
            session_id: Some("s".into()),
            ..Default::default()
        };
        let body = build_request_body(
            &Model::new("m").with_api(API).with_provider("p"),
            &TranscriptContext::default(),
            &options,
        );
        assert_eq!(
            body,
            serde_json::json!({"model": "m", "context": {"messages": []},
                "options": {"temperature": 0.5, "maxTokens": 100, "sessionId": "s"}})
        );
        assert!(!js_json::stringify(&body).contains("sk-secret-key"));
    }
}
