//! The Mistral adapter beyond the replay cases: cancellation (mid-stream and before the
//! headers), the key never leaving the `Authorization` header, request headers, the key from
//! `options.env`, and the request fields the oracle's cases do not pin.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use indexmap::IndexMap;
use loopback::{sse_head, with_length, Server, Step};
use pi_providers::api::mistral::{build_request_body, MistralConversations};
use pi_types::transcript::normalize_context;
use pi_types::{
    AssistantContent, AssistantMessage, AssistantMessageEvent, CancellationToken, Context, Message, Model, StopReason,
    StreamFn, StreamOptions, ThinkingLevel, UserMessage,
};
use serde_json::{json, Value};

const SECRET: &str = "mistral-secret-key-0123456789";
const GUARD: Duration = Duration::from_secs(20);

fn model(url: &str) -> Model {
    serde_json::from_value(json!({
        "id": "magistral-medium-latest",
        "name": "Magistral Medium (latest)",
        "api": "mistral-conversations",
        "provider": "mistral",
        "baseUrl": url,
        "reasoning": true,
        "input": ["text", "image"],
        "cost": {"input": 2, "output": 5, "cacheRead": 0.2, "cacheWrite": 0},
        "contextWindow": 262144,
        "maxTokens": 16384,
        "thinkingLevelMap": {"off": "none", "minimal": null, "low": null, "medium": null, "high": "high",
                             "xhigh": null, "max": null},
    }))
    .unwrap()
}

fn context() -> pi_types::TranscriptContext {
    normalize_context(Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    })
}

fn options() -> StreamOptions {
    StreamOptions {
        api_key: Some(SECRET.into()),
        max_retries: Some(0),
        timeout_ms: Some(2_000),
        idle_timeout_ms: Some(5_000),
        ..Default::default()
    }
}

fn sse(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

fn delta(delta: Value) -> String {
    sse(&json!({"id": "c1", "object": "chat.completion.chunk", "model": "magistral-medium-latest",
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}))
}

async fn collect(
    model: &Model,
    options: StreamOptions,
    on_event: impl Fn(&AssistantMessageEvent),
) -> Vec<AssistantMessageEvent> {
    let run = async {
        let mut stream = MistralConversations.stream(model, context(), options);
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            on_event(&event);
            events.push(event);
        }
        events
    };
    let events = tokio::time::timeout(GUARD, run).await.expect("no hang");
    let terminals = events.iter().filter(|e| e.final_message().is_some()).count();
    assert_eq!(terminals, 1, "exactly one terminal event");
    assert!(events.last().and_then(AssistantMessageEvent::final_message).is_some(), "terminal event last");
    events
}

fn last_message(events: &[AssistantMessageEvent]) -> AssistantMessage {
    (**events.last().and_then(AssistantMessageEvent::final_message).unwrap()).clone()
}

#[tokio::test]
async fn cancellation_mid_stream_keeps_the_content_so_far() {
    let body = [
        delta(json!({"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Hmm."}]}]})),
        delta(json!({"content": "Hel"})),
        delta(json!({"tool_calls": [{"id": "abcDEF123", "index": 0, "function": {"name": "get_weather", "arguments": "{\"city\":\"Os"}}]})),
    ]
    .concat();
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body.into_bytes()), Step::Hold]).await;
    let cancel = CancellationToken::new();
    let options = StreamOptions { cancel: Some(cancel.clone()), ..options() };
    let events = collect(&model(&server.url), options, |event| {
        if event.type_name() == "toolcall_delta" {
            cancel.cancel();
        }
    })
    .await;
    let names: Vec<&str> = events.iter().map(AssistantMessageEvent::type_name).collect();
    assert_eq!(
        names,
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
            "toolcall_start",
            "toolcall_delta",
            "error"
        ]
    );
    let message = last_message(&events);
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.error_message.as_deref(), Some("This operation was aborted"));
    assert_eq!(message.text(), "Hel");
    assert!(matches!(&message.content[0], AssistantContent::Thinking(t) if t.thinking == "Hmm."));
    let call = message.tool_calls().next().expect("the started call is kept");
    assert_eq!(call.id, "abcDEF123");
    assert_eq!(call.arguments["city"], "Os");
    assert!(server.released(1).await, "connection let go");
}

#[tokio::test]
async fn cancellation_before_the_headers_is_one_aborted_error() {
    let server = Server::start(vec![Step::Hold]).await;
    let cancel = CancellationToken::new();
    let options = StreamOptions { cancel: Some(cancel.clone()), ..options() };
    let trigger = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let events = collect(&model(&server.url), options, |_| {}).await;
    trigger.await.unwrap();
    assert_eq!(events.len(), 1, "no start before the headers");
    let message = last_message(&events);
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.error_message.as_deref(), Some("This operation was aborted"));
}

#[tokio::test]
async fn the_key_goes_only_into_the_authorization_header() {
    let body = br#"{"message":"Unauthorized","request_id":"r1"}"#;
    let server = Server::start(vec![Step::Bytes(with_length(401, "application/json", "", body))]).await;
    let model = model(&server.url);
    let events = collect(&model, options(), |_| {}).await;
    let message = last_message(&events);
    assert_eq!(
        message.error_message.as_deref(),
        Some(r#"Mistral API error (401): {"message":"Unauthorized","request_id":"r1"}"#)
    );
    for event in &events {
        assert!(!format!("{event:?}").contains(SECRET), "key in an event");
    }
    assert!(!format!("{:?}", options()).contains(SECRET), "key in the options' Debug");
    let heads = server.heads.lock().unwrap().clone();
    let head = heads.first().expect("one request");
    assert!(head.contains(&format!("authorization: bearer {}", SECRET.to_lowercase())), "{head}");
    assert!(head.contains("accept: text/event-stream"), "{head}");
    assert!(head.starts_with("post /v1/chat/completions "), "{head}");
    // A connection failure names neither the key nor the header.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let events = collect(&self::model(&closed), options(), |_| {}).await;
    let text = last_message(&events).error_message.unwrap_or_default();
    assert!(text.starts_with("fetch failed"), "{text}");
    assert!(!text.contains(SECRET), "{text}");
}

#[tokio::test]
async fn session_affinity_header_unless_overridden() {
    let ok = [
        delta(json!({"content": "ok"})),
        sse(&json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let steps = || vec![Step::Bytes(sse_head()), Step::Bytes(ok.clone().into_bytes())];
    let server = Server::start(steps()).await;
    let with_session = StreamOptions { session_id: Some("sess-42".into()), ..options() };
    let events = collect(&model(&server.url), with_session.clone(), |_| {}).await;
    assert_eq!(last_message(&events).stop_reason, StopReason::Stop);
    assert!(server.heads.lock().unwrap()[0].contains("x-affinity: sess-42"));

    // A caller's own x-affinity (any case) wins.
    let server = Server::start(steps()).await;
    let mut headers = IndexMap::new();
    headers.insert("X-Affinity".to_owned(), Some("mine".to_owned()));
    let overridden = StreamOptions { headers: pi_types::RequestHeaders::from(headers), ..with_session };
    collect(&model(&server.url), overridden, |_| {}).await;
    let head = server.heads.lock().unwrap()[0].clone();
    assert!(head.contains("x-affinity: mine") && !head.contains("sess-42"), "{head}");
}

#[tokio::test]
async fn the_key_may_come_from_options_env() {
    let server = Server::start(vec![Step::Hold]).await;
    let mut env = IndexMap::new();
    env.insert("MISTRAL_API_KEY".to_owned(), "env-key-1".to_owned());
    let from_env = StreamOptions { api_key: None, env: Some(Arc::new(env)), timeout_ms: Some(200), ..options() };
    let events = collect(&model(&server.url), from_env, |_| {}).await;
    assert_eq!(last_message(&events).error_message.as_deref(), Some("Mistral response headers timed out after 200ms"));
    assert!(server.heads.lock().unwrap()[0].contains("authorization: bearer env-key-1"));

    // Another provider on this API needs its own key.
    let mut other = model("http://127.0.0.1:9");
    other.provider = "my-mistral".into();
    let options = StreamOptions { api_key: None, ..options() };
    let events = collect(&other, options, |_| {}).await;
    assert_eq!(last_message(&events).error_message.as_deref(), Some("No API key for provider: my-mistral"));
}

#[test]
fn reasoning_fields_follow_the_model() {
    let context = context();
    // A thinking-level map: `reasoning_effort`, `off` mapped when reasoning is not asked for.
    let mapped = model("https://api.mistral.ai");
    let high = StreamOptions { reasoning: Some(ThinkingLevel::High), ..Default::default() };
    let body = build_request_body(&mapped, &context, &high).unwrap();
    assert_eq!(body["reasoning_effort"], "high");
    assert!(body.get("prompt_mode").is_none());
    let body = build_request_body(&mapped, &context, &StreamOptions::default()).unwrap();
    assert_eq!(body["reasoning_effort"], "none");
    // A reasoning model without a map: `prompt_mode: "reasoning"` only when asked for.
    let mut unmapped = mapped.clone();
    unmapped.thinking_level_map = None;
    let body = build_request_body(&unmapped, &context, &high).unwrap();
    assert_eq!(body["prompt_mode"], "reasoning");
    assert!(body.get("reasoning_effort").is_none());
    let body = build_request_body(&unmapped, &context, &StreamOptions::default()).unwrap();
    assert!(body.get("prompt_mode").is_none());
    // Not a reasoning model: neither.
    unmapped.reasoning = false;
    let body = build_request_body(&unmapped, &context, &high).unwrap();
    assert!(body.get("prompt_mode").is_none() && body.get("reasoning_effort").is_none());
    // Field order as the SDK's renaming leaves it.
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["model", "stream", "messages", "max_tokens"]);
}

/// A deterministic stand-in for the `adapter_mistral` fuzz target: every case body, mutated
/// (cut, bytes replaced by syntax characters or invalid UTF-8, a stretch repeated) and served
/// in pieces of varying size, ends with exactly one terminal event, last, without a panic.
#[tokio::test]
async fn mutated_bodies_always_end_with_one_terminal_event() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/providers-extra/cases/mistral-conversations");
    let mut bodies: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let case: Value = serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
            case["response"]["body"].as_str().unwrap().as_bytes().to_vec()
        })
        .collect();
    bodies.sort();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound.max(1) as u64) as usize
    };
    const NOISE: &[u8] = b"\"{}[]:,\n\r0 \xff\xc3\x00";
    for round in 0..12 {
        for body in &bodies {
            let mut bytes = body.clone();
            match round % 4 {
                0 => bytes.truncate(next(bytes.len())),
                1 => {
                    for _ in 0..3 {
                        let at = next(bytes.len());
                        bytes[at] = NOISE[next(NOISE.len())];
                    }
                }
                2 => {
                    let from = next(bytes.len());
                    let to = (from + next(200)).min(bytes.len());
                    let stretch = bytes[from..to].to_vec();
                    bytes.splice(to..to, stretch);
                }
                _ => {}
            }
            let size = 1 + next(64);
            let mut steps = vec![Step::Bytes(sse_head())];
            steps.extend(bytes.chunks(size).map(|piece| Step::Bytes(piece.to_vec())));
            let server = Server::start(steps).await;
            let events = collect(&model(&server.url), options(), |_| {}).await;
            let message = last_message(&events);
            assert!(
                matches!(
                    message.stop_reason,
                    StopReason::Stop | StopReason::Length | StopReason::ToolUse | StopReason::Error
                ),
                "{:?}",
                message.stop_reason
            );
        }
    }
}
