//! Classifier and image calls against scripted loopback servers: the retry policy (two retries
//! by default, none for OpenAI Decisions' gateway timeout), the time limit's wording, the
//! registry's checks before any request, Cloudflare's account placeholder, TypeSafe's image
//! opt-in header and OpenCode's session header. The answers themselves are pinned by the
//! reference's goldens (`tests/tests/one_shot_replay.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loopback;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use loopback::{with_length, Server, Step};
use pi_providers::classifier::{
    BoolCriteria, ClassifierContext, ClassifierModel, ClassifierQuestion, ClassifierResult, ClassifierStopReason,
};
use pi_providers::images::{ImageModel, ImagesContext, ImagesStopReason};
use pi_providers::{Auth, Models, Provider};
use pi_types::{ImageContent, InputModality, StreamOptions, TextContent, UserContent};
use serde_json::json;

fn model(api: &str, provider: &str, base_url: String) -> ClassifierModel {
    ClassifierModel {
        id: "m-1".into(),
        name: "M 1".into(),
        api: api.into(),
        provider: provider.into(),
        base_url,
        input: vec![InputModality::Text, InputModality::Image],
        context_window: 32_000,
        ..Default::default()
    }
}

fn context(images: bool) -> ClassifierContext {
    let mut questions = IndexMap::new();
    questions.insert(
        "angry".to_owned(),
        ClassifierQuestion::Bool {
            instructions: "Is the customer upset?".into(),
            criteria: BoolCriteria { yes: "frustrated".into(), no: String::new() },
        },
    );
    ClassifierContext {
        state: json!({"ticket": "charged twice"}).as_object().cloned().unwrap(),
        images: images.then(|| vec![ImageContent { data: "iVBORw0KGgo=".into(), mime_type: "image/png".into() }]),
        questions,
    }
}

fn keyed(timeout_ms: u64) -> StreamOptions {
    StreamOptions { api_key: Some("sk-test-secret-1234".into()), timeout_ms: Some(timeout_ms), ..Default::default() }
}

fn answer(status: u16, extra: &str, body: &str) -> Vec<Step> {
    vec![Step::Bytes(with_length(status, "application/json", extra, body.as_bytes()))]
}

const NOUL: &str = r#"{"answers":{"angry":{"type":"noul","noul":0.7}}}"#;

fn registry(provider: &str, auth: Auth) -> Models {
    let models = Models::new();
    models.set_provider(Provider::new(provider).with_auth(auth));
    models
}

#[tokio::test]
async fn retryable_statuses_get_two_retries_by_default() {
    let server = Server::start(answer(503, "retry-after-ms: 1\r\n", r#"{"error":"busy"}"#)).await;
    let model = model("typesafe-system-one", "typesafe", server.url.clone());
    let result = pi_providers::classifier::classify(&model, &context(false), &keyed(5000)).await;
    assert_eq!(server.requests.load(Ordering::SeqCst), 3);
    assert_eq!(result.stop_reason, ClassifierStopReason::Error);
    assert_eq!(result.error_message.as_deref(), Some(r#"System One API error (503): {"error":"busy"}"#));
}

#[tokio::test]
async fn a_decisions_gateway_timeout_is_not_retried() {
    let server = Server::start(answer(504, "retry-after-ms: 1\r\n", "<html>504</html>")).await;
    let model = model("openai-decisions", "openai", format!("{}/v1", server.url));
    let result = pi_providers::classifier::classify(&model, &context(false), &keyed(5000)).await;
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
    let message = result.error_message.unwrap_or_default();
    assert!(message.starts_with("OpenAI Decisions error (504): the request timed out at the gateway."), "{message}");
}

#[tokio::test]
async fn the_time_limit_names_its_milliseconds() {
    let server = Server::start(vec![Step::Hold]).await;
    let model = model("pi-decision", "radius", server.url.clone());
    let options = StreamOptions { max_retries: Some(0), ..keyed(150) };
    let result = pi_providers::classifier::classify(&model, &context(false), &options).await;
    assert_eq!(result.error_message.as_deref(), Some("Request timed out after 150ms"));
}

#[tokio::test]
async fn the_registry_checks_before_any_request() {
    let server = Server::start(answer(200, "", NOUL)).await;
    let mut text_only = model("pi-decision", "radius", server.url.clone());
    text_only.input = vec![InputModality::Text];
    let models = registry("radius", Auth::None);
    let cases: [(&ClassifierModel, bool, &Models, &str); 3] = [
        (&text_only, true, &models, "Model radius/m-1 does not accept image input"),
        (&model("pi-decision", "nowhere", server.url.clone()), false, &models, "Unknown provider: nowhere"),
        (
            &model("pi-decision", "radius", server.url.clone()),
            false,
            &registry("radius", Auth::Env(vec!["PI_RS_TEST_UNSET_KEY_VARIABLE".into()])),
            "Provider is not configured: radius",
        ),
    ];
    for (model, images, models, expected) in cases {
        let result: ClassifierResult = models.classify(model, &context(images), StreamOptions::default()).await;
        assert_eq!(result.error_message.as_deref(), Some(expected));
        assert!(result.answers.is_empty());
    }
    let unknown_api = model("no-such-api", "radius", server.url.clone());
    let result = models.classify(&unknown_api, &context(false), StreamOptions::default()).await;
    assert_eq!(
        result.error_message.as_deref(),
        Some("Provider radius has no classifier implementation for \"no-such-api\"")
    );
    assert_eq!(server.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn cloudflare_fills_the_account_from_the_settings() {
    let body = r#"{"success":true,"result":{"answers":{"angry":{"type":"noul","noul":0.4}}}}"#;
    let server = Server::start(answer(200, "", body)).await;
    let model = model(
        "cloudflare-workers-ai-system-one",
        "cloudflare-workers-ai",
        format!("{}/accounts/{{CLOUDFLARE_ACCOUNT_ID}}/ai", server.url),
    );
    let models = registry("cloudflare-workers-ai", Auth::ApiKey("cf-key".into()));
    let missing = models.classify(&model, &context(false), StreamOptions::default()).await;
    if std::env::var_os("CLOUDFLARE_ACCOUNT_ID").is_none() {
        assert_eq!(
            missing.error_message.as_deref(),
            Some("Provider cloudflare-workers-ai is not configured: set CLOUDFLARE_ACCOUNT_ID")
        );
    }
    let env = Arc::new([("CLOUDFLARE_ACCOUNT_ID".to_owned(), "acct-9".to_owned())].into_iter().collect());
    let result = models.classify(&model, &context(false), StreamOptions { env: Some(env), ..Default::default() }).await;
    assert_eq!(result.stop_reason, ClassifierStopReason::Stop, "{:?}", result.error_message);
    let heads = server.heads.lock().unwrap().clone();
    assert!(heads.last().is_some_and(|h| h.starts_with("post /accounts/acct-9/ai/run ")), "{heads:?}");
}

#[tokio::test]
async fn typesafe_images_carry_the_opt_in_header_and_opencode_its_session() {
    let server = Server::start(answer(200, "", NOUL)).await;
    let typesafe = model("typesafe-system-one", "typesafe", server.url.clone());
    let result = pi_providers::classifier::classify(&typesafe, &context(true), &keyed(5000)).await;
    assert_eq!(result.stop_reason, ClassifierStopReason::Stop, "{:?}", result.error_message);
    let openrouter = model("typesafe-system-one", "openrouter", server.url.clone());
    pi_providers::classifier::classify(&openrouter, &context(true), &keyed(5000)).await;
    let models = registry("opencode", Auth::ApiKey("oc-key".into()));
    let opencode = model("typesafe-system-one", "opencode", server.url.clone());
    let options = StreamOptions { session_id: Some("sess-7".into()), ..Default::default() };
    models.classify(&opencode, &context(false), options).await;
    let heads = server.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3);
    assert!(heads[0].contains("typesafe-danger-zone-images: true"), "{}", heads[0]);
    assert!(!heads[1].contains("typesafe-danger-zone-images"), "{}", heads[1]);
    assert!(heads[2].contains("x-opencode-session: sess-7"), "{}", heads[2]);
    assert!(heads.iter().all(|h| h.starts_with("post /systemone ")));
}

#[tokio::test]
async fn no_key_no_request_and_keys_stay_out_of_results() {
    let server = Server::start(answer(401, "", r#"{"error":{"message":"bad key sk-test-secret-1234?"}}"#)).await;
    let model = model("openai-decisions", "openai", server.url.clone());
    let none = pi_providers::classifier::classify(&model, &context(false), &StreamOptions::default()).await;
    assert_eq!(none.error_message.as_deref(), Some("No API key for provider: openai"));
    assert_eq!(server.requests.load(Ordering::SeqCst), 0);
    let mut with_headers = model.clone();
    with_headers.headers = Some([("X-Secret".to_owned(), "header-secret-5678".to_owned())].into_iter().collect());
    assert!(!format!("{with_headers:?}").contains("header-secret-5678"));
    let image = ImageModel { headers: with_headers.headers.clone(), ..Default::default() };
    assert!(!format!("{image:?}").contains("header-secret-5678"));
}

#[tokio::test]
async fn images_time_out_and_answer_without_a_key() {
    let server = Server::start(vec![Step::Pause(Duration::from_secs(5))]).await;
    let model = ImageModel {
        id: "img-1".into(),
        api: "openrouter-images".into(),
        provider: "openrouter".into(),
        base_url: format!("{}/api/v1", server.url),
        output: vec!["image".into()],
        ..Default::default()
    };
    let context =
        ImagesContext { input: vec![UserContent::Text(TextContent { text: "a cat".into(), ..Default::default() })] };
    let keyless = pi_providers::images::generate_images(&model, &context, &StreamOptions::default()).await;
    assert_eq!(keyless.error_message.as_deref(), Some("No API key for provider: openrouter"));
    let timed = pi_providers::images::generate_images(&model, &context, &keyed(100)).await;
    assert_eq!(timed.stop_reason, ImagesStopReason::Error);
    assert_eq!(timed.error_message.as_deref(), Some("Request timed out."));
    assert_eq!(server.requests.load(Ordering::SeqCst), 1);
}
