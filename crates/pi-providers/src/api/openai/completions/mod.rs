//! OpenAI Chat Completions (`openai-completions`) and the many servers that speak it.
//!
//! Compatibility switches ([`Compat`]) are detected from the provider id and base URL as
//! the reference does and can be overridden per model through `Model::compat`.

use std::collections::HashMap;
use std::sync::Arc;

use pi_types::transcript::{
    render_system_message_update, resolve_transcript, resolve_transcript_tools, system_message_text,
    TranscriptToolSupport,
};
use pi_types::{
    AssistantContent, AssistantMessageBuilder, AssistantMessageEventStream, Handover, InputModality, Message, Model,
    StopReason, StreamFn, StreamOptions, TextContent, ThinkingBudgets, ThinkingContent, ThinkingLevel, Tool, ToolCall,
    TranscriptContext, TypesError, Usage, UserContent, UserMessageContent,
};
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use crate::api::driver::{self, Call, Cancel, Cx, Decoder, Exchange, Flow, OnCancel, Secrets, Sse, WireApi};
use crate::api::openai;
use crate::api::openai::grammar::{self, CustomInput, CUSTOM_INPUT_PROPERTY};
use crate::api::own_options;
use crate::api::request_options;
use crate::api::support::{self as adapter_support, Stop};
use crate::api::transform::{sanitize_id, take_units, transform_messages};
use crate::api::typed;
use crate::js_json;
use crate::transport::http::{self, ApiError, ApiErrorKind, Dialect};
use crate::transport::sse::SseEventRef;

/// The API id.
pub const API: &str = "openai-completions";

mod options;
pub use options::{CompletionsReasoningEffort, CompletionsToolChoice, OpenAICompletionsOptions};

/// Compatibility switches of an OpenAI-compatible server (`model.compat` overrides the
/// values detected from provider id and base URL).
#[derive(Clone, Debug, PartialEq)]
pub struct Compat {
    /// Send `store: false`.
    pub supports_store: bool,
    /// Use the `developer` role for instructions of reasoning models.
    pub supports_developer_role: bool,
    /// Send `reasoning_effort`.
    pub supports_reasoning_effort: bool,
    /// Send `stream_options.include_usage`.
    pub supports_usage_in_streaming: bool,
    /// The server sends `finish_reason` (else a missing one is not an error).
    pub supports_finish_reason: bool,
    /// `max_completion_tokens` or `max_tokens`.
    pub max_tokens_field: String,
    /// Tool results carry `name`.
    pub requires_tool_result_name: bool,
    /// A synthetic assistant turn must follow tool results before a user message.
    pub requires_assistant_after_tool_result: bool,
    /// Assistant content is `""` instead of `null`.
    pub requires_non_null_assistant_content: bool,
    /// `tools: []` when the history has tool calls but no tools are declared.
    pub requires_tools_with_tool_history: bool,
    /// Replay thinking as plain text.
    pub requires_thinking_as_text: bool,
    /// Every assistant message of a reasoning model carries `reasoning_content`.
    pub requires_reasoning_content_on_assistant_messages: bool,
    /// How thinking is requested: `openai`, `deepseek`, `zai`, `together`, `openrouter`,
    /// `ant-ling`, `qwen`, `qwen-chat-template`, `chat-template`, `baseten`, `string-thinking`.
    pub thinking_format: String,
    /// Values of `chat_template_kwargs` (`chat-template` format).
    pub chat_template_kwargs: Map<String, Value>,
    /// Values of `chat_template_args` (`baseten` format).
    pub chat_template_args: Map<String, Value>,
    /// Send `tool_stream: true` (z.ai).
    pub zai_tool_stream: bool,
    /// Send a `thinking_token_budget`.
    pub supports_thinking_token_budget: bool,
    /// Field name of the thinking budget.
    pub thinking_token_budget_field: Option<String>,
    /// Tools may be `strict`.
    pub supports_strict_mode: bool,
    /// Grammar tools are declared as custom tools with their grammar (see the `grammar` module
    /// of `api::openai`).
    pub supports_openai_grammar_tools: bool,
    /// System messages may appear mid-conversation.
    pub supports_mid_convo_system_messages: bool,
    /// Tools may be added mid-conversation.
    pub supports_mid_convo_tool_additions: bool,
    /// `anthropic` to add Anthropic `cache_control` markers.
    pub cache_control_format: Option<String>,
    /// Send session affinity headers.
    pub send_session_affinity_headers: bool,
    /// `openai` or `openrouter`.
    pub session_affinity_format: String,
    /// Long prompt-cache retention is accepted.
    pub supports_long_cache_retention: bool,
    /// `auto`, `enabled` or `disabled`.
    pub prompt_cache_key_mode: Option<String>,
    /// vLLM `priority`.
    pub vllm_priority: Option<Value>,
}

fn compat_bool(compat: Option<&Map<String, Value>>, key: &str, default: bool) -> bool {
    compat.and_then(|c| c.get(key)).and_then(Value::as_bool).unwrap_or(default)
}

fn compat_str(compat: Option<&Map<String, Value>>, key: &str) -> Option<String> {
    compat.and_then(|c| c.get(key)).and_then(Value::as_str).map(str::to_owned)
}

impl Compat {
    /// Detect the switches from the provider id and base URL, then apply `model.compat`.
    pub fn for_model(model: &Model) -> Self {
        let provider = model.provider.as_str();
        let url = model.base_url.as_str();
        let is_zai =
            matches!(provider, "zai" | "zai-coding-cn") || url.contains("api.z.ai") || url.contains("open.bigmodel.cn");
        let is_together = provider == "together" || url.contains("api.together.ai") || url.contains("api.together.xyz");
        let is_moonshot = matches!(provider, "moonshotai" | "moonshotai-cn") || url.contains("api.moonshot.");
        let is_openrouter = provider == "openrouter" || url.contains("openrouter.ai");
        let is_cf_workers = provider == "cloudflare-workers-ai" || url.contains("api.cloudflare.com");
        let is_cf_gateway = provider == "cloudflare-ai-gateway" || url.contains("gateway.ai.cloudflare.com");
        let is_nvidia = provider == "nvidia" || url.contains("integrate.api.nvidia.com");
        let is_ant_ling = provider == "ant-ling" || url.contains("api.ant-ling.com");
        let is_cerebras = provider == "cerebras" || url.contains("cerebras.ai");
        let is_deepseek = provider == "deepseek" || url.to_lowercase().contains("deepseek.com");
        let is_grok = provider == "xai" || url.contains("api.x.ai");
        let is_non_standard = is_nvidia
            || is_cerebras
            || is_grok
            || is_together
            || url.contains("chutes.ai")
            || is_deepseek
            || is_zai
            || is_moonshot
            || provider == "opencode"
            || url.contains("opencode.ai")
            || is_cf_workers
            || is_cf_gateway
            || is_ant_ling;
        let use_max_tokens = url.contains("chutes.ai")
            || is_deepseek
            || is_moonshot
            || is_cf_gateway
            || is_together
            || is_nvidia
            || is_ant_ling
            || is_zai;
        let is_openai = provider == "openai" || url.contains("api.openai.com");
        let thinking_format = if is_deepseek {
            "deepseek"
        } else if is_zai {
            "zai"
        } else if is_together {
            "together"
        } else if is_ant_ling {
            "ant-ling"
        } else if is_openrouter {
            "openrouter"
        } else {
            "openai"
        };
        let c = model.compat.as_ref();
        let map = |key: &str| c.and_then(|c| c.get(key)).and_then(Value::as_object).cloned().unwrap_or_default();
        Self {
            supports_store: compat_bool(c, "supportsStore", !is_non_standard),
            supports_developer_role: compat_bool(c, "supportsDeveloperRole", is_openai),
            supports_reasoning_effort: compat_bool(
                c,
                "supportsReasoningEffort",
                !is_grok && !is_zai && !is_moonshot && !is_together && !is_cf_gateway && !is_nvidia && !is_ant_ling,
            ),
            supports_usage_in_streaming: compat_bool(c, "supportsUsageInStreaming", true),
            supports_finish_reason: compat_bool(c, "supportsFinishReason", true),
            max_tokens_field: compat_str(c, "maxTokensField")
                .unwrap_or_else(|| if use_max_tokens { "max_tokens" } else { "max_completion_tokens" }.to_owned()),
            requires_tool_result_name: compat_bool(c, "requiresToolResultName", false),
            requires_assistant_after_tool_result: compat_bool(c, "requiresAssistantAfterToolResult", false),
            requires_non_null_assistant_content: compat_bool(c, "requiresNonNullAssistantContent", false),
            requires_tools_with_tool_history: compat_bool(c, "requiresToolsWithToolHistory", false),
            requires_thinking_as_text: compat_bool(c, "requiresThinkingAsText", false),
            requires_reasoning_content_on_assistant_messages: compat_bool(
                c,
                "requiresReasoningContentOnAssistantMessages",
                is_deepseek,
            ),
            thinking_format: compat_str(c, "thinkingFormat").unwrap_or_else(|| thinking_format.to_owned()),
            chat_template_kwargs: map("chatTemplateKwargs"),
            chat_template_args: map("chatTemplateArgs"),
            zai_tool_stream: compat_bool(c, "zaiToolStream", false),
            supports_thinking_token_budget: compat_bool(c, "supportsThinkingTokenBudget", false),
            thinking_token_budget_field: compat_str(c, "thinkingTokenBudgetField"),
            supports_strict_mode: compat_bool(c, "supportsStrictMode", false),
            supports_openai_grammar_tools: compat_bool(c, "supportsOpenAIGrammarTools", false),
            supports_mid_convo_system_messages: compat_bool(c, "supportsMidConvoSystemMessages", false),
            supports_mid_convo_tool_additions: compat_bool(c, "supportsMidConvoToolAdditions", false),
            cache_control_format: compat_str(c, "cacheControlFormat").or_else(|| {
                (provider == "openrouter" && model.id.starts_with("anthropic/")).then(|| "anthropic".to_owned())
            }),
            send_session_affinity_headers: compat_bool(c, "sendSessionAffinityHeaders", is_openrouter),
            session_affinity_format: compat_str(c, "sessionAffinityFormat")
                .unwrap_or_else(|| if is_openrouter { "openrouter" } else { "openai" }.to_owned()),
            supports_long_cache_retention: compat_bool(
                c,
                "supportsLongCacheRetention",
                !(is_together || is_cf_workers || is_cf_gateway || is_nvidia || is_ant_ling),
            ),
            prompt_cache_key_mode: compat_str(c, "promptCacheKeyMode"),
            vllm_priority: c.and_then(|c| c.get("vllmPriority")).cloned(),
        }
    }
}

/// The Chat Completions adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenAICompletions;

impl StreamFn for OpenAICompletions {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(Wire, model, context, options)
    }
}

/// The request body the adapter sends for a context.
/// Public so that an application can see what its model and options put on the wire without a
/// server (this crate's own tests of the request fields use it, and cannot reach private items);
/// the body is the one sent when no `on_payload` hook changes it.
pub fn build_request_body(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Value {
    let compat = Compat::for_model(model);
    let context = resolve_transcript(context.clone(), compat.supports_mid_convo_system_messages);
    let request = Resolved::new(model, &context, options);
    let grammar = grammar::request_inputs(&context, compat.supports_openai_grammar_tools).unwrap_or_default();
    build_params(model, &context, options, &compat, &request, &grammar)
}

/// The request's options: `streamSimple`'s clamped max tokens and effort with the
/// [`OpenAICompletionsOptions`] that are set applied over them, or those options alone.
struct Resolved {
    max_tokens: u64,
    effort: Option<ThinkingLevel>,
    budgets: Option<Arc<ThinkingBudgets>>,
    tool_choice: Option<Value>,
}

impl Resolved {
    fn new(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Self {
        let api = own_options::lookup::<OpenAICompletionsOptions>(model, options);
        let (max_tokens, effort) = match api.is_own() {
            true => (options.max_tokens.unwrap_or(0), None),
            false => (
                request_options::base_max_tokens(model, context, options.max_tokens),
                options
                    .reasoning
                    .filter(|l| *l != ThinkingLevel::Off)
                    .map(|l| request_options::clamp_thinking_level(model, l))
                    .filter(|l| *l != ThinkingLevel::Off),
            ),
        };
        let tool_choice = match api.field(|api| &api.tool_choice) {
            Some(choice) => Some(choice.to_wire()),
            None => options.tool_choice.and_then(|choice| serde_json::to_value(choice).ok()),
        };
        Self {
            max_tokens,
            effort: api.field(|api| &api.reasoning_effort).map(CompletionsReasoningEffort::level).or(effort),
            budgets: api.field(|api| &api.thinking_budgets).or_else(|| options.thinking_budgets.clone()),
            tool_choice,
        }
    }
}

/// Stream with the API's own options, as the reference's `stream()`: nothing is derived from
/// `options.reasoning`, and the max-tokens field is sent only when `options.max_tokens` is set.
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: OpenAICompletionsOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&OpenAICompletions, model, context, options, api)
}

fn cache_retention(options: &StreamOptions) -> pi_types::CacheRetention {
    options.cache_retention.unwrap_or_else(|| {
        if std::env::var("PI_CACHE_RETENTION").as_deref() == Ok("long") {
            pi_types::CacheRetention::Long
        } else {
            pi_types::CacheRetention::Short
        }
    })
}

#[derive(Default)]
struct StreamState {
    reasoning_details: Option<Vec<Value>>,
}

impl StreamState {
    /// The reasoning details as the thinking blocks' signature, if any arrived.
    fn signature(&self) -> Option<String> {
        self.reasoning_details.as_ref().map(|details| js_json::stringify(&Value::Array(details.clone())))
    }

    fn apply_reasoning_details(&self, out: &mut AssistantMessageBuilder) {
        let Some(text) = self.signature() else { return };
        for index in 0..out.message().content.len() {
            if let Ok(thinking) = out.thinking_mut(index) {
                thinking.thinking_signature = Some(text.clone());
            }
        }
    }
}

pub(crate) struct CompletionsDialect;

impl Dialect for CompletionsDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        openai_status_error(status, headers, body)
    }

    fn format(&self, error: &ApiError) -> String {
        http::format_provider_error(error, None)
    }
}

/// The OpenAI SDK's error for a non-2xx response.
pub(crate) fn openai_status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
    let text = String::from_utf8_lossy(body).into_owned();
    let parsed = js_json::parse(&text).ok();
    let message_text = if parsed.is_some() { None } else { Some(text.as_str()) };
    let normalized = match parsed {
        Some(Value::Object(map)) if map.get("error").is_none_or(Value::is_null) => Some(json!({ "error": map })),
        Some(Value::Array(items)) => Some(json!({ "error": items })),
        other => other,
    };
    let error = normalized.as_ref().and_then(|n| n.get("error")).filter(|e| !e.is_null());
    let message = http::sdk_make_message(Some(status), error, message_text);
    let body = http::plain_non_empty_object(error).and_then(|e| http::normalize_body(&js_json::stringify(e)));
    ApiError { kind: ApiErrorKind::Status, status: Some(status), headers: Some(headers.clone()), message, body }
}

/// An `APIError` raised from a stream payload (`data.error` or `event: error`).
pub(crate) fn openai_stream_error(error: &Value) -> ApiError {
    let message = http::sdk_make_message(None, Some(error), None);
    let body = http::plain_non_empty_object(Some(error)).and_then(|e| http::normalize_body(&js_json::stringify(e)));
    ApiError { kind: ApiErrorKind::Other, status: None, headers: None, message, body }
}

fn api_key(model: &Model, options: &StreamOptions) -> Result<String, Stop> {
    if let Some(key) = options.api_key.as_deref().filter(|k| !k.is_empty()) {
        return Ok(key.to_owned());
    }
    if adapter_support::has_header(options, "authorization")
        || adapter_support::has_header(options, "cf-aig-authorization")
    {
        return Ok("unused".to_owned());
    }
    Err(Stop::error(format!("No API key for provider: {}", model.provider)))
}

/// The decoding state of one response.
pub(crate) struct Decode {
    chunks: Chunks,
    heads: typed::ChunkHeads,
    state: StreamState,
    /// Without a hook that sees every chunk as a `Value`, delta chunks take the typed decode.
    typed: bool,
    supports_finish_reason: bool,
}

/// The wire API behind [`OpenAICompletions`] (crate-private: its decoding types stay private).
struct Wire;

impl WireApi for Wire {
    type Dialect = CompletionsDialect;
    type Decoder = Decode;
    const CANCEL: Cancel = Cancel { read: OnCancel::Drain, before_event: None, after_event: Some(OnCancel::Drain) };

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, .. } = call;
        let key = api_key(model, options)?;
        let compat = Compat::for_model(model);
        let context = resolve_transcript(context, compat.supports_mid_convo_system_messages);
        let resolved = Resolved::new(model, &context, options);
        let grammar = grammar::request_inputs(&context, compat.supports_openai_grammar_tools).map_err(Stop::error)?;
        let params = build_params(model, &context, options, &compat, &resolved, &grammar);
        let params = adapter_support::apply_on_payload(options, model, params).await;

        let retention = cache_retention(options);
        let session = options
            .session_id
            .clone()
            .filter(|_| retention != pi_types::CacheRetention::None && compat.send_session_affinity_headers);
        let session = openai::session_headers(session, &compat.session_affinity_format, "session_id", true);
        let request = openai::bearer_request(model, options, &context, &key, "chat/completions", session, &params);
        let decode = Decode {
            chunks: Chunks { grammar, ..Chunks::default() },
            heads: typed::ChunkHeads::default(),
            state: StreamState::default(),
            typed: options.on_provider_stream_event.is_none(),
            supports_finish_reason: compat.supports_finish_reason,
        };
        Ok(Exchange::new(request, CompletionsDialect, decode))
    }

    async fn finish(
        &self,
        _model: &Model,
        decode: Option<Decode>,
        mut out: AssistantMessageBuilder,
        result: Result<(), Stop>,
        _secrets: &Secrets,
    ) {
        if let (Err(_), Some(decode)) = (&result, decode) {
            decode.state.apply_reasoning_details(&mut out);
        }
        adapter_support::finish(out, result).await;
    }
}

impl Decoder for Decode {
    type Framing = Sse;

    async fn event<'e>(&mut self, event: SseEventRef<'e>, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        Sse: 'e,
    {
        if event.data == "[DONE]" {
            return Ok(Flow::End);
        }
        let is_error = event.event.as_deref() == Some("error");
        let fast = match self.typed && !is_error {
            true => typed::decode_chunk(&event.data, &mut self.heads),
            false => None,
        };
        let handled = match &fast {
            Some(chunk) => self.chunks.handle_typed(cx.model, chunk, cx.out).await?,
            _ => false,
        };
        if !handled {
            let Ok(data) = js_json::parse(&event.data) else {
                return Err(Stop::error("Error reading response: malformed server-sent event JSON."));
            };
            if is_error {
                let error = data.get("error").filter(|e| !e.is_null()).unwrap_or(&data);
                return Err(stream_error(error));
            }
            if let Some(error) = data.get("error").filter(|e| js_json::truthy(e)) {
                return Err(stream_error(error));
            }
            adapter_support::on_event(cx.options, cx.model, &data).await;
            self.chunks.handle(cx.model, &data, cx.out, &mut self.state).await?;
        }
        Ok(Flow::Continue)
    }

    fn delta<'c>(&mut self, event: &SseEventRef<'_>, cx: &'c mut Cx<'_>) -> Option<Handover<'c, Result<Flow, Stop>>> {
        if !self.typed || event.event.as_deref() == Some("error") || event.data == "[DONE]" {
            return None;
        }
        let chunk = typed::decode_chunk(&event.data, &mut self.heads)?;
        let handover = self.chunks.delta(cx.model, &chunk, cx.out)?;
        Some(handover.map(|result| result.map(|()| Flow::Continue).map_err(Stop::from)))
    }

    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        let Decode { chunks, state, supports_finish_reason, .. } = self;
        let out = &mut *cx.out;
        chunks.finish_blocks(out, state).await?;
        if cx.cancelled() {
            return Err(Stop::aborted("Request was aborted"));
        }
        let out = &mut *cx.out;
        let stop = out.message().stop_reason;
        if !chunks.has_finish_reason && !*supports_finish_reason {
            let has_tool = out.message().tool_calls().next().is_some();
            out.metadata_mut().stop_reason = if has_tool { StopReason::ToolUse } else { StopReason::Stop };
        } else if stop == StopReason::Aborted {
            return Err(Stop::error("Request was aborted"));
        }
        if let Some(native) = &chunks.native_finish_reason {
            flag_openrouter_empty_stop(out, native);
        }
        if out.message().stop_reason == StopReason::Error {
            let message = out
                .message()
                .error_message
                .clone()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "Provider returned an error stop reason".to_owned().into());
            return Err(Stop::error(message));
        }
        if (*supports_finish_reason && !chunks.has_finish_reason) || out.message().stop_reason == StopReason::Pending {
            return Err(Stop::error("Stream ended without finish_reason"));
        }
        Ok(())
    }
}

fn stream_error(error: &Value) -> Stop {
    let api_error = openai_stream_error(error);
    let mut message = http::format_provider_error(&api_error, None);
    if let Some(raw) = error.get("metadata").and_then(|m| m.get("raw")).filter(|r| js_json::truthy(r)) {
        let raw = match raw {
            Value::String(s) => s.clone(),
            other => js_json::stringify(other),
        };
        if !message.contains(&raw) {
            message.push('\n');
            message.push_str(&raw);
        }
    }
    Stop::error(message)
}

struct ToolState {
    stream_index: Option<i64>,
}

#[derive(Default)]
struct Chunks {
    text_block: Option<usize>,
    thinking_block: Option<usize>,
    has_finish_reason: bool,
    /// OpenRouter's `native_finish_reason`, the last non-empty one (a trailing chunk that
    /// repeats `finish_reason` without it keeps it).
    native_finish_reason: Option<String>,
    by_index: HashMap<i64, usize>,
    /// The entry of `by_index` looked up or written last: a call's deltas all name one index,
    /// so one comparison replaces a SipHash lookup per delta.
    last_by_index: Option<(i64, usize)>,
    by_id: HashMap<String, usize>,
    tools: HashMap<usize, ToolState>,
    /// The input property of each grammar tool of the request, by name.
    grammar: HashMap<String, String>,
    /// The freeform input of each custom tool call, by block.
    custom: HashMap<usize, CustomInput>,
}

impl Chunks {
    /// The block of the call with stream index `i`.
    fn block_at(&mut self, i: i64) -> Option<usize> {
        match self.last_by_index {
            Some((last, block)) if last == i => Some(block),
            _ => {
                let block = self.by_index.get(&i).copied()?;
                self.last_by_index = Some((i, block));
                Some(block)
            }
        }
    }

    fn set_block_at(&mut self, i: i64, block: usize) {
        self.by_index.insert(i, block);
        self.last_by_index = Some((i, block));
    }
}

fn num(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_f64).filter(|f| *f > 0.0).map_or(0, |f| f as u64)
}

/// `a ?? b`: the first value that is present and not null.
fn coalesce<'a>(values: &[Option<&'a Value>]) -> Option<&'a Value> {
    values.iter().flatten().copied().find(|v| !v.is_null())
}

fn parse_chunk_usage(raw: &Value, model: &Model) -> Usage {
    let prompt = num(raw.get("prompt_tokens"));
    let details = raw.get("prompt_tokens_details");
    let cache_read = coalesce(&[
        details.and_then(|d| d.get("cached_tokens")),
        raw.get("prompt_cache_hit_tokens"),
        raw.get("cached_tokens"),
    ])
    .and_then(Value::as_f64)
    .map_or(0, |f| f.max(0.0) as u64);
    let cache_write = num(details.and_then(|d| d.get("cache_write_tokens")));
    let input = prompt.saturating_sub(cache_read).saturating_sub(cache_write);
    let output = num(raw.get("completion_tokens"));
    let reasoning = {
        let from_details = num(raw.get("completion_tokens_details").and_then(|d| d.get("reasoning_tokens")));
        if from_details > 0 {
            from_details
        } else {
            num(raw.get("reasoning_tokens"))
        }
    };
    let mut usage = Usage { input, output, cache_read, cache_write, reasoning: Some(reasoning), ..Default::default() };
    usage.total_tokens = usage.token_sum();
    crate::cost::calculate_cost(model, &mut usage);
    if model.provider == "openrouter" || model.base_url.contains("openrouter.ai") {
        if let Some(cost) = raw.get("cost").and_then(Value::as_f64) {
            usage.cost.total = cost;
            usage.cost.total_from_provider = Some(true);
        }
    }
    usage
}

/// The first non-empty reasoning text of a typed delta, with the field it came in.
fn typed_reasoning<'d>(delta: &'d typed::CompletionsDelta<'_>) -> Option<(&'static str, &'d str)> {
    [
        ("reasoning_content", &delta.reasoning_content),
        ("reasoning", &delta.reasoning),
        ("reasoning_text", &delta.reasoning_text),
    ]
    .into_iter()
    .find_map(|(field, text)| text.as_deref().filter(|t| !t.is_empty()).map(|t| (field, t)))
}

/// Which block a delta goes to.
#[derive(Clone, Copy)]
enum BlockKind {
    Thinking,
    Text,
    ToolCall,
}

/// A chunk's `id` and `model`: the response id until one that is not empty was seen, the
/// response model when it is another than the requested one and none was seen yet. Looked at
/// before the message is edited: every chunk repeats them, and an edit tells each follower of
/// the message to compare its metadata.
fn record_response_ids(
    out: &mut AssistantMessageBuilder,
    model: &Model,
    id: Option<&str>,
    response_model: Option<&str>,
) {
    let message = out.message();
    let id = id.filter(|_| message.response_id.as_deref().is_none_or(str::is_empty));
    let response_model = response_model.filter(|response_model| {
        !response_model.is_empty()
            && *response_model != model.id
            && message.response_model.as_deref().is_none_or(str::is_empty)
    });
    if id.is_none() && response_model.is_none() {
        return;
    }
    let mut m = out.metadata_mut();
    if let Some(id) = id {
        m.response_id = Some(id.to_owned().into());
    }
    if let Some(response_model) = response_model {
        m.response_model = Some(response_model.to_owned().into());
    }
}

/// OpenRouter, by provider id (which survives a base URL override) or by host.
fn is_openrouter(model: &Model) -> bool {
    model.provider == "openrouter" || model.base_url.contains("openrouter.ai")
}

/// Native reasons OpenRouter treats as a clean stop, lower case. An allowlist, as the
/// reference's: a missing clean reason costs a retry of an empty turn, a missing failure reason
/// would end a failed turn silently. Gemini's `OTHER` and DeepSeek's
/// `insufficient_system_resource` are failures and stay out.
const CLEAN_STOP_NATIVE_REASONS: [&str; 9] =
    ["stop", "end_turn", "stop_sequence", "eos", "complete", "completed", "pause_turn", "compaction", "end_of_stream"];

/// OpenRouter reports upstream failures it has no case for as `stop`; only the native reason
/// names them. A `stop` without visible output (text or tool calls; thinking does not count)
/// whose native reason is not a clean stop becomes a retryable error.
fn flag_openrouter_empty_stop(out: &mut AssistantMessageBuilder, native: &str) {
    let message = out.message();
    if message.stop_reason != StopReason::Stop || CLEAN_STOP_NATIVE_REASONS.contains(&native.to_lowercase().as_str()) {
        return;
    }
    let visible = message.content.iter().any(|block| match block {
        AssistantContent::ToolCall(_) => true,
        AssistantContent::Text(text) => !js_json::js_trim(&text.text).is_empty(),
        _ => false,
    });
    if visible {
        return;
    }
    let mut m = out.metadata_mut();
    m.stop_reason = StopReason::Error;
    m.error_message = Some(format!("OpenRouter returned an empty response (native_finish_reason: {native})").into());
}

fn map_stop_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" | "end" => (StopReason::Stop, None),
        "length" => (StopReason::Length, None),
        "function_call" | "tool_calls" => (StopReason::ToolUse, None),
        other => (StopReason::Error, Some(format!("Provider finish_reason: {other}"))),
    }
}

fn is_reasoning_detail(detail: &Value) -> bool {
    let Some(map) = detail.as_object() else { return false };
    let id_ok = map.get("id").is_none_or(|v| v.is_null() || v.is_string());
    let format_ok = map.get("format").is_none_or(Value::is_string);
    let index_ok = map.get("index").is_none_or(Value::is_number);
    if !(id_ok && format_ok && index_ok) {
        return false;
    }
    match map.get("type").and_then(Value::as_str) {
        Some("reasoning.summary") => map.get("summary").is_some_and(Value::is_string),
        Some("reasoning.encrypted") => map.get("data").is_some_and(Value::is_string),
        Some("reasoning.text") => {
            map.get("text").is_some_and(Value::is_string)
                && map.get("signature").is_none_or(|v| v.is_null() || v.is_string())
        }
        _ => false,
    }
}

fn append_reasoning_detail(details: &mut Vec<Value>, detail: &Value) {
    let kind = detail.get("type").and_then(Value::as_str);
    if let Some(last) = details.last_mut().and_then(Value::as_object_mut) {
        let last_kind = last.get("type").and_then(Value::as_str).map(str::to_owned);
        let field = match (kind, last_kind.as_deref()) {
            (Some("reasoning.text"), Some("reasoning.text")) => Some("text"),
            (Some("reasoning.summary"), Some("reasoning.summary")) => Some("summary"),
            _ => None,
        };
        if let Some(field) = field {
            let addition = detail.get(field).and_then(Value::as_str).unwrap_or("");
            let merged = format!("{}{addition}", last.get(field).and_then(Value::as_str).unwrap_or(""));
            last.insert(field.to_owned(), Value::String(merged));
            if field == "text" && !last.get("signature").is_some_and(js_json::truthy) {
                if let Some(sig) = detail.get("signature") {
                    last.insert("signature".into(), sig.clone());
                }
            }
            if last.get("id").is_none_or(Value::is_null) {
                if let Some(id) = detail.get("id") {
                    last.insert("id".into(), id.clone());
                }
            }
            if !last.get("format").is_some_and(js_json::truthy) {
                if let Some(format) = detail.get("format") {
                    last.insert("format".into(), format.clone());
                }
            }
            if last.get("index").is_none_or(Value::is_null) {
                if let Some(index) = detail.get("index") {
                    last.insert("index".into(), index.clone());
                }
            }
            return;
        }
    }
    details.push(detail.clone());
}

/// The non-empty texts of a typed `thinking` content part: its `thinking` is a list of text
/// parts (`[{"type": "text", "text": ...}]`) or a string.
fn thinking_part_texts(thinking: Option<&Value>) -> Vec<&str> {
    match thinking {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str).is_none_or(|t| t == "text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|t| !t.is_empty())
    .collect()
}

impl Chunks {
    async fn ensure_thinking(&mut self, out: &mut AssistantMessageBuilder, signature: &str) -> usize {
        if let Some(index) = self.thinking_block {
            return index;
        }
        let block =
            ThinkingContent { thinking: String::new(), thinking_signature: Some(signature.to_owned()), redacted: None };
        let index = out.start_block(AssistantContent::Thinking(block)).await;
        self.thinking_block = Some(index);
        index
    }

    async fn handle(
        &mut self,
        model: &Model,
        chunk: &Value,
        out: &mut AssistantMessageBuilder,
        state: &mut StreamState,
    ) -> Result<(), Stop> {
        if !chunk.is_object() {
            return Ok(());
        }
        let field = |key: &str| chunk.get(key).and_then(Value::as_str);
        record_response_ids(out, model, field("id"), field("model"));
        let chunk_usage = chunk.get("usage").filter(|u| js_json::truthy(u));
        if let Some(usage) = chunk_usage {
            out.metadata_mut().usage = parse_chunk_usage(usage, model);
        }
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
            return Ok(());
        };
        if !js_json::truthy(choice) {
            return Ok(());
        }
        if chunk_usage.is_none() {
            if let Some(usage) = choice.get("usage").filter(|u| js_json::truthy(u)) {
                out.metadata_mut().usage = parse_chunk_usage(usage, model);
            }
        }
        if is_openrouter(model) {
            if let Some(native) = choice.get("native_finish_reason").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                self.native_finish_reason = Some(native.to_owned());
            }
        }
        if let Some(reason) = choice.get("finish_reason").filter(|r| js_json::truthy(r)) {
            let reason_text = match reason {
                Value::String(s) => s.clone(),
                other => js_json::stringify(other),
            };
            let (stop, error) = map_stop_reason(&reason_text);
            let mut m = out.metadata_mut();
            m.stop_reason = stop;
            if let Some(error) = error {
                m.error_message = Some(error.into());
            }
            match &self.native_finish_reason {
                // A native reason that differs is recorded as `<finish>.<native>`, and appended to
                // an error (not replacing it: the retry classifier matches the finish text).
                Some(native) if *native != reason_text => {
                    m.raw_stop_reason = Some(format!("{reason_text}.{native}").into());
                    if m.stop_reason == StopReason::Error {
                        if let Some(error) = m.error_message.as_mut().filter(|e| !e.is_empty()) {
                            *error = format!("{error} (native_finish_reason: {native})").into();
                        }
                    }
                }
                _ => m.raw_stop_reason = Some(reason_text.into()),
            }
            self.has_finish_reason = true;
        }
        let Some(delta) = choice.get("delta").filter(|d| js_json::truthy(d)) else { return Ok(()) };

        let reasoning_field = ["reasoning_content", "reasoning", "reasoning_text"]
            .into_iter()
            .find(|field| delta.get(*field).and_then(Value::as_str).is_some_and(|s| !s.is_empty()));
        if let Some(field) = reasoning_field {
            let text = delta.get(field).and_then(Value::as_str).unwrap_or_default();
            let signature =
                if model.provider == "opencode-go" && field == "reasoning" { "reasoning_content" } else { field };
            let index = self.ensure_thinking(out, signature).await;
            out.thinking_delta(index, text).await?;
        }
        if let Some(details) = delta.get("reasoning_details").and_then(Value::as_array) {
            for detail in details {
                if !is_reasoning_detail(detail) {
                    continue;
                }
                self.ensure_thinking(out, "").await;
                append_reasoning_detail(state.reasoning_details.get_or_insert_with(Vec::new), detail);
            }
        }
        match delta.get("content") {
            Some(Value::String(content)) if !content.is_empty() => self.text(out, content).await?,
            // Typed parts (Mistral's reasoning models): thinking parts go to the thinking block,
            // text parts to the text block. The reference appends the array itself to the text
            // (`[object Object]`); see docs/providers/real-streams.md.
            Some(Value::Array(parts)) => {
                for part in parts {
                    match part.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(text) = part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                                self.text(out, text).await?;
                            }
                        }
                        Some("thinking") => {
                            for text in thinking_part_texts(part.get("thinking")) {
                                let index = self.ensure_thinking(out, "").await;
                                out.thinking_delta(index, text).await?;
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.tool_call(call, out).await?;
            }
        }
        Ok(())
    }

    /// A typed chunk whose one change is a delta to a block already open (most chunks of a
    /// stream), made at once with its response ids ([`Decoder::delta`]); `None`, with nothing
    /// changed, for any other chunk.
    fn delta<'o>(
        &mut self,
        model: &Model,
        chunk: &typed::CompletionsChunk<'_>,
        out: &'o mut AssistantMessageBuilder,
    ) -> Option<Handover<'o, Result<(), TypesError>>> {
        let (typed::Obj(choice),) = chunk.choices.as_ref()?;
        let typed::Obj(delta) = choice.delta.as_ref()?;
        let content = delta.content.as_deref().filter(|c| !c.is_empty());
        let (index, text, kind) = match (typed_reasoning(delta), content, &delta.tool_calls) {
            (Some((_, text)), None, None) => (self.thinking_block?, text, BlockKind::Thinking),
            (None, Some(text), None) => (self.text_block?, text, BlockKind::Text),
            (None, None, Some((typed::Obj(call),))) => {
                // Only more arguments of a call already open: no id or name to record.
                let typed::Obj(function) = call.function.as_ref()?;
                let arguments = function.arguments.as_deref().filter(|a| !a.is_empty())?;
                if call.id.as_deref().is_some_and(|id| !id.is_empty())
                    || function.name.as_deref().is_some_and(|name| !name.is_empty())
                {
                    return None;
                }
                let index = self.block_at(call.index.map(|typed::Int(i)| i)?)?;
                if self.custom.contains_key(&index) {
                    return None;
                }
                (index, arguments, BlockKind::ToolCall)
            }
            _ => return None,
        };
        record_response_ids(out, model, chunk.id.as_deref(), chunk.model.as_deref());
        Some(match kind {
            BlockKind::Thinking => out.thinking_delta(index, text),
            BlockKind::Text => out.text_delta(index, text),
            BlockKind::ToolCall => out.tool_call_delta(index, text),
        })
    }

    /// A chunk from its typed decode (which declines usage, a finish reason and reasoning
    /// details), as [`Chunks::handle`] takes it; `Ok(false)` for a chunk without a choice,
    /// before anything of it was applied.
    async fn handle_typed(
        &mut self,
        model: &Model,
        chunk: &typed::CompletionsChunk<'_>,
        out: &mut AssistantMessageBuilder,
    ) -> Result<bool, Stop> {
        // By reference: the decoded chunk is a few hundred bytes, and each move through a layer
        // here would copy it.
        let Some((typed::Obj(choice),)) = &chunk.choices else { return Ok(false) };
        let delta = choice.delta.as_ref().map(|typed::Obj(d)| d);
        record_response_ids(out, model, chunk.id.as_deref(), chunk.model.as_deref());
        let Some(delta) = delta else { return Ok(true) };
        if let Some((field, text)) = typed_reasoning(delta) {
            let signature =
                if model.provider == "opencode-go" && field == "reasoning" { "reasoning_content" } else { field };
            let index = self.ensure_thinking(out, signature).await;
            out.thinking_delta(index, text).await?;
        }
        if let Some(content) = delta.content.as_deref().filter(|c| !c.is_empty()) {
            self.text(out, content).await?;
        }
        if let Some((typed::Obj(call),)) = &delta.tool_calls {
            let function = call.function.as_ref().map(|typed::Obj(f)| f);
            let name = function.as_ref().and_then(|f| f.name.as_deref()).unwrap_or("");
            let arguments = function.as_ref().and_then(|f| f.arguments.as_deref());
            let stream_index = call.index.map(|typed::Int(i)| i);
            self.tool_call_parts(stream_index, call.id.as_deref(), name, arguments, None, out).await?;
        }
        Ok(true)
    }

    /// Appends `content` to the text block, started on first use.
    async fn text(&mut self, out: &mut AssistantMessageBuilder, content: &str) -> Result<(), Stop> {
        let index = match self.text_block {
            Some(index) => index,
            None => {
                let index = out.start_text().await;
                self.text_block = Some(index);
                index
            }
        };
        out.text_delta(index, content).await?;
        Ok(())
    }

    async fn tool_call(&mut self, call: &Value, out: &mut AssistantMessageBuilder) -> Result<(), Stop> {
        let stream_index = call.get("index").and_then(Value::as_f64).map(|f| f as i64);
        let id = call.get("id").and_then(Value::as_str);
        let function = call.get("function").filter(|f| js_json::truthy(f));
        let custom = call.get("custom").filter(|c| js_json::truthy(c));
        let name = function
            .and_then(|f| f.get("name"))
            .or_else(|| custom.and_then(|c| c.get("name")))
            .and_then(Value::as_str)
            .unwrap_or("");
        let arguments = function.and_then(|f| f.get("arguments")).and_then(Value::as_str);
        // A custom (grammar) tool call: `custom` without `function`.
        let input = custom.filter(|_| function.is_none()).map(|c| c.get("input").and_then(Value::as_str).unwrap_or(""));
        self.tool_call_parts(stream_index, id, name, arguments, input, out).await
    }

    /// One tool call of a delta: its `index`, `id`, `function.name` and `function.arguments`,
    /// or for a custom tool call (`custom_input` set) `custom.name` and `custom.input`.
    async fn tool_call_parts(
        &mut self,
        stream_index: Option<i64>,
        id: Option<&str>,
        name: &str,
        arguments: Option<&str>,
        custom_input: Option<&str>,
        out: &mut AssistantMessageBuilder,
    ) -> Result<(), Stop> {
        let id = id.filter(|s| !s.is_empty()).map(str::to_owned);
        let name = name.to_owned();
        let by_index = stream_index.and_then(|i| self.block_at(i));
        let mut block = by_index;
        if block.is_none() {
            if let Some(id) = &id {
                block = self.by_id.get(id).copied();
            }
        }
        let index = match block {
            Some(index) => index,
            None => {
                let index = match custom_input {
                    // Its arguments show the input as the grammar tool's property, empty so far.
                    Some(_) => {
                        let property = self.grammar.get(&name).map_or(CUSTOM_INPUT_PROPERTY, String::as_str);
                        let mut arguments = Map::new();
                        arguments.insert(property.to_owned(), json!(""));
                        let id = id.clone().unwrap_or_default().into();
                        let call = ToolCall { id, name: name.as_str().into(), arguments, ..Default::default() };
                        let input = CustomInput::new(property);
                        let index = out.start_tool_call_with_arguments(call, "").await;
                        self.custom.insert(index, input);
                        index
                    }
                    None => out.start_tool_call(id.clone().unwrap_or_default(), name.clone()).await,
                };
                self.tools.insert(index, ToolState { stream_index });
                if let Some(i) = stream_index {
                    self.set_block_at(i, index);
                }
                if let Some(id) = &id {
                    self.by_id.insert(id.clone(), index);
                }
                index
            }
        };
        // A block found by its stream index has one already (both are set together).
        if by_index.is_none() {
            if let Some(state) = self.tools.get_mut(&index) {
                if let (Some(i), None) = (stream_index, state.stream_index) {
                    state.stream_index = Some(i);
                    self.set_block_at(i, index);
                }
            }
        }
        if let Some(id) = &id {
            self.by_id.insert(id.clone(), index);
        }
        let arguments = arguments.filter(|a| !a.is_empty());
        {
            let mut block = out.tool_call_mut(index)?;
            if block.id.is_empty() {
                if let Some(id) = &id {
                    block.id = id.as_str().into();
                }
            }
            if block.name.is_empty() && !name.is_empty() {
                block.name = name.into();
            }
        }
        if custom_input.is_some() && !self.custom.contains_key(&index) {
            // A function call that turns out to be a custom one: its arguments start over.
            let property = match out.message().content.get(index) {
                Some(AssistantContent::ToolCall(call)) => self.grammar.get(call.name.as_str()).cloned(),
                _ => None,
            };
            out.replace_tool_call_arguments(index, "").await?;
            self.custom.insert(index, CustomInput::new(property.as_deref().unwrap_or(CUSTOM_INPUT_PROPERTY)));
        }
        let text = match self.custom.get_mut(&index) {
            // Function arguments of a custom call are not its input.
            Some(input) => custom_input.map(|piece| input.append(piece)).transpose()?.flatten(),
            None => arguments.map(str::to_owned),
        };
        match text {
            Some(text) => out.tool_call_delta(index, text).await?,
            None => out.tool_call_changed(index).await?,
        }
        Ok(())
    }

    /// End every block in content order (the thinking blocks signed with the reasoning details).
    async fn finish_blocks(&mut self, out: &mut AssistantMessageBuilder, state: &StreamState) -> Result<(), Stop> {
        let signature = state.signature();
        for index in 0..out.message().content.len() {
            if let (Some(signature), Ok(thinking)) = (&signature, out.thinking_mut(index)) {
                thinking.thinking_signature = Some(signature.clone());
            }
            if let Some(mut input) = self.custom.remove(&index).filter(|_| out.is_open(index)) {
                if let Some(text) = input.close(None)? {
                    out.tool_call_delta(index, text).await?;
                }
                // The arguments are the input itself, as streamed.
                let mut call = match out.message().content.get(index) {
                    Some(AssistantContent::ToolCall(call)) => call.clone(),
                    _ => ToolCall::default(),
                };
                call.arguments = Map::new();
                call.arguments.insert(input.property, Value::String(input.input));
                out.end_tool_call_with(index, call).await?;
            } else if out.is_open(index) {
                out.end_block(index).await?;
            }
        }
        self.tools.clear();
        self.custom.clear();
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Request building
// ---------------------------------------------------------------------------------------------

fn build_params(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
    compat: &Compat,
    resolved: &Resolved,
    grammar: &HashMap<String, String>,
) -> Value {
    let support = if compat.supports_mid_convo_system_messages && compat.supports_mid_convo_tool_additions {
        TranscriptToolSupport::Additions
    } else {
        TranscriptToolSupport::None
    };
    let transcript_tools = resolve_transcript_tools(context.messages(), support);
    let mut messages = convert_messages(model, context, compat, grammar);
    let retention = cache_retention(options);
    let mut params = Map::new();
    params.insert("model".into(), json!(model.id));
    params.insert("messages".into(), Value::Null);
    params.insert("stream".into(), json!(true));
    let key_mode = compat.prompt_cache_key_mode.as_deref().unwrap_or("auto");
    let supports_key = key_mode == "enabled"
        || (key_mode == "auto"
            && (model.base_url.contains("api.openai.com")
                || (retention == pi_types::CacheRetention::Long && compat.supports_long_cache_retention)));
    if retention != pi_types::CacheRetention::None && supports_key {
        if let Some(session) = &options.session_id {
            params.insert("prompt_cache_key".into(), json!(session.chars().take(64).collect::<String>()));
        }
    }
    if retention == pi_types::CacheRetention::Long && compat.supports_long_cache_retention {
        params.insert("prompt_cache_retention".into(), json!("24h"));
    }
    if compat.supports_usage_in_streaming {
        params.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.supports_store {
        params.insert("store".into(), json!(false));
    }
    if resolved.max_tokens > 0 {
        params.insert(compat.max_tokens_field.clone(), json!(resolved.max_tokens));
    }
    if let Some(t) = options.temperature {
        params.insert("temperature".into(), json!(t));
    }
    let mut tools_value: Option<Vec<Value>> = None;
    if !transcript_tools.request_tools.is_empty() {
        tools_value = Some(convert_tools(&transcript_tools.request_tools, compat));
        if compat.zai_tool_stream {
            params.insert("tool_stream".into(), json!(true));
        }
    } else if compat.requires_tools_with_tool_history && has_tool_history(context.messages()) {
        tools_value = Some(Vec::new());
    }
    if compat.cache_control_format.as_deref() == Some("anthropic") && retention != pi_types::CacheRetention::None {
        let mut control = json!({"type": "ephemeral"});
        if retention == pi_types::CacheRetention::Long && compat.supports_long_cache_retention {
            control["ttl"] = json!("1h");
        }
        apply_anthropic_cache_control(&mut messages, tools_value.as_mut(), &control);
    }
    if let Some(tools) = tools_value {
        params.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = &resolved.tool_choice {
        params.insert("tool_choice".into(), choice.clone());
    }
    if let Some(priority) = &compat.vllm_priority {
        params.insert("priority".into(), priority.clone());
    }
    params.insert("messages".into(), Value::Array(messages));
    apply_thinking(model, compat, resolved, &mut params);

    if let Some(c) = &model.compat {
        if let Some(routing) = c.get("openRouterRouting").filter(|r| js_json::truthy(r)) {
            params.insert("provider".into(), routing.clone());
        }
        if let Some(routing) = c.get("vercelGatewayRouting").filter(|r| js_json::truthy(r)) {
            let mut gateway = Map::new();
            for key in ["only", "order"] {
                if let Some(v) = routing.get(key).filter(|v| js_json::truthy(v)) {
                    gateway.insert(key.into(), v.clone());
                }
            }
            if !gateway.is_empty() {
                params.insert("providerOptions".into(), json!({ "gateway": gateway }));
            }
        }
    }
    let level = resolved.effort.unwrap_or(ThinkingLevel::Off);
    if let Some(sampling) = request_options::resolve_sampling_params(model, level, options.sampling_params.as_deref()) {
        for (k, v) in sampling {
            params.insert(k, v);
        }
    }
    Value::Object(params)
}

/// The reasoning/thinking request fields of every thinking format.
fn apply_thinking(model: &Model, compat: &Compat, resolved: &Resolved, params: &mut Map<String, Value>) {
    let effort = resolved.effort;
    let budget_field = compat
        .thinking_token_budget_field
        .clone()
        .or_else(|| compat.supports_thinking_token_budget.then(|| "thinking_token_budget".to_owned()));
    let budget = match effort {
        Some(level) if model.reasoning => {
            let ceiling = ["max_tokens", "max_completion_tokens"]
                .iter()
                .find_map(|k| params.get(*k).and_then(Value::as_u64))
                .unwrap_or(model.max_tokens);
            let budget = request_options::clamp_thinking_budget_to_answer_room(
                request_options::thinking_budget_for_level(level, resolved.budgets.as_deref()),
                ceiling,
            );
            (budget > 0).then_some(budget)
        }
        _ => None,
    };
    let mapped_or = |level: ThinkingLevel| request_options::mapped_or_level(model, level);
    let off_null = request_options::off_is_null(model);
    let off_value = request_options::mapped_level(model, ThinkingLevel::Off).flatten().map(str::to_owned);
    let format = compat.thinking_format.as_str();
    if !model.reasoning {
        // Only the budget field below could apply, and it needs a reasoning model.
    } else if format == "zai" {
        params.insert(
            "thinking".into(),
            if effort.is_some() {
                json!({"type": "enabled", "clear_thinking": false})
            } else {
                json!({"type": "disabled"})
            },
        );
        if let Some(level) = effort.filter(|_| compat.supports_reasoning_effort) {
            match request_options::mapped_level(model, level) {
                None => {
                    params.insert("reasoning_effort".into(), json!(level.as_str()));
                }
                Some(Some(value)) => {
                    params.insert("reasoning_effort".into(), json!(value));
                }
                Some(None) => {}
            }
        }
    } else if format == "qwen" {
        params.insert("enable_thinking".into(), json!(effort.is_some()));
        if let Some(level) = effort.filter(|_| compat.supports_reasoning_effort) {
            params.insert("reasoning_effort".into(), json!(mapped_or(level)));
        }
    } else if format == "qwen-chat-template" {
        params.insert(
            "chat_template_kwargs".into(),
            json!({"enable_thinking": effort.is_some(), "preserve_thinking": true}),
        );
    } else if format == "chat-template" {
        if let Some(values) = chat_template_values(model, effort, &compat.chat_template_kwargs, budget) {
            params.insert("chat_template_kwargs".into(), Value::Object(values));
        }
    } else if format == "baseten" {
        if let Some(values) = chat_template_values(model, effort, &compat.chat_template_args, budget) {
            params.insert("chat_template_args".into(), Value::Object(values));
        }
        if compat.supports_reasoning_effort {
            let mapped = match effort {
                Some(level) => request_options::mapped_level(model, level),
                None => request_options::mapped_level(model, ThinkingLevel::Off),
            };
            let value = match mapped {
                None => effort.map(|l| l.as_str().to_owned()),
                Some(v) => v.map(str::to_owned),
            };
            if let Some(value) = value {
                params.insert("reasoning_effort".into(), json!(value));
            }
        }
    } else if format == "deepseek" {
        if effort.is_some() {
            params.insert("thinking".into(), json!({"type": "enabled"}));
        } else if !off_null {
            params.insert("thinking".into(), json!({"type": "disabled"}));
        }
        if let Some(level) = effort.filter(|_| compat.supports_reasoning_effort) {
            params.insert("reasoning_effort".into(), json!(mapped_or(level)));
        }
    } else if format == "openrouter" {
        if let Some(level) = effort {
            params.insert("reasoning".into(), json!({"effort": mapped_or(level)}));
        } else if !off_null {
            params.insert("reasoning".into(), json!({"effort": off_value.unwrap_or_else(|| "none".into())}));
        }
    } else if format == "ant-ling" {
        if let Some(value) = effort.and_then(|level| request_options::mapped_level(model, level).flatten()) {
            params.insert("reasoning".into(), json!({"effort": value}));
        }
    } else if format == "together" {
        params.insert("reasoning".into(), json!({"enabled": effort.is_some()}));
        if let Some(level) = effort.filter(|_| compat.supports_reasoning_effort) {
            params.insert("reasoning_effort".into(), json!(mapped_or(level)));
        }
    } else if format == "string-thinking" {
        if let Some(level) = effort {
            params.insert("thinking".into(), json!(mapped_or(level)));
        } else if !off_null {
            params.insert("thinking".into(), json!(off_value.unwrap_or_else(|| "none".into())));
        }
    } else if compat.supports_reasoning_effort {
        match effort {
            Some(level) => {
                params.insert("reasoning_effort".into(), json!(mapped_or(level)));
            }
            None => {
                if let Some(off) = off_value {
                    params.insert("reasoning_effort".into(), json!(off));
                }
            }
        }
    }
    if let (Some(field), Some(budget)) = (budget_field, budget) {
        params.insert(field, json!(budget));
    }
}

fn chat_template_values(
    model: &Model,
    effort: Option<ThinkingLevel>,
    values: &Map<String, Value>,
    budget: Option<u64>,
) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    for (key, value) in values {
        let resolved = match value {
            Value::Object(spec) => {
                if effort.is_none() && spec.get("omitWhenOff").is_some_and(js_json::truthy) {
                    None
                } else if spec.get("$var").and_then(Value::as_str) == Some("thinking.enabled") {
                    Some(json!(effort.is_some()))
                } else if spec.get("$var").and_then(Value::as_str) == Some("thinking.budget") {
                    budget.map(|b| json!(b))
                } else {
                    let mapped = match effort {
                        Some(level) => request_options::mapped_level(model, level),
                        None => request_options::mapped_level(model, ThinkingLevel::Off),
                    };
                    match mapped {
                        None => effort.map(|l| json!(l.as_str())),
                        Some(Some(v)) => Some(json!(v)),
                        Some(None) => None,
                    }
                }
            }
            other => Some(other.clone()),
        };
        if let Some(resolved) = resolved {
            out.insert(key.clone(), resolved);
        }
    }
    (!out.is_empty()).then_some(out)
}

fn has_tool_history(messages: &[Message]) -> bool {
    messages.iter().any(|m| match m {
        Message::ToolResult(_) => true,
        Message::Assistant(a) => a.tool_calls().next().is_some(),
        _ => false,
    })
}

fn convert_tools(tools: &[Tool], compat: &Compat) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            // A grammar tool that cannot be declared failed the request before (`request_inputs`).
            if let Ok(Some(grammar)) = grammar::resolve(tool, compat.supports_openai_grammar_tools) {
                return grammar::completions_declaration(tool, &grammar);
            }
            let strict = adapter_support::resolve_strict(tool, compat.supports_strict_mode, None).unwrap_or(None);
            let mut function = Map::new();
            function.insert("name".into(), json!(tool.name));
            function.insert("description".into(), json!(tool.description));
            function.insert("parameters".into(), adapter_support::tool_parameters(tool, strict));
            if compat.supports_strict_mode {
                function.insert("strict".into(), json!(strict.unwrap_or(false)));
            }
            json!({"type": "function", "function": function})
        })
        .collect()
}

fn set_cache_control_on_text(message: &mut Value, control: &Value) -> bool {
    match message.get_mut("content") {
        Some(Value::String(text)) => {
            if text.is_empty() {
                return false;
            }
            let text = std::mem::take(text);
            message["content"] = json!([{"type": "text", "text": text, "cache_control": control}]);
            true
        }
        Some(Value::Array(parts)) => {
            for part in parts.iter_mut().rev() {
                if part.get("type").and_then(Value::as_str) == Some("text") {
                    part["cache_control"] = control.clone();
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

fn apply_anthropic_cache_control(messages: &mut [Value], tools: Option<&mut Vec<Value>>, control: &Value) {
    if let Some(first) =
        messages.iter_mut().find(|m| matches!(m.get("role").and_then(Value::as_str), Some("system" | "developer")))
    {
        set_cache_control_on_text(first, control);
    }
    if let Some(last) = tools.and_then(|t| t.last_mut()) {
        last["cache_control"] = control.clone();
    }
    for message in messages.iter_mut().rev() {
        if matches!(message.get("role").and_then(Value::as_str), Some("user" | "assistant" | "tool"))
            && set_cache_control_on_text(message, control)
        {
            return;
        }
    }
}

fn normalize_tool_call_id(id: &str, model: &Model) -> String {
    if let Some(separator) = id.find('|') {
        let call_id = sanitize_id(&id[..separator]);
        let item_id = sanitize_id(&id[separator + 1..]);
        let combined = if item_id.is_empty() { call_id.clone() } else { format!("{call_id}_{item_id}") };
        if combined.len() <= 40 {
            return combined;
        }
        let hash: String = adapter_support::short_hash(id).chars().take(8).collect();
        let prefix: String = call_id.chars().take(40usize.saturating_sub(hash.len() + 1).max(1)).collect();
        return format!("{prefix}_{hash}");
    }
    if model.provider == "openai" && id.encode_utf16().count() > 40 {
        return take_units(id, 40);
    }
    id.to_owned()
}

fn parse_reasoning_details(signature: Option<&str>) -> Option<Vec<Value>> {
    let parsed = js_json::parse(signature.filter(|s| !s.is_empty())?).ok()?;
    let items = parsed.as_array()?;
    (!items.is_empty() && items.iter().all(is_reasoning_detail)).then(|| items.clone())
}

fn parse_legacy_encrypted_detail(signature: Option<&str>) -> Option<Value> {
    let parsed = js_json::parse(signature.filter(|s| !s.is_empty())?).ok()?;
    let ok = is_reasoning_detail(&parsed)
        && parsed.get("type").and_then(Value::as_str) == Some("reasoning.encrypted")
        && parsed.get("id").and_then(Value::as_str).is_some_and(|s| !s.is_empty())
        && parsed.get("data").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    ok.then_some(parsed)
}

fn image_url(mime: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
}

fn convert_messages(
    model: &Model,
    context: &TranscriptContext,
    compat: &Compat,
    grammar: &HashMap<String, String>,
) -> Vec<Value> {
    let messages = context.messages();
    let normalize = |id: &str, target: &Model, _source: &pi_types::AssistantMessage| normalize_tool_call_id(id, target);
    let transformed = transform_messages(messages, model, Some(&normalize));
    let support = if compat.supports_mid_convo_system_messages && compat.supports_mid_convo_tool_additions {
        TranscriptToolSupport::Additions
    } else {
        TranscriptToolSupport::None
    };
    let transcript_tools = resolve_transcript_tools(messages, support);
    let instruction_role = if model.reasoning && compat.supports_developer_role { "developer" } else { "system" };
    let mut params: Vec<Value> = Vec::new();
    let mut last_role: Option<&str> = None;
    let mut system_index = 0usize;
    let mut i = 0usize;
    while i < transformed.len() {
        let message = &transformed[i];
        if compat.requires_assistant_after_tool_result
            && last_role == Some("toolResult")
            && matches!(message, Message::User(_))
        {
            params.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
        }
        match message {
            Message::System(system) => {
                let folded = system_index >= transcript_tools.folded_system_messages;
                system_index += 1;
                if folded {
                    if let Some(added) = system.tools_added.as_ref().filter(|t| !t.is_empty()) {
                        params.push(json!({"role": "system", "tools": convert_tools(added, compat)}));
                    }
                }
                let text = if i == 0 { system_message_text(system) } else { render_system_message_update(system) };
                if !text.is_empty() {
                    params.push(json!({"role": instruction_role, "content": text}));
                }
                last_role = Some("system");
            }
            Message::User(user) => {
                match &user.content {
                    UserMessageContent::Text(text) => params.push(json!({"role": "user", "content": text})),
                    UserMessageContent::Blocks(blocks) => {
                        let content: Vec<Value> = blocks
                            .iter()
                            .filter(|b| !matches!(b, UserContent::Text(t) if t.text.is_empty()))
                            .map(|b| match b {
                                UserContent::Text(t) => json!({"type": "text", "text": t.text}),
                                UserContent::Image(img) => image_url(&img.mime_type, &img.data),
                            })
                            .collect();
                        if content.is_empty() {
                            i += 1;
                            continue;
                        }
                        params.push(json!({"role": "user", "content": content}));
                    }
                }
                last_role = Some("user");
            }
            Message::Assistant(assistant) => {
                last_role = Some("assistant");
                if let Some(value) = convert_assistant(model, compat, assistant, grammar) {
                    params.push(value);
                }
            }
            Message::ToolResult(_) => {
                let mut images: Vec<Value> = Vec::new();
                let mut j = i;
                while let Some(Message::ToolResult(result)) = transformed.get(j) {
                    let text = result.text();
                    let has_images = result.content.iter().any(|c| matches!(c, UserContent::Image(_)));
                    let content = if !js_json::js_trim(&text).is_empty() {
                        text
                    } else if has_images {
                        "(see attached image)".to_owned()
                    } else {
                        "(no tool output)".to_owned()
                    };
                    let mut tool_message =
                        json!({"role": "tool", "content": content, "tool_call_id": result.tool_call_id});
                    if compat.requires_tool_result_name && !result.tool_name.is_empty() {
                        tool_message["name"] = json!(result.tool_name);
                    }
                    params.push(tool_message);
                    if has_images && model.input.contains(&InputModality::Image) {
                        for block in &result.content {
                            if let UserContent::Image(img) = block {
                                images.push(image_url(&img.mime_type, &img.data));
                            }
                        }
                    }
                    j += 1;
                }
                i = j;
                if images.is_empty() {
                    last_role = Some("toolResult");
                } else {
                    if compat.requires_assistant_after_tool_result {
                        params.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
                    }
                    let mut content = vec![json!({"type": "text", "text": "Attached image(s) from tool result:"})];
                    content.extend(images);
                    params.push(json!({"role": "user", "content": content}));
                    last_role = Some("user");
                }
                continue;
            }
        }
        i += 1;
    }
    params
}

fn convert_assistant(
    model: &Model,
    compat: &Compat,
    assistant: &pi_types::AssistantMessage,
    grammar: &HashMap<String, String>,
) -> Option<Value> {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    let null_content = !(compat.requires_assistant_after_tool_result || compat.requires_non_null_assistant_content);
    message.insert("content".into(), if null_content { Value::Null } else { json!("") });
    let text_parts: Vec<&TextContent> = assistant
        .content
        .iter()
        .filter_map(|b| match b {
            AssistantContent::Text(t) if !js_json::js_trim(&t.text).is_empty() => Some(t),
            _ => None,
        })
        .collect();
    let assistant_text: String = text_parts.iter().map(|t| t.text.as_str()).collect();
    let thinking: Vec<&ThinkingContent> = assistant
        .content
        .iter()
        .filter_map(|b| match b {
            AssistantContent::Thinking(t) => Some(t),
            _ => None,
        })
        .collect();
    let calls: Vec<&ToolCall> = assistant.tool_calls().collect();
    let signed = thinking.iter().find_map(|t| parse_reasoning_details(t.thinking_signature.as_deref()));
    let legacy: Vec<Value> =
        calls.iter().filter_map(|c| parse_legacy_encrypted_detail(c.thought_signature.as_deref())).collect();
    let preserved = signed.or_else(|| (!legacy.is_empty()).then_some(legacy));
    let non_empty: Vec<&&ThinkingContent> =
        thinking.iter().filter(|t| !js_json::js_trim(&t.thinking).is_empty()).collect();
    if !non_empty.is_empty() {
        if compat.requires_thinking_as_text {
            let thinking_text = non_empty.iter().map(|t| t.thinking.as_str()).collect::<Vec<_>>().join("\n\n");
            let mut parts = vec![json!({"type": "text", "text": thinking_text})];
            parts.extend(text_parts.iter().map(|t| json!({"type": "text", "text": t.text})));
            message.insert("content".into(), Value::Array(parts));
        } else {
            if !assistant_text.is_empty() {
                message.insert("content".into(), json!(assistant_text));
            }
            if preserved.is_none() {
                let mut signature = non_empty[0].thinking_signature.clone().unwrap_or_default();
                if model.provider == "opencode-go" && signature == "reasoning" {
                    signature = "reasoning_content".into();
                }
                if matches!(signature.as_str(), "reasoning" | "reasoning_content" | "reasoning_text") {
                    let joined = non_empty.iter().map(|t| t.thinking.as_str()).collect::<Vec<_>>().join("\n");
                    message.insert(signature, json!(joined));
                }
            }
        }
    } else if !assistant_text.is_empty() {
        message.insert("content".into(), json!(assistant_text));
    }
    if !calls.is_empty() {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                if let Some(property) = grammar.get(c.name.as_str()) {
                    // A call without its text input failed the request before (`request_inputs`).
                    let input = grammar::call_input(&c.name, &c.arguments, property).unwrap_or_default();
                    return json!({"id": c.id, "type": "custom", "custom": {"name": c.name, "input": input}});
                }
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": js_json::stringify(&Value::Object(c.arguments.clone()))},
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if let Some(details) = preserved {
        message.insert("reasoning_details".into(), Value::Array(details));
    }
    if compat.requires_reasoning_content_on_assistant_messages
        && model.reasoning
        && !message.contains_key("reasoning_content")
    {
        message.insert("reasoning_content".into(), json!(""));
    }
    let has_content = match message.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        _ => false,
    };
    if !has_content && !message.contains_key("tool_calls") {
        return None;
    }
    Some(Value::Object(message))
}
