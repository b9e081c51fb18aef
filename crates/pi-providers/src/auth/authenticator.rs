//! Resolving a provider's request auth from a store, the environment and the OAuth flows, as
//! the reference's `resolveProviderAuth` does:
//!
//! * a stored credential owns the provider: the environment is consulted only when nothing is
//!   stored, never after a failed refresh;
//! * an OAuth token with less than five minutes left is refreshed inside the store's `modify`,
//!   which re-checks the expiry under the lock (so concurrent requests refresh once) and keeps
//!   the old credential when the refresh fails;
//! * `check_auth` and `available` only look: no refresh, no network.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::{
    ApiKeyCredential, AuthError, AuthInteraction, AuthPrompt, Credential, CredentialKind, CredentialStore,
    OAuthCredential, Secret,
};

/// A token with less than this left is refreshed before use (the reference's five minutes).
pub const MIN_OAUTH_VALIDITY_MS: u64 = 5 * 60 * 1000;
/// Longest wait for a refresh (the reference's 15 seconds).
const REFRESH_TIMEOUT: Duration = Duration::from_secs(15);

/// Auth for one model request. `Debug` names the headers but not their values (Kimi's
/// `Authorization` header carries the token).
#[derive(Clone, Default, PartialEq)]
pub struct ModelAuth {
    /// The key or access token.
    pub api_key: Option<Secret>,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// A per-credential endpoint (GitHub Copilot's per-account base URL).
    pub base_url: Option<String>,
}

impl fmt::Debug for ModelAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelAuth")
            .field("api_key", &self.api_key)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("base_url", &self.base_url)
            .finish()
    }
}

/// Resolved auth and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthResult {
    /// The request auth.
    pub auth: ModelAuth,
    /// Provider-scoped settings from the stored credential.
    pub env: Option<BTreeMap<String, String>>,
    /// For status displays: `OAuth`, `stored credential` or the environment variable's name.
    pub source: String,
}

/// Whether a provider is usable, without resolving anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthCheck {
    /// The credential's kind.
    pub kind: CredentialKind,
    /// `OAuth`, `stored credential` or the environment variable's name.
    pub source: String,
}

/// A provider's OAuth sign-in (the reference's `OAuthAuth`).
pub trait OAuthFlow: Send + Sync {
    /// The display name, e.g. `Anthropic (Claude Pro/Max)`.
    fn name(&self) -> &str;

    /// Sign in.
    fn login<'a>(&'a self, interaction: &'a dyn AuthInteraction) -> BoxFuture<'a, Result<OAuthCredential, AuthError>>;

    /// Exchange the refresh token for a new credential (network; fails on `invalid_grant`).
    fn refresh<'a>(&'a self, credential: &'a OAuthCredential) -> BoxFuture<'a, Result<OAuthCredential, String>>;

    /// Request auth from a valid credential.
    fn to_auth(&self, credential: &OAuthCredential) -> ModelAuth {
        ModelAuth { api_key: Some(credential.access.clone()), ..ModelAuth::default() }
    }
}

/// Where environment values come from (injectable for tests).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// `get_auth` / `check_auth` / `available` / `login` / `logout` over a store and the flows.
pub struct Authenticator {
    store: Arc<dyn CredentialStore>,
    flows: BTreeMap<String, Arc<dyn OAuthFlow>>,
    env: EnvLookup,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator").field("flows", &self.flows.keys().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Over `store`, with no OAuth flow, the process environment and the catalog's key variables.
    pub fn new(store: Arc<dyn CredentialStore>) -> Self {
        Self {
            store,
            flows: BTreeMap::new(),
            env: Arc::new(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty())),
        }
    }

    /// Over `store` with every flow of this crate ([`super::builtin_flows`]).
    pub fn with_builtin_flows(store: Arc<dyn CredentialStore>) -> Self {
        let mut this = Self::new(store);
        for (provider, flow) in super::builtin_flows() {
            this = this.with_flow(provider, flow);
        }
        this
    }

    /// Sign in to `provider_id` with `flow`.
    pub fn with_flow(mut self, provider_id: impl Into<String>, flow: Arc<dyn OAuthFlow>) -> Self {
        self.flows.insert(provider_id.into(), flow);
        self
    }

    /// Read environment values through `env` instead of the process environment.
    pub fn with_env(mut self, env: EnvLookup) -> Self {
        self.env = env;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn CredentialStore> {
        &self.store
    }

    /// The providers with an OAuth flow.
    pub fn oauth_providers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.flows.iter().map(|(id, flow)| (id.as_str(), flow.name()))
    }

    fn env_key(&self, provider_id: &str) -> Option<(String, String)> {
        crate::registry::env_api_key_vars(provider_id)
            .into_iter()
            .find_map(|var| (self.env)(var).map(|value| (var.to_owned(), value)))
    }

    /// Request auth for `provider_id`: the stored credential (refreshed when it expires within
    /// five minutes), else the environment. `Ok(None)`: not configured.
    pub async fn get_auth(&self, provider_id: &str) -> Result<Option<AuthResult>, AuthError> {
        match self.store.read(provider_id)? {
            Some(Credential::OAuth(stored)) => {
                let Some(flow) = self.flows.get(provider_id) else { return Ok(None) };
                let credential = if stored.expires_within(now_ms(), MIN_OAUTH_VALIDITY_MS) {
                    match self.refresh(provider_id, flow).await? {
                        Some(fresh) => fresh,
                        None => return Ok(None),
                    }
                } else {
                    stored
                };
                Ok(Some(AuthResult { auth: flow.to_auth(&credential), env: None, source: "OAuth".into() }))
            }
            Some(Credential::ApiKey(stored)) => match stored.key {
                Some(key) if !key.is_empty() => Ok(Some(AuthResult {
                    auth: ModelAuth { api_key: Some(key), ..ModelAuth::default() },
                    env: stored.env,
                    source: "stored credential".into(),
                })),
                _ => Ok(self.env_key(provider_id).map(|(var, value)| AuthResult {
                    auth: ModelAuth { api_key: Some(Secret::new(value)), ..ModelAuth::default() },
                    env: stored.env,
                    source: var,
                })),
            },
            None => Ok(self.env_key(provider_id).map(|(var, value)| AuthResult {
                auth: ModelAuth { api_key: Some(Secret::new(value)), ..ModelAuth::default() },
                env: None,
                source: var,
            })),
        }
    }

    /// Refresh the stored OAuth credential under the store's lock, if it still expires soon
    /// once the lock is held. The credential stored afterwards; `None` when logged out meanwhile.
    pub async fn refresh(
        &self,
        provider_id: &str,
        flow: &Arc<dyn OAuthFlow>,
    ) -> Result<Option<OAuthCredential>, AuthError> {
        self.refresh_when(provider_id, Arc::clone(flow), |current| {
            current.expires_within(now_ms(), MIN_OAUTH_VALIDITY_MS)
        })
        .await
    }

    /// Refresh the stored OAuth credential because the provider rejected `rejected` (an answer
    /// 401 to a request sent with it), whatever its expiry says. Under the store's lock: when
    /// the stored token is no longer `rejected` (another request refreshed it meanwhile) that
    /// one is used as it is. The credential stored afterwards; `None` when logged out meanwhile
    /// or the provider has no flow.
    pub async fn refresh_rejected(
        &self,
        provider_id: &str,
        rejected: &Secret,
    ) -> Result<Option<OAuthCredential>, AuthError> {
        let Some(flow) = self.flows.get(provider_id).cloned() else { return Ok(None) };
        let rejected = rejected.clone();
        self.refresh_when(provider_id, flow, move |current| current.access == rejected).await
    }

    /// The one refresh under the store's lock: `stale` decides, on the credential stored when
    /// the lock is held, whether it is refreshed (else it stays as it is); the refresh is
    /// bounded by `REFRESH_TIMEOUT` and its error cleaned of the credential's tokens.
    async fn refresh_when(
        &self,
        provider_id: &str,
        flow: Arc<dyn OAuthFlow>,
        stale: impl Fn(&OAuthCredential) -> bool + Send + 'static,
    ) -> Result<Option<OAuthCredential>, AuthError> {
        let provider = provider_id.to_owned();
        let post = self
            .store
            .modify(
                provider_id,
                Box::new(move |current| {
                    Box::pin(async move {
                        let Some(Credential::OAuth(current)) = current else { return Ok(None) };
                        if !stale(&current) {
                            return Ok(None);
                        }
                        let fresh = tokio::time::timeout(REFRESH_TIMEOUT, flow.refresh(&current))
                            .await
                            .unwrap_or_else(|_| Err("The operation was aborted due to timeout".into()))
                            .map_err(|reason| AuthError::Refresh { provider, reason: scrub(reason, &current) })?;
                        Ok(Some(Credential::OAuth(fresh)))
                    })
                }),
            )
            .await?;
        Ok(match post {
            Some(Credential::OAuth(credential)) => Some(credential),
            _ => None,
        })
    }

    /// The flow of `provider_id`, if it signs in with OAuth.
    pub fn flow(&self, provider_id: &str) -> Option<&Arc<dyn OAuthFlow>> {
        self.flows.get(provider_id)
    }

    /// Whether `provider_id` is usable and from where, without refreshing or resolving.
    pub fn check_auth(&self, provider_id: &str) -> Result<Option<AuthCheck>, AuthError> {
        Ok(match self.store.read(provider_id)? {
            Some(Credential::OAuth(_)) if self.flows.contains_key(provider_id) => {
                Some(AuthCheck { kind: CredentialKind::OAuth, source: "OAuth".into() })
            }
            Some(Credential::OAuth(_)) => None,
            Some(Credential::ApiKey(ApiKeyCredential { key: Some(key), .. })) if !key.is_empty() => {
                Some(AuthCheck { kind: CredentialKind::ApiKey, source: "stored credential".into() })
            }
            Some(Credential::ApiKey(_)) | None => {
                self.env_key(provider_id).map(|(var, _)| AuthCheck { kind: CredentialKind::ApiKey, source: var })
            }
        })
    }

    /// The providers among `provider_ids` that `check_auth` finds usable.
    pub fn available<'a>(&self, provider_ids: impl IntoIterator<Item = &'a str>) -> Result<Vec<String>, AuthError> {
        let mut usable = Vec::new();
        for id in provider_ids {
            if self.check_auth(id)?.is_some() {
                usable.push(id.to_owned());
            }
        }
        Ok(usable)
    }

    /// Sign in to `provider_id` (its OAuth flow, else a prompt for its API key) and store the
    /// credential.
    pub async fn login(&self, provider_id: &str, interaction: &dyn AuthInteraction) -> Result<Credential, AuthError> {
        let credential = match self.flows.get(provider_id) {
            Some(flow) => Credential::OAuth(flow.login(interaction).await?),
            None => {
                if crate::registry::env_api_key_vars(provider_id).is_empty() {
                    return Err(AuthError::Unsupported(format!(
                        "provider `{provider_id}` has no sign-in and no API key"
                    )));
                }
                let key =
                    interaction.prompt(AuthPrompt::Secret { message: format!("Enter {provider_id} API key") }).await?;
                Credential::ApiKey(ApiKeyCredential { key: Some(Secret::new(key.trim())), env: None })
            }
        };
        let stored = credential.clone();
        self.store.modify(provider_id, Box::new(move |_| Box::pin(async move { Ok(Some(stored)) }))).await?;
        Ok(credential)
    }

    /// Remove the stored credential of `provider_id`.
    pub async fn logout(&self, provider_id: &str) -> Result<(), AuthError> {
        self.store.delete(provider_id).await
    }
}

/// `reason` with the credential's tokens blanked out: an error answer may echo what it was sent.
fn scrub(reason: String, credential: &OAuthCredential) -> String {
    [&credential.access, &credential.refresh]
        .into_iter()
        .filter(|token| token.expose().len() >= 8)
        .fold(reason, |text, token| text.replace(token.expose(), "<redacted>"))
}

fn now_ms() -> u64 {
    pi_types::now_ms()
}
