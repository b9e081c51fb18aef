//! The Azure and Codex Responses adapters beyond the replay cases: cancellation mid-stream,
//! the Codex token store's refresh against a loopback token endpoint (alone and through the
//! registry's key resolver), the WebSocket-to-SSE fallback diagnostic, and no secret in any
//! error text or `Debug` output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use loopback::{sse_head, with_length, Server, Step};
use pi_providers::api::openai::azure::AzureOpenAIResponses;
use pi_providers::api::openai::codex::OpenAICodexResponses;
use pi_providers::auth::codex::{self as codex_auth, CodexCredential, CodexTokenStore};
use pi_providers::{Auth, Models, Provider};
use pi_types::transcript::normalize_context;
use pi_types::{
    AssistantMessage, AssistantMessageEvent, CancellationToken, Context, Message, Model, StopReason, StreamFn,
    StreamOptions, Transport, UserMessage,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const GUARD: Duration = Duration::from_secs(20);

fn b64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// An unsigned JWT with the ChatGPT account claim (and a marker to find leaks by).
fn jwt(account: &str, marker: &str) -> String {
    let payload =
        format!(r#"{{"https://api.openai.com/auth":{{"chatgpt_account_id":"{account}"}},"marker":"{marker}"}}"#);
    format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(&payload))
}

fn model(api: &str, provider: &str, base_url: String) -> Model {
    let mut model = Model::new("gpt-5.1-codex-mini").with_api(api).with_provider(provider);
    model.base_url = base_url;
    model
}

fn context() -> pi_types::TranscriptContext {
    normalize_context(Context {
        system_prompt: Some("Be brief.".into()),
        messages: vec![Message::from(UserMessage::text("Hi"))],
        tools: None,
    })
}

async fn collect(
    adapter: &dyn StreamFn,
    model: &Model,
    options: StreamOptions,
    cancel_on_delta: Option<CancellationToken>,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let run = async {
        let mut stream = adapter.stream(model, context(), options);
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            if event.type_name() == "text_delta" {
                if let Some(cancel) = &cancel_on_delta {
                    cancel.cancel();
                }
            }
            events.push(event);
        }
        let message = stream.final_message().map(|m| (**m).clone()).expect("final message");
        (events, message)
    };
    tokio::time::timeout(GUARD, run).await.expect("hang")
}

const PARTIAL: &str = concat!(
    "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\n",
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg\"}}\n\n",
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hel\"}\n\n",
);

const COMPLETE: &str = concat!(
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg\"}}\n\n",
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hello\"}\n\n",
    "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hello\"}]}}\n\n",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1,\"total_tokens\":4}}}\n\n",
);

fn adapters(url: &str) -> Vec<(&'static str, Box<dyn StreamFn>, Model, String)> {
    vec![
        (
            "azure",
            Box::new(AzureOpenAIResponses::default().with_base_url(format!("{url}/openai/v1"))),
            model("azure-openai-responses", "azure", String::new()),
            "azure-secret-key-0001".to_owned(),
        ),
        (
            "codex",
            Box::new(OpenAICodexResponses::default()),
            model("openai-codex-responses", "openai-codex", format!("{url}/backend-api")),
            jwt("acct-1", "codex-secret-token"),
        ),
    ]
}

#[tokio::test]
async fn cancellation_mid_stream_ends_with_one_aborted_error_keeping_the_text() {
    let mut first = sse_head();
    first.extend_from_slice(PARTIAL.as_bytes());
    let server = Server::start(vec![Step::Bytes(first), Step::Hold]).await;
    for (name, adapter, model, key) in adapters(&server.url) {
        let cancel = CancellationToken::new();
        let options = StreamOptions {
            api_key: Some(key),
            cancel: Some(cancel.clone()),
            transport: Some(Transport::Sse),
            ..Default::default()
        };
        let (events, message) = collect(adapter.as_ref(), &model, options, Some(cancel)).await;
        let terminals: Vec<_> = events.iter().filter(|e| e.final_message().is_some()).collect();
        assert_eq!(terminals.len(), 1, "{name}");
        assert_eq!(events.last().unwrap().type_name(), "error", "{name}");
        assert_eq!(message.stop_reason, StopReason::Aborted, "{name}");
        assert_eq!(message.text(), "Hel", "{name}");
        assert_eq!(events.first().unwrap().type_name(), "start", "{name}");
    }
    assert!(server.released(2).await, "both connections let go");
}

#[tokio::test]
async fn no_key_or_token_in_errors_or_debug() {
    let body = br#"{"error":{"message":"bad key","code":"invalid_api_key"}}"#;
    let server = Server::start(vec![Step::Bytes(with_length(401, "application/json", "", body))]).await;
    for (name, adapter, model, key) in adapters(&server.url) {
        let options =
            StreamOptions { api_key: Some(key.clone()), transport: Some(Transport::Sse), ..Default::default() };
        let (_, message) = collect(adapter.as_ref(), &model, options.clone(), None).await;
        let error = message.error_message.clone().unwrap_or_default();
        assert!(!error.is_empty(), "{name}");
        assert!(!error.contains(&key) && !error.contains("secret"), "{name}: {error}");
        assert!(!format!("{options:?}").contains(&key), "{name}");
        // Unreachable server: the connection error does not carry the key either.
        let dead = match name {
            "azure" => model.clone(),
            _ => self::model("openai-codex-responses", "openai-codex", "http://127.0.0.1:9".into()),
        };
        let adapter: Box<dyn StreamFn> = match name {
            "azure" => Box::new(AzureOpenAIResponses::default().with_base_url("http://127.0.0.1:9")),
            _ => Box::new(OpenAICodexResponses::default()),
        };
        let (_, message) = collect(adapter.as_ref(), &dead, options, None).await;
        let error = message.error_message.unwrap_or_default();
        assert!(!error.contains(&key) && !error.contains("secret"), "{name}: {error}");
    }
    // A token without the account claim fails before any request, without echoing the token.
    let before = server.requests.load(Ordering::SeqCst);
    let token = "header.bm90LWpzb24.secret-signature";
    let options = StreamOptions { api_key: Some(token.into()), transport: Some(Transport::Sse), ..Default::default() };
    let codex = model("openai-codex-responses", "openai-codex", format!("{}/backend-api", server.url));
    let (events, message) = collect(&OpenAICodexResponses::default(), &codex, options, None).await;
    assert_eq!(events.len(), 1);
    assert_eq!(message.error_message.as_deref(), Some("Failed to extract accountId from token"));
    assert_eq!(server.requests.load(Ordering::SeqCst), before);
    let credential = CodexCredential {
        access: jwt("a", "secret-access"),
        refresh: "secret-refresh".into(),
        expires: 0,
        account_id: "a".into(),
    };
    assert!(!format!("{credential:?}").contains("secret"));
}

#[tokio::test]
async fn a_websocket_preference_falls_back_to_sse_with_one_diagnostic_per_session() {
    let mut answer = sse_head();
    answer.extend_from_slice(COMPLETE.as_bytes());
    let server = Server::start(vec![Step::Bytes(answer)]).await;
    let codex = model("openai-codex-responses", "openai-codex", format!("{}/backend-api", server.url));
    let key = jwt("acct-1", "m");
    let run = |transport: Option<Transport>, session: Option<&str>| {
        let options = StreamOptions {
            api_key: Some(key.clone()),
            transport,
            session_id: session.map(str::to_owned),
            ..Default::default()
        };
        let codex = codex.clone();
        async move { collect(&OpenAICodexResponses::default(), &codex, options, None).await.1 }
    };
    let message = run(None, None).await;
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.text(), "Hello");
    let diagnostics = message.diagnostics.expect("a transport diagnostic");
    assert_eq!(diagnostics.len(), 1);
    let diagnostic = serde_json::to_value(&diagnostics[0]).unwrap();
    assert_eq!(diagnostic["type"], "provider_transport_failure");
    // The server answers the upgrade with its event stream's 200: the socket is refused.
    assert_eq!(diagnostic["error"]["message"], "Unexpected server response: 200");
    assert_eq!(diagnostic["details"]["configuredTransport"], "auto");
    assert_eq!(diagnostic["details"]["fallbackTransport"], "sse");
    assert_eq!(diagnostic["details"]["phase"], "before_message_stream_start");
    assert!(diagnostic["details"]["requestBytes"].as_u64().unwrap() > 0);

    assert!(run(Some(Transport::Sse), None).await.diagnostics.is_none());
    let first = run(Some(Transport::Websocket), Some("ws-session-1")).await;
    assert_eq!(first.diagnostics.map(|d| d.len()), Some(1));
    let second = run(Some(Transport::WebsocketCached), Some("ws-session-1")).await;
    assert!(second.diagnostics.is_none(), "the session already fell back");
    assert_eq!(second.text(), "Hello");
}

/// A token endpoint on loopback: answers each request with the next of `answers` and keeps
/// the request bodies.
struct TokenEndpoint {
    url: String,
    bodies: Arc<Mutex<Vec<String>>>,
}

async fn token_endpoint(answers: Vec<(u16, String)>) -> TokenEndpoint {
    sequence_server(
        answers.into_iter().map(|(status, body)| (status, "content-type: application/json\r\n", body)).collect(),
    )
    .await
}

/// Answers the n-th request with the n-th `(status, header lines, body)`.
async fn sequence_server(answers: Vec<(u16, &'static str, String)>) -> TokenEndpoint {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/oauth/token", listener.local_addr().unwrap());
    let bodies: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = Arc::clone(&bodies);
    tokio::spawn(async move {
        for (status, headers, body) in answers {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 4096];
            let request = loop {
                let n = socket.read(&mut chunk).await.unwrap();
                buffer.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buffer).into_owned();
                if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    if rest.len() >= length || n == 0 {
                        break text;
                    }
                }
            };
            kept.lock().unwrap().push(request);
            let answer = format!(
                "HTTP/1.1 {status} X\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            socket.write_all(answer.as_bytes()).await.unwrap();
            let _ = socket.shutdown().await;
        }
    });
    TokenEndpoint { url, bodies }
}

fn temp_auth_file(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pi-codex-auth-{tag}-{}-{}", std::process::id(), pi_types::now_ms()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("auth.json")
}

fn store_credential(path: &std::path::Path, access: &str, refresh: &str, expires: u64) {
    let json = serde_json::json!({
        "anthropic": {"type": "api_key", "key": "kept"},
        "openai-codex": {"type": "oauth", "access": access, "refresh": refresh, "expires": expires, "accountId": "acct-old"},
    });
    std::fs::write(path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
}

#[tokio::test]
async fn an_expiring_token_is_refreshed_stored_and_used_once() {
    let fresh = jwt("acct-new", "fresh");
    let answer =
        serde_json::json!({"access_token": fresh, "refresh_token": "refresh-2", "expires_in": 3600}).to_string();
    let endpoint = token_endpoint(vec![(200, answer)]).await;
    let path = temp_auth_file("refresh");
    // Four minutes left: inside the five-minute window, so it is refreshed.
    store_credential(&path, &jwt("acct-old", "old"), "refresh-1", pi_types::now_ms() + 4 * 60 * 1000);
    let store = Arc::new(CodexTokenStore::new(&path).with_token_url(endpoint.url.clone()));

    // Concurrent requests refresh once.
    let (a, b) = tokio::join!(store.access_token(), store.access_token());
    assert_eq!(a.unwrap().as_deref(), Some(fresh.as_str()));
    assert_eq!(b.unwrap().as_deref(), Some(fresh.as_str()));
    let bodies = endpoint.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    let request = &bodies[0];
    assert!(request.starts_with("POST /oauth/token "), "{request}");
    assert!(request.to_lowercase().contains("content-type: application/x-www-form-urlencoded"), "{request}");
    assert!(
        request.ends_with(&format!(
            "grant_type=refresh_token&refresh_token=refresh-1&client_id={}",
            codex_auth::CLIENT_ID
        )),
        "{request}"
    );

    let stored = store.read().unwrap().unwrap();
    assert_eq!(stored.access, fresh);
    assert_eq!(stored.refresh, "refresh-2");
    assert_eq!(stored.account_id, "acct-new");
    let now = pi_types::now_ms();
    assert!(stored.expires > now + 3500 * 1000 && stored.expires <= now + 3600 * 1000);
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(file["anthropic"]["key"], "kept", "other entries are kept");
    assert_eq!(file["openai-codex"]["type"], "oauth");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // Valid now: no further request.
    assert_eq!(store.access_token().await.unwrap().as_deref(), Some(fresh.as_str()));
    assert_eq!(endpoint.bodies.lock().unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn a_failed_refresh_reports_the_endpoint_without_tokens() {
    let endpoint = token_endpoint(vec![
        (400, r#"{"error":"invalid_grant"}"#.to_owned()),
        (200, serde_json::json!({"access_token": "secret-access-only", "expires_in": 10}).to_string()),
    ])
    .await;
    let path = temp_auth_file("failed");
    store_credential(&path, &jwt("acct-old", "old"), "secret-refresh", 1);
    let store = CodexTokenStore::new(&path).with_token_url(endpoint.url.clone());
    let error = store.access_token().await.unwrap_err().to_string();
    assert_eq!(
        error,
        r#"OAuth refresh failed for openai-codex: OpenAI Codex token refresh failed (400): {"error":"invalid_grant"}"#
    );
    let error = store.access_token().await.unwrap_err().to_string();
    assert_eq!(
        error,
        "OAuth refresh failed for openai-codex: OpenAI Codex token refresh response missing fields: refresh_token"
    );
    assert!(!error.contains("secret"));
    // Nothing stored: the old credential stays.
    assert_eq!(store.read().unwrap().unwrap().refresh, "secret-refresh");
    // No file at all: no token, no error.
    let missing = CodexTokenStore::new(path.with_file_name("absent.json"));
    assert_eq!(missing.access_token().await.unwrap(), None);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn the_registry_resolver_refreshes_and_the_adapter_sends_the_new_token() {
    let fresh = jwt("acct-registry", "fresh");
    let answer = serde_json::json!({"access_token": fresh, "refresh_token": "r2", "expires_in": 3600}).to_string();
    let endpoint = token_endpoint(vec![(200, answer)]).await;
    let mut sse = sse_head();
    sse.extend_from_slice(COMPLETE.as_bytes());
    let server = Server::start(vec![Step::Bytes(sse)]).await;
    let path = temp_auth_file("registry");
    store_credential(&path, &jwt("acct-old", "old"), "r1", 0);
    let store = Arc::new(CodexTokenStore::new(&path).with_token_url(endpoint.url.clone()));
    let codex = model("openai-codex-responses", "openai-codex", format!("{}/backend-api", server.url));
    // The registry's client (through a counting proxy) carries the refresh and the stream.
    let proxy = loopback::ForwardProxy::start().await;
    let client = pi_providers::transport::client::builder()
        .proxy(pi_providers::reqwest::Proxy::http(&proxy.url).unwrap())
        .build()
        .unwrap();
    let models = Models::new().with_http_client(client);
    models.set_provider(
        Provider::new("openai-codex")
            .with_auth(Auth::Resolver(store.resolver()))
            .with_model(codex.clone())
            .with_http_apis(),
    );
    let options = StreamOptions { transport: Some(Transport::Sse), ..Default::default() };
    let context = Context { messages: vec![Message::from(UserMessage::text("Hi"))], ..Default::default() };
    let reply = tokio::time::timeout(GUARD, models.complete(&codex, context, options)).await.unwrap().unwrap();
    assert_eq!(reply.stop_reason, StopReason::Stop, "{:?}", reply.error_message);
    assert_eq!(reply.text(), "Hello");
    assert_eq!(
        *proxy.lines.lock().unwrap(),
        [
            format!("POST {} HTTP/1.1", endpoint.url),
            format!("POST {}/backend-api/codex/responses HTTP/1.1", server.url)
        ]
    );
    let heads = server.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1);
    assert!(heads[0].starts_with("post /backend-api/codex/responses "), "{}", heads[0]);
    assert!(heads[0].contains(&format!("authorization: bearer {}", fresh.to_lowercase())));
    assert!(heads[0].contains("chatgpt-account-id: acct-registry"));
    assert!(heads[0].contains("openai-beta: responses=experimental"));
    assert!(heads[0].contains("originator: pi"));
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn azure_through_the_registry_takes_key_and_endpoint_from_the_request_env() {
    let mut sse = sse_head();
    sse.extend_from_slice(COMPLETE.as_bytes());
    let server = Server::start(vec![Step::Bytes(sse)]).await;
    let azure = model("azure-openai-responses", "azure", String::new());
    let models = Models::new();
    models.set_provider(
        Provider::new("azure")
            .with_auth(Auth::Env(vec!["AZURE_OPENAI_API_KEY".into()]))
            .with_model(azure.clone())
            .with_http_apis(),
    );
    let env = [
        ("AZURE_OPENAI_API_KEY", "azure-env-key"),
        ("AZURE_OPENAI_BASE_URL", &format!("{}/openai/v1/", server.url)),
        ("AZURE_OPENAI_API_VERSION", "2025-04-01-preview"),
        ("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "gpt-5.1-codex-mini=my-deployment"),
    ];
    let options = StreamOptions {
        env: Some(Arc::new(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())),
        ..Default::default()
    };
    let context = Context { messages: vec![Message::from(UserMessage::text("Hi"))], ..Default::default() };
    let reply = tokio::time::timeout(GUARD, models.complete(&azure, context, options)).await.unwrap().unwrap();
    assert_eq!(reply.stop_reason, StopReason::Stop, "{:?}", reply.error_message);
    assert_eq!(reply.text(), "Hello");
    let heads = server.heads.lock().unwrap().clone();
    assert!(heads[0].starts_with("post /openai/v1/responses?api-version=2025-04-01-preview "), "{}", heads[0]);
    assert!(heads[0].contains("api-key: azure-env-key"), "{}", heads[0]);
    assert!(!heads[0].contains("authorization:"), "{}", heads[0]);
}

#[tokio::test]
async fn codex_retries_as_its_reference_loop_does() {
    let codex = |url: &str| model("openai-codex-responses", "openai-codex", format!("{url}/backend-api"));
    let options = |retries: u32| StreamOptions {
        api_key: Some(jwt("acct-1", "m")),
        transport: Some(Transport::Sse),
        max_retries: Some(retries),
        ..Default::default()
    };
    let sse = "content-type: text/event-stream\r\n";
    // A 503 with a server delay, then the answer.
    let server = sequence_server(vec![
        (503, "content-type: application/json\r\nretry-after-ms: 20\r\n", r#"{"error":{"message":"busy"}}"#.into()),
        (200, sse, COMPLETE.to_owned()),
    ])
    .await;
    let url = server.url.trim_end_matches("/oauth/token").to_owned();
    let (_, message) = collect(&OpenAICodexResponses::default(), &codex(&url), options(1), None).await;
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(server.bodies.lock().unwrap().len(), 2);

    // A usage limit outside a retryable status is not retried ...
    let limit = r#"{"error":{"code":"usage_not_included","plan_type":"PRO"}}"#;
    let server = sequence_server(vec![(403, "content-type: application/json\r\n", limit.into())]).await;
    let url = server.url.trim_end_matches("/oauth/token").to_owned();
    let (_, message) = collect(&OpenAICodexResponses::default(), &codex(&url), options(3), None).await;
    assert_eq!(message.error_message.as_deref(), Some("You have hit your ChatGPT usage limit (pro plan)."));
    assert_eq!(server.bodies.lock().unwrap().len(), 1);

    // ... nor is any other non-retryable status (the reference's own catch retries it: a bug).
    let server = sequence_server(vec![
        (400, "content-type: application/json\r\n", r#"{"error":{"message":"bad"}}"#.into()),
        (200, sse, COMPLETE.to_owned()),
    ])
    .await;
    let url = server.url.trim_end_matches("/oauth/token").to_owned();
    let (_, message) = collect(&OpenAICodexResponses::default(), &codex(&url), options(1), None).await;
    assert_eq!(message.error_message.as_deref(), Some("bad"));
    assert_eq!(server.bodies.lock().unwrap().len(), 1);

    // A retryable status without a server delay waits 1 s, then retries.
    let server = sequence_server(vec![
        (502, "content-type: text/plain\r\n", "upstream connect error".into()),
        (200, sse, COMPLETE.to_owned()),
    ])
    .await;
    let url = server.url.trim_end_matches("/oauth/token").to_owned();
    let started = std::time::Instant::now();
    let (_, message) = collect(&OpenAICodexResponses::default(), &codex(&url), options(1), None).await;
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert!(started.elapsed() >= Duration::from_millis(1000));
    assert_eq!(server.bodies.lock().unwrap().len(), 2);

    // A delay beyond the cap ends at once with the reference's text.
    let server = sequence_server(vec![(503, "retry-after: 3600\r\n", r#"{"error":{"message":"later"}}"#.into())]).await;
    let url = server.url.trim_end_matches("/oauth/token").to_owned();
    let (_, message) = collect(&OpenAICodexResponses::default(), &codex(&url), options(1), None).await;
    assert_eq!(message.error_message.as_deref(), Some("Server requested 3600s retry delay (max: 60s)"));
}

/// The device-code sign-in: code, one "not yet", the grant, the exchange; what each request
/// carried.
#[tokio::test]
async fn device_login_polls_until_granted_then_exchanges_the_code() {
    use pi_providers::auth::codex_login::DeviceLogin;
    let token = jwt("acct-login", "login");
    let server = sequence_server(vec![
        (
            200,
            "content-type: application/json\r\n",
            r#"{"device_auth_id":"dev-1","user_code":"ABCD-1234","interval":"0"}"#.into(),
        ),
        (403, "", String::new()),
        (
            200,
            "content-type: application/json\r\n",
            r#"{"authorization_code":"code-1","code_verifier":"ver-1"}"#.into(),
        ),
        (
            200,
            "content-type: application/json\r\n",
            format!(r#"{{"access_token":"{token}","refresh_token":"refresh-1","expires_in":3600}}"#),
        ),
    ])
    .await;
    let base = server.url.trim_end_matches("/oauth/token").to_owned();
    let login = DeviceLogin::default().with_base_url(&base);
    let code = login.start().await.unwrap();
    assert_eq!(code.user_code, "ABCD-1234");
    assert_eq!(code.verification_uri, format!("{base}/codex/device"));
    assert_eq!(code.interval, Duration::from_secs(1), "at least one second between polls");
    let credential = login.finish(&code, &CancellationToken::new()).await.unwrap();
    assert_eq!((credential.access.as_str(), credential.refresh.as_str()), (token.as_str(), "refresh-1"));
    assert_eq!(credential.account_id, "acct-login");
    assert!(credential.expires > pi_types::now_ms() + 3_500_000);
    let requests = server.bodies.lock().unwrap().clone();
    let lines: Vec<&str> = requests.iter().map(|r| r.lines().next().unwrap_or("")).collect();
    assert_eq!(
        lines,
        [
            "POST /api/accounts/deviceauth/usercode HTTP/1.1",
            "POST /api/accounts/deviceauth/token HTTP/1.1",
            "POST /api/accounts/deviceauth/token HTTP/1.1",
            "POST /oauth/token HTTP/1.1"
        ]
    );
    assert!(requests[0].ends_with(r#"{"client_id":"app_EMoamEEZ73f0CkXaXp7hrann"}"#), "{}", requests[0]);
    assert!(requests[1].ends_with(r#"{"device_auth_id":"dev-1","user_code":"ABCD-1234"}"#), "{}", requests[1]);
    let redirect = format!("{base}/deviceauth/callback").replace(':', "%3A").replace('/', "%2F");
    assert!(
        requests[3].ends_with(&format!(
            "grant_type=authorization_code&client_id=app_EMoamEEZ73f0CkXaXp7hrann&code=code-1&code_verifier=ver-1&redirect_uri={redirect}"
        )),
        "{}",
        requests[3]
    );
}

#[tokio::test]
async fn device_login_failures_are_errors_without_secrets() {
    use pi_providers::auth::codex_login::DeviceLogin;
    // A host without device login.
    let server = sequence_server(vec![(404, "", String::new())]).await;
    let login = DeviceLogin::default().with_base_url(server.url.trim_end_matches("/oauth/token"));
    assert_eq!(
        login.start().await.err().as_deref(),
        Some("OpenAI Codex device code login is not enabled for this server. Use browser login or verify the server URL.")
    );
    // A refused grant quotes the host's answer; a cancelled wait says so.
    let json = "content-type: application/json\r\n";
    let server = sequence_server(vec![
        (200, json, r#"{"device_auth_id":"dev-2","user_code":"WXYZ","interval":1}"#.into()),
        (400, json, r#"{"error":{"code":"access_denied"}}"#.into()),
        (200, json, r#"{"device_auth_id":"dev-3","user_code":"QRST","interval":1}"#.into()),
        (403, "", String::new()),
    ])
    .await;
    let login = DeviceLogin::default().with_base_url(server.url.trim_end_matches("/oauth/token"));
    let code = login.start().await.unwrap();
    assert_eq!(
        login.finish(&code, &CancellationToken::new()).await.err().as_deref(),
        Some(r#"OpenAI Codex device auth failed with status 400: {"error":{"code":"access_denied"}}"#)
    );
    let code = login.start().await.unwrap();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = std::time::Instant::now();
    assert_eq!(login.finish(&code, &cancel).await.err().as_deref(), Some("Login cancelled"));
    assert!(started.elapsed() < Duration::from_secs(1), "cancelled during the wait, not after it");
}

#[tokio::test]
async fn device_login_times_out_with_the_slow_down_hint() {
    use pi_providers::auth::codex_login::DeviceLogin;
    let json = "content-type: application/json\r\n";
    let server = sequence_server(vec![
        (200, json, r#"{"device_auth_id":"dev-4","user_code":"SLOW","interval":1}"#.into()),
        (400, json, r#"{"error":"slow_down"}"#.into()),
    ])
    .await;
    let login = DeviceLogin::default()
        .with_base_url(server.url.trim_end_matches("/oauth/token"))
        .with_timeout(Duration::from_millis(300));
    let code = login.start().await.unwrap();
    let error = login.finish(&code, &CancellationToken::new()).await.err().unwrap_or_default();
    assert!(error.starts_with("Device flow timed out after one or more slow_down responses."), "{error}");
}
