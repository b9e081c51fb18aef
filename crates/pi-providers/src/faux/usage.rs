//! The faux provider's usage estimate and its prompt-cache simulation.
//!
//! Every transcript message is rendered to text (`role:` + text; system messages with
//! their tool declarations as JSON; tool calls as `name:` + JSON arguments; tool results as
//! tool name + text), the texts are joined with blank lines, and tokens are
//! `ceil(UTF-16 length / 4)`. With a session id, the prompt is compared with the session's
//! previous prompt: the common prefix is read from the simulated cache, the rest written.

use std::collections::HashMap;

use pi_types::json::js::write_string;
use pi_types::json::{
    string_utf16_len, stringify, stringify_object_utf16_len, stringify_utf16_len, utf16_len, write_stringify,
    write_stringify_object,
};
use pi_types::transcript::system_message_text;
use pi_types::{
    AssistantContent, AssistantMessage, CacheRetention, JsonObject, Message, StreamOptions, Tool, Usage, UserContent,
    UserMessageContent,
};
use serde_json::Value;

/// Prompts of previous requests per session id.
pub(crate) type PromptCache = HashMap<String, Vec<String>>;

fn ceil_div4(length: usize) -> u64 {
    length.div_ceil(4) as u64
}

/// What a message is rendered into: the prompt text (kept per session for the cache
/// simulation) or only its UTF-16 length. One renderer serves both.
trait Render {
    fn text(&mut self, text: &str);
    fn arguments(&mut self, arguments: &JsonObject);
    /// `JSON.stringify` of a string.
    fn json_string(&mut self, text: &str);
    /// `JSON.stringify` of a value.
    fn json_value(&mut self, value: &Value);
}

impl Render for String {
    fn text(&mut self, text: &str) {
        self.push_str(text);
    }
    fn arguments(&mut self, arguments: &JsonObject) {
        write_stringify_object(self, arguments);
    }
    fn json_string(&mut self, text: &str) {
        write_string(self, text);
    }
    fn json_value(&mut self, value: &Value) {
        write_stringify(self, value);
    }
}

/// UTF-16 units rendered so far.
struct Length(usize);

impl Render for Length {
    fn text(&mut self, text: &str) {
        self.0 = self.0.saturating_add(utf16_len(text));
    }
    fn arguments(&mut self, arguments: &JsonObject) {
        self.0 = self.0.saturating_add(stringify_object_utf16_len(arguments));
    }
    fn json_string(&mut self, text: &str) {
        self.0 = self.0.saturating_add(string_utf16_len(text));
    }
    fn json_value(&mut self, value: &Value) {
        self.0 = self.0.saturating_add(stringify_utf16_len(value));
    }
}

/// A tool declaration as `JSON.stringify` writes the reference's object: its serde fields in
/// order, without building a JSON value (that would copy the parameter schema per request).
fn write_tool(out: &mut impl Render, tool: &Tool) {
    if tool.constrained_sampling.is_some() {
        return out.text(&to_json_text(tool));
    }
    out.text("{\"name\":");
    out.json_string(&tool.name);
    out.text(",\"description\":");
    out.json_string(&tool.description);
    out.text(",\"parameters\":");
    out.json_value(&tool.parameters);
    out.text("}");
}

fn write_user_content(out: &mut impl Render, content: &[UserContent]) {
    for (index, block) in content.iter().enumerate() {
        if index > 0 {
            out.text("\n");
        }
        match block {
            UserContent::Text(t) => out.text(&t.text),
            UserContent::Image(i) => out.text(&format!("[image:{}:{}]", i.mime_type, utf16_len(&i.data))),
        }
    }
}

fn write_assistant_content(out: &mut impl Render, content: &[AssistantContent]) {
    for (index, block) in content.iter().enumerate() {
        if index > 0 {
            out.text("\n");
        }
        match block {
            AssistantContent::Text(t) => out.text(&t.text),
            AssistantContent::Thinking(t) => out.text(&t.thinking),
            AssistantContent::ToolCall(call) => {
                out.text(&call.name);
                out.text(":");
                out.arguments(&call.arguments);
            }
        }
    }
}

/// `role:` + the message rendered as text.
fn write_message(out: &mut impl Render, message: &Message) {
    out.text(message.role());
    out.text(":");
    match message {
        Message::System(system) => {
            // The non-empty parts, one per line: the text, then each tool change.
            let text = system_message_text(system);
            let mut first = text.is_empty();
            out.text(&text);
            for removed in system.tools_removed.iter().flatten() {
                out.text(if first { "tool-:" } else { "\ntool-:" });
                out.text(&to_json_text(removed));
                first = false;
            }
            for added in system.tools_added.iter().flatten() {
                out.text(if first { "tool+:" } else { "\ntool+:" });
                write_tool(out, added);
                first = false;
            }
        }
        Message::User(user) => match &user.content {
            UserMessageContent::Text(text) => out.text(text),
            UserMessageContent::Blocks(blocks) => write_user_content(out, blocks),
        },
        Message::Assistant(assistant) => write_assistant_content(out, &assistant.content),
        Message::ToolResult(result) => {
            out.text(&result.tool_name);
            for block in &result.content {
                out.text("\n");
                write_user_content(out, std::slice::from_ref(block));
            }
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
    let session = options
        .session_id
        .as_deref()
        .filter(|s| !s.is_empty() && options.cache_retention != Some(CacheRetention::None));
    // Without a session only the prompt's length matters: count it without writing the text.
    let mut prompt = Vec::new();
    let mut length = Length(transcript.len().saturating_sub(1) * 2);
    for message in transcript {
        if session.is_some() {
            let mut text = String::new();
            write_message(&mut text, message);
            length.text(&text);
            prompt.push(text);
        } else {
            write_message(&mut length, message);
        }
    }
    let prompt_tokens = ceil_div4(length.0);
    let mut output = Length(0);
    write_assistant_content(&mut output, &message.content);
    let output = ceil_div4(output.0);
    let (mut input, mut cache_read, mut cache_write) = (prompt_tokens, 0, 0);
    if let Some(session) = session {
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
    message.usage = Usage { input, output, cache_read, cache_write, ..Default::default() };
    message.usage.total_tokens = message.usage.token_sum();
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::{ConstrainedSampling, Strictness};
    use serde_json::json;

    fn tools() -> Vec<Tool> {
        let parameters = json!({"type": "object", "properties": {"q": {"type": "string", "description": "é \"x\"\n"}}});
        let plain = Tool {
            name: "find\u{1F600}".into(),
            description: "Finds \"things\"".into(),
            parameters: parameters.into(),
            ..Default::default()
        };
        let strict = Tool {
            constrained_sampling: Some(ConstrainedSampling::JsonSchema { strict: Strictness::Require }),
            ..plain.clone()
        };
        vec![plain, strict]
    }

    #[test]
    fn a_tool_renders_as_its_serialized_declaration() {
        for tool in tools() {
            let mut text = String::new();
            write_tool(&mut text, &tool);
            assert_eq!(text, to_json_text(&tool));
            let mut length = Length(0);
            write_tool(&mut length, &tool);
            assert_eq!(length.0, utf16_len(&text));
        }
    }
}
