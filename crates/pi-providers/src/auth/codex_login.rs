//! Signing in to a ChatGPT subscription for `openai-codex` with a device code, as the
//! reference's device-code login does (`pi login openai-codex` runs it):
//!
//! 1. `POST <auth>/api/accounts/deviceauth/usercode` with `{"client_id"}` answers a
//!    `device_auth_id`, a `user_code` and a polling `interval` (seconds, number or string).
//! 2. The user opens `<auth>/codex/device` and enters the code.
//! 3. `POST <auth>/api/accounts/deviceauth/token` with `{device_auth_id, user_code}` is polled
//!    every interval (at least one second): 403 / 404 or an `deviceauth_authorization_pending`
//!    error code mean "not yet", `slow_down` adds five seconds, a 2xx answer carries an
//!    `authorization_code` and its `code_verifier`; anything else fails. After 15 minutes the
//!    flow times out.
//! 4. The code is exchanged at `<auth>/oauth/token` (`grant_type=authorization_code`, the Codex
//!    client id, the verifier, redirect `<auth>/deviceauth/callback`) for the tokens, which the
//!    caller stores with [`CodexTokenStore::write`](crate::auth::codex::CodexTokenStore::write).
//!
//! Every request is bounded in time and cancellable; error texts quote the server's answer
//! (at most 4000 bytes of it) but never a token.

use std::time::Duration;

use pi_types::CancellationToken;
use serde_json::{json, Value};

use crate::auth::codex::{token_grant, CodexCredential, CLIENT_ID};

/// The ChatGPT sign-in host.
pub const AUTH_BASE_URL: &str = "https://auth.openai.com";
/// How long a device code is polled for.
pub const DEVICE_CODE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Longest wait for one answer of the sign-in host.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const MINIMUM_INTERVAL: Duration = Duration::from_secs(1);
const SLOW_DOWN_STEP: Duration = Duration::from_secs(5);

/// A device code to show the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceCode {
    /// The code the user types in.
    pub user_code: String,
    /// Where the user types it.
    pub verification_uri: String,
    /// How often the sign-in host may be asked.
    pub interval: Duration,
    device_auth_id: String,
}

/// A device-code sign-in against one sign-in host.
#[derive(Clone, Debug)]
pub struct DeviceLogin {
    base_url: String,
    timeout: Duration,
    http_client: Option<reqwest::Client>,
}

impl Default for DeviceLogin {
    fn default() -> Self {
        Self { base_url: AUTH_BASE_URL.to_owned(), timeout: DEVICE_CODE_TIMEOUT, http_client: None }
    }
}

/// One poll's outcome.
enum Poll {
    Pending,
    SlowDown,
    Complete { code: String, verifier: String },
}

fn bounded(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(4000)]).into_owned()
}

impl DeviceLogin {
    /// Sign in at another host (a test server); the default is [`AUTH_BASE_URL`].
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Poll for at most `timeout` (default [`DEVICE_CODE_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Send the login's requests with `client` (default: [`crate::transport::client::shared`]).
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    fn client(&self) -> Result<reqwest::Client, String> {
        match &self.http_client {
            Some(client) => Ok(client.clone()),
            None => crate::transport::client::shared().map_err(|e| e.to_string()),
        }
    }

    async fn post_json(&self, path: &str, body: &Value) -> Result<(u16, Vec<u8>), String> {
        let client = self.client()?;
        let send = client.post(format!("{}{path}", self.base_url)).json(body).send();
        let response = tokio::time::timeout(REQUEST_TIMEOUT, send)
            .await
            .map_err(|_| "The operation was aborted due to timeout".to_owned())?
            .map_err(|e| crate::transport::http::deepest_cause(&e))?;
        let status = response.status().as_u16();
        let bytes = tokio::time::timeout(
            REQUEST_TIMEOUT,
            crate::transport::http::read_to_cap(response, crate::transport::http::MAX_TOKEN_BODY_BYTES),
        )
        .await
        .map_err(|_| "The operation was aborted due to timeout".to_owned())?
        .map_err(|e| crate::transport::http::deepest_cause(&e))?;
        Ok((status, bytes))
    }

    /// Ask for a device code.
    pub async fn start(&self) -> Result<DeviceCode, String> {
        let (status, body) = self
            .post_json("/api/accounts/deviceauth/usercode", &json!({ "client_id": CLIENT_ID }))
            .await
            .map_err(|e| format!("OpenAI Codex device code request failed: {e}"))?;
        if status == 404 {
            return Err("OpenAI Codex device code login is not enabled for this server. Use browser login or verify \
                        the server URL."
                .into());
        }
        if !(200..300).contains(&status) {
            let text = bounded(&body);
            let suffix = if text.is_empty() { String::new() } else { format!(": {text}") };
            return Err(format!("OpenAI Codex device code request failed with status {status}{suffix}"));
        }
        let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let text = |key: &str| json.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
        let interval = match json.get("interval") {
            Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
            Some(value) => value.as_f64(),
            None => None,
        };
        match (text("device_auth_id"), text("user_code"), interval.filter(|i| i.is_finite() && *i >= 0.0)) {
            (Some(device_auth_id), Some(user_code), Some(interval)) => Ok(DeviceCode {
                user_code,
                verification_uri: format!("{}/codex/device", self.base_url),
                interval: Duration::from_secs_f64(interval.min(3600.0)).max(MINIMUM_INTERVAL),
                device_auth_id,
            }),
            _ => Err(format!("Invalid OpenAI Codex device code response: {}", bounded(&body))),
        }
    }

    async fn poll(&self, code: &DeviceCode) -> Result<Poll, String> {
        let body = json!({ "device_auth_id": code.device_auth_id, "user_code": code.user_code });
        let (status, answer) = self.post_json("/api/accounts/deviceauth/token", &body).await?;
        if (200..300).contains(&status) {
            let json: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
            let text = |key: &str| json.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
            return match (text("authorization_code"), text("code_verifier")) {
                (Some(code), Some(verifier)) => Ok(Poll::Complete { code, verifier }),
                // The answer would hold the code: say which fields are missing, not what came.
                _ => Err("Invalid OpenAI Codex device auth token response: missing authorization_code or \
                          code_verifier"
                    .into()),
            };
        }
        if status == 403 || status == 404 {
            return Ok(Poll::Pending);
        }
        let json: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        let error_code = match json.get("error") {
            Some(Value::Object(error)) => error.get("code").and_then(Value::as_str),
            Some(Value::String(code)) => Some(code.as_str()),
            _ => None,
        };
        match error_code {
            Some("deviceauth_authorization_pending") => Ok(Poll::Pending),
            Some("slow_down") => Ok(Poll::SlowDown),
            _ => {
                let text = bounded(&answer);
                let suffix = if text.is_empty() { String::new() } else { format!(": {text}") };
                Err(format!("OpenAI Codex device auth failed with status {status}{suffix}"))
            }
        }
    }

    /// Wait until the user has entered the code, then exchange it for the credential.
    /// `cancel` ends the wait with `Login cancelled`.
    pub async fn finish(&self, code: &DeviceCode, cancel: &CancellationToken) -> Result<CodexCredential, String> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut interval = code.interval;
        let mut slowed = false;
        let grant = loop {
            if tokio::time::Instant::now() >= deadline {
                break Err(());
            }
            if cancel.is_cancelled() {
                return Err("Login cancelled".into());
            }
            match self.poll(code).await? {
                Poll::Complete { code, verifier } => break Ok((code, verifier)),
                Poll::Pending => {}
                Poll::SlowDown => {
                    slowed = true;
                    interval = interval.saturating_add(SLOW_DOWN_STEP);
                }
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                break Err(());
            }
            let wait = interval.min(deadline.saturating_duration_since(now));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = cancel.cancelled() => return Err("Login cancelled".into()),
            }
        };
        let Ok((authorization_code, verifier)) = grant else {
            return Err(if slowed {
                "Device flow timed out after one or more slow_down responses. This is often caused by clock drift \
                 in WSL or VM environments. Please sync or restart the VM clock and try again."
                    .into()
            } else {
                "Device flow timed out".into()
            });
        };
        let redirect = format!("{}/deviceauth/callback", self.base_url);
        let form = [
            ("grant_type", "authorization_code"),
            ("client_id", CLIENT_ID),
            ("code", authorization_code.as_str()),
            ("code_verifier", verifier.as_str()),
            ("redirect_uri", redirect.as_str()),
        ];
        token_grant(&self.client()?, &format!("{}/oauth/token", self.base_url), &form, "exchange").await
    }
}
