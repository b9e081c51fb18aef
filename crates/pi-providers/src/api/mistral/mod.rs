//! Mistral (`mistral-conversations`): the native chat-completions endpoint of La Plateforme.
//!
//! # Protocol
//! * **Request**: `POST {baseUrl}/v1/chat/completions` (the base URL's path gets one trailing
//!   slash, then `v1/chat/completions` is resolved against it), `Authorization: Bearer <key>`,
//!   `Accept: text/event-stream`. The key is `options.api_key`, else `MISTRAL_API_KEY` (from
//!   `options.env`, then the process) for the `mistral` provider.
//! * **Body**: `model`, `stream: true`, `messages` (system / user / assistant / tool, content as a
//!   string or typed parts: `text`, `image_url` as a data URL, and `thinking` parts carrying
//!   earlier reasoning), `tools` (`{type: "function", function: {name, description, parameters,
//!   strict}}`), `temperature`, `max_tokens`, `tool_choice`, `reasoning_effort` (models with a
//!   thinking-level map) or `prompt_mode: "reasoning"` (other reasoning models), and
//!   `prompt_cache_key` with an `x-affinity` header when a session id allows caching. The
//!   payload is built in the Mistral SDK's camelCase shape (what `on_payload` sees) and then
//!   renamed to the wire's snake_case.
//! * **Tool-call ids**: Mistral accepts only 9-character alphanumeric ids. Calls from other
//!   models are renamed: their alphanumeric characters when exactly nine, else the first nine
//!   alphanumerics of the reference's short hash (salted `:<n>` on collision); tool results
//!   follow the rename.
//! * **Stream**: server-sent events read with the shared decoder ([`SseDecoder`](crate::transport::sse::SseDecoder)); an event's
//!   data is trimmed; `[DONE]` ends the stream. Each chunk is a completion chunk: `id`, `usage`
//!   (`prompt_tokens` minus cached tokens is the input), `choices[0].finish_reason` and
//!   `choices[0].delta`, whose `content` is a string or a list of parts (`text`, or `thinking`
//!   with a list of text parts) and whose `tool_calls` stream a call's arguments by `index`.
//! * **Errors**: a non-2xx answer is `Mistral API error (<status>): <body as sent>` (or the
//!   status text when the body is blank); a malformed chunk is the JSON parser's message; a
//!   chunk without `choices` is `Invalid Mistral streaming event`; a stream without a finish
//!   reason is `Mistral stream ended without a finish reason`; any other finish reason `r`
//!   (Mistral's transient `error` among them, which the retry classifier matches) is
//!   `Provider stopped with: <r>`.
//!
//! Differences from the reference are listed in `docs/providers/mistral-conversations.md`.

use std::cell::RefCell;
use std::collections::HashMap;

use pi_types::transcript::{current_tools, render_system_message_update, resolve_transcript, system_message_text};
use pi_types::{
    AssistantContent, AssistantMessage, AssistantMessageBuilder, AssistantMessageEventStream, InputModality, Message,
    Model, StopReason, StreamFn, StreamOptions, ThinkingLevel, Tool, ToolChoice, TranscriptContext, Usage, UserContent,
    UserMessageContent,
};
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use crate::api::driver::{self, Call, Cancel, Cx, Decoder, Exchange, Flow, OnCancel, Sse, WireApi};
use crate::api::own_options;
use crate::api::request_options;
use crate::api::support::{self as adapter_support, Stop};
use crate::api::transform::transform_messages;
use crate::js_json;
use crate::transport::http::{self, ApiError, ApiErrorKind, Dialect};
use crate::transport::sse::SseEventRef;

/// The API id.
pub const API: &str = "mistral-conversations";

mod options;
pub use options::{MistralOptions, MistralReasoningEffort, MistralToolChoice, PromptMode};

/// Stream with the API's own options, as the reference's `stream()`: nothing is derived from
/// `options.reasoning`, and `max_tokens` is sent only when `options.max_tokens` is set.
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: MistralOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&MistralConversations, model, context, options, api)
}

/// The environment variable holding the key of the `mistral` provider.
pub const API_KEY_VAR: &str = "MISTRAL_API_KEY";

/// Length of a Mistral tool-call id.
const TOOL_CALL_ID_LENGTH: usize = 9;
/// Time-to-headers limit when the caller sets none (the reference's own default).
const DEFAULT_HEADERS_TIMEOUT_MS: u64 = 60_000;
/// What an abort reads as (the `AbortSignal`'s reason).
const ABORTED: &str = "This operation was aborted";

/// The Mistral adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct MistralConversations;

impl StreamFn for MistralConversations {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(Wire, model, context, options)
    }
}

/// The request body the adapter sends for a context, or why it cannot be built (a tool that
/// requires strict sampling).
/// Public so that an application can see what its model and options put on the wire without a
/// server (this crate's own tests of the request fields use it, and cannot reach private items);
/// the body is the one sent when no `on_payload` hook changes it.
pub fn build_request_body(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
) -> Result<Value, String> {
    let context = resolve_transcript(context.clone(), supports_mid_convo_system_messages(model));
    let settings = Settings::new(model, &context, options);
    build_payload(model, &context, options, &settings).map(|payload| to_wire_payload(&payload))
}

fn supports_mid_convo_system_messages(model: &Model) -> bool {
    compat_flag(model, "supportsMidConvoSystemMessages")
}

fn compat_flag(model: &Model, key: &str) -> bool {
    model.compat.as_ref().and_then(|c| c.get(key)).is_some_and(js_json::truthy)
}

/// The request's output limit, reasoning fields and tool choice: what `streamSimple` derives
/// from the options with the [`MistralOptions`] that are set applied over it, or those options
/// alone.
struct Settings {
    max_tokens: Option<u64>,
    prompt_mode: Option<&'static str>,
    reasoning_effort: Option<String>,
    tool_choice: Option<Value>,
}

impl Settings {
    fn new(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Self {
        let api = own_options::lookup::<MistralOptions>(model, options);
        let mut settings = match api.is_own() {
            true => {
                Self { max_tokens: options.max_tokens, prompt_mode: None, reasoning_effort: None, tool_choice: None }
            }
            false => Self::simple(model, context, options),
        };
        if let Some(api) = api.get() {
            if let Some(PromptMode::Reasoning) = api.prompt_mode {
                settings.prompt_mode = Some("reasoning");
            }
            if let Some(effort) = api.reasoning_effort {
                settings.reasoning_effort = Some(effort.as_str().to_owned());
            }
        }
        settings.tool_choice = match api.field(|api| &api.tool_choice) {
            Some(choice) => Some(choice.to_wire()),
            None => options.tool_choice.map(|choice| match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
            }),
        };
        settings
    }

    fn simple(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Self {
        let max_tokens = request_options::base_max_tokens(model, context, options.max_tokens);
        let level = options
            .reasoning
            .map(|level| request_options::clamp_thinking_level(model, level))
            .filter(|level| *level != ThinkingLevel::Off);
        // Models with a thinking-level map take `reasoning_effort`; other reasoning models
        // take `prompt_mode`.
        let effort_map = model.thinking_level_map.as_ref().filter(|_| model.reasoning);
        let reasoning_effort = effort_map.and_then(|map| match level {
            Some(level) => Some(match map.get(&level) {
                Some(Some(value)) => value.clone(),
                _ => "high".to_owned(),
            }),
            None => map.get(&ThinkingLevel::Off).cloned().flatten(),
        });
        let prompt_mode = (model.reasoning && effort_map.is_none() && level.is_some()).then_some("reasoning");
        Self {
            max_tokens: Some(max_tokens),
            prompt_mode,
            reasoning_effort: reasoning_effort.filter(|e| !e.is_empty()),
            tool_choice: None,
        }
    }
}

fn uses_prompt_caching(options: &StreamOptions) -> Option<&str> {
    if options.cache_retention == Some(pi_types::CacheRetention::None) {
        return None;
    }
    options.session_id.as_deref().filter(|s| !s.is_empty())
}

fn api_key(model: &Model, options: &StreamOptions) -> Result<String, Stop> {
    if let Some(key) = options.api_key.as_deref().filter(|k| !k.is_empty()) {
        return Ok(key.to_owned());
    }
    if model.provider == "mistral" {
        if let Some(key) = options.env_var(API_KEY_VAR).filter(|k| !k.is_empty()) {
            return Ok(key);
        }
    }
    Err(Stop::error(format!("No API key for provider: {}", model.provider)))
}

/// `new URL("v1/chat/completions", base)` after giving the base path one trailing slash.
fn endpoint(base_url: &str) -> Result<String, Stop> {
    let mut base = reqwest::Url::parse(base_url).map_err(|_| Stop::error("Invalid URL"))?;
    let path = format!("{}/", base.path().trim_end_matches('/'));
    base.set_path(&path);
    base.join("v1/chat/completions").map(String::from).map_err(|_| Stop::error("Invalid URL"))
}

fn headers(model: &Model, options: &StreamOptions, key: &str) -> Vec<(String, String)> {
    let base = vec![
        ("accept".to_owned(), Some("text/event-stream".to_owned())),
        ("authorization".to_owned(), Some(format!("Bearer {key}"))),
        ("content-type".to_owned(), Some("application/json".to_owned())),
    ];
    let names_affinity = |name: &str| name.eq_ignore_ascii_case("x-affinity");
    let explicit_affinity = model.headers.iter().flatten().any(|(name, _)| names_affinity(name))
        || options.headers.iter().any(|(name, _)| names_affinity(name));
    let mut affinity = Vec::new();
    if let Some(session) = uses_prompt_caching(options).filter(|_| !explicit_affinity) {
        affinity.push(("x-affinity".to_owned(), Some(session.to_owned())));
    }
    adapter_support::merge_headers(&[
        adapter_support::identity_headers(model, options),
        base,
        adapter_support::model_headers(model),
        adapter_support::option_headers(options),
        affinity,
    ])
}

/// How the reference shapes request failures.
pub(crate) struct MistralDialect {
    timeout_ms: u64,
}

fn status_text(status: u16) -> String {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map_or_else(|| format!("Request failed with status {status}"), str::to_owned)
}

impl Dialect for MistralDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let text = String::from_utf8_lossy(body);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        // The body as sent (trimmed, at most 4000 UTF-16 units), else the status text.
        let detail = http::normalize_body(text).unwrap_or_else(|| status_text(status));
        ApiError {
            kind: ApiErrorKind::Status,
            status: Some(status),
            headers: Some(headers.clone()),
            message: format!("Mistral API error ({status}): {detail}"),
            body: None,
        }
    }

    fn format(&self, error: &ApiError) -> String {
        match error.kind {
            ApiErrorKind::Timeout => format!("Mistral response headers timed out after {}ms", self.timeout_ms),
            ApiErrorKind::Connection => {
                let cause = error.message.strip_prefix("Connection error.: ").unwrap_or(&error.message);
                format!("fetch failed: {cause}")
            }
            ApiErrorKind::Status | ApiErrorKind::Other => error.message.clone(),
        }
    }
}

/// The wire API behind [`MistralConversations`] (crate-private: its decoding types stay private).
struct Wire;

impl WireApi for Wire {
    type Dialect = MistralDialect;
    type Decoder = Chunks;
    const CANCEL: Cancel = Cancel { read: OnCancel::Fail(ABORTED), before_event: None, after_event: None };

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, .. } = call;
        let key = api_key(model, options)?;
        let context = resolve_transcript(context, supports_mid_convo_system_messages(model));
        let settings = Settings::new(model, &context, options);
        let payload = build_payload(model, &context, options, &settings).map_err(Stop::error)?;
        let payload = adapter_support::apply_on_payload(options, model, payload).await;
        let request = http::Request {
            url: endpoint(&model.base_url)?,
            headers: headers(model, options, &key),
            body: js_json::stringify(&to_wire_payload(&payload)).into_bytes(),
        };
        // The reference's own time-to-headers default. Retries follow `max_retries` as for every
        // adapter (the reference never retries Mistral; see the docs).
        let timeout_ms = options.timeout_ms.unwrap_or(DEFAULT_HEADERS_TIMEOUT_MS);
        let mut exchange = Exchange::new(request, MistralDialect { timeout_ms }, Chunks::default());
        exchange.headers_timeout_ms = Some(timeout_ms);
        Ok(exchange)
    }

    fn refused(&self, _: &mut Chunks, _: &MistralDialect, failure: http::Failure) -> Stop {
        if failure.aborted {
            Stop::aborted(ABORTED)
        } else {
            failure.into()
        }
    }

    fn accept(&self, _: &mut Chunks, response: &reqwest::Response) -> Result<(), Stop> {
        // `fetch` gives these statuses no body.
        match response.status().as_u16() {
            204 | 205 => Err(Stop::error("Mistral response has no body")),
            _ => Ok(()),
        }
    }
}

impl Decoder for Chunks {
    type Framing = Sse;

    async fn event<'e>(&mut self, event: SseEventRef<'e>, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        Sse: 'e,
    {
        match parse_event(&event.data)? {
            Parsed::Nothing => {}
            Parsed::Done => return Ok(Flow::End),
            Parsed::Chunk(chunk) => {
                adapter_support::on_event(cx.options, cx.model, &chunk).await;
                self.handle(cx.model, &chunk, cx.out).await?;
            }
        }
        Ok(Flow::Continue)
    }

    // A read, framing or chunk error ends the stream with the blocks left open.
    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        self.finish(cx.out).await?;
        driver::tail(cx, "Mistral stream ended without a finish reason")
    }
}

/// What one event holds.
enum Parsed {
    /// No data.
    Nothing,
    /// `[DONE]`.
    Done,
    /// A completion chunk.
    Chunk(Value),
}

/// An event's data, trimmed: nothing, `[DONE]` or a completion chunk.
fn parse_event(data: &str) -> Result<Parsed, Stop> {
    let data = js_json::js_trim(data);
    if data.is_empty() {
        return Ok(Parsed::Nothing);
    }
    if data == "[DONE]" {
        return Ok(Parsed::Done);
    }
    let chunk = js_json::parse(data).map_err(Stop::error)?;
    if !chunk.get("choices").is_some_and(Value::is_array) {
        return Err(Stop::error("Invalid Mistral streaming event"));
    }
    Ok(Parsed::Chunk(chunk))
}

// ---------------------------------------------------------------------------------------------
// Chunks
// ---------------------------------------------------------------------------------------------

/// The open text or thinking block.
#[derive(Clone, Copy)]
enum Open {
    Text(usize),
    Thinking(usize),
}

/// Stream state: the open text/thinking block and the tool calls by stream key.
#[derive(Default)]
pub(crate) struct Chunks {
    current: Option<Open>,
    /// Content index of each tool call, in the order they started.
    calls: Vec<usize>,
    /// Tool calls by key (the call's `index`, else its id).
    by_key: HashMap<String, usize>,
    /// Keys that are objects compare by identity in the reference: each is new.
    fresh_keys: u64,
}

/// JavaScript's `Cannot read properties of ...` for a member of a missing value.
fn missing(value: Option<&Value>, property: &str) -> Stop {
    let what = if value.is_some_and(Value::is_null) { "null" } else { "undefined" };
    Stop::error(format!("Cannot read properties of {what} (reading '{property}')"))
}

/// JavaScript's `String(value)` (as a template literal writes a value).
fn js_string(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "null".to_owned(),
        Value::Object(_) => "[object Object]".to_owned(),
        Value::Array(items) => items
            .iter()
            .map(|item| if item.is_null() { String::new() } else { js_string(item) })
            .collect::<Vec<_>>()
            .join(","),
        other => js_json::stringify(other),
    }
}

fn num(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_f64).filter(|f| *f > 0.0).map_or(0, |f| f as u64)
}

/// Cached prompt tokens under any of the field names Mistral has used, within `[0, prompt]`.
fn cached_prompt_tokens(usage: &Value, prompt: u64) -> u64 {
    let nested = |outer: &str, inner: &str| usage.get(outer).and_then(|o| o.get(inner));
    let raw = [
        nested("promptTokensDetails", "cachedTokens"),
        nested("prompt_tokens_details", "cached_tokens"),
        nested("promptTokenDetails", "cachedTokens"),
        nested("prompt_token_details", "cached_tokens"),
        usage.get("numCachedTokens"),
        usage.get("num_cached_tokens"),
    ]
    .into_iter()
    .flatten()
    .find(|v| !v.is_null());
    let cached = raw.and_then(Value::as_f64).filter(|f| f.is_finite()).unwrap_or(0.0);
    (cached.max(0.0) as u64).min(prompt)
}

fn parse_usage(raw: &Value, model: &Model) -> Usage {
    let prompt = num(raw.get("prompt_tokens"));
    let cached = cached_prompt_tokens(raw, prompt);
    let mut usage = Usage {
        input: prompt.saturating_sub(cached),
        output: num(raw.get("completion_tokens")),
        cache_read: cached,
        ..Default::default()
    };
    usage.total_tokens = match num(raw.get("total_tokens")) {
        0 => usage.token_sum(),
        total => total,
    };
    crate::cost::calculate_cost(model, &mut usage);
    usage
}

fn map_stop_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" => (StopReason::Stop, None),
        "length" | "model_length" => (StopReason::Length, None),
        "tool_calls" => (StopReason::ToolUse, None),
        other => (StopReason::Error, Some(format!("Provider stopped with: {other}"))),
    }
}

impl Chunks {
    async fn handle(&mut self, model: &Model, chunk: &Value, out: &mut AssistantMessageBuilder) -> Result<(), Stop> {
        {
            let mut m = out.metadata_mut();
            if m.response_id.as_deref().is_none_or(str::is_empty) {
                if let Some(id) = chunk.get("id").and_then(Value::as_str) {
                    m.response_id = Some(id.into());
                }
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| js_json::truthy(u)) {
            out.metadata_mut().usage = parse_usage(usage, model);
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)).filter(|c| js_json::truthy(c)) else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").filter(|r| js_json::truthy(r)) {
            let reason = js_string(reason);
            let (stop, error) = map_stop_reason(&reason);
            let mut m = out.metadata_mut();
            m.raw_stop_reason = Some(reason.into());
            m.stop_reason = stop;
            if let Some(error) = error {
                m.error_message = Some(error.into());
            }
        }
        let delta = choice.get("delta");
        let Some(delta) = delta.filter(|d| !d.is_null()) else { return Err(missing(delta, "content")) };
        match delta.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => self.text(out, text).await?,
            Some(Value::Array(items)) => {
                for item in items {
                    self.content_item(out, item).await?;
                }
            }
            Some(_) => return Err(Stop::error("contentItems is not iterable")),
        }
        match delta.get("tool_calls") {
            Some(Value::Array(calls)) => {
                for call in calls {
                    self.tool_call(out, call).await?;
                }
            }
            // A string iterates as its characters: calls without any member.
            Some(Value::String(text)) => {
                for _ in text.encode_utf16() {
                    self.tool_call(out, &Value::Bool(true)).await?;
                }
            }
            Some(value) if js_json::truthy(value) => return Err(Stop::error("toolCalls is not iterable")),
            _ => {}
        }
        Ok(())
    }

    async fn content_item(&mut self, out: &mut AssistantMessageBuilder, item: &Value) -> Result<(), Stop> {
        match item {
            Value::String(text) => self.text(out, text).await,
            Value::Null => Err(missing(Some(item), "type")),
            _ => match item.get("type").and_then(Value::as_str) {
                Some("thinking") => {
                    let parts = match item.get("thinking") {
                        None | Some(Value::Null) => &[][..],
                        Some(Value::Array(parts)) => parts.as_slice(),
                        Some(_) => return Err(Stop::error("(item.thinking ?? []).map is not a function")),
                    };
                    let mut text = String::new();
                    for part in parts {
                        if part.is_null() {
                            return Err(missing(Some(part), "text"));
                        }
                        if let Some(piece) = part.get("text").and_then(Value::as_str) {
                            text.push_str(piece);
                        }
                    }
                    self.thinking(out, &text).await
                }
                Some("text") => match item.get("text") {
                    Some(Value::String(text)) => self.text(out, text).await,
                    None | Some(Value::Null) => Ok(()),
                    Some(_) => Err(Stop::error("text.replace is not a function")),
                },
                _ => Ok(()),
            },
        }
    }

    async fn end_current(&mut self, out: &mut AssistantMessageBuilder) -> Result<(), Stop> {
        match self.current.take() {
            Some(Open::Text(index) | Open::Thinking(index)) => out.end_block(index).await.map_err(Stop::from),
            None => Ok(()),
        }
    }

    async fn text(&mut self, out: &mut AssistantMessageBuilder, text: &str) -> Result<(), Stop> {
        // Empty deltas (GLM models send them around thinking and tool calls) open no block.
        if text.is_empty() {
            return Ok(());
        }
        let index = match self.current {
            Some(Open::Text(index)) => index,
            _ => {
                self.end_current(out).await?;
                let index = out.start_text().await;
                self.current = Some(Open::Text(index));
                index
            }
        };
        out.text_delta(index, text).await.map_err(Stop::from)
    }

    async fn thinking(&mut self, out: &mut AssistantMessageBuilder, text: &str) -> Result<(), Stop> {
        if text.is_empty() {
            return Ok(());
        }
        let index = match self.current {
            Some(Open::Thinking(index)) => index,
            _ => {
                self.end_current(out).await?;
                let index = out.start_thinking().await;
                self.current = Some(Open::Thinking(index));
                index
            }
        };
        out.thinking_delta(index, text).await.map_err(Stop::from)
    }

    /// One entry of `tool_calls` (a value other than an object has no members).
    async fn tool_call(&mut self, out: &mut AssistantMessageBuilder, call: &Value) -> Result<(), Stop> {
        self.end_current(out).await?;
        if call.is_null() {
            return Err(missing(Some(call), "id"));
        }
        let stream_index = call.get("index").filter(|i| !i.is_null());
        let id = match call.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() && id != "null" => id.to_owned(),
            _ => derive_id(&format!("toolcall:{}", stream_index.map_or_else(|| "0".to_owned(), js_string)), 0),
        };
        let key = match stream_index {
            // Numbers compare by value (`1` and `1.0`, `0` and `-0` are one key).
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) => format!("n:{}", if f == 0.0 { 0.0 } else { f }),
                None => format!("n:{n}"),
            },
            Some(Value::String(s)) => format!("s:{s}"),
            Some(Value::Bool(b)) => format!("b:{b}"),
            Some(_) => {
                self.fresh_keys = self.fresh_keys.wrapping_add(1);
                format!("o:{}", self.fresh_keys)
            }
            None => format!("s:{id}"),
        };
        let function = call.get("function").filter(|f| !f.is_null());
        let index = match self.by_key.get(&key) {
            Some(index) => *index,
            None => {
                let Some(function) = function else { return Err(missing(call.get("function"), "name")) };
                let name = function.get("name").and_then(Value::as_str).unwrap_or_default();
                let index = out.start_tool_call(id, name).await;
                self.by_key.insert(key, index);
                self.calls.push(index);
                index
            }
        };
        let Some(function) = function else { return Err(missing(call.get("function"), "arguments")) };
        let arguments = match function.get("arguments") {
            Some(Value::String(text)) => text.clone(),
            Some(value) if js_json::truthy(value) => js_json::stringify(value),
            _ => "{}".to_owned(),
        };
        out.tool_call_delta(index, arguments).await.map_err(Stop::from)
    }

    /// The body ended: the open text or thinking block ends, then every tool call in order.
    async fn finish(&mut self, out: &mut AssistantMessageBuilder) -> Result<(), Stop> {
        self.end_current(out).await?;
        for index in std::mem::take(&mut self.calls) {
            out.end_tool_call(index).await?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Tool-call ids
// ---------------------------------------------------------------------------------------------

/// A Mistral id for `id`: its alphanumerics when exactly nine, else nine of the short hash.
fn derive_id(id: &str, attempt: u32) -> String {
    let normalized: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    if attempt == 0 && normalized.len() == TOOL_CALL_ID_LENGTH {
        return normalized;
    }
    let base = if normalized.is_empty() { id } else { normalized.as_str() };
    let seed = if attempt == 0 { base.to_owned() } else { format!("{base}:{attempt}") };
    adapter_support::short_hash(&seed).chars().filter(char::is_ascii_alphanumeric).take(TOOL_CALL_ID_LENGTH).collect()
}

/// Renames ids consistently within one request, never giving two ids the same name.
#[derive(Default)]
struct IdNormalizer {
    forward: HashMap<String, String>,
    taken: HashMap<String, String>,
}

impl IdNormalizer {
    fn normalize(&mut self, id: &str) -> String {
        if let Some(existing) = self.forward.get(id) {
            return existing.clone();
        }
        let mut attempt = 0u32;
        loop {
            let candidate = derive_id(id, attempt);
            let free = self.taken.get(&candidate).is_none_or(|owner| owner == id);
            // Past u32::MAX attempts (never in practice) the last candidate is taken as is.
            if free || attempt == u32::MAX {
                self.forward.insert(id.to_owned(), candidate.clone());
                self.taken.insert(candidate.clone(), id.to_owned());
                return candidate;
            }
            attempt += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Request building (the SDK's camelCase shape; `to_wire_payload` renames it)
// ---------------------------------------------------------------------------------------------

fn build_payload(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
    settings: &Settings,
) -> Result<Value, String> {
    let ids = RefCell::new(IdNormalizer::default());
    let normalize = |id: &str, _: &Model, _: &AssistantMessage| ids.borrow_mut().normalize(id);
    let transformed = transform_messages(context.messages(), model, Some(&normalize));
    let mut payload = Map::new();
    payload.insert("model".into(), json!(model.id));
    payload.insert("stream".into(), json!(true));
    payload.insert("messages".into(), Value::Array(convert_messages(&transformed, model)));
    let tools = current_tools(context.messages());
    if !tools.is_empty() {
        payload.insert("tools".into(), Value::Array(convert_tools(&tools, model)?));
    }
    if let Some(temperature) = options.temperature {
        payload.insert("temperature".into(), json!(temperature));
    }
    if let Some(max_tokens) = settings.max_tokens {
        payload.insert("maxTokens".into(), json!(max_tokens));
    }
    if let Some(choice) = &settings.tool_choice {
        payload.insert("toolChoice".into(), choice.clone());
    }
    if let Some(mode) = settings.prompt_mode {
        payload.insert("promptMode".into(), json!(mode));
    }
    if let Some(effort) = &settings.reasoning_effort {
        payload.insert("reasoningEffort".into(), json!(effort));
    }
    if let Some(session) = uses_prompt_caching(options) {
        payload.insert("promptCacheKey".into(), json!(session));
    }
    Ok(Value::Object(payload))
}

fn convert_tools(tools: &[Tool], model: &Model) -> Result<Vec<Value>, String> {
    // Strict tools are opt-in (`compat.supportsStrictMode`).
    let supports_strict = compat_flag(model, "supportsStrictMode");
    tools
        .iter()
        .map(|tool| {
            let strict = adapter_support::resolve_strict(tool, supports_strict, None)?;
            Ok(json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": adapter_support::tool_parameters(tool, strict),
                    "strict": strict.unwrap_or(false),
                },
            }))
        })
        .collect()
}

fn data_url(mime: &str, data: &str) -> String {
    format!("data:{mime};base64,{data}")
}

fn convert_messages(messages: &[Message], model: &Model) -> Vec<Value> {
    let supports_images = model.input.contains(&InputModality::Image);
    let mut result = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::System(system) => {
                let text = if index == 0 { system_message_text(system) } else { render_system_message_update(system) };
                if !text.is_empty() {
                    result.push(json!({"role": "system", "content": text}));
                }
            }
            Message::User(user) => match &user.content {
                UserMessageContent::Text(text) => result.push(json!({"role": "user", "content": text})),
                UserMessageContent::Blocks(blocks) => {
                    let had_images = blocks.iter().any(|b| matches!(b, UserContent::Image(_)));
                    let content: Vec<Value> = blocks
                        .iter()
                        .filter_map(|block| match block {
                            UserContent::Text(t) => Some(json!({"type": "text", "text": t.text})),
                            UserContent::Image(image) if supports_images => {
                                Some(json!({"type": "image_url", "imageUrl": data_url(&image.mime_type, &image.data)}))
                            }
                            UserContent::Image(_) => None,
                        })
                        .collect();
                    if !content.is_empty() {
                        result.push(json!({"role": "user", "content": content}));
                    } else if had_images && !supports_images {
                        result
                            .push(json!({"role": "user", "content": "(image omitted: model does not support images)"}));
                    }
                }
            },
            Message::Assistant(assistant) => {
                let mut parts = Vec::new();
                let mut calls = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(text) => {
                            if !js_json::js_trim(&text.text).is_empty() {
                                parts.push(json!({"type": "text", "text": text.text}));
                            }
                        }
                        AssistantContent::Thinking(thinking) => {
                            if !js_json::js_trim(&thinking.thinking).is_empty() {
                                parts.push(json!({
                                    "type": "thinking",
                                    "thinking": [{"type": "text", "text": thinking.thinking}],
                                }));
                            }
                        }
                        AssistantContent::ToolCall(call) => calls.push(json!({
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": js_json::stringify(&Value::Object(call.arguments.clone())),
                            },
                            "index": 0,
                        })),
                    }
                }
                if parts.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut wire = Map::new();
                wire.insert("role".into(), json!("assistant"));
                wire.insert("prefix".into(), json!(false));
                if !parts.is_empty() {
                    wire.insert("content".into(), Value::Array(parts));
                }
                if !calls.is_empty() {
                    wire.insert("toolCalls".into(), Value::Array(calls));
                }
                result.push(Value::Object(wire));
            }
            Message::ToolResult(tool_result) => {
                let text = tool_result.text();
                let has_images = tool_result.content.iter().any(|c| matches!(c, UserContent::Image(_)));
                let mut content = vec![
                    json!({"type": "text", "text": tool_result_text(&text, has_images, supports_images, tool_result.is_error)}),
                ];
                if supports_images {
                    for block in &tool_result.content {
                        if let UserContent::Image(image) = block {
                            content.push(
                                json!({"type": "image_url", "imageUrl": data_url(&image.mime_type, &image.data)}),
                            );
                        }
                    }
                }
                result.push(json!({
                    "role": "tool",
                    "toolCallId": tool_result.tool_call_id,
                    "name": tool_result.tool_name,
                    "content": content,
                }));
            }
        }
    }
    result
}

fn tool_result_text(text: &str, has_images: bool, supports_images: bool, is_error: bool) -> String {
    let trimmed = js_json::js_trim(text);
    let prefix = if is_error { "[tool error] " } else { "" };
    if !trimmed.is_empty() {
        let suffix =
            if has_images && !supports_images { "\n[tool image omitted: model does not support images]" } else { "" };
        return format!("{prefix}{trimmed}{suffix}");
    }
    let body = match (has_images, supports_images) {
        (true, true) => "(see attached image)",
        (true, false) => "(image omitted: model does not support images)",
        (false, _) => "(no tool output)",
    };
    format!("{prefix}{body}")
}

/// Move `source` to `target` (at the end, or in place when `target` exists).
fn rename(record: &mut Map<String, Value>, source: &str, target: &str) {
    if let Some(value) = record.shift_remove(source) {
        record.insert(target.to_owned(), value);
    }
}

/// The SDK's camelCase payload as the wire's snake_case.
fn to_wire_payload(payload: &Value) -> Value {
    let Some(source) = payload.as_object() else { return payload.clone() };
    let mut wire = source.clone();
    for (from, to) in [
        ("topP", "top_p"),
        ("maxTokens", "max_tokens"),
        ("randomSeed", "random_seed"),
        ("responseFormat", "response_format"),
        ("toolChoice", "tool_choice"),
        ("presencePenalty", "presence_penalty"),
        ("frequencyPenalty", "frequency_penalty"),
        ("parallelToolCalls", "parallel_tool_calls"),
        ("reasoningEffort", "reasoning_effort"),
        ("promptMode", "prompt_mode"),
        ("promptCacheKey", "prompt_cache_key"),
        ("safePrompt", "safe_prompt"),
    ] {
        rename(&mut wire, from, to);
    }
    if let Some(Value::Array(messages)) = wire.get_mut("messages") {
        for message in messages.iter_mut() {
            wire_message(message);
        }
    }
    if let Some(Value::Object(format)) = wire.get_mut("response_format") {
        rename(format, "jsonSchema", "json_schema");
        if let Some(Value::Object(schema)) = format.get_mut("json_schema") {
            rename(schema, "schemaDefinition", "schema");
        }
    }
    Value::Object(wire)
}

fn wire_message(message: &mut Value) {
    let Some(record) = message.as_object_mut() else { return };
    rename(record, "toolCalls", "tool_calls");
    rename(record, "toolCallId", "tool_call_id");
    if let Some(Value::Array(chunks)) = record.get_mut("content") {
        for chunk in chunks.iter_mut().filter_map(Value::as_object_mut) {
            for (from, to) in [
                ("imageUrl", "image_url"),
                ("documentUrl", "document_url"),
                ("documentName", "document_name"),
                ("fileId", "file_id"),
                ("referenceIds", "reference_ids"),
                ("inputAudio", "input_audio"),
            ] {
                rename(chunk, from, to);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::transport::sse::SseDecoder;

    fn data_of(chunks: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        for chunk in chunks {
            decoder.push(chunk, &mut events);
        }
        decoder.finish(&mut events);
        events
            .iter()
            .filter_map(|event| match parse_event(&event.data) {
                Ok(Parsed::Chunk(v)) => Some(js_json::stringify(&v)),
                Ok(Parsed::Done) => Some("[DONE]".into()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn events_split_anywhere_give_the_same_chunks() {
        let body = "\u{feff}data: {\"choices\":[],\"x\":\"h\u{e9}\u{1f600}\"}\r\n\r\ndata: {\"choices\":[]}\n\n: c\r\rdata: {\"choices\":\rdata: [1]}\n\rdata: [DONE]\n\n";
        let bytes = body.as_bytes();
        let whole = data_of(&[bytes]);
        assert_eq!(whole.len(), 4, "{whole:?}");
        assert_eq!(whole[2], r#"{"choices":[1]}"#, "data lines are joined");
        for cut in 1..bytes.len() {
            assert_eq!(data_of(&[&bytes[..cut], &bytes[cut..]]), whole, "cut at {cut}");
        }
        let single: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(data_of(&single), whole);
        // A last event without its blank line still counts.
        assert_eq!(data_of(&[b"data: {\"choices\":[]}"]), [r#"{"choices":[]}"#]);
    }

    #[test]
    fn events_are_checked() {
        assert!(matches!(parse_event("  "), Ok(Parsed::Nothing)));
        let error = parse_event("{\"error\":{}}").err().unwrap();
        assert_eq!(error.message, "Invalid Mistral streaming event");
        assert!(parse_event("{\"choices\":[").is_err());
    }

    #[test]
    fn tool_call_ids_are_nine_alphanumerics() {
        assert_eq!(derive_id("abc123XYZ", 0), "abc123XYZ");
        assert_eq!(derive_id("call_abc-123_XYZ", 0).len(), 9);
        let mut ids = IdNormalizer::default();
        let a = ids.normalize("toolu_01ABCDEFGHIJKLMNOP");
        assert_eq!(a.len(), 9);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(ids.normalize("toolu_01ABCDEFGHIJKLMNOP"), a);
        // Two ids with the same alphanumerics get different names.
        let b = ids.normalize("a-b-c-1-2-3-x-y-z");
        let c = ids.normalize("abc123xyz");
        let d = ids.normalize("abc_123_xyz");
        assert_eq!(b, "abc123xyz");
        assert_ne!(c, b);
        assert_ne!(c, d);
    }

    #[test]
    fn endpoint_resolves_against_the_base_path() {
        assert_eq!(endpoint("https://api.mistral.ai").unwrap(), "https://api.mistral.ai/v1/chat/completions");
        assert_eq!(endpoint("http://127.0.0.1:9/proxy//").unwrap(), "http://127.0.0.1:9/proxy/v1/chat/completions");
        assert_eq!(endpoint("not a url").err().unwrap().message, "Invalid URL");
    }
}
