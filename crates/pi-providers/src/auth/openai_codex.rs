//! ChatGPT sign-in for `openai-codex` behind the [`OAuthFlow`] seam: the device-code sign-in of
//! [`crate::auth::codex_login`] and the refresh of [`crate::auth::codex`]. The stored credential keeps
//! the reference's `accountId` field.

use std::sync::Arc;

use futures::future::BoxFuture;
use pi_types::CancellationToken;
use serde_json::Value;

use super::{AuthError, AuthEvent, AuthInteraction, OAuthCredential, OAuthFlow};
use crate::auth::codex::{CodexCredential, CodexTokenStore, TOKEN_URL};
use crate::auth::codex_login::DeviceLogin;

/// The flow, against the real sign-in host or a test's.
#[derive(Clone, Debug)]
pub struct OpenAICodexOAuth {
    device: DeviceLogin,
    token_url: String,
}

impl Default for OpenAICodexOAuth {
    fn default() -> Self {
        Self { device: DeviceLogin::default(), token_url: TOKEN_URL.into() }
    }
}

impl OpenAICodexOAuth {
    /// Sign in with `device` and refresh at `token_url`.
    pub fn new(device: DeviceLogin, token_url: impl Into<String>) -> Self {
        Self { device, token_url: token_url.into() }
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
            let code = self.device.start().await.map_err(AuthError::Login)?;
            interaction.notify(AuthEvent::DeviceCode {
                user_code: code.user_code.clone(),
                verification_uri: code.verification_uri.clone(),
                interval_seconds: Some(code.interval.as_secs()),
                expires_in_seconds: None,
            });
            // Dropping this future cancels the wait; the token is never cancelled otherwise.
            let credential = self.device.finish(&code, &CancellationToken::new()).await.map_err(AuthError::Login)?;
            Ok(to_oauth(credential))
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
