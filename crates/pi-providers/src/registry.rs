//! The provider registry (the reference's `createModels` / `createProvider`).
//!
//! A [`Provider`] is an id, an [`Auth`] source, its models and one [`StreamFn`] per API id.
//! [`Models`] holds providers by id, finds models and streams a request through the
//! provider's adapter for the model's API with the resolved key. User-defined providers
//! (including the faux provider) are registered the same way.
//!
//! ```
//! # #[cfg(feature = "http")] {
//! use std::sync::Arc;
//! use pi_providers::registry::{Auth, Models, Provider};
//! let models = Models::with_builtins();
//! assert!(models.get_model("anthropic", "claude-sonnet-4-5").is_some());
//! let mine = Provider::new("local")
//!     .with_auth(Auth::None)
//!     .with_model(
//!         pi_types::Model::new("qwen3")
//!             .with_api("openai-completions")
//!             .with_provider("local")
//!             .with_base_url("http://localhost:8000/v1")
//!             .with_limits(32_768, 8_192),
//!     )
//!     .with_api("openai-completions", Arc::new(pi_providers::api::openai::completions::OpenAICompletions));
//! models.set_provider(mine);
//! assert!(models.get_model("local", "qwen3").is_some());
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use indexmap::IndexMap;
use pi_types::transcript::normalize_context;
#[cfg(feature = "http")]
use pi_types::Layered;
use pi_types::{
    AssistantMessage, AssistantMessageEventStream, Context, HttpClientHandle, Model, StreamFn, StreamOptions,
    TranscriptContext,
};

use crate::classifier::ClassifierModel;
use crate::deferred::DeferredResponses;
use crate::failure::failed_stream;
pub use crate::failure::KeyResolver;
use crate::images::ImageModel;
use crate::models_store::AnyModel;

/// Where a provider's API key comes from. A key given in the request options always wins.
#[derive(Clone, Default)]
pub enum Auth {
    /// No key (local servers, header-owned auth).
    #[default]
    None,
    /// A fixed key.
    ApiKey(String),
    /// The first of these environment variables that is set and non-empty.
    Env(Vec<String>),
    /// A resolver called per request.
    Resolver(KeyResolver),
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            Self::Env(vars) => f.debug_tuple("Env").field(vars).finish(),
            Self::Resolver(_) => f.write_str("Resolver(..)"),
        }
    }
}

/// The environment variables pi-ai reads a provider's key from, in order (the catalog's
/// [`key_vars`](crate::catalog::key_vars), generated from the reference's `env-api-keys.js`).
pub fn env_api_key_vars(provider: &str) -> Vec<&'static str> {
    crate::catalog::key_vars(provider).iter().map(String::as_str).collect()
}

/// The key of a provider from its environment variables, if one is set.
pub fn env_api_key(provider: &str) -> Option<String> {
    env_api_key_vars(provider).into_iter().find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
}

/// Whether the environment holds credentials for a provider, as the reference's
/// `getEnvApiKey` decides: one of its key variables ([`env_api_key_vars`]), or, for
/// `google-vertex`, application default credentials (`GOOGLE_APPLICATION_CREDENTIALS` or
/// gcloud's default file) with a project and a location, and, for `amazon-bedrock`, any AWS
/// credential source (`AWS_PROFILE`, an access key pair, `AWS_BEARER_TOKEN_BEDROCK`, ECS
/// container credentials, a web identity token file), and for `openai-codex` a stored sign-in
/// ([`default_auth_path`](crate::auth::codex::default_auth_path)). Cloudflare providers also need
/// `CLOUDFLARE_ACCOUNT_ID` (and the gateway's `CLOUDFLARE_GATEWAY_ID`), as their reference
/// auth does.
pub fn has_env_credentials(provider: &str) -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty());
    match provider {
        "google-vertex" if env_api_key(provider).is_some() => true,
        "google-vertex" => {
            let credentials = match std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS").filter(|v| !v.is_empty()) {
                Some(path) => std::path::Path::new(&path).exists(),
                None => std::env::var_os("HOME").is_some_and(|home| {
                    std::path::Path::new(&home).join(".config/gcloud/application_default_credentials.json").exists()
                }),
            };
            credentials && (set("GOOGLE_CLOUD_PROJECT") || set("GCLOUD_PROJECT")) && set("GOOGLE_CLOUD_LOCATION")
        }
        #[cfg(feature = "http")]
        "openai-codex" => crate::auth::codex::CodexTokenStore::new(crate::auth::codex::default_auth_path())
            .read()
            .is_ok_and(|credential| credential.is_some()),
        "cloudflare-workers-ai" => set("CLOUDFLARE_API_KEY") && set("CLOUDFLARE_ACCOUNT_ID"),
        "cloudflare-ai-gateway" => {
            set("CLOUDFLARE_API_KEY") && set("CLOUDFLARE_ACCOUNT_ID") && set("CLOUDFLARE_GATEWAY_ID")
        }
        "amazon-bedrock" => {
            env_api_key(provider).is_some()
                || set("AWS_PROFILE")
                || (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
                || set("AWS_BEARER_TOKEN_BEDROCK")
                || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
                || set("AWS_CONTAINER_CREDENTIALS_FULL_URI")
                || set("AWS_WEB_IDENTITY_TOKEN_FILE")
        }
        _ => env_api_key(provider).is_some(),
    }
}

/// Why a request could not be dispatched.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// No provider with the model's provider id.
    #[error("Unknown provider: {0}")]
    UnknownProvider(String),
    /// The provider has no adapter for the model's API.
    #[error("Provider {provider} has no API implementation for \"{api}\"")]
    NoApi {
        /// Provider id.
        provider: String,
        /// API id.
        api: String,
    },
    /// The key resolver failed.
    #[error("Provider is not configured: {provider}: {reason}")]
    Auth {
        /// Provider id.
        provider: String,
        /// The resolver's error text.
        reason: String,
    },
    /// The provider has no deferred responses for any of its APIs.
    #[error("Provider {0} does not support deferred responses")]
    DeferredUnsupported(String),
    /// The provider has deferred responses, but not for the model's API.
    #[error("Provider {provider} does not support deferred responses for \"{api}\"")]
    DeferredUnsupportedForApi {
        /// Provider id.
        provider: String,
        /// API id.
        api: String,
    },
    /// The provider cancels deferred responses, but not for the model's API.
    #[error("Provider {provider} cannot cancel deferred responses for \"{api}\"")]
    DeferredCancelUnsupported {
        /// Provider id.
        provider: String,
        /// API id.
        api: String,
    },
    /// Cancelling a deferred response failed (its credentials, or the provider's answer); the text.
    #[error("{0}")]
    DeferredCancel(String),
    /// Some session cleanups failed (`cleanup_session_resources`); the text of each failure.
    #[error("Failed to cleanup session resources: {}", .0.join("; "))]
    SessionCleanup(Vec<String>),
}

/// A provider: id, authentication, models and an adapter per API.
#[derive(Clone)]
pub struct Provider {
    id: String,
    name: String,
    auth: Auth,
    models: Vec<Model>,
    classifiers: Vec<ClassifierModel>,
    images: Vec<ImageModel>,
    /// The models before the first published live catalog (what an overlay merges onto).
    baseline: Option<Arc<Vec<AnyModel>>>,
    apis: HashMap<String, Arc<dyn StreamFn>>,
    deferred: HashMap<String, Arc<dyn DeferredResponses>>,
    http_client: Option<HttpClientHandle>,
    #[cfg(feature = "http")]
    source: Option<Arc<dyn crate::models_store::ModelSource>>,
    #[cfg(feature = "http")]
    filter: Option<Arc<dyn crate::models_store::ModelFilter>>,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut apis: Vec<&String> = self.apis.keys().collect();
        apis.sort();
        f.debug_struct("Provider")
            .field("id", &self.id)
            .field("auth", &self.auth)
            .field("models", &self.models.len())
            .field("classifiers", &self.classifiers.len())
            .field("images", &self.images.len())
            .field("apis", &apis)
            .field("deferred", &self.deferred.len())
            .field("http_client", &self.http_client.is_some())
            .finish()
    }
}

impl Provider {
    /// An empty provider.
    pub fn new(id: impl Into<String>) -> Self {
        let id = id.into();
        Self {
            name: id.clone(),
            id,
            auth: Auth::None,
            models: Vec::new(),
            classifiers: Vec::new(),
            images: Vec::new(),
            baseline: None,
            apis: HashMap::new(),
            deferred: HashMap::new(),
            http_client: None,
            #[cfg(feature = "http")]
            source: None,
            #[cfg(feature = "http")]
            filter: None,
        }
    }

    /// A built-in provider: catalog models, the HTTP adapters, key from the environment.
    #[cfg(feature = "http")]
    pub fn builtin(id: &str) -> Option<Self> {
        // A catalog provider may list no chat models (`typesafe`): it still exists.
        let models = crate::catalog::catalog().get(id)?.clone();
        let vars = env_api_key_vars(id).into_iter().map(str::to_owned).collect();
        let provider = Self::new(id)
            .with_auth(Auth::Env(vars))
            .with_models(models)
            .with_classifier_models(crate::classifier::catalog::models(id))
            .with_image_models(crate::images::catalog::models(id))
            .with_http_apis();
        Some(match id {
            // Its gateway's catalog replaces the shipped one once fetched (`Models::refresh`).
            "radius" => provider.with_model_source(Arc::new(crate::models_store::radius::RadiusCatalog::default())),
            // An account uses the models its sign-in recorded.
            "github-copilot" => provider.with_model_filter(Arc::new(crate::models_store::copilot::AccountModels)),
            // Their catalog URLs name the account (and gateway): filled per request.
            "cloudflare-workers-ai" | "cloudflare-ai-gateway" => provider.map_apis(|adapter| {
                Arc::new(Layered::new(crate::layer::cloudflare::CloudflareEndpoint, adapter)) as Arc<dyn StreamFn>
            }),
            // Its chat-completions models stream to the configured Azure endpoint and deployment.
            "azure" => provider.with_api(
                crate::api::openai::completions::API,
                Arc::new(Layered::new(
                    crate::layer::azure_completions::AzureCompletions::default(),
                    Arc::new(crate::api::openai::completions::OpenAICompletions),
                )),
            ),
            // A ChatGPT subscription: OAuth tokens from `pi login openai-codex`, refreshed as needed.
            "openai-codex" => provider.with_auth(Auth::Resolver(
                Arc::new(crate::auth::codex::CodexTokenStore::new(crate::auth::codex::default_auth_path())).resolver(),
            )),
            "opencode" | "opencode-go" => provider.map_apis(|adapter| {
                Arc::new(Layered::new(crate::layer::opencode::OpenCodeSession, adapter)) as Arc<dyn StreamFn>
            }),
            _ => provider,
        })
    }

    /// Register the HTTP adapters under their API ids (with the `bedrock` feature, also
    /// `bedrock-converse-stream`).
    #[cfg(feature = "http")]
    pub fn with_http_apis(self) -> Self {
        let this = self
            .with_api(
                crate::api::openai::completions::API,
                Arc::new(crate::api::openai::completions::OpenAICompletions),
            )
            .with_api(crate::api::openai::responses::API, Arc::new(crate::api::openai::responses::OpenAIResponses))
            .with_api(crate::api::anthropic::API, Arc::new(crate::api::anthropic::AnthropicMessages))
            .with_api(
                crate::api::google::gemini::API,
                Arc::new(crate::api::google::gemini::GoogleGenerativeAi::default()),
            )
            .with_api(crate::api::mistral::API, Arc::new(crate::api::mistral::MistralConversations))
            .with_api(
                crate::api::openai::azure::API,
                Arc::new(crate::api::openai::azure::AzureOpenAIResponses::default()),
            )
            .with_api(
                crate::api::openai::codex::API,
                Arc::new(crate::api::openai::codex::OpenAICodexResponses::default()),
            )
            .with_api(crate::api::google::vertex::API, Arc::new(crate::api::google::vertex::GoogleVertex::default()))
            .with_api(crate::api::pi_messages::API, Arc::new(crate::api::pi_messages::PiMessages));
        #[cfg(feature = "bedrock")]
        let this = this.with_api(crate::api::bedrock::API, Arc::new(crate::api::bedrock::BedrockConverseStream));
        this
    }

    /// Wrap every registered adapter (e.g. to rewrite the model or options before it streams).
    pub fn map_apis(mut self, mut wrap: impl FnMut(Arc<dyn StreamFn>) -> Arc<dyn StreamFn>) -> Self {
        self.apis = self.apis.into_iter().map(|(api, adapter)| (api, wrap(adapter))).collect();
        self
    }

    /// Set the display name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Set the key source.
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// Add a model (replacing one with the same id).
    pub fn with_model(mut self, model: Model) -> Self {
        self.models.retain(|m| m.id != model.id);
        self.models.push(model);
        self
    }

    /// Add models.
    pub fn with_models(self, models: impl IntoIterator<Item = Model>) -> Self {
        models.into_iter().fold(self, Self::with_model)
    }

    /// Add classifier models (replacing ones with the same id).
    pub fn with_classifier_models(mut self, models: impl IntoIterator<Item = ClassifierModel>) -> Self {
        for model in models {
            self.classifiers.retain(|m| m.id != model.id);
            self.classifiers.push(model);
        }
        self
    }

    /// Add image models (replacing ones with the same id).
    pub fn with_image_models(mut self, models: impl IntoIterator<Item = ImageModel>) -> Self {
        for model in models {
            self.images.retain(|m| m.id != model.id);
            self.images.push(model);
        }
        self
    }

    /// Keep this provider's catalog current from `source` (see [`Models::refresh`]).
    #[cfg(feature = "http")]
    pub fn with_model_source(mut self, source: Arc<dyn crate::models_store::ModelSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// Restrict the models an account may use (see [`Models::available_models`]).
    #[cfg(feature = "http")]
    pub fn with_model_filter(mut self, filter: Arc<dyn crate::models_store::ModelFilter>) -> Self {
        self.filter = Some(filter);
        self
    }

    /// The live catalog source, if the provider has one.
    #[cfg(feature = "http")]
    pub fn source(&self) -> Option<&Arc<dyn crate::models_store::ModelSource>> {
        self.source.as_ref()
    }

    /// The per-account model filter, if the provider has one.
    #[cfg(feature = "http")]
    pub fn filter(&self) -> Option<&Arc<dyn crate::models_store::ModelFilter>> {
        self.filter.as_ref()
    }

    /// The key source.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// The classifier models.
    pub fn classifier_models(&self) -> &[ClassifierModel] {
        &self.classifiers
    }

    /// The image models.
    pub fn image_models(&self) -> &[ImageModel] {
        &self.images
    }

    /// Every model: chat, then classifier, then image models.
    pub fn all_models(&self) -> Vec<AnyModel> {
        let chat = self.models.iter().cloned().map(AnyModel::Chat);
        let classifiers = self.classifiers.iter().cloned().map(AnyModel::Classifier);
        chat.chain(classifiers).chain(self.images.iter().cloned().map(AnyModel::Image)).collect()
    }

    /// This provider with a live catalog: `live` replaces the models it had before its first
    /// live catalog (`replace`) or overlays them by type and id.
    pub(crate) fn with_live_models(&self, live: Vec<AnyModel>, replace: bool) -> Self {
        // The models before the first live catalog, which an overlay always starts from; a
        // replacing source never reads them.
        let baseline = match replace {
            true => None,
            false => Some(self.baseline.clone().unwrap_or_else(|| Arc::new(self.all_models()))),
        };
        let all = match &baseline {
            Some(baseline) => crate::models_store::merge_models(baseline, &live),
            None => live,
        };
        let mut next = self.clone();
        next.baseline = baseline;
        next.models.clear();
        next.classifiers.clear();
        next.images.clear();
        for model in all {
            match model {
                AnyModel::Chat(m) => next.models.push(m),
                AnyModel::Classifier(m) => next.classifiers.push(m),
                AnyModel::Image(m) => next.images.push(m),
            }
        }
        next
    }

    /// Register the adapter for an API id.
    pub fn with_api(mut self, api: impl Into<String>, adapter: Arc<dyn StreamFn>) -> Self {
        self.apis.insert(api.into(), adapter);
        self
    }

    /// Register the deferred responses of an API id (see [`crate::deferred`]).
    pub fn with_deferred(mut self, api: impl Into<String>, deferred: Arc<dyn DeferredResponses>) -> Self {
        self.deferred.insert(api.into(), deferred);
        self
    }

    /// Send this provider's requests with `client` unless a request brings its own (see
    /// [`crate::transport::client`]; this wins over the registry's client).
    #[cfg(feature = "http")]
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(crate::transport::client::handle(client));
        self
    }

    /// Provider id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Display name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The models.
    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// The adapter for an API id.
    pub fn api(&self, api: &str) -> Option<&Arc<dyn StreamFn>> {
        self.apis.get(api)
    }

    /// The deferred responses of an API id.
    pub fn deferred(&self, api: &str) -> Option<&Arc<dyn DeferredResponses>> {
        self.deferred.get(api)
    }

    /// Whether any of its APIs has deferred responses.
    pub fn supports_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// The key: `Env` variables are read from the request's `env` first, then the process
    /// environment (the reference overlays `options.env` on its auth context the same way).
    async fn resolve_key(&self, model: &Model, options: &StreamOptions) -> Result<Option<String>, ProviderError> {
        match &self.auth {
            Auth::None => Ok(None),
            Auth::ApiKey(key) => Ok(Some(key.clone())),
            Auth::Env(vars) => Ok(vars.iter().find_map(|v| options.env_var(v))),
            Auth::Resolver(resolve) => {
                let resolving = resolve(model);
                // Token requests of the resolver (the Codex refresh) use the request's client.
                #[cfg(feature = "http")]
                let resolving = crate::transport::client::resolving(options.http_client.clone(), resolving);
                resolving.await.map_err(|e| ProviderError::Auth { provider: self.id.clone(), reason: e.to_string() })
            }
        }
    }
}

/// The registry of providers.
#[derive(Debug, Default)]
pub struct Models {
    providers: RwLock<IndexMap<String, Arc<Provider>>>,
    http_client: RwLock<Option<HttpClientHandle>>,
    #[cfg(feature = "http")]
    authenticator: RwLock<Option<Arc<crate::auth::Authenticator>>>,
    catalogs: crate::models_store::Catalogs,
}

impl Models {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with the built-in providers of the catalog.
    #[cfg(feature = "http")]
    pub fn with_builtins() -> Self {
        let models = Self::new();
        for id in crate::catalog::provider_ids() {
            if let Some(provider) = Provider::builtin(id) {
                models.set_provider(provider);
            }
        }
        models
    }

    /// Send requests with `client` unless the request or its provider brings its own (see
    /// [`crate::transport::client`]).
    #[cfg(feature = "http")]
    pub fn with_http_client(self, client: reqwest::Client) -> Self {
        self.set_http_client(Some(client));
        self
    }

    /// Set or (`None`) clear the registry's client; requests already sent keep theirs.
    #[cfg(feature = "http")]
    pub fn set_http_client(&self, client: Option<reqwest::Client>) {
        if let Ok(mut slot) = self.http_client.write() {
            *slot = client.map(crate::transport::client::handle);
        }
    }

    /// Take credentials from `store` first, with every sign-in of this crate
    /// ([`Authenticator::with_builtin_flows`](crate::auth::Authenticator::with_builtin_flows)):
    /// see [`Models::set_authenticator`].
    #[cfg(feature = "http")]
    pub fn with_credentials(self, store: Arc<dyn crate::auth::CredentialStore>) -> Self {
        self.set_authenticator(Some(Arc::new(crate::auth::Authenticator::with_builtin_flows(store))));
        self
    }

    /// Take credentials from `authenticator` first: see [`Models::set_authenticator`].
    #[cfg(feature = "http")]
    pub fn with_authenticator(self, authenticator: Arc<crate::auth::Authenticator>) -> Self {
        self.set_authenticator(Some(authenticator));
        self
    }

    /// Set or (`None`) clear where stored credentials come from. With one, a request to a
    /// provider whose key is found at request time ([`Auth::Env`], [`Auth::Resolver`]) and not
    /// given in the options uses the provider's stored credential when there is one (refreshing
    /// an OAuth token that expires within five minutes, and once more after a 401), and the
    /// provider's own source only when nothing is stored: the reference's `getAuth` precedence,
    /// detailed in `docs/auth.md`.
    #[cfg(feature = "http")]
    pub fn set_authenticator(&self, authenticator: Option<Arc<crate::auth::Authenticator>>) {
        if let Ok(mut slot) = self.authenticator.write() {
            *slot = authenticator;
        }
    }

    /// Where stored credentials come from, if set.
    #[cfg(feature = "http")]
    pub fn authenticator(&self) -> Option<Arc<crate::auth::Authenticator>> {
        self.authenticator.read().ok()?.clone()
    }

    /// Add or replace a provider (a refresh of the one it replaces publishes nothing).
    pub fn set_provider(&self, provider: Provider) {
        if let Ok(mut providers) = self.providers.write() {
            self.catalogs.begin(&provider.id);
            providers.insert(provider.id.clone(), Arc::new(provider));
        }
    }

    /// Remove a provider.
    pub fn delete_provider(&self, id: &str) {
        if let Ok(mut providers) = self.providers.write() {
            self.catalogs.begin(id);
            providers.shift_remove(id);
        }
    }

    /// Persist live catalogs in `store` (default: in memory): see [`Models::set_models_store`].
    pub fn with_models_store(self, store: Arc<dyn crate::models_store::ModelsStore>) -> Self {
        self.set_models_store(store);
        self
    }

    /// Where refreshed catalogs are persisted and restored from.
    pub fn set_models_store(&self, store: Arc<dyn crate::models_store::ModelsStore>) {
        self.catalogs.set_store(store);
    }

    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn catalogs(&self) -> &crate::models_store::Catalogs {
        &self.catalogs
    }

    /// Publish a provider's live catalog if `generation` is still its latest refresh: the
    /// entry is persisted first, then the provider is swapped for one with the new models in
    /// one step. `Ok(false)`: superseded, nothing changed.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn publish_models(
        &self,
        provider_id: &str,
        generation: u64,
        persist: Option<&crate::models_store::ModelsStoreEntry>,
        live: Vec<AnyModel>,
    ) -> Result<bool, crate::models_store::ModelsStoreError> {
        if self.catalogs.current(provider_id) != generation {
            return Ok(false);
        }
        if let Some(entry) = persist {
            self.catalogs.store().write(provider_id, entry)?;
        }
        let Ok(mut providers) = self.providers.write() else { return Ok(false) };
        if self.catalogs.current(provider_id) != generation {
            return Ok(false);
        }
        let Some(current) = providers.get(provider_id) else { return Ok(false) };
        #[cfg(feature = "http")]
        let replace = current.source.as_ref().is_some_and(|s| s.replaces_baseline());
        #[cfg(not(feature = "http"))]
        let replace = false;
        let next = current.with_live_models(live, replace);
        providers.insert(provider_id.to_owned(), Arc::new(next));
        Ok(true)
    }

    /// A provider by id.
    pub fn provider(&self, id: &str) -> Option<Arc<Provider>> {
        self.providers.read().ok()?.get(id).cloned()
    }

    /// All providers.
    pub fn providers(&self) -> Vec<Arc<Provider>> {
        self.providers.read().map(|p| p.values().cloned().collect()).unwrap_or_default()
    }

    /// The models of one provider, or of all providers.
    pub fn models(&self, provider: Option<&str>) -> Vec<Model> {
        match provider {
            Some(id) => self.provider(id).map(|p| p.models.clone()).unwrap_or_default(),
            None => self.providers().iter().flat_map(|p| p.models.clone()).collect(),
        }
    }

    /// A model by provider and id.
    pub fn get_model(&self, provider: &str, id: &str) -> Option<Model> {
        self.provider(provider)?.models.iter().find(|m| m.id == id).cloned()
    }

    /// The models of every type of one provider, or of all providers.
    pub fn all_models(&self, provider: Option<&str>) -> Vec<AnyModel> {
        match provider {
            Some(id) => self.provider(id).map(|p| p.all_models()).unwrap_or_default(),
            None => self.providers().iter().flat_map(|p| p.all_models()).collect(),
        }
    }

    /// A classifier model by provider and id.
    pub fn get_classifier_model(&self, provider: &str, id: &str) -> Option<ClassifierModel> {
        self.provider(provider)?.classifiers.iter().find(|m| m.id == id).cloned()
    }

    /// Stream a request for a raw context (system prompt and tools folded into the transcript).
    pub fn stream(&self, model: &Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream {
        self.stream_transcript(model, normalize_context(context), options)
    }

    /// Like [`Models::stream`]; `options.reasoning` selects the thinking level (the reference's
    /// `streamSimple`, which is what every adapter here implements).
    pub fn stream_simple(
        &self,
        model: &Model,
        context: Context,
        options: StreamOptions,
    ) -> AssistantMessageEventStream {
        self.stream(model, context, options)
    }

    /// Stream a request for a normalized transcript.
    pub fn stream_transcript(
        &self,
        model: &Model,
        context: TranscriptContext,
        mut options: StreamOptions,
    ) -> AssistantMessageEventStream {
        let Some(provider) = self.provider(&model.provider) else {
            return failed_stream(model, ProviderError::UnknownProvider(model.provider.to_string()).to_string());
        };
        let Some(adapter) = provider.api(&model.api).cloned() else {
            let error = ProviderError::NoApi { provider: provider.id.clone(), api: model.api.to_string() };
            return failed_stream(model, error.to_string());
        };
        if options.http_client.is_none() {
            options.http_client = provider.http_client.clone().or_else(|| self.http_client.read().ok()?.clone());
        }
        if options.api_key.is_some() || matches!(provider.auth, Auth::None) {
            return adapter.stream(model, context, options);
        }
        if let Auth::ApiKey(key) = &provider.auth {
            options.api_key = Some(key.clone());
            return adapter.stream(model, context, options);
        }
        #[cfg(feature = "http")]
        if let Some(authenticator) = self.authenticator() {
            let model = model.clone();
            return AssistantMessageEventStream::deferred(stream_authorized(
                authenticator,
                provider,
                adapter,
                model,
                context,
                options,
            ));
        }
        // The key is resolved before the request goes; the adapter's stream is then this
        // stream, so its events are handed over as directly as with a key given up front.
        let model = model.clone();
        AssistantMessageEventStream::deferred(async move {
            match provider.resolve_key(&model, &options).await {
                Ok(key) => {
                    options.api_key = key;
                    adapter.stream(&model, context, options)
                }
                Err(error) => failed_stream(&model, error.to_string()),
            }
        })
    }

    /// The options of a one-shot request (classify, generate images): the
    /// provider's key (stored credential first, as for a stream, without the retry after a 401)
    /// and client filled in; a credential's own base URL is not used here (no classifier or
    /// image provider has one). `Err` when the provider is unknown or not configured.
    #[cfg(feature = "http")]
    pub(crate) async fn one_shot_options(
        &self,
        model: &Model,
        options: StreamOptions,
    ) -> Result<StreamOptions, String> {
        let provider = self
            .provider(&model.provider)
            .ok_or_else(|| ProviderError::UnknownProvider(model.provider.to_string()).to_string())?;
        self.credentials(provider).apply(model, options).await
    }

    /// What a one-shot request to `provider` needs of the registry, taken now so the request
    /// can fill its options later ([`Credentials::apply`]).
    pub(crate) fn credentials(&self, provider: Arc<Provider>) -> Credentials {
        Credentials {
            http_client: provider.http_client.clone().or_else(|| self.http_client.read().ok()?.clone()),
            provider,
            #[cfg(feature = "http")]
            authenticator: self.authenticator(),
        }
    }

    /// Stream and wait for the final message.
    pub async fn complete(&self, model: &Model, context: Context, options: StreamOptions) -> Option<AssistantMessage> {
        self.stream(model, context, options).result().await
    }

    /// [`Models::complete`] with `options.reasoning` as the thinking level.
    pub async fn complete_simple(
        &self,
        model: &Model,
        context: Context,
        options: StreamOptions,
    ) -> Option<AssistantMessage> {
        self.complete(model, context, options).await
    }
}

/// A provider with the registry's client and stored credentials, as a one-shot request
/// (classify, generate images, deferred responses) uses them.
pub(crate) struct Credentials {
    provider: Arc<Provider>,
    http_client: Option<HttpClientHandle>,
    #[cfg(feature = "http")]
    authenticator: Option<Arc<crate::auth::Authenticator>>,
}

impl Credentials {
    /// The provider.
    pub(crate) fn provider(&self) -> &Arc<Provider> {
        &self.provider
    }

    /// `options` with the provider's key (stored credential first, as for a stream, without the
    /// retry after a 401) and client filled in: the reference's `applyAuth`. `Err` when the
    /// provider is not configured.
    pub(crate) async fn apply(&self, model: &Model, mut options: StreamOptions) -> Result<StreamOptions, String> {
        let provider = &self.provider;
        if options.http_client.is_none() {
            options.http_client = self.http_client.clone();
        }
        #[cfg(feature = "http")]
        if options.api_key.is_none() && !matches!(provider.auth, Auth::None | Auth::ApiKey(_)) {
            if let Some(authenticator) = &self.authenticator {
                let mut model = model.clone();
                let stored =
                    crate::auth::request::apply_stored(authenticator, &provider.id, &mut model, &mut options).await?;
                if matches!(stored, crate::auth::request::Stored::Applied(_)) {
                    return Ok(options);
                }
            }
        }
        if options.api_key.is_none() {
            options.api_key = provider.resolve_key(model, &options).await.map_err(|e| e.to_string())?;
            if options.api_key.is_none() && matches!(provider.auth, Auth::Env(_)) {
                return Err(format!("Provider is not configured: {}", model.provider));
            }
        }
        Ok(options)
    }
}

/// A request to `provider` with its stored credential (see [`crate::auth::request`]), else its
/// own key source.
#[cfg(feature = "http")]
async fn stream_authorized(
    authenticator: Arc<crate::auth::Authenticator>,
    provider: Arc<Provider>,
    adapter: Arc<dyn StreamFn>,
    mut model: Model,
    context: TranscriptContext,
    mut options: StreamOptions,
) -> AssistantMessageEventStream {
    use crate::auth::request::{apply_stored, stream_retrying, Retry, Stored};
    let unauthorized = (model.clone(), options.clone());
    match apply_stored(&authenticator, &provider.id, &mut model, &mut options).await {
        Ok(Stored::Applied(Some(rejected))) => {
            let retry = Retry { authenticator, provider_id: provider.id.clone(), rejected, unauthorized };
            stream_retrying(adapter, model, context, options, retry)
        }
        Ok(Stored::Applied(None)) => adapter.stream(&model, context, options),
        Ok(Stored::Absent | Stored::EnvOnly) => match provider.resolve_key(&model, &options).await {
            Ok(key) => {
                options.api_key = key;
                adapter.stream(&model, context, options)
            }
            Err(error) => failed_stream(&model, error.to_string()),
        },
        Err(error) => failed_stream(&model, error),
    }
}

impl StreamFn for Models {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        self.stream_transcript(model, context, options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::StopReason;

    #[test]
    fn key_is_redacted() {
        let provider = Provider::new("p").with_auth(Auth::ApiKey("sk-secret-123".into()));
        let text = format!("{provider:?}");
        assert!(!text.contains("sk-secret"), "{text}");
    }

    #[test]
    fn unknown_provider_is_an_error_event() {
        let models = Models::new();
        let model = Model::new("m").with_api("openai-completions").with_provider("nowhere");
        let message =
            futures::executor::block_on(models.complete(&model, Context::default(), StreamOptions::default()));
        let message = message.unwrap_or_default();
        assert_eq!(message.stop_reason, StopReason::Error);
        assert_eq!(message.error_message.as_deref(), Some("Unknown provider: nowhere"));
    }
}
