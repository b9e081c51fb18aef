//! The retry policy honours a failed response's `retry-after` / `retry-after-ms`, capped by
//! its maximum delay: a loopback OpenAI-compatible server answers 500 with a delay request,
//! then a streamed answer, through an [`Agent`] on the registry.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use pi_agent::{Agent, AgentOptions, RetryEvent, RetryPolicy};
use pi_providers::api::openai::completions as openai_completions;
use pi_providers::{Auth, Models, Provider};
use pi_types::{AgentMessage, Model};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const ANSWER: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
    data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Done.\"},\"finish_reason\":null}]}\n\n\
    data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
    data: [DONE]\n\n";

/// A server answering 500 with `header` first, then the answer; the base URL.
async fn serve(header: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let failure = format!(
            "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n{header}\r\n\
             content-length: 28\r\nconnection: close\r\n\r\n{{\"error\":{{\"message\":\"boom\"}}}}"
        );
        for reply in [failure.as_str(), ANSWER] {
            let (mut stream, _) = listener.accept().await.unwrap();
            read_request(&mut stream).await;
            stream.write_all(reply.as_bytes()).await.unwrap();
            stream.shutdown().await.unwrap();
        }
    });
    base_url
}

/// Read one request: its head and the `content-length` bytes of its body.
async fn read_request(stream: &mut tokio::net::TcpStream) {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let read = stream.read(&mut buffer).await.unwrap();
        seen.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&seen).to_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map_or(0, |value| value.trim().parse::<usize>().unwrap());
            if seen.len() >= end + 4 + length {
                return;
            }
        }
        if read == 0 {
            return;
        }
    }
}

/// Run one prompt against a server asking for a delay with `header`; the delay the policy
/// scheduled, and the answer.
async fn retried_delay(header: String, max_delay: Duration) -> (Duration, String) {
    let base_url = serve(header).await;
    let model =
        Model::new("qwen3").with_provider("my-server").with_api(openai_completions::API).with_base_url(base_url);
    let models = Models::new();
    models.set_provider(
        Provider::new("my-server").with_auth(Auth::ApiKey("none".into())).with_model(model.clone()).with_http_apis(),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    // An hour between attempts unless the server's request is honoured.
    let policy = RetryPolicy::new(pi_providers::is_retryable_error)
        .base_delay(Duration::from_secs(3600))
        .max_delay(max_delay)
        .on_retry(move |event| record.lock().unwrap().push(event.clone()));
    let agent = Agent::new(AgentOptions::new(Arc::new(models)).with_model(model).with_retry(policy));
    let run = tokio::time::timeout(Duration::from_secs(20), agent.prompt("Go"));
    let events = Arc::clone(&seen);
    run.await.unwrap_or_else(|_| panic!("no retry within 20 s: {:?}", events.lock().unwrap())).unwrap();
    let delay = seen.lock().unwrap().iter().find_map(|event| match event {
        RetryEvent::Scheduled { delay, .. } => Some(*delay),
        _ => None,
    });
    let Some(AgentMessage::Assistant(answer)) = agent.messages().last().cloned() else { panic!("no answer") };
    (delay.unwrap(), answer.error_message.as_deref().map_or_else(|| answer.text(), str::to_owned))
}

#[tokio::test]
async fn retry_after_seconds_is_the_delay() {
    let (delay, answer) = retried_delay("retry-after: 1".into(), Duration::from_secs(60)).await;
    assert_eq!((delay, answer.as_str()), (Duration::from_secs(1), "Done."));
}

#[tokio::test]
async fn retry_after_ms_comes_first() {
    let (delay, answer) = retried_delay("retry-after-ms: 150\r\nretry-after: 30".into(), Duration::from_secs(60)).await;
    assert_eq!((delay, answer.as_str()), (Duration::from_millis(150), "Done."));
}

#[tokio::test]
async fn retry_after_as_an_http_date() {
    let when = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
    let (delay, answer) = retried_delay(format!("retry-after: {when}"), Duration::from_secs(60)).await;
    // Whole seconds in the header, and the time the request took: between 0 and 2 s.
    assert!(delay <= Duration::from_secs(2), "{delay:?}");
    assert_eq!(answer, "Done.");
}

#[tokio::test]
async fn the_policy_caps_the_server_delay() {
    let (delay, answer) = retried_delay("retry-after: 600".into(), Duration::from_millis(300)).await;
    assert_eq!((delay, answer.as_str()), (Duration::from_millis(300), "Done."));
}
