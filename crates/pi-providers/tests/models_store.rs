//! The live model store against the reference: each scenario of
//! `fixtures/models_store/cases.json` runs on a loopback gateway and is compared with what
//! pi-ai 1.6.1 printed for it (`fixtures/models_store/reference_refresh.mjs`, goldens beside it):
//! the requests, the refresh errors, the models afterwards, the models the account may use and
//! the stored entry. Then what the reference has no case for: atomic publication, a failed
//! refresh keeping the last good catalog, the timeout, no token in any output, custom providers
//! from a `models.json` file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi_providers::auth::{Authenticator, Credential, CredentialStore, InMemoryCredentialStore};
use pi_providers::models_store::{
    models_file, radius, AnyModel, FileModelsStore, ModelsStore, ModelsStoreEntry, RefreshOptions,
};
use pi_providers::{Auth, Models, Provider};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/models_store/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))).unwrap()
}

/// A gateway answering `answers` in order (then 500s), recording each request as the runner does.
struct Gateway {
    origin: String,
    requests: Arc<Mutex<Vec<Value>>>,
    raw: Arc<Mutex<Vec<String>>>,
}

impl Gateway {
    async fn start(answers: Vec<Value>, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let raw: Arc<Mutex<Vec<String>>> = Arc::default();
        let answers = Arc::new(Mutex::new(answers.into_iter()));
        let (recorded, raw_recorded) = (Arc::clone(&requests), Arc::clone(&raw));
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let (recorded, raw_recorded, answers) =
                    (Arc::clone(&recorded), Arc::clone(&raw_recorded), Arc::clone(&answers));
                tokio::spawn(async move {
                    let mut data = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !data.windows(4).any(|w| w == b"\r\n\r\n") {
                        let n = stream.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        data.extend_from_slice(&chunk[..n]);
                    }
                    let head = String::from_utf8_lossy(&data).into_owned();
                    let mut lines = head.lines();
                    let mut start = lines.next().unwrap_or_default().split(' ');
                    let (method, path) = (start.next().unwrap_or_default(), start.next().unwrap_or_default());
                    let header = |name: &str| {
                        head.lines().skip(1).find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                        })
                    };
                    recorded.lock().unwrap().push(json!({
                        "method": method,
                        "path": path,
                        "accept": header("accept"),
                        "authorization": header("authorization").map(|a| format!("{} <token>", a.split(' ').next().unwrap_or_default())),
                    }));
                    raw_recorded.lock().unwrap().push(head.clone());
                    let answer = answers.lock().unwrap().next().unwrap_or(json!({"status": 500, "body": "no answer"}));
                    tokio::time::sleep(delay).await;
                    let body = match &answer["body"] {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    let response = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        answer["status"],
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        Self { origin, requests, raw }
    }
}

/// Numbers as f64, so `1` and `1.0` compare equal (JavaScript has one number type).
fn canonical(value: &Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), canonical(v))).collect()),
        other => other.clone(),
    }
}

fn summary(models: &[AnyModel]) -> Value {
    Value::Array(
        models
            .iter()
            .map(|m| {
                let json = serde_json::to_value(m).unwrap();
                json!({"type": m.kind(), "id": m.id(), "api": json["api"], "provider": m.provider(), "baseUrl": json["baseUrl"]})
            })
            .collect(),
    )
}

struct Run {
    output: Value,
    raw_requests: Vec<String>,
    models: Models,
}

async fn run(name: &str) -> Run {
    let scenario = fixture("cases.json")[name].clone();
    let provider_id = scenario["provider"].as_str().unwrap().to_owned();
    let gateway = Gateway::start(scenario["answers"].as_array().unwrap().clone(), Duration::ZERO).await;
    let credentials = Arc::new(InMemoryCredentialStore::new());
    if let Some(credential) = scenario.get("credential") {
        let credential: Credential = serde_json::from_value(credential.clone()).unwrap();
        credentials
            .modify(&provider_id, Box::new(move |_| Box::pin(async move { Ok(Some(credential)) })))
            .await
            .unwrap();
    }
    let dir = tempdir(name);
    let store_path = dir.join("models-store.json");
    if let Some(stored) = scenario.get("stored") {
        std::fs::write(&store_path, json!({ provider_id.clone(): stored }).to_string()).unwrap();
    }
    let store = Arc::new(FileModelsStore::new(&store_path));
    let authenticator = Authenticator::with_builtin_flows(credentials).with_env(Arc::new(|_| None));
    let models = Models::new().with_authenticator(Arc::new(authenticator)).with_models_store(store);
    let provider = match provider_id.as_str() {
        "radius" => radius::provider("radius", &gateway.origin, None)
            .with_auth(Auth::Env(vec!["PI_TEST_UNSET_RADIUS_KEY".into()])),
        id => Provider::builtin(id).unwrap().with_auth(Auth::Env(vec!["PI_TEST_UNSET_COPILOT_KEY".into()])),
    };
    models.set_provider(provider);
    let allow_network = scenario.get("allowNetwork").and_then(Value::as_bool).unwrap_or(true);
    let result = models.refresh(RefreshOptions { allow_network, ..RefreshOptions::default() }).await;
    let errors: serde_json::Map<String, Value> = result
        .errors
        .iter()
        .map(|(id, e)| (id.clone(), Value::String(e.to_string().replace(&gateway.origin, "<gateway>"))))
        .collect();
    let raw_file: Value =
        std::fs::read_to_string(&store_path).ok().map(|t| serde_json::from_str(&t).unwrap()).unwrap_or(Value::Null);
    let stored = match raw_file.get(&provider_id) {
        Some(entry) => json!({"models": entry["models"], "checkedAt": entry["checkedAt"].is_number()}),
        None => Value::Null,
    };
    let output = json!({
        "requests": *gateway.requests.lock().unwrap(),
        "errors": errors,
        "models": summary(&models.all_models(Some(&provider_id))),
        "available": summary(&models.available_models(Some(&provider_id)).unwrap()),
        "stored": stored,
    });
    let _ = std::fs::remove_dir_all(dir);
    let raw_requests = gateway.raw.lock().unwrap().clone();
    Run { output, raw_requests, models }
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pi-models-store-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn compare(name: &str) -> Run {
    let run = run(name).await;
    let golden = fixture(&format!("{name}.json"));
    assert_eq!(canonical(&run.output), canonical(&golden), "{name}:\n{:#}", run.output);
    run
}

#[tokio::test]
async fn radius_catalog_replaces_the_baseline_as_the_reference_does() {
    let run = compare("radius-refresh").await;
    // The key went to the gateway, and only there.
    assert!(run.raw_requests[0].contains("authorization: Bearer rk-test-secret"), "{}", run.raw_requests[0]);
    let classifier = run.models.get_classifier_model("radius", "decide-1").expect("published");
    assert_eq!(classifier.api, "pi-decision");
}

#[tokio::test]
async fn a_failed_radius_refresh_keeps_the_restored_catalog() {
    compare("radius-http-error").await;
}

#[tokio::test]
async fn an_invalid_radius_config_is_an_error() {
    compare("radius-invalid").await;
}

#[tokio::test]
async fn an_unconfigured_provider_is_skipped() {
    compare("radius-unconfigured").await;
}

#[tokio::test]
async fn without_network_the_stored_catalog_is_restored() {
    compare("radius-offline").await;
}

#[tokio::test]
async fn copilot_accounts_use_the_models_their_sign_in_recorded() {
    compare("copilot-filter").await;
    compare("copilot-no-lists").await;
}

/// A refresh that fails after a good one keeps the good catalog, in the registry and the store.
#[tokio::test]
async fn a_failed_refresh_keeps_the_last_good_catalog() {
    let good = fixture("cases.json")["radius-refresh"]["answers"][0].clone();
    let gateway = Gateway::start(vec![good, json!({"status": 502, "body": "bad gateway"})], Duration::ZERO).await;
    let models = Models::new();
    models.set_provider(radius::provider("radius", &gateway.origin, None).with_auth(Auth::ApiKey("rk-key".into())));
    assert!(models.refresh(RefreshOptions::default()).await.errors.is_empty());
    let before = models.all_models(Some("radius"));
    assert_eq!(before.len(), 3);
    let failed = models.refresh(RefreshOptions::default()).await;
    assert!(failed.errors["radius"].to_string().contains("502: bad gateway"), "{:?}", failed.errors);
    assert_eq!(models.all_models(Some("radius")), before);
}

/// Readers see the old catalog or the new one while a refresh publishes, never a mix: each
/// read of the provider's models is one of the two whole lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_see_half_a_refresh() {
    let good = fixture("cases.json")["radius-refresh"]["answers"][0].clone();
    let gateway = Gateway::start(vec![good], Duration::from_millis(20)).await;
    let models = Arc::new(Models::new());
    models.set_provider(radius::provider("radius", &gateway.origin, None).with_auth(Auth::ApiKey("rk-key".into())));
    let reader = {
        let models = Arc::clone(&models);
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..20_000 {
                seen.insert(models.all_models(Some("radius")).len());
            }
            seen
        })
    };
    assert!(models.refresh(RefreshOptions::default()).await.errors.is_empty());
    let seen = reader.join().unwrap();
    assert!(seen.iter().all(|n| *n == 0 || *n == 3), "{seen:?}");
}

/// A gateway that never answers in time fails the refresh at the limit; the token is in no
/// error, `Debug` or store output.
#[tokio::test]
async fn a_slow_gateway_times_out_and_no_token_leaks() {
    let gateway = Gateway::start(vec![json!({"status": 200, "body": {}})], Duration::from_secs(5)).await;
    let models = Models::new();
    models.set_provider(
        radius::provider("radius", &gateway.origin, None).with_auth(Auth::ApiKey("rk-leak-canary".into())),
    );
    let options = RefreshOptions { timeout: Duration::from_millis(200), ..RefreshOptions::default() };
    let result = models.refresh(options).await;
    let text = format!("{} {:?} {:?}", result.errors["radius"], result, models.provider("radius"));
    assert!(text.contains("Model refresh timed out for radius after 200 ms"), "{text}");
    assert!(!text.contains("rk-leak-canary"), "{text}");
}

/// A gateway that quotes the request back in its error page does not get the token into the
/// refresh error.
#[tokio::test]
async fn a_gateway_quoting_the_token_back_does_not_leak_it() {
    let page = "unauthorized: Authorization: Bearer rk-quoted-canary-1234 was rejected";
    let gateway = Gateway::start(vec![json!({"status": 401, "body": page})], Duration::ZERO).await;
    let models = Models::new();
    models.set_provider(
        radius::provider("radius", &gateway.origin, None).with_auth(Auth::ApiKey("rk-quoted-canary-1234".into())),
    );
    let result = models.refresh(RefreshOptions::default()).await;
    let text = result.errors["radius"].to_string();
    assert!(text.contains("401: unauthorized: Authorization: Bearer <redacted> was rejected"), "{text}");
    assert!(!text.contains("canary"), "{text}");
}

/// A custom provider keyed by a variable of its own counts as configured when the variable is
/// set: its models are available (the built-in providers' variables are not its). `PATH` stands
/// for a set variable, so the test changes no environment.
#[tokio::test]
async fn a_provider_keyed_by_its_own_variable_is_available() {
    let available = |var: &str| {
        let model = pi_types::Model::new("m-1").with_api("openai-completions").with_provider("own");
        let models = Models::new();
        models.set_provider(Provider::new("own").with_auth(Auth::Env(vec![var.to_owned()])).with_model(model));
        models.available_models(Some("own")).unwrap().len()
    };
    assert!(std::env::var("PATH").is_ok_and(|path| !path.is_empty()));
    assert_eq!(available("PATH"), 1);
    assert_eq!(available("PI_MODELS_STORE_TEST_NEVER_SET"), 0);
}

/// A later refresh, or replacing the provider, supersedes an earlier refresh: its publication
/// is dropped.
#[tokio::test]
async fn replacing_the_provider_supersedes_its_refresh() {
    let good = fixture("cases.json")["radius-refresh"]["answers"][0].clone();
    let gateway = Gateway::start(vec![good], Duration::from_millis(200)).await;
    let models = Arc::new(Models::new());
    models.set_provider(radius::provider("radius", &gateway.origin, None).with_auth(Auth::ApiKey("k".into())));
    let refreshing = {
        let models = Arc::clone(&models);
        tokio::spawn(async move { models.refresh(RefreshOptions::default()).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    models.set_provider(Provider::new("radius").with_auth(Auth::None));
    assert!(refreshing.await.unwrap().errors.is_empty());
    assert!(models.all_models(Some("radius")).is_empty());
}

/// Custom providers from a `models.json` file: the reference's defaults; a refresh re-reads
/// the file; a broken file keeps the models.
#[tokio::test]
async fn custom_providers_come_from_a_models_file() {
    let dir = tempdir("custom");
    let path = dir.join("models.json");
    let write = |models: Value| {
        let file = json!({"providers": {"local": {
            "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "local-key",
            "headers": {"x-team": "pi"}, "compat": {"supportsStore": false},
            "models": models,
        }}});
        std::fs::write(&path, file.to_string()).unwrap();
    };
    write(json!([{"id": "qwen3", "contextWindow": 32768, "compat": {"maxTokensField": "max_tokens"}}]));
    let providers = models_file::load(&path).unwrap();
    let models = Models::new();
    for provider in providers {
        models.set_provider(provider);
    }
    let model = models.get_model("local", "qwen3").expect("loaded");
    let listed = canonical(&serde_json::to_value(&model).unwrap());
    assert_eq!(
        listed,
        canonical(&json!({
            "id": "qwen3", "name": "qwen3", "api": "openai-completions", "provider": "local",
            "baseUrl": "http://127.0.0.1:9/v1", "reasoning": false, "input": ["text"],
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            "contextWindow": 32768, "maxTokens": 16384, "headers": {"x-team": "pi"},
            "compat": {"supportsStore": false, "maxTokensField": "max_tokens"},
        }))
    );
    assert!(matches!(models.provider("local").unwrap().auth(), Auth::ApiKey(key) if key == "local-key"));
    let by_name = models_file::provider_auth("local", &json!({"apiKey": "$PI_TEST_LOCAL_KEY"})).unwrap();
    assert!(matches!(by_name, Auth::Env(vars) if vars == ["PI_TEST_LOCAL_KEY"]));
    let command = models_file::provider_auth("local", &json!({"apiKey": "!pass show key"})).err();
    assert_eq!(command.as_deref(), Some("Provider local: \"!command\" keys are not supported"));
    write(json!([{"id": "llama", "reasoning": true}]));
    let result = models.refresh(RefreshOptions::default()).await;
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    let ids: Vec<String> = models.models(Some("local")).iter().map(|m| m.id.to_string()).collect();
    assert_eq!(ids, ["llama"]);
    std::fs::write(&path, "{not json").unwrap();
    let result = models.refresh(RefreshOptions::default()).await;
    assert!(result.errors["local"].to_string().starts_with("Failed to parse models.json:"), "{:?}", result.errors);
    assert_eq!(models.models(Some("local")).len(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

/// The file store round-trips entries and survives a reader racing the writer.
#[test]
fn the_file_store_writes_whole_files() {
    let dir = tempdir("file-store");
    let store = FileModelsStore::new(dir.join("nested").join("models-store.json"));
    let model = pi_types::Model::new("m").with_api("pi-messages").with_provider("radius");
    let entry = ModelsStoreEntry { models: vec![AnyModel::Chat(model)], checked_at: Some(7), ..Default::default() };
    store.write("radius", &entry).unwrap();
    assert_eq!(store.read("radius").unwrap(), Some(entry));
    assert_eq!(store.read("other").unwrap(), None);
    let leftovers = std::fs::read_dir(dir.join("nested")).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file is left");
    let _ = std::fs::remove_dir_all(dir);
}
