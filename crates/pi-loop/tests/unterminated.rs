//! A stream that ends without `done`/`error` keeps everything streamed after `start`.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use pi_loop::{run_agent_loop, AgentContext, FnSink, LoopConfig};
use pi_types::CancellationToken;
use pi_types::{
    AgentEvent, AgentMessage, AssistantContent, AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream,
    Model, StopReason, StreamOptions, TextContent, ThinkingContent, TranscriptContext, UserMessage,
};

fn prompt() -> Vec<AgentMessage> {
    vec![AgentMessage::from(UserMessage::text("hi"))]
}

/// A producer that mutates its partial in place, as the adapters do, and then just stops.
fn unterminated(model: &Model, _ctx: TranscriptContext, _options: StreamOptions) -> AssistantMessageEventStream {
    let base = AssistantMessage { api: model.api.clone(), model: model.id.clone(), ..Default::default() };
    AssistantMessageEventStream::from_producer(move |tx| async move {
        let mut partial = Arc::new(base);
        tx.send(AssistantMessageEvent::Start { partial: Arc::clone(&partial) }).await;
        Arc::make_mut(&mut partial).content.push(AssistantContent::Thinking(ThinkingContent::default()));
        tx.send(AssistantMessageEvent::ThinkingStart { content_index: 0, partial: Arc::clone(&partial) }).await;
        for piece in ["mull", "ing"] {
            if let Some(AssistantContent::Thinking(t)) = Arc::make_mut(&mut partial).content.get_mut(0) {
                t.thinking.push_str(piece);
            }
            let event = AssistantMessageEvent::ThinkingDelta {
                content_index: 0,
                delta: piece.into(),
                partial: Arc::clone(&partial),
            };
            tx.send(event).await;
        }
        tx.send(AssistantMessageEvent::ThinkingEnd {
            content_index: 0,
            content: "mulling".into(),
            partial: Arc::clone(&partial),
        })
        .await;
        Arc::make_mut(&mut partial).content.push(AssistantContent::Text(TextContent::default()));
        tx.send(AssistantMessageEvent::TextStart { content_index: 1, partial: Arc::clone(&partial) }).await;
        for piece in ["hel", "lo"] {
            if let Some(AssistantContent::Text(t)) = Arc::make_mut(&mut partial).content.get_mut(1) {
                t.text.push_str(piece);
            }
            let event = AssistantMessageEvent::TextDelta {
                content_index: 1,
                delta: piece.into(),
                partial: Arc::clone(&partial),
            };
            tx.send(event).await;
        }
        // No terminal event: the partial is dropped with the producer.
    })
}

#[tokio::test]
async fn content_streamed_after_start_is_kept() {
    let config = LoopConfig::new(Model::new("m").with_api("test").with_provider("test"), Arc::new(unterminated));
    let ends = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&ends);
    let sink = FnSink(move |event: &AgentEvent| {
        if let AgentEvent::MessageEnd { message } = event {
            seen.lock().unwrap().push(message.clone());
        }
    });
    let messages = run_agent_loop(prompt(), AgentContext::default(), config, Arc::new(sink), CancellationToken::new())
        .await
        .unwrap();
    let last = messages.last().unwrap().as_assistant().unwrap();
    assert_eq!(last.stop_reason, StopReason::Error);
    assert_eq!(last.error_message.as_deref(), Some("Stream ended without a terminal event"));
    assert_eq!(
        last.content,
        vec![
            AssistantContent::Thinking(ThinkingContent { thinking: "mulling".into(), ..Default::default() }),
            AssistantContent::Text(TextContent { text: "hello".into(), ..Default::default() }),
        ]
    );
    // The transcript and the `message_end` event carry the same message.
    let ends = ends.lock().unwrap();
    assert_eq!(ends.last().and_then(AgentMessage::as_assistant), Some(last));
}

/// A producer whose first sight of a block is a delta (no `text_start`), then stops.
fn delta_first(model: &Model, _ctx: TranscriptContext, _options: StreamOptions) -> AssistantMessageEventStream {
    let base = AssistantMessage { api: model.api.clone(), model: model.id.clone(), ..Default::default() };
    AssistantMessageEventStream::from_producer(move |tx| async move {
        let mut partial = Arc::new(base);
        tx.send(AssistantMessageEvent::Start { partial: Arc::clone(&partial) }).await;
        Arc::make_mut(&mut partial).content.push(AssistantContent::text("ab"));
        let event =
            AssistantMessageEvent::TextDelta { content_index: 0, delta: "ab".into(), partial: Arc::clone(&partial) };
        tx.send(event).await;
        if let Some(AssistantContent::Text(t)) = Arc::make_mut(&mut partial).content.get_mut(0) {
            t.text.push('c');
        }
        tx.send(AssistantMessageEvent::TextDelta {
            content_index: 0,
            delta: "c".into(),
            partial: Arc::clone(&partial),
        })
        .await;
    })
}

#[tokio::test]
async fn a_block_first_seen_on_a_delta_is_kept_once() {
    let config = LoopConfig::new(Model::new("m").with_api("test").with_provider("test"), Arc::new(delta_first));
    let messages = run_agent_loop(
        prompt(),
        AgentContext::default(),
        config,
        Arc::new(FnSink(|_: &AgentEvent| {})),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let last = messages.last().unwrap().as_assistant().unwrap();
    assert_eq!(last.content, vec![AssistantContent::text("abc")]);
}

/// A builder-made response that stops in the middle of a tool call: the builder leaves its
/// message with the stream, so the loop ends with everything streamed, the open call's partial
/// arguments included, without having kept a copy along the way.
fn builder_stops(model: &Model, _ctx: TranscriptContext, _options: StreamOptions) -> AssistantMessageEventStream {
    let model = model.clone();
    AssistantMessageEventStream::from_producer(move |tx| async move {
        let mut out = pi_types::AssistantMessageBuilder::for_model(tx, &model);
        out.start().await;
        let text = out.start_text().await;
        out.text_delta(text, "Writing").await.unwrap();
        out.end_text(text).await.unwrap();
        let call = out.start_tool_call("call_1", "write").await;
        out.tool_call_delta(call, r#"{"path":"a.txt","content":"hel"#).await.unwrap();
        out.metadata_mut().usage.output = 9;
        // Dropped here without `done`: a producer that returned early.
    })
}

#[tokio::test]
async fn a_builder_that_stops_leaves_everything_streamed() {
    let config = LoopConfig::new(Model::new("m").with_api("test").with_provider("test"), Arc::new(builder_stops));
    let updates = Arc::new(Mutex::new(0));
    let seen = Arc::clone(&updates);
    let sink = FnSink(move |event: &AgentEvent| {
        if matches!(event, AgentEvent::MessageUpdate { .. }) {
            *seen.lock().unwrap() += 1;
        }
    });
    let messages = run_agent_loop(prompt(), AgentContext::default(), config, Arc::new(sink), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(*updates.lock().unwrap(), 5);
    let last = messages.last().unwrap().as_assistant().unwrap();
    assert_eq!(last.stop_reason, StopReason::Error);
    assert_eq!(last.error_message.as_deref(), Some("Stream ended without a terminal event"));
    assert_eq!(last.text(), "Writing");
    let call = last.tool_calls().next().unwrap();
    assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "write"));
    assert_eq!(
        serde_json::Value::Object(call.arguments.clone()),
        serde_json::json!({"path": "a.txt", "content": "hel"})
    );
    assert_eq!(last.usage.output, 9);
}
