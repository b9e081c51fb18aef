//! Rebuilding the partial message from stripped proxy events (the reference's
//! `processProxyEvent`).
//!
//! The message lives in an `Arc`; every event carries a pointer copy and the next change goes
//! through [`Arc::make_mut`], so a consumer that drops events makes the whole response cost
//! time linear in its length (see `pi_types` event docs). Tool-call argument text is parsed
//! incrementally with the same [`ToolCallArgumentsStream`] the adapters use; the block's
//! arguments are replaced only when the parser publishes a new snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use pi_types::json::ToolCallArgumentsStream;
use pi_types::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, Model, StopReason, TextContent, ThinkingContent,
    ToolCall,
};

use crate::wire::ProxyEvent;

/// The partial message of one proxied response.
#[derive(Debug)]
pub(crate) struct Rebuilder {
    partial: Arc<AssistantMessage>,
    arguments: HashMap<usize, ToolCallArgumentsStream>,
}

impl Rebuilder {
    /// An empty pending message for `model`, stamped now.
    pub(crate) fn new(model: &Model) -> Self {
        let partial = AssistantMessage {
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            stop_reason: StopReason::Pending,
            timestamp: pi_types::now_ms(),
            ..Default::default()
        };
        Self { partial: Arc::new(partial), arguments: HashMap::new() }
    }

    fn snap(&self) -> Arc<AssistantMessage> {
        Arc::clone(&self.partial)
    }

    fn message(&mut self) -> &mut AssistantMessage {
        Arc::make_mut(&mut self.partial)
    }

    /// Put a new block at `index` (replacing one that is there, appending at the end).
    fn set_block(&mut self, index: usize, block: AssistantContent) -> Result<(), String> {
        let content = &mut self.message().content;
        match index.cmp(&content.len()) {
            std::cmp::Ordering::Less => content[index] = block,
            std::cmp::Ordering::Equal => content.push(block),
            // JavaScript would leave holes in the array; a message cannot have them.
            std::cmp::Ordering::Greater => {
                return Err(format!("Received content index {index} beyond the message's {} blocks", content.len()))
            }
        }
        Ok(())
    }

    /// Apply one event: the full event to emit, `None` for events the reference drops, or the
    /// reference's error text for an event that does not fit the message.
    pub(crate) fn apply(&mut self, event: ProxyEvent) -> Result<Option<AssistantMessageEvent>, String> {
        use AssistantMessageEvent as E;
        Ok(Some(match event {
            ProxyEvent::Start => E::Start { partial: self.snap() },
            ProxyEvent::TextStart { content_index } => {
                self.set_block(content_index, AssistantContent::Text(TextContent::default()))?;
                E::TextStart { content_index, partial: self.snap() }
            }
            ProxyEvent::TextDelta { content_index, delta } => {
                match self.message().content.get_mut(content_index) {
                    Some(AssistantContent::Text(text)) => text.text.push_str(&delta),
                    _ => return Err("Received text_delta for non-text content".into()),
                }
                E::TextDelta { content_index, delta, partial: self.snap() }
            }
            ProxyEvent::TextEnd { content_index, content_signature } => {
                let content = match self.message().content.get_mut(content_index) {
                    Some(AssistantContent::Text(text)) => {
                        text.text_signature = content_signature;
                        text.text.clone()
                    }
                    _ => return Err("Received text_end for non-text content".into()),
                };
                E::TextEnd { content_index, content, partial: self.snap() }
            }
            ProxyEvent::ThinkingStart { content_index } => {
                self.set_block(content_index, AssistantContent::Thinking(ThinkingContent::default()))?;
                E::ThinkingStart { content_index, partial: self.snap() }
            }
            ProxyEvent::ThinkingDelta { content_index, delta } => {
                match self.message().content.get_mut(content_index) {
                    Some(AssistantContent::Thinking(thinking)) => thinking.thinking.push_str(&delta),
                    _ => return Err("Received thinking_delta for non-thinking content".into()),
                }
                E::ThinkingDelta { content_index, delta, partial: self.snap() }
            }
            ProxyEvent::ThinkingEnd { content_index, content_signature } => {
                let content = match self.message().content.get_mut(content_index) {
                    Some(AssistantContent::Thinking(thinking)) => {
                        thinking.thinking_signature = content_signature;
                        thinking.thinking.clone()
                    }
                    _ => return Err("Received thinking_end for non-thinking content".into()),
                };
                E::ThinkingEnd { content_index, content, partial: self.snap() }
            }
            ProxyEvent::ToolcallStart { content_index, id, tool_name } => {
                let call = ToolCall { id, name: tool_name, ..Default::default() };
                self.set_block(content_index, AssistantContent::ToolCall(call))?;
                self.arguments.insert(content_index, ToolCallArgumentsStream::new());
                E::ToolcallStart { content_index, partial: self.snap() }
            }
            ProxyEvent::ToolcallDelta { content_index, delta } => {
                let is_call = matches!(self.partial.content.get(content_index), Some(AssistantContent::ToolCall(_)));
                let Some(stream) = self.arguments.get_mut(&content_index).filter(|_| is_call) else {
                    return Err("Received toolcall_delta for non-toolCall content".into());
                };
                let revision = stream.revision();
                stream.append(&delta);
                let arguments = (stream.revision() != revision).then(|| stream.arguments().clone());
                if let Some(arguments) = arguments {
                    if let Some(AssistantContent::ToolCall(call)) = self.message().content.get_mut(content_index) {
                        call.arguments = arguments;
                    }
                }
                E::ToolcallDelta { content_index, delta, partial: self.snap() }
            }
            ProxyEvent::ToolcallEnd { content_index, tool_call } => {
                if !matches!(self.partial.content.get(content_index), Some(AssistantContent::ToolCall(_))) {
                    return Ok(None);
                }
                self.arguments.remove(&content_index);
                if let Some(block) = self.message().content.get_mut(content_index) {
                    *block = AssistantContent::ToolCall(tool_call.clone());
                }
                E::ToolcallEnd { content_index, tool_call, partial: self.snap() }
            }
            ProxyEvent::Done { reason, usage, provider_thinking_level } => {
                let message = self.message();
                message.stop_reason = reason;
                message.usage = usage;
                if provider_thinking_level.is_some() {
                    message.provider_thinking_level = provider_thinking_level;
                }
                E::Done { reason, message: self.snap() }
            }
            ProxyEvent::Error { reason, error_message, usage, provider_thinking_level } => {
                let message = self.message();
                message.stop_reason = reason;
                message.error_message = error_message;
                message.usage = usage;
                if provider_thinking_level.is_some() {
                    message.provider_thinking_level = provider_thinking_level;
                }
                E::Error { reason, error: self.snap() }
            }
        }))
    }

    /// The terminal event of a failed request: the message so far with `reason` and `message`.
    pub(crate) fn fail(&mut self, aborted: bool, error_message: String) -> AssistantMessageEvent {
        let reason = if aborted { StopReason::Aborted } else { StopReason::Error };
        let message = self.message();
        message.stop_reason = reason;
        message.error_message = Some(error_message);
        AssistantMessageEvent::Error { reason, error: self.snap() }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rebuilds_tool_arguments_and_rejects_mismatched_deltas() {
        let mut rebuilder = Rebuilder::new(&Model::new("m", "faux", "faux"));
        rebuilder.apply(ProxyEvent::Start).unwrap();
        rebuilder.apply(ProxyEvent::ToolcallStart { content_index: 0, id: "c".into(), tool_name: "f".into() }).unwrap();
        let event =
            rebuilder.apply(ProxyEvent::ToolcallDelta { content_index: 0, delta: "{\"a\": [1, 2".into() }).unwrap();
        let partial = event.unwrap().partial().cloned().unwrap();
        let call = partial.content[0].as_tool_call().unwrap();
        assert_eq!(serde_json::Value::Object(call.arguments.clone()), serde_json::json!({"a": [1, 2]}));
        let error = rebuilder.apply(ProxyEvent::TextDelta { content_index: 0, delta: "x".into() }).unwrap_err();
        assert_eq!(error, "Received text_delta for non-text content");
        let error = rebuilder.apply(ProxyEvent::TextStart { content_index: 5 }).unwrap_err();
        assert_eq!(error, "Received content index 5 beyond the message's 1 blocks");
    }
}
