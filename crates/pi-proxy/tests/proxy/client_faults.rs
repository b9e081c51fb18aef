//! Fault suite of the proxy client: [`ProxyStreamFn`] against loopback servers that misbehave
//! on raw sockets (the adapters' fault-suite servers, shared by path).
//!
//! For every fault: exactly one terminal event and it comes last, the expected error text, no
//! panic, no wait beyond the configured limit (every run is guarded by [`GUARD`], far above
//! the small limits set here), the client lets go of a held connection, and the bearer token
//! is never in an error text nor sent to any origin but the proxy's.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use pi_providers::api::pi_messages::{WireEnd, WireEvent};
use pi_proxy::ProxyStreamFn;
use pi_types::CancellationToken;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, Message, Model, StopReason, StreamFn, StreamOptions, TranscriptContext,
    Usage, UserMessage,
};

use crate::loopback::{head, sse_head, with_length, Server, Step};

/// Longest any single run may take before the test calls it a hang.
const GUARD: Duration = Duration::from_secs(20);
/// The small limits the tests configure.
const LIMIT_MS: u64 = 400;
/// Lower case: the loopback server keeps request heads lower-cased.
const TOKEN: &str = "tok-proxy-fault-suite-0123456789";
const TEXT: &str = "Server-sent events let a server push a stream of text events over one HTTP response.";
const CLOSED_EARLY: &str = "Connection closed by proxy server before the response completed";

fn model() -> Model {
    Model::new("up-1").with_api("openai-completions").with_provider("up")
}

fn context() -> TranscriptContext {
    TranscriptContext::from_messages(vec![Message::from(UserMessage::text("Hi"))])
}

fn options() -> StreamOptions {
    StreamOptions { timeout_ms: Some(LIMIT_MS), idle_timeout_ms: Some(LIMIT_MS), ..Default::default() }
}

/// `data: <event>\n\n`.
fn line(event: &WireEvent) -> String {
    format!("data: {}\n\n", serde_json::to_string(event).expect("event JSON"))
}

fn done() -> String {
    line(&WireEvent::Done { reason: StopReason::Stop, end: WireEnd::default() })
}

fn delta(text: &str) -> String {
    line(&WireEvent::TextDelta { content_index: 0, delta: text.into() })
}

/// The events of a healthy answer carrying [`TEXT`], each with its delimiter.
fn events() -> Vec<String> {
    let mut events = vec![line(&WireEvent::Start), line(&WireEvent::TextStart { content_index: 0 })];
    let words: Vec<&str> = TEXT.split_inclusive(' ').collect();
    events.extend(words.chunks(3).map(|words| delta(&words.concat())));
    events.push(line(&WireEvent::TextEnd { content_index: 0, content: None, content_signature: None }));
    events.push(done());
    events
}

fn body() -> String {
    events().concat()
}

/// The events of one run and its final message; panics on a hang beyond `guard`.
async fn run_guarded(
    url: &str,
    options: StreamOptions,
    guard: Duration,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let client = ProxyStreamFn::new(url, TOKEN);
    let collect = async {
        let mut stream = client.stream(&model(), context(), options);
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(event);
        }
        (events, stream.final_message().map(|m| (**m).clone()))
    };
    let (events, message) = tokio::time::timeout(guard, collect).await.expect("hang");
    let terminals = events.iter().filter(|e| e.final_message().is_some()).count();
    assert_eq!(terminals, 1, "exactly one terminal event");
    assert!(events.last().and_then(AssistantMessageEvent::final_message).is_some(), "terminal event last");
    let message = message.expect("final message");
    assert!(!message.error_message.as_deref().unwrap_or_default().contains(TOKEN), "token in the error");
    (events, message)
}

async fn run(url: &str, options: StreamOptions) -> AssistantMessage {
    run_guarded(url, options, GUARD).await.1
}

/// The error text of a failed run.
fn error_text(message: &AssistantMessage) -> String {
    assert_eq!(message.stop_reason, StopReason::Error, "{message:?}");
    message.error_message.as_deref().unwrap_or_default().to_owned()
}

fn assert_complete(message: &AssistantMessage) {
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(message.text(), TEXT);
}

#[tokio::test]
async fn healthy_answer_completes() {
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body().into_bytes())]).await;
    assert_complete(&run(&server.url, options()).await);
    // The token went to the proxy, as a bearer token.
    assert!(server.heads.lock().expect("heads").iter().any(|h| h.contains(&format!("authorization: bearer {TOKEN}"))));
}

/// A client the user configured (`StreamOptions::http_client`) carries the request, as it
/// does the adapters' requests; a handle holding something else is named in the error.
#[tokio::test]
async fn the_request_goes_through_the_users_client() {
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body().into_bytes())]).await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-users-client", reqwest::header::HeaderValue::from_static("yes"));
    let users = reqwest::Client::builder().default_headers(headers).build().expect("client");
    let with_client = StreamOptions { http_client: Some(pi_providers::transport::client::handle(users)), ..options() };
    assert_complete(&run(&server.url, with_client).await);
    assert!(server.heads.lock().expect("heads").iter().any(|h| h.contains("x-users-client: yes")));

    let wrong = StreamOptions { http_client: Some(pi_types::HttpClientHandle::new(7_u32)), ..options() };
    let text = error_text(&run(&server.url, wrong).await);
    assert_eq!(text, "StreamOptions::http_client holds a u32, not the reqwest::Client the adapters send with");
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}

/// A client given to the `ProxyStreamFn` carries its requests, unless a request names its own.
#[tokio::test]
async fn the_proxy_clients_own_client_carries_requests_unless_the_request_names_one() {
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body().into_bytes())]).await;
    let tagged = |tag: &'static str| {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-client", reqwest::header::HeaderValue::from_static(tag));
        reqwest::Client::builder().default_headers(headers).build().expect("client")
    };
    let proxy = ProxyStreamFn::new(&server.url, TOKEN).with_http_client(tagged("proxys"));
    let message = proxy.stream(&model(), context(), options()).result().await;
    assert_complete(&message.expect("a message"));
    let per_request =
        StreamOptions { http_client: Some(pi_providers::transport::client::handle(tagged("requests"))), ..options() };
    assert_complete(&proxy.stream(&model(), context(), per_request).result().await.expect("a message"));
    let heads = server.heads.lock().expect("heads").clone();
    let tags: Vec<&str> = heads
        .iter()
        .filter_map(|head| head.lines().find_map(|line| line.strip_prefix("x-client: ")))
        .map(str::trim)
        .collect();
    assert_eq!(tags, ["proxys", "requests"], "{heads:?}");
}

#[tokio::test]
async fn reset_mid_stream() {
    let body = body();
    let server = Server::start(vec![
        Step::Bytes(sse_head()),
        Step::Bytes(body.as_bytes()[..body.len() / 2].to_vec()),
        Step::Pause(Duration::from_millis(20)),
        Step::Reset,
    ])
    .await;
    let message = run(&server.url, options()).await;
    let text = error_text(&message);
    assert!(text.starts_with("terminated: "), "{text}");
    assert!(!message.text().is_empty(), "the text streamed before the reset is kept");
}

#[tokio::test]
async fn stall_before_headers_ends_at_the_limit() {
    let server = Server::start(vec![Step::Hold]).await;
    let message = run(&server.url, options()).await;
    assert_eq!(error_text(&message), "fetch failed: Headers Timeout Error");
    assert!(server.released(1).await, "connection still held");
}

/// Without any option set, waiting for headers still ends (at 300 s, on a paused clock).
#[tokio::test(start_paused = true)]
async fn stall_before_headers_has_a_default_limit() {
    let server = Server::start(vec![Step::Hold]).await;
    let started = tokio::time::Instant::now();
    let (_, message) = run_guarded(&server.url, StreamOptions::default(), Duration::from_secs(400)).await;
    assert_eq!(error_text(&message), "fetch failed: Headers Timeout Error");
    assert!(started.elapsed() >= Duration::from_secs(300), "{:?}", started.elapsed());
}

#[tokio::test]
async fn stall_after_headers_ends_at_the_idle_limit() {
    let server =
        Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(events()[..3].concat().into_bytes()), Step::Hold])
            .await;
    let message = run(&server.url, options()).await;
    assert_eq!(error_text(&message), format!("Stream idle timeout: no data received for {LIMIT_MS} ms"));
    assert!(server.released(1).await, "connection still held");
}

/// Without any option set, silence after the headers still ends (at 300 s, on a paused clock).
#[tokio::test(start_paused = true)]
async fn stall_after_headers_has_a_default_limit() {
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Hold]).await;
    let started = tokio::time::Instant::now();
    let (_, message) = run_guarded(&server.url, StreamOptions::default(), Duration::from_secs(400)).await;
    assert_eq!(error_text(&message), "Stream idle timeout: no data received for 300000 ms");
    assert!(started.elapsed() >= Duration::from_secs(300), "{:?}", started.elapsed());
}

#[tokio::test]
async fn stalled_error_body_ends_at_the_idle_limit() {
    let server = Server::start(vec![
        Step::Bytes(head(500, "application/json", "content-length: 1000\r\n")),
        Step::Bytes(b"{\"error\": \"upstream".to_vec()),
        Step::Hold,
    ])
    .await;
    let message = run(&server.url, options()).await;
    assert_eq!(error_text(&message), "Proxy error: 500 Internal Server Error");
    assert!(server.released(1).await, "connection still held");
}

#[tokio::test]
async fn trickle_one_byte_per_write() {
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Trickle(body().into_bytes())]).await;
    assert_complete(&run(&server.url, options()).await);
}

#[tokio::test]
async fn invalid_and_split_utf8() {
    // A two-byte, an invalid and a three-byte sequence inside a delta, every byte its own write.
    let mut bytes = body().into_bytes();
    let at = bytes.windows(6).position(|w| w == b"Server").expect("text");
    bytes.splice(at..at + 6, b"S\xc3\xa9rver\xff \xe2\x82\xac".iter().copied());
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Trickle(bytes)]).await;
    let message = run(&server.url, options()).await;
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert!(message.text().starts_with("S\u{e9}rver\u{fffd} \u{20ac}-sent events"), "{}", message.text());
}

#[tokio::test]
async fn html_200_ends_as_a_closed_connection() {
    let page = b"<html><body>\n<h1>502 Bad Gateway</h1>\n\ndata: none</body></html>\n";
    let server = Server::start(vec![Step::Bytes(with_length(200, "text/html", "", page))]).await;
    let message = run(&server.url, options()).await;
    // The reference reads only `data: ` lines; `data: none</body></html>` is one, not JSON.
    let text = error_text(&message);
    assert_eq!(text, "Unexpected token 'o', \"none</body></html>\" is not valid JSON");
    let page = b"<html><body><h1>502 Bad Gateway</h1></body></html>";
    let server = Server::start(vec![Step::Bytes(with_length(200, "text/html", "", page))]).await;
    assert_eq!(error_text(&run(&server.url, options()).await), CLOSED_EARLY);
}

#[tokio::test]
async fn json_error_with_200_ends_as_a_closed_connection() {
    let body = br#"{"error":"Overloaded"}"#;
    let server = Server::start(vec![Step::Bytes(with_length(200, "application/json", "", body))]).await;
    assert_eq!(error_text(&run(&server.url, options()).await), CLOSED_EARLY);
}

#[tokio::test]
async fn terminal_event_twice() {
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes((body() + &done()).into_bytes())]).await;
    assert_complete(&run(&server.url, options()).await);
}

#[tokio::test]
async fn events_after_the_terminal_are_ignored() {
    let after = delta(" And more.")
        + &line(&WireEvent::Error {
            reason: StopReason::Error,
            error_message: Some("late".into()),
            end: WireEnd::default(),
        });
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes((body() + &after).into_bytes())]).await;
    assert_complete(&run(&server.url, options()).await);
}

#[tokio::test]
async fn terminal_then_open_connection_completes_at_once() {
    // A long idle limit: only stopping at the terminal event ends this run within GUARD.
    let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body().into_bytes()), Step::Hold]).await;
    let options = StreamOptions { idle_timeout_ms: Some(600_000), ..options() };
    assert_complete(&run(&server.url, options).await);
    assert!(server.released(1).await, "connection still held");
}

#[tokio::test]
async fn cancelling_releases_a_held_connection() {
    let server =
        Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(events()[..3].concat().into_bytes()), Step::Hold])
            .await;
    let cancel = CancellationToken::new();
    let options = StreamOptions { idle_timeout_ms: Some(600_000), cancel: Some(cancel.clone()), ..options() };
    let trigger = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let message = run(&server.url, options).await;
    trigger.await.expect("trigger");
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.error_message.as_deref(), Some("Request aborted by user"));
    assert!(server.released(1).await, "connection still held");
}

#[tokio::test]
async fn redirects_to_another_origin_are_not_followed() {
    for (status, reason) in
        [(301u16, "Moved Permanently"), (302, "Found"), (307, "Temporary Redirect"), (308, "Permanent Redirect")]
    {
        let other = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body().into_bytes())]).await;
        let location = format!("location: {}/api/stream\r\n", other.url);
        let server = Server::start(vec![Step::Bytes(with_length(status, "text/plain", &location, b""))]).await;
        let message = run(&server.url, options()).await;
        assert_eq!(error_text(&message), format!("Proxy error: {status} {reason}"));
        // The token went to the proxy (so the test can see it) and nowhere else.
        assert!(server.heads.lock().expect("heads").iter().any(|h| h.contains(TOKEN)));
        assert_eq!(other.requests.load(Ordering::SeqCst), 0, "{status} followed");
    }
}

#[tokio::test]
async fn huge_line_is_cut_with_a_clear_error() {
    let mut steps = vec![Step::Bytes(sse_head()), Step::Bytes(b"data: ".to_vec())];
    steps.extend(std::iter::repeat_n(Step::Bytes(vec![b'a'; 1 << 20]), 17));
    steps.push(Step::Hold);
    let server = Server::start(steps).await;
    // 17 MiB through a debug build on a loaded machine: a generous guard, still no hang.
    let (_, message) = run_guarded(&server.url, options(), Duration::from_secs(180)).await;
    assert_eq!(
        error_text(&message),
        "Server-sent event line longer than 16777216 bytes without a line break (pi caps lines at 16 MiB)"
    );
    assert!(server.released(1).await, "connection still held");
}

#[tokio::test]
async fn huge_error_bodies_give_a_bounded_message() {
    // 5 MiB of text: not read past the cap, the status is the message.
    let server = Server::start(vec![Step::Bytes(with_length(500, "text/plain", "", &vec![b'x'; 5 << 20]))]).await;
    assert_eq!(error_text(&run(&server.url, options()).await), "Proxy error: 500 Internal Server Error");
    // 5 MiB of JSON: the same.
    let json = format!("{{\"error\":\"{}\"}}", "y".repeat(5 << 20));
    let server = Server::start(vec![Step::Bytes(with_length(500, "application/json", "", json.as_bytes()))]).await;
    assert_eq!(error_text(&run(&server.url, options()).await), "Proxy error: 500 Internal Server Error");
    // 60 KB of JSON error text is read, and the message is bounded like the adapters'.
    let json = format!("{{\"error\":\"{}\"}}", "z".repeat(60_000));
    let server = Server::start(vec![Step::Bytes(with_length(502, "application/json", "", json.as_bytes()))]).await;
    let text = error_text(&run(&server.url, options()).await);
    let expected = format!("Proxy error: {}... [truncated 56013 chars]", "z".repeat(3987));
    assert!(text == expected, "{} bytes, ending {:?}", text.len(), &text[text.len().saturating_sub(40)..]);
}

#[tokio::test]
async fn an_error_body_echoing_the_token_is_redacted() {
    let json = format!("{{\"error\":\"Invalid token Bearer {TOKEN}\"}}");
    let server = Server::start(vec![Step::Bytes(with_length(401, "application/json", "", json.as_bytes()))]).await;
    assert_eq!(error_text(&run(&server.url, options()).await), "Proxy error: Invalid token Bearer <redacted>");
}

/// A server (or a proxy in between) that echoes the token in an in-stream `error` event gets the
/// same treatment as an error body: redacted, and a huge text bounded like the adapters'.
#[tokio::test]
async fn an_in_stream_error_is_redacted_and_bounded() {
    let error = |text: String| {
        let event =
            serde_json::json!({"type": "error", "reason": "error", "errorMessage": text, "usage": Usage::default()});
        format!("data: {event}\n\n")
    };
    let stream = |error: String| {
        vec![Step::Bytes(sse_head()), Step::Bytes(format!("{}{error}", line(&WireEvent::Start)).into_bytes())]
    };
    let server = Server::start(stream(error(format!("upstream said: Bearer {TOKEN}")))).await;
    assert_eq!(error_text(&run(&server.url, options()).await), "upstream said: Bearer <redacted>");
    let server = Server::start(stream(error("e".repeat(10 << 20)))).await;
    let text = error_text(&run(&server.url, options()).await);
    assert!(text.len() < 5_000 && text.ends_with("chars]"), "{} bytes", text.len());
}

#[tokio::test]
async fn malformed_and_misplaced_events() {
    let cases = [
        ("data: {\"type\":\n\n".to_owned(), "Unexpected end of JSON input"),
        (delta("x"), "Received text_delta for non-text content"),
        ("data: null\n\n".to_owned(), "Cannot read properties of null (reading 'type')"),
    ];
    for (event, expected) in cases {
        let body = line(&WireEvent::Start) + &event + &body();
        let server = Server::start(vec![Step::Bytes(sse_head()), Step::Bytes(body.into_bytes())]).await;
        assert_eq!(error_text(&run(&server.url, options()).await), expected);
    }
}
