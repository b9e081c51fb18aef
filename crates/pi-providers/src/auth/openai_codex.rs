//! ChatGPT Plus/Pro sign-in for `openai-codex` behind the [`OAuthFlow`] seam. The user picks one
//! of two sign-ins, as in the reference:
//!
//! * Browser (the default): a callback server on `$PI_OAUTH_CALLBACK_HOST` (else `127.0.0.1`)
//!   port 1455 (shared with the Codex CLI: when it is taken, only a pasted code or redirect URL
//!   is waited for), redirect `http://localhost:1455/auth/callback`; the page
//!   `https://auth.openai.com/oauth/authorize` gets the Codex client id, the scopes, the PKCE
//!   S256 challenge, a random hex `state`, `id_token_add_organizations=true`,
//!   `codex_cli_simplified_flow=true` and `originator=pi`; the code is exchanged at
//!   `https://auth.openai.com/oauth/token` (form, `grant_type=authorization_code`, verifier).
//! * Device code: the sign-in of [`crate::auth::codex_login`].
//!
//! Refresh is [`crate::auth::codex`]'s. The stored credential keeps the reference's `accountId`
//! field (from the access token's claims).

use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::CancellationToken;
use serde_json::Value;

use super::anthropic::parse_authorization_input;
use super::callback::{callback_host, wait_for_callback_or_code, CallbackServer, CallbackServerOptions, Completion};
use super::pkce::random_hex16;
use super::{AuthError, AuthEvent, AuthInteraction, AuthPrompt, OAuthCredential, OAuthFlow, Pkce};
use crate::auth::codex::{token_grant, CodexCredential, CodexTokenStore, CLIENT_ID, TOKEN_URL};
use crate::auth::codex_login::DeviceLogin;

/// The browser sign-in's authorization page.
pub const AUTHORIZE_URL: &str = "https://auth.openai.com/oauth/authorize";
/// The browser sign-in's preferred callback port (the Codex CLI's).
pub const CALLBACK_PORT: u16 = 1455;
const CALLBACK_PATH: &str = "/auth/callback";
const SCOPE: &str = "openid profile email offline_access";

/// The flow, against the real sign-in host or a test's.
#[derive(Clone, Debug)]
pub struct OpenAICodexOAuth {
    device: DeviceLogin,
    token_url: String,
    authorize_url: String,
    callback_port: u16,
    http_client: Option<reqwest::Client>,
}

impl Default for OpenAICodexOAuth {
    fn default() -> Self {
        Self::new(DeviceLogin::default(), TOKEN_URL)
    }
}

impl OpenAICodexOAuth {
    /// Sign in with `device` (or the browser) and exchange codes and refresh at `token_url`.
    pub fn new(device: DeviceLogin, token_url: impl Into<String>) -> Self {
        Self {
            device,
            token_url: token_url.into(),
            authorize_url: AUTHORIZE_URL.into(),
            callback_port: CALLBACK_PORT,
            http_client: None,
        }
    }

    /// Send the browser sign-in to another authorization page.
    pub fn with_authorize_url(mut self, url: impl Into<String>) -> Self {
        self.authorize_url = url.into();
        self
    }

    /// Listen for the browser's callback on another port (0: any).
    pub fn with_callback_port(mut self, port: u16) -> Self {
        self.callback_port = port;
        self
    }

    /// Send the browser sign-in's requests with `client`.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    async fn login_device(&self, interaction: &dyn AuthInteraction) -> Result<OAuthCredential, AuthError> {
        let code = self.device.start().await.map_err(AuthError::Login)?;
        interaction.notify(AuthEvent::DeviceCode {
            user_code: code.user_code.clone(),
            verification_uri: code.verification_uri.clone(),
            interval_seconds: Some(code.interval.as_secs()),
            expires_in_seconds: Some(crate::auth::codex_login::DEVICE_CODE_TIMEOUT.as_secs()),
        });
        // Dropping this future cancels the wait; the token is never cancelled otherwise.
        let credential = self.device.finish(&code, &CancellationToken::new()).await.map_err(AuthError::Login)?;
        Ok(to_oauth(credential))
    }

    async fn login_browser(&self, interaction: &dyn AuthInteraction) -> Result<OAuthCredential, AuthError> {
        let pkce = Pkce::generate().map_err(AuthError::Login)?;
        let state = random_hex16().map_err(AuthError::Login)?;
        let server = CallbackServer::bind(CallbackServerOptions {
            provider_name: "OpenAI".into(),
            host: callback_host(),
            port: self.callback_port,
            path: CALLBACK_PATH.into(),
            redirect_host: Some("localhost".into()),
            state: Some(state.clone()),
            timeout: None,
        })
        .await
        .ok();
        let redirect_uri = server.as_ref().map_or_else(
            || format!("http://localhost:{CALLBACK_PORT}{CALLBACK_PATH}"),
            |s| s.redirect_uri().to_owned(),
        );
        let query = crate::api::support::form_encode(&[
            ("response_type", "code"),
            ("client_id", CLIENT_ID),
            ("redirect_uri", &redirect_uri),
            ("scope", SCOPE),
            ("code_challenge", &pkce.challenge),
            ("code_challenge_method", "S256"),
            ("state", &state),
            ("id_token_add_organizations", "true"),
            ("codex_cli_simplified_flow", "true"),
            ("originator", "pi"),
        ]);
        interaction.notify(AuthEvent::AuthUrl {
            url: format!("{}?{query}", self.authorize_url),
            instructions: Some("A browser window should open. Complete login to finish.".into()),
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
        let code = match outcome {
            Completion::Callback(code) => Some(code),
            Completion::Manual(input) => {
                let (code, pasted_state) = parse_authorization_input(&input);
                if pasted_state.is_some_and(|s| s != state) {
                    return Err(AuthError::Login("State mismatch".into()));
                }
                code
            }
        };
        let code =
            code.filter(|c| !c.is_empty()).ok_or_else(|| AuthError::Login("Missing authorization code".into()))?;
        let client = super::web::client(self.http_client.as_ref()).map_err(AuthError::Login)?;
        let form = [
            ("grant_type", "authorization_code"),
            ("client_id", CLIENT_ID),
            ("code", code.as_str()),
            ("code_verifier", pkce.verifier.expose()),
            ("redirect_uri", redirect_uri.as_str()),
        ];
        let credential = token_grant(&client, &self.token_url, &form, "exchange").await.map_err(AuthError::Login)?;
        Ok(to_oauth(credential))
    }
}

fn to_oauth(credential: CodexCredential) -> OAuthCredential {
    let mut oauth = OAuthCredential::new(credential.access, credential.refresh, credential.expires);
    oauth.extra.insert("accountId".into(), Value::String(credential.account_id));
    oauth
}

impl OAuthFlow for OpenAICodexOAuth {
    fn name(&self) -> &str {
        "OpenAI (ChatGPT Plus/Pro)"
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move {
            let method = interaction
                .prompt(AuthPrompt::Select {
                    message: "Select OpenAI Codex login method:".into(),
                    options: vec![
                        ("browser".into(), "Browser login (default)".into()),
                        ("device_code".into(), "Device code login (headless)".into()),
                    ],
                })
                .await?;
            match method.as_str() {
                "browser" => self.login_browser(interaction).await,
                "device_code" => self.login_device(interaction).await,
                other => Err(AuthError::Login(format!("Unknown OpenAI Codex login method: {other}"))),
            }
        })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move {
            // The store is only used for its refresh request; no file is read or written.
            let store = CodexTokenStore::new("").with_token_url(self.token_url.clone());
            store.refresh(credential.refresh.expose()).await.map(to_oauth)
        })
    }
}

/// The flow as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(OpenAICodexOAuth::default())
}
