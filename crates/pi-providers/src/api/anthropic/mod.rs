//! Anthropic Messages (`anthropic-messages`), including Anthropic-compatible gateways.
//!
//! The stream is read with pi-ai's shared SSE decoder rules ([`Sse`]: LF, CRLF
//! and CR line ends, a CRLF split across chunks is one); `ping` and unknown events are ignored,
//! `event: error` ends the stream with its raw data.

use std::collections::HashMap;

use pi_types::transcript::{
    current_tools, initial_system_message, render_system_message_update, resolve_transcript, system_message_text,
};
use pi_types::{
    AssistantContent, AssistantMessageBuilder, AssistantMessageEventStream, CacheRetention, Handover, ImageContent,
    Message, Model, StopReason, StreamFn, StreamOptions, TextContent, ThinkingContent, ThinkingLevel, Tool, ToolCall,
    ToolResultMessage, TranscriptContext, UserContent, UserMessageContent,
};
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use crate::api::driver::{self, Call, Cancel, Cx, Decoder, Exchange, Failure, Flow, OnCancel, Sse, WireApi};
use crate::api::own_options;
use crate::api::request_options;
use crate::api::strict_tool_limits;
use crate::api::strict_tool_limits::Recording;
use crate::api::support::{self as adapter_support, object, Stop};
use crate::api::transform::{sanitize_id, split_error_tool_result_images, take_units, transform_messages};
use crate::api::typed::{self, AnthropicPayload};
use crate::js_json;
use crate::transport::http::{self, ApiError, ApiErrorKind, Dialect};
use crate::transport::sse::SseEventRef;

mod options;
pub(crate) mod threads;
pub use options::{AnthropicEffort, AnthropicOptions, AnthropicToolChoice, ThinkingDisplay};

/// The API id.
pub const API: &str = "anthropic-messages";

const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
const FINE_GRAINED_TOOL_STREAMING_BETA: &str = "fine-grained-tool-streaming-2025-05-14";
const SERVER_SIDE_FALLBACK_BETA: &str = "server-side-fallback-2026-07-01";
const MID_CONVERSATION_OUTPUT_CONFIG_BETA: &str = "mid-conversation-output-config-2026-07-01";
const THINKING_BINDING_CONTROLS_BETA: &str = "thinking-binding-controls-2026-08-01";
const INLINE_TOOLS_BETA: &str = "inline-tools-2026-09-15";
const CLAUDE_CODE_VERSION: &str = "2.1.322";
const CLAUDE_CODE_TOOLS: [&str; 17] = [
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];

/// Compatibility switches of an Anthropic-compatible endpoint (`model.compat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compat {
    /// Tools carry `eager_input_streaming: true` (else the fine-grained streaming beta).
    pub supports_eager_tool_input_streaming: bool,
    /// `ttl: "1h"` for long cache retention.
    pub supports_long_cache_retention: bool,
    /// Send a session affinity header.
    pub send_session_affinity_headers: bool,
    /// `openrouter` (`x-session-id`) or default (`x-session-affinity`).
    pub session_affinity_format: Option<String>,
    /// `cache_control` on the last tool.
    pub supports_cache_control_on_tools: bool,
    /// `temperature` is accepted.
    pub supports_temperature: bool,
    /// Thinking blocks with an empty signature may be replayed.
    pub allow_empty_signature: bool,
    /// Strict tools are accepted.
    pub supports_strict_tools: bool,
    /// System messages may appear mid-conversation.
    pub supports_mid_convo_system_messages: bool,
    /// Adaptive thinking with an effort level instead of a token budget.
    pub force_adaptive_thinking: bool,
    /// Tools change in place (`tool_addition` / `tool_removal` blocks) instead of in the list.
    pub supports_mid_convo_tool_changes: bool,
    /// The effort level is set per reply by system messages with `output_config`.
    pub supports_mid_convo_effort: bool,
    /// Requests of a session continue a server-side message thread (`api::anthropic::threads`).
    pub supports_message_threads: bool,
}

impl Compat {
    /// The switches of a model.
    pub fn for_model(model: &Model) -> Self {
        let c = model.compat.as_ref();
        let flag = |key: &str, default: bool| c.and_then(|c| c.get(key)).and_then(Value::as_bool).unwrap_or(default);
        let is_openrouter = model.provider == "openrouter" || model.base_url.contains("openrouter.ai");
        Self {
            supports_eager_tool_input_streaming: flag("supportsEagerToolInputStreaming", true),
            supports_long_cache_retention: flag("supportsLongCacheRetention", true),
            send_session_affinity_headers: flag("sendSessionAffinityHeaders", is_openrouter),
            session_affinity_format: c
                .and_then(|c| c.get("sessionAffinityFormat"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| is_openrouter.then(|| "openrouter".to_owned())),
            supports_cache_control_on_tools: flag("supportsCacheControlOnTools", true),
            supports_temperature: flag("supportsTemperature", true),
            allow_empty_signature: flag("allowEmptySignature", false),
            supports_strict_tools: flag("supportsStrictTools", false),
            supports_mid_convo_system_messages: flag("supportsMidConvoSystemMessages", false),
            force_adaptive_thinking: flag("forceAdaptiveThinking", false),
            supports_mid_convo_tool_changes: flag("supportsMidConvoToolChanges", false),
            supports_mid_convo_effort: flag("supportsMidConvoEffort", false),
            // Gateways that drop unknown fields would turn a `continue` into a request without
            // the earlier conversation: by default only Anthropic's own endpoint.
            supports_message_threads: flag("supportsMessageThreads", model.base_url.contains("api.anthropic.com")),
        }
    }
}

/// The Anthropic Messages adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnthropicMessages;

impl StreamFn for AnthropicMessages {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(Wire, model, context, options)
    }
}

/// Stream with the API's own options, as the reference's `stream()`: `api` is the whole of the
/// thinking settings (nothing is derived from `options.reasoning`) and `options.max_tokens` is
/// sent as given (else the model's limit).
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: AnthropicOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&AnthropicMessages, model, context, options, api)
}

/// The request's thinking and tool settings: `streamSimple`'s mapping of the neutral options
/// with the [`AnthropicOptions`] that are set applied over it, or those options alone.
struct Thinking {
    /// `None`: not requested either way (no `thinking` member).
    enabled: Option<bool>,
    budget: Option<u64>,
    effort: Option<String>,
    max_tokens: u64,
    display: ThinkingDisplay,
    interleaved: bool,
    tool_choice: Option<Value>,
}

fn resolve_thinking(model: &Model, context: &TranscriptContext, options: &StreamOptions, compat: &Compat) -> Thinking {
    let api = own_options::lookup::<AnthropicOptions>(model, options);
    let mut thinking = if api.is_own() {
        Thinking {
            enabled: None,
            budget: None,
            effort: None,
            max_tokens: options.max_tokens.unwrap_or(model.max_tokens),
            display: ThinkingDisplay::Summarized,
            interleaved: true,
            tool_choice: None,
        }
    } else {
        simple_thinking(model, context, options, compat)
    };
    if let Some(api) = api.get() {
        thinking.enabled = api.thinking_enabled.or(thinking.enabled);
        thinking.budget = api.thinking_budget_tokens.or(thinking.budget);
        thinking.effort = api.effort.map(|e| e.as_str().to_owned()).or(thinking.effort);
        thinking.display = api.thinking_display.unwrap_or(thinking.display);
        thinking.interleaved = api.interleaved_thinking.unwrap_or(thinking.interleaved);
        if let Some(choice) = &api.tool_choice {
            thinking.tool_choice = Some(choice.to_wire());
        }
    }
    thinking
}

fn simple_thinking(model: &Model, context: &TranscriptContext, options: &StreamOptions, compat: &Compat) -> Thinking {
    let base = request_options::base_max_tokens(model, context, options.max_tokens);
    let tool_choice =
        options.tool_choice.map(|choice| json!({"type": serde_json::to_value(choice).unwrap_or(Value::Null)}));
    let thinking = |enabled, budget, effort, max_tokens| Thinking {
        enabled: Some(enabled),
        budget,
        effort,
        max_tokens,
        display: ThinkingDisplay::Summarized,
        interleaved: true,
        tool_choice: tool_choice.clone(),
    };
    let Some(level) = options.reasoning.filter(|l| *l != ThinkingLevel::Off) else {
        return thinking(false, None, None, base);
    };
    if compat.force_adaptive_thinking {
        let effort = match request_options::mapped_level(model, level) {
            Some(Some(value)) => value.to_owned(),
            _ => match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                _ => "high",
            }
            .to_owned(),
        };
        return thinking(true, None, Some(effort), base);
    }
    let (adjusted, budget) = request_options::adjust_max_tokens_for_thinking(
        Some(base),
        model.max_tokens,
        level,
        options.thinking_budgets.as_deref(),
    );
    let max_tokens = request_options::clamp_max_tokens_to_context(model, context, adjusted);
    let budget = budget.min(max_tokens.saturating_sub(1024));
    thinking(true, Some(budget), None, max_tokens)
}

/// Whether tool changes are sent in place: mid-conversation system messages and tool changes
/// are supported and the leading system message declares at least one tool.
fn native_tool_changes(context: &TranscriptContext, compat: &Compat) -> bool {
    compat.supports_mid_convo_system_messages
        && compat.supports_mid_convo_tool_changes
        && initial_system_message(context.messages())
            .is_some_and(|m| m.tools_added.as_ref().is_some_and(|t| !t.is_empty()))
}

/// Whether reply effort levels are sent as system messages (thinking must not be disabled).
fn effort_messages(model: &Model, compat: &Compat, thinking: &Thinking) -> bool {
    compat.supports_mid_convo_effort && !thinking_disabled(model, thinking)
}

fn thinking_disabled(model: &Model, thinking: &Thinking) -> bool {
    model.reasoning && thinking.enabled == Some(false) && !request_options::off_is_null(model)
}

/// The request body the adapter sends for a context (a thread's `continue` trims it further).
/// Public so that an application can see what its model and options put on the wire without a
/// server (this crate's own tests of the request fields use it, and cannot reach private items);
/// the body is the one sent when no `on_payload` hook changes it.
pub fn build_request_body(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Value {
    let compat = Compat::for_model(model);
    let context = resolve_transcript(context.clone(), compat.supports_mid_convo_system_messages);
    let thinking = resolve_thinking(model, &context, options, &compat);
    let oauth = options.api_key.as_deref().is_some_and(is_oauth_token);
    build_params(model, &context, options, &compat, &thinking, oauth)
}

fn is_oauth_token(key: &str) -> bool {
    key.contains("sk-ant-oat")
}

struct AnthropicDialect;

impl Dialect for AnthropicDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        let text = String::from_utf8_lossy(body).into_owned();
        let parsed = js_json::parse(&text).ok();
        let message_text = if parsed.is_some() { None } else { Some(text.as_str()) };
        let message = http::sdk_make_message(Some(status), parsed.as_ref(), message_text);
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

fn cache_retention(options: &StreamOptions) -> CacheRetention {
    options.cache_retention.unwrap_or_else(|| {
        if std::env::var("PI_CACHE_RETENTION").as_deref() == Ok("long") {
            CacheRetention::Long
        } else {
            CacheRetention::Short
        }
    })
}

fn cache_control(options: &StreamOptions, compat: &Compat) -> Option<Value> {
    match cache_retention(options) {
        CacheRetention::None => None,
        CacheRetention::Long if compat.supports_long_cache_retention => Some(json!({"type": "ephemeral", "ttl": "1h"})),
        _ => Some(json!({"type": "ephemeral"})),
    }
}

fn beta_features(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
    compat: &Compat,
    thinking: &Thinking,
    oauth: bool,
    message_threads: bool,
) -> Option<Vec<String>> {
    let mut configured: Option<Option<String>> = None;
    for (name, value) in
        adapter_support::model_headers(model).into_iter().chain(adapter_support::option_headers(options))
    {
        if name.eq_ignore_ascii_case("anthropic-beta") {
            configured = Some(value);
        }
    }
    let mut features: Vec<String> = Vec::new();
    match configured {
        Some(None) => return None,
        Some(Some(value)) => {
            for feature in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                if !features.iter().any(|f| f == feature) {
                    features.push(feature.to_owned());
                }
            }
            return Some(features);
        }
        None => {}
    }
    if oauth {
        features.push("claude-code-20250219".into());
        features.push("oauth-2025-04-20".into());
    }
    if !current_tools(context.messages()).is_empty() && !compat.supports_eager_tool_input_streaming {
        features.push(FINE_GRAINED_TOOL_STREAMING_BETA.into());
    }
    if model.reasoning && thinking.enabled == Some(true) && thinking.interleaved && !compat.force_adaptive_thinking {
        features.push(INTERLEAVED_THINKING_BETA.into());
    }
    let fallbacks = model.compat.as_ref().and_then(|c| c.get("allowedFallbackModels")).and_then(Value::as_array);
    if fallbacks.is_some_and(|f| !f.is_empty()) {
        features.push(SERVER_SIDE_FALLBACK_BETA.into());
    }
    if compat.supports_mid_convo_effort {
        features.push(MID_CONVERSATION_OUTPUT_CONFIG_BETA.into());
        features.push(THINKING_BINDING_CONTROLS_BETA.into());
    }
    if native_tool_changes(context, compat) {
        features.push(INLINE_TOOLS_BETA.into());
    }
    if message_threads {
        features.push(threads::BETA.into());
    }
    let mut unique = Vec::new();
    for f in features {
        if !unique.contains(&f) {
            unique.push(f);
        }
    }
    Some(unique)
}

/// The wire API behind [`AnthropicMessages`] (crate-private: its decoding types stay private).
struct Wire;

impl WireApi for Wire {
    type Dialect = Recording<AnthropicDialect>;
    type Decoder = Decode;
    const CANCEL: Cancel = Cancel {
        read: OnCancel::Fail("Request was aborted"),
        before_event: Some(OnCancel::Fail("Request was aborted")),
        after_event: None,
    };

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, out } = call;
        let compat = Compat::for_model(model);
        let key = options.api_key.clone().filter(|k| !k.is_empty());
        let header_auth = ["authorization", "x-api-key", "cf-aig-authorization"]
            .iter()
            .any(|h| adapter_support::has_header(options, h));
        if key.is_none() && !header_auth {
            return Err(Stop::error(format!("No API key for provider: {}", model.provider)));
        }
        let context = resolve_transcript(context, compat.supports_mid_convo_system_messages);
        let tools_now = current_tools(context.messages());
        let thinking = resolve_thinking(model, &context, options, &compat);
        let oauth = key.as_deref().is_some_and(is_oauth_token) && model.provider != "github-copilot";
        if effort_messages(model, &compat, &thinking) {
            out.metadata_mut().provider_thinking_level =
                Some(thinking.effort.clone().unwrap_or_else(|| "high".to_owned()).into());
        }
        // The session whose requests may use threads. A session where the endpoint rejected
        // them still sends the beta (its resend without `thread` was accepted with it).
        let thread_session = options
            .session_id
            .clone()
            .filter(|_| compat.supports_message_threads && cache_retention(options) != CacheRetention::None);
        let headers =
            request_headers(model, &context, options, &compat, &thinking, key.as_deref(), thread_session.is_some());
        let preferred_strict = tools_now.iter().any(|tool| {
            strict_tool_limits::prefers_strict(tool)
                && adapter_support::resolve_strict(tool, compat.supports_strict_tools, Some(is_strict_unsupported))
                    == Ok(Some(true))
        });
        let mut sending = Sending {
            relaxed: strict_tool_limits::has_exceeded_strict_tool_limits(options.session_id.as_deref()),
            preferred_strict,
            url: format!("{}/v1/messages?beta=true", model.base_url.trim_end_matches('/')),
            headers,
            context,
            compat,
            thinking,
            oauth,
            thread_session: thread_session.filter(|_| !options.disable_continuation),
            params: Value::Null,
            thread: ThreadStep::None,
            turn_threads_off: false,
        };
        let request = sending.build(model, options).await;
        let decode = Decode {
            heads: typed::DeltaHeads::default(),
            state: BlockState {
                open: OpenBlocks::default(),
                saw_start: false,
                saw_stop: false,
                tools: tools_now,
                oauth,
            },
            // Without a hook that sees every event as a `Value`, delta events take the typed decode.
            typed: options.on_provider_stream_event.is_none(),
            sending,
        };
        Ok(Exchange::new(request, Recording::new(AnthropicDialect), decode))
    }

    /// A thread request's rejection about the thread is resent once in full ([`threads`]); a
    /// rejection of strict tools past Claude's limits is resent once with the preferring tools
    /// non-strict (`strict_tool_limits`), rebuilt (and threaded) anew.
    async fn resend(
        &self,
        decode: &mut Decode,
        dialect: &Recording<AnthropicDialect>,
        _failure: &Failure,
        cx: &mut Cx<'_>,
    ) -> Result<Option<http::Request>, Stop> {
        let sending = &mut decode.sending;
        let Some(rejection) = dialect.take() else { return Ok(None) };
        if sending.thread == ThreadStep::Sent {
            if let Some((fallback, diagnostic)) = threads::fallback(&rejection) {
                // Recorded before the resend, so a failed resend keeps it.
                cx.out.metadata_mut().diagnostics.get_or_insert_with(Vec::new).push(diagnostic);
                return Ok(Some(match fallback {
                    threads::Fallback::NewThread => {
                        sending.thread = ThreadStep::Resent;
                        sending.request(&threads::create(&sending.params))
                    }
                    threads::Fallback::WithoutThread => {
                        sending.thread = ThreadStep::None;
                        sending.turn_threads_off = true;
                        sending.request(&sending.params)
                    }
                }));
            }
        }
        if !rejection.is_anthropic_strict_limit() || sending.relaxed || !sending.preferred_strict {
            return Ok(None);
        }
        sending.relaxed = true;
        strict_tool_limits::mark_strict_tool_limits_exceeded(cx.options.session_id.as_deref());
        let diagnostic = strict_tool_limits::fallback_diagnostic("anthropic_strict_tools_fallback", &rejection.message);
        cx.out.metadata_mut().diagnostics.get_or_insert_with(Vec::new).push(diagnostic);
        Ok(Some(sending.build(cx.model, cx.options).await))
    }

    fn accept(&self, decode: &mut Decode, _response: &reqwest::Response) -> Result<(), Stop> {
        let sending = &decode.sending;
        if let Some(session) = sending.thread_session.as_deref().filter(|_| sending.turn_threads_off) {
            threads::turn_off(session);
        }
        Ok(())
    }
}

/// The headers of every request of one stream.
fn request_headers(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
    compat: &Compat,
    thinking: &Thinking,
    key: Option<&str>,
    message_threads: bool,
) -> Vec<(String, String)> {
    let oauth = key.is_some_and(is_oauth_token) && model.provider != "github-copilot";
    let mut base: Vec<(String, Option<String>)> = vec![
        ("accept".into(), Some("application/json".into())),
        ("content-type".into(), Some("application/json".into())),
        ("anthropic-version".into(), Some("2023-06-01".into())),
        ("anthropic-dangerous-direct-browser-access".into(), Some("true".into())),
    ];
    if oauth || model.provider == "github-copilot" {
        if let Some(key) = key {
            base.push(("authorization".into(), Some(format!("Bearer {key}"))));
        }
        if oauth {
            base.push(("user-agent".into(), Some(format!("claude-cli/{CLAUDE_CODE_VERSION}"))));
            base.push(("x-app".into(), Some("cli".into())));
        }
    } else if let Some(key) = key {
        base.push(("x-api-key".into(), Some(key.to_owned())));
    }
    let mut affinity = Vec::new();
    if let Some(session) = options.session_id.clone().filter(|_| cache_retention(options) != CacheRetention::None) {
        if compat.send_session_affinity_headers && !oauth {
            let name = if compat.session_affinity_format.as_deref() == Some("openrouter") {
                "x-session-id"
            } else {
                "x-session-affinity"
            };
            affinity.push((name.to_owned(), Some(session)));
        }
    }
    let mut headers = adapter_support::merge_headers(&[
        adapter_support::identity_headers(model, options),
        base,
        affinity,
        adapter_support::model_headers(model),
        adapter_support::copilot_headers(model, context.messages()),
        adapter_support::option_headers(options),
    ]);
    headers.retain(|(name, _)| !name.eq_ignore_ascii_case("anthropic-beta"));
    if let Some(features) =
        beta_features(model, context, options, compat, thinking, oauth, message_threads).filter(|f| !f.is_empty())
    {
        headers.push(("anthropic-beta".into(), features.join(",")));
    }
    headers
}

/// What the requests of one stream are built from: the first and a resend.
struct Sending {
    /// Tools that prefer strict sampling go non-strict (`strict_tool_limits`).
    relaxed: bool,
    /// Some current tool that prefers strict sampling is sent strict.
    preferred_strict: bool,
    url: String,
    headers: Vec<(String, String)>,
    context: TranscriptContext,
    compat: Compat,
    thinking: Thinking,
    oauth: bool,
    /// The session whose requests continue threads (`None`: threads do not apply, or the
    /// request disables continuation).
    thread_session: Option<String>,
    /// The full request last built: what a thread rejection resends and a reply records.
    params: Value,
    /// Where the thread request stands.
    thread: ThreadStep,
    /// The request now in flight was resent without `thread`: once accepted, threads go off
    /// for the session.
    turn_threads_off: bool,
}

/// Where the thread request of a stream stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ThreadStep {
    /// The request in flight carries no `thread`.
    None,
    /// It carries one; a rejection about the thread is resent once.
    Sent,
    /// It is that resend, as a new thread.
    Resent,
}

impl Sending {
    /// Builds the request anew (`on_payload` sees each build) and, where threads apply, as a
    /// thread request.
    async fn build(&mut self, model: &Model, options: &StreamOptions) -> http::Request {
        let params = if self.relaxed {
            let relaxed = strict_tool_limits::without_preferred_strict(&self.context);
            build_params(model, &relaxed, options, &self.compat, &self.thinking, self.oauth)
        } else {
            build_params(model, &self.context, options, &self.compat, &self.thinking, self.oauth)
        };
        let mut params = adapter_support::apply_on_payload(options, model, params).await;
        if let Some(map) = params.as_object_mut() {
            map.insert("stream".into(), json!(true));
        }
        self.turn_threads_off = false;
        let thread = self.thread_session.as_deref().and_then(|session| threads::prepare(model, session, &params));
        self.thread = if thread.is_some() { ThreadStep::Sent } else { ThreadStep::None };
        let request = self.request(thread.as_ref().unwrap_or(&params));
        self.params = params;
        request
    }

    fn request(&self, body: &Value) -> http::Request {
        http::Request {
            url: self.url.clone(),
            headers: self.headers.clone(),
            body: js_json::stringify(body).into_bytes(),
        }
    }

    /// After a clean reply to a thread request: where the session's next request continues.
    /// A reply a fallback model gave is not stored by the server and cannot be continued.
    fn record(&self, model: &Model, reply: &pi_types::AssistantMessage) {
        let (Some(session), Some(reply_id)) = (self.thread_session.as_deref(), reply.response_id.as_deref()) else {
            return;
        };
        if self.thread == ThreadStep::None || reply.response_model.is_some() {
            return;
        }
        // Converted as the next request will convert it, keeping only the assistant message
        // (the transform adds placeholder results for trailing tool calls).
        let normalize = |id: &str, _: &Model, _: &pi_types::AssistantMessage| take_units(&sanitize_id(id), 64);
        let transformed =
            transform_messages(&[Message::Assistant(std::sync::Arc::new(reply.clone()))], model, Some(&normalize));
        let conversion = Conversion {
            oauth: self.oauth,
            control: None,
            allow_empty_signature: self.compat.allow_empty_signature,
            managed_provider: None,
            tool_definitions: None,
        };
        let (messages, _) = convert_messages(&transformed, &conversion);
        let reply_messages =
            messages.into_iter().filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"));
        threads::record(model, session, &self.params, reply_id, reply_messages.collect());
    }
}

impl Decoder for Decode {
    type Framing = Sse;

    async fn event<'e>(&mut self, sse: SseEventRef<'e>, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        Sse: 'e,
    {
        let state = &mut self.state;
        let name = sse.event.as_deref().unwrap_or_default();
        if name == "error" {
            return Err(Stop::error(sse.data.into_owned()));
        }
        if !matches!(
            name,
            "message_start"
                | "message_delta"
                | "message_stop"
                | "content_block_start"
                | "content_block_delta"
                | "content_block_stop"
        ) {
            return Ok(Flow::Continue);
        }
        let event = js_json::parse_with_repair(&sse.data).map_err(|message| {
            let raw: Vec<_> = sse.raw().collect();
            Stop::error(format!(
                "Could not parse Anthropic SSE event {name}: {message}; data={}; raw={}",
                sse.data,
                raw.join("\\n")
            ))
        })?;
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => state.saw_start = true,
            Some("message_stop") => state.saw_stop = true,
            _ => {}
        }
        adapter_support::on_event(cx.options, cx.model, &event).await;
        state.handle(cx.model, &event, cx.out).await?;
        // `message_stop` ends the protocol: nothing after it is read or waited for.
        Ok(if state.saw_stop { Flow::End } else { Flow::Continue })
    }

    fn delta<'c>(&mut self, sse: &SseEventRef<'_>, cx: &'c mut Cx<'_>) -> Option<Handover<'c, Result<Flow, Stop>>> {
        if !self.typed || sse.event.as_deref() != Some("content_block_delta") {
            return None;
        }
        let delta = typed::decode_delta(&sse.data, &mut self.heads)?;
        if &*delta.kind != "content_block_delta" {
            return None;
        }
        let (content_index, payload, text) = self.state.delta(&delta)?;
        Some(apply_delta(cx.out, content_index, payload, text))
    }

    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        if self.state.saw_start && !self.state.saw_stop {
            return Err(Stop::error("Anthropic stream ended before message_stop"));
        }
        driver::tail(cx, "Anthropic stream ended without a stop reason")?;
        self.sending.record(cx.model, cx.out.message());
        Ok(())
    }
}

/// The decoding state of one response, and what a resend of its request is built from.
pub(crate) struct Decode {
    heads: typed::DeltaHeads,
    state: BlockState,
    typed: bool,
    sending: Sending,
}

struct BlockState {
    open: OpenBlocks,
    saw_start: bool,
    saw_stop: bool,
    tools: Vec<Tool>,
    oauth: bool,
}

/// The content index of each open block, by the stream's block index. A server may open any
/// number of blocks, so they are hashed; the block the deltas go to is remembered, so that a
/// run of deltas to one block (the usual stream) hashes nothing.
#[derive(Default)]
struct OpenBlocks {
    by_index: HashMap<i64, usize>,
    /// The last block looked up or opened: (stream index, content index).
    last: Option<(i64, usize)>,
}

impl OpenBlocks {
    fn insert(&mut self, index: i64, content_index: usize) {
        self.by_index.insert(index, content_index);
        self.last = Some((index, content_index));
    }

    #[inline]
    fn get(&mut self, index: i64) -> Option<usize> {
        match self.last {
            Some((last, content_index)) if last == index => Some(content_index),
            _ => {
                let content_index = *self.by_index.get(&index)?;
                self.last = Some((index, content_index));
                Some(content_index)
            }
        }
    }

    fn remove(&mut self, index: i64) -> Option<usize> {
        if self.last.is_some_and(|(last, _)| last == index) {
            self.last = None;
        }
        self.by_index.remove(&index)
    }
}

fn count(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_f64).filter(|f| *f > 0.0).map_or(0, |f| f as u64)
}

fn present_count(value: Option<&Value>) -> Option<u64> {
    value.filter(|v| !v.is_null()).map(|v| v.as_f64().map_or(0, |f| f.max(0.0) as u64))
}

fn map_stop_reason(reason: &str, details: Option<&Value>) -> Result<(StopReason, Option<String>), Stop> {
    Ok(match reason {
        "end_turn" | "pause_turn" | "stop_sequence" => (StopReason::Stop, None),
        "max_tokens" => (StopReason::Length, None),
        "tool_use" => (StopReason::ToolUse, None),
        "refusal" => (
            StopReason::Error,
            Some(
                details
                    .and_then(|d| d.get("explanation"))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .unwrap_or("The model refused to complete the request")
                    .to_owned(),
            ),
        ),
        "sensitive" => (StopReason::Error, Some("Provider stopped with: sensitive".to_owned())),
        other => return Err(Stop::error(format!("Unhandled stop reason: {other}"))),
    })
}

/// A `content_block_delta` carrying `payload` (its kind: text, thinking, arguments or a
/// signature) into the block at `content_index`: the change made at once, its event in the
/// hand-over. A delta of another kind than its block is ignored (the builder refuses it), as the
/// reference ignores it; a signature is appended without an event.
#[inline]
fn apply_delta<'o>(
    out: &'o mut AssistantMessageBuilder,
    content_index: usize,
    payload: Option<AnthropicPayload>,
    text: &str,
) -> Handover<'o, Result<Flow, Stop>> {
    fn read_on(_refused: Result<(), pi_types::TypesError>) -> Result<Flow, Stop> {
        Ok(Flow::Continue)
    }
    match payload {
        Some(AnthropicPayload::Text) => out.text_delta(content_index, text).map(read_on),
        Some(AnthropicPayload::Thinking) => out.thinking_delta(content_index, text).map(read_on),
        Some(AnthropicPayload::PartialJson) => out.tool_call_delta(content_index, text).map(read_on),
        Some(AnthropicPayload::Signature) => {
            if let Ok(block) = out.thinking_mut(content_index) {
                block.thinking_signature.get_or_insert_with(String::new).push_str(text);
            }
            Handover::ready(Ok(Flow::Continue))
        }
        None => Handover::ready(Ok(Flow::Continue)),
    }
}

impl BlockState {
    /// What a decoded `content_block_delta` applies: its block's content index, its payload
    /// kind and text; `None` for a block that is not open.
    fn delta<'e>(
        &mut self,
        event: &'e typed::AnthropicDelta<'_>,
    ) -> Option<(usize, Option<AnthropicPayload>, &'e str)> {
        let index = event.index.map_or(-1, |typed::Int(i)| i);
        let content_index = self.open.get(index)?;
        let delta = event.delta.as_ref().map(|typed::Obj(d)| d);
        let payload = delta.and_then(|d| d.kind.as_deref()).and_then(AnthropicPayload::of_kind);
        let text = delta.zip(payload).and_then(|(d, payload)| d.member(payload));
        Some((content_index, payload, text.unwrap_or_default()))
    }

    async fn handle(&mut self, model: &Model, event: &Value, out: &mut AssistantMessageBuilder) -> Result<(), Stop> {
        let index = event.get("index").and_then(Value::as_f64).map(|f| f as i64).unwrap_or(-1);
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                let message = event.get("message").cloned().unwrap_or(Value::Null);
                let mut m = out.metadata_mut();
                m.response_id = (message.get("id").and_then(Value::as_str).map(str::to_owned)).map(Into::into);
                let response_model = message.get("model").and_then(Value::as_str);
                if response_model != Some(model.id.as_str()) {
                    m.response_model = (response_model.map(str::to_owned)).map(Into::into);
                }
                let usage = message.get("usage").cloned().unwrap_or(Value::Null);
                m.usage.input = count(usage.get("input_tokens"));
                m.usage.output = count(usage.get("output_tokens"));
                m.usage.cache_read = count(usage.get("cache_read_input_tokens"));
                m.usage.cache_write = count(usage.get("cache_creation_input_tokens"));
                m.usage.cache_write_1h =
                    Some(count(usage.get("cache_creation").and_then(|c| c.get("ephemeral_1h_input_tokens"))));
                m.usage.total_tokens = m.usage.token_sum();
                let usage_model = fallback_model(model, response_model);
                crate::cost::calculate_cost(&usage_model, &mut m.usage);
            }
            Some("content_block_start") => {
                let block = event.get("content_block").cloned().unwrap_or(Value::Null);
                let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
                if kind == "fallback" {
                    if !out.message().content.is_empty() {
                        return Err(Stop::error("Anthropic performed an unsupported mid-output model fallback"));
                    }
                    return Ok(());
                }
                let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                let content = match kind {
                    "text" => AssistantContent::Text(TextContent { text: str_of("text"), text_signature: None }),
                    "thinking" => AssistantContent::Thinking(ThinkingContent {
                        thinking: str_of("thinking"),
                        thinking_signature: Some(str_of("signature")),
                        redacted: None,
                    }),
                    "redacted_thinking" => AssistantContent::Thinking(ThinkingContent {
                        thinking: "[Reasoning redacted]".into(),
                        thinking_signature: block.get("data").and_then(Value::as_str).map(str::to_owned),
                        redacted: Some(true),
                    }),
                    "tool_use" => {
                        let raw_name = str_of("name");
                        let name = if self.oauth { from_claude_code_name(&raw_name, &self.tools) } else { raw_name };
                        let arguments = block.get("input").and_then(Value::as_object).cloned().unwrap_or_default();
                        AssistantContent::ToolCall(ToolCall {
                            id: str_of("id").into(),
                            name: name.into(),
                            arguments,
                            ..Default::default()
                        })
                    }
                    _ => return Ok(()),
                };
                let content_index = out.start_block(content).await;
                self.open.insert(index, content_index);
            }
            Some("content_block_delta") => {
                let Some(content_index) = self.open.get(index) else { return Ok(()) };
                let delta = event.get("delta");
                let payload =
                    delta.and_then(|d| d.get("type")).and_then(Value::as_str).and_then(AnthropicPayload::of_kind);
                let text = delta.zip(payload).and_then(|(d, payload)| d.get(payload.name())).and_then(Value::as_str);
                apply_delta(out, content_index, payload, text.unwrap_or("")).await?;
            }
            Some("content_block_stop") => {
                let Some(content_index) = self.open.remove(index) else { return Ok(()) };
                out.end_block(content_index).await?;
            }
            Some("message_delta") => {
                let delta = event.get("delta");
                if let Some(reason) = delta.and_then(|d| d.get("stop_reason")).filter(|r| js_json::truthy(r)) {
                    let reason = reason.as_str().map_or_else(|| js_json::stringify(reason), str::to_owned);
                    let (stop, error) = map_stop_reason(&reason, delta.and_then(|d| d.get("stop_details")))?;
                    let mut m = out.metadata_mut();
                    m.raw_stop_reason = Some(reason.into());
                    m.stop_reason = stop;
                    if let Some(error) = error {
                        m.error_message = Some(error.into());
                    }
                }
                let mut m = out.metadata_mut();
                if let Some(usage) = event.get("usage").filter(|u| js_json::truthy(u)) {
                    if let Some(v) = present_count(usage.get("input_tokens")) {
                        m.usage.input = v;
                    }
                    if let Some(v) = present_count(usage.get("output_tokens")) {
                        m.usage.output = v;
                    }
                    if let Some(v) = present_count(usage.get("cache_read_input_tokens")) {
                        m.usage.cache_read = v;
                    }
                    if let Some(v) = present_count(usage.get("cache_creation_input_tokens")) {
                        m.usage.cache_write = v;
                    }
                    if let Some(v) =
                        present_count(usage.get("cache_creation").and_then(|c| c.get("ephemeral_1h_input_tokens")))
                    {
                        m.usage.cache_write_1h = Some(v);
                    }
                    if let Some(v) =
                        present_count(usage.get("output_tokens_details").and_then(|d| d.get("thinking_tokens")))
                    {
                        m.usage.reasoning = Some(v);
                    }
                }
                m.usage.total_tokens = m.usage.token_sum();
                let response_model = m.response_model.clone();
                let usage_model = fallback_model(model, response_model.as_deref().or(Some(model.id.as_str())));
                crate::cost::calculate_cost(&usage_model, &mut m.usage);
                if model.provider == "openrouter" || model.base_url.contains("openrouter.ai") {
                    if let Some(cost) = event.get("usage").and_then(|u| u.get("cost")).and_then(Value::as_f64) {
                        m.usage.cost.total = cost;
                        m.usage.cost.total_from_provider = Some(true);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The model whose prices apply to a response (an allowed fallback model's when it answered).
fn fallback_model(model: &Model, response_model: Option<&str>) -> Model {
    let Some(response_model) = response_model.filter(|r| *r != model.id) else { return model.clone() };
    let cost = model
        .compat
        .as_ref()
        .and_then(|c| c.get("allowedFallbackModels"))
        .and_then(Value::as_array)
        .and_then(|list| {
            list.iter().find(|f| {
                f.get("provider").and_then(Value::as_str) == Some(model.provider.as_str())
                    && f.get("model").and_then(Value::as_str) == Some(response_model)
            })
        })
        .and_then(|f| f.get("cost"))
        .and_then(|c| serde_json::from_value::<pi_types::ModelCost>(c.clone()).ok());
    match cost {
        Some(cost) => Model { id: response_model.into(), cost, ..model.clone() },
        None => model.clone(),
    }
}

fn to_claude_code_name(name: &str) -> String {
    CLAUDE_CODE_TOOLS.iter().find(|t| t.eq_ignore_ascii_case(name)).map_or_else(|| name.to_owned(), |t| (*t).to_owned())
}

fn from_claude_code_name(name: &str, tools: &[Tool]) -> String {
    tools
        .iter()
        .find(|t| t.name.to_lowercase() == name.to_lowercase())
        .map_or_else(|| name.to_owned(), |t| t.name.clone())
}

// ---------------------------------------------------------------------------------------------
// Request building
// ---------------------------------------------------------------------------------------------

fn is_strict_unsupported(key: &str, value: &Value) -> bool {
    const UNSUPPORTED: [&str; 11] = [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "maxItems",
        "uniqueItems",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
    ];
    const FORMATS: [&str; 10] =
        ["date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"];
    if UNSUPPORTED.contains(&key) {
        return true;
    }
    if key == "minItems" {
        return !(value.as_f64() == Some(0.0) || value.as_f64() == Some(1.0));
    }
    if key == "format" {
        return !value.as_str().is_some_and(|f| FORMATS.contains(&f));
    }
    false
}

fn convert_tools(tools: &[Tool], oauth: bool, compat: &Compat, cache_control: Option<&Value>) -> Vec<Value> {
    let last = tools.len().saturating_sub(1);
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            let strict =
                adapter_support::resolve_strict(tool, compat.supports_strict_tools, Some(is_strict_unsupported))
                    .unwrap_or(None);
            let parameters = if strict == Some(true) {
                adapter_support::make_strict_json_schema(&tool.parameters, Some(is_strict_unsupported))
                    .unwrap_or_else(|_| (*tool.parameters).clone())
            } else {
                (*tool.parameters).clone()
            };
            let mut legacy = Map::new();
            legacy.insert("type".into(), json!("object"));
            legacy.insert("properties".into(), parameters.get("properties").cloned().unwrap_or_else(|| json!({})));
            legacy.insert("required".into(), parameters.get("required").cloned().unwrap_or_else(|| json!([])));
            for key in ["additionalProperties", "$schema", "$defs", "definitions"] {
                if let Some(v) = parameters.get(key) {
                    legacy.insert(key.into(), v.clone());
                }
            }
            let input_schema = if strict == Some(true) {
                let mut merged = parameters.as_object().cloned().unwrap_or_default();
                for (k, v) in legacy {
                    merged.insert(k, v);
                }
                merged
            } else {
                legacy
            };
            let mut definition = Map::new();
            definition
                .insert("name".into(), json!(if oauth { to_claude_code_name(&tool.name) } else { tool.name.clone() }));
            definition.insert("description".into(), json!(tool.description));
            if compat.supports_eager_tool_input_streaming {
                definition.insert("eager_input_streaming".into(), json!(true));
            }
            if strict == Some(true) {
                definition.insert("strict".into(), json!(true));
            }
            definition.insert("input_schema".into(), Value::Object(input_schema));
            if let Some(control) = cache_control.filter(|_| index == last) {
                definition.insert("cache_control".into(), control.clone());
            }
            Value::Object(definition)
        })
        .collect()
}

fn build_params(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
    compat: &Compat,
    thinking: &Thinking,
    oauth: bool,
) -> Value {
    let control = cache_control(options, compat);
    let initial = initial_system_message(context.messages());
    let initial_text = initial.map(system_message_text).unwrap_or_default();
    let normalize = |id: &str, _: &Model, _: &pi_types::AssistantMessage| take_units(&sanitize_id(id), 64);
    let transformed = transform_messages(context.messages(), model, Some(&normalize));
    let conversation = if initial.is_some() && !transformed.is_empty() { &transformed[1..] } else { &transformed[..] };
    let native = native_tool_changes(context, compat);
    let effort_messages = effort_messages(model, compat, thinking);
    let active_effort = thinking.effort.clone().unwrap_or_else(|| "high".to_owned());
    let tool_converter = |tools: &[Tool]| convert_tools(tools, oauth, compat, None);
    let conversion = Conversion {
        oauth,
        control: control.as_ref(),
        allow_empty_signature: compat.allow_empty_signature,
        managed_provider: effort_messages.then_some(model.provider.as_str()),
        tool_definitions: if native { Some(&tool_converter) } else { None },
    };
    let (messages, levels) = convert_messages(conversation, &conversion);
    let messages = if effort_messages { insert_effort_messages(messages, &levels, &active_effort) } else { messages };

    let mut params = Map::new();
    params.insert("model".into(), json!(model.id));
    params.insert("messages".into(), Value::Array(messages));
    params.insert("max_tokens".into(), json!(thinking.max_tokens));
    params.insert("stream".into(), json!(true));
    let with_control = |text: &str| {
        let mut block = json!({"type": "text", "text": text});
        if let Some(c) = &control {
            block["cache_control"] = c.clone();
        }
        block
    };
    if oauth {
        let mut system = vec![with_control("You are Claude Code, Anthropic's official CLI for Claude.")];
        if !initial_text.is_empty() {
            system.push(with_control(&initial_text));
        }
        params.insert("system".into(), Value::Array(system));
    } else if !initial_text.is_empty() {
        params.insert("system".into(), json!([with_control(&initial_text)]));
    }
    if let Some(t) = options
        .temperature
        .filter(|_| thinking.enabled != Some(true) && !compat.supports_mid_convo_effort && compat.supports_temperature)
    {
        params.insert("temperature".into(), json!(t));
    }
    let tool_control = control.as_ref().filter(|_| compat.supports_cache_control_on_tools);
    if native {
        let initial_tools = initial.and_then(|m| m.tools_added.clone()).unwrap_or_default();
        let mut tools = convert_tools(&initial_tools, oauth, compat, tool_control);
        tools.push(json!({
            "name": "__pi_deferred_placeholder__",
            "description": "Reserved placeholder. Never available. Never call this.",
            "input_schema": {"type": "object", "properties": {}, "required": []},
            "defer_loading": true,
        }));
        params.insert("tools".into(), Value::Array(tools));
    } else {
        let tools = current_tools(context.messages());
        if !tools.is_empty() {
            params.insert("tools".into(), Value::Array(convert_tools(&tools, oauth, compat, tool_control)));
        }
    }
    if thinking_disabled(model, thinking) {
        params.insert("thinking".into(), json!({"type": "disabled"}));
    } else if effort_messages {
        params.insert(
            "thinking".into(),
            json!({"type": "adaptive", "display": thinking.display.as_str(), "block_binding": {"prefix_mismatch_behavior": "drop_block"}}),
        );
        params.insert("output_config".into(), json!({"effort": "low"}));
    } else if model.reasoning && thinking.enabled == Some(true) {
        let display = thinking.display.as_str();
        if compat.force_adaptive_thinking {
            params.insert("thinking".into(), json!({"type": "adaptive", "display": display}));
            if let Some(effort) = &thinking.effort {
                params.insert("output_config".into(), json!({"effort": effort}));
            }
        } else {
            let budget = thinking.budget.filter(|b| *b > 0).unwrap_or(1024);
            params.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget, "display": display}));
        }
    }
    if let Some(user_id) = options.metadata.as_ref().and_then(|m| m.get("user_id")).and_then(Value::as_str) {
        params.insert("metadata".into(), json!({"user_id": user_id}));
    }
    if let Some(choice) = &thinking.tool_choice {
        params.insert("tool_choice".into(), choice.clone());
    }
    if let Some(fallbacks) = model
        .compat
        .as_ref()
        .and_then(|c| c.get("allowedFallbackModels"))
        .and_then(Value::as_array)
        .filter(|f| !f.is_empty())
    {
        let list: Vec<Value> =
            fallbacks.iter().map(|f| json!({"model": f.get("model").cloned().unwrap_or(Value::Null)})).collect();
        params.insert("fallbacks".into(), Value::Array(list));
    }
    Value::Object(params)
}

fn image_block(image: &ImageContent) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}})
}

fn tool_result_content(content: &[UserContent]) -> Value {
    let has_images = content.iter().any(|c| matches!(c, UserContent::Image(_)));
    if !has_images {
        return json!(pi_types::content_text(content, "\n"));
    }
    let mut blocks: Vec<Value> = content
        .iter()
        .map(|c| match c {
            UserContent::Text(t) => json!({"type": "text", "text": t.text}),
            UserContent::Image(img) => image_block(img),
        })
        .collect();
    if !blocks.iter().any(|b| b["type"] == "text") {
        blocks.insert(0, json!({"type": "text", "text": "(see attached image)"}));
    }
    Value::Array(blocks)
}

fn tool_result(message: &ToolResultMessage, content: &[UserContent]) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": tool_result_content(content),
        "is_error": message.is_error,
    })
}

/// Converts tool declarations into Anthropic tool definitions.
type ToolDefinitions<'a> = dyn Fn(&[Tool]) -> Vec<Value> + 'a;

/// Options of the message conversion.
struct Conversion<'a> {
    oauth: bool,
    control: Option<&'a Value>,
    allow_empty_signature: bool,
    /// The provider whose assistant messages carry reply effort levels (managed effort).
    managed_provider: Option<&'a str>,
    /// Converts tool definitions for `tool_addition` blocks (native tool changes only).
    tool_definitions: Option<&'a ToolDefinitions<'a>>,
}

fn is_effort(value: &str) -> bool {
    matches!(value, "low" | "medium" | "high" | "xhigh" | "max")
}

/// Reply effort markers: one before each assistant message with a known level, one at the end.
fn insert_effort_messages(messages: Vec<Value>, levels: &HashMap<usize, String>, active: &str) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + levels.len() + 1);
    for (index, message) in messages.into_iter().enumerate() {
        if let Some(level) = levels.get(&index) {
            out.push(json!({"role": "system", "content": [], "output_config": {"effort": level}}));
        }
        out.push(message);
    }
    out.push(json!({"role": "system", "content": [], "output_config": {"effort": active}}));
    out
}

fn convert_messages(messages: &[Message], conversion: &Conversion<'_>) -> (Vec<Value>, HashMap<usize, String>) {
    let oauth = conversion.oauth;
    let control = conversion.control;
    let allow_empty_signature = conversion.allow_empty_signature;
    let mut levels: HashMap<usize, String> = HashMap::new();
    let mut params: Vec<Value> = Vec::new();
    let mut pending_system: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::System(system) => {
                let text = render_system_message_update(system);
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                if let Some(convert) = conversion.tool_definitions {
                    let added = system.tools_added.clone().unwrap_or_default();
                    for removed in system.tools_removed.iter().flatten() {
                        if added.iter().any(|t| t.name == removed.name) {
                            continue;
                        }
                        let name = if oauth { to_claude_code_name(&removed.name) } else { removed.name.clone() };
                        blocks.push(json!({"type": "tool_removal", "tool": {"type": "tool_reference", "name": name}}));
                    }
                    for definition in convert(&added) {
                        blocks.push(json!({"type": "tool_addition", "tool": {"type": "tool_definition", "definition": definition}}));
                    }
                }
                if !blocks.is_empty() {
                    pending_system.push(object([("role", "system".into()), ("content", Value::Array(blocks))]));
                }
            }
            Message::User(user) => match &user.content {
                UserMessageContent::Text(text) => {
                    if !js_json::js_trim(text).is_empty() {
                        params.push(json!({"role": "user", "content": text}));
                    }
                }
                UserMessageContent::Blocks(blocks) => {
                    let converted: Vec<Value> = blocks
                        .iter()
                        .filter(|b| !matches!(b, UserContent::Text(t) if js_json::js_trim(&t.text).is_empty()))
                        .map(|b| match b {
                            UserContent::Text(t) => json!({"type": "text", "text": t.text}),
                            UserContent::Image(img) => image_block(img),
                        })
                        .collect();
                    if !converted.is_empty() {
                        params.push(object([("role", "user".into()), ("content", Value::Array(converted))]));
                    }
                }
            },
            Message::Assistant(assistant) => {
                let mut blocks = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) => {
                            if !js_json::js_trim(&t.text).is_empty() {
                                blocks.push(json!({"type": "text", "text": t.text}));
                            }
                        }
                        AssistantContent::Thinking(t) => {
                            if t.redacted == Some(true) {
                                blocks.push(json!({"type": "redacted_thinking", "data": t.thinking_signature}));
                                continue;
                            }
                            let signature = t.thinking_signature.as_deref().filter(|s| !js_json::js_trim(s).is_empty());
                            if js_json::js_trim(&t.thinking).is_empty() && signature.is_none() {
                                continue;
                            }
                            match signature {
                                Some(sig) => {
                                    blocks.push(json!({"type": "thinking", "thinking": t.thinking, "signature": sig}))
                                }
                                None if allow_empty_signature => {
                                    blocks.push(json!({"type": "thinking", "thinking": t.thinking, "signature": ""}));
                                }
                                None => blocks.push(json!({"type": "text", "text": t.thinking})),
                            }
                        }
                        AssistantContent::ToolCall(call) => {
                            let name = if oauth { to_claude_code_name(&call.name) } else { call.name.to_string() };
                            blocks.push(
                                json!({"type": "tool_use", "id": call.id, "name": name, "input": call.arguments}),
                            );
                        }
                    }
                }
                if !blocks.is_empty() {
                    params.append(&mut pending_system);
                    if let Some(provider) = conversion.managed_provider {
                        let level = assistant.provider_thinking_level.as_deref().filter(|l| is_effort(l));
                        if let (true, Some(level)) = (assistant.api == API && assistant.provider == provider, level) {
                            levels.insert(params.len(), level.to_owned());
                        }
                    }
                    params.push(object([("role", "assistant".into()), ("content", Value::Array(blocks))]));
                }
            }
            Message::ToolResult(_) => {
                let mut results = Vec::new();
                let mut error_images = Vec::new();
                let mut j = i;
                while let Some(Message::ToolResult(result)) = messages.get(j) {
                    match split_error_tool_result_images(result) {
                        Some((content, caption, images)) => {
                            results.push(tool_result(result, &content));
                            error_images.push(json!({"type": "text", "text": caption}));
                            for image in images {
                                if let UserContent::Image(img) = image {
                                    error_images.push(image_block(&img));
                                }
                            }
                        }
                        None => results.push(tool_result(result, &result.content)),
                    }
                    j += 1;
                }
                i = j;
                results.extend(error_images);
                params.push(object([("role", "user".into()), ("content", Value::Array(results))]));
                continue;
            }
        }
        i += 1;
    }
    params.append(&mut pending_system);
    if let (Some(control), Some(last)) = (control, params.last_mut()) {
        let role = last.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "user" || role == "system" {
            match last.get_mut("content") {
                Some(Value::Array(blocks)) => {
                    if let Some(block) = blocks.last_mut() {
                        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
                        if matches!(kind, "text" | "image" | "tool_result" | "tool_addition" | "tool_removal") {
                            block["cache_control"] = control.clone();
                        }
                    }
                }
                Some(Value::String(text)) => {
                    let text = std::mem::take(text);
                    last["content"] = json!([{"type": "text", "text": text, "cache_control": control}]);
                }
                _ => {}
            }
        }
    }
    (params, levels)
}

#[cfg(test)]
mod tests {
    use super::OpenBlocks;

    #[test]
    fn open_blocks_remember_the_last_block_without_outliving_it() {
        let mut open = OpenBlocks::default();
        open.insert(0, 0);
        open.insert(1, 1);
        assert_eq!((open.get(0), open.get(0), open.get(1)), (Some(0), Some(0), Some(1)));
        assert_eq!(open.remove(1), Some(1));
        assert_eq!((open.get(1), open.get(0)), (None, Some(0)));
        // A block opened again at a stream index gets its new content index.
        open.insert(0, 2);
        assert_eq!(open.get(0), Some(2));
        assert_eq!((open.remove(0), open.get(0), open.remove(0)), (Some(2), None, None));
    }
}
