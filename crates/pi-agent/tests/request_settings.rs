//! An agent's own HTTP client, headers, time limits and key source reach its requests: a
//! loopback OpenAI-compatible server records what it was sent.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi_agent::{Agent, AgentOptions, KeySource};
use pi_providers::api::openai::completions as openai_completions;
use pi_providers::reqwest::header::{HeaderMap, HeaderValue};
use pi_providers::transport::client;
use pi_providers::{Auth, Models, Provider};
use pi_types::{AgentMessage, Model};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const ANSWER: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
    data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi.\"},\"finish_reason\":\"stop\"}]}\n\n\
    data: [DONE]\n\n";

/// A server answering each request (or, with `stall`, never answering); the base URL and the
/// request heads it saw (lower-case).
async fn serve(stall: bool) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut bytes = Vec::new();
            let mut buffer = [0u8; 8192];
            while !String::from_utf8_lossy(&bytes).contains("\r\n\r\n") {
                let read = stream.read(&mut buffer).await.unwrap();
                if read == 0 {
                    break;
                }
                bytes.extend_from_slice(&buffer[..read]);
            }
            let text = String::from_utf8_lossy(&bytes).to_lowercase();
            seen.lock().unwrap().push(text.split("\r\n\r\n").next().unwrap_or_default().to_owned());
            if stall {
                // Hold the connection open without an answer.
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    drop(stream);
                });
            } else {
                stream.write_all(ANSWER.as_bytes()).await.unwrap();
                stream.shutdown().await.unwrap();
            }
        }
    });
    (base_url, heads)
}

/// Options for an agent on the server at `base_url`, registered with the key "registry-key".
fn options(base_url: String) -> AgentOptions {
    let model =
        Model::new("qwen3").with_provider("my-server").with_api(openai_completions::API).with_base_url(base_url);
    let models = Models::new();
    models.set_provider(
        Provider::new("my-server")
            .with_auth(Auth::ApiKey("registry-key".into()))
            .with_model(model.clone())
            .with_http_apis(),
    );
    AgentOptions::new(Arc::new(models)).with_model(model)
}

fn last_answer(agent: &Agent) -> String {
    let Some(AgentMessage::Assistant(answer)) = agent.messages().last().cloned() else { panic!("no answer") };
    answer.error_message.as_deref().map_or_else(|| answer.text(), str::to_owned)
}

#[tokio::test]
async fn the_agents_client_headers_and_key_reach_the_server() {
    let (base_url, heads) = serve(false).await;
    let mut defaults = HeaderMap::new();
    defaults.insert("x-client", HeaderValue::from_static("the-agents-own"));
    let http = client::builder().default_headers(defaults).build().unwrap();
    // SAFETY-free on edition 2021; no other test of this binary reads the variable.
    std::env::set_var("PI_AGENT_REQUEST_TEST_KEY", "key-from-env");
    let agent = Agent::new(
        options(base_url)
            .with_http_client(client::handle(http))
            .with_request_header("x-team", Some("search".into()))
            .with_key_source(KeySource::Env("PI_AGENT_REQUEST_TEST_KEY".into())),
    );
    agent.prompt("Hello").await.unwrap();
    assert_eq!(last_answer(&agent), "Hi.");
    let head = heads.lock().unwrap().concat();
    assert!(head.contains("\r\nx-client: the-agents-own"), "{head}");
    assert!(head.contains("\r\nx-team: search"), "{head}");
    assert!(head.contains("\r\nauthorization: bearer key-from-env"), "{head}");
    assert!(!head.contains("registry-key"), "{head}");

    // The agent's options give the settings back.
    let back = agent.options();
    assert!(back.request.http_client.is_some());
    assert_eq!(back.request.key, Some(KeySource::Env("PI_AGENT_REQUEST_TEST_KEY".into())));
}

#[tokio::test]
async fn a_fixed_key_replaces_the_registrys() {
    let (base_url, heads) = serve(false).await;
    let agent = Agent::new(options(base_url).with_key_source(KeySource::Key("the-agents-key".into())));
    agent.prompt("Hello").await.unwrap();
    assert_eq!(last_answer(&agent), "Hi.");
    let head = heads.lock().unwrap().concat();
    assert!(head.contains("\r\nauthorization: bearer the-agents-key"), "{head}");
}

#[tokio::test]
async fn the_agents_time_limit_ends_a_silent_request() {
    let (base_url, _) = serve(true).await;
    let agent = Agent::new(options(base_url).with_timeouts(Some(200), None));
    let run = tokio::time::timeout(Duration::from_secs(10), agent.prompt("Hello"));
    run.await.expect("the 200 ms limit, not the 300 s default").unwrap();
    assert_eq!(last_answer(&agent), "Request timed out.");
}
