//! Fault suite: each adapter against loopback servers that misbehave on raw
//! sockets (every byte and every pause chosen by the test).
//!
//! For every fault and adapter: exactly one terminal event and it comes last, a sensible
//! error text, no panic, no wait beyond the configured limit (every run is guarded by
//! [`GUARD`], far above the small limits set here), the client lets go of the connection
//! (no task left holding it) and no credential is sent where it should not go. The healthy
//! responses are the vendored `text_basic` recordings of each API.
//!
//! Every fault runs twice (the `default_client` and `user_client` modules): through the
//! adapters' default HTTP client and through a client the user built with reqwest's own
//! defaults, passed in `StreamOptions::http_client`: the limits are the reading code's, not
//! the client's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The example API written against the driver's trait (`examples/line_chat`).
#[path = "../examples/line_chat/api.rs"]
mod line_chat;
mod loopback;

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use loopback::{head, sse_head, with_length, Server, Step};
use pi_providers::api::anthropic::AnthropicMessages;
use pi_providers::api::bedrock::BedrockConverseStream;
use pi_providers::api::google::gemini::GoogleGenerativeAi;
use pi_providers::api::google::vertex::GoogleVertex;
use pi_providers::api::mistral::MistralConversations;
use pi_providers::api::openai::azure::AzureOpenAIResponses;
use pi_providers::api::openai::codex::OpenAICodexResponses;
use pi_providers::api::openai::completions::OpenAICompletions;
use pi_providers::api::openai::responses::OpenAIResponses;
use pi_providers::api::pi_messages::PiMessages;
use pi_types::transcript::normalize_context;
use pi_types::CancellationToken;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, Context, HttpClientHandle, Message, Model, StopReason, StreamFn,
    StreamOptions, UserMessage,
};
use serde_json::Value;

/// Longest any single run may take before the test calls it a hang.
const GUARD: Duration = Duration::from_secs(20);
/// The small limits the tests configure.
const LIMIT_MS: u64 = 400;
const SECRET: &str = "sk-fault-suite-secret";
const TEXT: &str = "Server-sent events let a server push a stream of text events over one HTTP response.";

const APIS: &[&str] = &[
    "openai-completions",
    "anthropic-messages",
    "openai-responses",
    "google-generative-ai",
    "mistral-conversations",
    "azure-openai-responses",
    "openai-codex-responses",
    "google-vertex",
    "pi-messages",
    BEDROCK,
    line_chat::API,
];

/// Gemini's protocol (Gemini and Vertex AI): CRLF framing, no terminal event, SDK error shapes.
fn gemini_like(api: &str) -> bool {
    api == "google-generative-ai" || api == "google-vertex"
}

/// Bedrock's body is an AWS event stream: binary frames, each with its length and CRC32s.
const BEDROCK: &str = "bedrock-converse-stream";

fn fixture(api: &str) -> Value {
    let text = match api {
        "openai-completions" => {
            include_str!("../../../tests/fixtures/providers/cases/openai-completions/text_basic.json")
        }
        "anthropic-messages" => {
            include_str!("../../../tests/fixtures/providers/cases/anthropic-messages/text_basic.json")
        }
        "openai-responses" => include_str!("../../../tests/fixtures/providers/cases/openai-responses/text_basic.json"),
        "mistral-conversations" => {
            include_str!("../../../tests/fixtures/providers-extra/cases/mistral-conversations/text_basic.json")
        }
        "azure-openai-responses" => {
            include_str!("../../../tests/fixtures/providers-extra/cases/azure-openai-responses/text_basic.json")
        }
        "openai-codex-responses" => {
            include_str!("../../../tests/fixtures/providers-extra/cases/openai-codex-responses/text_basic.json")
        }
        "google-vertex" => {
            include_str!("../../../tests/fixtures/providers-extra/cases/google-vertex/text_basic.json")
        }
        "pi-messages" => include_str!("../../../tests/fixtures/providers-extra/cases/pi-messages/text_basic.json"),
        line_chat::API => include_str!("../examples/line_chat/text_basic.json"),
        BEDROCK => {
            include_str!("../../../tests/fixtures/providers-extra/cases/bedrock-converse-stream/text_basic.json")
        }
        _ => include_str!("../../../tests/fixtures/providers/cases/google-generative-ai/text_basic.json"),
    };
    serde_json::from_str(text).unwrap()
}

fn adapter(api: &str) -> Box<dyn StreamFn> {
    match api {
        "openai-completions" => Box::new(OpenAICompletions),
        "anthropic-messages" => Box::new(AnthropicMessages),
        "openai-responses" => Box::new(OpenAIResponses),
        "mistral-conversations" => Box::new(MistralConversations),
        "azure-openai-responses" => Box::new(AzureOpenAIResponses::default()),
        "openai-codex-responses" => Box::new(OpenAICodexResponses::default()),
        "google-vertex" => Box::new(GoogleVertex::default()),
        "pi-messages" => Box::new(PiMessages),
        BEDROCK => Box::new(BedrockConverseStream),
        line_chat::API => Box::new(line_chat::LineChat),
        _ => Box::new(GoogleGenerativeAi::default()),
    }
}

fn model(api: &str, url: &str) -> Model {
    let mut json = fixture(api)["model"].clone();
    let base = json["baseUrl"].as_str().unwrap().replace("{{BASE_URL}}", url);
    json["baseUrl"] = Value::String(base);
    serde_json::from_value(json).unwrap()
}

/// The recorded healthy body of an API.
fn body(api: &str) -> Vec<u8> {
    let response = &fixture(api)["response"];
    match response["body_base64"].as_str() {
        Some(base64) => aws_smithy_types::base64::decode(base64).unwrap(),
        None => response["body"].as_str().unwrap().as_bytes().to_vec(),
    }
}

/// The healthy body with `edit` applied to its text: to the body itself, or for Bedrock to
/// each frame's payload (the frames are encoded again, with their lengths and CRCs).
fn edited_body(api: &str, edit: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    if api != BEDROCK {
        return edit(&body(api));
    }
    let mut out = Vec::new();
    for frame in events(api) {
        let message = aws_smithy_eventstream::frame::read_message_from(&frame[..]).unwrap();
        let message = aws_smithy_types::event_stream::Message::new_from_parts(
            message.headers().to_vec(),
            edit(message.payload()),
        );
        aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    }
    out
}

/// The events of a healthy body, each with its delimiter (Bedrock: each frame).
fn events(api: &str) -> Vec<Vec<u8>> {
    let body = body(api);
    if api == BEDROCK {
        let mut frames = Vec::new();
        let mut rest = &body[..];
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let (frame, tail) = rest.split_at(len);
            frames.push(frame.to_vec());
            rest = tail;
        }
        return frames;
    }
    let delimiter: &[u8] = if gemini_like(api) { b"\r\n\r\n" } else { b"\n\n" };
    let mut out = Vec::new();
    let mut rest = &body[..];
    while let Some(at) = rest.windows(delimiter.len()).position(|w| w == delimiter) {
        let (event, tail) = rest.split_at(at + delimiter.len());
        out.push(event.to_vec());
        rest = tail;
    }
    if !rest.is_empty() {
        out.push(rest.to_vec());
    }
    out
}

/// The event that ends the protocol (the last one; `[DONE]` for completions).
fn terminal(api: &str) -> Vec<u8> {
    events(api).last().cloned().unwrap()
}

/// The first event carrying a text delta.
fn text_delta(api: &str) -> Vec<u8> {
    let marker: &[u8] = match api {
        "openai-completions" | "mistral-conversations" => b"\"content\":",
        "anthropic-messages" => b"text_delta",
        "openai-responses" | "azure-openai-responses" | "openai-codex-responses" => b"response.output_text.delta",
        "pi-messages" => b"\"text_delta\"",
        line_chat::API => b"\"type\":\"text\"",
        BEDROCK => b"contentBlockDelta",
        _ => b"\"text\"",
    };
    events(api).into_iter().find(|e| e.windows(marker.len()).any(|w| w == marker)).unwrap()
}

/// `body` followed by `more`.
fn cat(mut body: Vec<u8>, more: Vec<u8>) -> Vec<u8> {
    body.extend(more);
    body
}

/// The error text of a wait for headers that hit its limit.
fn headers_timeout_text(api: &str, limit_ms: u64) -> String {
    match api {
        "mistral-conversations" => format!("Mistral response headers timed out after {limit_ms}ms"),
        "openai-codex-responses" => format!("Codex SSE response headers timed out after {limit_ms}ms"),
        _ => "Request timed out.".to_owned(),
    }
}

/// The time-to-headers limit when the caller sets none (Mistral's is the reference's own 60 s).
fn default_headers_limit_ms(api: &str) -> u64 {
    match api {
        "mistral-conversations" => 60_000,
        _ => 300_000,
    }
}

/// The HTTP client a fault runs through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// The adapters' default (`StreamOptions::http_client` unset).
    Default,
    /// A client of the user's, built from `reqwest::Client::builder()` with reqwest's defaults
    /// but for redirects (which the client decides; see `pi_providers::transport::client`) and proxies
    /// (a test must not depend on the machine's), marked by a default header.
    User,
}

const USER_CLIENT_HEADER: &str = "x-fault-client";

impl Via {
    fn client(self) -> Option<HttpClientHandle> {
        thread_local! {
            // One per test thread: a client's pooled connections live on its runtime.
            static USER: pi_providers::reqwest::Client = {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let mut headers = pi_providers::reqwest::header::HeaderMap::new();
                headers.insert(USER_CLIENT_HEADER, "user".parse().unwrap());
                pi_providers::reqwest::Client::builder()
                    .redirect(pi_providers::reqwest::redirect::Policy::none())
                    .no_proxy()
                    .default_headers(headers)
                    .build()
                    .unwrap()
            };
        }
        match self {
            Self::Default => None,
            Self::User => Some(USER.with(|client| pi_providers::transport::client::handle(client.clone()))),
        }
    }

    /// Every request `server` saw came through this client.
    fn check(self, api: &str, server: &Server) {
        let marker = format!("{USER_CLIENT_HEADER}: user");
        for head in server.heads.lock().unwrap().iter() {
            assert_eq!(head.contains(&marker), self == Self::User, "{api}: sent through the wrong client");
        }
    }
}

fn options(via: Via) -> StreamOptions {
    StreamOptions {
        http_client: via.client(),
        api_key: Some(SECRET.into()),
        max_retries: Some(0),
        timeout_ms: Some(LIMIT_MS),
        idle_timeout_ms: Some(LIMIT_MS),
        ..Default::default()
    }
}

fn context() -> pi_types::TranscriptContext {
    normalize_context(Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    })
}

/// Codex reads the account id from its key, a JWT: the suite's secret becomes the signature
/// of one (the adapter never checks it), so every leak check still looks for [`SECRET`]. The
/// suite's faults are HTTP ones: Codex goes over SSE (its WebSocket transport, tried first by
/// default, has its own cases in `codex_websocket.rs`).
fn with_codex_token(api: &str, options: StreamOptions) -> StreamOptions {
    if api != "openai-codex-responses" {
        return options;
    }
    let options = StreamOptions { transport: Some(pi_types::Transport::Sse), ..options };
    if options.api_key.as_deref() != Some(SECRET) {
        return options;
    }
    let token = fixture(api)["apiKey"].as_str().unwrap().trim_end_matches('.').to_owned();
    StreamOptions { api_key: Some(format!("{token}.{SECRET}")), ..options }
}

/// The error text when no headers arrive in time (Codex words its own).
/// The events of one run and its final message; panics on a hang beyond [`GUARD`].
async fn run(api: &str, url: &str, options: StreamOptions) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    run_guarded(api, url, options, GUARD).await
}

async fn run_guarded(
    api: &str,
    url: &str,
    options: StreamOptions,
    guard: Duration,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let adapter = adapter(api);
    let model = model(api, url);
    let options = with_codex_token(api, options);
    let collect = async {
        let mut stream = adapter.stream(&model, context(), options);
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(event);
        }
        let message = stream.final_message().map(|m| (**m).clone());
        (events, message)
    };
    let (events, message) = tokio::time::timeout(guard, collect).await.unwrap_or_else(|_| panic!("{api}: hang"));
    let terminals = events.iter().filter(|e| e.final_message().is_some()).count();
    assert_eq!(terminals, 1, "{api}: exactly one terminal event");
    assert!(events.last().and_then(AssistantMessageEvent::final_message).is_some(), "{api}: terminal event last");
    (events, message.expect("final message"))
}

/// Run a fault against every adapter; returns each API's final message.
async fn each(
    via: Via,
    steps: impl Fn(&str) -> Vec<Step>,
    options: impl Fn() -> StreamOptions,
) -> Vec<(String, AssistantMessage)> {
    let mut out = Vec::new();
    for &api in APIS {
        let server = Server::start(steps(api)).await;
        let (_, message) = run(api, &server.url, options()).await;
        via.check(api, &server);
        out.push((api.to_owned(), message));
    }
    out
}

fn error_text(api: &str, message: &AssistantMessage) -> String {
    assert_eq!(message.stop_reason, StopReason::Error, "{api}: {message:?}");
    let text = message.error_message.clone().unwrap_or_default();
    assert!(!text.is_empty(), "{api}: empty error");
    assert!(!text.contains(SECRET), "{api}: key in the error");
    text.into()
}

async fn healthy_recordings_complete(via: Via) {
    for (api, message) in each(via, |api| vec![Step::Bytes(sse_head()), Step::Bytes(body(api))], || options(via)).await
    {
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}: {:?}", message.error_message);
        assert_eq!(message.text(), TEXT, "{api}");
    }
}

async fn reset_mid_stream(via: Via) {
    let steps = |api: &str| {
        let body = body(api);
        vec![
            Step::Bytes(sse_head()),
            Step::Bytes(body[..body.len() / 2].to_vec()),
            Step::Pause(Duration::from_millis(20)),
            Step::Reset,
        ]
    };
    for (api, message) in each(via, steps, || options(via)).await {
        let text = error_text(&api, &message);
        assert!(text.starts_with("terminated: ") || text.contains("ended"), "{api}: {text}");
    }
}

async fn stall_before_headers_ends_at_the_limit(via: Via) {
    for &api in APIS {
        let server = Server::start(vec![Step::Hold]).await;
        let (_, message) = run(api, &server.url, options(via)).await;
        via.check(api, &server);
        assert_eq!(error_text(api, &message), headers_timeout_text(api, LIMIT_MS), "{api}");
        assert!(server.released(1).await, "{api}: connection still held");
    }
}

/// Without any option set, waiting for headers still ends (at 300 s, Mistral 60 s, on a paused clock).
async fn stall_before_headers_has_a_default_limit(via: Via) {
    tokio::time::pause();
    for &api in APIS {
        let server = Server::start(vec![Step::Hold]).await;
        let started = tokio::time::Instant::now();
        let options = StreamOptions {
            api_key: Some(SECRET.into()),
            max_retries: Some(0),
            http_client: via.client(),
            ..Default::default()
        };
        let (_, message) = run_guarded(api, &server.url, options, Duration::from_secs(400)).await;
        let limit = default_headers_limit_ms(api);
        assert_eq!(error_text(api, &message), headers_timeout_text(api, limit), "{api}");
        assert!(started.elapsed() >= Duration::from_millis(limit), "{api}: {:?}", started.elapsed());
    }
}

async fn stall_after_headers_ends_at_the_idle_limit(via: Via) {
    let steps = |api: &str| vec![Step::Bytes(sse_head()), Step::Bytes(events(api)[0].clone()), Step::Hold];
    for &api in APIS {
        let server = Server::start(steps(api)).await;
        let (_, message) = run(api, &server.url, options(via)).await;
        let text = error_text(api, &message);
        assert_eq!(text, format!("Stream idle timeout: no data received for {LIMIT_MS} ms"), "{api}");
        assert!(server.released(1).await, "{api}: connection still held");
    }
}

async fn stalled_error_body_ends_at_the_idle_limit(via: Via) {
    let steps = |_: &str| {
        vec![
            Step::Bytes(head(500, "application/json", "content-length: 1000\r\n")),
            Step::Bytes(b"{\"error\": {\"message\": \"upstream".to_vec()),
            Step::Hold,
        ]
    };
    for &api in APIS {
        let server = Server::start(steps(api)).await;
        let (_, message) = run(api, &server.url, options(via)).await;
        let text = error_text(api, &message);
        if gemini_like(api) {
            // @google/genai parses the (cut) body as JSON and reports the parse error.
            assert!(text.contains("JSON"), "{api}: {text}");
        } else if api == "openai-codex-responses" {
            // Codex reports the body (here cut, so not JSON) without the status.
            assert!(text.contains("upstream"), "{api}: {text}");
        } else {
            assert!(text.contains("500"), "{api}: {text}");
        }
        assert!(server.released(1).await, "{api}: connection still held");
    }
}

async fn trickle_one_byte_per_write(via: Via) {
    let steps = |api: &str| vec![Step::Bytes(sse_head()), Step::Trickle(body(api))];
    for (api, message) in each(via, steps, || options(via)).await {
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}: {:?}", message.error_message);
        assert_eq!(message.text(), TEXT, "{api}");
    }
}

async fn invalid_and_split_utf8(via: Via) {
    // A two-byte, an invalid and a three-byte sequence, every byte its own write.
    let steps = |api: &str| {
        // Every copy of the text (deltas and final items) carries the same bytes.
        let bytes = edited_body(api, |body| {
            let mut bytes = Vec::new();
            let mut rest = body;
            while let Some(at) = rest.windows(6).position(|w| w == b"Server") {
                bytes.extend_from_slice(&rest[..at]);
                bytes.extend_from_slice(b"S\xc3\xa9rver\xff \xe2\x82\xac");
                rest = &rest[at + 6..];
            }
            bytes.extend_from_slice(rest);
            bytes
        });
        vec![Step::Bytes(sse_head()), Step::Trickle(bytes)]
    };
    for (api, message) in each(via, steps, || options(via)).await {
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}: {:?}", message.error_message);
        assert!(message.text().starts_with("S\u{e9}rver\u{fffd} \u{20ac}-sent events"), "{api}: {}", message.text());
    }
}

async fn html_200_is_an_error(via: Via) {
    let steps = |_: &str| {
        vec![Step::Bytes(with_length(200, "text/html", "", b"<html><body><h1>502 Bad Gateway</h1></body></html>"))]
    };
    for (api, message) in each(via, steps, || options(via)).await {
        error_text(&api, &message);
    }
}

async fn json_error_with_200_is_an_error(via: Via) {
    let steps = |_: &str| {
        vec![Step::Bytes(with_length(
            200,
            "application/json",
            "",
            br#"{"error":{"message":"Overloaded","code":529,"status":"UNAVAILABLE"}}"#,
        ))]
    };
    for (api, message) in each(via, steps, || options(via)).await {
        error_text(&api, &message);
    }
}

async fn terminal_event_twice(via: Via) {
    let steps = |api: &str| vec![Step::Bytes(sse_head()), Step::Bytes(cat(body(api), terminal(api)))];
    for (api, message) in each(via, steps, || options(via)).await {
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}: {:?}", message.error_message);
        if !gemini_like(&api) {
            // Gemini's last chunk is no terminal event but text with a finish reason: it counts twice.
            assert_eq!(message.text(), TEXT, "{api}");
        }
    }
}

async fn events_after_the_terminal_are_ignored(via: Via) {
    let steps = |api: &str| vec![Step::Bytes(sse_head()), Step::Bytes(cat(body(api), text_delta(api)))];
    for (api, message) in each(via, steps, || options(via)).await {
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}: {:?}", message.error_message);
        if !gemini_like(&api) && api != BEDROCK {
            // Gemini has no terminal event: a chunk after `finishReason` is still part of the answer.
            // Nor has Bedrock: usage (`metadata`) follows `messageStop`, and the stream ends at EOF.
            assert_eq!(message.text(), TEXT, "{api}");
        }
    }
}

async fn terminal_then_open_connection_completes_at_once(via: Via) {
    // A long idle limit: only stopping at the terminal event ends these runs within GUARD.
    for api in [
        "openai-completions",
        "anthropic-messages",
        "openai-responses",
        "mistral-conversations",
        "azure-openai-responses",
        "openai-codex-responses",
        "pi-messages",
        line_chat::API,
    ] {
        let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body(api)), Step::Hold]).await;
        let options = StreamOptions { idle_timeout_ms: Some(600_000), ..options(via) };
        let (_, message) = run(api, &server.url, options).await;
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}: {:?}", message.error_message);
        assert_eq!(message.text(), TEXT, "{api}");
        assert!(server.released(1).await, "{api}: connection still held");
    }
    // Gemini's and Bedrock's protocols end only at EOF: the idle limit bounds the wait.
    for &api in APIS.iter().filter(|api| gemini_like(api) || **api == BEDROCK) {
        let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body(api)), Step::Hold]).await;
        let (_, message) = run(api, &server.url, options(via)).await;
        assert!(error_text(api, &message).starts_with("Stream idle timeout"), "{api}");
        assert_eq!(message.text(), TEXT, "{api}: content kept");
        assert!(server.released(1).await, "{api}: connection still held");
    }
}

async fn absurd_retry_after_with_the_default_cap(via: Via) {
    let steps = |_: &str| {
        vec![Step::Bytes(with_length(
            429,
            "application/json",
            "retry-after-ms: 1e300\r\nretry-after: 1e300\r\n",
            br#"{"error":{"message":"slow down"}}"#,
        ))]
    };
    for (api, message) in each(via, steps, || StreamOptions { max_retries: Some(1), ..options(via) }).await {
        let text = error_text(&api, &message);
        if !gemini_like(&api) {
            assert!(text.starts_with("Server requested "), "{api}: {text}");
        }
    }
}

async fn absurd_retry_after_without_a_cap_sleeps_until_cancelled(via: Via) {
    let steps = |_: &str| {
        vec![Step::Bytes(with_length(
            429,
            "application/json",
            "retry-after-ms: 1e300\r\nretry-after: 1e300\r\n",
            br#"{"error":{"message":"slow down"}}"#,
        ))]
    };
    for &api in APIS {
        let server = Server::start(steps(api)).await;
        let cancel = CancellationToken::new();
        let options = StreamOptions {
            max_retries: Some(3),
            max_retry_delay_ms: Some(0),
            cancel: Some(cancel.clone()),
            ..options(via)
        };
        let trigger = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
        });
        let (_, message) = run(api, &server.url, options).await;
        trigger.await.unwrap();
        assert_eq!(message.stop_reason, StopReason::Aborted, "{api}: {:?}", message.error_message);
    }
}

async fn redirects_to_another_origin_are_not_followed(via: Via) {
    for status in [301u16, 302, 307, 308] {
        for &api in APIS {
            let other = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body(api))]).await;
            let location = format!("location: {}/steal\r\n", other.url);
            let server = Server::start(vec![Step::Bytes(with_length(status, "text/plain", &location, b""))]).await;
            let (_, message) = run(api, &server.url, options(via)).await;
            let text = error_text(api, &message);
            assert!(text.contains(&format!("redirect ({status})")), "{api}: {text}");
            // The key went to the configured origin (so the test can see it) and nowhere else.
            assert!(server.heads.lock().unwrap().iter().any(|h| h.contains(SECRET)), "{api}");
            assert_eq!(other.requests.load(Ordering::SeqCst), 0, "{api}: {status} followed");
            via.check(api, &server);
        }
    }
}

async fn huge_line_is_cut_with_a_clear_error(via: Via) {
    let steps = |_: &str| {
        let mut steps = vec![Step::Bytes(sse_head()), Step::Bytes(b"data: ".to_vec())];
        let block = vec![b'a'; 1 << 20];
        steps.extend(std::iter::repeat_n(Step::Bytes(block), 17));
        steps.push(Step::Hold);
        steps
    };
    for &api in APIS {
        let server = Server::start(steps(api)).await;
        // 17 MiB through a debug build on a loaded machine: a generous guard, still no hang.
        let (_, message) = run_guarded(api, &server.url, options(via), Duration::from_secs(180)).await;
        let text = error_text(api, &message);
        if api == BEDROCK {
            // "data" read as a frame length is ~1.7 GB: refused before anything is buffered.
            assert!(text.contains("exceeds the limit of 16777216 bytes"), "{api}: {text}");
        } else {
            assert!(text.contains("line longer than 16777216 bytes"), "{api}: {text}");
        }
    }
}

async fn huge_error_body_gives_a_bounded_message(via: Via) {
    let steps = |_: &str| {
        let body = vec![b'x'; 5 << 20];
        vec![Step::Bytes(with_length(500, "text/plain", "", &body))]
    };
    for (api, message) in each(via, steps, || options(via)).await {
        let text = error_text(&api, &message);
        assert!(text.encode_utf16().count() <= 4200, "{api}: {} units", text.encode_utf16().count());
        assert!(text.contains("... [truncated "), "{api}: {}", &text[text.len().saturating_sub(80)..]);
    }
}

async fn huge_usage_numbers_saturate(via: Via) {
    let steps = |api: &str| {
        let body = String::from_utf8(body(api)).unwrap_or_default();
        let body = match api {
            "openai-completions" => body
                .replace("\"prompt_tokens\":31", "\"prompt_tokens\":1e300")
                .replace("\"completion_tokens\":18", "\"completion_tokens\":1e300"),
            "anthropic-messages" => body
                .replace("\"input_tokens\":27", "\"input_tokens\":1e300")
                .replace("\"output_tokens\":1,", "\"output_tokens\":1e300,")
                .replace("\"output_tokens\":21", "\"output_tokens\":1e300"),
            "openai-responses" | "azure-openai-responses" | "openai-codex-responses" => body
                .replace("\"input_tokens\":29", "\"input_tokens\":1e300")
                .replace("\"output_tokens\":19", "\"output_tokens\":1e300"),
            "pi-messages" => body.replace("\"input\":12,\"output\":7,", "\"input\":1e300,\"output\":1e300,"),
            line_chat::API => body.replace("\"output\":19", "\"output\":1e300"),
            "mistral-conversations" => body
                .replace("\"prompt_tokens\":14", "\"prompt_tokens\":1e300")
                .replace("\"completion_tokens\":9", "\"completion_tokens\":1e300"),
            BEDROCK => {
                let body = edited_body(api, |payload| {
                    String::from_utf8_lossy(payload)
                        .replace("\"inputTokens\":42", "\"inputTokens\":1e300")
                        .replace("\"outputTokens\":9", "\"outputTokens\":1e300")
                        .into_bytes()
                });
                assert!(body.windows(5).any(|w| w == b"1e300"), "{api}");
                return vec![Step::Bytes(sse_head()), Step::Bytes(body)];
            }
            _ => body
                .replace(
                    "\"candidatesTokenCount\": 19",
                    "\"candidatesTokenCount\": 1e300,\"thoughtsTokenCount\": 1e300",
                )
                .replace("\"candidatesTokenCount\":19", "\"candidatesTokenCount\":1e300,\"thoughtsTokenCount\":1e300"),
        };
        assert!(body.contains("1e300"), "{api}");
        vec![Step::Bytes(sse_head()), Step::Bytes(body.into_bytes())]
    };
    for (api, message) in each(via, steps, || options(via)).await {
        assert_eq!(message.stop_reason, StopReason::Stop, "{api}: {:?}", message.error_message);
        assert_eq!(message.usage.output, u64::MAX, "{api}");
    }
}

/// A server that quotes the credential back (in the error body, as is and JSON-escaped in a
/// header dump): the error text and the message's `Debug` hold `<redacted>` instead.
async fn an_error_echoing_the_key_is_redacted(via: Via) {
    let steps = |_: &str| {
        let body = format!(
            r#"{{"message":"invalid key {SECRET}","error":{{"message":"invalid key {SECRET}","request":{{"authorization":"Bearer {SECRET}"}}}}}}"#
        );
        vec![Step::Bytes(with_length(401, "application/json", "", body.as_bytes()))]
    };
    for (api, message) in each(via, steps, || options(via)).await {
        let text = error_text(&api, &message);
        assert!(text.contains("<redacted>"), "{api}: {text}");
        assert!(!format!("{message:?}").contains(SECRET), "{api}: key in Debug");
    }
}

/// A Gemini or Vertex AI JSON error body over the 1 MiB read cap keeps the provider's message
/// (the cut body is no JSON: the status and its first bytes).
async fn a_huge_google_json_error_keeps_the_message(via: Via) {
    let mut body =
        br#"{"error":{"code":400,"message":"Request payload too large","status":"INVALID_ARGUMENT","details":""#
            .to_vec();
    body.extend(std::iter::repeat_n(b'x', 2 << 20));
    body.extend_from_slice(br#""}}"#);
    for &api in APIS.iter().filter(|api| gemini_like(api)) {
        let server = Server::start(vec![Step::Bytes(with_length(400, "application/json", "", &body))]).await;
        let (_, message) = run(api, &server.url, options(via)).await;
        let text = error_text(api, &message);
        assert!(text.starts_with("400 Bad Request: {\"error\""), "{api}: {}", &text[..text.len().min(200)]);
        assert!(text.contains("Request payload too large"), "{api}");
        assert!(text.ends_with(" chars]"), "{api}: bounded");
    }
}

/// A base URL with `user:pass@` is refused before anything is sent.
async fn credentials_in_the_base_url_are_refused(via: Via) {
    for &api in APIS {
        let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body(api))]).await;
        let url = server.url.replacen("http://", "http://user:hunter2-password@", 1);
        let (_, message) = run(api, &url, options(via)).await;
        let text = error_text(api, &message);
        assert!(
            text.starts_with("Request cannot be constructed from a URL that includes credentials: http://<redacted>@"),
            "{api}: {text}"
        );
        assert!(!text.contains("hunter2"), "{api}: {text}");
        assert_eq!(server.requests.load(Ordering::SeqCst), 0, "{api}: request sent");
    }
}

/// Each fault as two tests: through the default client and through the user's.
macro_rules! through_each_client {
    ($($fault:ident),* $(,)?) => {
        mod default_client {
            $(#[tokio::test] async fn $fault() { super::$fault(super::Via::Default).await })*
        }
        mod user_client {
            $(#[tokio::test] async fn $fault() { super::$fault(super::Via::User).await })*
        }
    };
}

through_each_client!(
    healthy_recordings_complete,
    reset_mid_stream,
    stall_before_headers_ends_at_the_limit,
    stall_before_headers_has_a_default_limit,
    stall_after_headers_ends_at_the_idle_limit,
    stalled_error_body_ends_at_the_idle_limit,
    trickle_one_byte_per_write,
    invalid_and_split_utf8,
    html_200_is_an_error,
    json_error_with_200_is_an_error,
    terminal_event_twice,
    events_after_the_terminal_are_ignored,
    terminal_then_open_connection_completes_at_once,
    absurd_retry_after_with_the_default_cap,
    absurd_retry_after_without_a_cap_sleeps_until_cancelled,
    redirects_to_another_origin_are_not_followed,
    huge_line_is_cut_with_a_clear_error,
    huge_error_body_gives_a_bounded_message,
    huge_usage_numbers_saturate,
    an_error_echoing_the_key_is_redacted,
    a_huge_google_json_error_keeps_the_message,
    credentials_in_the_base_url_are_refused,
);
