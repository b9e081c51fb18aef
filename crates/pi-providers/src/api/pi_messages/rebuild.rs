//! Rebuilding the message from [`WireEvent`]s (the reference's `processProxyEvent` and the
//! pi-messages client's event handler) with [`AssistantMessageBuilder`], the reducer every
//! adapter uses.
//!
//! Each event becomes one builder call, which updates the message and sends the full event.
//! The builder numbers blocks itself: a `*_start` must name the next index (the reference
//! would overwrite a block or leave a hole in the array, neither of which a message can hold,
//! so such a stream fails). An event that does not fit the message fails with its protocol's
//! text. An event's members are applied as they are: what a protocol does not carry,
//! [`Protocol::decode`] never sets. The rules that differ are listed in the
//! [pi-messages module docs](super).

use pi_types::{AssistantContent, AssistantMessage, AssistantMessageBuilder, AssistantMessageDiagnostic, JsonObject};
use pi_types::{StopReason, ToolCall, TypesError};
use serde::Deserialize;
use serde_json::Value;

use super::events::{Protocol, WireEnd, WireEvent};
use crate::transport::http;

impl Protocol {
    /// Apply one event to the message being rebuilt: `Some(reason)` for a terminal event (its
    /// usage, error text and response metadata set; end the message with this reason), the
    /// failure text of an event that does not fit the message.
    pub async fn rebuild(
        self,
        out: &mut AssistantMessageBuilder,
        event: WireEvent,
    ) -> Result<Option<StopReason>, String> {
        let misfit = |kind: &'static str| move |error: TypesError| self.misfit(kind, error);
        match event {
            WireEvent::Start => out.start().await,
            WireEvent::TextStart { content_index } => {
                self.next_index(out, "text_start", content_index)?;
                out.start_text().await;
            }
            WireEvent::TextDelta { content_index, delta } => {
                out.text_delta(content_index, delta).await.map_err(misfit("text_delta"))?;
            }
            WireEvent::TextEnd { content_index, content, content_signature } => {
                let block = out.text_mut(content_index).map_err(misfit("text_end"))?;
                if let Some(content) = content {
                    block.text = content;
                }
                block.text_signature = content_signature;
                out.end_text(content_index).await.map_err(misfit("text_end"))?;
            }
            WireEvent::ThinkingStart { content_index } => {
                self.next_index(out, "thinking_start", content_index)?;
                out.start_thinking().await;
            }
            WireEvent::ThinkingDelta { content_index, delta } => {
                out.thinking_delta(content_index, delta).await.map_err(misfit("thinking_delta"))?;
            }
            WireEvent::ThinkingEnd { content_index, content, content_signature, redacted } => {
                let block = out.thinking_mut(content_index).map_err(misfit("thinking_end"))?;
                if let Some(content) = content {
                    block.thinking = content;
                }
                block.thinking_signature = content_signature;
                block.redacted = redacted;
                out.end_thinking(content_index).await.map_err(misfit("thinking_end"))?;
            }
            WireEvent::ToolcallStart { content_index, id, tool_name } => {
                self.next_index(out, "toolcall_start", content_index)?;
                match self {
                    Self::Proxy => out.start_tool_call(id, tool_name).await,
                    Self::PiMessages => out.start_announced_tool_call(id, tool_name).await,
                };
            }
            WireEvent::ToolcallDelta { content_index, delta } => {
                out.tool_call_delta(content_index, delta).await.map_err(misfit("toolcall_delta"))?;
            }
            WireEvent::ToolcallEnd { content_index, tool_call } => match self {
                Self::Proxy => {
                    let call = complete_tool_call(tool_call).map_err(|e| self.invalid("toolcall_end", e))?;
                    // The reference ignores an end for a block that is not a tool call.
                    let _ = out.end_tool_call_with(content_index, call).await;
                }
                Self::PiMessages => {
                    let call = merged_tool_call(out.message(), content_index, tool_call)
                        .map_err(|e| self.invalid("toolcall_end", e))?;
                    out.end_tool_call_with(content_index, call).await.map_err(misfit("toolcall_end"))?;
                }
            },
            WireEvent::Done { reason, end } => {
                apply_end(out, end, None);
                return Ok(Some(reason));
            }
            WireEvent::Error { reason, error_message, end } => {
                let error_message = error_message.map(|m| http::bound_error_message(m.into()).into_boxed_str());
                apply_end(out, end, error_message);
                let reason = match self {
                    Self::Proxy => reason,
                    Self::PiMessages if reason == StopReason::Aborted => reason,
                    Self::PiMessages => StopReason::Error,
                };
                return Ok(Some(reason));
            }
        }
        Ok(None)
    }

    /// A `*_start` must name the next block (pi-messages checked it before decoding).
    fn next_index(self, out: &AssistantMessageBuilder, kind: &str, index: usize) -> Result<(), String> {
        let count = out.message().content.len();
        match (index == count, self) {
            (true, _) => Ok(()),
            (false, Self::Proxy) => {
                Err(format!("Received {kind} for content index {index}, but the message has {count} blocks"))
            }
            (false, Self::PiMessages) => Err(format!("Invalid contentIndex {index} in pi-messages {kind} event")),
        }
    }

    /// The failure of a block event that names a block of another kind (or none).
    fn misfit(self, kind: &'static str, error: TypesError) -> String {
        match self {
            Self::Proxy => {
                let block = match kind.split_once('_').map(|(block, _)| block) {
                    Some("thinking") => "thinking",
                    Some("toolcall") => "toolCall",
                    _ => "text",
                };
                format!("Received {kind} for non-{block} content")
            }
            Self::PiMessages => self.invalid(kind, error),
        }
    }
}

/// The proxy's finished call: a complete `toolCall` content block.
fn complete_tool_call(block: JsonObject) -> Result<ToolCall, String> {
    match AssistantContent::deserialize(Value::Object(block)) {
        Ok(AssistantContent::ToolCall(call)) => Ok(call),
        Ok(_) => Err("expected a toolCall block".into()),
        Err(error) => Err(error.to_string()),
    }
}

/// The pi-messages finished call: the streamed block with the members of the wire's
/// `toolCall` on top.
fn merged_tool_call(message: &AssistantMessage, index: usize, wire: JsonObject) -> Result<ToolCall, String> {
    let Some(AssistantContent::ToolCall(call)) = message.content.get(index) else {
        return Err(format!("content {index} is not a tool call"));
    };
    let mut merged = match serde_json::to_value(call) {
        Ok(Value::Object(map)) => map,
        _ => JsonObject::new(),
    };
    for (key, value) in wire {
        if key != "type" {
            merged.insert(key, value);
        }
    }
    serde_json::from_value(Value::Object(merged)).map_err(|e| e.to_string())
}

/// Set what a terminal event reports on the message.
fn apply_end(out: &mut AssistantMessageBuilder, end: WireEnd, error_message: Option<Box<str>>) {
    let mut message = out.metadata_mut();
    message.usage = end.usage;
    message.response_id = end.response_id;
    if let Some(model) = end.response_model {
        message.response_model = Some(model);
    }
    if let Some(level) = end.provider_thinking_level {
        message.provider_thinking_level = Some(level);
    }
    if let Some(rewrite) = end.rewrite {
        message.diagnostics.get_or_insert_with(Vec::new).push(AssistantMessageDiagnostic {
            kind: "pi_messages_rewrite".into(),
            timestamp: pi_types::now_ms(),
            error: None,
            details: Some(rewrite),
        });
    }
    message.error_message = error_message;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use pi_types::{AssistantMessageEvent, AssistantMessageEventStream, Model};

    /// Apply events; the emitted events and the first failure.
    fn run(protocol: Protocol, events: Vec<WireEvent>) -> (Vec<AssistantMessageEvent>, Option<String>) {
        let failure = std::sync::Arc::new(std::sync::Mutex::new(None));
        let slot = std::sync::Arc::clone(&failure);
        let stream = AssistantMessageEventStream::from_producer(move |tx| async move {
            let mut out =
                AssistantMessageBuilder::for_model(tx, &Model::new("m").with_api("faux").with_provider("faux"));
            for event in events {
                match protocol.rebuild(&mut out, event).await {
                    Ok(None) => {}
                    Ok(Some(reason)) => return out.done(reason).await,
                    Err(message) => {
                        *slot.lock().unwrap() = Some(message.clone());
                        return out.error(message).await;
                    }
                }
            }
        });
        let events = futures::executor::block_on(stream.collect::<Vec<_>>());
        let failure = failure.lock().unwrap().take();
        (events, failure)
    }

    fn done(provider_thinking_level: Option<&str>) -> WireEvent {
        let end = WireEnd {
            usage: pi_types::Usage { output: 7, ..Default::default() },
            provider_thinking_level: provider_thinking_level.map(Into::into),
            ..Default::default()
        };
        WireEvent::Done { reason: StopReason::Stop, end }
    }

    #[test]
    fn rebuilds_tool_arguments_and_rejects_mismatched_deltas() {
        let wire = || {
            vec![
                WireEvent::Start,
                WireEvent::ToolcallStart { content_index: 0, id: "c".into(), tool_name: "f".into() },
                WireEvent::ToolcallDelta { content_index: 0, delta: "{\"a\": [1, 2".into() },
                WireEvent::TextDelta { content_index: 0, delta: "x".into() },
            ]
        };
        let (events, failure) = run(Protocol::Proxy, wire());
        let partial = events[2].partial().unwrap();
        let call = partial.content[0].as_tool_call().unwrap();
        assert_eq!(Value::Object(call.arguments.clone()), serde_json::json!({"a": [1, 2]}));
        assert_eq!(failure.as_deref(), Some("Received text_delta for non-text content"));
        assert_eq!(events.last().unwrap().type_name(), "error");
        let (_, failure) = run(Protocol::PiMessages, wire());
        assert!(failure.unwrap().starts_with("Invalid pi-messages text_delta event: "));

        let (_, failure) = run(Protocol::Proxy, vec![WireEvent::Start, WireEvent::TextStart { content_index: 5 }]);
        assert_eq!(failure.as_deref(), Some("Received text_start for content index 5, but the message has 0 blocks"));
    }

    #[test]
    fn signatures_and_terminal_fields() {
        let (events, failure) = run(
            Protocol::Proxy,
            vec![
                WireEvent::Start,
                WireEvent::TextStart { content_index: 0 },
                WireEvent::TextDelta { content_index: 0, delta: "hi".into() },
                WireEvent::TextEnd { content_index: 0, content: None, content_signature: Some("sig".into()) },
                done(Some("high")),
            ],
        );
        assert_eq!(failure, None);
        let message = events.last().unwrap().final_message().unwrap();
        assert_eq!(message.stop_reason, StopReason::Stop);
        assert_eq!(message.usage.output, 7);
        assert_eq!(message.provider_thinking_level.as_deref(), Some("high"));
        let AssistantContent::Text(text) = &message.content[0] else { panic!("text") };
        assert_eq!(text.text_signature.as_deref(), Some("sig"));
    }

    #[test]
    fn tool_call_starts_and_ends_by_protocol() {
        let call = |members: serde_json::Value| match members {
            Value::Object(map) => map,
            _ => unreachable!(),
        };
        let events = |end: JsonObject| {
            vec![
                WireEvent::Start,
                WireEvent::ToolcallStart { content_index: 0, id: "c".into(), tool_name: "f".into() },
                WireEvent::ToolcallDelta { content_index: 0, delta: "{\"a\": 1}".into() },
                WireEvent::ToolcallEnd { content_index: 0, tool_call: end },
                done(None),
            ]
        };
        // pi-messages lays the members over the streamed call and repeats the start's id.
        let (out, failure) = run(Protocol::PiMessages, events(call(serde_json::json!({"name": "g"}))));
        assert_eq!(failure, None);
        let start = serde_json::to_value(&out[1]).unwrap();
        assert_eq!((start["id"].as_str(), start["toolName"].as_str()), (Some("c"), Some("f")));
        let message = out.last().unwrap().final_message().unwrap();
        let finished = message.content[0].as_tool_call().unwrap();
        assert_eq!((finished.name.as_str(), finished.arguments["a"].as_u64()), ("g", Some(1)));

        // The proxy needs a complete block and replaces the streamed one; its start is plain.
        let (_, failure) = run(Protocol::Proxy, events(call(serde_json::json!({"name": "g"}))));
        assert!(failure.unwrap().starts_with("Invalid proxy event: "));
        let complete = call(serde_json::json!({"type": "toolCall", "id": "c", "name": "g", "arguments": {}}));
        let (out, failure) = run(Protocol::Proxy, events(complete));
        assert_eq!(failure, None);
        assert!(serde_json::to_value(&out[1]).unwrap().get("id").is_none());
        let message = out.last().unwrap().final_message().unwrap();
        let finished = message.content[0].as_tool_call().unwrap();
        assert_eq!((finished.name.as_str(), finished.arguments.len()), ("g", 0));
    }
}
