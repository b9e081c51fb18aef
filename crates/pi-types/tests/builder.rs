//! The partial-message builder: events follow the deltas, partial arguments match the
//! reference's argument stream, misuse is an error, and streamed arguments are not copied.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use pi_types::json::ToolCallArgumentsStream;
use pi_types::{
    AssistantContent, AssistantMessage, AssistantMessageBuilder, AssistantMessageEvent, AssistantMessageEventStream,
    EventSender, Model, StopReason, ToolCall, TypesError,
};
use serde_json::{json, Value};

/// Runs a producer and collects every event it sends.
fn events<F, Fut>(producer: F) -> Vec<AssistantMessageEvent>
where
    F: FnOnce(EventSender) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    futures_executor::block_on(AssistantMessageEventStream::from_producer(producer).collect())
}

fn model() -> Model {
    Model::new("m-1").with_api("test-api").with_provider("test-provider")
}

fn names(events: &[AssistantMessageEvent]) -> Vec<&'static str> {
    events.iter().map(AssistantMessageEvent::type_name).collect()
}

#[test]
fn events_follow_the_deltas_of_interleaved_blocks() {
    let events = events(|tx| async move {
        let mut out = AssistantMessageBuilder::for_model(tx, &model());
        out.start().await;
        let thinking = out.start_thinking().await;
        out.thinking_delta(thinking, "Let me ").await.ok();
        out.thinking_delta(thinking, "think.").await.ok();
        let text = out.start_text().await;
        let call = out.start_tool_call("call_1", "search").await;
        out.text_delta(text, "Hel").await.ok();
        out.tool_call_delta(call, r#"{"q":"os"#).await.ok();
        out.text_delta(text, "lo").await.ok();
        out.tool_call_delta(call, r#"lo","n":3}"#).await.ok();
        out.thinking_mut(thinking).map(|t| t.thinking_signature = Some("sig".into())).ok();
        out.end_open_blocks().await;
        out.metadata_mut().response_id = Some("resp_1".into());
        out.done(StopReason::ToolUse).await;
    });
    assert_eq!(
        names(&events),
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_delta",
            "text_start",
            "toolcall_start",
            "text_delta",
            "toolcall_delta",
            "text_delta",
            "toolcall_delta",
            "thinking_end",
            "text_end",
            "toolcall_end",
            "done",
        ]
    );
    // Each delta is in its block of the partial sent with it.
    let mut texts = vec![String::new(); 3];
    for event in &events {
        let (index, delta, partial) = match event {
            AssistantMessageEvent::TextDelta { content_index, delta, partial }
            | AssistantMessageEvent::ThinkingDelta { content_index, delta, partial }
            | AssistantMessageEvent::ToolcallDelta { content_index, delta, partial } => {
                (*content_index, delta, partial)
            }
            _ => continue,
        };
        texts[index].push_str(delta);
        match &partial.content[index] {
            AssistantContent::Text(block) => assert_eq!(block.text, texts[index]),
            AssistantContent::Thinking(block) => assert_eq!(block.thinking, texts[index]),
            AssistantContent::ToolCall(_) => {}
        }
    }
    match &events[7] {
        AssistantMessageEvent::ToolcallDelta { partial, .. } => {
            assert_eq!(
                partial.content[2].as_tool_call().map(|c| Value::Object(c.arguments.clone())),
                Some(json!({"q": "os"}))
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    match &events[10] {
        AssistantMessageEvent::ThinkingEnd { content, partial, .. } => {
            assert_eq!(content, "Let me think.");
            assert_eq!(partial.content.len(), 3);
        }
        other => panic!("unexpected {other:?}"),
    }
    match &events[12] {
        AssistantMessageEvent::ToolcallEnd { content_index: 2, tool_call, partial } => {
            assert_eq!(Value::Object(tool_call.arguments.clone()), json!({"q": "oslo", "n": 3}));
            assert_eq!(partial.content[2].as_tool_call(), Some(&**tool_call));
        }
        other => panic!("unexpected {other:?}"),
    }
    let AssistantMessageEvent::Done { reason: StopReason::ToolUse, message } = &events[13] else {
        panic!("expected done");
    };
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(
        (message.api.as_str(), message.provider.as_str(), message.model.as_str()),
        ("test-api", "test-provider", "m-1")
    );
    assert_eq!(message.response_id.as_deref(), Some("resp_1"));
    assert_eq!(message.text(), "Hello");
    let AssistantContent::Thinking(thinking) = &message.content[0] else { panic!("expected thinking") };
    assert_eq!(thinking.thinking_signature.as_deref(), Some("sig"));
}

/// The partial arguments the builder publishes equal, event by event, what the reference's
/// `ToolCallArgumentsStream` returns for the same pieces (including its snapshot lag).
#[test]
fn partial_arguments_match_the_argument_stream() {
    // 400 members: an open object that costs more than the credit of a 7-character piece, so
    // the reference's snapshots lag behind the text.
    let many: Vec<String> = (0..400).map(|i| format!("\"k{i}\":[{i},true,null]")).collect();
    let documents = [
        r#"{"path":"a.txt","content":"line\nline \u00e9 \ud83d\ude00","n":-12.5e3,"ok":true,"list":[1,{"x":null}]}"#
            .to_owned(),
        format!("{{{}}}", many.join(",")),
        r#"["not", "an", "object"]"#.to_owned(),
        r#""text root""#.to_owned(),
        r#"{"a": tru"#.to_owned(),
        r#"{"unterminated": {"deep": [1, 2"#.to_owned(),
    ];
    for document in documents {
        let sizes: &[usize] = if document.len() > 1_000 { &[7, 64] } else { &[1, 7, 64] };
        for &size in sizes {
            let chars: Vec<char> = document.chars().collect();
            let pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
            let mut reference = ToolCallArgumentsStream::new();
            let expected: Vec<Value> =
                pieces.iter().map(|piece| Value::Object(reference.append(piece).clone())).collect();
            let final_arguments = Value::Object(reference.finish().arguments);
            let (published, ended) = stream_arguments(pieces);
            assert_eq!(published, expected, "{document} in pieces of {size}");
            assert_eq!(ended, Some(final_arguments), "{document}");
        }
    }
}

/// Streams `pieces` as one tool call, dropping each event before the next as the loop does;
/// the partial arguments of each delta and the final arguments.
fn stream_arguments(pieces: Vec<String>) -> (Vec<Value>, Option<Value>) {
    let mut stream = AssistantMessageEventStream::from_producer(|tx| async move {
        let mut out = AssistantMessageBuilder::new(tx, AssistantMessage::default());
        out.start().await;
        let call = out.start_tool_call("id", "tool").await;
        for piece in pieces {
            out.tool_call_delta(call, piece).await.ok();
        }
        out.end_tool_call(call).await.ok();
        out.done(StopReason::ToolUse).await;
    });
    futures_executor::block_on(async move {
        let (mut published, mut ended) = (Vec::new(), None);
        while let Some(event) = stream.next().await {
            match &event {
                AssistantMessageEvent::ToolcallDelta { partial, .. } => {
                    published.extend(partial.content[0].as_tool_call().map(|c| Value::Object(c.arguments.clone())));
                }
                AssistantMessageEvent::ToolcallEnd { tool_call, .. } => {
                    ended = Some(Value::Object(tool_call.arguments.clone()));
                }
                _ => {}
            }
        }
        (published, ended)
    })
}

#[test]
fn malformed_arguments_end_with_an_error_and_no_arguments() {
    let events = events(|tx| async move {
        let mut out = AssistantMessageBuilder::new(tx, AssistantMessage::default());
        out.start().await;
        let call = out.start_tool_call("id", "tool").await;
        out.tool_call_delta(call, r#"{"a": 1,"#).await.ok();
        out.end_tool_call(call).await.ok();
        out.done(StopReason::ToolUse).await;
    });
    let Some(AssistantMessageEvent::ToolcallEnd { tool_call, partial, .. }) = events.get(3) else {
        panic!("expected toolcall_end: {:?}", names(&events));
    };
    assert!(tool_call.arguments.is_empty());
    assert!(tool_call.arguments_error.is_some());
    assert_eq!(partial.content[0].as_tool_call(), Some(&**tool_call));
}

#[test]
fn replaced_argument_text_continues_or_starts_over() {
    let events = events(|tx| async move {
        let mut out = AssistantMessageBuilder::new(tx, AssistantMessage::default());
        out.start().await;
        let call =
            out.start_tool_call_with_arguments(ToolCall { id: "a".into(), ..Default::default() }, r#"{"x":"#).await;
        out.replace_tool_call_arguments(call, r#"{"x":1}"#).await.ok();
        out.replace_tool_call_arguments(call, r#"{"x":1}"#).await.ok();
        out.replace_tool_call_arguments(call, r#"{"y":2}"#).await.ok();
        out.end_tool_call(call).await.ok();
        out.done(StopReason::ToolUse).await;
    });
    assert_eq!(names(&events), ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]);
    let AssistantMessageEvent::ToolcallDelta { delta, partial, .. } = &events[2] else { panic!("expected a delta") };
    assert_eq!(delta, "1}");
    assert_eq!(partial.content[0].as_tool_call().map(|c| Value::Object(c.arguments.clone())), Some(json!({"x": 1})));
    let AssistantMessageEvent::ToolcallEnd { tool_call, .. } = &events[3] else { panic!("expected the end") };
    assert_eq!(Value::Object(tool_call.arguments.clone()), json!({"y": 2}));
}

#[test]
fn misuse_is_an_error_and_sends_nothing() {
    let events = events(|tx| async move {
        let mut out = AssistantMessageBuilder::new(tx, AssistantMessage::default());
        out.start().await;
        let text = out.start_text().await;
        let wrong_kind = out.tool_call_delta(text, "{").await;
        assert!(matches!(wrong_kind, Err(TypesError::WrongBlock { index: 0, .. })));
        assert_eq!(
            wrong_kind.map_err(|e| e.to_string()),
            Err("content block 0 is an open text block, expected an open toolCall block".to_owned())
        );
        let missing = out.text_delta(5, "x").await.map_err(|e| e.to_string());
        assert_eq!(missing, Err("no content block 5: the message has 1".to_owned()));
        out.end_text(text).await.ok();
        assert!(out.end_text(text).await.is_err());
        assert!(out.text_delta(text, "late").await.is_err());
        assert!(out.end_block(9).await.is_err());
        // Ended blocks still take fields without events.
        assert!(out.text_mut(text).map(|t| t.text_signature = Some("s".into())).is_ok());
        assert!(out.thinking_mut(text).is_err());
        out.done(StopReason::Stop).await;
    });
    assert_eq!(names(&events), ["start", "text_start", "text_end", "done"]);
    let Some(AssistantMessageEvent::Done { message, .. }) = events.last() else { panic!("expected done") };
    assert_eq!(message.text(), "");
}

#[test]
fn metadata_and_tool_call_guards_cannot_change_streamed_content() {
    let events = events(|tx| async move {
        let mut out = AssistantMessageBuilder::new(tx, AssistantMessage::default());
        out.start().await;
        let call = out.start_tool_call("", "").await;
        out.tool_call_delta(call, r#"{"a":1}"#).await.ok();
        {
            let mut metadata = out.metadata_mut();
            assert!(metadata.content.is_empty());
            metadata.content.push(AssistantContent::text("sneaked in"));
            metadata.usage.input = 5;
        }
        if let Ok(mut block) = out.tool_call_mut(call) {
            block.id = "call_9".into();
            block.arguments.insert("b".into(), json!(2));
        }
        out.tool_call_changed(call).await.ok();
        out.end_tool_call(call).await.ok();
        out.done(StopReason::ToolUse).await;
    });
    assert_eq!(names(&events), ["start", "toolcall_start", "toolcall_delta", "toolcall_delta", "toolcall_end", "done"]);
    let AssistantMessageEvent::ToolcallDelta { delta, partial, .. } = &events[3] else { panic!("expected a delta") };
    assert_eq!(delta, "");
    let call = partial.content[0].as_tool_call().cloned().unwrap_or_default();
    assert_eq!((call.id.as_str(), Value::Object(call.arguments)), ("call_9", json!({"a": 1})));
    assert_eq!(partial.content.len(), 1);
    assert_eq!(partial.usage.input, 5);
}

#[test]
fn endings_error_aborted_and_before_start() {
    let failed = events(|tx| async move {
        let out = AssistantMessageBuilder::for_model(tx, &model());
        out.error("No API key for provider: test-provider").await;
    });
    assert_eq!(names(&failed), ["error"]);
    let AssistantMessageEvent::Error { reason: StopReason::Error, error } = &failed[0] else {
        panic!("expected error")
    };
    assert_eq!(error.error_message.as_deref(), Some("No API key for provider: test-provider"));

    let aborted = events(|tx| async move {
        let mut out = AssistantMessageBuilder::for_model(tx, &model());
        out.start().await;
        let text = out.start_text().await;
        out.text_delta(text, "partial answer").await.ok();
        out.aborted("Request was aborted").await;
    });
    assert_eq!(names(&aborted), ["start", "text_start", "text_delta", "error"]);
    let AssistantMessageEvent::Error { reason: StopReason::Aborted, error } = &aborted[3] else {
        panic!("expected error")
    };
    assert_eq!(error.stop_reason, StopReason::Aborted);
    assert_eq!(error.text(), "partial answer");

    let scripted_error = events(|tx| async move {
        let mut out = AssistantMessageBuilder::for_model(tx, &model());
        out.metadata_mut().error_message = Some("scripted".into());
        out.done(StopReason::Error).await;
    });
    let AssistantMessageEvent::Error { reason: StopReason::Error, error } = &scripted_error[0] else {
        panic!("expected error")
    };
    assert_eq!(error.error_message.as_deref(), Some("scripted"));
}

/// Issue 8: a 400,000-character argument streamed in 4,000 pieces, each event dropped before
/// the next (as the loop does). Copies are counted by addresses: a copy of the message moves its
/// `Arc`, a copy of the argument map moves the growing string's buffer (the copy is made while
/// the old one is alive, so it cannot land at the same address). In-place growth moves the
/// buffer only when the allocator reallocates, a logarithmic number of times.
#[test]
fn streamed_arguments_are_edited_in_place() {
    const PIECES: usize = 4_000;
    const PIECE: usize = 100;
    let stream = AssistantMessageEventStream::from_producer(|tx| async move {
        let mut out = AssistantMessageBuilder::new(tx, AssistantMessage::default());
        out.start().await;
        let call = out.start_tool_call("call_1", "write").await;
        out.tool_call_delta(call, r#"{"path":"big.txt","content":""#).await.ok();
        let piece = "x".repeat(PIECE);
        for _ in 0..PIECES {
            out.tool_call_delta(call, piece.as_str()).await.ok();
        }
        out.tool_call_delta(call, "\"}").await.ok();
        out.end_tool_call(call).await.ok();
        out.done(StopReason::ToolUse).await;
    });
    let (message_moves, buffer_moves, growth_steps, final_length) = futures_executor::block_on(async move {
        let mut stream = stream;
        let (mut message_moves, mut buffer_moves, mut growth_steps) = (0usize, 0usize, 0usize);
        let (mut last_message, mut last_buffer, mut last_length) = (None, None, 0usize);
        let mut final_length = 0;
        while let Some(event) = stream.next().await {
            if let AssistantMessageEvent::Done { message, .. } = &event {
                final_length = content_of(message).map_or(0, str::len);
            }
            let Some(partial) = event.partial() else { continue };
            let address = Arc::as_ptr(partial) as usize;
            message_moves += usize::from(last_message.is_some_and(|last| last != address));
            last_message = Some(address);
            if let AssistantMessageEvent::ToolcallDelta { .. } = &event {
                if let Some(content) = content_of(partial) {
                    let buffer = content.as_ptr() as usize;
                    buffer_moves += usize::from(last_buffer.is_some_and(|last| last != buffer));
                    growth_steps += usize::from(content.len() > last_length);
                    last_buffer = Some(buffer);
                    last_length = content.len();
                }
            }
        }
        (message_moves, buffer_moves, growth_steps, final_length)
    });
    assert_eq!(final_length, PIECES * PIECE);
    // The partial grew with (nearly) every piece, so the count below is not vacuous.
    assert!(growth_steps >= PIECES - 10, "the partial grew only {growth_steps} times");
    assert_eq!(message_moves, 0, "the message was copied");
    assert!(buffer_moves <= 40, "the argument string moved {buffer_moves} times");
}

fn content_of(message: &AssistantMessage) -> Option<&str> {
    message.content.first()?.as_tool_call()?.arguments.get("content")?.as_str()
}

/// A provider's future holds the builder's futures across its awaits: each stores the one event
/// it hands over and the method's result, not the block or call it was given (a tool call's
/// start was 528 bytes as an `async fn`, its end 496).
#[test]
fn a_block_method_future_holds_only_its_event() {
    let event = std::mem::size_of::<AssistantMessageEvent>();
    let result = std::mem::size_of::<Result<(), TypesError>>();
    let _ = events(move |tx| async move {
        let mut out = AssistantMessageBuilder::for_model(tx, &model());
        let start = out.start_tool_call("call_1", "weather");
        assert!(std::mem::size_of_val(&start) <= event + 32, "start: {} bytes", std::mem::size_of_val(&start));
        let index = start.await;
        let delta = out.tool_call_delta(index, r#"{"city":"Oslo"}"#);
        assert!(std::mem::size_of_val(&delta) <= event + result + 16, "delta: {} bytes", std::mem::size_of_val(&delta));
        delta.await.ok();
        let end = out.end_tool_call_with(index, ToolCall::default());
        assert!(std::mem::size_of_val(&end) <= event + result + 16, "end: {} bytes", std::mem::size_of_val(&end));
        end.await.ok();
        let done = out.done(StopReason::ToolUse);
        assert!(std::mem::size_of_val(&done) <= event + 16, "done: {} bytes", std::mem::size_of_val(&done));
        done.await;
    });
}
