//! Google Gemini (`google-generative-ai`, the Generative Language API).
//!
//! Gemini sends function calls whole, so a call yields `toolcall_start`, one `toolcall_delta`
//! (the JSON text of its arguments) and `toolcall_end` back to back. Calls without an id get
//! `<name>_<unix ms>_<n>` from a [`ToolCallIds`] source (a process-wide counter by default,
//! injectable for deterministic tests).

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pi_types::transcript::{
    collapse_system_messages, current_tools, initial_system_message, system_message_text,
    without_initial_system_message,
};
use pi_types::{
    AssistantContent, AssistantMessageBuilder, AssistantMessageEventStream, InputModality, Message, Model, StopReason,
    StreamFn, StreamOptions, ThinkingBudgets, ThinkingLevel, Tool, ToolCall, ToolChoice, TranscriptContext,
    UserContent, UserMessageContent,
};
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use crate::api::driver::{self, Call, Cancel, Cx, Decoder, Exchange, Flow, Framing, OnCancel, ReadMode, WireApi};
use crate::api::own_options;
use crate::api::request_options;
use crate::api::support::{self as adapter_support, object, Stop};
use crate::api::transform::{sanitize_id, take_units, transform_messages};
use crate::api::typed;
use crate::js_json;
use crate::transport::http::{self, ApiError, ApiErrorKind, Dialect};
use crate::transport::sse::GeminiFramer;

/// The API id.
pub const API: &str = "google-generative-ai";

mod options;
pub use options::{GoogleOptions, GoogleThinking, GoogleThinkingLevel, GoogleToolChoice};

/// Stream with the API's own options, as the reference's `stream()` (through a default
/// [`GoogleGenerativeAi`]): thinking is what `api.thinking` says (none when unset, nothing is
/// derived from `options.reasoning`), and `maxOutputTokens` is sent only when
/// `options.max_tokens` is set.
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: GoogleOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&GoogleGenerativeAi::default(), model, context, options, api)
}

/// Source of ids for function calls that arrive without one.
pub trait ToolCallIds: Send + Sync {
    /// A fresh id for a call of tool `name`.
    fn next_id(&self, name: &str) -> String;
}

/// The reference's scheme: `<name>_<Date.now()>_<n>` with a process-wide counter.
#[derive(Debug, Default)]
pub struct ProcessToolCallIds;

static PROCESS_COUNTER: AtomicU64 = AtomicU64::new(0);

impl ToolCallIds for ProcessToolCallIds {
    fn next_id(&self, name: &str) -> String {
        clock_id(name, &PROCESS_COUNTER)
    }
}

/// `<name>_<Date.now()>_<n>`, `n` the next value of `counter` (from 1).
pub(crate) fn clock_id(name: &str, counter: &AtomicU64) -> String {
    let n = counter.fetch_add(1, Ordering::SeqCst).saturating_add(1);
    format!("{name}_{}_{n}", pi_types::now_ms())
}

google_adapter!(
    /// The Gemini adapter.
    GoogleGenerativeAi,
    ProcessToolCallIds
);

pub(crate) struct GoogleDialect;

fn status_text(status: u16) -> &'static str {
    reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("")
}

impl Dialect for GoogleDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let text = String::from_utf8_lossy(body).into_owned();
        let is_json =
            headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("application/json"));
        let message = if is_json {
            match js_json::parse(&text) {
                Ok(value) => js_json::stringify(&value),
                // A body cut at the read cap does not parse: the status and its first bytes
                // keep the provider's message (the reference's JSON error would lose it).
                Err(_) if body.len() >= http::MAX_ERROR_BODY_BYTES => {
                    format!("{status} {}: {}", status_text(status), js_json::js_trim(&text))
                }
                Err(message) => return ApiError::other(message),
            }
        } else {
            js_json::stringify(&json!({"error": {"message": text, "code": status, "status": status_text(status)}}))
        };
        ApiError { kind: ApiErrorKind::Status, status: Some(status), headers: None, message, body: None }
    }

    fn format(&self, error: &ApiError) -> String {
        error.message.clone()
    }

    fn exposes_headers(&self) -> bool {
        false
    }

    fn retries_connection_errors(&self) -> bool {
        false
    }
}

/// Whether the model takes a discrete `thinkingLevel` instead of a token budget.
pub fn uses_thinking_level(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    let gemini3 = regex_like_gemini3(&id);
    gemini3
        || gemini_major_version(&id).is_some_and(|m| m >= 4)
        || id == "gemini-flash-latest"
        || id == "gemini-flash-lite-latest"
        || id.contains("gemma-4")
        || id.contains("gemma4")
}

fn regex_like_gemini3(id: &str) -> bool {
    // gemini-3(-|.\d+-)(pro|flash) anywhere in the id.
    let mut rest = id;
    while let Some(pos) = rest.find("gemini-3") {
        let after = &rest[pos + "gemini-3".len()..];
        let after = match after.strip_prefix('.') {
            Some(minor) => {
                let digits = minor.chars().take_while(char::is_ascii_digit).count();
                if digits == 0 {
                    rest = &rest[pos + 1..];
                    continue;
                }
                &minor[digits..]
            }
            None => after,
        };
        if after.starts_with("-pro") || after.starts_with("-flash") {
            return true;
        }
        rest = &rest[pos + 1..];
    }
    false
}

/// The Gemini major version in a model id: the digits of the first `gemini-<n>` or
/// `gemini-live-<n>` anywhere in it (hosts prefix ids, e.g. `vendor-gemini-4-argon`).
fn gemini_major_version(model_id: &str) -> Option<u32> {
    let id = model_id.to_lowercase();
    let mut from = 0;
    while let Some(pos) = id[from..].find("gemini") {
        let after = &id[from + pos + "gemini".len()..];
        let version = after.strip_prefix("-live-").or_else(|| after.strip_prefix('-'));
        let digits = version.map_or("", |v| &v[..v.bytes().take_while(u8::is_ascii_digit).count()]);
        // Digits beyond u32 are a version no Gemini has: the reference's number is huge, too.
        if !digits.is_empty() {
            return Some(digits.parse().unwrap_or(u32::MAX));
        }
        from += pos + 1;
    }
    None
}

/// Whether the model enforces strict tools (`VALIDATED` function calling): Gemini 3 and later,
/// unless `compat.supportsStrictMode` says otherwise (for Gemini served under an id without its
/// version).
fn supports_strict_tool_sampling(model: &Model) -> bool {
    match model.compat.as_ref().and_then(|c| c.get("supportsStrictMode")).and_then(Value::as_bool) {
        Some(supported) => supported,
        None => gemini_major_version(&model.id).is_some_and(|m| m >= 3),
    }
}

fn requires_tool_call_id(model_id: &str) -> bool {
    model_id.starts_with("claude-")
        || model_id.starts_with("gpt-oss-")
        || gemini_major_version(model_id).is_some_and(|m| m >= 3)
}

fn resolve_level(model: &Model, level: ThinkingLevel) -> Result<&'static str, String> {
    let mapped = request_options::mapped_level(model, level);
    let resolved = match mapped {
        Some(Some(value)) => value.to_lowercase(),
        _ => level.as_str().to_owned(),
    };
    match resolved.as_str() {
        "minimal" => Ok("MINIMAL"),
        "low" => Ok("LOW"),
        "medium" => Ok("MEDIUM"),
        "high" => Ok("HIGH"),
        "xhigh" => Ok("XHIGH"),
        _ => Err(format!(
            "Unsupported Google thinking level mapping for {}/{}: {} -> {}",
            model.provider,
            model.id,
            level,
            match mapped {
                Some(Some(v)) => v.to_owned(),
                Some(None) => "null".to_owned(),
                None => "undefined".to_owned(),
            }
        )),
    }
}

/// The `thinkingBudget` of a level (Gemini and Vertex AI share the table); budgets stop at
/// `high`, which `xhigh` takes.
fn budget_for(model: &Model, level: &str, custom: Option<&ThinkingBudgets>) -> i64 {
    let level = if level == "xhigh" { "high" } else { level };
    let custom_value = custom.and_then(|c| match level {
        "minimal" => c.minimal,
        "low" => c.low,
        "medium" => c.medium,
        "high" => c.high,
        _ => None,
    });
    if let Some(value) = custom_value {
        return value as i64;
    }
    let table: Option<[i64; 4]> = if model.id.contains("2.5-pro") {
        Some([128, 2048, 8192, 32768])
    } else if model.id.contains("2.5-flash-lite") {
        Some([512, 2048, 8192, 24576])
    } else if model.id.contains("2.5-flash") {
        Some([128, 2048, 8192, 24576])
    } else {
        None
    };
    match (table, level) {
        (Some(t), "minimal") => t[0],
        (Some(t), "low") => t[1],
        (Some(t), "medium") => t[2],
        (Some(t), "high") => t[3],
        _ => -1,
    }
}

/// The Gemini or Vertex AI options of a request: tool choice, thinking, and whether they are
/// a `stream()` call's whole options.
fn api_settings(model: &Model, options: &StreamOptions) -> (Option<GoogleToolChoice>, Option<GoogleThinking>, bool) {
    if model.api == crate::api::google::vertex::API {
        let api = own_options::lookup::<crate::api::google::vertex::GoogleVertexOptions>(model, options);
        return (api.field(|api| &api.tool_choice), api.field(|api| &api.thinking), api.is_own());
    }
    let api = own_options::lookup::<GoogleOptions>(model, options);
    (api.field(|api| &api.tool_choice), api.field(|api| &api.thinking), api.is_own())
}

/// The `thinkingConfig` of explicit thinking options (the reference's `stream()`).
fn explicit_thinking_config(model: &Model, thinking: GoogleThinking) -> Result<Option<Value>, String> {
    if !model.reasoning {
        return Ok(None);
    }
    if !thinking.enabled {
        return disabled_thinking_config(model).map(Some);
    }
    let mut config = json!({"includeThoughts": true});
    if let Some(level) = thinking.level {
        config["thinkingLevel"] = json!(level.as_str());
    } else if let Some(budget) = thinking.budget_tokens {
        config["thinkingBudget"] = json!(budget);
    }
    Ok(Some(config))
}

/// The `thinkingConfig` of thinking turned off: budget 0, or the lowest level of a model that
/// cannot turn it off.
fn disabled_thinking_config(model: &Model) -> Result<Value, String> {
    if !uses_thinking_level(model) {
        return Ok(json!({"thinkingBudget": 0}));
    }
    let fallback = request_options::clamp_thinking_level(model, ThinkingLevel::Off);
    if fallback == ThinkingLevel::Off {
        return Ok(json!({"thinkingBudget": 0}));
    }
    Ok(json!({"thinkingLevel": resolve_level(model, fallback)?}))
}

/// The `thinkingConfig` for the request, or the error the reference throws.
fn thinking_config(model: &Model, options: &StreamOptions) -> Result<Option<Value>, String> {
    let (_, thinking, own) = api_settings(model, options);
    if let Some(thinking) = thinking {
        return explicit_thinking_config(model, thinking);
    }
    if !model.reasoning || own {
        return Ok(None);
    }
    let requested = options.reasoning.filter(|l| *l != ThinkingLevel::Off);
    let level = requested.map(|l| request_options::clamp_thinking_level(model, l)).filter(|l| *l != ThinkingLevel::Off);
    match level {
        None => disabled_thinking_config(model).map(Some),
        Some(level) => {
            let resolved = resolve_level(model, level)?;
            if uses_thinking_level(model) {
                Ok(Some(json!({"includeThoughts": true, "thinkingLevel": resolved})))
            } else {
                let budget = budget_for(model, &resolved.to_lowercase(), options.thinking_budgets.as_deref());
                Ok(Some(json!({"includeThoughts": true, "thinkingBudget": budget})))
            }
        }
    }
}

/// The request body the adapter sends for a context.
/// Public so that an application can see what its model and options put on the wire without a
/// server (this crate's own tests of the request fields use it, and cannot reach private items);
/// the body is the one sent when no `on_payload` hook changes it.
pub fn build_request_body(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
) -> Result<Value, String> {
    let context = collapse_system_messages(context.clone());
    build_params(model, &context, options)
}

pub(crate) fn build_params(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
) -> Result<Value, String> {
    let contents = convert_messages(model, context);
    let tools = current_tools(context.messages());
    let system = initial_system_message(context.messages()).map(system_message_text).unwrap_or_default();
    let (tool_choice, _, own) = api_settings(model, options);
    let max_tokens = match own {
        true => options.max_tokens,
        false => Some(request_options::base_max_tokens(model, context, options.max_tokens)),
    };
    let tool_choice = tool_choice.or(match options.tool_choice {
        Some(ToolChoice::Auto) => Some(GoogleToolChoice::Auto),
        Some(ToolChoice::None) => Some(GoogleToolChoice::None),
        None => None,
    });
    let strict_supported = supports_strict_tool_sampling(model);
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents));
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({"parts": [{"text": system}], "role": "user"}));
    }
    if !tools.is_empty() {
        body.insert("tools".into(), json!([{"functionDeclarations": convert_tools(&tools, strict_supported)}]));
        let strict = tools
            .iter()
            .any(|t| adapter_support::resolve_strict(t, strict_supported, None).ok().flatten() == Some(true));
        let mode = match tool_choice {
            Some(GoogleToolChoice::None) => Some("NONE"),
            Some(GoogleToolChoice::Any) => Some("ANY"),
            _ if strict => Some("VALIDATED"),
            Some(GoogleToolChoice::Auto) => Some("AUTO"),
            None => None,
        };
        if let Some(mode) = mode {
            body.insert("toolConfig".into(), json!({"functionCallingConfig": {"mode": mode}}));
        }
    }
    let mut generation = Map::new();
    if let Some(t) = options.temperature {
        generation.insert("temperature".into(), json!(t));
    }
    if let Some(max_tokens) = max_tokens {
        generation.insert("maxOutputTokens".into(), json!(max_tokens));
    }
    if let Some(config) = thinking_config(model, options)? {
        generation.insert("thinkingConfig".into(), config);
    }
    body.insert("generationConfig".into(), Value::Object(generation));
    Ok(Value::Object(body))
}

fn rewrite_const_as_enum(schema: &Value, name_map: bool) -> Value {
    const NAME_MAPS: [&str; 6] =
        ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
    const SUBSCHEMAS: [&str; 16] = [
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "items",
        "prefixItems",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    ];
    match schema {
        Value::Array(items) => Value::Array(items.iter().map(|i| rewrite_const_as_enum(i, false)).collect()),
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                let v = if name_map || SUBSCHEMAS.contains(&key.as_str()) {
                    rewrite_const_as_enum(value, false)
                } else if NAME_MAPS.contains(&key.as_str()) {
                    rewrite_const_as_enum(value, true)
                } else {
                    value.clone()
                };
                out.insert(key.clone(), v);
            }
            if !name_map && !out.contains_key("enum") {
                if let Some(c) = out.get("const").filter(|c| c.is_string() || c.is_number()).cloned() {
                    out.remove("const");
                    out.insert("enum".into(), json!([c]));
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn convert_tools(tools: &[Tool], strict_supported: bool) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let strict = adapter_support::resolve_strict(tool, strict_supported, None).unwrap_or(None);
            json!({
                "name": tool.name,
                "description": tool.description,
                "parametersJsonSchema": rewrite_const_as_enum(&adapter_support::tool_parameters(tool, strict), false),
            })
        })
        .collect()
}

fn valid_signature(signature: Option<&str>) -> Option<&str> {
    let s = signature.filter(|s| !s.is_empty())?;
    if s.len() % 4 != 0 {
        return None;
    }
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 || body.is_empty() {
        return None;
    }
    body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/').then_some(s)
}

fn convert_messages(model: &Model, context: &TranscriptContext) -> Vec<Value> {
    let collapsed = collapse_system_messages(context.clone());
    let conversation = without_initial_system_message(collapsed.messages());
    let requires_id = requires_tool_call_id(&model.id);
    let normalize = |id: &str, _: &Model, _: &pi_types::AssistantMessage| {
        if requires_id {
            take_units(&sanitize_id(id), 64)
        } else {
            id.to_owned()
        }
    };
    let transformed = transform_messages(conversation, model, Some(&normalize));
    let multimodal_responses = gemini_major_version(&model.id).is_none_or(|m| m >= 3);
    let mut contents: Vec<Value> = Vec::new();
    for message in &transformed {
        match message {
            Message::User(user) => {
                let parts: Vec<Value> = match &user.content {
                    UserMessageContent::Text(text) => vec![json!({"text": text})],
                    UserMessageContent::Blocks(blocks) => blocks
                        .iter()
                        .map(|b| match b {
                            UserContent::Text(t) => json!({"text": t.text}),
                            UserContent::Image(img) => {
                                json!({"inlineData": {"mimeType": img.mime_type, "data": img.data}})
                            }
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    contents.push(object([("role", "user".into()), ("parts", Value::Array(parts))]));
                }
            }
            Message::Assistant(assistant) => {
                let same = assistant.provider == model.provider && assistant.model == model.id;
                let mut parts = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) => {
                            let signature = if same { valid_signature(t.text_signature.as_deref()) } else { None };
                            if js_json::js_trim(&t.text).is_empty() && signature.is_none() {
                                continue;
                            }
                            let mut part = json!({"text": t.text});
                            if let Some(sig) = signature {
                                part["thoughtSignature"] = json!(sig);
                            }
                            parts.push(part);
                        }
                        AssistantContent::Thinking(t) => {
                            if same {
                                let signature = valid_signature(t.thinking_signature.as_deref());
                                if js_json::js_trim(&t.thinking).is_empty() && signature.is_none() {
                                    continue;
                                }
                                let mut part = json!({"thought": true, "text": t.thinking});
                                if let Some(sig) = signature {
                                    part["thoughtSignature"] = json!(sig);
                                }
                                parts.push(part);
                            } else if !js_json::js_trim(&t.thinking).is_empty() {
                                parts.push(json!({"text": t.thinking}));
                            }
                        }
                        AssistantContent::ToolCall(call) => {
                            let arguments = Value::Object(call.arguments.clone());
                            let mut function = object([("name", call.name.as_str().into()), ("args", arguments)]);
                            if requires_id {
                                function["id"] = json!(call.id);
                            }
                            let mut part = object([("functionCall", function)]);
                            if let Some(sig) =
                                if same { valid_signature(call.thought_signature.as_deref()) } else { None }
                            {
                                part["thoughtSignature"] = json!(sig);
                            }
                            parts.push(part);
                        }
                    }
                }
                if !parts.is_empty() {
                    contents.push(object([("role", "model".into()), ("parts", Value::Array(parts))]));
                }
            }
            Message::ToolResult(result) => {
                let text = result.text();
                let images: Vec<Value> = if model.input.contains(&InputModality::Image) {
                    result
                        .content
                        .iter()
                        .filter_map(|c| match c {
                            UserContent::Image(img) => {
                                Some(json!({"inlineData": {"mimeType": img.mime_type, "data": img.data}}))
                            }
                            UserContent::Text(_) => None,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let has_text = !js_json::js_trim(&text).is_empty();
                let value = if has_text {
                    text
                } else if !images.is_empty() {
                    "(see attached image)".to_owned()
                } else {
                    String::new()
                };
                let mut response = Map::new();
                response.insert("name".into(), json!(result.tool_name));
                response.insert(
                    "response".into(),
                    if result.is_error { json!({"error": value}) } else { json!({"output": value}) },
                );
                if !images.is_empty() && multimodal_responses {
                    response.insert("parts".into(), Value::Array(images.clone()));
                }
                if requires_id {
                    response.insert("id".into(), json!(result.tool_call_id));
                }
                let part = object([("functionResponse", Value::Object(response))]);
                let merge = contents.last().is_some_and(|last| {
                    last["role"] == "user"
                        && last["parts"]
                            .as_array()
                            .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_some()))
                });
                if merge {
                    if let Some(parts) = contents.last_mut().and_then(|l| l["parts"].as_array_mut()) {
                        parts.push(part);
                    }
                } else {
                    contents.push(object([("role", "user".into()), ("parts", Value::Array(vec![part]))]));
                }
                if !images.is_empty() && !multimodal_responses {
                    let mut parts = vec![json!({"text": "Tool result image:"})];
                    parts.extend(images);
                    contents.push(object([("role", "user".into()), ("parts", Value::Array(parts))]));
                }
            }
            Message::System(_) => {}
        }
    }
    contents
}

/// The SDK's check of a decoded text for a whole error object.
fn stream_error_chunk(text: &str) -> Option<String> {
    // Only an object has an `error` member: anything else is not parsed at all.
    if !text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{') {
        return None;
    }
    stream_error(&js_json::parse(text).ok()?)
}

/// The same check of a text already parsed (`value`).
fn stream_error(value: &Value) -> Option<String> {
    let error = value.get("error").filter(|e| e.is_object())?;
    let code = error.get("code").and_then(Value::as_f64)?;
    if !(400.0..600.0).contains(&code) {
        return None;
    }
    let status = match error.get("status") {
        None => "undefined".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => js_json::stringify(other),
    };
    Some(format!("got status: {status}. {}", js_json::stringify(value)))
}

fn map_stop_reason(reason: &str) -> Result<StopReason, Stop> {
    Ok(match reason {
        "STOP" => StopReason::Stop,
        "MAX_TOKENS" | "CONTINUATION" => StopReason::Length,
        "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "SAFETY"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION"
        | "IMAGE_OTHER"
        | "RECITATION"
        | "FINISH_REASON_UNSPECIFIED"
        | "OTHER"
        | "LANGUAGE"
        | "MALFORMED_FUNCTION_CALL"
        | "UNEXPECTED_TOOL_CALL"
        | "TOO_MANY_TOOL_CALLS"
        | "NO_IMAGE"
        | "MISSING_THOUGHT_SIGNATURE"
        | "MALFORMED_RESPONSE"
        | "ESCALATION"
        | "PUP_LIMITED_DISABLED"
        | "MODEL_ARMOR" => StopReason::Error,
        other => return Err(Stop::error(format!("Unhandled stop reason: {other}"))),
    })
}

fn count(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_f64).filter(|f| *f > 0.0).map_or(0, |f| f as u64)
}

/// Gemini's request: the key in `x-goog-api-key`, the model's streaming endpoint under its base URL.
async fn prepare(ids: &Arc<dyn ToolCallIds>, call: Call<'_>) -> Result<Exchange<Wire>, Stop> {
    let Call { model, context, options, .. } = call;
    let Some(key) = options.api_key.clone().filter(|k| !k.is_empty()) else {
        return Err(Stop::error(format!("No API key for provider: {}", model.provider)));
    };
    let context = collapse_system_messages(context);
    let params = build_params(model, &context, options).map_err(Stop::error)?;
    let params = adapter_support::apply_on_payload(options, model, params).await;
    let url = format!("{}/models/{}:streamGenerateContent?alt=sse", model.base_url.trim_end_matches('/'), model.id);
    let credential = ("x-goog-api-key".to_owned(), Some(key));
    let user_headers = [adapter_support::model_headers(model), adapter_support::option_headers(options)].concat();
    Ok(exchange(ids, model, options, params, url, Some(credential), user_headers, "Google"))
}

/// What Gemini and Vertex send alike: `params` (the caller's `on_payload` applied) as JSON to
/// `url`; the identity headers, then `Content-Type` and `credential` (if any), then
/// `user_headers` (the model's and the caller's) on top. The response is decoded with `ids`'
/// synthesized call ids and its errors are `provider`'s.
#[allow(clippy::too_many_arguments)] // one call per API, each naming what differs
pub(crate) fn exchange<W: WireApi<Dialect = GoogleDialect, Decoder = GoogleDecode>>(
    ids: &Arc<dyn ToolCallIds>,
    model: &Model,
    options: &StreamOptions,
    params: Value,
    url: String,
    credential: Option<(String, Option<String>)>,
    user_headers: Vec<(String, Option<String>)>,
    provider: &'static str,
) -> Exchange<W> {
    let mut base = vec![("Content-Type".to_owned(), Some("application/json".to_owned()))];
    base.extend(credential);
    let headers =
        adapter_support::merge_headers(&[adapter_support::identity_headers(model, options), base, user_headers]);
    let request = http::Request { url, headers, body: js_json::stringify(&params).into_bytes() };
    Exchange::new(request, GoogleDialect, GoogleDecode::new(Arc::clone(ids), options, provider))
}

/// Where a Gemini stream looks at cancellation: on every read and after every chunk.
pub(crate) const GOOGLE_CANCEL: Cancel = Cancel {
    read: OnCancel::Fail("This operation was aborted"),
    before_event: None,
    after_event: Some(OnCancel::Fail("This operation was aborted")),
};

/// Gemini's framing (`@google/genai`, [`GeminiFramer`]) with the SDK's check of each network
/// chunk for a whole error object.
#[derive(Default)]
pub(crate) struct GeminiSse(GeminiFramer);

impl Framing for GeminiSse {
    type Event<'a> = &'a str;
    const READ: ReadMode = ReadMode::Chunks;

    fn push(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        match stream_error_chunk(self.0.push_chunk(bytes)) {
            Some(message) => Err(Stop::error(message)),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> Result<(), Stop> {
        self.0.finish().map_err(Stop::error)
    }

    fn next(&mut self) -> Result<Option<&str>, Stop> {
        Ok(self.0.next_data())
    }
}

/// The decoding state of one streamed response (shared with Vertex AI; `provider` names the
/// API in the errors of a stream that ends without a finish reason).
pub(crate) struct GoogleDecode {
    ids: Arc<dyn ToolCallIds>,
    provider: &'static str,
    /// Chunks received, and the first prompt-block report among them: a stream without a
    /// finish reason ends with one or the other.
    chunks: u64,
    prompt_blocked: Option<String>,
    current: Option<usize>,
    /// The arguments merged so far of a call streamed in pieces (see below).
    merged: Value,
    /// Without a hook that sees every chunk as a `Value`, text chunks take the typed decode.
    typed: bool,
}

impl GoogleDecode {
    pub(crate) fn new(ids: Arc<dyn ToolCallIds>, options: &StreamOptions, provider: &'static str) -> Self {
        Self {
            ids,
            provider,
            chunks: 0,
            prompt_blocked: None,
            current: None,
            merged: Value::Null,
            typed: options.on_provider_stream_event.is_none(),
        }
    }
}

impl Decoder for GoogleDecode {
    type Framing = GeminiSse;

    async fn event<'e>(&mut self, text: &'e str, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        GeminiSse: 'e,
    {
        let fast = match self.typed {
            true => typed::decode::<typed::GeminiChunk<'_>>(text),
            false => None,
        };
        if let Some(chunk) = &fast {
            self.chunks += 1;
            handle_typed_chunk(cx.model, chunk, cx.out, &mut self.current, &mut self.merged).await?;
        } else {
            // One parse for the SDK's error check and the chunk itself.
            let chunk = js_json::parse(text).map_err(Stop::error)?;
            if let Some(message) = stream_error(&chunk) {
                return Err(Stop::error(message));
            }
            self.chunks += 1;
            if self.prompt_blocked.is_none() {
                self.prompt_blocked = prompt_block_error(self.provider, &chunk);
            }
            adapter_support::on_event(cx.options, cx.model, &chunk).await;
            handle_chunk(cx.model, chunk, cx.out, &mut self.current, &mut self.merged, self.ids.as_ref()).await?;
        }
        Ok(Flow::Continue)
    }

    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        if let Some(index) = self.current {
            end_open_block(cx.out, index, &mut self.merged).await?;
        }
        if cx.cancelled() {
            return Err(Stop::aborted("Request was aborted"));
        }
        match cx.out.message().stop_reason {
            StopReason::Pending => Err(Stop::error(self.prompt_blocked.take().unwrap_or_else(|| {
                let (chunks, provider) = (self.chunks, self.provider);
                let unit = if chunks == 1 { "chunk" } else { "chunks" };
                format!("{provider} stream ended without a finish reason after receiving {chunks} {unit}")
            }))),
            StopReason::Aborted | StopReason::Error => Err(Stop::error(match &cx.out.message().raw_stop_reason {
                Some(raw) if !raw.is_empty() => format!("Provider stopped with: {raw}"),
                _ => "An unknown error occurred".to_owned(),
            })),
            _ => Ok(()),
        }
    }
}

/// The error a chunk's `promptFeedback` reports when the prompt was blocked (a truthy
/// `blockReason`): the reason, its message and the safety ratings that have a category.
fn prompt_block_error(provider: &str, chunk: &Value) -> Option<String> {
    let feedback = chunk.get("promptFeedback")?;
    let reason = js_text(feedback.get("blockReason"))?;
    let mut details = vec![format!("{provider} prompt blocked: {reason}")];
    if let Some(message) = js_text(feedback.get("blockReasonMessage")) {
        details.push(message);
    }
    let ratings: Vec<String> = feedback
        .get("safetyRatings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|rating| {
            let category = js_text(rating.get("category"))?;
            Some(match js_text(rating.get("probability")) {
                Some(probability) => format!("{category} ({probability})"),
                None => category,
            })
        })
        .collect();
    if !ratings.is_empty() {
        let label = if ratings.len() == 1 { "Safety rating" } else { "Safety ratings" };
        details.push(format!("{label}: {}", ratings.join(", ")));
    }
    Some(details.join(". "))
}

/// A truthy string, number or `true` as JavaScript interpolates it; `None` for a falsy value
/// (absent, `null`, `""`, `0`, `false`) and for objects, which the API never sends here.
fn js_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) if n.as_f64().is_some_and(|f| f != 0.0) => Some(js_json::stringify(&Value::Number(n.clone()))),
        Value::Bool(true) => Some("true".to_owned()),
        _ => None,
    }
}

/// A text part (a thought when `thinking`) into the open block of its kind, or a new one.
async fn text_part(
    out: &mut AssistantMessageBuilder,
    current: &mut Option<usize>,
    merged: &mut Value,
    text: &str,
    thinking: bool,
    signature: Option<&str>,
) -> Result<(), Stop> {
    if let Some(index) = streamed_call(out, *current) {
        *current = None;
        end_streamed_call(out, index, merged).await?;
    }
    let current_block =
        current.map(|i| (i, matches!(out.message().content.get(i), Some(AssistantContent::Thinking(_)))));
    let index = match current_block {
        Some((index, is_thinking)) if is_thinking == thinking => index,
        _ => {
            if let Some(index) = *current {
                out.end_block(index).await?;
            }
            let index = if thinking { out.start_thinking().await } else { out.start_text().await };
            *current = Some(index);
            index
        }
    };
    // The part's signature is on the block before the delta's event.
    if thinking {
        if let Some(sig) = signature {
            out.thinking_mut(index)?.thinking_signature = Some(sig.to_owned());
        }
        out.thinking_delta(index, text).await?;
    } else {
        if let Some(sig) = signature {
            out.text_mut(index)?.text_signature = Some(sig.to_owned());
        }
        out.text_delta(index, text).await?;
    }
    Ok(())
}

/// A chunk from its typed decode (which declines an error, a function call and a finish
/// reason), as [`handle_chunk`] takes it. By reference: the decoded chunk is a few hundred
/// bytes, and each move into a future would copy it.
async fn handle_typed_chunk(
    model: &Model,
    chunk: &typed::GeminiChunk<'_>,
    out: &mut AssistantMessageBuilder,
    current: &mut Option<usize>,
    merged: &mut Value,
) -> Result<(), Stop> {
    let (typed::Obj(candidate),) = &chunk.candidates;
    let (typed::Obj(part),) = &candidate.content.0.parts;
    if out.message().response_id.as_deref().is_none_or(str::is_empty) {
        if let Some(id) = chunk.response_id.as_deref() {
            out.metadata_mut().response_id = Some(id.to_owned().into());
        }
    }
    if let Some(text) = part.text.as_deref() {
        let signature = part.thought_signature.as_deref().filter(|s| !s.is_empty());
        text_part(out, current, merged, text, part.thought == Some(true), signature).await?;
    }
    if let Some(typed::Obj(usage)) = &chunk.usage_metadata {
        let prompt = typed::Int::count(usage.prompt_token_count);
        let cached = typed::Int::count(usage.cached_content_token_count);
        let thoughts = typed::Int::count(usage.thoughts_token_count);
        let mut usage = pi_types::Usage {
            input: prompt.saturating_sub(cached),
            output: typed::Int::count(usage.candidates_token_count).saturating_add(thoughts),
            cache_read: cached,
            cache_write: 0,
            reasoning: Some(thoughts),
            total_tokens: typed::Int::count(usage.total_token_count),
            ..Default::default()
        };
        crate::cost::calculate_cost(model, &mut usage);
        // Most chunks repeat the usage: edited only when it changes, since an edit tells each
        // follower of the message to compare its metadata.
        if out.message().usage != usage {
            out.metadata_mut().usage = usage;
        }
    }
    Ok(())
}

async fn handle_chunk(
    model: &Model,
    mut chunk: Value,
    out: &mut AssistantMessageBuilder,
    current: &mut Option<usize>,
    merged: &mut Value,
    ids: &dyn ToolCallIds,
) -> Result<(), Stop> {
    if out.message().response_id.as_deref().is_none_or(str::is_empty) {
        if let Some(id) = chunk.get("responseId").and_then(Value::as_str) {
            out.metadata_mut().response_id = Some(id.to_owned().into());
        }
    }
    fn first_candidate(chunk: &mut Value) -> Option<&mut Value> {
        chunk.get_mut("candidates").and_then(Value::as_array_mut).and_then(|c| c.first_mut())
    }
    let parts = first_candidate(&mut chunk)
        .and_then(|c| c.get_mut("content"))
        .and_then(|c| c.get_mut("parts"))
        .and_then(Value::as_array_mut);
    for part in parts.into_iter().flatten() {
        // A call's arguments move into its block (the chunk was seen by the hook already, and
        // nothing else reads them): a call sent whole is not copied.
        let whole_arguments = part.get_mut("functionCall").and_then(|c| c.get_mut("args")).map(Value::take);
        let part = &*part;
        let signature = part.get("thoughtSignature").and_then(Value::as_str).filter(|s| !s.is_empty());
        if let Some(text) = part.get("text").filter(|t| !t.is_null()) {
            let text = text.as_str().map_or_else(|| js_json::stringify(text).into(), Cow::Borrowed);
            let thinking = part.get("thought") == Some(&Value::Bool(true));
            text_part(out, current, merged, &text, thinking, signature).await?;
        }
        if let Some(call) = part.get("functionCall").filter(|c| js_json::truthy(c)) {
            if let Some(index) = streamed_call(out, *current) {
                if continues_call(call) {
                    // A piece of the open streamed call: merge its arguments; the call ends
                    // with the first piece that does not announce another.
                    merge_partial_args(merged, call);
                    if call.get("willContinue") != Some(&Value::Bool(true)) {
                        *current = None;
                        end_streamed_call(out, index, merged).await?;
                    }
                    continue;
                }
            }
            if let Some(index) = current.take() {
                end_open_block(out, index, merged).await?;
            }
            // A call without a name is named `undefined` (`null` for a null name) in its
            // synthesized id, as the reference's template string does, and `""` as a call.
            let id_prefix = match call.get("name") {
                None => "undefined".to_owned(),
                Some(Value::Null) => "null".to_owned(),
                Some(Value::String(name)) => name.clone(),
                Some(other) => js_json::stringify(other),
            };
            let name = call.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
            let provided = call.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
            let duplicate = provided.is_some_and(|id| out.message().tool_calls().any(|c| c.id == id));
            let id = match provided {
                Some(id) if !duplicate => id.to_owned(),
                _ => ids.next_id(&id_prefix),
            };
            let arguments = match whole_arguments {
                Some(Value::Object(arguments)) => arguments,
                _ => Map::new(),
            };
            let tool_call = ToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
                thought_signature: signature.map(Into::into),
                ..Default::default()
            };
            if starts_streamed_call(call) {
                *merged = Value::Object(tool_call.arguments.clone());
                let text = js_json::stringify(merged);
                let index = out.start_tool_call_with_arguments(tool_call, &text).await;
                // The opening piece may carry arguments too, and may be the only piece.
                merge_partial_args(merged, call);
                if call.get("willContinue") == Some(&Value::Bool(true)) {
                    *current = Some(index);
                } else {
                    end_streamed_call(out, index, merged).await?;
                }
            } else {
                out.complete_tool_call(tool_call).await;
            }
        }
    }
    let candidate = first_candidate(&mut chunk).map(|c| &*c);
    if let Some(reason) =
        candidate.and_then(|c| c.get("finishReason")).and_then(Value::as_str).filter(|r| !r.is_empty())
    {
        let stop = map_stop_reason(reason)?;
        let has_tool_call = out.message().tool_calls().next().is_some();
        let mut m = out.metadata_mut();
        m.raw_stop_reason = Some(reason.to_owned().into());
        m.stop_reason = stop;
        if stop == StopReason::Stop && has_tool_call {
            m.stop_reason = StopReason::ToolUse;
        }
    }
    if let Some(usage) = chunk.get("usageMetadata").filter(|u| js_json::truthy(u)) {
        let prompt = count(usage.get("promptTokenCount"));
        let cached = count(usage.get("cachedContentTokenCount"));
        let thoughts = count(usage.get("thoughtsTokenCount"));
        let mut m = out.metadata_mut();
        m.usage = pi_types::Usage {
            input: prompt.saturating_sub(cached),
            output: count(usage.get("candidatesTokenCount")).saturating_add(thoughts),
            cache_read: cached,
            cache_write: 0,
            reasoning: Some(thoughts),
            total_tokens: count(usage.get("totalTokenCount")),
            ..Default::default()
        };
        crate::cost::calculate_cost(model, &mut m.usage);
    }
    Ok(())
}

// Streamed function-call arguments (Gemini 3 with `streamFunctionCallArguments`, as Vertex
// sends them): a call opens with a `functionCall` part that has a name and `willContinue: true`;
// the parts after it carry no name, only `partialArgs` (`{jsonPath, stringValue | numberValue |
// boolValue | nullValue, willContinue}`, a string continuing across pieces of the same path), and
// the call ends with the first piece without `willContinue` (often an empty `functionCall: {}`).
// The reference (and pi-rs before) made one empty call of each piece; here the pieces are merged
// into the call they belong to, which shows `toolcall_start` when it opens and, when it ends, one
// `toolcall_delta` with the JSON text of the merged arguments and `toolcall_end`: the same events a
// call sent whole gives. While it is open, `current` holds its index and `merged` the arguments
// merged so far, kept beside the message (the call shows its opening arguments until it ends)
// so that each piece costs its own size, not the size of everything merged before it.

/// Whether a `functionCall` with a name opens a streamed call: more pieces follow, or its
/// arguments come as `partialArgs`.
fn starts_streamed_call(call: &Value) -> bool {
    call.get("willContinue") == Some(&Value::Bool(true)) || call.get("partialArgs").is_some_and(Value::is_array)
}

/// Whether a `functionCall` part is a piece of the open streamed call: it has no name.
fn continues_call(call: &Value) -> bool {
    call.get("name").is_none_or(Value::is_null)
}

/// The open block `current` when it is a streamed tool call.
fn streamed_call(out: &AssistantMessageBuilder, current: Option<usize>) -> Option<usize> {
    current.filter(|&i| matches!(out.message().content.get(i), Some(AssistantContent::ToolCall(_))))
}

/// Ends the open block `index`, a streamed call with its arguments delta first.
async fn end_open_block(out: &mut AssistantMessageBuilder, index: usize, merged: &mut Value) -> Result<(), Stop> {
    if streamed_call(out, Some(index)).is_some() {
        end_streamed_call(out, index, merged).await
    } else {
        out.end_block(index).await.map_err(Into::into)
    }
}

/// Ends a streamed call as a call sent whole ends: one delta with the JSON text of its merged
/// arguments (taken from `merged`), then `toolcall_end`.
async fn end_streamed_call(out: &mut AssistantMessageBuilder, index: usize, merged: &mut Value) -> Result<(), Stop> {
    let text = match std::mem::take(merged) {
        Value::Object(arguments) => js_json::stringify(&Value::Object(arguments)),
        _ => "{}".to_owned(),
    };
    // The argument text restarts empty (no event) and receives the whole text as one delta.
    out.replace_tool_call_arguments(index, "").await?;
    out.tool_call_delta(index, text).await?;
    out.end_tool_call(index).await?;
    Ok(())
}

/// Merges the `partialArgs` of one piece into the open streamed call's arguments, in place.
fn merge_partial_args(merged: &mut Value, call: &Value) {
    let Some(pieces) = call.get("partialArgs").and_then(Value::as_array) else { return };
    for piece in pieces {
        let Some(path) = piece.get("jsonPath").and_then(Value::as_str).and_then(parse_json_path) else { continue };
        let value = if let Some(text) = piece.get("stringValue").and_then(Value::as_str) {
            PartialValue::Text(text)
        } else if let Some(number) = piece.get("numberValue").filter(|v| v.is_number()) {
            PartialValue::Whole(number.clone())
        } else if let Some(flag) = piece.get("boolValue").filter(|v| v.is_boolean()) {
            PartialValue::Whole(flag.clone())
        } else if piece.get("nullValue").is_some() {
            PartialValue::Whole(Value::Null)
        } else {
            continue;
        };
        set_at_path(merged, &path, value);
    }
}

/// One step of a `partialArgs` JSON path.
#[derive(Debug, PartialEq)]
enum PathStep {
    Key(String),
    Index(usize),
}

/// A `partialArgs` value: string pieces of one path are concatenated, other values replace.
enum PartialValue<'a> {
    Text(&'a str),
    Whole(Value),
}

/// Parses `$.a.b[0]['c']` into steps; `None` for anything else.
fn parse_json_path(path: &str) -> Option<Vec<PathStep>> {
    let mut rest = path.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let (key, tail) = after.split_at(end);
            if key.is_empty() {
                return None;
            }
            steps.push(PathStep::Key(key.to_owned()));
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']')?;
            let (inside, tail) = after.split_at(close);
            let quoted = inside
                .strip_prefix('\'')
                .and_then(|k| k.strip_suffix('\''))
                .or_else(|| inside.strip_prefix('"').and_then(|k| k.strip_suffix('"')));
            match quoted {
                Some(key) => steps.push(PathStep::Key(key.to_owned())),
                None => steps.push(PathStep::Index(inside.parse().ok()?)),
            }
            rest = tail.get(1..)?;
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Puts `value` at `path` inside `root`, making the objects and arrays on the way. An array
/// index may name an existing element or the next one (no gaps); a path that crosses a value
/// of another kind is ignored.
fn set_at_path(root: &mut Value, path: &[PathStep], value: PartialValue<'_>) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut node = root;
    for (i, step) in parents.iter().enumerate() {
        let container = match path.get(i + 1) {
            Some(PathStep::Index(_)) => Value::Array(Vec::new()),
            _ => Value::Object(Map::new()),
        };
        let Some(child) = slot(node, step, container) else { return };
        node = child;
    }
    let placeholder = match &value {
        PartialValue::Text(_) => Value::String(String::new()),
        PartialValue::Whole(_) => Value::Null,
    };
    let Some(target) = slot(node, last, placeholder) else { return };
    match (value, target) {
        (PartialValue::Text(piece), Value::String(text)) => text.push_str(piece),
        (PartialValue::Text(piece), other) => *other = Value::String(piece.to_owned()),
        (PartialValue::Whole(v), other) => *other = v,
    }
}

/// The member `step` of `node`, inserted as `empty` when missing.
fn slot<'a>(node: &'a mut Value, step: &PathStep, empty: Value) -> Option<&'a mut Value> {
    match (node, step) {
        (Value::Object(map), PathStep::Key(key)) => Some(map.entry(key.clone()).or_insert(empty)),
        (Value::Array(items), PathStep::Index(i)) => {
            if *i == items.len() {
                items.push(empty);
            }
            items.get_mut(*i)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn partial_args_paths_build_the_arguments() {
        let mut args = json!({});
        let path = |p: &str| parse_json_path(p).unwrap();
        set_at_path(&mut args, &path("$.operations[0].action"), PartialValue::Text("ad"));
        set_at_path(&mut args, &path("$.operations[0].action"), PartialValue::Text("d"));
        set_at_path(&mut args, &path("$.operations[0].price"), PartialValue::Whole(json!(0.5)));
        set_at_path(&mut args, &path("$.operations[1]['item id']"), PartialValue::Text("x"));
        set_at_path(&mut args, &path("$.flag"), PartialValue::Whole(json!(true)));
        // A gap in an array and a path through a string are ignored.
        set_at_path(&mut args, &path("$.operations[5].action"), PartialValue::Text("no"));
        set_at_path(&mut args, &path("$.flag.deeper"), PartialValue::Text("no"));
        assert_eq!(args, json!({"operations": [{"action": "add", "price": 0.5}, {"item id": "x"}], "flag": true}));
        assert_eq!(parse_json_path("$"), Some(vec![]));
        assert_eq!(parse_json_path("operations"), None);
        assert_eq!(parse_json_path("$.a["), None);
        assert_eq!(parse_json_path("$.a[x]"), None);
        assert_eq!(parse_json_path("$..a"), None);
    }

    #[test]
    fn thinking_level_models() {
        let model = |id: &str| Model::new(id).with_api(API).with_provider("google");
        assert!(uses_thinking_level(&model("gemini-3-pro-preview")));
        assert!(uses_thinking_level(&model("gemini-3.1-flash")));
        assert!(uses_thinking_level(&model("gemini-4-argon")));
        assert!(!uses_thinking_level(&model("gemini-2.5-flash")));
        assert!(requires_tool_call_id("gemini-3-pro"));
        assert!(!requires_tool_call_id("gemini-2.5-pro"));
        // The version is found anywhere in the id (hosts prefix it), first match wins.
        assert!(uses_thinking_level(&model("randomprefix-gemini-4-argon")));
        assert!(requires_tool_call_id("vendor-gemini-3-flash"));
        assert_eq!(gemini_major_version("GEMINI-LIVE-2.5-flash"), Some(2));
        assert_eq!(gemini_major_version("gemini-pro-gemini-3"), Some(3));
        assert_eq!(gemini_major_version("gemini-2-then-gemini-4"), Some(2));
        assert_eq!(gemini_major_version("gemini-live-x"), None);
    }
}
