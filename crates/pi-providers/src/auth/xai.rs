//! xAI sign-in (`xai`, SuperGrok or X Premium), as the reference's flow does it:
//!
//! 1. Device code (RFC 8628): `POST https://auth.x.ai/oauth2/device/code` (`client_id`, the
//!    scopes, `referrer=pi`); the page the user opens (`verification_uri_complete`, else
//!    `verification_uri`) must be `https`.
//! 2. `POST https://auth.x.ai/oauth2/token` (the device-code grant) every interval, waiting one
//!    interval first, until the tokens are granted.
//! 3. Refresh: the same endpoint with `grant_type=refresh_token`; an answer without a
//!    `refresh_token` keeps the old one. Expiry is `expires_in` (an hour when absent) less five
//!    minutes. The access token is the request's key.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::device::{poll_device_code, Poll};
use super::web::{self, expiry, post_form, route, text_field};
use super::{AuthError, AuthEvent, AuthInteraction, OAuthCredential, OAuthFlow};

/// The public OAuth client id.
pub const CLIENT_ID: &str = "b1a00492-073a-47ea-816f-4c329264a828";
/// The device authorization endpoint.
pub const DEVICE_CODE_URL: &str = "https://auth.x.ai/oauth2/device/code";
/// The token endpoint.
pub const TOKEN_URL: &str = "https://auth.x.ai/oauth2/token";
const SCOPE: &str = "openid profile email offline_access grok-cli:access api:access";
const REFRESH_SKEW_MS: u64 = 5 * 60 * 1000;
const DEFAULT_TOKEN_LIFETIME_SECONDS: f64 = 3600.0;

/// The flow, against the real host or a test's stand-in.
#[derive(Clone, Debug, Default)]
pub struct XaiOAuth {
    via: Option<String>,
    http_client: Option<reqwest::Client>,
}

/// A JSON answer (an object; `{}` for any other JSON).
struct Reply {
    ok: bool,
    status: u16,
    body: Value,
}

fn invalid(field: &str) -> String {
    format!("Invalid xAI OAuth response field: {field}")
}

fn required(body: &Value, field: &str) -> Result<String, String> {
    text_field(body, field).ok_or_else(|| invalid(field))
}

fn positive(body: &Value, field: &str) -> Result<f64, String> {
    web::positive_number(body, field).ok_or_else(|| invalid(field))
}

/// The page to open must be an `https` URL.
fn verification_uri(raw: &str) -> Result<String, String> {
    match reqwest::Url::parse(raw) {
        Ok(url) if url.scheme() == "https" => Ok(url.to_string()),
        _ => Err("Untrusted verification URI in xAI OAuth response".into()),
    }
}

fn request_failure(action: &str, reply: &Reply) -> String {
    let detail: Vec<&str> =
        ["error", "error_description"].into_iter().filter_map(|k| reply.body.get(k).and_then(Value::as_str)).collect();
    let detail = detail.into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(": ");
    let detail = if detail.is_empty() { detail } else { format!(": {detail}") };
    format!("xAI OAuth {action} failed (HTTP {}){detail}", reply.status)
}

fn credential_of(body: &Value, previous_refresh: Option<&str>) -> Result<OAuthCredential, String> {
    let access = required(body, "access_token")?;
    let refresh = match (body.get("refresh_token"), previous_refresh) {
        (None, Some(previous)) if !previous.is_empty() => previous.to_owned(),
        _ => required(body, "refresh_token")?,
    };
    let lifetime =
        if body.get("expires_in").is_none() { DEFAULT_TOKEN_LIFETIME_SECONDS } else { positive(body, "expires_in")? };
    Ok(OAuthCredential::new(access, refresh, expiry(web::now_ms(), lifetime, REFRESH_SKEW_MS)))
}

impl XaiOAuth {
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

    async fn post(&self, url: &str, form: &[(&str, &str)]) -> Result<Reply, String> {
        let client = web::client(self.http_client.as_ref())?;
        let answer = post_form(&client, &route(self.via.as_deref(), url), form, web::REQUEST_TIMEOUT).await?;
        let body = match serde_json::from_slice::<Value>(&answer.body) {
            Ok(body @ Value::Object(_)) => body,
            Ok(_) => Value::Object(serde_json::Map::new()),
            Err(_) => return Err(format!("xAI OAuth returned invalid JSON (HTTP {})", answer.status)),
        };
        Ok(Reply { ok: answer.ok(), status: answer.status, body })
    }

    async fn device_login(&self, interaction: &dyn AuthInteraction) -> Result<OAuthCredential, String> {
        let reply =
            self.post(DEVICE_CODE_URL, &[("client_id", CLIENT_ID), ("scope", SCOPE), ("referrer", "pi")]).await?;
        if !reply.ok {
            return Err(request_failure("device authorization", &reply));
        }
        let body = &reply.body;
        let interval = web::positive_number(body, "interval");
        let complete = text_field(body, "verification_uri_complete").map(|u| verification_uri(&u)).transpose()?;
        let device_code = required(body, "device_code")?;
        let user_code = required(body, "user_code")?;
        let plain = verification_uri(&required(body, "verification_uri")?)?;
        let expires_in = positive(body, "expires_in")?;
        interaction.notify(AuthEvent::DeviceCode {
            user_code,
            verification_uri: complete.unwrap_or(plain),
            interval_seconds: interval.map(|i| i as u64),
            expires_in_seconds: Some(expires_in as u64),
        });
        let form = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
            ("client_id", CLIENT_ID),
            ("device_code", device_code.as_str()),
        ];
        poll_device_code(interval, Some(expires_in), true, || async {
            let reply = self.post(TOKEN_URL, &form).await?;
            if reply.ok {
                return credential_of(&reply.body, None).map(Poll::Complete);
            }
            Ok(match reply.body.get("error").and_then(Value::as_str) {
                Some("authorization_pending") => Poll::Pending,
                Some("slow_down") => Poll::SlowDown(reply.body.get("interval").and_then(Value::as_f64)),
                Some("access_denied" | "authorization_denied") => {
                    Poll::Failed("xAI device authorization was denied".into())
                }
                Some("expired_token") => Poll::Failed("xAI device code expired".into()),
                _ => Poll::Failed(request_failure("device token polling", &reply)),
            })
        })
        .await
    }
}

impl OAuthFlow for XaiOAuth {
    fn name(&self) -> &str {
        "xAI (Grok/X subscription)"
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move { self.device_login(interaction).await.map_err(AuthError::Login) })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move {
            let refresh = credential.refresh.expose();
            let form = [("grant_type", "refresh_token"), ("client_id", CLIENT_ID), ("refresh_token", refresh)];
            let reply = self.post(TOKEN_URL, &form).await?;
            if !reply.ok {
                return Err(request_failure("token refresh", &reply));
            }
            credential_of(&reply.body, Some(refresh))
        })
    }
}

/// The flow as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(XaiOAuth::default())
}
