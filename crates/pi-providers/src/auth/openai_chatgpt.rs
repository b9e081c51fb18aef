//! Sign in with ChatGPT for `openai` (the Responses API at `api.openai.com` with a ChatGPT
//! subscription's token), as the reference's flow does it:
//!
//! 1. Every sign-in registers a new OAuth client (`client_id=dynamic_agent_client`) for this
//!    installation (`ext_agent_host_id=urn:uuid:<device id>`, named by `agent_name_hint=Pi`).
//! 2. A callback server listens on `$PI_OAUTH_CALLBACK_HOST` (else `127.0.0.1`) port 1455;
//!    redirect `http://127.0.0.1:1455/auth/callback`. The page
//!    `https://auth.openai.com/api/accounts/authorize` gets the redirect,
//!    `resource=https://api.openai.com/v1`, the scopes (with `chatgpt.tokens.use.direct`), a
//!    random `state` and `nonce` and the PKCE S256 challenge.
//! 3. The callback (or the pasted redirect URL) carries the code, the state and the issued
//!    `client_id`; the code is exchanged at `https://auth.openai.com/api/accounts/oauth/token`
//!    (form, `grant_type=authorization_code`, issued client id, verifier, redirect, resource),
//!    whose answer must hold an ID token and grant `chatgpt.tokens.use.direct`.
//! 4. Refresh: the same endpoint with `grant_type=refresh_token`, the stored `clientId` and the
//!    resource. Expiry is `expires_in` less three minutes; `clientId` and `scopes` are stored.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::callback::{callback_host, CallbackServer, CallbackServerOptions};
use super::pkce::{random_base64url32, random_uuid};
use super::web::{self, expiry, post_form};
use super::{AuthError, AuthEvent, AuthInteraction, AuthPrompt, OAuthCredential, OAuthFlow, Pkce};

/// The authorization page.
pub const AUTHORIZE_URL: &str = "https://auth.openai.com/api/accounts/authorize";
/// The token endpoint.
pub const TOKEN_URL: &str = "https://auth.openai.com/api/accounts/oauth/token";
/// The preferred callback port.
pub const CALLBACK_PORT: u16 = 1455;
const DYNAMIC_CLIENT_ID: &str = "dynamic_agent_client";
const AGENT_NAME_HINT: &str = "Pi";
const RESOURCE: &str = "https://api.openai.com/v1";
const CALLBACK_PATH: &str = "/auth/callback";
const DIRECT_TOKEN_SCOPE: &str = "chatgpt.tokens.use.direct";
const SCOPE: &str = "openid profile email offline_access resource.invoke chatgpt.tokens.use.direct";
const EXPIRY_MARGIN_MS: u64 = 3 * 60 * 1000;

/// The flow, against the real endpoints or a test's.
#[derive(Clone, Debug)]
pub struct OpenAIChatGPTOAuth {
    authorize_url: String,
    token_url: String,
    callback_port: u16,
    device_id: Option<String>,
    agent_name: String,
    http_client: Option<reqwest::Client>,
}

impl Default for OpenAIChatGPTOAuth {
    fn default() -> Self {
        Self {
            authorize_url: AUTHORIZE_URL.into(),
            token_url: TOKEN_URL.into(),
            callback_port: CALLBACK_PORT,
            device_id: None,
            agent_name: AGENT_NAME_HINT.into(),
            http_client: None,
        }
    }
}

/// `uuid` as the reference's agent host id, `urn:uuid:<lowercase uuid>`.
fn agent_host_id(uuid: &str) -> Result<String, AuthError> {
    let is_uuid = uuid.len() == 36
        && uuid
            .char_indices()
            .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() });
    if !is_uuid {
        return Err(AuthError::Login("Sign in with ChatGPT requires a device ID (UUID) for this installation".into()));
    }
    Ok(format!("urn:uuid:{}", uuid.to_ascii_lowercase()))
}

/// The code and issued client id of a callback's parameters.
fn authorization_result(params: &[(String, String)], expected_state: &str) -> Result<(String, String), String> {
    let param = |key: &str| params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty());
    let code = param("code").ok_or("Missing authorization code")?;
    let state = param("state").ok_or("Missing OAuth state")?;
    if state != expected_state {
        return Err("OAuth state mismatch".into());
    }
    let client_id = param("client_id")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .ok_or("OpenAI OAuth registration callback did not contain an issued client ID")?;
    Ok((code.to_owned(), client_id.to_owned()))
}

/// A pasted redirect URL: it must be the redirect, with a code, the state and a client id.
fn manual_result(input: &str, redirect_uri: &str, expected_state: &str) -> Result<(String, String), String> {
    let url = reqwest::Url::parse(input.trim()).map_err(|_| "Paste the full callback URL from the browser")?;
    let expected = reqwest::Url::parse(redirect_uri).map_err(|e| e.to_string())?;
    if url.origin() != expected.origin() || url.path() != expected.path() {
        return Err(format!("The pasted callback URL must start with {redirect_uri}"));
    }
    let params: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    if let Some((_, error)) = params.iter().find(|(k, _)| k == "error") {
        return Err(format!("ChatGPT authorization failed: {error}"));
    }
    authorization_result(&params, expected_state)
}

impl OpenAIChatGPTOAuth {
    /// Use other endpoints (a test server).
    pub fn with_endpoints(mut self, authorize_url: impl Into<String>, token_url: impl Into<String>) -> Self {
        self.authorize_url = authorize_url.into();
        self.token_url = token_url.into();
        self
    }

    /// Listen for the browser's callback on another port (0: any).
    pub fn with_callback_port(mut self, port: u16) -> Self {
        self.callback_port = port;
        self
    }

    /// Identify this installation by `uuid` (default: a new random one per sign-in, as the
    /// reference's own command line does).
    pub fn with_device_id(mut self, uuid: impl Into<String>) -> Self {
        self.device_id = Some(uuid.into());
        self
    }

    /// Name the agent on OpenAI's consent page (default `Pi`).
    pub fn with_agent_name(mut self, name: impl Into<String>) -> Self {
        self.agent_name = name.into();
        self
    }

    /// Send requests with `client`.
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// A token request; the credential it grants to `client_id`.
    async fn token(
        &self,
        form: &[(&str, &str)],
        client_id: &str,
        need_id_token: bool,
    ) -> Result<OAuthCredential, String> {
        let client = web::client(self.http_client.as_ref())?;
        let answer = post_form(&client, &self.token_url, form, web::REQUEST_TIMEOUT).await?;
        if !answer.ok() {
            let text = answer.text();
            let reason = reqwest::StatusCode::from_u16(answer.status).ok().and_then(|s| s.canonical_reason());
            let text = if text.is_empty() { reason.unwrap_or("").to_owned() } else { text };
            return Err(format!("OpenAI OAuth token request failed ({}): {text}", answer.status));
        }
        let json = answer.json().filter(Value::is_object).ok_or("OpenAI OAuth token response must be an object")?;
        let string = |field: &str| {
            json.get(field)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
                .ok_or_else(|| format!("OpenAI OAuth token response has invalid {field}"))
        };
        if need_id_token && string("id_token").is_err() {
            return Err("OpenAI OAuth token response did not contain an ID token".into());
        }
        let access = string("access_token")?;
        let refresh = string("refresh_token")?;
        let scope = string("scope")?;
        let expires_in = web::positive_number(&json, "expires_in")
            .ok_or_else(|| "OpenAI OAuth token response has invalid expires_in".to_owned())?;
        let scopes: Vec<&str> = scope.split_whitespace().collect();
        if !scopes.contains(&DIRECT_TOKEN_SCOPE) {
            return Err(format!("OpenAI OAuth grant did not include {DIRECT_TOKEN_SCOPE}"));
        }
        let mut credential = OAuthCredential::new(access, refresh, expiry(web::now_ms(), expires_in, EXPIRY_MARGIN_MS));
        credential.extra.insert("clientId".into(), json!(client_id));
        credential.extra.insert("scopes".into(), json!(scopes));
        Ok(credential)
    }
}

impl OAuthFlow for OpenAIChatGPTOAuth {
    fn name(&self) -> &str {
        "OpenAI (ChatGPT subscription)"
    }

    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>> {
        Box::pin(async move {
            let device_id = match &self.device_id {
                Some(id) => id.clone(),
                None => random_uuid().map_err(AuthError::Login)?,
            };
            let host_id = agent_host_id(&device_id)?;
            let pkce = Pkce::generate().map_err(AuthError::Login)?;
            let state = random_base64url32().map_err(AuthError::Login)?;
            let nonce = random_base64url32().map_err(AuthError::Login)?;
            let port = self.callback_port;
            let server = CallbackServer::bind(CallbackServerOptions {
                provider_name: "ChatGPT".into(),
                host: callback_host(),
                port,
                path: CALLBACK_PATH.into(),
                redirect_host: Some("127.0.0.1".into()),
                state: Some(state.clone()),
                timeout: None,
            })
            .await
            .map_err(|_| {
                AuthError::Login(format!(
                    "Port {port} is in use, probably by an unfinished login in another pi session or by the Codex \
                     CLI. Cancel that login and try again."
                ))
            })?;
            let redirect_uri = server.redirect_uri().to_owned();
            let query = crate::api::support::form_encode(&[
                ("client_id", DYNAMIC_CLIENT_ID),
                ("agent_name_hint", &self.agent_name),
                ("ext_agent_host_id", &host_id),
                ("response_type", "code"),
                ("redirect_uri", &redirect_uri),
                ("resource", RESOURCE),
                ("scope", SCOPE),
                ("state", &state),
                ("code_challenge", &pkce.challenge),
                ("code_challenge_method", "S256"),
                ("nonce", &nonce),
            ]);
            interaction.notify(AuthEvent::AuthUrl {
                url: format!("{}?{query}", self.authorize_url),
                instructions: Some(
                    "Complete sign-in in your browser. If the callback does not complete, paste the final redirect \
                     URL here."
                        .into(),
                ),
            });
            let prompt = interaction.prompt(AuthPrompt::ManualCode {
                message: "Complete login in your browser, or paste the final redirect URL here:".into(),
                placeholder: Some(redirect_uri.clone()),
            });
            let state_ref = state.as_str();
            let (code, client_id) = tokio::select! {
                result = server.wait_with_params(|_, params| async move {
                    authorization_result(&params, state_ref).map_err(AuthError::Login)
                }) => result?,
                input = prompt => manual_result(&input?, &redirect_uri, &state).map_err(AuthError::Login)?,
            };
            drop(server);
            interaction.notify(AuthEvent::Progress("Exchanging authorization code for tokens...".into()));
            let form = [
                ("grant_type", "authorization_code"),
                ("client_id", client_id.as_str()),
                ("code", code.as_str()),
                ("code_verifier", pkce.verifier.expose()),
                ("redirect_uri", redirect_uri.as_str()),
                ("resource", RESOURCE),
            ];
            self.token(&form, &client_id, true).await.map_err(AuthError::Login)
        })
    }

    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>> {
        Box::pin(async move {
            let client_id = credential.extra_str("clientId").map(str::trim).filter(|c| !c.is_empty()).ok_or(
                "Stored OpenAI OAuth credential does not contain an issued client ID; reconnect ChatGPT".to_owned(),
            )?;
            let form = [
                ("grant_type", "refresh_token"),
                ("client_id", client_id),
                ("refresh_token", credential.refresh.expose()),
                ("resource", RESOURCE),
            ];
            self.token(&form, client_id, false).await
        })
    }
}

/// The flow as a shared [`OAuthFlow`].
pub fn flow() -> Arc<dyn OAuthFlow> {
    Arc::new(OpenAIChatGPTOAuth::default())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pasted_redirects_and_device_ids_are_checked() {
        let redirect = "http://127.0.0.1:1455/auth/callback";
        let ok = manual_result("http://127.0.0.1:1455/auth/callback?code=c&state=s&client_id=app_1", redirect, "s");
        assert_eq!(ok, Ok(("c".into(), "app_1".into())));
        let elsewhere = manual_result("http://localhost:1455/auth/callback?code=c&state=s", redirect, "s");
        assert_eq!(elsewhere.unwrap_err(), format!("The pasted callback URL must start with {redirect}"));
        let no_client = manual_result(&format!("{redirect}?code=c&state=s"), redirect, "s");
        assert_eq!(no_client.unwrap_err(), "OpenAI OAuth registration callback did not contain an issued client ID");
        assert_eq!(
            manual_result(&format!("{redirect}?code=c&state=x&client_id=a"), redirect, "s").unwrap_err(),
            "OAuth state mismatch"
        );
        assert_eq!(
            manual_result(&format!("{redirect}?error=denied"), redirect, "s").unwrap_err(),
            "ChatGPT authorization failed: denied"
        );
        assert_eq!(
            agent_host_id("0F8FAD5B-D9CB-469F-A165-70867728950E").unwrap(),
            "urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e"
        );
        assert!(agent_host_id("not-a-uuid").is_err());
    }
}
