//! `Models::refresh` and the credential-specific availability of models (the reference's
//! `Models.refresh`, `createProvider`'s `fetchModels` and `Provider.filterModels`).
//!
//! A refresh of a provider with a [`ModelSource`] runs two phases: the stored catalog is
//! restored first (no network, no credential needed beyond reading it), then, when network is
//! allowed and the provider is configured, the source fetches a new catalog with the provider's
//! credential (an OAuth token past its expiry is refreshed first) and it is published: written
//! to the [`ModelsStore`](super::ModelsStore), then swapped into the registry. A publication is
//! generation-checked: a newer refresh of the provider, or replacing the provider, makes an
//! older one's publication a no-op. Errors are values in the [`RefreshResult`], per provider.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use indexmap::IndexMap;

use super::{AnyModel, ModelsStoreEntry, ModelsStoreError};
use crate::auth::{ApiKeyCredential, Credential, Secret};
use crate::registry::{Auth, Models, Provider};

/// What a source's fetch gets.
#[derive(Clone, Debug)]
pub struct RefreshContext {
    /// The provider being refreshed.
    pub provider_id: String,
    /// The effective credential: the stored one (an OAuth token refreshed when expired), else
    /// the key from the provider's own source; `None` for a keyless provider.
    pub credential: Option<Credential>,
    /// Whether the caller asked to bypass freshness checks.
    pub force: bool,
}

impl RefreshContext {
    /// The bearer token of the credential: an OAuth access token or an API key.
    pub fn token(&self) -> Option<&str> {
        match &self.credential {
            Some(Credential::OAuth(oauth)) => Some(oauth.access.expose()),
            Some(Credential::ApiKey(ApiKeyCredential { key: Some(key), .. })) => Some(key.expose()),
            _ => None,
        }
    }
}

/// A provider's live catalog (the reference's `fetchModels`).
pub trait ModelSource: Send + Sync {
    /// Fetch the provider's current models. Every wait inside is bounded; errors never carry
    /// the credential.
    fn fetch<'a>(&'a self, context: &'a RefreshContext) -> BoxFuture<'a, Result<Vec<AnyModel>, ModelsStoreError>>;

    /// Whether a fetched catalog replaces the provider's built-in models (Radius, whose
    /// organization owners may disable models) instead of overlaying them by type and id.
    fn replaces_baseline(&self) -> bool {
        false
    }
}

/// Which of a provider's models an account may use (the reference's `filterModels` /
/// `filterAllModels`), applied by [`Models::available_models`].
pub trait ModelFilter: Send + Sync {
    /// The models of `models` the holder of `credential` may use.
    fn filter(&self, models: Vec<AnyModel>, credential: Option<&Credential>) -> Vec<AnyModel>;
}

/// What to refresh.
#[derive(Clone, Debug)]
pub struct RefreshOptions {
    /// Fetch from the network (default); `false` only restores the stored catalogs.
    pub allow_network: bool,
    /// Only these providers (unknown and static ones are ignored); `None`: every dynamic one.
    pub providers: Option<Vec<String>>,
    /// Bypass the sources' freshness checks.
    pub force: bool,
    /// Longest time one provider's refresh may take (default 60 seconds); it then fails with
    /// a timeout error and keeps its last good catalog.
    pub timeout: Duration,
}

impl Default for RefreshOptions {
    fn default() -> Self {
        Self { allow_network: true, providers: None, force: false, timeout: Duration::from_secs(60) }
    }
}

/// What a refresh did: the providers whose refresh failed, with why (in refresh order).
#[derive(Debug, Default)]
pub struct RefreshResult {
    /// Failed providers and their errors.
    pub errors: IndexMap<String, ModelsStoreError>,
}

/// What the network phase runs with.
enum Network {
    /// The provider is not configured: no network phase.
    Skip,
    /// Fetch with this credential.
    Go(Option<Credential>),
}

impl Models {
    /// Refresh the selected dynamic providers (those with a [`ModelSource`]) concurrently.
    /// Never fails as a whole: each provider's error is in the result, and a provider whose
    /// refresh failed keeps its last good catalog. Unconfigured providers are skipped after
    /// their stored catalog is restored.
    pub async fn refresh(&self, options: RefreshOptions) -> RefreshResult {
        let selected: Option<HashSet<&str>> =
            options.providers.as_ref().map(|p| p.iter().map(String::as_str).collect());
        let refreshable: Vec<Arc<Provider>> = self
            .providers()
            .into_iter()
            .filter(|p| p.source().is_some() && selected.as_ref().is_none_or(|s| s.contains(p.id())))
            .collect();
        let runs = refreshable.into_iter().map(|provider| {
            let options = &options;
            async move {
                let id = provider.id().to_owned();
                let run = self.refresh_provider(provider, options);
                let outcome = match tokio::time::timeout(options.timeout, run).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(ModelsStoreError::Source(format!(
                        "Model refresh timed out for {id} after {} ms",
                        options.timeout.as_millis()
                    ))),
                };
                (id, outcome)
            }
        });
        let mut result = RefreshResult::default();
        for (id, outcome) in futures::future::join_all(runs).await {
            if let Err(error) = outcome {
                result.errors.insert(id, error);
            }
        }
        result
    }

    async fn refresh_provider(
        &self,
        provider: Arc<Provider>,
        options: &RefreshOptions,
    ) -> Result<(), ModelsStoreError> {
        let id = provider.id().to_owned();
        let Some(source) = provider.source().cloned() else { return Ok(()) };
        let generation = self.catalogs().begin(&id);
        let stored_credential = self.stored_credential(&id);
        // Restore the cached catalog before auth resolution or network access.
        if let Some(entry) = self.catalogs().store().read(&id)? {
            let restored: Vec<AnyModel> = entry.models.into_iter().filter(|m| m.provider() == id).collect();
            if !self.publish_models(&id, generation, None, restored)? {
                return Ok(());
            }
        }
        let stored_credential = stored_credential?;
        if !options.allow_network {
            return Ok(());
        }
        let credential = match self.network_credential(&provider, stored_credential).await? {
            Network::Skip => return Ok(()),
            Network::Go(credential) => credential,
        };
        let context = RefreshContext { provider_id: id.clone(), credential, force: options.force };
        let fetched = source.fetch(&context).await?;
        let entry =
            ModelsStoreEntry { models: fetched.clone(), checked_at: Some(pi_types::now_ms()), ..Default::default() };
        self.publish_models(&id, generation, Some(&entry), fetched)?;
        Ok(())
    }

    fn stored_credential(&self, provider_id: &str) -> Result<Option<Credential>, ModelsStoreError> {
        let Some(authenticator) = self.authenticator() else { return Ok(None) };
        authenticator.store().read(provider_id).map_err(|e| ModelsStoreError::Auth(e.to_string()))
    }

    /// The credential of the network phase, as the reference's `resolveRefreshCredential`: a
    /// stored OAuth sign-in (refreshed once expired) needs the provider's flow; otherwise a
    /// stored key, else the provider's own key source.
    async fn network_credential(
        &self,
        provider: &Provider,
        stored: Option<Credential>,
    ) -> Result<Network, ModelsStoreError> {
        if let Some(Credential::OAuth(oauth)) = stored {
            let Some(authenticator) = self.authenticator() else { return Ok(Network::Skip) };
            let Some(flow) = authenticator.flow(provider.id()).cloned() else { return Ok(Network::Skip) };
            if pi_types::now_ms() < oauth.expires {
                return Ok(Network::Go(Some(Credential::OAuth(oauth))));
            }
            let fresh =
                authenticator.refresh(provider.id(), &flow).await.map_err(|e| ModelsStoreError::Auth(e.to_string()))?;
            return Ok(fresh.map_or(Network::Skip, |fresh| Network::Go(Some(Credential::OAuth(fresh)))));
        }
        let stored_key = match stored {
            Some(Credential::ApiKey(stored)) if stored.key.as_ref().is_some_and(|k| !k.is_empty()) => {
                return Ok(Network::Go(Some(Credential::ApiKey(stored))))
            }
            Some(Credential::ApiKey(stored)) => stored.env,
            _ => None,
        };
        let key = |key: String| {
            Network::Go(Some(Credential::ApiKey(ApiKeyCredential {
                key: Some(Secret::new(key)),
                env: stored_key.clone(),
            })))
        };
        Ok(match provider.auth() {
            Auth::None => Network::Go(None),
            Auth::ApiKey(value) => key(value.clone()),
            Auth::Env(vars) => {
                vars.iter().find_map(|v| std::env::var(v).ok().filter(|v| !v.is_empty())).map_or(Network::Skip, key)
            }
            Auth::Resolver(resolve) => {
                let model = provider.models().first().cloned().unwrap_or_default();
                match resolve(&model).await {
                    Ok(Some(value)) => key(value),
                    Ok(None) => Network::Skip,
                    Err(error) => return Err(ModelsStoreError::Auth(error.to_string())),
                }
            }
        })
    }

    /// Every model of the configured providers (of one, or all) that their credentials may
    /// use: the reference's `getAllAvailable`. A provider is configured by a stored credential
    /// (an OAuth one needs the provider's flow), its environment key, a fixed key, or no key
    /// at all; its [`ModelFilter`] then sees the stored credential.
    pub fn available_models(&self, provider: Option<&str>) -> Result<Vec<AnyModel>, ModelsStoreError> {
        let providers = match provider {
            Some(id) => self.provider(id).into_iter().collect(),
            None => self.providers(),
        };
        let mut available = Vec::new();
        for provider in providers {
            let credential = self.stored_credential(provider.id())?;
            if !self.is_configured(&provider, credential.as_ref()) {
                continue;
            }
            let models = provider.all_models();
            available.extend(match provider.filter() {
                Some(filter) => filter.filter(models, credential.as_ref()),
                None => models,
            });
        }
        Ok(available)
    }

    fn is_configured(&self, provider: &Provider, credential: Option<&Credential>) -> bool {
        match credential {
            Some(Credential::OAuth(_)) => self.authenticator().is_some_and(|a| a.flow(provider.id()).is_some()),
            Some(Credential::ApiKey(ApiKeyCredential { key: Some(key), .. })) if !key.is_empty() => true,
            _ => match provider.auth() {
                Auth::None | Auth::ApiKey(_) | Auth::Resolver(_) => true,
                // The provider's own variables (a custom provider's `$VAR` key), else what the
                // built-in provider takes from the environment (AWS or Google credentials, ...).
                Auth::Env(vars) => {
                    vars.iter().any(|var| std::env::var(var).is_ok_and(|value| !value.is_empty()))
                        || crate::registry::has_env_credentials(provider.id())
                }
            },
        }
    }
}
