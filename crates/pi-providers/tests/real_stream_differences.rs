//! What the adapters do with shapes found in streams recorded from live APIs
//! (`tests/fixtures/providers-real`), where pi-rs deliberately differs from pi-ai 1.6.1 or where
//! pi-ai's behaviour was checked and kept. The table of differences and the reasons are in
//! `docs/providers/real-streams.md`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use futures::StreamExt;
use pi_providers::api::google::gemini::GoogleGenerativeAi;
use pi_providers::api::openai::completions::OpenAICompletions;
use pi_types::transcript::normalize_context;
use pi_types::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, Context, Message, Model, StopReason, StreamFn,
    StreamOptions, UserMessage,
};
use serde_json::{json, Value};

use loopback::{with_length, Server, Step};

async fn run(adapter: &dyn StreamFn, api: &str, body: &str) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let server = Server::start(vec![Step::Bytes(with_length(200, "text/event-stream", "", body.as_bytes()))]).await;
    let mut model = Model::new("test-model").with_api(api).with_provider("test");
    model.base_url = server.url.clone();
    model.max_tokens = 1000;
    model.context_window = 100_000;
    let context = normalize_context(Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    });
    let options = StreamOptions { api_key: Some("test-key".into()), max_retries: Some(0), ..Default::default() };
    let mut stream = adapter.stream(&model, context, options);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let message = stream.final_message().map(|m| (**m).clone()).expect("terminal event");
    (events, message)
}

fn names(events: &[AssistantMessageEvent]) -> Vec<&'static str> {
    events.iter().map(AssistantMessageEvent::type_name).collect()
}

fn gemini(parts: Value, finish: Option<&str>) -> String {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}});
    if let Some(reason) = finish {
        candidate["finishReason"] = json!(reason);
    }
    format!("data: {}\r\n\r\n", json!({"candidates": [candidate]}))
}

fn call_piece(path: &str, value: Value, more: bool) -> Value {
    let mut piece = json!({"jsonPath": path});
    piece.as_object_mut().unwrap().extend(value.as_object().unwrap().clone());
    json!({"functionCall": {"partialArgs": [piece], "willContinue": more}})
}

/// Gemini's streamed function-call arguments (`partialArgs` pieces after a named
/// `functionCall` with `willContinue`) become one call per named call with the merged arguments;
/// pi-ai makes an empty call of every piece.
#[tokio::test]
async fn gemini_streamed_function_call_arguments_merge_into_their_call() {
    let body = [
        gemini(json!([{"functionCall": {"name": "write", "willContinue": true}, "thoughtSignature": "c2ln"}]), None),
        gemini(json!([call_piece("$.items[0].name", json!({"stringValue": "Ap", "willContinue": true}), true)]), None),
        gemini(json!([call_piece("$.items[0].name", json!({"stringValue": "ple"}), true)]), None),
        gemini(json!([call_piece("$.items[0].price", json!({"numberValue": 0.5}), true)]), None),
        gemini(json!([call_piece("$.items[1].name", json!({"stringValue": "Pear"}), true)]), None),
        gemini(json!([call_piece("$.dry", json!({"boolValue": true}), true)]), None),
        gemini(json!([call_piece("$.note", json!({"nullValue": "NULL_VALUE"}), true)]), None),
        gemini(json!([{"functionCall": {}}]), None),
        // A call sent whole between two streamed ones.
        gemini(json!([{"functionCall": {"name": "read", "args": {"id": "B"}}}]), None),
        // A streamed call whose last piece has no `willContinue` (no empty terminator).
        gemini(json!([{"functionCall": {"name": "read", "willContinue": true}}]), None),
        gemini(json!([call_piece("$.id", json!({"stringValue": "C"}), false)]), None),
        gemini(json!([{"text": "Done."}]), Some("STOP")),
    ]
    .concat();
    let (events, message) = run(&GoogleGenerativeAi::default(), "google-generative-ai", &body).await;
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0].name, "write");
    assert_eq!(
        Value::Object(calls[0].arguments.clone()),
        json!({"items": [{"name": "Apple", "price": 0.5}, {"name": "Pear"}], "dry": true, "note": null})
    );
    assert_eq!(calls[0].thought_signature.as_deref(), Some("c2ln"));
    assert!(calls[0].id.starts_with("write_"), "{}", calls[0].id);
    assert_eq!(Value::Object(calls[1].arguments.clone()), json!({"id": "B"}));
    assert_eq!(Value::Object(calls[2].arguments.clone()), json!({"id": "C"}));
    assert!(calls.iter().all(|c| !c.name.is_empty()));
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(message.text(), "Done.");
    // Each call: start, one delta with the JSON text of its arguments, end; the streamed calls'
    // events follow their pieces (start at the named piece, delta and end at the last one).
    assert_eq!(
        names(&events),
        [
            "start",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "text_start",
            "text_delta",
            "text_end",
            "done"
        ]
    );
    let deltas: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AssistantMessageEvent::ToolcallDelta { delta, .. } => Some(delta.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        deltas,
        [
            r#"{"items":[{"name":"Apple","price":0.5},{"name":"Pear"}],"dry":true,"note":null}"#,
            r#"{"id":"B"}"#,
            r#"{"id":"C"}"#
        ]
    );
}

/// A streamed call still open when the stream ends is ended with its arguments so far.
#[tokio::test]
async fn gemini_streamed_call_open_at_the_end_is_ended() {
    let body = [
        gemini(json!([{"functionCall": {"name": "read", "willContinue": true}}]), None),
        gemini(json!([call_piece("$.id", json!({"stringValue": "A"}), true)]), Some("STOP")),
    ]
    .concat();
    let (events, message) = run(&GoogleGenerativeAi::default(), "google-generative-ai", &body).await;
    assert_eq!(names(&events), ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]);
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(Value::Object(calls[0].arguments.clone()), json!({"id": "A"}));
    assert_eq!(message.stop_reason, StopReason::ToolUse);
}

/// The named opening piece may carry `partialArgs` itself, and may be the only piece.
#[tokio::test]
async fn gemini_opening_piece_with_partial_args() {
    let opening = |more: bool| json!([{"functionCall": {"name": "read", "partialArgs": [{"jsonPath": "$.id", "stringValue": "A"}], "willContinue": more}}]);
    let body = [
        gemini(opening(true), None),
        gemini(json!([call_piece("$.page", json!({"numberValue": 2}), false)]), None),
        gemini(opening(false), Some("STOP")),
    ]
    .concat();
    let (events, message) = run(&GoogleGenerativeAi::default(), "google-generative-ai", &body).await;
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(Value::Object(calls[0].arguments.clone()), json!({"id": "A", "page": 2}));
    assert_eq!(Value::Object(calls[1].arguments.clone()), json!({"id": "A"}));
    assert_eq!(names(&events).iter().filter(|n| **n == "toolcall_delta").count(), 2);
}

/// As pi-ai: a function call without a name (and no streamed call open) is a call named `""`
/// whose synthesized id is `undefined_<ms>_<n>`.
#[tokio::test]
async fn gemini_call_without_a_name_gets_an_undefined_id() {
    let body = gemini(json!([{"functionCall": {"args": {"x": 1}}}]), Some("STOP"));
    let (_, message) = run(&GoogleGenerativeAi::default(), "google-generative-ai", &body).await;
    let call = message.tool_calls().next().unwrap();
    assert_eq!(call.name, "");
    let parts: Vec<&str> = call.id.split('_').collect();
    assert_eq!(parts.len(), 3, "{}", call.id);
    assert_eq!(parts[0], "undefined");
    assert_eq!(parts[1].len(), 13);
    assert!(parts[1].bytes().chain(parts[2].bytes()).all(|b| b.is_ascii_digit()), "{}", call.id);
}

fn chat(delta: Value, finish: Option<&str>) -> String {
    let chunk =
        json!({"id": "c1", "model": "test-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

/// Chat Completions `delta.content` as typed parts (Mistral's reasoning models): thinking
/// parts become the thinking block, text parts the text block; pi-ai writes `[object Object]`.
#[tokio::test]
async fn chat_content_parts_become_thinking_and_text() {
    let body = [
        chat(json!({"role": "assistant", "content": ""}), None),
        chat(json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Let me "}]}]}), None),
        chat(json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "think."}]}]}), None),
        chat(json!({"content": [{"type": "text", "text": "The answer"}]}), None),
        chat(json!({"content": " is 4."}), None),
        chat(json!({"content": [{"type": "image_url", "image_url": "x"}, {"type": "text", "text": ""}]}), None),
        chat(json!({}), Some("stop")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let (events, message) = run(&OpenAICompletions, "openai-completions", &body).await;
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(message.content.len(), 2, "{:?}", message.content);
    match &message.content[0] {
        AssistantContent::Thinking(t) => assert_eq!(t.thinking, "Let me think."),
        other => panic!("expected thinking, got {other:?}"),
    }
    assert_eq!(message.text(), "The answer is 4.");
    assert!(!message.text().contains("[object Object]"));
    assert_eq!(
        names(&events),
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_delta",
            "text_start",
            "text_delta",
            "text_delta",
            "thinking_end",
            "text_end",
            "done"
        ]
    );
}
