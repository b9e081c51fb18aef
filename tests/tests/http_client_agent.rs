//! Agents streaming over real HTTP through a client the user configured: a registry whose
//! client sends through a loopback forward proxy (which counts the requests it forwards),
//! built by hand and through the proxy-variable opt-in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../crates/pi-providers/tests/loopback/mod.rs"]
mod loopback;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use loopback::{sse_head, ForwardProxy, Server, Step};
use pi_agent::{Agent, AgentOptions};
use pi_providers::api::openai::completions::OpenAICompletions;
use pi_providers::transport::client::{self, EnvProxy};
use pi_providers::{reqwest, Auth, Models, Provider};
use pi_types::{Model, StopReason};
use serde_json::Value;

const TEXT: &str = "Server-sent events let a server push a stream of text events over one HTTP response.";

fn fixture() -> Value {
    serde_json::from_str(include_str!("../fixtures/providers/cases/openai-completions/text_basic.json")).unwrap()
}

fn model(url: &str) -> Model {
    let mut json = fixture()["model"].clone();
    json["baseUrl"] = Value::String(json["baseUrl"].as_str().unwrap().replace("{{BASE_URL}}", url));
    serde_json::from_value(json).unwrap()
}

fn registry(url: &str, client: reqwest::Client) -> Arc<Models> {
    let models = Models::new().with_http_client(client);
    models.set_provider(
        Provider::new("openai")
            .with_auth(Auth::ApiKey("sk-agent-proxy".into()))
            .with_model(model(url))
            .with_api("openai-completions", Arc::new(OpenAICompletions)),
    );
    Arc::new(models)
}

/// Two prompts on one agent; its transcript as `role: text` lines.
async fn converse(models: &Arc<Models>, url: &str) -> Vec<String> {
    let agent = Agent::new(AgentOptions::new(Arc::clone(models) as _).with_model(model(url)));
    for prompt in ["Hi", "Again"] {
        tokio::time::timeout(Duration::from_secs(20), agent.prompt(prompt)).await.expect("no hang").unwrap();
    }
    agent
        .messages()
        .iter()
        .map(|message| match (message.as_user(), message.as_assistant()) {
            (Some(user), _) => format!("user: {}", user.content.text()),
            (_, Some(reply)) => {
                assert_eq!(reply.stop_reason, StopReason::Stop, "{:?}", reply.error_message);
                format!("assistant: {}", reply.text())
            }
            _ => message.role().to_owned(),
        })
        .collect()
}

fn expected() -> Vec<String> {
    vec!["user: Hi".to_owned(), format!("assistant: {TEXT}"), "user: Again".to_owned(), format!("assistant: {TEXT}")]
}

#[tokio::test]
async fn agents_stream_through_the_users_proxy() {
    let body = fixture()["response"]["body"].as_str().unwrap().as_bytes().to_vec();
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body)]).await;
    let proxy = ForwardProxy::start().await;

    // A client configured by hand, shared by two agents.
    let by_hand = client::builder().proxy(reqwest::Proxy::http(&proxy.url).unwrap()).build().unwrap();
    let models = registry(&server.url, by_hand);
    assert_eq!(converse(&models, &server.url).await, expected());
    assert_eq!(proxy.forwarded.load(Ordering::SeqCst), 2);
    assert_eq!(converse(&models, &server.url).await, expected());
    assert_eq!(proxy.forwarded.load(Ordering::SeqCst), 4);

    // The opt-in to proxy variables (given as values; the process environment is left alone).
    let proxy_url = proxy.url.clone();
    let opted_in = EnvProxy::from_vars(move |name| (name == "HTTP_PROXY").then(|| proxy_url.clone()))
        .apply(client::builder())
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(converse(&registry(&server.url, opted_in), &server.url).await, expected());
    assert_eq!(proxy.forwarded.load(Ordering::SeqCst), 6);
    assert_eq!(server.requests.load(Ordering::SeqCst), 6);
    let expected_line = format!("POST {}/v1/chat/completions HTTP/1.1", server.url);
    assert!(proxy.lines.lock().unwrap().iter().all(|line| *line == expected_line));
}
