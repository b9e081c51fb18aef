//! The file credential store: owner-only permissions, atomic replacement (a `kill -9` during a
//! write leaves the old or the new file, never a torn one), other entries kept, and no token in
//! any error, `Debug` output or log line.

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
    // Only the store file is left: no temporary file.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("auth.json")]);
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
