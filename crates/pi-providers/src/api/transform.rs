//! Cross-model transcript repair before conversion (`transform-messages.js`): images the
//! model cannot see become placeholders, thinking from other models is dropped, tool-call
//! ids are normalized, failed assistant turns are skipped and every orphaned tool call gets
//! a synthetic "No result provided" error result.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use pi_types::{
    AssistantContent, AssistantMessage, CompactString, InputModality, Message, Model, StopReason, TextContent,
    ToolCall, ToolResultMessage, UserContent, UserMessage, UserMessageContent,
};

const NON_VISION_USER_IMAGE: &str = "(image omitted: model does not support images)";
const NON_VISION_TOOL_IMAGE: &str = "(tool image omitted: model does not support images)";
const ERROR_TOOL_IMAGE: &str = "(image attached after the tool results)";

/// Normalizes a tool-call id for the target API: (id, target model, source message).
pub(crate) type NormalizeId<'a> = &'a dyn Fn(&str, &Model, &AssistantMessage) -> String;

fn replace_images(content: &[UserContent], placeholder: &str) -> Vec<UserContent> {
    let mut out = Vec::with_capacity(content.len());
    let mut previous_was_placeholder = false;
    for block in content {
        match block {
            UserContent::Image(_) => {
                if !previous_was_placeholder {
                    out.push(UserContent::text(placeholder));
                }
                previous_was_placeholder = true;
            }
            UserContent::Text(text) => {
                previous_was_placeholder = text.text == placeholder;
                out.push(block.clone());
            }
        }
    }
    out
}

/// An error tool result's content without images, plus the caption and images to send after
/// the turn's results (APIs that reject images in error results).
pub(crate) fn split_error_tool_result_images(
    message: &ToolResultMessage,
) -> Option<(Vec<UserContent>, String, Vec<UserContent>)> {
    if !message.is_error {
        return None;
    }
    let images: Vec<UserContent> =
        message.content.iter().filter(|b| matches!(b, UserContent::Image(_))).cloned().collect();
    if images.is_empty() {
        return None;
    }
    Some((
        replace_images(&message.content, ERROR_TOOL_IMAGE),
        format!("Images from the error result of tool call {} ({}):", message.tool_call_id, message.tool_name),
        images,
    ))
}

fn downgrade_images(message: Message, model: &Model) -> Message {
    if model.input.contains(&InputModality::Image) {
        return message;
    }
    let has_image = |blocks: &[UserContent]| blocks.iter().any(|b| matches!(b, UserContent::Image(_)));
    // Messages are shared with the transcript: only one with an image is rebuilt.
    match message {
        Message::User(user) => match &user.content {
            UserMessageContent::Blocks(blocks) if has_image(blocks) => Message::from(UserMessage {
                content: UserMessageContent::Blocks(replace_images(blocks, NON_VISION_USER_IMAGE)),
                timestamp: user.timestamp,
            }),
            _ => Message::User(user),
        },
        Message::ToolResult(mut result) if has_image(&result.content) => {
            let content = replace_images(&result.content, NON_VISION_TOOL_IMAGE);
            Arc::make_mut(&mut result).content = content;
            Message::ToolResult(result)
        }
        other => other,
    }
}

/// Repair a transcript for `model`; see the module docs.
pub(crate) fn transform_messages(
    messages: &[Message],
    model: &Model,
    normalize: Option<NormalizeId<'_>>,
) -> Vec<Message> {
    let mut id_map: HashMap<CompactString, CompactString> = HashMap::new();
    let mut transformed = Vec::with_capacity(messages.len());
    for message in messages {
        let message = downgrade_images(message.clone(), model);
        let message = match message {
            Message::ToolResult(mut result) => {
                if let Some(mapped) = id_map.get(&result.tool_call_id) {
                    Arc::make_mut(&mut result).tool_call_id = mapped.clone();
                }
                Message::ToolResult(result)
            }
            Message::Assistant(assistant) => {
                // A message left as it is stays shared with the transcript.
                let mut changed = false;
                let same_model =
                    assistant.provider == model.provider && assistant.api == model.api && assistant.model == model.id;
                let mut content = Vec::with_capacity(assistant.content.len());
                for block in &assistant.content {
                    match block {
                        AssistantContent::Thinking(thinking) => {
                            if !same_model {
                                changed = true;
                                continue;
                            }
                            let signed = thinking.redacted == Some(true)
                                || thinking.thinking_signature.as_deref().is_some_and(|s| !s.is_empty());
                            if !signed && crate::js_json::js_trim(&thinking.thinking).is_empty() {
                                changed = true;
                                continue;
                            }
                            content.push(block.clone());
                        }
                        AssistantContent::Text(text) => {
                            if same_model || text.text_signature.is_none() {
                                content.push(block.clone());
                            } else {
                                changed = true;
                                content.push(AssistantContent::Text(TextContent {
                                    text: text.text.clone(),
                                    text_signature: None,
                                }));
                            }
                        }
                        AssistantContent::ToolCall(call) => {
                            let mut call: ToolCall = call.clone();
                            if !same_model {
                                changed |= call.thought_signature.take().is_some();
                                if let Some(normalize) = normalize {
                                    let id = normalize(&call.id, model, &assistant);
                                    if id != call.id {
                                        let id = CompactString::from(id);
                                        id_map.insert(call.id.clone(), id.clone());
                                        call.id = id;
                                        changed = true;
                                    }
                                }
                            }
                            content.push(AssistantContent::ToolCall(call));
                        }
                    }
                }
                if changed {
                    Message::from(AssistantMessage { content, ..(*assistant).clone() })
                } else {
                    Message::Assistant(assistant)
                }
            }
            other => other,
        };
        transformed.push(message);
    }

    let mut result: Vec<Message> = Vec::with_capacity(transformed.len());
    let mut pending: Vec<(CompactString, CompactString)> = Vec::new();
    let mut answered: HashSet<CompactString> = HashSet::new();
    let mut held: Vec<Message> = Vec::new();
    let close = |result: &mut Vec<Message>,
                 pending: &mut Vec<(CompactString, CompactString)>,
                 answered: &mut HashSet<CompactString>,
                 held: &mut Vec<Message>| {
        if !pending.is_empty() {
            for (id, name) in pending.drain(..) {
                if !answered.contains(&id) {
                    result.push(Message::from(ToolResultMessage {
                        tool_call_id: id,
                        tool_name: name,
                        content: vec![UserContent::text("No result provided")],
                        is_error: true,
                        timestamp: pi_types::now_ms(),
                        ..Default::default()
                    }));
                }
            }
            answered.clear();
        }
        result.append(held);
    };
    for message in transformed {
        match &message {
            Message::Assistant(assistant) => {
                close(&mut result, &mut pending, &mut answered, &mut held);
                if matches!(assistant.stop_reason, StopReason::Error | StopReason::Aborted) {
                    continue;
                }
                let calls: Vec<(CompactString, CompactString)> =
                    assistant.tool_calls().map(|c| (c.id.clone(), c.name.clone())).collect();
                if !calls.is_empty() {
                    pending = calls;
                    answered.clear();
                }
                result.push(message);
            }
            Message::ToolResult(tool_result) => {
                answered.insert(tool_result.tool_call_id.clone());
                result.push(message);
            }
            Message::System(_) => {
                if pending.is_empty() {
                    result.push(message);
                } else {
                    held.push(message);
                }
            }
            Message::User(_) => {
                close(&mut result, &mut pending, &mut answered, &mut held);
                result.push(message);
            }
        }
    }
    close(&mut result, &mut pending, &mut answered, &mut held);
    result
}

/// Replace every character outside `[a-zA-Z0-9_-]` with `_`.
pub(crate) fn sanitize_id(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// The first `n` UTF-16 units of an (ASCII-sanitized) id.
pub(crate) fn take_units(text: &str, units: usize) -> String {
    let mut count = 0;
    let mut out = String::new();
    for c in text.chars() {
        if count + c.len_utf16() > units {
            break;
        }
        count += c.len_utf16();
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::JsonObject;

    #[test]
    fn orphaned_calls_get_results() {
        let model = Model::new("m").with_api("openai-completions").with_provider("p");
        let assistant = AssistantMessage {
            content: vec![AssistantContent::tool_call("c1", "read", JsonObject::new())],
            api: "openai-completions".into(),
            provider: "p".into(),
            model: "m".into(),
            stop_reason: StopReason::ToolUse,
            ..Default::default()
        };
        let messages = vec![Message::from(assistant), Message::from(UserMessage::text("next"))];
        let out = transform_messages(&messages, &model, None);
        assert_eq!(out.len(), 3);
        match &out[1] {
            Message::ToolResult(r) => {
                assert_eq!(r.tool_call_id, "c1");
                assert!(r.is_error);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
