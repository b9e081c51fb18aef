//! What a hostile client or a careless upstream could do to the server: make it echo its own
//! credentials, hold its stream slots with slow bodies, flood it with big bodies or idle
//! connections, or run up its bill. Small limits keep each case to a few seconds.

use std::sync::Arc;
use std::time::Duration;

use pi_providers::faux::{faux_assistant_message, faux_text, FauxResponse};
use pi_providers::{Auth, Provider};
use pi_proxy::ProxyStreamFn;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream, Model, StopReason, StreamFn, StreamOptions,
    TranscriptContext,
};

use crate::loopback::{with_length, Server, Step};
use crate::support::{config_with, faux, faux_provider, post, TestServer, TOKEN};

const ECHO_KEY_VAR: &str = "PI_PROXY_TEST_ECHO_KEY";
const ECHO_KEY: &str = "sk-echo-server-key-0123456789\"abc/+=";

/// An upstream's 401 that quotes the request it got: the key as is, JSON-escaped (inside a
/// JSON body), URL-encoded, and a runtime `Bearer` token the server never saw.
fn echoing_body() -> Vec<u8> {
    let url_key: String = url_encode(ECHO_KEY);
    let request = serde_json::json!({
        "headers": {"authorization": [format!("Bearer {ECHO_KEY}")], "x-oauth": "Bearer ya29.runtime-token-xyz"},
        "url": format!("http://upstream/v1/chat?key={url_key}")
    });
    let body = format!("Unauthorized: key {ECHO_KEY} refused. Your request: {request}");
    with_length(401, "text/plain", "", body.as_bytes())
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn an_upstream_error_echoing_the_servers_key_reaches_the_client_redacted() {
    std::env::set_var(ECHO_KEY_VAR, ECHO_KEY);
    let upstream = Server::start(vec![Step::Bytes(echoing_body())]).await;
    let model = Model {
        base_url: upstream.url.clone(),
        ..Model::new("echo-1").with_api("openai-completions").with_provider("echo")
    };
    let provider = Provider::new("echo")
        .with_auth(Auth::Env(vec![ECHO_KEY_VAR.into()]))
        .with_model(model.clone())
        .with_http_apis();
    let mut config = config_with(vec![provider]);
    config.redaction.env.push(ECHO_KEY_VAR.into());
    let server = TestServer::start(config).await;
    let message = ProxyStreamFn::new(&server.url, TOKEN)
        .stream(&model, TranscriptContext::default(), StreamOptions::default())
        .result()
        .await
        .expect("final message");
    assert_eq!(message.stop_reason, StopReason::Error);
    let text = message.error_message.as_deref().unwrap_or_default();
    // The upstream did get the key (so it was there to leak).
    assert!(upstream.heads.lock().expect("heads")[0].contains("sk-echo-server-key"));
    assert!(text.starts_with("401 "), "{text}");
    for leak in ["0123456789", "runtime-token", "sk-echo"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    assert!(text.matches("<redacted>").count() >= 4, "{text}");
}

/// An upstream (user code) that ends with a 10 MiB error text holding the key near its end and
/// a text delta quoting it.
#[derive(Clone)]
struct Careless;

impl StreamFn for Careless {
    fn stream(&self, model: &Model, _: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        let key = options.api_key.clone().unwrap_or_default();
        let partial = Arc::new(AssistantMessage { provider: model.provider.clone(), ..Default::default() });
        let mut failed = (*partial).clone();
        failed.stop_reason = StopReason::Error;
        failed.error_message = Some(format!("{}{key}", "x".repeat(10 << 20)).into());
        AssistantMessageEventStream::from_events([
            AssistantMessageEvent::Start { partial: Arc::clone(&partial) },
            AssistantMessageEvent::TextStart { content_index: 0, partial: Arc::clone(&partial) },
            AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: format!("your key is {key}").into(),
                partial: Arc::clone(&partial),
            },
            AssistantMessageEvent::Error { reason: StopReason::Error, error: Arc::new(failed) },
        ])
    }
}

#[tokio::test]
async fn a_provider_quoting_its_key_in_content_or_a_huge_error_is_redacted_and_bounded() {
    let model = Model {
        base_url: "http://careless.invalid".into(),
        ..Model::new("c-1").with_api("careless").with_provider("careless")
    };
    let key = "sk-careless-key-0123456789";
    let provider = Provider::new("careless")
        .with_auth(Auth::ApiKey(key.into()))
        .with_model(model.clone())
        .with_api("careless", Arc::new(Careless));
    let mut config = config_with(vec![provider]);
    config.redaction.add(key);
    let server = TestServer::start(config).await;
    let message = ProxyStreamFn::new(&server.url, TOKEN)
        .stream(&model, TranscriptContext::default(), StreamOptions::default())
        .result()
        .await
        .expect("final message");
    let text = message.error_message.as_deref().unwrap_or_default();
    assert!(text.len() < 5000, "{} bytes", text.len());
    assert!(text.contains("[truncated"), "{}", &text[text.len() - 100..]);
    let content = serde_json::to_string(&message.content).expect("json");
    assert!(content.contains("your key is <redacted>"), "{content}");
    assert!(!content.contains("0123456789") && !text.contains("0123456789"));
}

/// A raw connection that sends a request head and `sent` bytes of a `declared`-byte body, then
/// nothing more.
async fn slow_body(url: &str, declared: usize, sent: usize) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let address = url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address).await.expect("connect");
    let head = format!(
        "POST /api/stream HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {declared}\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await.expect("head");
    socket.write_all(&vec![b' '; sent]).await.expect("body");
    socket
}

/// The status line of what the server answered on `socket` (waits up to 10 s).
async fn status_line(socket: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut answer = vec![0u8; 256];
    let read = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut answer)).await;
    let n = read.ok().and_then(Result::ok).unwrap_or(0);
    String::from_utf8_lossy(&answer[..n]).lines().next().unwrap_or_default().to_owned()
}

/// A server configuration whose one faux model answers "hello" once, and that model.
fn answering_hello() -> (Model, pi_proxy::server::ServerConfig) {
    let faux = faux();
    faux.set_responses(vec![FauxResponse::Message(faux_assistant_message(vec![faux_text("hello")], StopReason::Stop))]);
    (faux.model(), config_with(vec![faux_provider(&faux)]))
}

#[tokio::test]
async fn slow_bodies_hold_no_stream_slot() {
    let (model, mut config) = answering_hello();
    config.limits.max_streams_per_token = 2;
    config.limits.body_read_timeout = Duration::from_millis(1500);
    let server = TestServer::start(config).await;
    let mut stalled = Vec::new();
    for _ in 0..4 {
        stalled.push(slow_body(&server.url, 1000, 10).await);
    }
    // Let the server take the heads (and, before, the slots) of all four.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let message = ProxyStreamFn::new(&server.url, TOKEN)
        .stream(&model, TranscriptContext::default(), StreamOptions::default())
        .result()
        .await
        .expect("final message");
    assert_eq!((message.stop_reason, message.error_message.as_deref()), (StopReason::Stop, None));
    // The slow bodies end with 408 at their own, shorter deadline.
    for socket in &mut stalled {
        assert_eq!(status_line(socket).await, "HTTP/1.1 408 Request Timeout");
    }
}

fn user_body(model: &Model, text: &str) -> String {
    serde_json::json!({
        "model": model,
        "context": {"messages": [{"role": "user", "content": text, "timestamp": 1}]},
        "options": {}
    })
    .to_string()
}

#[tokio::test]
async fn bodies_wait_for_room_in_the_byte_budget() {
    let (model, mut config) = answering_hello();
    config.limits.max_body_bytes = 256 * 1024;
    config.limits.max_body_bytes_in_flight = 256 * 1024;
    config.limits.body_read_timeout = Duration::from_secs(5);
    let server = TestServer::start(config).await;
    // 200 KB of a body that never completes: what is left does not fit the next body.
    let stalled = slow_body(&server.url, 250_000, 200_000).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let body = user_body(&model, &"x".repeat(100_000));
    let url = server.url.clone();
    let mut waiting = tokio::spawn(async move { post(&url, Some(TOKEN), body).await });
    let early = tokio::time::timeout(Duration::from_millis(500), &mut waiting).await;
    assert!(early.is_err(), "answered while the budget was full: {early:?}");
    // The stalled client leaves: its room is given back and the waiting body goes through.
    drop(stalled);
    let (status, _, text) =
        tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("answer").expect("task");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""type":"done""#), "{text}");
}

/// An upstream that sends a delta every 20 ms until `stop` is set (at most 30 s).
#[derive(Clone, Default)]
struct Ticker {
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl StreamFn for Ticker {
    fn stream(&self, model: &Model, _: TranscriptContext, _: StreamOptions) -> AssistantMessageEventStream {
        let partial = AssistantMessage { provider: model.provider.clone(), ..Default::default() };
        let stop = Arc::clone(&self.stop);
        AssistantMessageEventStream::from_producer(move |tx| async move {
            let mut out = pi_types::AssistantMessageBuilder::new(tx, partial);
            out.start().await;
            out.start_text().await;
            for _ in 0..1500 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = out.text_delta(0, "tick ").await;
            }
            let _ = out.end_text(0).await;
            out.done(StopReason::Stop).await;
        })
    }
}

/// On a one-thread runtime, an unrelated stream keeps flowing while a large body is parsed.
#[tokio::test(flavor = "current_thread")]
async fn large_bodies_are_checked_off_the_async_workers() {
    let model = Model {
        base_url: "http://ticker.invalid".into(),
        ..Model::new("t-1").with_api("ticker").with_provider("ticker")
    };
    let ticker = Ticker::default();
    let provider = Provider::new("ticker").with_model(model.clone()).with_api("ticker", Arc::new(ticker.clone()));
    let mut config = config_with(vec![provider]);
    config.limits.max_body_bytes = 16 << 20;
    let server = TestServer::start(config).await;
    // About 12 MiB of small messages for a model the server does not serve: parsed whole, then
    // refused (400).
    let unknown = Model { id: "not-served".into(), ..model.clone() };
    let message = serde_json::json!({"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1});
    let messages = vec![message; 200_000];
    let big = serde_json::json!({"model": unknown, "context": {"messages": messages}, "options": {}}).to_string();

    let mut stream =
        ProxyStreamFn::new(&server.url, TOKEN).stream(&model, TranscriptContext::default(), StreamOptions::default());
    use futures::StreamExt;
    let mut stamps = vec![];
    // Wait for the stream to flow, then send the big body meanwhile.
    for _ in 0..3 {
        stream.next().await.expect("event");
        stamps.push(std::time::Instant::now());
    }
    let url = server.url.clone();
    let stop = Arc::clone(&ticker.stop);
    let refused = tokio::spawn(async move {
        let answer = post(&url, Some(TOKEN), big).await;
        // A few more ticks after the answer, then the stream ends.
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        answer
    });
    while let Some(event) = stream.next().await {
        stamps.push(std::time::Instant::now());
        if event.is_terminal() {
            assert_eq!(event.final_message().map(|m| m.stop_reason), Some(StopReason::Stop));
        }
    }
    let (status, _, text) = refused.await.expect("task");
    assert_eq!(status, 400, "{text}");
    let gap = stamps.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default();
    // The parse takes seconds in a debug build; the ticks are 20 ms apart.
    assert!(gap < Duration::from_millis(1000), "largest gap {gap:?}");
}

/// An upstream that records the `maxTokens` it was asked for and reports 1000 tokens used.
#[derive(Clone, Default)]
struct Metered {
    asked: Arc<std::sync::Mutex<Vec<Option<u64>>>>,
}

impl StreamFn for Metered {
    fn stream(&self, model: &Model, _: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        self.asked.lock().expect("lock").push(options.max_tokens);
        let mut message = AssistantMessage { provider: model.provider.clone(), ..Default::default() };
        message.usage.input = 400;
        message.usage.output = 600;
        message.usage.total_tokens = 1000;
        message.stop_reason = StopReason::Stop;
        let message = Arc::new(message);
        AssistantMessageEventStream::from_events([
            AssistantMessageEvent::Start { partial: Arc::clone(&message) },
            AssistantMessageEvent::Done { reason: StopReason::Stop, message },
        ])
    }
}

fn metered() -> (Metered, Model, Provider) {
    let metered = Metered::default();
    let model = Model {
        base_url: "http://metered.invalid".into(),
        max_tokens: 16_384,
        ..Model::new("m-1").with_api("metered").with_provider("metered")
    };
    let provider = Provider::new("metered").with_model(model.clone()).with_api("metered", Arc::new(metered.clone()));
    (metered, model, provider)
}

fn error_of(body: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    value["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn no_cost_multipliers_by_default_and_max_tokens_within_the_models_limit() {
    let (metered, model, provider) = metered();
    let server = TestServer::start(config_with(vec![provider])).await;
    let with = |options: serde_json::Value| {
        serde_json::json!({"model": &model, "context": {"messages": []}, "options": options}).to_string()
    };
    let (status, _, body) =
        post(&server.url, Some(TOKEN), with(serde_json::json!({"samplingParams": {"n": 128}}))).await;
    assert_eq!((status, error_of(&body).as_str()), (400, "Sampling parameter not allowed: `options.samplingParams.n`"));
    let (status, _, body) =
        post(&server.url, Some(TOKEN), with(serde_json::json!({"maxTokens": 1_000_000_000_000_000u64}))).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = post(&server.url, Some(TOKEN), with(serde_json::json!({"maxTokens": 100}))).await;
    assert_eq!(status, 200);
    assert_eq!(*metered.asked.lock().expect("lock"), vec![Some(16_384), Some(100)]);
}

#[tokio::test]
async fn per_token_budgets_are_enforced_before_the_upstream_is_called() {
    let (metered, model, provider) = metered();
    let mut config = config_with(vec![provider.clone()]);
    config.limits.tokens_per_day = Some(1500);
    let server = TestServer::start(config).await;
    let body = crate::support::body_for(&model).to_string();
    // 1000 of 1500 used; the second request may ask for the 500 left; then the budget is spent.
    assert_eq!(post(&server.url, Some(TOKEN), body.clone()).await.0, 200);
    assert_eq!(post(&server.url, Some(TOKEN), body.clone()).await.0, 200);
    let (status, headers, text) = post(&server.url, Some(TOKEN), body.clone()).await;
    assert_eq!((status, error_of(&text).as_str()), (429, "Daily token budget of this token is spent"));
    assert!(headers.get("retry-after").is_some());
    assert_eq!(*metered.asked.lock().expect("lock"), vec![Some(1500), Some(500)]);
    // Budgets are per token.
    assert_eq!(post(&server.url, Some(crate::support::OTHER_TOKEN), body.clone()).await.0, 200);

    let (metered, model, provider) = self::metered();
    let mut config = config_with(vec![provider]);
    config.limits.requests_per_minute = Some(2);
    let server = TestServer::start(config).await;
    let body = crate::support::body_for(&model).to_string();
    assert_eq!(post(&server.url, Some(TOKEN), body.clone()).await.0, 200);
    assert_eq!(post(&server.url, Some(TOKEN), body.clone()).await.0, 200);
    let (status, headers, text) = post(&server.url, Some(TOKEN), body).await;
    assert_eq!((status, error_of(&text).as_str()), (429, "Too many requests per minute for this token"));
    let retry: u64 = headers.get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(0);
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(metered.asked.lock().expect("lock").len(), 2);
}

/// Whether the server closed `socket` (EOF or reset) within `wait`.
async fn closed_within(socket: &mut tokio::net::TcpStream, wait: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 64];
    matches!(tokio::time::timeout(wait, socket.read(&mut byte)).await, Ok(Ok(0) | Err(_)))
}

#[tokio::test]
async fn an_idle_flood_does_not_lock_the_listener() {
    let (model, mut config) = answering_hello();
    config.limits.max_connections = 64;
    config.limits.max_idle_connections = 32;
    config.limits.max_idle_connections_per_peer = 32;
    config.limits.idle_timeout_under_pressure = Duration::from_millis(300);
    let server = TestServer::start(config).await;
    let address = server.url.trim_start_matches("http://").to_owned();
    // 64 connections that never send a byte: as many as the server takes in all.
    let mut flood = Vec::new();
    for _ in 0..64 {
        flood.push(tokio::net::TcpStream::connect(&address).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let message = ProxyStreamFn::new(&server.url, TOKEN)
        .stream(&model, TranscriptContext::default(), StreamOptions::default())
        .result()
        .await
        .expect("final message");
    assert_eq!((message.stop_reason, message.error_message.as_deref()), (StopReason::Stop, None));
    // Half were closed on accept (over the idle limit), then the others once idle 300 ms while
    // more than half of the idle limit was taken: at most 16 are left (until the 30 s timeout).
    let mut open = 0;
    for socket in &mut flood {
        open += usize::from(!closed_within(socket, Duration::from_millis(200)).await);
    }
    assert!(open <= 16, "{open} flood connections still open");
}

#[tokio::test]
async fn shutdown_closes_connections_without_a_whole_request_head_at_once() {
    use tokio::io::AsyncWriteExt;
    let faux = faux();
    let mut server = TestServer::start(config_with(vec![faux_provider(&faux)])).await;
    let address = server.url.trim_start_matches("http://").to_owned();
    let mut half_sent = tokio::net::TcpStream::connect(&address).await.expect("connect");
    half_sent.write_all(b"POST /api/stream HTTP/1.1\r\nhost: x\r\ncontent-type: app").await.expect("write");
    let mut silent = tokio::net::TcpStream::connect(&address).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The header read timeout and the grace period are 30 s each: nothing here waits for them.
    let done = server.shutdown();
    let stopped = tokio::time::timeout(Duration::from_secs(5), done).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
    assert!(closed_within(&mut half_sent, Duration::from_secs(1)).await);
    assert!(closed_within(&mut silent, Duration::from_secs(1)).await);
}
