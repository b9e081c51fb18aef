//! The Bedrock adapter on the wire: SigV4 headers as sent, bearer tokens, secrets kept out of
//! errors, cancellation mid-stream.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::Arc;
use std::time::Duration;

use aws_smithy_types::event_stream::HeaderValue;
use futures::StreamExt;
use loopback::{head, with_length, Server, Step};
use pi_providers::api::bedrock::BedrockConverseStream;
use pi_types::transcript::normalize_context;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, CancellationToken, Context, Message, Model, StopReason, StreamFn,
    StreamOptions, UserMessage,
};
use serde_json::{json, Value};

const SECRET_KEY: &str = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY";
const SESSION_TOKEN: &str = "session-token-very-secret";

fn model(url: &str) -> Model {
    serde_json::from_value(json!({
        "id": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "name": "Claude Sonnet 4.5 (US)",
        "api": "bedrock-converse-stream",
        "provider": "amazon-bedrock",
        "baseUrl": url,
        "reasoning": true,
        "input": ["text"],
        "cost": {"input": 3.3, "output": 16.5, "cacheRead": 0.33, "cacheWrite": 4.125},
        "contextWindow": 200000,
        "maxTokens": 64000
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

fn env(pairs: &[(&str, &str)]) -> Option<Arc<indexmap::IndexMap<String, String>>> {
    Some(Arc::new(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()))
}

/// Access keys with a session token, region eu-west-1, no api key (so SigV4 signs).
fn sigv4_options() -> StreamOptions {
    StreamOptions {
        api_key: None,
        max_retries: Some(0),
        timeout_ms: Some(2000),
        idle_timeout_ms: Some(2000),
        env: env(&[
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
            ("AWS_SESSION_TOKEN", SESSION_TOKEN),
            ("AWS_REGION", "eu-west-1"),
        ]),
        ..Default::default()
    }
}

/// One AWS event-stream message (string headers, JSON payload).
fn frame(kind: &str, payload: Value) -> Vec<u8> {
    let message = aws_smithy_types::event_stream::Message::new(payload.to_string().into_bytes())
        .add_header(aws_smithy_types::event_stream::Header::new(
            ":event-type",
            HeaderValue::String(kind.to_owned().into()),
        ))
        .add_header(aws_smithy_types::event_stream::Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ))
        .add_header(aws_smithy_types::event_stream::Header::new(":message-type", HeaderValue::String("event".into())));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    out
}

fn stream_head() -> Vec<u8> {
    head(200, "application/vnd.amazon.eventstream", "")
}

fn healthy() -> Vec<u8> {
    [
        frame("messageStart", json!({"role": "assistant"})),
        frame("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": "Hello"}})),
        frame("contentBlockStop", json!({"contentBlockIndex": 0})),
        frame("messageStop", json!({"stopReason": "end_turn"})),
        frame("metadata", json!({"usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}})),
    ]
    .concat()
}

async fn collect(
    adapter: &dyn StreamFn,
    model: &Model,
    options: StreamOptions,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let mut stream = adapter.stream(model, context(), options);
    let mut events = Vec::new();
    let run = async {
        while let Some(event) = stream.next().await {
            events.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), run).await.expect("no hang");
    let message = stream.final_message().map(|m| (**m).clone()).expect("final message");
    (events, message)
}

/// The value of header `name` in a lowercased request head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| line.strip_prefix(&format!("{name}:")).map(str::trim))
}

#[tokio::test]
async fn sigv4_signs_the_request_with_the_configured_keys_and_region() {
    let server = Server::start(vec![Step::Bytes(stream_head()), Step::Bytes(healthy())]).await;
    let (_, message) = collect(&BedrockConverseStream, &model(&server.url), sigv4_options()).await;
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(message.text(), "Hello");

    let heads = server.heads.lock().unwrap().clone();
    let head = &heads[0];
    assert!(head.starts_with("post /model/us.anthropic.claude-sonnet-4-5-20250929-v1%3a0/converse-stream "), "{head}");
    let authorization = header(head, "authorization").unwrap();
    let date = header(head, "x-amz-date").unwrap();
    assert_eq!(date.len(), 16, "{date}");
    // The head is lowercased by the test server; the credential scope is all lowercase anyway.
    let prefix = format!("aws4-hmac-sha256 credential=akidexample/{}/eu-west-1/bedrock/aws4_request, ", &date[..8]);
    assert!(authorization.starts_with(&prefix), "{authorization}");
    assert!(
        authorization
            .contains("signedheaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, "),
        "{authorization}"
    );
    let signature = authorization.rsplit("signature=").next().unwrap();
    assert_eq!(signature.len(), 64);
    assert_eq!(header(head, "x-amz-security-token"), Some(SESSION_TOKEN));
    assert_eq!(header(head, "content-type"), Some("application/json"));
    assert!(!head.contains(&SECRET_KEY.to_lowercase()), "secret key on the wire");
}

#[tokio::test]
async fn bearer_token_from_the_environment() {
    let server = Server::start(vec![Step::Bytes(stream_head()), Step::Bytes(healthy())]).await;
    let options = StreamOptions {
        env: env(&[("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-123"), ("AWS_REGION", "us-west-2")]),
        ..sigv4_options()
    };
    let (_, message) = collect(&BedrockConverseStream, &model(&server.url), options).await;
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    let head = server.heads.lock().unwrap()[0].clone();
    assert_eq!(header(&head, "authorization"), Some("bearer bedrock-api-key-123"));
    assert!(header(&head, "x-amz-date").is_none());
}

#[tokio::test]
async fn secrets_stay_out_of_error_texts_and_debug() {
    let body = r#"{"message":"The security token included in the request is invalid."}"#;
    let server = Server::start(vec![Step::Bytes(with_length(
        403,
        "application/json",
        "x-amzn-errortype: UnrecognizedClientException:http://internal.amazon.com/coral/com.amazon.coral.service/\r\n",
        body.as_bytes(),
    ))])
    .await;
    let options = sigv4_options();
    let debug = format!("{options:?}");
    assert!(!debug.contains(SECRET_KEY) && !debug.contains(SESSION_TOKEN), "{debug}");
    let (events, message) = collect(&BedrockConverseStream, &model(&server.url), options).await;
    assert_eq!(message.stop_reason, StopReason::Error);
    let text = message.error_message.clone().unwrap();
    assert_eq!(&*text, "UnrecognizedClientException: The security token included in the request is invalid.");
    let everything = format!("{events:?} {message:?} {}", serde_json::to_string(&message).unwrap());
    assert!(!everything.contains(SECRET_KEY) && !everything.contains(SESSION_TOKEN));
    assert!(!everything.contains("AKIDEXAMPLE"));

    // A bad endpoint fails before anything is sent, without the keys in the text either.
    let (_, message) = collect(&BedrockConverseStream, &model("not a url"), sigv4_options()).await;
    let text = message.error_message.unwrap();
    assert!(!text.contains(SECRET_KEY), "{text}");
}

#[tokio::test]
async fn cancellation_mid_stream_keeps_the_content_so_far() {
    let partial = [
        frame("messageStart", json!({"role": "assistant"})),
        frame("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": "Hel"}})),
    ]
    .concat();
    let server = Server::start(vec![Step::Bytes(stream_head()), Step::Bytes(partial), Step::Hold]).await;
    let cancel = CancellationToken::new();
    let options = StreamOptions { cancel: Some(cancel.clone()), idle_timeout_ms: Some(60_000), ..sigv4_options() };
    let mut stream = BedrockConverseStream.stream(&model(&server.url), context(), options);
    let mut events = Vec::new();
    let run = async {
        while let Some(event) = stream.next().await {
            if event.type_name() == "text_delta" {
                cancel.cancel();
            }
            events.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), run).await.expect("no hang");
    let terminals: Vec<_> = events.iter().filter(|e| e.final_message().is_some()).collect();
    assert_eq!(terminals.len(), 1);
    let last = events.last().unwrap();
    assert_eq!(last.type_name(), "error");
    let message = last.final_message().unwrap();
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.text(), "Hel");
    assert!(server.released(1).await, "connection still held");
}
