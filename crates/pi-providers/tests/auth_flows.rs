//! The sign-in flows against a loopback stand-in of each provider's endpoints, compared request
//! for request (paths, parameters, headers, PKCE shape) with what pi-ai 1.6.1's flows send to
//! the same canned answers: the goldens in `fixtures/auth/*.json` are printed by
//! `fixtures/auth/reference_flows.mjs` on the reference's own login functions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod auth_support;

use std::sync::Arc;

use auth_support::{credential_event, fixture, normalize, Mock, User};
use pi_providers::auth::anthropic::{self, AnthropicOAuth};
use pi_providers::auth::codex_login::DeviceLogin;
use pi_providers::auth::copilot::GitHubCopilotOAuth;
use pi_providers::auth::kimi::KimiCodingOAuth;
use pi_providers::auth::meta::MetaOAuth;
use pi_providers::auth::openai_chatgpt::{self, OpenAIChatGPTOAuth};
use pi_providers::auth::openai_codex::{self, OpenAICodexOAuth};
use pi_providers::auth::openrouter::{self, OpenRouterOAuth};
use pi_providers::auth::radius::RadiusOAuth;
use pi_providers::auth::xai::XaiOAuth;
use pi_providers::auth::{
    Authenticator, Credential, CredentialStore, InMemoryCredentialStore, OAuthCredential, OAuthFlow,
};
use serde_json::{json, Value};

fn golden(name: &str) -> Value {
    serde_json::from_str(&fixture(&format!("{name}.json"))).unwrap()
}

async fn mock() -> Mock {
    Mock::start(serde_json::from_str(&fixture("answers.json")).unwrap()).await
}

fn user(mock: &Mock, select: &str, paste_code: bool) -> User {
    User { select: select.into(), paste_code, timeline: Arc::clone(&mock.timeline), answer_text: String::new() }
}

fn anthropic_flow(mock: &Mock) -> AnthropicOAuth {
    AnthropicOAuth::default()
        .with_endpoints(mock.url(anthropic::AUTHORIZE_URL), mock.url(anthropic::TOKEN_URL))
        .with_callback_port(0)
}

async fn run_login(mock: &Mock, flow: &dyn OAuthFlow, user: &User) -> Value {
    let credential = tokio::time::timeout(std::time::Duration::from_secs(20), flow.login(user))
        .await
        .expect("the sign-in finishes")
        .expect("the sign-in succeeds");
    let mut events = mock.timeline.lock().unwrap().clone();
    events.push(credential_event(&credential, true));
    normalize(mock, &events)
}

/// Sign in, then refresh the new credential once: the requests and both credentials (the
/// second as `refreshed`), as the runner prints them.
async fn run_login_and_refresh(mock: &Mock, flow: &dyn OAuthFlow, user: &User) -> Value {
    let credential = tokio::time::timeout(std::time::Duration::from_secs(20), flow.login(user))
        .await
        .expect("the sign-in finishes")
        .expect("the sign-in succeeds");
    let refreshed = flow.refresh(&credential).await.expect("the refresh succeeds");
    let mut events = mock.timeline.lock().unwrap().clone();
    events.push(credential_event(&credential, true));
    let mut second = credential_event(&refreshed, true);
    second["kind"] = json!("refreshed");
    events.push(second);
    normalize(mock, &events)
}

#[tokio::test]
async fn anthropic_browser_login_matches_the_reference() {
    let mock = mock().await;
    let user = user(&mock, "browser", false);
    assert_eq!(run_login(&mock, &anthropic_flow(&mock), &user).await, golden("anthropic-browser"));
}

#[tokio::test]
async fn anthropic_copy_code_login_matches_the_reference() {
    let mock = mock().await;
    let user = user(&mock, "copy_code", true);
    assert_eq!(run_login(&mock, &anthropic_flow(&mock), &user).await, golden("anthropic-copy-code"));
}

#[tokio::test]
async fn openrouter_login_matches_the_reference() {
    let mock = mock().await;
    let flow =
        OpenRouterOAuth::default().with_endpoints(mock.url(openrouter::AUTHORIZE_URL), mock.url(openrouter::TOKEN_URL));
    let user = user(&mock, "", false);
    assert_eq!(run_login(&mock, &flow, &user).await, golden("openrouter"));
}

/// `get_auth` refreshes a token within five minutes of its expiry, once for concurrent
/// requests, with the reference's refresh request, and stores the result.
#[tokio::test]
async fn expiring_anthropic_token_is_refreshed_once_as_the_reference_does() {
    let mock = mock().await;
    let store = Arc::new(InMemoryCredentialStore::new());
    let old = OAuthCredential::new("old-access", "old-refresh", pi_types::now_ms() + 60_000);
    store
        .modify("anthropic", Box::new(move |_| Box::pin(async move { Ok(Some(Credential::OAuth(old))) })))
        .await
        .unwrap();
    let auth = Authenticator::new(store.clone()).with_flow("anthropic", Arc::new(anthropic_flow(&mock)));
    let (a, b) = tokio::join!(auth.get_auth("anthropic"), auth.get_auth("anthropic"));
    for result in [a.unwrap().unwrap(), b.unwrap().unwrap()] {
        assert_eq!(result.auth.api_key.unwrap().expose(), "sk-ant-oat01-ACCESS");
        assert_eq!(result.source, "OAuth");
    }
    let Some(Credential::OAuth(stored)) = store.read("anthropic").unwrap() else { panic!("stored") };
    let mut events = mock.timeline.lock().unwrap().clone();
    events.push(credential_event(&stored, true));
    assert_eq!(normalize(&mock, &events), golden("anthropic-refresh"));
    // A fresh token is used as it is: no further request.
    auth.get_auth("anthropic").await.unwrap().unwrap();
    assert_eq!(mock.requests().len(), 1);
}

/// A failed refresh is an error (no fall-back to the environment) and keeps the old credential.
#[tokio::test]
async fn failed_refresh_keeps_the_old_credential() {
    let mock = Mock::start(json!({
        "POST https://platform.claude.com/v1/oauth/token": [{"status": 400, "body": {"error": "invalid_grant"}}]
    }))
    .await;
    let store = Arc::new(InMemoryCredentialStore::new());
    let old = OAuthCredential::new("old-access", "old-refresh", 1);
    let kept = Credential::OAuth(old.clone());
    store
        .modify("anthropic", Box::new(move |_| Box::pin(async move { Ok(Some(Credential::OAuth(old))) })))
        .await
        .unwrap();
    let auth = Authenticator::new(store.clone())
        .with_flow("anthropic", Arc::new(anthropic_flow(&mock)))
        .with_env(Arc::new(|_| Some("env-key".into())));
    let error = auth.get_auth("anthropic").await.unwrap_err().to_string();
    assert!(
        error.starts_with("OAuth refresh failed for anthropic: Anthropic token refresh request failed."),
        "{error}"
    );
    assert!(error.contains("status=400") && error.contains("invalid_grant"), "{error}");
    assert_eq!(store.read("anthropic").unwrap(), Some(kept));
}

#[tokio::test]
async fn copilot_login_matches_the_reference() {
    let mock = mock().await;
    let flow = GitHubCopilotOAuth::default().routed_through(&mock.origin);
    let credential = flow.login(&user(&mock, "", false)).await.unwrap();
    let auth = flow.to_auth(&credential);
    let mut events = mock.timeline.lock().unwrap().clone();
    events.push(json!({"kind": "auth", "apiKey": auth.api_key.unwrap().expose(), "baseUrl": auth.base_url}));
    events.push(credential_event(&credential, false));
    assert_eq!(normalize(&mock, &events), golden("copilot"));
}

#[tokio::test]
async fn copilot_refresh_matches_the_reference() {
    let mock = mock().await;
    let flow = GitHubCopilotOAuth::default().routed_through(&mock.origin);
    let fresh = flow.refresh(&OAuthCredential::new("old", "gho_GITHUBTOKEN", 0)).await.unwrap();
    let mut events = mock.timeline.lock().unwrap().clone();
    events.push(credential_event(&fresh, false));
    assert_eq!(normalize(&mock, &events), golden("copilot-refresh"));
}

#[tokio::test]
async fn codex_browser_login_and_refresh_match_the_reference() {
    let mock = mock().await;
    let device = DeviceLogin::default().with_base_url(mock.url("https://auth.openai.com"));
    let flow = OpenAICodexOAuth::new(device, mock.url(pi_providers::auth::codex::TOKEN_URL))
        .with_authorize_url(mock.url(openai_codex::AUTHORIZE_URL))
        .with_callback_port(0);
    let user = user(&mock, "browser", false);
    assert_eq!(run_login_and_refresh(&mock, &flow, &user).await, golden("codex-browser"));
}

#[tokio::test]
async fn chatgpt_login_and_refresh_match_the_reference() {
    let mock = mock().await;
    let flow = OpenAIChatGPTOAuth::default()
        .with_endpoints(mock.url(openai_chatgpt::AUTHORIZE_URL), mock.url(openai_chatgpt::TOKEN_URL))
        .with_callback_port(0)
        .with_device_id("0F8FAD5B-D9CB-469F-A165-70867728950E");
    let user = user(&mock, "", false);
    assert_eq!(run_login_and_refresh(&mock, &flow, &user).await, golden("chatgpt"));
}

#[tokio::test]
async fn kimi_login_and_refresh_match_the_reference() {
    let mock = mock().await;
    let flow = KimiCodingOAuth::default().routed_through(&mock.origin);
    assert_eq!(run_login_and_refresh(&mock, &flow, &user(&mock, "", false)).await, golden("kimi"));
    // The token goes in an `Authorization` header, which `Debug` does not print.
    let auth = flow.to_auth(&OAuthCredential::new("kimi-SECRET", "r", 0));
    assert_eq!(auth.headers.get("Authorization").map(String::as_str), Some("Bearer kimi-SECRET"));
    assert!(auth.api_key.is_none() && !format!("{auth:?}").contains("SECRET"));
}

#[tokio::test]
async fn meta_login_and_refresh_match_the_reference() {
    let mock = mock().await;
    let flow = MetaOAuth::default().routed_through(&mock.origin);
    assert_eq!(run_login_and_refresh(&mock, &flow, &user(&mock, "", false)).await, golden("meta"));
}

#[tokio::test]
async fn xai_login_and_refresh_match_the_reference() {
    let mock = mock().await;
    let flow = XaiOAuth::default().routed_through(&mock.origin);
    assert_eq!(run_login_and_refresh(&mock, &flow, &user(&mock, "", false)).await, golden("xai"));
}

#[tokio::test]
async fn radius_browser_login_and_refresh_match_the_reference() {
    let mock = mock().await;
    let flow = RadiusOAuth::new("Radius", "radius.example.com/").routed_through(&mock.origin).with_callback_port(0);
    let user = user(&mock, "browser", false);
    assert_eq!(run_login_and_refresh(&mock, &flow, &user).await, golden("radius-browser"));
}

#[tokio::test]
async fn radius_device_login_matches_the_reference() {
    let mock = mock().await;
    let flow = RadiusOAuth::new("Radius", "https://radius-device.example.com").routed_through(&mock.origin);
    let user = user(&mock, "device-code", false);
    assert_eq!(run_login(&mock, &flow, &user).await, golden("radius-device"));
}
