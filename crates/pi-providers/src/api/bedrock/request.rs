//! The Converse request body: messages, system blocks, tool configuration, inference
//! configuration, model-specific fields (thinking) and prompt-cache points.

use pi_types::transcript::{
    collapse_system_messages, current_tools, initial_system_message, system_message_text,
    without_initial_system_message,
};
use pi_types::{
    AssistantContent, CacheRetention, Message, Model, StreamOptions, ThinkingBudgets, ThinkingLevel, Tool, ToolChoice,
    TranscriptContext, UserContent, UserMessageContent,
};
use serde_json::{json, Map, Value};

use super::options::{BedrockOptions, BedrockThinkingDisplay, BedrockToolChoice};
use crate::api::own_options;
use crate::api::request_options;
use crate::api::support as adapter_support;
use crate::api::transform::{sanitize_id, split_error_tool_result_images, take_units, transform_messages};

/// Text sent for a block that must not be empty.
const EMPTY_TEXT: &str = "<empty>";
const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
const THINKING_BINDING_CONTROLS_BETA: &str = "thinking-binding-controls-2026-08-01";

/// The model id and name in the spellings the model checks compare against.
fn match_candidates(model: &Model) -> Vec<String> {
    let mut values = vec![model.id.to_string()];
    if !model.name.is_empty() {
        values.push(model.name.to_string());
    }
    values
        .into_iter()
        .flat_map(|value| {
            let lower = value.to_lowercase();
            let mut dashed = String::with_capacity(lower.len());
            let mut in_run = false;
            for c in lower.chars() {
                if c.is_whitespace() || c == '_' || c == '.' || c == ':' {
                    if !in_run {
                        dashed.push('-');
                    }
                    in_run = true;
                } else {
                    dashed.push(c);
                    in_run = false;
                }
            }
            [lower, dashed]
        })
        .collect()
}

fn any_candidate(model: &Model, needles: &[&str]) -> bool {
    match_candidates(model).iter().any(|c| needles.iter().any(|n| c.contains(n)))
}

/// An Anthropic Claude model on Bedrock (by id or, for inference profiles, by name).
pub(crate) fn is_claude(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    let name = model.name.to_lowercase();
    id.contains("anthropic.claude")
        || id.contains("anthropic/claude")
        || name.contains("anthropic.claude")
        || name.contains("anthropic/claude")
        || name.contains("claude")
}

fn supports_adaptive_thinking(model: &Model) -> bool {
    any_candidate(
        model,
        &["opus-4-6", "opus-4-7", "opus-4-8", "opus-5", "sonnet-4-6", "sonnet-5", "haiku-5", "fable-5"],
    )
}

fn supports_native_xhigh(model: &Model) -> bool {
    any_candidate(model, &["opus-4-7", "opus-4-8", "opus-5", "sonnet-5", "haiku-5", "fable-5"])
}

fn supports_block_binding(model: &Model) -> bool {
    supports_native_xhigh(model)
}

/// Claude models that take explicit cache points (or any model with `AWS_BEDROCK_FORCE_CACHE=1`).
fn supports_prompt_caching(model: &Model, options: &StreamOptions) -> bool {
    let candidates = match_candidates(model);
    if !candidates.iter().any(|c| c.contains("claude")) {
        return options.env_var("AWS_BEDROCK_FORCE_CACHE").as_deref() == Some("1");
    }
    candidates.iter().any(|c| {
        c.contains("fable-5")
            || c.contains("opus-5")
            || c.contains("sonnet-5")
            || c.contains("haiku-5")
            || c.contains("-4-")
            || c.contains("claude-3-7-sonnet")
            || c.contains("claude-3-5-haiku")
    })
}

/// The cache retention: the option, else `PI_CACHE_RETENTION=long`, else short.
pub(crate) fn cache_retention(options: &StreamOptions) -> CacheRetention {
    options.cache_retention.unwrap_or_else(|| {
        if options.env_var("PI_CACHE_RETENTION").as_deref() == Some("long") {
            CacheRetention::Long
        } else {
            CacheRetention::Short
        }
    })
}

fn cache_point(retention: CacheRetention) -> Value {
    match retention {
        CacheRetention::Long => json!({"cachePoint": {"type": "default", "ttl": "1h"}}),
        _ => json!({"cachePoint": {"type": "default"}}),
    }
}

fn non_blank_text(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"text": text}))
}

fn image_block(mime_type: &str, data: &str) -> Result<Value, String> {
    let format = match mime_type {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        other => return Err(format!("Unknown image type: {other}")),
    };
    Ok(json!({"image": {"format": format, "source": {"bytes": data}}}))
}

/// Tool-call arguments without empty keys (Bedrock rejects them), recursively.
fn sanitize_document(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(sanitize_document).collect()),
        Value::Object(map) => Value::Object(
            map.iter().filter(|(k, _)| !k.is_empty()).map(|(k, v)| (k.clone(), sanitize_document(v))).collect(),
        ),
        other => other.clone(),
    }
}

fn tool_result_content(content: &[UserContent]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for block in content {
        match block {
            UserContent::Image(image) => out.push(image_block(&image.mime_type, &image.data)?),
            UserContent::Text(text) => out.extend(non_blank_text(&text.text)),
        }
    }
    if out.is_empty() {
        out.push(json!({"text": EMPTY_TEXT}));
    }
    Ok(out)
}

/// Redacted reasoning is stored base64; anything else is dropped.
fn redacted_content(signature: Option<&str>) -> Option<String> {
    let signature = signature?;
    let bytes = aws_smithy_types::base64::decode(signature).ok()?;
    (!bytes.is_empty()).then(|| aws_smithy_types::base64::encode(&bytes))
}

fn convert_messages(context: &TranscriptContext, model: &Model, options: &StreamOptions) -> Result<Vec<Value>, String> {
    let conversation = without_initial_system_message(context.messages());
    let normalize = |id: &str, _: &Model, _: &pi_types::AssistantMessage| take_units(&sanitize_id(id), 64);
    let transformed = transform_messages(conversation, model, Some(&normalize));
    let claude = is_claude(model);
    let mut result: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < transformed.len() {
        match &transformed[i] {
            Message::User(user) => {
                let mut content = Vec::new();
                match &user.content {
                    UserMessageContent::Text(text) => {
                        content.push(non_blank_text(text).unwrap_or_else(|| json!({"text": EMPTY_TEXT})));
                    }
                    UserMessageContent::Blocks(blocks) => {
                        for block in blocks {
                            match block {
                                UserContent::Text(text) => content.extend(non_blank_text(&text.text)),
                                UserContent::Image(image) => content.push(image_block(&image.mime_type, &image.data)?),
                            }
                        }
                        if content.is_empty() {
                            content.push(json!({"text": EMPTY_TEXT}));
                        }
                    }
                }
                result.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(assistant) => {
                let mut blocks = Vec::new();
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(text) => blocks.extend(non_blank_text(&text.text)),
                        AssistantContent::ToolCall(call) => blocks.push(json!({"toolUse": {
                            "toolUseId": call.id.as_str(),
                            "name": call.name.as_str(),
                            "input": sanitize_document(&Value::Object(call.arguments.clone())),
                        }})),
                        AssistantContent::Thinking(thinking) => {
                            if thinking.redacted == Some(true) {
                                if let Some(data) = redacted_content(thinking.thinking_signature.as_deref()) {
                                    blocks.push(json!({"reasoningContent": {"redactedContent": data}}));
                                }
                                continue;
                            }
                            if thinking.thinking.trim().is_empty() {
                                continue;
                            }
                            if !claude {
                                blocks
                                    .push(json!({"reasoningContent": {"reasoningText": {"text": thinking.thinking}}}));
                                continue;
                            }
                            match thinking.thinking_signature.as_deref().filter(|s| !s.trim().is_empty()) {
                                None => blocks.push(json!({"text": thinking.thinking})),
                                Some(signature) => blocks.push(json!({"reasoningContent": {"reasoningText": {
                                    "text": thinking.thinking,
                                    "signature": signature,
                                }}})),
                            }
                        }
                    }
                }
                if !blocks.is_empty() {
                    result.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Message::ToolResult(_) => {
                let mut results = Vec::new();
                let mut error_images = Vec::new();
                while let Some(Message::ToolResult(tool)) = transformed.get(i) {
                    let split = if claude { split_error_tool_result_images(tool) } else { None };
                    let content = match &split {
                        Some((content, _, _)) => tool_result_content(content)?,
                        None => tool_result_content(&tool.content)?,
                    };
                    results.push(json!({"toolResult": {
                        "toolUseId": tool.tool_call_id.as_str(),
                        "content": content,
                        "status": if tool.is_error { "error" } else { "success" },
                    }}));
                    if let Some((_, caption, images)) = split {
                        error_images.push(json!({"text": caption}));
                        for image in images {
                            if let UserContent::Image(image) = image {
                                error_images.push(image_block(&image.mime_type, &image.data)?);
                            }
                        }
                    }
                    i += 1;
                }
                results.extend(error_images);
                result.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let retention = cache_retention(options);
    if retention != CacheRetention::None && supports_prompt_caching(model, options) {
        if let Some(last) = result.last_mut().filter(|m| m.get("role").and_then(Value::as_str) == Some("user")) {
            if let Some(content) = last.get_mut("content").and_then(Value::as_array_mut) {
                content.push(cache_point(retention));
            }
        }
    }
    Ok(result)
}

fn system_blocks(prompt: Option<String>, model: &Model, options: &StreamOptions) -> Option<Vec<Value>> {
    let prompt = prompt.filter(|p| !p.is_empty())?;
    let mut blocks = vec![json!({"text": prompt})];
    let retention = cache_retention(options);
    if retention != CacheRetention::None && supports_prompt_caching(model, options) {
        blocks.push(cache_point(retention));
    }
    Some(blocks)
}

fn tool_config(tools: &[Tool], options: &StreamOptions, model: &Model) -> Result<Option<Value>, String> {
    let choice = own_options::lookup::<BedrockOptions>(model, options).field(|api| &api.tool_choice).or(match options
        .tool_choice
    {
        Some(ToolChoice::Auto) => Some(BedrockToolChoice::Auto),
        Some(ToolChoice::None) => Some(BedrockToolChoice::None),
        None => None,
    });
    if tools.is_empty() || choice == Some(BedrockToolChoice::None) {
        return Ok(None);
    }
    let supports_strict =
        model.compat.as_ref().and_then(|c| c.get("supportsStrictMode")).and_then(Value::as_bool).unwrap_or(false);
    let mut specs = Vec::with_capacity(tools.len());
    for tool in tools {
        let strict = adapter_support::resolve_strict(tool, supports_strict, None)?;
        let mut spec = Map::new();
        spec.insert("name".into(), json!(tool.name));
        spec.insert("description".into(), json!(tool.description));
        spec.insert("inputSchema".into(), json!({"json": adapter_support::tool_parameters(tool, strict)}));
        if strict == Some(true) {
            spec.insert("strict".into(), json!(true));
        }
        specs.push(json!({"toolSpec": spec}));
    }
    let mut config = Map::new();
    config.insert("tools".into(), Value::Array(specs));
    match choice {
        Some(BedrockToolChoice::Auto) => _ = config.insert("toolChoice".into(), json!({"auto": {}})),
        Some(BedrockToolChoice::Any) => _ = config.insert("toolChoice".into(), json!({"any": {}})),
        Some(BedrockToolChoice::Tool(name)) => _ = config.insert("toolChoice".into(), json!({"tool": {"name": name}})),
        Some(BedrockToolChoice::None) | None => {}
    }
    Ok(Some(Value::Object(config)))
}

/// The region an adapter would sign for, as configured ([`BedrockOptions::region`], then the
/// option env, then the process env).
pub(crate) fn configured_region(model: &Model, options: &StreamOptions) -> Option<String> {
    own_options::lookup::<BedrockOptions>(model, options)
        .field(|api| &api.region)
        .filter(|r| !r.is_empty())
        .or_else(|| options.env_var("AWS_REGION"))
        .or_else(|| options.env_var("AWS_DEFAULT_REGION"))
}

fn is_gov_cloud(model: &Model, options: &StreamOptions) -> bool {
    if configured_region(model, options).is_some_and(|r| r.to_lowercase().starts_with("us-gov-")) {
        return true;
    }
    let id = model.id.to_lowercase();
    id.starts_with("us-gov.") || id.starts_with("arn:aws-us-gov:")
}

fn effort_for(model: &Model, level: ThinkingLevel) -> String {
    if level == ThinkingLevel::Xhigh && supports_native_xhigh(model) {
        return "xhigh".into();
    }
    if let Some(Some(mapped)) = request_options::mapped_level(model, level) {
        return mapped.to_owned();
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .into()
}

/// Thinking settings after `streamSimple`'s option mapping (or, for a `stream()` call, as the
/// [`BedrockOptions`] give them): the output cap and, for budget thinking, the budget of the
/// level, with the display and interleaved-beta choices.
pub(crate) struct Thinking {
    pub level: Option<ThinkingLevel>,
    /// `None`: no `maxTokens` (a `stream()` call without one, on a model other than Claude).
    pub max_tokens: Option<u64>,
    pub budget: Option<u64>,
    pub display: BedrockThinkingDisplay,
    pub interleaved: bool,
}

pub(crate) fn resolve_thinking(model: &Model, context: &TranscriptContext, options: &StreamOptions) -> Thinking {
    let api = own_options::lookup::<BedrockOptions>(model, options);
    let mut thinking = match api.is_own() {
        true => own_thinking(model, options, api.get()),
        false => simple_thinking(model, context, options, api.get()),
    };
    thinking.display = api.field(|api| &api.thinking_display).unwrap_or(BedrockThinkingDisplay::Summarized);
    thinking.interleaved = api.field(|api| &api.interleaved_thinking).unwrap_or(true);
    thinking
}

fn level_budget(budgets: Option<&ThinkingBudgets>, level: ThinkingLevel) -> Option<u64> {
    budgets.and_then(|b| match request_options::clamp_reasoning(level) {
        ThinkingLevel::Minimal => b.minimal,
        ThinkingLevel::Low => b.low,
        ThinkingLevel::Medium => b.medium,
        ThinkingLevel::High => b.high,
        _ => None,
    })
}

fn default_budget(level: ThinkingLevel) -> u64 {
    match level {
        ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium => 8192,
        _ => 16384,
    }
}

/// The reference's `stream()`: the level and budgets as given, `maxTokens` as given (Claude:
/// else the model's limit).
fn own_thinking(model: &Model, options: &StreamOptions, api: Option<&BedrockOptions>) -> Thinking {
    let level = api.and_then(|api| api.reasoning).or(options.reasoning).filter(|l| *l != ThinkingLevel::Off);
    let budgets = api.and_then(|api| api.thinking_budgets.as_deref()).or(options.thinking_budgets.as_deref());
    Thinking {
        level,
        max_tokens: options.max_tokens.or_else(|| is_claude(model).then_some(model.max_tokens)),
        budget: level.map(|level| level_budget(budgets, level).unwrap_or_else(|| default_budget(level))),
        display: BedrockThinkingDisplay::Summarized,
        interleaved: true,
    }
}

fn simple_thinking(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
    api: Option<&BedrockOptions>,
) -> Thinking {
    let base = request_options::base_max_tokens(model, context, options.max_tokens);
    let thinking = |level, max_tokens, budget| Thinking {
        level,
        max_tokens: Some(max_tokens),
        budget,
        display: BedrockThinkingDisplay::Summarized,
        interleaved: true,
    };
    let reasoning = api.and_then(|api| api.reasoning).or(options.reasoning);
    let Some(level) = reasoning.filter(|l| *l != ThinkingLevel::Off) else {
        return thinking(None, base, None);
    };
    let budgets = api.and_then(|api| api.thinking_budgets.as_deref()).or(options.thinking_budgets.as_deref());
    if is_claude(model) && !supports_adaptive_thinking(model) {
        let (adjusted, budget) =
            request_options::adjust_max_tokens_for_thinking(Some(base), model.max_tokens, level, budgets);
        let max_tokens = request_options::clamp_max_tokens_to_context(model, context, adjusted);
        let budget = budget.min(max_tokens.saturating_sub(request_options::MIN_ANSWER_TOKENS));
        return thinking(Some(level), max_tokens, Some(budget));
    }
    thinking(Some(level), base, Some(level_budget(budgets, level).unwrap_or_else(|| default_budget(level))))
}

fn additional_fields(model: &Model, options: &StreamOptions, thinking: &Thinking) -> Option<Value> {
    let level = thinking.level?;
    if !model.reasoning {
        return None;
    }
    if is_claude(model) {
        let gov = is_gov_cloud(model, options);
        let mut fields = Map::new();
        if supports_adaptive_thinking(model) {
            let binding = !gov && supports_block_binding(model);
            let mut config = Map::new();
            config.insert("type".into(), json!("adaptive"));
            if !gov {
                config.insert("display".into(), json!(thinking.display.as_str()));
            }
            if binding {
                config.insert("block_binding".into(), json!({"prefix_mismatch_behavior": "drop_block"}));
            }
            fields.insert("thinking".into(), Value::Object(config));
            fields.insert("output_config".into(), json!({"effort": effort_for(model, level)}));
            if binding {
                fields.insert("anthropic_beta".into(), json!([THINKING_BINDING_CONTROLS_BETA]));
            }
        } else {
            let mut config = Map::new();
            config.insert("type".into(), json!("enabled"));
            config.insert("budget_tokens".into(), json!(thinking.budget.unwrap_or(0)));
            if !gov {
                config.insert("display".into(), json!(thinking.display.as_str()));
            }
            fields.insert("thinking".into(), Value::Object(config));
            if thinking.interleaved {
                fields.insert("anthropic_beta".into(), json!([INTERLEAVED_THINKING_BETA]));
            }
        }
        return Some(Value::Object(fields));
    }
    let candidates = match_candidates(model);
    if candidates.iter().any(|c| c.contains("gpt-oss")) {
        let effort = match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        };
        return Some(json!({"reasoning_effort": effort}));
    }
    if candidates.iter().any(|c| c.contains("gpt-")) {
        let effort = match request_options::mapped_level(model, level) {
            Some(Some(mapped)) => mapped.to_owned(),
            _ => match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low".into(),
                ThinkingLevel::Medium => "medium".into(),
                ThinkingLevel::High => "high".into(),
                ThinkingLevel::Xhigh => "xhigh".into(),
                ThinkingLevel::Max => "max".into(),
                ThinkingLevel::Off => "low".into(),
            },
        };
        return Some(json!({"reasoning": {"effort": effort}}));
    }
    None
}

/// The Converse request body for `model` (the model id goes in the URL path).
/// Public so that an application can see what its model and options put on the wire without a
/// server (this crate's own tests of the request fields use it, and cannot reach private items);
/// the body is the one sent when no `on_payload` hook changes it.
///
/// # Errors
///
/// An image of a type Bedrock does not take, or a tool that requires strict sampling the
/// model cannot give.
pub fn build_request_body(
    model: &Model,
    context: &TranscriptContext,
    options: &StreamOptions,
) -> Result<Value, String> {
    let thinking = resolve_thinking(model, context, options);
    let collapsed = collapse_system_messages(context.clone());
    let tools = current_tools(collapsed.messages());
    let system = initial_system_message(collapsed.messages()).map(system_message_text);
    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(convert_messages(&collapsed, model, options)?));
    if let Some(system) = system_blocks(system, model, options) {
        body.insert("system".into(), Value::Array(system));
    }
    let mut inference = Map::new();
    if let Some(max_tokens) = thinking.max_tokens {
        inference.insert("maxTokens".into(), json!(max_tokens));
    }
    if let Some(temperature) = options.temperature {
        inference.insert("temperature".into(), json!(temperature));
    }
    body.insert("inferenceConfig".into(), Value::Object(inference));
    if let Some(config) = tool_config(&tools, options, model)? {
        body.insert("toolConfig".into(), config);
    }
    if let Some(fields) = additional_fields(model, options, &thinking) {
        body.insert("additionalModelRequestFields".into(), fields);
    }
    if let Some(metadata) = own_options::lookup::<BedrockOptions>(model, options).field(|api| &api.request_metadata) {
        body.insert("requestMetadata".into(), json!(metadata));
    }
    Ok(Value::Object(body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use pi_types::transcript::normalize_context;
    use pi_types::{Context, ImageContent, TextContent, ToolResultMessage, UserMessage};

    use super::*;

    fn model(id: &str, name: &str) -> Model {
        let mut model = Model::new(id).with_api("bedrock-converse-stream").with_provider("amazon-bedrock");
        model.name = name.into();
        model.max_tokens = 8192;
        model.context_window = 200_000;
        model.reasoning = true;
        model
    }

    fn context(messages: Vec<Message>, tools: Option<Vec<Tool>>) -> TranscriptContext {
        normalize_context(Context { system_prompt: Some("Be brief.".into()), messages, tools })
    }

    fn tool() -> Tool {
        Tool {
            name: "get_weather".into(),
            description: "Weather".into(),
            parameters: Arc::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
            constrained_sampling: None,
        }
    }

    #[test]
    fn temperature_tool_choice_and_no_cache_points_for_other_models() {
        let options = StreamOptions {
            max_tokens: Some(100),
            temperature: Some(0.5),
            tool_choice: Some(ToolChoice::Auto),
            ..Default::default()
        };
        let model = model("amazon.nova-pro-v1:0", "Nova Pro");
        let ctx = context(vec![Message::from(UserMessage::text("  "))], Some(vec![tool()]));
        let body = build_request_body(&model, &ctx, &options).unwrap();
        assert_eq!(body["inferenceConfig"], json!({"maxTokens": 100, "temperature": 0.5}));
        assert_eq!(body["toolConfig"]["toolChoice"], json!({"auto": {}}));
        assert_eq!(body["system"], json!([{"text": "Be brief."}]));
        assert_eq!(body["messages"], json!([{"role": "user", "content": [{"text": "<empty>"}]}]));

        let none = StreamOptions { tool_choice: Some(ToolChoice::None), ..options };
        assert!(build_request_body(&model, &ctx, &none).unwrap().get("toolConfig").is_none());
    }

    #[test]
    fn claude_cache_points_follow_the_retention() {
        let model = model("anthropic.claude-haiku-4-5-20251001-v1:0", "Claude Haiku 4.5");
        let ctx = context(vec![Message::from(UserMessage::text("Hi"))], None);
        let off = StreamOptions { cache_retention: Some(CacheRetention::None), ..Default::default() };
        let body = build_request_body(&model, &ctx, &off).unwrap();
        assert_eq!(body["system"], json!([{"text": "Be brief."}]));
        let long = StreamOptions { cache_retention: Some(CacheRetention::Long), ..Default::default() };
        let body = build_request_body(&model, &ctx, &long).unwrap();
        assert_eq!(body["system"][1], json!({"cachePoint": {"type": "default", "ttl": "1h"}}));
        assert_eq!(body["messages"][0]["content"][1], json!({"cachePoint": {"type": "default", "ttl": "1h"}}));
    }

    #[test]
    fn images_and_error_tool_results() {
        let model = model("anthropic.claude-sonnet-4-5-20250929-v1:0", "Claude Sonnet 4.5");
        let mut model = model;
        model.input = vec![pi_types::InputModality::Text, pi_types::InputModality::Image];
        let image = UserContent::Image(ImageContent { data: "aGk=".into(), mime_type: "image/png".into() });
        let call = pi_types::AssistantMessage {
            content: vec![AssistantContent::ToolCall(pi_types::ToolCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: json!({"city": "Paris", "": 1}).as_object().cloned().unwrap(),
                ..Default::default()
            })],
            api: "bedrock-converse-stream".into(),
            provider: "amazon-bedrock".into(),
            model: model.id.clone(),
            stop_reason: pi_types::StopReason::ToolUse,
            ..Default::default()
        };
        let result = ToolResultMessage {
            tool_call_id: "call_1".into(),
            tool_name: "get_weather".into(),
            content: vec![UserContent::Text(TextContent { text: "failed".into(), text_signature: None }), image],
            is_error: true,
            ..Default::default()
        };
        let ctx = context(
            vec![Message::from(UserMessage::text("Hi")), Message::from(call), Message::from(result)],
            Some(vec![tool()]),
        );
        let options = StreamOptions { cache_retention: Some(CacheRetention::None), ..Default::default() };
        let body = build_request_body(&model, &ctx, &options).unwrap();
        assert_eq!(
            body["messages"][1]["content"][0]["toolUse"],
            json!({"toolUseId": "call_1", "name": "get_weather", "input": {"city": "Paris"}})
        );
        let results = body["messages"][2]["content"].as_array().unwrap();
        assert_eq!(results[0]["toolResult"]["status"], "error");
        assert_eq!(results[2], json!({"image": {"format": "png", "source": {"bytes": "aGk="}}}));

        let bad = UserContent::Image(ImageContent { data: "aGk=".into(), mime_type: "image/tiff".into() });
        let ctx = context(
            vec![Message::from(UserMessage { content: UserMessageContent::Blocks(vec![bad]), timestamp: 0 })],
            None,
        );
        assert_eq!(build_request_body(&model, &ctx, &options).unwrap_err(), "Unknown image type: image/tiff");
    }

    #[test]
    fn thinking_fields_by_model_family() {
        let ctx = context(vec![Message::from(UserMessage::text("Hi"))], None);
        let high = StreamOptions { reasoning: Some(ThinkingLevel::High), max_tokens: Some(1000), ..Default::default() };
        let opus = model("global.anthropic.claude-opus-4-7-v1", "Claude Opus 4.7");
        let body = build_request_body(&opus, &ctx, &high).unwrap();
        assert_eq!(body["additionalModelRequestFields"]["output_config"], json!({"effort": "high"}));
        assert_eq!(body["additionalModelRequestFields"]["anthropic_beta"], json!([THINKING_BINDING_CONTROLS_BETA]));
        assert_eq!(body["inferenceConfig"]["maxTokens"], 1000);
        let gpt = model("openai.gpt-5-6", "GPT-5.6");
        let minimal = StreamOptions { reasoning: Some(ThinkingLevel::Minimal), ..Default::default() };
        let body = build_request_body(&gpt, &ctx, &minimal).unwrap();
        assert_eq!(body["additionalModelRequestFields"], json!({"reasoning": {"effort": "low"}}));
        let mut plain = model("amazon.nova-pro-v1:0", "Nova Pro");
        plain.reasoning = false;
        assert!(build_request_body(&plain, &ctx, &high).unwrap().get("additionalModelRequestFields").is_none());
    }
}
