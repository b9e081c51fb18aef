//! One test per refusal, and cancellation of the upstream request when the client leaves.

use std::time::Duration;

use futures::StreamExt;
use pi_providers::{Auth, Provider};
use pi_proxy::ProxyStreamFn;
use pi_types::{Model, StopReason, StreamFn, StreamOptions, TranscriptContext};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{body_for, config_with, faux, faux_provider, post, Stall, TestServer, OTHER_TOKEN, TOKEN};

async fn faux_server() -> (TestServer, Model) {
    let faux = faux();
    let model = faux.model();
    (TestServer::start(config_with(vec![faux_provider(&faux)])).await, model)
}

fn error_of(body: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    value["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn no_token() {
    let (server, model) = faux_server().await;
    let (status, headers, body) = post(&server.url, None, body_for(&model).to_string()).await;
    assert_eq!((status, error_of(&body).as_str()), (401, "Missing bearer token"));
    // Refused before the body was read: the connection is not offered for reuse.
    assert_eq!(headers.get("connection").and_then(|v| v.to_str().ok()), Some("close"));
}

#[tokio::test]
async fn wrong_content_type_path_or_method() {
    let (server, model) = faux_server().await;
    let client = pi_providers::http_client().expect("http client");
    let response = client
        .post(format!("{}/api/stream", server.url))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "text/plain")
        .body(body_for(&model).to_string())
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status().as_u16(), 415);
    assert_eq!(error_of(&response.text().await.unwrap_or_default()), "Content-Type must be application/json");
    let response = client.get(format!("{}/api/stream", server.url)).send().await.expect("answer");
    assert_eq!(response.status().as_u16(), 405);
    assert_eq!(response.headers().get("allow").and_then(|v| v.to_str().ok()), Some("POST"));
    assert_eq!(error_of(&response.text().await.unwrap_or_default()), "Method not allowed");
    let response = client.post(format!("{}/api/other", server.url)).send().await.expect("answer");
    assert_eq!(response.status().as_u16(), 404);
    assert!(error_of(&response.text().await.unwrap_or_default()).starts_with("Not found: "));
}

#[tokio::test]
async fn refusals_quote_at_most_1000_characters_of_the_input() {
    let (server, model) = faux_server().await;
    let unknown = Model { id: "m".repeat(100_000).into(), ..model };
    let (status, _, body) = post(&server.url, Some(TOKEN), body_for(&unknown).to_string()).await;
    assert_eq!(status, 400);
    let error = error_of(&body);
    assert!(error.starts_with("Model not served: faux/mmm") && error.ends_with("m... [truncated]"), "{}", error.len());
    assert_eq!(error.chars().count(), 1000 + "... [truncated]".len());
}

#[tokio::test]
async fn wrong_token_through_the_client() {
    let (server, model) = faux_server().await;
    let (status, _, body) = post(&server.url, Some("not-a-token-at-all"), body_for(&model).to_string()).await;
    assert_eq!((status, error_of(&body).as_str()), (401, "Invalid token"));
    let client = ProxyStreamFn::new(&server.url, "not-a-token-at-all");
    let message = client.stream(&model, TranscriptContext::default(), StreamOptions::default()).result().await;
    let message = message.expect("final message");
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.error_message.as_deref(), Some("Proxy error: Invalid token"));
}

#[tokio::test]
async fn oversized_body() {
    let faux = faux();
    let mut config = config_with(vec![faux_provider(&faux)]);
    config.limits.max_body_bytes = 1024;
    let server = TestServer::start(config).await;
    let mut body = body_for(&faux.model());
    body["context"]["messages"][0]["content"] = json!("x".repeat(4096));
    let (status, _, text) = post(&server.url, Some(TOKEN), body.to_string()).await;
    assert_eq!((status, error_of(&text).as_str()), (413, "Request body too large"));
    // Without a content length (chunked), the limit holds while reading.
    let chunks = futures::stream::iter(vec![Ok::<_, std::io::Error>(body.to_string().into_bytes())]);
    let (status, _, text) = post(&server.url, Some(TOKEN), reqwest::Body::wrap_stream(chunks)).await;
    assert_eq!((status, error_of(&text).as_str()), (413, "Request body too large"));
}

#[tokio::test]
async fn malformed_json() {
    let (server, _) = faux_server().await;
    let (status, _, body) = post(&server.url, Some(TOKEN), "{\"model\": ").await;
    assert_eq!(status, 400);
    assert!(error_of(&body).starts_with("Malformed JSON body: "), "{body}");
}

#[tokio::test]
async fn wrong_field_type_names_the_field() {
    let (server, model) = faux_server().await;
    let mut body = body_for(&model);
    body["model"]["contextWindow"] = json!("big");
    let (status, _, text) = post(&server.url, Some(TOKEN), body.to_string()).await;
    assert_eq!(status, 400);
    assert!(error_of(&text).starts_with("Invalid field `model.contextWindow`: invalid type: string"), "{text}");
    let mut body = body_for(&model);
    body["options"]["maxTokens"] = json!(-1);
    let (status, _, text) = post(&server.url, Some(TOKEN), body.to_string()).await;
    assert_eq!(status, 400);
    assert!(error_of(&text).starts_with("Invalid field `options.maxTokens`"), "{text}");
    let (status, _, text) = post(&server.url, Some(TOKEN), json!({"context": {"messages": []}}).to_string()).await;
    assert_eq!(status, 400);
    assert!(error_of(&text).starts_with("Invalid request body: missing field `model`"), "{text}");
}

#[tokio::test]
async fn unknown_model() {
    let (server, model) = faux_server().await;
    let unknown = Model { id: "faux-9000".into(), ..model };
    let (status, _, body) = post(&server.url, Some(TOKEN), body_for(&unknown).to_string()).await;
    assert_eq!((status, error_of(&body).as_str()), (400, "Model not served: faux/faux-9000"));
}

#[tokio::test]
async fn base_url_api_or_header_differing_from_the_servers() {
    let (server, model) = faux_server().await;
    let elsewhere = Model { base_url: "https://attacker.example".into(), ..model.clone() };
    let (status, _, body) = post(&server.url, Some(TOKEN), body_for(&elsewhere).to_string()).await;
    assert_eq!((status, error_of(&body).as_str()), (400, "Field `model.baseUrl` does not match the server's model"));
    let other_api = Model { api: "openai-completions".into(), ..model.clone() };
    let (status, _, body) = post(&server.url, Some(TOKEN), body_for(&other_api).to_string()).await;
    assert_eq!(
        (status, error_of(&body).as_str()),
        (400, "Field `model.api` does not match the server's model: openai-completions")
    );
    let headers = [("x-tenant".to_owned(), "evil".to_owned())].into_iter().collect();
    let with_header = Model { headers: Some(headers), ..model };
    let (status, _, body) = post(&server.url, Some(TOKEN), body_for(&with_header).to_string()).await;
    assert_eq!(
        (status, error_of(&body).as_str()),
        (400, "Field `model.headers.x-tenant` does not match the server's model")
    );
}

#[tokio::test]
async fn forbidden_client_headers_even_when_allow_listed() {
    let faux = faux();
    let mut config = config_with(vec![faux_provider(&faux)]);
    config.allowed_headers = vec!["x-api-key".into(), "x-trace".into()];
    let server = TestServer::start(config).await;
    let client = ProxyStreamFn::new(&server.url, TOKEN);
    for name in ["Authorization", "x-api-key", "X-Goog-Api-Key", "cookie", "x-unlisted"] {
        let mut options = StreamOptions::default();
        options.headers.insert(name.to_owned(), Some("value".into()));
        let message = client.stream(&faux.model(), TranscriptContext::default(), options).result().await;
        let message = message.expect("final message");
        let expected = format!("Proxy error: Header not allowed: `options.headers.{name}`");
        assert_eq!(message.error_message.as_deref(), Some(expected.as_str()));
    }
    let mut body = body_for(&faux.model());
    body["options"]["samplingParams"] = json!({"model": "gpt-expensive"});
    let (status, _, text) = post(&server.url, Some(TOKEN), body.to_string()).await;
    assert_eq!(
        (status, error_of(&text).as_str()),
        (400, "Sampling parameter not allowed: `options.samplingParams.model`")
    );
}

#[tokio::test]
async fn too_many_streams_in_total_and_per_token() {
    let stall = Stall::default();
    let mut config = config_with(vec![stall.provider()]);
    config.limits.max_streams = 2;
    config.limits.max_streams_per_token = 1;
    let server = TestServer::start(config).await;
    let client = ProxyStreamFn::new(&server.url, TOKEN);
    let mut first = client.stream(&Stall::model(), TranscriptContext::default(), StreamOptions::default());
    assert_eq!(first.next().await.map(|e| e.type_name()), Some("start"));
    let body = body_for(&Stall::model()).to_string();
    let (status, headers, text) = post(&server.url, Some(TOKEN), body.clone()).await;
    assert_eq!((status, error_of(&text).as_str()), (503, "Too many concurrent streams for this token"));
    assert_eq!(headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    let other = ProxyStreamFn::new(&server.url, OTHER_TOKEN);
    let mut second = other.stream(&Stall::model(), TranscriptContext::default(), StreamOptions::default());
    assert_eq!(second.next().await.map(|e| e.type_name()), Some("start"));
    let (status, headers, text) = post(&server.url, Some(OTHER_TOKEN), body.clone()).await;
    assert_eq!((status, error_of(&text).as_str()), (503, "Too many concurrent streams"));
    assert!(headers.contains_key("retry-after"));
    // A finished stream frees its slot.
    drop(first);
    let freed = async {
        loop {
            let client = ProxyStreamFn::new(&server.url, TOKEN);
            let mut stream = client.stream(&Stall::model(), TranscriptContext::default(), StreamOptions::default());
            if stream.next().await.map(|e| e.type_name()) == Some("start") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), freed).await.expect("slot freed");
}

/// A loopback OpenAI-compatible upstream: answers one request with one SSE chunk, then waits
/// for the connection to close. Sends the request head and the moment it saw the close.
async fn upstream_once() -> (String, tokio::sync::oneshot::Receiver<String>, tokio::sync::oneshot::Receiver<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (head_tx, head_rx) = tokio::sync::oneshot::channel();
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let mut received = Vec::new();
        let mut buffer = [0u8; 4096];
        while !received.windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
        let _ = head_tx.send(String::from_utf8_lossy(&received).into_owned());
        let chunk = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let framed = format!("{head}{:x}\r\n{chunk}\r\n", chunk.len());
        if socket.write_all(framed.as_bytes()).await.is_err() {
            return;
        }
        loop {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = closed_tx.send(());
    });
    (url, head_rx, closed_rx)
}

#[tokio::test]
async fn client_disconnect_cancels_the_upstream_request() {
    let (upstream_url, head, closed) = upstream_once().await;
    let model =
        Model { base_url: upstream_url, ..Model::new("up-1").with_api("openai-completions").with_provider("up") };
    let provider = Provider::new("up").with_auth(Auth::ApiKey("sk-server-key".into())).with_model(model.clone());
    let server = TestServer::start(config_with(vec![provider.with_http_apis()])).await;
    let client = ProxyStreamFn::new(&server.url, TOKEN);
    let mut stream = client.stream(&model, TranscriptContext::default(), StreamOptions::default());
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        seen.push(event.type_name());
        if event.type_name() == "text_delta" {
            break;
        }
    }
    assert_eq!(seen, ["start", "text_start", "text_delta"]);
    let head = head.await.expect("upstream request");
    assert!(
        head.contains("authorization: Bearer sk-server-key") || head.contains("Authorization: Bearer sk-server-key")
    );
    assert!(!head.contains(TOKEN), "the client's token went upstream");
    // The client goes away mid-stream; the upstream sees its connection closed.
    drop(stream);
    tokio::time::timeout(Duration::from_secs(20), closed).await.expect("upstream saw the close").expect("closed");
}

#[tokio::test]
async fn upstream_timeout_and_graceful_shutdown_end_streams_with_an_error() {
    let stall = Stall::default();
    let mut config = config_with(vec![stall.provider()]);
    config.limits.upstream_timeout = Duration::from_millis(200);
    let server = TestServer::start(config).await;
    let client = ProxyStreamFn::new(&server.url, TOKEN);
    let message = client.stream(&Stall::model(), TranscriptContext::default(), StreamOptions::default()).result().await;
    let message = message.expect("final message");
    assert_eq!(message.error_message.as_deref(), Some("Upstream timed out after 200 ms"));
    assert_eq!(stall.cancelled(), [true]);

    let stall = Stall::default();
    let mut config = config_with(vec![stall.provider()]);
    config.limits.shutdown_grace = Duration::from_millis(100);
    let mut server = TestServer::start(config).await;
    let client = ProxyStreamFn::new(&server.url, TOKEN);
    let mut stream = client.stream(&Stall::model(), TranscriptContext::default(), StreamOptions::default());
    assert_eq!(stream.next().await.map(|e| e.type_name()), Some("start"));
    let done = server.shutdown();
    let last = stream.next().await.expect("terminal event");
    let message = last.final_message().expect("final message");
    assert_eq!(message.error_message.as_deref(), Some("Proxy server is shutting down"));
    tokio::time::timeout(Duration::from_secs(10), done).await.expect("server stopped").expect("join").expect("serve");
    assert_eq!(stall.cancelled(), [true]);
}

#[tokio::test]
async fn healthz() {
    let (server, _) = faux_server().await;
    let client = pi_providers::http_client().expect("http client");
    let response = client.get(format!("{}/healthz", server.url)).send().await.expect("healthz");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.text().await.unwrap_or_default(), r#"{"status":"ok"}"#);
}
