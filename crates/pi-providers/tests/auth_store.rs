//! The file credential store: owner-only permissions, atomic replacement (a `kill -9` during a
//! write leaves the old or the new file, never a torn one), other entries kept, and no token in
//! any error, `Debug` output or log line. Two processes sharing the file refresh a sign-in once
//! and lose none of each other's writes.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod auth_support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use auth_support::Mock;
use pi_providers::auth::anthropic::{self, AnthropicOAuth};
use pi_providers::auth::codex_login::DeviceLogin;
use pi_providers::auth::copilot::GitHubCopilotOAuth;
use pi_providers::auth::kimi::KimiCodingOAuth;
use pi_providers::auth::meta::MetaOAuth;
use pi_providers::auth::openai_chatgpt::{self, OpenAIChatGPTOAuth};
use pi_providers::auth::openai_codex::OpenAICodexOAuth;
use pi_providers::auth::radius::RadiusOAuth;
use pi_providers::auth::xai::XaiOAuth;
use pi_providers::auth::OAuthFlow;
use pi_providers::auth::{
    ApiKeyCredential, Authenticator, Credential, CredentialInfo, CredentialKind, CredentialStore, FileCredentialStore,
    OAuthCredential, Secret,
};
use serde_json::{json, Value};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pi-auth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn put(store: &dyn CredentialStore, provider: &str, credential: Credential) {
    store.modify(provider, Box::new(move |_| Box::pin(async move { Ok(Some(credential)) }))).await.unwrap();
}

#[tokio::test]
async fn the_file_is_owner_only_and_keeps_other_entries() {
    let dir = scratch("perm");
    let path = dir.join("agent").join("auth.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // An entry written by another program, in a shape this crate does not know, survives.
    std::fs::write(&path, r#"{"custom": {"type": "session", "cookie": 1}}"#).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = FileCredentialStore::new(&path);
    put(&store, "openrouter", Credential::ApiKey(ApiKeyCredential { key: Some(Secret::new("sk-or-1")), env: None }))
        .await;
    put(&store, "anthropic", Credential::OAuth(OAuthCredential::new("a", "r", 5))).await;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        file,
        json!({
            "custom": {"type": "session", "cookie": 1},
            "openrouter": {"type": "api_key", "key": "sk-or-1"},
            "anthropic": {"type": "oauth", "refresh": "r", "access": "a", "expires": 5},
        })
    );
    assert_eq!(
        store.list().unwrap(),
        vec![
            CredentialInfo { provider_id: "anthropic".into(), kind: CredentialKind::OAuth },
            CredentialInfo { provider_id: "openrouter".into(), kind: CredentialKind::ApiKey },
        ]
    );
    store.delete("anthropic").await.unwrap();
    assert_eq!(store.read("anthropic").unwrap(), None);
    assert!(store.read("openrouter").unwrap().is_some());
    // A new file in a new folder: the folder is the owner's only too.
    let fresh = dir.join("new").join("auth.json");
    put(&FileCredentialStore::new(&fresh), "x", Credential::OAuth(OAuthCredential::new("a", "r", 5))).await;
    assert_eq!(std::fs::metadata(fresh.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o600);
    // Only the store file and its (owner-only) lock file are left: no temporary file.
    let mut names: Vec<_> =
        std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, vec![std::ffi::OsString::from("auth.json"), std::ffi::OsString::from("auth.json.lock")]);
    let lock = path.with_file_name("auth.json.lock");
    assert_eq!(std::fs::metadata(&lock).unwrap().permissions().mode() & 0o777, 0o600);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_file_that_is_not_json_is_an_error_not_an_empty_store() {
    let dir = scratch("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("auth.json");
    std::fs::write(&path, "{\"anthropic\": {\"access\": \"sk-SECRET-1\"").unwrap();
    let store = FileCredentialStore::new(&path);
    let error = store.read("anthropic").unwrap_err().to_string();
    assert!(error.starts_with("Credential store read failed for anthropic: "), "{error}");
    assert!(!error.contains("SECRET"), "{error}");
    // A write does not replace the unreadable file (it would lose its other entries).
    let credential = Credential::OAuth(OAuthCredential::new("a", "r", 5));
    assert!(store.modify("x", Box::new(move |_| Box::pin(async move { Ok(Some(credential)) }))).await.is_err());
    assert!(std::fs::read_to_string(&path).unwrap().contains("sk-SECRET-1"));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn payload(tag: &str) -> Credential {
    // Large enough that a write takes many system calls' worth of bytes.
    let mut credential = OAuthCredential::new(format!("{tag}-access"), format!("{tag}-refresh"), 1);
    credential.extra.insert("padding".into(), json!(tag.repeat(200_000)));
    Credential::OAuth(credential)
}

/// Run as a child process by `kill_9_during_writes_leaves_old_or_new_content`: writes two
/// contents in turn, forever.
#[test]
#[ignore = "the writer child of kill_9_during_writes_leaves_old_or_new_content"]
fn writer_child() {
    let path = std::env::var("PI_AUTH_WRITER_PATH").expect("run by kill_9_during_writes_leaves_old_or_new_content");
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let store = FileCredentialStore::new(path);
    for round in 0u64.. {
        let credential = payload(if round % 2 == 0 { "a" } else { "b" });
        runtime.block_on(put(&store, "p", credential));
        if round == 1 {
            println!("ready");
        }
    }
}

fn read_entry(path: &Path) -> Credential {
    let text = std::fs::read_to_string(path).unwrap();
    let file: Value = serde_json::from_str(&text).expect("the file is whole JSON");
    serde_json::from_value(file["p"].clone()).unwrap()
}

#[test]
fn kill_9_during_writes_leaves_old_or_new_content() {
    let dir = scratch("kill");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("auth.json");
    let (a, b) = (payload("a"), payload("b"));
    for round in 0..8u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "writer_child", "--nocapture", "--test-threads=1"])
            .env("PI_AUTH_WRITER_PATH", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        while !line.contains("ready") {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "the writer ended early");
        }
        std::thread::sleep(Duration::from_millis(5 + round * 7));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let entry = read_entry(&path);
        assert!(entry == a || entry == b, "round {round}: torn entry");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every field of every span and event, at every level, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Captured {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        attrs.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
    fn on_record(
        &self,
        _: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        values.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        event.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
}

/// Every way a refresh can fail, with tokens in the store: neither the errors, nor any
/// `Debug` output, nor any log line holds a token; the stored credential is kept.
#[tokio::test]
async fn no_token_in_any_output_when_refreshes_fail() {
    let captured = Captured::default();
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = scratch("faults");
    let path = dir.join("auth.json");
    let access = "sk-ant-oat01-SECRETACCESS";
    let refresh = "sk-ant-ort01-SECRETREFRESH";
    let mut outputs = Vec::new();
    let answers = [
        json!({"status": 500, "body": {"error": "server_error"}}),
        // A server that echoes what it was sent.
        json!({"status": 400, "body": {"error": "invalid_grant", "refresh_token": refresh, "access": access}}),
        json!({"status": 200, "body": "not an object"}),
        json!({"status": 200, "body": {"access_token": "sk-ant-oat01-SECRETNEW"}}),
    ];
    for answer in answers {
        let mock = Mock::start(json!({ "POST https://platform.claude.com/v1/oauth/token": [answer] })).await;
        let flow = AnthropicOAuth::default()
            .with_endpoints(mock.url(anthropic::AUTHORIZE_URL), mock.url(anthropic::TOKEN_URL));
        let store = Arc::new(FileCredentialStore::new(&path));
        let stored = Credential::OAuth(OAuthCredential::new(access, refresh, 1));
        put(store.as_ref(), "anthropic", stored.clone()).await;
        let auth = Authenticator::new(store.clone()).with_flow("anthropic", Arc::new(flow));
        let error = auth.get_auth("anthropic").await.unwrap_err();
        outputs.push(error.to_string());
        outputs.push(format!("{error:?}"));
        outputs.push(format!("{auth:?} {store:?} {stored:?} {:?}", store.read("anthropic").unwrap()));
        assert_eq!(store.read("anthropic").unwrap(), Some(stored));
    }
    // The token endpoint unreachable.
    let flow = AnthropicOAuth::default().with_endpoints("http://127.0.0.1:9/a", "http://127.0.0.1:9/t");
    let auth = Authenticator::new(Arc::new(FileCredentialStore::new(&path))).with_flow("anthropic", Arc::new(flow));
    let error = auth.get_auth("anthropic").await.unwrap_err();
    outputs.push(format!("{error} {error:?}"));
    outputs.push(captured.0.lock().unwrap().clone());
    let all = outputs.join("\n");
    assert!(all.contains("OAuth refresh failed for anthropic"), "{all}");
    assert!(all.contains("status=500"), "{all}");
    assert!(!all.contains("SECRET"), "a token in the output:\n{all}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The sign-ins added after Anthropic's, each as `(provider, flow against the mock, its
/// refresh endpoints)`.
fn new_flows(mock: &Mock) -> Vec<(&'static str, Arc<dyn OAuthFlow>, Vec<&'static str>)> {
    let codex = OpenAICodexOAuth::new(
        DeviceLogin::default().with_base_url(mock.url("https://auth.openai.com")),
        mock.url(pi_providers::auth::codex::TOKEN_URL),
    );
    let chatgpt = OpenAIChatGPTOAuth::default()
        .with_endpoints(mock.url(openai_chatgpt::AUTHORIZE_URL), mock.url(openai_chatgpt::TOKEN_URL));
    vec![
        (
            "github-copilot",
            Arc::new(GitHubCopilotOAuth::default().routed_through(&mock.origin)),
            vec!["GET https://api.github.com/copilot_internal/v2/token"],
        ),
        ("openai-codex", Arc::new(codex), vec!["POST https://auth.openai.com/oauth/token"]),
        ("openai", Arc::new(chatgpt), vec!["POST https://auth.openai.com/api/accounts/oauth/token"]),
        (
            "kimi-coding",
            Arc::new(KimiCodingOAuth::default().routed_through(&mock.origin)),
            vec!["POST https://auth.kimi.com/api/oauth/token"],
        ),
        (
            "meta",
            Arc::new(MetaOAuth::default().routed_through(&mock.origin)),
            vec!["POST https://api.meta.ai/muse-code/key"],
        ),
        (
            "xai",
            Arc::new(XaiOAuth::default().routed_through(&mock.origin)),
            vec!["POST https://auth.x.ai/oauth2/token"],
        ),
        (
            "radius",
            Arc::new(RadiusOAuth::default().routed_through(&mock.origin)),
            vec!["POST https://radius.pi.dev/v1/oauth/token"],
        ),
    ]
}

/// The fault test above for every other sign-in: whatever the refresh endpoint answers (a
/// server error, an error echoing the tokens it was sent, a body that is not an object, a grant
/// missing fields), no error, `Debug` output or log line holds a token, and a failed refresh
/// keeps the stored credential.
#[tokio::test]
async fn no_token_in_any_output_when_the_other_flows_fail() {
    let captured = Captured::default();
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = scratch("faults-flows");
    let path = dir.join("auth.json");
    let access = "tid=1;proxy-ep=proxy.SECRETACCESS.example;x=1";
    let refresh = "gho-SECRETREFRESH";
    let answers = [
        json!({"status": 500, "body": {"error": "server_error"}}),
        json!({"status": 400, "body": {"error": "invalid_grant", "error_description": refresh, "detail": access, "refresh_token": refresh}}),
        json!({"status": 200, "body": "not an object"}),
        json!({"status": 200, "body": {"access_token": "SECRETNEW-1234"}}),
    ];
    let mut outputs = Vec::new();
    let mut failures = 0;
    for answer in answers {
        let probe = Mock::start(json!({})).await;
        let keys: Vec<&str> = new_flows(&probe).into_iter().flat_map(|(_, _, keys)| keys).collect();
        let all: serde_json::Map<String, Value> =
            keys.iter().map(|k| ((*k).to_owned(), json!([answer.clone()]))).collect();
        let mock = Mock::start(Value::Object(all)).await;
        for (provider, flow, _) in new_flows(&mock) {
            let store = Arc::new(FileCredentialStore::new(&path));
            let mut credential = OAuthCredential::new(access, refresh, 1);
            credential.extra.insert("clientId".into(), json!("app_issued_1"));
            let stored = Credential::OAuth(credential);
            put(store.as_ref(), provider, stored.clone()).await;
            let auth = Authenticator::new(store.clone()).with_flow(provider, flow);
            match auth.get_auth(provider).await {
                Err(error) => {
                    failures += 1;
                    outputs.push(error.to_string());
                    outputs.push(format!("{error:?}"));
                    assert_eq!(store.read(provider).unwrap(), Some(stored.clone()), "{provider}: {error}");
                }
                // xAI keeps the old refresh token when the answer names none.
                Ok(resolved) => outputs.push(format!("{provider}: {resolved:?}")),
            }
            outputs.push(format!("{auth:?} {store:?} {stored:?} {:?}", store.read(provider).unwrap()));
        }
    }
    outputs.push(captured.0.lock().unwrap().clone());
    let all = outputs.join("\n");
    assert!(failures >= 27, "{failures} failed refreshes:\n{all}");
    for provider in ["github-copilot", "openai-codex", "openai", "kimi-coding", "meta", "xai", "radius"] {
        assert!(all.contains(&format!("OAuth refresh failed for {provider}")), "{provider}:\n{all}");
    }
    assert!(!all.contains("SECRET"), "a token in the output:\n{all}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Run twice at once by `two_processes_refresh_once_and_lose_no_write`: waits for the go file,
/// resolves the expiring Anthropic sign-in (refreshing it when it still needs it), then writes
/// its own entry 25 times.
#[test]
#[ignore = "a child of two_processes_refresh_once_and_lose_no_write"]
fn refresher_child() {
    let var = |name: &str| std::env::var(name).expect("run by two_processes_refresh_once_and_lose_no_write");
    let (path, origin, tag) =
        (PathBuf::from(var("PI_AUTH_SHARED_PATH")), var("PI_AUTH_MOCK_ORIGIN"), var("PI_AUTH_CHILD"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    while !path.with_file_name("go").exists() {
        std::thread::sleep(Duration::from_millis(2));
    }
    runtime.block_on(async {
        let flow = AnthropicOAuth::default().with_endpoints(
            format!("{origin}/claude.ai/oauth/authorize"),
            format!("{origin}/platform.claude.com/v1/oauth/token"),
        );
        let store = Arc::new(FileCredentialStore::new(&path));
        let auth = Authenticator::new(store.clone()).with_flow("anthropic", Arc::new(flow));
        let resolved = auth.get_auth("anthropic").await.unwrap().unwrap();
        for round in 0..25u32 {
            let key = ApiKeyCredential { key: Some(Secret::new(format!("{tag}-{round}"))), env: None };
            put(store.as_ref(), &format!("child-{tag}"), Credential::ApiKey(key)).await;
        }
        println!("token {}", resolved.auth.api_key.unwrap().expose());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_refresh_once_and_lose_no_write() {
    // The refresh answer is held back so that the second process asks while the first refreshes.
    let mock = Mock::start(json!({ "POST https://platform.claude.com/v1/oauth/token": [
        {"status": 200, "delay_ms": 1000, "body": {"access_token": "fresh-access", "refresh_token": "fresh-refresh", "expires_in": 28800}}
    ]}))
    .await;
    let dir = scratch("two-processes");
    let path = dir.join("auth.json");
    put(
        &FileCredentialStore::new(&path),
        "anthropic",
        Credential::OAuth(OAuthCredential::new("old-access", "old-refresh", 1)),
    )
    .await;
    let children: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|tag| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--ignored", "--exact", "refresher_child", "--nocapture", "--test-threads=1"])
                .env("PI_AUTH_SHARED_PATH", &path)
                .env("PI_AUTH_MOCK_ORIGIN", &mock.origin)
                .env("PI_AUTH_CHILD", tag)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::write(dir.join("go"), "").unwrap();
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains("token fresh-access"), "{stdout}");
    }
    assert_eq!(mock.requests().len(), 1, "one refresh for both processes");
    let store = FileCredentialStore::new(&path);
    let Some(Credential::OAuth(stored)) = store.read("anthropic").unwrap() else { panic!("the sign-in is kept") };
    assert_eq!(stored.refresh.expose(), "fresh-refresh");
    for tag in ["a", "b"] {
        let Some(Credential::ApiKey(key)) = store.read(&format!("child-{tag}")).unwrap() else { panic!("{tag} lost") };
        assert_eq!(key.key.unwrap().expose(), format!("{tag}-24"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
