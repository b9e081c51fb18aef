//! OpenRouter sign-in (`openrouter`): PKCE to a permanent API key, as the reference does it.
//!
//! 1. A callback server listens on a free loopback port at `/oauth/callback/<random uuid>`
//!    (OpenRouter sends no `state`; the random path keeps stray requests out), for five minutes.
//! 2. The user opens `https://openrouter.ai/auth?callback_url=...&code_challenge=...&
//!    code_challenge_method=S256`.
//! 3. The code (from the callback, or pasted) is exchanged by a JSON POST of `{code,
//!    code_verifier, code_challenge_method: "S256"}` to `https://openrouter.ai/api/v1/auth/keys`,
//!    whose `key` is stored as an OAuth credential that never expires (empty refresh token).
//!    Refresh returns the credential unchanged.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::callback::{callback_host, wait_for_callback_or_code, CallbackServer, CallbackServerOptions, Completion};
use super::pkce::random_uuid;
use super::web::{self, text_field};
use super::{AuthError, AuthEvent, AuthInteraction, OAuthCredential, OAuthFlow, Pkce};

/// The authorization page.
pub const AUTHORIZE_URL: &str = "https://openrouter.ai/auth";
/// The key endpoint.
pub const TOKEN_URL: &str = "https://openrouter.ai/api/v1/auth/keys";
const LOGIN_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// `Number.MAX_SAFE_INTEGER`, the reference's "never expires".
const NEVER: u64 = 9_007_199_254_740_991;

/// The flow, against the real endpoints or a test's.
#[derive(Clone, Debug)]
pub struct OpenRouterOAuth {
    authorize_url: String,
    token_url: String,
    http_client: Option<reqwest::Client>,
}

impl Default for OpenRouterOAuth {
    fn default() -> Self {
        Self { authorize_url: AUTHORIZE_URL.into(), token_url: TOKEN_URL.into(), http_client: None }
    }
}

fn parse_authorization_input(input: &str) -> Option<String> {
    let value = input.trim();
    if value.is_empty() {
        return None;
    }
    let code = |pairs: Vec<(String, String)>| pairs.into_iter().find(|(k, _)| k == "code").map(|(_, v)| v);
    if let Ok(url) = reqwest::Url::parse(value) {
        return code(url.query_pairs().into_owned().collect());
    }
    if value.contains("code=") {
        return code(form_urlencoded::parse(value.as_bytes()).into_owned().collect());
    }
    Some(value.to_owned())
}

/// The reference's `errorDetail`: the most specific message of an error answer.
fn error_detail(body: &Value) -> Option<String> {
    text_field(body, "error_description")
        .or_else(|| text_field(body, "message"))
        .or_else(|| text_field(body, "error"))
        .or_else(|| body.get("error").and_then(|e| text_field(e, "message")))
}

impl OpenRouterOAuth {
    /// Use other endpoints (a test server).
    pub fn with_endpoints(mut self, authorize_url: impl Into<String>, token_url: impl Into<String>) -> Self {
        self.authorize_url = authorize_url.into();
        self.token_url = token_url.into();
        self
    }

    /// Send requests with `client`.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    async fn exchange(&self, code: &str, pkce: &Pkce) -> Result<OAuthCredential, AuthError> {
        let client = web::client(self.http_client.as_ref()).map_err(AuthError::Login)?;
        let body = json!({ "code": code, "code_verifier": pkce.verifier.expose(), "code_challenge_method": "S256" });
        let request = client
            .post(&self.token_url)
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .body(body.to_string());
        let answer = web::send(request, web::REQUEST_TIMEOUT).await.map_err(|e| {
            AuthError::Login(if e.contains("timeout") { "OpenRouter OAuth token exchange timed out".into() } else { e })
        })?;
        let json = answer.json().filter(Value::is_object);
        if !answer.ok() {
            let detail = json.as_ref().and_then(error_detail).map(|d| format!(": {d}")).unwrap_or_default();
            return Err(AuthError::Login(format!(
                "OpenRouter OAuth key exchange failed (HTTP {}){detail}",
                answer.status
            )));
        }
        let json = json.ok_or_else(|| AuthError::Login("OpenRouter OAuth returned invalid JSON".into()))?;
        let key = text_field(&json, "key")
            .ok_or_else(|| AuthError::Login("OpenRouter OAuth response carries no \"key\"".into()))?;
        Ok(OAuthCredential::new(key, "", NEVER))
    }
}

impl OAuthFlow for OpenRouterOAuth {
    fn name(&self) -> &str {
        "OpenRouter OAuth"
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move {
            let pkce = Pkce::generate().map_err(AuthError::Login)?;
            let server = CallbackServer::bind(CallbackServerOptions {
                provider_name: "OpenRouter".into(),
                host: callback_host(),
                port: 0,
                path: format!("/oauth/callback/{}", random_uuid().map_err(AuthError::Login)?),
                redirect_host: None,
                state: None,
                timeout: Some(LOGIN_TIMEOUT),
            })
            .await?;
            let redirect_uri = server.redirect_uri().to_owned();
            let pkce = &pkce;
            let query = crate::api::support::form_encode(&[
                ("callback_url", redirect_uri.as_str()),
                ("code_challenge", pkce.challenge.as_str()),
                ("code_challenge_method", "S256"),
            ]);
            interaction
                .notify(AuthEvent::Progress(format!("Listening for OpenRouter OAuth callback on {redirect_uri}")));
            interaction.notify(AuthEvent::AuthUrl {
                url: format!("{}?{query}", self.authorize_url),
                instructions: Some(
                    "Complete sign-in in your browser. If the browser is on another machine, paste the final \
                     redirect URL here."
                        .into(),
                ),
            });
            let outcome = wait_for_callback_or_code(
                interaction,
                Some(&server),
                move |code| async move { self.exchange(&code, pkce).await },
                "Complete sign-in in your browser, or paste the authorization code / redirect URL here:",
                &redirect_uri,
            )
            .await?;
            match outcome {
                Completion::Callback(credential) => Ok(credential),
                Completion::Manual(input) => {
                    let code = parse_authorization_input(&input)
                        .ok_or_else(|| AuthError::Login("Missing authorization code".into()))?;
                    interaction.notify(AuthEvent::Progress("Exchanging authorization code for an API key...".into()));
                    self.exchange(&code, pkce).await
                }
            }
        })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move { Ok(credential.clone()) })
    }
}

/// The flow as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(OpenRouterOAuth::default())
}
