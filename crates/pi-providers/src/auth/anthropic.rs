//! Claude Pro/Max sign-in (`anthropic`), as the reference's flow does it:
//!
//! 1. The user picks the browser login or the copy-code login (headless).
//! 2. Browser: a callback server listens on `127.0.0.1:53692` (any free port when that one is
//!    taken; none at all when binding fails, the redirect URL is then pasted), redirect
//!    `http://localhost:<port>/callback`. Copy code: redirect
//!    `https://platform.claude.com/oauth/code/callback`, the user pastes `code#state`.
//! 3. The authorization URL `https://claude.ai/oauth/authorize` carries `code=true`, the client
//!    id, `response_type=code`, the redirect, the scopes, the PKCE S256 challenge, and the
//!    verifier as `state`.
//! 4. The code is exchanged by a JSON POST to `https://platform.claude.com/v1/oauth/token`
//!    (`grant_type=authorization_code`, client id, code, state, redirect, verifier).
//! 5. Refresh: the same endpoint with `grant_type=refresh_token`. Expiry is `expires_in` less
//!    five minutes. The access token is the request's key.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::callback::{callback_host, wait_for_callback_or_code, CallbackServer, CallbackServerOptions, Completion};
use super::web::{self, expiry, text_field};
use super::{AuthError, AuthEvent, AuthInteraction, AuthPrompt, OAuthCredential, OAuthFlow, Pkce};

/// The public OAuth client id.
pub const CLIENT_ID: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";
/// The authorization page.
pub const AUTHORIZE_URL: &str = "https://claude.ai/oauth/authorize";
/// The token endpoint.
pub const TOKEN_URL: &str = "https://platform.claude.com/v1/oauth/token";
/// The preferred callback port.
pub const CALLBACK_PORT: u16 = 53692;
const CALLBACK_PATH: &str = "/callback";
const COPY_CODE_REDIRECT_URI: &str = "https://platform.claude.com/oauth/code/callback";
const SCOPES: &str =
    "org:create_api_key user:profile user:inference user:sessions:claude_code user:mcp_servers user:file_upload";
const FIVE_MINUTES_MS: u64 = 5 * 60 * 1000;

/// The flow, against the real endpoints or a test's.
#[derive(Clone, Debug)]
pub struct AnthropicOAuth {
    authorize_url: String,
    token_url: String,
    callback_port: u16,
    http_client: Option<reqwest::Client>,
}

impl Default for AnthropicOAuth {
    fn default() -> Self {
        Self {
            authorize_url: AUTHORIZE_URL.into(),
            token_url: TOKEN_URL.into(),
            callback_port: CALLBACK_PORT,
            http_client: None,
        }
    }
}

/// A pasted code: a redirect URL, `code#state`, a query, or the bare code.
pub(crate) fn parse_authorization_input(input: &str) -> (Option<String>, Option<String>) {
    let value = input.trim();
    if value.is_empty() {
        return (None, None);
    }
    let from_pairs = |pairs: Vec<(String, String)>| {
        let get = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        (get("code"), get("state"))
    };
    if let Ok(url) = reqwest::Url::parse(value) {
        return from_pairs(url.query_pairs().into_owned().collect());
    }
    if let Some((code, state)) = value.split_once('#') {
        return (Some(code.to_owned()), Some(state.to_owned()));
    }
    if value.contains("code=") {
        return from_pairs(form_urlencoded::parse(value.as_bytes()).into_owned().collect());
    }
    (Some(value.to_owned()), None)
}

impl AnthropicOAuth {
    /// Send the user to another authorization page and exchange codes at another endpoint.
    pub fn with_endpoints(mut self, authorize_url: impl Into<String>, token_url: impl Into<String>) -> Self {
        self.authorize_url = authorize_url.into();
        self.token_url = token_url.into();
        self
    }

    /// Prefer another callback port (0: any).
    pub fn with_callback_port(mut self, port: u16) -> Self {
        self.callback_port = port;
        self
    }

    /// Send requests with `client`.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    fn authorize_url(&self, pkce: &Pkce, redirect_uri: &str) -> String {
        let query = crate::api::support::form_encode(&[
            ("code", "true"),
            ("client_id", CLIENT_ID),
            ("response_type", "code"),
            ("redirect_uri", redirect_uri),
            ("scope", SCOPES),
            ("code_challenge", &pkce.challenge),
            ("code_challenge_method", "S256"),
            ("state", pkce.verifier.expose()),
        ]);
        format!("{}?{query}", self.authorize_url)
    }

    /// A JSON POST to the token endpoint; the credential it grants.
    async fn token_request(&self, body: Value, what: &str) -> Result<OAuthCredential, String> {
        let client = web::client(self.http_client.as_ref())?;
        let request = client
            .post(&self.token_url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .body(body.to_string());
        let url = &self.token_url;
        let answer = web::send(request, web::REQUEST_TIMEOUT)
            .await
            .map_err(|e| format!("{what} request failed. url={url}; details={e}"))?;
        if !answer.ok() {
            return Err(format!(
                "{what} request failed. url={url}; details=HTTP request failed. status={}; body={}",
                answer.status,
                answer.text()
            ));
        }
        let json = answer.json().ok_or_else(|| format!("{what} returned invalid JSON. url={url}"))?;
        let expires_in = json.get("expires_in").and_then(Value::as_f64);
        match (text_field(&json, "access_token"), text_field(&json, "refresh_token"), expires_in) {
            (Some(access), Some(refresh), Some(expires_in)) => {
                Ok(OAuthCredential::new(access, refresh, expiry(web::now_ms(), expires_in, FIVE_MINUTES_MS)))
            }
            _ => Err(format!("{what} response misses access_token, refresh_token or expires_in. url={url}")),
        }
    }

    async fn exchange(
        &self,
        code: &str,
        state: &str,
        pkce: &Pkce,
        redirect_uri: &str,
    ) -> Result<OAuthCredential, AuthError> {
        let body = json!({
            "grant_type": "authorization_code",
            "client_id": CLIENT_ID,
            "code": code,
            "state": state,
            "redirect_uri": redirect_uri,
            "code_verifier": pkce.verifier.expose(),
        });
        self.token_request(body, "Token exchange")
            .await
            .map_err(|e| AuthError::Login(format!("{e}; redirect_uri={redirect_uri}")))
    }

    async fn login_browser(&self, interaction: &dyn AuthInteraction) -> Result<OAuthCredential, AuthError> {
        let pkce = Pkce::generate().map_err(AuthError::Login)?;
        let options = |port| CallbackServerOptions {
            provider_name: "Anthropic".into(),
            host: callback_host(),
            port,
            path: CALLBACK_PATH.into(),
            redirect_host: Some("localhost".into()),
            state: Some(pkce.verifier.expose().to_owned()),
            timeout: None,
        };
        let server = match CallbackServer::bind(options(self.callback_port)).await {
            Ok(server) => Some(server),
            Err(_) => CallbackServer::bind(options(0)).await.ok(),
        };
        let redirect_uri = server.as_ref().map_or_else(
            || format!("http://localhost:{CALLBACK_PORT}{CALLBACK_PATH}"),
            |s| s.redirect_uri().to_owned(),
        );
        interaction.notify(AuthEvent::AuthUrl {
            url: self.authorize_url(&pkce, &redirect_uri),
            instructions: Some(
                "Complete login in your browser. If the browser is on another machine, paste the final redirect URL \
                 here."
                    .into(),
            ),
        });
        let outcome = wait_for_callback_or_code(
            interaction,
            server.as_ref(),
            |code| async move { Ok(code) },
            "Complete login in your browser, or paste the authorization code / redirect URL here:",
            &redirect_uri,
        )
        .await?;
        drop(server);
        let verifier = pkce.verifier.expose().to_owned();
        let (code, state) = match outcome {
            Completion::Callback(code) => (Some(code), verifier),
            Completion::Manual(input) => {
                let (code, state) = parse_authorization_input(&input);
                if state.as_deref().is_some_and(|s| s != verifier) {
                    return Err(AuthError::Login("OAuth state mismatch".into()));
                }
                (code, state.unwrap_or(verifier))
            }
        };
        let code =
            code.filter(|c| !c.is_empty()).ok_or_else(|| AuthError::Login("Missing authorization code".into()))?;
        interaction.notify(AuthEvent::Progress("Exchanging authorization code for tokens...".into()));
        self.exchange(&code, &state, &pkce, &redirect_uri).await
    }

    async fn login_copy_code(&self, interaction: &dyn AuthInteraction) -> Result<OAuthCredential, AuthError> {
        let pkce = Pkce::generate().map_err(AuthError::Login)?;
        interaction.notify(AuthEvent::AuthUrl {
            url: self.authorize_url(&pkce, COPY_CODE_REDIRECT_URI),
            instructions: Some(
                "Complete login in your browser, then copy the code Anthropic shows and paste it here.".into(),
            ),
        });
        let input = interaction
            .prompt(AuthPrompt::ManualCode {
                message: "Paste the code Anthropic shows after you sign in:".into(),
                placeholder: Some("code#state".into()),
            })
            .await?;
        let (code, state) = parse_authorization_input(&input);
        let verifier = pkce.verifier.expose();
        if state.as_deref().is_some_and(|s| s != verifier) {
            return Err(AuthError::Login("OAuth state mismatch".into()));
        }
        let code =
            code.filter(|c| !c.is_empty()).ok_or_else(|| AuthError::Login("Missing authorization code".into()))?;
        interaction.notify(AuthEvent::Progress("Exchanging authorization code for tokens...".into()));
        let state = state.unwrap_or_else(|| verifier.to_owned());
        self.exchange(&code, &state, &pkce, COPY_CODE_REDIRECT_URI).await
    }
}

impl OAuthFlow for AnthropicOAuth {
    fn name(&self) -> &str {
        "Anthropic (Claude Pro/Max)"
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move {
            let method = interaction
                .prompt(AuthPrompt::Select {
                    message: "Select Anthropic login method:".into(),
                    options: vec![
                        ("browser".into(), "Browser login (default)".into()),
                        ("copy_code".into(), "Copy code login (headless)".into()),
                    ],
                })
                .await?;
            match method.as_str() {
                "browser" => self.login_browser(interaction).await,
                "copy_code" => self.login_copy_code(interaction).await,
                other => Err(AuthError::Login(format!("Unknown Anthropic login method: {other}"))),
            }
        })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move {
            let body = json!({
                "grant_type": "refresh_token",
                "client_id": CLIENT_ID,
                "refresh_token": credential.refresh.expose(),
            });
            self.token_request(body, "Anthropic token refresh").await
        })
    }
}

/// The flow as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(AnthropicOAuth::default())
}

#[cfg(test)]
mod tests {
    use super::parse_authorization_input as parse;

    #[test]
    fn pasted_codes_are_read_as_the_reference_reads_them() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(parse("http://localhost:1/callback?code=c1&state=s1"), (some("c1"), some("s1")));
        assert_eq!(parse(" c2#s2 "), (some("c2"), some("s2")));
        assert_eq!(parse("code=c3&state=s3"), (some("c3"), some("s3")));
        assert_eq!(parse("c4"), (some("c4"), None));
        assert_eq!(parse("  "), (None, None));
    }
}
