//! Request options shared by the adapters (`simple-options.js`, `estimate.js`,
//! `clampThinkingLevel`): output-token clamping, thinking levels and budgets, sampling
//! parameters.

use pi_types::transcript::system_message_text;
use pi_types::{
    AssistantContent, Message, Model, ThinkingBudgets, ThinkingLevel, TranscriptContext, Usage, UserContent,
    UserMessageContent,
};
use serde_json::{Map, Value};

const CHARS_PER_TOKEN: f64 = 3.5;
const ESTIMATED_IMAGE_CHARS: usize = 4800;
const CONTEXT_SAFETY_TOKENS: i64 = 4096;
const CONTEXT_SAFETY_RATIO: f64 = 0.15;
const MIN_OUTPUT_WITH_RATIO_MARGIN: i64 = 32768;
/// Tokens always left for the answer when a thinking budget shares the response ceiling.
pub const MIN_ANSWER_TOKENS: u64 = 1024;

fn utf16(text: &str) -> usize {
    text.encode_utf16().count()
}

fn ceil_tokens(chars: usize) -> i64 {
    (chars as f64 / CHARS_PER_TOKEN).ceil() as i64
}

fn usage_tokens(usage: &Usage) -> u64 {
    if usage.total_tokens > 0 {
        usage.total_tokens
    } else {
        usage.input.saturating_add(usage.output).saturating_add(usage.cache_read).saturating_add(usage.cache_write)
    }
}

fn blocks_chars(blocks: &[UserContent]) -> usize {
    blocks
        .iter()
        .map(|b| match b {
            UserContent::Text(t) => utf16(&t.text),
            UserContent::Image(_) => ESTIMATED_IMAGE_CHARS,
        })
        .sum()
}

fn json_len<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_value(value).map(|v| utf16(&crate::js_json::stringify(&v))).unwrap_or(0)
}

/// Estimated tokens of one message (3.5 characters per token).
pub fn estimate_message_tokens(message: &Message) -> i64 {
    match message {
        Message::System(system) => {
            let tools = |len: Option<usize>| len.map_or(0, ceil_tokens);
            ceil_tokens(utf16(&system_message_text(system)))
                + tools(system.tools_added.as_ref().filter(|t| !t.is_empty()).map(json_len))
                + tools(system.tools_removed.as_ref().filter(|t| !t.is_empty()).map(json_len))
        }
        Message::User(user) => match &user.content {
            UserMessageContent::Text(text) => ceil_tokens(utf16(text)),
            UserMessageContent::Blocks(blocks) => ceil_tokens(blocks_chars(blocks)),
        },
        Message::ToolResult(result) => ceil_tokens(blocks_chars(&result.content)),
        Message::Assistant(assistant) => {
            let chars: usize = assistant
                .content
                .iter()
                .map(|block| match block {
                    AssistantContent::Text(t) => utf16(&t.text),
                    AssistantContent::Thinking(t) => utf16(&t.thinking),
                    AssistantContent::ToolCall(call) => utf16(&call.name) + json_len(&call.arguments),
                })
                .sum();
            ceil_tokens(chars)
        }
    }
}

fn message_timestamp(message: &Message) -> u64 {
    match message {
        Message::System(m) => m.timestamp,
        Message::User(m) => m.timestamp,
        Message::Assistant(m) => m.timestamp,
        Message::ToolResult(m) => m.timestamp,
    }
}

/// Estimated context size: the last usable assistant usage plus estimates of later messages.
pub fn estimate_context_tokens(messages: &[Message]) -> i64 {
    let mut latest_prefix = f64::NEG_INFINITY;
    let mut usage_info: Option<(u64, usize)> = None;
    for (index, message) in messages.iter().enumerate() {
        if let Message::Assistant(assistant) = message {
            let applies = assistant.timestamp as f64 >= latest_prefix;
            if applies
                && !matches!(assistant.stop_reason, pi_types::StopReason::Aborted | pi_types::StopReason::Error)
                && usage_tokens(&assistant.usage) > 0
            {
                usage_info = Some((usage_tokens(&assistant.usage), index));
            }
        }
        latest_prefix = latest_prefix.max(message_timestamp(message) as f64);
    }
    match usage_info {
        Some((tokens, index)) => tokens as i64 + messages[index + 1..].iter().map(estimate_message_tokens).sum::<i64>(),
        None => messages.iter().map(estimate_message_tokens).sum(),
    }
}

/// Fit `max_tokens` into the context window with a safety margin for the input estimate.
pub fn clamp_max_tokens_to_context(model: &Model, context: &TranscriptContext, max_tokens: u64) -> u64 {
    let max_tokens = max_tokens as i64;
    if model.context_window == 0 {
        return max_tokens.max(1) as u64;
    }
    let window = model.context_window as i64;
    let input = estimate_context_tokens(context.messages());
    let margin = CONTEXT_SAFETY_TOKENS.max((input as f64 * CONTEXT_SAFETY_RATIO).ceil() as i64);
    let mut room = window - input - margin;
    if room < MIN_OUTPUT_WITH_RATIO_MARGIN {
        room = MIN_OUTPUT_WITH_RATIO_MARGIN.min(window - input - CONTEXT_SAFETY_TOKENS);
    }
    max_tokens.min(room.max(1)).max(0) as u64
}

/// The levels a model supports, `Off` first.
pub fn supported_thinking_levels(model: &Model) -> Vec<ThinkingLevel> {
    if !model.reasoning {
        return vec![ThinkingLevel::Off];
    }
    ThinkingLevel::ALL
        .into_iter()
        .filter(|level| {
            let mapped = model.thinking_level_map.as_ref().and_then(|m| m.get(level));
            match mapped {
                Some(None) => false,
                Some(Some(_)) => true,
                None => !matches!(level, ThinkingLevel::Xhigh | ThinkingLevel::Max),
            }
        })
        .collect()
}

/// The nearest supported level: the requested one, else the next higher, else the next lower.
pub fn clamp_thinking_level(model: &Model, level: ThinkingLevel) -> ThinkingLevel {
    let available = supported_thinking_levels(model);
    if available.contains(&level) {
        return level;
    }
    let all = ThinkingLevel::ALL;
    let index = all.iter().position(|l| *l == level).unwrap_or(0);
    all[index..]
        .iter()
        .chain(all[..index].iter().rev())
        .find(|l| available.contains(l))
        .copied()
        .unwrap_or_else(|| available.first().copied().unwrap_or(ThinkingLevel::Off))
}

/// The provider-native value of a level: `Some(Some(v))` mapped, `Some(None)` unsupported,
/// `None` no mapping.
pub(crate) fn mapped_level(model: &Model, level: ThinkingLevel) -> Option<Option<&str>> {
    model.thinking_level_map.as_ref()?.get(&level).map(|v| v.as_deref())
}

/// `thinkingLevelMap[level] ?? level` (a `null` mapping also falls back to the level).
pub(crate) fn mapped_or_level(model: &Model, level: ThinkingLevel) -> String {
    match mapped_level(model, level) {
        Some(Some(value)) => value.to_owned(),
        _ => level.as_str().to_owned(),
    }
}

/// Whether `thinkingLevelMap.off` is explicitly `null` (thinking cannot be turned off).
pub(crate) fn off_is_null(model: &Model) -> bool {
    matches!(mapped_level(model, ThinkingLevel::Off), Some(None))
}

/// `xhigh` and `max` use the `high` budget.
pub fn clamp_reasoning(level: ThinkingLevel) -> ThinkingLevel {
    match level {
        ThinkingLevel::Xhigh | ThinkingLevel::Max => ThinkingLevel::High,
        other => other,
    }
}

/// The thinking budget of a level (custom budgets override 1024/2048/8192/16384).
pub fn thinking_budget_for_level(level: ThinkingLevel, custom: Option<&ThinkingBudgets>) -> u64 {
    let custom = custom.cloned().unwrap_or_default();
    match clamp_reasoning(level) {
        ThinkingLevel::Minimal => custom.minimal.unwrap_or(1024),
        ThinkingLevel::Low => custom.low.unwrap_or(2048),
        ThinkingLevel::Medium => custom.medium.unwrap_or(8192),
        ThinkingLevel::High => custom.high.unwrap_or(16384),
        _ => 0,
    }
}

/// Cap a thinking budget so at least [`MIN_ANSWER_TOKENS`] remain under the ceiling.
pub fn clamp_thinking_budget_to_answer_room(budget: u64, ceiling: u64) -> u64 {
    budget.min(ceiling.saturating_sub(MIN_ANSWER_TOKENS))
}

/// Raise `max_tokens` by the thinking budget (within the model cap); returns (max, budget).
pub fn adjust_max_tokens_for_thinking(
    base_max_tokens: Option<u64>,
    model_max_tokens: u64,
    level: ThinkingLevel,
    custom: Option<&ThinkingBudgets>,
) -> (u64, u64) {
    let mut budget = thinking_budget_for_level(level, custom);
    let max_tokens = match base_max_tokens {
        None => model_max_tokens,
        Some(base) => (base + budget).min(model_max_tokens),
    };
    if max_tokens <= budget {
        budget = clamp_thinking_budget_to_answer_room(budget, max_tokens);
    }
    (max_tokens, budget)
}

/// Model sampling parameters, then per-level ones, then the request's (later wins).
pub(crate) fn resolve_sampling_params(
    model: &Model,
    level: ThinkingLevel,
    request: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    let effective = clamp_thinking_level(model, level);
    let by_level = model
        .extra
        .get("samplingParamsByThinkingLevel")
        .and_then(|v| v.get(effective.as_str()))
        .and_then(Value::as_object);
    if model.sampling_params.is_none() && by_level.is_none() && request.is_none() {
        return None;
    }
    let mut out = Map::new();
    for source in [model.sampling_params.as_ref(), by_level, request].into_iter().flatten() {
        for (k, v) in source {
            out.insert(k.clone(), v.clone());
        }
    }
    Some(out)
}

/// The base `maxTokens` of `streamSimple`: the request's or the model's, fitted to the window.
pub(crate) fn base_max_tokens(model: &Model, context: &TranscriptContext, requested: Option<u64>) -> u64 {
    clamp_max_tokens_to_context(model, context, requested.unwrap_or(model.max_tokens))
}
