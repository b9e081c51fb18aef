//! OpenAI Responses (`openai-responses`).
//!
//! Tool-call ids are `call_id|item_id`; reasoning items are kept whole (as JSON) in the
//! thinking block's signature so they can be replayed with `store: false`.

use std::collections::{HashMap, HashSet};

use pi_types::transcript::{
    render_system_message_update, resolve_transcript, resolve_transcript_tools, system_message_text,
    TranscriptToolSupport,
};
use pi_types::{
    AssistantContent, AssistantMessageBuilder, AssistantMessageEventStream, CacheRetention, CompactString, Handover,
    InputModality, Message, Model, StopReason, StreamFn, StreamOptions, ThinkingLevel, Tool, ToolCall,
    TranscriptContext, TypesError, UserContent, UserMessageContent,
};
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

use crate::api::driver::{self, Call, Cancel, Cx, Decoder, Exchange, Flow, OnCancel, Sse, WireApi};
use crate::api::openai;
use crate::api::openai::completions::{openai_status_error, openai_stream_error};
use crate::api::openai::grammar::{self, CustomInput, CUSTOM_INPUT_PROPERTY};
use crate::api::own_options;
use crate::api::request_options;
use crate::api::support::{self as adapter_support, Stop};
use crate::api::transform::{sanitize_id, take_units, transform_messages};
use crate::api::typed;
use crate::js_json;
use crate::transport::http::{self, ApiError, Dialect};
use crate::transport::sse::SseEventRef;

mod options;
pub use options::{OpenAIResponsesOptions, ReasoningEffort, ReasoningSummary, ResponsesToolChoice, ServiceTier};

/// The API id.
pub const API: &str = "openai-responses";

const MIN_OUTPUT_TOKENS: u64 = 16;
const TOOL_CALL_PROVIDERS: [&str; 3] = ["openai", "openai-codex", "opencode"];

/// Compatibility switches of a Responses endpoint (`model.compat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compat {
    /// Instructions of reasoning models use the `developer` role.
    pub supports_developer_role: bool,
    /// System messages may appear mid-conversation.
    pub supports_mid_convo_system_messages: bool,
    /// `openai` or `openrouter` session headers.
    pub session_affinity_format: String,
    /// `auto`, `enabled` or `disabled`.
    pub prompt_cache_key_mode: String,
    /// Long prompt-cache retention is accepted.
    pub supports_long_cache_retention: bool,
    /// Tools may be `strict`.
    pub supports_strict_mode: bool,
    /// `max_output_tokens` is accepted.
    pub supports_max_output_tokens: bool,
    /// Tools are declared in `additional_tools` items (with mid-conversation system messages).
    pub supports_additional_tools: bool,
    /// Later tools are loaded through client-executed `tool_search` items.
    pub supports_tool_search: bool,
    /// Prompt caching is controlled by `prompt_cache_options`.
    pub supports_explicit_prompt_cache_mode: bool,
    /// The effort level is set per reply by `configuration_update` items.
    pub supports_mid_convo_effort: bool,
    /// Providers whose `call_id|item_id` tool-call ids are replayed as pairs.
    pub tool_call_providers: &'static [&'static str],
    /// The `strict` of a tool that asks for no constrained sampling (`None` sends `null`).
    pub default_strict: Option<bool>,
    /// Grammar tools are declared as custom tools with their grammar (`grammar` module).
    pub supports_openai_grammar_tools: bool,
}

impl Compat {
    /// The switches of a model.
    pub fn for_model(model: &Model) -> Self {
        let c = model.compat.as_ref();
        let flag = |key: &str, default: bool| c.and_then(|c| c.get(key)).and_then(Value::as_bool).unwrap_or(default);
        let text = |key: &str| c.and_then(|c| c.get(key)).and_then(Value::as_str).map(str::to_owned);
        let openrouter = model.provider == "openrouter" || model.base_url.contains("openrouter.ai");
        Self {
            supports_developer_role: flag("supportsDeveloperRole", true),
            supports_mid_convo_system_messages: flag("supportsMidConvoSystemMessages", false),
            session_affinity_format: text("sessionAffinityFormat")
                .unwrap_or_else(|| if openrouter { "openrouter" } else { "openai" }.to_owned()),
            prompt_cache_key_mode: text("promptCacheKeyMode").unwrap_or_else(|| "auto".to_owned()),
            supports_long_cache_retention: flag("supportsLongCacheRetention", true),
            supports_strict_mode: flag("supportsStrictMode", false),
            supports_max_output_tokens: flag("supportsMaxOutputTokens", true),
            supports_additional_tools: flag("supportsAdditionalTools", false),
            supports_tool_search: flag("supportsToolSearch", false),
            supports_explicit_prompt_cache_mode: flag("supportsExplicitPromptCacheMode", false),
            supports_mid_convo_effort: flag("supportsMidConvoEffort", false),
            tool_call_providers: &TOOL_CALL_PROVIDERS,
            default_strict: Some(false),
            supports_openai_grammar_tools: flag("supportsOpenAIGrammarTools", false),
        }
    }

    /// How tool changes are expressed after the first request.
    pub fn tool_support(&self) -> TranscriptToolSupport {
        if self.supports_mid_convo_system_messages && self.supports_additional_tools {
            TranscriptToolSupport::Changes
        } else if self.supports_tool_search {
            TranscriptToolSupport::Additions
        } else {
            TranscriptToolSupport::None
        }
    }
}

/// The Responses adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenAIResponses;

impl StreamFn for OpenAIResponses {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        driver::stream(Wire, model, context, options)
    }
}

/// What sets one SDK-based Responses adapter apart from another (OpenAI's, Azure's): the
/// prefix of its error messages, whether ChatGPT usage hints are added, the error when the
/// stream ends without a stop reason and how a `service_tier` is priced.
pub(crate) struct Flavor {
    pub(crate) prefix: String,
    pub(crate) hints: bool,
    pub(crate) no_stop_reason: &'static str,
    pub(crate) tier_pricing: TierPricing,
    /// The input property of each grammar tool, by name (`grammar::input_properties`).
    pub(crate) grammar_inputs: HashMap<String, String>,
}

impl Flavor {
    fn hint(&self, message: String) -> String {
        if self.hints {
            with_hints(message)
        } else {
            message
        }
    }
}

/// How the response's `service_tier` scales the cost.
#[derive(Clone, Debug)]
pub(crate) enum TierPricing {
    /// OpenAI's: flex halves, priority (and fast) doubles (2.5x for gpt-5.5); an answer that
    /// names no tier is priced at the requested one.
    OpenAI {
        /// The tier the request asked for.
        requested: Option<String>,
    },
    /// Not priced (Azure).
    Unpriced,
    /// Codex's: the requested tier wins over a `default` answer; flex halves, priority doubles.
    Codex {
        /// The tier the request asked for.
        requested: Option<String>,
    },
}

impl TierPricing {
    fn multiplier(&self, model: &Model, tier: Option<&str>) -> f64 {
        let priority = if model.id == "gpt-5.5" { 2.5 } else { 2.0 };
        match self {
            Self::Unpriced => 1.0,
            Self::OpenAI { requested } => match tier.or(requested.as_deref()) {
                Some("flex") => 0.5,
                Some("priority" | "fast") => priority,
                _ => 1.0,
            },
            Self::Codex { requested } => {
                let requested = requested.as_deref();
                let tier = match (tier, requested) {
                    (Some("default"), Some(r @ ("flex" | "priority"))) => Some(r),
                    (Some(tier), _) => Some(tier),
                    (None, requested) => requested,
                };
                match tier {
                    Some("flex") => 0.5,
                    Some("priority") => priority,
                    _ => 1.0,
                }
            }
        }
    }
}

pub(crate) struct ResponsesDialect {
    prefix: String,
    hints: bool,
}

impl Dialect for ResponsesDialect {
    fn status_error(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> ApiError {
        openai_status_error(status, headers, body)
    }

    fn format(&self, error: &ApiError) -> String {
        let message = http::format_provider_error(error, Some(&self.prefix));
        if self.hints {
            with_hints(message)
        } else {
            message
        }
    }
}

fn with_hints(message: String) -> String {
    if message.contains("subscription_sharing_usage_limit_exceeded") {
        format!("{message}\nCheck your ChatGPT usage: https://chatgpt.com/settings/usage")
    } else if message.contains("subscription_sharing_workplace_individual_usage_limit_exceeded") {
        format!(
            "{message}\nYou've reached your ChatGPT workspace's usage limit. Ask your workspace admin to increase it at admin.openai.com → Workspace → Usage limits."
        )
    } else {
        message
    }
}

fn prefix(model: &Model) -> String {
    format!("{} API error", if model.provider == "openai" { "OpenAI" } else { model.provider.as_str() })
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

/// What a Responses body reads from an endpoint's own options: OpenAI's and Azure's.
pub(crate) trait OwnOptions: std::any::Any {
    /// The requested reasoning effort, reasoning summary and tool choice.
    fn reasoning(&self) -> Reasoning<'_>;
}

/// See [`OwnOptions::reasoning`].
pub(crate) type Reasoning<'a> =
    (&'a Option<ReasoningEffort>, &'a Option<ReasoningSummary>, &'a Option<ResponsesToolChoice>);

impl OwnOptions for OpenAIResponsesOptions {
    fn reasoning(&self) -> Reasoning<'_> {
        (&self.reasoning_effort, &self.reasoning_summary, &self.tool_choice)
    }
}

/// The requested effort (the reference's `options.reasoningEffort`): the API options' own, else,
/// unless they are a `stream()` call's, the neutral `reasoning` clamped to the model.
fn effort_of<O: OwnOptions>(model: &Model, options: &StreamOptions) -> Option<ThinkingLevel> {
    let api = own_options::lookup::<O>(model, options);
    if let Some(effort) = api.field(|api| api.reasoning().0) {
        return effort.level();
    }
    if api.is_own() {
        return None;
    }
    options
        .reasoning
        .filter(|l| *l != ThinkingLevel::Off)
        .map(|l| request_options::clamp_thinking_level(model, l))
        .filter(|l| *l != ThinkingLevel::Off)
}

fn is_chatgpt_sign_in(model: &Model, options: &StreamOptions) -> bool {
    model.provider == "openai"
        && model.base_url == "https://api.openai.com/v1"
        && options.api_key.as_deref().is_some_and(|k| !k.starts_with("sk-"))
}

impl Default for TierPricing {
    fn default() -> Self {
        Self::OpenAI { requested: None }
    }
}

/// The `service_tier` the request asks for ([`OpenAIResponsesOptions::service_tier`]).
fn requested_service_tier(model: &Model, options: &StreamOptions) -> Option<String> {
    own_options::lookup::<OpenAIResponsesOptions>(model, options)
        .field(|api| &api.service_tier)
        .map(|tier| tier.as_str().to_owned())
}

/// Stream with the API's own options, as the reference's `stream()`: `api` is the whole of the
/// reasoning settings (nothing is derived from `options.reasoning`) and `max_output_tokens` is
/// sent only when `options.max_tokens` is set.
pub fn stream(
    model: &Model,
    context: TranscriptContext,
    options: StreamOptions,
    api: OpenAIResponsesOptions,
) -> AssistantMessageEventStream {
    own_options::stream_own(&OpenAIResponses, model, context, options, api)
}

/// The request body the adapter sends for a context.
/// Public so that an application can see what its model and options put on the wire without a
/// server (this crate's own tests of the request fields use it, and cannot reach private items);
/// the body is the one sent when no `on_payload` hook changes it.
pub fn build_request_body(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Value {
    let compat = Compat::for_model(model);
    let context = resolve_transcript(context.clone(), compat.supports_mid_convo_system_messages);
    build_params(model, &context, options, &compat)
}

/// The effort sent in `configuration_update` items, when the model takes them.
fn configuration_update_effort(model: &Model, options: &StreamOptions, compat: &Compat) -> Option<String> {
    if !compat.supports_mid_convo_effort || is_chatgpt_sign_in(model, options) {
        return None;
    }
    effort_of::<OpenAIResponsesOptions>(model, options).map(|level| request_options::mapped_or_level(model, level))
}

fn build_params(model: &Model, context: &TranscriptContext, options: &StreamOptions, compat: &Compat) -> Value {
    let tools = resolve_transcript_tools(context.messages(), compat.tool_support());
    let update_effort = configuration_update_effort(model, options, compat);
    let input = convert_messages(model, context, compat, update_effort.as_deref());
    let retention = cache_retention(options);
    let omit = is_chatgpt_sign_in(model, options);
    let api = own_options::lookup::<OpenAIResponsesOptions>(model, options);
    let max_tokens = match api.is_own() {
        true => options.max_tokens.unwrap_or(0),
        false => request_options::base_max_tokens(model, context, options.max_tokens),
    };
    let mut params = Map::new();
    params.insert("model".into(), json!(model.id));
    params.insert("input".into(), Value::Array(input));
    params.insert("stream".into(), json!(true));
    if retention != CacheRetention::None && compat.prompt_cache_key_mode != "disabled" {
        if let Some(session) = &options.session_id {
            params.insert("prompt_cache_key".into(), json!(session.chars().take(64).collect::<String>()));
        }
    }
    if !omit
        && retention == CacheRetention::Long
        && compat.supports_long_cache_retention
        && !compat.supports_explicit_prompt_cache_mode
    {
        params.insert("prompt_cache_retention".into(), json!("24h"));
    }
    if !omit && compat.supports_explicit_prompt_cache_mode {
        if retention == CacheRetention::None {
            params.insert("prompt_cache_options".into(), json!({"mode": "explicit"}));
        } else if retention == CacheRetention::Long && compat.supports_long_cache_retention {
            params.insert("prompt_cache_options".into(), json!({"ttl": "30m"}));
        }
    }
    params.insert("store".into(), json!(false));
    if max_tokens > 0 && compat.supports_max_output_tokens && !omit {
        params.insert("max_output_tokens".into(), json!(max_tokens.max(MIN_OUTPUT_TOKENS)));
    }
    if let Some(t) = options.temperature.filter(|_| !omit) {
        params.insert("temperature".into(), json!(t));
    }
    if !tools.request_tools.is_empty() {
        params.insert("tools".into(), Value::Array(convert_tools(&tools.request_tools, compat, false)));
    }
    if let Some(tier) = api.field(|api| &api.service_tier) {
        params.insert("service_tier".into(), json!(tier.as_str()));
    }
    let rules = Endpoint::OpenAI { update_effort: update_effort.is_some() };
    insert_choice_and_reasoning::<OpenAIResponsesOptions>(&mut params, model, options, rules);
    Value::Object(params)
}

/// Whose `reasoning` rules a Responses body follows.
#[derive(Clone, Copy)]
pub(crate) enum Endpoint {
    /// OpenAI's (and the providers that speak it): `update_effort`, the effort goes in
    /// mid-conversation `configuration_update` items and `reasoning` asks for "medium"; GitHub
    /// Copilot is sent no "off" effort; xAI always gets the encrypted reasoning back.
    OpenAI { update_effort: bool },
    /// Azure's: what was asked, as asked.
    Azure,
}

/// The end of a Responses body: the tool choice, `reasoning` (and `include`) from the
/// requested effort and summary of the endpoint's own options `O`, then the sampling
/// parameters.
pub(crate) fn insert_choice_and_reasoning<O: OwnOptions>(
    params: &mut Map<String, Value>,
    model: &Model,
    options: &StreamOptions,
    rules: Endpoint,
) {
    let api = own_options::lookup::<O>(model, options);
    if let Some(choice) = api.field(|api| api.reasoning().2) {
        params.insert("tool_choice".into(), choice.to_wire());
    } else if let Some(choice) = options.tool_choice {
        params.insert("tool_choice".into(), serde_json::to_value(choice).unwrap_or(Value::Null));
    }
    let requested = effort_of::<O>(model, options);
    let summary = api.field(|api| api.reasoning().1);
    // A summary alone asks for reasoning at "medium" (sent as is, not mapped).
    let effort = requested.or(summary.map(|_| ThinkingLevel::Medium));
    let (update_effort, openai) = match rules {
        Endpoint::OpenAI { update_effort } => (update_effort, true),
        Endpoint::Azure => (false, false),
    };
    if model.reasoning {
        if let Some(level) = effort {
            let effort = match requested {
                Some(_) if !update_effort => request_options::mapped_or_level(model, level),
                _ => "medium".to_owned(),
            };
            let summary = summary.map_or("auto", ReasoningSummary::as_str);
            params.insert("reasoning".into(), json!({"effort": effort, "summary": summary}));
            params.insert("include".into(), json!(["reasoning.encrypted_content"]));
        } else if (!openai || model.provider != "github-copilot") && !request_options::off_is_null(model) {
            let off = request_options::mapped_level(model, ThinkingLevel::Off).flatten().unwrap_or("none");
            params.insert("reasoning".into(), json!({"effort": off}));
        }
        if openai && model.provider == "xai" {
            params.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
    }
    if let Some(sampling) = request_options::resolve_sampling_params(
        model,
        effort.unwrap_or(ThinkingLevel::Off),
        options.sampling_params.as_deref(),
    ) {
        for (k, v) in sampling {
            params.insert(k, v);
        }
    }
}

pub(crate) fn convert_tools(tools: &[Tool], compat: &Compat, search_result: bool) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            if let Ok(Some(grammar)) = grammar::resolve(tool, compat.supports_openai_grammar_tools) {
                return grammar::declaration(tool, &grammar, search_result);
            }
            let strict = adapter_support::resolve_strict(tool, compat.supports_strict_mode, None)
                .unwrap_or(None)
                .or(compat.default_strict);
            let mut function = Map::new();
            function.insert("type".into(), json!("function"));
            function.insert("name".into(), json!(tool.name));
            function.insert("description".into(), json!(tool.description));
            function.insert("parameters".into(), adapter_support::tool_parameters(tool, strict));
            if search_result {
                function.insert("defer_loading".into(), json!(true));
            }
            if compat.supports_strict_mode {
                function.insert("strict".into(), json!(strict));
            }
            Value::Object(function)
        })
        .collect()
}

fn normalize_id_part(part: &str) -> String {
    take_units(&sanitize_id(part), 64).trim_end_matches('_').to_owned()
}

fn parse_text_signature(signature: Option<&str>) -> Option<(String, Option<String>)> {
    let signature = signature.filter(|s| !s.is_empty())?;
    if signature.starts_with('{') {
        if let Ok(parsed) = js_json::parse(signature) {
            if parsed.get("v").and_then(Value::as_f64) == Some(1.0) {
                if let Some(id) = parsed.get("id").and_then(Value::as_str) {
                    let phase = parsed
                        .get("phase")
                        .and_then(Value::as_str)
                        .filter(|p| matches!(*p, "commentary" | "final_answer"))
                        .map(str::to_owned);
                    return Some((id.to_owned(), phase));
                }
            }
        }
    }
    Some((signature.to_owned(), None))
}

fn incremental_tools_notice(unavailable: &[String]) -> String {
    let notice = "This is an incremental tools update. Previously declared tools remain available unless explicitly marked unavailable. A tool declared again here is available again, and its latest definition replaces the earlier one.";
    if unavailable.is_empty() {
        notice.to_owned()
    } else {
        format!("{notice}\nStill unavailable: {}.", unavailable.join(", "))
    }
}

pub(crate) fn convert_messages(
    model: &Model,
    context: &TranscriptContext,
    compat: &Compat,
    update_effort: Option<&str>,
) -> Vec<Value> {
    render_transcript(model, context, compat, update_effort, EffortUpdates::default()).0
}

/// [`convert_messages`] with the first effort pinned as the request's own (Codex): it sends no
/// `configuration_update` item, and later ones only where the effort changes. Returns the
/// input items and that first effort.
pub(crate) fn convert_messages_with_effort_baseline(
    model: &Model,
    context: &TranscriptContext,
    compat: &Compat,
    update_effort: Option<&str>,
) -> (Vec<Value>, Option<String>) {
    let updates = EffortUpdates { pin_initial: true, ..EffortUpdates::default() };
    render_transcript(model, context, compat, update_effort, updates)
}

/// Where `configuration_update` items go.
#[derive(Default)]
struct EffortUpdates {
    /// The first effort is the request's; later ones are sent only when they change it.
    pin_initial: bool,
    previous: Option<String>,
    baseline: Option<String>,
}

impl EffortUpdates {
    fn push(&mut self, items: &mut Vec<Value>, effort: &str) {
        if self.pin_initial {
            if self.previous.as_deref() == Some(effort) {
                return;
            }
            self.previous = Some(effort.to_owned());
            if self.baseline.is_none() {
                self.baseline = Some(effort.to_owned());
                return;
            }
        }
        items.push(json!({"type": "configuration_update", "reasoning": {"effort": effort}}));
    }
}

fn render_transcript(
    model: &Model,
    context: &TranscriptContext,
    compat: &Compat,
    update_effort: Option<&str>,
    mut updates: EffortUpdates,
) -> (Vec<Value>, Option<String>) {
    let allowed = compat.tool_call_providers.contains(&model.provider.as_str());
    let normalize = |id: &str, _: &Model, source: &pi_types::AssistantMessage| -> String {
        if !allowed || !id.contains('|') {
            return normalize_id_part(id);
        }
        let mut parts = id.split('|');
        let call_id = normalize_id_part(parts.next().unwrap_or(""));
        let item_id = parts.next().unwrap_or("");
        let foreign = source.provider != model.provider || source.api != model.api;
        let mut item = if foreign {
            take_units(&format!("fc_{}", adapter_support::short_hash(item_id)), 64)
        } else {
            normalize_id_part(item_id)
        };
        if !item.starts_with("fc_") {
            item = normalize_id_part(&format!("fc_{item}"));
        }
        format!("{call_id}|{item}")
    };
    let transformed = transform_messages(context.messages(), model, Some(&normalize));
    let instruction_role = if model.reasoning && compat.supports_developer_role { "developer" } else { "system" };
    let support = compat.tool_support();
    let transcript_tools = resolve_transcript_tools(context.messages(), support);
    // A grammar tool that cannot be declared fails the request before it is built (see `run`).
    let grammar_inputs =
        grammar::input_properties(context.messages(), compat.supports_openai_grammar_tools).unwrap_or_default();
    let mut declared_additional = false;
    let mut unavailable: Vec<String> = Vec::new();
    let mut system_index = 0usize;
    let mut items: Vec<Value> = Vec::new();
    let mut msg_index = 0usize;
    for (source_index, message) in transformed.iter().enumerate() {
        let leading_system = source_index == 0 && matches!(message, Message::System(_));
        match message {
            Message::System(system) => {
                let anchors = system_index >= transcript_tools.folded_system_messages;
                system_index += 1;
                let added: Vec<Tool> = system.tools_added.clone().unwrap_or_default();
                if anchors {
                    unavailable.retain(|name| !added.iter().any(|t| &t.name == name));
                    if !added.is_empty() {
                        match support {
                            TranscriptToolSupport::Changes => {
                                if declared_additional {
                                    items.push(json!({"role": instruction_role, "content": incremental_tools_notice(&unavailable)}));
                                }
                                declared_additional = true;
                                items.push(json!({"type": "additional_tools", "role": "developer", "tools": convert_tools(&added, compat, false)}));
                            }
                            TranscriptToolSupport::Additions => {
                                let names: Vec<&str> = added.iter().map(|t| t.name.as_str()).collect();
                                let call_id = format!(
                                    "pi_tool_load_{}",
                                    adapter_support::short_hash(&format!("system:{msg_index}:{}", names.join(",")))
                                );
                                items.push(json!({
                                    "type": "tool_search_call",
                                    "call_id": call_id,
                                    "execution": "client",
                                    "status": "completed",
                                    "arguments": {"query": names.join(" "), "limit": names.len()},
                                }));
                                items.push(json!({
                                    "type": "tool_search_output",
                                    "call_id": call_id,
                                    "execution": "client",
                                    "status": "completed",
                                    "tools": convert_tools(&added, compat, true),
                                }));
                            }
                            TranscriptToolSupport::None => {}
                        }
                    }
                }
                let mut parts = vec![if leading_system {
                    system_message_text(system)
                } else {
                    render_system_message_update(system)
                }];
                if anchors {
                    let removed: Vec<String> = system
                        .tools_removed
                        .iter()
                        .flatten()
                        .map(|t| t.name.clone())
                        .filter(|name| !added.iter().any(|t| &t.name == name))
                        .collect();
                    if !removed.is_empty() {
                        let list = removed.iter().map(|n| format!("- {n}")).collect::<Vec<_>>().join("\n");
                        parts.push(format!("The following tools are no longer available. Do not call them:\n{list}"));
                    }
                    for name in removed {
                        if !unavailable.contains(&name) {
                            unavailable.push(name);
                        }
                    }
                }
                let text = parts.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join("\n\n");
                if !text.is_empty() {
                    items.push(json!({"role": instruction_role, "content": text}));
                }
            }
            Message::User(user) => match &user.content {
                UserMessageContent::Text(text) => {
                    items.push(json!({"role": "user", "content": [{"type": "input_text", "text": text}]}));
                }
                UserMessageContent::Blocks(blocks) => {
                    let content: Vec<Value> = blocks
                        .iter()
                        .map(|b| match b {
                            UserContent::Text(t) => json!({"type": "input_text", "text": t.text}),
                            UserContent::Image(img) => json!({
                                "type": "input_image",
                                "detail": "auto",
                                "image_url": format!("data:{};base64,{}", img.mime_type, img.data),
                            }),
                        })
                        .collect();
                    if content.is_empty() {
                        continue;
                    }
                    items.push(json!({"role": "user", "content": content}));
                }
            },
            Message::Assistant(assistant) => {
                let same_provider_api = assistant.provider == model.provider && assistant.api == model.api;
                let different_model = same_provider_api && assistant.model != model.id;
                let same_model = same_provider_api && assistant.model == model.id;
                let mut output: Vec<Value> = Vec::new();
                let mut text_index = 0usize;
                for block in &assistant.content {
                    match block {
                        AssistantContent::Thinking(thinking) => {
                            if let Some(signature) = thinking.thinking_signature.as_deref().filter(|s| !s.is_empty()) {
                                if let Ok(item) = js_json::parse(signature) {
                                    output.push(item);
                                }
                            }
                        }
                        AssistantContent::Text(text) => {
                            let parsed = parse_text_signature(text.text_signature.as_deref());
                            let fallback = if text_index == 0 {
                                format!("msg_pi_{msg_index}")
                            } else {
                                format!("msg_pi_{msg_index}_{text_index}")
                            };
                            text_index += 1;
                            let id = match parsed.as_ref().map(|(id, _)| id.clone()).filter(|id| !id.is_empty()) {
                                None => fallback,
                                Some(id) if id.encode_utf16().count() > 64 => {
                                    format!("msg_{}", adapter_support::short_hash(&id))
                                }
                                Some(id) => id,
                            };
                            let mut item = json!({
                                "type": "message",
                                "role": "assistant",
                                "content": [{"type": "output_text", "text": text.text, "annotations": []}],
                                "status": "completed",
                                "id": id,
                            });
                            if let Some(phase) = parsed.and_then(|(_, phase)| phase) {
                                item["phase"] = json!(phase);
                            }
                            output.push(item);
                        }
                        AssistantContent::ToolCall(call) => {
                            let mut parts = call.id.split('|');
                            let call_id = parts.next().unwrap_or("");
                            let custom = grammar_inputs.get(call.name.as_str());
                            // Item ids must match the item type (`fc_` / `ctc_`): others are left out.
                            let prefix = if custom.is_some() { "ctc_" } else { "fc_" };
                            let item_id = parts.next().filter(|id| id.starts_with(prefix) && !different_model);
                            let mut item = Map::new();
                            item.insert(
                                "type".into(),
                                json!(if custom.is_some() { "custom_tool_call" } else { "function_call" }),
                            );
                            if let Some(item_id) = item_id {
                                item.insert("id".into(), json!(item_id));
                            }
                            item.insert("call_id".into(), json!(call_id));
                            item.insert("name".into(), json!(call.name));
                            // Replayed as OpenAI returned it: a call that is replayed completed
                            // (a stream that ends inside a call fails and is not replayed), and a
                            // history whose calls lack the status does not match the one the Codex
                            // WebSocket keeps, which drops the reasoning after them.
                            item.insert("status".into(), json!("completed"));
                            if let Some(namespace) = call.namespace.as_ref().filter(|_| same_model) {
                                item.insert("namespace".into(), json!(namespace));
                            }
                            match custom {
                                Some(property) => {
                                    // A call without its text input was checked in `run`.
                                    let input =
                                        grammar::call_input(&call.name, &call.arguments, property).unwrap_or_default();
                                    item.insert("input".into(), json!(input));
                                }
                                None => {
                                    item.insert(
                                        "arguments".into(),
                                        json!(js_json::stringify(&Value::Object(call.arguments.clone()))),
                                    );
                                }
                            }
                            output.push(Value::Object(item));
                        }
                    }
                }
                if output.is_empty() {
                    continue;
                }
                if let (Some(_), true, Some(level)) =
                    (update_effort, same_model, assistant.provider_thinking_level.as_ref())
                {
                    updates.push(&mut items, level);
                }
                items.extend(output);
            }
            Message::ToolResult(result) => {
                let call_id = result.tool_call_id.split('|').next().unwrap_or("");
                let kind = if grammar_inputs.contains_key(result.tool_name.as_str()) {
                    "custom_tool_call_output"
                } else {
                    "function_call_output"
                };
                items.push(json!({"type": kind, "call_id": call_id, "output": tool_output(model, &result.content)}));
            }
        }
        if !leading_system {
            msg_index += 1;
        }
    }
    if let Some(effort) = update_effort {
        updates.push(&mut items, effort);
    }
    (items, updates.baseline)
}

fn tool_output(model: &Model, content: &[UserContent]) -> Value {
    let text = pi_types::content_text(content, "\n");
    let images: Vec<_> = content
        .iter()
        .filter_map(|c| match c {
            UserContent::Image(img) => Some(img),
            UserContent::Text(_) => None,
        })
        .collect();
    let has_text = !js_json::js_trim(&text).is_empty();
    if images.is_empty() || !model.input.contains(&InputModality::Image) {
        let value = if has_text {
            text
        } else if !images.is_empty() {
            "(see attached image)".into()
        } else {
            "(no tool output)".into()
        };
        return json!(value);
    }
    let mut output = Vec::new();
    if has_text {
        output.push(json!({"type": "input_text", "text": text}));
    }
    for image in images {
        output.push(json!({
            "type": "input_image",
            "detail": "auto",
            "image_url": format!("data:{};base64,{}", image.mime_type, image.data),
        }));
    }
    Value::Array(output)
}

/// The wire API behind [`OpenAIResponses`] (crate-private: its decoding types stay private).
struct Wire;

impl WireApi for Wire {
    type Dialect = ResponsesDialect;
    type Decoder = ResponsesDecode;
    const CANCEL: Cancel = RESPONSES_CANCEL;

    async fn prepare(&self, call: Call<'_>) -> Result<Exchange<Self>, Stop> {
        let Call { model, context, options, out } = call;
        let key = match options.api_key.clone().filter(|k| !k.is_empty()) {
            Some(key) => key,
            None if adapter_support::has_header(options, "authorization")
                || adapter_support::has_header(options, "cf-aig-authorization") =>
            {
                "unused".to_owned()
            }
            None => return Err(Stop::error(format!("No API key for provider: {}", model.provider))),
        };
        let compat = Compat::for_model(model);
        let context = resolve_transcript(context, compat.supports_mid_convo_system_messages);
        let grammar_inputs = grammar_inputs(&context, &compat)?;
        let params = build_params(model, &context, options, &compat);
        if let Some(effort) = configuration_update_effort(model, options, &compat) {
            out.metadata_mut().provider_thinking_level = Some(effort.into());
        }
        let params = adapter_support::apply_on_payload(options, model, params).await;
        let session = options.session_id.clone().filter(|_| cache_retention(options) != CacheRetention::None);
        let session = openai::session_headers(session, &compat.session_affinity_format, "session-id", false);
        let request = openai::bearer_request(model, options, &context, &key, "responses", session, &params);
        let flavor = Flavor {
            prefix: prefix(model),
            hints: true,
            no_stop_reason: "OpenAI Responses stream ended without a stop reason",
            tier_pricing: TierPricing::OpenAI { requested: requested_service_tier(model, options) },
            grammar_inputs,
        };
        Ok(exchange(request, flavor, options))
    }
}

/// The input property of each grammar tool the transcript declares ([`grammar::request_inputs`]).
pub(crate) fn grammar_inputs(context: &TranscriptContext, compat: &Compat) -> Result<HashMap<String, String>, Stop> {
    grammar::request_inputs(context, compat.supports_openai_grammar_tools).map_err(Stop::error)
}

/// Where a Responses stream looks at cancellation: a cancelled read or a cancellation seen
/// after an event stops reading, and [`ResponsesDecode::end`] reports it.
pub(crate) const RESPONSES_CANCEL: Cancel =
    Cancel { read: OnCancel::Drain, before_event: None, after_event: Some(OnCancel::Drain) };

/// The exchange of a prepared Responses request of `flavor`.
pub(crate) fn exchange<A>(request: http::Request, flavor: Flavor, options: &StreamOptions) -> Exchange<A>
where
    A: WireApi<Dialect = ResponsesDialect, Decoder = ResponsesDecode>,
{
    let dialect = ResponsesDialect { prefix: flavor.prefix.clone(), hints: flavor.hints };
    let mut state = ResponsesState::with_pricing(flavor.tier_pricing.clone());
    state.grammar_inputs = flavor.grammar_inputs.clone();
    let decode = ResponsesDecode {
        heads: typed::EventHeads::default(),
        state,
        // Without a hook that sees every event as a `Value`, delta events take the typed decode.
        typed: options.on_provider_stream_event.is_none(),
        flavor,
    };
    Exchange::new(request, dialect, decode)
}

/// The decoding state of one SDK-based Responses stream (OpenAI's, Azure's), as the OpenAI SDK
/// and pi-ai's shared Responses stream processing read it.
pub(crate) struct ResponsesDecode {
    flavor: Flavor,
    heads: typed::EventHeads,
    state: ResponsesState,
    typed: bool,
}

impl ResponsesDecode {
    fn fail(&self, message: String) -> Stop {
        Stop::error(self.flavor.hint(message))
    }
}

impl Decoder for ResponsesDecode {
    type Framing = Sse;

    fn read_failed(&mut self, message: String) -> Stop {
        self.fail(message)
    }

    async fn event<'e>(&mut self, event: SseEventRef<'e>, cx: &mut Cx<'_>) -> Result<Flow, Stop>
    where
        Sse: 'e,
    {
        if event.data == "[DONE]" {
            return Ok(Flow::End);
        }
        let flavor = &self.flavor;
        let is_error = event.event.as_deref() == Some("error");
        let Ok(data) = js_json::parse(&event.data) else {
            return Err(self.fail("Error reading response: malformed server-sent event JSON.".into()));
        };
        if is_error {
            let error = data.get("error").filter(|e| !e.is_null()).unwrap_or(&data);
            return Err(self.fail(http::format_provider_error(&openai_stream_error(error), Some(&flavor.prefix))));
        }
        if let Some(error) = data.get("error").filter(|e| js_json::truthy(e)) {
            return Err(self.fail(http::format_provider_error(&openai_stream_error(error), Some(&flavor.prefix))));
        }
        adapter_support::on_event(cx.options, cx.model, &data).await;
        self.state
            .handle(cx.model, cx.options, &data, cx.out)
            .await
            .map_err(|s| Stop { message: flavor.hint(s.message), ..s })?;
        if self.state.saw_terminal {
            // A terminal response event ends the protocol: nothing after it is read or waited for.
            return Ok(Flow::End);
        }
        Ok(Flow::Continue)
    }

    fn delta<'c>(&mut self, event: &SseEventRef<'_>, cx: &'c mut Cx<'_>) -> Option<Handover<'c, Result<Flow, Stop>>> {
        if !self.typed || event.event.as_deref() == Some("error") || event.data == "[DONE]" {
            return None;
        }
        let delta = typed::decode_event(&event.data, &mut self.heads)?;
        let flavor = &self.flavor;
        let handover = self.state.delta(&delta, cx.out)?;
        Some(
            handover.map(|result| {
                result.map(|()| Flow::Continue).map_err(|error| Stop::error(flavor.hint(error.to_string())))
            }),
        )
    }

    async fn end(&mut self, cx: &mut Cx<'_>) -> Result<(), Stop> {
        let aborted = cx.cancelled();
        let wrap = |message: &str| if aborted { Stop::aborted(message) } else { self.fail(message.to_owned()) };
        if let Some(text) = self.state.unfinished_answer(cx.out.message()) {
            return Err(wrap(&text));
        }
        if aborted {
            return Err(Stop::aborted("Request was aborted"));
        }
        adapter_support::stop_reason_tail(cx.out.message(), self.flavor.no_stop_reason)
            .map_err(|stop| self.fail(stop.message))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    Thinking,
    Text,
    ToolCall,
    /// A `custom_tool_call` (freeform input of a custom tool), shown as a call with arguments
    /// `{"input": <text>}` as the reference does.
    CustomToolCall,
}

#[derive(Clone, Copy)]
struct Slot {
    kind: SlotKind,
    content_index: usize,
}

/// The open output items by the text of their `output_index`, with the one looked up last
/// remembered: deltas come item by item, so one comparison replaces a SipHash lookup per
/// delta.
#[derive(Default)]
struct Slots {
    by_key: HashMap<String, Slot>,
    last: Option<(CompactString, Slot)>,
}

impl Slots {
    fn get(&mut self, key: &str) -> Option<Slot> {
        if let Some((last, slot)) = &self.last {
            if last == key {
                return Some(*slot);
            }
        }
        let slot = *self.by_key.get(key)?;
        self.last = Some((key.into(), slot));
        Some(slot)
    }

    fn insert(&mut self, key: String, slot: Slot) {
        self.last = None;
        self.by_key.insert(key, slot);
    }

    fn remove(&mut self, key: &str) {
        self.last = None;
        self.by_key.remove(key);
    }
}

/// The state of pi-ai's shared Responses stream processing over one response.
#[derive(Default)]
pub(crate) struct ResponsesState {
    /// A terminal response event (`completed`, `incomplete`, `failed`) was handled.
    pub(crate) saw_terminal: bool,
    slots: Slots,
    /// Content indices of tool calls whose `output_item.done` has not arrived.
    pub(crate) unfinished: HashSet<usize>,
    reasoning_by_id: HashMap<String, usize>,
    /// How the response's service tier is priced.
    pub(crate) tier_pricing: TierPricing,
    /// The input of each open custom tool call, by content index.
    custom_inputs: HashMap<usize, CustomInput>,
    /// The input property of each grammar tool, by name; other custom tools use `input`.
    pub(crate) grammar_inputs: HashMap<String, String>,
}

fn slot_key(event: &Value) -> String {
    match event.get("output_index") {
        Some(v) => js_json::stringify(v),
        None => "undefined".to_owned(),
    }
}

/// A string member of an output item as a JavaScript template string shows it.
fn id_text(item: &Value, key: &str) -> String {
    item.get(key)
        .map_or_else(|| "undefined".to_owned(), |v| v.as_str().map_or_else(|| js_json::stringify(v), str::to_owned))
}

fn n(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_f64).filter(|f| *f > 0.0).map_or(0, |f| f as u64)
}

impl ResponsesState {
    /// A fresh state pricing service tiers as given.
    pub(crate) fn with_pricing(tier_pricing: TierPricing) -> Self {
        Self { tier_pricing, ..Default::default() }
    }

    /// What the stream processing finds wrong after the last event: no terminal event came, or
    /// the answer asks for a tool call that never finished; its text.
    pub(crate) fn unfinished_answer(&self, message: &pi_types::AssistantMessage) -> Option<String> {
        if !self.saw_terminal {
            return Some("OpenAI Responses stream ended before a terminal response event".to_owned());
        }
        if message.stop_reason != StopReason::ToolUse {
            return None;
        }
        let index = self.unfinished.iter().min()?;
        match message.content.get(*index) {
            Some(AssistantContent::ToolCall(call)) => Some(format!(
                "OpenAI Responses stream completed with an unfinished tool call: {} ({})",
                call.name, call.id
            )),
            _ => None,
        }
    }

    /// A typed delta event ([`typed::decode_event`]), made at once: the builder's hand-over of
    /// its event ([`driver::Decoder::delta`]), a ready one for a delta to no open item of its
    /// kind (ignored, as the reference ignores it); `None`, with nothing changed, for an event
    /// of another kind.
    pub(crate) fn delta<'o>(
        &mut self,
        event: &typed::ResponsesDelta<'_>,
        out: &'o mut AssistantMessageBuilder,
    ) -> Option<Handover<'o, Result<(), TypesError>>> {
        let kind = match &*event.kind {
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => SlotKind::Thinking,
            "response.output_text.delta" | "response.refusal.delta" => SlotKind::Text,
            "response.function_call_arguments.delta" => SlotKind::ToolCall,
            _ => return None,
        };
        let mut key = [0u8; 24];
        let key = event.output_index.text(&mut key);
        let Some(index) = self.slots.get(key).filter(|s| s.kind == kind).map(|s| s.content_index) else {
            return Some(Handover::ready(Ok(())));
        };
        let text = event.delta.as_deref().unwrap_or_default();
        Some(match kind {
            SlotKind::Thinking => out.thinking_delta(index, text),
            SlotKind::Text => out.text_delta(index, text),
            _ => out.tool_call_delta(index, text),
        })
    }

    fn slot(&mut self, event: &Value, kind: SlotKind) -> Option<usize> {
        self.slots.get(&slot_key(event)).filter(|s| s.kind == kind).map(|s| s.content_index)
    }

    async fn create_slot(&mut self, key: String, item: &Value, out: &mut AssistantMessageBuilder) -> Option<usize> {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "reasoning" => {
                let index = out.start_thinking().await;
                self.slots.insert(key, Slot { kind: SlotKind::Thinking, content_index: index });
                Some(index)
            }
            "message" => {
                if item.get("phase").and_then(Value::as_str) == Some("final_answer") {
                    out.metadata_mut().stop_reason = StopReason::Stop;
                }
                let index = out.start_text().await;
                self.slots.insert(key, Slot { kind: SlotKind::Text, content_index: index });
                Some(index)
            }
            "function_call" => {
                let text = item.get("arguments").and_then(Value::as_str).unwrap_or("");
                let id_part = |k: &str| {
                    item.get(k).map_or_else(
                        || "undefined".to_owned(),
                        |v| v.as_str().map_or_else(|| js_json::stringify(v), str::to_owned),
                    )
                };
                let call = ToolCall {
                    id: format!("{}|{}", id_part("call_id"), id_part("id")).into(),
                    name: item.get("name").and_then(Value::as_str).unwrap_or("").into(),
                    namespace: item.get("namespace").and_then(Value::as_str).map(Into::into),
                    ..Default::default()
                };
                let index = out.start_tool_call_with_arguments(call, text).await;
                self.unfinished.insert(index);
                self.slots.insert(key, Slot { kind: SlotKind::ToolCall, content_index: index });
                Some(index)
            }
            "custom_tool_call" => {
                let initial = item.get("input").and_then(Value::as_str).unwrap_or("");
                let name = item.get("name").and_then(Value::as_str).unwrap_or("");
                let property = self.grammar_inputs.get(name).map_or(CUSTOM_INPUT_PROPERTY, String::as_str);
                let mut input = CustomInput::new(property);
                input.unsent = input.append(initial).ok().flatten().unwrap_or_default();
                let mut arguments = Map::new();
                arguments.insert(property.into(), json!(initial));
                let call = ToolCall {
                    id: format!("{}|{}", id_text(item, "call_id"), id_text(item, "id")).into(),
                    name: item.get("name").and_then(Value::as_str).unwrap_or("").into(),
                    arguments,
                    namespace: item.get("namespace").and_then(Value::as_str).map(Into::into),
                    ..Default::default()
                };
                // The start event shows the initial input; its JSON text goes out (and into the
                // argument text) with the next delta.
                let index = out.start_tool_call_with_arguments(call, "").await;
                self.custom_inputs.insert(index, input);
                self.unfinished.insert(index);
                self.slots.insert(key, Slot { kind: SlotKind::CustomToolCall, content_index: index });
                Some(index)
            }
            _ => None,
        }
    }

    pub(crate) async fn handle(
        &mut self,
        model: &Model,
        options: &StreamOptions,
        event: &Value,
        out: &mut AssistantMessageBuilder,
    ) -> Result<(), Stop> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let delta_text = || event.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind {
            "response.created" => {
                out.metadata_mut().response_id =
                    (event.get("response").and_then(|r| r.get("id")).and_then(Value::as_str).map(str::to_owned))
                        .map(Into::into);
            }
            "response.output_item.added" => {
                let item = event.get("item").cloned().unwrap_or(Value::Null);
                self.create_slot(slot_key(event), &item, out).await;
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(index) = self.slot(event, SlotKind::Thinking) {
                    out.thinking_delta(index, delta_text()).await?;
                }
            }
            "response.reasoning_summary_part.done" => {
                if let Some(index) = self.slot(event, SlotKind::Thinking) {
                    out.thinking_delta(index, "\n\n").await?;
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(index) = self.slot(event, SlotKind::Text) {
                    out.text_delta(index, delta_text()).await?;
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(index) = self.slot(event, SlotKind::ToolCall) {
                    out.tool_call_delta(index, delta_text()).await?;
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(index) = self.slot(event, SlotKind::ToolCall) {
                    let text = event.get("arguments").and_then(Value::as_str).unwrap_or("");
                    out.replace_tool_call_arguments(index, text).await?;
                }
            }
            "response.custom_tool_call_input.delta" | "response.custom_tool_call_input.done" => {
                if let Some(index) = self.slot(event, SlotKind::CustomToolCall) {
                    let text = match self.custom_inputs.get_mut(&index) {
                        Some(input) if kind.ends_with(".delta") => {
                            let text = input.append(delta_text())?;
                            input.send(text)
                        }
                        Some(input) => {
                            let text = input.close(event.get("input").and_then(Value::as_str))?;
                            input.send(text)
                        }
                        None => None,
                    };
                    if let Some(text) = text {
                        out.tool_call_delta(index, text).await?;
                    }
                }
            }
            "response.output_item.done" => {
                let item = event.get("item").cloned().unwrap_or(Value::Null);
                let item_type = item.get("type").and_then(Value::as_str).unwrap_or("");
                if item_type == "message" && item.get("phase").and_then(Value::as_str) == Some("final_answer") {
                    out.metadata_mut().stop_reason = StopReason::Stop;
                }
                let key = slot_key(event);
                let slot = match self.slots.get(&key) {
                    Some(slot) => Some((slot.kind, slot.content_index)),
                    None => self
                        .create_slot(key.clone(), &item, out)
                        .await
                        .and_then(|_| self.slots.get(&key).map(|s| (s.kind, s.content_index))),
                };
                match (item_type, slot) {
                    ("reasoning", Some((SlotKind::Thinking, index))) => {
                        let join = |field: &str| {
                            item.get(field)
                                .and_then(Value::as_array)
                                .map(|parts| {
                                    parts
                                        .iter()
                                        .map(|p| p.get("text").and_then(Value::as_str).unwrap_or(""))
                                        .collect::<Vec<_>>()
                                        .join("\n\n")
                                })
                                .unwrap_or_default()
                        };
                        let summary = join("summary");
                        let content = join("content");
                        let signature = js_json::stringify(&item);
                        let block = out.thinking_mut(index)?;
                        // The final item restates the reasoning.
                        if !summary.is_empty() {
                            block.thinking = summary;
                        } else if !content.is_empty() {
                            block.thinking = content;
                        }
                        block.thinking_signature = Some(signature);
                        if let Some(id) = item.get("id").and_then(Value::as_str) {
                            self.reasoning_by_id.insert(id.to_owned(), index);
                        }
                        out.end_thinking(index).await?;
                        self.slots.remove(&key);
                    }
                    ("message", Some((SlotKind::Text, index))) => {
                        let text: String = item
                            .get("content")
                            .and_then(Value::as_array)
                            .map(|parts| {
                                parts
                                    .iter()
                                    .map(|c| {
                                        let field = if c.get("type").and_then(Value::as_str) == Some("output_text") {
                                            "text"
                                        } else {
                                            "refusal"
                                        };
                                        c.get(field).and_then(Value::as_str).unwrap_or("")
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        let mut signature = Map::new();
                        signature.insert("v".into(), json!(1));
                        if let Some(id) = item.get("id").filter(|v| !v.is_null()) {
                            signature.insert("id".into(), id.clone());
                        }
                        if let Some(phase) = item.get("phase").filter(|v| !v.is_null()) {
                            signature.insert("phase".into(), phase.clone());
                        }
                        let block = out.text_mut(index)?;
                        block.text = text;
                        block.text_signature = Some(js_json::stringify(&Value::Object(signature)));
                        out.end_text(index).await?;
                        self.slots.remove(&key);
                    }
                    ("function_call", Some((SlotKind::ToolCall, index))) => {
                        if let Some(namespace) = item.get("namespace").and_then(Value::as_str) {
                            out.tool_call_mut(index)?.namespace = Some(namespace.into());
                        }
                        match item.get("arguments").and_then(Value::as_str).filter(|a| !a.is_empty()) {
                            Some(text) => out.end_tool_call_with_arguments(index, text).await?,
                            None => out.end_tool_call(index).await?,
                        }
                        self.unfinished.remove(&index);
                        self.slots.remove(&key);
                    }
                    ("custom_tool_call", Some((SlotKind::CustomToolCall, index))) => {
                        let text = match self.custom_inputs.get_mut(&index) {
                            Some(input) => {
                                let text = input.close(item.get("input").and_then(Value::as_str))?;
                                input.send(text)
                            }
                            None => None,
                        };
                        if let Some(text) = text {
                            out.tool_call_delta(index, text).await?;
                        }
                        if let Some(namespace) = item.get("namespace").and_then(Value::as_str) {
                            out.tool_call_mut(index)?.namespace = Some(namespace.into());
                        }
                        // The arguments are the input itself, not a parse of the JSON text
                        // (equal unless a piece was left out).
                        let mut call = match out.message().content.get(index) {
                            Some(AssistantContent::ToolCall(call)) => call.clone(),
                            _ => ToolCall::default(),
                        };
                        let (property, input) = self.custom_inputs.remove(&index).map_or_else(
                            || (CUSTOM_INPUT_PROPERTY.to_owned(), String::new()),
                            |i| (i.property, i.input),
                        );
                        call.arguments = Map::new();
                        call.arguments.insert(property, Value::String(input));
                        out.end_tool_call_with(index, call).await?;
                        self.unfinished.remove(&index);
                        self.slots.remove(&key);
                    }
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = event.get("response").cloned().unwrap_or(Value::Null);
                self.finalize(model, options, &response, out)?;
            }
            "response.failed" => {
                self.saw_terminal = true;
                let response = event.get("response");
                out.metadata_mut().raw_stop_reason =
                    (response.and_then(|r| r.get("status")).and_then(Value::as_str).map(str::to_owned)).map(Into::into);
                let error = response.and_then(|r| r.get("error")).filter(|e| js_json::truthy(e));
                let details = response.and_then(|r| r.get("incomplete_details"));
                let text_of = |v: Option<&Value>, default: &str| {
                    v.filter(|v| js_json::truthy(v)).map_or_else(
                        || default.to_owned(),
                        |v| v.as_str().map_or_else(|| js_json::stringify(v), str::to_owned),
                    )
                };
                let message = if let Some(error) = error {
                    format!(
                        "{}: {}",
                        text_of(error.get("code"), "unknown"),
                        text_of(error.get("message"), "no message")
                    )
                } else if let Some(reason) = details.and_then(|d| d.get("reason")).filter(|r| js_json::truthy(r)) {
                    format!("incomplete: {}", text_of(Some(reason), ""))
                } else {
                    "Unknown error (no error details in response)".to_owned()
                };
                return Err(Stop::error(message));
            }
            _ => {}
        }
        Ok(())
    }

    fn finalize(
        &mut self,
        model: &Model,
        options: &StreamOptions,
        response: &Value,
        out: &mut AssistantMessageBuilder,
    ) -> Result<(), Stop> {
        self.saw_terminal = true;
        for item in response.get("output").and_then(Value::as_array).into_iter().flatten() {
            if item.get("type").and_then(Value::as_str) != Some("reasoning") {
                continue;
            }
            let Some(encrypted) = item.get("encrypted_content").filter(|e| js_json::truthy(e)) else { continue };
            let Some(index) = item.get("id").and_then(Value::as_str).and_then(|id| self.reasoning_by_id.get(id)) else {
                continue;
            };
            if let Ok(block) = out.thinking_mut(*index) {
                let Some(stored) = block.thinking_signature.as_deref().and_then(|s| js_json::parse(s).ok()) else {
                    continue;
                };
                if stored.get("encrypted_content").is_some_and(js_json::truthy) {
                    continue;
                }
                let mut stored = stored.as_object().cloned().unwrap_or_default();
                stored.insert("encrypted_content".into(), encrypted.clone());
                block.thinking_signature = Some(js_json::stringify(&Value::Object(stored)));
            }
        }
        let has_tool_call = out.message().tool_calls().next().is_some();
        let mut m = out.metadata_mut();
        if let Some(id) = response.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            m.response_id = Some(id.to_owned().into());
        }
        if let Some(usage) = response.get("usage").filter(|u| js_json::truthy(u)) {
            let details = usage.get("input_tokens_details");
            let cached = n(details.and_then(|d| d.get("cached_tokens")));
            let written = n(details.and_then(|d| d.get("cache_write_tokens")));
            m.usage = pi_types::Usage {
                input: n(usage.get("input_tokens")).saturating_sub(cached).saturating_sub(written),
                output: n(usage.get("output_tokens")),
                cache_read: cached,
                cache_write: written,
                reasoning: Some(n(usage.get("output_tokens_details").and_then(|d| d.get("reasoning_tokens")))),
                total_tokens: n(usage.get("total_tokens")),
                ..Default::default()
            };
        }
        crate::cost::calculate_cost(model, &mut m.usage);
        let multiplier = self.tier_pricing.multiplier(model, response.get("service_tier").and_then(Value::as_str));
        if multiplier != 1.0 {
            let cost = &mut m.usage.cost;
            cost.input *= multiplier;
            cost.output *= multiplier;
            cost.cache_read *= multiplier;
            cost.cache_write *= multiplier;
            cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write;
        }
        let _ = options;
        let status = response.get("status").and_then(Value::as_str).filter(|s| !s.is_empty());
        let reason = response.get("incomplete_details").and_then(|d| d.get("reason")).and_then(Value::as_str);
        m.raw_stop_reason = match (status, reason) {
            (Some(status), Some(reason)) => Some(format!("{status}.{reason}").into()),
            (None, Some(reason)) => Some(format!("undefined.{reason}").into()),
            (status, None) => status.map(Box::from),
        };
        let (stop, error) = match status {
            None | Some("completed" | "in_progress" | "queued") => (StopReason::Stop, None),
            Some("incomplete") => match reason {
                Some("max_output_tokens") => (StopReason::Length, None),
                Some(reason) => (StopReason::Error, Some(format!("Response incomplete: {reason}"))),
                None => (StopReason::Error, Some("Response incomplete without a provider reason".to_owned())),
            },
            Some("failed" | "cancelled") => (StopReason::Error, None),
            Some(other) => return Err(Stop::error(format!("Unhandled stop reason: {other}"))),
        };
        m.stop_reason = stop;
        m.error_message = (error).map(Into::into);
        if m.stop_reason == StopReason::Stop && has_tool_call {
            m.stop_reason = StopReason::ToolUse;
        }
        Ok(())
    }
}
