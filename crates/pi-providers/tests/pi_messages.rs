//! The `pi-messages` adapter beyond the replay cases: cancellation mid-stream and keys.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::time::Duration;

use futures::StreamExt;
use loopback::{sse_head, with_length, Server, Step};
use pi_providers::api::pi_messages::PiMessages;
use pi_types::transcript::normalize_context;
use pi_types::{
    AssistantMessageEvent, CancellationToken, Context, Message, Model, StopReason, StreamFn, StreamOptions, UserMessage,
};

const SECRET: &str = "sk-pi-messages-secret-0123";

fn model(url: &str) -> Model {
    Model { base_url: format!("{url}/v1"), ..Model::new("balanced").with_api("pi-messages").with_provider("radius") }
}

fn context() -> pi_types::TranscriptContext {
    normalize_context(Context {
        system_prompt: None,
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    })
}

fn frames(events: &[&str]) -> Vec<u8> {
    events.iter().map(|e| format!("data: {e}\n\n")).collect::<String>().into_bytes()
}

#[tokio::test]
async fn cancelling_mid_stream_ends_aborted_with_the_content_so_far() {
    let body = frames(&[
        r#"{"type":"start"}"#,
        r#"{"type":"text_start","contentIndex":0}"#,
        r#"{"type":"text_delta","contentIndex":0,"delta":"Partial "}"#,
        r#"{"type":"text_delta","contentIndex":0,"delta":"answer"}"#,
    ]);
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body), Step::Hold]).await;
    let cancel = CancellationToken::new();
    let options = StreamOptions { api_key: Some(SECRET.into()), cancel: Some(cancel.clone()), ..Default::default() };
    let mut stream = PiMessages.stream(&model(&server.url), context(), options);
    let mut events = Vec::new();
    let run = async {
        while let Some(event) = stream.next().await {
            if matches!(&event, AssistantMessageEvent::TextDelta { delta, .. } if delta.as_str() == "answer") {
                cancel.cancel();
            }
            events.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), run).await.expect("no hang");
    let terminals: Vec<_> = events.iter().filter(|e| e.final_message().is_some()).collect();
    assert_eq!(terminals.len(), 1);
    let last = events.last().unwrap();
    assert!(matches!(last, AssistantMessageEvent::Error { reason: StopReason::Aborted, .. }), "{last:?}");
    let message = last.final_message().unwrap();
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.error_message.as_deref(), Some("This operation was aborted"));
    assert_eq!(message.text(), "Partial answer", "content so far kept");
    assert!(server.released(1).await, "connection let go");
}

#[tokio::test]
async fn the_key_goes_only_into_the_authorization_header() {
    let body = br#"{"error":{"message":"bad key","code":"invalid_api_key"}}"#;
    let server = Server::start(vec![Step::Bytes(with_length(401, "application/json", "", body))]).await;
    let options = StreamOptions { api_key: Some(SECRET.into()), ..Default::default() };
    assert!(!format!("{options:?}").contains(SECRET));
    let message = PiMessages.stream(&model(&server.url), context(), options).result().await.unwrap();
    assert_eq!(message.error_message.as_deref(), Some("401 Unauthorized: bad key (invalid_api_key)"));
    assert!(!serde_json::to_string(&message).unwrap().contains(SECRET), "no key in the message or its diagnostic");
    let heads = server.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1);
    let head = heads[0].to_ascii_lowercase();
    assert!(head.starts_with("post /v1/messages "), "{head}");
    assert!(head.contains(&format!("authorization: bearer {}", SECRET.to_ascii_lowercase())));
    assert!(head.contains("accept: text/event-stream"));
}

#[tokio::test]
async fn no_key_fails_before_any_request() {
    let server = Server::start(vec![Step::Hold]).await;
    let message = PiMessages.stream(&model(&server.url), context(), StreamOptions::default()).result().await.unwrap();
    assert_eq!(message.error_message.as_deref(), Some("No API key provided for provider \"radius\""));
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(server.heads.lock().unwrap().len(), 0);
}

#[tokio::test]
async fn a_key_echoed_by_the_backend_is_redacted() {
    let body = format!(r#"{{"error":{{"message":"key {SECRET} is revoked","code":"revoked"}}}}"#);
    let server = Server::start(vec![Step::Bytes(with_length(403, "application/json", "", body.as_bytes()))]).await;
    let options = StreamOptions { api_key: Some(SECRET.into()), ..Default::default() };
    let message = PiMessages.stream(&model(&server.url), context(), options).result().await.unwrap();
    assert_eq!(message.error_message.as_deref(), Some("403 Forbidden: key <redacted> is revoked (revoked)"));
    assert!(!serde_json::to_string(&message).unwrap().contains(SECRET));

    let stream = frames(&[
        r#"{"type":"start"}"#,
        &format!(r#"{{"type":"error","reason":"error","errorMessage":"upstream refused {SECRET}","usage":{{}}}}"#),
    ]);
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(stream)]).await;
    let options = StreamOptions { api_key: Some(SECRET.into()), ..Default::default() };
    let message = PiMessages.stream(&model(&server.url), context(), options).result().await.unwrap();
    assert_eq!(message.error_message.as_deref(), Some("upstream refused <redacted>"));
}
