//! The faux provider's usage estimate and its prompt-cache simulation.
//!
//! Every transcript message is rendered to text (`role:` + text; system messages with
//! their tool declarations as JSON; tool calls as `name:` + JSON arguments; tool results as
//! tool name + text), the texts are joined with blank lines, and tokens are
//! `ceil(UTF-16 length / 4)`. With a session id, the prompt is compared with the session's
//! previous prompt: the common prefix is read from the simulated cache, the rest written.

use std::collections::HashMap;

use pi_types::json::{stringify, utf16_len};
use pi_types::transcript::system_message_text;
use pi_types::{
    AssistantContent, AssistantMessage, CacheRetention, Message, StreamOptions, UserContent, UserMessageContent, Usage,
};

/// Prompts of previous requests per session id.
pub(crate) type PromptCache = HashMap<String, Vec<String>>;

fn ceil_div4(length: usize) -> u64 {
    length.div_ceil(4) as u64
}

fn user_content_text(content: &[UserContent]) -> String {
    content
        .iter()
        .map(|block| match block {
            UserContent::Text(t) => t.text.clone(),
            UserContent::Image(i) => format!("[image:{}:{}]", i.mime_type, utf16_len(&i.data)),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn assistant_content_text(content: &[AssistantContent]) -> String {
    content
        .iter()
        .map(|block| match block {
            AssistantContent::Text(t) => t.text.clone(),
            AssistantContent::Thinking(t) => t.thinking.clone(),
            AssistantContent::ToolCall(call) => {
                format!("{}:{}", call.name, stringify(&serde_json::Value::Object(call.arguments.clone())))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn message_text(message: &Message) -> String {
    match message {
        Message::System(system) => {
            let mut parts = vec![system_message_text(system)];
            for removed in system.tools_removed.iter().flatten() {
                parts.push(format!("tool-:{}", to_json_text(removed)));
            }
            for added in system.tools_added.iter().flatten() {
                parts.push(format!("tool+:{}", to_json_text(added)));
            }
            parts.retain(|p| !p.is_empty());
            parts.join("\n")
        }
        Message::User(user) => match &user.content {
            UserMessageContent::Text(text) => text.clone(),
            UserMessageContent::Blocks(blocks) => user_content_text(blocks),
        },
        Message::Assistant(assistant) => assistant_content_text(&assistant.content),
        Message::ToolResult(result) => {
            let mut parts = vec![result.tool_name.clone()];
            parts.extend(result.content.iter().map(|b| user_content_text(std::slice::from_ref(b))));
            parts.join("\n")
        }
    }
}

fn to_json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value).map(|v| stringify(&v)).unwrap_or_default()
}

fn joined_length(parts: &[String], count: usize) -> usize {
    let separators = count.saturating_sub(1) * 2;
    separators + parts[..count].iter().map(|p| utf16_len(p)).sum::<usize>()
}

fn common_prefix_units(a: &str, b: &str) -> usize {
    a.encode_utf16().zip(b.encode_utf16()).take_while(|(x, y)| x == y).count()
}

fn common_prompt_prefix_length(previous: &[String], current: &[String]) -> usize {
    let mut index = 0;
    while index < previous.len() && index < current.len() && previous[index] == current[index] {
        index += 1;
    }
    let rest = |parts: &[String]| {
        if index == parts.len() {
            String::new()
        } else {
            let prefix = if index > 0 { "\n\n" } else { "" };
            format!("{prefix}{}", parts[index..].join("\n\n"))
        }
    };
    joined_length(previous, index) + common_prefix_units(&rest(previous), &rest(current))
}

/// Fill in `usage` as the reference's faux provider estimates it.
pub(crate) fn apply_usage_estimate(
    message: &mut AssistantMessage,
    transcript: &[Message],
    options: &StreamOptions,
    cache: &mut PromptCache,
) {
    let prompt: Vec<String> = transcript.iter().map(|m| format!("{}:{}", m.role(), message_text(m))).collect();
    let prompt_tokens = ceil_div4(joined_length(&prompt, prompt.len()));
    let output = ceil_div4(utf16_len(&assistant_content_text(&message.content)));
    let (mut input, mut cache_read, mut cache_write) = (prompt_tokens, 0, 0);
    if let Some(session) = options.session_id.as_deref().filter(|s| !s.is_empty()) {
        if options.cache_retention != Some(CacheRetention::None) {
            match cache.get(session) {
                Some(previous) => {
                    cache_read = ceil_div4(common_prompt_prefix_length(previous, &prompt));
                    cache_write = prompt_tokens.saturating_sub(cache_read);
                }
                None => cache_write = prompt_tokens,
            }
            input = 0;
            cache.insert(session.to_owned(), prompt);
        }
    }
    message.usage = Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: input + output + cache_read + cache_write,
        ..Default::default()
    };
}
