//! The run path with stored credentials: a registry holding a credential store sends a
//! request with the stored credential (refreshed before expiry, and once more after a 401),
//! else the environment, in the reference's precedence. The provider and its token endpoint
//! are a loopback stand-in that answers 401 to any token but the refreshed one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use pi_providers::auth::anthropic::AnthropicOAuth;
use pi_providers::auth::{
    ApiKeyCredential, Authenticator, Credential, CredentialStore, FileCredentialStore, InMemoryCredentialStore,
    OAuthCredential, Secret,
};
use pi_providers::Models;
use pi_types::{Context, Message, Model, StopReason, StreamOptions, UserMessage};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const STALE: &str = "sk-ant-oat01-stale-access-token";
const FRESH: &str = "sk-ant-oat01-fresh-access-token";
const REFRESH: &str = "refresh-token-one";
const NEW_REFRESH: &str = "refresh-token-two";

/// What the stand-in saw: per request, the path, the credential headers and the body.
type Seen = Arc<Mutex<Vec<Value>>>;

struct Provider {
    origin: String,
    seen: Seen,
}

const SSE: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

impl Provider {
    /// The stand-in: `/v1/messages` answers 200 to `FRESH` and to any API key but `bad-key`, 401
    /// otherwise; `/v1/oauth/token` grants `FRESH` for `REFRESH` (`refresh_ok`), else 400.
    async fn start(refresh_ok: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let seen: Seen = Arc::default();
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let mut data = Vec::new();
                    let mut chunk = [0u8; 8192];
                    let (head, body) = loop {
                        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&data[..end]).into_owned();
                            let length = head
                                .lines()
                                .find_map(|l| {
                                    let (name, value) = l.split_once(':')?;
                                    name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
                                })
                                .unwrap_or(0usize);
                            if data.len() >= end + 4 + length {
                                break (head, String::from_utf8_lossy(&data[end + 4..end + 4 + length]).into_owned());
                            }
                        }
                        let n = socket.read(&mut chunk).await.unwrap();
                        if n == 0 {
                            return;
                        }
                        data.extend_from_slice(&chunk[..n]);
                    };
                    // The path without its query (the Anthropic SDK adds `?beta=true`).
                    let target = head.split_whitespace().nth(1).unwrap_or_default();
                    let path = target.split('?').next().unwrap_or_default().to_owned();
                    let header = |name: &str| {
                        head.lines().find_map(|l| {
                            let (n, v) = l.split_once(':')?;
                            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                        })
                    };
                    let authorization = header("authorization");
                    let api_key = header("x-api-key");
                    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    let answer = if path == "/v1/oauth/token" {
                        let granted = refresh_ok && body["refresh_token"] == REFRESH;
                        record
                            .lock()
                            .unwrap()
                            .push(json!({"path": path, "grant": body["grant_type"], "refresh": body["refresh_token"]}));
                        if granted {
                            let json = json!({"access_token": FRESH, "refresh_token": NEW_REFRESH, "expires_in": 3600})
                                .to_string();
                            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}", json.len())
                        } else {
                            // An error answer that echoes what it was sent, as some servers do.
                            let json =
                                json!({"error": "invalid_grant", "refresh_token": body["refresh_token"]}).to_string();
                            format!("HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}", json.len())
                        }
                    } else {
                        record
                            .lock()
                            .unwrap()
                            .push(json!({"path": path, "authorization": authorization, "x-api-key": api_key}));
                        let accepted = authorization.as_deref() == Some(&format!("Bearer {FRESH}"))
                            || api_key.as_deref().is_some_and(|key| key != "bad-key");
                        if accepted {
                            format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{SSE}"
                            )
                        } else {
                            let json = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
                            format!("HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}", json.len())
                        }
                    };
                    let _ = socket.write_all(answer.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Self { origin, seen }
    }

    fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    fn model(&self) -> Model {
        let mut model = pi_providers::catalog::model("anthropic", "claude-haiku-4-5").unwrap();
        model.base_url = self.origin.clone();
        model
    }

    fn flow(&self) -> Arc<AnthropicOAuth> {
        Arc::new(
            AnthropicOAuth::default()
                .with_endpoints(format!("{}/oauth/authorize", self.origin), format!("{}/v1/oauth/token", self.origin)),
        )
    }
}

fn now_ms() -> u64 {
    pi_types::now_ms()
}

fn signed_in(expires: u64) -> Credential {
    Credential::OAuth(OAuthCredential::new(STALE, REFRESH, expires))
}

/// A registry of the built-in providers whose stored credentials are in `store`, signing in to
/// anthropic through the stand-in.
fn registry(provider: &Provider, store: Arc<dyn CredentialStore>) -> Models {
    let authenticator = Authenticator::new(store).with_flow("anthropic", provider.flow());
    Models::with_builtins().with_authenticator(Arc::new(authenticator))
}

fn context() -> Context {
    Context { messages: vec![Message::from(UserMessage::text("hi"))], ..Context::default() }
}

/// Options whose environment is `env` only (the process environment is not consulted for
/// `ANTHROPIC_*` names these tests set), with a short time limit.
fn options(env: &[(&str, &str)]) -> StreamOptions {
    let env: IndexMap<String, String> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    StreamOptions { env: Some(Arc::new(env)), timeout_ms: Some(10_000), ..StreamOptions::default() }
}

async fn store_with(credential: Credential) -> Arc<InMemoryCredentialStore> {
    let store = Arc::new(InMemoryCredentialStore::new());
    store.modify("anthropic", Box::new(move |_| Box::pin(async move { Ok(Some(credential)) }))).await.unwrap();
    store
}

fn text_of(message: &pi_types::AssistantMessage) -> String {
    serde_json::to_value(&message.content).unwrap().to_string()
}

/// Nothing the caller can see holds a token.
fn assert_no_token(text: &str) {
    for token in [STALE, FRESH, REFRESH, NEW_REFRESH, "sk-stored-key", "sk-env-key"] {
        assert!(!text.contains(token), "a token leaked: {text}");
    }
}

#[tokio::test]
async fn a_401_refreshes_the_token_and_sends_once_more() {
    let provider = Provider::start(true).await;
    // Valid for an hour by its stated expiry: no refresh before sending.
    let store = store_with(signed_in(now_ms() + 3_600_000)).await;
    let models = registry(&provider, store.clone());
    let message = models.complete(&provider.model(), context(), options(&[])).await.unwrap();
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert!(text_of(&message).contains("hello"));
    assert_eq!(
        provider.seen(),
        [
            json!({"path": "/v1/messages", "authorization": format!("Bearer {STALE}"), "x-api-key": null}),
            json!({"path": "/v1/oauth/token", "grant": "refresh_token", "refresh": REFRESH}),
            json!({"path": "/v1/messages", "authorization": format!("Bearer {FRESH}"), "x-api-key": null}),
        ]
    );
    let Some(Credential::OAuth(stored)) = store.read("anthropic").unwrap() else { panic!("still signed in") };
    assert_eq!((stored.access.expose(), stored.refresh.expose()), (FRESH, NEW_REFRESH));
    assert_no_token(&format!("{message:?} {stored:?} {models:?}"));
}

#[tokio::test]
async fn the_event_sequence_after_a_401_is_one_response() {
    use futures::StreamExt;
    let provider = Provider::start(true).await;
    let store = store_with(signed_in(now_ms() + 3_600_000)).await;
    let models = registry(&provider, store);
    let stream = models.stream(&provider.model(), context(), options(&[]));
    let kinds: Vec<String> = stream
        .map(|event| serde_json::to_value(&event).unwrap()["type"].as_str().unwrap_or_default().to_owned())
        .collect()
        .await;
    assert_eq!(kinds, ["start", "text_start", "text_delta", "text_end", "done"]);
}

#[tokio::test]
async fn a_token_that_expires_within_five_minutes_is_refreshed_before_sending() {
    let provider = Provider::start(true).await;
    let store = store_with(signed_in(now_ms() + 60_000)).await;
    let models = registry(&provider, store);
    let message = models.complete(&provider.model(), context(), options(&[])).await.unwrap();
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    assert_eq!(
        provider.seen(),
        [
            json!({"path": "/v1/oauth/token", "grant": "refresh_token", "refresh": REFRESH}),
            json!({"path": "/v1/messages", "authorization": format!("Bearer {FRESH}"), "x-api-key": null}),
        ]
    );
}

#[tokio::test]
async fn a_failed_refresh_after_a_401_keeps_the_credential_and_reports_the_401() {
    let provider = Provider::start(false).await;
    let store = store_with(signed_in(now_ms() + 3_600_000)).await;
    let models = registry(&provider, store.clone());
    let message = models.complete(&provider.model(), context(), options(&[])).await.unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
    let error = message.error_message.clone().unwrap_or_default();
    assert!(error.contains("401"), "{error}");
    assert_eq!(provider.seen().len(), 2, "one request, one refresh, no second request: {:?}", provider.seen());
    let Some(Credential::OAuth(stored)) = store.read("anthropic").unwrap() else { panic!("still signed in") };
    assert_eq!(stored.access.expose(), STALE);
    assert_no_token(&format!("{message:?}"));
}

#[tokio::test]
async fn a_failed_refresh_before_sending_is_an_error_without_a_request_or_a_token() {
    let provider = Provider::start(false).await;
    let store = store_with(signed_in(now_ms() + 1_000)).await;
    let models = registry(&provider, store);
    let message = models.complete(&provider.model(), context(), options(&[])).await.unwrap();
    assert_eq!(message.stop_reason, StopReason::Error);
    let error = message.error_message.clone().unwrap_or_default();
    assert!(error.starts_with("OAuth refresh failed for anthropic: "), "{error}");
    assert_eq!(provider.seen().len(), 1, "the refresh only: {:?}", provider.seen());
    assert_no_token(&error);
}

/// Which key the stand-in saw on the one messages request of a run.
async fn key_sent(provider: &Provider, models: &Models, options: StreamOptions) -> (Option<String>, Option<String>) {
    let message = models.complete(&provider.model(), context(), options).await.unwrap();
    let seen = provider.seen();
    let last = seen.iter().rev().find(|r| r["path"] == "/v1/messages");
    let error = message.error_message.clone().map(|e| e.to_string());
    (last.and_then(|r| r["x-api-key"].as_str().map(str::to_owned)), error)
}

#[tokio::test]
async fn a_stored_api_key_wins_over_the_environment() {
    let provider = Provider::start(true).await;
    let stored = Credential::ApiKey(ApiKeyCredential { key: Some(Secret::new("sk-stored-key")), env: None });
    let models = registry(&provider, store_with(stored).await);
    let (key, error) = key_sent(&provider, &models, options(&[("ANTHROPIC_API_KEY", "sk-env-key")])).await;
    assert_eq!((key.as_deref(), error), (Some("sk-stored-key"), None));
}

#[tokio::test]
async fn nothing_stored_takes_the_environment() {
    let provider = Provider::start(true).await;
    let models = registry(&provider, Arc::new(InMemoryCredentialStore::new()));
    let (key, error) = key_sent(&provider, &models, options(&[("ANTHROPIC_API_KEY", "sk-env-key")])).await;
    assert_eq!((key.as_deref(), error), (Some("sk-env-key"), None));
}

#[tokio::test]
async fn a_key_in_the_request_wins_over_the_stored_credential() {
    let provider = Provider::start(true).await;
    let models = registry(&provider, store_with(signed_in(now_ms() + 3_600_000)).await);
    let request = StreamOptions { api_key: Some("sk-request-key".into()), ..options(&[]) };
    let (key, error) = key_sent(&provider, &models, request).await;
    assert_eq!((key.as_deref(), error), (Some("sk-request-key"), None));
    assert_eq!(provider.seen().len(), 1, "no refresh: {:?}", provider.seen());
}

#[tokio::test]
async fn a_stored_entry_without_a_key_keeps_its_env_and_takes_the_key_from_the_environment() {
    let provider = Provider::start(true).await;
    let env = BTreeMap::from([("ANTHROPIC_API_KEY".to_owned(), "sk-env-key".to_owned())]);
    let stored = Credential::ApiKey(ApiKeyCredential { key: None, env: Some(env) });
    let models = registry(&provider, store_with(stored).await);
    // The stored env is under the request's: the request's value wins where both have one.
    let (key, error) = key_sent(&provider, &models, options(&[])).await;
    assert_eq!((key.as_deref(), error), (Some("sk-env-key"), None));
    let (key, _) = key_sent(&provider, &models, options(&[("ANTHROPIC_API_KEY", "sk-request-env")])).await;
    assert_eq!(key.as_deref(), Some("sk-request-env"));
}

#[tokio::test]
async fn a_sign_in_without_its_flow_leaves_the_provider_unconfigured_with_no_environment_fallback() {
    let provider = Provider::start(true).await;
    let store = store_with(signed_in(now_ms() + 3_600_000)).await;
    let models = Models::with_builtins().with_authenticator(Arc::new(Authenticator::new(store)));
    let (key, error) = key_sent(&provider, &models, options(&[("ANTHROPIC_API_KEY", "sk-env-key")])).await;
    assert_eq!((key, error.as_deref()), (None, Some("Provider is not configured: anthropic")));
    assert!(provider.seen().is_empty());
}

#[tokio::test]
async fn a_file_store_is_read_per_request_so_a_login_elsewhere_is_seen() {
    let provider = Provider::start(true).await;
    let dir = std::env::temp_dir().join(format!("pi-run-auth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Arc::new(FileCredentialStore::new(dir.join("auth.json")));
    let models = registry(&provider, store);
    let (key, _) = key_sent(&provider, &models, options(&[("ANTHROPIC_API_KEY", "sk-env-key")])).await;
    assert_eq!(key.as_deref(), Some("sk-env-key"));
    // Another process (here: another store on the same file) signs in.
    let other = FileCredentialStore::new(dir.join("auth.json"));
    let credential = signed_in(now_ms() + 3_600_000);
    other.modify("anthropic", Box::new(move |_| Box::pin(async move { Ok(Some(credential)) }))).await.unwrap();
    let message = models.complete(&provider.model(), context(), options(&[])).await.unwrap();
    assert_eq!(message.stop_reason, StopReason::Stop, "{:?}", message.error_message);
    let on_disk = std::fs::read_to_string(dir.join("auth.json")).unwrap();
    assert!(on_disk.contains(FRESH) && !on_disk.contains(STALE), "the refreshed token is saved");
    let _ = std::fs::remove_dir_all(&dir);
}
