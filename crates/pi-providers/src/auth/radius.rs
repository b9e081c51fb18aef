//! Radius gateway sign-in (`radius`), as the reference's flow does it. The OAuth endpoints live on
//! the configured gateway (default `https://radius.pi.dev`); only the browser's authorization
//! page is discovered.
//!
//! * Browser: `GET <gateway>/v1/oauth` names the `authorizationEndpoint`; a callback server
//!   listens on `127.0.0.1:1456/oauth/callback`; the page gets `response_type=code`,
//!   `client_id=pi-gateway`, the redirect, `scope=gateway offline_access`, the PKCE S256
//!   challenge, `handoff=url` and a random UUID `state`; the callback's code is exchanged at
//!   `POST <gateway>/v1/oauth/token` (form, `grant_type=authorization_code`, verifier) before the
//!   browser gets its page.
//! * Device code: `POST <gateway>/v1/oauth/device` (`client_id`, `scope`), then the token
//!   endpoint with the device-code grant every interval (no wait before the first poll).
//! * Refresh: the token endpoint with `grant_type=refresh_token`. Expiry is `expires_in` less a
//!   minute; the granted `scope` is kept.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::callback::{CallbackServer, CallbackServerOptions};
use super::device::{poll_device_code, Poll};
use super::pkce::random_uuid;
use super::web::{self, expiry, positive_number, route, text_field, trusted_http_url};
use super::{AuthError, AuthEvent, AuthInteraction, AuthPrompt, OAuthCredential, OAuthFlow, Pkce};

/// The default gateway.
pub const DEFAULT_GATEWAY: &str = "https://radius.pi.dev";
/// The preferred callback port.
pub const CALLBACK_PORT: u16 = 1456;
const CALLBACK_HOST: &str = "127.0.0.1";
const CALLBACK_PATH: &str = "/oauth/callback";
const CLIENT_ID: &str = "pi-gateway";
const SCOPE: &str = "gateway offline_access";
const TOKEN_EXPIRY_SKEW_MS: u64 = 60_000;
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// The flow for one gateway, against the real gateway or a test's stand-in.
#[derive(Clone, Debug)]
pub struct RadiusOAuth {
    name: String,
    gateway: String,
    callback_port: u16,
    via: Option<String>,
    http_client: Option<reqwest::Client>,
}

impl Default for RadiusOAuth {
    fn default() -> Self {
        Self::new("Radius", DEFAULT_GATEWAY)
    }
}

/// `value` with `https://` when it names no scheme, without trailing slashes.
pub fn normalize_gateway_url(value: &str) -> String {
    let lower = value.to_ascii_lowercase();
    let with_scheme = if lower.starts_with("http://") || lower.starts_with("https://") {
        value.to_owned()
    } else {
        format!("https://{value}")
    };
    with_scheme.trim_end_matches('/').to_owned()
}

/// A token endpoint's failure: its OAuth `error` code, if any, and the message.
struct TokenFailure {
    oauth_error: Option<String>,
    message: String,
}

impl RadiusOAuth {
    /// The flow named `name` (shown to the user) for `gateway`.
    pub fn new(name: impl Into<String>, gateway: &str) -> Self {
        Self {
            name: name.into(),
            gateway: normalize_gateway_url(gateway),
            callback_port: CALLBACK_PORT,
            via: None,
            http_client: None,
        }
    }

    /// Send every request to `<origin>/<host>/<path>` in place of `https://<host>/<path>`.
    pub fn routed_through(mut self, origin: impl Into<String>) -> Self {
        self.via = Some(origin.into());
        self
    }

    /// Listen for the browser's callback on another port (0: any).
    pub fn with_callback_port(mut self, port: u16) -> Self {
        self.callback_port = port;
        self
    }

    /// Send requests with `client`.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    fn url(&self, path: &str) -> String {
        route(self.via.as_deref(), &format!("{}{path}", self.gateway))
    }

    fn client(&self) -> Result<reqwest::Client, String> {
        web::client(self.http_client.as_ref())
    }

    async fn post_form(&self, path: &str, form: &[(&str, &str)]) -> Result<web::Answer, String> {
        let request = self
            .client()?
            .post(self.url(path))
            .header("accept", "application/json")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(crate::api::support::form_encode(form));
        web::send(request, web::REQUEST_TIMEOUT).await
    }

    fn failure(answer: &web::Answer, message: &str) -> TokenFailure {
        let text = String::from_utf8_lossy(&answer.body[..answer.body.len().min(4000)]).into_owned();
        let (oauth_error, description) = match serde_json::from_str::<Value>(&text) {
            Ok(json) => (text_field(&json, "error"), text_field(&json, "error_description")),
            Err(_) => (None, Some(text).filter(|t| !t.is_empty())),
        };
        let detail = match (&oauth_error, description) {
            (Some(error), Some(description)) => format!("{error}: {description}"),
            (Some(error), None) => error.clone(),
            (None, Some(description)) => description,
            (None, None) => answer.status.to_string(),
        };
        TokenFailure { oauth_error, message: format!("{message}: {detail}") }
    }

    /// A token request; the credential it grants.
    async fn token(&self, form: &[(&str, &str)]) -> Result<OAuthCredential, TokenFailure> {
        let plain = |message: String| TokenFailure { oauth_error: None, message };
        let answer = self.post_form("/v1/oauth/token", form).await.map_err(plain)?;
        if !answer.ok() {
            return Err(Self::failure(&answer, "Radius OAuth token request failed"));
        }
        let json = answer.json().unwrap_or(Value::Null);
        let (Some(access), Some(refresh), Some(expires_in)) = (
            text_field(&json, "access_token"),
            text_field(&json, "refresh_token"),
            json.get("expires_in").and_then(Value::as_f64),
        ) else {
            return Err(plain("Radius OAuth token response misses access_token, refresh_token or expires_in".into()));
        };
        let mut credential =
            OAuthCredential::new(access, refresh, expiry(web::now_ms(), expires_in, TOKEN_EXPIRY_SKEW_MS));
        if let Some(scope) = json.get("scope").filter(|s| s.is_string()) {
            credential.extra.insert("scope".into(), scope.clone());
        }
        Ok(credential)
    }

    async fn login_browser(&self, interaction: &dyn AuthInteraction) -> Result<OAuthCredential, AuthError> {
        let request =
            self.client().map_err(AuthError::Login)?.get(self.url("/v1/oauth")).header("accept", "application/json");
        let answer = web::send(request, web::REQUEST_TIMEOUT).await.map_err(AuthError::Login)?;
        let gateway = &self.gateway;
        if !answer.ok() {
            return Err(AuthError::Login(format!(
                "Could not load Radius OAuth config from {gateway}: {} {}",
                answer.status,
                answer.text()
            )));
        }
        let endpoint = trusted_http_url(answer.json().as_ref().and_then(|j| j.get("authorizationEndpoint")))
            .ok_or_else(|| AuthError::Login(format!("Invalid Radius OAuth config from {gateway}")))?;
        let pkce = Pkce::generate().map_err(AuthError::Login)?;
        let state = random_uuid().map_err(AuthError::Login)?;
        let server = CallbackServer::bind(CallbackServerOptions {
            provider_name: "Radius".into(),
            host: CALLBACK_HOST.into(),
            port: self.callback_port,
            path: CALLBACK_PATH.into(),
            redirect_host: None,
            state: Some(state.clone()),
            timeout: None,
        })
        .await?;
        let redirect_uri = server.redirect_uri().to_owned();
        let query = crate::api::support::form_encode(&[
            ("response_type", "code"),
            ("client_id", CLIENT_ID),
            ("redirect_uri", &redirect_uri),
            ("scope", SCOPE),
            ("code_challenge", &pkce.challenge),
            ("code_challenge_method", "S256"),
            ("handoff", "url"),
            ("state", &state),
        ]);
        let mut url = reqwest::Url::parse(&endpoint).map_err(|e| AuthError::Login(e.to_string()))?;
        url.set_query(Some(&query));
        interaction.notify(AuthEvent::Progress(format!("Listening for OAuth callback on {redirect_uri}")));
        interaction.notify(AuthEvent::AuthUrl {
            url: url.to_string(),
            instructions: Some("Continue in your browser.".into()),
        });
        let (pkce, redirect_uri) = (&pkce, &redirect_uri);
        server
            .wait(|code| async move {
                let form = [
                    ("grant_type", "authorization_code"),
                    ("client_id", CLIENT_ID),
                    ("redirect_uri", redirect_uri.as_str()),
                    ("code", code.as_str()),
                    ("code_verifier", pkce.verifier.expose()),
                ];
                self.token(&form).await.map_err(|f| AuthError::Login(f.message))
            })
            .await
    }

    async fn login_device(&self, interaction: &dyn AuthInteraction) -> Result<OAuthCredential, String> {
        let answer = self.post_form("/v1/oauth/device", &[("client_id", CLIENT_ID), ("scope", SCOPE)]).await?;
        if !answer.ok() {
            return Err(Self::failure(&answer, "Radius OAuth device authorization failed").message);
        }
        let json = answer.json().unwrap_or(Value::Null);
        let (Some(device_code), Some(user_code), Some(verification), Some(expires_in)) = (
            text_field(&json, "device_code"),
            text_field(&json, "user_code"),
            text_field(&json, "verification_uri"),
            positive_number(&json, "expires_in"),
        ) else {
            return Err("Radius OAuth device authorization response is missing required fields".into());
        };
        let verification_uri = trusted_http_url(Some(&json!(verification)))
            .ok_or("Untrusted verification_uri in Radius OAuth device authorization response")?;
        let interval = json.get("interval").and_then(Value::as_f64);
        interaction.notify(AuthEvent::DeviceCode {
            user_code,
            verification_uri,
            interval_seconds: interval.map(|i| i.max(0.0) as u64),
            expires_in_seconds: Some(expires_in as u64),
        });
        let form = [("grant_type", DEVICE_GRANT), ("client_id", CLIENT_ID), ("device_code", device_code.as_str())];
        poll_device_code(interval, Some(expires_in), false, || async {
            match self.token(&form).await {
                Ok(credential) => Ok(Poll::Complete(credential)),
                Err(failure) => match failure.oauth_error.as_deref() {
                    Some("authorization_pending") => Ok(Poll::Pending),
                    Some("slow_down") => Ok(Poll::SlowDown(None)),
                    Some("expired_token") => Ok(Poll::Failed("Device authorization expired.".into())),
                    Some("access_denied") => Ok(Poll::Failed("Device authorization was denied.".into())),
                    _ => Err(failure.message),
                },
            }
        })
        .await
    }
}

impl OAuthFlow for RadiusOAuth {
    fn name(&self) -> &str {
        &self.name
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move {
            let name = &self.name;
            let method = interaction
                .prompt(AuthPrompt::Select {
                    message: format!("Sign in to {name}:"),
                    options: vec![
                        ("browser".into(), "Sign in with browser (recommended)".into()),
                        ("device-code".into(), "Sign in with device code (when signing in from another device)".into()),
                    ],
                })
                .await?;
            match method.as_str() {
                "device-code" => self.login_device(interaction).await.map_err(AuthError::Login),
                "browser" => self.login_browser(interaction).await,
                other => Err(AuthError::Login(format!("Unknown {name} sign-in method: {other}"))),
            }
        })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move {
            let form = [
                ("grant_type", "refresh_token"),
                ("client_id", CLIENT_ID),
                ("refresh_token", credential.refresh.expose()),
            ];
            self.token(&form).await.map_err(|f| f.message)
        })
    }
}

/// The flow for the default gateway as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(RadiusOAuth::default())
}
