//! Meta Model API sign-in (`meta`), as the reference's flow does it:
//!
//! 1. Device code (RFC 8628, JSON answers) at `https://auth.meta.com`:
//!    `POST /oidc/device/authorization/` (`client_id`), the user opens
//!    `verification_uri_complete` (else `verification_uri`), then
//!    `POST /oidc/device/token/` every interval, waiting one interval first, for the identity
//!    token.
//! 2. The identity token is not accepted for inference: `POST https://api.meta.ai/muse-code/key`
//!    (`{}`, bearer identity token, `x-api-version: 1.0.0`) mints a Model API key that lives a
//!    day. The identity token is stored as `refresh`, the key as `access`.
//! 3. Refresh mints a new key with the stored identity token; a 401 or 403 means the session is
//!    over and the user must sign in again (the identity token itself cannot be renewed).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::device::{poll_device_code, Poll};
use super::web::{self, positive_number, post_form, route, text_field, trusted_http_url};
use super::{AuthError, AuthEvent, AuthInteraction, OAuthCredential, OAuthFlow};

/// The Muse Code CLI's client id.
pub const CLIENT_ID: &str = "1031625952748946";
/// The device authorization endpoint.
pub const DEVICE_AUTHORIZATION_URL: &str = "https://auth.meta.com/oidc/device/authorization/";
/// The device token endpoint.
pub const DEVICE_TOKEN_URL: &str = "https://auth.meta.com/oidc/device/token/";
/// The key-mint endpoint.
pub const API_KEY_MINT_URL: &str = "https://api.meta.ai/muse-code/key";
const API_KEY_LIFETIME_MS: u64 = 24 * 60 * 60 * 1000;

/// The flow, against the real hosts or a test's stand-in.
#[derive(Clone, Debug, Default)]
pub struct MetaOAuth {
    via: Option<String>,
    http_client: Option<reqwest::Client>,
}

/// The reference's `errorDetail`: `: <the first non-empty of error_description, detail,
/// message, error>`.
fn error_detail(json: &Value) -> String {
    ["error_description", "detail", "message", "error"]
        .into_iter()
        .find_map(|key| json.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()))
        .map(|text| format!(": {text}"))
        .unwrap_or_default()
}

impl MetaOAuth {
    /// Send every request to `<origin>/<host>/<path>` in place of `https://<host>/<path>`.
    pub fn routed_through(mut self, origin: impl Into<String>) -> Self {
        self.via = Some(origin.into());
        self
    }

    /// Send requests with `client`.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    fn client(&self) -> Result<reqwest::Client, String> {
        web::client(self.http_client.as_ref())
    }

    async fn identity_token(&self, interaction: &dyn AuthInteraction) -> Result<String, String> {
        let client = self.client()?;
        let url = route(self.via.as_deref(), DEVICE_AUTHORIZATION_URL);
        let answer = post_form(&client, &url, &[("client_id", CLIENT_ID)], web::REQUEST_TIMEOUT).await?;
        let json = answer.json().filter(Value::is_object).unwrap_or(Value::Null);
        if !answer.ok() {
            return Err(format!(
                "Meta device authorization failed with status {}{}",
                answer.status,
                error_detail(&json)
            ));
        }
        let verification_uri = trusted_http_url(json.get("verification_uri_complete"))
            .or_else(|| trusted_http_url(json.get("verification_uri")));
        let (Some(device_code), Some(user_code), Some(verification_uri)) =
            (text_field(&json, "device_code"), text_field(&json, "user_code"), verification_uri)
        else {
            return Err("Invalid Meta device authorization response".into());
        };
        let interval = positive_number(&json, "interval");
        let expires_in = positive_number(&json, "expires_in");
        interaction.notify(AuthEvent::DeviceCode {
            user_code,
            verification_uri,
            interval_seconds: interval.map(|i| i as u64),
            expires_in_seconds: expires_in.map(|e| e as u64),
        });
        let url = route(self.via.as_deref(), DEVICE_TOKEN_URL);
        let form = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
            ("device_code", device_code.as_str()),
            ("client_id", CLIENT_ID),
        ];
        poll_device_code(interval, expires_in, true, || async {
            let answer = post_form(&client, &url, &form, web::REQUEST_TIMEOUT).await?;
            let json = answer.json().filter(Value::is_object).unwrap_or(Value::Null);
            if answer.ok() {
                if let Some(token) = text_field(&json, "access_token") {
                    return Ok(Poll::Complete(token));
                }
            }
            Ok(match json.get("error").and_then(Value::as_str) {
                Some("authorization_pending") => Poll::Pending,
                Some("slow_down") => Poll::SlowDown(positive_number(&json, "interval")),
                Some("access_denied") => Poll::Failed("Meta login was denied.".into()),
                Some("expired_token") => {
                    Poll::Failed("Meta device authorization expired. Please restart login.".into())
                }
                _ => Poll::Failed(format!(
                    "Meta device token request failed with status {}{}",
                    answer.status,
                    error_detail(&json)
                )),
            })
        })
        .await
    }

    /// Step 2: a Model API key for the identity token.
    async fn mint_api_key(&self, identity_token: &str) -> Result<OAuthCredential, String> {
        let request = self
            .client()?
            .post(route(self.via.as_deref(), API_KEY_MINT_URL))
            .header("Accept", "application/json")
            .header("Authorization", format!("Bearer {identity_token}"))
            .header("Content-Type", "application/json")
            .header("x-api-version", "1.0.0")
            .body("{}");
        let answer = web::send(request, web::REQUEST_TIMEOUT).await?;
        let json = answer.json().filter(Value::is_object).unwrap_or(Value::Null);
        if matches!(answer.status, 401 | 403) {
            return Err(format!(
                "Meta session expired (status {}). Run `pi login meta` to sign in again.{}",
                answer.status,
                error_detail(&json)
            ));
        }
        if !answer.ok() {
            return Err(format!("Meta API key mint failed with status {}{}", answer.status, error_detail(&json)));
        }
        let Some(api_key) = text_field(&json, "api_key") else {
            let action = trusted_http_url(json.get("action_url")).map(|u| format!(" Complete setup at {u}"));
            return Err(format!("Meta did not issue an API key.{}", action.unwrap_or_default()));
        };
        Ok(OAuthCredential::new(api_key, identity_token, web::now_ms().saturating_add(API_KEY_LIFETIME_MS)))
    }
}

impl OAuthFlow for MetaOAuth {
    fn name(&self) -> &str {
        "Meta (Muse subscription)"
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move {
            let identity = self.identity_token(interaction).await.map_err(AuthError::Login)?;
            interaction.notify(AuthEvent::Progress("Enabling Meta Model API access...".into()));
            self.mint_api_key(&identity).await.map_err(AuthError::Login)
        })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move { self.mint_api_key(credential.refresh.expose()).await })
    }
}

/// The flow as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(MetaOAuth::default())
}
