//! Transport behaviour against scripted loopback servers: retries and backoff, the retry-delay
//! cap, the time-to-headers timeout, the idle timeout, cancellation, dropped connections,
//! invalid UTF-8 and malformed events. No assertion depends on timing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use pi_providers::api::anthropic::AnthropicMessages;
use pi_providers::api::google::gemini::GoogleGenerativeAi;
use pi_providers::api::openai::completions::OpenAICompletions;
use pi_providers::api::openai::responses::OpenAIResponses;
use pi_types::transcript::normalize_context;
use pi_types::CancellationToken;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, Context, Message, Model, StopReason, StreamFn, StreamOptions, UserMessage,
};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// How a scripted response ends.
#[derive(Clone, Copy)]
enum End {
    Normal,
    Drop,
    Stall,
}

#[derive(Clone)]
struct Scripted {
    status: u16,
    headers: Vec<(&'static str, String)>,
    chunks: Vec<Vec<u8>>,
    end: End,
    /// Never answer at all (headers never come).
    silent: bool,
}

impl Scripted {
    fn sse(chunks: Vec<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            chunks,
            end: End::Normal,
            silent: false,
        }
    }

    fn status(status: u16, headers: Vec<(&'static str, String)>, body: &str) -> Self {
        let mut headers = headers;
        headers.push(("content-type", "application/json".into()));
        Self { status, headers, chunks: vec![body.as_bytes().to_vec()], end: End::Normal, silent: false }
    }
}

async fn answer(mut socket: TcpStream, script: Scripted) {
    if script.silent {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        return;
    }
    let mut head = format!("HTTP/1.1 {} X\r\ntransfer-encoding: chunked\r\nconnection: close\r\n", script.status);
    for (k, v) in &script.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = socket.write_all(head.as_bytes()).await;
    for chunk in &script.chunks {
        let _ = socket.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await;
        let _ = socket.write_all(chunk).await;
        let _ = socket.write_all(b"\r\n").await;
        let _ = socket.flush().await;
    }
    match script.end {
        End::Normal => {
            let _ = socket.write_all(b"0\r\n\r\n").await;
            let _ = socket.flush().await;
        }
        End::Drop => {}
        End::Stall => tokio::time::sleep(std::time::Duration::from_secs(3600)).await,
    }
}

/// Serve the scripts in order (the last one repeats); returns the base URL and a request counter.
async fn serve(scripts: Vec<Scripted>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&count);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let scripts = scripts.clone();
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                if loopback::read_request(&mut socket).await.is_none() {
                    return;
                }
                let index = counter.fetch_add(1, Ordering::SeqCst);
                let script = scripts.get(index).or(scripts.last()).cloned().unwrap();
                answer(socket, script).await;
            });
        }
    });
    (url, count)
}

fn model(api: &str, base_url: &str) -> Model {
    let mut model = Model::new("test-model").with_api(api).with_provider("test");
    model.base_url = base_url.to_owned();
    model.max_tokens = 1000;
    model.context_window = 100_000;
    model
}

fn context() -> pi_types::TranscriptContext {
    normalize_context(Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    })
}

fn options() -> StreamOptions {
    StreamOptions { api_key: Some("sk-test".into()), max_retries: Some(0), ..Default::default() }
}

fn chat_chunk(delta: &str) -> Vec<u8> {
    format!("data: {{\"id\":\"c1\",\"model\":\"test-model\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{delta:?}}},\"finish_reason\":null}}]}}\n\n").into_bytes()
}

fn chat_finish() -> Vec<u8> {
    b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
        .to_vec()
}

async fn run(
    adapter: &dyn StreamFn,
    model: &Model,
    options: StreamOptions,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let mut stream = adapter.stream(model, context(), options);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let message = stream.final_message().map(|m| (**m).clone()).expect("terminal event");
    (events, message)
}

#[tokio::test]
async fn retries_429_with_retry_after_then_succeeds() {
    let rate_limited = Scripted::status(
        429,
        vec![("retry-after", "0".into())],
        r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
    );
    let ok = Scripted::sse(vec![chat_chunk("Hello"), chat_finish()]);
    let (url, count) = serve(vec![rate_limited, ok]).await;
    let options = StreamOptions { max_retries: Some(2), ..options() };
    let (events, message) = run(&OpenAICompletions, &model("openai-completions", &url), options).await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(message.text(), "Hello");
    assert_eq!(events.iter().filter(|e| e.type_name() == "start").count(), 1);
}

#[tokio::test]
async fn retries_5xx_with_retry_after_ms() {
    let failing = Scripted::status(503, vec![("retry-after-ms", "1".into())], r#"{"error":{"message":"busy"}}"#);
    let ok = Scripted::sse(vec![chat_chunk("Back"), chat_finish()]);
    let (url, count) = serve(vec![failing.clone(), failing, ok]).await;
    let options = StreamOptions { max_retries: Some(3), ..options() };
    let (_, message) = run(&OpenAICompletions, &model("openai-completions", &url), options).await;
    assert_eq!(count.load(Ordering::SeqCst), 3);
    assert_eq!(message.text(), "Back");
}

/// The `on_response` hook sees every attempt: each failed one with its status and headers
/// (Gemini's without headers, as its SDK's errors carry none), before the retry, and the answer
/// that streams. pi-ai 1.6.1 reports failed attempts too.
#[tokio::test]
async fn on_response_sees_every_attempt() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let hook: pi_types::OnResponse = Arc::new(move |response: &pi_types::ProviderResponse, _: &Model| {
        let line = format!("{} {:?}", response.status, response.headers.get("retry-after-ms"));
        record.lock().unwrap().push(line);
        Box::pin(async {})
    });
    let failing = Scripted::status(503, vec![("retry-after-ms", "1".into())], r#"{"error":{"message":"busy"}}"#);
    let ok = Scripted::sse(vec![chat_chunk("Back"), chat_finish()]);
    let (url, _) = serve(vec![failing.clone(), ok]).await;
    let retrying = StreamOptions { max_retries: Some(1), on_response: Some(hook.clone()), ..options() };
    let (_, message) = run(&OpenAICompletions, &model("openai-completions", &url), retrying).await;
    assert_eq!(message.text(), "Back");
    assert_eq!(*seen.lock().unwrap(), ["503 Some(\"1\")", "200 None"]);

    // Without retries left the failed attempt still reaches the hook; Gemini's carries no headers.
    seen.lock().unwrap().clear();
    let (url, _) = serve(vec![failing]).await;
    let single = StreamOptions { on_response: Some(hook), ..options() };
    let (_, message) = run(&GoogleGenerativeAi::default(), &model("google-generative-ai", &url), single).await;
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(*seen.lock().unwrap(), ["503 None"]);
}

#[tokio::test]
async fn x_should_retry_false_is_not_retried() {
    let failing = Scripted::status(500, vec![("x-should-retry", "false".into())], r#"{"error":{"message":"nope"}}"#);
    let (url, count) = serve(vec![failing]).await;
    let options = StreamOptions { max_retries: Some(3), ..options() };
    let (_, message) = run(&OpenAICompletions, &model("openai-completions", &url), options).await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.error_message.as_deref(), Some(r#"500: {"message":"nope"}"#));
}

#[tokio::test]
async fn server_delay_above_the_cap_fails_without_retrying() {
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#;
    let limited = Scripted::status(429, vec![("retry-after", "120".into())], body);
    let (url, count) = serve(vec![limited]).await;
    let options = StreamOptions { max_retries: Some(2), ..options() };
    let (events, message) = run(&AnthropicMessages, &model("anthropic-messages", &url), options).await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(events.len(), 1, "no start event for a failed request");
    assert_eq!(
        message.error_message.as_deref(),
        Some(format!("Server requested 120s retry delay (max: 60s). 429 {body}").as_str())
    );
    assert!(pi_providers::is_retryable_error(&message));
}

#[tokio::test]
async fn custom_retry_delay_cap() {
    let limited = Scripted::status(429, vec![("retry-after", "3".into())], r#"{"error":{"message":"wait"}}"#);
    let (url, _) = serve(vec![limited]).await;
    let options = StreamOptions { max_retries: Some(1), max_retry_delay_ms: Some(1000), ..options() };
    let (_, message) = run(&OpenAIResponses, &model("openai-responses", &url), options).await;
    assert_eq!(message.error_message.as_deref(), Some("Server requested 3s retry delay (max: 1s). 429 wait"));
}

#[tokio::test]
async fn stalled_stream_ends_at_the_idle_timeout() {
    let stalled = Scripted { end: End::Stall, ..Scripted::sse(vec![chat_chunk("Partial")]) };
    let (url, _) = serve(vec![stalled]).await;
    let options = StreamOptions { idle_timeout_ms: Some(150), ..options() };
    let (events, message) = run(&OpenAICompletions, &model("openai-completions", &url), options).await;
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(message.error_message.as_deref().unwrap_or("").contains("idle timeout"), "{:?}", message.error_message);
    assert_eq!(message.text(), "Partial", "partial content stays");
    assert!(events.iter().any(|e| e.type_name() == "text_delta"));
    assert!(pi_providers::is_retryable_error(&message));
}

#[tokio::test]
async fn no_headers_within_timeout_ms() {
    let silent = Scripted { silent: true, ..Scripted::sse(vec![]) };
    let (url, _) = serve(vec![silent]).await;
    let options = StreamOptions { timeout_ms: Some(150), ..options() };
    let (events, message) = run(&OpenAICompletions, &model("openai-completions", &url), options).await;
    assert_eq!(events.len(), 1);
    assert_eq!(message.error_message.as_deref(), Some("Request timed out."));
}

#[tokio::test]
async fn cancellation_mid_stream_ends_with_aborted() {
    let anthropic = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"test-model\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
    );
    let responses = concat!(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg\"}}\n\n",
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hel\"}\n\n",
    );
    let google = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}],\"role\":\"model\"}}]}\r\n\r\n";
    let adapters: Vec<(&str, Box<dyn StreamFn>, Vec<u8>)> = vec![
        ("openai-completions", Box::new(OpenAICompletions), chat_chunk("Hel")),
        ("anthropic-messages", Box::new(AnthropicMessages), anthropic.as_bytes().to_vec()),
        ("openai-responses", Box::new(OpenAIResponses), responses.as_bytes().to_vec()),
        ("google-generative-ai", Box::new(GoogleGenerativeAi::default()), google.as_bytes().to_vec()),
    ];
    for (api, adapter, chunk) in adapters {
        let stalled = Scripted { end: End::Stall, ..Scripted::sse(vec![chunk]) };
        let (url, _) = serve(vec![stalled]).await;
        let cancel = CancellationToken::new();
        let options = StreamOptions { cancel: Some(cancel.clone()), ..options() };
        let mut stream = adapter.stream(&model(api, &url), context(), options);
        let mut last = None;
        while let Some(event) = stream.next().await {
            if event.type_name() == "text_delta" {
                cancel.cancel();
            }
            last = Some(event);
        }
        let last = last.unwrap();
        assert_eq!(last.type_name(), "error", "{api}");
        let message = last.final_message().unwrap();
        assert_eq!(message.stop_reason, StopReason::Aborted, "{api}");
        assert_eq!(message.text(), "Hel", "{api}");
    }
}

#[tokio::test]
async fn cancellation_of_every_adapter_before_headers() {
    let adapters: Vec<(&str, Box<dyn StreamFn>)> = vec![
        ("openai-completions", Box::new(OpenAICompletions)),
        ("anthropic-messages", Box::new(AnthropicMessages)),
        ("openai-responses", Box::new(OpenAIResponses)),
        ("google-generative-ai", Box::new(GoogleGenerativeAi::default())),
    ];
    for (api, adapter) in adapters {
        let silent = Scripted { silent: true, ..Scripted::sse(vec![]) };
        let (url, _) = serve(vec![silent]).await;
        let cancel = CancellationToken::new();
        let options = StreamOptions { cancel: Some(cancel.clone()), ..options() };
        let mut stream = adapter.stream(&model(api, &url), context(), options);
        let canceller = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            cancel.cancel();
        });
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(event);
        }
        canceller.await.unwrap();
        assert_eq!(events.len(), 1, "{api}");
        let message = events[0].final_message().unwrap();
        assert_eq!(message.stop_reason, StopReason::Aborted, "{api}");
    }
}

#[tokio::test]
async fn dropped_connection_mid_stream_is_an_error() {
    let dropped = Scripted { end: End::Drop, ..Scripted::sse(vec![chat_chunk("Hal")]) };
    let (url, _) = serve(vec![dropped]).await;
    let (_, message) = run(&OpenAICompletions, &model("openai-completions", &url), options()).await;
    assert_eq!(message.stop_reason, StopReason::Error);
    let error = message.error_message.clone().unwrap_or_default();
    assert!(error.starts_with("terminated"), "{error}");
    assert_eq!(message.text(), "Hal");
    assert!(pi_providers::is_retryable_error(&message));
}

#[tokio::test]
async fn invalid_utf8_becomes_replacement_characters() {
    let chunk = b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\xff".to_vec();
    let rest = b"b\xe2\x82\"},\"finish_reason\":null}]}\n\n".to_vec();
    // Split a valid multibyte character across chunks too.
    let euro = "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\u{20ac}\"},\"finish_reason\":null}]}\n\n";
    let (left, right) = euro.as_bytes().split_at(euro.find('\u{20ac}').unwrap() + 1);
    let ok = Scripted::sse(vec![chunk, rest, left.to_vec(), right.to_vec(), chat_finish()]);
    let (url, _) = serve(vec![ok]).await;
    let (_, message) = run(&OpenAICompletions, &model("openai-completions", &url), options()).await;
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(message.text(), "a\u{fffd}b\u{fffd}\u{20ac}");
}

#[tokio::test]
async fn malformed_event_per_adapter() {
    type Case = (&'static str, Box<dyn StreamFn>, Vec<u8>, &'static str);
    let cases: Vec<Case> = vec![
        (
            "openai-completions",
            Box::new(OpenAICompletions),
            b"data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"x\n\n".to_vec(),
            "Error reading response: malformed server-sent event JSON.",
        ),
        (
            "openai-responses",
            Box::new(OpenAIResponses),
            b"event: response.created\ndata: {\"type\":\n\n".to_vec(),
            "Error reading response: malformed server-sent event JSON.",
        ),
        (
            "anthropic-messages",
            Box::new(AnthropicMessages),
            b"event: message_start\ndata: {\"type\":\"message_start\n\n".to_vec(),
            "Could not parse Anthropic SSE event message_start: ",
        ),
    ];
    for (api, adapter, body, expected) in cases {
        let (url, _) = serve(vec![Scripted::sse(vec![body])]).await;
        let (events, message) = run(adapter.as_ref(), &model(api, &url), options()).await;
        assert_eq!(events.first().map(AssistantMessageEvent::type_name), Some("start"), "{api}");
        let error = message.error_message.unwrap_or_default();
        assert!(error.starts_with(expected), "{api}: {error}");
    }
}

#[tokio::test]
async fn missing_key_is_an_error_event_not_a_panic() {
    let (url, count) = serve(vec![Scripted::sse(vec![])]).await;
    let options = StreamOptions { api_key: None, ..options() };
    let (events, message) = run(&OpenAICompletions, &model("openai-completions", &url), options).await;
    assert_eq!(events.len(), 1);
    assert_eq!(message.error_message.as_deref(), Some("No API key for provider: test"));
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn keys_never_appear_in_errors_or_debug() {
    let (url, _) =
        serve(vec![Scripted::status(401, vec![], r#"{"error":{"message":"Incorrect API key provided"}}"#)]).await;
    let options = StreamOptions { api_key: Some("sk-very-secret-key".into()), ..options() };
    let (events, message) = run(&OpenAICompletions, &model("openai-completions", &url), options.clone()).await;
    assert!(!format!("{events:?}").contains("sk-very-secret-key"));
    assert!(!message.error_message.unwrap_or_default().contains("sk-very-secret-key"));
    assert!(!format!("{options:?}").contains("sk-very-secret-key"));
}

#[tokio::test]
async fn registry_resolves_key_and_adapter() {
    use pi_providers::registry::{Auth, Models, Provider};
    let (url, count) = serve(vec![Scripted::sse(vec![chat_chunk("Via registry"), chat_finish()])]).await;
    let models = Models::new();
    let resolver: pi_providers::registry::KeyResolver =
        Arc::new(|_model: &Model| Box::pin(async { Ok(Some("sk-resolved".to_owned())) }));
    let mut local = model("openai-completions", &url);
    local.provider = "local".into();
    models.set_provider(
        Provider::new("local")
            .with_auth(Auth::Resolver(resolver))
            .with_model(local.clone())
            .with_api("openai-completions", Arc::new(OpenAICompletions)),
    );
    assert_eq!(models.get_model("local", "test-model").map(|m| m.base_url), Some(url.clone()));
    let context = Context { system_prompt: None, messages: vec![Message::from(UserMessage::text("Hi"))], tools: None };
    let message = models.complete(&local, context.clone(), StreamOptions::default()).await.unwrap();
    assert_eq!(message.text(), "Via registry", "{:?}", message.error_message);
    assert_eq!(count.load(Ordering::SeqCst), 1);

    let mut other = local.clone();
    other.api = "anthropic-messages".into();
    let message = models.complete(&other, context, StreamOptions::default()).await.unwrap();
    assert_eq!(
        message.error_message.as_deref(),
        Some("Provider local has no API implementation for \"anthropic-messages\"")
    );
}
