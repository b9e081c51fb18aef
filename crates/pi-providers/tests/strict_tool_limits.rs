//! The per-session memory of Claude's strict tool limits: a loopback Anthropic endpoint that
//! rejects any request carrying a strict tool the way Claude does past its limits. The first
//! request of a session pays one rejection and is resent without strict; later requests of the
//! same session go without strict at once; another session, a request without a session, and
//! a session after `cleanup_session_resources` start strict again.

#![cfg(feature = "http")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::{Arc, Mutex};

use pi_providers::api::anthropic::AnthropicMessages;
use pi_providers::cleanup_session_resources;
use pi_types::{
    transcript::normalize_context, ConstrainedSampling, Context, Message, Model, StopReason, StreamFn, StreamOptions,
    Strictness, Tool, TranscriptContext, UserMessage,
};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const REJECTION: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Too many strict tools (21). The maximum number of strict tools supported is 20."}}"#;
const REPLY: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// Whether each request the endpoint received carried a strict tool.
type Log = Arc<Mutex<Vec<bool>>>;

async fn claude_endpoint() -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log: Log = Arc::default();
    let sink = Arc::clone(&log);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let sink = Arc::clone(&sink);
            tokio::spawn(async move {
                let Some((_, body)) = loopback::read_request_with_body(&mut socket).await else { return };
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let strict = body["tools"].as_array().unwrap().iter().any(|t| t["strict"] == json!(true));
                sink.lock().unwrap().push(strict);
                let answer = if strict {
                    format!(
                        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{REJECTION}",
                        REJECTION.len()
                    )
                } else {
                    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{REPLY}")
                };
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, log)
}

fn model(url: &str) -> Model {
    serde_json::from_value(json!({
        "id": "claude-x", "name": "claude-x", "api": "anthropic-messages", "provider": "anthropic",
        "baseUrl": url, "reasoning": false, "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 200000, "maxTokens": 8000, "compat": {"supportsStrictTools": true},
    }))
    .unwrap()
}

/// "Hi", with one tool that prefers strict sampling.
fn context() -> TranscriptContext {
    let tool = Tool {
        name: "weather".into(),
        description: "Weather.".into(),
        parameters: Arc::new(
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        ),
        constrained_sampling: Some(ConstrainedSampling::JsonSchema { strict: Strictness::Prefer }),
    };
    normalize_context(Context {
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: Some(vec![tool]),
        ..Default::default()
    })
}

/// One call; the strictness of each request it sent and whether it carried the diagnostic.
async fn call(url: &str, log: &Log, session: Option<&str>) -> (Vec<bool>, bool) {
    log.lock().unwrap().clear();
    let options = StreamOptions {
        api_key: Some("k".into()),
        max_retries: Some(0),
        session_id: session.map(str::to_owned),
        ..Default::default()
    };
    let message = AnthropicMessages.stream(&model(url), context(), options).result().await.unwrap();
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    let fallback = message.diagnostics.iter().flatten().any(|d| d.kind == "anthropic_strict_tools_fallback");
    (log.lock().unwrap().clone(), fallback)
}

#[tokio::test]
async fn a_session_remembers_its_strict_tool_rejection_until_it_is_cleaned_up() {
    let (url, log) = claude_endpoint().await;
    assert_eq!(call(&url, &log, Some("strict-memory-a")).await, (vec![true, false], true));
    assert_eq!(call(&url, &log, Some("strict-memory-a")).await, (vec![false], false));
    assert_eq!(call(&url, &log, Some("strict-memory-b")).await, (vec![true, false], true));
    assert_eq!(call(&url, &log, None).await, (vec![true, false], true));
    assert_eq!(call(&url, &log, None).await, (vec![true, false], true));
    cleanup_session_resources(Some("strict-memory-a")).unwrap();
    assert_eq!(call(&url, &log, Some("strict-memory-a")).await, (vec![true, false], true));
    assert_eq!(call(&url, &log, Some("strict-memory-b")).await, (vec![false], false));
    cleanup_session_resources(None).unwrap();
    assert_eq!(call(&url, &log, Some("strict-memory-b")).await, (vec![true, false], true));
}

/// A resend goes out as the driver sends any request: `on_response` sees every attempt, and
/// the resend has a retry budget of its own.
#[tokio::test]
async fn the_resend_is_sent_with_its_own_retries_and_every_attempt_reaches_on_response() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        // The strict rejection, an overloaded answer to the resend, then the reply.
        let answers = [
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{REJECTION}",
                REJECTION.len()
            ),
            "HTTP/1.1 529 Overloaded\r\nretry-after-ms: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
            format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{REPLY}"),
        ];
        for answer in answers {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let _ = loopback::read_request_with_body(&mut socket).await;
            let _ = socket.write_all(answer.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    let statuses: Arc<Mutex<Vec<u16>>> = Arc::default();
    let seen = Arc::clone(&statuses);
    let options = StreamOptions {
        api_key: Some("k".into()),
        max_retries: Some(1),
        on_response: Some(Arc::new(move |response: &pi_types::ProviderResponse, _: &Model| {
            seen.lock().unwrap().push(response.status);
            Box::pin(async {})
        })),
        ..Default::default()
    };
    let message = AnthropicMessages.stream(&model(&url), context(), options).result().await.unwrap();
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(*statuses.lock().unwrap(), [400, 529, 200]);
}
