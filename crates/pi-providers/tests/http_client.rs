//! The HTTP client requests are sent with: a user's client with a forward proxy (which counts
//! what it forwards), which of the request's, provider's and registry's clients wins, the
//! opt-in to the proxy variables (given as values here; `env_proxy.rs` sets the real ones),
//! a user's client that follows redirects, and connection reuse in the shared pool.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use loopback::{sse_head, with_length, ForwardProxy, Server, Step};
use pi_providers::api::openai::completions::OpenAICompletions;
use pi_providers::reqwest;
use pi_providers::transport::client::{self, EnvProxy};
use pi_providers::{Auth, Models, Provider};
use pi_types::{
    AssistantMessage, AssistantMessageEvent, Context, Message, Model, StopReason, StreamOptions, UserMessage,
};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const GUARD: Duration = Duration::from_secs(20);
const SECRET: &str = "sk-client-suite-secret";
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

fn body() -> Vec<u8> {
    fixture()["response"]["body"].as_str().unwrap().as_bytes().to_vec()
}

fn healthy() -> Vec<Step> {
    vec![Step::Bytes(sse_head()), Step::Bytes(body())]
}

/// The fixture's provider (`openai`) with a fixed key and the completions adapter.
fn provider(url: &str) -> Provider {
    Provider::new("openai")
        .with_auth(Auth::ApiKey(SECRET.into()))
        .with_model(model(url))
        .with_api("openai-completions", Arc::new(OpenAICompletions))
}

fn registry(url: &str) -> Models {
    let models = Models::new();
    models.set_provider(provider(url));
    models
}

fn context() -> Context {
    Context { messages: vec![Message::from(UserMessage::text("Hi"))], ..Default::default() }
}

fn options() -> StreamOptions {
    StreamOptions { max_retries: Some(0), timeout_ms: Some(5_000), idle_timeout_ms: Some(5_000), ..Default::default() }
}

/// The events and final message of one request through the registry.
async fn stream(models: &Models, url: &str, options: StreamOptions) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let collect = async {
        let mut stream = models.stream(&model(url), context(), options);
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(event);
        }
        let message = stream.final_message().map(|m| (**m).clone()).expect("final message");
        (events, message)
    };
    tokio::time::timeout(GUARD, collect).await.expect("no hang")
}

/// The text streamed, checked to be one whole answer: `start`, text events, `done` last.
fn streamed_text(events: &[AssistantMessageEvent]) -> String {
    assert!(matches!(events.first(), Some(AssistantMessageEvent::Start { .. })), "{events:?}");
    assert!(matches!(events.last(), Some(AssistantMessageEvent::Done { .. })), "{events:?}");
    assert_eq!(events.iter().filter(|e| e.final_message().is_some()).count(), 1);
    events
        .iter()
        .filter_map(|event| match event {
            AssistantMessageEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

fn through(proxy: &ForwardProxy) -> reqwest::Client {
    client::builder().proxy(reqwest::Proxy::http(&proxy.url).unwrap()).build().unwrap()
}

/// A client whose every request carries `x-client: <name>`.
fn named(name: &'static str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-client", reqwest::header::HeaderValue::from_static(name));
    client::builder().default_headers(headers).build().unwrap()
}

#[tokio::test]
async fn registry_client_sends_through_the_users_proxy() {
    let server = Server::start(healthy()).await;
    let proxy = ForwardProxy::start().await;
    let models = registry(&server.url).with_http_client(through(&proxy));
    for round in 1..=2 {
        let (events, message) = stream(&models, &server.url, options()).await;
        assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
        assert_eq!(streamed_text(&events), TEXT);
        assert_eq!(message.text(), TEXT);
        assert_eq!(proxy.forwarded.load(Ordering::SeqCst), round);
        assert_eq!(server.requests.load(Ordering::SeqCst), round);
    }
    let expected = format!("POST {}/v1/chat/completions HTTP/1.1", server.url);
    assert_eq!(*proxy.lines.lock().unwrap(), [expected.clone(), expected]);
    // The key reached the server through the proxy.
    assert!(server.heads.lock().unwrap().iter().all(|head| head.contains(SECRET)));
}

#[tokio::test]
async fn the_requests_client_wins_over_the_providers_over_the_registrys() {
    let server = Server::start(healthy()).await;
    let last_client = || {
        let heads = server.heads.lock().unwrap();
        let head = heads.last().cloned().unwrap_or_default();
        head.lines().find_map(|line| line.strip_prefix("x-client: ").map(str::to_owned))
    };
    let models = registry(&server.url);
    stream(&models, &server.url, options()).await;
    assert_eq!(last_client(), None, "the shared default");
    let models = models.with_http_client(named("registry"));
    stream(&models, &server.url, options()).await;
    assert_eq!(last_client().as_deref(), Some("registry"));
    models.set_provider(provider(&server.url).with_http_client(named("provider")));
    stream(&models, &server.url, options()).await;
    assert_eq!(last_client().as_deref(), Some("provider"));
    let own = StreamOptions { http_client: Some(client::handle(named("request"))), ..options() };
    let (_, message) = stream(&models, &server.url, own).await;
    assert_eq!(last_client().as_deref(), Some("request"));
    assert_eq!(message.text(), TEXT);
}

#[tokio::test]
async fn proxy_variables_are_used_only_when_opted_in() {
    let server = Server::start(healthy()).await;
    let proxy = ForwardProxy::start().await;
    let proxy_url = proxy.url.clone();
    let env = move |pairs: &[(&'static str, String)]| {
        let pairs = pairs.to_vec();
        EnvProxy::from_vars(move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone()))
    };
    let run = |client: reqwest::Client| {
        let models = registry(&server.url).with_http_client(client);
        let url = server.url.clone();
        async move {
            let (_, message) = stream(&models, &url, options()).await;
            assert_eq!(message.text(), TEXT, "{:?}", message.error_message);
        }
    };
    let forwarded = || proxy.forwarded.load(Ordering::SeqCst);

    // Opted in: HTTP_PROXY (and ALL_PROXY, the fallback) take the request through the proxy.
    for variable in ["HTTP_PROXY", "http_proxy", "ALL_PROXY"] {
        let before = forwarded();
        run(env(&[(variable, proxy_url.clone())]).apply(client::builder()).unwrap().build().unwrap()).await;
        assert_eq!(forwarded(), before + 1, "{variable}");
    }
    // HTTPS_PROXY is for https URLs only; NO_PROXY sends its hosts direct.
    for vars in [
        vec![("HTTPS_PROXY", proxy_url.clone())],
        vec![("HTTP_PROXY", proxy_url.clone()), ("NO_PROXY", "example.com, 127.0.0.1".to_owned())],
        vec![("HTTP_PROXY", proxy_url.clone()), ("no_proxy", "127.0.0.0/8".to_owned())],
        vec![("HTTP_PROXY", proxy_url.clone()), ("REQUEST_METHOD", "POST".to_owned())],
    ] {
        let before = forwarded();
        run(env(&vars).apply(client::builder()).unwrap().build().unwrap()).await;
        assert_eq!(forwarded(), before, "{vars:?}");
    }
    // A value that is no URL is an error naming the variable, not repeating the value.
    let error = env(&[("HTTP_PROXY", "http://user:pw@[bad".to_owned())]).apply(client::builder()).unwrap_err();
    assert!(error.to_string().starts_with("HTTP_PROXY is not a usable proxy URL"), "{error}");
    assert!(!error.to_string().contains("pw"), "{error}");
    assert_eq!(server.requests.load(Ordering::SeqCst), 7);
}

#[tokio::test]
async fn a_client_that_follows_redirects_ends_the_request() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let other = Server::start(healthy()).await;
    let location = format!("location: {}/moved\r\n", other.url);
    let server = Server::start(vec![Step::Bytes(with_length(307, "text/plain", &location, b""))]).await;
    // reqwest's default policy follows up to ten redirects.
    let follows = reqwest::Client::builder().no_proxy().build().unwrap();
    let models = registry(&server.url).with_http_client(follows);
    let (_, message) = stream(&models, &server.url, options()).await;
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(
        message.error_message.as_deref(),
        Some(
            format!(
                "The HTTP client followed a redirect to {}/moved; build it with redirect(Policy::none()) so that \
                 credentials are only sent to the configured base URL",
                other.url
            )
            .as_str()
        )
    );
    // The answer of the redirect's target was not read as the provider's.
    assert_eq!(message.text(), "");
}

/// A keep-alive server: every request on any connection gets the healthy answer with a
/// `content-length`, once `hold_until` requests are in (so that many must be in flight at once).
struct KeepAlive {
    url: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

impl KeepAlive {
    async fn start(hold_until: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Self {
            url: format!("http://{}", listener.local_addr().unwrap()),
            connections: Arc::default(),
            requests: Arc::default(),
        };
        let (connections, requests) = (Arc::clone(&server.connections), Arc::clone(&server.requests));
        let all_in = Arc::new(tokio::sync::Notify::new());
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                connections.fetch_add(1, Ordering::SeqCst);
                let (requests, all_in) = (Arc::clone(&requests), Arc::clone(&all_in));
                tokio::spawn(async move {
                    while loopback::read_request(&mut socket).await.is_some() {
                        let arrived = requests.fetch_add(1, Ordering::SeqCst) + 1;
                        if arrived < hold_until {
                            let wait = all_in.notified();
                            if requests.load(Ordering::SeqCst) < hold_until {
                                wait.await;
                            }
                        } else {
                            all_in.notify_waiters();
                        }
                        let body = body();
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        );
                        if socket.write_all(head.as_bytes()).await.is_err() || socket.write_all(&body).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        server
    }
}

#[tokio::test]
async fn the_shared_pool_reuses_connections_across_requests_and_registries() {
    let server = KeepAlive::start(0).await;
    // Two registries (two agents' worth) without a client of their own: the shared default.
    let (first, second) = (registry(&server.url), registry(&server.url));
    for models in [&first, &first, &first, &second, &second] {
        let (_, message) = stream(models, &server.url, options()).await;
        assert_eq!(message.text(), TEXT, "{:?}", message.error_message);
    }
    assert_eq!(server.requests.load(Ordering::SeqCst), 5);
    assert_eq!(server.connections.load(Ordering::SeqCst), 1, "one connection, reused");
}

#[tokio::test]
async fn the_pool_has_no_per_host_cap_below_the_concurrent_requests() {
    const CONCURRENT: usize = 48;
    // No answer until all requests are in: a cap below CONCURRENT would leave this hanging.
    let server = KeepAlive::start(CONCURRENT).await;
    let models = Arc::new(registry(&server.url));
    let runs: Vec<_> = (0..CONCURRENT)
        .map(|_| {
            let (models, url) = (Arc::clone(&models), server.url.clone());
            tokio::spawn(async move { stream(&models, &url, options()).await.1 })
        })
        .collect();
    for run in runs {
        assert_eq!(run.await.unwrap().text(), TEXT);
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), CONCURRENT);
    // And they stay pooled for the next requests.
    stream(&models, &server.url, options()).await;
    assert_eq!(server.connections.load(Ordering::SeqCst), CONCURRENT);
}
