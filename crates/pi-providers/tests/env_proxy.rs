//! The proxy opt-in with real environment variables. The process environment is global, so
//! this binary holds one test: with `HTTP_PROXY` set, the default client and a client from
//! `client::builder()` still go direct, `client::with_env_proxy()` goes through the proxy,
//! and `NO_PROXY` sends its hosts direct again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use loopback::{sse_head, ForwardProxy, Server, Step};
use pi_providers::api::openai::completions::OpenAICompletions;
use pi_providers::transport::client;
use pi_providers::{Auth, Models, Provider};
use pi_types::{Context, Message, Model, StreamOptions, UserMessage};
use serde_json::Value;

const TEXT: &str = "Server-sent events let a server push a stream of text events over one HTTP response.";

fn fixture() -> Value {
    serde_json::from_str(include_str!("../../../tests/fixtures/providers/cases/openai-completions/text_basic.json"))
        .unwrap()
}

fn model(url: &str) -> Model {
    let mut json = fixture()["model"].clone();
    json["baseUrl"] = Value::String(json["baseUrl"].as_str().unwrap().replace("{{BASE_URL}}", url));
    serde_json::from_value(json).unwrap()
}

/// One request through a registry with `client` (`None`: the shared default); its text.
async fn complete(url: &str, client: Option<pi_providers::reqwest::Client>) -> String {
    let models = Models::new();
    models.set_provider(
        Provider::new("openai")
            .with_auth(Auth::ApiKey("sk-env-proxy".into()))
            .with_model(model(url))
            .with_api("openai-completions", Arc::new(OpenAICompletions)),
    );
    if let Some(client) = client {
        models.set_http_client(Some(client));
    }
    let context = Context { messages: vec![Message::from(UserMessage::text("Hi"))], ..Default::default() };
    let options = StreamOptions { max_retries: Some(0), timeout_ms: Some(5_000), ..Default::default() };
    let model = model(url);
    let reply = tokio::time::timeout(Duration::from_secs(20), models.complete(&model, context, options));
    let message = reply.await.expect("no hang").expect("a message");
    assert_eq!(message.error_message, None);
    message.text()
}

#[tokio::test]
async fn proxy_variables_of_the_process_are_opt_in() {
    let body = fixture()["response"]["body"].as_str().unwrap().as_bytes().to_vec();
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body)]).await;
    let proxy = ForwardProxy::start().await;
    for name in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"] {
        std::env::remove_var(name);
    }
    std::env::set_var("HTTP_PROXY", &proxy.url);
    let forwarded = || proxy.forwarded.load(Ordering::SeqCst);

    // Off by default: the shared client (built now, with the variable set) and pi's builder.
    assert_eq!(complete(&server.url, None).await, TEXT);
    assert_eq!(complete(&server.url, Some(client::builder().build().unwrap())).await, TEXT);
    assert_eq!(forwarded(), 0);

    // Opted in.
    assert_eq!(complete(&server.url, Some(client::with_env_proxy().unwrap())).await, TEXT);
    assert_eq!(forwarded(), 1);

    // NO_PROXY names the server's host: direct again.
    std::env::set_var("NO_PROXY", "localhost,127.0.0.1");
    assert_eq!(complete(&server.url, Some(client::with_env_proxy().unwrap())).await, TEXT);
    assert_eq!(forwarded(), 1);
    assert_eq!(server.requests.load(Ordering::SeqCst), 4);
}
