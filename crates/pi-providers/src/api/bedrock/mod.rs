//! Amazon Bedrock's Converse stream API (`bedrock-converse-stream`).
//!
//! # Protocol
//!
//! `POST {endpoint}/model/{modelId}/converse-stream` with a JSON Converse request (`messages`,
//! `system`, `inferenceConfig`, `toolConfig`, `additionalModelRequestFields`; see
//! [`build_request_body`]). The request is authenticated with a bearer token (Bedrock API
//! keys) or signed with AWS Signature Version 4 for the signing name `bedrock` (the
//! `aws-sigv4` crate). The answer is an AWS event stream (`application/vnd.amazon.eventstream`):
//! binary messages of a prelude (total length, headers length, prelude CRC32), typed headers,
//! a payload and a message CRC32, decoded with `aws-smithy-eventstream`. Messages whose
//! `:message-type` is `event` carry one JSON event named by `:event-type` (`messageStart`,
//! `contentBlockStart`, `contentBlockDelta`, `contentBlockStop`, `messageStop`, `metadata`);
//! `exception` messages name a modeled error in `:exception-type` (e.g.
//! `throttlingException`) and end the stream; `error` messages carry `:error-code` and
//! `:error-message`.
//!
//! Text and reasoning blocks have no start event: their first delta opens them. Tool-use
//! blocks start with `contentBlockStart` and stream their input as JSON text fragments. Usage
//! arrives last, in `metadata`.
//!
//! The stream goes through the shared driver ([`crate::api::driver`]) like every HTTP API: the
//! AWS event stream is its framing (`EventStream`: frames checked by
//! `aws-smithy-eventstream`, read raw, capped at [`MAX_MESSAGE_BYTES`]).
//!
//! Credentials, region and endpoint follow the reference's rules (bearer token, access keys,
//! profiles, web identity, ECS container credentials; see `bedrock/auth.rs` and
//! `docs/providers/bedrock-converse-stream.md`). Settings are read from `StreamOptions::env`
//! first, then the process environment.

mod auth;
mod options;
mod request;

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::BytesMut;
use pi_types::{
    AssistantContent, AssistantMessageBuilder, AssistantMessageDiagnostic, AssistantMessageEventStream, JsonObject,
    Model, StopReason, StreamFn, StreamOptions, TextContent, ThinkingContent, ToolCall, TranscriptContext,
};
use reqwest::header::HeaderMap;
use serde_json::{json, Value};

use aws_smithy_types::event_stream::Message;

use crate::api::driver::{
    self, Call, Cancel, Cx, Decoder, Exchange, Flow, Framing, OnCancel, ReadMode, Secrets, WireApi,
};
use crate::api::strict_tool_limits;
use crate::api::support::{self as adapter_support, Stop};
use crate::js_json;
use crate::transport::http::{self, ApiError, ApiErrorKind, Dialect};

pub use options::{BedrockOptions, BedrockThinkingDisplay, BedrockToolChoice};
pub use request::build_request_body;

/// The API id.
pub const API: &str = "bedrock-converse-stream";

/// Largest event-stream message accepted, in bytes (Bedrock's are a few KB).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

const REDACTED_THINKING: &str = "[Reasoning redacted]";
const DATA_RETENTION_DOCS: &str = "https://docs.aws.amazon.com/bedrock/latest/userguide/data-retention.html";
/// Longest request id or error code kept in a diagnostic.
const MAX_DIAGNOSTIC_CHARS: usize = 200;

/// The Bedrock Converse stream adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct BedrockConverseStream;

/// Stream with the API's own options, as the reference's `stream()`: thinking is what
/// `api.reasoning` (else `options.reasoning`) and the budgets say, with no output-cap
/// adjustment, and `maxTokens` is `options.max_tokens` (Claude: else the model's limit).
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: BedrockOptions,
) -> AssistantMessageEventStream {
    crate::api::own_options::stream_own(&BedrockConverseStream, model, context, options, api)
}

impl StreamFn for BedrockConverseStream {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(Wire, model, context, options)
    }
}

/// What the stream knows besides the message: open blocks, what a diagnostic reports, and
/// what a resend of its request is built from.
#[derive(Default)]
pub(crate) struct State {
    /// Open blocks by the stream's `contentBlockIndex` (its JSON text).
    open: HashMap<String, Open>,
    /// Request id of the response (`x-amzn-requestid`).
    request_id: Option<String>,
    /// Details of the failure (`status`, `errorCode`, `requestId`).
    failure: JsonObject,
    /// What a resend is built from (set by `prepare`).
    sending: Option<Box<Sending>>,
}

/// What the requests of one stream are built from: the first and a resend.
struct Sending {
    /// Tools that prefer strict sampling go non-strict (`strict_tool_limits`).
    relaxed: bool,
    /// Some current tool that prefers strict sampling is sent strict.
    preferred_strict: bool,
    context: TranscriptContext,
    target: auth::Target,
    auth: auth::Auth,
}

struct Open {
    content_index: usize,
    /// Encrypted reasoning received so far (decoded base64).
    redacted: Option<Vec<u8>>,
}

/// Trimmed, non-empty and at most [`MAX_DIAGNOSTIC_CHARS`] long.
fn diagnostic_value(value: &str) -> Option<String> {
    let trimmed = value.trim();
    (!trimmed.is_empty() && http::utf16_len(trimmed) <= MAX_DIAGNOSTIC_CHARS).then(|| trimmed.to_owned())
}

fn request_id_of(headers: &HeaderMap) -> Option<String> {
    ["x-amzn-requestid", "x-amzn-request-id", "x-amz-request-id"]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()))
        .and_then(diagnostic_value)
}

/// A modeled error's code goes into diagnostics (transport errors have none).
fn error_code(name: &str) -> Option<String> {
    name.ends_with("Exception").then(|| diagnostic_value(name)).flatten()
}

/// The reference's display form: a readable prefix for the SDK's modeled errors, the
/// error's message, and a pointer to the docs for data-retention refusals.
fn format_error(name: Option<&str>, message: &str) -> String {
    let hint = if message.to_lowercase().contains("data retention mode") {
        format!(" See {DATA_RETENTION_DOCS} for supported data retention modes.")
    } else {
        String::new()
    };
    match name {
        Some(name) => {
            let prefix = match name {
                "InternalServerException" => "Internal server error",
                "ModelStreamErrorException" => "Model stream error",
                "ValidationException" => "Validation error",
                "ThrottlingException" => "Throttling error",
                "ServiceUnavailableException" => "Service unavailable",
                other => other,
            };
            format!("{prefix}: {message}{hint}")
        }
        None => format!("{message}{hint}"),
    }
}

/// The AWS SDK's error code rule: `x-amzn-errortype`, then the body's `code`, then `__type`;
/// the part before `:` and after `#`.
fn sanitize_error_code(raw: &str) -> String {
    let mut value = raw.split(',').next().unwrap_or_default();
    value = value.split(':').next().unwrap_or_default();
    if let Some((_, after)) = value.split_once('#') {
        value = after.split('#').next().unwrap_or_default();
    }
    value.to_owned()
}

/// JSON text of a value as the SDK would read it as a string (`code` may be a number).
fn code_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The error of a non-2xx answer and what its diagnostic reports.
pub(crate) struct BedrockDialect {
    failure: Mutex<JsonObject>,
    /// The modeled error of the last status error: its name and its own message.
    rejection: Mutex<Option<(String, String)>>,
}

impl BedrockDialect {
    fn record(&self, details: JsonObject) {
        if let Ok(mut failure) = self.failure.lock() {
            *failure = details;
        }
    }
}

impl Dialect for BedrockDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let mut details = JsonObject::new();
        details.insert("status".into(), json!(status));
        let request_id = request_id_of(headers);
        let text = String::from_utf8_lossy(body);
        let parsed = if js_json::js_trim(&text).is_empty() {
            Ok(Value::Object(JsonObject::new()))
        } else {
            js_json::parse(&text)
        };
        let message = match parsed {
            Ok(data) => {
                let header_code =
                    headers.get("x-amzn-errortype").and_then(|v| v.to_str().ok()).map(sanitize_error_code);
                let object = data.as_object();
                let body_code = object.and_then(|o| {
                    o.iter().find(|(k, _)| k.eq_ignore_ascii_case("code")).and_then(|(_, v)| code_text(v))
                });
                let type_code = object.and_then(|o| o.get("__type")).and_then(code_text);
                let code = header_code
                    .or_else(|| body_code.map(|c| sanitize_error_code(&c)))
                    .or_else(|| type_code.map(|c| sanitize_error_code(&c)))
                    .unwrap_or_else(|| "Unknown".to_owned());
                let name = match code.split_once('#') {
                    Some((_, after)) => after.to_owned(),
                    None => code,
                };
                let message = object
                    .and_then(|o| o.get("message").filter(|v| !v.is_null()).or_else(|| o.get("Message")))
                    .filter(|v| !v.is_null())
                    .map_or_else(
                        || "UnknownError".to_owned(),
                        |v| v.as_str().map_or_else(|| js_json::stringify(v), str::to_owned),
                    );
                if let Some(code) = error_code(&name) {
                    details.insert("errorCode".into(), json!(code));
                }
                let formatted = format_error(Some(&name), &message);
                if let Ok(mut rejection) = self.rejection.lock() {
                    *rejection = Some((name, message));
                }
                formatted
            }
            // Not JSON (a gateway's HTML page): the status and the body itself.
            Err(_) => match http::normalize_body(&text) {
                Some(body) => format!("{status}: {body}"),
                None => format!("{status} status code (no body)"),
            },
        };
        if let Some(id) = request_id {
            details.insert("requestId".into(), json!(id));
        }
        self.record(details);
        ApiError {
            kind: ApiErrorKind::Status,
            status: Some(status),
            headers: Some(headers.clone()),
            message,
            body: None,
        }
    }

    fn format(&self, error: &ApiError) -> String {
        if error.kind != ApiErrorKind::Status {
            self.record(JsonObject::new());
        }
        format_error(None, &error.message)
    }
}

/// Headers a caller may not set: SigV4 signs them or they carry the authentication.
fn is_reserved_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.starts_with("x-amz-") || lower == "authorization" || lower == "host"
}

/// The wire API behind [`BedrockConverseStream`] (crate-private: its decoding types stay private).
struct Wire;

impl WireApi for Wire {
    type Dialect = BedrockDialect;
    type Decoder = State;
    const CANCEL: Cancel = Cancel {
        read: OnCancel::Fail("Request was aborted"),
        before_event: Some(OnCancel::Fail("Request was aborted")),
        after_event: None,
    };
    const API_ID: Option<&'static str> = Some(API);

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, .. } = call;
        let relaxed = strict_tool_limits::has_exceeded_strict_tool_limits(options.session_id.as_deref());
        let preferred_strict = prefers_sent_strict(model, &context);
        let params = if relaxed {
            build_request_body(model, &strict_tool_limits::without_preferred_strict(&context), options)
        } else {
            build_request_body(model, &context, options)
        }
        .map_err(Stop::error)?;
        let target = auth::target(model, options).await;
        let auth = auth::resolve(model, options, &target.region).await.map_err(Stop::error)?;
        let sending = Sending { relaxed, preferred_strict, context, target, auth };
        let request = sending.request(model, options, params).await?;
        let dialect = BedrockDialect { failure: Mutex::new(JsonObject::new()), rejection: Mutex::new(None) };
        let state = State { sending: Some(Box::new(sending)), ..State::default() };
        let mut exchange = Exchange::new(request, dialect, state);
        // `messageStart` starts the message.
        exchange.start = false;
        Ok(exchange)
    }

    /// Bedrock checks the tool schemas before it streams: a strict-limit rejection is resent
    /// once with the preferring tools non-strict (`strict_tool_limits`).
    async fn resend(
        &self,
        state: &mut State,
        dialect: &BedrockDialect,
        _failure: &http::Failure,
        cx: &mut Cx<'_>,
    ) -> Result<Option<http::Request>, Stop> {
        let Some(sending) = state.sending.as_deref_mut().filter(|s| !s.relaxed && s.preferred_strict) else {
            return Ok(None);
        };
        let rejection = dialect.rejection.lock().ok().and_then(|mut r| r.take()).filter(|(name, message)| {
            name == "ValidationException" && strict_tool_limits::is_strict_tool_limit_error_message(message)
        });
        let Some((_, message)) = rejection else { return Ok(None) };
        sending.relaxed = true;
        strict_tool_limits::mark_strict_tool_limits_exceeded(cx.options.session_id.as_deref());
        let diagnostic = strict_tool_limits::fallback_diagnostic("bedrock_strict_tools_fallback", &message);
        cx.out.metadata_mut().diagnostics.get_or_insert_with(Vec::new).push(diagnostic);
        let relaxed = strict_tool_limits::without_preferred_strict(&sending.context);
        let params = build_request_body(cx.model, &relaxed, cx.options).map_err(Stop::error)?;
        sending.request(cx.model, cx.options, params).await.map(Some)
    }

    fn refused(&self, state: &mut State, dialect: &BedrockDialect, failure: http::Failure) -> Stop {
        state.failure = dialect.failure.lock().map(|f| f.clone()).unwrap_or_default();
        failure.into()
    }

    fn accept(&self, state: &mut State, response: &reqwest::Response) -> Result<(), Stop> {
        state.request_id = request_id_of(response.headers());
        Ok(())
    }

    async fn finish(
        &self,
        _model: &Model,
        state: Option<State>,
        out: AssistantMessageBuilder,
        result: Result<(), Stop>,
        _secrets: &Secrets,
    ) {
        finish(out, state.unwrap_or_default(), result).await;
    }
}

impl Sending {
    /// The request of `params` as it goes out now (`on_payload` sees each one), signed.
    async fn request(&self, model: &Model, options: &StreamOptions, params: Value) -> Result<http::Request, Stop> {
        let payload = adapter_support::apply_on_payload(options, model, params).await;
        let body = js_json::stringify(&payload).into_bytes();
        signed_request(model, options, &self.target, &self.auth, body)
    }
}

impl Decoder for State {
    type Framing = EventStream;

    async fn event<'e>(&mut self, message: Message, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        EventStream: 'e,
    {
        let Some((kind, event)) = unmarshal(&message).map_err(|failure| {
            if let Some(code) = failure.code.as_deref().and_then(error_code) {
                self.failure.insert("errorCode".into(), json!(code));
            }
            Stop::error(failure.message)
        })?
        else {
            return Ok(Flow::Continue);
        };
        adapter_support::on_event(cx.options, cx.model, &json!({ kind.as_str(): event })).await;
        handle(cx.model, &kind, &event, cx.out, self).await?;
        Ok(Flow::Continue)
    }

    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        driver::tail(cx, "Bedrock stream ended without a stop reason")
    }
}

/// The AWS event stream (`application/vnd.amazon.eventstream`): binary messages, each with
/// its length, headers and CRC32s; a message over [`MAX_MESSAGE_BYTES`] is refused before it
/// is buffered.
#[derive(Default)]
pub(crate) struct EventStream {
    pending: BytesMut,
    ended: bool,
}

impl Framing for EventStream {
    type Event<'a> = Message;
    const READ: ReadMode = ReadMode::Raw;

    fn push(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        self.pending.extend_from_slice(bytes);
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Stop> {
        self.ended = true;
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Message>, Stop> {
        match next_message(&mut self.pending).map_err(Stop::error)? {
            Some(message) => Ok(Some(message)),
            None if self.ended && self.pending.len() >= 4 => Err(Stop::error("Truncated event message received.")),
            None => Ok(None),
        }
    }
}

/// The request, its headers signed (SigV4) or carrying the bearer token.
fn signed_request(
    model: &Model,
    options: &StreamOptions,
    target: &auth::Target,
    auth: &auth::Auth,
    body: Vec<u8>,
) -> Result<http::Request, Stop> {
    let custom: Vec<(String, Option<String>)> = adapter_support::model_headers(model)
        .into_iter()
        .chain(adapter_support::option_headers(options))
        .filter(|(name, _)| !is_reserved_header(name))
        .collect();
    let mut headers = adapter_support::merge_headers(&[
        adapter_support::identity_headers(model, options),
        vec![("content-type".to_owned(), Some("application/json".to_owned()))],
        custom,
    ]);
    match auth {
        auth::Auth::Bearer(token) => headers.push(("authorization".to_owned(), format!("Bearer {token}"))),
        auth::Auth::SigV4(credentials) => {
            // `user-agent` is not signed (proxies rewrite it); everything else we send is.
            let signed: Vec<(String, String)> =
                headers.iter().filter(|(k, _)| !k.eq_ignore_ascii_case("user-agent")).cloned().collect();
            let signature = auth::sigv4_headers(
                credentials,
                &target.region,
                &target.url,
                &signed,
                &body,
                std::time::SystemTime::now(),
            )
            .map_err(Stop::error)?;
            headers.extend(signature);
        }
    }
    Ok(http::Request { url: target.url.clone(), headers, body })
}

/// Whether some current tool that prefers strict sampling is sent strict.
fn prefers_sent_strict(model: &Model, context: &TranscriptContext) -> bool {
    let supports_strict =
        model.compat.as_ref().and_then(|c| c.get("supportsStrictMode")).and_then(Value::as_bool).unwrap_or(false);
    pi_types::transcript::current_tool_declarations(context.messages()).into_iter().any(|tool| {
        strict_tool_limits::prefers_strict(tool)
            && adapter_support::resolve_strict(tool, supports_strict, None) == Ok(Some(true))
    })
}

/// The next whole message of the buffer, if it holds one; its frame is checked (lengths,
/// CRC32s, headers) by `aws-smithy-eventstream`.
fn next_message(pending: &mut BytesMut) -> Result<Option<Message>, String> {
    let Some(prefix) = pending.get(..4) else { return Ok(None) };
    let total = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if total < 16 {
        return Err("Provided message too short to accommodate event stream message overhead".to_owned());
    }
    if total > MAX_MESSAGE_BYTES {
        return Err(format!("Event stream message of {total} bytes exceeds the limit of {MAX_MESSAGE_BYTES} bytes"));
    }
    if pending.len() < total {
        return Ok(None);
    }
    let frame = pending.split_to(total).freeze();
    aws_smithy_eventstream::frame::read_message_from(frame).map(Some).map_err(|e| e.to_string())
}

/// A message that ends the stream: its text and, for modeled errors, the error code.
struct StreamFailure {
    message: String,
    code: Option<String>,
}

fn header_text(message: &Message, name: &str) -> Option<String> {
    message.headers().iter().find(|h| h.name().as_str() == name).map(|h| match h.value().as_string() {
        Ok(text) => text.as_str().to_owned(),
        Err(value) => format!("{value:?}"),
    })
}

const EVENTS: [&str; 6] =
    ["messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"];
const EXCEPTIONS: [&str; 5] = [
    "internalServerException",
    "modelStreamErrorException",
    "validationException",
    "throttlingException",
    "serviceUnavailableException",
];

/// An event (its name and JSON payload), nothing for events this API does not model, or the
/// failure an `exception` / `error` message reports.
fn unmarshal(message: &Message) -> Result<Option<(String, Value)>, StreamFailure> {
    let payload = String::from_utf8_lossy(message.payload());
    let plain = |text: String| StreamFailure { message: text, code: None };
    match header_text(message, ":message-type").as_deref() {
        Some("event") => {
            let Some(kind) = header_text(message, ":event-type").filter(|k| EVENTS.contains(&k.as_str())) else {
                return Ok(None);
            };
            let value = js_json::parse(&payload).map_err(plain)?;
            Ok(Some((kind, value)))
        }
        Some("exception") => {
            let code = header_text(message, ":exception-type").unwrap_or_default();
            if !EXCEPTIONS.contains(&code.as_str()) {
                return Err(StreamFailure { message: format_error(None, &payload), code: Some(code) });
            }
            let mut name = code.clone();
            if let Some(first) = name.get_mut(..1) {
                first.make_ascii_uppercase();
            }
            let data = js_json::parse(&payload).map_err(plain)?;
            let text = data
                .get("message")
                .or_else(|| data.get("Message"))
                .and_then(Value::as_str)
                .unwrap_or("UnknownError")
                .to_owned();
            Err(StreamFailure { message: format_error(Some(&name), &text), code: Some(name) })
        }
        Some("error") => {
            let text = header_text(message, ":error-message").filter(|m| !m.is_empty());
            Err(StreamFailure {
                message: format_error(None, text.as_deref().unwrap_or("UnknownError")),
                code: header_text(message, ":error-code"),
            })
        }
        _ => Err(plain(format!(
            "Unrecognizable event type: {}",
            header_text(message, ":event-type").unwrap_or_else(|| "undefined".to_owned())
        ))),
    }
}

fn block_key(event: &Value) -> String {
    event.get("contentBlockIndex").map_or_else(|| "undefined".to_owned(), js_json::stringify)
}

fn count(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_f64).filter(|f| *f > 0.0).map_or(0, |f| f as u64)
}

fn map_stop_reason(reason: Option<&str>) -> (StopReason, Option<String>) {
    match reason {
        Some("end_turn" | "stop_sequence") => (StopReason::Stop, None),
        Some("max_tokens" | "model_context_window_exceeded") => (StopReason::Length, None),
        Some("tool_use") => (StopReason::ToolUse, None),
        Some(other) if !other.is_empty() => (StopReason::Error, Some(format!("Provider stopped with: {other}"))),
        _ => (StopReason::Error, None),
    }
}

async fn handle(
    model: &Model,
    kind: &str,
    event: &Value,
    out: &mut AssistantMessageBuilder,
    state: &mut State,
) -> Result<(), Stop> {
    match kind {
        "messageStart" => {
            if event.get("role").and_then(Value::as_str) != Some("assistant") {
                return Err(Stop::error("Unexpected assistant message start but got user message start instead"));
            }
            out.start().await;
        }
        "contentBlockStart" => {
            if let Some(tool) = event.get("start").and_then(|s| s.get("toolUse")).filter(|t| !t.is_null()) {
                let text = |key: &str| tool.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                let call = ToolCall { id: text("toolUseId").into(), name: text("name").into(), ..Default::default() };
                let content_index = out.start_block(AssistantContent::ToolCall(call)).await;
                state.open.insert(block_key(event), Open { content_index, redacted: None });
            }
        }
        "contentBlockDelta" => delta(event, out, state).await,
        "contentBlockStop" => {
            let Some(mut open) = state.open.remove(&block_key(event)) else { return Ok(()) };
            flush_redacted(&mut open, out);
            out.end_block(open.content_index).await?;
        }
        "messageStop" => {
            let reason = event.get("stopReason").and_then(Value::as_str);
            let (stop, error) = map_stop_reason(reason);
            let mut m = out.metadata_mut();
            m.raw_stop_reason = reason.map(Into::into);
            m.stop_reason = stop;
            if let Some(error) = error {
                m.error_message = Some(error.into());
            }
        }
        "metadata" => {
            if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
                let mut m = out.metadata_mut();
                m.usage.input = count(usage.get("inputTokens"));
                m.usage.output = count(usage.get("outputTokens"));
                m.usage.cache_read = count(usage.get("cacheReadInputTokens"));
                m.usage.cache_write = count(usage.get("cacheWriteInputTokens"));
                m.usage.cache_write_1h = usage.get("cacheDetails").and_then(Value::as_array).map(|details| {
                    details
                        .iter()
                        .filter(|d| d.get("ttl").and_then(Value::as_str) == Some("1h"))
                        .map(|d| count(d.get("inputTokens")))
                        .fold(0u64, u64::saturating_add)
                });
                let total = count(usage.get("totalTokens"));
                m.usage.total_tokens = if total > 0 { total } else { m.usage.input.saturating_add(m.usage.output) };
                crate::cost::calculate_cost(model, &mut m.usage);
            }
        }
        _ => {}
    }
    Ok(())
}

async fn delta(event: &Value, out: &mut AssistantMessageBuilder, state: &mut State) {
    let key = block_key(event);
    let Some(delta) = event.get("delta").filter(|d| d.is_object()) else { return };
    if let Some(text) = delta.get("text").filter(|t| !t.is_null()) {
        let text = text.as_str().map_or_else(|| js_json::stringify(text), str::to_owned);
        let content_index = match state.open.get(&key) {
            Some(open) => open.content_index,
            None => {
                let index = out.start_block(AssistantContent::Text(TextContent::default())).await;
                state.open.insert(key, Open { content_index: index, redacted: None });
                index
            }
        };
        // A text delta for a block of another kind is ignored (the builder refuses it).
        let _ = out.text_delta(content_index, text).await;
        return;
    }
    let open_index = state.open.get(&key).map(|o| o.content_index);
    let is_tool =
        open_index.is_some_and(|i| matches!(out.message().content.get(i), Some(AssistantContent::ToolCall(_))));
    if let (Some(tool), true, Some(index)) = (delta.get("toolUse").filter(|t| !t.is_null()), is_tool, open_index) {
        let input = tool.get("input").and_then(Value::as_str).unwrap_or("");
        let _ = out.tool_call_delta(index, input).await;
        return;
    }
    let Some(reasoning) = delta.get("reasoningContent").filter(|r| !r.is_null()) else { return };
    let index = match open_index {
        Some(index) => index,
        None => {
            let thinking =
                ThinkingContent { thinking: String::new(), thinking_signature: Some(String::new()), redacted: None };
            let index = out.start_block(AssistantContent::Thinking(thinking)).await;
            state.open.insert(key.clone(), Open { content_index: index, redacted: None });
            index
        }
    };
    if !matches!(out.message().content.get(index), Some(AssistantContent::Thinking(_))) {
        return;
    }
    if let Some(text) = reasoning.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        let _ = out.thinking_delta(index, text).await;
    }
    if let Some(signature) = reasoning.get("signature").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        if let Ok(block) = out.thinking_mut(index) {
            if block.redacted != Some(true) {
                block.thinking_signature.get_or_insert_with(String::new).push_str(signature);
            }
        }
    }
    let redacted = reasoning
        .get("redactedContent")
        .and_then(Value::as_str)
        .and_then(|data| aws_smithy_types::base64::decode(data).ok())
        .filter(|bytes| !bytes.is_empty());
    if let Some(bytes) = redacted {
        let first = out.thinking_mut(index).map(|block| block.redacted != Some(true)).unwrap_or(false);
        if first {
            if let Ok(block) = out.thinking_mut(index) {
                block.redacted = Some(true);
                block.thinking_signature = Some(String::new());
            }
            let _ = out.thinking_delta(index, REDACTED_THINKING).await;
        }
        if let Some(open) = state.open.get_mut(&key) {
            open.redacted.get_or_insert_with(Vec::new).extend_from_slice(&bytes);
        }
    }
}

/// Store a block's encrypted reasoning, base64, as its signature.
fn flush_redacted(open: &mut Open, out: &mut AssistantMessageBuilder) {
    let Some(bytes) = open.redacted.take() else { return };
    if let Ok(block) = out.thinking_mut(open.content_index) {
        block.thinking_signature = Some(aws_smithy_types::base64::encode(&bytes));
    }
}

/// End the response: `done`, or `error` / `aborted` with the content so far and, for a
/// failure, a `bedrock_response_failure` diagnostic (status, error code, request id).
async fn finish(mut out: AssistantMessageBuilder, mut state: State, result: Result<(), Stop>) {
    for (_, mut open) in std::mem::take(&mut state.open) {
        flush_redacted(&mut open, &mut out);
    }
    let stop = match result {
        Ok(()) => return adapter_support::finish(out, Ok(())).await,
        Err(stop) => stop,
    };
    if !stop.aborted {
        let mut details = std::mem::take(&mut state.failure);
        if !details.contains_key("requestId") {
            if let Some(id) = state.request_id.take() {
                details.insert("requestId".into(), json!(id));
            }
        }
        if !details.is_empty() {
            let diagnostic = AssistantMessageDiagnostic {
                kind: "bedrock_response_failure".into(),
                timestamp: pi_types::now_ms(),
                error: None,
                details: Some(details),
            };
            out.metadata_mut().diagnostics.get_or_insert_with(Vec::new).push(diagnostic);
        }
    }
    adapter_support::finish(out, Err(stop)).await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_sanitized_like_the_sdk() {
        assert_eq!(
            sanitize_error_code("ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            "ValidationException"
        );
        assert_eq!(sanitize_error_code("com.amazon#ThrottlingException"), "ThrottlingException");
        assert_eq!(sanitize_error_code("A,B"), "A");
    }

    #[test]
    fn errors_get_readable_prefixes() {
        assert_eq!(format_error(Some("ThrottlingException"), "slow down"), "Throttling error: slow down");
        assert_eq!(format_error(Some("AccessDeniedException"), "no"), "AccessDeniedException: no");
        assert_eq!(
            format_error(None, "data retention mode 'default' is not available"),
            format!("data retention mode 'default' is not available See {DATA_RETENTION_DOCS} for supported data retention modes.")
        );
    }

    #[test]
    fn http_errors_carry_code_message_and_diagnostics() {
        let dialect = BedrockDialect { failure: Mutex::new(JsonObject::new()), rejection: Mutex::new(None) };
        let mut headers = HeaderMap::new();
        headers.insert("x-amzn-errortype", "ValidationException:http://x/".parse().unwrap());
        headers.insert("x-amzn-requestid", " req-1 ".parse().unwrap());
        let error = dialect.status_error(400, &headers, br#"{"message":"bad model"}"#);
        assert_eq!(dialect.format(&error), "Validation error: bad model");
        let failure = dialect.failure.lock().unwrap().clone();
        assert_eq!(
            Value::Object(failure),
            json!({"status": 400, "errorCode": "ValidationException", "requestId": "req-1"})
        );

        let error = dialect.status_error(400, &HeaderMap::new(), b"");
        assert_eq!(dialect.format(&error), "Unknown: UnknownError");
        let error =
            dialect.status_error(403, &HeaderMap::new(), br#"{"__type":"x#AccessDeniedException","Message":"denied"}"#);
        assert_eq!(dialect.format(&error), "AccessDeniedException: denied");
        let error = dialect.status_error(502, &HeaderMap::new(), b"<html>bad gateway</html>");
        assert_eq!(dialect.format(&error), "502: <html>bad gateway</html>");
    }

    #[test]
    fn oversized_and_undersized_frames_are_errors() {
        let mut huge = BytesMut::from(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0][..]);
        assert!(next_message(&mut huge).unwrap_err().contains("exceeds the limit"));
        let mut tiny = BytesMut::from(&[0, 0, 0, 3, 1, 2, 3][..]);
        assert!(next_message(&mut tiny).is_err());
        let mut short = BytesMut::from(&[0, 0][..]);
        assert!(next_message(&mut short).unwrap().is_none());
    }
}
