//! The Vertex AI adapter against loopback servers: cancellation mid-stream, and application
//! default credentials (a service-account file whose `token_uri` is a loopback token server,
//! an authorized-user file) that put `Authorization: Bearer <token>` on the streamed request
//! and never leak the token or the file's secrets into error texts or `Debug`.
//!
//! `tests/fixtures/TEST-ONLY-vertex-service-account-key.pem` is an RSA key generated for these
//! tests only; it belongs to no account anywhere.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The credential servers and helpers serve the `vertex` feature's tests.
#![cfg_attr(not(feature = "vertex"), allow(dead_code))]

mod loopback;

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use pi_providers::api::google::vertex::GoogleVertex;
use pi_types::transcript::normalize_context;
use pi_types::{
    AssistantMessageEvent, CancellationToken, Context, Message, Model, StopReason, StreamFn, StreamOptions, UserMessage,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const CHUNK_HEL: &str =
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}],\"role\":\"model\"}}]}\r\n\r\n";
const CHUNK_END: &str = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2,\"totalTokenCount\":5}}\r\n\r\n";

fn model(base: &str) -> Model {
    let mut m = Model::new("gemini-2.5-flash").with_api("google-vertex").with_provider("google-vertex");
    m.base_url = base.to_owned();
    m
}

fn context() -> pi_types::TranscriptContext {
    normalize_context(Context { messages: vec![Message::from(UserMessage::text("Hi"))], ..Default::default() })
}

fn env(pairs: &[(&str, String)]) -> Option<Arc<indexmap::IndexMap<String, String>>> {
    Some(Arc::new(pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()))
}

async fn collect(stream: pi_types::AssistantMessageEventStream) -> Vec<AssistantMessageEvent> {
    stream.collect().await
}

/// One request as the server saw it: the request line and the headers (case kept).
#[derive(Clone, Debug)]
struct Seen {
    line: String,
    head: String,
    body: String,
}

/// A loopback server: `POST /token` answers `token_answer`; any other request gets `api_answer`.
async fn serve(token_answer: (u16, String), api_answer: Vec<u8>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let (token_answer, api_answer, log) = (token_answer.clone(), api_answer.clone(), Arc::clone(&log));
            tokio::spawn(async move {
                let Some((head, body)) = read_raw(&mut socket).await else { return };
                let line = head.lines().next().unwrap_or_default().to_owned();
                log.lock().unwrap().push(Seen { line: line.clone(), head, body });
                let reply = if line.starts_with("POST /token") {
                    let (status, text) = token_answer;
                    loopback::with_length(status, "application/json", "", text.as_bytes())
                } else {
                    api_answer
                };
                let _ = socket.write_all(&reply).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, seen)
}

/// Read one request; its head (case kept) and body.
async fn read_raw(socket: &mut tokio::net::TcpStream) -> Option<(String, String)> {
    use tokio::io::AsyncReadExt;
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let length = head
                .lines()
                .find_map(|l| l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            while buffer.len() < end + 4 + length {
                let n = socket.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
                buffer.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&buffer[end + 4..end + 4 + length]).into_owned();
            return Some((head, body));
        }
        let n = socket.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    }
}

fn sse_answer() -> Vec<u8> {
    loopback::with_length(200, "text/event-stream", "", format!("{CHUNK_HEL}{CHUNK_END}").as_bytes())
}

fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test]
async fn cancellation_mid_stream_ends_with_one_aborted_error_keeping_the_text() {
    let server = loopback::Server::start(vec![
        loopback::Step::Bytes(loopback::sse_head()),
        loopback::Step::Bytes(CHUNK_HEL.as_bytes().to_vec()),
        loopback::Step::Hold,
    ])
    .await;
    let cancel = CancellationToken::new();
    let options =
        StreamOptions { api_key: Some("vertex-key".into()), cancel: Some(cancel.clone()), ..Default::default() };
    let mut stream = GoogleVertex::default().stream(&model(&server.url), context(), options);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if event.type_name() == "text_delta" {
            cancel.cancel();
        }
        events.push(event);
    }
    let terminal: Vec<_> = events.iter().filter(|e| matches!(e.type_name(), "error" | "done")).collect();
    assert_eq!(terminal.len(), 1);
    let last = events.last().unwrap();
    assert_eq!(last.type_name(), "error");
    let message = last.final_message().unwrap();
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(message.text(), "Hel");
    assert!(server.released(1).await, "the connection was closed");
    let heads = server.heads.lock().unwrap().clone();
    assert!(heads[0].starts_with("post /v1/publishers/google/models/gemini-2.5-flash:streamgeneratecontent?alt=sse"));
    assert!(heads[0].contains("x-goog-api-key: vertex-key"));
}

#[tokio::test]
async fn function_calls_without_an_id_or_with_a_repeated_one_get_a_synthesized_id() {
    let call = |id: &str| {
        let id = if id.is_empty() { String::new() } else { format!("\"id\":\"{id}\",") };
        format!("{{\"functionCall\":{{{id}\"name\":\"get_weather\",\"args\":{{\"city\":\"Paris\"}}}}}}")
    };
    let chunk = format!(
        "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{},{},{}],\"role\":\"model\"}},\"finishReason\":\"STOP\"}}]}}\r\n\r\n",
        call("fc_1"),
        call("fc_1"),
        call("")
    );
    let server = loopback::Server::start(vec![loopback::Step::Bytes(loopback::with_length(
        200,
        "text/event-stream",
        "",
        chunk.as_bytes(),
    ))])
    .await;
    let options = StreamOptions { api_key: Some("vertex-key".into()), ..Default::default() };
    let events = collect(GoogleVertex::default().stream(&model(&server.url), context(), options)).await;
    let message = events.last().unwrap().final_message().unwrap();
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    let ids: Vec<String> = message.tool_calls().map(|c| c.id.to_string()).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], "fc_1");
    for id in &ids[1..] {
        let parts: Vec<&str> = id.split('_').collect();
        assert_eq!(parts[..2], ["get", "weather"], "{id}");
        assert!(parts[2].len() == 13 && parts[2].bytes().all(|b| b.is_ascii_digit()), "{id}");
        assert!(parts[3].parse::<u64>().is_ok(), "{id}");
    }
    assert_ne!(ids[1], ids[2]);
}

#[cfg(not(feature = "vertex"))]
#[tokio::test]
async fn adc_without_the_vertex_feature_is_an_error_that_says_so() {
    let options = StreamOptions {
        api_key: None,
        env: env(&[("GOOGLE_CLOUD_PROJECT", "p".to_owned()), ("GOOGLE_CLOUD_LOCATION", "us-central1".to_owned())]),
        ..Default::default()
    };
    let events = collect(GoogleVertex::default().stream(&model("http://127.0.0.1:9"), context(), options)).await;
    assert_eq!(events.len(), 1);
    let text = events[0].final_message().unwrap().error_message.as_deref().unwrap().to_owned();
    assert!(text.contains("`vertex` feature"), "{text}");
}

#[cfg(feature = "vertex")]
mod adc {
    use super::*;

    const TOKEN: &str = "ya29.loopback-access-token-7f3a9c";
    const KEY_PEM: &str = include_str!("fixtures/TEST-ONLY-vertex-service-account-key.pem");

    fn write_file(name: &str, value: &serde_json::Value) -> String {
        let dir = std::env::temp_dir().join(format!("pi-vertex-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn service_account(url: &str, name: &str) -> String {
        write_file(
            name,
            &serde_json::json!({
                "type": "service_account",
                "project_id": "test-project",
                "private_key_id": "test-only-key",
                "private_key": KEY_PEM,
                "client_email": "pi-test@test-project.iam.gserviceaccount.com",
                "client_id": "1234567890",
                "token_uri": format!("{url}/token"),
            }),
        )
    }

    fn adc_options(path: &str) -> StreamOptions {
        StreamOptions {
            // The registry's marker for "no key, use credentials".
            api_key: Some("gcp-vertex-credentials".into()),
            env: env(&[
                ("GOOGLE_APPLICATION_CREDENTIALS", path.to_owned()),
                ("GOOGLE_CLOUD_PROJECT", "test-project".to_owned()),
                ("GOOGLE_CLOUD_LOCATION", "us-central1".to_owned()),
            ]),
            ..Default::default()
        }
    }

    fn token_json() -> String {
        format!("{{\"access_token\":\"{TOKEN}\",\"expires_in\":3599,\"token_type\":\"Bearer\"}}")
    }

    #[tokio::test]
    async fn a_service_account_token_from_its_token_uri_authorizes_the_stream() {
        let (url, seen) = serve((200, token_json()), sse_answer()).await;
        let path = service_account(&url, "sa-ok.json");
        let events = collect(GoogleVertex::default().stream(&model(&url), context(), adc_options(&path))).await;
        let last = events.last().unwrap();
        assert_eq!(last.type_name(), "done", "{:?}", last.final_message().and_then(|m| m.error_message.clone()));
        assert_eq!(last.final_message().unwrap().text(), "Hello");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen[0].line.starts_with("POST /token "), "{}", seen[0].line);
        assert!(seen[0].body.contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"));
        assert!(seen[1]
            .line
            .starts_with("POST /v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse "));
        assert_eq!(header(&seen[1], "authorization"), Some(format!("Bearer {TOKEN}").as_str()));
        assert_eq!(header(&seen[1], "x-goog-api-key"), None);
    }

    #[tokio::test]
    async fn the_token_is_in_no_error_text_or_debug() {
        let body = r#"{"error":{"code":403,"message":"Permission denied","status":"PERMISSION_DENIED"}}"#;
        let api = loopback::with_length(403, "application/json", "", body.as_bytes());
        let (url, seen) = serve((200, token_json()), api).await;
        let path = service_account(&url, "sa-denied.json");
        let adapter = GoogleVertex::default();
        let options = adc_options(&path);
        let events = collect(adapter.stream(&model(&url), context(), options.clone())).await;
        assert_eq!(events.len(), 1);
        let message = events[0].final_message().unwrap();
        assert_eq!(message.stop_reason, StopReason::Error);
        let text = message.error_message.as_deref().unwrap().to_owned();
        assert!(text.contains("PERMISSION_DENIED"), "{text}");
        assert_eq!(header(&seen.lock().unwrap()[1], "authorization"), Some(format!("Bearer {TOKEN}").as_str()));
        for printed in [text, format!("{adapter:?}"), format!("{options:?}"), format!("{events:?}")] {
            assert!(!printed.contains(TOKEN), "{printed}");
            assert!(!printed.contains("PRIVATE KEY"), "{printed}");
        }
    }

    #[tokio::test]
    async fn a_failed_token_request_ends_before_any_api_request() {
        let (url, seen) =
            serve((400, "{\"error\":\"invalid_grant\",\"error_description\":\"Invalid JWT\"}".into()), sse_answer())
                .await;
        let path = service_account(&url, "sa-bad.json");
        let events = collect(GoogleVertex::default().stream(&model(&url), context(), adc_options(&path))).await;
        assert_eq!(events.len(), 1);
        let message = events[0].final_message().unwrap();
        assert_eq!(message.stop_reason, StopReason::Error);
        let text = message.error_message.as_deref().unwrap().to_owned();
        assert!(text.starts_with("Vertex AI credentials"), "{text}");
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        assert!(seen.lock().unwrap().iter().all(|s| s.line.starts_with("POST /token")));
    }

    #[tokio::test]
    async fn a_silent_token_server_ends_at_the_time_limit_and_cancellation_is_prompt() {
        let server = loopback::Server::start(vec![loopback::Step::Hold]).await;
        let path = service_account(&server.url, "sa-silent.json");
        let options = StreamOptions { timeout_ms: Some(300), ..adc_options(&path) };
        let events = collect(GoogleVertex::default().stream(&model(&server.url), context(), options)).await;
        assert_eq!(events.len(), 1);
        let text = events[0].final_message().unwrap().error_message.as_deref().unwrap().to_owned();
        assert_eq!(text, "Vertex AI credentials: token request timed out.");

        let cancel = CancellationToken::new();
        let options = StreamOptions { cancel: Some(cancel.clone()), ..adc_options(&path) };
        let trigger = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            cancel.cancel();
        });
        let events = collect(GoogleVertex::default().stream(&model(&server.url), context(), options)).await;
        trigger.await.unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].final_message().unwrap().stop_reason, StopReason::Aborted);
    }

    #[tokio::test]
    async fn the_token_request_goes_through_the_requests_client() {
        let (url, seen) = serve((200, token_json()), sse_answer()).await;
        let proxy = loopback::ForwardProxy::start().await;
        let path = service_account(&url, "sa-proxied.json");
        let client = pi_providers::transport::client::builder()
            .proxy(pi_providers::reqwest::Proxy::http(&proxy.url).unwrap())
            .build()
            .unwrap();
        let options =
            StreamOptions { http_client: Some(pi_providers::transport::client::handle(client)), ..adc_options(&path) };
        let events = collect(GoogleVertex::default().stream(&model(&url), context(), options)).await;
        assert_eq!(events.last().unwrap().type_name(), "done");
        assert_eq!(
            *proxy.lines.lock().unwrap(),
            [
                format!("POST {url}/token HTTP/1.1"),
                format!(
                    "POST {url}/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse HTTP/1.1"
                ),
            ]
        );
        assert_eq!(seen.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn an_authorized_user_file_refreshes_its_token() {
        let (url, seen) = serve((200, token_json()), sse_answer()).await;
        let path = write_file(
            "user.json",
            &serde_json::json!({
                "type": "authorized_user",
                "client_id": "client-1.apps.googleusercontent.com",
                "client_secret": "client-secret-9c1e",
                "refresh_token": "1//refresh-token-5b2d",
                "token_uri": format!("{url}/token"),
            }),
        );
        let events = collect(GoogleVertex::default().stream(&model(&url), context(), adc_options(&path))).await;
        assert_eq!(events.last().unwrap().type_name(), "done");
        let seen = seen.lock().unwrap().clone();
        assert!(seen[0].body.contains("grant_type=refresh_token"));
        assert!(seen[0].body.contains("refresh_token=1%2F%2Frefresh-token-5b2d"));
        assert_eq!(header(&seen[1], "authorization"), Some(format!("Bearer {TOKEN}").as_str()));
    }

    #[tokio::test]
    async fn a_missing_credentials_file_is_an_error_naming_the_variable() {
        let options = adc_options("/nonexistent/pi-vertex-test/credentials.json");
        let events = collect(GoogleVertex::default().stream(&model("http://127.0.0.1:9"), context(), options)).await;
        assert_eq!(events.len(), 1);
        let text = events[0].final_message().unwrap().error_message.as_deref().unwrap().to_owned();
        assert!(text.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{text}");
    }
}
