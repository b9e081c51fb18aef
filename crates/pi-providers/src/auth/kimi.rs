//! Kimi Code subscription sign-in (`kimi-coding`), as the reference's flow does it:
//!
//! 1. Device code (RFC 8628, JSON answers) at `https://auth.kimi.com` (or
//!    `$KIMI_CODE_OAUTH_HOST` / `$KIMI_OAUTH_HOST`): `POST /api/oauth/device_authorization`
//!    (`client_id`); the user opens `verification_uri_complete`.
//! 2. `POST /api/oauth/token` (`client_id`, `device_code`, the device-code grant) every interval
//!    (five seconds when none is named), waiting one interval first, for 15 minutes unless the
//!    server says otherwise; a 5xx answer ends the sign-in.
//! 3. Refresh: the same endpoint with `grant_type=refresh_token`, retried up to three times after
//!    a 429, a 5xx or a network failure (1, 2, 4 s apart); 401, 403 or `invalid_grant` mean the
//!    sign-in is dead. Expiry is `expires_in` from now, with no margin.
//! 4. Requests carry `Authorization: Bearer <access>` (a header, not an API key).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use super::device::{poll_device_code, Poll};
use super::web::{self, expiry, positive_number, post_form, route, text_field, trusted_http_url};
use super::{AuthError, AuthEvent, AuthInteraction, ModelAuth, OAuthCredential, OAuthFlow};

/// The public OAuth client id.
pub const CLIENT_ID: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";
/// The sign-in host.
pub const DEFAULT_OAUTH_HOST: &str = "https://auth.kimi.com";
const DEVICE_CODE_TIMEOUT_SECONDS: f64 = 15.0 * 60.0;
const DEFAULT_INTERVAL_SECONDS: f64 = 5.0;
const REFRESH_MAX_RETRIES: u32 = 3;
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// The flow, against the real host or a test's stand-in.
#[derive(Clone, Debug, Default)]
pub struct KimiCodingOAuth {
    via: Option<String>,
    http_client: Option<reqwest::Client>,
}

fn oauth_host() -> String {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    env("KIMI_CODE_OAUTH_HOST")
        .or_else(|| env("KIMI_OAUTH_HOST"))
        .unwrap_or_else(|| DEFAULT_OAUTH_HOST.into())
        .trim_end_matches('/')
        .to_owned()
}

/// A token answer as a credential; `None` when a field is missing.
fn credential_of(json: &Value) -> Option<OAuthCredential> {
    let access = text_field(json, "access_token")?;
    let refresh = text_field(json, "refresh_token")?;
    let expires_in = positive_number(json, "expires_in")?;
    Some(OAuthCredential::new(access, refresh, expiry(web::now_ms(), expires_in, 0)))
}

/// The reference prints the whole answer when a field is missing (tokens included): only the
/// operation is named here.
fn missing_fields(operation: &str) -> String {
    format!("Kimi Code token {operation} response missing fields")
}

impl KimiCodingOAuth {
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

    fn url(&self, path: &str) -> String {
        route(self.via.as_deref(), &format!("{}{path}", oauth_host()))
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Result<web::Answer, String> {
        let client = web::client(self.http_client.as_ref())?;
        post_form(&client, &self.url(path), form, web::REQUEST_TIMEOUT).await
    }

    async fn device_login(&self, interaction: &dyn AuthInteraction) -> Result<OAuthCredential, String> {
        let answer = self.post("/api/oauth/device_authorization", &[("client_id", CLIENT_ID)]).await?;
        if !answer.ok() {
            let text = answer.text();
            let text = if text.is_empty() { String::new() } else { format!(": {text}") };
            return Err(format!("Kimi Code device authorization failed with status {}{text}", answer.status));
        }
        let json = answer.json().unwrap_or(Value::Null);
        let (Some(device_code), Some(user_code), Some(_), Some(verification_uri)) = (
            json.get("device_code").and_then(Value::as_str),
            json.get("user_code").and_then(Value::as_str),
            trusted_http_url(json.get("verification_uri")),
            trusted_http_url(json.get("verification_uri_complete")),
        ) else {
            return Err("Invalid Kimi Code device authorization response".into());
        };
        let interval = positive_number(&json, "interval").unwrap_or(DEFAULT_INTERVAL_SECONDS);
        let expires_in = positive_number(&json, "expires_in").unwrap_or(DEVICE_CODE_TIMEOUT_SECONDS);
        interaction.notify(AuthEvent::DeviceCode {
            user_code: user_code.to_owned(),
            verification_uri,
            interval_seconds: Some(interval as u64),
            expires_in_seconds: Some(expires_in as u64),
        });
        let form = [("client_id", CLIENT_ID), ("device_code", device_code), ("grant_type", DEVICE_GRANT)];
        poll_device_code(Some(interval), Some(expires_in), true, || async {
            let answer = self.post("/api/oauth/token", &form).await?;
            if answer.status >= 500 {
                let text = answer.text();
                let text = if text.is_empty() { String::new() } else { format!(": {text}") };
                return Ok(Poll::Failed(format!(
                    "Kimi Code device token request failed with status {}{text}",
                    answer.status
                )));
            }
            let json = answer.json().filter(Value::is_object).unwrap_or(Value::Null);
            if answer.ok() && json.get("access_token").is_some_and(Value::is_string) {
                return Ok(credential_of(&json).map_or_else(|| Poll::Failed(missing_fields("poll")), Poll::Complete));
            }
            let error = json.get("error").and_then(Value::as_str);
            Ok(match error {
                Some("authorization_pending") => Poll::Pending,
                Some("slow_down") => Poll::SlowDown(positive_number(&json, "interval")),
                Some("expired_token") => {
                    Poll::Failed("Kimi Code device authorization expired. Please restart login.".into())
                }
                Some("access_denied") => Poll::Failed("Kimi Code login was denied.".into()),
                _ => {
                    let detail = error
                        .map(|e| {
                            let description =
                                text_field(&json, "error_description").map(|d| format!(": {d}")).unwrap_or_default();
                            format!(": {e}{description}")
                        })
                        .unwrap_or_default();
                    Poll::Failed(format!("Kimi Code device token request failed (status {}){detail}", answer.status))
                }
            })
        })
        .await
    }

    async fn refresh_token(&self, refresh: &str) -> Result<OAuthCredential, String> {
        let form = [("client_id", CLIENT_ID), ("grant_type", "refresh_token"), ("refresh_token", refresh)];
        let mut last_error = String::from("Kimi Code token refresh failed");
        for attempt in 0..=REFRESH_MAX_RETRIES {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(1u64 << (attempt - 1))).await;
            }
            let answer = match self.post("/api/oauth/token", &form).await {
                Ok(answer) => answer,
                Err(e) => {
                    last_error = e;
                    continue;
                }
            };
            let json = answer.json().filter(Value::is_object);
            if answer.ok() {
                return json.as_ref().and_then(credential_of).ok_or_else(|| missing_fields("refresh"));
            }
            let json = json.unwrap_or(Value::Null);
            if matches!(answer.status, 401 | 403) || json.get("error").and_then(Value::as_str) == Some("invalid_grant")
            {
                let description = text_field(&json, "error_description").map(|d| format!(": {d}")).unwrap_or_default();
                return Err(format!("Kimi Code token refresh unauthorized (status {}){description}", answer.status));
            }
            if (answer.status == 429 || answer.status >= 500) && attempt < REFRESH_MAX_RETRIES {
                last_error = format!("Kimi Code token refresh failed with status {}", answer.status);
                continue;
            }
            return Err(format!("Kimi Code token refresh failed with status {}: {json}", answer.status));
        }
        Err(last_error)
    }
}

impl OAuthFlow for KimiCodingOAuth {
    fn name(&self) -> &str {
        "Kimi Code (subscription)"
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move { self.device_login(interaction).await.map_err(AuthError::Login) })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move { self.refresh_token(credential.refresh.expose()).await })
    }

    fn to_auth(&self, credential: &OAuthCredential) -> ModelAuth {
        let mut headers = BTreeMap::new();
        headers.insert("Authorization".to_owned(), format!("Bearer {}", credential.access.expose()));
        ModelAuth { headers, ..ModelAuth::default() }
    }
}

/// The flow as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(KimiCodingOAuth::default())
}
