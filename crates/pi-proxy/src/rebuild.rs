//! Rebuilding the partial message from stripped proxy events (the reference's
//! `processProxyEvent`) with [`AssistantMessageBuilder`], the reducer every adapter uses.
//!
//! Each proxy event becomes one builder call, which updates the message and sends the full
//! event. The builder numbers blocks itself; a `*_start` must name the next index (the
//! reference would overwrite a block or leave a hole in the array, neither of which a message
//! can hold, so such a stream fails). Events that do not fit the message fail with the
//! reference's texts (`Received text_delta for non-text content`, ...); a `toolcall_end` for a
//! block that is not a tool call is dropped, as the reference drops it.

use pi_types::{AssistantMessageBuilder, StopReason};

use crate::wire::ProxyEvent;

/// What applying one event left to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Keep reading.
    Continue,
    /// A terminal event: end the response with this stop reason (usage and error text set).
    Finish(StopReason),
}

fn next_index(out: &AssistantMessageBuilder, event: &str, index: usize) -> Result<(), String> {
    let count = out.message().content.len();
    if index == count {
        Ok(())
    } else {
        Err(format!("Received {event} for content index {index}, but the message has {count} blocks"))
    }
}

/// Apply one event to the message being built.
pub(crate) async fn apply(out: &mut AssistantMessageBuilder, event: ProxyEvent) -> Result<Step, String> {
    match event {
        ProxyEvent::Start => out.start().await,
        ProxyEvent::TextStart { content_index } => {
            next_index(out, "text_start", content_index)?;
            out.start_text().await;
        }
        ProxyEvent::TextDelta { content_index, delta } => out
            .text_delta(content_index, delta)
            .await
            .map_err(|_| "Received text_delta for non-text content".to_owned())?,
        ProxyEvent::TextEnd { content_index, content_signature } => {
            let not_text = |_| "Received text_end for non-text content".to_owned();
            out.text_mut(content_index).map_err(not_text)?.text_signature = content_signature;
            out.end_text(content_index).await.map_err(not_text)?;
        }
        ProxyEvent::ThinkingStart { content_index } => {
            next_index(out, "thinking_start", content_index)?;
            out.start_thinking().await;
        }
        ProxyEvent::ThinkingDelta { content_index, delta } => out
            .thinking_delta(content_index, delta)
            .await
            .map_err(|_| "Received thinking_delta for non-thinking content".to_owned())?,
        ProxyEvent::ThinkingEnd { content_index, content_signature } => {
            let not_thinking = |_| "Received thinking_end for non-thinking content".to_owned();
            out.thinking_mut(content_index).map_err(not_thinking)?.thinking_signature = content_signature;
            out.end_thinking(content_index).await.map_err(not_thinking)?;
        }
        ProxyEvent::ToolcallStart { content_index, id, tool_name } => {
            next_index(out, "toolcall_start", content_index)?;
            out.start_tool_call(id, tool_name).await;
        }
        ProxyEvent::ToolcallDelta { content_index, delta } => out
            .tool_call_delta(content_index, delta)
            .await
            .map_err(|_| "Received toolcall_delta for non-toolCall content".to_owned())?,
        ProxyEvent::ToolcallEnd { content_index, tool_call } => {
            // The reference ignores an end for a block that is not a tool call.
            let _ = out.end_tool_call_with(content_index, tool_call).await;
        }
        ProxyEvent::Done { reason, usage, provider_thinking_level } => {
            let mut message = out.metadata_mut();
            message.usage = usage;
            if provider_thinking_level.is_some() {
                message.provider_thinking_level = provider_thinking_level;
            }
            return Ok(Step::Finish(reason));
        }
        ProxyEvent::Error { reason, error_message, usage, provider_thinking_level } => {
            let mut message = out.metadata_mut();
            message.stop_reason = reason;
            message.error_message = error_message;
            message.usage = usage;
            if provider_thinking_level.is_some() {
                message.provider_thinking_level = provider_thinking_level;
            }
            return Ok(Step::Finish(reason));
        }
    }
    Ok(Step::Continue)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use pi_types::{AssistantMessageEvent, AssistantMessageEventStream, Model};

    /// Apply events; the emitted events and the first failure.
    fn run(events: Vec<ProxyEvent>) -> (Vec<AssistantMessageEvent>, Option<String>) {
        let failure = std::sync::Arc::new(std::sync::Mutex::new(None));
        let slot = std::sync::Arc::clone(&failure);
        let stream = AssistantMessageEventStream::from_producer(move |tx| async move {
            let mut out =
                AssistantMessageBuilder::for_model(tx, &Model::new("m").with_api("faux").with_provider("faux"));
            for event in events {
                match apply(&mut out, event).await {
                    Ok(Step::Continue) => {}
                    Ok(Step::Finish(reason)) => return out.done(reason).await,
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

    #[test]
    fn rebuilds_tool_arguments_and_rejects_mismatched_deltas() {
        let (events, failure) = run(vec![
            ProxyEvent::Start,
            ProxyEvent::ToolcallStart { content_index: 0, id: "c".into(), tool_name: "f".into() },
            ProxyEvent::ToolcallDelta { content_index: 0, delta: "{\"a\": [1, 2".into() },
            ProxyEvent::TextDelta { content_index: 0, delta: "x".into() },
        ]);
        let partial = events[2].partial().unwrap();
        let call = partial.content[0].as_tool_call().unwrap();
        assert_eq!(serde_json::Value::Object(call.arguments.clone()), serde_json::json!({"a": [1, 2]}));
        assert_eq!(failure.as_deref(), Some("Received text_delta for non-text content"));
        assert_eq!(events.last().unwrap().type_name(), "error");

        let (_, failure) = run(vec![ProxyEvent::Start, ProxyEvent::TextStart { content_index: 5 }]);
        assert_eq!(failure.as_deref(), Some("Received text_start for content index 5, but the message has 0 blocks"));
    }

    #[test]
    fn signatures_and_terminal_fields() {
        let (events, failure) = run(vec![
            ProxyEvent::Start,
            ProxyEvent::TextStart { content_index: 0 },
            ProxyEvent::TextDelta { content_index: 0, delta: "hi".into() },
            ProxyEvent::TextEnd { content_index: 0, content_signature: Some("sig".into()) },
            ProxyEvent::Done {
                reason: StopReason::Stop,
                usage: pi_types::Usage { output: 7, ..Default::default() },
                provider_thinking_level: Some("high".into()),
            },
        ]);
        assert_eq!(failure, None);
        let message = events.last().unwrap().final_message().unwrap();
        assert_eq!(message.stop_reason, StopReason::Stop);
        assert_eq!(message.usage.output, 7);
        assert_eq!(message.provider_thinking_level.as_deref(), Some("high"));
        let pi_types::AssistantContent::Text(text) = &message.content[0] else { panic!("text") };
        assert_eq!(text.text_signature.as_deref(), Some("sig"));
    }
}
